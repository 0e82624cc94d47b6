//! A stored v2 record batch read record by record as the bytes it holds, and rewritten
//! without some of its records: what the log cleaner ([`crate::cleaner`]) reads and writes.
//!
//! Each kept record is copied as stored, byte for byte (its length, attributes, timestamp
//! and offset deltas, key, value and every header, repeated keys included), and the batch
//! header keeps the original's base offset, last offset delta, base timestamp, attributes
//! (compression, timestamp type, transactional and control flags), partition leader epoch,
//! producer id, epoch and base sequence. Only the length, the CRC, the record count and,
//! for `CreateTime`, the max timestamp change; a compressed batch is recompressed with its
//! codec. As the records' offset and timestamp deltas are relative to the unchanged base
//! offset and base timestamp, no record's offset or timestamp changes.
//!
//! Kafka's `MemoryRecords.buildRetainedRecordsInto` keeps the original base offset, base
//! sequence, producer id and epoch too and overrides the last offset with the original's
//! (for the producer's last sequence), but re-appends each kept record through
//! `MemoryRecordsBuilder`: its base timestamp becomes the first kept record's timestamp
//! (or the delete horizon, which Kafka writes into the batch and this broker's logs keep
//! beside it), the timestamp deltas are re-encoded from there and each record's attributes
//! byte is written as 0. A consumer reads the same offsets, timestamps, keys, values and
//! headers from either.
//!
//! Everything is bounded: the batch must be one whole v2 batch with a valid CRC-32C, a
//! compressed one decompresses to at most the broker's `max_decompressed_batch_bytes` (the
//! bound a Produce applies) and each length is checked against the bytes left before it is
//! used; anything else is an error (the cleaner then keeps the batch as it is), never a
//! panic.

use std::ops::Range;

use bytes::{Bytes, BytesMut};
use kafka_protocol::compression::{Compressor, Gzip, Lz4, Snappy, Zstd};
use kafka_protocol::records::Compression;

use crate::api::inflate::inflate;
use crate::api::records::{HEADER_LEN, MAX_RECORDS_PER_BATCH};

/// Where the CRC-32C's coverage starts (the attributes).
const CRC_FROM: usize = 21;
const COMPRESSION_MASK: i16 = 0x07;
const LOG_APPEND_TIME: i16 = 0x08;

/// One record of a stored batch, located in [`StoredBatch::records_section`].
#[derive(Debug, Clone)]
pub(crate) struct StoredRecord {
    /// Its offset: the batch's base offset plus its offset delta.
    pub(crate) offset: i64,
    /// Its timestamp as a consumer reads it (the batch's max timestamp for `LogAppendTime`).
    pub(crate) timestamp: i64,
    /// Its key's bytes, if it has one.
    pub(crate) key: Option<Range<usize>>,
    /// Whether its value is null.
    pub(crate) tombstone: bool,
    /// The whole record, its length varint included.
    pub(crate) bytes: Range<usize>,
}

/// A stored v2 batch, its records located but not copied.
#[derive(Debug)]
pub(crate) struct StoredBatch<'a> {
    encoded: &'a [u8],
    compression: Compression,
    /// The records, decompressed if the batch is compressed.
    section: Section<'a>,
    records: Vec<StoredRecord>,
}

#[derive(Debug)]
enum Section<'a> {
    Stored(&'a [u8]),
    Inflated(Bytes),
}

/// A batch rewritten without some of its records.
#[derive(Debug)]
pub(crate) struct Rewritten {
    /// The new batch's bytes.
    pub(crate) encoded: Vec<u8>,
    /// Its base offset: the original's.
    pub(crate) base_offset: i64,
    /// Its last offset: the original's.
    pub(crate) last_offset: i64,
}

fn array<const N: usize>(b: &[u8], at: usize) -> Result<[u8; N], String> {
    b.get(at..at.saturating_add(N))
        .and_then(|s| <[u8; N]>::try_from(s).ok())
        .ok_or_else(|| format!("a truncated field at byte {at}"))
}

fn i16_at(b: &[u8], at: usize) -> Result<i16, String> {
    array(b, at).map(i16::from_be_bytes)
}

fn i32_at(b: &[u8], at: usize) -> Result<i32, String> {
    array(b, at).map(i32::from_be_bytes)
}

fn i64_at(b: &[u8], at: usize) -> Result<i64, String> {
    array(b, at).map(i64::from_be_bytes)
}

/// A reader of one record's fields, within its body.
struct Cursor<'b> {
    buf: &'b [u8],
    pos: usize,
    end: usize,
}

