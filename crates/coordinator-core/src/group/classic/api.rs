//! The calls of Kafka's classic group protocol: the [`ClassicGroups`] view
//! (`coordinator.classic()`).
//!
//! Each call answers when Kafka would: a JoinGroup when the join barrier completes (or at
//! once where Kafka answers at once), a follower's SyncGroup when the leader's arrives.
//! A caller that drops a waiting future (a client that disconnects) leaves the group as
//! Kafka does: the member stays until its session expires, it leaves, or a rebalance or sync
//! timeout removes it.

use std::sync::Arc;

use tracing::{debug, warn};

use super::protocol::{
    ClassicGroupDescription, JoinGroupRequest, JoinGroupResponse, LeavingMember, SyncGroupRequest,
    SyncGroupResponse,
};
use super::state::{Answer, ClassicGroup};
use crate::coordinator::{not_found, Coordinator, GroupCell, GroupEntry};
use crate::error::{Error, StorageError, StorageErrorKind};
use crate::group::consumer::ConsumerGroup;
use crate::group::{Ctx, Group, GroupKind};
use crate::ports::CommitFence;
use crate::types::{Generation, GroupState};

fn invalid_group_id() -> Error {
    Error::InvalidGroupId {
        reason: "the group id must not be empty".into(),
    }
}

/// A classic call on a group of another kind.
fn other_kind(group: &str, kind: GroupKind) -> Error {
    Error::wrong_group_type(group, "classic", kind.as_str())
}

/// Refuses a classic call on a group of another kind (with or without members; a simple
/// group, known by its offsets only, is no other kind).
fn refuse_other_kind(group: &str, kind: GroupKind) -> Result<(), Error> {
    match kind {
        GroupKind::Classic | GroupKind::Simple => Ok(()),
        other => Err(other_kind(group, other)),
    }
}

/// A parked request whose answer never came: its member joined again (superseding it) or
/// the group moved on. The client joins again.
fn superseded(group: &str) -> Error {
    Error::RebalanceInProgress {
        group: group.to_string(),
        state: GroupState::PreparingRebalance,
    }
}

/// Fails a staged assignment whose writer was dropped before the store answered.
struct StageGuard<'a> {
    coordinator: &'a Coordinator,
    cell: &'a GroupCell,
    seq: u64,
    done: bool,
}

impl Drop for StageGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            let cancelled = StorageError::new(
                StorageErrorKind::Other,
                "the SyncGroup storing the group's record was cancelled",
            );
            self.coordinator
                .finish_stage(self.cell, self.seq, Err(&cancelled));
        }
    }
}

/// Kafka's classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and
/// DescribeGroups, as a wire front calls them (`coordinator.classic()`). A call on a group
/// of another kind with members is refused with `INCONSISTENT_GROUP_PROTOCOL`, except a
/// consumer-protocol group: JoinGroup, SyncGroup, Heartbeat and LeaveGroup are then answered
/// as Kafka's `classicGroup*ToConsumerGroup` answer a member of the classic protocol inside
/// it (its epoch is its generation, its assignment the group's server-side one, a change of it
/// signalled by `REBALANCE_IN_PROGRESS`). An Empty group of another kind is taken over by
/// the next JoinGroup, as in Kafka.
#[derive(Clone, Copy, Debug)]
pub struct ClassicGroups<'a> {
    coordinator: &'a Coordinator,
}

