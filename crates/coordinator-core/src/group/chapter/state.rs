//! The chapter's group: synchronous rebalances computed by the coordinator. Everything here
//! runs under the group's state lock and is synchronous: no I/O, no awaits.

use std::collections::BTreeMap;
use std::sync::Arc;

use std::any::Any;

use tracing::{info, warn};

use crate::coordinator::ExpiredMember;
use crate::error::Error;
use crate::group::classic::{ClassicProtocol, Opaque};
use crate::group::{
    CommitAuthority, Ctx, Group, GroupKind, GroupRecord, MemberRecord, OffsetExpiration,
};
use crate::ports::assign::{
    AssignError, Assignment, AssignmentInput, Assignor, MemberIndex, PartitionRef, TopicIndex,
    TopicSpec, MAX_PARTITIONS_PER_TOPIC, MAX_TOTAL_PARTITIONS,
};
use crate::ports::TopicMetadata;
use crate::types::{Generation, GroupState, TopicPartition};

/// Index of a member in the current generation's assignment; `NO_SLOT` for a member that has
/// not been through a completed rebalance yet.
pub(crate) const NO_SLOT: u32 = u32::MAX;

/// A member of a chapter group.
#[derive(Debug)]
pub(crate) struct MemberEntry {
    /// Subscribed topics, sorted and unique.
    pub(crate) topics: Box<[Arc<str>]>,
    /// Indices of the assignors this member supports, in its order of preference.
    pub(crate) strategies: Box<[usize]>,
    /// Session deadline (clock ms): the member expires when `now > deadline_ms`.
    pub(crate) deadline_ms: u64,
    /// Position in `GroupAssignment::member_starts`; changes only when a rebalance completes.
    pub(crate) slot: u32,
    /// Partitions this member may still be working on although the current generation
    /// withholds them (a cooperative strategy revoked them and nobody owns them yet). Until
    /// the member has seen an assignment without them, they stay withheld from everyone.
    pub(crate) revoking: Box<[TopicPartition]>,
}

impl MemberEntry {
    pub(crate) fn new(topics: Box<[Arc<str>]>, strategies: Box<[usize]>, deadline_ms: u64) -> Self {
        MemberEntry {
            topics,
            strategies,
            deadline_ms,
            slot: NO_SLOT,
            revoking: Box::default(),
        }
    }
}

/// The assignment of one generation, indexed both ways: owner per partition (for commit
/// checks) and partitions per member (for join and refresh answers).
#[derive(Debug, Default)]
pub(crate) struct GroupAssignment {
    pub(crate) topics: Vec<TopicSpec>,
    pub(crate) owners: Option<Assignment>,
    /// Per partition (aligned with `owners.owners()`): the generation since which its owner
    /// has owned it without interruption.
    since: Vec<Generation>,
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

    pub(crate) fn topic_partition(&self, p: PartitionRef) -> Option<TopicPartition> {
        let t = self.topics.get(p.topic as usize)?;
        Some(TopicPartition::new(t.name.clone(), p.partition))
    }

    pub(crate) fn topic_partitions_of(&self, slot: u32) -> Vec<TopicPartition> {
        self.parts_of(slot)
            .iter()
            .filter_map(|&p| self.topic_partition(p))
            .collect()
    }

    /// For each of the member's partitions (in order), the generation since which it has
    /// owned it without interruption.
    pub(crate) fn owned_since_of(&self, slot: u32) -> Vec<Generation> {
        let Some(owners) = &self.owners else {
            return Vec::new();
        };
        self.parts_of(slot)
            .iter()
            .map(|&p| {
                owners
                    .slot(p)
                    .and_then(|i| self.since.get(i))
                    .copied()
                    .unwrap_or_default()
            })
            .collect()
    }

    /// The ref of `tp` in this generation's topics, if its topic is assigned.
    fn find(&self, tp: &TopicPartition) -> Option<PartitionRef> {
        let t = self
            .topics
            .binary_search_by(|t| (*t.name).cmp(tp.topic()))
            .ok()?;
        (tp.partition() < self.topics[t].partitions)
            .then(|| PartitionRef::new(t as TopicIndex, tp.partition()))
    }

