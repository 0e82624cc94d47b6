//! The writer thread of a [`LogStore`](super::LogStore): it takes every write queued since
//! its last batch, encodes them as one frame, appends it with one write and (by default) one
//! `fdatasync`, publishes the batch to readers, and only then releases the writes' fences and
//! answers their callers. It also rolls segments and starts compactions. Under a flush
//! interval a caller may write into an idle store itself ([`write_inline`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use coordinator_core::txn::TransactionRecord;
use coordinator_core::{CommitFence, CommittedOffsets, GroupRecord, TopicPartition};

use super::files::{list, segment_path, snapshot_path, temp_path};
use super::record::{Frame, MAX_BODY};
use super::state::Live;
use crate::fs::Fs;
use crate::group_commit::{answer, AbandonOnExit, Ack, Queue, Taken};

/// A frame is closed and another begun (between two writes) once it is this large.
const FRAME_SPLIT: usize = MAX_BODY / 4;
/// A snapshot is written in frames of about this size.
const SNAPSHOT_FRAME: usize = 1 << 20;

/// One write to one group.
pub(crate) enum Change {
    /// Merge these offsets.
    Commit(CommittedOffsets),
    /// Remove these partitions, or all of them.
    Delete(Option<Vec<TopicPartition>>),
    /// Replace the group's record, or remove it.
    Group(Option<GroupRecord>),
    /// Replace the transactional id's record (the request's key is the id), or remove it.
    Transaction(Option<TransactionRecord>),
    /// Compact now, and answer once the snapshot is in place.
    Compact,
}

/// A write waiting for the writer.
pub(crate) struct Request {
    pub(crate) group: String,
    pub(crate) change: Change,
    pub(crate) fence: CommitFence,
    pub(crate) ack: Ack,
}

/// Told the duration of each sync of a segment that succeeds
/// ([`LogStoreBuilder::on_sync`](super::LogStoreBuilder::on_sync)).
pub(crate) type SyncObserver = Arc<dyn Fn(Duration) + Send + Sync>;

/// The error of a failed step: the message every caller of the batch gets, and the cause.
type Failure = (String, std::io::Error);

/// What the callers and the writer share.
pub(crate) struct Shared {
    pub(crate) dir: PathBuf,
    /// What reads return: exactly what the log holds. Only the writer changes it, once per
    /// batch, after the batch is written (and, by default, durable).
    view: RwLock<Live>,
    pub(crate) queue: Queue<Request>,
    pub(crate) max_batch: usize,
    pub(crate) stats: Stats,
}

/// Counters the writer keeps for [`LogStats`](super::LogStats).
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) log_bytes: AtomicU64,
    pub(crate) snapshot_bytes: AtomicU64,
    pub(crate) compactions: AtomicU64,
    pub(crate) segment: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) writes: AtomicU64,
}

impl Shared {
    pub(crate) fn new(dir: PathBuf, live: Live, max_batch: usize) -> Shared {
        Shared {
            dir,
            view: RwLock::new(live),
            queue: Queue::default(),
            max_batch: max_batch.max(1),
            stats: Stats::default(),
        }
    }

    pub(crate) fn read_view(&self) -> RwLockReadGuard<'_, Live> {
        // Nothing panics while the lock is held, so a poisoned lock still guards a whole state.
        self.view.read().unwrap_or_else(PoisonError::into_inner)
    }
}

/// When to compact.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Policy {
    /// Compact once the log since the snapshot exceeds this multiple of the live data…
    pub(crate) ratio: u64,
    /// …and this many bytes.
    pub(crate) min_bytes: u64,
    /// Whether the writer compacts by itself (else only on request).
    pub(crate) auto: bool,
    /// Acknowledge once written and sync every this often (else sync every batch).
    pub(crate) flush_interval: Option<Duration>,
}

/// A compaction running on its own thread, and the log bytes it will make redundant.
struct Running {
    thread: JoinHandle<Result<u64, Failure>>,
    base: u64,
    covered: u64,
}

