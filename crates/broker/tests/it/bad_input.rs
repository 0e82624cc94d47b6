//! docs/wire.md#bad-input: a malformed frame, an oversized frame, an unknown API key or an
//! undecodable request closes that connection only; an unsupported version of a known API
//! gets UNSUPPORTED_VERSION (35) where its response can carry it.

use crate::common;

use common::*;
use kafka_protocol::messages::*;

/// Opens a victim connection, sends `bytes`, and checks that the broker closed it while a
/// bystander connection opened before keeps working.
async fn closes_only_that_connection(broker: &TestBroker, bytes: &[u8]) {
    let mut bystander = broker.client().await;
    let mut victim = broker.client().await;
    victim.send_raw(bytes).await;
    assert!(
        victim.is_closed().await,
        "{bytes:02x?}: the connection is closed"
    );
    let r = bystander.call(&ApiVersionsRequest::default(), 3).await;
    assert_eq!(r.error_code, 0, "other connections are not affected");
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

#[tokio::test]
async fn malformed_frames_close_their_connection_only() {
    let broker = TestBroker::with(broker::BrokerConfig {
        max_frame_bytes: 1024,
        ..config()
    })
    .await;
    let cases: Vec<Vec<u8>> = vec![
        // A negative length.
        (-5i32).to_be_bytes().to_vec(),
        // Oversized: one byte above --max-frame-bytes (the body is never sent).
        1025i32.to_be_bytes().to_vec(),
        // Shorter than a request header.
        frame(&[0, 18, 0]),
        // An unknown API key.
        frame(&[0x7f, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0]),
        // A known key this broker does not serve (CreateDelegationToken).
        frame(&[0, 38, 0, 1, 0, 0, 0, 1, 0, 0]),
        // A client id longer than the frame.
        frame(&[0, 18, 0, 0, 0, 0, 0, 1, 0x7f, 0xff, b'x']),
        // Heartbeat v0 whose body stops inside the group id.
        frame(&[0, 12, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0, 9, b'g']),
        // Produce v2: advertised (for librdkafka's sake) but not decodable.
        frame(&[
            0, 0, 0, 2, 0, 0, 0, 1, 0xff, 0xff, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
        ]),
    ];
    for bytes in cases {
        closes_only_that_connection(&broker, &bytes).await;
    }
    // A frame cut short by the client closing its side.
    let mut c = broker.client().await;
    c.send_raw(&100i32.to_be_bytes()).await;
    c.send_raw(&[0, 18]).await;
    c.stream().shutdown().await.expect("half close");
    assert!(c.is_closed().await);
    broker.stop().await.expect("the broker survived every case");
}

#[tokio::test]
async fn a_frame_at_the_limit_is_accepted() {
    let broker = TestBroker::with(broker::BrokerConfig {
        max_frame_bytes: 4096,
        ..config()
    })
    .await;
    let mut c = broker.client().await;
    // Pad the client id so the ApiVersions v0 request frame is exactly the limit.
    let (_, probe) = c.request_frame(&ApiVersionsRequest::default(), 0);
    let pad = 4096 - (probe.len() - 4);
    let id: &'static str = Box::leak("x".repeat("test-client".len() + pad).into_boxed_str());
    c.client_id = id;
    let (correlation, f) = c.request_frame(&ApiVersionsRequest::default(), 0);
    assert_eq!(f.len() - 4, 4096);
    c.send_raw(&f).await;
    let r = c.receive::<ApiVersionsRequest>(correlation, 0).await;
    assert_eq!(r.error_code, 0);
}

#[tokio::test]
async fn an_unsupported_version_of_a_known_api_gets_unsupported_version() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    // ApiVersions v5, no such version yet: UNSUPPORTED_VERSION in a v0 body, as Kafka
    // answers (EndTxn v5, the example before, is served since transaction version 2).
    let (_, mut request) = c.request_frame(&ApiVersionsRequest::default(), 3);
    request[6..8].copy_from_slice(&5i16.to_be_bytes());
    c.send_raw(&request).await;
    let answer = c.read_frame().await.expect("answered");
    assert_eq!(&answer[4..6], &35i16.to_be_bytes());
    // A response without a top-level error code cannot say so: Kafka closes, so do we.
    // Metadata v14, which no codec knows (the body is never read): header v2, api key 3.
    closes_only_that_connection(&broker, &frame(&[0, 3, 0, 14, 0, 0, 0, 5, 0, 0, 0, 0, 0])).await;
}

use tokio::io::AsyncWriteExt;

