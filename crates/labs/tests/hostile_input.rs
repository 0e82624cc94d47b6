//! Every public entry point of the coordinator, the consumer and the facade fed random and
//! hostile arguments — empty, huge, non-ASCII and control-character ids, unknown topics,
//! out-of-range partitions, offsets and counts: no panic, no abort, and every refusal carries
//! one of the codes the entry point documents. `HOSTILE_CALLS=n` scales the run (default
//! 10,000 calls); the seed of a failing call is printed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Rng, TestCluster};
use consumer::AutoOffsetReset;
use coordinator_core::{Generation, OffsetMap, TopicPartition};

fn text(rng: &mut Rng) -> String {
    match rng.below(9) {
        0 => String::new(),
        1 => "orders".into(),
        2 => "workers".into(),
        3 => "member-1".into(),
        4 => "x".repeat(300 + rng.below(5000) as usize),
        5 => "ünï\u{0}cødé\n☃\u{202e}".into(),
        6 => ".".into(),
        7 => "..".into(),
        _ => format!("t{}", rng.below(4)),
    }
}

fn number(rng: &mut Rng) -> i64 {
    match rng.below(6) {
        0 => -1,
        1 => i64::MIN,
        2 => i64::MAX,
        3 => 0,
        _ => rng.below(20) as i64,
    }
}

fn partition(rng: &mut Rng) -> u32 {
    match rng.below(4) {
        0 => u32::MAX,
        1 => rng.below(8) as u32,
        _ => rng.below(3) as u32,
    }
}

fn tp(rng: &mut Rng) -> TopicPartition {
    TopicPartition::new(text(rng), partition(rng))
}

fn check(seed: u64, call: &str, code: Option<&'static str>, allowed: &[&str]) {
    if let Some(code) = code {
        assert!(
            allowed.contains(&code),
            "seed {seed}: {call} returned {code}, documented: {allowed:?}"
        );
    }
}

