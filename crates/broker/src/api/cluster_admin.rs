//! DeleteRecords, and the single-node answers of Kafka's cluster admin APIs, as a one-broker Kafka 4 (KRaft,
//! this node the only broker and the only controller) gives them:
//!
//! | API | answer |
//! |---|---|
//! | DeleteRecords (21) | moves each partition's log start up to the offset (−1: the high watermark) and answers it as the low watermark; an offset past the high watermark or below −1 OFFSET_OUT_OF_RANGE, an unknown partition UNKNOWN_TOPIC_OR_PARTITION, one led by another broker NOT_LEADER_OR_FOLLOWER (low watermark −1); durable with `--data-dir` |
//! | ElectLeaders (43) | every named partition ELECTION_NOT_NEEDED (84): its one replica leads; unknown ones UNKNOWN_TOPIC_OR_PARTITION; a null list (all partitions) lists none, as Kafka lists only partitions that had an election |
//! | DescribeLogDirs (35) | one log directory (`<data-dir>/records`, or `(memory)` without a data directory) with every partition's size in bytes, lag 0; v4's volume sizes −1 (unknown) |
//! | AlterReplicaLogDirs (34) | to the one directory: NONE (a move to where the replica is); any other path LOG_DIR_NOT_FOUND (57) |
//! | AlterPartitionReassignments (45) | replicas `[0]`: NONE (what they are); cancelling (null) NO_REASSIGNMENT_IN_PROGRESS (85); other brokers, an empty or repeated list INVALID_REPLICA_ASSIGNMENT (39) |
//! | ListPartitionReassignments (46) | none in progress: an empty list (named partitions too, as Kafka omits those not moving) |
//! | DescribeQuorum (55) | `__cluster_metadata`-0 led by this node, its only voter, epoch 1; other partitions UNKNOWN_TOPIC_OR_PARTITION |
//! | DescribeTopicPartitions (75) | Metadata's answer by name, sorted, paged by `response_partition_limit` (at most 2000, Kafka's `max.request.partition.size.limit`) with Kafka's cursor |
//! | ListConfigResources (74) | v0 (ListClientMetricsResources): none; v1: topics (type 2), this broker (type 4, `0`) and its loggers (type 8, `0`); no client metrics (16) or group (32) configs exist; any other type UNSUPPORTED_VERSION for the whole request, as Kafka |
//!
//! The quorum has no metadata log here: its high watermark and the voter's log end offset
//! are 0, and the leader epoch 1 (Kafka's first). Leader epochs of data partitions are −1,
//! as Metadata reports them.

use crate::acl::Operation;
use std::collections::BTreeSet;
use std::ops::RangeInclusive;