    /// Whether the member in `slot` owns `tp` in this generation.
    pub(crate) fn owns(&self, slot: u32, tp: &TopicPartition) -> bool {
        match (&self.owners, self.find(tp)) {
            (Some(owners), Some(p)) => owners.owner(p) == Some(slot),
            _ => false,
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
    same_topics: bool,
}

/// A group of the chapter's kind: the coordinator assigns, synchronously, on every
/// membership change.
#[derive(Debug)]
pub(crate) struct ChapterGroup {
    pub(crate) id: Arc<str>,
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
    /// Members whose `revoking` set is not empty: the follow-up rebalance that hands the
    /// withheld partitions over runs once this is zero.
    pub(crate) awaiting_acks: u32,
    /// The last rebalance withheld partitions: a follow-up is due once nobody must ack.
    pub(crate) followup: bool,
    /// Why the current generation's assignment is not the negotiated strategy's (the
    /// strategy failed during a removal and the fallback assigned instead).
    pub(crate) degraded: Option<String>,
}

/// How to undo a membership change whose rebalance failed.
#[derive(Debug)]
pub(crate) enum Undo {
    /// A new member was inserted at this index.
    Inserted(usize),
    /// The member at this index was replaced; this is its old entry.
    Replaced(usize, MemberEntry),
}

impl ChapterGroup {
    pub(crate) fn new(id: Arc<str>, strategies: usize) -> Self {
        ChapterGroup {
            id,
            state: GroupState::Empty,
            ids: Vec::new(),
            members: Vec::new(),
            topic_refs: BTreeMap::new(),
            strategy_support: vec![0; strategies],
            strategy: None,
            current: GroupAssignment::default(),
            scratch: Scratch::default(),
            awaiting_acks: 0,
            followup: false,
            degraded: None,
        }
    }

    pub(crate) fn find(&self, member: &str) -> Option<usize> {
        self.ids.binary_search_by(|id| (**id).cmp(member)).ok()
    }

    /// The earliest time at which a member's session will have expired (`now > deadline`,
    /// so one millisecond after the earliest deadline); 0 (at once) while a cooperative
    /// follow-up is due, so that every arm, including a cancelled timer run's, keeps it.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        if self.followup_due() {
            return Some(0);
        }
        self.members
            .iter()
            .map(|m| m.deadline_ms.saturating_add(1))
            .min()
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
        if !entry.revoking.is_empty() {
            if add {
                self.awaiting_acks += 1;
            } else {
                self.awaiting_acks -= 1;
            }
        }
    }

    /// Inserts or replaces a member. Returns how to undo it.
    ///
    /// A member that joins again has seen, in the answer to its join, everything it no
    /// longer owns: its `revoking` set is dropped (that is its acknowledgement).
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

