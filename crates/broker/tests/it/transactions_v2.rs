//! Transaction version 2 (KIP-890 part 2) over the wire: EndTxn v5 bumps the producer epoch
//! and answers it, the markers carry the bumped epoch (fencing the old one in the log), a
//! retried EndTxn gets the same answer, and the transaction version survives a restart.

use kafka_protocol::messages::*;

use crate::common::*;
use crate::idempotence::{fetch_at, produce_as, producer_batch};
use crate::transactions::{
    add_partitions, describe, fetch_offset, init, read_committed, tid, txn_commit_at,
};

const INVALID_PRODUCER_EPOCH: i16 = 47;
const PRODUCER_FENCED: i16 = 90;

/// EndTxn at `version`: (error code, producer id, producer epoch).
pub(crate) async fn end_txn_v(
    c: &mut Client,
    id: &str,
    (pid, epoch): (i64, i16),
    commit: bool,
    version: i16,
) -> (i16, i64, i16) {
    let request = EndTxnRequest::default()
        .with_transactional_id(tid(id))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let r = c.call(&request, version).await;
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

#[tokio::test]
async fn end_txn_v5_bumps_the_epoch_and_the_marker_fences_the_old_one() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let p = init(&mut c, "tx").await;
    assert_eq!(add_partitions(&mut c, "tx", p, &[0]).await, vec![0]);
    let batch = producer_batch(p.0, p.1, 0, 3, true);
    assert_eq!(produce_as(&mut c, Some("tx"), 0, batch).await.0, 0);
    assert_eq!(
        end_txn_v(&mut c, "tx", p, true, 5).await,
        (0, p.0, p.1 + 1),
        "the new epoch"
    );
    assert_eq!(read_committed(&mut c).await, (3, vec![]));
    let records = decode_records(&fetch_at(&mut c, 0, 0).await);
    let marker = records.iter().find(|r| r.control).expect("a marker");
    assert_eq!(
        marker.producer_epoch,
        p.1 + 1,
        "written with the bumped epoch"
    );
    // The retry of the EndTxn (its answer lost) gets the same answer; the current epoch of
    // the completed transaction is fenced, as Kafka's coordinator fences it.
    assert_eq!(end_txn_v(&mut c, "tx", p, true, 5).await, (0, p.0, p.1 + 1));
    assert_eq!(
        end_txn_v(&mut c, "tx", (p.0, p.1 + 1), true, 5).await,
        (PRODUCER_FENCED, -1, -1)
    );
    // A batch of the old epoch is refused by the partition: the marker fenced it.
    let late = producer_batch(p.0, p.1, 3, 1, true);
    assert_eq!(
        produce_as(&mut c, Some("tx"), 0, late).await.0,
        INVALID_PRODUCER_EPOCH
    );
    // The next transaction runs at the new epoch, its sequence from 0, and bumps again.
    let q = (p.0, p.1 + 1);
    assert_eq!(add_partitions(&mut c, "tx", q, &[0]).await, vec![0]);
    let batch = producer_batch(q.0, q.1, 0, 2, true);
    assert_eq!(produce_as(&mut c, Some("tx"), 0, batch).await.0, 0);
    assert_eq!(
        end_txn_v(&mut c, "tx", q, false, 5).await,
        (0, p.0, p.1 + 2)
    );
    // The aborted batch is served with its producer listed as aborted.
    assert_eq!(read_committed(&mut c).await, (5, vec![p.0]));
    let d = describe(&mut c, "tx").await;
    assert_eq!(
        (d.transaction_state.as_str(), d.producer_epoch),
        ("CompleteAbort", p.1 + 2)
    );
}

#[tokio::test]
async fn end_txn_v4_keeps_the_epoch() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let p = init(&mut c, "tx").await;
    assert_eq!(add_partitions(&mut c, "tx", p, &[0]).await, vec![0]);
    assert_eq!(end_txn_v(&mut c, "tx", p, true, 4).await.0, 0);
    assert_eq!(describe(&mut c, "tx").await.producer_epoch, p.1);
    // The same epoch opens the next transaction.
    assert_eq!(add_partitions(&mut c, "tx", p, &[0]).await, vec![0]);
    assert_eq!(end_txn_v(&mut c, "tx", p, false, 4).await.0, 0);
}

