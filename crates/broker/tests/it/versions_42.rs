//! Kafka 4.2's stable versions (issue 48 item 1): OffsetCommit v10 and OffsetFetch v10 name
//! topics by id (KIP-848), ListOffsets v11 adds EARLIEST_PENDING_UPLOAD (−6, KIP-1023).

use crate::common;

use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use uuid::Uuid;

const UNKNOWN_TOPIC_ID: i16 = 100;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// Topic `name`'s id, as Metadata v12 reports it.
async fn topic_id(c: &mut Client, name: &str) -> Uuid {
    let request = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name(name))),
    ]));
    let r = c.call(&request, 12).await;
    assert_eq!(r.topics[0].error_code, 0);
    assert!(!r.topics[0].topic_id.is_nil());
    r.topics[0].topic_id
}

/// A commit outside any generation of group `group`: each (topic id, partition, offset)
/// named by id only, as v10 sends it.
fn commit_by_id(group: &str, offsets: &[(Uuid, &[(i32, i64)])]) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(
            offsets
                .iter()
                .map(|(id, parts)| {
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_topic_id(*id)
                        .with_partitions(
                            parts
                                .iter()
                                .map(|(p, o)| {
                                    offset_commit_request::OffsetCommitRequestPartition::default()
                                        .with_partition_index(*p)
                                        .with_committed_offset(*o)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

/// OffsetFetch v8+ of one group: each topic by id (v10) or by name (v8–9); `None`: all.
fn fetch_group(
    group: &str,
    topics: Option<Vec<offset_fetch_request::OffsetFetchRequestTopics>>,
) -> OffsetFetchRequest {
    OffsetFetchRequest::default().with_groups(vec![
        offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(topics),
    ])
}

fn by_id(id: Uuid, partitions: &[i32]) -> offset_fetch_request::OffsetFetchRequestTopics {
    offset_fetch_request::OffsetFetchRequestTopics::default()
        .with_topic_id(id)
        .with_partition_indexes(partitions.to_vec())
}

fn by_name(name: &str, partitions: &[i32]) -> offset_fetch_request::OffsetFetchRequestTopics {
    offset_fetch_request::OffsetFetchRequestTopics::default()
        .with_name(topic_name(name))
        .with_partition_indexes(partitions.to_vec())
}

/// Per answered topic of the one group: (name, id, [(partition, offset, error)]).
type Answered = Vec<(String, Uuid, Vec<(i32, i64, i16)>)>;

fn answered(r: &OffsetFetchResponse) -> Answered {
    assert_eq!(r.groups.len(), 1);
    assert_eq!(r.groups[0].error_code, 0);
    r.groups[0]
        .topics
        .iter()
        .map(|t| {
            let parts = t
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.committed_offset, p.error_code))
                .collect();
            (t.name.0.to_string(), t.topic_id, parts)
        })
        .collect()
}

#[tokio::test]
async fn api_versions_lists_kafka_4_2_ranges() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let r = c.call(&ApiVersionsRequest::default(), 3).await;
    assert_eq!(r.error_code, 0);
    let find = |key: ApiKey| {
        r.api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| (k.min_version, k.max_version))
    };
    assert_eq!(find(ApiKey::OffsetCommit), Some((2, 10)));
    assert_eq!(find(ApiKey::OffsetFetch), Some((1, 10)));
    assert_eq!(find(ApiKey::ListOffsets), Some((1, 11)));
}

#[tokio::test]
async fn offset_commit_v10_by_topic_id_reads_back_by_id_and_by_name() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let id = topic_id(&mut c, "t").await;

    let r = c
        .call(&commit_by_id("g", &[(id, &[(0, 7), (1, 9)])]), 10)
        .await;
    assert_eq!(r.topics.len(), 1);
    assert_eq!(r.topics[0].topic_id, id, "v10 answers by id");
    assert_eq!(r.topics[0].name.0.as_str(), "", "and without the name");
    assert_eq!(commit_codes(&r), vec![0, 0]);

    // OffsetFetch v10 by id reads it back, answered by id.
    let r = c
        .call(&fetch_group("g", Some(vec![by_id(id, &[0, 1])])), 10)
        .await;
    assert_eq!(
        answered(&r),
        vec![(String::new(), id, vec![(0, 7, 0), (1, 9, 0)])]
    );
    // v10 asking for every offset: by id too.
    let r = c.call(&fetch_group("g", None), 10).await;
    assert_eq!(
        answered(&r),
        vec![(String::new(), id, vec![(0, 7, 0), (1, 9, 0)])]
    );
    // v9 by name sees the same offsets, answered by name.
    let r = c
        .call(&fetch_group("g", Some(vec![by_name("t", &[0, 1])])), 9)
        .await;
    assert_eq!(
        answered(&r),
        vec![("t".to_string(), Uuid::nil(), vec![(0, 7, 0), (1, 9, 0)])]
    );
    // And the other way round: a v9 commit by name, read by id at v10.
    let r = c.call(&commit("g", "", -1, &[("t", 1, 11)]), 9).await;
    assert_eq!(commit_codes(&r), vec![0]);
    assert_eq!(r.topics[0].name.0.as_str(), "t", "v9 answers by name");
    let r = c
        .call(&fetch_group("g", Some(vec![by_id(id, &[1])])), 10)
        .await;
    assert_eq!(answered(&r), vec![(String::new(), id, vec![(1, 11, 0)])]);
    // The one-group form (v1–7) sees it as well.
    assert_eq!(
        fetched(&c.call(&offset_fetch("g", &[0, 1]), 7).await),
        [7, 11]
    );
}

#[tokio::test]
async fn an_unknown_topic_id_gets_unknown_topic_id_per_partition() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let id = topic_id(&mut c, "t").await;
    let unknown = Uuid::from_u128(0x4242);

    // OffsetCommit v10: the unknown id's partitions UNKNOWN_TOPIC_ID, its id echoed; the
    // known topic of the same request is committed.
    let request = commit_by_id("g", &[(unknown, &[(0, 1), (3, 2)]), (id, &[(0, 5)])]);
    let r = c.call(&request, 10).await;
    assert_eq!(r.topics.len(), 2);
    assert_eq!(r.topics[0].topic_id, unknown);
    assert_eq!(r.topics[1].topic_id, id);
    let partitions: Vec<(i32, i16)> = r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect();
    assert_eq!(
        partitions,
        vec![(0, UNKNOWN_TOPIC_ID), (3, UNKNOWN_TOPIC_ID)]
    );
    assert_eq!(r.topics[1].partitions[0].error_code, 0);
    // A request of unknown ids only commits nothing and still answers each partition.
    let r = c
        .call(&commit_by_id("g", &[(unknown, &[(1, 1)])]), 10)
        .await;
    assert_eq!(commit_codes(&r), vec![UNKNOWN_TOPIC_ID]);

    // OffsetFetch v10: the same, offset −1, beside the known topic's answer.
    let r = c
        .call(
            &fetch_group("g", Some(vec![by_id(unknown, &[0, 1]), by_id(id, &[0])])),
            10,
        )
        .await;
    assert_eq!(
        answered(&r),
        vec![
            (
                String::new(),
                unknown,
                vec![(0, -1, UNKNOWN_TOPIC_ID), (1, -1, UNKNOWN_TOPIC_ID)]
            ),
            (String::new(), id, vec![(0, 5, 0)]),
        ]
    );
}

