//! The `RecordSource` port: how a consumer reads partitions.

use std::sync::Arc;

use super::error::LogError;
use super::record::Record;
use crate::types::TopicPartition;
use async_trait::async_trait;

/// Read access to partitioned logs: the only way a consumer (the `consumer` crate's
/// `Consumer`) reaches records. The `partition-log` crate's `MemoryLog` implements it in
/// memory; a network client or a file-backed log can replace it without touching the consumer.
///
/// Object-safe (`Arc<dyn RecordSource>`) and `async`, so an implementation may do I/O.
///
/// A partition's readable range is `log_start_offset ..= visible_end`: records below the
/// log start were removed by retention, and records at or above the visible end (the high
/// watermark) are not yet committed by the log's replicas and must never be returned.
///
/// # To ensure correctness
/// - **Existence**: `partition_count` returns `None` for a topic that does not exist; every
///   other call on a missing topic or on a partition number `>= partition_count` returns
///   [`LogError::UnknownTopicOrPartition`].
/// - **Range**: `fetch` with `from_offset < log_start_offset` or `from_offset >
///   visible_end` returns [`LogError::OffsetOutOfRange`] carrying both bounds (the consumer
///   resets its position from them). `from_offset == visible_end` is in range and returns no
///   records.
/// - **Contiguity**: `fetch` returns at most `max` records, consecutive in offset and starting
///   exactly at `from_offset`, none at or above the visible end, each carrying the topic and
///   partition asked for.
/// - **Monotonic bounds**: the log start and the visible end never decrease.
#[async_trait]
pub trait RecordSource: Send + Sync {
    /// How many partitions `topic` has (numbered `0..n`), or `None` if it does not exist.
    async fn partition_count(&self, topic: &str) -> Result<Option<u32>, LogError>;

    /// The first offset still in the log (Kafka's log start offset).
    async fn log_start_offset(&self, tp: &TopicPartition) -> Result<i64, LogError>;

    /// The offset after the last record a consumer may read (the high watermark; for a single
    /// unreplicated log, its end offset).
    async fn visible_end(&self, tp: &TopicPartition) -> Result<i64, LogError>;

    /// Up to `max` records of `tp` starting at `from_offset`, stopping at the visible end.
    async fn fetch(
        &self,
        tp: &TopicPartition,
        from_offset: i64,
        max: usize,
    ) -> Result<Vec<Record>, LogError>;
}

#[async_trait]
impl<S: RecordSource + ?Sized> RecordSource for Arc<S> {
    async fn partition_count(&self, topic: &str) -> Result<Option<u32>, LogError> {
        (**self).partition_count(topic).await
    }

    async fn log_start_offset(&self, tp: &TopicPartition) -> Result<i64, LogError> {
        (**self).log_start_offset(tp).await
    }

    async fn visible_end(&self, tp: &TopicPartition) -> Result<i64, LogError> {
        (**self).visible_end(tp).await
    }

    async fn fetch(
        &self,
        tp: &TopicPartition,
        from_offset: i64,
        max: usize,
    ) -> Result<Vec<Record>, LogError> {
        (**self).fetch(tp, from_offset, max).await
    }
}
