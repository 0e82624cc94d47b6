//! Transactional offsets (KIP-447, Kafka's `OffsetMetadataManager.commitTransactionalOffset`
//! and `replayEndTransactionMarker`): TxnOffsetCommit stores offsets pending per
//! (group, producer id), invisible to OffsetFetch, until the transaction coordinator
//! completes the transaction: a commit writes them to the store, an abort drops them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::PoisonError;

use super::{Batch, Coordinator, GroupEntry};
use crate::error::Error;
use crate::group::{CommitAuthority, GroupKind};
use crate::ports::CommitFence;
use crate::types::{CommittedOffsets, TopicPartition};

/// At most this many partitions pending per (group, producer id): a TxnOffsetCommit that
/// would exceed it is refused whole (`INVALID_ARGUMENT`). Kafka has no such bound.
pub const MAX_PENDING_TXN_OFFSETS_PER_PRODUCER: usize = 10_000;

/// The pending transactional offsets of every group: group id → producer id → offsets.
pub(crate) type PendingTxnOffsets = BTreeMap<String, BTreeMap<i64, CommittedOffsets>>;

/// One TxnOffsetCommit as the group coordinator sees it (the transaction coordinator has
/// checked the producer id and epoch against the transaction).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnOffsetCommitRequest {
    /// The group.
    pub group_id: String,
    /// The transaction's producer id.
    pub producer_id: i64,
    /// The committing member's generation (classic groups) or member epoch (consumer
    /// groups); −1 with an empty member id for clients that send no group metadata.
    pub generation_id: i32,
    /// The member id (empty for old clients).
    pub member_id: String,
    /// The static member's instance id, if any.
    pub group_instance_id: Option<String>,
    /// The offsets with their metadata.
    pub offsets: CommittedOffsets,
}

impl Coordinator {
    fn pending(&self) -> std::sync::MutexGuard<'_, PendingTxnOffsets> {
        self.txn_offsets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Kafka's TxnOffsetCommit: validates the member as Kafka 4 does for transactional
    /// commits and stores the offsets pending under (group, producer id). They are not
    /// visible to [`Offsets::fetch`](super::Offsets::fetch) until
    /// [`complete_txn_offsets`](Self::complete_txn_offsets) commits them.
    ///
    /// Fencing: generation −1 with an empty member id and no instance id is never fenced
    /// (clients that do not send their group metadata). Otherwise, in a classic group,
    /// `UNKNOWN_MEMBER`, `FENCED_INSTANCE_ID`, `ILLEGAL_GENERATION`; in a consumer-protocol
    /// group the number is the member epoch: `UNKNOWN_MEMBER`, `STALE_MEMBER_EPOCH` (Kafka's
    /// `ConsumerGroup.validateOffsetCommit` with `isTransactional`). A member commit for a
    /// group that does not exist: `ILLEGAL_GENERATION`. Also `OFFSET_METADATA_TOO_LARGE`,
    /// `INVALID_ARGUMENT` (negative offset, more than
    /// [`MAX_PENDING_TXN_OFFSETS_PER_PRODUCER`] partitions pending). A refusal stores nothing.
    pub async fn txn_offset_commit(&self, req: &TxnOffsetCommitRequest) -> Result<(), Error> {
        let group_id = req.group_id.as_str();
        let batch = Batch::Full(&req.offsets);
        if !batch.check(group_id, self.config.offset_metadata_max_bytes)? {
            return Ok(());
        }
        let unfenced =
            req.generation_id < 0 && req.member_id.is_empty() && req.group_instance_id.is_none();
        if !unfenced {
            self.validate_txn_member(req)?;
        }
        let mut pending = self.pending();
        let mine = pending.get(group_id).and_then(|p| p.get(&req.producer_id));
        let after = mine.map_or(0, BTreeMap::len)
            + req
                .offsets
                .keys()
                .filter(|tp| !mine.is_some_and(|m| m.contains_key(*tp)))
                .count();
        if after > MAX_PENDING_TXN_OFFSETS_PER_PRODUCER {
            return Err(Error::invalid(
                "transactional offsets",
                format!(
                    "producer {} would have {after} partitions pending in group {group_id}, \
                     above the bound of {MAX_PENDING_TXN_OFFSETS_PER_PRODUCER}",
                    req.producer_id
                ),
            ));
        }
        let now = self.clock.now_ms();
        let entry = pending
            .entry(group_id.to_string())
            .or_default()
            .entry(req.producer_id)
            .or_default();
        for (tp, m) in &req.offsets {
            let mut m = m.clone();
            m.commit_timestamp_ms = now;
            entry.insert(tp.clone(), m);
        }
        Ok(())
    }

