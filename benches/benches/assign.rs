//! One call of an assignor, inputs built outside the timed part.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use benches::{after_leave, mixed, uniform};
use coordinator_core::{AssignmentRequest, Assignor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

const SIZES: [(usize, usize, u32); 3] = [(10, 10, 1_000), (100, 10, 10_000), (1_000, 100, 100_000)];

fn bench(
    c: &mut Criterion,
    strategy: &str,
    id: &str,
    assignor: &dyn Assignor,
    request: &AssignmentRequest,
) {
    let input = request.input();
    c.benchmark_group(format!("assign/{strategy}"))
        .bench_function(BenchmarkId::from_parameter(id), |b| {
            b.iter(|| assignor.assign(&input).unwrap());
        });
}

fn round_robin_family(c: &mut Criterion) {
    let strategies: [(&str, Box<dyn Assignor>); 3] = [
        (
            "round_robin",
            Box::new(assignor::MiniKafkaRoundRobinAssignor),
        ),
        ("range", Box::new(assignor::RangeAssignor)),
        ("roundrobin", Box::new(assignor::RoundRobinAssignor)),
    ];
    for (name, strategy) in &strategies {
        for (members, topics, partitions) in SIZES {
            let request = uniform(members, topics, partitions);
            let id = format!("members={members},topics={topics},partitions={partitions}");
            bench(c, name, &id, strategy.as_ref(), &request);
        }
        let request = mixed(1_000, 100, 100_000, 10);
        let id = "mixed,members=1000,topics=100,partitions=100000";
        bench(c, name, id, strategy.as_ref(), &request);
    }
}

fn sticky_family(c: &mut Criterion) {
    let sticky = assignor::StickyAssignor;
    let cooperative = assignor::CooperativeStickyAssignor;
    let (members, partitions) = (2_000usize, 1_000_000u32);
    let fresh = uniform(members, 1, partitions);
    let id = format!("members={members},topics=1,partitions={partitions}");
    bench(c, "sticky", &id, &sticky, &fresh);
    let previous = sticky
        .assign(&fresh.input())
        .unwrap()
        .to_map(&fresh.input());
    let next = after_leave(members, 1, partitions, &previous, "member-00000");
    bench(c, "sticky", &format!("{id},after_leave"), &sticky, &next);
    bench(
        c,
        "cooperative-sticky",
        &format!("{id},after_leave"),
        &cooperative,
        &next,
    );
    let mixed_case = mixed(800, 40, 40_000, 4);
    bench(
        c,
        "sticky",
        "mixed,members=800,topics=40,partitions=40000",
        &sticky,
        &mixed_case,
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = round_robin_family, sticky_family
}
criterion_main!(benches);
