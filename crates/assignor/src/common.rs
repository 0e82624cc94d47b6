//! Building blocks shared by the strategies: who subscribes to each topic, a flat owner
//! table, and the cyclic fill every round-robin variant reduces to.

use coordinator_core::{
    AssignError, Assignment, AssignmentInput, MemberIndex, PartitionRef, TopicIndex,
};

/// The members subscribed to each topic, in member (= member id) order.
///
/// Stored as one array with per-topic offsets, built in two linear passes over the
/// subscriptions (count, then fill), so a group of 1,000 members × 100 topics costs two
/// allocations rather than one vector per topic.
#[derive(Debug)]
pub(crate) struct Subscribers {
    starts: Vec<u32>,
    members: Vec<MemberIndex>,
}

impl Subscribers {
    pub(crate) fn new(input: &AssignmentInput<'_>) -> Self {
        let topics = input.topics().len();
        let mut starts = vec![0u32; topics + 1];
        let members = member_indices(input);
        for m in members.clone() {
            for &t in input.subscriptions(m) {
                if let Some(c) = starts.get_mut(t as usize + 1) {
                    *c += 1;
                }
            }
        }
        for t in 0..topics {
            starts[t + 1] += starts[t];
        }
        let mut next = starts.clone();
        let mut flat = vec![0; starts[topics] as usize];
        for m in members {
            for &t in input.subscriptions(m) {
                if let Some(pos) = next.get_mut(t as usize) {
                    flat[*pos as usize] = m;
                    *pos += 1;
                }
            }
        }
        Subscribers {
            starts,
            members: flat,
        }
    }

    /// The members subscribed to `topic`, sorted.
    pub(crate) fn of(&self, topic: TopicIndex) -> &[MemberIndex] {
        let t = topic as usize;
        match (self.starts.get(t), self.starts.get(t + 1)) {
            (Some(&a), Some(&b)) => &self.members[a as usize..b as usize],
            _ => &[],
        }
    }
}

/// `0..member_count` as member indices, refusing a group too large for [`MemberIndex`]
/// (the largest value is reserved for [`Assignment::UNASSIGNED`]).
pub(crate) fn member_indices(input: &AssignmentInput<'_>) -> std::ops::Range<MemberIndex> {
    // `check_size` has run before any strategy calls this; saturate rather than wrap anyway.
    let n = MemberIndex::try_from(input.member_count()).unwrap_or(Assignment::UNASSIGNED);
    0..n
}

/// Refuses inputs whose members or partitions do not fit the index types (partition slots
/// are stored as `u32`, and the largest member index is reserved for
/// [`Assignment::UNASSIGNED`]).
pub(crate) fn check_size(input: &AssignmentInput<'_>) -> Result<(), AssignError> {
    if input.member_count() >= Assignment::UNASSIGNED as usize {
        return Err(AssignError::new(format!(
            "a group of {} members is too large to assign",
            input.member_count()
        )));
    }
    if input.partition_count() > u32::MAX as usize {
        return Err(AssignError::new(format!(
            "{} partitions are too many to assign in one group",
            input.partition_count()
        )));
    }
    Ok(())
}

/// Writes `ring[start]`, `ring[start + 1]`, … into `out`, wrapping around `ring`.
///
/// This is the seed's `eligible[cursor % len]` with the division done once per topic
/// instead of once per partition: whole copies of `ring` are memcpys.
pub(crate) fn fill_cyclic(out: &mut [MemberIndex], ring: &[MemberIndex], start: usize) {
    if ring.is_empty() {
        return;
    }
    let mut from = start % ring.len();
    let mut pos = 0;
    while pos < out.len() {
        let chunk = &ring[from..];
        let n = chunk.len().min(out.len() - pos);
        out[pos..pos + n].copy_from_slice(&chunk[..n]);
        pos += n;
        from = 0;
    }
}

