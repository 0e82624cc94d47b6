//! The transaction coordinator's errors, with Kafka's names and codes.

use crate::error::Error;

use super::TxnState;

/// Kafka's PRODUCER_FENCED (90) exists from InitProducerId v4, AddPartitionsToTxn v2,
/// AddOffsetsToTxn v2, EndTxn v2 and TxnOffsetCommit v3 on (KIP-588); older versions get
/// INVALID_PRODUCER_EPOCH (47) instead, as Kafka's `KafkaApis` maps it.
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
/// Kafka's PRODUCER_FENCED.
pub const PRODUCER_FENCED: i16 = 90;

/// Why the transaction coordinator refused a call. A refused call changes nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TxnError {
    /// INVALID_REQUEST (42): an empty transactional id, a producer id without an epoch (or
    /// the reverse) in InitProducerId.
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// What is wrong.
        reason: String,
    },
    /// INVALID_PRODUCER_EPOCH (47): a transactional offset commit with an epoch that is not
    /// the transaction's.
    #[error("producer {producer_id} epoch {epoch} is not the current epoch {current} of transactional id {transactional_id}")]
    InvalidProducerEpoch {
        /// The transactional id.
        transactional_id: String,
        /// The producer id.
        producer_id: i64,
        /// The request's epoch.
        epoch: i16,
        /// The transaction's epoch.
        current: i16,
    },
    /// INVALID_TXN_STATE (48): the call is not allowed in the transaction's state (EndTxn
    /// of an Empty transaction, a commit of an aborted one, …).
    #[error("transactional id {transactional_id} is in state {state}: {reason}")]
    InvalidTxnState {
        /// The transactional id.
        transactional_id: String,
        /// Its state.
        state: TxnState,
        /// What was refused.
        reason: String,
    },
    /// INVALID_PRODUCER_ID_MAPPING (49): the transactional id is unknown, or belongs to
    /// another producer id.
    #[error("transactional id {transactional_id} is not mapped to producer id {producer_id}")]
    InvalidProducerIdMapping {
        /// The transactional id.
        transactional_id: String,
        /// The request's producer id.
        producer_id: i64,
    },
    /// INVALID_TRANSACTION_TIMEOUT (50): `transaction.timeout.ms` is not positive or above
    /// `transaction.max.timeout.ms`.
    #[error("transaction timeout {timeout_ms} ms is not within 1 ..= {max_ms} ms (transaction.max.timeout.ms)")]
    InvalidTransactionTimeout {
        /// The requested timeout.
        timeout_ms: i32,
        /// The coordinator's maximum.
        max_ms: u64,
    },
    /// CONCURRENT_TRANSACTIONS (51): another call on this transactional id is in progress,
    /// or its transaction is being completed (Prepare*): retry.
    #[error("transactional id {transactional_id}: a state transition is in progress; retry")]
    ConcurrentTransactions {
        /// The transactional id.
        transactional_id: String,
    },
    /// PRODUCER_FENCED (90; INVALID_PRODUCER_EPOCH 47 for older request versions): the
    /// request's producer epoch (or id) is not the transactional id's current one; a newer
    /// instance took over, or the coordinator aborted a timed-out transaction.
    #[error("producer {producer_id} with epoch {epoch} of transactional id {transactional_id} is fenced (current: producer {current_producer_id} epoch {current_epoch})")]
    ProducerFenced {
        /// The transactional id.
        transactional_id: String,
        /// The request's producer id.
        producer_id: i64,
        /// The request's epoch.
        epoch: i16,
        /// The current producer id.
        current_producer_id: i64,
        /// The current epoch.
        current_epoch: i16,
    },
    /// TRANSACTIONAL_ID_NOT_FOUND (105): DescribeTransactions of an unknown id.
    #[error("transactional id {transactional_id} not found")]
    TransactionalIdNotFound {
        /// The transactional id.
        transactional_id: String,
    },
    /// COORDINATOR_NOT_AVAILABLE (15): the transaction could not be written to the store
    /// (Kafka maps failed transaction-log appends to it); nothing changed, retry.
    #[error("transaction state could not be stored: {reason}")]
    CoordinatorNotAvailable {
        /// The storage error.
        reason: String,
    },
    /// THROTTLING_QUOTA_EXCEEDED (89): the coordinator already keeps
    /// `max_transactional_ids` transactional ids (a bound Kafka does not have).
    #[error("the coordinator keeps {max} transactional ids already")]
    TooManyTransactionalIds {
        /// The bound.
        max: usize,
    },
    /// THROTTLING_QUOTA_EXCEEDED (89): the transaction would hold more than
    /// `max_partitions_per_transaction` partitions and groups (a bound Kafka does not have).
    #[error(
        "transactional id {transactional_id} would hold {count} partitions and groups, above {max}"
    )]
    TooManyPartitions {
        /// The transactional id.
        transactional_id: String,
        /// How many it would hold.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// INVALID_REGULAR_EXPRESSION (128): ListTransactions' transactional id pattern (v2,
    /// KIP-1152) does not compile.
    #[error(
        "the transactional id pattern `{pattern}` is not a valid regular expression: {reason}"
    )]
    InvalidRegularExpression {
        /// The pattern the request sent.
        pattern: String,
        /// Why it does not compile.
        reason: String,
    },
    /// A refusal of the group coordinator (TxnOffsetCommit: UNKNOWN_MEMBER_ID,
    /// ILLEGAL_GENERATION, FENCED_INSTANCE_ID, STALE_MEMBER_EPOCH, …), with its code.
    #[error(transparent)]
    Group(#[from] Error),
}

