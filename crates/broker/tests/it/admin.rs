//! Kafka's admin APIs through the protocol: CreateTopics, DeleteTopics, CreatePartitions,
//! DescribeConfigs, IncrementalAlterConfigs, AlterConfigs and DescribeCluster, each rule with
//! the error code Kafka answers.

use crate::common;

use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn new_topic(
    name: &str,
    partitions: i32,
    replication: i16,
) -> create_topics_request::CreatableTopic {
    create_topics_request::CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(partitions)
        .with_replication_factor(replication)
}

fn with_configs(
    topic: create_topics_request::CreatableTopic,
    configs: &[(&str, &str)],
) -> create_topics_request::CreatableTopic {
    topic.with_configs(
        configs
            .iter()
            .map(|(k, v)| {
                create_topics_request::CreatableTopicConfig::default()
                    .with_name(s(k))
                    .with_value(Some(s(v)))
            })
            .collect(),
    )
}

fn create(topics: Vec<create_topics_request::CreatableTopic>) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(5000)
}

/// The error code of each topic CreateTopics answered, in order.
fn create_codes(r: &CreateTopicsResponse) -> Vec<i16> {
    r.topics.iter().map(|t| t.error_code).collect()
}

/// The partition count Metadata reports for `topic`, `None` if it does not exist.
async fn partitions(c: &mut Client, topic: &str) -> Option<usize> {
    let request = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name(topic))),
    ]));
    let r = c.call(&request, 12).await;
    let t = &r.topics[0];
    (t.error_code == 0).then_some(t.partitions.len())
}

#[tokio::test]
async fn api_versions_advertises_the_admin_apis() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let r = c.call(&ApiVersionsRequest::default(), 3).await;
    let find = |key: ApiKey| {
        r.api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| (k.min_version, k.max_version))
    };
    assert_eq!(find(ApiKey::CreateTopics), Some((2, 7)));
    assert_eq!(find(ApiKey::DeleteTopics), Some((1, 6)));
    assert_eq!(find(ApiKey::CreatePartitions), Some((0, 3)));
    assert_eq!(find(ApiKey::DescribeConfigs), Some((1, 4)));
    assert_eq!(find(ApiKey::AlterConfigs), Some((0, 2)));
    assert_eq!(find(ApiKey::IncrementalAlterConfigs), Some((0, 1)));
    assert_eq!(find(ApiKey::DescribeCluster), Some((0, 2)));
}

#[tokio::test]
async fn create_topics_creates_with_the_asked_or_default_count_and_reports_configs() {
    let config = broker::BrokerConfig {
        num_partitions: 3,
        ..common::config()
    };
    let broker = TestBroker::with(config).await;
    let mut c = broker.client().await;
    let request = create(vec![
        with_configs(new_topic("given", 5, 1), &[("retention.ms", "1000")]),
        new_topic("defaulted", -1, -1),
    ]);
    let r = c.call(&request, 7).await;
    assert_eq!(create_codes(&r), [0, 0]);
    let given = &r.topics[0];
    assert_eq!((given.num_partitions, given.replication_factor), (5, 1));
    assert_eq!(given.error_message, None);
    assert!(!given.topic_id.is_nil(), "v7 reports the topic id");
    let configs = given.configs.as_ref().expect("v5+ reports the configs");
    let find = |name: &str| {
        configs
            .iter()
            .find(|c| c.name.as_str() == name)
            .map(|c| (c.value.as_ref().map(|v| v.to_string()), c.config_source))
    };
    assert_eq!(
        find("retention.ms"),
        Some((Some("1000".into()), 1)),
        "TOPIC_CONFIG"
    );
    assert_eq!(
        find("cleanup.policy"),
        Some((Some("delete".into()), 5)),
        "DEFAULT_CONFIG"
    );
    assert_eq!(r.topics[1].num_partitions, 3, "-1 is --num-partitions");
    assert_eq!(partitions(&mut c, "given").await, Some(5));
    assert_eq!(partitions(&mut c, "defaulted").await, Some(3));
    // Kafka's topic id is the one Metadata reports.
    let metadata = c
        .call(
            &MetadataRequest::default()
                .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
                )
                .with_name(Some(topic_name("given")))])),
            12,
        )
        .await;
    assert_eq!(metadata.topics[0].topic_id, given.topic_id);
}

#[tokio::test]
async fn create_topics_validate_only_checks_but_creates_nothing() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let request =
        create(vec![new_topic("dry", 4, 1), new_topic("t", 1, 1)]).with_validate_only(true);
    let r = c.call(&request, 5).await;
    assert_eq!(
        create_codes(&r),
        [0, 36],
        "still checked, existing topic refused"
    );
    assert_eq!(r.topics[0].num_partitions, 4);
    assert_eq!(partitions(&mut c, "dry").await, None, "nothing created");
}

