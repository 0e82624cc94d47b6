//! The frame around each stored batch: what recovery checks, whatever bytes the appender
//! encoded (see the module docs of [`segment`](super) for the layout).

use std::io::{self, BufReader, Read};

use coordinator_core::LogError;

/// Bytes of the fixed header of a version 0 frame after the length field: CRC (4), version
/// (1), base offset (8), record count (4), max timestamp (8).
pub(crate) const FIXED: u32 = 25;
/// Bytes before the per-record timestamps of a version 0 frame: the length field and
/// [`FIXED`].
pub(crate) const HEADER: u64 = 4 + FIXED as u64;
/// The fixed header of a version 1 frame after the length field: [`FIXED`]'s fields plus the
/// last offset delta (4) and the delete horizon (8).
pub(crate) const FIXED_V1: u32 = FIXED + 12;
/// Bytes before the per-record entries of a version 1 frame.
pub(crate) const HEADER_V1: u64 = 4 + FIXED_V1 as u64;
/// The frame version appends write: records at consecutive offsets.
pub(crate) const VERSION: u8 = 0;
/// The frame version compaction writes: records at any offsets within the batch's range,
/// and a delete horizon.
pub(crate) const VERSION_SPARSE: u8 = 1;
/// The largest frame accepted: a declared length above it is corruption, not a batch.
pub(crate) const MAX_FRAME: u32 = 1 << 30;

/// One frame's header, as recovery and the index need it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) base_offset: i64,
    pub(crate) max_timestamp: i64,
    /// The whole frame's length, its length field included (at most [`MAX_FRAME`] + 4).
    pub(crate) len: u32,
    /// How many records the frame holds (at least 1).
    pub(crate) count: u32,
    /// The last record's offset minus the base offset: `count - 1` for a version 0 frame.
    pub(crate) last_delta: u32,
    pub(crate) version: u8,
}

impl Head {
    /// The header of an appended (version 0) frame.
    pub(crate) fn dense(base_offset: i64, count: u32, max_timestamp: i64, len: u32) -> Head {
        Head {
            base_offset,
            max_timestamp,
            len,
            count,
            last_delta: count.saturating_sub(1),
            version: VERSION,
        }
    }

    /// The offset of the batch's last record.
    pub(crate) fn last_offset(&self) -> i64 {
        self.base_offset.saturating_add(i64::from(self.last_delta))
    }

    /// Where the per-record entries start, from the frame's start.
    pub(crate) fn index_start(&self) -> u64 {
        if self.version == VERSION {
            HEADER
        } else {
            HEADER_V1
        }
    }

    /// The bytes of the per-record entries.
    pub(crate) fn index_len(&self) -> u64 {
        let each = if self.version == VERSION { 8 } else { 12 };
        each * u64::from(self.count)
    }

    /// Where the appender's bytes start, from the frame's start.
    pub(crate) fn data_start(&self) -> u64 {
        self.index_start() + self.index_len()
    }

    /// The frame's whole length, as a file length.
    pub(crate) fn len(&self) -> u64 {
        u64::from(self.len)
    }

    /// Each record's `(offset, timestamp)`, from the frame's per-record entries (the
    /// [`index_len`](Head::index_len) bytes at [`index_start`](Head::index_start)).
    pub(crate) fn records(&self, index: &[u8]) -> Vec<(i64, i64)> {
        let word = |c: &[u8]| {
            let mut b = [0; 8];
            b.copy_from_slice(c);
            i64::from_be_bytes(b)
        };
        if self.version == VERSION {
            index
                .chunks_exact(8)
                .zip(self.base_offset..)
                .map(|(c, o)| (o, word(c)))
                .collect()
        } else {
            index
                .chunks_exact(12)
                .map(|c| {
                    let delta = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
                    (
                        self.base_offset.saturating_add(i64::from(delta)),
                        word(&c[4..]),
                    )
                })
                .collect()
        }
    }
}

/// The delete horizon of a version 1 frame, from its first [`HEADER_V1`] bytes: `None` if
/// it has none (or for a version 0 frame).
pub(crate) fn delete_horizon(head: &Head, header: &[u8]) -> Option<i64> {
    if head.version != VERSION_SPARSE || header.len() < HEADER_V1 as usize {
        return None;
    }
    let mut b = [0; 8];
    b.copy_from_slice(&header[33..41]);
    Some(i64::from_be_bytes(b)).filter(|h| *h >= 0)
}

