//! The calls of Kafka's consumer group protocol: the [`ConsumerGroups`] view
//! (`coordinator.consumer()`).
//!
//! A heartbeat answers at once (there is no barrier in this protocol). It takes its group's
//! commit gate exclusively, because it may move member epochs and partitions: so a commit
//! checked against a member's epoch lands before the heartbeat that moves the member on,
//! and no commit with a stale epoch lands.

use std::sync::Arc;

use super::protocol::{
    ConsumerGroupDescription, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
use super::state::ConsumerGroup;
use tracing::info;

use crate::coordinator::{not_found, ConsumerGroupSettings, Coordinator, GroupEntry};
use crate::error::Error;
use crate::group::classic::{ClassicGroup, CONSUMER_PROTOCOL_TYPE};
use crate::group::{Group, GroupKind};
use crate::ports::Assignor;
use crate::types::{Generation, GroupState};

fn invalid(reason: &str) -> Error {
    Error::InvalidRequest {
        reason: reason.to_string(),
    }
}

fn empty_string(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.trim().is_empty())
}

/// Kafka 4's `throwIfConsumerGroupHeartbeatRequestIsInvalid`, in its order and with its
/// messages (`INVALID_REQUEST`, `UNSUPPORTED_ASSIGNOR`).
pub(crate) fn validate(
    req: &ConsumerGroupHeartbeatRequest,
    assignors: &[Arc<dyn Assignor>],
) -> Result<(), Error> {
    if (req.member_epoch > 0
        || req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH
        || req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        && req.member_id.trim().is_empty()
    {
        return Err(invalid("MemberId can't be empty."));
    }
    if req.group_id.trim().is_empty() {
        return Err(invalid("GroupId can't be empty."));
    }
    if empty_string(req.instance_id.as_deref()) {
        return Err(invalid("InstanceId can't be empty."));
    }
    if empty_string(req.rack_id.as_deref()) {
        return Err(invalid("RackId can't be empty."));
    }
    if req.member_epoch == 0 {
        if req.rebalance_timeout_ms == -1 {
            return Err(invalid(
                "RebalanceTimeoutMs must be provided in first request.",
            ));
        }
        if req.topic_partitions.as_ref().is_none_or(|p| !p.is_empty()) {
            return Err(invalid("TopicPartitions must be empty when (re-)joining."));
        }
        if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
            return Err(invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when \
                 (re-)joining.",
            ));
        }
    } else if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        if req.instance_id.is_none() {
            return Err(invalid("InstanceId can't be null."));
        }
    } else if req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        return Err(invalid("MemberEpoch is invalid."));
    }
    if req.rebalance_timeout_ms < -1 {
        return Err(invalid("RebalanceTimeoutMs must be -1 or at least 0."));
    }
    if let Some(name) = req.server_assignor.as_deref() {
        if !assignors.iter().any(|a| a.name() == name) {
            return Err(Error::UnsupportedAssignor {
                assignor: name.to_string(),
                supported: assignors.iter().map(|a| a.name().to_string()).collect(),
            });
        }
    }
    Ok(())
}

/// Kafka's `validateOnlineUpgrade` and `convertToConsumerGroup`: the classic group of
/// `entry` (with members: an Empty one was taken over already) becomes a consumer-protocol
/// group if the policy allows the upgrade, its protocol type is `consumer`, it has no more
/// members than `group.consumer.max.size` and every member's embedded consumer protocol
/// decodes; every request parked in it is answered `REBALANCE_IN_PROGRESS` (its member
/// joins again, as a classic member of the consumer group). Returns the classic group with
/// the generation, to put back if the heartbeat fails.
///
/// Error: `GROUP_ID_NOT_FOUND` (Kafka's "Group … is not a consumer group.") where Kafka
/// refuses; nothing changed then.
fn upgrade(
    entry: &mut GroupEntry,
    settings: &ConsumerGroupSettings,
    now: u64,
) -> Result<(Box<dyn Group>, Generation), Error> {
    let group_id = entry.id.clone();
    let generation = entry.generation;
    let refuse = |why: &str| {
        info!(
            group = &*group_id,
            why, "cannot upgrade the classic group to a consumer-protocol group"
        );
        Error::NotConsumerGroup {
            group: group_id.to_string(),
            actual: "classic",
        }
    };
    let Some(classic) = entry.get_mut::<ClassicGroup>() else {
        return Err(refuse("it is not a classic group"));
    };
    if !settings.migration_policy.is_upgrade_enabled() {
        return Err(refuse("the online upgrade is disabled"));
    }
    if classic.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
        return Err(refuse(
            "the group does not use the consumer embedded protocol",
        ));
    }
    if classic.member_count() > settings.max_size as usize {
        return Err(refuse(
            "the group size exceeds the consumer group maximum size",
        ));
    }
    let converted = ConsumerGroup::from_classic(
        group_id.clone(),
        classic.protocol_name.as_deref(),
        classic.migrating_members(),
        generation,
        now,
    )?;
    // Kafka's `completeAllJoinFutures` / `completeAllSyncFutures` with REBALANCE_IN_PROGRESS.
    classic.answer_parked(&|| Error::RebalanceInProgress {
        group: group_id.to_string(),
        state: GroupState::PreparingRebalance,
    });
    let before = entry
        .group
        .replace(Box::new(converted))
        .ok_or_else(|| refuse("the group vanished"))?;
    Ok((before, generation))
}

