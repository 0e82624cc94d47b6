//! The group-commit plumbing both file stores share: the queue between callers and a store's
//! writer thread, the answer of a batch to its committers, the hold that keeps a writer back,
//! and running blocking file work off the async workers.
//!
//! A caller validates its write, queues it with its [`CommitFence`] and a oneshot sender, and
//! waits on the receiver. The writer takes every write queued since its last batch, makes the
//! batch durable its own way (the JSON store: one atomic file replacement; the log store: one
//! append and one `fdatasync`), publishes it to readers, and then [`answer`]s the batch: the
//! fences go first, then every caller hears the one outcome of the batch. (The log store
//! under a flush interval lets a caller that finds the queue empty write its own batch of
//! one, [`Queue::start_inline`], and wake the writer if that left it work, [`Queue::poke`].)

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::path::Path;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use coordinator_core::{CommitFence, StorageError, StorageErrorKind};
use tokio::sync::oneshot;

/// Where a writer sends one caller the outcome of its write.
pub(crate) type Ack = oneshot::Sender<Result<(), StorageError>>;

/// The writes waiting for a writer thread.
///
/// A `std` mutex and condition variable rather than a channel: the writer takes everything
/// queued in one step, and a test can hold the writer back while writes queue up.
pub(crate) struct Queue<R> {
    state: Mutex<QueueState<R>>,
    changed: Condvar,
}

struct QueueState<R> {
    requests: VecDeque<R>,
    /// Writes queued or in a batch and not yet visible to reads.
    pending: usize,
    /// While positive, the writer starts no new batch.
    holds: usize,
    /// No more writes will come: the writer finishes what is queued and stops.
    closed: bool,
    /// A caller wrote a batch itself ([`start_inline`](Queue::start_inline)) and left the
    /// writer something to look at (a sync now due, a compaction): the writer's wait ends.
    poked: bool,
}

/// What [`Queue::take`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// Writes were moved into the batch.
    Batch,
    /// The deadline passed with nothing to take.
    TimedOut,
    /// [`poke`](Queue::poke)d with nothing to take: the writer looks at its state again.
    Woken,
    /// The queue is closed and empty: the writer stops.
    Closed,
}

impl<R> Default for Queue<R> {
    fn default() -> Self {
        Queue {
            state: Mutex::new(QueueState {
                requests: VecDeque::new(),
                pending: 0,
                holds: 0,
                closed: false,
                poked: false,
            }),
            changed: Condvar::new(),
        }
    }
}

impl<R> Queue<R> {
    fn lock(&self) -> MutexGuard<'_, QueueState<R>> {
        // Every critical section below is a push, a drain or a counter update, which a panic
        // cannot leave half-done.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `request`, or hands it back if the writer has stopped.
    pub(crate) fn push(&self, request: R) -> Result<(), R> {
        let mut state = self.lock();
        if state.closed {
            return Err(request);
        }
        state.requests.push_back(request);
        state.pending += 1;
        drop(state);
        self.changed.notify_one();
        Ok(())
    }

