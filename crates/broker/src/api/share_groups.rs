//! Kafka's share groups (KIP-932) on the wire, step 1: ShareGroupHeartbeat (76) and
//! ShareGroupDescribe (77), at Kafka 4.2's version 1. Topic ids are translated to names and
//! back; the group state (members, epochs, the assignment) is the core's
//! (`coordinator.share()`). A group this broker does not coordinate (several brokers over
//! PostgreSQL) is refused NOT_COORDINATOR after the ACL check, as for the other group APIs.
//! ShareFetch and ShareAcknowledge are not served yet.

use std::ops::RangeInclusive;

use coordinator_core::{
    ShareGroupHeartbeatRequest as CoreHeartbeat, ShareGroupHeartbeatResponse as CoreAnswer,
    TopicPartition,
};
use kafka_protocol::messages::share_group_describe_response::{self as describe, DescribedGroup};
use kafka_protocol::messages::share_group_heartbeat_response::{self as heartbeat};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tracing::debug;

use super::consumer_groups::by_topic;
use super::groups::{code, refusal, settle};
use super::registry::Api;
use super::{codes, Call};
use crate::acl::Operation;
use crate::shutdown::Shutdown;

fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

fn error_response(code: i16, message: String) -> ShareGroupHeartbeatResponse {
    ShareGroupHeartbeatResponse::default()
        .with_error_code(code)
        .with_error_message(Some(StrBytes::from_string(message)))
}

async fn heartbeat(
    call: &Call<'_>,
    request: ShareGroupHeartbeatRequest,
) -> ShareGroupHeartbeatResponse {
    if !call.may_group(Operation::Read, request.group_id.as_str()) {
        return error_response(
            codes::GROUP_AUTHORIZATION_FAILED,
            "Group authorization failed.".into(),
        );
    }
    if let Some(c) = refusal(call, &request.group_id) {
        return ShareGroupHeartbeatResponse::default().with_error_code(c);
    }
    let core = CoreHeartbeat {
        group_id: request.group_id.to_string(),
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        rack_id: request.rack_id.as_ref().map(|v| v.to_string()),
        subscribed_topic_names: request
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|n| n.to_string()).collect()),
        client_id: call.client_id.to_string(),
        client_host: format!("/{}", call.peer.ip()),
    };
    match call.context.coordinator.share().heartbeat(&core).await {
        // A member that leaves keeps its share session: its client acknowledges what it
        // holds and closes the session (ShareAcknowledge or ShareFetch with epoch -1) after
        // this heartbeat, as librdkafka's close does.
        Ok(mut answer) => {
            let share = &call.context.share;
            let (group, member) = (&core.group_id, &answer.member_id);
            if answer.member_epoch < 0 {
                share.sent_assignment(group, member, None);
            } else if answer.assignment.is_none()
                && share.sent_ids_changed(group, member, |name| call.context.topic_id(name))
            {
                // A topic of its assignment was made again under its name: Kafka's
                // coordinator sees the new topic id and sends the assignment again.
                if let Ok(d) = call.context.coordinator.share().describe(group).await {
                    answer.assignment = d
                        .members
                        .into_iter()
                        .find(|m| &m.member_id == member)
                        .map(|m| m.assignment);
                }
            }
            if let Some(partitions) = &answer.assignment {
                let ids = by_topic(call, partitions)
                    .into_iter()
                    .map(|(id, name, _)| (name, id))
                    .collect();
                share.sent_assignment(group, member, Some(ids));
            }
            response(call, answer)
        }
        Err(e) => {
            debug!(group = %core.group_id, member = %core.member_id, code = e.code(), error = %e, "share group heartbeat refused");
            let code = settle(call, &core.group_id, code(&e));
            // A member of a share group the broker knew before a restart (the group itself
            // is not kept, unlike in Kafka; its share-partitions are): UNKNOWN_MEMBER_ID, so
            // the client joins again with epoch 0 and carries on where the group stopped,
            // rather than GROUP_ID_NOT_FOUND, which librdkafka takes as fatal. A group id
            // never seen is GROUP_ID_NOT_FOUND, as in Kafka.
            if code == codes::GROUP_ID_NOT_FOUND
                && core.member_epoch > 0
                && call
                    .context
                    .coordinator
                    .group_kind(&core.group_id)
                    .is_none()
                && call
                    .context
                    .share
                    .all_start_offsets(&core.group_id)
                    .await
                    .is_ok_and(|kept| !kept.is_empty())
            {
                return error_response(
                    codes::UNKNOWN_MEMBER_ID,
                    format!(
                        "Member {} is not a member of share group {} (the broker restarted).",
                        core.member_id, core.group_id
                    ),
                );
            }
            error_response(code, e.to_string())
        }
    }
}

