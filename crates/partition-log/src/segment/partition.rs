//! One partition of the segment log: its segment files, the in-memory index, recovery,
//! appends, reads and the deletion of whole segments.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use coordinator_core::{Bytes, LogError, OutOfRange, TopicPartition};
use tracing::warn;

use super::clean;
use super::files::{self, storage, FileReader};
use super::frame::{Head, Scanner, Step};
use super::SyncObserver;
use crate::batch::Batch;
use crate::fs::Fs;
use crate::memory_log::BatchRead;

/// The index entry of one stored batch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub(crate) head: Head,
    /// Where the frame starts in its segment file.
    pub(crate) position: u64,
}

/// The suffix of a compaction's output before it replaces its segment.
pub(crate) const CLEANED: &str = ".cleaned";
/// The suffix of a compaction's committed output that replaces several segments (see the
/// `clean` module): `<first>.log.<end>.swap`.
pub(crate) const SWAP: &str = ".swap";

/// One segment file and the index of its batches.
#[derive(Debug)]
pub(crate) struct Segment<F: Fs> {
    pub(crate) base_offset: i64,
    pub(crate) path: PathBuf,
    pub(crate) file: Arc<F::File>,
    /// The bytes of whole frames (appends write here).
    pub(crate) size: u64,
    pub(crate) entries: Vec<Entry>,
}

impl<F: Fs> Segment<F> {
    /// The largest record timestamp in the segment, `None` when empty.
    pub(crate) fn max_timestamp(&self) -> Option<i64> {
        self.entries.iter().map(|e| e.head.max_timestamp).max()
    }

    fn create(fs: &F, dir: &Path, base_offset: i64) -> Result<Segment<F>, LogError> {
        let path = dir.join(files::segment_name(base_offset));
        let file = fs
            .create_temp(&path)
            .map_err(|e| storage("create the segment", &path, e))?;
        Ok(Segment {
            base_offset,
            path,
            file: Arc::new(file),
            size: 0,
            entries: Vec::new(),
        })
    }
}

/// A partition's bounds and segments (never empty: the last one is the active segment).
#[derive(Debug)]
pub(crate) struct State<F: Fs> {
    pub(crate) log_start: i64,
    /// The high watermark: every frame below it is durable under the policy and readable.
    pub(crate) end: i64,
    /// The end of the frames written; above `end` while their group sync runs.
    pub(crate) written_end: i64,
    /// Failed group syncs so far (cuts back of what was not durable): an appender written in
    /// an earlier epoch may have been cut back.
    pub(crate) failures: u64,
    /// The last failed sync's error, told to the appenders it cut back.
    pub(crate) last_failure: String,
    /// The last cuts back, at most [`CUTS_KEPT`]: the failure count each made, and the
    /// durable end when it ran (it removed every frame at or past it).
    pub(crate) cuts: std::collections::VecDeque<(u64, i64)>,
    pub(crate) segments: Vec<Segment<F>>,
}

impl<F: Fs> State<F> {
    /// What became of a frame written in failure epoch `epoch` and ending at `end`:
    /// `Some(true)` durable, `Some(false)` cut back, `None` still to be synced. A cut back
    /// removes every frame at or past the durable end of its moment, which only grows: the
    /// first cut after the frame was written (the one that made failure `epoch + 1`) removed
    /// it unless it was durable by then; a later cut may have let another frame take its
    /// offsets, so the durable end alone does not say. A cut older than the last
    /// [`CUTS_KEPT`] counts as having removed it (its appender hears an error: a retry may
    /// duplicate it, never lose it).
    fn frame_fate(&self, end: i64, epoch: u64) -> Option<bool> {
        if self.failures == epoch {
            return (self.end >= end).then_some(true);
        }
        let first = self.cuts.iter().find(|(n, _)| *n == epoch + 1);
        Some(first.is_some_and(|(_, cut_end)| *cut_end >= end))
    }

    fn active(&self) -> &Segment<F> {
        // Never empty: built with one segment, and the active one is never removed.
        &self.segments[self.segments.len() - 1]
    }

    fn out_of_range(&self, tp: &TopicPartition, offset: i64) -> LogError {
        LogError::OffsetOutOfRange(OutOfRange {
            partition: tp.clone(),
            offset,
            log_start: self.log_start,
            visible_end: self.end,
        })
    }

    /// The (segment, entry) holding the first batch with an offset `>= offset`; the entry may
    /// be past its segment's last (the batch is then the next non-empty segment's first).
    fn locate(&self, offset: i64) -> (usize, usize) {
        // A closed segment holds only offsets below the next one's base (compaction may leave
        // it with gaps, or empty).
        let seg = self.segments[1..].partition_point(|next| next.base_offset <= offset);
        let entry = self.segments.get(seg).map_or(0, |s| {
            s.entries.partition_point(|e| e.head.last_offset() < offset)
        });
        (seg, entry)
    }
}

/// The settings a partition's appends and retention follow.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Policy {
    /// `fdatasync` each append before acknowledging it.
    pub(crate) sync_each_append: bool,
    pub(crate) segment_bytes: u64,
    pub(crate) retention_ms: i64,
    pub(crate) retention_bytes: i64,
}

/// What the single appender of a partition keeps between appends.
#[derive(Debug)]
pub(crate) struct Writer<F: Fs> {
    /// A failed append whose bytes could not be cut back: retried before the next append.
    cut_back: Option<(Arc<F::File>, PathBuf, u64)>,
}

