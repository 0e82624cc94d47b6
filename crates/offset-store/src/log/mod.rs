//! [`LogStore`]: offsets with their metadata and groups' durable records in a compacted
//! partition of the segment log (Kafka's `__consumer_offsets` on one node).

mod files;
pub(crate) mod keyed;
pub(crate) mod record;
mod state;
mod writer;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use async_trait::async_trait;
use coordinator_core::{
    offsets_of, validate_committed, validate_offsets, with_no_metadata, CommitFence,
    CommittedOffsets, GroupRecord, OffsetMap, OffsetStore, StorageError, StorageErrorKind,
    TopicPartition,
};
use tokio::sync::oneshot;

use coordinator_core::{LogError, TopicMetadata};
use partition_log::SegmentLog;

use self::record::{commit_size, group_size, transaction_size, Frame, Record, MAX_BODY};
use self::state::Live;
use self::writer::{write_inline, Change, Policy, Request, Shared, SyncObserver, Writer};
use crate::fs::{Fs, StdFs};
use crate::group_commit::{io_error, run_blocking, WriteHold};
use coordinator_core::txn::TransactionRecord;

/// The largest single write (its records' bytes): a quarter of a frame's limit.
const MAX_WRITE: usize = MAX_BODY / 4;

/// An [`OffsetStore`] that keeps everything — offsets with Kafka's metadata
/// ([`keeps_metadata`](OffsetStore::keeps_metadata)) and groups' durable records
/// ([`keeps_groups`](OffsetStore::keeps_groups)) — in a compacted partition of a
/// [`SegmentLog`], as Kafka keeps them in `__consumer_offsets`.
///
/// # Files and records
///
/// The store's directory holds the segment log in `log/`, whose one topic,
/// `__consumer_offsets`, has one partition (`log/__consumer_offsets-0/`): the segment log's
/// files, frames, CRC-32C checksums, recovery, group commit and cleaner are the ones every
/// topic of the broker uses (see [`SegmentLog`] for the format and what survives a crash).
/// Each batch of the store is one batch of the partition, holding one record per committed
/// partition (group, partition, offset, leader epoch, metadata, commit time), per deleted
/// partition, per group record or tombstone and per transactional id's record or tombstone,
/// each with its offset delta in the batch, and keyed for the cleaner: a commit and the
/// deletion of the same offset share the key (group, topic, partition), a group's record and
/// its tombstone the group's, a transactional id's the id's.
///
/// # Memory and cost
///
/// The live state (every group's offsets with their metadata and every group record) is in
/// memory: reads never touch the disk, and a commit costs its own records (encoding, one
/// append) plus `O(log n)` map updates, whatever the number of offsets stored.
///
/// # Group commit
///
/// As in the JSON store (and with the same queue): callers validate their write, queue it
/// with its [`CommitFence`], and wait; the store's writer thread takes every write queued
/// since its last batch (up to [`max_batch`](LogStoreBuilder::max_batch)), encodes them as
/// **one batch**, appends it with **one write** and, by default, **one `fdatasync`**, then
/// updates memory, drops the fences and answers every caller with the batch's one outcome.
/// A batch lands or fails as a whole: if the write or the sync fails, the segment log cuts it
/// back, memory is untouched, and every caller of the batch gets an
/// [`Io`](StorageErrorKind::Io) error naming the file and the step. If even the cut fails,
/// the partition refuses every later append (each first retries the cut) until it succeeds;
/// should the store stop before then, the batch is still whole in the file, and the next
/// open finds it and keeps it: a write reported failed may then be there (as in Kafka, whose
/// recovery keeps every whole batch its log holds; a retried commit writes the same). (A
/// batch larger than 256 MiB is appended as several, each holding whole writes and
/// answering its own.)
///
/// Under a flush interval there is no sync to wait for, so a write that finds the writer
/// idle (nothing queued, no batch or sync under way, no [`hold_writes`](Self::hold_writes))
/// is written as a batch of its own by its caller, with one `write(2)` on the calling
/// thread, instead of a round trip to the writer thread and back: a lone synchronous
/// committer waits for no thread wake-up. A write that finds it busy queues as above, so
/// under load writes are batched as before; periodic syncs and compactions stay on the
/// thread.
///
/// # Durability
///
/// - **Default** (`fdatasync` per batch): a write is acknowledged once its batch is synced.
///   It survives a crash of the process and a power loss or kernel crash.
/// - **[`flush_interval_ms(N)`](LogStoreBuilder::flush_interval_ms)** (Kafka's
///   `log.flush.interval.ms`): a write is acknowledged once its batch is written to the OS
///   (the page cache); the segment log syncs it every `N` ms (a thread of its own). It
///   survives a crash of the process (the kernel has the bytes); a power loss or kernel
///   crash may lose the writes of the last `N` ms (and the log is then cut back to its last
///   intact batch, consistently: never half a batch). If a periodic sync fails, the segment
///   log logs an error and the store refuses every write (each retries the sync) until a
///   sync succeeds: writes acknowledged since the last good sync are then only as safe as
///   the page cache.
///
/// An observer set with [`on_sync`](LogStoreBuilder::on_sync) is told the duration of each
/// `fdatasync` of the partition's data that succeeds (each batch's by default, the periodic
/// ones under a flush interval, a segment's when it is closed), as Kafka's `LogFlushStats`
/// times its flushes.
///
/// # Compaction
///
/// When the partition's files exceed [`compaction_ratio`](LogStoreBuilder::compaction_ratio)
/// times the live data (and [`compaction_min_bytes`](LogStoreBuilder::compaction_min_bytes)),
/// the writer closes the active segment and runs a pass of the segment log's cleaner (Kafka's
/// log cleaner: the latest record of each key kept, at its offset) on a thread of its own,
/// with a zero dirty ratio and lag and a zero `delete.retention.ms`: a deleted key's
/// tombstone goes at the next pass. Commits go on into the new active segment meanwhile
/// (held only while a merge of small segments swaps its output in: two directory syncs), and
/// the partition is not compacted again before it has grown by the minimum since. What
/// survives a crash in the middle of a pass is the cleaner's to guarantee (see
/// [`SegmentLog`]).
///
/// # Recovery
///
/// [`open`](LogStore::open) opens the segment log (which checks every frame, cuts a torn
/// tail off with a `tracing` warning naming the file and byte, and refuses any other damage
/// naming the file and byte, as a [`Corrupt`](StorageErrorKind::Corrupt) error here) and
/// replays the partition into memory. A directory written by the store before its log was a
/// partition (`segment-<n>.log`, `snapshot-<n>.snap`) is read as it is (the old reader is
/// kept for this), its state written into the partition and synced, a marker
/// (`log.imported`) made durable, and only then are the old files removed; a crash before
/// the marker redoes the import from the old files, one after it finishes the removal.
///
/// # Ownership
///
/// A directory has one owner: `open` takes an exclusive `flock` on the directory itself
/// (no lock file, so removing any file in it cannot let a second owner in) and holds it for
/// the store's life; a second opener, in this process or another, is refused at once with
/// an [`Io`](StorageErrorKind::Io) error naming the directory. The kernel drops the lock
/// when the process ends, however it ends. (The segment log in `log/` holds its own lock
/// too.)
///
/// # Differences from Kafka's `__consumer_offsets`
///
/// - **One node, one partition.** Kafka's is a replicated topic of 50 partitions, a group's
///   records in the partition its id hashes to; here one partition holds every group.
/// - **Record format.** Kafka's records are versioned key/value pairs in v2 record
///   batches; here the store's own records (fixed-width little-endian fields) in the segment
///   log's frames, keyed as Kafka keys them (group, or group + topic + partition).
/// - **Sync policy.** Kafka by default never forces a sync (`log.flush.interval.messages` is
///   unbounded) and relies on replication; a single node has no replica, so the default here
///   syncs every batch, and Kafka's time-based policy is the option.
/// - **Compaction trigger.** Kafka's cleaner runs when the dirty ratio passes
///   `min.cleanable.dirty.ratio` (0.5); the store runs it when the files pass a multiple of
///   the live data, which bounds the disk used by the same multiple.
/// - Transactional offset commits and offset expiry are not the store's: the coordinator
///   expires offsets (`offsets.retention.minutes`) through ordinary deletes.
///
/// # Threads
///
/// One writer thread per store (`offset-log-writer`, started by `open`), a compaction
/// thread while a pass runs, and the segment log's background thread; under a flush
/// interval, also a caller writing into an idle store (see *Group commit*). Dropping the
/// store lets the writer finish what is queued, sync, wait for a running pass, and then
/// releases the locks; that wait blocks the dropping thread.
pub struct LogStore<F: Fs = StdFs> {
    shared: Arc<Shared>,
    /// The writer's state: the thread's, and under a flush interval also an idle store's
    /// callers' (see `writer::write_inline`).
    writer: Arc<Mutex<Writer<F>>>,
    thread: Option<JoinHandle<()>>,
    flush_interval: Option<Duration>,
    /// The owner lock on the directory, released after the writer has stopped.
    _lock: F::Lock,
}

