//! Idempotent and transactional producers over the wire, with hand-built v2 batches: the
//! duplicate and sequence rules, open transactions holding back the last stable offset for
//! read_committed Fetch and ListOffsets, DescribeProducers, and the producer state rebuilt
//! from the records after a restart on the same data directory.
//!
//! Markers (commit, abort) come from the transaction coordinator (EndTxn), which writes them
//! through `Producers::try_write_marker`: see `transactions.rs`; the aborted-transactions
//! index they feed is also tested at the unit level (`producers::tests`).

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record};

use crate::common::*;

const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;

/// Now, in ms since the epoch: producers' batches carry wall-clock timestamps, and the broker
/// forgets producers whose last batch is a day old.
pub(crate) fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

/// A batch of `count` records of producer `pid` at `epoch` from `sequence`.
pub(crate) fn producer_batch(
    pid: i64,
    epoch: i16,
    sequence: i32,
    count: usize,
    txn: bool,
) -> Bytes {
    producer_batch_at(pid, epoch, sequence, count, txn, now_ms())
}

fn producer_batch_at(
    pid: i64,
    epoch: i16,
    sequence: i32,
    count: usize,
    txn: bool,
    timestamp: i64,
) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| {
            let mut r = record(i, timestamp);
            r.producer_id = pid;
            r.producer_epoch = epoch;
            r.sequence = sequence + i as i32;
            r.transactional = txn;
            r
        })
        .collect();
    batch(&records, Compression::None)
}

/// Produces with `transactional_id` and returns (error code, base offset).
pub(crate) async fn produce_as(
    c: &mut Client,
    transactional_id: Option<&'static str>,
    partition: i32,
    records: Bytes,
) -> (i16, i64) {
    let request = produce_request("t", partition, records, -1).with_transactional_id(
        transactional_id.map(|id| TransactionalId(StrBytes::from_static_str(id))),
    );
    let response = c.call(&request, 7).await;
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// A fetch of partition 0 from `offset` at `isolation`.
pub(crate) async fn fetch_at(
    c: &mut Client,
    offset: i64,
    isolation: i8,
) -> fetch_response::PartitionData {
    let request = fetch_request("t", 0, offset).with_isolation_level(isolation);
    let response = c.call(&request, 11).await;
    response.responses[0].partitions[0].clone()
}

fn latest(isolation: i8) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation)
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(topic_name("t"))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1),
            ])])
}

async fn latest_offset(c: &mut Client, isolation: i8) -> i64 {
    let r = c.call(&latest(isolation), 3).await;
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

#[tokio::test]
async fn a_retried_batch_gets_its_first_offset_and_is_stored_once() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let first = producer_batch(1000, 0, 0, 2, false);
    assert_eq!(produce(&mut c, "t", 0, first.clone(), 7).await, (0, 0));
    assert_eq!(
        produce(&mut c, "t", 0, producer_batch(1000, 0, 2, 1, false), 7).await,
        (0, 2)
    );
    // The retry of the first batch: the original offset, no error, nothing appended.
    assert_eq!(produce(&mut c, "t", 0, first, 7).await, (0, 0));
    let p = fetch_at(&mut c, 0, 0).await;
    assert_eq!(p.high_watermark, 3);
    assert_eq!(decode_records(&p).len(), 3, "the log holds the batch once");
}

#[tokio::test]
async fn a_sequence_gap_or_an_old_epoch_is_refused_and_appends_nothing() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    assert_eq!(
        produce(&mut c, "t", 0, producer_batch(2000, 1, 0, 2, false), 7).await,
        (0, 0)
    );
    let gap = produce(&mut c, "t", 0, producer_batch(2000, 1, 3, 1, false), 7).await;
    assert_eq!(gap.0, OUT_OF_ORDER_SEQUENCE_NUMBER);
    let old = produce(&mut c, "t", 0, producer_batch(2000, 0, 2, 1, false), 7).await;
    assert_eq!(old.0, INVALID_PRODUCER_EPOCH);
    let new_epoch_not_zero = produce(&mut c, "t", 0, producer_batch(2000, 2, 2, 1, false), 7).await;
    assert_eq!(new_epoch_not_zero.0, OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_eq!(
        fetch_at(&mut c, 0, 0).await.high_watermark,
        2,
        "nothing appended"
    );
    // The next in sequence goes on.
    assert_eq!(
        produce(&mut c, "t", 0, producer_batch(2000, 1, 2, 1, false), 7).await,
        (0, 2)
    );
    // The other partition knows nothing of this producer.
    assert_eq!(
        produce(&mut c, "t", 1, producer_batch(2000, 1, 0, 1, false), 7).await,
        (0, 0)
    );
}

