//! The group coordinator: membership, rebalances, fencing of commits, timers, lifecycle.

mod chapter;
mod classic;
mod classic_api;
mod entry;
mod timers;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use tokio::sync::{Notify, OwnedRwLockWriteGuard};
use tracing::{debug, info, warn};

use crate::assign::{Assignor, MAX_PARTITIONS_PER_TOPIC};
use crate::classic::{MemberIdSource, RandomMemberIds};
use crate::clock::{Clock, MonotonicClock};
use crate::error::Error;
use crate::metadata::TopicMetadata;
use crate::offset_store::{CommitFence, OffsetStore};
use crate::types::{Generation, GroupState, OffsetMap, TopicPartition};

use chapter::{Group, MemberEntry};
use entry::{Body, GroupCell, GroupEntry};
use timers::Timers;

/// Kafka's default `session.timeout.ms` (45 s).
pub const DEFAULT_SESSION_TIMEOUT_MS: u64 = 45_000;
/// Kafka's default `offsets.retention.minutes` (7 days), in milliseconds.
pub const DEFAULT_OFFSETS_RETENTION_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// How long an Empty group without offsets is kept: Kafka's default
/// `offsets.retention.check.interval.ms` (10 minutes), the longest Kafka keeps one.
pub const DEFAULT_EMPTY_GROUP_GRACE_MS: u64 = 600_000;
/// Kafka's default `group.min.session.timeout.ms`.
pub const DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS: u64 = 6_000;
/// Kafka's default `group.max.session.timeout.ms` (30 minutes).
pub const DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS: u64 = 1_800_000;
/// Kafka's default `group.initial.rebalance.delay.ms`.
pub const DEFAULT_GROUP_INITIAL_REBALANCE_DELAY_MS: u64 = 3_000;
/// How long a new classic member may wait in its first JoinGroup (Kafka's hard-coded
/// `CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS`, 5 minutes).
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: u64 = 300_000;

/// A member's view of its assignment: the generation it belongs to and its partitions, in
/// topic then partition order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberAssignment {
    /// The generation this assignment belongs to.
    pub generation: Generation,
    /// The member's partitions (empty if it owns none).
    pub partitions: Vec<TopicPartition>,
    /// For each partition, in the same order: the generation since which this member has
    /// owned it without interruption. A consumer may keep a local fetch position across an
    /// assignment change only for a partition it owned continuously since the generation the
    /// position was made under (no other member can have owned it in between).
    pub owned_since: Vec<Generation>,
}

impl MemberAssignment {
    /// The generation since which the member has owned `tp` without interruption, if it
    /// owns it.
    pub fn owned_since(&self, tp: &TopicPartition) -> Option<Generation> {
        let i = self.partitions.iter().position(|p| p == tp)?;
        self.owned_since.get(i).copied()
    }
}

/// A member removed by [`Coordinator::expire_members`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExpiredMember {
    /// The group the member was in.
    pub group: String,
    /// The member's id.
    pub member: String,
}

/// A snapshot of one group, for tools, labs and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    /// The group id.
    pub group: String,
    /// The current generation.
    pub generation: Generation,
    /// The current state.
    pub state: GroupState,
    /// The assignment strategy of the current generation (`None` when Empty, or when the
    /// strategy failed and a fallback assigned this generation).
    pub strategy: Option<String>,
    /// The members, sorted by id.
    pub members: Vec<MemberDescription>,
    /// Why this generation's assignment is not the negotiated strategy's: the strategy
    /// failed while members were being removed, and the chapter's round-robin (or, if even
    /// that was impossible, no assignment) took its place. `None` when all is well.
    pub assignment_error: Option<String>,
}

/// One member in a [`GroupDescription`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberDescription {
    /// The member id.
    pub member: String,
    /// Subscribed topics, sorted.
    pub topics: Vec<String>,
    /// Supported strategies, in preference order.
    pub strategies: Vec<String>,
    /// Owned partitions in the current generation.
    pub partitions: Vec<TopicPartition>,
    /// Session deadline (clock milliseconds); the member expires when `now > deadline_ms`.
    pub deadline_ms: u64,
}

/// The coordinator's settings, with Kafka's names and defaults where Kafka has them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoordinatorConfig {
    /// The session timeout of the chapter's groups (default [`DEFAULT_SESSION_TIMEOUT_MS`]).
    pub session_timeout_ms: u64,
    /// The settings of classic groups.
    pub groups: GroupSettings,
    /// Kafka's `offsets.retention.minutes`, in ms: an Empty group's committed offsets are
    /// deleted this long after it became Empty (default 7 days).
    pub offsets_retention_ms: u64,
    /// How long an Empty group without committed offsets is kept before it is removed
    /// (default 10 minutes, Kafka's `offsets.retention.check.interval.ms`).
    pub empty_group_grace_ms: u64,
}

/// Settings of Kafka's classic groups, with Kafka's names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSettings {
    /// `group.min.session.timeout.ms` (default 6000).
    pub min_session_timeout_ms: u64,
    /// `group.max.session.timeout.ms` (default 1800000).
    pub max_session_timeout_ms: u64,
    /// `group.initial.rebalance.delay.ms` (default 3000): how long the first rebalance of an
    /// Empty group waits for more members.
    pub initial_rebalance_delay_ms: u64,
    /// `group.max.size` (default unlimited: `u32::MAX`).
    pub max_size: u32,
    /// How long a new member may wait in its first JoinGroup (default 300000, Kafka's).
    pub new_member_join_timeout_ms: u64,
    /// BEYOND Kafka: refuse a commit of a partition the member's installed assignment does
    /// not hold (for protocol type `consumer`, when the front decoded the assignments).
    /// Off by default, as in Kafka.
    pub check_commit_ownership: bool,
}

impl Default for GroupSettings {
    fn default() -> Self {
        GroupSettings {
            min_session_timeout_ms: DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS,
            max_session_timeout_ms: DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS,
            initial_rebalance_delay_ms: DEFAULT_GROUP_INITIAL_REBALANCE_DELAY_MS,
            max_size: u32::MAX,
            new_member_join_timeout_ms: NEW_MEMBER_JOIN_TIMEOUT_MS,
            check_commit_ownership: false,
        }
    }
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            session_timeout_ms: DEFAULT_SESSION_TIMEOUT_MS,
            groups: GroupSettings::default(),
            offsets_retention_ms: DEFAULT_OFFSETS_RETENTION_MS,
            empty_group_grace_ms: DEFAULT_EMPTY_GROUP_GRACE_MS,
        }
    }
}

