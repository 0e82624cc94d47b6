//! Log compaction, as Kafka's log cleaner does it for `cleanup.policy=compact`: closed
//! segments are rewritten keeping the latest record of each key, tombstones for a while.
//!
//! The log keeps its batches as bytes it does not read (see [`Batch`](crate::Batch)), so a
//! compaction is told how to read them by a [`RecordFormat`], which the appender's side
//! supplies (the broker's reads Kafka's v2 record batches). The rules are
//! [`CompactionPolicy`]'s, one topic's configs; what a pass did comes back as a
//! [`Compaction`].

use std::fmt;

use coordinator_core::Bytes;

pub use crate::cleaning::{due, lag_passed, Cleaning, Outcome, Rewrite, Stored};

/// One record of a stored batch, as compaction needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyedRecord {
    /// The record's offset.
    pub offset: i64,
    /// The record's key; a record without one is removed by a pass, as Kafka's cleaner
    /// removes it (a compacted topic refuses them at produce; one written before the topic
    /// was compacted goes at its first pass).
    pub key: Option<Bytes>,
    /// A record without a value: a tombstone, which deletes its key once
    /// `delete.retention.ms` has passed.
    pub tombstone: bool,
}

/// What a stored batch is, as compaction needs to know before reading its records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchKind {
    /// Records outside any transaction.
    Plain,
    /// Records of `producer_id`'s transaction, decided by its next [`Marker`](Self::Marker):
    /// committed, they take part as plain records; aborted, they are removed; undecided
    /// within what a pass reads, the batch is kept whole.
    Transactional {
        /// The producer whose transaction it is.
        producer_id: i64,
    },
    /// The marker ending `producer_id`'s transaction. It is removed once no record of its
    /// transaction is left and its delete horizon has passed (as Kafka's cleaner does).
    Marker {
        /// The producer whose transaction it ends.
        producer_id: i64,
        /// A commit (otherwise an abort).
        commit: bool,
    },
    /// Bytes the format does not know: kept whole, taking no part.
    Unknown,
}

/// A batch rewritten with some of its records left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetainedBatch {
    /// The new batch's bytes, in the same format.
    pub encoded: Bytes,
    /// Its base offset, as a reader of `encoded` sees it (the original's, or the first kept
    /// record's: formats differ).
    pub base_offset: i64,
    /// Its last offset, likewise.
    pub last_offset: i64,
}

/// How to read the keys of a stored batch and rewrite it without some records: the format
/// of the bytes an appender stored, which the log itself never reads.
pub trait RecordFormat: fmt::Debug + Send + Sync {
    /// What the batch stored as `encoded` is. Called on every batch a pass reads: it should
    /// read a header, not the records.
    fn kind(&self, encoded: &[u8]) -> BatchKind;

    /// The records of the batch stored as `encoded`, whose base offset is `base_offset`, in
    /// offset order; `None` keeps the batch whole (bytes that do not decode).
    fn keys(&self, encoded: &[u8], base_offset: i64) -> Option<Vec<KeyedRecord>>;

    /// `encoded` rewritten to hold only the records at the offsets `keep` accepts (at least
    /// one of its records, never all: the log drops a batch left empty and keeps whole one
    /// left complete). An error keeps the batch as it is.
    fn retain(
        &self,
        encoded: &[u8],
        base_offset: i64,
        keep: &dyn Fn(i64) -> bool,
    ) -> Result<RetainedBatch, String>;
}

/// The rules of one compaction pass: a topic's configs, with Kafka's names and defaults
/// ([`Default`]), and what the caller knows of the partition.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct CompactionPolicy {
    /// The time of the pass, milliseconds since the Unix epoch (records' timestamps are).
    pub now_ms: i64,
    /// `min.cleanable.dirty.ratio` (0.5): a partition is compacted once the bytes written
    /// since its last compaction are at least this share of its compactable bytes.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms` (0): a segment holding a record younger than this is not
    /// compacted yet.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms` (`i64::MAX`): a partition whose oldest uncompacted record is
    /// older than this is compacted whatever its dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms` (one day): how long a tombstone is kept once a compaction has
    /// seen it.
    pub delete_retention_ms: i64,
    /// Nothing at or above this offset is compacted: the last stable offset, below which
    /// every transaction is decided (`i64::MAX`: no limit).
    pub stable_offset: i64,
    /// The most key bytes one pass keeps in memory (Kafka's
    /// `log.cleaner.dedupe.buffer.size`, 128 MiB): a pass that reaches it compacts up to
    /// the segment where it stopped, and the next pass goes on.
    pub max_key_bytes: usize,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy {
            now_ms: 0,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 24 * 60 * 60 * 1000,
            stable_offset: i64::MAX,
            max_key_bytes: 128 << 20,
        }
    }
}

impl CompactionPolicy {
    /// The defaults, at `now_ms`.
    pub fn at(now_ms: i64) -> CompactionPolicy {
        CompactionPolicy {
            now_ms,
            ..CompactionPolicy::default()
        }
    }
}

/// What one compaction pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Compaction {
    /// Segments rewritten (the memory log: batches rewritten or dropped; 0: the partition
    /// was not due, or nothing could be compacted).
    pub segments: usize,
    /// Their bytes before.
    pub bytes_before: u64,
    /// Their bytes after.
    pub bytes_after: u64,
    /// Records left out (older values and expired tombstones).
    pub records_removed: u64,
    /// The offset up to which the partition is now compacted: the next pass's dirty part
    /// starts there.
    pub cleaned_up_to: i64,
}

impl Compaction {
    /// A pass that did nothing yet, leaving the partition compacted up to `cleaned_up_to`
    /// (for a log of another crate: the struct is `non_exhaustive`).
    pub fn up_to(cleaned_up_to: i64) -> Compaction {
        Compaction {
            cleaned_up_to,
            ..Compaction::default()
        }
    }
}
