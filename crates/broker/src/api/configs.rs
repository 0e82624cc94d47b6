//! DescribeConfigs for topics and this broker, and IncrementalAlterConfigs / AlterConfigs for
//! topic configs (kept in [`TopicConfigs`](super::topic_configs::TopicConfigs), validated
//! against Kafka's catalogue, enforced by nothing: see the README).

use crate::acl::Operation;
use std::ops::RangeInclusive;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, ApiKey, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};

use super::group_configs;
use super::registry::Api;
use super::topic_configs::{self, source, str_bytes, Kind, Overrides, Refused};
use super::{codes, Call};
use crate::context::Context;
use crate::shutdown::Shutdown;

/// Kafka's `ConfigResource.Type` values.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const GROUP: i8 = 32;

/// IncrementalAlterConfigs' operations.
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// One config as DescribeConfigs reports it.
struct Described {
    name: &'static str,
    value: String,
    source: i8,
    kind: Kind,
    read_only: bool,
    synonyms: Vec<(String, String, i8)>,
    doc: &'static str,
}

/// The topic `name`'s configs, or why it cannot be described.
fn topic_configs(context: &Context, name: &str) -> Result<Vec<Described>, Refused> {
    if context.log.partition_count(name).is_none() {
        return Err(Refused::new(
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            format!("The topic '{name}' does not exist."),
        ));
    }
    let overrides = context.topic_configs.get(name);
    Ok(topic_configs::entries(&overrides)
        .into_iter()
        .map(|e| {
            let mut synonyms = Vec::new();
            if e.source == source::TOPIC_CONFIG {
                synonyms.push((e.spec.name.to_string(), e.value.clone(), e.source));
            }
            if topic_configs::default_source(e.spec.name) == source::DYNAMIC_DEFAULT_BROKER_CONFIG {
                synonyms.push((
                    e.spec.broker_synonym.to_string(),
                    e.spec.default.to_string(),
                    source::DYNAMIC_DEFAULT_BROKER_CONFIG,
                ));
            }
            synonyms.push((
                e.spec.broker_synonym.to_string(),
                e.spec.default.to_string(),
                source::DEFAULT_CONFIG,
            ));
            Described {
                name: e.spec.name,
                value: e.value,
                source: e.source,
                kind: e.spec.kind,
                read_only: false,
                synonyms,
                doc: e.spec.doc,
            }
        })
        .collect())
}

/// Group `name`'s configs (Kafka's `ConfigHelper.createGroupConfigEntry`): every group config,
/// set on the group (GROUP_CONFIG, 8) or at its default (DEFAULT_CONFIG, 5), each its own one
/// synonym. A group need not exist, as in Kafka.
fn group_configs(context: &Context, name: &str) -> Result<Vec<Described>, Refused> {
    if name.is_empty() {
        return Err(Refused::new(
            codes::INVALID_REQUEST,
            "Group name must not be empty",
        ));
    }
    let mut entries = group_configs::entries(&context.coordinator, name);
    // Kafka lists them in a HashMap's order; sorted here, as the broker's are.
    entries.sort_by_key(|(config, _, _, _)| *config);
    Ok(entries
        .into_iter()
        .map(|(config, value, set, kind)| {
            let source = if set {
                group_configs::GROUP_CONFIG_SOURCE
            } else {
                source::DEFAULT_CONFIG
            };
            Described {
                name: config,
                value: value.clone(),
                source,
                kind,
                read_only: false,
                synonyms: vec![(config.to_string(), value, source)],
                doc: group_configs::doc(config),
            }
        })
        .collect())
}

/// Checks that a broker resource names this broker (or the cluster default, the empty name).
fn check_broker(node_id: i32, name: &str) -> Result<(), Refused> {
    if name.is_empty() || name == node_id.to_string() {
        return Ok(());
    }
    Err(Refused::new(
        codes::INVALID_REQUEST,
        format!("Unexpected broker id, expected {node_id} or empty string, but received {name}"),
    ))
}