/// The groups, and the last generation of every group that was removed.
#[derive(Debug, Default)]
struct Groups {
    map: HashMap<Arc<str>, Arc<GroupCell>>,
    /// Group id → the generation it had when it was removed. A group re-created under the
    /// same id continues from there, so a member of the old incarnation can never present a
    /// generation the new one will use (see the crate docs, "Lifecycle").
    tombstones: HashMap<Arc<str>, Generation>,
}

/// The consumer-group coordinator.
///
/// `Send + Sync`: share it as `Arc<Coordinator>` between the tasks of a multi-threaded
/// runtime. See the [crate docs](crate) for the locking design and the timer model.
pub struct Coordinator {
    clock: Arc<dyn Clock>,
    store: Arc<dyn OffsetStore>,
    metadata: Arc<dyn TopicMetadata>,
    /// Registered strategies; index 0 is the default a member gets when it names none.
    assignors: Vec<Arc<dyn Assignor>>,
    config: CoordinatorConfig,
    member_ids: Arc<dyn MemberIdSource>,
    /// This lock is held only to find, insert or remove a group, never across an await and
    /// never while taking a group's lock.
    groups: RwLock<Groups>,
    /// Lock order: a group's state lock, then this one.
    timers: Mutex<Timers>,
    /// Signalled when a deadline earlier than every other one is armed.
    wake: Notify,
}

impl fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.assignors.iter().map(|a| a.name()).collect();
        f.debug_struct("Coordinator")
            .field("assignors", &names)
            .field("config", &self.config)
            .field("groups", &self.read_groups().map.len())
            .finish_non_exhaustive()
    }
}

/// Builds a [`Coordinator`]; see [`Coordinator::builder`].
pub struct CoordinatorBuilder {
    clock: Arc<dyn Clock>,
    store: Arc<dyn OffsetStore>,
    metadata: Arc<dyn TopicMetadata>,
    assignors: Vec<Arc<dyn Assignor>>,
    config: CoordinatorConfig,
    member_ids: Arc<dyn MemberIdSource>,
}

impl fmt::Debug for CoordinatorBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.assignors.iter().map(|a| a.name()).collect();
        f.debug_struct("CoordinatorBuilder")
            .field("assignors", &names)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl CoordinatorBuilder {
    /// Uses `clock` for every deadline (default: [`MonotonicClock`]).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Sets the session timeout of the chapter's groups: a member expires when
    /// `now > last heartbeat + timeout` (default [`DEFAULT_SESSION_TIMEOUT_MS`]).
    #[must_use]
    pub fn session_timeout_ms(mut self, ms: u64) -> Self {
        self.config.session_timeout_ms = ms;
        self
    }

    /// Kafka's `offsets.retention.minutes`, in milliseconds (default
    /// [`DEFAULT_OFFSETS_RETENTION_MS`]): an Empty group's offsets are deleted this long after
    /// it became Empty; a simple group's (plain commits only) this long after its last
    /// commit, Kafka's per-offset commit time approximated by the group's latest.
    #[must_use]
    pub fn offsets_retention_ms(mut self, ms: u64) -> Self {
        self.config.offsets_retention_ms = ms;
        self
    }

    /// How long an Empty group without committed offsets is kept (default
    /// [`DEFAULT_EMPTY_GROUP_GRACE_MS`]).
    #[must_use]
    pub fn empty_group_grace_ms(mut self, ms: u64) -> Self {
        self.config.empty_group_grace_ms = ms;
        self
    }

    /// `group.min.session.timeout.ms` of classic groups (default 6000).
    #[must_use]
    pub fn group_min_session_timeout_ms(mut self, ms: u64) -> Self {
        self.config.groups.min_session_timeout_ms = ms;
        self
    }

    /// `group.max.session.timeout.ms` of classic groups (default 1800000).
    #[must_use]
    pub fn group_max_session_timeout_ms(mut self, ms: u64) -> Self {
        self.config.groups.max_session_timeout_ms = ms;
        self
    }

    /// `group.initial.rebalance.delay.ms` of classic groups (default 3000; tests use 0).
    #[must_use]
    pub fn group_initial_rebalance_delay_ms(mut self, ms: u64) -> Self {
        self.config.groups.initial_rebalance_delay_ms = ms;
        self
    }

    /// `group.max.size` of classic groups (default unlimited).
    #[must_use]
    pub fn group_max_size(mut self, members: u32) -> Self {
        self.config.groups.max_size = members;
        self
    }

    /// How long a new classic member may wait in its first JoinGroup (default 300000).
    #[must_use]
    pub fn new_member_join_timeout_ms(mut self, ms: u64) -> Self {
        self.config.groups.new_member_join_timeout_ms = ms;
        self
    }

    /// BEYOND Kafka: refuse classic commits of partitions the member's installed
    /// assignment does not hold (`NOT_PARTITION_OWNER`). Off by default.
    #[must_use]
    pub fn check_classic_commit_ownership(mut self, on: bool) -> Self {
        self.config.groups.check_commit_ownership = on;
        self
    }

    /// Where new classic members' ids come from (default [`RandomMemberIds`]; tests use
    /// [`SequentialMemberIds`](crate::SequentialMemberIds)).
    #[must_use]
    pub fn member_ids(mut self, source: Arc<dyn MemberIdSource>) -> Self {
        self.member_ids = source;
        self
    }

    /// Registers another assignment strategy members may negotiate.
    #[must_use]
    pub fn assignor(mut self, assignor: Arc<dyn Assignor>) -> Self {
        self.assignors.push(assignor);
        self
    }

    /// Builds the coordinator. Refuses a zero session timeout and two strategies with one name.
    pub fn build(self) -> Result<Coordinator, Error> {
        if self.config.session_timeout_ms == 0 {
            return Err(Error::invalid("session timeout", "must be at least 1 ms"));
        }
        let g = &self.config.groups;
        if g.min_session_timeout_ms > g.max_session_timeout_ms {
            return Err(Error::invalid(
                "group.min.session.timeout.ms",
                format!(
                    "{} is above group.max.session.timeout.ms ({})",
                    g.min_session_timeout_ms, g.max_session_timeout_ms
                ),
            ));
        }
        if g.max_size == 0 {
            return Err(Error::invalid("group.max.size", "must be at least 1"));
        }
        for (i, a) in self.assignors.iter().enumerate() {
            if a.name().is_empty() {
                return Err(Error::invalid(
                    "assignor",
                    "a strategy name must not be empty",
                ));
            }
            if self.assignors[..i].iter().any(|b| b.name() == a.name()) {
                return Err(Error::invalid(
                    "assignor",
                    format!("strategy `{}` is registered twice", a.name()),
                ));
            }
        }
        Ok(Coordinator {
            clock: self.clock,
            store: self.store,
            metadata: self.metadata,
            assignors: self.assignors,
            config: self.config,
            member_ids: self.member_ids,
            groups: RwLock::new(Groups::default()),
            timers: Mutex::new(Timers::default()),
            wake: Notify::new(),
        })
    }
}

