//! DescribeProducers (API 61, KIP-664): each asked partition's active producers, from its
//! producer state ([`crate::producers`]): id, epoch, last sequence, last timestamp,
//! coordinator epoch and the start offset of its open transaction (-1 if none). A partition
//! this broker does not lead (several brokers over PostgreSQL) answers
//! NOT_LEADER_OR_FOLLOWER, its producer state untouched.

use crate::acl::Operation;
use std::ops::RangeInclusive;

use coordinator_core::{Clock, TopicPartition};
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeProducersResponse, ProducerId,
};
use kafka_protocol::protocol::StrBytes;

use super::produce::{log_code, not_led};
use super::registry::Api;
use super::{codes, Call};
use crate::context::WallClock;
use crate::shutdown::Shutdown;

async fn handle(call: &Call<'_>, request: DescribeProducersRequest) -> DescribeProducersResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let mut partitions = Vec::with_capacity(topic.partition_indexes.len());
        // Kafka: READ on the topic
        let allowed = call.may_topic(Operation::Read, topic.name.0.as_str());
        for &index in &topic.partition_indexes {
            partitions.push(if allowed {
                describe(call, topic.name.0.as_str(), index).await
            } else {
                PartitionResponse::default()
                    .with_partition_index(index)
                    .with_error_code(codes::TOPIC_AUTHORIZATION_FAILED)
            });
        }
        topics.push(
            TopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    DescribeProducersResponse::default().with_topics(topics)
}

/// One partition's producers, or UNKNOWN_TOPIC_OR_PARTITION (or the log's error).
async fn describe(call: &Call<'_>, topic: &str, index: i32) -> PartitionResponse {
    let answer = PartitionResponse::default().with_partition_index(index);
    let Ok(partition) = u32::try_from(index) else {
        return answer
            .with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION)
            .with_error_message(Some(StrBytes::from_string(format!(
                "partition {index} of `{topic}` does not exist"
            ))));
    };
    let tp = TopicPartition::new(topic, partition);
    if let Some(code) = not_led(call, &tp).await {
        return answer.with_error_code(code);
    }
    let context = call.context;
    let now_ms = i64::try_from(WallClock.now_ms()).unwrap_or(i64::MAX);
    match context.producers.lock(&*context.log, &tp, now_ms).await {
        Ok(state) => answer.with_active_producers(
            state
                .producers()
                .into_iter()
                .map(|p| {
                    ProducerState::default()
                        .with_producer_id(ProducerId(p.producer_id))
                        .with_producer_epoch(i32::from(p.epoch))
                        .with_last_sequence(p.last_sequence)
                        .with_last_timestamp(p.last_timestamp)
                        .with_coordinator_epoch(p.coordinator_epoch)
                        .with_current_txn_start_offset(p.txn_start_offset)
                })
                .collect(),
        ),
        Err(e) => answer
            .with_error_code(log_code(&e))
            .with_error_message(Some(StrBytes::from_string(e.to_string()))),
    }
}

pub(crate) struct DescribeProducers;

impl Api for DescribeProducers {
    const KEY: ApiKey = ApiKey::DescribeProducers;
    const VERSIONS: RangeInclusive<i16> = 0..=0;
    type Request = DescribeProducersRequest;

    async fn handle(
        call: &Call<'_>,
        request: DescribeProducersRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<DescribeProducersResponse> {
        Some(handle(call, request).await)
    }
}
