//! [`JsonFileStore`]: every group's committed offsets in one JSON file, replaced atomically by
//! each batch of writes.

mod builder;
mod closing;
mod decode;
mod encode;
mod files;
mod writer;

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;

use async_trait::async_trait;
use coordinator_core::{
    validate_offsets, CommitFence, OffsetMap, OffsetStore, StorageError, StorageErrorKind,
    TopicPartition,
};
use tokio::sync::oneshot;

pub use self::builder::JsonFileStoreBuilder;
use self::closing::Reaper;
use self::decode::Groups;
use self::files::Files;
use self::writer::{Change, Request, Shared, Writer};
use crate::fs::{Fs, StdFs};
use crate::group_commit::{io_error, WriteHold};

/// An [`OffsetStore`] that keeps every group's committed offsets in one JSON file.
///
/// # Format
///
/// Version 1, compact, keys sorted, groups sorted by id and each group's entries sorted by
/// topic, then partition (docs/rules.md#json-format):
///
/// ```text
/// {"groups":{"<group>":[{"offset":N,"partition":P,"topic":"T"},…]},"version":1}
/// ```
///
/// The file keeps the offsets alone, the chapter's format byte for byte: a commit's leader
/// epoch, metadata string and commit time are not stored (`keeps_metadata` is `false`, and
/// `list_with_metadata` reads them back empty), and neither are groups' records
/// (`keeps_groups` is `false`: a coordinator over this store forgets members and
/// generations at a restart). [`LogStore`](crate::LogStore) keeps everything.
///
/// A missing file is an empty store. A file that is not exactly this format — malformed
/// JSON, wrong types, a missing, unknown or repeated key, a repeated group or partition, a
/// negative offset, a partition outside `u32`, another version — fails to open with a
/// [`StorageErrorKind::Corrupt`] error whose message names the file. Nothing is guessed and
/// nothing is silently dropped.
///
/// # Durability
///
/// Every file write puts the whole map in a sibling temporary file
/// (`<name>.tmp.<pid>.<random>`, a name no other store uses), fsyncs it, renames it over the
/// file and fsyncs the directory; a reader, or a restart after a crash at any point, sees the
/// old file or the new one, never a torn one. A commit or delete returns `Ok` only after the
/// directory fsync of a file write that contains it, so an acknowledged write survives a
/// crash.
///
/// If any step fails, every write of that file write (see *Group commit*) returns an
/// [`Io`](StorageErrorKind::Io) error naming the file and the step, and nothing changes:
/// memory is updated only after the file is durable, and if the failure comes after the
/// rename (the directory fsync) the previous content is written back the same way. Only if
/// that restore fails as well can the file hold the failed writes' offsets; the error says
/// so, and the next successful file write (which rewrites the whole map) repairs it.
///
/// # Group commit
///
/// Writes do not each write the file. A commit or delete is validated on the caller's task,
/// then queued for the store's **writer thread**, which takes *every* write queued since its
/// last file write (up to [`max_batch`](JsonFileStoreBuilder::max_batch), no limit by
/// default), applies them in queue order to one new version of the file, and makes it durable
/// with one write, one fsync, one rename and one directory fsync. N commits that arrive while
/// a file write is in flight therefore cost one more file write, not N: under load the
/// writes per second grow with the batch, and the latency of each stays about two file writes
/// (the one in flight, then its own). A lone commit goes straight into a file write of its
/// own, as without batching.
///
/// A batch is all or nothing: readers see all of its writes at once (one update of memory,
/// after the file is durable) or none, a power cut leaves the old file or the new one with
/// all of them, and a failed file write fails every write of the batch.
///
/// # Concurrency, fences and cancellation
///
/// Reads are served from memory (a `std` read-write lock held only to copy out what is asked
/// for) and never touch the file. Each store has one writer thread, a plain `std` thread
/// named `offset-store-writer`, started by the store's first write (a store only read from
/// never starts one). Callers hand it their write through a mutex-and-condvar queue and wait
/// on a `tokio::sync::oneshot`, which any executor can poll: no tokio runtime is needed, and
/// no async worker or blocking-pool thread is held while a write waits for the disk.
///
/// A [`CommitFence`] from the coordinator travels with its write into the queue and is
/// dropped by the writer only once the batch that contains the write is durable **and**
/// visible to reads (or has failed), and before the caller hears back; so a rebalance that
/// waits for the fence sees the write, and a dropped commit future cannot let a write
/// checked against an old generation land after the group rebalanced. Dropping the future of
/// a queued write does not withdraw it: the writer still writes it, and file and memory move
/// together from before to after it (or stay before, if the file write fails). The cost of
/// one file is coupling: writes of all groups share the queue, and a fenced write waiting
/// in it holds its group's gate, so a rebalance of group A can wait for one file write that
/// carries group B's offsets too — but for one file write, not for a queue of them.
///
/// Dropping the store lets the writer finish what is queued (the file write in flight, then
/// one more for everything queued behind it, unless `max_batch` splits it), then releases the
/// lock, so the next owner finds every write that was handed to this one. With nothing queued
/// or in flight (every commit answered) the lock goes at once. Otherwise, outside a tokio
/// runtime the drop waits for the writer; inside one it does not block the async worker: the
/// wait runs on the blocking pool (which a runtime shutting down waits for), and an `open` of
/// the same path in this process waits until the lock is released instead of being refused.
///
/// # Ownership
///
/// A file has one owner. Opening takes an exclusive OS lock (`File::try_lock`) on the sibling
/// file `<name>.lock` and holds it for the store's lifetime; a second store on the same
/// file — in another process, or in this one — is refused at once with an
/// [`Io`](StorageErrorKind::Io) error (code `STORAGE_ERROR`) that names the file and says it
/// is in use, and it touches nothing. The lock file is created empty if missing and never
/// removed (a sibling, because the offset file is replaced by every rename and a lock belongs
/// to the inode it was taken on; never removed, because removing it would let two openers
/// lock two different inodes of the same name). The kernel releases the lock when its
/// process ends, however it ends. Once it holds the lock, `open` removes the temporary files
/// (`<name>.tmp`, `<name>.tmp.…`) that a crashed owner left behind.
///
/// A Unix lock belongs to the open file, and a child process starts with copies of its
/// parent's open files until it `exec`s (Rust closes them there). So if another thread
/// spawns a process at the very moment a store is dropped, the lock outlives the drop for
/// those microseconds, and an immediate reopen can be refused as "in use"; retrying it then
/// succeeds. Nothing else is affected: the refused opener touches nothing.
///
/// # Cost
///
/// Each group's encoded bytes are cached, so a file write re-encodes only the groups its
/// batch touches (merging the new offsets into the stored ones as it writes, once per group
/// however many writes of the batch touch it), copies the others, and hands the file to one
/// `write` call. Memory holds the offsets plus one encoded copy of the file; each store has
/// one thread. A file write costs about two fsyncs plus writing the whole file, so what
/// batching saves grows with the number of concurrent writers, and what it cannot save
/// grows with the file.
pub struct JsonFileStore<F: Fs = StdFs> {
    shared: Arc<Shared>,
    /// The writer, until the first write moves it into its thread.
    idle: Mutex<Option<Writer<F>>>,
    /// The writer thread once started (joined on drop), or why it could not start.
    thread: OnceLock<Result<JoinHandle<()>, String>>,
    /// The owner lock on `<name>.lock`, `None` once dropped. It is released only after the
    /// writer thread has ended (see `Drop`), so the lock outlives every write.
    lock: Option<F::Lock>,
}

