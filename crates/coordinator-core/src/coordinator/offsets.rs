//! Committed offsets: Kafka's OffsetCommit for any kind of group, direct commits, fetches
//! and OffsetDelete (Kafka's `OffsetMetadataManager`). Every write holds the group's commit
//! gate until the store has made it visible: see [`concurrency`](super::concurrency).

use std::collections::btree_map;
use std::sync::Arc;

use tracing::info;

use super::{not_found, require, Coordinator, GroupEntry, Stats};
use crate::error::Error;
use crate::group::classic::OffsetCommitRequest;
use crate::group::CommitAuthority;
use crate::ports::{CommitFence, OffsetStore};
use crate::types::{CommittedOffsets, OffsetAndMetadata, OffsetMap, TopicPartition};

/// Committed offsets of every kind of group, as Kafka's OffsetCommit, OffsetFetch and
/// OffsetDelete reach them (`coordinator.offsets()`). The group's kind validates the
/// request's [`CommitAuthority`].
#[derive(Clone, Copy, Debug)]
pub struct Offsets<'a> {
    coordinator: &'a Coordinator,
}

impl Coordinator {
    /// Kafka's offset calls: OffsetCommit, OffsetFetch and OffsetDelete, for any kind.
    pub fn offsets(&self) -> Offsets<'_> {
        Offsets { coordinator: self }
    }

    /// Commits offsets for `group` straight to the store, with no membership or generation
    /// checks: the path of a consumer with a manual assignment (docs/rules.md#commit-direct).
    /// The group's offsets then follow the group lifecycle (see
    /// [`handle_timeout`](Self::handle_timeout)).
    pub async fn commit_direct(&self, group_id: &str, offsets: &OffsetMap) -> Result<(), Error> {
        self.commit_direct_batch(group_id, Batch::Plain(offsets))
            .await
    }

    /// [`commit_direct`](Self::commit_direct) with each offset's leader epoch and metadata
    /// (Kafka's `OffsetAndMetadata`; the commit time is set here).
    ///
    /// Errors: `INVALID_ARGUMENT` (empty group id, negative offset),
    /// `OFFSET_METADATA_TOO_LARGE`, `STORAGE_ERROR`.
    pub async fn commit_direct_with_metadata(
        &self,
        group_id: &str,
        offsets: &CommittedOffsets,
    ) -> Result<(), Error> {
        self.commit_direct_batch(group_id, Batch::Full(offsets))
            .await
    }

    async fn commit_direct_batch(&self, group_id: &str, batch: Batch<'_>) -> Result<(), Error> {
        require("group id", group_id)?;
        if !batch.check(group_id, self.config.offset_metadata_max_bytes)? {
            return Ok(());
        }
        let gate = self.noted_gate(group_id, batch).await;
        let now = self.clock.now_ms();
        batch
            .write(
                &*self.store,
                &self.stats,
                group_id,
                now,
                CommitFence::gate(gate),
            )
            .await
    }

    /// The commit gate of `group_id` (created if needed) taken shared, with `batch` noted
    /// in the group's bookkeeping: what an unfenced commit holds while its write runs.
    pub(super) async fn noted_gate(
        &self,
        group_id: &str,
        batch: Batch<'_>,
    ) -> tokio::sync::OwnedRwLockReadGuard<()> {
        loop {
            let cell = self.group_or_insert(group_id);
            let gate = cell.gate.clone().read_owned().await;
            let mut entry = cell.lock();
            if entry.removed {
                continue;
            }
            self.note_commit(&mut entry, batch);
            return gate;
        }
    }

    /// The committed next offset of `tp` for `group` (any group id, as Kafka's OffsetFetch).
    pub async fn committed(
        &self,
        group_id: &str,
        tp: &TopicPartition,
    ) -> Result<Option<i64>, Error> {
        require("group id", group_id)?;
        Ok(self.store.committed(group_id, tp).await?)
    }

    /// Every committed offset of `group`.
    pub async fn committed_offsets(&self, group_id: &str) -> Result<OffsetMap, Error> {
        require("group id", group_id)?;
        Ok(self.store.list(group_id).await?)
    }

    /// The committed offset of `tp` for `group` with its leader epoch, metadata and commit
    /// time (as far as the store keeps them: see
    /// [`OffsetStore::keeps_metadata`](crate::OffsetStore::keeps_metadata)).
    pub async fn committed_with_metadata(
        &self,
        group_id: &str,
        tp: &TopicPartition,
    ) -> Result<Option<OffsetAndMetadata>, Error> {
        require("group id", group_id)?;
        Ok(self.store.list_with_metadata(group_id).await?.remove(tp))
    }

    /// The bookkeeping of every commit about to be written, under the group's state lock:
    /// the store may hold offsets of the group now, committed at the clock's time (for
    /// their expiry). A commit changes no membership: a group's Empty clock runs on.
    pub(super) fn note_commit(&self, entry: &mut GroupEntry, batch: Batch<'_>) {
        let now = self.clock.now_ms();
        entry.has_offsets = true;
        entry.offset_times.committed(batch.partitions(), now);
        if entry.empty_since.is_none() && !entry.has_members() {
            entry.empty_since = Some(now);
        }
        self.arm(entry);
    }

    /// Kafka's OffsetCommit; see [`Offsets::commit`].
    #[deprecated(since = "0.2.0", note = "use `coordinator.offsets().commit(req)`")]
    pub async fn commit_offsets(&self, req: &OffsetCommitRequest) -> Result<(), Error> {
        self.offsets().commit(req).await
    }

    /// Kafka's OffsetDelete; see [`Offsets::delete`].
    #[deprecated(
        since = "0.2.0",
        note = "use `coordinator.offsets().delete(group_id, partitions)`"
    )]
    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Result<(), Error>)>, Error> {
        self.offsets().delete(group_id, partitions).await
    }
}

