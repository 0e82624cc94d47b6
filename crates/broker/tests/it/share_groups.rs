//! Share groups (KIP-932), step 1, through the wire: ShareGroupHeartbeat and
//! ShareGroupDescribe at v1, topic ids, ListGroups v5's `share` type, DescribeGroups and
//! DeleteGroups on a share group, a group id of another kind, and the ACLs.

use crate::acls::{acl_broker, login};
use crate::common;

use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const INVALID_REQUEST: i16 = 42;
const GROUP_ID_NOT_FOUND: i16 = 69;
const NON_EMPTY_GROUP: i16 = 68;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub(crate) fn join(group: &str, member: &str) -> ShareGroupHeartbeatRequest {
    ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
}

fn beat(group: &str, member: &str, epoch: i32) -> ShareGroupHeartbeatRequest {
    ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
}

fn partitions(r: &ShareGroupHeartbeatResponse) -> Vec<i32> {
    r.assignment
        .as_ref()
        .expect("an assignment")
        .topic_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().copied())
        .collect()
}

#[tokio::test]
async fn share_members_are_assigned_described_listed_and_deleted_as_kafka_does() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let versions = c.call(&ApiVersionsRequest::default(), 3).await;
    for key in [76, 77] {
        let v = versions.api_keys.iter().find(|k| k.api_key == key).unwrap();
        assert_eq!((v.min_version, v.max_version), (1, 1), "api {key}");
    }
    // Two members on the 2-partition topic "t": one partition each.
    let a = c.call(&join("sg", "a"), 1).await;
    assert_eq!(a.error_code, 0, "{:?}", a.error_message);
    assert_eq!((a.member_id.as_deref(), a.member_epoch), (Some("a"), 1));
    assert_eq!(partitions(&a), [0, 1]);
    let b = c.call(&join("sg", "b"), 1).await;
    assert_eq!(b.member_epoch, 2);
    let a2 = c.call(&beat("sg", "a", 1), 1).await;
    assert_eq!(a2.member_epoch, 2);
    let (pa, pb) = (partitions(&a2), partitions(&b));
    assert_eq!((pa.len(), pb.len()), (1, 1));
    assert_ne!(pa, pb);
    // ShareGroupDescribe: names and ids of the topics, the simple assignor.
    let d = c
        .call(
            &ShareGroupDescribeRequest::default()
                .with_group_ids(vec![GroupId(s("sg")), GroupId(s("nope"))]),
            1,
        )
        .await;
    let g = &d.groups[0];
    assert_eq!(g.error_code, 0);
    assert_eq!(g.group_state.as_str(), "Stable");
    assert_eq!((g.group_epoch, g.assignment_epoch), (2, 2));
    assert_eq!(g.assignor_name.as_str(), "simple");
    assert_eq!(g.members.len(), 2);
    let tp = &g.members[0].assignment.topic_partitions[0];
    assert_eq!(tp.topic_name.as_str(), "t");
    assert_eq!(
        tp.topic_id,
        a.assignment.as_ref().unwrap().topic_partitions[0].topic_id
    );
    assert_eq!(d.groups[1].error_code, GROUP_ID_NOT_FOUND);
    // ListGroups v5: type `share`, protocol type `share`.
    let list = |types: &[&str]| {
        ListGroupsRequest::default().with_types_filter(types.iter().map(|t| s(t)).collect())
    };
    let shares = c.call(&list(&["Share"]), 5).await;
    assert_eq!(shares.groups.len(), 1);
    assert_eq!(shares.groups[0].group_type.as_str(), "share");
    assert_eq!(shares.groups[0].protocol_type.as_str(), "share");
    assert!(c.call(&list(&["consumer"]), 5).await.groups.is_empty());
    // DescribeGroups describes classic groups only.
    let dg = c
        .call(
            &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("sg"))]),
            6,
        )
        .await;
    assert_eq!(dg.groups[0].error_code, GROUP_ID_NOT_FOUND);
    assert_eq!(
        dg.groups[0].error_message.as_deref(),
        Some("Group sg is not a classic group.")
    );
    // The group id is a share group's: a consumer-protocol member and a commit are refused.
    let consumer = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("sg")))
        .with_member_id(s("m"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
        .with_topic_partitions(Some(Vec::new()));
    assert_eq!(c.call(&consumer, 1).await.error_code, GROUP_ID_NOT_FOUND);
    let classic = JoinGroupRequest::default()
        .with_group_id(GroupId(s("sg")))
        .with_member_id(s("m"))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(s("range"))]);
    assert_eq!(
        c.call(&classic, 5).await.error_code,
        23,
        "INCONSISTENT_GROUP_PROTOCOL, as for a consumer-protocol group"
    );
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("sg")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(1),
                ]),
        ]);
    let r = c.call(&commit, 9).await;
    assert_eq!(r.topics[0].partitions[0].error_code, GROUP_ID_NOT_FOUND);
    // Before v9 Kafka says ILLEGAL_GENERATION for GROUP_ID_NOT_FOUND.
    let r = c.call(&commit, 8).await;
    assert_eq!(r.topics[0].partitions[0].error_code, 22);
    // DeleteGroups: refused while it has members, done once they left.
    let delete = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("sg"))]);
    assert_eq!(
        c.call(&delete, 2).await.results[0].error_code,
        NON_EMPTY_GROUP
    );
    for (m, epoch) in [("a", 2), ("b", 2)] {
        let left = c.call(&beat("sg", m, epoch), 1).await;
        assert_eq!(left.error_code, 0);
        let left = c.call(&beat("sg", m, -1), 1).await;
        assert_eq!((left.error_code, left.member_epoch), (0, -1));
    }
    assert_eq!(c.call(&delete, 2).await.results[0].error_code, 0);
    broker.stop().await.expect("clean stop");
}