impl JsonFileStore<StdFs> {
    /// Options for opening a store: its file system and how writes are batched.
    pub fn builder() -> JsonFileStoreBuilder<StdFs> {
        JsonFileStoreBuilder::new()
    }

    /// Opens the store kept in the file at `path`; a missing file is an empty store (the file
    /// is created by the first commit). `path`'s directory must exist: the owner lock is
    /// created there.
    ///
    /// This reads and parses the whole file on the calling thread: call it before starting
    /// the async work, or use [`open_async`](Self::open_async) from async code.
    ///
    /// # Errors
    /// [`Io`](StorageErrorKind::Io) if another store owns the file ("in use"), if the lock
    /// cannot be taken (a missing directory, say), or if the file exists but cannot be read;
    /// [`Corrupt`](StorageErrorKind::Corrupt) if it is not a valid version-1 offset file;
    /// [`Other`](StorageErrorKind::Other) if `path` has no file name. Messages name the file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StorageError> {
        Self::builder().open(path)
    }

    /// [`open`](Self::open) on tokio's blocking pool, so parsing a large file does not hold an
    /// async worker.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_async(path: impl Into<PathBuf>) -> Result<Self, StorageError> {
        Self::builder().open_async(path).await
    }
}

impl<F: Fs> JsonFileStore<F> {
    /// Opens the store kept at `path` on the file system `fs` (a [`SimFs`] in tests).
    ///
    /// # Errors
    /// As [`JsonFileStore::open`].
    ///
    /// [`SimFs`]: crate::testing::SimFs
    pub fn open_with_fs(path: impl AsRef<Path>, fs: F) -> Result<Self, StorageError> {
        JsonFileStore::builder().fs(fs).open(path)
    }

