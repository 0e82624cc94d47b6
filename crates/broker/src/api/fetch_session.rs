//! Fetch sessions (KIP-227, Fetch v7+), as Kafka's `FetchSession.scala` keeps them.
//!
//! A client opens a session with a full fetch at epoch 0 (INITIAL): the broker answers every
//! partition asked and a session id. Its next fetches are incremental (the session id, the
//! next epoch): they name only the partitions whose fetch position changed (and, in
//! `forgotten_topics_data`, those to drop); the broker reads the session's partitions in the
//! session's order and answers only those with something new: records, a changed high
//! watermark, last stable offset or log start offset, or an error. A partition that returned
//! records moves to the end of the session's order, so that with a small `max_bytes` every
//! partition gets its turn (Kafka's `IncrementalFetchContext`). Epoch −1 (FINAL) closes the
//! session and is answered as a fetch without one.
//!
//! Refusals, at the top level with no partitions and session id 0, as Kafka's: an unknown
//! session id is FETCH_SESSION_ID_NOT_FOUND (70), an epoch other than the expected one
//! INVALID_FETCH_SESSION_EPOCH (71), a session opened with topic names continued with ids
//! (or the reverse: v13 changed the key) FETCH_SESSION_TOPIC_ID_ERROR (106). The client
//! then opens a new session with a full fetch.
//!
//! Where this differs from Kafka: sessions are kept per connection, at most one (a client
//! fetches from a broker over one connection; a new session on that connection replaces the
//! old one), instead of in a broker-wide cache of `max.incremental.fetch.session.cache.slots`
//! sessions evicted by age and size; a closed connection ends its session (the client's next
//! incremental fetch, on a new connection, gets FETCH_SESSION_ID_NOT_FOUND and starts over).
//! A session holds at most [`MAX_SESSION_PARTITIONS`] partitions: a full fetch of more is
//! answered without a session, and an incremental one that would grow it past the bound ends
//! the session (FETCH_SESSION_ID_NOT_FOUND).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchableTopicResponse;
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use uuid::Uuid;

use super::codes;

/// The epoch that opens a session (with a full fetch).
const INITIAL_EPOCH: i32 = 0;
/// The epoch that closes one (the fetch is answered without a session).
const FINAL_EPOCH: i32 = -1;
/// The first Fetch version with sessions.
const SESSIONS_FROM: i16 = 7;
/// The first Fetch version that names topics by id (the session's key changes with it).
const TOPIC_IDS_FROM: i16 = 13;
/// Kafka's INVALID_FETCH_SESSION_EPOCH.
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
/// Kafka's FETCH_SESSION_TOPIC_ID_ERROR.
const FETCH_SESSION_TOPIC_ID_ERROR: i16 = 106;
/// The most partitions one session holds.
pub(crate) const MAX_SESSION_PARTITIONS: usize = 100_000;

/// A connection's fetch session, if it has one.
#[derive(Debug, Default)]
pub(crate) struct FetchSessions {
    slot: Mutex<Option<Session>>,
}

#[derive(Debug)]
struct Session {
    id: i32,
    /// The epoch the next incremental fetch must carry.
    next_epoch: i32,
    /// Whether partitions are keyed by topic id (opened at v13+) or by name.
    uses_ids: bool,
    /// The partitions in the order they are read and answered.
    partitions: Vec<Cached>,
}

/// One partition of a session: what the client asks, and what it was last told.
#[derive(Debug, Clone)]
struct Cached {
    topic: TopicName,
    topic_id: Uuid,
    fetch: FetchPartition,
    high_watermark: i64,
    last_stable: i64,
    log_start: i64,
}

impl Cached {
    fn new(topic: &FetchTopic, fetch: &FetchPartition) -> Cached {
        Cached {
            topic: topic.topic.clone(),
            topic_id: topic.topic_id,
            fetch: fetch.clone(),
            // Never told anything: the first answer always includes it.
            high_watermark: -1,
            last_stable: -1,
            log_start: -1,
        }
    }

    fn key(&self) -> (TopicName, Uuid, i32) {
        (self.topic.clone(), self.topic_id, self.fetch.partition)
    }
}

