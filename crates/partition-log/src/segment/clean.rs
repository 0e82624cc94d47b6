//! Compaction of one partition's closed segments (see [`crate::compaction`]): Kafka's log
//! cleaner, one segment file rewritten at a time.
//!
//! A pass maps the latest offset of every key written in the *dirty* segments (those written
//! since the last pass), then rewrites every compactable segment from the log start keeping
//! a record unless a later record has its key, or it is a tombstone whose delete horizon has
//! passed. A kept tombstone's batch gets its horizon (`now + delete.retention.ms`) at the
//! first pass that keeps it. Offsets never change: a batch that loses records is stored as a
//! version 1 frame listing the offsets it still holds, one that loses all is dropped, and a
//! segment that loses all its batches stays as an empty file (so every segment keeps its
//! name and the log start never moves for compaction).
//!
//! Transactions, as Kafka's cleaner treats them: a pass first reads which marker decided
//! each transactional batch of the compactable segments. An aborted transaction's records
//! are removed; a committed one's take part as plain records; one undecided within the
//! compactable segments is kept whole. A marker goes once no record of its transaction is
//! left and its delete horizon (set by the first pass that finds it alone) has passed.
//!
//! A segment is rewritten into `<name>.cleaned`, synced, and renamed over the segment (the
//! rename is the commit point; a leftover `.cleaned` file is removed at open). Appends and
//! reads go on meanwhile: only the active segment takes appends, and a read that began
//! before the swap reads the old file through its open handle. The swap happens under the
//! partition's lock only if the segment is still there (retention may have deleted it).

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, TryLockError};

use coordinator_core::{Bytes, LogError};
use tracing::{info, warn};

use super::files::{self, storage};
use super::frame::{self, Head, VERSION_SPARSE};
use super::partition::{Entry, Partition, CLEANED};
use crate::compaction::{BatchKind, Compaction, CompactionPolicy, RecordFormat};

/// A closed segment as a pass sees it.
struct Closed {
    base_offset: i64,
    /// The next segment's base: every offset of this one is below it.
    next_base: i64,
    path: PathBuf,
    file: Arc<File>,
    size: u64,
    entries: Vec<Entry>,
}

impl Closed {
    fn max_timestamp(&self) -> Option<i64> {
        self.entries.iter().map(|e| e.head.max_timestamp).max()
    }

    fn frame(&self, e: &Entry) -> Result<Vec<u8>, LogError> {
        let mut buf = vec![0; e.head.len() as usize];
        self.file
            .read_exact_at(&mut buf, e.position)
            .map_err(|err| storage("read", &self.path, err))?;
        Ok(buf)
    }
}

/// The latest offset of each key of the dirty segments, bounded by its key bytes.
#[derive(Default)]
struct OffsetMap {
    latest: HashMap<Bytes, i64>,
    key_bytes: usize,
}

impl OffsetMap {
    fn put(&mut self, key: Bytes, offset: i64) {
        let len = key.len();
        if self.latest.insert(key, offset).is_none() {
            self.key_bytes = self.key_bytes.saturating_add(len);
        }
    }

    /// Whether a later record has `key` than the one at `offset`.
    fn superseded(&self, key: &[u8], offset: i64) -> bool {
        self.latest.get(key).is_some_and(|latest| *latest > offset)
    }
}

impl Partition {
    /// One compaction pass under `policy` (see the module docs). Returns at once, having done
    /// nothing, if a pass is already running on this partition.
    ///
    /// `mark` records durably how far the pass compacts, before any segment is swapped in.
    pub(crate) fn compact(
        &self,
        policy: &CompactionPolicy,
        format: &dyn RecordFormat,
        mark: impl FnOnce(i64) -> Result<(), LogError>,
    ) -> Result<Compaction, LogError> {
        let mut first_dirty = match self.cleaner.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Ok(Compaction::default()),
        };
        let (log_start, closed) = self.closed_segments();
        // Compactable: closed segments below the stable offset whose records are all older
        // than the minimum lag, from the one holding the log start.
        let lag_ok = |c: &Closed| {
            c.max_timestamp()
                .is_none_or(|t| policy.now_ms.saturating_sub(t) >= policy.min_compaction_lag_ms)
        };
        let upto = closed
            .iter()
            .take_while(|c| c.next_base <= policy.stable_offset && lag_ok(c))
            .count();
        let from = closed[..upto]
            .iter()
            .take_while(|c| c.next_base <= log_start)
            .count();
        let compactable = &closed[from..upto];
        let dirty_start = (*first_dirty).max(log_start);
        let nothing = Compaction {
            cleaned_up_to: *first_dirty,
            ..Compaction::default()
        };
        let Some(dirty) = compactable.iter().position(|c| c.next_base > dirty_start) else {
            return Ok(nothing);
        };
        let total: u64 = compactable.iter().map(|c| c.size).sum();
        let dirty_bytes: u64 = compactable[dirty..].iter().map(|c| c.size).sum();
        let ratio = if total == 0 {
            0.0
        } else {
            dirty_bytes as f64 / total as f64
        };
        let oldest_dirty = compactable[dirty]
            .entries
            .iter()
            .map(|e| e.head.max_timestamp)
            .min();
        let overdue = oldest_dirty
            .is_some_and(|t| policy.now_ms.saturating_sub(t) > policy.max_compaction_lag_ms);
        if ratio <= policy.min_cleanable_dirty_ratio && !overdue {
            return Ok(nothing);
        }