    fn open_built(path: &Path, fs: F, max_batch: usize) -> Result<Self, StorageError> {
        let files = Files::new(path)?;
        // The lock first: a store that cannot own the file touches nothing.
        let lock = take_lock(&fs, &files)?;
        remove_stale_temps(&fs, &files);
        let path = files.path.as_path();

        let groups = match fs.read(path) {
            Ok(Some(bytes)) => decode::decode(path, &bytes)?,
            Ok(None) => Groups::new(),
            Err(e) => {
                return Err(io_error(
                    format!("cannot read offset file `{}`", path.display()),
                    e,
                ))
            }
        };
        let writer = Writer::new(fs, &groups);
        tracing::debug!(path = %path.display(), groups = groups.len(), "opened JSON offset store");
        Ok(JsonFileStore {
            shared: Arc::new(Shared::new(files, groups, max_batch)),
            idle: Mutex::new(Some(writer)),
            thread: OnceLock::new(),
            lock: Some(lock),
        })
    }

    /// Starts the writer thread if no write has yet; after that, one atomic load.
    fn start_writer(&self) -> Result<(), StorageError> {
        let started = self.thread.get_or_init(|| {
            let idle = self
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            let Some(writer) = idle else {
                return Err("its writer is gone".to_owned());
            };
            let shared = Arc::clone(&self.shared);
            std::thread::Builder::new()
                .name("offset-store-writer".into())
                .spawn(move || writer.run(&shared))
                .map_err(|e| format!("cannot start its writer thread: {e}"))
        });
        match started {
            Ok(_) => Ok(()),
            Err(why) => Err(StorageError::new(
                StorageErrorKind::Io,
                format!(
                    "cannot write offset file `{}`: {why}",
                    self.shared.files.path.display()
                ),
            )),
        }
    }

    /// The file this store keeps its offsets in.
    pub fn path(&self) -> &Path {
        &self.shared.files.path
    }

    /// At most this many writes share one file write (see
    /// [`JsonFileStoreBuilder::max_batch`]).
    pub fn max_batch(&self) -> usize {
        self.shared.max_batch
    }

    /// Every group's committed offsets, as a copy.
    pub fn snapshot(&self) -> BTreeMap<String, OffsetMap> {
        self.shared.read_view().clone()
    }

    /// How many writes are queued for the writer and not yet in a file write.
    pub fn queued_writes(&self) -> usize {
        self.shared.queue.len()
    }

