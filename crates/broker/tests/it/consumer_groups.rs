//! Kafka's consumer group protocol (KIP-848) through the wire: ConsumerGroupHeartbeat and
//! ConsumerGroupDescribe, topic ids from Metadata, member epochs in OffsetCommit v9 and
//! OffsetFetch v9, ListGroups v5's type filter.

use crate::common;

use bytes::Buf;
use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use uuid::Uuid;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn join(member: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
        // librdkafka sends an empty regex beside its names.
        .with_subscribed_topic_regex(Some(s("")))
        .with_topic_partitions(Some(Vec::new()))
}

async fn topic_id(c: &mut Client, topic: &str) -> Uuid {
    let r = c
        .call(
            &MetadataRequest::default()
                .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
                )
                .with_name(Some(TopicName(s(topic))))])),
            12,
        )
        .await;
    assert_eq!(r.topics[0].error_code, 0);
    r.topics[0].topic_id
}

fn commit(member: &str, epoch: i32, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member))
        .with_generation_id_or_member_epoch(epoch)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset),
                ]),
        ])
}

fn commit_code(r: &OffsetCommitResponse) -> i16 {
    r.topics[0].partitions[0].error_code
}

#[tokio::test]
async fn a_consumer_protocol_member_joins_commits_with_its_epoch_and_leaves() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let id = topic_id(&mut c, "t").await;
    assert_ne!(
        id,
        Uuid::nil(),
        "Metadata v10+ names the topic by a real id"
    );
    // Asked for by id alone (v12), the same topic answers.
    let by_id = c
        .call(
            &MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default()
                    .with_name(None)
                    .with_topic_id(id),
            ])),
            12,
        )
        .await;
    assert_eq!(by_id.topics[0].name.as_ref().map(|n| n.as_str()), Some("t"));

    let r = c.call(&join("m1"), 1).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    assert_eq!(r.member_id.as_deref(), Some("m1"));
    let epoch = r.member_epoch;
    assert!(epoch >= 1);
    // DescribeGroups describes classic groups only: Dead before v6, GROUP_ID_NOT_FOUND with
    // Kafka's message from v6 (KIP-1043).
    let described = |v: i16| {
        let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]);
        (request, v)
    };
    let (request, v) = described(5);
    let d = c.call(&request, v).await;
    assert_eq!(
        (d.groups[0].error_code, d.groups[0].group_state.as_str()),
        (0, "Dead")
    );
    let (request, v) = described(6);
    let d = c.call(&request, v).await;
    assert_eq!(
        (d.groups[0].error_code, d.groups[0].error_message.as_deref()),
        (69, Some("Group g is not a classic group."))
    );
    let assignment = r.assignment.expect("a join gets its assignment");
    assert_eq!(assignment.topic_partitions.len(), 1);
    assert_eq!(assignment.topic_partitions[0].topic_id, id);
    assert_eq!(assignment.topic_partitions[0].partitions, vec![0, 1]);

    // OffsetCommit v9 with the member epoch; any other epoch is STALE_MEMBER_EPOCH (Kafka 4's
    // `ConsumerGroup.validateMemberEpoch`).
    assert_eq!(commit_code(&c.call(&commit("m1", epoch, 5), 9).await), 0);
    for other in [epoch - 1, epoch + 1] {
        assert_eq!(
            commit_code(&c.call(&commit("m1", other, 6), 9).await),
            113,
            "STALE_MEMBER_EPOCH for epoch {other}"
        );
    }
    // A consumer-protocol member below v9: UNSUPPORTED_VERSION, as Kafka.
    assert_eq!(commit_code(&c.call(&commit("m1", epoch, 6), 8).await), 35);

    // OffsetFetch v9 with the member's epoch reads what it committed.
    let fetch = OffsetFetchRequest::default().with_groups(vec![
        offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("g")))
            .with_member_id(Some(s("m1")))
            .with_member_epoch(epoch)
            .with_topics(Some(vec![
                offset_fetch_request::OffsetFetchRequestTopics::default()
                    .with_name(TopicName(s("t")))
                    .with_partition_indexes(vec![0, 1]),
            ])),
    ]);
    let f = c.call(&fetch, 9).await;
    let g = &f.groups[0];
    assert_eq!(g.error_code, 0);
    let offsets: Vec<i64> = g.topics[0]
        .partitions
        .iter()
        .map(|p| p.committed_offset)
        .collect();
    assert_eq!(offsets, vec![5, -1]);

    // ConsumerGroupDescribe names topics by id and name.
    let d = c
        .call(
            &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g"))]),
            1,
        )
        .await;
    let group = &d.groups[0];
    assert_eq!(group.error_code, 0);
    assert_eq!(group.group_state.as_str(), "Stable");
    assert_eq!(group.members.len(), 1);
    let m = &group.members[0];
    assert_eq!(m.member_id.as_str(), "m1");
    assert_eq!(m.member_epoch, epoch);
    assert_eq!(m.assignment.topic_partitions[0].topic_name.as_str(), "t");
    assert_eq!(m.assignment.topic_partitions[0].topic_id, id);

    // ListGroups v5 filters by type.
    let list = |types: &[&str]| {
        ListGroupsRequest::default().with_types_filter(types.iter().map(|t| s(t)).collect())
    };
    let consumer = c.call(&list(&["consumer"]), 5).await;
    assert_eq!(consumer.groups.len(), 1);
    assert_eq!(consumer.groups[0].group_type.as_str(), "consumer");
    assert!(c.call(&list(&["Classic"]), 5).await.groups.is_empty());

    // A leave (epoch -1) gives everything up.
    let leave = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s("m1"))
        .with_member_epoch(-1);
    let r = c.call(&leave, 1).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(r.member_epoch, -1);
    broker.stop().await.expect("clean stop");
}