/// A few bytes announcing 2^31-1 elements must not make the broker allocate for them: with
/// kafka-protocol 0.18.0 as published, this aborted the whole process (vendor/PATCHED.md).
#[tokio::test]
async fn hostile_length_prefixes_close_the_connection_not_the_broker() {
    let broker = TestBroker::start().await;
    // JoinGroup v0: group "g", session 1, member "", type "consumer", 2^31-1 protocols.
    let mut join = vec![
        0u8, 11, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0, 1, b'g', 0, 0, 0, 1, 0, 0, 0, 8,
    ];
    join.extend_from_slice(b"consumer");
    join.extend_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
    closes_only_that_connection(&broker, &frame(&join)).await;
    // DescribeGroups v5 (flexible): a compact array of 2^32-2 group ids.
    let describe = [
        0u8, 15, 0, 5, 0, 0, 0, 1, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0xff, 0x0f,
    ];
    closes_only_that_connection(&broker, &frame(&describe)).await;
    // A produced record announcing 2^31-1 headers (uncompressed, valid CRC): refused.
    let mut c = broker.client().await;
    let mut record = common::record(0, 1);
    record.headers.clear();
    let good = batch(&[record], kafka_protocol::records::Compression::None).to_vec();
    let mut hostile = good.clone();
    // The record's header count is its last varint (0 headers = 0x00): replace it by the
    // zigzag varint of 2^31-1, fix the lengths and the CRC.
    assert_eq!(hostile.pop(), Some(0));
    hostile.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]);
    let grow = 4u8;
    hostile[61] += 2 * grow; // the record's length varint (small, one byte, zigzag)
    let batch_len = i32::from_be_bytes(hostile[8..12].try_into().unwrap()) + i32::from(grow);
    hostile[8..12].copy_from_slice(&batch_len.to_be_bytes());
    let crc = crc32c::crc32c(&hostile[21..]);
    hostile[17..21].copy_from_slice(&crc.to_be_bytes());
    let (error, _) = produce(&mut c, "t", 0, bytes::Bytes::from(hostile), 7).await;
    assert_eq!(error, 2, "CORRUPT_MESSAGE, and the broker is still there");
    assert_eq!(
        c.call(&ApiVersionsRequest::default(), 3).await.error_code,
        0
    );
    broker.stop().await.expect("clean stop");
}

/// A compressed batch that inflates past `--max-decompressed-batch-bytes` is refused with
/// MESSAGE_TOO_LARGE (10) and changes nothing; the connection and the partition stay usable.
#[tokio::test]
async fn a_decompression_bomb_is_refused_at_its_bound() {
    use kafka_protocol::records::Compression;
    let broker = TestBroker::with(broker::BrokerConfig {
        max_decompressed_batch_bytes: 1024 * 1024,
        ..config()
    })
    .await;
    let mut c = broker.client().await;
    let mut bomb = record(0, 1_000);
    bomb.value = Some(bytes::Bytes::from(vec![0u8; 64 * 1024 * 1024]));
    let bytes = batch(&[bomb], Compression::Gzip);
    assert!(bytes.len() < 1024 * 1024, "a small request");
    let (error, _) = produce(&mut c, "t", 0, bytes, 7).await;
    assert_eq!(error, 10, "MESSAGE_TOO_LARGE");
    // Nothing was appended, and a batch within the bound is served.
    let (error, base) = produce(
        &mut c,
        "t",
        0,
        batch(&[record(1, 1_001)], Compression::Gzip),
        7,
    )
    .await;
    assert_eq!((error, base), (0, 0));
}

/// `--max-connections-per-ip`: a connection past the limit from one address is closed at
/// once; the others are served, and a slot freed is taken again.
#[tokio::test]
async fn connections_past_the_per_address_limit_are_closed() {
    let broker = TestBroker::with(broker::BrokerConfig {
        max_connections_per_ip: 2,
        ..config()
    })
    .await;
    let mut a = broker.client().await;
    let mut b = broker.client().await;
    for c in [&mut a, &mut b] {
        assert_eq!(
            c.call(&ApiVersionsRequest::default(), 3).await.error_code,
            0
        );
    }
    let mut third = broker.client().await;
    assert!(
        third.is_closed().await,
        "the third from 127.0.0.1 is closed"
    );
    drop(a);
    // The freed slot is taken again (bounded: the first close may still be under way).
    bounded("a slot frees up", async {
        loop {
            let mut again = broker.client().await;
            again.send(&ApiVersionsRequest::default(), 3).await;
            if again.read_frame().await.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(
        b.call(&ApiVersionsRequest::default(), 3).await.error_code,
        0
    );
}

/// Bytes after a complete request body are ignored, as Kafka ignores them: librdkafka 2.16's
/// Metadata v12 for every topic carries three (captured from confluent-kafka's
/// `list_topics()`), and closing on them broke it.
#[tokio::test]
async fn bytes_after_a_complete_body_are_ignored_as_kafka_does() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    // librdkafka's frame, correlation id 3, client id "rdkafka".
    let body = [
        0u8, 3, 0, 12, 0, 0, 0, 3, 0, 7, b'r', b'd', b'k', b'a', b'f', b'k', b'a', 0, 0, 0, 0, 0,
        1, 0, 0,
    ];
    c.send_raw(&frame(&body)).await;
    let response = c.read_frame().await.expect("an answer, not a close");
    assert!(response.len() > 8);
    // And the connection stays usable.
    assert_eq!(
        c.call(&ApiVersionsRequest::default(), 3).await.error_code,
        0
    );
}
