//! Kafka's ConsumerGroupHeartbeat and ConsumerGroupDescribe as the core sees them: topics by
//! name, partitions as [`TopicPartition`]s (the wire front maps Kafka's topic ids). A `None`
//! field of a request means what Kafka's null means: "unchanged since my last heartbeat".

use std::fmt;

use crate::types::TopicPartition;

/// The member epoch of a member that leaves the group (Kafka's `LEAVE_GROUP_MEMBER_EPOCH`).
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// The member epoch of a static member that leaves for now and keeps its assignment until its
/// session expires (Kafka's `LEAVE_GROUP_STATIC_MEMBER_EPOCH`).
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

/// Kafka's ConsumerGroupHeartbeat request (key 68), as the core sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerGroupHeartbeatRequest {
    /// The group id.
    pub group_id: String,
    /// The member id (v1: chosen by the client; v0: empty on the first heartbeat, and the
    /// coordinator chooses one).
    pub member_id: String,
    /// 0 to join, the current epoch to heartbeat, −1 to leave, −2 for a static member that
    /// leaves for now.
    pub member_epoch: i32,
    /// The static member's instance id (`group.instance.id`); `None`: unchanged, or dynamic.
    pub instance_id: Option<String>,
    /// The rack id; `None`: unchanged.
    pub rack_id: Option<String>,
    /// The rebalance timeout; −1: unchanged.
    pub rebalance_timeout_ms: i32,
    /// The subscribed topic names; `None`: unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// The regular-expression subscription (v1, RE2 syntax, matched against whole topic
    /// names as Kafka's `Matcher.matches`); `None`: unchanged; `Some("")`: none any more.
    /// The member subscribes to the union of its names and the topics the expression
    /// matches, topics created later included.
    pub subscribed_topic_regex: Option<String>,
    /// The server-side assignor the member wants (`group.remote.assignor`); `None`:
    /// unchanged, or the coordinator's default.
    pub server_assignor: Option<String>,
    /// The partitions the member owns now; `None`: unchanged.
    pub topic_partitions: Option<Vec<TopicPartition>>,
    /// The client id, from the request header.
    pub client_id: String,
    /// The client's host, from the connection.
    pub client_host: String,
}

impl ConsumerGroupHeartbeatRequest {
    /// A first heartbeat (epoch 0) of `member_id` in `group_id`, subscribing to `topics`,
    /// owning nothing, with a rebalance timeout of five minutes (the Java client's default
    /// `max.poll.interval.ms`).
    pub fn join<I, S>(group_id: impl Into<String>, member_id: impl Into<String>, topics: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ConsumerGroupHeartbeatRequest {
            group_id: group_id.into(),
            member_id: member_id.into(),
            member_epoch: 0,
            instance_id: None,
            rack_id: None,
            rebalance_timeout_ms: 300_000,
            subscribed_topic_names: Some(topics.into_iter().map(Into::into).collect()),
            subscribed_topic_regex: None,
            server_assignor: None,
            topic_partitions: Some(Vec::new()),
            client_id: String::new(),
            client_host: String::new(),
        }
    }

    /// A heartbeat of a member at `member_epoch` with every optional field unchanged.
    pub fn heartbeat(
        group_id: impl Into<String>,
        member_id: impl Into<String>,
        member_epoch: i32,
    ) -> Self {
        ConsumerGroupHeartbeatRequest {
            group_id: group_id.into(),
            member_id: member_id.into(),
            member_epoch,
            instance_id: None,
            rack_id: None,
            rebalance_timeout_ms: -1,
            subscribed_topic_names: None,
            subscribed_topic_regex: None,
            server_assignor: None,
            topic_partitions: None,
            client_id: String::new(),
            client_host: String::new(),
        }
    }

    /// The same request, reporting `owned` as the partitions the member owns now.
    #[must_use]
    pub fn owning(mut self, owned: impl IntoIterator<Item = TopicPartition>) -> Self {
        self.topic_partitions = Some(owned.into_iter().collect());
        self
    }

    /// The same request, for the static member `instance_id`.
    #[must_use]
    pub fn with_instance_id(mut self, instance_id: impl Into<String>) -> Self {
        self.instance_id = Some(instance_id.into());
        self
    }

    /// The same request, subscribing by the regular expression `regex` (`""` for none).
    #[must_use]
    pub fn with_regex(mut self, regex: impl Into<String>) -> Self {
        self.subscribed_topic_regex = Some(regex.into());
        self
    }

