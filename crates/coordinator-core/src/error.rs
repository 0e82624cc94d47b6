//! The core's one error enum, its stable codes, and the storage error that stores return.
//!
//! Codes are part of the public contract: they are logged, sent over wires and matched on by
//! callers. A code is never renamed, and a retired code is never reused.

use std::fmt;

use crate::types::{Generation, GroupState, TopicPartition};

/// What a caller should do after an error, the way openraft splits API errors from fatal ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The request was fenced by a newer generation: refresh the assignment
    /// (`Coordinator::assignment`) and retry with the current generation.
    Fenced,
    /// The member must join again: the coordinator no longer knows it (it left or its session
    /// expired), or the group is not stable (here: `Empty`), as Kafka's consumers rejoin on
    /// `REBALANCE_IN_PROGRESS`.
    Rejoin,
    /// The request itself is wrong (bad argument, unknown topic or group, a partition the
    /// member does not own, no common assignment strategy): fix it; retrying unchanged fails again.
    InvalidRequest,
    /// The infrastructure failed (storage, a broken assignor). Nothing was changed; report it,
    /// and retry only once the cause is dealt with.
    Fatal,
}

/// Every error the coordinator returns.
///
/// Each variant has a stable [`code`](Error::code) and, where Kafka has one,
/// [Kafka's numeric error code](Error::kafka_code). A rejected call changes nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request's generation is not the group's current one.
    #[error(
        "illegal generation for group `{group}`: the request carries {}, the group is at \
         generation {current}; refresh the assignment and retry",
        DisplayGeneration(*requested)
    )]
    IllegalGeneration {
        /// The group id.
        group: String,
        /// The generation the caller sent (`None`: none, a negative number on Kafka's wire).
        requested: Option<Generation>,
        /// The group's current generation.
        current: Generation,
    },

    /// The group is not `Stable`: it is rebalancing, or it is `Empty` after its last member left.
    #[error("group `{group}` is {state}, not Stable: join the group again")]
    RebalanceInProgress {
        /// The group id.
        group: String,
        /// The state the group was in.
        state: GroupState,
    },

    /// The group exists but this member is not in it.
    #[error(
        "member `{member}` is not in group `{group}`: it left or its session expired; join again"
    )]
    UnknownMember {
        /// The group id.
        group: String,
        /// The member id.
        member: String,
    },

    /// A commit named partitions that the member does not own in the current generation.
    #[error(
        "member `{member}` of group `{group}` does not own {} in generation {generation}",
        DisplayList(partitions)
    )]
    NotPartitionOwner {
        /// The group id.
        group: String,
        /// The member id.
        member: String,
        /// The group's (and the request's) generation.
        generation: Generation,
        /// The requested partitions the member does not own, sorted.
        partitions: Vec<TopicPartition>,
    },

    /// No group with this id exists.
    #[error("group `{group}` does not exist")]
    GroupIdNotFound {
        /// The group id.
        group: String,
    },

    /// An argument is malformed: an empty id, a negative offset, a bad setting.
    #[error("invalid {what}: {reason}")]
    InvalidArgument {
        /// Which argument (`group id`, `member id`, `offset`, …).
        what: &'static str,
        /// Why it was refused.
        reason: String,
    },

    /// A subscription names topics that do not exist.
    #[error("unknown topics: {}", topics.join(", "))]
    UnknownTopic {
        /// The unknown topic names, sorted and de-duplicated.
        topics: Vec<String>,
    },

    /// A joining member supports no assignment strategy that every other member supports.
    #[error(
        "member `{member}` cannot join group `{group}`: none of its assignment strategies \
         [{}] is supported by every current member (they share [{}])",
        offered.join(", "),
        shared.join(", ")
    )]
    InconsistentGroupProtocol {
        /// The group id.
        group: String,
        /// The joining member.
        member: String,
        /// The strategies the joining member offered, in its order of preference.
        offered: Vec<String>,
        /// The strategies every current member supports, sorted.
        shared: Vec<String>,
    },

    /// A call for one kind of group (the chapter's, or Kafka's classic protocol) named a
    /// group of the other kind. Kafka answers a protocol-type mismatch the same way.
    #[error(
        "group `{group}` is a {actual} group, not a {expected} group: use the {actual} \
         protocol's calls, or another group id"
    )]
    WrongGroupType {
        /// The group id.
        group: String,
        /// The kind of group the call is for (`chapter` or `classic`).
        expected: &'static str,
        /// The kind of group it is.
        actual: &'static str,
    },

    /// The group id is empty (Kafka's JoinGroup, SyncGroup, Heartbeat, LeaveGroup).
    #[error("invalid group id: {reason}")]
    InvalidGroupId {
        /// Why it was refused.
        reason: String,
    },

    /// A classic member asked for a session timeout outside the coordinator's bounds.
    #[error(
        "session timeout {requested} ms is outside the coordinator's bounds \
         [{min}, {max}] ms (group.min.session.timeout.ms, group.max.session.timeout.ms)"
    )]
    InvalidSessionTimeout {
        /// What the member asked for.
        requested: i64,
        /// `group.min.session.timeout.ms`.
        min: u64,
        /// `group.max.session.timeout.ms`.
        max: u64,
    },

    /// The group has `group.max.size` members already.
    #[error("group `{group}` already has its maximum of {max} members (group.max.size)")]
    GroupMaxSizeReached {
        /// The group id.
        group: String,
        /// `group.max.size`.
        max: u32,
    },

    /// A new member must join again with the member id it has just been given (Kafka's
    /// JoinGroup v4+ handshake).
    #[error("member id required: join group `{group}` again with member id `{member_id}`")]
    MemberIdRequired {
        /// The group id.
        group: String,
        /// The id the member must use.
        member_id: String,
    },

    /// A static member's instance id now belongs to another member id: this one was
    /// replaced by a newer instance (KIP-345).
    #[error(
        "member `{member}` of group `{group}` is fenced: instance `{instance}` is now member \
         `{current}`"
    )]
    FencedInstanceId {
        /// The group id.
        group: String,
        /// The member id the request carried.
        member: String,
        /// The instance id.
        instance: String,
        /// The member id that instance has now (empty if it has none).
        current: String,
    },

    /// Offsets of a topic the group's members subscribe to cannot be deleted while it has
    /// members.
    #[error(
        "group `{group}` is subscribed to topic `{topic}`: its offsets can only be deleted \
         once no member subscribes to it"
    )]
    GroupSubscribedToTopic {
        /// The group id.
        group: String,
        /// The topic.
        topic: String,
    },

    /// The group still has members; only an Empty group can be deleted.
    #[error("group `{group}` is not empty: only an Empty group (no members) can be deleted")]
    NonEmptyGroup {
        /// The group id.
        group: String,
    },

    /// The assignor returned an error or an assignment that breaks its contract.
    #[error("assignor `{assignor}` failed: {reason}")]
    AssignorFailed {
        /// The assignor's name.
        assignor: String,
        /// What went wrong.
        reason: String,
    },

    /// A commit's metadata string is longer than `offset.metadata.max.bytes`.
    #[error(
        "the metadata committed with {partition} in group `{group}` is {size} bytes, more \
         than offset.metadata.max.bytes ({max}): nothing was committed"
    )]
    OffsetMetadataTooLarge {
        /// The group id.
        group: String,
        /// The first partition whose metadata is too long.
        partition: TopicPartition,
        /// Its metadata's length in bytes.
        size: usize,
        /// `offset.metadata.max.bytes`.
        max: usize,
    },

    // ---- Kafka's consumer group protocol (KIP-848) ----
    /// A consumer-protocol heartbeat carried a member epoch the coordinator does not accept:
    /// greater than the member's, or smaller and not a lost response (Kafka's
    /// `FENCED_MEMBER_EPOCH`). The member must give up its partitions and join again.
    #[error("member `{member}` of group `{group}`: {reason}")]
    FencedMemberEpoch {
        /// The group id.
        group: String,
        /// The member id.
        member: String,
        /// Kafka's message, with both epochs.
        reason: String,
    },

    /// A static member joined with an instance id another member still holds (its epoch is
    /// not −2: it did not leave temporarily).
    #[error(
        "Static member {member} with instance id {instance} cannot join the group because the \
         instance id is owned by {owner} member."
    )]
    UnreleasedInstanceId {
        /// The group id.
        group: String,
        /// The joining member id.
        member: String,
        /// The instance id.
        instance: String,
        /// The member that holds it.
        owner: String,
    },

    /// A consumer-protocol member named a server-side assignor the coordinator does not have.
    #[error(
        "ServerAssignor {assignor} is not supported. Supported assignors: {}.",
        supported.join(", ")
    )]
    UnsupportedAssignor {
        /// The name the member sent.
        assignor: String,
        /// The registered names, the default first.
        supported: Vec<String>,
    },

    /// An offset commit or fetch of a consumer-protocol member carried an epoch that is not
    /// the member's current one.
    #[error(
        "The received member epoch {received} does not match the expected member epoch \
         {expected}."
    )]
    StaleMemberEpoch {
        /// The group id.
        group: String,
        /// The member id.
        member: String,
        /// The epoch the request carried.
        received: i32,
        /// The member's epoch.
        expected: i32,
    },

    /// A request Kafka's validation refuses (`INVALID_REQUEST`), with Kafka's message.
    #[error("{reason}")]
    InvalidRequest {
        /// Kafka's message, e.g. `MemberEpoch is invalid.`.
        reason: String,
    },

    /// A call the group's members cannot make in this form: a classic (generation-fenced)
    /// offset commit for a member of a consumer-protocol group, which must commit with
    /// OffsetCommit v9 and its member epoch, as Kafka 4 answers.
    #[error("{reason}")]
    UnsupportedVersion {
        /// The group id.
        group: String,
        /// The member id.
        member: String,
        /// What was refused.
        reason: String,
    },

    /// A consumer-protocol member subscribed with a regular expression
    /// (`SubscribedTopicRegex`) that does not compile, with Kafka's message.
    #[error("SubscribedTopicRegex `{regex}` is not a valid regular expression: {reason}.")]
    InvalidRegularExpression {
        /// The expression the member sent.
        regex: String,
        /// Why it does not compile.
        reason: String,
    },

    /// A consumer-protocol call named a group of another kind that has members (Kafka:
    /// `GROUP_ID_NOT_FOUND`, "Group … is not a consumer group."), or a group that does not
    /// exist.
    #[error("Group {group} is not a consumer group (it is a {actual} group).")]
    NotConsumerGroup {
        /// The group id.
        group: String,
        /// The kind it is.
        actual: &'static str,
    },
    // ---- end of the consumer group protocol's errors ----
    /// A share-group call named a group of another kind (Kafka: `GROUP_ID_NOT_FOUND`,
    /// "Group … is not a share group.").
    #[error("Group {group} is not a share group (it is a {actual} group).")]
    NotShareGroup {
        /// The group id.
        group: String,
        /// The kind it is.
        actual: &'static str,
    },
    /// The offset store failed. Nothing was committed.
    #[error(transparent)]
    Storage(StorageError),
}