use coordinator_core::{Clock, TopicPartition};
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::describe_quorum_response::{
    self, Listener, Node, ReplicaState, TopicData,
};
use kafka_protocol::messages::describe_topic_partitions_response::{
    self, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, ApiKey, BrokerId,
    DeleteRecordsRequest, DeleteRecordsResponse, DescribeLogDirsRequest, DescribeLogDirsResponse,
    DescribeQuorumRequest, DescribeQuorumResponse, DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse, ElectLeadersRequest, ElectLeadersResponse,
    ListConfigResourcesRequest, ListConfigResourcesResponse, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::produce::log_code;
use super::registry::Api;
use super::{codes, Call};
use crate::context::WallClock;
use crate::shutdown::Shutdown;

/// The metadata log's topic, which DescribeQuorum describes.
const METADATA_TOPIC: &str = "__cluster_metadata";
/// Kafka's `max.request.partition.size.limit` default: the most partitions one
/// DescribeTopicPartitions answer lists.
pub(crate) const MAX_PARTITIONS_PER_DESCRIBE: i32 = 2000;
/// What DescribeLogDirs calls the log directory of a broker without a data directory.
pub(crate) const MEMORY_LOG_DIR: &str = "(memory)";
/// Kafka's `ConfigResource.Type` codes ListConfigResources v1 filters by.
const TOPIC_RESOURCE: i8 = 2;
const BROKER_RESOURCE: i8 = 4;
const BROKER_LOGGER_RESOURCE: i8 = 8;
const CLIENT_METRICS_RESOURCE: i8 = 16;
const GROUP_RESOURCE: i8 = 32;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// Whether `topic` has a partition `index`.
fn exists(call: &Call<'_>, topic: &str, index: i32) -> bool {
    let count = call.context.log.partition_count(topic).unwrap_or(0);
    u32::try_from(index).is_ok_and(|i| i < count)
}

/// The log directory this broker reports: where the partition log keeps its files.
fn log_dir(call: &Call<'_>) -> String {
    match &call.context.config.data_dir {
        Some(dir) => {
            let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
            dir.join(crate::server::RECORDS_DIR).display().to_string()
        }
        None => match &call.context.config.postgres {
            // not a path: where the records are, as DescribeLogDirs reports a directory
            Some(url) => format!(
                "(postgresql {})",
                store_postgres::describe_target(url.as_str())
            ),
            None => MEMORY_LOG_DIR.to_string(),
        },
    }
}

/// The topics, sorted by name (the log lists them so); none if the log cannot list them.
async fn all_topics(call: &Call<'_>) -> Vec<(String, u32)> {
    call.context.log.topics().await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "cannot list the topics");
        Vec::new()
    })
}

fn elect_leaders(call: &Call<'_>, request: &ElectLeadersRequest) -> ElectLeadersResponse {
    if !call.may_cluster(Operation::Alter) {
        return ElectLeadersResponse::default()
            .with_error_code(codes::CLUSTER_AUTHORIZATION_FAILED);
    }
    let results = request
        .topic_partitions
        .iter()
        .flatten()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|&p| {
                    let (code, message) = if !exists(call, &topic.topic, p) {
                        (codes::UNKNOWN_TOPIC_OR_PARTITION, None)
                    } else if !matches!(request.election_type, 0 | 1) {
                        (
                            codes::INVALID_REQUEST,
                            Some(format!(
                                "unknown election type {}; 0 is preferred, 1 unclean",
                                request.election_type
                            )),
                        )
                    } else {
                        (
                            codes::ELECTION_NOT_NEEDED,
                            Some("the partition's only replica is its leader".to_string()),
                        )
                    };
                    PartitionResult::default()
                        .with_partition_id(p)
                        .with_error_code(code)
                        .with_error_message(message.map(StrBytes::from_string))
                })
                .collect();
            ReplicaElectionResult::default()
                .with_topic(topic.topic.clone())
                .with_partition_result(partitions)
        })
        .collect();
    ElectLeadersResponse::default().with_replica_election_results(results)
}

async fn describe_log_dirs(
    call: &Call<'_>,
    request: &DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    if !call.may_cluster(Operation::Describe) {
        // Kafka: no directories, and (v3+) the error
        return DescribeLogDirsResponse::default()
            .with_error_code(codes::CLUSTER_AUTHORIZATION_FAILED);
    }
    let log = &call.context.log;
    // Null: every partition; otherwise the named ones that exist.
    let asked: Vec<(String, Vec<i32>)> = match &request.topics {
        None => all_topics(call)
            .await
            .into_iter()
            .map(|(topic, count)| (topic, (0..count as i32).collect()))
            .collect(),
        Some(topics) => topics
            .iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .copied()
                    .filter(|&p| exists(call, &t.topic, p))
                    .collect();
                (t.topic.0.to_string(), partitions)
            })
            .collect(),
    };
    let mut topics = Vec::with_capacity(asked.len());
    for (topic, partitions) in asked {
        if partitions.is_empty() {
            continue;
        }
        let mut described = Vec::with_capacity(partitions.len());
        for p in partitions {
            let tp = TopicPartition::new(topic.as_str(), p as u32);
            let size = match log.partition_size(&tp).await {
                Ok(size) => i64::try_from(size).unwrap_or(i64::MAX),
                Err(e) => {
                    tracing::warn!(partition = %tp, error = %e, "cannot tell the partition's size");
                    0
                }
            };
            described.push(
                DescribeLogDirsPartition::default()
                    .with_partition_index(p)
                    .with_partition_size(size)
                    .with_offset_lag(0)
                    .with_is_future_key(false),
            );
        }
        topics.push(
            DescribeLogDirsTopic::default()
                .with_name(name(&topic))
                .with_partitions(described),
        );
    }
    let dir = DescribeLogDirsResult::default()
        .with_log_dir(StrBytes::from_string(log_dir(call)))
        .with_topics(topics)
        .with_total_bytes(-1)
        .with_usable_bytes(-1);
    DescribeLogDirsResponse::default().with_results(vec![dir])
}

