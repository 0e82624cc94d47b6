//! Faults on demand and a record of what the broker saw, for tests of Kafka clients.
//!
//! A [`Faults`] registry is shared by every connection of one broker (the broker's context
//! holds it). A test sets rules on it — from Rust through
//! [`TestBroker::faults`](crate::testing::TestBroker::faults), from any language through the
//! control port (`--control-listen`, [`crate::control`]) — and reads back the requests the
//! broker received.
//!
//! # The rules
//!
//! - [`fail`](Faults::fail): the next `count` requests of an API (from every client, or
//!   from one client id) are not handled and are answered with a Kafka error code: the
//!   response of the request's API and version, with the code at its top level where the
//!   response has one, per partition for Produce, Fetch (and at the top level from v7),
//!   ListOffsets, OffsetCommit and OffsetFetch (v1 per partition, v2-7 at the top level,
//!   v8+ per group), per topic for Metadata before v13 (at the top level from v13), per
//!   key for FindCoordinator v4+ (at the top level before), at the top level for
//!   ConsumerGroupHeartbeat.
//!   An API whose response cannot carry an error is refused when the rule is set
//!   ([`FaultError::NoErrorField`]). librdkafka's `rd_kafka_mock_push_request_errors`.
//! - [`latency`](Faults::latency): every request of an API (from every client, or one)
//!   waits this long before it is handled, until cleared. librdkafka's
//!   `rd_kafka_mock_broker_set_rtt`, per API instead of per broker.
//! - [`drop_connection`](Faults::drop_connection): instead of answering the next `count`
//!   requests of an API (every client, or one), the broker closes that request's
//!   connection, unhandled. Other connections are untouched.
//! - [`clear`](Faults::clear): every rule goes.
//!
//! # Record faults
//!
//! - [`delete_records`](Faults::delete_records) of a topic (one partition or all), below an
//!   offset or all of them: what Kafka's DeleteRecords (`kafka-delete-records.sh`) or its
//!   retention do; a consumer positioned below the new log start gets OFFSET_OUT_OF_RANGE and
//!   resets as its `auto.offset.reset` says. kfake and librdkafka's mock have no such fault.
//!
//! # Group faults
//!
//! - [`kick`](Faults::kick) a member out of a group. A classic group: what Kafka does when an
//!   admin removes the member (`Admin.removeMembersFromConsumerGroup`, a LeaveGroup v3+
//!   naming it, KIP-345's batch leave): the member goes, the group rebalances (the others'
//!   next Heartbeat is REBALANCE_IN_PROGRESS) and the kicked member's next Heartbeat (or
//!   SyncGroup, or OffsetCommit per partition: whichever comes first) is UNKNOWN_MEMBER_ID, after which a client joins again with an
//!   empty member id. A consumer-protocol group (KIP-848): what Kafka's coordinator does when
//!   it fences a member (`consumerGroupFenceMember`: an admin's removal, an expired session):
//!   the member is removed and the group epoch bumped, so the others get a new assignment at
//!   their next heartbeat; the kicked member's next ConsumerGroupHeartbeat is
//!   UNKNOWN_MEMBER_ID (Kafka's answer for a member id the group does not hold;
//!   FENCED_MEMBER_EPOCH is its answer for a member it holds at another epoch), and the
//!   client joins again with epoch 0. librdkafka's mock has no such fault; kfake's nearest is
//!   a `ControlKey` answering the member's heartbeat with the error, which removes nobody.
//! - [`rebalance`](Faults::rebalance) a group. A classic group: what Kafka does when a
//!   member's metadata changes (`prepareRebalance`): a Stable or CompletingRebalance group
//!   goes to PreparingRebalance and its members' next Heartbeat is REBALANCE_IN_PROGRESS
//!   (they join again; one that does not within the rebalance timeout is removed, as
//!   always). A consumer-protocol group: the group epoch is bumped, as a subscription or
//!   metadata change bumps it, so the next heartbeat computes the target assignment again
//!   and every member moves to the new epoch (a KIP-848 member never sees
//!   REBALANCE_IN_PROGRESS).
//! - [`pause_coordinator`](Faults::pause_coordinator) /
//!   [`resume_coordinator`](Faults::resume_coordinator): while a group's coordinator is
//!   paused, every request about that group — FindCoordinator for it, JoinGroup, SyncGroup,
//!   Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ConsumerGroupHeartbeat — is answered
//!   COORDINATOR_NOT_AVAILABLE and not handled, as Kafka answers while the group's
//!   coordinator is moving (its `__consumer_offsets` partition has no leader, or the new one
//!   is not loaded yet). Other groups are untouched; nothing is lost: resume and the group is
//!   as it was. The group is the one the record names (the first key of a FindCoordinator v4+
//!   batch, the first group of an OffsetFetch v8+ batch: the whole request is refused).
//!   librdkafka's mock: `rd_kafka_mock_coordinator_set` to a broker that is down; kfake:
//!   `CoordinatorFor`.
//!
//! Differences: a pause does not stop the coordinator's timers (Kafka's new coordinator
//! restarts the members' sessions when it has loaded the group): a pause longer than a
//! member's session timeout expires it. TxnOffsetCommit (whose answer has no room for a
//! top-level error), DescribeGroups, ListGroups, DeleteGroups, OffsetDelete and
//! ConsumerGroupDescribe are served during a pause. Kafka names a member to remove by
//! instance id too; a kick names a member id (of a static member as well: it is removed for
//! good, not left for its instance to come back).
//!
//! A pause uses up no `fail` or `drop` rule (a latency still applies); [`clear`](Faults::clear)
//! resumes every paused coordinator.
//!
//! Rules of the same kind queue in the order they were set: two `fail` rules for Heartbeat
//! are used up one after the other (as the mock's pushed errors are). A `fail` and a `drop`
//! both matching a request: the older rule applies. Latency rules for the same API and
//! client replace each other; when several match a request (one for every client, one for
//! its client id), the longest applies.
//!
//! # Where they apply
//!
//! In the connection's handler, after the request frame is decoded, its version checked
//! (a version the broker does not serve is answered UNSUPPORTED_VERSION and never meets a
//! fault) and its connection authenticated (a request refused before SASL authentication
//! closes the connection as it always does), and before the API's handler runs: a failed or
//! dropped request has no effect at all, and a delayed one takes effect after its delay.
//! Differences from librdkafka's mock and franz-go's kfake:
//!
//! - The mock's RTT holds a handled request's response; here the request waits before it is
//!   handled, so its effect comes later too (as a slow network on the way in would).
//! - The mock's pushed errors belong to the cluster (or one broker) and apply to every
//!   client; here a rule can name one client id (kfake's `ControlKey` sees the client id
//!   and can do the same by hand).
//! - The mock answers a pushed error through each API's own handler code; kfake lets the
//!   control function build any response. Here the error answer is built from the request
//!   alone: the partitions and topics the request names, nothing else (no records, no
//!   offsets, no brokers in a Metadata answer).
//! - ACLs are not checked for a failed request: the fault comes first.
//!
//! # What the broker saw
//!
//! Every request that reached the hook above (and every request of an unserved version)
//! is recorded, in order, in a ring of the last `K` entries
//! ([`BrokerConfig::requests_recorded`](crate::BrokerConfig::requests_recorded), default
//! 10,000; 0 records nothing): a sequence number, the connection id, the API and version, the
//! client id, the group id for the group APIs that name one group, what happened to it, and
//! the top-level error code of its answer where the response has one (or the injected code).
//! [`requests_since`](Faults::requests_since) reads them from a sequence number on.

