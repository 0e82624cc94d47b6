//! The chapter's groups: the coordinator owns membership and assigns, synchronously, with a
//! pluggable assignor on every membership change.
//!
//! `state.rs` is the group's state machine; `api.rs` the chapter's calls on the
//! [`Coordinator`](crate::Coordinator) (join, leave, heartbeat, assignment, describe,
//! commit), whose names and signatures are the chapter's and stay stable.

mod api;
mod state;

pub use api::{GroupDescription, MemberAssignment, MemberDescription};
pub(crate) use state::ChapterGroup;
