//! Kafka's consumer group protocol (KIP-848) in the core.
//!
//! - `consumer/heartbeat`: one heartbeat of a Stable member (of a group of 10 on 64
//!   partitions) that reports nothing new: the steady state of every consumer.
//! - `consumer/rebalance/members=1000` (and `members=100`, to show how it grows): one member
//!   joins a group of 1,000 on 10,000 partitions: timed from the joining heartbeat to its answer, which bumps the group epoch,
//!   computes the new target assignment with `uniform` (the assignor crate's
//!   `StickyAssignor`, as the composition roots register it) and reconciles the joining
//!   member. Between iterations the member leaves again (not timed), so every iteration
//!   computes a target for 1,001 members from the previous one.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordinator_core::{named, ConsumerGroupHeartbeatRequest as Req, Coordinator, ManualClock};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use offset_store::MemoryStore;

fn coordinator(partitions: u32) -> Arc<Coordinator> {
    let topics: BTreeMap<String, u32> = [("orders".to_string(), partitions)].into();
    Arc::new(
        Coordinator::builder(
            Arc::new(MemoryStore::new()),
            Arc::new(topics),
            Arc::new(assignor::RangeAssignor),
        )
        .clock(Arc::new(ManualClock::new()))
        .consumer_assignor(named("uniform", Arc::new(assignor::StickyAssignor)))
        .consumer_assignor(named("range", Arc::new(assignor::RangeAssignor)))
        .build()
        .unwrap(),
    )
}

fn heartbeat(crit: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (c, epoch) = rt.block_on(async {
        let c = coordinator(64);
        for m in 0..10 {
            c.consumer()
                .heartbeat(&Req::join("g", format!("m{m}"), ["orders"]))
                .await
                .unwrap();
        }
        // Everyone reconciles: revokes, then takes what was released.
        for _ in 0..3 {
            for m in 0..10 {
                let id = format!("m{m}");
                let d = c.consumer().describe("g").await.unwrap();
                let me = d.members.iter().find(|x| x.member_id == id).unwrap();
                c.consumer()
                    .heartbeat(
                        &Req::heartbeat("g", id.clone(), me.member_epoch)
                            .owning(me.assignment.iter().cloned()),
                    )
                    .await
                    .unwrap();
            }
        }
        let d = c.consumer().describe("g").await.unwrap();
        assert_eq!(d.state, coordinator_core::ConsumerGroupState::Stable);
        (c, d.members[0].member_epoch)
    });
    let req = Req::heartbeat("g", "m0", epoch);
    crit.bench_function("consumer/heartbeat", |b| {
        b.to_async(&rt).iter(|| {
            let (c, req) = (&c, &req);
            async move {
                let r = c.consumer().heartbeat(req).await.unwrap();
                assert!(r.assignment.is_none());
            }
        });
    });
}

fn rebalance(crit: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut group = crit.benchmark_group("consumer");
    group.sample_size(10);
    // 100 members show how the cost grows with the group (same 10,000 partitions).
    for members in [100usize, 1_000] {
        let c = rt.block_on(async {
            let c = coordinator(10_000);
            for m in 0..members {
                c.consumer()
                    .heartbeat(&Req::join("g", format!("m{m:04}"), ["orders"]))
                    .await
                    .unwrap();
            }
            c
        });
        group.bench_function(
            BenchmarkId::new("rebalance", format!("members={members}")),
            |b| {
                b.iter_custom(|iters| {
                    let mut spent = Duration::ZERO;
                    for i in 0..iters {
                        spent += rt.block_on(async {
                            let id = format!("joiner-{i}");
                            let start = Instant::now();
                            let r = c
                                .consumer()
                                .heartbeat(&Req::join("g", id.clone(), ["orders"]))
                                .await
                                .unwrap();
                            let elapsed = start.elapsed();
                            assert!(r.member_epoch > 0);
                            let d = c.consumer().describe("g").await.unwrap();
                            assert_eq!(d.members.len(), members + 1);
                            assert_eq!(d.assignment_epoch, d.group_epoch);
                            c.consumer()
                                .heartbeat(&Req::heartbeat("g", id, -1))
                                .await
                                .unwrap();
                            elapsed
                        });
                    }
                    spent
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, heartbeat, rebalance);
criterion_main!(benches);
