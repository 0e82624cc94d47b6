//! Kafka's consumer group protocol (KIP-848) in the core: one test per rule, named after it.
//! Time is a `ManualClock`; timers run when a test calls `handle_timeout`. No sleeps.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::sync::Arc;

use common::{tp, ModuloAssignor, StoreOp, TestStore, Topics};
use coordinator_core::{
    named, CommitAuthority, ConsumerGroupHeartbeatRequest as Req, ConsumerGroupHeartbeatResponse,
    ConsumerGroupState, Coordinator, CoordinatorBuilder, ErrorCode, GroupConfig, GroupConfigError,
    GroupKind, GroupState, ManualClock, MemberState, OffsetAndMetadata, OffsetCommitRequest,
    ShareAutoOffsetReset, ShareIsolationLevel, TopicPartition,
};

const G: &str = "g";
const SESSION: u64 = 45_000;

struct H {
    c: Arc<Coordinator>,
    clock: ManualClock,
    topics: Arc<Topics>,
    store: Arc<TestStore>,
}

fn harness() -> H {
    harness_with(|b| b)
}

fn harness_with(configure: impl FnOnce(CoordinatorBuilder) -> CoordinatorBuilder) -> H {
    let clock = ManualClock::new();
    let topics = Topics::with(&[("orders", 4), ("payments", 2)]);
    // A store that keeps group records, as the broker's do: what a heartbeat changes is
    // stored before it is answered.
    let store = Arc::new(TestStore::new(common::MapStore::keeping_groups()));
    let builder = Coordinator::builder(
        store.clone(),
        topics.clone(),
        ModuloAssignor::named("chapter"),
    )
    .clock(Arc::new(clock.clone()))
    .consumer_assignor(named("uniform", ModuloAssignor::named("modulo")))
    .consumer_assignor(ModuloAssignor::named("range"));
    let c = Arc::new(configure(builder).build().unwrap());
    H {
        c,
        clock,
        topics,
        store,
    }
}

fn sorted(mut v: Vec<TopicPartition>) -> Vec<TopicPartition> {
    v.sort();
    v
}

impl H {
    async fn hb(
        &self,
        req: &Req,
    ) -> Result<ConsumerGroupHeartbeatResponse, coordinator_core::Error> {
        self.c.consumer().heartbeat(req).await
    }

    async fn join(&self, member: &str, topics: &[&str]) -> ConsumerGroupHeartbeatResponse {
        self.hb(&Req::join(G, member, topics.iter().copied()))
            .await
            .unwrap()
    }

    /// A heartbeat of `member` at `epoch` reporting `owned`.
    async fn beat(
        &self,
        member: &str,
        epoch: i32,
        owned: &[TopicPartition],
    ) -> ConsumerGroupHeartbeatResponse {
        self.hb(&Req::heartbeat(G, member, epoch).owning(owned.iter().cloned()))
            .await
            .unwrap()
    }

    /// Runs the timers; the members they removed.
    async fn expire(&self) -> Vec<String> {
        let expired = self.c.handle_timeout().await;
        expired.into_iter().map(|e| e.member).collect()
    }

    fn err(e: coordinator_core::Error) -> (ErrorCode, String) {
        (e.error_code(), e.to_string())
    }

    async fn member(&self, member: &str) -> coordinator_core::ConsumerMemberDescription {
        let d = self.c.consumer().describe(G).await.unwrap();
        d.members
            .into_iter()
            .find(|m| m.member_id == member)
            .unwrap()
    }
}

/// Members heartbeat, each reporting what its last answer gave it, until all are Stable.
async fn settle(h: &H, members: &mut [(String, i32, Vec<TopicPartition>)]) {
    for _ in 0..10 {
        for (id, epoch, owned) in members.iter_mut() {
            let r = h.beat(id, *epoch, owned).await;
            *epoch = r.member_epoch;
            if let Some(a) = r.assignment {
                *owned = a;
            }
        }
        let d = h.c.consumer().describe(G).await.unwrap();
        if d.state == ConsumerGroupState::Stable {
            return;
        }
    }
    panic!("the group did not settle");
}

#[tokio::test]
async fn a_first_heartbeat_joins_bumps_the_group_epoch_and_gets_the_whole_target() {
    let h = harness();
    let r = h.join("m1", &["orders"]).await;
    assert_eq!(r.member_id, "m1");
    assert_eq!(r.member_epoch, 1);
    assert_eq!(r.heartbeat_interval_ms, 5_000);
    assert_eq!(
        r.assignment.unwrap(),
        (0..4).map(|p| tp("orders", p)).collect::<Vec<_>>()
    );
    let d = h.c.consumer().describe(G).await.unwrap();
    assert_eq!((d.group_epoch, d.assignment_epoch), (1, 1));
    assert_eq!(d.state, ConsumerGroupState::Stable);
    assert_eq!(d.assignor_name, "uniform");
    assert_eq!(h.c.state(G).await.ok(), None, "not a chapter group");
    let listed = h.c.list_groups().await;
    assert_eq!(listed[0].kind, GroupKind::Consumer);
    assert_eq!(listed[0].protocol_type, "consumer");
    assert_eq!(listed[0].state, GroupState::Stable);
}

#[tokio::test]
async fn a_v0_join_without_member_id_gets_one_from_the_coordinator() {
    let h = harness();
    let r = h.join("", &["orders"]).await;
    assert!(!r.member_id.is_empty());
    assert_eq!(h.member(&r.member_id).await.member_epoch, 1);
}

