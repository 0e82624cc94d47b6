//! The partition log port: what a Kafka wire front (the broker's handlers) needs of a log,
//! so that another log ([`SegmentLog`](crate::SegmentLog) on disk, a database-backed one) can
//! stand where [`MemoryLog`] stands.

use std::fmt;

use async_trait::async_trait;
use coordinator_core::{Bytes, LogError, NewRecord, TopicMetadata, TopicPartition};
use tokio::sync::watch;

use std::sync::Arc;

use crate::compaction::{Compaction, CompactionPolicy, RecordFormat};
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

    /// Deletes `name` and its records, waking the readers waiting on
    /// [`appends`](Self::appends), so a long poll on it answers at once. Error:
    /// `UNKNOWN_TOPIC_OR_PARTITION`. The default refuses: a log that cannot delete topics
    /// answers `INVALID_ARGUMENT` (which a wire front reports as `INVALID_REQUEST`).
    async fn delete_topic(&self, name: &str) -> Result<(), LogError> {
        Err(LogError::InvalidArgument {
            what: "topic deletion",
            reason: format!("this log cannot delete topics (asked to delete `{name}`)"),
        })
    }

    /// Grows `name` to `partitions` empty-started partitions. Errors:
    /// `UNKNOWN_TOPIC_OR_PARTITION`; `INVALID_PARTITIONS` unless the count grows (and stays
    /// within [`coordinator_core::MAX_PARTITIONS_PER_TOPIC`]); nothing changes on error. The
    /// default refuses with `INVALID_ARGUMENT`, as [`delete_topic`](Self::delete_topic)'s.
    async fn create_partitions(&self, name: &str, partitions: u32) -> Result<(), LogError> {
        Err(LogError::InvalidArgument {
            what: "partition creation",
            reason: format!(
                "this log cannot add partitions (asked to grow `{name}` to {partitions})"
            ),
        })
    }

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

    /// [`append_encoded`](Self::append_encoded) for an appender that reads its batches back
    /// from their encoding only (a wire front): the batch's records are known by their
    /// `timestamps` (one per record, in order), and the log keeps no record view of them
    /// (their [`records`](crate::Batch::records) read back empty, as every batch of a log
    /// that keeps only the bytes). Offsets, bounds, lookups by timestamp and compaction are
    /// those of an [`append_encoded`](Self::append_encoded) of records with these
    /// timestamps. Errors: as `append_encoded`'s.
    ///
    /// The default calls `append_encoded` with records that carry the timestamps and empty
    /// values (one shared allocation), which is right for a log that keeps only the bytes and
    /// the timestamps; [`MemoryLog`] and [`SegmentLog`](crate::SegmentLog) take the
    /// timestamps directly.
    async fn append_encoded_timestamps(
        &self,
        tp: &TopicPartition,
        timestamps: &[i64],
        encode: EncodeBatch<'_>,
    ) -> Result<i64, LogError> {
        let empty = Bytes::from(&[][..]);
        let records = timestamps
            .iter()
            .map(|&t| NewRecord {
                value: empty.clone(),
                timestamp: Some(t),
                ..NewRecord::default()
            })
            .collect();
        self.append_encoded(tp, records, encode).await
    }

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

    /// Removes every record of `tp` below `offset` (Kafka's `DeleteRecords`) and returns the
    /// log start offset, which is `offset` or, if the log start was already past it, the log
    /// start. Errors: `UNKNOWN_TOPIC_OR_PARTITION`; `OFFSET_OUT_OF_RANGE` for a negative
    /// offset or one past the visible end; nothing changes on error. The default refuses
    /// with `INVALID_ARGUMENT`, as [`delete_topic`](Self::delete_topic)'s.
    async fn delete_records(&self, tp: &TopicPartition, offset: i64) -> Result<i64, LogError> {
        Err(LogError::InvalidArgument {
            what: "record deletion",
            reason: format!("this log cannot delete records (asked to delete {tp} below {offset})"),
        })
    }

    /// Applies Kafka's retention rules to `tp` now, with these limits (a topic's
    /// `retention.ms` and `retention.bytes`; `-1` disables either): what is older than
    /// `retention_ms`, and what the partition can lose while staying at or above
    /// `retention_bytes`, is removed in the log's units (the segment log's closed segments,
    /// the memory log's batches), never at or above the high watermark. Returns the log
    /// start. Error: `UNKNOWN_TOPIC_OR_PARTITION`. The default refuses with
    /// `INVALID_ARGUMENT`, as [`delete_topic`](Self::delete_topic)'s.
    async fn apply_retention(
        &self,
        tp: &TopicPartition,
        retention_ms: i64,
        retention_bytes: i64,
    ) -> Result<i64, LogError> {
        Err(LogError::InvalidArgument {
            what: "retention",
            reason: format!(
                "this log cannot apply retention ({tp}: {retention_ms} ms, {retention_bytes} bytes)"
            ),
        })
    }

    /// The bytes `tp` holds, as `DescribeLogDirs` reports a partition's size. Error:
    /// `UNKNOWN_TOPIC_OR_PARTITION`. The default refuses with `INVALID_ARGUMENT`, as
    /// [`delete_topic`](Self::delete_topic)'s.
    async fn partition_size(&self, tp: &TopicPartition) -> Result<u64, LogError> {
        Err(LogError::InvalidArgument {
            what: "partition size",
            reason: format!("this log cannot tell the size of {tp}"),
        })
    }

    /// The first readable record of `tp` with the largest timestamp, as `(offset, its
    /// timestamp)`, or `None` when nothing is readable: `ListOffsets` with `MAX_TIMESTAMP`
    /// (KIP-734; among records sharing the largest timestamp, the lowest offset, as Kafka 4).
    /// Error: `UNKNOWN_TOPIC_OR_PARTITION`. The default refuses with `INVALID_ARGUMENT`, as
    /// [`delete_topic`](Self::delete_topic)'s.
    async fn offset_of_max_timestamp(
        &self,
        tp: &TopicPartition,
    ) -> Result<Option<(i64, i64)>, LogError> {
        Err(LogError::InvalidArgument {
            what: "max-timestamp lookup",
            reason: format!("this log cannot find the largest timestamp of {tp}"),
        })
    }

    /// Closes `tp`'s active segment if it holds records and was opened more than
    /// `max_age_ms` ago on the log's clock (Kafka's `segment.ms`: a segment is closed by age
    /// as well as by size, so that retention and compaction, which never touch the active
    /// segment, reach its records; the age is the segment's, not its records' timestamps,
    /// which clients set). Returns whether it did. Error: `UNKNOWN_TOPIC_OR_PARTITION`. The
    /// default, for a log without segments, does nothing.
    async fn roll_older_than(
        &self,
        tp: &TopicPartition,
        max_age_ms: i64,
    ) -> Result<bool, LogError> {
        let _ = (tp, max_age_ms);
        Ok(false)
    }

    /// One compaction pass over `tp`'s closed segments (Kafka's log cleaner, for a topic
    /// whose `cleanup.policy` includes `compact`): if the partition is due under `policy`,
    /// its records are rewritten keeping the latest of each key, read through `format`;
    /// offsets never change. Returns what the pass did (nothing, if it was not due or another
    /// pass is running). Errors: `UNKNOWN_TOPIC_OR_PARTITION`; `STORAGE_ERROR` for a failed
    /// read or write (what was not swapped in is unchanged). The default refuses with
    /// `INVALID_ARGUMENT`, as [`delete_topic`](Self::delete_topic)'s.
    async fn compact(
        &self,
        tp: &TopicPartition,
        policy: &CompactionPolicy,
        format: Arc<dyn RecordFormat>,
    ) -> Result<Compaction, LogError> {
        let _ = (policy, format);
        Err(LogError::InvalidArgument {
            what: "compaction",
            reason: format!("this log cannot compact ({tp})"),
        })
    }

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

    async fn delete_topic(&self, name: &str) -> Result<(), LogError> {
        MemoryLog::delete_topic(self, name)
    }

    async fn create_partitions(&self, name: &str, partitions: u32) -> Result<(), LogError> {
        MemoryLog::create_partitions(self, name, partitions)
    }

    async fn append_encoded(
        &self,
        tp: &TopicPartition,
        records: Vec<NewRecord>,
        encode: EncodeBatch<'_>,
    ) -> Result<i64, LogError> {
        MemoryLog::append_encoded(self, tp, records, encode)
    }

    async fn append_encoded_timestamps(
        &self,
        tp: &TopicPartition,
        timestamps: &[i64],
        encode: EncodeBatch<'_>,
    ) -> Result<i64, LogError> {
        MemoryLog::append_encoded_timestamps(self, tp, timestamps, encode)
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

    async fn partition_size(&self, tp: &TopicPartition) -> Result<u64, LogError> {
        MemoryLog::partition_size(self, tp)
    }

    async fn apply_retention(
        &self,
        tp: &TopicPartition,
        retention_ms: i64,
        retention_bytes: i64,
    ) -> Result<i64, LogError> {
        MemoryLog::apply_retention(self, tp, retention_ms, retention_bytes)
    }

    async fn delete_records(&self, tp: &TopicPartition, offset: i64) -> Result<i64, LogError> {
        if offset < 0 {
            // advance_log_start takes any offset at or below the log start as a no-op.
            let (log_start, visible_end) = MemoryLog::bounds(self, tp)?;
            return Err(LogError::OffsetOutOfRange(coordinator_core::OutOfRange {
                partition: tp.clone(),
                offset,
                log_start,
                visible_end,
            }));
        }
        MemoryLog::advance_log_start(self, tp, offset)
    }

    async fn offset_of_max_timestamp(
        &self,
        tp: &TopicPartition,
    ) -> Result<Option<(i64, i64)>, LogError> {
        MemoryLog::offset_of_max_timestamp(self, tp)
    }

    async fn compact(
        &self,
        tp: &TopicPartition,
        policy: &CompactionPolicy,
        format: Arc<dyn RecordFormat>,
    ) -> Result<Compaction, LogError> {
        MemoryLog::compact(self, tp, policy, &*format)
    }

    fn appends(&self) -> watch::Receiver<u64> {
        MemoryLog::appends(self)
    }

    fn topic_id(&self, topic: &str) -> Option<[u8; 16]> {
        MemoryLog::topic_id(self, topic)
    }
}

