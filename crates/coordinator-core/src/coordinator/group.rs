//! One group's state and its rebalance. Everything here runs under the group's lock and is
//! synchronous: no I/O, no awaits.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::assign::{
    AssignError, Assignment, AssignmentInput, Assignor, PartitionRef, TopicIndex, TopicSpec,
    MAX_PARTITIONS_PER_TOPIC, MAX_TOTAL_PARTITIONS,
};
use crate::error::Error;
use crate::metadata::TopicMetadata;
use crate::types::{Generation, GroupState, TopicPartition};

/// Index of a member in the current generation's assignment; `NO_SLOT` for a member that has
/// not been through a completed rebalance yet.
pub(crate) const NO_SLOT: u32 = u32::MAX;

/// A member of a group.
#[derive(Debug)]
pub(crate) struct MemberEntry {
    /// Subscribed topics, sorted and unique.
    pub(crate) topics: Box<[Arc<str>]>,
    /// Indices of the assignors this member supports, in its order of preference.
    pub(crate) strategies: Box<[usize]>,
    /// Session deadline. Written by heartbeats under the group's *read* lock, hence atomic;
    /// read by expiry under the write lock.
    pub(crate) deadline_ms: AtomicU64,
    /// Position in `GroupAssignment::member_starts`; changes only when a rebalance completes.
    pub(crate) slot: u32,
}

impl MemberEntry {
    pub(crate) fn deadline(&self) -> u64 {
        self.deadline_ms.load(Ordering::Relaxed)
    }
}

/// The assignment of one generation, indexed both ways: owner per partition (for commit
/// checks) and partitions per member (for join and refresh answers).
#[derive(Debug, Default)]
pub(crate) struct GroupAssignment {
    pub(crate) topics: Vec<TopicSpec>,
    pub(crate) owners: Option<Assignment>,
    pub(crate) member_starts: Vec<u32>,
    pub(crate) member_parts: Vec<PartitionRef>,
}

impl GroupAssignment {
    /// The partitions of the member in `slot`, as refs into `self.topics`.
    pub(crate) fn parts_of(&self, slot: u32) -> &[PartitionRef] {
        let s = slot as usize;
        match (self.member_starts.get(s), self.member_starts.get(s + 1)) {
            (Some(&a), Some(&b)) => self.member_parts.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }

    pub(crate) fn topic_partitions_of(&self, slot: u32) -> Vec<TopicPartition> {
        self.parts_of(slot)
            .iter()
            .filter_map(|p| {
                let t = self.topics.get(p.topic as usize)?;
                Some(TopicPartition::new(t.name.clone(), p.partition))
            })
            .collect()
    }

    /// Whether the member in `slot` owns `tp` in this generation.
    pub(crate) fn owns(&self, slot: u32, tp: &TopicPartition) -> bool {
        let Some(owners) = &self.owners else {
            return false;
        };
        match self.topics.binary_search_by(|t| (*t.name).cmp(tp.topic())) {
            Ok(t) => owners.owner(PartitionRef::new(t as TopicIndex, tp.partition())) == Some(slot),
            Err(_) => false,
        }
    }

    pub(crate) fn assigned_count(&self) -> usize {
        self.member_parts.len()
    }
}

/// Buffers reused from one rebalance to the next, so a steady-state rebalance allocates only
/// its result.
#[derive(Debug, Default)]
struct Scratch {
    topics: Vec<TopicSpec>,
    sub_starts: Vec<u32>,
    subs: Vec<TopicIndex>,
    owned_starts: Vec<u32>,
    owned: Vec<PartitionRef>,
    remap: Vec<Option<TopicIndex>>,
}

/// A consumer group.
#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) id: Arc<str>,
    pub(crate) generation: Generation,
    pub(crate) state: GroupState,
    /// Member ids, sorted; `members[i]` belongs to `ids[i]`.
    pub(crate) ids: Vec<Arc<str>>,
    pub(crate) members: Vec<MemberEntry>,
    /// Subscribed topic → number of members subscribing to it.
    topic_refs: BTreeMap<Arc<str>, u32>,
    /// Assignor index → number of members supporting it.
    strategy_support: Vec<u32>,
    /// The assignor chosen for the current generation.
    pub(crate) strategy: Option<usize>,
    pub(crate) current: GroupAssignment,
    scratch: Scratch,
}