use std::any::Any;
use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coordinator_core::{Coordinator, GroupKind, LeavingMember, LogError, TopicPartition};
use kafka_protocol::messages::*;
use partition_log::PartitionLog;
use serde::Serialize;

use crate::api::registry;
use crate::manual_clock::{ClockAdvanced, ManualTimers};

/// The most rules a [`Faults`] holds at once; setting one more is refused
/// ([`FaultError::TooManyRules`]).
pub const MAX_RULES: usize = 1024;

/// The longest latency a rule may add (ten minutes): longer would only hold a connection
/// past any client's timeout.
pub const MAX_LATENCY_MS: u64 = 600_000;

/// Kafka's COORDINATOR_NOT_AVAILABLE: what a paused coordinator answers.
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;

/// The default number of requests [`Faults`] remembers.
pub const DEFAULT_REQUESTS_RECORDED: usize = 10_000;

/// The most bytes of a client id or group id kept in the record (longer ones are cut at a
/// character boundary).
const MAX_RECORDED_STRING: usize = 256;

/// Why a fault could not be set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FaultError {
    /// Already [`MAX_RULES`] rules.
    #[error("already {limit} fault rules: clear some first")]
    TooManyRules {
        /// [`MAX_RULES`].
        limit: usize,
    },
    /// The API name or number is not one of Kafka's.
    #[error("unknown API `{api}`: give a Kafka API name (Heartbeat, OffsetCommit, …) or key")]
    UnknownApi {
        /// What was given.
        api: String,
    },
    /// The API is one of Kafka's but this broker does not serve it.
    #[error("{api:?} is not served by this broker: no request of it can arrive")]
    NotServed {
        /// The API.
        api: ApiKey,
    },
    /// The API's response has no error code at some version this broker serves.
    #[error("{api:?} responses cannot carry an error code: use a drop or a latency fault")]
    NoErrorField {
        /// The API.
        api: ApiKey,
    },
    /// Error code 0 is no error.
    #[error("error code 0 is no error: give a Kafka error code (e.g. 27, REBALANCE_IN_PROGRESS)")]
    NoError,
    /// A count of zero requests.
    #[error("count must be at least 1")]
    ZeroCount,
    /// No group of that id (kick, rebalance).
    #[error("no group `{group}` on this broker")]
    UnknownGroup {
        /// The group id.
        group: String,
    },
    /// The member is not in the group (kick).
    #[error("no member `{member}` in group `{group}`")]
    UnknownMember {
        /// The group id.
        group: String,
        /// The member id.
        member: String,
    },
    /// The group is of a kind the fault does not apply to, or the coordinator refused.
    #[error("group `{group}`: {reason}")]
    Group {
        /// The group id.
        group: String,
        /// Why.
        reason: String,
    },
    /// No topic of that name, or no such partition of it (delete_records).
    #[error("{}", unknown_partition(topic, *partition))]
    UnknownPartition {
        /// The topic.
        topic: String,
        /// The partition asked for (`None`: the topic itself is unknown).
        partition: Option<u32>,
    },
    /// The log refused the deletion (an offset past the high watermark, a failed write);
    /// nothing of that partition changed.
    #[error("records of {topic}-{partition}: {reason}")]
    Records {
        /// The topic.
        topic: String,
        /// The partition.
        partition: u32,
        /// The log's refusal.
        reason: String,
    },
    /// The clock cannot be advanced: the broker runs on the OS clock.
    #[error("the broker runs on the OS clock: start it with --manual-clock to advance its clock")]
    NoManualClock,
    /// A latency above [`MAX_LATENCY_MS`].
    #[error("latency {ms} ms is above the most a fault may add, {max} ms")]
    LatencyTooLong {
        /// What was asked.
        ms: u64,
        /// [`MAX_LATENCY_MS`].
        max: u64,
    },
}

impl FaultError {
    /// A stable code for the error: `TOO_MANY_RULES`, `UNKNOWN_API`, `NOT_SERVED`,
    /// `NO_ERROR_FIELD`, `NO_ERROR`, `ZERO_COUNT`, `LATENCY_TOO_LONG`, `UNKNOWN_GROUP`,
    /// `UNKNOWN_MEMBER`, `GROUP`, `UNKNOWN_PARTITION`, `RECORDS`, `NO_MANUAL_CLOCK`.
    pub fn code(&self) -> &'static str {
        match self {
            FaultError::TooManyRules { .. } => "TOO_MANY_RULES",
            FaultError::UnknownApi { .. } => "UNKNOWN_API",
            FaultError::NotServed { .. } => "NOT_SERVED",
            FaultError::NoErrorField { .. } => "NO_ERROR_FIELD",
            FaultError::NoError => "NO_ERROR",
            FaultError::ZeroCount => "ZERO_COUNT",
            FaultError::LatencyTooLong { .. } => "LATENCY_TOO_LONG",
            FaultError::UnknownGroup { .. } => "UNKNOWN_GROUP",
            FaultError::UnknownMember { .. } => "UNKNOWN_MEMBER",
            FaultError::Group { .. } => "GROUP",
            FaultError::UnknownPartition { .. } => "UNKNOWN_PARTITION",
            FaultError::Records { .. } => "RECORDS",
            FaultError::NoManualClock => "NO_MANUAL_CLOCK",
        }
    }
}

fn unknown_partition(topic: &str, partition: Option<u32>) -> String {
    match partition {
        Some(p) => format!("no partition {p} of topic `{topic}` on this broker"),
        None => format!("no topic `{topic}` on this broker"),
    }
}

/// Kafka's API `name` (an [`ApiKey`] name such as `OffsetCommit`, any case) or its key as
/// a number (`8`).
///
/// # Errors
/// [`FaultError::UnknownApi`] when it is neither.
pub fn parse_api(name: &str) -> Result<ApiKey, FaultError> {
    let unknown = || FaultError::UnknownApi {
        api: name.chars().take(64).collect(),
    };
    let trimmed = name.trim();
    if let Ok(key) = trimmed.parse::<i16>() {
        return ApiKey::try_from(key).map_err(|()| unknown());
    }
    (0..=i16::from(u8::MAX))
        .filter_map(|k| ApiKey::try_from(k).ok())
        .find(|k| format!("{k:?}").eq_ignore_ascii_case(trimmed))
        .ok_or_else(unknown)
}

