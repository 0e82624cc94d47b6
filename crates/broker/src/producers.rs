//! The producers' side of each partition, as Kafka's `ProducerStateManager`: idempotent
//! sequence numbers per (partition, producer id), the open transactions that hold back the
//! last stable offset (LSO), the index of aborted transactions that read_committed fetches
//! answer with, and the control records (commit and abort markers) that close transactions.
//!
//! One [`PartitionState`] per partition, behind its own async lock: a produce of an
//! idempotent or transactional batch checks the batch and appends it while holding the lock,
//! so two produces of one producer on one partition cannot both pass the sequence check;
//! markers and read_committed reads take the same lock, so the LSO they see matches the log.
//!
//! The state lives in memory. It is rebuilt from the log the first time a partition is used
//! after a start (a scan of its stored batches: data batches carry the producer id, epoch and
//! sequences in their header, control batches the marker type in the key of their one
//! record), and again whenever the partition's topic id changes (a topic deleted and created
//! again).
//!
//! Bounds: at most [`MAX_PRODUCERS_PER_PARTITION`] producers per partition (the least
//! recently used producer without an open transaction makes room; when every one has an open
//! transaction a new producer is refused), producers idle for [`PRODUCER_ID_EXPIRATION_MS`]
//! without an open transaction are forgotten, at most [`BATCHES_TO_RETAIN`] batches per
//! producer are remembered for duplicate detection, and the aborted index drops entries that
//! end below the log start offset and keeps at most [`MAX_ABORTED_PER_PARTITION`] entries.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex as SyncMutex, PoisonError};

use bytes::BytesMut;
use coordinator_core::{Bytes, LogError, NewRecord, TopicPartition};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType, NO_PARTITION_LEADER_EPOCH,
};
use partition_log::PartitionLog;
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::api::codes;

/// The control record's type in its key: Kafka's `ControlRecordType`.
const ABORT: i16 = 0;
const COMMIT: i16 = 1;

/// The most producers one partition remembers (Kafka has no such bound; see the module docs).
pub(crate) const MAX_PRODUCERS_PER_PARTITION: usize = 10_000;
/// Kafka's `producer.id.expiration.ms` default: a producer without an open transaction whose
/// last batch is older than this is forgotten.
pub(crate) const PRODUCER_ID_EXPIRATION_MS: i64 = 86_400_000;
/// Kafka's `producer.id.expiration.check.interval.ms` default: how often a partition looks
/// for expired producers (at its next use after the interval).
const EXPIRATION_CHECK_INTERVAL_MS: i64 = 600_000;
/// Kafka's `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`: the batches per producer a retry is
/// recognised against.
pub(crate) const BATCHES_TO_RETAIN: usize = 5;
/// The most aborted transactions one partition's index keeps (Kafka's index is bounded by the
/// log's retention only); past it the oldest entry is dropped.
pub(crate) const MAX_ABORTED_PER_PARTITION: usize = 100_000;
/// How many bytes one read of the rebuild scan asks for.
const SCAN_BYTES: usize = 1 << 20;
/// Kafka's `RecordBatch.NO_PRODUCER_EPOCH`.
const NO_PRODUCER_EPOCH: i16 = -1;

/// Attribute bits of transactional and control batches.
const TRANSACTIONAL: i16 = 1 << 4;
const CONTROL: i16 = 1 << 5;
/// The length of a v2 batch header.
const HEADER_LEN: usize = 61;

/// What ends one producer's transaction on a partition: Kafka's `WriteTxnMarkers` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Marker {
    pub(crate) producer_id: i64,
    pub(crate) producer_epoch: i16,
    /// A commit marker, or an abort marker.
    pub(crate) commit: bool,
    /// The transaction coordinator's epoch (0 for this single broker).
    pub(crate) coordinator_epoch: i32,
    /// The transaction version of the marker's transaction (WriteTxnMarkers v2, KIP-1228):
    /// from 2 the marker carries an epoch bumped by EndTxn (KIP-890 part 2), which must be
    /// newer than the producer's epoch on the partition.
    pub(crate) transaction_version: i16,
}

/// The producer fields of a v2 batch header (see `api::records` for the layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchHeader {
    /// The producer id, or -1 for a batch of no idempotent producer.
    pub(crate) producer_id: i64,
    pub(crate) producer_epoch: i16,
    pub(crate) base_sequence: i32,
    /// The offset of the last record, relative to the first.
    pub(crate) last_offset_delta: i32,
    pub(crate) max_timestamp: i64,
    pub(crate) transactional: bool,
    pub(crate) control: bool,
}

impl BatchHeader {
    /// The header fields of the batch at the start of `b`, if `b` holds a whole header.
    pub(crate) fn parse(b: &[u8]) -> Option<BatchHeader> {
        let header = b.get(..HEADER_LEN)?;
        let i16_at = |at: usize| i16::from_be_bytes([header[at], header[at + 1]]);
        let i32_at = |at: usize| {
            i32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
        };
        let i64_at = |at: usize| {
            let mut v = [0u8; 8];
            v.copy_from_slice(&header[at..at + 8]);
            i64::from_be_bytes(v)
        };
        let attributes = i16_at(21);
        Some(BatchHeader {
            producer_id: i64_at(43),
            producer_epoch: i16_at(51),
            base_sequence: i32_at(53),
            last_offset_delta: i32_at(23),
            max_timestamp: i64_at(35),
            transactional: attributes & TRANSACTIONAL != 0,
            control: attributes & CONTROL != 0,
        })
    }