#[tokio::test]
async fn create_topics_refuses_an_existing_topic_with_topic_already_exists() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    for version in [2, 4, 7] {
        let r = c.call(&create(vec![new_topic("t", 8, 1)]), version).await;
        assert_eq!(create_codes(&r), [36], "v{version}");
        assert!(r.topics[0]
            .error_message
            .as_ref()
            .is_some_and(|m| m.contains("already exists")));
    }
    assert_eq!(partitions(&mut c, "t").await, Some(2), "unchanged");
}

#[tokio::test]
async fn create_topics_refuses_invalid_names_with_invalid_topic_exception() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let long = "x".repeat(250);
    let names = ["", ".", "..", "has space", "sl/ash", long.as_str()];
    let request = create(names.iter().map(|n| new_topic(n, 1, 1)).collect());
    let r = c.call(&request, 7).await;
    assert_eq!(create_codes(&r), [17; 6]);
    // `.` and `_` collide with an existing name.
    c.call(&create(vec![new_topic("a.b", 1, 1)]), 7).await;
    let r = c.call(&create(vec![new_topic("a_b", 1, 1)]), 7).await;
    assert_eq!(create_codes(&r), [17]);
    let dry = create(vec![new_topic("a_b", 1, 1)]).with_validate_only(true);
    assert_eq!(
        create_codes(&c.call(&dry, 7).await),
        [17],
        "validate_only too"
    );
}

/// Kafka's internal topics are this broker's stores, not topics: CreateTopics refuses them
/// (INVALID_REQUEST, as Kafka refuses `__cluster_metadata`), Metadata does not auto-create
/// them, and Produce answers INVALID_TOPIC_EXCEPTION (Kafka's "Cannot append to internal
/// topic"), while an ordinary topic in the same requests is served.
#[tokio::test]
async fn internal_topics_cannot_be_created_auto_created_or_written() {
    let mut config = common::config();
    config.auto_create_topics = true;
    let broker = TestBroker::with(config).await;
    let mut c = broker.client().await;
    let internal = [
        "__consumer_offsets",
        "__transaction_state",
        "__share_group_state",
        "__cluster_metadata",
    ];
    let mut topics: Vec<_> = internal.iter().map(|n| new_topic(n, 1, 1)).collect();
    topics.push(new_topic("ordinary", 1, 1));
    let r = c.call(&create(topics), 7).await;
    assert_eq!(create_codes(&r), [42, 42, 42, 42, 0]);
    assert!(r.topics[0]
        .error_message
        .as_ref()
        .is_some_and(|m| m.contains("Creation of internal topic __consumer_offsets")));
    for name in internal {
        assert_eq!(
            partitions(&mut c, name).await,
            None,
            "{name}: not auto-created"
        );
        let (code, _) = produce(
            &mut c,
            name,
            0,
            batch(&[record(0, 1)], kafka_protocol::records::Compression::None),
            9,
        )
        .await;
        assert_eq!(code, 17, "{name}");
    }
    assert_eq!(partitions(&mut c, "ordinary").await, Some(1));
    assert_eq!(
        partitions(&mut c, "auto").await,
        Some(1),
        "auto-creation is on"
    );
}

#[tokio::test]
async fn create_topics_refuses_replication_factors_other_than_one() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let request = create(vec![
        new_topic("r3", 1, 3),
        new_topic("r0", 1, 0),
        new_topic("rm2", 1, -2),
        new_topic("r1", 1, 1),
        new_topic("rdefault", 1, -1),
    ]);
    let r = c.call(&request, 7).await;
    assert_eq!(create_codes(&r), [38, 38, 38, 0, 0]);
    assert_eq!(
        r.topics[0].num_partitions, -1,
        "a refused topic reports no count"
    );
    assert_eq!(partitions(&mut c, "r3").await, None);
}

#[tokio::test]
async fn create_topics_refuses_bad_partition_counts_with_invalid_partitions() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let request = create(vec![
        new_topic("p0", 0, 1),
        new_topic("pm2", -2, 1),
        new_topic("huge", i32::MAX, 1),
    ]);
    let r = c.call(&request, 7).await;
    assert_eq!(create_codes(&r), [37, 37, 37]);
    assert_eq!(partitions(&mut c, "p0").await, None);
}

