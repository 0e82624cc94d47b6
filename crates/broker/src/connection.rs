//! A connection reads and writes Kafka's size-prefixed frames, and nothing else.

use std::io;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::tls::Stream;

/// Why a frame could not be read. Any of them ends the connection.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    /// The length prefix is negative or above the limit.
    #[error("a frame of {length} bytes is outside 0..={limit} (max-frame-bytes)")]
    Size { length: i64, limit: usize },
    /// The peer closed the socket in the middle of a frame.
    #[error("the peer closed the connection in the middle of a frame")]
    Truncated,
    /// The socket failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// How much a read asks the socket for when the buffer is full.
const READ_CHUNK: usize = 4 * 1024;

/// The most a frame whose length is known reserves ahead of its bytes: memory follows what
/// arrives, never what a length prefix announces (20 connections announcing 100 MiB frames
/// and sending nothing more hold 20 small buffers, not 2 GB).
const MAX_RESERVE: usize = 64 * 1024;

/// One client's socket, with a read buffer for partial frames (mini-redis's `Connection`).
///
/// No write buffer: every response is one complete frame written with one `write_all`, so a
/// `BufWriter` would only copy it (and cost every connection 8 KiB while idle). The read
/// buffer is allocated when a request starts arriving and let go once it is taken out, so an
/// idle connection holds neither.
#[derive(Debug)]
pub(crate) struct Connection {
    stream: Stream,
    buffer: BytesMut,
    max_frame: usize,
    /// When the first byte of the frame being read arrived; `None` between frames.
    partial_since: Option<Instant>,
}

impl Connection {
    pub(crate) fn new(socket: Stream, max_frame: usize) -> Connection {
        Connection {
            stream: socket,
            buffer: BytesMut::new(),
            max_frame,
            partial_since: None,
        }
    }

    /// Sets the largest frame accepted from the next frame on (a SASL listener's connections
    /// take small frames until they have authenticated).
    pub(crate) fn set_max_frame(&mut self, max_frame: usize) {
        self.max_frame = max_frame;
    }

    /// When the first byte of a frame not yet complete arrived, if one is being read.
    pub(crate) fn partial_since(&self) -> Option<Instant> {
        self.partial_since
    }

    /// The next request frame, without its length prefix; `None` when the peer closed the
    /// connection between frames.
    ///
    /// Cancel-safe: bytes read so far stay in the buffer, so it can sit in a `select!`.
    pub(crate) async fn read_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        loop {
            if let Some(frame) = self.parse_frame()? {
                self.partial_since = (!self.buffer.is_empty()).then(Instant::now);
                if self.buffer.is_empty() {
                    // Nothing pipelined behind it: a connection waiting for its next request
                    // holds no read buffer (the frame keeps what it needs).
                    self.buffer = BytesMut::new();
                }
                return Ok(Some(frame));
            }
            let read = match &mut self.stream {
                Stream::Tcp(tcp) => {
                    // Wait for bytes before making room for them: a connection waiting for
                    // its next request holds no buffer (the task sits here while idle).
                    tcp.readable().await?;
                    if self.buffer.len() == self.buffer.capacity() {
                        self.buffer.reserve(READ_CHUNK);
                    }
                    match tcp.try_read_buf(&mut self.buffer) {
                        Ok(read) => read,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            // A readiness without bytes (a new socket's first): give the
                            // room back.
                            if self.buffer.is_empty() {
                                self.buffer = BytesMut::new();
                            }
                            continue;
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                // TLS may hold decrypted bytes the socket no longer signals, so it is read
                // into a buffer at once (its session keeps buffers of its own anyway).
                // Cancel-safe: bytes not yet copied out stay in the TLS session.
                tls @ Stream::Tls(_) => {
                    if self.buffer.len() == self.buffer.capacity() {
                        self.buffer.reserve(READ_CHUNK);
                    }
                    tls.read_buf(&mut self.buffer).await?
                }
            };
            if read == 0 {
                return if self.buffer.is_empty() {
                    Ok(None)
                } else {
                    Err(FrameError::Truncated)
                };
            }
            if self.partial_since.is_none() {
                self.partial_since = Some(Instant::now());
            }
        }
    }

    fn parse_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        let Some(prefix) = self.buffer.get(..4) else {
            return Ok(None);
        };
        let length = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
        let size = usize::try_from(length)
            .ok()
            .filter(|&n| n <= self.max_frame)
            .ok_or(FrameError::Size {
                length: length.into(),
                limit: self.max_frame,
            })?;
        if self.buffer.len() < 4 + size {
            // Room for what the frame still needs, but never more than a chunk ahead of the
            // bytes that arrived.
            let missing = 4 + size - self.buffer.len();
            let spare = self.buffer.capacity() - self.buffer.len();
            if spare < missing.min(MAX_RESERVE) {
                self.buffer.reserve(missing.min(MAX_RESERVE));
            }
            return Ok(None);
        }
        self.buffer.advance(4);
        Ok(Some(self.buffer.split_to(size).freeze()))
    }

