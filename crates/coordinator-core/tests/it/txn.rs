//! The transaction coordinator: its state machine, fencing, timers, durability and the
//! group side's transactional offsets. Time is a `ManualClock`; markers go to a fake
//! writer that records them and can fail or hold them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::{MapStore, StoreOp, TestStore, Topics};
use coordinator_core::txn::{
    MarkerError, MarkerWriter, ProducerIdAndEpoch, ProducerIdSource, TransactionCoordinator,
    TxnMarkers, TxnState, TV_2,
};
use coordinator_core::{
    named, ClassicProtocol, CommittedOffsets, ConsumerGroupHeartbeatRequest, Coordinator,
    Generation, JoinGroupRequest, ManualClock, OffsetAndMetadata, StorageErrorKind, SyncAssignment,
    SyncGroupRequest, TopicPartition, TxnOffsetCommitRequest,
};
use tokio::sync::Semaphore;

const ID: &str = "app-1";
const TIMEOUT: i32 = 60_000;

#[derive(Default)]
struct FakeMarkers {
    calls: Mutex<Vec<TxnMarkers>>,
    failing: Mutex<BTreeSet<TopicPartition>>,
    /// When set, every write waits for a permit.
    gate: Mutex<Option<Arc<Semaphore>>>,
    /// Groups whose offsets are completed elsewhere (`routes_group`), and whether those
    /// completions fail.
    routed: Mutex<BTreeSet<String>>,
    routed_fail: Mutex<bool>,
    group_calls: Mutex<Vec<(TxnMarkers, Vec<String>)>>,
}

