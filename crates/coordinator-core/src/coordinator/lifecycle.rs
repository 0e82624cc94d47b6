//! The group lifecycle: Empty groups removed after their grace period, offsets retained
//! after a group becomes Empty, DeleteGroups, listing, loading the groups a store already
//! holds offsets for, and unloading groups another coordinator took over.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, PoisonError};

use tracing::info;

use super::{not_found, Coordinator, GroupCell, GroupEntry};
use crate::error::{Error, StorageError, StorageErrorKind};
use crate::group::{self, GroupKind, GroupRecord, ListedGroup};
use crate::ports::CommitFence;

/// How many times [`Coordinator::unload_where`] looks for matching groups.
const UNLOAD_PASSES: usize = 4;

/// What a request parked in a group that moved to another coordinator is answered with.
fn moved(group: &str) -> Error {
    Error::Storage(StorageError::new(
        StorageErrorKind::NotCoordinator,
        format!("group `{group}` moved to another coordinator; find its coordinator again"),
    ))
}

impl Coordinator {
    /// Every group the coordinator knows, sorted by id: groups of every kind, and groups
    /// known only by their committed offsets (Empty, no protocol type). Kafka's ListGroups.
    pub async fn list_groups(&self) -> Vec<ListedGroup> {
        let cells: Vec<Arc<GroupCell>> = self.read_groups().map.values().cloned().collect();
        let mut listed: Vec<ListedGroup> = cells
            .iter()
            .filter_map(|cell| {
                let entry = cell.lock();
                if entry.removed {
                    return None;
                }
                Some(ListedGroup {
                    group_id: cell.id.to_string(),
                    protocol_type: entry.protocol_type().to_string(),
                    state: entry.state(),
                    kind: entry.kind(),
                })
            })
            .collect();
        listed.sort_unstable_by(|a, b| a.group_id.cmp(&b.group_id));
        listed
    }

    /// The durable record of `group_id`'s state (see [`GroupRecord`]); `None` for a group
    /// the coordinator does not know, or one known only by its offsets.
    pub fn group_record(&self, group_id: &str) -> Option<GroupRecord> {
        let cell = self.group(group_id)?;
        let entry = cell.lock();
        if entry.removed {
            return None;
        }
        let group = entry.group.as_ref()?;
        Some(group.record(entry.generation, &self.assignors))
    }

    /// How many members group `group_id` has now (0 for an Empty group), or `None` for a
    /// group the coordinator does not know.
    pub fn member_count(&self, group_id: &str) -> Option<usize> {
        let cell = self.group(group_id)?;
        let entry = cell.lock();
        (!entry.removed).then(|| entry.member_count())
    }

    /// The kind of group `group_id` is now (`Simple` for one known by its offsets only), or
    /// `None` for a group the coordinator does not know. A wire front reads it to interpret
    /// OffsetCommit v9's `generation_id_or_member_epoch`, as Kafka's coordinator does.
    pub fn group_kind(&self, group_id: &str) -> Option<GroupKind> {
        let cell = self.group(group_id)?;
        let entry = cell.lock();
        (!entry.removed).then(|| entry.kind())
    }

    /// How many group entries the coordinator holds (existing groups of both kinds and
    /// groups known only by their offsets), for tests and metrics.
    pub fn group_count(&self) -> usize {
        self.read_groups().map.len()
    }

    /// Deletes an Empty group and its committed offsets (Kafka's DeleteGroups). A group
    /// known only by its offsets counts as Empty. The empty group id is a group id like any
    /// other, as in Kafka (which accepts it on DeleteGroups, OffsetCommit and OffsetFetch for
    /// backwards compatibility).
    ///
    /// Errors: `GROUP_ID_NOT_FOUND` for a group the coordinator does not know; `NON_EMPTY_GROUP` (68) while it has members; `STORAGE_ERROR` if the offsets
    /// cannot be deleted (then nothing changed).
    pub async fn delete_group(&self, group_id: &str) -> Result<(), Error> {
        let cell = self.group(group_id).ok_or_else(|| not_found(group_id))?;
        // Exclusive: no join can make the group non-empty, and no commit can land, while
        // its offsets are deleted. Shared with the store's fence, so a caller that drops
        // this future mid-delete does not let a commit run beside the delete.
        let gate = Arc::new(cell.gate.clone().write_owned().await);
        let generation = {
            let entry = cell.lock();
            if entry.removed {
                return Err(not_found(group_id));
            }
            if entry.has_members() {
                return Err(Error::NonEmptyGroup {
                    group: group_id.to_string(),
                });
            }
            entry.generation
        };
        // The record first: if its tombstone fails, nothing changed.
        self.write_tombstone(&cell, &gate).await?;
        self.store
            .delete(group_id, None, CommitFence::exclusive(&gate))
            .await?;
        {
            let mut entry = cell.lock();
            entry.has_offsets = false;
            entry.offset_times.forget(None);
            entry.removed = true;
        }
        self.forget(&cell, generation);
        drop(gate);
        info!(group = group_id, "group deleted");
        Ok(())
    }

