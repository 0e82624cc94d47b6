//! The shared store wrapper with fault hooks (`coordinator_core::testing::FaultyStore`) does
//! what each hook says, and nothing else: the other tests rely on it to fail, hold, count and
//! inspect calls. (Its fence-breaking hook is checked by `conformance`.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{offsets, tp, FaultyStore, MapStore, StoreOp, TestStore};
use coordinator_core::{CommitFence, OffsetStore, StorageErrorKind};

async fn until(what: &str, condition: impl Fn() -> bool) {
    for _ in 0..10_000 {
        if condition() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("never happened: {what}");
}

#[tokio::test]
async fn a_held_method_waits_until_every_hold_is_dropped_and_nothing_else_waits() {
    let store = Arc::new(TestStore::default());
    let (first, second) = (store.hold(StoreOp::Commit), store.hold(StoreOp::Commit));
    let commit = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .commit("g", &offsets(&[("t", 0, 1)]), CommitFence::none())
                .await
        })
    };
    until("the commit waits", || store.waiting(StoreOp::Commit) == 1).await;
    assert_eq!(store.calls(StoreOp::Commit), 1);
    // Other methods go through meanwhile, and see nothing of the held commit.
    assert_eq!(store.committed("g", &tp("t", 0)).await.unwrap(), None);
    store.delete("g", None, CommitFence::none()).await.unwrap();
    assert_eq!(store.waiting(StoreOp::Delete), 0);
    drop(first);
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(!commit.is_finished(), "one hold is still alive");
    drop(second);
    commit.await.unwrap().unwrap();
    assert_eq!(store.waiting(StoreOp::Commit), 0);
    assert_eq!(store.committed("g", &tp("t", 0)).await.unwrap(), Some(1));
}

#[tokio::test]
async fn a_call_dropped_while_held_no_longer_waits() {
    let store = Arc::new(TestStore::default());
    let hold = store.hold(StoreOp::List);
    let list = {
        let store = store.clone();
        tokio::spawn(async move { store.list("g").await })
    };
    until("the list waits", || store.waiting(StoreOp::List) == 1).await;
    list.abort();
    assert!(list.await.unwrap_err().is_cancelled());
    assert_eq!(store.waiting(StoreOp::List), 0);
    drop(hold);
    assert!(store.list("g").await.unwrap().is_empty());
    assert_eq!(store.calls(StoreOp::List), 2);
}

#[tokio::test]
async fn a_failing_method_fails_without_reaching_the_store_until_healed() {
    let store = TestStore::default();
    store.fail(
        StoreOp::Commit,
        StorageErrorKind::Io,
        "disk on fire: /dev/null",
    );
    for _ in 0..2 {
        let err = store
            .commit("g", &offsets(&[("t", 0, 1)]), CommitFence::none())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), StorageErrorKind::Io);
        assert!(err.to_string().contains("disk on fire: /dev/null"), "{err}");
    }
    assert!(
        store.groups().await.unwrap().is_empty(),
        "nothing reached it"
    );
    store.heal(StoreOp::Commit);
    store
        .commit("g", &offsets(&[("t", 0, 1)]), CommitFence::none())
        .await
        .unwrap();
    assert_eq!(store.groups().await.unwrap(), ["g"]);
    assert_eq!(store.calls(StoreOp::Commit), 3);
    assert_eq!(store.calls(StoreOp::Groups), 2);
}

#[tokio::test]
async fn inspect_commits_checks_each_round_before_the_write_lands() {
    let store = Arc::new(TestStore::default());
    let rounds = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    {
        let (rounds, seen, inner) = (rounds.clone(), seen.clone(), store.inner().unwrap());
        store.inspect_commits(3, move |group, o| {
            rounds.fetch_add(1, Ordering::SeqCst);
            let landed = inner.data.lock().unwrap().contains_key(group);
            seen.lock()
                .unwrap()
                .push((group.to_string(), o.len(), landed));
        });
    }
    store
        .commit(
            "g",
            &offsets(&[("t", 0, 1), ("t", 1, 2)]),
            CommitFence::none(),
        )
        .await
        .unwrap();
    assert_eq!(rounds.load(Ordering::SeqCst), 3);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![("g".to_string(), 2, false); 3],
        "every round runs while the commit is not yet in the inner store"
    );
    assert_eq!(store.list("g").await.unwrap().len(), 2);
}

#[tokio::test]
async fn replace_inner_drops_the_old_store_before_making_the_next() {
    let store: FaultyStore<dyn OffsetStore> = FaultyStore::from_arc(Arc::new(MapStore::default()));
    store
        .commit("g", &offsets(&[("t", 0, 1)]), CommitFence::none())
        .await
        .unwrap();
    let old = Arc::downgrade(&store.inner().unwrap());
    store.replace_inner(|| {
        assert!(old.upgrade().is_none(), "the old store is gone first");
        Arc::new(MapStore::default())
    });
    assert!(store.list("g").await.unwrap().is_empty(), "the new store");
}