fn alter_replica_log_dirs(
    call: &Call<'_>,
    request: &AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    let here = log_dir(call);
    let may_alter = call.may_cluster(Operation::Alter);
    let mut results = Vec::new();
    for dir in &request.dirs {
        let known = dir.path.as_str() == here;
        for topic in &dir.topics {
            let partitions = topic
                .partitions
                .iter()
                .map(|&p| {
                    let code = if !may_alter {
                        codes::CLUSTER_AUTHORIZATION_FAILED
                    } else if !known {
                        codes::LOG_DIR_NOT_FOUND
                    } else if !exists(call, &topic.name, p) {
                        codes::UNKNOWN_TOPIC_OR_PARTITION
                    } else {
                        codes::NONE
                    };
                    AlterReplicaLogDirPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(code)
                })
                .collect();
            results.push(
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(topic.name.clone())
                    .with_partitions(partitions),
            );
        }
    }
    AlterReplicaLogDirsResponse::default().with_results(results)
}

fn alter_partition_reassignments(
    call: &Call<'_>,
    request: &AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    if !call.may_cluster(Operation::Alter) {
        return AlterPartitionReassignmentsResponse::default()
            .with_error_code(codes::CLUSTER_AUTHORIZATION_FAILED)
            .with_error_message(Some(StrBytes::from_static_str(
                "Cluster authorization failed.",
            )));
    }
    let responses = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let (code, message) = if !exists(call, &topic.name, p.partition_index) {
                        (codes::UNKNOWN_TOPIC_OR_PARTITION, None)
                    } else {
                        match p.replicas.as_deref() {
                            None => (
                                codes::NO_REASSIGNMENT_IN_PROGRESS,
                                Some("no reassignment of the partition is in progress".into()),
                            ),
                            Some([BrokerId(id)]) if *id == call.context.config.node_id => {
                                (codes::NONE, None)
                            }
                            Some(replicas) => (
                                codes::INVALID_REPLICA_ASSIGNMENT,
                                Some(format!(
                                    "replicas {:?}: this cluster has one broker, {node}, \
                                     so the only assignment is [{node}]",
                                    replicas.iter().map(|b| b.0).collect::<Vec<_>>(),
                                    node = call.context.config.node_id
                                )),
                            ),
                        }
                    };
                    ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                        .with_error_message(message.map(StrBytes::from_string))
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    AlterPartitionReassignmentsResponse::default()
        .with_error_message(None)
        .with_allow_replication_factor_change(request.allow_replication_factor_change)
        .with_responses(responses)
}