/// Whether the file at `path` is empty.
fn is_empty_file<F: Fs>(fs: &F, path: &Path) -> Result<bool, LogError> {
    let file = fs.open(path).map_err(|e| storage("open", path, e))?;
    let len = fs
        .len(&file)
        .map_err(|e| storage("read the length of", path, e))?;
    Ok(len == 0)
}

/// What a failed append's error adds when its bytes were cut off again.
const CUT_OFF: &str = "the append was cut off again: nothing changed";

/// What a failed append's error adds when cutting its bytes off failed too.
fn refused(cut: &io::Error) -> String {
    format!(
        "cutting the append off failed too ({cut}): the partition refuses appends until a retry \
         of the cut, made before each, succeeds"
    )
}

/// `e` with its cause and `note` added to its message (a storage error; any other is
/// returned as it is).
fn amend(e: LogError, note: &str) -> LogError {
    match e {
        LogError::Storage { message, source } => LogError::Storage {
            message: match &source {
                Some(cause) => format!("{message}: {cause}; {note}"),
                None => format!("{message}; {note}"),
            },
            source,
        },
        other => other,
    }
}

/// How many cuts back a partition remembers, for appenders still waiting to learn whether
/// theirs was cut ([`State::frame_fate`]).
const CUTS_KEPT: usize = 16;

/// One partition.
#[derive(Debug)]
pub(crate) struct Partition<F: Fs> {
    /// The file system, shared with the log.
    pub(crate) fs: Arc<F>,
    pub(crate) tp: TopicPartition,
    pub(crate) dir: PathBuf,
    /// Writes to a partition are one at a time. Held only by code that does not await (a
    /// frame's write, a cut, a roll), so a plain mutex: the blocking appends of
    /// [`append_blocking`](Self::append_blocking) take it too.
    writer: std::sync::Mutex<Writer<F>>,
    /// Syncs too; one sync covers every frame written before it started.
    pub(crate) syncer: tokio::sync::Mutex<()>,
    state: RwLock<State<F>>,
    /// Written since the last sync (flush-interval mode).
    pub(crate) dirty: AtomicBool,
    /// (flush-interval mode) The last periodic sync failed: appends are refused until a sync
    /// succeeds (each append retries it first).
    sync_failed: AtomicBool,
    /// (flush-interval mode) Syncs are one at a time, so that a sync that finds nothing
    /// dirty returns only once the sync that took the flag has ended.
    flusher: std::sync::Mutex<()>,
    /// When the active segment was opened (or the log, for the one recovered at open), in
    /// ms on the log's clock: its age for `segment.ms`.
    pub(super) active_since: std::sync::atomic::AtomicI64,
    /// Compaction passes are one at a time; the offset below which the last one left the
    /// partition compacted (0 at open: the first pass sees everything as dirty).
    pub(super) cleaner: std::sync::Mutex<i64>,
    /// Tests: the next append's sync fails (after its bytes are written), as an EIO would.
    #[cfg(test)]
    pub(crate) fail_next_sync: AtomicBool,
    /// Tests: the group syncs run.
    #[cfg(test)]
    pub(crate) syncs: std::sync::atomic::AtomicU64,
}

