//! The writer thread of a [`LogStore`](super::LogStore): it takes every write queued since
//! its last batch, encodes them as one batch of the group partition, appends it with one
//! write and (by default) one `fdatasync`, publishes the batch to readers, and only then
//! releases the writes' fences and answers their callers. It also starts compactions (a
//! roll of the partition's active segment, then a pass of the segment log's cleaner on a
//! thread of its own). Under a flush interval a caller may write into an idle store itself
//! ([`write_inline`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use coordinator_core::txn::TransactionRecord;
use coordinator_core::{CommitFence, CommittedOffsets, GroupRecord, LogError, TopicPartition};
use partition_log::compaction::{Compaction, CompactionPolicy};
use partition_log::SegmentLog;

use super::keyed::GroupRecords;
use super::record::{Frame, MAX_BODY};
use super::state::Live;
use crate::fs::Fs;
use crate::group_commit::{answer, copy_io_error, AbandonOnExit, Ack, Queue, Taken};

/// A batch is closed and another begun (between two writes) once it is this large, so that
/// each is well within the segment log's largest frame.
const BATCH_SPLIT: usize = MAX_BODY / 4;

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
    /// The bytes the last compaction pass left in the segments it rewrote.
    pub(crate) compacted_bytes: AtomicU64,
    pub(crate) compactions: AtomicU64,
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
    /// Acknowledge once written, synced by the segment log every this often (else sync
    /// every batch).
    pub(crate) flush_interval: Option<Duration>,
}

/// The milliseconds since the Unix epoch: the timestamp of the group partition's batches.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The group partition's failure as a batch's: the message every caller of the batch gets
/// (the segment log's, with its I/O cause), and the cause.
pub(crate) fn failure(e: &LogError) -> Failure {
    match e {
        LogError::Storage { message, source } => {
            let io = source
                .as_deref()
                .and_then(|s| s.downcast_ref::<std::io::Error>());
            // The message names the cause once (the segment log may have put it in).
            let shown = match source {
                Some(cause) if !message.contains(&cause.to_string()) => {
                    format!("{message}: {cause}")
                }
                _ => message.clone(),
            };
            let cause = match io {
                Some(io) => copy_io_error(io),
                None => std::io::Error::other(shown.clone()),
            };
            (shown, cause)
        }
        other => (other.to_string(), std::io::Error::other(other.to_string())),
    }
}

/// The cleaner's settings for the group partition: every closed segment is compactable (a
/// zero dirty ratio and lag: the store decides when), and a deleted key's tombstone goes at
/// the next pass (no reader of the partition needs to see it: the store's state is
/// replayed whole at open, and a key without a record is simply absent, as with Kafka's
/// `offsets.retention` of a group whose tombstone was cleaned).
fn cleaner_policy() -> CompactionPolicy {
    let mut policy = CompactionPolicy::at(now_ms());
    policy.min_cleanable_dirty_ratio = 0.0;
    policy.min_compaction_lag_ms = 0;
    policy.delete_retention_ms = 0;
    policy
}

/// What the writer thread owns.
pub(crate) struct Writer<F: Fs> {
    /// The segment log holding the group partition, and the partition.
    log: Arc<SegmentLog<F>>,
    tp: TopicPartition,
    policy: Policy,
    /// A compaction pass running on its own thread.
    running: Option<JoinHandle<Result<Compaction, LogError>>>,
    /// No automatic compaction before the partition reaches this many bytes (after a pass
    /// that left it above the threshold, or a failure).
    retry_at: u64,
    buf: Vec<u8>,
}

impl<F: Fs> Writer<F> {
    pub(crate) fn new(log: Arc<SegmentLog<F>>, tp: TopicPartition, policy: Policy) -> Self {
        Writer {
            log,
            tp,
            policy,
            running: None,
            retry_at: 0,
            buf: Vec::new(),
        }
    }

    /// The writer thread's loop: one batch after another until the queue closes, then the
    /// end of any compaction (the segment log syncs what is unsynced when it is dropped).
    /// The thread holds the writer's state only while it works, never while it waits, so
    /// that a caller may write a batch itself meanwhile ([`write_inline`]).
    pub(crate) fn run(writer: &Mutex<Self>, shared: &Shared) {
        let _abandon = AbandonOnExit(&shared.queue);
        // A panic while the state was held is a bug; the log itself is recovered at the next
        // open, so the writer carries on with the state as the panic left it.
        let lock = || writer.lock().unwrap_or_else(PoisonError::into_inner);
        lock().publish_stats(shared);
        let mut batch = Vec::new();
        loop {
            let taken = shared.queue.take(shared.max_batch, &mut batch, None);
            let mut this = lock();
            match taken {
                Taken::Batch => this.write_batch(shared, &mut batch, true),
                Taken::TimedOut => {}
                Taken::Woken => this.maintain(shared),
                Taken::Closed => break,
            }
        }
        lock().finish_compaction(shared, true);
    }