#[async_trait]
impl MarkerWriter for FakeMarkers {
    async fn write_markers(
        &self,
        markers: &TxnMarkers,
    ) -> Vec<(TopicPartition, Result<(), MarkerError>)> {
        let gate = self.gate.lock().unwrap().clone();
        if let Some(gate) = gate {
            gate.acquire().await.unwrap().forget();
        }
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

    fn routes_group(&self, group_id: &str) -> bool {
        self.routed.lock().unwrap().contains(group_id)
    }

    async fn write_group_markers(
        &self,
        markers: &TxnMarkers,
        groups: &[String],
    ) -> Vec<(String, Result<(), MarkerError>)> {
        self.group_calls
            .lock()
            .unwrap()
            .push((markers.clone(), groups.to_vec()));
        let fail = *self.routed_fail.lock().unwrap();
        groups
            .iter()
            .map(|g| {
                let r = if fail {
                    Err(MarkerError {
                        kafka_code: 6,
                        message: "not the leader".into(),
                    })
                } else {
                    Ok(())
                };
                (g.clone(), r)
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

struct H {
    clock: ManualClock,
    store: Arc<TestStore>,
    groups: Arc<Coordinator>,
    markers: Arc<FakeMarkers>,
    txn: TransactionCoordinator,
}

fn harness() -> H {
    let store = Arc::new(TestStore::new(MapStore::keeping_groups()));
    harness_over(store, ManualClock::new())
}

fn harness_over(store: Arc<TestStore>, clock: ManualClock) -> H {
    let groups = Arc::new(
        Coordinator::builder(
            store.clone(),
            Topics::with(&[("orders", 4)]),
            common::ModuloAssignor::named("modulo"),
        )
        .clock(Arc::new(clock.clone()))
        .session_timeout_ms(60_000)
        .group_min_session_timeout_ms(100)
        .group_initial_rebalance_delay_ms(0)
        .consumer_assignor(named("uniform", common::ModuloAssignor::named("modulo")))
        .build()
        .unwrap(),
    );
    let markers = Arc::new(FakeMarkers::default());
    let txn = TransactionCoordinator::builder(
        groups.clone(),
        markers.clone(),
        Arc::new(Ids(AtomicI64::new(1000))),
    )
    .build()
    .unwrap();
    H {
        clock,
        store,
        groups,
        markers,
        txn,
    }
}

fn tp(p: u32) -> TopicPartition {
    TopicPartition::new("orders", p)
}

fn offsets(entries: &[(u32, i64)]) -> CommittedOffsets {
    entries
        .iter()
        .map(|&(p, o)| (tp(p), OffsetAndMetadata::new(o)))
        .collect()
}

fn commit_req(pid: i64, entries: &[(u32, i64)]) -> TxnOffsetCommitRequest {
    TxnOffsetCommitRequest {
        group_id: "g".into(),
        producer_id: pid,
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        offsets: offsets(entries),
    }
}

async fn state(h: &H) -> TxnState {
    h.txn.record(ID).await.unwrap().state
}

/// Init, two partitions, the group, offsets pending: an Ongoing transaction.
async fn ongoing(h: &H) -> ProducerIdAndEpoch {
    let p = h.txn.init_producer_id(ID, TIMEOUT, None).await.unwrap();
    h.txn
        .add_partitions(ID, p.producer_id, p.epoch, &[tp(0), tp(1)])
        .await
        .unwrap();
    h.txn
        .add_offsets(ID, p.producer_id, p.epoch, "g")
        .await
        .unwrap();
    h.txn
        .txn_offset_commit(ID, p.epoch, &commit_req(p.producer_id, &[(0, 42)]))
        .await
        .unwrap();
    p
}

#[tokio::test]
async fn a_new_id_gets_epoch_0_and_each_init_bumps_it() {
    let h = harness();
    let a = h.txn.init_producer_id(ID, TIMEOUT, None).await.unwrap();
    assert_eq!((a.producer_id, a.epoch), (1000, 0));
    let b = h.txn.init_producer_id(ID, TIMEOUT, None).await.unwrap();
    assert_eq!((b.producer_id, b.epoch), (1000, 1));
    let other = h
        .txn
        .init_producer_id("app-2", TIMEOUT, None)
        .await
        .unwrap();
    assert_eq!(other.producer_id, 1001);
    assert_eq!(state(&h).await, TxnState::Empty);
}

#[tokio::test]
async fn init_refuses_empty_ids_and_timeouts_above_the_maximum() {
    let h = harness();
    let e = h.txn.init_producer_id("", TIMEOUT, None).await.unwrap_err();
    assert_eq!((e.code(), e.kafka_code()), ("INVALID_REQUEST", 42));
    let e = h.txn.init_producer_id(ID, 900_001, None).await.unwrap_err();
    assert_eq!(
        (e.code(), e.kafka_code()),
        ("INVALID_TRANSACTION_TIMEOUT", 50)
    );
    let e = h.txn.init_producer_id(ID, 0, None).await.unwrap_err();
    assert_eq!(e.kafka_code(), 50);
    assert!(h.txn.record(ID).await.is_none(), "nothing was created");
    assert!(h.txn.init_producer_id(ID, 900_000, None).await.is_ok());
}

#[tokio::test]
async fn commit_writes_markers_everywhere_applies_offsets_and_a_retry_succeeds() {
    let h = harness();
    let p = ongoing(&h).await;
    assert_eq!(state(&h).await, TxnState::Ongoing);
    // Pending offsets are invisible, but make the partition unstable.
    assert_eq!(h.groups.committed("g", &tp(0)).await.unwrap(), None);
    assert_eq!(
        h.groups.pending_txn_partitions("g"),
        BTreeSet::from([tp(0)])
    );
    h.txn
        .end_txn(ID, p.producer_id, p.epoch, true)
        .await
        .unwrap();
    let calls = h.markers.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    assert!(calls[0].commit);
    assert_eq!(calls[0].partitions, vec![tp(0), tp(1)]);
    assert_eq!(
        (calls[0].producer_id, calls[0].producer_epoch),
        (p.producer_id, 0)
    );
    assert_eq!(h.groups.committed("g", &tp(0)).await.unwrap(), Some(42));
    assert!(h.groups.pending_txn_partitions("g").is_empty());
    assert_eq!(state(&h).await, TxnState::CompleteCommit);
    // The retry of the same EndTxn succeeds; the other outcome does not.
    h.txn
        .end_txn(ID, p.producer_id, p.epoch, true)
        .await
        .unwrap();
    let e = h
        .txn
        .end_txn(ID, p.producer_id, p.epoch, false)
        .await
        .unwrap_err();
    assert_eq!((e.code(), e.kafka_code()), ("INVALID_TXN_STATE", 48));
    assert_eq!(h.markers.calls.lock().unwrap().len(), 1, "no more markers");
}

#[tokio::test]
async fn abort_writes_abort_markers_and_drops_the_offsets() {
    let h = harness();
    let p = ongoing(&h).await;
    h.txn
        .end_txn(ID, p.producer_id, p.epoch, false)
        .await
        .unwrap();
    assert!(!h.markers.calls.lock().unwrap()[0].commit);
    assert_eq!(h.groups.committed("g", &tp(0)).await.unwrap(), None);
    assert!(h.groups.pending_txn_partitions("g").is_empty());
    assert_eq!(state(&h).await, TxnState::CompleteAbort);
    let e = h
        .txn
        .end_txn(ID, p.producer_id, p.epoch, true)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "INVALID_TXN_STATE");
}

#[tokio::test]
async fn end_txn_checks_state_producer_id_and_epoch() {
    let h = harness();
    let p = h.txn.init_producer_id(ID, TIMEOUT, None).await.unwrap();
    let e = h
        .txn
        .end_txn(ID, p.producer_id, p.epoch, true)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "INVALID_TXN_STATE", "Empty");
    let e = h.txn.end_txn(ID, 7, p.epoch, true).await.unwrap_err();
    assert_eq!(
        (e.code(), e.kafka_code()),
        ("INVALID_PRODUCER_ID_MAPPING", 49)
    );
    let e = h.txn.end_txn("nobody", 7, 0, true).await.unwrap_err();
    assert_eq!(e.kafka_code(), 49);
    let e = h
        .txn
        .add_partitions(ID, p.producer_id, p.epoch + 1, &[tp(0)])
        .await
        .unwrap_err();
    assert_eq!((e.code(), e.kafka_code()), ("PRODUCER_FENCED", 90));
    // KIP-588: older request versions hear INVALID_PRODUCER_EPOCH.
    assert_eq!(e.kafka_code_for(false), 47);
    assert_eq!(e.kafka_code_for(true), 90);
    assert_eq!(
        state(&h).await,
        TxnState::Empty,
        "a refusal changes nothing"
    );
}

#[tokio::test]
async fn a_second_instance_fences_the_first_and_aborts_its_transaction() {
    let h = harness();
    let old = ongoing(&h).await;
    let e = h.txn.init_producer_id(ID, TIMEOUT, None).await.unwrap_err();
    assert_eq!((e.code(), e.kafka_code()), ("CONCURRENT_TRANSACTIONS", 51));
    // Aborted with a bumped epoch: the markers fence the old instance on every partition.
    let calls = h.markers.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    assert!(!calls[0].commit);
    assert_eq!(calls[0].producer_epoch, 1);
    assert_eq!(state(&h).await, TxnState::CompleteAbort);
    assert_eq!(h.groups.committed("g", &tp(0)).await.unwrap(), None);
    // The client retries and gets the next epoch.
    let new = h.txn.init_producer_id(ID, TIMEOUT, None).await.unwrap();
    assert_eq!((new.producer_id, new.epoch), (old.producer_id, 2));
    // The old instance is fenced everywhere.
    let e = h
        .txn
        .end_txn(ID, old.producer_id, old.epoch, true)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "PRODUCER_FENCED");
    let e = h
        .txn
        .add_offsets(ID, old.producer_id, old.epoch, "g")
        .await
        .unwrap_err();
    assert_eq!(e.code(), "PRODUCER_FENCED");
}

#[tokio::test]
async fn kip_360_bumps_the_current_epoch_answers_a_retry_and_fences_others() {
    let h = harness();
    let p = h.txn.init_producer_id(ID, TIMEOUT, None).await.unwrap();
    let bumped = h.txn.init_producer_id(ID, TIMEOUT, Some(p)).await.unwrap();
    assert_eq!((bumped.producer_id, bumped.epoch), (p.producer_id, 1));
    // The same request again (its answer was lost): the same answer, no second bump.
    let retry = h.txn.init_producer_id(ID, TIMEOUT, Some(p)).await.unwrap();
    assert_eq!(retry, bumped);
    // An epoch that is neither: fenced.
    let stale = ProducerIdAndEpoch {
        producer_id: p.producer_id,
        epoch: 7,
    };
    let e = h
        .txn
        .init_producer_id(ID, TIMEOUT, Some(stale))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "PRODUCER_FENCED");
    assert_eq!(e.kafka_code_for(false), 47);
    // Another producer id: fenced.
    let other = ProducerIdAndEpoch {
        producer_id: 5,
        epoch: 1,
    };
    let e = h
        .txn
        .init_producer_id(ID, TIMEOUT, Some(other))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "PRODUCER_FENCED");
    assert_eq!(h.txn.record(ID).await.unwrap().producer_epoch, 1);
    // The wire's half-given pair is refused.
    assert_eq!(
        ProducerIdAndEpoch::from_wire(5, -1)
            .unwrap_err()
            .kafka_code(),
        42
    );
    assert_eq!(ProducerIdAndEpoch::from_wire(-1, -1).unwrap(), None);
}

