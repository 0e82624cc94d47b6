//! The coordinator's deadlines — one min-heap of (time, group), armed lazily — and the
//! timer run that does what is due (`poll_timeout`, `handle_timeout`).
//!
//! Every group keeps in its entry the time of the one heap entry that is live for it
//! (`armed`). Arming an earlier time pushes a new entry and makes the old one stale; a stale
//! entry is skipped when it pops. Deadlines that move *later* (a heartbeat extending a
//! lease) do not touch the heap: the live entry fires early, the group finds nothing due and
//! arms its real next deadline. So a heartbeat costs no heap work, and a timer run costs
//! O(log n) per due entry plus the work of the groups that are due — never a scan of every
//! group.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::sync::{Arc, PoisonError};

use tracing::{info, warn};

use tokio::sync::OwnedRwLockWriteGuard;

use super::{Coordinator, ExpiredMember, GroupCell, GroupEntry};
use crate::error::StorageError;
use crate::ports::CommitFence;
use crate::types::TopicPartition;

/// The heap of deadlines.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<(u64, Arc<str>)>>,
}

impl Timers {
    /// Pushes `(at, group)`. Returns whether it is now the earliest deadline (a driver
    /// sleeping until a later one must be woken).
    pub(crate) fn push(&mut self, at: u64, group: Arc<str>) -> bool {
        let earliest = self.next().is_none_or(|next| at < next);
        self.heap.push(Reverse((at, group)));
        earliest
    }

    /// The earliest deadline, if any (possibly a stale entry: waking for it is harmless).
    pub(crate) fn next(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// Pops every entry due at `now` (`at <= now`).
    pub(crate) fn pop_due(&mut self, now: u64) -> Vec<(u64, Arc<str>)> {
        let mut due = Vec::new();
        while let Some(Reverse((at, _))) = self.heap.peek() {
            if *at > now {
                break;
            }
            if let Some(Reverse(entry)) = self.heap.pop() {
                due.push(entry);
            }
        }
        due
    }

    /// The distinct groups with an entry in the heap (live or stale).
    pub(crate) fn groups(&self) -> HashSet<Arc<str>> {
        self.heap.iter().map(|Reverse((_, g))| g.clone()).collect()
    }

    /// Removes every entry of the groups in `gone`; returns how many were removed.
    pub(crate) fn remove_groups(&mut self, gone: &HashSet<Arc<str>>) -> usize {
        if gone.is_empty() {
            return 0;
        }
        let before = self.heap.len();
        self.heap.retain(|Reverse((_, g))| !gone.contains(g));
        before - self.heap.len()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

/// A group taken off the timer heap for a run. Unless the run says it armed (or removed)
/// the group itself, dropping this arms the group's next deadline: when the work completes,
/// and when the run is cancelled before it did (a dropped `handle_timeout` future).
struct Rearm<'a> {
    coordinator: &'a Coordinator,
    cell: Arc<GroupCell>,
    /// The run armed or removed the group itself.
    done: bool,
}

impl Drop for Rearm<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut entry = self.cell.lock();
        if !entry.removed {
            self.coordinator.arm(&mut entry);
        }
    }
}

/// What a timer run found due in one group.
enum Due {
    /// Nothing (a lease was extended since the deadline was armed).
    Nothing,
    /// Members to expire, or a follow-up rebalance: needs the commit gate.
    Rebalance,
    /// Some of the group's offsets may have expired.
    ExpireOffsets,
    /// The group is Empty, without offsets, past its grace period.
    Remove,
}

