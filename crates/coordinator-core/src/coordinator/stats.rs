//! What the coordinator counts of its own work, for a broker's metrics: rebalances by kind of
//! group, offsets committed, expired and deleted. Events a front cannot see from outside (a
//! JoinGroup that completes a barrier and installs a generation, a heartbeat that bumps a
//! group epoch, a session that expires, offsets that pass their retention) are counted where
//! they happen, with one relaxed atomic add each; [`Coordinator::stats`] reads them all.
//!
//! The counts start at zero with the coordinator and only grow (they wrap at `u64::MAX`,
//! which no broker reaches). They are not durable: a restarted broker counts from zero, as
//! Kafka's meters do.

use std::sync::atomic::{AtomicU64, Ordering};

use super::Coordinator;
use crate::group::GroupKind;

/// A snapshot of the coordinator's counts (see [`Coordinator::stats`]), each named after the
/// Kafka metric it feeds (`kafka.server:type=group-coordinator-metrics,name=…-count`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct CoordinatorStats {
    /// Generations installed in groups of Kafka's classic protocol and of the chapter's
    /// kind: a classic join barrier completed (its JoinGroup answered with a new generation),
    /// a chapter member joined, left or expired. Kafka's `group-rebalance-count`.
    pub classic_rebalances: u64,
    /// Classic rebalances completed: the leader's assignment installed and the group Stable
    /// (Kafka's `group-completed-rebalance-count`); every generation of a chapter group, which
    /// is assigned and Stable at once.
    pub classic_completed_rebalances: u64,
    /// Group epochs bumped in consumer-protocol groups (KIP-848; Kafka's
    /// `consumer-group-rebalance-count`): a member joined, left, expired or changed its
    /// subscription, or the topics' metadata changed.
    pub consumer_rebalances: u64,
    /// Group epochs bumped in share groups (KIP-932; Kafka's `share-group-rebalance-count`).
    pub share_rebalances: u64,
    /// Offsets committed (one per partition of every commit that reached the store:
    /// OffsetCommit, TxnOffsetCommit and the chapter's commits). Kafka's
    /// `offset-commit-count`.
    pub offset_commits: u64,
    /// Offsets deleted because their retention passed (Kafka's `offset-expiration-count`).
    pub offset_expirations: u64,
    /// Offsets deleted by OffsetDelete, or because their topic was deleted (Kafka's
    /// `offset-deletion-count`). DeleteGroups' deletions are not counted: the store deletes
    /// a group's offsets without counting them.
    pub offset_deletions: u64,
    /// Members removed because their session expired, of every kind of group.
    pub member_expirations: u64,
}

/// The live counters behind [`CoordinatorStats`]: relaxed atomics, each written where its
/// event happens.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    classic_rebalances: AtomicU64,
    classic_completed_rebalances: AtomicU64,
    consumer_rebalances: AtomicU64,
    share_rebalances: AtomicU64,
    offset_commits: AtomicU64,
    offset_expirations: AtomicU64,
    offset_deletions: AtomicU64,
    member_expirations: AtomicU64,
}

fn add(counter: &AtomicU64, n: u64) {
    if n > 0 {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

impl Stats {
    /// `n` generations (or group epochs) installed in a group of `kind`.
    pub(crate) fn rebalanced(&self, kind: GroupKind, n: u64) {
        match kind {
            GroupKind::Classic => add(&self.classic_rebalances, n),
            GroupKind::Chapter => {
                add(&self.classic_rebalances, n);
                add(&self.classic_completed_rebalances, n);
            }
            GroupKind::Consumer => add(&self.consumer_rebalances, n),
            GroupKind::Share => add(&self.share_rebalances, n),
            GroupKind::Simple => {}
        }
    }

    /// A classic group's leader assignment installed: the group is Stable.
    pub(crate) fn completed_rebalance(&self) {
        add(&self.classic_completed_rebalances, 1);
    }

    /// `n` offsets reached the store in a commit.
    pub(crate) fn committed(&self, n: usize) {
        add(&self.offset_commits, n as u64);
    }

    /// `n` offsets expired.
    pub(crate) fn expired(&self, n: usize) {
        add(&self.offset_expirations, n as u64);
    }

    /// `n` offsets deleted by request.
    pub(crate) fn deleted(&self, n: usize) {
        add(&self.offset_deletions, n as u64);
    }

    /// `n` members' sessions expired.
    pub(crate) fn members_expired(&self, n: usize) {
        add(&self.member_expirations, n as u64);
    }

    fn snapshot(&self) -> CoordinatorStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CoordinatorStats {
            classic_rebalances: get(&self.classic_rebalances),
            classic_completed_rebalances: get(&self.classic_completed_rebalances),
            consumer_rebalances: get(&self.consumer_rebalances),
            share_rebalances: get(&self.share_rebalances),
            offset_commits: get(&self.offset_commits),
            offset_expirations: get(&self.offset_expirations),
            offset_deletions: get(&self.offset_deletions),
            member_expirations: get(&self.member_expirations),
        }
    }
}

impl Coordinator {
    /// What the coordinator has counted since it was built: rebalances by kind of group,
    /// offsets committed, expired and deleted, members expired (see [`CoordinatorStats`]).
    /// Cheap: a handful of atomic loads, no lock; each count is exact, the snapshot is not
    /// taken at one instant across counts.
    pub fn stats(&self) -> CoordinatorStats {
        self.stats.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_kind_and_reads_back() {
        let s = Stats::default();
        assert_eq!(s.snapshot(), CoordinatorStats::default());
        s.rebalanced(GroupKind::Classic, 2);
        s.rebalanced(GroupKind::Chapter, 1);
        s.rebalanced(GroupKind::Consumer, 3);
        s.rebalanced(GroupKind::Share, 1);
        s.rebalanced(GroupKind::Simple, 5);
        s.completed_rebalance();
        s.committed(4);
        s.expired(2);
        s.deleted(1);
        s.members_expired(3);
        assert_eq!(
            s.snapshot(),
            CoordinatorStats {
                classic_rebalances: 3,
                classic_completed_rebalances: 2,
                consumer_rebalances: 3,
                share_rebalances: 1,
                offset_commits: 4,
                offset_expirations: 2,
                offset_deletions: 1,
                member_expirations: 3,
            }
        );
    }
}
