//! The consumer: a local assignment and fetch positions, kept apart from committed progress.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use coordinator_core::{
    CommittedOffsets, Coordinator, Generation, MemberAssignment, OffsetAndMetadata, OffsetMap,
    TopicPartition,
};
use tracing::{debug, info};

use crate::error::ConsumerError;
use crate::reset::AutoOffsetReset;
use crate::Record;
use crate::RecordSource;
use crate::{LogError, OutOfRange};

/// What a [`Consumer`] is created with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerConfig {
    /// The consumer group: where commits go, and the group `subscribe` joins. Non-empty.
    pub group_id: String,
    /// This consumer's member id in the group. Non-empty.
    pub member_id: String,
    /// Where a partition without a position starts (default [`AutoOffsetReset::Latest`]).
    pub auto_offset_reset: AutoOffsetReset,
    /// The assignment strategies this consumer supports, most preferred first (Kafka's
    /// `partition.assignment.strategy`). Empty: the coordinator's default strategy alone.
    pub assignment_strategies: Vec<String>,
}

impl ConsumerConfig {
    /// A configuration with the default reset policy.
    pub fn new(group_id: impl Into<String>, member_id: impl Into<String>) -> Self {
        ConsumerConfig {
            group_id: group_id.into(),
            member_id: member_id.into(),
            auto_offset_reset: AutoOffsetReset::default(),
            assignment_strategies: Vec::new(),
        }
    }

    /// Sets the strategies this consumer supports, most preferred first. The group uses one
    /// that every member supports (see `Coordinator::join_with_strategies`).
    #[must_use]
    pub fn assignment_strategies<I, S>(mut self, strategies: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.assignment_strategies = strategies.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the reset policy.
    #[must_use]
    pub fn auto_offset_reset(mut self, policy: AutoOffsetReset) -> Self {
        self.auto_offset_reset = policy;
        self
    }
}

/// What [`Consumer::publish`] commits: bare offsets or Kafka's `OffsetAndMetadata`.
#[derive(Clone, Copy)]
enum Publish<'a> {
    Plain(&'a OffsetMap),
    Full(&'a CommittedOffsets),
}

/// How the consumer got its partitions. The two ways exclude each other, as in Kafka.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Mode {
    /// Neither subscribed nor assigned yet.
    Idle,
    /// `assign`: partitions chosen by the caller; commits go straight to the store.
    Manual,
    /// `subscribe`: partitions chosen by the group; commits are fenced by `generation`.
    Subscribed {
        topics: Vec<String>,
        generation: Generation,
    },
}

/// A consumer of partitioned logs, for one member of one group.
///
/// It keeps three pieces of local state, exactly as the chapter describes, and never
/// confuses them with the coordinator's:
/// - the **assignment**: a local copy that changes only through [`subscribe`](Self::subscribe),
///   [`refresh_assignment`](Self::refresh_assignment) or [`assign`](Self::assign). A
///   rebalance is never pushed into it, so after another member joins it may be stale;
/// - the **generation** it joined under, which its commits carry and the coordinator fences;
/// - the **positions**: the next offset to fetch per partition. [`poll`](Self::poll) moves
///   them; only [`commit`](Self::commit) publishes them as the group's committed offsets.
///
/// Methods take `&mut self`: a consumer is one member, driven by one task at a time (Kafka's
/// consumer is not thread-safe either). Every refused call changes nothing.
pub struct Consumer {
    config: ConsumerConfig,
    coordinator: Arc<Coordinator>,
    source: Arc<dyn RecordSource>,
    mode: Mode,
    /// Sorted and unique.
    assignment: Vec<TopicPartition>,
    positions: BTreeMap<TopicPartition, i64>,
    /// The partition the last non-empty fetch came from; the next poll starts after it.
    last_served: Option<TopicPartition>,
    closed: bool,
}

impl fmt::Debug for Consumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("group_id", &self.config.group_id)
            .field("member_id", &self.config.member_id)
            .field("auto_offset_reset", &self.config.auto_offset_reset)
            .field("mode", &self.mode)
            .field("assignment", &self.assignment)
            .field("positions", &self.positions)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl Consumer {
    /// A consumer reading through `source` and coordinating through `coordinator`.
    ///
    /// Error: `INVALID_ARGUMENT` for an empty group or member id.
    pub fn new(
        config: ConsumerConfig,
        coordinator: Arc<Coordinator>,
        source: Arc<dyn RecordSource>,
    ) -> Result<Self, ConsumerError> {
        if config.group_id.is_empty() {
            return Err(ConsumerError::invalid("group id", "must not be empty"));
        }
        if config.member_id.is_empty() {
            return Err(ConsumerError::invalid("member id", "must not be empty"));
        }
        Ok(Consumer {
            config,
            coordinator,
            source,
            mode: Mode::Idle,
            assignment: Vec::new(),
            positions: BTreeMap::new(),
            last_served: None,
            closed: false,
        })
    }

    /// The group id.
    pub fn group_id(&self) -> &str {
        &self.config.group_id
    }

    /// The member id.
    pub fn member_id(&self) -> &str {
        &self.config.member_id
    }

    /// The reset policy.
    pub fn auto_offset_reset(&self) -> AutoOffsetReset {
        self.config.auto_offset_reset
    }

    /// The local assignment, sorted by topic then partition. Possibly stale: see
    /// [`refresh_assignment`](Self::refresh_assignment).
    pub fn assignment(&self) -> &[TopicPartition] {
        &self.assignment
    }

    /// The generation this consumer's assignment belongs to, once it has joined its group.
    pub fn generation(&self) -> Option<Generation> {
        match &self.mode {
            Mode::Subscribed { generation, .. } => Some(*generation),
            Mode::Idle | Mode::Manual => None,
        }
    }

    /// The subscribed topics (sorted), if the consumer subscribed.
    pub fn subscription(&self) -> Option<&[String]> {
        match &self.mode {
            Mode::Subscribed { topics, .. } => Some(topics),
            Mode::Idle | Mode::Manual => None,
        }
    }

    /// Every partition that has a position, with it: what [`commit`](Self::commit) would
    /// publish.
    pub fn positions(&self) -> OffsetMap {
        self.positions.clone()
    }

    /// Whether [`close`](Self::close) has completed.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    fn ensure_open(&self, operation: &'static str) -> Result<(), ConsumerError> {
        if self.closed {
            Err(ConsumerError::illegal_state(
                operation,
                "the consumer is closed",
            ))
        } else {
            Ok(())
        }
    }

