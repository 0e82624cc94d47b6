//! Coordinator slots moving between brokers: `load_where` loads the groups of the slots a
//! broker gains, `unload_where` drops those of the slots it loses. Several coordinators over
//! one store stand for several brokers over one database; time is a shared `ManualClock`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{offsets, tp, MapStore, StoreOp, TestStore, Topics};
use coordinator_core::{
    ClassicProtocol, Clock, CommitFence, Coordinator, Error, ExpiredMember, Generation, GroupKind,
    GroupState, JoinGroupRequest, JoinGroupResponse, LeavingMember, ManualClock, OffsetStore,
    StorageErrorKind, SyncAssignment, SyncGroupRequest,
};
use tokio::task::JoinHandle;

/// Classic members' session.
const SESSION: i32 = 1_000;
/// Classic members' rebalance timeout.
const REBALANCE: i32 = 30_000;
/// The chapter's session (the group that stays, in the unload test).
const CHAPTER_SESSION: u64 = 10_000;

/// A store that keeps group records, as the broker's do.
fn store() -> Arc<TestStore> {
    Arc::new(TestStore::new(MapStore::keeping_groups()))
}

/// One broker's coordinator over `store`, with `delay` as the initial rebalance delay.
fn coordinator(store: &Arc<TestStore>, clock: &ManualClock, delay: u64) -> Arc<Coordinator> {
    Arc::new(
        Coordinator::builder(
            store.clone(),
            Topics::with(&[("orders", 4)]),
            common::ModuloAssignor::named("modulo"),
        )
        .clock(Arc::new(clock.clone()))
        .session_timeout_ms(CHAPTER_SESSION)
        .group_min_session_timeout_ms(100)
        .group_initial_rebalance_delay_ms(delay)
        .build()
        .unwrap(),
    )
}

fn join_req(group: &str, member: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: group.into(),
        member_id: member.into(),
        group_instance_id: None,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: REBALANCE,
        protocol_type: "consumer".into(),
        protocols: vec![ClassicProtocol::new("range", b"m".to_vec()).with_topics(["orders"])],
        require_known_member_id: false,
        supports_skip_assignment: false,
        reason: None,
    }
}

fn sync_req(group: &str, joined: &JoinGroupResponse, assign: bool) -> SyncGroupRequest {
    SyncGroupRequest {
        group_id: group.into(),
        generation: Some(joined.generation),
        member_id: joined.member_id.clone(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments: if assign {
            vec![SyncAssignment {
                member_id: joined.member_id.clone(),
                assignment: b"all".to_vec().into(),
                partitions: None,
            }]
        } else {
            Vec::new()
        },
    }
}

fn spawn_join(
    c: &Arc<Coordinator>,
    req: JoinGroupRequest,
) -> JoinHandle<Result<JoinGroupResponse, Error>> {
    let c = c.clone();
    tokio::spawn(async move { c.classic().join(req).await })
}

/// Lets spawned calls run until they park (the test runtime has one thread).
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// Awaits a spawned call, failing the test if it does not end.
async fn answered<T>(call: JoinHandle<T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the parked call was never answered")
        .unwrap()
}

/// A classic group with one member, Stable, its record stored (initial delay 0).
async fn stable_group(c: &Arc<Coordinator>, group: &str) -> JoinGroupResponse {
    let join = spawn_join(c, join_req(group, ""));
    settle().await;
    c.handle_timeout().await;
    let joined = answered(join).await.unwrap();
    c.classic()
        .sync(sync_req(group, &joined, true))
        .await
        .unwrap();
    joined
}

fn is_not_coordinator(e: &Error) -> bool {
    matches!(e, Error::Storage(s) if s.kind() == StorageErrorKind::NotCoordinator)
}

async fn ids(c: &Coordinator) -> Vec<String> {
    c.list_groups()
        .await
        .into_iter()
        .map(|g| g.group_id)
        .collect::<Vec<_>>()
}

#[tokio::test]
async fn load_where_loads_only_the_groups_it_keeps() {
    let store = store();
    let clock = ManualClock::new();
    // Broker 1 made two classic groups (records) and the store holds offsets of three
    // groups, one of them a classic group's.
    let first = coordinator(&store, &clock, 0);
    let a1 = stable_group(&first, "a-1").await;
    let b1 = stable_group(&first, "b-1").await;
    for (group, o) in [("a-1", 7), ("a-2", 8), ("b-2", 9)] {
        store
            .commit(group, &offsets(&[("orders", 0, o)]), CommitFence::none())
            .await
            .unwrap();
    }
    // Broker 2 gains the slots of the "a-" groups only.
    let c = coordinator(&store, &clock, 0);
    assert_eq!(c.load_where(|g| g.starts_with("a-")).await.unwrap(), 2);
    assert_eq!(ids(&c).await, ["a-1", "a-2"]);
    let a = c.classic().describe("a-1").await.unwrap();
    assert_eq!(
        (a.state, a.generation, a.members.len()),
        (GroupState::Stable, a1.generation, 1),
        "a-1 comes back from its record"
    );
    assert_eq!(c.group_kind("a-2"), Some(GroupKind::Simple));
    assert_eq!(
        c.classic().describe("b-1").await.unwrap_err().code(),
        "GROUP_ID_NOT_FOUND"
    );
    assert_eq!(c.group_kind("b-2"), None);
    // A member of b-1 is unknown here, as in any group the coordinator never knew.
    let e = c
        .classic()
        .heartbeat("b-1", &b1.member_id, None, Some(b1.generation))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "UNKNOWN_MEMBER");
    assert!(c.poll_timeout().is_some(), "a-1's member session is armed");
    // Then it gains the others; load() is load_where(|_| true).
    assert_eq!(c.load_where(|g| g.starts_with("b-")).await.unwrap(), 2);
    assert_eq!(ids(&c).await, ["a-1", "a-2", "b-1", "b-2"]);
    let third = coordinator(&store, &clock, 0);
    assert_eq!(third.load().await.unwrap(), 4);
    assert_eq!(ids(&third).await, ids(&c).await);
}

