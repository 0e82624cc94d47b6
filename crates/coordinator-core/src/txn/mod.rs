//! The transaction coordinator (Apache Kafka 4's `TransactionCoordinator`,
//! `TransactionMetadata` and `TransactionStateManager`). Transaction version 0/1: one epoch
//! per producer session. Transaction version 2 (KIP-890 part 2,
//! [`end_txn_with_version`](TransactionCoordinator::end_txn_with_version)): the epoch is
//! bumped at the end of every transaction, the markers carry the bumped epoch, and
//! partitions and groups may be added implicitly
//! ([`add_partitions_with_version`](TransactionCoordinator::add_partitions_with_version));
//! the transaction keeps the version its client last used
//! ([`TransactionRecord::transaction_version`]).
//!
//! ```text
//!              AddPartitionsToTxn / AddOffsetsToTxn
//!   Empty ──────────────────────────────────────────► Ongoing ──EndTxn(commit)──► PrepareCommit ──markers, offsets──► CompleteCommit
//!     ▲  ▲                                              │  │                                                              │
//!     │  └─ InitProducerId (epoch + 1) ◄────────────────┼──┼──────────────────── Complete* ◄────────────────────────────────┘
//!     │                                                 │  └─EndTxn(abort), timeout, InitProducerId (fence, epoch + 1)──► PrepareAbort ──markers──► CompleteAbort
//! ```
//!
//! Every transition is written to the [`OffsetStore`] (`write_transaction`) before it is
//! visible; a refused or failed write changes nothing. EndTxn answers once the transaction
//! is complete (markers written, group offsets applied or dropped, Complete* stored); Kafka
//! answers after Prepare* and completes asynchronously. A marker or offset failure leaves the
//! transaction in Prepare* (answered CONCURRENT_TRANSACTIONS, so clients retry); the retry
//! of the same EndTxn, InitProducerId and the timer finish it.
//!
//! Concurrency: one async lock per transactional id; a call that finds it held answers
//! CONCURRENT_TRANSACTIONS (Kafka's "pending transition"), so a slow marker write never
//! queues calls behind it. The map of ids is behind a short-lived `std::sync::Mutex`.

mod error;
mod ports;
mod state;

pub use error::{TxnError, INVALID_PRODUCER_EPOCH, PRODUCER_FENCED};
pub use ports::{MarkerError, MarkerWriter, ProducerIdSource, TxnMarkers};
pub use state::{TransactionRecord, TxnState, TV_2};

#[cfg(any(test, feature = "mocks"))]
pub use ports::{MockMarkerWriter, MockProducerIdSource};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Mutex as AsyncMutex;
use tracing::{info, warn};

use crate::coordinator::{Coordinator, TxnOffsetCommitRequest};
use crate::ports::{Clock, CommitFence, OffsetStore};
use crate::types::TopicPartition;

/// Kafka's `transaction.max.timeout.ms`.
pub const DEFAULT_TRANSACTION_MAX_TIMEOUT_MS: u64 = 900_000;
/// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
pub const DEFAULT_ABORT_TIMED_OUT_CLEANUP_INTERVAL_MS: u64 = 10_000;
/// Kafka's `transactional.id.expiration.ms`.
pub const DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS: u64 = 604_800_000;
/// The default bound on transactional ids kept (Kafka has none).
pub const DEFAULT_MAX_TRANSACTIONAL_IDS: usize = 100_000;
/// The default bound on partitions plus groups of one transaction (Kafka has none).
pub const DEFAULT_MAX_PARTITIONS_PER_TRANSACTION: usize = 10_000;

/// An epoch at or above this is exhausted: the next bump rotates to a new producer id
/// (Kafka's `TransactionMetadata.isEpochExhausted`).
const EXHAUSTED_EPOCH: i16 = i16::MAX - 1;

/// The transaction coordinator's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`.
    pub transaction_max_timeout_ms: u64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how often the timer
    /// aborts timed-out transactions, retries incomplete ones and removes expired ids.
    pub abort_timed_out_cleanup_interval_ms: u64,
    /// `transactional.id.expiration.ms`: an id idle (Empty, Complete*) this long is removed.
    pub transactional_id_expiration_ms: u64,
    /// At most this many transactional ids (THROTTLING_QUOTA_EXCEEDED beyond).
    pub max_transactional_ids: usize,
    /// At most this many partitions plus groups per transaction.
    pub max_partitions_per_transaction: usize,
    /// The coordinator epoch markers carry.
    pub coordinator_epoch: i32,
}

impl Default for TxnConfig {
    fn default() -> Self {
        TxnConfig {
            transaction_max_timeout_ms: DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
            abort_timed_out_cleanup_interval_ms: DEFAULT_ABORT_TIMED_OUT_CLEANUP_INTERVAL_MS,
            transactional_id_expiration_ms: DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
            max_transactional_ids: DEFAULT_MAX_TRANSACTIONAL_IDS,
            max_partitions_per_transaction: DEFAULT_MAX_PARTITIONS_PER_TRANSACTION,
            coordinator_epoch: 0,
        }
    }
}

/// A producer id and epoch a KIP-360 InitProducerId (v3+) presents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerIdAndEpoch {
    /// The producer id.
    pub producer_id: i64,
    /// The epoch.
    pub epoch: i16,
}

impl ProducerIdAndEpoch {
    /// The request's fields as Kafka's `KafkaApis.handleInitProducerIdRequest` reads them:
    /// both −1 is none; one of them −1 is INVALID_REQUEST.
    pub fn from_wire(producer_id: i64, epoch: i16) -> Result<Option<Self>, TxnError> {
        match (producer_id, epoch) {
            (-1, -1) => Ok(None),
            (-1, _) | (_, -1) => Err(TxnError::InvalidRequest {
                reason: "producer id and epoch must both be given or both be -1".to_string(),
            }),
            (producer_id, epoch) => Ok(Some(ProducerIdAndEpoch { producer_id, epoch })),
        }
    }
}

/// One transaction as DescribeTransactions shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionDescription {
    /// The transactional id.
    pub transactional_id: String,
    /// The state.
    pub state: TxnState,
    /// The producer id.
    pub producer_id: i64,
    /// The epoch.
    pub producer_epoch: i16,
    /// `transaction.timeout.ms`.
    pub timeout_ms: i32,
    /// When the open transaction started, −1 if none.
    pub start_ms: i64,
    /// The partitions of the transaction.
    pub partitions: BTreeSet<TopicPartition>,
}

/// One transaction as ListTransactions lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedTransaction {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id.
    pub producer_id: i64,
    /// The state.
    pub state: TxnState,
}

