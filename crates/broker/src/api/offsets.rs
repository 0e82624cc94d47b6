//! OffsetCommit, OffsetFetch, OffsetDelete.
//!
//! As Kafka's front (KafkaApis) does, the broker checks that topics and partitions exist
//! before the coordinator is asked: those that do not get UNKNOWN_TOPIC_OR_PARTITION, and
//! if none is left the coordinator is not called at all.
//!
//! A group this broker does not coordinate (several brokers over PostgreSQL) answers
//! NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while its slot loads) where the coordinator
//! would have answered: OffsetCommit on each partition that passed those checks, OffsetFetch
//! for the group (v8+ per group; before, at the top and, in v1, on each asked partition),
//! OffsetDelete at the top.
//!
//! From v10, OffsetCommit and OffsetFetch name topics by id (KIP-848), in the request and in
//! the answer: the ids are resolved once per request as Fetch v13+ resolves them, and a topic
//! of an unknown id answers UNKNOWN_TOPIC_ID (100) on each of its partitions, its id echoed,
//! as Kafka's `KafkaApis` does; ACLs are checked on the names the ids resolve to.

use crate::acl::Operation;
use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use coordinator_core::{
    CommitAuthority, CommittedOffsets, GroupKind, OffsetAndMetadata,
    OffsetCommitRequest as CoreCommit, TopicMetadata, TopicPartition,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tracing::debug;

use super::fetch::names_of_ids;
use super::groups::{code, generation, refusal, settle};
use super::registry::{up_to_codec, Api};
use super::{codes, Call};
use crate::shutdown::Shutdown;

/// The partition if its topic and number exist in the log.
pub(super) fn existing(call: &Call<'_>, topic: &str, partition: i32) -> Option<TopicPartition> {
    let p = u32::try_from(partition).ok()?;
    let count = call.context.log.partition_count(topic)?;
    (p < count).then(|| TopicPartition::new(topic, p))
}

/// One partition of an OffsetCommit or TxnOffsetCommit, checked as Kafka's front checks it:
/// UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE (above `offset.metadata.max.bytes`),
/// else the partition and its offset with metadata (a negative offset is the caller's to
/// treat: see [`split_offsets`]).
pub(super) fn checked_offset(
    call: &Call<'_>,
    topic: &str,
    partition: i32,
    offset: i64,
    leader_epoch: i32,
    metadata: Option<&StrBytes>,
) -> Result<(TopicPartition, OffsetAndMetadata), i16> {
    let max_metadata = call.context.coordinator.config().offset_metadata_max_bytes;
    let too_large = metadata.is_some_and(|m| m.len() > max_metadata);
    // Kafka checks READ on the topic before it looks the partition up.
    if !call.may_topic(Operation::Read, topic) {
        return Err(codes::TOPIC_AUTHORIZATION_FAILED);
    }
    match existing(call, topic, partition) {
        None => Err(codes::UNKNOWN_TOPIC_OR_PARTITION),
        Some(_) if too_large => Err(codes::OFFSET_METADATA_TOO_LARGE),
        Some(tp) => {
            let metadata = metadata.map(|m| m.to_string()).unwrap_or_default();
            // -1 (v6+) or absent (older versions): no leader epoch.
            let epoch = Some(leader_epoch).filter(|&e| e >= 0);
            let offset = OffsetAndMetadata::new(offset)
                .with_metadata(metadata)
                .with_leader_epoch(epoch);
            Ok((tp, offset))
        }
    }
}

/// One partition of a commit request, as both OffsetCommit and TxnOffsetCommit carry it:
/// (topic index, partition index, topic, partition, offset, leader epoch, metadata).
pub(super) type CommitPart<'a> = (usize, usize, &'a str, i32, i64, i32, Option<&'a StrBytes>);

/// What [`split_offsets`] made of a commit's partitions.
pub(super) struct Split {
    /// The offsets to hand to the coordinator.
    pub(super) offsets: CommittedOffsets,
    /// The partitions committed with a negative offset, where the caller clears them.
    pub(super) cleared: Vec<TopicPartition>,
    /// Per (topic index, partition index), the codes decided before the coordinator is asked.
    pub(super) early: BTreeMap<(usize, usize), i16>,
}

/// Splits a commit's partitions into the offsets to hand to the coordinator, the partitions
/// committed with a negative offset (Kafka stores one: kafkajs commits its default offset,
/// −2 or −1, after OFFSET_OUT_OF_RANGE; the core keeps none, so with `clear_negative` they
/// are cleared, which reads back as no committed offset, else INVALID_REQUEST) and the codes
/// decided before the coordinator is asked ([`checked_offset`]).
pub(super) fn split_offsets<'a>(
    call: &Call<'_>,
    parts: impl Iterator<Item = CommitPart<'a>>,
    clear_negative: bool,
) -> Split {
    let mut early = BTreeMap::new();
    let mut offsets = CommittedOffsets::new();
    let mut cleared = Vec::new();
    for (t, p, topic, partition, offset, epoch, metadata) in parts {
        match checked_offset(call, topic, partition, offset, epoch, metadata) {
            Ok((tp, _)) if offset < 0 && clear_negative => cleared.push(tp),
            Ok(_) if offset < 0 => {
                early.insert((t, p), codes::INVALID_REQUEST);
            }
            Ok((tp, offset)) => {
                offsets.insert(tp, offset);
            }
            Err(code) => {
                early.insert((t, p), code);
            }
        }
    }
    Split {
        offsets,
        cleared,
        early,
    }
}

