//! Kafka's `roundrobin` strategy.

use coordinator_core::{
    AssignError, Assignment, AssignmentInput, Assignor, MemberIndex, TopicIndex,
};

use crate::common::{check_size, fill_cyclic, Subscribers};
use crate::names::ROUNDROBIN;

/// Kafka's `RoundRobinAssignor`, `"roundrobin"`: one circle of members for all partitions.
///
/// All subscribed partitions are sorted by topic, then partition. The members, sorted by
/// id, stand in a circle, and a pointer into the circle carries over from one partition to
/// the next (and from one topic to the next). Each partition goes to the next member, from
/// the pointer on, that subscribes to its topic; the pointer then moves past that member.
///
/// With identical subscriptions every member ends with ⌊P/C⌋ or ⌈P/C⌉ partitions. With
/// mixed subscriptions the result can be unbalanced — Kafka's own documented example:
///
/// ```
/// use assignor::RoundRobinAssignor;
/// use coordinator_core::{AssignmentRequest, Assignor};
///
/// let request = AssignmentRequest::builder()
///     .topic("t0", 1)
///     .topic("t1", 2)
///     .topic("t2", 3)
///     .member("C0", ["t0"])
///     .member("C1", ["t0", "t1"])
///     .member("C2", ["t0", "t1", "t2"])
///     .build()?;
/// let input = request.input();
/// let map = RoundRobinAssignor.assign(&input)?.to_map(&input);
/// // t0-0 → C0; t1-0 → C1; t1-1 → C2; t2-* → C0 and C1 are skipped, C2 takes all three.
/// assert_eq!(format!("{:?}", map["C0"]), "[t0-0]");
/// assert_eq!(format!("{:?}", map["C1"]), "[t1-0]");
/// assert_eq!(format!("{:?}", map["C2"]), "[t1-1, t2-0, t2-1, t2-2]");
/// # Ok::<(), coordinator_core::AssignError>(())
/// ```
///
/// The seed's [`MiniKafkaRoundRobinAssignor`](crate::MiniKafkaRoundRobinAssignor) gives
/// `t1-1` to C1 and `t1-0` to C2 here: its cursor counts partitions, not members.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoundRobinAssignor;

impl Assignor for RoundRobinAssignor {
    fn name(&self) -> &str {
        ROUNDROBIN
    }

    fn assign(&self, input: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
        check_size(input)?;
        let mut out = Assignment::new(input);
        let subscribers = Subscribers::new(input);
        let members = input.member_count();
        // The circle's pointer: the member the next partition is offered to first.
        let mut next: MemberIndex = 0;
        for t in 0..input.topics().len() as TopicIndex {
            let eligible = subscribers.of(t);
            let owners = out.topic_owners_mut(t);
            if eligible.is_empty() || owners.is_empty() {
                continue;
            }
            // Within one topic the circle visits exactly `eligible` in order, so only the
            // starting member needs a search: the first subscriber at or after the pointer.
            let first = eligible.partition_point(|&m| m < next) % eligible.len();
            fill_cyclic(owners, eligible, first);
            let last = eligible[(first + owners.len() - 1) % eligible.len()];
            next = if last as usize + 1 == members {
                0
            } else {
                last + 1
            };
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{assign_names, request};

    #[test]
    fn kafka_example_identical_subscriptions() {
        // RoundRobinAssignor's javadoc: C0, C1 on t0, t1 with 3 partitions each.
        let r = request(
            &[("t0", 3), ("t1", 3)],
            &[("C0", &["t0", "t1"]), ("C1", &["t0", "t1"])],
        );
        let got = assign_names(&RoundRobinAssignor, &r);
        assert_eq!(got["C0"], ["t0-0", "t0-2", "t1-1"]);
        assert_eq!(got["C1"], ["t0-1", "t1-0", "t1-2"]);
    }

    #[test]
    fn kafka_example_mixed_subscriptions_ends_unbalanced() {
        let r = request(
            &[("t0", 1), ("t1", 2), ("t2", 3)],
            &[
                ("C0", &["t0"]),
                ("C1", &["t0", "t1"]),
                ("C2", &["t0", "t1", "t2"]),
            ],
        );
        let got = assign_names(&RoundRobinAssignor, &r);
        assert_eq!(got["C0"], ["t0-0"]);
        assert_eq!(got["C1"], ["t1-0"]);
        assert_eq!(got["C2"], ["t1-1", "t2-0", "t2-1", "t2-2"]);
    }

    #[test]
    fn the_pointer_skips_members_not_subscribed_and_wraps() {
        // a: t0 only; b, c: t0, t1. t0-0 → a, t0-1 → b, t1-0 → c, t1-1 → (a skipped) b.
        let r = request(
            &[("t0", 2), ("t1", 2)],
            &[("a", &["t0"]), ("b", &["t0", "t1"]), ("c", &["t0", "t1"])],
        );
        let got = assign_names(&RoundRobinAssignor, &r);
        assert_eq!(got["a"], ["t0-0"]);
        assert_eq!(got["b"], ["t0-1", "t1-1"]);
        assert_eq!(got["c"], ["t1-0"]);
    }

    #[test]
    fn empty_topics_do_not_move_the_pointer() {
        let r = request(
            &[("a", 1), ("b", 0), ("c", 1)],
            &[("x", &["a", "b", "c"]), ("y", &["a", "b", "c"])],
        );
        let got = assign_names(&RoundRobinAssignor, &r);
        assert_eq!(got["x"], ["a-0"]);
        assert_eq!(got["y"], ["c-0"]);
    }
}
