//! The decisions of a compaction pass, whatever the log stores batches in (re-exported by
//! [`compaction`](crate::compaction) for a log of another crate implementing
//! [`PartitionLog::compact`](crate::PartitionLog::compact)): when a partition
//! is due, which marker decided each transaction, the latest offset of each key, and what
//! becomes of each batch. The segment log (`segment/clean.rs`) and the memory log apply them
//! to their own storage.
//!
//! A pass learns the transactions of every compactable batch ([`Cleaning::learn`]), maps the
//! keys of the dirty ones ([`Cleaning::map`]), then decides each compactable batch in offset
//! order ([`Cleaning::decide`]): a record is kept unless a later record has its key, it is
//! a tombstone past its delete horizon, or it has no key; a kept tombstone's batch gets its horizon (`now +
//! delete.retention.ms`) at the first pass that keeps it. An aborted transaction's records
//! go, a committed one's take part as plain records (its marker may lie after the
//! compactable batches: [`Cleaning::learn_after`] finds it); a marker goes once no record of its transaction is left and its
//! own delete horizon (set by the first pass that finds it alone) has passed. Offsets never
//! change.

use std::collections::{HashMap, HashSet};

use coordinator_core::Bytes;
use tracing::warn;

use crate::compaction::{BatchKind, CompactionPolicy, RecordFormat};

/// Whether a partition is due for a pass: its dirty bytes are more than the minimum ratio
/// of its compactable bytes, or its oldest dirty record waited past the maximum lag.
pub fn due(policy: &CompactionPolicy, total: u64, dirty: u64, oldest_dirty: Option<i64>) -> bool {
    let ratio = if total == 0 {
        0.0
    } else {
        dirty as f64 / total as f64
    };
    let overdue = oldest_dirty
        .is_some_and(|t| policy.now_ms.saturating_sub(t) > policy.max_compaction_lag_ms);
    ratio > policy.min_cleanable_dirty_ratio || overdue
}

/// Whether a batch whose newest record is at `max_timestamp` is old enough to compact. With
/// no lag (`min.compaction.lag.ms` 0) every batch is, whatever its timestamps: a record
/// stamped ahead of the clock does not hold compaction back (Kafka's
/// `LogCleanerManager.cleanableOffsets` looks at timestamps only for a lag above 0).
pub fn lag_passed(policy: &CompactionPolicy, max_timestamp: Option<i64>) -> bool {
    policy.min_compaction_lag_ms <= 0
        || max_timestamp
            .is_none_or(|t| policy.now_ms.saturating_sub(t) >= policy.min_compaction_lag_ms)
}

/// A stored batch, as a pass decides it.
#[derive(Debug)]
pub struct Stored<'a> {
    /// Its base offset.
    pub base_offset: i64,
    /// Its last offset.
    pub last_offset: i64,
    /// The appender's bytes.
    pub data: &'a [u8],
    /// Each record's `(offset, timestamp)`, as the log keeps them.
    pub index: Vec<(i64, i64)>,
    /// Its delete horizon, if a pass set one.
    pub delete_horizon: Option<i64>,
}

/// A batch rewritten by a pass.
#[derive(Debug)]
pub struct Rewrite {
    /// Its base offset.
    pub base_offset: i64,
    /// Its last offset.
    pub last_offset: i64,
    /// Its delete horizon (a kept tombstone's, or a lone marker's).
    pub delete_horizon: Option<i64>,
    /// The kept records' `(offset, timestamp)`.
    pub index: Vec<(i64, i64)>,
    /// The appender's bytes of the rewritten batch.
    pub data: Bytes,
}

/// What a pass makes of one batch.
#[derive(Debug)]
pub enum Outcome {
    /// Kept as it is.
    Same,
    /// Removed: none of its records is left.
    Dropped,
    /// Replaced by this rewrite.
    Rewritten(Rewrite),
}

/// One pass's state: the policy, the format, the transactions learnt and the key map.
pub struct Cleaning<'a> {
    policy: &'a CompactionPolicy,
    format: &'a dyn RecordFormat,
    /// The latest offset of each key of the dirty batches.
    latest: HashMap<Bytes, i64>,
    key_bytes: usize,
    /// Each transactional batch (by base offset): its marker's offset, and whether it
    /// committed.
    fate: HashMap<i64, (i64, bool)>,
    /// Each marker (by offset): how many batches of its transaction are still stored.
    left: HashMap<i64, usize>,
    /// The markers whose transaction's last batches this pass removed: each gets its delete
    /// horizon at the next pass, as Kafka's (`CleanedTransactionMetadata.onControlBatchRead`
    /// keeps the marker, without a horizon, in the pass that removes its records).
    emptied: HashSet<i64>,
    /// Each producer's transactional batches not yet decided by a marker.
    open: HashMap<i64, Vec<i64>>,
}