#[tokio::test]
async fn a_timed_out_transaction_is_aborted_and_its_producer_fenced() {
    let h = harness();
    let p = h.txn.init_producer_id(ID, 1_000, None).await.unwrap();
    h.txn
        .add_partitions(ID, p.producer_id, p.epoch, &[tp(3)])
        .await
        .unwrap();
    // Not before the cleanup interval, and not while within its timeout.
    h.clock.advance(1_000);
    assert_eq!(h.txn.handle_timeout().await.aborted.len(), 0);
    h.clock.advance(9_000);
    let report = h.txn.handle_timeout().await;
    assert_eq!(report.aborted, vec![ID.to_string()]);
    assert_eq!(state(&h).await, TxnState::CompleteAbort);
    let calls = h.markers.calls.lock().unwrap().clone();
    assert_eq!(calls[0].partitions, vec![tp(3)]);
    assert_eq!(calls[0].producer_epoch, 1);
    let e = h
        .txn
        .end_txn(ID, p.producer_id, p.epoch, true)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "PRODUCER_FENCED");
    assert_eq!(h.txn.poll_timeout(), 20_000);
}

#[tokio::test]
async fn idle_ids_expire_after_the_expiration_time() {
    let store = Arc::new(TestStore::new(MapStore::keeping_groups()));
    let clock = ManualClock::new();
    let mut h = harness_over(store, clock);
    h.txn = TransactionCoordinator::builder(
        h.groups.clone(),
        h.markers.clone(),
        Arc::new(Ids(AtomicI64::new(1))),
    )
    .transactional_id_expiration_ms(50_000)
    .build()
    .unwrap();
    h.txn.init_producer_id(ID, TIMEOUT, None).await.unwrap();
    h.clock.advance(50_000);
    assert!(h.txn.handle_timeout().await.expired.is_empty());
    h.clock.advance(10_000);
    assert_eq!(h.txn.handle_timeout().await.expired, vec![ID.to_string()]);
    assert!(h.txn.record(ID).await.is_none());
    let inner = h.store.inner().unwrap();
    assert!(inner.transactions.lock().unwrap().is_empty(), "tombstoned");
    // A new init starts over with a new producer id.
    let p = h.txn.init_producer_id(ID, TIMEOUT, None).await.unwrap();
    assert_eq!((p.producer_id, p.epoch), (2, 0));
}

#[tokio::test]
async fn a_marker_failure_keeps_prepare_commit_until_a_retry_completes_it() {
    let h = harness();
    let p = ongoing(&h).await;
    h.markers.failing.lock().unwrap().insert(tp(1));
    let e = h
        .txn
        .end_txn(ID, p.producer_id, p.epoch, true)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "CONCURRENT_TRANSACTIONS");
    let r = h.txn.record(ID).await.unwrap();
    assert_eq!(r.state, TxnState::PrepareCommit);
    assert_eq!(
        r.partitions,
        BTreeSet::from([tp(1)]),
        "only the failed one is due"
    );
    // The decision is durable, with the group's offsets.
    let stored = h.store.inner().unwrap().transactions.lock().unwrap()[ID].clone();
    assert_eq!(stored.state, TxnState::PrepareCommit);
    assert_eq!(stored.pending_offsets["g"], offsets(&[(0, 42)]));
    let e = h
        .txn
        .add_partitions(ID, p.producer_id, p.epoch, &[tp(2)])
        .await
        .unwrap_err();
    assert_eq!(e.code(), "CONCURRENT_TRANSACTIONS");
    let e = h
        .txn
        .end_txn(ID, p.producer_id, p.epoch, false)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "INVALID_TXN_STATE");
    h.markers.failing.lock().unwrap().clear();
    h.txn
        .end_txn(ID, p.producer_id, p.epoch, true)
        .await
        .unwrap();
    assert_eq!(state(&h).await, TxnState::CompleteCommit);
    assert_eq!(h.markers.calls.lock().unwrap()[1].partitions, vec![tp(1)]);
    assert_eq!(h.groups.committed("g", &tp(0)).await.unwrap(), Some(42));
}

#[tokio::test]
async fn the_timer_completes_an_incomplete_transaction() {
    let h = harness();
    let p = ongoing(&h).await;
    h.markers.failing.lock().unwrap().insert(tp(0));
    assert!(h
        .txn
        .end_txn(ID, p.producer_id, p.epoch, false)
        .await
        .is_err());
    h.clock.advance(10_000);
    assert!(
        h.txn.handle_timeout().await.completed.is_empty(),
        "still failing"
    );
    h.markers.failing.lock().unwrap().clear();
    h.clock.advance(10_000);
    assert_eq!(h.txn.handle_timeout().await.completed, vec![ID.to_string()]);
    assert_eq!(state(&h).await, TxnState::CompleteAbort);
}

#[tokio::test]
async fn a_store_failure_changes_nothing() {
    let h = harness();
    let p = ongoing(&h).await;
    h.store
        .fail(StoreOp::WriteGroup, StorageErrorKind::Io, "disk gone");
    let e = h
        .txn
        .end_txn(ID, p.producer_id, p.epoch, true)
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.kafka_code()),
        ("COORDINATOR_NOT_AVAILABLE", 15)
    );
    assert_eq!(state(&h).await, TxnState::Ongoing);
    assert!(
        h.markers.calls.lock().unwrap().is_empty(),
        "no marker before Prepare*"
    );
    let e = h
        .txn
        .init_producer_id("app-2", TIMEOUT, None)
        .await
        .unwrap_err();
    assert_eq!(e.kafka_code(), 15);
    assert!(h.txn.record("app-2").await.is_none());
    h.store.heal(StoreOp::WriteGroup);
    h.txn
        .end_txn(ID, p.producer_id, p.epoch, true)
        .await
        .unwrap();
}

