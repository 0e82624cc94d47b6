//! An in-memory partitioned log: the [`RecordSource`] of tests, labs and the cluster facade.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use async_trait::async_trait;
use coordinator_core::{Clock, MonotonicClock, TopicMetadata, TopicPartition};

use crate::error::{LogError, OutOfRange};
use crate::record::{NewRecord, Record};
use crate::source::RecordSource;

/// Kafka's longest legal topic name.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Checks a topic name against Kafka's rules: 1 to 249 characters, each ASCII alphanumeric,
/// `.`, `_` or `-`, and neither `.` nor `..`.
///
/// ```
/// use consumer::validate_topic_name;
/// assert!(validate_topic_name("orders.v2_eu-west").is_ok());
/// assert_eq!(validate_topic_name("..").unwrap_err().code(), "INVALID_TOPIC_EXCEPTION");
/// assert_eq!(validate_topic_name("a/b").unwrap_err().kafka_code(), Some(17));
/// ```
pub fn validate_topic_name(name: &str) -> Result<(), LogError> {
    let invalid = |reason: String| {
        Err(LogError::InvalidTopic {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("a topic name must not be empty".into());
    }
    if name == "." || name == ".." {
        return invalid("`.` and `..` are not allowed as topic names".into());
    }
    // Characters first: the allowed ones are ASCII, so afterwards bytes and characters agree.
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return invalid(format!(
            "character {bad:?} is not allowed; use ASCII letters, digits, `.`, `_` and `-`"
        ));
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return invalid(format!(
            "it is {} characters long; the limit is {MAX_TOPIC_NAME_LEN}",
            name.len()
        ));
    }
    Ok(())
}

/// Kafka refuses a topic whose name equals an existing one once `.` is read as `_`, because
/// both map to the same metric names.
fn metric_name(topic: &str) -> String {
    topic.replace('.', "_")
}

/// One partition: the retained records and the two moving bounds.
#[derive(Debug, Default)]
struct PartitionLog {
    /// Offset of `records[0]`; records below it were removed by retention.
    log_start: i64,
    records: VecDeque<Record>,
    /// `None`: the high watermark follows the log end (a single unreplicated log).
    pinned_high_watermark: Option<i64>,
}

impl PartitionLog {
    fn log_end(&self) -> i64 {
        self.log_start.saturating_add(len_i64(self.records.len()))
    }

    fn visible_end(&self) -> i64 {
        self.pinned_high_watermark.unwrap_or_else(|| self.log_end())
    }

    fn out_of_range(&self, tp: &TopicPartition, offset: i64) -> LogError {
        LogError::OffsetOutOfRange(OutOfRange {
            partition: tp.clone(),
            offset,
            log_start: self.log_start,
            visible_end: self.visible_end(),
        })
    }
}

fn len_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// An in-memory partitioned log implementing [`RecordSource`], with the knobs tests need to
/// reach every out-of-range path: retention ([`advance_log_start`](Self::advance_log_start))
/// and a high watermark held below the log end
/// ([`set_high_watermark`](Self::set_high_watermark)).
///
/// It is also the cluster's [`TopicMetadata`]: hand the same `Arc<MemoryLog>` to the
/// coordinator, and the topics it assigns are exactly the topics consumers can read.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use consumer::{MemoryLog, RecordSource};
/// use coordinator_core::TopicPartition;
///
/// let log = MemoryLog::new();
/// log.create_topic("orders", 2)?;
/// let tp = TopicPartition::new("orders", 1);
/// for value in ["a", "b", "c"] {
///     log.append(&tp, value)?;
/// }
/// let records = log.fetch(&tp, 1, 10).await?;
/// assert_eq!(records.iter().map(|r| r.offset).collect::<Vec<_>>(), [1, 2]);
///
/// log.advance_log_start(&tp, 2)?; // retention removes offsets 0 and 1
/// let err = log.fetch(&tp, 0, 10).await.unwrap_err();
/// assert_eq!(err.code(), "OFFSET_OUT_OF_RANGE");
/// # Ok::<(), consumer::LogError>(())
/// # }).unwrap();
/// ```
pub struct MemoryLog {
    clock: Arc<dyn Clock>,
    topics: RwLock<BTreeMap<Arc<str>, Vec<PartitionLog>>>,
}

impl fmt::Debug for MemoryLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let topics = self.read();
        let mut m = f.debug_map();
        for (name, parts) in topics.iter() {
            m.entry(name, &parts.len());
        }
        m.finish()
    }
}