/// Sizes and counts of a [`LogStore`], for tests, tools and benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogStats {
    /// Offsets stored.
    pub offsets: u64,
    /// Group records stored.
    pub groups: u64,
    /// About the bytes the live state takes encoded (the sum of its records' sizes).
    pub live_bytes: u64,
    /// Bytes of the group partition's segment files (as of the writer's last batch).
    pub log_bytes: u64,
    /// The bytes the last compaction pass of this store left in the segments it rewrote (0
    /// before one).
    #[deprecated(
        since = "0.1.1",
        note = "the store compacts its partition with the segment log's cleaner, not into \
                snapshots: `log_bytes` is what the files hold"
    )]
    pub snapshot_bytes: u64,
    /// Compaction passes this store completed.
    pub compactions: u64,
    /// Always 0: the group partition's segments are named by offset, not numbered.
    #[deprecated(
        since = "0.1.1",
        note = "the group partition's segments are named by offset; nothing numbers them"
    )]
    pub segment: u64,
    /// Batches this store appended (one write each).
    pub batches: u64,
    /// Writes (commits, deletes, group records) in those batches.
    pub writes: u64,
}

/// Options for opening a [`LogStore`]. [`LogStore::open`] is `builder().open(dir)`.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use offset_store::LogStore;
/// use offset_store::testing::SimFs;
///
/// // Kafka's log.flush.interval.ms = 100: acknowledged once written, synced every 100 ms.
/// let store = LogStore::builder()
///     .fs(SimFs::new())
///     .flush_interval_ms(100)
///     .open("/data")?;
/// assert_eq!(store.flush_interval_ms(), Some(100));
/// # Ok(())
/// # }
/// ```
pub struct LogStoreBuilder<F: Fs = StdFs> {
    fs: F,
    max_batch: usize,
    flush_interval: Option<Duration>,
    ratio: u64,
    min_bytes: u64,
    auto: bool,
    on_sync: Option<SyncObserver>,
}