#[tokio::test]
async fn share_heartbeats_get_kafkas_validation_errors() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let r = c.call(&join("sg", ""), 1).await;
    assert_eq!(r.error_code, INVALID_REQUEST);
    assert_eq!(r.error_message.as_deref(), Some("MemberId can't be empty."));
    let r = c
        .call(&join("sg", "a").with_subscribed_topic_names(None), 1)
        .await;
    assert_eq!(r.error_code, INVALID_REQUEST);
    assert_eq!(
        r.error_message.as_deref(),
        Some("SubscribedTopicNames must be set in first request.")
    );
    let r = c.call(&beat("none", "a", 3), 1).await;
    assert_eq!(r.error_code, GROUP_ID_NOT_FOUND);
    assert_eq!(c.call(&join("sg", "a"), 1).await.error_code, 0);
    let r = c.call(&beat("sg", "a", 7), 1).await;
    assert_eq!(r.error_code, 110, "FENCED_MEMBER_EPOCH");
    let r = c.call(&beat("sg", "x", 1), 1).await;
    assert_eq!(r.error_code, 25, "UNKNOWN_MEMBER_ID");
    broker.stop().await.expect("clean stop");
}

#[tokio::test]
async fn share_group_calls_are_authorized_as_kafka_authorizes_them() {
    let (broker, _dir) = acl_broker(None).await;
    let mut bob = login(&broker, "bob").await;
    let r = bob.call(&join("sg", "b"), 1).await;
    assert_eq!(
        r.error_code, GROUP_AUTHORIZATION_FAILED,
        "no READ on the group"
    );
    let d = bob
        .call(
            &ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("sg"))]),
            1,
        )
        .await;
    assert_eq!(d.groups[0].error_code, GROUP_AUTHORIZATION_FAILED);
    let mut admin = login(&broker, "admin").await;
    assert_eq!(admin.call(&join("sg", "a"), 1).await.error_code, 0);
    broker.stop().await.expect("clean stop");
}

// ---- step 2: ShareFetch and ShareAcknowledge ----

pub(crate) fn fetch(
    member: &str,
    epoch: i32,
    topic: uuid::Uuid,
    acks: &[(i32, i64, i64, i8)],
    partitions: &[i32],
) -> ShareFetchRequest {
    let mut parts: Vec<share_fetch_request::FetchPartition> = partitions
        .iter()
        .map(|&p| share_fetch_request::FetchPartition::default().with_partition_index(p))
        .collect();
    for &(p, first, last, kind) in acks {
        let batch = share_fetch_request::AcknowledgementBatch::default()
            .with_first_offset(first)
            .with_last_offset(last)
            .with_acknowledge_types(vec![kind]);
        match parts.iter_mut().find(|x| x.partition_index == p) {
            Some(x) => x.acknowledgement_batches.push(batch),
            None => parts.push(
                share_fetch_request::FetchPartition::default()
                    .with_partition_index(p)
                    .with_acknowledgement_batches(vec![batch]),
            ),
        }
    }
    ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s("sg"))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(0)
        .with_max_records(100)
        .with_max_bytes(1 << 20)
        .with_topics(vec![share_fetch_request::FetchTopic::default()
            .with_topic_id(topic)
            .with_partitions(parts)])
}

