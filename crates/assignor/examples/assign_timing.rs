//! A quick timing of each strategy at the benchmark sizes (not a benchmark: the criterion
//! benches under `benches/` are the reference). Inputs are built outside the timed part.
//!
//! ```text
//! cargo run --release -p assignor --example assign_timing
//! ```

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use assignor::{by_name, names};
use coordinator_core::{Assignment, AssignmentRequest, AssignmentRequestBuilder};

fn member(i: usize) -> String {
    format!("member-{i:05}")
}

fn topic(i: usize) -> String {
    format!("topic-{i:04}")
}

/// `members` members, `topics` topics sharing `partitions` partitions evenly;
/// `subscribes(member, topic)` says who reads what.
fn group(
    members: usize,
    topics: usize,
    partitions: u32,
    subscribes: impl Fn(usize, usize) -> bool,
) -> AssignmentRequestBuilder {
    let mut b = AssignmentRequest::builder();
    for t in 0..topics {
        b = b.topic(topic(t), partitions / topics as u32);
    }
    for m in 0..members {
        b = b.member(
            member(m),
            (0..topics).filter(|&t| subscribes(m, t)).map(topic),
        );
    }
    b
}

/// The same group without member `gone`, each remaining member owning what `previous` gave it.
fn after_leave(
    members: usize,
    topics: usize,
    partitions: u32,
    subscribes: impl Fn(usize, usize) -> bool + Copy,
    previous: &AssignmentRequest,
    owners: &Assignment,
    gone: usize,
) -> AssignmentRequest {
    let input = previous.input();
    let mut b = AssignmentRequest::builder();
    for t in 0..topics {
        b = b.topic(topic(t), partitions / topics as u32);
    }
    for m in (0..members).filter(|&m| m != gone) {
        b = b.member(
            member(m),
            (0..topics).filter(|&t| subscribes(m, t)).map(topic),
        );
    }
    for (m, tps) in owners.to_map(&input) {
        if m != member(gone) {
            for tp in tps {
                b = b.owned(&m, tp.topic(), tp.partition());
            }
        }
    }
    b.build().unwrap()
}

fn time(label: &str, strategy: &str, request: &AssignmentRequest, runs: usize) -> Assignment {
    let assignor = by_name(strategy).unwrap();
    let input = request.input();
    let mut times: Vec<Duration> = Vec::new();
    let mut out = None;
    for _ in 0..runs {
        let start = Instant::now();
        let a = assignor.assign(&input).unwrap();
        times.push(start.elapsed());
        out = Some(a);
    }
    times.sort();
    println!(
        "{label:<62} median {:>10.3?}  min {:>10.3?}  ({runs} runs)",
        times[runs / 2],
        times[0]
    );
    out.unwrap()
}

fn main() {
    let all = |_: usize, _: usize| true;
    for (m, t, p) in [(10, 10, 1_000), (100, 10, 10_000), (1000, 100, 100_000)] {
        let r = group(m, t, p, all).build().unwrap();
        for s in [names::MINIKAFKA_ROUNDROBIN, names::RANGE, names::ROUNDROBIN] {
            let label = format!("{s} members={m},topics={t},partitions={p}");
            time(&label, s, &r, 101);
        }
    }
    let mixed = |m: usize, t: usize| !(m + t).is_multiple_of(3);
    let r = group(1000, 100, 100_000, mixed).build().unwrap();
    for s in [names::MINIKAFKA_ROUNDROBIN, names::RANGE, names::ROUNDROBIN] {
        time(
            &format!("{s} mixed members=1000,topics=100,partitions=100000"),
            s,
            &r,
            101,
        );
    }

    let (m, p) = (2000, 1_000_000);
    let fresh = group(m, 1, p, all).build().unwrap();
    let owners = time(
        "sticky members=2000,topics=1,partitions=1000000",
        names::STICKY,
        &fresh,
        11,
    );
    let left = after_leave(m, 1, p, all, &fresh, &owners, 1000);
    time(
        "sticky …=1000000 after one member left",
        names::STICKY,
        &left,
        11,
    );
    time(
        "cooperative-sticky …=1000000 after one member left",
        names::COOPERATIVE_STICKY,
        &left,
        11,
    );

    // Mixed subscriptions, 800 members × 40,000 partitions, two shapes.
    type Subscribes = fn(usize, usize) -> bool;
    let shapes: [(&str, Subscribes); 2] = [
        ("two thirds of 40 topics", |m, t| (m + t) % 3 != 0),
        ("first (m mod 40)+1 of 40 topics", |m, t| t <= m % 40),
    ];
    for (shape, subscribes) in shapes {
        let fresh = group(800, 40, 40_000, subscribes).build().unwrap();
        let label = format!("sticky mixed 800×40000 ({shape})");
        let owners = time(&label, names::STICKY, &fresh, 11);
        let left = after_leave(800, 40, 40_000, subscribes, &fresh, &owners, 400);
        time(&format!("{label} after one left"), names::STICKY, &left, 11);
    }
}