#[tokio::test]
async fn transactional_batches_need_a_transactional_id() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let txn = producer_batch(3000, 0, 0, 1, true);
    let refused = produce_as(&mut c, None, 0, txn.clone()).await;
    assert_eq!(refused.0, TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    assert_eq!(fetch_at(&mut c, 0, 0).await.high_watermark, 0);
    assert_eq!(produce_as(&mut c, Some("tx"), 0, txn).await, (0, 0));
    // Inside its open transaction the producer may not write plain batches.
    let plain = produce_as(&mut c, Some("tx"), 0, producer_batch(3000, 0, 1, 1, false)).await;
    assert_eq!(plain.0, INVALID_TXN_STATE);
    // Clients may not write control batches; one record set holds one producer batch.
    let mut marker = record(0, now_ms());
    (marker.producer_id, marker.producer_epoch, marker.sequence) = (3000, 0, 1);
    (marker.transactional, marker.control) = (true, true);
    let control = produce_as(&mut c, Some("tx"), 0, batch(&[marker], Compression::None)).await;
    assert_eq!(
        control.0, 2,
        "CORRUPT_MESSAGE (INVALID_RECORD from Produce v8)"
    );
    let mut two = producer_batch(3000, 0, 1, 1, true).to_vec();
    two.extend_from_slice(&producer_batch(3000, 0, 2, 1, true));
    let two = produce_as(&mut c, Some("tx"), 0, Bytes::from(two)).await;
    assert_eq!(two.0, 2, "two batches in one record set");
    assert_eq!(
        fetch_at(&mut c, 0, 0).await.high_watermark,
        1,
        "only the first"
    );
}

#[tokio::test]
async fn read_committed_stops_at_the_first_open_transaction() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    // Offsets 0-1 plain, 2 opens producer 4000's transaction, 3-4 plain again.
    assert_eq!(
        produce(&mut c, "t", 0, producer_batch(4001, 0, 0, 2, false), 7).await,
        (0, 0)
    );
    assert_eq!(
        produce_as(&mut c, Some("tx"), 0, producer_batch(4000, 0, 0, 1, true)).await,
        (0, 2)
    );
    assert_eq!(
        produce(
            &mut c,
            "t",
            0,
            batch(&[record(0, 5), record(1, 5)], Compression::None),
            7
        )
        .await,
        (0, 3)
    );

    let committed = fetch_at(&mut c, 0, 1).await;
    assert_eq!(committed.high_watermark, 5);
    assert_eq!(committed.last_stable_offset, 2);
    assert_eq!(committed.aborted_transactions, Some(Vec::new()));
    let offsets: Vec<i64> = decode_records(&committed)
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, [0, 1], "nothing at or past the open transaction");
    let past = fetch_at(&mut c, 2, 1).await;
    assert!(decode_records(&past).is_empty(), "{past:?}");

    let uncommitted = fetch_at(&mut c, 0, 0).await;
    assert_eq!(uncommitted.last_stable_offset, 2, "reported at both levels");
    assert_eq!(uncommitted.aborted_transactions, None);
    assert_eq!(
        decode_records(&uncommitted).len(),
        5,
        "read_uncommitted sees everything"
    );

    assert_eq!(
        latest_offset(&mut c, 1).await,
        2,
        "read_committed LATEST is the LSO"
    );
    assert_eq!(
        latest_offset(&mut c, 0).await,
        5,
        "read_uncommitted LATEST is the HW"
    );
}

/// A ListOffsets of partition 0 at `timestamp` and `isolation`: (error, offset, timestamp).
async fn offset_at(c: &mut Client, timestamp: i64, isolation: i8) -> (i16, i64, i64) {
    let mut request = latest(isolation);
    request.topics[0].partitions[0].timestamp = timestamp;
    let r = c.call(&request, 7).await;
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset, p.timestamp)
}

#[tokio::test]
async fn read_committed_lookups_by_timestamp_do_not_reach_into_an_open_transaction() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let plain = batch(&[record(0, 1_000)], Compression::None);
    assert_eq!(produce(&mut c, "t", 0, plain, 7).await, (0, 0));
    let open = producer_batch_at(3000, 0, 0, 2, true, 5_000);
    assert_eq!(produce_as(&mut c, Some("tx"), 0, open).await, (0, 1));
    // read_uncommitted sees the open transaction's records; read_committed stops at the LSO
    // (1), so the largest timestamp it may see is none of theirs, and Kafka answers -1.
    assert_eq!(offset_at(&mut c, -3, 0).await, (0, 1, 5_000));
    assert_eq!(offset_at(&mut c, -3, 1).await, (0, -1, -1));
    assert_eq!(offset_at(&mut c, 2_000, 0).await, (0, 1, 5_000));
    assert_eq!(offset_at(&mut c, 2_000, 1).await, (0, -1, -1));
    assert_eq!(
        offset_at(&mut c, 0, 1).await,
        (0, 0, 1_000),
        "below the LSO"
    );
}

