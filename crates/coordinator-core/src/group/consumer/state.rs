//! Kafka 4's `ConsumerGroup` with its `CurrentAssignmentBuilder`: a synchronous state
//! machine, run under the group's state lock. No I/O, no awaits.
//!
//! The group epoch is the entry's generation counter (`ctx.generation`, shared with the
//! other kinds and the tombstones), clamped to `i32` where Kafka's wire needs it. Every
//! heartbeat (Kafka's `consumerGroupHeartbeat`):
//! 1. updates the member; a new subscription, or a change of a subscribed topic's partition
//!    count read through the `TopicMetadata` port, bumps the group epoch;
//! 2. when the group epoch is ahead of the target assignment's, computes a new target with
//!    the preferred server-side assignor (the previous target is the assignor's "owned"
//!    input, for stickiness, as Kafka's `TargetAssignmentBuilder` does);
//! 3. reconciles the member toward its target (`reconcile`, Kafka's
//!    `CurrentAssignmentBuilder`): it first revokes what it must give up, and a partition
//!    reaches its new owner only once no member holds it any more.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use regex::Regex;
use tracing::{info, warn};

use super::pattern;

use super::embedded;
use super::protocol::{
    ConsumerGroupDescription, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    ConsumerGroupState, ConsumerMemberDescription, MemberState, LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
use crate::coordinator::ExpiredMember;
use crate::error::Error;
use crate::group::classic::{
    ClassicGroup, ClassicProtocol, JoinGroupRequest, JoinGroupResponse, LeavingMember,
    MigratingMember, Opaque, SyncGroupRequest, SyncGroupResponse, CONSUMER_PROTOCOL_TYPE,
};
use crate::group::{
    CommitAuthority, ConsumerMemberRecord, Ctx, Group, GroupKind, GroupRecord, MemberRecord,
    OffsetExpiration,
};
use crate::ports::assign::{
    AssignmentInput, Assignor, PartitionRef, TopicIndex, TopicSpec, MAX_PARTITIONS_PER_TOPIC,
    MAX_TOTAL_PARTITIONS,
};
use crate::types::{Generation, GroupState, TopicPartition};

/// A group epoch as Kafka's wire carries it.
fn epoch_of(generation: Generation) -> i32 {
    i32::try_from(generation.get()).unwrap_or(i32::MAX)
}

fn ms(v: i32) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// One member of a consumer-protocol group (Kafka's `ConsumerGroupMember`).
#[derive(Clone, Debug)]
struct Member {
    instance_id: Option<Arc<str>>,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    epoch: i32,
    previous_epoch: i32,
    state: MemberState,
    rebalance_timeout_ms: u64,
    /// The topics the member names, sorted and unique.
    names: Vec<Arc<str>>,
    /// The member's regular-expression subscription.
    regex: Option<Arc<str>>,
    /// The topics the member subscribes to: its names and what its regular expression
    /// matches, sorted and unique.
    topics: Vec<Arc<str>>,
    server_assignor: Option<String>,
    /// The current assignment.
    assigned: BTreeSet<TopicPartition>,
    /// Partitions the member must still revoke (not in `assigned`).
    revoking: BTreeSet<TopicPartition>,
    /// The target assignment.
    target: BTreeSet<TopicPartition>,
    /// The session expires at this clock time.
    session_deadline: u64,
    /// While revoking: (deadline, the epoch it was set at). A member still revoking at that
    /// epoch when the deadline passes is fenced.
    revocation_deadline: Option<(u64, i32)>,
    /// A member that speaks the classic protocol (Kafka's `ClassicMemberMetadata`); `None`
    /// for a member of the consumer protocol.
    classic: Option<ClassicMeta>,
}

/// What a member speaking the classic protocol has besides a consumer-protocol member
/// (Kafka's `ClassicMemberMetadata`, and its join and sync timers).
#[derive(Clone, Debug)]
struct ClassicMeta {
    /// Its own session timeout, from its JoinGroup.
    session_timeout_ms: u64,
    /// The protocols of its JoinGroup, in its order (the first is the one it is answered
    /// with; every one carries the same subscription).
    protocols: Vec<ClassicProtocol>,
    /// Told to join again (REBALANCE_IN_PROGRESS): fenced if it has not by then (Kafka's
    /// join timeout, the member's rebalance timeout).
    join_deadline: Option<u64>,
    /// Joined: fenced if it has not synced by then (Kafka's sync timeout).
    sync_deadline: Option<u64>,
}

impl Member {
    fn new(now: u64, session_ms: u64) -> Self {
        Member {
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            rebalance_timeout_ms: 0,
            names: Vec::new(),
            regex: None,
            topics: Vec::new(),
            server_assignor: None,
            assigned: BTreeSet::new(),
            revoking: BTreeSet::new(),
            target: BTreeSet::new(),
            session_deadline: now.saturating_add(session_ms),
            revocation_deadline: None,
            classic: None,
        }
    }

    /// The member's session timeout: its own for a classic member, the group's otherwise.
    fn session_ms(&self, group_session_ms: u64) -> u64 {
        self.classic
            .as_ref()
            .map_or(group_session_ms, |c| c.session_timeout_ms)
    }

    fn update_epoch(&mut self, epoch: i32) {
        self.previous_epoch = self.epoch;
        self.epoch = epoch;
    }

    fn deadline(&self) -> u64 {
        let classic = self
            .classic
            .as_ref()
            .map(|c| c.join_deadline.into_iter().chain(c.sync_deadline));
        self.revocation_deadline
            .map(|(at, _)| at)
            .into_iter()
            .chain(classic.into_iter().flatten())
            .fold(self.session_deadline, u64::min)
    }
}

/// Sorted, de-duplicated topic names.
fn topic_set(names: &[String]) -> Vec<Arc<str>> {
    let set: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    set.into_iter().map(Arc::from).collect()
}

/// A regular expression members of the group subscribe with, and the topics it matches.
#[derive(Clone, Debug)]
struct Resolved {
    regex: Regex,
    /// How many members subscribe with it.
    members: u32,
    /// The topics it matched when last resolved, sorted.
    topics: Vec<Arc<str>>,
}

/// One member more subscribes with `regex`; a new one is entered with `compile`'s result
/// (none: it is not entered, and matches nothing), matching nothing until it is resolved.
fn count_regex(
    regexes: &mut BTreeMap<Arc<str>, Resolved>,
    regex: Arc<str>,
    compile: impl FnOnce() -> Option<Regex>,
) {
    if let Some(r) = regexes.get_mut(&regex) {
        r.members += 1;
    } else if let Some(compiled) = compile() {
        regexes.insert(
            regex,
            Resolved {
                regex: compiled,
                members: 1,
                topics: Vec::new(),
            },
        );
    }
}

/// A member's subscribed topics: its names and what its expression matched, sorted.
fn effective(
    names: &[Arc<str>],
    regex: Option<&Arc<str>>,
    regexes: &BTreeMap<Arc<str>, Resolved>,
) -> Vec<Arc<str>> {
    let matched = regex.and_then(|r| regexes.get(r)).map(|r| &r.topics[..]);
    match matched {
        None | Some([]) => names.to_vec(),
        Some(matched) if names.is_empty() => matched.to_vec(),
        Some(matched) => {
            let set: BTreeSet<&Arc<str>> = names.iter().chain(matched).collect();
            set.into_iter().cloned().collect()
        }
    }
}

/// A consumer-protocol group.
#[derive(Clone, Debug)]
pub(crate) struct ConsumerGroup {
    id: Arc<str>,
    members: BTreeMap<Arc<str>, Member>,
    /// Instance id → member id, for static members.
    instances: HashMap<Arc<str>, Arc<str>>,
    /// The group epoch as of the last call that read the entry's generation.
    group_epoch: i32,
    /// The target assignment's epoch.
    target_epoch: i32,
    /// Subscribed topic → how many members subscribe to it (by name or by expression).
    subscribers: BTreeMap<Arc<str>, u32>,
    /// The members' regular expressions, with what each matched.
    regexes: BTreeMap<Arc<str>, Resolved>,
    /// When the expressions were last matched against the topics; `None`: never (a group
    /// just loaded), so the next heartbeat matches them.
    regexes_resolved_at: Option<u64>,
    /// Subscribed topic → its partition count when the group epoch was last bumped (absent:
    /// the topic did not exist).
    topic_partitions: BTreeMap<Arc<str>, u32>,
    /// Partition → the member that holds it now (assigned or still revoking).
    owners: HashMap<TopicPartition, Arc<str>>,
    /// The assignor that computed the target.
    assignor: Option<String>,
    /// `group.consumer.session.timeout.ms` as of the last heartbeat (for the record).
    session_timeout_ms: u64,
    /// What a restart must know changed (members, epochs, subscriptions, assignments): the
    /// group's record must be written before the heartbeat is answered.
    record_due: bool,
    /// The last consumer-protocol member left and the others speak the classic protocol:
    /// the members of the classic group this group becomes (Kafka's `convertToClassicGroup`),
    /// taken by [`Group::take_replacement`].
    /// With whether the classic group rebalances at once (not when a classic static member
    /// took the last consumer-protocol member's place).
    downgrade: Option<(Vec<MigratingMember>, bool)>,
}

/// How a heartbeat finds its member.
enum Found {
    Existing(Arc<str>),
    New(Arc<str>),
    /// A static member rejoining under a new member id replaces the old one (which had left
    /// with epoch −2).
    Replaces {
        new: Arc<str>,
        old: Arc<str>,
    },
}

/// What a heartbeat tells the coordinator besides its answer.
pub(crate) struct Outcome {
    /// Members joined or left: the lifecycle must look again.
    pub(crate) membership_changed: bool,
    /// The earliest deadline of the heartbeating member.
    pub(crate) deadline: Option<u64>,
}

impl ConsumerGroup {
    pub(crate) fn new(id: Arc<str>) -> Self {
        ConsumerGroup {
            id,
            members: BTreeMap::new(),
            instances: HashMap::new(),
            group_epoch: 0,
            target_epoch: 0,
            subscribers: BTreeMap::new(),
            regexes: BTreeMap::new(),
            regexes_resolved_at: None,
            topic_partitions: BTreeMap::new(),
            owners: HashMap::new(),
            assignor: None,
            session_timeout_ms: 0,
            record_due: false,
            downgrade: None,
        }
    }

    /// The group a coordinator loads from its durable record: the members with their epochs,
    /// states, subscriptions and current, pending and target assignments, and the target's
    /// epoch; every session (and a revocation under way) counting from `now`. The subscribed
    /// topics' partition counts are taken from the target assignment (every partition of a
    /// subscribed topic is in some member's target), and so are the topics each regular
    /// expression matched (the targeted topics it matches): a heartbeat after the load
    /// matches the expressions again, and bumps the group epoch only if the topics changed
    /// meanwhile.
    pub(crate) fn from_record(record: &GroupRecord, now: u64) -> Self {
        let mut group = ConsumerGroup::new(Arc::from(record.group_id.as_str()));
        group.group_epoch = epoch_of(record.generation);
        group.assignor = record.protocol.clone();
        for m in &record.members {
            let Some(c) = &m.consumer else { continue };
            let id: Arc<str> = Arc::from(m.member_id.as_str());
            let state = match c.state.as_str() {
                "UNREVOKED_PARTITIONS" => MemberState::UnrevokedPartitions,
                "UNRELEASED_PARTITIONS" => MemberState::UnreleasedPartitions,
                _ => MemberState::Stable,
            };
            // A classic member of the group: the only members with protocols.
            let classic = (!m.protocols.is_empty()).then(|| ClassicMeta {
                session_timeout_ms: m.session_timeout_ms,
                protocols: m.protocols.clone(),
                join_deadline: None,
                sync_deadline: None,
            });
            let member = Member {
                classic,
                instance_id: m.group_instance_id.as_deref().map(Arc::from),
                rack_id: c.rack_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                epoch: c.member_epoch,
                previous_epoch: c.previous_member_epoch,
                state,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                names: topic_set(&c.subscribed_topic_names),
                regex: c
                    .subscribed_topic_regex
                    .as_deref()
                    .filter(|r| !r.is_empty())
                    .map(Arc::from),
                topics: Vec::new(),
                server_assignor: c.server_assignor.clone(),
                assigned: m.partitions.iter().cloned().collect(),
                revoking: c.partitions_pending_revocation.iter().cloned().collect(),
                target: c.target_assignment.iter().cloned().collect(),
                session_deadline: now.saturating_add(m.session_timeout_ms),
                revocation_deadline: (state == MemberState::UnrevokedPartitions)
                    .then(|| (now.saturating_add(m.rebalance_timeout_ms), c.member_epoch)),
            };
            group.target_epoch = c.target_assignment_epoch;
            if member.classic.is_none() {
                group.session_timeout_ms = m.session_timeout_ms;
            }
            for tp in member.assigned.iter().chain(&member.revoking) {
                group.owners.insert(tp.clone(), id.clone());
            }
            if let Some(regex) = &member.regex {
                // It compiled when the member sent it: a failure means a record from another
                // build or a damaged one. Kafka logs it and matches nothing with it.
                count_regex(&mut group.regexes, regex.clone(), || {
                    pattern::compile(regex)
                        .inspect_err(|e| warn!(group = %record.group_id, error = %e, "a member's regular expression does not compile; it matches no topic"))
                        .ok()
                });
            }
            if let Some(instance) = &member.instance_id {
                group.instances.insert(instance.clone(), id.clone());
            }
            group.members.insert(id, member);
        }
        let targeted: BTreeSet<&str> = group
            .members
            .values()
            .flat_map(|m| m.target.iter().map(TopicPartition::topic))
            .collect();
        for r in group.regexes.values_mut() {
            r.topics = targeted
                .iter()
                .filter(|t| r.regex.is_match(t))
                .map(|t| Arc::from(*t))
                .collect();
        }
        for m in group.members.values_mut() {
            m.topics = effective(&m.names, m.regex.as_ref(), &group.regexes);
            for t in &m.topics {
                *group.subscribers.entry(t.clone()).or_insert(0) += 1;
            }
        }
        for m in group.members.values() {
            for tp in &m.target {
                if group.subscribers.contains_key(tp.topic()) {
                    let n = group
                        .topic_partitions
                        .entry(Arc::from(tp.topic()))
                        .or_insert(0);
                    *n = (*n).max(tp.partition().saturating_add(1));
                }
            }
        }
        group
    }

    fn fenced(&self, member: &str, received: i32, stored: i32) -> Error {
        let which = if received > stored {
            "greater"
        } else {
            "smaller"
        };
        Error::FencedMemberEpoch {
            group: self.id.to_string(),
            member: member.to_string(),
            reason: format!(
                "The consumer group member has a {which} member epoch ({received}) than the one \
                 known by the group coordinator ({stored}). The member must abandon all its \
                 partitions and rejoin."
            ),
        }
    }

    fn unknown(&self, member: &str) -> Error {
        Error::unknown_member(&self.id, member)
    }

    /// Kafka's `throwIfConsumerGroupMemberEpochIsInvalid`, with the lost-response rule.
    fn check_epoch(
        &self,
        id: &str,
        m: &Member,
        received: i32,
        owned: Option<&[TopicPartition]>,
    ) -> Result<(), Error> {
        if received > m.epoch {
            return Err(self.fenced(id, received, m.epoch));
        }
        if received < m.epoch {
            let subset = owned.is_some_and(|o| o.iter().all(|tp| m.assigned.contains(tp)));
            if received != m.previous_epoch || !subset {
                return Err(self.fenced(id, received, m.epoch));
            }
        }
        Ok(())
    }

    /// Finds (or admits) the heartbeat's member, as Kafka's
    /// `getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember`.
    fn find(&self, req: &ConsumerGroupHeartbeatRequest, ctx: &Ctx<'_>) -> Result<Found, Error> {
        let owned = req.topic_partitions.as_deref();
        let known = self.members.get_key_value(req.member_id.as_str());
        let fresh = || -> Arc<str> {
            if req.member_id.is_empty() {
                Arc::from(ctx.ids.member_id(&req.client_id))
            } else {
                Arc::from(req.member_id.as_str())
            }
        };
        let Some(instance) = req.instance_id.as_deref() else {
            return match known {
                Some((id, m)) => {
                    self.check_epoch(id, m, req.member_epoch, owned)?;
                    Ok(Found::Existing(id.clone()))
                }
                None if req.member_epoch == 0 => Ok(Found::New(fresh())),
                None => Err(self.unknown(&req.member_id)),
            };
        };
        let holder = self
            .instances
            .get(instance)
            .and_then(|id| self.members.get_key_value(id));
        if req.member_epoch == 0 {
            return match holder {
                // A new static member (Kafka does not check the epoch of a member id it
                // already knows here).
                None => match known {
                    Some((id, _)) => Ok(Found::Existing(id.clone())),
                    None => Ok(Found::New(fresh())),
                },
                Some((old, m)) => {
                    // A member of the classic protocol is replaced whatever its epoch
                    // (Kafka checks the release only between two consumer-protocol members).
                    if m.classic.is_none() && m.epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                        return Err(Error::UnreleasedInstanceId {
                            group: self.id.to_string(),
                            member: req.member_id.clone(),
                            instance: instance.to_string(),
                            owner: old.to_string(),
                        });
                    }
                    Ok(Found::Replaces {
                        new: fresh(),
                        old: old.clone(),
                    })
                }
            };
        }
        let Some((id, m)) = holder else {
            // Kafka: "Instance id … is unknown."
            return Err(self.unknown(&req.member_id));
        };
        if **id != *req.member_id {
            return Err(Error::FencedInstanceId {
                group: self.id.to_string(),
                member: req.member_id.clone(),
                instance: instance.to_string(),
                current: id.to_string(),
            });
        }
        self.check_epoch(id, m, req.member_epoch, owned)?;
        Ok(Found::Existing(id.clone()))
    }

    /// Kafka's ConsumerGroupHeartbeat for this group (the request is valid: see
    /// `api::validate`).
    pub(crate) fn heartbeat(
        &mut self,
        req: &ConsumerGroupHeartbeatRequest,
        ctx: &mut Ctx<'_>,
    ) -> (Result<ConsumerGroupHeartbeatResponse, Error>, Outcome) {
        self.group_epoch = epoch_of(*ctx.generation);
        self.session_timeout_ms = ctx.consumer.session_timeout_ms;
        let mut outcome = Outcome {
            membership_changed: false,
            deadline: None,
        };
        let result = if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH
            || req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
        {
            self.leave(req, ctx, &mut outcome)
        } else {
            self.beat(req, ctx, &mut outcome)
        };
        (result, outcome)
    }

    fn beat(
        &mut self,
        req: &ConsumerGroupHeartbeatRequest,
        ctx: &mut Ctx<'_>,
        outcome: &mut Outcome,
    ) -> Result<ConsumerGroupHeartbeatResponse, Error> {
        let max = ctx.consumer.max_size;
        if self.members.len() >= max as usize
            && (req.member_id.is_empty() || !self.members.contains_key(req.member_id.as_str()))
        {
            return Err(Error::GroupMaxSizeReached {
                group: self.id.to_string(),
                max,
            });
        }
        let found = self.find(req, ctx)?;
        let id = match &found {
            Found::Existing(id) | Found::New(id) | Found::Replaces { new: id, .. } => id.clone(),
        };
        // 1. What changes: the subscription (names and expression), what the group's
        // expressions match, and the subscribed topics' metadata.
        let new_names = req.subscribed_topic_names.as_deref().map(topic_set);
        // Kafka reads an empty expression as none.
        let new_regex: Option<Option<Arc<str>>> = req
            .subscribed_topic_regex
            .as_deref()
            .map(|r| (!r.is_empty()).then(|| Arc::from(r)));
        let old = match &found {
            Found::Existing(id) => self.members.get(id),
            Found::Replaces { old, .. } => self.members.get(old),
            Found::New(_) => None,
        };
        let names_changed = new_names
            .as_deref()
            .is_some_and(|t| t != old.map_or(&[][..], |m| &m.names[..]));
        let regex_changed = new_regex
            .as_ref()
            .is_some_and(|r| r.as_ref() != old.and_then(|m| m.regex.as_ref()));
        // A new expression is compiled before anything changes (Kafka:
        // INVALID_REGULAR_EXPRESSION, and the member is not admitted).
        let compiled = match new_regex.as_ref() {
            Some(Some(r)) if regex_changed && !self.regexes.contains_key(r) => {
                Some(pattern::compile(r)?)
            }
            _ => None,
        };
        let resolve = compiled.is_some()
            || (!self.regexes.is_empty()
                && self
                    .regexes_resolved_at
                    .is_none_or(|at| ctx.now >= at.saturating_add(pattern::REFRESH_INTERVAL_MS)));
        // With a new subscription the metadata is read again below, once it is applied.
        let bump = ctx.generation.get() == 0
            || names_changed
            || regex_changed
            || resolve
            || self.metadata_changed(ctx);
        let assigns = bump || self.group_epoch > self.target_epoch;
        // A refused call changes nothing: the only step that can fail once the group is
        // changed is the assignor, so keep what to go back to.
        let backup = assigns.then(|| (self.clone(), *ctx.generation));
        let previous_assigned = self.apply_member(&found, req, ctx.now, ctx);
        outcome.membership_changed = matches!(found, Found::New(_) | Found::Replaces { .. });
        let mut subscription_changed = names_changed;
        if names_changed || regex_changed {
            subscription_changed |= self.subscribe(&id, new_names, new_regex, compiled);
        }
        if resolve {
            subscription_changed |= self.resolve_regexes(ctx);
        }
        if bump {
            let refreshed = self.refresh_metadata(ctx);
            if ctx.generation.get() == 0 || subscription_changed || refreshed {
                *ctx.generation = ctx.generation.next();
                self.group_epoch = epoch_of(*ctx.generation);
                info!(
                    group = &*self.id,
                    epoch = self.group_epoch,
                    "bumped group epoch"
                );
            }
        }
        // 2. A new target when the group epoch is ahead.
        if self.group_epoch > self.target_epoch {
            if let Err(e) = self.compute_target(ctx) {
                if let Some((group, generation)) = backup {
                    *self = group;
                    *ctx.generation = generation;
                }
                outcome.membership_changed = false;
                return Err(e);
            }
        }
        // 3. Reconcile the member toward its target.
        let owned = req.topic_partitions.as_deref();
        let changed = self.reconcile(&id, owned, ctx.now);
        let session = ctx.consumer.session_timeout_ms;
        let Some(m) = self.members.get_mut(&id) else {
            return Err(self.unknown(&id));
        };
        m.session_deadline = ctx.now.saturating_add(session);
        outcome.deadline = Some(m.deadline());
        let full = req.member_epoch == 0
            || (req.rebalance_timeout_ms != -1
                && (req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some())
                && req.topic_partitions.is_some());
        let replaced = previous_assigned.is_some();
        let assigned_changed = changed || previous_assigned.is_some_and(|p| p != m.assigned);
        let due = changed
            || assigns
            || outcome.membership_changed
            || subscription_changed
            || regex_changed;
        Ok(ConsumerGroupHeartbeatResponse {
            member_id: id.to_string(),
            member_epoch: m.epoch,
            heartbeat_interval_ms: i32::try_from(ctx.consumer.heartbeat_interval_ms)
                .unwrap_or(i32::MAX),
            assignment: (full || assigned_changed).then(|| m.assigned.iter().cloned().collect()),
        })
        .inspect(|_| {
            if due || replaced {
                self.record_due = true;
            }
        })
    }

    /// Creates, replaces or updates the member; returns its assignment before, for a member
    /// that replaced another (its response must carry the assignment it took over).
    fn apply_member(
        &mut self,
        found: &Found,
        req: &ConsumerGroupHeartbeatRequest,
        now: u64,
        ctx: &Ctx<'_>,
    ) -> Option<BTreeSet<TopicPartition>> {
        let session = ctx.consumer.session_timeout_ms;
        let id = match found {
            Found::Existing(id) => id.clone(),
            Found::New(id) => {
                self.members.insert(id.clone(), Member::new(now, session));
                info!(
                    group = &*self.id,
                    member = &**id,
                    "member joins the consumer group"
                );
                id.clone()
            }
            Found::Replaces { new, old } => {
                // The subscription moves with the entry: the counts of its topics and of
                // its expression stay as they are.
                let mut m = match self.members.remove(old) {
                    Some(m) => {
                        self.release(old, &m);
                        m
                    }
                    None => Member::new(now, session),
                };
                m.epoch = 0;
                m.previous_epoch = 0;
                m.state = MemberState::Stable;
                m.revocation_deadline = None;
                for tp in m.assigned.iter() {
                    self.owners.insert(tp.clone(), new.clone());
                }
                self.members.insert(new.clone(), m);
                info!(
                    group = &*self.id,
                    member = &**new,
                    replaced = &**old,
                    "static member replaces its previous instance"
                );
                new.clone()
            }
        };
        let replaced = matches!(found, Found::Replaces { .. });
        let m = self.members.get_mut(&id)?;
        let before = replaced.then(BTreeSet::new);
        if let Some(instance) = req.instance_id.as_deref() {
            if self.instances.get(instance) != Some(&id) {
                let instance: Arc<str> = Arc::from(instance);
                m.instance_id = Some(instance.clone());
                self.instances.insert(instance, id.clone());
            }
        }
        if let Some(rack) = &req.rack_id {
            m.rack_id = Some(rack.clone());
        }
        if req.rebalance_timeout_ms != -1 {
            m.rebalance_timeout_ms = ms(req.rebalance_timeout_ms);
        }
        if let Some(assignor) = &req.server_assignor {
            m.server_assignor = Some(assignor.clone());
        }
        m.client_id.clone_from(&req.client_id);
        m.client_host.clone_from(&req.client_host);
        // A classic member that heartbeats with the consumer protocol speaks it from now on.
        m.classic = None;
        before
    }

    /// Sets member `id`'s names and expression (`None`: unchanged; an expression of
    /// `Some(None)`: none any more), counting the expression's subscribers; `compiled` is the
    /// new expression compiled, when the group did not have it yet (it matches nothing
    /// until [`resolve_regexes`](Self::resolve_regexes)). Returns whether the member's
    /// subscribed topics changed.
    fn subscribe(
        &mut self,
        id: &Arc<str>,
        names: Option<Vec<Arc<str>>>,
        regex: Option<Option<Arc<str>>>,
        compiled: Option<Regex>,
    ) -> bool {
        let Some(m) = self.members.get_mut(id) else {
            return false;
        };
        if let Some(names) = names {
            m.names = names;
        }
        if let Some(regex) = regex {
            if regex != m.regex {
                let old = std::mem::replace(&mut m.regex, regex.clone());
                if let Some(new) = regex {
                    // A new expression comes compiled.
                    count_regex(&mut self.regexes, new, || compiled);
                }
                if let Some(old) = old {
                    self.forget_regex(&old);
                }
            }
        }
        self.resubscribe(id)
    }

    /// One member fewer subscribes with `regex`.
    fn forget_regex(&mut self, regex: &Arc<str>) {
        if let Some(r) = self.regexes.get_mut(regex) {
            r.members = r.members.saturating_sub(1);
            if r.members == 0 {
                self.regexes.remove(regex);
            }
        }
    }

    /// Recomputes member `id`'s subscribed topics from its names and what its expression
    /// matches, and the topics' subscriber counts; returns whether they changed.
    fn resubscribe(&mut self, id: &Arc<str>) -> bool {
        let Some(m) = self.members.get_mut(id) else {
            return false;
        };
        let topics = effective(&m.names, m.regex.as_ref(), &self.regexes);
        if topics == m.topics {
            return false;
        }
        let old = std::mem::replace(&mut m.topics, topics);
        for t in &m.topics {
            *self.subscribers.entry(t.clone()).or_default() += 1;
        }
        for t in old {
            self.unsubscribe(&t);
        }
        true
    }

    /// Matches the group's expressions against every topic (Kafka's
    /// `refreshRegularExpressions`, done here at once: the port's listing is cheap); returns
    /// whether any member's subscribed topics changed.
    fn resolve_regexes(&mut self, ctx: &Ctx<'_>) -> bool {
        self.regexes_resolved_at = Some(ctx.now);
        if self.regexes.is_empty() {
            return false;
        }
        let mut names = ctx.metadata.topic_names();
        names.sort_unstable();
        names.dedup();
        let mut moved = BTreeSet::new();
        for (source, r) in &mut self.regexes {
            let topics: Vec<Arc<str>> = names
                .iter()
                .filter(|t| r.regex.is_match(t))
                .map(|t| Arc::from(t.as_str()))
                .collect();
            if topics != r.topics {
                r.topics = topics;
                moved.insert(source.clone());
            }
        }
        if moved.is_empty() {
            return false;
        }
        let ids: Vec<Arc<str>> = self
            .members
            .iter()
            .filter(|(_, m)| m.regex.as_ref().is_some_and(|r| moved.contains(r)))
            .map(|(id, _)| id.clone())
            .collect();
        let mut changed = false;
        for id in ids {
            changed |= self.resubscribe(&id);
        }
        if changed {
            info!(
                group = &*self.id,
                regexes = self.regexes.len(),
                "the topics the group's regular expressions match changed"
            );
        }
        changed
    }

    fn unsubscribe(&mut self, topic: &Arc<str>) {
        if let Some(n) = self.subscribers.get_mut(topic) {
            *n -= 1;
            if *n == 0 {
                self.subscribers.remove(topic);
            }
        }
    }

    /// Whether a subscribed topic's partition count differs from the one the group epoch
    /// was last bumped with (a topic created, deleted or grown).
    fn metadata_changed(&self, ctx: &Ctx<'_>) -> bool {
        if self.subscribers.len() != self.topic_partitions.len()
            && self
                .subscribers
                .keys()
                .filter(|t| ctx.metadata.partition_count(t).is_some())
                .count()
                != self.topic_partitions.len()
        {
            return true;
        }
        self.subscribers
            .keys()
            .any(|t| ctx.metadata.partition_count(t) != self.topic_partitions.get(t).copied())
    }

    /// Reads the subscribed topics' metadata; returns whether it changed.
    fn refresh_metadata(&mut self, ctx: &Ctx<'_>) -> bool {
        let now: BTreeMap<Arc<str>, u32> = self
            .subscribers
            .keys()
            .filter_map(|t| ctx.metadata.partition_count(t).map(|n| (t.clone(), n)))
            .collect();
        let changed = now != self.topic_partitions;
        self.topic_partitions = now;
        changed
    }

    /// The server-side assignor: the one most members ask for (ties: the earlier
    /// registered), else the default (the first registered).
    fn choose_assignor<'a>(&self, ctx: &Ctx<'a>) -> Result<&'a Arc<dyn Assignor>, Error> {
        let registered = ctx.consumer_assignors;
        let mut votes = vec![0usize; registered.len()];
        for m in self.members.values() {
            if let Some(name) = &m.server_assignor {
                if let Some(i) = registered.iter().position(|a| a.name() == name) {
                    votes[i] += 1;
                }
            }
        }
        let best = votes
            .iter()
            .enumerate()
            .max_by(|(i, a), (j, b)| a.cmp(b).then(j.cmp(i)))
            .map_or(0, |(i, _)| i);
        registered.get(best).ok_or_else(|| Error::AssignorFailed {
            assignor: String::new(),
            reason: "no server-side assignor is registered \
                     (CoordinatorBuilder::consumer_assignor)"
                .into(),
        })
    }

    /// Computes the target assignment of the group epoch (Kafka's `TargetAssignmentBuilder`).
    fn compute_target(&mut self, ctx: &Ctx<'_>) -> Result<(), Error> {
        let assignor = self.choose_assignor(ctx)?;
        let fail = |reason: String| Error::AssignorFailed {
            assignor: assignor.name().to_string(),
            reason,
        };
        let topics: Vec<TopicSpec> = self
            .topic_partitions
            .iter()
            .filter(|(_, &n)| n <= MAX_PARTITIONS_PER_TOPIC)
            .map(|(name, &partitions)| TopicSpec {
                name: name.clone(),
                partitions,
            })
            .collect();
        let total: usize = topics.iter().map(|t| t.partitions as usize).sum();
        if total > MAX_TOTAL_PARTITIONS {
            return Err(Error::invalid(
                "subscription",
                format!(
                    "the group's topics hold {total} partitions in all, more than the \
                     {MAX_TOTAL_PARTITIONS} one assignment supports"
                ),
            ));
        }
        let index = |name: &str| -> Option<TopicIndex> {
            topics
                .binary_search_by(|t| (*t.name).cmp(name))
                .ok()
                .map(|i| i as TopicIndex)
        };
        let member_ids: Vec<Arc<str>> = self.members.keys().cloned().collect();
        let mut sub_starts = Vec::with_capacity(member_ids.len() + 1);
        let mut owned_starts = Vec::with_capacity(member_ids.len() + 1);
        let mut subs = Vec::new();
        let mut owned = Vec::new();
        sub_starts.push(0u32);
        owned_starts.push(0u32);
        let mut claimed: HashMap<PartitionRef, ()> = HashMap::new();
        for m in self.members.values() {
            subs.extend(m.topics.iter().filter_map(|t| index(t)));
            sub_starts.push(u32::try_from(subs.len()).map_err(|_| fail("too many".into()))?);
            let from = owned.len();
            for tp in &m.target {
                // What the member no longer subscribes to is not its own any more.
                if m.topics
                    .binary_search_by(|t| (**t).cmp(tp.topic()))
                    .is_err()
                {
                    continue;
                }
                let Some(t) = index(tp.topic()) else { continue };
                if tp.partition() >= topics[t as usize].partitions {
                    continue;
                }
                let p = PartitionRef::new(t, tp.partition());
                if claimed.insert(p, ()).is_none() {
                    owned.push(p);
                }
            }
            owned[from..].sort_unstable();
            owned_starts.push(u32::try_from(owned.len()).map_err(|_| fail("too many".into()))?);
        }
        let input = AssignmentInput::from_parts(
            &topics,
            &member_ids,
            &sub_starts,
            &subs,
            &owned_starts,
            &owned,
        );
        let out = assignor
            .assign(&input)
            .map_err(|e| fail(e.message().to_string()))?;
        out.validate(&input)
            .map_err(|e| fail(e.message().to_string()))?;
        let lists = out.member_partitions(&input);
        for (m, list) in self.members.values_mut().zip(lists) {
            m.target = list
                .into_iter()
                .filter_map(|p| input.topic_partition(p))
                .collect();
        }
        self.target_epoch = self.group_epoch;
        self.assignor = Some(assignor.name().to_string());
        info!(
            group = &*self.id,
            epoch = self.target_epoch,
            assignor = assignor.name(),
            "computed the target assignment"
        );
        Ok(())
    }

    /// Kafka's `CurrentAssignmentBuilder.build`: moves member `id` toward its target.
    /// Returns whether its assignment changed.
    fn reconcile(&mut self, id: &Arc<str>, owned: Option<&[TopicPartition]>, now: u64) -> bool {
        let target_epoch = self.target_epoch;
        let Some(m) = self.members.get(id) else {
            return false;
        };
        if m.state == MemberState::Stable && m.epoch == target_epoch {
            return false;
        }
        let still_owns = |set: &BTreeSet<TopicPartition>| match owned {
            None => true,
            Some(o) => o.iter().any(|tp| set.contains(tp)),
        };
        // A member that revoked everything it had to moves to the next epoch (Kafka 4:
        // `min(epoch + 1, target epoch)`) should it have more to revoke.
        let epoch = match m.state {
            MemberState::UnrevokedPartitions if still_owns(&m.revoking) => return false,
            MemberState::UnrevokedPartitions => (m.epoch.saturating_add(1)).min(target_epoch),
            _ => m.epoch,
        };
        // computeNextAssignment
        let mut assigned = BTreeSet::new();
        let mut revoke = BTreeSet::new();
        for tp in &m.assigned {
            if m.target.contains(tp) {
                assigned.insert(tp.clone());
            } else {
                revoke.insert(tp.clone());
            }
        }
        let mut pending = Vec::new();
        let mut unreleased = false;
        for tp in &m.target {
            if m.assigned.contains(tp) {
                continue;
            }
            // Held by another member (a partition this member itself is still revoking is
            // no other's: it takes it back, as Kafka 4 does).
            if self.owners.get(tp).is_some_and(|o| o != id) {
                unreleased = true;
            } else {
                pending.push(tp.clone());
            }
        }
        let mut next = m.clone();
        if !revoke.is_empty() && still_owns(&revoke) {
            next.state = MemberState::UnrevokedPartitions;
            next.update_epoch(epoch);
            next.assigned = assigned;
            next.revoking = revoke;
        } else {
            assigned.extend(pending);
            next.state = if unreleased {
                MemberState::UnreleasedPartitions
            } else {
                MemberState::Stable
            };
            next.update_epoch(target_epoch);
            next.assigned = assigned;
            next.revoking = BTreeSet::new();
        }
        let assigned_changed = next.assigned != m.assigned;
        let changed = assigned_changed
            || next.revoking != m.revoking
            || next.epoch != m.epoch
            || next.state != m.state;
        if !changed {
            return false;
        }
        next.revocation_deadline = (next.state == MemberState::UnrevokedPartitions)
            .then(|| (now.saturating_add(next.rebalance_timeout_ms), next.epoch));
        let Some(slot) = self.members.get_mut(id) else {
            return false;
        };
        let old = std::mem::replace(slot, next);
        self.release(id, &old);
        if let Some(m) = self.members.get(id) {
            for tp in m.assigned.iter().chain(&m.revoking) {
                self.owners.insert(tp.clone(), id.clone());
            }
        }
        assigned_changed
    }

    /// Forgets that `id` holds the partitions `m` held.
    fn release(&mut self, id: &Arc<str>, m: &Member) {
        for tp in m.assigned.iter().chain(&m.revoking) {
            if self.owners.get(tp).is_some_and(|o| o == id) {
                self.owners.remove(tp);
            }
        }
    }

    /// Takes `id` out of the maps (owners, subscribers, instances); returns its entry.
    fn remove_member_entry(&mut self, id: &Arc<str>) -> Option<Member> {
        let m = self.members.remove(id)?;
        self.release(id, &m);
        for t in &m.topics {
            self.unsubscribe(t);
        }
        if let Some(regex) = &m.regex {
            self.forget_regex(regex);
        }
        if let Some(instance) = &m.instance_id {
            if self.instances.get(instance).is_some_and(|o| o == id) {
                self.instances.remove(instance);
            }
        }
        Some(m)
    }

    /// Kafka's `consumerGroupFenceMember`: removes the member, bumps the group epoch.
    /// When the group becomes a classic group instead (the last consumer-protocol member
    /// left, Kafka's `convertToClassicGroup`), the epoch is not bumped: the classic
    /// generation is the group epoch, the reconciled classic members' own.
    fn fence(&mut self, id: &Arc<str>, ctx: &mut Ctx<'_>, why: &str) {
        let downgrade = self.downgrade_allowed(id, ctx);
        if downgrade {
            self.downgrade = Some((self.migrating_members(id), true));
        } else if let Some((members, _)) = self.downgrade.as_mut() {
            // Fenced in the same transition as the last consumer-protocol member (timers
            // due at once): it does not go over to the classic group.
            members.retain(|m| m.id != *id);
        }
        if self.remove_member_entry(id).is_none() {
            return;
        }
        self.topic_partitions
            .retain(|t, _| self.subscribers.contains_key(t));
        self.record_due = true;
        if !downgrade {
            *ctx.generation = ctx.generation.next();
        }
        self.group_epoch = epoch_of(*ctx.generation);
        info!(
            group = &*self.id,
            member = &**id,
            epoch = self.group_epoch,
            why,
            "member removed from the consumer group"
        );
    }

    /// Removes a member as Kafka does when an admin removes it (LeaveGroup sent by
    /// `Admin.removeMembersFromConsumerGroup`, `classicGroupLeaveToConsumerGroup`): the
    /// member is fenced (a static one too, for good), the group epoch bumped. Its next
    /// heartbeat is `UNKNOWN_MEMBER_ID`.
    pub(crate) fn remove_by_admin(
        &mut self,
        member_id: &str,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), Error> {
        self.group_epoch = epoch_of(*ctx.generation);
        let Some((id, _)) = self.members.get_key_value(member_id) else {
            return Err(self.unknown(member_id));
        };
        let id = id.clone();
        self.fence(&id, ctx, "removed by an admin");
        // Kafka's `classicGroupLeaveToConsumerGroup` removes without a downgrade.
        self.downgrade = None;
        Ok(())
    }

    /// Bumps the group epoch, so that the next heartbeat computes a new target assignment
    /// (what a subscription or metadata change does). Returns the new epoch.
    pub(crate) fn bump_epoch(&mut self, ctx: &mut Ctx<'_>) -> i32 {
        *ctx.generation = ctx.generation.next();
        self.group_epoch = epoch_of(*ctx.generation);
        self.record_due = true;
        info!(
            group = &*self.id,
            epoch = self.group_epoch,
            "bumped group epoch (forced)"
        );
        self.group_epoch
    }

    /// A heartbeat with epoch −1 (leave) or −2 (a static member leaving for now).
    fn leave(
        &mut self,
        req: &ConsumerGroupHeartbeatRequest,
        ctx: &mut Ctx<'_>,
        outcome: &mut Outcome,
    ) -> Result<ConsumerGroupHeartbeatResponse, Error> {
        let id = match req.instance_id.as_deref() {
            None => self
                .members
                .get_key_value(req.member_id.as_str())
                .map(|(id, _)| id.clone())
                .ok_or_else(|| self.unknown(&req.member_id))?,
            Some(instance) => {
                let Some(id) = self.instances.get(instance).cloned() else {
                    return Err(self.unknown(&req.member_id));
                };
                if *id != *req.member_id {
                    return Err(Error::FencedInstanceId {
                        group: self.id.to_string(),
                        member: req.member_id.clone(),
                        instance: instance.to_string(),
                        current: id.to_string(),
                    });
                }
                id
            }
        };
        self.record_due = true;
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            if let Some(m) = self.members.get_mut(&id) {
                let revoking = std::mem::take(&mut m.revoking);
                m.epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
                m.revocation_deadline = None;
                for tp in revoking {
                    if self.owners.get(&tp).is_some_and(|o| *o == id) {
                        self.owners.remove(&tp);
                    }
                }
                info!(
                    group = &*self.id,
                    member = &*id,
                    "static member left the consumer group for now"
                );
            }
        } else {
            self.fence(&id, ctx, "left");
            outcome.membership_changed = true;
        }
        Ok(ConsumerGroupHeartbeatResponse {
            member_id: id.to_string(),
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: i32::try_from(ctx.consumer.heartbeat_interval_ms)
                .unwrap_or(i32::MAX),
            assignment: None,
        })
    }

    // ------------------------------------------------------- members of the classic protocol

    /// Kafka's `ConsumerGroup.fromClassicGroup`: the consumer-protocol group a classic group
    /// of protocol type `consumer` becomes (`convertToConsumerGroup`). The group epoch and
    /// the target's are the classic generation; every member is Stable at that epoch, its
    /// subscription read from its metadata for the chosen protocol, its current and target
    /// assignment from its last assignment; each session counts from `now` with the member's
    /// own timeout.
    ///
    /// Error: `GROUP_ID_NOT_FOUND` (Kafka's answer) when a member's embedded consumer protocol
    /// does not decode — its subscription, or its assignment (a member that joined the
    /// rebalance under way and has not synced has none) — or no protocol was chosen yet.
    pub(crate) fn from_classic(
        id: Arc<str>,
        protocol_name: Option<&str>,
        members: Vec<MigratingMember>,
        generation: Generation,
        now: u64,
    ) -> Result<Self, Error> {
        let refuse = |why: String| {
            info!(
                group = &*id,
                why, "cannot upgrade the classic group to a consumer-protocol group"
            );
            Error::NotConsumerGroup {
                group: id.to_string(),
                actual: "classic",
            }
        };
        let Some(protocol) = protocol_name else {
            return Err(refuse(
                "the classic group has chosen no protocol yet".into(),
            ));
        };
        let mut group = ConsumerGroup::new(id.clone());
        let epoch = epoch_of(generation);
        group.group_epoch = epoch;
        group.target_epoch = epoch;
        for m in members {
            let metadata = m
                .protocols
                .iter()
                .find(|p| p.name == protocol)
                .map(|p| p.metadata.clone())
                .unwrap_or_else(|| Arc::from(&[][..]));
            let sub = embedded::decode_subscription(&metadata).map_err(|_| {
                refuse(format!(
                    "member {}'s subscription is not the embedded consumer protocol",
                    m.id
                ))
            })?;
            let assigned: BTreeSet<TopicPartition> = embedded::decode_assignment(&m.assignment)
                .map_err(|_| {
                    refuse(format!(
                        "member {} has no assignment of the embedded consumer protocol",
                        m.id
                    ))
                })?
                .into_iter()
                .collect();
            let member = Member {
                instance_id: m.instance_id.clone(),
                rack_id: sub.rack.clone(),
                client_id: m.client_id,
                client_host: m.client_host,
                epoch,
                previous_epoch: epoch,
                state: MemberState::Stable,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                names: topic_set(&sub.topics),
                regex: None,
                topics: Vec::new(),
                server_assignor: None,
                target: assigned.clone(),
                assigned,
                revoking: BTreeSet::new(),
                session_deadline: now.saturating_add(m.session_timeout_ms),
                revocation_deadline: None,
                classic: Some(ClassicMeta {
                    session_timeout_ms: m.session_timeout_ms,
                    protocols: m.protocols,
                    join_deadline: None,
                    sync_deadline: None,
                }),
            };
            for tp in &member.assigned {
                group.owners.insert(tp.clone(), m.id.clone());
            }
            if let Some(instance) = &m.instance_id {
                group.instances.insert(instance.clone(), m.id.clone());
            }
            group.members.insert(m.id.clone(), member);
        }
        let ids: Vec<Arc<str>> = group.members.keys().cloned().collect();
        for id in ids {
            group.resubscribe(&id);
        }
        group.record_due = true;
        info!(
            group = &*group.id,
            epoch,
            members = group.members.len(),
            "classic group converted to a consumer-protocol group"
        );
        Ok(group)
    }

    /// The members, as a downgrade to the classic protocol carries them over (Kafka's
    /// `ClassicGroup.fromConsumerGroup`): every member but `leaving`, each with the
    /// assignment of its target, encoded at the version of its metadata for `protocol`.
    pub(crate) fn migrating_members(&self, leaving: &str) -> Vec<MigratingMember> {
        self.members
            .iter()
            .filter(|(id, _)| ***id != *leaving)
            .filter_map(|(id, m)| {
                let c = m.classic.as_ref()?;
                // Every protocol of a member carries the same subscription, at one version.
                let version = c
                    .protocols
                    .first()
                    .map_or(0, |p| embedded::version_of(&p.metadata));
                Some(MigratingMember {
                    id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: c.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocols: c.protocols.clone(),
                    assignment: Arc::from(embedded::encode_assignment(&m.target, version)),
                    partitions: Some(m.target.iter().cloned().collect()),
                })
            })
            .collect()
    }

    /// Kafka's `validateOnlineDowngradeWithFencedMember`, before member `leaving` is fenced:
    /// every other member speaks the classic protocol and it does not, some remain, the
    /// policy allows the downgrade and the classic group would not exceed `group.max.size`.
    fn downgrade_allowed(&self, leaving: &str, ctx: &Ctx<'_>) -> bool {
        if !self.only_consumer_protocol_member(leaving) || self.members.len() <= 1 {
            return false;
        }
        if !self.downgrade_enabled(ctx) {
            return false;
        }
        if self.members.len() - 1 > ctx.settings.max_size as usize {
            info!(
                group = &*self.id,
                "cannot downgrade the consumer group to a classic group: it has more members \
                 than group.max.size"
            );
            return false;
        }
        true
    }

    /// Kafka's `validateOnlineDowngradeWithReplacedMemberId`: the static member `replaced`,
    /// which a classic member's JoinGroup replaces, is the group's only consumer-protocol
    /// member, the policy allows a downgrade, and the group would not exceed
    /// `group.max.size`.
    fn downgrade_replacing_allowed(&self, replaced: &str, ctx: &Ctx<'_>) -> bool {
        self.only_consumer_protocol_member(replaced)
            && self.downgrade_enabled(ctx)
            && self.members.len() <= ctx.settings.max_size as usize
    }

    /// Whether `id` is a member speaking the consumer protocol and every other member speaks
    /// the classic one.
    fn only_consumer_protocol_member(&self, id: &str) -> bool {
        let Some(m) = self.members.get(id) else {
            return false;
        };
        let classic = self
            .members
            .values()
            .filter(|m| m.classic.is_some())
            .count();
        m.classic.is_none() && classic + 1 == self.members.len()
    }

    /// Whether the migration policy allows a downgrade (logged when it does not).
    fn downgrade_enabled(&self, ctx: &Ctx<'_>) -> bool {
        let enabled = ctx.consumer.migration_policy.is_downgrade_enabled();
        if !enabled {
            info!(
                group = &*self.id,
                "cannot downgrade the consumer group to a classic group: the online downgrade \
                 is disabled"
            );
        }
        enabled
    }

    /// The protocol the classic members share (each counted once per member; `None` when
    /// they share none).
    fn shared_classic_protocols(&self) -> (usize, HashMap<&str, usize>) {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        let mut n = 0;
        for c in self.members.values().filter_map(|m| m.classic.as_ref()) {
            n += 1;
            let names: BTreeSet<&str> = c.protocols.iter().map(|p| p.name.as_str()).collect();
            for name in names {
                *counts.entry(name).or_insert(0) += 1;
            }
        }
        (n, counts)
    }

    /// Kafka's `ConsumerGroup.supportsClassicProtocols`.
    fn supports_classic(&self, protocol_type: &str, protocols: &[ClassicProtocol]) -> bool {
        if protocol_type != CONSUMER_PROTOCOL_TYPE {
            return false;
        }
        if self.members.is_empty() {
            return !protocols.is_empty();
        }
        let (n, counts) = self.shared_classic_protocols();
        protocols
            .iter()
            .any(|p| counts.get(p.name.as_str()).copied().unwrap_or(0) == n)
    }

    /// Kafka's `validateConsumerGroupMember`: the member a classic request names (by its
    /// instance id for a static member), which must speak the classic protocol
    /// (`throwIfMemberDoesNotUseClassicProtocol`).
    fn classic_member(&self, member_id: &str, instance: Option<&str>) -> Result<Arc<str>, Error> {
        let id = match instance {
            None => self
                .members
                .get_key_value(member_id)
                .map(|(id, _)| id.clone())
                .ok_or_else(|| self.unknown(member_id))?,
            Some(instance) => {
                let id = self
                    .instances
                    .get(instance)
                    .cloned()
                    .ok_or_else(|| self.unknown(member_id))?;
                if *id != *member_id {
                    return Err(Error::FencedInstanceId {
                        group: self.id.to_string(),
                        member: member_id.to_string(),
                        instance: instance.to_string(),
                        current: id.to_string(),
                    });
                }
                id
            }
        };
        match self.members.get(&id) {
            Some(m) if m.classic.is_some() => Ok(id),
            _ => Err(self.unknown(member_id)),
        }
    }

    fn illegal_generation(&self, generation: Option<Generation>, epoch: i32) -> Error {
        Error::IllegalGeneration {
            group: self.id.to_string(),
            requested: generation,
            current: Generation::new(u64::try_from(epoch).unwrap_or(0)),
        }
    }

    /// Kafka's `throwIfGenerationIdUnmatched`: a classic member's generation is its epoch.
    fn check_generation(&self, generation: Option<Generation>, epoch: i32) -> Result<(), Error> {
        if generation.map(|g| g.get()) == u64::try_from(epoch).ok() {
            Ok(())
        } else {
            Err(self.illegal_generation(generation, epoch))
        }
    }

    fn rebalance_in_progress(&self) -> Error {
        Error::RebalanceInProgress {
            group: self.id.to_string(),
            state: self.state(),
        }
    }

    /// Kafka's `scheduleConsumerGroupJoinTimeoutIfAbsent`.
    fn arm_join_timeout(&mut self, id: &Arc<str>, now: u64) {
        if let Some(m) = self.members.get_mut(id) {
            let timeout = m.rebalance_timeout_ms;
            if let Some(c) = m.classic.as_mut() {
                c.join_deadline.get_or_insert(now.saturating_add(timeout));
            }
        }
    }

    /// Kafka's `ConsumerGroup.waitingOnUnreleasedPartition`: the member waits for a
    /// partition of its target that another member still holds.
    fn waiting_on_unreleased(&self, id: &Arc<str>, m: &Member) -> bool {
        m.state == MemberState::UnreleasedPartitions
            && m.target
                .iter()
                .any(|tp| !m.assigned.contains(tp) && self.owners.get(tp).is_some_and(|o| o != id))
    }

    /// Kafka's `classicGroupJoinToConsumerGroup`: a JoinGroup of a member speaking the classic
    /// protocol to this group (which has members). Answered at once: the member's epoch as
    /// the generation, its current assignment to come with its SyncGroup.
    ///
    /// Errors: `GROUP_MAX_SIZE_REACHED`, `INCONSISTENT_GROUP_PROTOCOL` (not protocol type
    /// `consumer`, or no protocol every classic member supports), `MEMBER_ID_REQUIRED`,
    /// `UNKNOWN_MEMBER_ID`/`FENCED_INSTANCE_ID` never (a classic join takes an instance id
    /// over), `UNKNOWN_SERVER_ERROR`-class `INVALID_REQUEST` for a subscription that is not
    /// the embedded consumer protocol (Kafka: an `IllegalStateException`), `ASSIGNOR_FAILED`.
    pub(crate) fn classic_join(
        &mut self,
        req: &JoinGroupRequest,
        ctx: &mut Ctx<'_>,
    ) -> (Result<JoinGroupResponse, Error>, Outcome) {
        self.group_epoch = epoch_of(*ctx.generation);
        let mut outcome = Outcome {
            membership_changed: false,
            deadline: None,
        };
        let result = self.classic_join_inner(req, ctx, &mut outcome);
        (result, outcome)
    }

    fn classic_join_inner(
        &mut self,
        req: &JoinGroupRequest,
        ctx: &mut Ctx<'_>,
        outcome: &mut Outcome,
    ) -> Result<JoinGroupResponse, Error> {
        let unknown = req.member_id.is_empty();
        let member_id: Arc<str> = if unknown {
            Arc::from(ctx.ids.member_id(&req.client_id))
        } else {
            Arc::from(req.member_id.as_str())
        };
        let max = ctx.consumer.max_size;
        if self.members.len() >= max as usize && !self.members.contains_key(&member_id) {
            return Err(Error::GroupMaxSizeReached {
                group: self.id.to_string(),
                max,
            });
        }
        if !self.supports_classic(&req.protocol_type, &req.protocols) {
            return Err(Error::InconsistentGroupProtocol {
                group: self.id.to_string(),
                member: member_id.to_string(),
                offered: req
                    .protocols
                    .iter()
                    .map(|p| format!("{}/{}", req.protocol_type, p.name))
                    .collect(),
                shared: Vec::new(),
            });
        }
        if unknown && req.require_known_member_id && req.group_instance_id.is_none() {
            return Err(Error::MemberIdRequired {
                group: self.id.to_string(),
                member_id: member_id.to_string(),
            });
        }
        let Some(first) = req.protocols.first() else {
            return Err(self.unknown(&member_id));
        };
        let sub =
            embedded::decode_subscription(&first.metadata).map_err(|_| Error::InvalidRequest {
                reason: format!(
                    "Malformed embedded consumer protocol in the subscription of member \
                     {member_id}."
                ),
            })?;
        // Get or create the member; a static member takes its instance id over.
        let found = match req.group_instance_id.as_deref() {
            None => {
                if self.members.contains_key(&member_id) {
                    Found::Existing(member_id.clone())
                } else {
                    Found::New(member_id.clone())
                }
            }
            Some(instance) => match self.instances.get(instance) {
                None => {
                    if self.members.contains_key(&member_id) {
                        Found::Existing(member_id.clone())
                    } else {
                        Found::New(member_id.clone())
                    }
                }
                Some(old) if *old == member_id => Found::Existing(member_id.clone()),
                Some(old) => Found::Replaces {
                    new: member_id.clone(),
                    old: old.clone(),
                },
            },
        };
        // Kafka's `validateOnlineDowngradeWithReplacedMemberId`: this classic static member
        // takes the place of the group's last consumer-protocol member.
        let downgrade_after = req
            .group_instance_id
            .as_deref()
            .and_then(|i| self.instances.get(i))
            .is_some_and(|holder| self.downgrade_replacing_allowed(holder, ctx));
        let old = match &found {
            Found::Existing(id) => self.members.get(id),
            Found::Replaces { old, .. } => self.members.get(old),
            Found::New(_) => None,
        };
        let names = topic_set(&sub.topics);
        let names_changed = old.is_none_or(|m| m.names != names);
        let bump = ctx.generation.get() == 0 || names_changed || self.metadata_changed(ctx);
        let assigns = bump || self.group_epoch > self.target_epoch;
        let backup = assigns.then(|| (self.clone(), *ctx.generation));
        // The member as a consumer-protocol heartbeat would leave it, then its classic part.
        let as_heartbeat = ConsumerGroupHeartbeatRequest {
            group_id: self.id.to_string(),
            member_id: member_id.to_string(),
            member_epoch: 0,
            instance_id: req.group_instance_id.clone(),
            rack_id: sub.rack.clone(),
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            subscribed_topic_names: None,
            subscribed_topic_regex: None,
            server_assignor: None,
            topic_partitions: None,
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
        };
        self.apply_member(&found, &as_heartbeat, ctx.now, ctx);
        let session_ms = u64::try_from(req.session_timeout_ms).unwrap_or(0);
        if let Some(m) = self.members.get_mut(&member_id) {
            let (join_deadline, sync_deadline) = m
                .classic
                .as_ref()
                .map_or((None, None), |c| (c.join_deadline, c.sync_deadline));
            m.classic = Some(ClassicMeta {
                session_timeout_ms: session_ms,
                protocols: req.protocols.clone(),
                join_deadline,
                sync_deadline,
            });
        }
        outcome.membership_changed = matches!(found, Found::New(_) | Found::Replaces { .. });
        let mut subscription_changed = false;
        if names_changed {
            subscription_changed = self.subscribe(&member_id, Some(names), None, None);
        }
        if bump {
            let refreshed = self.refresh_metadata(ctx);
            if ctx.generation.get() == 0 || subscription_changed || refreshed {
                *ctx.generation = ctx.generation.next();
                self.group_epoch = epoch_of(*ctx.generation);
                info!(
                    group = &*self.id,
                    epoch = self.group_epoch,
                    "bumped group epoch"
                );
            }
        }
        if self.group_epoch > self.target_epoch {
            if let Err(e) = self.compute_target(ctx) {
                if let Some((group, generation)) = backup {
                    *self = group;
                    *ctx.generation = generation;
                }
                outcome.membership_changed = false;
                return Err(e);
            }
        }
        // Reconcile with what the member says it owns (its subscription's owned partitions).
        self.reconcile(&member_id, Some(&sub.owned), ctx.now);
        let Some(m) = self.members.get_mut(&member_id) else {
            return Err(self.unknown(&member_id));
        };
        // A classic member is fenced by its join and sync timeouts, not a revocation timer.
        m.revocation_deadline = None;
        m.session_deadline = ctx.now.saturating_add(session_ms);
        let rebalance_ms = m.rebalance_timeout_ms;
        if let Some(c) = m.classic.as_mut() {
            c.join_deadline = None;
            c.sync_deadline = Some(ctx.now.saturating_add(rebalance_ms));
        }
        outcome.deadline = Some(m.deadline());
        let epoch = m.epoch;
        self.record_due = true;
        if downgrade_after {
            // The classic group of every member, this one with the replaced member's
            // assignment, Stable: no rebalance (Kafka's `convertToClassicGroup` with a
            // joining member).
            self.downgrade = Some((self.migrating_members(""), false));
            outcome.membership_changed = true;
        }
        Ok(JoinGroupResponse {
            member_id: member_id.to_string(),
            generation: Generation::new(u64::try_from(epoch).unwrap_or(0)),
            protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_string()),
            protocol_name: Some(first.name.clone()),
            leader: String::new(),
            skip_assignment: false,
            members: Vec::new(),
        })
    }

    /// Kafka's `classicGroupSyncToConsumerGroup`: a classic member's SyncGroup answers its
    /// current assignment at once, encoded at the version of its subscription.
    ///
    /// Errors: `UNKNOWN_MEMBER_ID` (not a member, or not of the classic protocol),
    /// `FENCED_INSTANCE_ID`, `ILLEGAL_GENERATION` (not its epoch), `INCONSISTENT_GROUP_PROTOCOL`
    /// (a protocol type or name other than the one its join was answered with),
    /// `REBALANCE_IN_PROGRESS` (the group epoch moved on: join again).
    pub(crate) fn classic_sync(
        &mut self,
        req: &SyncGroupRequest,
        ctx: &mut Ctx<'_>,
    ) -> Result<(SyncGroupResponse, u64), Error> {
        self.group_epoch = epoch_of(*ctx.generation);
        let id = self.classic_member(&req.member_id, req.group_instance_id.as_deref())?;
        let Some(m) = self.members.get(&id) else {
            return Err(self.unknown(&req.member_id));
        };
        self.check_generation(req.generation, m.epoch)?;
        let protocol = m
            .classic
            .as_ref()
            .and_then(|c| c.protocols.first())
            .map(|p| (p.name.clone(), embedded::version_of(&p.metadata)));
        let (name, version) = protocol.unwrap_or_default();
        let inconsistent = || Error::InconsistentGroupProtocol {
            group: self.id.to_string(),
            member: req.member_id.clone(),
            offered: req.protocol_name.iter().cloned().collect(),
            shared: vec![name.clone()],
        };
        if req
            .protocol_type
            .as_deref()
            .is_some_and(|t| t != CONSUMER_PROTOCOL_TYPE)
            || req.protocol_name.as_deref().is_some_and(|n| n != name)
        {
            return Err(inconsistent());
        }
        // Kafka's `throwIfRebalanceInProgress`.
        if self.group_epoch > m.epoch && m.state != MemberState::UnrevokedPartitions {
            self.arm_join_timeout(&id, ctx.now);
            return Err(self.rebalance_in_progress());
        }
        let assignment = embedded::encode_assignment(&m.assigned, version);
        let Some(m) = self.members.get_mut(&id) else {
            return Err(self.unknown(&req.member_id));
        };
        m.session_deadline = ctx
            .now
            .saturating_add(m.session_ms(self.session_timeout_ms));
        if let Some(c) = m.classic.as_mut() {
            c.sync_deadline = None;
        }
        let deadline = m.deadline();
        Ok((
            SyncGroupResponse {
                protocol_type: req.protocol_type.clone(),
                protocol_name: req.protocol_name.clone(),
                assignment: Arc::from(assignment),
            },
            deadline,
        ))
    }

    /// Kafka's `classicGroupHeartbeatToConsumerGroup`: renews the classic member's session;
    /// `REBALANCE_IN_PROGRESS` (and the join timeout started) when it must join again — the
    /// group epoch is ahead of its epoch, it must revoke partitions, or the partitions it
    /// waited for are free. Returns the member's earliest deadline.
    ///
    /// Errors: `UNKNOWN_MEMBER_ID`, `FENCED_INSTANCE_ID`, `ILLEGAL_GENERATION`,
    /// `REBALANCE_IN_PROGRESS`.
    pub(crate) fn classic_heartbeat(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: Option<Generation>,
        ctx: &mut Ctx<'_>,
    ) -> (Result<(), Error>, Option<u64>) {
        self.group_epoch = epoch_of(*ctx.generation);
        let id = match self.classic_member(member_id, instance) {
            Ok(id) => id,
            Err(e) => return (Err(e), None),
        };
        let Some(m) = self.members.get(&id) else {
            return (Err(self.unknown(member_id)), None);
        };
        if let Err(e) = self.check_generation(generation, m.epoch) {
            return (Err(e), None);
        }
        let rejoin = m.epoch < self.group_epoch
            || m.state == MemberState::UnrevokedPartitions
            || (m.state == MemberState::UnreleasedPartitions
                && !self.waiting_on_unreleased(&id, m));
        if rejoin {
            self.arm_join_timeout(&id, ctx.now);
        }
        let session = self.session_timeout_ms;
        let Some(m) = self.members.get_mut(&id) else {
            return (Err(self.unknown(member_id)), None);
        };
        m.session_deadline = ctx.now.saturating_add(m.session_ms(session));
        let deadline = Some(m.deadline());
        if rejoin {
            (Err(self.rebalance_in_progress()), deadline)
        } else {
            (Ok(()), deadline)
        }
    }

    /// Kafka's `classicGroupLeaveToConsumerGroup`: each member (by id, or by instance id for
    /// a static member) leaves; each removal bumps the group epoch. Per member:
    /// `UNKNOWN_MEMBER_ID` (not a member, or not of the classic protocol),
    /// `FENCED_INSTANCE_ID`.
    pub(crate) fn classic_leave(
        &mut self,
        members: &[LeavingMember],
        ctx: &mut Ctx<'_>,
    ) -> Vec<Result<(), Error>> {
        self.group_epoch = epoch_of(*ctx.generation);
        let mut results = Vec::with_capacity(members.len());
        let mut left = Vec::new();
        for leaving in members {
            let found = match leaving.group_instance_id.as_deref() {
                None => self.classic_member(&leaving.member_id, None),
                Some(instance) => match self.instances.get(instance).cloned() {
                    None => Err(self.unknown(&leaving.member_id)),
                    Some(id) if !leaving.member_id.is_empty() && *id != *leaving.member_id => {
                        Err(Error::FencedInstanceId {
                            group: self.id.to_string(),
                            member: leaving.member_id.clone(),
                            instance: instance.to_string(),
                            current: id.to_string(),
                        })
                    }
                    Some(id) => self.classic_member(&id, None),
                },
            };
            match found {
                Ok(id) => {
                    if self.remove_member_entry(&id).is_some() {
                        info!(
                            group = &*self.id,
                            member = &*id,
                            "classic member left the consumer group"
                        );
                        left.push(id);
                    }
                    results.push(Ok(()));
                }
                Err(e) => results.push(Err(e)),
            }
        }
        if !left.is_empty() {
            self.topic_partitions
                .retain(|t, _| self.subscribers.contains_key(t));
            self.record_due = true;
            *ctx.generation = ctx.generation.next();
            self.group_epoch = epoch_of(*ctx.generation);
        }
        results
    }

    /// The group's state, Kafka's way.
    pub(crate) fn consumer_state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.group_epoch > self.target_epoch {
            ConsumerGroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| m.state != MemberState::Stable || m.epoch != self.target_epoch)
        {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    /// ConsumerGroupDescribe's answer for this group.
    pub(crate) fn describe(&self, generation: Generation) -> ConsumerGroupDescription {
        let group_epoch = epoch_of(generation);
        ConsumerGroupDescription {
            group_id: self.id.to_string(),
            state: self.consumer_state(),
            group_epoch,
            assignment_epoch: self.target_epoch,
            assignor_name: self.assignor.clone().unwrap_or_default(),
            members: self
                .members
                .iter()
                .map(|(id, m)| ConsumerMemberDescription {
                    member_id: id.to_string(),
                    instance_id: m.instance_id.as_deref().map(str::to_string),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.epoch,
                    previous_member_epoch: m.previous_epoch,
                    state: m.state,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.names.iter().map(|t| t.to_string()).collect(),
                    subscribed_topic_regex: m.regex.as_deref().map(str::to_string),
                    assignment: m.assigned.iter().cloned().collect(),
                    partitions_pending_revocation: m.revoking.iter().cloned().collect(),
                    target_assignment: m.target.iter().cloned().collect(),
                    classic: m.classic.is_some(),
                })
                .collect(),
        }
    }

    /// Kafka's `ConsumerGroup.validateMemberEpoch` for a commit or a fetch: a classic
    /// member's wrong epoch is `ILLEGAL_GENERATION`, a consumer-protocol member's
    /// `STALE_MEMBER_EPOCH`.
    fn validate_epoch(&self, member_id: &str, epoch: i32) -> Result<(), Error> {
        let m = self
            .members
            .get(member_id)
            .ok_or_else(|| self.unknown(member_id))?;
        if epoch != m.epoch && m.classic.is_some() {
            let generation = u64::try_from(epoch).ok().map(Generation::new);
            return Err(self.illegal_generation(generation, m.epoch));
        }
        if epoch != m.epoch {
            return Err(Error::StaleMemberEpoch {
                group: self.id.to_string(),
                member: member_id.to_string(),
                received: epoch,
                expected: m.epoch,
            });
        }
        Ok(())
    }
}