#[tokio::test]
async fn consumer_heartbeats_get_kafkas_validation_errors() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    // v1: the client chooses its member id, so an empty one is invalid.
    let r = c.call(&join(""), 1).await;
    assert_eq!(r.error_code, 42, "INVALID_REQUEST");
    assert_eq!(r.error_message.as_deref(), Some("MemberId can't be empty."));
    // An assignor the broker does not have.
    let r = c
        .call(&join("m").with_server_assignor(Some(s("nope"))), 1)
        .await;
    assert_eq!(r.error_code, 112, "UNSUPPORTED_ASSIGNOR");
    // A heartbeat of a member of no group.
    let hb = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("none")))
        .with_member_id(s("m"))
        .with_member_epoch(3);
    assert_eq!(c.call(&hb, 1).await.error_code, 69, "GROUP_ID_NOT_FOUND");
    // ConsumerGroupDescribe of a group that does not exist.
    let d = c
        .call(
            &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("none"))]),
            0,
        )
        .await;
    assert_eq!(d.groups[0].error_code, 69);
    broker.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_regex_subscription_is_served_and_an_invalid_one_refused() {
    let mut config = common::config();
    config.topics = ["t:2", "t2:1", "other:1"]
        .iter()
        .map(|t| t.parse().expect("topic"))
        .collect();
    let broker = TestBroker::with(config).await;
    let mut c = broker.client().await;
    let regex_join = |member: &str, regex: &str| {
        join(member)
            .with_subscribed_topic_names(Some(Vec::new()))
            .with_subscribed_topic_regex(Some(s(regex)))
    };
    let r = c.call(&regex_join("m1", "t.*"), 1).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let assignment = r.assignment.expect("a join gets its assignment");
    let mut ids: Vec<(Uuid, usize)> = assignment
        .topic_partitions
        .iter()
        .map(|t| (t.topic_id, t.partitions.len()))
        .collect();
    ids.sort();
    let mut expected = vec![
        (topic_id(&mut c, "t").await, 2),
        (topic_id(&mut c, "t2").await, 1),
    ];
    expected.sort();
    assert_eq!(ids, expected, "t and t2, not other");

    let d = c
        .call(
            &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g"))]),
            1,
        )
        .await;
    let m = &d.groups[0].members[0];
    assert_eq!(m.subscribed_topic_regex.as_deref(), Some("t.*"));
    assert!(m.subscribed_topic_names.is_empty());

    let r = c.call(&regex_join("m2", "t("), 1).await;
    assert_eq!(r.error_code, 128, "INVALID_REGULAR_EXPRESSION");
    let message = r.error_message.as_deref().unwrap_or_default().to_string();
    assert!(
        message.starts_with("SubscribedTopicRegex `t(` is not a valid regular expression: "),
        "{message}"
    );
    broker.stop().await.expect("clean stop");
}