#[tokio::test]
async fn calls_during_an_end_txn_in_progress_get_concurrent_transactions() {
    let h = Arc::new(harness());
    let p = ongoing(&h).await;
    let gate = Arc::new(Semaphore::new(0));
    *h.markers.gate.lock().unwrap() = Some(gate.clone());
    let h2 = h.clone();
    let end = tokio::spawn(async move { h2.txn.end_txn(ID, p.producer_id, p.epoch, true).await });
    // Wait until the EndTxn holds the id (its Prepare* is stored).
    while h
        .store
        .inner()
        .unwrap()
        .transactions
        .lock()
        .unwrap()
        .get(ID)
        .map(|r| r.state)
        != Some(TxnState::PrepareCommit)
    {
        tokio::task::yield_now().await;
    }
    let e = h
        .txn
        .add_partitions(ID, p.producer_id, p.epoch, &[tp(2)])
        .await
        .unwrap_err();
    assert_eq!(e.code(), "CONCURRENT_TRANSACTIONS");
    let e = h
        .txn
        .end_txn(ID, p.producer_id, p.epoch, true)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "CONCURRENT_TRANSACTIONS");
    gate.add_permits(10);
    end.await.unwrap().unwrap();
    assert_eq!(state(&h).await, TxnState::CompleteCommit);
}

#[tokio::test]
async fn bounds_refuse_too_many_ids_and_partitions() {
    let h = harness();
    let txn = TransactionCoordinator::builder(
        h.groups.clone(),
        h.markers.clone(),
        Arc::new(Ids(AtomicI64::new(1))),
    )
    .max_transactional_ids(1)
    .max_partitions_per_transaction(2)
    .build()
    .unwrap();
    let p = txn.init_producer_id(ID, TIMEOUT, None).await.unwrap();
    let e = txn
        .init_producer_id("app-2", TIMEOUT, None)
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.kafka_code()),
        ("THROTTLING_QUOTA_EXCEEDED", 89)
    );
    txn.add_partitions(ID, p.producer_id, p.epoch, &[tp(0), tp(1)])
        .await
        .unwrap();
    let e = txn
        .add_offsets(ID, p.producer_id, p.epoch, "g")
        .await
        .unwrap_err();
    assert_eq!(e.kafka_code(), 89);
    assert_eq!(txn.record(ID).await.unwrap().groups.len(), 0);
}