#[tokio::test]
async fn unload_where_answers_parked_requests_and_forgets_the_groups() {
    let store = store();
    let clock = ManualClock::new();
    let c = coordinator(&store, &clock, 3_000);
    // g-sync: two members through the barrier (after the initial delay), the follower's
    // SyncGroup parked until the leader's arrives.
    let first = spawn_join(&c, join_req("g-sync", ""));
    let second = spawn_join(&c, join_req("g-sync", ""));
    settle().await;
    // The initial delay, extended as the second member arrived in the first.
    while !(first.is_finished() && second.is_finished()) {
        assert!(
            clock.now_ms() < REBALANCE as u64,
            "the barrier never completed"
        );
        clock.advance(3_000);
        c.handle_timeout().await;
        settle().await;
    }
    let now = clock.now_ms();
    let (first, second) = (
        answered(first).await.unwrap(),
        answered(second).await.unwrap(),
    );
    let follower = if first.member_id == first.leader {
        second
    } else {
        first
    };
    let leader = follower.leader.clone();
    let sync = {
        let (c, req) = (c.clone(), sync_req("g-sync", &follower, false));
        tokio::spawn(async move { c.classic().sync(req).await })
    };
    // g-join: a first member parked in its JoinGroup for the initial delay.
    let join = spawn_join(&c, join_req("g-join", ""));
    settle().await;
    assert_eq!(
        c.classic().describe("g-join").await.unwrap().state,
        GroupState::PreparingRebalance
    );
    assert_eq!(
        c.classic().describe("g-sync").await.unwrap().state,
        GroupState::CompletingRebalance
    );
    // keep: a group of a slot the broker keeps.
    let kept = c.join("keep", "k1", &["orders"]).await.unwrap();
    assert!(
        c.poll_timeout().unwrap() < now + CHAPTER_SESSION,
        "the moving groups' deadlines come first"
    );

    assert_eq!(c.unload_where(|g| g.starts_with("g-")).await, 2);

    // Every parked request is answered at once, with what the broker maps to NOT_COORDINATOR.
    let e = answered(sync).await.unwrap_err();
    assert!(is_not_coordinator(&e), "{e:?}");
    let e = answered(join).await.unwrap_err();
    assert!(is_not_coordinator(&e), "{e:?}");
    // The groups are unknown now.
    assert_eq!(ids(&c).await, ["keep"]);
    for g in ["g-sync", "g-join"] {
        assert_eq!(
            c.classic().describe(g).await.unwrap_err().code(),
            "GROUP_ID_NOT_FOUND"
        );
        assert_eq!(c.group_kind(g), None);
        assert!(c.group_record(g).is_none());
    }
    let e = c
        .classic()
        .heartbeat("g-sync", &leader, None, Some(follower.generation))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "UNKNOWN_MEMBER");
    // Their deadlines are gone from the timer heap: only keep's session is left.
    assert!(
        c.poll_timeout().unwrap() >= now + CHAPTER_SESSION,
        "{:?}",
        c.poll_timeout()
    );
    // Past every session: only keep's member expires; nothing of the dropped groups runs,
    // and nothing is written for them.
    let writes = store.calls(StoreOp::WriteGroup);
    clock.set(60_000).unwrap();
    assert_eq!(
        c.handle_timeout().await,
        [ExpiredMember {
            group: "keep".into(),
            member: "k1".into()
        }]
    );
    assert_eq!(store.calls(StoreOp::WriteGroup), writes);
    let records = store.inner().unwrap().records.lock().unwrap().clone();
    assert!(!records.contains_key("g-sync") && !records.contains_key("g-join"));
    assert_eq!(c.state("keep").await.unwrap(), GroupState::Empty);
    assert_eq!(kept.generation, Generation::new(1));
}

