//! Records survive their broker: produce over the wire to the real binary with `--data-dir`,
//! stop it (SIGTERM, then SIGKILL), start it again on the same directory, and fetch the same
//! records, with the same bounds and topics.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "it/common/mod.rs"]
mod common;

use std::process::Stdio;

use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::records::Compression;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

struct Broker {
    child: Child,
    addr: std::net::SocketAddr,
}

/// Starts the binary on a free loopback port and waits (bounded) for its `listening on` line.
async fn spawn_broker(args: &[&str]) -> Broker {
    let mut command = Command::new(env!("CARGO_BIN_EXE_broker"));
    command
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stderr(Stdio::piped());
    let (child, addr, _) = spawn_listening(command).await;
    Broker { child, addr }
}

impl Broker {
    /// Stops the process with `signal` (by its PID) and returns its stderr.
    async fn stop(mut self, signal: &str) -> String {
        let pid = self.child.id().expect("running").to_string();
        let status = bounded(
            "kill",
            Command::new("kill").args(["-s", signal, &pid]).status(),
        )
        .await
        .expect("kill runs");
        assert!(status.success());
        bounded("exit", self.child.wait()).await.expect("wait");
        let mut err = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            bounded("stderr", stderr.read_to_string(&mut err))
                .await
                .expect("read stderr");
        }
        err
    }
}

/// Every record of `partition` from offset 0, with the partition's high watermark and log
/// start, fetched batch by batch.
async fn fetch_all(c: &mut Client, partition: i32) -> (Vec<(i64, Option<bytes::Bytes>)>, i64, i64) {
    let mut out = Vec::new();
    loop {
        let r = c
            .call(&fetch_request("t", partition, out.len() as i64), 11)
            .await;
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch of partition {partition}");
        let records = decode_records(p);
        if records.is_empty() {
            return (out, p.high_watermark, p.log_start_offset);
        }
        out.extend(records.into_iter().map(|r| (r.offset, r.value)));
    }
}

#[tokio::test]
async fn produced_records_survive_a_restart_by_sigterm_and_by_sigkill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_str().expect("utf-8 path");
    let args = ["--data-dir", data, "--topic", "t:2"];
    let broker = spawn_broker(&args).await;
    let mut c = Client::connect(broker.addr).await;
    let codecs = [Compression::None, Compression::Gzip, Compression::Lz4];
    let mut produced = 0;
    for (i, codec) in codecs.into_iter().enumerate() {
        let records: Vec<_> = (0..5)
            .map(|j| record(produced + j, 1000 + i as i64))
            .collect();
        let (code, base) = produce(&mut c, "t", 0, batch(&records, codec), 7).await;
        assert_eq!((code, base), (0, produced as i64), "batch {i}");
        produced += records.len();
    }
    let (code, _) = produce(&mut c, "t", 1, batch(&[record(0, 5)], Compression::None), 7).await;
    assert_eq!(code, 0);
    let (before, hw, start) = fetch_all(&mut c, 0).await;
    assert_eq!((before.len(), hw, start), (produced, produced as i64, 0));
    drop(c);
    let log = broker.stop("TERM").await;
    assert!(log.contains("topics and records are kept"), "{log}");

    // Restart (SIGTERM before): the same records, bounds and topics; offsets go on.
    let broker = spawn_broker(&args).await;
    let mut c = Client::connect(broker.addr).await;
    let (after, hw, start) = fetch_all(&mut c, 0).await;
    assert_eq!(after, before, "the same records, in the same order");
    assert_eq!((hw, start), (produced as i64, 0));
    assert_eq!(fetch_all(&mut c, 1).await.0.len(), 1);
    let (code, base) = produce(
        &mut c,
        "t",
        0,
        batch(&[record(99, 7)], Compression::Snappy),
        7,
    )
    .await;
    assert_eq!(
        (code, base),
        (0, produced as i64),
        "offsets continue after the restart"
    );
    drop(c);
    let log = broker.stop("KILL").await;
    assert!(
        !log.contains("topic created"),
        "the topic was kept, not created: {log}"
    );

    // Restart after SIGKILL: the acknowledged produce is there (it was fdatasync'ed).
    let broker = spawn_broker(&["--data-dir", data, "--topic", "t:3"]).await;
    let mut c = Client::connect(broker.addr).await;
    let (after, hw, _) = fetch_all(&mut c, 0).await;
    assert_eq!(hw, produced as i64 + 1);
    assert_eq!(after[..produced], before[..]);
    let metadata = c
        .call(
            &MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name("t"))),
            ])),
            5,
        )
        .await;
    assert_eq!(
        metadata.topics[0].partitions.len(),
        2,
        "the kept topic keeps its partition count"
    );
    drop(c);
    let log = broker.stop("TERM").await;
    assert!(log.contains("another partition count"), "{log}");
}

#[tokio::test]
async fn without_a_data_dir_records_stay_in_memory() {
    let broker = spawn_broker(&["--topic", "t:1"]).await;
    let log = broker.stop("TERM").await;
    assert!(log.contains("records live in memory"), "{log}");
}

#[tokio::test]
async fn a_damaged_records_directory_stops_the_broker_with_the_file_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_str().expect("utf-8 path");
    let broker = spawn_broker(&["--data-dir", data, "--topic", "t:1"]).await;
    let mut c = Client::connect(broker.addr).await;
    for i in 0..2 {
        let (code, _) = produce(&mut c, "t", 0, batch(&[record(i, 1)], Compression::None), 7).await;
        assert_eq!(code, 0);
    }
    drop(c);
    broker.stop("TERM").await;
    let segment = dir.path().join("records/t-0/00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).expect("the segment file");
    bytes[40] ^= 0xff; // inside the first of two batches
    std::fs::write(&segment, &bytes).expect("write");
    let out = bounded(
        "damaged start",
        Command::new(env!("CARGO_BIN_EXE_broker"))
            .args(["--listen", "127.0.0.1:0", "--data-dir", data])
            .output(),
    )
    .await
    .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("00000000000000000000.log") && err.contains("byte 0"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no listening line");
}
