//! The group coordinator: membership, rebalances, fencing of commits.

mod group;

pub(crate) use group::Group;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, PoisonError, RwLock};

use tokio::sync::{OwnedRwLockReadGuard, RwLock as GroupLock};
use tracing::{debug, info, warn};

use crate::assign::{Assignor, MAX_PARTITIONS_PER_TOPIC};
use crate::clock::{Clock, MonotonicClock};
use crate::error::Error;
use crate::metadata::TopicMetadata;
use crate::offset_store::{CommitFence, OffsetStore};
use crate::types::{Generation, GroupState, OffsetMap, TopicPartition};

use group::{MemberEntry, Undo, NO_SLOT};

/// Kafka's default `session.timeout.ms` (45 s).
pub const DEFAULT_SESSION_TIMEOUT_MS: u64 = 45_000;

/// A member's view of its assignment: the generation it belongs to and its partitions, in
/// topic then partition order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberAssignment {
    /// The generation this assignment belongs to.
    pub generation: Generation,
    /// The member's partitions (empty if it owns none).
    pub partitions: Vec<TopicPartition>,
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
    /// The assignment strategy of the current generation (`None` when Empty).
    pub strategy: Option<String>,
    /// The members, sorted by id.
    pub members: Vec<MemberDescription>,
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

/// The consumer-group coordinator.
///
/// `Send + Sync`: share it as `Arc<Coordinator>` between the tasks of a multi-threaded
/// runtime. See the [crate docs](crate) for the locking design.
pub struct Coordinator {
    clock: Arc<dyn Clock>,
    store: Arc<dyn OffsetStore>,
    metadata: Arc<dyn TopicMetadata>,
    /// Registered strategies; index 0 is the default a member gets when it names none.
    assignors: Vec<Arc<dyn Assignor>>,
    session_timeout_ms: u64,
    /// Group id → group. This lock is held only to find or insert a group, never across an
    /// await; each group has its own async lock.
    groups: RwLock<HashMap<Arc<str>, Arc<GroupLock<Group>>>>,
}

impl fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.assignors.iter().map(|a| a.name()).collect();
        f.debug_struct("Coordinator")
            .field("assignors", &names)
            .field("session_timeout_ms", &self.session_timeout_ms)
            .field("groups", &self.read_groups().len())
            .finish_non_exhaustive()
    }
}

/// Builds a [`Coordinator`]; see [`Coordinator::builder`].
pub struct CoordinatorBuilder {
    clock: Arc<dyn Clock>,
    store: Arc<dyn OffsetStore>,
    metadata: Arc<dyn TopicMetadata>,
    assignors: Vec<Arc<dyn Assignor>>,
    session_timeout_ms: u64,
}

impl fmt::Debug for CoordinatorBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.assignors.iter().map(|a| a.name()).collect();
        f.debug_struct("CoordinatorBuilder")
            .field("assignors", &names)
            .field("session_timeout_ms", &self.session_timeout_ms)
            .finish_non_exhaustive()
    }
}

impl CoordinatorBuilder {
    /// Uses `clock` for session deadlines (default: [`MonotonicClock`]).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Sets the session timeout: a member expires when `now > last heartbeat + timeout`
    /// (default [`DEFAULT_SESSION_TIMEOUT_MS`]).
    #[must_use]
    pub fn session_timeout_ms(mut self, ms: u64) -> Self {
        self.session_timeout_ms = ms;
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
        if self.session_timeout_ms == 0 {
            return Err(Error::invalid("session timeout", "must be at least 1 ms"));
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
            session_timeout_ms: self.session_timeout_ms,
            groups: RwLock::new(HashMap::new()),
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
            session_timeout_ms: DEFAULT_SESSION_TIMEOUT_MS,
        }
    }

    /// The session timeout in milliseconds.
    pub fn session_timeout_ms(&self) -> u64 {
        self.session_timeout_ms
    }

    /// The names of the registered strategies; the first is the default.
    pub fn strategies(&self) -> Vec<&str> {
        self.assignors.iter().map(|a| a.name()).collect()
    }

    /// The clock the coordinator reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    fn read_groups(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, HashMap<Arc<str>, Arc<GroupLock<Group>>>> {
        // Nothing panics while holding this lock, but a poisoned map is still consistent.
        self.groups.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn group(&self, group: &str) -> Option<Arc<GroupLock<Group>>> {
        self.read_groups().get(group).cloned()
    }

    fn group_or_insert(&self, group: &str) -> Arc<GroupLock<Group>> {
        if let Some(g) = self.group(group) {
            return g;
        }
        let mut groups = self.groups.write().unwrap_or_else(PoisonError::into_inner);
        groups
            .entry(Arc::from(group))
            .or_insert_with(|| {
                Arc::new(GroupLock::new(Group::new(
                    Arc::from(group),
                    self.assignors.len(),
                )))
            })
            .clone()
    }