#[tokio::test]
async fn an_end_txn_v5_retried_after_a_restart_gets_the_same_answer() {
    let dir = tempfile::tempdir().unwrap();
    let with_dir = || broker::BrokerConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..config()
    };
    let p = {
        let broker = TestBroker::with(with_dir()).await;
        let mut c = broker.client().await;
        let p = init(&mut c, "tx").await;
        assert_eq!(add_partitions(&mut c, "tx", p, &[0]).await, vec![0]);
        assert_eq!(end_txn_v(&mut c, "tx", p, true, 5).await, (0, p.0, p.1 + 1));
        broker.stop().await.unwrap();
        p
    };
    let broker = TestBroker::with(with_dir()).await;
    let mut c = broker.client().await;
    // The stored transaction is still of transaction version 2: the retry with the old
    // epoch is recognised (a classic transaction would fence it).
    assert_eq!(end_txn_v(&mut c, "tx", p, true, 5).await, (0, p.0, p.1 + 1));
    assert_eq!(
        end_txn_v(&mut c, "tx", p, false, 5).await.0,
        48,
        "INVALID_TXN_STATE: the other outcome"
    );
    broker.stop().await.unwrap();
}

/// A transactional Produce v12 of `count` records at `sequence` into partition `partition`:
/// (error code, base offset).
pub(crate) async fn produce_v12(
    c: &mut Client,
    id: &str,
    (pid, epoch): (i64, i16),
    partition: i32,
    sequence: i32,
    count: usize,
) -> (i16, i64) {
    let batch = producer_batch(pid, epoch, sequence, count, true);
    let request = produce_request("t", partition, batch, -1).with_transactional_id(Some(tid(id)));
    let r = c.call(&request, 12).await;
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

#[tokio::test]
async fn produce_v12_adds_its_partition_to_the_transaction() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let p = init(&mut c, "tx").await;
    // No AddPartitionsToTxn: the batch adds partition 0.
    assert_eq!(produce_v12(&mut c, "tx", p, 0, 0, 3).await.0, 0);
    let d = describe(&mut c, "tx").await;
    assert_eq!(d.transaction_state.as_str(), "Ongoing");
    let parts: Vec<i32> = d.topics.iter().flat_map(|t| t.partitions.clone()).collect();
    assert_eq!(parts, vec![0]);
    // The next batch on the same partition needs no add.
    assert_eq!(produce_v12(&mut c, "tx", p, 0, 3, 1).await.0, 0);
    assert_eq!(end_txn_v(&mut c, "tx", p, true, 5).await, (0, p.0, p.1 + 1));
    assert_eq!(read_committed(&mut c).await, (4, vec![]));
    let last = fetch_at(&mut c, 0, 1).await;
    assert_eq!(
        last.last_stable_offset, last.high_watermark,
        "the marker was written"
    );
    // The old epoch is refused: fenced by the coordinator as the partition's producer
    // state (INVALID_PRODUCER_EPOCH either way).
    assert_eq!(
        produce_v12(&mut c, "tx", p, 0, 4, 1).await.0,
        INVALID_PRODUCER_EPOCH
    );
    // The new epoch opens the next transaction, on another partition too.
    let q = (p.0, p.1 + 1);
    assert_eq!(produce_v12(&mut c, "tx", q, 1, 0, 2).await.0, 0);
    let d = describe(&mut c, "tx").await;
    let parts: Vec<i32> = d.topics.iter().flat_map(|t| t.partitions.clone()).collect();
    assert_eq!((d.transaction_state.as_str(), parts), ("Ongoing", vec![1]));
}

#[tokio::test]
async fn produce_v11_does_not_add_its_partition() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let p = init(&mut c, "tx").await;
    let batch = producer_batch(p.0, p.1, 0, 1, true);
    let request = produce_request("t", 0, batch, -1).with_transactional_id(Some(tid("tx")));
    assert_eq!(
        c.call(&request, 11).await.responses[0].partition_responses[0].error_code,
        0
    );
    assert_eq!(
        describe(&mut c, "tx").await.transaction_state.as_str(),
        "Empty"
    );
}