impl Coordinator {
    /// When the coordinator next needs [`handle_timeout`](Self::handle_timeout), in clock
    /// milliseconds (`None`: nothing is scheduled). It may answer earlier than necessary
    /// (a lease extended since), never later.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.timers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next()
    }

    /// Resolves when a deadline earlier than every other one was armed since the last call
    /// (or since the coordinator was built): a driver sleeping until
    /// [`poll_timeout`](Self::poll_timeout) should wake and ask again.
    pub async fn timeout_changed(&self) {
        self.wake.notified().await;
    }

    /// Does everything that is due at the clock's current time: expires members whose
    /// session passed (and rebalances their groups once each), runs follow-up rebalances of
    /// cooperative hand-overs that could not run at once, deletes the offsets of groups that
    /// have been Empty for `offsets_retention_ms`, and removes Empty groups without offsets
    /// after `empty_group_grace_ms`. The core never does any of this by itself: a driver (or
    /// a test with a [`ManualClock`](crate::ManualClock)) calls this when
    /// [`poll_timeout`](Self::poll_timeout) says.
    ///
    /// Returns the expired members ordered by group id, then member id. Costs O(log n) per
    /// due deadline plus the work of the groups that are due, not a scan of every group.
    ///
    /// **Waiting.** A group's work takes its commit gate, so it waits for that group's
    /// commits in flight (a slow store write). The due groups are worked on concurrently:
    /// one group waiting for its gate never delays another's. Each group's work reads the
    /// clock again once it has the gate, so deadlines set then count from the real time.
    ///
    /// **When work is taken.** The first poll of the returned future takes every deadline
    /// due at that moment off the timer heap, before it first waits; a driver can therefore
    /// poll it once and hand the rest to a task of its own (as `coordinator-driver` does), and
    /// a later call does not take the same work again.
    ///
    /// **Cancel safety.** Dropping the future before it completes loses nothing: every
    /// group whose work had not finished has its next deadline armed again.
    pub async fn handle_timeout(&self) -> Vec<ExpiredMember> {
        let now = self.clock.now_ms();
        let mut expired = Vec::new();
        // Work done now may arm more work due now (a classic group's initial delay of 0 ms
        // extended by a member that just arrived): a few passes finish it, without letting
        // a group that keeps re-arming at `now` hold the caller forever.
        for _ in 0..4 {
            let due = self
                .timers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop_due(now);
            if due.is_empty() {
                break;
            }
            let mut cells = Vec::with_capacity(due.len());
            for (at, id) in due {
                let Some(cell) = self.group(&id) else {
                    continue;
                };
                {
                    let mut entry = cell.lock();
                    if entry.removed || entry.armed != Some(at) {
                        continue; // a stale entry: the live one is elsewhere in the heap
                    }
                    entry.armed = None;
                }
                // Armed again if this future is dropped before the group's work is done.
                cells.push(Rearm {
                    coordinator: self,
                    cell,
                    done: false,
                });
            }
            let runs = cells.into_iter().map(|guard| self.run_due(guard, now));
            for group_expired in futures_util::future::join_all(runs).await {
                expired.extend(group_expired);
            }
        }
        expired.sort_unstable();
        expired
    }

    fn what_is_due(&self, entry: &mut GroupEntry, now: u64) -> Due {
        entry.offset_times.settle(|| now);
        if entry.group.as_ref().is_some_and(|g| g.is_due(now)) {
            return Due::Rebalance;
        }
        match entry.lifecycle_deadline(
            self.config.offsets_retention_ms,
            self.config.empty_group_grace_ms,
        ) {
            Some(at) if now >= at && entry.has_offsets => Due::ExpireOffsets,
            Some(at) if now >= at => Due::Remove,
            _ => Due::Nothing,
        }
    }

    /// Does what is due in one group. Everything but re-arming happens under the group's
    /// commit gate, held exclusively: expiry and rebalances install generations, the offsets
    /// delete must not run beside a commit (an acknowledged commit deleted, or one landing
    /// after the delete and orphaned), and a removal must not run beside a join.
    async fn run_due(&self, mut guard: Rearm<'_>, popped_at: u64) -> Vec<ExpiredMember> {
        let mut expired = Vec::new();
        let cell = guard.cell.clone();
        if matches!(self.what_is_due(&mut cell.lock(), popped_at), Due::Nothing) {
            return expired; // fired early (a lease extended since): the guard arms the next
        }
        let gate = Arc::new(cell.gate.clone().write_owned().await);
        // The wait may have been long (a slow commit of this group): act at the real time.
        let now = self.clock.now_ms().max(popped_at);
        let delete = {
            let mut entry = cell.lock();
            if entry.removed {
                guard.done = true;
                return expired;
            }
            match self.what_is_due(&mut entry, now) {
                Due::Nothing | Due::Remove => false,
                Due::Rebalance => {
                    let GroupEntry {
                        generation, group, ..
                    } = &mut *entry;
                    if let Some(group) = group {
                        let settings = self.consumer_settings(&cell.id);
                        let kind = group.kind();
                        let mut ctx = self.ctx_with(now, generation, &settings, kind);
                        expired = group.handle_due(&mut ctx);
                        self.stats.members_expired(expired.len());
                        if let Some(replacement) = group.take_replacement(&mut ctx) {
                            *group = replacement;
                        }
                    }
                    entry.note_membership(now);
                    self.arm(&mut entry);
                    false
                }
                Due::ExpireOffsets => true,
            }
        };
        if delete {
            if let Err(e) = self.expire_offsets(&cell, &gate, now).await {
                warn!(group = &*cell.id, error = %e, "expired offsets could not be deleted; retrying later");
                let retry = now.saturating_add(self.config.empty_group_grace_ms);
                self.arm_at(&mut cell.lock(), retry);
                guard.done = true;
                return expired;
            }
        }
        let _logged = self.write_due_record(&cell, &gate).await;
        let removing = matches!(self.what_is_due(&mut cell.lock(), now), Due::Remove);
        if removing {
            if let Err(e) = self.write_tombstone(&cell, &gate).await {
                warn!(group = &*cell.id, error = %e, "the group's record could not be removed; retrying later");
                let retry = now.saturating_add(self.config.empty_group_grace_ms);
                self.arm_at(&mut cell.lock(), retry);
                guard.done = true;
                return expired;
            }
        }
        let mut entry = cell.lock();
        if removing && matches!(self.what_is_due(&mut entry, now), Due::Remove) {
            entry.removed = true;
            let generation = entry.generation;
            drop(entry);
            self.forget(&cell, generation);
            info!(
                group = &*cell.id,
                generation = generation.get(),
                "empty group removed"
            );
            guard.done = true;
            return expired;
        }
        drop(entry);
        drop(gate);
        expired // the guard arms the group's next deadline
    }
}

