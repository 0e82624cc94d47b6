//! The online migration between Kafka's classic protocol and the consumer protocol
//! (`group.consumer.migration.policy`), as Kafka 4's `GroupMetadataManager` does it: one test
//! per rule. Time is a `ManualClock`; timers run when a test calls `handle_timeout`. No sleeps.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::{ModuloAssignor, TestStore, Topics};
use coordinator_core::{
    named, with_no_metadata, ClassicProtocol, CommitAuthority,
    ConsumerGroupHeartbeatRequest as Req, Coordinator, CoordinatorBuilder, Error, ErrorCode,
    Generation, GroupKind, GroupState, JoinGroupRequest, JoinGroupResponse, LeavingMember,
    ManualClock, MigrationPolicy, OffsetCommitRequest, OffsetMap, SequentialMemberIds,
    SyncAssignment, SyncGroupRequest, TopicPartition,
};
use tokio::task::JoinHandle;

const G: &str = "g";
const SESSION: i32 = 10_000;
const REBALANCE: i32 = 30_000;

fn tp(p: u32) -> TopicPartition {
    TopicPartition::new("orders", p)
}

/// Kafka's `ConsumerProtocolSubscription` at v1: the topics, no user data, the owned
/// partitions of topic `orders`.
fn subscription(topics: &[&str], owned: &[u32]) -> Vec<u8> {
    let mut b = 1i16.to_be_bytes().to_vec();
    b.extend((topics.len() as i32).to_be_bytes());
    for t in topics {
        b.extend((t.len() as i16).to_be_bytes());
        b.extend(t.as_bytes());
    }
    b.extend((-1i32).to_be_bytes());
    b.extend(partitions(owned));
    b
}

/// The partition array of `orders` in the embedded protocol's layout.
fn partitions(ps: &[u32]) -> Vec<u8> {
    let mut b = Vec::new();
    if ps.is_empty() {
        b.extend(0i32.to_be_bytes());
        return b;
    }
    b.extend(1i32.to_be_bytes());
    b.extend(6i16.to_be_bytes());
    b.extend(b"orders");
    b.extend((ps.len() as i32).to_be_bytes());
    for p in ps {
        b.extend((*p as i32).to_be_bytes());
    }
    b
}

/// Kafka's `ConsumerProtocolAssignment` at `version`.
fn assignment_bytes(version: i16, ps: &[u32]) -> Vec<u8> {
    let mut b = version.to_be_bytes().to_vec();
    b.extend(partitions(ps));
    b.extend((-1i32).to_be_bytes());
    b
}

/// The partitions of an assignment the coordinator encoded (topic `orders` only).
fn decode(bytes: &[u8]) -> (i16, Vec<u32>) {
    let version = i16::from_be_bytes([bytes[0], bytes[1]]);
    let topics = i32::from_be_bytes(bytes[2..6].try_into().unwrap());
    if topics == 0 {
        return (version, Vec::new());
    }
    assert_eq!(topics, 1);
    assert_eq!(&bytes[6..14], b"\x00\x06orders");
    let n = i32::from_be_bytes(bytes[14..18].try_into().unwrap()) as usize;
    let ps = (0..n)
        .map(|i| {
            let at = 18 + 4 * i;
            i32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as u32
        })
        .collect();
    (version, ps)
}

struct H {
    c: Arc<Coordinator>,
    clock: ManualClock,
    store: Arc<TestStore>,
    topics: Arc<Topics>,
}

fn harness() -> H {
    harness_with(|b| b)
}

fn builder(store: Arc<TestStore>, topics: Arc<Topics>, clock: &ManualClock) -> CoordinatorBuilder {
    Coordinator::builder(store, topics, ModuloAssignor::named("modulo"))
        .clock(Arc::new(clock.clone()))
        .member_ids(Arc::new(SequentialMemberIds::new()))
        .group_min_session_timeout_ms(100)
        .group_max_session_timeout_ms(60_000)
        .group_initial_rebalance_delay_ms(0)
        .consumer_assignor(named("uniform", ModuloAssignor::named("modulo")))
}

fn harness_with(configure: impl FnOnce(CoordinatorBuilder) -> CoordinatorBuilder) -> H {
    let clock = ManualClock::new();
    let store = Arc::new(TestStore::new(common::MapStore::keeping_groups()));
    let topics = Topics::with(&[("orders", 4)]);
    let c = Arc::new(
        configure(builder(store.clone(), topics.clone(), &clock))
            .build()
            .unwrap(),
    );
    H {
        c,
        clock,
        store,
        topics,
    }
}

fn join_req(member: &str, client: &str, owned: &[u32]) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: G.into(),
        member_id: member.into(),
        group_instance_id: None,
        client_id: client.into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: REBALANCE,
        protocol_type: "consumer".into(),
        protocols: vec![
            ClassicProtocol::new("range", subscription(&["orders"], owned)).with_topics(["orders"]),
        ],
        require_known_member_id: false,
        supports_skip_assignment: false,
        reason: None,
    }
}