#[tokio::test]
async fn unload_where_drops_tombstones_so_the_group_id_starts_over() {
    let store = store();
    let clock = ManualClock::new();
    let c = coordinator(&store, &clock, 0);
    for g in ["moving", "staying"] {
        // Generation 1, Empty at generation 2, removed after the grace period: a tombstone
        // at generation 2.
        c.join(g, "m1", &["orders"]).await.unwrap();
        c.leave(g, "m1").await.unwrap();
    }
    clock.advance(coordinator_core::DEFAULT_EMPTY_GROUP_GRACE_MS);
    c.handle_timeout().await;
    assert_eq!(c.group_count(), 0);
    assert_eq!(c.unload_where(|g| g == "moving").await, 0, "no live group");
    assert_eq!(
        c.join("staying", "m1", &["orders"])
            .await
            .unwrap()
            .generation,
        Generation::new(3),
        "a group id this coordinator removed continues from its tombstone"
    );
    assert_eq!(
        c.join("moving", "m1", &["orders"])
            .await
            .unwrap()
            .generation,
        Generation::new(1),
        "an unloaded id is one this coordinator never knew"
    );
}

#[tokio::test]
async fn unload_where_waits_for_a_commit_in_flight_then_removes_the_group() {
    let store = store();
    let clock = ManualClock::new();
    let c = coordinator(&store, &clock, 0);
    let joined = c.join("g", "m1", &["orders"]).await.unwrap();
    let hold = store.hold(StoreOp::Commit);
    let commit = {
        let c = c.clone();
        tokio::spawn(async move {
            c.commit("g", "m1", joined.generation, &offsets(&[("orders", 0, 5)]))
                .await
        })
    };
    settle().await;
    assert_eq!(store.waiting(StoreOp::Commit), 1);
    let unload = {
        let c = c.clone();
        tokio::spawn(async move { c.unload_where(|g| g == "g").await })
    };
    settle().await;
    assert!(!unload.is_finished(), "the commit holds the group's gate");
    assert_eq!(c.state("g").await.unwrap(), GroupState::Stable);
    drop(hold);
    answered(commit).await.unwrap();
    assert_eq!(answered(unload).await, 1);
    assert_eq!(c.state("g").await.unwrap_err().code(), "GROUP_ID_NOT_FOUND");
    assert_eq!(
        store.committed("g", &tp("orders", 0)).await.unwrap(),
        Some(5),
        "the store keeps what was written; another coordinator serves it"
    );
}

#[tokio::test]
async fn an_unloaded_group_is_loaded_again_as_another_coordinator_left_it() {
    let store = store();
    let clock = ManualClock::new();
    let one = coordinator(&store, &clock, 0);
    let two = coordinator(&store, &clock, 0);
    let joined = stable_group(&one, "g").await;
    assert_eq!(joined.generation, Generation::new(1));
    // The slot moves to broker two.
    assert_eq!(one.unload_where(|g| g == "g").await, 1);
    assert_eq!(two.load_where(|g| g == "g").await.unwrap(), 1);
    let there = two.classic().describe("g").await.unwrap();
    assert_eq!(
        (there.state, there.generation, there.members.len()),
        (GroupState::Stable, Generation::new(1), 1)
    );
    // Its member leaves there: Empty in generation 2, written to the store by broker two.
    two.classic()
        .leave(
            "g",
            &[LeavingMember {
                member_id: joined.member_id.clone(),
                group_instance_id: None,
            }],
        )
        .await
        .unwrap()
        .into_iter()
        .for_each(|r| r.unwrap());
    assert_eq!(
        two.classic().describe("g").await.unwrap().generation,
        Generation::new(2)
    );
    // The slot comes back: broker one loads what broker two left, not what it had.
    assert_eq!(two.unload_where(|_| true).await, 1);
    assert_eq!(one.load_where(|g| g == "g").await.unwrap(), 1);
    let back = one.classic().describe("g").await.unwrap();
    assert_eq!(
        (back.state, back.generation, back.members.len()),
        (GroupState::Empty, Generation::new(2), 0)
    );
    // The old member is unknown; a new join continues the generations.
    let e = one
        .classic()
        .heartbeat("g", &joined.member_id, None, Some(joined.generation))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "UNKNOWN_MEMBER");
    let again = stable_group(&one, "g").await;
    assert_eq!(again.generation, Generation::new(3));
}
