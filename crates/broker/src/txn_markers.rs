//! The transaction coordinator's `MarkerWriter`: Kafka's `TransactionMarkerChannelManager`.
//!
//! A marker into a partition this broker leads goes through [`Producers::try_write_marker`]
//! (which checks it against the partition's producer state — INVALID_PRODUCER_EPOCH,
//! TRANSACTION_COORDINATOR_FENCED — and appends the control batch). A broker alone leads
//! every partition and coordinates every group, so nothing goes over the network.
//!
//! With several brokers over PostgreSQL, the markers of partitions other brokers lead are
//! sent to them as WriteTxnMarkers (v1, one request per leader), and the completion of a
//! group's transactional offsets whose coordinator is another broker as a marker into the
//! group's `__consumer_offsets` partition (its group slot) to that slot's owner, as Kafka's
//! coordinator does. Each goes over the leader's published PLAINTEXT listener (the only
//! inter-broker transport so far), one connection per broker kept open and made again after
//! a failure, each call bounded by [`REQUEST_TIMEOUT`]. A partition or group with no live
//! leader, or whose leader has no PLAINTEXT listener or does not answer, is reported with a
//! retriable error (NOT_LEADER_OR_FOLLOWER, COORDINATOR_NOT_AVAILABLE): the transaction
//! stays in Prepare* and the core retries (the client's EndTxn retry, the timer).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use coordinator_core::txn::{MarkerError, MarkerWriter, TxnMarkers};
use coordinator_core::{Clock, TopicPartition};
use kafka_client::Connection;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ProducerId, TopicName, WriteTxnMarkersRequest};
use kafka_protocol::protocol::StrBytes;
use partition_log::PartitionLog;
use store_postgres::cluster::group_slot;
use tokio::sync::Mutex as AsyncMutex;

use crate::api::codes;
use crate::config::SecurityProtocol;
use crate::context::WallClock;
use crate::ownership::{Node, Ownership, Serving};
use crate::producers::{Marker, Producers};

/// Kafka's name of the group coordinator's topic: a marker into its partition P completes
/// the transactional offsets of the groups of group slot P.
pub(crate) const CONSUMER_OFFSETS: &str = "__consumer_offsets";

/// The bound on one WriteTxnMarkers exchange with another broker, connecting included
/// (Kafka's inter-broker `request.timeout.ms` is 30 s; the transaction's lock is held
/// meanwhile, so shorter here).
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The WriteTxnMarkers version sent (Kafka 4 serves v1 only, KIP-896).
const VERSION: i16 = 1;

/// One connection to another broker, with the address it was made to.
struct Peer {
    host: String,
    port: i32,
    connection: Connection,
}

/// Writes markers into the log, through the producer state, and sends the others to their
/// leaders.
pub(crate) struct LogMarkers {
    log: Arc<dyn PartitionLog>,
    producers: Arc<Producers>,
    /// Who leads each partition and coordinates each group.
    ownership: Arc<Ownership>,
    /// One connection slot per other live broker (pruned to the live ones at each send).
    peers: Mutex<HashMap<i32, Arc<AsyncMutex<Option<Peer>>>>>,
}

impl LogMarkers {
    pub(crate) fn new(
        log: Arc<dyn PartitionLog>,
        producers: Arc<Producers>,
        ownership: Arc<Ownership>,
    ) -> LogMarkers {
        LogMarkers {
            log,
            producers,
            ownership,
            peers: Mutex::new(HashMap::new()),
        }
    }

    /// Writes `markers` into the partitions `partitions`, led here.
    async fn write_here(
        &self,
        markers: &TxnMarkers,
        partitions: &[TopicPartition],
    ) -> Vec<(TopicPartition, Result<(), MarkerError>)> {
        let marker = Marker {
            producer_id: markers.producer_id,
            producer_epoch: markers.producer_epoch,
            commit: markers.commit,
            coordinator_epoch: markers.coordinator_epoch,
            transaction_version: markers.transaction_version,
        };
        let mut out = Vec::with_capacity(partitions.len());
        for tp in partitions {
            let result = write_local(&*self.log, &self.producers, tp, marker).await;
            out.push((
                tp.clone(),
                result.map_err(|(code, message)| error(code, message)),
            ));
        }
        out
    }

