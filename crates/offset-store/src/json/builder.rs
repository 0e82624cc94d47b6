//! [`JsonFileStoreBuilder`]: how a [`JsonFileStore`] is opened.

use std::fmt;
use std::path::{Path, PathBuf};

use coordinator_core::StorageError;

use super::JsonFileStore;
use crate::fs::{Fs, StdFs};
use crate::group_commit::run_blocking;

/// Options for opening a [`JsonFileStore`]: the file system it writes through and how many
/// writes may share one file write. [`JsonFileStore::open`] is `builder().open(path)`.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use offset_store::JsonFileStore;
/// use offset_store::testing::SimFs;
///
/// // One file write per commit, as a store without group commit would do.
/// let unbatched = JsonFileStore::builder()
///     .fs(SimFs::new())
///     .max_batch(1)
///     .open("/data/offsets.json")?;
/// assert_eq!(unbatched.max_batch(), 1);
/// # Ok(())
/// # }
/// ```
pub struct JsonFileStoreBuilder<F: Fs = StdFs> {
    fs: F,
    max_batch: usize,
}

impl JsonFileStoreBuilder<StdFs> {
    /// The defaults: the real file system, no limit on a batch.
    pub fn new() -> Self {
        JsonFileStoreBuilder {
            fs: StdFs,
            max_batch: usize::MAX,
        }
    }

    /// [`open`](Self::open) on tokio's blocking pool, so parsing a large file does not hold an
    /// async worker.
    ///
    /// # Errors
    /// As [`JsonFileStore::open`].
    pub async fn open_async(
        self,
        path: impl Into<PathBuf>,
    ) -> Result<JsonFileStore<StdFs>, StorageError> {
        let path = path.into();
        run_blocking(move || self.open(path)).await
    }
}

impl Default for JsonFileStoreBuilder<StdFs> {
    fn default() -> Self {
        Self::new()
    }
}

impl<F: Fs> JsonFileStoreBuilder<F> {
    /// Writes through `fs` instead (a [`SimFs`](crate::testing::SimFs) in tests).
    pub fn fs<G: Fs>(self, fs: G) -> JsonFileStoreBuilder<G> {
        JsonFileStoreBuilder {
            fs,
            max_batch: self.max_batch,
        }
    }

    /// At most `n` writes (commits and deletes) share one file write; `0` is taken as `1`.
    ///
    /// The default has no limit: every write queued while a file write is in flight goes into
    /// the next one. `1` turns group commit off — one file write per commit, one after the
    /// other — which is there to measure what batching buys, not for production.
    #[must_use]
    pub fn max_batch(mut self, n: usize) -> Self {
        self.max_batch = n.max(1);
        self
    }

    /// Opens the store kept in the file at `path`.
    ///
    /// # Errors
    /// As [`JsonFileStore::open`].
    pub fn open(self, path: impl AsRef<Path>) -> Result<JsonFileStore<F>, StorageError> {
        JsonFileStore::open_built(path.as_ref(), self.fs, self.max_batch)
    }
}

impl<F: Fs> fmt::Debug for JsonFileStoreBuilder<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonFileStoreBuilder")
            .field("max_batch", &self.max_batch)
            .finish_non_exhaustive()
    }
}