/// One classic member alone in a Stable group "g": (member id, generation).
async fn classic_member(h: &H) -> (String, Generation) {
    let protocol = ClassicProtocol::new("range", b"m".to_vec()).with_topics(["orders"]);
    let req = JoinGroupRequest {
        group_id: "g".into(),
        member_id: String::new(),
        group_instance_id: None,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![protocol],
        require_known_member_id: false,
        supports_skip_assignment: false,
        reason: None,
    };
    let groups = h.groups.clone();
    let join = tokio::spawn(async move { groups.classic().join(req).await });
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    h.groups.handle_timeout().await;
    let joined = join.await.unwrap().unwrap();
    let sync = SyncGroupRequest {
        group_id: "g".into(),
        generation: Some(joined.generation),
        member_id: joined.member_id.clone(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments: vec![SyncAssignment {
            member_id: joined.member_id.clone(),
            assignment: b"all".to_vec().into(),
            partitions: None,
        }],
    };
    h.groups.classic().sync(sync).await.unwrap();
    (joined.member_id, joined.generation)
}

#[tokio::test]
async fn txn_offset_commits_are_fenced_by_producer_epoch_and_group_generation() {
    let h = harness();
    let (m1, generation) = classic_member(&h).await;
    let p = h.txn.init_producer_id(ID, TIMEOUT, None).await.unwrap();
    // Without AddOffsetsToTxn: no open transaction with the group.
    let e = h
        .txn
        .txn_offset_commit(ID, p.epoch, &commit_req(p.producer_id, &[(0, 1)]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "INVALID_TXN_STATE");
    h.txn
        .add_offsets(ID, p.producer_id, p.epoch, "g")
        .await
        .unwrap();
    let member = |generation: i32, member: &str| TxnOffsetCommitRequest {
        generation_id: generation,
        member_id: member.into(),
        ..commit_req(p.producer_id, &[(0, 5)])
    };
    let current = i32::try_from(generation.get()).unwrap();
    let e = h
        .txn
        .txn_offset_commit(ID, p.epoch, &member(current + 1, &m1))
        .await
        .unwrap_err();
    assert_eq!((e.code(), e.kafka_code()), ("ILLEGAL_GENERATION", 22));
    let e = h
        .txn
        .txn_offset_commit(ID, p.epoch, &member(current, "ghost"))
        .await
        .unwrap_err();
    assert_eq!(e.kafka_code(), 25);
    let e = h
        .txn
        .txn_offset_commit(ID, p.epoch + 1, &member(current, &m1))
        .await
        .unwrap_err();
    assert_eq!((e.code(), e.kafka_code()), ("INVALID_PRODUCER_EPOCH", 47));
    assert!(
        h.groups.pending_txn_partitions("g").is_empty(),
        "nothing stored"
    );
    // The member of the current generation, and an old client without group metadata.
    h.txn
        .txn_offset_commit(ID, p.epoch, &member(current, &m1))
        .await
        .unwrap();
    h.txn
        .txn_offset_commit(ID, p.epoch, &commit_req(p.producer_id, &[(1, 9)]))
        .await
        .unwrap();
    assert_eq!(h.groups.pending_txn_partitions("g").len(), 2);
}

#[tokio::test]
async fn recovery_keeps_ongoing_and_finishes_prepare_commit() {
    let store = Arc::new(TestStore::new(MapStore::keeping_groups()));
    let clock = ManualClock::new();
    {
        let h = harness_over(store.clone(), clock.clone());
        // app-1: a PrepareCommit stored just before a crash, with its group's offsets.
        let p = ongoing(&h).await;
        let mut prepared = h.txn.record(ID).await.unwrap();
        prepared.state = TxnState::PrepareCommit;
        prepared.pending_offsets = [("g".to_string(), offsets(&[(0, 42)]))].into();
        store
            .inner()
            .unwrap()
            .transactions
            .lock()
            .unwrap()
            .insert(ID.to_string(), prepared);
        let _ = p;
        // app-2: Ongoing.
        let q = h
            .txn
            .init_producer_id("app-2", TIMEOUT, None)
            .await
            .unwrap();
        h.txn
            .add_partitions("app-2", q.producer_id, q.epoch, &[tp(3)])
            .await
            .unwrap();
        // app-3: CompleteAbort.
        let r = h
            .txn
            .init_producer_id("app-3", TIMEOUT, None)
            .await
            .unwrap();
        h.txn
            .add_partitions("app-3", r.producer_id, r.epoch, &[tp(2)])
            .await
            .unwrap();
        h.txn
            .end_txn("app-3", r.producer_id, r.epoch, false)
            .await
            .unwrap();
    }
    // A restart: a new coordinator over the same store.
    let h = harness_over(store, clock.clone());
    assert_eq!(h.groups.committed("g", &tp(0)).await.unwrap(), None);
    assert_eq!(h.txn.load().await.unwrap(), 3);
    assert_eq!(state(&h).await, TxnState::CompleteCommit);
    assert_eq!(h.groups.committed("g", &tp(0)).await.unwrap(), Some(42));
    // Ongoing stays open, as Kafka's coordinator keeps it after a move: its producer may
    // still end it.
    let two = h.txn.record("app-2").await.unwrap();
    assert_eq!((two.state, two.producer_epoch), (TxnState::Ongoing, 0));
    let three = h.txn.record("app-3").await.unwrap();
    assert_eq!(
        (three.state, three.producer_epoch),
        (TxnState::CompleteAbort, 0)
    );
    let calls = h.markers.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "markers again for app-1 only");
    assert!(calls
        .iter()
        .any(|m| m.commit && m.partitions.contains(&tp(0))));
    // Its timeout still counts from its start: past it, the timer aborts it and fences its
    // producer.
    assert!(h.txn.handle_timeout().await.aborted.is_empty());
    clock.advance(u64::try_from(TIMEOUT).unwrap() + 1);
    assert_eq!(
        h.txn.handle_timeout().await.aborted,
        vec!["app-2".to_string()]
    );
    let two = h.txn.record("app-2").await.unwrap();
    assert_eq!(
        (two.state, two.producer_epoch),
        (TxnState::CompleteAbort, 1)
    );
    let calls = h.markers.calls.lock().unwrap().clone();
    assert!(calls
        .iter()
        .any(|m| !m.commit && m.partitions == vec![tp(3)] && m.producer_epoch == 1));
}

#[tokio::test]
async fn describe_and_list_show_state_producer_and_partitions() {
    let h = harness();
    h.clock.advance(5);
    let p = ongoing(&h).await;
    h.txn
        .init_producer_id("app-2", TIMEOUT, None)
        .await
        .unwrap();
    let described = h.txn.describe(&[ID.to_string(), "nope".to_string()]).await;
    let d = described[0].1.as_ref().unwrap();
    assert_eq!(d.state, TxnState::Ongoing);
    assert_eq!(
        (d.producer_id, d.producer_epoch, d.timeout_ms),
        (p.producer_id, 0, TIMEOUT)
    );
    assert_eq!(d.start_ms, 5);
    assert_eq!(d.partitions, BTreeSet::from([tp(0), tp(1)]));
    assert_eq!(
        described[1].1.as_ref().unwrap_err().kafka_code(),
        105,
        "TRANSACTIONAL_ID_NOT_FOUND"
    );
    let (all, unknown) = h.txn.list(&[], &[], -1).await;
    assert_eq!(all.len(), 2);
    assert!(unknown.is_empty());
    let (ongoing_only, _) = h.txn.list(&["Ongoing".into()], &[], -1).await;
    assert_eq!(ongoing_only.len(), 1);
    assert_eq!(ongoing_only[0].transactional_id, ID);
    let (by_pid, _) = h.txn.list(&[], &[p.producer_id], -1).await;
    assert_eq!(by_pid.len(), 1);
    let (none, unknown) = h.txn.list(&["Bogus".into()], &[], -1).await;
    assert!(none.is_empty());
    assert_eq!(unknown, vec!["Bogus".to_string()]);
    h.clock.advance(100);
    assert_eq!(h.txn.list(&[], &[], 99).await.0.len(), 1, "running 100 ms");
    assert_eq!(h.txn.list(&[], &[], 100).await.0.len(), 0);
}

#[tokio::test]
async fn in_a_consumer_protocol_group_the_member_epoch_fences_txn_offset_commits() {
    let h = harness();
    let joined = h
        .groups
        .consumer()
        .heartbeat(&ConsumerGroupHeartbeatRequest::join("g", "m1", ["orders"]))
        .await
        .unwrap();
    let p = h.txn.init_producer_id(ID, TIMEOUT, None).await.unwrap();
    h.txn
        .add_offsets(ID, p.producer_id, p.epoch, "g")
        .await
        .unwrap();
    let member = |epoch: i32, member: &str| TxnOffsetCommitRequest {
        generation_id: epoch,
        member_id: member.into(),
        ..commit_req(p.producer_id, &[(0, 5)])
    };
    let e = h
        .txn
        .txn_offset_commit(
            ID,
            p.epoch,
            &member(joined.member_epoch + 1, &joined.member_id),
        )
        .await
        .unwrap_err();
    assert_eq!((e.code(), e.kafka_code()), ("STALE_MEMBER_EPOCH", 113));
    let e = h
        .txn
        .txn_offset_commit(ID, p.epoch, &member(joined.member_epoch, "ghost"))
        .await
        .unwrap_err();
    assert_eq!(e.kafka_code(), 25, "UNKNOWN_MEMBER_ID");
    assert!(h.groups.pending_txn_partitions("g").is_empty());
    h.txn
        .txn_offset_commit(ID, p.epoch, &member(joined.member_epoch, &joined.member_id))
        .await
        .unwrap();
    assert_eq!(
        h.groups.pending_txn_partitions("g"),
        BTreeSet::from([tp(0)])
    );
}

// ---- transactional ids moving between brokers (coordinator slots) ----

/// Awaits a spawned call, failing the test if it does not end.
async fn answered<T>(call: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(5), call)
        .await
        .expect("the call never ended")
        .unwrap()
}