    /// Holds the writer back: until the returned guard is dropped it starts no new file write
    /// (one in flight finishes), and writes queue up; then it takes them all in one batch
    /// (up to [`max_batch`](Self::max_batch)).
    ///
    /// For tests and tools that need a batch of known content — crash-point and
    /// fault-injection tests queue several writes behind a hold, then release it. While it
    /// is held, fenced writes keep their groups' gates: never hold it across an `.await` of a
    /// write of this store (that write could never finish).
    pub fn hold_writes(&self) -> WriteHold<'_> {
        WriteHold::new(&self.shared.queue, &self.shared.files.path)
    }

    /// Queues a validated change for the writer thread and waits for the file write that
    /// carries it. The fence travels with the change; the writer drops it once that file
    /// write is durable and visible (see the type's docs).
    async fn write(
        &self,
        group: &str,
        change: Change,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        self.start_writer()?;
        let (ack, answer) = oneshot::channel();
        let request = Request {
            group: group.to_owned(),
            change,
            fence,
            ack,
        };
        if self.shared.queue.push(request).is_err() {
            return Err(self.writer_gone());
        }
        answer.await.unwrap_or_else(|_| Err(self.writer_gone()))
    }

    /// The error of a write the writer thread will never answer. The thread stops only when
    /// the store is dropped, so this means it died of a bug.
    fn writer_gone(&self) -> StorageError {
        StorageError::new(
            StorageErrorKind::Other,
            format!(
                "the writer thread of offset file `{}` stopped; the write may not have happened",
                self.shared.files.path.display()
            ),
        )
    }
}

impl<F: Fs> Drop for JsonFileStore<F> {
    /// Closes the queue; the writer finishes what is queued, then the lock goes. Inside a
    /// tokio runtime that wait runs on the blocking pool, so dropping a store never blocks an
    /// async worker (a runtime that is shutting down still waits for it; one that refuses
    /// the task drops it, which waits right there). Elsewhere it waits inline.
    fn drop(&mut self) {
        let idle = self.shared.queue.close();
        let thread = match self.thread.take() {
            Some(Ok(thread)) => Some(thread),
            _ => None,
        };
        if idle || thread.is_none() {
            // Nothing queued, no write in flight: the writer (if any) stops without touching
            // the file again, so the lock goes now and the thread ends on its own.
            drop(self.lock.take());
            return;
        }
        let reaper = Reaper::new(thread, self.lock.take(), &self.shared.files.lock);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            drop(runtime.spawn_blocking(move || drop(reaper)));
            return;
        }
        drop(reaper);
    }
}

/// Takes the owner lock of the offset file, or says who has it.
fn take_lock<F: Fs>(fs: &F, files: &Files) -> Result<F::Lock, StorageError> {
    // A store of this process dropped on an async worker may still be finishing its writes.
    closing::wait_for(&files.lock);
    fs.try_lock(&files.lock).map_err(|e| {
        let message = if e.kind() == io::ErrorKind::WouldBlock {
            format!(
                "offset file `{}` is in use: another store (in this process or another) holds \
                 its lock `{}`; a file has one owner at a time, so close that store first",
                files.path.display(),
                files.lock.display()
            )
        } else {
            format!(
                "cannot lock offset file `{}`: creating or locking `{}` failed: {e}",
                files.path.display(),
                files.lock.display()
            )
        };
        io_error(message, e)
    })
}

/// Removes the temporary files a crash left behind. We hold the lock, so no other store is
/// writing any of them. Best effort: a leftover temp file costs disk space, not correctness,
/// so a failure here is logged and the store opens anyway.
fn remove_stale_temps<F: Fs>(fs: &F, files: &Files) {
    let entries = match fs.list_dir(&files.dir) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::warn!(
                dir = %files.dir.display(), error = %e,
                "cannot list the offset file's directory to remove stale temp files"
            );
            return;
        }
    };
    for entry in entries.iter().filter(|e| files.is_temp(e)) {
        let stale = files.sibling(entry);
        match fs.remove_file(&stale) {
            Ok(()) => tracing::info!(file = %stale.display(), "removed a stale temp file"),
            Err(e) => tracing::warn!(
                file = %stale.display(), error = %e, "cannot remove a stale temp file"
            ),
        }
    }
}

