//! The requests and answers of Kafka's classic group protocol, as the core sees them.
//!
//! Protocol metadata and assignments are opaque bytes here: the core never decodes them. A
//! caller that can decode them (the wire front, which has Kafka's codec) may also pass the
//! subscribed topics and the assigned partitions, which the core then uses for
//! descriptions, offset deletion and the optional ownership check on commit.

use std::fmt;
use std::sync::Arc;

use crate::group::CommitAuthority;
use crate::types::{CommittedOffsets, Generation, GroupState, TopicPartition};

/// Bytes the core stores and hands back without reading them (protocol metadata,
/// assignments). Cheap to clone.
pub type Opaque = Arc<[u8]>;

/// One protocol a member supports (for protocol type `consumer`: an assignment strategy).
#[derive(Clone, PartialEq, Eq)]
pub struct ClassicProtocol {
    /// The protocol's name, e.g. `range`.
    pub name: String,
    /// The member's metadata for it (for `consumer`: a ConsumerProtocolSubscription).
    pub metadata: Opaque,
    /// The topics the metadata subscribes to, if the caller decoded them.
    pub topics: Option<Vec<String>>,
}

impl ClassicProtocol {
    /// A protocol with opaque metadata and no decoded topics.
    pub fn new(name: impl Into<String>, metadata: impl Into<Opaque>) -> Self {
        ClassicProtocol {
            name: name.into(),
            metadata: metadata.into(),
            topics: None,
        }
    }

    /// The same protocol with its subscribed topics decoded.
    #[must_use]
    pub fn with_topics<I, S>(mut self, topics: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.topics = Some(topics.into_iter().map(Into::into).collect());
        self
    }
}

impl fmt::Debug for ClassicProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClassicProtocol")
            .field("name", &self.name)
            .field("metadata_bytes", &self.metadata.len())
            .field("topics", &self.topics)
            .finish()
    }
}

/// A JoinGroup request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinGroupRequest {
    /// The group id (empty: `INVALID_GROUP_ID`).
    pub group_id: String,
    /// The member id: empty for a member joining for the first time.
    pub member_id: String,
    /// The static member's instance id (KIP-345), if any.
    pub group_instance_id: Option<String>,
    /// The client's id (prefix of generated member ids).
    pub client_id: String,
    /// The client's host, as the front saw it.
    pub client_host: String,
    /// The session timeout the member asks for, in ms; must lie within the coordinator's
    /// `group.min.session.timeout.ms` and `group.max.session.timeout.ms`.
    pub session_timeout_ms: i32,
    /// How long the member may take to re-join during a rebalance, in ms (JoinGroup v0 has
    /// none: pass the session timeout, as Kafka does).
    pub rebalance_timeout_ms: i32,
    /// The protocol type, e.g. `consumer`.
    pub protocol_type: String,
    /// The protocols the member supports, most preferred first.
    pub protocols: Vec<ClassicProtocol>,
    /// Whether a new dynamic member must first get its id with `MEMBER_ID_REQUIRED` and join
    /// again (JoinGroup v4 and later).
    pub require_known_member_id: bool,
    /// Whether the client understands `skip_assignment` (JoinGroup v9 and later).
    pub supports_skip_assignment: bool,
    /// Why the member joins (JoinGroup v8+), for logs.
    pub reason: Option<String>,
}

/// A member as the leader's JoinGroup answer lists it.
#[derive(Clone, PartialEq, Eq)]
pub struct JoinedMember {
    /// The member id.
    pub member_id: String,
    /// Its instance id, if static.
    pub group_instance_id: Option<String>,
    /// Its metadata for the group's chosen protocol.
    pub metadata: Opaque,
}

impl fmt::Debug for JoinedMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinedMember")
            .field("member_id", &self.member_id)
            .field("group_instance_id", &self.group_instance_id)
            .field("metadata_bytes", &self.metadata.len())
            .finish()
    }
}

/// The answer to a JoinGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinGroupResponse {
    /// The member's id (generated for a new member).
    pub member_id: String,
    /// The generation the member joined.
    pub generation: Generation,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The chosen protocol.
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// The leader must not compute an assignment (a static leader re-joined without a
    /// rebalance; JoinGroup v9+).
    pub skip_assignment: bool,
    /// Every member with its metadata, for the leader; empty for the others.
    pub members: Vec<JoinedMember>,
}

