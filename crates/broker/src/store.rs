//! The one place an offset store is chosen: the broker and the groups tool's `--data-dir`
//! mode both open theirs through [`StoreConfig::open`], so a second store (a database) is one
//! more variant here.
//!
//! # A data directory
//!
//! ```text
//! DIR/groups/                 the group log (LogStore): offsets with their metadata and
//!                             groups' durable records, in a compacted partition of a
//!                             segment log (groups/log/__consumer_offsets-0/)
//! DIR/records/                the partitions' records (written by the partition log)
//! DIR/offsets.json            the JSON store's file (`--offsets-store json`), or an older
//!                             broker's, imported into groups/ at the first start
//! DIR/offsets.json.imported   that older file, kept as a backup once imported
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::Poll;

use coordinator_core::{
    CommitFence, CommittedOffsets, OffsetAndMetadata, OffsetStore, StorageError, StorageErrorKind,
    TopicPartition,
};
use offset_store::{JsonFileStore, LogStore, MemoryStore};

use crate::config::PostgresUrl;

/// The name of the JSON store's offset file inside a data directory.
pub const OFFSETS_FILE: &str = "offsets.json";
/// The name of the group log's directory inside a data directory.
pub const GROUPS_DIR: &str = "groups";
/// The name an imported [`OFFSETS_FILE`] is kept under (with `.N` appended if taken).
pub const IMPORTED_FILE: &str = "offsets.json.imported";

/// Which store a data directory's offsets live in (`--offsets-store`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OffsetsStore {
    /// The group log in `DIR/groups/` ([`LogStore`]): the default.
    #[default]
    Log,
    /// One JSON file, `DIR/offsets.json` ([`JsonFileStore`]): offsets only.
    Json,
}

impl OffsetsStore {
    /// The flag's value: `log` or `json`.
    pub fn name(self) -> &'static str {
        match self {
            OffsetsStore::Log => "log",
            OffsetsStore::Json => "json",
        }
    }
}

/// Which offset store to open.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreConfig {
    /// Committed offsets live in memory and are lost at exit.
    Memory,
    /// Committed offsets live in `<dir>/offsets.json` (the [`JsonFileStore`]), which this
    /// process owns while the store is open: a second opener is refused.
    JsonFile {
        /// The data directory. It must exist when the store is opened.
        dir: PathBuf,
    },
    /// Offsets and group records live in the log in `<dir>/groups/` (the [`LogStore`]),
    /// which this process owns while the store is open. Opening it creates `groups/` and
    /// imports an older broker's `<dir>/offsets.json` (see [`StoreConfig::open`]).
    Log {
        /// The data directory. It must exist when the store is opened.
        dir: PathBuf,
        /// Kafka's `log.flush.interval.ms`: acknowledge once written to the OS and sync at
        /// most this many ms later; `None` syncs every batch before acknowledging it.
        flush_interval_ms: Option<u64>,
    },
    /// Offsets and group records live in a PostgreSQL database (the `store-postgres` crate's
    /// `PostgresStore`), which may be shared with other processes.
    Postgres {
        /// The connection string.
        url: PostgresUrl,
        /// The most connections the store opens.
        pool_size: usize,
    },
}

impl fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreConfig::Memory => f.write_str("Memory"),
            StoreConfig::JsonFile { dir } => write!(f, "JsonFile({})", dir.display()),
            StoreConfig::Log {
                dir,
                flush_interval_ms: None,
            } => write!(f, "Log({})", dir.display()),
            StoreConfig::Log {
                dir,
                flush_interval_ms: Some(ms),
            } => write!(f, "Log({}, flush every {ms} ms)", dir.display()),
            StoreConfig::Postgres { url, .. } => write!(f, "Postgres({url})"),
        }
    }
}

impl StoreConfig {
    /// The store of a `--data-dir` setting: the group log inside it (the default kind), or
    /// memory without one.
    pub fn from_data_dir(dir: Option<&Path>) -> StoreConfig {
        StoreConfig::of(dir, OffsetsStore::Log, None)
    }