/// Every acquired range of partition `p`: (first, last, delivery count).
pub(crate) fn acquired(r: &ShareFetchResponse, p: i32) -> Vec<(i64, i64, i16)> {
    r.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .filter(|x| x.partition_index == p)
        .flat_map(|x| {
            x.acquired_records
                .iter()
                .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        })
        .collect()
}

pub(crate) fn part(r: &ShareFetchResponse, p: i32) -> &share_fetch_response::PartitionData {
    r.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .find(|x| x.partition_index == p)
        .expect("the partition in the answer")
}

pub(crate) async fn produce_n(c: &mut Client, partition: i32, n: usize) {
    let records: Vec<_> = (0..n).map(|i| record(i, 1_000)).collect();
    let (code, _) = produce(
        c,
        "t",
        partition,
        batch(&records, kafka_protocol::records::Compression::None),
        9,
    )
    .await;
    assert_eq!(code, 0);
}

pub(crate) async fn topic_id_of(c: &mut Client) -> uuid::Uuid {
    let r = c
        .call(
            &MetadataRequest::default()
                .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
                )
                .with_name(Some(TopicName(s("t"))))])),
            12,
        )
        .await;
    r.topics[0].topic_id
}

#[tokio::test]
async fn share_fetch_hands_records_out_once_and_again_after_a_release() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let id = topic_id_of(&mut c).await;
    assert_eq!(c.call(&join("sg", "a"), 1).await.error_code, 0);
    assert_eq!(c.call(&join("sg", "b"), 1).await.error_code, 0);
    // The share-partitions start at the high watermark (share.auto.offset.reset=latest):
    // the first fetch opens the sessions and finds nothing.
    let r = c.call(&fetch("a", 0, id, &[], &[0]), 1).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    assert!(acquired(&r, 0).is_empty());
    assert_eq!(r.acquisition_lock_timeout_ms, 30_000);
    let r = c.call(&fetch("b", 0, id, &[], &[0]), 1).await;
    assert!(acquired(&r, 0).is_empty());
    produce_n(&mut c, 0, 5).await;
    // a acquires the five records, with their batch.
    let r = c.call(&fetch("a", 1, id, &[], &[]), 1).await;
    assert_eq!(acquired(&r, 0), [(0, 4, 1)]);
    assert!(part(&r, 0).records.as_ref().is_some_and(|b| !b.is_empty()));
    // b gets none of them while a holds them.
    let r = c.call(&fetch("b", 1, id, &[], &[]), 1).await;
    assert!(acquired(&r, 0).is_empty());
    // a accepts 0-1 and releases 2-4 (piggybacked on its next fetch, which acquires the
    // released ones again at once: delivery count 2).
    let r = c
        .call(&fetch("a", 2, id, &[(0, 0, 1, 1), (0, 2, 4, 2)], &[]), 1)
        .await;
    assert_eq!(part(&r, 0).acknowledge_error_code, 0);
    assert_eq!(acquired(&r, 0), [(2, 4, 2)]);
    // ShareAcknowledge alone: reject 2, accept 3-4. An offset a does not hold (0, accepted
    // already) is INVALID_RECORD_STATE and changes nothing.
    let ack = |epoch: i32, batches: &[(i64, i64, i8)]| {
        ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(s("sg"))))
            .with_member_id(Some(s("a")))
            .with_share_session_epoch(epoch)
            .with_topics(vec![share_acknowledge_request::AcknowledgeTopic::default()
                .with_topic_id(id)
                .with_partitions(vec![
                    share_acknowledge_request::AcknowledgePartition::default()
                        .with_partition_index(0)
                        .with_acknowledgement_batches(
                            batches
                                .iter()
                                .map(|&(f, l, k)| {
                                    share_acknowledge_request::AcknowledgementBatch::default()
                                        .with_first_offset(f)
                                        .with_last_offset(l)
                                        .with_acknowledge_types(vec![k])
                                })
                                .collect(),
                        ),
                ])])
    };
    let r = c.call(&ack(3, &[(0, 0, 1)]), 1).await;
    assert_eq!(
        r.responses[0].partitions[0].error_code, 121,
        "INVALID_RECORD_STATE"
    );
    let r = c.call(&ack(4, &[(2, 2, 3), (3, 4, 1)]), 1).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    // Session epochs: a stale one and an unknown session.
    let r = c.call(&fetch("a", 4, id, &[], &[]), 1).await;
    assert_eq!(r.error_code, 123, "INVALID_SHARE_SESSION_EPOCH");
    let r = c.call(&fetch("nobody", 1, id, &[], &[]), 1).await;
    assert_eq!(r.error_code, 122, "SHARE_SESSION_NOT_FOUND");
    let r = c.call(&fetch("a", 0, id, &[(0, 0, 0, 1)], &[]), 1).await;
    assert_eq!(r.error_code, 42, "acknowledgements on an initial fetch");
    // Nothing is left for b: everything was accepted, rejected or is done.
    produce_n(&mut c, 0, 2).await;
    let r = c.call(&fetch("b", 2, id, &[], &[]), 1).await;
    assert_eq!(acquired(&r, 0), [(5, 6, 1)], "only the new records");
    // b closes its session (epoch -1): what it held is available to a at once.
    let r = c.call(&fetch("b", -1, id, &[], &[]), 1).await;
    assert_eq!(r.error_code, 0);
    let r = c.call(&fetch("a", 5, id, &[], &[]), 1).await;
    assert_eq!(acquired(&r, 0), [(5, 6, 2)]);
    broker.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_groups_share_configs_set_its_start_lock_and_delivery_limit() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let id = topic_id_of(&mut c).await;
    produce_n(&mut c, 0, 3).await;
    // Kafka's group configs, set before the group exists.
    let set = IncrementalAlterConfigsRequest::default().with_resources(vec![crate::admin::alter(
        32,
        "sg",
        &[
            ("share.auto.offset.reset", 0, Some("earliest")),
            ("share.delivery.count.limit", 0, Some("2")),
            ("share.record.lock.duration.ms", 0, Some("15000")),
        ],
    )]);
    let r = c.call(&set, 1).await;
    assert_eq!(
        r.responses[0].error_code, 0,
        "{:?}",
        r.responses[0].error_message
    );
    assert_eq!(c.call(&join("sg", "a"), 1).await.error_code, 0);
    // earliest: the records produced before the group's first fetch are handed out.
    let r = c.call(&fetch("a", 0, id, &[], &[0]), 1).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    assert_eq!(r.acquisition_lock_timeout_ms, 15_000);
    assert_eq!(acquired(&r, 0), [(0, 2, 1)]);
    // Released, delivered a second time; released again, at the limit of 2: archived.
    let r = c.call(&fetch("a", 1, id, &[(0, 0, 2, 2)], &[]), 1).await;
    assert_eq!(part(&r, 0).acknowledge_error_code, 0);
    assert_eq!(acquired(&r, 0), [(0, 2, 2)]);
    let r = c.call(&fetch("a", 2, id, &[(0, 0, 2, 2)], &[]), 1).await;
    assert_eq!(part(&r, 0).acknowledge_error_code, 0);
    assert!(
        acquired(&r, 0).is_empty(),
        "archived at the delivery count limit"
    );
    broker.stop().await.expect("clean stop");
}

