//! Vocabulary shared by every crate: topic partitions, generations, group states, offsets.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A partition of a topic: `(topic name, partition number)`.
///
/// Ordered by topic, then partition, as docs/rules.md#vocabulary requires. The topic name is an
/// `Arc<str>`, so cloning a `TopicPartition` never copies the name.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    topic: Arc<str>,
    partition: u32,
}

impl TopicPartition {
    /// A topic partition. Any string is accepted here; whether the topic exists is checked by
    /// whoever receives it.
    pub fn new(topic: impl Into<Arc<str>>, partition: u32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    /// The topic name.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The shared topic name, for callers that keep many partitions of one topic.
    pub fn topic_arc(&self) -> &Arc<str> {
        &self.topic
    }

    /// The partition number.
    pub fn partition(&self) -> u32 {
        self.partition
    }
}

impl fmt::Display for TopicPartition {
    /// Kafka's `topic-partition` spelling, e.g. `orders-0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

impl fmt::Debug for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A group's committed offsets: partition → the *next* offset to read.
///
/// Offsets are `i64`, as in Kafka's protocol; a committed offset is never negative (the
/// coordinator and every store reject negative values with `INVALID_ARGUMENT`).
pub type OffsetMap = BTreeMap<TopicPartition, i64>;

/// Kafka's `OffsetAndMetadata`: a committed offset and what came with it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct OffsetAndMetadata {
    /// The next offset to read; never negative.
    pub offset: i64,
    /// The leader epoch of the last record the committer consumed (KIP-320), if it sent one.
    pub leader_epoch: Option<i32>,
    /// The committer's metadata string (empty if it sent none), at most
    /// `offset.metadata.max.bytes` long
    /// ([`CoordinatorBuilder::offset_metadata_max_bytes`](crate::CoordinatorBuilder::offset_metadata_max_bytes)).
    pub metadata: String,
    /// When the coordinator accepted the commit, in its [`Clock`](crate::Clock)'s
    /// milliseconds; set by the coordinator, whatever a request carries. 0 from a store that
    /// keeps offsets only.
    pub commit_timestamp_ms: u64,
}

impl OffsetAndMetadata {
    /// An offset with no leader epoch, no metadata and no commit time yet.
    pub fn new(offset: i64) -> Self {
        OffsetAndMetadata {
            offset,
            ..OffsetAndMetadata::default()
        }
    }

    /// The same, with `metadata`.
    #[must_use]
    pub fn with_metadata(mut self, metadata: impl Into<String>) -> Self {
        self.metadata = metadata.into();
        self
    }

    /// The same, with a leader epoch.
    #[must_use]
    pub fn with_leader_epoch(mut self, epoch: Option<i32>) -> Self {
        self.leader_epoch = epoch;
        self
    }
}

/// A group's committed offsets with their metadata: partition → [`OffsetAndMetadata`].
pub type CommittedOffsets = BTreeMap<TopicPartition, OffsetAndMetadata>;

/// `offsets` with no leader epoch and no metadata.
pub fn with_no_metadata(offsets: &OffsetMap) -> CommittedOffsets {
    offsets
        .iter()
        .map(|(tp, &o)| (tp.clone(), OffsetAndMetadata::new(o)))
        .collect()
}

/// The offsets alone of `committed`.
pub fn offsets_of(committed: &CommittedOffsets) -> OffsetMap {
    committed
        .iter()
        .map(|(tp, o)| (tp.clone(), o.offset))
        .collect()
}

/// A group's generation: the authority token of one complete assignment.
///
/// Starts at 0 when the group is created and grows by exactly one per rebalance. A request
/// carrying another generation than the group's is fenced with `ILLEGAL_GENERATION`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Generation(u64);

impl Generation {
    /// The generation of a group that has never rebalanced.
    pub const INITIAL: Generation = Generation(0);

    /// A generation with the given number.
    pub const fn new(value: u64) -> Self {
        Generation(value)
    }

    /// The generation number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The generation after this one. A `u64` so that numbers never repeat in practice (Kafka's
    /// is an `i32`; a thousand rebalances a second would take 585 million years to exhaust
    /// this); at `u64::MAX` it saturates.
    #[must_use]
    pub const fn next(self) -> Self {
        Generation(self.0.saturating_add(1))
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Generation({})", self.0)
    }
}

impl From<u64> for Generation {
    fn from(value: u64) -> Self {
        Generation(value)
    }
}

/// The state of a consumer group, with Kafka's names.
///
/// A chapter group's rebalance runs synchronously under the group's lock, so it is only ever
/// seen `Empty` or `Stable` (`PreparingRebalance` names, as in the chapter, the contract that
/// assignment reads and commits are accepted only in `Stable`). A classic group goes through
/// every state but `Dead`, which only names a group that does not exist (Kafka's
/// DescribeGroups answer for an unknown group).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupState {
    /// The group has no members (all left or expired).
    Empty,
    /// A rebalance has started: members are (re-)joining.
    PreparingRebalance,
    /// Every member has joined the new generation; the leader's assignment is awaited.
    CompletingRebalance,
    /// Every member has an assignment of the current generation.
    Stable,
    /// The group does not exist.
    Dead,
}

impl GroupState {
    /// Kafka's name of the state (`Empty`, `PreparingRebalance`, `CompletingRebalance`,
    /// `Stable`, `Dead`).
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// The state named `name`, compared as Kafka's ListGroups filter does (trimmed, ignoring
    /// case).
    pub fn parse(name: &str) -> Option<GroupState> {
        let name = name.trim();
        [
            GroupState::Empty,
            GroupState::PreparingRebalance,
            GroupState::CompletingRebalance,
            GroupState::Stable,
            GroupState::Dead,
        ]
        .into_iter()
        .find(|s| s.as_str().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for GroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_partitions_order_by_topic_then_partition() {
        let mut tps = [
            TopicPartition::new("b", 0),
            TopicPartition::new("a", 10),
            TopicPartition::new("a", 2),
        ];
        tps.sort();
        let shown: Vec<String> = tps.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["a-2", "a-10", "b-0"]);
    }

    #[test]
    fn generation_starts_at_zero_and_counts_up() {
        assert_eq!(Generation::INITIAL.get(), 0);
        assert_eq!(Generation::INITIAL.next().next(), Generation::new(2));
        assert_eq!(Generation::new(u64::MAX).next(), Generation::new(u64::MAX));
    }
}
