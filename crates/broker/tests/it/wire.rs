//! The non-group APIs through the protocol: ApiVersions, Metadata, FindCoordinator,
//! Produce, Fetch (with long polling), ListOffsets, InitProducerId.

use crate::common;

use bytes::Bytes;
use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use uuid::Uuid;

#[tokio::test]
async fn api_versions_lists_the_served_table_at_every_version() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    for version in 0..=3 {
        let r = c.call(&ApiVersionsRequest::default(), version).await;
        assert_eq!(r.error_code, 0);
        let find = |key: ApiKey| {
            r.api_keys
                .iter()
                .find(|k| k.api_key == key as i16)
                .map(|k| (k.min_version, k.max_version))
        };
        assert_eq!(
            find(ApiKey::Produce),
            Some((0, 13)),
            "Produce advertised from 0"
        );
        assert_eq!(find(ApiKey::Fetch), Some((4, 18)));
        assert_eq!(find(ApiKey::ListOffsets), Some((1, 11)));
        assert_eq!(find(ApiKey::Metadata), Some((0, 13)));
        assert_eq!(find(ApiKey::DescribeCluster), Some((0, 2)));
        assert_eq!(find(ApiKey::OffsetCommit), Some((2, 10)));
        assert_eq!(find(ApiKey::OffsetFetch), Some((1, 10)));
        assert_eq!(find(ApiKey::ConsumerGroupHeartbeat), Some((0, 1)));
        assert_eq!(find(ApiKey::ConsumerGroupDescribe), Some((0, 1)));
        assert_eq!(find(ApiKey::ApiVersions), Some((0, 4)));
        assert_eq!(find(ApiKey::JoinGroup), Some((0, 9)));
        assert_eq!(find(ApiKey::SyncGroup), Some((0, 5)));
        assert_eq!(find(ApiKey::Heartbeat), Some((0, 4)));
        assert_eq!(find(ApiKey::LeaveGroup), Some((0, 5)));
        assert_eq!(find(ApiKey::OffsetDelete), Some((0, 0)));
        assert_eq!(find(ApiKey::FindCoordinator), Some((0, 6)));
        assert_eq!(find(ApiKey::SaslHandshake), Some((0, 1)));
        assert_eq!(find(ApiKey::SaslAuthenticate), Some((0, 2)));
        assert_eq!(find(ApiKey::InitProducerId), Some((0, 5)));
        assert_eq!(find(ApiKey::AddPartitionsToTxn), Some((0, 5)));
        assert_eq!(find(ApiKey::AddOffsetsToTxn), Some((0, 4)));
        assert_eq!(find(ApiKey::EndTxn), Some((0, 5)));
        assert_eq!(find(ApiKey::TxnOffsetCommit), Some((0, 5)));
        assert_eq!(find(ApiKey::CreateDelegationToken), None);
    }
    broker.stop().await.expect("clean stop");
}

#[tokio::test]
async fn api_versions_v5_gets_unsupported_version_in_a_v0_body() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    // v4 is served (as v3: it only lets a feature's minimum version be 0, KAFKA-17011).
    let r = c.call(&ApiVersionsRequest::default(), 4).await;
    assert_eq!(r.error_code, 0);
    // v5, which no codec knows, by hand: header v2 (api key 18, version 5, correlation 7,
    // client id "ab", no tags), then two empty compact strings and no tags.
    let frame = [0, 18, 0, 5, 0, 0, 0, 7, 0, 2, b'a', b'b', 0, 1, 1, 0];
    let mut bytes = (frame.len() as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(&frame);
    c.send_raw(&bytes).await;
    // The answer is a v0 body whatever the request's version (Kafka's rule).
    let r = c.receive::<ApiVersionsRequest>(7, 0).await;
    assert_eq!(r.error_code, 35);
    assert!(r
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::ApiVersions as i16 && k.max_version == 4));
    // The connection stays usable: the client retries with a version we serve.
    let r = c.call(&ApiVersionsRequest::default(), 4).await;
    assert_eq!(r.error_code, 0);
}

fn metadata(topics: Option<&[&str]>) -> MetadataRequest {
    MetadataRequest::default().with_topics(topics.map(|names| {
        names
            .iter()
            .map(|n| {
                metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name(n)))
            })
            .collect()
    }))
}

