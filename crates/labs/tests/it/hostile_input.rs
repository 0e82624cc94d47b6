//! Every public entry point of the coordinator, the consumer and the facade fed random and
//! hostile arguments — empty, huge, non-ASCII and control-character ids, unknown topics,
//! out-of-range partitions, offsets and counts: no panic, no abort, and every refusal carries
//! one of the codes the entry point documents. `HOSTILE_CALLS=n` scales the run (default
//! 10,000 calls); the seed of a failing call is printed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use common::{Rng, TestCluster};
use consumer::AutoOffsetReset;
use coordinator_core::{Generation, OffsetMap, TopicMetadata, TopicPartition};

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

/// Kafka's topic-name rule as documented: 1–249 characters of `[A-Za-z0-9._-]`, not `.`
/// or `..` (the generator never produces names that collide once `.` reads as `_`).
fn valid_topic(name: &str) -> bool {
    (1..=249).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
        && name != "."
        && name != ".."
}

/// The outcome a call must have: `Ok(())`, or an error with exactly this code.
type Expected = Result<(), &'static str>;

/// Checks a call whose outcome the arguments and the group's state determine.
fn expect(seed: u64, call: &str, got: Option<&'static str>, expected: Expected) {
    let got = got.map_or(Ok(()), Err);
    assert_eq!(got, expected, "seed {seed}: {call}");
}

