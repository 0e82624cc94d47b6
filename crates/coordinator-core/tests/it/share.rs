//! Kafka's share groups (KIP-932) in the core: the group kind and ShareGroupHeartbeat, one
//! test per rule. Time is a `ManualClock`; timers run when a test calls `handle_timeout`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::{tp, ModuloAssignor, Topics};
use coordinator_core::{
    CommitAuthority, ConsumerGroupHeartbeatRequest, Coordinator, ErrorCode, GroupKind, GroupState,
    ManualClock, OffsetAndMetadata, OffsetCommitRequest, ShareGroupHeartbeatRequest as Req,
    ShareGroupHeartbeatResponse, ShareGroupState, TopicPartition,
};

const G: &str = "sg";
const SESSION: u64 = 45_000;

struct H {
    c: Arc<Coordinator>,
    clock: ManualClock,
}

fn harness() -> H {
    harness_max(200)
}

fn harness_max(max: u32) -> H {
    let clock = ManualClock::new();
    let topics = Topics::with(&[("orders", 4), ("payments", 2)]);
    let store = Arc::new(common::MapStore::keeping_groups());
    let c = Coordinator::builder(store, topics, ModuloAssignor::named("chapter"))
        .clock(Arc::new(clock.clone()))
        .consumer_assignor(ModuloAssignor::named("range"))
        .share_max_size(max)
        .build()
        .unwrap();
    H {
        c: Arc::new(c),
        clock,
    }
}

impl H {
    async fn join(&self, member: &str, topics: &[&str]) -> ShareGroupHeartbeatResponse {
        self.c
            .share()
            .heartbeat(&Req::join(G, member, topics.iter().copied()))
            .await
            .unwrap()
    }

    async fn beat(&self, member: &str, epoch: i32) -> ShareGroupHeartbeatResponse {
        self.c
            .share()
            .heartbeat(&Req::heartbeat(G, member, epoch))
            .await
            .unwrap()
    }

    async fn beat_err(&self, req: &Req) -> ErrorCode {
        self.c
            .share()
            .heartbeat(req)
            .await
            .unwrap_err()
            .error_code()
    }
}

fn set(v: &[TopicPartition]) -> BTreeSet<TopicPartition> {
    v.iter().cloned().collect()
}

#[tokio::test]
async fn members_split_the_partitions_and_take_their_assignment_at_once() {
    let h = harness();
    let a = h.join("a", &["orders"]).await;
    assert_eq!(a.member_epoch, 1, "the group epoch after the first join");
    assert_eq!(a.heartbeat_interval_ms, 5_000, "Kafka's default");
    assert_eq!(set(&a.assignment.unwrap()).len(), 4, "all four, alone");
    let b = h.join("b", &["orders"]).await;
    assert_eq!(b.member_epoch, 2);
    let b_parts = set(&b.assignment.unwrap());
    assert_eq!(b_parts.len(), 2);
    // a takes its new target at its next heartbeat, with the new epoch: no revocation step.
    let a2 = h.beat("a", 1).await;
    assert_eq!(a2.member_epoch, 2);
    let a_parts = set(&a2.assignment.expect("changed: sent"));
    assert_eq!(a_parts.len(), 2);
    assert!(a_parts.is_disjoint(&b_parts), "{a_parts:?} {b_parts:?}");
    // Nothing changed since: no assignment in the answer (Kafka's null).
    assert_eq!(h.beat("a", 2).await.assignment, None);
    let d = h.c.share().describe(G).await.unwrap();
    assert_eq!(d.state, ShareGroupState::Stable);
    assert_eq!((d.group_epoch, d.assignment_epoch), (2, 2));
    assert_eq!(d.assignor_name, "simple");
    assert_eq!(d.members.len(), 2);
    assert_eq!(d.members[0].subscribed_topic_names, ["orders"]);
}

#[tokio::test]
async fn more_members_than_partitions_share_the_partitions() {
    let h = harness();
    let mut epochs = Vec::new();
    for m in ["a", "b", "c"] {
        epochs.push((m, h.join(m, &["payments"]).await.member_epoch));
    }
    let mut seen = BTreeSet::new();
    for (m, epoch) in epochs {
        let r = h.beat(m, epoch).await;
        assert_eq!(r.member_epoch, 3, "{m} moves to the group epoch");
        let d = h.c.share().describe(G).await.unwrap();
        let mine = d.members.iter().find(|x| x.member_id == m).unwrap();
        assert_eq!(mine.assignment.len(), 1, "{m}: {r:?}");
        seen.extend(mine.assignment.iter().cloned());
    }
    assert_eq!(
        seen,
        [tp("payments", 0), tp("payments", 1)].into(),
        "every partition has a member"
    );
}

#[tokio::test]
async fn kafkas_validation_refuses_bad_heartbeats_with_its_messages() {
    let h = harness();
    let cases = [
        (Req::join("", "a", ["orders"]), "GroupId can't be empty."),
        (Req::join(G, "", ["orders"]), "MemberId can't be empty."),
        (
            Req::join(G, "a", Vec::<String>::new()),
            "SubscribedTopicNames must be set in first request.",
        ),
        (Req::heartbeat(G, "a", -2), "MemberEpoch is invalid."),
    ];
    for (req, message) in cases {
        let e = h.c.share().heartbeat(&req).await.unwrap_err();
        assert_eq!(e.error_code(), ErrorCode::InvalidRequest, "{req:?}");
        assert_eq!(e.to_string(), message);
    }
    let mut no_topics = Req::join(G, "a", ["orders"]);
    no_topics.subscribed_topic_names = None;
    assert_eq!(h.beat_err(&no_topics).await, ErrorCode::InvalidRequest);
}

