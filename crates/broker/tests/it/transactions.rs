//! The transaction coordinator over the wire: InitProducerId with a transactional id,
//! AddPartitionsToTxn, transactional Produce, AddOffsetsToTxn, TxnOffsetCommit, EndTxn,
//! read_committed Fetch and OffsetFetch after commit and abort, fencing by a second
//! instance and by the timeout, DescribeTransactions and ListTransactions.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use crate::common::*;
use crate::idempotence::{fetch_at, produce_as, producer_batch};

const INVALID_PRODUCER_EPOCH: i16 = 47;
const CONCURRENT_TRANSACTIONS: i16 = 51;
const UNSTABLE_OFFSET_COMMIT: i16 = 88;
const PRODUCER_FENCED: i16 = 90;

pub(crate) fn tid(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_string()))
}

async fn init_as(c: &mut Client, id: &str, timeout_ms: i32) -> InitProducerIdResponse {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(tid(id)))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    c.call(&request, 4).await
}

pub(crate) async fn init(c: &mut Client, id: &str) -> (i64, i16) {
    let r = init_as(c, id, 60_000).await;
    assert_eq!(r.error_code, 0);
    (r.producer_id.0, r.producer_epoch)
}

pub(crate) async fn add_partitions(
    c: &mut Client,
    id: &str,
    (pid, epoch): (i64, i16),
    parts: &[i32],
) -> Vec<i16> {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(tid(id))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(parts.to_vec()),
        ]);
    c.call(&request, 3)
        .await
        .results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(|p| p.partition_error_code)
        })
        .collect()
}

async fn add_offsets(c: &mut Client, id: &str, p: (i64, i16), group: &str) -> i16 {
    add_offsets_at(c, id, p, group, 3).await
}

pub(crate) async fn add_offsets_at(
    c: &mut Client,
    id: &str,
    (pid, epoch): (i64, i16),
    group: &str,
    version: i16,
) -> i16 {
    let request = AddOffsetsToTxnRequest::default()
        .with_transactional_id(tid(id))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())));
    c.call(&request, version).await.error_code
}

async fn txn_commit(c: &mut Client, id: &str, p: (i64, i16), group: &str, offset: i64) -> Vec<i16> {
    txn_commit_at(c, id, p, group, offset, 3).await
}

pub(crate) async fn txn_commit_at(
    c: &mut Client,
    id: &str,
    (pid, epoch): (i64, i16),
    group: &str,
    offset: i64,
    version: i16,
) -> Vec<i16> {
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(tid(id))
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_member_id(StrBytes::default())
        .with_topics(vec![
            txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(-1),
                ]),
        ]);
    c.call(&request, version)
        .await
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

pub(crate) async fn end_txn_at(
    c: &mut Client,
    id: &str,
    (pid, epoch): (i64, i16),
    commit: bool,
    version: i16,
) -> i16 {
    let request = EndTxnRequest::default()
        .with_transactional_id(tid(id))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    c.call(&request, version).await.error_code
}

async fn end_txn(c: &mut Client, id: &str, p: (i64, i16), commit: bool) -> i16 {
    end_txn_at(c, id, p, commit, 3).await
}

/// (error code, committed offset) of partition 0 of `group`, with `require_stable` or not.
pub(crate) async fn fetch_offset(c: &mut Client, group: &str, require_stable: bool) -> (i16, i64) {
    let request = offset_fetch(group, &[0]).with_require_stable(require_stable);
    let r = c.call(&request, 7).await;
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.committed_offset)
}

/// The data records a read_committed fetch of partition 0 from 0 is served, and the producer
/// ids of the aborted transactions it is told about.
pub(crate) async fn read_committed(c: &mut Client) -> (usize, Vec<i64>) {
    let p = fetch_at(c, 0, 1).await;
    let records = decode_records(&p).iter().filter(|r| !r.control).count();
    let aborted = p
        .aborted_transactions
        .unwrap_or_default()
        .iter()
        .map(|a| a.producer_id.0)
        .collect();
    (records, aborted)
}