    /// Removes the members at `indices` (ascending).
    pub(crate) fn remove(&mut self, indices: &[usize]) {
        for &i in indices.iter().rev() {
            self.ids.remove(i);
            let entry = self.members.remove(i);
            self.account(&entry, false);
        }
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
        }
    }

    /// The member at `index` has seen the current generation's assignment: it no longer
    /// works on partitions it lost. Returns whether this made the follow-up rebalance due.
    pub(crate) fn acknowledge(&mut self, index: usize) -> bool {
        let member = &mut self.members[index];
        if member.revoking.is_empty() {
            return false;
        }
        member.revoking = Box::default();
        self.awaiting_acks -= 1;
        self.followup_due()
    }

    /// Whether the follow-up rebalance of a cooperative hand-over should run now.
    pub(crate) fn followup_due(&self) -> bool {
        self.followup && self.awaiting_acks == 0
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

    /// Runs the rebalance (docs/rules.md#rebalance) into generation `next`: a new assignment
    /// (or Empty). On error nothing has changed; the caller publishes `next` on success.
    pub(crate) fn rebalance(
        &mut self,
        next: Generation,
        assignors: &[Arc<dyn Assignor>],
        metadata: &dyn TopicMetadata,
    ) -> Result<(), Error> {
        if self.ids.is_empty() {
            self.install_empty();
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
            let failed = |e: AssignError| Error::AssignorFailed {
                assignor: assignor.name().to_string(),
                reason: e.message().to_string(),
            };
            let owners = assignor.assign(&input).map_err(failed)?;
            let (starts, parts) = index_members(&owners, &input).map_err(failed)?;
            (owners, starts, parts)
        };
        self.install(next, owners, starts, parts);
        self.strategy = Some(strategy);
        self.degraded = None;
        Ok(())
    }

    /// A rebalance that cannot fail, for removals (leave, expiry): if the negotiated strategy
    /// fails, the chapter's round-robin assigns instead, and if even the input cannot be
    /// built (the topics grew past the caps), every partition is left unowned. Returns the
    /// failure that was worked around, if any.
    pub(crate) fn rebalance_after_removal(
        &mut self,
        next: Generation,
        assignors: &[Arc<dyn Assignor>],
        metadata: &dyn TopicMetadata,
    ) -> Option<Error> {
        let error = self.rebalance(next, assignors, metadata).err()?;
        let (owners, starts, parts, how) = match self.prepare_input(metadata) {
            Ok(input) => {
                let owners = fallback_round_robin(&input);
                match index_members(&owners, &input) {
                    Ok((starts, parts)) => (owners, starts, parts, "the chapter's round-robin"),
                    Err(_) => unowned(&input),
                }
            }
            Err(_) => {
                self.scratch.topics.clear();
                self.scratch.same_topics = false;
                let input = self.empty_input();
                unowned(&input)
            }
        };
        self.install(next, owners, starts, parts);
        self.strategy = None;
        self.degraded = Some(format!("{error}; {how} assigned generation {next} instead"));
        Some(error)
    }

    fn install_empty(&mut self) {
        self.state = GroupState::Empty;
        self.strategy = None;
        self.current = GroupAssignment::default();
        self.degraded = None;
        self.followup = false;
    }

    /// An input with the scratch topics and the members, nobody owning anything.
    fn empty_input(&mut self) -> AssignmentInput<'_> {
        let s = &mut self.scratch;
        let n = self.ids.len() as u32;
        s.sub_starts.clear();
        s.sub_starts.resize(n as usize + 1, 0);
        s.owned_starts.clear();
        s.owned_starts.resize(n as usize + 1, 0);
        s.subs.clear();
        s.owned.clear();
        AssignmentInput::from_parts(
            &s.topics,
            &self.ids,
            &s.sub_starts,
            &s.subs,
            &s.owned_starts,
            &s.owned,
        )
    }

    /// Publishes a computed assignment as generation `next`, with each partition's
    /// ownership age and each member's withheld partitions.
    fn install(
        &mut self,
        next: Generation,
        owners: Assignment,
        starts: Vec<u32>,
        parts: Vec<PartitionRef>,
    ) {
        let old = &self.current;
        let new_topics = &self.scratch.topics;
        // Slot of each member (by current index) in the generation being replaced.
        let slots: Vec<u32> = self.members.iter().map(|m| m.slot).collect();
        let old_members = old.member_starts.len().saturating_sub(1);
        let mut member_of_old_slot = vec![MemberIndex::MAX; old_members];
        for (m, &s) in slots.iter().enumerate() {
            if let Some(entry) = member_of_old_slot.get_mut(s as usize) {
                *entry = m as MemberIndex;
            }
        }
        let mut since = vec![next; owners.owners().len()];
        // (member index, partition) for every partition withheld from a member.
        let mut withheld: Vec<(usize, TopicPartition)> = Vec::new();
        if let Some(old_owners) = &old.owners {
            let mut base = 0usize;
            for (t, spec) in new_topics.iter().enumerate() {
                let new_t = owners.topic_owners(t as TopicIndex);
                let Some(since_t) = since.get_mut(base..base + new_t.len()) else {
                    break; // cannot happen: `since` has one entry per partition
                };
                base += new_t.len();
                let old_t = if self.scratch.same_topics {
                    Some(t)
                } else {
                    old.topics.binary_search_by(|o| o.name.cmp(&spec.name)).ok()
                };
                let Some(old_t) = old_t else {
                    continue; // a new topic: every owner is new
                };
                let old_t = old_t as TopicIndex;
                let old_owners_t = old_owners.topic_owners(old_t);
                let old_since_t = old_owners
                    .slot(PartitionRef::new(old_t, 0))
                    .and_then(|b| old.since.get(b..b + old_owners_t.len()))
                    .unwrap_or(&[]);
                // One pass over flat slices (partitions the topic gained have no old owner).
                for (p, ((&new_owner, &old_owner), (since_p, &old_since))) in new_t
                    .iter()
                    .zip(old_owners_t)
                    .zip(since_t.iter_mut().zip(old_since_t))
                    .enumerate()
                {
                    if old_owner == Assignment::UNASSIGNED {
                        continue;
                    }
                    if new_owner == Assignment::UNASSIGNED {
                        // Withheld from its previous owner, which may still be working on it.
                        if let Some(&m) = member_of_old_slot.get(old_owner as usize) {
                            if m != MemberIndex::MAX {
                                withheld.push((
                                    m as usize,
                                    TopicPartition::new(spec.name.clone(), p as u32),
                                ));
                            }
                        }
                    } else if slots.get(new_owner as usize) == Some(&old_owner) {
                        *since_p = old_since;
                    }
                }
            }
        }
        // Partitions a member was already told it lost but may still hold stay withheld
        // while nobody owns them.
        for (m, member) in self.members.iter().enumerate() {
            for tp in member.revoking.iter() {
                if let Ok(t) = new_topics.binary_search_by(|s| (*s.name).cmp(tp.topic())) {
                    let r = PartitionRef::new(t as TopicIndex, tp.partition());
                    if owners.slot(r).is_some() && owners.owner(r).is_none() {
                        withheld.push((m, tp.clone()));
                    }
                }
            }
        }
        withheld.sort_unstable();
        withheld.dedup();
        // Hand each member its list; members with nothing withheld (nearly all, nearly
        // always) cost one comparison, no allocation.
        let mut awaiting = 0;
        let mut next = 0;
        for (m, member) in self.members.iter_mut().enumerate() {
            let start = next;
            while withheld.get(next).is_some_and(|(owner, _)| *owner == m) {
                next += 1;
            }
            if let Some(list) = withheld.get(start..next).filter(|l| !l.is_empty()) {
                awaiting += 1;
                member.revoking = list.iter().map(|(_, tp)| tp.clone()).collect();
            } else if !member.revoking.is_empty() {
                member.revoking = Box::default();
            }
        }
        self.awaiting_acks = awaiting;
        self.followup = awaiting > 0;

        std::mem::swap(&mut self.current.topics, &mut self.scratch.topics);
        self.current.owners = Some(owners);
        self.current.since = since;
        self.current.member_starts = starts;
        self.current.member_parts = parts;
        for (slot, m) in self.members.iter_mut().enumerate() {
            m.slot = slot as u32;
        }
        self.state = GroupState::Stable;
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
        s.same_topics = same_topics;
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
            if !m.revoking.is_empty() {
                // Withheld partitions the member may still hold count as its own, so a
                // cooperative strategy keeps withholding them from everyone else.
                let from = s.owned_starts.last().copied().unwrap_or(0) as usize;
                for tp in m.revoking.iter() {
                    if let Ok(t) = s.topics.binary_search_by(|t| (*t.name).cmp(tp.topic())) {
                        if tp.partition() < s.topics[t].partitions {
                            s.owned
                                .push(PartitionRef::new(t as TopicIndex, tp.partition()));
                        }
                    }
                }
                s.owned[from..].sort_unstable();
                let mut kept = from;
                for i in from..s.owned.len() {
                    if i == from || s.owned[i] != s.owned[kept - 1] {
                        s.owned[kept] = s.owned[i];
                        kept += 1;
                    }
                }
                s.owned.truncate(kept);
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

    pub(crate) fn member_owned_since(&self, index: usize) -> Vec<Generation> {
        self.current.owned_since_of(self.members[index].slot)
    }

    pub(crate) fn strategy_name<'a>(&self, assignors: &'a [Arc<dyn Assignor>]) -> Option<&'a str> {
        self.strategy
            .and_then(|s| assignors.get(s))
            .map(|a| a.name())
    }
}

