//! The `OffsetStore` port: where committed offsets live.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard};

use crate::error::StorageError;
use crate::group::GroupRecord;
use crate::txn::TransactionRecord;
use crate::types::{offsets_of, CommittedOffsets, OffsetAndMetadata, OffsetMap, TopicPartition};

/// Durable committed offsets, per group.
///
/// Object-safe (`Arc<dyn OffsetStore>`), `async` so that a store may do blocking or network
/// I/O without holding a runtime worker. Five required methods: three reads, two writes.
/// A store that keeps Kafka's [`OffsetAndMetadata`] (leader epoch, metadata string, commit
/// time) also implements [`list_with_metadata`](OffsetStore::list_with_metadata) and
/// [`commit_with_metadata`](OffsetStore::commit_with_metadata) and answers `true` from
/// [`keeps_metadata`](OffsetStore::keeps_metadata); the defaults keep the offsets alone.
///
/// # To ensure correctness
/// - **All or nothing**: a [`commit`](OffsetStore::commit) or [`delete`](OffsetStore::delete)
///   that returns `Err` has changed nothing, neither durably nor in what later reads return.
///   One that returns `Ok` is visible to every later read and, for a durable store, survives
///   a crash.
/// - **Cancellation-safe**: if the future is dropped before it completes, the store is left
///   either wholly before or wholly after the write, and its reads agree with its durable
///   state.
/// - **Merge semantics**: a commit overwrites the listed partitions' offsets and keeps all
///   others. An empty commit is a no-op.
/// - **Negative offsets are refused** with a [`StorageError`] of kind
///   [`InvalidOffset`](crate::StorageErrorKind::InvalidOffset), and nothing is written.
/// - **Keep the fence until the write is visible.** Every write carries a [`CommitFence`].
///   Drop it only once the write is visible to reads (or has failed, or been abandoned for
///   good) — including when the caller drops the future while work it started goes on
///   elsewhere (a blocking thread, a writer task, a network request): move the fence along
///   with that work. The coordinator's fencing guarantee (no commit checked against
///   generation G lands after G+1 is installed) rests on this.
/// - The coordinator calls the writes while holding its group's commit gate, so a write must
///   not call back into the coordinator.
#[async_trait]
pub trait OffsetStore: Send + Sync {
    /// The committed next offset of `tp` for `group`, if one was committed.
    async fn committed(
        &self,
        group: &str,
        tp: &TopicPartition,
    ) -> Result<Option<i64>, StorageError>;

    /// Every committed offset of `group` (empty if none), sorted by partition.
    async fn list(&self, group: &str) -> Result<OffsetMap, StorageError>;

    /// The ids of every group with at least one committed offset, sorted.
    async fn groups(&self) -> Result<Vec<String>, StorageError>;

    /// Merges `offsets` into `group`'s committed offsets, keeping `fence` alive until the
    /// write is visible (see the trait docs). A commit without fencing passes
    /// [`CommitFence::none`].
    async fn commit(
        &self,
        group: &str,
        offsets: &OffsetMap,
        fence: CommitFence,
    ) -> Result<(), StorageError>;