impl LogStoreBuilder<StdFs> {
    /// The defaults: the real file system, no limit on a batch, `fdatasync` per batch,
    /// compaction at 2× the live data and at least 16 MiB of log.
    pub fn new() -> Self {
        LogStoreBuilder {
            fs: StdFs,
            max_batch: usize::MAX,
            flush_interval: None,
            ratio: 2,
            min_bytes: 16 << 20,
            auto: true,
            on_sync: None,
        }
    }

    /// [`open`](Self::open) on tokio's blocking pool, so replaying a large log does not hold
    /// an async worker.
    ///
    /// # Errors
    /// As [`LogStore::open`].
    pub async fn open_async(
        self,
        dir: impl Into<PathBuf>,
    ) -> Result<LogStore<StdFs>, StorageError> {
        let dir = dir.into();
        run_blocking(move || self.open(dir)).await
    }
}

impl Default for LogStoreBuilder<StdFs> {
    fn default() -> Self {
        Self::new()
    }
}

impl<F: Fs> LogStoreBuilder<F> {
    /// Writes through `fs` instead (a [`SimFs`](crate::testing::SimFs) in tests).
    pub fn fs<G: Fs>(self, fs: G) -> LogStoreBuilder<G> {
        LogStoreBuilder {
            fs,
            max_batch: self.max_batch,
            flush_interval: self.flush_interval,
            ratio: self.ratio,
            min_bytes: self.min_bytes,
            auto: self.auto,
            on_sync: self.on_sync,
        }
    }

    /// At most `n` writes share one batch; `0` is taken as `1` (group commit off).
    #[must_use]
    pub fn max_batch(mut self, n: usize) -> Self {
        self.max_batch = n.max(1);
        self
    }

    /// Kafka's `log.flush.interval.ms`: acknowledge a write once it is written to the OS and
    /// `fdatasync` at most `ms` milliseconds later (see *Durability* on [`LogStore`]). Without
    /// it (the default) every batch is synced before it is acknowledged.
    #[must_use]
    pub fn flush_interval_ms(mut self, ms: u64) -> Self {
        self.flush_interval = Some(Duration::from_millis(ms));
        self
    }

    /// Compact once the partition's files exceed `ratio` times the live data (default 2;
    /// `0` is taken as `1`).
    #[must_use]
    pub fn compaction_ratio(mut self, ratio: u64) -> Self {
        self.ratio = ratio.max(1);
        self
    }

    /// …and at least `bytes` (default 16 MiB), so a small store is not compacted over and
    /// over.
    #[must_use]
    pub fn compaction_min_bytes(mut self, bytes: u64) -> Self {
        self.min_bytes = bytes;
        self
    }