    /// The same request, asking for the server-side assignor `name`.
    #[must_use]
    pub fn with_assignor(mut self, name: impl Into<String>) -> Self {
        self.server_assignor = Some(name.into());
        self
    }
}

/// Kafka's ConsumerGroupHeartbeat response, as the core sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerGroupHeartbeatResponse {
    /// The member id (the one the coordinator chose, for a v0 join without one).
    pub member_id: String,
    /// The member's epoch now (−1 or −2 after a leave).
    pub member_epoch: i32,
    /// How often the member must heartbeat (`group.consumer.heartbeat.interval.ms`).
    pub heartbeat_interval_ms: i32,
    /// The member's assignment, sorted: sent on a full request (a join, or one with the
    /// rebalance timeout, the subscription and the owned partitions set) and whenever it
    /// changed; `None` otherwise.
    pub assignment: Option<Vec<TopicPartition>>,
}

/// A consumer-protocol group's state (Kafka's `ConsumerGroup.ConsumerGroupState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConsumerGroupState {
    /// No members.
    Empty,
    /// The group epoch is ahead of the target assignment's: a new target is due.
    Assigning,
    /// The target is computed; some members have not reached it yet.
    Reconciling,
    /// Every member is at the target assignment's epoch, with its target assignment.
    Stable,
}

impl ConsumerGroupState {
    /// Kafka's name: `Empty`, `Assigning`, `Reconciling`, `Stable`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
        }
    }
}

impl fmt::Display for ConsumerGroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A consumer-protocol member's reconciliation state (Kafka's `MemberState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemberState {
    /// At the target epoch, owning its whole target assignment.
    Stable,
    /// Must revoke partitions before it moves on; its epoch stays until it does.
    UnrevokedPartitions,
    /// At the target epoch, waiting for partitions other members still hold.
    UnreleasedPartitions,
}

impl MemberState {
    /// Kafka's name: `STABLE`, `UNREVOKED_PARTITIONS`, `UNRELEASED_PARTITIONS`.
    pub fn as_str(self) -> &'static str {
        match self {
            MemberState::Stable => "STABLE",
            MemberState::UnrevokedPartitions => "UNREVOKED_PARTITIONS",
            MemberState::UnreleasedPartitions => "UNRELEASED_PARTITIONS",
        }
    }
}

impl fmt::Display for MemberState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One consumer-protocol group, as ConsumerGroupDescribe (key 69) reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerGroupDescription {
    /// The group id.
    pub group_id: String,
    /// The state.
    pub state: ConsumerGroupState,
    /// The group epoch.
    pub group_epoch: i32,
    /// The target assignment's epoch.
    pub assignment_epoch: i32,
    /// The server-side assignor the group uses now.
    pub assignor_name: String,
    /// The members, sorted by id.
    pub members: Vec<ConsumerMemberDescription>,
}

/// One member in a [`ConsumerGroupDescription`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerMemberDescription {
    /// The member id.
    pub member_id: String,
    /// The static member's instance id.
    pub instance_id: Option<String>,
    /// The rack id.
    pub rack_id: Option<String>,
    /// The member epoch.
    pub member_epoch: i32,
    /// The member's previous epoch.
    pub previous_member_epoch: i32,
    /// The reconciliation state.
    pub state: MemberState,
    /// The client id.
    pub client_id: String,
    /// The client's host.
    pub client_host: String,
    /// The subscribed topic names, sorted (those named, not those a regular expression
    /// matches).
    pub subscribed_topic_names: Vec<String>,
    /// The regular-expression subscription, if the member has one.
    pub subscribed_topic_regex: Option<String>,
    /// The current assignment, sorted.
    pub assignment: Vec<TopicPartition>,
    /// Partitions the member must still revoke, sorted.
    pub partitions_pending_revocation: Vec<TopicPartition>,
    /// The target assignment, sorted.
    pub target_assignment: Vec<TopicPartition>,
    /// Whether the member speaks the classic protocol (JoinGroup, SyncGroup, Heartbeat): a
    /// member of a classic group that became a consumer-protocol group, or one that joined
    /// it with JoinGroup. ConsumerGroupDescribe v1's `member_type` (Kafka: 0 for a classic
    /// member, 1 for a consumer-protocol member).
    pub classic: bool,
}
