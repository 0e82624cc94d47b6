//! Test kits for adapters of the core's ports.
//!
//! [`offset_store_conformance`] is the contract of the [`OffsetStore`] port as executable
//! checks; every store adapter runs it (the way openraft's stores run its `testing::Suite`).
//! It panics with a message naming the broken rule, so it belongs in tests only.

#![allow(clippy::panic, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{StorageError, StorageErrorKind};
use crate::offset_store::{CommitFence, OffsetStore};
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
pub async fn offset_store_conformance<F>(mut make_store: F)
where
    F: FnMut() -> Arc<dyn OffsetStore>,
{
    empty_store_reads_nothing(make_store()).await;
    commit_then_read_back(make_store()).await;
    commits_merge_and_overwrite(make_store()).await;
    groups_are_isolated(make_store()).await;
    negative_offset_changes_nothing(make_store()).await;
    commit_many_is_all_or_nothing(make_store()).await;
    empty_commit_is_a_no_op(make_store()).await;
    extreme_values_round_trip(make_store()).await;
    fenced_commit_lands_and_releases_its_fence(make_store()).await;
}

async fn empty_store_reads_nothing(store: Arc<dyn OffsetStore>) {
    assert_eq!(ok(store.committed("g", &tp("t", 0)).await), None);
    assert!(ok(store.list("g").await).is_empty());
}

async fn commit_then_read_back(store: Arc<dyn OffsetStore>) {
    let o = offsets(&[("orders", 1, 10), ("orders", 0, 5), ("audit", 3, 0)]);
    ok(store.commit("g", &o).await);
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
    ok(store.commit("g", &offsets(&[("t", 0, 5)])).await);
    ok(store.commit("g", &offsets(&[("t", 1, 7)])).await);
    ok(store.commit("g", &offsets(&[("t", 0, 9)])).await);
    assert_eq!(
        ok(store.list("g").await),
        offsets(&[("t", 0, 9), ("t", 1, 7)]),
        "a commit overwrites the partitions it names and keeps the others"
    );
    // Offsets may move backwards (a seek): the store keeps what it is told.
    ok(store.commit("g", &offsets(&[("t", 0, 2)])).await);
    assert_eq!(ok(store.committed("g", &tp("t", 0)).await), Some(2));
}

async fn groups_are_isolated(store: Arc<dyn OffsetStore>) {
    ok(store.commit("a", &offsets(&[("t", 0, 1)])).await);
    ok(store.commit("b", &offsets(&[("t", 0, 2)])).await);
    assert_eq!(ok(store.committed("a", &tp("t", 0)).await), Some(1));
    assert_eq!(ok(store.committed("b", &tp("t", 0)).await), Some(2));
    assert!(ok(store.list("c").await).is_empty());
}

async fn negative_offset_changes_nothing(store: Arc<dyn OffsetStore>) {
    ok(store.commit("g", &offsets(&[("t", 0, 3)])).await);
    let err = store
        .commit("g", &offsets(&[("t", 0, 4), ("t", 1, -1)]))
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

async fn commit_many_is_all_or_nothing(store: Arc<dyn OffsetStore>) {
    let mut many = BTreeMap::new();
    many.insert("a".to_string(), offsets(&[("t", 0, 1)]));
    many.insert("b".to_string(), offsets(&[("t", 0, 2), ("u", 1, 3)]));
    ok(store.commit_many(&many).await);
    assert_eq!(ok(store.committed("a", &tp("t", 0)).await), Some(1));
    assert_eq!(ok(store.committed("b", &tp("u", 1)).await), Some(3));

    let mut bad = BTreeMap::new();
    bad.insert("a".to_string(), offsets(&[("t", 0, 100)]));
    bad.insert("z".to_string(), offsets(&[("t", 0, -5)]));
    let err = store.commit_many(&bad).await.expect_err("negative offset");
    assert_eq!(err.kind(), StorageErrorKind::InvalidOffset);
    assert_eq!(
        ok(store.committed("a", &tp("t", 0)).await),
        Some(1),
        "commit_many is all or nothing"
    );
    assert!(ok(store.list("z").await).is_empty());
    ok(store.commit_many(&BTreeMap::new()).await);
}

async fn empty_commit_is_a_no_op(store: Arc<dyn OffsetStore>) {
    ok(store.commit("g", &OffsetMap::new()).await);
    assert!(ok(store.list("g").await).is_empty());
}

async fn extreme_values_round_trip(store: Arc<dyn OffsetStore>) {
    let group = "grp \"quoted\" \\ ünïcødé ☃";
    let o = offsets(&[("t.with-dots_and-dashes", u32::MAX, i64::MAX), ("t", 0, 0)]);
    ok(store.commit(group, &o).await);
    assert_eq!(ok(store.list(group).await), o);
}

/// Sets its flag when dropped: stands in for the coordinator's group lock.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

async fn fenced_commit_lands_and_releases_its_fence(store: Arc<dyn OffsetStore>) {
    let released = Arc::new(AtomicBool::new(false));
    let fence = CommitFence::holding(DropFlag(released.clone()));
    ok(store
        .commit_fenced("g", &offsets(&[("t", 0, 4)]), fence)
        .await);
    assert_eq!(
        ok(store.committed("g", &tp("t", 0)).await),
        Some(4),
        "a fenced commit lands like any other"
    );
    // Once the commit has returned, the fence must be gone: a leaked fence would block the
    // group's rebalances for ever.
    assert!(
        released.load(Ordering::SeqCst),
        "the fence is released by the time the commit returns"
    );
}
