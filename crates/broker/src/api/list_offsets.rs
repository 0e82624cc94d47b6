//! ListOffsets (v1–v11): the earliest offset, the latest (the high watermark, or for
//! isolation level 1, read_committed, the last stable offset), the record with the largest
//! timestamp (`MAX_TIMESTAMP`, KIP-734, v7+), or the first offset at or after a timestamp;
//! answered as Kafka 4's `UnifiedLog.fetchOffsetByTimestamp` and
//! `Partition.fetchOffsetForTimestamp` answer for a log without tiered storage:
//!
//! | timestamp | answer |
//! |---|---|
//! | −1 `LATEST` | the high watermark (read_committed: the LSO), timestamp −1 |
//! | −2 `EARLIEST`, −4 `EARLIEST_LOCAL` (KIP-405) | the log start offset, timestamp −1 |
//! | −3 `MAX_TIMESTAMP` | the first record with the largest timestamp, with that timestamp |
//! | −5 `LATEST_TIERED` (KIP-1005) | offset −1, timestamp −1: nothing is tiered |
//! | −6 `EARLIEST_PENDING_UPLOAD` (KIP-1023, v11+) | offset −1, timestamp −1: nothing is tiered (`UnifiedLog.fetchEarliestPendingUploadOffset` without remote storage); below v11 UNSUPPORTED_VERSION, as `ReplicaManager.isListOffsetsTimestampUnsupported` answers |
//! | ≥ 0, and other negative values | the first record at or after it (a negative one: the first record) |
//!
//! A found record at or past the last offset the isolation level may read (the high
//! watermark, or the LSO for read_committed) is not answered (offset −1), as in Kafka. The
//! leader epoch in v4+ answers is −1 (unknown), as Metadata reports it, so clients send −1
//! as their current leader epoch and it is not checked. v10's `timeout_ms` bounds nothing
//! here: every lookup answers at once.
//!
//! A partition this broker does not lead (several brokers over PostgreSQL) answers
//! NOT_LEADER_OR_FOLLOWER without being looked up, as Kafka's `ReplicaManager.fetchOffset`
//! answers on a broker that is not the leader.

use crate::acl::Operation;
use std::ops::RangeInclusive;

use coordinator_core::{Clock, LogError, TopicPartition};
use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse};

use super::fetch::READ_COMMITTED;
use super::produce::{log_code, not_led};
use super::registry::{up_to_codec, Api};
use super::{codes, Call};
use crate::context::WallClock;
use crate::shutdown::Shutdown;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
const EARLIEST_PENDING_UPLOAD: i64 = -6;
/// The first version that carries `EARLIEST_PENDING_UPLOAD` (KIP-1023).
const EARLIEST_PENDING_UPLOAD_FROM: i16 = 11;

async fn handle(call: &Call<'_>, request: ListOffsetsRequest) -> ListOffsetsResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        let allowed = call.may_topic(Operation::Describe, topic.name.0.as_str());
        for p in &topic.partitions {
            let read_committed = request.isolation_level == READ_COMMITTED;
            partitions.push(if allowed {
                lookup(call, topic.name.0.as_str(), p, read_committed).await
            } else {
                ListOffsetsPartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(codes::TOPIC_AUTHORIZATION_FAILED)
                    .with_timestamp(-1)
                    .with_offset(-1)
            });
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    ListOffsetsResponse::default().with_topics(topics)
}

async fn lookup(
    call: &Call<'_>,
    topic: &str,
    p: &ListOffsetsPartition,
    read_committed: bool,
) -> ListOffsetsPartitionResponse {
    let log = &call.context.log;
    let answer = ListOffsetsPartitionResponse::default()
        .with_partition_index(p.partition_index)
        .with_timestamp(-1)
        .with_offset(-1);
    let Ok(index) = u32::try_from(p.partition_index) else {
        return answer.with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION);
    };
    if p.timestamp == EARLIEST_PENDING_UPLOAD && call.version < EARLIEST_PENDING_UPLOAD_FROM {
        return answer.with_error_code(codes::UNSUPPORTED_VERSION);
    }
    let tp = TopicPartition::new(topic, index);
    if let Some(code) = not_led(call, &tp).await {
        return answer.with_error_code(code);
    }
    let found = match p.timestamp {
        LATEST if read_committed => last_stable_offset(call, &tp)
            .await
            .map(|lso| Some((lso, -1))),
        LATEST => log.bounds(&tp).await.map(|(_, hw)| Some((hw, -1))),
        EARLIEST | EARLIEST_LOCAL => log.bounds(&tp).await.map(|(start, _)| Some((start, -1))),
        // Nothing is tiered: no tiered offset, none pending upload (Kafka's answer for a log
        // without remote storage).
        LATEST_TIERED | EARLIEST_PENDING_UPLOAD => log.bounds(&tp).await.map(|_| Some((-1, -1))),
        ts => {
            let found = if ts == MAX_TIMESTAMP {
                log.offset_of_max_timestamp(&tp).await
            } else {
                log.offset_for_timestamp(&tp, ts).await
            };
            // The logs answer below the high watermark; read_committed stops at the LSO.
            match found {
                Ok(Some((offset, timestamp))) if read_committed => last_stable_offset(call, &tp)
                    .await
                    .map(|lso| (offset < lso).then_some((offset, timestamp))),
                other => other,
            }
        }
    };
    match found {
        Ok(Some((offset, timestamp))) => answer.with_offset(offset).with_timestamp(timestamp),
        Ok(None) => answer,
        Err(e) => answer.with_error_code(log_code(&e)),
    }
}

/// `tp`'s last stable offset (see [`crate::producers`]).
async fn last_stable_offset(call: &Call<'_>, tp: &TopicPartition) -> Result<i64, LogError> {
    let context = call.context;
    let now_ms = i64::try_from(WallClock.now_ms()).unwrap_or(i64::MAX);
    let state = context.producers.lock(&*context.log, tp, now_ms).await?;
    let (_, high_watermark) = context.log.bounds(tp).await?;
    Ok(state.last_stable_offset(high_watermark))
}

pub(crate) struct ListOffsets;

impl Api for ListOffsets {
    const KEY: ApiKey = ApiKey::ListOffsets;
    /// v11: `EARLIEST_PENDING_UPLOAD` (KIP-1023). Up to what the codec serves (see
    /// [`up_to_codec`]).
    const VERSIONS: RangeInclusive<i16> = 1..=up_to_codec::<ListOffsetsRequest>(11);
    type Request = ListOffsetsRequest;

    async fn handle(
        call: &Call<'_>,
        request: ListOffsetsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<ListOffsetsResponse> {
        Some(handle(call, request).await)
    }
}