impl<F: Fs> Partition<F> {
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, State<F>> {
        // Nothing panics while the guard is held, so a poisoned lock guards consistent data.
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn write(&self) -> RwLockWriteGuard<'_, State<F>> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new, empty partition in `dir` (created; a leftover of a crashed creation is
    /// replaced).
    pub(crate) fn create(
        fs: Arc<F>,
        tp: TopicPartition,
        dir: PathBuf,
    ) -> Result<Partition<F>, LogError> {
        if fs
            .exists(&dir)
            .map_err(|e| storage("look for a leftover", &dir, e))?
        {
            fs.remove_dir_all(&dir)
                .map_err(|e| storage("remove the leftover", &dir, e))?;
        }
        fs.create_dir_all(&dir)
            .map_err(|e| storage("create the partition directory", &dir, e))?;
        let segment = Segment::create(&*fs, &dir, 0)?;
        files::sync_dir(&*fs, &dir)?;
        Ok(Partition::with_state(
            fs,
            tp,
            dir,
            State {
                log_start: 0,
                end: 0,
                written_end: 0,
                failures: 0,
                last_failure: String::new(),
                cuts: std::collections::VecDeque::new(),
                segments: vec![segment],
            },
        ))
    }

    fn with_state(fs: Arc<F>, tp: TopicPartition, dir: PathBuf, state: State<F>) -> Partition<F> {
        Partition {
            fs,
            tp,
            dir,
            writer: std::sync::Mutex::new(Writer { cut_back: None }),
            syncer: tokio::sync::Mutex::new(()),
            state: RwLock::new(state),
            dirty: AtomicBool::new(false),
            sync_failed: AtomicBool::new(false),
            flusher: std::sync::Mutex::new(()),
            active_since: std::sync::atomic::AtomicI64::new(0),
            cleaner: std::sync::Mutex::new(0),
            #[cfg(test)]
            fail_next_sync: AtomicBool::new(false),
            #[cfg(test)]
            syncs: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Opens the partition in `dir`: scans every segment, checking each frame's CRC and the
    /// offsets' continuity, truncates a torn tail of the last segment (logged), refuses any
    /// other damage naming file and position, and removes segments wholly below the
    /// checkpointed log start (a crash between the checkpoint and the deletion).
    ///
    /// `cleaned` is how far compaction may have rewritten the partition (the cleaner
    /// checkpoint): below it, offsets may have gaps; above it, they must run on.
    pub(crate) fn open(
        fs: Arc<F>,
        tp: TopicPartition,
        dir: PathBuf,
        checkpoint: Option<i64>,
        cleaned: Option<i64>,
    ) -> Result<Partition<F>, LogError> {
        let cleaned = cleaned.unwrap_or(0);
        if !fs.exists(&dir).map_err(|e| storage("look for", &dir, e))? {
            return Err(files::malformed(
                &dir,
                format!("the directory of {tp} is missing (the topics file lists it)"),
            ));
        }
        let mut bases = Vec::new();
        let mut swaps = Vec::new();
        let listing = fs.list_dir(&dir).map_err(|e| storage("list", &dir, e))?;
        for name in listing {
            let path = dir.join(&name);
            let text = name.to_str();
            match text.and_then(files::parse_segment_name) {
                Some(base) => bases.push(base),
                None if text.is_some_and(|n| n.ends_with(CLEANED)) => {
                    // A compaction's output not yet swapped in: the segment it would have
                    // replaced is whole, and the compaction runs again.
                    warn!(file = %path.display(), "an unfinished compaction's output: removed");
                    fs.remove_file(&path)
                        .map_err(|e| storage("remove the unfinished compaction", &path, e))?;
                }
                None if text.is_some_and(|n| n.ends_with(SWAP)) => {
                    let (first, end) = text.and_then(files::parse_swap_name).ok_or_else(|| {
                        files::malformed(&path, "a swap file whose name gives no offset range")
                    })?;
                    swaps.push((first, end, path));
                }
                None => warn!(file = %path.display(), "not a segment file: ignored"),
            }
        }
        // A committed merge of segments replaces the segments it covers.
        clean::recover_swaps(&*fs, &dir, swaps, &mut bases, checkpoint, cleaned)?;
        bases.sort_unstable();
        if bases.is_empty() {
            return Err(files::malformed(&dir, "no segment file"));
        }
        let mut segments = Vec::with_capacity(bases.len());
        let mut expected = bases[0];
        // The tail, where a write may have been torn: the last segment holding bytes. The
        // empty ones after it are a roll's new segment (the one before it was synced at the
        // roll, so it has no torn tail to cut) or a failed roll's leftover (appends went on
        // into the one before it, at offsets from the leftover's base). So when empty
        // segments follow it, a batch cut short at its end is a torn write only at or past
        // the next one's base; below, it was synced: damage.
        let empty = bases
            .iter()
            .map(|&base| is_empty_file(&*fs, &dir.join(files::segment_name(base))))
            .collect::<Result<Vec<bool>, LogError>>()?;
        let last = empty.iter().rposition(|e| !e).unwrap_or(bases.len() - 1);
        let torn_from = bases.get(last + 1).copied().unwrap_or(i64::MIN);
        for (i, base) in bases.into_iter().enumerate() {
            let path = dir.join(files::segment_name(base));
            if i > 0 && base < expected && empty[i] {
                // A roll that failed after creating its segment (or whose removal of it a
                // power cut undid): the file never took a batch, and offsets run on in the
                // segment before it.
                warn!(file = %path.display(), "an empty segment left by a failed roll: removed");
                fs.remove_file(&path)
                    .map_err(|e| storage("remove the failed roll's segment", &path, e))?;
                continue;
            }
            // Equal, or above where compaction removed the previous segment's last batches.
            if base != expected && !(base > expected && expected < cleaned) {
                return Err(files::malformed(
                    &path,
                    format!(
                        "it starts at offset {base} but the previous segment ends at {expected}"
                    ),
                ));
            }
            let tail = (i == last).then_some(torn_from);
            let segment = recover_segment(&*fs, path, base, tail, cleaned)?;
            expected = segment
                .entries
                .last()
                .map_or(base, |e| e.head.last_offset().saturating_add(1));
            segments.push(segment);
        }
        let end = expected;
        let first = segments[0].base_offset;
        let log_start = checkpoint.unwrap_or(first).max(first).min(end);
        // Segments wholly below the log start (the next one starts at or below it): retention
        // had decided to delete them. A segment compaction left empty is not below the log
        // start for being empty: removing it would move the next open's log start over
        // offsets that are compacted away, not deleted.
        let below = segments
            .windows(2)
            .take_while(|pair| pair[1].base_offset <= log_start)
            .count();
        for s in segments.drain(..below) {
            fs.remove_file(&s.path)
                .map_err(|e| storage("remove the deleted segment", &s.path, e))?;
        }
        let partition = Partition::with_state(
            fs,
            tp,
            dir,
            State {
                log_start,
                end,
                written_end: end,
                failures: 0,
                last_failure: String::new(),
                cuts: std::collections::VecDeque::new(),
                segments,
            },
        );
        // The cleaner's progress starts at 0, not at the checkpoint: the checkpoint is written
        // before a pass swaps its segments in (it bounds the gaps recovery accepts), so it
        // cannot say that the pass ended; a pass that failed or was cut by a crash would
        // otherwise leave its dirty records unmapped for good. The first pass after an open
        // reads the compactable segments whole.
        Ok(partition)
    }

    /// The bytes of the partition's segment files.
    pub(crate) fn size(&self) -> u64 {
        self.read().segments.iter().map(|seg| seg.size).sum()
    }

    /// The bounds.
    pub(crate) fn bounds(&self) -> (i64, i64) {
        let s = self.read();
        (s.log_start, s.end)
    }

    /// Appends one frame built by `build` from the base offset and returns that offset and
    /// whether a segment was closed for it. On any failure nothing visible changes: the bytes
    /// written are cut back.
    ///
    /// With a sync per append, the appends written while a sync runs are synced together by
    /// the next one (group commit): each appender writes its frame under the writer lock,
    /// then waits for a sync that covers it, running one itself if none has. A failed sync
    /// cuts back every frame it covered, and each of their appenders gets the error.
    ///
    /// `on_sync` is told the duration of each sync of data that succeeds (the group's, and
    /// a closed segment's).
    pub(crate) async fn append(
        &self,
        policy: Policy,
        on_sync: Option<&SyncObserver>,
        count: u32,
        build: impl FnOnce(i64) -> Result<(Vec<u8>, i64), LogError>,
    ) -> Result<(i64, bool), LogError> {
        let (base, my_end, epoch, rolled) = {
            let mut writer = self.lock_writer();
            self.write_frame(&mut writer, policy, on_sync, count, build)?
        };
        if policy.sync_each_append {
            self.group_sync(my_end, epoch, on_sync).await?;
        }
        Ok((base, rolled))
    }

    /// Writes one frame at the end of the active segment (rolling first if it is full).
    /// Returns the base offset, the end after the frame, the failure epoch it was written in
    /// and whether a segment was closed.
    fn write_frame(
        &self,
        writer: &mut Writer<F>,
        policy: Policy,
        on_sync: Option<&SyncObserver>,
        count: u32,
        build: impl FnOnce(i64) -> Result<(Vec<u8>, i64), LogError>,
    ) -> Result<(i64, i64, u64, bool), LogError> {
        if let Some((file, path, at)) = writer.cut_back.take() {
            if let Err(e) = self.fs.truncate(&file, at) {
                writer.cut_back = Some((file, path.clone(), at));
                return Err(storage("cut back the failed append in", &path, e));
            }
        }
        if !policy.sync_each_append && self.sync_failed.load(Ordering::Acquire) {
            self.sync_if_dirty(on_sync).map_err(|e| match e {
                LogError::Storage { message, source } => LogError::Storage {
                    message: format!(
                        "the periodic fdatasync of {} failed ({message}): appends acknowledged \
                         since the last good sync may be lost on power loss, and the partition \
                         refuses appends until a sync succeeds",
                        self.tp
                    ),
                    source,
                },
                other => other,
            })?;
        }
        let base = self.read().written_end;
        let (frame, max_timestamp) = build(base)?;
        let len = frame.len() as u64;
        // At most MAX_FRAME + 4: frame::encode refuses larger frames.
        let frame_len = u32::try_from(len).unwrap_or(u32::MAX);
        let roll = {
            let s = self.read();
            let active = s.active();
            active.size > 0 && active.size.saturating_add(len) > policy.segment_bytes
        };
        if roll {
            self.roll(base, on_sync)?;
        }
        let (file, path, at) = {
            let s = self.read();
            let a = s.active();
            (a.file.clone(), a.path.clone(), a.size)
        };
        let written = self
            .fs
            .write_at(&file, &frame, at)
            .and_then(|()| {
                if !policy.sync_each_append && self.injected_failure() {
                    return Err(io::Error::other("injected failure"));
                }
                Ok(())
            })
            .map_err(|e| storage("append to", &path, e));
        if let Err(e) = written {
            if let Err(cut) = self.fs.truncate(&file, at) {
                warn!(file = %path.display(), position = at, error = %cut, "cannot cut back a failed append; retried at the next one");
                writer.cut_back = Some((file, path, at));
                return Err(amend(e, &refused(&cut)));
            }
            return Err(amend(e, CUT_OFF));
        }
        let mut s = self.write();
        let last = s.segments.len() - 1;
        let active = &mut s.segments[last];
        active.entries.push(Entry {
            head: Head::dense(base, count, max_timestamp, frame_len),
            position: at,
        });
        active.size = at + len;
        s.written_end = base.saturating_add(i64::from(count));
        if !policy.sync_each_append {
            s.end = s.written_end;
            self.dirty.store(true, Ordering::Release);
        }
        Ok((base, s.written_end, s.failures, roll))
    }

    /// Waits until the frames up to `my_end` are synced, syncing them (and every frame
    /// written so far) if no other appender has.
    async fn group_sync(
        &self,
        my_end: i64,
        epoch: u64,
        on_sync: Option<&SyncObserver>,
    ) -> Result<(), LogError> {
        let _one = self.syncer.lock().await;
        let (file, path, target) = {
            let s = self.read();
            match s.frame_fate(my_end, epoch) {
                // Another sync (an appender's, or a roll's) covered this frame.
                Some(true) => return Ok(()),
                Some(false) => {
                    return Err(LogError::Storage {
                        message: format!(
                            "the batch was cut back: the sync of its group failed ({})",
                            s.last_failure
                        ),
                        source: None,
                    })
                }
                None => {}
            }
            (
                s.active().file.clone(),
                s.active().path.clone(),
                s.written_end,
            )
        };
        let fail = self.injected_failure();
        #[cfg(test)]
        self.syncs.fetch_add(1, Ordering::AcqRel);
        let shown = path.clone();
        let observer = on_sync.cloned();
        let fs = self.fs.clone();
        let synced = tokio::task::spawn_blocking(move || {
            if fail {
                return Err(storage(
                    "fdatasync",
                    &path,
                    io::Error::other("injected failure"),
                ));
            }
            observed(observer.as_ref(), || fs.fsync(&file))
                .map_err(|e| storage("fdatasync", &path, e))
        })
        .await
        .unwrap_or_else(|e| {
            Err(LogError::storage(
                format!("the sync of `{}` did not complete", shown.display()),
                e,
            ))
        });
        match synced {
            Ok(()) => {
                let mut s = self.write();
                s.end = s.end.max(target);
                Ok(())
            }
            Err(e) => {
                // The appenders of the group learn that their frames were cut back; a cut
                // that fails is retried before the next append. A roll that ran meanwhile
                // synced the segment it closed: a frame it covered is durable, kept, and
                // its append succeeded.
                let _ = self.cut_back_unsynced(&mut self.lock_writer(), &e);
                if self.read().frame_fate(my_end, epoch) == Some(true) {
                    return Ok(());
                }
                Err(e)
            }
        }
    }

    fn lock_writer(&self) -> std::sync::MutexGuard<'_, Writer<F>> {
        // Nothing panics while the writer is held but a bug; the state it guards (a cut to
        // retry) is whole either way.
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// [`append`](Self::append) for a partition's own writer thread: the frame is written
    /// and, if `durable`, `fdatasync`ed on the calling thread before this returns (the
    /// caller batches its writes itself: one call, one write, one sync); else it is
    /// readable at once and synced later ([`sync_if_dirty`](Self::sync_if_dirty)). A failed
    /// write or sync is cut back, as for `append`, and nothing visible changes.
    pub(crate) fn append_blocking(
        &self,
        policy: Policy,
        on_sync: Option<&SyncObserver>,
        count: u32,
        build: impl FnOnce(i64) -> Result<(Vec<u8>, i64), LogError>,
        durable: bool,
    ) -> Result<(i64, bool), LogError> {
        let policy = Policy {
            sync_each_append: durable,
            ..policy
        };
        let mut writer = self.lock_writer();
        let (base, _, _, rolled) = self.write_frame(&mut writer, policy, on_sync, count, build)?;
        if !durable {
            return Ok((base, rolled));
        }
        let (file, path, target) = {
            let s = self.read();
            (
                s.active().file.clone(),
                s.active().path.clone(),
                s.written_end,
            )
        };
        match observed(on_sync, || self.fs.fsync(&file)).map_err(|e| storage("fdatasync", &path, e))
        {
            Ok(()) => {
                let mut s = self.write();
                s.end = s.end.max(target);
                Ok((base, rolled))
            }
            Err(e) => match self.cut_back_unsynced(&mut writer, &e) {
                Ok(()) => Err(amend(e, CUT_OFF)),
                Err(cut) => Err(amend(e, &refused(&cut))),
            },
        }
    }

    /// After a failed sync: removes every frame past the durable end (they are all in the
    /// active segment: a roll syncs the segment it closes) from the index and the file.
    /// The caller holds the writer.
    fn cut_back_unsynced(&self, writer: &mut Writer<F>, cause: &LogError) -> io::Result<()> {
        let mut s = self.write();
        s.failures += 1;
        s.last_failure = cause.to_string();
        let end = s.end;
        let n = s.failures;
        if s.cuts.len() == CUTS_KEPT {
            s.cuts.pop_front();
        }
        s.cuts.push_back((n, end));
        s.written_end = end;
        let last = s.segments.len() - 1;
        let active = &mut s.segments[last];
        let keep = active.entries.partition_point(|e| e.head.base_offset < end);
        let Some(at) = active.entries.get(keep).map(|e| e.position) else {
            return Ok(());
        };
        active.entries.truncate(keep);
        active.size = at;
        if let Err(cut) = self.fs.truncate(&active.file, at) {
            warn!(file = %active.path.display(), position = at, error = %cut, "cannot cut back a failed append; retried at the next one");
            writer.cut_back = Some((active.file.clone(), active.path.clone(), at));
            return Err(cut);
        }
        Ok(())
    }

    #[cfg(test)]
    fn injected_failure(&self) -> bool {
        self.fail_next_sync.swap(false, Ordering::AcqRel)
    }

    #[cfg(not(test))]
    fn injected_failure(&self) -> bool {
        false
    }

    /// Closes the active segment if it holds a batch and was opened more than `max_age_ms`
    /// before `now_ms` (Kafka's `segment.ms`, measured as Kafka does for a segment without
    /// timestamps: from when it was opened, or the log was); returns whether it did. Waits
    /// for an append in progress, as a roll at append does.
    pub(crate) fn roll_if_older(
        &self,
        now_ms: i64,
        max_age_ms: i64,
        on_sync: Option<&SyncObserver>,
    ) -> Result<bool, LogError> {
        let writer = self.lock_writer();
        if writer.cut_back.is_some() {
            return Ok(false); // a failed append is still to be cut back: the next append does
        }
        let since = self.active_since.load(Ordering::Acquire);
        let base = {
            let s = self.read();
            if s.active().entries.is_empty() {
                return Ok(false);
            }
            s.written_end
        };
        if now_ms.saturating_sub(since) <= max_age_ms {
            return Ok(false);
        }
        self.roll(base, on_sync)?;
        self.active_since.store(now_ms, Ordering::Release);
        drop(writer);
        Ok(true)
    }

    /// Closes the active segment, synced (so every frame before `base` is durable, as Kafka
    /// flushes a segment at roll), and starts `<base>.log`.
    fn roll(&self, base: i64, on_sync: Option<&SyncObserver>) -> Result<(), LogError> {
        let (old, old_path) = {
            let s = self.read();
            (s.active().file.clone(), s.active().path.clone())
        };
        observed(on_sync, || self.fs.fsync(&old))
            .map_err(|e| storage("fdatasync", &old_path, e))?;
        let segment = Segment::create(&*self.fs, &self.dir, base)?;
        if let Err(e) = files::sync_dir(&*self.fs, &self.dir) {
            // Appends go on into the active segment. The new file is removed (best effort:
            // if it stays, or comes back after a power cut, the next open removes it as an
            // empty segment below its predecessor's end).
            let _ = self.fs.remove_file(&segment.path);
            return Err(e);
        }
        let mut s = self.write();
        s.end = s.written_end;
        s.segments.push(segment);
        Ok(())
    }

    /// `fdatasync`s the active segment if anything was written since the last sync, telling
    /// `on_sync` the sync's duration if it succeeds. A failure keeps the partition dirty and
    /// makes it refuse appends until a sync succeeds (Kafka takes a log directory whose
    /// flush failed offline).
    pub(crate) fn sync_if_dirty(&self, on_sync: Option<&SyncObserver>) -> Result<(), LogError> {
        let _one = self.flusher.lock().unwrap_or_else(PoisonError::into_inner);
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let (file, path) = {
            let s = self.read();
            (s.active().file.clone(), s.active().path.clone())
        };
        let synced = observed(on_sync, || self.fs.fsync(&file));
        self.sync_failed.store(synced.is_err(), Ordering::Release);
        synced.map_err(|e| {
            self.dirty.store(true, Ordering::Release);
            storage("fdatasync", &path, e)
        })
    }

    /// Whole batches from `from_offset`, up to about `max_bytes` (the first whatever its size).
    pub(crate) fn read_batches(
        &self,
        from_offset: i64,
        max_bytes: usize,
    ) -> Result<BatchRead, LogError> {
        let s = self.read();
        if from_offset < s.log_start || from_offset > s.end {
            return Err(s.out_of_range(&self.tp, from_offset));
        }
        let (mut seg, mut entry) = s.locate(from_offset);
        // What to read, chosen under the lock; read after it is released, so appends and
        // syncs do not wait for the disk. A segment deleted meanwhile by retention is still
        // readable through its open file.
        let mut ranges: Vec<(Arc<F::File>, PathBuf, Vec<Entry>)> = Vec::new();
        let mut taken = 0usize;
        let mut size = 0usize;
        'segments: while let Some(segment) = s.segments.get(seg) {
            let first = entry;
            while let Some(e) = segment.entries.get(entry) {
                if e.head.last_offset() >= s.end || (taken > 0 && size >= max_bytes) {
                    break;
                }
                size = size.saturating_add((e.head.len() - e.head.data_start()) as usize);
                taken += 1;
                entry += 1;
            }
            if entry > first {
                let picked = segment.entries[first..entry].to_vec();
                ranges.push((segment.file.clone(), segment.path.clone(), picked));
            }
            if entry < segment.entries.len() {
                break 'segments; // the budget or the high watermark stopped the read
            }
            seg += 1;
            entry = 0;
        }
        let (log_start, high_watermark) = (s.log_start, s.end);
        drop(s);
        let mut batches = Vec::with_capacity(taken);
        for (file, path, entries) in &ranges {
            read_range(&*self.fs, file, path, entries, &mut batches)?;
        }
        Ok(BatchRead {
            log_start,
            high_watermark,
            batches,
        })
    }

    /// The first readable record with a timestamp at or after `timestamp`: the index finds
    /// the batches whose max timestamp reaches it, their stored per-record timestamps the
    /// record.
    pub(crate) fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<(i64, i64)>, LogError> {
        let s = self.read();
        for segment in &s.segments {
            for e in &segment.entries {
                if e.head.last_offset() >= s.end {
                    return Ok(None); // not yet durable: not readable
                }
                if e.head.max_timestamp < timestamp || e.head.last_offset() < s.log_start {
                    continue;
                }
                let found = read_index(&*self.fs, segment, e)?
                    .into_iter()
                    .find(|(o, t)| *o >= s.log_start && *t >= timestamp);
                if let Some((o, t)) = found {
                    return Ok(Some((o, t)));
                }
            }
        }
        Ok(None)
    }

    /// The first readable record with the largest timestamp (KIP-734's `MAX_TIMESTAMP`), as
    /// `(offset, its timestamp)`, or `None` when nothing is readable. The index gives each
    /// batch's largest timestamp, so only the batch that holds the answer is read, and a
    /// batch that starts below the log start (whose largest timestamp may belong to a
    /// removed record).
    pub(crate) fn offset_of_max_timestamp(&self) -> Result<Option<(i64, i64)>, LogError> {
        let s = self.read();
        let read = |segment: &Segment<F>, e: &Entry| -> Result<Option<(i64, i64)>, LogError> {
            let mut best: Option<(i64, i64)> = None;
            for (o, t) in read_index(&*self.fs, segment, e)? {
                if o >= s.log_start && best.is_none_or(|(_, b)| t > b) {
                    best = Some((o, t));
                }
            }
            Ok(best)
        };
        // The readable batches, with each one's largest readable timestamp: the index's,
        // except for a batch straddling the log start, which is read.
        let mut found: Option<(i64, usize, usize)> = None; // (timestamp, segment, entry)
        'scan: for (si, segment) in s.segments.iter().enumerate() {
            for (ei, e) in segment.entries.iter().enumerate() {
                if e.head.last_offset() >= s.end {
                    break 'scan; // not yet durable: not readable
                }
                if e.head.last_offset() < s.log_start {
                    continue;
                }
                let max = if e.head.base_offset < s.log_start {
                    match read(segment, e)? {
                        Some((_, t)) => t,
                        None => continue,
                    }
                } else {
                    e.head.max_timestamp
                };
                if found.is_none_or(|(t, _, _)| max > t) {
                    found = Some((max, si, ei));
                }
            }
        }
        match found {
            Some((_, si, ei)) => read(&s.segments[si], &s.segments[si].entries[ei]),
            None => Ok(None),
        }
    }

    /// How many leading closed segments retention deletes at `now_ms`: those whose newest
    /// record is older than `retention_ms`, and those whose removal keeps the partition at
    /// or above `retention_bytes` (Kafka's two rules; `-1` disables either).
    pub(crate) fn expired(&self, policy: Policy, now_ms: i64) -> usize {
        let s = self.read();
        let closed = s.segments.len() - 1;
        let by_time = if policy.retention_ms < 0 {
            0
        } else {
            s.segments[..closed]
                .iter()
                .take_while(|seg| {
                    seg.max_timestamp()
                        .is_none_or(|t| now_ms.saturating_sub(t) > policy.retention_ms)
                })
                .count()
        };
        let by_size = if policy.retention_bytes < 0 {
            0
        } else {
            let mut total: u64 = s.segments.iter().map(|seg| seg.size).sum();
            let keep = policy.retention_bytes as u64;
            s.segments[..closed]
                .iter()
                .take_while(|seg| {
                    let ok = total.saturating_sub(seg.size) >= keep;
                    if ok {
                        total -= seg.size;
                    }
                    ok
                })
                .count()
        };
        // A segment compaction left empty goes only with the segment after it: alone, it
        // would move the log start over offsets whose records are merely compacted away
        // (a consumer there would be out of range instead of reading on).
        let mut n = by_time.max(by_size);
        while n > 0 && s.segments[n - 1].entries.is_empty() {
            n -= 1;
        }
        n
    }

    /// The log start once the first `n` segments are gone.
    pub(crate) fn start_after(&self, n: usize) -> i64 {
        let s = self.read();
        s.segments
            .get(n)
            .map_or(s.end, |seg| seg.base_offset)
            .max(s.log_start)
    }

    /// Whether `offset` is a valid new log start: at most the high watermark (Kafka's
    /// `OFFSET_OUT_OF_RANGE` otherwise).
    pub(crate) fn check_in_range(&self, offset: i64) -> Result<(), LogError> {
        let s = self.read();
        if offset < 0 || offset > s.end {
            return Err(s.out_of_range(&self.tp, offset));
        }
        Ok(())
    }

    /// Moves the log start to `start` (the checkpoint already says so), drops the closed
    /// segments wholly below it from the index, then deletes their files; returns how many.
    /// Which segments is decided here, under the state lock, not by the caller: a
    /// compaction pass may have merged segments since the caller looked.
    pub(crate) fn remove_segments(&self, start: i64) -> Result<usize, LogError> {
        let removed: Vec<Segment<F>> = {
            let mut s = self.write();
            s.log_start = s.log_start.max(start);
            let n = s
                .segments
                .windows(2)
                .take_while(|pair| pair[1].base_offset <= start)
                .count();
            s.segments.drain(..n).collect()
        };
        for seg in &removed {
            self.fs
                .remove_file(&seg.path)
                .map_err(|e| storage("delete the segment", &seg.path, e))?;
        }
        if !removed.is_empty() {
            files::sync_dir(&*self.fs, &self.dir)?;
        }
        Ok(removed.len())
    }
}

/// Runs `sync` and, if it succeeded, tells `observer` how long it took. Without an observer
/// no clock is read.
fn observed(
    observer: Option<&SyncObserver>,
    sync: impl FnOnce() -> io::Result<()>,
) -> io::Result<()> {
    let Some(observer) = observer else {
        return sync();
    };
    let start = Instant::now();
    sync()?;
    observer(start.elapsed());
    Ok(())
}

/// The `(offset, timestamp)` of each record of the frame at `e`.
fn read_index<F: Fs>(fs: &F, segment: &Segment<F>, e: &Entry) -> Result<Vec<(i64, i64)>, LogError> {
    let mut buf = vec![0; e.head.index_len() as usize];
    fs.read_at(&segment.file, &mut buf, e.position + e.head.index_start())
        .map_err(|err| storage("read", &segment.path, err))?;
    Ok(e.head.records(&buf))
}

/// Reads the frames of `entries` (consecutive in one segment file) with one read, and hands
/// out each one's data.
fn read_range<F: Fs>(
    fs: &F,
    file: &F::File,
    path: &Path,
    entries: &[Entry],
    out: &mut Vec<Arc<Batch>>,
) -> Result<(), LogError> {
    let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
        return Ok(());
    };
    let start = first.position;
    let end = last.position + last.head.len();
    let mut buf = vec![0; (end - start) as usize];
    fs.read_at(file, &mut buf, start)
        .map_err(|e| storage("read", path, e))?;
    for e in entries {
        let from = (e.position - start + e.head.data_start()) as usize;
        let to = (e.position - start + e.head.len()) as usize;
        out.push(Arc::new(Batch {
            base_offset: e.head.base_offset,
            last_offset: e.head.last_offset(),
            max_timestamp: e.head.max_timestamp,
            records: Vec::new(),
            stamps: Vec::new(),
            encoded: Some(Bytes::from(&buf[from..to])),
            delete_horizon: None,
        }));
    }
    Ok(())
}