#[tokio::test]
async fn a_member_revokes_before_its_partition_reaches_the_new_owner() {
    let h = harness();
    let a = h.join("a", &["orders"]).await.assignment.unwrap();
    // b joins: the target splits orders between a (0, 2) and b (1, 3).
    let b = h.join("b", &["orders"]).await;
    assert_eq!(b.member_epoch, 2);
    assert_eq!(
        b.assignment.unwrap(),
        Vec::<TopicPartition>::new(),
        "1 and 3 are a's still"
    );
    assert_eq!(h.member("b").await.state, MemberState::UnreleasedPartitions);
    // a still owns everything: it must revoke 1 and 3 first, and stays at epoch 1.
    let r = h.beat("a", 1, &a).await;
    assert_eq!(r.member_epoch, 1);
    assert_eq!(
        r.assignment.unwrap(),
        vec![tp("orders", 0), tp("orders", 2)]
    );
    let ma = h.member("a").await;
    assert_eq!(ma.state, MemberState::UnrevokedPartitions);
    assert_eq!(
        ma.partitions_pending_revocation,
        vec![tp("orders", 1), tp("orders", 3)]
    );
    // b still waits while a reports 1 and 3.
    let r = h.beat("b", 2, &[]).await;
    assert_eq!(r.assignment, None);
    // a reports it revoked them: a moves to epoch 2, and then b gets them.
    let r = h.beat("a", 1, &[tp("orders", 0), tp("orders", 2)]).await;
    assert_eq!(r.member_epoch, 2);
    assert_eq!(h.member("a").await.state, MemberState::Stable);
    let r = h.beat("b", 2, &[]).await;
    assert_eq!(
        r.assignment.unwrap(),
        vec![tp("orders", 1), tp("orders", 3)]
    );
    let d = h.c.consumer().describe(G).await.unwrap();
    assert_eq!(d.state, ConsumerGroupState::Stable);
}

#[tokio::test]
async fn a_member_that_no_longer_owns_what_it_must_revoke_moves_on_at_once() {
    let h = harness();
    h.join("a", &["orders"]).await;
    h.join("b", &["orders"]).await;
    // a already gave up 1 and 3 (say, by an eager callback): no UNREVOKED step.
    let r = h.beat("a", 1, &[tp("orders", 0), tp("orders", 2)]).await;
    assert_eq!(r.member_epoch, 2);
    assert_eq!(h.member("a").await.state, MemberState::Stable);
}

#[tokio::test]
async fn a_heartbeat_with_a_greater_epoch_is_fenced_member_epoch() {
    let h = harness();
    h.join("a", &["orders"]).await;
    let e = h.hb(&Req::heartbeat(G, "a", 5)).await.unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::FencedMemberEpoch);
    assert_eq!(e.kafka_code(), Some(110));
    assert!(e.to_string().contains("greater member epoch (5)"), "{e}");
}

#[tokio::test]
async fn a_heartbeat_with_a_smaller_epoch_is_fenced_unless_it_is_a_lost_response() {
    let h = harness();
    let a = h.join("a", &["orders"]).await.assignment.unwrap();
    h.join("b", &["orders"]).await;
    h.beat("a", 1, &a).await; // revoking, still epoch 1
    let r = h.beat("a", 1, &[tp("orders", 0), tp("orders", 2)]).await;
    assert_eq!(r.member_epoch, 2);
    // Epoch 0 is not a's previous epoch (1): fenced.
    let e = h.hb(&Req::join(G, "a", ["orders"])).await.unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::FencedMemberEpoch);
    assert!(e.to_string().contains("smaller member epoch (0)"), "{e}");
    // The previous epoch, but owning more than its assignment: fenced.
    let e = h
        .hb(&Req::heartbeat(G, "a", 1).owning([tp("orders", 1)]))
        .await
        .unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::FencedMemberEpoch);
    // The previous epoch without owned partitions: fenced (Kafka cannot tell it is a subset).
    let e = h.hb(&Req::heartbeat(G, "a", 1)).await.unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::FencedMemberEpoch);
}

#[tokio::test]
async fn a_lost_response_previous_epoch_with_owned_a_subset_is_accepted() {
    let h = harness();
    h.join("a", &["orders"]).await;
    h.join("b", &["orders"]).await;
    // a's answer moving it to epoch 2 is lost: it heartbeats again with epoch 1.
    h.beat("a", 1, &[tp("orders", 0), tp("orders", 2)]).await;
    let r = h.beat("a", 1, &[tp("orders", 0)]).await;
    assert_eq!(r.member_epoch, 2);
}

#[tokio::test]
async fn a_leave_with_epoch_minus_one_gives_the_partitions_up_at_once() {
    let h = harness();
    let mut members = vec![
        (
            "a".to_string(),
            h.join("a", &["orders"]).await.member_epoch,
            Vec::new(),
        ),
        (
            "b".to_string(),
            h.join("b", &["orders"]).await.member_epoch,
            Vec::new(),
        ),
    ];
    settle(&h, &mut members).await;
    let r = h.hb(&Req::heartbeat(G, "b", -1)).await.unwrap();
    assert_eq!(r.member_epoch, -1);
    let d = h.c.consumer().describe(G).await.unwrap();
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.state, ConsumerGroupState::Assigning);
    // a's next heartbeat gets b's partitions: nobody holds them any more.
    let r = h.beat("a", members[0].1, &members[0].2).await;
    assert_eq!(r.assignment.unwrap().len(), 4);
}

#[tokio::test]
async fn a_static_leave_with_minus_two_keeps_the_assignment_until_the_session_expires() {
    let h = harness();
    let s = h
        .hb(&Req::join(G, "s1", ["orders"]).with_instance_id("i"))
        .await
        .unwrap();
    let r = h
        .hb(&Req::heartbeat(G, "s1", -2).with_instance_id("i"))
        .await
        .unwrap();
    assert_eq!(r.member_epoch, -2);
    let m = h.member("s1").await;
    assert_eq!(m.member_epoch, -2);
    assert_eq!(m.assignment, s.assignment.unwrap(), "kept");
    // Another member cannot have them meanwhile.
    let b = h.join("b", &["orders"]).await;
    assert!(b
        .assignment
        .unwrap()
        .iter()
        .all(|p| !m.assignment.contains(p)));
    h.clock.advance(SESSION);
    h.hb(&Req::heartbeat(G, "b", b.member_epoch)).await.unwrap();
    let expired = h.c.handle_timeout().await;
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].member, "s1");
}

#[tokio::test]
async fn a_restarted_static_member_takes_its_assignment_back() {
    let h = harness();
    h.hb(&Req::join(G, "s1", ["orders"]).with_instance_id("i"))
        .await
        .unwrap();
    let b = h.join("b", &["orders"]).await;
    let mut members = vec![
        ("s1".to_string(), 1, Vec::new()),
        ("b".to_string(), b.member_epoch, Vec::new()),
    ];
    settle(&h, &mut members).await;
    let before = h.c.consumer().describe(G).await.unwrap().group_epoch;
    h.hb(&Req::heartbeat(G, "s1", -2).with_instance_id("i"))
        .await
        .unwrap();
    let r = h
        .hb(&Req::join(G, "s2", ["orders"]).with_instance_id("i"))
        .await
        .unwrap();
    assert_eq!(r.member_id, "s2");
    assert_eq!(sorted(r.assignment.unwrap()), sorted(members[0].2.clone()));
    let d = h.c.consumer().describe(G).await.unwrap();
    assert_eq!(d.group_epoch, before, "no new epoch: b revokes nothing");
    assert!(d.members.iter().all(|m| m.member_id != "s1"));
    assert_eq!(h.member("b").await.state, MemberState::Stable);
}