    /// The store of `--data-dir`, `--offsets-store` and `--offsets-flush-interval-ms`
    /// (which only the log uses; [`BrokerConfig::validate`](crate::BrokerConfig::validate)
    /// refuses it elsewhere). Without a directory: memory.
    pub fn of(
        dir: Option<&Path>,
        kind: OffsetsStore,
        flush_interval_ms: Option<u64>,
    ) -> StoreConfig {
        match (dir, kind) {
            (None, _) => StoreConfig::Memory,
            (Some(dir), OffsetsStore::Json) => StoreConfig::JsonFile {
                dir: dir.to_path_buf(),
            },
            (Some(dir), OffsetsStore::Log) => StoreConfig::Log {
                dir: dir.to_path_buf(),
                flush_interval_ms,
            },
        }
    }

    /// The store an existing data directory holds, for tools that read and edit one: the
    /// log if `groups/` is there, else the JSON file if `offsets.json` is, else `None`.
    pub async fn detect(dir: &Path) -> Option<StoreConfig> {
        let is = |p: PathBuf, dir: bool| async move {
            tokio::fs::metadata(p)
                .await
                .is_ok_and(|m| if dir { m.is_dir() } else { m.is_file() })
        };
        if is(dir.join(GROUPS_DIR), true).await {
            Some(StoreConfig::Log {
                dir: dir.to_path_buf(),
                flush_interval_ms: None,
            })
        } else if is(dir.join(OFFSETS_FILE), false).await {
            Some(StoreConfig::JsonFile {
                dir: dir.to_path_buf(),
            })
        } else {
            None
        }
    }

    /// The file or directory the store keeps, if it keeps one.
    pub fn path(&self) -> Option<PathBuf> {
        match self {
            StoreConfig::Memory => None,
            StoreConfig::JsonFile { dir } => Some(dir.join(OFFSETS_FILE)),
            StoreConfig::Log { dir, .. } => Some(dir.join(GROUPS_DIR)),
            StoreConfig::Postgres { .. } => None,
        }
    }

    /// Opens the store (for a file, without blocking the runtime: the file is read and
    /// locked on a blocking thread).
    ///
    /// For the log, this creates `<dir>/groups/` if needed and, if `<dir>/offsets.json`
    /// exists (an older broker's, or the JSON store's), imports it first: every group's
    /// offsets are committed to the log and synced, then the file is renamed to
    /// `offsets.json.imported` (a crash at any point of the import is safe: the file is
    /// renamed only once every offset is in the log and synced).
    ///
    /// # Errors
    /// The store's: the directory's lock held by another process, an unreadable or invalid
    /// offset file or log; for the log, a `groups/` that cannot be created, and an
    /// `offsets.json` whose offsets differ from the log's for a partition both hold; for the
    /// JSON file, a directory that holds a group log (`groups/`:
    /// the JSON store would not read it).
    pub async fn open(&self) -> Result<Arc<dyn OffsetStore>, StorageError> {
        self.open_fenced(None, None).await
    }

    /// [`open`](Self::open), with a PostgreSQL store's writes fenced by `lease`'s fence (the
    /// slots this broker owns; see `store_postgres::cluster`) and its sessions bounded by the
    /// lease (`Lease::bounded`), and the group log's syncs told to `on_sync` (see
    /// `LogStoreBuilder::on_sync`). Other stores ignore them.
    pub(crate) async fn open_fenced(
        &self,
        lease: Option<&crate::lease::Lease>,
        on_sync: Option<crate::metrics::FlushObserver>,
    ) -> Result<Arc<dyn OffsetStore>, StorageError> {
        match self {
            StoreConfig::Memory => Ok(Arc::new(MemoryStore::new())),
            StoreConfig::JsonFile { dir } => {
                // A directory the log has kept: its offsets are in `groups/` (and the file,
                // if any, is the older one), so the JSON store would serve stale or no
                // offsets. Refused rather than silently going back in time.
                if exists(&dir.join(GROUPS_DIR)).await? {
                    return Err(StorageError::new(
                        StorageErrorKind::Other,
                        format!(
                            "the data directory `{}` holds a group log (`{GROUPS_DIR}/`), \
                             which the JSON store does not read: its offsets would seem lost. \
                             Use the log store (no `--offsets-store json`), or move \
                             `{GROUPS_DIR}/` away to go back to `{OFFSETS_FILE}`",
                            dir.display()
                        ),
                    ));
                }
                let store = JsonFileStore::open_async(dir.join(OFFSETS_FILE)).await?;
                Ok(Arc::new(store))
            }
            StoreConfig::Log {
                dir,
                flush_interval_ms,
            } => Ok(Arc::new(open_log(dir, *flush_interval_ms, on_sync).await?)),
            StoreConfig::Postgres { url, pool_size } => {
                let cannot = |e: StorageError| {
                    let target = store_postgres::describe_target(url.as_str());
                    StorageError::new(
                        e.kind(),
                        format!("cannot open the offset store in PostgreSQL ({target}): {e}"),
                    )
                };
                Ok(match lease {
                    // A fenced write holds its slot's row, which another broker's claim of
                    // the slot waits for: bounded by the lease.
                    Some(lease) => {
                        let bounded = lease.bounded(url).map_err(cannot)?;
                        let store =
                            store_postgres::PostgresStore::connect_with(bounded, *pool_size)
                                .await
                                .map_err(cannot)?;
                        Arc::new(store.with_fence(lease.fence()))
                    }
                    None => Arc::new(
                        store_postgres::PostgresStore::connect(url.as_str(), *pool_size)
                            .await
                            .map_err(cannot)?,
                    ),
                })
            }
        }
    }
}

