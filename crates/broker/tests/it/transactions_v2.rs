//! Transaction version 2 (KIP-890 part 2) over the wire: EndTxn v5 bumps the producer epoch
//! and answers it, the markers carry the bumped epoch (fencing the old one in the log), a
//! retried EndTxn gets the same answer, and the transaction version survives a restart.

use kafka_protocol::messages::*;

use crate::common::*;
use crate::idempotence::{fetch_at, produce_as, producer_batch};
use crate::transactions::{add_partitions, describe, init, read_committed, tid};

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