#[tokio::test]
async fn an_instance_id_held_by_an_active_member_is_unreleased_instance_id() {
    let h = harness();
    h.hb(&Req::join(G, "s1", ["orders"]).with_instance_id("i"))
        .await
        .unwrap();
    let e = h
        .hb(&Req::join(G, "s2", ["orders"]).with_instance_id("i"))
        .await
        .unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::UnreleasedInstanceId);
    assert_eq!(e.kafka_code(), Some(111));
}

#[tokio::test]
async fn another_member_id_for_a_known_instance_is_fenced_instance_id() {
    let h = harness();
    h.hb(&Req::join(G, "s1", ["orders"]).with_instance_id("i"))
        .await
        .unwrap();
    let e = h
        .hb(&Req::heartbeat(G, "s2", 1).with_instance_id("i"))
        .await
        .unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::FencedInstanceId);
    let e = h
        .hb(&Req::heartbeat(G, "s1", 1).with_instance_id("other"))
        .await
        .unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::UnknownMember, "unknown instance");
}

#[tokio::test]
async fn an_unknown_member_or_group_is_refused() {
    let h = harness();
    let e = h.hb(&Req::heartbeat(G, "x", 1)).await.unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::GroupIdNotFound);
    h.join("a", &["orders"]).await;
    let e = h.hb(&Req::heartbeat(G, "x", 1)).await.unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::UnknownMember);
    let e = h.hb(&Req::heartbeat(G, "x", -1)).await.unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::UnknownMember);
}

#[tokio::test]
async fn invalid_requests_are_refused_with_kafkas_messages() {
    let h = harness();
    let join = || Req::join(G, "m", ["orders"]);
    let cases: Vec<(Req, &str)> = vec![
        (Req::heartbeat(G, "", 1), "MemberId can't be empty."),
        (Req::heartbeat("", "m", 1), "GroupId can't be empty."),
        (join().with_instance_id(" "), "InstanceId can't be empty."),
        (
            Req {
                rebalance_timeout_ms: -1,
                ..join()
            },
            "RebalanceTimeoutMs must be provided in first request.",
        ),
        (
            join().owning([tp("orders", 0)]),
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            Req {
                subscribed_topic_names: None,
                ..join()
            },
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
        ),
        (Req::heartbeat(G, "m", -2), "InstanceId can't be null."),
        (Req::heartbeat(G, "m", -3), "MemberEpoch is invalid."),
    ];
    for (req, message) in cases {
        let e = h.hb(&req).await.unwrap_err();
        assert_eq!(H::err(e), (ErrorCode::InvalidRequest, message.to_string()));
    }
    assert!(h.c.list_groups().await.is_empty(), "nothing was created");
}

#[tokio::test]
async fn an_unknown_server_assignor_is_unsupported_assignor() {
    let h = harness();
    let e = h
        .hb(&Req::join(G, "m", ["orders"]).with_assignor("sticky"))
        .await
        .unwrap_err();
    assert_eq!(e.kafka_code(), Some(112));
    assert_eq!(
        e.to_string(),
        "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    );
}

#[tokio::test]
async fn the_assignor_most_members_name_is_used_else_the_first_registered() {
    let h = harness();
    h.join("a", &["orders"]).await;
    assert_eq!(
        h.c.consumer().describe(G).await.unwrap().assignor_name,
        "uniform"
    );
    h.hb(&Req::join(G, "b", ["orders"]).with_assignor("range"))
        .await
        .unwrap();
    assert_eq!(
        h.c.consumer().describe(G).await.unwrap().assignor_name,
        "range"
    );
    assert_eq!(h.c.consumer_assignors(), ["uniform", "range"]);
}

#[tokio::test]
async fn a_full_group_is_group_max_size_reached() {
    let h = harness_with(|b| b.consumer_max_size(1));
    h.join("a", &["orders"]).await;
    let e = h.hb(&Req::join(G, "b", ["orders"])).await.unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::GroupMaxSizeReached);
    h.hb(&Req::heartbeat(G, "a", 1)).await.unwrap();
}

#[tokio::test]
async fn a_subscribed_topics_new_partition_count_bumps_the_group_epoch() {
    let h = harness();
    h.join("a", &["orders"]).await;
    let r = h.hb(&Req::heartbeat(G, "a", 1)).await.unwrap();
    assert_eq!((r.member_epoch, r.assignment), (1, None));
    h.topics.set("orders", 6);
    let r = h.hb(&Req::heartbeat(G, "a", 1)).await.unwrap();
    assert_eq!(r.member_epoch, 2);
    assert_eq!(r.assignment.unwrap().len(), 6);
    // A topic the group does not subscribe to changes nothing.
    h.topics.set("payments", 9);
    assert_eq!(
        h.hb(&Req::heartbeat(G, "a", 2)).await.unwrap().member_epoch,
        2
    );
}

#[tokio::test]
async fn a_new_subscription_bumps_the_group_epoch() {
    let h = harness();
    h.join("a", &["orders"]).await;
    let r = h
        .hb(&Req {
            subscribed_topic_names: Some(vec!["orders".into(), "payments".into()]),
            ..Req::heartbeat(G, "a", 1)
        })
        .await
        .unwrap();
    assert_eq!(r.member_epoch, 2);
    assert_eq!(r.assignment.unwrap().len(), 6);
}

#[tokio::test]
async fn a_member_whose_session_expires_is_removed_and_the_epoch_bumped() {
    let h = harness();
    h.join("a", &["orders"]).await;
    h.join("b", &["orders"]).await;
    h.clock.advance(SESSION - 1);
    h.hb(&Req::heartbeat(G, "b", 2)).await.unwrap();
    assert!(h.expire().await.is_empty());
    h.clock.advance(1);
    assert_eq!(h.expire().await, ["a"]);
    let d = h.c.consumer().describe(G).await.unwrap();
    assert_eq!(d.group_epoch, 3);
}

