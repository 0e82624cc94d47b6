//! The single-node answers of Kafka's cluster admin APIs: ElectLeaders, DescribeLogDirs,
//! AlterReplicaLogDirs, AlterPartitionReassignments, ListPartitionReassignments,
//! DescribeQuorum, DescribeTopicPartitions and ListConfigResources.

use crate::common;

use broker::BrokerConfig;
use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

#[tokio::test]
async fn elect_leaders_is_never_needed_and_names_unknown_partitions() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    for version in 0..=2 {
        let request = ElectLeadersRequest::default()
            .with_election_type(0)
            .with_timeout_ms(1000)
            .with_topic_partitions(Some(vec![
                elect_leaders_request::TopicPartitions::default()
                    .with_topic(topic_name("t"))
                    .with_partitions(vec![0, 1, 2]),
                elect_leaders_request::TopicPartitions::default()
                    .with_topic(topic_name("missing"))
                    .with_partitions(vec![0]),
            ]));
        let r = c.call(&request, version).await;
        let codes: Vec<Vec<(i32, i16)>> = r
            .replica_election_results
            .iter()
            .map(|t| {
                t.partition_result
                    .iter()
                    .map(|p| (p.partition_id, p.error_code))
                    .collect()
            })
            .collect();
        assert_eq!(
            codes,
            vec![vec![(0, 84), (1, 84), (2, 3)], vec![(0, 3)]],
            "v{version}: ELECTION_NOT_NEEDED, UNKNOWN_TOPIC_OR_PARTITION"
        );
        // All partitions (null): only partitions that had an election are listed.
        let all = c
            .call(&request.clone().with_topic_partitions(None), version)
            .await;
        assert!(all.replica_election_results.is_empty());
    }
}

#[tokio::test]
async fn log_dirs_report_partition_sizes_and_moves_only_to_the_one_directory() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    produce(&mut c, "t", 1, batch(&[record(0, 1)], Compression::None), 7).await;
    let mut dir = String::new();
    for version in 1..=4 {
        let r = c
            .call(
                &DescribeLogDirsRequest::default().with_topics(None),
                version,
            )
            .await;
        assert_eq!(r.results.len(), 1);
        let result = &r.results[0];
        assert_eq!(result.error_code, 0);
        dir = result.log_dir.to_string();
        assert_eq!(dir, "(memory)", "a broker without a data directory");
        let sizes: Vec<(String, i32, bool)> = result
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    (
                        t.name.0.to_string(),
                        p.partition_index,
                        p.partition_size > 0,
                    )
                })
            })
            .collect();
        assert_eq!(
            sizes,
            vec![("t".into(), 0, false), ("t".into(), 1, true)],
            "v{version}: only partition 1 holds a record"
        );
        // Named partitions: those that exist.
        let named = DescribeLogDirsRequest::default().with_topics(Some(vec![
            describe_log_dirs_request::DescribableLogDirTopic::default()
                .with_topic(topic_name("t"))
                .with_partitions(vec![1, 7]),
        ]));
        let r = c.call(&named, version).await;
        let partitions: Vec<i32> = r.results[0].topics[0]
            .partitions
            .iter()
            .map(|p| p.partition_index)
            .collect();
        assert_eq!(partitions, vec![1]);
    }
    let alter = |path: &str, partition: i32| {
        AlterReplicaLogDirsRequest::default().with_dirs(vec![
            alter_replica_log_dirs_request::AlterReplicaLogDir::default()
                .with_path(s(path))
                .with_topics(vec![
                    alter_replica_log_dirs_request::AlterReplicaLogDirTopic::default()
                        .with_name(topic_name("t"))
                        .with_partitions(vec![partition]),
                ]),
        ])
    };
    for version in 1..=2 {
        let code = |r: &AlterReplicaLogDirsResponse| r.results[0].partitions[0].error_code;
        assert_eq!(code(&c.call(&alter(&dir, 0), version).await), 0, "no move");
        assert_eq!(
            code(&c.call(&alter("/elsewhere", 0), version).await),
            57,
            "LOG_DIR_NOT_FOUND"
        );
        assert_eq!(code(&c.call(&alter(&dir, 9), version).await), 3);
    }
}