/// Manual replica assignments are honoured when they name this broker alone (kafka-python's
/// suite assigns `[0]`); any other broker, or two replicas, is INVALID_REPLICA_ASSIGNMENT
/// (39); an assignment beside a count or factor is INVALID_REQUEST, as Kafka.
#[tokio::test]
async fn create_topics_takes_assignments_to_this_broker_and_refuses_duplicates() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let assign = |name: &str, partitions: &[(i32, Vec<i32>)]| {
        new_topic(name, -1, -1).with_assignments(
            partitions
                .iter()
                .map(|(p, ids)| {
                    create_topics_request::CreatableReplicaAssignment::default()
                        .with_partition_index(*p)
                        .with_broker_ids(ids.iter().map(|&b| BrokerId(b)).collect())
                })
                .collect(),
        )
    };
    let r = c
        .call(
            &create(vec![
                assign("assigned", &[(0, vec![0]), (1, vec![0])]),
                assign("elsewhere", &[(0, vec![1])]),
                assign("twice", &[(0, vec![0, 0])]),
                assign("gap", &[(0, vec![0]), (2, vec![0])]),
                new_topic("both", 2, -1).with_assignments(vec![
                    create_topics_request::CreatableReplicaAssignment::default()
                        .with_partition_index(0)
                        .with_broker_ids(vec![BrokerId(0)]),
                ]),
            ]),
            7,
        )
        .await;
    assert_eq!(create_codes(&r), [0, 39, 39, 39, 42]);
    assert_eq!(partitions(&mut c, "assigned").await, Some(2));
    assert_eq!(partitions(&mut c, "elsewhere").await, None);
    let r = c
        .call(
            &create(vec![new_topic("twice", 1, 1), new_topic("twice", 2, 1)]),
            7,
        )
        .await;
    assert_eq!(create_codes(&r), [42, 42]);
    assert_eq!(partitions(&mut c, "twice").await, None);
}

#[tokio::test]
async fn create_topics_refuses_unknown_configs_and_bad_values_with_invalid_config() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let request = create(vec![
        with_configs(new_topic("unknown", 1, 1), &[("retention.forever", "yes")]),
        with_configs(new_topic("bad", 1, 1), &[("retention.ms", "a week")]),
        with_configs(new_topic("policy", 1, 1), &[("cleanup.policy", "shred")]),
    ]);
    let r = c.call(&request, 7).await;
    assert_eq!(create_codes(&r), [40, 40, 40]);
    assert!(r.topics[0]
        .error_message
        .as_ref()
        .is_some_and(|m| m.contains("retention.forever")));
    assert_eq!(partitions(&mut c, "unknown").await, None, "nothing created");
}

fn delete_by_name(names: &[&str]) -> DeleteTopicsRequest {
    DeleteTopicsRequest::default()
        .with_topic_names(names.iter().map(|n| topic_name(n)).collect())
        .with_timeout_ms(5000)
}

#[tokio::test]
async fn delete_topics_by_name_removes_the_topic_and_unknown_ones_get_3() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    for version in [1, 5] {
        c.call(&create(vec![new_topic("gone", 2, 1)]), 7).await;
        let r = c.call(&delete_by_name(&["gone", "never"]), version).await;
        let codes: Vec<i16> = r.responses.iter().map(|t| t.error_code).collect();
        assert_eq!(codes, [0, 3], "v{version}");
        assert_eq!(partitions(&mut c, "gone").await, None);
    }
    // The name can be used again, with its configs back at their defaults.
    let r = c
        .call(
            &create(vec![with_configs(
                new_topic("cfg", 1, 1),
                &[("retention.ms", "5")],
            )]),
            7,
        )
        .await;
    assert_eq!(create_codes(&r), [0]);
    c.call(&delete_by_name(&["cfg"]), 5).await;
    let r = c.call(&create(vec![new_topic("cfg", 1, 1)]), 7).await;
    let configs = r.topics[0].configs.as_ref().unwrap();
    let retention = configs
        .iter()
        .find(|c| c.name.as_str() == "retention.ms")
        .unwrap();
    assert_eq!(retention.value.as_deref(), Some("604800000"));
    assert_eq!(retention.config_source, 5);
}

#[tokio::test]
async fn delete_topics_v6_by_id_and_unknown_ids_get_unknown_topic_id() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let r = c.call(&create(vec![new_topic("by-id", 1, 1)]), 7).await;
    let id = r.topics[0].topic_id;
    let unknown = uuid::Uuid::from_u128(12345);
    let request = DeleteTopicsRequest::default().with_topics(vec![
        delete_topics_request::DeleteTopicState::default().with_topic_id(id),
        delete_topics_request::DeleteTopicState::default().with_topic_id(unknown),
        delete_topics_request::DeleteTopicState::default().with_name(Some(topic_name("nope"))),
    ]);
    let r = c.call(&request, 6).await;
    let answers: Vec<(Option<String>, i16)> = r
        .responses
        .iter()
        .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.error_code))
        .collect();
    assert_eq!(
        answers,
        [
            (Some("by-id".into()), 0),
            (None, 100),
            (Some("nope".into()), 3)
        ]
    );
    assert_eq!(r.responses[0].topic_id, id);
    assert_eq!(partitions(&mut c, "by-id").await, None);
}

#[tokio::test]
async fn deleting_a_topic_deletes_the_groups_committed_offsets_of_it() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.call(&create(vec![new_topic("other", 1, 1)]), 7).await;
    // A group with no members (a simple group: generation -1) commits on both topics.
    let r = c
        .call(
            &commit("g", "", -1, &[("t", 0, 5), ("t", 1, 7), ("other", 0, 9)]),
            8,
        )
        .await;
    assert_eq!(commit_codes(&r), [0, 0, 0]);
    let r = c.call(&delete_by_name(&["t"]), 5).await;
    assert_eq!(r.responses[0].error_code, 0);
    let r = c.call(&offset_fetch("g", &[0, 1]), 3).await;
    assert_eq!(
        fetched(&r),
        [-1, -1],
        "the deleted topic's offsets are gone"
    );
    let other = OffsetFetchRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_topics(Some(vec![
            offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(topic_name("other"))
                .with_partition_indexes(vec![0]),
        ]));
    let r = c.call(&other, 3).await;
    assert_eq!(fetched(&r), [9], "other topics' offsets stay");
}