    /// Sends `markers` for `partitions` (topic, partition) to node `node_id` as one
    /// WriteTxnMarkers, returning each partition's code (an unanswered partition or a
    /// failed exchange: COORDINATOR_NOT_AVAILABLE).
    async fn send(
        &self,
        node_id: i32,
        markers: &TxnMarkers,
        partitions: &BTreeSet<(String, i32)>,
    ) -> BTreeMap<(String, i32), Result<(), MarkerError>> {
        let failed = |message: String| {
            partitions
                .iter()
                .map(|p| {
                    (
                        p.clone(),
                        Err(error(codes::COORDINATOR_NOT_AVAILABLE, message.clone())),
                    )
                })
                .collect()
        };
        let Some(node) = self.ownership.other(node_id, SecurityProtocol::Plaintext) else {
            return failed(format!(
                "broker {node_id} is not live or has no PLAINTEXT listener for \
                 WriteTxnMarkers"
            ));
        };
        let slot = self.peer(node_id);
        let mut peer = slot.lock().await;
        match tokio::time::timeout(
            REQUEST_TIMEOUT,
            exchange(&mut peer, &node, markers, partitions),
        )
        .await
        {
            Ok(Ok(answered)) => partitions
                .iter()
                .map(|p| {
                    let result = match answered.get(p) {
                        Some(&codes::NONE) => Ok(()),
                        Some(&code) => Err(error(
                            code,
                            format!("broker {node_id} refused the marker into {}-{}", p.0, p.1),
                        )),
                        None => Err(error(
                            codes::COORDINATOR_NOT_AVAILABLE,
                            format!("broker {node_id} did not answer for {}-{}", p.0, p.1),
                        )),
                    };
                    (p.clone(), result)
                })
                .collect(),
            Ok(Err(e)) => {
                *peer = None;
                failed(format!("WriteTxnMarkers to broker {node_id}: {e}"))
            }
            Err(_) => {
                // A late answer may still come on this connection: make a new one.
                *peer = None;
                failed(format!(
                    "WriteTxnMarkers to broker {node_id}: no answer within {} ms",
                    REQUEST_TIMEOUT.as_millis()
                ))
            }
        }
    }

    /// The connection slot of node `node_id`, dropping those of brokers no longer live.
    fn peer(&self, node_id: i32) -> Arc<AsyncMutex<Option<Peer>>> {
        let live: BTreeSet<i32> = self
            .ownership
            .others(SecurityProtocol::Plaintext)
            .iter()
            .map(|n| n.node_id)
            .collect();
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        peers.retain(|id, _| *id == node_id || live.contains(id));
        peers.entry(node_id).or_default().clone()
    }
}

/// Connects (again) if needed and exchanges one WriteTxnMarkers.
async fn exchange(
    peer: &mut Option<Peer>,
    node: &Node,
    markers: &TxnMarkers,
    partitions: &BTreeSet<(String, i32)>,
) -> Result<BTreeMap<(String, i32), i16>, String> {
    if peer
        .as_ref()
        .is_some_and(|p| p.host != node.host || p.port != node.port)
    {
        *peer = None;
    }
    if peer.is_none() {
        let port = u16::try_from(node.port).map_err(|_| format!("port {}", node.port))?;
        let stream = tokio::net::TcpStream::connect((node.host.as_str(), port))
            .await
            .map_err(|e| format!("connecting to {}:{port}: {e}", node.host))?;
        let mut connection = Connection::new(stream);
        connection.set_client_id("txn-marker-channel");
        *peer = Some(Peer {
            host: node.host.clone(),
            port: node.port,
            connection,
        });
    }
    let Some(p) = peer.as_mut() else {
        return Err("no connection".to_string());
    };
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        topics.entry(topic.as_str()).or_default().push(*partition);
    }
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(markers.producer_id))
            .with_producer_epoch(markers.producer_epoch)
            .with_transaction_result(markers.commit)
            .with_coordinator_epoch(markers.coordinator_epoch)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(name, parts)| {
                        WritableTxnMarkerTopic::default()
                            .with_name(TopicName(StrBytes::from_string(name.to_string())))
                            .with_partition_indexes(parts)
                    })
                    .collect(),
            )]);
    let response = p
        .connection
        .call(&request, VERSION)
        .await
        .map_err(|e| e.to_string())?;
    let mut answered = BTreeMap::new();
    for marker in response
        .markers
        .iter()
        .filter(|m| m.producer_id.0 == markers.producer_id)
    {
        for topic in &marker.topics {
            for partition in &topic.partitions {
                answered.insert(
                    (topic.name.to_string(), partition.partition_index),
                    partition.error_code,
                );
            }
        }
    }
    Ok(answered)
}

