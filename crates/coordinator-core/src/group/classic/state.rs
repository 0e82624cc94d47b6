//! Kafka's classic group: JoinGroup barrier, leader, SyncGroup, static members, timers.
//!
//! The state machine of Apache Kafka's `ClassicGroup` and `GroupMetadataManager` (4.x),
//! without I/O: deadlines are fields that the coordinator's timer heap fires, and waiting
//! requests are `oneshot` senders answered when their moment comes. Everything here runs
//! under the group's state lock; whatever installs a generation runs under its commit gate
//! too (the caller holds it).
//!
//! ```text
//!              join (first member)                 all members joined, or
//!   Empty ───────────────────────► Preparing ────── rebalance timeout ──────► Completing
//!     ▲                            Rebalance   (generation + 1, leader,        Rebalance
//!     │                              ▲   ▲      protocol chosen)                 │
//!     │ last member leaves           │   │                                       │ leader's
//!     │ (barrier completes empty)    │   └──── join with new metadata, leave, ───┤ SyncGroup
//!     └──────────────────────────────┤         expiry, sync timeout              ▼
//!                                    └────────────────────────────────────── Stable
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use tokio::sync::oneshot;
use tracing::info;

use std::any::Any;

use super::protocol::{
    ClassicGroupDescription, ClassicMemberDescription, ClassicProtocol, JoinGroupRequest,
    JoinGroupResponse, JoinedMember, LeavingMember, Opaque, SyncAssignment, SyncGroupRequest,
    SyncGroupResponse,
};
use crate::coordinator::ExpiredMember;
use crate::error::{Error, StorageError};
use crate::group::{
    CommitAuthority, Ctx, Group, GroupKind, GroupRecord, MemberRecord, OffsetExpiration,
};
use crate::ports::Assignor;
use crate::types::{Generation, GroupState, TopicPartition};

/// What a parked JoinGroup is eventually answered with.
pub(crate) type JoinReply = Result<JoinGroupResponse, Error>;
/// What a parked SyncGroup is eventually answered with.
pub(crate) type SyncReply = Result<SyncGroupResponse, Error>;

/// An answer now, or later through the channel.
pub(crate) enum Answer<T> {
    Now(T),
    Later(oneshot::Receiver<T>),
}

/// The times the group's timers fire at.
#[derive(Debug, Clone, Copy)]
struct JoinTimer {
    at: u64,
    /// `(delay, remaining)` of the initial rebalance delay (Kafka's `InitialDelayedJoin`).
    initial: Option<(u64, u64)>,
}

#[derive(Debug)]
struct Member {
    id: Arc<str>,
    instance_id: Option<Arc<str>>,
    client_id: String,
    client_host: String,
    session_timeout_ms: u64,
    rebalance_timeout_ms: u64,
    protocol_type: String,
    protocols: Vec<ClassicProtocol>,
    assignment: Opaque,
    partitions: Option<Vec<TopicPartition>>,
    join_waiter: Option<oneshot::Sender<JoinReply>>,
    sync_waiter: Option<oneshot::Sender<SyncReply>>,
    /// Joined but has not been through a completed join phase yet.
    is_new: bool,
    /// The member's session has expired when `now > deadline_ms` (unless it is waiting in a
    /// JoinGroup or SyncGroup, which keeps it alive, as in Kafka).
    deadline_ms: u64,
}

impl Member {
    fn awaiting_join(&self) -> bool {
        self.join_waiter.is_some()
    }

    /// Kafka's `hasSatisfiedHeartbeat`: a member parked in a join or a sync is alive,
    /// unless it is new (then it has `new_member_join_timeout_ms`).
    fn satisfied(&self) -> bool {
        !self.is_new && (self.join_waiter.is_some() || self.sync_waiter.is_some())
    }

    fn expiry_deadline(&self) -> Option<u64> {
        (!self.satisfied()).then_some(self.deadline_ms)
    }

    /// Whether the member's protocols are exactly these (names and metadata, in order).
    fn matches(&self, protocols: &[ClassicProtocol]) -> bool {
        self.protocols.len() == protocols.len()
            && self
                .protocols
                .iter()
                .zip(protocols)
                .all(|(a, b)| a.name == b.name && a.metadata == b.metadata)
    }

    fn metadata(&self, protocol: &str) -> Opaque {
        self.protocols
            .iter()
            .find(|p| p.name == protocol)
            .map(|p| p.metadata.clone())
            .unwrap_or_else(empty)
    }

    fn topics(&self, protocol: &str) -> Option<&[String]> {
        self.protocols
            .iter()
            .find(|p| p.name == protocol)
            .and_then(|p| p.topics.as_deref())
    }
}

/// The protocol type of consumer groups.
pub(crate) const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

fn empty() -> Opaque {
    Arc::from(&[][..])
}

/// A classic group's state.
#[derive(Debug)]
pub(crate) struct ClassicGroup {
    id: Arc<str>,
    pub(crate) state: GroupState,
    previous_state: GroupState,
    pub(crate) protocol_type: Option<String>,
    pub(crate) protocol_name: Option<String>,
    leader: Option<Arc<str>>,
    /// Members by id (Kafka keeps a hash map; the order here makes answers deterministic).
    members: BTreeMap<Arc<str>, Member>,
    /// Instance id → member id of static members.
    static_members: HashMap<Arc<str>, Arc<str>>,
    /// Ids handed out with MEMBER_ID_REQUIRED, with the time their session runs out.
    pending: BTreeMap<Arc<str>, u64>,
    /// Members of the current generation that have not sent their SyncGroup yet.
    pending_sync: BTreeSet<Arc<str>>,
    /// Protocol name → how many members support it.
    supported: HashMap<String, u32>,
    new_member_added: bool,
    join_timer: Option<JoinTimer>,
    /// `(at, generation)`: members of that generation that have not synced by then go.
    sync_timer: Option<(u64, Generation)>,
    /// Over a store that keeps group records: the leader's assignment, installed once the
    /// group's record is written (Kafka's `storeGroup` callback), with its stage number.
    staged: Option<(u64, Vec<SyncAssignment>)>,
    /// The number of the last staged assignment.
    stage_seq: u64,
    /// The group became Empty in a new generation: its record must be written.
    record_due: bool,
}

/// What `handle_due` removed.
pub(crate) type Expired = Vec<ExpiredMember>;

/// One member of a classic group as a conversion between the classic and the consumer
/// protocol carries it over: the fields of Kafka's `ClassicGroupMember` that
/// `ConsumerGroup.fromClassicGroup` reads and `ClassicGroup.fromConsumerGroup` sets.
#[derive(Clone, Debug)]
pub(crate) struct MigratingMember {
    pub(crate) id: Arc<str>,
    pub(crate) instance_id: Option<Arc<str>>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) session_timeout_ms: u64,
    pub(crate) rebalance_timeout_ms: u64,
    /// The protocols it supports, in its order, with its metadata for each.
    pub(crate) protocols: Vec<ClassicProtocol>,
    /// Its assignment (for the consumer protocol: a ConsumerProtocolAssignment).
    pub(crate) assignment: Opaque,
    /// The partitions of that assignment, where known.
    pub(crate) partitions: Option<Vec<TopicPartition>>,
}

