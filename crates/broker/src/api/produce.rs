//! Produce: check each partition's batches, append them with the producer's bytes, answer
//! with the first offset. `acks=0` gets no answer, as in Kafka.
//!
//! A batch of an idempotent or transactional producer (a producer id >= 0) is checked
//! against the partition's producer state ([`crate::producers`]) and appended while that
//! state is locked: its epoch, its sequence, and whether it repeats one of the producer's
//! last batches (then it is answered with the original offset and not appended again). Such
//! a partition's record set must be exactly one batch, as Kafka requires of every Produce
//! from v3. Transactional batches need the request's transactional id: without it the whole
//! request is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka does.
//!
//! From v12 (transaction version 2, KIP-890 part 2) a transactional batch adds its partition
//! to the producer's transaction, as Kafka's partition leader does through the transaction
//! coordinator (AddPartitionsToTxn v4+ with `VerifyOnly` false), unless the producer's
//! transaction is open on the partition already; a refusal of the coordinator refuses the
//! partition (PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, the retriable coordinator errors as
//! NOT_ENOUGH_REPLICAS, as Kafka's `ReplicaManager` maps them). Below v12 the partition is
//! not checked to be in the transaction (KIP-890 part 1's verification is not done).
//!
//! A partition this broker does not lead (several brokers over PostgreSQL) answers
//! NOT_LEADER_OR_FOLLOWER and nothing of it is appended; from v10 with the current leader
//! and, at the top, that broker's endpoint (KIP-951), as Kafka's `KafkaApis` answers.

use crate::acl::Operation;
use std::ops::RangeInclusive;

use coordinator_core::Clock;
use coordinator_core::{LogError, TopicPartition};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{
    LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use tracing::debug;

use super::records::{
    check_batches, has_transactional, stamp_base_offset, CheckedBatch, Inflation, Refused,
};
use super::registry::Api;
use super::transactions::txn_refusal;
use super::{codes, Call};
use crate::context::WallClock;
use crate::ownership::Node;
use crate::producers::ProducerError;
use crate::shutdown::Shutdown;
use coordinator_core::txn::TV_2;

async fn handle(call: &Call<'_>, request: ProduceRequest) -> Option<ProduceResponse> {
    if request.transactional_id.is_none() && has_transactional_records(&request) {
        debug!("transactional records without a transactional id: request refused");
        let responses = refuse_all(
            request.topic_data,
            codes::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        );
        return (request.acks != 0).then(|| ProduceResponse::default().with_responses(responses));
    }
    let config = &call.context.config;
    let mut inflation = Inflation {
        per_batch: config.max_decompressed_batch_bytes,
        left: config.max_decompressed_request_bytes,
    };
    let names = topic_names(call, &request.topic_data).await;
    let mut responses = Vec::with_capacity(request.topic_data.len());
    // The topic of each response, by name (from v13 the response names it by id only).
    let mut answered = Vec::with_capacity(request.topic_data.len());
    for (topic, name) in request.topic_data.into_iter().zip(names) {
        let Some(name) = name else {
            // v13+: an id no topic has; each partition answers UNKNOWN_TOPIC_ID, as Kafka's
            // `KafkaApis.handleProduceRequest` does before its authorization check.
            responses.extend(refuse_all(vec![topic], codes::UNKNOWN_TOPIC_ID));
            answered.push(String::new());
            continue;
        };
        if !call.may_topic(Operation::Write, &name) {
            // Kafka: each partition of a topic the principal may not write answers
            // TOPIC_AUTHORIZATION_FAILED; nothing of it is appended.
            responses.extend(refuse_all(vec![topic], codes::TOPIC_AUTHORIZATION_FAILED));
            answered.push(name);
            continue;
        }
        if crate::context::is_internal_topic(&name) {
            // Kafka's `ReplicaManager.appendToLocalLog`: "Cannot append to internal topic".
            debug!(topic = %name, "produce to an internal topic refused");
            responses.extend(refuse_all(vec![topic], codes::INVALID_TOPIC_EXCEPTION));
            answered.push(name);
            continue;
        }
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let txn = request.transactional_id.as_ref().map(|t| t.0.as_str());
            partitions.push(append(call, &name, data, &mut inflation, txn).await);
        }
        // The request names the topic either way (by name to v12, by id from v13): the
        // answer names it the same way, the other field left at its default.
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partitions),
        );
        answered.push(name);
    }
    // v10+ (KIP-951): each partition refused for its leader names the current one.
    let endpoints = if call.version >= 10 {
        current_leaders(&mut responses, &answered, |topic, partition| {
            call.other_leader(topic, partition)
        })
    } else {
        Vec::new()
    };
    (request.acks != 0).then(|| {
        ProduceResponse::default()
            .with_responses(responses)
            .with_node_endpoints(endpoints)
    })
}

