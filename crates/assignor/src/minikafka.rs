//! The chapter's round-robin: one cursor shared across topics.

use coordinator_core::{AssignError, Assignment, AssignmentInput, Assignor, TopicIndex};

use crate::common::{check_size, fill_cyclic, Subscribers};
use crate::names::MINIKAFKA_ROUNDROBIN;

/// The seed's round-robin assignor, `"minikafka-roundrobin"`: the default strategy.
///
/// Members, topics and partitions are taken in sorted order. **One cursor**, starting at 0,
/// is shared by all topics (it is not reset per topic). For each topic, the eligible members
/// are the sorted members subscribed to it; a topic nobody subscribes to is skipped; each
/// partition in order goes to `eligible[cursor % eligible.len()]`, then `cursor += 1`.
///
/// Unlike Kafka's `roundrobin` ([`RoundRobinAssignor`](crate::RoundRobinAssignor)), the
/// cursor counts partitions, not members: when subscriptions differ, the same input can
/// give a different result.
///
/// ```
/// use assignor::MiniKafkaRoundRobinAssignor;
/// use coordinator_core::{AssignmentRequest, Assignor};
///
/// // The chapter's second example: "all" {orders, payments}, "orders-only" {orders}.
/// let request = AssignmentRequest::builder()
///     .topic("orders", 2)
///     .topic("payments", 1)
///     .member("orders-only", ["orders"])
///     .member("all", ["orders", "payments"])
///     .build()?;
/// let input = request.input();
/// let map = MiniKafkaRoundRobinAssignor.assign(&input)?.to_map(&input);
/// // orders: eligible [all, orders-only], cursor 0 → all, 1 → orders-only;
/// // payments: eligible [all], cursor 2 → all.
/// assert_eq!(format!("{:?}", map["all"]), "[orders-0, payments-0]");
/// assert_eq!(format!("{:?}", map["orders-only"]), "[orders-1]");
/// # Ok::<(), coordinator_core::AssignError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MiniKafkaRoundRobinAssignor;

impl Assignor for MiniKafkaRoundRobinAssignor {
    fn name(&self) -> &str {
        MINIKAFKA_ROUNDROBIN
    }

    fn assign(&self, input: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
        check_size(input)?;
        let mut out = Assignment::new(input);
        let subscribers = Subscribers::new(input);
        let mut cursor = 0usize;
        for t in 0..input.topics().len() as TopicIndex {
            let eligible = subscribers.of(t);
            if eligible.is_empty() {
                continue;
            }
            let owners = out.topic_owners_mut(t);
            fill_cyclic(owners, eligible, cursor % eligible.len());
            cursor = cursor.wrapping_add(owners.len());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{assign_names, request};

    #[test]
    fn chapter_example_two_members_four_partitions() {
        let r = request(&[("orders", 4)], &[("a", &["orders"]), ("b", &["orders"])]);
        let got = assign_names(&MiniKafkaRoundRobinAssignor, &r);
        assert_eq!(got["a"], ["orders-0", "orders-2"]);
        assert_eq!(got["b"], ["orders-1", "orders-3"]);
    }

    #[test]
    fn chapter_example_mixed_subscriptions() {
        let r = request(
            &[("orders", 2), ("payments", 1)],
            &[
                ("all", &["orders", "payments"]),
                ("orders-only", &["orders"]),
            ],
        );
        let got = assign_names(&MiniKafkaRoundRobinAssignor, &r);
        assert_eq!(got["all"], ["orders-0", "payments-0"]);
        assert_eq!(got["orders-only"], ["orders-1"]);
    }

    #[test]
    fn the_cursor_carries_over_between_topics() {
        // Three members, topics of 2 partitions: a per-topic reset would give a, b twice.
        let r = request(
            &[("t1", 2), ("t2", 2)],
            &[
                ("a", &["t1", "t2"]),
                ("b", &["t1", "t2"]),
                ("c", &["t1", "t2"]),
            ],
        );
        let got = assign_names(&MiniKafkaRoundRobinAssignor, &r);
        assert_eq!(got["a"], ["t1-0", "t2-1"]);
        assert_eq!(got["b"], ["t1-1"]);
        assert_eq!(got["c"], ["t2-0"]);
    }

    #[test]
    fn kafka_mixed_example_differs_from_kafka_roundrobin() {
        // Kafka's RoundRobinAssignor gives C1 t1-0 here; the shared cursor gives it t1-1.
        let r = request(
            &[("t0", 1), ("t1", 2), ("t2", 3)],
            &[
                ("C0", &["t0"]),
                ("C1", &["t0", "t1"]),
                ("C2", &["t0", "t1", "t2"]),
            ],
        );
        let got = assign_names(&MiniKafkaRoundRobinAssignor, &r);
        assert_eq!(got["C0"], ["t0-0"]);
        assert_eq!(got["C1"], ["t1-1"]);
        assert_eq!(got["C2"], ["t1-0", "t2-0", "t2-1", "t2-2"]);
    }

    #[test]
    fn members_without_subscriptions_and_unsubscribed_topics_stay_empty() {
        let r = request(
            &[("orders", 3), ("unused", 2)],
            &[("a", &["orders"]), ("idle", &[])],
        );
        let got = assign_names(&MiniKafkaRoundRobinAssignor, &r);
        assert_eq!(got["a"], ["orders-0", "orders-1", "orders-2"]);
        assert!(got["idle"].is_empty());
        let input = r.input();
        let out = MiniKafkaRoundRobinAssignor.assign(&input).expect("assigns");
        assert!(out
            .topic_owners(1)
            .iter()
            .all(|&o| o == Assignment::UNASSIGNED));
    }

    #[test]
    fn zero_members_and_zero_partitions_assign_nothing() {
        let none = request(&[("orders", 4)], &[]);
        let got = assign_names(&MiniKafkaRoundRobinAssignor, &none);
        assert!(got.is_empty());
        let empty = request(&[("orders", 0)], &[("a", &["orders"])]);
        let got = assign_names(&MiniKafkaRoundRobinAssignor, &empty);
        assert!(got["a"].is_empty());
    }
}