fn describe_quorum(call: &Call<'_>, request: &DescribeQuorumRequest) -> DescribeQuorumResponse {
    if !call.may_cluster(Operation::Describe) {
        return DescribeQuorumResponse::default()
            .with_error_code(codes::CLUSTER_AUTHORIZATION_FAILED)
            .with_error_message(Some(StrBytes::from_static_str(
                "Cluster authorization failed.",
            )));
    }
    let now = i64::try_from(WallClock.now_ms()).unwrap_or(i64::MAX);
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let answer = describe_quorum_response::PartitionData::default()
                        .with_partition_index(p.partition_index)
                        .with_error_message(None);
                    if topic.topic_name.as_str() != METADATA_TOPIC || p.partition_index != 0 {
                        return answer.with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION);
                    }
                    let voter = ReplicaState::default()
                        .with_replica_id(BrokerId(call.context.config.node_id))
                        .with_log_end_offset(0)
                        .with_last_fetch_timestamp(now)
                        .with_last_caught_up_timestamp(now);
                    answer
                        .with_leader_id(BrokerId(call.context.config.node_id))
                        .with_leader_epoch(1)
                        .with_high_watermark(0)
                        .with_current_voters(vec![voter])
                        .with_observers(Vec::new())
                })
                .collect();
            TopicData::default()
                .with_topic_name(topic.topic_name.clone())
                .with_partitions(partitions)
        })
        .collect();
    let nodes = if call.version >= 2 {
        let listener = Listener::default()
            .with_name(StrBytes::from_static_str("CONTROLLER"))
            .with_host(StrBytes::from_string(call.endpoint().host.clone()))
            .with_port(u16::try_from(call.endpoint().port).unwrap_or(0));
        vec![Node::default()
            .with_node_id(BrokerId(call.context.config.node_id))
            .with_listeners(vec![listener])]
    } else {
        Vec::new()
    };
    DescribeQuorumResponse::default()
        .with_error_message(None)
        .with_topics(topics)
        .with_nodes(nodes)
}

async fn describe_topic_partitions(
    call: &Call<'_>,
    request: &DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let context = call.context;
    // Empty: every topic. Either way sorted by name, each once.
    let names: BTreeSet<String> = if request.topics.is_empty() {
        // every topic the principal may describe (Kafka leaves the others out)
        all_topics(call)
            .await
            .into_iter()
            .map(|(t, _)| t)
            .filter(|t| call.may_topic(Operation::Describe, t))
            .collect()
    } else {
        request
            .topics
            .iter()
            .map(|t| t.name.0.to_string())
            .collect()
    };
    let (start_topic, start_partition) = match &request.cursor {
        Some(cursor) => {
            let topic = cursor.topic_name.0.to_string();
            if !names.contains(&topic) || cursor.partition_index < 0 {
                // Kafka refuses such a cursor (InvalidRequestException); this response has no
                // top-level error, so every asked topic carries it.
                let topics = names
                    .iter()
                    .map(|t| {
                        DescribeTopicPartitionsResponseTopic::default()
                            .with_name(Some(name(t)))
                            .with_error_code(codes::INVALID_REQUEST)
                    })
                    .collect();
                return DescribeTopicPartitionsResponse::default().with_topics(topics);
            }
            (Some(topic), cursor.partition_index)
        }
        None => (None, 0),
    };
    let mut budget = request
        .response_partition_limit
        .clamp(1, MAX_PARTITIONS_PER_DESCRIBE);
    let mut topics = Vec::new();
    let mut next_cursor = None;
    let from = start_topic.clone().unwrap_or_default();
    for topic in names.range(from..) {
        let first = if start_topic.as_deref() == Some(topic.as_str()) {
            start_partition
        } else {
            0
        };
        if !call.may_topic(Operation::Describe, topic) {
            topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_name(Some(name(topic)))
                    .with_error_code(codes::TOPIC_AUTHORIZATION_FAILED),
            );
            continue;
        }
        let Some(count) = context.log.partition_count(topic) else {
            topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_name(Some(name(topic)))
                    .with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION),
            );
            continue;
        };
        let count = i32::try_from(count).unwrap_or(i32::MAX);
        if budget == 0 {
            next_cursor = Some(
                describe_topic_partitions_response::Cursor::default()
                    .with_topic_name(name(topic))
                    .with_partition_index(first),
            );
            break;
        }
        let last = count.min(first.saturating_add(budget));
        let partitions: Vec<_> = (first..last)
            .map(|p| {
                DescribeTopicPartitionsResponsePartition::default()
                    .with_partition_index(p)
                    .with_leader_id(BrokerId(call.context.config.node_id))
                    .with_leader_epoch(-1)
                    .with_replica_nodes(vec![BrokerId(call.context.config.node_id)])
                    .with_isr_nodes(vec![BrokerId(call.context.config.node_id)])
                    .with_eligible_leader_replicas(Some(Vec::new()))
                    .with_last_known_elr(Some(Vec::new()))
                    .with_offline_replicas(Vec::new())
            })
            .collect();
        budget -= last.saturating_sub(first).max(0);
        topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(name(topic)))
                .with_topic_id(context.topic_id(topic))
                .with_is_internal(false)
                .with_partitions(partitions),
        );
        if last < count {
            next_cursor = Some(
                describe_topic_partitions_response::Cursor::default()
                    .with_topic_name(name(topic))
                    .with_partition_index(last),
            );
            break;
        }
    }
    DescribeTopicPartitionsResponse::default()
        .with_topics(topics)
        .with_next_cursor(next_cursor)
}

