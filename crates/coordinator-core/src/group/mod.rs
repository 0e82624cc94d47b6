//! The kinds of group, behind one interface.
//!
//! Each kind is a folder: its state machine (`state.rs`: synchronous, no I/O, no awaits),
//! and its calls on the [`Coordinator`](crate::Coordinator) (`api.rs`). Everything the
//! coordinator does for *any* group — commit and fetch validation, deletion of offsets,
//! listing, descriptions, the timers and the lifecycle — goes through the crate-private
//! `Group` trait, the way
//! Apache Kafka 4's `GroupMetadataManager` and `OffsetMetadataManager` go through its `Group`
//! interface. The coordinator dispatches on the kind in one place: a group's cell holds a
//! `Box<dyn Group>`, and a kind's own calls reach their state with `downcast`. Adding a
//! kind adds a folder, a [`GroupKind`] and the calls that create it; no `match` on kinds
//! elsewhere changes.
//!
//! - `chapter`: the book's groups. The coordinator assigns, synchronously, on every
//!   membership change.
//! - `classic`: Kafka's JoinGroup/SyncGroup protocol, with a leader that assigns.
//! - `consumer`: Kafka's consumer group protocol (KIP-848): the coordinator assigns with a
//!   server-side assignor, members reconcile incrementally, fenced by member epochs.
//! - `share`: Kafka's share groups (KIP-932): the coordinator assigns, a partition may have
//!   several members, which take their assignment at once.

pub(crate) mod chapter;
pub(crate) mod classic;
pub(crate) mod consumer;
mod record;
pub(crate) mod share;

pub use record::{ConsumerMemberRecord, GroupRecord, MemberRecord};

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::coordinator::{ConsumerGroupSettings, ExpiredMember, GroupSettings, Stats};
use crate::error::Error;
use crate::ports::{Assignor, MemberIdSource, TopicMetadata};
use crate::types::{Generation, GroupState, TopicPartition};

/// Which kind of group an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupKind {
    /// The chapter's group: the coordinator assigns, synchronously.
    Chapter,
    /// Kafka's classic protocol: a leader assigns through JoinGroup/SyncGroup.
    Classic,
    /// Kafka's consumer group protocol (KIP-848): ConsumerGroupHeartbeat, server-side
    /// assignment, member epochs.
    Consumer,
    /// No members ever joined: a group known only by its committed offsets (Kafka's
    /// "simple" group).
    Simple,
    /// Kafka's share group (KIP-932): ShareGroupHeartbeat, server-side assignment in which
    /// a partition may have several members.
    Share,
}

impl GroupKind {
    /// `chapter`, `classic`, `consumer`, `simple` or `share`.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupKind::Share => "share",
            GroupKind::Chapter => "chapter",
            GroupKind::Classic => "classic",
            GroupKind::Consumer => "consumer",
            GroupKind::Simple => "simple",
        }
    }
}

/// One group in [`Coordinator::list_groups`](crate::Coordinator::list_groups).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedGroup {
    /// The group id.
    pub group_id: String,
    /// The protocol type (`consumer` for consumer groups; empty for simple groups).
    pub protocol_type: String,
    /// The state.
    pub state: GroupState,
    /// The kind of group.
    pub kind: GroupKind,
}

/// Who commits offsets (or fetches them), and under what: what a group checks the request
/// against. Kafka's OffsetCommit carries the three forms as a generation-or-epoch number, a
/// member id and an instance id; the wire front turns them into one of these.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommitAuthority {
    /// No member and no generation (Kafka's generation −1 with an empty member id): an
    /// admin tool, or a consumer with a manual assignment. Accepted while the group has no
    /// members; such commits create a simple group where there is none.
    Plain,
    /// A member of a generation-fenced group (the chapter's, Kafka's classic protocol).
    Generation {
        /// The member's generation; `None` when the request names a member but no
        /// generation (a negative number on Kafka's wire).
        generation: Option<Generation>,
        /// The member id (may be empty when an instance id names a static member).
        member_id: String,
        /// The static member's instance id, if any.
        group_instance_id: Option<String>,
    },
    /// A member of a consumer-protocol group (KIP-848), fenced by its member epoch.
    MemberEpoch {
        /// The member id.
        member_id: String,
        /// The member's epoch.
        member_epoch: i32,
    },
}

