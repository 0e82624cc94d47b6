//! One group's cell in the coordinator's map: a commit gate and the group's state.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::RwLock;

use crate::group::{downcast, downcast_mut, Group, GroupKind, OffsetExpiration};
use crate::types::{Generation, GroupState, TopicPartition};

/// Partitions below this have their own commit time; a commit of one above it (no real topic
/// has that many: the core assigns at most 2^20 per topic) is timed per topic, which can only
/// make its expiry later, never earlier. Bounds the memory a caller can make one group hold.
const TIMED_PARTITIONS: u32 = 4096;

/// The commit times of one topic's partitions.
#[derive(Debug, Default)]
struct TopicTimes {
    /// By partition number; `None`: not committed through this coordinator.
    partitions: Vec<Option<u64>>,
    /// The last commit of any partition at or above [`TIMED_PARTITIONS`].
    beyond: Option<u64>,
}

impl TopicTimes {
    /// Records a commit at `now`; returns whether the partition had no time before.
    fn set(&mut self, partition: u32, now: u64) -> bool {
        if partition >= TIMED_PARTITIONS {
            return self.beyond.replace(now).is_none();
        }
        let i = partition as usize;
        if self.partitions.len() <= i {
            self.partitions.resize(i + 1, None);
        }
        self.partitions[i].replace(now).is_none()
    }

    fn get(&self, partition: u32) -> Option<u64> {
        if partition >= TIMED_PARTITIONS {
            return self.beyond;
        }
        self.partitions.get(partition as usize).copied().flatten()
    }

    fn clear(&mut self, partition: u32) {
        if let Some(t) = self.partitions.get_mut(partition as usize) {
            *t = None;
        }
    }
}

/// How many topics a group's commit times are searched for without an index.
const INDEXED_TOPICS: usize = 8;

/// What the coordinator knows of a group's committed offsets, to expire them as Kafka 4
/// does: each from its commit time, or all from when the group became Empty, per
/// [`OffsetExpiration`]. Recording a commit costs one map lookup per topic of the batch and
/// a slot per partition: the commit path stays free of per-partition hashing.
#[derive(Debug, Default)]
pub(crate) struct OffsetTimes {
    /// A group commits to few topics: a short list searched by pointer first is cheaper on
    /// the commit path than hashing the name; past [`INDEXED_TOPICS`] an index takes over.
    topics: Vec<(Arc<str>, TopicTimes)>,
    index: HashMap<Arc<str>, usize>,
    /// The last commit of a member of the chapter's kind, of whichever partitions: the
    /// chapter's commit path records this one time instead of one per partition (it is the
    /// hot path), and every offset of the group counts from at least this time.
    member_commit: Option<u64>,
    /// A member commit happened since `member_commit` was last set. The commit path does not
    /// read the clock for it; the next arm or timer run sets `member_commit` to its own time,
    /// which is later than the commit: an offset may live a little longer, never shorter.
    member_pending: bool,
    /// The store may hold offsets this coordinator did not commit (loaded at start): they
    /// count from `known_since`, never from earlier.
    pub(crate) untimed: bool,
    /// When this coordinator learned of the group's offsets.
    pub(crate) known_since: u64,
    /// The earliest expiry, cached with the (generation, state) it was computed under; a
    /// commit of a partition not timed before clears it.
    cached: Option<((Generation, GroupState), Option<u64>)>,
}