#[tokio::test]
async fn unload_where_forgets_matching_ids_and_a_later_load_takes_the_stores_state() {
    let store = Arc::new(TestStore::new(MapStore::keeping_groups()));
    let clock = ManualClock::new();
    let a = harness_over(store.clone(), clock.clone());
    let p = ongoing(&a).await;
    let q = a
        .txn
        .init_producer_id("app-2", TIMEOUT, None)
        .await
        .unwrap();
    assert_eq!(
        a.groups.pending_txn_partitions("g"),
        BTreeSet::from([tp(0)])
    );

    assert_eq!(a.txn.unload_where(|id| id == ID).await, 1);

    assert!(a.txn.record(ID).await.is_none());
    assert_eq!(
        a.txn.record("app-2").await.unwrap().producer_id,
        q.producer_id,
        "the other id stays"
    );
    assert!(
        a.groups.pending_txn_partitions("g").is_empty(),
        "its pending offsets went with it"
    );
    // Calls on it find an id this coordinator never knew.
    let e = a
        .txn
        .end_txn(ID, p.producer_id, p.epoch, true)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "INVALID_PRODUCER_ID_MAPPING");
    let e = a
        .txn
        .add_partitions(ID, p.producer_id, p.epoch, &[tp(2)])
        .await
        .unwrap_err();
    assert_eq!(e.code(), "INVALID_PRODUCER_ID_MAPPING");
    let described = a.txn.describe(&[ID.to_string()]).await;
    assert_eq!(
        described[0].1.as_ref().unwrap_err().code(),
        "TRANSACTIONAL_ID_NOT_FOUND"
    );
    let (listed, _) = a.txn.list(&[], &[], -1).await;
    assert_eq!(
        listed
            .iter()
            .map(|t| t.transactional_id.as_str())
            .collect::<Vec<_>>(),
        ["app-2"]
    );
    // Its timer never runs here: past its timeout nothing is aborted, no marker written.
    clock.advance(u64::try_from(TIMEOUT).unwrap() + 10_001);
    assert_eq!(a.txn.handle_timeout().await.aborted, Vec::<String>::new());
    assert!(a.markers.calls.lock().unwrap().is_empty());
    let stored = store.inner().unwrap().transactions.lock().unwrap()[ID].clone();
    assert_eq!(stored.state, TxnState::Ongoing, "nothing was written");

    // Broker b takes it over from the store, and its producer commits there.
    let b = harness_over(store.clone(), clock.clone());
    assert_eq!(b.txn.load_where(|id| id == ID).await.unwrap(), 1);
    assert!(b.txn.record("app-2").await.is_none(), "not b's");
    b.txn
        .end_txn(ID, p.producer_id, p.epoch, true)
        .await
        .unwrap();
    assert_eq!(state(&b).await, TxnState::CompleteCommit);
    assert_eq!(b.markers.calls.lock().unwrap().len(), 1);
    // The id comes back to a: it loads what b left, not what it had.
    assert_eq!(b.txn.unload_where(|_| true).await, 1);
    assert_eq!(a.txn.load_where(|id| id == ID).await.unwrap(), 1);
    assert_eq!(state(&a).await, TxnState::CompleteCommit);
    let next = a.txn.init_producer_id(ID, TIMEOUT, None).await.unwrap();
    assert_eq!((next.producer_id, next.epoch), (p.producer_id, 1));
    // An id live here is left as it is by a later load.
    assert_eq!(a.txn.load_where(|_| true).await.unwrap(), 0);
    assert_eq!(a.txn.record(ID).await.unwrap().producer_epoch, 1);
}

#[tokio::test]
async fn an_unloaded_prepare_commit_is_finished_by_the_coordinator_that_loads_it() {
    let store = Arc::new(TestStore::new(MapStore::keeping_groups()));
    let clock = ManualClock::new();
    let a = harness_over(store.clone(), clock.clone());
    let p = ongoing(&a).await;
    // The commit is decided (PrepareCommit stored with the group's offsets), but the
    // offsets cannot be written yet.
    store.fail(StoreOp::Commit, StorageErrorKind::Io, "disk gone");
    let e = a
        .txn
        .end_txn(ID, p.producer_id, p.epoch, true)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "CONCURRENT_TRANSACTIONS");
    assert_eq!(state(&a).await, TxnState::PrepareCommit);
    assert_eq!(
        a.groups.pending_txn_partitions("g"),
        BTreeSet::from([tp(0)])
    );

    assert_eq!(a.txn.unload_where(|id| id == ID).await, 1);
    assert!(
        a.groups.pending_txn_partitions("g").is_empty(),
        "the coordinator that loads the transaction decides its offsets"
    );
    store.heal(StoreOp::Commit);
    // a's timer no longer retries it.
    clock.advance(20_000);
    assert_eq!(a.txn.handle_timeout().await.completed, Vec::<String>::new());
    assert_eq!(a.groups.committed("g", &tp(0)).await.unwrap(), None);

    // b loads it: the offsets from its record are applied, the transaction completed.
    let b = harness_over(store.clone(), clock.clone());
    assert_eq!(b.txn.load_where(|id| id == ID).await.unwrap(), 1);
    assert_eq!(state(&b).await, TxnState::CompleteCommit);
    assert_eq!(b.groups.committed("g", &tp(0)).await.unwrap(), Some(42));
    assert!(b.groups.pending_txn_partitions("g").is_empty());
}

#[tokio::test]
async fn calls_waiting_for_an_unloaded_ids_slot_are_answered() {
    let h = Arc::new(harness());
    let p = ongoing(&h).await;
    let gate = Arc::new(Semaphore::new(0));
    *h.markers.gate.lock().unwrap() = Some(gate.clone());
    let h2 = h.clone();
    let end = tokio::spawn(async move { h2.txn.end_txn(ID, p.producer_id, p.epoch, true).await });
    // Wait until the EndTxn holds the id (its Prepare* is stored, its markers held).
    while h
        .store
        .inner()
        .unwrap()
        .transactions
        .lock()
        .unwrap()
        .get(ID)
        .map(|r| r.state)
        != Some(TxnState::PrepareCommit)
    {
        tokio::task::yield_now().await;
    }
    // A read waits for the id's slot, then the unload does.
    let h2 = h.clone();
    let read = tokio::spawn(async move { h2.txn.record(ID).await });
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    let h2 = h.clone();
    let unload = tokio::spawn(async move { h2.txn.unload_where(|id| id == ID).await });
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert!(!read.is_finished() && !unload.is_finished());
    // A call that starts now finds the id gone from the map at once (it does not wait).
    let described = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        h.txn.describe(&[ID.to_string()]),
    )
    .await
    .expect("a call on an unloaded id waited for its slot");
    assert_eq!(
        described[0].1.as_ref().unwrap_err().code(),
        "TRANSACTIONAL_ID_NOT_FOUND"
    );
    // The EndTxn ends; the read queued before the unload sees its result, the unload
    // empties the slot after it.
    gate.add_permits(10);
    answered(end).await.unwrap();
    assert_eq!(
        answered(read).await.map(|r| r.state),
        Some(TxnState::CompleteCommit)
    );
    assert_eq!(answered(unload).await, 1);
    assert!(h.txn.record(ID).await.is_none());
}