/// How to undo a membership change whose rebalance failed.
#[derive(Debug)]
pub(crate) enum Undo {
    /// A new member was inserted at this index.
    Inserted(usize),
    /// The member at this index was replaced; this is its old entry.
    Replaced(usize, MemberEntry),
    /// These members were removed (ascending index order, as they stood before removal).
    Removed(Vec<(usize, Arc<str>, MemberEntry)>),
}

impl Group {
    pub(crate) fn new(id: Arc<str>, strategies: usize) -> Self {
        Group {
            id,
            generation: Generation::INITIAL,
            state: GroupState::Empty,
            ids: Vec::new(),
            members: Vec::new(),
            topic_refs: BTreeMap::new(),
            strategy_support: vec![0; strategies],
            strategy: None,
            current: GroupAssignment::default(),
            scratch: Scratch::default(),
        }
    }

    /// A group exists once a join has completed its first rebalance. A group entry whose
    /// first join failed (and was rolled back) is indistinguishable from no group at all.
    pub(crate) fn exists(&self) -> bool {
        self.generation > Generation::INITIAL
    }

    pub(crate) fn find(&self, member: &str) -> Option<usize> {
        self.ids.binary_search_by(|id| (**id).cmp(member)).ok()
    }

    /// The assignors every member other than `except` supports.
    pub(crate) fn shared_strategies(&self, except: Option<usize>) -> Vec<usize> {
        let others = self.ids.len() - usize::from(except.is_some());
        let mut support = self.strategy_support.clone();
        if let Some(i) = except {
            for &s in self.members[i].strategies.iter() {
                support[s] -= 1;
            }
        }
        support
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n as usize == others)
            .map(|(s, _)| s)
            .collect()
    }

    fn account(&mut self, entry: &MemberEntry, add: bool) {
        for topic in entry.topics.iter() {
            if add {
                *self.topic_refs.entry(topic.clone()).or_insert(0) += 1;
            } else if let Some(n) = self.topic_refs.get_mut(topic) {
                *n -= 1;
                if *n == 0 {
                    self.topic_refs.remove(topic);
                }
            }
        }
        for &s in entry.strategies.iter() {
            if add {
                self.strategy_support[s] += 1;
            } else {
                self.strategy_support[s] -= 1;
            }
        }
    }

    /// Inserts or replaces a member. Returns how to undo it.
    pub(crate) fn upsert(&mut self, id: &str, entry: MemberEntry) -> Undo {
        self.account(&entry, true);
        match self.ids.binary_search_by(|m| (**m).cmp(id)) {
            Ok(i) => {
                let old = std::mem::replace(&mut self.members[i], entry);
                // The replaced member keeps its slot: it still owns its partitions until the
                // rebalance completes.
                self.members[i].slot = old.slot;
                self.account(&old, false);
                Undo::Replaced(i, old)
            }
            Err(i) => {
                self.ids.insert(i, Arc::from(id));
                self.members.insert(i, entry);
                Undo::Inserted(i)
            }
        }
    }

    /// Removes the members at `indices` (ascending). Returns how to undo it.
    pub(crate) fn remove(&mut self, indices: &[usize]) -> Undo {
        let mut removed = Vec::with_capacity(indices.len());
        for &i in indices.iter().rev() {
            let id = self.ids.remove(i);
            let entry = self.members.remove(i);
            self.account(&entry, false);
            removed.push((i, id, entry));
        }
        removed.reverse();
        Undo::Removed(removed)
    }

    pub(crate) fn undo(&mut self, undo: Undo) {
        match undo {
            Undo::Inserted(i) => {
                self.ids.remove(i);
                let entry = self.members.remove(i);
                self.account(&entry, false);
            }
            Undo::Replaced(i, old) => {
                self.account(&old, true);
                let new = std::mem::replace(&mut self.members[i], old);
                self.account(&new, false);
            }
            Undo::Removed(removed) => {
                for (i, id, entry) in removed {
                    self.account(&entry, true);
                    self.ids.insert(i, id);
                    self.members.insert(i, entry);
                }
            }
        }
    }

    /// Picks the assignor for the next generation: among the strategies every member
    /// supports, the one most members list first (each member votes for its most preferred
    /// shared strategy, as in Kafka's classic coordinator). Ties go to the strategy registered
    /// first with the coordinator.
    fn choose_strategy(&self) -> Option<usize> {
        let members = self.ids.len() as u32;
        let shared: Vec<usize> = (0..self.strategy_support.len())
            .filter(|&s| self.strategy_support[s] == members)
            .collect();
        match shared.as_slice() {
            [] => None,
            [only] => Some(*only),
            _ => {
                let mut votes = vec![0u32; self.strategy_support.len()];
                for m in &self.members {
                    if let Some(&s) = m.strategies.iter().find(|s| shared.contains(s)) {
                        votes[s] += 1;
                    }
                }
                // max_by_key keeps the last maximum; iterate in reverse so the first
                // registered strategy wins a tie.
                shared.iter().rev().copied().max_by_key(|&s| votes[s])
            }
        }
    }

    /// Runs the rebalance of SPEC.md: a new generation, a new assignment (or Empty). On error
    /// nothing has changed.
    pub(crate) fn rebalance(
        &mut self,
        assignors: &[Arc<dyn Assignor>],
        metadata: &dyn TopicMetadata,
    ) -> Result<(), Error> {
        if self.ids.is_empty() {
            self.generation = self.generation.next();
            self.state = GroupState::Empty;
            self.strategy = None;
            self.current = GroupAssignment::default();
            return Ok(());
        }
        let strategy = self
            .choose_strategy()
            .ok_or_else(|| Error::AssignorFailed {
                assignor: String::new(),
                reason: "the members share no assignment strategy".into(),
            })?;
        let assignor = &assignors[strategy];
        let (owners, starts, parts) = {
            let input = self.prepare_input(metadata)?;
            let owners = assignor.assign(&input).map_err(|e| Error::AssignorFailed {
                assignor: assignor.name().to_string(),
                reason: e.message().to_string(),
            })?;
            let (starts, parts) =
                index_members(&owners, &input).map_err(|e| Error::AssignorFailed {
                    assignor: assignor.name().to_string(),
                    reason: e.message().to_string(),
                })?;
            (owners, starts, parts)
        };
        // Success: publish the new generation. (SPEC.md's PreparingRebalance → generation+1 →
        // assignment → Stable happens here at once, under the group's write lock.)
        std::mem::swap(&mut self.current.topics, &mut self.scratch.topics);
        self.current.owners = Some(owners);
        self.current.member_starts = starts;
        self.current.member_parts = parts;
        for (slot, m) in self.members.iter_mut().enumerate() {
            m.slot = slot as u32;
        }
        self.generation = self.generation.next();
        self.state = GroupState::Stable;
        self.strategy = Some(strategy);
        Ok(())
    }

    /// Fills the scratch buffers with the assignor's input: current topic metadata, members'
    /// subscriptions as topic indices, and their partitions of the current generation.
    ///
    /// Refuses (changing nothing) a group whose topics hold more than
    /// [`MAX_TOTAL_PARTITIONS`] partitions in all: one assignment would not fit.
    fn prepare_input(
        &mut self,
        metadata: &dyn TopicMetadata,
    ) -> Result<AssignmentInput<'_>, Error> {
        let s = &mut self.scratch;
        s.topics.clear();
        for name in self.topic_refs.keys() {
            // A topic grown past the cap since its subscribers joined is left unassigned
            // rather than allowed to exhaust memory.
            let count = metadata.partition_count(name);
            if let Some(n) = count.filter(|&n| n > MAX_PARTITIONS_PER_TOPIC) {
                tracing::warn!(
                    group = &*self.id,
                    topic = &**name,
                    partitions = n,
                    limit = MAX_PARTITIONS_PER_TOPIC,
                    "topic has more partitions than the coordinator supports; left unassigned"
                );
            }
            if let Some(partitions) = count.filter(|&n| n <= MAX_PARTITIONS_PER_TOPIC) {
                s.topics.push(TopicSpec {
                    name: name.clone(),
                    partitions,
                });
            }
        }
        let total: usize = s.topics.iter().map(|t| t.partitions as usize).sum();
        if total > MAX_TOTAL_PARTITIONS {
            return Err(Error::InvalidArgument {
                what: "subscription",
                reason: format!(
                    "the group's topics hold {total} partitions in all, more than the \
                     {MAX_TOTAL_PARTITIONS} one assignment supports"
                ),
            });
        }
        let same_topics = s.topics == self.current.topics;
        if !same_topics {
            // previous topic index → new topic index
            s.remap.clear();
            s.remap.extend(self.current.topics.iter().map(|old| {
                s.topics
                    .binary_search_by(|t| t.name.cmp(&old.name))
                    .ok()
                    .map(|i| i as TopicIndex)
            }));
        }
        s.sub_starts.clear();
        s.subs.clear();
        s.owned_starts.clear();
        s.owned.clear();
        s.sub_starts.push(0);
        s.owned_starts.push(0);
        for m in &self.members {
            if let [only] = &*s.topics {
                // The common single-topic case: no search.
                if m.topics.contains(&only.name) {
                    s.subs.push(0);
                }
            } else {
                for name in m.topics.iter() {
                    if let Ok(i) = s.topics.binary_search_by(|t| t.name.cmp(name)) {
                        s.subs.push(i as TopicIndex);
                    }
                }
            }
            s.sub_starts.push(s.subs.len() as u32);
            let prev = if m.slot == NO_SLOT {
                &[][..]
            } else {
                self.current.parts_of(m.slot)
            };
            if same_topics {
                s.owned.extend_from_slice(prev);
            } else {
                for p in prev {
                    if let Some(Some(t)) = s.remap.get(p.topic as usize) {
                        if p.partition < s.topics[*t as usize].partitions {
                            s.owned.push(PartitionRef::new(*t, p.partition));
                        }
                    }
                }
            }
            s.owned_starts.push(s.owned.len() as u32);
        }
        Ok(AssignmentInput::from_parts(
            &s.topics,
            &self.ids,
            &s.sub_starts,
            &s.subs,
            &s.owned_starts,
            &s.owned,
        ))
    }

    pub(crate) fn member_assignment(&self, index: usize) -> Vec<TopicPartition> {
        self.current.topic_partitions_of(self.members[index].slot)
    }

    pub(crate) fn strategy_name<'a>(&self, assignors: &'a [Arc<dyn Assignor>]) -> Option<&'a str> {
        self.strategy
            .and_then(|s| assignors.get(s))
            .map(|a| a.name())
    }
}

/// Checks the assignor's answer and lists each member's partitions (CSR layout: member `m`
/// owns `parts[starts[m]..starts[m + 1]]`, in topic then partition order). Two passes over the
/// owners: count, then fill.
fn index_members(
    owners: &Assignment,
    input: &AssignmentInput<'_>,
) -> Result<(Vec<u32>, Vec<PartitionRef>), AssignError> {
    owners.validate(input)?;
    let members = input.member_count();
    let mut counts = vec![0u32; members + 1];
    let mut total = 0usize;
    for &o in owners.owners() {
        if o != Assignment::UNASSIGNED {
            counts[o as usize + 1] += 1;
            total += 1;
        }
    }
    for m in 0..members {
        counts[m + 1] += counts[m];
    }
    let starts = counts.clone();
    let mut cursor = counts;
    let mut parts = vec![PartitionRef::new(0, 0); total];
    for t in 0..input.topics().len() {
        for (p, &o) in owners.topic_owners(t as TopicIndex).iter().enumerate() {
            if o != Assignment::UNASSIGNED {
                let at = &mut cursor[o as usize];
                parts[*at as usize] = PartitionRef::new(t as TopicIndex, p as u32);
                *at += 1;
            }
        }
    }
    Ok((starts, parts))
}
