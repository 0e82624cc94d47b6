//! The compaction part of the suite ([`PartitionLog::compact`]), with a text record format
//! ([`TextRecords`]) standing in for Kafka's: each test creates topic `c` of one partition.
//! A log with segments should have small ones (the suite's segment log has 1 KiB segments):
//! the tests write enough after the records they check to close the segments holding them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use coordinator_core::{Bytes, NewRecord, TopicPartition};

use crate::compaction::{
    BatchKind, Compaction, CompactionPolicy, KeyedRecord, RecordFormat, RetainedBatch,
};
use crate::PartitionLog;

/// A record format for the tests. Each line of a batch: `<offset> <key> <value>`; key `_` is no key, value `-` a tombstone.
/// A first line `#T <producer>` makes a transactional batch, `#M <producer> commit|abort` a
/// marker, `#?` bytes the format does not know.
#[derive(Debug)]
pub struct TextRecords;

/// The records of a [`TextRecords`] batch, as `(offset, key, value)`.
pub fn parse(encoded: &[u8]) -> Vec<(i64, String, String)> {
    std::str::from_utf8(encoded)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let mut it = l.split(' ');
            let o = it.next().unwrap().parse().unwrap();
            (
                o,
                it.next().unwrap().to_string(),
                it.next().unwrap().to_string(),
            )
        })
        .collect()
}

impl RecordFormat for TextRecords {
    fn kind(&self, encoded: &[u8]) -> BatchKind {
        let text = std::str::from_utf8(encoded).unwrap();
        let first: Vec<&str> = text.lines().next().unwrap_or("").split(' ').collect();
        match first[..] {
            ["#T", p] => BatchKind::Transactional {
                producer_id: p.parse().unwrap(),
            },
            ["#M", p, outcome] => BatchKind::Marker {
                producer_id: p.parse().unwrap(),
                commit: outcome == "commit",
            },
            ["#?"] => BatchKind::Unknown,
            _ => BatchKind::Plain,
        }
    }

    fn keys(&self, encoded: &[u8], _base_offset: i64) -> Option<Vec<KeyedRecord>> {
        Some(
            parse(encoded)
                .into_iter()
                .map(|(offset, k, v)| KeyedRecord {
                    offset,
                    key: (k != "_").then(|| Bytes::from(k.into_bytes())),
                    tombstone: v == "-",
                })
                .collect(),
        )
    }

    fn retain(
        &self,
        encoded: &[u8],
        _base_offset: i64,
        keep: &dyn Fn(i64) -> bool,
    ) -> Result<RetainedBatch, String> {
        let kept: Vec<_> = parse(encoded)
            .into_iter()
            .filter(|(o, _, _)| keep(*o))
            .collect();
        let header = std::str::from_utf8(encoded)
            .unwrap()
            .lines()
            .next()
            .filter(|l| l.starts_with("#T"))
            .map(|l| format!("{l}\n"))
            .unwrap_or_default();
        let text: String = header
            + &kept
                .iter()
                .map(|(o, k, v)| format!("{o} {k} {v}\n"))
                .collect::<String>();
        Ok(RetainedBatch {
            encoded: Bytes::from(text.into_bytes()),
            base_offset: kept.first().ok_or("nothing kept")?.0,
            last_offset: kept.last().ok_or("nothing kept")?.0,
        })
    }
}

/// Partition 0 of topic `c`.
pub fn tp() -> TopicPartition {
    TopicPartition::new("c", 0)
}

/// Appends one batch of `(key, value)` records at `ts`, padded so that a few batches fill a
/// segment; returns its base offset.
pub async fn put(log: &dyn PartitionLog, records: &[(&str, &str)], ts: i64) -> i64 {
    put_as(log, "", records, ts).await
}

/// [`put`] with a first line `header` (see [`TextRecords`]).
pub async fn put_as(
    log: &dyn PartitionLog,
    header: &str,
    records: &[(&str, &str)],
    ts: i64,
) -> i64 {
    try_put_as(log, header, records, ts).await.unwrap()
}

/// [`put_as`], returning the append's error rather than panicking (crash and fault tests).
pub async fn try_put_as(
    log: &dyn PartitionLog,
    header: &str,
    records: &[(&str, &str)],
    ts: i64,
) -> Result<i64, coordinator_core::LogError> {
    append_text(log, header, records, ts, false).await
}

