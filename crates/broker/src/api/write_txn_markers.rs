//! WriteTxnMarkers (API 27, v1–2 — Kafka 4 removed v0, KIP-896; v2 adds each marker's
//! `TransactionVersion`, KIP-1228): what a transaction coordinator on another broker sends
//! the leaders of a transaction's partitions (Kafka's
//! `KafkaApis.handleWriteTxnMarkersRequest`). A marker of transaction version 2 must carry
//! an epoch newer than the producer's on the partition (see
//! [`PartitionState::check_marker`](crate::producers::PartitionState::check_marker)).
//!
//! CLUSTER_ACTION on the cluster, or every partition CLUSTER_AUTHORIZATION_FAILED. Per
//! partition: a data partition this broker leads gets the marker through its producer state
//! ([`Producers::try_write_marker`](crate::producers::Producers::try_write_marker): the
//! checks of the producer epoch and the coordinator epoch, INVALID_PRODUCER_EPOCH and
//! TRANSACTION_COORDINATOR_FENCED), one it does not lead NOT_LEADER_OR_FOLLOWER, one that
//! does not exist UNKNOWN_TOPIC_OR_PARTITION. Partition P of `__consumer_offsets` is group
//! slot P: if this broker owns it (COORDINATOR_LOAD_IN_PROGRESS while it loads it,
//! NOT_LEADER_OR_FOLLOWER if another broker does), the group coordinator completes the
//! producer's pending transactional offsets in the groups of that slot — a commit writes
//! them, an abort drops them (Kafka's `GroupCoordinator.onTransactionCompleted`).

use std::ops::RangeInclusive;

use coordinator_core::TopicPartition;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{ApiKey, WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use store_postgres::cluster::{group_slot, GROUP_SLOTS};

use super::registry::{up_to_codec, Api};
use super::{codes, Call};
use crate::acl::Operation;
use crate::ownership::Serving;
use crate::producers::Marker;
use crate::shutdown::Shutdown;
use crate::txn_markers::{write_local, CONSUMER_OFFSETS};
use kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker;
use kafka_protocol::protocol::Encodable;

async fn handle(call: &Call<'_>, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse {
    let allowed = call.may_cluster(Operation::ClusterAction);
    let mut markers = Vec::with_capacity(request.markers.len());
    for m in request.markers {
        let marker = Marker {
            producer_id: m.producer_id.0,
            producer_epoch: m.producer_epoch,
            commit: m.transaction_result,
            coordinator_epoch: m.coordinator_epoch,
            transaction_version: transaction_version(&m, call.version),
        };
        let mut topics = Vec::with_capacity(m.topics.len());
        for t in m.topics {
            let mut partitions = Vec::with_capacity(t.partition_indexes.len());
            for &index in &t.partition_indexes {
                let code = if allowed {
                    write(call, t.name.0.as_str(), index, marker).await
                } else {
                    codes::CLUSTER_AUTHORIZATION_FAILED
                };
                partitions.push(
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(index)
                        .with_error_code(code),
                );
            }
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(t.name)
                    .with_partitions(partitions),
            );
        }
        markers.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(markers)
}

/// The `TransactionVersion` of marker `m` of a request at `version` (v2+, KIP-1228; 0
/// before). Read through the codec's own encoding of the marker at v2, whose last byte
/// before the (here empty) tagged fields it is: the crates.io kafka-protocol 0.18 this crate
/// is also packaged against has neither the field nor v2 (the broker then serves v1 only,
/// see [`WriteTxnMarkers::VERSIONS`], and this is never asked), so the field cannot be
/// named here.
fn transaction_version(m: &WritableTxnMarker, version: i16) -> i16 {
    if version < 2 {
        return 0;
    }
    let bare = m
        .clone()
        .with_topics(Vec::new())
        .with_unknown_tagged_fields(std::collections::BTreeMap::new());
    let mut buf = bytes::BytesMut::new();
    match bare.encode(&mut buf, 2) {
        Ok(()) if buf.len() >= 2 => i16::from(i8::from_be_bytes([buf[buf.len() - 2]])),
        _ => 0,
    }
}

/// One partition's marker: its code.
async fn write(call: &Call<'_>, topic: &str, index: i32, marker: Marker) -> i16 {
    if topic == CONSUMER_OFFSETS {
        return complete_offsets(call, index, marker).await;
    }
    let Ok(partition) = u32::try_from(index) else {
        return codes::UNKNOWN_TOPIC_OR_PARTITION;
    };
    let tp = TopicPartition::new(topic, partition);
    if let Some(code) = super::produce::not_led(call, &tp).await {
        return code;
    }
    match write_local(&*call.context.log, &call.context.producers, &tp, marker).await {
        Ok(()) => codes::NONE,
        Err((code, message)) => {
            tracing::warn!(partition = %tp, code, error = message.as_str(), "transaction marker refused");
            code
        }
    }
}

/// The marker into `__consumer_offsets` partition `slot`: completes the producer's pending
/// transactional offsets in the groups of that group slot.
async fn complete_offsets(call: &Call<'_>, slot: i32, marker: Marker) -> i16 {
    if !(0..GROUP_SLOTS).contains(&slot) {
        return codes::UNKNOWN_TOPIC_OR_PARTITION;
    }
    match call.context.ownership.group_slot(slot) {
        Serving::Here => {}
        Serving::Loading => return codes::COORDINATOR_LOAD_IN_PROGRESS,
        Serving::Elsewhere(_) | Serving::Nobody => return codes::NOT_LEADER_OR_FOLLOWER,
    }
    let coordinator = &call.context.coordinator;
    for group in coordinator.pending_txn_groups(marker.producer_id) {
        if group_slot(&group) != slot {
            continue;
        }
        if let Err(e) = coordinator
            .complete_txn_offsets(&group, marker.producer_id, marker.commit)
            .await
        {
            tracing::warn!(
                group = group.as_str(),
                producer_id = marker.producer_id,
                error = %e,
                "transactional offsets not completed"
            );
            return e.kafka_code().unwrap_or(codes::UNKNOWN_SERVER_ERROR);
        }
    }
    codes::NONE
}

pub(crate) struct WriteTxnMarkers;

impl Api for WriteTxnMarkers {
    const KEY: ApiKey = ApiKey::WriteTxnMarkers;
    /// v2 (Kafka 4.2, KIP-1228) where the codec has it: the workspace's patched copy
    /// (vendor/kafka-protocol/PATCHED.md); a package built against crates.io's 0.18 serves
    /// v1.
    const VERSIONS: RangeInclusive<i16> = 1..=up_to_codec::<WriteTxnMarkersRequest>(2);
    type Request = WriteTxnMarkersRequest;

    async fn handle(
        call: &Call<'_>,
        request: WriteTxnMarkersRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<WriteTxnMarkersResponse> {
        Some(handle(call, request).await)
    }
}