#[tokio::test]
async fn a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() {
    let h = harness();
    let a = h
        .hb(&Req {
            rebalance_timeout_ms: 1_000,
            ..Req::join(G, "a", ["orders"])
        })
        .await
        .unwrap()
        .assignment
        .unwrap();
    h.join("b", &["orders"]).await;
    h.beat("a", 1, &a).await; // must revoke 1 and 3 within 1 s
    h.clock.advance(999);
    h.beat("a", 1, &a).await; // still owns them: no new deadline
    h.hb(&Req::heartbeat(G, "b", 2)).await.unwrap();
    assert!(h.expire().await.is_empty());
    h.clock.advance(1);
    assert_eq!(h.expire().await, ["a"]);
    let r = h.hb(&Req::heartbeat(G, "b", 2)).await.unwrap();
    assert_eq!(r.assignment.unwrap().len(), 4);
}

fn commit(member: &str, epoch: i32) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: G.into(),
        authority: CommitAuthority::MemberEpoch {
            member_id: member.into(),
            member_epoch: epoch,
        },
        offsets: [(tp("orders", 0), OffsetAndMetadata::new(5))].into(),
    }
}

#[tokio::test]
async fn a_commit_with_a_stale_member_epoch_is_stale_member_epoch() {
    let h = harness();
    h.join("a", &["orders"]).await;
    h.c.offsets().commit(&commit("a", 1)).await.unwrap();
    let e = h.c.offsets().commit(&commit("a", 0)).await.unwrap_err();
    assert_eq!(e.kafka_code(), Some(113));
    assert_eq!(
        e.to_string(),
        "The received member epoch 0 does not match the expected member epoch 1."
    );
    let e = h.c.offsets().commit(&commit("x", 1)).await.unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::UnknownMember);
    let e =
        h.c.offsets()
            .fetch(
                G,
                &CommitAuthority::MemberEpoch {
                    member_id: "a".into(),
                    member_epoch: 7,
                },
            )
            .await
            .unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::StaleMemberEpoch);
}

#[tokio::test]
async fn plain_commits_are_accepted_only_while_the_group_is_empty() {
    let h = harness();
    h.join("a", &["orders"]).await;
    let plain = OffsetCommitRequest {
        authority: CommitAuthority::Plain,
        ..commit("", -1)
    };
    let e = h.c.offsets().commit(&plain).await.unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::UnknownMember);
    h.hb(&Req::heartbeat(G, "a", -1)).await.unwrap();
    h.c.offsets().commit(&plain).await.unwrap();
    h.c.offsets().commit(&commit("", -1)).await.unwrap();
}

#[tokio::test]
async fn a_classic_generation_commit_of_a_member_is_unsupported_version() {
    let h = harness();
    h.join("a", &["orders"]).await;
    let classic = OffsetCommitRequest {
        authority: CommitAuthority::generation(
            Some(coordinator_core::Generation::new(1)),
            "a",
            None,
        ),
        ..commit("a", 1)
    };
    let e = h.c.offsets().commit(&classic).await.unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::UnsupportedVersion);
    assert_eq!(e.kafka_code(), Some(35));
}

#[tokio::test]
async fn the_group_record_carries_epochs_subscriptions_and_both_assignments() {
    let h = harness();
    h.join("a", &["orders"]).await;
    h.join("b", &["orders"]).await;
    let r = h.c.group_record(G).unwrap();
    assert_eq!(r.kind, GroupKind::Consumer);
    assert_eq!(r.generation.get(), 2);
    assert_eq!(r.protocol.as_deref(), Some("uniform"));
    let a = r.members[0].consumer.as_ref().unwrap();
    assert_eq!(a.member_epoch, 1);
    assert_eq!(a.subscribed_topic_names, ["orders"]);
    assert_eq!(a.target_assignment, vec![tp("orders", 0), tp("orders", 2)]);
    assert_eq!(r.members[0].partitions.len(), 4, "current: not revoked yet");
    assert_eq!(a.target_assignment_epoch, 2);
}

#[tokio::test]
async fn a_consumer_heartbeat_for_a_group_of_another_kind_is_group_id_not_found() {
    let h = harness();
    h.c.join(G, "chapter-member", &["orders"]).await.unwrap();
    let e = h.hb(&Req::join(G, "m", ["orders"])).await.unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::GroupIdNotFound);
    let e = h.c.consumer().describe(G).await.unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::GroupIdNotFound);
}

#[tokio::test]
async fn an_assignor_that_fails_changes_nothing() {
    struct Failing;
    impl coordinator_core::Assignor for Failing {
        fn name(&self) -> &str {
            "uniform"
        }
        fn assign(
            &self,
            _: &coordinator_core::AssignmentInput<'_>,
        ) -> Result<coordinator_core::Assignment, coordinator_core::AssignError> {
            Err(coordinator_core::AssignError::new("no"))
        }
    }
    let clock = ManualClock::new();
    let c = Coordinator::builder(
        Arc::new(TestStore::default()),
        Topics::with(&[("orders", 4)]),
        ModuloAssignor::named("chapter"),
    )
    .clock(Arc::new(clock))
    .consumer_assignor(Arc::new(Failing))
    .build()
    .unwrap();
    let e = c
        .consumer()
        .heartbeat(&Req::join(G, "m", ["orders"]))
        .await
        .unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::AssignorFailed);
    assert!(c.group_record(G).is_none_or(|r| r.members.is_empty()));
}

#[test]
fn consumer_settings_have_kafkas_defaults_and_bounds() {
    let h = harness();
    let s = &h.c.config().consumer;
    assert_eq!(
        (s.session_timeout_ms, s.heartbeat_interval_ms, s.max_size),
        (45_000, 5_000, u32::MAX)
    );
    let build = |f: fn(CoordinatorBuilder) -> CoordinatorBuilder| {
        f(Coordinator::builder(
            Arc::new(TestStore::default()),
            Topics::with(&[]),
            ModuloAssignor::named("chapter"),
        ))
        .build()
    };
    assert!(build(|b| b.consumer_session_timeout_ms(44_999)).is_err());
    assert!(build(|b| b.consumer_session_timeout_ms(60_001)).is_err());
    assert!(build(|b| b.consumer_session_timeout_ms(60_000)).is_ok());
    assert!(build(|b| b.consumer_heartbeat_interval_ms(4_999)).is_err());
    assert!(build(|b| b.consumer_heartbeat_interval_ms(15_001)).is_err());
    assert!(build(|b| b.consumer_max_size(0)).is_err());
    let e = build(|b| b.consumer_heartbeat_interval_ms(16_000)).unwrap_err();
    assert!(
        e.to_string()
            .contains("group.consumer.heartbeat.interval.ms"),
        "{e}"
    );
}