#[tokio::test]
async fn max_records_is_met_at_a_batchs_end_as_kafka_does() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let id = topic_id_of(&mut c).await;
    assert_eq!(c.call(&join("sg", "a"), 1).await.error_code, 0);
    assert!(acquired(&c.call(&fetch("a", 0, id, &[], &[0]), 1).await, 0).is_empty());
    produce_n(&mut c, 0, 10).await;
    produce_n(&mut c, 0, 4).await;
    // max_records 3 inside a batch of 10: the whole batch, not the next one.
    let r = c
        .call(&fetch("a", 1, id, &[], &[]).with_max_records(3), 1)
        .await;
    assert_eq!(acquired(&r, 0), [(0, 9, 1)]);
    let r = c
        .call(&fetch("a", 2, id, &[], &[]).with_max_records(4), 1)
        .await;
    assert_eq!(acquired(&r, 0), [(10, 13, 1)]);
    broker.stop().await.expect("clean stop");
}

#[tokio::test]
async fn read_committed_share_groups_wait_for_transactions_and_skip_aborted_ones() {
    use crate::idempotence::{produce_as, producer_batch};
    use crate::transactions::{add_partitions, end_txn_at, init};
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let id = topic_id_of(&mut c).await;
    let set = IncrementalAlterConfigsRequest::default().with_resources(vec![crate::admin::alter(
        32,
        "sg",
        &[
            ("share.auto.offset.reset", 0, Some("earliest")),
            ("share.isolation.level", 0, Some("read_committed")),
        ],
    )]);
    assert_eq!(c.call(&set, 1).await.responses[0].error_code, 0);
    // An open transaction of three records (0-2): nothing is handed out yet.
    let p = init(&mut c, "tx").await;
    assert_eq!(add_partitions(&mut c, "tx", p, &[0]).await, vec![0]);
    let produced = produce_as(&mut c, Some("tx"), 0, producer_batch(p.0, p.1, 0, 3, true)).await;
    assert_eq!(produced.0, 0);
    assert_eq!(c.call(&join("sg", "a"), 1).await.error_code, 0);
    let r = c.call(&fetch("a", 0, id, &[], &[0]), 1).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    assert!(
        acquired(&r, 0).is_empty(),
        "an open transaction stalls the group"
    );
    // Aborted (marker 3), then a committed one (4-5, marker 6).
    assert_eq!(end_txn_at(&mut c, "tx", p, false, 3).await, 0);
    assert_eq!(add_partitions(&mut c, "tx", p, &[0]).await, vec![0]);
    let produced = produce_as(&mut c, Some("tx"), 0, producer_batch(p.0, p.1, 3, 2, true)).await;
    assert_eq!(produced.0, 0);
    assert_eq!(end_txn_at(&mut c, "tx", p, true, 3).await, 0);
    // The aborted records are archived, never handed out; the markers are (as gaps).
    let r = c.call(&fetch("a", 1, id, &[], &[]), 1).await;
    assert_eq!(acquired(&r, 0), [(3, 6, 1)]);
    broker.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_topic_made_again_under_its_name_is_delivered_afresh() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let id = topic_id_of(&mut c).await;
    let joined = c.call(&join("sg", "a"), 1).await;
    assert_eq!(joined.error_code, 0);
    let ids_in = |r: &ShareGroupHeartbeatResponse| -> Vec<uuid::Uuid> {
        r.assignment
            .iter()
            .flat_map(|a| a.topic_partitions.iter().map(|t| t.topic_id))
            .collect()
    };
    assert_eq!(ids_in(&joined), [id]);
    let epoch = joined.member_epoch;
    assert!(acquired(&c.call(&fetch("a", 0, id, &[], &[0]), 1).await, 0).is_empty());
    produce_n(&mut c, 0, 3).await;
    let r = c.call(&fetch("a", 1, id, &[(0, 0, 0, 1)], &[]), 1).await;
    assert_eq!(acquired(&r, 0), [(0, 2, 1)]);
    let r = c.call(&fetch("a", -1, id, &[], &[]), 1).await;
    assert_eq!(r.error_code, 0);
    // b's session holds partition 0 by the old topic's id.
    assert_eq!(c.call(&join("sg", "b"), 1).await.error_code, 0);
    assert_eq!(c.call(&fetch("b", 0, id, &[], &[0]), 1).await.error_code, 0);
    let deleted = DeleteTopicsRequest::default()
        .with_topic_names(vec![topic_name("t")])
        .with_timeout_ms(5000);
    assert_eq!(c.call(&deleted, 4).await.responses[0].error_code, 0);
    let create = CreateTopicsRequest::default().with_topics(vec![
        create_topics_request::CreatableTopic::default()
            .with_name(topic_name("t"))
            .with_num_partitions(2)
            .with_replication_factor(1),
    ]);
    assert_eq!(c.call(&create, 5).await.topics[0].error_code, 0);
    let new_id = topic_id_of(&mut c).await;
    assert_ne!(new_id, id);
    // The member's next heartbeat carries its assignment again, by the new id (unchanged by
    // name, it would not be sent at all).
    let r = c.call(&beat("sg", "a", epoch), 1).await;
    assert_eq!((r.error_code, ids_in(&r)), (0, vec![new_id]));
    let r = c.call(&beat("sg", "a", epoch), 1).await;
    assert!(r.assignment.is_none(), "sent once");
    let old_id = id;
    let id = new_id;
    produce_n(&mut c, 0, 5).await;
    // b's session still names the old topic: UNKNOWN_TOPIC_ID, nothing acquired.
    let r = c.call(&fetch("b", 1, old_id, &[], &[]), 1).await;
    assert_eq!(part(&r, 0).error_code, 100, "UNKNOWN_TOPIC_ID");
    assert!(acquired(&r, 0).is_empty());
    // The new topic's share-partition starts at its high watermark (latest) like any new
    // one: nothing of the old one's state (start offset 3) remains.
    let r = c.call(&fetch("a", 0, id, &[], &[0]), 1).await;
    assert!(acquired(&r, 0).is_empty());
    produce_n(&mut c, 0, 1).await;
    let r = c.call(&fetch("a", 1, id, &[], &[]), 1).await;
    assert_eq!(acquired(&r, 0), [(5, 5, 1)]);
    broker.stop().await.expect("clean stop");
}