impl OffsetTimes {
    /// A commit of `partitions` (sorted by topic, as offset maps are) at `now`.
    pub(crate) fn committed<'a>(
        &mut self,
        partitions: impl Iterator<Item = &'a TopicPartition>,
        now: u64,
    ) {
        let mut partitions = partitions.peekable();
        while let Some(first) = partitions.next() {
            let i = self.find_or_insert(first.topic_arc());
            let times = &mut self.topics[i].1;
            let mut new = times.set(first.partition(), now);
            while let Some(tp) = partitions.next_if(|tp| tp.topic() == first.topic()) {
                new |= times.set(tp.partition(), now);
            }
            if new {
                self.cached = None;
            }
        }
    }

    fn find(&self, topic: &Arc<str>) -> Option<usize> {
        if self.topics.len() > INDEXED_TOPICS {
            return self.index.get(topic).copied();
        }
        self.topics
            .iter()
            .position(|(t, _)| Arc::ptr_eq(t, topic) || **t == **topic)
    }

    fn find_or_insert(&mut self, topic: &Arc<str>) -> usize {
        if let Some(i) = self.find(topic) {
            return i;
        }
        self.topics.push((topic.clone(), TopicTimes::default()));
        let i = self.topics.len() - 1;
        if self.topics.len() > INDEXED_TOPICS {
            if self.index.is_empty() {
                for (j, (t, _)) in self.topics.iter().enumerate() {
                    self.index.insert(t.clone(), j);
                }
            } else {
                self.index.insert(topic.clone(), i);
            }
        }
        i
    }

    /// A member commit of the chapter's kind (one mark for the whole commit, no clock read).
    pub(crate) fn member_committed(&mut self) {
        if !self.member_pending {
            self.member_pending = true;
            self.cached = None;
        }
    }

    /// Gives a pending member commit the time `now()` (read only if one is pending).
    pub(crate) fn settle(&mut self, now: impl FnOnce() -> u64) {
        if self.member_pending {
            self.member_pending = false;
            self.member_commit = Some(now());
            self.cached = None;
        }
    }

    /// The commit time of `tp` through this coordinator, if any.
    pub(crate) fn get(&self, tp: &TopicPartition) -> Option<u64> {
        let i = self.find(tp.topic_arc())?;
        self.topics[i].1.get(tp.partition())
    }

    /// The time `tp`'s offset counts from: its own commit, or a later member commit of the
    /// group (which may have committed it), else when the coordinator learned of the group.
    /// Never earlier than its real last commit through this coordinator.
    pub(crate) fn base(&self, tp: &TopicPartition) -> u64 {
        match (self.get(tp), self.member_commit) {
            (Some(a), Some(b)) => a.max(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => self.known_since,
        }
    }

    /// Forgets the times of `partitions` (their offsets were deleted), or of all of them.
    pub(crate) fn forget(&mut self, partitions: Option<&[TopicPartition]>) {
        match partitions {
            Some(partitions) => {
                for tp in partitions {
                    if let Some(i) = self.find(tp.topic_arc()) {
                        self.topics[i].1.clear(tp.partition());
                    }
                }
            }
            None => {
                self.topics.clear();
                self.index.clear();
                self.member_commit = None;
                self.member_pending = false;
                self.untimed = false;
            }
        }
        self.cached = None;
    }

    /// Every offset the store holds was seen: one without a time counts from `known_since`.
    pub(crate) fn timed_all<'a>(&mut self, partitions: impl Iterator<Item = &'a TopicPartition>) {
        let since = self.known_since;
        for tp in partitions {
            if self.get(tp).is_none() {
                self.committed(std::iter::once(tp), since);
            }
        }
        self.untimed = false;
        self.cached = None;
    }

    /// The earliest commit time among the partitions of topics `expires` accepts (and
    /// `known_since` while untimed offsets may exist).
    fn earliest(&self, expires: impl Fn(&str) -> bool) -> Option<u64> {
        let untimed = self.untimed.then_some(self.known_since);
        self.topics
            .iter()
            .filter(|(topic, _)| expires(topic))
            .flat_map(|(_, t)| t.partitions.iter().flatten().copied().chain(t.beyond))
            .chain(untimed)
            .chain(self.member_commit)
            .min()
    }
}

/// A group's place in the coordinator.
///
/// Two locks, for two different jobs:
/// - `gate`, an async read-write lock that guards nothing but ordering. A commit holds it
///   *shared* from its checks until its write is visible in the store (the store keeps it as
///   the commit's fence); installing a new generation holds it *exclusively*. So no commit
///   checked against generation G lands after G+1 is installed, and commits of one group do
///   not wait for each other.
/// - `state`, a plain mutex around the group's data, never held across an `.await`.
///   Heartbeats, assignment reads and descriptions take only this lock, so they never wait
///   for a store write — however slow the disk is.
///
/// The gate is always taken before the state lock, never while holding it (except
/// `try_write`, which does not wait).
#[derive(Debug)]
pub(crate) struct GroupCell {
    pub(crate) id: Arc<str>,
    pub(crate) gate: Arc<RwLock<()>>,
    state: Mutex<GroupEntry>,
}

