//! The log store (`offset_store::LogStore`): a one-partition durable commit with 10 and with
//! 1,000,000 offsets stored (1,000 groups × 1,000 partitions), 64 concurrent committers,
//! opening (recovering) a log that holds 1,000,000 offsets from its segments and from a
//! snapshot, and beside them the append + fdatasync floor of the disk.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use coordinator_core::{CommitFence, OffsetMap, OffsetStore, TopicPartition};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use offset_store::{LogStore, LogStoreBuilder};

const GROUPS: u32 = 1_000;
const PARTITIONS: u32 = 1_000;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn one(partition: u32, offset: i64) -> OffsetMap {
    [(TopicPartition::new("orders", partition), offset)].into()
}

/// A log store in `dir` holding `stored` offsets: 10 in group `g0`, or 1,000 groups of
/// 1,000 partitions.
fn filled(
    dir: &Path,
    rt: &tokio::runtime::Runtime,
    stored: u32,
    options: LogStoreBuilder,
) -> LogStore {
    let store = options.open(dir).unwrap();
    let (groups, partitions) = if stored >= GROUPS * PARTITIONS {
        (GROUPS, PARTITIONS)
    } else {
        (1, stored)
    };
    rt.block_on(async {
        for g in 0..groups {
            let offsets: OffsetMap = (0..partitions)
                .map(|p| (TopicPartition::new("orders", p), 1_000_000))
                .collect();
            store
                .commit(&format!("g{g}"), &offsets, CommitFence::none())
                .await
                .unwrap();
        }
    });
    assert_eq!(store.stats().offsets, u64::from(groups * partitions));
    store
}

/// One durable one-partition commit, with 10 or 1,000,000 offsets stored; and the same with
/// Kafka's flush policy (acknowledged once written, synced every second).
fn commit_one_partition(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("log/commit_one_partition");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(8));
    for policy in ["fdatasync", "flush_1000ms"] {
        for stored in [10u32, GROUPS * PARTITIONS] {
            let dir = tempfile::tempdir().unwrap();
            let options = match policy {
                "flush_1000ms" => LogStore::builder().flush_interval_ms(1000),
                _ => LogStore::builder(),
            };
            let store = filled(dir.path(), &rt, stored, options);
            let mut next = 2_000_000i64;
            group.bench_function(BenchmarkId::new(policy, format!("stored={stored}")), |b| {
                b.iter(|| {
                    next += 1;
                    rt.block_on(store.commit("g0", &one(0, next), CommitFence::none()))
                        .unwrap();
                });
            });
        }
    }
    drop(rt);
    group.finish();
}

/// 64 tasks, each committing its own group's partition 50 times, one commit at a time,
/// into one store holding 10 or 1,000,000 offsets: durable commits per second.
fn commit_concurrent(c: &mut Criterion) {
    const TASKS: u32 = 64;
    const COMMITS: u32 = 50;
    let rt = runtime();
    let mut group = c.benchmark_group("log/concurrent_64");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10))
        .throughput(Throughput::Elements(u64::from(TASKS * COMMITS)));
    for stored in [10u32, GROUPS * PARTITIONS] {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(filled(dir.path(), &rt, stored, LogStore::builder()));
        group.bench_function(
            BenchmarkId::from_parameter(format!("stored={stored}")),
            |b| {
                b.iter(|| {
                    rt.block_on(async {
                        let tasks: Vec<_> = (0..TASKS)
                            .map(|t| {
                                let store = Arc::clone(&store);
                                tokio::spawn(async move {
                                    let gid = format!("g{t}");
                                    for i in 0..COMMITS {
                                        let o = one(t, 3_000_000 + i64::from(i));
                                        store.commit(&gid, &o, CommitFence::none()).await.unwrap();
                                    }
                                })
                            })
                            .collect();
                        for task in tasks {
                            task.await.unwrap();
                        }
                    });
                });
            },
        );
    }
    group.finish();
}

/// Opening a log of 1,000,000 offsets: replaying its segments, or loading its snapshot.
fn open_recovery(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("log/open_1000000");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(15));
    let dir = tempfile::tempdir().unwrap();
    let store = filled(
        dir.path(),
        &rt,
        GROUPS * PARTITIONS,
        LogStore::builder().auto_compaction(false),
    );
    drop(store);
    for from in ["segments", "snapshot"] {
        if from == "snapshot" {
            let store = LogStore::builder()
                .auto_compaction(false)
                .open(dir.path())
                .unwrap();
            rt.block_on(store.compact()).unwrap();
        }
        group.bench_function(from, |b| {
            b.iter(|| {
                let store = LogStore::builder()
                    .auto_compaction(false)
                    .open(dir.path())
                    .unwrap();
                assert_eq!(store.stats().offsets, u64::from(GROUPS * PARTITIONS));
                store
            });
        });
    }
    group.finish();
}

/// The floor under any durable commit on this disk: append one record of the size of one
/// commit's frame to a file kept open, then `fdatasync` (as `commit/append_fdatasync_floor`).
fn append_floor(c: &mut Criterion) {
    benches::append_fdatasync_floor(c, "log/append_fdatasync_floor", &[0x5au8; 68]);
}

criterion_group!(
    benches,
    append_floor,
    commit_one_partition,
    commit_concurrent,
    open_recovery
);
criterion_main!(benches);