/// Fills the current leader (`leader_of`, leader epoch −1: unknown) of each partition
/// answered NOT_LEADER_OR_FOLLOWER and returns the leaders' endpoints, each node once, as
/// Kafka's `KafkaApis.handleProduceRequest` does from v10. A partition without a live leader
/// keeps leader −1.
fn current_leaders(
    responses: &mut [TopicProduceResponse],
    names: &[String],
    leader_of: impl Fn(&str, i32) -> Option<Node>,
) -> Vec<NodeEndpoint> {
    let mut endpoints: Vec<NodeEndpoint> = Vec::new();
    for (topic, name) in responses.iter_mut().zip(names) {
        for p in &mut topic.partition_responses {
            if p.error_code != codes::NOT_LEADER_OR_FOLLOWER {
                continue;
            }
            let Some(node) = leader_of(name, p.index) else {
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
    endpoints
}

/// The topic each entry of the request names: to v12 by name, from v13 (KIP-516) by id
/// (`None` for an id no topic has).
async fn topic_names(call: &Call<'_>, topics: &[TopicProduceData]) -> Vec<Option<String>> {
    if call.version < TOPIC_IDS_FROM {
        return topics.iter().map(|t| Some(t.name.0.to_string())).collect();
    }
    let mut names = Vec::with_capacity(topics.len());
    for t in topics {
        names.push(call.context.topic_by_id(t.topic_id).await);
    }
    names
}

/// The first Produce version that names topics by id (KIP-516).
const TOPIC_IDS_FROM: i16 = 13;

/// `answer` with `reason` as its error message, from v8 (KIP-467) where the field exists.
fn with_message(
    call: &Call<'_>,
    answer: PartitionProduceResponse,
    reason: String,
) -> PartitionProduceResponse {
    if call.version >= 8 {
        answer.with_error_message(Some(StrBytes::from_string(reason)))
    } else {
        answer
    }
}

/// Whether any partition of the request holds a transactional batch.
fn has_transactional_records(request: &ProduceRequest) -> bool {
    request.topic_data.iter().any(|t| {
        t.partition_data
            .iter()
            .any(|p| p.records.as_deref().is_some_and(has_transactional))
    })
}

/// Every partition of the request answered with `code`.
fn refuse_all(topics: Vec<TopicProduceData>, code: i16) -> Vec<TopicProduceResponse> {
    topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partition_data
                .iter()
                .map(|p| {
                    PartitionProduceResponse::default()
                        .with_index(p.index)
                        .with_error_code(code)
                        .with_base_offset(-1)
                        .with_log_append_time_ms(-1)
                        .with_log_start_offset(-1)
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partitions)
        })
        .collect()
}

/// Checks one partition's batches and appends them with the producer's bytes.
async fn append(
    call: &Call<'_>,
    topic: &str,
    data: PartitionProduceData,
    inflation: &mut Inflation,
    transactional_id: Option<&str>,
) -> PartitionProduceResponse {
    let log = &call.context.log;
    let answer = PartitionProduceResponse::default().with_index(data.index);
    let Ok(partition) = u32::try_from(data.index) else {
        return answer.with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION);
    };
    let tp = TopicPartition::new(topic, partition);
    if let Err(e) = log.bounds(&tp).await {
        return answer.with_error_code(log_code(&e));
    }
    // A partition that exists but is led elsewhere: nothing is checked or appended.
    if let Some(code) = call.leader_error(topic, data.index) {
        return answer.with_error_code(code);
    }
    let checked = match data.records.as_ref() {
        None => Err(Refused::Corrupt("the record set is null".into())),
        Some(raw) => check_batches(raw, inflation).and_then(|batches| {
            if batches.len() > 1 && batches.iter().any(|b| b.header.has_producer_id()) {
                Err(Refused::Corrupt(format!(
                    "{} batches with a producer id: an idempotent or transactional \
                     producer's record set must be exactly one batch",
                    batches.len()
                )))
            } else {
                Ok(batches)
            }
        }),
    };
    let checked = checked.and_then(|batches| {
        if batches.iter().any(|b| b.keyless) && call.context.topic_configs.compacts(topic) {
            // Kafka's `LogValidator.validateKey`.
            Err(Refused::Corrupt(format!(
                "Compacted topic cannot accept message without key in topic partition {tp}."
            )))
        } else {
            Ok(batches)
        }
    });
    let batches = match checked {
        Ok(batches) => batches,
        Err(Refused::TooLarge(reason)) => {
            debug!(partition = %tp, %reason, "produce refused");
            return with_message(
                call,
                answer.with_error_code(codes::MESSAGE_TOO_LARGE),
                reason,
            );
        }
        Err(Refused::Corrupt(reason)) => {
            debug!(partition = %tp, %reason, "produce refused");
            // CORRUPT_MESSAGE at every version: Kafka's INVALID_RECORD (87, v8+) is not told
            // apart (docs/transactions.md); v8+ answers carry the reason.
            return with_message(call, answer.with_error_code(codes::CORRUPT_MESSAGE), reason);
        }
    };
    if batches.iter().any(|b| b.header.has_producer_id()) {
        let transactional = batches.iter().find(|b| b.header.transactional);
        if let (true, Some(id), Some(batch)) = (call.version >= 12, transactional_id, transactional)
        {
            if let Some(code) = implicit_add(call, &tp, id, &batch.header).await {
                debug!(partition = %tp, code, "transactional batch refused: partition not added");
                return answer.with_error_code(code);
            }
        }
        return match append_idempotent(call, &tp, batches).await {
            Ok(base) => accepted(call, &tp, answer, base).await,
            Err(e) => {
                debug!(partition = %tp, reason = %e, "produce refused");
                answer.with_error_code(e.code())
            }
        };
    }
    let mut first = None;
    for batch in batches {
        let bytes = batch.bytes;
        let encode = Box::new(move |base| stamp_base_offset(&bytes, base));
        match log
            .append_encoded_timestamps(&tp, &batch.timestamps, encode)
            .await
        {
            Ok(base) => {
                first.get_or_insert(base);
            }
            Err(e) => return answer.with_error_code(log_code(&e)),
        }
    }
    accepted(call, &tp, answer, first.unwrap_or(-1)).await
}

/// The answer to an accepted append at `base`, with the log start offset.
async fn accepted(
    call: &Call<'_>,
    tp: &TopicPartition,
    answer: PartitionProduceResponse,
    base: i64,
) -> PartitionProduceResponse {
    let log_start = call
        .context
        .log
        .bounds(tp)
        .await
        .map_or(-1, |(start, _)| start);
    answer
        .with_base_offset(base)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(log_start)
}

/// Checks the one batch of an idempotent or transactional producer against the partition's
/// producer state and appends it, holding the state's lock across both; returns its base
/// offset (the original's, for a duplicate, which is not appended again).
async fn append_idempotent(
    call: &Call<'_>,
    tp: &TopicPartition,
    mut batches: Vec<CheckedBatch>,
) -> Result<i64, ProducerError> {
    let Some(batch) = batches.pop() else {
        return Err(ProducerError::Log(LogError::InvalidArgument {
            what: "batch",
            reason: "no batch to append".into(),
        }));
    };
    let context = call.context;
    let now_ms = i64::try_from(WallClock.now_ms()).unwrap_or(i64::MAX);
    let mut state = context.producers.lock(&*context.log, tp, now_ms).await?;
    let header = batch.header;
    if let Some(duplicate) = state.check_data(&header)? {
        debug!(partition = %tp, producer = header.producer_id, "duplicate batch answered with its offset");
        return Ok(duplicate.first_offset);
    }
    let bytes = batch.bytes;
    let encode = Box::new(move |base| stamp_base_offset(&bytes, base));
    let base = context
        .log
        .append_encoded_timestamps(tp, &batch.timestamps, encode)
        .await?;
    state.apply_data(&header, base);
    Ok(base)
}

/// Produce v12+'s implicit add of `tp` to the transaction of `id` (transaction version 2,
/// KIP-890 part 2): nothing if the producer's transaction is open on `tp` already, else the
/// transaction coordinator adds it. `Some(code)` refuses the partition.
///
/// A transactional id coordinated by another broker (several brokers over PostgreSQL) is
/// not added from here: the partition is refused NOT_ENOUGH_REPLICAS, what Kafka's leader
/// answers when it cannot reach the coordinator (the producer retries; see the README).
async fn implicit_add(
    call: &Call<'_>,
    tp: &TopicPartition,
    id: &str,
    header: &crate::producers::BatchHeader,
) -> Option<i16> {
    let context = call.context;
    let now_ms = i64::try_from(WallClock.now_ms()).unwrap_or(i64::MAX);
    {
        // A log error is left to the append, which meets it again.
        let state = context
            .producers
            .lock(&*context.log, tp, now_ms)
            .await
            .ok()?;
        if state.has_open_txn(header.producer_id, header.producer_epoch) {
            return None;
        }
    }
    if let Some(code) = txn_refusal(call, id) {
        return Some(verification_code(code));
    }
    match context
        .txn
        .add_partitions_with_version(
            id,
            header.producer_id,
            header.producer_epoch,
            std::slice::from_ref(tp),
            TV_2,
        )
        .await
    {
        Ok(()) => None,
        Err(e) => Some(verification_code(e.kafka_code_for(true))),
    }
}

/// The code a produce gets for the transaction coordinator's refusal of its partition, as
/// Kafka's `AddPartitionsToTxnManager` and `ReplicaManager` map it: PRODUCER_FENCED is
/// INVALID_PRODUCER_EPOCH (what producers expect of a partition), the retriable coordinator
/// errors NOT_ENOUGH_REPLICAS (retried without a metadata refresh).
pub(super) fn verification_code(code: i16) -> i16 {
    match code {
        codes::PRODUCER_FENCED => codes::INVALID_PRODUCER_EPOCH,
        codes::CONCURRENT_TRANSACTIONS
        | codes::COORDINATOR_NOT_AVAILABLE
        | codes::NOT_COORDINATOR
        | codes::COORDINATOR_LOAD_IN_PROGRESS => codes::NOT_ENOUGH_REPLICAS,
        other => other,
    }
}

pub(super) fn log_code(e: &LogError) -> i16 {
    e.kafka_code().unwrap_or(codes::UNKNOWN_SERVER_ERROR)
}

/// The refusal of `tp` when this broker does not lead it (several brokers over PostgreSQL):
/// NOT_LEADER_OR_FOLLOWER, or the log's UNKNOWN_TOPIC_OR_PARTITION for a partition that does
/// not exist, in the order of Kafka's `ReplicaManager.getPartitionOrError` (only its bounds
/// are read, to tell the two apart). `None`: this broker leads `tp`.
pub(super) async fn not_led(call: &Call<'_>, tp: &TopicPartition) -> Option<i16> {
    let index = i32::try_from(tp.partition()).unwrap_or(i32::MAX);
    let code = call.leader_error(tp.topic(), index)?;
    Some(match call.context.log.bounds(tp).await {
        Ok(_) => code,
        Err(e) => log_code(&e),
    })
}

pub(crate) struct Produce;

impl Api for Produce {
    const KEY: ApiKey = ApiKey::Produce;
    /// Advertised from 0 although kafka-protocol 0.18 decodes from 3 only: librdkafka derives
    /// its compression features from the advertised Produce range and silently stops
    /// compressing when the minimum is 3 (Kafka 4 does the same, KAFKA-18659). A v0-2
    /// Produce closes the connection, as an undecodable request does. v11 only allows the
    /// TRANSACTION_ABORTABLE error (never answered here), v12 adds a transactional batch's
    /// partition to its transaction (transaction version 2, KIP-890 part 2), v13 names topics
    /// by id (KIP-516).
    const VERSIONS: RangeInclusive<i16> = 0..=13;
    const DECODABLE_MIN: i16 = 3;
    type Request = ProduceRequest;

    async fn handle(
        call: &Call<'_>,
        request: ProduceRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<ProduceResponse> {
        handle(call, request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(index: i32, code: i16) -> PartitionProduceResponse {
        PartitionProduceResponse::default()
            .with_index(index)
            .with_error_code(code)
    }

    #[test]
    fn refused_partitions_name_their_leader_and_each_leader_is_listed_once() {
        let mut responses = vec![TopicProduceResponse::default()
            .with_name(StrBytes::from_static_str("t").into())
            .with_partition_responses(vec![
                partition(0, codes::NOT_LEADER_OR_FOLLOWER),
                partition(1, codes::NONE),
                partition(2, codes::NOT_LEADER_OR_FOLLOWER),
                partition(3, codes::NOT_LEADER_OR_FOLLOWER),
            ])];
        // Partitions 0 and 2 are led by node 2, 3 by nobody alive.
        let endpoints = current_leaders(&mut responses, &["t".to_string()], |topic, p| {
            assert_eq!(topic, "t");
            (p != 3).then(|| Node {
                node_id: 2,
                host: "b2".into(),
                port: 9093,
            })
        });
        let parts = &responses[0].partition_responses;
        assert_eq!(parts[0].current_leader.leader_id.0, 2);
        assert_eq!(parts[0].current_leader.leader_epoch, -1);
        assert_eq!(parts[1].current_leader.leader_id.0, -1);
        assert_eq!(parts[2].current_leader.leader_id.0, 2);
        assert_eq!(parts[3].current_leader.leader_id.0, -1);
        assert_eq!(endpoints.len(), 1);
        assert_eq!(endpoints[0].node_id.0, 2);
        assert_eq!(endpoints[0].host.as_str(), "b2");
        assert_eq!(endpoints[0].port, 9093);
    }
}
