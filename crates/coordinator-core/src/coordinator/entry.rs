//! One group's cell in the coordinator's map: a commit gate and the group's state.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::RwLock;

use super::chapter::Group;
use super::classic::ClassicGroup;
use crate::classic::GroupKind;
use crate::types::Generation;

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
    pub(crate) fn new(id: Arc<str>, generation: Generation, strategies: usize) -> Self {
        GroupCell {
            id: id.clone(),
            gate: Arc::new(RwLock::new(())),
            state: Mutex::new(GroupEntry::new(id, generation, strategies)),
        }
    }

    /// The group's state. Nothing panics while it is held, so a poisoned lock still guards
    /// consistent data.
    pub(crate) fn lock(&self) -> MutexGuard<'_, GroupEntry> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What kind of group an entry holds.
#[derive(Debug)]
pub(crate) enum Body {
    /// No members have ever joined this incarnation: the group has committed offsets only
    /// (direct commits), or a first join failed.
    Unused,
    /// The chapter's group.
    Chapter(Box<Group>),
    /// Kafka's classic group.
    Classic(Box<ClassicGroup>),
}

/// A group's data, under its cell's state lock.
#[derive(Debug)]
pub(crate) struct GroupEntry {
    pub(crate) id: Arc<str>,
    /// The group's generation; a re-created group continues from its tombstone.
    pub(crate) generation: Generation,
    pub(crate) body: Body,
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
    strategies: usize,
}

impl GroupEntry {
    fn new(id: Arc<str>, generation: Generation, strategies: usize) -> Self {
        GroupEntry {
            id,
            generation,
            body: Body::Unused,
            has_offsets: false,
            empty_since: None,
            removed: false,
            armed: None,
            strategies,
        }
    }

    /// The chapter group, if this is one.
    pub(crate) fn chapter(&self) -> Option<&Group> {
        match &self.body {
            Body::Chapter(g) => Some(g),
            _ => None,
        }
    }

    /// The chapter group, if this is one.
    pub(crate) fn chapter_mut(&mut self) -> Option<&mut Group> {
        match &mut self.body {
            Body::Chapter(g) => Some(g),
            _ => None,
        }
    }

    /// The kind of group this is.
    pub(crate) fn kind(&self) -> GroupKind {
        match &self.body {
            Body::Unused => GroupKind::Simple,
            Body::Chapter(_) => GroupKind::Chapter,
            Body::Classic(_) => GroupKind::Classic,
        }
    }

    /// The chapter group, made one if the entry has no members (an unused entry, or an
    /// Empty group of the other kind: the next group to join decides the kind, as in Kafka).
    /// `None`: a classic group with members.
    pub(crate) fn chapter_or_convert(&mut self) -> Option<&mut Group> {
        if !self.has_members() && !matches!(self.body, Body::Chapter(_)) {
            self.body = Body::Chapter(Box::new(Group::new(self.id.clone(), self.strategies)));
        }
        self.chapter_mut()
    }

    /// The classic group, made one if the entry has no members. `None`: a chapter group
    /// with members.
    pub(crate) fn classic_or_convert(&mut self) -> Option<&mut ClassicGroup> {
        if !self.has_members() && !matches!(self.body, Body::Classic(_)) {
            self.body = Body::Classic(Box::new(ClassicGroup::new(self.id.clone())));
        }
        match &mut self.body {
            Body::Classic(g) => Some(g),
            _ => None,
        }
    }

    /// Whether the group has members.
    pub(crate) fn has_members(&self) -> bool {
        match &self.body {
            Body::Chapter(g) => !g.ids.is_empty(),
            Body::Classic(g) => g.has_members(),
            Body::Unused => false,
        }
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
        let members = match &self.body {
            Body::Chapter(g) => g.next_deadline(),
            Body::Classic(g) => g.next_deadline(),
            Body::Unused => None,
        };
        let lifecycle = self.lifecycle_deadline(retention_ms, grace_ms);
        match (members, lifecycle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