#[tokio::test]
async fn deleting_a_topic_deletes_its_offsets_even_while_a_member_subscribes_to_it() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    // A Stable classic group whose one member subscribes to `t` (OffsetDelete would refuse
    // GROUP_SUBSCRIBED_TO_TOPIC; Kafka deletes a deleted topic's offsets regardless).
    let joined = crate::groups::join(&mut c, "g").await;
    let mine = crate::groups::assignment("t", &[0, 1]);
    let request = crate::groups::sync_request("g", &joined, &[(joined.member_id.as_str(), mine)]);
    assert_eq!(c.call(&request, 3).await.error_code, 0);
    let r = c
        .call(&commit("g", &joined.member_id, 1, &[("t", 0, 5)]), 3)
        .await;
    assert_eq!(commit_codes(&r), [0]);
    let r = c.call(&delete_by_name(&["t"]), 5).await;
    assert_eq!(r.responses[0].error_code, 0);
    let r = c.call(&offset_fetch("g", &[0]), 3).await;
    assert_eq!(fetched(&r), [-1]);
}

#[tokio::test]
async fn a_waiting_fetch_on_a_deleted_topic_is_answered_unknown_topic() {
    let broker = TestBroker::start().await;
    let mut waiter = broker.client().await;
    let mut admin = broker.client().await;
    let waiting = fetch_request("t", 0, 0).with_max_wait_ms(600_000);
    let correlation = waiter.send(&waiting, 11).await;
    let r = admin.call(&delete_by_name(&["t"]), 5).await;
    assert_eq!(r.responses[0].error_code, 0);
    let r = waiter.receive::<FetchRequest>(correlation, 11).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 3);
}

fn grow_to(topic: &str, count: i32) -> create_partitions_request::CreatePartitionsTopic {
    create_partitions_request::CreatePartitionsTopic::default()
        .with_name(topic_name(topic))
        .with_count(count)
        .with_assignments(None)
}

#[tokio::test]
async fn create_partitions_grows_only() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let codes = |r: &CreatePartitionsResponse| -> Vec<i16> {
        r.results.iter().map(|t| t.error_code).collect()
    };
    let dry = CreatePartitionsRequest::default()
        .with_topics(vec![grow_to("t", 6)])
        .with_validate_only(true);
    assert_eq!(codes(&c.call(&dry, 3).await), [0]);
    assert_eq!(
        partitions(&mut c, "t").await,
        Some(2),
        "validate-only changes nothing"
    );
    let grow = CreatePartitionsRequest::default().with_topics(vec![grow_to("t", 4)]);
    assert_eq!(codes(&c.call(&grow, 3).await), [0]);
    assert_eq!(partitions(&mut c, "t").await, Some(4));
    for (count, version) in [(4, 0), (3, 2), (0, 3)] {
        let r = c
            .call(
                &CreatePartitionsRequest::default().with_topics(vec![grow_to("t", count)]),
                version,
            )
            .await;
        assert_eq!(codes(&r), [37], "{count}");
    }
    let missing = CreatePartitionsRequest::default().with_topics(vec![grow_to("nope", 2)]);
    assert_eq!(codes(&c.call(&missing, 3).await), [3]);
    let assigned = |count: i32, ids: &[&[i32]]| {
        CreatePartitionsRequest::default().with_topics(vec![grow_to("t", count).with_assignments(
            Some(
                ids.iter()
                    .map(|ids| {
                        create_partitions_request::CreatePartitionsAssignment::default()
                            .with_broker_ids(ids.iter().map(|&b| BrokerId(b)).collect())
                    })
                    .collect(),
            ),
        )])
    };
    // One assignment per new partition, each this broker: INVALID_REPLICA_ASSIGNMENT else.
    assert_eq!(codes(&c.call(&assigned(6, &[&[0]]), 3).await), [39]);
    assert_eq!(codes(&c.call(&assigned(5, &[&[1]]), 3).await), [39]);
    assert_eq!(partitions(&mut c, "t").await, Some(4));
    assert_eq!(codes(&c.call(&assigned(5, &[&[0]]), 3).await), [0]);
    assert_eq!(partitions(&mut c, "t").await, Some(5));
    // The new partitions take records.
    let (code, base) = produce(
        &mut c,
        "t",
        3,
        batch(&[record(0, 1)], kafka_protocol::records::Compression::None),
        7,
    )
    .await;
    assert_eq!((code, base), (0, 0));
}

