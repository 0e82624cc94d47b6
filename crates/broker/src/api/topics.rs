//! The topic admin APIs: CreateTopics, DeleteTopics and CreatePartitions, through the
//! partition log's port. One broker holds every partition, so the only replication factor
//! is 1 and manual replica assignments are refused.

use crate::acl::Operation;
use std::collections::BTreeSet;
use std::ops::RangeInclusive;

use coordinator_core::{validate_topic_name, LogError, TopicPartition, MAX_PARTITIONS_PER_TOPIC};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
    CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, TopicName,
};
use uuid::Uuid;

use super::registry::Api;
use super::topic_configs::{self, str_bytes, Overrides, Refused};
use super::{codes, Call};
use crate::context::Context;
use crate::shutdown::Shutdown;

/// The code a log error is reported with on the admin APIs: Kafka's, and INVALID_REQUEST for
/// what the log refuses as an argument (a log that cannot delete topics, say).
fn admin_code(e: &LogError) -> i16 {
    match e {
        LogError::InvalidArgument { .. } => codes::INVALID_REQUEST,
        e => e.kafka_code().unwrap_or(codes::UNKNOWN_SERVER_ERROR),
    }
}

fn refused_by_log(e: &LogError) -> Refused {
    Refused::new(admin_code(e), e.to_string())
}

/// The names that occur more than once in `names` (Kafka answers each of them INVALID_REQUEST).
fn duplicates<'a>(names: impl Iterator<Item = &'a str>) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    let mut twice = BTreeSet::new();
    for name in names {
        if !seen.insert(name) {
            twice.insert(name);
        }
    }
    twice
}

/// TOPIC_AUTHORIZATION_FAILED with Kafka's message.
fn unauthorized() -> Refused {
    Refused::new(
        codes::TOPIC_AUTHORIZATION_FAILED,
        "Authorization failed.".to_string(),
    )
}

fn duplicate_refusal(request: &str) -> Refused {
    Refused::new(
        codes::INVALID_REQUEST,
        format!("{request} request must not name the same topic more than once"),
    )
}

/// What a valid CreateTopics entry asks for.
struct NewTopic {
    partitions: u32,
    overrides: Overrides,
}

/// Checks one CreateTopics entry as Kafka does, in Kafka's order.
async fn check_new_topic(context: &Context, topic: &CreatableTopic) -> Result<NewTopic, Refused> {
    let name = topic.name.0.as_str();
    validate_topic_name(name).map_err(|e| refused_by_log(&e))?;
    if crate::context::is_internal_topic(name) {
        // Kafka refuses `__cluster_metadata` so; it creates the others itself on first use,
        // which this broker never needs (it keeps their state in its stores).
        return Err(Refused::new(
            codes::INVALID_REQUEST,
            format!("Creation of internal topic {name} is prohibited."),
        ));
    }
    if context.log.partition_count(name).is_some() {
        return Err(Refused::new(
            codes::TOPIC_ALREADY_EXISTS,
            format!("Topic '{name}' already exists."),
        ));
    }
    // Kafka refuses a name equal to an existing one once `.` reads as `_` (their metric names
    // collide); checked here too so that `validate_only` answers as the creation would.
    let metric = name.replace('.', "_");
    let topics = context.log.topics().await.map_err(|e| refused_by_log(&e))?;
    if let Some((other, _)) = topics.iter().find(|(t, _)| t.replace('.', "_") == metric) {
        return Err(Refused::new(
            codes::INVALID_TOPIC_EXCEPTION,
            format!("Topic '{name}' collides with existing topic '{other}': `.` and `_` collide."),
        ));
    }
    if !topic.assignments.is_empty() {
        // Kafka: the assignment gives the partitions; the count and factor must be -1.
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return Err(Refused::new(
                codes::INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
            ));
        }
        let mut indexes: Vec<i32> = topic
            .assignments
            .iter()
            .map(|a| a.partition_index)
            .collect();
        indexes.sort_unstable();
        if indexes
            .iter()
            .enumerate()
            .any(|(i, &p)| i64::from(p) != i as i64)
        {
            return Err(Refused::new(
                codes::INVALID_REPLICA_ASSIGNMENT,
                "Partitions should be a consecutive 0-based integer sequence.",
            ));
        }
        single_broker(
            context.config.node_id,
            topic.assignments.iter().map(|a| &a.broker_ids[..]),
        )?;
    }
    let partitions = match topic.num_partitions {
        -1 if !topic.assignments.is_empty() => {
            u32::try_from(topic.assignments.len()).unwrap_or(u32::MAX)
        }
        -1 => context.config.num_partitions,
        n => match u32::try_from(n) {
            Ok(n) if n > 0 && n <= MAX_PARTITIONS_PER_TOPIC => n,
            _ => {
                return Err(Refused::new(
                    codes::INVALID_PARTITIONS,
                    format!(
                        "Number of partitions must be larger than 0 (at most {MAX_PARTITIONS_PER_TOPIC}), \
                         or -1 to use the default value; got {n}."
                    ),
                ))
            }
        },
    };
    match topic.replication_factor {
        1 | -1 => {}
        n if n < 1 => {
            return Err(Refused::new(
                codes::INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            ))
        }
        n => {
            return Err(Refused::new(
                codes::INVALID_REPLICATION_FACTOR,
                format!(
                    "Unable to replicate the partition {n} time(s): The target replication factor \
                     of {n} cannot be reached because only 1 broker(s) are registered."
                ),
            ))
        }
    }
    let mut overrides = Overrides::new();
    for config in &topic.configs {
        let value = config.value.as_ref().map(|v| v.as_str());
        topic_configs::validate(config.name.as_str(), value)?;
        if let Some(value) = value {
            overrides.insert(config.name.to_string(), value.to_string());
        }
    }
    Ok(NewTopic {
        partitions,
        overrides,
    })
}

