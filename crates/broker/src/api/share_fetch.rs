//! Share groups' records (KIP-932), step 2: ShareFetch (78) and ShareAcknowledge (79) at
//! Kafka 4.2's version 1, in memory. A member fetches in a share session (epoch 0 opens it,
//! each request carries the next epoch, −1 closes it); the leader of each partition hands out
//! records under an acquisition lock (the core's [`SharePartition`]) and takes the member's
//! acknowledgements, piggybacked on ShareFetch or sent alone. See [`crate::share`].

use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use coordinator_core::{
    AcknowledgeType, AcquiredRange, Clock, ShareAutoOffsetReset, ShareGroupSettings,
    ShareIsolationLevel, SharePartition, SharePartitionConfig, TopicPartition,
};
use kafka_protocol::messages::share_acknowledge_response as ack_response;
use kafka_protocol::messages::share_fetch_response as fetch_response;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use partition_log::Batch;
use tokio::time::Instant;
use uuid::Uuid;

use super::fetch::names_of_ids;
use super::produce::not_led;
use super::registry::Api;
use super::{codes, Call};
use crate::acl::Operation;
use crate::context::WallClock;
use crate::producers::{AbortedTxn, BatchHeader};
use crate::share::{SessionRefusal, FINAL_EPOCH, INITIAL_EPOCH, INVALID_RECORD_STATE};
use crate::shutdown::Shutdown;

/// Records a ShareFetch hands out when it names no `max_records` (the Java client's
/// `max.poll.records` default).
const DEFAULT_MAX_RECORDS: usize = 500;

/// The most bytes one ShareFetch answer carries when it names no positive `max_bytes`.
const DEFAULT_MAX_BYTES: usize = 50 * 1024 * 1024;

/// How often a waiting ShareFetch looks again for records given back (a lock that expired,
/// a release by another member), which no append announces.
const RECHECK: Duration = Duration::from_millis(100);

/// The share-partition limits of `group`: its `share.record.lock.duration.ms`,
/// `share.delivery.count.limit` and `share.partition.max.record.locks`, or the broker's.
fn partition_config(call: &Call<'_>, group: &str) -> SharePartitionConfig {
    call.context
        .coordinator
        .share_settings(group)
        .partition_config()
}

/// Where a new share-partition of `group` starts (Kafka's `share.auto.offset.reset`):
/// the log start, the high watermark, or the first record at most the duration old (the high
/// watermark when none is).
async fn start_offset(
    call: &Call<'_>,
    group: &str,
    tp: &TopicPartition,
    log_start: i64,
    high_watermark: i64,
) -> Result<i64, i16> {
    match call
        .context
        .coordinator
        .share_settings(group)
        .auto_offset_reset
    {
        ShareAutoOffsetReset::Earliest => Ok(log_start),
        ShareAutoOffsetReset::Latest => Ok(high_watermark),
        ShareAutoOffsetReset::ByDuration { ms } => {
            let now = i64::try_from(WallClock.now_ms()).unwrap_or(i64::MAX);
            let since = now.saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX));
            let found = call
                .context
                .log
                .offset_for_timestamp(tp, since)
                .await
                .map_err(|e| super::produce::log_code(&e))?;
            Ok(found.map_or(high_watermark, |(offset, _)| offset))
        }
    }
}

/// Closes the share sessions opened on the connection of `session`, which is closing, and
/// gives back what their members hold (Kafka closes a share session with its connection).
pub(crate) async fn close_connection(
    context: &crate::context::Context,
    session: &crate::auth::Session,
) {
    for (group, member) in session.take_share_sessions() {
        let config = context
            .coordinator
            .share_settings(&group)
            .partition_config();
        let released = context
            .share
            .close_opened_on(&group, &member, session.id(), |sp| {
                sp.release_member(&member, &config);
            });
        if let Err(e) = context.share.keep(&group, &released).await {
            tracing::warn!(group, error = %e, "the share-partitions' state could not be kept");
        }
    }
}