/// One member's assignment in the leader's SyncGroup.
#[derive(Clone, PartialEq, Eq)]
pub struct SyncAssignment {
    /// The member the assignment is for.
    pub member_id: String,
    /// The assignment bytes (for `consumer`: a ConsumerProtocolAssignment).
    pub assignment: Opaque,
    /// The partitions it assigns, if the caller decoded them.
    pub partitions: Option<Vec<TopicPartition>>,
}

impl fmt::Debug for SyncAssignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncAssignment")
            .field("member_id", &self.member_id)
            .field("assignment_bytes", &self.assignment.len())
            .field("partitions", &self.partitions)
            .finish()
    }
}

/// A SyncGroup request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncGroupRequest {
    /// The group id.
    pub group_id: String,
    /// The generation the member acts under (`None`: a negative wire value).
    pub generation: Option<Generation>,
    /// The member id.
    pub member_id: String,
    /// The static member's instance id, if any.
    pub group_instance_id: Option<String>,
    /// The protocol type the member believes in (SyncGroup v5+), checked if present.
    pub protocol_type: Option<String>,
    /// The protocol the member believes was chosen (SyncGroup v5+), checked if present.
    pub protocol_name: Option<String>,
    /// The assignments (the leader's; empty for followers).
    pub assignments: Vec<SyncAssignment>,
}

/// The answer to a SyncGroup.
#[derive(Clone, PartialEq, Eq)]
pub struct SyncGroupResponse {
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The chosen protocol.
    pub protocol_name: Option<String>,
    /// This member's assignment: what the leader sent for it, or empty bytes if the leader
    /// left it out.
    pub assignment: Opaque,
}

impl fmt::Debug for SyncGroupResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncGroupResponse")
            .field("protocol_type", &self.protocol_type)
            .field("protocol_name", &self.protocol_name)
            .field("assignment_bytes", &self.assignment.len())
            .finish()
    }
}

/// One member of a LeaveGroup request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeavingMember {
    /// The member id (may be empty when `group_instance_id` names a static member).
    pub member_id: String,
    /// The static member's instance id, if any.
    pub group_instance_id: Option<String>,
}

/// Kafka's OffsetCommit request, for a group of any kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommitRequest {
    /// The group id.
    pub group_id: String,
    /// Who commits, and under what generation or epoch.
    pub authority: CommitAuthority,
    /// Partition → next offset to read, with its leader epoch and metadata (the commit
    /// timestamp is the coordinator's to set: whatever is here is replaced).
    pub offsets: CommittedOffsets,
}

/// A classic group, as [`ClassicGroups::describe`](crate::ClassicGroups::describe)
/// reports it (Kafka's DescribeGroups).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassicGroupDescription {
    /// The group id.
    pub group_id: String,
    /// The state.
    pub state: GroupState,
    /// The protocol type (empty if none).
    pub protocol_type: String,
    /// The chosen protocol (Kafka's `protocolData`): set only while Stable.
    pub protocol_name: String,
    /// The current generation.
    pub generation: Generation,
    /// The leader's member id.
    pub leader: Option<String>,
    /// The members, by id.
    pub members: Vec<ClassicMemberDescription>,
}

/// A member of a [`ClassicGroupDescription`].
#[derive(Clone, PartialEq, Eq)]
pub struct ClassicMemberDescription {
    /// The member id.
    pub member_id: String,
    /// The instance id of a static member.
    pub group_instance_id: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client host.
    pub client_host: String,
    /// Its metadata for the chosen protocol (empty unless the group is Stable).
    pub metadata: Opaque,
    /// Its current assignment bytes.
    pub assignment: Opaque,
    /// The topics its metadata subscribes to, if known.
    pub topics: Vec<String>,
    /// The partitions its assignment holds, if known.
    pub partitions: Vec<TopicPartition>,
}

impl fmt::Debug for ClassicMemberDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClassicMemberDescription")
            .field("member_id", &self.member_id)
            .field("group_instance_id", &self.group_instance_id)
            .field("client_id", &self.client_id)
            .field("client_host", &self.client_host)
            .field("metadata_bytes", &self.metadata.len())
            .field("assignment_bytes", &self.assignment.len())
            .field("topics", &self.topics)
            .field("partitions", &self.partitions)
            .finish()
    }
}
