//! The `Assignor` port: who owns which partition in a generation.
//!
//! An assignor is a pure function from an [`AssignmentInput`] (members with their
//! subscriptions and previously owned partitions, plus topic metadata) to an [`Assignment`]
//! (the owner of every partition). The representation is index-based so that assigning
//! 100,000 partitions allocates two vectors and copies no strings: topics and members are
//! referred to by their position in the input, which lists both in sorted order.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use crate::types::TopicPartition;

/// The most partitions one topic may have here (2^20 = 1,048,576). Kafka sets no hard limit,
/// but every partition costs memory in each assignment; the cap keeps a hostile or mistaken
/// partition count (say `u32::MAX`) an error instead of an out-of-memory abort.
pub const MAX_PARTITIONS_PER_TOPIC: u32 = 1 << 20;

/// The most partitions one [`AssignmentRequest`] may hold over all its topics (2^24).
pub const MAX_TOTAL_PARTITIONS: usize = 1 << 24;

/// Position of a topic in [`AssignmentInput::topics`].
pub type TopicIndex = u32;
/// Position of a member in the input's member list (sorted by member id).
pub type MemberIndex = u32;

/// A partition, by topic index and partition number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartitionRef {
    /// Index of the topic in [`AssignmentInput::topics`].
    pub topic: TopicIndex,
    /// Partition number, `0..partitions` of that topic.
    pub partition: u32,
}

impl PartitionRef {
    /// A partition reference.
    pub const fn new(topic: TopicIndex, partition: u32) -> Self {
        PartitionRef { topic, partition }
    }
}

/// A topic and its partition count.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicSpec {
    /// The topic name.
    pub name: Arc<str>,
    /// How many partitions the topic has (numbered `0..partitions`).
    pub partitions: u32,
}

/// What an assignor sees: the group's members and the topics they subscribe to.
///
/// Invariants, which every constructor guarantees:
/// - topics are sorted by name and unique; members are sorted by id and unique;
/// - each member's subscriptions are sorted, unique, valid topic indices;
/// - each member's owned partitions (its assignment in the previous generation, for sticky
///   strategies) are valid, sorted, and no partition is owned by two members.
#[derive(Clone, Copy)]
pub struct AssignmentInput<'a> {
    topics: &'a [TopicSpec],
    member_ids: &'a [Arc<str>],
    sub_starts: &'a [u32],
    subs: &'a [TopicIndex],
    owned_starts: &'a [u32],
    owned: &'a [PartitionRef],
}

impl<'a> AssignmentInput<'a> {
    /// Assembles an input from parts the caller has already validated (the coordinator).
    pub(crate) fn from_parts(
        topics: &'a [TopicSpec],
        member_ids: &'a [Arc<str>],
        sub_starts: &'a [u32],
        subs: &'a [TopicIndex],
        owned_starts: &'a [u32],
        owned: &'a [PartitionRef],
    ) -> Self {
        debug_assert_eq!(sub_starts.len(), member_ids.len() + 1);
        debug_assert_eq!(owned_starts.len(), member_ids.len() + 1);
        AssignmentInput {
            topics,
            member_ids,
            sub_starts,
            subs,
            owned_starts,
            owned,
        }
    }

    /// The topics that at least one member subscribes to, sorted by name.
    pub fn topics(&self) -> &'a [TopicSpec] {
        self.topics
    }

    /// The members' ids, sorted. A [`MemberIndex`] is a position in this slice.
    pub fn member_ids(&self) -> &'a [Arc<str>] {
        self.member_ids
    }

    /// How many members the group has.
    pub fn member_count(&self) -> usize {
        self.member_ids.len()
    }

    /// Total number of partitions over all topics.
    pub fn partition_count(&self) -> usize {
        self.topics.iter().map(|t| t.partitions as usize).sum()
    }

    /// Member `member`'s subscribed topics, sorted. Empty for an out-of-range index.
    pub fn subscriptions(&self, member: MemberIndex) -> &'a [TopicIndex] {
        slice_of(self.sub_starts, self.subs, member)
    }

    /// The partitions member `member` owned in the previous generation, sorted.
    pub fn owned(&self, member: MemberIndex) -> &'a [PartitionRef] {
        slice_of(self.owned_starts, self.owned, member)
    }

    /// Whether member `member` subscribes to topic `topic`.
    pub fn is_subscribed(&self, member: MemberIndex, topic: TopicIndex) -> bool {
        self.subscriptions(member).binary_search(&topic).is_ok()
    }

    /// The [`TopicPartition`] a [`PartitionRef`] stands for, if the reference is valid.
    pub fn topic_partition(&self, p: PartitionRef) -> Option<TopicPartition> {
        let topic = self.topics.get(p.topic as usize)?;
        (p.partition < topic.partitions)
            .then(|| TopicPartition::new(topic.name.clone(), p.partition))
    }
}