fn describe_offsets(topics: Option<&[(&str, &[i32])]>) -> DescribeShareGroupOffsetsRequest {
    DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(GroupId(s("sg")))
            .with_topics(topics.map(|ts| {
                ts.iter()
                    .map(|(t, ps)| {
                        describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestTopic::default()
                            .with_topic_name(topic_name(t))
                            .with_partitions(ps.to_vec())
                    })
                    .collect()
            })),
    ])
}

/// (group error, [(topic, partition, start offset, error)]).
fn offsets_of(r: &DescribeShareGroupOffsetsResponse) -> (i16, Vec<(String, i32, i64, i16)>) {
    let g = &r.groups[0];
    let rows = g
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.topic_name.to_string(),
                    p.partition_index,
                    p.start_offset,
                    p.error_code,
                )
            })
        })
        .collect();
    (g.error_code, rows)
}

fn alter_offsets(partition: i32, start: i64) -> AlterShareGroupOffsetsRequest {
    AlterShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s("sg")))
        .with_topics(vec![
            alter_share_group_offsets_request::AlterShareGroupOffsetsRequestTopic::default()
                .with_topic_name(topic_name("t"))
                .with_partitions(vec![
                    alter_share_group_offsets_request::AlterShareGroupOffsetsRequestPartition::default()
                        .with_partition_index(partition)
                        .with_start_offset(start),
                ]),
        ])
}