        // Which marker decided each transactional batch.
        let mut txns = Transactions::read(compactable, format)?;

        // The latest offset of each key written in the dirty segments, up to the bound.
        let mut map = OffsetMap::default();
        let mut mapped = dirty;
        for segment in &compactable[dirty..] {
            for e in &segment.entries {
                if e.head.last_offset() < dirty_start {
                    continue;
                }
                let frame = segment.frame(e)?;
                let data = &frame[e.head.data_start() as usize..];
                let takes_part = match format.kind(data) {
                    BatchKind::Plain => true,
                    BatchKind::Transactional { .. } => txns.committed(e.head.base_offset),
                    BatchKind::Marker { .. } | BatchKind::Unknown => false,
                };
                if !takes_part {
                    continue;
                }
                for r in format.keys(data, e.head.base_offset).unwrap_or_default() {
                    if let Some(key) = r.key {
                        map.put(key, r.offset);
                    }
                }
            }
            mapped += 1;
            if map.key_bytes > policy.max_key_bytes {
                break;
            }
        }
        let cleaned_up_to = compactable[mapped - 1].next_base;

        mark(cleaned_up_to)?;
        let mut done = Compaction {
            cleaned_up_to,
            ..Compaction::default()
        };
        for segment in &compactable[..mapped] {
            let Some((entries, size, removed, file)) =
                self.rewrite(segment, &map, policy, format, &mut txns)?
            else {
                continue;
            };
            if self.swap(segment, entries, size, file)? {
                done.segments += 1;
                done.bytes_before += segment.size;
                done.bytes_after += size;
                done.records_removed += removed;
            }
        }
        if done.segments > 0 {
            files::sync_dir(&self.dir)?;
            info!(
                partition = %self.tp,
                segments = done.segments,
                bytes_before = done.bytes_before,
                bytes_after = done.bytes_after,
                records_removed = done.records_removed,
                cleaned_up_to,
                "compacted"
            );
        }
        *first_dirty = cleaned_up_to;
        Ok(done)
    }

    /// The log start and the closed segments, as they are now.
    fn closed_segments(&self) -> (i64, Vec<Closed>) {
        let s = self.read();
        let closed = s
            .segments
            .windows(2)
            .map(|pair| Closed {
                base_offset: pair[0].base_offset,
                next_base: pair[1].base_offset,
                path: pair[0].path.clone(),
                file: pair[0].file.clone(),
                size: pair[0].size,
                entries: pair[0].entries.clone(),
            })
            .collect();
        (s.log_start, closed)
    }

    /// Writes `segment` compacted into its `.cleaned` file, synced. Returns its entries, its
    /// size, the records left out and the file, or `None` if nothing changes.
    #[allow(clippy::type_complexity)]
    fn rewrite(
        &self,
        segment: &Closed,
        map: &OffsetMap,
        policy: &CompactionPolicy,
        format: &dyn RecordFormat,
        txns: &mut Transactions,
    ) -> Result<Option<(Vec<Entry>, u64, u64, File)>, LogError> {
        let mut frames: Vec<(Head, Vec<u8>)> = Vec::with_capacity(segment.entries.len());
        let mut changed = false;
        let mut removed = 0u64;
        for e in &segment.entries {
            let frame = segment.frame(e)?;
            match compact_frame(&e.head, &frame, map, policy, format, txns) {
                Outcome::Same => frames.push((e.head, frame)),
                Outcome::Dropped => {
                    changed = true;
                    removed += u64::from(e.head.count);
                }
                Outcome::Rewritten(head, bytes) => {
                    changed = true;
                    removed += u64::from(e.head.count - head.count);
                    frames.push((head, bytes));
                }
            }
        }
        if !changed {
            return Ok(None);
        }
        let path = cleaned_path(&segment.path);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| storage("create the compacted segment", &path, e))?;
        let mut out = BufWriter::with_capacity(1 << 20, &file);
        let mut entries = Vec::with_capacity(frames.len());
        let mut position = 0u64;
        for (head, bytes) in &frames {
            out.write_all(bytes)
                .map_err(|e| storage("write the compacted segment", &path, e))?;
            entries.push(Entry {
                head: *head,
                position,
            });
            position += bytes.len() as u64;
        }
        out.flush()
            .map_err(|e| storage("write the compacted segment", &path, e))?;
        drop(out);
        file.sync_data()
            .map_err(|e| storage("fdatasync", &path, e))?;
        Ok(Some((entries, position, removed, file)))
    }

    /// Puts the compacted `.cleaned` file in `segment`'s place, if the segment is still
    /// there unchanged; otherwise removes the file. Returns whether it was swapped.
    fn swap(
        &self,
        segment: &Closed,
        entries: Vec<Entry>,
        size: u64,
        file: File,
    ) -> Result<bool, LogError> {
        let cleaned = cleaned_path(&segment.path);
        let mut s = self.write();
        let Some(current) = s
            .segments
            .iter_mut()
            .find(|c| c.base_offset == segment.base_offset && Arc::ptr_eq(&c.file, &segment.file))
        else {
            drop(s);
            warn!(file = %segment.path.display(), "the segment went while it was compacted: the compaction is dropped");
            fs::remove_file(&cleaned)
                .map_err(|e| storage("remove the unused compaction", &cleaned, e))?;
            return Ok(false);
        };
        fs::rename(&cleaned, &segment.path)
            .map_err(|e| storage("put the compacted segment in place of", &segment.path, e))?;
        current.file = Arc::new(file);
        current.entries = entries;
        current.size = size;
        Ok(true)
    }
}

