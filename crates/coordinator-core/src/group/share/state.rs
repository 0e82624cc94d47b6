//! The state machine of a share group (Kafka 4's `ShareGroup` and the share branch of
//! `GroupMetadataManager`): synchronous, no I/O.
//!
//! The group epoch is the entry's generation counter (`ctx.generation`), as for
//! consumer-protocol groups. A change of a member's subscription, a member joining or
//! leaving, or a change of a subscribed topic's partition count bumps it; the next heartbeat
//! then computes a new target assignment (its epoch is the group epoch), and every member
//! takes its target at its next heartbeat with the new epoch. Unlike the consumer protocol
//! there is no revocation: a partition may have several members, and records are handed out
//! one acquisition at a time, so a member moves to its new assignment at once.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::protocol::{
    ShareGroupDescription, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
    ShareGroupState, ShareMemberDescription, SHARE_LEAVE_GROUP_MEMBER_EPOCH,
};
use super::ShareGroupSettings;
use crate::coordinator::ExpiredMember;
use crate::error::Error;
use crate::group::classic::Opaque;
use crate::group::{
    CommitAuthority, Ctx, Group, GroupKind, GroupRecord, MemberRecord, OffsetExpiration,
};
use crate::ports::Assignor;
use crate::types::{Generation, GroupState, TopicPartition};

/// The assignor's name ShareGroupDescribe reports (Kafka's default, `simple`).
pub(crate) const SIMPLE_ASSIGNOR: &str = "simple";

fn epoch_of(generation: Generation) -> i32 {
    i32::try_from(generation.get()).unwrap_or(i32::MAX)
}

/// One member of a share group (Kafka's `ShareGroupMember`).
#[derive(Clone, Debug)]
struct ShareMember {
    epoch: i32,
    previous_epoch: i32,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    topics: BTreeSet<String>,
    assigned: BTreeSet<TopicPartition>,
    /// When its session expires (clock ms).
    deadline: u64,
}

/// What a heartbeat changed, for the coordinator's timers.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Outcome {
    /// Members joined or left: the group's next deadline must be computed again.
    pub(crate) membership_changed: bool,
    /// The member's new session deadline.
    pub(crate) deadline: Option<u64>,
}

/// A share group (KIP-932). See the [module](self) docs.
#[derive(Clone, Debug)]
pub(crate) struct ShareGroup {
    id: Arc<str>,
    members: BTreeMap<Arc<str>, ShareMember>,
    /// The partition counts of the subscribed topics when the target was last computed.
    topics: BTreeMap<String, u32>,
    /// The epoch of the target assignment (`assignmentEpoch`).
    assignment_epoch: i32,
    /// The target assignment of each member.
    target: BTreeMap<Arc<str>, BTreeSet<TopicPartition>>,
}

impl ShareGroup {
    pub(crate) fn new(id: Arc<str>) -> Self {
        ShareGroup {
            id,
            members: BTreeMap::new(),
            topics: BTreeMap::new(),
            assignment_epoch: 0,
            target: BTreeMap::new(),
        }
    }

    /// Kafka's share group state.
    pub(crate) fn share_state(&self) -> ShareGroupState {
        if self.members.is_empty() {
            ShareGroupState::Empty
        } else {
            ShareGroupState::Stable
        }
    }

    fn unknown(&self, member: &str) -> Error {
        Error::UnknownMember {
            group: self.id.to_string(),
            member: member.to_string(),
        }
    }

    /// The partition counts of every topic some member (with `extra` for the member being
    /// updated) subscribes to, as the metadata has them now; topics that do not exist are
    /// left out (they are assigned once they exist, as in Kafka).
    fn subscribed_topics(&self, ctx: &Ctx<'_>) -> BTreeMap<String, u32> {
        let mut topics = BTreeMap::new();
        for m in self.members.values() {
            for t in &m.topics {
                if !topics.contains_key(t) {
                    if let Some(n) = ctx.metadata.partition_count(t) {
                        topics.insert(t.clone(), n);
                    }
                }
            }
        }
        topics
    }

    /// Kafka's share-group `SimpleAssignor`, in its deterministic form: for each topic, its
    /// subscribers in member-id order; with no more subscribers than partitions, partition
    /// `p` goes to subscriber `p mod n` (each partition to exactly one member, the counts
    /// differing by at most one); with more subscribers than partitions, subscriber `i` gets
    /// partition `i mod p` (every member one partition, each partition shared by
    /// ⌊n/p⌋ or ⌈n/p⌉ members).
    fn compute_target(&mut self) {
        let mut target: BTreeMap<Arc<str>, BTreeSet<TopicPartition>> = self
            .members
            .keys()
            .map(|id| (id.clone(), BTreeSet::new()))
            .collect();
        for (topic, &partitions) in &self.topics {
            if partitions == 0 {
                continue;
            }
            let subscribers: Vec<&Arc<str>> = self
                .members
                .iter()
                .filter(|(_, m)| m.topics.contains(topic))
                .map(|(id, _)| id)
                .collect();
            let n = subscribers.len();
            if n == 0 {
                continue;
            }
            let topic: Arc<str> = Arc::from(topic.as_str());
            if n <= partitions as usize {
                for p in 0..partitions {
                    let member = subscribers[p as usize % n];
                    if let Some(set) = target.get_mut(member) {
                        set.insert(TopicPartition::new(topic.clone(), p));
                    }
                }
            } else {
                for (i, member) in subscribers.iter().enumerate() {
                    let p = u32::try_from(i % partitions as usize).unwrap_or(0);
                    if let Some(set) = target.get_mut(*member) {
                        set.insert(TopicPartition::new(topic.clone(), p));
                    }
                }
            }
        }
        self.target = target;
    }

