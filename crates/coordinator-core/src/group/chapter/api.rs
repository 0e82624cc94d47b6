//! The chapter's calls on the [`Coordinator`]: join, leave, heartbeat, assignment,
//! describe, commit. Their names and signatures are the chapter's public API.

use std::sync::Arc;

use tracing::{debug, info, warn};

use super::state::MemberEntry;
use super::ChapterGroup;
use crate::coordinator::{
    not_found, require, Batch, Coordinator, ExpiredMember, GroupCell, GroupEntry,
};
use crate::error::Error;
use crate::group::{downcast_mut, GroupKind};
use crate::ports::assign::MAX_PARTITIONS_PER_TOPIC;
use crate::ports::CommitFence;
use crate::types::{CommittedOffsets, Generation, GroupState, OffsetMap, TopicPartition};

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

impl Coordinator {
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
        let was_unused = entry.group.is_none();
        let strategy_count = self.assignors.len();
        let kind = entry.kind();
        let result = {
            entry.convert_if_empty(|id| ChapterGroup::new(id, strategy_count));
            let Some(group) = entry.get_mut::<ChapterGroup>() else {
                return Err(other_kind(group_id, kind));
            };
            self.join_chapter(group, member, subs, strategies, now, next)
        };
        match result {
            Ok(assignment) => {
                entry.generation = next;
                self.stats.rebalanced(GroupKind::Chapter, 1);
                entry.note_membership(now);
                self.arm(&mut entry);
                Ok(assignment)
            }
            Err(e) => {
                if was_unused {
                    // A first join that failed leaves no visible group behind.
                    entry.group = None;
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
        group: &mut ChapterGroup,
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
        group.log_rebalance(next, &self.assignors);
        let index = group
            .find(member)
            .ok_or_else(|| Error::unknown_member(&group.id, member))?;
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
        let now = self.clock.now_ms();
        let GroupEntry {
            generation, group, ..
        } = &mut *entry;
        let Some(group) = group else {
            return Ok(None);
        };
        let Some(group) = downcast_mut::<ChapterGroup>(&mut **group) else {
            return Err(other_kind(group_id, group.kind()));
        };
        let Some(index) = group.find(member) else {
            return Ok(None);
        };
        group.remove_members(&[index], &mut self.ctx(now, generation, GroupKind::Chapter));
        entry.note_membership(now);
        self.arm(&mut entry);
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
        chapter_in(&mut entry, group_id)?;
        f(&mut entry)
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
                .ok_or_else(|| Error::unknown_member(group_id, member))?;
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
            let group = chapter_in(&mut entry, group_id)?;
            let index = group
                .find(member)
                .ok_or_else(|| Error::unknown_member(group_id, member))?;
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
                Ok(_gate) => {
                    let now = self.clock.now_ms();
                    let GroupEntry {
                        generation, group, ..
                    } = &mut *entry;
                    let followed = group
                        .as_deref_mut()
                        .and_then(downcast_mut::<ChapterGroup>)
                        .is_some_and(|g| {
                            g.run_followup(&mut self.ctx(now, generation, GroupKind::Chapter))
                        });
                    if followed {
                        self.arm(&mut entry);
                    }
                }
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
                !entry.removed && entry.get::<ChapterGroup>().is_some()
            })
            .map(|cell| cell.id.to_string())
            .collect();
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
        self.commit_batch(group_id, member, generation, Batch::Plain(offsets))
            .await
    }

    /// [`commit`](Self::commit) with each offset's leader epoch and metadata (Kafka's
    /// `OffsetAndMetadata`; the commit time is set here). The same checks, in the same
    /// order, and then `OFFSET_METADATA_TOO_LARGE` for a metadata string longer than
    /// `offset.metadata.max.bytes`.
    pub async fn commit_with_metadata(
        &self,
        group_id: &str,
        member: &str,
        generation: Generation,
        offsets: &CommittedOffsets,
    ) -> Result<(), Error> {
        self.commit_batch(group_id, member, generation, Batch::Full(offsets))
            .await
    }

    async fn commit_batch(
        &self,
        group_id: &str,
        member: &str,
        generation: Generation,
        batch: Batch<'_>,
    ) -> Result<(), Error> {
        let result = self.commit_inner(group_id, member, generation, batch).await;
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
        batch: Batch<'_>,
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
            let group = chapter_in(&mut entry, group_id)?;
            check_stable(group_id, group.state)?;
            check_generation(group_id, current, generation)?;
            let index = group
                .find(member)
                .ok_or_else(|| Error::unknown_member(group_id, member))?;
            let slot = group.members[index].slot;
            let owns = |tp: &TopicPartition| group.current.owns(slot, tp);
            let all_owned = match batch {
                Batch::Plain(o) => o.keys().all(owns),
                Batch::Full(o) => o.keys().all(owns),
            };
            if !all_owned {
                return Err(Error::NotPartitionOwner {
                    group: group_id.to_string(),
                    member: member.to_string(),
                    generation: current,
                    partitions: batch
                        .partitions()
                        .filter(|tp| !group.current.owns(slot, tp))
                        .cloned()
                        .collect(),
                });
            }
            if !batch.check(group_id, self.config.offset_metadata_max_bytes)? {
                return Ok(());
            }
            entry.has_offsets = true;
            // One mark for the whole commit, no clock read (the hot path): see
            // OffsetTimes::member_commit. Its time is not stored with the offsets either.
            entry.offset_times.member_committed();
        }
        // The fence holds the gate until the store is done with this write, even if this
        // future is dropped first: that is the fencing guarantee.
        let now = match batch {
            // Bare offsets carry no commit time to the store.
            Batch::Plain(_) => 0,
            Batch::Full(_) => self.clock.now_ms(),
        };
        batch
            .write(
                &*self.store,
                &self.stats,
                group_id,
                now,
                CommitFence::gate(gate),
            )
            .await?;
        Ok(())
    }
}

fn chapter_of(entry: &mut GroupEntry) -> Result<&mut ChapterGroup, Error> {
    let id = entry.id.clone();
    entry
        .get_mut::<ChapterGroup>()
        .ok_or_else(|| not_found(&id))
}

/// The chapter group of `entry`: `GROUP_ID_NOT_FOUND` for a removed or simple group,
/// `INCONSISTENT_GROUP_PROTOCOL` for a group of another kind.
fn chapter_in<'a>(
    entry: &'a mut GroupEntry,
    group_id: &str,
) -> Result<&'a mut ChapterGroup, Error> {
    if entry.removed {
        return Err(not_found(group_id));
    }
    let kind = entry.kind();
    match entry.group.as_deref_mut() {
        None => Err(not_found(group_id)),
        Some(group) => {
            downcast_mut::<ChapterGroup>(group).ok_or_else(|| other_kind(group_id, kind))
        }
    }
}

/// A chapter call on a group of another kind.
fn other_kind(group: &str, kind: GroupKind) -> Error {
    Error::wrong_group_type(group, "chapter", kind.as_str())
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