impl fmt::Debug for AssignmentInput<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let members: Vec<_> = (0..self.member_count() as MemberIndex)
            .map(|m| {
                (
                    &*self.member_ids[m as usize],
                    self.subscriptions(m),
                    self.owned(m),
                )
            })
            .collect();
        f.debug_struct("AssignmentInput")
            .field("topics", &self.topics)
            .field("members", &members)
            .finish()
    }
}

fn slice_of<'a, T>(starts: &'a [u32], items: &'a [T], member: MemberIndex) -> &'a [T] {
    let m = member as usize;
    match (starts.get(m), starts.get(m + 1)) {
        (Some(&a), Some(&b)) => items.get(a as usize..b as usize).unwrap_or(&[]),
        _ => &[],
    }
}

/// An assignor's answer: the owner of every partition of the input's topics.
///
/// Partitions are laid out topic by topic in input order, so an owner lookup is an index
/// computation. A partition may be left unowned ([`Assignment::UNASSIGNED`]): the
/// cooperative strategies withhold partitions that change owner.
#[derive(Clone, PartialEq, Eq)]
pub struct Assignment {
    topic_base: Vec<usize>,
    owners: Vec<MemberIndex>,
}

impl Assignment {
    /// The owner value of a partition that no member owns.
    pub const UNASSIGNED: MemberIndex = MemberIndex::MAX;

    /// An assignment of the input's topics in which no partition is owned yet.
    pub fn new(input: &AssignmentInput<'_>) -> Self {
        let mut topic_base = Vec::with_capacity(input.topics.len() + 1);
        let mut total = 0usize;
        topic_base.push(0);
        for t in input.topics {
            total += t.partitions as usize;
            topic_base.push(total);
        }
        Assignment {
            topic_base,
            owners: vec![Self::UNASSIGNED; total],
        }
    }

    /// The flat index of `p` in [`owners`](Self::owners), if `p` is valid.
    pub(crate) fn slot(&self, p: PartitionRef) -> Option<usize> {
        let t = p.topic as usize;
        let base = *self.topic_base.get(t)?;
        let end = *self.topic_base.get(t + 1)?;
        let i = base + p.partition as usize;
        (i < end).then_some(i)
    }

    /// Gives partition `p` to `member`, replacing any previous owner.
    pub fn set_owner(&mut self, p: PartitionRef, member: MemberIndex) -> Result<(), AssignError> {
        let slot = self
            .slot(p)
            .ok_or_else(|| AssignError::new(format!("partition {p:?} is not in the input")))?;
        self.owners[slot] = member;
        Ok(())
    }

    /// Leaves partition `p` unowned.
    pub fn clear_owner(&mut self, p: PartitionRef) {
        if let Some(slot) = self.slot(p) {
            self.owners[slot] = Self::UNASSIGNED;
        }
    }

    /// The owner of partition `p`, if it has one (and `p` is valid).
    pub fn owner(&self, p: PartitionRef) -> Option<MemberIndex> {
        self.slot(p)
            .map(|s| self.owners[s])
            .filter(|&o| o != Self::UNASSIGNED)
    }

    /// The owners of topic `topic`'s partitions, indexed by partition number
    /// ([`Assignment::UNASSIGNED`] for unowned ones). Empty for an unknown topic.
    pub fn topic_owners(&self, topic: TopicIndex) -> &[MemberIndex] {
        match self.range(topic) {
            Some(r) => &self.owners[r],
            None => &[],
        }
    }

    /// Mutable access to topic `topic`'s owners: the fast path for assignors that fill whole
    /// topics. Values must be member indices or [`Assignment::UNASSIGNED`]; the coordinator
    /// checks every entry ([`Assignment::validate`]).
    pub fn topic_owners_mut(&mut self, topic: TopicIndex) -> &mut [MemberIndex] {
        match self.range(topic) {
            Some(r) => &mut self.owners[r],
            None => &mut [],
        }
    }