    fn validate_txn_member(&self, req: &TxnOffsetCommitRequest) -> Result<(), Error> {
        let group_id = req.group_id.as_str();
        let illegal = || Error::IllegalGeneration {
            group: group_id.to_string(),
            requested: None,
            current: crate::types::Generation::new(0),
        };
        let cell = self.group(group_id).ok_or_else(illegal)?;
        let mut entry = cell.lock();
        if entry.removed {
            return Err(illegal());
        }
        let now = self.clock.now_ms();
        let GroupEntry {
            generation, group, ..
        } = &mut *entry;
        let Some(group) = group else {
            return Err(Error::unknown_member(group_id, &req.member_id));
        };
        let authority = if group.kind() == GroupKind::Consumer {
            CommitAuthority::MemberEpoch {
                member_id: req.member_id.clone(),
                member_epoch: req.generation_id,
            }
        } else {
            CommitAuthority::Generation {
                generation: u64::try_from(req.generation_id)
                    .ok()
                    .map(crate::types::Generation::new),
                member_id: req.member_id.clone(),
                group_instance_id: req.group_instance_id.clone(),
            }
        };
        let ctx = self.ctx(now, generation, group.kind());
        group.validate_offset_commit(&authority, &mut req.offsets.keys(), &ctx)
    }

    /// The offsets pending for `producer_id` in `group` (what a PrepareCommit record keeps
    /// so that a commit survives a crash).
    pub fn pending_txn_offsets(&self, group_id: &str, producer_id: i64) -> CommittedOffsets {
        self.pending()
            .get(group_id)
            .and_then(|p| p.get(&producer_id))
            .cloned()
            .unwrap_or_default()
    }

    /// Puts `offsets` pending again for `producer_id` in `group` (recovery of a
    /// PrepareCommit transaction after a restart).
    pub fn restore_txn_offsets(&self, group_id: &str, producer_id: i64, offsets: CommittedOffsets) {
        if offsets.is_empty() {
            return;
        }
        self.pending()
            .entry(group_id.to_string())
            .or_default()
            .entry(producer_id)
            .or_default()
            .extend(offsets);
    }

    /// Drops the offsets pending for `producer_id` in `group` without writing them (the
    /// transaction left this broker's transaction coordinator: the one that loads it
    /// decides them). Returns whether any were pending.
    pub(crate) fn drop_txn_offsets(&self, group_id: &str, producer_id: i64) -> bool {
        let mut pending = self.pending();
        let Some(p) = pending.get_mut(group_id) else {
            return false;
        };
        let had = p.remove(&producer_id).is_some();
        if p.is_empty() {
            pending.remove(group_id);
        }
        had
    }

    /// The groups with transactional offsets pending for `producer_id`, sorted (what a
    /// marker into a `__consumer_offsets` partition completes, for the groups of that
    /// partition).
    pub fn pending_txn_groups(&self, producer_id: i64) -> Vec<String> {
        self.pending()
            .iter()
            .filter(|(_, p)| p.contains_key(&producer_id))
            .map(|(g, _)| g.clone())
            .collect()
    }

    /// The partitions of `group` with transactional offsets pending (OffsetFetch's
    /// `require_stable` answers UNSTABLE_OFFSET_COMMIT for them).
    pub fn pending_txn_partitions(&self, group_id: &str) -> BTreeSet<TopicPartition> {
        self.pending()
            .get(group_id)
            .map(|p| p.values().flat_map(|o| o.keys().cloned()).collect())
            .unwrap_or_default()
    }

    /// Completes `producer_id`'s transaction in `group`: a commit writes its pending offsets
    /// to the store (under the group's commit gate, as every commit), an abort drops them.
    /// Nothing pending: nothing to do. If the store write fails the offsets stay pending
    /// and the error is returned (the transaction coordinator retries).
    pub async fn complete_txn_offsets(
        &self,
        group_id: &str,
        producer_id: i64,
        commit: bool,
    ) -> Result<(), Error> {
        let offsets = self.pending_txn_offsets(group_id, producer_id);
        if commit && !offsets.is_empty() {
            let gate = self.noted_gate(group_id, Batch::Full(&offsets)).await;
            // The pending offsets carry their TxnOffsetCommit time; keep it.
            self.store
                .commit_with_metadata(group_id, &offsets, CommitFence::gate(gate))
                .await?;
            self.stats.committed(offsets.len());
        }
        let mut pending = self.pending();
        if let Some(p) = pending.get_mut(group_id) {
            if let Some(mine) = p.get_mut(&producer_id) {
                // Only what was written: a TxnOffsetCommit cannot run beside its own EndTxn
                // (the transaction coordinator serialises them), but be exact anyway.
                mine.retain(|tp, m| offsets.get(tp) != Some(m));
                if mine.is_empty() {
                    p.remove(&producer_id);
                }
            }
            if p.is_empty() {
                pending.remove(group_id);
            }
        }
        Ok(())
    }
}
