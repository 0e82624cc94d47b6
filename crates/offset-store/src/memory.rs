//! [`MemoryStore`]: committed offsets in memory, sharded per group, with failure switches.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use async_trait::async_trait;
use coordinator_core::txn::TransactionRecord;
use coordinator_core::{
    validate_committed, validate_offsets, CommitFence, CommittedOffsets, GroupRecord,
    OffsetAndMetadata, OffsetMap, OffsetStore, StorageError, StorageErrorKind, TopicPartition,
};

/// One group's offsets behind its own lock: the bare offsets, and beside them, only for
/// partitions committed with any, their leader epoch, metadata and commit time. A plain
/// commit (the chapter's hot path) then writes `i64`s into a map of `i64`s, as before
/// metadata was kept.
#[derive(Debug, Default)]
struct Offsets {
    offsets: OffsetMap,
    metadata: BTreeMap<TopicPartition, OffsetAndMetadata>,
}

impl Offsets {
    fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    fn commit(&mut self, offsets: &OffsetMap) {
        for (tp, &o) in offsets {
            self.offsets.insert(tp.clone(), o);
        }
        if !self.metadata.is_empty() {
            for tp in offsets.keys() {
                self.metadata.remove(tp);
            }
        }
    }

    fn commit_full(&mut self, offsets: &CommittedOffsets) {
        for (tp, o) in offsets {
            self.offsets.insert(tp.clone(), o.offset);
            if *o == OffsetAndMetadata::new(o.offset) {
                self.metadata.remove(tp);
            } else {
                self.metadata.insert(tp.clone(), o.clone());
            }
        }
    }

    fn remove(&mut self, tp: &TopicPartition) {
        self.offsets.remove(tp);
        self.metadata.remove(tp);
    }

    fn clear(&mut self) {
        self.offsets.clear();
        self.metadata.clear();
    }

    fn full(&self) -> CommittedOffsets {
        self.offsets
            .iter()
            .map(|(tp, &o)| {
                let full = self
                    .metadata
                    .get(tp)
                    .cloned()
                    .unwrap_or_else(|| OffsetAndMetadata::new(o));
                (tp.clone(), full)
            })
            .collect()
    }
}

type Shard = Arc<Mutex<Offsets>>;

/// An in-memory [`OffsetStore`]: nothing survives the process. For tests, benches and
/// deployments that keep offsets elsewhere. It keeps Kafka's whole [`OffsetAndMetadata`]
/// (leader epoch, metadata string, commit time); a plain [`commit`](OffsetStore::commit)
/// stores an offset with none.
///
/// Each group has its own mutex, found through a map that is write-locked only when a group
/// is seen for the first time, so commits to different groups do not contend. The locks are
/// `std::sync` ones, held for a map update and never across an `.await`: a commit never
/// yields while holding them, so an async mutex would buy nothing and cost more.
///
/// # Failure switches
///
/// Like raft-rs's `MemStorage`, the store can be told to fail, so tests can check what a
/// caller does when storage breaks: [`set_failing`](Self::set_failing) and
/// [`fail_next_commits`](Self::fail_next_commits) make commits return an
/// [`Io`](StorageErrorKind::Io) error, and [`set_reads_failing`](Self::set_reads_failing)
/// does the same for reads. A failed call changes nothing. Offsets are validated first: a
/// negative offset is refused as [`InvalidOffset`](StorageErrorKind::InvalidOffset) even
/// while the store is failing.
///
/// ```
/// # use coordinator_core::{CommitFence, OffsetMap, OffsetStore, StorageErrorKind, TopicPartition};
/// # use offset_store::MemoryStore;
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let offsets: OffsetMap = [(TopicPartition::new("orders", 0), 7)].into();
/// store.fail_next_commits(1);
/// let err = store.commit("workers", &offsets, CommitFence::none()).await.unwrap_err();
/// assert_eq!(err.kind(), StorageErrorKind::Io);
/// assert!(store.list("workers").await.unwrap().is_empty());
/// store.commit("workers", &offsets, CommitFence::none()).await.unwrap();
/// assert_eq!(store.list("workers").await.unwrap(), offsets);
/// # });
/// ```
#[derive(Debug, Default)]
pub struct MemoryStore {
    groups: RwLock<HashMap<String, Shard>>,
    /// Groups' durable records, by group id.
    records: Mutex<BTreeMap<String, GroupRecord>>,
    /// The transaction coordinator's records, by transactional id.
    transactions: Mutex<BTreeMap<String, TransactionRecord>>,
    failing: AtomicBool,
    fail_next: AtomicU64,
    reads_failing: AtomicBool,
}