/// The offsets of one commit: bare offsets (the chapter's calls), or Kafka's
/// `OffsetAndMetadata` (the wire, and the `_with_metadata` calls). Bare offsets go to the
/// store's `commit` as they are, so the chapter's hot path copies nothing.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Batch<'a> {
    Plain(&'a OffsetMap),
    Full(&'a CommittedOffsets),
}

/// The partitions of a [`Batch`], in order (no allocation on the commit path).
pub(crate) enum Partitions<'a> {
    Plain(btree_map::Keys<'a, TopicPartition, i64>),
    Full(btree_map::Keys<'a, TopicPartition, OffsetAndMetadata>),
}

impl<'a> Iterator for Partitions<'a> {
    type Item = &'a TopicPartition;

    fn next(&mut self) -> Option<&'a TopicPartition> {
        match self {
            Partitions::Plain(k) => k.next(),
            Partitions::Full(k) => k.next(),
        }
    }
}

impl Batch<'_> {
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Batch::Plain(o) => o.is_empty(),
            Batch::Full(o) => o.is_empty(),
        }
    }

    pub(crate) fn partitions(&self) -> Partitions<'_> {
        match self {
            Batch::Plain(o) => Partitions::Plain(o.keys()),
            Batch::Full(o) => Partitions::Full(o.keys()),
        }
    }

    /// The checks every commit makes before the store sees it: no negative offset
    /// (`INVALID_ARGUMENT`), no metadata longer than `max` bytes (Kafka's
    /// `offset.metadata.max.bytes`: `OFFSET_METADATA_TOO_LARGE`). Returns whether there is
    /// anything to write.
    pub(crate) fn check(&self, group_id: &str, max: usize) -> Result<bool, Error> {
        let negative = |tp: &TopicPartition, offset: i64| {
            Error::invalid("offset", format!("{tp}: offset {offset} is negative"))
        };
        match self {
            Batch::Plain(o) => {
                if let Some((tp, &offset)) = o.iter().find(|(_, &v)| v < 0) {
                    return Err(negative(tp, offset));
                }
            }
            Batch::Full(o) => {
                for (tp, m) in o.iter() {
                    if m.offset < 0 {
                        return Err(negative(tp, m.offset));
                    }
                    if m.metadata.len() > max {
                        return Err(Error::OffsetMetadataTooLarge {
                            group: group_id.to_string(),
                            partition: tp.clone(),
                            size: m.metadata.len(),
                            max,
                        });
                    }
                }
            }
        }
        Ok(!self.is_empty())
    }

    /// Writes the batch, the full form stamped with the commit time `now`, and counts its
    /// offsets in `stats` once written.
    pub(crate) async fn write(
        self,
        store: &dyn OffsetStore,
        stats: &Stats,
        group_id: &str,
        now: u64,
        fence: CommitFence,
    ) -> Result<(), Error> {
        let count = match self {
            Batch::Plain(o) => o.len(),
            Batch::Full(o) => o.len(),
        };
        match self {
            Batch::Plain(o) => store.commit(group_id, o, fence).await?,
            Batch::Full(o) => {
                let mut stamped = o.clone();
                for m in stamped.values_mut() {
                    m.commit_timestamp_ms = now;
                }
                store
                    .commit_with_metadata(group_id, &stamped, fence)
                    .await?;
            }
        }
        stats.committed(count);
        Ok(())
    }
}

