//! Timer cost: a timer run (`expire_members`, i.e. `handle_timeout`) among many idle groups.
//!
//! `expire/groups=N,due=10`: N groups with one live member each, of which 10 have a member
//! whose session has just passed. Each timed call expires those 10 (and rebalances their
//! groups into Empty); the idle groups must cost nothing. The timed part is the call only:
//! every iteration gets 10 fresh due groups, prepared beforehand (`iter_custom`).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordinator_core::{Coordinator, ManualClock};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use offset_store::MemoryStore;

const DUE: usize = 10;
const SESSION_MS: u64 = 1_000_000;
/// Batches of due groups prepared per coordinator.
const BATCHES: u64 = 2_000;

struct Prepared {
    coordinator: Coordinator,
    clock: ManualClock,
    next: u64,
}

/// Batch `k`'s groups join at time `k`, the idle ones after every batch: setting the clock to
/// `k + SESSION_MS + 1` makes exactly batch `k` due.
async fn prepare(idle: usize) -> Prepared {
    let clock = ManualClock::new();
    let topics: BTreeMap<String, u32> = [("orders".to_string(), 1)].into();
    let coordinator = Coordinator::builder(
        Arc::new(MemoryStore::new()),
        Arc::new(topics),
        Arc::new(assignor::MiniKafkaRoundRobinAssignor),
    )
    .clock(Arc::new(clock.clone()))
    .session_timeout_ms(SESSION_MS)
    .build()
    .unwrap();
    for k in 0..BATCHES {
        clock.set(k).unwrap();
        for i in 0..DUE {
            coordinator
                .join(&format!("due-{k}-{i}"), "m", &["orders"])
                .await
                .unwrap();
        }
    }
    clock.set(BATCHES + 1_000).unwrap();
    for g in 0..idle {
        coordinator
            .join(&format!("idle-{g}"), "m", &["orders"])
            .await
            .unwrap();
    }
    Prepared {
        coordinator,
        clock,
        next: 0,
    }
}

fn expire(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("expire");
    group.sample_size(30);
    for groups in [1_000usize, 100_000] {
        let idle = groups - DUE;
        let mut prepared = rt.block_on(prepare(idle));
        group.bench_function(
            BenchmarkId::from_parameter(format!("groups={groups},due={DUE}")),
            |b| {
                b.iter_custom(|iters| {
                    let mut spent = Duration::ZERO;
                    for _ in 0..iters {
                        if prepared.next == BATCHES {
                            prepared = rt.block_on(prepare(idle));
                        }
                        let k = prepared.next;
                        prepared.next += 1;
                        prepared.clock.set(k + SESSION_MS + 1).unwrap();
                        let start = Instant::now();
                        let expired = rt.block_on(prepared.coordinator.expire_members());
                        spent += start.elapsed();
                        assert_eq!(expired.len(), DUE);
                    }
                    spent
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, expire);
criterion_main!(benches);