#[test]
fn share_group_configs_are_parsed_bounded_and_applied_as_kafka_does() {
    let build = |f: fn(CoordinatorBuilder) -> CoordinatorBuilder| {
        f(Coordinator::builder(
            Arc::new(TestStore::default()),
            Topics::with(&[]),
            ModuloAssignor::named("chapter"),
        ))
        .build()
    };
    // The broker-wide settings are checked against their bounds.
    assert!(build(|b| b.share_delivery_count_limit(11)).is_err());
    assert!(build(|b| b
        .share_delivery_count_limit(11)
        .share_delivery_count_limit_bounds(2, 12))
    .is_ok());
    assert!(build(|b| b.share_record_lock_duration_ms(14_999)).is_err());
    assert!(build(|b| b.share_partition_max_record_locks(99)).is_err());
    let c = build(|b| b.share_record_lock_duration_ms(20_000)).unwrap();
    // A group's own text and numeric configs, applied over the broker's.
    let config = GroupConfig::default()
        .with_text("share.auto.offset.reset", Some("Earliest"))
        .and_then(|g| g.with_text("share.isolation.level", Some("read_committed")))
        .and_then(|g| g.with_text("share.delivery.count.limit", Some("3")))
        .unwrap();
    assert_eq!(
        config.text("share.auto.offset.reset").as_deref(),
        Some("earliest")
    );
    c.set_group_config("sg", config).unwrap();
    let s = c.share_settings("sg");
    assert_eq!(s.auto_offset_reset, ShareAutoOffsetReset::Earliest);
    assert_eq!(s.isolation_level, ShareIsolationLevel::ReadCommitted);
    let p = s.partition_config();
    assert_eq!(
        (p.delivery_count_limit, p.lock_duration_ms, p.max_in_flight),
        (3, 20_000, 2_000)
    );
    // Another group runs with the broker's.
    let other = c.share_settings("other");
    assert_eq!(other.auto_offset_reset, ShareAutoOffsetReset::Latest);
    assert_eq!(other.partition_config().delivery_count_limit, 5);
    // Kafka's refusals, and nothing changed by them.
    let refused = |name: &str, value: &str| {
        GroupConfig::default()
            .with_text(name, Some(value))
            .and_then(|g| c.set_group_config("sg", g))
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        refused("share.delivery.count.limit", "11"),
        "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit"
    );
    assert_eq!(
        refused("share.record.lock.duration.ms", "999"),
        "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000"
    );
    assert_eq!(
        refused("share.partition.max.record.locks", "abc"),
        "Invalid value abc for configuration share.partition.max.record.locks: Not a number of type INT"
    );
    assert_eq!(
        refused("share.nope", "1"),
        "Unknown group config name: share.nope"
    );
    assert_eq!(
        c.share_settings("sg")
            .partition_config()
            .delivery_count_limit,
        3
    );
}

#[tokio::test]
async fn describe_shows_epochs_and_current_versus_target() {
    let h = harness();
    h.join("a", &["orders"]).await;
    h.join("b", &["orders"]).await;
    let d = h.c.consumer().describe(G).await.unwrap();
    assert_eq!(d.state, ConsumerGroupState::Reconciling);
    assert_eq!(
        h.c.list_groups().await[0].state,
        GroupState::CompletingRebalance
    );
    let a = &d.members[0];
    assert_eq!((a.member_epoch, a.previous_member_epoch), (1, 0));
    assert_eq!(a.assignment.len(), 4);
    assert_eq!(a.target_assignment.len(), 2);
}

#[tokio::test]
async fn a_heartbeat_that_moves_a_member_on_waits_for_its_commit_in_flight() {
    let h = harness();
    let a = h.join("a", &["orders"]).await.assignment.unwrap();
    h.join("b", &["orders"]).await;
    h.beat("a", 1, &a).await; // revoking 1 and 3, still at epoch 1
    let hold = h.store.hold(StoreOp::Commit);
    let commit = {
        let c = h.c.clone();
        tokio::spawn(async move { c.offsets().commit(&commit("a", 1)).await })
    };
    while h.store.waiting(StoreOp::Commit) == 0 {
        tokio::task::yield_now().await;
    }
    // a revokes: this heartbeat would move it to epoch 2, so it waits for the commit.
    let revoked = {
        let c = h.c.clone();
        let req = Req::heartbeat(G, "a", 1).owning([tp("orders", 0), tp("orders", 2)]);
        tokio::spawn(async move { c.consumer().heartbeat(&req).await })
    };
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert!(
        !revoked.is_finished(),
        "the heartbeat waits for the commit in flight"
    );
    assert_eq!(h.member("a").await.member_epoch, 1);
    drop(hold);
    commit.await.unwrap().unwrap();
    assert_eq!(revoked.await.unwrap().unwrap().member_epoch, 2);
}

#[tokio::test]
async fn members_with_different_subscriptions_get_only_their_topics() {
    let h = harness();
    let a = h.join("a", &["orders"]).await;
    let b = h
        .hb(&Req::join(G, "b", ["orders", "payments"]))
        .await
        .unwrap();
    assert!(b
        .assignment
        .unwrap()
        .iter()
        .all(|p| p.topic() == "payments" || !a.assignment.as_ref().unwrap().contains(p)));
    let d = h.c.consumer().describe(G).await.unwrap();
    let ma = d.members.iter().find(|m| m.member_id == "a").unwrap();
    assert!(ma.target_assignment.iter().all(|p| p.topic() == "orders"));
    let mb = d.members.iter().find(|m| m.member_id == "b").unwrap();
    assert_eq!(
        mb.target_assignment
            .iter()
            .filter(|p| p.topic() == "payments")
            .count(),
        2,
        "only b subscribes to payments"
    );
}

#[tokio::test]
async fn the_group_epoch_continues_from_the_group_ids_generation() {
    let h = harness();
    // A chapter group lives and empties under this id first.
    h.c.join(G, "old", &["orders"]).await.unwrap();
    h.c.join(G, "old2", &["orders"]).await.unwrap();
    h.c.leave(G, "old").await.unwrap();
    h.c.leave(G, "old2").await.unwrap();
    let before = h.c.group_record(G).unwrap().generation.get();
    let r = h.join("m", &["orders"]).await;
    assert_eq!(i64::from(r.member_epoch), before as i64 + 1);
}

