//! The error of the record-source port and of logs' administrative calls.
//!
//! Codes are part of the public contract: they are logged, sent over wires and matched on by
//! callers. A code is never renamed, and a retired code is never reused.

use crate::error::ErrorClass;
use crate::types::TopicPartition;

/// An offset outside a partition's readable range, with the range at the time: valid
/// positions run from the log start to the visible end, both included (a position at the
/// visible end reads nothing yet).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "offset {offset} of {partition} is out of range: valid positions are {log_start}..={visible_end}"
)]
pub struct OutOfRange {
    /// The partition.
    pub partition: TopicPartition,
    /// The refused offset.
    pub offset: i64,
    /// The partition's log start offset.
    pub log_start: i64,
    /// The partition's visible end (high watermark).
    pub visible_end: i64,
}

/// The error of a [`RecordSource`](crate::RecordSource) and of the administrative calls
/// of a log (the `partition-log` crate's `MemoryLog`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The topic or partition does not exist.
    #[error("unknown topic or partition: {partition}")]
    UnknownTopicOrPartition {
        /// The partition asked for (for an unknown topic, its partition 0 or the one named).
        partition: TopicPartition,
    },

    /// A fetch (or a log-start move) named an offset outside `log_start..=visible_end`.
    #[error(transparent)]
    OffsetOutOfRange(OutOfRange),

    /// A topic name that breaks Kafka's rules.
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopic {
        /// The refused name.
        name: String,
        /// Which rule it breaks.
        reason: String,
    },

    /// A topic with this name already exists.
    #[error("topic `{topic}` already exists")]
    TopicAlreadyExists {
        /// The topic name.
        topic: String,
    },

    /// A partition count that is not positive.
    #[error(
        "invalid partition count {partitions} for topic `{topic}`: it must be between 1 and {}",
        crate::MAX_PARTITIONS_PER_TOPIC
    )]
    InvalidPartitions {
        /// The topic name.
        topic: String,
        /// The refused count.
        partitions: u32,
    },

    /// An argument is malformed (a high watermark outside the log, a negative offset).
    #[error("invalid {what}: {reason}")]
    InvalidArgument {
        /// Which argument.
        what: &'static str,
        /// Why it was refused.
        reason: String,
    },

    /// The log's storage or transport failed (for file- or network-backed sources).
    #[error("record source failed: {message}")]
    Storage {
        /// What failed, naming the file or endpoint.
        message: String,
        /// The underlying cause.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
}

impl LogError {
    /// Every code [`LogError::code`] can return, in declaration order. Stable.
    pub const CODES: &'static [&'static str] = &[
        "UNKNOWN_TOPIC_OR_PARTITION",
        "OFFSET_OUT_OF_RANGE",
        "INVALID_TOPIC_EXCEPTION",
        "TOPIC_ALREADY_EXISTS",
        "INVALID_PARTITIONS",
        "INVALID_ARGUMENT",
        "STORAGE_ERROR",
    ];

    /// The stable code, e.g. `OFFSET_OUT_OF_RANGE`.
    pub fn code(&self) -> &'static str {
        match self {
            LogError::UnknownTopicOrPartition { .. } => "UNKNOWN_TOPIC_OR_PARTITION",
            LogError::OffsetOutOfRange(_) => "OFFSET_OUT_OF_RANGE",
            LogError::InvalidTopic { .. } => "INVALID_TOPIC_EXCEPTION",
            LogError::TopicAlreadyExists { .. } => "TOPIC_ALREADY_EXISTS",
            LogError::InvalidPartitions { .. } => "INVALID_PARTITIONS",
            LogError::InvalidArgument { .. } => "INVALID_ARGUMENT",
            LogError::Storage { .. } => "STORAGE_ERROR",
        }
    }

    /// Kafka's numeric code: `OFFSET_OUT_OF_RANGE` 1, `UNKNOWN_TOPIC_OR_PARTITION` 3,
    /// `INVALID_TOPIC_EXCEPTION` 17, `TOPIC_ALREADY_EXISTS` 36, `INVALID_PARTITIONS` 37,
    /// `KAFKA_STORAGE_ERROR` 56.
    pub fn kafka_code(&self) -> Option<i16> {
        match self {
            LogError::OffsetOutOfRange(_) => Some(1),
            LogError::UnknownTopicOrPartition { .. } => Some(3),
            LogError::InvalidTopic { .. } => Some(17),
            LogError::TopicAlreadyExists { .. } => Some(36),
            LogError::InvalidPartitions { .. } => Some(37),
            LogError::Storage { .. } => Some(56),
            LogError::InvalidArgument { .. } => None,
        }
    }

    /// `Fatal` for a storage failure, `InvalidRequest` for everything else.
    pub fn class(&self) -> ErrorClass {
        match self {
            LogError::Storage { .. } => ErrorClass::Fatal,
            _ => ErrorClass::InvalidRequest,
        }
    }

    /// A storage failure with its cause, for file- or network-backed sources.
    pub fn storage(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        LogError::Storage {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }
}