/// A stable error code: the name callers log and match on, and Kafka's numeric code where
/// Kafka has one. Codes are only ever added; a retired code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `ILLEGAL_GENERATION`, Kafka 22.
    IllegalGeneration,
    /// `REBALANCE_IN_PROGRESS`, Kafka 27.
    RebalanceInProgress,
    /// `UNKNOWN_MEMBER`, Kafka's `UNKNOWN_MEMBER_ID` 25.
    UnknownMember,
    /// `NOT_PARTITION_OWNER`: no Kafka counterpart (the chapter's ownership check).
    NotPartitionOwner,
    /// `GROUP_ID_NOT_FOUND`, Kafka 69.
    GroupIdNotFound,
    /// `INVALID_ARGUMENT`: no Kafka counterpart (a malformed argument of a Rust call).
    InvalidArgument,
    /// `UNKNOWN_TOPIC`, Kafka's `UNKNOWN_TOPIC_OR_PARTITION` 3.
    UnknownTopic,
    /// `INCONSISTENT_GROUP_PROTOCOL`, Kafka 23.
    InconsistentGroupProtocol,
    /// `ASSIGNOR_FAILED`: no Kafka counterpart.
    AssignorFailed,
    /// `STORAGE_ERROR`, Kafka's `KAFKA_STORAGE_ERROR` 56.
    StorageError,
    /// `NON_EMPTY_GROUP`, Kafka 68.
    NonEmptyGroup,
    /// `INVALID_GROUP_ID`, Kafka 24.
    InvalidGroupId,
    /// `INVALID_SESSION_TIMEOUT`, Kafka 26.
    InvalidSessionTimeout,
    /// `GROUP_MAX_SIZE_REACHED`, Kafka 81.
    GroupMaxSizeReached,
    /// `MEMBER_ID_REQUIRED`, Kafka 79.
    MemberIdRequired,
    /// `FENCED_INSTANCE_ID`, Kafka 82.
    FencedInstanceId,
    /// `GROUP_SUBSCRIBED_TO_TOPIC`, Kafka 86.
    GroupSubscribedToTopic,
    /// `OFFSET_METADATA_TOO_LARGE`, Kafka 12.
    OffsetMetadataTooLarge,
    /// `FENCED_MEMBER_EPOCH`, Kafka 110.
    FencedMemberEpoch,
    /// `UNRELEASED_INSTANCE_ID`, Kafka 111.
    UnreleasedInstanceId,
    /// `UNSUPPORTED_ASSIGNOR`, Kafka 112.
    UnsupportedAssignor,
    /// `STALE_MEMBER_EPOCH`, Kafka 113.
    StaleMemberEpoch,
    /// `INVALID_REQUEST`, Kafka 42.
    InvalidRequest,
    /// `UNSUPPORTED_VERSION`, Kafka 35.
    UnsupportedVersion,
    /// `INVALID_REGULAR_EXPRESSION`, Kafka 128.
    InvalidRegularExpression,
}