#[tokio::test]
async fn log_dirs_name_the_records_directory_of_a_data_directory() {
    let data = tempfile::tempdir().unwrap();
    let broker = TestBroker::with(BrokerConfig {
        data_dir: Some(data.path().to_path_buf()),
        ..config()
    })
    .await;
    let mut c = broker.client().await;
    let r = c
        .call(&DescribeLogDirsRequest::default().with_topics(None), 4)
        .await;
    let expected = data.path().join("records");
    assert_eq!(r.results[0].log_dir.as_str(), expected.to_str().unwrap());
    assert_eq!(r.results[0].topics[0].partitions.len(), 2);
    drop(c);
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn reassignments_are_to_the_one_broker_and_none_is_ever_in_progress() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let partition = |index: i32, replicas: Option<Vec<i32>>| {
        alter_partition_reassignments_request::ReassignablePartition::default()
            .with_partition_index(index)
            .with_replicas(replicas.map(|r| r.into_iter().map(BrokerId).collect()))
    };
    let request = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(1000)
        .with_topics(vec![
            alter_partition_reassignments_request::ReassignableTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![
                    partition(0, Some(vec![0])),
                    partition(1, None),
                    partition(0, Some(vec![0, 1])),
                    partition(1, Some(vec![])),
                    partition(5, Some(vec![0])),
                ]),
        ]);
    for version in 0..=1 {
        let r = c.call(&request, version).await;
        assert_eq!(r.error_code, 0);
        let codes: Vec<i16> = r.responses[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect();
        // NONE, NO_REASSIGNMENT_IN_PROGRESS, INVALID_REPLICA_ASSIGNMENT (twice),
        // UNKNOWN_TOPIC_OR_PARTITION.
        assert_eq!(codes, vec![0, 85, 39, 39, 3], "v{version}");
    }
    let list = ListPartitionReassignmentsRequest::default().with_timeout_ms(1000);
    let r = c.call(&list, 0).await;
    assert_eq!((r.error_code, r.topics.len()), (0, 0));
    let named = list.with_topics(Some(vec![
        list_partition_reassignments_request::ListPartitionReassignmentsTopics::default()
            .with_name(topic_name("t"))
            .with_partition_indexes(vec![0, 1]),
    ]));
    let r = c.call(&named, 0).await;
    assert_eq!((r.error_code, r.topics.len()), (0, 0));
}

#[tokio::test]
async fn the_quorum_is_this_node_alone() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let request = |topic: &str, partition: i32| {
        DescribeQuorumRequest::default().with_topics(vec![
            describe_quorum_request::TopicData::default()
                .with_topic_name(topic_name(topic))
                .with_partitions(vec![describe_quorum_request::PartitionData::default()
                    .with_partition_index(partition)]),
        ])
    };
    for version in 0..=2 {
        let r = c.call(&request("__cluster_metadata", 0), version).await;
        assert_eq!(r.error_code, 0);
        let p = &r.topics[0].partitions[0];
        assert_eq!(p.error_code, 0);
        assert_eq!((p.leader_id.0, p.leader_epoch), (0, 1));
        let voters: Vec<i32> = p.current_voters.iter().map(|v| v.replica_id.0).collect();
        assert_eq!(voters, vec![0]);
        assert!(p.observers.is_empty());
        if version >= 2 {
            assert_eq!(r.nodes.len(), 1);
            assert_eq!(r.nodes[0].listeners[0].port, broker.addr.port());
        }
        let other = c.call(&request("t", 0), version).await;
        assert_eq!(other.topics[0].partitions[0].error_code, 3);
    }
}

async fn describe_partitions(
    c: &mut Client,
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> DescribeTopicPartitionsResponse {
    let request = DescribeTopicPartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    describe_topic_partitions_request::TopicRequest::default()
                        .with_name(topic_name(t))
                })
                .collect(),
        )
        .with_response_partition_limit(limit)
        .with_cursor(cursor.map(|(t, p)| {
            describe_topic_partitions_request::Cursor::default()
                .with_topic_name(topic_name(t))
                .with_partition_index(p)
        }));
    c.call(&request, 0).await
}