// The port's behaviour tests, run on every implementation, are in `testing.rs`; these are
// the port's own defaults and the memory log's deletion and growth.
#[cfg(test)]
mod tests {
    use super::*;

    /// A log implementing only the required methods refuses deletion and growth clearly.
    #[derive(Debug)]
    struct Minimal(MemoryLog);

    impl TopicMetadata for Minimal {
        fn partition_count(&self, topic: &str) -> Option<u32> {
            TopicMetadata::partition_count(&self.0, topic)
        }
        fn topic_names(&self) -> Vec<String> {
            TopicMetadata::topic_names(&self.0)
        }
    }

    #[async_trait]
    impl PartitionLog for Minimal {
        async fn create_topic(&self, name: &str, partitions: u32) -> Result<(), LogError> {
            self.0.create_topic(name, partitions)
        }
        async fn topics(&self) -> Result<Vec<(String, u32)>, LogError> {
            Ok(self.0.topics())
        }
        async fn append_encoded(
            &self,
            tp: &TopicPartition,
            records: Vec<NewRecord>,
            encode: EncodeBatch<'_>,
        ) -> Result<i64, LogError> {
            self.0.append_encoded(tp, records, encode)
        }
        async fn bounds(&self, tp: &TopicPartition) -> Result<(i64, i64), LogError> {
            self.0.bounds(tp)
        }
        async fn read_batches(
            &self,
            tp: &TopicPartition,
            from_offset: i64,
            max_bytes: usize,
        ) -> Result<BatchRead, LogError> {
            self.0.read_batches(tp, from_offset, max_bytes)
        }
        async fn offset_for_timestamp(
            &self,
            tp: &TopicPartition,
            timestamp: i64,
        ) -> Result<Option<(i64, i64)>, LogError> {
            self.0.offset_for_timestamp(tp, timestamp)
        }
        fn appends(&self) -> watch::Receiver<u64> {
            self.0.appends()
        }
    }

