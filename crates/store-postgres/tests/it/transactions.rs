//! The transaction coordinator's records in PostgreSQL: durable across stores, the latest of
//! each transactional id until its tombstone, sorted by id, the refusals writing nothing, a
//! stored record that does not decode refused with a clear error, and the core's transaction
//! coordinator recovering from them after a restart.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::{bounded, server, store};
use async_trait::async_trait;
use coordinator_core::txn::{
    MarkerError, MarkerWriter, ProducerIdSource, TransactionCoordinator, TransactionRecord,
    TxnMarkers, TxnState,
};
use coordinator_core::{
    AssignError, Assignment, AssignmentInput, Assignor, CommitFence, CommittedOffsets, Coordinator,
    OffsetAndMetadata, OffsetStore, StorageErrorKind, TopicIndex, TopicPartition,
    TxnOffsetCommitRequest,
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
        transaction_version: 0,
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
        transaction_version: 2,
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

/// Every partition to the first member (no group here joins; the coordinator needs one).
struct FirstMember;

impl Assignor for FirstMember {
    fn name(&self) -> &str {
        "first-member"
    }
    fn assign(&self, input: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
        let mut out = Assignment::new(input);
        for t in 0..TopicIndex::try_from(input.topics().len()).unwrap() {
            out.topic_owners_mut(t).fill(0);
        }
        Ok(out)
    }
}

/// Records the markers it is asked for; fails those of the partitions in `failing`.
#[derive(Default)]
struct Markers {
    calls: Mutex<Vec<TxnMarkers>>,
    failing: Mutex<BTreeSet<TopicPartition>>,
}

#[async_trait]
impl MarkerWriter for Markers {
    async fn write_markers(
        &self,
        markers: &TxnMarkers,
    ) -> Vec<(TopicPartition, Result<(), MarkerError>)> {
        self.calls.lock().unwrap().push(markers.clone());
        let failing = self.failing.lock().unwrap().clone();
        markers
            .partitions
            .iter()
            .map(|tp| {
                let r = if failing.contains(tp) {
                    Err(MarkerError {
                        kafka_code: 56,
                        message: "disk full".into(),
                    })
                } else {
                    Ok(())
                };
                (tp.clone(), r)
            })
            .collect()
    }
}

struct Ids(AtomicI64);

impl ProducerIdSource for Ids {
    fn next_producer_id(&self) -> i64 {
        self.0.fetch_add(1, Ordering::SeqCst)
    }
}

/// A group coordinator and a transaction coordinator over `store`, the groups loaded from
/// it as the broker does at start.
async fn coordinators(
    store: PostgresStore,
    markers: Arc<Markers>,
    first_producer_id: i64,
) -> (Arc<Coordinator>, TransactionCoordinator) {
    let topics: BTreeMap<String, u32> = [("orders".to_string(), 4)].into();
    let groups = Arc::new(
        Coordinator::builder(Arc::new(store), Arc::new(topics), Arc::new(FirstMember))
            .build()
            .unwrap(),
    );
    bounded("load groups", groups.load()).await.unwrap();
    let txn = TransactionCoordinator::builder(
        groups.clone(),
        markers,
        Arc::new(Ids(AtomicI64::new(first_producer_id))),
    )
    .build()
    .unwrap();
    (groups, txn)
}

/// The transaction coordinator's recovery over PostgreSQL: a commit decided before a
/// restart (PrepareCommit, one marker still due, the group's offsets kept in the record) is
/// finished by the next coordinator on the same database, the offsets with their metadata;
/// an open transaction stays open (as Kafka's coordinator after a move) and its producer ends
/// it; producer ids and epochs carry on.
#[tokio::test]
async fn a_restarted_transaction_coordinator_finishes_what_the_database_kept() {
    let Some(pg) = server().await else { return };
    let orders = |p| TopicPartition::new("orders", p);
    let with_metadata = OffsetAndMetadata::new(42)
        .with_leader_epoch(Some(5))
        .with_metadata("txn meta");
    {
        let markers = Arc::new(Markers::default());
        let first = store(&pg, "txn_recovery").await;
        let (_groups, txn) = coordinators(first, markers.clone(), 1000).await;
        let p = txn.init_producer_id("app-1", 60_000, None).await.unwrap();
        txn.add_partitions("app-1", p.producer_id, p.epoch, &[orders(0), orders(1)])
            .await
            .unwrap();
        txn.add_offsets("app-1", p.producer_id, p.epoch, "g")
            .await
            .unwrap();
        let request = TxnOffsetCommitRequest {
            group_id: "g".into(),
            producer_id: p.producer_id,
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            offsets: [(orders(0), with_metadata.clone())].into(),
        };
        txn.txn_offset_commit("app-1", p.epoch, &request)
            .await
            .unwrap();
        // The commit is decided, but a marker fails: PrepareCommit stays, durably.
        markers.failing.lock().unwrap().insert(orders(1));
        let e = txn
            .end_txn("app-1", p.producer_id, p.epoch, true)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "CONCURRENT_TRANSACTIONS");
        assert_eq!(
            txn.record("app-1").await.unwrap().state,
            TxnState::PrepareCommit
        );
        // app-2: an open transaction.
        let q = txn.init_producer_id("app-2", 60_000, None).await.unwrap();
        txn.add_partitions("app-2", q.producer_id, q.epoch, &[orders(3)])
            .await
            .unwrap();
    }

    let second = bounded(
        "connect",
        PostgresStore::connect(&pg.url("txn_recovery"), 2),
    )
    .await
    .unwrap();
    let stored = load(&second).await;
    assert_eq!(
        stored
            .iter()
            .map(|r| (r.transactional_id.as_str(), r.state))
            .collect::<Vec<_>>(),
        [
            ("app-1", TxnState::PrepareCommit),
            ("app-2", TxnState::Ongoing)
        ]
    );
    let pending = &stored[0].pending_offsets["g"][&orders(0)];
    assert_eq!(
        (
            pending.offset,
            pending.leader_epoch,
            pending.metadata.as_str()
        ),
        (42, Some(5), "txn meta"),
        "the decided commit's offsets, with their metadata"
    );
    let markers = Arc::new(Markers::default());
    let (groups, txn) = coordinators(second, markers.clone(), 2000).await;
    assert_eq!(bounded("load", txn.load()).await.unwrap(), 2);

    let one = txn.record("app-1").await.unwrap();
    assert_eq!(
        (one.state, one.producer_id, one.producer_epoch),
        (TxnState::CompleteCommit, 1000, 0)
    );
    let applied = groups
        .committed_with_metadata("g", &orders(0))
        .await
        .unwrap()
        .expect("the transaction's offsets are committed");
    assert_eq!(
        (
            applied.offset,
            applied.leader_epoch,
            applied.metadata.as_str()
        ),
        (42, Some(5), "txn meta")
    );
    let two = txn.record("app-2").await.unwrap();
    assert_eq!(
        (two.state, two.producer_id, two.producer_epoch),
        (TxnState::Ongoing, 1001, 0),
        "the open transaction stays open"
    );
    let calls = markers.calls.lock().unwrap().clone();
    assert!(
        calls
            .iter()
            .any(|m| m.commit && m.producer_id == 1000 && m.partitions.contains(&orders(1))),
        "the commit marker still due is written again: {calls:?}"
    );
    assert!(
        !calls.iter().any(|m| m.producer_id == 1001),
        "no marker for the open transaction at load: {calls:?}"
    );
    // its producer, still alive, commits it
    txn.end_txn("app-2", 1001, 0, true).await.unwrap();
    let calls = markers.calls.lock().unwrap().clone();
    assert!(
        calls
            .iter()
            .any(|m| m.commit && m.producer_id == 1001 && m.partitions == vec![orders(3)]),
        "commit markers for the transaction its producer ended: {calls:?}"
    );
    // The producer of app-1 carries on with its producer id at the next epoch.
    let again = txn.init_producer_id("app-1", 60_000, None).await.unwrap();
    assert_eq!((again.producer_id, again.epoch), (1000, 1));
    // What the coordinator wrote meanwhile is in the database too.
    let reopened = bounded(
        "connect",
        PostgresStore::connect(&pg.url("txn_recovery"), 1),
    )
    .await
    .unwrap();
    let states: Vec<_> = load(&reopened)
        .await
        .into_iter()
        .map(|r| (r.transactional_id, r.state, r.producer_id, r.producer_epoch))
        .collect();
    assert_eq!(
        states,
        [
            ("app-1".to_string(), TxnState::Empty, 1000, 1),
            ("app-2".to_string(), TxnState::CompleteCommit, 1001, 0)
        ]
    );
}