    /// Whether the store compacts by itself (default `true`); with `false` it compacts only
    /// when [`LogStore::compact`] asks, which makes the order of file operations
    /// deterministic for crash tests.
    #[must_use]
    pub fn auto_compaction(mut self, on: bool) -> Self {
        self.auto = on;
        self
    }

    /// Calls `observer` with the duration of each `fdatasync` of a log segment once it has
    /// succeeded (a failed one is not told): one per batch by default (so as many as
    /// [`LogStats::batches`]), or under [`flush_interval_ms`](Self::flush_interval_ms) each
    /// periodic sync and the last one when the store is closed; and the sync of a segment
    /// closed for a compaction. The time is the [`Fs::fsync`] call's alone, read with
    /// [`Instant`](std::time::Instant). Not told: a compaction's own syncs and directory
    /// syncs. It is what Kafka's
    /// `kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs` counts and times.
    ///
    /// The observer runs on the thread that synced (the writer thread, or a caller writing
    /// inline): keep it short and non-blocking (a counter, a histogram). Default: none, and
    /// then the store reads no clock for it.
    #[must_use]
    pub fn on_sync(mut self, observer: Arc<dyn Fn(Duration) + Send + Sync>) -> Self {
        self.on_sync = Some(observer);
        self
    }

    /// Opens (or creates) the log in the directory `dir`, which must exist.
    ///
    /// # Errors
    /// As [`LogStore::open`].
    pub fn open(self, dir: impl AsRef<Path>) -> Result<LogStore<F>, StorageError> {
        LogStore::open_built(dir.as_ref(), self)
    }
}

impl<F: Fs> fmt::Debug for LogStoreBuilder<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogStoreBuilder")
            .field("max_batch", &self.max_batch)
            .field("flush_interval", &self.flush_interval)
            .field("compaction_ratio", &self.ratio)
            .field("compaction_min_bytes", &self.min_bytes)
            .field("auto_compaction", &self.auto)
            .field("on_sync", &self.on_sync.is_some())
            .finish_non_exhaustive()
    }
}

impl LogStore<StdFs> {
    /// Options for opening a store.
    pub fn builder() -> LogStoreBuilder<StdFs> {
        LogStoreBuilder::new()
    }

    /// Opens the log in directory `dir` (which must exist; an empty directory is an empty
    /// store), replaying it on the calling thread (see [`open_async`](Self::open_async)).
    ///
    /// # Errors
    /// [`Io`](StorageErrorKind::Io) if another store owns the directory ("in use"), if it
    /// cannot be locked, listed or read, or a torn tail cannot be cut off;
    /// [`Corrupt`](StorageErrorKind::Corrupt) if the log is damaged anywhere but at its
    /// tail (see *Recovery*). Messages name the directory or the file and byte position.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, StorageError> {
        Self::builder().open(dir)
    }

    /// [`open`](Self::open) on tokio's blocking pool.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_async(dir: impl Into<PathBuf>) -> Result<Self, StorageError> {
        Self::builder().open_async(dir).await
    }
}

impl<F: Fs> LogStore<F> {
    /// Opens the log in `dir` on the file system `fs` (a [`SimFs`](crate::testing::SimFs) in
    /// tests), with the default options.
    ///
    /// # Errors
    /// As [`LogStore::open`].
    pub fn open_with_fs(dir: impl AsRef<Path>, fs: F) -> Result<Self, StorageError> {
        LogStore::builder().fs(fs).open(dir)
    }