#[tokio::test]
async fn a_read_committed_long_poll_is_not_answered_by_uncommitted_records() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let mut producer = broker.client().await;
    assert_eq!(
        produce_as(
            &mut producer,
            Some("tx"),
            0,
            producer_batch(5000, 0, 0, 1, true)
        )
        .await,
        (0, 0)
    );
    let request = fetch_request("t", 0, 0)
        .with_isolation_level(1)
        .with_max_wait_ms(300);
    let correlation = c.send(&request, 11).await;
    // More of the open transaction arrives while the fetch waits: it stays unanswered by it.
    assert_eq!(
        produce_as(
            &mut producer,
            Some("tx"),
            0,
            producer_batch(5000, 0, 1, 1, true)
        )
        .await,
        (0, 1)
    );
    let response = c.receive::<FetchRequest>(correlation, 11).await;
    let p = &response.responses[0].partitions[0];
    assert_eq!(p.high_watermark, 2);
    assert_eq!(p.last_stable_offset, 0);
    assert!(
        decode_records(p).is_empty(),
        "served nothing uncommitted: {p:?}"
    );
}

#[tokio::test]
async fn describe_producers_lists_each_partitions_producers() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let at = now_ms();
    let first = producer_batch_at(6000, 3, 0, 4, false, at);
    assert_eq!(produce(&mut c, "t", 0, first, 7).await, (0, 0));
    assert_eq!(
        produce_as(&mut c, Some("tx"), 0, producer_batch(6001, 0, 0, 1, true)).await,
        (0, 4)
    );
    let request = DescribeProducersRequest::default().with_topics(vec![
        describe_producers_request::TopicRequest::default()
            .with_name(topic_name("t"))
            .with_partition_indexes(vec![0, 1, 9]),
    ]);
    let response = c.call(&request, 0).await;
    let partitions = &response.topics[0].partitions;
    let producers: Vec<(i64, i32, i32, i64)> = partitions[0]
        .active_producers
        .iter()
        .map(|p| {
            (
                p.producer_id.0,
                p.producer_epoch,
                p.last_sequence,
                p.current_txn_start_offset,
            )
        })
        .collect();
    assert_eq!(producers, [(6000, 3, 3, -1), (6001, 0, 0, 4)]);
    assert_eq!(partitions[0].active_producers[0].last_timestamp, at);
    assert_eq!(
        (
            partitions[1].error_code,
            partitions[1].active_producers.len()
        ),
        (0, 0)
    );
    assert_eq!(partitions[2].error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    // ApiVersions advertises it.
    let versions = c.call(&ApiVersionsRequest::default(), 3).await;
    let entry = versions
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::DescribeProducers as i16)
        .map(|k| (k.min_version, k.max_version));
    assert_eq!(entry, Some((0, 0)));
}

#[tokio::test]
async fn producer_state_is_rebuilt_from_the_records_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    producer_state_survives_a_restart(|| broker::BrokerConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..config()
    })
    .await;
}

/// A broker of `with_dir()`'s config remembers, after a restart on the same state, a
/// retried batch as a duplicate, the producer's sequence, and an open transaction (the
/// last stable offset): for the data directory here, for PostgreSQL in `postgres.rs`.
pub(crate) async fn producer_state_survives_a_restart(with_dir: impl Fn() -> broker::BrokerConfig) {
    let retried = producer_batch(7000, 0, 0, 2, false);
    {
        let broker = TestBroker::with(with_dir()).await;
        let mut c = broker.client().await;
        assert_eq!(produce(&mut c, "t", 0, retried.clone(), 7).await, (0, 0));
        assert_eq!(
            produce_as(&mut c, Some("tx"), 0, producer_batch(7001, 0, 0, 1, true)).await,
            (0, 2)
        );
        broker.stop().await.unwrap();
    }
    let broker = TestBroker::with(with_dir()).await;
    let mut c = broker.client().await;
    assert_eq!(
        produce(&mut c, "t", 0, retried, 7).await,
        (0, 0),
        "still a duplicate"
    );
    let gap = produce(&mut c, "t", 0, producer_batch(7000, 0, 5, 1, false), 7).await;
    assert_eq!(
        gap.0, OUT_OF_ORDER_SEQUENCE_NUMBER,
        "the sequence is remembered"
    );
    let p = fetch_at(&mut c, 0, 1).await;
    assert_eq!(
        (p.high_watermark, p.last_stable_offset),
        (3, 2),
        "the open transaction too"
    );
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn concurrent_retries_of_one_batch_are_appended_once() {
    let broker = TestBroker::start().await;
    let the_batch = producer_batch(8000, 0, 0, 3, false);
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let mut c = broker.client().await;
        let b = the_batch.clone();
        tasks.push(tokio::spawn(
            async move { produce(&mut c, "t", 0, b, 7).await },
        ));
    }
    for task in tasks {
        assert_eq!(bounded("produce", task).await.unwrap(), (0, 0));
    }
    let mut c = broker.client().await;
    assert_eq!(
        fetch_at(&mut c, 0, 0).await.high_watermark,
        3,
        "appended once"
    );
}
