//! Compaction of one partition's closed segments (see [`crate::compaction`]): Kafka's log
//! cleaner, one segment file rewritten at a time.
//!
//! The compactable segments are the closed ones below the stable offset whose records have
//! all passed the minimum lag; the dirty ones, those written since the last pass (the
//! cleaner checkpoint). The decisions are `crate::cleaning`'s, shared with the memory log.
//! Offsets never change: a batch that loses records is stored as a version 1 frame listing
//! the offsets it still holds, one that loses all is dropped, and a segment that loses all
//! its batches stays as an empty file (so every segment keeps its name and the log start
//! never moves for compaction).
//!
//! A segment is rewritten into `<name>.cleaned`, synced, and renamed over the segment (the
//! rename is the commit point; a leftover `.cleaned` file is removed at open). Appends and
//! reads go on meanwhile: only the active segment takes appends, and a read that began
//! before the swap reads the old file through its open handle. The swap happens under the
//! partition's lock only if the segment is still there (retention may have deleted it).

use std::path::PathBuf;
use std::sync::{Arc, TryLockError};

use coordinator_core::LogError;
use tracing::{info, warn};

use super::files::{self, storage};
use super::frame::{self, Head, VERSION_SPARSE};
use super::partition::{Entry, Partition, CLEANED};
use crate::cleaning::{self, Cleaning, Outcome, Rewrite, Stored};
use crate::compaction::{Compaction, CompactionPolicy, RecordFormat};
use crate::fs::Fs;

/// A closed segment as a pass sees it.
struct Closed<F: Fs> {
    base_offset: i64,
    /// The next segment's base: every offset of this one is below it.
    next_base: i64,
    path: PathBuf,
    file: Arc<F::File>,
    size: u64,
    entries: Vec<Entry>,
}

impl<F: Fs> Closed<F> {
    fn max_timestamp(&self) -> Option<i64> {
        self.entries.iter().map(|e| e.head.max_timestamp).max()
    }

    fn frame(&self, fs: &F, e: &Entry) -> Result<Vec<u8>, LogError> {
        let mut buf = vec![0; e.head.len() as usize];
        fs.read_at(&self.file, &mut buf, e.position)
            .map_err(|err| storage("read", &self.path, err))?;
        Ok(buf)
    }
}

impl<F: Fs> Partition<F> {
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
        let lag_ok = |c: &Closed<F>| cleaning::lag_passed(policy, c.max_timestamp());
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
        let oldest_dirty = compactable[dirty]
            .entries
            .iter()
            .map(|e| e.head.max_timestamp)
            .min();
        if !cleaning::due(policy, total, dirty_bytes, oldest_dirty) {
            return Ok(nothing);
        }