    /// Writes one response frame (length prefix included).
    pub(crate) async fn write_frame(&mut self, frame: &[u8]) -> io::Result<()> {
        self.stream.write_all(frame).await?;
        // TLS keeps records it could not send yet; a flush writes them (TCP: nothing to do).
        self.stream.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::{TcpListener, TcpStream};

    /// A connection waiting for its next request holds no read buffer, before its first
    /// request and after each one.
    #[tokio::test]
    async fn a_connection_between_requests_holds_no_buffer() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let mut conn = Connection::new(Stream::Tcp(server), 1024);
        let wait = std::time::Duration::from_millis(100);
        assert!(tokio::time::timeout(wait, conn.read_frame()).await.is_err());
        assert_eq!(conn.buffer.capacity(), 0, "before the first request");
        client.write_all(&[0, 0, 0, 3, 1, 2, 3]).await.unwrap();
        let frame = conn.read_frame().await.unwrap().unwrap();
        assert_eq!(&frame[..], &[1, 2, 3]);
        drop(frame);
        assert!(tokio::time::timeout(wait, conn.read_frame()).await.is_err());
        assert_eq!(conn.buffer.capacity(), 0, "between requests");
        drop(client);
        assert!(
            conn.read_frame().await.unwrap().is_none(),
            "closed between frames"
        );
    }

    /// A frame announcing 100 MiB of which 10 bytes arrived holds a small buffer: memory
    /// follows what arrives, not what the prefix announces.
    #[tokio::test]
    async fn an_announced_length_is_not_reserved_ahead_of_its_bytes() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let mut conn = Connection::new(Stream::Tcp(server), 200 * 1024 * 1024);
        let mut bytes = (100u32 * 1024 * 1024).to_be_bytes().to_vec();
        bytes.extend_from_slice(&[7; 10]);
        client.write_all(&bytes).await.unwrap();
        let read = tokio::time::timeout(std::time::Duration::from_millis(300), conn.read_frame());
        assert!(read.await.is_err(), "the frame is incomplete");
        assert_eq!(conn.buffer.len(), 14);
        assert!(
            conn.buffer.capacity() <= 2 * MAX_RESERVE,
            "reserved {} bytes for 14 received",
            conn.buffer.capacity()
        );
        assert!(conn.partial_since().is_some());
        // The frame still completes as its bytes arrive.
        let rest = vec![1u8; 100 * 1024 * 1024 - 10];
        let writer = tokio::spawn(async move { client.write_all(&rest).await.map(|_| client) });
        let frame = conn.read_frame().await.unwrap().unwrap();
        assert_eq!(frame.len(), 100 * 1024 * 1024);
        assert_eq!(&frame[..10], &[7; 10]);
        assert!(conn.partial_since().is_none());
        writer.await.unwrap().unwrap();
    }
}