    fn open_built(dir: &Path, options: LogStoreBuilder<F>) -> Result<Self, StorageError> {
        let LogStoreBuilder {
            fs,
            max_batch,
            flush_interval,
            ratio,
            min_bytes,
            auto,
            on_sync,
        } = options;
        // The lock first: a store that cannot own the directory touches nothing.
        let lock = fs.try_lock_dir(dir).map_err(|e| {
            let message = if e.kind() == io::ErrorKind::WouldBlock {
                format!(
                    "log directory `{}` is in use: another store (in this process or another) \
                     holds its lock; a directory has one owner at a time, so close that store \
                     first",
                    dir.display()
                )
            } else {
                format!("cannot lock log directory `{}`: {e}", dir.display())
            };
            io_error(message, e)
        })?;
        let old = files::list(&fs, dir)?;
        let marker = dir.join(IMPORTED);
        let log_dir = dir.join(LOG_DIR);
        let exists = |path: &Path| {
            fs.exists(path)
                .map_err(|e| io_error(format!("cannot look for `{}`", path.display()), e))
        };
        let log_exists = exists(&log_dir)?;
        // The marker counts only beside the log it marks (a log removed by hand since is
        // imported again, while the old files are there).
        let marker_exists = exists(&marker)?;
        let imported = marker_exists && log_exists;
        // A directory of the old engine's files is imported (read as they are, never
        // changed) into the group partition, from scratch if a crash interrupted an import.
        let import = if old.is_empty() || imported {
            None
        } else {
            let recovered = files::recover(&fs, dir)?;
            if log_exists {
                tracing::warn!(dir = %log_dir.display(), "an interrupted import: done again");
                fs.remove_dir_all(&log_dir).map_err(|e| {
                    io_error(
                        format!(
                            "cannot remove the interrupted import `{}`",
                            log_dir.display()
                        ),
                        e,
                    )
                })?;
                fs.fsync_dir(dir).map_err(|e| {
                    io_error(format!("cannot fsync directory `{}`", dir.display()), e)
                })?;
            }
            Some(recovered)
        };
        // Under a flush interval the segment log syncs the partition (its background
        // thread), and refuses appends after a failed sync until one succeeds.
        let flush_ms = flush_interval.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut builder = SegmentLog::builder(&log_dir)
            .segment_bytes(SEGMENT_BYTES)
            .retention_ms(-1)
            .retention_bytes(-1)
            .flush_interval_ms(flush_ms.map(|ms| ms.max(1)));
        if let Some(observer) = on_sync {
            builder = builder.on_sync(observer);
        }
        let log = builder.open_with_fs(fs).map_err(opened)?;
        let tp = TopicPartition::new(GROUP_TOPIC, 0);
        if log.partition_count(GROUP_TOPIC).is_none() {
            log.create_topic_blocking(GROUP_TOPIC, 1).map_err(opened)?;
        }
        if let Some(live) = &import {
            import_live(&log, &tp, live)?;
            write_marker(log.fs(), dir, &marker)?;
            tracing::info!(
                dir = %dir.display(), offsets = live.count, groups = live.groups.len(),
                "imported the group log of the old format"
            );
        }
        if !old.is_empty() {
            remove_old(log.fs(), dir, &old)?;
        }
        if !old.is_empty() || marker_exists {
            remove_marker(log.fs(), dir, &marker)?;
        }
        let live = replay(&log, &tp)?;
        tracing::debug!(
            dir = %dir.display(), groups = live.offsets.len(), offsets = live.count,
            records = live.groups.len(), "opened offset log"
        );
        let shared = Arc::new(Shared::new(dir.to_path_buf(), live, max_batch));
        let policy = Policy {
            ratio,
            min_bytes,
            auto,
            flush_interval,
        };
        let writer = Arc::new(Mutex::new(Writer::new(Arc::new(log), tp, policy)));
        let (for_thread, writer_for_thread) = (Arc::clone(&shared), Arc::clone(&writer));
        let thread = std::thread::Builder::new()
            .name("offset-log-writer".into())
            .spawn(move || Writer::run(&writer_for_thread, &for_thread))
            .map_err(|e| {
                io_error(
                    format!(
                        "cannot start the writer thread of log directory `{}`",
                        dir.display()
                    ),
                    e,
                )
            })?;
        Ok(LogStore {
            shared,
            writer,
            thread: Some(thread),
            flush_interval,
            _lock: lock,
        })
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The flush interval in milliseconds, if writes are acknowledged before their sync.
    pub fn flush_interval_ms(&self) -> Option<u64> {
        self.flush_interval
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    /// Sizes and counts (see [`LogStats`]).
    pub fn stats(&self) -> LogStats {
        let view = self.shared.read_view();
        let stats = &self.shared.stats;
        #[allow(deprecated)]
        LogStats {
            offsets: view.count,
            groups: view.groups.len() as u64,
            live_bytes: view.bytes,
            log_bytes: stats.log_bytes.load(Ordering::Relaxed),
            snapshot_bytes: stats.compacted_bytes.load(Ordering::Relaxed),
            compactions: stats.compactions.load(Ordering::Relaxed),
            segment: 0,
            batches: stats.batches.load(Ordering::Relaxed),
            writes: stats.writes.load(Ordering::Relaxed),
        }
    }

    /// Every group's committed offsets with their metadata, as a copy.
    pub fn snapshot(&self) -> std::collections::BTreeMap<String, CommittedOffsets> {
        self.shared
            .read_view()
            .offsets
            .iter()
            .map(|(g, o)| (g.clone(), (**o).clone()))
            .collect()
    }

    /// How many writes are queued for the writer and not yet in a batch.
    pub fn queued_writes(&self) -> usize {
        self.shared.queue.len()
    }

    /// Holds the writer back until the guard is dropped (as
    /// [`JsonFileStore::hold_writes`](crate::JsonFileStore::hold_writes)); never hold it
    /// across an `.await` of a write of this store.
    pub fn hold_writes(&self) -> WriteHold<'_> {
        WriteHold::new(&self.shared.queue, &self.shared.dir)
    }

    /// Compacts now: the active segment is closed, then a pass of the cleaner runs over the
    /// closed segments on the writer thread (writes queue meanwhile). Returns once the pass
    /// is done.
    ///
    /// # Errors
    /// [`Io`](StorageErrorKind::Io) naming the step that failed; the log is left as it was
    /// (every write stays readable and durable).
    pub async fn compact(&self) -> Result<(), StorageError> {
        self.write("", Change::Compact, CommitFence::none()).await
    }

    async fn write(
        &self,
        group: &str,
        change: Change,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        let (ack, answer) = oneshot::channel();
        let mut request = Request {
            group: group.to_owned(),
            change,
            fence,
            ack,
        };
        if self.flush_interval.is_some() && !matches!(request.change, Change::Compact) {
            // No sync to wait for: an idle writer's batch is written here (its answer is
            // then already in `answer`), a busy one's queued below.
            match write_inline(&self.writer, &self.shared, request) {
                Ok(()) => return answer.await.unwrap_or_else(|_| Err(self.writer_gone())),
                Err(busy) => request = busy,
            }
        }
        if self.shared.queue.push(request).is_err() {
            return Err(self.writer_gone());
        }
        answer.await.unwrap_or_else(|_| Err(self.writer_gone()))
    }

    fn writer_gone(&self) -> StorageError {
        StorageError::new(
            StorageErrorKind::Other,
            format!(
                "the writer thread of log directory `{}` stopped; the write may not have \
                 happened",
                self.shared.dir.display()
            ),
        )
    }

    fn too_large(&self, group: &str, bytes: usize) -> Result<(), StorageError> {
        if bytes > MAX_WRITE {
            return Err(StorageError::new(
                StorageErrorKind::Other,
                format!(
                    "a write of {bytes} bytes for group `{group}` is larger than the log's \
                     limit of {MAX_WRITE} bytes per write"
                ),
            ));
        }
        Ok(())
    }

    async fn commit_checked(
        &self,
        group: &str,
        offsets: CommittedOffsets,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        let bytes = offsets
            .iter()
            .map(|(tp, o)| commit_size(group, tp, o))
            .sum();
        self.too_large(group, bytes)?;
        self.write(group, Change::Commit(offsets), fence).await
    }
}

/// The segment log's subdirectory of a store's directory.
const LOG_DIR: &str = "log";
/// Made (atomically) once an import of the old engine's files is in the group partition and
/// durable: from then on the old files are leftovers, removed at open.
const IMPORTED: &str = "log.imported";
/// The group partition's topic, Kafka's name (one partition here holds every group).
const GROUP_TOPIC: &str = "__consumer_offsets";
/// The group partition's segment size: Kafka's `offsets.topic.segment.bytes` (100 MiB).
const SEGMENT_BYTES: u64 = 100 << 20;
/// The group state is written at import, and read at open, in pieces of about this size.
const CHUNK: usize = 1 << 20;

/// The segment log's error at open as the store's: damage the log found (an error without
/// an I/O cause) is [`Corrupt`](StorageErrorKind::Corrupt), the rest
/// [`Io`](StorageErrorKind::Io).
fn opened(e: LogError) -> StorageError {
    let kind = match &e {
        LogError::Storage { source: None, .. } => StorageErrorKind::Corrupt,
        _ => StorageErrorKind::Io,
    };
    StorageError::new(kind, format!("cannot open the group log: {e}")).with_source(e)
}

/// Replays the group partition into the state it holds.
fn replay<F: Fs>(log: &SegmentLog<F>, tp: &TopicPartition) -> Result<Live, StorageError> {
    let mut live = Live::default();
    each_record(log, tp, |_, record| {
        live.apply(record);
    })?;
    Ok(live)
}

/// Calls `f` with each record of the group partition and its offset, in order.
fn each_record<F: Fs>(
    log: &SegmentLog<F>,
    tp: &TopicPartition,
    mut f: impl FnMut(i64, Record),
) -> Result<(), StorageError> {
    let (mut next, end) = log.bounds_blocking(tp).map_err(opened)?;
    while next < end {
        let read = log.read_batches_blocking(tp, next, CHUNK).map_err(opened)?;
        let Some(last) = read.batches.last() else {
            break;
        };
        next = last.last_offset() + 1;
        for batch in &read.batches {
            let base = batch.base_offset();
            let data = batch.encoded().map_or(&[][..], |b| &b[..]);
            let records = keyed::decode_batch(data, base).map_err(|why| {
                StorageError::new(
                    StorageErrorKind::Corrupt,
                    format!(
                        "the group log in `{}` holds a batch at offset {base} that does not \
                         decode: {why}; nothing was changed",
                        log.dir().display()
                    ),
                )
            })?;
            for (offset, record) in records {
                f(offset, record);
            }
        }
    }
    Ok(())
}

/// Every record in the group partition of the store in `dir` (closed: the partition's log
/// is locked by its store), with its offset, in order; for tests and tools.
///
/// # Errors
/// The log cannot be opened, or a batch does not decode.
pub fn group_log_records<F: Fs>(fs: F, dir: &Path) -> Result<Vec<(i64, Record)>, StorageError> {
    let log = SegmentLog::builder(dir.join(LOG_DIR))
        .retention_ms(-1)
        .retention_bytes(-1)
        .open_with_fs(fs)
        .map_err(opened)?;
    let mut out = Vec::new();
    each_record(
        &log,
        &TopicPartition::new(GROUP_TOPIC, 0),
        |offset, record| {
            out.push((offset, record));
        },
    )?;
    Ok(out)
}

/// Writes the state `live` (imported from the old engine's files) into the empty group
/// partition, then syncs it.
fn import_live<F: Fs>(
    log: &SegmentLog<F>,
    tp: &TopicPartition,
    live: &Live,
) -> Result<(), StorageError> {
    let mut buf = Vec::with_capacity(CHUNK + 4096);
    let mut batch = Frame::batch(&mut buf);
    let append = |buf: &[u8], count: u32| {
        log.append_blocking(tp, count, writer::now_ms(), buf, false)
            .map(|_| ())
            .map_err(opened)
    };
    for (group, offsets) in &live.offsets {
        for (tp, o) in offsets.iter() {
            batch.commit(group, tp, o);
            if batch.len() >= CHUNK {
                let count = batch.finish();
                append(&buf, count)?;
                buf.clear();
                batch = Frame::batch(&mut buf);
            }
        }
    }
    for record in live.groups.values() {
        batch.group(record);
    }
    for record in live.transactions.values() {
        batch.transaction(record);
    }
    let count = batch.finish();
    if count > 0 {
        append(&buf, count)?;
    }
    log.sync().map_err(opened)
}

fn dir_io<'a>(dir: &'a Path, step: &'a str) -> impl FnOnce(io::Error) -> StorageError + 'a {
    move |e| {
        io_error(
            format!("cannot {step} in log directory `{}`", dir.display()),
            e,
        )
    }
}

/// Makes `marker` exist, durably and atomically (a temp file, synced, renamed).
fn write_marker<F: Fs>(fs: &F, dir: &Path, marker: &Path) -> Result<(), StorageError> {
    let temp = dir.join(format!("{IMPORTED}.tmp"));
    let file = fs
        .create_temp(&temp)
        .map_err(dir_io(dir, "create the import marker"))?;
    fs.write_all(&file, b"imported\n")
        .and_then(|()| fs.fsync(&file))
        .map_err(dir_io(dir, "write the import marker"))?;
    drop(file);
    fs.rename(&temp, marker)
        .and_then(|()| fs.fsync_dir(dir))
        .map_err(dir_io(dir, "rename the import marker"))
}

fn remove_marker<F: Fs>(fs: &F, dir: &Path, marker: &Path) -> Result<(), StorageError> {
    for path in [marker.to_path_buf(), dir.join(format!("{IMPORTED}.tmp"))] {
        if fs
            .exists(&path)
            .map_err(dir_io(dir, "look for the import marker"))?
        {
            fs.remove_file(&path)
                .map_err(dir_io(dir, "remove the import marker"))?;
        }
    }
    fs.fsync_dir(dir).map_err(dir_io(dir, "fsync"))
}

/// Removes the old engine's files, once their content is in the group partition.
fn remove_old<F: Fs>(fs: &F, dir: &Path, old: &files::Listing) -> Result<(), StorageError> {
    for path in old.paths(dir) {
        fs.remove_file(&path)
            .map_err(dir_io(dir, "remove an imported file"))?;
        tracing::info!(file = %path.display(), "removed a file of the old group log");
    }
    fs.fsync_dir(dir).map_err(dir_io(dir, "fsync"))
}

impl<F: Fs> Drop for LogStore<F> {
    fn drop(&mut self) {
        self.shared.queue.close();
        if let Some(thread) = self.thread.take() {
            // A panic there has already been reported by the panic hook.
            let _ = thread.join();
        }
    }
}

#[async_trait]
impl<F: Fs> OffsetStore for LogStore<F> {
    async fn committed(
        &self,
        group: &str,
        tp: &TopicPartition,
    ) -> Result<Option<i64>, StorageError> {
        Ok(self
            .shared
            .read_view()
            .offsets
            .get(group)
            .and_then(|offsets| offsets.get(tp))
            .map(|o| o.offset))
    }