/// The broker's configs clients read: what its flags set (static), the rest at Kafka's
/// defaults. All read-only here.
fn broker_configs(context: &Context, name: &str) -> Result<Vec<Described>, Refused> {
    check_broker(context.config.node_id, name)?;
    let c = &context.config;
    let set = |name: &'static str, value: String, kind: Kind, doc: &'static str| Described {
        name,
        value: value.clone(),
        source: source::STATIC_BROKER_CONFIG,
        kind,
        read_only: true,
        synonyms: vec![(name.to_string(), value, source::STATIC_BROKER_CONFIG)],
        doc,
    };
    let default = |name: &'static str, value: &str, kind: Kind, doc: &'static str| Described {
        name,
        value: value.to_string(),
        source: source::DEFAULT_CONFIG,
        kind,
        read_only: true,
        synonyms: vec![(name.to_string(), value.to_string(), source::DEFAULT_CONFIG)],
        doc,
    };
    let mut all =
        vec![
        set(
            "auto.create.topics.enable",
            c.auto_create_topics.to_string(),
            Kind::Boolean,
            "Enables auto creation of topics on the server.",
        ),
        set(
            "broker.id",
            context.config.node_id.to_string(),
            Kind::Int,
            "The broker id.",
        ),
        set(
            "advertised.listeners",
            context
                .endpoints
                .iter()
                .map(|e| format!("{}://{}:{}", e.protocol.name(), e.host, e.port))
                .collect::<Vec<_>>()
                .join(","),
            Kind::String,
            "The listeners clients are told to connect to (Metadata and FindCoordinator answer \
             each client with the one it came in on).",
        ),
        set(
            "listeners",
            c.all_listeners()
                .iter()
                .map(|l| format!("{}://{}", l.protocol.name(), l.address))
                .collect::<Vec<_>>()
                .join(","),
            Kind::String,
            "The listeners the broker binds (--listen, repeatable).",
        ),
        default(
            "compression.type",
            "producer",
            Kind::String,
            "The default compression of topics.",
        ),
        default(
            "default.replication.factor",
            "1",
            Kind::Int,
            "The replication factor of automatically created topics.",
        ),
        set(
            "group.initial.rebalance.delay.ms",
            c.group_initial_rebalance_delay_ms.to_string(),
            Kind::Int,
            "How long the coordinator waits for more members to join a new group.",
        ),
        set(
            "group.max.session.timeout.ms",
            c.group_max_session_timeout_ms.to_string(),
            Kind::Int,
            "The maximum allowed session timeout for registered consumers.",
        ),
        set(
            "group.max.size",
            c.group_max_size.to_string(),
            Kind::Int,
            "The maximum number of consumers that a single consumer group can accommodate.",
        ),
        set(
            "group.min.session.timeout.ms",
            c.group_min_session_timeout_ms.to_string(),
            Kind::Int,
            "The minimum allowed session timeout for registered consumers.",
        ),
        default(
            "log.cleanup.policy",
            "delete",
            Kind::List,
            "The default cleanup policy of topics.",
        ),
        default(
            "log.retention.bytes",
            "-1",
            Kind::Long,
            "The maximum size of a log before deleting it.",
        ),
        default(
            "log.retention.ms",
            "604800000",
            Kind::Long,
            "The number of milliseconds to keep a log file before deleting it.",
        ),
        default(
            "log.segment.bytes",
            "1073741824",
            Kind::Int,
            "The maximum size of a single log file.",
        ),
        default(
            "message.max.bytes",
            "1048588",
            Kind::Int,
            "The largest record batch size allowed by Kafka (after compression).",
        ),
        Described {
            // Kafka 4.1+: the controller's cluster-level record (see `CLUSTER_DEFAULTS`).
            source: source::DYNAMIC_DEFAULT_BROKER_CONFIG,
            synonyms: vec![
                (
                    "min.insync.replicas".into(),
                    "1".into(),
                    source::DYNAMIC_DEFAULT_BROKER_CONFIG,
                ),
                ("min.insync.replicas".into(), "1".into(), source::DEFAULT_CONFIG),
            ],
            ..default(
                "min.insync.replicas",
                "1",
                Kind::Int,
                "The minimum number of replicas that must acknowledge a write with acks=all.",
            )
        },
        set("node.id", context.config.node_id.to_string(), Kind::Int, "The node id."),
        set(
            "num.partitions",
            c.num_partitions.to_string(),
            Kind::Int,
            "The default number of log partitions per topic.",
        ),
        default(
            "offsets.topic.replication.factor",
            "1",
            Kind::Short,
            "The replication factor for the offsets topic.",
        ),
        set(
            "offsets.retention.minutes",
            c.offsets_retention_minutes.to_string(),
            Kind::Int,
            "For subscribed consumers, committed offset of a partition is expired after this long.",
        ),
        default(
            "transaction.state.log.replication.factor",
            "1",
            Kind::Short,
            "The replication factor for the transaction topic.",
        ),
    ];
    all.sort_by_key(|d| d.name);
    Ok(all)
}

