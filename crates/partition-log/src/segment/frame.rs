//! The frame around each stored batch: what recovery checks, whatever bytes the appender
//! encoded (see the module docs of [`segment`](super) for the layout).

use std::fs::File;
use std::io::{self, BufReader, Read};

use coordinator_core::LogError;

/// Bytes of the fixed header after the length field: CRC (4), version (1), base offset (8),
/// record count (4), max timestamp (8).
pub(crate) const FIXED: u32 = 25;
/// Bytes before the per-record timestamps: the length field and [`FIXED`].
pub(crate) const HEADER: u64 = 4 + FIXED as u64;
/// The frame version this code writes and reads.
pub(crate) const VERSION: u8 = 0;
/// The largest frame accepted: a declared length above it is corruption, not a batch.
pub(crate) const MAX_FRAME: u32 = 1 << 30;

/// One frame's header, as recovery and the index need it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) base_offset: i64,
    pub(crate) count: u32,
    pub(crate) max_timestamp: i64,
    /// The whole frame's length, its length field included.
    pub(crate) len: u64,
}

impl Head {
    /// The offset of the batch's last record.
    pub(crate) fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.count))
            .saturating_sub(1)
    }

    /// Where the appender's bytes start, from the frame's start.
    pub(crate) fn data_start(&self) -> u64 {
        HEADER + 8 * u64::from(self.count)
    }
}

/// The frame of a batch of records with `timestamps`, starting at `base_offset`, around `data`.
pub(crate) fn encode(
    base_offset: i64,
    timestamps: &[i64],
    data: &[u8],
) -> Result<Vec<u8>, LogError> {
    let too_big = || LogError::InvalidArgument {
        what: "batch",
        reason: format!(
            "{} records in {} bytes exceed the largest stored batch ({MAX_FRAME} bytes)",
            timestamps.len(),
            data.len()
        ),
    };
    let count = u32::try_from(timestamps.len()).map_err(|_| too_big())?;
    let body = u64::from(FIXED) + 8 * u64::from(count) + data.len() as u64;
    let len = u32::try_from(body)
        .ok()
        .filter(|l| *l <= MAX_FRAME)
        .ok_or_else(too_big)?;
    let max_timestamp = timestamps.iter().copied().max().unwrap_or(-1);
    let mut frame = Vec::with_capacity(4 + len as usize);
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&[0; 4]); // the CRC, below
    frame.push(VERSION);
    frame.extend_from_slice(&base_offset.to_be_bytes());
    frame.extend_from_slice(&count.to_be_bytes());
    frame.extend_from_slice(&max_timestamp.to_be_bytes());
    for t in timestamps {
        frame.extend_from_slice(&t.to_be_bytes());
    }
    frame.extend_from_slice(data);
    let crc = crc32c::crc32c(&frame[8..]);
    frame[4..8].copy_from_slice(&crc.to_be_bytes());
    Ok(frame)
}

/// The per-record timestamps of a frame, from the bytes after its [`HEADER`].
pub(crate) fn timestamps(bytes: &[u8]) -> Vec<i64> {
    bytes
        .chunks_exact(8)
        .map(|c| {
            let mut b = [0; 8];
            b.copy_from_slice(c);
            i64::from_be_bytes(b)
        })
        .collect()
}

/// What the scanner found at a position.
#[derive(Debug)]
pub(crate) enum Step {
    /// A whole frame whose CRC matches.
    Frame(Head),
    /// The end of the file, exactly at a frame boundary.
    End,
    /// Not a valid frame. `at_tail`: nothing valid can follow it (the frame is cut short by
    /// the end of the file, or only zeros follow), so it is a torn write, not a damaged
    /// frame with data after it.
    Bad { reason: String, at_tail: bool },
}

/// Reads a segment file frame by frame, checking each CRC.
pub(crate) struct Scanner {
    reader: BufReader<File>,
    file_len: u64,
    pos: u64,
    buf: Vec<u8>,
}

impl Scanner {
    pub(crate) fn new(file: File, file_len: u64) -> Scanner {
        Scanner {
            reader: BufReader::with_capacity(1 << 20, file),
            file_len,
            pos: 0,
            buf: Vec::new(),
        }
    }

    /// The position of the next frame.
    pub(crate) fn position(&self) -> u64 {
        self.pos
    }

