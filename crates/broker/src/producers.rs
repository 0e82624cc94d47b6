//! The producers' side of each partition: idempotent sequence numbers, open transactions and
//! the control records (commit and abort markers) that close them.
//!
//! This first step only writes markers; the producer state (sequences, open transactions,
//! the last stable offset and the aborted-transactions index) comes next.

// Wired to the transaction coordinator by the commits that follow this skeleton.
#![allow(dead_code)]

use bytes::BytesMut;
use coordinator_core::{Bytes, LogError, NewRecord, TopicPartition};

use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    NO_PARTITION_LEADER_EPOCH,
};
use partition_log::PartitionLog;

/// The control record's type in its key: Kafka's `ControlRecordType`.
const ABORT: i16 = 0;
const COMMIT: i16 = 1;

/// What ends one producer's transaction on a partition: Kafka's `WriteTxnMarkers` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Marker {
    pub(crate) producer_id: i64,
    pub(crate) producer_epoch: i16,
    /// A commit marker, or an abort marker.
    pub(crate) commit: bool,
    /// The transaction coordinator's epoch (0 for this single broker).
    pub(crate) coordinator_epoch: i32,
}

/// The producer state of every partition.
#[derive(Debug, Default)]
pub(crate) struct Producers {}

impl Producers {
    /// Appends the marker that ends `producer_id`'s transaction on `tp` (a commit or an
    /// abort), as Kafka's WriteTxnMarkers does, and returns its offset.
    pub(crate) async fn write_marker(
        &self,
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
