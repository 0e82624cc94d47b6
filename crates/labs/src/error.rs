//! The facade's error, and what a lab run can fail with.

use std::io;

use consumer::{ConsumerError, LogError};
use coordinator_core::StorageError;

/// Every error the [`Cluster`](crate::Cluster) facade returns. Each wraps the error of the
/// part that refused the call and forwards its stable [`code`](ClusterError::code).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The partition log refused: `INVALID_TOPIC_EXCEPTION`, `TOPIC_ALREADY_EXISTS`,
    /// `INVALID_PARTITIONS`, `UNKNOWN_TOPIC_OR_PARTITION`, `OFFSET_OUT_OF_RANGE`, …
    #[error(transparent)]
    Log(#[from] LogError),

    /// A consumer refused (`ILLEGAL_STATE`, `ILLEGAL_GENERATION`, …).
    #[error(transparent)]
    Consumer(#[from] ConsumerError),

    /// The coordinator refused (an invalid setting such as a zero session timeout).
    #[error(transparent)]
    Coordinator(#[from] coordinator_core::Error),

    /// The data directory or its offset file could not be opened or read.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl ClusterError {
    /// The stable code of the underlying error.
    pub fn code(&self) -> &'static str {
        match self {
            ClusterError::Log(e) => e.code(),
            ClusterError::Consumer(e) => e.code(),
            ClusterError::Coordinator(e) => e.code(),
            ClusterError::Storage(e) => e.code(),
        }
    }

    /// Kafka's numeric code of the underlying error, where Kafka has one.
    pub fn kafka_code(&self) -> Option<i16> {
        match self {
            ClusterError::Log(e) => e.kafka_code(),
            ClusterError::Consumer(e) => e.kafka_code(),
            ClusterError::Coordinator(e) => e.kafka_code(),
            ClusterError::Storage(e) => e.kafka_code(),
        }
    }
}

/// Why a lab run failed: the system refused something the lab expected to work, the system
/// accepted something the lab expected it to refuse, or the terminal went away.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LabError {
    /// A facade, consumer or coordinator call failed unexpectedly.
    #[error(transparent)]
    Cluster(#[from] ClusterError),

    /// The lab's expectation did not hold (the chapter's claim would be wrong).
    #[error("expectation failed: {0}")]
    Expectation(String),

    /// Writing the narration or managing the temporary directory failed.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
}

impl LabError {
    /// The stable code: the underlying error's, `LAB_EXPECTATION_FAILED`, or `IO_ERROR`.
    pub fn code(&self) -> &'static str {
        match self {
            LabError::Cluster(e) => e.code(),
            LabError::Expectation(_) => "LAB_EXPECTATION_FAILED",
            LabError::Io(_) => "IO_ERROR",
        }
    }
}

impl From<ConsumerError> for LabError {
    fn from(e: ConsumerError) -> Self {
        LabError::Cluster(e.into())
    }
}

impl From<LogError> for LabError {
    fn from(e: LogError) -> Self {
        LabError::Cluster(e.into())
    }
}

impl From<coordinator_core::Error> for LabError {
    fn from(e: coordinator_core::Error) -> Self {
        LabError::Cluster(e.into())
    }
}
