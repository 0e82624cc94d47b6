//! The client against a scripted peer on loopback: what it sends, and each way a response
//! can be wrong.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use kafka_client::{ClientError, Connection};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, RequestHeader};
use kafka_protocol::protocol::{decode_request_header_from_buffer, Encodable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A peer that reads one request and answers with `answer(its header)`, then closes its
/// side; `None` answers nothing and keeps the connection open until the client goes.
async fn peer(answer: fn(&RequestHeader) -> Option<Vec<u8>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let len = socket.read_i32().await.unwrap();
        let mut frame = vec![0; usize::try_from(len).unwrap()];
        socket.read_exact(&mut frame).await.unwrap();
        let header = decode_request_header_from_buffer(&mut bytes::Bytes::from(frame)).unwrap();
        let Some(bytes) = answer(&header) else {
            // Silent: hold the connection until the client goes.
            let mut rest = Vec::new();
            let _ = socket.read_to_end(&mut rest).await;
            return;
        };
        socket.write_all(&bytes).await.unwrap();
        // Then end the stream, so a truncated answer is seen as one.
        socket.shutdown().await.unwrap();
        let mut rest = Vec::new();
        let _ = socket.read_to_end(&mut rest).await;
    });
    addr
}

/// A v0 ApiVersions response frame with `correlation`, plus `extra` bytes after the body.
fn api_versions(correlation: i32, extra: &[u8]) -> Vec<u8> {
    let mut body = BytesMut::new();
    body.put_i32(correlation);
    ApiVersionsResponse::default()
        .with_error_code(35)
        .encode(&mut body, 0)
        .unwrap();
    body.extend_from_slice(extra);
    let mut frame = (i32::try_from(body.len()).unwrap()).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

async fn call(addr: SocketAddr) -> Result<ApiVersionsResponse, ClientError> {
    let mut c = Connection::connect(addr).await.unwrap();
    c.set_client_id("me");
    c.call(&ApiVersionsRequest::default(), 0).await
}

#[tokio::test]
async fn a_response_is_decoded_and_the_header_carries_the_client_id() {
    let addr = peer(|h| {
        assert_eq!(h.client_id.as_deref(), Some("me"));
        assert_eq!((h.request_api_key, h.request_api_version), (18, 0));
        Some(api_versions(h.correlation_id, &[]))
    })
    .await;
    assert_eq!(call(addr).await.unwrap().error_code, 35);
}

#[tokio::test]
async fn each_wrong_response_is_its_own_error() {
    let wrong_id = peer(|h| Some(api_versions(h.correlation_id + 1, &[]))).await;
    assert!(matches!(
        call(wrong_id).await,
        Err(ClientError::Correlation {
            expected: 1,
            got: 2
        })
    ));
    let trailing = peer(|h| Some(api_versions(h.correlation_id, &[9, 9]))).await;
    assert!(matches!(
        call(trailing).await,
        Err(ClientError::Trailing(2))
    ));
    let huge = peer(|_| Some(i32::MAX.to_be_bytes().to_vec())).await;
    assert!(matches!(
        call(huge).await,
        Err(ClientError::FrameSize(i32::MAX))
    ));
    let short = peer(|_| Some(vec![0, 0, 0, 2, 0])).await;
    let err = call(short).await.unwrap_err();
    assert!(matches!(err, ClientError::Closed), "{err:?}");
    assert_eq!(err.to_string(), "the broker closed the connection");
    let body = peer(|h| {
        let mut frame = vec![0, 0, 0, 5];
        frame.extend_from_slice(&h.correlation_id.to_be_bytes());
        frame.push(0);
        Some(frame)
    })
    .await;
    assert!(matches!(call(body).await, Err(ClientError::Body(_))));
}

#[tokio::test]
async fn a_silent_peer_times_out() {
    let silent = peer(|_| None).await;
    let mut c = Connection::connect(silent).await.unwrap();
    let err = c
        .call_within(&ApiVersionsRequest::default(), 0, Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Timeout(50)), "{err:?}");
}