    /// Removes committed offsets of `group`: those of `partitions`, or all of them when
    /// `partitions` is `None`. Removing what is not there is not an error. The fence is kept
    /// as for [`commit`](OffsetStore::commit).
    async fn delete<'a>(
        &self,
        group: &str,
        partitions: Option<&'a [TopicPartition]>,
        fence: CommitFence,
    ) -> Result<(), StorageError>;

    /// Whether the store keeps what [`commit_with_metadata`](OffsetStore::commit_with_metadata)
    /// gives it beyond the offsets. Default: `false`.
    fn keeps_metadata(&self) -> bool {
        false
    }

    /// Every committed offset of `group` with its metadata, sorted by partition. The same
    /// offsets as [`list`](OffsetStore::list). Default: those offsets with no leader epoch,
    /// empty metadata and commit time 0 (a store that keeps offsets only).
    async fn list_with_metadata(&self, group: &str) -> Result<CommittedOffsets, StorageError> {
        Ok(self
            .list(group)
            .await?
            .into_iter()
            .map(|(tp, offset)| (tp, OffsetAndMetadata::new(offset)))
            .collect())
    }

    /// Merges `offsets` with their metadata into `group`'s, as
    /// [`commit`](OffsetStore::commit) does (same contract, same fence). Default: commits the
    /// offsets alone.
    async fn commit_with_metadata(
        &self,
        group: &str,
        offsets: &CommittedOffsets,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        self.commit(group, &offsets_of(offsets), fence).await
    }

    /// Whether the store keeps groups' durable records
    /// ([`write_group`](OffsetStore::write_group)). Default: `false`, and a coordinator over
    /// such a store forgets every group's members and generation at a restart (its members
    /// join again), as over the chapter's JSON file.
    fn keeps_groups(&self) -> bool {
        false
    }

    /// Replaces `group`'s durable record with `record`, or removes it (a tombstone) with
    /// `None`. Same contract as [`commit`](OffsetStore::commit): all or nothing, visible to
    /// [`load_groups`](OffsetStore::load_groups) once `Ok`, durable for a durable store, the
    /// fence kept until then. Default: keeps nothing.
    async fn write_group(
        &self,
        group: &str,
        record: Option<&GroupRecord>,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        let _ = (group, record, fence);
        Ok(())
    }

    /// Every group record the store keeps, sorted by group id (the latest of each group; none
    /// for a group whose last write was a tombstone). Default: none.
    async fn load_groups(&self) -> Result<Vec<GroupRecord>, StorageError> {
        Ok(Vec::new())
    }

    /// Whether the store keeps the transaction coordinator's records
    /// ([`write_transaction`](OffsetStore::write_transaction)). Default: `false`, and the
    /// transaction coordinator over such a store forgets every transactional id at a
    /// restart.
    fn keeps_transactions(&self) -> bool {
        false
    }

    /// Replaces transactional id `id`'s durable record with `record`, or removes it (a
    /// tombstone) with `None`. Same contract as [`write_group`](OffsetStore::write_group):
    /// all or nothing, visible to [`load_transactions`](OffsetStore::load_transactions) once
    /// `Ok`. Default: keeps nothing.
    async fn write_transaction(
        &self,
        id: &str,
        record: Option<&TransactionRecord>,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        let _ = (id, record, fence);
        Ok(())
    }

    /// Every transaction record the store keeps, sorted by transactional id (the latest of
    /// each; none for an id whose last write was a tombstone). Default: none.
    async fn load_transactions(&self) -> Result<Vec<TransactionRecord>, StorageError> {
        Ok(Vec::new())
    }
}

// The mock mocks the five required methods; the metadata methods keep their defaults, so an
// expectation on `commit` or `list` also covers a commit or fetch with metadata.
#[cfg(any(test, feature = "mocks"))]
mockall::mock! {
    /// A mockall mock of [`OffsetStore`]'s required methods.
    pub OffsetStore {}

    #[async_trait]
    impl OffsetStore for OffsetStore {
        async fn committed(
            &self,
            group: &str,
            tp: &TopicPartition,
        ) -> Result<Option<i64>, StorageError>;
        async fn list(&self, group: &str) -> Result<OffsetMap, StorageError>;
        async fn groups(&self) -> Result<Vec<String>, StorageError>;
        async fn commit(
            &self,
            group: &str,
            offsets: &OffsetMap,
            fence: CommitFence,
        ) -> Result<(), StorageError>;
        async fn delete<'a>(
            &self,
            group: &str,
            partitions: Option<&'a [TopicPartition]>,
            fence: CommitFence,
        ) -> Result<(), StorageError>;
    }
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

    async fn list(&self, group: &str) -> Result<OffsetMap, StorageError> {
        (**self).list(group).await
    }

    async fn groups(&self) -> Result<Vec<String>, StorageError> {
        (**self).groups().await
    }

    async fn commit(
        &self,
        group: &str,
        offsets: &OffsetMap,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        (**self).commit(group, offsets, fence).await
    }

    async fn delete<'a>(
        &self,
        group: &str,
        partitions: Option<&'a [TopicPartition]>,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        (**self).delete(group, partitions, fence).await
    }

    fn keeps_metadata(&self) -> bool {
        (**self).keeps_metadata()
    }

    async fn list_with_metadata(&self, group: &str) -> Result<CommittedOffsets, StorageError> {
        (**self).list_with_metadata(group).await
    }

    async fn commit_with_metadata(
        &self,
        group: &str,
        offsets: &CommittedOffsets,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        (**self).commit_with_metadata(group, offsets, fence).await
    }

    fn keeps_groups(&self) -> bool {
        (**self).keeps_groups()
    }

    async fn write_group(
        &self,
        group: &str,
        record: Option<&GroupRecord>,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        (**self).write_group(group, record, fence).await
    }

    async fn load_groups(&self) -> Result<Vec<GroupRecord>, StorageError> {
        (**self).load_groups().await
    }

    fn keeps_transactions(&self) -> bool {
        (**self).keeps_transactions()
    }

    async fn write_transaction(
        &self,
        id: &str,
        record: Option<&TransactionRecord>,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        (**self).write_transaction(id, record, fence).await
    }

    async fn load_transactions(&self) -> Result<Vec<TransactionRecord>, StorageError> {
        (**self).load_transactions().await
    }
}