/// Kafka's consumer group protocol (KIP-848): ConsumerGroupHeartbeat and
/// ConsumerGroupDescribe, as a wire front calls them (`coordinator.consumer()`). Offsets go
/// through [`coordinator.offsets()`](Coordinator::offsets) with
/// [`CommitAuthority::MemberEpoch`](crate::CommitAuthority::MemberEpoch).
#[derive(Clone, Copy, Debug)]
pub struct ConsumerGroups<'a> {
    coordinator: &'a Coordinator,
}

impl Coordinator {
    /// The calls of Kafka's consumer group protocol (KIP-848).
    pub fn consumer(&self) -> ConsumerGroups<'_> {
        ConsumerGroups { coordinator: self }
    }
}

impl ConsumerGroups<'_> {
    /// Kafka's ConsumerGroupHeartbeat: joins (epoch 0), heartbeats, reconciles, leaves (−1)
    /// or leaves for now (−2, a static member).
    ///
    /// A join (epoch 0) to a classic group with members converts it under
    /// `group.consumer.migration.policy` (see [`MigrationPolicy`](crate::MigrationPolicy)):
    /// its members stay, as members of the classic protocol. When the last consumer-protocol
    /// member of a group whose other members speak the classic protocol leaves (epoch −1,
    /// or fenced), the group becomes a classic group again if the policy allows it, and
    /// rebalances.
    ///
    /// Errors, in Kafka's order: `INVALID_REQUEST` (42, Kafka's validation and messages),
    /// `UNSUPPORTED_ASSIGNOR` (112), `GROUP_ID_NOT_FOUND` (69: no such group for an epoch
    /// other than 0, a group of another kind with members, or a classic group Kafka refuses
    /// to convert: the policy forbids it, another protocol type than `consumer`, more
    /// members than `group.consumer.max.size`, a member whose embedded consumer protocol —
    /// subscription or assignment — does not decode), `GROUP_MAX_SIZE_REACHED`
    /// (81), `UNKNOWN_MEMBER` (25), `INVALID_REGULAR_EXPRESSION` (128: a new expression
    /// that does not compile; nothing changed), `FENCED_MEMBER_EPOCH` (110), `UNRELEASED_INSTANCE_ID`
    /// (111), `FENCED_INSTANCE_ID` (82), `ASSIGNOR_FAILED` (no assignor registered, or one that
    /// failed: nothing changed).
    pub async fn heartbeat(
        self,
        req: &ConsumerGroupHeartbeatRequest,
    ) -> Result<ConsumerGroupHeartbeatResponse, Error> {
        let c = self.coordinator;
        validate(req, &c.consumer_assignors)?;
        let joining = req.member_epoch == 0;
        let (cell, gate) = if joining {
            c.install_lock(&req.group_id).await
        } else {
            loop {
                let cell = c
                    .group(&req.group_id)
                    .ok_or_else(|| not_found(&req.group_id))?;
                let gate = cell.gate.clone().write_owned().await;
                if !cell.lock().removed {
                    break (cell, gate);
                }
            }
        };
        let gate = Arc::new(gate);
        // The group's own config, read at every heartbeat (Kafka applies a change at
        // each member's next heartbeat).
        let settings = c.consumer_settings(&req.group_id);
        let result = {
            let mut entry = cell.lock();
            let now = c.clock.now_ms();
            // The group as it was, should the heartbeat that converted it fail.
            let mut before_upgrade = None;
            if joining {
                entry.convert_if_empty(ConsumerGroup::new);
                if entry.kind() == GroupKind::Classic {
                    before_upgrade = Some(upgrade(&mut entry, &settings, now)?);
                }
            }
            let kind = entry.kind();
            let Some((group, generation)) = entry.split_mut::<ConsumerGroup>() else {
                return Err(match kind {
                    GroupKind::Simple => not_found(&req.group_id),
                    other => Error::NotConsumerGroup {
                        group: req.group_id.clone(),
                        actual: other.as_str(),
                    },
                });
            };
            let mut ctx = c.ctx_with(now, generation, &settings, GroupKind::Consumer);
            let (result, outcome) = group.heartbeat(req, &mut ctx);
            let replacement = group.take_replacement(&mut ctx);
            if let (Some((_, generation)), Err(_)) = (&before_upgrade, &result) {
                // Undone below: put the generation back before the context counts it.
                *ctx.generation = *generation;
            }
            drop(ctx); // counts the epochs bumped, and gives the entry back
            if let Some(replacement) = replacement {
                entry.group = Some(replacement);
            }
            let upgraded = before_upgrade.is_some();
            match before_upgrade {
                // Kafka writes the conversion with the heartbeat's records or not at all.
                Some((classic, generation)) if result.is_err() => {
                    entry.group = Some(classic);
                    entry.generation = generation;
                }
                _ if upgraded => {
                    entry.note_membership(now);
                    c.arm(&mut entry);
                }
                _ => {}
            }
            if outcome.membership_changed || !entry.has_members() {
                entry.note_membership(now);
                c.arm(&mut entry);
            } else if let Some(at) = outcome.deadline {
                // Only this member's deadlines moved: no scan of the group.
                c.arm_at(&mut entry, at);
            }
            result
        };
        // What changed is stored before the member hears of it (Kafka answers a heartbeat
        // once its records are written). If the write fails the member gets the store's
        // error; the change stays in memory, as if the answer had been lost: the member's
        // next heartbeat carries on from it, and the next write stores it.
        c.write_due_record(&cell, &gate).await?;
        result
    }

    /// Runs `f` on the consumer group `group_id` under its commit gate, then stores its
    /// record if `f` made it due.
    async fn with_group<T>(
        self,
        group_id: &str,
        f: impl FnOnce(&mut ConsumerGroup, &mut crate::group::Ctx<'_>) -> T,
    ) -> Result<T, Error> {
        let c = self.coordinator;
        let (cell, gate) = loop {
            let cell = c.group(group_id).ok_or_else(|| not_found(group_id))?;
            let gate = cell.gate.clone().write_owned().await;
            if !cell.lock().removed {
                break (cell, gate);
            }
        };
        let gate = Arc::new(gate);
        let out = {
            let mut entry = cell.lock();
            let now = c.clock.now_ms();
            let kind = entry.kind();
            let Some((group, generation)) = entry.split_mut::<ConsumerGroup>() else {
                return Err(match kind {
                    GroupKind::Simple => not_found(group_id),
                    other => Error::NotConsumerGroup {
                        group: group_id.to_string(),
                        actual: other.as_str(),
                    },
                });
            };
            let settings = c.consumer_settings(group_id);
            let out = f(
                group,
                &mut c.ctx_with(now, generation, &settings, GroupKind::Consumer),
            );
            entry.note_membership(now);
            c.arm(&mut entry);
            out
        };
        c.write_due_record(&cell, &gate).await?;
        Ok(out)
    }

    /// Removes members as Kafka does when an admin removes them from a consumer-protocol
    /// group (`Admin.removeMembersFromConsumerGroup`, a LeaveGroup that Kafka's
    /// `classicGroupLeaveToConsumerGroup` serves): each member is fenced (static ones too)
    /// and the group epoch bumped, so the others get a new assignment at their next
    /// heartbeat and a removed member's next heartbeat answers `UNKNOWN_MEMBER_ID` (it joins
    /// again with epoch 0). Returns each member's result in order (`UNKNOWN_MEMBER_ID` for one
    /// not in the group). For tests (a broker's fault injection) and admin fronts.
    ///
    /// Errors of the whole call: `GROUP_ID_NOT_FOUND` (no such group, or one of another
    /// kind); the store's, when the group's record could not be written (the members are
    /// removed in memory all the same).
    pub async fn remove_members(
        self,
        group_id: &str,
        member_ids: &[&str],
    ) -> Result<Vec<Result<(), Error>>, Error> {
        self.with_group(group_id, |group, ctx| {
            member_ids
                .iter()
                .map(|m| group.remove_by_admin(m, ctx))
                .collect()
        })
        .await
    }

    /// Bumps the group epoch, as a change of a subscription or of the subscribed topics'
    /// metadata does: the next heartbeat computes a new target assignment and every member
    /// reconciles toward it (with a new member epoch). Nothing of Kafka's protocol calls
    /// this: it is for tests (a broker's fault injection). Returns the new group epoch.
    ///
    /// Errors: `GROUP_ID_NOT_FOUND` (no such group, or one of another kind); the store's.
    pub async fn bump_epoch(self, group_id: &str) -> Result<i32, Error> {
        self.with_group(group_id, |group, ctx| group.bump_epoch(ctx))
            .await
    }

    /// Kafka's ConsumerGroupDescribe for one group.
    ///
    /// Errors: `GROUP_ID_NOT_FOUND` (no such group, or a group of another kind: Kafka's
    /// "Group … is not a consumer group.").
    pub async fn describe(self, group_id: &str) -> Result<ConsumerGroupDescription, Error> {
        let cell = self
            .coordinator
            .group(group_id)
            .ok_or_else(|| not_found(group_id))?;
        let entry = cell.lock();
        if entry.removed {
            return Err(not_found(group_id));
        }
        match entry.get::<ConsumerGroup>() {
            Some(g) => Ok(g.describe(entry.generation)),
            None if entry.kind() == GroupKind::Simple => Err(not_found(group_id)),
            None => Err(Error::NotConsumerGroup {
                group: group_id.to_string(),
                actual: entry.kind().as_str(),
            }),
        }
    }
}