#[tokio::test]
async fn the_assignment_is_sent_only_on_a_full_request_or_when_it_changed() {
    let h = harness();
    let a = h.join("a", &["orders"]).await.assignment.unwrap();
    assert_eq!(h.beat("a", 1, &a).await.assignment, None);
    let full = h
        .hb(&Req {
            rebalance_timeout_ms: 1_000,
            subscribed_topic_names: Some(vec!["orders".into()]),
            ..Req::heartbeat(G, "a", 1).owning(a.clone())
        })
        .await
        .unwrap();
    assert_eq!(full.assignment, Some(a));
}

#[tokio::test]
async fn an_empty_consumer_group_without_offsets_is_removed_after_its_grace_period() {
    let h = harness();
    h.join("a", &["orders"]).await;
    h.hb(&Req::heartbeat(G, "a", -1)).await.unwrap();
    assert_eq!(h.c.list_groups().await[0].state, GroupState::Empty);
    h.clock
        .advance(coordinator_core::DEFAULT_EMPTY_GROUP_GRACE_MS);
    h.c.handle_timeout().await;
    assert!(h.c.list_groups().await.is_empty());
    let e = h.c.consumer().describe(G).await.unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::GroupIdNotFound);
}

// ====================================================================== durable records

impl H {
    /// A second coordinator over the same store (a broker restarted on its data), loaded.
    async fn restarted(&self) -> H {
        let inner = self.store.inner().expect("the store");
        let store = Arc::new(TestStore::from_arc(inner));
        let c = Coordinator::builder(
            store.clone(),
            self.topics.clone(),
            ModuloAssignor::named("chapter"),
        )
        .clock(Arc::new(self.clock.clone()))
        .consumer_assignor(named("uniform", ModuloAssignor::named("modulo")))
        .consumer_assignor(ModuloAssignor::named("range"))
        .build()
        .unwrap();
        c.load().await.unwrap();
        H {
            c: Arc::new(c),
            clock: self.clock.clone(),
            topics: self.topics.clone(),
            store,
        }
    }
}

#[tokio::test]
async fn a_restarted_coordinator_carries_a_consumer_group_on_with_its_epochs() {
    let h = harness();
    let a = h.join("a", &["orders"]).await;
    let owned_a = sorted(a.assignment.clone().unwrap());
    let a = h.beat("a", a.member_epoch, &owned_a).await;
    let b = h.join("b", &["orders"]).await;
    // Settle: a revokes what b gets, b takes it.
    let mut ea = a.member_epoch;
    let mut eb = b.member_epoch;
    let mut owned_b = sorted(b.assignment.clone().unwrap_or_default());
    let mut owned_a = owned_a;
    for _ in 0..4 {
        let ra = h.beat("a", ea, &owned_a).await;
        ea = ra.member_epoch;
        if let Some(p) = ra.assignment {
            owned_a = sorted(p);
        }
        let rb = h.beat("b", eb, &owned_b).await;
        eb = rb.member_epoch;
        if let Some(p) = rb.assignment {
            owned_b = sorted(p);
        }
    }
    let before = h.c.consumer().describe(G).await.unwrap();
    assert_eq!(before.state, ConsumerGroupState::Stable);
    let writes = h.store.calls(StoreOp::WriteGroup);
    // A heartbeat that changes nothing writes nothing.
    h.beat("a", ea, &owned_a).await;
    assert_eq!(h.store.calls(StoreOp::WriteGroup), writes);

    let r = h.restarted().await;
    let after = r.c.consumer().describe(G).await.unwrap();
    assert_eq!(
        after, before,
        "epochs, states, subscriptions and assignments come back"
    );
    // The members carry on with their epochs: no new epoch, no new assignment.
    let ra = r.beat("a", ea, &owned_a).await;
    assert_eq!(ra.member_epoch, ea);
    assert_eq!(ra.assignment, None);
    let rb = r.beat("b", eb, &owned_b).await;
    assert_eq!(rb.member_epoch, eb);
    assert_eq!(
        r.c.consumer().describe(G).await.unwrap().group_epoch,
        before.group_epoch,
        "no rebalance"
    );
    // A member that never comes back expires after its session, counted from the load.
    r.clock.advance(SESSION / 2);
    r.beat("a", ea, &owned_a).await;
    r.clock.advance(SESSION / 2 + 1);
    let expired = r.c.handle_timeout().await;
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert_eq!(expired[0].member, "b");
}

#[tokio::test]
async fn a_heartbeat_whose_record_cannot_be_stored_gets_the_stores_error_and_recovers() {
    let h = harness();
    h.store.fail(
        StoreOp::WriteGroup,
        coordinator_core::StorageErrorKind::Io,
        "disk full",
    );
    let e = h
        .hb(&Req::join(G, "a", ["orders"]))
        .await
        .expect_err("the record could not be stored");
    assert_eq!(e.error_code(), ErrorCode::StorageError);
    h.store.heal(StoreOp::WriteGroup);
    // The member never heard of its epoch: it joins again and gets the whole target.
    let a = h.join("a", &["orders"]).await;
    assert_eq!(sorted(a.assignment.unwrap()).len(), 4);
    let stored = h.store.inner().unwrap().records.lock().unwrap().len();
    assert_eq!(stored, 1, "the retried join is stored");
}

// ---- Regular-expression subscriptions (SubscribedTopicRegex) ----

/// A join that subscribes by `regex` (and names no topic).
fn join_regex(member: &str, regex: &str) -> Req {
    Req::join(G, member, Vec::<String>::new()).with_regex(regex)
}

fn topics_of(partitions: &[TopicPartition]) -> Vec<&str> {
    let mut t: Vec<&str> = partitions.iter().map(TopicPartition::topic).collect();
    t.dedup();
    t
}