/// What the writer thread owns.
pub(crate) struct Writer<F: Fs> {
    fs: Arc<F>,
    dir: PathBuf,
    /// The segment appended to, its file and its intact length.
    seg: u64,
    file: F::File,
    len: u64,
    /// Bytes of every segment since the snapshot's base.
    log_bytes: u64,
    /// A failed batch left bytes that could not be cut off: cut them before the next write.
    broken: Option<String>,
    /// (flush interval) Written bytes not yet synced, since when, and a sync that failed.
    unsynced: bool,
    last_sync: Instant,
    sync_failed: Option<String>,
    policy: Policy,
    /// Told each sync of the segment's data.
    on_sync: Option<SyncObserver>,
    running: Option<Running>,
    /// No automatic compaction before the log reaches this many bytes (after a failure).
    retry_at: u64,
    buf: Vec<u8>,
}

impl<F: Fs> Writer<F> {
    pub(crate) fn new(
        fs: Arc<F>,
        dir: PathBuf,
        (seg, file, len): (u64, F::File, u64),
        log_bytes: u64,
        policy: Policy,
        on_sync: Option<SyncObserver>,
    ) -> Self {
        Writer {
            fs,
            dir,
            seg,
            file,
            len,
            log_bytes,
            broken: None,
            unsynced: false,
            last_sync: Instant::now(),
            sync_failed: None,
            policy,
            on_sync,
            running: None,
            retry_at: 0,
            buf: Vec::new(),
        }
    }

    /// The writer thread's loop: one batch after another until the queue closes, then a last
    /// sync and the end of any compaction. The thread holds the writer's state only while it
    /// works, never while it waits, so that a caller may write a batch itself meanwhile
    /// ([`write_inline`]).
    pub(crate) fn run(writer: &Mutex<Self>, shared: &Shared) {
        let _abandon = AbandonOnExit(&shared.queue);
        // A panic while the state was held is a bug; the log itself is recovered at the next
        // open, so the writer carries on with the state as the panic left it.
        let lock = || writer.lock().unwrap_or_else(PoisonError::into_inner);
        lock().publish_stats(shared);
        let mut batch = Vec::new();
        loop {
            let deadline = lock().sync_deadline();
            let taken = shared.queue.take(shared.max_batch, &mut batch, deadline);
            let mut this = lock();
            match taken {
                Taken::Batch => this.write_batch(shared, &mut batch, true),
                Taken::TimedOut => {}
                Taken::Woken => this.maintain(shared),
                Taken::Closed => break,
            }
            if let Some(every) = this.policy.flush_interval {
                if (this.unsynced || this.sync_failed.is_some())
                    && this.last_sync.elapsed() >= every
                {
                    let _ = this.sync();
                }
            }
        }
        let mut this = lock();
        if this.unsynced {
            let _ = this.sync();
        }
        this.finish_compaction(shared, true);
    }

    /// (flush interval) When the next periodic sync is due, if one is.
    fn sync_deadline(&self) -> Option<Instant> {
        match self.policy.flush_interval {
            // An interval too long for the clock is no deadline at all.
            Some(every) if self.unsynced || self.sync_failed.is_some() => {
                self.last_sync.checked_add(every)
            }
            _ => None,
        }
    }

    /// What follows a batch: taking in a finished compaction, starting one that is due.
    fn maintain(&mut self, shared: &Shared) {
        self.finish_compaction(shared, false);
        if self.should_compact(shared) {
            if let Err((message, _)) = self.compact(shared, true) {
                tracing::warn!(dir = %self.dir.display(), error = %message, "compaction failed");
            }
        }
        self.publish_stats(shared);
    }

    /// Whether [`maintain`](Self::maintain) has something to do.
    fn wants_maintenance(&self, shared: &Shared) -> bool {
        self.running
            .as_ref()
            .is_some_and(|running| running.thread.is_finished())
            || self.should_compact(shared)
    }

    fn segment(&self) -> PathBuf {
        segment_path(&self.dir, self.seg)
    }