    /// Whether the batch comes from an idempotent (or transactional) producer.
    pub(crate) fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// The sequence of the batch's last record, wrapping past `i32::MAX` to 0 as Kafka's
    /// `DefaultRecordBatch.incrementSequence`.
    pub(crate) fn last_sequence(&self) -> i32 {
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }
}

fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// Whether `next` follows `last` (Kafka's `ProducerAppendInfo.inSequence`).
fn in_sequence(last: i32, next: i32) -> bool {
    i64::from(next) == i64::from(last) + 1 || (next == 0 && last == i32::MAX)
}

/// Why a producer's batch or marker was refused. Each carries Kafka's error code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProducerError {
    /// INVALID_PRODUCER_EPOCH (47): the epoch is older than the producer's current one.
    #[error(
        "the epoch {epoch} of producer {producer_id} is older than its current epoch {current}"
    )]
    InvalidProducerEpoch {
        producer_id: i64,
        epoch: i16,
        current: i16,
    },
    /// OUT_OF_ORDER_SEQUENCE_NUMBER (45): the batch does not follow the producer's last one.
    #[error(
        "out of order sequence for producer {producer_id} (epoch {epoch}): {first_sequence} \
         does not follow {last_sequence}"
    )]
    OutOfOrderSequence {
        producer_id: i64,
        epoch: i16,
        first_sequence: i32,
        /// The last sequence of the producer at that epoch (-1 for a new epoch).
        last_sequence: i32,
    },
    /// INVALID_TXN_STATE (48): a non-transactional batch while the producer's transaction on
    /// the partition is open.
    #[error("producer {producer_id} sent a non-transactional batch while its transaction is open")]
    InvalidTxnState { producer_id: i64 },
    /// TRANSACTION_COORDINATOR_FENCED (52): a marker from an older coordinator epoch.
    #[error(
        "the marker of producer {producer_id} has coordinator epoch {coordinator_epoch}, older \
         than {current}"
    )]
    CoordinatorFenced {
        producer_id: i64,
        coordinator_epoch: i32,
        current: i32,
    },
    /// THROTTLING_QUOTA_EXCEEDED (89): the partition already remembers its most producers and
    /// every one has an open transaction.
    #[error(
        "partition already has {MAX_PRODUCERS_PER_PARTITION} producers, all in open \
         transactions: producer {producer_id} is refused"
    )]
    TooManyProducers { producer_id: i64 },
    /// The log's error (with its own Kafka code).
    #[error(transparent)]
    Log(#[from] LogError),
}

impl ProducerError {
    /// Kafka's error code.
    pub(crate) fn code(&self) -> i16 {
        match self {
            ProducerError::InvalidProducerEpoch { .. } => codes::INVALID_PRODUCER_EPOCH,
            ProducerError::OutOfOrderSequence { .. } => codes::OUT_OF_ORDER_SEQUENCE_NUMBER,
            ProducerError::InvalidTxnState { .. } => codes::INVALID_TXN_STATE,
            ProducerError::CoordinatorFenced { .. } => codes::TRANSACTION_COORDINATOR_FENCED,
            ProducerError::TooManyProducers { .. } => codes::THROTTLING_QUOTA_EXCEEDED,
            ProducerError::Log(e) => e.kafka_code().unwrap_or(codes::UNKNOWN_SERVER_ERROR),
        }
    }
}

/// One remembered batch of a producer: its sequences and offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchMeta {
    first_sequence: i32,
    last_sequence: i32,
    first_offset: i64,
    last_offset: i64,
}

/// What a partition knows of one producer (Kafka's `ProducerStateEntry`).
#[derive(Debug, Clone)]
pub(crate) struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchMeta>,
    last_timestamp: i64,
    coordinator_epoch: i32,
    /// The first offset of the producer's open transaction on the partition.
    txn_first_offset: Option<i64>,
    /// When the producer was last used, in the partition's own ticks (for eviction).
    used: u64,
}

impl ProducerEntry {
    fn new() -> ProducerEntry {
        ProducerEntry {
            epoch: NO_PRODUCER_EPOCH,
            batches: VecDeque::new(),
            last_timestamp: -1,
            coordinator_epoch: -1,
            txn_first_offset: None,
            used: 0,
        }
    }

    /// The last sequence written at the current epoch, -1 if none.
    fn last_sequence(&self) -> i32 {
        self.batches.back().map_or(-1, |b| b.last_sequence)
    }

    fn set_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
    }
}

/// One producer as DescribeProducers reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProducerView {
    pub(crate) producer_id: i64,
    pub(crate) epoch: i16,
    pub(crate) last_sequence: i32,
    pub(crate) last_timestamp: i64,
    pub(crate) coordinator_epoch: i32,
    /// The first offset of the open transaction, -1 if none.
    pub(crate) txn_start_offset: i64,
}

/// An aborted transaction on a partition: from its first data offset to its abort marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AbortedTxn {
    pub(crate) producer_id: i64,
    pub(crate) first_offset: i64,
    pub(crate) last_offset: i64,
}

/// A batch repeating one of the producer's last batches: where the original was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Duplicate {
    pub(crate) first_offset: i64,
    pub(crate) last_offset: i64,
}

/// The producer state of one partition.
#[derive(Default)]
pub(crate) struct PartitionState {
    /// Whether the state was rebuilt from the log since the start.
    loaded: bool,
    /// The topic id the state was built for (a new id means a new topic of the same name).
    topic_id: Option<[u8; 16]>,
    producers: HashMap<i64, ProducerEntry>,
    /// The open transactions: first offset → producer id.
    open: BTreeMap<i64, i64>,
    /// The aborted transactions, in the order of their markers.
    aborted: VecDeque<AbortedTxn>,
    /// The clock of `ProducerEntry::used`.
    tick: u64,
    /// When expired producers were last removed (wall-clock ms).
    last_expiry_ms: i64,
}

