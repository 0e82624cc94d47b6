//! Kafka's classic protocol in the core.
//!
//! - `classic/rebalance/members=N`: a Stable group of N members; one more member joins and the
//!   N re-join. Timed from the last JoinGroup (the one that completes the barrier) to the last
//!   SyncGroup answer: every JoinGroup answered, N+1 SyncGroups parked, the leader's
//!   assignment installed, every SyncGroup answered. The setup (N+1 parked joins) is not timed.
//! - `classic/heartbeat`: one heartbeat of a member of a Stable group.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use coordinator_core::{
    ClassicProtocol, Coordinator, Generation, JoinGroupRequest, JoinGroupResponse, ManualClock,
    SequentialMemberIds, SyncAssignment, SyncGroupRequest,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use offset_store::MemoryStore;

/// A request future that has reached the coordinator and waits for its answer.
type Parked<T> = Pin<Box<dyn Future<Output = T> + Send>>;

fn coordinator() -> Arc<Coordinator> {
    let topics: BTreeMap<String, u32> = [("orders".to_string(), 64)].into();
    Arc::new(
        Coordinator::builder(
            Arc::new(MemoryStore::new()),
            Arc::new(topics),
            Arc::new(assignor::RangeAssignor),
        )
        .clock(Arc::new(ManualClock::new()))
        .member_ids(Arc::new(SequentialMemberIds::new()))
        .group_initial_rebalance_delay_ms(0)
        .build()
        .unwrap(),
    )
}

fn join(member: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: "g".into(),
        member_id: member.into(),
        group_instance_id: None,
        client_id: "bench".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 60_000,
        protocol_type: "consumer".into(),
        protocols: vec![ClassicProtocol::new("range", vec![0u8; 32]).with_topics(["orders"])],
        require_known_member_id: false,
        supports_skip_assignment: false,
        reason: None,
    }
}

fn sync(
    member: &str,
    generation: Generation,
    assignments: Vec<SyncAssignment>,
) -> SyncGroupRequest {
    SyncGroupRequest {
        group_id: "g".into(),
        generation: Some(generation),
        member_id: member.into(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments,
    }
}

/// Polls a request once, so that it reaches the coordinator (and parks there) now; it is
/// awaited later. Deterministic, unlike spawning and yielding. (Requests are built
/// `unconstrained`: tokio's cooperative budget must not make that one poll return early.)
fn park<T>(mut f: Parked<T>) -> Result<T, Parked<T>> {
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Ok(v),
        Poll::Pending => Err(f),
    }
}

fn parked_join(c: &Arc<Coordinator>, r: JoinGroupRequest) -> Parked<JoinGroupResponse> {
    let c = c.clone();
    let f: Parked<JoinGroupResponse> = Box::pin(tokio::task::unconstrained(async move {
        c.classic().join(r).await.unwrap()
    }));
    match park(f) {
        Ok(answer) => Box::pin(async move { answer }),
        Err(f) => f,
    }
}

/// Joins and syncs every parked member; returns every member id and the generation.
async fn complete(
    c: &Arc<Coordinator>,
    joins: Vec<Parked<JoinGroupResponse>>,
) -> (Vec<String>, Generation) {
    let mut answers = Vec::with_capacity(joins.len());
    for j in joins {
        answers.push(j.await);
    }
    let generation = answers[0].generation;
    let leader = answers[0].leader.clone();
    let ids: Vec<String> = answers.iter().map(|a| a.member_id.clone()).collect();
    let syncs: Vec<Parked<_>> = ids
        .iter()
        .filter(|id| **id != leader)
        .map(|id| {
            let c = c.clone();
            let r = sync(id, generation, Vec::new());
            let f: Parked<_> = Box::pin(tokio::task::unconstrained(async move {
                c.classic().sync(r).await.unwrap()
            }));
            match park(f) {
                Ok(answer) => Box::pin(async move { answer }) as Parked<_>,
                Err(f) => f,
            }
        })
        .collect();
    let assignments = ids
        .iter()
        .map(|id| SyncAssignment {
            member_id: id.clone(),
            assignment: vec![1u8; 24].into(),
            partitions: None,
        })
        .collect();
    c.classic()
        .sync(sync(&leader, generation, assignments))
        .await
        .unwrap();
    for s in syncs {
        s.await;
    }
    (ids, generation)
}

/// A Stable group of `members`, then one more member and all but one existing member parked
/// in JoinGroup: returns the coordinator and the request that completes the barrier.
async fn prepare(
    members: usize,
) -> (
    Arc<Coordinator>,
    Vec<Parked<JoinGroupResponse>>,
    JoinGroupRequest,
) {
    let c = coordinator();
    let first: Vec<_> = (0..members).map(|_| parked_join(&c, join(""))).collect();
    c.handle_timeout().await;
    let (ids, _) = complete(&c, first).await;
    let mut parked = vec![parked_join(&c, join(""))];
    for id in &ids[..members - 1] {
        parked.push(parked_join(&c, join(id)));
    }
    (c, parked, join(&ids[members - 1]))
}

fn rebalance(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("classic");
    group.sample_size(10);
    for members in [100usize, 1_000] {
        group.bench_function(
            BenchmarkId::new("rebalance", format!("members={members}")),
            |b| {
                b.iter_custom(|iters| {
                    let mut spent = Duration::ZERO;
                    for _ in 0..iters {
                        spent += rt.block_on(async {
                            let (c, mut parked, last) = prepare(members).await;
                            let start = Instant::now();
                            parked.push(parked_join(&c, last));
                            let (ids, _) = complete(&c, parked).await;
                            let elapsed = start.elapsed();
                            assert_eq!(ids.len(), members + 1);
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

fn heartbeat(crit: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (c, id, generation) = rt.block_on(async {
        let c = coordinator();
        let joins: Vec<_> = (0..10).map(|_| parked_join(&c, join(""))).collect();
        c.handle_timeout().await;
        let (ids, generation) = complete(&c, joins).await;
        (c, ids[0].clone(), generation)
    });
    crit.bench_function("classic/heartbeat", |b| {
        b.to_async(&rt).iter(|| {
            let (c, id) = (&c, &id);
            async move {
                c.classic()
                    .heartbeat("g", id, None, Some(generation))
                    .await
                    .unwrap();
            }
        });
    });
}

criterion_group!(benches, rebalance, heartbeat);
criterion_main!(benches);