async fn create_topics(call: &Call<'_>, request: CreateTopicsRequest) -> CreateTopicsResponse {
    let context = call.context;
    let twice = duplicates(request.topics.iter().map(|t| t.name.0.as_str()));
    let mut results = Vec::with_capacity(request.topics.len());
    // Kafka: CREATE on the cluster, or on each topic.
    let on_cluster = call.may_cluster(Operation::Create);
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let result = CreatableTopicResult::default().with_name(topic.name.clone());
        let outcome = if twice.contains(name) {
            Err(duplicate_refusal("CreateTopics"))
        } else if !on_cluster && !call.may_topic(Operation::Create, name) {
            Err(unauthorized())
        } else {
            match check_new_topic(context, topic).await {
                Ok(new) if request.validate_only => Ok(new),
                Ok(new) => create(context, name, new).await,
                Err(refused) => Err(refused),
            }
        };
        results.push(match outcome {
            Ok(new) => created(context, result, name, &new),
            Err(refused) => result
                .with_error_code(refused.code)
                .with_error_message(Some(str_bytes(refused.message)))
                .with_configs(None),
        });
    }
    CreateTopicsResponse::default().with_topics(results)
}

/// A successful CreateTopics result: v5+ reports the partition count, the replication factor
/// and every config of the topic; v7+ its id.
fn created(
    context: &Context,
    result: CreatableTopicResult,
    name: &str,
    new: &NewTopic,
) -> CreatableTopicResult {
    let configs = topic_configs::entries(&new.overrides)
        .into_iter()
        .map(|e| {
            CreatableTopicConfigs::default()
                .with_name(str_bytes(e.spec.name))
                .with_value(Some(str_bytes(e.value)))
                .with_config_source(e.source)
        })
        .collect();
    result
        .with_error_message(None)
        .with_topic_id(context.topic_id(name))
        .with_num_partitions(i32::try_from(new.partitions).unwrap_or(i32::MAX))
        .with_replication_factor(1)
        .with_configs(Some(configs))
}

/// Creates topic `name` as checked: its configs kept first (a failed write creates nothing),
/// then its partitions in the log (a refusal there takes the configs back).
async fn create(context: &Context, name: &str, new: NewTopic) -> Result<NewTopic, Refused> {
    context
        .topic_configs
        .set(name, new.overrides.clone())
        .await
        .map_err(|e| topic_configs::not_kept(name, &e))?;
    match context.log.create_topic(name, new.partitions).await {
        Ok(()) => {
            tracing::info!(topic = name, partitions = new.partitions, "topic created");
            Ok(new)
        }
        Err(e) => {
            if context.log.partition_count(name).is_none() {
                if let Err(undo) = context.topic_configs.set(name, Overrides::new()).await {
                    tracing::warn!(topic = name, error = %undo, "the configs of a topic not created could not be taken back");
                }
            }
            Err(refused_by_log(&e))
        }
    }
}