    /// Loads what the store holds, once, after building a coordinator over a store with
    /// history (until then the coordinator only knows the groups used since it was built):
    ///
    /// - over a store that [keeps groups](crate::OffsetStore::keeps_groups), every classic
    ///   group from its durable record: Stable again with the same generation, leader,
    ///   protocol, members and assignments (Empty if it had no members), every member's
    ///   session counting from now, so members that come back with their generation carry
    ///   on without a rebalance and the others expire (Kafka's coordinator loading);
    /// - every group the store holds offsets for, as a group known by its offsets whose
    ///   retention starts now (the coordinator does not know when they were committed).
    ///
    /// A group already live in this coordinator is left as it is. Returns how many groups
    /// were loaded. The same as [`load_where(|_| true)`](Self::load_where).
    ///
    /// Error: `STORAGE_ERROR` if the store cannot list its groups or records.
    pub async fn load(&self) -> Result<usize, Error> {
        self.load_where(|_| true).await
    }

    /// [`load`](Self::load) for the group ids `keep` accepts only: what a broker calls when
    /// it gains coordinator slots while it runs (`keep` says whether a group id hashes to
    /// one of the slots gained). Groups `keep` refuses are not touched, nor created.
    ///
    /// A group `keep` accepts is loaded from the store's record and offsets as
    /// [`load`](Self::load) does, unless it is live in this coordinator (a client created
    /// it since the slot was gained): that one is left as it is. A group that was
    /// [unloaded](Self::unload_where) earlier is not live — nothing of it stayed in memory,
    /// not even its tombstone — so it is loaded afresh, with the generation of its latest
    /// record (whatever another coordinator wrote meanwhile).
    ///
    /// `keep` is called once per group id the store lists, with no lock of the coordinator
    /// held (it may call back into the coordinator). The store is asked for all its groups
    /// and records and they are filtered here: the [`OffsetStore`](crate::OffsetStore) port
    /// has no per-slot listing.
    ///
    /// Returns how many groups were loaded (kept ids with a record or offsets).
    ///
    /// Error: `STORAGE_ERROR` if the store cannot list its groups or records; then nothing
    /// was loaded.
    pub async fn load_where(&self, keep: impl Fn(&str) -> bool) -> Result<usize, Error> {
        let mut records = if self.durable_groups {
            self.store.load_groups().await?
        } else {
            Vec::new()
        };
        let mut ids = self.store.groups().await?;
        records.retain(|r| keep(&r.group_id));
        ids.retain(|id| keep(id));
        let now = self.clock.now_ms();
        let mut loaded = BTreeSet::new();
        for record in &records {
            let Some(group) = group::from_record(record, now) else {
                continue;
            };
            let fresh = self.with_live_entry(&record.group_id, |entry| {
                if entry.group.is_some() {
                    return false;
                }
                entry.generation = entry.generation.max(record.generation);
                entry.group = Some(group);
                entry.recorded = true;
                entry.note_membership(now);
                self.arm(entry);
                true
            });
            if !fresh {
                continue;
            }
            loaded.insert(record.group_id.as_str());
            info!(
                group = %record.group_id,
                generation = record.generation.get(),
                members = record.members.len(),
                "group loaded from its record"
            );
        }
        for id in &ids {
            self.with_live_entry(id, |entry| {
                entry.has_offsets = true;
                // Offsets committed before this coordinator: they count from now.
                entry.offset_times.untimed = true;
                entry.offset_times.known_since = entry.offset_times.known_since.max(now);
                entry.note_membership(now);
                self.arm(entry);
            });
            loaded.insert(id.as_str());
        }
        Ok(loaded.len())
    }

    /// Runs `f` on the entry of `group` in the map (created if needed), never on a cell
    /// being removed: a remover marks its cell removed and takes it out of the map at
    /// once, so the next look finds the map without it.
    fn with_live_entry<T>(&self, group: &str, f: impl FnOnce(&mut GroupEntry) -> T) -> T {
        loop {
            let cell = self.group_or_insert(group);
            let mut entry = cell.lock();
            if !entry.removed {
                return f(&mut entry);
            }
            std::mem::drop(entry);
            std::thread::yield_now();
        }
    }

