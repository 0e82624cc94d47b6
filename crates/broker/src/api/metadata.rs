//! Metadata: the live brokers and each partition's leader — this broker for every partition
//! when it is alone; with several brokers over PostgreSQL the live owner of the partition's
//! slot (see [`crate::ownership`]), listed as reached through the listener the request came
//! in on. A partition with no live leader (its broker stopped and none has taken its slot
//! over yet) is LEADER_NOT_AVAILABLE with leader -1, as in Kafka. Missing topics are created
//! when `--auto-create-topics` is on.

use crate::acl::Operation;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use std::ops::RangeInclusive;

use kafka_protocol::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::registry::Api;
use super::{codes, Call};
use crate::ownership::Serving;
use crate::shutdown::Shutdown;

async fn handle(call: &Call<'_>, request: MetadataRequest) -> MetadataResponse {
    let context = call.context;
    let node = BrokerId(context.ownership.node_id());
    let others = context.ownership.others(call.endpoint().protocol);
    // v0: an empty list means every topic; v1+: null means every topic, empty means none.
    let all = match &request.topics {
        None => true,
        Some(topics) => call.version == 0 && topics.is_empty(),
    };
    // A name, or the id of a topic asked for by an id no topic has.
    let names: Vec<Result<String, Uuid>> = if all {
        match context.log.topics().await {
            // Every topic the principal may describe (Kafka leaves the others out).
            Ok(topics) => topics
                .into_iter()
                .filter(|(name, _)| call.may_topic(Operation::Describe, name))
                .map(|(name, _)| Ok(name))
                .collect(),
            // The log cannot list its topics: the answer lists none (Kafka's answer when
            // its metadata cache is empty).
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the topics");
                Vec::new()
            }
        }
    } else {
        let mut names = Vec::new();
        for t in request.topics.iter().flatten() {
            match &t.name {
                Some(name) => names.push(Ok(name.to_string())),
                // v12+: a topic asked for by id alone.
                None => match context.topic_by_id(t.topic_id).await {
                    Some(name) => names.push(Ok(name)),
                    None => names.push(Err(t.topic_id)),
                },
            }
        }
        names
    };
    // v0-3 have no flag: Kafka creates topics for them when auto-creation is on.
    let allow_create = call.version < 4 || request.allow_auto_topic_creation;
    let mut topics = Vec::with_capacity(names.len());
    for name in names {
        let name = match name {
            Ok(name) => name,
            Err(id) => {
                topics.push(
                    MetadataResponseTopic::default()
                        .with_topic_id(id)
                        .with_error_code(codes::UNKNOWN_TOPIC_ID),
                );
                continue;
            }
        };
        let topic = MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(name.clone()))));
        if !call.may_topic(Operation::Describe, &name) {
            // Kafka: a named topic the principal may not describe, without its id.
            topics.push(topic.with_error_code(codes::TOPIC_AUTHORIZATION_FAILED));
            continue;
        }
        let topic = topic.with_topic_id(context.topic_id(&name));
        // Creating a missing topic needs CREATE on the cluster or on the topic (Kafka).
        let may_create = allow_create
            && (call.may_cluster(Operation::Create) || call.may_topic(Operation::Create, &name));
        if allow_create && !may_create && context.log.partition_count(&name).is_none() {
            topics.push(topic.with_error_code(codes::TOPIC_AUTHORIZATION_FAILED));
            continue;
        }
        topics.push(match context.topic_or_create(&name, may_create).await {
            Ok(Some(count)) => topic.with_partitions(
                (0..count)
                    .map(|p| {
                        let p = i32::try_from(p).unwrap_or(i32::MAX);
                        let leader = match context.ownership.partition(&name, p) {
                            Serving::Here | Serving::Loading => Some(node),
                            Serving::Elsewhere(n) => {
                                others.iter().any(|o| o.node_id == n).then_some(BrokerId(n))
                            }
                            Serving::Nobody => None,
                        };
                        let partition =
                            MetadataResponsePartition::default().with_partition_index(p);
                        match leader {
                            Some(leader) => partition
                                .with_leader_id(leader)
                                .with_replica_nodes(vec![leader])
                                .with_isr_nodes(vec![leader]),
                            None => partition
                                .with_error_code(codes::LEADER_NOT_AVAILABLE)
                                .with_leader_id(BrokerId(-1)),
                        }
                    })
                    .collect(),
            ),
            Ok(None) => topic.with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION),
            Err(e) => {
                topic.with_error_code(e.kafka_code().unwrap_or(codes::INVALID_TOPIC_EXCEPTION))
            }
        });
    }
    let mut brokers = vec![MetadataResponseBroker::default()
        .with_node_id(node)
        .with_host(StrBytes::from_string(call.endpoint().host.clone()))
        .with_port(call.endpoint().port)];
    brokers.extend(others.iter().map(|o| {
        MetadataResponseBroker::default()
            .with_node_id(BrokerId(o.node_id))
            .with_host(StrBytes::from_string(o.host.clone()))
            .with_port(o.port)
    }));
    brokers.sort_by_key(|b| b.node_id.0);
    // Every broker can do what Kafka sends to the controller (topics live in the shared
    // database): the lowest live node id, so that every broker names the same one.
    let controller = brokers.first().map_or(node, |b| b.node_id);
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(StrBytes::from_string(context.cluster_id.clone())))
        .with_controller_id(controller)
        .with_topics(topics)
}

pub(crate) struct Metadata;

impl Api for Metadata {
    const KEY: ApiKey = ApiKey::Metadata;
    /// v10 adds topic ids (which the consumer group protocol names topics by), v12 topics
    /// asked for by id, v13 a top-level error code (KIP-1102: REBOOTSTRAP_REQUIRED, which a
    /// broker over its own state never needs to send: always 0 here).
    const VERSIONS: RangeInclusive<i16> = 0..=13;
    type Request = MetadataRequest;

    async fn handle(
        call: &Call<'_>,
        request: MetadataRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<MetadataResponse> {
        Some(handle(call, request).await)
    }
}