impl Group for ConsumerGroup {
    fn kind(&self) -> GroupKind {
        GroupKind::Consumer
    }

    /// Kafka's consumer states mapped onto the shared [`GroupState`]: Assigning is
    /// `PreparingRebalance`, Reconciling `CompletingRebalance`
    /// ([`ConsumerGroups::describe`](super::ConsumerGroups::describe) has Kafka's names).
    fn state(&self) -> GroupState {
        match self.consumer_state() {
            ConsumerGroupState::Empty => GroupState::Empty,
            ConsumerGroupState::Assigning => GroupState::PreparingRebalance,
            ConsumerGroupState::Reconciling => GroupState::CompletingRebalance,
            ConsumerGroupState::Stable => GroupState::Stable,
        }
    }

    fn has_members(&self) -> bool {
        !self.members.is_empty()
    }

    fn member_count(&self) -> usize {
        self.members.len()
    }

    fn protocol_type(&self) -> &str {
        "consumer"
    }

    /// Kafka 4's `ConsumerGroup.validateOffsetCommit`: a commit without a member (epoch < 0)
    /// only while the group is Empty; a member's commit with its current epoch
    /// (`STALE_MEMBER_EPOCH` otherwise, `UNKNOWN_MEMBER` for an unknown member); a classic
    /// commit (a generation) from a member of this group is `UNSUPPORTED_VERSION`: it must
    /// use OffsetCommit v9.
    fn validate_offset_commit(
        &mut self,
        authority: &CommitAuthority,
        _partitions: &mut dyn Iterator<Item = &TopicPartition>,
        _ctx: &Ctx<'_>,
    ) -> Result<(), Error> {
        match authority {
            CommitAuthority::Plain => {
                if self.members.is_empty() {
                    Ok(())
                } else {
                    Err(self.unknown(""))
                }
            }
            CommitAuthority::Generation {
                generation,
                member_id,
                ..
            } => {
                if generation.is_none() && self.members.is_empty() {
                    return Ok(());
                }
                let Some(m) = self.members.get(member_id.as_str()) else {
                    return Err(self.unknown(member_id));
                };
                // A member of the classic protocol commits with its epoch as the generation
                // (`ILLEGAL_GENERATION` otherwise, Kafka's `validateMemberEpoch`).
                if m.classic.is_some() {
                    return self.check_generation(*generation, m.epoch);
                }
                Err(Error::UnsupportedVersion {
                    group: self.id.to_string(),
                    member: member_id.clone(),
                    reason: format!(
                        "OffsetCommit version 9 or above must be used by members using the \
                         modern group protocol: member {member_id} of group {} committed with \
                         a classic generation",
                        self.id
                    ),
                })
            }
            CommitAuthority::MemberEpoch {
                member_id,
                member_epoch,
            } => {
                if *member_epoch < 0 && self.members.is_empty() {
                    return Ok(());
                }
                self.validate_epoch(member_id, *member_epoch)
            }
        }
    }

