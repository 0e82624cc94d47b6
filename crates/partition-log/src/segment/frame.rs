//! The frame around each stored batch: what recovery checks, whatever bytes the appender
//! encoded (see the module docs of [`segment`](super) for the layout).

use std::io::{self, BufRead, BufReader, Read};

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
    /// frame with data after it. A length that runs past the end of the file is not at the
    /// tail when a whole frame lies behind it (see `Scanner::frames_behind`).
    Bad { reason: String, at_tail: bool },
}

/// How far after a length field that runs past the end of the file a damaged length's
/// frame and the whole frame after it can reach: each is at most [`MAX_FRAME`] after its
/// own length field.
const REACH: u64 = 2 * (4 + MAX_FRAME as u64);

/// The most places behind a damaged length where its frame's checksum may match that are
/// followed up at once. Each is a 32-bit checksum matching by chance, so a torn write has
/// more than one with a negligible probability; more than this many is taken for damage
/// (refused), which bounds the search's time.
const MAX_CANDIDATES: usize = 64;

/// CRC-32C's table for a byte at a time (the reflected Castagnoli polynomial), for the
/// search that needs the checksum at every length (`Scanner::frames_behind`).
const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut r = i as u32;
        let mut bit = 0;
        while bit < 8 {
            r = if r & 1 == 1 {
                (r >> 1) ^ 0x82F6_3B78
            } else {
                r >> 1
            };
            bit += 1;
        }
        table[i] = r;
        i += 1;
    }
    table
};

/// The CRC-32C register (the complement of the checksum: `!0` before any byte) after `byte`.
fn crc_byte(register: u32, byte: u8) -> u32 {
    CRC_TABLE[usize::from((register as u8) ^ byte)] ^ (register >> 8)
}

/// A place behind a damaged length where its frame's checksum matches: the frame ends
/// there if a whole frame follows.
struct Candidate {
    /// Where the whole frame must start, from the byte after the damaged length field.
    at: u64,
    /// That frame's length field and CRC, as far as read.
    head: [u8; 8],
    /// The CRC-32C of that frame's body, as far as read.
    crc: u32,
}

/// What a [`Candidate`] is, as far as read.
enum Found {
    /// Not known yet: the frame after it is not read whole.
    More,
    /// A whole frame follows it: the damaged length's frame ends there.
    Whole,
    /// No whole frame follows it.
    Not,
}

