//! Kafka's consumer group protocol (KIP-848) on the wire: ConsumerGroupHeartbeat (68) and
//! ConsumerGroupDescribe (69). Each translates topic ids to names and back; the group state
//! (epochs, target and current assignments, reconciliation) is the core's alone
//! (`coordinator.consumer()`). A group this broker does not coordinate (several brokers over
//! PostgreSQL) is refused NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while its slot
//! loads) after the ACL check, per group for ConsumerGroupDescribe.

use crate::acl::Operation;
use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use coordinator_core::{
    ConsumerGroupHeartbeatRequest as CoreHeartbeat, ConsumerGroupHeartbeatResponse as CoreAnswer,
    TopicPartition,
};
use kafka_protocol::messages::consumer_group_describe_response::{
    self as describe, DescribedGroup,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{self as heartbeat};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tracing::debug;
use uuid::Uuid;

use super::groups::{code, record_write_code, refusal, settle};
use super::registry::Api;
use super::{codes, Call};
use crate::shutdown::Shutdown;

fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

/// Partitions grouped by topic, sorted, as `(id, name, partitions)`.
pub(crate) fn by_topic(
    call: &Call<'_>,
    partitions: &[TopicPartition],
) -> Vec<(Uuid, String, Vec<i32>)> {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        topics
            .entry(tp.topic())
            .or_default()
            .push(i32::try_from(tp.partition()).unwrap_or(i32::MAX));
    }
    topics
        .into_iter()
        .map(|(name, parts)| (call.context.topic_id(name), name.to_string(), parts))
        .collect()
}

/// The partitions a heartbeat reports owning, by name; topics whose id names no topic are
/// left out (Kafka's reconciliation matches by id, so they never match a target either).
async fn owned(
    call: &Call<'_>,
    topics: &[consumer_group_heartbeat_request::TopicPartitions],
) -> Vec<TopicPartition> {
    let mut out = Vec::new();
    for t in topics {
        let Some(name) = call.context.topic_by_id(t.topic_id).await else {
            continue;
        };
        for &p in &t.partitions {
            if let Ok(p) = u32::try_from(p) {
                out.push(TopicPartition::new(name.as_str(), p));
            }
        }
    }
    out
}

fn error_response(code: i16, message: String) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(code)
        .with_error_message(Some(StrBytes::from_string(message)))
}

async fn heartbeat(
    call: &Call<'_>,
    request: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    // v1: the client chooses its member id (KIP-1082), so it is never empty.
    if call.version >= 1 && request.member_id.is_empty() {
        return error_response(codes::INVALID_REQUEST, "MemberId can't be empty.".into());
    }
    if !call.may_group(Operation::Read, request.group_id.as_str()) {
        return error_response(
            codes::GROUP_AUTHORIZATION_FAILED,
            "Group authorization failed.".into(),
        );
    }
    if let Some(c) = refusal(call, &request.group_id) {
        return ConsumerGroupHeartbeatResponse::default().with_error_code(c);
    }
    let topic_partitions = match &request.topic_partitions {
        Some(topics) => Some(owned(call, topics).await),
        None => None,
    };
    let core = CoreHeartbeat {
        group_id: request.group_id.to_string(),
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        instance_id: request.instance_id.as_ref().map(|v| v.to_string()),
        rack_id: request.rack_id.as_ref().map(|v| v.to_string()),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|n| n.to_string()).collect()),
        // An empty one (librdkafka sends it beside a list of names) means none: the core
        // reads it as Kafka does, dropping an expression the member had.
        subscribed_topic_regex: request
            .subscribed_topic_regex
            .as_ref()
            .map(|v| v.to_string()),
        server_assignor: request.server_assignor.as_ref().map(|v| v.to_string()),
        topic_partitions,
        client_id: call.client_id.to_string(),
        client_host: format!("/{}", call.peer.ip()),
    };
    match call.context.coordinator.consumer().heartbeat(&core).await {
        Ok(answer) => response(call, answer),
        Err(e) => {
            debug!(group = %core.group_id, member = %core.member_id, code = e.code(), error = %e, regex = ?core.subscribed_topic_regex, names = ?core.subscribed_topic_names, "consumer heartbeat refused");
            let code = settle(call, &core.group_id, record_write_code(&e));
            error_response(code, e.to_string())
        }
    }
}

fn response(call: &Call<'_>, answer: CoreAnswer) -> ConsumerGroupHeartbeatResponse {
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
    ConsumerGroupHeartbeatResponse::default()
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
    request: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
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
        groups.push(
            match call.context.coordinator.consumer().describe(id).await {
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
                                    .with_instance_id(m.instance_id.as_deref().map(s))
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
                                    .with_subscribed_topic_regex(
                                        m.subscribed_topic_regex.as_deref().map(s),
                                    )
                                    .with_assignment(described_assignment(call, &m.assignment))
                                    .with_target_assignment(described_assignment(
                                        call,
                                        &m.target_assignment,
                                    ))
                                    // v1: Kafka's 0 for a member of the classic
                                    // protocol, 1 for one of the consumer protocol.
                                    .with_member_type(if m.classic { 0 } else { 1 })
                            })
                            .collect(),
                    ),
                Err(e) => group
                    .with_error_code(code(&e))
                    .with_error_message(Some(StrBytes::from_string(e.to_string()))),
            },
        );
    }
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}

pub(crate) struct ConsumerGroupHeartbeat;

impl Api for ConsumerGroupHeartbeat {
    const KEY: ApiKey = ApiKey::ConsumerGroupHeartbeat;
    const VERSIONS: RangeInclusive<i16> = 0..=1;
    type Request = ConsumerGroupHeartbeatRequest;

    async fn handle(
        call: &Call<'_>,
        request: ConsumerGroupHeartbeatRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<ConsumerGroupHeartbeatResponse> {
        Some(heartbeat(call, request).await)
    }
}

pub(crate) struct ConsumerGroupDescribe;

impl Api for ConsumerGroupDescribe {
    const KEY: ApiKey = ApiKey::ConsumerGroupDescribe;
    const VERSIONS: RangeInclusive<i16> = 0..=1;
    type Request = ConsumerGroupDescribeRequest;

    async fn handle(
        call: &Call<'_>,
        request: ConsumerGroupDescribeRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<ConsumerGroupDescribeResponse> {
        Some(describe_groups(call, request).await)
    }
}
