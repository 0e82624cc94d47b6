//! A connection reads and writes Kafka's size-prefixed frames, and nothing else.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::memory_pool::{MemoryPool, Reservation};
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

/// Frames up to this size are copied out of the read buffer rather than split off it: a
/// split-off frame shares the buffer's allocation (a 4 KiB chunk at least) and keeps all of
/// it for as long as its request is served, and a long-poll Fetch or a JoinGroup at the
/// barrier is served for seconds. A heap profile of 16 Stable confluent-kafka members showed
/// one 4 KiB chunk per member with a Fetch in flight for a frame of ~100 bytes; the copy is
/// one small allocation and at most 2 KiB of `memcpy` per request.
const COPY_UP_TO: usize = READ_CHUNK / 2;

/// A complete request frame, without its length prefix, and its share of the frames'
/// memory pool (`--queued-max-request-bytes`): keep it until the request is handled.
#[derive(Debug)]
pub(crate) struct Frame {
    pub(crate) bytes: Bytes,
    /// `None` without a pool.
    pub(crate) memory: Option<Reservation>,
}

/// Where a connection is in reading its next frame, for its deadlines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadPhase {
    /// Between frames: no byte of the next one has arrived.
    Idle,
    /// The next frame announced its length and waits for the pool's memory: nothing more
    /// is read from the socket meanwhile, and no deadline runs.
    WaitingForMemory,
    /// A frame is arriving since this instant (its first byte, or the moment the pool gave
    /// it its memory if it had to wait).
    Reading(Instant),
}

/// The wait for a frame's memory, kept across cancellations of `read_frame` so that a
/// connection keeps its place in the pool's queue.
struct Waiting(Pin<Box<dyn Future<Output = Reservation> + Send>>);

impl fmt::Debug for Waiting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Waiting")
    }
}

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
    /// The broker's pool of frame memory (`--queued-max-request-bytes`); `None`: unbounded.
    pool: Option<Arc<MemoryPool>>,
    /// The memory of the frame being read, once the pool gave it.
    memory: Option<Reservation>,
    /// The frame being read waits for its memory.
    waiting: Option<Waiting>,
}

impl Connection {
    pub(crate) fn new(
        socket: Stream,
        max_frame: usize,
        pool: Option<Arc<MemoryPool>>,
    ) -> Connection {
        Connection {
            stream: socket,
            buffer: BytesMut::new(),
            max_frame,
            partial_since: None,
            pool,
            memory: None,
            waiting: None,
        }
    }

    /// Sets the largest frame accepted from the next frame on (a SASL listener's connections
    /// take small frames until they have authenticated).
    pub(crate) fn set_max_frame(&mut self, max_frame: usize) {
        self.max_frame = max_frame;
    }

    /// Where the connection is in reading its next frame (see [`ReadPhase`]).
    pub(crate) fn phase(&self) -> ReadPhase {
        match (self.waiting.is_some(), self.partial_since) {
            (true, _) => ReadPhase::WaitingForMemory,
            (false, Some(since)) => ReadPhase::Reading(since),
            (false, None) => ReadPhase::Idle,
        }
    }