impl Coordinator {
    /// The calls of Kafka's classic group protocol.
    pub fn classic(&self) -> ClassicGroups<'_> {
        ClassicGroups { coordinator: self }
    }

    /// Runs `f` on the classic group of `entry`, with its context; `None` for another kind
    /// or a simple group.
    fn on_classic<T>(
        &self,
        entry: &mut GroupEntry,
        now: u64,
        f: impl FnOnce(&mut ClassicGroup, &mut Ctx<'_>) -> T,
    ) -> Option<T> {
        let (group, generation) = entry.split_mut::<ClassicGroup>()?;
        Some(f(group, &mut self.ctx(now, generation, GroupKind::Classic)))
    }

    /// Writes the record of `cell`'s staged assignment `seq` under the group's commit gate,
    /// then installs it (answering every parked SyncGroup) or, if the store failed, answers
    /// them with its error and rebalances — Kafka's `storeGroup` and its callback. If this
    /// future is dropped before the store answers, the stage fails the same way (members
    /// join again): nobody is left parked.
    async fn store_staged(&self, cell: &Arc<GroupCell>, seq: u64) {
        let mut guard = StageGuard {
            coordinator: self,
            cell,
            seq,
            done: false,
        };
        let gate = Arc::new(cell.gate.clone().write_owned().await);
        let record = {
            let entry = cell.lock();
            let generation = entry.generation;
            entry
                .get::<ClassicGroup>()
                .filter(|_| !entry.removed)
                .and_then(|g| g.staged_record(seq, generation))
        };
        let Some(record) = record else {
            guard.done = true; // superseded meanwhile: whoever did it answered the members
            return;
        };
        let written = self
            .store
            .write_group(&cell.id, Some(&record), CommitFence::exclusive(&gate))
            .await;
        if let Err(e) = &written {
            warn!(group = &*cell.id, error = %e, "the group's record could not be stored; the members join again");
        }
        guard.done = true;
        self.finish_stage(cell, seq, written.as_ref().map(|_| ()));
        drop(gate);
    }

    fn finish_stage(&self, cell: &GroupCell, seq: u64, written: Result<(), &StorageError>) {
        let mut entry = cell.lock();
        let now = self.clock.now_ms();
        if written.is_ok() {
            entry.recorded = true;
        }
        self.on_classic(&mut entry, now, |group, ctx| {
            group.finish_staged(seq, written, ctx)
        });
        entry.note_membership(now);
        self.arm(&mut entry);
    }

    /// Kafka's JoinGroup; see [`ClassicGroups::join`].
    #[deprecated(since = "0.2.0", note = "use `coordinator.classic().join(req)`")]
    pub async fn join_group(&self, req: JoinGroupRequest) -> Result<JoinGroupResponse, Error> {
        self.classic().join(req).await
    }

    /// Kafka's SyncGroup; see [`ClassicGroups::sync`].
    #[deprecated(since = "0.2.0", note = "use `coordinator.classic().sync(req)`")]
    pub async fn sync_group(&self, req: SyncGroupRequest) -> Result<SyncGroupResponse, Error> {
        self.classic().sync(req).await
    }

    /// Kafka's Heartbeat; see [`ClassicGroups::heartbeat`].
    #[deprecated(since = "0.2.0", note = "use `coordinator.classic().heartbeat(..)`")]
    pub async fn heartbeat_group(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation: Option<Generation>,
    ) -> Result<(), Error> {
        self.classic()
            .heartbeat(group_id, member_id, group_instance_id, generation)
            .await
    }

    /// Kafka's LeaveGroup; see [`ClassicGroups::leave`].
    #[deprecated(since = "0.2.0", note = "use `coordinator.classic().leave(..)`")]
    pub async fn leave_group(
        &self,
        group_id: &str,
        members: &[LeavingMember],
    ) -> Result<Vec<Result<(), Error>>, Error> {
        self.classic().leave(group_id, members).await
    }

    /// Kafka's DescribeGroups for one group; see [`ClassicGroups::describe`].
    #[deprecated(
        since = "0.2.0",
        note = "use `coordinator.classic().describe(group_id)`"
    )]
    pub async fn describe_group(&self, group_id: &str) -> Result<ClassicGroupDescription, Error> {
        self.classic().describe(group_id).await
    }
}