#[tokio::test]
async fn a_regex_subscription_gets_the_topics_whose_whole_name_matches() {
    let h = harness();
    h.topics.set("orders-eu", 2);
    h.topics.set("old-orders", 1);
    let r = h.hb(&join_regex("a", "orders.*")).await.unwrap();
    let owned = sorted(r.assignment.unwrap());
    assert_eq!(topics_of(&owned), ["orders", "orders-eu"], "not old-orders");
    assert_eq!(owned.len(), 6);
    let m = h.member("a").await;
    assert_eq!(m.subscribed_topic_regex.as_deref(), Some("orders.*"));
    assert!(m.subscribed_topic_names.is_empty(), "the names it sent");
    let record = h.c.group_record(G).unwrap();
    let c = record.members[0].consumer.as_ref().unwrap();
    assert_eq!(c.subscribed_topic_regex.as_deref(), Some("orders.*"));
}

#[tokio::test]
async fn a_regex_and_names_subscribe_to_their_union() {
    let h = harness();
    let r = h
        .hb(&Req::join(G, "a", ["payments"]).with_regex("ord.*"))
        .await
        .unwrap();
    assert_eq!(
        topics_of(&sorted(r.assignment.unwrap())),
        ["orders", "payments"]
    );
    // A topic matched and named counts once: its partitions are assigned once.
    let r = h
        .hb(&Req::join(G, "b", ["orders"]).with_regex("orders"))
        .await
        .unwrap();
    assert_eq!(r.member_epoch, 2);
    let d = h.c.consumer().describe(G).await.unwrap();
    let targets: usize = d.members.iter().map(|m| m.target_assignment.len()).sum();
    assert_eq!(targets, 6, "each partition of orders and payments once");
}

#[tokio::test]
async fn a_topic_created_later_that_matches_joins_within_ten_seconds() {
    let h = harness();
    let r = h.hb(&join_regex("a", "orders.*")).await.unwrap();
    let mut owned = sorted(r.assignment.unwrap());
    assert_eq!(owned.len(), 4);
    h.topics.set("orders-eu", 3);
    h.clock.advance(9_999);
    let r = h.beat("a", 1, &owned).await;
    assert_eq!(
        (r.member_epoch, r.assignment),
        (1, None),
        "not matched again yet"
    );
    h.clock.advance(1);
    let r = h.beat("a", 1, &owned).await;
    assert_eq!(r.member_epoch, 2, "the new topic bumps the group epoch");
    owned = sorted(r.assignment.unwrap());
    assert_eq!(topics_of(&owned), ["orders", "orders-eu"]);
    assert_eq!(owned.len(), 7);
    // Matching again and finding the same topics changes nothing.
    h.clock.advance(10_000);
    let r = h.beat("a", 2, &owned).await;
    assert_eq!((r.member_epoch, r.assignment), (2, None));
}

#[tokio::test]
async fn a_new_regex_is_matched_at_once_and_bumps_the_group_epoch() {
    let h = harness();
    let r = h.join("a", &["payments"]).await;
    let owned = sorted(r.assignment.unwrap());
    let r = h
        .hb(&Req::heartbeat(G, "a", 1).with_regex("ord.*").owning(owned))
        .await
        .unwrap();
    assert_eq!(r.member_epoch, 2);
    assert_eq!(
        topics_of(&sorted(r.assignment.unwrap())),
        ["orders", "payments"]
    );
    // An expression that matches no topic changes no subscription: no new epoch.
    let r = h.hb(&join_regex("b", "nothing-.*")).await.unwrap();
    assert_eq!(r.member_epoch, 2);
    assert_eq!(r.assignment, Some(Vec::new()));
}

#[tokio::test]
async fn an_empty_regex_drops_the_regex_subscription() {
    let h = harness();
    let r = h
        .hb(&Req::join(G, "a", ["payments"]).with_regex("ord.*"))
        .await
        .unwrap();
    let owned = sorted(r.assignment.unwrap());
    let r = h
        .hb(&Req::heartbeat(G, "a", 1).with_regex("").owning(owned))
        .await
        .unwrap();
    assert_eq!(h.c.consumer().describe(G).await.unwrap().group_epoch, 2);
    assert!(r
        .assignment
        .unwrap()
        .iter()
        .all(|p| p.topic() == "payments"));
    assert_eq!(h.member("a").await.subscribed_topic_regex, None);
    let d = h.c.consumer().describe(G).await.unwrap();
    assert!(d.members[0]
        .target_assignment
        .iter()
        .all(|p| p.topic() == "payments"));
}

#[tokio::test]
async fn an_invalid_regex_is_invalid_regular_expression_and_changes_nothing() {
    let h = harness();
    let e = h.hb(&join_regex("a", "ord(")).await.unwrap_err();
    assert_eq!(e.kafka_code(), Some(128));
    assert_eq!(e.error_code(), ErrorCode::InvalidRegularExpression);
    assert!(
        e.to_string()
            .starts_with("SubscribedTopicRegex `ord(` is not a valid regular expression: "),
        "{e}"
    );
    assert!(
        h.c.group_record(G).is_none_or(|r| r.members.is_empty()),
        "the member was not admitted"
    );
    // A member of the group that switches to an invalid expression keeps what it had.
    h.hb(&join_regex("a", "ord.*")).await.unwrap();
    let before = h.c.consumer().describe(G).await.unwrap();
    let e = h
        .hb(&Req::heartbeat(G, "a", 1).with_regex("[z-a]"))
        .await
        .unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::InvalidRegularExpression);
    assert_eq!(h.c.consumer().describe(G).await.unwrap(), before);
}

#[tokio::test]
async fn a_regex_shared_by_members_stays_resolved_until_the_last_one_leaves() {
    let h = harness();
    let a = h.hb(&join_regex("a", "orders")).await.unwrap();
    h.hb(&join_regex("b", "orders")).await.unwrap();
    h.hb(&Req::heartbeat(G, "a", -1)).await.unwrap();
    drop(a);
    // b still subscribes through the expression the group already matched.
    let r = h.beat("b", 2, &[]).await;
    assert_eq!(r.member_epoch, 3);
    assert_eq!(sorted(r.assignment.unwrap()).len(), 4, "all of orders");
    assert_eq!(
        h.c.consumer().describe(G).await.unwrap().members[0]
            .subscribed_topic_regex
            .as_deref(),
        Some("orders")
    );
}

