//! [`FaultyStore`]: an [`OffsetStore`] in front of another, with a fault hook per method.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use async_trait::async_trait;
use tokio::sync::watch;

use crate::error::{StorageError, StorageErrorKind};
use crate::group::GroupRecord;
use crate::ports::{CommitFence, OffsetStore};
use crate::txn::TransactionRecord;
use crate::types::{offsets_of, CommittedOffsets, OffsetMap, TopicPartition};

/// One method of the [`OffsetStore`] port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StoreOp {
    /// [`OffsetStore::committed`].
    Committed,
    /// [`OffsetStore::list`].
    List,
    /// [`OffsetStore::groups`].
    Groups,
    /// [`OffsetStore::commit`].
    Commit,
    /// [`OffsetStore::delete`].
    Delete,
    /// [`OffsetStore::write_group`].
    WriteGroup,
    /// [`OffsetStore::load_groups`].
    LoadGroups,
}

impl StoreOp {
    /// Every method: the three reads, the two writes, then the group records' write and
    /// read. (`commit_with_metadata` counts as `Commit`, `list_with_metadata` as `List`.)
    pub const ALL: [StoreOp; 7] = [
        StoreOp::Committed,
        StoreOp::List,
        StoreOp::Groups,
        StoreOp::Commit,
        StoreOp::Delete,
        StoreOp::WriteGroup,
        StoreOp::LoadGroups,
    ];

    fn index(self) -> usize {
        match self {
            StoreOp::Committed => 0,
            StoreOp::List => 1,
            StoreOp::Groups => 2,
            StoreOp::Commit => 3,
            StoreOp::Delete => 4,
            StoreOp::WriteGroup => 5,
            StoreOp::LoadGroups => 6,
        }
    }
}

/// A check run on every commit while it is in the store.
type Inspect = Arc<dyn Fn(&str, &OffsetMap) + Send + Sync>;

/// An [`OffsetStore`] that passes every call to an inner store, with a fault hook per
/// method, for tests: a disk that fails ([`fail`](Self::fail)), hangs until released
/// ([`hold`](Self::hold), [`waiting`](Self::waiting)), or writes slowly while a test looks at
/// what else happens ([`inspect_commits`](Self::inspect_commits)); a store that breaks the
/// fence rule ([`release_fence_early`](Self::release_fence_early)); a store replaced under
/// the coordinator, as a restart replaces it ([`replace_inner`](Self::replace_inner)); and
/// the number of calls of each method ([`calls`](Self::calls)).
///
/// A call goes through its method's hooks in this order: it is counted, waits while the
/// method is held, runs the commit inspection, fails if the method is failing, releases its
/// fence if told to, and only then reaches the inner store. Without hooks it is the inner
/// store. Waiting is cancellation-safe: a call dropped while held is no longer counted as
/// waiting.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use coordinator_core::testing::{FaultyStore, StoreOp};
/// use coordinator_core::{CommitFence, OffsetMap, OffsetStore, StorageErrorKind, TopicPartition};
/// # struct Nothing;
/// # #[async_trait::async_trait]
/// # impl OffsetStore for Nothing {
/// #     async fn committed(&self, _: &str, _: &TopicPartition)
/// #         -> Result<Option<i64>, coordinator_core::StorageError> { Ok(None) }
/// #     async fn list(&self, _: &str) -> Result<OffsetMap, coordinator_core::StorageError> {
/// #         Ok(OffsetMap::new())
/// #     }
/// #     async fn groups(&self) -> Result<Vec<String>, coordinator_core::StorageError> {
/// #         Ok(Vec::new())
/// #     }
/// #     async fn commit(&self, _: &str, _: &OffsetMap, _: CommitFence)
/// #         -> Result<(), coordinator_core::StorageError> { Ok(()) }
/// #     async fn delete<'a>(&self, _: &str, _: Option<&'a [TopicPartition]>, _: CommitFence)
/// #         -> Result<(), coordinator_core::StorageError> { Ok(()) }
/// # }
/// let store = FaultyStore::new(Nothing);
/// store.fail(StoreOp::Commit, StorageErrorKind::Io, "disk on fire");
/// let offsets = OffsetMap::from([(TopicPartition::new("t", 0), 1)]);
/// let err = store.commit("g", &offsets, CommitFence::none()).await.unwrap_err();
/// assert_eq!(err.kind(), StorageErrorKind::Io);
/// store.heal(StoreOp::Commit);
/// store.commit("g", &offsets, CommitFence::none()).await.unwrap();
/// assert_eq!(store.calls(StoreOp::Commit), 2);
/// # });
/// ```
pub struct FaultyStore<S: ?Sized> {
    /// `None` only while [`replace_inner`](Self::replace_inner) makes the next store.
    inner: RwLock<Option<Arc<S>>>,
    hooks: Arc<Hooks>,
}

#[derive(Default)]
struct Hooks {
    ops: [OpHooks; StoreOp::ALL.len()],
    inspect: Mutex<Option<(usize, Inspect)>>,
}