/// Init, partition 0, three transactional records, the group "g" with offset 3 pending.
pub(crate) async fn open_transaction(c: &mut Client, id: &str) -> (i64, i16) {
    let p = init(c, id).await;
    assert_eq!(add_partitions(c, id, p, &[0]).await, vec![0]);
    let produced = produce_as(c, Some("tx"), 0, producer_batch(p.0, p.1, 0, 3, true)).await;
    assert_eq!(produced.0, 0);
    assert_eq!(add_offsets(c, id, p, "g").await, 0);
    assert_eq!(txn_commit(c, id, p, "g", 3).await, vec![0]);
    p
}

/// A transaction at Kafka 4.2's newest versions for a producer outside transaction version
/// 2: InitProducerId v5, AddPartitionsToTxn v3, Produce v12, AddOffsetsToTxn v4,
/// TxnOffsetCommit v4, EndTxn v4 (v4/v5 only allow TRANSACTION_ABORTABLE, KIP-890).
#[tokio::test]
async fn a_transaction_at_the_newest_versions_commits() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(tid("tx")))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let r = c.call(&request, 5).await;
    assert_eq!(r.error_code, 0);
    let p = (r.producer_id.0, r.producer_epoch);
    assert_eq!(add_partitions(&mut c, "tx", p, &[0]).await, vec![0]);
    let produce = produce_request("t", 0, producer_batch(p.0, p.1, 0, 3, true), -1)
        .with_transactional_id(Some(tid("tx")));
    let produced = c.call(&produce, 12).await;
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(add_offsets_at(&mut c, "tx", p, "g", 4).await, 0);
    assert_eq!(txn_commit_at(&mut c, "tx", p, "g", 3, 4).await, vec![0]);
    assert_eq!(end_txn_at(&mut c, "tx", p, true, 4).await, 0);
    assert_eq!(read_committed(&mut c).await, (3, vec![]));
    assert_eq!(fetch_offset(&mut c, "g", true).await, (0, 3));
}

#[tokio::test]
async fn a_committed_transaction_shows_its_records_and_offsets() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let p = open_transaction(&mut c, "tx").await;
    assert_eq!(
        read_committed(&mut c).await,
        (0, vec![]),
        "nothing stable yet"
    );
    assert_eq!(
        fetch_offset(&mut c, "g", true).await,
        (UNSTABLE_OFFSET_COMMIT, -1)
    );
    assert_eq!(
        fetch_offset(&mut c, "g", false).await,
        (0, -1),
        "pending is invisible"
    );
    assert_eq!(end_txn(&mut c, "tx", p, true).await, 0);
    assert_eq!(read_committed(&mut c).await, (3, vec![]));
    assert_eq!(fetch_offset(&mut c, "g", true).await, (0, 3));
    // The retry of the commit succeeds, an abort now does not.
    assert_eq!(end_txn(&mut c, "tx", p, true).await, 0);
    assert_eq!(
        end_txn(&mut c, "tx", p, false).await,
        48,
        "INVALID_TXN_STATE"
    );
}

#[tokio::test]
async fn an_aborted_transaction_hides_its_records_and_offsets() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let p = open_transaction(&mut c, "tx").await;
    assert_eq!(end_txn(&mut c, "tx", p, false).await, 0);
    let (_, aborted) = read_committed(&mut c).await;
    assert_eq!(aborted, vec![p.0], "the consumer is told to skip them");
    assert_eq!(fetch_offset(&mut c, "g", true).await, (0, -1));
    // The next transaction of the same producer commits normally.
    assert_eq!(add_partitions(&mut c, "tx", p, &[0]).await, vec![0]);
    let next = produce_as(&mut c, Some("tx"), 0, producer_batch(p.0, p.1, 3, 1, true)).await;
    assert_eq!(next.0, 0);
    assert_eq!(end_txn(&mut c, "tx", p, true).await, 0);
    let fetched = fetch_at(&mut c, 0, 1).await;
    assert_eq!(fetched.last_stable_offset, fetched.high_watermark);
}

