//! The `OffsetStore` port: where committed offsets live.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::OwnedRwLockReadGuard;

use crate::coordinator::Group;

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
/// - **Fenced commits outlive nothing**: [`commit_fenced`](OffsetStore::commit_fenced) keeps
///   its [`CommitFence`] alive until the commit has taken effect or has been abandoned for
///   good — including when the future is dropped while work it started goes on elsewhere (a
///   blocking thread, a network request). A store whose `commit` does all its work while
///   polled can implement it as `commit` followed by dropping the fence.
/// - The coordinator calls `commit_fenced` while holding the group's lock, so a commit must
///   not call back into the coordinator.
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

    /// [`commit`](OffsetStore::commit) on behalf of the coordinator, which passed its fencing
    /// checks and proves it with `fence`: while the fence lives, the group cannot rebalance.
    /// Keep it until the write can no longer take effect (see the trait docs). Required, so
    /// that a wrapper store cannot lose the fence by forwarding only `commit`: a store whose
    /// `commit` does all its work while polled may simply call it and then drop the fence.
    async fn commit_fenced(
        &self,
        group: &str,
        offsets: &OffsetMap,
        fence: CommitFence,
    ) -> Result<(), StorageError>;

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

    async fn commit_fenced(
        &self,
        group: &str,
        offsets: &OffsetMap,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        (**self).commit_fenced(group, offsets, fence).await
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

/// Proof that a commit passed the coordinator's fencing checks: it holds the group's lock
/// (shared), so no rebalance of the group can complete while it lives.
///
/// A store that hands a commit's work to another thread or task moves the fence along with
/// it, so that a caller who drops the commit future (a timeout, `select!`, an aborted task)
/// cannot let a write checked against generation G land after the group moved to G+1.
pub struct CommitFence {
    held: Held,
}

/// What a fence keeps alive. The coordinator's own guard is a variant of its own, so a
/// fenced commit allocates nothing.
enum Held {
    Nothing,
    Group(#[allow(dead_code)] OwnedRwLockReadGuard<Group>),
    Other(#[allow(dead_code)] Box<dyn Any + Send + Sync>),
}

impl CommitFence {
    /// A fence that holds nothing: for commits that are not fenced (direct commits, tests).
    pub fn none() -> Self {
        CommitFence {
            held: Held::Nothing,
        }
    }

    /// A fence holding `value` (a lock guard) until it is dropped.
    pub fn holding<T: Send + Sync + 'static>(value: T) -> Self {
        CommitFence {
            held: Held::Other(Box::new(value)),
        }
    }

    /// The coordinator's fence: the group's lock, shared.
    pub(crate) fn group(guard: OwnedRwLockReadGuard<Group>) -> Self {
        CommitFence {
            held: Held::Group(guard),
        }
    }
}

impl fmt::Debug for CommitFence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let holds = match self.held {
            Held::Nothing => "nothing",
            Held::Group(_) => "a group lock",
            Held::Other(_) => "a value",
        };
        f.debug_struct("CommitFence")
            .field("holds", &holds)
            .finish()
    }
}