impl ChapterGroup {
    /// Logs a completed rebalance into `to`.
    pub(crate) fn log_rebalance(&self, to: Generation, assignors: &[Arc<dyn Assignor>]) {
        info!(
            group = &*self.id,
            from = to.get() - 1,
            to = to.get(),
            members = self.ids.len(),
            assigned = self.current.assigned_count(),
            strategy = self.strategy_name(assignors).unwrap_or("none"),
            state = self.state.as_str(),
            withheld_from = self.awaiting_acks,
            "group rebalanced"
        );
    }

    /// Removes the members at `indices` and rebalances into the next generation; never
    /// fails (see [`rebalance_after_removal`](Self::rebalance_after_removal)). The caller
    /// holds the commit gate exclusively.
    pub(crate) fn remove_members(&mut self, indices: &[usize], ctx: &mut Ctx<'_>) {
        let next = ctx.generation.next();
        self.remove(indices);
        if let Some(e) = self.rebalance_after_removal(next, ctx.assignors, ctx.metadata) {
            warn!(
                group = &*self.id,
                generation = next.get(),
                code = e.code(),
                error = %e,
                fallback = self.degraded.as_deref().unwrap_or(""),
                "the strategy failed during a removal; the fallback assigned this generation"
            );
        }
        self.log_rebalance(next, ctx.assignors);
        *ctx.generation = next;
    }