/// [`put`] through [`PartitionLog::append_encoded_timestamps`]: the batch is known to the
/// log by its timestamps only, as the broker appends.
pub async fn put_timestamps(log: &dyn PartitionLog, records: &[(&str, &str)], ts: i64) -> i64 {
    append_text(log, "", records, ts, true).await.unwrap()
}

/// Appends the text batch of `records` after `header`, with its records' timestamps only if
/// `timestamps_only`.
async fn append_text(
    log: &dyn PartitionLog,
    header: &str,
    records: &[(&str, &str)],
    ts: i64,
    timestamps_only: bool,
) -> Result<i64, coordinator_core::LogError> {
    let owned: Vec<(String, String)> = records
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let header = if header.is_empty() {
        String::new()
    } else {
        format!("{header}\n")
    };
    let encode: crate::EncodeBatch<'_> = Box::new(move |base| {
        let mut text: String = owned
            .iter()
            .zip(base..)
            .map(|((k, v), o)| format!("{o} {k} {v}\n"))
            .collect();
        text.insert_str(0, &header);
        text.push_str(&format!("{}\n", "#".repeat(150)));
        Bytes::from(text.into_bytes())
    });
    if timestamps_only {
        return log
            .append_encoded_timestamps(&tp(), &vec![ts; records.len()], encode)
            .await;
    }
    let new = records
        .iter()
        .map(|_| NewRecord::new(&b"x"[..]).timestamp(ts))
        .collect();
    log.append_encoded(&tp(), new, encode).await
}

/// Every record readable from the log start, as `(offset, key, value)`.
pub async fn contents(log: &dyn PartitionLog) -> Vec<(i64, String, String)> {
    let (start, end) = log.bounds(&tp()).await.unwrap();
    let mut next = start;
    let mut out = Vec::new();
    while next < end {
        let read = log.read_batches(&tp(), next, 1 << 20).await.unwrap();
        for b in &read.batches {
            let text = b.encoded().unwrap();
            out.extend(
                parse(text)
                    .into_iter()
                    .filter(|(o, k, _)| *o >= next && !k.starts_with('#')),
            );
            next = b.last_offset() + 1;
        }
    }
    out
}

/// A row of [`contents`].
pub fn row(o: i64, k: &str, v: &str) -> (i64, String, String) {
    (o, k.to_string(), v.to_string())
}

/// One pass over [`tp`] with [`TextRecords`].
pub async fn compact(log: &dyn PartitionLog, policy: &CompactionPolicy) -> Compaction {
    log.compact(&tp(), policy, Arc::new(TextRecords))
        .await
        .unwrap()
}

/// Ten batches of two records over keys a, b, c: several closed segments, the last batch
/// in the active one.
pub async fn many_values(log: &dyn PartitionLog) {
    for i in 0..10 {
        let v1 = format!("v{}", 2 * i);
        let v2 = format!("v{}", 2 * i + 1);
        let keys = ["a", "b", "c"];
        put(log, &[(keys[i % 3], &v1), (keys[(i + 1) % 3], &v2)], 1).await;
    }
}

/// The records still stored, markers included, as `(offset, first line)`.
pub async fn batches(log: &dyn PartitionLog) -> Vec<(i64, String)> {
    let (start, end) = log.bounds(&tp()).await.unwrap();
    let read = log.read_batches(&tp(), start, 1 << 30).await.unwrap();
    assert!(read
        .batches
        .last()
        .is_none_or(|b| b.last_offset() + 1 >= end));
    read.batches
        .iter()
        .map(|b| {
            let text = std::str::from_utf8(b.encoded().unwrap()).unwrap();
            (b.base_offset(), text.lines().next().unwrap().to_string())
        })
        .collect()
}

/// Appends `n` batches of one record each under keys of their own.
pub async fn fill(log: &dyn PartitionLog, n: usize) {
    for i in 0..n {
        put(
            log,
            &[(&format!("f{i}-{}", log.bounds(&tp()).await.unwrap().1), "f")],
            1,
        )
        .await;
    }
}

/// Creates topic `c` of one partition unless it exists.
pub async fn topic(log: &dyn PartitionLog) {
    if log.partition_count("c").is_none() {
        log.create_topic("c", 1).await.unwrap();
    }
}