    /// What follows a batch: taking in a finished compaction, starting one that is due.
    fn maintain(&mut self, shared: &Shared) {
        self.finish_compaction(shared, false);
        if self.should_compact(shared) {
            if let Err((message, _)) = self.compact(shared, true) {
                tracing::warn!(dir = %shared.dir.display(), error = %message, "compaction failed");
            }
        }
        self.publish_stats(shared);
    }

    /// Whether [`maintain`](Self::maintain) has something to do.
    fn wants_maintenance(&self, shared: &Shared) -> bool {
        self.running.as_ref().is_some_and(JoinHandle::is_finished) || self.should_compact(shared)
    }

    fn log_bytes(&self) -> u64 {
        self.log.partition_size_blocking(&self.tp).unwrap_or(0)
    }

    /// Encodes, appends and publishes one batch, then answers it; then, if `maintain`, does
    /// what follows a batch (a caller writing inline leaves that to the thread). A batch
    /// larger than [`BATCH_SPLIT`] is appended as several, each answering its own writes.
    fn write_batch(&mut self, shared: &Shared, batch: &mut Vec<Request>, maintain: bool) {
        let mut compacts = Vec::new();
        let mut requests = batch.drain(..).peekable();
        while requests.peek().is_some() {
            let mut waiting = Vec::new();
            let mut changes = Vec::new();
            let mut buf = std::mem::take(&mut self.buf);
            buf.clear();
            let mut frame = Frame::batch(&mut buf);
            let mut records = 0usize;
            while frame.len() <= BATCH_SPLIT {
                let Some(Request {
                    group,
                    change,
                    fence,
                    ack,
                }) = requests.next()
                else {
                    break;
                };
                if matches!(change, Change::Compact) {
                    compacts.push((fence, ack));
                    continue;
                }
                records += encode(&mut frame, shared, &group, &change, &changes);
                waiting.push((fence, ack));
                changes.push((group, change));
            }
            let count = frame.finish();
            let outcome = if records == 0 {
                Ok(())
            } else {
                self.append(&buf, count)
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
                    dir = %shared.dir.display(), writes = waiting.len(), error = %message,
                    "log write failed"
                );
            }
            // The batch is visible (or failed and changed nothing): only now may the fences
            // go.
            answer(&shared.queue, waiting, &outcome);
        }
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

    /// Appends `batch`, of `count` records, as one batch of the group partition: one write and,
    /// by default, one `fdatasync` (under a flush interval, the segment log's periodic sync;
    /// after a failed one it refuses appends until a sync succeeds). On failure the segment
    /// log has cut it back: nothing changed.
    fn append(&mut self, batch: &[u8], count: u32) -> Result<(), Failure> {
        let durable = self.policy.flush_interval.is_none();
        self.log
            .append_blocking(&self.tp, count, now_ms(), batch, durable)
            .map_err(|e| {
                let (message, source) = failure(&e);
                (format!("cannot append to the group log: {message}"), source)
            })?;
        Ok(())
    }

    fn should_compact(&self, shared: &Shared) -> bool {
        if !self.policy.auto || self.running.is_some() {
            return false;
        }
        let log_bytes = self.log_bytes();
        if log_bytes < self.retry_at {
            return false;
        }
        let live = shared.read_view().bytes;
        log_bytes
            > self
                .policy
                .min_bytes
                .max(self.policy.ratio.saturating_mul(live))
    }

    /// Closes the partition's active segment and runs a pass of the cleaner over the closed
    /// ones: on its own thread if `background` (appends go on meanwhile), else here.
    fn compact(&mut self, shared: &Shared, background: bool) -> Result<(), Failure> {
        let rolled = self.roll();
        let result = rolled.and_then(|()| {
            if background {
                let (log, tp) = (Arc::clone(&self.log), self.tp.clone());
                let thread = std::thread::Builder::new()
                    .name("offset-log-compactor".into())
                    .spawn(move || log.compact_blocking(&tp, &cleaner_policy(), &GroupRecords))
                    .map_err(|e| (format!("cannot start the compaction thread: {e}"), e))?;
                self.running = Some(thread);
                Ok(())
            } else {
                let done = self
                    .log
                    .compact_blocking(&self.tp, &cleaner_policy(), &GroupRecords)
                    .map_err(|e| failure(&e))?;
                self.compacted(shared, &done);
                Ok(())
            }
        });
        if result.is_err() {
            self.retry_at = self.log_bytes() + self.policy.min_bytes.max(1);
        }
        result
    }

