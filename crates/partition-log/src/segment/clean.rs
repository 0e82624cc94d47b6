//! Compaction of one partition's closed segments (see [`crate::compaction`]): Kafka's log
//! cleaner, consecutive small segments cleaned into one file.
//!
//! The compactable segments are the closed ones below the stable offset whose records have
//! all passed the minimum lag; the dirty ones, those written since the last pass (the
//! cleaner checkpoint). The decisions are `crate::cleaning`'s, shared with the memory log.
//! Offsets never change: a batch that loses records is stored as a version 1 frame listing
//! the offsets it still holds, one that loses all is dropped. The log start never moves for
//! compaction, and the active segment is never touched.
//!
//! ## Groups
//!
//! The segments a pass rewrites (from the one holding the log start to the last one whose
//! keys it mapped) are cleaned in groups, as Kafka's `groupSegmentsBySize`: consecutive
//! segments whose sizes before the pass add up to at most the partition's segment size (a
//! larger segment is a group of its own), and whose offsets span at most `u32::MAX` from the
//! group's base (Kafka's bound for its relative offset index; our frames store offset deltas
//! from each batch's own base, so they would not need it, but it costs nothing and keeps a
//! per-segment relative index possible). A group's batches are written into one file named
//! after its first segment; a segment compaction emptied is merged into its group's output,
//! so a partition compacted often (a segment rolled before each pass) keeps about as many
//! files as its live data fills. A group of one segment whose batches all stay is left as
//! it is. What a group keeps is held in memory while it is written (at most a segment's
//! size, as before grouping, when a segment was).
//!
//! ## Crash safety
//!
//! A group's output is written into `<first>.log.cleaned` and synced; a leftover `.cleaned`
//! file is removed at open (the segments it was made from are whole, and a later pass does
//! it again). Then, under the partition's state lock and only if the group's segments are
//! all still in the index unchanged (retention or `DeleteRecords` may have removed some;
//! otherwise the output is removed):
//!
//! - one segment: the `.cleaned` file is renamed over it (the commit point);
//! - several: it is renamed to `<first>.log.<end>.swap` (the commit point), where `end` is
//!   the base of the segment after the group, so the swap's name says which segments it
//!   replaces: those whose base is in `first..end`. The index takes the merged segment;
//!   then the directory is synced (the swap's name durable before any segment goes), the
//!   other segments' files are removed, the directory is synced (they are gone before the
//!   swap takes the first one's name), and the swap is renamed over `<first>.log`. The
//!   directory is synced once more at the end of the pass.
//!
//! Recovery at open (`recover_swaps`, before the segments are scanned): a swap whose range
//! is wholly below the checkpointed log start is removed with the segments left in its
//! range (retention deleted the merged segment before the swap was finished); any other swap
//! is checked (its name's range not overlapping another swap's, the segment at `end`
//! present, every frame whole and below `end`), then finished as above: the segments in its
//! range removed and the swap renamed over the first. A swap that fails a check is refused
//! with an error naming it, before any segment is removed. If a step after the commit point
//! fails while the log runs, the pass reports the error with the index already holding the
//! merged segment, and the next pass finishes the swap before anything else (or removes
//! it, if its merged segment has been deleted since).
//!
//! Deliberate differences from Kafka: the swap's name carries the end of the range it
//! replaces, where Kafka's `LogLoader` replaces the segments overlapping the swap's own
//! offsets (from its base to the offset after its last batch): a group whose last segments
//! a pass emptied would then leave them behind (empty, or with their old batches if the
//! crash came before their removal); with the range in the name every segment of the group
//! goes. The replaced segments are removed at once with the directory synced between the
//! steps, where Kafka renames them to `.deleted` and deletes them later; a swap is finished
//! under the state lock, so appends and reads wait for its two directory syncs (Kafka holds
//! its log lock for the replacement too).
//!
//! Appends and reads go on during the rest of a pass: only the active segment takes
//! appends, and a read that began before a swap reads the old files through their open
//! handles.

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, TryLockError};

use coordinator_core::LogError;
use tracing::{info, warn};

