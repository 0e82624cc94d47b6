//! Over the wire, against the real broker binary with `--data-dir` (the group log):
//!
//! 1. one synchronous one-partition OffsetCommit at a time, p50/p99, with 10 offsets stored;
//! 2. the same with 1,000,000 stored (1,000 groups × 1,000 partitions, loaded with one
//!    1,000-partition commit per group, 16 at a time);
//! 3. the time from the broker's process start (after a SIGKILL) to its first correct
//!    OffsetFetch answer with those 1,000,000 stored;
//! 4. 64 concurrent committers (one connection and one partition each), commits/s.
//!
//! ```text
//! cargo build --release -p consumer-groups-broker --bins --examples
//! target/release/examples/wire_commits [--flush-interval-ms N] [--samples N] [--seconds S]
//!     [--groups G] [--partitions P] [--committers C] [--broker PATH] [--dir DIR]
//! ```
//!
//! The broker binary defaults to the one beside this example's directory
//! (`target/release/broker`); the data directory to a fresh temporary one, removed at the end.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_client::Connection;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const TOPIC: &str = "t";

struct Options {
    broker: PathBuf,
    dir: Option<PathBuf>,
    flush_interval_ms: Option<u64>,
    samples: usize,
    seconds: u64,
    groups: usize,
    partitions: usize,
    committers: usize,
}

fn options() -> Options {
    let mut o = Options {
        broker: std::env::current_exe()
            .ok()
            .and_then(|p| Some(p.parent()?.parent()?.join("broker")))
            .unwrap_or_else(|| PathBuf::from("broker")),
        dir: None,
        flush_interval_ms: None,
        samples: 5_000,
        seconds: 5,
        groups: 1_000,
        partitions: 1_000,
        committers: 64,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| panic!("{flag} needs a value"));
        let n = || {
            value
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("{flag} {value}: not a number"))
        };
        match flag.as_str() {
            "--broker" => o.broker = PathBuf::from(&value),
            "--dir" => o.dir = Some(PathBuf::from(&value)),
            "--flush-interval-ms" => o.flush_interval_ms = Some(n()),
            "--samples" => o.samples = n() as usize,
            "--seconds" => o.seconds = n(),
            "--groups" => o.groups = n() as usize,
            "--partitions" => o.partitions = n() as usize,
            "--committers" => o.committers = n() as usize,
            _ => panic!("unknown flag {flag}"),
        }
    }
    o
}

struct Broker {
    child: Child,
    addr: SocketAddr,
}

async fn start(o: &Options, dir: &Path) -> Broker {
    let mut cmd = Command::new(&o.broker);
    cmd.args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .args(["--topic", &format!("{TOPIC}:{}", o.partitions.max(64))])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    if let Some(ms) = o.flush_interval_ms {
        cmd.args(["--offsets-flush-interval-ms", &ms.to_string()]);
    }
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", o.broker.display()));
    let stdout = child.stdout.take().expect("stdout");
    let line = BufReader::new(stdout)
        .lines()
        .next_line()
        .await
        .expect("stdout")
        .expect("the broker printed its address");
    let addr = line
        .strip_prefix("listening on ")
        .expect("listening on")
        .parse()
        .expect("an address");
    Broker { child, addr }
}

async fn kill(mut b: Broker) {
    b.child.start_kill().expect("SIGKILL");
    b.child.wait().await.expect("exit");
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn commit(group: &str, partitions: impl Iterator<Item = (i32, i64)>) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partitions(
                    partitions
                        .map(|(p, o)| {
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(o)
                        })
                        .collect(),
                ),
        ])
}

async fn call_commit(c: &mut Connection, r: &OffsetCommitRequest) {
    let answer = c.call(r, 3).await.expect("OffsetCommit answered");
    for t in &answer.topics {
        for p in &t.partitions {
            assert_eq!(p.error_code, 0, "commit refused");
        }
    }
}

