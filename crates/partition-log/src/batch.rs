//! A batch: the unit of append, as in Kafka's log.

use std::fmt;

use coordinator_core::{Bytes, Record};

/// Records appended together, with consecutive offsets, and optionally the bytes the appender
/// encoded them as.
///
/// The log never looks inside [`encoded`](Batch::encoded): it is whatever wire form the
/// appender chose (the broker stores Kafka's v2 `RecordBatch` as the producer sent it, with
/// only the base offset rewritten), handed back as is to readers that serve the same wire.
/// [`records`](Batch::records) is the decoded view, which the [`RecordSource`] port reads. A
/// batch read back from a [`SegmentLog`](crate::SegmentLog) carries its encoding only (the log
/// keeps the bytes, not a second decoded copy): its `records()` is empty, while its offsets
/// and [`max_timestamp`](Batch::max_timestamp) are those of the appended records. So is a
/// batch the [`MemoryLog`](crate::MemoryLog) took with its records' timestamps only
/// ([`PartitionLog::append_encoded_timestamps`](crate::PartitionLog::append_encoded_timestamps),
/// what the broker's produce path uses): the memory log then keeps each record's offset and
/// timestamp, for `ListOffsets` by timestamp and compaction, and no copy of its keys and
/// values.
///
/// [`RecordSource`]: coordinator_core::RecordSource
#[derive(Clone, PartialEq, Eq)]
pub struct Batch {
    pub(crate) base_offset: i64,
    pub(crate) last_offset: i64,
    pub(crate) max_timestamp: i64,
    pub(crate) records: Vec<Record>,
    /// Each record's `(offset, timestamp)`, for a batch appended without its records (the
    /// memory log's [`append_encoded_timestamps`](crate::MemoryLog::append_encoded_timestamps));
    /// empty when `records` holds them, and for a segment log's batch (its frame holds them).
    pub(crate) stamps: Vec<(i64, i64)>,
    pub(crate) encoded: Option<Bytes>,
    /// When a compaction may drop the batch's tombstones (the memory log keeps it here; the
    /// segment log in its frame).
    pub(crate) delete_horizon: Option<i64>,
}

impl Batch {
    /// A batch known by its offsets, its largest timestamp and its stored encoding, with no
    /// decoded records: what a log that keeps only the bytes (as
    /// [`SegmentLog`](crate::SegmentLog) does, or a database-backed log) hands to readers.
    /// `last_offset` is at or above `base_offset` (batches are never empty); its
    /// [`records`](Batch::records) are empty and its [`size`](Batch::size) is the encoding's
    /// length.
    pub fn from_encoded(
        base_offset: i64,
        last_offset: i64,
        max_timestamp: i64,
        encoded: Bytes,
    ) -> Batch {
        Batch {
            base_offset,
            last_offset,
            max_timestamp,
            records: Vec::new(),
            stamps: Vec::new(),
            encoded: Some(encoded),
            delete_horizon: None,
        }
    }

    /// Each record's `(offset, timestamp)`, in offset order, from the records or, for a batch
    /// kept without them, from its stamps (empty for a batch built by
    /// [`from_encoded`](Batch::from_encoded)).
    pub(crate) fn stamps(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        // One of the two is empty (see the fields).
        self.records
            .iter()
            .map(|r| (r.offset, r.timestamp))
            .chain(self.stamps.iter().copied())
    }

    /// The batch's base offset: its first record's, or below it once compaction removed records
    /// from its start (the batch keeps its base, as Kafka's cleaner keeps it).
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// The offset of the last record (batches are never empty).
    pub fn last_offset(&self) -> i64 {
        self.last_offset
    }

    /// The records, in offset order (empty for a batch read from a
    /// [`SegmentLog`](crate::SegmentLog), or appended with its timestamps only: see the
    /// type's docs).
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// The appender's encoding of the batch, if it gave one (see the type's docs).
    pub fn encoded(&self) -> Option<&Bytes> {
        self.encoded.as_ref()
    }

    /// The largest record timestamp in the batch.
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    /// The size the batch counts for against a reader's byte budget: its encoded length, or
    /// for a batch appended without an encoding, its payload plus Kafka's per-record overhead
    /// as an estimate.
    pub fn size(&self) -> usize {
        match &self.encoded {
            Some(bytes) => bytes.len(),
            None => {
                61 + self
                    .records
                    .iter()
                    .map(|r| {
                        20 + r.key.as_ref().map_or(0, |k| k.len())
                            + r.value.len()
                            + r.headers
                                .iter()
                                .map(|h| 2 + h.key.len() + h.value.len())
                                .sum::<usize>()
                    })
                    .sum::<usize>()
            }
        }
    }
}

impl fmt::Debug for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batch")
            .field("offsets", &(self.base_offset..=self.last_offset()))
            .field("encoded_len", &self.encoded.as_ref().map(|b| b.len()))
            .finish()
    }
}