    /// The next request frame, without its length prefix; `None` when the peer closed the
    /// connection between frames.
    ///
    /// With a pool, a frame's memory is taken from it as soon as its length prefix has
    /// arrived, before any room is made for its body; while the pool has none left the
    /// connection reads nothing more (its bytes wait in the socket) until another request
    /// gives memory back. The frame's time to arrive then counts from the moment it got its
    /// memory.
    ///
    /// Cancel-safe: bytes read so far stay in the buffer, and a wait for memory keeps its
    /// place, so it can sit in a `select!`.
    pub(crate) async fn read_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        loop {
            if let Some(frame) = self.parse_frame()? {
                self.partial_since = (!self.buffer.is_empty()).then(Instant::now);
                if self.buffer.is_empty() {
                    // Nothing pipelined behind it: a connection waiting for its next request
                    // holds no read buffer (the frame keeps what it needs).
                    self.buffer = BytesMut::new();
                }
                return Ok(Some(Frame {
                    bytes: frame,
                    memory: self.memory.take(),
                }));
            }
            if let Some(waiting) = &mut self.waiting {
                let memory = waiting.0.as_mut().await;
                self.waiting = None;
                self.memory = Some(memory);
                self.partial_since = Some(Instant::now());
                continue;
            }
            // With a pool, a frame whose length is known reads no further than its own end:
            // the bytes of the next one stay in the socket until it has its memory.
            let limit = match (&self.pool, self.missing()) {
                (Some(_), Some(missing)) => missing,
                _ => usize::MAX,
            };
            let read = match &mut self.stream {
                Stream::Tcp(tcp) => {
                    // Wait for bytes before making room for them: a connection waiting for
                    // its next request holds no buffer (the task sits here while idle).
                    tcp.readable().await?;
                    if self.buffer.len() == self.buffer.capacity() {
                        self.buffer.reserve(READ_CHUNK);
                    }
                    match tcp.try_read_buf(&mut (&mut self.buffer).limit(limit)) {
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
                    tls.read_buf(&mut (&mut self.buffer).limit(limit)).await?
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

    /// The length the frame being read announced, once its prefix has arrived.
    fn announced(&self) -> Option<i32> {
        let prefix = self.buffer.get(..4)?;
        Some(i32::from_be_bytes([
            prefix[0], prefix[1], prefix[2], prefix[3],
        ]))
    }

    /// How many bytes the frame being read still needs, once its length is known.
    fn missing(&self) -> Option<usize> {
        let size = usize::try_from(self.announced()?).ok()?;
        Some((4 + size).saturating_sub(self.buffer.len()))
    }

    fn parse_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        let Some(length) = self.announced() else {
            return Ok(None);
        };
        let size = usize::try_from(length)
            .ok()
            .filter(|&n| n <= self.max_frame)
            .ok_or(FrameError::Size {
                length: length.into(),
                limit: self.max_frame,
            })?;
        if let (Some(pool), None) = (&self.pool, &self.memory) {
            // Memory before room: the frame asks the pool for its announced size now.
            if self.waiting.is_none() {
                if let Some(memory) = pool.try_reserve(size) {
                    self.memory = Some(memory);
                    return self.parse_frame();
                }
                if pool.available() <= 0 {
                    tracing::debug!(
                        announced = size,
                        available = pool.available(),
                        "the frames' memory pool is exhausted: the frame waits for memory"
                    );
                }
                self.waiting = Some(Waiting(Box::pin(pool.clone().reserve(size))));
            }
            return Ok(None);
        }
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
        if size <= COPY_UP_TO {
            let frame = Bytes::copy_from_slice(&self.buffer[..size]);
            self.buffer.advance(size);
            return Ok(Some(frame));
        }
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
        let mut conn = Connection::new(Stream::Tcp(server), 1024, None);
        let wait = std::time::Duration::from_millis(100);
        assert!(tokio::time::timeout(wait, conn.read_frame()).await.is_err());
        assert_eq!(conn.buffer.capacity(), 0, "before the first request");
        client.write_all(&[0, 0, 0, 3, 1, 2, 3]).await.unwrap();
        let frame = conn.read_frame().await.unwrap().unwrap().bytes;
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

    /// A small frame does not share the read buffer's allocation: a request served for long
    /// (a long-poll Fetch) would keep the whole chunk it arrived in. Two frames arrive in one
    /// chunk; the first one handed out lies outside that chunk, which the second still holds.
    #[tokio::test]
    async fn a_small_frame_does_not_hold_the_read_chunk() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let mut conn = Connection::new(Stream::Tcp(server), 1024, None);
        client
            .write_all(&[0, 0, 0, 3, 1, 2, 3, 0, 0, 0, 2, 4, 5])
            .await
            .unwrap();
        // Both frames are read in one go (the first read takes what the socket holds).
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let first = conn.read_frame().await.unwrap().unwrap().bytes;
        assert_eq!(&first[..], &[1, 2, 3]);
        assert_eq!(
            &conn.buffer[..],
            &[0, 0, 0, 2, 4, 5],
            "the second frame waits"
        );
        // The chunk: from the first frame's prefix to the end of the buffer's capacity.
        let chunk_start = conn.buffer.as_ptr() as usize - 7;
        let chunk_end = conn.buffer.as_ptr() as usize + conn.buffer.capacity();
        let at = first.as_ptr() as usize;
        assert!(
            !(chunk_start..chunk_end).contains(&at),
            "the frame lies in the read chunk ({chunk_start:#x}..{chunk_end:#x}): {at:#x}"
        );
        let second = conn.read_frame().await.unwrap().unwrap().bytes;
        assert_eq!(&second[..], &[4, 5]);
    }

    /// A frame announcing 100 MiB of which 10 bytes arrived holds a small buffer: memory
    /// follows what arrives, not what the prefix announces.
    #[tokio::test]
    async fn an_announced_length_is_not_reserved_ahead_of_its_bytes() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let mut conn = Connection::new(Stream::Tcp(server), 200 * 1024 * 1024, None);
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
        assert!(matches!(conn.phase(), ReadPhase::Reading(_)));
        // The frame still completes as its bytes arrive.
        let rest = vec![1u8; 100 * 1024 * 1024 - 10];
        let writer = tokio::spawn(async move { client.write_all(&rest).await.map(|_| client) });
        let frame = conn.read_frame().await.unwrap().unwrap().bytes;
        assert_eq!(frame.len(), 100 * 1024 * 1024);
        assert_eq!(&frame[..10], &[7; 10]);
        assert_eq!(conn.phase(), ReadPhase::Idle);
        writer.await.unwrap().unwrap();
    }
}