/// How one fetch is served.
#[derive(Debug)]
pub(crate) enum Plan {
    /// Every partition the request asks for; `open`: keep them as a new session.
    Full { open: bool },
    /// Session `id`'s partitions, in its order, as `request` asks them.
    Incremental { id: i32, request: Box<FetchRequest> },
    /// Refused at the top level with this code.
    Refused(i16),
}

impl FetchSessions {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Session>> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How to serve `request` at `version`; an incremental fetch updates the session (its
    /// partitions and epoch) as Kafka does when it accepts one.
    pub(crate) fn plan(&self, version: i16, request: &FetchRequest) -> Plan {
        if version < SESSIONS_FROM {
            return Plan::Full { open: false };
        }
        let mut slot = self.slot();
        let (id, epoch) = (request.session_id, request.session_epoch);
        if epoch == FINAL_EPOCH || epoch == INITIAL_EPOCH {
            if id != 0 && slot.as_ref().is_some_and(|s| s.id == id) {
                *slot = None;
            }
            return Plan::Full {
                open: epoch == INITIAL_EPOCH,
            };
        }
        let Some(session) = slot.as_mut().filter(|s| s.id == id) else {
            return Plan::Refused(codes::FETCH_SESSION_ID_NOT_FOUND);
        };
        if session.next_epoch != epoch {
            return Plan::Refused(INVALID_FETCH_SESSION_EPOCH);
        }
        if session.uses_ids != (version >= TOPIC_IDS_FROM) {
            return Plan::Refused(FETCH_SESSION_TOPIC_ID_ERROR);
        }
        // Where each partition is in the session's order (one pass, not one per partition).
        let mut at: HashMap<(TopicName, Uuid, i32), usize> = session
            .partitions
            .iter()
            .enumerate()
            .map(|(i, c)| (c.key(), i))
            .collect();
        for topic in &request.topics {
            for p in &topic.partitions {
                let key = (topic.topic.clone(), topic.topic_id, p.partition);
                match at.get(&key) {
                    Some(&i) => session.partitions[i].fetch = p.clone(),
                    None => {
                        at.insert(key, session.partitions.len());
                        session.partitions.push(Cached::new(topic, p));
                    }
                }
            }
        }
        if !request.forgotten_topics_data.is_empty() {
            let forgotten: HashSet<(TopicName, Uuid, i32)> = request
                .forgotten_topics_data
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|&p| (t.topic.clone(), t.topic_id, p))
                })
                .collect();
            session.partitions.retain(|c| !forgotten.contains(&c.key()));
        }
        if session.partitions.len() > MAX_SESSION_PARTITIONS {
            *slot = None;
            return Plan::Refused(codes::FETCH_SESSION_ID_NOT_FOUND);
        }
        session.next_epoch = if epoch == i32::MAX { 1 } else { epoch + 1 };
        let read = request.clone().with_topics(runs(&session.partitions));
        Plan::Incremental {
            id,
            request: Box::new(read),
        }
    }

    /// The answer to `request` served as `plan` says, from `response` (one entry per asked
    /// partition, in the order read): a new session is kept, an incremental answer keeps
    /// only the partitions with something new and rotates those that returned records.
    pub(crate) fn finish(
        &self,
        version: i16,
        plan: &Plan,
        request: &FetchRequest,
        response: FetchResponse,
    ) -> FetchResponse {
        match plan {
            Plan::Refused(code) => FetchResponse::default().with_error_code(*code),
            Plan::Full { open: false } => response,
            Plan::Full { open: true } => self.open(version, request, response),
            Plan::Incremental { id, request } => self.incremental(*id, request, response),
        }
    }

    fn open(&self, version: i16, request: &FetchRequest, response: FetchResponse) -> FetchResponse {
        let mut partitions = Vec::new();
        for (topic, answered) in request.topics.iter().zip(&response.responses) {
            for (p, data) in topic.partitions.iter().zip(&answered.partitions) {
                let mut cached = Cached::new(topic, p);
                remember(&mut cached, data);
                partitions.push(cached);
            }
        }
        if partitions.len() > MAX_SESSION_PARTITIONS {
            return response;
        }
        let id = new_session_id();
        *self.slot() = Some(Session {
            id,
            next_epoch: 1,
            uses_ids: version >= TOPIC_IDS_FROM,
            partitions,
        });
        response.with_session_id(id)
    }

    fn incremental(&self, id: i32, read: &FetchRequest, response: FetchResponse) -> FetchResponse {
        let mut slot = self.slot();
        let Some(session) = slot.as_mut().filter(|s| s.id == id) else {
            // Replaced meanwhile (not on one connection, which serves one request at a time).
            return FetchResponse::default().with_error_code(codes::FETCH_SESSION_ID_NOT_FOUND);
        };
        let FetchResponse {
            responses,
            node_endpoints,
            error_code,
            throttle_time_ms,
            ..
        } = response;
        // The read request is the session's partitions in its order (built by `plan`, and
        // nothing changed the session since: a connection serves one request at a time), so
        // the i-th partition answered is the session's i-th.
        let mut kept: Vec<FetchableTopicResponse> = Vec::new();
        let mut rotate = vec![false; session.partitions.len()];
        let mut i = 0;
        for (topic, answered) in read.topics.iter().zip(responses) {
            let mut included = Vec::new();
            for data in answered.partitions.into_iter().take(topic.partitions.len()) {
                let Some(cached) = session.partitions.get_mut(i) else {
                    break;
                };
                let records = data.records.as_ref().map_or(0, |r| r.len());
                let changed = cached.high_watermark != data.high_watermark
                    || cached.last_stable != data.last_stable_offset
                    || cached.log_start != data.log_start_offset;
                remember(cached, &data);
                if records > 0 || changed || data.error_code != codes::NONE {
                    rotate[i] = records > 0;
                    included.push(data);
                }
                i += 1;
            }
            if !included.is_empty() {
                kept.push(
                    FetchableTopicResponse::default()
                        .with_topic(topic.topic.clone())
                        .with_topic_id(topic.topic_id)
                        .with_partitions(included),
                );
            }
        }
        // Those that returned records go to the end, in the order they were read.
        if rotate.iter().any(|r| *r) {
            let (last, first): (Vec<_>, Vec<_>) = std::mem::take(&mut session.partitions)
                .into_iter()
                .zip(rotate)
                .partition(|(_, r)| *r);
            session.partitions = first.into_iter().chain(last).map(|(c, _)| c).collect();
        }
        FetchResponse::default()
            .with_throttle_time_ms(throttle_time_ms)
            .with_error_code(error_code)
            .with_session_id(id)
            .with_responses(kept)
            .with_node_endpoints(node_endpoints)
    }
}