/// (topic, its error, its partitions) of an answer, and its cursor.
type Page = (Vec<(String, i16, Vec<i32>)>, Option<(String, i32)>);

fn page(r: &DescribeTopicPartitionsResponse) -> Page {
    let topics = r
        .topics
        .iter()
        .map(|t| {
            (
                t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                t.error_code,
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    let cursor = r
        .next_cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index));
    (topics, cursor)
}

#[tokio::test]
async fn describe_topic_partitions_pages_with_kafkas_cursor() {
    let broker = TestBroker::with(BrokerConfig {
        topics: vec!["b:3".parse().unwrap(), "a:2".parse().unwrap()],
        ..config()
    })
    .await;
    let mut c = broker.client().await;
    let r = describe_partitions(&mut c, &["b", "a", "nope"], 2000, None).await;
    assert_eq!(
        page(&r),
        (
            vec![
                ("a".into(), 0, vec![0, 1]),
                ("b".into(), 0, vec![0, 1, 2]),
                ("nope".into(), 3, vec![]),
            ],
            None
        ),
        "sorted by name; an unknown topic UNKNOWN_TOPIC_OR_PARTITION"
    );
    let t = &r.topics[0];
    assert!(!t.topic_id.is_nil());
    assert_eq!(t.partitions[0].leader_id.0, 0);
    assert_eq!(t.partitions[0].replica_nodes, vec![BrokerId(0)]);
    // A limit of 3: a, then b's first partition, and a cursor at b-1.
    let r = describe_partitions(&mut c, &["a", "b"], 3, None).await;
    assert_eq!(
        page(&r),
        (
            vec![("a".into(), 0, vec![0, 1]), ("b".into(), 0, vec![0])],
            Some(("b".into(), 1))
        )
    );
    let r = describe_partitions(&mut c, &["a", "b"], 3, Some(("b", 1))).await;
    assert_eq!(page(&r), (vec![("b".into(), 0, vec![1, 2])], None));
    // A page that ends with a topic points the cursor at the next topic's first partition.
    let r = describe_partitions(&mut c, &["a", "b"], 2, None).await;
    assert_eq!(
        page(&r),
        (vec![("a".into(), 0, vec![0, 1])], Some(("b".into(), 0)))
    );
    // Empty: every topic (here also the test kit's `t`).
    let r = describe_partitions(&mut c, &[], 2000, None).await;
    let names: Vec<String> = page(&r).0.into_iter().map(|t| t.0).collect();
    assert_eq!(names, vec!["a", "b"]);
    // A cursor at a topic not asked for: INVALID_REQUEST.
    let r = describe_partitions(&mut c, &["a"], 10, Some(("b", 0))).await;
    assert_eq!(page(&r), (vec![("a".into(), 42, vec![])], None));
}

#[tokio::test]
async fn list_config_resources_lists_topics_and_this_broker() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let listed = |r: &ListConfigResourcesResponse| -> Vec<(String, i8)> {
        r.config_resources
            .iter()
            .map(|c| (c.resource_name.to_string(), c.resource_type))
            .collect()
    };
    // v0 is ListClientMetricsResources: there are none.
    let r = c.call(&ListConfigResourcesRequest::default(), 0).await;
    assert_eq!((r.error_code, listed(&r)), (0, vec![]));
    let r = c.call(&ListConfigResourcesRequest::default(), 1).await;
    assert_eq!(
        (r.error_code, listed(&r)),
        (0, vec![("t".into(), 2), ("0".into(), 4), ("0".into(), 8)])
    );
    let brokers = ListConfigResourcesRequest::default().with_resource_types(vec![4]);
    assert_eq!(listed(&c.call(&brokers, 1).await), vec![("0".into(), 4)]);
    let unknown = ListConfigResourcesRequest::default().with_resource_types(vec![3]);
    assert_eq!(c.call(&unknown, 1).await.error_code, 35);
}

