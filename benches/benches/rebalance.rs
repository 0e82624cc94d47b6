//! Rebalance cost: members joining one group one after another, each join a rebalance.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use benches::{coordinator, member_ids};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use offset_store::MemoryStore;

fn sequential_joins(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("rebalance");
    for (joins, partitions) in [(10usize, 100u32), (100, 1000), (500, 1000)] {
        let ids = member_ids(joins);
        group.bench_function(
            BenchmarkId::from_parameter(format!("joins={joins},partitions={partitions}")),
            |b| {
                b.to_async(&rt).iter_batched(
                    || coordinator(Arc::new(MemoryStore::new()), partitions),
                    |c| {
                        let ids = &ids;
                        async move {
                            for id in ids {
                                c.join("g", id, &["orders"]).await.unwrap();
                            }
                            c
                        }
                    },
                    BatchSize::SmallInput,
                );
            },
        );
    }
    group.finish();
}

criterion_group!(benches, sequential_joins);
criterion_main!(benches);