#[tokio::test]
async fn a_deleted_topic_leaves_a_regex_subscription() {
    let h = harness();
    h.topics.set("orders-eu", 2);
    let r = h.hb(&join_regex("a", "orders.*")).await.unwrap();
    let owned = sorted(r.assignment.unwrap());
    h.topics.delete("orders-eu");
    let r = h.beat("a", 1, &owned).await;
    assert_eq!(h.c.consumer().describe(G).await.unwrap().group_epoch, 2);
    // The member first revokes the deleted topic's partitions, then moves on.
    let kept = sorted(r.assignment.unwrap());
    assert_eq!(topics_of(&kept), ["orders"]);
    assert_eq!(h.member("a").await.state, MemberState::UnrevokedPartitions);
    assert_eq!(h.beat("a", 1, &kept).await.member_epoch, 2);
}

#[tokio::test]
async fn a_restarted_coordinator_carries_a_regex_subscription_on() {
    let h = harness();
    let r = h.hb(&join_regex("a", "orders.*")).await.unwrap();
    let owned = sorted(r.assignment.unwrap());
    let before = h.c.consumer().describe(G).await.unwrap();
    let r = h.restarted().await;
    assert_eq!(r.c.consumer().describe(G).await.unwrap(), before);
    // The first heartbeat matches the expression again and finds the same topics.
    let ra = r.beat("a", 1, &owned).await;
    assert_eq!((ra.member_epoch, ra.assignment), (1, None), "no rebalance");
    // And it still picks up a topic created later.
    r.topics.set("orders-eu", 1);
    r.clock.advance(10_000);
    let ra = r.beat("a", 1, &owned).await;
    assert_eq!(ra.member_epoch, 2);
    assert_eq!(sorted(ra.assignment.unwrap()).len(), 5);
}

#[tokio::test]
async fn a_group_config_reaches_each_member_at_its_next_heartbeat() {
    let h = harness();
    let a = h.join("a", &["orders"]).await;
    assert_eq!(a.heartbeat_interval_ms, 5_000);
    let b = h.join("b", &["orders"]).await;
    // Kafka's bounds (45-60 s, 5-15 s), checked in Kafka's order, with Kafka's messages.
    let set = |name: &str, v: u64| GroupConfig::default().with(name, Some(v)).unwrap();
    let refused = |config: GroupConfig| match h.c.set_group_config(G, config) {
        Err(GroupConfigError::Invalid(m)) => m,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        refused(set("consumer.heartbeat.interval.ms", 4_999)),
        "consumer.heartbeat.interval.ms must be greater than or equal to \
         group.consumer.min.heartbeat.interval.ms"
    );
    assert_eq!(
        refused(set("consumer.session.timeout.ms", 60_001)),
        "consumer.session.timeout.ms must be less than or equal to \
         group.consumer.max.session.timeout.ms"
    );
    assert_eq!(
        refused(set("consumer.session.timeout.ms", 0)),
        "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"
    );
    let too_close = set("consumer.session.timeout.ms", 45_000)
        .with("consumer.heartbeat.interval.ms", Some(15_000))
        .unwrap();
    assert!(h.c.set_group_config(G, too_close).is_ok(), "15 s < 45 s");
    assert!(GroupConfig::default()
        .with("no.such.config", Some(1))
        .is_none());
    assert_eq!(h.c.group_config(G), too_close, "nothing refused was kept");

    // Applied: the next heartbeat response says 15 s, and the session is the group's.
    let config = set("consumer.session.timeout.ms", 50_000)
        .with("consumer.heartbeat.interval.ms", Some(6_000))
        .unwrap();
    h.c.set_group_config(G, config).unwrap();
    let r = h.hb(&Req::heartbeat(G, "a", a.member_epoch)).await.unwrap();
    assert_eq!(r.heartbeat_interval_ms, 6_000);
    h.hb(&Req::heartbeat(G, "b", b.member_epoch)).await.unwrap();
    // 45 s (the coordinator's session) later both live; at 50 s after b's heartbeat, a
    // (which beat at the same time) and b go.
    h.clock.advance(SESSION);
    assert!(
        h.expire().await.is_empty(),
        "the group's 50 s session holds"
    );
    h.clock.advance(50_000 - SESSION);
    assert_eq!(h.expire().await.len(), 2);
    // An empty config removes the group's own.
    h.c.set_group_config(G, GroupConfig::default()).unwrap();
    assert!(h.c.group_configs().is_empty());
}

// ====================================================================== admin removal, forced epoch bump

#[tokio::test]
async fn a_member_removed_by_an_admin_is_fenced_and_its_next_heartbeat_is_unknown_member() {
    let h = harness();
    let a = h.join("a", &["orders"]).await;
    let b = h.join("b", &["orders"]).await;
    let epoch_before = h.c.consumer().describe(G).await.unwrap().group_epoch;
    let results =
        h.c.consumer()
            .remove_members(G, &["a", "zz"])
            .await
            .unwrap();
    assert!(results[0].is_ok());
    assert_eq!(
        results[1].as_ref().unwrap_err().error_code(),
        ErrorCode::UnknownMember
    );
    let d = h.c.consumer().describe(G).await.unwrap();
    assert_eq!(
        d.group_epoch,
        epoch_before + 1,
        "the removal bumps the group epoch"
    );
    assert!(d.members.iter().all(|m| m.member_id != "a"));
    let e = h
        .hb(&Req::heartbeat(G, "a", a.member_epoch))
        .await
        .unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::UnknownMember);
    // The other member gets the whole topic at its next heartbeats.
    let mut members = vec![("b".to_string(), b.member_epoch, b.assignment.unwrap())];
    settle(&h, &mut members).await;
    assert_eq!(sorted(members[0].2.clone()).len(), 4);
    // The removed member joins again with epoch 0.
    assert_eq!(h.join("a", &["orders"]).await.member_id, "a");
    assert_eq!(
        h.c.consumer()
            .remove_members("nope", &["a"])
            .await
            .unwrap_err()
            .error_code(),
        ErrorCode::GroupIdNotFound
    );
}

#[tokio::test]
async fn a_forced_epoch_bump_gives_members_a_new_epoch_at_their_next_heartbeat() {
    let h = harness();
    let a = h.join("a", &["orders"]).await;
    let bumped = h.c.consumer().bump_epoch(G).await.unwrap();
    assert_eq!(bumped, a.member_epoch + 1);
    let r = h.beat("a", a.member_epoch, &a.assignment.unwrap()).await;
    assert_eq!(r.member_epoch, bumped, "the target is computed again");
    assert_eq!(
        h.c.consumer()
            .bump_epoch("nope")
            .await
            .unwrap_err()
            .error_code(),
        ErrorCode::GroupIdNotFound
    );
}