fn io_error(message: String, e: std::io::Error) -> StorageError {
    StorageError::new(StorageErrorKind::Io, message).with_source(e)
}

async fn exists(path: &Path) -> Result<bool, StorageError> {
    tokio::fs::try_exists(path)
        .await
        .map_err(|e| io_error(format!("cannot look for `{}`: {e}", path.display()), e))
}

/// Opens the log of data directory `dir`, importing its `offsets.json` first if there is one.
/// Its syncs (the import's too) are told to `on_sync`, if given.
async fn open_log(
    dir: &Path,
    flush_interval_ms: Option<u64>,
    on_sync: Option<crate::metrics::FlushObserver>,
) -> Result<LogStore, StorageError> {
    let groups = dir.join(GROUPS_DIR);
    tokio::fs::create_dir_all(&groups).await.map_err(|e| {
        io_error(
            format!("cannot create the group log `{}`: {e}", groups.display()),
            e,
        )
    })?;
    let builder = |ms: Option<u64>| {
        let builder = match ms {
            Some(ms) => LogStore::builder().flush_interval_ms(ms),
            None => LogStore::builder(),
        };
        match &on_sync {
            Some(observer) => builder.on_sync(observer.clone()),
            None => builder,
        }
    };
    if !exists(&dir.join(OFFSETS_FILE)).await? {
        return builder(flush_interval_ms).open_async(&groups).await;
    }
    // The import is acknowledged only once synced, whatever the flush interval: it is
    // written through a store that syncs every batch, which is then closed and reopened
    // with the interval asked for.
    let log = builder(None).open_async(&groups).await?;
    import_json(dir, &log).await?;
    if flush_interval_ms.is_none() {
        return Ok(log);
    }
    // Closing joins the writer thread: off the async workers. Between the close and the
    // reopen the directory is unowned for a moment; a second broker starting just then
    // takes it (the import is durable and the file renamed) and this reopen is refused as
    // "in use": never two owners.
    tokio::task::spawn_blocking(move || drop(log))
        .await
        .map_err(|e| {
            StorageError::new(
                StorageErrorKind::Other,
                format!("closing the group log after the import failed: {e}"),
            )
        })?;
    builder(flush_interval_ms).open_async(&groups).await
}

/// What an import found and did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Imported {
    groups: usize,
    offsets: usize,
    /// Offsets the log already held with the file's value (an earlier import).
    already: usize,
}

