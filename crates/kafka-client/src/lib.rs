//! # kafka-client
//!
//! The workspace's one Kafka wire client: a [`Connection`] over one TCP socket that encodes a
//! typed request (any `kafka-protocol` [`Request`]) at the version the caller chooses, sends
//! it with a fresh correlation id, and decodes the typed response of that version, checking
//! the correlation id and that nothing trails the body. Frames are bounded
//! ([`MAX_RESPONSE`]); [`Connection::call_within`] bounds a whole exchange in time.
//!
//! It picks no versions and retries nothing: the groups tool negotiates versions from
//! ApiVersions and maps [`ClientError`]s to its own codes; the broker's tests send exactly
//! the bytes they mean to, malformed ones included ([`Connection::send_raw`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), kafka_client::ClientError> {
//! use kafka_client::Connection;
//! use kafka_protocol::messages::ApiVersionsRequest;
//!
//! let mut connection = Connection::connect("127.0.0.1:9092".parse().expect("an address")).await?;
//! let versions = connection.call(&ApiVersionsRequest::default(), 0).await?;
//! println!("{} APIs", versions.api_keys.len());
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{
    encode_request_header_into_buffer, Decodable, HeaderVersion, Request, StrBytes,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest response frame accepted: a broker answering more is broken or hostile.
pub const MAX_RESPONSE: usize = 64 * 1024 * 1024;

/// Why an exchange failed. The messages are the ones the groups tool prints after
/// `failed <API>: `.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The socket failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The broker closed the connection instead of answering.
    #[error("the broker closed the connection")]
    Closed,
    /// A response frame's length prefix is negative or above [`MAX_RESPONSE`].
    #[error("a response frame declares {0} bytes")]
    FrameSize(i32),
    /// The request cannot be encoded at the version asked (a field the version lacks).
    #[error("cannot encode the request: {0}")]
    Encode(String),
    /// The request is larger than a frame can say.
    #[error("the request exceeds 2 GiB")]
    RequestTooLarge,
    /// The response header cannot be decoded.
    #[error("malformed response header: {0}")]
    Header(String),
    /// The response answers another request.
    #[error("answered correlation id {got} to request {expected}")]
    Correlation {
        /// The request's correlation id.
        expected: i32,
        /// The response's.
        got: i32,
    },
    /// The response body cannot be decoded at the request's version.
    #[error("malformed response: {0}")]
    Body(String),
    /// Bytes follow a complete response body.
    #[error("{0} bytes trail the response")]
    Trailing(usize),
    /// No response within the bound of [`Connection::call_within`].
    #[error("no response within {0} ms")]
    Timeout(u64),
}

/// One connection to one broker, one exchange at a time (pipelining is possible with
/// [`send`](Connection::send) and [`receive`](Connection::receive): responses come in order).
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    buffer: BytesMut,
    correlation: i32,
    client_id: String,
}

impl Connection {
    /// Connects to `addr` (with `TCP_NODELAY`: every request is one small write).
    ///
    /// # Errors
    /// The socket's.
    pub async fn connect(addr: SocketAddr) -> Result<Connection, ClientError> {
        let stream = TcpStream::connect(addr).await?;
        Ok(Connection::new(stream))
    }

    /// A connection over an already connected socket.
    pub fn new(stream: TcpStream) -> Connection {
        let _ = stream.set_nodelay(true);
        Connection {
            stream,
            buffer: BytesMut::new(),
            correlation: 0,
            client_id: String::new(),
        }
    }

    /// The client id sent in every request header from now on (empty by default).
    pub fn set_client_id(&mut self, client_id: impl Into<String>) {
        self.client_id = client_id.into();
    }