/// What happened to a recorded request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// Handled by its API's handler and answered.
    Answered,
    /// Handled, and not answered (Produce with `acks=0`).
    NoAnswer,
    /// Not handled: answered with the injected error code of a `fail` rule.
    Failed,
    /// Not handled: its connection was closed by a `drop` rule.
    Dropped,
    /// A version this broker does not serve: answered UNSUPPORTED_VERSION where the
    /// response can carry it, else the connection was closed.
    UnsupportedVersion,
    /// The handler could not answer (the connection was closed; see the broker's log).
    Error,
}

/// One request the broker received. See the [module](self) docs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeenRequest {
    /// The position in the record: 0 for the broker's first request, then one more each.
    pub seq: u64,
    /// The connection it came on (the id in the broker's log lines).
    pub connection: u64,
    /// The API.
    #[serde(serialize_with = "api_name")]
    pub api: ApiKey,
    /// The API's key.
    pub api_key: i16,
    /// The request's version.
    pub version: i16,
    /// The header's client id (empty without one; at most 256 bytes kept).
    pub client_id: String,
    /// The group the request is about, for JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
    /// OffsetCommit, OffsetFetch (one group, before v8; the first of a v8+ batch),
    /// ConsumerGroupHeartbeat, TxnOffsetCommit and FindCoordinator for a group.
    pub group_id: Option<String>,
    /// What happened to it.
    pub outcome: Outcome,
    /// The top-level error code of the answer, where the response has one, or the code a
    /// `fail` rule injected.
    pub error_code: Option<i16>,
}

impl SeenRequest {
    /// A request of `api` at `version` on `connection`, before the record numbers it; the
    /// client id is kept as [`bounded`] keeps it.
    pub(crate) fn new(
        connection: u64,
        api: ApiKey,
        version: i16,
        client_id: &str,
        group_id: Option<String>,
        outcome: Outcome,
        error_code: Option<i16>,
    ) -> SeenRequest {
        SeenRequest {
            seq: 0,
            connection,
            api,
            api_key: api as i16,
            version,
            client_id: bounded(client_id),
            group_id,
            outcome,
            error_code,
        }
    }
}

fn api_name<S: serde::Serializer>(api: &ApiKey, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{api:?}"))
}

/// The requests recorded from a sequence number on, as [`Faults::requests_since`] reads them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeenRequests {
    /// The recorded requests with `seq >= since`, oldest first.
    pub requests: Vec<SeenRequest>,
    /// The sequence number the next request will get: ask `since` it next time.
    pub next: u64,
    /// How many requests at or after `since` the record no longer holds (it keeps the last
    /// `K`).
    pub missed: u64,
}

/// Who a rule applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    api: ApiKey,
    /// `None`: every client.
    client_id: Option<String>,
}

impl Target {
    fn matches(&self, api: ApiKey, client_id: &str) -> bool {
        self.api == api && self.client_id.as_deref().is_none_or(|c| c == client_id)
    }
}

#[derive(Debug, Clone)]
enum Action {
    Fail { code: i16, left: u32 },
    Drop { left: u32 },
    Latency { ms: u64 },
}

#[derive(Debug, Clone)]
struct Rule {
    target: Target,
    action: Action,
}

/// What the hook does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Verdict {
    /// How long to wait before going on.
    pub(crate) delay: Option<Duration>,
    /// What to do instead of handling it, if anything.
    pub(crate) action: Option<Instead>,
}

/// Instead of handling a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Instead {
    /// Answer it with this error code.
    Fail(i16),
    /// Close its connection.
    Drop,
}

#[derive(Debug)]
struct Record {
    capacity: usize,
    entries: VecDeque<SeenRequest>,
    next: u64,
}

/// The broker's faults and its record of requests. See the [module](self) docs.
#[derive(Debug)]
pub struct Faults {
    rules: Mutex<Vec<Rule>>,
    /// Whether any rule is set or any coordinator paused: a request meets no lock when
    /// none is.
    active: AtomicBool,
    record: Mutex<Record>,
    /// The groups whose coordinator is paused (ids as [`bounded`] keeps them).
    paused: Mutex<BTreeSet<String>>,
    /// The broker's group coordinator, for the group faults (kick, rebalance).
    coordinator: Option<Arc<Coordinator>>,
    /// The broker's log, for the record faults (delete_records).
    log: Option<Arc<dyn PartitionLog>>,
    /// With `--manual-clock`: the clock the coordinators' timers follow.
    manual: Option<Arc<ManualTimers>>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults::new(DEFAULT_REQUESTS_RECORDED)
    }
}

impl Faults {
    /// No rules, and a record of the last `requests_recorded` requests (0: none).
    pub fn new(requests_recorded: usize) -> Faults {
        Faults {
            rules: Mutex::new(Vec::new()),
            active: AtomicBool::new(false),
            record: Mutex::new(Record {
                capacity: requests_recorded,
                entries: VecDeque::new(),
                next: 0,
            }),
            paused: Mutex::new(BTreeSet::new()),
            coordinator: None,
            log: None,
            manual: None,
        }
    }

    /// These faults over the broker's group coordinator (the group faults need it).
    pub(crate) fn with_coordinator(mut self, coordinator: Arc<Coordinator>) -> Faults {
        self.coordinator = Some(coordinator);
        self
    }

    /// These faults over the manual clock of the coordinators' timers (`--manual-clock`).
    pub(crate) fn with_manual_timers(mut self, timers: Arc<ManualTimers>) -> Faults {
        self.manual = Some(timers);
        self
    }

    /// The manual clock's timers, when the broker runs on one.
    pub(crate) fn manual_timers(&self) -> Option<&Arc<ManualTimers>> {
        self.manual.as_ref()
    }

    /// Moves the coordinators' clock `ms` forward and runs every timer due at the new time
    /// before returning (see [`crate::manual_clock`]): members whose session (or rebalance
    /// timeout) passed are expired and their groups rebalance, timed-out transactions are
    /// aborted. 0 runs what is due now. Kafka's coordinator tests do this with a `MockTime`;
    /// librdkafka's mock and kfake have no clock a test moves.
    ///
    /// # Errors
    /// [`FaultError::NoManualClock`] when the broker was not started with `--manual-clock`
    /// ([`BrokerConfig::manual_clock`](crate::BrokerConfig::manual_clock)).
    pub async fn advance_clock(&self, ms: u64) -> Result<ClockAdvanced, FaultError> {
        match &self.manual {
            Some(timers) => Ok(timers.advance(ms).await),
            None => Err(FaultError::NoManualClock),
        }
    }