/// A group whose coordinator is elsewhere (`MarkerWriter::routes_group`): its offsets are
/// completed through `write_group_markers` (a marker into its `__consumer_offsets`
/// partition), not by the local group coordinator; a failure leaves the transaction in
/// PrepareCommit with the group due, and the retry completes it.
#[tokio::test]
async fn a_routed_group_is_completed_through_the_marker_writer_and_retried() {
    let h = harness();
    h.markers.routed.lock().unwrap().insert("remote".into());
    let p = ongoing(&h).await;
    h.txn
        .add_offsets(ID, p.producer_id, p.epoch, "remote")
        .await
        .unwrap();
    *h.markers.routed_fail.lock().unwrap() = true;
    let e = h
        .txn
        .end_txn(ID, p.producer_id, p.epoch, true)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "CONCURRENT_TRANSACTIONS");
    let record = h.txn.record(ID).await.unwrap();
    assert_eq!(record.state, TxnState::PrepareCommit);
    assert_eq!(
        record.groups.iter().cloned().collect::<Vec<_>>(),
        ["remote"],
        "the local group is done, the routed one still due"
    );
    assert_eq!(
        h.groups.committed("g", &tp(0)).await.unwrap(),
        Some(42),
        "the local group's offsets were applied locally"
    );
    *h.markers.routed_fail.lock().unwrap() = false;
    h.txn
        .end_txn(ID, p.producer_id, p.epoch, true)
        .await
        .unwrap();
    assert_eq!(state(&h).await, TxnState::CompleteCommit);
    let calls = h.markers.group_calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2);
    for (markers, groups) in calls {
        assert_eq!(groups, ["remote"]);
        assert!(markers.commit && markers.partitions.is_empty());
        assert_eq!(
            (markers.producer_id, markers.producer_epoch),
            (p.producer_id, p.epoch)
        );
    }
}

#[tokio::test]
async fn pending_txn_groups_lists_the_groups_of_a_producer() {
    let h = harness();
    let p = ongoing(&h).await;
    assert_eq!(h.groups.pending_txn_groups(p.producer_id), ["g"]);
    assert!(h.groups.pending_txn_groups(p.producer_id + 1).is_empty());
    h.txn
        .end_txn(ID, p.producer_id, p.epoch, false)
        .await
        .unwrap();
    assert!(h.groups.pending_txn_groups(p.producer_id).is_empty());
}

// Transaction version 2 (KIP-890 part 2): an epoch bump at every EndTxn.

/// Init, then partitions 0 and 1 added implicitly (transaction version 2).
async fn ongoing_v2(h: &H) -> ProducerIdAndEpoch {
    let p = h.txn.init_producer_id(ID, TIMEOUT, None).await.unwrap();
    h.txn
        .add_partitions_with_version(ID, p.producer_id, p.epoch, &[tp(0), tp(1)], TV_2)
        .await
        .unwrap();
    p
}

#[tokio::test]
async fn tv2_end_txn_bumps_the_epoch_and_the_markers_carry_it() {
    let h = harness();
    let p = ongoing_v2(&h).await;
    let r = h.txn.record(ID).await.unwrap();
    assert_eq!((r.state, r.transaction_version), (TxnState::Ongoing, 2));
    h.txn
        .add_offsets_with_version(ID, p.producer_id, p.epoch, "g", TV_2)
        .await
        .unwrap();
    h.txn
        .txn_offset_commit(ID, p.epoch, &commit_req(p.producer_id, &[(0, 42)]))
        .await
        .unwrap();
    let next = h
        .txn
        .end_txn_with_version(ID, p.producer_id, p.epoch, true, TV_2)
        .await
        .unwrap();
    assert_eq!((next.producer_id, next.epoch), (p.producer_id, p.epoch + 1));
    let calls = h.markers.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].producer_epoch, calls[0].transaction_version),
        (p.epoch + 1, 2),
        "the markers carry the bumped epoch"
    );
    assert_eq!(h.groups.committed("g", &tp(0)).await.unwrap(), Some(42));
    let r = h.txn.record(ID).await.unwrap();
    assert_eq!(
        (r.state, r.producer_epoch, r.transaction_version),
        (TxnState::CompleteCommit, p.epoch + 1, 2)
    );
    // The old epoch is fenced for the next transaction; the bumped one opens it.
    let e = h
        .txn
        .add_partitions_with_version(ID, p.producer_id, p.epoch, &[tp(2)], TV_2)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "PRODUCER_FENCED");
    h.txn
        .add_partitions_with_version(ID, p.producer_id, next.epoch, &[tp(2)], TV_2)
        .await
        .unwrap();
    let again = h
        .txn
        .end_txn_with_version(ID, p.producer_id, next.epoch, false, TV_2)
        .await
        .unwrap();
    assert_eq!(again.epoch, p.epoch + 2);
}

#[tokio::test]
async fn tv2_a_retried_end_txn_gets_the_bumped_epoch_and_the_current_epoch_is_fenced() {
    let h = harness();
    let p = ongoing_v2(&h).await;
    let next = h
        .txn
        .end_txn_with_version(ID, p.producer_id, p.epoch, true, TV_2)
        .await
        .unwrap();
    // The retry (its answer was lost): the same answer, no second bump, no markers.
    let retry = h
        .txn
        .end_txn_with_version(ID, p.producer_id, p.epoch, true, TV_2)
        .await
        .unwrap();
    assert_eq!(retry, next);
    assert_eq!(h.markers.calls.lock().unwrap().len(), 1);
    let e = h
        .txn
        .end_txn_with_version(ID, p.producer_id, p.epoch, false, TV_2)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "INVALID_TXN_STATE");
    // The current epoch of a completed transaction is the next EndTxn: fenced (Kafka).
    let e = h
        .txn
        .end_txn_with_version(ID, p.producer_id, next.epoch, true, TV_2)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "PRODUCER_FENCED");
    // An older epoch still: fenced.
    let e = h
        .txn
        .end_txn_with_version(ID, p.producer_id, p.epoch - 1, true, TV_2)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "PRODUCER_FENCED");
    assert_eq!(h.txn.record(ID).await.unwrap().producer_epoch, next.epoch);
}

