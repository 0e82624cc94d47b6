//! The broker binary on a data directory: SIGKILLed in the middle of concurrent commits and
//! restarted on the same directory, it never loses nor regresses an acknowledged commit
//! (with fdatasync per batch, and with `--offsets-flush-interval-ms`); an older broker's
//! `offsets.json` is imported at start. (The store flags' refusals are in `lifecycle.rs`,
//! with the binary's other bad flags.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "it/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{bounded, commit, commit_codes, fetched, offset_fetch, spawn_listening, BOUND};
use coordinator_core::{CommitFence, OffsetMap, OffsetStore, TopicPartition};
use kafka_client::Connection;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

/// Cycles of start, concurrent commits, SIGKILL, restart: with a sync per batch, then with a
/// flush interval (Kafka's `log.flush.interval.ms`, which survives a process crash too).
const SYNCED_CYCLES: u64 = 24;
const FLUSHED_CYCLES: u64 = 6;
/// Groups, and committers per group (each on its own partition of topic `t`).
const GROUPS: usize = 3;
const PER_GROUP: usize = 2;

struct Broker {
    child: Child,
    addr: std::net::SocketAddr,
}

/// Starts the binary on `dir` with `extra` flags and waits (bounded) for `listening on`.
async fn start(dir: &Path, extra: &[&str], stderr: Stdio) -> Broker {
    let mut command = Command::new(env!("CARGO_BIN_EXE_broker"));
    command
        .args(["--listen", "127.0.0.1:0", "--topic", "t:8", "--data-dir"])
        .arg(dir)
        .args(extra)
        .stderr(stderr);
    let (child, addr, _) = spawn_listening(command).await;
    Broker { child, addr }
}

/// One partition's commits: the highest offset sent and the highest one acknowledged.
struct Track {
    group: String,
    partition: i32,
    attempted: AtomicI64,
    acked: AtomicI64,
}

/// Commits `attempted + 1`, `+ 2`, … one at a time until the connection fails (the broker
/// was killed). Every answer must be a success: anything else is returned as the failure.
async fn committer(
    addr: std::net::SocketAddr,
    track: Arc<Track>,
    acks: Arc<AtomicU64>,
) -> Result<(), String> {
    let Ok(mut conn) = Connection::connect(addr).await else {
        return Ok(());
    };
    loop {
        let n = track.attempted.load(Ordering::SeqCst) + 1;
        track.attempted.store(n, Ordering::SeqCst);
        let request = commit(&track.group, "", -1, &[("t", track.partition, n)]);
        match conn.call_within(&request, 3, BOUND).await {
            Ok(r) if commit_codes(&r) == [0] => {
                track.acked.store(n, Ordering::SeqCst);
                acks.fetch_add(1, Ordering::SeqCst);
            }
            Ok(r) => {
                return Err(format!(
                    "{}-{}: commit of {n} answered {:?}",
                    track.group,
                    track.partition,
                    commit_codes(&r)
                ))
            }
            Err(_) => return Ok(()),
        }
    }
}