impl ErrorCode {
    /// Every code, in the order codes were introduced.
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::IllegalGeneration,
        ErrorCode::RebalanceInProgress,
        ErrorCode::UnknownMember,
        ErrorCode::NotPartitionOwner,
        ErrorCode::GroupIdNotFound,
        ErrorCode::InvalidArgument,
        ErrorCode::UnknownTopic,
        ErrorCode::InconsistentGroupProtocol,
        ErrorCode::AssignorFailed,
        ErrorCode::StorageError,
        ErrorCode::NonEmptyGroup,
        ErrorCode::InvalidGroupId,
        ErrorCode::InvalidSessionTimeout,
        ErrorCode::GroupMaxSizeReached,
        ErrorCode::MemberIdRequired,
        ErrorCode::FencedInstanceId,
        ErrorCode::GroupSubscribedToTopic,
        ErrorCode::OffsetMetadataTooLarge,
        ErrorCode::FencedMemberEpoch,
        ErrorCode::UnreleasedInstanceId,
        ErrorCode::UnsupportedAssignor,
        ErrorCode::StaleMemberEpoch,
        ErrorCode::InvalidRequest,
        ErrorCode::UnsupportedVersion,
        ErrorCode::InvalidRegularExpression,
    ];

    /// The stable name, e.g. `ILLEGAL_GENERATION`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::IllegalGeneration => "ILLEGAL_GENERATION",
            ErrorCode::RebalanceInProgress => "REBALANCE_IN_PROGRESS",
            ErrorCode::UnknownMember => "UNKNOWN_MEMBER",
            ErrorCode::NotPartitionOwner => "NOT_PARTITION_OWNER",
            ErrorCode::GroupIdNotFound => "GROUP_ID_NOT_FOUND",
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::UnknownTopic => "UNKNOWN_TOPIC",
            ErrorCode::InconsistentGroupProtocol => "INCONSISTENT_GROUP_PROTOCOL",
            ErrorCode::AssignorFailed => "ASSIGNOR_FAILED",
            ErrorCode::StorageError => "STORAGE_ERROR",
            ErrorCode::NonEmptyGroup => "NON_EMPTY_GROUP",
            ErrorCode::InvalidGroupId => "INVALID_GROUP_ID",
            ErrorCode::InvalidSessionTimeout => "INVALID_SESSION_TIMEOUT",
            ErrorCode::GroupMaxSizeReached => "GROUP_MAX_SIZE_REACHED",
            ErrorCode::MemberIdRequired => "MEMBER_ID_REQUIRED",
            ErrorCode::FencedInstanceId => "FENCED_INSTANCE_ID",
            ErrorCode::GroupSubscribedToTopic => "GROUP_SUBSCRIBED_TO_TOPIC",
            ErrorCode::OffsetMetadataTooLarge => "OFFSET_METADATA_TOO_LARGE",
            ErrorCode::FencedMemberEpoch => "FENCED_MEMBER_EPOCH",
            ErrorCode::UnreleasedInstanceId => "UNRELEASED_INSTANCE_ID",
            ErrorCode::UnsupportedAssignor => "UNSUPPORTED_ASSIGNOR",
            ErrorCode::StaleMemberEpoch => "STALE_MEMBER_EPOCH",
            ErrorCode::InvalidRequest => "INVALID_REQUEST",
            ErrorCode::UnsupportedVersion => "UNSUPPORTED_VERSION",
            ErrorCode::InvalidRegularExpression => "INVALID_REGULAR_EXPRESSION",
        }
    }

    /// Kafka's numeric error code, where Kafka has one.
    pub const fn kafka(self) -> Option<i16> {
        match self {
            ErrorCode::IllegalGeneration => Some(22),
            ErrorCode::RebalanceInProgress => Some(27),
            ErrorCode::UnknownMember => Some(25),
            ErrorCode::GroupIdNotFound => Some(69),
            ErrorCode::UnknownTopic => Some(3),
            ErrorCode::InconsistentGroupProtocol => Some(23),
            ErrorCode::StorageError => Some(56),
            ErrorCode::NonEmptyGroup => Some(68),
            ErrorCode::InvalidGroupId => Some(24),
            ErrorCode::InvalidSessionTimeout => Some(26),
            ErrorCode::GroupMaxSizeReached => Some(81),
            ErrorCode::MemberIdRequired => Some(79),
            ErrorCode::FencedInstanceId => Some(82),
            ErrorCode::GroupSubscribedToTopic => Some(86),
            ErrorCode::OffsetMetadataTooLarge => Some(12),
            ErrorCode::FencedMemberEpoch => Some(110),
            ErrorCode::UnreleasedInstanceId => Some(111),
            ErrorCode::UnsupportedAssignor => Some(112),
            ErrorCode::StaleMemberEpoch => Some(113),
            ErrorCode::InvalidRequest => Some(42),
            ErrorCode::UnsupportedVersion => Some(35),
            ErrorCode::InvalidRegularExpression => Some(128),
            ErrorCode::NotPartitionOwner
            | ErrorCode::InvalidArgument
            | ErrorCode::AssignorFailed => None,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    /// Every code [`Error::code`] can return, in declaration order. Stable: codes are only
    /// added. The names of [`ErrorCode::ALL`].
    pub const CODES: &'static [&'static str] = &[
        "ILLEGAL_GENERATION",
        "REBALANCE_IN_PROGRESS",
        "UNKNOWN_MEMBER",
        "NOT_PARTITION_OWNER",
        "GROUP_ID_NOT_FOUND",
        "INVALID_ARGUMENT",
        "UNKNOWN_TOPIC",
        "INCONSISTENT_GROUP_PROTOCOL",
        "ASSIGNOR_FAILED",
        "STORAGE_ERROR",
        "NON_EMPTY_GROUP",
        "INVALID_GROUP_ID",
        "INVALID_SESSION_TIMEOUT",
        "GROUP_MAX_SIZE_REACHED",
        "MEMBER_ID_REQUIRED",
        "FENCED_INSTANCE_ID",
        "GROUP_SUBSCRIBED_TO_TOPIC",
        "OFFSET_METADATA_TOO_LARGE",
        "FENCED_MEMBER_EPOCH",
        "UNRELEASED_INSTANCE_ID",
        "UNSUPPORTED_ASSIGNOR",
        "STALE_MEMBER_EPOCH",
        "INVALID_REQUEST",
        "UNSUPPORTED_VERSION",
        "INVALID_REGULAR_EXPRESSION",
    ];

    /// The error's code, to match on (never match on [`code`](Self::code)'s string).
    pub fn error_code(&self) -> ErrorCode {
        match self {
            Error::IllegalGeneration { .. } => ErrorCode::IllegalGeneration,
            Error::RebalanceInProgress { .. } => ErrorCode::RebalanceInProgress,
            Error::UnknownMember { .. } => ErrorCode::UnknownMember,
            Error::NotPartitionOwner { .. } => ErrorCode::NotPartitionOwner,
            Error::GroupIdNotFound { .. } => ErrorCode::GroupIdNotFound,
            Error::InvalidArgument { .. } => ErrorCode::InvalidArgument,
            Error::UnknownTopic { .. } => ErrorCode::UnknownTopic,
            Error::InconsistentGroupProtocol { .. } | Error::WrongGroupType { .. } => {
                ErrorCode::InconsistentGroupProtocol
            }
            Error::NonEmptyGroup { .. } => ErrorCode::NonEmptyGroup,
            Error::InvalidGroupId { .. } => ErrorCode::InvalidGroupId,
            Error::InvalidSessionTimeout { .. } => ErrorCode::InvalidSessionTimeout,
            Error::GroupMaxSizeReached { .. } => ErrorCode::GroupMaxSizeReached,
            Error::MemberIdRequired { .. } => ErrorCode::MemberIdRequired,
            Error::FencedInstanceId { .. } => ErrorCode::FencedInstanceId,
            Error::GroupSubscribedToTopic { .. } => ErrorCode::GroupSubscribedToTopic,
            Error::AssignorFailed { .. } => ErrorCode::AssignorFailed,
            Error::OffsetMetadataTooLarge { .. } => ErrorCode::OffsetMetadataTooLarge,
            Error::FencedMemberEpoch { .. } => ErrorCode::FencedMemberEpoch,
            Error::UnreleasedInstanceId { .. } => ErrorCode::UnreleasedInstanceId,
            Error::UnsupportedAssignor { .. } => ErrorCode::UnsupportedAssignor,
            Error::StaleMemberEpoch { .. } => ErrorCode::StaleMemberEpoch,
            Error::InvalidRequest { .. } => ErrorCode::InvalidRequest,
            Error::UnsupportedVersion { .. } => ErrorCode::UnsupportedVersion,
            Error::InvalidRegularExpression { .. } => ErrorCode::InvalidRegularExpression,
            Error::NotConsumerGroup { .. } | Error::NotShareGroup { .. } => {
                ErrorCode::GroupIdNotFound
            }
            Error::Storage(e) => e.error_code(),
        }
    }

    /// The stable name of this error's code, e.g. `ILLEGAL_GENERATION`, for logs and wires.
    pub fn code(&self) -> &'static str {
        self.error_code().as_str()
    }

    /// Kafka's numeric error code for this error, where Kafka has one (see [`ErrorCode::kafka`]).
    pub fn kafka_code(&self) -> Option<i16> {
        self.error_code().kafka()
    }

    /// What the caller should do next.
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::IllegalGeneration { .. } | Error::StaleMemberEpoch { .. } => ErrorClass::Fenced,
            // The member gives up its partitions and joins again with epoch 0.
            Error::FencedMemberEpoch { .. } => ErrorClass::Rejoin,
            Error::RebalanceInProgress { .. }
            | Error::UnknownMember { .. }
            | Error::MemberIdRequired { .. } => ErrorClass::Rejoin,
            Error::NotPartitionOwner { .. }
            | Error::GroupIdNotFound { .. }
            | Error::InvalidArgument { .. }
            | Error::UnknownTopic { .. }
            | Error::InconsistentGroupProtocol { .. }
            | Error::WrongGroupType { .. }
            | Error::NonEmptyGroup { .. }
            | Error::InvalidGroupId { .. }
            | Error::InvalidSessionTimeout { .. }
            | Error::GroupMaxSizeReached { .. }
            | Error::GroupSubscribedToTopic { .. }
            | Error::OffsetMetadataTooLarge { .. }
            | Error::UnsupportedAssignor { .. }
            | Error::InvalidRequest { .. }
            | Error::UnsupportedVersion { .. }
            | Error::InvalidRegularExpression { .. }
            | Error::NotConsumerGroup { .. }
            | Error::NotShareGroup { .. } => ErrorClass::InvalidRequest,
            // Another instance took this static member's place: retrying cannot help.
            Error::FencedInstanceId { .. } | Error::UnreleasedInstanceId { .. } => {
                ErrorClass::Fatal
            }
            Error::Storage(e) if e.kind() == StorageErrorKind::InvalidOffset => {
                ErrorClass::InvalidRequest
            }
            Error::AssignorFailed { .. } | Error::Storage(_) => ErrorClass::Fatal,
        }
    }

    /// True when the request was fenced by a newer generation and will succeed after a
    /// refresh.
    pub fn is_fenced(&self) -> bool {
        self.class() == ErrorClass::Fenced
    }

    pub(crate) fn wrong_group_type(
        group: &str,
        expected: &'static str,
        actual: &'static str,
    ) -> Self {
        Error::WrongGroupType {
            group: group.to_string(),
            expected,
            actual,
        }
    }

    pub(crate) fn unknown_member(group: &str, member: &str) -> Self {
        Error::UnknownMember {
            group: group.to_string(),
            member: member.to_string(),
        }
    }

    pub(crate) fn invalid(what: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            what,
            reason: reason.into(),
        }
    }
}

