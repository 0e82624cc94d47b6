//! Fetch: stored batches from the asked offsets, long-polling until `min_bytes` are there or
//! `max_wait_ms` has passed. The wait sleeps on the log's append signal, never polls.
//!
//! Every answer carries the partition's last stable offset (LSO, see [`crate::producers`]).
//! A read_committed fetch (isolation level 1) is served only the batches that start below
//! the LSO, with the aborted transactions overlapping what it is served; it long-polls on
//! those bytes only, so uncommitted records past the LSO do not answer it early, while the
//! marker that moves the LSO (an append, which wakes the wait) does.
//!
//! From v13 topics are named by id (KIP-516), in the request and in the answer: the ids are
//! resolved once per request, and a partition of an unknown id gets UNKNOWN_TOPIC_ID (100),
//! as in Kafka. v12's diverging-epoch field and v15's replica state concern followers and
//! are left at their defaults.
//!
//! A partition this broker does not lead (several brokers over PostgreSQL) answers
//! NOT_LEADER_OR_FOLLOWER without being read; from v16 with the current leader and, at the
//! top, that broker's endpoint (KIP-951), as Kafka's `KafkaApis.handleFetchRequest` fills
//! them (only from v16, although the current-leader field exists from v12).
//!
//! Fetch sessions (KIP-227) are kept per connection, as [`super::fetch_session`] says.

use crate::acl::Operation;
use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use coordinator_core::Clock;
use coordinator_core::{LogError, TopicPartition};
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, ProducerId};
use kafka_protocol::protocol::StrBytes;
use partition_log::Batch;
use tokio::time::Instant;
use uuid::Uuid;

use super::fetch_session::Plan;
use super::produce::{log_code, not_led};
use super::records::encode_records;
use super::registry::Api;
use super::{codes, Call};
use crate::context::WallClock;
use crate::shutdown::Shutdown;

/// Kafka's `READ_COMMITTED` isolation level.
pub(super) const READ_COMMITTED: i8 = 1;
/// The first version that names topics by id.
const TOPIC_IDS_FROM: i16 = 13;

async fn handle(call: &Call<'_>, request: FetchRequest, shutdown: &mut Shutdown) -> FetchResponse {
    let sessions = call.session.fetch_sessions();
    let plan = sessions.plan(call.version, &request);
    let response = match &plan {
        Plan::Refused(_) => FetchResponse::default(),
        Plan::Full { .. } => serve(call, &request, shutdown).await,
        Plan::Incremental { request, .. } => serve(call, request, shutdown).await,
    };
    sessions.finish(call.version, &plan, &request, response)
}

/// Reads the asked partitions, long-polling until `min_bytes` are there, an error, the
/// broker's shutdown or `max_wait_ms`.
async fn serve(call: &Call<'_>, request: &FetchRequest, shutdown: &mut Shutdown) -> FetchResponse {
    let max_wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    let deadline = Instant::now() + max_wait;
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    let names = topic_names(call, request).await;
    // Subscribe before the first read, so an append between the read and the wait is seen.
    let mut appends = call.context.log.appends();
    loop {
        appends.borrow_and_update();
        let (response, bytes, errors) = read(call, request, &names).await;
        if bytes >= min_bytes || errors || shutdown.is_shutdown() || Instant::now() >= deadline {
            return response;
        }
        tokio::select! {
            changed = appends.changed() => {
                if changed.is_err() {
                    return response;
                }
            }
            _ = tokio::time::sleep_until(deadline) => {}
            _ = shutdown.recv() => {}
        }
    }
}

/// The name of each asked topic, in the request's order: from v13 the topic whose id is
/// asked for (`None` for an unknown id), before it the name the request gives.
async fn topic_names(call: &Call<'_>, request: &FetchRequest) -> Vec<Option<String>> {
    if call.version < TOPIC_IDS_FROM {
        return request
            .topics
            .iter()
            .map(|t| Some(t.topic.0.to_string()))
            .collect();
    }
    names_of_ids(call, request.topics.iter().map(|t| t.topic_id)).await
}

/// The name of the topic of each of `ids`, in their order (`None` for an id no topic has),
/// the log's topics listed once: how the APIs that name topics by id (Fetch v13+,
/// OffsetCommit and OffsetFetch v10+) resolve them.
pub(super) async fn names_of_ids(
    call: &Call<'_>,
    ids: impl IntoIterator<Item = Uuid>,
) -> Vec<Option<String>> {
    let context = call.context;
    let known: HashMap<Uuid, String> = match context.log.topics().await {
        Ok(topics) => topics
            .into_iter()
            .map(|(name, _)| (context.topic_id(&name), name))
            .collect(),
        Err(_) => HashMap::new(),
    };
    ids.into_iter().map(|id| known.get(&id).cloned()).collect()
}