#[tokio::test]
async fn metadata_names_this_broker_as_leader_of_every_partition() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    for version in 0..=5 {
        let request = if version == 0 {
            metadata(Some(&[]))
        } else {
            metadata(None)
        };
        let r = c.call(&request, version).await;
        assert_eq!(r.brokers.len(), 1);
        assert_eq!(r.brokers[0].host.as_str(), "127.0.0.1");
        assert_eq!(r.brokers[0].port, i32::from(broker.addr.port()));
        assert_eq!(r.topics.len(), 1, "v{version}: all topics");
        let t = &r.topics[0];
        assert_eq!(t.name.as_ref().map(|n| n.as_str()), Some("t"));
        assert_eq!(t.partitions.len(), 2);
        assert!(t
            .partitions
            .iter()
            .all(|p| p.leader_id.0 == r.brokers[0].node_id.0));
    }
    // v1+: an empty list asks for no topic.
    let r = c.call(&metadata(Some(&[])), 1).await;
    assert!(r.topics.is_empty());
    let r = c.call(&metadata(Some(&["nope", "t", "bad/name"])), 5).await;
    let codes: Vec<i16> = r.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        [3, 0, 3],
        "without auto-creation, unknown topics are unknown"
    );
}

#[tokio::test]
async fn metadata_creates_missing_topics_when_auto_creation_is_on() {
    let broker = TestBroker::with(broker::BrokerConfig {
        auto_create_topics: true,
        num_partitions: 3,
        ..config()
    })
    .await;
    let mut c = broker.client().await;
    let r = c.call(&metadata(Some(&["fresh", "bad/name"])), 5).await;
    assert_eq!(r.topics[0].error_code, 0);
    assert_eq!(r.topics[0].partitions.len(), 3, "num-partitions");
    assert_eq!(r.topics[1].error_code, 17, "INVALID_TOPIC_EXCEPTION");
    // v4+ can refuse auto-creation per request.
    let refuse = metadata(Some(&["other"])).with_allow_auto_topic_creation(false);
    assert_eq!(c.call(&refuse, 5).await.topics[0].error_code, 3);
    let r = c.call(&metadata(None), 5).await;
    let names: Vec<&str> = r
        .topics
        .iter()
        .filter_map(|t| t.name.as_deref())
        .map(|n| n.as_str())
        .collect();
    assert_eq!(names, ["fresh", "t"]);
}

#[tokio::test]
async fn find_coordinator_points_at_this_broker_for_groups_and_transactions() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    for version in 0..=3 {
        let r = c
            .call(
                &FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g")),
                version,
            )
            .await;
        assert_eq!((r.error_code, r.port), (0, i32::from(broker.addr.port())));
        assert_eq!(r.host.as_str(), "127.0.0.1");
    }
    let txn = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str("txn"))
        .with_key_type(1);
    // v0 has no key type: transactions are found from v1.
    let r = c.call(&txn.clone(), 1).await;
    assert_eq!((r.error_code, r.port), (0, i32::from(broker.addr.port())));
    assert_eq!(
        r.node_id,
        BrokerId(0),
        "this broker coordinates transactions"
    );
    let empty = txn.with_key(StrBytes::default());
    assert_eq!(c.call(&empty, 1).await.error_code, 42, "INVALID_REQUEST");
}