/// Keeps `group`'s share-partitions of `tps` (see [`crate::share`]); KAFKA_STORAGE_ERROR when
/// that failed (the acknowledgements stay applied in memory and are written with the next
/// change; a restart before then delivers those records again).
async fn keep(call: &Call<'_>, group: &str, mut tps: Vec<TopicPartition>) -> Result<(), i16> {
    tps.sort();
    tps.dedup();
    call.context.share.keep(group, &tps).await.map_err(|e| {
        tracing::warn!(group, error = %e, "the share-partitions' state could not be kept");
        codes::KAFKA_STORAGE_ERROR
    })
}

fn now(call: &Call<'_>) -> u64 {
    call.context.coordinator.clock().now_ms()
}

/// [`ShareState::ensure_read`](crate::share::ShareState::ensure_read) of `group`'s
/// share-partition of `tp` (several brokers over one database: its last leader's state);
/// COORDINATOR_NOT_AVAILABLE when the database cannot be read (the client retries).
async fn read(call: &Call<'_>, group: &str, tp: &TopicPartition) -> Result<(), i16> {
    call.context
        .share
        .ensure_read(group, tp)
        .await
        .map_err(|e| {
            tracing::warn!(group, partition = %tp, error = %e, "cannot read the share state");
            codes::COORDINATOR_NOT_AVAILABLE
        })
}

/// One acknowledgement batch as the wire gives it.
struct AckBatch {
    first: i64,
    last: i64,
    types: Vec<i8>,
}

/// Applies `member`'s acknowledgements of `tp`; the partition's acknowledge error code (the
/// first refusal; the batches before it stay applied, each batch is all or nothing).
fn acknowledge(
    call: &Call<'_>,
    group: &str,
    member: &str,
    tp: &TopicPartition,
    batches: &[AckBatch],
    config: &SharePartitionConfig,
) -> i16 {
    let now = now(call);
    call.context
        .share
        .with_existing(group, tp, |sp| {
            for b in batches {
                let types: Option<Vec<AcknowledgeType>> = b
                    .types
                    .iter()
                    .map(|&t| AcknowledgeType::from_wire(t))
                    .collect();
                let Some(types) = types else {
                    return codes::INVALID_REQUEST;
                };
                if let Err(e) = sp.acknowledge(member, now, b.first, b.last, &types, config) {
                    return e.kafka_code();
                }
            }
            codes::NONE
        })
        // No share-partition: nothing of it was acquired by anyone.
        .unwrap_or(if batches.is_empty() {
            codes::NONE
        } else {
            INVALID_RECORD_STATE
        })
}

/// What one partition's acquisition found: the acquired ranges and the batches holding them.
struct Acquired {
    ranges: Vec<AcquiredRange>,
    records: Option<Bytes>,
}