impl TxnError {
    /// The stable code string: Kafka's error name.
    pub fn code(&self) -> &'static str {
        match self {
            TxnError::InvalidRequest { .. } => "INVALID_REQUEST",
            TxnError::InvalidProducerEpoch { .. } => "INVALID_PRODUCER_EPOCH",
            TxnError::InvalidTxnState { .. } => "INVALID_TXN_STATE",
            TxnError::InvalidProducerIdMapping { .. } => "INVALID_PRODUCER_ID_MAPPING",
            TxnError::InvalidTransactionTimeout { .. } => "INVALID_TRANSACTION_TIMEOUT",
            TxnError::ConcurrentTransactions { .. } => "CONCURRENT_TRANSACTIONS",
            TxnError::ProducerFenced { .. } => "PRODUCER_FENCED",
            TxnError::TransactionalIdNotFound { .. } => "TRANSACTIONAL_ID_NOT_FOUND",
            TxnError::CoordinatorNotAvailable { .. } => "COORDINATOR_NOT_AVAILABLE",
            TxnError::TooManyTransactionalIds { .. } | TxnError::TooManyPartitions { .. } => {
                "THROTTLING_QUOTA_EXCEEDED"
            }
            TxnError::InvalidRegularExpression { .. } => "INVALID_REGULAR_EXPRESSION",
            TxnError::Group(e) => e.code(),
        }
    }

    /// Kafka's numeric code (at the newest request versions).
    pub fn kafka_code(&self) -> i16 {
        match self {
            TxnError::InvalidRequest { .. } => 42,
            TxnError::InvalidProducerEpoch { .. } => INVALID_PRODUCER_EPOCH,
            TxnError::InvalidTxnState { .. } => 48,
            TxnError::InvalidProducerIdMapping { .. } => 49,
            TxnError::InvalidTransactionTimeout { .. } => 50,
            TxnError::ConcurrentTransactions { .. } => 51,
            TxnError::ProducerFenced { .. } => PRODUCER_FENCED,
            TxnError::TransactionalIdNotFound { .. } => 105,
            TxnError::CoordinatorNotAvailable { .. } => 15,
            TxnError::TooManyTransactionalIds { .. } | TxnError::TooManyPartitions { .. } => 89,
            TxnError::InvalidRegularExpression { .. } => 128,
            // Every group error a TxnOffsetCommit can get has a Kafka code; an unexpected
            // one without is reported as UNKNOWN_SERVER_ERROR.
            TxnError::Group(e) => e.kafka_code().unwrap_or(-1),
        }
    }

    /// [`kafka_code`](Self::kafka_code) for a request version that knows PRODUCER_FENCED
    /// (`fenced_known`) or not: older versions get INVALID_PRODUCER_EPOCH (KIP-588).
    pub fn kafka_code_for(&self, fenced_known: bool) -> i16 {
        match self.kafka_code() {
            PRODUCER_FENCED if !fenced_known => INVALID_PRODUCER_EPOCH,
            code => code,
        }
    }

    pub(crate) fn concurrent(id: &str) -> Self {
        TxnError::ConcurrentTransactions {
            transactional_id: id.to_string(),
        }
    }

    pub(crate) fn mapping(id: &str, producer_id: i64) -> Self {
        TxnError::InvalidProducerIdMapping {
            transactional_id: id.to_string(),
            producer_id,
        }
    }

    pub(crate) fn state(id: &str, state: TxnState, reason: impl Into<String>) -> Self {
        TxnError::InvalidTxnState {
            transactional_id: id.to_string(),
            state,
            reason: reason.into(),
        }
    }
}
