//! Groups' durable records through the store (Kafka's group metadata in
//! `__consumer_offsets`): written when a kind changes what a restart must know, removed by a
//! tombstone with the group, and loaded at [`load`](Coordinator::load). Only over a store
//! that [keeps groups](crate::OffsetStore::keeps_groups); over any other, nothing here runs.
//!
//! Every write runs under the group's commit gate, held exclusively, and builds its record
//! under that gate: two writes of one group never race, so the store's latest record is the
//! latest state written.

use std::sync::Arc;

use tokio::sync::OwnedRwLockWriteGuard;
use tracing::warn;

use super::{Coordinator, GroupCell};
use crate::error::StorageError;
use crate::ports::CommitFence;

impl Coordinator {
    /// Writes `cell`'s record if its kind marked it due (a classic group that became Empty
    /// in a new generation; a consumer-protocol group whose members, epochs or assignments
    /// changed). The caller holds the gate.
    ///
    /// # Errors
    /// The store's, logged here too. The group's state in memory is already what changed;
    /// the next record written replaces the store's older one.
    pub(crate) async fn write_due_record(
        &self,
        cell: &Arc<GroupCell>,
        gate: &Arc<OwnedRwLockWriteGuard<()>>,
    ) -> Result<(), StorageError> {
        if !self.durable_groups {
            return Ok(());
        }
        let record = {
            let mut entry = cell.lock();
            let generation = entry.generation;
            if entry.removed {
                return Ok(());
            }
            let Some(group) = entry.group.as_mut() else {
                return Ok(());
            };
            if !group.take_record_due() {
                return Ok(());
            }
            group.record(generation, &self.assignors)
        };
        match self
            .store
            .write_group(&cell.id, Some(&record), CommitFence::exclusive(gate))
            .await
        {
            Ok(()) => {
                cell.lock().recorded = true;
                Ok(())
            }
            Err(e) => {
                warn!(group = &*cell.id, error = %e, "the group's record could not be stored");
                if let Some(group) = cell.lock().group.as_mut() {
                    group.mark_record_due();
                }
                Err(e)
            }
        }
    }

    /// Removes `cell`'s record from the store (a tombstone), if the store may hold one.
    /// The caller holds the gate.
    ///
    /// # Errors
    /// The store's; then the record stays.
    pub(crate) async fn write_tombstone(
        &self,
        cell: &Arc<GroupCell>,
        gate: &Arc<OwnedRwLockWriteGuard<()>>,
    ) -> Result<(), StorageError> {
        if !self.durable_groups || !cell.lock().recorded {
            return Ok(());
        }
        self.store
            .write_group(&cell.id, None, CommitFence::exclusive(gate))
            .await?;
        cell.lock().recorded = false;
        Ok(())
    }
}
