//! Share groups' offsets (KIP-932), as Kafka 4.2's admin client reads and changes them:
//! DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets
//! (92), at version 0. A share group's "offset" on a partition is its share-partition start
//! offset (SPSO): every record below it is done. They are this broker's share-partitions
//! ([`crate::share`]), kept where the broker keeps its state.
//!
//! As in Kafka: describing needs DESCRIBE on the group (and answers only the topics the
//! caller may DESCRIBE), altering READ on the group and the topics, deleting DELETE on the
//! group and READ on the topics; altering or deleting needs the group without members
//! (NON_EMPTY_GROUP); an unknown topic is UNKNOWN_TOPIC_OR_PARTITION. A share-partition not
//! yet used describes as start offset −1.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use coordinator_core::TopicPartition;
use kafka_protocol::messages::alter_share_group_offsets_response as alter_response;
use kafka_protocol::messages::delete_share_group_offsets_response as delete_response;
use kafka_protocol::messages::describe_share_group_offsets_response as describe_response;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::groups::{code, refusal};
use super::registry::Api;
use super::{codes, Call};
use crate::acl::Operation;
use crate::shutdown::Shutdown;

/// Kafka's `NON_EMPTY_GROUP`.
const NON_EMPTY_GROUP: i16 = 68;

fn text(value: &str) -> Option<StrBytes> {
    Some(StrBytes::from_string(value.to_string()))
}

/// Whether `group` may have its offsets changed: `Err` with Kafka's code and message when it
/// is another kind of group or has members; a group the coordinator does not know is a share
/// group without members (its share-partitions may be kept from before a restart).
async fn may_change(call: &Call<'_>, group: &str) -> Result<(), (i16, String)> {
    match call.context.coordinator.share().describe(group).await {
        Ok(d) if !d.members.is_empty() => Err((
            NON_EMPTY_GROUP,
            format!(
                "The group {group} is not empty: it has {} members.",
                d.members.len()
            ),
        )),
        Ok(_) => Ok(()),
        Err(_) if call.context.coordinator.group_kind(group).is_none() => Ok(()),
        Err(e) => Err((code(&e), e.to_string())),
    }
}

async fn describe(
    call: &Call<'_>,
    request: DescribeShareGroupOffsetsRequest,
) -> DescribeShareGroupOffsetsResponse {
    let mut groups = Vec::with_capacity(request.groups.len());
    for g in request.groups {
        let id = g.group_id.as_str();
        let answer = describe_response::DescribeShareGroupOffsetsResponseGroup::default()
            .with_group_id(g.group_id.clone());
        if !call.may_group(Operation::Describe, id) {
            groups.push(
                answer
                    .with_error_code(codes::GROUP_AUTHORIZATION_FAILED)
                    .with_error_message(text("Group authorization failed.")),
            );
            continue;
        }
        if let Some(c) = refusal(call, id) {
            groups.push(answer.with_error_code(c));
            continue;
        }
        let known: BTreeMap<TopicPartition, i64> =
            match call.context.share.all_start_offsets(id).await {
                Ok(known) => known.into_iter().collect(),
                Err(e) => {
                    tracing::warn!(group = id, error = %e, "cannot read the share state");
                    groups.push(
                        answer
                            .with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
                            .with_error_message(text("The share state cannot be read.")),
                    );
                    continue;
                }
            };
        // Another kind of group, or none at all and no share-partition: Kafka's error.
        if let Err(e) = call.context.coordinator.share().describe(id).await {
            if known.is_empty() || call.context.coordinator.group_kind(id).is_some() {
                groups.push(
                    answer
                        .with_error_code(code(&e))
                        .with_error_message(text(&e.to_string())),
                );
                continue;
            }
        }
        // The topics asked for, or every one the group has a share-partition of.
        let asked: Vec<(String, Option<Vec<i32>>)> = match g.topics {
            Some(topics) => topics
                .into_iter()
                .map(|t| (t.topic_name.to_string(), Some(t.partitions)))
                .collect(),
            None => {
                let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for tp in known.keys() {
                    by_topic
                        .entry(tp.topic().to_string())
                        .or_default()
                        .push(i32::try_from(tp.partition()).unwrap_or(i32::MAX));
                }
                by_topic.into_iter().map(|(t, p)| (t, Some(p))).collect()
            }
        };
        let mut topics = Vec::new();
        for (name, partitions) in asked {
            if !call.may_topic(Operation::Describe, &name) {
                continue;
            }
            let count = call.context.log.partition_count(&name);
            let partitions = partitions.unwrap_or_default();
            topics.push(
                describe_response::DescribeShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(TopicName(StrBytes::from_string(name.clone())))
                    .with_topic_id(if count.is_some() {
                        call.context.topic_id(&name)
                    } else {
                        uuid::Uuid::nil()
                    })
                    .with_partitions(
                        partitions
                            .into_iter()
                            .map(|p| {
                                let answer = describe_response::DescribeShareGroupOffsetsResponsePartition::default()
                                    .with_partition_index(p);
                                let exists = u32::try_from(p)
                                    .ok()
                                    .zip(count)
                                    .is_some_and(|(p, n)| p < n);
                                if !exists {
                                    return answer
                                        .with_start_offset(-1)
                                        .with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION)
                                        .with_error_message(text(
                                            "This server does not host this topic-partition.",
                                        ));
                                }
                                let tp = TopicPartition::new(name.clone(), p.unsigned_abs());
                                answer
                                    .with_start_offset(known.get(&tp).copied().unwrap_or(-1))
                                    .with_leader_epoch(0)
                            })
                            .collect(),
                    ),
            );
        }
        groups.push(answer.with_topics(topics));
    }
    DescribeShareGroupOffsetsResponse::default().with_groups(groups)
}

