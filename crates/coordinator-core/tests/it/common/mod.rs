//! Hand-written fakes for the coordinator's ports, shared by the integration tests.
#![allow(
    dead_code,
    unreachable_pub,
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
pub use coordinator_core::testing::{FaultyStore, StoreOp};
use coordinator_core::{
    validate_offsets, AssignError, Assignment, AssignmentInput, Assignor, CommitFence, Coordinator,
    GroupRecord, ManualClock, OffsetMap, OffsetStore, StorageError, TopicIndex, TopicMetadata,
    TopicPartition,
};

/// Topic metadata the test can change while the coordinator runs.
#[derive(Default)]
pub struct Topics(RwLock<BTreeMap<String, u32>>);

impl Topics {
    pub fn with(topics: &[(&str, u32)]) -> Arc<Self> {
        let t = Topics::default();
        for (name, n) in topics {
            t.set(name, *n);
        }
        Arc::new(t)
    }
    pub fn set(&self, name: &str, partitions: u32) {
        self.0.write().unwrap().insert(name.to_string(), partitions);
    }
    pub fn delete(&self, name: &str) {
        self.0.write().unwrap().remove(name);
    }
}

impl TopicMetadata for Topics {
    fn partition_count(&self, topic: &str) -> Option<u32> {
        self.0.read().unwrap().get(topic).copied()
    }
    fn topic_names(&self) -> Vec<String> {
        self.0.read().unwrap().keys().cloned().collect()
    }
}

/// Per topic, partition p goes to the (p mod n)-th subscribed member: enough structure for
/// the coordinator's tests without depending on the assignor crate. Counts its calls.
pub struct ModuloAssignor {
    pub name: &'static str,
    pub calls: AtomicU32,
}

impl ModuloAssignor {
    pub fn named(name: &'static str) -> Arc<Self> {
        Arc::new(ModuloAssignor {
            name,
            calls: AtomicU32::new(0),
        })
    }
}

impl Assignor for ModuloAssignor {
    fn name(&self) -> &str {
        self.name
    }
    fn assign(&self, input: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut out = Assignment::new(input);
        for t in 0..input.topics().len() as TopicIndex {
            let eligible: Vec<u32> = (0..input.member_count() as u32)
                .filter(|&m| input.is_subscribed(m, t))
                .collect();
            if eligible.is_empty() {
                continue;
            }
            for (p, owner) in out.topic_owners_mut(t).iter_mut().enumerate() {
                *owner = eligible[p % eligible.len()];
            }
        }
        Ok(out)
    }
}

/// A plain in-memory store: what the tests put behind their [`FaultyStore`] hooks.
#[derive(Default)]
pub struct MapStore {
    pub data: Mutex<BTreeMap<String, OffsetMap>>,
    /// Whether it keeps group records (in `records`); off by default, as the JSON store.
    pub keep_groups: bool,
    pub records: Mutex<BTreeMap<String, GroupRecord>>,
    /// Transaction records (kept when `keep_groups` is on).
    pub transactions: Mutex<BTreeMap<String, coordinator_core::txn::TransactionRecord>>,
}

impl MapStore {
    /// A store that keeps group records too (as the memory and log stores do).
    pub fn keeping_groups() -> Self {
        MapStore {
            keep_groups: true,
            ..MapStore::default()
        }
    }
}

/// The tests' store: an in-memory store behind the shared fault hooks (fail, hold, count
/// and inspect calls; see [`FaultyStore`]).
pub type TestStore = FaultyStore<MapStore>;