    /// Waits for writes and moves up to `max` of them into `batch`; gives up at `deadline`
    /// (if any) when there is nothing to take.
    pub(crate) fn take(&self, max: usize, batch: &mut Vec<R>, deadline: Option<Instant>) -> Taken {
        let mut state = self.lock();
        loop {
            if !state.requests.is_empty() && (state.holds == 0 || state.closed) {
                let n = state.requests.len().min(max);
                batch.extend(state.requests.drain(..n));
                return Taken::Batch;
            }
            if state.closed && state.requests.is_empty() {
                return Taken::Closed;
            }
            if std::mem::take(&mut state.poked) {
                return Taken::Woken;
            }
            state = match deadline {
                None => self
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Taken::TimedOut;
                    }
                    self.changed
                        .wait_timeout(state, deadline - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
    }

    /// Whether a caller may write its one write itself, now, instead of queueing it: nothing
    /// is queued (so it overtakes no write that waits), the writer is not held back and not
    /// stopped. If so the write counts as pending, as if queued, until its batch is
    /// [`answer`]ed. The caller must hold the writer's state while it asks.
    pub(crate) fn start_inline(&self) -> bool {
        let mut state = self.lock();
        let free = state.requests.is_empty() && state.holds == 0 && !state.closed;
        if free {
            state.pending += 1;
        }
        free
    }

    /// Ends the writer's wait in [`take`](Queue::take) (once, even if it was not waiting yet).
    pub(crate) fn poke(&self) {
        self.lock().poked = true;
        self.changed.notify_one();
    }

    /// How many writes are waiting for the writer.
    pub(crate) fn len(&self) -> usize {
        self.lock().requests.len()
    }

    /// Whether every write queued so far is visible to reads (or failed). Called before
    /// reading the view, it tells whether that read includes every earlier write.
    pub(crate) fn is_idle(&self) -> bool {
        self.lock().pending == 0
    }

    /// `n` writes are done: visible to reads, or failed.
    pub(crate) fn done(&self, n: usize) {
        let mut state = self.lock();
        state.pending = state.pending.saturating_sub(n);
    }

    pub(crate) fn hold(&self) {
        self.lock().holds += 1;
    }

    /// Lets the writer finish what is queued and stop. Returns whether it was idle: nothing
    /// queued and no file write in flight, so it will touch the file system no more.
    pub(crate) fn close(&self) -> bool {
        let mut state = self.lock();
        state.closed = true;
        let idle = state.pending == 0;
        drop(state);
        self.changed.notify_one();
        idle
    }

    /// Closes the queue and drops whatever is still in it: their callers get an error and
    /// their fences are released. Only if the writer itself stops early (a bug).
    pub(crate) fn abandon(&self) {
        let mut state = self.lock();
        state.closed = true;
        let left = std::mem::take(&mut state.requests);
        state.pending = 0;
        drop(state);
        drop(left);
    }
}

/// Releasing one [`Queue::hold`], whatever the queue carries.
pub(crate) trait Release: Sync {
    fn release(&self);
}

impl<R: Send> Release for Queue<R> {
    fn release(&self) {
        let mut state = self.lock();
        state.holds = state.holds.saturating_sub(1);
        drop(state);
        self.changed.notify_one();
    }
}

/// Abandons the queue when the writer thread stops, however it stops, so that callers never
/// wait for ever on a writer that died.
pub(crate) struct AbandonOnExit<'a, R>(pub(crate) &'a Queue<R>);

impl<R> Drop for AbandonOnExit<'_, R> {
    fn drop(&mut self) {
        self.0.abandon();
    }
}

/// Answers a finished batch: marks its writes done, drops every fence, then sends every
/// caller the batch's one outcome (`Err((message, error))`: an [`Io`](StorageErrorKind::Io)
/// error each). Every fence goes before any caller hears back, so a caller that returns
/// finds its own fence released.
pub(crate) fn answer<R>(
    queue: &Queue<R>,
    waiting: Vec<(CommitFence, Ack)>,
    outcome: &Result<(), (String, io::Error)>,
) {
    queue.done(waiting.len());
    let (fences, acks): (Vec<CommitFence>, Vec<Ack>) = waiting.into_iter().unzip();
    drop(fences);
    for ack in acks {
        let result = match outcome {
            Ok(()) => Ok(()),
            Err((message, error)) => Err(io_error(message.clone(), copy_io_error(error))),
        };
        // A caller that dropped its future no longer listens; its write is done anyway.
        let _ = ack.send(result);
    }
}

/// An [`Io`](StorageErrorKind::Io) storage error with `source`.
pub(crate) fn io_error(message: String, source: io::Error) -> StorageError {
    StorageError::new(StorageErrorKind::Io, message).with_source(source)
}

/// An `io::Error` like `e` for another caller of the same batch (`io::Error` is not `Clone`):
/// the same OS error number if it has one, else the same kind and text.
pub(crate) fn copy_io_error(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

/// Runs blocking file work on the current tokio runtime's blocking pool, or inline if there
/// is no runtime.
pub(crate) async fn run_blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StorageError> + Send + 'static,
) -> Result<T, StorageError> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle.spawn_blocking(work).await.unwrap_or_else(|e| {
            Err(StorageError::new(
                StorageErrorKind::Other,
                format!("the offset store's blocking task did not finish: {e}"),
            ))
        }),
        Err(_) => work(),
    }
}

/// Holds a file store's writer back until dropped; see
/// [`JsonFileStore::hold_writes`](crate::JsonFileStore::hold_writes) and
/// [`LogStore::hold_writes`](crate::LogStore::hold_writes).
#[must_use = "the writer is held only while the guard lives"]
pub struct WriteHold<'a> {
    queue: &'a dyn Release,
    path: &'a Path,
}

impl<'a> WriteHold<'a> {
    /// Holds `queue`'s writer back; `path` names the store in `Debug`.
    pub(crate) fn new<R: Send>(queue: &'a Queue<R>, path: &'a Path) -> Self {
        queue.hold();
        WriteHold { queue, path }
    }
}

impl Drop for WriteHold<'_> {
    fn drop(&mut self) {
        self.queue.release();
    }
}

impl fmt::Debug for WriteHold<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteHold")
            .field("path", &self.path)
            .finish()
    }
}