fn str_bytes(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A v4+ FindCoordinator for `keys` of `key_type`.
fn find_batch(key_type: i8, keys: &[&str]) -> FindCoordinatorRequest {
    FindCoordinatorRequest::default()
        .with_key_type(key_type)
        .with_coordinator_keys(keys.iter().map(|k| str_bytes(k)).collect())
}

/// One entry of a batched answer: key, error, node, host, port, whether a message came.
fn entry(c: &find_coordinator_response::Coordinator) -> (&str, i16, BrokerId, &str, i32, bool) {
    (
        c.key.as_str(),
        c.error_code,
        c.node_id,
        c.host.as_str(),
        c.port,
        c.error_message.is_some(),
    )
}

#[tokio::test]
async fn find_coordinator_v3_answers_one_key_in_the_top_level_fields() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let port = i32::from(broker.addr.port());
    for key_type in [0, 1] {
        let one = FindCoordinatorRequest::default()
            .with_key(str_bytes("k"))
            .with_key_type(key_type);
        let r = c.call(&one, 3).await;
        assert_eq!(
            (r.error_code, r.node_id, r.host.as_str(), r.port),
            (0, BrokerId(0), "127.0.0.1", port),
            "key type {key_type}"
        );
        assert!(r.coordinators.is_empty(), "v3 has no batch");
        assert_eq!(r.error_message, None);
    }
    let empty = FindCoordinatorRequest::default().with_key_type(1);
    let r = c.call(&empty, 3).await;
    assert_eq!(
        (r.error_code, r.node_id, r.host.as_str(), r.port),
        (42, BrokerId(-1), "", -1),
        "an empty transactional id: INVALID_REQUEST, no node"
    );
    assert!(r.error_message.is_some());
    // Share keys come with v6; an unknown key type is INVALID_REQUEST (Kafka).
    for key_type in [2, 3] {
        let odd = FindCoordinatorRequest::default()
            .with_key(str_bytes("g:AAAAAAAAAAAAAAAAAAAAAA:0"))
            .with_key_type(key_type);
        let r = c.call(&odd, 3).await;
        assert_eq!((r.error_code, r.node_id), (42, BrokerId(-1)), "{key_type}");
    }
    broker.stop().await.expect("clean stop");
}

#[tokio::test]
async fn find_coordinator_v4_answers_each_key_of_a_batch_on_its_own() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let port = i32::from(broker.addr.port());
    let here = |key| (key, 0, BrokerId(0), "127.0.0.1", port, false);
    for version in [4, 5] {
        let r = c.call(&find_batch(0, &["a", "b", "c"]), version).await;
        assert_eq!((r.error_code, r.node_id, r.port), (0, BrokerId(0), 0));
        let got: Vec<_> = r.coordinators.iter().map(entry).collect();
        assert_eq!(got, [here("a"), here("b"), here("c")], "v{version}");
        // An empty transactional id among others: only that key is refused.
        let r = c.call(&find_batch(1, &["t1", "", "t2"]), version).await;
        let got: Vec<_> = r.coordinators.iter().map(entry).collect();
        assert_eq!(
            got,
            [here("t1"), ("", 42, BrokerId(-1), "", -1, true), here("t2")],
            "v{version}"
        );
    }
    // No keys, no coordinators.
    let r = c.call(&find_batch(0, &[]), 4).await;
    assert!(r.coordinators.is_empty());
    // An unknown key type fails the whole request: every key INVALID_REQUEST with a message.
    let r = c.call(&find_batch(3, &["a", "b"]), 4).await;
    let got: Vec<_> = r.coordinators.iter().map(entry).collect();
    assert_eq!(
        got,
        [
            ("a", 42, BrokerId(-1), "", -1, true),
            ("b", 42, BrokerId(-1), "", -1, true)
        ]
    );
    // A share key below v6: INVALID_REQUEST for the key, no message (Kafka).
    let r = c
        .call(&find_batch(2, &["g:AAAAAAAAAAAAAAAAAAAAAA:0"]), 5)
        .await;
    let got: Vec<_> = r.coordinators.iter().map(entry).collect();
    assert_eq!(
        got,
        [(
            "g:AAAAAAAAAAAAAAAAAAAAAA:0",
            42,
            BrokerId(-1),
            "",
            -1,
            false
        )]
    );
    broker.stop().await.expect("clean stop");
}

#[tokio::test]
async fn find_coordinator_v6_serves_groups_and_transactions_and_refuses_share_keys() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let port = i32::from(broker.addr.port());
    let r = c.call(&find_batch(0, &["g1", "g2"]), 6).await;
    let got: Vec<_> = r.coordinators.iter().map(entry).collect();
    assert_eq!(
        got,
        [
            ("g1", 0, BrokerId(0), "127.0.0.1", port, false),
            ("g2", 0, BrokerId(0), "127.0.0.1", port, false)
        ]
    );
    let r = c.call(&find_batch(1, &["txn"]), 6).await;
    let got: Vec<_> = r.coordinators.iter().map(entry).collect();
    assert_eq!(got, [("txn", 0, BrokerId(0), "127.0.0.1", port, false)]);
    // No share coordinator runs here: each share key gets INVALID_REQUEST, as from a Kafka
    // broker with share groups disabled (the principal may CLUSTER_ACTION: no authorizer).
    let keys = ["g:AAAAAAAAAAAAAAAAAAAAAA:0", "g:AAAAAAAAAAAAAAAAAAAAAA:1"];
    let r = c.call(&find_batch(2, &keys), 6).await;
    let got: Vec<_> = r.coordinators.iter().map(entry).collect();
    assert_eq!(
        got,
        [
            (keys[0], 42, BrokerId(-1), "", -1, false),
            (keys[1], 42, BrokerId(-1), "", -1, false)
        ]
    );
    broker.stop().await.expect("clean stop");
}

