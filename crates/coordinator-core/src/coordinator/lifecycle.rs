//! The group lifecycle: Empty groups removed after their grace period, offsets retained
//! after a group becomes Empty, DeleteGroups, listing, and loading the groups a store
//! already holds offsets for.

use std::collections::BTreeSet;
use std::sync::Arc;

use tracing::info;

use super::{not_found, Coordinator, GroupCell};
use crate::error::Error;
use crate::group::{self, GroupKind, GroupRecord, ListedGroup};
use crate::ports::CommitFence;

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
    /// were loaded.
    ///
    /// Error: `STORAGE_ERROR` if the store cannot list its groups or records.
    pub async fn load(&self) -> Result<usize, Error> {
        let records = if self.durable_groups {
            self.store.load_groups().await?
        } else {
            Vec::new()
        };
        let ids = self.store.groups().await?;
        let now = self.clock.now_ms();
        let mut loaded = BTreeSet::new();
        for record in &records {
            let Some(group) = group::from_record(record, now) else {
                continue;
            };
            let cell = self.group_or_insert(&record.group_id);
            let mut entry = cell.lock();
            if entry.group.is_some() {
                continue;
            }
            entry.generation = entry.generation.max(record.generation);
            entry.group = Some(group);
            entry.recorded = true;
            entry.note_membership(now);
            self.arm(&mut entry);
            loaded.insert(record.group_id.as_str());
            info!(
                group = %record.group_id,
                generation = record.generation.get(),
                members = record.members.len(),
                "group loaded from its record"
            );
        }
        for id in &ids {
            let cell = self.group_or_insert(id);
            let mut entry = cell.lock();
            entry.has_offsets = true;
            // Offsets committed before this coordinator: they count from now.
            entry.offset_times.untimed = true;
            entry.offset_times.known_since = entry.offset_times.known_since.max(now);
            entry.note_membership(now);
            self.arm(&mut entry);
            loaded.insert(id.as_str());
        }
        Ok(loaded.len())
    }
}