fn error(kafka_code: i16, message: String) -> MarkerError {
    MarkerError {
        kafka_code,
        message,
    }
}

/// Writes `marker` into `tp`, led by this broker: UNKNOWN_TOPIC_OR_PARTITION if it does
/// not exist, else the producer state's and the log's answer.
pub(crate) async fn write_local(
    log: &dyn PartitionLog,
    producers: &Producers,
    tp: &TopicPartition,
    marker: Marker,
) -> Result<(), (i16, String)> {
    let exists = log
        .partition_count(tp.topic())
        .is_some_and(|n| tp.partition() < n);
    if !exists {
        return Err((
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            format!("{tp} does not exist"),
        ));
    }
    let now = i64::try_from(WallClock.now_ms()).unwrap_or(i64::MAX);
    producers
        .try_write_marker(log, tp, marker, now)
        .await
        .map(|_| ())
        .map_err(|e| (e.code(), e.to_string()))
}

#[async_trait]
impl MarkerWriter for LogMarkers {
    async fn write_markers(
        &self,
        markers: &TxnMarkers,
    ) -> Vec<(TopicPartition, Result<(), MarkerError>)> {
        let mut here = Vec::new();
        let mut elsewhere: BTreeMap<i32, BTreeSet<(String, i32)>> = BTreeMap::new();
        let mut out = Vec::with_capacity(markers.partitions.len());
        for tp in &markers.partitions {
            let index = i32::try_from(tp.partition()).unwrap_or(i32::MAX);
            match self.ownership.partition(tp.topic(), index) {
                Serving::Here | Serving::Loading => here.push(tp.clone()),
                Serving::Elsewhere(node) => {
                    elsewhere
                        .entry(node)
                        .or_default()
                        .insert((tp.topic().to_string(), index));
                }
                Serving::Nobody => out.push((
                    tp.clone(),
                    Err(error(
                        codes::NOT_LEADER_OR_FOLLOWER,
                        format!("no live broker leads {tp}"),
                    )),
                )),
            }
        }
        out.extend(self.write_here(markers, &here).await);
        for (node, partitions) in elsewhere {
            for ((topic, partition), result) in self.send(node, markers, &partitions).await {
                let partition = u32::try_from(partition).unwrap_or(0);
                out.push((TopicPartition::new(topic, partition), result));
            }
        }
        out
    }

    fn routes_group(&self, group_id: &str) -> bool {
        matches!(
            self.ownership.group(group_id),
            Serving::Elsewhere(_) | Serving::Nobody
        )
    }

    async fn write_group_markers(
        &self,
        markers: &TxnMarkers,
        groups: &[String],
    ) -> Vec<(String, Result<(), MarkerError>)> {
        let mut out = Vec::with_capacity(groups.len());
        // node → the groups' slots, and each slot's groups
        let mut elsewhere: BTreeMap<i32, BTreeMap<i32, Vec<String>>> = BTreeMap::new();
        for g in groups {
            let slot = group_slot(g);
            match self.ownership.group_slot(slot) {
                Serving::Elsewhere(node) => elsewhere
                    .entry(node)
                    .or_default()
                    .entry(slot)
                    .or_default()
                    .push(g.clone()),
                // Served here since the core asked: it completes them itself next time.
                Serving::Here | Serving::Loading => out.push((
                    g.clone(),
                    Err(error(
                        codes::COORDINATOR_NOT_AVAILABLE,
                        format!("group {g} moved to this broker"),
                    )),
                )),
                Serving::Nobody => out.push((
                    g.clone(),
                    Err(error(
                        codes::COORDINATOR_NOT_AVAILABLE,
                        format!("no live broker coordinates group {g}"),
                    )),
                )),
            }
        }
        for (node, slots) in elsewhere {
            let partitions = slots
                .keys()
                .map(|&s| (CONSUMER_OFFSETS.to_string(), s))
                .collect();
            let results = self.send(node, markers, &partitions).await;
            for (slot, gs) in slots {
                let result = results
                    .get(&(CONSUMER_OFFSETS.to_string(), slot))
                    .cloned()
                    .unwrap_or_else(|| {
                        Err(error(
                            codes::COORDINATOR_NOT_AVAILABLE,
                            format!("no answer for {CONSUMER_OFFSETS}-{slot}"),
                        ))
                    });
                out.extend(gs.into_iter().map(|g| (g, result.clone())));
            }
        }
        out
    }
}