/// Acquires up to `max_records` records of `tp` for `member`, reading at most `max_bytes`,
/// under the group's `settings` (its share-partition limits and isolation level).
async fn acquire(
    call: &Call<'_>,
    group: &str,
    member: &str,
    tp: &TopicPartition,
    max_records: usize,
    max_bytes: usize,
    settings: &ShareGroupSettings,
) -> Result<Acquired, i16> {
    let config = &settings.partition_config();
    let read_committed = settings.isolation_level == ShareIsolationLevel::ReadCommitted;
    let log = &*call.context.log;
    let (log_start, high_watermark) = log
        .bounds(tp)
        .await
        .map_err(|e| super::produce::log_code(&e))?;
    let share = &call.context.share;
    read(call, group, tp).await?;
    // A new share-partition starts where the group's share.auto.offset.reset says.
    let start = if share.with_existing(group, tp, |_| ()).is_some() {
        high_watermark
    } else {
        start_offset(call, group, tp, log_start, high_watermark).await?
    };
    let now = now(call);
    let from = share
        .with_partition(
            group,
            tp,
            || SharePartition::new(start),
            |sp| {
                sp.move_start(log_start);
                sp.first_deliverable(now, config)
            },
        )
        .ok_or(codes::UNKNOWN_SERVER_ERROR)?;
    // read_committed (share.isolation.level): up to the last stable offset, the records of
    // aborted transactions archived, as Kafka's share-partition does.
    let log_error = |e: coordinator_core::LogError| super::produce::log_code(&e);
    let guard = if read_committed {
        let now_ms = i64::try_from(WallClock.now_ms()).unwrap_or(i64::MAX);
        Some(
            call.context
                .producers
                .lock(log, tp, now_ms)
                .await
                .map_err(log_error)?,
        )
    } else {
        None
    };
    let visible_end = guard
        .as_ref()
        .map_or(high_watermark, |g| g.last_stable_offset(high_watermark));
    if from >= visible_end || max_records == 0 {
        return Ok(Acquired {
            ranges: Vec::new(),
            records: None,
        });
    }
    let mut read = log
        .read_batches(tp, from, max_bytes.max(1))
        .await
        .map_err(log_error)?;
    read.batches.retain(|b| b.base_offset() < visible_end);
    let read_end = read
        .batches
        .last()
        .map_or(from, |b| b.last_offset().saturating_add(1))
        .min(read.high_watermark)
        .min(visible_end);
    let aborted: Vec<(i64, i64)> = match &guard {
        Some(g) if read_end > from => {
            aborted_spans(&read.batches, &g.aborted_between(from, read_end - 1))
        }
        _ => Vec::new(),
    };
    drop(guard);
    let ranges = share
        .with_partition(
            group,
            tp,
            || SharePartition::new(start),
            |sp| {
                let mut ranges = sp.acquire(member, now, from..read_end, max_records, config);
                // Kafka's batch-optimized acquisition: max_records is met at a batch's end,
                // the batch holding the last offset taken is taken whole.
                let last = ranges.last().map(|r| r.last_offset);
                let batch_end = last.and_then(|last| {
                    read.batches
                        .iter()
                        .find(|b| b.base_offset() <= last && last < b.last_offset())
                        .map(|b| b.last_offset().min(read_end - 1))
                });
                if let (Some(last), Some(end)) = (last, batch_end) {
                    let more = usize::try_from(end - last).unwrap_or(usize::MAX);
                    for r in sp.acquire(member, now, last + 1..end + 1, more, config) {
                        match ranges.last_mut() {
                            Some(p)
                                if p.last_offset + 1 == r.first_offset
                                    && p.delivery_count == r.delivery_count =>
                            {
                                p.last_offset = r.last_offset;
                            }
                            _ => ranges.push(r),
                        }
                    }
                }
                if aborted.is_empty() {
                    return ranges;
                }
                // The aborted transactions' records acquired here are archived, not handed out.
                for &(first, last) in &aborted {
                    for r in &ranges {
                        let (f, l) = (first.max(r.first_offset), last.min(r.last_offset));
                        if f <= l {
                            let _ = sp.acknowledge(
                                member,
                                now,
                                f,
                                l,
                                &[AcknowledgeType::Reject],
                                config,
                            );
                        }
                    }
                }
                without(&ranges, &aborted)
            },
        )
        .unwrap_or_default();
    let wanted: Vec<&Arc<Batch>> = read
        .batches
        .iter()
        .filter(|b| {
            ranges
                .iter()
                .any(|r| b.base_offset() <= r.last_offset && b.last_offset() >= r.first_offset)
        })
        .collect();
    let records = if wanted.is_empty() {
        None
    } else {
        let owned: Vec<Arc<Batch>> = wanted.into_iter().cloned().collect();
        Some(super::fetch::concat(&owned).map_err(|_| codes::UNKNOWN_SERVER_ERROR)?)
    };
    Ok(Acquired { ranges, records })
}

/// The offsets of `batches` written by the aborted transactions `aborted` (their data
/// batches, not the markers), as inclusive spans in offset order.
fn aborted_spans(batches: &[Arc<Batch>], aborted: &[AbortedTxn]) -> Vec<(i64, i64)> {
    batches
        .iter()
        .filter(|b| {
            let Some(h) = b.encoded().and_then(|e| BatchHeader::parse(e)) else {
                return false;
            };
            h.transactional
                && !h.control
                && aborted.iter().any(|a| {
                    a.producer_id == h.producer_id
                        && a.first_offset <= b.base_offset()
                        && b.base_offset() <= a.last_offset
                })
        })
        .map(|b| (b.base_offset(), b.last_offset()))
        .collect()
}