#[tokio::test]
async fn txn_offset_commit_v5_adds_its_group_to_the_transaction() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let p = init(&mut c, "tx").await;
    assert_eq!(produce_v12(&mut c, "tx", p, 0, 0, 3).await.0, 0);
    // v4 without AddOffsetsToTxn: the group is not in the transaction.
    assert_eq!(txn_commit_at(&mut c, "tx", p, "g", 3, 4).await, vec![48]);
    // v5 adds it.
    assert_eq!(txn_commit_at(&mut c, "tx", p, "g", 3, 5).await, vec![0]);
    assert_eq!(fetch_offset(&mut c, "g", false).await, (0, -1), "pending");
    assert_eq!(end_txn_v(&mut c, "tx", p, true, 5).await, (0, p.0, p.1 + 1));
    assert_eq!(fetch_offset(&mut c, "g", true).await, (0, 3));
    // A fenced epoch cannot add the group.
    assert_eq!(
        txn_commit_at(&mut c, "tx", p, "g", 5, 5).await,
        vec![INVALID_PRODUCER_EPOCH]
    );
}

#[tokio::test]
async fn an_implicit_transaction_survives_a_restart_in_the_middle() {
    let dir = tempfile::tempdir().unwrap();
    let with_dir = || broker::BrokerConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..config()
    };
    let p = {
        let broker = TestBroker::with(with_dir()).await;
        let mut c = broker.client().await;
        let p = init(&mut c, "tx").await;
        assert_eq!(produce_v12(&mut c, "tx", p, 0, 0, 3).await.0, 0);
        assert_eq!(txn_commit_at(&mut c, "tx", p, "g", 3, 5).await, vec![0]);
        broker.stop().await.unwrap();
        p
    };
    let broker = TestBroker::with(with_dir()).await;
    let mut c = broker.client().await;
    let d = describe(&mut c, "tx").await;
    let parts: Vec<i32> = d.topics.iter().flat_map(|t| t.partitions.clone()).collect();
    assert_eq!((d.transaction_state.as_str(), parts), ("Ongoing", vec![0]));
    // The offsets of an Ongoing transaction are lost with a restart (as with a move, see
    // the core's unload_where); the producer commits them again, then ends it.
    assert_eq!(txn_commit_at(&mut c, "tx", p, "g", 3, 5).await, vec![0]);
    assert_eq!(end_txn_v(&mut c, "tx", p, true, 5).await, (0, p.0, p.1 + 1));
    let last = fetch_at(&mut c, 0, 1).await;
    assert_eq!(
        last.last_stable_offset, last.high_watermark,
        "the marker was written"
    );
    assert_eq!(read_committed(&mut c).await, (3, vec![]));
    assert_eq!(fetch_offset(&mut c, "g", true).await, (0, 3));
    // The retry after the end gets the same answer (the stored transaction version 2).
    assert_eq!(end_txn_v(&mut c, "tx", p, true, 5).await, (0, p.0, p.1 + 1));
    broker.stop().await.unwrap();
}

/// WriteTxnMarkers v2 into `t`-0 for producer `pid`, with `transaction_version`: the code.
async fn write_marker_v2(
    c: &mut Client,
    (pid, epoch): (i64, i16),
    commit: bool,
    transaction_version: i8,
) -> i16 {
    use kafka_protocol::messages::write_txn_markers_request::{
        WritableTxnMarker, WritableTxnMarkerTopic,
    };
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_transaction_result(commit)
            .with_coordinator_epoch(0)
            .with_transaction_version(transaction_version)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(topic_name("t"))
                .with_partition_indexes(vec![0])])]);
    let r = c.call(&request, 2).await;
    r.markers[0].topics[0].partitions[0].error_code
}

/// KIP-1228: a marker of transaction version 2 must be newer than the producer's epoch on
/// the partition; one of an older version may carry the same epoch.
#[tokio::test]
async fn write_txn_markers_v2_needs_a_newer_epoch_for_transaction_version_2() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let p = init(&mut c, "tx").await;
    assert_eq!(produce_v12(&mut c, "tx", p, 0, 0, 2).await.0, 0);
    // Same epoch as the open transaction's data: refused at version 2 ...
    assert_eq!(
        write_marker_v2(&mut c, p, true, 2).await,
        INVALID_PRODUCER_EPOCH
    );
    assert_eq!(read_committed(&mut c).await.0, 0, "nothing committed");
    // ... accepted at version 0 (the legacy check: not older).
    assert_eq!(write_marker_v2(&mut c, p, false, 0).await, 0);
    assert_eq!(read_committed(&mut c).await, (2, vec![p.0]));
    // A bumped epoch at version 2 is accepted, and its repeat is harmless.
    let q = (p.0, p.1 + 1);
    assert_eq!(write_marker_v2(&mut c, q, false, 2).await, 0);
    assert_eq!(write_marker_v2(&mut c, q, false, 2).await, 0);
}