#[tokio::test]
async fn a_second_instance_fences_the_first() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let old = open_transaction(&mut c, "tx").await;
    // The new instance: its first InitProducerId aborts the open transaction.
    assert_eq!(
        init_as(&mut c, "tx", 60_000).await.error_code,
        CONCURRENT_TRANSACTIONS
    );
    let new = init(&mut c, "tx").await;
    assert_eq!(new, (old.0, old.1 + 2));
    assert_eq!(read_committed(&mut c).await.1, vec![old.0], "aborted");
    // The old instance is fenced: on the data partition by the marker's epoch, at the
    // coordinator by its epoch (PRODUCER_FENCED from EndTxn v2, INVALID_PRODUCER_EPOCH before).
    let stale = produce_as(
        &mut c,
        Some("tx"),
        0,
        producer_batch(old.0, old.1, 3, 1, true),
    )
    .await;
    assert_eq!(stale.0, INVALID_PRODUCER_EPOCH);
    assert_eq!(
        end_txn_at(&mut c, "tx", old, true, 3).await,
        PRODUCER_FENCED
    );
    assert_eq!(
        end_txn_at(&mut c, "tx", old, true, 1).await,
        INVALID_PRODUCER_EPOCH
    );
    assert_eq!(
        add_partitions(&mut c, "tx", old, &[1]).await,
        vec![PRODUCER_FENCED]
    );
    assert_eq!(
        txn_commit(&mut c, "tx", old, "g", 9).await,
        vec![INVALID_PRODUCER_EPOCH]
    );
    assert_eq!(fetch_offset(&mut c, "g", true).await, (0, -1));
}

#[tokio::test]
async fn requests_are_checked_before_anything_changes() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    assert_eq!(
        init_as(&mut c, "tx", 900_001).await.error_code,
        50,
        "INVALID_TRANSACTION_TIMEOUT"
    );
    assert_eq!(
        init_as(&mut c, "", 1000).await.error_code,
        42,
        "INVALID_REQUEST"
    );
    let p = init(&mut c, "tx").await;
    assert_eq!(
        end_txn(&mut c, "tx", p, true).await,
        48,
        "Empty: INVALID_TXN_STATE"
    );
    assert_eq!(
        end_txn(&mut c, "tx", (p.0 + 1, 0), true).await,
        49,
        "INVALID_PRODUCER_ID_MAPPING"
    );
    // A partition that does not exist: it gets UNKNOWN_TOPIC_OR_PARTITION, the others
    // OPERATION_NOT_ATTEMPTED, and nothing is added.
    assert_eq!(add_partitions(&mut c, "tx", p, &[0, 9]).await, vec![55, 3]);
    assert_eq!(end_txn(&mut c, "tx", p, true).await, 48, "still Empty");
}

pub(crate) async fn describe(
    c: &mut Client,
    id: &str,
) -> describe_transactions_response::TransactionState {
    let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![tid(id)]);
    c.call(&request, 0).await.transaction_states.remove(0)
}

