//! Kafka's classic group protocol: JoinGroup with a barrier, a leader that assigns, SyncGroup,
//! Heartbeat, LeaveGroup, static members (KIP-345).
//!
//! `protocol.rs` holds the requests and answers as the core sees them; `state.rs` the state
//! machine of Kafka 4's `ClassicGroup`; `api.rs` the [`ClassicGroups`] view through which a
//! wire front calls it (`coordinator.classic()`).

mod api;
mod protocol;
mod state;

pub use api::ClassicGroups;
pub use protocol::{
    ClassicGroupDescription, ClassicMemberDescription, ClassicProtocol, JoinGroupRequest,
    JoinGroupResponse, JoinedMember, LeavingMember, OffsetCommitRequest, Opaque, SyncAssignment,
    SyncGroupRequest, SyncGroupResponse,
};
pub(crate) use state::{ClassicGroup, MigratingMember, CONSUMER_PROTOCOL_TYPE};