fn describe(resources: &[(i8, &str, Option<&[&str]>)]) -> DescribeConfigsRequest {
    DescribeConfigsRequest::default()
        .with_resources(
            resources
                .iter()
                .map(|(kind, name, keys)| {
                    describe_configs_request::DescribeConfigsResource::default()
                        .with_resource_type(*kind)
                        .with_resource_name(s(name))
                        .with_configuration_keys(keys.map(|k| k.iter().map(|k| s(k)).collect()))
                })
                .collect(),
        )
        .with_include_synonyms(true)
        .with_include_documentation(true)
}

fn config_of<'a>(
    result: &'a describe_configs_response::DescribeConfigsResult,
    name: &str,
) -> &'a describe_configs_response::DescribeConfigsResourceResult {
    result
        .configs
        .iter()
        .find(|c| c.name.as_str() == name)
        .unwrap_or_else(|| panic!("{name} is described"))
}

#[tokio::test]
async fn describe_configs_reports_kafka_defaults_and_topic_overrides() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.call(
        &create(vec![with_configs(
            new_topic("custom", 1, 1),
            &[("retention.ms", "1000")],
        )]),
        7,
    )
    .await;
    let r = c
        .call(&describe(&[(2, "t", None), (2, "custom", None)]), 4)
        .await;
    assert_eq!(
        r.results.iter().map(|r| r.error_code).collect::<Vec<_>>(),
        [0, 0]
    );
    let defaults = &r.results[0];
    for (name, value) in [
        ("retention.ms", "604800000"),
        ("cleanup.policy", "delete"),
        ("max.message.bytes", "1048588"),
        ("segment.bytes", "1073741824"),
        ("min.insync.replicas", "1"),
        ("retention.bytes", "-1"),
        ("compression.type", "producer"),
    ] {
        let config = config_of(defaults, name);
        assert_eq!(config.value.as_deref(), Some(value), "{name}");
        if name == "min.insync.replicas" {
            // Kafka 4.1+'s cluster-level record (KIP-966), whose synonyms name it first.
            assert_eq!(
                config.config_source, 3,
                "{name} is DYNAMIC_DEFAULT_BROKER_CONFIG"
            );
            let synonyms: Vec<_> = config.synonyms.iter().map(|s| s.source).collect();
            assert_eq!(synonyms, [3, 5], "{name}");
        } else {
            assert_eq!(config.config_source, 5, "{name} is DEFAULT_CONFIG");
        }
        assert!(!config.read_only);
    }
    let retention = config_of(defaults, "retention.ms");
    assert_eq!(retention.config_type, 5, "LONG");
    assert!(retention.documentation.is_some(), "include_documentation");
    assert_eq!(
        retention
            .synonyms
            .iter()
            .map(|s| (s.name.to_string(), s.source))
            .collect::<Vec<_>>(),
        [("log.retention.ms".to_string(), 5)]
    );
    let custom = config_of(&r.results[1], "retention.ms");
    assert_eq!(
        (custom.value.as_deref(), custom.config_source),
        (Some("1000"), 1)
    );
    assert_eq!(
        custom.synonyms.len(),
        2,
        "the topic's value, then the default"
    );
    // Asked keys only; no synonyms or documentation unless asked (v1 has no documentation).
    let only = describe(&[(2, "t", Some(&["segment.bytes", "no.such.key"]))])
        .with_include_synonyms(false)
        .with_include_documentation(false);
    let r = c.call(&only, 1).await;
    let names: Vec<&str> = r.results[0]
        .configs
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["segment.bytes"]);
    assert!(r.results[0].configs[0].synonyms.is_empty());
}

#[tokio::test]
async fn describe_configs_of_the_broker_and_its_refusals() {
    let config = broker::BrokerConfig {
        num_partitions: 4,
        ..common::config()
    };
    let broker = TestBroker::with(config).await;
    let mut c = broker.client().await;
    let r = c
        .call(
            &describe(&[
                (4, "0", None),
                (4, "7", None),
                (2, "nope", None),
                (8, "0", None),
                (4, "", None),
            ]),
            4,
        )
        .await;
    let codes: Vec<i16> = r.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, [0, 42, 3, 42, 0]);
    let partitions = config_of(&r.results[0], "num.partitions");
    assert_eq!(partitions.value.as_deref(), Some("4"));
    assert_eq!(partitions.config_source, 4, "STATIC_BROKER_CONFIG");
    let max = config_of(&r.results[0], "message.max.bytes");
    assert_eq!(
        (max.value.as_deref(), max.config_source),
        (Some("1048588"), 5)
    );
}

pub(crate) fn alter(
    kind: i8,
    name: &str,
    ops: &[(&str, i8, Option<&str>)],
) -> incremental_alter_configs_request::AlterConfigsResource {
    incremental_alter_configs_request::AlterConfigsResource::default()
        .with_resource_type(kind)
        .with_resource_name(s(name))
        .with_configs(
            ops.iter()
                .map(|(k, op, v)| {
                    incremental_alter_configs_request::AlterableConfig::default()
                        .with_name(s(k))
                        .with_config_operation(*op)
                        .with_value(v.map(s))
                })
                .collect(),
        )
}