async fn alter(
    call: &Call<'_>,
    request: AlterShareGroupOffsetsRequest,
) -> AlterShareGroupOffsetsResponse {
    let group = request.group_id.as_str();
    let refused = |code: i16, message: &str| {
        AlterShareGroupOffsetsResponse::default()
            .with_error_code(code)
            .with_error_message(text(message))
    };
    if group.is_empty() {
        return refused(codes::INVALID_GROUP_ID, "The group id is empty.");
    }
    if !call.may_group(Operation::Read, group) {
        return refused(
            codes::GROUP_AUTHORIZATION_FAILED,
            "Group authorization failed.",
        );
    }
    if let Some(c) = refusal(call, group) {
        return AlterShareGroupOffsetsResponse::default().with_error_code(c);
    }
    if let Err((c, m)) = may_change(call, group).await {
        return refused(c, &m);
    }
    let mut changed: Vec<TopicPartition> = Vec::new();
    let mut responses = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let name = t.topic_name.to_string();
        let count = call.context.log.partition_count(&name);
        let topic_code = if !call.may_topic(Operation::Read, &name) {
            Some((
                codes::TOPIC_AUTHORIZATION_FAILED,
                "Topic authorization failed.",
            ))
        } else if count.is_none() {
            Some((
                codes::UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            ))
        } else {
            None
        };
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                let answer = alter_response::AlterShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(p.partition_index);
                if let Some((c, m)) = topic_code {
                    return answer.with_error_code(c).with_error_message(text(m));
                }
                let tp = u32::try_from(p.partition_index)
                    .ok()
                    .filter(|i| count.is_some_and(|n| *i < n))
                    .map(|i| TopicPartition::new(name.clone(), i));
                let Some(tp) = tp else {
                    return answer
                        .with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION)
                        .with_error_message(text(
                            "This server does not host this topic-partition.",
                        ));
                };
                if p.start_offset < 0 {
                    return answer
                        .with_error_code(codes::INVALID_REQUEST)
                        .with_error_message(text(&format!(
                            "The start offset {} is negative.",
                            p.start_offset
                        )));
                }
                if !call.context.share.set_start(group, &tp, p.start_offset) {
                    return answer
                        .with_error_code(codes::UNKNOWN_SERVER_ERROR)
                        .with_error_message(text("Too many share-partitions on this broker."));
                }
                changed.push(tp);
                answer
            })
            .collect();
        responses.push(
            alter_response::AlterShareGroupOffsetsResponseTopic::default()
                .with_topic_name(t.topic_name.clone())
                .with_topic_id(call.context.topic_id(&name))
                .with_partitions(partitions),
        );
    }
    if let Err(e) = call.context.share.keep(group, &changed).await {
        tracing::warn!(group, error = %e, "altered share group offsets could not be kept");
        for p in responses.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
            if p.error_code == codes::NONE {
                p.error_code = codes::KAFKA_STORAGE_ERROR;
            }
        }
    } else if !changed.is_empty() {
        tracing::info!(
            group,
            partitions = changed.len(),
            "share group offsets altered"
        );
    }
    AlterShareGroupOffsetsResponse::default().with_responses(responses)
}