use super::files::{self, storage};
use super::frame::{self, Head, VERSION_SPARSE};
use super::partition::{recover_segment, Entry, Partition, Segment, CLEANED};
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
    ///
    /// `segment_bytes` is the partition's segment size: a group of segments cleaned into one
    /// file holds at most that many bytes before the pass.
    pub(crate) fn compact(
        &self,
        policy: &CompactionPolicy,
        format: &dyn RecordFormat,
        segment_bytes: u64,
        mark: impl FnOnce(i64) -> Result<(), LogError>,
    ) -> Result<Compaction, LogError> {
        let mut first_dirty = match self.cleaner.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Ok(Compaction::default()),
        };
        // A swap an earlier pass committed but could not finish (a failed removal, rename or
        // directory sync) is finished before anything else is written.
        self.finish_swaps()?;
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
        if pass.undecided() {
            // The markers of transactions the compactable segments leave open, from the
            // batches after them, up to the high watermark.
            let last = compactable.last().map_or(i64::MIN, |c| c.next_base - 1);
            'after: for segment in self.segments_after(last) {
                for e in &segment.entries {
                    if !pass.undecided() {
                        break 'after;
                    }
                    let frame = segment.frame(&*self.fs, e)?;
                    pass.learn_after(e.head.base_offset, &frame[e.head.data_start() as usize..]);
                }
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
        let cleaned = &compactable[..mapped];
        for range in groups(cleaned, segment_bytes) {
            let group = &cleaned[range];
            let Some((entries, size, removed, file)) = self.rewrite(group, &mut pass)? else {
                continue;
            };
            if self.swap(group, entries, size, file)? {
                done.segments += group.len();
                done.bytes_before += group.iter().map(|c| c.size).sum::<u64>();
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

    /// The segments holding batches after offset `last`, the active one included, each with
    /// only those batches and only up to the high watermark (a batch past it may still be
    /// cut back), as they are now.
    fn segments_after(&self, last: i64) -> Vec<Closed<F>> {
        let s = self.read();
        let end = s.end;
        let mut out = Vec::new();
        for (i, seg) in s.segments.iter().enumerate() {
            let next_base = s.segments.get(i + 1).map_or(end, |n| n.base_offset);
            if next_base <= last.saturating_add(1) {
                continue;
            }
            let entries: Vec<Entry> = seg
                .entries
                .iter()
                .filter(|e| e.head.base_offset > last && e.head.last_offset() < end)
                .cloned()
                .collect();
            out.push(Closed {
                base_offset: seg.base_offset,
                next_base,
                path: seg.path.clone(),
                file: seg.file.clone(),
                size: seg.size,
                entries,
            });
        }
        out
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

    /// Writes the segments of `group` compacted into one `.cleaned` file named after the
    /// first, synced. Returns its entries, its size, the records left out and the file, or
    /// `None` if nothing changes (a group of one segment whose batches all stay as they are).
    #[allow(clippy::type_complexity)]
    fn rewrite(
        &self,
        group: &[Closed<F>],
        pass: &mut Cleaning<'_>,
    ) -> Result<Option<(Vec<Entry>, u64, u64, F::File)>, LogError> {
        let Some(first) = group.first() else {
            return Ok(None);
        };
        let batches = group.iter().map(|c| c.entries.len()).sum();
        let mut frames: Vec<(Head, Vec<u8>)> = Vec::with_capacity(batches);
        // Merged segments are written even if each batch stays: the files become one.
        let mut changed = group.len() > 1;
        let mut removed = 0u64;
        for (segment, e) in group
            .iter()
            .flat_map(|c| c.entries.iter().map(move |e| (c, e)))
        {
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
        let path = cleaned_path(&first.path);
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

    /// Puts the compacted `.cleaned` file in the place of the segments of `group`, if they
    /// are all still there unchanged; otherwise removes the file. Returns whether it was
    /// swapped.
    ///
    /// One segment: the `.cleaned` file is renamed over it (the commit point). Several: it is
    /// renamed to its swap name (the commit point), and the swap finished: the directory
    /// synced, the other segments' files removed, the directory synced, the swap file renamed
    /// over the first segment. The index takes the new segment at the commit point, so a
    /// step that fails after it leaves the index right and the swap to finish (by the next
    /// pass, or at open). All of it under the partition's state lock: retention and
    /// `DeleteRecords` remove segments under it, so they never see half a swap.
    fn swap(
        &self,
        group: &[Closed<F>],
        entries: Vec<Entry>,
        size: u64,
        file: F::File,
    ) -> Result<bool, LogError> {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            return Ok(false);
        };
        let cleaned = cleaned_path(&first.path);
        let mut s = self.write();
        let at = s
            .segments
            .iter()
            .position(|c| c.base_offset == first.base_offset && Arc::ptr_eq(&c.file, &first.file));
        let whole = at.filter(|&at| {
            s.segments.get(at..at + group.len()).is_some_and(|now| {
                now.iter()
                    .zip(group)
                    .all(|(c, g)| c.base_offset == g.base_offset && Arc::ptr_eq(&c.file, &g.file))
            })
        });
        let Some(at) = whole else {
            drop(s);
            warn!(file = %first.path.display(), segments = group.len(), "a segment went while it was compacted: the compaction is dropped");
            self.fs
                .remove_file(&cleaned)
                .map_err(|e| storage("remove the unused compaction", &cleaned, e))?;
            return Ok(false);
        };
        let merged = Segment {
            base_offset: first.base_offset,
            path: first.path.clone(),
            file: Arc::new(file),
            size,
            entries,
        };
        if group.len() == 1 {
            self.fs
                .rename(&cleaned, &first.path)
                .map_err(|e| storage("put the compacted segment in place of", &first.path, e))?;
            s.segments[at] = merged;
            return Ok(true);
        }
        let swap = self
            .dir
            .join(files::swap_name(first.base_offset, last.next_base));
        self.fs
            .rename(&cleaned, &swap)
            .map_err(|e| storage("commit the merged segment as", &swap, e))?;
        s.segments.splice(at..at + group.len(), [merged]);
        let others: Vec<PathBuf> = group[1..].iter().map(|c| c.path.clone()).collect();
        finish_swap(&*self.fs, &self.dir, &swap, &first.path, &others)?;
        drop(s);
        Ok(true)
    }

    /// Finishes the swaps left in the partition's directory by an earlier pass whose swap
    /// failed after its commit point: the index already holds the merged segment, unless
    /// retention or `DeleteRecords` has removed it since (then the swap's segments are all
    /// below the log start, and the swap and any file of its segments are removed).
    fn finish_swaps(&self) -> Result<(), LogError> {
        let listing = self
            .fs
            .list_dir(&self.dir)
            .map_err(|e| storage("list", &self.dir, e))?;
        let names: Vec<&str> = listing.iter().filter_map(|n| n.to_str()).collect();
        let swaps: Vec<(i64, i64, &str)> = names
            .iter()
            .filter_map(|n| files::parse_swap_name(n).map(|(first, end)| (first, end, *n)))
            .collect();
        if swaps.is_empty() {
            return Ok(());
        }
        let s = self.write();
        for (first, end, name) in swaps {
            let swap = self.dir.join(name);
            let covered = |from: i64| -> Vec<PathBuf> {
                names
                    .iter()
                    .filter_map(|n| files::parse_segment_name(n))
                    .filter(|b| (from..end).contains(b))
                    .map(|b| self.dir.join(files::segment_name(b)))
                    .collect()
            };
            let first_path = self.dir.join(files::segment_name(first));
            if s.segments.iter().any(|c| c.base_offset == first) {
                warn!(file = %swap.display(), "an unfinished swap of merged segments: finished");
                finish_swap(
                    &*self.fs,
                    &self.dir,
                    &swap,
                    &first_path,
                    &covered(first + 1),
                )?;
            } else {
                warn!(file = %swap.display(), "an unfinished swap of segments deleted since: removed");
                for path in covered(first).iter().chain([&swap]) {
                    remove_if_there(&*self.fs, path)?;
                }
            }
        }
        drop(s);
        files::sync_dir(&*self.fs, &self.dir)
    }
}

/// Consecutive segments cleaned into one file each, as Kafka's `groupSegmentsBySize`: a
/// group takes segments while their sizes add up to at most `max_bytes` (a segment larger
/// than that is a group of its own) and its offsets span at most `u32::MAX` past its base.
fn groups<F: Fs>(segments: &[Closed<F>], max_bytes: u64) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(first) = segments.get(from) {
        let mut size = first.size;
        let mut to = from + 1;
        while let Some(next) = segments.get(to) {
            let fits = size.saturating_add(next.size) <= max_bytes;
            let span = next
                .next_base
                .saturating_sub(1)
                .saturating_sub(first.base_offset);
            if !fits || span > i64::from(u32::MAX) {
                break;
            }
            size += next.size;
            to += 1;
        }
        out.push(from..to);
        from = to;
    }
    out
}

/// Finishes a committed swap: syncs the directory (the swap's name is durable before any
/// segment goes), removes the files of `others` and syncs again (they are gone before the
/// swap takes the first segment's name: a restart finds the swap, or the merged segment
/// alone), then renames `swap` over `first`. The caller syncs the directory after.
pub(super) fn finish_swap<F: Fs>(
    fs: &F,
    dir: &Path,
    swap: &Path,
    first: &Path,
    others: &[PathBuf],
) -> Result<(), LogError> {
    files::sync_dir(fs, dir)?;
    for path in others {
        remove_if_there(fs, path)?;
    }
    if !others.is_empty() {
        files::sync_dir(fs, dir)?;
    }
    fs.rename(swap, first)
        .map_err(|e| storage("put the merged segment in place of", first, e))
}

/// Removes the segment file `path`; one already gone is not an error.
fn remove_if_there<F: Fs>(fs: &F, path: &Path) -> Result<(), LogError> {
    match fs.remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(storage("remove the merged segment", path, e))
        }
        _ => Ok(()),
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

/// Recovery at open of the swaps in a partition's directory (`dir`, whose segment files
/// have the base offsets `bases`; see the module docs): each replaces the segments whose
/// bases are in its range, and `bases` is left as the directory then is. A swap wholly
/// below the checkpointed log start is removed with its segments (retention deleted the
/// merged segment before the swap was finished). Overlapping swaps, a swap whose batches
/// run past its range and a damaged swap are refused, naming the file, before any segment
/// is removed.
pub(super) fn recover_swaps<F: Fs>(
    fs: &F,
    dir: &Path,
    mut swaps: Vec<(i64, i64, PathBuf)>,
    bases: &mut Vec<i64>,
    checkpoint: Option<i64>,
    cleaned: i64,
) -> Result<(), LogError> {
    if swaps.is_empty() {
        return Ok(());
    }
    swaps.sort_by_key(|s| s.0);
    for pair in swaps.windows(2) {
        if pair[1].0 < pair[0].1 {
            return Err(files::malformed(
                &pair[1].2,
                format!("it overlaps the swap `{}`", pair[0].2.display()),
            ));
        }
    }
    let path_of = |base: i64| dir.join(files::segment_name(base));
    for (first, end, swap) in &swaps {
        let (first, end) = (*first, *end);
        let covered: Vec<i64> = bases
            .iter()
            .copied()
            .filter(|b| (first..end).contains(b))
            .collect();
        if checkpoint.is_some_and(|start| start >= end) {
            warn!(file = %swap.display(), "a swap of merged segments below the log start: removed with them");
            for path in covered.iter().map(|b| path_of(*b)).chain([swap.clone()]) {
                remove_if_there(fs, &path)?;
            }
        } else {
            // The segment after the merged ones is there until the merged segment is
            // deleted (retention deletes from the oldest); a swap is written and synced
            // before its commit, so it is whole: both checked before a segment goes.
            if !bases.contains(&end) {
                return Err(files::malformed(
                    swap,
                    format!("the segment at offset {end}, which follows the segments it replaces, is missing"),
                ));
            }
            let merged = recover_segment(fs, swap.clone(), first, None, cleaned)?;
            if let Some(last) = merged.entries.last().map(|e| e.head.last_offset()) {
                if last >= end {
                    return Err(files::malformed(
                        swap,
                        format!(
                            "it holds offset {last}, past the segments it replaces (below {end})"
                        ),
                    ));
                }
            }
            drop(merged);
            warn!(file = %swap.display(), segments = covered.len(), "a committed merge of segments: finished");
            let others: Vec<PathBuf> = covered
                .iter()
                .filter(|b| **b != first)
                .map(|b| path_of(*b))
                .collect();
            finish_swap(fs, dir, swap, &path_of(first), &others)?;
        }
        bases.retain(|b| !covered.contains(b));
        if checkpoint.is_none_or(|start| start < end) {
            bases.push(first);
        }
    }
    files::sync_dir(fs, dir)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::fs::sim::SimFs;

    /// Closed segments of these `(base, size)`, the last one's next base 10 past its base.
    fn closed(fs: &SimFs, segments: &[(i64, u64)]) -> Vec<Closed<SimFs>> {
        let file = Arc::new(fs.create_temp(Path::new("/s")).unwrap());
        segments
            .iter()
            .enumerate()
            .map(|(i, &(base_offset, size))| Closed {
                base_offset,
                next_base: segments.get(i + 1).map_or(base_offset + 10, |n| n.0),
                path: PathBuf::from(files::segment_name(base_offset)),
                file: file.clone(),
                size,
                entries: Vec::new(),
            })
            .collect()
    }

    #[test]
    fn groups_hold_at_most_the_segment_size_and_a_u32_offset_span() {
        let fs = SimFs::new();
        let sizes = [
            (0, 2000),
            (10, 100),
            (20, 200),
            (30, 700),
            (40, 100),
            (50, 0),
            (60, 0),
        ];
        assert_eq!(
            groups(&closed(&fs, &sizes), 1024),
            [0..1, 1..4, 4..7],
            "a segment larger than the size alone, then as many as fit"
        );
        assert!(groups(&closed(&fs, &[]), 1024).is_empty());
        let max = i64::from(u32::MAX);
        // The second segment ends at max: the span from 0 fits; the third one's does not.
        let far = [(0, 1), (5, 1), (max + 1, 1), (max + 2, 1)];
        assert_eq!(groups(&closed(&fs, &far), 1024), [0..2, 2..4]);
    }
}