#[tokio::test]
async fn share_group_offsets_are_described_altered_and_deleted_as_kafka_does() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let id = topic_id_of(&mut c).await;
    assert_eq!(
        offsets_of(&c.call(&describe_offsets(None), 0).await).0,
        GROUP_ID_NOT_FOUND
    );
    produce_n(&mut c, 0, 3).await;
    assert_eq!(c.call(&join("sg", "a"), 1).await.error_code, 0);
    assert!(acquired(&c.call(&fetch("a", 0, id, &[], &[0]), 1).await, 0).is_empty());
    // The share-partition of partition 0 starts at the high watermark (3); partition 1 is
    // not used yet (-1); partition 5 does not exist.
    assert_eq!(
        offsets_of(&c.call(&describe_offsets(None), 0).await),
        (0, vec![("t".into(), 0, 3, 0)])
    );
    assert_eq!(
        offsets_of(
            &c.call(&describe_offsets(Some(&[("t", &[0, 1, 5])])), 0)
                .await
        ),
        (
            0,
            vec![
                ("t".into(), 0, 3, 0),
                ("t".into(), 1, -1, 0),
                ("t".into(), 5, -1, 3)
            ]
        )
    );
    // Not while the group has a member.
    let r = c.call(&alter_offsets(0, 1), 0).await;
    assert_eq!(r.error_code, NON_EMPTY_GROUP, "{:?}", r.error_message);
    assert_eq!(c.call(&fetch("a", -1, id, &[], &[]), 1).await.error_code, 0);
    assert_eq!(c.call(&beat("sg", "a", -1), 1).await.error_code, 0);
    // Empty: back to offset 1, delivered from there.
    let r = c.call(&alter_offsets(0, 1), 0).await;
    assert_eq!(
        (r.error_code, r.responses[0].partitions[0].error_code),
        (0, 0)
    );
    assert_eq!(
        c.call(&alter_offsets(7, 1), 0).await.responses[0].partitions[0].error_code,
        3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!(
        offsets_of(&c.call(&describe_offsets(None), 0).await),
        (0, vec![("t".into(), 0, 1, 0)])
    );
    assert_eq!(c.call(&join("sg", "b"), 1).await.error_code, 0);
    let r = c.call(&fetch("b", 0, id, &[], &[0]), 1).await;
    assert_eq!(acquired(&r, 0), [(1, 2, 1)]);
    assert_eq!(c.call(&fetch("b", -1, id, &[], &[]), 1).await.error_code, 0);
    assert_eq!(c.call(&beat("sg", "b", -1), 1).await.error_code, 0);
    // Deleted: nothing is left of the topic's share-partitions.
    let delete = DeleteShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s("sg")))
        .with_topics(vec![
            delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic::default()
                .with_topic_name(topic_name("t")),
            delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic::default()
                .with_topic_name(topic_name("nope")),
        ]);
    let r = c.call(&delete, 0).await;
    assert_eq!(r.error_code, 0);
    let codes: Vec<i16> = r.responses.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, [0, 3]);
    assert_eq!(
        offsets_of(&c.call(&describe_offsets(None), 0).await),
        (0, vec![])
    );
    broker.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_closed_connection_closes_its_share_sessions_and_gives_back_their_records() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let id = topic_id_of(&mut c).await;
    assert_eq!(c.call(&join("sg", "a"), 1).await.error_code, 0);
    assert_eq!(c.call(&join("sg", "b"), 1).await.error_code, 0);
    let mut first = broker.client().await;
    assert!(acquired(&first.call(&fetch("a", 0, id, &[], &[0]), 1).await, 0).is_empty());
    assert!(acquired(&c.call(&fetch("b", 0, id, &[], &[0]), 1).await, 0).is_empty());
    produce_n(&mut c, 0, 4).await;
    let r = first.call(&fetch("a", 1, id, &[], &[]), 1).await;
    assert_eq!(acquired(&r, 0), [(0, 3, 1)]);
    // a's connection drops, its records held for 30 s: b gets them at once (its fetch
    // waits for records given back).
    drop(first);
    let r = c
        .call(&fetch("b", 1, id, &[], &[]).with_max_wait_ms(10_000), 1)
        .await;
    assert_eq!(acquired(&r, 0), [(0, 3, 2)]);
    // A session opened again on another connection is not closed by the first's drop.
    let mut one = broker.client().await;
    let mut two = broker.client().await;
    assert_eq!(
        one.call(&fetch("a", 0, id, &[], &[0]), 1).await.error_code,
        0
    );
    assert_eq!(
        two.call(&fetch("a", 0, id, &[], &[0]), 1).await.error_code,
        0
    );
    drop(one);
    produce_n(&mut c, 0, 1).await;
    let r = two
        .call(&fetch("a", 1, id, &[], &[]).with_max_wait_ms(10_000), 1)
        .await;
    assert_eq!(
        r.error_code, 0,
        "the session opened on the second connection lives on"
    );
    assert_eq!(acquired(&r, 0), [(4, 4, 1)]);
    broker.stop().await.expect("clean stop");
}