/// What one timer run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnTimerReport {
    /// Transactional ids whose timed-out transaction was aborted (their producer fenced).
    pub aborted: Vec<String>,
    /// Transactional ids whose incomplete transaction (Prepare*) was completed.
    pub completed: Vec<String>,
    /// Expired transactional ids removed.
    pub expired: Vec<String>,
}

/// One transactional id's slot: `None` once removed (a caller holding the old slot looks
/// the id up again).
type Slot = Arc<AsyncMutex<Option<TransactionRecord>>>;

/// The transaction coordinator. `Send + Sync`; share it as `Arc<TransactionCoordinator>`.
pub struct TransactionCoordinator {
    config: TxnConfig,
    clock: Arc<dyn Clock>,
    store: Arc<dyn OffsetStore>,
    groups: Arc<Coordinator>,
    markers: Arc<dyn MarkerWriter>,
    producer_ids: Arc<dyn ProducerIdSource>,
    txns: Mutex<HashMap<String, Slot>>,
    next_run: Mutex<u64>,
}

impl fmt::Debug for TransactionCoordinator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransactionCoordinator")
            .field("config", &self.config)
            .field("transactional_ids", &self.map().len())
            .finish_non_exhaustive()
    }
}

/// Builds a [`TransactionCoordinator`]; see [`TransactionCoordinator::builder`].
pub struct TransactionCoordinatorBuilder {
    config: TxnConfig,
    clock: Arc<dyn Clock>,
    store: Arc<dyn OffsetStore>,
    groups: Arc<Coordinator>,
    markers: Arc<dyn MarkerWriter>,
    producer_ids: Arc<dyn ProducerIdSource>,
}

impl fmt::Debug for TransactionCoordinatorBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransactionCoordinatorBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl TransactionCoordinatorBuilder {
    /// The clock (default: the group coordinator's).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The store transactions are kept in (default: the group coordinator's).
    #[must_use]
    pub fn store(mut self, store: Arc<dyn OffsetStore>) -> Self {
        self.store = store;
        self
    }

    /// Every setting at once.
    #[must_use]
    pub fn config(mut self, config: TxnConfig) -> Self {
        self.config = config;
        self
    }

    /// `transaction.max.timeout.ms`.
    #[must_use]
    pub fn transaction_max_timeout_ms(mut self, ms: u64) -> Self {
        self.config.transaction_max_timeout_ms = ms;
        self
    }

    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    #[must_use]
    pub fn abort_timed_out_cleanup_interval_ms(mut self, ms: u64) -> Self {
        self.config.abort_timed_out_cleanup_interval_ms = ms;
        self
    }

    /// `transactional.id.expiration.ms`.
    #[must_use]
    pub fn transactional_id_expiration_ms(mut self, ms: u64) -> Self {
        self.config.transactional_id_expiration_ms = ms;
        self
    }

    /// The bound on transactional ids.
    #[must_use]
    pub fn max_transactional_ids(mut self, n: usize) -> Self {
        self.config.max_transactional_ids = n;
        self
    }

    /// The bound on partitions plus groups per transaction.
    #[must_use]
    pub fn max_partitions_per_transaction(mut self, n: usize) -> Self {
        self.config.max_partitions_per_transaction = n;
        self
    }

    /// Builds it. Refuses zero intervals, a zero maximum timeout and zero bounds
    /// (`INVALID_REQUEST`, naming the setting).
    pub fn build(self) -> Result<TransactionCoordinator, TxnError> {
        let c = &self.config;
        for (name, zero) in [
            (
                "transaction.max.timeout.ms",
                c.transaction_max_timeout_ms == 0,
            ),
            (
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                c.abort_timed_out_cleanup_interval_ms == 0,
            ),
            (
                "transactional.id.expiration.ms",
                c.transactional_id_expiration_ms == 0,
            ),
            ("max transactional ids", c.max_transactional_ids == 0),
            (
                "max partitions per transaction",
                c.max_partitions_per_transaction == 0,
            ),
        ] {
            if zero {
                return Err(TxnError::InvalidRequest {
                    reason: format!("{name} must be at least 1"),
                });
            }
        }
        let first_run = self
            .clock
            .now_ms()
            .saturating_add(c.abort_timed_out_cleanup_interval_ms);
        Ok(TransactionCoordinator {
            config: self.config,
            clock: self.clock,
            store: self.store,
            groups: self.groups,
            markers: self.markers,
            producer_ids: self.producer_ids,
            txns: Mutex::new(HashMap::new()),
            next_run: Mutex::new(first_run),
        })
    }
}

/// What a prepared transaction still has to do.
enum Completion {
    Done,
    Incomplete,
}

impl TransactionCoordinator {
    /// A builder over the group coordinator `groups` (which keeps the transactional
    /// offsets; its clock and store are the defaults), the marker writer and the producer-id
    /// source.
    pub fn builder(
        groups: Arc<Coordinator>,
        markers: Arc<dyn MarkerWriter>,
        producer_ids: Arc<dyn ProducerIdSource>,
    ) -> TransactionCoordinatorBuilder {
        TransactionCoordinatorBuilder {
            config: TxnConfig::default(),
            clock: groups.clock.clone(),
            store: groups.store.clone(),
            groups,
            markers,
            producer_ids,
        }
    }

    /// The settings.
    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.txns.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn slot(&self, id: &str) -> Option<Slot> {
        self.map().get(id).cloned()
    }