    /// Closes the active segment (synced: under a flush interval that is also a sync of
    /// every write so far), so that the cleaner may take it.
    fn roll(&mut self) -> Result<(), Failure> {
        self.log.roll_blocking(&self.tp).map_err(|e| failure(&e))?;
        Ok(())
    }

    /// Takes in the end of a background compaction, if it has ended (or waits for it).
    fn finish_compaction(&mut self, shared: &Shared, wait: bool) {
        let done = match &self.running {
            Some(thread) => wait || thread.is_finished(),
            None => false,
        };
        if !done {
            return;
        }
        let Some(thread) = self.running.take() else {
            return;
        };
        match thread.join() {
            Ok(Ok(done)) => self.compacted(shared, &done),
            Ok(Err(e)) => {
                self.retry_at = self.log_bytes() + self.policy.min_bytes.max(1);
                tracing::warn!(dir = %shared.dir.display(), error = %e, "compaction failed");
            }
            Err(_) => tracing::warn!(dir = %shared.dir.display(), "the compaction thread panicked"),
        }
    }

    fn compacted(&mut self, shared: &Shared, done: &Compaction) {
        shared
            .stats
            .compacted_bytes
            .store(done.bytes_after, Ordering::Relaxed);
        shared.stats.compactions.fetch_add(1, Ordering::Relaxed);
        // Until the partition has grown by as much again, no pass is due: what the pass left
        // (the active segment, tombstones kept until the next pass) may still exceed the
        // threshold, and passing over it again at once would gain nothing.
        self.retry_at = self.log_bytes() + self.policy.min_bytes.max(1);
        tracing::debug!(
            dir = %shared.dir.display(), segments = done.segments,
            bytes_before = done.bytes_before, bytes_after = done.bytes_after,
            records_removed = done.records_removed, "group log compacted"
        );
    }

    fn publish_stats(&self, shared: &Shared) {
        shared
            .stats
            .log_bytes
            .store(self.log_bytes(), Ordering::Relaxed);
    }
}

/// Encodes one write's records into `frame`; returns how many. `earlier` are the changes
/// already in this batch.
fn encode(
    frame: &mut Frame<'_>,
    shared: &Shared,
    group: &str,
    change: &Change,
    earlier: &[(String, Change)],
) -> usize {
    match change {
        Change::Commit(offsets) => {
            for (tp, o) in offsets {
                frame.commit(group, tp, o);
            }
            offsets.len()
        }
        Change::Delete(None) => {
            // One deletion per partition (as Kafka writes a tombstone per offset when a group
            // is deleted): each has the key of the commit it deletes, which the compacted
            // partition needs; a deletion of the whole group has none. The partitions: the
            // group's now, and those committed earlier in this batch (deleting one the group
            // does not have changes nothing).
            let mut partitions: std::collections::BTreeSet<TopicPartition> = shared
                .read_view()
                .offsets
                .get(group)
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            for (g, c) in earlier {
                if let (true, Change::Commit(offsets)) = (g == group, c) {
                    partitions.extend(offsets.keys().cloned());
                }
            }
            for tp in &partitions {
                frame.delete_offset(group, tp);
            }
            partitions.len()
        }
        Change::Delete(Some(partitions)) => {
            for tp in partitions {
                frame.delete_offset(group, tp);
            }
            partitions.len()
        }
        Change::Group(Some(record)) => {
            frame.group(record);
            1
        }
        Change::Group(None) => {
            frame.group_tombstone(group);
            1
        }
        Change::Transaction(Some(record)) => {
            frame.transaction(record);
            1
        }
        Change::Transaction(None) => {
            frame.transaction_tombstone(group);
            1
        }
        Change::Compact => 0,
    }
}

/// (flush interval) Writes `request` as a batch of its own on the calling thread, when the
/// writer is idle: nothing queued, no batch or sync under way. That saves the round trip to
/// the writer thread and back (two wake-ups across threads) that a lone committer would
/// otherwise wait for; a write costs one `write(2)` into the page cache, with no sync, so it
/// may run on an async worker. Compactions stay on the thread, which is woken when one is
/// due; periodic syncs are the segment log's. Hands `request` back, untouched, when the
/// writer is busy (the caller queues it: under load, writes are batched as before).
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
    this.write_batch(shared, &mut vec![request], false);
    if this.wants_maintenance(shared) {
        // The thread may be waiting without knowing of the compaction.
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