#[tokio::test]
async fn hostile_arguments_get_documented_errors_never_panics() {
    let calls: u64 = std::env::var("HOSTILE_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let t = TestCluster::new();
    t.topic("orders", 3, 5);
    let coordinator = t.cluster.coordinator().clone();
    let mut consumers = Vec::new();
    for seed in 0..calls {
        let mut rng = Rng::new(seed);
        let (g, m) = (text(&mut rng), text(&mut rng));
        let generation = Generation::new(rng.below(4));
        let offsets: OffsetMap = (0..rng.below(3))
            .map(|_| (tp(&mut rng), number(&mut rng)))
            .collect();
        let c = &coordinator;
        match rng.below(16) {
            0 => {
                let topics = [text(&mut rng), text(&mut rng)];
                let r = c.join(&g, &m, &topics).await.err().map(|e| e.code());
                check(
                    seed,
                    "join",
                    r,
                    &[
                        "INVALID_ARGUMENT",
                        "UNKNOWN_TOPIC",
                        "INCONSISTENT_GROUP_PROTOCOL",
                    ],
                );
            }
            1 => {
                let strategies = [text(&mut rng)];
                let r = c
                    .join_with_strategies(&g, &m, &["orders"], &strategies)
                    .await;
                check(
                    seed,
                    "join_with_strategies",
                    r.err().map(|e| e.code()),
                    &["INVALID_ARGUMENT", "INCONSISTENT_GROUP_PROTOCOL"],
                );
            }
            2 => check(
                seed,
                "leave",
                c.leave(&g, &m).await.err().map(|e| e.code()),
                &["INVALID_ARGUMENT"],
            ),
            3 => {
                let r = c
                    .heartbeat(&g, &m, generation)
                    .await
                    .err()
                    .map(|e| e.code());
                check(
                    seed,
                    "heartbeat",
                    r,
                    &[
                        "INVALID_ARGUMENT",
                        "GROUP_ID_NOT_FOUND",
                        "ILLEGAL_GENERATION",
                        "UNKNOWN_MEMBER",
                    ],
                );
            }
            4 => {
                let r = c.assignment(&g, &m).await.err().map(|e| e.code());
                check(
                    seed,
                    "assignment",
                    r,
                    &[
                        "INVALID_ARGUMENT",
                        "GROUP_ID_NOT_FOUND",
                        "UNKNOWN_MEMBER",
                        "REBALANCE_IN_PROGRESS",
                    ],
                );
            }
            5 => check(
                seed,
                "describe",
                c.describe(&g).await.err().map(|e| e.code()),
                &["INVALID_ARGUMENT", "GROUP_ID_NOT_FOUND"],
            ),
            6 => {
                let r = c
                    .commit(&g, &m, generation, &offsets)
                    .await
                    .err()
                    .map(|e| e.code());
                check(
                    seed,
                    "commit",
                    r,
                    &[
                        "INVALID_ARGUMENT",
                        "GROUP_ID_NOT_FOUND",
                        "REBALANCE_IN_PROGRESS",
                        "ILLEGAL_GENERATION",
                        "UNKNOWN_MEMBER",
                        "NOT_PARTITION_OWNER",
                    ],
                );
            }
            7 => {
                let r = c.commit_direct(&g, &offsets).await.err().map(|e| e.code());
                check(seed, "commit_direct", r, &["INVALID_ARGUMENT"]);
            }
            8 => {
                let r = c.committed(&g, &tp(&mut rng)).await.err().map(|e| e.code());
                check(seed, "committed", r, &["INVALID_ARGUMENT"]);
            }
            9 => {
                let (name, n) = (text(&mut rng), partition(&mut rng));
                let r = t.cluster.create_topic(&name, n).err().map(|e| e.code());
                check(
                    seed,
                    "create_topic",
                    r,
                    &[
                        "INVALID_TOPIC_EXCEPTION",
                        "TOPIC_ALREADY_EXISTS",
                        "INVALID_PARTITIONS",
                    ],
                );
            }
            10 => {
                let r = t
                    .cluster
                    .append(&text(&mut rng), partition(&mut rng), "v")
                    .err()
                    .map(|e| e.code());
                check(seed, "append", r, &["UNKNOWN_TOPIC_OR_PARTITION"]);
            }
            _ => {
                if consumers.len() < 4 || rng.below(10) == 0 {
                    let reset = [
                        AutoOffsetReset::Earliest,
                        AutoOffsetReset::Latest,
                        AutoOffsetReset::Error,
                    ][rng.below(3) as usize];
                    match t.cluster.consumer(&g, reset) {
                        Ok(c) => consumers.push(c),
                        Err(e) => check(seed, "consumer", Some(e.code()), &["INVALID_ARGUMENT"]),
                    }
                    if consumers.len() > 8 {
                        consumers.remove(0);
                    }
                    continue;
                }
                let i = rng.below(consumers.len() as u64) as usize;
                let k = &mut consumers[i];
                let part = tp(&mut rng);
                let (name, r) = match rng.below(10) {
                    0 => ("assign", k.assign([part.clone(), tp(&mut rng)]).await.err()),
                    1 => ("subscribe", k.subscribe(&[text(&mut rng)]).await.err()),
                    2 => ("refresh", k.refresh_assignment().await.err()),
                    3 => ("heartbeat", k.heartbeat().await.err()),
                    4 => {
                        let max = [0, 1, 7, usize::MAX][rng.below(4) as usize];
                        ("poll", k.poll(max).await.err())
                    }
                    5 => ("position", k.position(&part).err()),
                    6 => ("seek", k.seek(&part, number(&mut rng)).err()),
                    7 => ("lag", k.lag(&part).await.err()),
                    8 => ("commit", k.commit().await.err()),
                    _ => ("committed", k.committed(&part).await.err()),
                };
                check(
                    seed,
                    name,
                    r.map(|e| e.code()),
                    &[
                        "INVALID_ARGUMENT",
                        "ILLEGAL_STATE",
                        "UNKNOWN_TOPIC_OR_PARTITION",
                        "NOT_ASSIGNED",
                        "NO_POSITION",
                        "OFFSET_OUT_OF_RANGE",
                        "UNKNOWN_TOPIC",
                        "ILLEGAL_GENERATION",
                        "UNKNOWN_MEMBER",
                        "REBALANCE_IN_PROGRESS",
                        "NOT_PARTITION_OWNER",
                        "GROUP_ID_NOT_FOUND",
                        "INCONSISTENT_GROUP_PROTOCOL",
                    ],
                );
            }
        }
    }
}