    /// The slot of `id` locked without waiting, with its record; `Ok(None)` if the id is
    /// unknown; CONCURRENT_TRANSACTIONS if another call holds it.
    fn locked(
        &self,
        id: &str,
    ) -> Result<Option<tokio::sync::OwnedMutexGuard<Option<TransactionRecord>>>, TxnError> {
        loop {
            let Some(slot) = self.slot(id) else {
                return Ok(None);
            };
            let guard = slot
                .clone()
                .try_lock_owned()
                .map_err(|_| TxnError::concurrent(id))?;
            if guard.is_some() {
                return Ok(Some(guard));
            }
            // Removed while we looked: look again.
            drop(guard);
            let mut map = self.map();
            if map.get(id).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
                map.remove(id);
            }
        }
    }

    fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Writes `record` durably; the caller installs it only on success.
    async fn persist(&self, record: &TransactionRecord) -> Result<(), TxnError> {
        self.store
            .write_transaction(&record.transactional_id, Some(record), CommitFence::none())
            .await
            .map_err(|e| TxnError::CoordinatorNotAvailable {
                reason: e.to_string(),
            })
    }

    fn require_id(id: &str) -> Result<(), TxnError> {
        if id.is_empty() {
            return Err(TxnError::InvalidRequest {
                reason: "transactional id must not be empty".to_string(),
            });
        }
        Ok(())
    }

    /// InitProducerId with a transactional id (Kafka's `handleInitProducerId`).
    ///
    /// A new id gets a fresh producer id with epoch 0. An existing one: Empty or Complete*
    /// bump the epoch (an exhausted epoch rotates to a new producer id, epoch 0); Ongoing is
    /// aborted with an epoch bump (fencing the old instance; markers written) and answered
    /// CONCURRENT_TRANSACTIONS, so the client retries and gets the next bump; Prepare* is
    /// completed if it can be and answered CONCURRENT_TRANSACTIONS. With `expected`
    /// (KIP-360, v3+): a producer id that is neither the current one (nor the previous one
    /// presented with an exhausted epoch) is PRODUCER_FENCED; the current epoch bumps, the
    /// epoch before the last bump is a retry answered with the current epoch, any other is
    /// PRODUCER_FENCED.
    ///
    /// Errors: INVALID_REQUEST (empty id), INVALID_TRANSACTION_TIMEOUT,
    /// CONCURRENT_TRANSACTIONS, PRODUCER_FENCED, COORDINATOR_NOT_AVAILABLE (store),
    /// THROTTLING_QUOTA_EXCEEDED (too many ids).
    pub async fn init_producer_id(
        &self,
        id: &str,
        timeout_ms: i32,
        expected: Option<ProducerIdAndEpoch>,
    ) -> Result<ProducerIdAndEpoch, TxnError> {
        Self::require_id(id)?;
        let max = self.config.transaction_max_timeout_ms;
        if timeout_ms <= 0 || u64::try_from(timeout_ms).map_or(true, |t| t > max) {
            return Err(TxnError::InvalidTransactionTimeout {
                timeout_ms,
                max_ms: max,
            });
        }
        let now = self.now();
        let Some(mut guard) = self.locked(id)? else {
            return self.create(id, timeout_ms, now).await;
        };
        let Some(current) = guard.as_ref().cloned() else {
            return Err(TxnError::concurrent(id));
        };
        if let Some(e) = expected {
            let valid = current.producer_epoch == -1
                || e.producer_id == current.producer_id
                || (e.producer_id == current.last_producer_id && e.epoch >= EXHAUSTED_EPOCH);
            if !valid {
                return Err(fenced(&current, e.producer_id, e.epoch));
            }
        }
        match current.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                self.complete(&mut guard).await;
                Err(TxnError::concurrent(id))
            }
            TxnState::Ongoing => {
                self.fence_and_abort(&mut guard, now).await?;
                Err(TxnError::concurrent(id))
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let mut next = current.clone();
                if let Some(e) = expected.filter(|e| {
                    e.producer_id == current.last_producer_id
                        && current.last_producer_id != current.producer_id
                }) {
                    // The retry of a rotation whose answer was lost.
                    if e.epoch == current.last_producer_epoch && current.producer_epoch == 0 {
                        return Ok(pid_epoch(&current));
                    }
                    return Err(fenced(&current, e.producer_id, e.epoch));
                }
                if current.producer_epoch >= EXHAUSTED_EPOCH {
                    next.last_producer_id = current.producer_id;
                    next.last_producer_epoch = current.producer_epoch;
                    next.producer_id = self.producer_ids.next_producer_id();
                    next.producer_epoch = 0;
                } else {
                    match expected.map(|e| e.epoch) {
                        None => {
                            next.producer_epoch = current.producer_epoch + 1;
                            next.last_producer_epoch = -1;
                        }
                        Some(e) if e == current.producer_epoch => {
                            next.producer_epoch = current.producer_epoch + 1;
                            next.last_producer_epoch = current.producer_epoch;
                        }
                        Some(e)
                            if current.last_producer_epoch != -1
                                && e == current.last_producer_epoch =>
                        {
                            // A retry of the last bump: answer it again.
                            return Ok(pid_epoch(&current));
                        }
                        Some(e) => return Err(fenced(&current, current.producer_id, e)),
                    }
                }
                next.timeout_ms = timeout_ms;
                next.state = TxnState::Empty;
                next.partitions.clear();
                next.groups.clear();
                next.pending_offsets.clear();
                next.start_ms = None;
                next.last_update_ms = now;
                self.persist(&next).await?;
                let answer = pid_epoch(&next);
                *guard = Some(next);
                Ok(answer)
            }
            TxnState::Dead => Err(TxnError::concurrent(id)),
        }
    }

    async fn create(
        &self,
        id: &str,
        timeout_ms: i32,
        now: u64,
    ) -> Result<ProducerIdAndEpoch, TxnError> {
        let slot: Slot = Arc::new(AsyncMutex::new(None));
        let mut guard = slot
            .clone()
            .try_lock_owned()
            .map_err(|_| TxnError::concurrent(id))?;
        {
            let mut map = self.map();
            if map.contains_key(id) {
                return Err(TxnError::concurrent(id));
            }
            if map.len() >= self.config.max_transactional_ids {
                return Err(TxnError::TooManyTransactionalIds {
                    max: self.config.max_transactional_ids,
                });
            }
            map.insert(id.to_string(), slot.clone());
        }
        let record = TransactionRecord {
            transactional_id: id.to_string(),
            producer_id: self.producer_ids.next_producer_id(),
            producer_epoch: 0,
            last_producer_id: -1,
            last_producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            groups: BTreeSet::new(),
            pending_offsets: BTreeMap::new(),
            start_ms: None,
            last_update_ms: now,
            transaction_version: 0,
        };
        if let Err(e) = self.persist(&record).await {
            let mut map = self.map();
            if map.get(id).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
                map.remove(id);
            }
            return Err(e);
        }
        info!(
            transactional_id = id,
            producer_id = record.producer_id,
            "transactional id registered"
        );
        let answer = pid_epoch(&record);
        *guard = Some(record);
        Ok(answer)
    }

    /// Fences the Ongoing transaction in `guard` (epoch + 1 unless exhausted) and aborts it.
    async fn fence_and_abort(
        &self,
        guard: &mut Option<TransactionRecord>,
        now: u64,
    ) -> Result<(), TxnError> {
        let Some(current) = guard.as_ref() else {
            return Ok(());
        };
        let mut next = current.clone();
        next.producer_epoch = next.producer_epoch.saturating_add(1);
        next.last_producer_epoch = -1;
        self.prepare(guard, next, false, now).await?;
        self.complete(guard).await;
        Ok(())
    }

    /// Checks `producer_id`/`epoch` against the record of a client call.
    fn check_producer(
        record: &TransactionRecord,
        producer_id: i64,
        epoch: i16,
    ) -> Result<(), TxnError> {
        if record.producer_id != producer_id {
            return Err(TxnError::mapping(&record.transactional_id, producer_id));
        }
        if record.producer_epoch != epoch {
            return Err(fenced(record, producer_id, epoch));
        }
        Ok(())
    }

    /// AddPartitionsToTxn (client versions): adds data partitions to the transaction,
    /// opening it (Ongoing) if none is open. The caller checked that the partitions exist.
    ///
    /// Errors: INVALID_REQUEST, INVALID_PRODUCER_ID_MAPPING (unknown id or other producer
    /// id), PRODUCER_FENCED, CONCURRENT_TRANSACTIONS (Prepare*, or a call in progress),
    /// THROTTLING_QUOTA_EXCEEDED (too many partitions), COORDINATOR_NOT_AVAILABLE.
    pub async fn add_partitions(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<(), TxnError> {
        self.add(id, producer_id, epoch, partitions, None, 0).await
    }

    /// [`add_partitions`](Self::add_partitions) by a call of transaction version
    /// `transaction_version`: with [`TV_2`], the implicit add of KIP-890 part 2 (the
    /// partition leader's AddPartitionsToTxn v4+ with `VerifyOnly` false, on a transactional
    /// Produce v12+). The transaction keeps the version (Kafka's `clientTransactionVersion`),
    /// unless every partition was in the open transaction already (nothing is written then,
    /// as Kafka's shortcut). Errors as [`add_partitions`](Self::add_partitions).
    pub async fn add_partitions_with_version(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[TopicPartition],
        transaction_version: i16,
    ) -> Result<(), TxnError> {
        self.add(
            id,
            producer_id,
            epoch,
            partitions,
            None,
            transaction_version,
        )
        .await
    }

    /// Whether each of `partitions` is in the open transaction of `id` (Kafka's
    /// `handleVerifyPartitionsInTransaction`, AddPartitionsToTxn v4+ with `VerifyOnly`):
    /// `true` if it is, `false` if not (Kafka answers TRANSACTION_ABORTABLE for it). Nothing
    /// changes.
    ///
    /// Errors (for every partition): INVALID_REQUEST (empty id), INVALID_PRODUCER_ID_MAPPING
    /// (unknown id, other producer id), PRODUCER_FENCED (another epoch),
    /// CONCURRENT_TRANSACTIONS (Prepare*, or a call in progress).
    pub async fn verify_partitions(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, bool)>, TxnError> {
        Self::require_id(id)?;
        let guard = self
            .locked(id)?
            .ok_or_else(|| TxnError::mapping(id, producer_id))?;
        let Some(current) = guard.as_ref() else {
            return Err(TxnError::concurrent(id));
        };
        Self::check_producer(current, producer_id, epoch)?;
        if current.state.is_prepare() {
            return Err(TxnError::concurrent(id));
        }
        let open = current.state == TxnState::Ongoing;
        Ok(partitions
            .iter()
            .map(|tp| (tp.clone(), open && current.partitions.contains(tp)))
            .collect())
    }

    /// AddOffsetsToTxn: adds `group` to the transaction (its transactional offsets complete
    /// with it). Errors as [`add_partitions`](Self::add_partitions).
    pub async fn add_offsets(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        group: &str,
    ) -> Result<(), TxnError> {
        self.add(id, producer_id, epoch, &[], Some(group), 0).await
    }

    /// [`add_offsets`](Self::add_offsets) by a call of transaction version
    /// `transaction_version`: with [`TV_2`], the implicit add of the group by a
    /// TxnOffsetCommit v5 (KIP-890 part 2; Kafka's group coordinator adds the group's
    /// `__consumer_offsets` partition). Errors as [`add_partitions`](Self::add_partitions).
    pub async fn add_offsets_with_version(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        group: &str,
        transaction_version: i16,
    ) -> Result<(), TxnError> {
        self.add(
            id,
            producer_id,
            epoch,
            &[],
            Some(group),
            transaction_version,
        )
        .await
    }

    async fn add(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[TopicPartition],
        group: Option<&str>,
        transaction_version: i16,
    ) -> Result<(), TxnError> {
        Self::require_id(id)?;
        let mut guard = self
            .locked(id)?
            .ok_or_else(|| TxnError::mapping(id, producer_id))?;
        let Some(current) = guard.as_ref() else {
            return Err(TxnError::concurrent(id));
        };
        Self::check_producer(current, producer_id, epoch)?;
        if current.state.is_prepare() {
            return Err(TxnError::concurrent(id));
        }
        let already = current.state == TxnState::Ongoing
            && partitions.iter().all(|tp| current.partitions.contains(tp))
            && group.is_none_or(|g| current.groups.contains(g));
        if already {
            return Ok(());
        }
        let mut next = current.clone();
        if !next.state.is_idle() && next.state != TxnState::Ongoing {
            return Err(TxnError::state(id, next.state, "cannot add to it"));
        }
        let now = self.now();
        if next.state != TxnState::Ongoing {
            next.partitions.clear();
            next.groups.clear();
            next.start_ms = Some(now);
        }
        next.partitions.extend(partitions.iter().cloned());
        if let Some(g) = group {
            next.groups.insert(g.to_string());
        }
        let count = next.partitions.len() + next.groups.len();
        if count > self.config.max_partitions_per_transaction {
            return Err(TxnError::TooManyPartitions {
                transactional_id: id.to_string(),
                count,
                max: self.config.max_partitions_per_transaction,
            });
        }
        next.state = TxnState::Ongoing;
        next.last_update_ms = now;
        next.transaction_version = transaction_version;
        self.persist(&next).await?;
        *guard = Some(next);
        Ok(())
    }

    /// TxnOffsetCommit: checks the producer against the transaction (the id's producer id,
    /// its epoch, an Ongoing transaction with `req.group_id` added) and stores the offsets
    /// pending in the group coordinator.
    ///
    /// Errors: INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH (an epoch that is not the
    /// transaction's: what Kafka's log answers a fenced producer's offset commit),
    /// INVALID_TXN_STATE (no open transaction with the group), CONCURRENT_TRANSACTIONS, and
    /// the group coordinator's refusals (see [`Coordinator::txn_offset_commit`]).
    pub async fn txn_offset_commit(
        &self,
        id: &str,
        epoch: i16,
        req: &TxnOffsetCommitRequest,
    ) -> Result<(), TxnError> {
        Self::require_id(id)?;
        let guard = self
            .locked(id)?
            .ok_or_else(|| TxnError::mapping(id, req.producer_id))?;
        let Some(current) = guard.as_ref() else {
            return Err(TxnError::concurrent(id));
        };
        if current.producer_id != req.producer_id {
            return Err(TxnError::mapping(id, req.producer_id));
        }
        if current.producer_epoch != epoch {
            return Err(TxnError::InvalidProducerEpoch {
                transactional_id: id.to_string(),
                producer_id: req.producer_id,
                epoch,
                current: current.producer_epoch,
            });
        }
        if current.state.is_prepare() {
            return Err(TxnError::concurrent(id));
        }
        if current.state != TxnState::Ongoing || !current.groups.contains(&req.group_id) {
            return Err(TxnError::state(
                id,
                current.state,
                format!(
                    "group {} was not added to an open transaction (AddOffsetsToTxn)",
                    req.group_id
                ),
            ));
        }
        self.groups.txn_offset_commit(req).await?;
        drop(guard);
        Ok(())
    }

    /// EndTxn: commits or aborts the open transaction. Writes Prepare*, the markers into
    /// every partition of the transaction, completes the groups' transactional offsets
    /// (commit: applied, abort: dropped), writes Complete*, then answers.
    ///
    /// The retry of an EndTxn that completed answers success; the other outcome is
    /// INVALID_TXN_STATE, as is EndTxn of an Empty transaction. If a marker or an offset
    /// write fails, the transaction stays in Prepare* (nothing decided is lost) and the call
    /// answers CONCURRENT_TRANSACTIONS: its retry (or the timer) finishes it.
    ///
    /// This is EndTxn v0–4 (transaction version 0/1); see
    /// [`end_txn_with_version`](Self::end_txn_with_version) for v5.
    ///
    /// Errors: INVALID_REQUEST, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
    /// CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE, COORDINATOR_NOT_AVAILABLE.
    pub async fn end_txn(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), TxnError> {
        self.end_txn_with_version(id, producer_id, epoch, commit, 0)
            .await
            .map(|_| ())
    }

    /// EndTxn of a client using transaction version `transaction_version` (EndTxn v5 is
    /// [`TV_2`], earlier versions 0), answering the producer id and epoch the producer goes
    /// on with (EndTxn v5's response fields).
    ///
    /// With [`TV_2`] (KIP-890 part 2, Kafka's `TransactionCoordinator.endTransaction` and
    /// `TransactionMetadata.prepareAbortOrCommit`): the epoch is bumped as the transaction
    /// is prepared, the markers carry the bumped epoch (so they fence every batch of the
    /// old epoch on every partition of the transaction), and the answer is the bumped
    /// epoch. An exhausted epoch (`i16::MAX - 1`) is bumped to `i16::MAX` for the markers,
    /// and the completed transaction moves to a new producer id with epoch 0 (the answer);
    /// the old id is kept as the last producer id.
    ///
    /// Which epochs are accepted depends on the version the transaction already has
    /// ([`TransactionRecord::transaction_version`], as Kafka reads its stored
    /// `clientTransactionVersion`): a transaction of version 0/1 accepts its current epoch
    /// only; one of version 2 accepts its current epoch while Ongoing (or Empty, then
    /// INVALID_TXN_STATE), and in Prepare* or Complete* only the retry of the EndTxn that
    /// bumped it: the epoch just below the current one, presented by the producer that
    /// bumped it (the epoch kept as the last epoch), or after a rotation the old producer
    /// id with the exhausted epoch. Any other epoch is PRODUCER_FENCED — also the current
    /// epoch of a completed version 2 transaction (Kafka: "the next endTransaction call"),
    /// and the old epoch of a producer fenced by InitProducerId or the timeout (the fence
    /// clears the last epoch; Kafka gets the same by bumping twice).
    ///
    /// The answer of a completed retry is the current producer id and epoch. The answer of
    /// a version 0/1 EndTxn is the unchanged producer id and epoch.
    ///
    /// Errors as [`end_txn`](Self::end_txn).
    pub async fn end_txn_with_version(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        transaction_version: i16,
    ) -> Result<ProducerIdAndEpoch, TxnError> {
        Self::require_id(id)?;
        let mut guard = self
            .locked(id)?
            .ok_or_else(|| TxnError::mapping(id, producer_id))?;
        let Some(current) = guard.as_ref().cloned() else {
            return Err(TxnError::concurrent(id));
        };
        let stored_v2 = current.is_tv2();
        // Kafka's `retryOnOverflow`: the retry of an EndTxn that rotated the producer id.
        let retry_on_overflow = stored_v2
            && current.producer_id != producer_id
            && current.last_producer_id == producer_id
            && epoch == EXHAUSTED_EPOCH
            && current.last_producer_epoch == EXHAUSTED_EPOCH
            && current.producer_epoch == 0;
        // Kafka's `retryOnEpochBump`, and the epoch the bump was made from.
        let retry_on_bump = stored_v2
            && current.producer_id == producer_id
            && i32::from(current.producer_epoch) == i32::from(epoch) + 1
            && current.last_producer_epoch == epoch;
        if current.producer_id != producer_id && !retry_on_overflow {
            return Err(TxnError::mapping(id, producer_id));
        }
        let valid_epoch = if stored_v2 {
            match current.state {
                TxnState::Ongoing | TxnState::Empty | TxnState::Dead => {
                    epoch == current.producer_epoch
                }
                TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
                TxnState::CompleteCommit | TxnState::CompleteAbort => {
                    retry_on_bump || retry_on_overflow
                }
            }
        } else {
            epoch == current.producer_epoch
        };
        if !valid_epoch {
            return Err(fenced(&current, producer_id, epoch));
        }
        let wrong = |s: TxnState| {
            TxnError::state(
                id,
                s,
                format!("cannot {}", if commit { "commit" } else { "abort" }),
            )
        };
        match (current.state, commit) {
            (TxnState::Ongoing, _) => {
                let now = self.now();
                let mut next = current;
                if transaction_version >= TV_2 {
                    // A client never holds i16::MAX (only a fence reaches it): fenced.
                    let Some(bumped) = next.producer_epoch.checked_add(1) else {
                        return Err(fenced(&next, producer_id, epoch));
                    };
                    next.last_producer_epoch = next.producer_epoch;
                    next.producer_epoch = bumped;
                }
                next.transaction_version = transaction_version;
                self.prepare(&mut guard, next, commit, now).await?;
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {}
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                return Ok(pid_epoch(&current))
            }
            (s, _) => return Err(wrong(s)),
        }
        match self.complete(&mut guard).await {
            Completion::Done => guard
                .as_ref()
                .map(pid_epoch)
                .ok_or_else(|| TxnError::concurrent(id)),
            Completion::Incomplete => Err(TxnError::concurrent(id)),
        }
    }

    /// Writes Prepare* of `next` (the current record, maybe with a bumped epoch) and
    /// installs it.
    async fn prepare(
        &self,
        guard: &mut Option<TransactionRecord>,
        mut next: TransactionRecord,
        commit: bool,
        now: u64,
    ) -> Result<(), TxnError> {
        next.state = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        next.pending_offsets = if commit {
            next.groups
                .iter()
                .map(|g| {
                    (
                        g.clone(),
                        self.groups.pending_txn_offsets(g, next.producer_id),
                    )
                })
                .filter(|(_, o)| !o.is_empty())
                .collect()
        } else {
            BTreeMap::new()
        };
        next.last_update_ms = now;
        self.persist(&next).await?;
        info!(
            transactional_id = next.transactional_id.as_str(),
            producer_id = next.producer_id,
            epoch = next.producer_epoch,
            state = next.state.name(),
            partitions = next.partitions.len(),
            "transaction prepared"
        );
        *guard = Some(next);
        Ok(())
    }

    /// Completes the Prepare* transaction in `guard`: markers for every partition still
    /// due, the groups' offsets, then Complete*. What fails stays due.
    async fn complete(&self, guard: &mut Option<TransactionRecord>) -> Completion {
        let Some(record) = guard.as_mut() else {
            return Completion::Done;
        };
        if !record.state.is_prepare() {
            return Completion::Done;
        }
        let commit = record.state == TxnState::PrepareCommit;
        let mut incomplete = false;
        if !record.partitions.is_empty() {
            let markers = TxnMarkers {
                producer_id: record.producer_id,
                producer_epoch: record.producer_epoch,
                coordinator_epoch: self.config.coordinator_epoch,
                commit,
                partitions: record.partitions.iter().cloned().collect(),
                transaction_version: record.transaction_version,
            };
            for (tp, result) in self.markers.write_markers(&markers).await {
                match result {
                    Ok(()) => {
                        record.partitions.remove(&tp);
                    }
                    Err(e) if e.is_gone() => {
                        record.partitions.remove(&tp);
                    }
                    Err(e) => warn!(
                        transactional_id = record.transactional_id.as_str(),
                        partition = %tp,
                        code = e.kafka_code,
                        error = e.message.as_str(),
                        "transaction marker not written; retried later"
                    ),
                }
            }
            incomplete |= !record.partitions.is_empty();
        }
        let (routed, groups): (Vec<String>, Vec<String>) = record
            .groups
            .iter()
            .cloned()
            .partition(|g| self.markers.routes_group(g));
        if !routed.is_empty() {
            let markers = TxnMarkers {
                producer_id: record.producer_id,
                producer_epoch: record.producer_epoch,
                coordinator_epoch: self.config.coordinator_epoch,
                commit,
                partitions: Vec::new(),
                transaction_version: record.transaction_version,
            };
            let mut answered = BTreeSet::new();
            for (group, result) in self.markers.write_group_markers(&markers, &routed).await {
                match result {
                    Ok(()) if routed.contains(&group) => {
                        // Anything restored here from a PrepareCommit record is not ours
                        // to write: the group's coordinator completed its own copy.
                        self.groups.drop_txn_offsets(&group, record.producer_id);
                        record.groups.remove(&group);
                        record.pending_offsets.remove(&group);
                        answered.insert(group);
                    }
                    Ok(()) => {}
                    Err(e) => warn!(
                        transactional_id = record.transactional_id.as_str(),
                        group = group.as_str(),
                        code = e.kafka_code,
                        error = e.message.as_str(),
                        "transactional offsets not completed at the group's coordinator; \
                         retried later"
                    ),
                }
            }
            incomplete |= routed.iter().any(|g| !answered.contains(g));
        }
        for group in groups {
            match self
                .groups
                .complete_txn_offsets(&group, record.producer_id, commit)
                .await
            {
                Ok(()) => {
                    record.groups.remove(&group);
                    record.pending_offsets.remove(&group);
                }
                Err(e) => {
                    incomplete = true;
                    warn!(
                        transactional_id = record.transactional_id.as_str(),
                        group = group.as_str(),
                        error = %e,
                        "transactional offsets not completed; retried later"
                    );
                }
            }
        }
        if incomplete {
            return Completion::Incomplete;
        }
        let mut next = record.clone();
        next.state = if commit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        next.pending_offsets.clear();
        next.start_ms = None;
        next.last_update_ms = self.now();
        if next.is_tv2()
            && next.producer_epoch == i16::MAX
            && next.last_producer_epoch == EXHAUSTED_EPOCH
        {
            // Transaction version 2's EndTxn bumped an exhausted epoch: the markers carried
            // i16::MAX, and the producer goes on with a new producer id (Kafka's
            // `nextProducerId`, taken here once the markers are written; nobody saw it
            // before, so one taken again after a failed write is as good).
            next.last_producer_id = next.producer_id;
            next.producer_id = self.producer_ids.next_producer_id();
            next.producer_epoch = 0;
        }
        if let Err(e) = self.persist(&next).await {
            warn!(
                transactional_id = next.transactional_id.as_str(),
                error = %e,
                "transaction completion not stored; retried later"
            );
            return Completion::Incomplete;
        }
        info!(
            transactional_id = next.transactional_id.as_str(),
            state = next.state.name(),
            "transaction completed"
        );
        *record = next;
        Completion::Done
    }

    /// The transactional id's record, if it is known (a copy).
    pub async fn record(&self, id: &str) -> Option<TransactionRecord> {
        let slot = self.slot(id)?;
        let guard = slot.lock().await;
        guard.clone()
    }

    /// DescribeTransactions: each id's description or TRANSACTIONAL_ID_NOT_FOUND, in
    /// request order. Waits for a call in progress on the id.
    pub async fn describe(
        &self,
        ids: &[String],
    ) -> Vec<(String, Result<TransactionDescription, TxnError>)> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let described = match self.record(id).await {
                Some(r) => Ok(TransactionDescription {
                    transactional_id: r.transactional_id,
                    state: r.state,
                    producer_id: r.producer_id,
                    producer_epoch: r.producer_epoch,
                    timeout_ms: r.timeout_ms,
                    start_ms: r
                        .start_ms
                        .map_or(-1, |s| i64::try_from(s).unwrap_or(i64::MAX)),
                    partitions: r.partitions,
                }),
                None => Err(TxnError::TransactionalIdNotFound {
                    transactional_id: id.clone(),
                }),
            };
            out.push((id.clone(), described));
        }
        out
    }

    /// ListTransactions: the transactions in one of `states` (by Kafka's names; all if
    /// empty), of one of `producer_ids` (all if empty), and running longer than
    /// `min_duration_ms` (v1's duration filter; no filter if negative), sorted by id; and
    /// the state filters that name no state.
    pub async fn list(
        &self,
        states: &[String],
        producer_ids: &[i64],
        min_duration_ms: i64,
    ) -> (Vec<ListedTransaction>, Vec<String>) {
        // Without a pattern there is nothing to refuse.
        self.list_matching(states, producer_ids, min_duration_ms, None)
            .await
            .unwrap_or_default()
    }

    /// [`list`](Self::list) with ListTransactions v2's transactional id pattern too
    /// (KIP-1152): a regular expression the whole id must match, as Kafka's RE2/J
    /// `Matcher.matches()` (the same reading as a consumer group's `SubscribedTopicRegex`);
    /// `None` or empty lists every id. All filters hold together. A pattern that does not
    /// compile is INVALID_REGULAR_EXPRESSION and lists nothing.
    pub async fn list_matching(
        &self,
        states: &[String],
        producer_ids: &[i64],
        min_duration_ms: i64,
        pattern: Option<&str>,
    ) -> Result<(Vec<ListedTransaction>, Vec<String>), TxnError> {
        let pattern = match pattern.filter(|p| !p.is_empty()) {
            None => None,
            Some(p) => Some(crate::group::consumer::pattern::compile(p).map_err(|e| {
                TxnError::InvalidRegularExpression {
                    pattern: p.to_string(),
                    reason: match e {
                        crate::error::Error::InvalidRegularExpression { reason, .. } => reason,
                        other => other.to_string(),
                    },
                }
            })?),
        };
        let mut wanted = BTreeSet::new();
        let mut unknown = Vec::new();
        for s in states {
            match TxnState::from_name(s) {
                Some(state) => {
                    wanted.insert(state);
                }
                None => unknown.push(s.clone()),
            }
        }
        if !unknown.is_empty() && wanted.is_empty() {
            // Kafka: only unknown states asked for, nothing matches.
            return Ok((Vec::new(), unknown));
        }
        let slots: Vec<Slot> = self.map().values().cloned().collect();
        let now = i64::try_from(self.now()).unwrap_or(i64::MAX);
        let mut out = Vec::new();
        for slot in slots {
            let guard = slot.lock().await;
            let Some(r) = guard.as_ref() else { continue };
            if !wanted.is_empty() && !wanted.contains(&r.state) {
                continue;
            }
            if !producer_ids.is_empty() && !producer_ids.contains(&r.producer_id) {
                continue;
            }
            if pattern
                .as_ref()
                .is_some_and(|p| !p.is_match(&r.transactional_id))
            {
                continue;
            }
            if min_duration_ms >= 0 {
                let start = r
                    .start_ms
                    .map_or(-1, |s| i64::try_from(s).unwrap_or(i64::MAX));
                if start < 0 || now.saturating_sub(start) <= min_duration_ms {
                    continue;
                }
            }
            out.push(ListedTransaction {
                transactional_id: r.transactional_id.clone(),
                producer_id: r.producer_id,
                state: r.state,
            });
        }
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok((out, unknown))
    }

    /// When the timer next needs to run (the clock's milliseconds).
    pub fn poll_timeout(&self) -> u64 {
        *self.next_run.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Does what is due at the clock's time, if the cleanup interval has passed since the
    /// last run (else nothing): aborts, with an epoch bump, every Ongoing transaction older
    /// than its timeout (Kafka's `abortTimedOutTransactions`: its producer is fenced);
    /// retries every incomplete (Prepare*) one; removes ids idle (Empty, Complete*) longer
    /// than `transactional.id.expiration.ms`. Ids with a call in progress are skipped until
    /// the next run.
    pub async fn handle_timeout(&self) -> TxnTimerReport {
        let now = self.now();
        {
            let mut next = self.next_run.lock().unwrap_or_else(PoisonError::into_inner);
            if now < *next {
                return TxnTimerReport::default();
            }
            *next = now.saturating_add(self.config.abort_timed_out_cleanup_interval_ms);
        }
        self.run_timers(now).await
    }

    async fn run_timers(&self, now: u64) -> TxnTimerReport {
        let mut report = TxnTimerReport::default();
        let slots: Vec<(String, Slot)> = self
            .map()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (id, slot) in slots {
            let Ok(mut guard) = slot.clone().try_lock_owned() else {
                continue;
            };
            let Some(record) = guard.as_ref().cloned() else {
                continue;
            };
            match record.state {
                TxnState::Ongoing => {
                    let timeout = u64::try_from(record.timeout_ms).unwrap_or(0);
                    let started = record.start_ms.unwrap_or(record.last_update_ms);
                    if started.saturating_add(timeout) < now {
                        info!(
                            transactional_id = id.as_str(),
                            producer_id = record.producer_id,
                            "aborting a timed-out transaction and fencing its producer"
                        );
                        if self.fence_and_abort(&mut guard, now).await.is_ok() {
                            report.aborted.push(id);
                        }
                    }
                }
                TxnState::PrepareCommit | TxnState::PrepareAbort => {
                    if let Completion::Done = self.complete(&mut guard).await {
                        report.completed.push(id);
                    }
                }
                TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                    let idle = now.saturating_sub(record.last_update_ms);
                    if idle <= self.config.transactional_id_expiration_ms {
                        continue;
                    }
                    if self
                        .store
                        .write_transaction(&id, None, CommitFence::none())
                        .await
                        .is_err()
                    {
                        continue;
                    }
                    *guard = None;
                    let mut map = self.map();
                    if map.get(&id).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
                        map.remove(&id);
                    }
                    info!(transactional_id = id.as_str(), "transactional id expired");
                    report.expired.push(id);
                }
                TxnState::Dead => {}
            }
        }
        report
    }

    /// Loads the store's transactions (at start, before serving): Empty, Complete* and
    /// Ongoing are kept (an Ongoing transaction's producer may still end it, and the timer
    /// aborts it once it has run past its timeout, as Kafka's coordinator after a move);
    /// Prepare* is completed (markers again; a PrepareCommit's
    /// group offsets, kept in its record, are applied). What cannot be completed now stays
    /// in Prepare* for the timer. Returns how many transactional ids were loaded. The same
    /// as [`load_where(|_| true)`](Self::load_where).
    pub async fn load(&self) -> Result<usize, TxnError> {
        self.load_where(|_| true).await
    }

    /// [`load`](Self::load) for the transactional ids `keep` accepts only: what a broker
    /// calls when it gains coordinator slots while it runs (`keep` says whether an id hashes
    /// to one of the slots gained). Ids `keep` refuses are not touched.
    ///
    /// An id live in this coordinator (a producer registered it since the slot was gained,
    /// or it was loaded already) is left as it is: every transition is stored before it is
    /// visible, so its state is at least as new as the store's. An id that was
    /// [unloaded](Self::unload_where) earlier is not live — nothing of it stayed in memory —
    /// so it is loaded afresh from its latest record, whatever another coordinator wrote
    /// meanwhile. A PrepareCommit's group offsets are put pending again from its record
    /// (this coordinator dropped its own copy when the id was unloaded), then completed.
    ///
    /// `keep` is called once per id the store holds, with no lock held. The store is asked
    /// for all its transactions and they are filtered here (the port has no per-slot read).
    ///
    /// Error: COORDINATOR_NOT_AVAILABLE if the store cannot read them; nothing was loaded.
    pub async fn load_where(&self, keep: impl Fn(&str) -> bool) -> Result<usize, TxnError> {
        let records = self.store.load_transactions().await.map_err(|e| {
            TxnError::CoordinatorNotAvailable {
                reason: e.to_string(),
            }
        })?;
        let mut n = 0;
        for record in records {
            if !keep(&record.transactional_id) {
                continue;
            }
            let id = record.transactional_id.clone();
            let slot: Slot = Arc::new(AsyncMutex::new(None));
            let mut guard = slot.clone().lock_owned().await;
            {
                let mut map = self.map();
                // A slot whose record is gone (expired, unloaded) is not live; a slot held
                // by a call in progress is.
                let live = map
                    .get(&id)
                    .is_some_and(|s| s.try_lock().map_or(true, |r| r.is_some()));
                if live {
                    continue;
                }
                map.insert(id.clone(), slot);
            }
            n += 1;
            if record.state == TxnState::PrepareCommit {
                for (group, offsets) in &record.pending_offsets {
                    self.groups
                        .restore_txn_offsets(group, record.producer_id, offsets.clone());
                }
            }
            let state = record.state;
            *guard = Some(record);
            // Kafka's TransactionStateManager after a coordinator move: an Ongoing transaction
            // stays open (its producer may still end it; the timer aborts it once it has run
            // longer than its timeout, counted from its start); Prepare* is completed.
            match state {
                TxnState::PrepareCommit | TxnState::PrepareAbort => {
                    self.complete(&mut guard).await;
                }
                _ => {}
            }
        }
        Ok(n)
    }

    /// Removes every transactional id `drop` accepts from this coordinator's memory — what
    /// a broker calls when it loses coordinator slots while it runs: another broker serves
    /// those ids now, loads them from the store and changes them there. Nothing is written
    /// to the store, and no marker is written.
    ///
    /// Each id is taken out of the map first (a call that starts afterwards finds it
    /// unknown: INVALID_PRODUCER_ID_MAPPING, TRANSACTIONAL_ID_NOT_FOUND, or a fresh id for
    /// InitProducerId, as for an id this coordinator never knew — a broker must stop
    /// routing the id's requests here first); then its slot is emptied once the call in
    /// progress on it, if any, has ended. A call that waits for the slot
    /// ([`record`](Self::record), [`describe`](Self::describe), [`list`](Self::list)) is
    /// answered as soon as that call ends, with the id unknown if the unload emptied it
    /// first; a call that does not wait answers CONCURRENT_TRANSACTIONS meanwhile, as for
    /// any call in progress. The timer never visits an unloaded id again.
    ///
    /// **Transactional offsets.** The group offsets this coordinator put pending for the
    /// dropped transactions (TxnOffsetCommit through
    /// [`txn_offset_commit`](Self::txn_offset_commit), or restored from a PrepareCommit
    /// record at load) are dropped from the group coordinator, unwritten. This follows
    /// Kafka, where the coordinator that takes a transaction over reloads it from the log
    /// and completes it from there: here the new coordinator loads the record, puts a
    /// PrepareCommit's offsets (kept in the record) pending again in its own group
    /// coordinator and completes it; a PrepareAbort's are dropped anyway. Kept here they
    /// would never be completed by anyone (no coordinator of the transaction is left on
    /// this broker), report their partitions unstable forever, and mix into the next
    /// transaction of the same producer if the id came back. The pending offsets of an
    /// Ongoing transaction are lost with the move, as with a restart: only a PrepareCommit
    /// record carries them.
    ///
    /// **Why async.** Emptying a slot waits for the call in progress on it, so no call's
    /// result lands in memory after the unload and nothing of the id is left half changed;
    /// that call's store writes are refused by the store once the slot moved, so the wait
    /// is short. Dropping the future early leaves the ids it had not emptied yet out of the
    /// map but their records in place until the calls holding them end (nothing can reach
    /// them any more); call it again to count them.
    ///
    /// `drop` is called with no lock held. Returns how many ids were dropped.
    pub async fn unload_where(&self, drop: impl Fn(&str) -> bool) -> usize {
        let ids: Vec<String> = self.map().keys().cloned().collect();
        let matching: Vec<String> = ids.into_iter().filter(|id| drop(id)).collect();
        let slots: Vec<(String, Slot)> = {
            let mut map = self.map();
            matching
                .into_iter()
                .filter_map(|id| map.remove(&id).map(|slot| (id, slot)))
                .collect()
        };
        let mut dropped = 0;
        for (id, slot) in slots {
            let Some(record) = slot.lock().await.take() else {
                continue; // removed meanwhile (expired, a failed registration)
            };
            let mut groups: BTreeSet<&String> = record.groups.iter().collect();
            groups.extend(record.pending_offsets.keys());
            for group in groups {
                self.groups.drop_txn_offsets(group, record.producer_id);
            }
            info!(
                transactional_id = id.as_str(),
                state = record.state.name(),
                "transactional id unloaded: another coordinator serves it now"
            );
            dropped += 1;
        }
        dropped
    }
}

fn pid_epoch(r: &TransactionRecord) -> ProducerIdAndEpoch {
    ProducerIdAndEpoch {
        producer_id: r.producer_id,
        epoch: r.producer_epoch,
    }
}

fn fenced(r: &TransactionRecord, producer_id: i64, epoch: i16) -> TxnError {
    TxnError::ProducerFenced {
        transactional_id: r.transactional_id.clone(),
        producer_id,
        epoch,
        current_producer_id: r.producer_id,
        current_epoch: r.producer_epoch,
    }
}
