//! The transaction coordinator's paths: a TxnOffsetCommit into an open transaction (the
//! group coordinator's pending offsets), and an EndTxn that commits a transaction of one
//! data partition and one group (markers through an in-memory writer, the group's pending
//! offsets applied to the memory store).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use benches::coordinator;
use coordinator_core::txn::{
    MarkerError, MarkerWriter, ProducerIdSource, TransactionCoordinator, TxnMarkers,
};
use coordinator_core::{
    CommittedOffsets, OffsetAndMetadata, TopicPartition, TxnOffsetCommitRequest,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use offset_store::MemoryStore;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Every marker lands at once: what is measured is the coordinator, not a log.
struct Markers;

#[async_trait]
impl MarkerWriter for Markers {
    async fn write_markers(
        &self,
        markers: &TxnMarkers,
    ) -> Vec<(TopicPartition, Result<(), MarkerError>)> {
        markers
            .partitions
            .iter()
            .map(|tp| (tp.clone(), Ok(())))
            .collect()
    }
}

struct Ids(AtomicI64);

impl ProducerIdSource for Ids {
    fn next_producer_id(&self) -> i64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

fn txn_coordinator(partitions: u32) -> TransactionCoordinator {
    let groups = Arc::new(coordinator(Arc::new(MemoryStore::new()), partitions));
    TransactionCoordinator::builder(groups, Arc::new(Markers), Arc::new(Ids(AtomicI64::new(1))))
        .build()
        .unwrap()
}

fn offsets(partitions: u32, offset: i64) -> CommittedOffsets {
    (0..partitions)
        .map(|p| {
            (
                TopicPartition::new("orders", p),
                OffsetAndMetadata::new(offset),
            )
        })
        .collect()
}

fn request(producer_id: i64, partitions: u32, offset: i64) -> TxnOffsetCommitRequest {
    TxnOffsetCommitRequest {
        group_id: "g".to_string(),
        producer_id,
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        offsets: offsets(partitions, offset),
    }
}

/// A TxnOffsetCommit of `partitions` offsets into an open transaction that has the group.
fn txn_offset_commit(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("txn/offset_commit");
    for partitions in [1u32, 100] {
        let txns = txn_coordinator(partitions);
        let pid = rt
            .block_on(txns.init_producer_id("t", 60_000, None))
            .unwrap();
        rt.block_on(txns.add_offsets("t", pid.producer_id, pid.epoch, "g"))
            .unwrap();
        let req = request(pid.producer_id, partitions, 7);
        group.throughput(Throughput::Elements(1));
        group.bench_function(
            BenchmarkId::from_parameter(format!("partitions={partitions}")),
            |b| {
                b.to_async(&rt)
                    .iter(|| async { txns.txn_offset_commit("t", pid.epoch, &req).await.unwrap() });
            },
        );
    }
    group.finish();
}

/// EndTxn (commit) of a transaction holding one data partition and one group's offsets of
/// `partitions` partitions; the transaction is built before each timed EndTxn.
fn end_txn(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("txn/end_txn");
    for partitions in [1u32, 100] {
        let txns = txn_coordinator(partitions);
        let pid = rt
            .block_on(txns.init_producer_id("t", 60_000, None))
            .unwrap();
        let data = [TopicPartition::new("orders", 0)];
        group.throughput(Throughput::Elements(1));
        group.bench_function(
            BenchmarkId::from_parameter(format!("commit, offsets={partitions}")),
            |b| {
                b.to_async(&rt).iter_custom(|iters| {
                    let txns = &txns;
                    let data = &data;
                    async move {
                        let mut spent = Duration::ZERO;
                        for i in 0..iters {
                            txns.add_partitions("t", pid.producer_id, pid.epoch, data)
                                .await
                                .unwrap();
                            txns.add_offsets("t", pid.producer_id, pid.epoch, "g")
                                .await
                                .unwrap();
                            let req = request(pid.producer_id, partitions, i as i64);
                            txns.txn_offset_commit("t", pid.epoch, &req).await.unwrap();
                            let started = Instant::now();
                            txns.end_txn("t", pid.producer_id, pid.epoch, true)
                                .await
                                .unwrap();
                            spent += started.elapsed();
                        }
                        spent
                    }
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, txn_offset_commit, end_txn);
criterion_main!(benches);
