//! Sticky assignment when members subscribe to different topics.
//!
//! This follows Kafka's `GeneralAssignmentBuilder` (after KAFKA-12675) step by step, with
//! index arrays in place of its maps and sorted sets:
//!
//! 1. Every member keeps the partitions it owned and still subscribes to.
//! 2. The rest are taken topic by topic — topics with fewer subscribers first, then by
//!    name — and each goes to the subscriber with the fewest partitions (ties: smallest id).
//! 3. Balancing passes: walk the partitions of topics with two or more subscribers (first
//!    only those assigned in step 2, unless a member dropped a topic; then all, in step 2's
//!    order) and move a partition whenever its owner has at least two more partitions than
//!    the least loaded subscriber of its topic; repeat until a pass moves nothing. If a
//!    partition of the topic moved the opposite way earlier in this rebalance, that one
//!    moves back instead, so no two members swap partitions of one topic.
//!
//! The result is balanced in Kafka's sense: no partition could move to another subscriber
//! of its topic that has two or more fewer partitions than its owner.
//!
//! Two details differ from Kafka's code, neither in a case its tests pin down. When the
//! partition picked in step 3 has itself already moved in this rebalance, Kafka looks for an
//! opposite movement from its *original* owner and may move a third member's partition
//! instead, which need not improve the balance; here the undo rule above always applies
//! between the two members concerned, so every move strictly improves the balance and the
//! passes provably end. And Kafka's final "revert if the balance score did not improve"
//! check is omitted: with every move improving, it can never fire.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::ops::Range;

use coordinator_core::{AssignError, Assignment, AssignmentInput, MemberIndex, TopicIndex};

use crate::common::{member_indices, Flat, Subscribers};

/// Fills `flat` for a group with mixed subscriptions.
pub(super) fn assign(
    input: &AssignmentInput<'_>,
    subscribers: &Subscribers,
    flat: &mut Flat,
) -> Result<(), AssignError> {
    let mut count = vec![0u32; input.member_count()];

    // 1. Keep what is still subscribed.
    let mut revocation_required = false;
    for m in member_indices(input) {
        for &p in input.owned(m) {
            if subscribers.of(p.topic).is_empty() {
                continue; // nobody subscribes any more: the partition leaves the assignment
            }
            if !input.is_subscribed(m, p.topic) {
                revocation_required = true;
                continue;
            }
            if let Some(slot) = flat.slot(p) {
                flat.owners[slot] = m;
                count[m as usize] += 1;
            }
        }
    }

    // 2. Assign the rest to the least loaded subscriber.
    let mut order: Vec<TopicIndex> = (0..input.topics().len() as TopicIndex)
        .filter(|&t| !subscribers.of(t).is_empty())
        .collect();
    order.sort_by_key(|&t| (subscribers.of(t).len(), t));
    let mut fresh: Vec<(TopicIndex, u32)> = Vec::new();
    let mut heap: BinaryHeap<Reverse<(u32, MemberIndex)>> = BinaryHeap::new();
    for &t in &order {
        let eligible = subscribers.of(t);
        let mut heap_ready = false;
        for slot in flat.range(t) {
            if flat.owners[slot] != Assignment::UNASSIGNED {
                continue;
            }
            if !heap_ready {
                // Only this topic's loop changes these members' counts until it ends.
                heap.clear();
                heap.extend(eligible.iter().map(|&m| Reverse((count[m as usize], m))));
                heap_ready = true;
            }
            let Some(Reverse((c, m))) = heap.pop() else {
                break;
            };
            flat.owners[slot] = m;
            count[m as usize] = c + 1;
            heap.push(Reverse((c + 1, m)));
            fresh.push((t, slot as u32));
        }
    }

    // 3. Balance. Topics with one subscriber cannot move and are left out.
    let movable = |t: TopicIndex| subscribers.of(t).len() >= 2;
    let everything: Vec<(TopicIndex, Range<usize>)> = order
        .iter()
        .filter(|&&t| movable(t))
        .map(|&t| (t, flat.range(t)))
        .collect();
    let mut balancer = Balancer::new(*input, subscribers, &mut flat.owners, count);
    if !revocation_required {
        fresh.retain(|&(t, _)| movable(t));
        balancer.run(|b| {
            let mut moved = false;
            for &(t, slot) in &fresh {
                moved |= b.improve(t, slot as usize);
            }
            moved
        });
    }
    balancer.run(|b| {
        let mut moved = false;
        for (t, slots) in &everything {
            for slot in slots.clone() {
                moved |= b.improve(*t, slot);
            }
        }
        moved
    });
    Ok(())
}

/// The least loaded subscriber of a topic, cached between moves.
#[derive(Clone, Copy, Debug)]
struct Least {
    count: u32,
    member: MemberIndex,
    stale: bool,
}