    fn range(&self, topic: TopicIndex) -> Option<std::ops::Range<usize>> {
        let t = topic as usize;
        Some(*self.topic_base.get(t)?..*self.topic_base.get(t + 1)?)
    }

    /// Every partition's owner, topic by topic in input order.
    pub fn owners(&self) -> &[MemberIndex] {
        &self.owners
    }

    /// Checks the assignment against its input: the same partitions, every owner a member
    /// that subscribes to the partition's topic.
    pub fn validate(&self, input: &AssignmentInput<'_>) -> Result<(), AssignError> {
        if self.topic_base.len() != input.topics.len() + 1
            || input.topics.iter().enumerate().any(|(t, spec)| {
                self.topic_base[t + 1] - self.topic_base[t] != spec.partitions as usize
            })
        {
            return Err(AssignError::new(
                "the assignment covers other topics than its input",
            ));
        }
        let members = input.member_count();
        for t in 0..input.topics.len() {
            let topic = t as TopicIndex;
            for (p, &owner) in self.topic_owners(topic).iter().enumerate() {
                if owner == Self::UNASSIGNED {
                    continue;
                }
                if owner as usize >= members {
                    return Err(AssignError::new(format!(
                        "{}-{p} is given to member index {owner}, but the group has {members} members",
                        input.topics[t].name
                    )));
                }
                if !input.is_subscribed(owner, topic) {
                    return Err(AssignError::new(format!(
                        "{}-{p} is given to `{}`, which does not subscribe to it",
                        input.topics[t].name, input.member_ids[owner as usize]
                    )));
                }
            }
        }
        Ok(())
    }

    /// The partitions of every member, in (topic, partition) order: one list per member, in
    /// member order. Owners that are not valid member indices are skipped.
    pub fn member_partitions(&self, input: &AssignmentInput<'_>) -> Vec<Vec<PartitionRef>> {
        let mut lists = vec![Vec::new(); input.member_count()];
        for t in 0..input.topics.len() {
            for (p, &owner) in self.topic_owners(t as TopicIndex).iter().enumerate() {
                if let Some(list) = lists.get_mut(owner as usize) {
                    list.push(PartitionRef::new(t as TopicIndex, p as u32));
                }
            }
        }
        lists
    }

    /// Member id → its partitions (topic, partition order), every member present.
    pub fn to_map(&self, input: &AssignmentInput<'_>) -> BTreeMap<String, Vec<TopicPartition>> {
        self.member_partitions(input)
            .into_iter()
            .enumerate()
            .map(|(m, refs)| {
                let tps = refs
                    .into_iter()
                    .filter_map(|r| input.topic_partition(r))
                    .collect();
                (input.member_ids[m].to_string(), tps)
            })
            .collect()
    }
}

impl fmt::Debug for Assignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Assignment")
            .field("topic_base", &self.topic_base)
            .field("owners", &self.owners)
            .finish()
    }
}

/// An assignor refused its input or failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct AssignError {
    message: String,
}

impl AssignError {
    /// An assignment error with a message.
    pub fn new(message: impl Into<String>) -> Self {
        AssignError {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Computes partition ownership for one generation.
///
/// # To ensure correctness
/// - **Pure and deterministic**: the same input gives the same output; no hash-map order,
///   randomness or clock may leak in. The coordinator calls it under the group's lock.
/// - **Owners are subscribers**: a partition goes only to a member subscribed to its topic
///   (the coordinator rejects the assignment otherwise, with `ASSIGNOR_FAILED`).
/// - At most one owner per partition holds by construction of [`Assignment`].
/// - Every subscribed partition should have an owner; only cooperative strategies may leave
///   a partition unowned for one generation.
/// - It must not panic on any valid input (zero members, zero partitions, empty subscriptions).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
pub trait Assignor: Send + Sync {
    /// The strategy's name, as members list it when they join (e.g. Kafka's `range`).
    fn name(&self) -> &str;

    /// Assigns the input's partitions.
    #[allow(clippy::needless_lifetimes)]
    fn assign<'a>(&self, input: &AssignmentInput<'a>) -> Result<Assignment, AssignError>;
}

impl<A: Assignor + ?Sized> Assignor for Arc<A> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn assign(&self, input: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
        (**self).assign(input)
    }
}

/// An owned, validated assignor input, built from names: for tools, tests and benchmarks.
///
/// ```
/// use coordinator_core::AssignmentRequest;
/// let request = AssignmentRequest::builder()
///     .topic("orders", 4)
///     .member("b", ["orders"])
///     .member("a", ["orders"])
///     .build()
///     .unwrap();
/// let input = request.input();
/// assert_eq!(&*input.member_ids()[0], "a"); // sorted
/// assert_eq!(input.partition_count(), 4);
/// ```
#[derive(Clone, Debug, Default)]
pub struct AssignmentRequest {
    topics: Vec<TopicSpec>,
    member_ids: Vec<Arc<str>>,
    sub_starts: Vec<u32>,
    subs: Vec<TopicIndex>,
    owned_starts: Vec<u32>,
    owned: Vec<PartitionRef>,
}

impl AssignmentRequest {
    /// A builder; members, topics and owned partitions may be added in any order.
    pub fn builder() -> AssignmentRequestBuilder {
        AssignmentRequestBuilder::default()
    }