#[tokio::test]
async fn produced_batches_come_back_with_keys_values_headers_and_timestamps_in_every_codec() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let mut next = 0;
    for (i, compression) in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ]
    .into_iter()
    .enumerate()
    {
        let records: Vec<_> = (0..3)
            .map(|r| record(i * 10 + r, 1_000 + r as i64))
            .collect();
        let version = 3 + (i as i16 * 2 % 8); // Produce v3, 5, 7, 9: old and flexible
        let (error, base) = produce(&mut c, "t", 1, batch(&records, compression), version).await;
        assert_eq!((error, base), (0, next), "{compression:?}");
        next += 3;
        let fetched = c
            .call(&fetch_request("t", 1, base), 4 + (i as i16 * 2 % 8))
            .await;
        let p = &fetched.responses[0].partitions[0];
        assert_eq!(
            (p.error_code, p.high_watermark, p.last_stable_offset),
            (0, next, next)
        );
        let got = decode_records(p);
        assert_eq!(got.len(), 3, "{compression:?}");
        for ((r, sent), n) in got.iter().zip(&records).zip(0..) {
            assert_eq!(r.offset, base + n, "offsets assigned by the broker");
            assert_eq!(
                (&r.key, &r.value, r.timestamp),
                (&sent.key, &sent.value, sent.timestamp)
            );
            assert_eq!(r.headers, sent.headers);
        }
    }
    // Offsets run on from the start of the log.
    let all = c.call(&fetch_request("t", 1, 0), 11).await;
    let offsets: Vec<i64> = decode_records(&all.responses[0].partitions[0])
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, (0..15).collect::<Vec<_>>());
}

#[tokio::test]
async fn produce_refuses_unknown_partitions_and_corrupt_batches() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let good = batch(&[record(0, 1)], Compression::None);
    assert_eq!(produce(&mut c, "nope", 0, good.clone(), 7).await.0, 3);
    assert_eq!(produce(&mut c, "t", 2, good.clone(), 7).await.0, 3);
    assert_eq!(produce(&mut c, "t", -1, good.clone(), 7).await.0, 3);
    let mut corrupt = good.to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    assert_eq!(
        produce(&mut c, "t", 0, Bytes::from(corrupt), 7).await.0,
        2,
        "CORRUPT_MESSAGE"
    );
    assert_eq!(produce(&mut c, "t", 0, Bytes::new(), 7).await.0, 2);
    // From v8 the answer says why (KIP-467).
    for version in [8, 10] {
        let r = c
            .call(&produce_request("t", 0, Bytes::new(), -1), version)
            .await;
        let p = &r.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 2);
        assert!(
            p.error_message
                .as_deref()
                .is_some_and(|m| m.contains("record set")),
            "{:?}",
            p.error_message
        );
    }
    // Nothing was appended by the refused requests.
    let r = c.call(&fetch_request("t", 0, 0), 11).await;
    assert_eq!(r.responses[0].partitions[0].high_watermark, 0);
}

#[tokio::test]
async fn produce_with_acks_zero_gets_no_answer() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let request = produce_request("t", 0, batch(&[record(0, 1)], Compression::None), 0);
    c.send(&request, 7).await;
    // The next answer on the connection is the ApiVersions one: the produce got none.
    let r = c.call(&ApiVersionsRequest::default(), 3).await;
    assert_eq!(r.error_code, 0);
    let f = c.call(&fetch_request("t", 0, 0), 11).await;
    assert_eq!(
        f.responses[0].partitions[0].high_watermark, 1,
        "but it was appended"
    );
}