/// An aborted transaction's records go, a committed one's take part, an undecided one is
/// kept whole, and a marker goes once its transaction has no record left and its delete
/// horizon has passed.
pub async fn compaction_drops_aborted_records_and_lone_markers(log: &dyn PartitionLog) {
    topic(log).await;
    put(log, &[("c", "p0")], 1).await; // 0: replaced by the committed t2
    put_as(log, "#T 7", &[("a", "t1"), ("b", "t1")], 1).await; // 1, 2: aborted
    let abort = put_as(log, "#M 7 abort", &[("m", "m")], 1).await; // 3
    put_as(log, "#T 8", &[("c", "t2")], 1).await; // 4: committed
    let commit = put_as(log, "#M 8 commit", &[("m", "m")], 1).await; // 5
    put(log, &[("a", "p1")], 1).await; // 6
    let open = put_as(log, "#T 9", &[("z", "open")], 1).await; // 7: no marker yet
    fill(log, 8).await;
    let policy = |now| CompactionPolicy {
        delete_retention_ms: 1000,
        min_cleanable_dirty_ratio: 0.0,
        ..CompactionPolicy::at(now)
    };
    compact(log, &policy(100)).await;
    let rows = contents(log).await;
    assert!(
        !rows.iter().any(|r| r.2 == "t1"),
        "aborted records go: {rows:?}"
    );
    assert!(
        rows.contains(&row(4, "c", "t2")),
        "committed, and the latest"
    );
    assert!(
        !rows.contains(&row(0, "c", "p0")),
        "a committed record replaces: {rows:?}"
    );
    assert!(rows.contains(&row(6, "a", "p1")) && rows.contains(&row(7, "z", "open")));
    let stored = batches(log).await;
    assert!(
        stored.contains(&(abort, "#M 7 abort".into())),
        "its horizon runs: {stored:?}"
    );
    assert!(
        stored.contains(&(commit, "#M 8 commit".into())),
        "its record is left"
    );
    assert!(
        stored.contains(&(open, "#T 9".into())),
        "undecided: kept whole"
    );

    // `c` written again outside a transaction: the committed record goes. A marker gets its
    // horizon at the first pass that finds it alone, not at the pass that removed its
    // transaction's records (Kafka's `CleanedTransactionMetadata.onControlBatchRead`), and
    // goes once that horizon has passed: the abort marker (alone since the pass at 100) gets
    // its horizon now (1100 + 1000), the commit marker (alone from this pass) at the next.
    put(log, &[("c", "p2")], 1).await;
    fill(log, 8).await;
    compact(log, &policy(1100)).await;
    let stored = batches(log).await;
    assert!(!contents(log).await.iter().any(|r| r.2 == "t2"));
    assert!(
        stored.iter().any(|b| b.0 == abort),
        "the abort marker's horizon runs: {stored:?}"
    );
    assert!(
        stored.iter().any(|b| b.0 == commit),
        "the commit marker has no horizon yet"
    );
    fill(log, 8).await;
    compact(log, &policy(2100)).await;
    let stored = batches(log).await;
    assert!(
        !stored.iter().any(|b| b.0 == abort),
        "the abort marker's horizon passed: {stored:?}"
    );
    assert!(
        stored.iter().any(|b| b.0 == commit),
        "the commit marker's horizon runs: {stored:?}"
    );
    fill(log, 8).await;
    compact(log, &policy(3100)).await;
    let stored = batches(log).await;
    assert!(!stored.iter().any(|b| b.0 == commit), "{stored:?}");
    assert!(stored.contains(&(open, "#T 9".into())));
}