    async fn list(&self, group: &str) -> Result<OffsetMap, StorageError> {
        Ok(self
            .shared
            .read_view()
            .offsets
            .get(group)
            .map(|o| offsets_of(o))
            .unwrap_or_default())
    }

    async fn groups(&self) -> Result<Vec<String>, StorageError> {
        Ok(self.shared.read_view().offsets.keys().cloned().collect())
    }

    async fn commit(
        &self,
        group: &str,
        offsets: &OffsetMap,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        validate_offsets(group, offsets)?;
        if offsets.is_empty() {
            return Ok(());
        }
        self.commit_checked(group, with_no_metadata(offsets), fence)
            .await
    }

    async fn delete<'a>(
        &self,
        group: &str,
        partitions: Option<&'a [TopicPartition]>,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        // Nothing to remove, nothing to write — but only if no earlier write is still on its
        // way (it could bring these partitions), so "idle" is checked before the view is read.
        let idle = self.shared.queue.is_idle();
        let present = match (self.shared.read_view().offsets.get(group), partitions) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(offsets), Some(gone)) => gone.iter().any(|tp| offsets.contains_key(tp)),
        };
        if idle && !present {
            return Ok(());
        }
        if let Some(gone) = partitions {
            let bytes = gone
                .iter()
                .map(|tp| 14 + group.len() + tp.topic().len())
                .sum();
            self.too_large(group, bytes)?;
        }
        self.write(group, Change::Delete(partitions.map(<[_]>::to_vec)), fence)
            .await
    }

    fn keeps_metadata(&self) -> bool {
        true
    }

    async fn list_with_metadata(&self, group: &str) -> Result<CommittedOffsets, StorageError> {
        Ok(self
            .shared
            .read_view()
            .offsets
            .get(group)
            .map(|o| (**o).clone())
            .unwrap_or_default())
    }

    async fn commit_with_metadata(
        &self,
        group: &str,
        offsets: &CommittedOffsets,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        validate_committed(group, offsets)?;
        if offsets.is_empty() {
            return Ok(());
        }
        self.commit_checked(group, offsets.clone(), fence).await
    }

    fn keeps_groups(&self) -> bool {
        true
    }

    async fn write_group(
        &self,
        group: &str,
        record: Option<&GroupRecord>,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        match record {
            Some(r) => {
                if r.group_id != group {
                    return Err(StorageError::new(
                        StorageErrorKind::Other,
                        format!(
                            "the record of group `{}` cannot be written as group `{group}`",
                            r.group_id
                        ),
                    ));
                }
                self.too_large(group, group_size(r))?;
            }
            None => {
                let idle = self.shared.queue.is_idle();
                if idle && !self.shared.read_view().groups.contains_key(group) {
                    return Ok(());
                }
            }
        }
        self.write(group, Change::Group(record.cloned()), fence)
            .await
    }

    async fn load_groups(&self) -> Result<Vec<GroupRecord>, StorageError> {
        Ok(self
            .shared
            .read_view()
            .groups
            .values()
            .map(|r| (**r).clone())
            .collect())
    }

    fn keeps_transactions(&self) -> bool {
        true
    }

    async fn write_transaction(
        &self,
        id: &str,
        record: Option<&TransactionRecord>,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        match record {
            Some(r) => {
                if r.transactional_id != id {
                    return Err(StorageError::new(
                        StorageErrorKind::Other,
                        format!(
                            "the record of transactional id `{}` cannot be written as `{id}`",
                            r.transactional_id
                        ),
                    ));
                }
                self.too_large(id, transaction_size(r))?;
            }
            None => {
                let idle = self.shared.queue.is_idle();
                if idle && !self.shared.read_view().transactions.contains_key(id) {
                    return Ok(());
                }
            }
        }
        self.write(id, Change::Transaction(record.cloned()), fence)
            .await
    }

    async fn load_transactions(&self) -> Result<Vec<TransactionRecord>, StorageError> {
        Ok(self
            .shared
            .read_view()
            .transactions
            .values()
            .map(|r| (**r).clone())
            .collect())
    }
}

impl<F: Fs> fmt::Debug for LogStore<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogStore")
            .field("dir", &self.shared.dir)
            .field("stats", &self.stats())
            .field("flush_interval", &self.flush_interval)
            .finish_non_exhaustive()
    }
}
