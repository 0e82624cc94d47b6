//! One partition of the segment log: its segment files, the in-memory index, recovery,
//! appends, reads and the deletion of whole segments.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use coordinator_core::{Bytes, LogError, OutOfRange, TopicPartition};
use tracing::warn;

use super::files::{self, storage};
use super::frame::{self, Head, Scanner, Step};
use crate::batch::Batch;
use crate::memory_log::BatchRead;

/// The index entry of one stored batch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub(crate) head: Head,
    /// Where the frame starts in its segment file.
    pub(crate) position: u64,
}

/// One segment file and the index of its batches.
#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) base_offset: i64,
    pub(crate) path: PathBuf,
    pub(crate) file: Arc<File>,
    /// The bytes of whole frames (appends write here).
    pub(crate) size: u64,
    pub(crate) entries: Vec<Entry>,
}

impl Segment {
    /// The largest record timestamp in the segment, `None` when empty.
    pub(crate) fn max_timestamp(&self) -> Option<i64> {
        self.entries.iter().map(|e| e.head.max_timestamp).max()
    }

    fn create(dir: &Path, base_offset: i64) -> Result<Segment, LogError> {
        let path = dir.join(files::segment_name(base_offset));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
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
pub(crate) struct State {
    pub(crate) log_start: i64,
    pub(crate) end: i64,
    pub(crate) segments: Vec<Segment>,
}

impl State {
    fn active(&self) -> &Segment {
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

    /// The (segment, entry) holding the first batch with an offset `>= offset`.
    fn locate(&self, offset: i64) -> (usize, usize) {
        let seg = self.segments.partition_point(|s| {
            s.entries
                .last()
                .is_some_and(|e| e.head.last_offset() < offset)
        });
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
#[derive(Debug, Default)]
pub(crate) struct Writer {
    /// A failed append whose bytes could not be cut back: retried before the next append.
    cut_back: Option<(Arc<File>, PathBuf, u64)>,
}

/// One partition.
#[derive(Debug)]
pub(crate) struct Partition {
    pub(crate) tp: TopicPartition,
    pub(crate) dir: PathBuf,
    /// Appends to a partition are one at a time (held across the write and its sync).
    pub(crate) writer: tokio::sync::Mutex<Writer>,
    state: RwLock<State>,
    /// Written since the last sync (flush-interval mode).
    pub(crate) dirty: AtomicBool,
    /// Tests: the next append's sync fails (after its bytes are written), as an EIO would.
    #[cfg(test)]
    pub(crate) fail_next_sync: AtomicBool,
}

impl Partition {
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, State> {
        // Nothing panics while the guard is held, so a poisoned lock guards consistent data.
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new, empty partition in `dir` (created; a leftover of a crashed creation is
    /// replaced).
    pub(crate) fn create(tp: TopicPartition, dir: PathBuf) -> Result<Partition, LogError> {
        if dir.exists() {
            fs::remove_dir_all(&dir).map_err(|e| storage("remove the leftover", &dir, e))?;
        }
        fs::create_dir_all(&dir).map_err(|e| storage("create the partition directory", &dir, e))?;
        let segment = Segment::create(&dir, 0)?;
        files::sync_dir(&dir)?;
        Ok(Partition::with_state(
            tp,
            dir,
            State {
                log_start: 0,
                end: 0,
                segments: vec![segment],
            },
        ))
    }

    fn with_state(tp: TopicPartition, dir: PathBuf, state: State) -> Partition {
        Partition {
            tp,
            dir,
            writer: tokio::sync::Mutex::new(Writer::default()),
            state: RwLock::new(state),
            dirty: AtomicBool::new(false),
            #[cfg(test)]
            fail_next_sync: AtomicBool::new(false),
        }
    }

    /// Opens the partition in `dir`: scans every segment, checking each frame's CRC and the
    /// offsets' continuity, truncates a torn tail of the last segment (logged), refuses any
    /// other damage naming file and position, and removes segments wholly below the
    /// checkpointed log start (a crash between the checkpoint and the deletion).
    pub(crate) fn open(
        tp: TopicPartition,
        dir: PathBuf,
        checkpoint: Option<i64>,
    ) -> Result<Partition, LogError> {
        if !dir.exists() {
            return Err(files::malformed(
                &dir,
                format!("the directory of {tp} is missing (the topics file lists it)"),
            ));
        }
        let mut bases = Vec::new();
        let listing = fs::read_dir(&dir).map_err(|e| storage("list", &dir, e))?;
        for entry in listing {
            let entry = entry.map_err(|e| storage("list", &dir, e))?;
            let name = entry.file_name();
            match name.to_str().and_then(files::parse_segment_name) {
                Some(base) => bases.push(base),
                None => warn!(file = %entry.path().display(), "not a segment file: ignored"),
            }
        }
        bases.sort_unstable();
        if bases.is_empty() {
            return Err(files::malformed(&dir, "no segment file"));
        }
        let mut segments = Vec::with_capacity(bases.len());
        let mut expected = bases[0];
        let last = bases.len() - 1;
        for (i, base) in bases.into_iter().enumerate() {
            let path = dir.join(files::segment_name(base));
            if base != expected {
                return Err(files::malformed(
                    &path,
                    format!(
                        "it starts at offset {base} but the previous segment ends at {expected}"
                    ),
                ));
            }
            let segment = recover_segment(path, base, i == last)?;
            expected = segment
                .entries
                .last()
                .map_or(base, |e| e.head.last_offset().saturating_add(1));
            segments.push(segment);
        }
        let end = expected;
        let first = segments[0].base_offset;
        let log_start = checkpoint.unwrap_or(first).max(first).min(end);
        // Segments wholly below the log start: retention had decided to delete them.
        let below = segments
            .iter()
            .take(segments.len() - 1)
            .take_while(|s| {
                s.entries
                    .last()
                    .is_none_or(|e| e.head.last_offset() < log_start)
            })
            .count();
        for s in segments.drain(..below) {
            fs::remove_file(&s.path)
                .map_err(|e| storage("remove the deleted segment", &s.path, e))?;
        }
        Ok(Partition::with_state(
            tp,
            dir,
            State {
                log_start,
                end,
                segments,
            },
        ))
    }

    /// The bounds.
    pub(crate) fn bounds(&self) -> (i64, i64) {
        let s = self.read();
        (s.log_start, s.end)
    }

    /// Appends one frame built by `build` from the base offset. The caller holds `writer`.
    /// On any failure nothing visible changes: the bytes written are cut back.
    pub(crate) async fn append(
        &self,
        writer: &mut Writer,
        policy: Policy,
        count: u32,
        build: impl FnOnce(i64) -> Result<(Vec<u8>, i64), LogError>,
    ) -> Result<i64, LogError> {
        if let Some((file, path, at)) = writer.cut_back.take() {
            if let Err(e) = file.set_len(at) {
                writer.cut_back = Some((file, path.clone(), at));
                return Err(storage("cut back the failed append in", &path, e));
            }
        }
        let base = self.read().end;
        let (frame, max_timestamp) = build(base)?;
        let len = frame.len() as u64;
        let roll = {
            let s = self.read();
            let active = s.active();
            active.size > 0 && active.size.saturating_add(len) > policy.segment_bytes
        };
        if roll {
            self.roll(base, policy)?;
        }
        let (file, path, at) = {
            let s = self.read();
            let a = s.active();
            (a.file.clone(), a.path.clone(), a.size)
        };
        let fail = self.injected_failure();
        let sync = move |file: &File, path: &Path| {
            if fail {
                return Err(storage(
                    "fdatasync",
                    path,
                    io::Error::other("injected failure"),
                ));
            }
            file.sync_data().map_err(|e| storage("fdatasync", path, e))
        };
        let written = if policy.sync_each_append {
            let (file, path) = (file.clone(), path.clone());
            let shown = path.clone();
            tokio::task::spawn_blocking(move || {
                file.write_all_at(&frame, at)
                    .map_err(|e| storage("append to", &path, e))?;
                sync(&file, &path)
            })
            .await
            .unwrap_or_else(|e| {
                Err(LogError::storage(
                    format!("the append to `{}` did not complete", shown.display()),
                    e,
                ))
            })
        } else {
            file.write_all_at(&frame, at)
                .map_err(|e| storage("append to", &path, e))
                .and_then(|()| if fail { sync(&file, &path) } else { Ok(()) })
        };
        if let Err(e) = written {
            if let Err(cut) = file.set_len(at) {
                warn!(file = %path.display(), position = at, error = %cut, "cannot cut back a failed append; retried at the next one");
                writer.cut_back = Some((file, path, at));
            }
            return Err(e);
        }
        {
            let mut s = self.write();
            let last = s.segments.len() - 1;
            let active = &mut s.segments[last];
            active.entries.push(Entry {
                head: Head {
                    base_offset: base,
                    count,
                    max_timestamp,
                    len,
                },
                position: at,
            });
            active.size = at + len;
            s.end = base.saturating_add(i64::from(count));
        }
        if !policy.sync_each_append {
            self.dirty.store(true, Ordering::Release);
        }
        Ok(base)
    }

    #[cfg(test)]
    fn injected_failure(&self) -> bool {
        self.fail_next_sync.swap(false, Ordering::AcqRel)
    }

    #[cfg(not(test))]
    fn injected_failure(&self) -> bool {
        false
    }

    /// Closes the active segment and starts `<base>.log`.
    fn roll(&self, base: i64, policy: Policy) -> Result<(), LogError> {
        let (old, old_path) = {
            let s = self.read();
            (s.active().file.clone(), s.active().path.clone())
        };
        if !policy.sync_each_append {
            // A closed segment is durable before the next one starts (as Kafka flushes at roll).
            old.sync_data()
                .map_err(|e| storage("fdatasync", &old_path, e))?;
        }
        let segment = Segment::create(&self.dir, base)?;
        files::sync_dir(&self.dir)?;
        self.write().segments.push(segment);
        Ok(())
    }

    /// `fdatasync`s the active segment if anything was written since the last sync.
    pub(crate) fn sync_if_dirty(&self) -> Result<(), LogError> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let (file, path) = {
            let s = self.read();
            (s.active().file.clone(), s.active().path.clone())
        };
        file.sync_data().map_err(|e| {
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
        let mut batches = Vec::new();
        let mut size = 0usize;
        let full = |size: usize, batches: &Vec<Arc<Batch>>, taken: usize| {
            (batches.len() + taken) > 0 && size >= max_bytes
        };
        while let Some(segment) = s.segments.get(seg) {
            let first = entry;
            while let Some(e) = segment.entries.get(entry) {
                if full(size, &batches, entry - first) {
                    break;
                }
                size = size.saturating_add((e.head.len - e.head.data_start()) as usize);
                entry += 1;
            }
            self.read_range(segment, &segment.entries[first..entry], &mut batches)?;
            if full(size, &batches, 0) {
                break;
            }
            seg += 1;
            entry = 0;
        }
        Ok(BatchRead {
            log_start: s.log_start,
            high_watermark: s.end,
            batches,
        })
    }

    /// Reads the frames of `entries` (consecutive in `segment`) with one read, and hands out
    /// each one's data as a slice of it.
    fn read_range(
        &self,
        segment: &Segment,
        entries: &[Entry],
        out: &mut Vec<Arc<Batch>>,
    ) -> Result<(), LogError> {
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            return Ok(());
        };
        let start = first.position;
        let end = last.position + last.head.len;
        let mut buf = vec![0; (end - start) as usize];
        segment
            .file
            .read_exact_at(&mut buf, start)
            .map_err(|e| storage("read", &segment.path, e))?;
        for e in entries {
            let from = (e.position - start + e.head.data_start()) as usize;
            let to = (e.position - start + e.head.len) as usize;
            out.push(Arc::new(Batch {
                base_offset: e.head.base_offset,
                last_offset: e.head.last_offset(),
                max_timestamp: e.head.max_timestamp,
                records: Vec::new(),
                encoded: Some(Bytes::from(&buf[from..to])),
            }));
        }
        Ok(())
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
                if e.head.max_timestamp < timestamp || e.head.last_offset() < s.log_start {
                    continue;
                }
                let mut buf = vec![0; 8 * e.head.count as usize];
                segment
                    .file
                    .read_exact_at(&mut buf, e.position + frame::HEADER)
                    .map_err(|err| storage("read", &segment.path, err))?;
                let found = frame::timestamps(&buf)
                    .into_iter()
                    .zip(e.head.base_offset..)
                    .find(|(t, o)| *o >= s.log_start && *t >= timestamp);
                if let Some((t, o)) = found {
                    return Ok(Some((o, t)));
                }
            }
        }
        Ok(None)
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
        by_time.max(by_size)
    }

    /// The log start once the first `n` segments are gone.
    pub(crate) fn start_after(&self, n: usize) -> i64 {
        let s = self.read();
        s.segments
            .get(n)
            .map_or(s.end, |seg| seg.base_offset)
            .max(s.log_start)
    }

    /// Drops the first `n` segments from the index and moves the log start to `start` (the
    /// checkpoint already says so), then deletes their files.
    pub(crate) fn remove_segments(&self, n: usize, start: i64) -> Result<(), LogError> {
        let removed: Vec<Segment> = {
            let mut s = self.write();
            let n = n.min(s.segments.len() - 1);
            s.log_start = s.log_start.max(start);
            s.segments.drain(..n).collect()
        };
        for seg in &removed {
            fs::remove_file(&seg.path).map_err(|e| storage("delete the segment", &seg.path, e))?;
        }
        if !removed.is_empty() {
            files::sync_dir(&self.dir)?;
        }
        Ok(())
    }
}

/// Scans one segment file (see [`Partition::open`]).
fn recover_segment(path: PathBuf, base: i64, is_last: bool) -> Result<Segment, LogError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| storage("open the segment", &path, e))?;
    let file_len = file
        .metadata()
        .map_err(|e| storage("stat", &path, e))?
        .len();
    let reader = file
        .try_clone()
        .map_err(|e| storage("open the segment", &path, e))?;
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
            Step::Frame(head) if head.base_offset == expected => {
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
        if is_last && at_tail {
            warn!(
                file = %path.display(),
                position,
                %reason,
                "torn batch at the tail of the log: truncated (it was never acknowledged as durable)"
            );
            file.set_len(position)
                .and_then(|()| file.sync_all())
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