    /// (flush interval) Syncs what was written; a failure is kept, and fails every write
    /// until a later sync succeeds.
    fn sync(&mut self) -> Result<(), Failure> {
        self.last_sync = Instant::now();
        match self.sync_data() {
            Ok(()) => {
                self.unsynced = false;
                self.sync_failed = None;
                Ok(())
            }
            Err(e) => {
                let message = format!(
                    "the periodic fdatasync of log segment `{}` failed: {e}; writes \
                     acknowledged since the last good sync may be lost on power loss, and \
                     the store refuses writes until a sync succeeds",
                    self.segment().display()
                );
                tracing::error!(file = %self.segment().display(), error = %e, "{message}");
                self.sync_failed = Some(message.clone());
                Err((message, e))
            }
        }
    }

    /// Syncs the segment's data, telling the observer (if any) how long a successful sync
    /// took: the flushes of the log, not the syncs of a cut or a snapshot.
    fn sync_data(&mut self) -> std::io::Result<()> {
        let Some(observer) = &self.on_sync else {
            return self.fs.fsync(&self.file);
        };
        let start = Instant::now();
        self.fs.fsync(&self.file)?;
        observer(start.elapsed());
        Ok(())
    }

    /// Encodes, appends and publishes one batch, then answers it; then, if `maintain`, does
    /// what follows a batch (a caller writing inline leaves that to the thread).
    fn write_batch(&mut self, shared: &Shared, batch: &mut Vec<Request>, maintain: bool) {
        let mut waiting = Vec::with_capacity(batch.len());
        let mut compacts = Vec::new();
        let mut changes = Vec::with_capacity(batch.len());
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let mut frame = Frame::begin(&mut buf);
        let mut records = 0usize;
        for Request {
            group,
            change,
            fence,
            ack,
        } in batch.drain(..)
        {
            if matches!(change, Change::Compact) {
                compacts.push((fence, ack));
                continue;
            }
            if frame.len() > FRAME_SPLIT {
                frame.finish();
                frame = Frame::begin(&mut buf);
            }
            match &change {
                Change::Commit(offsets) => {
                    for (tp, o) in offsets {
                        frame.commit(&group, tp, o);
                    }
                    records += offsets.len();
                }
                Change::Delete(None) => {
                    // One deletion per partition (as Kafka writes a tombstone per offset when a
                    // group is deleted): each has the key of the commit it deletes, which a
                    // log compacted by key needs; a deletion of the whole group has none.
                    // The partitions: the group's now, and those committed earlier in this
                    // batch (deleting one the group does not have changes nothing).
                    let mut partitions: std::collections::BTreeSet<TopicPartition> = shared
                        .read_view()
                        .offsets
                        .get(&group)
                        .map(|o| o.keys().cloned().collect())
                        .unwrap_or_default();
                    for (g, c) in &changes {
                        if let (true, Change::Commit(offsets)) = (*g == group, c) {
                            partitions.extend(offsets.keys().cloned());
                        }
                    }
                    for tp in &partitions {
                        frame.delete_offset(&group, tp);
                    }
                    records += partitions.len();
                }
                Change::Delete(Some(partitions)) => {
                    for tp in partitions {
                        frame.delete_offset(&group, tp);
                    }
                    records += partitions.len();
                }
                Change::Group(Some(record)) => {
                    frame.group(record);
                    records += 1;
                }
                Change::Group(None) => {
                    frame.group_tombstone(&group);
                    records += 1;
                }
                Change::Transaction(Some(record)) => {
                    frame.transaction(record);
                    records += 1;
                }
                Change::Transaction(None) => {
                    frame.transaction_tombstone(&group);
                    records += 1;
                }
                Change::Compact => {}
            }
            waiting.push((fence, ack));
            changes.push((group, change));
        }
        frame.finish();
        let outcome = if records == 0 {
            Ok(())
        } else {
            self.append(&buf)
        };
        self.buf = buf;
        if outcome.is_ok() && records > 0 {
            shared.stats.batches.fetch_add(1, Ordering::Relaxed);
            let n = waiting.len() as u64;
            shared.stats.writes.fetch_add(n, Ordering::Relaxed);
            let mut view = shared.view.write().unwrap_or_else(PoisonError::into_inner);
            for (group, change) in changes {
                apply(&mut view, &group, change);
            }
        }
        if let Err((message, _)) = &outcome {
            tracing::warn!(
                file = %self.segment().display(), writes = waiting.len(), error = %message,
                "log write failed"
            );
        }
        // The batch is visible (or failed and changed nothing): only now may the fences go.
        answer(&shared.queue, waiting, &outcome);
        if !compacts.is_empty() {
            self.finish_compaction(shared, true);
            let result = self.compact(shared, false);
            answer(&shared.queue, compacts, &result);
            self.publish_stats(shared);
        } else if maintain {
            self.maintain(shared);
        } else {
            self.publish_stats(shared);
        }
    }