#[tokio::test]
async fn a_timed_out_transaction_is_aborted_and_its_producer_fenced() {
    let broker = TestBroker::with(broker::BrokerConfig {
        transaction_abort_timed_out_cleanup_interval_ms: 10,
        ..config()
    })
    .await;
    let mut c = broker.client().await;
    let r = init_as(&mut c, "tx", 1).await;
    let p = (r.producer_id.0, r.producer_epoch);
    assert_eq!(add_partitions(&mut c, "tx", p, &[1]).await, vec![0]);
    bounded("the timer aborts it", async {
        while describe(&mut c, "tx").await.transaction_state.as_str() != "CompleteAbort" {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(
        describe(&mut c, "tx").await.producer_epoch,
        p.1 + 1,
        "fenced"
    );
    assert_eq!(end_txn(&mut c, "tx", p, true).await, PRODUCER_FENCED);
}

#[tokio::test]
async fn describe_and_list_transactions() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let p = open_transaction(&mut c, "tx").await;
    init(&mut c, "idle").await;
    let d = describe(&mut c, "tx").await;
    assert_eq!(d.error_code, 0);
    assert_eq!(d.transaction_state.as_str(), "Ongoing");
    assert_eq!(
        (d.producer_id.0, d.producer_epoch, d.transaction_timeout_ms),
        (p.0, p.1, 60_000)
    );
    assert!(d.transaction_start_time_ms > 0);
    assert_eq!(d.topics.len(), 1);
    assert_eq!(
        (d.topics[0].topic.0.as_str(), d.topics[0].partitions.clone()),
        ("t", vec![0])
    );
    assert_eq!(
        describe(&mut c, "nope").await.error_code,
        105,
        "TRANSACTIONAL_ID_NOT_FOUND"
    );
    let list = |states: &[&str], pids: &[i64]| {
        ListTransactionsRequest::default()
            .with_state_filters(
                states
                    .iter()
                    .map(|s| StrBytes::from_string(s.to_string()))
                    .collect(),
            )
            .with_producer_id_filters(pids.iter().map(|&p| ProducerId(p)).collect())
            .with_duration_filter(-1)
    };
    let ids = |r: &ListTransactionsResponse| -> Vec<String> {
        r.transaction_states
            .iter()
            .map(|t| t.transactional_id.to_string())
            .collect()
    };
    let all = c.call(&list(&[], &[]), 0).await;
    assert_eq!(ids(&all), vec!["idle".to_string(), "tx".to_string()]);
    let ongoing = c.call(&list(&["Ongoing"], &[]), 1).await;
    assert_eq!(ids(&ongoing), vec!["tx".to_string()]);
    let by_pid = c.call(&list(&[], &[p.0]), 0).await;
    assert_eq!(ids(&by_pid), vec!["tx".to_string()]);
    let unknown = c.call(&list(&["Bogus"], &[]), 0).await;
    assert_eq!(
        unknown.unknown_state_filters,
        vec![StrBytes::from_static_str("Bogus")]
    );
    // v1's duration filter: running longer than an hour, nothing.
    let long = c
        .call(&list(&[], &[]).with_duration_filter(3_600_000), 1)
        .await;
    assert!(long.transaction_states.is_empty());
    // v2's transactional id pattern (KIP-1152): the whole id must match, with the other
    // filters; empty or null lists every id; v1 ignores it.
    let pattern = |p: Option<&str>| {
        list(&[], &[])
            .with_transactional_id_pattern(p.map(|p| StrBytes::from_string(p.to_string())))
    };
    let t = c.call(&pattern(Some("t.*")), 2).await;
    assert_eq!((t.error_code, ids(&t)), (0, vec!["tx".to_string()]));
    assert!(
        ids(&c.call(&pattern(Some("t")), 2).await).is_empty(),
        "whole id"
    );
    assert_eq!(ids(&c.call(&pattern(Some("")), 2).await).len(), 2);
    assert_eq!(ids(&c.call(&pattern(None), 2).await).len(), 2);
    let and = c
        .call(
            &pattern(Some("idle|tx"))
                .with_state_filters(vec![StrBytes::from_static_str("Ongoing")]),
            2,
        )
        .await;
    assert_eq!(ids(&and), vec!["tx".to_string()]);
    let bad = c.call(&pattern(Some("(")), 2).await;
    assert_eq!(
        (bad.error_code, bad.transaction_states.len()),
        (128, 0),
        "INVALID_REGULAR_EXPRESSION"
    );
}

#[tokio::test]
async fn transactions_survive_a_restart_with_a_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    transactions_survive_a_restart(|| broker::BrokerConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..config()
    })
    .await;
}