impl From<StorageError> for Error {
    fn from(e: StorageError) -> Self {
        Error::Storage(e)
    }
}

/// What kind of failure a [`StorageError`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StorageErrorKind {
    /// An I/O operation failed (create, write, fsync, rename, read).
    Io,
    /// Stored data could not be understood: malformed, wrong types, missing keys, negative
    /// offsets, an unknown format version.
    Corrupt,
    /// The caller asked to store an invalid offset (a negative one). Code `INVALID_ARGUMENT`.
    InvalidOffset,
    /// Any other failure of a store implementation.
    Other,
    /// The store refused the write because this process no longer owns the key's
    /// coordinator slot: another broker over the same database took it over (a store shared
    /// by several brokers fences a deposed one this way). Nothing was written. Its
    /// [`error_code`](StorageError::error_code) stays `STORAGE_ERROR`; a broker answers
    /// Kafka's `NOT_COORDINATOR` (16), on which clients find the coordinator again.
    NotCoordinator,
}

impl fmt::Display for StorageErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StorageErrorKind::Io => "I/O",
            StorageErrorKind::Corrupt => "corrupt data",
            StorageErrorKind::InvalidOffset => "invalid offset",
            StorageErrorKind::Other => "store",
            StorageErrorKind::NotCoordinator => "not coordinator",
        })
    }
}

