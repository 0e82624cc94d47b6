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
    /// when the front decoded the assignment; a consumer-protocol member's current
    /// assignment).
    pub partitions: Vec<TopicPartition>,
    /// What a consumer-protocol member (KIP-848) adds; `None` for the other kinds.
    pub consumer: Option<ConsumerMemberRecord>,
}

/// The durable state of a consumer-protocol member (Kafka's `ConsumerGroupMemberMetadata`,
/// `ConsumerGroupCurrentMemberAssignment` and `ConsumerGroupTargetAssignmentMember` records).
/// The group epoch is the record's [`generation`](GroupRecord::generation), the assignor its
/// [`protocol`](GroupRecord::protocol).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerMemberRecord {
    /// The member epoch (−2 for a static member that left for now).
    pub member_epoch: i32,
    /// The member's previous epoch.
    pub previous_member_epoch: i32,
    /// `STABLE`, `UNREVOKED_PARTITIONS` or `UNRELEASED_PARTITIONS`.
    pub state: String,
    /// The rack id, if the member sent one.
    pub rack_id: Option<String>,
    /// The server-side assignor the member asked for, if any.
    pub server_assignor: Option<String>,
    /// The subscribed topic names, sorted (those named; the topics the regular expression
    /// matches are matched again after a load).
    pub subscribed_topic_names: Vec<String>,
    /// The regular-expression subscription (`SubscribedTopicRegex`), if any.
    pub subscribed_topic_regex: Option<String>,
    /// Partitions the member must still revoke.
    pub partitions_pending_revocation: Vec<TopicPartition>,
    /// The member's target assignment.
    pub target_assignment: Vec<TopicPartition>,
    /// The epoch of the group's target assignment (the same in every member's record).
    pub target_assignment_epoch: i32,
}
