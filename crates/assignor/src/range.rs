//! Kafka's `range` strategy.

use coordinator_core::{AssignError, Assignment, AssignmentInput, Assignor, TopicIndex};

use crate::common::{check_size, Subscribers};
use crate::names::RANGE;

/// Kafka's `RangeAssignor`, `"range"`: contiguous ranges, topic by topic.
///
/// For each topic separately, take its partitions in order and the members subscribed to it
/// in sorted order (C of them, P partitions). Each member gets ⌊P/C⌋ contiguous partitions,
/// and the first P mod C members get one more. Because every topic starts again from the
/// first member, the first members collect the extras of every topic: with many topics of
/// the same size, range is per-topic balanced but not balanced overall. Previously owned
/// partitions are ignored.
///
/// This is Kafka's algorithm without rack awareness (members here carry no rack); members
/// are ordered by member id, as Kafka orders members without a group instance id.
///
/// ```
/// use assignor::RangeAssignor;
/// use coordinator_core::{AssignmentRequest, Assignor};
///
/// // Kafka's documented example: C0, C1 subscribed to t0, t1, each with 3 partitions.
/// let request = AssignmentRequest::builder()
///     .topic("t0", 3)
///     .topic("t1", 3)
///     .member("C0", ["t0", "t1"])
///     .member("C1", ["t0", "t1"])
///     .build()?;
/// let input = request.input();
/// let map = RangeAssignor.assign(&input)?.to_map(&input);
/// // 3 / 2 = 1 each, and C0 gets the 3 mod 2 = 1 extra of both topics.
/// assert_eq!(format!("{:?}", map["C0"]), "[t0-0, t0-1, t1-0, t1-1]");
/// assert_eq!(format!("{:?}", map["C1"]), "[t0-2, t1-2]");
/// # Ok::<(), coordinator_core::AssignError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RangeAssignor;

impl Assignor for RangeAssignor {
    fn name(&self) -> &str {
        RANGE
    }

    fn assign(&self, input: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
        check_size(input)?;
        let mut out = Assignment::new(input);
        let subscribers = Subscribers::new(input);
        for t in 0..input.topics().len() as TopicIndex {
            let eligible = subscribers.of(t);
            if eligible.is_empty() {
                continue;
            }
            let owners = out.topic_owners_mut(t);
            let (each, extra) = (owners.len() / eligible.len(), owners.len() % eligible.len());
            let mut start = 0;
            for (i, &m) in eligible.iter().enumerate() {
                let len = each + usize::from(i < extra);
                owners[start..start + len].fill(m);
                start += len;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{assign_names, request, request_owned};

    #[test]
    fn extras_go_to_the_first_members_of_each_topic() {
        let r = request(&[("t", 7)], &[("c", &["t"]), ("a", &["t"]), ("b", &["t"])]);
        let got = assign_names(&RangeAssignor, &r);
        assert_eq!(got["a"], ["t-0", "t-1", "t-2"]);
        assert_eq!(got["b"], ["t-3", "t-4"]);
        assert_eq!(got["c"], ["t-5", "t-6"]);
    }

    #[test]
    fn each_topic_uses_only_its_own_subscribers() {
        let r = request(
            &[("t0", 2), ("t1", 3)],
            &[("a", &["t0"]), ("b", &["t0", "t1"]), ("c", &["t1"])],
        );
        let got = assign_names(&RangeAssignor, &r);
        assert_eq!(got["a"], ["t0-0"]);
        assert_eq!(got["b"], ["t0-1", "t1-0", "t1-1"]);
        assert_eq!(got["c"], ["t1-2"]);
    }

    #[test]
    fn more_members_than_partitions_leaves_the_last_ones_empty() {
        let r = request(&[("t", 2)], &[("a", &["t"]), ("b", &["t"]), ("c", &["t"])]);
        let got = assign_names(&RangeAssignor, &r);
        assert_eq!(got["a"], ["t-0"]);
        assert_eq!(got["b"], ["t-1"]);
        assert!(got["c"].is_empty());
    }

    #[test]
    fn previous_ownership_does_not_matter() {
        let topics = [("t", 4)];
        let members: [(&str, &[&str]); 2] = [("a", &["t"]), ("b", &["t"])];
        let fresh = assign_names(&RangeAssignor, &request(&topics, &members));
        let owned = request_owned(&topics, &members, &[("b", "t", 0), ("b", "t", 1)]);
        assert_eq!(assign_names(&RangeAssignor, &owned), fresh);
    }
}