/// Moves partitions from loaded members to the least loaded subscribers of their topics.
struct Balancer<'a> {
    input: AssignmentInput<'a>,
    subscribers: &'a Subscribers,
    owners: &'a mut [MemberIndex],
    count: Vec<u32>,
    least: Vec<Least>,
    /// Per slot, the owner before this rebalance moved it (UNASSIGNED: not moved). Allocated
    /// on the first move: most rebalances move nothing.
    moved_from: Vec<MemberIndex>,
    /// Movements of this rebalance as (topic, from, to, slot), to find one to undo.
    movements: BTreeSet<(TopicIndex, MemberIndex, MemberIndex, u32)>,
}

impl<'a> Balancer<'a> {
    fn new(
        input: AssignmentInput<'a>,
        subscribers: &'a Subscribers,
        owners: &'a mut [MemberIndex],
        count: Vec<u32>,
    ) -> Self {
        let stale = Least {
            count: 0,
            member: Assignment::UNASSIGNED,
            stale: true,
        };
        Balancer {
            least: vec![stale; input.topics().len()],
            input,
            subscribers,
            owners,
            count,
            moved_from: Vec::new(),
            movements: BTreeSet::new(),
        }
    }

    /// Repeats `pass` until it reports that it moved nothing.
    fn run(&mut self, mut pass: impl FnMut(&mut Self) -> bool) {
        // Every move lowers the sum of squared member loads, so this ends.
        while pass(self) {}
    }

    /// Moves the partition in `slot` (of topic `t`) if its owner has at least two more
    /// partitions than the least loaded subscriber of `t`. Returns whether something moved.
    fn improve(&mut self, t: TopicIndex, slot: usize) -> bool {
        let owner = self.owners[slot];
        let Some(&load) = self.count.get(owner as usize) else {
            return false;
        };
        let least = self.least(t);
        if least.member == Assignment::UNASSIGNED || load < least.count.saturating_add(2) {
            return false;
        }
        // Undo an opposite movement of this topic rather than add a second one.
        let undo = self
            .movements
            .range((t, least.member, owner, 0)..=(t, least.member, owner, u32::MAX))
            .next()
            .map(|&(_, _, _, s)| s as usize);
        self.move_partition(t, undo.unwrap_or(slot), least.member);
        true
    }

    fn least(&mut self, t: TopicIndex) -> Least {
        let cached = self.least[t as usize];
        if !cached.stale {
            return cached;
        }
        let mut best = Least {
            count: u32::MAX,
            member: Assignment::UNASSIGNED,
            stale: false,
        };
        for &m in self.subscribers.of(t) {
            let c = self.count[m as usize];
            if c < best.count {
                best.count = c;
                best.member = m;
            }
        }
        self.least[t as usize] = best;
        best
    }

    fn move_partition(&mut self, t: TopicIndex, slot: usize, to: MemberIndex) {
        let from = self.owners[slot];
        if self.moved_from.is_empty() {
            self.moved_from = vec![Assignment::UNASSIGNED; self.owners.len()];
        }
        let origin = self.moved_from[slot];
        let s = slot as u32;
        if origin == Assignment::UNASSIGNED {
            self.movements.insert((t, from, to, s));
            self.moved_from[slot] = from;
        } else {
            self.movements.remove(&(t, origin, from, s));
            if origin == to {
                self.moved_from[slot] = Assignment::UNASSIGNED;
            } else {
                self.movements.insert((t, origin, to, s));
            }
        }
        self.owners[slot] = to;
        self.count[from as usize] -= 1;
        self.count[to as usize] += 1;

        let from_load = self.count[from as usize];
        for &u in self.input.subscriptions(from) {
            let l = &mut self.least[u as usize];
            if !l.stale && (from_load, from) < (l.count, l.member) {
                l.count = from_load;
                l.member = from;
            }
        }
        for &u in self.input.subscriptions(to) {
            let l = &mut self.least[u as usize];
            if l.member == to {
                l.stale = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{assign_names, request_owned};
    use crate::StickyAssignor;

    #[test]
    fn an_opposite_movement_is_undone_rather_than_doubled() {
        // a owned x-18, y-0, y-2. z (one subscriber) makes a the most loaded member, so the
        // first balancing pass moves x-18 to c and y-0, y-2 to b; the second pass finds c
        // over a on x and moves x-18 back to a instead of moving one of c's partitions.
        let r = request_owned(
            &[("x", 21), ("y", 3), ("z", 19)],
            &[("a", &["x", "y", "z"]), ("b", &["y"]), ("c", &["x"])],
            &[("a", "x", 18), ("a", "y", 0), ("a", "y", 2)],
        );
        let got = assign_names(&StickyAssignor, &r);
        let mut a = vec!["x-18".to_string()];
        a.extend((0..19).map(|p| format!("z-{p}")));
        assert_eq!(got["a"], a);
        assert_eq!(got["b"], ["y-0", "y-1", "y-2"]);
        let c: Vec<String> = (0..21)
            .filter(|&p| p != 18)
            .map(|p| format!("x-{p}"))
            .collect();
        assert_eq!(got["c"], c);
    }
}
