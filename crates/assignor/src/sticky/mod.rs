//! Kafka's `sticky` strategy (and the engine `cooperative-sticky` shares).

mod constrained;
mod cooperative;
mod general;

pub use cooperative::CooperativeStickyAssignor;

use coordinator_core::{AssignError, Assignment, AssignmentInput, Assignor};

use crate::common::{check_size, Flat, Subscribers};
use crate::names::STICKY;

/// Kafka's `StickyAssignor`, `"sticky"`: balanced first, then as little movement as possible.
///
/// The input's `owned` partitions (each member's assignment in the previous generation) are
/// what the strategy sticks to. The rule has two parts, in this order of priority:
///
/// 1. **Balance.** When all members subscribe to the same topics, every member ends with
///    ⌊P/C⌋ or ⌈P/C⌉ of the P partitions. With mixed subscriptions the result is balanced
///    as far as subscriptions allow, in Kafka's sense: no partition could move to another
///    subscriber of its topic with two or more fewer partitions than its owner.
/// 2. **Stickiness.** Within that, members keep their previous partitions: with identical
///    subscriptions each member keeps all it owned up to its quota, and a member holding
///    more than its share gives up only the excess (the lowest partition numbers stay).
///
/// Kafka runs two algorithms and so does this type: a quota-based one when subscriptions
/// are identical (O(P + C): 2,000 members × 1,000,000 partitions take milliseconds), and
/// Kafka's general keep / least-loaded / rebalance-passes algorithm otherwise.
///
/// Worked example (Kafka's own): C0, C1 and C2 subscribe to t0…t3, two partitions each.
/// From nothing, the deal is round-robin-like; when C1 leaves, only C1's three partitions
/// move, where a fresh round-robin would have moved five.
///
/// ```
/// use assignor::StickyAssignor;
/// use coordinator_core::{AssignmentRequest, Assignor};
///
/// let topics = ["t0", "t1", "t2", "t3"];
/// let mut builder = AssignmentRequest::builder();
/// for t in topics { builder = builder.topic(t, 2); }
/// let first = builder.clone()
///     .member("C0", topics).member("C1", topics).member("C2", topics)
///     .build()?;
/// let input = first.input();
/// let map = StickyAssignor.assign(&input)?.to_map(&input);
/// assert_eq!(format!("{:?}", map["C0"]), "[t0-0, t1-1, t3-0]");
/// assert_eq!(format!("{:?}", map["C1"]), "[t0-1, t2-0, t3-1]");
/// assert_eq!(format!("{:?}", map["C2"]), "[t1-0, t2-1]");
///
/// // C1 leaves; C0 and C2 report what they owned.
/// let mut second = builder.member("C0", topics).member("C2", topics);
/// for (member, partitions) in [("C0", &map["C0"]), ("C2", &map["C2"])] {
///     for tp in partitions {
///         second = second.owned(member, tp.topic(), tp.partition());
///     }
/// }
/// let second = second.build()?;
/// let input = second.input();
/// let map = StickyAssignor.assign(&input)?.to_map(&input);
/// assert_eq!(format!("{:?}", map["C0"]), "[t0-0, t0-1, t1-1, t3-0]"); // kept 3, +t0-1
/// assert_eq!(format!("{:?}", map["C2"]), "[t1-0, t2-0, t2-1, t3-1]"); // kept 2, +t2-0, t3-1
/// # Ok::<(), coordinator_core::AssignError>(())
/// ```
///
/// Where Kafka's result depends on the iteration order of a `HashMap` (which members get the
/// ⌈P/C⌉ slots when more members already hold that many than there are slots), members are
/// taken in id order here. Kafka's javadoc, written for its original (KIP-54) algorithm,
/// shows `C0: [t0p0, t1p1, t3p0, t2p0]` for the second step; its current constrained
/// algorithm, like this type, gives the equally balanced and equally sticky result above.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StickyAssignor;

impl Assignor for StickyAssignor {
    fn name(&self) -> &str {
        STICKY
    }

    fn assign(&self, input: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
        sticky_assignment(input)
    }
}