impl fmt::Debug for PartitionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartitionState")
            .field("producers", &self.producers.len())
            .field("open", &self.open.len())
            .field("aborted", &self.aborted.len())
            .finish_non_exhaustive()
    }
}

impl PartitionState {
    /// Checks a data batch of an idempotent or transactional producer, as Kafka's
    /// `UnifiedLog.analyzeAndValidateProducerState` and `ProducerAppendInfo` do for a client's
    /// batch: `Ok(Some(_))` for a repeat of one of the producer's last
    /// [`BATCHES_TO_RETAIN`] batches at the same epoch (answered with the original offsets,
    /// not appended again), `Ok(None)` for a batch to append, or why it is refused. Changes
    /// nothing.
    pub(crate) fn check_data(&self, b: &BatchHeader) -> Result<Option<Duplicate>, ProducerError> {
        let producer_id = b.producer_id;
        let Some(entry) = self.producers.get(&producer_id) else {
            // Kafka 4 accepts any sequence from a producer it has no state of (its state may
            // have expired or been removed with the log's head); only KIP-890's verified
            // producers must start at 0 there, and this broker does not verify.
            return if self.producers.len() >= MAX_PRODUCERS_PER_PARTITION
                && self.eviction_candidate().is_none()
            {
                Err(ProducerError::TooManyProducers { producer_id })
            } else {
                Ok(None)
            };
        };
        let first_sequence = b.base_sequence;
        let last_sequence = b.last_sequence();
        if b.producer_epoch == entry.epoch {
            if let Some(dup) = entry
                .batches
                .iter()
                .find(|m| m.first_sequence == first_sequence && m.last_sequence == last_sequence)
            {
                return Ok(Some(Duplicate {
                    first_offset: dup.first_offset,
                    last_offset: dup.last_offset,
                }));
            }
        }
        if b.producer_epoch < entry.epoch {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id,
                epoch: b.producer_epoch,
                current: entry.epoch,
            });
        }
        let out_of_order = |last_sequence| ProducerError::OutOfOrderSequence {
            producer_id,
            epoch: b.producer_epoch,
            first_sequence,
            last_sequence,
        };
        if b.producer_epoch != entry.epoch {
            // A new epoch starts at sequence 0.
            if first_sequence != 0 && entry.epoch != NO_PRODUCER_EPOCH {
                return Err(out_of_order(-1));
            }
        } else if !in_sequence(entry.last_sequence(), first_sequence) {
            return Err(out_of_order(entry.last_sequence()));
        }
        if entry.txn_first_offset.is_some() && !b.transactional {
            return Err(ProducerError::InvalidTxnState { producer_id });
        }
        Ok(None)
    }

    /// Records a data batch written at `first_offset..=first_offset + last_offset_delta`:
    /// the producer's epoch and sequence, and the transaction it opens or continues. Call
    /// after [`check_data`](Self::check_data) passed and the append succeeded (or, when
    /// rebuilding, for every stored batch).
    pub(crate) fn apply_data(&mut self, b: &BatchHeader, first_offset: i64) {
        self.make_room(b.producer_id);
        let used = self.next_tick();
        let last_offset = first_offset + i64::from(b.last_offset_delta);
        let entry = self
            .producers
            .entry(b.producer_id)
            .or_insert_with(ProducerEntry::new);
        entry.set_epoch(b.producer_epoch);
        if entry.batches.len() == BATCHES_TO_RETAIN {
            entry.batches.pop_front();
        }
        entry.batches.push_back(BatchMeta {
            first_sequence: b.base_sequence,
            last_sequence: b.last_sequence(),
            first_offset,
            last_offset,
        });
        entry.last_timestamp = b.max_timestamp;
        entry.used = used;
        if b.transactional && entry.txn_first_offset.is_none() {
            entry.txn_first_offset = Some(first_offset);
            self.open.insert(first_offset, b.producer_id);
        }
    }

    /// Whether producer `producer_id` has a transaction open on the partition at `epoch` (its first
    /// batch written, no marker yet): Kafka's partition leader then skips the transaction's
    /// verification (KIP-890).
    pub(crate) fn has_open_txn(&self, producer_id: i64, epoch: i16) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.epoch == epoch && e.txn_first_offset.is_some())
    }

    /// Checks a marker before it is written: its producer epoch must not be older than the
    /// producer's (INVALID_PRODUCER_EPOCH), nor its coordinator epoch older than the last
    /// marker's (TRANSACTION_COORDINATOR_FENCED). Changes nothing.
    ///
    /// A marker of transaction version 2 (KIP-1228) must be newer than the producer's epoch,
    /// as Kafka's `ProducerAppendInfo.checkProducerEpoch` requires: its epoch was bumped by
    /// EndTxn, so one equal to the producer's would end a transaction of the next epoch. Here
    /// the repeat of a marker already applied (the same epoch, no transaction open) is let
    /// through, so that writing a marker twice stays harmless (the coordinator retries after
    /// failures and restarts).
    pub(crate) fn check_marker(&self, marker: &Marker) -> Result<(), ProducerError> {
        let Some(entry) = self.producers.get(&marker.producer_id) else {
            return Ok(());
        };
        let stale_v2 = marker.transaction_version >= 2
            && marker.producer_epoch == entry.epoch
            && entry.txn_first_offset.is_some();
        if marker.producer_epoch < entry.epoch || stale_v2 {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id: marker.producer_id,
                epoch: marker.producer_epoch,
                current: entry.epoch,
            });
        }
        if marker.coordinator_epoch < entry.coordinator_epoch {
            return Err(ProducerError::CoordinatorFenced {
                producer_id: marker.producer_id,
                coordinator_epoch: marker.coordinator_epoch,
                current: entry.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Records a marker written at `offset`: it closes the producer's open transaction (an
    /// abort goes to the aborted index), moves the producer to the marker's epoch if that is
    /// newer, and keeps the coordinator epoch. A marker of a producer without an open
    /// transaction changes only the epochs.
    pub(crate) fn apply_marker(&mut self, marker: &Marker, offset: i64, timestamp: i64) {
        self.make_room(marker.producer_id);
        let used = self.next_tick();
        let entry = self
            .producers
            .entry(marker.producer_id)
            .or_insert_with(ProducerEntry::new);
        if let Some(first_offset) = entry.txn_first_offset.take() {
            self.open.remove(&first_offset);
            if !marker.commit {
                if self.aborted.len() == MAX_ABORTED_PER_PARTITION {
                    self.aborted.pop_front();
                }
                self.aborted.push_back(AbortedTxn {
                    producer_id: marker.producer_id,
                    first_offset,
                    last_offset: offset,
                });
            }
        }
        if marker.producer_epoch > entry.epoch {
            entry.set_epoch(marker.producer_epoch);
        }
        entry.coordinator_epoch = marker.coordinator_epoch;
        entry.last_timestamp = timestamp;
        entry.used = used;
    }

    /// The last stable offset given the high watermark: the first offset of the earliest
    /// open transaction, or the high watermark when none is open.
    pub(crate) fn last_stable_offset(&self, high_watermark: i64) -> i64 {
        self.open
            .keys()
            .next()
            .map_or(high_watermark, |&first| first.min(high_watermark))
    }

    /// The aborted transactions overlapping `from..=last` (Kafka's
    /// `collectAbortedTransactions`), in the order of their markers.
    pub(crate) fn aborted_between(&self, from: i64, last: i64) -> Vec<AbortedTxn> {
        self.aborted
            .iter()
            .filter(|a| a.last_offset >= from && a.first_offset <= last)
            .copied()
            .collect()
    }

    /// The producers, by producer id.
    pub(crate) fn producers(&self) -> Vec<ProducerView> {
        let mut all: Vec<ProducerView> = self
            .producers
            .iter()
            .map(|(&producer_id, e)| ProducerView {
                producer_id,
                epoch: e.epoch,
                last_sequence: e.last_sequence(),
                last_timestamp: e.last_timestamp,
                coordinator_epoch: e.coordinator_epoch,
                txn_start_offset: e.txn_first_offset.unwrap_or(-1),
            })
            .collect();
        all.sort_by_key(|p| p.producer_id);
        all
    }

    /// Drops the aborted transactions that end below `log_start`: no read reaches them.
    pub(crate) fn truncate_head(&mut self, log_start: i64) {
        while self
            .aborted
            .front()
            .is_some_and(|a| a.last_offset < log_start)
        {
            self.aborted.pop_front();
        }
    }

    /// Forgets the producers without an open transaction whose last batch or marker is at
    /// least [`PRODUCER_ID_EXPIRATION_MS`] old, at most once per check interval.
    pub(crate) fn expire(&mut self, now_ms: i64) {
        if now_ms.saturating_sub(self.last_expiry_ms) < EXPIRATION_CHECK_INTERVAL_MS {
            return;
        }
        self.last_expiry_ms = now_ms;
        self.producers.retain(|_, e| {
            e.txn_first_offset.is_some()
                || now_ms.saturating_sub(e.last_timestamp) < PRODUCER_ID_EXPIRATION_MS
        });
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// The least recently used producer without an open transaction.
    fn eviction_candidate(&self) -> Option<i64> {
        self.producers
            .iter()
            .filter(|(_, e)| e.txn_first_offset.is_none())
            .min_by_key(|(_, e)| e.used)
            .map(|(&id, _)| id)
    }

    /// Makes room for `producer_id` when it is new and the partition is full.
    fn make_room(&mut self, producer_id: i64) {
        if self.producers.contains_key(&producer_id)
            || self.producers.len() < MAX_PRODUCERS_PER_PARTITION
        {
            return;
        }
        if let Some(evicted) = self.eviction_candidate() {
            self.producers.remove(&evicted);
        }
    }

    /// Replays one stored batch (rebuilding the state from the log).
    fn replay(&mut self, encoded: &[u8], base_offset: i64) {
        let Some(header) = BatchHeader::parse(encoded) else {
            return;
        };
        if !header.has_producer_id() {
            return;
        }
        if !header.control {
            self.apply_data(&header, base_offset);
            return;
        }
        let Some((commit, coordinator_epoch, timestamp)) = read_marker(encoded) else {
            return;
        };
        let marker = Marker {
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            commit,
            coordinator_epoch,
            // Applying a stored marker checks nothing: its version does not matter.
            transaction_version: 0,
        };
        self.apply_marker(&marker, base_offset, timestamp);
    }

    /// The state of `tp` as its stored batches leave it.
    async fn load(log: &dyn PartitionLog, tp: &TopicPartition) -> Result<PartitionState, LogError> {
        let mut state = PartitionState::default();
        let (mut next, high_watermark) = log.bounds(tp).await?;
        while next < high_watermark {
            let read = log.read_batches(tp, next, SCAN_BYTES).await?;
            let Some(last) = read.batches.last() else {
                break;
            };
            let after = last.last_offset() + 1;
            for batch in &read.batches {
                if let Some(encoded) = batch.encoded() {
                    state.replay(encoded, batch.base_offset());
                }
            }
            if after <= next {
                break;
            }
            next = after;
        }
        Ok(state)
    }
}

/// The marker in a stored control batch: (commit?, coordinator epoch, timestamp).
pub(crate) fn read_marker(encoded: &[u8]) -> Option<(bool, i32, i64)> {
    let set = RecordBatchDecoder::decode(&mut bytes::Bytes::copy_from_slice(encoded)).ok()?;
    let record = set.records.first()?;
    let key = record.key.as_ref()?;
    let kind = i16::from_be_bytes([*key.get(2)?, *key.get(3)?]);
    let value = record.value.as_ref();
    let coordinator_epoch = value
        .and_then(|v| v.get(2..6))
        .map_or(0, |b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    match kind {
        COMMIT => Some((true, coordinator_epoch, record.timestamp)),
        ABORT => Some((false, coordinator_epoch, record.timestamp)),
        _ => None,
    }
}

/// One partition's producer state, locked: held across a check and its append.
pub(crate) type PartitionGuard = OwnedMutexGuard<PartitionState>;

/// The producer state of every partition.
///
/// The map holds one entry per partition used since the start; an entry of a partition that
/// no longer exists is dropped the next time a new partition is added, so the map is bounded
/// by the log's partitions.
#[derive(Debug, Default)]
pub(crate) struct Producers {
    partitions: SyncMutex<HashMap<TopicPartition, Arc<Mutex<PartitionState>>>>,
}

impl Producers {
    /// `tp`'s producer state, locked, rebuilt from the log first if this is its first use
    /// (or its topic was created again), with aborted transactions below the log start and
    /// expired producers dropped. Error: the log's (`UNKNOWN_TOPIC_OR_PARTITION`, storage).
    pub(crate) async fn lock(
        &self,
        log: &dyn PartitionLog,
        tp: &TopicPartition,
        now_ms: i64,
    ) -> Result<PartitionGuard, LogError> {
        let (log_start, _) = log.bounds(tp).await?;
        let slot = {
            let mut map = self
                .partitions
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if !map.contains_key(tp) {
                map.retain(|k, _| {
                    log.partition_count(k.topic())
                        .is_some_and(|n| k.partition() < n)
                });
            }
            Arc::clone(map.entry(tp.clone()).or_default())
        };
        let mut state = slot.lock_owned().await;
        let topic_id = log.topic_id(tp.topic());
        if !state.loaded || state.topic_id != topic_id {
            let mut loaded = PartitionState::load(log, tp).await?;
            loaded.loaded = true;
            loaded.topic_id = topic_id;
            *state = loaded;
        }
        state.truncate_head(log_start);
        state.expire(now_ms);
        Ok(state)
    }

    /// Forgets the state of every partition `lost` matches (partitions another broker leads
    /// now, and may write meanwhile): if this broker leads one again, its state is rebuilt
    /// from the log at its first use. Returns how many partitions' states were dropped.
    pub(crate) fn forget(&self, lost: impl Fn(&TopicPartition) -> bool) -> usize {
        let mut map = self
            .partitions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let before = map.len();
        map.retain(|tp, _| !lost(tp));
        before - map.len()
    }

    /// Appends the marker that ends `producer_id`'s transaction on `tp` (a commit or an
    /// abort), as Kafka's WriteTxnMarkers does, and returns its offset. A refused marker (see
    /// [`try_write_marker`](Self::try_write_marker)) is reported as `INVALID_ARGUMENT`
    /// naming Kafka's code; nothing is written then.
    #[cfg(test)] // the coordinator uses the typed `try_write_marker`
    pub(crate) async fn write_marker(
        &self,
        log: &dyn PartitionLog,
        tp: &TopicPartition,
        marker: Marker,
        now_ms: i64,
    ) -> Result<i64, LogError> {
        self.try_write_marker(log, tp, marker, now_ms)
            .await
            .map_err(|e| match e {
                ProducerError::Log(e) => e,
                refused => LogError::InvalidArgument {
                    what: "transaction marker",
                    reason: format!("{refused} (Kafka error code {})", refused.code()),
                },
            })
    }

    /// [`write_marker`](Self::write_marker) with the typed refusal: INVALID_PRODUCER_EPOCH for
    /// a producer epoch older than the producer's on `tp`, TRANSACTION_COORDINATOR_FENCED for
    /// an older coordinator epoch. The marker is written even when the producer has no open
    /// transaction on `tp` (Kafka writes it too); it then changes only the epochs.
    pub(crate) async fn try_write_marker(
        &self,
        log: &dyn PartitionLog,
        tp: &TopicPartition,
        marker: Marker,
        now_ms: i64,
    ) -> Result<i64, ProducerError> {
        let mut state = self.lock(log, tp, now_ms).await?;
        state.check_marker(&marker)?;
        let offset = append_marker(log, tp, marker, now_ms).await?;
        state.apply_marker(&marker, offset, now_ms);
        Ok(offset)
    }
}

/// Appends one control batch holding `marker`, returning its offset.
async fn append_marker(
    log: &dyn PartitionLog,
    tp: &TopicPartition,
    marker: Marker,
    now_ms: i64,
) -> Result<i64, LogError> {
    let Marker {
        producer_id,
        producer_epoch,
        commit,
        coordinator_epoch,
        ..
    } = marker;
    let key = control_key(commit);
    let value = control_value(coordinator_epoch);
    let record = NewRecord::new(value.clone())
        .key(key.clone())
        .timestamp(now_ms);
    let encode = Box::new(move |base: i64| {
        encode_marker(base, producer_id, producer_epoch, now_ms, key, value)
    });
    log.append_encoded(tp, vec![record], encode).await
}

/// The key of a control record: version 0, then the type.
fn control_key(commit: bool) -> Bytes {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&(if commit { COMMIT } else { ABORT }).to_be_bytes());
    Bytes::from(key.into_boxed_slice())
}

/// The value of a marker: version 0, then the coordinator epoch.
fn control_value(coordinator_epoch: i32) -> Bytes {
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    Bytes::from(value.into_boxed_slice())
}

/// One control batch holding one marker, at `base`.
fn encode_marker(
    base: i64,
    producer_id: i64,
    producer_epoch: i16,
    timestamp: i64,
    key: Bytes,
    value: Bytes,
) -> Bytes {
    let record = Record {
        transactional: true,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
        producer_id,
        producer_epoch,
        timestamp_type: TimestampType::Creation,
        offset: base,
        sequence: -1,
        timestamp,
        key: Some(bytes::Bytes::copy_from_slice(&key)),
        value: Some(bytes::Bytes::copy_from_slice(&value)),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    // Encoding one uncompressed record into a growable buffer cannot fail.
    let _ = RecordBatchEncoder::encode(
        &mut buf,
        std::iter::once(&record),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    );
    Bytes::from(&buf[..])
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use partition_log::MemoryLog;

    /// A header of `count` records from `base_sequence`.
    fn batch(producer_id: i64, epoch: i16, base_sequence: i32, count: i32) -> BatchHeader {
        BatchHeader {
            producer_id,
            producer_epoch: epoch,
            base_sequence,
            last_offset_delta: count - 1,
            max_timestamp: 1_000,
            transactional: false,
            control: false,
        }
    }

    fn txn(producer_id: i64, epoch: i16, base_sequence: i32, count: i32) -> BatchHeader {
        BatchHeader {
            transactional: true,
            ..batch(producer_id, epoch, base_sequence, count)
        }
    }

    /// Checks and applies `b` at `offset` as a produce does.
    fn write(state: &mut PartitionState, b: &BatchHeader, offset: i64) {
        assert_eq!(state.check_data(b).unwrap(), None, "{b:?} is appended");
        state.apply_data(b, offset);
    }

    fn marker(producer_id: i64, epoch: i16, commit: bool) -> Marker {
        Marker {
            producer_id,
            producer_epoch: epoch,
            commit,
            coordinator_epoch: 0,
            transaction_version: 0,
        }
    }

    #[test]
    fn a_new_producer_starts_anywhere_and_then_must_follow_on() {
        let mut state = PartitionState::default();
        // Kafka 4 accepts any first sequence of a producer it has no state of.
        write(&mut state, &batch(7, 0, 5, 3), 0);
        let gap = state.check_data(&batch(7, 0, 9, 1)).unwrap_err();
        assert_eq!(gap.code(), codes::OUT_OF_ORDER_SEQUENCE_NUMBER, "{gap}");
        assert!(gap.to_string().contains("9 does not follow 7"), "{gap}");
        let behind = state.check_data(&batch(7, 0, 6, 2)).unwrap_err();
        assert_eq!(behind.code(), codes::OUT_OF_ORDER_SEQUENCE_NUMBER);
        write(&mut state, &batch(7, 0, 8, 1), 3);
        assert_eq!(state.producers()[0].last_sequence, 8);
        // Another producer has its own sequence.
        write(&mut state, &batch(8, 0, 0, 1), 4);
        assert_eq!(state.producers().len(), 2);
    }

    #[test]
    fn each_of_the_last_five_batches_is_a_duplicate_and_the_sixth_is_not() {
        let mut state = PartitionState::default();
        for i in 0..6 {
            write(&mut state, &batch(1, 0, i * 2, 2), i64::from(i) * 10);
        }
        for i in 1..6 {
            assert_eq!(
                state.check_data(&batch(1, 0, i * 2, 2)).unwrap(),
                Some(Duplicate {
                    first_offset: i64::from(i) * 10,
                    last_offset: i64::from(i) * 10 + 1
                }),
                "batch {i}"
            );
        }
        // The oldest is no longer remembered: it is out of order now.
        let old = state.check_data(&batch(1, 0, 0, 2)).unwrap_err();
        assert_eq!(old.code(), codes::OUT_OF_ORDER_SEQUENCE_NUMBER);
        // Same first sequence, another last one: not a duplicate.
        let other = state.check_data(&batch(1, 0, 10, 1)).unwrap_err();
        assert_eq!(other.code(), codes::OUT_OF_ORDER_SEQUENCE_NUMBER);
        // A duplicate at another epoch is not one.
        assert!(state.check_data(&batch(1, 1, 10, 2)).is_err());
    }

    #[test]
    fn epochs_never_go_back_and_a_new_epoch_starts_at_zero() {
        let mut state = PartitionState::default();
        write(&mut state, &batch(1, 3, 0, 4), 0);
        let older = state.check_data(&batch(1, 2, 4, 1)).unwrap_err();
        assert_eq!(older.code(), codes::INVALID_PRODUCER_EPOCH, "{older}");
        let not_zero = state.check_data(&batch(1, 4, 4, 1)).unwrap_err();
        assert_eq!(not_zero.code(), codes::OUT_OF_ORDER_SEQUENCE_NUMBER);
        write(&mut state, &batch(1, 4, 0, 1), 4);
        let view = &state.producers()[0];
        assert_eq!((view.epoch, view.last_sequence), (4, 0));
        // The old epoch's batches are gone: a retry of one is fenced.
        let retry = state.check_data(&batch(1, 3, 0, 4)).unwrap_err();
        assert_eq!(retry.code(), codes::INVALID_PRODUCER_EPOCH);
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        assert_eq!(batch(1, 0, i32::MAX - 1, 3).last_sequence(), 0);
        assert_eq!(batch(1, 0, i32::MAX, 1).last_sequence(), i32::MAX);
        let mut state = PartitionState::default();
        write(&mut state, &batch(1, 0, i32::MAX - 1, 3), 0);
        write(&mut state, &batch(1, 0, 1, 1), 3);
        let mut state = PartitionState::default();
        write(&mut state, &batch(1, 0, i32::MAX, 1), 0);
        assert!(state.check_data(&batch(1, 0, i32::MIN, 1)).is_err());
        write(&mut state, &batch(1, 0, 0, 1), 1);
    }

    #[test]
    fn a_plain_batch_inside_an_open_transaction_is_refused() {
        let mut state = PartitionState::default();
        write(&mut state, &txn(1, 0, 0, 1), 0);
        let err = state.check_data(&batch(1, 0, 1, 1)).unwrap_err();
        assert_eq!(err.code(), codes::INVALID_TXN_STATE, "{err}");
        write(&mut state, &txn(1, 0, 1, 1), 1);
        assert_eq!(
            state.producers()[0].txn_start_offset,
            0,
            "continued, not reopened"
        );
    }

    #[test]
    fn the_last_stable_offset_waits_for_the_earliest_open_transaction() {
        let mut state = PartitionState::default();
        assert_eq!(
            state.last_stable_offset(4),
            4,
            "no transaction: the high watermark"
        );
        write(&mut state, &txn(1, 0, 0, 2), 0);
        write(&mut state, &batch(3, 0, 0, 1), 2);
        write(&mut state, &txn(2, 0, 0, 2), 3);
        write(&mut state, &txn(1, 0, 2, 1), 5);
        assert_eq!(state.last_stable_offset(6), 0);
        state.apply_marker(&marker(1, 0, true), 6, 10);
        assert_eq!(
            state.last_stable_offset(7),
            3,
            "the second one holds it now"
        );
        assert!(
            state.aborted_between(0, 7).is_empty(),
            "a commit is not indexed"
        );
        state.apply_marker(&marker(2, 0, false), 7, 10);
        assert_eq!(state.last_stable_offset(8), 8);
        let aborted = AbortedTxn {
            producer_id: 2,
            first_offset: 3,
            last_offset: 7,
        };
        assert_eq!(state.aborted_between(0, 2), []);
        assert_eq!(state.aborted_between(0, 3), [aborted]);
        assert_eq!(state.aborted_between(7, 9), [aborted]);
        assert_eq!(state.aborted_between(8, 9), []);
        // A marker without an open transaction changes no transaction state.
        state.apply_marker(&marker(3, 0, false), 8, 10);
        assert_eq!(state.aborted_between(0, 100), [aborted]);
        assert_eq!(state.last_stable_offset(9), 9);
    }

    #[test]
    fn markers_check_epochs_and_bump_the_producer() {
        let mut state = PartitionState::default();
        write(&mut state, &txn(1, 2, 0, 1), 0);
        let old = state.check_marker(&marker(1, 1, false)).unwrap_err();
        assert_eq!(old.code(), codes::INVALID_PRODUCER_EPOCH);
        state.check_marker(&marker(1, 2, true)).unwrap();
        state.apply_marker(
            &Marker {
                coordinator_epoch: 4,
                ..marker(1, 3, true)
            },
            1,
            10,
        );
        let view = &state.producers()[0];
        assert_eq!(
            (view.epoch, view.coordinator_epoch, view.last_sequence),
            (3, 4, -1)
        );
        let fenced = state.check_marker(&marker(1, 3, true)).unwrap_err();
        assert_eq!(fenced.code(), codes::TRANSACTION_COORDINATOR_FENCED);
        // The bumped epoch starts at sequence 0.
        assert!(state.check_data(&txn(1, 3, 1, 1)).is_err());
        write(&mut state, &txn(1, 3, 0, 1), 2);
    }

    #[test]
    fn the_aborted_index_is_bounded_by_the_log_start_and_its_size() {
        let mut state = PartitionState::default();
        for i in 0..3 {
            write(&mut state, &txn(1, 0, i, 1), i64::from(i) * 2);
            state.apply_marker(&marker(1, 0, false), i64::from(i) * 2 + 1, 0);
        }
        assert_eq!(state.aborted_between(0, 10).len(), 3);
        state.truncate_head(3);
        let left: Vec<i64> = state
            .aborted_between(0, 10)
            .iter()
            .map(|a| a.first_offset)
            .collect();
        assert_eq!(left, [2, 4], "the one ending at 1 is dropped");
        for i in 0..MAX_ABORTED_PER_PARTITION as i64 {
            state.apply_data(&txn(2, 0, 0, 1), 10 + 2 * i);
            state.apply_marker(&marker(2, 0, false), 11 + 2 * i, 0);
        }
        assert_eq!(state.aborted.len(), MAX_ABORTED_PER_PARTITION);
        assert_eq!(state.aborted.front().map(|a| a.first_offset), Some(10));
    }

    #[test]
    fn producers_are_bounded_evicting_the_least_recently_used_without_a_transaction() {
        let mut state = PartitionState::default();
        write(&mut state, &txn(0, 0, 0, 1), 0);
        for id in 1..MAX_PRODUCERS_PER_PARTITION as i64 {
            state.apply_data(&batch(id, 0, 0, 1), id);
        }
        // Producer 1 is used again: 2 is now the least recently used without a transaction.
        state.apply_data(&batch(1, 0, 1, 1), 20_000);
        write(&mut state, &batch(50_000, 0, 0, 1), 20_001);
        assert_eq!(state.producers.len(), MAX_PRODUCERS_PER_PARTITION);
        assert!(state.producers.contains_key(&0), "in a transaction: kept");
        assert!(state.producers.contains_key(&1), "recently used: kept");
        assert!(!state.producers.contains_key(&2), "evicted");
        // When every producer has an open transaction, a new one is refused.
        let mut full = PartitionState::default();
        for id in 0..MAX_PRODUCERS_PER_PARTITION as i64 {
            full.apply_data(&txn(id, 0, 0, 1), id);
        }
        let err = full.check_data(&batch(99_999, 0, 0, 1)).unwrap_err();
        assert_eq!(err.code(), codes::THROTTLING_QUOTA_EXCEEDED, "{err}");
        assert!(
            full.check_data(&txn(5, 0, 1, 1)).is_ok(),
            "known ones go on"
        );
    }

    #[test]
    fn idle_producers_without_a_transaction_expire() {
        let mut state = PartitionState::default();
        state.apply_data(&batch(1, 0, 0, 1), 0);
        state.apply_data(&txn(2, 0, 0, 1), 1);
        let now = 1_000 + PRODUCER_ID_EXPIRATION_MS;
        state.expire(now - 1);
        assert_eq!(state.producers.len(), 2, "not idle long enough");
        state.last_expiry_ms = 0;
        state.expire(now);
        let left: Vec<i64> = state.producers().iter().map(|p| p.producer_id).collect();
        assert_eq!(left, [2], "the one with an open transaction stays");
    }

    /// Appends a data batch encoded as a producer would, as Produce stores it.
    async fn append_data(log: &MemoryLog, tp: &TopicPartition, b: BatchHeader) -> i64 {
        let records = vec![NewRecord::new(&b"v"[..]).timestamp(b.max_timestamp)];
        let encode = Box::new(move |base: i64| {
            let record = Record {
                transactional: b.transactional,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
                producer_id: b.producer_id,
                producer_epoch: b.producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: base,
                sequence: b.base_sequence,
                timestamp: b.max_timestamp,
                key: None,
                value: Some(bytes::Bytes::from_static(b"v")),
                headers: Default::default(),
            };
            let mut buf = BytesMut::new();
            RecordBatchEncoder::encode(
                &mut buf,
                std::iter::once(&record),
                &RecordEncodeOptions {
                    version: 2,
                    compression: Compression::None,
                },
            )
            .unwrap();
            Bytes::from(&buf[..])
        });
        PartitionLog::append_encoded(log, tp, records, encode)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn markers_are_written_checked_and_the_state_is_rebuilt_from_the_log() {
        let log = Arc::new(MemoryLog::new());
        log.create_topic("t", 1).unwrap();
        let tp = TopicPartition::new("t", 0);
        let producers = Producers::default();
        for (b, offset) in [
            (txn(1, 0, 0, 1), 0),
            (txn(2, 0, 0, 1), 1),
            (batch(3, 0, 0, 1), 2),
        ] {
            let mut state = producers.lock(&*log, &tp, 0).await.unwrap();
            assert_eq!(state.check_data(&b).unwrap(), None);
            assert_eq!(append_data(&log, &tp, b).await, offset);
            state.apply_data(&b, offset);
        }
        let abort = producers
            .write_marker(&*log, &tp, marker(1, 0, false), 5)
            .await
            .unwrap();
        assert_eq!(abort, 3);
        let refused = producers
            .write_marker(&*log, &tp, marker(2, -1, true), 5)
            .await
            .unwrap_err();
        assert!(refused.to_string().contains("47"), "{refused}");
        assert_eq!(
            log.bounds(&tp).unwrap(),
            (0, 4),
            "a refused marker writes nothing"
        );
        let fenced = producers
            .try_write_marker(
                &*log,
                &tp,
                Marker {
                    coordinator_epoch: -5,
                    ..marker(1, 0, true)
                },
                5,
            )
            .await
            .unwrap_err();
        assert_eq!(fenced.code(), codes::TRANSACTION_COORDINATOR_FENCED);
        let before = {
            let state = producers.lock(&*log, &tp, 0).await.unwrap();
            assert_eq!(state.last_stable_offset(4), 1, "producer 2 is still open");
            (state.producers(), state.aborted_between(0, 10))
        };
        assert_eq!(
            before.1,
            [AbortedTxn {
                producer_id: 1,
                first_offset: 0,
                last_offset: 3
            }]
        );
        // A restart: a fresh state over the same log reads the same from the batches.
        let restarted = Producers::default();
        let state = restarted.lock(&*log, &tp, 0).await.unwrap();
        assert_eq!((state.producers(), state.aborted_between(0, 10)), before);
        assert_eq!(state.last_stable_offset(4), 1);
        // A duplicate is still recognised after the rebuild.
        assert_eq!(
            state.check_data(&batch(3, 0, 0, 1)).unwrap(),
            Some(Duplicate {
                first_offset: 2,
                last_offset: 2
            })
        );
    }

    #[tokio::test]
    async fn a_topic_created_again_starts_with_no_producers() {
        let log = Arc::new(MemoryLog::new());
        log.create_topic("t", 1).unwrap();
        let tp = TopicPartition::new("t", 0);
        let producers = Producers::default();
        {
            let mut state = producers.lock(&*log, &tp, 0).await.unwrap();
            let b = txn(1, 0, 0, 1);
            append_data(&log, &tp, b).await;
            state.apply_data(&b, 0);
        }
        log.delete_topic("t").unwrap();
        assert!(producers.lock(&*log, &tp, 0).await.is_err(), "unknown now");
        log.create_topic("t", 1).unwrap();
        let state = producers.lock(&*log, &tp, 0).await.unwrap();
        assert!(state.producers().is_empty());
        assert_eq!(state.last_stable_offset(0), 0);
    }
}