/// Checks a call whose outcome depends on state the test does not track: it must be one of
/// `allowed` codes, or success where `ok` says success is possible.
fn check(seed: u64, call: &str, code: Option<&'static str>, allowed: &[&str], ok: bool) {
    match code {
        Some(code) => assert!(
            allowed.contains(&code),
            "seed {seed}: {call} returned {code}, documented: {allowed:?}"
        ),
        None => assert!(
            ok,
            "seed {seed}: {call} succeeded but must have been refused"
        ),
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
    let log = t.cluster.log().clone();
    let partitions_of = |topic: &str| log.partition_count(topic);
    let mut consumers = Vec::new();
    for seed in 0..calls {
        let mut rng = Rng::new(seed);
        let (g, m) = (text(&mut rng), text(&mut rng));
        let generation = Generation::new(rng.below(4));
        let offsets: OffsetMap = (0..rng.below(3))
            .map(|_| (tp(&mut rng), number(&mut rng)))
            .collect();
        let c = &coordinator;
        let ids_empty = g.is_empty() || m.is_empty();
        let negative = offsets.values().any(|&o| o < 0);
        // The group as it stands before the call: the oracle for the calls that depend on it.
        let before = if g.is_empty() {
            None
        } else {
            c.describe(&g).await.ok()
        };
        let member = before
            .as_ref()
            .and_then(|d| d.members.iter().find(|x| x.member == m));
        match rng.below(16) {
            0 => {
                let topics = [text(&mut rng), text(&mut rng)];
                let r = c.join(&g, &m, &topics).await.err().map(|e| e.code());
                if ids_empty {
                    expect(seed, "join", r, Err("INVALID_ARGUMENT"));
                } else if topics.iter().any(|t| partitions_of(t).is_none()) {
                    expect(seed, "join", r, Err("UNKNOWN_TOPIC"));
                } else {
                    check(seed, "join", r, &["INCONSISTENT_GROUP_PROTOCOL"], true);
                }
            }
            1 => {
                let strategies = [text(&mut rng)];
                let r = c
                    .join_with_strategies(&g, &m, &["orders"], &strategies)
                    .await
                    .err()
                    .map(|e| e.code());
                if ids_empty || !c.strategies().contains(&strategies[0].as_str()) {
                    expect(seed, "join_with_strategies", r, Err("INVALID_ARGUMENT"));
                } else {
                    check(
                        seed,
                        "join_with_strategies",
                        r,
                        &["INCONSISTENT_GROUP_PROTOCOL"],
                        true,
                    );
                }
            }
            2 => {
                let r = c.leave(&g, &m).await;
                let expected = if ids_empty {
                    Err("INVALID_ARGUMENT")
                } else {
                    Ok(())
                };
                expect(seed, "leave", r.as_ref().err().map(|e| e.code()), expected);
                if let Ok(left) = r {
                    assert_eq!(
                        left.is_some(),
                        member.is_some(),
                        "seed {seed}: leave of a member"
                    );
                }
            }
            3 => {
                let r = c
                    .heartbeat(&g, &m, generation)
                    .await
                    .err()
                    .map(|e| e.code());
                let expected = match &before {
                    _ if ids_empty => Err("INVALID_ARGUMENT"),
                    None => Err("GROUP_ID_NOT_FOUND"),
                    Some(d) if d.generation != generation => Err("ILLEGAL_GENERATION"),
                    Some(_) if member.is_none() => Err("UNKNOWN_MEMBER"),
                    Some(_) => Ok(()),
                };
                expect(seed, "heartbeat", r, expected);
            }
            4 => {
                let r = c.assignment(&g, &m).await;
                let expected = match &before {
                    _ if ids_empty => Err("INVALID_ARGUMENT"),
                    None => Err("GROUP_ID_NOT_FOUND"),
                    Some(_) if member.is_none() => Err("UNKNOWN_MEMBER"),
                    Some(d) if d.state != coordinator_core::GroupState::Stable => {
                        Err("REBALANCE_IN_PROGRESS")
                    }
                    Some(_) => Ok(()),
                };
                expect(
                    seed,
                    "assignment",
                    r.as_ref().err().map(|e| e.code()),
                    expected,
                );
                if let (Ok(a), Some(x)) = (r, member) {
                    assert_eq!(a.partitions, x.partitions, "seed {seed}: assignment");
                }
            }
            5 => {
                let r = c.describe(&g).await.err().map(|e| e.code());
                let expected = match &before {
                    _ if g.is_empty() => Err("INVALID_ARGUMENT"),
                    None => Err("GROUP_ID_NOT_FOUND"),
                    Some(_) => Ok(()),
                };
                expect(seed, "describe", r, expected);
            }
            6 => {
                let r = c
                    .commit(&g, &m, generation, &offsets)
                    .await
                    .err()
                    .map(|e| e.code());
                let expected = match &before {
                    _ if ids_empty => Err("INVALID_ARGUMENT"),
                    None => Err("GROUP_ID_NOT_FOUND"),
                    Some(d) if d.state != coordinator_core::GroupState::Stable => {
                        Err("REBALANCE_IN_PROGRESS")
                    }
                    Some(d) if d.generation != generation => Err("ILLEGAL_GENERATION"),
                    Some(_) => match member {
                        None => Err("UNKNOWN_MEMBER"),
                        Some(x) if offsets.keys().any(|tp| !x.partitions.contains(tp)) => {
                            Err("NOT_PARTITION_OWNER")
                        }
                        Some(_) if negative => Err("INVALID_ARGUMENT"),
                        Some(_) => Ok(()),
                    },
                };
                expect(seed, "commit", r, expected);
            }
            7 => {
                let r = c.commit_direct(&g, &offsets).await.err().map(|e| e.code());
                let expected = if g.is_empty() || negative {
                    Err("INVALID_ARGUMENT")
                } else {
                    Ok(())
                };
                expect(seed, "commit_direct", r, expected);
            }
            8 => {
                let r = c.committed(&g, &tp(&mut rng)).await.err().map(|e| e.code());
                let expected = if g.is_empty() {
                    Err("INVALID_ARGUMENT")
                } else {
                    Ok(())
                };
                expect(seed, "committed", r, expected);
            }
            9 => {
                let (name, n) = (text(&mut rng), partition(&mut rng));
                let existed = partitions_of(&name).is_some();
                let r = t.cluster.create_topic(&name, n).err().map(|e| e.code());
                let expected = if !valid_topic(&name) {
                    Err("INVALID_TOPIC_EXCEPTION")
                } else if n == 0 || n > coordinator_core::MAX_PARTITIONS_PER_TOPIC {
                    Err("INVALID_PARTITIONS")
                } else if existed {
                    Err("TOPIC_ALREADY_EXISTS")
                } else {
                    Ok(())
                };
                expect(seed, "create_topic", r, expected);
            }
            10 => {
                let (name, p) = (text(&mut rng), partition(&mut rng));
                let exists = partitions_of(&name).is_some_and(|n| p < n);
                let r = t.cluster.append(&name, p, "v").err().map(|e| e.code());
                let expected = if exists {
                    Ok(())
                } else {
                    Err("UNKNOWN_TOPIC_OR_PARTITION")
                };
                expect(seed, "append", r, expected);
            }
            _ => {
                if consumers.len() < 4 || rng.below(10) == 0 {
                    let reset = [
                        AutoOffsetReset::Earliest,
                        AutoOffsetReset::Latest,
                        AutoOffsetReset::Error,
                    ][rng.below(3) as usize];
                    let r = t.cluster.consumer(&g, reset);
                    let expected = if g.is_empty() {
                        Err("INVALID_ARGUMENT")
                    } else {
                        Ok(())
                    };
                    expect(
                        seed,
                        "consumer",
                        r.as_ref().err().map(|e| e.code()),
                        expected,
                    );
                    if let Ok(c) = r {
                        consumers.push(c);
                    }
                    if consumers.len() > 8 {
                        consumers.remove(0);
                    }
                    continue;
                }
                let i = rng.below(consumers.len() as u64) as usize;
                let k = &mut consumers[i];
                let part = tp(&mut rng);
                let assigned = k.assignment().contains(&part);
                let offset = number(&mut rng);
                let (name, r, ok) = match rng.below(10) {
                    0 => (
                        "assign",
                        k.assign([part.clone(), tp(&mut rng)]).await.err(),
                        true,
                    ),
                    1 => (
                        "subscribe",
                        k.subscribe(&[text(&mut rng)]).await.err(),
                        true,
                    ),
                    2 => ("refresh", k.refresh_assignment().await.err(), true),
                    3 => ("heartbeat", k.heartbeat().await.err(), true),
                    4 => {
                        let max = [0, 1, 7, usize::MAX][rng.below(4) as usize];
                        ("poll", k.poll(max).await.err(), true)
                    }
                    5 => ("position", k.position(&part).err(), assigned),
                    6 => ("seek", k.seek(&part, offset).err(), assigned && offset >= 0),
                    7 => ("lag", k.lag(&part).await.err(), assigned),
                    8 => ("commit", k.commit().await.err(), true),
                    _ => ("committed", k.committed(&part).await.err(), true),
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
                    ok,
                );
            }
        }
    }
}
