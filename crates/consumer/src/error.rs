//! The consumer's error enum.
//!
//! Codes are part of the public contract: they are logged, sent over wires and matched on by
//! callers. A code is never renamed, and a retired code is never reused.

use coordinator_core::log::{LogError, OutOfRange};
use coordinator_core::{ErrorClass, TopicPartition};

/// Every error a [`Consumer`](crate::Consumer) returns.
///
/// Grouped by what the caller does next (see [`ConsumerError::class`]): a coordinator error
/// that is *fenced* (`ILLEGAL_GENERATION`) asks for `refresh_assignment()` and a retry; one
/// that asks to *rejoin* (`UNKNOWN_MEMBER`, `REBALANCE_IN_PROGRESS`) for `subscribe` again; a
/// wrong call (`ILLEGAL_STATE`, `INVALID_ARGUMENT`,
/// `NOT_ASSIGNED`, …) must be fixed; a storage failure is fatal. A refused call changes
/// nothing in the consumer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// An argument is malformed: an empty group or member id, a negative offset, an unknown
    /// `auto_offset_reset` name.
    #[error("invalid {what}: {reason}")]
    InvalidArgument {
        /// Which argument.
        what: &'static str,
        /// Why it was refused.
        reason: String,
    },

    /// The call is not allowed in the consumer's current state: subscribe after assign (or
    /// the reverse), heartbeat/refresh/commit before joining, anything after close.
    #[error("cannot {operation}: {reason}")]
    IllegalState {
        /// The refused operation (`subscribe`, `poll`, …).
        operation: &'static str,
        /// Why it is not allowed now.
        reason: &'static str,
    },

    /// Partitions that do not exist in the log.
    #[error("unknown topic or partition: {}", join(partitions))]
    UnknownTopicOrPartition {
        /// The partitions that do not exist, sorted.
        partitions: Vec<TopicPartition>,
    },

    /// `position`, `seek` or `lag` named a partition this consumer is not assigned.
    #[error("partition {partition} is not assigned to this consumer")]
    NotAssigned {
        /// The partition.
        partition: TopicPartition,
    },

    /// `position` or `lag` of an assigned partition that has no position yet (poll or seek
    /// first).
    #[error("partition {partition} has no position yet: poll or seek first")]
    NoPosition {
        /// The partition.
        partition: TopicPartition,
    },

    /// A fetch position lies outside the partition's readable range and the reset policy is
    /// `error`, or the reset and its one retry failed too.
    #[error(transparent)]
    OffsetOutOfRange(OutOfRange),

    /// A partition has neither a position nor a committed offset, and the reset policy is
    /// `error`. Same code as [`OffsetOutOfRange`](Self::OffsetOutOfRange), as the rules require
    /// (docs/rules.md#consumer-poll; Kafka's client calls it `NoOffsetForPartitionException`).
    #[error(
        "partition {partition} has no committed offset and auto_offset_reset is `error`: \
         seek to an offset or commit one first"
    )]
    NoOffsetForPartition {
        /// The partition.
        partition: TopicPartition,
    },

    /// The coordinator refused the call; its code is forwarded (`ILLEGAL_GENERATION`,
    /// `UNKNOWN_MEMBER`, `NOT_PARTITION_OWNER`, …).
    #[error(transparent)]
    Coordinator(#[from] coordinator_core::Error),

    /// The record source failed for a reason other than the two above (storage, network).
    #[error(transparent)]
    Log(LogError),
}

