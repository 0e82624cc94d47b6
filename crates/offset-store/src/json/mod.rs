//! [`JsonFileStore`]: every group's committed offsets in one JSON file, replaced atomically on
//! each commit.

mod decode;
mod encode;
mod files;

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use async_trait::async_trait;
use coordinator_core::{
    validate_offsets, CommitFence, OffsetMap, OffsetStore, StorageError, StorageErrorKind,
    TopicPartition,
};

use self::decode::Groups;
use self::encode::{encode_file, encode_group, merge_newer};
use self::files::Files;
use crate::fs::{Fs, StdFs};

/// An [`OffsetStore`] that keeps every group's committed offsets in one JSON file.
///
/// # Format
///
/// Version 1, compact, keys sorted, groups sorted by id and each group's entries sorted by
/// topic, then partition (SPEC.md, "JSON offset store"):
///
/// ```text
/// {"groups":{"<group>":[{"offset":N,"partition":P,"topic":"T"},…]},"version":1}
/// ```
///
/// A missing file is an empty store. A file that is not exactly this format — malformed
/// JSON, wrong types, a missing, unknown or repeated key, a repeated group or partition, a
/// negative offset, a partition outside `u32`, another version — fails to open with a
/// [`StorageErrorKind::Corrupt`] error whose message names the file. Nothing is guessed and
/// nothing is silently dropped.
///
/// # Durability
///
/// Each commit writes the whole map to a sibling temporary file
/// (`<name>.tmp.<pid>.<random>`, a name no other store uses), fsyncs it,
/// renames it over the file and fsyncs the directory; a reader, or a restart after a crash at
/// any point, sees the old file or the new one, never a torn one. A commit returns `Ok` only
/// after the directory fsync, so an acknowledged commit survives a crash.
///
/// If any step fails the commit returns an [`Io`](StorageErrorKind::Io) error and changes
/// nothing: memory is updated only after the file is durable, and if the failure comes after
/// the rename (the directory fsync) the previous content is written back the same way. Only
/// if that restore fails as well can the file hold the failed commit's offsets; the error
/// says so, and the next successful commit (which rewrites the whole map) repairs it.
///
/// # Concurrency and cancellation
///
/// Reads are served from memory and never touch the file. Commits are serialised by one
/// mutex; the whole of a commit — encoding, the file protocol and the update of memory —
/// runs under it on tokio's blocking pool (`spawn_blocking`, on the caller's runtime), so
/// fsync never stalls an async worker. The future only awaits that task: dropping it lets the
/// task finish, and the file and memory move together from the state before to the state
/// after (or stay before, if the write fails). Without a tokio runtime the work runs inline.
///
/// A [`CommitFence`] from the coordinator travels into that task and is released only when
/// the write is done, so a dropped commit future cannot let a write checked against an old
/// generation land after the group rebalanced. The cost of one file is coupling: commits of
/// all groups queue on the one mutex, and a fenced commit waiting in that queue holds its
/// group's lock, so a rebalance of group A can wait for group B's queued fsyncs.
///
/// # Ownership
///
/// A file has one owner. Opening takes an exclusive OS lock (`File::try_lock`) on the sibling
/// file `<name>.lock` and holds it for the store's lifetime; a second store on the same
/// file — in another process, or in this one — is refused at once with an
/// [`Io`](StorageErrorKind::Io) error (code `STORAGE_ERROR`) that names the file and says it
/// is in use, and it touches nothing. The lock file is created empty if missing and never
/// removed (see `files.rs` for why a sibling and why it stays); the kernel releases the lock
/// when its process ends, however it ends. Once it holds the lock, `open` removes the
/// temporary files (`<name>.tmp`, `<name>.tmp.…`) that a crashed owner left behind.
///
/// A Unix lock belongs to the open file, and a child process starts with copies of its
/// parent's open files until it `exec`s (Rust closes them there). So if another thread
/// spawns a process at the very moment a store is dropped, the lock outlives the drop for
/// those microseconds, and an immediate reopen can be refused as "in use"; retrying it then
/// succeeds. Nothing else is affected: the refused opener touches nothing.
///
/// # Cost
///
/// Each group's encoded bytes are cached, so a commit re-encodes only the groups it touches
/// (merging the new offsets into the stored ones as it writes), copies the others, and hands
/// the file to one `write` call. Memory holds the offsets plus one encoded copy of the file.
pub struct JsonFileStore<F: Fs = StdFs> {
    shared: Arc<Shared<F>>,
}

struct Shared<F: Fs> {
    files: Files,
    /// The owner lock on `files.lock`, held as long as anything may still write the file.
    _lock: F::Lock,
    /// What reads return: exactly the durable content of the file.
    view: RwLock<Groups>,
    /// Taken by commits only, on a blocking thread.
    writer: Mutex<Writer<F>>,
}