/// Kafka's share state across a restart: what was accepted or rejected is never delivered
/// again, what was acquired is available again with its delivery count; a deleted group's
/// state goes with it. `config` is the broker's (a data directory, or PostgreSQL).
pub(crate) async fn share_state_survives_a_restart(config: impl Fn() -> broker::BrokerConfig) {
    let broker = TestBroker::with(config()).await;
    let mut c = broker.client().await;
    let id = topic_id_of(&mut c).await;
    produce_n(&mut c, 0, 6).await;
    let set = IncrementalAlterConfigsRequest::default().with_resources(vec![crate::admin::alter(
        32,
        "sg",
        &[("share.auto.offset.reset", 0, Some("earliest"))],
    )]);
    assert_eq!(c.call(&set, 1).await.responses[0].error_code, 0);
    assert_eq!(c.call(&join("sg", "a"), 1).await.error_code, 0);
    let r = c.call(&fetch("a", 0, id, &[], &[0]), 1).await;
    assert_eq!(acquired(&r, 0), [(0, 5, 1)]);
    // 0-1 accepted, 2 rejected, 3 released and acquired again (count 2); 3-5 held.
    let r = c
        .call(
            &fetch("a", 1, id, &[(0, 0, 1, 1), (0, 2, 2, 3), (0, 3, 3, 2)], &[]),
            1,
        )
        .await;
    assert_eq!(part(&r, 0).acknowledge_error_code, 0);
    assert_eq!(acquired(&r, 0), [(3, 3, 2)]);
    broker.stop().await.expect("clean stop");

    let broker = TestBroker::with(config()).await;
    let mut c = broker.client().await;
    // The group itself is not kept: its member is told to join again (UNKNOWN_MEMBER_ID,
    // not GROUP_ID_NOT_FOUND, which librdkafka takes as fatal).
    assert_eq!(c.call(&beat("sg", "a", 1), 1).await.error_code, 25);
    assert_eq!(c.call(&join("sg", "b"), 1).await.error_code, 0);
    let r = c.call(&fetch("b", 0, id, &[], &[0]), 1).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    // Only what was not done, delivered again, with its delivery count: the stop closed a's
    // connection, which gave back what it held (3 delivered twice, 4-5 once), and that was
    // written.
    assert_eq!(acquired(&r, 0), [(3, 3, 3), (4, 5, 2)]);
    // The group deleted (its member gone first), its state goes with it.
    let r = c.call(&fetch("b", -1, id, &[], &[]), 1).await;
    assert_eq!(r.error_code, 0);
    let leave = beat("sg", "b", -1);
    assert_eq!(c.call(&leave, 1).await.error_code, 0);
    let delete = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("sg"))]);
    assert_eq!(c.call(&delete, 2).await.results[0].error_code, 0);
    broker.stop().await.expect("clean stop");

    let broker = TestBroker::with(config()).await;
    let mut c = broker.client().await;
    assert_eq!(c.call(&set, 1).await.responses[0].error_code, 0);
    assert_eq!(c.call(&join("sg", "c"), 1).await.error_code, 0);
    let r = c.call(&fetch("c", 0, id, &[], &[0]), 1).await;
    assert_eq!(acquired(&r, 0), [(0, 5, 1)], "a new group starts afresh");
    broker.stop().await.expect("clean stop");
}

