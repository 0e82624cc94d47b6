#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! [`KafkaBatches`], the cleaner's reading and rewriting of Kafka's v2 batches, against
//! Kafka 4's rewrite of a batch that loses records (`MemoryRecords.filterTo` and
//! `buildRetainedRecordsInto`, `clients/src/main/java/org/apache/kafka/common/record/`).
//! The batches are built by hand: kafka-protocol's encoder cannot write a record with two
//! headers of one key. What a consumer reads back is read with kafka-protocol's decoder.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use coordinator_core::TopicPartition;
use kafka_protocol::compression::{Compressor, Gzip, Lz4, Snappy, Zstd};
use kafka_protocol::records::{Compression, RecordBatchDecoder, TimestampType};
use partition_log::compaction::{CompactionPolicy, RecordFormat};
use partition_log::MemoryLog;

use super::KafkaBatches;
use crate::producers::BatchHeader;
use crate::stored_batch::StoredBatch;

/// The broker's default `max_decompressed_batch_bytes`.
const LIMIT: usize = 16 << 20;

fn batches() -> KafkaBatches {
    KafkaBatches::new(LIMIT)
}

fn varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let b = (z & 0x7f) as u8;
        z >>= 7;
        if z == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => varint(out, -1),
        Some(b) => {
            varint(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

/// One record at `delta` from the batch's base (offset and timestamp).
fn record(delta: i64, key: &[u8], value: &[u8], headers: &[(&str, &str)]) -> Vec<u8> {
    let mut body = vec![0u8]; // attributes
    varint(&mut body, delta); // timestamp delta
    varint(&mut body, delta); // offset delta
    bytes(&mut body, Some(key));
    bytes(&mut body, Some(value));
    varint(&mut body, headers.len() as i64);
    for (k, v) in headers {
        bytes(&mut body, Some(k.as_bytes()));
        bytes(&mut body, Some(v.as_bytes()));
    }
    let mut out = Vec::new();
    varint(&mut out, body.len() as i64);
    out.extend(body);
    out
}

/// A producer's fields: id, epoch, base sequence.
type Producer = (i64, i16, i32);
const NO_PRODUCER: Producer = (-1, -1, -1);

fn codec_id(codec: Compression) -> i16 {
    match codec {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Snappy => 2,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
    }
}

/// `section` compressed with `codec`, as a producer's client would.
fn compress(codec: Compression, section: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let write = |b: &mut BytesMut| {
        b.extend_from_slice(section);
        Ok(())
    };
    match codec {
        Compression::None => out.extend_from_slice(section),
        Compression::Gzip => Gzip::compress(&mut out, write).unwrap(),
        Compression::Snappy => Snappy::compress(&mut out, write).unwrap(),
        Compression::Lz4 => Lz4::compress(&mut out, write).unwrap(),
        Compression::Zstd => Zstd::compress(&mut out, write).unwrap(),
    }
    out
}

/// A v2 batch of `records` (base timestamp 1000), its records compressed with `codec`.
fn batch_with(
    base_offset: i64,
    records: &[Vec<u8>],
    codec: Compression,
    producer: Producer,
) -> Vec<u8> {
    let section: Vec<u8> = records.concat();
    let mut content = Vec::new(); // from the attributes on: what the CRC covers
    content.extend(codec_id(codec).to_be_bytes()); // attributes: the codec, CreateTime
    content.extend((records.len() as i32 - 1).to_be_bytes()); // last offset delta
    content.extend(1000i64.to_be_bytes()); // base timestamp
    content.extend((1000 + records.len() as i64 - 1).to_be_bytes()); // max timestamp
    content.extend(producer.0.to_be_bytes()); // producer id
    content.extend(producer.1.to_be_bytes()); // producer epoch
    content.extend(producer.2.to_be_bytes()); // base sequence
    content.extend((records.len() as i32).to_be_bytes());
    content.extend(compress(codec, &section));
    let mut out = Vec::new();
    out.extend(base_offset.to_be_bytes());
    out.extend((4 + 1 + 4 + content.len() as i32).to_be_bytes()); // batch length
    out.extend(0i32.to_be_bytes()); // partition leader epoch
    out.push(2); // magic
    out.extend(crc32c::crc32c(&content).to_be_bytes());
    out.extend(content);
    out
}

/// An uncompressed v2 batch of `records`, of no producer (producer id and base sequence -1).
fn batch(base_offset: i64, records: &[Vec<u8>]) -> Vec<u8> {
    batch_with(base_offset, records, Compression::None, NO_PRODUCER)
}

fn tp() -> TopicPartition {
    TopicPartition::new("c", 0)
}

/// A memory log holding `a=old` and `b=v` (the latter with the headers `h: 1` and `h: 2`)
/// in one batch, then `a=new`, compacted once: the first batch loses `a=old` and is
/// rewritten. Returns the rewritten batch's bytes.
fn rewritten() -> Vec<u8> {
    let log = MemoryLog::new();
    log.create_topic("c", 1).unwrap();
    let first = vec![
        record(0, b"a", b"old", &[]),
        record(1, b"b", b"v", &[("h", "1"), ("h", "2")]),
    ];
    log.append_encoded_timestamps(&tp(), &[1000, 1001], |base| {
        Arc::from(&batch(base, &first)[..])
    })
    .unwrap();
    let second = vec![record(0, b"a", b"new", &[])];
    log.append_encoded_timestamps(&tp(), &[1000], |base| Arc::from(&batch(base, &second)[..]))
        .unwrap();
    let mut policy = CompactionPolicy::at(10_000);
    policy.min_cleanable_dirty_ratio = 0.0;
    let done = log.compact(&tp(), &policy, &batches()).unwrap();
    assert_eq!(done.records_removed, 1, "a=old goes: {done:?}");
    let read = log.read_batches(&tp(), 0, 1 << 20).unwrap();
    let kept = &read.batches[0];
    // As Kafka's rewrite: the original batch's base and last offsets.
    assert_eq!(
        (kept.base_offset(), kept.last_offset()),
        (0, 1),
        "b=v is kept, in a batch of the original's offsets"
    );
    // What a consumer reads: b=v at offset 1.
    let set =
        RecordBatchDecoder::decode(&mut Bytes::copy_from_slice(kept.encoded().unwrap())).unwrap();
    let read: Vec<(i64, &[u8], &[u8])> = set
        .records
        .iter()
        .map(|r| {
            (
                r.offset,
                &r.key.as_ref().unwrap()[..],
                &r.value.as_ref().unwrap()[..],
            )
        })
        .collect();
    assert_eq!(read, [(1, &b"b"[..], &b"v"[..])]);
    kept.encoded().unwrap().to_vec()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Kafka rewrites a batch that loses records by appending each kept record with the headers
/// it read (`MemoryRecords.buildRetainedRecordsInto`: `builder.append(record)`, whose
/// `record.headers()` is `DefaultRecord.readHeaders`' array, one entry per header as
/// stored): a record's headers survive the cleaner whole, two of one key included (Kafka's
/// `Headers.add` appends; `Headers.headers(key)` returns every one). The rewrite once went
/// through kafka-protocol, whose `Record::headers` is an `IndexMap` keyed by the header's
/// name: the second `h` replaced the first and the rewritten record held only `h: 2`.
#[test]
fn a_kept_record_keeps_each_of_its_headers() {
    let out = rewritten();
    assert!(contains(&out, b"\x02h\x022"), "h: 2 is there");
    assert!(
        contains(&out, b"\x02h\x021"),
        "h: 1, the record's first header, was dropped by the rewrite"
    );
    // The record's bytes are those stored, whole.
    let stored = record(1, b"b", b"v", &[("h", "1"), ("h", "2")]);
    assert_eq!(&out[61..], &stored[..]);
}

/// Kafka's rewrite keeps the original batch's producer fields, its base sequence included
/// (`MemoryRecords.buildRetainedRecordsInto`: `originalBatch.baseSequence()`), so a batch of
/// no producer keeps `NO_SEQUENCE` (-1). Re-encoding with kafka-protocol derived the base
/// sequence from the first kept record's (`base_sequence + offset_delta` when decoding): a
/// batch of no producer whose first record went got base sequence 0 (-1 + 1) beside
/// producer id -1, a header Kafka never writes.
#[test]
fn a_batch_of_no_producer_keeps_no_sequence() {
    let out = rewritten();
    let header = BatchHeader::parse(&out).unwrap();
    assert_eq!(header.producer_id, -1);
    assert_eq!(
        header.base_sequence, -1,
        "NO_SEQUENCE, as before the rewrite"
    );
}

/// Five records of a producer at offsets 100..=104, each with headers (one key twice).
fn five_records() -> Vec<Vec<u8>> {
    (0..5)
        .map(|i| {
            let key = format!("k{i}");
            let value = format!("value {i} {}", "x".repeat(40));
            record(
                i,
                key.as_bytes(),
                value.as_bytes(),
                &[("h", "first"), ("h", "second"), ("other", "o")],
            )
        })
        .collect()
}

const PRODUCER: Producer = (7, 3, 10);

/// The batch of `records` at base offset 100 compressed with `codec`, rewritten without its
/// first and last records; checks everything a reader sees of it and returns its bytes.
fn drop_first_and_last(codec: Compression) -> Vec<u8> {
    let records = five_records();
    let encoded = batch_with(100, &records, codec, PRODUCER);
    let format = batches();
    let retained = format
        .retain(&encoded, 100, &|o| (101..=103).contains(&o))
        .unwrap();
    // As Kafka: the original base and last offsets (`overrideLastOffset`).
    assert_eq!(
        (retained.base_offset, retained.last_offset),
        (100, 104),
        "{codec:?}"
    );
    let out = retained.encoded.to_vec();
    assert_eq!(&out[..8], &100i64.to_be_bytes(), "{codec:?}: base offset");
    let header = BatchHeader::parse(&out).unwrap();
    assert_eq!(
        (
            header.producer_id,
            header.producer_epoch,
            header.base_sequence
        ),
        PRODUCER,
        "{codec:?}: the producer's fields as they were"
    );
    assert_eq!(header.last_offset_delta, 4, "{codec:?}");
    assert_eq!(
        header.last_sequence(),
        14,
        "{codec:?}: the producer's last sequence"
    );
    assert_eq!(
        header.max_timestamp, 1003,
        "{codec:?}: the kept records' newest"
    );
    assert_eq!(i32::from_be_bytes(out[57..61].try_into().unwrap()), 3);
    assert_eq!(
        i16::from_be_bytes(out[21..23].try_into().unwrap()),
        codec_id(codec),
        "{codec:?}: the attributes (codec) as they were"
    );
    // A consumer's decode (which checks the CRC): the kept records at their offsets, with
    // their timestamps, keys and values, and their sequences as the producer sent them.
    let set = RecordBatchDecoder::decode(&mut Bytes::from(out.clone())).unwrap();
    assert_eq!(set.compression, codec);
    let read: Vec<(i64, i64, i32, String, String)> = set
        .records
        .iter()
        .map(|r| {
            (
                r.offset,
                r.timestamp,
                r.sequence,
                String::from_utf8(r.key.as_ref().unwrap().to_vec()).unwrap(),
                String::from_utf8(r.value.as_ref().unwrap().to_vec()).unwrap(),
            )
        })
        .collect();
    let expected: Vec<(i64, i64, i32, String, String)> = (1..=3)
        .map(|i| {
            (
                100 + i,
                1000 + i,
                10 + i as i32,
                format!("k{i}"),
                format!("value {i} {}", "x".repeat(40)),
            )
        })
        .collect();
    assert_eq!(read, expected, "{codec:?}");
    // Each kept record as stored, every header included.
    let again = StoredBatch::read(&out, LIMIT).unwrap();
    assert_eq!(
        again.records_section(),
        &records[1..4].concat()[..],
        "{codec:?}"
    );
    // A later pass reads the rewritten batch's keys.
    let keys = format.keys(&out, 100).unwrap();
    assert_eq!(
        keys.iter().map(|k| k.offset).collect::<Vec<_>>(),
        [101, 102, 103]
    );
    assert_eq!(keys[0].key.as_deref(), Some(&b"k1"[..]));
    out
}

/// A batch that loses its first and last records keeps the offsets, timestamps, keys,
/// values and headers of the others, and the original's base and last offsets and producer
/// fields, as Kafka's rewrite does.
#[test]
fn a_batch_losing_its_first_and_last_records_keeps_the_others_at_their_offsets() {
    drop_first_and_last(Compression::None);
}

/// A compressed batch is rewritten compressed with its codec, every codec the broker reads.
#[test]
fn a_compressed_batch_is_rewritten_with_its_codec() {
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        drop_first_and_last(codec);
    }
}

/// The same through a memory log's compaction, compressed: the kept records are read back
/// at their offsets, with every header.
#[test]
fn a_compressed_batch_compacted_in_a_log_keeps_its_records_whole() {
    let log = MemoryLog::new();
    log.create_topic("c", 1).unwrap();
    let first = five_records();
    log.append_encoded_timestamps(&tp(), &[1000, 1001, 1002, 1003, 1004], |base| {
        Arc::from(&batch_with(base, &first, Compression::Zstd, NO_PRODUCER)[..])
    })
    .unwrap();
    let later = vec![record(0, b"k0", b"new", &[]), record(1, b"k4", b"new", &[])];
    log.append_encoded_timestamps(&tp(), &[2000, 2001], |base| {
        Arc::from(&batch(base, &later)[..])
    })
    .unwrap();
    let mut policy = CompactionPolicy::at(10_000);
    policy.min_cleanable_dirty_ratio = 0.0;
    let done = log.compact(&tp(), &policy, &batches()).unwrap();
    assert_eq!(done.records_removed, 2, "{done:?}");
    let read = log.read_batches(&tp(), 0, 1 << 20).unwrap();
    let kept = &read.batches[0];
    assert_eq!((kept.base_offset(), kept.last_offset()), (0, 4));
    let encoded = kept.encoded().unwrap();
    let set = RecordBatchDecoder::decode(&mut Bytes::copy_from_slice(encoded)).unwrap();
    assert_eq!(set.compression, Compression::Zstd);
    assert_eq!(
        set.records.iter().map(|r| r.offset).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    let again = StoredBatch::read(encoded, LIMIT).unwrap();
    assert_eq!(again.records_section(), &first[1..4].concat()[..]);
    let header = BatchHeader::parse(encoded).unwrap();
    assert_eq!((header.producer_id, header.base_sequence), (-1, -1));
}

/// A `LogAppendTime` batch keeps its max timestamp, every record's timestamp.
#[test]
fn a_log_append_time_batch_keeps_its_timestamp() {
    let mut encoded = batch(0, &five_records());
    encoded[22] |= 0x08; // LogAppendTime
    encoded[35..43].copy_from_slice(&5000i64.to_be_bytes());
    let crc = crc32c::crc32c(&encoded[21..]);
    encoded[17..21].copy_from_slice(&crc.to_be_bytes());
    let retained = batches().retain(&encoded, 0, &|o| o == 1).unwrap();
    let header = BatchHeader::parse(&retained.encoded).unwrap();
    assert_eq!(header.max_timestamp, 5000);
    // (kafka-protocol's decoder reads a record's own timestamp, not the batch's: Kafka's
    // `DefaultRecordBatch` gives each record of a `LogAppendTime` batch the max timestamp.)
    let again = StoredBatch::read(&retained.encoded, LIMIT).unwrap();
    assert_eq!(
        again
            .records()
            .iter()
            .map(|r| (r.offset, r.timestamp))
            .collect::<Vec<_>>(),
        [(1, 5000)]
    );
    let set = RecordBatchDecoder::decode(&mut Bytes::copy_from_slice(&retained.encoded)).unwrap();
    assert_eq!(set.records.len(), 1);
    assert_eq!(set.records[0].timestamp_type, TimestampType::LogAppend);
}

/// Bytes that are not a sound batch are kept as they are: no keys, no rewrite, no panic.
#[test]
fn a_batch_that_does_not_read_takes_no_part() {
    let format = batches();
    let keep = |o: i64| o % 2 == 1;
    let check = |bytes: &[u8]| {
        if format.keys(bytes, 0).is_none() {
            assert!(format.retain(bytes, 0, &keep).is_err());
        } else {
            let _ = format.retain(bytes, 0, &keep);
        }
    };
    for codec in [Compression::None, Compression::Gzip, Compression::Snappy] {
        let good = batch_with(0, &five_records(), codec, PRODUCER);
        assert!(format.keys(&good, 0).is_some());
        // Every truncation.
        for n in 0..good.len() {
            assert!(format.keys(&good[..n], 0).is_none(), "{codec:?}: {n} bytes");
            assert!(format.retain(&good[..n], 0, &keep).is_err());
        }
        // A trailing byte.
        let mut longer = good.clone();
        longer.push(0);
        assert!(format.keys(&longer, 0).is_none());
        // A bad CRC.
        let mut bad = good.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(format.keys(&bad, 0).is_none(), "{codec:?}: a bad CRC");
        // Any byte changed, the CRC made to match: whatever it reads, it does not panic.
        for at in 8..good.len() {
            for v in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                let mut b = good.clone();
                b[at] = v;
                if at >= 21 {
                    let crc = crc32c::crc32c(&b[21..]);
                    b[17..21].copy_from_slice(&crc.to_be_bytes());
                }
                check(&b);
            }
        }
    }
    // Records that decompress past the bound.
    let big = vec![
        record(0, b"k", &vec![0u8; 1 << 20], &[]),
        record(1, b"k", b"v", &[]),
    ];
    let bomb = batch_with(0, &big, Compression::Gzip, NO_PRODUCER);
    assert!(bomb.len() < 8192);
    let small = KafkaBatches::new(1 << 16);
    assert!(small.keys(&bomb, 0).is_none());
    assert!(small.retain(&bomb, 0, &|o| o == 1).is_err());
    assert!(batches().retain(&bomb, 0, &|o| o == 1).is_ok());
}
