//! # coordinator-core
//!
//! A consumer-group coordinator: group membership with session leases, generation numbers
//! that fence stale workers, partition assignment, and commits that reach the offset store
//! only from the current owner. Three kinds of group live side by side:
//!
//! - **The chapter's groups** ([`Coordinator::join`], [`leave`](Coordinator::leave),
//!   [`heartbeat`](Coordinator::heartbeat), [`assignment`](Coordinator::assignment),
//!   [`commit`](Coordinator::commit), …): the coordinator assigns, synchronously, with a
//!   pluggable [`Assignor`], on every membership change. One call joins and returns the
//!   member's partitions. Use them to embed a coordinator whose members are Rust objects.
//! - **Kafka's classic groups** ([`Coordinator::join_group`], [`sync_group`](Coordinator::sync_group),
//!   [`heartbeat_group`](Coordinator::heartbeat_group), [`leave_group`](Coordinator::leave_group),
//!   [`commit_offsets`](Coordinator::commit_offsets), [`describe_group`](Coordinator::describe_group),
//!   [`list_groups`](Coordinator::list_groups), [`delete_offsets`](Coordinator::delete_offsets),
//!   [`delete_group`](Coordinator::delete_group)): the JoinGroup/SyncGroup protocol Kafka's
//!   clients speak, with a leader that assigns, a join barrier, static members and Kafka's
//!   error codes. A JoinGroup's future resolves when the barrier completes, a follower's
//!   SyncGroup when the leader's arrives. Metadata and assignments are opaque bytes; a front
//!   that decodes them may pass the topics and partitions too.
//! - **Kafka's consumer-protocol groups** (KIP-848, [`Coordinator::consumer`]:
//!   [`heartbeat`](ConsumerGroups::heartbeat), [`describe`](ConsumerGroups::describe)): the
//!   coordinator computes a target assignment with a server-side assignor registered by the
//!   name clients give in `group.remote.assignor`
//!   ([`CoordinatorBuilder::consumer_assignor`], [`named`]); each member reconciles toward it
//!   heartbeat by heartbeat (Kafka's `CurrentAssignmentBuilder`: it revokes first, and a
//!   partition reaches its new owner only once its previous owner's heartbeat no longer lists
//!   it), fenced by member epochs (`FENCED_MEMBER_EPOCH`, `STALE_MEMBER_EPOCH` on commits).
//!   The group epoch is the group id's generation counter. Regular-expression subscriptions
//!   are not supported yet.
//!
//! All share the offset store, the commit fencing, the timers, the lifecycle, tracing and
//! one [`Error`] enum whose codes are Kafka's where Kafka has one. A call of one kind on a
//! group of the other is refused with `INCONSISTENT_GROUP_PROTOCOL`, as Kafka refuses a
//! protocol-type mismatch; an Empty group is taken over by whichever kind joins next.
//!
//! ## Where it sits
//!
//! The inner layer of a hexagonal design. It contains no networking, file-system or timer
//! code, spawns nothing, and never reads the operating system's clock: time comes from the
//! [`Clock`] port ([`ManualClock`] for tests, [`MonotonicClock`] over `std::time::Instant`, the
//! builder's default), persistence from [`OffsetStore`], partition ownership from
//! [`Assignor`], topic sizes from [`TopicMetadata`], new classic member ids from
//! [`MemberIdSource`]. The [`log::RecordSource`] port (and the [`log`] vocabulary) is how
//! consumers read partition logs; the core never reads records, it names the contract logs
//! and their readers share. Adapters live in other crates and depend on this one:
//!
//! ```text
//!   labs ──► consumer ──► coordinator-core ◄── assignor, offset-store, partition-log
//!   broker ─────────────────────▲      ▲────── coordinator-driver (runs the timers)
//! ```
//!
//! ## The chapter's rules
//!
//! - `join` creates the group if needed, inserts or replaces the member, sets its deadline to
//!   `now + session_timeout`, and rebalances. Every rebalance increments the generation by
//!   one, starting from 0; a group with no members becomes `Empty`.
//! - `heartbeat` extends a lease and nothing else; expiry removes members whose
//!   `now > deadline` (strictly) and rebalances each affected group once; `leave` is
//!   idempotent, and removing members never fails (if the strategy fails, the chapter's
//!   round-robin assigns and [`GroupDescription::assignment_error`] says so).
//! - `commit` checks group, `Stable` state, generation, membership and ownership, in that
//!   order, before the store is written. A rejected call changes nothing.
//! - Assignments report, per partition, the generation since which the member has owned it
//!   ([`MemberAssignment::owned_since`]), so a consumer keeps a fetch position only across a
//!   continuous ownership.
//! - A cooperative strategy's withheld partitions are handed over by a follow-up rebalance
//!   once every member that lost one has read an assignment without it.
//!
//! ## The classic state machine
//!
//! ```text
//!              first member joins             every member re-joined, none pending,
//!   Empty ───────────────────────► Preparing ── or the rebalance timeout ran out ──► Completing
//!     ▲   (after the initial delay)  Rebalance   (generation + 1, leader, protocol)   Rebalance
//!     │                                ▲   ▲                                            │
//!     │ the barrier completes          │   └── new metadata, the leader joining, ───────┤ the leader's
//!     │ with no member left            │       a leave, a session or sync timeout       │ SyncGroup
//!     └────────────────────────────────┘                                                ▼
//!                                      └────────── the same, from Stable ──────────── Stable
//! ```
//!
//! Kafka's rules as this crate applies them (MEMBER_ID_REQUIRED and pending members, the
//! barrier, the initial rebalance delay and its extension, leader election, the protocol
//! vote, sync and session timeouts, static members, which states accept commits) are
//! documented on each method; `coordinator/classic.rs` follows Apache Kafka 4's
//! `GroupMetadataManager` and `ClassicGroup`, and says where it differs.
//!
//! ## Concurrency
//!
//! [`Coordinator`] is `Send + Sync`. The groups live in a map behind a short-lived
//! `std::sync::RwLock` (never held across an `.await`). Each group has two locks:
//!
//! - a **commit gate**, an async read-write lock that guards only ordering. A commit takes it
//!   shared before its checks and keeps it until its write is visible in the store — the
//!   store holds it as the commit's [`CommitFence`], even if the caller drops the commit
//!   future while a blocking write goes on. Installing a new generation (a chapter
//!   rebalance, a classic join barrier) takes it exclusively. So no commit checked against
//!   generation G lands after G+1 is installed, while commits of one group (and of
//!   different groups) run in parallel;
//! - its **state**, behind a plain mutex that is never held across an `.await`. Heartbeats,
//!   assignment reads and descriptions take only this lock, so they never wait for the
//!   store, however slow its disk.
//!
//! The gate is always taken before the state lock. (The alternative — let the store compare
//! a fencing token — would push generations into every store, which the port deliberately
//! keeps ignorant of membership.)
//!
//! ## Timers
//!
//! Every deadline — sessions, the join barrier's rebalance timeout, the initial rebalance
//! delay, pending members, the sync timeout, the new-member join timeout, a due cooperative
//! follow-up, Empty groups' grace periods and offset retention — lives in one min-heap,
//! armed lazily: a heartbeat touches no heap, and a group whose deadline moved later finds
//! nothing due when its entry fires and re-arms. [`Coordinator::poll_timeout`] says when the
//! core next needs attention; [`Coordinator::handle_timeout`] does everything due at the
//! clock's current time (quinn-proto's `poll_timeout`/`handle_timeout`);
//! [`Coordinator::timeout_changed`] resolves when an earlier deadline was armed. The
//! `coordinator-driver` crate runs this live; tests move a [`ManualClock`] and call
//! `handle_timeout`. A timer run costs the work of the due groups, never a scan of all;
//! it works on the due groups concurrently (one group waiting for its commit gate never
//! delays another) and is cancel-safe.
//!
//! ## Lifecycle
//!
//! An Empty group without offsets is removed after `empty_group_grace_ms`; an Empty group's
//! offsets are deleted `offsets_retention_ms` after it became Empty (a simple group's, one
//! that only ever had plain commits, after its last commit); [`Coordinator::delete_group`]
//! deletes an Empty group and its offsets. A removed group leaves a tombstone with its last
//! generation, so a re-created group continues from there: a stale member of an old
//! incarnation can never present a generation the new one uses.
//!
//! Over a store shared by several coordinators (brokers owning coordinator slots),
//! [`Coordinator::load_where`] loads the groups of the slots gained and
//! [`Coordinator::unload_where`] drops those of the slots lost — state, timers, tombstone —
//! answering their parked requests with `NotCoordinator`;
//! [`TransactionCoordinator::load_where`](txn::TransactionCoordinator::load_where) and
//! [`unload_where`](txn::TransactionCoordinator::unload_where) do the same for
//! transactional ids.
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

