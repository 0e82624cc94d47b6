//! The transaction coordinator's records in PostgreSQL: durable across stores, the latest of
//! each transactional id until its tombstone, sorted by id, the refusals writing nothing,
//! and a stored record that does not decode refused with a clear error.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{bounded, server, store};
use coordinator_core::txn::{TransactionRecord, TxnState};
use coordinator_core::{
    CommitFence, CommittedOffsets, OffsetAndMetadata, OffsetStore, StorageErrorKind, TopicPartition,
};
use store_postgres::harness::TempPostgres;
use store_postgres::{PostgresStore, MAX_RECORD_BYTES};

fn tp(t: &str, p: u32) -> TopicPartition {
    TopicPartition::new(t, p)
}

/// An open transaction of `id` with no pending offsets.
fn ongoing(id: &str, epoch: i16) -> TransactionRecord {
    TransactionRecord {
        transactional_id: id.to_string(),
        producer_id: 1_000,
        producer_epoch: epoch,
        last_producer_id: -1,
        last_producer_epoch: -1,
        timeout_ms: 60_000,
        state: TxnState::Ongoing,
        partitions: [tp("orders", 0), tp("orders", 1)].into(),
        groups: BTreeSet::new(),
        pending_offsets: BTreeMap::new(),
        start_ms: Some(1_700_000_000_000),
        last_update_ms: 1_700_000_000_001,
    }
}

/// A decided commit of `id`, with pending offsets of two groups carrying every part of
/// Kafka's `OffsetAndMetadata`.
fn prepare_commit(id: &str) -> TransactionRecord {
    let mut with_all = OffsetAndMetadata::new(42)
        .with_leader_epoch(Some(3))
        .with_metadata("meta ☃ \"q\"");
    with_all.commit_timestamp_ms = 1_700_000_000_500;
    let first: CommittedOffsets = [
        (tp("orders", 0), with_all),
        (tp("orders", u32::MAX), OffsetAndMetadata::new(i64::MAX)),
    ]
    .into();
    let second: CommittedOffsets = [(
        tp("audit", 7),
        OffsetAndMetadata::new(0).with_leader_epoch(Some(-1)),
    )]
    .into();
    TransactionRecord {
        transactional_id: id.to_string(),
        producer_id: i64::MAX,
        producer_epoch: i16::MAX,
        last_producer_id: 999,
        last_producer_epoch: 4,
        timeout_ms: i32::MAX,
        state: TxnState::PrepareCommit,
        partitions: [tp("orders", 0), tp("orders", u32::MAX), tp("audit", 7)].into(),
        groups: ["workers".to_string(), "auditors ☃".to_string()].into(),
        pending_offsets: [
            ("workers".to_string(), first),
            ("auditors ☃".to_string(), second),
        ]
        .into(),
        start_ms: Some(u64::MAX),
        last_update_ms: u64::MAX,
    }
}

async fn write(store: &PostgresStore, id: &str, record: Option<&TransactionRecord>) {
    bounded(
        "write transaction",
        store.write_transaction(id, record, CommitFence::none()),
    )
    .await
    .unwrap_or_else(|e| panic!("write of `{id}`: {e}"));
}

async fn load(store: &PostgresStore) -> Vec<TransactionRecord> {
    bounded("load transactions", store.load_transactions())
        .await
        .unwrap()
}