impl Cursor<'_> {
    /// A zigzag varint of at most `max_bytes` bytes (5 for Kafka's varint, 10 for its
    /// varlong), as an i64.
    fn varint(&mut self, max_bytes: usize) -> Result<i64, String> {
        let mut raw: u64 = 0;
        for i in 0..max_bytes {
            if self.pos >= self.end {
                return Err(format!("a truncated varint at byte {}", self.pos));
            }
            let b = *self
                .buf
                .get(self.pos)
                .ok_or_else(|| format!("a truncated varint at byte {}", self.pos))?;
            self.pos += 1;
            raw |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                if max_bytes == 5 && raw > u64::from(u32::MAX) {
                    return Err(format!("a varint out of range at byte {}", self.pos));
                }
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err(format!("a varint longer than {max_bytes} bytes"))
    }

    fn int(&mut self) -> Result<i32, String> {
        let v = self.varint(5)?;
        i32::try_from(v).map_err(|_| format!("a varint out of range at byte {}", self.pos))
    }

    fn long(&mut self) -> Result<i64, String> {
        self.varint(10)
    }

    /// `len` bytes from here, as a range of the buffer.
    fn take(&mut self, len: usize) -> Result<Range<usize>, String> {
        if len > self.end - self.pos {
            return Err(format!(
                "{len} bytes announced at byte {} with {} left",
                self.pos,
                self.end - self.pos
            ));
        }
        let range = self.pos..self.pos + len;
        self.pos += len;
        Ok(range)
    }

    /// A length-prefixed field that may be null (length -1).
    fn nullable(&mut self) -> Result<Option<Range<usize>>, String> {
        match self.int()? {
            -1 => Ok(None),
            n => {
                let len = usize::try_from(n).map_err(|_| format!("a length of {n}"))?;
                self.take(len).map(Some)
            }
        }
    }
}

impl<'a> StoredBatch<'a> {
    /// Reads the batch stored as `encoded`: one whole v2 batch whose CRC-32C holds, whose
    /// records (decompressed to at most `max_decompressed` bytes) are `count` (at most
    /// [`MAX_RECORDS_PER_BATCH`], as a Produce allows) well-formed records of increasing
    /// offsets within the batch, and nothing after them.
    pub(crate) fn read(encoded: &'a [u8], max_decompressed: usize) -> Result<Self, String> {
        if encoded.len() < HEADER_LEN {
            return Err(format!("{} bytes: a truncated batch header", encoded.len()));
        }
        let length = i32_at(encoded, 8)?;
        if usize::try_from(length).ok() != Some(encoded.len() - 12) {
            return Err(format!(
                "a batch length of {length} in {} bytes",
                encoded.len()
            ));
        }
        let magic = *encoded.get(16).ok_or("no magic")?;
        if magic != 2 {
            return Err(format!("magic {magic}: only v2 batches are read"));
        }
        let crc = u32::from_be_bytes(array(encoded, 17)?);
        let actual = crc32c::crc32c(encoded.get(CRC_FROM..).unwrap_or_default());
        if crc != actual {
            return Err(format!(
                "a CRC of {crc:#010x}, the bytes' is {actual:#010x}"
            ));
        }
        let attributes = i16_at(encoded, 21)?;
        let compression = match attributes & COMPRESSION_MASK {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            n => return Err(format!("an unknown compression codec {n}")),
        };
        let base_offset = i64_at(encoded, 0)?;
        let last_delta = i32_at(encoded, 23)?;
        if last_delta < 0 {
            return Err(format!("a last offset delta of {last_delta}"));
        }
        base_offset
            .checked_add(i64::from(last_delta))
            .ok_or("the last offset overflows")?;
        let base_timestamp = i64_at(encoded, 27)?;
        let max_timestamp = i64_at(encoded, 35)?;
        let count = i32_at(encoded, 57)?;
        if !(0..=MAX_RECORDS_PER_BATCH).contains(&count) {
            return Err(format!("a record count of {count}"));
        }
        let stored = encoded.get(HEADER_LEN..).unwrap_or_default();
        let section = match compression {
            Compression::None => Section::Stored(stored),
            codec => Section::Inflated(
                inflate(&mut Bytes::copy_from_slice(stored), codec, max_decompressed)
                    .map_err(|e| format!("the records do not decompress: {e:#}"))?,
            ),
        };
        let buf: &[u8] = match &section {
            Section::Stored(b) => b,
            Section::Inflated(b) => b,
        };
        let log_append_time = attributes & LOG_APPEND_TIME != 0;
        let mut records = Vec::new();
        let mut pos = 0usize;
        let mut previous_delta: Option<i32> = None;
        for _ in 0..count {
            let start = pos;
            let mut c = Cursor {
                buf,
                pos,
                end: buf.len(),
            };
            let body_len = c.int()?;
            let body = usize::try_from(body_len)
                .map_err(|_| format!("a record length of {body_len} at byte {start}"))?;
            let body = c.take(body)?;
            let mut r = Cursor {
                buf,
                pos: body.start,
                end: body.end,
            };
            r.take(1)?; // attributes
            let timestamp_delta = r.long()?;
            let offset_delta = r.int()?;
            if !(0..=last_delta).contains(&offset_delta)
                || previous_delta.is_some_and(|p| offset_delta <= p)
            {
                return Err(format!(
                    "a record at offset delta {offset_delta} (the last is {last_delta}, the \
                     previous {previous_delta:?})"
                ));
            }
            previous_delta = Some(offset_delta);
            let key = r.nullable()?;
            let tombstone = r.nullable()?.is_none();
            let headers = r.int()?;
            if headers < 0 {
                return Err(format!("a header count of {headers}"));
            }
            for _ in 0..headers {
                let key_len = r.int()?;
                let key_len = usize::try_from(key_len)
                    .map_err(|_| format!("a header key length of {key_len}"))?;
                r.take(key_len)?;
                r.nullable()?;
            }
            if r.pos != body.end {
                return Err(format!(
                    "a record of {body_len} bytes at byte {start} holds {} more",
                    body.end - r.pos
                ));
            }
            let timestamp = if log_append_time {
                max_timestamp
            } else {
                base_timestamp
                    .checked_add(timestamp_delta)
                    .ok_or("a record's timestamp overflows")?
            };
            records.push(StoredRecord {
                offset: base_offset + i64::from(offset_delta),
                timestamp,
                key,
                tombstone,
                bytes: start..body.end,
            });
            pos = body.end;
        }
        if pos != buf.len() {
            return Err(format!(
                "{} bytes after the batch's {count} records",
                buf.len() - pos
            ));
        }
        Ok(StoredBatch {
            encoded,
            compression,
            section,
            records,
        })
    }