impl GroupCell {
    pub(crate) fn new(id: Arc<str>, generation: Generation) -> Self {
        GroupCell {
            id: id.clone(),
            gate: Arc::new(RwLock::new(())),
            state: Mutex::new(GroupEntry::new(id, generation)),
        }
    }

    /// The group's state. Nothing panics while it is held, so a poisoned lock still guards
    /// consistent data.
    pub(crate) fn lock(&self) -> MutexGuard<'_, GroupEntry> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A group's data, under its cell's state lock.
#[derive(Debug)]
pub(crate) struct GroupEntry {
    pub(crate) id: Arc<str>,
    /// The group id's generation; a re-created group continues from its tombstone.
    pub(crate) generation: Generation,
    /// The group, of whichever kind; `None` while no member ever joined this incarnation (a
    /// simple group, known by its committed offsets only, or a first join that failed).
    pub(crate) group: Option<Box<dyn Group>>,
    /// Whether the store may hold offsets of this group (set before a commit is written,
    /// cleared when they are deleted).
    pub(crate) has_offsets: bool,
    /// Since when (clock ms) the group has had no members; `None` while it has some.
    pub(crate) empty_since: Option<u64>,
    /// The commit times of its offsets, for their expiry.
    pub(crate) offset_times: OffsetTimes,
    /// The cell was taken out of the coordinator's map: whoever still holds it must look
    /// the group up again.
    pub(crate) removed: bool,
    /// The time of this group's live entry in the timer heap.
    pub(crate) armed: Option<u64>,
    /// Whether the store may hold a durable record of this group (written, or loaded):
    /// its removal then writes a tombstone.
    pub(crate) recorded: bool,
}

impl GroupEntry {
    fn new(id: Arc<str>, generation: Generation) -> Self {
        GroupEntry {
            id,
            generation,
            group: None,
            has_offsets: false,
            empty_since: None,
            offset_times: OffsetTimes::default(),
            removed: false,
            armed: None,
            recorded: false,
        }
    }

    /// The kind of group this is.
    pub(crate) fn kind(&self) -> GroupKind {
        self.group.as_ref().map_or(GroupKind::Simple, |g| g.kind())
    }

    /// The group as kind `G`, if it is one.
    pub(crate) fn get<G: Group>(&self) -> Option<&G> {
        downcast(self.group.as_deref()?)
    }

    /// The group as kind `G`, if it is one.
    pub(crate) fn get_mut<G: Group>(&mut self) -> Option<&mut G> {
        downcast_mut(self.group.as_deref_mut()?)
    }

    /// Makes the group one of kind `G` with `new` if it has no members (an unused entry, or
    /// an Empty group of another kind: the next group to join decides the kind, as in
    /// Kafka). A group of another kind with members stays as it is.
    /// A share group is never taken over: Kafka refuses its group id to the other kinds.
    pub(crate) fn convert_if_empty<G: Group>(&mut self, new: impl FnOnce(Arc<str>) -> G) {
        if !self.has_members() && self.get::<G>().is_none() && self.kind() != GroupKind::Share {
            self.group = Some(Box::new(new(self.id.clone())));
        }
    }

    /// The group as kind `G` with the group id's generation, if it is one.
    pub(crate) fn split_mut<G: Group>(&mut self) -> Option<(&mut G, &mut Generation)> {
        let GroupEntry {
            generation, group, ..
        } = self;
        Some((downcast_mut(group.as_deref_mut()?)?, generation))
    }

    /// Whether the group has members.
    pub(crate) fn has_members(&self) -> bool {
        self.group.as_ref().is_some_and(|g| g.has_members())
    }

    /// How many members the group has.
    pub(crate) fn member_count(&self) -> usize {
        self.group.as_ref().map_or(0, |g| g.member_count())
    }

    /// The group's state; a simple group is Empty.
    pub(crate) fn state(&self) -> GroupState {
        self.group.as_ref().map_or(GroupState::Empty, |g| g.state())
    }

    /// The protocol type ListGroups and DescribeGroups report; empty for a simple group.
    pub(crate) fn protocol_type(&self) -> &str {
        self.group.as_ref().map_or("", |g| g.protocol_type())
    }

    /// Records whether the group has members now, starting or stopping its Empty clock.
    pub(crate) fn note_membership(&mut self, now: u64) {
        if self.has_members() {
            self.empty_since = None;
        } else if self.empty_since.is_none() {
            self.empty_since = Some(now);
        }
    }