#[tokio::test]
async fn epochs_fence_a_member_and_the_previous_epoch_is_accepted() {
    let h = harness();
    h.join("a", &["orders"]).await;
    h.join("b", &["orders"]).await;
    assert_eq!(
        h.beat_err(&Req::heartbeat(G, "a", 9)).await,
        ErrorCode::FencedMemberEpoch,
        "ahead of the coordinator"
    );
    assert_eq!(h.beat("a", 1).await.member_epoch, 2);
    // Epoch 1 is a's previous epoch: the answer that moved it may have been lost.
    assert_eq!(h.beat("a", 1).await.member_epoch, 2);
    h.join("c", &["orders"]).await;
    assert_eq!(h.beat("a", 2).await.member_epoch, 3);
    assert_eq!(
        h.beat_err(&Req::heartbeat(G, "a", 1)).await,
        ErrorCode::FencedMemberEpoch,
        "two epochs behind"
    );
    assert_eq!(
        h.beat_err(&Req::heartbeat(G, "nobody", 3)).await,
        ErrorCode::UnknownMember
    );
    assert_eq!(
        h.beat_err(&Req::heartbeat("no-such-group", "a", 1)).await,
        ErrorCode::GroupIdNotFound
    );
}

#[tokio::test]
async fn a_member_that_leaves_gives_its_partitions_to_the_others() {
    let h = harness();
    h.join("a", &["orders"]).await;
    h.join("b", &["orders"]).await;
    h.beat("a", 1).await;
    let left = h.beat("b", -1).await;
    assert_eq!(left.member_epoch, -1);
    let a = h.beat("a", 2).await;
    assert_eq!(a.member_epoch, 3);
    assert_eq!(set(&a.assignment.unwrap()).len(), 4);
    assert_eq!(
        h.beat_err(&Req::heartbeat(G, "b", -1)).await,
        ErrorCode::UnknownMember,
        "b is gone"
    );
}

#[tokio::test]
async fn a_session_expires_on_the_coordinators_clock() {
    let h = harness();
    h.join("a", &["orders"]).await;
    h.join("b", &["orders"]).await;
    h.clock.advance(SESSION - 1);
    h.beat("a", 1).await;
    assert!(h.c.handle_timeout().await.is_empty());
    h.clock.advance(1);
    let expired = h.c.handle_timeout().await;
    assert_eq!(expired.len(), 1);
    assert_eq!(
        (expired[0].group.as_str(), expired[0].member.as_str()),
        (G, "b")
    );
    let a = h.beat("a", 2).await;
    assert_eq!(
        set(&a.assignment.unwrap()).len(),
        4,
        "b's partitions came to a"
    );
    h.clock.advance(SESSION);
    assert_eq!(h.c.handle_timeout().await.len(), 1);
    assert_eq!(
        h.c.share().describe(G).await.unwrap().state,
        ShareGroupState::Empty
    );
}

#[tokio::test]
async fn a_group_id_of_another_kind_is_not_a_share_group_and_back() {
    let h = harness();
    // A consumer-protocol group holds "c": a share member is refused, and the other way.
    h.c.consumer()
        .heartbeat(&ConsumerGroupHeartbeatRequest::join("c", "m", ["orders"]))
        .await
        .unwrap();
    let e =
        h.c.share()
            .heartbeat(&Req::join("c", "a", ["orders"]))
            .await
            .unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::GroupIdNotFound);
    assert!(e.to_string().contains("is not a share group"), "{e}");
    h.join("a", &["orders"]).await;
    h.beat("a", -1).await;
    // Even Empty, the share group keeps its id from the consumer protocol.
    let e =
        h.c.consumer()
            .heartbeat(&ConsumerGroupHeartbeatRequest::join(G, "m", ["orders"]))
            .await
            .unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::GroupIdNotFound, "{e}");
    // A group known by its committed offsets only is not a share group either.
    let commit = |group: &str| OffsetCommitRequest {
        group_id: group.into(),
        authority: CommitAuthority::Plain,
        offsets: [(tp("orders", 0), OffsetAndMetadata::new(5))].into(),
    };
    h.c.offsets().commit(&commit("simple")).await.unwrap();
    let e =
        h.c.share()
            .heartbeat(&Req::join("simple", "a", ["orders"]))
            .await
            .unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::GroupIdNotFound);
    // And a share group has no committed offsets.
    let e = h.c.offsets().commit(&commit(G)).await.unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::GroupIdNotFound, "{e}");
}

#[tokio::test]
async fn a_full_share_group_refuses_a_new_member() {
    let h = harness_max(2);
    h.join("a", &["orders"]).await;
    h.join("b", &["orders"]).await;
    assert_eq!(
        h.beat_err(&Req::join(G, "c", ["orders"])).await,
        ErrorCode::GroupMaxSizeReached
    );
    // A member already in rejoins.
    assert!(h
        .c
        .share()
        .heartbeat(&Req::join(G, "a", ["orders"]))
        .await
        .is_ok());
}

#[tokio::test]
async fn share_groups_are_listed_with_their_kind_and_protocol_type() {
    let h = harness();
    h.join("a", &["orders"]).await;
    let listed = h.c.list_groups().await;
    let g = listed.iter().find(|g| g.group_id == G).unwrap();
    assert_eq!(
        (g.kind, g.protocol_type.as_str()),
        (GroupKind::Share, "share")
    );
    assert_eq!(g.state, GroupState::Stable);
}
