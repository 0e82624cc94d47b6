#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! A review of [`KafkaBatches`], the cleaner's reading and rewriting of Kafka's v2 batches,
//! against Kafka 4's rewrite of a batch that loses records (`MemoryRecords.filterTo` and
//! `buildRetainedRecordsInto`, `clients/src/main/java/org/apache/kafka/common/record/`).
//! The batches are built by hand: kafka-protocol's encoder cannot write a record with two
//! headers of one key.

use std::sync::Arc;

use coordinator_core::TopicPartition;
use partition_log::compaction::CompactionPolicy;
use partition_log::MemoryLog;

use super::KafkaBatches;
use crate::producers::BatchHeader;

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

/// An uncompressed v2 batch of `records`, of no producer (producer id and base sequence -1).
fn batch(base_offset: i64, records: &[Vec<u8>]) -> Vec<u8> {
    let mut content = Vec::new(); // from the attributes on: what the CRC covers
    content.extend(0i16.to_be_bytes()); // attributes: no compression, CreateTime
    content.extend((records.len() as i32 - 1).to_be_bytes()); // last offset delta
    content.extend(1000i64.to_be_bytes()); // base timestamp
    content.extend((1000 + records.len() as i64 - 1).to_be_bytes()); // max timestamp
    content.extend((-1i64).to_be_bytes()); // producer id
    content.extend((-1i16).to_be_bytes()); // producer epoch
    content.extend((-1i32).to_be_bytes()); // base sequence
    content.extend((records.len() as i32).to_be_bytes());
    for r in records {
        content.extend_from_slice(r);
    }
    let mut out = Vec::new();
    out.extend(base_offset.to_be_bytes());
    out.extend((4 + 1 + 4 + content.len() as i32).to_be_bytes()); // batch length
    out.extend(0i32.to_be_bytes()); // partition leader epoch
    out.push(2); // magic
    out.extend(crc32c::crc32c(&content).to_be_bytes());
    out.extend(content);
    out
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
    let done = log.compact(&tp(), &policy, &KafkaBatches).unwrap();
    assert_eq!(done.records_removed, 1, "a=old goes: {done:?}");
    let read = log.read_batches(&tp(), 0, 1 << 20).unwrap();
    let kept = &read.batches[0];
    assert_eq!(
        (kept.base_offset(), kept.last_offset()),
        (1, 1),
        "b=v is kept"
    );
    kept.encoded().unwrap().to_vec()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Kafka rewrites a batch that loses records by appending each kept record with the headers
/// it read (`MemoryRecords.buildRetainedRecordsInto`: `builder.append(record)`, whose
/// `record.headers()` is `DefaultRecord.readHeaders`' array, one entry per header as
/// stored): a record's headers survive the cleaner whole, two of one key included (Kafka's
/// `Headers.add` appends; `Headers.headers(key)` returns every one). `KafkaBatches::retain`
/// decodes through kafka-protocol, whose `Record::headers` is an `IndexMap` keyed by the
/// header's name, so the second `h` replaces the first and the rewritten record holds only
/// `h: 2`.
#[test]
#[ignore = "bug: a record kept in a rewritten batch loses every header but the last of each repeated key (kafka-protocol's header map)"]
fn a_kept_record_keeps_each_of_its_headers() {
    let out = rewritten();
    assert!(contains(&out, b"\x02h\x022"), "h: 2 is there");
    assert!(
        contains(&out, b"\x02h\x021"),
        "h: 1, the record's first header, was dropped by the rewrite"
    );
}

/// Kafka's rewrite keeps the original batch's producer fields, its base sequence included
/// (`MemoryRecords.buildRetainedRecordsInto`: `originalBatch.baseSequence()`), so a batch of
/// no producer keeps `NO_SEQUENCE` (-1). `KafkaBatches::retain` re-encodes with
/// kafka-protocol, which derives the base sequence from the first kept record's
/// (`base_sequence + offset_delta` when decoding): a batch of no producer whose first
/// record went gets base sequence 0 (-1 + 1) beside producer id -1, a header Kafka never
/// writes.
#[test]
#[ignore = "minor: a batch of no producer whose first record went is rewritten with base sequence 0 instead of -1"]
fn a_batch_of_no_producer_keeps_no_sequence() {
    let out = rewritten();
    let header = BatchHeader::parse(&out).unwrap();
    assert_eq!(header.producer_id, -1);
    assert_eq!(
        header.base_sequence, -1,
        "NO_SEQUENCE, as before the rewrite"
    );
}
