//! Start and stop: graceful shutdown in process, and the binary's command-line contract
//! (one `listening on` line on stdout, SIGTERM/SIGINT exit 0, refusals exit non-zero).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "it/common/mod.rs"]
mod common;

use std::process::Stdio;

use common::*;
use kafka_protocol::messages::*;
use tokio::io::{AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

#[tokio::test]
async fn shutdown_answers_a_long_poll_in_flight_then_stops_accepting() {
    let broker = TestBroker::start().await;
    let addr = broker.addr;
    let mut c = broker.client().await;
    let waiting = fetch_request("t", 0, 0).with_max_wait_ms(600_000);
    let correlation = c.send(&waiting, 11).await;
    // Make sure the fetch is parked (the broker answered a request sent after it on
    // another connection, and this connection's request was read first).
    let mut other = broker.client().await;
    other.call(&ApiVersionsRequest::default(), 3).await;
    let stopping = tokio::spawn(broker.stop());
    let r = c.receive::<FetchRequest>(correlation, 11).await;
    assert_eq!(
        r.responses[0].partitions[0].error_code, 0,
        "answered, empty"
    );
    assert!(c.is_closed().await, "then the connection is closed");
    bounded("stop", stopping)
        .await
        .expect("task")
        .expect("clean stop");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "no longer accepting"
    );
}

struct Process {
    child: Child,
    addr: std::net::SocketAddr,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Process {
    /// After exit: nothing but the one `listening on` line was ever printed on stdout.
    async fn assert_stdout_was_one_line(&mut self) {
        let rest = bounded("stdout", self.stdout.next_line())
            .await
            .expect("read");
        assert_eq!(rest, None, "unexpected stdout line");
    }
}

/// Starts the binary and waits (bounded) for its `listening on` line.
async fn spawn(args: &[&str]) -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_broker"));
    command
        .args(["--listen", "127.0.0.1:0", "--topic", "t:1"])
        .args(args);
    start(command).await
}

/// Starts `command` (the binary, maybe through a shell) and waits for its `listening on` line.
async fn start(mut command: Command) -> Process {
    command.stderr(Stdio::piped());
    let (child, addr, lines) = spawn_listening(command).await;
    Process {
        child,
        addr,
        stdout: lines,
    }
}

async fn signal(child: &Child, name: &str) {
    let pid = child.id().expect("running").to_string();
    let status = bounded(
        "kill",
        Command::new("kill").args(["-s", name, &pid]).status(),
    )
    .await
    .expect("kill runs");
    assert!(status.success());
}

async fn stderr_of(child: &mut Child) -> String {
    let mut err = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        bounded("stderr", stderr.read_to_string(&mut err))
            .await
            .expect("read stderr");
    }
    err
}

#[tokio::test]
async fn the_binary_serves_then_exits_zero_on_sigterm_and_sigint() {
    for sig in ["TERM", "INT"] {
        let mut p = spawn(&[]).await;
        let mut c = Client::connect(p.addr).await;
        assert_eq!(
            c.call(&ApiVersionsRequest::default(), 3).await.error_code,
            0
        );
        signal(&p.child, sig).await;
        let status = bounded("exit", p.child.wait()).await.expect("wait");
        assert_eq!(status.code(), Some(0), "SIG{sig}");
        p.assert_stdout_was_one_line().await;
        let log = stderr_of(&mut p.child).await;
        assert!(log.contains("connection opened"), "{log}");
        assert!(log.contains("committed offsets live in memory"), "{log}");
        assert!(
            !log.contains('\u{1b}'),
            "no colour codes in captured logs: {log}"
        );
    }
}

#[tokio::test]
async fn the_binary_refuses_bad_flags_with_a_clear_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_str().expect("utf-8 path");
    let flush = ["--offsets-flush-interval-ms", "100"];
    for (args, expect) in [
        (vec!["--topic", "orders"], "NAME:PARTITIONS"),
        (vec!["--topic", "bad/name:1"], "invalid topic name"),
        (vec!["--num-partitions", "0"], "num-partitions"),
        (
            flush.to_vec(),
            "invalid setting `offsets-flush-interval-ms`: 100: needs --data-dir",
        ),
        (
            [&["--data-dir", data, "--offsets-store", "json"][..], &flush].concat(),
            "applies to the group log only, not to --offsets-store json",
        ),
        (
            vec!["--offsets-store", "xml"],
            "[possible values: log, json]",
        ),
    ] {
        let out = bounded(
            "bad flags",
            Command::new(env!("CARGO_BIN_EXE_broker"))
                .args(["--listen", "127.0.0.1:0"])
                .args(&args)
                .output(),
        )
        .await
        .expect("runs");
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "no listening line");
    }
    assert!(
        std::fs::read_dir(dir.path())
            .expect("listed")
            .next()
            .is_none(),
        "a refused start touches nothing"
    );
}