async fn list_config_resources(
    call: &Call<'_>,
    request: &ListConfigResourcesRequest,
) -> ListConfigResourcesResponse {
    if !call.may_cluster(Operation::DescribeConfigs) {
        return ListConfigResourcesResponse::default()
            .with_error_code(codes::CLUSTER_AUTHORIZATION_FAILED);
    }
    // v0 is ListClientMetricsResources: client metrics resources only.
    let types: Vec<i8> = if call.version == 0 {
        vec![CLIENT_METRICS_RESOURCE]
    } else if request.resource_types.is_empty() {
        vec![
            TOPIC_RESOURCE,
            BROKER_RESOURCE,
            BROKER_LOGGER_RESOURCE,
            CLIENT_METRICS_RESOURCE,
            GROUP_RESOURCE,
        ]
    } else {
        request.resource_types.clone()
    };
    let mut resources = Vec::new();
    for kind in types {
        match kind {
            TOPIC_RESOURCE => {
                for (topic, _) in all_topics(call).await {
                    resources.push(
                        ConfigResource::default()
                            .with_resource_name(StrBytes::from_string(topic))
                            .with_resource_type(TOPIC_RESOURCE),
                    );
                }
            }
            BROKER_RESOURCE | BROKER_LOGGER_RESOURCE => resources.push(
                ConfigResource::default()
                    .with_resource_name(StrBytes::from_string(
                        call.context.config.node_id.to_string(),
                    ))
                    .with_resource_type(kind),
            ),
            // No client metrics subscriptions or group configs exist here.
            CLIENT_METRICS_RESOURCE | GROUP_RESOURCE => {}
            _ => {
                return ListConfigResourcesResponse::default()
                    .with_error_code(codes::UNSUPPORTED_VERSION)
            }
        }
    }
    ListConfigResourcesResponse::default().with_config_resources(resources)
}

/// DeleteRecords' offset for "up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

