//! A durable partitioned log: each partition a directory of segment files, as Kafka keeps
//! them, behind the [`PartitionLog`] port.
//!
//! ## On disk
//!
//! ```text
//!   DIR/.lock                          flock'ed by the owner (one log per directory)
//!   DIR/topics                         the topics: id, partition count, name (atomic rewrite)
//!   DIR/log-start-offset-checkpoint    each partition's log start (Kafka's format, atomic)
//!   DIR/cleaner-offset-checkpoint      where each compacted partition is compacted up to
//!   DIR/<topic>-<partition>/00000000000000000000.log   segment files, named by base offset
//!   DIR/<topic>-<partition>/00000000000000004096.log   (20 digits, Kafka's naming)
//!   DIR/<topic>-<partition>/<base>.log.cleaned          a compaction's output being written
//!   DIR/<topic>-<partition>/<first>.log.<end>.swap      a merge of the segments based in
//!                                                       first..end, committed, not finished
//! ```
//!
//! The last two exist only while a compaction pass runs, or after a crash in one; recovery
//! removes a `.cleaned` file and finishes a `.swap` (see the `clean` module).
//!
//! A segment file is a sequence of frames, one per appended batch (big-endian):
//!
//! ```text
//!   length         u32   bytes after this field
//!   crc            u32   CRC-32C (Castagnoli, Kafka's batch CRC) of every byte after it
//!   version        u8    0
//!   base offset    i64
//!   record count   u32   (at least 1)
//!   max timestamp  i64
//!   timestamps     i64 × record count
//!   data           the bytes `append_encoded`'s `encode` returned, as the producer sent them
//! ```
//!
//! Compaction ([`PartitionLog::compact`]) writes version 1 frames for the batches it
//! rewrites: after the max timestamp come the last offset delta (`u32`: the batch covers
//! `base..=base + delta`), the delete horizon (`i64`, `-1` for none) and, per record kept,
//! its offset delta (`u32`) and timestamp (`i64`). Appends write version 0 only.
//!
//! The frame is this log's own, not Kafka's batch header, so that recovery checks any bytes
//! an appender stores (the port's tests store arbitrary bytes; the broker stores Kafka v2
//! batches, whose own CRC the frame's covers). The per-record timestamps serve
//! `ListOffsets` by timestamp without decoding the data; the data is handed to fetchers as
//! a slice of one read, never re-encoded.
//!
//! ## Index
//!
//! One entry per batch (base and last offset, max timestamp, file position), in memory,
//! rebuilt at open by the recovery scan. Recovery reads every byte of every segment anyway
//! to check the CRCs, so an index file would save no I/O at open; and a dense in-memory
//! index finds a fetch's position with a binary search and no file read. It costs about
//! 40 bytes per stored batch.
//!
//! ## Recovery at open
//!
//! Every frame's CRC is checked, and the offsets must run on from the segment's name (below
//! the partition's cleaner checkpoint they only have to increase: compaction leaves gaps). A
//! frame cut short by the end of the last segment holding bytes (or followed by zeros only)
//! is a torn write, never acknowledged under the default policy: the file is truncated to
//! the previous frame and a warning names the file and byte. When empty segments follow
//! that one (a roll, which synced it, or a failed roll's leftover, after which appends went
//! on into it), only a frame at or past the next segment's base can be torn. Any other
//! damage (a bad CRC with data after it, a gap in the offsets, damage in a segment before
//! the tail) is an error naming the file and byte: acknowledged data is never dropped
//! silently.
//!
//! Before the scan, a compaction a crash interrupted is settled: a `.cleaned` file (not
//! committed) is removed; a `.swap` file (committed) replaces the segments its name's range
//! covers, after it is checked whole.
//!
//! ## Durability
//!
//! By default an append is acknowledged once written and `fdatasync`ed (it survives power
//! loss). With [`flush_interval_ms`](SegmentLogBuilder::flush_interval_ms) (Kafka's
//! `log.flush.interval.ms`) it is acknowledged once written to the OS and synced by a
//! background thread every N ms (and when a segment is closed, and when the log is dropped):
//! it survives a crash of the process, and power loss may lose the last N ms. If a periodic
//! sync fails, the partition refuses appends (each first retries the sync) until a sync
//! succeeds: what was acknowledged since the last good sync is then only as safe as the page
//! cache. (Kafka takes the log directory whose flush failed offline.) The high watermark
//! (what readers see) moves only over durable batches.
//!
//! Writes to one partition are one at a time; partitions proceed in parallel. With a sync
//! per append, the appends written while a sync runs are synced together by the next one
//! (group commit: one `fdatasync` for the group, which lands or fails as a whole). A failed
//! write or sync is cut back from the segment, and each append it covered reports a
//! [`LogError::Storage`] naming the file and step: nothing visible changes. (An append
//! whose frame a roll synced meanwhile is durable, and succeeds.) If the cut itself fails,
//! the partition refuses appends (each retries the cut) until it succeeds; a log reopened
//! before that finds the batch whole and keeps it, as Kafka's recovery keeps every whole
//! batch: an append reported failed may then be there.
//!
//! A partition whose only writer is a thread of its own that batches its writes itself (the
//! group store's `__consumer_offsets`) appends with [`SegmentLog::append_blocking`]: one
//! frame, one write and, when it asks, one `fdatasync` on the calling thread before it
//! returns, whatever the log's flush policy; [`SegmentLog::sync`] syncs what it wrote
//! without one.
//!
//! An observer set with [`on_sync`](SegmentLogBuilder::on_sync) is told the duration of
//! every `fdatasync` of appended data that succeeds (a group's, a closed segment's, the
//! flush interval's), as Kafka's `LogFlushStats` times its flushes; a compaction's syncs
//! are not log flushes and are not told.
//!
//! ## Retention
//!
//! `retention.ms` and `retention.bytes` (Kafka's names and defaults: 7 days, unlimited)
//! delete whole closed segments (the active one is never deleted), oldest first: a segment
//! whose newest record is older than `retention.ms`, and segments while the partition stays
//! at or above `retention.bytes` without them. The log start moves to the next segment's
//! base; it is written to the checkpoint before the files go. Retention runs when a segment
//! is closed and every `retention_check_interval_ms` (Kafka's
//! `log.retention.check.interval.ms`, 5 minutes) on the background thread, and on demand
//! with [`SegmentLog::apply_retention`]. A segment compaction left empty (a group of one,
//! or the first of a merge) is deleted only with the segment after it, so compaction never
//! moves the log start.
//!
//! ## Compaction
//!
//! Kafka's log cleaner, driven by the caller (the broker, for topics whose
//! `cleanup.policy` includes `compact`) one partition at a time with
//! [`PartitionLog::compact`]: consecutive closed segments are cleaned into one file while
//! their sizes add up to at most the segment size, so small and emptied segments merge
//! instead of piling up. The `clean` module documents the pass and its crash safety.