fn list_offsets(partition: i32, timestamp: i64) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(topic_name("t"))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(timestamp),
            ])])
}

#[tokio::test]
async fn list_offsets_v11_answers_earliest_pending_upload_as_kafka_without_tiered_storage() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let records = [record(0, 100), record(1, 300), record(2, 200)];
    let (code, _) = produce(&mut c, "t", 0, batch(&records, Compression::None), 7).await;
    assert_eq!(code, 0);
    let at = |r: &ListOffsetsResponse| {
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.offset, p.timestamp, p.leader_epoch)
    };
    // −6, EARLIEST_PENDING_UPLOAD: nothing is tiered, so nothing is pending upload: offset
    // −1, timestamp −1, as Kafka's UnifiedLog answers for a log without remote storage.
    assert_eq!(at(&c.call(&list_offsets(0, -6), 11).await), (0, -1, -1, -1));
    // A partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION, as for −5.
    assert_eq!(at(&c.call(&list_offsets(5, -6), 11).await).0, 3);
    // Below v11 the sentinel is not part of the protocol: UNSUPPORTED_VERSION.
    for version in 1..=10 {
        assert_eq!(
            at(&c.call(&list_offsets(0, -6), version).await),
            (35, -1, -1, -1),
            "v{version}"
        );
    }
    // v11 answers everything else as v10.
    for timestamp in [-2, -1, -3, -4, -5, 250, 301] {
        let v10 = at(&c.call(&list_offsets(0, timestamp), 10).await);
        let v11 = at(&c.call(&list_offsets(0, timestamp), 11).await);
        assert_eq!(v11, v10, "timestamp {timestamp}");
    }
    assert_eq!(at(&c.call(&list_offsets(0, -2), 11).await), (0, 0, -1, -1));
    assert_eq!(at(&c.call(&list_offsets(0, -1), 11).await), (0, 3, -1, -1));
}