/// Produces records 0 and 1 (timestamps 1 and 2) to t-0.
async fn produce_two_records(c: &mut Client) {
    let records = batch(&[record(0, 1), record(1, 2)], Compression::None);
    produce(c, "t", 0, records, 7).await;
}

#[tokio::test]
async fn fetch_reports_out_of_range_and_unknown_partitions_with_the_bounds() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    produce_two_records(&mut c).await;
    let r = c.call(&fetch_request("t", 0, 5), 11).await;
    let p = &r.responses[0].partitions[0];
    assert_eq!(
        (p.error_code, p.high_watermark, p.log_start_offset),
        (1, 2, 0)
    );
    let r = c.call(&fetch_request("nope", 0, 0), 11).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 3);
    // At the end of the log: no records, no error.
    let r = c.call(&fetch_request("t", 0, 2), 11).await;
    let p = &r.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 2));
    assert!(decode_records(p).is_empty());
    // A fetch from inside a batch returns the whole batch (clients skip what they passed).
    let r = c.call(&fetch_request("t", 0, 1), 11).await;
    let offsets: Vec<i64> = decode_records(&r.responses[0].partitions[0])
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, [0, 1]);
}

/// Partition `p`'s fetch position at `offset`, one byte at most (always one batch).
fn fetch_part(p: i32, offset: i64) -> fetch_request::FetchPartition {
    fetch_request::FetchPartition::default()
        .with_partition(p)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(1)
}

/// A fetch of topic t's `parts` in session `(id, epoch)`, one byte of response at most.
fn session_fetch(id: i32, epoch: i32, parts: Vec<fetch_request::FetchPartition>) -> FetchRequest {
    let topics = if parts.is_empty() {
        Vec::new()
    } else {
        vec![fetch_request::FetchTopic::default()
            .with_topic(topic_name("t"))
            .with_partitions(parts)]
    };
    FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1)
        .with_session_id(id)
        .with_session_epoch(epoch)
        .with_topics(topics)
}

/// The partitions an answer includes, and which of them carry records.
fn answered(r: &FetchResponse) -> (Vec<i32>, Vec<i32>) {
    let parts: Vec<&fetch_response::PartitionData> = r
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .collect();
    (
        parts.iter().map(|p| p.partition_index).collect(),
        parts
            .iter()
            .filter(|p| p.records.as_ref().is_some_and(|r| !r.is_empty()))
            .map(|p| p.partition_index)
            .collect(),
    )
}