/// `ranges` without the offsets of `spans`.
fn without(ranges: &[AcquiredRange], spans: &[(i64, i64)]) -> Vec<AcquiredRange> {
    let mut out = Vec::new();
    for r in ranges {
        let mut first = r.first_offset;
        for &(f, l) in spans {
            if l < first || f > r.last_offset {
                continue;
            }
            if f > first {
                out.push(AcquiredRange {
                    last_offset: f - 1,
                    first_offset: first,
                    ..*r
                });
            }
            first = l.saturating_add(1);
        }
        if first <= r.last_offset {
            out.push(AcquiredRange {
                first_offset: first,
                ..*r
            });
        }
    }
    out
}

/// The partitions a request names, by topic id, resolved to names (`None`: an unknown id).
async fn resolve(
    call: &Call<'_>,
    ids: impl IntoIterator<Item = Uuid> + Clone,
) -> BTreeMap<Uuid, Option<String>> {
    let names = names_of_ids(call, ids.clone()).await;
    ids.into_iter().zip(names).collect()
}

/// The request's group and member ids (empty when absent).
fn ids_of(group: Option<&GroupId>, member: Option<&StrBytes>) -> (String, String) {
    (
        group.map(|g| g.to_string()).unwrap_or_default(),
        member.map(|m| m.to_string()).unwrap_or_default(),
    )
}

fn tp_of(name: &str, partition: i32) -> Option<TopicPartition> {
    u32::try_from(partition)
        .ok()
        .map(|p| TopicPartition::new(name, p))
}

fn fetch_error(code: i16, message: &str) -> ShareFetchResponse {
    ShareFetchResponse::default()
        .with_error_code(code)
        .with_error_message(Some(StrBytes::from_string(message.to_string())))
}

/// The partition's leader as a ShareFetch answer names it.
fn leader(call: &Call<'_>) -> fetch_response::LeaderIdAndEpoch {
    fetch_response::LeaderIdAndEpoch::default()
        .with_leader_id(call.context.config.node_id)
        .with_leader_epoch(0)
}

