//! Sticky assignment when every member subscribes to the same topics.
//!
//! This is Kafka's `ConstrainedAssignmentBuilder` (KAFKA-9987, KAFKA-12464): with P
//! partitions and C members, every member must end with `min_quota = ⌊P/C⌋` partitions and
//! exactly `P mod C` of them with one more. In member order, each member keeps
//! - all its previously owned partitions if it owned fewer than `min_quota`;
//! - `max_quota` of them if it owned at least that many and an extra slot is still free;
//! - otherwise `min_quota` of them, and becomes a candidate for a free extra slot.
//!
//! The partitions nobody kept are then dealt out in (topic, partition) order: round-robin
//! over the members still below `min_quota` (in id order, a member leaving the circle when it
//! reaches the quota), then one each to the candidates for extra slots, first come first
//! served. Everything is index arithmetic over the owner table: no maps, no per-partition
//! allocation, O(P + C) apart from sorting a member's owned partitions when it must drop
//! some of several topics.

use std::collections::VecDeque;

use coordinator_core::{
    AssignError, Assignment, AssignmentInput, MemberIndex, PartitionRef, TopicIndex,
};

use crate::common::{member_indices, Flat};

/// Fills `flat` for a group whose members all subscribe to exactly `topics` (sorted).
pub(super) fn assign(
    input: &AssignmentInput<'_>,
    topics: &[TopicIndex],
    flat: &mut Flat,
) -> Result<(), AssignError> {
    let members = input.member_count();
    if members == 0 {
        return Ok(());
    }
    let mut subscribed = vec![false; input.topics().len()];
    let mut total = 0usize;
    for &t in topics {
        if let (Some(flag), Some(spec)) = (
            subscribed.get_mut(t as usize),
            input.topics().get(t as usize),
        ) {
            *flag = true;
            total += spec.partitions as usize;
        }
    }
    let min_quota = total / members;
    let extra_slots = total % members;
    let max_quota = min_quota + usize::from(extra_slots > 0);

    let mut count = vec![0usize; members];
    let mut extra_taken = 0usize;
    // Members below min_quota, and members at min_quota that may take one of the extra slots.
    let mut below_min: Vec<MemberIndex> = Vec::new();
    let mut at_min: VecDeque<MemberIndex> = VecDeque::new();
    let mut scratch: Vec<PartitionRef> = Vec::new();

    for m in member_indices(input) {
        let is_valid =
            |p: &&PartitionRef| subscribed.get(p.topic as usize).copied().unwrap_or(false);
        let owned = input.owned(m);
        let valid = owned.iter().filter(is_valid).count();
        let keep = if valid < min_quota {
            below_min.push(m);
            valid
        } else if valid >= max_quota && extra_taken < extra_slots {
            extra_taken += 1;
            if extra_taken == extra_slots {
                at_min.clear();
            }
            max_quota
        } else {
            if extra_taken < extra_slots {
                at_min.push_back(m);
            }
            min_quota
        };
        let kept: &[PartitionRef] = if keep == valid && valid == owned.len() {
            owned
        } else {
            scratch.clear();
            scratch.extend(owned.iter().filter(is_valid));
            // Kafka keeps the lowest partition numbers first, whatever their topic. The input
            // is sorted by (topic, partition), so one topic is already in that order.
            if keep < valid && scratch.first().map(|p| p.topic) != scratch.last().map(|p| p.topic) {
                scratch.sort_unstable_by_key(|p| (p.partition, p.topic));
            }
            &scratch[..keep]
        };
        for &p in kept {
            if let Some(slot) = flat.slot(p) {
                flat.owners[slot] = m;
            }
        }
        count[m as usize] = keep;
    }

    let mut unassigned: Vec<u32> = Vec::with_capacity(total.saturating_sub(count.iter().sum()));
    for &t in topics {
        for slot in flat.range(t) {
            if flat.owners[slot] == Assignment::UNASSIGNED {
                unassigned.push(slot as u32);
            }
        }
    }

    let mut partitions = unassigned.into_iter();
    // Round-robin over the members below min_quota; a member leaves the circle on reaching it.
    'fill: while !below_min.is_empty() {
        let mut still_below = 0;
        for i in 0..below_min.len() {
            let m = below_min[i];
            let Some(slot) = partitions.next() else {
                break 'fill;
            };
            flat.owners[slot as usize] = m;
            count[m as usize] += 1;
            if count[m as usize] == min_quota {
                at_min.push_back(m);
            } else {
                below_min[still_below] = m;
                still_below += 1;
            }
        }
        below_min.truncate(still_below);
    }
    // Whatever is left fills the extra slots, one partition per candidate.
    for slot in partitions {
        let m = at_min.pop_front().ok_or_else(|| {
            AssignError::new("sticky: partitions left over after every quota was filled")
        })?;
        flat.owners[slot as usize] = m;
    }
    Ok(())
}