    /// The group's lock, shared, if the group exists. The guard is owned so that a commit can
    /// hand it to the store as its [`CommitFence`].
    async fn read_existing(&self, group_id: &str) -> Result<OwnedRwLockReadGuard<Group>, Error> {
        let cell = self.group(group_id).ok_or_else(|| not_found(group_id))?;
        let group = cell.read_owned().await;
        if group.exists() {
            Ok(group)
        } else {
            Err(not_found(group_id))
        }
    }

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
    /// every unknown topic, sorted),
    /// `INCONSISTENT_GROUP_PROTOCOL` (no strategy shared with every other member),
    /// `ASSIGNOR_FAILED`. Nothing changes on error.
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

        let cell = self.group_or_insert(group_id);
        let mut group = cell.write().await;
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
                    group: group_id.to_string(),
                    member: member.to_string(),
                    offered: names(&strategies),
                    shared: shared_names,
                });
            }
        }
        let entry = MemberEntry {
            topics: subs.into_boxed_slice(),
            strategies: strategies.into_boxed_slice(),
            deadline_ms: AtomicU64::new(
                self.clock.now_ms().saturating_add(self.session_timeout_ms),
            ),
            slot: NO_SLOT,
        };
        let undo = group.upsert(member, entry);
        let from = group.generation;
        self.rebalance(&mut group, undo)?;
        let index = group.find(member).ok_or_else(|| Error::UnknownMember {
            group: group_id.to_string(),
            member: member.to_string(),
        })?;
        let partitions = group.member_assignment(index);
        info!(
            group = group_id,
            member,
            generation = group.generation.get(),
            partitions = partitions.len(),
            rejoin = existing.is_some(),
            "member joined"
        );
        debug_assert_eq!(group.generation, from.next());
        Ok(MemberAssignment {
            generation: group.generation,
            partitions,
        })
    }

    /// Rebalances after a membership change, or undoes the change if the rebalance fails.
    fn rebalance(&self, group: &mut Group, undo: Undo) -> Result<(), Error> {
        let from = group.generation;
        match group.rebalance(&self.assignors, &*self.metadata) {
            Ok(()) => {
                info!(
                    group = &*group.id,
                    from = from.get(),
                    to = group.generation.get(),
                    members = group.ids.len(),
                    assigned = group.current.assigned_count(),
                    strategy = group.strategy_name(&self.assignors).unwrap_or("none"),
                    state = group.state.as_str(),
                    "group rebalanced"
                );
                Ok(())
            }
            Err(e) => {
                warn!(group = &*group.id, code = e.code(), error = %e, "rebalance failed; membership change undone");
                group.undo(undo);
                Err(e)
            }
        }
    }

    /// Removes `member` from `group` and rebalances. Returns the new generation, or `None` if
    /// the group or member was unknown (leave is idempotent: no error, no new generation).
    ///
    /// Errors: `INVALID_ARGUMENT` for an empty id; `ASSIGNOR_FAILED` (the member stays).
    pub async fn leave(&self, group_id: &str, member: &str) -> Result<Option<Generation>, Error> {
        require("group id", group_id)?;
        require("member id", member)?;
        let Some(cell) = self.group(group_id) else {
            return Ok(None);
        };
        let mut group = cell.write().await;
        let Some(index) = group.find(member).filter(|_| group.exists()) else {
            return Ok(None);
        };
        let undo = group.remove(&[index]);
        self.rebalance(&mut group, undo)?;
        info!(
            group = group_id,
            member,
            generation = group.generation.get(),
            "member left"
        );
        Ok(Some(group.generation))
    }

    /// Extends `member`'s session lease to `now + session timeout`. It never commits and never
    /// changes an assignment.
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
        let group = self.read_existing(group_id).await?;
        check_generation(&group, generation)?;
        let index = group
            .find(member)
            .ok_or_else(|| unknown_member(group_id, member))?;
        let deadline = self.clock.now_ms().saturating_add(self.session_timeout_ms);
        group.members[index]
            .deadline_ms
            .store(deadline, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Removes every member whose session deadline has passed (`now > deadline`: at exactly
    /// the deadline a member is alive), rebalancing each group that lost members once.
    ///
    /// Returns the removed members ordered by group id, then member id. A group whose
    /// rebalance fails keeps its members (logged as a warning) and is retried next call.
    pub async fn expire_members(&self) -> Vec<ExpiredMember> {
        let now = self.clock.now_ms();
        let mut cells: Vec<(Arc<str>, Arc<GroupLock<Group>>)> = self
            .read_groups()
            .iter()
            .map(|(id, cell)| (id.clone(), cell.clone()))
            .collect();
        cells.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut expired = Vec::new();
        for (id, cell) in cells {
            // Look first under the shared lock, which commits in flight also hold: a group
            // with nobody to expire is never blocked behind a slow store write.
            let due = |group: &Group| -> Vec<usize> {
                (0..group.ids.len())
                    .filter(|&i| now > group.members[i].deadline())
                    .collect()
            };
            if due(&*cell.read().await).is_empty() {
                continue;
            }
            let mut group = cell.write().await;
            let gone = due(&group);
            if gone.is_empty() {
                continue;
            }
            let names: Vec<ExpiredMember> = gone
                .iter()
                .map(|&i| ExpiredMember {
                    group: id.to_string(),
                    member: group.ids[i].to_string(),
                })
                .collect();
            let undo = group.remove(&gone);
            if self.rebalance(&mut group, undo).is_ok() {
                for e in &names {
                    info!(group = %e.group, member = %e.member, now_ms = now, "member session expired");
                }
                expired.extend(names);
            }
        }
        expired
    }

    /// The coordinator's current view of `member`'s assignment, for refreshing a stale local
    /// copy.
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
        let group = self.read_existing(group_id).await?;
        let index = group
            .find(member)
            .ok_or_else(|| unknown_member(group_id, member))?;
        check_stable(&group)?;
        Ok(MemberAssignment {
            generation: group.generation,
            partitions: group.member_assignment(index),
        })
    }

    /// The group's state. Error: `GROUP_ID_NOT_FOUND` (or `INVALID_ARGUMENT` for an empty id).
    pub async fn state(&self, group_id: &str) -> Result<GroupState, Error> {
        Ok(self.describe(group_id).await?.state)
    }

    /// The group's generation, state, strategy and members.
    pub async fn describe(&self, group_id: &str) -> Result<GroupDescription, Error> {
        require("group id", group_id)?;
        let group = self.read_existing(group_id).await?;
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
                deadline_ms: m.deadline(),
            })
            .collect();
        Ok(GroupDescription {
            group: group_id.to_string(),
            generation: group.generation,
            state: group.state,
            strategy: group.strategy_name(&self.assignors).map(str::to_string),
            members,
        })
    }

    /// Ids of every existing group, sorted.
    pub async fn groups(&self) -> Vec<String> {
        let cells: Vec<(Arc<str>, Arc<GroupLock<Group>>)> = self
            .read_groups()
            .iter()
            .map(|(id, cell)| (id.clone(), cell.clone()))
            .collect();
        let mut ids = Vec::with_capacity(cells.len());
        for (id, cell) in cells {
            if cell.read().await.exists() {
                ids.push(id.to_string());
            }
        }
        ids.sort_unstable();
        ids
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
    /// The group's lock is held (shared) across the store write — and handed to the store as a
    /// [`CommitFence`], so it stays held even if this future is dropped while the store's
    /// write goes on — so a rebalance of this group waits for commits already past their
    /// checks: no commit checked against generation G reaches the store after the group has
    /// moved to G+1.
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
        let group = self.read_existing(group_id).await?;
        check_stable(&group)?;
        check_generation(&group, generation)?;
        let index = group
            .find(member)
            .ok_or_else(|| unknown_member(group_id, member))?;
        let slot = group.members[index].slot;
        if !offsets.keys().all(|tp| group.current.owns(slot, tp)) {
            return Err(Error::NotPartitionOwner {
                group: group_id.to_string(),
                member: member.to_string(),
                generation: group.generation,
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
        // The fence holds the group's read guard until the store is done with this write,
        // even if this future is dropped first: that is the fencing guarantee.
        self.store
            .commit(group_id, offsets, CommitFence::group(group))
            .await?;
        Ok(())
    }

    /// Commits offsets for `group` straight to the store, with no membership or generation
    /// checks: the path of a consumer with a manual assignment (SPEC.md: direct commits).
    pub async fn commit_direct(&self, group_id: &str, offsets: &OffsetMap) -> Result<(), Error> {
        require("group id", group_id)?;
        if check_offsets(offsets)? {
            self.store
                .commit(group_id, offsets, CommitFence::none())
                .await?;
        }
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

fn check_generation(group: &Group, generation: Generation) -> Result<(), Error> {
    if generation == group.generation {
        Ok(())
    } else {
        Err(Error::IllegalGeneration {
            group: group.id.to_string(),
            requested: generation,
            current: group.generation,
        })
    }
}

fn check_stable(group: &Group) -> Result<(), Error> {
    if group.state == GroupState::Stable {
        Ok(())
    } else {
        Err(Error::RebalanceInProgress {
            group: group.id.to_string(),
            state: group.state,
        })
    }
}