async fn value_of(c: &mut Client, topic: &str, name: &str) -> (Option<String>, i8) {
    let r = c.call(&describe(&[(2, topic, Some(&[name]))]), 4).await;
    let config = config_of(&r.results[0], name);
    (
        config.value.as_ref().map(|v| v.to_string()),
        config.config_source,
    )
}

#[tokio::test]
async fn incremental_alter_configs_sets_and_deletes_topic_configs() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let codes = |r: &IncrementalAlterConfigsResponse| -> Vec<i16> {
        r.responses.iter().map(|r| r.error_code).collect()
    };
    let set = IncrementalAlterConfigsRequest::default().with_resources(vec![alter(
        2,
        "t",
        &[
            ("retention.ms", 0, Some("60000")),
            ("cleanup.policy", 0, Some("compact,delete")),
        ],
    )]);
    assert_eq!(codes(&c.call(&set, 1).await), [0]);
    assert_eq!(
        value_of(&mut c, "t", "retention.ms").await,
        (Some("60000".into()), 1)
    );
    assert_eq!(
        value_of(&mut c, "t", "cleanup.policy").await,
        (Some("compact,delete".into()), 1)
    );
    let dry = IncrementalAlterConfigsRequest::default()
        .with_resources(vec![alter(2, "t", &[("retention.ms", 0, Some("1"))])])
        .with_validate_only(true);
    assert_eq!(codes(&c.call(&dry, 0).await), [0]);
    assert_eq!(
        value_of(&mut c, "t", "retention.ms").await,
        (Some("60000".into()), 1)
    );
    let delete = IncrementalAlterConfigsRequest::default().with_resources(vec![alter(
        2,
        "t",
        &[("retention.ms", 1, None)],
    )]);
    assert_eq!(codes(&c.call(&delete, 1).await), [0]);
    assert_eq!(
        value_of(&mut c, "t", "retention.ms").await,
        (Some("604800000".into()), 5)
    );
}

#[tokio::test]
async fn incremental_alter_configs_appends_to_and_subtracts_from_lists() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let run = |op: i8, value: &str| {
        IncrementalAlterConfigsRequest::default().with_resources(vec![alter(
            2,
            "t",
            &[("cleanup.policy", op, Some(value))],
        )])
    };
    // From the default ("delete"): appended once, in order, however often it is asked.
    for _ in 0..2 {
        let r = c.call(&run(2, "compact"), 1).await;
        assert_eq!(r.responses[0].error_code, 0);
        assert_eq!(
            value_of(&mut c, "t", "cleanup.policy").await,
            (Some("delete,compact".into()), 1)
        );
    }
    let r = c.call(&run(3, "delete"), 0).await;
    assert_eq!(r.responses[0].error_code, 0);
    assert_eq!(
        value_of(&mut c, "t", "cleanup.policy").await,
        (Some("compact".into()), 1)
    );
    // Down to the empty list, which Kafka accepts (no cleanup at all).
    let r = c.call(&run(3, "compact"), 0).await;
    assert_eq!(r.responses[0].error_code, 0);
    assert_eq!(
        value_of(&mut c, "t", "cleanup.policy").await,
        (Some("".into()), 1)
    );
}

#[tokio::test]
async fn incremental_alter_configs_refusals_change_nothing() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        // One bad config refuses the whole resource.
        alter(
            2,
            "t",
            &[
                ("retention.ms", 0, Some("5")),
                ("no.such.config", 0, Some("1")),
            ],
        ),
        alter(2, "t", &[("retention.ms", 0, Some("soon"))]),
        // APPEND and SUBTRACT: lists only; the result is validated.
        alter(2, "t", &[("retention.ms", 2, Some("5"))]),
        alter(2, "t", &[("cleanup.policy", 2, Some("sometimes"))]),
        alter(2, "t", &[("retention.ms", 9, Some("5"))]),
        alter(
            2,
            "t",
            &[("retention.ms", 0, Some("5")), ("retention.ms", 1, None)],
        ),
        alter(2, "nope", &[("retention.ms", 0, Some("5"))]),
        alter(4, "0", &[("num.partitions", 0, Some("5"))]),
    ]);
    let r = c.call(&request, 1).await;
    let codes: Vec<i16> = r.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, [40, 40, 40, 40, 42, 42, 3, 42]);
    assert_eq!(
        value_of(&mut c, "t", "retention.ms").await,
        (Some("604800000".into()), 5)
    );
}