struct OpHooks {
    calls: AtomicU64,
    /// Calls parked by a hold now.
    waiting: AtomicUsize,
    /// How many [`Hold`]s of this method are alive.
    holds: watch::Sender<usize>,
    fault: Mutex<Option<(StorageErrorKind, String)>>,
    release_fence_early: AtomicBool,
}

impl Default for OpHooks {
    fn default() -> Self {
        OpHooks {
            calls: AtomicU64::new(0),
            waiting: AtomicUsize::new(0),
            holds: watch::Sender::new(0),
            fault: Mutex::new(None),
            release_fence_early: AtomicBool::new(false),
        }
    }
}

/// While a `Hold` lives, calls of its method wait before reaching the inner store (see
/// [`FaultyStore::hold`]); dropping it lets them go.
#[must_use = "the calls wait only while the hold lives"]
pub struct Hold {
    hooks: Arc<Hooks>,
    op: StoreOp,
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.hooks
            .op(self.op)
            .holds
            .send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl fmt::Debug for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hold").field("op", &self.op).finish()
    }
}

/// Counts a call as waiting for as long as it lives (a dropped call stops waiting).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // No hook panics while holding one of these locks.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Hooks {
    fn op(&self, op: StoreOp) -> &OpHooks {
        &self.ops[op.index()]
    }
}

impl<S: OffsetStore> FaultyStore<S> {
    /// `inner` with no fault installed.
    pub fn new(inner: S) -> Self {
        Self::from_arc(Arc::new(inner))
    }
}

impl<S: OffsetStore + Default> Default for FaultyStore<S> {
    fn default() -> Self {
        Self::new(S::default())
    }
}

impl<S: OffsetStore + ?Sized> FaultyStore<S> {
    /// The store `inner` points at, with no fault installed (for an `Arc<dyn OffsetStore>`).
    pub fn from_arc(inner: Arc<S>) -> Self {
        FaultyStore {
            inner: RwLock::new(Some(inner)),
            hooks: Arc::default(),
        }
    }

    /// The inner store now (`None` only after a [`replace_inner`](Self::replace_inner) whose
    /// `make` panicked).
    pub fn inner(&self) -> Option<Arc<S>> {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the inner store, as a restart replaces a store: drops the current one first
    /// (a store that owns a file must be gone before the next one opens it; a call still
    /// running on it keeps it alive until the call ends), then makes the next with `make`.
    /// Calls that begin meanwhile wait for the next store.
    pub fn replace_inner(&self, make: impl FnOnce() -> Arc<S>) {
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        *inner = None;
        *inner = Some(make());
    }

    /// How many calls of `op` have begun.
    pub fn calls(&self, op: StoreOp) -> u64 {
        self.hooks.op(op).calls.load(Ordering::SeqCst)
    }

    /// Every call of `op` fails with a [`StorageError`] of `kind` and `message` (a new one
    /// each time), without reaching the inner store, until [`heal`](Self::heal).
    pub fn fail(&self, op: StoreOp, kind: StorageErrorKind, message: impl Into<String>) {
        *lock(&self.hooks.op(op).fault) = Some((kind, message.into()));
    }

    /// Calls of `op` reach the inner store again.
    pub fn heal(&self, op: StoreOp) {
        *lock(&self.hooks.op(op).fault) = None;
    }

    /// Calls of `op` wait, after being counted and before anything else, until every
    /// returned [`Hold`] of `op` is dropped: a disk that hangs.
    pub fn hold(&self, op: StoreOp) -> Hold {
        self.hooks.op(op).holds.send_modify(|n| *n += 1);
        Hold {
            hooks: Arc::clone(&self.hooks),
            op,
        }
    }

    /// How many calls of `op` are waiting for a [`Hold`] now.
    pub fn waiting(&self, op: StoreOp) -> usize {
        self.hooks.op(op).waiting.load(Ordering::SeqCst)
    }

    /// Runs `check(group, offsets)` on every commit `rounds` times, yielding to the scheduler
    /// after each, before the commit goes on: a slow write, during which other tasks run and
    /// `check` sees what they did (typically: that no commit checked against an old
    /// generation is in the store once a newer one was installed). Replaces an earlier check.
    pub fn inspect_commits(
        &self,
        rounds: usize,
        check: impl Fn(&str, &OffsetMap) + Send + Sync + 'static,
    ) {
        *lock(&self.hooks.inspect) = Some((rounds, Arc::new(check)));
    }

    /// Breaks the fence rule of the port on purpose: a write of `op` drops its fence, yields
    /// to the scheduler, and only then reaches the inner store (without a fence). Reads carry
    /// no fence; for them this changes nothing.
    pub fn release_fence_early(&self, op: StoreOp) {
        self.hooks
            .op(op)
            .release_fence_early
            .store(true, Ordering::SeqCst);
    }

    /// Runs the hooks of `op` up to the inner store: `Ok` with the fence to pass on, or the
    /// injected error.
    async fn before(
        &self,
        op: StoreOp,
        commit: Option<(&str, &OffsetMap)>,
        fence: CommitFence,
    ) -> Result<(Arc<S>, CommitFence), StorageError> {
        let hooks = self.hooks.op(op);
        hooks.calls.fetch_add(1, Ordering::SeqCst);
        let mut holds = hooks.holds.subscribe();
        if *holds.borrow_and_update() > 0 {
            hooks.waiting.fetch_add(1, Ordering::SeqCst);
            let _waiting = Waiting(&hooks.waiting);
            // The sender lives in `self`: the wait ends when the holds are gone.
            let _ = holds.wait_for(|&n| n == 0).await;
        }
        if let Some((group, offsets)) = commit {
            let inspect = lock(&self.hooks.inspect).clone();
            if let Some((rounds, check)) = inspect {
                for _ in 0..rounds {
                    check(group, offsets);
                    tokio::task::yield_now().await;
                }
            }
        }
        let fault = lock(&hooks.fault).clone();
        if let Some((kind, message)) = fault {
            return Err(StorageError::new(kind, message));
        }
        let fence = if hooks.release_fence_early.load(Ordering::SeqCst) {
            drop(fence);
            tokio::task::yield_now().await;
            CommitFence::none()
        } else {
            fence
        };
        let inner = self.inner().ok_or_else(|| {
            StorageError::new(
                StorageErrorKind::Io,
                "FaultyStore: a replace_inner panicked and left no inner store",
            )
        })?;
        Ok((inner, fence))
    }
}

#[async_trait]
impl<S: OffsetStore + ?Sized> OffsetStore for FaultyStore<S> {
    async fn committed(
        &self,
        group: &str,
        tp: &TopicPartition,
    ) -> Result<Option<i64>, StorageError> {
        let (inner, _) = self
            .before(StoreOp::Committed, None, CommitFence::none())
            .await?;
        inner.committed(group, tp).await
    }