/// The frame compaction writes (version 1): a batch whose `records` (each `(offset,
/// timestamp)`, in offset order, within `base_offset..=last_offset`) are what is left of it,
/// with `delete_horizon` (`None`: none yet) around `data`.
pub(crate) fn encode_sparse(
    base_offset: i64,
    last_offset: i64,
    delete_horizon: Option<i64>,
    records: &[(i64, i64)],
    data: &[u8],
) -> Result<Vec<u8>, LogError> {
    let bad = |reason: String| LogError::InvalidArgument {
        what: "compacted batch",
        reason,
    };
    let delta = |offset: i64| {
        u32::try_from(offset - base_offset).map_err(|_| {
            bad(format!(
                "offset {offset} outside a batch based at {base_offset}"
            ))
        })
    };
    let last_delta = delta(last_offset)?;
    if records.is_empty() || records.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err(bad(format!(
            "{} records, not in increasing offset order",
            records.len()
        )));
    }
    let count = u32::try_from(records.len()).map_err(|_| bad("too many records".into()))?;
    let body = u64::from(FIXED_V1) + 12 * u64::from(count) + data.len() as u64;
    let len = u32::try_from(body)
        .ok()
        .filter(|l| *l <= MAX_FRAME)
        .ok_or_else(|| bad(format!("{body} bytes exceed the largest stored batch")))?;
    let max_timestamp = records.iter().map(|r| r.1).max().unwrap_or(-1);
    let mut frame = start(len, VERSION_SPARSE, base_offset, count, max_timestamp);
    frame.extend_from_slice(&last_delta.to_be_bytes());
    frame.extend_from_slice(&delete_horizon.unwrap_or(-1).to_be_bytes());
    for (offset, timestamp) in records {
        let d = delta(*offset)?;
        if d > last_delta {
            return Err(bad(format!(
                "offset {offset} past the batch's last offset {last_offset}"
            )));
        }
        frame.extend_from_slice(&d.to_be_bytes());
        frame.extend_from_slice(&timestamp.to_be_bytes());
    }
    Ok(seal(frame, data))
}

/// A frame's first bytes: its length, room for the CRC, and the fields every version has.
fn start(len: u32, version: u8, base_offset: i64, count: u32, max_timestamp: i64) -> Vec<u8> {
    let mut frame = Vec::with_capacity(4 + len as usize);
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&[0; 4]); // the CRC, set by `seal`
    frame.push(version);
    frame.extend_from_slice(&base_offset.to_be_bytes());
    frame.extend_from_slice(&count.to_be_bytes());
    frame.extend_from_slice(&max_timestamp.to_be_bytes());
    frame
}

