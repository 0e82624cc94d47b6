//! The transaction coordinator's `MarkerWriter` over this broker's partition log: each
//! marker goes through [`Producers::try_write_marker`], which checks it against the
//! partition's producer state (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED) and
//! appends the control batch. One broker leads every partition, so no WriteTxnMarkers
//! request goes over the network.

use std::sync::Arc;

use async_trait::async_trait;
use coordinator_core::txn::{MarkerError, MarkerWriter, TxnMarkers};
use coordinator_core::{Clock, TopicPartition};
use partition_log::PartitionLog;

use crate::api::codes;
use crate::context::WallClock;
use crate::producers::{Marker, Producers};

/// Writes markers into the log, through the producer state.
pub(crate) struct LogMarkers {
    pub(crate) log: Arc<dyn PartitionLog>,
    pub(crate) producers: Arc<Producers>,
}

#[async_trait]
impl MarkerWriter for LogMarkers {
    async fn write_markers(
        &self,
        markers: &TxnMarkers,
    ) -> Vec<(TopicPartition, Result<(), MarkerError>)> {
        let marker = Marker {
            producer_id: markers.producer_id,
            producer_epoch: markers.producer_epoch,
            commit: markers.commit,
            coordinator_epoch: markers.coordinator_epoch,
        };
        let mut out = Vec::with_capacity(markers.partitions.len());
        for tp in &markers.partitions {
            let exists = self
                .log
                .partition_count(tp.topic())
                .is_some_and(|n| tp.partition() < n);
            let result = if exists {
                let now = i64::try_from(WallClock.now_ms()).unwrap_or(i64::MAX);
                self.producers
                    .try_write_marker(&*self.log, tp, marker, now)
                    .await
                    .map(|_| ())
                    .map_err(|e| MarkerError {
                        kafka_code: e.code(),
                        message: e.to_string(),
                    })
            } else {
                Err(MarkerError {
                    kafka_code: codes::UNKNOWN_TOPIC_OR_PARTITION,
                    message: format!("{tp} does not exist"),
                })
            };
            out.push((tp.clone(), result));
        }
        out
    }
}