/// What compaction made of one frame.
enum Outcome {
    Same,
    Dropped,
    Rewritten(Head, Vec<u8>),
}

/// The transactions of the compactable segments, as their markers decided them.
#[derive(Default)]
struct Transactions {
    /// Each transactional batch (by base offset): its marker's offset, and whether it
    /// committed.
    fate: HashMap<i64, (i64, bool)>,
    /// Each marker (by offset): how many batches of its transaction are still stored.
    left: HashMap<i64, usize>,
}

impl Transactions {
    fn read(segments: &[Closed], format: &dyn RecordFormat) -> Result<Transactions, LogError> {
        let mut txns = Transactions::default();
        let mut open: HashMap<i64, Vec<i64>> = HashMap::new();
        for segment in segments {
            for e in &segment.entries {
                let frame = segment.frame(e)?;
                match format.kind(&frame[e.head.data_start() as usize..]) {
                    BatchKind::Transactional { producer_id } => {
                        open.entry(producer_id)
                            .or_default()
                            .push(e.head.base_offset);
                    }
                    BatchKind::Marker {
                        producer_id,
                        commit,
                    } => {
                        let batches = open.remove(&producer_id).unwrap_or_default();
                        txns.left.insert(e.head.base_offset, batches.len());
                        for b in batches {
                            txns.fate.insert(b, (e.head.base_offset, commit));
                        }
                    }
                    BatchKind::Plain | BatchKind::Unknown => {}
                }
            }
        }
        Ok(txns)
    }

    fn committed(&self, batch: i64) -> bool {
        self.fate.get(&batch).is_some_and(|(_, commit)| *commit)
    }

    /// A batch of the transaction `marker` ended is gone.
    fn removed(&mut self, marker: i64) {
        if let Some(n) = self.left.get_mut(&marker) {
            *n = n.saturating_sub(1);
        }
    }
}

/// Compacts one stored frame (see the module docs); a batch the format cannot rewrite is
/// kept as it is.
fn compact_frame(
    head: &Head,
    frame: &[u8],
    map: &OffsetMap,
    policy: &CompactionPolicy,
    format: &dyn RecordFormat,
    txns: &mut Transactions,
) -> Outcome {
    let data = &frame[head.data_start() as usize..];
    match format.kind(data) {
        BatchKind::Unknown => Outcome::Same,
        BatchKind::Plain => compact_records(head, frame, map, policy, format),
        BatchKind::Transactional { .. } => match txns.fate.get(&head.base_offset).copied() {
            None => Outcome::Same, // undecided within the pass: kept whole
            Some((marker, false)) => {
                txns.removed(marker);
                Outcome::Dropped
            }
            Some((marker, true)) => {
                let outcome = compact_records(head, frame, map, policy, format);
                if matches!(outcome, Outcome::Dropped) {
                    txns.removed(marker);
                }
                outcome
            }
        },
        BatchKind::Marker { .. } => {
            if txns.left.get(&head.base_offset) != Some(&0) {
                return Outcome::Same; // records of its transaction are left
            }
            match frame::delete_horizon(head, frame) {
                Some(h) if policy.now_ms >= h => Outcome::Dropped,
                Some(_) => Outcome::Same,
                None => {
                    let horizon = policy.now_ms.saturating_add(policy.delete_retention_ms);
                    let index = head
                        .records(&frame[head.index_start() as usize..head.data_start() as usize]);
                    sparse(
                        head.base_offset,
                        head.last_offset(),
                        Some(horizon),
                        &index,
                        data,
                    )
                    .map_or(Outcome::Same, |(h, bytes)| Outcome::Rewritten(h, bytes))
                }
            }
        }
    }
}