impl CommitAuthority {
    /// A classic member's authority; [`Plain`](Self::Plain) when it names neither a
    /// generation, a member nor an instance.
    pub fn generation(
        generation: Option<Generation>,
        member_id: impl Into<String>,
        group_instance_id: Option<String>,
    ) -> Self {
        let member_id = member_id.into();
        if generation.is_none() && member_id.is_empty() && group_instance_id.is_none() {
            CommitAuthority::Plain
        } else {
            CommitAuthority::Generation {
                generation,
                member_id,
                group_instance_id,
            }
        }
    }

    /// Whether the request carries no generation or member epoch (Kafka's negative
    /// `generationIdOrMemberEpoch`), whatever member id it names: an admin tool, or a consumer
    /// that does not use the group's management. Kafka accepts such a commit to a group that
    /// does not exist (creating a simple group) or is Empty.
    pub fn is_memberless(&self) -> bool {
        match self {
            CommitAuthority::Plain => true,
            CommitAuthority::Generation { generation, .. } => generation.is_none(),
            CommitAuthority::MemberEpoch { member_epoch, .. } => *member_epoch < 0,
        }
    }

    /// The member id the authority names (empty for a plain commit).
    pub fn member_id(&self) -> &str {
        match self {
            CommitAuthority::Plain => "",
            CommitAuthority::Generation { member_id, .. }
            | CommitAuthority::MemberEpoch { member_id, .. } => member_id,
        }
    }
}

/// How a group's committed offsets expire now: Kafka 4's `offsetExpirationCondition`. An
/// offset expires once `offsets.retention.ms` has passed since its base time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum OffsetExpiration {
    /// None expires (a group with members whose subscriptions are unknown, or that is
    /// rebalancing).
    Never,
    /// Every offset counts from when the group became Empty.
    SinceEmpty,
    /// Each offset counts from its own commit, except those of topics a member subscribes
    /// to (a simple group, or a Stable consumer group that knows its subscriptions).
    SinceCommit,
}

/// What every transition of a kind may need from the coordinator.
pub(crate) struct Ctx<'a> {
    /// The clock's time of this call.
    pub(crate) now: u64,
    /// The group id's generation: one counter per group id, shared by the incarnations and
    /// kinds the id goes through (and kept in its tombstone), so that a member of an old
    /// incarnation never presents a number the new one uses.
    pub(crate) generation: &'a mut Generation,
    pub(crate) settings: &'a GroupSettings,
    pub(crate) ids: &'a dyn MemberIdSource,
    pub(crate) assignors: &'a [Arc<dyn Assignor>],
    pub(crate) metadata: &'a dyn TopicMetadata,
    /// The settings of consumer-protocol groups.
    pub(crate) consumer: &'a ConsumerGroupSettings,
    /// The consumer protocol's server-side assignors, the default first.
    pub(crate) consumer_assignors: &'a [Arc<dyn Assignor>],
    /// Whether the store keeps group records: a classic leader's assignment is then staged
    /// and installed only once the group's record is written.
    pub(crate) durable_groups: bool,
    /// The coordinator's counts (see [`crate::CoordinatorStats`]).
    pub(crate) stats: &'a Stats,
    /// The kind of group the call is on, and the generation it started from: when the
    /// context is dropped, the generations installed meanwhile count as that kind's
    /// rebalances (a transition that failed and put the generation back counts none).
    pub(crate) counted: (GroupKind, Generation),
}

impl Drop for Ctx<'_> {
    fn drop(&mut self) {
        let (kind, start) = self.counted;
        let installed = self.generation.get().saturating_sub(start.get());
        self.stats.rebalanced(kind, installed);
    }
}

/// The group a coordinator loads from its durable record at `now`, for the kinds that write
/// one (classic and consumer-protocol groups); `None` for the chapter's, which start again
/// from their offsets.
pub(crate) fn from_record(record: &GroupRecord, now: u64) -> Option<Box<dyn Group>> {
    match record.kind {
        GroupKind::Classic => Some(Box::new(classic::ClassicGroup::from_record(record, now))),
        GroupKind::Consumer => Some(Box::new(consumer::ConsumerGroup::from_record(record, now))),
        _ => None,
    }
}

/// One kind of group, as the coordinator sees every kind (Kafka's `Group` interface).
///
/// Implementations are synchronous state machines: they run under the group's state lock,
/// never wait and do no I/O. What needs the commit gate (anything that installs a
/// generation) is documented on the coordinator call that runs it.
pub(crate) trait Group: fmt::Debug + Send + Any {
    /// The kind.
    fn kind(&self) -> GroupKind;