async fn share_fetch(
    call: &Call<'_>,
    request: ShareFetchRequest,
    shutdown: &mut Shutdown,
) -> ShareFetchResponse {
    let (group, member) = ids_of(request.group_id.as_ref(), request.member_id.as_ref());
    if group.is_empty() || member.is_empty() {
        return fetch_error(codes::INVALID_REQUEST, "GroupId and MemberId must be set.");
    }
    if !call.may_group(Operation::Read, &group) {
        return fetch_error(
            codes::GROUP_AUTHORIZATION_FAILED,
            "Group authorization failed.",
        );
    }
    let epoch = request.share_session_epoch;
    let ids: Vec<Uuid> = request
        .topics
        .iter()
        .map(|t| t.topic_id)
        .chain(request.forgotten_topics_data.iter().map(|t| t.topic_id))
        .collect();
    let names = resolve(call, ids).await;
    let mut unknown: Vec<(Uuid, i32)> = Vec::new();
    let mut asked: Vec<(Uuid, TopicPartition, Vec<AckBatch>)> = Vec::new();
    let mut any_acks = false;
    for t in &request.topics {
        for p in &t.partitions {
            let acks: Vec<AckBatch> = p
                .acknowledgement_batches
                .iter()
                .map(|b| AckBatch {
                    first: b.first_offset,
                    last: b.last_offset,
                    types: b.acknowledge_types.clone(),
                })
                .collect();
            any_acks |= !acks.is_empty();
            match names
                .get(&t.topic_id)
                .cloned()
                .flatten()
                .and_then(|n| tp_of(&n, p.partition_index))
            {
                Some(tp) => asked.push((t.topic_id, tp, acks)),
                None => unknown.push((t.topic_id, p.partition_index)),
            }
        }
    }
    let forgotten: Vec<TopicPartition> = request
        .forgotten_topics_data
        .iter()
        .flat_map(|t| {
            let name = names.get(&t.topic_id).cloned().flatten();
            t.partitions
                .iter()
                .filter_map(move |&p| name.as_deref().and_then(|n| tp_of(n, p)))
                .collect::<Vec<_>>()
        })
        .collect();
    // The share session.
    let asked_set: BTreeSet<TopicPartition> = asked.iter().map(|(_, tp, _)| tp.clone()).collect();
    let fetching: BTreeSet<TopicPartition> = match epoch {
        INITIAL_EPOCH => {
            if any_acks {
                return fetch_error(
                    codes::INVALID_REQUEST,
                    "Acknowledge data present on initial ShareFetchRequest.",
                );
            }
            call.session.opened_share_session(&group, &member);
            if let Err(r) = call
                .context
                .share
                .open(&group, &member, asked_set, call.session.id())
            {
                return ShareFetchResponse::default().with_error_code(r.code());
            }
            asked.iter().map(|(_, tp, _)| tp.clone()).collect()
        }
        FINAL_EPOCH => {
            if !call.context.share.has_session(&group, &member) {
                return ShareFetchResponse::default()
                    .with_error_code(SessionRefusal::NotFound.code());
            }
            BTreeSet::new()
        }
        e if e > 0 => {
            match call.context.share.advance(&group, &member, e, |parts| {
                parts.extend(asked_set);
                for tp in &forgotten {
                    parts.remove(tp);
                }
            }) {
                Ok(parts) => parts,
                Err(r) => return ShareFetchResponse::default().with_error_code(r.code()),
            }
        }
        _ => return ShareFetchResponse::default().with_error_code(SessionRefusal::Epoch.code()),
    };
    let settings = call.context.coordinator.share_settings(&group);
    let config = settings.partition_config();
    // The ids the session's topics were asked by: one made again under its name since is
    // not the session's (UNKNOWN_TOPIC_ID), as Kafka's sessions keyed by topic id make it.
    let session_ids = call.context.share.topic_ids(
        &group,
        &member,
        asked
            .iter()
            .map(|(id, tp, _)| (tp.topic().to_string(), *id))
            .collect::<Vec<_>>(),
    );
    // Acknowledgements first, then records.
    let mut partitions: BTreeMap<TopicPartition, fetch_response::PartitionData> = BTreeMap::new();
    let mut ids: BTreeMap<String, Uuid> = BTreeMap::new();
    for (id, tp, acks) in &asked {
        ids.insert(tp.topic().to_string(), *id);
        let entry = partitions.entry(tp.clone()).or_insert_with(|| {
            fetch_response::PartitionData::default()
                .with_partition_index(i32::try_from(tp.partition()).unwrap_or(i32::MAX))
                .with_current_leader(leader(call))
        });
        if !acks.is_empty() {
            entry.acknowledge_error_code = match read(call, &group, tp).await {
                Ok(()) => acknowledge(call, &group, &member, tp, acks, &config),
                Err(c) => c,
            };
        }
    }
    let mut changed: Vec<TopicPartition> = asked
        .iter()
        .filter(|(_, _, acks)| !acks.is_empty())
        .map(|(_, tp, _)| tp.clone())
        .collect();
    if epoch == FINAL_EPOCH {
        changed.extend(call.context.share.close(&group, &member, |sp| {
            sp.release_member(&member, &config);
        }));
    }
    // What was acknowledged is kept before it is answered.
    if let Err(code) = keep(call, &group, changed.clone()).await {
        for tp in &changed {
            if let Some(p) = partitions.get_mut(tp) {
                if p.acknowledge_error_code == codes::NONE {
                    p.acknowledge_error_code = code;
                }
            }
        }
    }
    for tp in &fetching {
        ids.entry(tp.topic().to_string()).or_insert_with(|| {
            session_ids
                .get(tp.topic())
                .copied()
                .unwrap_or_else(|| call.context.topic_id(tp.topic()))
        });
        partitions.entry(tp.clone()).or_insert_with(|| {
            fetch_response::PartitionData::default()
                .with_partition_index(i32::try_from(tp.partition()).unwrap_or(i32::MAX))
                .with_current_leader(leader(call))
        });
    }
    // Records: long-poll until some are acquired, an error, the shutdown or max_wait_ms.
    let max_records = usize::try_from(request.max_records)
        .ok()
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_MAX_RECORDS);
    let max_bytes = usize::try_from(request.max_bytes)
        .ok()
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_MAX_BYTES);
    let deadline =
        Instant::now() + Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    let mut appends = call.context.log.appends();
    loop {
        appends.borrow_and_update();
        let mut acquired_any = false;
        let mut errors = false;
        let mut left = max_records;
        let mut bytes_left = max_bytes;
        for tp in &fetching {
            let Some(answer) = partitions.get_mut(tp) else {
                continue;
            };
            if answer.error_code != codes::NONE {
                continue;
            }
            if !call.may_topic(Operation::Read, tp.topic()) {
                answer.error_code = codes::TOPIC_AUTHORIZATION_FAILED;
                errors = true;
                continue;
            }
            if session_ids
                .get(tp.topic())
                .is_some_and(|id| *id != call.context.topic_id(tp.topic()))
            {
                answer.error_code = codes::UNKNOWN_TOPIC_ID;
                errors = true;
                continue;
            }
            if let Some(code) = not_led(call, tp).await {
                answer.error_code = code;
                errors = true;
                continue;
            }
            match acquire(call, &group, &member, tp, left, bytes_left, &settings).await {
                Ok(got) => {
                    let n: usize = got
                        .ranges
                        .iter()
                        .map(|r| usize::try_from(r.last_offset - r.first_offset + 1).unwrap_or(0))
                        .sum();
                    left = left.saturating_sub(n);
                    if let Some(records) = &got.records {
                        bytes_left = bytes_left.saturating_sub(records.len());
                    }
                    acquired_any |= n > 0;
                    answer.acquired_records.extend(got.ranges.iter().map(|r| {
                        fetch_response::AcquiredRecords::default()
                            .with_first_offset(r.first_offset)
                            .with_last_offset(r.last_offset)
                            .with_delivery_count(r.delivery_count)
                    }));
                    if got.records.is_some() {
                        answer.records = got.records;
                    }
                }
                Err(code) => {
                    answer.error_code = code;
                    errors = true;
                }
            }
        }
        if acquired_any
            || errors
            || any_acks
            || fetching.is_empty()
            || shutdown.is_shutdown()
            || Instant::now() >= deadline
        {
            break;
        }
        tokio::select! {
            changed = appends.changed() => {
                if changed.is_err() {
                    break;
                }
            }
            () = tokio::time::sleep_until(deadline.min(Instant::now() + RECHECK)) => {}
            _ = shutdown.recv() => {}
        }
    }
    let mut by_topic: BTreeMap<Uuid, Vec<fetch_response::PartitionData>> = BTreeMap::new();
    for (tp, data) in partitions {
        let id = ids
            .get(tp.topic())
            .copied()
            .unwrap_or_else(|| call.context.topic_id(tp.topic()));
        by_topic.entry(id).or_default().push(data);
    }
    for (id, p) in unknown {
        by_topic.entry(id).or_default().push(
            fetch_response::PartitionData::default()
                .with_partition_index(p)
                .with_error_code(codes::UNKNOWN_TOPIC_ID),
        );
    }
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(
            i32::try_from(config.lock_duration_ms).unwrap_or(i32::MAX),
        )
        .with_responses(
            by_topic
                .into_iter()
                .map(|(id, partitions)| {
                    fetch_response::ShareFetchableTopicResponse::default()
                        .with_topic_id(id)
                        .with_partitions(partitions)
                })
                .collect(),
        )
}