fn describe_configs(call: &Call<'_>, request: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let context = call.context;
    let results = request
        .resources
        .iter()
        .map(|resource| {
            let name = resource.resource_name.as_str();
            let described = match resource.resource_type {
                TOPIC if !call.may_topic(Operation::DescribeConfigs, name) => {
                    Err(unauthorized(TOPIC))
                }
                BROKER if !call.may_cluster(Operation::DescribeConfigs) => {
                    Err(unauthorized(BROKER))
                }
                GROUP if !call.may_group(Operation::DescribeConfigs, name) => {
                    Err(unauthorized(GROUP))
                }
                TOPIC => topic_configs(context, name),
                BROKER => broker_configs(context, name),
                GROUP => group_configs(context, name),
                other => Err(unsupported_type(other)),
            };
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            match described {
                Ok(configs) => {
                    let wanted = resource.configuration_keys.as_ref();
                    let configs = configs
                        .into_iter()
                        .filter(|d| {
                            wanted.is_none_or(|keys| keys.iter().any(|k| k.as_str() == d.name))
                        })
                        .map(|d| entry(d, request.include_synonyms, request.include_documentation))
                        .collect();
                    result.with_error_message(None).with_configs(configs)
                }
                Err(refused) => result
                    .with_error_code(refused.code)
                    .with_error_message(Some(str_bytes(refused.message))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn entry(d: Described, synonyms: bool, documentation: bool) -> DescribeConfigsResourceResult {
    let synonyms = if synonyms {
        d.synonyms
            .into_iter()
            .map(|(name, value, source)| {
                DescribeConfigsSynonym::default()
                    .with_name(str_bytes(name))
                    .with_value(Some(str_bytes(value)))
                    .with_source(source)
            })
            .collect()
    } else {
        Vec::new()
    };
    DescribeConfigsResourceResult::default()
        .with_name(str_bytes(d.name))
        .with_value(Some(str_bytes(d.value)))
        .with_read_only(d.read_only)
        .with_config_source(d.source)
        .with_is_sensitive(false)
        .with_synonyms(synonyms)
        .with_config_type(d.kind as i8)
        .with_documentation(documentation.then(|| str_bytes(d.doc)))
}

/// TOPIC_AUTHORIZATION_FAILED for a topic, GROUP_AUTHORIZATION_FAILED for a group,
/// CLUSTER_AUTHORIZATION_FAILED for the broker (Kafka checks a broker's configs on the
/// cluster resource).
fn unauthorized(resource_type: i8) -> Refused {
    if resource_type == GROUP {
        return Refused::new(
            codes::GROUP_AUTHORIZATION_FAILED,
            "Group authorization failed.".to_string(),
        );
    }
    if resource_type == TOPIC {
        Refused::new(
            codes::TOPIC_AUTHORIZATION_FAILED,
            "Authorization failed.".to_string(),
        )
    } else {
        Refused::new(
            codes::CLUSTER_AUTHORIZATION_FAILED,
            "Cluster authorization failed.".to_string(),
        )
    }
}

/// Whether the principal may alter the configs of the resource (ALTER_CONFIGS).
fn may_alter(call: &Call<'_>, resource_type: i8, name: &str) -> Result<(), Refused> {
    let allowed = match resource_type {
        TOPIC => call.may_topic(Operation::AlterConfigs, name),
        BROKER => call.may_cluster(Operation::AlterConfigs),
        GROUP => call.may_group(Operation::AlterConfigs, name),
        _ => true,
    };
    if allowed {
        Ok(())
    } else {
        Err(unauthorized(resource_type))
    }
}

fn unsupported_type(resource_type: i8) -> Refused {
    Refused::new(
        codes::INVALID_REQUEST,
        format!("Unsupported resource type {resource_type}: this broker has configs of topics (2), brokers (4) and groups (32)"),
    )
}

pub(crate) struct DescribeConfigs;

impl Api for DescribeConfigs {
    const KEY: ApiKey = ApiKey::DescribeConfigs;
    /// From v1, the lowest kafka-protocol decodes (Kafka 4 removed v0); v3 adds config types
    /// and documentation.
    const VERSIONS: RangeInclusive<i16> = 1..=4;
    type Request = DescribeConfigsRequest;

    async fn handle(
        call: &Call<'_>,
        request: DescribeConfigsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<DescribeConfigsResponse> {
        Some(describe_configs(call, request))
    }
}

/// The configs a resource of an alter request may change: a topic's, or why not.
fn alterable(context: &Context, resource_type: i8, name: &str) -> Result<Overrides, Refused> {
    match resource_type {
        TOPIC => {
            if context.log.partition_count(name).is_none() {
                return Err(Refused::new(
                    codes::UNKNOWN_TOPIC_OR_PARTITION,
                    format!("The topic '{name}' does not exist."),
                ));
            }
            Ok(context.topic_configs.get(name))
        }
        BROKER => {
            check_broker(context.config.node_id, name)?;
            Err(Refused::new(
                codes::INVALID_REQUEST,
                "The broker's configs are set by its flags at start-up and cannot be altered",
            ))
        }
        other => Err(unsupported_type(other)),
    }
}

fn duplicate_keys<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), Refused> {
    let mut seen = std::collections::BTreeSet::new();
    for name in names {
        if !seen.insert(name) {
            return Err(Refused::new(
                codes::INVALID_REQUEST,
                format!("Error due to duplicate config keys: {name}"),
            ));
        }
    }
    Ok(())
}

/// The new value of list config `key` once `value`'s comma-separated items are appended
/// (those not in it yet, in order) or subtracted: Kafka's `ConfigAdminManager` rule, starting
/// from the topic's override, else the config's default. A config that is not a list gets
/// INVALID_CONFIG, as in Kafka.
fn append_or_subtract(
    key: &str,
    append: bool,
    value: Option<&str>,
    current: Option<&str>,
) -> Result<String, Refused> {
    let verb = if append { "append" } else { "subtract" };
    let spec = topic_configs::find(key).ok_or_else(|| {
        Refused::new(
            codes::INVALID_CONFIG,
            format!("Unknown topic config name: {key}"),
        )
    })?;
    if spec.kind != topic_configs::Kind::List {
        return Err(Refused::new(
            codes::INVALID_CONFIG,
            format!("Config value {verb} is not allowed for config key: {key}"),
        ));
    }
    let value = value.ok_or_else(|| {
        Refused::new(
            codes::INVALID_CONFIG,
            format!("Null value not supported for topic config: {key}"),
        )
    })?;
    let items = |list: &str| -> Vec<String> {
        list.split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(String::from)
            .collect()
    };
    let mut list = items(current.unwrap_or(spec.default));
    let given = items(value);
    if append {
        for item in given {
            if !list.contains(&item) {
                list.push(item);
            }
        }
    } else {
        list.retain(|item| !given.contains(item));
    }
    Ok(list.join(","))
}

/// One resource's incremental changes, all or none: the topic and its configs to keep (none
/// when only validating), or why not.
fn alter_incrementally(
    context: &Context,
    resource: &kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource,
    validate_only: bool,
) -> Result<Option<(String, Overrides)>, Refused> {
    let name = resource.resource_name.as_str();
    let mut overrides = alterable(context, resource.resource_type, name)?;
    duplicate_keys(resource.configs.iter().map(|c| c.name.as_str()))?;
    for config in &resource.configs {
        let key = config.name.as_str();
        let value = config.value.as_ref().map(|v| v.as_str());
        match config.config_operation {
            SET => {
                topic_configs::validate(key, value)?;
                if let Some(value) = value {
                    overrides.insert(key.to_string(), value.to_string());
                }
            }
            DELETE => {
                topic_configs::find(key).ok_or_else(|| {
                    Refused::new(
                        codes::INVALID_CONFIG,
                        format!("Unknown topic config name: {key}"),
                    )
                })?;
                overrides.remove(key);
            }
            APPEND | SUBTRACT => {
                let list = append_or_subtract(
                    key,
                    config.config_operation == APPEND,
                    value,
                    overrides.get(key).map(String::as_str),
                )?;
                topic_configs::validate(key, Some(&list))?;
                overrides.insert(key.to_string(), list);
            }
            other => {
                return Err(Refused::new(
                    codes::INVALID_REQUEST,
                    format!("Unknown config operation {other} for config {key}"),
                ))
            }
        }
    }
    Ok((!validate_only).then(|| (name.to_string(), overrides)))
}

/// One resource of an alter request: may the principal alter it, what `change` makes of it,
/// and the result kept (where the broker keeps its state: memory, the data directory,
/// PostgreSQL; a failed write changes nothing and is KAFKA_STORAGE_ERROR).
async fn alter_one(
    call: &Call<'_>,
    resource_type: i8,
    resource_name: &str,
    change: impl FnOnce() -> Result<Option<(String, Overrides)>, Refused>,
) -> Result<(), Refused> {
    may_alter(call, resource_type, resource_name)?;
    let Some((name, overrides)) = change()? else {
        return Ok(());
    };
    call.context
        .topic_configs
        .set(&name, overrides)
        .await
        .map_err(|e| topic_configs::not_kept(&name, &e))?;
    tracing::info!(topic = name.as_str(), "topic configs altered");
    Ok(())
}

async fn incremental_alter_configs(
    call: &Call<'_>,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in &request.resources {
        let response = incremental_alter_configs_response::AlterConfigsResourceResponse::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        let outcome = if resource.resource_type == GROUP {
            let changes = resource.configs.iter().map(|c| {
                (
                    c.name.as_str(),
                    c.config_operation,
                    c.value.as_ref().map(|v| v.as_str()),
                )
            });
            alter_group(
                call,
                resource.resource_name.as_str(),
                false,
                changes,
                request.validate_only,
            )
            .await
        } else {
            alter_one(
                call,
                resource.resource_type,
                resource.resource_name.as_str(),
                || alter_incrementally(call.context, resource, request.validate_only),
            )
            .await
        };
        responses.push(match outcome {
            Ok(()) => response.with_error_message(None),
            Err(refused) => response
                .with_error_code(refused.code)
                .with_error_message(Some(str_bytes(refused.message))),
        });
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

pub(crate) struct IncrementalAlterConfigs;

impl Api for IncrementalAlterConfigs {
    const KEY: ApiKey = ApiKey::IncrementalAlterConfigs;
    const VERSIONS: RangeInclusive<i16> = 0..=1;
    type Request = IncrementalAlterConfigsRequest;

    async fn handle(
        call: &Call<'_>,
        request: IncrementalAlterConfigsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<IncrementalAlterConfigsResponse> {
        Some(incremental_alter_configs(call, request).await)
    }
}

/// Alters group `name`'s configs, all or none, as Kafka's controller does: `changes` are
/// (name, operation, value) applied to the group's configs (to none for the legacy
/// AlterConfigs, `whole`: what is not named goes back to its default), then the whole result
/// is checked against the coordinator's bounds, kept, and put in force.
async fn alter_group<'a>(
    call: &Call<'_>,
    name: &str,
    whole: bool,
    changes: impl Iterator<Item = (&'a str, i8, Option<&'a str>)> + Clone,
    validate_only: bool,
) -> Result<(), Refused> {
    if name.is_empty() {
        return Err(Refused::new(
            codes::INVALID_REQUEST,
            "Default group resources are not allowed.",
        ));
    }
    may_alter(call, GROUP, name)?;
    duplicate_keys(changes.clone().map(|(key, _, _)| key))?;
    let coordinator = &call.context.coordinator;
    let mut config = if whole {
        coordinator_core::GroupConfig::default()
    } else {
        coordinator.group_config(name)
    };
    for (key, operation, value) in changes {
        let new = match operation {
            SET => {
                let Some(value) = value else {
                    return Err(Refused::new(
                        codes::INVALID_REQUEST,
                        format!("Null value not supported for : {key}"),
                    ));
                };
                Some(value)
            }
            DELETE => None,
            APPEND | SUBTRACT => {
                let verb = if operation == APPEND {
                    "APPEND"
                } else {
                    "SUBTRACT"
                };
                return Err(Refused::new(
                    codes::INVALID_CONFIG,
                    format!("Can't {verb} to key {key} because its type is not LIST."),
                ));
            }
            other => {
                return Err(Refused::new(
                    codes::INVALID_REQUEST,
                    format!("Unknown config operation {other} for config {key}"),
                ))
            }
        };
        config = group_configs::with(config, key, new)?;
    }
    if validate_only {
        return coordinator
            .check_group_config(&config)
            .map_err(group_configs::refused);
    }
    call.context
        .group_configs
        .set(coordinator, name, config)
        .await?;
    tracing::info!(group = name, "group configs altered");
    Ok(())
}

/// Replaces one resource's configs with the given ones (the legacy AlterConfigs: what is not
/// named goes back to its default), all or none.
fn alter_whole(
    context: &Context,
    resource: &kafka_protocol::messages::alter_configs_request::AlterConfigsResource,
    validate_only: bool,
) -> Result<Option<(String, Overrides)>, Refused> {
    let name = resource.resource_name.as_str();
    alterable(context, resource.resource_type, name)?;
    duplicate_keys(resource.configs.iter().map(|c| c.name.as_str()))?;
    let mut overrides = Overrides::new();
    for config in &resource.configs {
        let value = config.value.as_ref().map(|v| v.as_str());
        topic_configs::validate(config.name.as_str(), value)?;
        if let Some(value) = value {
            overrides.insert(config.name.to_string(), value.to_string());
        }
    }
    Ok((!validate_only).then(|| (name.to_string(), overrides)))
}

async fn alter_configs(call: &Call<'_>, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in &request.resources {
        let response = alter_configs_response::AlterConfigsResourceResponse::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        let outcome = if resource.resource_type == GROUP {
            let changes = resource
                .configs
                .iter()
                .map(|c| (c.name.as_str(), SET, c.value.as_ref().map(|v| v.as_str())));
            alter_group(
                call,
                resource.resource_name.as_str(),
                true,
                changes,
                request.validate_only,
            )
            .await
        } else {
            alter_one(
                call,
                resource.resource_type,
                resource.resource_name.as_str(),
                || alter_whole(call.context, resource, request.validate_only),
            )
            .await
        };
        responses.push(match outcome {
            Ok(()) => response.with_error_message(None),
            Err(refused) => response
                .with_error_code(refused.code)
                .with_error_message(Some(str_bytes(refused.message))),
        });
    }
    AlterConfigsResponse::default().with_responses(responses)
}

pub(crate) struct AlterConfigs;

impl Api for AlterConfigs {
    const KEY: ApiKey = ApiKey::AlterConfigs;
    const VERSIONS: RangeInclusive<i16> = 0..=2;
    type Request = AlterConfigsRequest;

    async fn handle(
        call: &Call<'_>,
        request: AlterConfigsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<AlterConfigsResponse> {
        Some(alter_configs(call, request).await)
    }
}
