//! Groups have a lifecycle: Empty groups without offsets go after a grace period, an Empty
//! group's offsets expire `offsets_retention_ms` after it became Empty, groups can be
//! deleted, and a re-created group never reuses a generation. All of it runs from the same
//! timer entry point (`handle_timeout` / `expire_members`), driven here by a manual clock.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::sync::Arc;

use common::{offsets, tp, ModuloAssignor, StoreOp, TestStore, Topics};
use coordinator_core::{
    CommitFence, Coordinator, Generation, GroupState, ManualClock, OffsetStore,
};

const SESSION: u64 = 100;
const GRACE: u64 = 1_000;
const RETENTION: u64 = 10_000;

struct F {
    c: Coordinator,
    clock: ManualClock,
    store: Arc<TestStore>,
}

fn f() -> F {
    let clock = ManualClock::new();
    let store = Arc::new(TestStore::default());
    let c = Coordinator::builder(
        store.clone(),
        Topics::with(&[("orders", 2)]),
        ModuloAssignor::named("m"),
    )
    .clock(Arc::new(clock.clone()))
    .session_timeout_ms(SESSION)
    .empty_group_grace_ms(GRACE)
    .offsets_retention_ms(RETENTION)
    .build()
    .unwrap();
    F { c, clock, store }
}

impl F {
    async fn at(&self, ms: u64) {
        self.clock.set(ms).unwrap();
        self.c.handle_timeout().await;
    }
}

#[tokio::test]
async fn an_empty_group_without_offsets_is_removed_after_the_grace_period() {
    let f = f();
    f.c.join("g", "m1", &["orders"]).await.unwrap();
    f.c.leave("g", "m1").await.unwrap();
    assert_eq!(f.c.state("g").await.unwrap(), GroupState::Empty);
    f.at(GRACE - 1).await;
    assert_eq!(
        f.c.state("g").await.unwrap(),
        GroupState::Empty,
        "still in its grace period"
    );
    f.at(GRACE).await;
    assert_eq!(
        f.c.state("g").await.unwrap_err().code(),
        "GROUP_ID_NOT_FOUND"
    );
    assert_eq!(
        f.c.group_count(),
        0,
        "nothing is kept for it but its tombstone"
    );
}

#[tokio::test]
async fn an_empty_groups_offsets_expire_counted_from_when_it_became_empty() {
    let f = f();
    let a = f.c.join("g", "m1", &["orders"]).await.unwrap();
    f.c.commit("g", "m1", a.generation, &offsets(&[("orders", 0, 5)]))
        .await
        .unwrap();
    // While it has a member the offsets never expire, however old they are.
    for t in (SESSION / 2..=RETENTION * 2).step_by(SESSION as usize / 2) {
        f.clock.set(t).unwrap();
        f.c.heartbeat("g", "m1", a.generation).await.unwrap();
        f.c.handle_timeout().await;
    }
    assert_eq!(f.c.committed("g", &tp("orders", 0)).await.unwrap(), Some(5));
    let empty_at = RETENTION * 2;
    f.c.leave("g", "m1").await.unwrap();
    f.at(empty_at + RETENTION - 1).await;
    assert_eq!(f.c.committed("g", &tp("orders", 0)).await.unwrap(), Some(5));
    assert_eq!(f.c.state("g").await.unwrap(), GroupState::Empty);
    f.at(empty_at + RETENTION).await;
    assert_eq!(
        f.c.committed("g", &tp("orders", 0)).await.unwrap(),
        None,
        "expired"
    );
    assert!(f.store.groups().await.unwrap().is_empty());
    assert_eq!(
        f.c.state("g").await.unwrap_err().code(),
        "GROUP_ID_NOT_FOUND",
        "without offsets, long past its grace period, the group is gone"
    );
}

#[tokio::test]
async fn a_group_that_gets_a_member_again_keeps_its_offsets() {
    let f = f();
    let a = f.c.join("g", "m1", &["orders"]).await.unwrap();
    f.c.commit("g", "m1", a.generation, &offsets(&[("orders", 0, 5)]))
        .await
        .unwrap();
    f.c.leave("g", "m1").await.unwrap();
    f.at(RETENTION - 1).await;
    let b = f.c.join("g", "m2", &["orders"]).await.unwrap();
    // m2 stays alive well past the first retention deadline.
    for t in (RETENTION..RETENTION * 2).step_by(SESSION as usize / 2) {
        f.clock.set(t).unwrap();
        f.c.heartbeat("g", "m2", b.generation).await.unwrap();
        f.c.handle_timeout().await;
    }
    assert_eq!(f.c.committed("g", &tp("orders", 0)).await.unwrap(), Some(5));
}

#[tokio::test]
async fn direct_commits_make_a_group_whose_offsets_expire_too() {
    let f = f();
    f.c.commit_direct("manual", &offsets(&[("orders", 1, 3)]))
        .await
        .unwrap();
    f.at(RETENTION - 1).await;
    assert_eq!(
        f.c.committed("manual", &tp("orders", 1)).await.unwrap(),
        Some(3)
    );
    f.at(RETENTION).await;
    assert_eq!(
        f.c.committed("manual", &tp("orders", 1)).await.unwrap(),
        None
    );
    assert_eq!(f.c.group_count(), 0);
}

