//! The group lifecycle: Empty groups removed after their grace period, offsets retained
//! after a group becomes Empty, DeleteGroups, listing, and loading the groups a store
//! already holds offsets for.

use std::sync::Arc;

use tracing::info;

use super::{not_found, Coordinator, GroupCell};
use crate::error::Error;
use crate::group::{GroupRecord, ListedGroup};
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

    /// Registers every group the store holds offsets for, as an Empty group whose offsets'
    /// retention starts now (the coordinator does not know when they were committed). Call it once after building a coordinator over a store with
    /// history, so that those offsets expire and those groups are listed; until then the
    /// coordinator only knows the groups used since it was built.
    ///
    /// Error: `STORAGE_ERROR` if the store cannot list its groups.
    pub async fn load(&self) -> Result<usize, Error> {
        let ids = self.store.groups().await?;
        let now = self.clock.now_ms();
        for id in &ids {
            let cell = self.group_or_insert(id);
            let mut entry = cell.lock();
            entry.has_offsets = true;
            // Offsets committed before this coordinator: they count from now.
            entry.offset_times.untimed = true;
            entry.offset_times.known_since = entry.offset_times.known_since.max(now);
            entry.note_membership(now);
            self.arm(&mut entry);
        }
        Ok(ids.len())
    }
}