#[tokio::test]
async fn a_second_broker_on_the_same_data_dir_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_str().expect("utf-8 path");
    let mut first = spawn(&["--data-dir", data]).await;
    let out = bounded(
        "second broker",
        Command::new(env!("CARGO_BIN_EXE_broker"))
            .args(["--listen", "127.0.0.1:0", "--data-dir", data])
            .output(),
    )
    .await
    .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in use"), "{err}");
    // The first one is unaffected.
    let mut c = Client::connect(first.addr).await;
    assert_eq!(
        c.call(&ApiVersionsRequest::default(), 3).await.error_code,
        0
    );
    signal(&first.child, "TERM").await;
    let status = bounded("exit", first.child.wait()).await.expect("wait");
    assert_eq!(status.code(), Some(0));
}

/// Reads until the broker closes the connection (EOF or reset), bounded.
async fn closed_by_broker(socket: &mut tokio::net::TcpStream) {
    let mut buf = [0u8; 64];
    loop {
        match bounded("the broker closes the connection", socket.read(&mut buf)).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_connections_max_idle_ms() {
    let mut p = spawn(&["--connections-max-idle-ms", "300"]).await;
    let mut c = Client::connect(p.addr).await;
    assert_eq!(
        c.call(&ApiVersionsRequest::default(), 3).await.error_code,
        0
    );
    assert!(c.is_closed().await, "closed once idle");
    signal(&p.child, "TERM").await;
    bounded("exit", p.child.wait()).await.expect("wait");
    let log = stderr_of(&mut p.child).await;
    assert!(log.contains("connections.max.idle.ms"), "{log}");
}

#[tokio::test]
async fn a_request_that_trickles_in_is_closed_after_the_request_timeout() {
    use tokio::io::AsyncWriteExt;
    let mut p = spawn(&["--request-timeout-ms", "300"]).await;
    let mut slow = tokio::net::TcpStream::connect(p.addr)
        .await
        .expect("connect");
    // A frame header announcing 100 bytes, then one byte: the rest never comes.
    slow.write_all(&[0, 0, 0, 100, 0]).await.expect("write");
    closed_by_broker(&mut slow).await;
    // Others are served meanwhile and after.
    let mut c = Client::connect(p.addr).await;
    assert_eq!(
        c.call(&ApiVersionsRequest::default(), 3).await.error_code,
        0
    );
    signal(&p.child, "TERM").await;
    bounded("exit", p.child.wait()).await.expect("wait");
    let log = stderr_of(&mut p.child).await;
    assert!(log.contains("request timeout"), "{log}");
}

#[tokio::test]
async fn running_out_of_file_descriptors_never_stops_the_broker() {
    // The broker under an open-file limit of 48: about 35 connections exhaust it.
    let mut command = Command::new("sh");
    command.args([
        "-c",
        // --max-connections above what the limit allows (its default stays below it).
        "ulimit -n 48 && exec \"$0\" --listen 127.0.0.1:0 --topic t:1 --max-connections 1000",
        env!("CARGO_BIN_EXE_broker"),
    ]);
    let Process {
        mut child, addr, ..
    } = start(command).await;
    // Hold far more connections than descriptors: the kernel queues them, the broker cannot
    // accept them all.
    let mut held = Vec::new();
    for _ in 0..80 {
        held.push(tokio::net::TcpStream::connect(addr).await.expect("connect"));
    }
    let mut first = Client::connect(addr).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the broker is still running while out of descriptors"
    );
    drop(held);
    // Once descriptors free up, the queued client is accepted and served.
    assert_eq!(
        first
            .call(&ApiVersionsRequest::default(), 3)
            .await
            .error_code,
        0
    );
    let mut c = Client::connect(addr).await;
    assert_eq!(
        c.call(&ApiVersionsRequest::default(), 3).await.error_code,
        0
    );
    signal(&child, "TERM").await;
    let status = bounded("exit", child.wait()).await.expect("wait");
    assert_eq!(status.code(), Some(0));
    let log = stderr_of(&mut child).await;
    assert!(log.contains("accept failed"), "{log}");
    assert!(log.contains("accepting connections again"), "{log}");
}

#[tokio::test]
async fn an_unserved_version_is_logged_once_per_connection_with_the_client_id() {
    let mut p = spawn(&[]).await;
    let mut c = Client::connect(p.addr).await;
    // ApiVersions v5 (no such version yet): answered UNSUPPORTED_VERSION in a v0 body, the
    // connection kept. (EndTxn v5, once the example, is served since transaction version 2.)
    for _ in 0..3 {
        let (_, mut frame) = c.request_frame(&ApiVersionsRequest::default(), 3);
        // length, then the header's api key and version.
        frame[6..8].copy_from_slice(&5i16.to_be_bytes());
        c.send_raw(&frame).await;
        let answer = c
            .read_frame()
            .await
            .expect("an answer, not a closed connection");
        // correlation id, then the v0 body's error code.
        assert_eq!(&answer[4..6], &35i16.to_be_bytes(), "UNSUPPORTED_VERSION");
    }
    signal(&p.child, "TERM").await;
    bounded("exit", p.child.wait()).await.expect("wait");
    let log = stderr_of(&mut p.child).await;
    let told: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("a request of a version this broker does not serve"))
        .collect();
    assert_eq!(told.len(), 1, "{log}");
    assert!(
        told[0].contains("client_id=")
            && told[0].contains("ApiVersions")
            && told[0].contains("version=5"),
        "{}",
        told[0]
    );
}