impl MemoryStore {
    /// An empty store that does not fail.
    pub fn new() -> Self {
        Self::default()
    }

    /// While `true`, every write (`commit` and `delete`) fails with an
    /// [`Io`](StorageErrorKind::Io) error and changes nothing.
    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// The next `n` commits fail with an [`Io`](StorageErrorKind::Io) error and change
    /// nothing; later ones succeed. Replaces any count still pending.
    pub fn fail_next_commits(&self, n: u64) {
        self.fail_next.store(n, Ordering::SeqCst);
    }

    /// While `true`, `committed` and `list` fail with an [`Io`](StorageErrorKind::Io) error.
    pub fn set_reads_failing(&self, failing: bool) {
        self.reads_failing.store(failing, Ordering::SeqCst);
    }

    /// The whole commit, synchronously: validate, maybe fail on purpose, merge.
    fn commit_now(&self, group: &str, offsets: &OffsetMap) -> Result<(), StorageError> {
        validate_offsets(group, offsets)?;
        self.injected_commit_failure()?;
        if !offsets.is_empty() {
            lock(&self.shard(group)).commit(offsets);
        }
        Ok(())
    }

    fn commit_full_now(&self, group: &str, offsets: &CommittedOffsets) -> Result<(), StorageError> {
        validate_committed(group, offsets)?;
        self.injected_commit_failure()?;
        if !offsets.is_empty() {
            lock(&self.shard(group)).commit_full(offsets);
        }
        Ok(())
    }