impl ConsumerError {
    /// Every code [`ConsumerError::code`] can return besides those forwarded from the
    /// coordinator and the log. Stable: codes are only added.
    pub const CODES: &'static [&'static str] = &[
        "INVALID_ARGUMENT",
        "ILLEGAL_STATE",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "NOT_ASSIGNED",
        "NO_POSITION",
        "OFFSET_OUT_OF_RANGE",
    ];

    /// The stable code, e.g. `ILLEGAL_STATE`; a coordinator or log error forwards its own.
    pub fn code(&self) -> &'static str {
        match self {
            ConsumerError::InvalidArgument { .. } => "INVALID_ARGUMENT",
            ConsumerError::IllegalState { .. } => "ILLEGAL_STATE",
            ConsumerError::UnknownTopicOrPartition { .. } => "UNKNOWN_TOPIC_OR_PARTITION",
            ConsumerError::NotAssigned { .. } => "NOT_ASSIGNED",
            ConsumerError::NoPosition { .. } => "NO_POSITION",
            ConsumerError::OffsetOutOfRange(_) | ConsumerError::NoOffsetForPartition { .. } => {
                "OFFSET_OUT_OF_RANGE"
            }
            ConsumerError::Coordinator(e) => e.code(),
            ConsumerError::Log(e) => e.code(),
        }
    }

    /// Kafka's numeric error code, where Kafka has one: `OFFSET_OUT_OF_RANGE` 1,
    /// `UNKNOWN_TOPIC_OR_PARTITION` 3, and whatever the coordinator or log error maps to.
    pub fn kafka_code(&self) -> Option<i16> {
        match self {
            ConsumerError::OffsetOutOfRange(_) | ConsumerError::NoOffsetForPartition { .. } => {
                Some(1)
            }
            ConsumerError::UnknownTopicOrPartition { .. } => Some(3),
            ConsumerError::Coordinator(e) => e.kafka_code(),
            ConsumerError::Log(e) => e.kafka_code(),
            ConsumerError::InvalidArgument { .. }
            | ConsumerError::IllegalState { .. }
            | ConsumerError::NotAssigned { .. }
            | ConsumerError::NoPosition { .. } => None,
        }
    }

    /// What the caller should do next, in the coordinator's terms.
    pub fn class(&self) -> ErrorClass {
        match self {
            ConsumerError::Coordinator(e) => e.class(),
            ConsumerError::Log(e) => e.class(),
            _ => ErrorClass::InvalidRequest,
        }
    }

    /// True when the coordinator fenced the call: refresh the assignment and retry.
    pub fn is_fenced(&self) -> bool {
        self.class() == ErrorClass::Fenced
    }

    pub(crate) fn invalid(what: &'static str, reason: impl Into<String>) -> Self {
        ConsumerError::InvalidArgument {
            what,
            reason: reason.into(),
        }
    }

    pub(crate) fn illegal_state(operation: &'static str, reason: &'static str) -> Self {
        ConsumerError::IllegalState { operation, reason }
    }
}

impl From<LogError> for ConsumerError {
    /// The two errors a consumer handles itself become its own variants; the rest are wrapped.
    fn from(e: LogError) -> Self {
        match e {
            LogError::UnknownTopicOrPartition { partition } => {
                ConsumerError::UnknownTopicOrPartition {
                    partitions: vec![partition],
                }
            }
            LogError::OffsetOutOfRange(range) => ConsumerError::OffsetOutOfRange(range),
            other => ConsumerError::Log(other),
        }
    }
}

/// `orders-0, orders-2`.
fn join(partitions: &[TopicPartition]) -> String {
    let names: Vec<String> = partitions.iter().map(ToString::to_string).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordinator_core::Generation;

    #[test]
    fn code_lists_are_unique() {
        for codes in [ConsumerError::CODES, LogError::CODES] {
            let mut sorted = codes.to_vec();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), codes.len());
        }
    }

    #[test]
    fn coordinator_codes_are_forwarded() {
        let e: ConsumerError = coordinator_core::Error::IllegalGeneration {
            group: "g".into(),
            requested: Some(Generation::new(1)),
            current: Generation::new(2),
        }
        .into();
        assert_eq!(e.code(), "ILLEGAL_GENERATION");
        assert_eq!(e.kafka_code(), Some(22));
        assert!(e.is_fenced());
    }

    #[test]
    fn log_errors_the_consumer_handles_become_its_own_variants() {
        let tp = TopicPartition::new("t", 0);
        let e: ConsumerError = LogError::OffsetOutOfRange(OutOfRange {
            partition: tp.clone(),
            offset: 2,
            log_start: 5,
            visible_end: 9,
        })
        .into();
        assert!(matches!(
            e,
            ConsumerError::OffsetOutOfRange(OutOfRange { offset: 2, .. })
        ));
        assert_eq!(
            e.to_string(),
            "offset 2 of t-0 is out of range: valid positions are 5..=9"
        );
        assert_eq!(e.kafka_code(), Some(1));
        let e: ConsumerError = LogError::UnknownTopicOrPartition { partition: tp }.into();
        assert_eq!(e.code(), "UNKNOWN_TOPIC_OR_PARTITION");
        let e: ConsumerError = LogError::storage("disk", std::io::Error::other("gone")).into();
        assert_eq!(e.code(), "STORAGE_ERROR");
        assert_eq!(e.class(), ErrorClass::Fatal);
    }
}