    /// The group's state.
    fn state(&self) -> GroupState;

    /// Whether the group has members (an Empty group has none).
    fn has_members(&self) -> bool;

    /// How many members the group has (a classic group's pending members, which have no
    /// member id yet, are not among them).
    fn member_count(&self) -> usize;

    /// The protocol type, as ListGroups and DescribeGroups report it.
    fn protocol_type(&self) -> &str;

    /// Kafka's `validateOffsetCommit`: may `authority` commit offsets of `partitions` now?
    /// May renew the committing member's session, as Kafka's commits do.
    fn validate_offset_commit(
        &mut self,
        authority: &CommitAuthority,
        partitions: &mut dyn Iterator<Item = &TopicPartition>,
        ctx: &Ctx<'_>,
    ) -> Result<(), Error>;

    /// Kafka's `validateOffsetFetch`: may `authority` read the committed offsets? Every
    /// member and every tool may, in the generation-fenced kinds.
    fn validate_offset_fetch(&self, _authority: &CommitAuthority) -> Result<(), Error> {
        Ok(())
    }

    /// Kafka's `validateOffsetDelete`: may offsets be deleted at all now? (Per partition,
    /// [`is_subscribed_to`](Self::is_subscribed_to) decides.)
    fn validate_offset_delete(&self, group_id: &str) -> Result<(), Error>;

    /// Whether a member subscribes to `topic` (Kafka's `isSubscribedToTopic`): its offsets
    /// cannot be deleted then, and do not expire.
    fn is_subscribed_to(&self, topic: &str) -> bool;

    /// How the group's committed offsets expire in its current state.
    fn offset_expiration(&self) -> OffsetExpiration;

    /// The earliest clock time at which something of this group is due (a session, a
    /// barrier, a follow-up); `None` if nothing is scheduled.
    fn next_deadline(&self) -> Option<u64>;

    /// Whether something is due at `now`.
    fn is_due(&self, now: u64) -> bool {
        self.next_deadline().is_some_and(|at| at <= now)
    }

    /// Does everything due at `ctx.now`, returning the members it removed. The caller holds
    /// the commit gate exclusively (removals install generations).
    fn handle_due(&mut self, ctx: &mut Ctx<'_>) -> Vec<ExpiredMember>;

    /// The durable record of the group's state (see [`GroupRecord`]), under `generation`,
    /// with the coordinator's registered strategies (to name the chapter's).
    fn record(&self, generation: Generation, assignors: &[Arc<dyn Assignor>]) -> GroupRecord;

    /// Whether the last transition changed what a restart must know in a way the kind's own
    /// calls do not write (a classic group that became Empty in a new generation); clears
    /// the mark. The coordinator then writes [`record`](Group::record) under the commit
    /// gate. Default: never.
    fn take_record_due(&mut self) -> bool {
        false
    }

    /// The group of another kind this one became in its last transition (a consumer-protocol
    /// group whose last consumer-protocol member left becomes a classic group, Kafka's
    /// `convertToClassicGroup`), built now with `ctx`; the coordinator puts it in the
    /// entry's place. Default: none.
    fn take_replacement(&mut self, _ctx: &mut Ctx<'_>) -> Option<Box<dyn Group>> {
        None
    }

    /// Marks the record due again (its write failed: the next call writes it). Default:
    /// nothing, for kinds that never mark it.
    fn mark_record_due(&mut self) {}

    /// Answers every request parked in the group (a classic JoinGroup waiting for its
    /// barrier, a SyncGroup waiting for the leader's) with `error()` at once, and forgets
    /// whatever waits on the store for them (a staged assignment): the group is leaving this
    /// coordinator ([`Coordinator::unload_where`](crate::Coordinator::unload_where)). Default:
    /// nothing, for kinds that never park a request.
    fn answer_parked(&mut self, _error: &dyn Fn() -> Error) {}

    /// `self`, to downcast to the concrete kind.
    fn as_any(&self) -> &dyn Any;

    /// `self`, to downcast to the concrete kind.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// The concrete kind `G` of `group`, if it is one.
pub(crate) fn downcast<G: Group>(group: &dyn Group) -> Option<&G> {
    group.as_any().downcast_ref::<G>()
}

/// The concrete kind `G` of `group`, if it is one.
pub(crate) fn downcast_mut<G: Group>(group: &mut dyn Group) -> Option<&mut G> {
    group.as_any_mut().downcast_mut::<G>()
}