#[tokio::test]
async fn alter_configs_replaces_the_whole_set() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let resource = |configs: &[(&str, &str)]| {
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("t"))
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        alter_configs_request::AlterableConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            )
    };
    let first = AlterConfigsRequest::default().with_resources(vec![resource(&[
        ("retention.ms", "1"),
        ("segment.bytes", "1024"),
    ])]);
    assert_eq!(c.call(&first, 2).await.responses[0].error_code, 0);
    let second =
        AlterConfigsRequest::default().with_resources(vec![resource(&[("segment.bytes", "2048")])]);
    assert_eq!(c.call(&second, 0).await.responses[0].error_code, 0);
    assert_eq!(
        value_of(&mut c, "t", "segment.bytes").await,
        (Some("2048".into()), 1)
    );
    assert_eq!(
        value_of(&mut c, "t", "retention.ms").await,
        (Some("604800000".into()), 5),
        "what is not named goes back to its default"
    );
    let bad = AlterConfigsRequest::default().with_resources(vec![resource(&[("bogus", "1")])]);
    assert_eq!(c.call(&bad, 1).await.responses[0].error_code, 40);
    assert_eq!(
        value_of(&mut c, "t", "segment.bytes").await,
        (Some("2048".into()), 1)
    );
}

#[tokio::test]
async fn describe_cluster_names_this_broker_as_the_controller() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    for version in [0, 1, 2] {
        let request = DescribeClusterRequest::default()
            .with_include_cluster_authorized_operations(false)
            .with_endpoint_type(1)
            .with_include_fenced_brokers(version >= 2);
        let r = c.call(&request, version).await;
        assert_eq!(r.error_code, 0);
        assert_eq!(r.controller_id, BrokerId(0));
        assert_eq!(r.cluster_id.as_str(), "consumer-groups-broker");
        assert_eq!(r.brokers.len(), 1);
        assert_eq!(r.brokers[0].broker_id, BrokerId(0));
        assert_eq!(r.brokers[0].port, i32::from(broker.addr.port()));
        assert!(!r.brokers[0].is_fenced);
        assert_eq!(r.cluster_authorized_operations, i32::MIN, "not asked");
    }
    let asked = DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
    let r = c.call(&asked, 1).await;
    // Every cluster operation: CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
    // DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
    let ops: Vec<u32> = (0..32)
        .filter(|bit| r.cluster_authorized_operations & (1 << bit) != 0)
        .collect();
    assert_eq!(ops, [5, 7, 8, 9, 10, 11, 12]);
}

#[tokio::test]
async fn node_id_is_the_id_every_api_names() {
    let broker = TestBroker::with(broker::BrokerConfig {
        node_id: 7,
        ..config()
    })
    .await;
    let mut c = broker.client().await;
    let r = c.call(&DescribeClusterRequest::default(), 2).await;
    assert_eq!(
        (r.controller_id, r.brokers[0].broker_id),
        (BrokerId(7), BrokerId(7))
    );
    let m = c
        .call(
            &MetadataRequest::default()
                .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
                )
                .with_name(Some(TopicName(StrBytes::from_static_str("t"))))])),
            13,
        )
        .await;
    assert_eq!(m.error_code, 0);
    assert_eq!(
        (m.brokers[0].node_id, m.controller_id),
        (BrokerId(7), BrokerId(7))
    );
    assert!(m.topics[0]
        .partitions
        .iter()
        .all(|p| p.leader_id == BrokerId(7)));
    let f = c
        .call(
            &FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g")),
            3,
        )
        .await;
    assert_eq!((f.error_code, f.node_id), (0, BrokerId(7)));
    broker.stop().await.expect("clean stop");
}

/// (value, source) of group config `name` of group `group`.
async fn group_value(c: &mut Client, group: &str, name: &str) -> (String, i8) {
    let r = c.call(&describe(&[(32, group, Some(&[name]))]), 4).await;
    assert_eq!(
        r.results[0].error_code, 0,
        "{:?}",
        r.results[0].error_message
    );
    let config = config_of(&r.results[0], name);
    (
        config
            .value
            .as_ref()
            .map(|v| v.to_string())
            .unwrap_or_default(),
        config.config_source,
    )
}