    #[tokio::test]
    async fn the_default_deletion_and_growth_refuse_with_a_clear_error() {
        let log = Minimal(MemoryLog::new());
        log.create_topic("t", 1).await.unwrap();
        let err = log.delete_topic("t").await.unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT");
        assert!(err.to_string().contains("cannot delete topics"), "{err}");
        let err = log.create_partitions("t", 2).await.unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT");
        assert!(err.to_string().contains("cannot add partitions"), "{err}");
        assert_eq!(log.partition_count("t"), Some(1), "nothing changed");
        let tp = TopicPartition::new("t", 0);
        let err = log.offset_of_max_timestamp(&tp).await.unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT");
        assert!(
            err.to_string().contains("largest timestamp of t-0"),
            "{err}"
        );
        let err = log.partition_size(&tp).await.unwrap_err();
        assert!(err.to_string().contains("size of t-0"), "{err}");
        let err = log.delete_records(&tp, 0).await.unwrap_err();
        assert!(err.to_string().contains("cannot delete records"), "{err}");
        let err = log.apply_retention(&tp, 1, 1).await.unwrap_err();
        assert!(err.to_string().contains("cannot apply retention"), "{err}");
        #[derive(Debug)]
        struct NoFormat;
        impl RecordFormat for NoFormat {
            fn kind(&self, _: &[u8]) -> crate::compaction::BatchKind {
                crate::compaction::BatchKind::Unknown
            }
            fn keys(&self, _: &[u8], _: i64) -> Option<Vec<crate::compaction::KeyedRecord>> {
                None
            }
            fn retain(
                &self,
                _: &[u8],
                _: i64,
                _: &dyn Fn(i64) -> bool,
            ) -> Result<crate::compaction::RetainedBatch, String> {
                Err("none".into())
            }
        }
        let policy = CompactionPolicy::default();
        let err = log
            .compact(&tp, &policy, Arc::new(NoFormat))
            .await
            .unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT");
        assert!(err.to_string().contains("cannot compact (t-0)"), "{err}");
    }

