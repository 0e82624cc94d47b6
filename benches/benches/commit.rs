//! Commit paths: through the coordinator into memory, durably into the JSON file, the bare
//! fsync floor under the JSON store, many tasks committing at once through the coordinator,
//! and many tasks committing durably into one JSON store, with group commit and without.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use benches::{coordinator, orders_offsets};
use coordinator_core::{CommitFence, OffsetMap, OffsetStore, TopicPartition};
use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
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

/// The floor under *any* durable commit on this disk, whatever the file format: append one
/// small record (the size of one offset as JSON) to a file kept open, then `fdatasync`.
/// No temp file, no rename, no directory sync: what an append-only offsets log would pay per
/// batch at least. (Reported next to the librdkafka mock comparison in BENCHMARKS.md.)
fn append_floor(c: &mut Criterion) {
    benches::append_fdatasync_floor(
        c,
        "commit/append_fdatasync_floor",
        br#"{"group":"g","topic":"orders","partition":0,"offset":1234567}"#,
    );
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

/// 64 tasks commit durably and at once into one JSON store holding `stored` offsets spread
/// over 8 groups: task k commits one of group k mod 8's stored partitions, so the file keeps
/// its size. Throughput is durable commits per second. The same load runs on the store with
/// group commit (the default) and without it (`max_batch(1)`: one file write per commit).
/// Every commit's latency is recorded, and p50/p99 are printed after each bench.
fn commit_json_concurrent(c: &mut Criterion) {
    const GROUPS: u32 = 8;
    const TASKS: u32 = 64;
    const COMMITS_PER_TASK: u32 = 20;
    let rt = runtime();
    let mut group = c.benchmark_group("commit/json_concurrent");
    // Flat sampling: one unbatched iteration takes about half a second, too long for
    // criterion's default of 1, 2, … 10 iterations per sample.
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .measurement_time(Duration::from_secs(10))
        .throughput(Throughput::Elements(u64::from(TASKS * COMMITS_PER_TASK)));
    for stored in [10u32, 10_000] {
        for batched in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let builder = JsonFileStore::builder();
            let builder = if batched {
                builder
            } else {
                builder.max_batch(1)
            };
            let store = Arc::new(builder.open(dir.path().join("offsets.json")).unwrap());
            // Group g holds partitions 0..n_g of `orders`, n_g = stored / 8 (+1 for the
            // first stored % 8 groups).
            let per_group = |g: u32| stored / GROUPS + u32::from(g < stored % GROUPS);
            for g in 0..GROUPS {
                let offsets = orders_offsets(per_group(g), 1_000_000);
                rt.block_on(store.commit(&format!("g{g}"), &offsets, CommitFence::none()))
                    .unwrap();
            }
            let work: Arc<Vec<(String, TopicPartition)>> = Arc::new(
                (0..TASKS)
                    .map(|k| {
                        let g = k % GROUPS;
                        let p = (k / GROUPS) % per_group(g);
                        (format!("g{g}"), TopicPartition::new("orders", p))
                    })
                    .collect(),
            );
            let latencies = Arc::new(Mutex::new(Vec::new()));
            let next = Arc::new(std::sync::atomic::AtomicI64::new(2_000_000));
            let id = format!(
                "{}groups={GROUPS},tasks={TASKS},stored={stored}",
                if batched { "" } else { "unbatched," }
            );
            group.bench_function(BenchmarkId::from_parameter(&id), |b| {
                b.iter_custom(|iters| {
                    let mut elapsed = Duration::ZERO;
                    for _ in 0..iters {
                        let start = Instant::now();
                        let per_task: Vec<Vec<Duration>> = rt.block_on(async {
                            let handles: Vec<_> = (0..TASKS as usize)
                                .map(|k| {
                                    let (store, work, next) =
                                        (store.clone(), work.clone(), next.clone());
                                    tokio::spawn(async move {
                                        let (gid, tp) = &work[k];
                                        let mut seen =
                                            Vec::with_capacity(COMMITS_PER_TASK as usize);
                                        for _ in 0..COMMITS_PER_TASK {
                                            let offset = next
                                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                            let offsets: OffsetMap = [(tp.clone(), offset)].into();
                                            let t = Instant::now();
                                            store
                                                .commit(gid, &offsets, CommitFence::none())
                                                .await
                                                .unwrap();
                                            seen.push(t.elapsed());
                                        }
                                        seen
                                    })
                                })
                                .collect();
                            let mut all = Vec::with_capacity(handles.len());
                            for h in handles {
                                all.push(h.await.unwrap());
                            }
                            all
                        });
                        elapsed += start.elapsed();
                        latencies
                            .lock()
                            .unwrap()
                            .extend(per_task.into_iter().flatten());
                    }
                    elapsed
                });
            });
            report_latencies(&format!("commit/json_concurrent/{id}"), &latencies);
            // The file holds exactly what the store acknowledged.
            let snapshot = store.snapshot();
            drop(Arc::into_inner(store).unwrap());
            let reopened = JsonFileStore::open(dir.path().join("offsets.json")).unwrap();
            assert_eq!(reopened.snapshot(), snapshot);
            assert_eq!(
                snapshot.values().map(OffsetMap::len).sum::<usize>(),
                stored as usize
            );
        }
    }
    group.finish();
}

/// Prints the median and 99th percentile of the recorded commit latencies (warm-up
/// included: every commit criterion ran).
fn report_latencies(id: &str, latencies: &Mutex<Vec<Duration>>) {
    let mut all = std::mem::take(&mut *latencies.lock().unwrap());
    if all.is_empty() {
        return;
    }
    all.sort_unstable();
    let at = |q: f64| all[((all.len() - 1) as f64 * q).round() as usize];
    println!(
        "{id}: commit latency p50 {:.3?}, p99 {:.3?}, max {:.3?} ({} commits)",
        at(0.5),
        at(0.99),
        all[all.len() - 1],
        all.len()
    );
}

criterion_group!(
    benches,
    commit_memory,
    commit_json,
    fsync_floor,
    append_floor,
    commit_concurrent,
    commit_json_concurrent
);
criterion_main!(benches);