/// One pass over the asked partitions: the response, the record bytes in it, and whether
/// any partition has an error (which makes Kafka answer at once).
async fn read(
    call: &Call<'_>,
    request: &FetchRequest,
    names: &[Option<String>],
) -> (FetchResponse, usize, bool) {
    let read_committed = request.isolation_level == READ_COMMITTED;
    let mut pass = Pass {
        budget: usize::try_from(request.max_bytes).unwrap_or(0),
        total: 0,
        errors: false,
    };
    let mut responses = Vec::with_capacity(request.topics.len());
    let mut endpoints: Vec<NodeEndpoint> = Vec::new();
    for (topic, name) in request.topics.iter().zip(names) {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let answer = PartitionData::default()
                .with_partition_index(p.partition)
                .with_aborted_transactions(read_committed.then(Vec::new));
            partitions.push(match name {
                Some(name) if !call.may_topic(Operation::Read, name) => {
                    pass.errors = true;
                    answer
                        .with_error_code(codes::TOPIC_AUTHORIZATION_FAILED)
                        .with_high_watermark(-1)
                }
                Some(name) => pass.partition(call, name, p, read_committed, answer).await,
                None => {
                    pass.errors = true;
                    answer
                        .with_error_code(codes::UNKNOWN_TOPIC_ID)
                        .with_high_watermark(-1)
                }
            });
        }
        if let (Some(name), true) = (name, call.version >= 16) {
            current_leaders(call, name, &mut partitions, &mut endpoints);
        }
        let response = FetchableTopicResponse::default().with_partitions(partitions);
        responses.push(if call.version < TOPIC_IDS_FROM {
            response.with_topic(topic.topic.clone())
        } else {
            response.with_topic_id(topic.topic_id)
        });
    }
    (
        FetchResponse::default()
            .with_responses(responses)
            .with_node_endpoints(endpoints),
        pass.total,
        pass.errors,
    )
}

/// Fills the current leader (leader epoch −1: unknown) of each of `topic`'s partitions
/// answered NOT_LEADER_OR_FOLLOWER and adds the leader's endpoint to `endpoints` once, as
/// Kafka's `KafkaApis.handleFetchRequest` does from v16. A partition without a live leader
/// keeps leader −1.
fn current_leaders(
    call: &Call<'_>,
    topic: &str,
    partitions: &mut [PartitionData],
    endpoints: &mut Vec<NodeEndpoint>,
) {
    for p in partitions {
        if p.error_code != codes::NOT_LEADER_OR_FOLLOWER {
            continue;
        }
        let Some(node) = call.other_leader(topic, p.partition_index) else {
            continue;
        };
        p.current_leader = LeaderIdAndEpoch::default().with_leader_id(node.node_id.into());
        if !endpoints.iter().any(|e| e.node_id.0 == node.node_id) {
            endpoints.push(
                NodeEndpoint::default()
                    .with_node_id(node.node_id.into())
                    .with_host(StrBytes::from_string(node.host))
                    .with_port(node.port),
            );
        }
    }
}

/// What one pass has used and seen so far.
struct Pass {
    /// The response's byte budget left.
    budget: usize,
    /// The record bytes in the response.
    total: usize,
    /// Whether a partition has an error.
    errors: bool,
}