fn require(what: &'static str, value: &str) -> Result<(), Error> {
    if value.is_empty() {
        Err(Error::invalid(what, "must not be empty"))
    } else {
        Ok(())
    }
}

fn not_found(group: &str) -> Error {
    Error::GroupIdNotFound {
        group: group.to_string(),
    }
}

/// A group taken off the timer heap for a run. Unless the run says it armed (or removed)
/// the group itself, dropping this arms the group's next deadline: when the work completes,
/// and when the run is cancelled before it did (a dropped `handle_timeout` future).
struct Rearm<'a> {
    coordinator: &'a Coordinator,
    cell: Arc<GroupCell>,
    /// The run armed or removed the group itself.
    done: bool,
}

impl Drop for Rearm<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut entry = self.cell.lock();
        if !entry.removed {
            self.coordinator.arm(&mut entry);
        }
    }
}

/// What a timer run found due in one group.
enum Due {
    /// Nothing (a lease was extended since the deadline was armed).
    Nothing,
    /// Members to expire, or a follow-up rebalance: needs the commit gate.
    Rebalance,
    /// The group's offsets expired.
    DeleteOffsets,
    /// The group is Empty, without offsets, past its grace period.
    Remove,
}

impl Coordinator {
    /// Starts building a coordinator over its three ports. `default_assignor` is the strategy
    /// of members that name none.
    pub fn builder(
        store: Arc<dyn OffsetStore>,
        metadata: Arc<dyn TopicMetadata>,
        default_assignor: Arc<dyn Assignor>,
    ) -> CoordinatorBuilder {
        CoordinatorBuilder {
            clock: Arc::new(MonotonicClock::new()),
            store,
            metadata,
            assignors: vec![default_assignor],
            config: CoordinatorConfig::default(),
            member_ids: Arc::new(RandomMemberIds::new()),
        }
    }

    /// The session timeout of the chapter's groups, in milliseconds.
    pub fn session_timeout_ms(&self) -> u64 {
        self.config.session_timeout_ms
    }

    /// The coordinator's settings.
    pub fn config(&self) -> &CoordinatorConfig {
        &self.config
    }

    /// The names of the registered strategies; the first is the default.
    pub fn strategies(&self) -> Vec<&str> {
        self.assignors.iter().map(|a| a.name()).collect()
    }

    /// The clock the coordinator reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    // ------------------------------------------------------------------ the group map

    fn read_groups(&self) -> std::sync::RwLockReadGuard<'_, Groups> {
        // Nothing panics while holding this lock, so a poisoned map is still consistent.
        self.groups.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_groups(&self) -> std::sync::RwLockWriteGuard<'_, Groups> {
        self.groups.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn group(&self, group: &str) -> Option<Arc<GroupCell>> {
        self.read_groups().map.get(group).cloned()
    }

    fn group_or_insert(&self, group: &str) -> Arc<GroupCell> {
        if let Some(g) = self.group(group) {
            return g;
        }
        let mut groups = self.write_groups();
        if let Some(g) = groups.map.get(group) {
            return g.clone();
        }
        let id: Arc<str> = Arc::from(group);
        let generation = groups
            .tombstones
            .remove(group)
            .unwrap_or(Generation::INITIAL);
        let cell = Arc::new(GroupCell::new(id.clone(), generation, self.assignors.len()));
        groups.map.insert(id, cell.clone());
        cell
    }

    /// Takes a removed group's cell out of the map, leaving its generation as a tombstone.
    fn forget(&self, cell: &Arc<GroupCell>, generation: Generation) {
        let mut groups = self.write_groups();
        if groups
            .map
            .get(&cell.id)
            .is_some_and(|c| Arc::ptr_eq(c, cell))
        {
            groups.map.remove(&cell.id);
            groups.tombstones.insert(cell.id.clone(), generation);
        }
    }

    /// Arms `entry`'s next deadline, if it is earlier than the one already armed.
    fn arm(&self, entry: &mut GroupEntry) {
        let Some(at) = entry.next_deadline(
            self.config.offsets_retention_ms,
            self.config.empty_group_grace_ms,
        ) else {
            return;
        };
        self.arm_at(entry, at);
    }

    fn arm_at(&self, entry: &mut GroupEntry, at: u64) {
        if entry.armed.is_some_and(|armed| armed <= at) {
            return;
        }
        entry.armed = Some(at);
        let earliest = self
            .timers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(at, entry.id.clone());
        if earliest {
            self.wake.notify_one();
        }
    }

    /// The gate of `group`, exclusively, with its cell: the group exists in the map (created
    /// if needed) and was not removed meanwhile.
    async fn install_lock(&self, group: &str) -> (Arc<GroupCell>, OwnedRwLockWriteGuard<()>) {
        loop {
            let cell = self.group_or_insert(group);
            let gate = cell.gate.clone().write_owned().await;
            if !cell.lock().removed {
                return (cell, gate);
            }
        }
    }

    // ------------------------------------------------------------------ chapter groups

    /// Joins `member` to `group` with the default strategy; see
    /// [`join_with_strategies`](Self::join_with_strategies).
    pub async fn join<S: AsRef<str>>(
        &self,
        group: &str,
        member: &str,
        topics: &[S],
    ) -> Result<MemberAssignment, Error> {
        self.join_inner(group, member, topics, None).await
    }