    /// Appends `bytes` (one or more whole frames) with one write and, by default, one
    /// `fdatasync`. On failure the segment is cut back to where it was.
    fn append(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        self.repair()?;
        if self.sync_failed.is_some() {
            self.sync()?;
        }
        if let Err(e) = self.fs.write_all(&self.file, bytes) {
            return Err(self.undo("write", e));
        }
        if self.policy.flush_interval.is_none() {
            if let Err(e) = self.sync_data() {
                return Err(self.undo("fdatasync", e));
            }
        } else {
            self.unsynced = true;
        }
        self.len += bytes.len() as u64;
        self.log_bytes += bytes.len() as u64;
        Ok(())
    }

    /// Cuts off what a failed batch left at the end of the segment, if a cut failed before.
    fn repair(&mut self) -> Result<(), Failure> {
        if let Some(why) = self.broken.clone() {
            self.cut_back().map_err(|(cut, e)| {
                (
                    format!(
                        "the log cannot take writes: {why}; cutting it off again failed: {cut}"
                    ),
                    e,
                )
            })?;
            self.broken = None;
        }
        Ok(())
    }

    /// The failure of `step`, after cutting the segment back to its intact length.
    fn undo(&mut self, step: &str, e: std::io::Error) -> Failure {
        let mut message = format!(
            "cannot append to log segment `{}`: {step} failed: {e}",
            self.segment().display()
        );
        match self.cut_back() {
            Ok(()) => message.push_str("; the batch was cut off again, nothing changed"),
            Err((cut, _)) => {
                message.push_str(&format!(
                    "; cutting the batch off failed too ({cut}), so the store refuses writes \
                     until it can (a reopen also cuts it off)"
                ));
                self.broken = Some(message.clone());
            }
        }
        (message, e)
    }

    /// Truncates the segment to its intact length and syncs that.
    fn cut_back(&mut self) -> Result<(), Failure> {
        let path = self.segment();
        self.fs
            .truncate(&self.file, self.len)
            .map_err(|e| (format!("truncating `{}` failed: {e}", path.display()), e))?;
        self.fs
            .fsync(&self.file)
            .map_err(|e| (format!("fdatasync of `{}` failed: {e}", path.display()), e))?;
        self.unsynced = false;
        Ok(())
    }

    fn should_compact(&self, shared: &Shared) -> bool {
        if !self.policy.auto || self.running.is_some() || self.log_bytes < self.retry_at {
            return false;
        }
        let live = shared.read_view().bytes;
        self.log_bytes
            > self
                .policy
                .min_bytes
                .max(self.policy.ratio.saturating_mul(live))
    }

    /// Rolls to a new segment and writes a snapshot of the state before it: on its own
    /// thread if `background`, else here.
    fn compact(&mut self, shared: &Shared, background: bool) -> Result<(), Failure> {
        let result = self.roll().and_then(|()| {
            let snapshot = shared.read_view().clone();
            let (fs, dir, base) = (Arc::clone(&self.fs), self.dir.clone(), self.seg);
            let covered = self.log_bytes - self.len;
            if background {
                let thread = std::thread::Builder::new()
                    .name("offset-log-compactor".into())
                    .spawn(move || write_snapshot(&*fs, &dir, base, &snapshot))
                    .map_err(|e| (format!("cannot start the compaction thread: {e}"), e))?;
                self.running = Some(Running {
                    thread,
                    base,
                    covered,
                });
                Ok(())
            } else {
                let bytes = write_snapshot(&*fs, &dir, base, &snapshot)?;
                self.compacted(shared, base, covered, bytes);
                Ok(())
            }
        });
        if result.is_err() {
            self.retry_at = self.log_bytes + self.policy.min_bytes.max(1);
        }
        result
    }

