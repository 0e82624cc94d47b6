//! The coordinator's calls for Kafka's classic group protocol.
//!
//! Each call answers when Kafka would: a JoinGroup when the join barrier completes (or at
//! once where Kafka answers at once), a follower's SyncGroup when the leader's arrives.
//! A caller that drops a waiting future (a client that disconnects) leaves the group as
//! Kafka does: the member stays until its session expires, it leaves, or a rebalance or sync
//! timeout removes it.

use std::sync::Arc;

use tracing::{debug, info};

use super::classic::{Answer, ClassicGroup, Ctx};
use super::entry::{Body, GroupCell, GroupEntry};
use super::{check_offsets, not_found, Coordinator, ExpiredMember};
use crate::classic::{
    ClassicGroupDescription, GroupKind, JoinGroupRequest, JoinGroupResponse, LeavingMember,
    ListedGroup, OffsetCommitRequest, SyncGroupRequest, SyncGroupResponse,
};
use crate::error::Error;
use crate::offset_store::CommitFence;
use crate::types::{Generation, GroupState, TopicPartition};

fn invalid_group_id() -> Error {
    Error::InvalidGroupId {
        reason: "the group id must not be empty".into(),
    }
}

fn unknown_member(group: &str, member: &str) -> Error {
    Error::UnknownMember {
        group: group.to_string(),
        member: member.to_string(),
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

impl Coordinator {
    fn classic_ctx<'a>(&'a self, now: u64, generation: &'a mut Generation) -> Ctx<'a> {
        Ctx {
            now,
            generation,
            settings: &self.config.groups,
            ids: &*self.member_ids,
        }
    }

    /// Runs `f` on the classic group of `entry`, with its context; `None` for another kind.
    fn on_classic<T>(
        &self,
        entry: &mut GroupEntry,
        now: u64,
        f: impl FnOnce(&mut ClassicGroup, &mut Ctx<'_>) -> T,
    ) -> Option<T> {
        let GroupEntry {
            generation, body, ..
        } = entry;
        match body {
            Body::Classic(group) => {
                let mut ctx = self.classic_ctx(now, generation);
                Some(f(group, &mut ctx))
            }
            _ => None,
        }
    }

    /// Kafka's JoinGroup.
    ///
    /// Errors, in Kafka's check order: `INVALID_GROUP_ID` (24), `INVALID_SESSION_TIMEOUT`
    /// (26), `UNKNOWN_MEMBER` (25: a member id for a group that does not exist),
    /// `INCONSISTENT_GROUP_PROTOCOL` (23: no protocol type or protocols, none in common with
    /// the group, or a chapter group with members), `GROUP_MAX_SIZE_REACHED` (81),
    /// `MEMBER_ID_REQUIRED` (79, carrying the id to join with), `FENCED_INSTANCE_ID` (82),
    /// `REBALANCE_IN_PROGRESS` (27: a later JoinGroup of the same member superseded this one).
    pub async fn join_group(&self, req: JoinGroupRequest) -> Result<JoinGroupResponse, Error> {
        if req.group_id.is_empty() {
            return Err(invalid_group_id());
        }
        let g = &self.config.groups;
        let session = i64::from(req.session_timeout_ms);
        if session < g.min_session_timeout_ms as i64 || session > g.max_session_timeout_ms as i64 {
            return Err(Error::InvalidSessionTimeout {
                requested: session,
                min: g.min_session_timeout_ms,
                max: g.max_session_timeout_ms,
            });
        }
        if !req.member_id.is_empty() && self.group(&req.group_id).is_none() {
            return Err(unknown_member(&req.group_id, &req.member_id));
        }
        let answer = {
            let (cell, _gate) = self.install_lock(&req.group_id).await;
            let mut entry = cell.lock();
            let now = self.clock.now_ms();
            if entry.classic_or_convert().is_none() {
                return Err(Error::wrong_group_type(&req.group_id, "classic", "chapter"));
            }
            let answer = self
                .on_classic(&mut entry, now, |group, ctx| group.join(&req, ctx))
                .unwrap_or_else(|| Answer::Now(Err(not_found(&req.group_id))));
            entry.note_membership(now);
            self.arm(&mut entry);
            answer
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
    pub async fn sync_group(&self, req: SyncGroupRequest) -> Result<SyncGroupResponse, Error> {
        if req.group_id.is_empty() {
            return Err(invalid_group_id());
        }
        let cell = self
            .group(&req.group_id)
            .ok_or_else(|| unknown_member(&req.group_id, &req.member_id))?;
        let answer = {
            let mut entry = cell.lock();
            if entry.removed {
                return Err(unknown_member(&req.group_id, &req.member_id));
            }
            if entry.kind() == GroupKind::Chapter {
                return Err(Error::wrong_group_type(&req.group_id, "classic", "chapter"));
            }
            let now = self.clock.now_ms();
            // A sync only moves deadlines later (sessions renewed, the sync timeout
            // cancelled): nothing to arm, and no O(members) scan per sync.
            let before = match &entry.body {
                Body::Classic(g) => g.state,
                _ => GroupState::Dead,
            };
            let answer = self
                .on_classic(&mut entry, now, |group, ctx| group.sync(&req, ctx))
                .unwrap_or_else(|| Answer::Now(Err(unknown_member(&req.group_id, &req.member_id))));
            // The leader's sync installed the assignment: parked members got finite
            // session deadlines, which may be earlier than the armed one.
            if matches!(&entry.body, Body::Classic(g) if g.state != before) {
                self.arm(&mut entry);
            }
            answer
        };
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
    pub async fn heartbeat_group(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation: Option<Generation>,
    ) -> Result<(), Error> {
        if group_id.is_empty() {
            return Err(invalid_group_id());
        }
        let cell = self
            .group(group_id)
            .ok_or_else(|| unknown_member(group_id, member_id))?;
        let mut entry = cell.lock();
        if entry.removed {
            return Err(unknown_member(group_id, member_id));
        }
        if entry.kind() == GroupKind::Chapter {
            return Err(Error::wrong_group_type(group_id, "classic", "chapter"));
        }
        let now = self.clock.now_ms();
        self.on_classic(&mut entry, now, |group, ctx| {
            group.heartbeat(member_id, group_instance_id, generation, ctx)
        })
        .unwrap_or_else(|| Err(unknown_member(group_id, member_id)))
    }

    /// Kafka's LeaveGroup, for one or several members (by member id, or by instance id
    /// alone for a static member). Returns each member's result in request order; a leave
    /// starts a rebalance at once.
    ///
    /// Errors of the whole request: `INVALID_GROUP_ID`; `INCONSISTENT_GROUP_PROTOCOL` for a
    /// chapter group. Per member: `UNKNOWN_MEMBER`, `FENCED_INSTANCE_ID`.
    pub async fn leave_group(
        &self,
        group_id: &str,
        members: &[LeavingMember],
    ) -> Result<Vec<Result<(), Error>>, Error> {
        if group_id.is_empty() {
            return Err(invalid_group_id());
        }
        let unknown_all = || {
            members
                .iter()
                .map(|m| Err(unknown_member(group_id, &m.member_id)))
                .collect()
        };
        let Some(cell) = self.group(group_id) else {
            return Ok(unknown_all());
        };
        let _gate = cell.gate.clone().write_owned().await;
        let mut entry = cell.lock();
        if entry.removed {
            return Ok(unknown_all());
        }
        if entry.kind() == GroupKind::Chapter {
            return Err(Error::wrong_group_type(group_id, "classic", "chapter"));
        }
        let now = self.clock.now_ms();
        let results = self
            .on_classic(&mut entry, now, |group, ctx| group.leave(members, ctx))
            .unwrap_or_else(unknown_all);
        entry.note_membership(now);
        self.arm(&mut entry);
        Ok(results)
    }

    /// Kafka's OffsetCommit for a classic group (the caller checked that the topics and
    /// partitions exist, as Kafka's front does). A plain commit (no generation, no member)
    /// is allowed while the group is Empty or absent, and creates a simple group.
    ///
    /// Errors, applying to every partition: `GROUP_ID_NOT_FOUND` (a member's commit for a
    /// group that does not exist; Kafka before OffsetCommit v9 says `ILLEGAL_GENERATION`),
    /// `UNKNOWN_MEMBER`, `FENCED_INSTANCE_ID`, `ILLEGAL_GENERATION`, `REBALANCE_IN_PROGRESS`
    /// (CompletingRebalance: commits are allowed while PreparingRebalance, when eager
    /// clients commit before revoking), `NOT_PARTITION_OWNER` (only with
    /// [`check_classic_commit_ownership`](super::CoordinatorBuilder::check_classic_commit_ownership)),
    /// `INCONSISTENT_GROUP_PROTOCOL` (a chapter group with members), `INVALID_ARGUMENT`
    /// (a negative offset), `STORAGE_ERROR`.
    ///
    /// Fencing as for the chapter's commits: the commit holds its group's commit gate until
    /// its write is visible, so no commit checked against generation G lands after the join
    /// barrier installed G+1.
    pub async fn commit_offsets(&self, req: &OffsetCommitRequest) -> Result<(), Error> {
        let group_id = req.group_id.as_str();
        let anything = check_offsets(&req.offsets)?;
        let (cell, gate) = loop {
            let cell = match self.group(group_id) {
                Some(cell) => cell,
                None if req.generation.is_none() => self.group_or_insert(group_id),
                None => return Err(not_found(group_id)),
            };
            let gate = cell.gate.clone().read_owned().await;
            let mut entry = cell.lock();
            if entry.removed {
                continue;
            }
            let now = self.clock.now_ms();
            let plain = req.generation.is_none()
                && req.member_id.is_empty()
                && req.group_instance_id.is_none();
            match &entry.body {
                Body::Unused => {
                    if req.generation.is_some()
                        || !req.member_id.is_empty()
                        || req.group_instance_id.is_some()
                    {
                        return Err(unknown_member(group_id, &req.member_id));
                    }
                }
                Body::Chapter(g) => {
                    if !g.ids.is_empty() {
                        return Err(Error::wrong_group_type(group_id, "classic", "chapter"));
                    }
                    if !plain {
                        return Err(unknown_member(group_id, &req.member_id));
                    }
                }
                Body::Classic(_) => {
                    self.on_classic(&mut entry, now, |group, ctx| {
                        group.validate_commit(
                            req.generation,
                            &req.member_id,
                            req.group_instance_id.as_deref(),
                            &mut req.offsets.keys(),
                            ctx,
                        )
                    })
                    .unwrap_or(Ok(()))?;
                }
            }
            if !anything {
                return Ok(());
            }
            entry.has_offsets = true;
            // A simple group's offsets expire counted from their commit (Kafka), not from
            // the group's first commit.
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
            .commit(group_id, &req.offsets, CommitFence::gate(gate))
            .await?;
        Ok(())
    }

    /// Kafka's DescribeGroups for one group. A group known only by its offsets is an Empty
    /// group without a protocol type.
    ///
    /// Errors: `GROUP_ID_NOT_FOUND` (Kafka's DescribeGroups before v6 answers `Dead` with no
    /// error instead); `INCONSISTENT_GROUP_PROTOCOL` for a chapter group.
    pub async fn describe_group(&self, group_id: &str) -> Result<ClassicGroupDescription, Error> {
        let cell = self.group(group_id).ok_or_else(|| not_found(group_id))?;
        let entry = cell.lock();
        if entry.removed {
            return Err(not_found(group_id));
        }
        match &entry.body {
            Body::Classic(g) => Ok(g.describe(entry.generation)),
            Body::Chapter(g) if !g.ids.is_empty() => {
                Err(Error::wrong_group_type(group_id, "classic", "chapter"))
            }
            _ => Ok(ClassicGroupDescription {
                group_id: group_id.to_string(),
                state: GroupState::Empty,
                protocol_type: String::new(),
                protocol_name: String::new(),
                generation: entry.generation,
                leader: None,
                members: Vec::new(),
            }),
        }
    }

    /// Every group the coordinator knows, sorted by id: classic and chapter groups, and
    /// groups known only by their committed offsets (Empty, no protocol type).
    pub async fn list_groups(&self) -> Vec<ListedGroup> {
        let cells: Vec<Arc<GroupCell>> = self.read_groups().map.values().cloned().collect();
        let mut listed: Vec<ListedGroup> = cells
            .iter()
            .filter_map(|cell| {
                let entry = cell.lock();
                if entry.removed {
                    return None;
                }
                let (protocol_type, state) = match &entry.body {
                    Body::Classic(g) => (g.protocol_type.clone().unwrap_or_default(), g.state),
                    Body::Chapter(g) => ("consumer".to_string(), g.state),
                    Body::Unused => (String::new(), GroupState::Empty),
                };
                Some(ListedGroup {
                    group_id: cell.id.to_string(),
                    protocol_type,
                    state,
                    kind: entry.kind(),
                })
            })
            .collect();
        listed.sort_unstable_by(|a, b| a.group_id.cmp(&b.group_id));
        listed
    }

    /// Kafka's OffsetDelete: deletes the committed offsets of `partitions`. Returns each
    /// partition's result, in request order.
    ///
    /// Errors of the whole request: `GROUP_ID_NOT_FOUND`; `NON_EMPTY_GROUP` (68) for a group
    /// with members whose protocol type is not `consumer` (its subscriptions are unknown);
    /// `STORAGE_ERROR`. Per partition: `GROUP_SUBSCRIBED_TO_TOPIC` (86) while a member
    /// subscribes to the topic.
    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Result<(), Error>)>, Error> {
        let cell = self.group(group_id).ok_or_else(|| not_found(group_id))?;
        // Exclusive: a commit running beside the delete could be acknowledged and then
        // deleted, or land after it while the group is marked as having no offsets (and be
        // removed with the group, orphaned in the store).
        let gate = Arc::new(cell.gate.clone().write_owned().await);
        let results: Vec<(TopicPartition, Result<(), Error>)> = {
            let entry = cell.lock();
            if entry.removed {
                return Err(not_found(group_id));
            }
            let subscribed = |topic: &str| -> Result<bool, Error> {
                Ok(match &entry.body {
                    Body::Classic(g) if g.has_members() => {
                        if g.protocol_type.as_deref() != Some("consumer") {
                            return Err(Error::NonEmptyGroup {
                                group: group_id.to_string(),
                            });
                        }
                        g.is_subscribed_to(topic)
                    }
                    Body::Chapter(g) => g
                        .members
                        .iter()
                        .any(|m| m.topics.iter().any(|t| &**t == topic)),
                    _ => false,
                })
            };
            let mut results = Vec::with_capacity(partitions.len());
            for tp in partitions {
                let result = if subscribed(tp.topic())? {
                    Err(Error::GroupSubscribedToTopic {
                        group: group_id.to_string(),
                        topic: tp.topic().to_string(),
                    })
                } else {
                    Ok(())
                };
                results.push((tp.clone(), result));
            }
            results
        };
        let doomed: Vec<TopicPartition> = results
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(tp, _)| tp.clone())
            .collect();
        if !doomed.is_empty() {
            self.store
                .delete(group_id, Some(&doomed), CommitFence::exclusive(&gate))
                .await?;
            info!(
                group = group_id,
                partitions = doomed.len(),
                "offsets deleted"
            );
            if self.store.list(group_id).await?.is_empty() {
                let mut entry = cell.lock();
                entry.has_offsets = false;
                self.arm(&mut entry);
            }
        }
        drop(gate);
        Ok(results)
    }

    /// Does what is due in a classic group. The caller holds the commit gate.
    pub(super) fn expire_classic(
        &self,
        entry: &mut GroupEntry,
        now: u64,
        expired: &mut Vec<ExpiredMember>,
    ) {
        if let Some(gone) = self.on_classic(entry, now, |group, ctx| group.handle_due(ctx)) {
            expired.extend(gone);
        }
        entry.note_membership(now);
        self.arm(entry);
    }
}
