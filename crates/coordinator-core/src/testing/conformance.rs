//! [`offset_store_conformance`]: the contract of the [`OffsetStore`] port as executable
//! checks; every store adapter runs it (the way openraft's stores run its `testing::Suite`).
//! It panics with a message naming the broken rule, so it belongs in tests only.

#![allow(clippy::panic, clippy::expect_used)]

use std::sync::Arc;

use tokio::sync::RwLock;

use crate::error::{StorageError, StorageErrorKind};
use crate::ports::{CommitFence, OffsetStore};
use crate::types::{OffsetMap, TopicPartition};

fn tp(topic: &str, partition: u32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

/// The value of a call the contract says must succeed; panics naming the store's error.
fn ok<T>(result: Result<T, StorageError>) -> T {
    result.unwrap_or_else(|e| panic!("the store refused a valid call: {e}"))
}

fn offsets(entries: &[(&str, u32, i64)]) -> OffsetMap {
    entries.iter().map(|&(t, p, o)| (tp(t, p), o)).collect()
}

/// Runs every rule of the `OffsetStore` contract against fresh stores from `make_store`
/// (called once per rule; each call must return an empty store).
///
/// The fence rule is checked deterministically on a current-thread runtime (a store that
/// releases its fence and then yields before its write is visible is caught there); on a
/// multi-threaded runtime it still passes every correct store, but may miss a broken one.
pub async fn offset_store_conformance<F>(mut make_store: F)
where
    F: FnMut() -> Arc<dyn OffsetStore>,
{
    empty_store_reads_nothing(make_store()).await;
    commit_then_read_back(make_store()).await;
    commits_merge_and_overwrite(make_store()).await;
    groups_are_isolated_and_listed(make_store()).await;
    negative_offset_changes_nothing(make_store()).await;
    empty_commit_is_a_no_op(make_store()).await;
    extreme_values_round_trip(make_store()).await;
    delete_removes_partitions_or_whole_groups(make_store()).await;
    fence_is_held_until_the_commit_is_visible(make_store()).await;
    fence_is_held_until_the_delete_is_visible(make_store()).await;
}

/// A commit without fencing.
async fn commit(store: &dyn OffsetStore, group: &str, o: &OffsetMap) -> Result<(), StorageError> {
    store.commit(group, o, CommitFence::none()).await
}

async fn empty_store_reads_nothing(store: Arc<dyn OffsetStore>) {
    assert_eq!(ok(store.committed("g", &tp("t", 0)).await), None);
    assert!(ok(store.list("g").await).is_empty());
    assert!(ok(store.groups().await).is_empty());
}

async fn commit_then_read_back(store: Arc<dyn OffsetStore>) {
    let o = offsets(&[("orders", 1, 10), ("orders", 0, 5), ("audit", 3, 0)]);
    ok(commit(&*store, "g", &o).await);
    assert_eq!(ok(store.committed("g", &tp("orders", 0)).await), Some(5));
    assert_eq!(ok(store.committed("g", &tp("audit", 3)).await), Some(0));
    assert_eq!(ok(store.committed("g", &tp("orders", 2)).await), None);
    let listed: Vec<_> = ok(store.list("g").await).into_iter().collect();
    assert_eq!(
        listed,
        vec![
            (tp("audit", 3), 0),
            (tp("orders", 0), 5),
            (tp("orders", 1), 10)
        ],
        "list returns every committed offset, sorted by topic then partition"
    );
}

async fn commits_merge_and_overwrite(store: Arc<dyn OffsetStore>) {
    ok(commit(&*store, "g", &offsets(&[("t", 0, 5)])).await);
    ok(commit(&*store, "g", &offsets(&[("t", 1, 7)])).await);
    ok(commit(&*store, "g", &offsets(&[("t", 0, 9)])).await);
    assert_eq!(
        ok(store.list("g").await),
        offsets(&[("t", 0, 9), ("t", 1, 7)]),
        "a commit overwrites the partitions it names and keeps the others"
    );
    // Offsets may move backwards (a seek): the store keeps what it is told.
    ok(commit(&*store, "g", &offsets(&[("t", 0, 2)])).await);
    assert_eq!(ok(store.committed("g", &tp("t", 0)).await), Some(2));
}

async fn groups_are_isolated_and_listed(store: Arc<dyn OffsetStore>) {
    ok(commit(&*store, "b", &offsets(&[("t", 0, 2)])).await);
    ok(commit(&*store, "a", &offsets(&[("t", 0, 1)])).await);
    assert_eq!(ok(store.committed("a", &tp("t", 0)).await), Some(1));
    assert_eq!(ok(store.committed("b", &tp("t", 0)).await), Some(2));
    assert!(ok(store.list("c").await).is_empty());
    assert_eq!(
        ok(store.groups().await),
        ["a", "b"],
        "groups lists every group with an offset, sorted"
    );
}

async fn negative_offset_changes_nothing(store: Arc<dyn OffsetStore>) {
    ok(commit(&*store, "g", &offsets(&[("t", 0, 3)])).await);
    let err = commit(&*store, "g", &offsets(&[("t", 0, 4), ("t", 1, -1)]))
        .await
        .expect_err("a negative offset must be refused");
    assert_eq!(err.kind(), StorageErrorKind::InvalidOffset);
    assert_eq!(err.code(), "INVALID_ARGUMENT");
    assert_eq!(
        ok(store.list("g").await),
        offsets(&[("t", 0, 3)]),
        "a refused commit writes nothing, not even its valid entries"
    );
}

async fn empty_commit_is_a_no_op(store: Arc<dyn OffsetStore>) {
    ok(commit(&*store, "g", &OffsetMap::new()).await);
    assert!(ok(store.list("g").await).is_empty());
    assert!(
        ok(store.groups().await).is_empty(),
        "an empty commit does not create a group"
    );
}

async fn extreme_values_round_trip(store: Arc<dyn OffsetStore>) {
    let group = "grp \"quoted\" \\ ünïcødé ☃";
    let o = offsets(&[("t.with-dots_and-dashes", u32::MAX, i64::MAX), ("t", 0, 0)]);
    ok(commit(&*store, group, &o).await);
    assert_eq!(ok(store.list(group).await), o);
}

async fn delete_removes_partitions_or_whole_groups(store: Arc<dyn OffsetStore>) {
    let all = offsets(&[("t", 0, 1), ("t", 1, 2), ("u", 0, 3)]);
    ok(commit(&*store, "g", &all).await);
    ok(commit(&*store, "h", &offsets(&[("t", 0, 9)])).await);
    let some = [tp("t", 1), tp("u", 0), tp("absent", 7)];
    ok(store.delete("g", Some(&some), CommitFence::none()).await);
    assert_eq!(
        ok(store.list("g").await),
        offsets(&[("t", 0, 1)]),
        "delete removes exactly the named partitions (an absent one is no error)"
    );
    assert_eq!(ok(store.committed("g", &tp("t", 1)).await), None);
    ok(store.delete("g", None, CommitFence::none()).await);
    assert!(ok(store.list("g").await).is_empty());
    assert_eq!(
        ok(store.groups().await),
        ["h"],
        "a group whose offsets are all deleted is no longer listed"
    );
    assert_eq!(
        ok(store.committed("h", &tp("t", 0)).await),
        Some(9),
        "other groups are untouched"
    );
    ok(store.delete("never-seen", None, CommitFence::none()).await);
    ok(store
        .delete("h", Some(&[tp("t", 0)]), CommitFence::none())
        .await);
    assert!(
        ok(store.groups().await).is_empty(),
        "deleting a group's last partition removes the group"
    );
}

/// What a write does, for the fence checks.
enum Write {
    Commit,
    Delete,
}

/// Plays the coordinator: holds a shared guard of a commit gate, hands it to the store as
/// the write's fence, while a "rebalance" waits for the gate exclusively. The rebalance must
/// see the write as soon as it gets the gate: a store that released the fence before its
/// write became visible would let a commit checked against an old generation land after
/// the next one was installed.
async fn fence_check(store: Arc<dyn OffsetStore>, write: Write) {
    let partition = tp("t", 0);
    ok(commit(&*store, "g", &offsets(&[("t", 0, 1)])).await);
    let gate = Arc::new(RwLock::new(()));
    let fence = CommitFence::gate(gate.clone().read_owned().await);
    let rebalance = {
        let (gate, store, partition) = (gate.clone(), store.clone(), partition.clone());
        tokio::spawn(async move {
            let _installing = gate.write().await;
            store.committed("g", &partition).await
        })
    };
    // Let the rebalance queue up for the gate before the write starts.
    tokio::task::yield_now().await;
    let expected = match write {
        Write::Commit => {
            ok(store.commit("g", &offsets(&[("t", 0, 4)]), fence).await);
            Some(4)
        }
        Write::Delete => {
            ok(store
                .delete("g", Some(std::slice::from_ref(&partition)), fence)
                .await);
            None
        }
    };
    let seen = ok(rebalance.await.expect("the rebalance task does not panic"));
    assert_eq!(
        seen, expected,
        "the fence was released before the write was visible: a rebalance got the commit \
         gate and still read the old offset"
    );
    // Once the write has returned the fence must be gone: a leaked fence would block the
    // group's rebalances for ever.
    assert!(
        gate.try_write().is_ok(),
        "the fence is released by the time the write returns"
    );
}

async fn fence_is_held_until_the_commit_is_visible(store: Arc<dyn OffsetStore>) {
    fence_check(store, Write::Commit).await;
}

async fn fence_is_held_until_the_delete_is_visible(store: Arc<dyn OffsetStore>) {
    fence_check(store, Write::Delete).await;
}
