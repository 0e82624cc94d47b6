//! The live state of a [`LogStore`](super::LogStore): what replaying the log gives, kept in
//! memory so that reads never touch the disk.
//!
//! Each group's offsets sit behind an `Arc`, so a snapshot of the whole state is a copy of
//! the group map only (one `Arc` per group); the writer copies a group's offsets
//! (`Arc::make_mut`) only the first time it changes them after a snapshot was taken.

use std::collections::BTreeMap;
use std::sync::Arc;

use coordinator_core::txn::TransactionRecord;
use coordinator_core::{CommittedOffsets, GroupRecord, OffsetAndMetadata, TopicPartition};

use super::record::{commit_size, group_size, transaction_size, Record};

/// Every group's offsets with their metadata, and every group's durable record.
#[derive(Clone, Debug, Default)]
pub(crate) struct Live {
    pub(crate) offsets: BTreeMap<String, Arc<CommittedOffsets>>,
    pub(crate) groups: BTreeMap<String, Arc<GroupRecord>>,
    /// Every transactional id's record.
    pub(crate) transactions: BTreeMap<String, Arc<TransactionRecord>>,
    /// About the bytes this state takes encoded (the sum of its records' sizes).
    pub(crate) bytes: u64,
    /// How many offsets are stored.
    pub(crate) count: u64,
}

impl Live {
    pub(crate) fn commit(&mut self, group: &str, tp: TopicPartition, o: OffsetAndMetadata) {
        let added = commit_size(group, &tp, &o) as u64;
        let new_metadata = o.metadata.len() as u64;
        let offsets = match self.offsets.get_mut(group) {
            Some(offsets) => offsets,
            None => self.offsets.entry(group.to_owned()).or_default(),
        };
        match Arc::make_mut(offsets).insert(tp, o) {
            Some(old) => {
                // The same group and partition: only the metadata's length differs.
                let replaced = added - new_metadata + old.metadata.len() as u64;
                self.bytes = self.bytes.saturating_sub(replaced) + added;
            }
            None => {
                self.bytes += added;
                self.count += 1;
            }
        }
    }

    pub(crate) fn delete_offset(&mut self, group: &str, tp: &TopicPartition) {
        let Some(offsets) = self.offsets.get_mut(group) else {
            return;
        };
        if !offsets.contains_key(tp) {
            return;
        }
        let map = Arc::make_mut(offsets);
        if let Some(old) = map.remove(tp) {
            self.bytes = self
                .bytes
                .saturating_sub(commit_size(group, tp, &old) as u64);
            self.count = self.count.saturating_sub(1);
        }
        if map.is_empty() {
            self.offsets.remove(group);
        }
    }

    pub(crate) fn delete_group_offsets(&mut self, group: &str) {
        if let Some(offsets) = self.offsets.remove(group) {
            for (tp, o) in offsets.iter() {
                self.bytes = self.bytes.saturating_sub(commit_size(group, tp, o) as u64);
            }
            self.count = self.count.saturating_sub(offsets.len() as u64);
        }
    }

    pub(crate) fn set_group(&mut self, group: &str, record: Option<GroupRecord>) {
        let old = match record {
            Some(record) => {
                self.bytes += group_size(&record) as u64;
                self.groups.insert(group.to_owned(), Arc::new(record))
            }
            None => self.groups.remove(group),
        };
        if let Some(old) = old {
            self.bytes = self.bytes.saturating_sub(group_size(&old) as u64);
        }
    }

    pub(crate) fn set_transaction(&mut self, id: &str, record: Option<TransactionRecord>) {
        let old = match record {
            Some(record) => {
                self.bytes += transaction_size(&record) as u64;
                self.transactions.insert(id.to_owned(), Arc::new(record))
            }
            None => self.transactions.remove(id),
        };
        if let Some(old) = old {
            self.bytes = self.bytes.saturating_sub(transaction_size(&old) as u64);
        }
    }

    /// Applies one replayed record; `false` for a record that has no place in a log (a
    /// snapshot's start or end).
    pub(crate) fn apply(&mut self, record: Record) -> bool {
        match record {
            Record::Commit { group, tp, offset } => self.commit(&group, tp, offset),
            Record::DeleteOffset { group, tp } => self.delete_offset(&group, &tp),
            Record::DeleteGroupOffsets { group } => self.delete_group_offsets(&group),
            Record::Group(record) => {
                let group = record.group_id.clone();
                self.set_group(&group, Some(record));
            }
            Record::GroupTombstone { group } => self.set_group(&group, None),
            Record::Transaction(record) => {
                let id = record.transactional_id.clone();
                self.set_transaction(&id, Some(record));
            }
            Record::TransactionTombstone { id } => self.set_transaction(&id, None),
            Record::SnapshotStart { .. } | Record::SnapshotEnd { .. } => return false,
        }
        true
    }
}
