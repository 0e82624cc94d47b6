//! # consumer
//!
//! The consumer client of the consumer-groups chapter. It is where the chapter's lessons
//! become visible: a local fetch **position** that is not committed progress, a local
//! **assignment** that goes stale until refreshed, and **commits** that the coordinator
//! fences by generation.
//!
//! ## Where it sits
//!
//! ```text
//!   labs (cluster facade, binaries) ──► consumer ──► coordinator-core ◄── assignor, offset-store
//!                                          │
//!                                          └── RecordSource port (core) ◄── partition-log's
//!                                                   MemoryLog, or a network/file log
//! ```
//!
//! The consumer talks to the group through an `Arc<`[`Coordinator`](coordinator_core::Coordinator)`>`
//! and reads records through the [`RecordSource`] port, so a network or file-backed log can
//! replace the in-memory `partition_log::MemoryLog` without touching the consumer. It depends on no
//! adapter crate: which assignor and offset store the coordinator uses is the composition
//! root's business (the `labs` crate's cluster facade).
//!
//! ## Rules (docs/rules.md#consumer)
//!
//! - [`Consumer::subscribe`] joins the group and stores the generation and assignment;
//!   [`Consumer::assign`] picks partitions by hand. The two exclude each other.
//! - The local assignment changes only through `subscribe`, `refresh_assignment` or `assign`
//!   (no push, no revoke barrier); positions of partitions no longer owned are dropped.
//! - [`Consumer::poll`] starts a partition at its committed offset, else per
//!   [`AutoOffsetReset`]; an out-of-range position is reset per policy and fetched once more
//!   (`error` propagates `OFFSET_OUT_OF_RANGE`). Successive polls rotate over partitions so
//!   none starves.
//! - [`Consumer::commit`] publishes every position: through the coordinator under the stored
//!   generation when subscribed, straight to the store (unfenced) when assigned by hand.
//!
//! ## Example
//!
//! A stale consumer is fenced until it refreshes. (A hidden line builds the coordinator over
//! the in-memory offset store and the round-robin assignor; in applications the `labs`
//! crate's cluster facade does that wiring.)
//!
//! ```
//! use std::sync::Arc;
//! use consumer::{AutoOffsetReset, Consumer, ConsumerConfig};
//! use partition_log::MemoryLog;
//! use coordinator_core::{Coordinator, TopicPartition};
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let log = Arc::new(MemoryLog::new());
//! log.create_topic("orders", 2)?;
//! for i in 0..3 {
//!     log.append(&TopicPartition::new("orders", 0), format!("order {i}"))?;
//! }
//! # let coordinator = Arc::new(
//! #     Coordinator::builder(
//! #         Arc::new(offset_store::MemoryStore::new()),
//! #         log.clone(),
//! #         Arc::new(assignor::MiniKafkaRoundRobinAssignor),
//! #     )
//! #     .build()?,
//! # );
//! let config = |member: &str| {
//!     ConsumerConfig::new("workers", member).auto_offset_reset(AutoOffsetReset::Earliest)
//! };
//! let mut first = Consumer::new(config("member-1"), coordinator.clone(), log.clone())?;
//! first.subscribe(&["orders"]).await?;
//! assert_eq!(first.poll(10).await?.len(), 3);
//! assert_eq!(first.position(&TopicPartition::new("orders", 0))?, 3);
//!
//! // A second member joins: a new generation. `first` still believes it owns both partitions.
//! let mut second = Consumer::new(config("member-2"), coordinator.clone(), log.clone())?;
//! second.subscribe(&["orders"]).await?;
//! assert_eq!(first.assignment().len(), 2);
//! let stale = first.commit().await.unwrap_err();
//! assert_eq!(stale.code(), "ILLEGAL_GENERATION");
//!
//! // After a refresh it owns orders-0 only, and its commit lands.
//! first.refresh_assignment().await?;
//! assert_eq!(first.assignment(), [TopicPartition::new("orders", 0)]);
//! first.commit().await?;
//! assert_eq!(second.committed(&TopicPartition::new("orders", 0)).await?, Some(3));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

#![forbid(unsafe_code)]

mod consumer;
mod error;
mod reset;

pub use consumer::{Consumer, ConsumerConfig};
pub use error::ConsumerError;
pub use reset::AutoOffsetReset;
// The record vocabulary and the port moved to the core (so the broker can share the log
// without depending on this client); re-exported so this crate's API stays the same.
pub use coordinator_core::log::{
    validate_topic_name, Bytes, Header, LogError, NewRecord, OutOfRange, Record, RecordSource,
    MAX_TOPIC_NAME_LEN,
};

#[cfg(test)]
mod test_support;