struct Writer<F> {
    fs: F,
    /// Each group's `"<group>":[…]` bytes as in the file, sorted by group id.
    encoded: BTreeMap<String, Vec<u8>>,
    /// The file buffer, kept between commits so its allocation is reused.
    buf: Vec<u8>,
}

impl JsonFileStore<StdFs> {
    /// Opens the store kept in the file at `path`; a missing file is an empty store (the file
    /// is created by the first commit). `path`'s directory must exist: the owner lock is
    /// created there.
    ///
    /// This reads and parses the whole file on the calling thread: call it before starting
    /// the async work, or use [`open_async`](Self::open_async) from async code.
    ///
    /// # Errors
    /// [`Io`](StorageErrorKind::Io) if another store owns the file ("in use"), if the lock
    /// cannot be taken (a missing directory, say) or if the file exists but cannot be read,
    /// [`Corrupt`](StorageErrorKind::Corrupt) if it is not a valid version-1 offset file, and
    /// [`Other`](StorageErrorKind::Other) if `path` has no file name. Messages name the file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StorageError> {
        Self::open_with_fs(path, StdFs)
    }

    /// [`open`](Self::open) on tokio's blocking pool, so parsing a large file does not hold an
    /// async worker.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_async(path: impl Into<PathBuf>) -> Result<Self, StorageError> {
        let path = path.into();
        run_blocking(move || Self::open(path)).await
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
        let files = Files::new(path.as_ref())?;
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
        let encoded = groups
            .iter()
            .map(|(group, offsets)| {
                let mut bytes = Vec::new();
                encode_group(&mut bytes, group, offsets.iter().map(|(tp, &o)| (tp, o)));
                (group.clone(), bytes)
            })
            .collect();
        tracing::debug!(path = %path.display(), groups = groups.len(), "opened JSON offset store");
        Ok(JsonFileStore {
            shared: Arc::new(Shared {
                files,
                _lock: lock,
                view: RwLock::new(groups),
                writer: Mutex::new(Writer {
                    fs,
                    encoded,
                    buf: Vec::new(),
                }),
            }),
        })
    }

    /// The file this store keeps its offsets in.
    pub fn path(&self) -> &Path {
        &self.shared.files.path
    }

    /// Every group's committed offsets, as a copy.
    pub fn snapshot(&self) -> BTreeMap<String, OffsetMap> {
        self.shared.read_view().clone()
    }

    /// Hands a validated change to the blocking pool and runs the whole write there. The
    /// fence travels with the work and is released only when the write is done, so dropping
    /// the awaiting future cannot let a fenced write land after the coordinator's commit gate
    /// was released.
    async fn write(
        &self,
        group: &str,
        change: Change,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        let shared = Arc::clone(&self.shared);
        let group = group.to_owned();
        run_blocking(move || {
            let result = shared.write_blocking(group, change);
            drop(fence);
            result
        })
        .await
    }
}

/// One write to one group.
enum Change {
    /// Merge these offsets.
    Commit(OffsetMap),
    /// Remove these partitions, or all of them.
    Delete(Option<Vec<TopicPartition>>),
}