impl ClassicGroups<'_> {
    /// Kafka's JoinGroup.
    ///
    /// Errors, in Kafka's check order: `INVALID_GROUP_ID` (24), `INVALID_SESSION_TIMEOUT`
    /// (26), `UNKNOWN_MEMBER` (25: a member id for a group that does not exist),
    /// `INCONSISTENT_GROUP_PROTOCOL` (23: no protocol type or protocols, none in common with
    /// the group, or a chapter group with members), `GROUP_MAX_SIZE_REACHED` (81),
    /// `MEMBER_ID_REQUIRED` (79, carrying the id to join with), `FENCED_INSTANCE_ID` (82),
    /// `REBALANCE_IN_PROGRESS` (27: a later JoinGroup of the same member superseded this one).
    pub async fn join(self, req: JoinGroupRequest) -> Result<JoinGroupResponse, Error> {
        if req.group_id.is_empty() {
            return Err(invalid_group_id());
        }
        let g = &self.coordinator.config.groups;
        let session = i64::from(req.session_timeout_ms);
        if session < g.min_session_timeout_ms as i64 || session > g.max_session_timeout_ms as i64 {
            return Err(Error::InvalidSessionTimeout {
                requested: session,
                min: g.min_session_timeout_ms,
                max: g.max_session_timeout_ms,
            });
        }
        if !req.member_id.is_empty() && self.coordinator.group(&req.group_id).is_none() {
            return Err(Error::unknown_member(&req.group_id, &req.member_id));
        }
        let answer = {
            let (cell, gate) = self.coordinator.install_lock(&req.group_id).await;
            let gate = Arc::new(gate);
            let settings = self.coordinator.consumer_settings(&req.group_id);
            // `Err`: the group is a consumer-protocol group with members, and this is Kafka's
            // `classicGroupJoinToConsumerGroup`'s answer, given once its record is written.
            let answer: Result<Answer<_>, _> = {
                let mut entry = cell.lock();
                let now = self.coordinator.clock.now_ms();
                entry.convert_if_empty(ClassicGroup::new);
                if let Some((group, generation)) = entry.split_mut::<ConsumerGroup>() {
                    let mut ctx =
                        self.coordinator
                            .ctx_with(now, generation, &settings, GroupKind::Consumer);
                    let (result, outcome) = group.classic_join(&req, &mut ctx);
                    // A static member that replaced the last consumer-protocol member: the
                    // group is classic again (Kafka's `convertToClassicGroup`).
                    let replacement = group.take_replacement(&mut ctx);
                    drop(ctx); // counts the epochs bumped, and gives the entry back
                    if let Some(replacement) = replacement {
                        entry.group = Some(replacement);
                    }
                    if outcome.membership_changed {
                        entry.note_membership(now);
                        self.coordinator.arm(&mut entry);
                    } else if let Some(at) = outcome.deadline {
                        self.coordinator.arm_at(&mut entry, at);
                    }
                    Err(result)
                } else {
                    let kind = entry.kind();
                    let Some(answer) =
                        self.coordinator
                            .on_classic(&mut entry, now, |group, ctx| group.join(&req, ctx))
                    else {
                        return Err(other_kind(&req.group_id, kind));
                    };
                    entry.note_membership(now);
                    self.coordinator.arm(&mut entry);
                    Ok(answer)
                }
            };
            match answer {
                Ok(answer) => {
                    let _logged = self.coordinator.write_due_record(&cell, &gate).await;
                    answer
                }
                Err(result) => {
                    self.coordinator.write_due_record(&cell, &gate).await?;
                    Answer::Now(result)
                }
            }
        };
        let result = match answer {
            Answer::Now(result) => result,
            Answer::Later(rx) => rx.await.unwrap_or_else(|_| Err(superseded(&req.group_id))),
        };
        if let Err(e) = &result {
            debug!(group = %req.group_id, member = %req.member_id, code = e.code(), error = %e, "join answered with an error");
        }
        result
    }

    /// Kafka's SyncGroup.
    ///
    /// Errors: `INVALID_GROUP_ID`, `UNKNOWN_MEMBER` (unknown group or member, or an Empty
    /// group), `FENCED_INSTANCE_ID`, `ILLEGAL_GENERATION`, `INCONSISTENT_GROUP_PROTOCOL`
    /// (a protocol type or name that is not the group's, or a chapter group),
    /// `REBALANCE_IN_PROGRESS` (the group is re-joining).
    pub async fn sync(self, req: SyncGroupRequest) -> Result<SyncGroupResponse, Error> {
        if req.group_id.is_empty() {
            return Err(invalid_group_id());
        }
        let cell = self
            .coordinator
            .group(&req.group_id)
            .ok_or_else(|| Error::unknown_member(&req.group_id, &req.member_id))?;
        let answer = {
            let mut entry = cell.lock();
            if entry.removed {
                return Err(Error::unknown_member(&req.group_id, &req.member_id));
            }
            let now = self.coordinator.clock.now_ms();
            if let Some((group, generation)) = entry.split_mut::<ConsumerGroup>() {
                // Kafka's `classicGroupSyncToConsumerGroup` (an Empty group has no member).
                let (response, at) = group.classic_sync(
                    &req,
                    &mut self.coordinator.ctx(now, generation, GroupKind::Consumer),
                )?;
                self.coordinator.arm_at(&mut entry, at);
                return Ok(response);
            }
            refuse_other_kind(&req.group_id, entry.kind())?;
            // A sync only moves deadlines later (sessions renewed, the sync timeout
            // cancelled): nothing to arm, and no O(members) scan per sync.
            let before = entry.state();
            let staged_before = entry.get::<ClassicGroup>().and_then(ClassicGroup::staged);
            let answer = self
                .coordinator
                .on_classic(&mut entry, now, |group, ctx| group.sync(&req, ctx))
                .unwrap_or_else(|| {
                    Answer::Now(Err(Error::unknown_member(&req.group_id, &req.member_id)))
                });
            // The leader's sync installed the assignment: parked members got finite
            // session deadlines, which may be earlier than the armed one.
            if entry.state() != before {
                self.coordinator.arm(&mut entry);
            }
            let staged = entry.get::<ClassicGroup>().and_then(ClassicGroup::staged);
            (answer, staged.filter(|s| Some(*s) != staged_before))
        };
        let (answer, staged) = answer;
        if let Some(seq) = staged {
            // This leader's sync staged the assignment: it is installed (and every parked
            // sync answered) once the group's record is written.
            self.coordinator.store_staged(&cell, seq).await;
        }
        match answer {
            Answer::Now(result) => result,
            Answer::Later(rx) => rx.await.unwrap_or_else(|_| Err(superseded(&req.group_id))),
        }
    }

    /// Kafka's Heartbeat: extends the member's session. Never waits for the offset store.
    ///
    /// Errors: `INVALID_GROUP_ID`, `UNKNOWN_MEMBER`, `FENCED_INSTANCE_ID`,
    /// `ILLEGAL_GENERATION`, `REBALANCE_IN_PROGRESS` (the lease is still extended: the member
    /// must join again), `INCONSISTENT_GROUP_PROTOCOL` for a chapter group.
    pub async fn heartbeat(
        self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation: Option<Generation>,
    ) -> Result<(), Error> {
        if group_id.is_empty() {
            return Err(invalid_group_id());
        }
        let cell = self
            .coordinator
            .group(group_id)
            .ok_or_else(|| Error::unknown_member(group_id, member_id))?;
        let mut entry = cell.lock();
        if entry.removed {
            return Err(Error::unknown_member(group_id, member_id));
        }
        let now = self.coordinator.clock.now_ms();
        // The classic group first (the hot path: one downcast); the kind only for the error.
        match self.coordinator.on_classic(&mut entry, now, |group, ctx| {
            group.heartbeat(member_id, group_instance_id, generation, ctx)
        }) {
            Some(result) => result,
            None => {
                if let Some((group, counter)) = entry.split_mut::<ConsumerGroup>() {
                    // Kafka's `classicGroupHeartbeatToConsumerGroup`.
                    let (result, at) = group.classic_heartbeat(
                        member_id,
                        group_instance_id,
                        generation,
                        &mut self.coordinator.ctx(now, counter, GroupKind::Consumer),
                    );
                    if let Some(at) = at {
                        self.coordinator.arm_at(&mut entry, at);
                    }
                    return result;
                }
                refuse_other_kind(group_id, entry.kind())?;
                Err(Error::unknown_member(group_id, member_id))
            }
        }
    }

    /// Kafka's LeaveGroup, for one or several members (by member id, or by instance id
    /// alone for a static member). Returns each member's result in request order; a leave
    /// starts a rebalance at once.
    ///
    /// Errors of the whole request: `INVALID_GROUP_ID`; `INCONSISTENT_GROUP_PROTOCOL` for a
    /// chapter group. Per member: `UNKNOWN_MEMBER`, `FENCED_INSTANCE_ID`.
    pub async fn leave(
        self,
        group_id: &str,
        members: &[LeavingMember],
    ) -> Result<Vec<Result<(), Error>>, Error> {
        if group_id.is_empty() {
            return Err(invalid_group_id());
        }
        let unknown_all = || {
            members
                .iter()
                .map(|m| Err(Error::unknown_member(group_id, &m.member_id)))
                .collect()
        };
        let Some(cell) = self.coordinator.group(group_id) else {
            return Ok(unknown_all());
        };
        let gate = Arc::new(cell.gate.clone().write_owned().await);
        let results = {
            let mut entry = cell.lock();
            if entry.removed {
                return Ok(unknown_all());
            }
            let now = self.coordinator.clock.now_ms();
            let results = if let Some((group, generation)) = entry.split_mut::<ConsumerGroup>() {
                // Kafka's `classicGroupLeaveToConsumerGroup`.
                group.classic_leave(
                    members,
                    &mut self.coordinator.ctx(now, generation, GroupKind::Consumer),
                )
            } else {
                refuse_other_kind(group_id, entry.kind())?;
                self.coordinator
                    .on_classic(&mut entry, now, |group, ctx| group.leave(members, ctx))
                    .unwrap_or_else(unknown_all)
            };
            entry.note_membership(now);
            self.coordinator.arm(&mut entry);
            results
        };
        let _logged = self.coordinator.write_due_record(&cell, &gate).await;
        Ok(results)
    }

    /// Starts a rebalance of a group with members, as Kafka does when a member's metadata
    /// changes (`prepareRebalance`): a Stable or CompletingRebalance group goes to
    /// PreparingRebalance, its members' next Heartbeat (and a SyncGroup waiting for the
    /// leader) answers `REBALANCE_IN_PROGRESS` and they join again. Nothing of Kafka's
    /// protocol calls this: it is for tests (a broker's fault injection). Returns whether a
    /// rebalance started (`false`: the group was already rebalancing, or Empty).
    ///
    /// Errors: `GROUP_ID_NOT_FOUND` (no such group); `INCONSISTENT_GROUP_PROTOCOL` for a
    /// group of another kind with members.
    pub async fn rebalance(self, group_id: &str, reason: &str) -> Result<bool, Error> {
        let cell = self
            .coordinator
            .group(group_id)
            .ok_or_else(|| not_found(group_id))?;
        let gate = Arc::new(cell.gate.clone().write_owned().await);
        let started = {
            let mut entry = cell.lock();
            if entry.removed {
                return Err(not_found(group_id));
            }
            refuse_other_kind(group_id, entry.kind())?;
            let now = self.coordinator.clock.now_ms();
            let started = self
                .coordinator
                .on_classic(&mut entry, now, |group, ctx| {
                    group.force_rebalance(ctx, reason)
                })
                .unwrap_or(false);
            entry.note_membership(now);
            self.coordinator.arm(&mut entry);
            started
        };
        let _logged = self.coordinator.write_due_record(&cell, &gate).await;
        Ok(started)
    }

    /// Kafka's DescribeGroups for one group. A group known only by its offsets is an Empty
    /// group without a protocol type.
    ///
    /// Errors: `GROUP_ID_NOT_FOUND` (Kafka's DescribeGroups before v6 answers `Dead` with no
    /// error instead); `INCONSISTENT_GROUP_PROTOCOL` for a chapter group.
    pub async fn describe(self, group_id: &str) -> Result<ClassicGroupDescription, Error> {
        let cell = self
            .coordinator
            .group(group_id)
            .ok_or_else(|| not_found(group_id))?;
        let entry = cell.lock();
        if entry.removed {
            return Err(not_found(group_id));
        }
        if let Some(g) = entry.get::<ClassicGroup>() {
            return Ok(g.describe(entry.generation));
        }
        if entry.has_members() {
            return Err(other_kind(group_id, entry.kind()));
        }
        // Another kind's Empty group, or a simple one: reported as ListGroups lists it.
        Ok(ClassicGroupDescription {
            group_id: group_id.to_string(),
            state: GroupState::Empty,
            protocol_type: entry.protocol_type().to_string(),
            protocol_name: String::new(),
            generation: entry.generation,
            leader: None,
            members: Vec::new(),
        })
    }
}