impl Offsets<'_> {
    /// Kafka's OffsetCommit, for a group of any kind (the caller checked that the topics and
    /// partitions exist, as Kafka's front does). The group's kind validates the request's
    /// authority; a commit without a generation or member epoch
    /// ([`is_memberless`](CommitAuthority::is_memberless): plain, or a member id a client
    /// made up with generation or epoch −1) is allowed while the group is Empty or absent,
    /// and creates a simple group; once the group has members, a member id it does not know
    /// is `UNKNOWN_MEMBER`. An empty group id is a group id like any
    /// other, as in Kafka.
    ///
    /// Errors, applying to every partition: `GROUP_ID_NOT_FOUND` (a member's commit for a
    /// group that does not exist; Kafka before OffsetCommit v9 says `ILLEGAL_GENERATION`),
    /// `UNKNOWN_MEMBER`, `FENCED_INSTANCE_ID`, `ILLEGAL_GENERATION`, `REBALANCE_IN_PROGRESS`
    /// (CompletingRebalance: commits are allowed while PreparingRebalance, when eager
    /// clients commit before revoking), `NOT_PARTITION_OWNER` (only with
    /// [`check_classic_commit_ownership`](crate::CoordinatorBuilder::check_classic_commit_ownership)),
    /// `INCONSISTENT_GROUP_PROTOCOL` (a chapter group with members), `INVALID_ARGUMENT`
    /// (a negative offset), `STORAGE_ERROR`.
    ///
    /// Fencing as for the chapter's commits: the commit holds its group's commit gate until
    /// its write is visible, so no commit checked against generation G lands after the join
    /// barrier installed G+1.
    pub async fn commit(self, req: &OffsetCommitRequest) -> Result<(), Error> {
        let c = self.coordinator;
        let group_id = req.group_id.as_str();
        let authority = &req.authority;
        let batch = Batch::Full(&req.offsets);
        let anything = batch.check(group_id, c.config.offset_metadata_max_bytes)?;
        let (cell, gate) = loop {
            let cell = match c.group(group_id) {
                Some(cell) => cell,
                // Kafka: a commit without a generation or member epoch, whatever member id
                // it names, creates a simple group.
                None if authority.is_memberless() => c.group_or_insert(group_id),
                None => return Err(not_found(group_id)),
            };
            let gate = cell.gate.clone().read_owned().await;
            let mut entry = cell.lock();
            if entry.removed {
                continue;
            }
            let now = c.clock.now_ms();
            let GroupEntry {
                generation, group, ..
            } = &mut *entry;
            match group {
                // A simple group is Empty: Kafka's ClassicGroup accepts a commit without a
                // generation, whatever member id it names, and knows no member.
                None => {
                    if !authority.is_memberless() {
                        return Err(Error::unknown_member(group_id, authority.member_id()));
                    }
                }
                Some(group) => {
                    let ctx = c.ctx(now, generation, group.kind());
                    group.validate_offset_commit(authority, &mut req.offsets.keys(), &ctx)?;
                }
            }
            if !anything {
                return Ok(());
            }
            c.note_commit(&mut entry, batch);
            drop(entry);
            break (cell, gate);
        };
        drop(cell);
        let now = c.clock.now_ms();
        batch
            .write(&*c.store, &c.stats, group_id, now, CommitFence::gate(gate))
            .await
    }

    /// [`commit`](Self::commit), and the committed offsets of `cleared` forgotten, under the
    /// same validation of the request's authority (every partition, cleared ones included,
    /// goes through the group's `validate_offset_commit`). A wire front maps Kafka's
    /// negative committed offset here: Kafka stores one (kafkajs commits −2 or −1, its
    /// default offset, when a fetch meets OFFSET_OUT_OF_RANGE, and resolves it on its next
    /// OffsetFetch), while this crate keeps no negative offset (`INVALID_ARGUMENT`); a
    /// partition without a committed offset answers −1, which such a client resolves the
    /// same way. With nothing to clear this is [`commit`](Self::commit).
    ///
    /// Errors: [`commit`](Self::commit)'s. The group's gate is held exclusively from the
    /// validation to the last write, so nothing lands between them; a failed delete writes
    /// none of the offsets.
    pub async fn commit_clearing(
        self,
        req: &OffsetCommitRequest,
        cleared: &[TopicPartition],
    ) -> Result<(), Error> {
        if cleared.is_empty() {
            return self.commit(req).await;
        }
        let c = self.coordinator;
        let group_id = req.group_id.as_str();
        let authority = &req.authority;
        let batch = Batch::Full(&req.offsets);
        let anything = batch.check(group_id, c.config.offset_metadata_max_bytes)?;
        let cell = match c.group(group_id) {
            Some(cell) => cell,
            None if authority.is_memberless() => c.group_or_insert(group_id),
            None => return Err(not_found(group_id)),
        };
        let gate = Arc::new(cell.gate.clone().write_owned().await);
        {
            let mut entry = cell.lock();
            if entry.removed {
                return Err(not_found(group_id));
            }
            let now = c.clock.now_ms();
            let GroupEntry {
                generation, group, ..
            } = &mut *entry;
            match group {
                None => {
                    if !authority.is_memberless() {
                        return Err(Error::unknown_member(group_id, authority.member_id()));
                    }
                }
                Some(group) => {
                    let ctx = c.ctx(now, generation, group.kind());
                    let mut all = req.offsets.keys().chain(cleared.iter());
                    group.validate_offset_commit(authority, &mut all, &ctx)?;
                }
            }
        }
        c.store
            .delete(group_id, Some(cleared), CommitFence::exclusive(&gate))
            .await?;
        cell.lock().offset_times.forget(Some(cleared));
        if anything {
            c.note_commit(&mut cell.lock(), batch);
            let now = c.clock.now_ms();
            batch
                .write(
                    &*c.store,
                    &c.stats,
                    group_id,
                    now,
                    CommitFence::exclusive(&gate),
                )
                .await?;
        }
        drop(gate);
        Ok(())
    }

    /// Kafka's OffsetFetch: every committed offset of `group` with its metadata (as far as
    /// the store keeps it). Any group id may be read, the empty one included, as in Kafka; a
    /// group nobody committed for has no offsets. The group's kind validates `authority`.
    pub async fn fetch(
        self,
        group_id: &str,
        authority: &CommitAuthority,
    ) -> Result<CommittedOffsets, Error> {
        let c = self.coordinator;
        if let Some(cell) = c.group(group_id) {
            let entry = cell.lock();
            if let Some(group) = entry.group.as_ref().filter(|_| !entry.removed) {
                group.validate_offset_fetch(authority)?;
            }
        }
        Ok(c.store.list_with_metadata(group_id).await?)
    }

    /// Kafka's OffsetDelete: deletes the committed offsets of `partitions`. Returns each
    /// partition's result, in request order.
    ///
    /// Errors of the whole request: `GROUP_ID_NOT_FOUND`; `NON_EMPTY_GROUP` (68) for a group
    /// with members whose protocol type is not `consumer` (its subscriptions are unknown);
    /// `STORAGE_ERROR`. Per partition: `GROUP_SUBSCRIBED_TO_TOPIC` (86) while a member
    /// subscribes to the topic.
    pub async fn delete(
        self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Result<(), Error>)>, Error> {
        self.delete_partitions(group_id, partitions, true).await
    }

    /// Deletes the committed offsets of `partitions` whatever the group's state and its
    /// members' subscriptions: what Kafka does for every group when the partitions' topic is
    /// deleted (`GroupMetadataManager.cleanupGroupMetadata`). Errors: `GROUP_ID_NOT_FOUND`,
    /// `STORAGE_ERROR`.
    pub async fn delete_of_deleted_topic(
        self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> Result<(), Error> {
        self.delete_partitions(group_id, partitions, false)
            .await
            .map(|_| ())
    }

    /// [`delete`](Self::delete), checking the group's kind and subscriptions if `checked`.
    async fn delete_partitions(
        self,
        group_id: &str,
        partitions: &[TopicPartition],
        checked: bool,
    ) -> Result<Vec<(TopicPartition, Result<(), Error>)>, Error> {
        let c = self.coordinator;
        let cell = c.group(group_id).ok_or_else(|| not_found(group_id))?;
        // Exclusive: a commit running beside the delete could be acknowledged and then
        // deleted, or land after it while the group is marked as having no offsets (and be
        // removed with the group, orphaned in the store).
        let gate = Arc::new(cell.gate.clone().write_owned().await);
        let results: Vec<(TopicPartition, Result<(), Error>)> = {
            let entry = cell.lock();
            if entry.removed {
                return Err(not_found(group_id));
            }
            if let Some(group) = entry.group.as_ref().filter(|_| checked) {
                group.validate_offset_delete(group_id)?;
            }
            let subscribed = |topic: &str| {
                checked
                    && entry
                        .group
                        .as_ref()
                        .is_some_and(|g| g.is_subscribed_to(topic))
            };
            partitions
                .iter()
                .map(|tp| {
                    let result = if subscribed(tp.topic()) {
                        Err(Error::GroupSubscribedToTopic {
                            group: group_id.to_string(),
                            topic: tp.topic().to_string(),
                        })
                    } else {
                        Ok(())
                    };
                    (tp.clone(), result)
                })
                .collect()
        };
        let doomed: Vec<TopicPartition> = results
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(tp, _)| tp.clone())
            .collect();
        if !doomed.is_empty() {
            c.store
                .delete(group_id, Some(&doomed), CommitFence::exclusive(&gate))
                .await?;
            c.stats.deleted(doomed.len());
            info!(
                group = group_id,
                partitions = doomed.len(),
                "offsets deleted"
            );
            let empty = c.store.list(group_id).await?.is_empty();
            let mut entry = cell.lock();
            entry.offset_times.forget(Some(&doomed));
            if empty {
                entry.has_offsets = false;
                entry.offset_times.forget(None);
            }
            c.arm(&mut entry);
        }
        drop(gate);
        Ok(results)
    }
}
