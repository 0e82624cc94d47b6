//! Heartbeats, assignment reads and descriptions never wait for the disk: a commit stuck in
//! the store holds its group's commit gate, and nothing but installing a new generation of
//! that group waits for the gate.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{offsets, StoreOp, TestStore, Topics};
use coordinator_core::{Coordinator, GroupState, ManualClock};

/// Generous: a call that does not wait for the store answers in microseconds; one that does
/// never answers while the store is stuck. No test here depends on how fast anything is.
const PROMPT: Duration = Duration::from_secs(10);

async fn prompt<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PROMPT, f)
        .await
        .unwrap_or_else(|_| panic!("{what} waited for the stuck store"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_stuck_in_the_store_holds_up_nothing_but_the_next_generation_of_its_group() {
    let clock = ManualClock::new();
    let store = Arc::new(TestStore::default());
    let c = Arc::new(
        Coordinator::builder(
            store.clone(),
            Topics::with(&[("orders", 4)]),
            common::ModuloAssignor::named("modulo"),
        )
        .clock(Arc::new(clock.clone()))
        .session_timeout_ms(100)
        .build()
        .unwrap(),
    );
    let a = c.join("stuck", "m1", &["orders"]).await.unwrap();
    let other = c.join("other", "m1", &["orders"]).await.unwrap();

    // The disk hangs; a commit of group `stuck` enters the store and stays there.
    let hold = store.hold(StoreOp::Commit);
    let commit = {
        let c = c.clone();
        tokio::spawn(async move {
            c.commit("stuck", "m1", a.generation, &offsets(&[("orders", 0, 7)]))
                .await
        })
    };
    while store.waiting(StoreOp::Commit) == 0 {
        tokio::task::yield_now().await;
    }

    // A join of the same group must install a new generation: it waits for the commit.
    let join = {
        let c = c.clone();
        tokio::spawn(async move { c.join("stuck", "m2", &["orders"]).await })
    };
    // (Give it every chance to get ahead of the commit, which it must not.)
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(!join.is_finished(), "the join waits for the stuck commit");

    // Everything else answers, for this group and any other: heartbeats, assignment reads,
    // descriptions, states, and commits of other groups.
    prompt("heartbeat", c.heartbeat("stuck", "m1", a.generation))
        .await
        .unwrap();
    prompt("assignment", c.assignment("stuck", "m1"))
        .await
        .unwrap();
    let d = prompt("describe", c.describe("stuck")).await.unwrap();
    assert_eq!(
        d.generation, a.generation,
        "no new generation while the commit is in flight"
    );
    assert_eq!(
        prompt("state", c.state("stuck")).await.unwrap(),
        GroupState::Stable
    );
    prompt(
        "heartbeat of another group",
        c.heartbeat("other", "m1", other.generation),
    )
    .await
    .unwrap();
    prompt("describe of another group", c.describe("other"))
        .await
        .unwrap();
    prompt("committed read", c.committed_offsets("stuck"))
        .await
        .unwrap();
    clock.advance(50);
    prompt(
        "heartbeat after time moved",
        c.heartbeat("stuck", "m1", a.generation),
    )
    .await
    .unwrap();

    // The disk recovers: the commit lands first, then the join installs generation + 1.
    drop(hold);
    prompt("the commit", commit).await.unwrap().unwrap();
    let joined = prompt("the join", join).await.unwrap().unwrap();
    assert_eq!(joined.generation, a.generation.next());
    assert_eq!(
        store.calls(StoreOp::Commit),
        1,
        "exactly the one commit reached the store"
    );
}