    /// How the group's offsets expire now; a simple group's each from its commit.
    pub(crate) fn offset_expiration(&self) -> OffsetExpiration {
        self.group
            .as_ref()
            .map_or(OffsetExpiration::SinceCommit, |g| g.offset_expiration())
    }

    /// The time from which the offset of `tp` counts toward its expiry, `None` if it does
    /// not expire now.
    pub(crate) fn expiry_base(&self, tp: &TopicPartition, how: OffsetExpiration) -> Option<u64> {
        match how {
            OffsetExpiration::Never => None,
            OffsetExpiration::SinceEmpty => self.empty_since,
            OffsetExpiration::SinceCommit => {
                if self
                    .group
                    .as_ref()
                    .is_some_and(|g| g.is_subscribed_to(tp.topic()))
                {
                    return None;
                }
                Some(self.offset_times.base(tp))
            }
        }
    }

    /// When the group's offsets may first expire (a lower bound: an untimed offset counts
    /// from when the coordinator learned of it). Cached per generation and state.
    fn offsets_deadline(&mut self, retention_ms: u64) -> Option<u64> {
        if !self.has_offsets {
            return None;
        }
        let key = (self.generation, self.state());
        if let Some((k, at)) = self.offset_times.cached {
            if k == key {
                return at;
            }
        }
        let how = self.offset_expiration();
        let base = match how {
            OffsetExpiration::Never => None,
            OffsetExpiration::SinceEmpty => self.empty_since,
            OffsetExpiration::SinceCommit => {
                let group = self.group.as_deref();
                self.offset_times
                    .earliest(|topic| !group.is_some_and(|g| g.is_subscribed_to(topic)))
            }
        };
        let at = base.map(|b| b.saturating_add(retention_ms));
        self.offset_times.cached = Some((key, at));
        at
    }

    /// When the group's lifecycle next needs attention: its offsets' expiry (see
    /// [`OffsetExpiration`]); without offsets, an Empty group is removed `grace_ms` after it
    /// became Empty.
    pub(crate) fn lifecycle_deadline(&mut self, retention_ms: u64, grace_ms: u64) -> Option<u64> {
        if self.has_offsets {
            self.offsets_deadline(retention_ms)
        } else {
            Some(self.empty_since?.saturating_add(grace_ms))
        }
    }

    /// The earliest time at which anything of this group is due.
    pub(crate) fn next_deadline(&mut self, retention_ms: u64, grace_ms: u64) -> Option<u64> {
        let members = self.group.as_ref().and_then(|g| g.next_deadline());
        let lifecycle = self.lifecycle_deadline(retention_ms, grace_ms);
        match (members, lifecycle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_times_are_found_with_and_without_the_topic_index() {
        let mut times = OffsetTimes::default();
        let tps: Vec<TopicPartition> = (0..20)
            .flat_map(|t| [0, 5, 5000].map(|p| TopicPartition::new(format!("t{t}"), p)))
            .collect();
        for (i, tp) in tps.iter().enumerate() {
            times.committed(std::iter::once(tp), i as u64);
        }
        for (i, tp) in tps.iter().enumerate() {
            let want = if tp.partition() >= TIMED_PARTITIONS {
                // Timed per topic above the bound: the topic's last such commit.
                let last = tps
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| o.topic() == tp.topic() && o.partition() >= TIMED_PARTITIONS)
                    .map(|(j, _)| j as u64)
                    .max();
                last
            } else {
                Some(i as u64)
            };
            assert_eq!(times.get(tp), want, "{tp}");
        }
        assert_eq!(times.get(&TopicPartition::new("t3", 1)), None);
        assert_eq!(times.get(&TopicPartition::new("other", 0)), None);
        times.forget(Some(&tps[..3]));
        assert_eq!(times.get(&tps[0]), None);
        assert_eq!(times.get(&tps[3]), Some(3));
        // t0's per-topic time above the bound stays (other partitions may use it): a lower
        // bound for the deadline, and never an earlier base for any offset.
        assert_eq!(times.earliest(|_| true), Some(2));
        assert_eq!(times.earliest(|t| t != "t0"), Some(3));
        times.forget(None);
        assert_eq!(times.get(&tps[3]), None);
    }
}