mod clean;
mod files;
mod frame;
mod partition;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use coordinator_core::{Clock, LogError, NewRecord, TopicMetadata, TopicPartition};
use tokio::sync::watch;
use tracing::{error, info};

use crate::compaction::{Compaction, CompactionPolicy, RecordFormat};
use crate::fs::{Fs, StdFs};
use crate::memory_log::{check_new_topic, new_topic_id, BatchRead};
use crate::port::{EncodeBatch, PartitionLog};
use files::{storage, TopicEntry};
use partition::{Partition, Policy};

/// An observer of the log's syncs: see [`SegmentLogBuilder::on_sync`].
pub(crate) type SyncObserver = Arc<dyn Fn(Duration) + Send + Sync>;

/// Kafka's `log.segment.bytes` default: 1 GiB.
pub const DEFAULT_SEGMENT_BYTES: u64 = 1 << 30;
/// Kafka's `log.retention.ms` default: 7 days.
pub const DEFAULT_RETENTION_MS: i64 = 7 * 24 * 60 * 60 * 1000;
/// Kafka's `log.retention.check.interval.ms` default: 5 minutes.
pub const DEFAULT_RETENTION_CHECK_INTERVAL_MS: u64 = 5 * 60 * 1000;

/// Milliseconds since the Unix epoch: record timestamps and retention are wall-clock times.
#[derive(Debug)]
struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// The settings of a [`SegmentLog`], from [`SegmentLog::builder`].
pub struct SegmentLogBuilder {
    dir: PathBuf,
    clock: Arc<dyn Clock>,
    flush_interval_ms: Option<u64>,
    segment_bytes: u64,
    retention_ms: i64,
    retention_bytes: i64,
    retention_check_interval_ms: u64,
    on_sync: Option<SyncObserver>,
}

impl fmt::Debug for SegmentLogBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SegmentLogBuilder")
            .field("dir", &self.dir)
            .field("flush_interval_ms", &self.flush_interval_ms)
            .field("segment_bytes", &self.segment_bytes)
            .field("retention_ms", &self.retention_ms)
            .field("retention_bytes", &self.retention_bytes)
            .field("on_sync", &self.on_sync.is_some())
            .finish_non_exhaustive()
    }
}

impl SegmentLogBuilder {
    /// The clock that stamps records without a timestamp and that retention reads
    /// (default: the system's wall clock, milliseconds since the Unix epoch).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Kafka's `log.flush.interval.ms`: `None` (the default) syncs every append before it is
    /// acknowledged; `Some(n)` acknowledges once written to the OS and syncs every `n` ms.
    pub fn flush_interval_ms(mut self, interval: Option<u64>) -> Self {
        self.flush_interval_ms = interval;
        self
    }

    /// Kafka's `log.segment.bytes`: a segment is closed once the next batch would take it
    /// past this size (default 1 GiB).
    pub fn segment_bytes(mut self, bytes: u64) -> Self {
        self.segment_bytes = bytes;
        self
    }

    /// Kafka's `log.retention.ms` (default 7 days); `-1`: no time limit.
    pub fn retention_ms(mut self, ms: i64) -> Self {
        self.retention_ms = ms;
        self
    }

    /// Kafka's `log.retention.bytes` per partition (default `-1`: no size limit).
    pub fn retention_bytes(mut self, bytes: i64) -> Self {
        self.retention_bytes = bytes;
        self
    }

    /// Kafka's `log.retention.check.interval.ms`: how often the background thread applies
    /// retention (default 5 minutes).
    pub fn retention_check_interval_ms(mut self, ms: u64) -> Self {
        self.retention_check_interval_ms = ms;
        self
    }

    /// Calls `observer` with the duration of each `fdatasync` of the log's data once it has
    /// succeeded (a failed one is not told): each group commit's sync (once per append
    /// under the default policy, one for several appends written while a sync ran), the
    /// sync of a segment as it is closed, and under
    /// [`flush_interval_ms`](Self::flush_interval_ms) each partition's periodic sync (and
    /// [`SegmentLog::sync`]'s, and the last one when the log is dropped). The time is the
    /// sync call's alone, read with [`Instant`]; directory syncs, checkpoint rewrites and a
    /// compaction's syncs are not told. It is what Kafka's
    /// `kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs` counts and times.
    ///
    /// The observer runs on the thread that synced (tokio's blocking pool, the background
    /// thread, or an appender's): keep it short and non-blocking (a counter, a histogram).
    /// Default: none, and then the log reads no clock for it.
    pub fn on_sync(mut self, observer: Arc<dyn Fn(Duration) + Send + Sync>) -> Self {
        self.on_sync = Some(observer);
        self
    }