#[async_trait]
impl<F: Fs> OffsetStore for JsonFileStore<F> {
    async fn committed(
        &self,
        group: &str,
        tp: &TopicPartition,
    ) -> Result<Option<i64>, StorageError> {
        Ok(self
            .shared
            .read_view()
            .get(group)
            .and_then(|offsets| offsets.get(tp))
            .copied())
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
        self.write(group, Change::Commit(offsets.clone()), fence)
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
        let present = match (self.shared.read_view().get(group), partitions) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(offsets), Some(gone)) => gone.iter().any(|tp| offsets.contains_key(tp)),
        };
        if idle && !present {
            return Ok(());
        }
        self.write(group, Change::Delete(partitions.map(<[_]>::to_vec)), fence)
            .await
    }

    async fn groups(&self) -> Result<Vec<String>, StorageError> {
        Ok(self.shared.read_view().keys().cloned().collect())
    }

    async fn list(&self, group: &str) -> Result<OffsetMap, StorageError> {
        Ok(self
            .shared
            .read_view()
            .get(group)
            .cloned()
            .unwrap_or_default())
    }
}

impl<F: Fs> fmt::Debug for JsonFileStore<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonFileStore")
            .field("path", &self.shared.files.path)
            .field("groups", &self.shared.read_view().len())
            .field("max_batch", &self.shared.max_batch)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;
    use std::task::Poll;
    use std::time::Duration;

    use coordinator_core::TopicPartition;

    use super::*;
    use crate::testing::{FsOp, SimFs};

    const PATH: &str = "/data/offsets.json";

    /// Dropping a store on an async worker while its writer is in the middle of a file write
    /// returns without waiting for that write; the next open in this process waits for it and
    /// finds the write.
    #[tokio::test(flavor = "current_thread")]
    async fn dropping_a_store_on_an_async_worker_does_not_wait_for_its_writer() {
        let fs = SimFs::new();
        let store = JsonFileStore::open_with_fs(PATH, fs.clone()).unwrap();
        let (entered, in_write) = mpsc::channel::<()>();
        let (release, released) = mpsc::channel::<()>();
        let released = Mutex::new(released);
        let waited_out = Arc::new(AtomicBool::new(false));
        let timed_out = Arc::clone(&waited_out);
        fs.set_hook(Some(Arc::new(move |op| {
            if op == FsOp::WriteAll {
                let _ = entered.send(());
                // Bounded, so a drop that waits for this write fails the test, not hangs it.
                let lock = released.lock().unwrap_or_else(PoisonError::into_inner);
                if lock.recv_timeout(Duration::from_secs(10)).is_err() {
                    timed_out.store(true, Ordering::SeqCst);
                }
            }
        })));
        let offsets = OffsetMap::from([(TopicPartition::new("t", 0), 5)]);
        {
            // Queue the write (one poll), then drop its future: the writer still writes it.
            let mut commit = store.commit("g", &offsets, CommitFence::none());
            std::future::poll_fn(|cx| {
                assert!(commit.as_mut().poll(cx).is_pending());
                Poll::Ready(())
            })
            .await;
        }
        in_write.recv().unwrap();

        drop(store);
        assert!(
            !waited_out.load(Ordering::SeqCst),
            "the drop waited for the parked write (until the hook gave up)"
        );
        release.send(()).unwrap();
        fs.set_hook(None);

        let reopened = JsonFileStore::open_with_fs(PATH, fs).unwrap();
        assert_eq!(
            reopened.snapshot(),
            BTreeMap::from([("g".to_string(), offsets)])
        );
    }
}
