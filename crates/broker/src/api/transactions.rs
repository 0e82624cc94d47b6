//! The transaction coordinator's APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
//! TxnOffsetCommit, DescribeTransactions, ListTransactions (InitProducerId has its own
//! file). Each translates the request into a call on the core's `TransactionCoordinator`
//! and its `TxnError` into Kafka's code for the request's version (KIP-588: PRODUCER_FENCED
//! only where the version knows it, INVALID_PRODUCER_EPOCH before).
//!
//! A transactional id this broker does not coordinate (several brokers over PostgreSQL) is
//! refused NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while its slot loads) where Kafka's
//! `TransactionCoordinator` refuses it, per id for DescribeTransactions; TxnOffsetCommit is
//! refused so by the group's coordinator. A TxnOffsetCommit whose group is coordinated here
//! but whose transaction another broker coordinates is kept pending by the group coordinator
//! alone (as Kafka's group coordinator does), until that broker's marker into the group's
//! `__consumer_offsets` partition completes it (see `write_txn_markers`). ListTransactions
//! lists the transactions held here.

use crate::acl::Operation;
use std::ops::RangeInclusive;

use coordinator_core::txn::{TxnError, TV_2};
use coordinator_core::{TopicPartition, TxnOffsetCommitRequest};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::groups::refusal;
use super::offsets::{existing, split_offsets};
use super::registry::Api;
use super::{codes, Call};
use crate::ownership::Serving;
use crate::shutdown::Shutdown;

/// A topic's asked partitions: each index with its partition, if it exists.
type Asked = Vec<(i32, Option<TopicPartition>)>;

/// The transaction coordinator's refusal of a request about transactional id `id` when
/// another broker coordinates it ([`Call::txn_coordinator_error`]). None for the empty id,
/// which Kafka's `TransactionCoordinator` refuses first (INVALID_REQUEST, as the core does
/// here).
pub(super) fn txn_refusal(call: &Call<'_>, id: &str) -> Option<i16> {
    if id.is_empty() {
        return None;
    }
    call.txn_coordinator_error(id)
}

/// What an AddPartitionsToTxn entry asks of the coordinator.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AddMode {
    /// A client's (v0–3): add, transaction version 0.
    Client,
    /// A partition leader's with `VerifyOnly` false (v4+): the implicit add of transaction
    /// version 2 (KIP-890 part 2).
    Add,
    /// A partition leader's with `VerifyOnly` true (v4+): whether each partition is in the
    /// transaction, nothing changed (KIP-890 part 1).
    Verify,
}