    /// Kafka 4's `ConsumerGroup.validateOffsetFetch`: a tool (no member) may always read; a
    /// member only with its current epoch.
    fn validate_offset_fetch(&self, authority: &CommitAuthority) -> Result<(), Error> {
        match authority {
            CommitAuthority::MemberEpoch {
                member_id,
                member_epoch,
            } if !(member_id.is_empty() && *member_epoch < 0) => {
                self.validate_epoch(member_id, *member_epoch)
            }
            _ => Ok(()),
        }
    }

    /// Offsets of topics no member subscribes to may be deleted at any time.
    fn validate_offset_delete(&self, _group_id: &str) -> Result<(), Error> {
        Ok(())
    }

    fn is_subscribed_to(&self, topic: &str) -> bool {
        self.subscribers.contains_key(topic)
    }

    /// Kafka's `ConsumerGroup.offsetExpirationCondition`: each offset from its commit,
    /// those of subscribed topics never.
    fn offset_expiration(&self) -> OffsetExpiration {
        OffsetExpiration::SinceCommit
    }

    fn next_deadline(&self) -> Option<u64> {
        self.members.values().map(Member::deadline).min()
    }

    /// Removes the members whose session expired, and those still revoking at the epoch
    /// their rebalance timeout was set at once it passed; each removal bumps the group
    /// epoch (the next heartbeat computes the new target, as in Kafka).
    fn handle_due(&mut self, ctx: &mut Ctx<'_>) -> Vec<ExpiredMember> {
        self.group_epoch = epoch_of(*ctx.generation);
        let now = ctx.now;
        let due: Vec<(Arc<str>, &'static str)> = self
            .members
            .iter()
            .filter_map(|(id, m)| {
                let classic = m.classic.as_ref();
                if now >= m.session_deadline {
                    Some((id.clone(), "session expired"))
                } else if classic
                    .and_then(|c| c.join_deadline)
                    .is_some_and(|at| now >= at)
                {
                    Some((
                        id.clone(),
                        "the classic member failed to join within the rebalance timeout",
                    ))
                } else if classic
                    .and_then(|c| c.sync_deadline)
                    .is_some_and(|at| now >= at)
                {
                    Some((
                        id.clone(),
                        "the classic member failed to sync within the timeout",
                    ))
                } else if m.revocation_deadline.is_some_and(|(at, epoch)| {
                    now >= at && m.epoch == epoch && m.state == MemberState::UnrevokedPartitions
                }) {
                    Some((id.clone(), "did not revoke within its rebalance timeout"))
                } else {
                    None
                }
            })
            .collect();
        // A revocation deadline that passed without fencing (none should) must not keep the
        // group due forever.
        for m in self.members.values_mut() {
            if m.revocation_deadline.is_some_and(|(at, _)| now >= at) {
                m.revocation_deadline = None;
            }
        }
        let mut expired = Vec::with_capacity(due.len());
        for (id, why) in due {
            self.fence(&id, ctx, why);
            expired.push(ExpiredMember {
                group: self.id.to_string(),
                member: id.to_string(),
            });
        }
        expired
    }

    fn record(&self, generation: Generation, _assignors: &[Arc<dyn Assignor>]) -> GroupRecord {
        GroupRecord {
            group_id: self.id.to_string(),
            kind: GroupKind::Consumer,
            generation,
            state: self.state(),
            protocol_type: "consumer".to_string(),
            protocol: self.assignor.clone(),
            leader: None,
            members: self
                .members
                .iter()
                .map(|(id, m)| MemberRecord {
                    member_id: id.to_string(),
                    group_instance_id: m.instance_id.as_deref().map(str::to_string),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: m.session_ms(self.session_timeout_ms),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocols: m
                        .classic
                        .as_ref()
                        .map(|c| c.protocols.clone())
                        .unwrap_or_default(),
                    assignment: Opaque::from([]),
                    partitions: m.assigned.iter().cloned().collect(),
                    consumer: Some(ConsumerMemberRecord {
                        member_epoch: m.epoch,
                        previous_member_epoch: m.previous_epoch,
                        state: m.state.as_str().to_string(),
                        rack_id: m.rack_id.clone(),
                        server_assignor: m.server_assignor.clone(),
                        subscribed_topic_names: m.names.iter().map(|t| t.to_string()).collect(),
                        subscribed_topic_regex: m.regex.as_deref().map(str::to_string),
                        partitions_pending_revocation: m.revoking.iter().cloned().collect(),
                        target_assignment: m.target.iter().cloned().collect(),
                        target_assignment_epoch: self.target_epoch,
                    }),
                })
                .collect(),
        }
    }

    fn take_record_due(&mut self) -> bool {
        std::mem::take(&mut self.record_due)
    }

    /// Kafka's `convertToClassicGroup` after the last consumer-protocol member was fenced:
    /// the classic group of the remaining members, rebalancing so that they join again.
    fn take_replacement(&mut self, ctx: &mut Ctx<'_>) -> Option<Box<dyn Group>> {
        let (members, rebalance) = self.downgrade.take()?;
        info!(
            group = &*self.id,
            members = members.len(),
            "consumer group converted to a classic group: its last consumer-protocol member left"
        );
        Some(Box::new(ClassicGroup::from_consumer(
            self.id.clone(),
            members,
            ctx,
            rebalance.then_some("the consumer group became a classic group"),
        )))
    }

    fn mark_record_due(&mut self) {
        self.record_due = true;
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