/// Every partition's owner in one flat array, topic by topic in input order (the layout of
/// [`Assignment`]), for strategies that move single partitions around.
#[derive(Debug)]
pub(crate) struct Flat {
    base: Vec<usize>,
    pub(crate) owners: Vec<MemberIndex>,
}

impl Flat {
    pub(crate) fn new(input: &AssignmentInput<'_>) -> Self {
        let mut base = Vec::with_capacity(input.topics().len() + 1);
        let mut total = 0usize;
        base.push(0);
        for t in input.topics() {
            total += t.partitions as usize;
            base.push(total);
        }
        Flat {
            base,
            owners: vec![Assignment::UNASSIGNED; total],
        }
    }

    /// The slot of a valid partition reference, `None` for one outside the input.
    pub(crate) fn slot(&self, p: PartitionRef) -> Option<usize> {
        let t = p.topic as usize;
        let (base, end) = (*self.base.get(t)?, *self.base.get(t + 1)?);
        let slot = base + p.partition as usize;
        (slot < end).then_some(slot)
    }

    /// The slots of `topic`'s partitions.
    pub(crate) fn range(&self, topic: TopicIndex) -> std::ops::Range<usize> {
        let t = topic as usize;
        match (self.base.get(t), self.base.get(t + 1)) {
            (Some(&a), Some(&b)) => a..b,
            _ => 0..0,
        }
    }

    /// Copies the owners into an [`Assignment`] of the same input.
    pub(crate) fn into_assignment(self, input: &AssignmentInput<'_>) -> Assignment {
        let mut out = Assignment::new(input);
        for t in 0..input.topics().len() as TopicIndex {
            let range = self.range(t);
            let dst = out.topic_owners_mut(t);
            if dst.len() == range.len() {
                dst.copy_from_slice(&self.owners[range]);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordinator_core::AssignmentRequest;

    #[test]
    fn subscribers_are_listed_per_topic_in_member_order() {
        let request = AssignmentRequest::builder()
            .topic("a", 1)
            .topic("b", 1)
            .topic("c", 1)
            .member("z", ["a", "c"])
            .member("y", ["c"])
            .member("x", ["a"])
            .build()
            .expect("valid");
        let subs = Subscribers::new(&request.input());
        // members sorted: x=0, y=1, z=2
        assert_eq!(subs.of(0), &[0, 2]);
        assert!(subs.of(1).is_empty());
        assert_eq!(subs.of(2), &[1, 2]);
        assert!(subs.of(9).is_empty());
    }

    #[test]
    fn fill_cyclic_wraps_from_the_start_position() {
        let mut out = [0; 7];
        fill_cyclic(&mut out, &[10, 11, 12], 2);
        assert_eq!(out, [12, 10, 11, 12, 10, 11, 12]);
        let mut short = [0; 2];
        fill_cyclic(&mut short, &[10, 11, 12], 4);
        assert_eq!(short, [11, 12]);
        let mut untouched = [5; 2];
        fill_cyclic(&mut untouched, &[], 0);
        assert_eq!(untouched, [5, 5]);
    }

    #[test]
    fn flat_slots_follow_the_assignment_layout() {
        let request = AssignmentRequest::builder()
            .topic("a", 2)
            .topic("b", 3)
            .member("m", ["a", "b"])
            .build()
            .expect("valid");
        let input = request.input();
        let mut flat = Flat::new(&input);
        assert_eq!(flat.slot(PartitionRef::new(1, 2)), Some(4));
        assert_eq!(flat.slot(PartitionRef::new(1, 3)), None);
        assert_eq!(flat.slot(PartitionRef::new(2, 0)), None);
        assert_eq!(flat.range(1), 2..5);
        flat.owners[4] = 0;
        let out = flat.into_assignment(&input);
        assert_eq!(out.owner(PartitionRef::new(1, 2)), Some(0));
        assert_eq!(out.owner(PartitionRef::new(0, 0)), None);
    }
}