/// AddPartitionsToTxn. v0–3 (clients): one transaction, its result per partition. v4–5 (the
/// partition leaders of KIP-890, CLUSTER_ACTION on the cluster or the whole request is
/// CLUSTER_AUTHORIZATION_FAILED at its top level, as Kafka's `KafkaApis`): a batch of
/// transactions, each added (`VerifyOnly` false: transaction version 2's implicit add) or
/// verified (`VerifyOnly` true: each partition NONE if it is in the open transaction, else
/// TRANSACTION_ABORTABLE), with one result per transaction.
async fn add_partitions(
    call: &Call<'_>,
    r: &AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    if call.version < 4 {
        let results = add_to_txn(
            call,
            &r.v3_and_below_transactional_id,
            r.v3_and_below_producer_id.0,
            r.v3_and_below_producer_epoch,
            &r.v3_and_below_topics,
            AddMode::Client,
        )
        .await;
        return AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results);
    }
    if !call.may_cluster(Operation::ClusterAction) {
        return AddPartitionsToTxnResponse::default()
            .with_error_code(codes::CLUSTER_AUTHORIZATION_FAILED);
    }
    let mut results = Vec::with_capacity(r.transactions.len());
    for t in &r.transactions {
        let mode = if t.verify_only {
            AddMode::Verify
        } else {
            AddMode::Add
        };
        let topic_results = add_to_txn(
            call,
            &t.transactional_id,
            t.producer_id.0,
            t.producer_epoch,
            &t.topics,
            mode,
        )
        .await;
        results.push(
            add_partitions_to_txn_response::AddPartitionsToTxnResult::default()
                .with_transactional_id(t.transactional_id.clone())
                .with_topic_results(topic_results),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

/// One transaction of AddPartitionsToTxn: one result per partition. Partitions that do not
/// exist get UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, as Kafka's
/// `KafkaApis` answers; otherwise every partition carries the coordinator's answer (a
/// verification's, per partition).
async fn add_to_txn(
    call: &Call<'_>,
    id: &str,
    producer_id: i64,
    epoch: i16,
    topics: &[add_partitions_to_txn_request::AddPartitionsToTxnTopic],
    mode: AddMode,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut asked: Vec<(TopicName, Asked)> = Vec::new();
    for t in topics {
        let parts = t
            .partitions
            .iter()
            .map(|&p| (p, existing(call, &t.name, p)))
            .collect();
        asked.push((t.name.clone(), parts));
    }
    let missing = asked
        .iter()
        .any(|(_, parts)| parts.iter().any(|(_, tp)| tp.is_none()));
    let answer = |code_of: &dyn Fn(&Option<TopicPartition>) -> i16| {
        asked
            .iter()
            .map(|(name, parts)| {
                AddPartitionsToTxnTopicResult::default()
                    .with_name(name.clone())
                    .with_results_by_partition(
                        parts
                            .iter()
                            .map(|(p, tp)| {
                                AddPartitionsToTxnPartitionResult::default()
                                    .with_partition_index(*p)
                                    .with_partition_error_code(code_of(tp))
                            })
                            .collect(),
                    )
            })
            .collect::<Vec<_>>()
    };
    if missing {
        return answer(&|tp| {
            if tp.is_some() {
                codes::OPERATION_NOT_ATTEMPTED
            } else {
                codes::UNKNOWN_TOPIC_OR_PARTITION
            }
        });
    }
    let partitions: Vec<TopicPartition> = asked
        .iter()
        .flat_map(|(_, parts)| parts.iter().filter_map(|(_, tp)| tp.clone()))
        .collect();
    if let Some(c) = txn_refusal(call, id) {
        return answer(&|_| c);
    }
    let txn = &call.context.txn;
    let fenced_known = call.version >= 2;
    let result = match mode {
        AddMode::Client => {
            txn.add_partitions(id, producer_id, epoch, &partitions)
                .await
        }
        AddMode::Add => {
            txn.add_partitions_with_version(id, producer_id, epoch, &partitions, TV_2)
                .await
        }
        AddMode::Verify => {
            return match txn
                .verify_partitions(id, producer_id, epoch, &partitions)
                .await
            {
                Ok(found) => {
                    let added: std::collections::BTreeSet<TopicPartition> = found
                        .into_iter()
                        .filter_map(|(tp, added)| added.then_some(tp))
                        .collect();
                    answer(&|tp| match tp {
                        Some(tp) if added.contains(tp) => codes::NONE,
                        _ => codes::TRANSACTION_ABORTABLE,
                    })
                }
                Err(e) => {
                    let c = e.kafka_code_for(fenced_known);
                    answer(&|_| c)
                }
            };
        }
    };
    let code = match result {
        Ok(()) => codes::NONE,
        Err(e) => e.kafka_code_for(fenced_known),
    };
    answer(&|_| code)
}

async fn add_offsets(call: &Call<'_>, r: &AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse {
    // Kafka: READ on the group whose offsets join the transaction
    if !call.may_group(Operation::Read, r.group_id.as_str()) {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(codes::GROUP_AUTHORIZATION_FAILED);
    }
    if let Some(c) = txn_refusal(call, &r.transactional_id) {
        return AddOffsetsToTxnResponse::default().with_error_code(c);
    }
    let code = match call
        .context
        .txn
        .add_offsets(
            &r.transactional_id,
            r.producer_id.0,
            r.producer_epoch,
            &r.group_id,
        )
        .await
    {
        Ok(()) => codes::NONE,
        Err(e) => e.kafka_code_for(call.version >= 2),
    };
    AddOffsetsToTxnResponse::default().with_error_code(code)
}

/// EndTxn. v5 is transaction version 2 (KIP-890 part 2): the coordinator bumps the epoch
/// and the answer carries the producer id and epoch the producer goes on with; an error
/// carries −1 for both, as Kafka's. Earlier versions do not bump and have no such fields.
async fn end_txn(call: &Call<'_>, r: &EndTxnRequest) -> EndTxnResponse {
    if let Some(c) = txn_refusal(call, &r.transactional_id) {
        return EndTxnResponse::default().with_error_code(c);
    }
    let transaction_version = if call.version >= 5 { TV_2 } else { 0 };
    match call
        .context
        .txn
        .end_txn_with_version(
            &r.transactional_id,
            r.producer_id.0,
            r.producer_epoch,
            r.committed,
            transaction_version,
        )
        .await
    {
        Ok(next) => EndTxnResponse::default()
            .with_producer_id(ProducerId(next.producer_id))
            .with_producer_epoch(next.epoch),
        Err(e) => EndTxnResponse::default().with_error_code(e.kafka_code_for(call.version >= 2)),
    }
}

/// TxnOffsetCommit: partitions that do not exist get UNKNOWN_TOPIC_OR_PARTITION and, a
/// metadata string above `offset.metadata.max.bytes` OFFSET_METADATA_TOO_LARGE, each alone;
/// the others carry the coordinators' answer.
async fn txn_offset_commit(
    call: &Call<'_>,
    r: &TxnOffsetCommitRequest_,
) -> TxnOffsetCommitResponse {
    let parts = r.topics.iter().enumerate().flat_map(|(t, topic)| {
        topic.partitions.iter().enumerate().map(move |(p, x)| {
            let (offset, epoch) = (x.committed_offset, x.committed_leader_epoch);
            let metadata = x.committed_metadata.as_ref();
            (
                t,
                p,
                topic.name.0.as_str(),
                x.partition_index,
                offset,
                epoch,
                metadata,
            )
        })
    });
    // A negative offset in a transaction stays INVALID_REQUEST (no client sends one).
    let super::offsets::Split { offsets, early, .. } = split_offsets(call, parts, false);
    // Kafka: READ on the group, or every partition is GROUP_AUTHORIZATION_FAILED.
    let group_allowed = call.may_group(Operation::Read, r.group_id.as_str());
    let code = if !group_allowed {
        codes::GROUP_AUTHORIZATION_FAILED
    } else if offsets.is_empty() {
        codes::NONE
    } else if let Some(c) = refusal(call, &r.group_id) {
        // Kafka tells TxnOffsetCommit before v2 COORDINATOR_NOT_AVAILABLE for a loading group.
        if c == codes::COORDINATOR_LOAD_IN_PROGRESS && call.version < 2 {
            codes::COORDINATOR_NOT_AVAILABLE
        } else {
            c
        }
    } else {
        let req = TxnOffsetCommitRequest {
            group_id: r.group_id.to_string(),
            producer_id: r.producer_id.0,
            generation_id: r.generation_id,
            member_id: r.member_id.to_string(),
            group_instance_id: r.group_instance_id.as_ref().map(|s| s.to_string()),
            offsets,
        };
        // The transaction's coordinator is another broker (several brokers over
        // PostgreSQL): as Kafka's group coordinator, take the offsets pending here; that
        // coordinator completes them with a marker into the group's `__consumer_offsets`
        // partition (WriteTxnMarkers).
        let elsewhere = !r.transactional_id.is_empty()
            && matches!(
                call.context.ownership.transaction(&r.transactional_id),
                Serving::Elsewhere(_) | Serving::Nobody
            );
        if elsewhere && call.version >= 5 {
            // v5 adds the group to the transaction at its coordinator, another broker here:
            // not done from this broker (see the README), answered as Kafka's group
            // coordinator answers a verification it could not make, retriable.
            codes::COORDINATOR_NOT_AVAILABLE
        } else if elsewhere {
            match call.context.coordinator.txn_offset_commit(&req).await {
                Ok(()) => codes::NONE,
                Err(e) => txn_offset_code(&TxnError::from(e), call.version),
            }
        } else {
            let txn = &call.context.txn;
            let id = r.transactional_id.as_str();
            let added = if call.version >= 5 {
                // Transaction version 2 (KIP-890 part 2): the group joins the transaction
                // here, as Kafka's group coordinator adds it through AddPartitionsToTxn.
                txn.add_offsets_with_version(
                    id,
                    req.producer_id,
                    r.producer_epoch,
                    &r.group_id,
                    TV_2,
                )
                .await
                .map_err(|e| verified_offsets_code(&e))
            } else {
                Ok(())
            };
            match added {
                Err(code) => code,
                Ok(()) => match txn.txn_offset_commit(id, r.producer_epoch, &req).await {
                    Ok(()) => codes::NONE,
                    Err(e) => txn_offset_code(&e, call.version),
                },
            }
        }
    };
    let topics = r
        .topics
        .iter()
        .enumerate()
        .map(|(t, topic)| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .enumerate()
                        .map(|(p, partition)| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(partition.partition_index)
                                .with_error_code(if group_allowed {
                                    early.get(&(t, p)).copied().unwrap_or(code)
                                } else {
                                    code
                                })
                        })
                        .collect(),
                )
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// The code of a TxnOffsetCommit refusal: the group coordinator's `INVALID_ARGUMENT` (a
/// bound) has no Kafka code and is INVALID_REQUEST here.
fn txn_offset_code(e: &TxnError, version: i16) -> i16 {
    match e {
        TxnError::Group(g) if g.kafka_code().is_none() => codes::INVALID_REQUEST,
        e => e.kafka_code_for(version >= 3),
    }
}

/// The code of TxnOffsetCommit v5 when its group could not be added to the transaction: as
/// Kafka's group coordinator answers a failed verification (PRODUCER_FENCED as
/// INVALID_PRODUCER_EPOCH, the retriable errors as COORDINATOR_NOT_AVAILABLE, which its
/// client retries after looking the coordinator up again).
fn verified_offsets_code(e: &TxnError) -> i16 {
    match super::produce::verification_code(e.kafka_code_for(true)) {
        codes::NOT_ENOUGH_REPLICAS => codes::COORDINATOR_NOT_AVAILABLE,
        code => code,
    }
}

type TxnOffsetCommitRequest_ = kafka_protocol::messages::TxnOffsetCommitRequest;

async fn describe(
    call: &Call<'_>,
    r: &DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let ids: Vec<String> = r.transactional_ids.iter().map(|i| i.to_string()).collect();
    let states = call
        .context
        .txn
        .describe(&ids)
        .await
        .into_iter()
        .map(|(id, d)| {
            // An id coordinated elsewhere: the core's answer is not this broker's to give.
            let d = match txn_refusal(call, &id) {
                Some(c) => Err(c),
                None => d.map_err(|e| e.kafka_code()),
            };
            let state = describe_transactions_response::TransactionState::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(id)));
            match d {
                Ok(d) => {
                    let mut topics: Vec<describe_transactions_response::TopicData> = Vec::new();
                    for tp in &d.partitions {
                        let p = i32::try_from(tp.partition()).unwrap_or(i32::MAX);
                        match topics.last_mut() {
                            Some(t) if t.topic.0.as_str() == tp.topic() => t.partitions.push(p),
                            _ => topics.push(
                                describe_transactions_response::TopicData::default()
                                    .with_topic(TopicName(StrBytes::from_string(
                                        tp.topic().to_string(),
                                    )))
                                    .with_partitions(vec![p]),
                            ),
                        }
                    }
                    state
                        .with_transaction_state(StrBytes::from_static_str(d.state.name()))
                        .with_transaction_timeout_ms(d.timeout_ms)
                        .with_transaction_start_time_ms(d.start_ms)
                        .with_producer_id(ProducerId(d.producer_id))
                        .with_producer_epoch(d.producer_epoch)
                        .with_topics(topics)
                }
                Err(c) => state
                    .with_error_code(c)
                    .with_transaction_state(StrBytes::default())
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
                    .with_transaction_start_time_ms(-1),
            }
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

async fn list(call: &Call<'_>, r: &ListTransactionsRequest) -> ListTransactionsResponse {
    let states: Vec<String> = r.state_filters.iter().map(|s| s.to_string()).collect();
    let pids: Vec<i64> = r.producer_id_filters.iter().map(|p| p.0).collect();
    // v0 has no duration filter: the field decodes as its default, -1.
    let duration = if call.version >= 1 {
        r.duration_filter
    } else {
        -1
    };
    // v2 (KIP-1152): the transactional ids must match a regular expression.
    let pattern = if call.version >= 2 {
        r.transactional_id_pattern.as_deref()
    } else {
        None
    };
    let (listed, unknown) = match call
        .context
        .txn
        .list_matching(&states, &pids, duration, pattern)
        .await
    {
        Ok(found) => found,
        Err(e) => {
            tracing::debug!(reason = %e, "ListTransactions refused");
            return ListTransactionsResponse::default().with_error_code(e.kafka_code());
        }
    };
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown.into_iter().map(StrBytes::from_string).collect())
        .with_transaction_states(
            listed
                .into_iter()
                .map(|t| {
                    list_transactions_response::TransactionState::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_string(
                            t.transactional_id,
                        )))
                        .with_producer_id(ProducerId(t.producer_id))
                        .with_transaction_state(StrBytes::from_static_str(t.state.name()))
                })
                .collect(),
        )
}