/// Kafka 4's online migration through the wire: a classic member's group becomes a
/// consumer-protocol group at the first ConsumerGroupHeartbeat, ConsumerGroupDescribe tells
/// the members' protocols apart, the classic member is told to join again and gets its
/// assignment from SyncGroup, and the group is classic again once the consumer-protocol
/// member leaves.
#[tokio::test]
async fn a_classic_group_is_upgraded_by_a_consumer_heartbeat_and_downgraded_when_it_leaves() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    topic_id(&mut c, "t").await;
    let joined = crate::groups::join(&mut c, "g").await;
    let classic = joined.member_id.to_string();
    let sync = crate::groups::sync_request(
        "g",
        &joined,
        &[(classic.as_str(), crate::groups::assignment("t", &[0, 1]))],
    );
    assert_eq!(c.call(&sync, 3).await.error_code, 0);

    let r = c.call(&join("m1"), 1).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let d = c
        .call(
            &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g"))]),
            1,
        )
        .await;
    assert_eq!(d.groups[0].error_code, 0);
    let types: Vec<(String, i8)> = d.groups[0]
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.member_type))
        .collect();
    assert_eq!(types, vec![("m1".to_string(), 1), (classic.clone(), 0)]);

    // The classic member's heartbeat: join again (REBALANCE_IN_PROGRESS).
    let hb = |generation: i32| {
        HeartbeatRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_member_id(s(&classic))
            .with_generation_id(generation)
    };
    assert_eq!(c.call(&hb(joined.generation_id), 3).await.error_code, 27);
    let mut rejoin = crate::groups::join_request("g", &classic);
    rejoin.session_timeout_ms = 10_000;
    let again = c.call(&rejoin, 5).await;
    assert_eq!(again.error_code, 0);
    assert_eq!(
        again.leader.as_str(),
        "",
        "no classic member of a consumer group leads"
    );
    let synced = c
        .call(&crate::groups::sync_request("g", &again, &[]), 3)
        .await;
    assert_eq!(synced.error_code, 0);
    let mut bytes = synced.assignment.clone();
    let _version = bytes.get_i16();
    let decoded = ConsumerProtocolAssignment::decode(&mut bytes, 0).unwrap();
    let mine: Vec<i32> = decoded
        .assigned_partitions
        .iter()
        .flat_map(|t| t.partitions.clone())
        .collect();
    assert!(mine.len() <= 2, "{mine:?}");

    // The consumer-protocol member leaves: the group is classic again and rebalances.
    let leave = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s("m1"))
        .with_member_epoch(-1);
    assert_eq!(c.call(&leave, 1).await.error_code, 0);
    let d = c
        .call(
            &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]),
            5,
        )
        .await;
    assert_eq!(d.groups[0].error_code, 0);
    assert_eq!(d.groups[0].group_state.as_str(), "PreparingRebalance");
    assert_eq!(d.groups[0].members.len(), 1);
    assert_eq!(c.call(&hb(again.generation_id), 3).await.error_code, 27);
}

/// A broker restarted on its data directory in the middle of a migrated group loads it as it
/// was: a consumer-protocol group with its classic member (same epoch, member type 0) and its
/// consumer-protocol member (same epoch, member type 1); both carry on.
#[tokio::test]
async fn a_migrated_group_survives_a_restart_on_the_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    a_migrated_group_survives_a_restart(|| broker::BrokerConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..config()
    })
    .await;
}

/// A migrated group (a classic member and a consumer-protocol member in a consumer group)
/// comes back after a restart with the same members, epochs and member types, and both carry
/// on. `with_dir` is the broker's config (a data directory, or PostgreSQL).
pub(crate) async fn a_migrated_group_survives_a_restart(
    with_dir: impl Fn() -> broker::BrokerConfig,
) {
    let describe = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g"))]);
    let (classic, before) = {
        let broker = TestBroker::with(with_dir()).await;
        let mut c = broker.client().await;
        topic_id(&mut c, "t").await;
        let joined = crate::groups::join(&mut c, "g").await;
        let classic = joined.member_id.to_string();
        let sync = crate::groups::sync_request(
            "g",
            &joined,
            &[(classic.as_str(), crate::groups::assignment("t", &[0, 1]))],
        );
        assert_eq!(c.call(&sync, 3).await.error_code, 0);
        assert_eq!(c.call(&join("m1"), 1).await.error_code, 0);
        let d = c.call(&describe, 1).await;
        let before: Vec<(String, i32, i8)> = d.groups[0]
            .members
            .iter()
            .map(|m| (m.member_id.to_string(), m.member_epoch, m.member_type))
            .collect();
        broker.stop().await.unwrap();
        (classic, before)
    };
    assert_eq!(before.len(), 2);
    let broker = TestBroker::with(with_dir()).await;
    let mut c = broker.client().await;
    let d = c.call(&describe, 1).await;
    assert_eq!(d.groups[0].error_code, 0);
    let after: Vec<(String, i32, i8)> = d.groups[0]
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.member_epoch, m.member_type))
        .collect();
    assert_eq!(after, before);
    // The classic member is still one: its heartbeat with its epoch is no UNKNOWN_MEMBER_ID
    // (it is told to join again: the consumer-protocol member's join moved the group epoch).
    let epoch = before.iter().find(|m| m.0 == classic).unwrap().1;
    let hb = HeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(&classic))
        .with_generation_id(epoch);
    assert_eq!(c.call(&hb, 3).await.error_code, 27);
    let m1 = before.iter().find(|m| m.0 == "m1").unwrap().1;
    let r = c
        .call(
            &ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s("g")))
                .with_member_id(s("m1"))
                .with_member_epoch(m1),
            1,
        )
        .await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    broker.stop().await.unwrap();
}