    async fn list(&self, group: &str) -> Result<OffsetMap, StorageError> {
        let (inner, _) = self
            .before(StoreOp::List, None, CommitFence::none())
            .await?;
        inner.list(group).await
    }

    async fn groups(&self) -> Result<Vec<String>, StorageError> {
        let (inner, _) = self
            .before(StoreOp::Groups, None, CommitFence::none())
            .await?;
        inner.groups().await
    }

    async fn commit(
        &self,
        group: &str,
        offsets: &OffsetMap,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        let (inner, fence) = self
            .before(StoreOp::Commit, Some((group, offsets)), fence)
            .await?;
        inner.commit(group, offsets, fence).await
    }

    async fn delete<'a>(
        &self,
        group: &str,
        partitions: Option<&'a [TopicPartition]>,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        let (inner, fence) = self.before(StoreOp::Delete, None, fence).await?;
        inner.delete(group, partitions, fence).await
    }

    fn keeps_metadata(&self) -> bool {
        self.inner().is_some_and(|s| s.keeps_metadata())
    }

    async fn list_with_metadata(&self, group: &str) -> Result<CommittedOffsets, StorageError> {
        let (inner, _) = self
            .before(StoreOp::List, None, CommitFence::none())
            .await?;
        inner.list_with_metadata(group).await
    }

    async fn commit_with_metadata(
        &self,
        group: &str,
        offsets: &CommittedOffsets,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        let plain = offsets_of(offsets);
        let (inner, fence) = self
            .before(StoreOp::Commit, Some((group, &plain)), fence)
            .await?;
        inner.commit_with_metadata(group, offsets, fence).await
    }

    fn keeps_groups(&self) -> bool {
        self.inner().is_some_and(|s| s.keeps_groups())
    }

    async fn write_group(
        &self,
        group: &str,
        record: Option<&GroupRecord>,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        let (inner, fence) = self.before(StoreOp::WriteGroup, None, fence).await?;
        inner.write_group(group, record, fence).await
    }

    async fn load_groups(&self) -> Result<Vec<GroupRecord>, StorageError> {
        let (inner, _) = self
            .before(StoreOp::LoadGroups, None, CommitFence::none())
            .await?;
        inner.load_groups().await
    }

    fn keeps_transactions(&self) -> bool {
        self.inner().is_some_and(|s| s.keeps_transactions())
    }

    /// Shares the hooks of [`StoreOp::WriteGroup`]: a durable record like a group's.
    async fn write_transaction(
        &self,
        id: &str,
        record: Option<&TransactionRecord>,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        let (inner, fence) = self.before(StoreOp::WriteGroup, None, fence).await?;
        inner.write_transaction(id, record, fence).await
    }

    /// Shares the hooks of [`StoreOp::LoadGroups`].
    async fn load_transactions(&self) -> Result<Vec<TransactionRecord>, StorageError> {
        let (inner, _) = self
            .before(StoreOp::LoadGroups, None, CommitFence::none())
            .await?;
        inner.load_transactions().await
    }
}

impl<S: ?Sized> fmt::Debug for FaultyStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("FaultyStore");
        for op in StoreOp::ALL {
            let hooks = self.hooks.op(op);
            d.field(
                &format!("{op:?}"),
                &format_args!(
                    "calls={} waiting={} failing={}",
                    hooks.calls.load(Ordering::SeqCst),
                    hooks.waiting.load(Ordering::SeqCst),
                    lock(&hooks.fault).is_some()
                ),
            );
        }
        d.finish_non_exhaustive()
    }
}