impl ClassicGroup {
    pub(crate) fn new(id: Arc<str>) -> Self {
        ClassicGroup {
            id,
            state: GroupState::Empty,
            previous_state: GroupState::Dead,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending: BTreeMap::new(),
            pending_sync: BTreeSet::new(),
            supported: HashMap::new(),
            new_member_added: false,
            join_timer: None,
            sync_timer: None,
            staged: None,
            stage_seq: 0,
            record_due: false,
        }
    }

    /// The group a coordinator loads from its durable record: Stable with the record's
    /// members, leader, protocol and assignments if it has members (Empty otherwise), every
    /// member's session counting from `now` (Kafka's `ClassicGroup.fromRecord`).
    pub(crate) fn from_record(record: &GroupRecord, now: u64) -> Self {
        let mut group = ClassicGroup::new(Arc::from(record.group_id.as_str()));
        group.protocol_type = (!record.protocol_type.is_empty() || !record.members.is_empty())
            .then(|| record.protocol_type.clone());
        for m in &record.members {
            let id: Arc<str> = Arc::from(m.member_id.as_str());
            let member = Member {
                id: id.clone(),
                instance_id: m.group_instance_id.as_deref().map(Arc::from),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocol_type: record.protocol_type.clone(),
                protocols: m.protocols.clone(),
                assignment: m.assignment.clone(),
                partitions: Some(m.partitions.clone()),
                join_waiter: None,
                sync_waiter: None,
                is_new: false,
                deadline_ms: now.saturating_add(m.session_timeout_ms),
            };
            group.add(member);
        }
        if group.members.is_empty() {
            group.protocol_name = None;
            group.leader = None;
        } else {
            group.protocol_name = record.protocol.clone();
            group.leader = record
                .leader
                .as_deref()
                .filter(|l| group.members.contains_key(*l))
                .map(Arc::from)
                .or_else(|| group.members.keys().next().cloned());
            group.previous_state = GroupState::Empty;
            group.state = GroupState::Stable;
        }
        group
    }

    /// The members, as an upgrade to the consumer protocol carries them over.
    pub(crate) fn migrating_members(&self) -> Vec<MigratingMember> {
        self.members
            .values()
            .map(|m| MigratingMember {
                id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocols: m.protocols.clone(),
                assignment: m.assignment.clone(),
                partitions: m.partitions.clone(),
            })
            .collect()
    }

    /// How many members the group has.
    pub(crate) fn member_count(&self) -> usize {
        self.members.len()
    }

    /// Kafka's `ClassicGroup.fromConsumerGroup`, then `prepareRebalance` with `rebalance`'s
    /// reason: the classic group a consumer-protocol group whose members all speak the
    /// classic protocol becomes (protocol type `consumer`, the protocol the members share,
    /// each member's assignment as the consumer group's target gave it), Stable, or
    /// rebalancing at once so that every member joins again. Each session counts from
    /// `ctx.now`.
    pub(crate) fn from_consumer(
        id: Arc<str>,
        members: Vec<MigratingMember>,
        ctx: &mut Ctx<'_>,
        rebalance: Option<&str>,
    ) -> Self {
        let mut group = ClassicGroup::new(id);
        group.protocol_type = Some(CONSUMER_PROTOCOL_TYPE.to_string());
        for m in members {
            group.add(Member {
                id: m.id,
                instance_id: m.instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocol_type: CONSUMER_PROTOCOL_TYPE.to_string(),
                protocols: m.protocols,
                assignment: m.assignment,
                partitions: m.partitions,
                join_waiter: None,
                sync_waiter: None,
                is_new: false,
                deadline_ms: ctx.now.saturating_add(m.session_timeout_ms),
            });
        }
        group.record_due = true;
        if group.members.is_empty() {
            return group;
        }
        group.protocol_name = group.select_protocol();
        group.previous_state = GroupState::Empty;
        group.state = GroupState::Stable;
        if let Some(why) = rebalance {
            group.prepare_rebalance(ctx, why);
        }
        group
    }

    /// The number of the assignment staged by the last leader's SyncGroup, while it waits
    /// for the group's record to be written.
    pub(crate) fn staged(&self) -> Option<u64> {
        self.staged.as_ref().map(|(seq, _)| *seq)
    }

    /// The record the group will have once stage `seq` is installed (Stable, with the
    /// leader's assignments), or `None` if that stage is no longer the group's.
    pub(crate) fn staged_record(&self, seq: u64, generation: Generation) -> Option<GroupRecord> {
        let (_, assignments) = self.staged.as_ref().filter(|(s, _)| *s == seq)?;
        let mut record = self.record(generation, &[]);
        for m in &mut record.members {
            let given = assignments.iter().find(|a| a.member_id == m.member_id);
            m.assignment = given.map_or_else(empty, |a| a.assignment.clone());
            m.partitions = given.and_then(|a| a.partitions.clone()).unwrap_or_default();
        }
        record.state = GroupState::Stable;
        Some(record)
    }

    /// Ends stage `seq` once the store answered its record's write: installs the assignment
    /// on success; on failure every member waiting in a SyncGroup hears the store's error
    /// and the group rebalances (Kafka's `resetAndPropagateAssignmentWithError`, then
    /// `maybePrepareRebalanceOrCompleteJoin`). Nothing happens if the stage was superseded.
    pub(crate) fn finish_staged(
        &mut self,
        seq: u64,
        written: Result<(), &StorageError>,
        ctx: &mut Ctx<'_>,
    ) {
        if self.staged() != Some(seq) || self.state != GroupState::CompletingRebalance {
            return;
        }
        let Some((_, assignments)) = self.staged.take() else {
            return;
        };
        match written {
            Ok(()) => self.install(&assignments, ctx),
            Err(e) => {
                for m in self.members.values_mut() {
                    m.assignment = empty();
                    m.partitions = None;
                    if let Some(tx) = m.sync_waiter.take() {
                        let _ = tx.send(Err(Error::Storage(StorageError::new(
                            e.kind(),
                            e.message().to_string(),
                        ))));
                        m.deadline_ms = ctx.now.saturating_add(m.session_timeout_ms);
                    }
                }
                self.maybe_prepare_rebalance_or_complete_join(
                    ctx,
                    "the group's record could not be stored",
                );
            }
        }
    }