    /// The socket, for what the client does not cover (a half close, say).
    pub fn stream_mut(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// Encodes `request` at `version` as a complete frame (length prefix, header, body) with
    /// the next correlation id, and returns both.
    ///
    /// # Errors
    /// [`Encode`](ClientError::Encode), [`RequestTooLarge`](ClientError::RequestTooLarge).
    pub fn encode<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<(i32, BytesMut), ClientError> {
        self.correlation = self.correlation.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        encode_request_header_into_buffer(&mut frame, &header)
            .and_then(|()| request.encode(&mut frame, version))
            .map_err(|e| ClientError::Encode(format!("{e:#}")))?;
        let size = i32::try_from(frame.len() - 4).map_err(|_| ClientError::RequestTooLarge)?;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        Ok((self.correlation, frame))
    }

    /// Sends `request` at `version` and returns its correlation id.
    ///
    /// # Errors
    /// As [`encode`](Self::encode), and the socket's.
    pub async fn send<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<i32, ClientError> {
        let (correlation, frame) = self.encode(request, version)?;
        self.send_raw(&frame).await?;
        Ok(correlation)
    }

    /// Writes `bytes` as they are (frames of the caller's making, malformed ones included).
    ///
    /// # Errors
    /// The socket's.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        self.stream.write_all(bytes).await?;
        Ok(())
    }

    /// Reads the response to the request of `correlation`, sent at `version`.
    ///
    /// # Errors
    /// [`Closed`](ClientError::Closed), [`FrameSize`](ClientError::FrameSize),
    /// [`Header`](ClientError::Header), [`Correlation`](ClientError::Correlation),
    /// [`Body`](ClientError::Body), [`Trailing`](ClientError::Trailing), the socket's.
    pub async fn receive<R: Request>(
        &mut self,
        correlation: i32,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        let mut frame = self.read_frame().await?.ok_or(ClientError::Closed)?;
        let header_version = <R::Response as HeaderVersion>::header_version(version);
        let header = ResponseHeader::decode(&mut frame, header_version)
            .map_err(|e| ClientError::Header(format!("{e:#}")))?;
        if header.correlation_id != correlation {
            return Err(ClientError::Correlation {
                expected: correlation,
                got: header.correlation_id,
            });
        }
        let body = <R::Response as Decodable>::decode(&mut frame, version)
            .map_err(|e| ClientError::Body(format!("{e:#}")))?;
        if frame.has_remaining() {
            return Err(ClientError::Trailing(frame.remaining()));
        }
        Ok(body)
    }

    /// Sends `request` at `version` and reads its response.
    ///
    /// # Errors
    /// As [`send`](Self::send) and [`receive`](Self::receive).
    pub async fn call<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        let correlation = self.send(request, version).await?;
        self.receive::<R>(correlation, version).await
    }

    /// [`call`](Self::call), failing with [`Timeout`](ClientError::Timeout) if the exchange
    /// takes longer than `timeout`. A timed-out connection may still deliver the late
    /// response: drop it rather than reuse it.
    ///
    /// # Errors
    /// As [`call`](Self::call), and [`Timeout`](ClientError::Timeout).
    pub async fn call_within<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response, ClientError> {
        match tokio::time::timeout(timeout, self.call(request, version)).await {
            Ok(result) => result,
            Err(_) => Err(ClientError::Timeout(
                u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            )),
        }
    }

    /// The next frame (without its length prefix), or `None` if the broker closed the
    /// connection between frames.
    ///
    /// Cancel-safe: bytes read so far stay buffered.
    ///
    /// # Errors
    /// [`FrameSize`](ClientError::FrameSize), [`Closed`](ClientError::Closed) in the middle
    /// of a frame, the socket's.
    pub async fn read_frame(&mut self) -> Result<Option<Bytes>, ClientError> {
        loop {
            if let Some(prefix) = self.buffer.get(..4) {
                let len = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
                let size = usize::try_from(len)
                    .ok()
                    .filter(|&n| n <= MAX_RESPONSE)
                    .ok_or(ClientError::FrameSize(len))?;
                if self.buffer.len() >= 4 + size {
                    self.buffer.advance(4);
                    return Ok(Some(self.buffer.split_to(size).freeze()));
                }
            }
            if self.stream.read_buf(&mut self.buffer).await? == 0 {
                return if self.buffer.is_empty() {
                    Ok(None)
                } else {
                    Err(ClientError::Closed)
                };
            }
        }
    }
}