#[async_trait]
impl OffsetStore for MapStore {
    async fn committed(
        &self,
        group: &str,
        tp: &TopicPartition,
    ) -> Result<Option<i64>, StorageError> {
        Ok(self
            .data
            .lock()
            .unwrap()
            .get(group)
            .and_then(|m| m.get(tp))
            .copied())
    }
    async fn commit(
        &self,
        group: &str,
        offsets: &OffsetMap,
        _fence: CommitFence,
    ) -> Result<(), StorageError> {
        validate_offsets(group, offsets)?;
        if offsets.is_empty() {
            return Ok(());
        }
        let mut data = self.data.lock().unwrap();
        let entry = data.entry(group.to_string()).or_default();
        for (tp, o) in offsets {
            entry.insert(tp.clone(), *o);
        }
        Ok(())
    }
    async fn delete<'a>(
        &self,
        group: &str,
        partitions: Option<&'a [TopicPartition]>,
        _fence: CommitFence,
    ) -> Result<(), StorageError> {
        let mut data = self.data.lock().unwrap();
        match partitions {
            None => {
                data.remove(group);
            }
            Some(gone) => {
                if let Some(offsets) = data.get_mut(group) {
                    for tp in gone {
                        offsets.remove(tp);
                    }
                    if offsets.is_empty() {
                        data.remove(group);
                    }
                }
            }
        }
        Ok(())
    }
    async fn groups(&self) -> Result<Vec<String>, StorageError> {
        Ok(self.data.lock().unwrap().keys().cloned().collect())
    }
    async fn list(&self, group: &str) -> Result<OffsetMap, StorageError> {
        Ok(self
            .data
            .lock()
            .unwrap()
            .get(group)
            .cloned()
            .unwrap_or_default())
    }
    fn keeps_groups(&self) -> bool {
        self.keep_groups
    }
    async fn write_group(
        &self,
        group: &str,
        record: Option<&GroupRecord>,
        _fence: CommitFence,
    ) -> Result<(), StorageError> {
        if !self.keep_groups {
            return Ok(());
        }
        let mut records = self.records.lock().unwrap();
        match record {
            Some(r) => records.insert(group.to_string(), r.clone()),
            None => records.remove(group),
        };
        Ok(())
    }
    async fn load_groups(&self) -> Result<Vec<GroupRecord>, StorageError> {
        Ok(self.records.lock().unwrap().values().cloned().collect())
    }
    fn keeps_transactions(&self) -> bool {
        self.keep_groups
    }
    async fn write_transaction(
        &self,
        id: &str,
        record: Option<&coordinator_core::txn::TransactionRecord>,
        _fence: CommitFence,
    ) -> Result<(), StorageError> {
        if !self.keep_groups {
            return Ok(());
        }
        let mut txns = self.transactions.lock().unwrap();
        match record {
            Some(r) => txns.insert(id.to_string(), r.clone()),
            None => txns.remove(id),
        };
        Ok(())
    }
    async fn load_transactions(
        &self,
    ) -> Result<Vec<coordinator_core::txn::TransactionRecord>, StorageError> {
        Ok(self
            .transactions
            .lock()
            .unwrap()
            .values()
            .cloned()
            .collect())
    }
}

pub struct Fixture {
    pub clock: ManualClock,
    pub topics: Arc<Topics>,
    pub store: Arc<TestStore>,
    pub assignor: Arc<ModuloAssignor>,
    pub coordinator: Coordinator,
}

/// A coordinator with a manual clock, a 100 ms session, topic `orders` (4 partitions) and
/// `payments` (1 partition).
pub fn fixture() -> Fixture {
    let clock = ManualClock::new();
    let topics = Topics::with(&[("orders", 4), ("payments", 1)]);
    let store = Arc::new(TestStore::default());
    let assignor = ModuloAssignor::named("modulo");
    let coordinator = Coordinator::builder(store.clone(), topics.clone(), assignor.clone())
        .clock(Arc::new(clock.clone()))
        .session_timeout_ms(100)
        .build()
        .unwrap();
    Fixture {
        clock,
        topics,
        store,
        assignor,
        coordinator,
    }
}

pub fn tp(topic: &str, p: u32) -> TopicPartition {
    TopicPartition::new(topic, p)
}

pub fn offsets(entries: &[(&str, u32, i64)]) -> OffsetMap {
    entries.iter().map(|&(t, p, o)| (tp(t, p), o)).collect()
}

pub fn tps(list: &[(&str, u32)]) -> Vec<TopicPartition> {
    list.iter().map(|&(t, p)| tp(t, p)).collect()
}

/// A small seeded generator (xorshift64*), so every random test replays from its seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Reads `name` from the environment as a count, or `default`.
pub fn env_count(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
