//! The one place an offset store is chosen: the broker and the groups tool's `--data-dir`
//! mode both open theirs through [`StoreConfig::open`], so a second store (a database) is one
//! more variant here.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use coordinator_core::{OffsetStore, StorageError};
use offset_store::{JsonFileStore, MemoryStore};

/// The name of the offset file inside a data directory.
pub const OFFSETS_FILE: &str = "offsets.json";

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
}

impl fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreConfig::Memory => f.write_str("Memory"),
            StoreConfig::JsonFile { dir } => write!(f, "JsonFile({})", dir.display()),
        }
    }
}

impl StoreConfig {
    /// The store of a `--data-dir` setting: a JSON file inside it, or memory without one.
    pub fn from_data_dir(dir: Option<&Path>) -> StoreConfig {
        match dir {
            Some(dir) => StoreConfig::JsonFile {
                dir: dir.to_path_buf(),
            },
            None => StoreConfig::Memory,
        }
    }

    /// The file the store keeps, if it keeps one.
    pub fn path(&self) -> Option<PathBuf> {
        match self {
            StoreConfig::Memory => None,
            StoreConfig::JsonFile { dir } => Some(dir.join(OFFSETS_FILE)),
        }
    }

    /// Opens the store (for a file, without blocking the runtime: the file is read and
    /// locked on a blocking thread).
    ///
    /// # Errors
    /// The store's: the directory's lock held by another process, an unreadable or invalid
    /// offset file.
    pub async fn open(&self) -> Result<Arc<dyn OffsetStore>, StorageError> {
        match self {
            StoreConfig::Memory => Ok(Arc::new(MemoryStore::new())),
            StoreConfig::JsonFile { dir } => {
                let store = JsonFileStore::open_async(dir.join(OFFSETS_FILE)).await?;
                Ok(Arc::new(store))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordinator_core::{CommitFence, OffsetMap, TopicPartition};

    #[tokio::test]
    async fn each_store_keeps_what_is_committed_and_only_the_file_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let tp = TopicPartition::new("t", 0);
        let offsets = OffsetMap::from([(tp.clone(), 7)]);
        for config in [
            StoreConfig::Memory,
            StoreConfig::from_data_dir(Some(dir.path())),
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
        assert!(dir.path().join(OFFSETS_FILE).is_file());
    }

    #[tokio::test]
    async fn a_data_directory_has_one_owner() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig::from_data_dir(Some(dir.path()));
        let _owner = config.open().await.unwrap();
        assert!(config.open().await.is_err(), "a second opener is refused");
    }
}
