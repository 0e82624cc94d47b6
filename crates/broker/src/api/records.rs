//! Kafka's v2 record batches: checking what producers send, stamping the base offset, and
//! encoding batches that were appended without wire bytes.
//!
//! Layout of a batch header (big-endian): base offset i64 @0, batch length i32 @8 (bytes
//! after this field), partition leader epoch i32 @12, magic i8 @16, CRC-32C u32 @17 (of
//! bytes 21..end), attributes i16 @21, last offset delta i32 @23, base timestamp i64 @27,
//! max timestamp i64 @35, producer id i64 @43, producer epoch i16 @51, base sequence i32
//! @53, record count i32 @57, records @61.

use std::sync::Arc;

use super::inflate::{inflate, TOO_LARGE};
use crate::producers::BatchHeader;
use bytes::{Bytes, BytesMut};
use coordinator_core::Record;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
};

/// The bytes of a v2 batch header, up to the first record.
pub(crate) const HEADER_LEN: usize = 61;
/// The smallest legal batch length field: the header after the length field.
const MIN_BATCH_LENGTH: usize = HEADER_LEN - 12;
/// The most records one batch may announce. Far above what producers send (they cap a
/// batch by bytes, 16 KiB to 1 MiB by default); it bounds what a hostile count can make the
/// decoder allocate up front.
pub(crate) const MAX_RECORDS_PER_BATCH: i32 = 1 << 20;

/// How many decompressed bytes one Produce request may still inflate to, and the most one
/// batch may.
#[derive(Debug, Clone, Copy)]
pub(super) struct Inflation {
    /// The most one batch's records may decompress to.
    pub(super) per_batch: usize,
    /// What is left of the request's budget.
    pub(super) left: usize,
}

/// Why a partition's record set was refused.
#[derive(Debug)]
pub(super) enum Refused {
    /// Not a valid set of v2 batches (CORRUPT_MESSAGE).
    Corrupt(String),
    /// A batch, or the request, decompresses to more than its bound (MESSAGE_TOO_LARGE).
    TooLarge(String),
}

impl From<String> for Refused {
    fn from(reason: String) -> Self {
        Refused::Corrupt(reason)
    }
}