impl Default for MemoryLog {
    fn default() -> Self {
        MemoryLog::new()
    }
}

impl MemoryLog {
    /// An empty log that stamps records with a [`MonotonicClock`].
    pub fn new() -> Self {
        MemoryLog::with_clock(Arc::new(MonotonicClock::new()))
    }

    /// An empty log that stamps records without a timestamp with `clock`'s time.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        MemoryLog {
            clock,
            topics: RwLock::new(BTreeMap::new()),
        }
    }

    // Nothing panics while a guard is held, so a poisoned lock still guards consistent data.
    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<Arc<str>, Vec<PartitionLog>>> {
        self.topics.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<Arc<str>, Vec<PartitionLog>>> {
        self.topics.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Creates `name` with `partitions` empty partitions.
    ///
    /// Errors: `INVALID_TOPIC_EXCEPTION` (Kafka's name rules, see [`validate_topic_name`], or
    /// a name colliding with an existing one once `.` is read as `_`), `INVALID_PARTITIONS`
    /// (zero, or more than [`coordinator_core::MAX_PARTITIONS_PER_TOPIC`]),
    /// `TOPIC_ALREADY_EXISTS`. Nothing changes on error.
    pub fn create_topic(&self, name: &str, partitions: u32) -> Result<(), LogError> {
        validate_topic_name(name)?;
        if partitions == 0 || partitions > coordinator_core::MAX_PARTITIONS_PER_TOPIC {
            return Err(LogError::InvalidPartitions {
                topic: name.to_string(),
                partitions,
            });
        }
        let mut topics = self.write();
        if topics.contains_key(name) {
            return Err(LogError::TopicAlreadyExists {
                topic: name.to_string(),
            });
        }
        let metric = metric_name(name);
        if let Some(other) = topics.keys().find(|t| metric_name(t) == metric) {
            return Err(LogError::InvalidTopic {
                name: name.to_string(),
                reason: format!("it collides with existing topic `{other}` (`.` and `_` collide)"),
            });
        }
        let logs = (0..partitions).map(|_| PartitionLog::default()).collect();
        topics.insert(Arc::from(name), logs);
        Ok(())
    }

    /// The names and partition counts of every topic, sorted by name.
    pub fn topics(&self) -> Vec<(String, u32)> {
        self.read()
            .iter()
            .map(|(name, parts)| (name.to_string(), count_u32(parts.len())))
            .collect()
    }

    fn with_partition<T>(
        &self,
        tp: &TopicPartition,
        f: impl FnOnce(&PartitionLog) -> T,
    ) -> Result<T, LogError> {
        let topics = self.read();
        let log = partition(&topics, tp)?;
        Ok(f(log))
    }

    fn with_partition_mut<T>(
        &self,
        tp: &TopicPartition,
        f: impl FnOnce(&mut PartitionLog) -> Result<T, LogError>,
    ) -> Result<T, LogError> {
        let mut topics = self.write();
        let log = topics
            .get_mut(tp.topic())
            .and_then(|parts| parts.get_mut(tp.partition() as usize))
            .ok_or_else(|| unknown(tp))?;
        f(log)
    }

    /// Appends a record to `tp` and returns its offset. A record without a timestamp gets the
    /// clock's time. Error: `UNKNOWN_TOPIC_OR_PARTITION`.
    pub fn append(
        &self,
        tp: &TopicPartition,
        record: impl Into<NewRecord>,
    ) -> Result<i64, LogError> {
        let record = record.into();
        let now = i64::try_from(self.clock.now_ms()).unwrap_or(i64::MAX);
        self.with_partition_mut(tp, |log| {
            let offset = log.log_end();
            log.records.push_back(Record {
                topic: tp.topic_arc().clone(),
                partition: tp.partition(),
                offset,
                key: record.key,
                value: record.value,
                timestamp: record.timestamp.unwrap_or(now),
                headers: record.headers,
            });
            Ok(offset)
        })
    }

    /// The offset the next appended record of `tp` will get (Kafka's log end offset).
    pub fn log_end_offset(&self, tp: &TopicPartition) -> Result<i64, LogError> {
        self.with_partition(tp, PartitionLog::log_end)
    }

    /// Removes every record of `tp` below `offset`, as retention or Kafka's `DeleteRecords`
    /// does, and returns the new log start offset. An offset at or below the current log
    /// start changes nothing.
    ///
    /// Errors: `UNKNOWN_TOPIC_OR_PARTITION`; `OFFSET_OUT_OF_RANGE` if `offset` is above the
    /// visible end (Kafka refuses to delete records consumers cannot have read).
    pub fn advance_log_start(&self, tp: &TopicPartition, offset: i64) -> Result<i64, LogError> {
        self.with_partition_mut(tp, |log| {
            if offset > log.visible_end() {
                return Err(log.out_of_range(tp, offset));
            }
            while log.log_start < offset && log.records.pop_front().is_some() {
                log.log_start += 1;
            }
            Ok(log.log_start)
        })
    }

    /// Holds `tp`'s high watermark at `high_watermark`, so records from it up to the log end
    /// stay invisible (as if replicas had not caught up); `None` makes it follow the log end
    /// again.
    ///
    /// Errors: `UNKNOWN_TOPIC_OR_PARTITION`; `INVALID_ARGUMENT` if the watermark would lie
    /// above the log end or below the current visible end (a high watermark never goes back).
    pub fn set_high_watermark(
        &self,
        tp: &TopicPartition,
        high_watermark: Option<i64>,
    ) -> Result<(), LogError> {
        self.with_partition_mut(tp, |log| {
            if let Some(hw) = high_watermark {
                if hw > log.log_end() || hw < log.visible_end() {
                    return Err(LogError::InvalidArgument {
                        what: "high watermark",
                        reason: format!(
                            "{hw} for {tp} must lie between the visible end {} and the log end {}",
                            log.visible_end(),
                            log.log_end()
                        ),
                    });
                }
            }
            log.pinned_high_watermark = high_watermark;
            Ok(())
        })
    }
}

fn count_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn unknown(tp: &TopicPartition) -> LogError {
    LogError::UnknownTopicOrPartition {
        partition: tp.clone(),
    }
}

fn partition<'a>(
    topics: &'a BTreeMap<Arc<str>, Vec<PartitionLog>>,
    tp: &TopicPartition,
) -> Result<&'a PartitionLog, LogError> {
    topics
        .get(tp.topic())
        .and_then(|parts| parts.get(tp.partition() as usize))
        .ok_or_else(|| unknown(tp))
}