mod coordinator;
mod error;
pub mod group;
pub mod log;
pub mod ports;
#[cfg(feature = "testing")]
pub mod testing;
pub mod txn;
mod types;

pub use coordinator::concurrency;
#[allow(deprecated)]
pub use coordinator::GROUP_CONFIG_NAMES;
pub use coordinator::{
    ConsumerGroupSettings, Coordinator, CoordinatorBuilder, CoordinatorConfig, CoordinatorStats,
    ExpiredMember, GroupConfig, GroupConfigError, GroupSettings, MigrationPolicy, Offsets,
    DEFAULT_CONSUMER_HEARTBEAT_INTERVAL_MS, DEFAULT_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS,
    DEFAULT_CONSUMER_MAX_SESSION_TIMEOUT_MS, DEFAULT_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS,
    DEFAULT_CONSUMER_MIN_SESSION_TIMEOUT_MS, DEFAULT_CONSUMER_SESSION_TIMEOUT_MS,
    DEFAULT_EMPTY_GROUP_GRACE_MS, DEFAULT_GROUP_INITIAL_REBALANCE_DELAY_MS,
    DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS, DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS,
    DEFAULT_OFFSETS_RETENTION_MS, DEFAULT_OFFSET_METADATA_MAX_BYTES, DEFAULT_SESSION_TIMEOUT_MS,
    DEFAULT_SHARE_HEARTBEAT_INTERVAL_MS, DEFAULT_SHARE_RECORD_LOCK_DURATION_MS,
    DEFAULT_SHARE_SESSION_TIMEOUT_MS, MAX_GROUP_CONFIGS, NEW_MEMBER_JOIN_TIMEOUT_MS,
};
pub use coordinator::{TxnOffsetCommitRequest, MAX_PENDING_TXN_OFFSETS_PER_PRODUCER};
pub use error::{Error, ErrorClass, ErrorCode, StorageError, StorageErrorKind};
pub use group::chapter::{GroupDescription, MemberAssignment, MemberDescription};
pub use group::classic::{
    ClassicGroupDescription, ClassicGroups, ClassicMemberDescription, ClassicProtocol,
    JoinGroupRequest, JoinGroupResponse, JoinedMember, LeavingMember, OffsetCommitRequest, Opaque,
    SyncAssignment, SyncGroupRequest, SyncGroupResponse,
};
pub use group::consumer::{
    named, ConsumerGroupDescription, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    ConsumerGroupState, ConsumerGroups, ConsumerMemberDescription, MemberState,
    LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
pub use group::share::{
    AcknowledgeType, AcquiredRange, KeptRecordState, ShareAcknowledgeError, ShareAutoOffsetReset,
    ShareGroupDescription, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
    ShareGroupSettings, ShareGroupState, ShareGroups, ShareIsolationLevel, ShareMemberDescription,
    SharePartition, SharePartitionConfig, StateBatch, DEFAULT_SHARE_MAX_SIZE,
    SHARE_LEAVE_GROUP_MEMBER_EPOCH,
};
pub use group::{
    CommitAuthority, ConsumerMemberRecord, GroupKind, GroupRecord, ListedGroup, MemberRecord,
};
// The log vocabulary lives in `log`, where logs live: the coordinator never reads records.
// These root names are kept, hidden, so that code written against 0.1 keeps compiling; new
// code names `coordinator_core::log::…`.
#[doc(hidden)]
pub use log::{
    validate_topic_name, Bytes, Header, LogError, NewRecord, OutOfRange, Record, RecordSource,
    MAX_TOPIC_NAME_LEN,
};
pub use ports::assign::{
    AssignError, Assignment, AssignmentInput, AssignmentRequest, AssignmentRequestBuilder,
    MemberIndex, PartitionRef, TopicIndex, TopicSpec, MAX_PARTITIONS_PER_TOPIC,
    MAX_TOTAL_PARTITIONS,
};
pub use ports::clock::{ClockWentBackwards, ManualClock, MonotonicClock};
pub use ports::member_ids::{RandomMemberIds, SequentialMemberIds};
pub use ports::offset_store::{validate_committed, validate_offsets};
pub use ports::{Assignor, Clock, CommitFence, MemberIdSource, OffsetStore, TopicMetadata};
pub use types::{
    offsets_of, with_no_metadata, CommittedOffsets, Generation, GroupState, OffsetAndMetadata,
    OffsetMap, TopicPartition,
};

/// mockall mocks of the ports, for tests in this and other crates (feature `mocks`).
#[cfg(any(test, feature = "mocks"))]
pub mod mocks {
    pub use crate::ports::assign::MockAssignor;
    pub use crate::ports::clock::MockClock;
    pub use crate::ports::metadata::MockTopicMetadata;
    pub use crate::ports::offset_store::MockOffsetStore;
    pub use crate::txn::{MockMarkerWriter, MockProducerIdSource};
}