    /// The default `append_encoded_timestamps` (a log implementing only the required
    /// methods) appends records carrying the timestamps, with the encoding given.
    #[tokio::test]
    async fn the_default_append_of_timestamps_appends_records_that_carry_them() {
        let log = Minimal(MemoryLog::new());
        log.create_topic("t", 1).await.unwrap();
        let tp = TopicPartition::new("t", 0);
        let base = log
            .append_encoded_timestamps(&tp, &[10, 30], Box::new(|b| Bytes::from(vec![b as u8])))
            .await
            .unwrap();
        assert_eq!(base, 0);
        assert_eq!(log.bounds(&tp).await.unwrap(), (0, 2));
        let read = log.read_batches(&tp, 0, 1).await.unwrap();
        assert_eq!(read.batches[0].encoded().map(|b| b.to_vec()), Some(vec![0]));
        assert_eq!(read.batches[0].max_timestamp(), 30);
        assert_eq!(
            log.offset_for_timestamp(&tp, 11).await.unwrap(),
            Some((1, 30))
        );
        let empty = log
            .append_encoded_timestamps(&tp, &[], Box::new(|_| Bytes::from(Vec::new())))
            .await;
        assert_eq!(empty.unwrap_err().code(), "INVALID_ARGUMENT");
    }

    /// The memory log behind the port answers as its own methods do.
    #[tokio::test]
    async fn the_memory_log_serves_the_port() {
        let log: Arc<dyn PartitionLog> = Arc::new(MemoryLog::new());
        log.create_topic("t", 2).await.unwrap();
        assert_eq!(
            log.create_topic("t", 1).await.unwrap_err().code(),
            "TOPIC_ALREADY_EXISTS"
        );
        assert_eq!(log.topics().await.unwrap(), [("t".to_string(), 2)]);
        assert_eq!(log.partition_count("t"), Some(2), "the topic metadata");
        let tp = TopicPartition::new("t", 1);
        let appends = log.appends();
        let records = vec![NewRecord::new(&b"x"[..]).timestamp(10)];
        let base = log
            .append_encoded(&tp, records, Box::new(|base| Bytes::from(vec![base as u8])))
            .await
            .unwrap();
        assert_eq!(base, 0);
        assert!(appends.has_changed().unwrap(), "the append is signalled");
        assert_eq!(log.bounds(&tp).await.unwrap(), (0, 1));
        let read = log.read_batches(&tp, 0, 1).await.unwrap();
        assert_eq!(read.batches[0].encoded().map(|b| b.to_vec()), Some(vec![0]));
        assert_eq!(
            log.offset_for_timestamp(&tp, 5).await.unwrap(),
            Some((0, 10))
        );
        assert_eq!(log.offset_for_timestamp(&tp, 11).await.unwrap(), None);
        log.create_partitions("t", 3).await.unwrap();
        assert_eq!(log.partition_count("t"), Some(3));
        log.delete_topic("t").await.unwrap();
        assert_eq!(log.partition_count("t"), None);
        let missing = TopicPartition::new("u", 0);
        assert_eq!(
            log.bounds(&missing).await.unwrap_err().kafka_code(),
            Some(3)
        );
    }
}
