//! The unit tests' fixture: a coordinator over the in-memory offset store and the default
//! round-robin assignor, and a [`MemoryLog`] that is also the coordinator's topic metadata.

use std::sync::Arc;

use assignor::MiniKafkaRoundRobinAssignor;
use coordinator_core::{Coordinator, ManualClock, OffsetStore, TopicPartition};
use offset_store::MemoryStore;

use crate::{AutoOffsetReset, Consumer, ConsumerConfig};
use partition_log::MemoryLog;

/// A coordinator and a log with topic `t` of `partitions` partitions, sharing a manual clock.
pub(crate) struct Fixture {
    pub(crate) coordinator: Arc<Coordinator>,
    pub(crate) log: Arc<MemoryLog>,
}

impl Fixture {
    pub(crate) fn new(partitions: u32) -> Self {
        Fixture::with_store(partitions, Arc::new(MemoryStore::new()))
    }

    pub(crate) fn with_store(partitions: u32, store: Arc<dyn OffsetStore>) -> Self {
        let clock = ManualClock::new();
        let log = Arc::new(MemoryLog::with_clock(Arc::new(clock.clone())));
        log.create_topic("t", partitions).expect("topic t");
        let coordinator =
            Coordinator::builder(store, log.clone(), Arc::new(MiniKafkaRoundRobinAssignor))
                .clock(Arc::new(clock))
                .build()
                .expect("coordinator");
        Fixture {
            coordinator: Arc::new(coordinator),
            log,
        }
    }

    pub(crate) fn consumer(&self, member: &str, reset: AutoOffsetReset) -> Consumer {
        let config = ConsumerConfig::new("g", member).auto_offset_reset(reset);
        Consumer::new(config, self.coordinator.clone(), self.log.clone()).expect("consumer")
    }

    /// Appends `n` records to partition `p` of `t`.
    pub(crate) fn fill(&self, p: u32, n: usize) {
        for i in 0..n {
            self.log
                .append(&tp(p), format!("{p}:{i}"))
                .expect("append to t");
        }
    }
}

pub(crate) fn tp(p: u32) -> TopicPartition {
    TopicPartition::new("t", p)
}