async fn rows(pg: &TempPostgres, db: &str) -> i64 {
    let client = bounded("connect", pg.connect(db)).await.unwrap();
    bounded(
        "count",
        client.query_one("SELECT count(*) FROM transactions", &[]),
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test]
async fn records_survive_a_new_store_and_a_tombstone_removes_one() {
    let Some(pg) = server().await else { return };
    let first = store(&pg, "txn_durable").await;
    assert!(first.keeps_transactions());
    assert!(load(&first).await.is_empty());

    write(&first, "a", Some(&ongoing("a", 0))).await;
    write(&first, "b", Some(&ongoing("b", 0))).await;
    // The latest record of an id replaces the earlier one.
    write(&first, "b", Some(&prepare_commit("b"))).await;
    write(&first, "a", Some(&ongoing("a", 1))).await;
    assert_eq!(
        load(&first).await,
        [ongoing("a", 1), prepare_commit("b")],
        "the latest record of each id, sorted by id"
    );
    write(&first, "a", None).await;
    // A tombstone for an id with no record is not an error.
    write(&first, "never-written", None).await;
    first.close();
    drop(first);

    let second = bounded("connect", PostgresStore::connect(&pg.url("txn_durable"), 1))
        .await
        .unwrap();
    assert!(second.keeps_transactions());
    assert_eq!(load(&second).await, [prepare_commit("b")]);
    assert_eq!(
        rows(&pg, "txn_durable").await,
        1,
        "the tombstone deleted the row"
    );
}

#[tokio::test]
async fn records_load_sorted_by_transactional_id_bytewise() {
    let Some(pg) = server().await else { return };
    let store = store(&pg, "txn_sorted").await;
    // Written out of order; "B" < "a" < "b" < "é" in bytes (the core's order), which a
    // locale's collation would not give.
    for id in ["é", "b", "B", "a"] {
        write(&store, id, Some(&ongoing(id, 0))).await;
    }
    let ids: Vec<String> = load(&store)
        .await
        .into_iter()
        .map(|r| r.transactional_id)
        .collect();
    assert_eq!(ids, ["B", "a", "b", "é"]);
}

#[tokio::test]
async fn a_refused_write_changes_nothing() {
    let Some(pg) = server().await else { return };
    let store = store(&pg, "txn_refusals").await;
    write(&store, "keep", Some(&prepare_commit("keep"))).await;

    let cases: Vec<(&str, TransactionRecord, StorageErrorKind, &str)> = vec![
        (
            "keep",
            ongoing("other", 3),
            StorageErrorKind::Other,
            "cannot be written as `keep`",
        ),
        (
            "k\0",
            ongoing("k\0", 3),
            StorageErrorKind::Other,
            "NUL character",
        ),
        {
            let mut r = ongoing("keep", 3);
            r.groups.insert("g\0".to_string());
            ("keep", r, StorageErrorKind::Other, "NUL character")
        },
        {
            let mut r = prepare_commit("keep");
            r.pending_offsets.insert(
                "g".to_string(),
                [(tp("t", 0), OffsetAndMetadata::new(1).with_metadata("m\0"))].into(),
            );
            ("keep", r, StorageErrorKind::Other, "NUL character")
        },
        {
            let mut r = prepare_commit("keep");
            r.pending_offsets.insert(
                "g".to_string(),
                [(tp("t", 0), OffsetAndMetadata::new(-1))].into(),
            );
            ("keep", r, StorageErrorKind::InvalidOffset, "is negative")
        },
        {
            let mut r = prepare_commit("keep");
            let huge = OffsetAndMetadata::new(1).with_metadata("x".repeat(MAX_RECORD_BYTES));
            r.pending_offsets
                .insert("g".to_string(), [(tp("t", 0), huge)].into());
            (
                "keep",
                r,
                StorageErrorKind::Other,
                "bytes encoded, more than",
            )
        },
    ];
    for (id, record, kind, expected) in cases {
        let err = bounded(
            "refused write",
            store.write_transaction(id, Some(&record), CommitFence::none()),
        )
        .await
        .expect_err(expected);
        assert_eq!(err.kind(), kind, "{err}");
        assert!(
            err.message().contains(expected),
            "{err} should say {expected:?}"
        );
        assert!(err.message().contains("nothing was written"), "{err}");
    }
    assert_eq!(load(&store).await, [prepare_commit("keep")]);
    assert_eq!(rows(&pg, "txn_refusals").await, 1);
}

#[tokio::test]
async fn a_record_that_does_not_decode_is_refused_naming_the_table_and_id() {
    let Some(pg) = server().await else { return };
    let store = store(&pg, "txn_corrupt").await;
    write(&store, "fine", Some(&ongoing("fine", 0))).await;
    bounded(
        "insert",
        pg.execute(
            "txn_corrupt",
            r#"INSERT INTO transactions (transactional_id, record)
               VALUES ('bad', '{"v": 1, "transactional_id": "bad", "state": "Committing"}')"#,
        ),
    )
    .await
    .unwrap();
    let err = bounded("load", store.load_transactions())
        .await
        .expect_err("a record that does not decode");
    assert_eq!(err.kind(), StorageErrorKind::Corrupt, "{err}");
    assert!(
        err.message()
            .contains("table transactions, transactional id `bad`"),
        "{err}"
    );
    assert!(
        err.message()
            .contains("unknown transaction state `Committing`"),
        "{err}"
    );

    // A well-formed record stored under another id's row.
    bounded(
        "delete",
        pg.execute(
            "txn_corrupt",
            "DELETE FROM transactions WHERE transactional_id = 'bad'",
        ),
    )
    .await
    .unwrap();
    bounded(
        "copy",
        pg.execute(
            "txn_corrupt",
            "INSERT INTO transactions (transactional_id, record) \
             SELECT 'copy', record FROM transactions WHERE transactional_id = 'fine'",
        ),
    )
    .await
    .unwrap();
    let err = bounded("load", store.load_transactions())
        .await
        .expect_err("a record under another id");
    assert_eq!(err.kind(), StorageErrorKind::Corrupt, "{err}");
    assert!(
        err.message().contains(
            "table transactions, transactional id `copy`: the record names transactional id \
             `fine`"
        ),
        "{err}"
    );
}