async fn delete(
    call: &Call<'_>,
    request: DeleteShareGroupOffsetsRequest,
) -> DeleteShareGroupOffsetsResponse {
    let group = request.group_id.as_str();
    let refused = |code: i16, message: &str| {
        DeleteShareGroupOffsetsResponse::default()
            .with_error_code(code)
            .with_error_message(text(message))
    };
    if group.is_empty() {
        return refused(codes::INVALID_GROUP_ID, "The group id is empty.");
    }
    if !call.may_group(Operation::Delete, group) {
        return refused(
            codes::GROUP_AUTHORIZATION_FAILED,
            "Group authorization failed.",
        );
    }
    if let Some(c) = refusal(call, group) {
        return DeleteShareGroupOffsetsResponse::default().with_error_code(c);
    }
    if let Err((c, m)) = may_change(call, group).await {
        return refused(c, &m);
    }
    let mut gone: Vec<TopicPartition> = Vec::new();
    let mut responses = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let name = t.topic_name.to_string();
        let answer = delete_response::DeleteShareGroupOffsetsResponseTopic::default()
            .with_topic_name(t.topic_name.clone());
        if !call.may_topic(Operation::Read, &name) {
            responses.push(
                answer
                    .with_error_code(codes::TOPIC_AUTHORIZATION_FAILED)
                    .with_error_message(text("Topic authorization failed.")),
            );
            continue;
        }
        if call.context.log.partition_count(&name).is_none() {
            responses.push(
                answer
                    .with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION)
                    .with_error_message(text("This server does not host this topic-partition.")),
            );
            continue;
        }
        gone.extend(call.context.share.forget_group_topic(group, &name));
        responses.push(answer.with_topic_id(call.context.topic_id(&name)));
    }
    if let Err(e) = call.context.share.keep(group, &gone).await {
        tracing::warn!(group, error = %e, "deleted share group offsets could not be kept");
        for r in &mut responses {
            if r.error_code == codes::NONE {
                r.error_code = codes::KAFKA_STORAGE_ERROR;
            }
        }
    } else if !gone.is_empty() {
        tracing::info!(
            group,
            partitions = gone.len(),
            "share group offsets deleted"
        );
    }
    DeleteShareGroupOffsetsResponse::default().with_responses(responses)
}

pub(crate) struct DescribeShareGroupOffsets;

impl Api for DescribeShareGroupOffsets {
    const KEY: ApiKey = ApiKey::DescribeShareGroupOffsets;
    const VERSIONS: RangeInclusive<i16> = 0..=0;
    type Request = DescribeShareGroupOffsetsRequest;

    async fn handle(
        call: &Call<'_>,
        request: DescribeShareGroupOffsetsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<DescribeShareGroupOffsetsResponse> {
        Some(describe(call, request).await)
    }
}

pub(crate) struct AlterShareGroupOffsets;

impl Api for AlterShareGroupOffsets {
    const KEY: ApiKey = ApiKey::AlterShareGroupOffsets;
    const VERSIONS: RangeInclusive<i16> = 0..=0;
    type Request = AlterShareGroupOffsetsRequest;

    async fn handle(
        call: &Call<'_>,
        request: AlterShareGroupOffsetsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<AlterShareGroupOffsetsResponse> {
        Some(alter(call, request).await)
    }
}

pub(crate) struct DeleteShareGroupOffsets;

impl Api for DeleteShareGroupOffsets {
    const KEY: ApiKey = ApiKey::DeleteShareGroupOffsets;
    const VERSIONS: RangeInclusive<i16> = 0..=0;
    type Request = DeleteShareGroupOffsetsRequest;

    async fn handle(
        call: &Call<'_>,
        request: DeleteShareGroupOffsetsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<DeleteShareGroupOffsetsResponse> {
        Some(delete(call, request).await)
    }
}
