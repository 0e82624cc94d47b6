//! The group log's records as batches of a compacted partition, Kafka's
//! `__consumer_offsets`: what the store writes into its partition of the segment log, and
//! how that log's cleaner reads it ([`GroupRecords`]).
//!
//! # Batch
//!
//! ```text
//! batch  = version:u8 (2) count:u32 (delta:u32 record)*count
//! record = len:u32 type:u8 version:u8 payload      (as in a frame body, see `record`)
//! ```
//!
//! Integers are little-endian. `delta` is the record's offset minus the batch's base
//! offset: a batch rewritten by compaction keeps its records' offsets, with gaps where
//! records went. The segment log's frame around each batch carries its checksum.
//!
//! # Keys
//!
//! Each record replaces or deletes the one before it with the same key, so compaction keeps
//! the latest record of each key and the state replayed from what it keeps is the state
//! replayed from everything:
//!
//! | record | key | tombstone |
//! | --- | --- | --- |
//! | offset commit | `o`, group, topic, partition | no |
//! | offset deletion | the same | yes |
//! | group record | `g`, group | no |
//! | group tombstone | the same | yes |
//! | transaction record | `t`, transactional id | no |
//! | transaction tombstone | the same | yes |
//!
//! A deletion of all of a group's offsets has no key of its own (it deletes several): the
//! cleaner is given one no other record has (`#` and its offset), so that it is always kept,
//! and so is every commit it deletes whose key has no later record (the cleaner removes
//! records without a key, as Kafka's does). The store writes one offset deletion per
//! partition instead, and never writes one (an old directory's are applied at its import,
//! which writes the state, not the history).

use coordinator_core::{Bytes, TopicPartition};
use partition_log::compaction::{BatchKind, KeyedRecord, RecordFormat, RetainedBatch};

use super::record::{decode_record_bytes, DecodeError, Record};

/// The version of a batch ([`Frame::batch`](super::record::Frame::batch) writes it).
pub(crate) const BATCH_VERSION: u8 = 2;

/// `records` as one batch, at consecutive offsets from the batch's base.
#[cfg(test)]
pub(crate) fn encode_batch(records: &[Record]) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut batch = super::record::Frame::batch(&mut buf);
    batch.records(records);
    batch.finish();
    buf
}

/// Each record's raw bytes (what its length counts) with its offset.
fn raw_records(data: &[u8], base_offset: i64) -> Result<Vec<(i64, &[u8])>, DecodeError> {
    let word = |at: usize| -> Result<u32, DecodeError> {
        data.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| format!("a batch cut short at byte {at} of {}", data.len()))
    };
    match data.first() {
        Some(&BATCH_VERSION) => {}
        Some(v) => return Err(format!("unknown batch version {v}")),
        None => return Err("an empty batch".to_owned()),
    }
    let count = word(1)?;
    let mut out = Vec::with_capacity((count as usize).min(data.len() / 10));
    let mut at = 5;
    let mut last = None;
    for i in 0..count {
        let delta = word(at)?;
        let len = word(at + 4)? as usize;
        let start = at + 8;
        let bytes = data
            .get(start..start.saturating_add(len))
            .ok_or_else(|| format!("record {i}: {len} bytes past the batch's end"))?;
        if last.is_some_and(|d| delta <= d) {
            return Err(format!(
                "record {i}: offset delta {delta} does not increase"
            ));
        }
        last = Some(delta);
        out.push((base_offset.saturating_add(i64::from(delta)), bytes));
        at = start + len;
    }
    if at != data.len() {
        return Err(format!(
            "{} bytes after the batch's {count} records",
            data.len() - at
        ));
    }
    Ok(out)
}

/// The records of a batch whose base offset is `base_offset`, each with its offset, in
/// order.
pub(crate) fn decode_batch(
    data: &[u8],
    base_offset: i64,
) -> Result<Vec<(i64, Record)>, DecodeError> {
    let mut last_topic = None;
    raw_records(data, base_offset)?
        .into_iter()
        .enumerate()
        .map(|(i, (offset, bytes))| {
            decode_record_bytes(bytes, &mut last_topic)
                .map(|r| (offset, r))
                .map_err(|e| format!("record {i}: {e}"))
        })
        .collect()
}