/// KIP-227, as Kafka's `FetchSession`: a full fetch at epoch 0 opens a session; incremental
/// fetches name only what changed and are answered only what is new; a partition that
/// returned records goes to the end of the session's order, so a small `max_bytes` serves
/// every partition in turn; forgotten partitions leave; wrong ids and epochs are refused.
#[tokio::test]
async fn fetch_sessions_answer_what_changed_and_take_partitions_in_turn() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    for p in [0, 1] {
        for i in 0..3 {
            let records = batch(&[record(i, 1)], Compression::None);
            assert_eq!(produce(&mut c, "t", p, records, 7).await.0, 0);
        }
    }
    // Full fetch, epoch 0: both partitions answered, a session opened in the request's
    // order; only partition 0 (first) gets its batch within one byte.
    let r = c
        .call(
            &session_fetch(0, 0, vec![fetch_part(0, 0), fetch_part(1, 0)]),
            11,
        )
        .await;
    assert_eq!(r.error_code, 0);
    let id = r.session_id;
    assert_ne!(id, 0, "a session is opened");
    assert_eq!(answered(&r), (vec![0, 1], vec![0]));
    // Epoch 1, partition 0 moved on: read first, it returns records and goes to the end.
    let r = c
        .call(&session_fetch(id, 1, vec![fetch_part(0, 1)]), 11)
        .await;
    assert_eq!((r.error_code, r.session_id), (0, id));
    assert_eq!(
        answered(&r),
        (vec![0], vec![0]),
        "partition 1 has nothing new"
    );
    // Epoch 2: partition 1 is read first now and gets the byte.
    let r = c
        .call(&session_fetch(id, 2, vec![fetch_part(0, 2)]), 11)
        .await;
    assert_eq!(answered(&r), (vec![1], vec![1]), "partition 1's turn");
    // Epoch 3: then partition 0 again.
    let r = c
        .call(&session_fetch(id, 3, vec![fetch_part(1, 1)]), 11)
        .await;
    assert_eq!(answered(&r), (vec![0], vec![0]), "partition 0's turn");
    // Epoch 4, nothing moved: partition 1 is first, and still has records at its position.
    let r = c.call(&session_fetch(id, 4, vec![]), 11).await;
    assert_eq!(answered(&r), (vec![1], vec![1]));
    // Epoch 5: partition 0 forgotten, partition 1 at its end: nothing new, an empty answer.
    let forget = session_fetch(id, 5, vec![fetch_part(1, 3)]).with_forgotten_topics_data(vec![
        fetch_request::ForgottenTopic::default()
            .with_topic(topic_name("t"))
            .with_partitions(vec![0]),
    ]);
    let r = c.call(&forget, 11).await;
    assert_eq!(
        (r.error_code, r.session_id, answered(&r).0),
        (0, id, vec![])
    );
    // New records in the forgotten partition are not answered; in partition 1 they are.
    produce(&mut c, "t", 0, batch(&[record(9, 1)], Compression::None), 7).await;
    let r = c.call(&session_fetch(id, 6, vec![]), 11).await;
    assert_eq!(answered(&r).0, Vec::<i32>::new(), "partition 0 forgotten");
    produce(&mut c, "t", 1, batch(&[record(9, 1)], Compression::None), 7).await;
    let r = c.call(&session_fetch(id, 7, vec![]), 11).await;
    assert_eq!(answered(&r), (vec![1], vec![1]));
    // A wrong epoch, an unknown id, a session opened by name continued by topic id.
    let wrong = c.call(&session_fetch(id, 9, vec![]), 11).await;
    assert_eq!(
        (wrong.error_code, wrong.session_id),
        (71, 0),
        "INVALID_FETCH_SESSION_EPOCH"
    );
    let unknown = c.call(&session_fetch(id ^ 0x5a5a, 8, vec![]), 11).await;
    assert_eq!(unknown.error_code, 70, "FETCH_SESSION_ID_NOT_FOUND");
    let by_id = c.call(&session_fetch(id, 8, vec![]), 13).await;
    assert_eq!(by_id.error_code, 106, "FETCH_SESSION_TOPIC_ID_ERROR");
    let r = c.call(&session_fetch(id, 8, vec![]), 11).await;
    assert_eq!(
        (r.error_code, r.session_id),
        (0, id),
        "refusals leave the session as it was"
    );
    // Epoch -1 closes the session and is answered without one; the session is gone.
    let last = c
        .call(&session_fetch(id, -1, vec![fetch_part(1, 0)]), 11)
        .await;
    assert_eq!((last.error_code, last.session_id), (0, 0));
    assert_eq!(
        c.call(&session_fetch(id, 7, vec![]), 11).await.error_code,
        70
    );
    // A fetch without sessions (id 0, epoch -1) opens none.
    let plain = c
        .call(&session_fetch(0, -1, vec![fetch_part(1, 0)]), 11)
        .await;
    assert_eq!((plain.error_code, plain.session_id), (0, 0));
}

#[tokio::test]
async fn a_long_poll_fetch_is_answered_when_records_arrive() {
    let broker = TestBroker::start().await;
    let mut consumer = broker.client().await;
    let mut producer = broker.client().await;
    // max_wait is far beyond the test's bound: only an append can answer it in time.
    let waiting = fetch_request("t", 1, 0).with_max_wait_ms(600_000);
    let correlation = consumer.send(&waiting, 11).await;
    let (error, _) = produce(
        &mut producer,
        "t",
        1,
        batch(&[record(0, 5)], Compression::None),
        7,
    )
    .await;
    assert_eq!(error, 0);
    let r = consumer.receive::<FetchRequest>(correlation, 11).await;
    let got = decode_records(&r.responses[0].partitions[0]);
    assert_eq!(got.len(), 1, "woken by the append");
}

#[tokio::test]
async fn a_long_poll_fetch_with_nothing_to_read_answers_empty_after_max_wait() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let r = c
        .call(&fetch_request("t", 0, 0).with_max_wait_ms(50), 11)
        .await;
    let p = &r.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 0));
    assert!(decode_records(p).is_empty());
}