/// Each key's latest record is kept at its offset, an older one goes, a record of a key
/// written once stays, and the bounds do not move.
pub async fn compaction_keeps_the_latest_record_of_each_key(log: &dyn PartitionLog) {
    topic(log).await;
    many_values(log).await; // 0..=19 over keys a, b, c
    fill(log, 8).await;
    let before = contents(log).await;
    let (start, end) = log.bounds(&tp()).await.unwrap();
    let policy = CompactionPolicy {
        min_cleanable_dirty_ratio: 0.0,
        ..CompactionPolicy::at(10)
    };
    let done = compact(log, &policy).await;
    assert!(done.records_removed > 0, "{done:?}");
    let after = contents(log).await;
    let keyed: Vec<_> = after
        .iter()
        .filter(|r| ["a", "b", "c"].contains(&r.1.as_str()))
        .cloned()
        .collect();
    assert_eq!(
        keyed,
        [
            row(16, "c", "v16"),
            row(18, "a", "v18"),
            row(19, "b", "v19")
        ],
        "each key's latest, at its offset"
    );
    let fillers = |rows: &[(i64, String, String)]| {
        rows.iter()
            .filter(|r| r.1.starts_with('f'))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(fillers(&after), fillers(&before), "keys written once stay");
    assert_eq!(log.bounds(&tp()).await.unwrap(), (start, end));
}

/// A tombstone stays until a pass finds its delete horizon passed.
pub async fn compaction_keeps_tombstones_until_their_horizon(log: &dyn PartitionLog) {
    topic(log).await;
    put(log, &[("a", "1"), ("b", "1")], 1).await;
    let tombstone = put(log, &[("a", "-")], 1).await;
    fill(log, 8).await;
    let policy = |now| CompactionPolicy {
        delete_retention_ms: 1000,
        min_cleanable_dirty_ratio: 0.0,
        ..CompactionPolicy::at(now)
    };
    compact(log, &policy(100)).await;
    let rows = contents(log).await;
    assert!(rows.contains(&row(tombstone, "a", "-")), "kept: {rows:?}");
    assert!(
        !rows.contains(&row(0, "a", "1")),
        "its key's older value goes"
    );
    fill(log, 8).await;
    compact(log, &policy(1099)).await;
    assert!(contents(log).await.contains(&row(tombstone, "a", "-")));
    fill(log, 8).await;
    compact(log, &policy(1100)).await;
    let rows = contents(log).await;
    assert!(
        !rows.iter().any(|r| r.1 == "a"),
        "past its horizon: {rows:?}"
    );
    assert!(rows.contains(&row(1, "b", "1")));
}

/// A batch that lost records answers lookups by timestamp with the records it kept, at
/// their offsets.
pub async fn compaction_keeps_the_offsets_and_timestamps_of_kept_records(log: &dyn PartitionLog) {
    topic(log).await;
    put(log, &[("a", "1"), ("b", "1"), ("c", "1")], 10).await; // 0..=2
    put(log, &[("a", "2"), ("b", "2")], 30).await; // 3, 4
    fill(log, 8).await;
    let policy = CompactionPolicy {
        min_cleanable_dirty_ratio: 0.0,
        ..CompactionPolicy::at(100)
    };
    compact(log, &policy).await;
    let rows = contents(log).await;
    assert!(rows.contains(&row(2, "c", "1")), "{rows:?}");
    assert!(!rows.contains(&row(0, "a", "1")) && !rows.contains(&row(1, "b", "1")));
    assert_eq!(
        log.offset_for_timestamp(&tp(), 0).await.unwrap(),
        Some((2, 10)),
        "offsets 0 and 1 are gone: the first kept record answers"
    );
    assert_eq!(
        log.offset_for_timestamp(&tp(), 11).await.unwrap(),
        Some((3, 30))
    );
    let read = log.read_batches(&tp(), 0, 1).await.unwrap();
    assert!(read.batches[0].last_offset() >= 2 && read.batches[0].base_offset() <= 2);
}

/// Batches appended with their timestamps only (the broker's appends) compact as batches
/// appended with records: each key's latest kept at its offset with its timestamp, the
/// removed records counted, lookups by timestamp over what is left.
pub async fn compaction_of_batches_appended_with_timestamps_only(log: &dyn PartitionLog) {
    topic(log).await;
    put_timestamps(log, &[("a", "1"), ("b", "1"), ("c", "1")], 10).await; // 0..=2
    put_timestamps(log, &[("a", "2"), ("b", "2")], 30).await; // 3, 4
    for i in 0..8 {
        put_timestamps(log, &[(&format!("g{i}"), "g")], 1).await;
    }
    let policy = CompactionPolicy {
        min_cleanable_dirty_ratio: 0.0,
        ..CompactionPolicy::at(100)
    };
    let done = compact(log, &policy).await;
    assert_eq!(done.records_removed, 2, "a and b at 0 and 1: {done:?}");
    let rows = contents(log).await;
    assert_eq!(
        rows[..3],
        [row(2, "c", "1"), row(3, "a", "2"), row(4, "b", "2")],
        "{rows:?}"
    );
    assert_eq!(
        log.offset_for_timestamp(&tp(), 0).await.unwrap(),
        Some((2, 10)),
        "offsets 0 and 1 are gone: the first kept record answers"
    );
    assert_eq!(
        log.offset_for_timestamp(&tp(), 11).await.unwrap(),
        Some((3, 30))
    );
    assert_eq!(
        log.offset_of_max_timestamp(&tp()).await.unwrap(),
        Some((3, 30))
    );
    let read = log.read_batches(&tp(), 0, 1).await.unwrap();
    assert_eq!(read.batches[0].max_timestamp(), 10);
    assert!(read.batches[0].records().is_empty(), "still no record view");
}
