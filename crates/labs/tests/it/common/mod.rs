//! What the facade tests share: a cluster over a fresh temporary directory and a manual clock.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use consumer::{AutoOffsetReset, Consumer, Record};
use coordinator_core::{ManualClock, TopicPartition};
use labs::Cluster;
use tempfile::TempDir;

pub(crate) const SESSION_TIMEOUT_MS: u64 = 100;

/// A cluster with a manual clock and a 100 ms session. Keep the `TempDir` alive as long as
/// the cluster.
pub(crate) struct TestCluster {
    pub(crate) dir: TempDir,
    pub(crate) clock: ManualClock,
    pub(crate) cluster: Cluster,
}

impl TestCluster {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        let cluster = open(&dir, &clock);
        TestCluster {
            dir,
            clock,
            cluster,
        }
    }

    /// Closes the cluster and opens a new one over the same directory.
    pub(crate) fn reopen(self) -> Self {
        let TestCluster {
            dir,
            clock,
            cluster,
        } = self;
        let reopening = reopening();
        drop(cluster);
        let cluster = open(&dir, &clock);
        drop(reopening);
        TestCluster {
            dir,
            clock,
            cluster,
        }
    }

    /// Creates `topic` with `partitions` partitions holding `per_partition` records each.
    pub(crate) fn topic(&self, topic: &str, partitions: u32, per_partition: usize) {
        self.cluster.create_topic(topic, partitions).unwrap();
        for p in 0..partitions {
            for i in 0..per_partition {
                self.cluster
                    .append(topic, p, format!("{topic}-{p} #{i}"))
                    .unwrap();
            }
        }
    }

    pub(crate) fn consumer(&self, reset: AutoOffsetReset) -> Consumer {
        self.cluster.consumer("workers", reset).unwrap()
    }
}

fn open(dir: &TempDir, clock: &ManualClock) -> Cluster {
    Cluster::builder()
        .clock(clock.clone())
        .session_timeout_ms(SESSION_TIMEOUT_MS)
        .open(dir.path())
        .unwrap()
}

pub(crate) fn tp(topic: &str, partition: u32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

/// `(partition, offset)` of each record.
pub(crate) fn at(records: &[Record]) -> Vec<(u32, i64)> {
    records.iter().map(|r| (r.partition, r.offset)).collect()
}

/// The offsets of the records.
pub(crate) fn offsets(records: &[Record]) -> Vec<i64> {
    records.iter().map(|r| r.offset).collect()
}

/// A small seeded generator (xorshift64*), so every random test replays from its seed.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03 | 1)
    }
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub(crate) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Spawning a process copies every open file descriptor into the child until it execs, the
/// lock file of every open offset store included: a test that closes a store and reopens it
/// over the same directory at that moment finds its own lock still held ("is in use"). In
/// one test binary, tests that spawn a process hold [`spawning`] until the child has exited
/// (`spawn` may return a moment before the child has closed its copies; without the guard
/// 11 of 30 runs of the spawning and reopening modules failed, holding it only across
/// `spawn` 4 of 30), and code that closes and reopens a store on a real disk holds
/// [`reopening`] from the close to the open.
static SPAWN: RwLock<()> = RwLock::new(());

/// Held from spawning a process until it has exited (see [`SPAWN`]).
pub(crate) fn spawning() -> RwLockWriteGuard<'static, ()> {
    SPAWN.write().unwrap_or_else(PoisonError::into_inner)
}

/// Held while closing a store and opening it again (see [`SPAWN`]).
pub(crate) fn reopening() -> RwLockReadGuard<'static, ()> {
    SPAWN.read().unwrap_or_else(PoisonError::into_inner)
}