    fn joined_generation(&self, operation: &'static str) -> Result<Generation, ConsumerError> {
        self.ensure_open(operation)?;
        self.generation().ok_or_else(|| {
            ConsumerError::illegal_state(
                operation,
                "the consumer has not joined a group: subscribe first",
            )
        })
    }

    fn ensure_assigned(&self, tp: &TopicPartition) -> Result<(), ConsumerError> {
        if self.assignment.binary_search(tp).is_ok() {
            Ok(())
        } else {
            Err(ConsumerError::NotAssigned {
                partition: tp.clone(),
            })
        }
    }

    /// Replaces the local assignment and drops the positions of partitions no longer in it.
    fn set_assignment(&mut self, mut partitions: Vec<TopicPartition>) {
        partitions.sort_unstable();
        partitions.dedup();
        self.positions
            .retain(|tp, _| partitions.binary_search(tp).is_ok());
        self.assignment = partitions;
    }

    /// Takes a group assignment (from a join or a refresh). A fetch position survives only
    /// for a partition this member has owned without interruption since the generation the
    /// position was made under: if another member can have owned it in between, that member
    /// may have committed past this position, and keeping it would move the group's committed
    /// offset backwards. Such a partition restarts from the committed offset, as Kafka's
    /// consumers do after a rebalance.
    fn apply_group_assignment(&mut self, current: MemberAssignment, topics: Option<Vec<String>>) {
        let known = self.generation();
        let MemberAssignment {
            generation,
            partitions,
            owned_since,
        } = current;
        let mut dropped = Vec::new();
        for (tp, since) in partitions.iter().zip(&owned_since) {
            let continuous =
                known.is_some_and(|g| *since <= g) && self.assignment.binary_search(tp).is_ok();
            if !continuous && self.positions.remove(tp).is_some() {
                dropped.push(tp.clone());
            }
        }
        if !dropped.is_empty() {
            debug!(group = %self.config.group_id, member = %self.config.member_id, generation = generation.get(), partitions = ?dropped, "positions dropped: another member may have owned these partitions since");
        }
        match (&mut self.mode, topics) {
            (_, Some(topics)) => self.mode = Mode::Subscribed { topics, generation },
            (Mode::Subscribed { generation: g, .. }, None) => *g = generation,
            _ => {}
        }
        self.set_assignment(partitions);
    }

    /// Assigns `partitions` manually: no group membership, no rebalances, and commits that go
    /// straight to the offset store without fencing. Duplicates are ignored; positions of
    /// partitions no longer assigned are dropped.
    ///
    /// Errors: `ILLEGAL_STATE` for a subscribed or closed consumer;
    /// `UNKNOWN_TOPIC_OR_PARTITION` naming every partition that does not exist.
    pub async fn assign<I>(&mut self, partitions: I) -> Result<(), ConsumerError>
    where
        I: IntoIterator<Item = TopicPartition>,
    {
        let partitions: Vec<TopicPartition> = partitions.into_iter().collect();
        self.ensure_open("assign")?;
        if matches!(self.mode, Mode::Subscribed { .. }) {
            return Err(ConsumerError::illegal_state(
                "assign",
                "the consumer is subscribed to its group; assign and subscribe exclude each other",
            ));
        }
        let mut unknown = Vec::new();
        let mut counts: BTreeMap<&str, Option<u32>> = BTreeMap::new();
        for tp in &partitions {
            let count = match counts.get(tp.topic()) {
                Some(count) => *count,
                None => {
                    let count = self.source.partition_count(tp.topic()).await?;
                    counts.insert(tp.topic(), count);
                    count
                }
            };
            if count.is_none_or(|n| tp.partition() >= n) {
                unknown.push(tp.clone());
            }
        }
        if !unknown.is_empty() {
            unknown.sort_unstable();
            unknown.dedup();
            return Err(ConsumerError::UnknownTopicOrPartition {
                partitions: unknown,
            });
        }
        self.mode = Mode::Manual;
        self.set_assignment(partitions);
        debug!(group = %self.config.group_id, member = %self.config.member_id, partitions = ?self.assignment, "assigned");
        Ok(())
    }

    /// Subscribes to `topics`: joins the group (or re-joins with new topics), then stores the
    /// returned generation and assignment. Positions survive only for partitions this member
    /// owned without interruption (see [`refresh_assignment`](Self::refresh_assignment)).
    /// Zero topics is allowed: the member then owns nothing.
    ///
    /// Errors: `ILLEGAL_STATE` after a manual `assign` or after close; the coordinator's join
    /// errors (`UNKNOWN_TOPIC`, …), which leave the consumer unchanged.
    pub async fn subscribe<S: AsRef<str>>(&mut self, topics: &[S]) -> Result<(), ConsumerError> {
        self.ensure_open("subscribe")?;
        if self.mode == Mode::Manual {
            return Err(ConsumerError::illegal_state(
                "subscribe",
                "the consumer has a manual assignment; subscribe and assign exclude each other",
            ));
        }
        let (group, member) = (&self.config.group_id, &self.config.member_id);
        let joined = if self.config.assignment_strategies.is_empty() {
            self.coordinator.join(group, member, topics).await?
        } else {
            let strategies = &self.config.assignment_strategies;
            self.coordinator
                .join_with_strategies(group, member, topics, strategies)
                .await?
        };
        let mut names: Vec<String> = topics.iter().map(|t| t.as_ref().to_string()).collect();
        names.sort_unstable();
        names.dedup();
        info!(group = %self.config.group_id, member = %self.config.member_id, generation = joined.generation.get(), partitions = joined.partitions.len(), "subscribed");
        self.apply_group_assignment(joined, Some(names));
        Ok(())
    }