fn delete_records(partitions: &[(&str, i32, i64)]) -> DeleteRecordsRequest {
    DeleteRecordsRequest::default()
        .with_timeout_ms(1000)
        .with_topics(
            partitions
                .iter()
                .map(|(topic, p, offset)| {
                    delete_records_request::DeleteRecordsTopic::default()
                        .with_name(topic_name(topic))
                        .with_partitions(vec![
                            delete_records_request::DeleteRecordsPartition::default()
                                .with_partition_index(*p)
                                .with_offset(*offset),
                        ])
                })
                .collect(),
        )
}

/// (error, low watermark) of each partition DeleteRecords answered.
fn deleted(r: &DeleteRecordsResponse) -> Vec<(i16, i64)> {
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (p.error_code, p.low_watermark)))
        .collect()
}

#[tokio::test]
async fn delete_records_moves_the_log_start_and_fetch_follows() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let five: Vec<_> = (0..5).map(|i| record(i, 1)).collect();
    produce(&mut c, "t", 0, batch(&five, Compression::None), 7).await;
    produce(&mut c, "t", 1, batch(&five, Compression::None), 7).await;
    for version in 0..=2 {
        let r = c
            .call(
                &delete_records(&[("t", 0, 2), ("t", 9, 0), ("nope", 0, 0), ("t", 0, 6)]),
                version,
            )
            .await;
        // OFFSET_OUT_OF_RANGE past the high watermark; UNKNOWN_TOPIC_OR_PARTITION.
        assert_eq!(
            deleted(&r),
            vec![(0, 2), (3, -1), (3, -1), (1, -1)],
            "v{version}"
        );
    }
    // -1: up to the high watermark.
    let r = c.call(&delete_records(&[("t", 1, -1)]), 2).await;
    assert_eq!(deleted(&r), vec![(0, 5)]);
    let r = c.call(&delete_records(&[("t", 1, -2)]), 2).await;
    assert_eq!(deleted(&r), vec![(1, -1)]);
    // Fetch: below the log start is out of range; the log start is reported.
    let below = c.call(&fetch_request("t", 0, 1), 11).await;
    assert_eq!(below.responses[0].partitions[0].error_code, 1);
    let from = c.call(&fetch_request("t", 0, 2), 11).await;
    let p = &from.responses[0].partitions[0];
    assert_eq!((p.error_code, p.log_start_offset), (0, 2));
}

/// The log start of `topic`-0 (ListOffsets EARLIEST).
async fn log_start(c: &mut Client, topic: &str) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-2),
            ])]);
    let r = c.call(&request, 1).await;
    r.topics[0].partitions[0].offset
}

#[tokio::test]
async fn retention_follows_each_topics_configs_on_the_memory_log() {
    let broker = TestBroker::with(BrokerConfig {
        records: broker::RecordsConfig {
            retention_ms: -1,
            retention_check_interval_ms: 20,
            ..Default::default()
        },
        ..config()
    })
    .await;
    let mut c = broker.client().await;
    let topic = |name: &str, configs: &[(&str, &str)]| {
        create_topics_request::CreatableTopic::default()
            .with_name(topic_name(name))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        create_topics_request::CreatableTopicConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            )
    };
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![
            topic("short", &[("retention.ms", "60000")]),
            topic(
                "compacted",
                &[("retention.ms", "60000"), ("cleanup.policy", "compact")],
            ),
            topic("kept", &[]),
        ]);
    let r = c.call(&create, 7).await;
    assert!(r.topics.iter().all(|t| t.error_code == 0), "{r:?}");
    // Records stamped long ago (1970), then one stamped now.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for name in ["short", "compacted", "kept"] {
        produce(
            &mut c,
            name,
            0,
            batch(&[record(0, 1), record(1, 2)], Compression::None),
            7,
        )
        .await;
        produce(
            &mut c,
            name,
            0,
            batch(&[record(2, now)], Compression::None),
            7,
        )
        .await;
    }
    // `short` loses its old batch at a check (bounded wait; the check runs every 20 ms).
    bounded("retention of `short`", async {
        while log_start(&mut c, "short").await != 2 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    // The same checks left the compact-only topic and the unlimited one alone.
    assert_eq!(log_start(&mut c, "compacted").await, 0);
    assert_eq!(log_start(&mut c, "kept").await, 0);
}