pub(crate) struct AddPartitionsToTxn;

impl Api for AddPartitionsToTxn {
    const KEY: ApiKey = ApiKey::AddPartitionsToTxn;
    /// v0–3 are the clients'; v4 is the partition leaders' batched form (KIP-890: several
    /// transactions, `VerifyOnly`), v5 only allows TRANSACTION_ABORTABLE.
    const VERSIONS: RangeInclusive<i16> = 0..=5;
    type Request = AddPartitionsToTxnRequest;

    async fn handle(
        call: &Call<'_>,
        request: AddPartitionsToTxnRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<AddPartitionsToTxnResponse> {
        Some(add_partitions(call, &request).await)
    }
}

pub(crate) struct AddOffsetsToTxn;

impl Api for AddOffsetsToTxn {
    const KEY: ApiKey = ApiKey::AddOffsetsToTxn;
    /// v4 only allows the TRANSACTION_ABORTABLE error (KIP-890), never answered here.
    const VERSIONS: RangeInclusive<i16> = 0..=4;
    type Request = AddOffsetsToTxnRequest;

    async fn handle(
        call: &Call<'_>,
        request: AddOffsetsToTxnRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<AddOffsetsToTxnResponse> {
        Some(add_offsets(call, &request).await)
    }

    fn unsupported(version: i16) -> Option<(i16, AddOffsetsToTxnResponse)> {
        let body = AddOffsetsToTxnResponse::default().with_error_code(codes::UNSUPPORTED_VERSION);
        Some((version, body))
    }
}

pub(crate) struct EndTxn;

impl Api for EndTxn {
    const KEY: ApiKey = ApiKey::EndTxn;
    /// v4 only allows TRANSACTION_ABORTABLE (KIP-890); v5 bumps the epoch at every end
    /// (transaction version 2) and answers the new producer id and epoch.
    const VERSIONS: RangeInclusive<i16> = 0..=5;
    type Request = EndTxnRequest;