    /// The borrowed view an [`Assignor`] takes.
    pub fn input(&self) -> AssignmentInput<'_> {
        AssignmentInput::from_parts(
            &self.topics,
            &self.member_ids,
            &self.sub_starts,
            &self.subs,
            &self.owned_starts,
            &self.owned,
        )
    }
}

/// A member's subscriptions and owned partitions, by name, while a request is being built.
type MemberByName = (BTreeSet<String>, BTreeSet<(String, u32)>);

/// Builds an [`AssignmentRequest`]; errors are reported by [`build`](Self::build).
#[derive(Clone, Debug, Default)]
pub struct AssignmentRequestBuilder {
    topics: BTreeMap<String, u32>,
    members: BTreeMap<String, MemberByName>,
    errors: Vec<String>,
}

impl AssignmentRequestBuilder {
    /// Declares a topic with `partitions` partitions.
    #[must_use]
    pub fn topic(mut self, name: impl Into<String>, partitions: u32) -> Self {
        let name = name.into();
        if self.topics.insert(name.clone(), partitions).is_some() {
            self.errors
                .push(format!("topic `{name}` is declared twice"));
        }
        self
    }

    /// Adds a member and its subscriptions.
    #[must_use]
    pub fn member<I, S>(mut self, id: impl Into<String>, topics: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let id = id.into();
        if self.members.contains_key(&id) {
            self.errors.push(format!("member `{id}` is declared twice"));
            return self;
        }
        let subs = topics.into_iter().map(Into::into).collect();
        self.members.insert(id, (subs, BTreeSet::new()));
        self
    }

    /// Records that `member` owned `topic`-`partition` in the previous generation.
    #[must_use]
    pub fn owned(mut self, member: &str, topic: impl Into<String>, partition: u32) -> Self {
        match self.members.get_mut(member) {
            Some((_, owned)) => {
                owned.insert((topic.into(), partition));
            }
            None => self
                .errors
                .push(format!("owned partition for undeclared member `{member}`")),
        }
        self
    }

    /// Validates and sorts everything. Refuses duplicate declarations, subscriptions to
    /// undeclared topics, owned partitions that do not exist, partitions owned twice, and
    /// more partitions than [`MAX_PARTITIONS_PER_TOPIC`] / [`MAX_TOTAL_PARTITIONS`].
    pub fn build(self) -> Result<AssignmentRequest, AssignError> {
        if let Some(first) = self.errors.into_iter().next() {
            return Err(AssignError::new(first));
        }
        let mut total = 0usize;
        for (name, &partitions) in &self.topics {
            if partitions > MAX_PARTITIONS_PER_TOPIC {
                return Err(AssignError::new(format!(
                    "topic `{name}` has {partitions} partitions, more than the \
                     {MAX_PARTITIONS_PER_TOPIC} supported"
                )));
            }
            total += partitions as usize;
        }
        if total > MAX_TOTAL_PARTITIONS {
            return Err(AssignError::new(format!(
                "{total} partitions in all, more than the {MAX_TOTAL_PARTITIONS} supported"
            )));
        }
        let topics: Vec<TopicSpec> = self
            .topics
            .iter()
            .map(|(name, &partitions)| TopicSpec {
                name: Arc::from(name.as_str()),
                partitions,
            })
            .collect();
        let index_of = |name: &str| -> Option<TopicIndex> {
            topics
                .binary_search_by(|t| (*t.name).cmp(name))
                .ok()
                .map(|i| i as TopicIndex)
        };
        let mut request = AssignmentRequest {
            sub_starts: vec![0],
            owned_starts: vec![0],
            ..AssignmentRequest::default()
        };
        let mut claimed: BTreeMap<PartitionRef, &str> = BTreeMap::new();
        for (id, (subs, owned)) in &self.members {
            for topic in subs {
                let t = index_of(topic).ok_or_else(|| {
                    AssignError::new(format!(
                        "member `{id}` subscribes to unknown topic `{topic}`"
                    ))
                })?;
                request.subs.push(t);
            }
            for (topic, partition) in owned {
                let t = index_of(topic)
                    .filter(|&t| *partition < topics[t as usize].partitions)
                    .ok_or_else(|| {
                        AssignError::new(format!(
                            "member `{id}` owns {topic}-{partition}, which does not exist"
                        ))
                    })?;
                let p = PartitionRef::new(t, *partition);
                if let Some(other) = claimed.insert(p, id) {
                    return Err(AssignError::new(format!(
                        "{topic}-{partition} is owned by both `{other}` and `{id}`"
                    )));
                }
                request.owned.push(p);
            }
            request.member_ids.push(Arc::from(id.as_str()));
            request.sub_starts.push(u32_len(request.subs.len())?);
            request.owned_starts.push(u32_len(request.owned.len())?);
        }
        request.topics = topics;
        Ok(request)
    }
}