/// Scans one segment file (see [`Partition::open`]). With `torn_from`, the file is the
/// log's tail: a batch cut short at its end, at an offset at least `torn_from`, is a torn
/// write and cut off; anywhere else it is damage.
pub(super) fn recover_segment<F: Fs>(
    fs: &F,
    path: PathBuf,
    base: i64,
    torn_from: Option<i64>,
    cleaned: i64,
) -> Result<Segment<F>, LogError> {
    let file = fs
        .open(&path)
        .map_err(|e| storage("open the segment", &path, e))?;
    let file_len = fs.len(&file).map_err(|e| storage("stat", &path, e))?;
    let reader = FileReader {
        fs,
        file: &file,
        position: 0,
        len: file_len,
    };
    let mut scanner = Scanner::new(reader, file_len);
    let mut entries: Vec<Entry> = Vec::new();
    let mut expected = base;
    let size = loop {
        let position = scanner.position();
        let step = scanner
            .next()
            .map_err(|e| storage(&format!("read (at byte {position})"), &path, e))?;
        let (reason, at_tail) = match step {
            Step::End => break position,
            // Offsets run on, except in the compacted part, where compaction leaves gaps
            // (whole batches removed, or a rewritten batch starting at its first kept record).
            Step::Frame(head)
                if head.base_offset == expected
                    || (head.base_offset > expected && expected < cleaned) =>
            {
                expected = head.last_offset().saturating_add(1);
                entries.push(Entry { head, position });
                continue;
            }
            Step::Frame(head) => (
                format!(
                    "a batch at offset {} where offset {expected} was expected",
                    head.base_offset
                ),
                false,
            ),
            Step::Bad { reason, at_tail } => (reason, at_tail),
        };
        if at_tail && torn_from.is_some_and(|from| expected >= from) {
            warn!(
                file = %path.display(),
                position,
                %reason,
                "torn batch at the tail of the log: truncated (it was never acknowledged as durable)"
            );
            fs.truncate(&file, position)
                .and_then(|()| fs.fsync(&file))
                .map_err(|e| storage("truncate the torn tail of", &path, e))?;
            break position;
        }
        return Err(files::malformed(
            &path,
            format!("the batch at byte {position} is corrupt: {reason}; refusing to drop acknowledged data"),
        ));
    };
    Ok(Segment {
        base_offset: base,
        path,
        file: Arc::new(file),
        size,
        entries,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::fs::sim::SimFs;

    fn state(end: i64, failures: u64, cuts: &[(u64, i64)]) -> State<SimFs> {
        State {
            log_start: 0,
            end,
            written_end: end,
            failures,
            last_failure: String::new(),
            cuts: cuts.iter().copied().collect(),
            segments: Vec::new(),
        }
    }

    /// A frame's fate is read from the first cut after it was written, not from the durable
    /// end: a frame cut back whose offsets another frame then took is not acknowledged (a
    /// race a review found by reasoning: the end alone said "durable").
    #[test]
    fn a_frames_fate_is_the_first_cut_after_it() {
        // Written in epoch 0, ending at 6; no cut since: durable once the end reaches it.
        assert_eq!(state(5, 0, &[]).frame_fate(6, 0), None);
        assert_eq!(state(6, 0, &[]).frame_fate(6, 0), Some(true));
        // Cut at 5 (the frame with it), then another frame took offset 5 and was synced.
        assert_eq!(state(6, 1, &[(1, 5)]).frame_fate(6, 0), Some(false));
        // Durable (end 6) before the cut at 6 of later frames: kept.
        assert_eq!(state(9, 1, &[(1, 6)]).frame_fate(6, 0), Some(true));
        // Two cuts since: the first decides.
        assert_eq!(state(9, 2, &[(1, 6), (2, 8)]).frame_fate(6, 0), Some(true));
        assert_eq!(state(9, 2, &[(1, 5), (2, 8)]).frame_fate(6, 0), Some(false));
        // The first cut forgotten: counted as cut (an error, never a lost acknowledgement).
        assert_eq!(state(9, 20, &[(20, 8)]).frame_fate(6, 0), Some(false));
    }
}