/// One synchronous one-partition commit at a time: p50 and p99 in ms.
async fn latency(addr: SocketAddr, samples: usize) -> (f64, f64) {
    let mut c = Connection::connect(addr).await.expect("connect");
    let mut times = Vec::with_capacity(samples);
    for i in 0..(samples + samples / 10) {
        let r = commit("latency", std::iter::once((0, i as i64)));
        let t = Instant::now();
        call_commit(&mut c, &r).await;
        if i >= samples / 10 {
            times.push(t.elapsed());
        }
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (
        ms(times[times.len() / 2]),
        ms(times[times.len() * 99 / 100]),
    )
}

/// `groups` × `partitions` offsets, one commit per group, `parallel` at a time.
async fn load(addr: SocketAddr, groups: usize, partitions: usize, parallel: usize) -> Duration {
    let t = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..parallel {
        let next = Arc::clone(&next);
        tasks.push(tokio::spawn(async move {
            let mut c = Connection::connect(addr).await.expect("connect");
            loop {
                let g = next.fetch_add(1, Ordering::Relaxed) as usize;
                if g >= groups {
                    break;
                }
                let r = commit(
                    &format!("g{g}"),
                    (0..partitions).map(|p| (p as i32, (g * 1_000_000 + p) as i64)),
                );
                call_commit(&mut c, &r).await;
            }
        }));
    }
    for task in tasks {
        task.await.expect("loader");
    }
    t.elapsed()
}

/// `committers` connections committing one partition each, synchronously, for `seconds`.
async fn throughput(addr: SocketAddr, committers: usize, seconds: u64) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for i in 0..committers {
        let (stop, done) = (Arc::clone(&stop), Arc::clone(&done));
        tasks.push(tokio::spawn(async move {
            let mut c = Connection::connect(addr).await.expect("connect");
            let group = format!("tp{i}");
            let mut n = 0i64;
            while !stop.load(Ordering::Relaxed) {
                call_commit(&mut c, &commit(&group, std::iter::once((0, n)))).await;
                n += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // Warm up one second, then count.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (t, before) = (Instant::now(), done.load(Ordering::Relaxed));
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let count = done.load(Ordering::Relaxed) - before;
    let rate = count as f64 / t.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("committer");
    }
    rate
}

/// Restarts on `dir` and asks for one loaded group's offsets until they are right: the
/// time from spawning the process to that answer, and to its `listening on` line.
async fn restart(o: &Options, dir: &Path) -> (Broker, Duration, Duration) {
    let t = Instant::now();
    let b = start(o, dir).await;
    let listening = t.elapsed();
    let g = o.groups - 1;
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(&format!("g{g}"))))
        .with_topics(Some(vec![
            offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partition_indexes((0..o.partitions as i32).collect()),
        ]));
    let mut c = Connection::connect(b.addr).await.expect("connect");
    let r = c.call(&request, 3).await.expect("OffsetFetch answered");
    let answered = t.elapsed();
    let got: Vec<i64> = r.topics[0]
        .partitions
        .iter()
        .map(|p| p.committed_offset)
        .collect();
    let want: Vec<i64> = (0..o.partitions)
        .map(|p| (g * 1_000_000 + p) as i64)
        .collect();
    assert_eq!(got, want, "the restarted broker answers the loaded offsets");
    (b, listening, answered)
}

#[tokio::main]
async fn main() {
    let o = options();
    let temp = tempfile::tempdir().expect("tempdir");
    let base = o.dir.clone().unwrap_or_else(|| temp.path().to_path_buf());
    let mode = o
        .flush_interval_ms
        .map_or("fdatasync per batch".to_string(), |ms| {
            format!("--offsets-flush-interval-ms {ms}")
        });
    println!("broker {} ({mode})", o.broker.display());

    // 1. Ten offsets stored, and the throughput of a small store.
    let small = base.join("small");
    std::fs::create_dir_all(&small).expect("dir");
    let b = start(&o, &small).await;
    let mut c = Connection::connect(b.addr).await.expect("connect");
    call_commit(&mut c, &commit("ten", (0..10).map(|p| (p, 1)))).await;
    let (p50, p99) = latency(b.addr, o.samples).await;
    println!("stored 10 (+1): one-partition commit p50 {p50:.3} ms  p99 {p99:.3} ms");
    let rate = throughput(b.addr, o.committers, o.seconds).await;
    println!(
        "stored ~10: {} committers {rate:.0} commits/s",
        o.committers
    );
    kill(b).await;

    // 2. A million stored.
    let big = base.join("big");
    std::fs::create_dir_all(&big).expect("dir");
    let b = start(&o, &big).await;
    let took = load(b.addr, o.groups, o.partitions, 16).await;
    let stored = o.groups * o.partitions;
    println!(
        "loaded {stored} offsets in {:.2} s ({:.0} offsets/s)",
        took.as_secs_f64(),
        stored as f64 / took.as_secs_f64()
    );
    let (p50, p99) = latency(b.addr, o.samples).await;
    println!("stored {stored}: one-partition commit p50 {p50:.3} ms  p99 {p99:.3} ms");
    kill(b).await;

    // 3. Restart after SIGKILL.
    let (b, listening, answered) = restart(&o, &big).await;
    println!(
        "restart with {stored} stored (after SIGKILL): listening after {:.0} ms, first correct OffsetFetch after {:.0} ms",
        listening.as_secs_f64() * 1e3,
        answered.as_secs_f64() * 1e3
    );
    // 4. Throughput with a million stored.
    let rate = throughput(b.addr, o.committers, o.seconds).await;
    println!(
        "stored {stored}: {} committers {rate:.0} commits/s",
        o.committers
    );
    kill(b).await;
    let size = bytes_under(&big.join("groups"));
    println!("group log on disk: {:.1} MB", size as f64 / 1e6);
}

/// The bytes of the files under `dir`, in every subdirectory.
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let m = e.metadata().ok()?;
                    Some(if m.is_dir() {
                        bytes_under(&e.path())
                    } else {
                        m.len()
                    })
                })
                .sum()
        })
        .unwrap_or(0)
}
