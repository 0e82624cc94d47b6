//! The `groups` tool's error enum. Every error is one line for the operator, a stable
//! [`code`](AdminError::code) (Kafka's error name where Kafka has one), Kafka's numeric code
//! where there is one, and a [`kind`](AdminError::kind) that decides the exit code.
//!
//! Codes are stable: never renamed, never reused once retired. `docs/errors.md` lists them.

use std::path::PathBuf;

use coordinator_core::{StorageError, TopicPartition};

/// What the operator should do about an error, and so the exit code of the tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The command line cannot work as given: fix it. Exit code 2.
    Usage,
    /// The command was valid but the group, the broker or the data directory refused it or
    /// failed; nothing was changed unless the message says so. Exit code 1.
    Operational,
}

impl ErrorKind {
    /// The process exit code for this kind: 2 for usage, 1 for operational errors.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Usage => 2,
            ErrorKind::Operational => 1,
        }
    }
}

/// Why a `groups` command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// A flag is unknown, missing, malformed or conflicts with another.
    #[error("{message}")]
    Usage {
        /// What is wrong, naming the flags.
        message: String,
    },

    /// The reset needs the partition log, and a data directory holds committed offsets only.
    #[error("{flag} needs the partition log, and a data directory holds committed offsets only: run it against the broker with --bootstrap-server")]
    LogUnavailable {
        /// The flag that needs the log.
        flag: &'static str,
    },

    /// The group does not exist (Kafka's state `Dead`).
    #[error("Consumer group '{group}' does not exist.")]
    GroupNotFound {
        /// The group id.
        group: String,
    },

    /// A reset of a group that has members (Kafka's rule and wording).
    #[error("Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}.")]
    GroupNotInactive {
        /// The group id.
        group: String,
        /// Its state when it was checked.
        state: String,
    },

    /// A deletion of a group that has members.
    #[error("Group '{group}' could not be deleted due to: The group is not empty (its state is {state}).")]
    GroupNotEmpty {
        /// The group id.
        group: String,
        /// Its state when it was checked.
        state: String,
    },

    /// Offsets of a topic that a member of the group subscribes to cannot be deleted.
    #[error("Offsets of topic '{topic}' cannot be deleted: the consumer group '{group}' is actively subscribed to the topic.")]
    GroupSubscribedToTopic {
        /// The group id.
        group: String,
        /// The topic.
        topic: String,
    },

    /// The group is rebalancing, so what its members subscribe to cannot be known.
    #[error("Consumer group '{group}' is rebalancing (state {state}): its members' subscriptions are unknown until it is stable, so no offsets were deleted. Try again.")]
    GroupRebalancing {
        /// The group id.
        group: String,
        /// Its state.
        state: String,
    },

    /// A topic that does not exist.
    #[error("The topic '{topic}' does not exist.")]
    UnknownTopic {
        /// The topic.
        topic: String,
    },

    /// Partitions that do not exist (Kafka's wording).
    #[error("The partitions \"{}\" do not exist", join(partitions))]
    UnknownPartitions {
        /// The partitions, sorted.
        partitions: Vec<TopicPartition>,
    },

    /// `--shift-by` of a partition without a committed offset (Kafka's wording).
    #[error(
        "Cannot shift offset for partition {partition} since there is no current committed offset"
    )]
    NoCommittedOffset {
        /// The partition.
        partition: TopicPartition,
    },

    /// A data directory's group has no committed offsets for the topic, so the partitions
    /// to act on are unknown.
    #[error("Consumer group '{group}' has no committed offsets for topic '{topic}' in the data directory; name the partitions as {topic}:P,...")]
    NoOffsetsForTopic {
        /// The group id.
        group: String,
        /// The topic.
        topic: String,
    },

    /// No broker of the bootstrap list accepted a connection.
    #[error("cannot connect to the broker at {address}: {reason}")]
    Unreachable {
        /// The address(es) tried.
        address: String,
        /// The last failure.
        reason: String,
    },

    /// A request got no answer within `--timeout`.
    #[error("the broker at {address} did not answer {api} within {timeout_ms} ms")]
    Timeout {
        /// The broker.
        address: String,
        /// The request.
        api: &'static str,
        /// The bound.
        timeout_ms: u64,
    },

    /// The broker closed the connection, or sent something this tool cannot read.
    #[error("the broker at {address} failed {api}: {reason}")]
    Protocol {
        /// The broker.
        address: String,
        /// The request.
        api: &'static str,
        /// What went wrong.
        reason: String,
    },

    /// The broker does not serve an API this command needs.
    #[error("the broker at {address} does not serve {api} at any version this tool speaks ({min} to {max})")]
    UnsupportedApi {
        /// The broker.
        address: String,
        /// The API.
        api: &'static str,
        /// The lowest version this tool speaks.
        min: i16,
        /// The highest version this tool speaks.
        max: i16,
    },

    /// The broker answered with a Kafka error code not covered by a more precise variant.
    #[error("the broker answered {api}{} with error {code} ({})", context.as_deref().map(|c| format!(" for {c}")).unwrap_or_default(), kafka_error_name(*code))]
    Broker {
        /// The request.
        api: &'static str,
        /// What the error is about (a group, a partition), if known.
        context: Option<String>,
        /// Kafka's error code.
        code: i16,
    },

    /// The data directory does not exist or is not a directory.
    #[error("the data directory `{}` does not exist or is not a directory", path.display())]
    DataDirMissing {
        /// The directory.
        path: PathBuf,
    },

    /// The data directory holds neither a group log (`groups/`) nor an offset file.
    #[error("the data directory `{}` holds no offsets: neither a group log (`groups/`) nor `offsets.json`; point --data-dir at the directory a broker was started with", path.display())]
    DataDirEmpty {
        /// The directory.
        path: PathBuf,
    },

    /// The data directory's offset file could not be opened: a running broker owns it (the
    /// store's lock), or it cannot be read, or it is corrupt.
    #[error("cannot open the offsets of the data directory `{}`: {source} (while a broker runs on the directory, use --bootstrap-server)", path.display())]
    DataDirUnavailable {
        /// The directory.
        path: PathBuf,
        /// The store's error.
        #[source]
        source: StorageError,
    },

    /// The offset store refused or failed a read or a write (then nothing was written).
    #[error("{0}")]
    Store(#[from] StorageError),

    /// Standard output or error could not be written.
    #[error("cannot write the output: {0}")]
    Output(#[source] std::io::Error),
}

impl From<std::io::Error> for AdminError {
    fn from(e: std::io::Error) -> Self {
        AdminError::Output(e)
    }
}

fn join(partitions: &[TopicPartition]) -> String {
    partitions
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

impl AdminError {
    /// Every code [`code`](AdminError::code) can return besides the store's and the
    /// Kafka names of [`kafka_error_name`].
    pub const CODES: &'static [&'static str] = &[
        "USAGE",
        "LOG_UNAVAILABLE",
        "GROUP_ID_NOT_FOUND",
        "NON_EMPTY_GROUP",
        "GROUP_SUBSCRIBED_TO_TOPIC",
        "REBALANCE_IN_PROGRESS",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "NO_COMMITTED_OFFSET",
        "BROKER_UNREACHABLE",
        "REQUEST_TIMED_OUT",
        "NETWORK_EXCEPTION",
        "UNSUPPORTED_VERSION",
        "BROKER_ERROR",
        "DATA_DIR_NOT_FOUND",
        "STORAGE_ERROR",
        "WRITE_FAILED",
    ];

    /// The stable code: Kafka's error name where Kafka has one.
    pub fn code(&self) -> &'static str {
        match self {
            AdminError::Usage { .. } => "USAGE",
            AdminError::LogUnavailable { .. } => "LOG_UNAVAILABLE",
            AdminError::GroupNotFound { .. } => "GROUP_ID_NOT_FOUND",
            AdminError::GroupNotInactive { .. } | AdminError::GroupNotEmpty { .. } => {
                "NON_EMPTY_GROUP"
            }
            AdminError::GroupSubscribedToTopic { .. } => "GROUP_SUBSCRIBED_TO_TOPIC",
            AdminError::GroupRebalancing { .. } => "REBALANCE_IN_PROGRESS",
            AdminError::UnknownTopic { .. } | AdminError::UnknownPartitions { .. } => {
                "UNKNOWN_TOPIC_OR_PARTITION"
            }
            AdminError::NoCommittedOffset { .. } | AdminError::NoOffsetsForTopic { .. } => {
                "NO_COMMITTED_OFFSET"
            }
            AdminError::Unreachable { .. } => "BROKER_UNREACHABLE",
            AdminError::Timeout { .. } => "REQUEST_TIMED_OUT",
            AdminError::Protocol { .. } => "NETWORK_EXCEPTION",
            AdminError::UnsupportedApi { .. } => "UNSUPPORTED_VERSION",
            AdminError::Broker { code, .. } => match kafka_error_name(*code) {
                "UNKNOWN" => "BROKER_ERROR",
                name => name,
            },
            AdminError::DataDirMissing { .. } | AdminError::DataDirEmpty { .. } => {
                "DATA_DIR_NOT_FOUND"
            }
            AdminError::Store(e) | AdminError::DataDirUnavailable { source: e, .. } => e.code(),
            AdminError::Output(_) => "WRITE_FAILED",
        }
    }

    /// Kafka's numeric error code, where Kafka has one.
    pub fn kafka_code(&self) -> Option<i16> {
        match self {
            AdminError::GroupNotFound { .. } => Some(69),
            AdminError::GroupNotInactive { .. } | AdminError::GroupNotEmpty { .. } => Some(68),
            AdminError::GroupSubscribedToTopic { .. } => Some(86),
            AdminError::GroupRebalancing { .. } => Some(27),
            AdminError::UnknownTopic { .. } | AdminError::UnknownPartitions { .. } => Some(3),
            AdminError::Timeout { .. } => Some(7),
            AdminError::Protocol { .. } => Some(13),
            AdminError::UnsupportedApi { .. } => Some(35),
            AdminError::Broker { code, .. } => Some(*code),
            AdminError::Store(e) | AdminError::DataDirUnavailable { source: e, .. } => {
                e.kafka_code()
            }
            _ => None,
        }
    }

    /// Usage (exit 2) or operational (exit 1).
    pub fn kind(&self) -> ErrorKind {
        match self {
            AdminError::Usage { .. } | AdminError::LogUnavailable { .. } => ErrorKind::Usage,
            _ => ErrorKind::Operational,
        }
    }

    pub(crate) fn usage(message: impl Into<String>) -> AdminError {
        AdminError::Usage {
            message: message.into(),
        }
    }
}