    async fn handle(
        call: &Call<'_>,
        request: EndTxnRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<EndTxnResponse> {
        Some(end_txn(call, &request).await)
    }

    fn unsupported(version: i16) -> Option<(i16, EndTxnResponse)> {
        let body = EndTxnResponse::default().with_error_code(codes::UNSUPPORTED_VERSION);
        Some((version, body))
    }
}

pub(crate) struct TxnOffsetCommit;

impl Api for TxnOffsetCommit {
    const KEY: ApiKey = ApiKey::TxnOffsetCommit;
    /// v4 only allows TRANSACTION_ABORTABLE (KIP-890); v5 adds the group to the transaction
    /// itself (transaction version 2, KIP-890 part 2): no AddOffsetsToTxn before it.
    const VERSIONS: RangeInclusive<i16> = 0..=5;
    type Request = TxnOffsetCommitRequest_;

    async fn handle(
        call: &Call<'_>,
        request: TxnOffsetCommitRequest_,
        _shutdown: &mut Shutdown,
    ) -> Option<TxnOffsetCommitResponse> {
        Some(txn_offset_commit(call, &request).await)
    }
}

pub(crate) struct DescribeTransactions;

impl Api for DescribeTransactions {
    const KEY: ApiKey = ApiKey::DescribeTransactions;
    const VERSIONS: RangeInclusive<i16> = 0..=0;
    type Request = DescribeTransactionsRequest;

    async fn handle(
        call: &Call<'_>,
        request: DescribeTransactionsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<DescribeTransactionsResponse> {
        Some(describe(call, &request).await)
    }
}

pub(crate) struct ListTransactions;

impl Api for ListTransactions {
    const KEY: ApiKey = ApiKey::ListTransactions;
    /// v1 filters by duration (KIP-994), v2 by a regular expression on the transactional id
    /// (KIP-1152).
    const VERSIONS: RangeInclusive<i16> = 0..=2;
    type Request = ListTransactionsRequest;

    async fn handle(
        call: &Call<'_>,
        request: ListTransactionsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<ListTransactionsResponse> {
        Some(list(call, &request).await)
    }

    fn unsupported(version: i16) -> Option<(i16, ListTransactionsResponse)> {
        let body = ListTransactionsResponse::default().with_error_code(codes::UNSUPPORTED_VERSION);
        Some((version, body))
    }
}
