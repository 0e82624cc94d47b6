//! Kafka's consumer group protocol (KIP-848): the coordinator computes a target assignment
//! with a server-side assignor, and each member reconciles toward it one heartbeat at a time,
//! fenced by member epochs.
//!
//! `protocol.rs` holds ConsumerGroupHeartbeat and ConsumerGroupDescribe as the core sees
//! them; `state.rs` the state machine of Kafka 4's `ConsumerGroup` with its
//! `CurrentAssignmentBuilder` (synchronous, no I/O); `api.rs` the [`ConsumerGroups`] view
//! through which a wire front calls it (`coordinator.consumer()`).
//!
//! `pattern.rs` compiles regular-expression subscriptions (`SubscribedTopicRegex`).
//!
//! `embedded.rs` reads and writes Kafka's embedded consumer protocol (the subscription and
//! assignment bytes of classic members), for the online migration between the classic and
//! the consumer protocol (Kafka's `group.consumer.migration.policy`): a classic group of
//! protocol type `consumer` becomes a consumer-protocol group on the first
//! ConsumerGroupHeartbeat, its members staying in it as classic members (JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup answered as Kafka's `classicGroup*ToConsumerGroup`).
//!
//! Not yet here: rack-aware assignment.

mod api;
pub(crate) mod embedded;
pub(crate) mod pattern;
mod protocol;
mod state;

use std::sync::Arc;

use crate::ports::assign::{AssignError, Assignment, AssignmentInput, Assignor};

pub use api::ConsumerGroups;
pub use protocol::{
    ConsumerGroupDescription, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    ConsumerGroupState, ConsumerMemberDescription, MemberState, LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
pub(crate) use state::ConsumerGroup;

/// `assignor` under another name: to register a strategy as a consumer-protocol server-side
/// assignor under the name clients give in `group.remote.assignor` (Kafka's `uniform` for a
/// sticky strategy, `range`), whatever its own name.
///
/// ```
/// # use std::sync::Arc;
/// # use coordinator_core::{named, Assignor, Assignment, AssignmentInput, AssignError};
/// struct Nothing;
/// impl Assignor for Nothing {
///     fn name(&self) -> &str { "nothing" }
///     fn assign(&self, input: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
///         Ok(Assignment::new(input))
///     }
/// }
/// assert_eq!(named("uniform", Arc::new(Nothing)).name(), "uniform");
/// ```
pub fn named(name: impl Into<String>, assignor: Arc<dyn Assignor>) -> Arc<dyn Assignor> {
    Arc::new(Named {
        name: name.into(),
        inner: assignor,
    })
}

struct Named {
    name: String,
    inner: Arc<dyn Assignor>,
}

impl Assignor for Named {
    fn name(&self) -> &str {
        &self.name
    }

    fn assign(&self, input: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
        self.inner.assign(input)
    }
}