impl<F: Fs> Shared<F> {
    fn read_view(&self) -> std::sync::RwLockReadGuard<'_, Groups> {
        // Nothing panics while the lock is held, so a poisoned lock still guards a whole map.
        self.view.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The whole write: encode, persist, then publish. Runs on a blocking thread.
    fn write_blocking(&self, group: String, change: Change) -> Result<(), StorageError> {
        let mut guard = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let writer = &mut *guard;

        // Only this thread mutates the view (we hold the writer lock), so what we read here
        // is what the file holds. `None`: the group has no offsets left.
        let fresh: Option<Vec<u8>> = {
            let view = self.read_view();
            let stored = view.get(&group);
            match &change {
                Change::Commit(offsets) => {
                    let old_len = writer.encoded.get(&group).map_or(0, Vec::len);
                    let mut bytes = Vec::with_capacity(old_len + 64 * offsets.len());
                    let old = stored.into_iter().flatten().map(|(tp, &o)| (tp, o));
                    let new = offsets.iter().map(|(tp, &o)| (tp, o));
                    encode_group(&mut bytes, &group, merge_newer(old, new));
                    Some(bytes)
                }
                Change::Delete(partitions) => {
                    let keep: Vec<(&TopicPartition, i64)> = match partitions {
                        None => Vec::new(),
                        Some(gone) => stored
                            .into_iter()
                            .flatten()
                            .filter(|(tp, _)| !gone.contains(tp))
                            .map(|(tp, &o)| (tp, o))
                            .collect(),
                    };
                    if keep.is_empty() {
                        None
                    } else {
                        let mut bytes = Vec::new();
                        encode_group(&mut bytes, &group, keep);
                        Some(bytes)
                    }
                }
            }
        };

        writer.buf.clear();
        {
            let others = writer
                .encoded
                .iter()
                .filter(|(g, _)| **g != group)
                .map(|(g, b)| (g, b.as_slice()));
            let this = fresh.as_deref().map(|b| (&group, b));
            encode_file(
                &mut writer.buf,
                merge_newer(others, this.into_iter()).map(|(_, b)| b),
            );
        }
        if let Err(failure) = self.persist(&writer.fs, &writer.buf) {
            return Err(self.recover(writer, failure));
        }

        let mut view = self.view.write().unwrap_or_else(PoisonError::into_inner);
        match change {
            Change::Commit(offsets) => view.entry(group.clone()).or_default().extend(offsets),
            Change::Delete(None) => {
                view.remove(&group);
            }
            Change::Delete(Some(gone)) => {
                if let Some(offsets) = view.get_mut(&group) {
                    for tp in &gone {
                        offsets.remove(tp);
                    }
                    if offsets.is_empty() {
                        view.remove(&group);
                    }
                }
            }
        }
        drop(view);
        match fresh {
            Some(bytes) => {
                writer.encoded.insert(group, bytes);
            }
            None => {
                writer.encoded.remove(&group);
            }
        }
        Ok(())
    }

    /// The persist protocol: temp file, write, fsync, rename over the target, fsync the
    /// directory.
    fn persist(&self, fs: &F, bytes: &[u8]) -> Result<(), PersistFailure> {
        let temp = self.files.temp.as_path();
        let before_rename = |step: &str, e: io::Error| {
            // Best effort: a leftover temp file is harmless (the next commit truncates it),
            // but it holds disk space, which matters most after ENOSPC.
            let _ = fs.remove_file(temp);
            PersistFailure {
                renamed: false,
                step: format!("{step} `{}`", temp.display()),
                error: e,
            }
        };
        let mut file = fs
            .create_temp(temp)
            .map_err(|e| before_rename("creating", e))?;
        fs.write_all(&mut file, bytes)
            .map_err(|e| before_rename("writing", e))?;
        fs.fsync(&mut file)
            .map_err(|e| before_rename("fsync of", e))?;
        drop(file);
        fs.rename(temp, &self.files.path)
            .map_err(|e| before_rename("renaming", e))?;
        fs.fsync_dir(&self.files.dir).map_err(|e| PersistFailure {
            renamed: true,
            step: format!("fsync of directory `{}`", self.files.dir.display()),
            error: e,
        })
    }

    /// Turns a failed persist into the commit's error, first putting the previous content
    /// back if the new file had already replaced it.
    fn recover(&self, writer: &mut Writer<F>, failure: PersistFailure) -> StorageError {
        let PersistFailure {
            renamed,
            step,
            error,
        } = failure;
        let mut message = format!(
            "cannot persist offsets to `{}`: {step} failed: {error}",
            self.files.path.display()
        );
        if renamed {
            writer.buf.clear();
            encode_file(&mut writer.buf, writer.encoded.values().map(Vec::as_slice));
            match self.persist(&writer.fs, &writer.buf) {
                Ok(()) => message.push_str("; the previous content was restored"),
                Err(restore) => {
                    message.push_str(&format!(
                        "; restoring the previous content also failed ({} failed: {}), so \
                         the file may hold this commit's offsets until the next successful \
                         commit rewrites it",
                        restore.step, restore.error
                    ));
                }
            }
        }
        tracing::warn!(path = %self.files.path.display(), error = %message, "offset commit failed");
        io_error(message, error)
    }
}

/// Where the persist protocol stopped.
struct PersistFailure {
    /// The new file had already replaced the old one.
    renamed: bool,
    step: String,
    error: io::Error,
}

/// Takes the owner lock of the offset file, or says who has it.
fn take_lock<F: Fs>(fs: &F, files: &Files) -> Result<F::Lock, StorageError> {
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

fn io_error(message: String, source: io::Error) -> StorageError {
    StorageError::new(StorageErrorKind::Io, message).with_source(source)
}

/// Runs blocking file work on the current tokio runtime's blocking pool, or inline if there
/// is no runtime.
async fn run_blocking<T: Send + 'static>(
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
        let present = match (self.shared.read_view().get(group), partitions) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(offsets), Some(gone)) => gone.iter().any(|tp| offsets.contains_key(tp)),
        };
        if !present {
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
            .finish_non_exhaustive()
    }
}