/// The sticky assignment of `input`, choosing Kafka's algorithm by subscriptions.
fn sticky_assignment(input: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
    check_size(input)?;
    let mut flat = Flat::new(input);
    let members = input.member_count();
    if members > 0 {
        let first = input.subscriptions(0);
        if (1..members as u32).all(|m| input.subscriptions(m) == first) {
            constrained::assign(input, first, &mut flat)?;
        } else {
            general::assign(input, &Subscribers::new(input), &mut flat)?;
        }
    }
    Ok(flat.into_assignment(input))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{assign_names, request, request_owned};

    const T: &[&str] = &["t"];

    #[test]
    fn from_nothing_one_topic_deals_round_robin() {
        let r = request(&[("t", 5)], &[("a", T), ("b", T)]);
        let got = assign_names(&StickyAssignor, &r);
        assert_eq!(got["a"], ["t-0", "t-2", "t-4"]);
        assert_eq!(got["b"], ["t-1", "t-3"]);
    }

    #[test]
    fn a_joining_member_takes_only_the_excess() {
        // a: 0,1,2  b: 3,4,5 — c joins; quota 2 each: a and b each give up one partition.
        let owned = [
            ("a", "t", 0),
            ("a", "t", 1),
            ("a", "t", 2),
            ("b", "t", 3),
            ("b", "t", 4),
            ("b", "t", 5),
        ];
        let r = request_owned(&[("t", 6)], &[("a", T), ("b", T), ("c", T)], &owned);
        let got = assign_names(&StickyAssignor, &r);
        assert_eq!(got["a"], ["t-0", "t-1"]);
        assert_eq!(got["b"], ["t-3", "t-4"]);
        assert_eq!(got["c"], ["t-2", "t-5"]);
    }

    #[test]
    fn extra_slots_go_to_members_holding_them_in_id_order() {
        // 7 partitions, 3 members: one member may keep 3. Both a and b hold 3; a keeps 3.
        let owned = [
            ("b", "t", 0),
            ("b", "t", 1),
            ("b", "t", 2),
            ("a", "t", 3),
            ("a", "t", 4),
            ("a", "t", 5),
        ];
        let r = request_owned(&[("t", 7)], &[("a", T), ("b", T), ("c", T)], &owned);
        let got = assign_names(&StickyAssignor, &r);
        assert_eq!(got["a"], ["t-3", "t-4", "t-5"]);
        assert_eq!(got["b"], ["t-0", "t-1"]);
        assert_eq!(got["c"], ["t-2", "t-6"]);
    }

    #[test]
    fn a_member_over_quota_keeps_its_lowest_partition_numbers_across_topics() {
        let both: &[&str] = &["x", "y"];
        let owned = [("a", "x", 1), ("a", "x", 2), ("a", "y", 0), ("a", "y", 3)];
        let r = request_owned(&[("x", 3), ("y", 5)], &[("a", both), ("b", both)], &owned);
        let got = assign_names(&StickyAssignor, &r);
        // quota 4: a keeps all four it owned.
        assert_eq!(got["a"], ["x-1", "x-2", "y-0", "y-3"]);
        let r = request_owned(
            &[("x", 3), ("y", 5)],
            &[("a", both), ("b", both), ("c", both)],
            &owned,
        );
        let got = assign_names(&StickyAssignor, &r);
        // 8 over 3: quotas 3, 3, 2; a keeps 3 — the lowest partition numbers: y-0, x-1, x-2.
        assert_eq!(got["a"], ["x-1", "x-2", "y-0"]);
        assert_eq!(got["b"].len() + got["c"].len(), 5);
    }

    #[test]
    fn more_members_than_partitions() {
        let owned = [("c", "t", 0)];
        let r = request_owned(&[("t", 2)], &[("a", T), ("b", T), ("c", T)], &owned);
        let got = assign_names(&StickyAssignor, &r);
        assert_eq!(got["c"], ["t-0"]);
        assert_eq!(got["a"], ["t-1"]);
        assert!(got["b"].is_empty());
    }

    #[test]
    fn kafka_mixed_example_from_nothing_and_after_c0_leaves() {
        // StickyAssignor's javadoc, second example.
        let topics = [("t0", 1), ("t1", 2), ("t2", 3)];
        let c1: &[&str] = &["t0", "t1"];
        let c2: &[&str] = &["t0", "t1", "t2"];
        let r = request(&topics, &[("C0", &["t0"]), ("C1", c1), ("C2", c2)]);
        let got = assign_names(&StickyAssignor, &r);
        assert_eq!(got["C0"], ["t0-0"]);
        assert_eq!(got["C1"], ["t1-0", "t1-1"]);
        assert_eq!(got["C2"], ["t2-0", "t2-1", "t2-2"]);

        let owned = [
            ("C1", "t1", 0),
            ("C1", "t1", 1),
            ("C2", "t2", 0),
            ("C2", "t2", 1),
            ("C2", "t2", 2),
        ];
        let r = request_owned(&topics, &[("C1", c1), ("C2", c2)], &owned);
        let got = assign_names(&StickyAssignor, &r);
        assert_eq!(got["C1"], ["t0-0", "t1-0", "t1-1"]);
        assert_eq!(got["C2"], ["t2-0", "t2-1", "t2-2"]);
    }

    #[test]
    fn mixed_subscriptions_rebalance_towards_a_new_member() {
        let ab: &[&str] = &["t0", "t1"];
        let owned = [
            ("a", "t0", 0),
            ("a", "t0", 1),
            ("a", "t1", 0),
            ("b", "t1", 1),
            ("b", "t1", 2),
            ("b", "t1", 3),
        ];
        let r = request_owned(
            &[("t0", 2), ("t1", 4)],
            &[("a", ab), ("b", ab), ("c", &["t1"])],
            &owned,
        );
        let got = assign_names(&StickyAssignor, &r);
        assert_eq!(got["a"], ["t0-0", "t0-1"]);
        assert_eq!(got["b"], ["t1-2", "t1-3"]);
        assert_eq!(got["c"], ["t1-0", "t1-1"]);
    }

    #[test]
    fn a_topic_with_one_subscriber_stays_with_it() {
        let r = request(
            &[("t0", 3), ("t1", 1)],
            &[("a", &["t0", "t1"]), ("b", &["t1"])],
        );
        let got = assign_names(&StickyAssignor, &r);
        assert_eq!(got["a"], ["t0-0", "t0-1", "t0-2"]);
        assert_eq!(got["b"], ["t1-0"]);
    }

    #[test]
    fn a_dropped_topic_is_reassigned_and_the_rest_rebalanced() {
        let owned = [
            ("a", "t0", 0),
            ("a", "t0", 1),
            ("b", "t1", 0),
            ("b", "t1", 1),
        ];
        let r = request_owned(
            &[("t0", 2), ("t1", 2)],
            &[("a", &["t1"]), ("b", &["t0", "t1"])],
            &owned,
        );
        let got = assign_names(&StickyAssignor, &r);
        assert_eq!(got["a"], ["t1-0", "t1-1"]);
        assert_eq!(got["b"], ["t0-0", "t0-1"]);
    }

    #[test]
    fn partitions_of_topics_nobody_subscribes_are_dropped() {
        let owned = [("a", "old", 0), ("a", "t", 0)];
        let r = request_owned(&[("old", 1), ("t", 2)], &[("a", T), ("b", T)], &owned);
        let got = assign_names(&StickyAssignor, &r);
        assert_eq!(got["a"], ["t-0"]);
        assert_eq!(got["b"], ["t-1"]);
        let mixed = request_owned(
            &[("old", 1), ("t", 2), ("u", 1)],
            &[("a", T), ("b", &["t", "u"])],
            &owned,
        );
        let got = assign_names(&StickyAssignor, &mixed);
        // u (one subscriber) is dealt first: u-0 → b; then t-1 → a on the id tie-break.
        assert_eq!(got["a"], ["t-0", "t-1"]);
        assert_eq!(got["b"], ["u-0"]);
    }

    #[test]
    fn cooperative_withholds_only_partitions_changing_owner() {
        let owned = [("a", "t", 0), ("a", "t", 1), ("a", "t", 2), ("c", "t", 3)];
        let mut r = request_owned(&[("t", 6)], &[("a", T), ("b", T), ("c", T)], &owned);
        let both = assign_names(&CooperativeStickyAssignor, &r);
        assert_eq!(both["a"], ["t-0", "t-1"]);
        // Quota 2 each. t-2 passes from a to b: withheld. t-4, t-5 were nobody's.
        assert!(!both.values().flatten().any(|tp| tp == "t-2"));
        assert_eq!(both["c"], ["t-3", "t-4"]);
        assert_eq!(both["b"], ["t-5"]);

        // c leaves: its t-3 is nobody's now and goes to b at once.
        r = request_owned(&[("t", 4)], &[("a", T), ("b", T)], &owned[..3]);
        let got = assign_names(&CooperativeStickyAssignor, &r);
        // a keeps 2 of its 3; sticky gives t-2 to b directly — withheld here.
        assert_eq!(got["a"], ["t-0", "t-1"]);
        assert_eq!(got["b"], ["t-3"]);
        let sticky = assign_names(&StickyAssignor, &r);
        assert_eq!(sticky["b"], ["t-2", "t-3"]);
    }

    #[test]
    fn zero_members_assign_nothing() {
        for assignor in [&StickyAssignor as &dyn Assignor, &CooperativeStickyAssignor] {
            let got = assign_names(assignor, &request(&[("t", 3)], &[]));
            assert!(got.is_empty());
        }
    }
}