fn sync_req(member: &str, generation: Generation) -> SyncGroupRequest {
    SyncGroupRequest {
        group_id: G.into(),
        generation: Some(generation),
        member_id: member.into(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments: Vec::new(),
    }
}

fn assignment(member: &str, ps: &[u32]) -> SyncAssignment {
    SyncAssignment {
        member_id: member.into(),
        assignment: assignment_bytes(1, ps).into(),
        partitions: Some(ps.iter().map(|&p| tp(p)).collect()),
    }
}

fn commit(member: &str, authority: CommitAuthority, offset: i64) -> OffsetCommitRequest {
    let _ = member;
    OffsetCommitRequest {
        group_id: G.into(),
        authority,
        offsets: with_no_metadata(&OffsetMap::from([(tp(0), offset)])),
    }
}

fn code<T: std::fmt::Debug>(r: Result<T, Error>) -> ErrorCode {
    r.expect_err("expected an error").error_code()
}

async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

impl H {
    fn spawn_join(&self, req: JoinGroupRequest) -> JoinHandle<Result<JoinGroupResponse, Error>> {
        let c = self.c.clone();
        tokio::spawn(async move { c.classic().join(req).await })
    }

    /// Two classic members `a` and `b` in a Stable group, `a` holding orders-0/1 and `b`
    /// orders-2/3: (a's id, b's id, generation).
    async fn classic_pair(&self) -> (String, String, Generation) {
        let ja = self.spawn_join(join_req("", "a", &[]));
        let jb = self.spawn_join(join_req("", "b", &[]));
        settle().await;
        self.c.handle_timeout().await;
        settle().await;
        let (ra, rb) = (ja.await.unwrap().unwrap(), jb.await.unwrap().unwrap());
        let (a, b) = if ra.leader == ra.member_id {
            (ra.member_id.clone(), rb.member_id.clone())
        } else {
            (rb.member_id.clone(), ra.member_id.clone())
        };
        let generation = ra.generation;
        let c = self.c.clone();
        let follower = b.clone();
        let f =
            tokio::spawn(async move { c.classic().sync(sync_req(&follower, generation)).await });
        let mut s = sync_req(&a, generation);
        s.assignments = vec![assignment(&a, &[0, 1]), assignment(&b, &[2, 3])];
        self.c.classic().sync(s).await.unwrap();
        f.await.unwrap().unwrap();
        assert_eq!(
            self.c.classic().describe(G).await.unwrap().state,
            GroupState::Stable
        );
        (a, b, generation)
    }

    /// The consumer-protocol member `c` joins.
    async fn consumer_joins(
        &self,
    ) -> Result<coordinator_core::ConsumerGroupHeartbeatResponse, Error> {
        self.c
            .consumer()
            .heartbeat(&Req::join(G, "c", ["orders"]))
            .await
    }

    async fn epoch_of(&self, member: &str) -> i32 {
        let d = self.c.consumer().describe(G).await.unwrap();
        d.members
            .iter()
            .find(|m| m.member_id == member)
            .unwrap()
            .member_epoch
    }

    async fn assigned(&self, member: &str) -> Vec<TopicPartition> {
        let d = self.c.consumer().describe(G).await.unwrap();
        d.members
            .into_iter()
            .find(|m| m.member_id == member)
            .unwrap()
            .assignment
    }

    /// Member `member` of the classic protocol joins again reporting `owned` and syncs: its
    /// generation and the partitions its sync gave it.
    async fn rejoin_and_sync(&self, member: &str, owned: &[u32]) -> (Generation, Vec<u32>) {
        let joined = self
            .c
            .classic()
            .join(join_req(member, member, owned))
            .await
            .unwrap();
        assert_eq!(joined.member_id, member);
        assert_eq!(joined.protocol_name.as_deref(), Some("range"));
        let synced = self
            .c
            .classic()
            .sync(sync_req(member, joined.generation))
            .await
            .unwrap();
        let (version, ps) = decode(&synced.assignment);
        assert_eq!(
            version, 1,
            "encoded at the version of the member's subscription"
        );
        (joined.generation, ps)
    }
}

// ============================================================ upgrade: classic → consumer

#[tokio::test]
async fn a_consumer_heartbeat_turns_a_live_classic_group_into_a_consumer_group() {
    let h = harness();
    let (a, b, generation) = h.classic_pair().await;
    h.c.offsets()
        .commit(&commit(
            &a,
            CommitAuthority::generation(Some(generation), a.clone(), None),
            42,
        ))
        .await
        .unwrap();
    let joined = h.consumer_joins().await.unwrap();
    assert_eq!(h.c.group_kind(G), Some(GroupKind::Consumer));
    let d = h.c.consumer().describe(G).await.unwrap();
    let ids: Vec<&str> = d.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(ids, vec![a.as_str(), b.as_str(), "c"]);
    // Each with its protocol (ConsumerGroupDescribe's member type).
    let classic: Vec<bool> = d.members.iter().map(|m| m.classic).collect();
    assert_eq!(classic, vec![true, true, false]);
    // The classic members keep their epoch (the classic generation) and assignment.
    let classic_epoch = i32::try_from(generation.get()).unwrap();
    assert_eq!(h.epoch_of(&a).await, classic_epoch);
    assert_eq!(h.assigned(&a).await, vec![tp(0), tp(1)]);
    assert_eq!(h.assigned(&b).await, vec![tp(2), tp(3)]);
    // The new member's join bumped the group epoch: nothing it may take is held by another.
    assert!(d.group_epoch > classic_epoch);
    assert!(joined.member_epoch > classic_epoch);
    // Committed offsets carry over.
    let offsets =
        h.c.offsets()
            .fetch(G, &CommitAuthority::Plain)
            .await
            .unwrap();
    assert_eq!(offsets.get(&tp(0)).map(|o| o.offset), Some(42));
}

#[tokio::test]
async fn an_upgrade_answers_every_parked_classic_request_rebalance_in_progress() {
    let h = harness();
    let (a, b, _) = h.classic_pair().await;
    // A rebalance: a joins again and waits for b at the barrier.
    h.c.classic().rebalance(G, "test").await.unwrap();
    let parked = h.spawn_join(join_req(&a, "a", &[]));
    settle().await;
    assert!(!parked.is_finished());
    h.consumer_joins().await.unwrap();
    settle().await;
    assert_eq!(code(parked.await.unwrap()), ErrorCode::RebalanceInProgress);
    // The classic member is told the same by its next heartbeat, and joins again.
    let g = Generation::new(u64::try_from(h.epoch_of(&b).await).unwrap());
    assert_eq!(
        code(h.c.classic().heartbeat(G, &b, None, Some(g)).await),
        ErrorCode::RebalanceInProgress
    );
}

#[tokio::test]
async fn the_upgrade_is_refused_with_group_id_not_found_where_kafka_refuses() {
    // The policy forbids it.
    for policy in [MigrationPolicy::Disabled, MigrationPolicy::Downgrade] {
        let h = harness_with(|b| b.consumer_migration_policy(policy));
        h.classic_pair().await;
        assert_eq!(
            code(h.consumer_joins().await),
            ErrorCode::GroupIdNotFound,
            "{policy}"
        );
        assert_eq!(h.c.group_kind(G), Some(GroupKind::Classic));
        assert_eq!(
            h.c.classic().describe(G).await.unwrap().members.len(),
            2,
            "{policy}: the classic group is untouched"
        );
    }
    // The classic group has more members than group.consumer.max.size.
    let h = harness_with(|b| b.consumer_max_size(1));
    h.classic_pair().await;
    assert_eq!(code(h.consumer_joins().await), ErrorCode::GroupIdNotFound);
    // It has as many: converted, but the joining member is one too many; the heartbeat's
    // refusal leaves the group classic, as Kafka writes the conversion with it or not at all.
    let h = harness_with(|b| b.consumer_max_size(2));
    let (a, _, generation) = h.classic_pair().await;
    assert_eq!(
        code(h.consumer_joins().await),
        ErrorCode::GroupMaxSizeReached
    );
    assert_eq!(h.c.group_kind(G), Some(GroupKind::Classic));
    h.c.classic()
        .heartbeat(G, &a, None, Some(generation))
        .await
        .unwrap();
    // A member joined the rebalance under way and has no assignment yet.
    let h = harness();
    let (a, b, _) = h.classic_pair().await;
    let jn = h.spawn_join(join_req("", "n", &[]));
    settle().await;
    let ja = h.spawn_join(join_req(&a, "a", &[]));
    let jb = h.spawn_join(join_req(&b, "b", &[]));
    settle().await;
    h.c.handle_timeout().await;
    settle().await;
    for j in [ja, jb, jn] {
        j.await.unwrap().unwrap();
    }
    assert_eq!(code(h.consumer_joins().await), ErrorCode::GroupIdNotFound);
    assert_eq!(h.c.group_kind(G), Some(GroupKind::Classic));
}

#[tokio::test]
async fn a_classic_group_of_another_protocol_type_is_not_upgraded() {
    let h = harness();
    let mut r = join_req("", "a", &[]);
    r.protocol_type = "connect".into();
    let j = h.spawn_join(r);
    settle().await;
    h.c.handle_timeout().await;
    j.await.unwrap().unwrap();
    assert_eq!(code(h.consumer_joins().await), ErrorCode::GroupIdNotFound);
    assert_eq!(h.c.group_kind(G), Some(GroupKind::Classic));
}

#[tokio::test]
async fn the_upgrade_carries_static_members_and_their_session_timeouts() {
    let h = harness();
    let mut ra = join_req("", "a", &[]);
    ra.group_instance_id = Some("ia".into());
    ra.session_timeout_ms = 20_000;
    let ja = h.spawn_join(ra);
    settle().await;
    h.c.handle_timeout().await;
    let joined = ja.await.unwrap().unwrap();
    let a = joined.member_id.clone();
    let mut s = sync_req(&a, joined.generation);
    s.assignments = vec![assignment(&a, &[0, 1, 2, 3])];
    h.c.classic().sync(s).await.unwrap();
    h.consumer_joins().await.unwrap();
    let d = h.c.consumer().describe(G).await.unwrap();
    let m = d.members.iter().find(|m| m.member_id == a).unwrap();
    assert_eq!(m.instance_id.as_deref(), Some("ia"));
    // c heartbeats on; a is silent: it expires after its own 20 s, not the group's 45 s.
    h.clock.advance(19_999);
    assert!(h.c.handle_timeout().await.is_empty());
    h.c.consumer()
        .heartbeat(&Req::heartbeat(G, "c", h.epoch_of("c").await))
        .await
        .unwrap();
    h.clock.advance(1);
    let expired: Vec<String> =
        h.c.handle_timeout()
            .await
            .into_iter()
            .map(|e| e.member)
            .collect();
    assert_eq!(expired, vec![a]);
}

// ============================================== classic members inside a consumer group

#[tokio::test]
async fn classic_members_reconcile_through_join_and_sync_and_no_partition_is_held_twice() {
    let h = harness();
    let (a, b, _) = h.classic_pair().await;
    h.consumer_joins().await.unwrap();
    let mut c_owned: Vec<TopicPartition> = Vec::new();
    let mut c_epoch = h.epoch_of("c").await;
    let mut owned: Vec<(String, Vec<u32>)> = vec![(a.clone(), vec![0, 1]), (b.clone(), vec![2, 3])];
    for _ in 0..6 {
        for (member, held) in owned.iter_mut() {
            let g = Generation::new(u64::try_from(h.epoch_of(member).await).unwrap());
            match h.c.classic().heartbeat(G, member, None, Some(g)).await {
                Ok(()) => {}
                Err(e) => {
                    assert_eq!(e.error_code(), ErrorCode::RebalanceInProgress);
                    // A cooperative member reports what it owns when it joins again.
                    let (_, got) = h.rejoin_and_sync(member, held).await;
                    *held = got;
                }
            }
        }
        let r =
            h.c.consumer()
                .heartbeat(&Req::heartbeat(G, "c", c_epoch).owning(c_owned.clone()))
                .await
                .unwrap();
        c_epoch = r.member_epoch;
        if let Some(got) = r.assignment {
            c_owned = got;
        }
        // Never two holders of one partition.
        let mut seen = BTreeSet::new();
        for p in owned
            .iter()
            .flat_map(|(_, ps)| ps.iter().map(|&p| tp(p)))
            .chain(c_owned.clone())
        {
            assert!(seen.insert(p.clone()), "{p:?} held twice");
        }
    }
    let d = h.c.consumer().describe(G).await.unwrap();
    assert_eq!(d.state, coordinator_core::ConsumerGroupState::Stable);
    let total: usize = owned.iter().map(|(_, ps)| ps.len()).sum::<usize>() + c_owned.len();
    assert_eq!(total, 4, "every partition is held: {owned:?} {c_owned:?}");
    assert!(
        !c_owned.is_empty(),
        "the consumer-protocol member got partitions"
    );
}

#[tokio::test]
async fn a_classic_members_sync_and_heartbeat_are_checked_as_kafka_checks_them() {
    let h = harness();
    let (a, _b, _) = h.classic_pair().await;
    h.consumer_joins().await.unwrap();
    let (generation, _) = h.rejoin_and_sync(&a, &[]).await;
    // Wrong generation.
    let wrong = Generation::new(generation.get() + 7);
    assert_eq!(
        code(h.c.classic().sync(sync_req(&a, wrong)).await),
        ErrorCode::IllegalGeneration
    );
    assert_eq!(
        code(h.c.classic().heartbeat(G, &a, None, Some(wrong)).await),
        ErrorCode::IllegalGeneration
    );
    // Another protocol name than the one its join was answered with.
    let mut other = sync_req(&a, generation);
    other.protocol_name = Some("roundrobin".into());
    assert_eq!(
        code(h.c.classic().sync(other).await),
        ErrorCode::InconsistentGroupProtocol
    );
    // The consumer-protocol member is no classic member.
    let c_gen = Generation::new(u64::try_from(h.epoch_of("c").await).unwrap());
    assert_eq!(
        code(h.c.classic().heartbeat(G, "c", None, Some(c_gen)).await),
        ErrorCode::UnknownMember
    );
    assert_eq!(
        code(h.c.classic().sync(sync_req("c", c_gen)).await),
        ErrorCode::UnknownMember
    );
    // A join with protocols the classic members do not share.
    let mut odd = join_req("", "z", &[]);
    odd.protocols = vec![ClassicProtocol::new(
        "roundrobin",
        subscription(&["orders"], &[]),
    )];
    assert_eq!(
        code(h.c.classic().join(odd).await),
        ErrorCode::InconsistentGroupProtocol
    );
    // A new dynamic member that must learn its id first.
    let mut fresh = join_req("", "z", &[]);
    fresh.require_known_member_id = true;
    assert_eq!(
        code(h.c.classic().join(fresh).await),
        ErrorCode::MemberIdRequired
    );
}

#[tokio::test]
async fn a_classic_member_commits_with_its_epoch_as_the_generation() {
    let h = harness();
    let (a, _b, _) = h.classic_pair().await;
    h.consumer_joins().await.unwrap();
    let epoch = h.epoch_of(&a).await;
    let g = Generation::new(u64::try_from(epoch).unwrap());
    h.c.offsets()
        .commit(&commit(
            &a,
            CommitAuthority::generation(Some(g), a.clone(), None),
            7,
        ))
        .await
        .unwrap();
    let stale = Generation::new(g.get() + 1);
    assert_eq!(
        code(
            h.c.offsets()
                .commit(&commit(
                    &a,
                    CommitAuthority::generation(Some(stale), a.clone(), None),
                    8
                ))
                .await
        ),
        ErrorCode::IllegalGeneration
    );
    // OffsetCommit v9 (a member epoch) from a classic member: the same check.
    h.c.offsets()
        .commit(&commit(
            &a,
            CommitAuthority::MemberEpoch {
                member_id: a.clone(),
                member_epoch: epoch,
            },
            9,
        ))
        .await
        .unwrap();
    assert_eq!(
        code(
            h.c.offsets()
                .commit(&commit(
                    &a,
                    CommitAuthority::MemberEpoch {
                        member_id: a.clone(),
                        member_epoch: epoch + 1,
                    },
                    10,
                ))
                .await
        ),
        ErrorCode::IllegalGeneration
    );
    // A consumer-protocol member with a classic generation: UNSUPPORTED_VERSION, as before.
    let c_gen = Generation::new(u64::try_from(h.epoch_of("c").await).unwrap());
    assert_eq!(
        code(
            h.c.offsets()
                .commit(&commit(
                    "c",
                    CommitAuthority::generation(Some(c_gen), "c", None),
                    11
                ))
                .await
        ),
        ErrorCode::UnsupportedVersion
    );
}

#[tokio::test]
async fn a_classic_member_leaves_a_consumer_group_with_leave_group() {
    let h = harness();
    let (a, b, _) = h.classic_pair().await;
    h.consumer_joins().await.unwrap();
    let before = h.c.consumer().describe(G).await.unwrap().group_epoch;
    let results =
        h.c.classic()
            .leave(
                G,
                &[
                    LeavingMember {
                        member_id: a.clone(),
                        group_instance_id: None,
                    },
                    LeavingMember {
                        member_id: "c".into(),
                        group_instance_id: None,
                    },
                ],
            )
            .await
            .unwrap();
    assert!(results[0].is_ok());
    assert_eq!(
        results[1].as_ref().unwrap_err().error_code(),
        ErrorCode::UnknownMember,
        "a consumer-protocol member does not leave through LeaveGroup"
    );
    let d = h.c.consumer().describe(G).await.unwrap();
    let ids: Vec<&str> = d.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(ids, vec![b.as_str(), "c"]);
    assert_eq!(d.group_epoch, before + 1);
}

#[tokio::test]
async fn a_classic_member_told_to_join_again_that_does_not_is_fenced_after_its_rebalance_timeout() {
    let h = harness();
    let (a, b, _) = h.classic_pair().await;
    h.consumer_joins().await.unwrap();
    let g = Generation::new(u64::try_from(h.epoch_of(&a).await).unwrap());
    assert_eq!(
        code(h.c.classic().heartbeat(G, &a, None, Some(g)).await),
        ErrorCode::RebalanceInProgress
    );
    // a keeps heartbeating but never joins; b joins and syncs; c heartbeats.
    h.rejoin_and_sync(&b, &[]).await;
    for _ in 0..3 {
        h.clock.advance(9_000);
        let _ = h.c.classic().heartbeat(G, &a, None, Some(g)).await;
        let gb = Generation::new(u64::try_from(h.epoch_of(&b).await).unwrap());
        if h.c
            .classic()
            .heartbeat(G, &b, None, Some(gb))
            .await
            .is_err()
        {
            h.rejoin_and_sync(&b, &[]).await;
        }
        h.c.consumer()
            .heartbeat(&Req::heartbeat(G, "c", h.epoch_of("c").await))
            .await
            .unwrap();
        assert!(h.c.handle_timeout().await.is_empty());
    }
    h.clock.advance(3_000);
    let expired: Vec<String> =
        h.c.handle_timeout()
            .await
            .into_iter()
            .map(|e| e.member)
            .collect();
    assert_eq!(expired, vec![a]);
    let _ = &h.store;
    let _ = &h.topics;
}

// ========================================================= downgrade: consumer → classic

impl H {
    /// The classic pair upgraded by `c`, every member reconciled: (a, b).
    async fn mixed_and_stable(&self) -> (String, String) {
        let (a, b, _) = self.classic_pair().await;
        self.consumer_joins().await.unwrap();
        let mut held: Vec<(String, Vec<u32>)> =
            vec![(a.clone(), vec![0, 1]), (b.clone(), vec![2, 3])];
        let mut c_owned: Vec<TopicPartition> = Vec::new();
        for _ in 0..6 {
            for (member, owned) in held.iter_mut() {
                let g = Generation::new(u64::try_from(self.epoch_of(member).await).unwrap());
                if self
                    .c
                    .classic()
                    .heartbeat(G, member, None, Some(g))
                    .await
                    .is_err()
                {
                    *owned = self.rejoin_and_sync(member, owned).await.1;
                }
            }
            let r = self
                .c
                .consumer()
                .heartbeat(
                    &Req::heartbeat(G, "c", self.epoch_of("c").await).owning(c_owned.clone()),
                )
                .await
                .unwrap();
            if let Some(got) = r.assignment {
                c_owned = got;
            }
        }
        assert_eq!(
            self.c.consumer().describe(G).await.unwrap().state,
            coordinator_core::ConsumerGroupState::Stable
        );
        (a, b)
    }
}

#[tokio::test]
async fn the_group_goes_back_to_classic_when_its_last_consumer_protocol_member_leaves() {
    let h = harness();
    let (a, b) = h.mixed_and_stable().await;
    let a_had = h.assigned(&a).await;
    let epoch = h.epoch_of("c").await;
    h.c.consumer()
        .heartbeat(&Req::heartbeat(G, "c", -1))
        .await
        .unwrap();
    assert_eq!(h.c.group_kind(G), Some(GroupKind::Classic));
    let d = h.c.classic().describe(G).await.unwrap();
    assert_eq!(
        d.state,
        GroupState::PreparingRebalance,
        "a rebalance starts at once"
    );
    let ids: Vec<&str> = d.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(ids, vec![a.as_str(), b.as_str()]);
    // The classic members keep their target assignment until they join again.
    let am = d.members.iter().find(|m| m.member_id == a).unwrap();
    assert_eq!(am.partitions, a_had);
    // The record the store holds is the classic group's.
    let record = h
        .store
        .inner()
        .unwrap()
        .records
        .lock()
        .unwrap()
        .get(G)
        .cloned()
        .unwrap();
    assert_eq!(record.kind, GroupKind::Classic);
    // The classic generation is the group epoch, the reconciled members' epoch: with it
    // both are told to join again, and form a new classic generation.
    let g = d.generation;
    assert_eq!(g, Generation::new(u64::try_from(epoch).unwrap()));
    assert_eq!(
        code(h.c.classic().heartbeat(G, &a, None, Some(g)).await),
        ErrorCode::RebalanceInProgress
    );
    let ja = h.spawn_join(join_req(&a, "a", &[]));
    let jb = h.spawn_join(join_req(&b, "b", &[]));
    settle().await;
    let (ra, rb) = (ja.await.unwrap().unwrap(), jb.await.unwrap().unwrap());
    assert_eq!(ra.generation, rb.generation);
    assert!(ra.generation > g);
    assert!(!ra.leader.is_empty());
}

#[tokio::test]
async fn the_session_expiry_of_the_last_consumer_protocol_member_downgrades_too() {
    let h = harness();
    let (a, b) = h.mixed_and_stable().await;
    // a and b heartbeat; c goes silent past its 45 s session.
    for _ in 0..5 {
        h.clock.advance(9_500);
        for m in [&a, &b] {
            let g = Generation::new(u64::try_from(h.epoch_of(m).await).unwrap());
            h.c.classic().heartbeat(G, m, None, Some(g)).await.unwrap();
        }
        h.c.handle_timeout().await;
    }
    assert_eq!(h.c.group_kind(G), Some(GroupKind::Classic));
    assert_eq!(h.c.classic().describe(G).await.unwrap().members.len(), 2);
}

#[tokio::test]
async fn no_downgrade_where_kafka_refuses_it() {
    // c forms a consumer group; a classic member joins it; c leaves. Only a policy that
    // allows the downgrade makes the group classic again.
    for (policy, after) in [
        (MigrationPolicy::Upgrade, GroupKind::Consumer),
        (MigrationPolicy::Disabled, GroupKind::Consumer),
        (MigrationPolicy::Downgrade, GroupKind::Classic),
        (MigrationPolicy::Bidirectional, GroupKind::Classic),
    ] {
        let h = harness_with(|b| b.consumer_migration_policy(policy));
        h.consumer_joins().await.unwrap();
        h.c.consumer()
            .heartbeat(&Req::join(G, "d", ["orders"]))
            .await
            .unwrap();
        let joined = h.c.classic().join(join_req("", "a", &[])).await.unwrap();
        assert_eq!(h.c.group_kind(G), Some(GroupKind::Consumer));
        h.c.consumer()
            .heartbeat(&Req::heartbeat(G, "c", -1))
            .await
            .unwrap();
        // Another consumer-protocol member remains: no downgrade under any policy.
        assert_eq!(h.c.group_kind(G), Some(GroupKind::Consumer), "{policy}");
        let d_epoch = h.epoch_of("d").await;
        h.c.consumer()
            .heartbeat(&Req::heartbeat(G, "d", d_epoch).owning([]))
            .await
            .unwrap();
        h.c.consumer()
            .heartbeat(&Req::heartbeat(G, "d", -1))
            .await
            .unwrap();
        assert_eq!(h.c.group_kind(G), Some(after), "{policy}");
        if after == GroupKind::Consumer {
            let d = h.c.consumer().describe(G).await.unwrap();
            let ids: Vec<&str> = d.members.iter().map(|m| m.member_id.as_str()).collect();
            assert_eq!(ids, vec![joined.member_id.as_str()], "{policy}");
        }
    }
    // A consumer-protocol member alone leaves an Empty consumer group.
    let h = harness();
    h.consumer_joins().await.unwrap();
    h.c.consumer()
        .heartbeat(&Req::heartbeat(G, "c", -1))
        .await
        .unwrap();
    assert_eq!(h.c.group_kind(G), Some(GroupKind::Consumer));
    assert!(h.c.consumer().describe(G).await.unwrap().members.is_empty());
}

// ================================================================= durability

#[tokio::test]
async fn a_restart_reloads_a_migrated_group_as_it_was() {
    let h = harness();
    let (a, b) = h.mixed_and_stable().await;
    let before = h.c.consumer().describe(G).await.unwrap();
    // A new coordinator over the same store.
    let c2 = builder(h.store.clone(), h.topics.clone(), &h.clock)
        .build()
        .unwrap();
    c2.load().await.unwrap();
    assert_eq!(c2.group_kind(G), Some(GroupKind::Consumer));
    let after = c2.consumer().describe(G).await.unwrap();
    assert_eq!(after.members, before.members);
    // The classic members carry on with their epochs as generations; c with its epoch.
    for m in [&a, &b] {
        let epoch = before
            .members
            .iter()
            .find(|d| &d.member_id == m)
            .unwrap()
            .member_epoch;
        let g = Generation::new(u64::try_from(epoch).unwrap());
        c2.classic().heartbeat(G, m, None, Some(g)).await.unwrap();
        let synced = c2.classic().sync(sync_req(m, g)).await.unwrap();
        let held: Vec<TopicPartition> = decode(&synced.assignment).1.into_iter().map(tp).collect();
        let described = before.members.iter().find(|d| &d.member_id == m).unwrap();
        assert_eq!(held, described.assignment);
    }
    let c_epoch = before
        .members
        .iter()
        .find(|d| d.member_id == "c")
        .unwrap()
        .member_epoch;
    c2.consumer()
        .heartbeat(&Req::heartbeat(G, "c", c_epoch))
        .await
        .unwrap();
    // And the way back after the restart: the classic group the store then holds.
    c2.consumer()
        .heartbeat(&Req::heartbeat(G, "c", -1))
        .await
        .unwrap();
    let c3 = builder(h.store.clone(), h.topics.clone(), &h.clock)
        .build()
        .unwrap();
    c3.load().await.unwrap();
    assert_eq!(c3.group_kind(G), Some(GroupKind::Classic));
    assert_eq!(c3.classic().describe(G).await.unwrap().members.len(), 2);
}

#[tokio::test]
async fn a_classic_static_member_replacing_the_last_consumer_protocol_member_downgrades_at_once() {
    for (policy, after) in [
        (MigrationPolicy::Bidirectional, GroupKind::Classic),
        (MigrationPolicy::Upgrade, GroupKind::Consumer),
    ] {
        let h = harness_with(|b| b.consumer_migration_policy(policy));
        // A static consumer-protocol member and a classic member.
        let s =
            h.c.consumer()
                .heartbeat(&Req::join(G, "s", ["orders"]).with_instance_id("i1"))
                .await
                .unwrap();
        let a = h.c.classic().join(join_req("", "a", &[])).await.unwrap();
        let mut a_owned: Vec<u32> = Vec::new();
        let mut s_owned = s.assignment.unwrap_or_default();
        for _ in 0..4 {
            let g = Generation::new(u64::try_from(h.epoch_of(&a.member_id).await).unwrap());
            if h.c
                .classic()
                .heartbeat(G, &a.member_id, None, Some(g))
                .await
                .is_err()
            {
                a_owned = h.rejoin_and_sync(&a.member_id, &a_owned).await.1;
            }
            let r =
                h.c.consumer()
                    .heartbeat(
                        &Req::heartbeat(G, "s", h.epoch_of("s").await)
                            .with_instance_id("i1")
                            .owning(s_owned.clone()),
                    )
                    .await
                    .unwrap();
            if let Some(got) = r.assignment {
                s_owned = got;
            }
        }
        let s_target = h.assigned("s").await;
        assert!(!s_target.is_empty());
        // The static member restarts with the classic protocol under a new member id.
        let mut r = join_req("s2", "s", &[]);
        r.group_instance_id = Some("i1".into());
        let joined = h.c.classic().join(r).await.unwrap();
        assert_eq!(h.c.group_kind(G), Some(after), "{policy}");
        let generation = joined.generation;
        let synced =
            h.c.classic()
                .sync(sync_req("s2", generation))
                .await
                .unwrap();
        let got: Vec<TopicPartition> = decode(&synced.assignment).1.into_iter().map(tp).collect();
        assert_eq!(
            got, s_target,
            "{policy}: it takes the replaced member's assignment"
        );
        if after == GroupKind::Classic {
            let d = h.c.classic().describe(G).await.unwrap();
            assert_eq!(d.state, GroupState::Stable, "no rebalance");
            assert_eq!(d.generation, generation);
            assert_eq!(d.members.len(), 2);
        }
    }
}

#[tokio::test]
async fn a_classic_member_expiring_with_the_last_consumer_protocol_member_is_not_carried_over() {
    let h = harness();
    h.consumer_joins().await.unwrap();
    let a =
        h.c.classic()
            .join(join_req("", "a", &[]))
            .await
            .unwrap()
            .member_id;
    let z =
        h.c.classic()
            .join(join_req("", "z", &[]))
            .await
            .unwrap()
            .member_id;
    let mut held: Vec<(String, Vec<u32>)> = vec![(a.clone(), Vec::new()), (z.clone(), Vec::new())];
    let mut c_owned: Vec<TopicPartition> = Vec::new();
    for _ in 0..6 {
        for (member, owned) in held.iter_mut() {
            let g = Generation::new(u64::try_from(h.epoch_of(member).await).unwrap());
            if h.c
                .classic()
                .heartbeat(G, member, None, Some(g))
                .await
                .is_err()
            {
                *owned = h.rejoin_and_sync(member, owned).await.1;
            }
        }
        let r =
            h.c.consumer()
                .heartbeat(&Req::heartbeat(G, "c", h.epoch_of("c").await).owning(c_owned.clone()))
                .await
                .unwrap();
        if let Some(got) = r.assignment {
            c_owned = got;
        }
    }
    // c's session (45 s) and z's (10 s) run out at the same instant; a heartbeats on.
    let beat = |m: String| {
        let h = &h;
        async move {
            let g = Generation::new(u64::try_from(h.epoch_of(&m).await).unwrap());
            h.c.classic().heartbeat(G, &m, None, Some(g)).await.unwrap();
        }
    };
    for step in [9_000, 9_000, 9_000, 8_000] {
        h.clock.advance(step);
        beat(a.clone()).await;
        beat(z.clone()).await;
        assert!(h.c.handle_timeout().await.is_empty());
    }
    h.clock.advance(9_000);
    beat(a.clone()).await;
    assert!(h.c.handle_timeout().await.is_empty());
    h.clock.advance(1_000);
    let mut expired: Vec<String> =
        h.c.handle_timeout()
            .await
            .into_iter()
            .map(|e| e.member)
            .collect();
    expired.sort();
    assert_eq!(expired, vec!["c".to_string(), z.clone()]);
    assert_eq!(h.c.group_kind(G), Some(GroupKind::Classic));
    let d = h.c.classic().describe(G).await.unwrap();
    let ids: Vec<&str> = d.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(
        ids,
        vec![a.as_str()],
        "the expired classic member stays out"
    );
}