pub(crate) struct CreateTopics;

impl Api for CreateTopics {
    const KEY: ApiKey = ApiKey::CreateTopics;
    /// Every version kafka-protocol decodes (Kafka 4 removed v0-1 as well).
    const VERSIONS: RangeInclusive<i16> = 2..=7;
    type Request = CreateTopicsRequest;

    async fn handle(
        call: &Call<'_>,
        request: CreateTopicsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<CreateTopicsResponse> {
        Some(create_topics(call, request).await)
    }
}

/// A topic to delete, by name or (v6+) by id.
enum Target {
    Name(String),
    Id(Uuid),
}

async fn delete_topics(call: &Call<'_>, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let context = call.context;
    let targets: Vec<Target> = request
        .topic_names
        .iter()
        .map(|n| Target::Name(n.0.to_string()))
        .chain(request.topics.iter().map(|t| match &t.name {
            Some(name) => Target::Name(name.0.to_string()),
            None => Target::Id(t.topic_id),
        }))
        .collect();
    let mut responses = Vec::with_capacity(targets.len());
    for target in targets {
        let (name, id) = match target {
            Target::Name(name) => {
                let id = context.topic_id(&name);
                (Some(name), id)
            }
            Target::Id(id) => (context.topic_by_id(id).await, id),
        };
        let result = DeletableTopicResult::default()
            .with_name(name.clone().map(|n| TopicName(str_bytes(n))))
            .with_topic_id(id);
        let outcome = match &name {
            None => Err(Refused::new(
                codes::UNKNOWN_TOPIC_ID,
                format!("No topic has the id {id}."),
            )),
            Some(name) if !call.may_topic(Operation::Delete, name) => Err(unauthorized()),
            Some(name) => delete_topic(context, name).await,
        };
        responses.push(match outcome {
            Ok(()) => result.with_topic_id(id),
            Err(refused) => result
                .with_error_code(refused.code)
                .with_error_message(Some(str_bytes(refused.message))),
        });
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

/// Deletes `name` from the log, its configs, and the committed offsets groups hold for it.
async fn delete_topic(context: &Context, name: &str) -> Result<(), Refused> {
    if context.log.partition_count(name).is_none() {
        return Err(Refused::new(
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            "This server does not host this topic-partition.",
        ));
    }
    context
        .log
        .delete_topic(name)
        .await
        .map_err(|e| refused_by_log(&e))?;
    if let Err(e) = context.topic_configs.remove(name).await {
        // The topic is gone; its stale configs are replaced when a topic of that name is
        // created again (creation sets them, none included).
        tracing::warn!(topic = name, error = %e, "the deleted topic's configs could not be forgotten");
    }
    tracing::info!(topic = name, "topic deleted");
    delete_committed_offsets(context, name).await;
    // And the share groups' state of its partitions.
    let gone = context.share.forget_topic(name);
    if let Err(e) = context.share.keep_keys(gone).await {
        tracing::warn!(topic = name, error = %e, "the deleted topic's share state could not be removed; it is removed with the next change");
    }
    Ok(())
}

/// Deletes every group's committed offsets of the deleted topic `name`, as Kafka does (whatever
/// the group's members subscribe to); a failure is logged, the topic is gone either way.
async fn delete_committed_offsets(context: &Context, name: &str) {
    let coordinator = &context.coordinator;
    for group in coordinator.list_groups().await {
        let id = group.group_id.as_str();
        let doomed: Vec<TopicPartition> = match coordinator.committed_offsets(id).await {
            Ok(offsets) => offsets
                .into_keys()
                .filter(|tp| tp.topic() == name)
                .collect(),
            Err(e) => {
                tracing::warn!(group = id, topic = name, error = %e, "cannot list the offsets of a deleted topic");
                continue;
            }
        };
        if doomed.is_empty() {
            continue;
        }
        if let Err(e) = coordinator
            .offsets()
            .delete_of_deleted_topic(id, &doomed)
            .await
        {
            tracing::warn!(group = id, topic = name, error = %e, "the offsets of a deleted topic stay");
        }
    }
}

pub(crate) struct DeleteTopics;

impl Api for DeleteTopics {
    const KEY: ApiKey = ApiKey::DeleteTopics;
    /// v6 names topics by id; kafka-protocol decodes from v1 (Kafka 4 removed v0).
    const VERSIONS: RangeInclusive<i16> = 1..=6;
    type Request = DeleteTopicsRequest;

    async fn handle(
        call: &Call<'_>,
        request: DeleteTopicsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<DeleteTopicsResponse> {
        Some(delete_topics(call, request).await)
    }
}

async fn create_partitions(
    call: &Call<'_>,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let context = call.context;
    let twice = duplicates(request.topics.iter().map(|t| t.name.0.as_str()));
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let outcome = if twice.contains(name) {
            Err(duplicate_refusal("CreatePartitions"))
        } else if !call.may_topic(Operation::Alter, name) {
            Err(unauthorized())
        } else {
            grow(
                context,
                name,
                topic.count,
                topic
                    .assignments
                    .as_ref()
                    .map(|a| a.iter().map(|x| &x.broker_ids[..]).collect()),
            )
            .map(|count| (!request.validate_only).then_some(count))
        };
        let outcome = match outcome {
            Ok(Some(count)) => context
                .log
                .create_partitions(name, count)
                .await
                .map_err(|e| refused_by_log(&e)),
            Ok(None) => Ok(()),
            Err(refused) => Err(refused),
        };
        let result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
        results.push(match outcome {
            Ok(()) => {
                if !request.validate_only {
                    tracing::info!(topic = name, partitions = topic.count, "partitions added");
                }
                result.with_error_message(None)
            }
            Err(refused) => result
                .with_error_code(refused.code)
                .with_error_message(Some(str_bytes(refused.message))),
        });
    }
    CreatePartitionsResponse::default().with_results(results)
}

/// Replica assignments this one broker can honour: each partition's replicas are exactly this
/// broker (Kafka checks the ids against the live brokers: INVALID_REPLICA_ASSIGNMENT).
fn single_broker<'a>(
    node_id: i32,
    assignments: impl Iterator<Item = &'a [kafka_protocol::messages::BrokerId]>,
) -> Result<(), Refused> {
    for replicas in assignments {
        if replicas.len() != 1 || replicas[0].0 != node_id {
            return Err(Refused::new(
                codes::INVALID_REPLICA_ASSIGNMENT,
                format!(
                    "Replica assignment {:?} is invalid: the only broker is {}, and a partition has one replica.",
                    replicas.iter().map(|b| b.0).collect::<Vec<_>>(),
                    node_id
                ),
            ));
        }
    }
    Ok(())
}

/// Checks a CreatePartitions entry: the new total count, growing only; assignments, if
/// given, one per new partition and each naming this broker.
fn grow(
    context: &Context,
    name: &str,
    count: i32,
    assigned: Option<Vec<&[kafka_protocol::messages::BrokerId]>>,
) -> Result<u32, Refused> {
    let current = context.log.partition_count(name).ok_or_else(|| {
        Refused::new(
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            format!("The topic '{name}' does not exist."),
        )
    })?;
    let wanted = u32::try_from(count).unwrap_or(0);
    if let Some(assigned) = assigned {
        if i64::from(wanted) - i64::from(current) != assigned.len() as i64 {
            return Err(Refused::new(
                codes::INVALID_REPLICA_ASSIGNMENT,
                format!(
                    "Increasing the number of partitions by {} but {} assignments provided.",
                    i64::from(wanted) - i64::from(current),
                    assigned.len()
                ),
            ));
        }
        single_broker(context.config.node_id, assigned.into_iter())?;
    }
    if wanted == current {
        return Err(Refused::new(
            codes::INVALID_PARTITIONS,
            format!("Topic already has {current} partitions."),
        ));
    }
    if wanted < current {
        return Err(Refused::new(
            codes::INVALID_PARTITIONS,
            format!(
                "Topic currently has {current} partitions, which is higher than the requested {count}."
            ),
        ));
    }
    if wanted > MAX_PARTITIONS_PER_TOPIC {
        return Err(Refused::new(
            codes::INVALID_PARTITIONS,
            format!("A topic has at most {MAX_PARTITIONS_PER_TOPIC} partitions here; asked for {count}."),
        ));
    }
    Ok(wanted)
}

pub(crate) struct CreatePartitions;

impl Api for CreatePartitions {
    const KEY: ApiKey = ApiKey::CreatePartitions;
    const VERSIONS: RangeInclusive<i16> = 0..=3;
    type Request = CreatePartitionsRequest;

    async fn handle(
        call: &Call<'_>,
        request: CreatePartitionsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<CreatePartitionsResponse> {
        Some(create_partitions(call, request).await)
    }
}
