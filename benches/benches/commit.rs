//! Commit paths: through the coordinator into memory, durably into the JSON file, the bare
//! fsync floor under the JSON store, and many tasks committing at once.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use benches::{coordinator, orders_offsets};
use coordinator_core::{CommitFence, OffsetMap, OffsetStore, TopicPartition};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use offset_store::{JsonFileStore, MemoryStore};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// One commit by the owner through the coordinator, fencing checks included.
fn commit_memory(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("commit/memory");
    for partitions in [1u32, 100] {
        let coordinator = coordinator(Arc::new(MemoryStore::new()), partitions);
        let joined = rt
            .block_on(coordinator.join("g", "member-00000", &["orders"]))
            .unwrap();
        let offsets = orders_offsets(partitions, 7);
        group.throughput(Throughput::Elements(1));
        group.bench_function(
            BenchmarkId::from_parameter(format!("partitions={partitions}")),
            |b| {
                b.to_async(&rt)
                    .iter(|| coordinator.commit("g", "member-00000", joined.generation, &offsets));
            },
        );
    }
    group.finish();
}

/// A JSON store already holding `stored` partitions of group `g`.
fn filled_store(dir: &Path, rt: &tokio::runtime::Runtime, stored: u32) -> JsonFileStore {
    let store = JsonFileStore::open(dir.join("offsets.json")).unwrap();
    rt.block_on(store.commit("g", &orders_offsets(stored, 1_000_000), CommitFence::none()))
        .unwrap();
    store
}

/// One durable commit of one partition's offset into a file holding `stored` partitions.
fn commit_json(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("commit/json");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(8));
    for stored in [10u32, 1_000, 10_000] {
        let dir = tempfile::tempdir().unwrap();
        let store = filled_store(dir.path(), &rt, stored);
        let mut next = 0i64;
        group.bench_function(
            BenchmarkId::from_parameter(format!("stored={stored}")),
            |b| {
                b.to_async(&rt).iter(|| {
                    next += 1;
                    let offsets: OffsetMap = [(TopicPartition::new("orders", 0), next)].into();
                    let store = &store;
                    async move {
                        store
                            .commit("g", &offsets, CommitFence::none())
                            .await
                            .unwrap()
                    }
                });
            },
        );
    }
    group.finish();
}

/// The physical floor under `commit/json`: the same bytes, the same temp-file, fsync,
/// rename, directory-fsync protocol, no serialization and no async hand-off.
fn fsync_floor(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("commit/fsync_floor");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(8));
    for stored in [10u32, 1_000, 10_000] {
        let dir = tempfile::tempdir().unwrap();
        drop(filled_store(dir.path(), &rt, stored));
        let target = dir.path().join("offsets.json");
        let bytes = fs::read(&target).unwrap();
        let tmp = dir.path().join("offsets.json.tmp");
        group.bench_function(
            BenchmarkId::from_parameter(format!("stored={stored}")),
            |b| {
                b.iter(|| {
                    let mut f = OpenOptions::new()
                        .write(true)
                        .create(true)
                        .truncate(true)
                        .open(&tmp)
                        .unwrap();
                    f.write_all(&bytes).unwrap();
                    f.sync_data().unwrap();
                    drop(f);
                    fs::rename(&tmp, &target).unwrap();
                    File::open(dir.path()).unwrap().sync_all().unwrap();
                });
            },
        );
    }
    group.finish();
}

/// 64 tasks on a multi-threaded runtime commit as owners, into one group or spread over 8.
fn commit_concurrent(c: &mut Criterion) {
    const TASKS: usize = 64;
    const COMMITS_PER_TASK: usize = 50;
    let rt = runtime();
    let mut group = c.benchmark_group("commit/concurrent");
    group.throughput(Throughput::Elements((TASKS * COMMITS_PER_TASK) as u64));
    for groups in [1usize, 8] {
        let coordinator = Arc::new(coordinator(Arc::new(MemoryStore::new()), TASKS as u32));
        // Task k is member k of group k % groups and commits the first partition it owns.
        let mut work = Vec::with_capacity(TASKS);
        for k in 0..TASKS {
            let gid = format!("g{}", k % groups);
            let member = format!("member-{k:05}");
            rt.block_on(coordinator.join(&gid, &member, &["orders"]))
                .unwrap();
            work.push((gid, member));
        }
        let work: Vec<_> = work
            .into_iter()
            .map(|(gid, member)| {
                let a = rt.block_on(coordinator.assignment(&gid, &member)).unwrap();
                let offsets: OffsetMap = [(a.partitions[0].clone(), 1)].into();
                Arc::new((gid, member, a.generation, offsets))
            })
            .collect();
        group.bench_function(
            BenchmarkId::from_parameter(format!("groups={groups},tasks={TASKS}")),
            |b| {
                b.iter_custom(|iters| {
                    let start = Instant::now();
                    rt.block_on(async {
                        for _ in 0..iters {
                            let handles: Vec<_> = work
                                .iter()
                                .map(|w| {
                                    let (c, w) = (coordinator.clone(), w.clone());
                                    tokio::spawn(async move {
                                        for _ in 0..COMMITS_PER_TASK {
                                            c.commit(&w.0, &w.1, w.2, &w.3).await.unwrap();
                                        }
                                    })
                                })
                                .collect();
                            for h in handles {
                                h.await.unwrap();
                            }
                        }
                    });
                    start.elapsed()
                });
            },
        );
    }
    group.finish();
}

criterion_group!(
    benches,
    commit_memory,
    commit_json,
    fsync_floor,
    commit_concurrent
);
criterion_main!(benches);
