//! OffsetCommit, OffsetFetch, OffsetDelete.

use coordinator_core::TopicPartition;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::{codes, Call};

pub(super) async fn commit(_call: &Call<'_>, request: OffsetCommitRequest) -> OffsetCommitResponse {
    OffsetCommitResponse::default().with_topics(
        request
            .topics
            .into_iter()
            .map(|t| {
                offset_commit_response::OffsetCommitResponseTopic::default()
                    .with_name(t.name)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                offset_commit_response::OffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

/// OffsetFetch v1-3: the group's committed offsets; -1 for none. An unknown group has none
/// and is no error (Kafka's behaviour).
pub(super) async fn fetch(call: &Call<'_>, request: OffsetFetchRequest) -> OffsetFetchResponse {
    let coordinator = &call.context.coordinator;
    let group = request.group_id.as_str();
    let committed = match coordinator.committed_offsets(group).await {
        Ok(map) => map,
        Err(e) if e.kafka_code() == Some(codes::GROUP_ID_NOT_FOUND) => Default::default(),
        Err(e) => {
            return OffsetFetchResponse::default()
                .with_error_code(e.kafka_code().unwrap_or(codes::UNKNOWN_SERVER_ERROR));
        }
    };
    let partition = |index: i32, offset: Option<i64>| {
        OffsetFetchResponsePartition::default()
            .with_partition_index(index)
            .with_committed_offset(offset.unwrap_or(-1))
            .with_metadata(Some(StrBytes::default()))
    };
    let topics: Vec<OffsetFetchResponseTopic> = match request.topics {
        Some(topics) => topics
            .into_iter()
            .map(|t| {
                let partitions = t
                    .partition_indexes
                    .iter()
                    .map(|&p| {
                        let offset = u32::try_from(p).ok().and_then(|p| {
                            committed
                                .get(&TopicPartition::new(t.name.0.as_str(), p))
                                .copied()
                        });
                        partition(p, offset)
                    })
                    .collect();
                OffsetFetchResponseTopic::default()
                    .with_name(t.name)
                    .with_partitions(partitions)
            })
            .collect(),
        // null topics (v2+): every committed offset of the group.
        None => {
            let mut topics: Vec<OffsetFetchResponseTopic> = Vec::new();
            for (tp, offset) in &committed {
                let entry = partition(tp.partition() as i32, Some(*offset));
                match topics.last_mut() {
                    Some(last) if last.name.0.as_str() == tp.topic() => last.partitions.push(entry),
                    _ => topics.push(
                        OffsetFetchResponseTopic::default()
                            .with_name(TopicName(StrBytes::from_string(tp.topic().to_string())))
                            .with_partitions(vec![entry]),
                    ),
                }
            }
            topics
        }
    };
    OffsetFetchResponse::default().with_topics(topics)
}

pub(super) async fn delete(
    _call: &Call<'_>,
    _request: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    OffsetDeleteResponse::default().with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
}