/// Imports `<dir>/offsets.json` into `log`, then renames it to `offsets.json.imported`.
///
/// The steps, and why a crash between any two is safe:
///
/// 1. The JSON store opens the file and takes its lock (an older broker still running on
///    the directory holds it: the import is refused, nothing is written).
/// 2. Every partition of the file is compared with the log. One the log lacks is imported;
///    one the log holds with the file's offset was imported before (a crash after step 3
///    and before step 4's rename was durable) and is skipped; one the log holds with
///    another offset is a conflict and fails the open, changing nothing, because which
///    one is newer cannot be known (the log could only have moved on after a durable
///    rename, so this is someone else's file: an older broker binary run on the
///    directory after this one, or a copied file). The operator keeps the log by moving the file
///    away, or re-imports it by moving `groups/` away.
/// 3. The missing offsets are committed to the log, every group at once (so they share a
///    few batches), each synced before it is acknowledged (`open_log` imports through a
///    store without flush interval). A crash in this step leaves some groups imported and
///    others not: the next start finds the first with the file's offsets (skipped) and
///    imports the others.
/// 4. Only then is the file renamed (to the first free of `offsets.json.imported`,
///    `offsets.json.imported.1`, …) and the directory synced, before the store is handed
///    to the broker: so no commit reaches the log while the file still has its name,
///    and a power loss cannot bring the name back after the log has moved on. A crash
///    before the rename is durable is step 2's "imported before" case: the log holds
///    exactly the file's offsets for the file's partitions, nothing newer, and the next
///    start skips them all and renames.
///
/// The JSON file keeps offsets only: they are imported as the JSON store gives them, with
/// no leader epoch, no metadata and commit time 0 (unknown). (Not the time of the import:
/// the coordinator's commit times are its own clock's, which is not the wall clock.)
///
/// # Errors
/// The JSON store's (in use, unreadable, corrupt); a conflict (step 2), naming the first
/// partition that differs; the log's failed write; a failed rename or directory sync.
pub(crate) async fn import_json(dir: &Path, log: &LogStore) -> Result<Imported, StorageError> {
    let file = dir.join(OFFSETS_FILE);
    let json = JsonFileStore::open_async(file.clone()).await?;
    let held = log.snapshot();
    let mut todo: BTreeMap<String, CommittedOffsets> = BTreeMap::new();
    let mut found = Imported::default();
    let mut conflicts = 0usize;
    let mut first_conflict = None;
    for (group, offsets) in json.snapshot() {
        found.groups += 1;
        let in_log = held.get(&group);
        for (tp, offset) in offsets {
            found.offsets += 1;
            match in_log.and_then(|o| o.get(&tp)).map(|o| o.offset) {
                Some(logged) if logged == offset => found.already += 1,
                Some(logged) => {
                    conflicts += 1;
                    first_conflict.get_or_insert((group.clone(), tp, offset, logged));
                }
                None => {
                    let o = OffsetAndMetadata::new(offset);
                    todo.entry(group.clone()).or_default().insert(tp, o);
                }
            }
        }
    }
    if let Some((group, tp, offset, logged)) = first_conflict {
        return Err(conflict(dir, conflicts, &group, &tp, offset, logged));
    }
    let imported = found.offsets - found.already;
    commit_all(log, todo).await?;
    let backup = rename_to_backup(dir, &file).await?;
    drop(json);
    tracing::info!(
        file = %file.display(), backup = %backup.display(), groups = found.groups,
        offsets = imported, already_in_log = found.already,
        "imported the offset file into the group log and kept it as a backup"
    );
    Ok(found)
}

fn conflict(
    dir: &Path,
    count: usize,
    group: &str,
    tp: &TopicPartition,
    offset: i64,
    logged: i64,
) -> StorageError {
    StorageError::new(
        StorageErrorKind::Corrupt,
        format!(
            "the data directory `{}` holds both `{OFFSETS_FILE}` and a group log \
             (`{GROUPS_DIR}/`) whose offsets differ for {count} partition(s) (group `{group}`, \
             {}-{}: {offset} in the file, {logged} in the log); which is newer cannot be \
             known, so nothing was imported: move `{OFFSETS_FILE}` away to keep the log, or \
             move `{GROUPS_DIR}/` away to import the file",
            dir.display(),
            tp.topic(),
            tp.partition()
        ),
    )
}