    /// Every group's committed offsets, as a copy taken at one instant.
    pub fn snapshot(&self) -> BTreeMap<String, OffsetMap> {
        let shards: BTreeMap<String, Shard> = self
            .read_groups()
            .iter()
            .map(|(group, shard)| (group.clone(), Arc::clone(shard)))
            .collect();
        // Locked in group-id order, and all held while copying.
        let guards: Vec<(&String, MutexGuard<'_, Offsets>)> = shards
            .iter()
            .map(|(group, shard)| (group, lock(shard)))
            .collect();
        guards
            .iter()
            .filter(|(_, offsets)| !offsets.is_empty())
            .map(|(group, offsets)| ((*group).clone(), offsets.offsets.clone()))
            .collect()
    }

    fn read_groups(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Shard>> {
        // The map is only ever inserted into, and an insert cannot leave it half-done for a
        // later reader, so a poisoned lock still guards a whole map.
        self.groups.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn existing_shard(&self, group: &str) -> Option<Shard> {
        self.read_groups().get(group).cloned()
    }

    fn shard(&self, group: &str) -> Shard {
        if let Some(shard) = self.existing_shard(group) {
            return shard;
        }
        let mut groups = self.groups.write().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(groups.entry(group.to_owned()).or_default())
    }

    fn injected_commit_failure(&self) -> Result<(), StorageError> {
        let fail = self.failing.load(Ordering::SeqCst)
            || self
                .fail_next
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        if fail {
            Err(injected("commit"))
        } else {
            Ok(())
        }
    }

    fn injected_read_failure(&self) -> Result<(), StorageError> {
        if self.reads_failing.load(Ordering::SeqCst) {
            Err(injected("read"))
        } else {
            Ok(())
        }
    }
}

fn injected(what: &str) -> StorageError {
    StorageError::new(
        StorageErrorKind::Io,
        format!("in-memory offset store: injected {what} failure"),
    )
}

/// Shard updates cannot be left half-done by a panic (an insert either happened or did not),
/// so a poisoned shard is still consistent.
fn lock(shard: &Mutex<Offsets>) -> MutexGuard<'_, Offsets> {
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}

#[async_trait]
impl OffsetStore for MemoryStore {
    async fn committed(
        &self,
        group: &str,
        tp: &TopicPartition,
    ) -> Result<Option<i64>, StorageError> {
        self.injected_read_failure()?;
        Ok(self
            .existing_shard(group)
            .and_then(|shard| lock(&shard).offsets.get(tp).copied()))
    }

    /// The write happens before this returns, so the fence only has to outlive the call.
    async fn commit(
        &self,
        group: &str,
        offsets: &OffsetMap,
        _fence: CommitFence,
    ) -> Result<(), StorageError> {
        self.commit_now(group, offsets)
    }

    async fn delete<'a>(
        &self,
        group: &str,
        partitions: Option<&'a [TopicPartition]>,
        _fence: CommitFence,
    ) -> Result<(), StorageError> {
        self.injected_commit_failure()?;
        if let Some(shard) = self.existing_shard(group) {
            let mut offsets = lock(&shard);
            match partitions {
                Some(partitions) => {
                    for tp in partitions {
                        offsets.remove(tp);
                    }
                }
                None => offsets.clear(),
            }
        }
        Ok(())
    }

    async fn groups(&self) -> Result<Vec<String>, StorageError> {
        self.injected_read_failure()?;
        let shards: Vec<(String, Shard)> = self
            .read_groups()
            .iter()
            .map(|(group, shard)| (group.clone(), Arc::clone(shard)))
            .collect();
        let mut groups: Vec<String> = shards
            .into_iter()
            .filter(|(_, shard)| !lock(shard).is_empty())
            .map(|(group, _)| group)
            .collect();
        groups.sort_unstable();
        Ok(groups)
    }

    async fn list(&self, group: &str) -> Result<OffsetMap, StorageError> {
        self.injected_read_failure()?;
        Ok(self
            .existing_shard(group)
            .map(|shard| lock(&shard).offsets.clone())
            .unwrap_or_default())
    }

    fn keeps_metadata(&self) -> bool {
        true
    }

    async fn list_with_metadata(&self, group: &str) -> Result<CommittedOffsets, StorageError> {
        self.injected_read_failure()?;
        Ok(self
            .existing_shard(group)
            .map(|shard| lock(&shard).full())
            .unwrap_or_default())
    }

    /// The write happens before this returns, so the fence only has to outlive the call.
    async fn commit_with_metadata(
        &self,
        group: &str,
        offsets: &CommittedOffsets,
        _fence: CommitFence,
    ) -> Result<(), StorageError> {
        self.commit_full_now(group, offsets)
    }

    fn keeps_groups(&self) -> bool {
        true
    }

    /// Fails like a commit while the failure switches say so, and then changes nothing.
    async fn write_group(
        &self,
        group: &str,
        record: Option<&GroupRecord>,
        _fence: CommitFence,
    ) -> Result<(), StorageError> {
        self.injected_commit_failure()?;
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        match record {
            Some(r) => {
                records.insert(group.to_string(), r.clone());
            }
            None => {
                records.remove(group);
            }
        }
        Ok(())
    }

    async fn load_groups(&self) -> Result<Vec<GroupRecord>, StorageError> {
        self.injected_read_failure()?;
        let records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(records.values().cloned().collect())
    }

    fn keeps_transactions(&self) -> bool {
        true
    }

    /// Fails like a commit while the failure switches say so, and then changes nothing.
    async fn write_transaction(
        &self,
        id: &str,
        record: Option<&TransactionRecord>,
        _fence: CommitFence,
    ) -> Result<(), StorageError> {
        self.injected_commit_failure()?;
        let mut txns = self
            .transactions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match record {
            Some(r) => {
                txns.insert(id.to_string(), r.clone());
            }
            None => {
                txns.remove(id);
            }
        }
        Ok(())
    }

    async fn load_transactions(&self) -> Result<Vec<TransactionRecord>, StorageError> {
        self.injected_read_failure()?;
        let txns = self
            .transactions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(txns.values().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn offsets(entries: &[(&str, u32, i64)]) -> OffsetMap {
        entries
            .iter()
            .map(|&(t, p, o)| (TopicPartition::new(t, p), o))
            .collect()
    }

    #[tokio::test]
    async fn fail_next_counts_down_then_recovers() {
        let store = MemoryStore::new();
        store.fail_next_commits(2);
        let o = offsets(&[("t", 0, 1)]);
        for _ in 0..2 {
            let err = store
                .commit("g", &o, CommitFence::none())
                .await
                .unwrap_err();
            assert_eq!(err.kind(), StorageErrorKind::Io);
            assert_eq!(err.code(), "STORAGE_ERROR");
        }
        assert!(store.snapshot().is_empty());
        store.commit("g", &o, CommitFence::none()).await.unwrap();
        assert_eq!(store.list("g").await.unwrap(), o);
    }

    #[tokio::test]
    async fn failing_switch_covers_commits_and_deletes_and_clears() {
        let store = MemoryStore::new();
        store
            .commit("a", &offsets(&[("t", 0, 1)]), CommitFence::none())
            .await
            .unwrap();
        let before = store.snapshot();
        store.set_failing(true);
        assert!(store
            .commit("a", &offsets(&[("t", 1, 1)]), CommitFence::none())
            .await
            .is_err());
        assert!(store.delete("a", None, CommitFence::none()).await.is_err());
        assert_eq!(store.snapshot(), before);
        store.set_failing(false);
        store.delete("a", None, CommitFence::none()).await.unwrap();
        assert!(store.snapshot().is_empty());
    }

    #[tokio::test]
    async fn a_negative_offset_is_refused_before_an_injected_failure_is_spent() {
        let store = MemoryStore::new();
        store.fail_next_commits(1);
        let err = store
            .commit("g", &offsets(&[("t", 0, -1)]), CommitFence::none())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), StorageErrorKind::InvalidOffset);
        let err = store
            .commit("g", &offsets(&[("t", 0, 1)]), CommitFence::none())
            .await
            .unwrap_err();
        assert_eq!(
            err.kind(),
            StorageErrorKind::Io,
            "the injected failure was still pending"
        );
    }

    #[tokio::test]
    async fn keeps_metadata_and_a_plain_commit_clears_it() {
        let store = MemoryStore::new();
        let tp = TopicPartition::new("t", 0);
        let full: CommittedOffsets = [(
            tp.clone(),
            OffsetAndMetadata {
                offset: 5,
                leader_epoch: Some(3),
                metadata: "checkpoint-5".into(),
                commit_timestamp_ms: 77,
            },
        )]
        .into();
        store
            .commit_with_metadata("g", &full, CommitFence::none())
            .await
            .unwrap();
        assert!(store.keeps_metadata());
        assert_eq!(store.list_with_metadata("g").await.unwrap(), full);
        assert_eq!(store.list("g").await.unwrap(), offsets(&[("t", 0, 5)]));
        assert_eq!(store.committed("g", &tp).await.unwrap(), Some(5));
        store
            .commit("g", &offsets(&[("t", 0, 6)]), CommitFence::none())
            .await
            .unwrap();
        assert_eq!(
            store.list_with_metadata("g").await.unwrap()[&tp],
            OffsetAndMetadata::new(6)
        );
        let mut negative = full.clone();
        negative.get_mut(&tp).unwrap().offset = -1;
        let err = store
            .commit_with_metadata("g", &negative, CommitFence::none())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), StorageErrorKind::InvalidOffset);
        assert_eq!(store.list("g").await.unwrap(), offsets(&[("t", 0, 6)]));
    }

    #[tokio::test]
    async fn keeps_the_latest_group_record_until_its_tombstone() {
        use coordinator_core::{Generation, GroupKind, GroupState};
        let store = MemoryStore::new();
        let record = |generation: u64| GroupRecord {
            group_id: "g".into(),
            kind: GroupKind::Classic,
            generation: Generation::new(generation),
            state: GroupState::Stable,
            protocol_type: "consumer".into(),
            protocol: Some("range".into()),
            leader: None,
            members: Vec::new(),
        };
        assert!(store.keeps_groups());
        store
            .write_group("g", Some(&record(1)), CommitFence::none())
            .await
            .unwrap();
        store
            .write_group("g", Some(&record(2)), CommitFence::none())
            .await
            .unwrap();
        assert_eq!(store.load_groups().await.unwrap(), [record(2)]);
        store.fail_next_commits(1);
        assert!(store
            .write_group("g", None, CommitFence::none())
            .await
            .is_err());
        assert_eq!(
            store.load_groups().await.unwrap(),
            [record(2)],
            "a failed write changed nothing"
        );
        store
            .write_group("g", None, CommitFence::none())
            .await
            .unwrap();
        assert!(store.load_groups().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn reads_can_fail_without_losing_data() {
        let store = MemoryStore::new();
        let o = offsets(&[("t", 0, 4)]);
        store.commit("g", &o, CommitFence::none()).await.unwrap();
        store.set_reads_failing(true);
        assert!(store.list("g").await.is_err());
        assert!(store
            .committed("g", &TopicPartition::new("t", 0))
            .await
            .is_err());
        store.set_reads_failing(false);
        assert_eq!(store.list("g").await.unwrap(), o);
    }
}
