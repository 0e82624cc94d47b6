//! # coordinator-core
//!
//! The consumer-group coordinator of the consumer-groups chapter: group membership with
//! session leases, generation numbers that fence stale workers, a pluggable partition
//! assignment, and commits that reach the offset store only from the current owner.
//!
//! ## Where it sits
//!
//! This is the inner layer of a hexagonal design. It contains no networking, file-system or
//! timer code, spawns nothing, and the coordinator never reads the operating system's clock
//! itself: time comes from the [`Clock`] port (the crate ships two small clocks, the
//! [`ManualClock`] for tests and the [`MonotonicClock`] adapter over `std::time::Instant`, the
//! builder's default), persistence from the [`OffsetStore`] port, partition ownership from the [`Assignor`]
//! port and topic sizes from the [`TopicMetadata`] port. The [`RecordSource`] port (and the
//! [`Record`] vocabulary) is how consumers read partition logs; the core itself never reads
//! records, it only names the contract that logs and their readers share. Adapters live in other crates and
//! depend on this one, never the reverse:
//!
//! ```text
//!   labs (binaries, cluster facade) ──► consumer ──► coordinator-core ◄── assignor
//!            broker ─────────────────────────────────────▲────────── offset-store
//!                                                         └────────── partition-log
//! ```
//!
//! ## Rules (SPEC.md)
//!
//! - `join` creates the group if needed, inserts or replaces the member, sets its deadline to
//!   `now + session_timeout`, and rebalances. Every rebalance increments the generation by
//!   one, starting from 0; a group with no members becomes `Empty`.
//! - `heartbeat` extends a lease and nothing else; `expire_members` removes members whose
//!   `now > deadline` (strictly) and rebalances each affected group once; `leave` is idempotent.
//! - `commit` checks group, `Stable` state, generation, membership and ownership, in that
//!   order, before the store is written. A rejected call changes nothing.
//!
//! ## Concurrency
//!
//! [`Coordinator`] is `Send + Sync`. Groups live in a map guarded by a short-lived
//! `std::sync::RwLock` (never held across an `.await`); each group has its own
//! `tokio::sync::RwLock`. Commits and heartbeats take the group's lock shared; joins, leaves
//! and expiries take it exclusively. A commit holds its shared guard **across the store
//! write**, so a rebalance of that group cannot complete while a commit checked against the
//! old generation is still on its way to the store. The price is that a slow store delays
//! the rebalances of the group being committed to; commits to different groups, and
//! commits of one group by different members, run in parallel. (The alternative — release
//! the lock and let the store compare a fencing token — would push the generation into every
//! store, which the port deliberately keeps ignorant of groups' membership.)
//!
//! ## Example
//!
//! Any type can be an adapter. Here a two-line assignor gives every partition to the first
//! member, and a small map stands in for the store (the `assignor` and `offset-store` crates
//! have the real ones).
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//! use coordinator_core::*;
//!
//! struct FirstMember;
//! impl Assignor for FirstMember {
//!     fn name(&self) -> &str { "first-member" }
//!     fn assign(&self, input: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
//!         let mut out = Assignment::new(input);
//!         for t in 0..input.topics().len() as TopicIndex {
//!             out.topic_owners_mut(t).fill(0); // member 0 subscribes to every topic here
//!         }
//!         Ok(out)
//!     }
//! }
//! # #[derive(Default)]
//! # struct Store(std::sync::Mutex<BTreeMap<String, OffsetMap>>);
//! # #[async_trait::async_trait]
//! # impl OffsetStore for Store {
//! #     async fn committed(&self, g: &str, tp: &TopicPartition) -> Result<Option<i64>, StorageError> {
//! #         Ok(self.0.lock().unwrap().get(g).and_then(|m| m.get(tp)).copied())
//! #     }
//! #     async fn list(&self, g: &str) -> Result<OffsetMap, StorageError> {
//! #         Ok(self.0.lock().unwrap().get(g).cloned().unwrap_or_default())
//! #     }
//! #     async fn groups(&self) -> Result<Vec<String>, StorageError> {
//! #         Ok(self.0.lock().unwrap().keys().cloned().collect())
//! #     }
//! #     async fn commit(&self, g: &str, o: &OffsetMap, _f: CommitFence) -> Result<(), StorageError> {
//! #         validate_offsets(g, o)?; // all work happens while polled: the fence may go after
//! #         self.0.lock().unwrap().entry(g.to_string()).or_default().extend(o.clone());
//! #         Ok(())
//! #     }
//! #     async fn delete<'a>(&self, g: &str, p: Option<&'a [TopicPartition]>, _f: CommitFence) -> Result<(), StorageError> {
//! #         let mut all = self.0.lock().unwrap();
//! #         match p {
//! #             None => { all.remove(g); }
//! #             Some(p) => if let Some(m) = all.get_mut(g) { for tp in p { m.remove(tp); } },
//! #         }
//! #         Ok(())
//! #     }
//! # }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let topics: BTreeMap<String, u32> = [("orders".to_string(), 2)].into();
//! let clock = ManualClock::new();
//! let coordinator = Coordinator::builder(
//!     Arc::new(Store::default()),
//!     Arc::new(topics),
//!     Arc::new(FirstMember),
//! )
//! .clock(Arc::new(clock.clone()))
//! .session_timeout_ms(100)
//! .build()?;
//!
//! let joined = coordinator.join("workers", "member-1", &["orders"]).await?;
//! assert_eq!(joined.generation, Generation::new(1));
//! assert_eq!(joined.partitions.len(), 2);
//!
//! // The owner commits under the current generation: the store is written.
//! let offsets: OffsetMap = [(TopicPartition::new("orders", 0), 42)].into();
//! coordinator.commit("workers", "member-1", joined.generation, &offsets).await?;
//!
//! // A second member joins: generation 2. The old token is fenced from now on.
//! coordinator.join("workers", "member-2", &["orders"]).await?;
//! let stale = coordinator.commit("workers", "member-1", joined.generation, &offsets).await;
//! assert_eq!(stale.unwrap_err().code(), "ILLEGAL_GENERATION");
//!
//! // Leases: at exactly the deadline nobody expires; one millisecond later both do.
//! clock.advance(100);
//! assert!(coordinator.expire_members().await.is_empty());
//! clock.advance(1);
//! assert_eq!(coordinator.expire_members().await.len(), 2);
//! assert_eq!(coordinator.state("workers").await?, GroupState::Empty);
//! # Ok::<(), Error>(())
//! # }).unwrap();
//! ```

