//! The calls of Kafka's share groups: the [`ShareGroups`] view (`coordinator.share()`).
//!
//! A heartbeat answers at once and takes its group's commit gate exclusively, as the
//! consumer protocol's does.

use std::sync::Arc;

use super::protocol::{
    ShareGroupDescription, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
    SHARE_LEAVE_GROUP_MEMBER_EPOCH,
};
use super::state::ShareGroup;
use crate::coordinator::{not_found, Coordinator};
use crate::error::Error;
use crate::group::GroupKind;

fn invalid(reason: &str) -> Error {
    Error::InvalidRequest {
        reason: reason.to_string(),
    }
}

/// Kafka 4.2's `throwIfShareGroupHeartbeatRequestIsInvalid`, in its order and with its
/// messages (`INVALID_REQUEST`).
pub(crate) fn validate(req: &ShareGroupHeartbeatRequest) -> Result<(), Error> {
    if req.group_id.trim().is_empty() {
        return Err(invalid("GroupId can't be empty."));
    }
    if req.rack_id.as_deref().is_some_and(|r| r.trim().is_empty()) {
        return Err(invalid("RackId can't be empty."));
    }
    if req.member_id.trim().is_empty() {
        return Err(invalid("MemberId can't be empty."));
    }
    if req.member_epoch == 0 {
        if req
            .subscribed_topic_names
            .as_ref()
            .is_none_or(|t| t.is_empty())
        {
            return Err(invalid(
                "SubscribedTopicNames must be set in first request.",
            ));
        }
    } else if req.member_epoch < 0 && req.member_epoch != SHARE_LEAVE_GROUP_MEMBER_EPOCH {
        return Err(invalid("MemberEpoch is invalid."));
    }
    Ok(())
}

/// Kafka's share groups (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe, as a wire
/// front calls them (`coordinator.share()`).
#[derive(Clone, Copy, Debug)]
pub struct ShareGroups<'a> {
    coordinator: &'a Coordinator,
}

impl Coordinator {
    /// The calls of Kafka's share groups (KIP-932).
    pub fn share(&self) -> ShareGroups<'_> {
        ShareGroups { coordinator: self }
    }
}

fn not_share_group(group: &str, actual: GroupKind) -> Error {
    Error::NotShareGroup {
        group: group.to_string(),
        actual: actual.as_str(),
    }
}

impl ShareGroups<'_> {
    /// Kafka's ShareGroupHeartbeat: joins (epoch 0), heartbeats, leaves (−1).
    ///
    /// Errors, in Kafka's order: `INVALID_REQUEST` (42, Kafka's validation and messages),
    /// `GROUP_ID_NOT_FOUND` (69: no such group for an epoch other than 0, or a group id held
    /// by a group of another kind — "Group … is not a share group."), `GROUP_MAX_SIZE_REACHED`
    /// (81), `UNKNOWN_MEMBER_ID` (25), `FENCED_MEMBER_EPOCH` (110).
    pub async fn heartbeat(
        self,
        req: &ShareGroupHeartbeatRequest,
    ) -> Result<ShareGroupHeartbeatResponse, Error> {
        let c = self.coordinator;
        validate(req)?;
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
        let result = {
            let mut entry = cell.lock();
            let now = c.clock.now_ms();
            // Only an unused group id becomes a share group: Kafka refuses a group id held by
            // a group of another kind, even an Empty one.
            if joining && entry.group.is_none() && !entry.has_offsets {
                entry.group = Some(Box::new(ShareGroup::new(cell.id.clone())));
            }
            let kind = entry.kind();
            let Some((group, generation)) = entry.split_mut::<ShareGroup>() else {
                return Err(match kind {
                    GroupKind::Simple if !joining => not_found(&req.group_id),
                    other => not_share_group(&req.group_id, other),
                });
            };
            let settings = c.share_settings(&req.group_id);
            let (result, outcome) = group.heartbeat(
                req,
                &mut c.ctx(now, generation, GroupKind::Share),
                &settings,
            );
            if outcome.membership_changed || !entry.has_members() {
                entry.note_membership(now);
                c.arm(&mut entry);
            } else if let Some(at) = outcome.deadline {
                c.arm_at(&mut entry, at);
            }
            result
        };
        drop(gate);
        result
    }

    /// Kafka's ShareGroupDescribe for one group.
    ///
    /// Errors: `GROUP_ID_NOT_FOUND` (no such group, or a group of another kind: Kafka's
    /// "Group … is not a share group.").
    pub async fn describe(self, group_id: &str) -> Result<ShareGroupDescription, Error> {
        let cell = self
            .coordinator
            .group(group_id)
            .ok_or_else(|| not_found(group_id))?;
        let entry = cell.lock();
        if entry.removed {
            return Err(not_found(group_id));
        }
        match entry.get::<ShareGroup>() {
            Some(g) => Ok(g.describe(entry.generation)),
            None if entry.kind() == GroupKind::Simple => Err(not_found(group_id)),
            None => Err(not_share_group(group_id, entry.kind())),
        }
    }
}