#[tokio::test]
async fn fetch_honours_the_byte_limits_but_always_returns_one_batch() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    for i in 0..3 {
        produce(&mut c, "t", 0, batch(&[record(i, 1)], Compression::None), 7).await;
    }
    let tiny = fetch_request("t", 0, 0).with_max_bytes(1);
    let r = c.call(&tiny, 11).await;
    assert_eq!(
        decode_records(&r.responses[0].partitions[0]).len(),
        1,
        "KIP-74: one batch"
    );
    let r = c.call(&fetch_request("t", 0, 0), 11).await;
    assert_eq!(decode_records(&r.responses[0].partitions[0]).len(), 3);
}

#[tokio::test]
async fn fetch_names_topics_by_id_from_v13() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    produce_two_records(&mut c).await;
    let metadata = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name("t"))),
    ]));
    let id = c.call(&metadata, 12).await.topics[0].topic_id;
    assert!(!id.is_nil());
    // v17 (a follower's directory id) and v18 (a follower's high watermark) add only what
    // followers send: a consumer is served as at v16.
    for version in 4..=18 {
        let mut request = fetch_request("t", 0, 0);
        if version >= 13 {
            request.topics[0].topic = Default::default();
            request.topics[0].topic_id = id;
        }
        let r = c.call(&request, version).await;
        let topic = &r.responses[0];
        if version >= 13 {
            assert_eq!(topic.topic_id, id, "v{version} answers by id");
        } else {
            assert_eq!(topic.topic.0.as_str(), "t", "v{version} answers by name");
        }
        let p = &topic.partitions[0];
        assert_eq!((p.error_code, p.high_watermark), (0, 2), "v{version}");
        assert_eq!(decode_records(p).len(), 2, "v{version}");
    }
    // An id no topic has: UNKNOWN_TOPIC_ID, answered at once (no long poll).
    let mut unknown = fetch_request("t", 0, 0).with_max_wait_ms(60_000);
    unknown.topics[0].topic = Default::default();
    unknown.topics[0].topic_id = Uuid::from_u128(12345);
    let r = c.call(&unknown, 13).await;
    assert_eq!(r.responses[0].topic_id, Uuid::from_u128(12345));
    assert_eq!(r.responses[0].partitions[0].error_code, 100);
}

#[tokio::test]
async fn produce_names_topics_by_id_from_v13() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let metadata = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name("t"))),
    ]));
    let id = c.call(&metadata, 12).await.topics[0].topic_id;
    assert!(!id.is_nil());
    // v11 and v12 are v10 for a producer outside transaction version 2; v13 names by id.
    for (i, version) in (3..=13).enumerate() {
        let records = batch(&[record(0, 1)], Compression::None);
        let mut request = produce_request("t", 0, records, -1);
        if version >= 13 {
            request.topic_data[0].name = Default::default();
            request.topic_data[0].topic_id = id;
        }
        let r = c.call(&request, version).await;
        let topic = &r.responses[0];
        if version >= 13 {
            assert_eq!(topic.topic_id, id, "v{version} answers by id");
            assert_eq!(topic.name.0.as_str(), "", "v{version}");
        } else {
            assert_eq!(topic.name.0.as_str(), "t", "v{version} answers by name");
        }
        let p = &topic.partition_responses[0];
        assert_eq!((p.error_code, p.base_offset), (0, i as i64), "v{version}");
    }
    // An id no topic has: UNKNOWN_TOPIC_ID for each partition, and nothing appended.
    let mut unknown = produce_request("t", 0, batch(&[record(0, 1)], Compression::None), -1);
    unknown.topic_data[0].name = Default::default();
    unknown.topic_data[0].topic_id = Uuid::from_u128(12345);
    let r = c.call(&unknown, 13).await;
    assert_eq!(r.responses[0].topic_id, Uuid::from_u128(12345));
    let p = &r.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (100, -1));
    let f = c.call(&fetch_request("t", 0, 0), 11).await;
    assert_eq!(f.responses[0].partitions[0].high_watermark, 11);
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
async fn list_offsets_gives_earliest_latest_and_by_timestamp() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let records = [record(0, 100), record(1, 300), record(2, 200)];
    produce(&mut c, "t", 0, batch(&records, Compression::Gzip), 7).await;
    produce(
        &mut c,
        "t",
        0,
        batch(&[record(3, 300)], Compression::None),
        7,
    )
    .await;
    for version in 1..=10 {
        let at = |r: &ListOffsetsResponse| {
            let p = &r.topics[0].partitions[0];
            (p.error_code, p.offset, p.timestamp)
        };
        assert_eq!(at(&c.call(&list_offsets(0, -2), version).await), (0, 0, -1));
        assert_eq!(at(&c.call(&list_offsets(0, -1), version).await), (0, 4, -1));
        assert_eq!(
            at(&c.call(&list_offsets(0, 250), version).await),
            (0, 1, 300)
        );
        assert_eq!(
            at(&c.call(&list_offsets(0, 301), version).await),
            (0, -1, -1)
        );
        // KIP-734's MAX_TIMESTAMP: the first record with the largest timestamp, inside its
        // batch (not the batch's last offset, nor the later batch reaching the same time).
        assert_eq!(
            at(&c.call(&list_offsets(0, -3), version).await),
            (0, 1, 300),
            "v{version}"
        );
        // EARLIEST_LOCAL is the log start; LATEST_TIERED finds nothing, nothing is tiered.
        assert_eq!(at(&c.call(&list_offsets(0, -4), version).await), (0, 0, -1));
        assert_eq!(
            at(&c.call(&list_offsets(0, -5), version).await),
            (0, -1, -1)
        );
        assert_eq!(at(&c.call(&list_offsets(5, -1), version).await).0, 3);
        assert_eq!(at(&c.call(&list_offsets(5, -3), version).await).0, 3);
        if version >= 4 {
            let r = c.call(&list_offsets(0, -3), version).await;
            assert_eq!(r.topics[0].partitions[0].leader_epoch, -1, "as Metadata's");
        }
    }
}