/// Kafka's name of an error code the group admin APIs can answer with, or `UNKNOWN`.
pub fn kafka_error_name(code: i16) -> &'static str {
    match code {
        -1 => "UNKNOWN_SERVER_ERROR",
        0 => "NONE",
        1 => "OFFSET_OUT_OF_RANGE",
        3 => "UNKNOWN_TOPIC_OR_PARTITION",
        7 => "REQUEST_TIMED_OUT",
        12 => "OFFSET_METADATA_TOO_LARGE",
        13 => "NETWORK_EXCEPTION",
        14 => "COORDINATOR_LOAD_IN_PROGRESS",
        15 => "COORDINATOR_NOT_AVAILABLE",
        16 => "NOT_COORDINATOR",
        17 => "INVALID_TOPIC_EXCEPTION",
        22 => "ILLEGAL_GENERATION",
        24 => "INVALID_GROUP_ID",
        25 => "UNKNOWN_MEMBER_ID",
        27 => "REBALANCE_IN_PROGRESS",
        28 => "INVALID_COMMIT_OFFSET_SIZE",
        29 => "TOPIC_AUTHORIZATION_FAILED",
        30 => "GROUP_AUTHORIZATION_FAILED",
        35 => "UNSUPPORTED_VERSION",
        42 => "INVALID_REQUEST",
        56 => "KAFKA_STORAGE_ERROR",
        68 => "NON_EMPTY_GROUP",
        69 => "GROUP_ID_NOT_FOUND",
        82 => "FENCED_INSTANCE_ID",
        86 => "GROUP_SUBSCRIBED_TO_TOPIC",
        _ => "UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/errors.md's table for the tool lists exactly [`AdminError::CODES`].
    #[test]
    fn the_error_catalogue_lists_every_code() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/errors.md");
        let text = std::fs::read_to_string(path).expect("docs/errors.md");
        let section = text
            .split("\n## The `groups` tool")
            .nth(1)
            .expect("a section for the groups tool");
        let section = section.split("\n## ").next().unwrap_or_default();
        let mut listed: Vec<&str> = section
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .collect();
        let mut codes = AdminError::CODES.to_vec();
        listed.sort_unstable();
        codes.sort_unstable();
        assert_eq!(listed, codes);
    }

    #[test]
    fn every_code_is_listed_and_kinds_give_exit_codes() {
        let samples = [
            AdminError::usage("x"),
            AdminError::LogUnavailable {
                flag: "--to-earliest",
            },
            AdminError::GroupNotFound { group: "g".into() },
            AdminError::GroupNotInactive {
                group: "g".into(),
                state: "Stable".into(),
            },
            AdminError::Broker {
                api: "DescribeGroups",
                context: None,
                code: 16,
            },
            AdminError::Broker {
                api: "DescribeGroups",
                context: None,
                code: 999,
            },
        ];
        for e in &samples {
            assert!(
                AdminError::CODES.contains(&e.code())
                    || kafka_error_name(e.kafka_code().unwrap_or(0)) == e.code(),
                "{}",
                e.code()
            );
        }
        assert_eq!(samples[0].kind().exit_code(), 2);
        assert_eq!(samples[1].kind().exit_code(), 2);
        assert_eq!(samples[2].kind().exit_code(), 1);
        assert_eq!(samples[4].code(), "NOT_COORDINATOR");
        assert_eq!(samples[5].code(), "BROKER_ERROR");
        assert_eq!(
            samples[3].to_string(),
            "Assignments can only be reset if the group 'g' is inactive, but the current state is Stable."
        );
        assert_eq!(samples[2].to_string(), "Consumer group 'g' does not exist.");
    }
}