        // Which marker decided each transactional batch, then the latest offset of each key
        // written in the dirty segments, up to the bound.
        let mut pass = Cleaning::new(policy, format);
        for segment in compactable {
            for e in &segment.entries {
                let frame = segment.frame(&*self.fs, e)?;
                pass.learn(e.head.base_offset, &frame[e.head.data_start() as usize..]);
            }
        }
        let mut mapped = dirty;
        for segment in &compactable[dirty..] {
            for e in &segment.entries {
                if e.head.last_offset() < dirty_start {
                    continue;
                }
                let frame = segment.frame(&*self.fs, e)?;
                pass.map(e.head.base_offset, &frame[e.head.data_start() as usize..]);
            }
            mapped += 1;
            if pass.full() {
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
            let Some((entries, size, removed, file)) = self.rewrite(segment, &mut pass)? else {
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
            files::sync_dir(&*self.fs, &self.dir)?;
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
    fn closed_segments(&self) -> (i64, Vec<Closed<F>>) {
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
        segment: &Closed<F>,
        pass: &mut Cleaning<'_>,
    ) -> Result<Option<(Vec<Entry>, u64, u64, F::File)>, LogError> {
        let mut frames: Vec<(Head, Vec<u8>)> = Vec::with_capacity(segment.entries.len());
        let mut changed = false;
        let mut removed = 0u64;
        for e in &segment.entries {
            let frame = segment.frame(&*self.fs, e)?;
            let stored = Stored {
                base_offset: e.head.base_offset,
                last_offset: e.head.last_offset(),
                data: &frame[e.head.data_start() as usize..],
                index: e
                    .head
                    .records(&frame[e.head.index_start() as usize..e.head.data_start() as usize]),
                delete_horizon: frame::delete_horizon(&e.head, &frame),
            };
            let rewritten = match pass.decide(&stored) {
                Outcome::Same => None,
                Outcome::Dropped => {
                    changed = true;
                    removed += u64::from(e.head.count);
                    continue;
                }
                Outcome::Rewritten(r) => frame_of(&r),
            };
            drop(stored);
            match rewritten {
                Some((head, bytes)) => {
                    changed = true;
                    removed += u64::from(e.head.count.saturating_sub(head.count));
                    frames.push((head, bytes));
                }
                None => frames.push((e.head, frame)),
            }
        }
        if !changed {
            return Ok(None);
        }
        let path = cleaned_path(&segment.path);
        let fs = &*self.fs;
        let file = fs
            .create_temp(&path)
            .map_err(|e| storage("create the compacted segment", &path, e))?;
        // Written in chunks of about 1 MiB: one write per frame would be a system call each.
        let mut entries = Vec::with_capacity(frames.len());
        let mut position = 0u64;
        let mut chunk: Vec<u8> = Vec::with_capacity(1 << 20);
        for (head, bytes) in &frames {
            entries.push(Entry {
                head: *head,
                position,
            });
            position += bytes.len() as u64;
            chunk.extend_from_slice(bytes);
            if chunk.len() >= 1 << 20 {
                fs.write_all(&file, &chunk)
                    .map_err(|e| storage("write the compacted segment", &path, e))?;
                chunk.clear();
            }
        }
        if !chunk.is_empty() {
            fs.write_all(&file, &chunk)
                .map_err(|e| storage("write the compacted segment", &path, e))?;
        }
        fs.fsync(&file)
            .map_err(|e| storage("fdatasync", &path, e))?;
        Ok(Some((entries, position, removed, file)))
    }

    /// Puts the compacted `.cleaned` file in `segment`'s place, if the segment is still
    /// there unchanged; otherwise removes the file. Returns whether it was swapped.
    fn swap(
        &self,
        segment: &Closed<F>,
        entries: Vec<Entry>,
        size: u64,
        file: F::File,
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
            self.fs
                .remove_file(&cleaned)
                .map_err(|e| storage("remove the unused compaction", &cleaned, e))?;
            return Ok(false);
        };
        self.fs
            .rename(&cleaned, &segment.path)
            .map_err(|e| storage("put the compacted segment in place of", &segment.path, e))?;
        current.file = Arc::new(file);
        current.entries = entries;
        current.size = size;
        Ok(true)
    }
}

/// The version 1 frame of a batch a pass rewrote, and its header; `None` (logged) if it
/// cannot be stored.
fn frame_of(r: &Rewrite) -> Option<(Head, Vec<u8>)> {
    match frame::encode_sparse(
        r.base_offset,
        r.last_offset,
        r.delete_horizon,
        &r.index,
        &r.data,
    ) {
        Ok(bytes) => {
            let head = Head {
                base_offset: r.base_offset,
                max_timestamp: r.index.iter().map(|x| x.1).max().unwrap_or(-1),
                len: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
                count: u32::try_from(r.index.len()).unwrap_or(u32::MAX),
                last_delta: u32::try_from(r.last_offset - r.base_offset).unwrap_or(u32::MAX),
                version: VERSION_SPARSE,
            };
            Some((head, bytes))
        }
        Err(e) => {
            warn!(base_offset = r.base_offset, error = %e, "a batch that cannot be stored compacted: kept as it is");
            None
        }
    }
}

fn cleaned_path(segment: &std::path::Path) -> PathBuf {
    let mut name = segment.as_os_str().to_owned();
    name.push(CLEANED);
    PathBuf::from(name)
}