    /// Starts segment `seg + 1`: the current one is made durable first (under a flush
    /// interval), and the new one's name before anything is written to it.
    fn roll(&mut self) -> Result<(), Failure> {
        // A segment is left only once it ends with a whole frame: a failed batch's bytes
        // must not end up in the middle of the log.
        self.repair()?;
        if self.unsynced {
            self.sync()?;
        }
        let next = self.seg + 1;
        let path = segment_path(&self.dir, next);
        let file = self
            .fs
            .open_append(&path)
            .map_err(|e| (format!("cannot create `{}`: {e}", path.display()), e))?;
        if let Err(e) = self.fs.fsync_dir(&self.dir) {
            // Best effort: writes go on into the current segment, and an empty segment after
            // it would only make its tail look like the middle of the log.
            drop(file);
            let _ = self.fs.remove_file(&path);
            return Err((
                format!("fsync of directory `{}` failed: {e}", self.dir.display()),
                e,
            ));
        }
        self.file = file;
        self.seg = next;
        self.len = 0;
        Ok(())
    }

    /// Takes in the end of a background compaction, if it has ended (or waits for it).
    fn finish_compaction(&mut self, shared: &Shared, wait: bool) {
        let done = match &self.running {
            Some(running) => wait || running.thread.is_finished(),
            None => false,
        };
        if !done {
            return;
        }
        let Some(Running {
            thread,
            base,
            covered,
        }) = self.running.take()
        else {
            return;
        };
        match thread.join() {
            Ok(Ok(bytes)) => self.compacted(shared, base, covered, bytes),
            Ok(Err((message, _))) => {
                self.retry_at = self.log_bytes + self.policy.min_bytes.max(1);
                tracing::warn!(dir = %self.dir.display(), error = %message, "compaction failed");
            }
            Err(_) => tracing::warn!(dir = %self.dir.display(), "the compaction thread panicked"),
        }
    }

    fn compacted(&mut self, shared: &Shared, base: u64, covered: u64, bytes: u64) {
        self.log_bytes = self.log_bytes.saturating_sub(covered);
        shared.stats.snapshot_bytes.store(bytes, Ordering::Relaxed);
        shared.stats.compactions.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(dir = %self.dir.display(), base, bytes, "log compacted");
    }

    fn publish_stats(&self, shared: &Shared) {
        shared
            .stats
            .log_bytes
            .store(self.log_bytes, Ordering::Relaxed);
        shared.stats.segment.store(self.seg, Ordering::Relaxed);
    }
}

/// (flush interval) Writes `request` as a batch of its own on the calling thread, when the
/// writer is idle: nothing queued, no batch or sync under way. That saves the round trip to
/// the writer thread and back (two wake-ups across threads) that a lone committer would
/// otherwise wait for; a write costs one `write(2)` into the page cache, with no sync, so it
/// may run on an async worker. Compactions and periodic syncs stay on the thread, which is
/// woken when one is due. Hands `request` back, untouched, when the writer is busy (the
/// caller queues it: under load, writes are batched as before).
///
/// Order is kept: a write goes inline only when none is queued, and a batch is appended and
/// published under the writer's state, so the log and the view agree on every write's place.
#[expect(
    clippy::result_large_err,
    reason = "the request goes back to the caller by move; boxing it would allocate per commit"
)]
pub(crate) fn write_inline<F: Fs>(
    writer: &Mutex<Writer<F>>,
    shared: &Shared,
    request: Request,
) -> Result<(), Request> {
    debug_assert!(!matches!(request.change, Change::Compact));
    // Busy (or poisoned by a panic, left to the thread): queue it.
    let Ok(mut this) = writer.try_lock() else {
        return Err(request);
    };
    if this.policy.flush_interval.is_none() || !shared.queue.start_inline() {
        return Err(request);
    }
    let was_unsynced = this.unsynced || this.sync_failed.is_some();
    this.write_batch(shared, &mut vec![request], false);
    let now_unsynced = this.unsynced || this.sync_failed.is_some();
    if (now_unsynced && !was_unsynced) || this.wants_maintenance(shared) {
        // The thread may be waiting with no deadline, or without knowing of the compaction.
        shared.queue.poke();
    }
    Ok(())
}