    /// The earliest time anything of this group is due.
    fn earliest_deadline(&self) -> Option<u64> {
        let members = self
            .members
            .values()
            .filter_map(|m| m.expiry_deadline())
            .map(|d| d.saturating_add(1));
        let pending = self.pending.values().map(|d| d.saturating_add(1));
        members
            .chain(pending)
            .chain(self.join_timer.map(|t| t.at))
            .chain(self.sync_timer.map(|(at, _)| at))
            .min()
    }

    fn rebalance_timeout_ms(&self) -> u64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    fn awaiting_join(&self) -> usize {
        self.members.values().filter(|m| m.awaiting_join()).count()
    }

    fn all_joined(&self) -> bool {
        self.awaiting_join() == self.members.len() && self.pending.is_empty()
    }

    fn can_rebalance(&self) -> bool {
        matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty
        )
    }

    /// Kafka's `supportsProtocols`.
    fn supports(&self, protocol_type: &str, protocols: &[ClassicProtocol]) -> bool {
        if protocol_type.is_empty() || protocols.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|p| {
                self.supported.get(&p.name).copied().unwrap_or(0) as usize == self.members.len()
            })
    }

    fn inconsistent(&self, req: &JoinGroupRequest) -> Error {
        let mut shared: Vec<String> = self
            .supported
            .iter()
            .filter(|(_, &n)| n as usize == self.members.len() && n > 0)
            .map(|(name, _)| name.clone())
            .collect();
        shared.sort_unstable();
        Error::InconsistentGroupProtocol {
            group: self.id.to_string(),
            member: req.member_id.clone(),
            offered: req
                .protocols
                .iter()
                .map(|p| format!("{}/{}", req.protocol_type, p.name))
                .collect(),
            shared: shared
                .into_iter()
                .map(|n| format!("{}/{n}", self.protocol_type.as_deref().unwrap_or("")))
                .collect(),
        }
    }

    fn count_protocols(&mut self, protocols: &[ClassicProtocol], add: bool) {
        for p in protocols {
            let n = self.supported.entry(p.name.clone()).or_insert(0);
            if add {
                *n += 1;
            } else {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.supported.remove(&p.name);
                }
            }
        }
    }

    /// Kafka's `validateMember`: the instance id, if given, must map to this member id.
    fn validate_member(&self, member_id: &str, instance: Option<&str>) -> Result<(), Error> {
        if let Some(instance) = instance {
            match self.static_members.get(instance) {
                None => return Err(self.unknown(member_id)),
                Some(current) if **current != *member_id => {
                    return Err(Error::FencedInstanceId {
                        group: self.id.to_string(),
                        member: member_id.to_string(),
                        instance: instance.to_string(),
                        current: current.to_string(),
                    })
                }
                Some(_) => {}
            }
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(self.unknown(member_id))
        }
    }

    /// `ILLEGAL_GENERATION` unless `generation` is the group's.
    fn check_generation(&self, generation: Option<Generation>, ctx: &Ctx<'_>) -> Result<(), Error> {
        if generation == Some(*ctx.generation) {
            Ok(())
        } else {
            Err(Error::IllegalGeneration {
                group: self.id.to_string(),
                requested: generation,
                current: *ctx.generation,
            })
        }
    }

    fn unknown(&self, member_id: &str) -> Error {
        Error::UnknownMember {
            group: self.id.to_string(),
            member: member_id.to_string(),
        }
    }

    // ------------------------------------------------------------------------ join

    /// JoinGroup, after the coordinator checked the group id and session timeout.
    pub(crate) fn join(&mut self, req: &JoinGroupRequest, ctx: &mut Ctx<'_>) -> Answer<JoinReply> {
        if !self.accepts_joining_member(&req.member_id, ctx.settings.max_size) {
            self.remove_member(&req.member_id);
            return Answer::Now(Err(Error::GroupMaxSizeReached {
                group: self.id.to_string(),
                max: ctx.settings.max_size,
            }));
        }
        if req.member_id.is_empty() {
            self.join_new_member(req, ctx)
        } else {
            self.join_existing_member(req, ctx)
        }
    }

    /// Kafka's `acceptJoiningMember` (`group.max.size`).
    fn accepts_joining_member(&self, member_id: &str, max: u32) -> bool {
        let max = max as usize;
        match self.state {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                self.members
                    .get(member_id)
                    .is_some_and(Member::awaiting_join)
                    || self.awaiting_join() < max
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.members.contains_key(member_id) || self.members.len() < max
            }
        }
    }

    fn join_new_member(&mut self, req: &JoinGroupRequest, ctx: &mut Ctx<'_>) -> Answer<JoinReply> {
        if !self.supports(&req.protocol_type, &req.protocols) {
            return Answer::Now(Err(self.inconsistent(req)));
        }
        match req.group_instance_id.as_deref() {
            Some(instance) => {
                let member_id: Arc<str> = Arc::from(ctx.ids.member_id(instance));
                match self.static_members.get(instance).cloned() {
                    Some(old) => self.replace_static_member(req, old, member_id, ctx),
                    None => self.add_member_then_rebalance_or_complete_join(req, member_id, ctx),
                }
            }
            None => {
                let prefix = if req.client_id.is_empty() {
                    "consumer"
                } else {
                    &req.client_id
                };
                let member_id: Arc<str> = Arc::from(ctx.ids.member_id(prefix));
                if req.require_known_member_id {
                    // The member is pending until it joins again with this id, or its
                    // session timeout passes.
                    let deadline = ctx.now.saturating_add(non_negative(req.session_timeout_ms));
                    self.pending.insert(member_id.clone(), deadline);
                    info!(
                        group = &*self.id,
                        member = &*member_id,
                        "new member must join again with its id (MEMBER_ID_REQUIRED)"
                    );
                    Answer::Now(Err(Error::MemberIdRequired {
                        group: self.id.to_string(),
                        member_id: member_id.to_string(),
                    }))
                } else {
                    self.add_member_then_rebalance_or_complete_join(req, member_id, ctx)
                }
            }
        }
    }

    fn join_existing_member(
        &mut self,
        req: &JoinGroupRequest,
        ctx: &mut Ctx<'_>,
    ) -> Answer<JoinReply> {
        if !self.supports(&req.protocol_type, &req.protocols) {
            return Answer::Now(Err(self.inconsistent(req)));
        }
        if self.pending.contains_key(req.member_id.as_str()) {
            let id: Arc<str> = Arc::from(req.member_id.as_str());
            return self.add_member_then_rebalance_or_complete_join(req, id, ctx);
        }
        if let Err(e) = self.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
            return Answer::Now(Err(e));
        }
        let id: Arc<str> = Arc::from(req.member_id.as_str());
        match self.state {
            GroupState::PreparingRebalance => {
                let rx = self.update_member(&id, req);
                self.maybe_complete_join_phase(ctx);
                Answer::Later(rx)
            }
            GroupState::CompletingRebalance => {
                let unchanged = self
                    .members
                    .get(&id)
                    .is_some_and(|m| m.matches(&req.protocols));
                if unchanged {
                    Answer::Now(Ok(self.join_response(&id, *ctx.generation, false)))
                } else {
                    let rx = self.update_member(&id, req);
                    self.prepare_rebalance(ctx, "a member joined again with new metadata");
                    Answer::Later(rx)
                }
            }
            GroupState::Stable => {
                let is_leader = self.leader.as_deref() == Some(&*id);
                let unchanged = self
                    .members
                    .get(&id)
                    .is_some_and(|m| m.matches(&req.protocols));
                if is_leader || !unchanged {
                    let rx = self.update_member(&id, req);
                    let why = if is_leader {
                        "the leader joined again"
                    } else {
                        "a member joined again with new metadata"
                    };
                    self.prepare_rebalance(ctx, why);
                    Answer::Later(rx)
                } else {
                    Answer::Now(Ok(self.join_response(&id, *ctx.generation, false)))
                }
            }
            GroupState::Empty | GroupState::Dead => Answer::Now(Err(self.unknown(&req.member_id))),
        }
    }

    /// The answer a member gets when the join phase completes (or at once, when nothing
    /// changes): the leader gets every member's metadata.
    fn join_response(&self, id: &str, generation: Generation, skip: bool) -> JoinGroupResponse {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let is_leader = self.leader.as_deref() == Some(id);
        let members = if is_leader {
            self.members
                .values()
                .map(|m| JoinedMember {
                    member_id: m.id.to_string(),
                    group_instance_id: m.instance_id.as_deref().map(str::to_string),
                    metadata: m.metadata(&protocol),
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinGroupResponse {
            member_id: id.to_string(),
            generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.as_deref().unwrap_or("").to_string(),
            skip_assignment: skip,
            members,
        }
    }

    /// Replaces a known member's protocols and timeouts, and parks its join. A join already
    /// parked for it is superseded (its caller is told to join again).
    fn update_member(
        &mut self,
        id: &Arc<str>,
        req: &JoinGroupRequest,
    ) -> oneshot::Receiver<JoinReply> {
        let (tx, rx) = oneshot::channel();
        let old_protocols = match self.members.get_mut(id) {
            Some(m) => {
                m.rebalance_timeout_ms = non_negative(req.rebalance_timeout_ms);
                m.session_timeout_ms = non_negative(req.session_timeout_ms);
                if let Some(old) = m.join_waiter.replace(tx) {
                    let _ = old.send(Err(Error::RebalanceInProgress {
                        group: self.id.to_string(),
                        state: self.state,
                    }));
                }
                std::mem::replace(&mut m.protocols, req.protocols.clone())
            }
            None => return rx,
        };
        self.count_protocols(&old_protocols, false);
        self.count_protocols(&req.protocols, true);
        rx
    }

    fn add_member_then_rebalance_or_complete_join(
        &mut self,
        req: &JoinGroupRequest,
        id: Arc<str>,
        ctx: &mut Ctx<'_>,
    ) -> Answer<JoinReply> {
        let (tx, rx) = oneshot::channel();
        if self.state == GroupState::PreparingRebalance && self.previous_state == GroupState::Empty
        {
            self.new_member_added = true;
        }
        let member = Member {
            id: id.clone(),
            instance_id: req.group_instance_id.as_deref().map(Arc::from),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            session_timeout_ms: non_negative(req.session_timeout_ms),
            rebalance_timeout_ms: non_negative(req.rebalance_timeout_ms),
            protocol_type: req.protocol_type.clone(),
            protocols: req.protocols.clone(),
            assignment: empty(),
            partitions: None,
            join_waiter: Some(tx),
            sync_waiter: None,
            is_new: true,
            deadline_ms: ctx
                .now
                .saturating_add(ctx.settings.new_member_join_timeout_ms),
        };
        self.add(member);
        info!(
            group = &*self.id,
            member = &*id,
            instance = req.group_instance_id.as_deref().unwrap_or(""),
            client = %req.client_id,
            reason = req.reason.as_deref().unwrap_or(""),
            "member joined"
        );
        self.maybe_prepare_rebalance_or_complete_join(ctx, "a new member joined");
        Answer::Later(rx)
    }

    fn add(&mut self, member: Member) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member.id.clone());
        }
        self.count_protocols(&member.protocols, true);
        if let Some(instance) = &member.instance_id {
            self.static_members
                .insert(instance.clone(), member.id.clone());
        }
        self.pending.remove(&member.id);
        self.members.insert(member.id.clone(), member);
    }

    /// Removes a member (answering nothing); returns it.
    fn remove_member(&mut self, id: &str) -> Option<Member> {
        let member = self.members.remove(id)?;
        self.count_protocols(&member.protocols, false);
        if let Some(instance) = &member.instance_id {
            if self
                .static_members
                .get(instance)
                .is_some_and(|m| **m == *id)
            {
                self.static_members.remove(instance);
            }
        }
        self.pending_sync.remove(id);
        if self.leader.as_deref() == Some(id) {
            self.leader = self.members.keys().next().cloned();
        }
        Some(member)
    }

    /// Removes a member and tells its parked requests it is gone.
    fn remove_and_answer(&mut self, id: &str) {
        if let Some(mut m) = self.remove_member(id) {
            let gone = Error::UnknownMember {
                group: self.id.to_string(),
                member: id.to_string(),
            };
            if let Some(tx) = m.join_waiter.take() {
                let _ = tx.send(Err(gone));
            }
            if let Some(tx) = m.sync_waiter.take() {
                let _ = tx.send(Err(Error::UnknownMember {
                    group: self.id.to_string(),
                    member: id.to_string(),
                }));
            }
        }
    }

    /// A static member restarted (same instance id, new member id): Kafka's
    /// `updateStaticMemberThenRebalanceOrCompleteJoin`.
    fn replace_static_member(
        &mut self,
        req: &JoinGroupRequest,
        old_id: Arc<str>,
        new_id: Arc<str>,
        ctx: &mut Ctx<'_>,
    ) -> Answer<JoinReply> {
        let old_leader = self.leader.clone();
        let Some(mut old) = self.members.remove(&old_id) else {
            return self.add_member_then_rebalance_or_complete_join(req, new_id, ctx);
        };
        let fenced = |current: &str| Error::FencedInstanceId {
            group: self.id.to_string(),
            member: old_id.to_string(),
            instance: req.group_instance_id.clone().unwrap_or_default(),
            current: current.to_string(),
        };
        if let Some(tx) = old.join_waiter.take() {
            let _ = tx.send(Err(fenced(&new_id)));
        }
        if let Some(tx) = old.sync_waiter.take() {
            let _ = tx.send(Err(fenced(&new_id)));
        }
        let was_pending_sync = self.pending_sync.remove(&old_id);
        let mut member = old;
        member.id = new_id.clone();
        // Kafka's replacement is a fresh member object: not new (isNew = false).
        member.is_new = false;
        member.deadline_ms = ctx.now.saturating_add(member.session_timeout_ms);
        if let Some(instance) = &member.instance_id {
            self.static_members.insert(instance.clone(), new_id.clone());
        }
        if self.leader.as_deref() == Some(&*old_id) {
            self.leader = Some(new_id.clone());
        }
        if was_pending_sync {
            self.pending_sync.insert(new_id.clone());
        }
        self.members.insert(new_id.clone(), member);
        info!(
            group = &*self.id,
            old = &*old_id,
            new = &*new_id,
            instance = req.group_instance_id.as_deref().unwrap_or(""),
            "static member replaced"
        );
        let rx = self.update_member(&new_id, req);
        match self.state {
            GroupState::Stable => {
                let selected = self.select_protocol();
                if selected.is_some() && selected == self.protocol_name {
                    // No rebalance: same generation, same assignments.
                    if let Some(m) = self.members.get_mut(&new_id) {
                        m.join_waiter = None;
                    }
                    let is_leader = self.leader.as_deref() == Some(&*new_id);
                    let mut answer = if req.supports_skip_assignment {
                        self.join_response(&new_id, *ctx.generation, is_leader)
                    } else {
                        // Before v9 a client cannot be told to skip the assignment: it is
                        // shown the leader it replaced, so it does not assign.
                        let mut a = self.join_response(&new_id, *ctx.generation, false);
                        a.members.clear();
                        a.leader = old_leader.as_deref().unwrap_or("").to_string();
                        a
                    };
                    answer.member_id = new_id.to_string();
                    Answer::Now(Ok(answer))
                } else {
                    self.maybe_prepare_rebalance_or_complete_join(
                        ctx,
                        "a static member joined again with a new protocol",
                    );
                    Answer::Later(rx)
                }
            }
            GroupState::CompletingRebalance => {
                self.prepare_rebalance(
                    ctx,
                    "a static member was replaced while the leader assigns",
                );
                Answer::Later(rx)
            }
            GroupState::PreparingRebalance => {
                self.maybe_complete_join_phase(ctx);
                Answer::Later(rx)
            }
            GroupState::Empty | GroupState::Dead => Answer::Later(rx),
        }
    }

    /// A rebalance started from outside (a test's fault), as Kafka starts one when a member's
    /// metadata changes: a Stable or CompletingRebalance group goes to PreparingRebalance;
    /// `false` (nothing done) for a group already rebalancing, or Empty.
    pub(crate) fn force_rebalance(&mut self, ctx: &mut Ctx<'_>, why: &str) -> bool {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance_or_complete_join(ctx, why);
                true
            }
            _ => false,
        }
    }

    fn maybe_prepare_rebalance_or_complete_join(&mut self, ctx: &mut Ctx<'_>, why: &str) {
        if self.can_rebalance() {
            self.prepare_rebalance(ctx, why);
        } else {
            self.maybe_complete_join_phase(ctx);
        }
    }

    /// Completes the join phase if everyone is in — but never during the initial rebalance
    /// delay, which only its timer ends (Kafka's `maybeCompleteJoinPhase`).
    fn maybe_complete_join_phase(&mut self, ctx: &mut Ctx<'_>) {
        if self.state == GroupState::PreparingRebalance
            && self.previous_state != GroupState::Empty
            && self.all_joined()
        {
            self.complete_join(ctx);
        }
    }

    /// Starts a rebalance: PreparingRebalance, and the barrier's timer.
    fn prepare_rebalance(&mut self, ctx: &mut Ctx<'_>, why: &str) {
        if self.state == GroupState::CompletingRebalance {
            // The leader's assignment will never come for this generation: everyone waiting
            // for it re-joins.
            for m in self.members.values_mut() {
                m.assignment = empty();
                m.partitions = None;
                if let Some(tx) = m.sync_waiter.take() {
                    let _ = tx.send(Err(Error::RebalanceInProgress {
                        group: self.id.to_string(),
                        state: GroupState::PreparingRebalance,
                    }));
                    m.deadline_ms = ctx.now.saturating_add(m.session_timeout_ms);
                }
            }
        }
        self.pending_sync.clear();
        self.sync_timer = None;
        self.staged = None;
        let initial = self.state == GroupState::Empty;
        if initial {
            let delay = ctx.settings.initial_rebalance_delay_ms;
            let remaining = self.rebalance_timeout_ms().saturating_sub(delay);
            self.join_timer = Some(JoinTimer {
                at: ctx.now.saturating_add(delay),
                initial: Some((delay, remaining)),
            });
            self.new_member_added = false;
        }
        info!(
            group = &*self.id,
            generation = ctx.generation.get(),
            from = self.state.as_str(),
            reason = why,
            "rebalance started"
        );
        self.previous_state = self.state;
        self.state = GroupState::PreparingRebalance;
        if !initial {
            if self.all_joined() {
                self.complete_join(ctx);
            } else {
                self.join_timer = Some(JoinTimer {
                    at: ctx.now.saturating_add(self.rebalance_timeout_ms()),
                    initial: None,
                });
            }
        }
    }

    /// The join barrier completes: Kafka's `completeClassicGroupJoin`. The caller holds the
    /// commit gate: this installs a generation.
    fn complete_join(&mut self, ctx: &mut Ctx<'_>) {
        self.join_timer = None;
        // Dynamic members that did not re-join are gone; static ones stay until their
        // session or the sync timeout removes them.
        let gone: Vec<Arc<str>> = self
            .members
            .values()
            .filter(|m| !m.awaiting_join() && m.instance_id.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in &gone {
            info!(
                group = &*self.id,
                member = &**id,
                "member did not join again within the rebalance timeout; removed"
            );
            self.remove_and_answer(id);
        }
        if !self.elect_joined_leader() && !self.members.is_empty() {
            // Only static members that did not re-join are left: wait for them.
            self.join_timer = Some(JoinTimer {
                at: ctx.now.saturating_add(self.rebalance_timeout_ms()),
                initial: None,
            });
            return;
        }
        *ctx.generation = ctx.generation.next();
        let generation = *ctx.generation;
        self.previous_state = self.state;
        if self.members.is_empty() {
            self.protocol_name = None;
            self.state = GroupState::Empty;
            self.pending_sync.clear();
            self.record_due = true;
            info!(
                group = &*self.id,
                generation = generation.get(),
                state = "Empty",
                "rebalance completed"
            );
            return;
        }
        self.protocol_name = self.select_protocol();
        self.state = GroupState::CompletingRebalance;
        let ids: Vec<Arc<str>> = self.members.keys().cloned().collect();
        for id in &ids {
            let answer = self.join_response(id, generation, false);
            if let Some(m) = self.members.get_mut(id) {
                if let Some(tx) = m.join_waiter.take() {
                    let _ = tx.send(Ok(answer));
                }
                m.deadline_ms = ctx.now.saturating_add(m.session_timeout_ms);
                m.is_new = false;
            }
            self.pending_sync.insert(id.clone());
        }
        self.sync_timer = Some((
            ctx.now.saturating_add(self.rebalance_timeout_ms()),
            generation,
        ));
        info!(
            group = &*self.id,
            generation = generation.get(),
            leader = self.leader.as_deref().unwrap_or(""),
            protocol = self.protocol_name.as_deref().unwrap_or(""),
            members = self.members.len(),
            state = "CompletingRebalance",
            "rebalance completed"
        );
    }

    /// Keeps the leader if it re-joined, else the first member that did. False if none did.
    fn elect_joined_leader(&mut self) -> bool {
        if self
            .leader
            .as_ref()
            .and_then(|l| self.members.get(l))
            .is_some_and(Member::awaiting_join)
        {
            return true;
        }
        match self.members.values().find(|m| m.awaiting_join()) {
            Some(m) => {
                self.leader = Some(m.id.clone());
                true
            }
            None => false,
        }
    }

    /// The protocol every member supports that most members prefer (each votes for its
    /// first supported choice); ties go to the one the leader lists first.
    fn select_protocol(&self) -> Option<String> {
        let n = self.members.len() as u32;
        let candidates: Vec<&String> = self
            .supported
            .iter()
            .filter(|(_, &c)| c == n && n > 0)
            .map(|(name, _)| name)
            .collect();
        let mut votes: HashMap<&str, u32> = HashMap::new();
        for m in self.members.values() {
            if let Some(p) = m
                .protocols
                .iter()
                .find(|p| candidates.iter().any(|c| **c == p.name))
            {
                *votes.entry(p.name.as_str()).or_insert(0) += 1;
            }
        }
        let leader_order: Vec<&str> = self
            .leader
            .as_ref()
            .and_then(|l| self.members.get(l))
            .map(|m| m.protocols.iter().map(|p| p.name.as_str()).collect())
            .unwrap_or_default();
        let rank = |name: &str| {
            leader_order
                .iter()
                .position(|p| *p == name)
                .unwrap_or(usize::MAX)
        };
        candidates
            .into_iter()
            .max_by(|a, b| {
                let (va, vb) = (votes.get(a.as_str()), votes.get(b.as_str()));
                va.cmp(&vb)
                    .then_with(|| rank(b).cmp(&rank(a)))
                    .then_with(|| b.cmp(a))
            })
            .cloned()
    }

    // ------------------------------------------------------------------------ sync

    pub(crate) fn sync(&mut self, req: &SyncGroupRequest, ctx: &mut Ctx<'_>) -> Answer<SyncReply> {
        if self.state == GroupState::Empty {
            return Answer::Now(Err(self.unknown(&req.member_id)));
        }
        if let Err(e) = self.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
            return Answer::Now(Err(e));
        }
        if let Err(e) = self.check_generation(req.generation, ctx) {
            return Answer::Now(Err(e));
        }
        let mismatch = |theirs: &Option<String>, ours: &Option<String>| matches!((theirs, ours), (Some(a), Some(b)) if a != b);
        if mismatch(&req.protocol_type, &self.protocol_type)
            || mismatch(&req.protocol_name, &self.protocol_name)
        {
            return Answer::Now(Err(Error::InconsistentGroupProtocol {
                group: self.id.to_string(),
                member: req.member_id.clone(),
                offered: vec![format!(
                    "{}/{}",
                    req.protocol_type.as_deref().unwrap_or(""),
                    req.protocol_name.as_deref().unwrap_or("")
                )],
                shared: vec![format!(
                    "{}/{}",
                    self.protocol_type.as_deref().unwrap_or(""),
                    self.protocol_name.as_deref().unwrap_or("")
                )],
            }));
        }
        match self.state {
            GroupState::PreparingRebalance => Answer::Now(Err(Error::RebalanceInProgress {
                group: self.id.to_string(),
                state: self.state,
            })),
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                if let Some(m) = self.members.get_mut(req.member_id.as_str()) {
                    if let Some(old) = m.sync_waiter.replace(tx) {
                        let _ = old.send(Err(Error::RebalanceInProgress {
                            group: self.id.to_string(),
                            state: self.state,
                        }));
                    }
                }
                self.pending_sync.remove(req.member_id.as_str());
                if self.pending_sync.is_empty() {
                    self.sync_timer = None;
                }
                if self.leader.as_deref() == Some(req.member_id.as_str()) {
                    if ctx.durable_groups {
                        // Installed once the record is written: nobody hears of the
                        // assignment before a restart would know it.
                        self.stage_seq += 1;
                        self.staged = Some((self.stage_seq, req.assignments.clone()));
                    } else {
                        self.install(&req.assignments, ctx);
                    }
                }
                Answer::Later(rx)
            }
            GroupState::Stable => {
                self.pending_sync.remove(req.member_id.as_str());
                if self.pending_sync.is_empty() {
                    self.sync_timer = None;
                }
                let assignment = self
                    .members
                    .get(req.member_id.as_str())
                    .map(|m| m.assignment.clone())
                    .unwrap_or_else(empty);
                Answer::Now(Ok(self.sync_response(assignment)))
            }
            GroupState::Empty | GroupState::Dead => Answer::Now(Err(self.unknown(&req.member_id))),
        }
    }

    fn sync_response(&self, assignment: Opaque) -> SyncGroupResponse {
        SyncGroupResponse {
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment,
        }
    }

    /// Installs the leader's assignment, answers every parked SyncGroup, and makes the
    /// group Stable. A member the leader left out gets empty bytes.
    fn install(&mut self, assignments: &[SyncAssignment], ctx: &mut Ctx<'_>) {
        let given: HashMap<&str, &SyncAssignment> = assignments
            .iter()
            .map(|a| (a.member_id.as_str(), a))
            .collect();
        let responses: Vec<(Arc<str>, SyncGroupResponse)> = self
            .members
            .keys()
            .map(|id| {
                let bytes = given
                    .get(&**id)
                    .map(|a| a.assignment.clone())
                    .unwrap_or_else(empty);
                (id.clone(), self.sync_response(bytes))
            })
            .collect();
        for (id, response) in responses {
            if let Some(m) = self.members.get_mut(&id) {
                let a = given.get(&*id);
                m.assignment = response.assignment.clone();
                m.partitions = a.and_then(|a| a.partitions.clone()).or_else(|| {
                    // Left out by the leader: it owns nothing.
                    a.is_none().then(Vec::new)
                });
                if let Some(tx) = m.sync_waiter.take() {
                    let _ = tx.send(Ok(response));
                    m.deadline_ms = ctx.now.saturating_add(m.session_timeout_ms);
                }
            }
        }
        self.previous_state = self.state;
        self.state = GroupState::Stable;
        ctx.stats.completed_rebalance();
        info!(
            group = &*self.id,
            generation = ctx.generation.get(),
            members = self.members.len(),
            state = "Stable",
            "assignment installed"
        );
    }

    // ------------------------------------------------------------------------ heartbeat

    pub(crate) fn heartbeat(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: Option<Generation>,
        ctx: &Ctx<'_>,
    ) -> Result<(), Error> {
        self.validate_member(member_id, instance)?;
        self.check_generation(generation, ctx)?;
        if self.state == GroupState::Empty {
            return Err(self.unknown(member_id));
        }
        if let Some(m) = self.members.get_mut(member_id) {
            m.deadline_ms = ctx.now.saturating_add(m.session_timeout_ms);
        }
        if self.state == GroupState::PreparingRebalance {
            return Err(Error::RebalanceInProgress {
                group: self.id.to_string(),
                state: self.state,
            });
        }
        Ok(())
    }

    // ------------------------------------------------------------------------ leave

    /// LeaveGroup: per-member results in request order.
    pub(crate) fn leave(
        &mut self,
        leaving: &[LeavingMember],
        ctx: &mut Ctx<'_>,
    ) -> Vec<Result<(), Error>> {
        let mut results = Vec::with_capacity(leaving.len());
        let mut left = false;
        for l in leaving {
            let result = if l.member_id.is_empty() {
                match l
                    .group_instance_id
                    .as_deref()
                    .and_then(|i| self.static_members.get(i).cloned())
                {
                    Some(id) => {
                        self.remove_and_answer(&id);
                        info!(group = &*self.id, member = &*id, "static member left");
                        Ok(())
                    }
                    None => Err(self.unknown(&l.member_id)),
                }
            } else if self.pending.remove(l.member_id.as_str()).is_some() {
                Ok(())
            } else {
                match self.validate_member(&l.member_id, l.group_instance_id.as_deref()) {
                    Ok(()) => {
                        self.remove_and_answer(&l.member_id);
                        info!(group = &*self.id, member = %l.member_id, "member left");
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            };
            left |= result.is_ok();
            results.push(result);
        }
        if left {
            match self.state {
                GroupState::Stable | GroupState::CompletingRebalance => {
                    self.maybe_prepare_rebalance_or_complete_join(ctx, "a member left");
                }
                GroupState::PreparingRebalance => self.maybe_complete_join_phase(ctx),
                GroupState::Empty | GroupState::Dead => {}
            }
        }
        results
    }

    // ------------------------------------------------------------------------ commits

    /// Kafka's `validateOffsetCommit`, plus the optional ownership check.
    fn validate_commit(
        &mut self,
        authority: &CommitAuthority,
        partitions: &mut dyn Iterator<Item = &TopicPartition>,
        ctx: &Ctx<'_>,
    ) -> Result<(), Error> {
        let (generation, member_id, instance) = match authority {
            CommitAuthority::Plain => (None, "", None),
            CommitAuthority::Generation {
                generation,
                member_id,
                group_instance_id,
            } => (
                *generation,
                member_id.as_str(),
                group_instance_id.as_deref(),
            ),
            // OffsetCommit v9's field is a generation for a classic group (Kafka reads it so):
            // negative, it is no generation.
            CommitAuthority::MemberEpoch {
                member_id,
                member_epoch,
            } => (
                u64::try_from(*member_epoch).ok().map(Generation::new),
                member_id.as_str(),
                None,
            ),
        };
        if generation.is_none() && self.state == GroupState::Empty {
            return Ok(());
        }
        if matches!(authority, CommitAuthority::Plain) {
            return Err(self.unknown(member_id));
        }
        self.validate_member(member_id, instance)?;
        self.check_generation(generation, ctx)?;
        if self.state == GroupState::CompletingRebalance {
            return Err(Error::RebalanceInProgress {
                group: self.id.to_string(),
                state: self.state,
            });
        }
        if ctx.settings.check_commit_ownership && self.protocol_type.as_deref() == Some("consumer")
        {
            if let Some(owned) = self
                .members
                .get(member_id)
                .and_then(|m| m.partitions.as_ref())
            {
                let foreign: Vec<TopicPartition> = partitions
                    .filter(|tp| !owned.contains(tp))
                    .cloned()
                    .collect();
                if !foreign.is_empty() {
                    return Err(Error::NotPartitionOwner {
                        group: self.id.to_string(),
                        member: member_id.to_string(),
                        generation: *ctx.generation,
                        partitions: foreign,
                    });
                }
            }
        }
        // A commit in Stable or PreparingRebalance renews the session, as in Kafka.
        if let Some(m) = self.members.get_mut(member_id) {
            m.deadline_ms = ctx.now.saturating_add(m.session_timeout_ms);
        }
        Ok(())
    }

    /// Whether the members subscribe to `topic` (Kafka's `isSubscribedToTopic`): with an
    /// unknown subscription, every topic counts for a consumer group.
    fn subscribed_to(&self, topic: &str) -> bool {
        if self.members.is_empty() || self.protocol_type.as_deref() != Some("consumer") {
            return false;
        }
        let protocol = self.protocol_name.clone().unwrap_or_default();
        self.members.values().any(|m| match m.topics(&protocol) {
            Some(topics) => topics.iter().any(|t| t == topic),
            None => true,
        })
    }

    // ------------------------------------------------------------------------ timers

    /// Does what is due at `ctx.now`: expired pending members and sessions, the join
    /// barrier's timer, the sync timeout. The caller holds the commit gate.
    fn expire(&mut self, ctx: &mut Ctx<'_>) -> Expired {
        let now = ctx.now;
        let mut expired = Vec::new();
        let gone_pending: Vec<Arc<str>> = self
            .pending
            .iter()
            .filter(|(_, &d)| now > d)
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone_pending {
            self.pending.remove(&id);
            info!(group = &*self.id, member = &*id, "pending member expired");
            if self.state == GroupState::PreparingRebalance && self.all_joined() {
                self.complete_join(ctx);
            }
        }
        let gone: Vec<Arc<str>> = self
            .members
            .values()
            .filter(|m| m.expiry_deadline().is_some_and(|d| now > d))
            .map(|m| m.id.clone())
            .collect();
        for id in gone {
            // An earlier removal in this run may have completed the barrier, which renews
            // every session: only remove a member that is still expired.
            let still_expired = self
                .members
                .get(&id)
                .and_then(Member::expiry_deadline)
                .is_some_and(|d| now > d);
            if !still_expired {
                continue;
            }
            info!(
                group = &*self.id,
                member = &*id,
                now_ms = now,
                "member session expired"
            );
            self.remove_and_answer(&id);
            expired.push(ExpiredMember {
                group: self.id.to_string(),
                member: id.to_string(),
            });
            match self.state {
                GroupState::Stable | GroupState::CompletingRebalance => {
                    self.maybe_prepare_rebalance_or_complete_join(
                        ctx,
                        "a member's session expired",
                    );
                }
                GroupState::PreparingRebalance if self.all_joined() => self.complete_join(ctx),
                _ => {}
            }
        }
        if let Some(timer) = self.join_timer.filter(|t| t.at <= now) {
            match timer.initial {
                Some((delay, remaining)) if self.new_member_added && remaining != 0 => {
                    // Members are still arriving: wait a little longer, up to the
                    // rebalance timeout (Kafka's InitialDelayedJoin).
                    self.new_member_added = false;
                    let next_delay = ctx.settings.initial_rebalance_delay_ms.min(remaining);
                    self.join_timer = Some(JoinTimer {
                        at: now.saturating_add(next_delay),
                        initial: Some((next_delay, remaining.saturating_sub(delay))),
                    });
                }
                _ => self.complete_join(ctx),
            }
        }
        if let Some((_, generation)) = self.sync_timer.filter(|(at, _)| *at <= now) {
            self.sync_timer = None;
            if generation == *ctx.generation
                && matches!(
                    self.state,
                    GroupState::CompletingRebalance | GroupState::Stable
                )
                && !self.pending_sync.is_empty()
            {
                let late: Vec<Arc<str>> = self.pending_sync.iter().cloned().collect();
                for id in &late {
                    info!(
                        group = &*self.id,
                        member = &**id,
                        "member did not sync within the rebalance timeout; removed"
                    );
                    self.remove_and_answer(id);
                    expired.push(ExpiredMember {
                        group: self.id.to_string(),
                        member: id.to_string(),
                    });
                }
                self.prepare_rebalance(ctx, "members did not sync in time");
            }
        }
        expired
    }

    // ------------------------------------------------------------------------ describe

    pub(crate) fn describe(&self, generation: Generation) -> ClassicGroupDescription {
        let stable = self.state == GroupState::Stable;
        let protocol = self.protocol_name.clone().unwrap_or_default();
        ClassicGroupDescription {
            group_id: self.id.to_string(),
            state: self.state,
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol_name: if stable {
                protocol.clone()
            } else {
                String::new()
            },
            generation,
            leader: self.leader.as_deref().map(str::to_string),
            members: self
                .members
                .values()
                .map(|m| ClassicMemberDescription {
                    member_id: m.id.to_string(),
                    group_instance_id: m.instance_id.as_deref().map(str::to_string),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(&protocol)
                    } else {
                        empty()
                    },
                    assignment: m.assignment.clone(),
                    topics: m
                        .topics(&protocol)
                        .map(<[String]>::to_vec)
                        .unwrap_or_default(),
                    partitions: m.partitions.clone().unwrap_or_default(),
                })
                .collect(),
        }
    }
}