    /// Joins (or re-joins) `member` to `group`, subscribed to `topics`, supporting
    /// `strategies` in order of preference.
    ///
    /// Creates the group if needed, inserts or replaces the member (a re-join replaces its
    /// subscriptions), sets its session deadline to `now + session timeout`, rebalances, and
    /// returns the new generation and this member's partitions.
    ///
    /// Errors, in check order: `INVALID_ARGUMENT` (empty group or member id, no strategy, an
    /// unregistered strategy, a topic with more than [`MAX_PARTITIONS_PER_TOPIC`]
    /// partitions, a group whose topics would hold more than
    /// [`MAX_TOTAL_PARTITIONS`](crate::MAX_TOTAL_PARTITIONS) in all), `UNKNOWN_TOPIC` (naming
    /// every unknown topic, sorted), `INCONSISTENT_GROUP_PROTOCOL` (no strategy shared with
    /// every other member, or the group is a classic group), `ASSIGNOR_FAILED`. Nothing
    /// changes on error.
    pub async fn join_with_strategies<S: AsRef<str>, T: AsRef<str>>(
        &self,
        group: &str,
        member: &str,
        topics: &[S],
        strategies: &[T],
    ) -> Result<MemberAssignment, Error> {
        if strategies.is_empty() {
            return Err(Error::invalid(
                "strategies",
                "list at least one assignment strategy",
            ));
        }
        let mut chosen = Vec::with_capacity(strategies.len());
        for name in strategies {
            let name = name.as_ref();
            let index = self
                .assignors
                .iter()
                .position(|a| a.name() == name)
                .ok_or_else(|| {
                    Error::invalid(
                        "strategies",
                        format!(
                            "unknown assignment strategy `{name}` (registered: {})",
                            self.strategies().join(", ")
                        ),
                    )
                })?;
            if !chosen.contains(&index) {
                chosen.push(index);
            }
        }
        self.join_inner(group, member, topics, Some(chosen)).await
    }

    async fn join_inner<S: AsRef<str>>(
        &self,
        group_id: &str,
        member: &str,
        topics: &[S],
        strategies: Option<Vec<usize>>,
    ) -> Result<MemberAssignment, Error> {
        require("group id", group_id)?;
        require("member id", member)?;
        let mut subs: Vec<Arc<str>> = Vec::with_capacity(topics.len());
        let mut unknown: Vec<String> = Vec::new();
        for t in topics {
            let t = t.as_ref();
            match self.metadata.partition_count(t) {
                None => unknown.push(t.to_string()),
                Some(n) if n > MAX_PARTITIONS_PER_TOPIC => {
                    return Err(Error::invalid(
                        "subscription",
                        format!(
                            "topic `{t}` has {n} partitions, more than the \
                             {MAX_PARTITIONS_PER_TOPIC} the coordinator supports"
                        ),
                    ))
                }
                Some(_) => subs.push(Arc::from(t)),
            }
        }
        if !unknown.is_empty() {
            unknown.sort_unstable();
            unknown.dedup();
            return Err(Error::UnknownTopic { topics: unknown });
        }
        subs.sort_unstable();
        subs.dedup();
        let strategies = strategies.unwrap_or_else(|| vec![0]);

        let (cell, _gate) = self.install_lock(group_id).await;
        let mut entry = cell.lock();
        let next = entry.generation.next();
        let now = self.clock.now_ms();
        let was_unused = matches!(entry.body, Body::Unused);
        let result = {
            let Some(group) = entry.chapter_or_convert() else {
                return Err(Error::wrong_group_type(group_id, "chapter", "classic"));
            };
            self.join_chapter(group, member, subs, strategies, now, next)
        };
        match result {
            Ok(assignment) => {
                entry.generation = next;
                entry.note_membership(now);
                self.arm(&mut entry);
                Ok(assignment)
            }
            Err(e) => {
                if was_unused {
                    // A first join that failed leaves no visible group behind.
                    entry.body = Body::Unused;
                }
                entry.note_membership(now);
                self.arm(&mut entry);
                Err(e)
            }
        }
    }

    /// The join itself, under the group's gate and state lock.
    fn join_chapter(
        &self,
        group: &mut Group,
        member: &str,
        subs: Vec<Arc<str>>,
        strategies: Vec<usize>,
        now: u64,
        next: Generation,
    ) -> Result<MemberAssignment, Error> {
        let existing = group.find(member);
        let others = group.ids.len() - usize::from(existing.is_some());
        if others > 0 {
            let shared = group.shared_strategies(existing);
            if !strategies.iter().any(|s| shared.contains(s)) {
                let names = |list: &[usize]| -> Vec<String> {
                    list.iter()
                        .map(|&s| self.assignors[s].name().to_string())
                        .collect()
                };
                let mut shared_names = names(&shared);
                shared_names.sort_unstable();
                return Err(Error::InconsistentGroupProtocol {
                    group: group.id.to_string(),
                    member: member.to_string(),
                    offered: names(&strategies),
                    shared: shared_names,
                });
            }
        }
        let entry = MemberEntry::new(
            subs.into_boxed_slice(),
            strategies.into_boxed_slice(),
            now.saturating_add(self.config.session_timeout_ms),
        );
        let undo = group.upsert(member, entry);
        if let Err(e) = group.rebalance(next, &self.assignors, &*self.metadata) {
            warn!(group = &*group.id, member, code = e.code(), error = %e, "rebalance failed; join undone");
            group.undo(undo);
            return Err(e);
        }
        self.log_rebalance(group, next);
        let index = group.find(member).ok_or_else(|| Error::UnknownMember {
            group: group.id.to_string(),
            member: member.to_string(),
        })?;
        let partitions = group.member_assignment(index);
        info!(
            group = &*group.id,
            member,
            generation = next.get(),
            partitions = partitions.len(),
            rejoin = existing.is_some(),
            "member joined"
        );
        Ok(MemberAssignment {
            generation: next,
            owned_since: group.member_owned_since(index),
            partitions,
        })
    }

    fn log_rebalance(&self, group: &Group, to: Generation) {
        info!(
            group = &*group.id,
            from = to.get() - 1,
            to = to.get(),
            members = group.ids.len(),
            assigned = group.current.assigned_count(),
            strategy = group.strategy_name(&self.assignors).unwrap_or("none"),
            state = group.state.as_str(),
            withheld_from = group.awaiting_acks,
            "group rebalanced"
        );
    }