async fn delete_records(call: &Call<'_>, request: &DeleteRecordsRequest) -> DeleteRecordsResponse {
    let log = &call.context.log;
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        let allowed = call.may_topic(Operation::Delete, &topic.name);
        for p in &topic.partitions {
            let answer = DeleteRecordsPartitionResult::default()
                .with_partition_index(p.partition_index)
                .with_low_watermark(-1);
            if !allowed {
                partitions.push(answer.with_error_code(codes::TOPIC_AUTHORIZATION_FAILED));
                continue;
            }
            if !exists(call, &topic.name, p.partition_index) {
                partitions.push(answer.with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION));
                continue;
            }
            // Led by another broker: NOT_LEADER_OR_FOLLOWER (Kafka's `deleteRecordsOnLeader`).
            if let Some(code) = call.leader_error(&topic.name, p.partition_index) {
                partitions.push(answer.with_error_code(code));
                continue;
            }
            let tp = TopicPartition::new(topic.name.0.as_str(), p.partition_index as u32);
            let offset = if p.offset == HIGH_WATERMARK {
                log.bounds(&tp).await.map(|(_, hw)| hw)
            } else {
                Ok(p.offset)
            };
            let deleted = match offset {
                Ok(offset) => log.delete_records(&tp, offset).await,
                Err(e) => Err(e),
            };
            partitions.push(match deleted {
                Ok(start) => answer.with_low_watermark(start),
                Err(e) => answer.with_error_code(log_code(&e)),
            });
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

/// Implements [`Api`] for a handler `$f(call, &request)`, sync or async.
macro_rules! api {
    ($(#[$doc:meta])* $name:ident, $key:ident, $versions:expr, $req:ty, $f:ident) => {
        api!(@ $(#[$doc])* $name, $key, $versions, $req, |call, request| $f(call, &request));
    };
    ($(#[$doc:meta])* $name:ident, $key:ident, $versions:expr, $req:ty, $f:ident, async) => {
        api!(@ $(#[$doc])* $name, $key, $versions, $req, |call, request| $f(call, &request).await);
    };
    (@ $(#[$doc:meta])* $name:ident, $key:ident, $versions:expr, $req:ty, |$call:ident, $request:ident| $body:expr) => {
        $(#[$doc])*
        pub(crate) struct $name;

        impl Api for $name {
            const KEY: ApiKey = ApiKey::$key;
            const VERSIONS: RangeInclusive<i16> = $versions;
            type Request = $req;

            async fn handle(
                $call: &Call<'_>,
                $request: $req,
                _shutdown: &mut Shutdown,
            ) -> Option<super::registry::Response<Self>> {
                Some($body)
            }
        }
    };
}

api!(
    DeleteRecords,
    DeleteRecords,
    0..=2,
    DeleteRecordsRequest,
    delete_records,
    async
);
api!(
    ElectLeaders,
    ElectLeaders,
    0..=2,
    ElectLeadersRequest,
    elect_leaders
);
api!(
    DescribeLogDirs,
    DescribeLogDirs,
    1..=4,
    DescribeLogDirsRequest,
    describe_log_dirs,
    async
);
api!(
    AlterReplicaLogDirs,
    AlterReplicaLogDirs,
    1..=2,
    AlterReplicaLogDirsRequest,
    alter_replica_log_dirs
);
api!(
    AlterPartitionReassignments,
    AlterPartitionReassignments,
    0..=1,
    AlterPartitionReassignmentsRequest,
    alter_partition_reassignments
);
api!(
    ListPartitionReassignments,
    ListPartitionReassignments,
    0..=0,
    ListPartitionReassignmentsRequest,
    list_partition_reassignments
);
api!(
    DescribeQuorum,
    DescribeQuorum,
    0..=2,
    DescribeQuorumRequest,
    describe_quorum
);
api!(
    DescribeTopicPartitions,
    DescribeTopicPartitions,
    0..=0,
    DescribeTopicPartitionsRequest,
    describe_topic_partitions,
    async
);
api!(
    ListConfigResources,
    ListConfigResources,
    0..=1,
    ListConfigResourcesRequest,
    list_config_resources,
    async
);

/// Nothing is ever being reassigned.
fn list_partition_reassignments(
    call: &Call<'_>,
    _request: &ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    if !call.may_cluster(Operation::Describe) {
        return ListPartitionReassignmentsResponse::default()
            .with_error_code(codes::CLUSTER_AUTHORIZATION_FAILED)
            .with_error_message(Some(StrBytes::from_static_str(
                "Cluster authorization failed.",
            )));
    }
    ListPartitionReassignmentsResponse::default()
        .with_error_message(None)
        .with_topics(Vec::new())
}