impl Group for ClassicGroup {
    fn kind(&self) -> GroupKind {
        GroupKind::Classic
    }

    fn state(&self) -> GroupState {
        self.state
    }

    /// Pending members (MEMBER_ID_REQUIRED) do not count, as in Kafka.
    fn has_members(&self) -> bool {
        !self.members.is_empty()
    }

    fn member_count(&self) -> usize {
        self.members.len()
    }

    fn protocol_type(&self) -> &str {
        self.protocol_type.as_deref().unwrap_or_default()
    }

    /// Kafka's `validateOffsetCommit`, plus the optional ownership check.
    fn validate_offset_commit(
        &mut self,
        authority: &CommitAuthority,
        partitions: &mut dyn Iterator<Item = &TopicPartition>,
        ctx: &Ctx<'_>,
    ) -> Result<(), Error> {
        self.validate_commit(authority, partitions, ctx)
    }

    /// A group with members whose protocol type is not `consumer` has subscriptions the
    /// coordinator cannot read: none of its offsets can be deleted (NON_EMPTY_GROUP).
    fn validate_offset_delete(&self, group_id: &str) -> Result<(), Error> {
        if self.has_members() && self.protocol_type.as_deref() != Some("consumer") {
            return Err(Error::NonEmptyGroup {
                group: group_id.to_string(),
            });
        }
        Ok(())
    }