    /// Opens (or creates) the log in the directory: takes its owner lock, reads the topics
    /// and the checkpoint, recovers every partition (see the module docs), and starts the
    /// background thread.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` for a setting out of range; `STORAGE_ERROR` for a directory another
    /// log owns, an I/O failure (naming file and step) or damage recovery refuses.
    pub fn open(self) -> Result<SegmentLog, LogError> {
        self.open_with_fs(StdFs)
    }

    /// [`open`](Self::open) on the file system `fs`: a
    /// [`SimFs`](crate::fs::sim::SimFs) in tests, to cut power after any operation or fail
    /// one with `EIO` or `ENOSPC`.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_with_fs<F: Fs>(self, fs: F) -> Result<SegmentLog<F>, LogError> {
        let invalid = |what, reason: String| Err(LogError::InvalidArgument { what, reason });
        if self.segment_bytes < 1024 {
            return invalid(
                "segment bytes",
                format!(
                    "{} is below the smallest segment (1024 bytes)",
                    self.segment_bytes
                ),
            );
        }
        if self.retention_ms < -1 || self.retention_bytes < -1 {
            return invalid(
                "retention",
                format!(
                    "retention ms {} and bytes {} must be -1 (unlimited) or at least 0",
                    self.retention_ms, self.retention_bytes
                ),
            );
        }
        if self.flush_interval_ms == Some(0) || self.retention_check_interval_ms == 0 {
            return invalid(
                "interval",
                "flush and retention check intervals must be at least 1 ms".into(),
            );
        }
        let fs = Arc::new(fs);
        // The directory and any missing parent are created, and each creation made durable
        // (its parent fsynced), as Kafka's log manager flushes a new log directory's parent:
        // otherwise a power cut could take the whole log back.
        let mut missing = Vec::new();
        for dir in self.dir.ancestors() {
            if dir.as_os_str().is_empty()
                || fs
                    .exists(dir)
                    .map_err(|e| storage("look for the log directory", dir, e))?
            {
                break;
            }
            missing.push(dir);
        }
        if !missing.is_empty() {
            fs.create_dir_all(&self.dir)
                .map_err(|e| storage("create the log directory", &self.dir, e))?;
            for dir in missing.iter().rev() {
                files::sync_dir(&*fs, files::parent(dir))?;
            }
        }
        let lock = files::lock(&*fs, &self.dir)?;
        let entries = files::read_topics(&*fs, &self.dir.join(files::TOPICS))?;
        let checkpoint = files::read_checkpoint(&*fs, &self.dir.join(files::CHECKPOINT))?;
        let cleaned = files::read_checkpoint(&*fs, &self.dir.join(files::CLEANER_CHECKPOINT))?;
        let mut topics = BTreeMap::new();
        let mut batches = 0usize;
        for entry in entries {
            let mut partitions = Vec::with_capacity(entry.partitions as usize);
            for p in 0..entry.partitions {
                let tp = TopicPartition::new(entry.name.as_str(), p);
                let dir = self.dir.join(files::partition_dir(&tp));
                let start = checkpoint.get(&tp).copied();
                let partition = Partition::open(
                    fs.clone(),
                    tp.clone(),
                    dir,
                    start,
                    cleaned.get(&tp).copied(),
                )?;
                let opened = i64::try_from(self.clock.now_ms()).unwrap_or(i64::MAX);
                partition
                    .active_since
                    .store(opened, std::sync::atomic::Ordering::Release);
                batches += partition
                    .read()
                    .segments
                    .iter()
                    .map(|s| s.entries.len())
                    .sum::<usize>();
                partitions.push(Arc::new(partition));
            }
            topics.insert(
                Arc::<str>::from(entry.name.as_str()),
                Topic { entry, partitions },
            );
        }
        info!(dir = %self.dir.display(), topics = topics.len(), batches, "segment log opened");
        let policy = Policy {
            sync_each_append: self.flush_interval_ms.is_none(),
            segment_bytes: self.segment_bytes,
            retention_ms: self.retention_ms,
            retention_bytes: self.retention_bytes,
        };
        let inner = Arc::new(Inner {
            fs,
            dir: self.dir,
            clock: self.clock,
            policy,
            topics: RwLock::new(topics),
            create: Mutex::new(()),
            checkpoint: Mutex::new(()),
            cleaned: Mutex::new(cleaned),
            appended: watch::Sender::new(0),
            on_sync: self.on_sync,
            _lock: lock,
        });
        let housekeeper = Housekeeper::start(
            inner.clone(),
            self.flush_interval_ms,
            self.retention_check_interval_ms,
        )?;
        Ok(SegmentLog {
            inner,
            housekeeper: Some(housekeeper),
        })
    }
}

#[derive(Debug)]
struct Topic<F: Fs> {
    entry: TopicEntry,
    partitions: Vec<Arc<Partition<F>>>,
}