impl std::fmt::Debug for Cleaning<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cleaning")
            .field("keys", &self.latest.len())
            .field("key_bytes", &self.key_bytes)
            .field("transactions", &self.left.len())
            .finish_non_exhaustive()
    }
}

impl<'a> Cleaning<'a> {
    /// A pass under `policy`, reading batches through `format`.
    pub fn new(policy: &'a CompactionPolicy, format: &'a dyn RecordFormat) -> Self {
        Cleaning {
            policy,
            format,
            latest: HashMap::new(),
            key_bytes: 0,
            fate: HashMap::new(),
            left: HashMap::new(),
            emptied: HashSet::new(),
            open: HashMap::new(),
        }
    }

    /// Learns the transactions from one compactable batch; called on every one, in offset
    /// order, before any [`map`](Self::map).
    pub fn learn(&mut self, base_offset: i64, data: &[u8]) {
        match self.format.kind(data) {
            BatchKind::Transactional { producer_id } => {
                self.open.entry(producer_id).or_default().push(base_offset);
            }
            BatchKind::Marker {
                producer_id,
                commit,
            } => {
                let batches = self.open.remove(&producer_id).unwrap_or_default();
                self.left.insert(base_offset, batches.len());
                for b in batches {
                    self.fate.insert(b, (base_offset, commit));
                }
            }
            BatchKind::Plain | BatchKind::Unknown => {}
        }
    }

    /// Whether a transactional batch learnt so far waits for a marker the compactable batches
    /// do not hold.
    pub fn undecided(&self) -> bool {
        !self.open.is_empty()
    }

    /// Learns, from a batch after the compactable ones, the marker of a transaction the
    /// compactable batches leave undecided: called in offset order on the batches that
    /// follow them, up to the high watermark, while [`undecided`](Self::undecided). Every
    /// transactional batch below the stable offset has its marker somewhere in the log;
    /// Kafka's cleaner learns it from its transaction index, which covers the whole log
    /// (`Cleaner.buildOffsetMap` / `cleanSegments`, `collectAbortedTransactions`). Only the
    /// markers of producers waiting count: a transaction begun after the compactable batches
    /// is not the pass's.
    pub fn learn_after(&mut self, base_offset: i64, data: &[u8]) {
        if let BatchKind::Marker {
            producer_id,
            commit,
        } = self.format.kind(data)
        {
            if let Some(batches) = self.open.remove(&producer_id) {
                self.left.insert(base_offset, batches.len());
                for b in batches {
                    self.fate.insert(b, (base_offset, commit));
                }
            }
        }
    }

    /// Maps the keys of one dirty batch, in offset order.
    pub fn map(&mut self, base_offset: i64, data: &[u8]) {
        let takes_part = match self.format.kind(data) {
            BatchKind::Plain => true,
            BatchKind::Transactional { .. } => self
                .fate
                .get(&base_offset)
                .is_some_and(|(_, commit)| *commit),
            BatchKind::Marker { .. } | BatchKind::Unknown => false,
        };
        if !takes_part {
            return;
        }
        for r in self.format.keys(data, base_offset).unwrap_or_default() {
            if let Some(key) = r.key {
                let len = key.len();
                if self.latest.insert(key, r.offset).is_none() {
                    self.key_bytes = self.key_bytes.saturating_add(len);
                }
            }
        }
    }

    /// Whether the key map holds more than the policy's bound.
    pub fn full(&self) -> bool {
        self.key_bytes > self.policy.max_key_bytes
    }