    /// Copies the coordinator's current generation and assignment for this member. The only
    /// way a rebalance reaches a subscribed consumer.
    ///
    /// A fetch position survives only for a partition this member has owned without
    /// interruption since the generation the consumer last knew (the coordinator reports,
    /// per partition, the generation since which the member has owned it). After exactly one
    /// rebalance that left a partition with this member, its position stays; if another
    /// member can have owned it in between (and committed past this position), the position
    /// is dropped and the next poll starts from the committed offset, then the reset policy —
    /// so a stale position can never move the group's committed offset backwards.
    ///
    /// Errors: `ILLEGAL_STATE` before joining or after close; the coordinator's
    /// (`UNKNOWN_MEMBER` after expiry, `REBALANCE_IN_PROGRESS`, …).
    pub async fn refresh_assignment(&mut self) -> Result<(), ConsumerError> {
        self.joined_generation("refresh the assignment")?;
        let current = self
            .coordinator
            .assignment(&self.config.group_id, &self.config.member_id)
            .await?;
        debug!(group = %self.config.group_id, member = %self.config.member_id, generation = current.generation.get(), "assignment refreshed");
        self.apply_group_assignment(current, None);
        Ok(())
    }

    /// Extends this member's session lease with the stored generation. It commits nothing and
    /// changes no assignment.
    ///
    /// Errors: `ILLEGAL_STATE` before joining or after close; `ILLEGAL_GENERATION` if the
    /// group has moved on (refresh first); `UNKNOWN_MEMBER` after expiry.
    pub async fn heartbeat(&mut self) -> Result<(), ConsumerError> {
        let generation = self.joined_generation("heartbeat")?;
        self.coordinator
            .heartbeat(&self.config.group_id, &self.config.member_id, generation)
            .await?;
        Ok(())
    }

    /// Fetches up to `max_records` records from the assigned partitions and advances their
    /// positions past them.
    ///
    /// Partitions are visited in order, starting after the partition the previous poll
    /// last returned records from, so no partition starves: with `max_records = 1` and two
    /// non-empty partitions, two polls return one record from each. A partition without a
    /// position starts at the group's committed offset, or else where the reset policy says.
    /// A position outside the log is reset per policy and fetched once more (policy `error`:
    /// the error propagates). `max_records = 0` returns nothing.
    ///
    /// If the call fails, no position moves, so no record is skipped. (The rule "negative
    /// `max_records` is invalid" of docs/rules.md#consumer-poll cannot arise: it is a `usize`.)
    ///
    /// Errors: `ILLEGAL_STATE` after close; `OFFSET_OUT_OF_RANGE`; the log's and the offset
    /// store's errors.
    pub async fn poll(&mut self, max_records: usize) -> Result<Vec<Record>, ConsumerError> {
        self.ensure_open("poll")?;
        let n = self.assignment.len();
        let mut records = Vec::new();
        if n == 0 || max_records == 0 {
            return Ok(records);
        }
        let start = self.last_served.as_ref().map_or(0, |last| {
            self.assignment.partition_point(|tp| tp <= last) % n
        });
        // Positions are staged and applied only once every fetch has succeeded.
        let mut moved: Vec<(usize, i64)> = Vec::new();
        let mut last_served = None;
        for step in 0..n {
            let remaining = max_records.saturating_sub(records.len());
            if remaining == 0 {
                break;
            }
            let index = (start + step) % n;
            let tp = &self.assignment[index];
            let (from, fetched) = self.fetch_partition(tp, remaining).await?;
            let next = fetched.last().map_or(from, |r| r.offset.saturating_add(1));
            if !fetched.is_empty() {
                last_served = Some(index);
            }
            moved.push((index, next));
            records.extend(fetched);
        }
        for (index, next) in moved {
            self.positions.insert(self.assignment[index].clone(), next);
        }
        if let Some(index) = last_served {
            self.last_served = Some(self.assignment[index].clone());
        }
        Ok(records)
    }