/// Commits every group's offsets at once (they share the log's batches) and waits for all.
async fn commit_all(
    log: &LogStore,
    todo: BTreeMap<String, CommittedOffsets>,
) -> Result<(), StorageError> {
    // Each commit queues its write at its first poll, and all are polled together: the
    // writer takes them in a few batches rather than one batch (one sync) per group.
    let mut pending: Vec<_> = todo
        .iter()
        .map(|(group, offsets)| {
            // (a boxed, pinned future: the port's methods are `async_trait`s)
            Some(log.commit_with_metadata(group, offsets, CommitFence::none()))
        })
        .collect();
    let mut first_error = None;
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for slot in &mut pending {
            if let Some(commit) = slot {
                match commit.as_mut().poll(cx) {
                    Poll::Ready(result) => {
                        if let Err(e) = result {
                            first_error.get_or_insert(e);
                        }
                        *slot = None;
                    }
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    first_error.map_or(Ok(()), Err)
}

/// Renames `file` to the first free backup name and syncs the directory; returns the name.
async fn rename_to_backup(dir: &Path, file: &Path) -> Result<PathBuf, StorageError> {
    let mut backup = dir.join(IMPORTED_FILE);
    let mut n = 0u32;
    while exists(&backup).await? {
        n += 1;
        backup = dir.join(format!("{IMPORTED_FILE}.{n}"));
    }
    tokio::fs::rename(file, &backup).await.map_err(|e| {
        io_error(
            format!(
                "cannot rename the imported `{}` to `{}`: {e}",
                file.display(),
                backup.display()
            ),
            e,
        )
    })?;
    let synced = dir.to_path_buf();
    tokio::task::spawn_blocking(move || std::fs::File::open(&synced)?.sync_all())
        .await
        .map_err(|e| {
            StorageError::new(
                StorageErrorKind::Other,
                format!("syncing the data directory after the import failed: {e}"),
            )
        })?
        .map_err(|e| {
            io_error(
                format!(
                    "cannot sync the data directory `{}` after renaming the imported offset \
                     file: {e}",
                    dir.display()
                ),
                e,
            )
        })?;
    Ok(backup)
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordinator_core::{CommitFence, OffsetMap, TopicPartition};

    fn map(offsets: Rows<'_>) -> OffsetMap {
        offsets
            .iter()
            .map(|(t, p, o)| (TopicPartition::new(*t, *p), *o))
            .collect()
    }

    /// `(topic, partition, offset)`s.
    type Rows<'a> = &'a [(&'a str, u32, i64)];

    /// Writes `offsets.json` as an older broker did: through the JSON store, closed after.
    async fn old_file(dir: &Path, groups: &[(&str, Rows<'_>)]) {
        let json = JsonFileStore::open_async(dir.join(OFFSETS_FILE))
            .await
            .unwrap();
        for (g, offsets) in groups {
            json.commit(g, &map(offsets), CommitFence::none())
                .await
                .unwrap();
        }
    }

    async fn log_at(dir: &Path) -> LogStore {
        std::fs::create_dir_all(dir.join(GROUPS_DIR)).unwrap();
        LogStore::open_async(dir.join(GROUPS_DIR)).await.unwrap()
    }

    fn log_config(dir: &Path) -> StoreConfig {
        StoreConfig::from_data_dir(Some(dir))
    }

    #[tokio::test]
    async fn each_store_keeps_what_is_committed_and_only_the_files_survive_a_reopen() {
        let dirs = [(); 3].map(|()| tempfile::tempdir().unwrap());
        let offsets = map(&[("t", 0, 7)]);
        for config in [
            StoreConfig::Memory,
            log_config(dirs[0].path()),
            StoreConfig::of(Some(dirs[1].path()), OffsetsStore::Json, None),
            StoreConfig::of(Some(dirs[2].path()), OffsetsStore::Log, Some(5)),
        ] {
            let store = config.open().await.unwrap();
            store
                .commit("g", &offsets, CommitFence::none())
                .await
                .unwrap();
            assert_eq!(store.list("g").await.unwrap(), offsets, "{config:?}");
            drop(store);
            let again = config.open().await.unwrap();
            let expected = if config.path().is_some() {
                offsets.clone()
            } else {
                OffsetMap::new()
            };
            assert_eq!(again.list("g").await.unwrap(), expected, "{config:?}");
        }
        assert!(dirs[0].path().join(GROUPS_DIR).is_dir());
        assert!(dirs[1].path().join(OFFSETS_FILE).is_file());
        assert!(!dirs[1].path().join(GROUPS_DIR).exists());
        assert!(dirs[2].path().join(GROUPS_DIR).is_dir());
    }

    /// Once the log keeps a directory, the JSON store is refused there (it would serve the
    /// older file's offsets, or none); the log is untouched.
    #[tokio::test]
    async fn the_json_store_is_refused_on_a_directory_the_log_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        old_file(d, &[("g", &[("t", 0, 5)])]).await;
        let log = log_config(d).open().await.unwrap();
        log.commit("g", &map(&[("t", 0, 6)]), CommitFence::none())
            .await
            .unwrap();
        drop(log);
        let json = StoreConfig::of(Some(d), OffsetsStore::Json, None);
        let err = json.open().await.err().expect("refused");
        assert!(
            err.to_string().contains("holds a group log (`groups/`)"),
            "{err}"
        );
        assert!(!d.join(OFFSETS_FILE).exists(), "no file created");
        let log = log_config(d).open().await.unwrap();
        assert_eq!(log.list("g").await.unwrap(), map(&[("t", 0, 6)]));
    }

    #[tokio::test]
    async fn a_data_directory_has_one_owner_of_either_kind() {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        for config in [
            log_config(dir.path()),
            StoreConfig::of(Some(other.path()), OffsetsStore::Json, None),
        ] {
            let _owner = config.open().await.unwrap();
            let err = config
                .open()
                .await
                .err()
                .expect("a second opener is refused");
            assert!(err.to_string().contains("in use"), "{config:?}: {err}");
        }
    }

    #[tokio::test]
    async fn detection_finds_the_log_first_then_the_file_else_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert_eq!(StoreConfig::detect(d).await, None);
        std::fs::write(d.join(OFFSETS_FILE), "{}").unwrap();
        assert_eq!(
            StoreConfig::detect(d).await,
            Some(StoreConfig::of(Some(d), OffsetsStore::Json, None))
        );
        std::fs::create_dir(d.join(GROUPS_DIR)).unwrap();
        assert_eq!(StoreConfig::detect(d).await, Some(log_config(d)));
    }

    #[tokio::test]
    async fn an_older_brokers_file_is_imported_once_then_kept_as_a_backup() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        old_file(
            d,
            &[("g1", &[("t", 0, 5), ("t", 1, 3)]), ("g2", &[("u", 0, 9)])],
        )
        .await;
        let before = std::fs::read(d.join(OFFSETS_FILE)).unwrap();

        let store = log_config(d).open().await.unwrap();
        assert_eq!(
            store.list("g1").await.unwrap(),
            map(&[("t", 0, 5), ("t", 1, 3)])
        );
        assert_eq!(store.list("g2").await.unwrap(), map(&[("u", 0, 9)]));
        let imported = store.list_with_metadata("g2").await.unwrap();
        assert_eq!(
            imported.get(&TopicPartition::new("u", 0)),
            Some(&OffsetAndMetadata::new(9)),
            "as the JSON store gives it: no epoch, no metadata, commit time 0"
        );
        assert!(!d.join(OFFSETS_FILE).exists(), "renamed");
        assert_eq!(
            std::fs::read(d.join(IMPORTED_FILE)).unwrap(),
            before,
            "kept as it was"
        );

        // The log moves on; a restart imports nothing again.
        store
            .commit("g1", &map(&[("t", 0, 50)]), CommitFence::none())
            .await
            .unwrap();
        drop(store);
        let store = log_config(d).open().await.unwrap();
        assert_eq!(
            store.list("g1").await.unwrap(),
            map(&[("t", 0, 50), ("t", 1, 3)])
        );
        drop(store);

        // A second file (an older broker binary run on the directory in between) with offsets
        // the log does not hold is imported too, and its backup does not replace the first.
        old_file(d, &[("g3", &[("t", 0, 1)])]).await;
        let store = log_config(d).open().await.unwrap();
        assert_eq!(store.list("g3").await.unwrap(), map(&[("t", 0, 1)]));
        assert_eq!(std::fs::read(d.join(IMPORTED_FILE)).unwrap(), before);
        assert!(d.join(format!("{IMPORTED_FILE}.1")).is_file());
    }

    /// A crash after the import was durable and before the rename was: the log holds the
    /// file's offsets (for some groups, if the crash was in the middle of the import), the
    /// file is still there. The restart skips what was imported, imports the rest, renames.
    #[tokio::test]
    async fn a_restart_after_a_crash_between_import_and_rename_finishes_the_import() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        old_file(
            d,
            &[("g1", &[("t", 0, 5), ("t", 1, 3)]), ("g2", &[("u", 0, 9)])],
        )
        .await;
        // What the crashed start had made durable: g1 only, and another group the log held
        // already.
        let log = log_at(d).await;
        log.commit("g1", &map(&[("t", 0, 5), ("t", 1, 3)]), CommitFence::none())
            .await
            .unwrap();
        log.commit("other", &map(&[("t", 0, 77)]), CommitFence::none())
            .await
            .unwrap();
        let found = import_json(d, &log).await.unwrap();
        assert_eq!(
            found,
            Imported {
                groups: 2,
                offsets: 3,
                already: 2
            }
        );
        assert_eq!(
            log.list("g1").await.unwrap(),
            map(&[("t", 0, 5), ("t", 1, 3)])
        );
        assert_eq!(log.list("g2").await.unwrap(), map(&[("u", 0, 9)]));
        assert_eq!(log.list("other").await.unwrap(), map(&[("t", 0, 77)]));
        assert!(!d.join(OFFSETS_FILE).exists());
        assert!(d.join(IMPORTED_FILE).is_file());
    }

    /// A file whose offset differs from the log's for a partition both hold: which is newer
    /// cannot be known, so the open fails, naming it, and changes nothing.
    #[tokio::test]
    async fn a_file_that_contradicts_the_log_is_refused_and_nothing_changes() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let log = log_at(d).await;
        log.commit("g", &map(&[("t", 0, 9)]), CommitFence::none())
            .await
            .unwrap();
        drop(log);
        old_file(d, &[("g", &[("t", 0, 5)]), ("h", &[("t", 0, 1)])]).await;

        let err = log_config(d).open().await.err().expect("refused");
        assert_eq!(err.code(), "STORAGE_ERROR");
        let message = err.to_string();
        assert!(
            message.contains("differ for 1 partition(s)")
                && message.contains("group `g`, t-0: 5 in the file, 9 in the log")
                && message.contains("move `offsets.json` away"),
            "{message}"
        );
        assert!(d.join(OFFSETS_FILE).is_file(), "kept");
        let log = log_at(d).await;
        assert_eq!(log.list("g").await.unwrap(), map(&[("t", 0, 9)]));
        assert!(log.list("h").await.unwrap().is_empty(), "nothing imported");
    }

    /// An older broker still running on the directory holds the file's lock: the import is
    /// refused before anything is written.
    #[tokio::test]
    async fn an_older_broker_still_running_on_the_file_refuses_the_import() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        old_file(d, &[("g", &[("t", 0, 5)])]).await;
        let older = JsonFileStore::open_async(d.join(OFFSETS_FILE))
            .await
            .unwrap();
        let err = log_config(d).open().await.err().expect("refused");
        assert!(err.to_string().contains("in use"), "{err}");
        drop(older);
        assert!(d.join(OFFSETS_FILE).is_file());
        let log = log_at(d).await;
        assert!(log.list("g").await.unwrap().is_empty());
    }

    /// With a flush interval the import is still synced before the file is renamed (it is
    /// written through a store that syncs every batch), and the store then serves.
    #[tokio::test]
    async fn an_import_with_a_flush_interval_lands_and_the_store_serves() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        old_file(d, &[("g", &[("t", 0, 5)])]).await;
        let config = StoreConfig::of(Some(d), OffsetsStore::Log, Some(1000));
        let store = config.open().await.unwrap();
        assert_eq!(store.list("g").await.unwrap(), map(&[("t", 0, 5)]));
        store
            .commit("g", &map(&[("t", 0, 6)]), CommitFence::none())
            .await
            .unwrap();
        drop(store);
        assert!(!d.join(OFFSETS_FILE).exists());
        let store = config.open().await.unwrap();
        assert_eq!(store.list("g").await.unwrap(), map(&[("t", 0, 6)]));
    }
}