    /// The records, in offset order.
    pub(crate) fn records(&self) -> &[StoredRecord] {
        &self.records
    }

    /// The records as stored, decompressed.
    pub(crate) fn records_section(&self) -> &[u8] {
        match &self.section {
            Section::Stored(b) => b,
            Section::Inflated(b) => b,
        }
    }

    /// The key of `record`, if it has one.
    pub(crate) fn key(&self, record: &StoredRecord) -> Option<&[u8]> {
        record
            .key
            .as_ref()
            .and_then(|k| self.records_section().get(k.clone()))
    }

    /// The batch with only the records at the offsets `keep` accepts, each as stored (see
    /// the module's docs). An error if none is kept.
    pub(crate) fn retain(&self, keep: &dyn Fn(i64) -> bool) -> Result<Rewritten, String> {
        let kept: Vec<&StoredRecord> = self.records.iter().filter(|r| keep(r.offset)).collect();
        if kept.is_empty() {
            return Err("no record kept".into());
        }
        let section = self.records_section();
        let write = |out: &mut BytesMut| -> anyhow::Result<()> {
            for r in &kept {
                let bytes = section
                    .get(r.bytes.clone())
                    .ok_or_else(|| anyhow::anyhow!("a record outside the batch"))?;
                out.extend_from_slice(bytes);
            }
            Ok(())
        };
        let header = self
            .encoded
            .get(..HEADER_LEN)
            .ok_or("a truncated batch header")?;
        let mut out = Vec::with_capacity(self.encoded.len());
        out.extend_from_slice(header);
        let compressed = match self.compression {
            Compression::None => kept.iter().try_for_each(|r| {
                let bytes = section
                    .get(r.bytes.clone())
                    .ok_or_else(|| anyhow::anyhow!("a record outside the batch"))?;
                out.extend_from_slice(bytes);
                Ok(())
            }),
            Compression::Gzip => Gzip::compress(&mut out, write),
            Compression::Snappy => Snappy::compress(&mut out, write),
            Compression::Lz4 => Lz4::compress(&mut out, write),
            Compression::Zstd => Zstd::compress(&mut out, write),
        };
        compressed.map_err(|e| format!("cannot write the records: {e:#}"))?;
        let length =
            i32::try_from(out.len() - 12).map_err(|_| format!("a batch of {} bytes", out.len()))?;
        let count = i32::try_from(kept.len()).map_err(|_| "too many records".to_string())?;
        let attributes = i16_at(header, 21)?;
        let max_timestamp = if attributes & LOG_APPEND_TIME != 0 {
            i64_at(header, 35)?
        } else {
            kept.iter().map(|r| r.timestamp).max().unwrap_or(-1)
        };
        let base_offset = i64_at(header, 0)?;
        let last_offset = base_offset
            .checked_add(i64::from(i32_at(header, 23)?))
            .ok_or("the last offset overflows")?;
        put(&mut out, 8, &length.to_be_bytes())?;
        put(&mut out, 35, &max_timestamp.to_be_bytes())?;
        put(&mut out, 57, &count.to_be_bytes())?;
        let crc = crc32c::crc32c(out.get(CRC_FROM..).unwrap_or_default());
        put(&mut out, 17, &crc.to_be_bytes())?;
        Ok(Rewritten {
            encoded: out,
            base_offset,
            last_offset,
        })
    }
}

fn put(out: &mut [u8], at: usize, value: &[u8]) -> Result<(), String> {
    out.get_mut(at..at.saturating_add(value.len()))
        .ok_or_else(|| format!("no field at byte {at}"))?
        .copy_from_slice(value);
    Ok(())
}