/// AddPartitionsToTxn at `version` (4+, a partition leader's form) for one transaction:
/// the top-level code and each partition's code.
async fn leader_add(
    c: &mut Client,
    id: &str,
    (pid, epoch): (i64, i16),
    parts: &[i32],
    verify_only: bool,
    version: i16,
) -> (i16, Vec<i16>) {
    use kafka_protocol::messages::add_partitions_to_txn_request::{
        AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
    };
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(tid(id))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_verify_only(verify_only)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(parts.to_vec())]),
    ]);
    let r = c.call(&request, version).await;
    let codes = r
        .results_by_transaction
        .iter()
        .flat_map(|t| {
            t.topic_results.iter().flat_map(|topic| {
                topic
                    .results_by_partition
                    .iter()
                    .map(|p| p.partition_error_code)
            })
        })
        .collect();
    (r.error_code, codes)
}

#[tokio::test]
async fn add_partitions_to_txn_v4_and_v5_add_or_verify_for_a_partition_leader() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let p = init(&mut c, "tx").await;
    const TRANSACTION_ABORTABLE: i16 = 120;
    // Not in the transaction: verification says so, changes nothing.
    assert_eq!(
        leader_add(&mut c, "tx", p, &[0], true, 4).await,
        (0, vec![TRANSACTION_ABORTABLE])
    );
    assert_eq!(
        describe(&mut c, "tx").await.transaction_state.as_str(),
        "Empty"
    );
    // VerifyOnly false adds it (transaction version 2's implicit add).
    assert_eq!(
        leader_add(&mut c, "tx", p, &[0], false, 5).await,
        (0, vec![0])
    );
    assert_eq!(
        leader_add(&mut c, "tx", p, &[0, 1], true, 5).await,
        (0, vec![0, TRANSACTION_ABORTABLE])
    );
    // A partition that does not exist: the others are not attempted.
    assert_eq!(
        leader_add(&mut c, "tx", p, &[1, 999], false, 5).await,
        (0, vec![55, 3])
    );
    // Another epoch is fenced, every partition.
    assert_eq!(
        leader_add(&mut c, "tx", (p.0, p.1 + 1), &[0, 1], true, 5).await,
        (0, vec![PRODUCER_FENCED, PRODUCER_FENCED])
    );
    let d = describe(&mut c, "tx").await;
    let parts: Vec<i32> = d.topics.iter().flat_map(|t| t.partitions.clone()).collect();
    assert_eq!((d.transaction_state.as_str(), parts), ("Ongoing", vec![0]));
    assert_eq!(
        end_txn_v(&mut c, "tx", p, false, 5).await,
        (0, p.0, p.1 + 1)
    );
}

/// `transaction.version` finalized at 2 is what makes Kafka's Java client take transaction
/// version 2 (`TransactionManager.maybeUpdateTransactionV2Enabled`).
#[tokio::test]
async fn api_versions_finalizes_transaction_version_2() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let v4 = c.call(&ApiVersionsRequest::default(), 4).await;
    let supported: Vec<(String, i16, i16)> = v4
        .supported_features
        .iter()
        .map(|f| (f.name.to_string(), f.min_version, f.max_version))
        .collect();
    assert_eq!(supported, vec![("transaction.version".to_string(), 0, 2)]);
    let finalized = |r: &ApiVersionsResponse| -> Vec<(String, i16, i16)> {
        r.finalized_features
            .iter()
            .map(|f| (f.name.to_string(), f.min_version_level, f.max_version_level))
            .collect()
    };
    assert_eq!(
        finalized(&v4),
        vec![("transaction.version".to_string(), 2, 2)]
    );
    assert!(v4.finalized_features_epoch >= 0, "newer than a client's -1");
    // v3: a supported feature whose minimum is 0 is left out (KAFKA-17492); the finalized
    // level stays.
    let v3 = c.call(&ApiVersionsRequest::default(), 3).await;
    assert!(v3.supported_features.is_empty());
    assert_eq!(finalized(&v3), finalized(&v4));
    let find = |key: ApiKey| {
        v4.api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| k.max_version)
    };
    // What a client of transaction version 2 sends is served.
    assert_eq!(find(ApiKey::EndTxn), Some(5));
    assert_eq!(find(ApiKey::TxnOffsetCommit), Some(5));
    assert_eq!(find(ApiKey::Produce), Some(13));
    assert_eq!(find(ApiKey::AddPartitionsToTxn), Some(5));
    assert_eq!(find(ApiKey::WriteTxnMarkers), Some(2));
}