/// `frame` with `data` appended and its CRC set.
fn seal(mut frame: Vec<u8>, data: &[u8]) -> Vec<u8> {
    frame.extend_from_slice(data);
    let crc = crc32c::crc32c(&frame[8..]);
    frame[4..8].copy_from_slice(&crc.to_be_bytes());
    frame
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
    let mut frame = start(len, VERSION, base_offset, count, max_timestamp);
    for t in timestamps {
        frame.extend_from_slice(&t.to_be_bytes());
    }
    Ok(seal(frame, data))
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

/// The longest rest of a file searched for whole frames after a length that runs past its
/// end (see `Scanner::whole_frames_in_rest`).
const MAX_TAIL_SCAN: usize = 256 << 20;

/// Whether `bytes` start with a whole frame whose checksum matches.
fn whole_frame_at(bytes: &[u8]) -> bool {
    let Some(len) = bytes
        .get(..4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    else {
        return false;
    };
    if !(FIXED..=MAX_FRAME).contains(&len) {
        return false;
    }
    let Some(frame) = bytes.get(4..4 + len as usize) else {
        return false;
    };
    let stored = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
    crc32c::crc32c(&frame[4..]) == stored
}

/// Reads a segment file frame by frame, checking each CRC.
pub(crate) struct Scanner<R> {
    reader: BufReader<R>,
    file_len: u64,
    pos: u64,
    buf: Vec<u8>,
}

impl<R: Read> Scanner<R> {
    /// Scans the `file_len` bytes `file` reads from its start.
    pub(crate) fn new(file: R, file_len: u64) -> Scanner<R> {
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
            // A torn write, unless the length itself is damaged: then the frame's checksum
            // matches at its true length and a whole frame follows it.
            let hidden = self.whole_frames_in_rest(left - 4)?;
            let reason = if hidden {
                format!(
                    "a damaged length ({} bytes claimed, {left} left) before whole frames",
                    u64::from(len) + 4
                )
            } else {
                format!(
                    "a frame of {} bytes cut short by the end of the file ({left} bytes left)",
                    u64::from(len) + 4
                )
            };
            return Ok(Step::Bad {
                reason,
                at_tail: !hidden,
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
        // body: version, base offset, count, max timestamp, [last delta, delete horizon],
        // per-record entries, data.
        let version = body[0];
        if version != VERSION && version != VERSION_SPARSE {
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
        let mut head = Head::dense(base_offset, count, max_timestamp, len.saturating_add(4));
        if version == VERSION_SPARSE {
            if len < FIXED_V1 {
                return Ok(Step::Bad {
                    reason: format!("a version 1 frame of {len} bytes, below its header"),
                    at_tail,
                });
            }
            head.version = VERSION_SPARSE;
            head.last_delta = u32::from_be_bytes([body[21], body[22], body[23], body[24]]);
        }
        let fits = u64::from(head.len) >= head.data_start();
        if count == 0 || !fits || count - 1 > head.last_delta {
            return Ok(Step::Bad {
                reason: format!("a record count {count} that does not fit its {len} bytes"),
                at_tail,
            });
        }
        self.pos += head.len();
        Ok(Step::Frame(head))
    }

    /// Whether every byte after the length field just read is zero (a file extended but not
    /// written, as a power loss can leave it). Reads the rest of the file.
    /// After a length that runs past the end of the file: whether the `rest` bytes after it
    /// hold a frame whose checksum matches at some shorter length, followed by a whole
    /// frame. A write torn by a power cut leaves a prefix of one frame and nothing after it;
    /// a damaged length (a bit flipped in it) leaves the frame's checksum matching at its
    /// true length and the next frame whole, which is damage before the tail, not a torn
    /// tail. The checksum is computed once over the rest, byte by byte, so the search is
    /// linear; a rest longer than [`MAX_TAIL_SCAN`] is taken as torn (no frame is that
    /// large in practice, and reading it whole would cost as much memory).
    fn whole_frames_in_rest(&mut self, rest: u64) -> io::Result<bool> {
        let Ok(rest) = usize::try_from(rest) else {
            return Ok(false);
        };
        if rest > MAX_TAIL_SCAN {
            return Ok(false);
        }
        let mut bytes = vec![0; rest];
        self.reader.read_exact(&mut bytes)?;
        let Some(stored) = bytes
            .get(..4)
            .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        else {
            return Ok(false);
        };
        let mut crc = 0;
        for end in 4..rest {
            crc = crc32c::crc32c_append(crc, &bytes[end..=end]);
            // The frame would be `end + 1` bytes after its length field.
            let len = end + 1;
            if len >= FIXED as usize && crc == stored && whole_frame_at(&bytes[len..]) {
                return Ok(true);
            }
        }
        Ok(false)
    }

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
                Step::Frame(h) if h.version == VERSION_SPARSE => out.push(format!(
                    "frame {} {} last {}",
                    h.base_offset,
                    h.count,
                    h.last_offset()
                )),
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
        let head = Head::dense(7, 3, 30, one.len() as u32);
        assert_eq!(
            head.records(&one[HEADER as usize..HEADER as usize + 24]),
            [(7, 10), (8, 30), (9, 20)]
        );
        // A flipped bit anywhere in the first frame is caught, and not taken for a torn tail
        // (the second frame follows it), a flip in the length field that makes the frame
        // reach past the end of the file included.
        for i in 0..one.len() {
            let mut bad = both.clone();
            bad[i] ^= 0x01;
            assert_eq!(scan(&bad), ["bad at 0 tail=false"], "flip at {i}");
        }
        for bit in 0..8 {
            let mut bad = both.clone();
            bad[2] ^= 1 << bit;
            assert_eq!(scan(&bad), ["bad at 0 tail=false"], "length bit {bit}");
        }
        // The second frame cut short at any byte is a torn tail.
        for cut in one.len() + 1..both.len() {
            let got = scan(&both[..cut]);
            assert_eq!(
                got,
                [
                    "frame 7 3".to_string(),
                    format!("bad at {} tail=true", one.len())
                ],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn sparse_frames_round_trip_with_their_offsets_and_horizon() {
        let sparse = encode_sparse(20, 29, Some(500), &[(21, 5), (27, 9)], b"kept").unwrap();
        let dense = encode(30, &[1], b"next").unwrap();
        let mut both = sparse.clone();
        both.extend_from_slice(&dense);
        assert_eq!(scan(&both), ["frame 20 2 last 29", "frame 30 1"]);
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&sparse).unwrap();
        use std::io::Seek;
        f.rewind().unwrap();
        let Step::Frame(head) = Scanner::new(f, sparse.len() as u64).next().unwrap() else {
            panic!("not a frame");
        };
        let index = &sparse[head.index_start() as usize..head.data_start() as usize];
        assert_eq!(head.records(index), [(21, 5), (27, 9)]);
        assert_eq!(head.max_timestamp, 9);
        assert_eq!(delete_horizon(&head, &sparse), Some(500));
        assert_eq!(&sparse[head.data_start() as usize..], b"kept");
        let none = encode_sparse(20, 29, None, &[(21, 5)], b"").unwrap();
        let Step::Frame(h) = ({
            let mut f = tempfile::tempfile().unwrap();
            f.write_all(&none).unwrap();
            f.rewind().unwrap();
            Scanner::new(f, none.len() as u64).next().unwrap()
        }) else {
            panic!("not a frame");
        };
        assert_eq!(delete_horizon(&h, &none), None);
        // Every flip is caught, as for the appended frames.
        for i in 0..sparse.len() {
            let mut bad = both.clone();
            bad[i] ^= 0x01;
            let got = scan(&bad);
            assert!(
                got.last().unwrap().starts_with("bad at 0"),
                "flip at {i}: {got:?}"
            );
        }
        // Records out of order or outside the batch are refused at writing.
        assert!(encode_sparse(20, 29, None, &[(27, 1), (21, 1)], b"").is_err());
        assert!(encode_sparse(20, 29, None, &[(30, 1)], b"").is_err());
        assert!(encode_sparse(20, 29, None, &[], b"").is_err());
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