    /// These faults over the broker's log (the record faults need it).
    pub(crate) fn with_log(mut self, log: Arc<dyn PartitionLog>) -> Faults {
        self.log = Some(log);
        self
    }

    /// Deletes the records of `topic` below `before` (every record: the high watermark,
    /// when `None`), in `partition` or in every partition of the topic, as Kafka's
    /// DeleteRecords (`kafka-delete-records.sh`) or its retention do: the log start moves
    /// up, and a consumer whose position is below it gets OFFSET_OUT_OF_RANGE and resets as
    /// its `auto.offset.reset` says. Returns each partition's new log start. Partitions are
    /// deleted one at a time: on an error, those before it stay deleted.
    ///
    /// # Errors
    /// [`FaultError::UnknownPartition`], [`FaultError::Records`] (the log refused: an offset
    /// past the high watermark, a failed write; that partition is unchanged).
    pub async fn delete_records(
        &self,
        topic: &str,
        partition: Option<u32>,
        before: Option<i64>,
    ) -> Result<Vec<(u32, i64)>, FaultError> {
        let unknown = |partition| FaultError::UnknownPartition {
            topic: topic.to_owned(),
            partition,
        };
        let Some(log) = self.log.as_ref() else {
            return Err(unknown(partition));
        };
        let refused = |partition, e: LogError| FaultError::Records {
            topic: topic.to_owned(),
            partition,
            reason: e.to_string(),
        };
        let count = log
            .topics()
            .await
            .map_err(|e| refused(partition.unwrap_or(0), e))?
            .into_iter()
            .find_map(|(name, count)| (name == topic).then_some(count))
            .ok_or_else(|| unknown(None))?;
        let partitions: Vec<u32> = match partition {
            Some(p) if p < count => vec![p],
            Some(p) => return Err(unknown(Some(p))),
            None => (0..count).collect(),
        };
        let mut starts = Vec::with_capacity(partitions.len());
        for p in partitions {
            let tp = TopicPartition::new(topic, p);
            let offset = match before {
                Some(offset) => offset,
                None => log.bounds(&tp).await.map_err(|e| refused(p, e))?.1,
            };
            let start = log
                .delete_records(&tp, offset)
                .await
                .map_err(|e| refused(p, e))?;
            starts.push((p, start));
        }
        Ok(starts)
    }

    fn rules(&self) -> std::sync::MutexGuard<'_, Vec<Rule>> {
        self.rules
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn add(&self, rule: Rule) -> Result<(), FaultError> {
        let mut rules = self.rules();
        if rules.len() >= MAX_RULES {
            return Err(FaultError::TooManyRules { limit: MAX_RULES });
        }
        rules.push(rule);
        self.settle(&rules);
        Ok(())
    }

    /// Answers the next `count` requests of `api` (from `client_id` only, if given) with
    /// Kafka error `code`, without handling them.
    ///
    /// # Errors
    /// [`FaultError::NotServed`], [`FaultError::NoErrorField`] (the API's response cannot
    /// carry an error at some version served), [`FaultError::NoError`] (code 0),
    /// [`FaultError::ZeroCount`], [`FaultError::TooManyRules`].
    pub fn fail(
        &self,
        api: ApiKey,
        code: i16,
        count: u32,
        client_id: Option<&str>,
    ) -> Result<(), FaultError> {
        let entry = registry::find(api).ok_or(FaultError::NotServed { api })?;
        if !entry.carries_errors() {
            return Err(FaultError::NoErrorField { api });
        }
        if code == 0 {
            return Err(FaultError::NoError);
        }
        if count == 0 {
            return Err(FaultError::ZeroCount);
        }
        self.add(Rule {
            target: target(api, client_id),
            action: Action::Fail { code, left: count },
        })
    }

    /// Closes the connection of each of the next `count` requests of `api` (from
    /// `client_id` only, if given) instead of handling and answering them.
    ///
    /// # Errors
    /// [`FaultError::NotServed`], [`FaultError::ZeroCount`], [`FaultError::TooManyRules`].
    pub fn drop_connection(
        &self,
        api: ApiKey,
        count: u32,
        client_id: Option<&str>,
    ) -> Result<(), FaultError> {
        registry::find(api).ok_or(FaultError::NotServed { api })?;
        if count == 0 {
            return Err(FaultError::ZeroCount);
        }
        self.add(Rule {
            target: target(api, client_id),
            action: Action::Drop { left: count },
        })
    }

    /// Delays every request of `api` (from `client_id` only, if given) by `ms` before it is
    /// handled, until [`clear`](Self::clear)ed; replaces a latency set before for the same
    /// API and client. `ms` 0 removes it.
    ///
    /// # Errors
    /// [`FaultError::NotServed`], [`FaultError::LatencyTooLong`],
    /// [`FaultError::TooManyRules`].
    pub fn latency(&self, api: ApiKey, ms: u64, client_id: Option<&str>) -> Result<(), FaultError> {
        registry::find(api).ok_or(FaultError::NotServed { api })?;
        if ms > MAX_LATENCY_MS {
            return Err(FaultError::LatencyTooLong {
                ms,
                max: MAX_LATENCY_MS,
            });
        }
        let target = target(api, client_id);
        let mut rules = self.rules();
        rules.retain(|r| !(matches!(r.action, Action::Latency { .. }) && r.target == target));
        if ms > 0 {
            if rules.len() >= MAX_RULES {
                return Err(FaultError::TooManyRules { limit: MAX_RULES });
            }
            rules.push(Rule {
                target,
                action: Action::Latency { ms },
            });
        }
        self.settle(&rules);
        Ok(())
    }

    /// Removes every rule and resumes every paused coordinator (the record stays).
    pub fn clear(&self) {
        let mut rules = self.rules();
        rules.clear();
        self.paused().clear();
        self.settle(&rules);
    }

    /// Kicks `member` out of `group` as an admin's removal does (see the
    /// [module](self) docs, "Group faults"): its next heartbeat is UNKNOWN_MEMBER_ID.
    ///
    /// # Errors
    /// [`FaultError::UnknownGroup`], [`FaultError::UnknownMember`], [`FaultError::Group`].
    pub async fn kick(&self, group: &str, member: &str) -> Result<(), FaultError> {
        let coordinator = self.coordinator(group)?;
        let refused = |e: coordinator_core::Error| FaultError::Group {
            group: group.to_owned(),
            reason: e.to_string(),
        };
        let unknown = || FaultError::UnknownMember {
            group: group.to_owned(),
            member: member.to_owned(),
        };
        let result = match coordinator.group_kind(group) {
            Some(GroupKind::Classic) => coordinator
                .classic()
                .leave(
                    group,
                    &[LeavingMember {
                        member_id: member.to_owned(),
                        group_instance_id: None,
                    }],
                )
                .await
                .map_err(refused)?,
            Some(GroupKind::Consumer) => coordinator
                .consumer()
                .remove_members(group, &[member])
                .await
                .map_err(refused)?,
            Some(GroupKind::Simple) => return Err(unknown()),
            Some(other) => {
                return Err(FaultError::Group {
                    group: group.to_owned(),
                    reason: format!(
                        "a {} group: kick needs a classic or consumer group",
                        other.as_str()
                    ),
                })
            }
            None => {
                return Err(FaultError::UnknownGroup {
                    group: group.to_owned(),
                })
            }
        };
        match result.into_iter().next() {
            Some(Ok(())) => Ok(()),
            _ => Err(unknown()),
        }
    }

