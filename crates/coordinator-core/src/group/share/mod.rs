//! Kafka's share groups (KIP-932, production-ready in Kafka 4.2): queues on the coordinator.
//! Several members read the same partition; the coordinator assigns with a server-side
//! assignor (a partition may go to several members) and each member takes its assignment at
//! its next ShareGroupHeartbeat, fenced by member epochs.
//!
//! `protocol.rs` holds ShareGroupHeartbeat and ShareGroupDescribe as the core sees them;
//! `state.rs` the state machine of Kafka 4's `ShareGroup` (synchronous, no I/O); `api.rs` the
//! [`ShareGroups`] view through which a wire front calls it (`coordinator.share()`).
//!
//! `partition.rs` is a share-partition: which records are acquired, by whom, until when,
//! acknowledged or archived (Kafka's `SharePartition`); the wire front keeps one per group
//! and partition and reads the records from its log.
//!
//! Not yet here: the durable state of a share group, and its offsets admin APIs.
//! A group id held by a group of another kind (even an Empty one, or one known only by its
//! committed offsets) answers `GROUP_ID_NOT_FOUND`, as Kafka's coordinator does.

mod api;
mod partition;
mod protocol;
mod state;

pub use api::ShareGroups;
pub use partition::{
    AcknowledgeType, AcquiredRange, ShareAcknowledgeError, SharePartition, SharePartitionConfig,
};
pub use protocol::{
    ShareGroupDescription, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
    ShareGroupState, ShareMemberDescription, SHARE_LEAVE_GROUP_MEMBER_EPOCH,
};

use crate::coordinator::{DEFAULT_SHARE_HEARTBEAT_INTERVAL_MS, DEFAULT_SHARE_SESSION_TIMEOUT_MS};

/// `group.share.max.size`'s default (Kafka 4.2: 200 members).
pub const DEFAULT_SHARE_MAX_SIZE: u32 = 200;

/// Settings of share groups, with Kafka's names and defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareGroupSettings {
    /// `group.share.session.timeout.ms` (default 45000): a member whose last heartbeat is
    /// this old is removed.
    pub session_timeout_ms: u64,
    /// `group.share.heartbeat.interval.ms` (default 5000): the interval every response tells
    /// members to heartbeat at.
    pub heartbeat_interval_ms: u64,
    /// `group.share.max.size` (default 200).
    pub max_size: u32,
}

impl Default for ShareGroupSettings {
    fn default() -> Self {
        ShareGroupSettings {
            session_timeout_ms: DEFAULT_SHARE_SESSION_TIMEOUT_MS,
            heartbeat_interval_ms: DEFAULT_SHARE_HEARTBEAT_INTERVAL_MS,
            max_size: DEFAULT_SHARE_MAX_SIZE,
        }
    }
}
