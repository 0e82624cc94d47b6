//! # assignor
//!
//! Partition assignment strategies for the consumer-group coordinator: the chapter's
//! round-robin, which stays the default, and Kafka's four client-side strategies, each an
//! adapter of `coordinator-core`'s [`Assignor`] port.
//!
//! | name                   | type                            | rule in one line |
//! |------------------------|---------------------------------|------------------|
//! | `minikafka-roundrobin` | [`MiniKafkaRoundRobinAssignor`] | the seed's: one partition cursor shared by all topics |
//! | `range`                | [`RangeAssignor`]               | per topic, contiguous ranges to its subscribers |
//! | `roundrobin`           | [`RoundRobinAssignor`]          | one circle of members over all partitions, skipping non-subscribers |
//! | `sticky`               | [`StickyAssignor`]              | balanced, then keep as many previously owned partitions as balance allows |
//! | `cooperative-sticky`   | [`CooperativeStickyAssignor`]   | sticky, but a partition changing owner is withheld for one generation |
//!
//! ## Where it sits
//!
//! An outer-layer adapter. It depends on `coordinator-core` only, for the port and its
//! index-based input ([`AssignmentInput`]: topics and members sorted, subscriptions and
//! previously owned partitions as indices); nothing depends on it except the crates that
//! wire a coordinator together. Every strategy is pure and deterministic: the same input
//! gives the same output, no hash-map order leaks in, and nothing here does I/O.
//!
//! ```text
//!   labs ──► assignor ──► coordinator-core (Assignor port)
//! ```
//!
//! A coordinator is given strategies with `Coordinator::builder(.., default, ..)` and
//! `.assignor(..)`; members then negotiate among them by name. [`all`] lists this crate's
//! strategies with the default first, [`by_name`] finds one, [`names`] spells them.
//!
//! ## Example
//!
//! ```
//! use coordinator_core::{AssignmentRequest, Assignor};
//!
//! // The chapter's example: members a and b on orders-0..3.
//! let request = AssignmentRequest::builder()
//!     .topic("orders", 4)
//!     .member("b", ["orders"])
//!     .member("a", ["orders"])
//!     .build()?;
//! let input = request.input();
//!
//! let seed = assignor::by_name(assignor::names::DEFAULT).expect("the default exists");
//! let map = seed.assign(&input)?.to_map(&input);
//! assert_eq!(format!("{:?}", map["a"]), "[orders-0, orders-2]");
//! assert_eq!(format!("{:?}", map["b"]), "[orders-1, orders-3]");
//!
//! // Kafka's range gives contiguous ranges instead.
//! let range = assignor::by_name("range").expect("Kafka's range exists");
//! let map = range.assign(&input)?.to_map(&input);
//! assert_eq!(format!("{:?}", map["a"]), "[orders-0, orders-1]");
//! # Ok::<(), coordinator_core::AssignError>(())
//! ```

#![forbid(unsafe_code)]

mod common;
mod minikafka;
pub mod names;
mod range;
mod registry;
mod roundrobin;
mod sticky;
#[cfg(test)]
mod testing;

pub use coordinator_core::{Assignment, AssignmentInput, AssignmentRequest, Assignor};
pub use minikafka::MiniKafkaRoundRobinAssignor;
pub use range::RangeAssignor;
pub use registry::{all, by_name, default_assignor};
pub use roundrobin::RoundRobinAssignor;
pub use sticky::{CooperativeStickyAssignor, StickyAssignor};
