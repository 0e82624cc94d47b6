//! A transaction's state and its durable record (Kafka's `TransactionMetadata` and
//! `TransactionLogValue`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::types::{CommittedOffsets, TopicPartition};

/// Kafka's `TransactionState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnState {
    /// No transaction in progress (after InitProducerId).
    Empty,
    /// Partitions (or groups) were added: a transaction is open.
    Ongoing,
    /// EndTxn(commit) was decided; markers are being written.
    PrepareCommit,
    /// EndTxn(abort) or a fence was decided; markers are being written.
    PrepareAbort,
    /// The last transaction committed.
    CompleteCommit,
    /// The last transaction aborted.
    CompleteAbort,
    /// Removed (expired). Never stored; only seen by a call racing the removal.
    Dead,
}

impl TxnState {
    /// Every state, in Kafka's id order.
    pub const ALL: [TxnState; 7] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
    ];

    /// Kafka's state name (`DescribeTransactions`, `ListTransactions`' filters).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
        }
    }

    /// The state named `name` (Kafka's names, as [`name`](Self::name) gives them).
    pub fn from_name(name: &str) -> Option<TxnState> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Kafka's `TransactionState.id` in the transaction log (kept for the store's format).
    pub fn id(self) -> u8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
        }
    }

    /// The state of [`id`](Self::id) `id`.
    pub fn from_id(id: u8) -> Option<TxnState> {
        Self::ALL.into_iter().find(|s| s.id() == id)
    }

    /// PrepareCommit or PrepareAbort: the outcome is decided, markers are due.
    pub fn is_prepare(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    /// Empty, CompleteCommit or CompleteAbort: no transaction open, a new one may start and
    /// the id may expire.
    pub fn is_idle(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }
}

impl fmt::Display for TxnState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the coordinator keeps of one transactional id, and what a store keeps durably
/// (Kafka's `TransactionLogValue`, plus the pending group offsets of a PrepareCommit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionRecord {
    /// The transactional id.
    pub transactional_id: String,
    /// The current producer id.
    pub producer_id: i64,
    /// The current producer epoch.
    pub producer_epoch: i16,
    /// The producer id before the last rotation (epoch exhaustion), −1 if none.
    pub last_producer_id: i64,
    /// The epoch before the last bump that a KIP-360 retry may present, −1 if none.
    pub last_producer_epoch: i16,
    /// `transaction.timeout.ms` of the producer.
    pub timeout_ms: i32,
    /// The state.
    pub state: TxnState,
    /// The data partitions of the transaction (those markers are still due for, in
    /// Prepare*).
    pub partitions: BTreeSet<TopicPartition>,
    /// The groups added with AddOffsetsToTxn (their offsets complete with the transaction).
    pub groups: BTreeSet<String>,
    /// In PrepareCommit: the groups' pending transactional offsets, so that a commit decided
    /// before a crash is applied after it. Empty otherwise.
    pub pending_offsets: BTreeMap<String, CommittedOffsets>,
    /// When the open transaction started (the clock's milliseconds), if one is open or
    /// being completed.
    pub start_ms: Option<u64>,
    /// The last state change.
    pub last_update_ms: u64,
    /// The transaction version the client last used on this transaction (Kafka's
    /// `TransactionMetadata.clientTransactionVersion`, the `transaction.version` feature
    /// level): 0 or 1 for the classic protocol, [`TV_2`] once a call of transaction version 2
    /// (EndTxn v5, an implicit add by Produce v12+ or TxnOffsetCommit v5) changed it. From 2
    /// every EndTxn bumps the epoch (KIP-890 part 2). Kept by the stores (0 where an older
    /// record has none).
    pub transaction_version: i16,
}

/// Transaction version 2 (KIP-890 part 2): the epoch is bumped at the end of every
/// transaction and partitions are added implicitly.
pub const TV_2: i16 = 2;

impl TransactionRecord {
    /// Whether the transaction follows transaction version 2 (KIP-890 part 2).
    pub fn is_tv2(&self) -> bool {
        self.transaction_version >= TV_2
    }
}