/// A record's key and whether it is a tombstone; `None` for a record without one.
fn key(record: &Record) -> Option<(Vec<u8>, bool)> {
    fn put(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&u32::try_from(s.len()).unwrap_or(u32::MAX).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    let offset_key = |group: &str, tp: &TopicPartition| {
        let mut k = vec![b'o'];
        put(&mut k, group);
        put(&mut k, tp.topic());
        k.extend_from_slice(&tp.partition().to_le_bytes());
        k
    };
    let named = |kind: u8, name: &str| {
        let mut k = vec![kind];
        put(&mut k, name);
        k
    };
    Some(match record {
        Record::Commit { group, tp, .. } => (offset_key(group, tp), false),
        Record::DeleteOffset { group, tp } => (offset_key(group, tp), true),
        Record::Group(r) => (named(b'g', &r.group_id), false),
        Record::GroupTombstone { group } => (named(b'g', group), true),
        Record::Transaction(r) => (named(b't', &r.transactional_id), false),
        Record::TransactionTombstone { id } => (named(b't', id), true),
        Record::DeleteGroupOffsets { .. }
        | Record::SnapshotStart { .. }
        | Record::SnapshotEnd { .. } => return None,
    })
}

/// How the segment log's cleaner reads the group log's batches.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GroupRecords;

impl RecordFormat for GroupRecords {
    fn kind(&self, _encoded: &[u8]) -> BatchKind {
        // The store writes no transactional batches: its writes land whole, one batch each.
        BatchKind::Plain
    }

    fn keys(&self, encoded: &[u8], base_offset: i64) -> Option<Vec<KeyedRecord>> {
        let records = decode_batch(encoded, base_offset).ok()?;
        Some(
            records
                .iter()
                .map(|(offset, r)| {
                    let (key, tombstone) = match key(r) {
                        Some((k, t)) => (Some(Bytes::from(k)), t),
                        None => {
                            let mut k = vec![b'#'];
                            k.extend_from_slice(&offset.to_le_bytes());
                            (Some(Bytes::from(k)), false)
                        }
                    };
                    KeyedRecord {
                        offset: *offset,
                        key,
                        tombstone,
                    }
                })
                .collect(),
        )
    }

    fn retain(
        &self,
        encoded: &[u8],
        base_offset: i64,
        keep: &dyn Fn(i64) -> bool,
    ) -> Result<RetainedBatch, String> {
        let kept: Vec<(i64, &[u8])> = raw_records(encoded, base_offset)?
            .into_iter()
            .filter(|(o, _)| keep(*o))
            .collect();
        let (Some(first), Some(last)) = (kept.first(), kept.last()) else {
            return Err("no record kept".to_owned());
        };
        let (base, last_offset) = (first.0, last.0);
        let mut out = Vec::with_capacity(encoded.len());
        out.push(BATCH_VERSION);
        out.extend_from_slice(
            &u32::try_from(kept.len())
                .map_err(|e| e.to_string())?
                .to_le_bytes(),
        );
        for (offset, bytes) in &kept {
            let delta = u32::try_from(offset - base).map_err(|e| e.to_string())?;
            out.extend_from_slice(&delta.to_le_bytes());
            out.extend_from_slice(
                &u32::try_from(bytes.len())
                    .map_err(|e| e.to_string())?
                    .to_le_bytes(),
            );
            out.extend_from_slice(bytes);
        }
        Ok(RetainedBatch {
            encoded: Bytes::from(out),
            base_offset: base,
            last_offset,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::BTreeMap;
    use std::sync::Arc;

    use coordinator_core::{Clock, ManualClock, NewRecord, OffsetAndMetadata};
    use partition_log::compaction::CompactionPolicy;
    use partition_log::fs::sim::SimFs;
    use partition_log::{PartitionLog, SegmentLog};

    use super::*;
    use crate::log::record::tests::{all_records, sample_group, sample_transaction};
    use crate::log::state::Live;

    #[test]
    fn a_batch_round_trips_with_its_offsets() {
        let records = all_records();
        let data = encode_batch(&records);
        let decoded = decode_batch(&data, 100).unwrap();
        let offsets: Vec<i64> = decoded.iter().map(|(o, _)| *o).collect();
        assert_eq!(
            offsets,
            (100..100 + records.len() as i64).collect::<Vec<_>>()
        );
        let back: Vec<Record> = decoded.into_iter().map(|(_, r)| r).collect();
        assert_eq!(back, records);
        // Damage is an error, never a panic or a misread.
        for cut in 0..data.len() {
            assert!(decode_batch(&data[..cut], 0).is_err(), "cut at {cut}");
        }
        let mut longer = data.clone();
        longer.push(0);
        assert!(decode_batch(&longer, 0).is_err());
        let mut version = data;
        version[0] = 1;
        assert!(decode_batch(&version, 0).unwrap_err().contains("version"));
    }

    #[test]
    fn records_are_keyed_so_that_each_replaces_the_one_before() {
        let keys = GroupRecords.keys(&encode_batch(&all_records()), 0).unwrap();
        let commit = keys[0].key.clone().unwrap();
        assert!(!keys[0].tombstone);
        assert_ne!(keys[1].key, keys[0].key, "another group, same partition");
        assert_eq!(
            keys[2].key,
            Some(commit),
            "a deletion names the commit's key"
        );
        assert!(keys[2].tombstone);
        // Records without a key of their own get one no other record has: kept by the
        // cleaner, which removes keyless records.
        let own = |i: usize| {
            let mut k = vec![b'#'];
            k.extend_from_slice(&(i as i64).to_le_bytes());
            Some(Bytes::from(k))
        };
        assert_eq!(keys[3].key, own(3), "a group's whole deletion");
        assert!(!keys[3].tombstone);
        assert_eq!(keys[4].key, keys[5].key);
        assert!(!keys[4].tombstone && keys[5].tombstone);
        assert_eq!((keys[6].key.clone(), keys[7].key.clone()), (own(6), own(7)));
        assert_eq!(keys[8].key, keys[9].key);
        assert!(keys[9].tombstone);
        assert_ne!(
            keys[4].key, keys[8].key,
            "group g and transactional id tx differ"
        );
    }

    #[test]
    fn a_retained_batch_keeps_its_records_offsets() {
        let records = all_records();
        let data = encode_batch(&records);
        let kept = GroupRecords
            .retain(&data, 10, &|o| o == 12 || o == 15)
            .unwrap();
        assert_eq!((kept.base_offset, kept.last_offset), (12, 15));
        let decoded = decode_batch(&kept.encoded, kept.base_offset).unwrap();
        assert_eq!(
            decoded,
            vec![(12, records[2].clone()), (15, records[5].clone())]
        );
        assert!(GroupRecords.retain(&data, 10, &|_| false).is_err());
    }

    /// A small random history over a few keys.
    fn history(seed: u64) -> Vec<Vec<Record>> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move |n: u64| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
        };
        let mut value: i64 = 0;
        (0..40)
            .map(|_| {
                (0..1 + next(4))
                    .map(|_| {
                        value += 1;
                        let group = ["a", "b", "c"][next(3) as usize].to_string();
                        let tp = TopicPartition::new("t", next(3) as u32);
                        match next(12) {
                            0 => Record::DeleteOffset { group, tp },
                            1 => Record::GroupTombstone { group },
                            2 => {
                                let mut g = sample_group();
                                g.group_id = group;
                                Record::Group(g)
                            }
                            3 => Record::TransactionTombstone { id: group },
                            4 => {
                                let mut t = sample_transaction();
                                t.transactional_id = group;
                                t.last_update_ms = value as u64;
                                Record::Transaction(t)
                            }
                            _ => Record::Commit {
                                group,
                                tp,
                                offset: OffsetAndMetadata::new(value),
                            },
                        }
                    })
                    .collect()
            })
            .collect()
    }

    fn state(records: impl IntoIterator<Item = Record>) -> Live {
        let mut live = Live::default();
        for r in records {
            live.apply(r);
        }
        live
    }

    fn same(a: &Live, b: &Live) -> bool {
        a.offsets == b.offsets && a.groups == b.groups && a.transactions == b.transactions
    }

    /// The group log's batches in a segment log partition with 1 KiB segments, compacted at
    /// random points (tombstones dropped once a day has passed): what is left replays to the
    /// state the whole history replays to, and it is smaller.
    #[tokio::test]
    async fn the_compacted_partition_replays_to_the_same_state() {
        let tp = TopicPartition::new("__consumer_offsets", 0);
        let mut shrunk = 0;
        for seed in 0..30 {
            let clock = ManualClock::new();
            let log = SegmentLog::builder("/data")
                .clock(Arc::new(clock.clone()))
                .segment_bytes(1024)
                .open_with_fs(SimFs::new())
                .unwrap();
            log.create_topic("__consumer_offsets", 1).await.unwrap();
            let batches = history(seed);
            let mut appended = Vec::new();
            for (i, batch) in batches.iter().enumerate() {
                let data = encode_batch(batch);
                let new = batch.iter().map(|_| NewRecord::new(&b""[..])).collect();
                log.append_encoded(&tp, new, Box::new(move |_| Bytes::from(data)))
                    .await
                    .unwrap();
                appended.extend(batch.iter().cloned());
                if i % 7 == 6 {
                    clock.advance(13 * 3600 * 1000);
                    let mut policy = CompactionPolicy::at(Clock::now_ms(&clock) as i64);
                    policy.min_cleanable_dirty_ratio = 0.0;
                    log.compact(&tp, &policy, Arc::new(GroupRecords))
                        .await
                        .unwrap();
                }
            }
            let (start, end) = log.bounds(&tp).await.unwrap();
            let read = log.read_batches(&tp, start, usize::MAX).await.unwrap();
            assert_eq!(read.batches.last().unwrap().last_offset() + 1, end);
            let mut kept = Vec::new();
            let mut by_offset = BTreeMap::new();
            for b in &read.batches {
                for (o, r) in decode_batch(b.encoded().unwrap(), b.base_offset()).unwrap() {
                    by_offset.insert(o, r.clone());
                    kept.push(r);
                }
            }
            assert_eq!(
                by_offset.len(),
                kept.len(),
                "seed {seed}: each offset read once"
            );
            for (o, r) in &by_offset {
                assert_eq!(&appended[*o as usize], r, "seed {seed}: offset {o} moved");
            }
            shrunk += u64::from(kept.len() < appended.len());
            assert!(
                same(&state(kept), &state(appended)),
                "seed {seed}: the compacted partition replays to another state"
            );
        }
        assert!(
            shrunk >= 25,
            "compaction removed records in {shrunk} of 30 histories"
        );
    }
}