#[tokio::test]
async fn group_configs_are_described_altered_in_force_and_kept_across_a_restart() {
    let data = tempfile::tempdir().expect("tempdir");
    let on_disk = || broker::BrokerConfig {
        data_dir: Some(data.path().to_path_buf()),
        ..config()
    };
    let broker = TestBroker::with(on_disk()).await;
    let mut c = broker.client().await;
    // Every group config, at its default (DEFAULT_CONFIG, 5), for a group that does not
    // exist yet (Kafka checks no existence).
    let r = c.call(&describe(&[(32, "g", None)]), 4).await;
    let listed: Vec<(&str, String, i8, i8)> = r.results[0]
        .configs
        .iter()
        .map(|e| {
            let value = e.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
            (e.name.as_str(), value, e.config_source, e.config_type)
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("consumer.heartbeat.interval.ms", "5000".into(), 5, 3),
            ("consumer.session.timeout.ms", "45000".into(), 5, 3),
            ("share.auto.offset.reset", "latest".into(), 5, 2),
            ("share.delivery.count.limit", "5".into(), 5, 3),
            ("share.heartbeat.interval.ms", "5000".into(), 5, 3),
            ("share.isolation.level", "read_uncommitted".into(), 5, 2),
            ("share.partition.max.record.locks", "2000".into(), 5, 3),
            ("share.record.lock.duration.ms", "30000".into(), 5, 3),
            ("share.session.timeout.ms", "45000".into(), 5, 3),
        ]
    );
    let refused = |r: &IncrementalAlterConfigsResponse| {
        let x = &r.responses[0];
        (
            x.error_code,
            x.error_message.as_deref().unwrap_or("").to_string(),
        )
    };
    let set = |ops: &[(&str, i8, Option<&str>)]| {
        IncrementalAlterConfigsRequest::default().with_resources(vec![alter(32, "g", ops)])
    };
    // Kafka's refusals: bounds, an unknown name, not a number, APPEND, an empty name.
    for (ops, want) in [
        (
            vec![("consumer.session.timeout.ms", 0, Some("60001"))],
            (40, "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
        ),
        (
            vec![("consumer.heartbeat.interval.ms", 0, Some("abc"))],
            (40, "Invalid value abc for configuration consumer.heartbeat.interval.ms: Not a number of type INT"),
        ),
        (
            vec![("no.such.config", 0, Some("1"))],
            (40, "Unknown group config name: no.such.config"),
        ),
        (
            vec![("share.auto.offset.reset", 0, Some("hello"))],
            (40, "Invalid value hello for configuration share.auto.offset.reset: the value must be either 'earliest', 'latest', or of the format 'by_duration:<PnDTnHnMn.nS.>'."),
        ),
        (
            vec![("share.isolation.level", 0, Some("serializable"))],
            (40, "Invalid value serializable for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"),
        ),
        (
            vec![("share.delivery.count.limit", 0, Some("11"))],
            (40, "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit"),
        ),
        (
            vec![("share.delivery.count.limit", 0, Some("1"))],
            (40, "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"),
        ),
        (
            vec![("share.partition.max.record.locks", 0, Some("10001"))],
            (40, "share.partition.max.record.locks must be less than or equal to group.share.max.partition.max.record.locks"),
        ),
        (
            vec![("consumer.session.timeout.ms", 2, Some("50000"))],
            (40, "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST."),
        ),
    ] {
        let r = c.call(&set(&ops), 1).await;
        assert_eq!(refused(&r), (want.0, want.1.to_string()), "{ops:?}");
    }
    let empty = IncrementalAlterConfigsRequest::default().with_resources(vec![alter(
        32,
        "",
        &[("consumer.session.timeout.ms", 0, Some("50000"))],
    )]);
    assert_eq!(c.call(&empty, 1).await.responses[0].error_code, 42);
    // validate_only changes nothing; a SET is in force, GROUP_CONFIG (8).
    let dry = set(&[("consumer.heartbeat.interval.ms", 0, Some("6000"))]).with_validate_only(true);
    assert_eq!(refused(&c.call(&dry, 1).await).0, 0);
    assert_eq!(
        group_value(&mut c, "g", "consumer.heartbeat.interval.ms").await,
        ("5000".into(), 5)
    );
    let r = c
        .call(
            &set(&[("consumer.heartbeat.interval.ms", 0, Some("6000"))]),
            1,
        )
        .await;
    assert_eq!(refused(&r).0, 0);
    assert_eq!(
        group_value(&mut c, "g", "consumer.heartbeat.interval.ms").await,
        ("6000".into(), 8)
    );
    // A consumer-protocol member of the group hears it in its heartbeat response.
    let join = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s("m1"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
        .with_topic_partitions(Some(Vec::new()));
    let r = c.call(&join, 1).await;
    assert_eq!((r.error_code, r.heartbeat_interval_ms), (0, 6000));
    // The text configs, set in one request with a numeric one.
    let r = c
        .call(
            &set(&[
                ("share.auto.offset.reset", 0, Some("by_duration:PT1H")),
                ("share.isolation.level", 0, Some("read_committed")),
                ("share.delivery.count.limit", 0, Some("3")),
            ]),
            1,
        )
        .await;
    assert_eq!(refused(&r).0, 0);
    broker.stop().await.expect("clean stop");

    // Kept in the data directory: in force again after a restart.
    let broker = TestBroker::with(on_disk()).await;
    let mut c = broker.client().await;
    assert_eq!(
        group_value(&mut c, "g", "consumer.heartbeat.interval.ms").await,
        ("6000".into(), 8)
    );
    assert_eq!(
        group_value(&mut c, "g", "share.auto.offset.reset").await,
        ("by_duration:PT1H".into(), 8)
    );
    assert_eq!(
        group_value(&mut c, "g", "share.isolation.level").await,
        ("read_committed".into(), 8)
    );
    assert_eq!(
        group_value(&mut c, "g", "share.delivery.count.limit").await,
        ("3".into(), 8)
    );
    // DELETE goes back to the default.
    let r = c
        .call(&set(&[("consumer.heartbeat.interval.ms", 1, None)]), 1)
        .await;
    assert_eq!(refused(&r).0, 0);
    assert_eq!(
        group_value(&mut c, "g", "consumer.heartbeat.interval.ms").await,
        ("5000".into(), 5)
    );
    broker.stop().await.expect("clean stop");
}