struct Inner<F: Fs> {
    fs: Arc<F>,
    dir: PathBuf,
    clock: Arc<dyn Clock>,
    policy: Policy,
    topics: RwLock<BTreeMap<Arc<str>, Topic<F>>>,
    /// Topic creations are one at a time (each rewrites the topics file).
    create: Mutex<()>,
    /// Checkpoint rewrites are one at a time, each with every partition's start.
    checkpoint: Mutex<()>,
    /// The cleaner checkpoint as written: where each compacted partition is compacted up to.
    cleaned: Mutex<BTreeMap<TopicPartition, i64>>,
    appended: watch::Sender<u64>,
    /// Told each sync of the log's data ([`SegmentLogBuilder::on_sync`]).
    on_sync: Option<SyncObserver>,
    _lock: F::Lock,
}

impl<F: Fs> Inner<F> {
    fn topics(&self) -> RwLockReadGuard<'_, BTreeMap<Arc<str>, Topic<F>>> {
        // Nothing panics while the guard is held, so a poisoned lock guards consistent data.
        self.topics.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn partition(&self, tp: &TopicPartition) -> Result<Arc<Partition<F>>, LogError> {
        self.topics()
            .get(tp.topic())
            .and_then(|t| t.partitions.get(tp.partition() as usize))
            .cloned()
            .ok_or_else(|| LogError::UnknownTopicOrPartition {
                partition: tp.clone(),
            })
    }

    fn all_partitions(&self) -> Vec<Arc<Partition<F>>> {
        self.topics()
            .values()
            .flat_map(|t| t.partitions.iter().cloned())
            .collect()
    }

    fn now_ms(&self) -> i64 {
        i64::try_from(self.clock.now_ms()).unwrap_or(i64::MAX)
    }

    fn signal(&self) {
        self.appended.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Rewrites the checkpoint with `p`'s start at `start` (every other partition's as it is),
    /// then drops `p`'s segments wholly below it; returns how many. The caller holds the
    /// checkpoint lock.
    fn move_start(&self, p: &Partition<F>, start: i64) -> Result<usize, LogError> {
        let mut starts: BTreeMap<TopicPartition, i64> = self
            .all_partitions()
            .iter()
            .map(|q| (q.tp.clone(), q.bounds().0))
            .collect();
        starts.insert(p.tp.clone(), start);
        let path = self.dir.join(files::CHECKPOINT);
        files::write_atomically(
            &*self.fs,
            &path,
            files::encode_checkpoint(&starts).as_bytes(),
        )?;
        p.remove_segments(start)
    }

    /// Kafka's `DeleteRecords`: moves `tp`'s log start up to `offset` (durably, through the
    /// checkpoint) and deletes the segments wholly below it; returns the log start.
    fn delete_records(&self, tp: &TopicPartition, offset: i64) -> Result<i64, LogError> {
        let p = self.partition(tp)?;
        let _one = self
            .checkpoint
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        p.check_in_range(offset)?;
        let start = p.bounds().0;
        if offset <= start {
            return Ok(start);
        }
        let n = self.move_start(&p, offset)?;
        info!(partition = %tp, segments = n, log_start = offset, "records deleted");
        self.signal();
        Ok(offset)
    }

    /// Applies retention to `partitions`; returns how many segments were deleted.
    fn apply_retention(&self, partitions: &[Arc<Partition<F>>]) -> Result<usize, LogError> {
        let mut deleted = 0;
        for p in partitions {
            deleted += self.retain(p, self.policy)?;
        }
        Ok(deleted)
    }

    /// Applies `policy`'s retention rules to `p`; returns how many segments were deleted.
    fn retain(&self, p: &Partition<F>, policy: Policy) -> Result<usize, LogError> {
        let n = p.expired(policy, self.now_ms());
        if n == 0 {
            return Ok(0);
        }
        let start = p.start_after(n);
        let n = {
            let _one = self
                .checkpoint
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.move_start(p, start)?
        };
        info!(partition = %p.tp, segments = n, log_start = start, "retention deleted segments");
        self.signal();
        Ok(n)
    }

    /// Records durably that `tp` is compacted up to `offset` (before the pass swaps its
    /// segments in: a gap below it is then compaction's, not damage).
    fn mark_cleaned(&self, tp: &TopicPartition, offset: i64) -> Result<(), LogError> {
        let mut cleaned = self.cleaned.lock().unwrap_or_else(PoisonError::into_inner);
        if cleaned.get(tp).is_some_and(|c| *c >= offset) {
            return Ok(());
        }
        let mut next = cleaned.clone();
        next.insert(tp.clone(), offset);
        {
            let topics = self.topics();
            next.retain(|tp, _| {
                topics
                    .get(tp.topic())
                    .is_some_and(|t| tp.partition() < t.entry.partitions)
            });
        }
        let path = self.dir.join(files::CLEANER_CHECKPOINT);
        files::write_atomically(&*self.fs, &path, files::encode_checkpoint(&next).as_bytes())?;
        *cleaned = next;
        Ok(())
    }

    /// Removes `name`'s partitions from the log-start and cleaner checkpoints, durably, if
    /// they are there: a deleted topic of that name leaves them (the files are rewritten
    /// from the live partitions only when a log start moves or a pass ends), and a new topic
    /// must start at offset 0, never compacted. Called before a topic is created.
    fn forget_checkpoints(&self, name: &str) -> Result<(), LogError> {
        let forget = |path: &Path| -> Result<(), LogError> {
            let mut entries = files::read_checkpoint(&*self.fs, path)?;
            let before = entries.len();
            entries.retain(|tp, _| tp.topic() != name);
            if entries.len() == before {
                return Ok(());
            }
            files::write_atomically(
                &*self.fs,
                path,
                files::encode_checkpoint(&entries).as_bytes(),
            )
        };
        {
            let _one = self
                .checkpoint
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            forget(&self.dir.join(files::CHECKPOINT))?;
        }
        let mut cleaned = self.cleaned.lock().unwrap_or_else(PoisonError::into_inner);
        forget(&self.dir.join(files::CLEANER_CHECKPOINT))?;
        cleaned.retain(|tp, _| tp.topic() != name);
        Ok(())
    }

