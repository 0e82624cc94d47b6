//! The durable record of a group's state: what a coordinator that loads the group after a
//! restart must know to carry it on with the same generation, leader, protocol, members and
//! assignments (Kafka's `GroupMetadataValue` in `__consumer_offsets`). Every kind produces
//! one; a store that keeps group state writes it when a kind changes what a restart must
//! know (for classic groups: when the leader's SyncGroup installs a generation, and when
//! members leave or are removed).

use crate::group::classic::{ClassicProtocol, Opaque};
use crate::group::GroupKind;
use crate::types::{Generation, GroupState, TopicPartition};

/// One group's durable state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRecord {
    /// The group id.
    pub group_id: String,
    /// The kind of group.
    pub kind: GroupKind,
    /// The group's generation.
    pub generation: Generation,
    /// Its state when the record was made.
    pub state: GroupState,
    /// The protocol type (`consumer` for consumer groups).
    pub protocol_type: String,
    /// The chosen protocol (classic) or assignment strategy (the chapter's), if any.
    pub protocol: Option<String>,
    /// The leader (classic groups).
    pub leader: Option<String>,
    /// The members, sorted by id.
    pub members: Vec<MemberRecord>,
}

/// One member in a [`GroupRecord`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberRecord {
    /// The member id.
    pub member_id: String,
    /// The static member's instance id, if any.
    pub group_instance_id: Option<String>,
    /// The client id (classic).
    pub client_id: String,
    /// The client's host (classic).
    pub client_host: String,
    /// The member's session timeout.
    pub session_timeout_ms: u64,
    /// The member's rebalance timeout (classic; 0 for the chapter's members).
    pub rebalance_timeout_ms: u64,
    /// The protocols the member supports, in preference order, with its metadata for each
    /// (for the chapter's members: the strategies it supports, with no metadata and its
    /// subscribed topics).
    pub protocols: Vec<ClassicProtocol>,
    /// The member's assignment as the leader sent it (classic; empty otherwise).
    pub assignment: Opaque,
    /// The member's partitions, where the coordinator knows them (the chapter's; classic
    /// when the front decoded the assignment).
    pub partitions: Vec<TopicPartition>,
}