/// The first version of OffsetCommit and OffsetFetch that names topics by id.
const TOPIC_IDS_FROM: i16 = 10;

/// The name of each topic of a request, in its order: from v10 the topic whose id is asked
/// for (`None` for an unknown id), before it the name the request gives.
async fn topic_names<'a>(
    call: &Call<'_>,
    topics: impl Iterator<Item = (&'a TopicName, uuid::Uuid)>,
) -> Vec<Option<String>> {
    if call.version < TOPIC_IDS_FROM {
        return topics.map(|(name, _)| Some(name.0.to_string())).collect();
    }
    names_of_ids(call, topics.map(|(_, id)| id)).await
}

/// The OffsetCommit answer: each partition of the request with `code_of(topic index,
/// partition index)`; each topic with its name and id (the version encodes one of them).
fn commit_answer(
    request: &OffsetCommitRequest,
    code_of: impl Fn(usize, usize) -> i16,
) -> OffsetCommitResponse {
    OffsetCommitResponse::default().with_topics(
        request
            .topics
            .iter()
            .enumerate()
            .map(|(t, topic)| {
                offset_commit_response::OffsetCommitResponseTopic::default()
                    .with_name(topic.name.clone())
                    .with_topic_id(topic.topic_id)
                    .with_partitions(
                        topic
                            .partitions
                            .iter()
                            .enumerate()
                            .map(|(p, partition)| {
                                offset_commit_response::OffsetCommitResponsePartition::default()
                                    .with_partition_index(partition.partition_index)
                                    .with_error_code(code_of(t, p))
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

async fn commit(call: &Call<'_>, request: OffsetCommitRequest) -> OffsetCommitResponse {
    if !call.may_group(Operation::Read, request.group_id.as_str()) {
        // Kafka: every partition answers GROUP_AUTHORIZATION_FAILED; nothing is committed.
        return commit_answer(&request, |_, _| codes::GROUP_AUTHORIZATION_FAILED);
    }
    let names = topic_names(call, request.topics.iter().map(|t| (&t.name, t.topic_id))).await;
    let parts = request
        .topics
        .iter()
        .zip(&names)
        .enumerate()
        .filter_map(|(t, (topic, name))| Some((t, topic, name.as_deref()?)))
        .flat_map(|(t, topic, name)| {
            topic.partitions.iter().enumerate().map(move |(p, x)| {
                let (offset, epoch) = (x.committed_offset, x.committed_leader_epoch);
                let metadata = x.committed_metadata.as_ref();
                (t, p, name, x.partition_index, offset, epoch, metadata)
            })
        });
    // Per (topic index, partition index): a code decided before the coordinator is asked.
    let Split {
        offsets,
        cleared,
        mut early,
    } = split_offsets(call, parts, true);
    // v10: a topic of an unknown id, UNKNOWN_TOPIC_ID on each of its partitions.
    for (t, topic) in request.topics.iter().enumerate() {
        if names[t].is_none() {
            for p in 0..topic.partitions.len() {
                early.insert((t, p), codes::UNKNOWN_TOPIC_ID);
            }
        }
    }
    let group_code = if offsets.is_empty() && cleared.is_empty() {
        codes::NONE
    } else if let Some(c) = call.group_coordinator_error(&request.group_id) {
        c
    } else {
        let group_id = request.group_id.to_string();
        let member_id = request.member_id.to_string();
        // v9's `generation_id_or_member_epoch` is a member epoch for a consumer-protocol
        // group (KIP-848) and a generation for the others, as Kafka's coordinator reads it.
        let authority = if call.version >= 9
            && call.context.coordinator.group_kind(&group_id) == Some(GroupKind::Consumer)
            && !(member_id.is_empty() && request.generation_id_or_member_epoch < 0)
        {
            CommitAuthority::MemberEpoch {
                member_id,
                member_epoch: request.generation_id_or_member_epoch,
            }
        } else {
            CommitAuthority::generation(
                generation(request.generation_id_or_member_epoch),
                member_id,
                request.group_instance_id.as_ref().map(|s| s.to_string()),
            )
        };
        let core = CoreCommit {
            group_id,
            authority,
            offsets,
        };
        match call
            .context
            .coordinator
            .offsets()
            .commit_clearing(&core, &cleared)
            .await
        {
            Ok(()) => codes::NONE,
            // A member's commit to a group that does not exist: OffsetCommit before v9 says
            // ILLEGAL_GENERATION, v9 GROUP_ID_NOT_FOUND (Kafka 4).
            Err(e) if code(&e) == codes::GROUP_ID_NOT_FOUND && call.version < 9 => {
                codes::ILLEGAL_GENERATION
            }
            Err(e) => {
                debug!(group = %request.group_id.as_str(), error = %e, "commit refused");
                code(&e)
            }
        }
    };
    let group_code = settle(call, &request.group_id, group_code);
    commit_answer(&request, |t, p| {
        early.get(&(t, p)).copied().unwrap_or(group_code)
    })
}

/// What one group's fetch found: per topic, per asked partition, the committed offset with
/// its metadata (`None`: none committed).
/// Per topic, per partition: the committed offset (if any) and the partition's error code.
type Fetched = Vec<(TopicName, Vec<(i32, Option<OffsetAndMetadata>, i16)>)>;

/// One group's committed offsets of `topics` (`None`: every committed offset of the group),
/// or the group's error code. An unknown group has none and is no error, and the empty group
/// id is a group id like any other (Kafka's behaviour). A store that keeps offsets only (the
/// JSON file) reads the metadata back empty. With `require_stable` (v7+), a partition with
/// transactional offsets pending answers UNSTABLE_OFFSET_COMMIT and no offset, as Kafka's
/// `OffsetMetadataManager.fetchOffsets` does; without it, the committed offset.
async fn fetch_group(
    call: &Call<'_>,
    group: &str,
    authority: &CommitAuthority,
    topics: Option<Vec<(TopicName, Vec<i32>)>>,
    require_stable: bool,
) -> Result<Fetched, i16> {
    if !call.may_group(Operation::Describe, group) {
        return Err(codes::GROUP_AUTHORIZATION_FAILED);
    }
    if let Some(c) = call.group_coordinator_error(group) {
        return Err(c);
    }
    let committed = match call
        .context
        .coordinator
        .offsets()
        .fetch(group, authority)
        .await
    {
        Ok(map) => map,
        // A group unloaded meanwhile (its slot lost to another broker) is not "nothing
        // committed": the client is sent to the group's coordinator ([`settle`]).
        Err(e) if code(&e) == codes::GROUP_ID_NOT_FOUND => match settle(call, group, code(&e)) {
            codes::GROUP_ID_NOT_FOUND => Default::default(),
            c => return Err(c),
        },
        Err(e) => return Err(settle(call, group, code(&e))),
    };
    let unstable = if require_stable {
        call.context.coordinator.pending_txn_partitions(group)
    } else {
        Default::default()
    };
    let entry = |tp: &TopicPartition, p: i32, offset: Option<&OffsetAndMetadata>| {
        if unstable.contains(tp) {
            (p, None, codes::UNSTABLE_OFFSET_COMMIT)
        } else {
            (p, offset.cloned(), codes::NONE)
        }
    };
    Ok(match topics {
        Some(topics) => topics
            .into_iter()
            .map(|(name, partitions)| {
                // Kafka: a named topic the principal may not describe answers
                // TOPIC_AUTHORIZATION_FAILED for each of its partitions.
                let allowed = call.may_topic(Operation::Describe, name.0.as_str());
                let found = partitions
                    .into_iter()
                    .map(|p| match u32::try_from(p) {
                        _ if !allowed => (p, None, codes::TOPIC_AUTHORIZATION_FAILED),
                        Ok(index) => {
                            let tp = TopicPartition::new(name.0.as_str(), index);
                            entry(&tp, p, committed.get(&tp))
                        }
                        Err(_) => (p, None, codes::NONE),
                    })
                    .collect();
                (name, found)
            })
            .collect(),
        None => {
            let mut out: Fetched = Vec::new();
            // All topics: those the principal may not describe are left out (Kafka).
            for (tp, offset) in committed
                .iter()
                .filter(|(tp, _)| call.may_topic(Operation::Describe, tp.topic()))
            {
                let entry = entry(tp, tp.partition() as i32, Some(offset));
                match out.last_mut() {
                    Some((name, parts)) if name.0.as_str() == tp.topic() => parts.push(entry),
                    _ => out.push((
                        TopicName(StrBytes::from_string(tp.topic().to_string())),
                        vec![entry],
                    )),
                }
            }
            out
        }
    })
}

/// The three fields of a committed offset as OffsetFetch sends them (−1 for none).
fn fields(offset: Option<&OffsetAndMetadata>) -> (i64, i32, Option<StrBytes>) {
    (
        offset.map_or(-1, |o| o.offset),
        offset.and_then(|o| o.leader_epoch).unwrap_or(-1),
        Some(StrBytes::from_string(
            offset.map(|o| o.metadata.clone()).unwrap_or_default(),
        )),
    )
}

/// The asked topics of an OffsetFetch v8+ group: each one's name (`None`: an unknown id), id
/// and partitions.
type AskedById = Vec<(Option<String>, uuid::Uuid, Vec<i32>)>;

/// One asked topic of an OffsetFetch v8+ group as answered: by name and, from v10, by id.
fn fetch_topic(
    name: TopicName,
    id: uuid::Uuid,
    parts: &[(i32, Option<OffsetAndMetadata>, i16)],
) -> offset_fetch_response::OffsetFetchResponseTopics {
    offset_fetch_response::OffsetFetchResponseTopics::default()
        .with_name(name)
        .with_topic_id(id)
        .with_partitions(
            parts
                .iter()
                .map(|(p, o, c)| {
                    let (offset, epoch, metadata) = fields(o.as_ref());
                    offset_fetch_response::OffsetFetchResponsePartitions::default()
                        .with_partition_index(*p)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(epoch)
                        .with_metadata(metadata)
                        .with_error_code(*c)
                })
                .collect(),
        )
}

/// OffsetFetch v1-7 (one group), v8-9 (a batch of groups; v9 with the member id and epoch of
/// a consumer-protocol member, checked as Kafka checks them) and v10 (topics by id).
async fn fetch(call: &Call<'_>, request: OffsetFetchRequest) -> OffsetFetchResponse {
    if call.version >= 8 {
        let mut groups = Vec::with_capacity(request.groups.len());
        for g in request.groups {
            let member_id = g
                .member_id
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default();
            let authority = if member_id.is_empty() && g.member_epoch < 0 {
                CommitAuthority::Plain
            } else {
                CommitAuthority::MemberEpoch {
                    member_id,
                    member_epoch: g.member_epoch,
                }
            };
            // Each asked topic's name (from v10 resolved from its id) and id.
            let asked_topics: Option<AskedById> = match g.topics {
                Some(topics) => {
                    let names =
                        topic_names(call, topics.iter().map(|t| (&t.name, t.topic_id))).await;
                    Some(
                        topics
                            .into_iter()
                            .zip(names)
                            .map(|(t, name)| (name, t.topic_id, t.partition_indexes))
                            .collect(),
                    )
                }
                None => None,
            };
            let asked = asked_topics.as_ref().map(|topics| {
                topics
                    .iter()
                    .filter_map(|(name, _, parts)| {
                        let name = TopicName(StrBytes::from_string(name.clone()?));
                        Some((name, parts.clone()))
                    })
                    .collect()
            });
            let group = offset_fetch_response::OffsetFetchResponseGroup::default()
                .with_group_id(g.group_id.clone());
            let stable = request.require_stable;
            groups.push(
                match fetch_group(call, &g.group_id, &authority, asked, stable).await {
                    Ok(found) => group.with_topics(match asked_topics {
                        // The asked topics in the request's order; `found` holds the resolved
                        // ones in that order. An unknown id: UNKNOWN_TOPIC_ID per partition.
                        Some(asked_topics) => {
                            let mut found = found.into_iter();
                            asked_topics
                                .into_iter()
                                .filter_map(|(name, id, parts)| match name {
                                    Some(_) => {
                                        let (name, parts) = found.next()?;
                                        Some(fetch_topic(name, id, &parts))
                                    }
                                    None => {
                                        let parts: Vec<_> = parts
                                            .into_iter()
                                            .map(|p| (p, None, codes::UNKNOWN_TOPIC_ID))
                                            .collect();
                                        Some(fetch_topic(TopicName::default(), id, &parts))
                                    }
                                })
                                .collect()
                        }
                        // Every committed offset: from v10 by the topic's id, for the topics
                        // that still exist (a deleted topic has no id to answer with).
                        None => found
                            .into_iter()
                            .filter(|(name, _)| {
                                call.version < TOPIC_IDS_FROM
                                    || call.context.log.partition_count(name.0.as_str()).is_some()
                            })
                            .map(|(name, parts)| {
                                let id = call.context.topic_id(name.0.as_str());
                                fetch_topic(name, id, &parts)
                            })
                            .collect(),
                    }),
                    Err(c) => group.with_error_code(c),
                },
            );
        }
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let asked: Option<Vec<(TopicName, Vec<i32>)>> = request.topics.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.name, t.partition_indexes))
            .collect()
    });
    let render = |found: Fetched, error: i16| -> Vec<OffsetFetchResponseTopic> {
        found
            .into_iter()
            .map(|(name, parts)| {
                OffsetFetchResponseTopic::default()
                    .with_name(name)
                    .with_partitions(
                        parts
                            .iter()
                            .map(|(p, o, c)| {
                                let (offset, epoch, metadata) = fields(o.as_ref());
                                OffsetFetchResponsePartition::default()
                                    .with_partition_index(*p)
                                    .with_committed_offset(offset)
                                    .with_committed_leader_epoch(epoch)
                                    .with_metadata(metadata)
                                    .with_error_code(if error == codes::NONE { *c } else { error })
                            })
                            .collect(),
                    )
            })
            .collect()
    };
    match fetch_group(
        call,
        &request.group_id,
        &CommitAuthority::Plain,
        asked.clone(),
        call.version >= 7 && request.require_stable,
    )
    .await
    {
        Ok(found) => OffsetFetchResponse::default().with_topics(render(found, codes::NONE)),
        Err(c) => {
            // v1 has no top-level error: every asked partition carries it.
            let none = asked
                .unwrap_or_default()
                .into_iter()
                .map(|(name, parts)| {
                    (
                        name,
                        parts.into_iter().map(|p| (p, None, codes::NONE)).collect(),
                    )
                })
                .collect();
            OffsetFetchResponse::default()
                .with_error_code(c)
                .with_topics(render(none, c))
        }
    }
}

/// OffsetDelete v0: removes a group's committed offsets of topics it is not subscribed to.
async fn delete(call: &Call<'_>, request: OffsetDeleteRequest) -> OffsetDeleteResponse {
    if !call.may_group(Operation::Delete, request.group_id.as_str()) {
        return OffsetDeleteResponse::default().with_error_code(codes::GROUP_AUTHORIZATION_FAILED);
    }
    let mut early: BTreeMap<(String, i32), i16> = BTreeMap::new();
    let mut asked = Vec::new();
    for topic in &request.topics {
        let readable = call.may_topic(Operation::Read, &topic.name);
        for partition in &topic.partitions {
            if !readable {
                early.insert(
                    (topic.name.to_string(), partition.partition_index),
                    codes::TOPIC_AUTHORIZATION_FAILED,
                );
                continue;
            }
            match existing(call, &topic.name, partition.partition_index) {
                Some(tp) => asked.push(tp),
                None => {
                    early.insert(
                        (topic.name.to_string(), partition.partition_index),
                        codes::UNKNOWN_TOPIC_OR_PARTITION,
                    );
                }
            }
        }
    }
    let mut results: BTreeMap<(String, i32), i16> = BTreeMap::new();
    let mut group_code = codes::NONE;
    if request.group_id.is_empty() {
        group_code = codes::INVALID_GROUP_ID;
    } else if let Some(c) = refusal(call, &request.group_id) {
        group_code = c;
    } else {
        match call
            .context
            .coordinator
            .offsets()
            .delete(&request.group_id, &asked)
            .await
        {
            Ok(per_partition) => {
                for (tp, result) in per_partition {
                    results.insert(
                        (tp.topic().to_string(), tp.partition() as i32),
                        result.err().map_or(codes::NONE, |e| code(&e)),
                    );
                }
            }
            Err(e) => group_code = code(&e),
        }
    }
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            offset_delete_response::OffsetDeleteResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|p| {
                            let key = (topic.name.to_string(), p.partition_index);
                            let c = early
                                .get(&key)
                                .or_else(|| results.get(&key))
                                .copied()
                                .unwrap_or(codes::NONE);
                            offset_delete_response::OffsetDeleteResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(c)
                        })
                        .collect(),
                )
        })
        .collect();
    if group_code != codes::NONE {
        // A group-level error: Kafka sends it alone, without the topics.
        return OffsetDeleteResponse::default().with_error_code(group_code);
    }
    OffsetDeleteResponse::default().with_topics(topics)
}

