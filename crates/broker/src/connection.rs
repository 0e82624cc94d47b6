//! A connection reads and writes Kafka's size-prefixed frames, and nothing else.

use std::io;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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

/// How much a read asks the socket for when the buffer is full (a frame whose length is
/// known reserves exactly what it still needs instead).
const READ_CHUNK: usize = 4 * 1024;

/// One client's socket, with a read buffer for partial frames (mini-redis's `Connection`).
///
/// No write buffer: every response is one complete frame written with one `write_all`, so a
/// `BufWriter` would only copy it (and cost every connection 8 KiB while idle). The read
/// buffer is allocated when a request starts arriving and let go once it is taken out, so an
/// idle connection holds neither.
#[derive(Debug)]
pub(crate) struct Connection {
    stream: TcpStream,
    buffer: BytesMut,
    max_frame: usize,
}

impl Connection {
    pub(crate) fn new(socket: TcpStream, max_frame: usize) -> Connection {
        Connection {
            stream: socket,
            buffer: BytesMut::new(),
            max_frame,
        }
    }

    /// The next request frame, without its length prefix; `None` when the peer closed the
    /// connection between frames.
    ///
    /// Cancel-safe: bytes read so far stay in the buffer, so it can sit in a `select!`.
    pub(crate) async fn read_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        loop {
            if let Some(frame) = self.parse_frame()? {
                if self.buffer.is_empty() {
                    // Nothing pipelined behind it: a connection waiting for its next request
                    // holds no read buffer (the frame keeps what it needs).
                    self.buffer = BytesMut::new();
                }
                return Ok(Some(frame));
            }
            if self.buffer.len() == self.buffer.capacity() {
                self.buffer.reserve(READ_CHUNK);
            }
            if self.stream.read_buf(&mut self.buffer).await? == 0 {
                return if self.buffer.is_empty() {
                    Ok(None)
                } else {
                    Err(FrameError::Truncated)
                };
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
            // Reserve only what the announced (and bounded) frame needs.
            self.buffer.reserve(4 + size - self.buffer.len());
            return Ok(None);
        }
        self.buffer.advance(4);
        Ok(Some(self.buffer.split_to(size).freeze()))
    }

    /// Writes one response frame (length prefix included).
    pub(crate) async fn write_frame(&mut self, frame: &[u8]) -> io::Result<()> {
        self.stream.write_all(frame).await
    }
}