    /// Kafka's ShareGroupHeartbeat (after the request's validation): joins (0), heartbeats
    /// (the member's epoch, or the one before it when the answer that moved it was lost), or
    /// leaves (−1). Errors: `GROUP_MAX_SIZE_REACHED`, `UNKNOWN_MEMBER_ID`,
    /// `FENCED_MEMBER_EPOCH`; nothing changes then.
    pub(crate) fn heartbeat(
        &mut self,
        req: &ShareGroupHeartbeatRequest,
        ctx: &mut Ctx<'_>,
        settings: &ShareGroupSettings,
    ) -> (Result<ShareGroupHeartbeatResponse, Error>, Outcome) {
        let mut outcome = Outcome::default();
        let group_epoch = epoch_of(*ctx.generation);
        if req.member_epoch == SHARE_LEAVE_GROUP_MEMBER_EPOCH {
            if self.members.remove(req.member_id.as_str()).is_none() {
                return (Err(self.unknown(&req.member_id)), outcome);
            }
            self.target.remove(req.member_id.as_str());
            *ctx.generation = ctx.generation.next();
            outcome.membership_changed = true;
            return (
                Ok(ShareGroupHeartbeatResponse {
                    member_id: req.member_id.clone(),
                    member_epoch: SHARE_LEAVE_GROUP_MEMBER_EPOCH,
                    heartbeat_interval_ms: i32::try_from(settings.heartbeat_interval_ms)
                        .unwrap_or(i32::MAX),
                    assignment: None,
                }),
                outcome,
            );
        }
        let joining = req.member_epoch == 0;
        let existing = self.members.get(req.member_id.as_str()).cloned();
        match &existing {
            None if joining => {
                let max = settings.max_size;
                if self.members.len() >= max as usize {
                    return (
                        Err(Error::GroupMaxSizeReached {
                            group: self.id.to_string(),
                            max,
                        }),
                        outcome,
                    );
                }
            }
            None => return (Err(self.unknown(&req.member_id)), outcome),
            Some(m) if !joining => {
                let received = req.member_epoch;
                if received > m.epoch || (received < m.epoch && received != m.previous_epoch) {
                    let side = if received > m.epoch {
                        "greater"
                    } else {
                        "smaller"
                    };
                    return (
                        Err(Error::FencedMemberEpoch {
                            group: self.id.to_string(),
                            member: req.member_id.clone(),
                            reason: format!(
                                "The share group member has a {side} member epoch ({received}) \
                                 than the one known by the group coordinator ({}). The member \
                                 must abandon all its partitions and rejoin.",
                                m.epoch
                            ),
                        }),
                        outcome,
                    );
                }
            }
            Some(_) => {}
        }
        // 1. The member, created or updated.
        let id: Arc<str> = Arc::from(req.member_id.as_str());
        let mut member = existing.clone().unwrap_or(ShareMember {
            epoch: 0,
            previous_epoch: 0,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            topics: BTreeSet::new(),
            assigned: BTreeSet::new(),
            deadline: 0,
        });
        if let Some(rack) = &req.rack_id {
            member.rack_id = Some(rack.clone());
        }
        member.client_id.clone_from(&req.client_id);
        member.client_host.clone_from(&req.client_host);
        let mut bump = existing.is_none();
        if let Some(names) = &req.subscribed_topic_names {
            let topics: BTreeSet<String> = names.iter().cloned().collect();
            if topics != member.topics {
                member.topics = topics;
                bump = true;
            }
        }
        outcome.membership_changed = existing.is_none();
        self.members.insert(id.clone(), member);
        // 2. The subscribed topics' metadata: a topic created, deleted or grown moves the
        //    group epoch too.
        let topics = self.subscribed_topics(ctx);
        if topics != self.topics {
            self.topics = topics;
            bump = true;
        }
        let mut group_epoch = group_epoch;
        if bump {
            *ctx.generation = ctx.generation.next();
            group_epoch = epoch_of(*ctx.generation);
        }
        // 3. The target assignment, if the group epoch moved past it.
        if group_epoch > self.assignment_epoch {
            self.compute_target();
            self.assignment_epoch = group_epoch;
        }
        // 4. The member takes its target at once (nothing to revoke in a share group).
        let target = self.target.get(&id).cloned().unwrap_or_default();
        let deadline = ctx.now.saturating_add(settings.session_timeout_ms);
        let Some(member) = self.members.get_mut(&id) else {
            return (Err(self.unknown(&req.member_id)), outcome);
        };
        let before = member.assigned.clone();
        if member.epoch != self.assignment_epoch {
            member.previous_epoch = member.epoch;
            member.epoch = self.assignment_epoch;
        }
        member.assigned = target;
        member.deadline = deadline;
        outcome.deadline = Some(deadline);
        let changed = existing.is_none() || member.assigned != before;
        let response = ShareGroupHeartbeatResponse {
            member_id: req.member_id.clone(),
            member_epoch: member.epoch,
            heartbeat_interval_ms: i32::try_from(settings.heartbeat_interval_ms)
                .unwrap_or(i32::MAX),
            assignment: (joining || changed).then(|| member.assigned.iter().cloned().collect()),
        };
        (Ok(response), outcome)
    }

