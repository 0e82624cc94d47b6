//! # offset-store
//!
//! Adapters of coordinator-core's [`OffsetStore`](coordinator_core::OffsetStore) port:
//!
//! - [`JsonFileStore`]: every group's committed offsets in one JSON file, written with the
//!   temp-file, fsync, rename, directory-fsync protocol (docs/rules.md#json-persist): a crash
//!   leaves the old file or the new one and an acknowledged commit is never lost. A file has
//!   one owner (an OS lock on `<name>.lock`, taken by `open`); writes are group-committed by
//!   the store's writer thread: every commit and delete queued while a file write is in
//!   flight shares the next one, so N concurrent commits cost about one file write, not N
//!   (configured with [`JsonFileStoreBuilder`]);
//! - [`LogStore`]: everything a coordinator keeps — offsets with Kafka's metadata and
//!   groups' durable records — as keyed records of a compacted partition of
//!   `partition_log`'s segment log (Kafka's `__consumer_offsets` on one node): the segment
//!   log's files, checksums, recovery, flush policy and cleaner are the ones every topic of
//!   the broker uses. A batch of writes is one append, one write and one `fdatasync` (or,
//!   with [`flush_interval_ms`](LogStoreBuilder::flush_interval_ms), acknowledged once
//!   written and synced by the segment log every N ms); the live state is in memory, so a
//!   commit costs its own records whatever the store holds; one owner per directory (an OS
//!   lock on the directory itself). Options in [`LogStoreBuilder`];
//! - [`MemoryStore`]: offsets in memory, sharded per group, with failure switches for tests.
//!
//! ## Where it sits
//!
//! An outer layer of the hexagon. It depends on `coordinator-core` for the port, its error
//! type and its validation, and nothing depends on it but the binaries that wire a
//! coordinator together (`labs`) and tests:
//!
//! ```text
//!   labs ──► consumer ──► coordinator-core ◄── offset-store (this crate)
//!                                          ◄── assignor
//! ```
//!
//! Both file stores reach the disk only through the [`fs::Fs`] seam; [`testing::SimFs`] is a
//! simulated file system behind the same seam that cuts power after any operation and fails
//! operations with `EIO` or `ENOSPC`, for crash and fault-injection tests.
//!
//! ## Threads
//!
//! The file stores need no async runtime: their file work runs on one `std` thread per store
//! (the JSON store's started by its first write, the log store's by `open`, plus a compaction
//! thread while one runs), and a write's future only waits for that thread's answer (a
//! `tokio::sync::oneshot`, which any executor can poll). Reads are served from memory on the
//! caller's thread. `open` reads the file on the calling thread (`open_async` moves that to
//! tokio's blocking pool). The memory store does everything on the caller's thread.
//!
//! ## Example
//!
//! ```
//! use coordinator_core::{CommitFence, OffsetMap, OffsetStore, TopicPartition};
//! use offset_store::JsonFileStore;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # tokio::runtime::Builder::new_multi_thread().build()?.block_on(async {
//! let path = dir.path().join("offsets.json");
//! let store = JsonFileStore::open(&path)?; // no file yet: an empty store
//!
//! let offsets: OffsetMap = [(TopicPartition::new("orders", 0), 42)].into();
//! store.commit("workers", &offsets, CommitFence::none()).await?;
//! assert_eq!(
//!     std::fs::read_to_string(&path)?,
//!     r#"{"groups":{"workers":[{"offset":42,"partition":0,"topic":"orders"}]},"version":1}"#
//! );
//!
//! // A file has one owner: a second store on it is refused until the first is dropped.
//! let err = JsonFileStore::open(&path).unwrap_err();
//! assert!(err.to_string().contains("in use"));
//!
//! // Reopening reads back what was committed.
//! drop(store);
//! let reopened = JsonFileStore::open(&path)?;
//! let orders_0 = TopicPartition::new("orders", 0);
//! assert_eq!(reopened.committed("workers", &orders_0).await?, Some(42));
//!
//! // A damaged file is an error that names it, never an empty store.
//! drop(reopened);
//! std::fs::write(&path, "{\"groups\":")?;
//! let err = JsonFileStore::open(&path).unwrap_err();
//! assert_eq!(err.code(), "STORAGE_ERROR");
//! assert!(err.to_string().contains("offsets.json"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })
//! # }
//! ```

//! ## The log store
//!
//! ```
//! use coordinator_core::{CommitFence, OffsetAndMetadata, OffsetStore, TopicPartition};
//! use offset_store::LogStore;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # tokio::runtime::Builder::new_multi_thread().build()?.block_on(async {
//! let store = LogStore::open(dir.path())?; // an empty directory: an empty store
//! assert!(store.keeps_metadata() && store.keeps_groups());
//!
//! let orders_0 = TopicPartition::new("orders", 0);
//! let offsets = [(orders_0.clone(), OffsetAndMetadata::new(42).with_metadata("m"))].into();
//! store.commit_with_metadata("workers", &offsets, CommitFence::none()).await?;
//!
//! // A directory has one owner, whatever files are removed from it.
//! let err = LogStore::open(dir.path()).unwrap_err();
//! assert!(err.to_string().contains("in use"));
//!
//! drop(store);
//! let reopened = LogStore::open(dir.path())?;
//! assert_eq!(reopened.list_with_metadata("workers").await?, offsets);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })
//! # }
//! ```

#![forbid(unsafe_code)]

pub mod fs;
mod group_commit;
mod json;
mod log;
mod memory;
pub mod testing;

pub use group_commit::WriteHold;
pub use json::{JsonFileStore, JsonFileStoreBuilder};
pub use log::{LogStats, LogStore, LogStoreBuilder};
pub use memory::MemoryStore;