    /// Fetches from `tp`'s position (initialising it if needed), resetting once if the
    /// position is out of range. Returns the offset fetched from and the records.
    async fn fetch_partition(
        &self,
        tp: &TopicPartition,
        max: usize,
    ) -> Result<(i64, Vec<Record>), ConsumerError> {
        let from = match self.positions.get(tp) {
            Some(&position) => position,
            None => self.initial_position(tp).await?,
        };
        match self.source.fetch(tp, from, max).await {
            Ok(records) => Ok((from, checked(tp, from, max, records)?)),
            Err(LogError::OffsetOutOfRange(OutOfRange {
                log_start,
                visible_end,
                ..
            })) if self.config.auto_offset_reset != AutoOffsetReset::Error => {
                let reset = match self.config.auto_offset_reset {
                    AutoOffsetReset::Earliest => log_start,
                    _ => visible_end,
                };
                info!(group = %self.config.group_id, member = %self.config.member_id, partition = %tp, from, to = reset, policy = %self.config.auto_offset_reset, "position out of range; resetting");
                let records = self.source.fetch(tp, reset, max).await?;
                Ok((reset, checked(tp, reset, max, records)?))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Where a partition without a position starts: the committed offset, else the policy.
    async fn initial_position(&self, tp: &TopicPartition) -> Result<i64, ConsumerError> {
        if let Some(committed) = self
            .coordinator
            .committed(&self.config.group_id, tp)
            .await?
        {
            return Ok(committed);
        }
        match self.config.auto_offset_reset {
            AutoOffsetReset::Earliest => Ok(self.source.log_start_offset(tp).await?),
            AutoOffsetReset::Latest => Ok(self.source.visible_end(tp).await?),
            AutoOffsetReset::Error => Err(ConsumerError::NoOffsetForPartition {
                partition: tp.clone(),
            }),
        }
    }

    /// The next offset this consumer will fetch from `tp`.
    ///
    /// Errors: `NOT_ASSIGNED`; `NO_POSITION` if no poll or seek has set it yet;
    /// `ILLEGAL_STATE` after close.
    pub fn position(&self, tp: &TopicPartition) -> Result<i64, ConsumerError> {
        self.ensure_open("read a position")?;
        self.ensure_assigned(tp)?;
        self.positions
            .get(tp)
            .copied()
            .ok_or_else(|| ConsumerError::NoPosition {
                partition: tp.clone(),
            })
    }

    /// Sets the next offset to fetch from `tp`. An offset outside the log is accepted here;
    /// the next poll resets it per policy.
    ///
    /// Errors: `NOT_ASSIGNED`; `INVALID_ARGUMENT` for a negative offset; `ILLEGAL_STATE`
    /// after close.
    pub fn seek(&mut self, tp: &TopicPartition, offset: i64) -> Result<(), ConsumerError> {
        self.ensure_open("seek")?;
        self.ensure_assigned(tp)?;
        if offset < 0 {
            return Err(ConsumerError::invalid(
                "offset",
                format!("cannot seek {tp} to {offset}: offsets are never negative"),
            ));
        }
        self.positions.insert(tp.clone(), offset);
        Ok(())
    }

    /// The group's committed next offset for `tp`, from the offset store (any partition, not
    /// only assigned ones).
    pub async fn committed(&self, tp: &TopicPartition) -> Result<Option<i64>, ConsumerError> {
        self.ensure_open("read a committed offset")?;
        Ok(self
            .coordinator
            .committed(&self.config.group_id, tp)
            .await?)
    }

    /// Publishes every current position as the group's committed offset and returns what was
    /// committed.
    ///
    /// A subscribed consumer commits through the coordinator under its stored generation, so
    /// a stale consumer is fenced (`ILLEGAL_GENERATION`) until it refreshes; a manually
    /// assigned one writes the store directly, without fencing.
    ///
    /// Errors: `ILLEGAL_STATE` before subscribe or assign, or after close; the coordinator's
    /// fencing and storage errors. A refused commit writes nothing.
    pub async fn commit(&mut self) -> Result<OffsetMap, ConsumerError> {
        let offsets = self.positions.clone();
        self.publish(Publish::Plain(&offsets)).await?;
        debug!(group = %self.config.group_id, member = %self.config.member_id, offsets = ?offsets, "committed");
        Ok(offsets)
    }

    /// Like [`commit`](Self::commit), with `metadata` beside every committed offset (Kafka's
    /// `commitSync(Map<TopicPartition, OffsetAndMetadata>)`), read back by
    /// [`committed_with_metadata`](Self::committed_with_metadata) where the store keeps it.
    ///
    /// Errors: those of `commit`, and `OFFSET_METADATA_TOO_LARGE` for metadata longer than
    /// the coordinator's `offset.metadata.max.bytes`.
    pub async fn commit_with_metadata(
        &mut self,
        metadata: &str,
    ) -> Result<CommittedOffsets, ConsumerError> {
        let offsets: CommittedOffsets = self
            .positions
            .iter()
            .map(|(tp, &o)| {
                (
                    tp.clone(),
                    OffsetAndMetadata::new(o).with_metadata(metadata),
                )
            })
            .collect();
        self.publish(Publish::Full(&offsets)).await?;
        Ok(offsets)
    }

    /// Publishes `offsets`: through the coordinator under the stored generation when
    /// subscribed (fenced), straight to the store when manually assigned.
    async fn publish(&self, offsets: Publish<'_>) -> Result<(), ConsumerError> {
        self.ensure_open("commit")?;
        let (group, member) = (&self.config.group_id, &self.config.member_id);
        let c = &self.coordinator;
        match (&self.mode, offsets) {
            (Mode::Subscribed { generation, .. }, Publish::Plain(o)) => {
                c.commit(group, member, *generation, o).await?
            }
            (Mode::Subscribed { generation, .. }, Publish::Full(o)) => {
                c.commit_with_metadata(group, member, *generation, o)
                    .await?
            }
            (Mode::Manual, Publish::Plain(o)) => c.commit_direct(group, o).await?,
            (Mode::Manual, Publish::Full(o)) => c.commit_direct_with_metadata(group, o).await?,
            (Mode::Idle, _) => {
                return Err(ConsumerError::illegal_state(
                    "commit",
                    "the consumer has neither subscribed nor been assigned partitions",
                ))
            }
        }
        Ok(())
    }

    /// The group's committed offset for `tp` with its metadata (empty from a store that
    /// keeps offsets only).
    pub async fn committed_with_metadata(
        &self,
        tp: &TopicPartition,
    ) -> Result<Option<OffsetAndMetadata>, ConsumerError> {
        self.ensure_open("read a committed offset")?;
        Ok(self
            .coordinator
            .committed_with_metadata(&self.config.group_id, tp)
            .await?)
    }

    /// How far this consumer is behind: `max(0, visible end − position)`.
    ///
    /// Errors: `NOT_ASSIGNED`, `NO_POSITION`, `ILLEGAL_STATE` after close; the log's errors.
    pub async fn lag(&self, tp: &TopicPartition) -> Result<i64, ConsumerError> {
        let position = self.position(tp)?;
        let end = self.source.visible_end(tp).await?;
        Ok(end.saturating_sub(position).max(0))
    }

    /// Closes the consumer: a subscribed one leaves its group (a rebalance hands its
    /// partitions to the others). Afterwards every call but `close` is refused with
    /// `ILLEGAL_STATE`. Closing twice is a no-op.
    ///
    /// If leaving fails, the consumer stays open and `close` may be retried.
    pub async fn close(&mut self) -> Result<(), ConsumerError> {
        if self.closed {
            return Ok(());
        }
        if matches!(self.mode, Mode::Subscribed { .. }) {
            self.coordinator
                .leave(&self.config.group_id, &self.config.member_id)
                .await?;
        }
        self.closed = true;
        self.assignment.clear();
        self.positions.clear();
        self.last_served = None;
        info!(group = %self.config.group_id, member = %self.config.member_id, "consumer closed");
        Ok(())
    }
}

/// Holds a record source to its contract (see [`RecordSource`]): at most `max` records of
/// `tp`, consecutive from `from`. A source that breaks it is refused as a storage failure
/// rather than trusted with the consumer's position.
fn checked(
    tp: &TopicPartition,
    from: i64,
    max: usize,
    records: Vec<Record>,
) -> Result<Vec<Record>, ConsumerError> {
    let broken = |what: String| {
        Err(ConsumerError::Log(LogError::Storage {
            message: format!(
                "the record source broke its contract fetching {tp} from {from}: {what}"
            ),
            source: None,
        }))
    };
    if records.len() > max {
        return broken(format!(
            "{} records returned, at most {max} asked for",
            records.len()
        ));
    }
    for (i, r) in records.iter().enumerate() {
        let expected = from.saturating_add(i as i64);
        if *r.topic != *tp.topic() || r.partition != tp.partition() || r.offset != expected {
            return broken(format!(
                "record {i} is {}-{} at offset {}, expected offset {expected}",
                r.topic, r.partition, r.offset
            ));
        }
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{tp, Fixture};
    use coordinator_core::mocks::MockOffsetStore;
    use AutoOffsetReset::{Earliest, Latest};

    fn offsets(records: &[Record]) -> Vec<(u32, i64)> {
        records.iter().map(|r| (r.partition, r.offset)).collect()
    }

    /// The futures of a consumer can move between threads (`tokio::spawn`).
    #[test]
    fn consumer_futures_are_send() {
        fn send<T: Send>(_: &T) {}
        let f = Fixture::new(1);
        let mut c = f.consumer("m", Earliest);
        send(&c.poll(1));
        send(&c.subscribe(&["t"]));
        send(&c.commit());
        send(&c);
    }

    #[test]
    fn ids_must_not_be_empty() {
        let f = Fixture::new(1);
        for (group, member, what) in [("", "m", "group id"), ("g", "", "member id")] {
            let config = ConsumerConfig::new(group, member);
            let err = Consumer::new(config, f.coordinator.clone(), f.log.clone()).unwrap_err();
            assert_eq!(err.code(), "INVALID_ARGUMENT");
            assert!(err.to_string().contains(what), "{err}");
        }
    }

    #[tokio::test]
    async fn assign_sorts_dedups_and_names_every_unknown_partition() {
        let f = Fixture::new(2);
        let mut c = f.consumer("m", Earliest);
        c.assign([tp(1), tp(0), tp(1)]).await.unwrap();
        assert_eq!(c.assignment(), [tp(0), tp(1)]);
        let bad = [tp(5), TopicPartition::new("nope", 0), tp(0), tp(2)];
        let err = c.assign(bad.clone()).await.unwrap_err();
        assert_eq!(err.code(), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(err.kafka_code(), Some(3));
        assert_eq!(
            err.to_string(),
            "unknown topic or partition: nope-0, t-2, t-5"
        );
        assert_eq!(
            c.assignment(),
            [tp(0), tp(1)],
            "a refused assign changes nothing"
        );
    }

    #[tokio::test]
    async fn reassigning_drops_positions_of_partitions_no_longer_assigned() {
        let f = Fixture::new(2);
        let mut c = f.consumer("m", Earliest);
        c.assign([tp(0), tp(1)]).await.unwrap();
        c.seek(&tp(0), 3).unwrap();
        c.seek(&tp(1), 4).unwrap();
        c.assign([tp(1)]).await.unwrap();
        assert_eq!(c.positions(), [(tp(1), 4)].into());
        assert_eq!(c.position(&tp(0)).unwrap_err().code(), "NOT_ASSIGNED");
    }

    #[tokio::test]
    async fn assign_and_subscribe_exclude_each_other() {
        let f = Fixture::new(2);
        let mut manual = f.consumer("m1", Earliest);
        manual.assign([tp(0)]).await.unwrap();
        let err = manual.subscribe(&["t"]).await.unwrap_err();
        assert_eq!(err.code(), "ILLEGAL_STATE");
        assert!(err.to_string().starts_with("cannot subscribe"), "{err}");
        assert!(f.coordinator.describe("g").await.is_err(), "nobody joined");

        let mut subscribed = f.consumer("m2", Earliest);
        subscribed.subscribe(&["t"]).await.unwrap();
        let err = subscribed.assign([tp(0)]).await.unwrap_err();
        assert_eq!(err.code(), "ILLEGAL_STATE");
        assert_eq!(subscribed.assignment(), [tp(0), tp(1)]);
    }

    #[tokio::test]
    async fn calls_that_need_a_group_are_refused_before_joining() {
        let f = Fixture::new(1);
        let mut idle = f.consumer("m", Earliest);
        assert_eq!(idle.heartbeat().await.unwrap_err().code(), "ILLEGAL_STATE");
        assert_eq!(
            idle.refresh_assignment().await.unwrap_err().code(),
            "ILLEGAL_STATE"
        );
        assert_eq!(idle.commit().await.unwrap_err().code(), "ILLEGAL_STATE");
        idle.assign([tp(0)]).await.unwrap();
        assert_eq!(idle.heartbeat().await.unwrap_err().code(), "ILLEGAL_STATE");
        assert_eq!(idle.generation(), None);
    }

    #[tokio::test]
    async fn a_failed_subscribe_changes_nothing() {
        let f = Fixture::new(1);
        let mut c = f.consumer("m", Earliest);
        let err = c.subscribe(&["t", "missing"]).await.unwrap_err();
        assert_eq!(err.code(), "UNKNOWN_TOPIC");
        assert_eq!(c.generation(), None);
        assert!(c.assignment().is_empty());
        assert_eq!(c.heartbeat().await.unwrap_err().code(), "ILLEGAL_STATE");
    }

    #[tokio::test]
    async fn heartbeat_uses_the_stored_generation() {
        let f = Fixture::new(2);
        let mut a = f.consumer("a", Earliest);
        a.subscribe(&["t"]).await.unwrap();
        a.heartbeat().await.unwrap();
        let mut b = f.consumer("b", Earliest);
        b.subscribe(&["t"]).await.unwrap();
        let err = a.heartbeat().await.unwrap_err();
        assert_eq!(err.code(), "ILLEGAL_GENERATION");
        assert!(err.is_fenced());
        a.refresh_assignment().await.unwrap();
        assert_eq!(a.generation(), b.generation());
        a.heartbeat().await.unwrap();
        assert_eq!(a.subscription(), Some(&["t".to_string()][..]));
    }

    #[tokio::test]
    async fn refresh_copies_the_coordinators_view_and_drops_lost_positions() {
        let f = Fixture::new(2);
        f.fill(0, 2);
        f.fill(1, 2);
        let mut a = f.consumer("a", Earliest);
        a.subscribe(&["t"]).await.unwrap();
        assert_eq!(a.poll(10).await.unwrap().len(), 4);
        let mut b = f.consumer("b", Earliest);
        b.subscribe(&["t"]).await.unwrap();
        assert_eq!(
            a.assignment(),
            [tp(0), tp(1)],
            "no push: still the old view"
        );
        a.refresh_assignment().await.unwrap();
        assert_eq!(a.assignment(), [tp(0)]);
        assert_eq!(b.assignment(), [tp(1)]);
        assert_eq!(a.positions(), [(tp(0), 2)].into());
    }

    #[tokio::test]
    async fn first_poll_starts_at_the_committed_offset_else_per_policy() {
        let f = Fixture::new(3);
        for p in 0..3 {
            f.fill(p, 5);
        }
        f.coordinator
            .commit_direct("g", &[(tp(0), 3)].into())
            .await
            .unwrap();
        let mut earliest = f.consumer("e", Earliest);
        earliest.assign([tp(0), tp(1)]).await.unwrap();
        let got = offsets(&earliest.poll(100).await.unwrap());
        assert_eq!(
            got,
            [(0, 3), (0, 4), (1, 0), (1, 1), (1, 2), (1, 3), (1, 4)]
        );
        assert_eq!(earliest.position(&tp(0)).unwrap(), 5);

        let mut latest = f.consumer("l", Latest);
        latest.assign([tp(2)]).await.unwrap();
        assert!(latest.poll(100).await.unwrap().is_empty());
        assert_eq!(
            latest.position(&tp(2)).unwrap(),
            5,
            "latest starts at the log end"
        );
        f.log.append(&tp(2), "new").unwrap();
        assert_eq!(offsets(&latest.poll(100).await.unwrap()), [(2, 5)]);
    }

    #[tokio::test]
    async fn policy_error_without_a_committed_offset_refuses_and_moves_nothing() {
        let f = Fixture::new(2);
        f.fill(0, 3);
        f.fill(1, 3);
        let mut c = f.consumer("m", AutoOffsetReset::Error);
        c.assign([tp(0), tp(1)]).await.unwrap();
        c.seek(&tp(0), 1).unwrap();
        let err = c.poll(10).await.unwrap_err();
        assert!(
            matches!(err, ConsumerError::NoOffsetForPartition { ref partition } if *partition == tp(1))
        );
        assert_eq!(err.code(), "OFFSET_OUT_OF_RANGE");
        assert_eq!(
            c.position(&tp(0)).unwrap(),
            1,
            "tp0's records were not handed out"
        );
        c.seek(&tp(1), 0).unwrap();
        assert_eq!(c.poll(10).await.unwrap().len(), 5);
    }

    #[tokio::test]
    async fn out_of_range_positions_reset_per_policy() {
        let f = Fixture::new(1);
        f.fill(0, 10);
        f.log.advance_log_start(&tp(0), 4).unwrap();
        for (policy, seek_to, expect_first, expect_position) in [
            (Earliest, 2, Some(4), 10),
            (Earliest, 11, Some(4), 10),
            (Latest, 2, None, 10),
            (Latest, 11, None, 10),
        ] {
            let mut c = f.consumer("m", policy);
            c.assign([tp(0)]).await.unwrap();
            c.seek(&tp(0), seek_to).unwrap();
            let records = c.poll(100).await.unwrap();
            assert_eq!(
                records.first().map(|r| r.offset),
                expect_first,
                "{policy} from {seek_to}"
            );
            assert_eq!(c.position(&tp(0)).unwrap(), expect_position);
        }
    }

    #[tokio::test]
    async fn out_of_range_with_policy_error_propagates_and_keeps_the_position() {
        let f = Fixture::new(1);
        f.fill(0, 10);
        f.log.advance_log_start(&tp(0), 4).unwrap();
        let mut c = f.consumer("m", AutoOffsetReset::Error);
        c.assign([tp(0)]).await.unwrap();
        for bad in [2, 11] {
            c.seek(&tp(0), bad).unwrap();
            let err = c.poll(100).await.unwrap_err();
            assert!(
                matches!(err, ConsumerError::OffsetOutOfRange(OutOfRange { offset, log_start: 4, visible_end: 10, .. }) if offset == bad),
                "{err:?}"
            );
            assert_eq!(err.kafka_code(), Some(1));
            assert_eq!(c.position(&tp(0)).unwrap(), bad);
        }
    }

    #[tokio::test]
    async fn a_committed_offset_removed_by_retention_resets_too() {
        let f = Fixture::new(1);
        f.fill(0, 10);
        f.coordinator
            .commit_direct("g", &[(tp(0), 2)].into())
            .await
            .unwrap();
        f.log.advance_log_start(&tp(0), 6).unwrap();
        let mut c = f.consumer("m", Earliest);
        c.assign([tp(0)]).await.unwrap();
        assert_eq!(c.poll(1).await.unwrap()[0].offset, 6);
        let mut strict = f.consumer("s", AutoOffsetReset::Error);
        strict.assign([tp(0)]).await.unwrap();
        assert_eq!(
            strict.poll(1).await.unwrap_err().code(),
            "OFFSET_OUT_OF_RANGE"
        );
    }

    #[tokio::test]
    async fn records_above_the_high_watermark_are_never_returned() {
        let f = Fixture::new(1);
        f.log.set_high_watermark(&tp(0), Some(0)).unwrap();
        f.fill(0, 5);
        f.log.set_high_watermark(&tp(0), Some(3)).unwrap();
        let mut latest = f.consumer("l", Latest);
        latest.assign([tp(0)]).await.unwrap();
        assert!(latest.poll(10).await.unwrap().is_empty());
        assert_eq!(
            latest.position(&tp(0)).unwrap(),
            3,
            "latest is the visible end"
        );
        let mut earliest = f.consumer("e", Earliest);
        earliest.assign([tp(0)]).await.unwrap();
        assert_eq!(
            offsets(&earliest.poll(10).await.unwrap()),
            [(0, 0), (0, 1), (0, 2)]
        );
        assert_eq!(earliest.lag(&tp(0)).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn poll_rotates_so_no_partition_starves() {
        let f = Fixture::new(3);
        f.fill(0, 3);
        f.fill(2, 3);
        let mut c = f.consumer("m", Earliest);
        c.assign([tp(0), tp(1), tp(2)]).await.unwrap();
        let mut served = Vec::new();
        for _ in 0..4 {
            served.extend(offsets(&c.poll(1).await.unwrap()));
        }
        assert_eq!(served, [(0, 0), (2, 0), (0, 1), (2, 1)]);
        assert_eq!(offsets(&c.poll(3).await.unwrap()), [(0, 2), (2, 2)]);
    }

    #[tokio::test]
    async fn poll_zero_and_poll_without_partitions_return_nothing() {
        let f = Fixture::new(1);
        f.fill(0, 2);
        let mut c = f.consumer("m", Earliest);
        assert!(c.poll(5).await.unwrap().is_empty());
        c.assign([tp(0)]).await.unwrap();
        assert!(c.poll(0).await.unwrap().is_empty());
        assert_eq!(c.position(&tp(0)).unwrap_err().code(), "NO_POSITION");
    }

    #[tokio::test]
    async fn position_seek_and_lag_refuse_bad_calls() {
        let f = Fixture::new(2);
        f.fill(0, 4);
        let mut c = f.consumer("m", Earliest);
        c.assign([tp(0)]).await.unwrap();
        assert_eq!(c.position(&tp(1)).unwrap_err().code(), "NOT_ASSIGNED");
        assert_eq!(c.seek(&tp(1), 0).unwrap_err().code(), "NOT_ASSIGNED");
        assert_eq!(c.lag(&tp(1)).await.unwrap_err().code(), "NOT_ASSIGNED");
        assert_eq!(c.position(&tp(0)).unwrap_err().code(), "NO_POSITION");
        assert_eq!(c.lag(&tp(0)).await.unwrap_err().code(), "NO_POSITION");
        let err = c.seek(&tp(0), -1).unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT");
        assert_eq!(c.position(&tp(0)).unwrap_err().code(), "NO_POSITION");
        c.seek(&tp(0), 1).unwrap();
        assert_eq!(c.lag(&tp(0)).await.unwrap(), 3);
        c.seek(&tp(0), 9).unwrap();
        assert_eq!(c.lag(&tp(0)).await.unwrap(), 0, "never negative");
    }

    #[tokio::test]
    async fn manual_commit_writes_every_position_to_the_store_once() {
        let mut store = MockOffsetStore::new();
        store.expect_committed().returning(|_, _| Ok(None));
        store
            .expect_commit()
            .withf(|group, offsets, _| {
                group == "g" && *offsets == OffsetMap::from([(tp(0), 2), (tp(1), 0)])
            })
            .times(1)
            .returning(|_, _, _| Ok(()));
        let f = Fixture::with_store(2, Arc::new(store));
        f.fill(0, 2);
        let mut c = f.consumer("m", Earliest);
        c.assign([tp(0), tp(1)]).await.unwrap();
        c.poll(10).await.unwrap();
        let committed = c.commit().await.unwrap();
        assert_eq!(committed, [(tp(0), 2), (tp(1), 0)].into());
    }

    #[tokio::test]
    async fn a_fenced_commit_never_reaches_the_store() {
        let mut store = MockOffsetStore::new();
        store.expect_committed().returning(|_, _| Ok(None));
        store
            .expect_commit()
            .withf(|_, _, fence| fence.is_held())
            .times(1)
            .returning(|_, _, _| Ok(()));
        let f = Fixture::with_store(2, Arc::new(store));
        f.fill(0, 1);
        let mut a = f.consumer("a", Earliest);
        a.subscribe(&["t"]).await.unwrap();
        a.poll(10).await.unwrap();
        f.consumer("b", Earliest).subscribe(&["t"]).await.unwrap();
        assert_eq!(a.commit().await.unwrap_err().code(), "ILLEGAL_GENERATION");
        a.refresh_assignment().await.unwrap();
        a.commit().await.unwrap(); // the one allowed store write
    }

    #[tokio::test]
    async fn commit_with_metadata_reads_back_through_the_group() {
        let store = Arc::new(offset_store::MemoryStore::new());
        let f = Fixture::with_store(1, store.clone());
        f.fill(0, 3);
        let mut c = f.consumer("m", Earliest);
        c.subscribe(&["t"]).await.unwrap();
        c.poll(10).await.unwrap();
        c.commit_with_metadata("batch-1").await.unwrap();
        let read = c.committed_with_metadata(&tp(0)).await.unwrap().unwrap();
        assert_eq!((read.offset, read.metadata.as_str()), (3, "batch-1"));
        let too_long = "x".repeat(coordinator_core::DEFAULT_OFFSET_METADATA_MAX_BYTES + 1);
        let err = c.commit_with_metadata(&too_long).await.unwrap_err();
        assert_eq!(
            (err.code(), err.kafka_code()),
            ("OFFSET_METADATA_TOO_LARGE", Some(12))
        );
        assert_eq!(
            c.committed_with_metadata(&tp(0))
                .await
                .unwrap()
                .unwrap()
                .metadata,
            "batch-1",
            "the refused commit changed nothing"
        );
    }

    #[tokio::test]
    async fn a_failed_store_write_commits_nothing_and_keeps_positions() {
        let store = Arc::new(offset_store::MemoryStore::new());
        let f = Fixture::with_store(1, store.clone());
        f.fill(0, 3);
        let mut c = f.consumer("m", Earliest);
        c.subscribe(&["t"]).await.unwrap();
        c.poll(2).await.unwrap();
        store.set_failing(true);
        let err = c.commit().await.unwrap_err();
        assert_eq!(err.code(), "STORAGE_ERROR");
        assert_eq!(err.kafka_code(), Some(56));
        store.set_failing(false);
        assert_eq!(c.committed(&tp(0)).await.unwrap(), None);
        assert_eq!(c.position(&tp(0)).unwrap(), 2);
        c.commit().await.unwrap();
        assert_eq!(c.committed(&tp(0)).await.unwrap(), Some(2));
    }

    /// A source in front of the log that counts fetches and can refuse every one as out of
    /// range, to check how often the consumer fetches (and that any source will do) — or
    /// break the port's contract, returning `extra` records too many or starting `skip`
    /// records late.
    #[derive(Default)]
    struct CountingSource {
        log: Arc<partition_log::MemoryLog>,
        fetches: std::sync::atomic::AtomicUsize,
        always_out_of_range: bool,
        extra: usize,
        skip: i64,
    }

    #[async_trait::async_trait]
    impl RecordSource for CountingSource {
        async fn partition_count(&self, topic: &str) -> Result<Option<u32>, LogError> {
            self.log.partition_count(topic).await
        }
        async fn log_start_offset(&self, tp: &TopicPartition) -> Result<i64, LogError> {
            self.log.log_start_offset(tp).await
        }
        async fn visible_end(&self, tp: &TopicPartition) -> Result<i64, LogError> {
            self.log.visible_end(tp).await
        }
        async fn fetch(
            &self,
            tp: &TopicPartition,
            from: i64,
            max: usize,
        ) -> Result<Vec<Record>, LogError> {
            self.fetches
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if self.always_out_of_range {
                return Err(LogError::OffsetOutOfRange(OutOfRange {
                    partition: tp.clone(),
                    offset: from,
                    log_start: 0,
                    visible_end: 0,
                }));
            }
            self.log.fetch(tp, from + self.skip, max + self.extra).await
        }
    }

    async fn fetches_for_one_poll(
        policy: AutoOffsetReset,
        always_out_of_range: bool,
    ) -> (usize, Result<Vec<Record>, ConsumerError>) {
        let f = Fixture::new(1);
        f.fill(0, 5);
        let source = Arc::new(CountingSource {
            log: f.log.clone(),
            always_out_of_range,
            ..CountingSource::default()
        });
        let config = ConsumerConfig::new("g", "m").auto_offset_reset(policy);
        let mut c = Consumer::new(config, f.coordinator.clone(), source.clone()).unwrap();
        c.assign([tp(0)]).await.unwrap();
        c.seek(&tp(0), 99).unwrap();
        let result = c.poll(10).await;
        (
            source.fetches.load(std::sync::atomic::Ordering::Relaxed),
            result,
        )
    }

    #[tokio::test]
    async fn an_out_of_range_fetch_is_retried_exactly_once() {
        let (fetches, result) = fetches_for_one_poll(Earliest, false).await;
        assert_eq!(
            (fetches, result.unwrap().len()),
            (2, 5),
            "reset, then one retry"
        );
        let (fetches, result) = fetches_for_one_poll(AutoOffsetReset::Error, false).await;
        assert_eq!(fetches, 1, "policy error: no retry");
        assert_eq!(result.unwrap_err().code(), "OFFSET_OUT_OF_RANGE");
        for policy in [Earliest, Latest] {
            let (fetches, result) = fetches_for_one_poll(policy, true).await;
            assert_eq!(
                fetches, 2,
                "{policy}: the retry's failure is not retried again"
            );
            assert_eq!(result.unwrap_err().code(), "OFFSET_OUT_OF_RANGE");
        }
    }

    #[tokio::test]
    async fn a_source_breaking_its_contract_is_refused_and_moves_nothing() {
        for (extra, skip) in [(3, 0), (0, 1)] {
            let f = Fixture::new(1);
            f.fill(0, 10);
            let source = Arc::new(CountingSource {
                log: f.log.clone(),
                extra,
                skip,
                ..CountingSource::default()
            });
            let config = ConsumerConfig::new("g", "m").auto_offset_reset(Earliest);
            let mut c = Consumer::new(config, f.coordinator.clone(), source).unwrap();
            c.assign([tp(0)]).await.unwrap();
            c.seek(&tp(0), 2).unwrap();
            let err = c.poll(2).await.unwrap_err();
            assert_eq!(
                err.code(),
                "STORAGE_ERROR",
                "extra {extra}, skip {skip}: {err}"
            );
            assert!(err.to_string().contains("broke its contract"), "{err}");
            assert_eq!(c.position(&tp(0)).unwrap(), 2, "the position did not move");
        }
    }

    #[tokio::test]
    async fn close_leaves_the_group_and_refuses_later_calls() {
        let f = Fixture::new(2);
        let mut a = f.consumer("a", Earliest);
        let mut b = f.consumer("b", Earliest);
        a.subscribe(&["t"]).await.unwrap();
        b.subscribe(&["t"]).await.unwrap();
        b.close().await.unwrap();
        b.close().await.unwrap();
        assert!(b.is_closed());
        let members = f.coordinator.describe("g").await.unwrap().members;
        assert_eq!(members.len(), 1);
        assert_eq!(members[0].member, "a");
        a.refresh_assignment().await.unwrap();
        assert_eq!(a.assignment(), [tp(0), tp(1)]);

        let err = b.poll(1).await.unwrap_err();
        assert_eq!(err.code(), "ILLEGAL_STATE");
        assert_eq!(err.to_string(), "cannot poll: the consumer is closed");
        assert_eq!(b.commit().await.unwrap_err().code(), "ILLEGAL_STATE");
        assert_eq!(
            b.subscribe(&["t"]).await.unwrap_err().code(),
            "ILLEGAL_STATE"
        );
        assert_eq!(b.assign([tp(0)]).await.unwrap_err().code(), "ILLEGAL_STATE");
        assert_eq!(b.heartbeat().await.unwrap_err().code(), "ILLEGAL_STATE");
        assert_eq!(
            b.committed(&tp(0)).await.unwrap_err().code(),
            "ILLEGAL_STATE"
        );
    }

    #[tokio::test]
    async fn closing_a_manual_consumer_does_not_touch_the_group() {
        let f = Fixture::new(1);
        let mut member = f.consumer("a", Earliest);
        member.subscribe(&["t"]).await.unwrap();
        let before = f.coordinator.describe("g").await.unwrap().generation;
        let mut manual = f.consumer("a", Earliest);
        manual.assign([tp(0)]).await.unwrap();
        manual.close().await.unwrap();
        assert_eq!(
            f.coordinator.describe("g").await.unwrap().generation,
            before
        );
        assert_eq!(manual.poll(1).await.unwrap_err().code(), "ILLEGAL_STATE");
    }
}