    /// Kafka's ShareGroupDescribe of this group, under `generation` (the group epoch).
    pub(crate) fn describe(&self, generation: Generation) -> ShareGroupDescription {
        ShareGroupDescription {
            group_id: self.id.to_string(),
            state: self.share_state(),
            group_epoch: epoch_of(generation),
            assignment_epoch: self.assignment_epoch,
            assignor_name: SIMPLE_ASSIGNOR.to_string(),
            members: self
                .members
                .iter()
                .map(|(id, m)| ShareMemberDescription {
                    member_id: id.to_string(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.topics.iter().cloned().collect(),
                    assignment: m.assigned.iter().cloned().collect(),
                })
                .collect(),
        }
    }

    fn not_consumer_group(&self) -> Error {
        Error::NotConsumerGroup {
            group: self.id.to_string(),
            actual: GroupKind::Share.as_str(),
        }
    }
}

impl Group for ShareGroup {
    fn kind(&self) -> GroupKind {
        GroupKind::Share
    }

    /// Kafka's share states (`Empty`, `Stable`) on the shared [`GroupState`].
    fn state(&self) -> GroupState {
        match self.share_state() {
            ShareGroupState::Empty => GroupState::Empty,
            ShareGroupState::Stable => GroupState::Stable,
            ShareGroupState::Dead => GroupState::Dead,
        }
    }

    fn has_members(&self) -> bool {
        !self.members.is_empty()
    }

    fn member_count(&self) -> usize {
        self.members.len()
    }

    fn protocol_type(&self) -> &str {
        "share"
    }

    /// Kafka's `ShareGroup.validateOffsetCommit`: a share group has no committed offsets
    /// (`GROUP_ID_NOT_FOUND`, "Group … is not a consumer group.").
    fn validate_offset_commit(
        &mut self,
        _authority: &CommitAuthority,
        _partitions: &mut dyn Iterator<Item = &TopicPartition>,
        _ctx: &Ctx<'_>,
    ) -> Result<(), Error> {
        Err(self.not_consumer_group())
    }

    /// As Kafka's `ShareGroup.validateOffsetFetch`: refused.
    fn validate_offset_fetch(&self, _authority: &CommitAuthority) -> Result<(), Error> {
        Err(self.not_consumer_group())
    }

    /// As Kafka's `ShareGroup.validateOffsetDelete`: refused.
    fn validate_offset_delete(&self, _group_id: &str) -> Result<(), Error> {
        Err(self.not_consumer_group())
    }

    fn is_subscribed_to(&self, topic: &str) -> bool {
        self.members.values().any(|m| m.topics.contains(topic))
    }

    /// A share group commits no offsets: nothing of it expires by retention.
    fn offset_expiration(&self) -> OffsetExpiration {
        OffsetExpiration::Never
    }

    fn next_deadline(&self) -> Option<u64> {
        self.members.values().map(|m| m.deadline).min()
    }

    /// Removes the members whose session expired; the group epoch moves once for them all
    /// (the next heartbeat computes the new target, as in Kafka).
    fn handle_due(&mut self, ctx: &mut Ctx<'_>) -> Vec<ExpiredMember> {
        let now = ctx.now;
        let due: Vec<Arc<str>> = self
            .members
            .iter()
            .filter(|(_, m)| now >= m.deadline)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &due {
            self.members.remove(id);
            self.target.remove(id);
        }
        if !due.is_empty() {
            *ctx.generation = ctx.generation.next();
        }
        due.into_iter()
            .map(|id| ExpiredMember {
                group: self.id.to_string(),
                member: id.to_string(),
            })
            .collect()
    }

    /// The group as a record; share groups are not written yet (their record comes with
    /// their durable state), so this is only read by tools.
    fn record(&self, generation: Generation, _assignors: &[Arc<dyn Assignor>]) -> GroupRecord {
        GroupRecord {
            group_id: self.id.to_string(),
            kind: GroupKind::Share,
            generation,
            state: self.state(),
            protocol_type: "share".to_string(),
            protocol: Some(SIMPLE_ASSIGNOR.to_string()),
            leader: None,
            members: self
                .members
                .iter()
                .map(|(id, m)| MemberRecord {
                    member_id: id.to_string(),
                    group_instance_id: None,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: 0,
                    rebalance_timeout_ms: 0,
                    protocols: Vec::new(),
                    assignment: Opaque::from([]),
                    partitions: m.assigned.iter().cloned().collect(),
                    consumer: None,
                })
                .collect(),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
