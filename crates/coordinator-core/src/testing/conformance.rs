//! [`offset_store_conformance`]: the contract of the [`OffsetStore`] port as executable
//! checks; every store adapter runs it (the way openraft's stores run its `testing::Suite`).
//! It panics with a message naming the broken rule, so it belongs in tests only.

#![allow(clippy::panic, clippy::expect_used)]

use std::sync::Arc;

use tokio::sync::RwLock;

use crate::error::{StorageError, StorageErrorKind};
use crate::group::classic::ClassicProtocol;
use crate::group::{GroupKind, GroupRecord, MemberRecord};
use crate::ports::{CommitFence, OffsetStore};
use crate::types::{
    offsets_of, CommittedOffsets, Generation, GroupState, OffsetAndMetadata, OffsetMap,
    TopicPartition,
};

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
    metadata_round_trips_or_reads_back_empty(make_store()).await;
    a_negative_offset_with_metadata_changes_nothing(make_store()).await;
    group_records_keep_the_latest_until_a_tombstone(make_store()).await;
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

fn with_metadata(entries: &[(&str, u32, i64, &str)]) -> CommittedOffsets {
    entries
        .iter()
        .map(|&(t, p, o, m)| {
            let mut full = OffsetAndMetadata::new(o).with_metadata(m);
            full.leader_epoch = Some(7);
            full.commit_timestamp_ms = 1_000 + u64::from(p);
            (tp(t, p), full)
        })
        .collect()
}

/// A store that keeps metadata gives back exactly what was committed with it, and a plain
/// commit of a partition replaces its metadata; one that keeps offsets only gives back the
/// offsets, with no leader epoch, empty metadata and commit time 0. Either way `list` and
/// `list_with_metadata` agree on the offsets, and commits merge.
async fn metadata_round_trips_or_reads_back_empty(store: Arc<dyn OffsetStore>) {
    let first = with_metadata(&[("t", 0, 5, "a"), ("t", 1, 6, "b")]);
    ok(store
        .commit_with_metadata("g", &first, CommitFence::none())
        .await);
    ok(commit(&*store, "g", &offsets(&[("t", 1, 9)])).await);
    let read = ok(store.list_with_metadata("g").await);
    assert_eq!(
        offsets_of(&read),
        ok(store.list("g").await),
        "list and list_with_metadata disagree on the offsets"
    );
    assert_eq!(offsets_of(&read), offsets(&[("t", 0, 5), ("t", 1, 9)]));
    if store.keeps_metadata() {
        assert_eq!(read[&tp("t", 0)], first[&tp("t", 0)], "metadata not kept");
        assert_eq!(
            read[&tp("t", 1)],
            OffsetAndMetadata::new(9),
            "a plain commit must replace the partition's metadata"
        );
    } else {
        for (tp, o) in &read {
            assert_eq!(
                *o,
                OffsetAndMetadata::new(o.offset),
                "{tp}: says it keeps none"
            );
        }
    }
}

/// A commit with metadata and one negative offset is refused whole.
async fn a_negative_offset_with_metadata_changes_nothing(store: Arc<dyn OffsetStore>) {
    ok(commit(&*store, "g", &offsets(&[("t", 0, 1)])).await);
    let bad = with_metadata(&[("t", 0, 2, "x"), ("t", 1, -1, "y")]);
    let err = store
        .commit_with_metadata("g", &bad, CommitFence::none())
        .await
        .expect_err("a negative offset with metadata was accepted");
    assert_eq!(err.kind(), StorageErrorKind::InvalidOffset, "{err}");
    assert_eq!(ok(store.list("g").await), offsets(&[("t", 0, 1)]));
}

fn record(group: &str, generation: u64) -> GroupRecord {
    GroupRecord {
        group_id: group.to_string(),
        kind: GroupKind::Classic,
        generation: Generation::new(generation),
        state: GroupState::Stable,
        protocol_type: "consumer".to_string(),
        protocol: Some("range".to_string()),
        leader: Some("m-1".to_string()),
        members: vec![MemberRecord {
            member_id: "m-1".to_string(),
            group_instance_id: Some("i-1".to_string()),
            client_id: "c".to_string(),
            client_host: "/127.0.0.1".to_string(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocols: vec![ClassicProtocol::new("range", vec![0u8, 1, 2]).with_topics(["t"])],
            assignment: vec![3u8, 4].into(),
            partitions: vec![tp("t", 0)],
            consumer: None,
        }],
    }
}

/// A store that keeps group records gives back the latest of each group, sorted by id,
/// until a tombstone removes it; one that keeps none gives back none and accepts writes.
async fn group_records_keep_the_latest_until_a_tombstone(store: Arc<dyn OffsetStore>) {
    for (group, generation) in [("b", 1), ("a", 1), ("b", 2)] {
        ok(store
            .write_group(group, Some(&record(group, generation)), CommitFence::none())
            .await);
    }
    let loaded = ok(store.load_groups().await);
    if !store.keeps_groups() {
        assert!(
            loaded.is_empty(),
            "says it keeps no groups, but loaded {loaded:?}"
        );
        return;
    }
    assert_eq!(loaded, [record("a", 1), record("b", 2)]);
    ok(store.write_group("b", None, CommitFence::none()).await);
    assert_eq!(ok(store.load_groups().await), [record("a", 1)]);
    // A tombstone of a group with no record is no error.
    ok(store.write_group("c", None, CommitFence::none()).await);
}