    /// Removes members of a chapter group and rebalances; never fails (see
    /// [`Group::rebalance_after_removal`]).
    fn remove_chapter_members(&self, entry: &mut GroupEntry, indices: &[usize], now: u64) {
        let next = entry.generation.next();
        let Some(group) = entry.chapter_mut() else {
            return;
        };
        group.remove(indices);
        if let Some(e) = group.rebalance_after_removal(next, &self.assignors, &*self.metadata) {
            warn!(
                group = &*group.id,
                generation = next.get(),
                code = e.code(),
                error = %e,
                fallback = group.degraded.as_deref().unwrap_or(""),
                "the strategy failed during a removal; the fallback assigned this generation"
            );
        }
        self.log_rebalance(group, next);
        entry.generation = next;
        entry.note_membership(now);
        self.arm(entry);
    }

    /// Removes `member` from `group` and rebalances. Returns the new generation, or `None` if
    /// the group or member was unknown (leave is idempotent: no error, no new generation).
    ///
    /// A leave always succeeds: if the negotiated strategy fails to assign the remaining
    /// members, the chapter's round-robin assigns instead (logged at warn, and shown in
    /// [`GroupDescription::assignment_error`]).
    ///
    /// Errors: `INVALID_ARGUMENT` for an empty id.
    pub async fn leave(&self, group_id: &str, member: &str) -> Result<Option<Generation>, Error> {
        require("group id", group_id)?;
        require("member id", member)?;
        let Some(cell) = self.group(group_id) else {
            return Ok(None);
        };
        let _gate = cell.gate.clone().write_owned().await;
        let mut entry = cell.lock();
        if entry.removed {
            return Ok(None);
        }
        if matches!(entry.body, Body::Classic(_)) {
            return Err(Error::wrong_group_type(group_id, "chapter", "classic"));
        }
        let Some(index) = entry.chapter().and_then(|g| g.find(member)) else {
            return Ok(None);
        };
        let now = self.clock.now_ms();
        self.remove_chapter_members(&mut entry, &[index], now);
        info!(
            group = group_id,
            member,
            generation = entry.generation.get(),
            "member left"
        );
        Ok(Some(entry.generation))
    }

    /// The chapter group of an existing group, under its state lock; `GROUP_ID_NOT_FOUND` if
    /// there is none, `INCONSISTENT_GROUP_PROTOCOL` for a classic group.
    fn with_chapter<T>(
        &self,
        group_id: &str,
        f: impl FnOnce(&mut GroupEntry) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let cell = self.group(group_id).ok_or_else(|| not_found(group_id))?;
        let mut entry = cell.lock();
        match &entry.body {
            _ if entry.removed => Err(not_found(group_id)),
            Body::Chapter(_) => f(&mut entry),
            Body::Classic(_) => Err(Error::wrong_group_type(group_id, "chapter", "classic")),
            Body::Unused => Err(not_found(group_id)),
        }
    }

    /// Extends `member`'s session lease to `now + session timeout`. It never commits, never
    /// changes an assignment, and never waits for the offset store.
    ///
    /// Errors, in check order: `INVALID_ARGUMENT`, `GROUP_ID_NOT_FOUND`, `ILLEGAL_GENERATION`
    /// (carrying both generations), `UNKNOWN_MEMBER`.
    pub async fn heartbeat(
        &self,
        group_id: &str,
        member: &str,
        generation: Generation,
    ) -> Result<(), Error> {
        require("group id", group_id)?;
        require("member id", member)?;
        let deadline = self
            .clock
            .now_ms()
            .saturating_add(self.config.session_timeout_ms);
        self.with_chapter(group_id, |entry| {
            check_generation(group_id, entry.generation, generation)?;
            let group = chapter_of(entry)?;
            let index = group
                .find(member)
                .ok_or_else(|| unknown_member(group_id, member))?;
            group.members[index].deadline_ms = deadline;
            Ok(())
        })
    }

    /// Removes every member whose session deadline has passed (`now > deadline`: at exactly
    /// the deadline a member is alive), rebalancing each group that lost members once, and
    /// does everything else that is due: see [`handle_timeout`](Self::handle_timeout).
    ///
    /// Returns the removed members ordered by group id, then member id. Removal never fails.
    pub async fn expire_members(&self) -> Vec<ExpiredMember> {
        self.handle_timeout().await
    }

