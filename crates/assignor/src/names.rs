//! Strategy names, as members list them when they join.
//!
//! Kafka's four are spelled exactly as Kafka's `partition.assignment.strategy` names them
//! (`ConsumerPartitionAssignor::name`), so a Kafka user recognises them; the seed's carries
//! a prefix so it cannot be confused with Kafka's `roundrobin`.

/// The chapter's round-robin ([`MiniKafkaRoundRobinAssignor`](crate::MiniKafkaRoundRobinAssignor)).
pub const MINIKAFKA_ROUNDROBIN: &str = "minikafka-roundrobin";
/// Kafka's `RangeAssignor` ([`RangeAssignor`](crate::RangeAssignor)).
pub const RANGE: &str = "range";
/// Kafka's `RoundRobinAssignor` ([`RoundRobinAssignor`](crate::RoundRobinAssignor)).
pub const ROUNDROBIN: &str = "roundrobin";
/// Kafka's `StickyAssignor` ([`StickyAssignor`](crate::StickyAssignor)).
pub const STICKY: &str = "sticky";
/// Kafka's `CooperativeStickyAssignor`
/// ([`CooperativeStickyAssignor`](crate::CooperativeStickyAssignor)).
pub const COOPERATIVE_STICKY: &str = "cooperative-sticky";

/// The default strategy everywhere: the seed's round-robin.
pub const DEFAULT: &str = MINIKAFKA_ROUNDROBIN;

/// Every name, the default first.
pub const ALL: [&str; 5] = [
    MINIKAFKA_ROUNDROBIN,
    RANGE,
    ROUNDROBIN,
    STICKY,
    COOPERATIVE_STICKY,
];