    /// Hands over the partitions a cooperative rebalance withheld, now that every member
    /// that lost one has seen it. The caller holds the commit gate exclusively. Returns
    /// whether a generation was installed.
    pub(crate) fn run_followup(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let next = ctx.generation.next();
        match self.rebalance(next, ctx.assignors, ctx.metadata) {
            Ok(()) => {
                info!(
                    group = &*self.id,
                    generation = next.get(),
                    "follow-up rebalance hands over withheld partitions"
                );
                self.log_rebalance(next, ctx.assignors);
                *ctx.generation = next;
                true
            }
            Err(e) => {
                // Nothing changed; members keep what they have and the withheld partitions
                // wait for the next membership change.
                self.followup = false;
                warn!(group = &*self.id, code = e.code(), error = %e, "follow-up rebalance failed");
                false
            }
        }
    }
}

impl Group for ChapterGroup {
    fn kind(&self) -> GroupKind {
        GroupKind::Chapter
    }

    fn state(&self) -> GroupState {
        self.state
    }

    fn has_members(&self) -> bool {
        !self.ids.is_empty()
    }

    fn member_count(&self) -> usize {
        self.ids.len()
    }

    /// The chapter's groups are consumer groups: they assign topic partitions.
    fn protocol_type(&self) -> &str {
        "consumer"
    }

    /// A chapter group's members commit through the chapter's own call
    /// ([`Coordinator::commit`](crate::Coordinator::commit)). Through Kafka's OffsetCommit,
    /// only a plain commit while the group is Empty is accepted.
    fn validate_offset_commit(
        &mut self,
        authority: &CommitAuthority,
        _partitions: &mut dyn Iterator<Item = &TopicPartition>,
        _ctx: &Ctx<'_>,
    ) -> Result<(), Error> {
        if self.has_members() {
            return Err(Error::wrong_group_type(&self.id, "classic", "chapter"));
        }
        match authority {
            CommitAuthority::Plain => Ok(()),
            other => Err(Error::UnknownMember {
                group: self.id.to_string(),
                member: other.member_id().to_string(),
            }),
        }
    }

    fn validate_offset_delete(&self, _group_id: &str) -> Result<(), Error> {
        Ok(())
    }