/// After a restart on the same state (the data directory here, PostgreSQL in `postgres.rs`):
/// a committed transaction is described as CompleteCommit with its offsets, an open one is
/// still open and its producer commits it (as Kafka's coordinator keeps an Ongoing
/// transaction after a move), and the committed one's next instance continues its producer id.
pub(crate) async fn transactions_survive_a_restart(with_dir: impl Fn() -> broker::BrokerConfig) {
    let (done, open) = {
        let broker = TestBroker::with(with_dir()).await;
        let mut c = broker.client().await;
        let done = open_transaction(&mut c, "done").await;
        assert_eq!(end_txn(&mut c, "done", done, true).await, 0);
        // "open" stays Ongoing on partition 1 when the broker goes away.
        let open = init(&mut c, "open").await;
        assert_eq!(add_partitions(&mut c, "open", open, &[1]).await, vec![0]);
        let produced = produce_as(
            &mut c,
            Some("open"),
            1,
            producer_batch(open.0, open.1, 0, 2, true),
        )
        .await;
        assert_eq!(produced.0, 0);
        broker.stop().await.unwrap();
        (done, open)
    };
    let broker = TestBroker::with(with_dir()).await;
    let mut c = broker.client().await;
    let d = describe(&mut c, "done").await;
    assert_eq!(
        (d.transaction_state.as_str(), d.producer_id.0),
        ("CompleteCommit", done.0)
    );
    assert_eq!(fetch_offset(&mut c, "g", true).await, (0, 3));
    // The open transaction is still open, as Kafka's coordinator keeps an Ongoing one after
    // a move: its producer ends it (the timer would abort it after its timeout).
    let o = describe(&mut c, "open").await;
    assert_eq!(
        (
            o.transaction_state.as_str(),
            o.producer_id.0,
            o.producer_epoch
        ),
        ("Ongoing", open.0, open.1)
    );
    let read_committed = || fetch_request("t", 1, 0).with_isolation_level(1);
    let p1 = c.call(&read_committed(), 11).await;
    let p1 = &p1.responses[0].partitions[0];
    assert!(
        p1.last_stable_offset < p1.high_watermark,
        "the open transaction holds the last stable offset back"
    );
    assert_eq!(end_txn(&mut c, "open", open, true).await, 0);
    let o = describe(&mut c, "open").await;
    assert_eq!(o.transaction_state.as_str(), "CompleteCommit");
    let p1 = c.call(&read_committed(), 11).await;
    let p1 = &p1.responses[0].partitions[0];
    assert_eq!(
        p1.last_stable_offset, p1.high_watermark,
        "nothing open any more"
    );
    assert!(
        p1.aborted_transactions
            .clone()
            .unwrap_or_default()
            .is_empty(),
        "committed, not aborted"
    );
    assert_eq!(
        decode_records(p1).iter().filter(|r| !r.control).count(),
        2,
        "its records are read committed"
    );
    // The committed one's next instance continues its producer id and epoch.
    assert_eq!(init(&mut c, "done").await, (done.0, done.1 + 1));
    broker.stop().await.unwrap();
}

/// WriteTxnMarkers v1 for producer `pid` (epoch `epoch`): `t`-0, a partition of `t` that
/// does not exist, and the `__consumer_offsets` partitions `slots`; the codes in order.
async fn write_markers(
    c: &mut Client,
    (pid, epoch): (i64, i16),
    commit: bool,
    slots: &[i32],
) -> Vec<i16> {
    use kafka_protocol::messages::write_txn_markers_request::{
        WritableTxnMarker, WritableTxnMarkerTopic,
    };
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_transaction_result(commit)
            .with_coordinator_epoch(0)
            .with_topics(vec![
                WritableTxnMarkerTopic::default()
                    .with_name(topic_name("t"))
                    .with_partition_indexes(vec![0, 999]),
                WritableTxnMarkerTopic::default()
                    .with_name(topic_name("__consumer_offsets"))
                    .with_partition_indexes(slots.to_vec()),
            ])]);
    let r = c.call(&request, 1).await;
    assert_eq!(r.markers.len(), 1);
    assert_eq!(r.markers[0].producer_id.0, pid);
    r.markers[0]
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// What another broker's transaction coordinator sends a leader: the marker closes the
/// transaction on the data partition, and the one into the group's `__consumer_offsets`
/// partition commits the producer's pending offsets (a broker alone owns every slot).
#[tokio::test]
async fn write_txn_markers_writes_the_marker_and_completes_the_groups_offsets() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let p = open_transaction(&mut c, "tx").await;
    let slot = store_postgres::cluster::group_slot("g");
    let other = (slot + 1) % 50;
    assert_eq!(
        write_markers(&mut c, p, true, &[other, slot, 50]).await,
        [0, 3, 0, 0, 3],
        "t-0, t-999 (no such partition), the group slots, no slot 50"
    );
    assert_eq!(read_committed(&mut c).await, (3, vec![]));
    assert_eq!(fetch_offset(&mut c, "g", true).await, (0, 3));
    // A marker of an older epoch is refused by the partition's producer state.
    let stale = (p.0, p.1 - 1);
    assert_eq!(
        write_markers(&mut c, stale, false, &[]).await[0],
        INVALID_PRODUCER_EPOCH
    );
}