/// Checks that no offset in `offsets` is negative: the shared validation every store runs
/// before writing anything.
pub fn validate_offsets(group: &str, offsets: &OffsetMap) -> Result<(), StorageError> {
    first_negative(group, offsets.iter().map(|(tp, &o)| (tp, o)))
}

/// [`validate_offsets`] for offsets with their metadata.
pub fn validate_committed(group: &str, offsets: &CommittedOffsets) -> Result<(), StorageError> {
    first_negative(group, offsets.iter().map(|(tp, o)| (tp, o.offset)))
}

fn first_negative<'a>(
    group: &str,
    mut offsets: impl Iterator<Item = (&'a TopicPartition, i64)>,
) -> Result<(), StorageError> {
    match offsets.find(|&(_, o)| o < 0) {
        Some((tp, o)) => Err(StorageError::invalid_offset(group, tp, o)),
        None => Ok(()),
    }
}

/// What a store must keep alive until its write is visible: for a fenced write, the
/// coordinator's hold on the group's commit gate, under which no rebalance of the group can
/// be installed.
///
/// A fence is an obligation, not a capability: the store never inspects it, it only keeps
/// it for as long as the write can still take effect. Only the coordinator makes fences
/// that hold something; anyone may pass [`CommitFence::none`] for a write that needs no
/// fencing (a direct commit, a tool, a test).
pub struct CommitFence {
    held: Held,
}

/// What a fence keeps alive.
enum Held {
    Nothing,
    Gate(#[allow(dead_code)] OwnedRwLockReadGuard<()>),
    /// The gate exclusively, shared with the caller: the exclusion lasts until both the
    /// store has dropped its fence and the caller has finished what follows the write.
    Exclusive(#[allow(dead_code)] Arc<OwnedRwLockWriteGuard<()>>),
}

impl CommitFence {
    /// A fence that holds nothing: the write is not fenced.
    pub fn none() -> Self {
        CommitFence {
            held: Held::Nothing,
        }
    }

    /// A fence holding a shared guard of a commit gate.
    pub(crate) fn gate(guard: OwnedRwLockReadGuard<()>) -> Self {
        CommitFence {
            held: Held::Gate(guard),
        }
    }

    /// A fence holding a commit gate exclusively (a delete that no commit may run beside).
    pub(crate) fn exclusive(guard: &Arc<OwnedRwLockWriteGuard<()>>) -> Self {
        CommitFence {
            held: Held::Exclusive(guard.clone()),
        }
    }

    /// Whether this fence holds anything.
    pub fn is_held(&self) -> bool {
        !matches!(self.held, Held::Nothing)
    }
}

impl fmt::Debug for CommitFence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let holds = match self.held {
            Held::Nothing => "nothing",
            Held::Gate(_) => "a commit gate",
            Held::Exclusive(_) => "a commit gate, exclusively",
        };
        f.debug_struct("CommitFence")
            .field("holds", &holds)
            .finish()
    }
}
