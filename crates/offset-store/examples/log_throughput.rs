//! 64 tasks commit one partition each, one commit at a time, into a log store in a temp
//! directory: durable commits per second and the mean batch (writes per append+fdatasync).
//!
//! `cargo run --release -p offset-store --example log_throughput [tasks] [commits per task]`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Instant;

use coordinator_core::{CommitFence, OffsetMap, OffsetStore, TopicPartition};
use offset_store::LogStore;

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u32>().unwrap());
    let tasks = args.next().unwrap_or(64);
    let commits = args.next().unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let store = Arc::new(LogStore::open(dir.path()).unwrap());
    let started = Instant::now();
    rt.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    let group = format!("g{t}");
                    for i in 0..commits {
                        let o: OffsetMap =
                            [(TopicPartition::new("orders", t), i64::from(i))].into();
                        store.commit(&group, &o, CommitFence::none()).await.unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
    });
    let elapsed = started.elapsed();
    let stats = store.stats();
    let total = f64::from(tasks * commits);
    println!(
        "{tasks} tasks x {commits} commits: {:.0} durable commits/s, {} batches, {:.1} writes per batch",
        total / elapsed.as_secs_f64(),
        stats.batches,
        stats.writes as f64 / stats.batches.max(1) as f64
    );
}