#[async_trait]
impl RecordSource for MemoryLog {
    async fn partition_count(&self, topic: &str) -> Result<Option<u32>, LogError> {
        Ok(TopicMetadata::partition_count(self, topic))
    }

    async fn log_start_offset(&self, tp: &TopicPartition) -> Result<i64, LogError> {
        self.with_partition(tp, |log| log.log_start)
    }

    async fn visible_end(&self, tp: &TopicPartition) -> Result<i64, LogError> {
        self.with_partition(tp, PartitionLog::visible_end)
    }

    async fn fetch(
        &self,
        tp: &TopicPartition,
        from_offset: i64,
        max: usize,
    ) -> Result<Vec<Record>, LogError> {
        let topics = self.read();
        let log = partition(&topics, tp)?;
        let end = log.visible_end();
        if from_offset < log.log_start || from_offset > end {
            return Err(log.out_of_range(tp, from_offset));
        }
        // Both differences are within the retained records, so they fit in usize.
        let first = usize::try_from(from_offset - log.log_start).unwrap_or(usize::MAX);
        let available = usize::try_from(end - from_offset).unwrap_or(0);
        Ok(log
            .records
            .iter()
            .skip(first)
            .take(available.min(max))
            .cloned()
            .collect())
    }
}

impl TopicMetadata for MemoryLog {
    fn partition_count(&self, topic: &str) -> Option<u32> {
        self.read().get(topic).map(|parts| count_u32(parts.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordinator_core::ManualClock;

    fn tp(p: u32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    fn log_with(n: usize) -> MemoryLog {
        let log = MemoryLog::with_clock(Arc::new(ManualClock::new()));
        log.create_topic("t", 2).unwrap();
        for i in 0..n {
            log.append(&tp(0), format!("v{i}")).unwrap();
        }
        log
    }

    fn offsets(records: &[Record]) -> Vec<i64> {
        records.iter().map(|r| r.offset).collect()
    }

    #[test]
    fn topic_names_follow_kafka_rules() {
        let long = "x".repeat(MAX_TOPIC_NAME_LEN);
        for ok in ["a", "A-Z_0.9", "...", long.as_str()] {
            validate_topic_name(ok).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        }
        let too_long = "x".repeat(MAX_TOPIC_NAME_LEN + 1);
        for bad in ["", ".", "..", "a b", "a/b", "é", too_long.as_str()] {
            let err = validate_topic_name(bad).expect_err(bad);
            assert_eq!(err.code(), "INVALID_TOPIC_EXCEPTION", "{bad:?}");
        }
    }

    #[test]
    fn create_topic_refuses_bad_requests_and_changes_nothing() {
        let log = MemoryLog::new();
        log.create_topic("a.b", 1).unwrap();
        let cases = [
            ("a.b", 3, "TOPIC_ALREADY_EXISTS", Some(36)),
            ("a_b", 1, "INVALID_TOPIC_EXCEPTION", Some(17)),
            ("c", 0, "INVALID_PARTITIONS", Some(37)),
            ("..", 1, "INVALID_TOPIC_EXCEPTION", Some(17)),
        ];
        for (name, parts, code, kafka) in cases {
            let err = log.create_topic(name, parts).expect_err(name);
            assert_eq!((err.code(), err.kafka_code()), (code, kafka), "{name}");
        }
        assert_eq!(log.topics(), [("a.b".to_string(), 1)]);
    }

    #[tokio::test]
    async fn append_assigns_consecutive_offsets_and_stamps_time() {
        let clock = ManualClock::new();
        let log = MemoryLog::with_clock(Arc::new(clock.clone()));
        log.create_topic("t", 1).unwrap();
        clock.advance(42);
        assert_eq!(log.append(&tp(0), "a").unwrap(), 0);
        assert_eq!(
            log.append(&tp(0), NewRecord::new(&b"b"[..]).timestamp(7))
                .unwrap(),
            1
        );
        let records = log.fetch(&tp(0), 0, 10).await.unwrap();
        assert_eq!(records[0].timestamp, 42);
        assert_eq!(records[1].timestamp, 7);
        assert_eq!(&*records[1].value, b"b");
        assert_eq!(
            log.append(&tp(1), "x").unwrap_err().code(),
            "UNKNOWN_TOPIC_OR_PARTITION"
        );
    }

    #[tokio::test]
    async fn fetch_honours_max_and_both_bounds() {
        let log = log_with(5);
        assert_eq!(offsets(&log.fetch(&tp(0), 1, 2).await.unwrap()), [1, 2]);
        assert!(
            log.fetch(&tp(0), 5, 10).await.unwrap().is_empty(),
            "at the end: empty"
        );
        assert!(log.fetch(&tp(0), 0, 0).await.unwrap().is_empty());
        let err = log.fetch(&tp(0), 6, 10).await.unwrap_err();
        assert!(matches!(
            err,
            LogError::OffsetOutOfRange(OutOfRange {
                offset: 6,
                log_start: 0,
                visible_end: 5,
                ..
            })
        ));
        assert!(log.fetch(&tp(0), -1, 10).await.is_err());
        let missing = TopicPartition::new("nope", 0);
        assert_eq!(
            log.fetch(&missing, 0, 1).await.unwrap_err().kafka_code(),
            Some(3)
        );
        assert_eq!(
            log.fetch(&tp(2), 0, 1).await.unwrap_err().kafka_code(),
            Some(3)
        );
    }

    #[tokio::test]
    async fn retention_moves_the_log_start_forward_only() {
        let log = log_with(5);
        assert_eq!(log.advance_log_start(&tp(0), 3).unwrap(), 3);
        assert_eq!(
            log.advance_log_start(&tp(0), 1).unwrap(),
            3,
            "never backwards"
        );
        assert_eq!(log.log_start_offset(&tp(0)).await.unwrap(), 3);
        assert_eq!(offsets(&log.fetch(&tp(0), 3, 10).await.unwrap()), [3, 4]);
        assert_eq!(
            log.fetch(&tp(0), 2, 10).await.unwrap_err().code(),
            "OFFSET_OUT_OF_RANGE"
        );
        let err = log.advance_log_start(&tp(0), 6).unwrap_err();
        assert_eq!(err.code(), "OFFSET_OUT_OF_RANGE");
        assert_eq!(
            log.advance_log_start(&tp(0), 5).unwrap(),
            5,
            "up to the end is allowed"
        );
        assert!(log.fetch(&tp(0), 5, 10).await.unwrap().is_empty());
        assert_eq!(
            log.append(&tp(0), "next").unwrap(),
            5,
            "offsets continue after retention"
        );
    }

    #[tokio::test]
    async fn a_pinned_high_watermark_hides_the_tail() {
        let log = log_with(0);
        log.set_high_watermark(&tp(0), Some(0)).unwrap();
        for v in ["a", "b", "c"] {
            log.append(&tp(0), v).unwrap();
        }
        assert_eq!(log.visible_end(&tp(0)).await.unwrap(), 0);
        assert_eq!(log.log_end_offset(&tp(0)).unwrap(), 3);
        assert!(log.fetch(&tp(0), 0, 10).await.unwrap().is_empty());
        log.set_high_watermark(&tp(0), Some(2)).unwrap();
        assert_eq!(offsets(&log.fetch(&tp(0), 0, 10).await.unwrap()), [0, 1]);
        assert_eq!(
            log.fetch(&tp(0), 3, 10).await.unwrap_err().code(),
            "OFFSET_OUT_OF_RANGE"
        );
        for bad in [1, 4] {
            let err = log.set_high_watermark(&tp(0), Some(bad)).unwrap_err();
            assert_eq!(err.code(), "INVALID_ARGUMENT", "{bad}");
        }
        assert_eq!(
            log.visible_end(&tp(0)).await.unwrap(),
            2,
            "a refused move changes nothing"
        );
        log.set_high_watermark(&tp(0), None).unwrap();
        assert_eq!(log.visible_end(&tp(0)).await.unwrap(), 3);
    }

    #[test]
    fn the_log_is_the_coordinators_topic_metadata() {
        let log = log_with(0);
        let metadata: &dyn TopicMetadata = &log;
        assert_eq!(metadata.partition_count("t"), Some(2));
        assert_eq!(metadata.partition_count("u"), None);
    }
}