    /// After an append to `p`: readers woken; if a segment was closed for it (at `now`),
    /// the new one's age starts and retention runs, since it may have something to delete.
    fn appended(&self, tp: &TopicPartition, p: Arc<Partition<F>>, rolled: bool, now: i64) {
        self.signal();
        if rolled {
            p.active_since
                .store(now, std::sync::atomic::Ordering::Release);
            if let Err(e) = self.apply_retention(&[p]) {
                error!(partition = %tp, error = %e, "retention failed; retried at the next check");
            }
        }
    }

    fn sync_all(&self) -> Result<(), LogError> {
        let mut first = Ok(());
        for p in self.all_partitions() {
            if let Err(e) = p.sync_if_dirty(self.on_sync.as_ref()) {
                error!(partition = %p.tp, error = %e, "cannot sync the log");
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }
}

/// The record count of a batch of `timestamps` for `tp`: at least one, at most `u32::MAX`.
fn batch_count(tp: &TopicPartition, timestamps: &[i64]) -> Result<u32, LogError> {
    if timestamps.is_empty() {
        return Err(LogError::InvalidArgument {
            what: "batch",
            reason: format!("an append to {tp} must carry at least one record"),
        });
    }
    u32::try_from(timestamps.len()).map_err(|_| LogError::InvalidArgument {
        what: "batch",
        reason: format!("{} records in one batch", timestamps.len()),
    })
}

/// The background thread: syncs written partitions every flush interval (if set) and
/// applies retention every check interval. It stops when the log is dropped.
#[derive(Debug)]
struct Housekeeper {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<()>,
}

impl Housekeeper {
    fn start<F: Fs>(
        inner: Arc<Inner<F>>,
        flush_ms: Option<u64>,
        retention_ms: u64,
    ) -> Result<Housekeeper, LogError> {
        let (stop, stopped) = mpsc::channel::<()>();
        let tick = Duration::from_millis(flush_ms.unwrap_or(retention_ms).min(retention_ms));
        let retention_every = Duration::from_millis(retention_ms);
        let flush_every = flush_ms.map(Duration::from_millis);
        let dir = inner.dir.clone();
        let thread = std::thread::Builder::new()
            .name("segment-log".into())
            .spawn(move || {
                let mut next_retention = Instant::now() + retention_every;
                let mut next_flush =
                    flush_every.and_then(|every| Instant::now().checked_add(every));
                loop {
                    match stopped.recv_timeout(tick) {
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                    }
                    if let (Some(at), Some(every)) = (next_flush, flush_every) {
                        if Instant::now() >= at {
                            next_flush = Instant::now().checked_add(every);
                            // Errors are logged; the partition stays dirty and refuses
                            // appends until a sync (this one's retry, or an append's) succeeds.
                            let _ = inner.sync_all();
                        }
                    }
                    if Instant::now() >= next_retention {
                        next_retention = Instant::now() + retention_every;
                        if let Err(e) = inner.apply_retention(&inner.all_partitions()) {
                            error!(error = %e, "retention failed; retried at the next check");
                        }
                    }
                }
            })
            .map_err(|e| storage("start the background thread of", &dir, e))?;
        Ok(Housekeeper { stop, thread })
    }
}

/// A durable [`PartitionLog`]: topics, records and bounds kept in a directory of segment
/// files, recovered at open (see the module docs for the format and the guarantees).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use coordinator_core::{Bytes, NewRecord, TopicPartition};
/// use partition_log::{PartitionLog, SegmentLog};
///
/// let dir = tempfile::tempdir().unwrap();
/// let tp = TopicPartition::new("orders", 0);
/// {
///     let log = SegmentLog::builder(dir.path()).open()?;
///     log.create_topic("orders", 1).await?;
///     let records = vec![NewRecord::from("a"), NewRecord::from("b")];
///     let base = log
///         .append_encoded(&tp, records, Box::new(|_| Bytes::from(&b"batch"[..])))
///         .await?;
///     assert_eq!(base, 0);
/// }
/// let log = SegmentLog::builder(dir.path()).open()?; // a restart
/// assert_eq!(log.bounds(&tp).await?, (0, 2));
/// let read = log.read_batches(&tp, 0, 1024).await?;
/// assert_eq!(read.batches[0].encoded().map(|b| &b[..]), Some(&b"batch"[..]));
/// assert!(log.topic_id("orders").is_some());
/// # Ok::<(), coordinator_core::LogError>(())
/// # }).unwrap();
/// ```
///
/// `F` is the file system ([`StdFs`], or a [`SimFs`](crate::fs::sim::SimFs) in tests:
/// [`SegmentLogBuilder::open_with_fs`]).
pub struct SegmentLog<F: Fs = StdFs> {
    inner: Arc<Inner<F>>,
    housekeeper: Option<Housekeeper>,
}

impl<F: Fs> fmt::Debug for SegmentLog<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let topics = self.inner.topics();
        let mut m = f.debug_map();
        m.entry(&"dir", &self.inner.dir);
        for (name, t) in topics.iter() {
            m.entry(name, &t.partitions.len());
        }
        m.finish()
    }
}