#[tokio::test]
async fn tv2_a_producer_fenced_by_a_new_instance_cannot_end_its_transaction() {
    let h = harness();
    let old = ongoing_v2(&h).await;
    let e = h.txn.init_producer_id(ID, TIMEOUT, None).await.unwrap_err();
    assert_eq!(e.code(), "CONCURRENT_TRANSACTIONS");
    let r = h.txn.record(ID).await.unwrap();
    assert_eq!(
        (r.state, r.producer_epoch),
        (TxnState::CompleteAbort, old.epoch + 1)
    );
    // Its epoch is one below the current one, as a retry's would be: still fenced.
    for commit in [false, true] {
        let e = h
            .txn
            .end_txn_with_version(ID, old.producer_id, old.epoch, commit, TV_2)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "PRODUCER_FENCED", "commit {commit}");
    }
}

/// A coordinator whose transactional id `ID` is Ongoing at epoch `epoch` with producer id 7
/// (transaction version 2, partitions 0 and 1), loaded from the store as after a restart
/// (its producer-id source starts at 1000 again).
async fn ongoing_v2_at(epoch: i16) -> H {
    let store = Arc::new(TestStore::new(MapStore::keeping_groups()));
    let clock = ManualClock::new();
    {
        let h = harness_over(store.clone(), clock.clone());
        ongoing_v2(&h).await;
        let mut r = h.txn.record(ID).await.unwrap();
        r.producer_epoch = epoch;
        r.producer_id = 7;
        store
            .inner()
            .unwrap()
            .transactions
            .lock()
            .unwrap()
            .insert(ID.to_string(), r);
    }
    let h = harness_over(store, clock);
    assert_eq!(h.txn.load().await.unwrap(), 1);
    h
}

#[tokio::test]
async fn tv2_an_exhausted_epoch_moves_the_producer_to_a_new_id() {
    let h = ongoing_v2_at(i16::MAX - 1).await;
    let old = h.txn.record(ID).await.unwrap();
    let next = h
        .txn
        .end_txn_with_version(ID, old.producer_id, i16::MAX - 1, true, TV_2)
        .await
        .unwrap();
    assert_ne!(next.producer_id, old.producer_id);
    assert_eq!(next.epoch, 0);
    let calls = h.markers.calls.lock().unwrap().clone();
    assert_eq!(
        (calls[0].producer_id, calls[0].producer_epoch),
        (old.producer_id, i16::MAX),
        "the markers carry the old id at the last epoch"
    );
    let r = h.txn.record(ID).await.unwrap();
    assert_eq!(
        (r.producer_id, r.producer_epoch, r.last_producer_id),
        (next.producer_id, 0, old.producer_id)
    );
    // The retry with the old id and epoch gets the new id again.
    let retry = h
        .txn
        .end_txn_with_version(ID, old.producer_id, i16::MAX - 1, true, TV_2)
        .await
        .unwrap();
    assert_eq!(retry, next);
    // The new id goes on.
    h.txn
        .add_partitions_with_version(ID, next.producer_id, 0, &[tp(1)], TV_2)
        .await
        .unwrap();
    let after = h
        .txn
        .end_txn_with_version(ID, next.producer_id, 0, true, TV_2)
        .await
        .unwrap();
    assert_eq!((after.producer_id, after.epoch), (next.producer_id, 1));
}

#[tokio::test]
async fn tv2_one_epoch_below_exhaustion_bumps_without_a_new_id() {
    let h = ongoing_v2_at(i16::MAX - 2).await;
    let old = h.txn.record(ID).await.unwrap();
    let next = h
        .txn
        .end_txn_with_version(ID, old.producer_id, i16::MAX - 2, false, TV_2)
        .await
        .unwrap();
    assert_eq!(
        (next.producer_id, next.epoch),
        (old.producer_id, i16::MAX - 1)
    );
}

#[tokio::test]
async fn tv2_the_transaction_version_survives_a_restart() {
    let store = Arc::new(TestStore::new(MapStore::keeping_groups()));
    let clock = ManualClock::new();
    let (p, next) = {
        let h = harness_over(store.clone(), clock.clone());
        let p = ongoing_v2(&h).await;
        let next = h
            .txn
            .end_txn_with_version(ID, p.producer_id, p.epoch, true, TV_2)
            .await
            .unwrap();
        (p, next)
    };
    let h = harness_over(store, clock);
    h.txn.load().await.unwrap();
    let r = h.txn.record(ID).await.unwrap();
    assert_eq!((r.transaction_version, r.producer_epoch), (2, next.epoch));
    // Read as a version 2 transaction: the lost answer's retry is still answered.
    let retry = h
        .txn
        .end_txn_with_version(ID, p.producer_id, p.epoch, true, TV_2)
        .await
        .unwrap();
    assert_eq!(retry, next);
}

#[tokio::test]
async fn classic_end_txn_keeps_the_epoch_and_verify_reads_the_partitions() {
    let h = harness();
    let p = h.txn.init_producer_id(ID, TIMEOUT, None).await.unwrap();
    h.txn
        .add_partitions(ID, p.producer_id, p.epoch, &[tp(0)])
        .await
        .unwrap();
    let found = h
        .txn
        .verify_partitions(ID, p.producer_id, p.epoch, &[tp(0), tp(1)])
        .await
        .unwrap();
    assert_eq!(found, vec![(tp(0), true), (tp(1), false)]);
    let e = h
        .txn
        .verify_partitions(ID, p.producer_id, p.epoch + 1, &[tp(0)])
        .await
        .unwrap_err();
    assert_eq!(e.code(), "PRODUCER_FENCED");
    let same = h
        .txn
        .end_txn_with_version(ID, p.producer_id, p.epoch, true, 0)
        .await
        .unwrap();
    assert_eq!(same, p, "no bump below transaction version 2");
    assert_eq!(h.txn.record(ID).await.unwrap().transaction_version, 0);
    assert_eq!(h.markers.calls.lock().unwrap()[0].producer_epoch, p.epoch);
}