    /// Starts a rebalance of `group` (see the [module](self) docs, "Group faults").
    /// Returns whether one started (`false`: a classic group already rebalancing, or
    /// Empty).
    ///
    /// # Errors
    /// [`FaultError::UnknownGroup`], [`FaultError::Group`].
    pub async fn rebalance(&self, group: &str) -> Result<bool, FaultError> {
        let coordinator = self.coordinator(group)?;
        let refused = |e: coordinator_core::Error| FaultError::Group {
            group: group.to_owned(),
            reason: e.to_string(),
        };
        match coordinator.group_kind(group) {
            Some(GroupKind::Classic) => coordinator
                .classic()
                .rebalance(group, "forced by a fault")
                .await
                .map_err(refused),
            Some(GroupKind::Consumer) => coordinator
                .consumer()
                .bump_epoch(group)
                .await
                .map(|_| true)
                .map_err(refused),
            Some(other) => Err(FaultError::Group {
                group: group.to_owned(),
                reason: format!(
                    "a {} group: rebalance needs a classic or consumer group",
                    other.as_str()
                ),
            }),
            None => Err(FaultError::UnknownGroup {
                group: group.to_owned(),
            }),
        }
    }

    fn coordinator(&self, group: &str) -> Result<&Coordinator, FaultError> {
        self.coordinator
            .as_deref()
            .ok_or_else(|| FaultError::Group {
                group: group.to_owned(),
                reason: "these faults are not a broker's: no group coordinator".into(),
            })
    }

    fn paused(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.paused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets `active` from the rules and the paused groups (the caller holds the rules).
    fn settle(&self, rules: &[Rule]) {
        let active = !rules.is_empty() || !self.paused().is_empty();
        self.active.store(active, Ordering::Release);
    }

    /// Pauses `group`'s coordinator: until [`resume_coordinator`](Self::resume_coordinator)
    /// (or [`clear`](Self::clear)), the requests about that group are answered
    /// COORDINATOR_NOT_AVAILABLE, unhandled. Returns whether it was running.
    pub fn pause_coordinator(&self, group: &str) -> bool {
        let rules = self.rules();
        let was_running = self.paused().insert(bounded(group));
        self.settle(&rules);
        was_running
    }

    /// Resumes `group`'s coordinator. Returns whether it was paused.
    pub fn resume_coordinator(&self, group: &str) -> bool {
        let rules = self.rules();
        let was_paused = self.paused().remove(&bounded(group));
        self.settle(&rules);
        was_paused
    }

    /// The groups whose coordinator is paused, in order.
    pub fn paused_coordinators(&self) -> Vec<String> {
        self.paused().iter().cloned().collect()
    }

    /// How many rules are set (a `fail` or `drop` rule goes once used up).
    pub fn rule_count(&self) -> usize {
        self.rules().len()
    }

    /// What the hook does with a request of `api` from `client_id`: uses up one request
    /// of the oldest `fail` or `drop` rule matching it.
    pub(crate) fn on_request(&self, api: ApiKey, client_id: &str, group: Option<&str>) -> Verdict {
        if !self.active.load(Ordering::Acquire) {
            return Verdict::default();
        }
        let mut rules = self.rules();
        if group.is_some_and(|g| self.paused().contains(g))
            && registry::find(api).is_some_and(registry::Entry::carries_errors)
        {
            // A paused coordinator: no rule is used up.
            let delay = rules
                .iter()
                .filter(|r| r.target.matches(api, client_id))
                .filter_map(|r| match r.action {
                    Action::Latency { ms } => Some(ms),
                    _ => None,
                })
                .max()
                .map(Duration::from_millis);
            return Verdict {
                delay,
                action: Some(Instead::Fail(COORDINATOR_NOT_AVAILABLE)),
            };
        }
        let delay = rules
            .iter()
            .filter(|r| r.target.matches(api, client_id))
            .filter_map(|r| match r.action {
                Action::Latency { ms } => Some(ms),
                _ => None,
            })
            .max()
            .map(Duration::from_millis);
        let mut action = None;
        let mut used_up = None;
        for (i, rule) in rules.iter_mut().enumerate() {
            if !rule.target.matches(api, client_id) {
                continue;
            }
            let left = match &mut rule.action {
                Action::Fail { code, left } => {
                    action = Some(Instead::Fail(*code));
                    left
                }
                Action::Drop { left } => {
                    action = Some(Instead::Drop);
                    left
                }
                Action::Latency { .. } => continue,
            };
            *left = left.saturating_sub(1);
            if *left == 0 {
                used_up = Some(i);
            }
            break;
        }
        if let Some(i) = used_up {
            rules.remove(i);
        }
        self.settle(&rules);
        Verdict { delay, action }
    }

    fn record_lock(&self) -> std::sync::MutexGuard<'_, Record> {
        self.record
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends a request to the record (its `seq` is given here).
    pub(crate) fn record(&self, mut seen: SeenRequest) {
        let mut record = self.record_lock();
        seen.seq = record.next;
        record.next += 1;
        if record.capacity == 0 {
            return;
        }
        if record.entries.len() >= record.capacity {
            record.entries.pop_front();
        }
        record.entries.push_back(seen);
    }

    /// The recorded requests with a sequence number of `since` or more, oldest first.
    pub fn requests_since(&self, since: u64) -> SeenRequests {
        let record = self.record_lock();
        let oldest = record.entries.front().map_or(record.next, |e| e.seq);
        SeenRequests {
            requests: record
                .entries
                .iter()
                .filter(|e| e.seq >= since)
                .cloned()
                .collect(),
            next: record.next,
            missed: oldest
                .saturating_sub(since)
                .min(record.next.saturating_sub(since)),
        }
    }

    /// Every recorded request still held, oldest first.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.requests_since(0).requests
    }
}

fn target(api: ApiKey, client_id: Option<&str>) -> Target {
    Target {
        api,
        client_id: client_id.map(str::to_owned),
    }
}