/// The error an [`OffsetStore`](crate::OffsetStore) returns. It says what failed, in a message
/// that names the file or resource involved, and keeps the underlying cause as its `source()`.
#[derive(Debug, thiserror::Error)]
#[error("offset store {kind} error: {message}")]
pub struct StorageError {
    kind: StorageErrorKind,
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl StorageError {
    /// A storage error of the given kind. The message should name the file or resource.
    pub fn new(kind: StorageErrorKind, message: impl Into<String>) -> Self {
        StorageError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// Attaches the underlying cause.
    #[must_use]
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// A refused negative offset.
    pub fn invalid_offset(group: &str, tp: &TopicPartition, offset: i64) -> Self {
        StorageError::new(
            StorageErrorKind::InvalidOffset,
            format!("group `{group}`, partition {tp}: offset {offset} is negative"),
        )
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> StorageErrorKind {
        self.kind
    }

    /// The message, without the kind prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// `INVALID_ARGUMENT` for a refused offset, `STORAGE_ERROR` otherwise.
    pub fn error_code(&self) -> ErrorCode {
        match self.kind {
            StorageErrorKind::InvalidOffset => ErrorCode::InvalidArgument,
            _ => ErrorCode::StorageError,
        }
    }

    /// The name of [`error_code`](Self::error_code).
    pub fn code(&self) -> &'static str {
        self.error_code().as_str()
    }

    /// Kafka's `KAFKA_STORAGE_ERROR` (56) for storage failures; none for a refused offset.
    pub fn kafka_code(&self) -> Option<i16> {
        self.error_code().kafka()
    }
}

/// Displays a requested generation: `generation 3`, or `no generation`.
struct DisplayGeneration(Option<Generation>);

impl fmt::Display for DisplayGeneration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(g) => write!(f, "generation {g}"),
            None => f.write_str("no generation"),
        }
    }
}