impl Pass {
    async fn partition(
        &mut self,
        call: &Call<'_>,
        topic: &str,
        p: &FetchPartition,
        read_committed: bool,
        answer: PartitionData,
    ) -> PartitionData {
        let Ok(index) = u32::try_from(p.partition) else {
            self.errors = true;
            return answer
                .with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION)
                .with_high_watermark(-1);
        };
        let tp = TopicPartition::new(topic, index);
        if let Some(code) = not_led(call, &tp).await {
            self.errors = true;
            return answer.with_error_code(code).with_high_watermark(-1);
        }
        let limit = usize::try_from(p.partition_max_bytes)
            .unwrap_or(0)
            .min(self.budget);
        let read = self
            .read(call, &tp, p.fetch_offset, limit, read_committed)
            .await;
        match read {
            Ok(read) => match concat(&read.batches) {
                Ok(records) => {
                    self.total = self.total.saturating_add(records.len());
                    self.budget = self.budget.saturating_sub(records.len());
                    let answer = match read.aborted {
                        Some(aborted) => answer.with_aborted_transactions(Some(aborted)),
                        None => answer,
                    };
                    answer
                        .with_high_watermark(read.high_watermark)
                        .with_last_stable_offset(read.last_stable)
                        .with_log_start_offset(read.log_start)
                        .with_records(Some(records))
                }
                Err(reason) => {
                    tracing::error!(partition = %tp, %reason, "cannot serve records");
                    self.errors = true;
                    answer.with_error_code(codes::UNKNOWN_SERVER_ERROR)
                }
            },
            Err(e) => {
                self.errors = true;
                let (start, hw) = match &e {
                    LogError::OffsetOutOfRange(r) => (r.log_start, r.visible_end),
                    _ => (-1, -1),
                };
                answer
                    .with_error_code(log_code(&e))
                    .with_high_watermark(hw)
                    .with_last_stable_offset(hw)
                    .with_log_start_offset(start)
            }
        }
    }
}

/// What one partition's read found.
struct Read {
    log_start: i64,
    high_watermark: i64,
    last_stable: i64,
    /// The batches to serve.
    batches: Vec<Arc<Batch>>,
    /// For read_committed, the aborted transactions overlapping the served batches.
    aborted: Option<Vec<AbortedTransaction>>,
}

impl Pass {
    /// Reads `tp` from `offset` (up to `limit` bytes; only the bounds once the response is
    /// full) while its producer state is locked, so the LSO matches the batches read.
    async fn read(
        &self,
        call: &Call<'_>,
        tp: &TopicPartition,
        offset: i64,
        limit: usize,
        read_committed: bool,
    ) -> Result<Read, LogError> {
        let context = call.context;
        let log = &*context.log;
        let now_ms = i64::try_from(WallClock.now_ms()).unwrap_or(i64::MAX);
        let state = context.producers.lock(log, tp, now_ms).await?;
        let (log_start, high_watermark, mut batches) = if limit == 0 && self.total > 0 {
            // The response is full: report the bounds, send no records.
            let (start, hw) = log.bounds(tp).await?;
            (start, hw, Vec::new())
        } else {
            let r = log.read_batches(tp, offset, limit.max(1)).await?;
            (r.log_start, r.high_watermark, r.batches)
        };
        let last_stable = state.last_stable_offset(high_watermark);
        let aborted = read_committed.then(|| {
            batches.retain(|b| b.base_offset() < last_stable);
            let Some(last) = batches.last().map(|b| b.last_offset()) else {
                return Vec::new();
            };
            state
                .aborted_between(offset, last)
                .into_iter()
                .map(|a| {
                    AbortedTransaction::default()
                        .with_producer_id(ProducerId(a.producer_id))
                        .with_first_offset(a.first_offset)
                })
                .collect()
        });
        Ok(Read {
            log_start,
            high_watermark,
            last_stable,
            batches,
            aborted,
        })
    }
}

/// The batches' wire bytes back to back. A single stored batch is handed out without a copy.
pub(super) fn concat(batches: &[Arc<Batch>]) -> Result<Bytes, String> {
    if let [batch] = batches {
        if let Some(encoded) = batch.encoded() {
            return Ok(Bytes::from_owner(encoded.clone()));
        }
    }
    let mut out = BytesMut::new();
    for batch in batches {
        match batch.encoded() {
            Some(encoded) => out.extend_from_slice(encoded),
            None => out.extend_from_slice(&encode_records(batch.records())?),
        }
    }
    Ok(out.freeze())
}

pub(crate) struct Fetch;

impl Api for Fetch {
    const KEY: ApiKey = ApiKey::Fetch;
    /// v13+ name topics by id; v17 (KIP-853: a follower's directory id) and v18 (a follower's
    /// high watermark) add fields only followers send, so a consumer is served as at v16.
    const VERSIONS: RangeInclusive<i16> = 4..=18;
    type Request = FetchRequest;

    async fn handle(
        call: &Call<'_>,
        request: FetchRequest,
        shutdown: &mut Shutdown,
    ) -> Option<FetchResponse> {
        Some(handle(call, request, shutdown).await)
    }

    /// Fetch carries a top-level error from v7.
    fn unsupported(version: i16) -> Option<(i16, FetchResponse)> {
        (version >= 7).then(|| {
            let body = FetchResponse::default().with_error_code(codes::UNSUPPORTED_VERSION);
            (version, body)
        })
    }
}
