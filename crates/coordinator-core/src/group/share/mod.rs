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
mod config;
mod partition;
mod protocol;
mod state;

pub use api::ShareGroups;
pub use config::{
    ShareAutoOffsetReset, ShareGroupSettings, ShareIsolationLevel, DEFAULT_SHARE_MAX_SIZE,
};
pub use partition::{
    AcknowledgeType, AcquiredRange, KeptRecordState, ShareAcknowledgeError, SharePartition,
    SharePartitionConfig, StateBatch,
};
pub use protocol::{
    ShareGroupDescription, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
    ShareGroupState, ShareMemberDescription, SHARE_LEAVE_GROUP_MEMBER_EPOCH,
};