/// `s` cut to at most [`MAX_RECORDED_STRING`] bytes, at a character boundary.
pub(crate) fn bounded(s: &str) -> String {
    let mut end = s.len().min(MAX_RECORDED_STRING);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// The group a request is about, for the APIs that name one group.
pub(crate) fn group_of(request: &dyn Any, version: i16) -> Option<String> {
    let group = if let Some(r) = request.downcast_ref::<JoinGroupRequest>() {
        r.group_id.as_str()
    } else if let Some(r) = request.downcast_ref::<SyncGroupRequest>() {
        r.group_id.as_str()
    } else if let Some(r) = request.downcast_ref::<HeartbeatRequest>() {
        r.group_id.as_str()
    } else if let Some(r) = request.downcast_ref::<LeaveGroupRequest>() {
        r.group_id.as_str()
    } else if let Some(r) = request.downcast_ref::<OffsetCommitRequest>() {
        r.group_id.as_str()
    } else if let Some(r) = request.downcast_ref::<TxnOffsetCommitRequest>() {
        r.group_id.as_str()
    } else if let Some(r) = request.downcast_ref::<ConsumerGroupHeartbeatRequest>() {
        r.group_id.as_str()
    } else if let Some(r) = request.downcast_ref::<OffsetFetchRequest>() {
        if version < 8 {
            r.group_id.as_str()
        } else {
            r.groups.first()?.group_id.as_str()
        }
    } else if let Some(r) = request.downcast_ref::<FindCoordinatorRequest>() {
        // key type 0 is a group (1 a transactional id, 2 a share group)
        if r.key_type != 0 {
            return None;
        }
        if version < 4 {
            r.key.as_str()
        } else {
            r.coordinator_keys.first()?.as_str()
        }
    } else {
        return None;
    };
    Some(bounded(group))
}

/// The top-level error code of a response, for the responses that have one at `version`.
pub(crate) fn top_level_code(response: &dyn Any, version: i16) -> Option<i16> {
    macro_rules! always {
        ($($t:ty),* $(,)?) => {
            $(if let Some(r) = response.downcast_ref::<$t>() {
                return Some(r.error_code);
            })*
        };
    }
    always!(
        HeartbeatResponse,
        JoinGroupResponse,
        SyncGroupResponse,
        LeaveGroupResponse,
        ListGroupsResponse,
        ApiVersionsResponse,
        InitProducerIdResponse,
        AddOffsetsToTxnResponse,
        EndTxnResponse,
        ListTransactionsResponse,
        ConsumerGroupHeartbeatResponse,
        SaslHandshakeResponse,
        SaslAuthenticateResponse,
        DescribeClusterResponse,
    );
    if let Some(r) = response.downcast_ref::<OffsetFetchResponse>() {
        return (2..8).contains(&version).then_some(r.error_code);
    }
    if let Some(r) = response.downcast_ref::<FetchResponse>() {
        return (version >= 7).then_some(r.error_code);
    }
    if let Some(r) = response.downcast_ref::<FindCoordinatorResponse>() {
        return match r.coordinators.first() {
            Some(c) if version >= 4 => Some(c.error_code),
            _ => (version < 4).then_some(r.error_code),
        };
    }
    if let Some(r) = response.downcast_ref::<MetadataResponse>() {
        return (version >= 13).then_some(r.error_code);
    }
    None
}

/// The error answer of the APIs whose responses carry errors per partition (or per topic or
/// group), built from the request: `None` for the others (their answer is the generic one,
/// see [`registry`]).
pub(crate) fn per_partition_answer(
    key: ApiKey,
    request: &dyn Any,
    version: i16,
    correlation_id: i32,
    code: i16,
) -> Option<Result<bytes::BytesMut, String>> {
    if let Some(r) = request.downcast_ref::<ProduceRequest>() {
        let body = ProduceResponse::default().with_responses(
            r.topic_data
                .iter()
                .map(|t| {
                    produce_response::TopicProduceResponse::default()
                        .with_name(t.name.clone())
                        .with_topic_id(t.topic_id)
                        .with_partition_responses(
                            t.partition_data
                                .iter()
                                .map(|p| {
                                    produce_response::PartitionProduceResponse::default()
                                        .with_index(p.index)
                                        .with_error_code(code)
                                        .with_base_offset(-1)
                                        .with_log_append_time_ms(-1)
                                        .with_log_start_offset(-1)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
        return Some(crate::codec::encode_response(
            key,
            version,
            correlation_id,
            &body,
        ));
    }
    if let Some(r) = request.downcast_ref::<FetchRequest>() {
        let body = FetchResponse::default()
            .with_error_code(if version >= 7 { code } else { 0 })
            .with_session_id(0)
            .with_responses(
                r.topics
                    .iter()
                    .map(|t| {
                        fetch_response::FetchableTopicResponse::default()
                            .with_topic(t.topic.clone())
                            .with_topic_id(t.topic_id)
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        fetch_response::PartitionData::default()
                                            .with_partition_index(p.partition)
                                            .with_error_code(code)
                                            .with_high_watermark(-1)
                                            .with_last_stable_offset(-1)
                                            .with_log_start_offset(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        return Some(crate::codec::encode_response(
            key,
            version,
            correlation_id,
            &body,
        ));
    }
    if let Some(r) = request.downcast_ref::<ListOffsetsRequest>() {
        let body = ListOffsetsResponse::default().with_topics(
            r.topics
                .iter()
                .map(|t| {
                    list_offsets_response::ListOffsetsTopicResponse::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    list_offsets_response::ListOffsetsPartitionResponse::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(code)
                                        .with_timestamp(-1)
                                        .with_offset(-1)
                                        .with_leader_epoch(-1)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
        return Some(crate::codec::encode_response(
            key,
            version,
            correlation_id,
            &body,
        ));
    }
    if let Some(r) = request.downcast_ref::<OffsetCommitRequest>() {
        let body = OffsetCommitResponse::default().with_topics(
            r.topics
                .iter()
                .map(|t| {
                    offset_commit_response::OffsetCommitResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_topic_id(t.topic_id)
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    offset_commit_response::OffsetCommitResponsePartition::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
        return Some(crate::codec::encode_response(
            key,
            version,
            correlation_id,
            &body,
        ));
    }
    if let Some(r) = request.downcast_ref::<OffsetFetchRequest>() {
        let body = if version >= 8 {
            OffsetFetchResponse::default().with_groups(
                r.groups
                    .iter()
                    .map(|g| {
                        offset_fetch_response::OffsetFetchResponseGroup::default()
                            .with_group_id(g.group_id.clone())
                            .with_error_code(code)
                    })
                    .collect(),
            )
        } else {
            let partitions = r.topics.iter().flatten().map(|t| {
                offset_fetch_response::OffsetFetchResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partition_indexes
                            .iter()
                            .map(|&p| {
                                offset_fetch_response::OffsetFetchResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(-1)
                                    .with_committed_leader_epoch(-1)
                                    .with_metadata(Some(Default::default()))
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            });
            // v2-7 carry the error at the top level too; v1 only per partition.
            OffsetFetchResponse::default()
                .with_error_code(if version >= 2 { code } else { 0 })
                .with_topics(partitions.collect())
        };
        return Some(crate::codec::encode_response(
            key,
            version,
            correlation_id,
            &body,
        ));
    }
    if let Some(r) = request.downcast_ref::<FindCoordinatorRequest>() {
        // v0-3 at the top level, v4+ per key (no generic answer: FindCoordinator has no
        // UNSUPPORTED_VERSION answer of its own).
        let none = BrokerId(-1);
        let body = if version >= 4 {
            FindCoordinatorResponse::default().with_coordinators(
                r.coordinator_keys
                    .iter()
                    .map(|k| {
                        find_coordinator_response::Coordinator::default()
                            .with_key(k.clone())
                            .with_node_id(none)
                            .with_port(-1)
                            .with_error_code(code)
                    })
                    .collect(),
            )
        } else {
            FindCoordinatorResponse::default()
                .with_error_code(code)
                .with_node_id(none)
                .with_port(-1)
        };
        return Some(crate::codec::encode_response(
            key,
            version,
            correlation_id,
            &body,
        ));
    }
    if request.is::<ConsumerGroupHeartbeatRequest>() {
        // A top-level error, built here: ConsumerGroupHeartbeat has no UNSUPPORTED_VERSION
        // answer of its own to generalise.
        let body = ConsumerGroupHeartbeatResponse::default()
            .with_error_code(code)
            .with_member_epoch(-1);
        return Some(crate::codec::encode_response(
            key,
            version,
            correlation_id,
            &body,
        ));
    }
    if let Some(r) = request.downcast_ref::<MetadataRequest>() {
        let body = if version >= 13 {
            MetadataResponse::default().with_error_code(code)
        } else {
            MetadataResponse::default().with_topics(
                r.topics
                    .iter()
                    .flatten()
                    .map(|t| {
                        metadata_response::MetadataResponseTopic::default()
                            .with_error_code(code)
                            .with_name(t.name.clone())
                            .with_topic_id(t.topic_id)
                    })
                    .collect(),
            )
        };
        let body = body.with_controller_id(BrokerId(-1));
        return Some(crate::codec::encode_response(
            key,
            version,
            correlation_id,
            &body,
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(api: ApiKey) -> SeenRequest {
        SeenRequest {
            seq: 0,
            connection: 1,
            api,
            api_key: api as i16,
            version: 0,
            client_id: "c".into(),
            group_id: None,
            outcome: Outcome::Answered,
            error_code: None,
        }
    }

    #[test]
    fn api_names_and_numbers() {
        assert_eq!(parse_api("Heartbeat"), Ok(ApiKey::Heartbeat));
        assert_eq!(parse_api("offsetcommit"), Ok(ApiKey::OffsetCommit));
        assert_eq!(parse_api("12"), Ok(ApiKey::Heartbeat));
        assert_eq!(parse_api("Nope").map_err(|e| e.code()), Err("UNKNOWN_API"));
        assert_eq!(parse_api("9999").map_err(|e| e.code()), Err("UNKNOWN_API"));
    }

    #[test]
    fn fail_rules_are_used_up_in_order_and_per_client() {
        let f = Faults::default();
        f.fail(ApiKey::Heartbeat, 27, 2, Some("a")).unwrap();
        f.fail(ApiKey::Heartbeat, 25, 1, None).unwrap();
        let code = |c: &str| f.on_request(ApiKey::Heartbeat, c, None).action;
        assert_eq!(
            code("b"),
            Some(Instead::Fail(25)),
            "the rule for all, b's first"
        );
        assert_eq!(code("a"), Some(Instead::Fail(27)));
        assert_eq!(code("a"), Some(Instead::Fail(27)));
        assert_eq!(code("a"), None);
        assert_eq!(f.rule_count(), 0);
        assert_eq!(
            f.on_request(ApiKey::JoinGroup, "a", None),
            Verdict::default()
        );
    }

    #[test]
    fn refusals_are_typed() {
        let f = Faults::default();
        let err = |r: Result<(), FaultError>| r.unwrap_err().code();
        assert_eq!(err(f.fail(ApiKey::Heartbeat, 0, 1, None)), "NO_ERROR");
        assert_eq!(err(f.fail(ApiKey::Heartbeat, 27, 0, None)), "ZERO_COUNT");
        assert_eq!(
            err(f.fail(ApiKey::CreateDelegationToken, 1, 1, None)),
            "NOT_SERVED"
        );
        let e = f.fail(ApiKey::DescribeGroups, 16, 1, None).unwrap_err();
        assert_eq!(e.code(), "NO_ERROR_FIELD");
        assert!(e.to_string().contains("DescribeGroups"), "{e}");
        assert_eq!(
            err(f.latency(ApiKey::Fetch, MAX_LATENCY_MS + 1, None)),
            "LATENCY_TOO_LONG"
        );
        for _ in 0..MAX_RULES {
            f.drop_connection(ApiKey::Fetch, 1, None).unwrap();
        }
        assert_eq!(
            err(f.drop_connection(ApiKey::Fetch, 1, None)),
            "TOO_MANY_RULES"
        );
        f.clear();
        assert_eq!(f.rule_count(), 0);
    }

    #[test]
    fn a_paused_group_fails_its_group_requests_without_using_up_rules() {
        let f = Faults::default();
        f.fail(ApiKey::Heartbeat, 27, 1, None).unwrap();
        assert!(f.pause_coordinator("g"));
        let fail = Some(Instead::Fail(COORDINATOR_NOT_AVAILABLE));
        assert_eq!(f.on_request(ApiKey::Heartbeat, "c", Some("g")).action, fail);
        assert_eq!(
            f.on_request(ApiKey::OffsetFetch, "c", Some("g")).action,
            fail
        );
        assert_eq!(f.on_request(ApiKey::JoinGroup, "c", Some("h")).action, None);
        assert_eq!(f.rule_count(), 1, "the Heartbeat rule is still there");
        assert!(f.resume_coordinator("g"));
        assert!(!f.resume_coordinator("g"));
        assert_eq!(
            f.on_request(ApiKey::Heartbeat, "c", Some("g")).action,
            Some(Instead::Fail(27))
        );
        assert_eq!(
            f.on_request(ApiKey::Heartbeat, "c", Some("g")),
            Verdict::default()
        );
    }

    #[test]
    fn latency_replaces_and_the_longest_applies() {
        let f = Faults::default();
        f.latency(ApiKey::Fetch, 100, None).unwrap();
        f.latency(ApiKey::Fetch, 50, None).unwrap();
        f.latency(ApiKey::Fetch, 70, Some("a")).unwrap();
        assert_eq!(f.rule_count(), 2);
        let delay = |c: &str| f.on_request(ApiKey::Fetch, c, None).delay;
        assert_eq!(delay("a"), Some(Duration::from_millis(70)));
        assert_eq!(delay("b"), Some(Duration::from_millis(50)));
        f.latency(ApiKey::Fetch, 0, None).unwrap();
        assert_eq!(delay("b"), None);
    }

    #[test]
    fn the_record_is_a_ring_read_since_a_sequence_number() {
        let f = Faults::new(3);
        for _ in 0..5 {
            f.record(seen(ApiKey::Heartbeat));
        }
        let all = f.requests_since(0);
        assert_eq!(
            all.requests.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [2, 3, 4]
        );
        assert_eq!((all.next, all.missed), (5, 2));
        let later = f.requests_since(4);
        assert_eq!((later.requests.len(), later.missed), (1, 0));
        assert_eq!(f.requests_since(9).requests.len(), 0);
        let none = Faults::new(0);
        none.record(seen(ApiKey::Heartbeat));
        assert_eq!(none.requests_since(0).next, 1);
        assert!(none.requests().is_empty());
    }

    /// Every explicit error answer encodes at every version served and carries the code
    /// where that version has room for it.
    #[test]
    fn explicit_answers_carry_the_code_at_every_version() {
        use bytes::Bytes;
        use kafka_protocol::protocol::{Decodable, StrBytes};
        fn decode<R: Decodable>(frame: &bytes::BytesMut, key: ApiKey, version: i16) -> R {
            let start = 8 + usize::from(key.response_header_version(version) >= 1);
            let mut bytes = Bytes::copy_from_slice(&frame[start..]);
            let r = R::decode(&mut bytes, version).unwrap();
            assert!(bytes.is_empty(), "{key:?} v{version}");
            r
        }
        let name = TopicName(StrBytes::from_static_str("t"));
        let id = uuid::Uuid::from_u128(7);
        let code = 16;
        let versions = |key| {
            let e = registry::find(key).unwrap();
            e.decodable_min..=*e.versions.end()
        };
        let answer = |key, request: &dyn Any, v| {
            per_partition_answer(key, request, v, 1, code)
                .unwrap_or_else(|| panic!("{key:?}: an explicit answer"))
                .unwrap_or_else(|e| panic!("{key:?} v{v}: {e}"))
        };
        let produce = ProduceRequest::default().with_topic_data(vec![
            produce_request::TopicProduceData::default()
                .with_name(name.clone())
                .with_topic_id(id)
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default().with_index(1)
                ]),
        ]);
        for v in versions(ApiKey::Produce) {
            let r: ProduceResponse =
                decode(&answer(ApiKey::Produce, &produce, v), ApiKey::Produce, v);
            let p = &r.responses[0].partition_responses[0];
            assert_eq!((p.index, p.error_code), (1, code), "v{v}");
        }
        let fetch = FetchRequest::default().with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(name.clone())
            .with_topic_id(id)
            .with_partitions(vec![
                fetch_request::FetchPartition::default().with_partition(1)
            ])]);
        for v in versions(ApiKey::Fetch) {
            let r: FetchResponse = decode(&answer(ApiKey::Fetch, &fetch, v), ApiKey::Fetch, v);
            assert_eq!(r.responses[0].partitions[0].error_code, code, "v{v}");
        }
        let list = ListOffsetsRequest::default().with_topics(vec![
            list_offsets_request::ListOffsetsTopic::default()
                .with_name(name.clone())
                .with_partitions(vec![list_offsets_request::ListOffsetsPartition::default()]),
        ]);
        for v in versions(ApiKey::ListOffsets) {
            let r: ListOffsetsResponse = decode(
                &answer(ApiKey::ListOffsets, &list, v),
                ApiKey::ListOffsets,
                v,
            );
            assert_eq!(r.topics[0].partitions[0].error_code, code, "v{v}");
        }
        let commit = OffsetCommitRequest::default().with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(name.clone())
                .with_topic_id(id)
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default(),
                ]),
        ]);
        for v in versions(ApiKey::OffsetCommit) {
            let r: OffsetCommitResponse = decode(
                &answer(ApiKey::OffsetCommit, &commit, v),
                ApiKey::OffsetCommit,
                v,
            );
            assert_eq!(r.topics[0].partitions[0].error_code, code, "v{v}");
        }
        let offsets = OffsetFetchRequest::default()
            .with_topics(Some(vec![
                offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(name.clone())
                    .with_partition_indexes(vec![0]),
            ]))
            .with_groups(vec![
                offset_fetch_request::OffsetFetchRequestGroup::default(),
            ]);
        for v in versions(ApiKey::OffsetFetch) {
            let r: OffsetFetchResponse = decode(
                &answer(ApiKey::OffsetFetch, &offsets, v),
                ApiKey::OffsetFetch,
                v,
            );
            match v {
                1 => assert_eq!(r.topics[0].partitions[0].error_code, code),
                2..=7 => assert_eq!(r.error_code, code, "v{v}"),
                _ => assert_eq!(r.groups[0].error_code, code, "v{v}"),
            }
        }
        let metadata = MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(name.clone())),
        ]));
        for v in versions(ApiKey::Metadata) {
            let r: MetadataResponse =
                decode(&answer(ApiKey::Metadata, &metadata, v), ApiKey::Metadata, v);
            if v >= 13 {
                assert_eq!(r.error_code, code);
            } else {
                assert_eq!(r.topics[0].error_code, code, "v{v}");
            }
        }
        let find = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_static_str("g"))
            .with_coordinator_keys(vec![StrBytes::from_static_str("g")]);
        for v in versions(ApiKey::FindCoordinator) {
            let r: FindCoordinatorResponse = decode(
                &answer(ApiKey::FindCoordinator, &find, v),
                ApiKey::FindCoordinator,
                v,
            );
            let got = if v >= 4 {
                r.coordinators[0].error_code
            } else {
                r.error_code
            };
            assert_eq!(got, code, "v{v}");
        }
        let cgh = ConsumerGroupHeartbeatRequest::default();
        for v in versions(ApiKey::ConsumerGroupHeartbeat) {
            let key = ApiKey::ConsumerGroupHeartbeat;
            let r: ConsumerGroupHeartbeatResponse = decode(&answer(key, &cgh, v), key, v);
            assert_eq!(r.error_code, code, "v{v}");
        }
        let other = HeartbeatRequest::default();
        assert!(per_partition_answer(ApiKey::Heartbeat, &other, 0, 1, code).is_none());
    }

    #[test]
    fn strings_are_cut_at_a_boundary() {
        let long = "é".repeat(200);
        let cut = bounded(&long);
        assert!(cut.len() <= MAX_RECORDED_STRING && long.starts_with(&cut));
    }
}