pub(crate) struct OffsetCommit;

impl Api for OffsetCommit {
    const KEY: ApiKey = ApiKey::OffsetCommit;
    /// v9: a consumer-protocol member commits with its member epoch (KIP-848); v10 names
    /// topics by id (KIP-848). Up to what the codec serves (see [`up_to_codec`]).
    const VERSIONS: RangeInclusive<i16> = 2..=up_to_codec::<OffsetCommitRequest>(10);
    type Request = OffsetCommitRequest;

    async fn handle(
        call: &Call<'_>,
        request: OffsetCommitRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<OffsetCommitResponse> {
        Some(commit(call, request).await)
    }
}

pub(crate) struct OffsetFetch;

impl Api for OffsetFetch {
    const KEY: ApiKey = ApiKey::OffsetFetch;
    /// v8 batches groups; v9 carries a consumer-protocol member's id and epoch (KIP-848);
    /// v10 names topics by id. Up to what the codec serves (see [`up_to_codec`]).
    const VERSIONS: RangeInclusive<i16> = 1..=up_to_codec::<OffsetFetchRequest>(10);
    type Request = OffsetFetchRequest;

    async fn handle(
        call: &Call<'_>,
        request: OffsetFetchRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<OffsetFetchResponse> {
        Some(fetch(call, request).await)
    }

    /// OffsetFetch carries a top-level error in v2-7 (v8 batches groups).
    fn unsupported(version: i16) -> Option<(i16, OffsetFetchResponse)> {
        (2..8).contains(&version).then(|| {
            let body = OffsetFetchResponse::default().with_error_code(codes::UNSUPPORTED_VERSION);
            (version, body)
        })
    }
}

pub(crate) struct OffsetDelete;

impl Api for OffsetDelete {
    const KEY: ApiKey = ApiKey::OffsetDelete;
    const VERSIONS: RangeInclusive<i16> = 0..=0;
    type Request = OffsetDeleteRequest;

    async fn handle(
        call: &Call<'_>,
        request: OffsetDeleteRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<OffsetDeleteResponse> {
        Some(delete(call, request).await)
    }
}
