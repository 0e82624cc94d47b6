//! The core's ports: every trait through which it reaches the world, each with the
//! guarantees an implementation must give for the coordinator to stay correct.
//!
//! - [`Clock`]: time (`ManualClock` for tests, `MonotonicClock` by default);
//! - [`OffsetStore`]: committed offsets, written under a [`CommitFence`];
//! - [`Assignor`]: who owns which partition, for the chapter's groups;
//! - [`TopicMetadata`]: how many partitions a topic has;
//! - [`MemberIdSource`]: new classic members' ids.
//!
//! The [`RecordSource`](crate::log::RecordSource) port, through which consumers read
//! partition logs, lives with the log vocabulary in [`crate::log`]: the coordinator never
//! reads records.

pub(crate) mod assign;
pub(crate) mod clock;
pub(crate) mod member_ids;
pub(crate) mod metadata;
pub(crate) mod offset_store;

pub use assign::Assignor;
pub use clock::Clock;
pub use member_ids::MemberIdSource;
pub use metadata::TopicMetadata;
pub use offset_store::{CommitFence, OffsetStore};