/// Applies one written change to the live state.
fn apply(live: &mut Live, group: &str, change: Change) {
    match change {
        Change::Commit(offsets) => {
            for (tp, o) in offsets {
                live.commit(group, tp, o);
            }
        }
        Change::Delete(None) => live.delete_group_offsets(group),
        Change::Delete(Some(partitions)) => {
            for tp in &partitions {
                live.delete_offset(group, tp);
            }
        }
        Change::Group(record) => live.set_group(group, record),
        Change::Transaction(record) => live.set_transaction(group, record),
        Change::Compact => {}
    }
}

/// Writes `live` as the snapshot of base `base` (temp file, fsync, rename, directory fsync),
/// then removes the snapshots and segments it makes redundant. Its size in bytes.
fn write_snapshot<F: Fs>(fs: &F, dir: &Path, base: u64, live: &Live) -> Result<u64, Failure> {
    let temp = temp_path(dir, base);
    let target = snapshot_path(dir, base);
    let fail = |step: &str, e: std::io::Error| {
        let _ = fs.remove_file(&temp);
        (
            format!(
                "cannot write snapshot `{}`: {step} failed: {e}",
                target.display()
            ),
            e,
        )
    };
    let file = fs.create_temp(&temp).map_err(|e| fail("creating", e))?;
    let mut total = 0u64;
    let mut buf = Vec::with_capacity(SNAPSHOT_FRAME + 4096);
    let mut frame = Frame::begin(&mut buf);
    frame.snapshot_start(base);
    for (group, offsets) in &live.offsets {
        for (tp, o) in offsets.iter() {
            frame.commit(group, tp, o);
            if frame.len() >= SNAPSHOT_FRAME {
                frame.finish();
                fs.write_all(&file, &buf).map_err(|e| fail("writing", e))?;
                total += buf.len() as u64;
                buf.clear();
                frame = Frame::begin(&mut buf);
            }
        }
    }
    for record in live.groups.values() {
        frame.group(record);
    }
    for record in live.transactions.values() {
        frame.transaction(record);
    }
    frame.snapshot_end(live.count, live.groups.len() as u64);
    frame.finish();
    fs.write_all(&file, &buf).map_err(|e| fail("writing", e))?;
    total += buf.len() as u64;
    fs.fsync(&file).map_err(|e| fail("fsync", e))?;
    drop(file);
    fs.rename(&temp, &target).map_err(|e| fail("renaming", e))?;
    fs.fsync_dir(dir).map_err(|e| {
        (
            format!(
                "cannot make snapshot `{}` durable: fsync of directory `{}` failed: {e}",
                target.display(),
                dir.display()
            ),
            e,
        )
    })?;
    // The snapshot is in place: what it covers can go. Best effort: a leftover costs disk
    // space, and the next open removes it.
    if let Ok(listing) = list(fs, dir) {
        let old_snapshots = listing.snapshots.iter().filter(|&&n| n < base);
        let old_segments = listing.segments.iter().filter(|&&n| n < base);
        let paths = old_snapshots
            .map(|&n| snapshot_path(dir, n))
            .chain(old_segments.map(|&n| segment_path(dir, n)));
        for path in paths {
            if let Err(e) = fs.remove_file(&path) {
                tracing::warn!(file = %path.display(), error = %e, "cannot remove a compacted file");
            }
        }
        let _ = fs.fsync_dir(dir);
    }
    Ok(total)
}
