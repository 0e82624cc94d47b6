//! The `OffsetStore` port: where committed offsets live.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use crate::error::StorageError;
use crate::types::{OffsetMap, TopicPartition};

/// Durable committed offsets, per group.
///
/// Object-safe (`Arc<dyn OffsetStore>`), `async` so that a store may do blocking or network
/// I/O without holding a runtime worker.
///
/// # To ensure correctness
/// - **All or nothing**: a `commit` or `commit_many` that returns `Err` has changed nothing,
///   neither durably nor in what later reads return. One that returns `Ok` is visible to every
///   later read and, for a durable store, survives a crash.
/// - **Cancellation-safe**: if the future is dropped before it completes, the store is left
///   either wholly before or wholly after the commit, and its reads agree with its durable
///   state.
/// - **Merge semantics**: a commit overwrites the listed partitions' offsets and keeps all
///   others.
/// - **Negative offsets are refused** with a [`StorageError`] of kind
///   [`InvalidOffset`](crate::StorageErrorKind::InvalidOffset), and nothing is written.
/// - The coordinator calls `commit` while holding the group's lock, so a commit must not call
///   back into the coordinator.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait OffsetStore: Send + Sync {
    /// The committed next offset of `tp` for `group`, if one was committed.
    async fn committed(
        &self,
        group: &str,
        tp: &TopicPartition,
    ) -> Result<Option<i64>, StorageError>;

    /// Merges `offsets` into `group`'s committed offsets.
    async fn commit(&self, group: &str, offsets: &OffsetMap) -> Result<(), StorageError>;

    /// Merges the offsets of several groups at once: all of them land, or none does.
    async fn commit_many(&self, commits: &BTreeMap<String, OffsetMap>) -> Result<(), StorageError>;

    /// Every committed offset of `group` (empty if none).
    async fn list(&self, group: &str) -> Result<OffsetMap, StorageError>;
}

#[async_trait]
impl<S: OffsetStore + ?Sized> OffsetStore for Arc<S> {
    async fn committed(
        &self,
        group: &str,
        tp: &TopicPartition,
    ) -> Result<Option<i64>, StorageError> {
        (**self).committed(group, tp).await
    }

    async fn commit(&self, group: &str, offsets: &OffsetMap) -> Result<(), StorageError> {
        (**self).commit(group, offsets).await
    }

    async fn commit_many(&self, commits: &BTreeMap<String, OffsetMap>) -> Result<(), StorageError> {
        (**self).commit_many(commits).await
    }

    async fn list(&self, group: &str) -> Result<OffsetMap, StorageError> {
        (**self).list(group).await
    }
}

/// Checks that no offset in `offsets` is negative: the shared validation every store runs
/// before writing anything.
pub fn validate_offsets(group: &str, offsets: &OffsetMap) -> Result<(), StorageError> {
    match offsets.iter().find(|(_, &o)| o < 0) {
        Some((tp, &o)) => Err(StorageError::invalid_offset(group, tp, o)),
        None => Ok(()),
    }
}