/// For every partition: acknowledged ≤ fetched ≤ attempted.
async fn check(broker: &Broker, tracks: &[Arc<Track>], cycle: u64) {
    let mut conn = bounded("connect", Connection::connect(broker.addr))
        .await
        .expect("the restarted broker accepts");
    for t in tracks {
        let r = conn
            .call_within(&offset_fetch(&t.group, &[t.partition]), 3, BOUND)
            .await
            .expect("OffsetFetch answered");
        let got = fetched(&r);
        let (acked, attempted) = (
            t.acked.load(Ordering::SeqCst),
            t.attempted.load(Ordering::SeqCst),
        );
        assert_eq!(got.len(), 1, "{r:?}");
        assert!(
            acked <= got[0] && got[0] <= attempted,
            "cycle {cycle}, {}-{}: fetched {} after acknowledged {acked}, attempted {attempted}",
            t.group,
            t.partition,
            got[0]
        );
        // What survived is where the next cycle's committer goes on from (a lost,
        // unacknowledged commit is simply sent again with a higher offset).
        t.acked.store(got[0], Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_acknowledged_commit_is_lost_or_regressed_across_sigkills() {
    let dir = tempfile::tempdir().unwrap();
    let tracks: Vec<Arc<Track>> = (0..GROUPS * PER_GROUP)
        .map(|i| {
            Arc::new(Track {
                group: format!("g{}", i / PER_GROUP),
                partition: i32::try_from(i).unwrap(),
                attempted: AtomicI64::new(-1),
                acked: AtomicI64::new(-1),
            })
        })
        .collect();
    // A small xorshift: the kill lands at a different point of the commits each cycle.
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut broker = start(dir.path(), &[], Stdio::null()).await;
    let mut total_acks = 0;
    for cycle in 0..SYNCED_CYCLES + FLUSHED_CYCLES {
        let acks = Arc::new(AtomicU64::new(0));
        let running: Vec<_> = tracks
            .iter()
            .map(|t| tokio::spawn(committer(broker.addr, Arc::clone(t), Arc::clone(&acks))))
            .collect();
        // Some commits acknowledged first, so the kill lands in the middle of them.
        bounded("first acknowledgements", async {
            while acks.load(Ordering::SeqCst) < 3 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        tokio::time::sleep(Duration::from_micros(seed % 20_000)).await;
        broker.child.start_kill().expect("SIGKILL");
        bounded("killed broker exits", broker.child.wait())
            .await
            .expect("wait");
        for task in running {
            let outcome = bounded("committer ends", task)
                .await
                .expect("committer task");
            if let Err(why) = outcome {
                panic!("cycle {cycle}: {why}");
            }
        }
        total_acks += acks.load(Ordering::SeqCst);
        let flags: &[&str] = if cycle + 1 >= SYNCED_CYCLES {
            &["--offsets-flush-interval-ms", "1000"]
        } else {
            &[]
        };
        broker = start(dir.path(), flags, Stdio::null()).await;
        check(&broker, &tracks, cycle).await;
    }
    assert!(total_acks >= 3 * (SYNCED_CYCLES + FLUSHED_CYCLES));
    broker.child.start_kill().expect("SIGKILL");
    bounded("broker exits", broker.child.wait())
        .await
        .expect("wait");
}

/// An older broker's `offsets.json` is imported at the first start (logged with its count),
/// served, and kept as `offsets.json.imported`; the next start imports nothing.
#[tokio::test]
async fn an_older_offsets_file_is_imported_at_start_and_served() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    {
        let json = offset_store::JsonFileStore::open_async(d.join("offsets.json"))
            .await
            .unwrap();
        let offsets: OffsetMap = [
            (TopicPartition::new("t", 0), 11),
            (TopicPartition::new("t", 1), 12),
        ]
        .into();
        json.commit("old", &offsets, CommitFence::none())
            .await
            .unwrap();
    }
    let mut broker = start(d, &[], Stdio::piped()).await;
    let mut conn = bounded("connect", Connection::connect(broker.addr))
        .await
        .unwrap();
    let r = conn
        .call_within(&offset_fetch("old", &[0, 1]), 3, BOUND)
        .await
        .unwrap();
    assert_eq!(fetched(&r), [11, 12]);
    drop(conn);
    let pid = broker.child.id().expect("running").to_string();
    let status = bounded(
        "kill",
        Command::new("kill").args(["-s", "TERM", &pid]).status(),
    )
    .await
    .unwrap();
    assert!(status.success());
    assert_eq!(
        bounded("exit", broker.child.wait()).await.unwrap().code(),
        Some(0)
    );
    let mut log = String::new();
    let mut stderr = broker.child.stderr.take().expect("stderr");
    bounded("stderr", stderr.read_to_string(&mut log))
        .await
        .unwrap();
    assert!(
        log.contains("imported the offset file into the group log") && log.contains("offsets=2"),
        "{log}"
    );
    assert!(!d.join("offsets.json").exists());
    assert!(d.join("offsets.json.imported").is_file());
    assert!(d.join("groups").is_dir());
}