    fn is_subscribed_to(&self, topic: &str) -> bool {
        self.members
            .iter()
            .any(|m| m.topics.iter().any(|t| &**t == topic))
    }

    /// An Empty group's offsets count from when it became Empty; a group with members is
    /// Stable and knows its subscriptions (Kafka's rule for a Stable consumer group).
    fn offset_expiration(&self) -> OffsetExpiration {
        match self.state {
            GroupState::Empty => OffsetExpiration::SinceEmpty,
            GroupState::Stable => OffsetExpiration::SinceCommit,
            _ => OffsetExpiration::Never,
        }
    }

    fn next_deadline(&self) -> Option<u64> {
        ChapterGroup::next_deadline(self)
    }

    /// Expires the members whose session passed (`now > deadline`) in one rebalance, or
    /// runs a due follow-up.
    fn handle_due(&mut self, ctx: &mut Ctx<'_>) -> Vec<ExpiredMember> {
        let now = ctx.now;
        let gone: Vec<usize> = (0..self.ids.len())
            .filter(|&i| now > self.members[i].deadline_ms)
            .collect();
        if gone.is_empty() {
            if self.followup_due() {
                self.run_followup(ctx);
            }
            return Vec::new();
        }
        let names: Vec<ExpiredMember> = gone
            .iter()
            .map(|&i| ExpiredMember {
                group: self.id.to_string(),
                member: self.ids[i].to_string(),
            })
            .collect();
        self.remove_members(&gone, ctx);
        for e in &names {
            info!(group = %e.group, member = %e.member, now_ms = now, "member session expired");
        }
        names
    }

    fn record(&self, generation: Generation, assignors: &[Arc<dyn Assignor>]) -> GroupRecord {
        let name = |s: usize| assignors.get(s).map_or("", |a| a.name()).to_string();
        GroupRecord {
            group_id: self.id.to_string(),
            kind: GroupKind::Chapter,
            generation,
            state: self.state,
            protocol_type: "consumer".to_string(),
            protocol: self.strategy_name(assignors).map(str::to_string),
            leader: None,
            members: self
                .ids
                .iter()
                .zip(&self.members)
                .enumerate()
                .map(|(i, (id, m))| MemberRecord {
                    member_id: id.to_string(),
                    group_instance_id: None,
                    client_id: String::new(),
                    client_host: String::new(),
                    session_timeout_ms: 0,
                    rebalance_timeout_ms: 0,
                    protocols: m
                        .strategies
                        .iter()
                        .map(|&s| {
                            ClassicProtocol::new(name(s), Opaque::from([]))
                                .with_topics(m.topics.iter().map(|t| t.to_string()))
                        })
                        .collect(),
                    assignment: Opaque::from([]),
                    partitions: self.member_assignment(i),
                    consumer: None,
                })
                .collect(),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The chapter's round-robin (docs/rules.md#round-robin): sorted members and topics, one
/// cursor shared across topics. The fallback when the negotiated strategy fails during a
/// removal; it cannot fail.
fn fallback_round_robin(input: &AssignmentInput<'_>) -> Assignment {
    let mut out = Assignment::new(input);
    let mut cursor = 0usize;
    let mut eligible: Vec<MemberIndex> = Vec::new();
    for t in 0..input.topics().len() as TopicIndex {
        eligible.clear();
        eligible.extend(
            (0..input.member_count() as MemberIndex).filter(|&m| input.is_subscribed(m, t)),
        );
        if eligible.is_empty() {
            continue;
        }
        for owner in out.topic_owners_mut(t) {
            *owner = eligible[cursor % eligible.len()];
            cursor += 1;
        }
    }
    out
}

/// Everything unowned: the last resort of a removal.
fn unowned(input: &AssignmentInput<'_>) -> (Assignment, Vec<u32>, Vec<PartitionRef>, &'static str) {
    let owners = Assignment::new(input);
    let starts = vec![0; input.member_count() + 1];
    (
        owners,
        starts,
        Vec::new(),
        "no assignment (every partition unowned)",
    )
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