/// One producer batch that passed the checks: its bytes, its header's producer fields, and
/// its records' timestamps (what the log keeps of its records besides the bytes: fetches
/// serve the bytes, so the keys and values are not copied out of them).
#[derive(Debug)]
pub(super) struct CheckedBatch {
    pub(super) bytes: Bytes,
    pub(super) header: BatchHeader,
    pub(super) timestamps: Vec<i64>,
    /// Whether a record of the batch has no key (refused on a compacted topic).
    pub(super) keyless: bool,
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Splits a Produce partition's `records` into batches and checks each one: magic 2, a
/// consistent length, record count and offset delta, a matching CRC, records that decode
/// (decompressing gzip, snappy, lz4 and zstd), no control batch (clients may not write
/// them, as in Kafka's `LogValidator`), and for a batch with a producer id a non-negative
/// epoch and base sequence; a transactional batch must have a producer id. All or nothing:
/// the first bad batch fails the whole set. The producer checks (epochs, sequences) are
/// [`crate::producers`]'.
/// Decompression reads through `inflation`'s bounds and stops at them: each batch's records
/// inflate to at most `per_batch` bytes, and all of a request's to at most its budget.
pub(super) fn check_batches(
    raw: &Bytes,
    inflation: &mut Inflation,
) -> Result<Vec<CheckedBatch>, Refused> {
    if raw.is_empty() {
        return Err(Refused::Corrupt(
            "the partition's record set is empty".into(),
        ));
    }
    let mut batches = Vec::new();
    let mut pos = 0usize;
    while pos < raw.len() {
        let rest = &raw[pos..];
        if rest.len() < HEADER_LEN {
            return Err(Refused::Corrupt(format!(
                "a truncated batch header at byte {pos}"
            )));
        }
        let length = usize::try_from(i32_at(rest, 8))
            .ok()
            .filter(|&n| n >= MIN_BATCH_LENGTH && n <= rest.len() - 12)
            .ok_or_else(|| {
                format!(
                    "a batch length of {} at byte {pos} does not fit",
                    i32_at(rest, 8)
                )
            })?;
        let magic = rest[16] as i8;
        if magic != 2 {
            return Err(Refused::Corrupt(format!(
                "magic {magic} at byte {pos}: only v2 record batches are supported"
            )));
        }
        let header = BatchHeader::parse(rest)
            .ok_or_else(|| format!("a truncated batch header at byte {pos}"))?;
        check_producer_fields(&header, pos)?;
        let count = i32_at(rest, 57);
        let last_delta = i32_at(rest, 23);
        if !(1..=MAX_RECORDS_PER_BATCH).contains(&count) || last_delta != count - 1 {
            return Err(Refused::Corrupt(format!(
                "a batch at byte {pos} announces {count} records and last offset delta {last_delta}"
            )));
        }
        let bytes = raw.slice(pos..pos + 12 + length);
        let limit = inflation.per_batch.min(inflation.left);
        let inflated = std::cell::Cell::new(0usize);
        let set = RecordBatchDecoder::decode_with_custom_compression(
            &mut bytes.clone(),
            Some(|buf: &mut Bytes, compression: Compression| {
                let out = inflate(buf, compression, limit)?;
                if compression != Compression::None {
                    inflated.set(out.len());
                }
                Ok(out)
            }),
        )
        .map_err(|e| {
            let e = format!("{e:#}");
            if e.contains(TOO_LARGE) {
                Refused::TooLarge(format!(
                    "a batch at byte {pos} decompresses to more than {limit} bytes (the \
                     per-batch bound is {}, {} left of the request's)",
                    inflation.per_batch, inflation.left
                ))
            } else {
                Refused::Corrupt(format!("a batch at byte {pos} does not decode: {e}"))
            }
        })?;
        inflation.left = inflation.left.saturating_sub(inflated.get());
        if set.records.len() != count as usize {
            return Err(Refused::Corrupt(format!(
                "a batch at byte {pos} announces {count} records and holds {}",
                set.records.len()
            )));
        }
        let timestamps = set.records.iter().map(|r| r.timestamp).collect();
        let keyless = set.records.iter().any(|r| r.key.is_none());
        batches.push(CheckedBatch {
            bytes,
            header,
            timestamps,
            keyless,
        });
        pos += 12 + length;
    }
    Ok(batches)
}

/// The producer fields a client may send: no control batch; with a producer id, an epoch
/// and a base sequence that are not negative; a transactional batch only with a producer id.
fn check_producer_fields(header: &BatchHeader, pos: usize) -> Result<(), Refused> {
    if header.control {
        return Err(Refused::Corrupt(format!(
            "a control batch at byte {pos}: clients may not write control records"
        )));
    }
    if header.has_producer_id() {
        if header.producer_epoch < 0 || header.base_sequence < 0 {
            return Err(Refused::Corrupt(format!(
                "a batch at byte {pos} of producer {} has epoch {} and base sequence {}: \
                 neither may be negative",
                header.producer_id, header.producer_epoch, header.base_sequence
            )));
        }
    } else if header.transactional {
        return Err(Refused::Corrupt(format!(
            "a transactional batch at byte {pos} has no producer id"
        )));
    }
    Ok(())
}

/// Whether any batch of a partition's record set is transactional (Kafka's
/// `RequestUtils.hasTransactionalRecords`). Reads headers only and stops at the first one
/// that does not fit; [`check_batches`] judges the rest.
pub(super) fn has_transactional(raw: &[u8]) -> bool {
    let mut pos = 0usize;
    while let Some(header) = raw.get(pos..).and_then(BatchHeader::parse) {
        if header.transactional {
            return true;
        }
        let Ok(length) = usize::try_from(i32_at(&raw[pos..], 8)) else {
            return false;
        };
        pos = pos.saturating_add(12).saturating_add(length);
    }
    false
}

/// The stored form of a checked batch: its bytes with the base offset set. The CRC covers
/// bytes 21 onwards, so it stays valid.
///
/// One copy, straight into the stored allocation: the batch is copied into its `Arc` and
/// stamped there (the `Arc` is not shared yet); going through a `Vec` first copied every
/// produced byte twice. The broker's CPU for a produce did not measurably change with it
/// (BENCHMARKS.md, 2026-12-07): what a profile charges to this function is mostly the page
/// faults of the fresh memory the log keeps.
pub(super) fn stamp_base_offset(batch: &Bytes, base_offset: i64) -> Arc<[u8]> {
    let mut stored: Arc<[u8]> = Arc::from(&batch[..]);
    if let Some(field) = Arc::get_mut(&mut stored).and_then(|b| b.get_mut(..8)) {
        field.copy_from_slice(&base_offset.to_be_bytes());
    }
    stored
}

/// Encodes records appended without wire bytes as one uncompressed v2 batch.
pub(super) fn encode_records(records: &[Record]) -> Result<Bytes, String> {
    encode(records, Compression::None)
}

/// Encodes `records` as one v2 batch compressed with `compression`.
fn encode(records: &[Record], compression: Compression) -> Result<Bytes, String> {
    let first = records.first().map_or(0, |r| r.offset);
    let wire: Vec<kafka_protocol::records::Record> = records
        .iter()
        .map(|r| kafka_protocol::records::Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            timestamp_type: TimestampType::Creation,
            offset: r.offset,
            // The encoder starts a new batch whenever offset - sequence changes; keeping it
            // constant keeps the records in one batch.
            sequence: i32::try_from(r.offset - first).unwrap_or(i32::MAX),
            timestamp: r.timestamp,
            key: r.key.as_ref().map(|k| Bytes::copy_from_slice(k)),
            value: Some(Bytes::copy_from_slice(&r.value)),
            headers: r
                .headers
                .iter()
                .map(|h| {
                    (
                        StrBytes::from_string(h.key.to_string()),
                        Some(Bytes::copy_from_slice(&h.value)),
                    )
                })
                .collect::<IndexMap<_, _>>(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        wire.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .map_err(|e| format!("cannot encode records: {e:#}"))?;
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordinator_core::Header;

    fn record(offset: i64, value: &str) -> Record {
        Record {
            topic: "t".into(),
            partition: 0,
            offset,
            key: Some(Arc::from(&b"k"[..])),
            value: Arc::from(value.as_bytes()),
            timestamp: 1000 + offset,
            headers: vec![Header::new("h", &b"v"[..])],
        }
    }

    #[test]
    fn encoded_records_check_and_decode_back() {
        let bytes = encode_records(&[record(5, "a"), record(6, "b")]).unwrap();
        let batches = check_batches(&bytes, &mut unbounded()).unwrap();
        assert_eq!(batches.len(), 1, "one batch");
        assert_eq!(batches[0].timestamps, [1005, 1006], "each record's");
        assert_eq!(batches[0].bytes, bytes, "the batch's bytes, whole");
        let stamped = stamp_base_offset(&batches[0].bytes, 42);
        let set = RecordBatchDecoder::decode(&mut Bytes::from(stamped.to_vec())).unwrap();
        assert_eq!(set.records[0].offset, 42, "CRC still valid, offsets moved");
    }

    #[test]
    fn bad_batches_are_refused_with_a_reason() {
        let good = encode_records(&[record(0, "a")]).unwrap().to_vec();
        let mut cases: Vec<(Vec<u8>, &str)> = Vec::new();
        cases.push((Vec::new(), "empty"));
        cases.push((good[..40].to_vec(), "truncated"));
        let mut long = good.clone();
        long[8..12].copy_from_slice(&1_000_000i32.to_be_bytes());
        cases.push((long, "does not fit"));
        let mut magic = good.clone();
        magic[16] = 1;
        cases.push((magic, "magic 1"));
        let mut crc = good.clone();
        let last = crc.len() - 1;
        crc[last] ^= 0xff;
        cases.push((crc, "does not decode"));
        let mut count = good.clone();
        count[57..61].copy_from_slice(&(-1i32).to_be_bytes());
        cases.push((count, "announces -1 records"));
        let mut txn = good.clone();
        txn[22] |= 0x10;
        cases.push((txn, "has no producer id"));
        let mut control = good.clone();
        control[22] |= 0x20;
        cases.push((control, "control records"));
        let mut no_sequence = good.clone();
        no_sequence[43..51].copy_from_slice(&5i64.to_be_bytes());
        no_sequence[51..53].copy_from_slice(&0i16.to_be_bytes());
        no_sequence[53..57].copy_from_slice(&(-1i32).to_be_bytes());
        cases.push((no_sequence, "neither may be negative"));
        let mut trailing = good.clone();
        trailing.extend_from_slice(&[0; 10]);
        cases.push((trailing, "truncated"));
        for (bytes, expect) in cases {
            match check_batches(&Bytes::from(bytes), &mut unbounded()).unwrap_err() {
                Refused::Corrupt(err) => assert!(err.contains(expect), "{expect}: {err}"),
                other => panic!("{expect}: {other:?}"),
            }
        }
    }

    #[test]
    fn transactional_batches_are_found_by_their_headers_alone() {
        let plain = encode_records(&[record(0, "a")]).unwrap().to_vec();
        let mut txn = plain.clone();
        txn[22] |= 0x10;
        assert!(!has_transactional(&plain));
        assert!(has_transactional(&txn));
        let mut second = plain.clone();
        second.extend_from_slice(&txn);
        assert!(has_transactional(&second), "the second batch counts");
        assert!(!has_transactional(&txn[..30]), "a cut header is not read");
        let mut bad_length = plain.clone();
        bad_length[8..12].copy_from_slice(&(-7i32).to_be_bytes());
        bad_length.extend_from_slice(&txn);
        assert!(
            !has_transactional(&bad_length),
            "reading stops at a bad length"
        );
    }

    fn unbounded() -> Inflation {
        Inflation {
            per_batch: usize::MAX,
            left: usize::MAX,
        }
    }

    /// One batch of one record of `n` zero bytes, compressed with `compression`.
    fn zeros_batch(n: usize, compression: Compression) -> Bytes {
        let mut r = record(0, "");
        r.value = Arc::from(vec![0u8; n]);
        encode(&[r], compression).unwrap()
    }

    /// A compressed batch that inflates past the per-batch bound, or past what is left of
    /// the request's, is refused as too large; one within both passes and uses the budget.
    #[test]
    fn decompression_stops_at_the_batch_and_request_bounds() {
        const MIB: usize = 1024 * 1024;
        for compression in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let bomb = zeros_batch(20 * MIB, compression);
            assert!(bomb.len() < MIB, "{compression:?}: a bomb is small");
            let mut inflation = Inflation {
                per_batch: 16 * MIB,
                left: 64 * MIB,
            };
            assert!(
                matches!(
                    check_batches(&bomb, &mut inflation),
                    Err(Refused::TooLarge(_))
                ),
                "{compression:?}"
            );
            let fits = zeros_batch(10 * MIB, compression);
            let mut inflation = Inflation {
                per_batch: 16 * MIB,
                left: 16 * MIB,
            };
            assert_eq!(check_batches(&fits, &mut inflation).unwrap().len(), 1);
            assert!(
                inflation.left < 6 * MIB + 1024,
                "{compression:?}: the budget is used"
            );
            assert!(
                matches!(
                    check_batches(&fits, &mut inflation),
                    Err(Refused::TooLarge(_))
                ),
                "{compression:?}: the request's budget is spent"
            );
        }
    }
}