fn ack_error(code: i16, message: &str) -> ShareAcknowledgeResponse {
    ShareAcknowledgeResponse::default()
        .with_error_code(code)
        .with_error_message(Some(StrBytes::from_string(message.to_string())))
}

async fn share_acknowledge(
    call: &Call<'_>,
    request: ShareAcknowledgeRequest,
) -> ShareAcknowledgeResponse {
    let (group, member) = ids_of(request.group_id.as_ref(), request.member_id.as_ref());
    if group.is_empty() || member.is_empty() {
        return ack_error(codes::INVALID_REQUEST, "GroupId and MemberId must be set.");
    }
    if !call.may_group(Operation::Read, &group) {
        return ack_error(
            codes::GROUP_AUTHORIZATION_FAILED,
            "Group authorization failed.",
        );
    }
    let epoch = request.share_session_epoch;
    let session = match epoch {
        FINAL_EPOCH if call.context.share.has_session(&group, &member) => Ok(()),
        FINAL_EPOCH => Err(SessionRefusal::NotFound),
        e if e > 0 => call
            .context
            .share
            .advance(&group, &member, e, |_| {})
            .map(|_| ()),
        _ => Err(SessionRefusal::Epoch),
    };
    if let Err(r) = session {
        return ShareAcknowledgeResponse::default().with_error_code(r.code());
    }
    let names = resolve(call, request.topics.iter().map(|t| t.topic_id)).await;
    let config = partition_config(call, &group);
    let mut responses = Vec::with_capacity(request.topics.len());
    let mut changed: Vec<TopicPartition> = Vec::new();
    for t in &request.topics {
        let name = names.get(&t.topic_id).cloned().flatten();
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let answer = ack_response::PartitionData::default()
                .with_partition_index(p.partition_index)
                .with_current_leader(
                    ack_response::LeaderIdAndEpoch::default()
                        .with_leader_id(call.context.config.node_id)
                        .with_leader_epoch(0),
                );
            let Some(tp) = name.as_deref().and_then(|n| tp_of(n, p.partition_index)) else {
                partitions.push(answer.with_error_code(codes::UNKNOWN_TOPIC_ID));
                continue;
            };
            if !call.may_topic(Operation::Read, tp.topic()) {
                partitions.push(answer.with_error_code(codes::TOPIC_AUTHORIZATION_FAILED));
                continue;
            }
            let acks: Vec<AckBatch> = p
                .acknowledgement_batches
                .iter()
                .map(|b| AckBatch {
                    first: b.first_offset,
                    last: b.last_offset,
                    types: b.acknowledge_types.clone(),
                })
                .collect();
            let code = match read(call, &group, &tp).await {
                Ok(()) => acknowledge(call, &group, &member, &tp, &acks, &config),
                Err(c) => c,
            };
            if !acks.is_empty() {
                changed.push(tp.clone());
            }
            partitions.push(answer.with_error_code(code));
        }
        responses.push(
            ack_response::ShareAcknowledgeTopicResponse::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    if epoch == FINAL_EPOCH {
        changed.extend(call.context.share.close(&group, &member, |sp| {
            sp.release_member(&member, &config);
        }));
    }
    // What was acknowledged is kept before it is answered.
    if let Err(code) = keep(call, &group, changed).await {
        for p in responses.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
            if p.error_code == codes::NONE {
                p.error_code = code;
            }
        }
    }
    ShareAcknowledgeResponse::default().with_responses(responses)
}

pub(crate) struct ShareFetch;

impl Api for ShareFetch {
    const KEY: ApiKey = ApiKey::ShareFetch;
    const VERSIONS: RangeInclusive<i16> = 1..=1;
    type Request = ShareFetchRequest;

    async fn handle(
        call: &Call<'_>,
        request: ShareFetchRequest,
        shutdown: &mut Shutdown,
    ) -> Option<ShareFetchResponse> {
        Some(share_fetch(call, request, shutdown).await)
    }
}

pub(crate) struct ShareAcknowledge;

impl Api for ShareAcknowledge {
    const KEY: ApiKey = ApiKey::ShareAcknowledge;
    const VERSIONS: RangeInclusive<i16> = 1..=1;
    type Request = ShareAcknowledgeRequest;

    async fn handle(
        call: &Call<'_>,
        request: ShareAcknowledgeRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<ShareAcknowledgeResponse> {
        Some(share_acknowledge(call, request).await)
    }
}