impl Candidate {
    /// Takes the bytes of `chunk`, which starts at `from` (in the same terms as
    /// [`at`](Candidate::at)), of the `rest` bytes there are.
    fn feed(&mut self, from: u64, chunk: &[u8], rest: u64) -> Found {
        let to = from + chunk.len() as u64;
        let head_end = self.at + 8;
        // Positions within both `from..to` and the header: indices into `chunk`, and below
        // 8 from `at`.
        for p in self.at.max(from)..head_end.min(to) {
            self.head[(p - self.at) as usize] = chunk[(p - from) as usize];
        }
        if to < head_end {
            return Found::More;
        }
        let [l0, l1, l2, l3, c0, c1, c2, c3] = self.head;
        let len = u32::from_be_bytes([l0, l1, l2, l3]);
        let end = self.at + 4 + u64::from(len);
        if !(FIXED..=MAX_FRAME).contains(&len) || end > rest {
            return Found::Not;
        }
        let (lo, hi) = (head_end.max(from), end.min(to));
        if lo < hi {
            self.crc =
                crc32c::crc32c_append(self.crc, &chunk[(lo - from) as usize..(hi - from) as usize]);
        }
        if to < end {
            Found::More
        } else if self.crc == u32::from_be_bytes([c0, c1, c2, c3]) {
            Found::Whole
        } else {
            Found::Not
        }
    }
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
    /// After a `Bad`, the scanner is done (it may have read past the frame).
    pub(crate) fn next(&mut self) -> io::Result<Step> {
        let left = self.file_len.saturating_sub(self.pos);
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
            let at_tail = len == 0 && self.rest_is_zero(left - 4)?;
            return Ok(Step::Bad {
                reason: format!("an impossible frame length {len}"),
                at_tail,
            });
        }
        let claimed = u64::from(len) + 4;
        if u64::from(len) > left - 4 {
            // A torn write, unless the length itself is damaged: then the frame's checksum
            // matches at its true length and a whole frame follows it.
            return Ok(match self.frames_behind(left - 4)? {
                Some(found) => Step::Bad {
                    reason: format!(
                        "a damaged length ({claimed} bytes claimed, {left} left): {found}"
                    ),
                    at_tail: false,
                },
                None => Step::Bad {
                    reason: format!(
                        "a frame of {claimed} bytes cut short by the end of the file ({left} bytes left)"
                    ),
                    at_tail: true,
                },
            });
        }
        self.buf.resize(len as usize, 0);
        self.reader.read_exact(&mut self.buf)?;
        match self.check(len) {
            Ok(head) => {
                self.pos += head.len();
                Ok(Step::Frame(head))
            }
            Err(reason) => {
                // At the tail if nothing but zeros follows (a file extended, its last
                // writes torn); damage if anything else does.
                let after = left - claimed;
                let at_tail = self.rest_is_zero(after)?;
                let reason = if at_tail && after > 0 {
                    format!("{reason}, then {after} zero bytes to the end of the file")
                } else {
                    reason
                };
                Ok(Step::Bad { reason, at_tail })
            }
        }
    }

    /// The frame of `len` bytes after its length field in `buf`: its head, or why it is
    /// not a valid frame.
    fn check(&self, len: u32) -> Result<Head, String> {
        let Some((crc, body)) = self.buf.split_first_chunk::<4>() else {
            return Err(format!("a frame of {len} bytes, below its header"));
        };
        let stored = u32::from_be_bytes(*crc);
        let actual = crc32c::crc32c(body);
        if stored != actual {
            return Err(format!(
                "a CRC-32C mismatch (stored {stored:08x}, computed {actual:08x})"
            ));
        }
        // body: version, base offset, count, max timestamp, [last delta, delete horizon],
        // per-record entries, data.
        let Some((&version, rest)) = body.split_first() else {
            return Err(format!("a frame of {len} bytes, below its header"));
        };
        if version != VERSION && version != VERSION_SPARSE {
            return Err(format!("an unknown frame version {version}"));
        }
        let Some((fields, rest)) = rest.split_first_chunk::<20>() else {
            return Err(format!("a frame of {len} bytes, below its header"));
        };
        let [b0, b1, b2, b3, b4, b5, b6, b7, n0, n1, n2, n3, t0, t1, t2, t3, t4, t5, t6, t7] =
            *fields;
        let base_offset = i64::from_be_bytes([b0, b1, b2, b3, b4, b5, b6, b7]);
        let count = u32::from_be_bytes([n0, n1, n2, n3]);
        let max_timestamp = i64::from_be_bytes([t0, t1, t2, t3, t4, t5, t6, t7]);
        let mut head = Head::dense(base_offset, count, max_timestamp, len.saturating_add(4));
        if version == VERSION_SPARSE {
            let Some(delta) = rest.first_chunk::<4>().filter(|_| len >= FIXED_V1) else {
                return Err(format!(
                    "a version 1 frame of {len} bytes, below its header"
                ));
            };
            head.version = VERSION_SPARSE;
            head.last_delta = u32::from_be_bytes(*delta);
        }
        let fits = u64::from(head.len) >= head.data_start();
        if count == 0 || !fits || count - 1 > head.last_delta {
            return Err(format!(
                "a record count {count} that does not fit its {len} bytes"
            ));
        }
        Ok(head)
    }

    /// Whether the next `n` bytes are all zeros (a file extended but not written, as a power
    /// loss can leave it). Reads them a buffer at a time, up to the first byte that is not.
    fn rest_is_zero(&mut self, mut n: u64) -> io::Result<bool> {
        while n > 0 {
            let chunk = self.reader.fill_buf()?;
            if chunk.is_empty() {
                break;
            }
            let take = chunk.len().min(usize::try_from(n).unwrap_or(usize::MAX));
            if chunk[..take].iter().any(|b| *b != 0) {
                return Ok(false);
            }
            self.reader.consume(take);
            n -= take as u64;
        }
        Ok(true)
    }

    /// After a length field that runs past the end of the file: whether the `rest` bytes
    /// after it hold a frame whose checksum matches at some shorter length, followed by a
    /// whole frame; if so, what was found. A write torn by a power cut leaves a prefix of
    /// one frame and nothing after it; a damaged length (a bit flipped in it) leaves the
    /// frame's checksum matching at its true length and the next frame whole, which is
    /// damage before the tail, not a torn tail.
    ///
    /// Both frames are at most [`MAX_FRAME`] long, so only the first [`REACH`] bytes of the
    /// rest are searched, a buffer at a time (memory does not grow with the rest). The
    /// checksum is kept byte by byte over the rest, so the search is linear; each place it
    /// matches is followed up with the frame after it as the bytes come.
    fn frames_behind(&mut self, rest: u64) -> io::Result<Option<String>> {
        // The true frame's length `end` (after its length field) is at least FIXED, at most
        // MAX_FRAME, and leaves room for a whole frame after it.
        let last_end = u64::from(MAX_FRAME).min(rest.saturating_sub(4 + u64::from(FIXED)));
        if last_end < u64::from(FIXED) {
            return Ok(None);
        }
        let mut stored = [0; 4];
        self.reader.read_exact(&mut stored)?;
        // The register's value when the checksum of the bytes so far is the stored one.
        let target = !u32::from_be_bytes(stored);
        let limit = rest.min(REACH);
        let mut register = !0u32;
        let mut pos = 4u64;
        let mut pending: Vec<Candidate> = Vec::new();
        while pos < limit && (pos < last_end || !pending.is_empty()) {
            let chunk = self.reader.fill_buf()?;
            let n = chunk
                .len()
                .min(usize::try_from(limit - pos).unwrap_or(usize::MAX));
            if n == 0 {
                break;
            }
            let chunk = &chunk[..n];
            // The checksum at each length ending in this chunk: a byte at `pos + i`
            // makes the frame `pos + i + 1` long.
            let own = usize::try_from(last_end.saturating_sub(pos)).map_or(n, |m| m.min(n));
            for (end, byte) in (pos + 1..).zip(&chunk[..own]) {
                register = crc_byte(register, *byte);
                if register == target && end >= u64::from(FIXED) {
                    if pending.len() == MAX_CANDIDATES {
                        return Ok(Some(format!(
                            "its checksum matches at more than {MAX_CANDIDATES} lengths"
                        )));
                    }
                    pending.push(Candidate {
                        at: end,
                        head: [0; 8],
                        crc: 0,
                    });
                }
            }
            let mut whole = None;
            pending.retain_mut(|c| match c.feed(pos, chunk, rest) {
                Found::More => true,
                Found::Whole => {
                    whole = whole.or(Some(c.at));
                    false
                }
                Found::Not => false,
            });
            if let Some(end) = whole {
                return Ok(Some(format!(
                    "its checksum matches at {} bytes, and a whole frame follows",
                    end + 4
                )));
            }
            self.reader.consume(n);
            pos += n as u64;
        }
        Ok(None)
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
        // A frame whose length is intact but whose body is not (a torn write of a file
        // extended first, or a flipped bit): a torn tail at the end of the file or with only
        // zeros after it, damage with anything else after it.
        let mut torn = frame.clone();
        torn.extend_from_slice(&frame);
        let last = torn.len() - 1;
        torn[last] ^= 0x01;
        assert_eq!(scan(&torn), ["frame 0 1", "bad at 40 tail=true"]);
        torn.extend_from_slice(&[0; 5000]);
        assert_eq!(scan(&torn), ["frame 0 1", "bad at 40 tail=true"]);
        for at in [80, 81, 2000, torn.len() - 1] {
            let mut then = torn.clone();
            then[at] = 0x80;
            assert_eq!(
                scan(&then),
                ["frame 0 1", "bad at 40 tail=false"],
                "at {at}"
            );
        }
        torn.extend_from_slice(&frame);
        assert_eq!(scan(&torn), ["frame 0 1", "bad at 40 tail=false"]);
    }

    #[test]
    fn the_byte_at_a_time_checksum_is_crc32c() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i * 7919 % 251) as u8).collect();
        for n in [0, 1, 3, 4, 100, 1000] {
            let register = bytes[..n].iter().fold(!0, |r, b| crc_byte(r, *b));
            assert_eq!(!register, crc32c::crc32c(&bytes[..n]), "{n} bytes");
        }
    }

    /// A damaged length is told from a torn write wherever the scanner's reads cut the
    /// bytes behind it: the frame's true end, or the next frame's length field and CRC,
    /// across the boundary of two buffers (the reader's buffer holds 1 MiB).
    #[test]
    fn a_damaged_length_is_found_across_read_buffers() {
        let next = encode(1, &[1], b"next").unwrap();
        for data in (1 << 20) - 49..=(1 << 20) - 33 {
            let first = encode(0, &[1], &vec![3u8; data]).unwrap();
            let mut bytes = first.clone();
            bytes.extend_from_slice(&next);
            // 4 MiB more than the file holds.
            bytes[1] ^= 0x40;
            assert_eq!(scan(&bytes), ["bad at 0 tail=false"], "{data} bytes");
            // The same length before a frame cut short: a torn write, for all it shows.
            let cut = &bytes[..bytes.len() - 1];
            assert_eq!(scan(cut), ["bad at 0 tail=true"], "{data} bytes, cut");
        }
    }

    /// The four bytes that take the CRC-32C register from `register` to `want`.
    fn forge(register: u32, want: u32) -> [u8; 4] {
        let mut index = [0u8; 4];
        let mut w = want;
        for k in (0..4).rev() {
            let i = (0..=255u8)
                .find(|i| CRC_TABLE[usize::from(*i)] >> 24 == w >> 24)
                .unwrap();
            index[k] = i;
            w = (w ^ CRC_TABLE[usize::from(i)]) << 8;
        }
        let mut r = register;
        index.map(|i| {
            let byte = (r as u8) ^ i;
            r = crc_byte(r, byte);
            byte
        })
    }

    #[test]
    fn too_many_places_where_a_damaged_length_may_end_are_refused() {
        // A length past the end of the file, then a checksum that matches at 65 lengths
        // (forged), each followed by what may be a frame of 4096 bytes (none is: their CRCs
        // do not match): refused, not followed up all at once.
        let stored = 0x1234_5678u32;
        let mut bytes = (MAX_FRAME - 1).to_be_bytes().to_vec();
        bytes.extend_from_slice(&stored.to_be_bytes());
        bytes.extend_from_slice(&[9; 21]);
        let mut register = bytes[8..].iter().fold(!0, |r, b| crc_byte(r, *b));
        let mut ends = 0;
        while ends < MAX_CANDIDATES + 1 {
            let forged = forge(register, !stored);
            bytes.extend_from_slice(&forged);
            ends += 1;
            let head = [4096u32.to_be_bytes(), [1, 2, 3, 4]].concat();
            bytes.extend_from_slice(&head);
            register = forged
                .iter()
                .chain(&head)
                .fold(register, |r, b| crc_byte(r, *b));
        }
        bytes.extend_from_slice(&[0; 8000]);
        assert_eq!(scan(&bytes), ["bad at 0 tail=false"]);
        assert!(bad_reason(&bytes).contains("matches at more than 64 lengths"));
        // One fewer, none of them followed by a whole frame: a torn write.
        let fewer = 8 + 21 + 12 * MAX_CANDIDATES;
        let mut bytes = [&bytes[..fewer], &[0; 8000]].concat();
        assert_eq!(scan(&bytes), ["bad at 0 tail=true"]);
        // And a whole frame after one of them: damage.
        bytes.truncate(8 + 21 + 12 * 10 - 8);
        bytes.extend_from_slice(&encode(5, &[1], b"whole").unwrap());
        assert_eq!(scan(&bytes), ["bad at 0 tail=false"]);
        let reason = bad_reason(&bytes);
        assert!(
            reason.contains(&format!("matches at {} bytes", 8 + 21 + 12 * 9 + 4)),
            "{reason}"
        );
    }

    fn bad_reason(bytes: &[u8]) -> String {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        use std::io::Seek;
        f.rewind().unwrap();
        let mut s = Scanner::new(f, bytes.len() as u64);
        loop {
            match s.next().unwrap() {
                Step::Frame(_) => {}
                Step::End => panic!("no damage"),
                Step::Bad { reason, .. } => return reason,
            }
        }
    }
}