    /// When the coordinator next needs [`handle_timeout`](Self::handle_timeout), in clock
    /// milliseconds (`None`: nothing is scheduled). It may answer earlier than necessary
    /// (a lease extended since), never later.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.timers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next()
    }

    /// Resolves when a deadline earlier than every other one was armed since the last call
    /// (or since the coordinator was built): a driver sleeping until
    /// [`poll_timeout`](Self::poll_timeout) should wake and ask again.
    pub async fn timeout_changed(&self) {
        self.wake.notified().await;
    }

    /// Does everything that is due at the clock's current time: expires members whose
    /// session passed (and rebalances their groups once each), runs follow-up rebalances of
    /// cooperative hand-overs that could not run at once, deletes the offsets of groups that
    /// have been Empty for `offsets_retention_ms`, and removes Empty groups without offsets
    /// after `empty_group_grace_ms`. The core never does any of this by itself: a driver (or
    /// a test with a [`ManualClock`](crate::ManualClock)) calls this when
    /// [`poll_timeout`](Self::poll_timeout) says.
    ///
    /// Returns the expired members ordered by group id, then member id. Costs O(log n) per
    /// due deadline plus the work of the groups that are due, not a scan of every group.
    ///
    /// **Waiting.** A group's work takes its commit gate, so it waits for that group's
    /// commits in flight (a slow store write). The due groups are worked on concurrently:
    /// one group waiting for its gate never delays another's. Each group's work reads the
    /// clock again once it has the gate, so deadlines set then count from the real time.
    ///
    /// **When work is taken.** The first poll of the returned future takes every deadline
    /// due at that moment off the timer heap, before it first waits; a driver can therefore
    /// poll it once and hand the rest to a task of its own (as `coordinator-driver` does), and
    /// a later call does not take the same work again.
    ///
    /// **Cancel safety.** Dropping the future before it completes loses nothing: every
    /// group whose work had not finished has its next deadline armed again.
    pub async fn handle_timeout(&self) -> Vec<ExpiredMember> {
        let now = self.clock.now_ms();
        let mut expired = Vec::new();
        // Work done now may arm more work due now (a classic group's initial delay of 0 ms
        // extended by a member that just arrived): a few passes finish it, without letting
        // a group that keeps re-arming at `now` hold the caller forever.
        for _ in 0..4 {
            let due = self
                .timers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop_due(now);
            if due.is_empty() {
                break;
            }
            let mut cells = Vec::with_capacity(due.len());
            for (at, id) in due {
                let Some(cell) = self.group(&id) else {
                    continue;
                };
                {
                    let mut entry = cell.lock();
                    if entry.removed || entry.armed != Some(at) {
                        continue; // a stale entry: the live one is elsewhere in the heap
                    }
                    entry.armed = None;
                }
                // Armed again if this future is dropped before the group's work is done.
                cells.push(Rearm {
                    coordinator: self,
                    cell,
                    done: false,
                });
            }
            let runs = cells.into_iter().map(|guard| self.run_due(guard, now));
            for group_expired in futures_util::future::join_all(runs).await {
                expired.extend(group_expired);
            }
        }
        expired.sort_unstable();
        expired
    }

    fn what_is_due(&self, entry: &GroupEntry, now: u64) -> Due {
        match &entry.body {
            Body::Chapter(group) => {
                if group.followup_due() || group.members.iter().any(|m| now > m.deadline_ms) {
                    return Due::Rebalance;
                }
            }
            Body::Classic(group) => {
                if group.is_due(now) {
                    return Due::Rebalance;
                }
            }
            Body::Unused => {}
        }
        match entry.lifecycle_deadline(
            self.config.offsets_retention_ms,
            self.config.empty_group_grace_ms,
        ) {
            Some(at) if now >= at && entry.has_offsets => Due::DeleteOffsets,
            Some(at) if now >= at => Due::Remove,
            _ => Due::Nothing,
        }
    }

    /// Does what is due in one group. Everything but re-arming happens under the group's
    /// commit gate, held exclusively: expiry and rebalances install generations, the offsets
    /// delete must not run beside a commit (an acknowledged commit deleted, or one landing
    /// after the delete and orphaned), and a removal must not run beside a join.
    async fn run_due(&self, mut guard: Rearm<'_>, popped_at: u64) -> Vec<ExpiredMember> {
        let mut expired = Vec::new();
        let cell = guard.cell.clone();
        if matches!(self.what_is_due(&cell.lock(), popped_at), Due::Nothing) {
            return expired; // fired early (a lease extended since): the guard arms the next
        }
        let gate = Arc::new(cell.gate.clone().write_owned().await);
        // The wait may have been long (a slow commit of this group): act at the real time.
        let now = self.clock.now_ms().max(popped_at);
        let delete = {
            let mut entry = cell.lock();
            if entry.removed {
                guard.done = true;
                return expired;
            }
            match self.what_is_due(&entry, now) {
                Due::Nothing | Due::Remove => false,
                Due::Rebalance => {
                    if matches!(entry.body, Body::Classic(_)) {
                        self.expire_classic(&mut entry, now, &mut expired);
                    } else {
                        self.expire_chapter(&mut entry, now, &mut expired);
                    }
                    false
                }
                Due::DeleteOffsets => true,
            }
        };
        if delete {
            let deleted = self
                .store
                .delete(&cell.id, None, CommitFence::exclusive(&gate))
                .await;
            let mut entry = cell.lock();
            match deleted {
                Ok(()) => {
                    info!(
                        group = &*cell.id,
                        "offsets expired after the retention period"
                    );
                    entry.has_offsets = false;
                }
                Err(e) => {
                    warn!(group = &*cell.id, error = %e, "expired offsets could not be deleted; retrying later");
                    let retry = now.saturating_add(self.config.empty_group_grace_ms);
                    self.arm_at(&mut entry, retry);
                    guard.done = true;
                    return expired;
                }
            }
        }
        let mut entry = cell.lock();
        if matches!(self.what_is_due(&entry, now), Due::Remove) {
            entry.removed = true;
            let generation = entry.generation;
            drop(entry);
            self.forget(&cell, generation);
            info!(
                group = &*cell.id,
                generation = generation.get(),
                "empty group removed"
            );
            guard.done = true;
            return expired;
        }
        drop(entry);
        drop(gate);
        expired // the guard arms the group's next deadline
    }

    /// Expires the chapter members whose session passed, and runs a due follow-up.
    fn expire_chapter(&self, entry: &mut GroupEntry, now: u64, expired: &mut Vec<ExpiredMember>) {
        let Some(group) = entry.chapter() else {
            return;
        };
        let gone: Vec<usize> = (0..group.ids.len())
            .filter(|&i| now > group.members[i].deadline_ms)
            .collect();
        if gone.is_empty() {
            if group.followup_due() {
                self.run_followup(entry);
            }
            return;
        }
        let names: Vec<ExpiredMember> = gone
            .iter()
            .map(|&i| ExpiredMember {
                group: group.id.to_string(),
                member: group.ids[i].to_string(),
            })
            .collect();
        self.remove_chapter_members(entry, &gone, now);
        for e in &names {
            info!(group = %e.group, member = %e.member, now_ms = now, "member session expired");
        }
        expired.extend(names);
    }

    /// Hands over the partitions a cooperative rebalance withheld, now that every member
    /// that lost one has seen it. The caller holds the group's gate exclusively.
    fn run_followup(&self, entry: &mut GroupEntry) {
        let next = entry.generation.next();
        let Some(group) = entry.chapter_mut() else {
            return;
        };
        match group.rebalance(next, &self.assignors, &*self.metadata) {
            Ok(()) => {
                info!(
                    group = &*group.id,
                    generation = next.get(),
                    "follow-up rebalance hands over withheld partitions"
                );
                self.log_rebalance(group, next);
                entry.generation = next;
                self.arm(entry);
            }
            Err(e) => {
                // Nothing changed; members keep what they have and the withheld partitions
                // wait for the next membership change.
                group.followup = false;
                warn!(group = &*group.id, code = e.code(), error = %e, "follow-up rebalance failed");
            }
        }
    }

    /// The coordinator's current view of `member`'s assignment, for refreshing a stale local
    /// copy. Never waits for the offset store.
    ///
    /// Reading it is how a member acknowledges a generation: once every member that lost a
    /// partition withheld by a cooperative strategy has read an assignment without it, the
    /// follow-up rebalance that hands those partitions over runs — here, at once, unless a
    /// commit of the group is in flight; then at the next timer run.
    ///
    /// Errors, in check order: `INVALID_ARGUMENT`, `GROUP_ID_NOT_FOUND`, `UNKNOWN_MEMBER`,
    /// `REBALANCE_IN_PROGRESS`.
    pub async fn assignment(
        &self,
        group_id: &str,
        member: &str,
    ) -> Result<MemberAssignment, Error> {
        require("group id", group_id)?;
        require("member id", member)?;
        let cell = self.group(group_id).ok_or_else(|| not_found(group_id))?;
        let mut entry = cell.lock();
        if entry.removed {
            return Err(not_found(group_id));
        }
        let generation = entry.generation;
        let (answer, followup) = {
            let group = match &mut entry.body {
                Body::Chapter(g) => g,
                Body::Classic(_) => {
                    return Err(Error::wrong_group_type(group_id, "chapter", "classic"))
                }
                Body::Unused => return Err(not_found(group_id)),
            };
            let index = group
                .find(member)
                .ok_or_else(|| unknown_member(group_id, member))?;
            check_stable(group_id, group.state)?;
            let answer = MemberAssignment {
                generation,
                partitions: group.member_assignment(index),
                owned_since: group.member_owned_since(index),
            };
            let followup = group.acknowledge(index) || group.followup_due();
            (answer, followup)
        };
        if followup {
            // The gate is free unless a commit is in flight; never wait for it here.
            match cell.gate.clone().try_write_owned() {
                Ok(_gate) => self.run_followup(&mut entry),
                Err(_) => {
                    let now = self.clock.now_ms();
                    self.arm_at(&mut entry, now);
                }
            }
        }
        Ok(answer)
    }

    /// The group's state. Error: `GROUP_ID_NOT_FOUND` (or `INVALID_ARGUMENT` for an empty id).
    pub async fn state(&self, group_id: &str) -> Result<GroupState, Error> {
        Ok(self.describe(group_id).await?.state)
    }

    /// The group's generation, state, strategy and members. Never waits for the offset store.
    pub async fn describe(&self, group_id: &str) -> Result<GroupDescription, Error> {
        require("group id", group_id)?;
        self.with_chapter(group_id, |entry| {
            let generation = entry.generation;
            let group = chapter_of(entry)?;
            let members = group
                .ids
                .iter()
                .zip(&group.members)
                .enumerate()
                .map(|(i, (id, m))| MemberDescription {
                    member: id.to_string(),
                    topics: m.topics.iter().map(|t| t.to_string()).collect(),
                    strategies: m
                        .strategies
                        .iter()
                        .map(|&s| self.assignors[s].name().to_string())
                        .collect(),
                    partitions: group.member_assignment(i),
                    deadline_ms: m.deadline_ms,
                })
                .collect();
            Ok(GroupDescription {
                group: group_id.to_string(),
                generation,
                state: group.state,
                strategy: group.strategy_name(&self.assignors).map(str::to_string),
                members,
                assignment_error: group.degraded.clone(),
            })
        })
    }

    /// Ids of every existing chapter group, sorted.
    pub async fn groups(&self) -> Vec<String> {
        let cells: Vec<Arc<GroupCell>> = self.read_groups().map.values().cloned().collect();
        let mut ids: Vec<String> = cells
            .iter()
            .filter(|cell| {
                let entry = cell.lock();
                !entry.removed && entry.chapter().is_some()
            })
            .map(|cell| cell.id.to_string())
            .collect();
        ids.sort_unstable();
        ids
    }

    /// How many group entries the coordinator holds (existing groups of both kinds and
    /// groups known only by their offsets), for tests and metrics.
    pub fn group_count(&self) -> usize {
        self.read_groups().map.len()
    }

    /// Commits `offsets` (partition → next offset) for `member` of `group` acting under
    /// `generation`.
    ///
    /// Checks, in order: `INVALID_ARGUMENT` (empty ids), `GROUP_ID_NOT_FOUND`, state Stable
    /// (else `REBALANCE_IN_PROGRESS`), generation equal (else `ILLEGAL_GENERATION`), member
    /// exists (else `UNKNOWN_MEMBER`), every partition owned by this member (else
    /// `NOT_PARTITION_OWNER`, naming the partitions it does not own), no negative offset (else
    /// `INVALID_ARGUMENT`). Only then is the store written; a rejected commit writes nothing.
    ///
    /// The commit holds the group's commit gate (shared) from its checks until its write is
    /// visible — handed to the store as its [`CommitFence`], so it stays held even if this
    /// future is dropped while the store's write goes on — and installing a generation takes
    /// the gate exclusively: no commit checked against generation G reaches the store after
    /// the group has moved to G+1. Heartbeats and reads never take the gate.
    pub async fn commit(
        &self,
        group_id: &str,
        member: &str,
        generation: Generation,
        offsets: &OffsetMap,
    ) -> Result<(), Error> {
        let result = self
            .commit_inner(group_id, member, generation, offsets)
            .await;
        if let Err(e) = &result {
            debug!(group = group_id, member, generation = generation.get(), code = e.code(), error = %e, "commit rejected");
        }
        result
    }

    async fn commit_inner(
        &self,
        group_id: &str,
        member: &str,
        generation: Generation,
        offsets: &OffsetMap,
    ) -> Result<(), Error> {
        require("group id", group_id)?;
        require("member id", member)?;
        let cell = self.group(group_id).ok_or_else(|| not_found(group_id))?;
        let gate = cell.gate.clone().read_owned().await;
        {
            let mut entry = cell.lock();
            if entry.removed {
                return Err(not_found(group_id));
            }
            let current = entry.generation;
            let group = match &entry.body {
                Body::Chapter(g) => g,
                Body::Classic(_) => {
                    return Err(Error::wrong_group_type(group_id, "chapter", "classic"))
                }
                Body::Unused => return Err(not_found(group_id)),
            };
            check_stable(group_id, group.state)?;
            check_generation(group_id, current, generation)?;
            let index = group
                .find(member)
                .ok_or_else(|| unknown_member(group_id, member))?;
            let slot = group.members[index].slot;
            if !offsets.keys().all(|tp| group.current.owns(slot, tp)) {
                return Err(Error::NotPartitionOwner {
                    group: group_id.to_string(),
                    member: member.to_string(),
                    generation: current,
                    partitions: offsets
                        .keys()
                        .filter(|tp| !group.current.owns(slot, tp))
                        .cloned()
                        .collect(),
                });
            }
            if !check_offsets(offsets)? {
                return Ok(());
            }
            entry.has_offsets = true;
        }
        // The fence holds the gate until the store is done with this write, even if this
        // future is dropped first: that is the fencing guarantee.
        self.store
            .commit(group_id, offsets, CommitFence::gate(gate))
            .await?;
        Ok(())
    }

    /// Commits offsets for `group` straight to the store, with no membership or generation
    /// checks: the path of a consumer with a manual assignment (docs/rules.md#commit-direct).
    /// The group's offsets then follow the group lifecycle (they expire
    /// `offsets_retention_ms` after the group is, or became, Empty).
    pub async fn commit_direct(&self, group_id: &str, offsets: &OffsetMap) -> Result<(), Error> {
        require("group id", group_id)?;
        if !check_offsets(offsets)? {
            return Ok(());
        }
        let (cell, gate) = loop {
            let cell = self.group_or_insert(group_id);
            let gate = cell.gate.clone().read_owned().await;
            let mut entry = cell.lock();
            if entry.removed {
                continue;
            }
            entry.has_offsets = true;
            let now = self.clock.now_ms();
            // A simple group's offsets expire counted from its last commit (as through
            // `commit_offsets`).
            if matches!(entry.body, Body::Unused) {
                entry.empty_since = Some(now);
            }
            entry.note_membership(now);
            self.arm(&mut entry);
            drop(entry);
            break (cell, gate);
        };
        drop(cell);
        self.store
            .commit(group_id, offsets, CommitFence::gate(gate))
            .await?;
        Ok(())
    }

    /// Deletes an Empty group and its committed offsets (Kafka's DeleteGroups). A group
    /// known only by its offsets counts as Empty.
    ///
    /// Errors: `INVALID_ARGUMENT`; `GROUP_ID_NOT_FOUND` for a group the coordinator does not
    /// know; `NON_EMPTY_GROUP` (68) while it has members; `STORAGE_ERROR` if the offsets
    /// cannot be deleted (then nothing changed).
    pub async fn delete_group(&self, group_id: &str) -> Result<(), Error> {
        require("group id", group_id)?;
        let cell = self.group(group_id).ok_or_else(|| not_found(group_id))?;
        // Exclusive: no join can make the group non-empty, and no commit can land, while
        // its offsets are deleted. Shared with the store's fence, so a caller that drops
        // this future mid-delete does not let a commit run beside the delete.
        let gate = Arc::new(cell.gate.clone().write_owned().await);
        let generation = {
            let entry = cell.lock();
            if entry.removed {
                return Err(not_found(group_id));
            }
            if entry.has_members() {
                return Err(Error::NonEmptyGroup {
                    group: group_id.to_string(),
                });
            }
            entry.generation
        };
        self.store
            .delete(group_id, None, CommitFence::exclusive(&gate))
            .await?;
        {
            let mut entry = cell.lock();
            entry.has_offsets = false;
            entry.removed = true;
        }
        self.forget(&cell, generation);
        drop(gate);
        info!(group = group_id, "group deleted");
        Ok(())
    }

    /// The committed next offset of `tp` for `group` (any group id, as Kafka's OffsetFetch).
    pub async fn committed(
        &self,
        group_id: &str,
        tp: &TopicPartition,
    ) -> Result<Option<i64>, Error> {
        require("group id", group_id)?;
        Ok(self.store.committed(group_id, tp).await?)
    }

    /// Every committed offset of `group`.
    pub async fn committed_offsets(&self, group_id: &str) -> Result<OffsetMap, Error> {
        require("group id", group_id)?;
        Ok(self.store.list(group_id).await?)
    }

    /// Registers every group the store holds offsets for, as an Empty group whose retention
    /// period starts now. Call it once after building a coordinator over a store with
    /// history, so that those offsets expire and those groups are listed; until then the
    /// coordinator only knows the groups used since it was built.
    ///
    /// Error: `STORAGE_ERROR` if the store cannot list its groups.
    pub async fn load(&self) -> Result<usize, Error> {
        let ids = self.store.groups().await?;
        let now = self.clock.now_ms();
        for id in &ids {
            let cell = self.group_or_insert(id);
            let mut entry = cell.lock();
            entry.has_offsets = true;
            entry.note_membership(now);
            self.arm(&mut entry);
        }
        Ok(ids.len())
    }
}

fn chapter_of(entry: &mut GroupEntry) -> Result<&mut Group, Error> {
    let id = entry.id.clone();
    entry.chapter_mut().ok_or_else(|| not_found(&id))
}

/// Refuses negative offsets; returns whether there is anything to write.
fn check_offsets(offsets: &OffsetMap) -> Result<bool, Error> {
    match offsets.iter().find(|(_, &o)| o < 0) {
        Some((tp, offset)) => Err(Error::invalid(
            "offset",
            format!("{tp}: offset {offset} is negative"),
        )),
        None => Ok(!offsets.is_empty()),
    }
}

fn unknown_member(group: &str, member: &str) -> Error {
    Error::UnknownMember {
        group: group.to_string(),
        member: member.to_string(),
    }
}

fn check_generation(group: &str, current: Generation, requested: Generation) -> Result<(), Error> {
    if requested == current {
        Ok(())
    } else {
        Err(Error::IllegalGeneration {
            group: group.to_string(),
            requested: Some(requested),
            current,
        })
    }
}

fn check_stable(group: &str, state: GroupState) -> Result<(), Error> {
    if state == GroupState::Stable {
        Ok(())
    } else {
        Err(Error::RebalanceInProgress {
            group: group.to_string(),
            state,
        })
    }
}