fn u32_len(n: usize) -> Result<u32, AssignError> {
    u32::try_from(n).map_err(|_| AssignError::new("more than 2^32 entries"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> AssignmentRequest {
        AssignmentRequest::builder()
            .topic("payments", 1)
            .topic("orders", 2)
            .member("orders-only", ["orders"])
            .member("all", ["orders", "payments"])
            .owned("all", "payments", 0)
            .build()
            .expect("valid")
    }

    #[test]
    fn request_is_sorted_and_indexed() {
        let r = request();
        let input = r.input();
        assert_eq!(input.topics()[0].name.as_ref(), "orders");
        assert_eq!(&*input.member_ids()[0], "all");
        assert_eq!(input.subscriptions(0), &[0, 1]);
        assert_eq!(input.subscriptions(1), &[0]);
        assert_eq!(input.owned(0), &[PartitionRef::new(1, 0)]);
        assert!(input.owned(1).is_empty());
        assert!(input.subscriptions(9).is_empty());
        assert_eq!(input.partition_count(), 3);
    }

    #[test]
    fn builder_refuses_bad_requests() {
        let unknown = AssignmentRequest::builder().member("a", ["nope"]).build();
        assert!(unknown
            .unwrap_err()
            .message()
            .contains("unknown topic `nope`"));
        let double = AssignmentRequest::builder()
            .topic("t", 1)
            .member("a", ["t"])
            .member("b", ["t"])
            .owned("a", "t", 0)
            .owned("b", "t", 0)
            .build();
        assert!(double.unwrap_err().message().contains("owned by both"));
        let missing = AssignmentRequest::builder()
            .topic("t", 1)
            .member("a", ["t"])
            .owned("a", "t", 5)
            .build();
        assert!(missing.is_err());
        let twice = AssignmentRequest::builder()
            .topic("t", 1)
            .topic("t", 2)
            .build();
        assert!(twice.is_err());
    }

    #[test]
    fn validate_catches_bad_owners() {
        let r = request();
        let input = r.input();
        let mut a = Assignment::new(&input);
        a.set_owner(PartitionRef::new(1, 0), 0).expect("valid ref");
        assert!(a.validate(&input).is_ok());
        a.set_owner(PartitionRef::new(1, 0), 1).expect("valid ref");
        let err = a.validate(&input).unwrap_err();
        assert!(err.message().contains("does not subscribe"), "{err}");
        a.topic_owners_mut(0)[0] = 7;
        assert!(a.validate(&input).is_err());
        assert!(a.set_owner(PartitionRef::new(0, 2), 0).is_err());
        assert!(a.set_owner(PartitionRef::new(5, 0), 0).is_err());
    }

    #[test]
    fn to_map_lists_every_member() {
        let r = request();
        let input = r.input();
        let mut a = Assignment::new(&input);
        a.set_owner(PartitionRef::new(0, 1), 0).expect("valid");
        let map = a.to_map(&input);
        assert_eq!(map["all"], vec![TopicPartition::new("orders", 1)]);
        assert!(map["orders-only"].is_empty());
        assert_eq!(a.owner(PartitionRef::new(0, 0)), None);
        assert_eq!(a.owner(PartitionRef::new(0, 1)), Some(0));
    }
}