    fn is_subscribed_to(&self, topic: &str) -> bool {
        self.subscribed_to(topic)
    }

    /// Kafka's `ClassicGroup.offsetExpirationCondition`: Empty, from when it became Empty;
    /// Stable with protocol type `consumer` and every member's subscription decoded, each
    /// offset from its commit (those of subscribed topics never); otherwise never.
    fn offset_expiration(&self) -> OffsetExpiration {
        if self.state == GroupState::Empty {
            return OffsetExpiration::SinceEmpty;
        }
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let known = self.members.values().all(|m| m.topics(&protocol).is_some());
        if self.state == GroupState::Stable
            && self.protocol_type.as_deref() == Some("consumer")
            && known
        {
            OffsetExpiration::SinceCommit
        } else {
            OffsetExpiration::Never
        }
    }

    fn next_deadline(&self) -> Option<u64> {
        self.earliest_deadline()
    }

    fn handle_due(&mut self, ctx: &mut Ctx<'_>) -> Vec<ExpiredMember> {
        self.expire(ctx)
    }

    fn record(&self, generation: Generation, _assignors: &[Arc<dyn Assignor>]) -> GroupRecord {
        GroupRecord {
            group_id: self.id.to_string(),
            kind: GroupKind::Classic,
            generation,
            state: self.state,
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol: self.protocol_name.clone(),
            leader: self.leader.as_deref().map(str::to_string),
            members: self
                .members
                .values()
                .map(|m| MemberRecord {
                    member_id: m.id.to_string(),
                    group_instance_id: m.instance_id.as_deref().map(str::to_string),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocols: m.protocols.clone(),
                    assignment: m.assignment.clone(),
                    partitions: m.partitions.clone().unwrap_or_default(),
                    consumer: None,
                })
                .collect(),
        }
    }

    fn take_record_due(&mut self) -> bool {
        std::mem::take(&mut self.record_due)
    }

    fn mark_record_due(&mut self) {
        self.record_due = true;
    }

    fn answer_parked(&mut self, error: &dyn Fn() -> Error) {
        for m in self.members.values_mut() {
            if let Some(tx) = m.join_waiter.take() {
                let _ = tx.send(Err(error()));
            }
            if let Some(tx) = m.sync_waiter.take() {
                let _ = tx.send(Err(error()));
            }
        }
        // The leader's assignment waiting for its record is nobody's any more.
        self.staged = None;
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

fn non_negative(ms: i32) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}
