//! The partition log port: what a Kafka wire front (the broker's handlers) needs of a log,
//! so that another log ([`SegmentLog`](crate::SegmentLog) on disk, a database-backed one) can
//! stand where [`MemoryLog`] stands.

use std::fmt;

use async_trait::async_trait;
use coordinator_core::{Bytes, LogError, NewRecord, TopicMetadata, TopicPartition};
use tokio::sync::watch;

use crate::memory_log::{BatchRead, MemoryLog};

/// Builds the stored encoding of a batch from its base offset (see
/// [`PartitionLog::append_encoded`]).
pub type EncodeBatch<'a> = Box<dyn FnOnce(i64) -> Bytes + Send + 'a>;

/// A partitioned log as a Kafka wire front uses it: topics, appends of encoded batches,
/// reads of whole batches, bounds, lookups by timestamp and a signal to wait for appends.
///
/// It is also the coordinator's [`TopicMetadata`] (a supertrait, so one `Arc` serves both):
/// the topics the coordinator assigns are exactly the topics clients can read. Partition
/// counts are answered synchronously there, so an implementation keeps its topic list at
/// hand (topics are few and change rarely).
///
/// Every error is a [`LogError`] with Kafka's code where it has one; an implementation that
/// does I/O reports its failures as [`LogError::Storage`], never by panicking.
#[async_trait]
pub trait PartitionLog: TopicMetadata + fmt::Debug + Send + Sync {
    /// Creates `name` with `partitions` empty partitions. Errors as
    /// [`MemoryLog::create_topic`]'s: `INVALID_TOPIC_EXCEPTION`, `INVALID_PARTITIONS`,
    /// `TOPIC_ALREADY_EXISTS`; nothing changes on error.
    async fn create_topic(&self, name: &str, partitions: u32) -> Result<(), LogError>;

    /// The names and partition counts of every topic, sorted by name.
    async fn topics(&self) -> Result<Vec<(String, u32)>, LogError>;

    /// Appends `records` as one batch with the encoding `encode` builds from the batch's base
    /// offset (called once, while the append is exclusive), and returns that offset.
    /// Errors: `UNKNOWN_TOPIC_OR_PARTITION`; `INVALID_ARGUMENT` for an empty batch.
    async fn append_encoded(
        &self,
        tp: &TopicPartition,
        records: Vec<NewRecord>,
        encode: EncodeBatch<'_>,
    ) -> Result<i64, LogError>;

    /// `tp`'s log start offset and high watermark, read together.
    /// Error: `UNKNOWN_TOPIC_OR_PARTITION`.
    async fn bounds(&self, tp: &TopicPartition) -> Result<(i64, i64), LogError>;

    /// Whole batches of `tp` from `from_offset`, up to about `max_bytes` (the first batch
    /// whatever its size), with the bounds at the time of the read. Errors:
    /// `UNKNOWN_TOPIC_OR_PARTITION`; `OFFSET_OUT_OF_RANGE` outside `log_start..=high_watermark`.
    async fn read_batches(
        &self,
        tp: &TopicPartition,
        from_offset: i64,
        max_bytes: usize,
    ) -> Result<BatchRead, LogError>;

    /// The first readable record of `tp` with a timestamp at or after `timestamp`, as
    /// `(offset, its timestamp)`, or `None`. Error: `UNKNOWN_TOPIC_OR_PARTITION`.
    async fn offset_for_timestamp(
        &self,
        tp: &TopicPartition,
        timestamp: i64,
    ) -> Result<Option<(i64, i64)>, LogError>;

    /// A receiver that changes whenever records are appended anywhere in the log (or a bound
    /// moves). A reader subscribes *before* reading, then awaits `changed()` with its own
    /// deadline: no append is missed and nothing polls.
    fn appends(&self) -> watch::Receiver<u64>;

    /// The topic's id (16 bytes, as Kafka's `Uuid`, drawn at creation), for a log that keeps
    /// one; `None` for an unknown topic or a log without ids (the default). [`MemoryLog`] and
    /// [`SegmentLog`](crate::SegmentLog) keep ids; the segment log's survive a restart.
    fn topic_id(&self, topic: &str) -> Option<[u8; 16]> {
        let _ = topic;
        None
    }
}

#[async_trait]
impl PartitionLog for MemoryLog {
    async fn create_topic(&self, name: &str, partitions: u32) -> Result<(), LogError> {
        MemoryLog::create_topic(self, name, partitions)
    }

    async fn topics(&self) -> Result<Vec<(String, u32)>, LogError> {
        Ok(MemoryLog::topics(self))
    }

    async fn append_encoded(
        &self,
        tp: &TopicPartition,
        records: Vec<NewRecord>,
        encode: EncodeBatch<'_>,
    ) -> Result<i64, LogError> {
        MemoryLog::append_encoded(self, tp, records, encode)
    }

    async fn bounds(&self, tp: &TopicPartition) -> Result<(i64, i64), LogError> {
        MemoryLog::bounds(self, tp)
    }

    async fn read_batches(
        &self,
        tp: &TopicPartition,
        from_offset: i64,
        max_bytes: usize,
    ) -> Result<BatchRead, LogError> {
        MemoryLog::read_batches(self, tp, from_offset, max_bytes)
    }

    async fn offset_for_timestamp(
        &self,
        tp: &TopicPartition,
        timestamp: i64,
    ) -> Result<Option<(i64, i64)>, LogError> {
        MemoryLog::offset_for_timestamp(self, tp, timestamp)
    }

    fn appends(&self) -> watch::Receiver<u64> {
        MemoryLog::appends(self)
    }

    fn topic_id(&self, topic: &str) -> Option<[u8; 16]> {
        MemoryLog::topic_id(self, topic)
    }
}

// The port's behaviour tests, run on every implementation, are in `port_tests.rs`.