/// What a partition's answer told the client, kept for the next incremental fetch; an error
/// forgets the high watermark, so the partition is answered again once the error is gone.
fn remember(cached: &mut Cached, data: &kafka_protocol::messages::fetch_response::PartitionData) {
    if data.error_code != codes::NONE {
        cached.high_watermark = -1;
    } else {
        cached.high_watermark = data.high_watermark;
    }
    cached.last_stable = data.last_stable_offset;
    cached.log_start = data.log_start_offset;
}

/// The session's partitions as request topics, a new topic entry wherever the topic changes
/// (as Kafka's answer groups them).
fn runs(partitions: &[Cached]) -> Vec<FetchTopic> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for c in partitions {
        match topics.last_mut() {
            Some(last) if last.topic == c.topic && last.topic_id == c.topic_id => {
                last.partitions.push(c.fetch.clone());
            }
            _ => topics.push(
                FetchTopic::default()
                    .with_topic(c.topic.clone())
                    .with_topic_id(c.topic_id)
                    .with_partitions(vec![c.fetch.clone()]),
            ),
        }
    }
    topics
}

/// A session id: non-zero, positive, not reused soon (a process-wide sequence from a
/// start that differs between runs).
fn new_session_id() -> i32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let _ = NEXT.compare_exchange(0, seed | 1, Ordering::Relaxed, Ordering::Relaxed);
    let n = NEXT.fetch_add(1, Ordering::Relaxed) & 0x7fff_ffff;
    i32::try_from(n).ok().filter(|n| *n != 0).unwrap_or(1)
}