#[tokio::test]
async fn init_producer_id_hands_out_distinct_ids_and_serves_transactional_ids() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let idempotent = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000);
    let a = c.call(&idempotent, 0).await;
    let b = c.call(&idempotent, 1).await;
    assert_eq!((a.error_code, b.error_code), (0, 0));
    assert_ne!(a.producer_id, b.producer_id);
    assert!(a.producer_id.0 >= 0);
    let txn =
        idempotent.with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("x"))));
    let first = c.call(&txn, 1).await;
    assert_eq!((first.error_code, first.producer_epoch), (0, 0));
    assert!(first.producer_id != a.producer_id && first.producer_id != b.producer_id);
    let again = c.call(&txn, 1).await;
    assert_eq!(
        (again.producer_id, again.producer_epoch),
        (first.producer_id, 1)
    );
}

#[tokio::test]
async fn the_test_kit_runs_several_brokers_in_one_process_each_with_its_own_state() {
    use broker::testing::TestBroker;
    let a = TestBroker::start().await.expect("a starts");
    let b = TestBroker::start().await.expect("b starts");
    assert_ne!(a.addr(), b.addr());
    assert_eq!(a.bootstrap(), a.addr().to_string());
    assert_eq!(a.listeners().len(), 1);
    // A topic made on first use exists on that broker only.
    let mut to_a = Client::connect(a.addr()).await;
    let mut to_b = Client::connect(b.addr()).await;
    // As a client does: Metadata first (which creates it), then Produce.
    let created = to_a.call(&metadata(Some(&["fresh"])), 12).await;
    assert_eq!(created.topics[0].error_code, 0);
    let one = batch(&[record(0, 1)], Compression::None);
    assert_eq!(produce(&mut to_a, "fresh", 0, one, 9).await, (0, 0));
    let request = metadata(Some(&["fresh"])).with_allow_auto_topic_creation(false);
    let r = to_b.call(&request, 12).await;
    assert_eq!(r.topics[0].error_code, 3, "not on b");
    // Dropped, a stops by itself; b goes on serving.
    let a_addr = a.addr();
    drop(a);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while tokio::net::TcpStream::connect(a_addr).await.is_ok() {
        assert!(tokio::time::Instant::now() < deadline, "a still listens");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let r = to_b.call(&ApiVersionsRequest::default(), 3).await;
    assert_eq!(r.error_code, 0);
    b.stop().await.expect("b stops cleanly");
}
