//! Kafka's ShareGroupHeartbeat and ShareGroupDescribe (KIP-932) as the core sees them: topics
//! by name, partitions as [`TopicPartition`]s (the wire front maps Kafka's topic ids). A `None`
//! field of a request means what Kafka's null means: "unchanged since my last heartbeat".

use crate::types::TopicPartition;

/// The member epoch of a member that leaves the group (Kafka's
/// `ShareGroupHeartbeatRequest.LEAVE_GROUP_MEMBER_EPOCH`).
pub const SHARE_LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;

/// Kafka's ShareGroupHeartbeat request (key 76), as the core sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareGroupHeartbeatRequest {
    /// The group id.
    pub group_id: String,
    /// The member id, chosen by the client (a UUID in Kafka's clients).
    pub member_id: String,
    /// 0 to join, the current epoch to heartbeat, −1 to leave.
    pub member_epoch: i32,
    /// The rack id; `None`: unchanged.
    pub rack_id: Option<String>,
    /// The subscribed topic names; `None`: unchanged (required when joining).
    pub subscribed_topic_names: Option<Vec<String>>,
    /// The client id, from the request header.
    pub client_id: String,
    /// The client's host, from the connection.
    pub client_host: String,
}

impl ShareGroupHeartbeatRequest {
    /// A first heartbeat (epoch 0) of `member_id` in `group_id`, subscribing to `topics`.
    pub fn join<I, S>(group_id: impl Into<String>, member_id: impl Into<String>, topics: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ShareGroupHeartbeatRequest {
            group_id: group_id.into(),
            member_id: member_id.into(),
            member_epoch: 0,
            rack_id: None,
            subscribed_topic_names: Some(topics.into_iter().map(Into::into).collect()),
            client_id: String::new(),
            client_host: String::new(),
        }
    }

    /// A heartbeat of a member at `member_epoch` with every optional field unchanged (−1:
    /// the member leaves).
    pub fn heartbeat(
        group_id: impl Into<String>,
        member_id: impl Into<String>,
        member_epoch: i32,
    ) -> Self {
        ShareGroupHeartbeatRequest {
            group_id: group_id.into(),
            member_id: member_id.into(),
            member_epoch,
            rack_id: None,
            subscribed_topic_names: None,
            client_id: String::new(),
            client_host: String::new(),
        }
    }
}

/// Kafka's ShareGroupHeartbeat response, as the core sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareGroupHeartbeatResponse {
    /// The member id.
    pub member_id: String,
    /// The member's epoch (−1 after a leave).
    pub member_epoch: i32,
    /// The interval at which the member should heartbeat.
    pub heartbeat_interval_ms: i32,
    /// The member's assignment, when the member joined or its assignment changed; `None`
    /// otherwise (Kafka's null: unchanged).
    pub assignment: Option<Vec<TopicPartition>>,
}

/// A share group's state, with Kafka's names (`ShareGroup.ShareGroupState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShareGroupState {
    /// No members.
    Empty,
    /// Members: each is given its target assignment at its next heartbeat.
    Stable,
    /// The group is gone.
    Dead,
}

impl ShareGroupState {
    /// Kafka's name: `Empty`, `Stable` or `Dead`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShareGroupState::Empty => "Empty",
            ShareGroupState::Stable => "Stable",
            ShareGroupState::Dead => "Dead",
        }
    }
}

/// One member in a [`ShareGroupDescription`] (Kafka's ShareGroupDescribe `Member`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareMemberDescription {
    /// The member id.
    pub member_id: String,
    /// The rack id, if the member gave one.
    pub rack_id: Option<String>,
    /// The member's epoch.
    pub member_epoch: i32,
    /// The client id.
    pub client_id: String,
    /// The client's host.
    pub client_host: String,
    /// The topics the member subscribes to, sorted.
    pub subscribed_topic_names: Vec<String>,
    /// The partitions assigned to the member, sorted.
    pub assignment: Vec<TopicPartition>,
}

/// Kafka's ShareGroupDescribe for one group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareGroupDescription {
    /// The group id.
    pub group_id: String,
    /// The state.
    pub state: ShareGroupState,
    /// The group epoch.
    pub group_epoch: i32,
    /// The epoch of the target assignment.
    pub assignment_epoch: i32,
    /// The assignor's name (Kafka's `simple`).
    pub assignor_name: String,
    /// The members, by member id.
    pub members: Vec<ShareMemberDescription>,
}