#[tokio::test]
async fn share_state_survives_a_restart_in_a_data_directory() {
    let data = tempfile::tempdir().expect("tempdir");
    share_state_survives_a_restart(|| broker::BrokerConfig {
        data_dir: Some(data.path().to_path_buf()),
        ..config()
    })
    .await;
}

#[tokio::test]
async fn an_expired_lock_gives_the_records_to_another_member_on_the_manual_clock() {
    let broker = bounded(
        "start",
        broker::testing::TestBroker::with_config(broker::BrokerConfig {
            manual_clock: true,
            ..common::config()
        }),
    )
    .await
    .expect("the broker starts");
    let mut c = Client::connect(broker.addr()).await;
    let id = topic_id_of(&mut c).await;
    for m in ["a", "b"] {
        assert_eq!(c.call(&join("sg", m), 1).await.error_code, 0);
        c.call(&fetch(m, 0, id, &[], &[1]), 1).await;
    }
    produce_n(&mut c, 1, 3).await;
    let r = c.call(&fetch("a", 1, id, &[], &[]), 1).await;
    assert_eq!(acquired(&r, 1), [(0, 2, 1)]);
    broker.faults().advance_clock(29_999).await.unwrap();
    let r = c.call(&fetch("b", 1, id, &[], &[]), 1).await;
    assert!(acquired(&r, 1).is_empty(), "a's lock holds");
    broker.faults().advance_clock(1).await.unwrap();
    let r = c.call(&fetch("b", 2, id, &[], &[]), 1).await;
    assert_eq!(
        acquired(&r, 1),
        [(0, 2, 2)],
        "a's lock expired: b's, delivered twice"
    );
    // a's late acknowledgement is refused.
    let r = c.call(&fetch("a", 2, id, &[(1, 0, 2, 1)], &[]), 1).await;
    assert_eq!(part(&r, 1).acknowledge_error_code, 121);
    broker.stop().await.expect("clean stop");
}