fn response(call: &Call<'_>, answer: CoreAnswer) -> ShareGroupHeartbeatResponse {
    let assignment = answer.assignment.map(|partitions| {
        heartbeat::Assignment::default().with_topic_partitions(
            by_topic(call, &partitions)
                .into_iter()
                .map(|(id, _, parts)| {
                    heartbeat::TopicPartitions::default()
                        .with_topic_id(id)
                        .with_partitions(parts)
                })
                .collect(),
        )
    });
    ShareGroupHeartbeatResponse::default()
        .with_member_id(Some(s(&answer.member_id)))
        .with_member_epoch(answer.member_epoch)
        .with_heartbeat_interval_ms(answer.heartbeat_interval_ms)
        .with_assignment(assignment)
}

fn described_assignment(call: &Call<'_>, partitions: &[TopicPartition]) -> describe::Assignment {
    describe::Assignment::default().with_topic_partitions(
        by_topic(call, partitions)
            .into_iter()
            .map(|(id, name, parts)| {
                describe::TopicPartitions::default()
                    .with_topic_id(id)
                    .with_topic_name(TopicName(s(&name)))
                    .with_partitions(parts)
            })
            .collect(),
    )
}

async fn describe_groups(
    call: &Call<'_>,
    request: ShareGroupDescribeRequest,
) -> ShareGroupDescribeResponse {
    let mut groups = Vec::with_capacity(request.group_ids.len());
    for id in &request.group_ids {
        let group = DescribedGroup::default().with_group_id(id.clone());
        if !call.may_group(Operation::Describe, id.as_str()) {
            groups.push(
                group
                    .with_error_code(codes::GROUP_AUTHORIZATION_FAILED)
                    .with_error_message(Some(StrBytes::from_static_str(
                        "Group authorization failed.",
                    ))),
            );
            continue;
        }
        if let Some(c) = refusal(call, id) {
            groups.push(group.with_error_code(c));
            continue;
        }
        groups.push(match call.context.coordinator.share().describe(id).await {
            Ok(d) => group
                .with_group_state(s(d.state.as_str()))
                .with_group_epoch(d.group_epoch)
                .with_assignment_epoch(d.assignment_epoch)
                .with_assignor_name(s(&d.assignor_name))
                .with_members(
                    d.members
                        .iter()
                        .map(|m| {
                            describe::Member::default()
                                .with_member_id(s(&m.member_id))
                                .with_rack_id(m.rack_id.as_deref().map(s))
                                .with_member_epoch(m.member_epoch)
                                .with_client_id(s(&m.client_id))
                                .with_client_host(s(&m.client_host))
                                .with_subscribed_topic_names(
                                    m.subscribed_topic_names
                                        .iter()
                                        .map(|n| TopicName(s(n)))
                                        .collect(),
                                )
                                .with_assignment(described_assignment(call, &m.assignment))
                        })
                        .collect(),
                ),
            Err(e) => group
                .with_error_code(code(&e))
                .with_error_message(Some(StrBytes::from_string(e.to_string()))),
        });
    }
    ShareGroupDescribeResponse::default().with_groups(groups)
}

pub(crate) struct ShareGroupHeartbeat;

impl Api for ShareGroupHeartbeat {
    const KEY: ApiKey = ApiKey::ShareGroupHeartbeat;
    const VERSIONS: RangeInclusive<i16> = 1..=1;
    type Request = ShareGroupHeartbeatRequest;

    async fn handle(
        call: &Call<'_>,
        request: ShareGroupHeartbeatRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<ShareGroupHeartbeatResponse> {
        Some(heartbeat(call, request).await)
    }
}

pub(crate) struct ShareGroupDescribe;

impl Api for ShareGroupDescribe {
    const KEY: ApiKey = ApiKey::ShareGroupDescribe;
    const VERSIONS: RangeInclusive<i16> = 1..=1;
    type Request = ShareGroupDescribeRequest;

    async fn handle(
        call: &Call<'_>,
        request: ShareGroupDescribeRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<ShareGroupDescribeResponse> {
        Some(describe_groups(call, request).await)
    }
}