#[tokio::test]
async fn groups_loaded_from_the_store_expire_from_when_the_coordinator_started() {
    let f = f();
    f.store
        .commit("old", &offsets(&[("orders", 0, 9)]), CommitFence::none())
        .await
        .unwrap();
    f.clock.set(50).unwrap();
    assert_eq!(f.c.load().await.unwrap(), 1);
    f.at(50 + RETENTION - 1).await;
    assert_eq!(
        f.c.committed("old", &tp("orders", 0)).await.unwrap(),
        Some(9)
    );
    f.at(50 + RETENTION).await;
    assert_eq!(f.c.committed("old", &tp("orders", 0)).await.unwrap(), None);
}

#[tokio::test]
async fn delete_group_takes_only_empty_groups_and_their_offsets() {
    let f = f();
    let a = f.c.join("g", "m1", &["orders"]).await.unwrap();
    f.c.commit("g", "m1", a.generation, &offsets(&[("orders", 0, 5)]))
        .await
        .unwrap();
    let err = f.c.delete_group("g").await.unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_code()),
        ("NON_EMPTY_GROUP", Some(68))
    );
    assert_eq!(
        f.c.committed("g", &tp("orders", 0)).await.unwrap(),
        Some(5),
        "nothing deleted"
    );
    f.c.leave("g", "m1").await.unwrap();
    f.c.delete_group("g").await.unwrap();
    assert_eq!(f.c.committed("g", &tp("orders", 0)).await.unwrap(), None);
    assert_eq!(
        f.c.state("g").await.unwrap_err().code(),
        "GROUP_ID_NOT_FOUND"
    );
    let err = f.c.delete_group("g").await.unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_code()),
        ("GROUP_ID_NOT_FOUND", Some(69))
    );
}

#[tokio::test]
async fn a_recreated_group_continues_its_generation_so_a_stale_member_cannot_commit() {
    let f = f();
    // The old incarnation: m1 joins (generation 1) and its process hangs; its session ends,
    // the group is Empty (generation 2), and after the grace period it is removed.
    let stale = f.c.join("g", "m1", &["orders"]).await.unwrap();
    assert_eq!(stale.generation, Generation::new(1));
    f.at(SESSION + 1).await;
    f.at(SESSION + 1 + GRACE).await;
    assert_eq!(
        f.c.state("g").await.unwrap_err().code(),
        "GROUP_ID_NOT_FOUND"
    );
    // A new incarnation under the same id, and a new process that happens to reuse "m1".
    let fresh = f.c.join("g", "m1", &["orders"]).await.unwrap();
    assert_eq!(
        fresh.generation,
        Generation::new(3),
        "generations never repeat for an id"
    );
    // The hung process wakes up and commits under its old generation: fenced.
    let err =
        f.c.commit("g", "m1", stale.generation, &offsets(&[("orders", 0, 1)]))
            .await
            .unwrap_err();
    assert_eq!(err.code(), "ILLEGAL_GENERATION");
    assert!(f.store.calls(StoreOp::Commit) == 0);
}

/// A simple group's offsets expire each from its own commit, as in Kafka 4: one committed
/// later outlives one committed earlier (before, the group's last commit restarted every
/// offset's retention).
#[tokio::test]
async fn a_simple_groups_offsets_expire_each_from_its_own_commit() {
    let f = f();
    f.c.commit_direct("manual", &offsets(&[("orders", 0, 1)]))
        .await
        .unwrap();
    f.at(RETENTION / 2).await;
    f.c.commit_direct("manual", &offsets(&[("orders", 1, 2)]))
        .await
        .unwrap();
    f.at(RETENTION - 1).await;
    assert_eq!(f.c.committed_offsets("manual").await.unwrap().len(), 2);
    f.at(RETENTION).await;
    assert_eq!(
        f.c.committed_offsets("manual").await.unwrap(),
        offsets(&[("orders", 1, 2)]),
        "orders-0 expired a retention after its commit; orders-1 is younger"
    );
    f.at(RETENTION / 2 + RETENTION).await;
    assert!(f.c.committed_offsets("manual").await.unwrap().is_empty());
    assert_eq!(
        f.c.group_count(),
        0,
        "no offsets left, past its grace period"
    );
}

/// A Stable group's offsets of a topic no member subscribes to expire from their commit
/// (Kafka 4's rule for a consumer group that knows its subscriptions); those of subscribed
/// topics never do, however old.
#[tokio::test]
async fn a_stable_groups_offsets_of_unsubscribed_topics_expire() {
    let f = f();
    let a = f.c.join("g", "m1", &["orders"]).await.unwrap();
    f.c.commit("g", "m1", a.generation, &offsets(&[("orders", 0, 5)]))
        .await
        .unwrap();
    // Left from before: an offset of a topic the group no longer reads.
    f.c.commit_direct("g", &offsets(&[("payments", 0, 3)]))
        .await
        .unwrap();
    for t in (SESSION / 2..=RETENTION + SESSION).step_by(SESSION as usize / 2) {
        f.clock.set(t).unwrap();
        f.c.heartbeat("g", "m1", a.generation).await.unwrap();
        f.c.handle_timeout().await;
    }
    assert_eq!(f.c.state("g").await.unwrap(), GroupState::Stable);
    assert_eq!(
        f.c.committed_offsets("g").await.unwrap(),
        offsets(&[("orders", 0, 5)]),
        "payments-0 expired; the subscribed orders-0 did not"
    );
}
