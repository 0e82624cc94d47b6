//! One group's cell in the coordinator's map: a commit gate and the group's state.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::RwLock;

use crate::group::{downcast, downcast_mut, Group, GroupKind};
use crate::types::{Generation, GroupState};

/// A group's place in the coordinator.
///
/// Two locks, for two different jobs:
/// - `gate`, an async read-write lock that guards nothing but ordering. A commit holds it
///   *shared* from its checks until its write is visible in the store (the store keeps it as
///   the commit's fence); installing a new generation holds it *exclusively*. So no commit
///   checked against generation G lands after G+1 is installed, and commits of one group do
///   not wait for each other.
/// - `state`, a plain mutex around the group's data, never held across an `.await`.
///   Heartbeats, assignment reads and descriptions take only this lock, so they never wait
///   for a store write — however slow the disk is.
///
/// The gate is always taken before the state lock, never while holding it (except
/// `try_write`, which does not wait).
#[derive(Debug)]
pub(crate) struct GroupCell {
    pub(crate) id: Arc<str>,
    pub(crate) gate: Arc<RwLock<()>>,
    state: Mutex<GroupEntry>,
}

impl GroupCell {
    pub(crate) fn new(id: Arc<str>, generation: Generation) -> Self {
        GroupCell {
            id: id.clone(),
            gate: Arc::new(RwLock::new(())),
            state: Mutex::new(GroupEntry::new(id, generation)),
        }
    }

    /// The group's state. Nothing panics while it is held, so a poisoned lock still guards
    /// consistent data.
    pub(crate) fn lock(&self) -> MutexGuard<'_, GroupEntry> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A group's data, under its cell's state lock.
#[derive(Debug)]
pub(crate) struct GroupEntry {
    pub(crate) id: Arc<str>,
    /// The group id's generation; a re-created group continues from its tombstone.
    pub(crate) generation: Generation,
    /// The group, of whichever kind; `None` while no member ever joined this incarnation (a
    /// simple group, known by its committed offsets only, or a first join that failed).
    pub(crate) group: Option<Box<dyn Group>>,
    /// Whether the store may hold offsets of this group (set before a commit is written,
    /// cleared when they are deleted).
    pub(crate) has_offsets: bool,
    /// Since when (clock ms) the group has had no members; `None` while it has some.
    pub(crate) empty_since: Option<u64>,
    /// The cell was taken out of the coordinator's map: whoever still holds it must look
    /// the group up again.
    pub(crate) removed: bool,
    /// The time of this group's live entry in the timer heap.
    pub(crate) armed: Option<u64>,
}

impl GroupEntry {
    fn new(id: Arc<str>, generation: Generation) -> Self {
        GroupEntry {
            id,
            generation,
            group: None,
            has_offsets: false,
            empty_since: None,
            removed: false,
            armed: None,
        }
    }

    /// The kind of group this is.
    pub(crate) fn kind(&self) -> GroupKind {
        self.group.as_ref().map_or(GroupKind::Simple, |g| g.kind())
    }

    /// The group as kind `G`, if it is one.
    pub(crate) fn get<G: Group>(&self) -> Option<&G> {
        downcast(self.group.as_deref()?)
    }

    /// The group as kind `G`, if it is one.
    pub(crate) fn get_mut<G: Group>(&mut self) -> Option<&mut G> {
        downcast_mut(self.group.as_deref_mut()?)
    }

    /// Makes the group one of kind `G` with `new` if it has no members (an unused entry, or
    /// an Empty group of another kind: the next group to join decides the kind, as in
    /// Kafka). A group of another kind with members stays as it is.
    pub(crate) fn convert_if_empty<G: Group>(&mut self, new: impl FnOnce(Arc<str>) -> G) {
        if !self.has_members() && self.get::<G>().is_none() {
            self.group = Some(Box::new(new(self.id.clone())));
        }
    }

    /// The group as kind `G` with the group id's generation, if it is one.
    pub(crate) fn split_mut<G: Group>(&mut self) -> Option<(&mut G, &mut Generation)> {
        let GroupEntry {
            generation, group, ..
        } = self;
        Some((downcast_mut(group.as_deref_mut()?)?, generation))
    }

    /// Whether the group has members.
    pub(crate) fn has_members(&self) -> bool {
        self.group.as_ref().is_some_and(|g| g.has_members())
    }

    /// The group's state; a simple group is Empty.
    pub(crate) fn state(&self) -> GroupState {
        self.group.as_ref().map_or(GroupState::Empty, |g| g.state())
    }

    /// The protocol type ListGroups and DescribeGroups report; empty for a simple group.
    pub(crate) fn protocol_type(&self) -> &str {
        self.group.as_ref().map_or("", |g| g.protocol_type())
    }

    /// Records whether the group has members now, starting or stopping its Empty clock.
    pub(crate) fn note_membership(&mut self, now: u64) {
        if self.has_members() {
            self.empty_since = None;
        } else if self.empty_since.is_none() {
            self.empty_since = Some(now);
        }
    }

    /// When the group's lifecycle next needs attention: its offsets expire
    /// `retention_ms` after it became Empty; without offsets it is removed `grace_ms` after.
    pub(crate) fn lifecycle_deadline(&self, retention_ms: u64, grace_ms: u64) -> Option<u64> {
        let since = self.empty_since?;
        let wait = if self.has_offsets {
            retention_ms
        } else {
            grace_ms
        };
        Some(since.saturating_add(wait))
    }

    /// The earliest time at which anything of this group is due.
    pub(crate) fn next_deadline(&self, retention_ms: u64, grace_ms: u64) -> Option<u64> {
        let members = self.group.as_ref().and_then(|g| g.next_deadline());
        let lifecycle = self.lifecycle_deadline(retention_ms, grace_ms);
        match (members, lifecycle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
