//! The transaction coordinator's ports: where markers go and where producer ids come from.

use async_trait::async_trait;

use crate::types::TopicPartition;

/// The markers of one transaction outcome, for a set of data partitions (Kafka's
/// `WriteTxnMarkersRequest` entry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMarkers {
    /// The producer id.
    pub producer_id: i64,
    /// The producer epoch the markers carry.
    pub producer_epoch: i16,
    /// The coordinator's epoch (fences markers of an older coordinator).
    pub coordinator_epoch: i32,
    /// Commit (`true`) or abort.
    pub commit: bool,
    /// The partitions to write a marker into.
    pub partitions: Vec<TopicPartition>,
    /// The transaction version of the transaction (WriteTxnMarkers v2's
    /// `TransactionVersion`, KIP-1228): 2 when the markers carry an epoch bumped by EndTxn
    /// (KIP-890 part 2), else 0 or 1.
    pub transaction_version: i16,
}

/// Why a marker could not be written into a partition: Kafka's code and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerError {
    /// Kafka's error code (UNKNOWN_TOPIC_OR_PARTITION 3 for a partition that no longer
    /// exists, INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, KAFKA_STORAGE_ERROR, …).
    pub kafka_code: i16,
    /// What happened.
    pub message: String,
}

impl MarkerError {
    /// Kafka's UNKNOWN_TOPIC_OR_PARTITION: the partition was deleted; nothing is due there
    /// any more (Kafka's marker handler drops such partitions too).
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

    /// Whether the partition no longer exists.
    pub fn is_gone(&self) -> bool {
        self.kafka_code == Self::UNKNOWN_TOPIC_OR_PARTITION
    }
}

/// Writes transaction markers into data partitions (Kafka's
/// `TransactionMarkerChannelManager` and the leaders' `WriteTxnMarkers`).
///
/// # To ensure correctness
/// - Answer for every partition of the request, in any order; a partition not answered
///   counts as failed (the coordinator retries it).
/// - A marker reported `Ok` is durable as far as the log is, and closes the producer's
///   open transaction on that partition.
/// - Writing a marker twice is harmless (the second changes no transaction): the
///   coordinator retries after failures and after restarts.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait MarkerWriter: Send + Sync {
    /// Writes `markers`, returning each partition's result.
    async fn write_markers(
        &self,
        markers: &TxnMarkers,
    ) -> Vec<(TopicPartition, Result<(), MarkerError>)>;

    /// Whether group `group_id`'s transactional offsets are completed through
    /// [`write_group_markers`](Self::write_group_markers) — its group coordinator is on
    /// another broker — rather than by the transaction coordinator's own group coordinator
    /// (`Coordinator::complete_txn_offsets`). Default: never (one broker coordinates every
    /// group).
    fn routes_group(&self, group_id: &str) -> bool {
        let _ = group_id;
        false
    }

    /// Completes the transactional offsets of `markers.producer_id` in each of `groups`
    /// (groups [`routes_group`](Self::routes_group) accepted) at their group coordinators:
    /// Kafka's marker into each group's `__consumer_offsets` partition, upon which that
    /// partition's group coordinator commits (or, for an abort, drops) the producer's
    /// pending offsets. `markers.partitions` is empty. Answer for every group; a group not
    /// answered, or answered with an error, stays due (the coordinator retries it).
    /// Default: every group COORDINATOR_NOT_AVAILABLE (15) — nothing is routed by default.
    async fn write_group_markers(
        &self,
        markers: &TxnMarkers,
        groups: &[String],
    ) -> Vec<(String, Result<(), MarkerError>)> {
        let _ = markers;
        groups
            .iter()
            .map(|g| {
                (
                    g.clone(),
                    Err(MarkerError {
                        kafka_code: 15,
                        message: format!("no route to the coordinator of group {g}"),
                    }),
                )
            })
            .collect()
    }
}

/// Where new producer ids come from: shared by idempotent and transactional producers, so
/// that no two producers ever get the same id.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
pub trait ProducerIdSource: Send + Sync {
    /// A producer id never handed out before.
    fn next_producer_id(&self) -> i64;
}