impl<F: Fs> Drop for SegmentLog<F> {
    fn drop(&mut self) {
        if let Some(h) = self.housekeeper.take() {
            drop(h.stop);
            if h.thread.join().is_err() {
                error!("the segment log's background thread panicked");
            }
        }
        // Flush-interval mode: what was written is synced at a clean stop.
        let _ = self.inner.sync_all();
    }
}

impl SegmentLog {
    /// The settings for a log in `dir` (created if missing), with Kafka's defaults.
    pub fn builder(dir: impl AsRef<Path>) -> SegmentLogBuilder {
        SegmentLogBuilder {
            dir: dir.as_ref().to_path_buf(),
            clock: Arc::new(SystemClock),
            flush_interval_ms: None,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            retention_ms: DEFAULT_RETENTION_MS,
            retention_bytes: -1,
            retention_check_interval_ms: DEFAULT_RETENTION_CHECK_INTERVAL_MS,
            on_sync: None,
        }
    }
}

impl<F: Fs> SegmentLog<F> {
    /// The log's directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The file system the log works through (a store built on the log does its own few
    /// file operations through it too).
    pub fn fs(&self) -> &F {
        &self.inner.fs
    }

    /// Applies `retention.ms` and `retention.bytes` to every partition now (the background
    /// thread does it every check interval) and returns how many segments were deleted.
    ///
    /// # Errors
    /// `STORAGE_ERROR` if the checkpoint cannot be written (nothing is deleted then) or a
    /// file cannot be removed.
    pub fn apply_retention(&self) -> Result<usize, LogError> {
        self.inner.apply_retention(&self.inner.all_partitions())
    }

    /// `fdatasync`s every partition written since its last sync (flush-interval mode; with
    /// the default policy every append is synced already).
    ///
    /// # Errors
    /// `STORAGE_ERROR` naming the file.
    pub fn sync(&self) -> Result<(), LogError> {
        self.inner.sync_all()
    }

    /// [`PartitionLog::create_topic`] on the calling thread (it does no async work).
    ///
    /// # Errors
    /// As `create_topic`.
    pub fn create_topic_blocking(&self, name: &str, partitions: u32) -> Result<(), LogError> {
        let inner = &self.inner;
        let _one = inner.create.lock().unwrap_or_else(PoisonError::into_inner);
        {
            let topics = inner.topics();
            check_new_topic(name, partitions, topics.keys().map(|t| &**t))?;
        }
        let id = new_topic_id(name)?;
        inner.forget_checkpoints(name)?;
        let entry = TopicEntry {
            name: name.to_string(),
            id,
            partitions,
        };
        let mut parts = Vec::with_capacity(partitions as usize);
        for p in 0..partitions {
            let tp = TopicPartition::new(name, p);
            let dir = inner.dir.join(files::partition_dir(&tp));
            let p = Partition::create(inner.fs.clone(), tp, dir)?;
            p.active_since
                .store(inner.now_ms(), std::sync::atomic::Ordering::Release);
            parts.push(Arc::new(p));
        }
        files::sync_dir(&*inner.fs, &inner.dir)?;
        // The commit point: the topic exists once the topics file lists it.
        let text = {
            let topics = inner.topics();
            files::encode_topics(topics.values().map(|t| &t.entry).chain([&entry]))
        };
        files::write_atomically(&*inner.fs, &inner.dir.join(files::TOPICS), text.as_bytes())?;
        inner
            .topics
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                Arc::from(name),
                Topic {
                    entry,
                    partitions: parts,
                },
            );
        Ok(())
    }

    /// Appends one batch to `tp` on the calling thread, for a partition whose only writer
    /// is a thread of its own that batches its writes (the group store: one call, one
    /// `write(2)`, and if `durable` one `fdatasync` before this returns, whatever the log's
    /// flush policy). The batch holds `count` records stamped `timestamp`; `data` is stored
    /// as the appender's bytes, as [`PartitionLog::append_encoded`] stores them. Without
    /// `durable` the batch is readable at once and synced by [`sync`](Self::sync) (or when
    /// its segment is closed). Returns the batch's base offset. Must not run on an async
    /// worker when `durable` (it blocks for the sync).
    ///
    /// # Errors
    /// `UNKNOWN_TOPIC_OR_PARTITION`; `INVALID_REQUEST` for no records or a batch above the
    /// largest frame; `STORAGE_ERROR` naming the file and step when the write or the sync
    /// fails (the batch is then cut back: nothing visible changes).
    pub fn append_blocking(
        &self,
        tp: &TopicPartition,
        count: u32,
        timestamp: i64,
        data: &[u8],
        durable: bool,
    ) -> Result<i64, LogError> {
        // Each record takes 8 bytes of the frame: a count no frame can hold is refused
        // before its timestamps are allocated.
        if u64::from(count) * 8 > u64::from(frame::MAX_FRAME) {
            return Err(LogError::InvalidArgument {
                what: "batch",
                reason: format!("{count} records exceed the largest stored batch"),
            });
        }
        let timestamps = vec![timestamp; count as usize];
        let count = batch_count(tp, &timestamps)?;
        let partition = self.inner.partition(tp)?;
        let (base, rolled) = partition.append_blocking(
            self.inner.policy,
            self.inner.on_sync.as_ref(),
            count,
            |base| Ok((frame::encode(base, &timestamps, data)?, timestamp)),
            durable,
        )?;
        self.inner
            .appended(tp, partition, rolled, self.inner.now_ms());
        Ok(base)
    }

    /// Closes `tp`'s active segment now if it holds a batch (so that a compaction can take
    /// it); returns whether it did. [`PartitionLog::roll_older_than`] with no age.
    ///
    /// # Errors
    /// `UNKNOWN_TOPIC_OR_PARTITION`; `STORAGE_ERROR` naming the file if the closed segment
    /// cannot be synced or the next one created (the active segment stays as it was).
    pub fn roll_blocking(&self, tp: &TopicPartition) -> Result<bool, LogError> {
        let inner = &self.inner;
        inner
            .partition(tp)?
            .roll_if_older(inner.now_ms(), -1, inner.on_sync.as_ref())
    }

    /// [`PartitionLog::compact`] on the calling thread: reads and rewrites whole segments,
    /// so run it on a thread that may block.
    ///
    /// # Errors
    /// As `compact`.
    pub fn compact_blocking(
        &self,
        tp: &TopicPartition,
        policy: &CompactionPolicy,
        format: &dyn RecordFormat,
    ) -> Result<Compaction, LogError> {
        let p = self.inner.partition(tp)?;
        let segment_bytes = self.inner.policy.segment_bytes;
        p.compact(policy, format, segment_bytes, |upto| {
            self.inner.mark_cleaned(&p.tp, upto)
        })
    }

    /// [`PartitionLog::read_batches`] on the calling thread (reads are positional file
    /// reads and do no async work).
    ///
    /// # Errors
    /// As `read_batches`.
    pub fn read_batches_blocking(
        &self,
        tp: &TopicPartition,
        from_offset: i64,
        max_bytes: usize,
    ) -> Result<BatchRead, LogError> {
        self.inner
            .partition(tp)?
            .read_batches(from_offset, max_bytes)
    }

    /// `tp`'s log start and high watermark: [`PartitionLog::bounds`] without a runtime.
    ///
    /// # Errors
    /// `UNKNOWN_TOPIC_OR_PARTITION`.
    pub fn bounds_blocking(&self, tp: &TopicPartition) -> Result<(i64, i64), LogError> {
        Ok(self.inner.partition(tp)?.bounds())
    }

    /// The bytes of `tp`'s segment files: [`PartitionLog::partition_size`] without a
    /// runtime.
    ///
    /// # Errors
    /// `UNKNOWN_TOPIC_OR_PARTITION`.
    pub fn partition_size_blocking(&self, tp: &TopicPartition) -> Result<u64, LogError> {
        Ok(self.inner.partition(tp)?.size())
    }
}

