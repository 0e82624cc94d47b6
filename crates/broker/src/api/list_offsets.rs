//! ListOffsets: the earliest offset, the latest (the high watermark, or for isolation level
//! 1, read_committed, the last stable offset), or the first offset at or after a timestamp.

use std::ops::RangeInclusive;

use coordinator_core::{Clock, LogError, TopicPartition};
use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse};

use super::fetch::READ_COMMITTED;
use super::produce::log_code;
use super::registry::Api;
use super::{codes, Call};
use crate::context::WallClock;
use crate::shutdown::Shutdown;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;

async fn handle(call: &Call<'_>, request: ListOffsetsRequest) -> ListOffsetsResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let read_committed = request.isolation_level == READ_COMMITTED;
            partitions.push(lookup(call, topic.name.0.as_str(), p, read_committed).await);
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
    let tp = TopicPartition::new(topic, index);
    let found = match p.timestamp {
        LATEST if read_committed => last_stable_offset(call, &tp)
            .await
            .map(|lso| Some((lso, -1))),
        LATEST => log.bounds(&tp).await.map(|(_, hw)| Some((hw, -1))),
        EARLIEST => log.bounds(&tp).await.map(|(start, _)| Some((start, -1))),
        // Other negative values are later specs (max timestamp -3, ...) of versions this
        // broker does not serve; Kafka treats them as errors there, a lookup by a negative
        // timestamp finds the first record.
        ts => log.offset_for_timestamp(&tp, ts).await,
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
    const VERSIONS: RangeInclusive<i16> = 1..=3;
    type Request = ListOffsetsRequest;

    async fn handle(
        call: &Call<'_>,
        request: ListOffsetsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<ListOffsetsResponse> {
        Some(handle(call, request).await)
    }
}
