//! `--queued-max-request-bytes` (Kafka's `queued.max.request.bytes`, issue 43): the memory of
//! the frames being read is bounded as a whole. Past the bound the broker reads no new
//! request until memory is freed, no connection is closed for it, and reading resumes.

use std::time::Duration;

use crate::common;

use broker::testing::TestBroker;
use broker::BrokerConfig;
use common::*;
use kafka_protocol::messages::*;

const MIB: usize = 1024 * 1024;

async fn start(config: BrokerConfig) -> TestBroker {
    bounded("start", TestBroker::with_config(config))
        .await
        .expect("the broker starts")
}

async fn client(broker: &TestBroker, client_id: &'static str) -> Client {
    let mut c = Client::connect(broker.addr()).await;
    c.client_id = client_id;
    c
}

/// A 1 MiB pool for frames of at most 1 MiB.
fn small_pool() -> BrokerConfig {
    BrokerConfig {
        max_frame_bytes: MIB,
        queued_max_request_bytes: MIB as i64,
        ..TestBroker::test_config()
    }
}

/// An ApiVersions v0 request padded to a frame of `size` bytes (length prefix excluded): the
/// broker ignores the bytes after a request's body. Returns its correlation id and the frame.
fn padded_api_versions(c: &mut Client, size: usize) -> (i32, Vec<u8>) {
    let (correlation, frame) = c.request_frame(&ApiVersionsRequest::default(), 0);
    let mut bytes = (size as i32).to_be_bytes().to_vec();
    bytes.extend_from_slice(&frame[4..]);
    bytes.resize(4 + size, 0);
    (correlation, bytes)
}

/// Whether the broker sends this connection anything within `wait` (without reading it);
/// fails the test if the broker closes it.
async fn answers_within(c: &mut Client, wait: Duration) -> bool {
    let mut byte = [0u8; 1];
    match tokio::time::timeout(wait, c.stream().peek(&mut byte)).await {
        Err(_) => false,
        Ok(Ok(0)) | Ok(Err(_)) => panic!("the broker closed the connection"),
        Ok(Ok(_)) => true,
    }
}

/// How many requests of `client_id` the broker has read (decoded and recorded).
fn seen(broker: &TestBroker, client_id: &str) -> usize {
    broker
        .faults()
        .requests()
        .iter()
        .filter(|r| r.client_id == client_id)
        .count()
}

/// Two clients send 600 KiB frames slowly into a 1 MiB pool. The first is let in; the
/// second too, though less than it needs is left (Kafka's non-strict pool); then the pool is
/// exhausted and a third client's small request is not read until one of them is handled.
/// Every request is answered in the end and every connection stays open.
#[tokio::test]
async fn a_new_request_waits_while_the_pool_is_exhausted_and_is_read_once_memory_is_freed() {
    let broker = start(small_pool()).await;
    let size = 600 * 1024;
    let mut a = client(&broker, "a").await;
    let mut b = client(&broker, "b").await;
    let mut c = client(&broker, "c").await;
    let (a_corr, a_frame) = padded_api_versions(&mut a, size);
    let (b_corr, b_frame) = padded_api_versions(&mut b, size);
    // The length prefixes and a first kilobyte each; a pause so the broker reads them in
    // this order.
    a.send_raw(&a_frame[..1028]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    b.send_raw(&b_frame[..1028]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let c_corr = c.send(&ApiVersionsRequest::default(), 3).await;
    // 1 MiB - 2 x 600 KiB: the pool is below zero, c's request stays in its socket.
    assert!(
        !answers_within(&mut c, Duration::from_secs(1)).await,
        "c is answered while the pool is exhausted"
    );
    assert_eq!(seen(&broker, "c"), 0, "c's request was not read");
    // b, let in with less than it needed, completes while a is still arriving.
    b.send_raw(&b_frame[1028..]).await;
    let r = b.receive::<ApiVersionsRequest>(b_corr, 0).await;
    assert_eq!(r.error_code, 0);
    // b handled: its 600 KiB are back, the pool is above zero again and c is read.
    let r = c.receive::<ApiVersionsRequest>(c_corr, 3).await;
    assert_eq!(r.error_code, 0);
    a.send_raw(&a_frame[1028..]).await;
    let r = a.receive::<ApiVersionsRequest>(a_corr, 0).await;
    assert_eq!(r.error_code, 0);
    // No connection was dropped, and the pool has all its memory back: a frame of the
    // whole pool is let in at once.
    for c in [&mut a, &mut b, &mut c] {
        assert_eq!(
            c.call(&ApiVersionsRequest::default(), 3).await.error_code,
            0
        );
    }
    let (corr, whole) = padded_api_versions(&mut a, MIB);
    a.send_raw(&whole).await;
    assert_eq!(a.receive::<ApiVersionsRequest>(corr, 0).await.error_code, 0);
    broker.stop().await.expect("clean stop");
}

/// A connection waiting for memory longer than the request timeout is not closed: its frame's
/// time to arrive starts when it has memory. The pool is held by a request being handled (a
/// latency fault on one client), not by a frame arriving.
#[tokio::test]
async fn waiting_for_memory_is_not_held_to_the_request_timeout() {
    let broker = start(BrokerConfig {
        request_timeout_ms: 300,
        ..small_pool()
    })
    .await;
    broker
        .faults()
        .latency(ApiKey::ApiVersions, 1_500, Some("slow"))
        .expect("latency");
    let mut slow = client(&broker, "slow").await;
    let mut waiting = client(&broker, "waiting").await;
    // The whole pool, in one frame, handled for 1.5 s.
    let (slow_corr, frame) = padded_api_versions(&mut slow, MIB);
    slow.send_raw(&frame).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A complete small request arrives meanwhile: its length is read, its memory waits.
    let corr = waiting.send(&ApiVersionsRequest::default(), 3).await;
    assert!(
        !answers_within(&mut waiting, Duration::from_millis(800)).await,
        "answered while the pool is held"
    );
    assert_eq!(seen(&broker, "waiting"), 0, "read while the pool is held");
    // Past 300 ms of waiting, still open, and answered once the slow request is.
    let r = waiting.receive::<ApiVersionsRequest>(corr, 3).await;
    assert_eq!(r.error_code, 0);
    let r = slow.receive::<ApiVersionsRequest>(slow_corr, 0).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(
        waiting
            .call(&ApiVersionsRequest::default(), 3)
            .await
            .error_code,
        0
    );
    broker.stop().await.expect("clean stop");
}

/// A connection that closes in the middle of a frame gives its memory back: the pool is not
/// drained by clients that leave.
#[tokio::test]
async fn a_connection_closed_mid_frame_gives_its_memory_back() {
    let broker = start(small_pool()).await;
    for _ in 0..5 {
        let mut gone = client(&broker, "gone").await;
        let (_, frame) = padded_api_versions(&mut gone, MIB);
        gone.send_raw(&frame[..4096]).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(gone);
    }
    let mut c = client(&broker, "c").await;
    let (corr, frame) = padded_api_versions(&mut c, MIB);
    c.send_raw(&frame).await;
    assert_eq!(c.receive::<ApiVersionsRequest>(corr, 0).await.error_code, 0);
    broker.stop().await.expect("clean stop");
}