#[async_trait]
impl<F: Fs> PartitionLog for SegmentLog<F> {
    async fn create_topic(&self, name: &str, partitions: u32) -> Result<(), LogError> {
        self.create_topic_blocking(name, partitions)
    }

    /// Deletes `name`: the topics file without it is the commit point (a crash before it
    /// keeps the topic whole, after it the topic is gone and its leftover directories are
    /// replaced by a later topic of the same name); then its partition directories are
    /// removed and readers woken.
    async fn delete_topic(&self, name: &str) -> Result<(), LogError> {
        let inner = &self.inner;
        let _one = inner.create.lock().unwrap_or_else(PoisonError::into_inner);
        let text = {
            let topics = inner.topics();
            if !topics.contains_key(name) {
                return Err(LogError::UnknownTopicOrPartition {
                    partition: TopicPartition::new(name, 0),
                });
            }
            files::encode_topics(
                topics
                    .iter()
                    .filter(|(n, _)| &***n != name)
                    .map(|(_, t)| &t.entry),
            )
        };
        files::write_atomically(&*inner.fs, &inner.dir.join(files::TOPICS), text.as_bytes())?;
        let removed = inner
            .topics
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
        inner
            .cleaned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|tp, _| tp.topic() != name);
        for p in removed.iter().flat_map(|t| &t.partitions) {
            let dir = &p.dir;
            if let Err(e) = inner.fs.remove_dir_all(dir) {
                error!(dir = %dir.display(), error = %e, "a deleted topic's directory could not be removed");
            }
        }
        inner.signal();
        Ok(())
    }

    /// Grows `name` to `partitions`: the new partitions' directories first, then the topics
    /// file with the new count (the commit point).
    async fn create_partitions(&self, name: &str, partitions: u32) -> Result<(), LogError> {
        let inner = &self.inner;
        let _one = inner.create.lock().unwrap_or_else(PoisonError::into_inner);
        let current = {
            let topics = inner.topics();
            let t = topics
                .get(name)
                .ok_or_else(|| LogError::UnknownTopicOrPartition {
                    partition: TopicPartition::new(name, 0),
                })?;
            t.entry.partitions
        };
        if partitions <= current || partitions > coordinator_core::MAX_PARTITIONS_PER_TOPIC {
            return Err(LogError::InvalidPartitions {
                topic: name.to_string(),
                partitions,
            });
        }
        let mut added = Vec::with_capacity((partitions - current) as usize);
        for p in current..partitions {
            let tp = TopicPartition::new(name, p);
            let dir = inner.dir.join(files::partition_dir(&tp));
            let p = Partition::create(inner.fs.clone(), tp, dir)?;
            p.active_since
                .store(inner.now_ms(), std::sync::atomic::Ordering::Release);
            added.push(Arc::new(p));
        }
        files::sync_dir(&*inner.fs, &inner.dir)?;
        let text = {
            let topics = inner.topics();
            let entries: Vec<TopicEntry> = topics
                .values()
                .map(|t| {
                    let mut e = t.entry.clone();
                    if e.name == name {
                        e.partitions = partitions;
                    }
                    e
                })
                .collect();
            files::encode_topics(entries.iter())
        };
        files::write_atomically(&*inner.fs, &inner.dir.join(files::TOPICS), text.as_bytes())?;
        if let Some(t) = inner
            .topics
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(name)
        {
            t.entry.partitions = partitions;
            t.partitions.extend(added);
        }
        inner.signal();
        Ok(())
    }

    async fn topics(&self) -> Result<Vec<(String, u32)>, LogError> {
        Ok(self
            .inner
            .topics()
            .iter()
            .map(|(name, t)| (name.to_string(), t.entry.partitions))
            .collect())
    }

    async fn append_encoded(
        &self,
        tp: &TopicPartition,
        records: Vec<NewRecord>,
        encode: EncodeBatch<'_>,
    ) -> Result<i64, LogError> {
        let now = self.inner.now_ms();
        let timestamps: Vec<i64> = records.iter().map(|r| r.timestamp.unwrap_or(now)).collect();
        drop(records);
        self.append_encoded_timestamps(tp, &timestamps, encode)
            .await
    }

    async fn append_encoded_timestamps(
        &self,
        tp: &TopicPartition,
        timestamps: &[i64],
        encode: EncodeBatch<'_>,
    ) -> Result<i64, LogError> {
        let count = batch_count(tp, timestamps)?;
        let partition = self.inner.partition(tp)?;
        let now = self.inner.now_ms();
        let (base, rolled) = partition
            .append(
                self.inner.policy,
                self.inner.on_sync.as_ref(),
                count,
                |base| {
                    let data = encode(base);
                    let max = timestamps.iter().copied().max().unwrap_or(-1);
                    Ok((frame::encode(base, timestamps, &data)?, max))
                },
            )
            .await?;
        self.inner.appended(tp, partition, rolled, now);
        Ok(base)
    }

    async fn bounds(&self, tp: &TopicPartition) -> Result<(i64, i64), LogError> {
        self.bounds_blocking(tp)
    }

    async fn read_batches(
        &self,
        tp: &TopicPartition,
        from_offset: i64,
        max_bytes: usize,
    ) -> Result<BatchRead, LogError> {
        self.read_batches_blocking(tp, from_offset, max_bytes)
    }

    async fn offset_for_timestamp(
        &self,
        tp: &TopicPartition,
        timestamp: i64,
    ) -> Result<Option<(i64, i64)>, LogError> {
        self.inner.partition(tp)?.offset_for_timestamp(timestamp)
    }

    async fn partition_size(&self, tp: &TopicPartition) -> Result<u64, LogError> {
        self.partition_size_blocking(tp)
    }

    async fn delete_records(&self, tp: &TopicPartition, offset: i64) -> Result<i64, LogError> {
        self.inner.delete_records(tp, offset)
    }

    async fn apply_retention(
        &self,
        tp: &TopicPartition,
        retention_ms: i64,
        retention_bytes: i64,
    ) -> Result<i64, LogError> {
        let inner = &self.inner;
        let p = inner.partition(tp)?;
        let policy = Policy {
            retention_ms,
            retention_bytes,
            ..inner.policy
        };
        inner.retain(&p, policy)?;
        Ok(p.bounds().0)
    }

    async fn offset_of_max_timestamp(
        &self,
        tp: &TopicPartition,
    ) -> Result<Option<(i64, i64)>, LogError> {
        self.inner.partition(tp)?.offset_of_max_timestamp()
    }

    async fn roll_older_than(
        &self,
        tp: &TopicPartition,
        max_age_ms: i64,
    ) -> Result<bool, LogError> {
        let inner = &self.inner;
        let p = inner.partition(tp)?;
        let rolled = p.roll_if_older(inner.now_ms(), max_age_ms, inner.on_sync.as_ref())?;
        if rolled {
            info!(partition = %tp, max_age_ms, "segment rolled by age");
        }
        Ok(rolled)
    }

    async fn compact(
        &self,
        tp: &TopicPartition,
        policy: &CompactionPolicy,
        format: Arc<dyn RecordFormat>,
    ) -> Result<Compaction, LogError> {
        let p = self.inner.partition(tp)?;
        let policy = policy.clone();
        let shown = tp.clone();
        // Reads and rewrites whole segments: off the async threads.
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let segment_bytes = inner.policy.segment_bytes;
            p.compact(&policy, &*format, segment_bytes, |upto| {
                inner.mark_cleaned(&p.tp, upto)
            })
        })
        .await
        .unwrap_or_else(|e| {
            Err(LogError::storage(
                format!("the compaction of {shown} did not complete"),
                e,
            ))
        })
    }

    fn appends(&self) -> watch::Receiver<u64> {
        self.inner.appended.subscribe()
    }

    fn topic_id(&self, topic: &str) -> Option<[u8; 16]> {
        self.inner.topics().get(topic).map(|t| t.entry.id)
    }
}

impl<F: Fs> TopicMetadata for SegmentLog<F> {
    fn partition_count(&self, topic: &str) -> Option<u32> {
        self.inner.topics().get(topic).map(|t| t.entry.partitions)
    }

    fn topic_names(&self) -> Vec<String> {
        self.inner.topics().keys().map(|t| t.to_string()).collect()
    }
}

/// xorshift64*: the test suites' histories and damages are reproducible from their seed.
#[cfg(test)]
struct Rng(u64);

#[cfg(test)]
impl Rng {
    fn seeded(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A number below `n` (0 for `n` = 0).
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1) as u64) as usize
    }
}

#[cfg(test)]
mod compaction_tests;
#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod kafka_cleaner_tests;
#[cfg(test)]
mod regression_tests;
#[cfg(test)]
mod tests;