/// Displays a list of partitions as `orders-0, orders-2`.
struct DisplayList<'a>(&'a [TopicPartition]);

impl fmt::Display for DisplayList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, tp) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            fmt::Display::fmt(tp, f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_names_are_the_enum_in_order() {
        let names: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names, Error::CODES);
        assert_eq!(ErrorCode::FencedInstanceId.kafka(), Some(82));
        assert_eq!(ErrorCode::NotPartitionOwner.kafka(), None);
    }

    #[test]
    fn codes_are_listed_and_unique() {
        let mut codes = Error::CODES.to_vec();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Error::CODES.len());
    }

    #[test]
    fn not_owner_message_names_member_and_partitions() {
        let e = Error::NotPartitionOwner {
            group: "g".into(),
            member: "m1".into(),
            generation: Generation::new(3),
            partitions: vec![
                TopicPartition::new("orders", 1),
                TopicPartition::new("orders", 3),
            ],
        };
        assert_eq!(
            e.to_string(),
            "member `m1` of group `g` does not own orders-1, orders-3 in generation 3"
        );
        assert_eq!(e.code(), "NOT_PARTITION_OWNER");
        assert_eq!(e.kafka_code(), None);
        assert_eq!(e.class(), ErrorClass::InvalidRequest);
    }

    #[test]
    fn illegal_generation_says_which_number_is_which() {
        let e = Error::IllegalGeneration {
            group: "g".into(),
            requested: Some(Generation::new(1)),
            current: Generation::new(2),
        };
        assert_eq!(
            e.to_string(),
            "illegal generation for group `g`: the request carries generation 1, the group \
             is at generation 2; refresh the assignment and retry"
        );
        assert_eq!(e.kafka_code(), Some(22));
        assert!(e.is_fenced());
        let none = Error::IllegalGeneration {
            group: "g".into(),
            requested: None,
            current: Generation::new(2),
        };
        assert!(
            none.to_string()
                .contains("carries no generation, the group is at generation 2"),
            "{none}"
        );
    }

    #[test]
    fn storage_codes_depend_on_kind() {
        let io: Error = StorageError::new(StorageErrorKind::Io, "fsync /x failed").into();
        assert_eq!(io.code(), "STORAGE_ERROR");
        assert_eq!(io.kafka_code(), Some(56));
        assert_eq!(io.class(), ErrorClass::Fatal);
        let neg: Error = StorageError::invalid_offset("g", &TopicPartition::new("t", 0), -1).into();
        assert_eq!(neg.code(), "INVALID_ARGUMENT");
        assert_eq!(neg.class(), ErrorClass::InvalidRequest);
    }
}
