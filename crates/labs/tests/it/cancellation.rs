//! A commit whose future is dropped (a timeout, `select!`, an aborted task) while the JSON
//! store's blocking write is still running must still be fenced: the rebalance that follows
//! waits for the write, so a write checked against generation G never lands after the group
//! moved to G+1.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Duration;

use coordinator_core::{Coordinator, Generation, OffsetMap, OffsetStore, TopicPartition};
use offset_store::testing::{FsOp, SimFs};
use offset_store::JsonFileStore;

/// A gate the simulated disk's first fsync waits at.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_commit_still_lands_before_the_next_generation() {
    let fs = SimFs::new();
    let store = Arc::new(JsonFileStore::open_with_fs("/sim/offsets.json", fs.clone()).unwrap());
    let topics: BTreeMap<String, u32> = [("orders".to_string(), 2)].into();
    let coordinator = Arc::new(
        Coordinator::builder(
            store.clone(),
            Arc::new(topics),
            Arc::new(assignor::MiniKafkaRoundRobinAssignor),
        )
        .build()
        .unwrap(),
    );
    let first = coordinator.join("g", "m1", &["orders"]).await.unwrap();
    assert_eq!(first.generation, Generation::new(1));

    let gate = Arc::new(Gate::default());
    let (entered, fsync_reached) = mpsc::channel();
    let entered = Mutex::new(entered);
    let hook_gate = gate.clone();
    fs.set_hook(Some(Arc::new(move |op| {
        if op == FsOp::Fsync {
            let _ = entered.lock().unwrap().send(());
            hook_gate.wait();
        }
    })));

    // m1 commits under generation 1; the write parks in its fsync; the caller gives up.
    let offsets: OffsetMap = [(TopicPartition::new("orders", 1), 7)].into();
    let commit = {
        let c = coordinator.clone();
        tokio::spawn(async move { c.commit("g", "m1", first.generation, &offsets).await })
    };
    tokio::task::spawn_blocking(move || fsync_reached.recv().unwrap())
        .await
        .unwrap();
    commit.abort();
    assert!(commit.await.unwrap_err().is_cancelled());

    // m2 joins: the rebalance to generation 2 must wait for the abandoned write. Inside the
    // same task, right after the join returns, the write must already be visible.
    let mut join = {
        let (c, store) = (coordinator.clone(), store.clone());
        tokio::spawn(async move {
            let joined = c.join("g", "m2", &["orders"]).await;
            let seen = store
                .committed("g", &TopicPartition::new("orders", 1))
                .await;
            (joined, seen)
        })
    };
    // With the fence, the join cannot finish while the write is parked, so this wait always
    // runs out: no timing decides whether correct code passes. Without the fence, the join
    // finishes within microseconds and the check inside the task sees no write; the bound
    // only sets how surely a broken build is caught here.
    let early = tokio::time::timeout(Duration::from_millis(200), &mut join).await;
    gate.open(); // before asserting: a parked blocking thread would hang the runtime's shutdown
    assert!(
        early.is_err(),
        "the rebalance completed while a generation-1 write was still on its way"
    );
    let (second, seen) = join.await.unwrap();
    assert_eq!(second.unwrap().generation, Generation::new(2));
    assert_eq!(
        seen.unwrap(),
        Some(7),
        "the write landed before generation 2 existed"
    );
    // From now on m1's generation-1 commits are refused.
    fs.set_hook(None);
    let again: OffsetMap = [(TopicPartition::new("orders", 0), 8)].into();
    let err = coordinator
        .commit("g", "m1", first.generation, &again)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ILLEGAL_GENERATION");
}