#![forbid(unsafe_code)]

mod assign;
mod classic;
mod clock;
mod coordinator;
mod error;
mod log;
mod metadata;
mod offset_store;
#[cfg(feature = "testing")]
pub mod testing;
mod types;

pub use assign::{
    AssignError, Assignment, AssignmentInput, AssignmentRequest, AssignmentRequestBuilder,
    Assignor, MemberIndex, PartitionRef, TopicIndex, TopicSpec, MAX_PARTITIONS_PER_TOPIC,
    MAX_TOTAL_PARTITIONS,
};
pub use classic::{
    ClassicGroupDescription, ClassicMemberDescription, ClassicProtocol, GroupKind,
    JoinGroupRequest, JoinGroupResponse, JoinedMember, LeavingMember, ListedGroup, MemberIdSource,
    OffsetCommitRequest, Opaque, RandomMemberIds, SequentialMemberIds, SyncAssignment,
    SyncGroupRequest, SyncGroupResponse,
};
pub use clock::{Clock, ClockWentBackwards, ManualClock, MonotonicClock};
pub use coordinator::{
    Coordinator, CoordinatorBuilder, CoordinatorConfig, ExpiredMember, GroupDescription,
    GroupSettings, MemberAssignment, MemberDescription, DEFAULT_EMPTY_GROUP_GRACE_MS,
    DEFAULT_GROUP_INITIAL_REBALANCE_DELAY_MS, DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS,
    DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS, DEFAULT_OFFSETS_RETENTION_MS, DEFAULT_SESSION_TIMEOUT_MS,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
};
pub use error::{Error, ErrorClass, StorageError, StorageErrorKind};
pub use log::{
    validate_topic_name, Bytes, Header, LogError, NewRecord, OutOfRange, Record, RecordSource,
    MAX_TOPIC_NAME_LEN,
};
pub use metadata::TopicMetadata;
pub use offset_store::{validate_offsets, CommitFence, OffsetStore};
pub use types::{Generation, GroupState, OffsetMap, TopicPartition};

/// mockall mocks of the ports, for tests in this and other crates (feature `mocks`).
#[cfg(any(test, feature = "mocks"))]
pub mod mocks {
    pub use crate::assign::MockAssignor;
    pub use crate::clock::MockClock;
    pub use crate::metadata::MockTopicMetadata;
    pub use crate::offset_store::MockOffsetStore;
}