    /// The frame at the current position; after a `Frame`, the position moves past it.
    pub(crate) fn next(&mut self) -> io::Result<Step> {
        let left = self.file_len - self.pos;
        if left == 0 {
            return Ok(Step::End);
        }
        if left < 4 {
            return Ok(Step::Bad {
                reason: format!("a length field cut short ({left} of 4 bytes)"),
                at_tail: true,
            });
        }
        let mut len = [0; 4];
        self.reader.read_exact(&mut len)?;
        let len = u32::from_be_bytes(len);
        if !(FIXED..=MAX_FRAME).contains(&len) {
            let at_tail = self.rest_is_zero(len)?;
            return Ok(Step::Bad {
                reason: format!("an impossible frame length {len}"),
                at_tail,
            });
        }
        if u64::from(len) > left - 4 {
            return Ok(Step::Bad {
                reason: format!(
                    "a frame of {} bytes cut short by the end of the file ({left} bytes left)",
                    u64::from(len) + 4
                ),
                at_tail: true,
            });
        }
        self.buf.resize(len as usize, 0);
        self.reader.read_exact(&mut self.buf)?;
        let at_tail = self.pos + 4 + u64::from(len) == self.file_len;
        let (crc, body) = self.buf.split_at(4);
        let stored = u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]);
        let actual = crc32c::crc32c(body);
        if stored != actual {
            return Ok(Step::Bad {
                reason: format!("a CRC-32C mismatch (stored {stored:08x}, computed {actual:08x})"),
                at_tail,
            });
        }
        // body: version, base offset, count, max timestamp, timestamps, data.
        let version = body[0];
        if version != VERSION {
            return Ok(Step::Bad {
                reason: format!("an unknown frame version {version}"),
                at_tail,
            });
        }
        let word = |at: usize| {
            let mut b = [0; 8];
            b.copy_from_slice(&body[at..at + 8]);
            i64::from_be_bytes(b)
        };
        let base_offset = word(1);
        let count = u32::from_be_bytes([body[9], body[10], body[11], body[12]]);
        let max_timestamp = word(13);
        if count == 0 || u64::from(FIXED) + 8 * u64::from(count) > u64::from(len) {
            return Ok(Step::Bad {
                reason: format!("a record count {count} that does not fit its {len} bytes"),
                at_tail,
            });
        }
        let head = Head {
            base_offset,
            count,
            max_timestamp,
            len: u64::from(len) + 4,
        };
        self.pos += head.len;
        Ok(Step::Frame(head))
    }

    /// Whether every byte after the length field just read is zero (a file extended but not
    /// written, as a power loss can leave it). Reads the rest of the file.
    fn rest_is_zero(&mut self, len: u32) -> io::Result<bool> {
        if len != 0 {
            return Ok(false);
        }
        let mut chunk = [0u8; 8192];
        loop {
            let n = self.reader.read(&mut chunk)?;
            if n == 0 {
                return Ok(true);
            }
            if chunk[..n].iter().any(|b| *b != 0) {
                return Ok(false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn scan(bytes: &[u8]) -> Vec<String> {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        let f2 = f.try_clone().unwrap();
        use std::io::Seek;
        let mut f2 = f2;
        f2.rewind().unwrap();
        let mut s = Scanner::new(f2, bytes.len() as u64);
        let mut out = Vec::new();
        loop {
            match s.next().unwrap() {
                Step::Frame(h) => out.push(format!("frame {} {}", h.base_offset, h.count)),
                Step::End => return out,
                Step::Bad { at_tail, .. } => {
                    out.push(format!("bad at {} tail={at_tail}", s.position()));
                    return out;
                }
            }
        }
    }

    #[test]
    fn frames_round_trip_and_every_flip_is_caught() {
        let one = encode(7, &[10, 30, 20], b"payload").unwrap();
        let two = encode(10, &[40], b"").unwrap();
        let mut both = one.clone();
        both.extend_from_slice(&two);
        assert_eq!(scan(&both), ["frame 7 3", "frame 10 1"]);
        assert_eq!(
            timestamps(&one[HEADER as usize..HEADER as usize + 24]),
            [10, 30, 20]
        );
        // A flipped bit anywhere in the first frame is caught, and not taken for a torn tail
        // (the second frame follows it), except a flip in the length field that makes the
        // frame reach past the end of the file.
        for i in 0..one.len() {
            let mut bad = both.clone();
            bad[i] ^= 0x01;
            let got = scan(&bad);
            assert!(
                got.last().unwrap().starts_with("bad at 0"),
                "flip at {i}: {got:?}"
            );
        }
    }

    #[test]
    fn a_cut_frame_is_a_torn_tail_and_zeros_are_too() {
        let frame = encode(0, &[1], b"abc").unwrap();
        for cut in 1..frame.len() {
            assert_eq!(scan(&frame[..cut]), ["bad at 0 tail=true"], "cut at {cut}");
        }
        let mut zeros = frame.clone();
        zeros.extend_from_slice(&[0; 100]);
        assert_eq!(scan(&zeros), ["frame 0 1", "bad at 40 tail=true"]);
        zeros.push(1);
        assert_eq!(scan(&zeros), ["frame 0 1", "bad at 40 tail=false"]);
    }
}