impl Coordinator {
    /// Deletes the group's offsets whose retention has passed at `now` (Kafka's
    /// `cleanupExpiredOffsets`), under the exclusive gate `gate`: what the store holds is
    /// listed, each offset's base time decided by the group's [`OffsetExpiration`], and the
    /// expired ones deleted in one write. An offset never expires early: one the coordinator
    /// did not see committed counts from when it learned of the group.
    async fn expire_offsets(
        &self,
        cell: &GroupCell,
        gate: &Arc<OwnedRwLockWriteGuard<()>>,
        now: u64,
    ) -> Result<(), StorageError> {
        let listed = self.store.list(&cell.id).await?;
        let retention = self.config.offsets_retention_ms;
        let expired: Vec<TopicPartition> = {
            let mut entry = cell.lock();
            entry.offset_times.settle(|| now);
            let how = entry.offset_expiration();
            let expired = listed
                .keys()
                .filter(|tp| {
                    entry
                        .expiry_base(tp, how)
                        .is_some_and(|base| now >= base.saturating_add(retention))
                })
                .cloned()
                .collect();
            entry.offset_times.timed_all(listed.keys());
            if listed.is_empty() {
                entry.has_offsets = false;
            }
            expired
        };
        if expired.is_empty() {
            return Ok(());
        }
        self.store
            .delete(&cell.id, Some(&expired), CommitFence::exclusive(gate))
            .await?;
        self.stats.expired(expired.len());
        let mut entry = cell.lock();
        entry.offset_times.forget(Some(&expired));
        if expired.len() == listed.len() {
            entry.has_offsets = false;
            entry.offset_times.forget(None);
        }
        info!(
            group = &*cell.id,
            partitions = expired.len(),
            left = listed.len() - expired.len(),
            "offsets expired after the retention period"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_only_what_is_due_in_time_order() {
        let mut t = Timers::default();
        assert!(t.push(30, Arc::from("c")));
        assert!(t.push(10, Arc::from("a")));
        assert!(!t.push(20, Arc::from("b")));
        assert_eq!(t.next(), Some(10));
        let due: Vec<(u64, String)> = t
            .pop_due(20)
            .into_iter()
            .map(|(at, g)| (at, g.to_string()))
            .collect();
        assert_eq!(due, [(10, "a".to_string()), (20, "b".to_string())]);
        assert_eq!(t.next(), Some(30));
        assert!(t.pop_due(29).is_empty());
        assert_eq!(t.len(), 1);
    }
}