    /// What becomes of `batch` (see the module docs); a batch the format cannot rewrite is
    /// kept as it is. Called in offset order, after every [`learn`](Self::learn).
    pub fn decide(&mut self, batch: &Stored<'_>) -> Outcome {
        match self.format.kind(batch.data) {
            BatchKind::Unknown => Outcome::Same,
            BatchKind::Plain => self.records(batch),
            BatchKind::Transactional { .. } => match self.fate.get(&batch.base_offset).copied() {
                None => Outcome::Same, // undecided within the pass: kept whole
                Some((marker, false)) => {
                    self.removed(marker);
                    Outcome::Dropped
                }
                Some((marker, true)) => {
                    let outcome = self.records(batch);
                    if matches!(outcome, Outcome::Dropped) {
                        self.removed(marker);
                    }
                    outcome
                }
            },
            BatchKind::Marker { .. } => {
                if self.left.get(&batch.base_offset) != Some(&0)
                    || self.emptied.contains(&batch.base_offset)
                {
                    // Records of its transaction are left, or went in this pass.
                    return Outcome::Same;
                }
                match batch.delete_horizon {
                    Some(h) if self.policy.now_ms >= h => Outcome::Dropped,
                    Some(_) => Outcome::Same,
                    None => Outcome::Rewritten(Rewrite {
                        base_offset: batch.base_offset,
                        last_offset: batch.last_offset,
                        delete_horizon: Some(self.horizon()),
                        index: batch.index.clone(),
                        data: Bytes::from(batch.data),
                    }),
                }
            }
        }
    }

    fn horizon(&self) -> i64 {
        self.policy
            .now_ms
            .saturating_add(self.policy.delete_retention_ms)
    }

    /// A batch of the transaction `marker` ended is gone.
    fn removed(&mut self, marker: i64) {
        if let Some(n) = self.left.get_mut(&marker) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.emptied.insert(marker);
            }
        }
    }

    /// The records of a batch that takes part.
    fn records(&self, batch: &Stored<'_>) -> Outcome {
        let Some(records) = self.format.keys(batch.data, batch.base_offset) else {
            return Outcome::Same;
        };
        let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
        let stored: Vec<i64> = batch.index.iter().map(|(o, _)| *o).collect();
        if offsets != stored {
            warn!(
                base_offset = batch.base_offset,
                "a batch whose records do not match its stored offsets: kept as it is"
            );
            return Outcome::Same;
        }
        let now = self.policy.now_ms;
        let mut kept = HashSet::with_capacity(records.len());
        let mut kept_tombstone = false;
        for r in &records {
            let superseded = r.key.as_ref().is_some_and(|k| {
                self.latest
                    .get(&k[..])
                    .is_some_and(|latest| *latest > r.offset)
            });
            let expired = r.tombstone && batch.delete_horizon.is_some_and(|h| now >= h);
            // A record without a key goes (Kafka's `Cleaner.shouldRetainRecord`; a compacted
            // topic refuses them at produce, so only one written before it was compacted can
            // be here).
            if r.key.is_some() && !superseded && !expired {
                kept.insert(r.offset);
                kept_tombstone |= r.tombstone;
            }
        }
        if kept.is_empty() {
            return Outcome::Dropped;
        }
        let delete_horizon = if kept_tombstone {
            Some(batch.delete_horizon.unwrap_or_else(|| self.horizon()))
        } else {
            None
        };
        let index: Vec<(i64, i64)> = batch
            .index
            .iter()
            .copied()
            .filter(|(o, _)| kept.contains(o))
            .collect();
        if kept.len() == records.len() {
            if delete_horizon == batch.delete_horizon {
                return Outcome::Same;
            }
            return Outcome::Rewritten(Rewrite {
                base_offset: batch.base_offset,
                last_offset: batch.last_offset,
                delete_horizon,
                index,
                data: Bytes::from(batch.data),
            });
        }
        let retained = match self
            .format
            .retain(batch.data, batch.base_offset, &|o| kept.contains(&o))
        {
            Ok(r) => r,
            Err(reason) => {
                warn!(base_offset = batch.base_offset, %reason, "a batch that cannot be rewritten: kept as it is");
                return Outcome::Same;
            }
        };
        let first_kept = index.first().map_or(retained.base_offset, |r| r.0);
        let last_kept = index.last().map_or(retained.last_offset, |r| r.0);
        if retained.base_offset > first_kept || retained.last_offset < last_kept {
            warn!(
                base_offset = batch.base_offset,
                "a rewritten batch that does not cover its records: kept as it is"
            );
            return Outcome::Same;
        }
        Outcome::Rewritten(Rewrite {
            base_offset: retained.base_offset,
            last_offset: retained.last_offset,
            delete_horizon,
            index,
            data: retained.encoded,
        })
    }
}