/// The records of a batch that takes part: each kept unless a later record has its key or
/// it is a tombstone past its delete horizon.
fn compact_records(
    head: &Head,
    frame: &[u8],
    map: &OffsetMap,
    policy: &CompactionPolicy,
    format: &dyn RecordFormat,
) -> Outcome {
    let data = &frame[head.data_start() as usize..];
    let index = head.records(&frame[head.index_start() as usize..head.data_start() as usize]);
    let Some(records) = format.keys(data, head.base_offset) else {
        return Outcome::Same;
    };
    let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
    let stored: Vec<i64> = index.iter().map(|(o, _)| *o).collect();
    if offsets != stored {
        warn!(
            base_offset = head.base_offset,
            "a batch whose records do not match its stored offsets: kept as it is"
        );
        return Outcome::Same;
    }
    let horizon = frame::delete_horizon(head, frame);
    let mut kept = HashSet::with_capacity(records.len());
    let mut kept_tombstone = false;
    for r in &records {
        let superseded = r.key.as_ref().is_some_and(|k| map.superseded(k, r.offset));
        let expired = r.tombstone && horizon.is_some_and(|h| policy.now_ms >= h);
        if !superseded && !expired {
            kept.insert(r.offset);
            kept_tombstone |= r.tombstone;
        }
    }
    if kept.is_empty() {
        return Outcome::Dropped;
    }
    let new_horizon = if kept_tombstone {
        Some(horizon.unwrap_or_else(|| policy.now_ms.saturating_add(policy.delete_retention_ms)))
    } else {
        None
    };
    let retained_index: Vec<(i64, i64)> = index
        .iter()
        .copied()
        .filter(|(o, _)| kept.contains(o))
        .collect();
    let (base, last, bytes) = if kept.len() == records.len() {
        if new_horizon == horizon {
            return Outcome::Same;
        }
        (head.base_offset, head.last_offset(), Bytes::from(data))
    } else {
        match format.retain(data, head.base_offset, &|o| kept.contains(&o)) {
            Ok(r) => (r.base_offset, r.last_offset, r.encoded),
            Err(reason) => {
                warn!(base_offset = head.base_offset, %reason, "a batch that cannot be rewritten: kept as it is");
                return Outcome::Same;
            }
        }
    };
    let first_kept = retained_index.first().map_or(base, |r| r.0);
    let last_kept = retained_index.last().map_or(last, |r| r.0);
    if base > first_kept || last < last_kept {
        warn!(
            base_offset = head.base_offset,
            "a rewritten batch that does not cover its records: kept as it is"
        );
        return Outcome::Same;
    }
    sparse(base, last, new_horizon, &retained_index, &bytes)
        .map_or(Outcome::Same, |(h, bytes)| Outcome::Rewritten(h, bytes))
}

/// A version 1 frame and its header; `None` (logged) if it cannot be stored.
fn sparse(
    base: i64,
    last: i64,
    horizon: Option<i64>,
    records: &[(i64, i64)],
    data: &[u8],
) -> Option<(Head, Vec<u8>)> {
    match frame::encode_sparse(base, last, horizon, records, data) {
        Ok(bytes) => {
            let head = Head {
                base_offset: base,
                max_timestamp: records.iter().map(|r| r.1).max().unwrap_or(-1),
                len: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
                count: u32::try_from(records.len()).unwrap_or(u32::MAX),
                last_delta: u32::try_from(last - base).unwrap_or(u32::MAX),
                version: VERSION_SPARSE,
            };
            Some((head, bytes))
        }
        Err(e) => {
            warn!(base_offset = base, error = %e, "a batch that cannot be stored compacted: kept as it is");
            None
        }
    }
}

fn cleaned_path(segment: &std::path::Path) -> PathBuf {
    let mut name = segment.as_os_str().to_owned();
    name.push(CLEANED);
    PathBuf::from(name)
}