    /// Removes every group whose id `drop` accepts from this coordinator's memory — what a
    /// broker calls when it loses coordinator slots while it runs (`drop` says whether a
    /// group id hashes to one of the slots lost): another broker serves those groups now,
    /// loads them from the store and changes them there. Nothing is written to the store
    /// and nothing is deleted from it.
    ///
    /// Of each such group nothing stays in memory: its state, members, assignments, its
    /// tombstone (the generation a re-created group would continue from), every deadline
    /// (sessions, join and sync timeouts, the initial rebalance delay, consumer-protocol
    /// timers, Empty grace and offset retention) and its entries on the timer heap, so
    /// [`poll_timeout`](Self::poll_timeout) no longer counts them and no timer run ever
    /// acts on them. Every request parked in such a group (a JoinGroup waiting for its
    /// barrier, a SyncGroup waiting for the leader's) is answered at once with
    /// `Error::Storage` of kind [`StorageErrorKind::NotCoordinator`](crate::StorageErrorKind),
    /// which a broker answers as Kafka's `NOT_COORDINATOR` (16): the client finds the
    /// group's new coordinator and joins there.
    ///
    /// Afterwards, a call on such a group behaves as on a group this coordinator never
    /// knew (a JoinGroup would create it afresh, its generations starting over): a broker
    /// must stop routing the group's requests here first. [`load_where`](Self::load_where) loads it
    /// again from the store.
    ///
    /// What stays: the group's transactional offsets pending under a producer
    /// ([`txn_offset_commit`](Self::txn_offset_commit)). They are the transaction's, not
    /// the group's: they reach this coordinator through this broker's
    /// [`TransactionCoordinator`](crate::txn::TransactionCoordinator), which completes
    /// them (commit: written to the store, abort: dropped) when the transaction ends, or
    /// drops them when the transaction itself moves (its coordinator's
    /// [`unload_where`](crate::txn::TransactionCoordinator::unload_where)).
    /// Dropping them here would let a commit of the transaction complete without them.
    ///
    /// **Why async.** Each group is removed under its commit gate, held exclusively, as
    /// every other removal (expiry, DeleteGroups): so no commit, rebalance or record write
    /// of the group is half done when it goes, and a call that took the gate before finds
    /// the group removed when it looks again. The wait is for the group's calls in flight
    /// in the store, which refuses them once the slot moved (so it is short); groups are
    /// unloaded concurrently, one group's wait never delays another's. Dropping the future
    /// early leaves the groups it had not reached yet (each one is removed whole or not at
    /// all); call it again.
    ///
    /// `drop` is called with no lock of the coordinator held (it may call back into it),
    /// for the groups live when a pass starts; a few passes also take groups created while
    /// it runs. Returns how many live groups were dropped (tombstones are dropped too, but
    /// not counted).
    pub async fn unload_where(&self, drop: impl Fn(&str) -> bool) -> usize {
        let mut dropped = 0;
        let mut gone: HashSet<Arc<str>> = HashSet::new();
        // A call racing the unload may create a matching group meanwhile; a few passes take
        // those too, without letting a client that keeps creating one hold the caller.
        for _ in 0..UNLOAD_PASSES {
            let cells: Vec<Arc<GroupCell>> = {
                let live: Vec<Arc<GroupCell>> = self.read_groups().map.values().cloned().collect();
                live.into_iter().filter(|cell| drop(&cell.id)).collect()
            };
            if cells.is_empty() {
                break;
            }
            let runs = cells.iter().map(|cell| self.unload_group(cell));
            for (cell, removed) in cells.iter().zip(futures_util::future::join_all(runs).await) {
                if removed {
                    dropped += 1;
                    gone.insert(cell.id.clone());
                }
            }
        }
        // Tombstones, and the heap's entries of the groups gone (stale now: a removed cell
        // never arms again) and of any other matching group removed before.
        let candidates: Vec<Arc<str>> = {
            let tombstones: Vec<Arc<str>> = self.read_groups().tombstones.keys().cloned().collect();
            let timed = self
                .timers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .groups();
            tombstones.into_iter().chain(timed).collect()
        };
        gone.extend(candidates.into_iter().filter(|id| drop(id)));
        let purged = {
            let mut groups = self.write_groups();
            groups.tombstones.retain(|id, _| !gone.contains(id));
            // A group re-created since (a call racing the unload) keeps its entries: they
            // may be live. Holding the map's lock, no other can be created meanwhile.
            gone.retain(|id| !groups.map.contains_key(id));
            self.timers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove_groups(&gone)
        };
        info!(groups = dropped, timers = purged, "groups unloaded");
        dropped
    }

    /// Removes one group from memory under its exclusive gate, answering its parked
    /// requests; `false` if it was removed already (by a timer run, a delete, an unload).
    async fn unload_group(&self, cell: &Arc<GroupCell>) -> bool {
        let gate = cell.gate.clone().write_owned().await;
        let (group, generation) = {
            let mut entry = cell.lock();
            if entry.removed {
                return false;
            }
            entry.removed = true;
            entry.armed = None;
            entry.has_offsets = false;
            entry.empty_since = None;
            entry.recorded = false;
            entry.offset_times.forget(None);
            (entry.group.take(), entry.generation)
        };
        {
            // Taken out of the map with no tombstone: the group's generation is the store's
            // (and its next coordinator's) business now.
            let mut groups = self.write_groups();
            groups.remove_cell(cell);
            groups.tombstones.remove(&cell.id);
        }
        std::mem::drop(gate);
        if let Some(mut group) = group {
            group.answer_parked(&|| moved(&cell.id));
        }
        info!(
            group = &*cell.id,
            generation = generation.get(),
            "group unloaded: another coordinator serves it now"
        );
        true
    }
}
