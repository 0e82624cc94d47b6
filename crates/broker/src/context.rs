//! What every request handler shares: the log, the coordinator, the settings and the
//! broker's own address.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use coordinator_core::{Clock, Coordinator, LogError, TopicMetadata};
use partition_log::PartitionLog;

use crate::config::BrokerConfig;

/// The broker's node id in Metadata and FindCoordinator (a single broker, as in a Kafka
/// development cluster with `node.id=0`).
pub(crate) const NODE_ID: i32 = 0;

/// Milliseconds since the Unix epoch: record timestamps are wall-clock time in Kafka.
#[derive(Debug, Default)]
pub(crate) struct WallClock;

impl Clock for WallClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

#[derive(Debug)]
pub(crate) struct Context {
    pub(crate) config: BrokerConfig,
    /// The partition log, behind its port: handlers never see which log it is.
    pub(crate) log: Arc<dyn PartitionLog>,
    pub(crate) coordinator: Arc<Coordinator>,
    /// The host and port clients are told to connect to.
    pub(crate) host: String,
    pub(crate) port: i32,
    pub(crate) cluster_id: String,
    next_producer_id: AtomicI64,
}

impl Context {
    pub(crate) fn new(
        config: BrokerConfig,
        log: Arc<dyn PartitionLog>,
        coordinator: Arc<Coordinator>,
        host: String,
        port: u16,
    ) -> Context {
        // Producer ids only need to be unique while records live, i.e. for this process;
        // starting from the start time keeps them apart across restarts as well.
        let first_pid = i64::try_from(WallClock.now_ms()).unwrap_or(0);
        Context {
            config,
            log,
            coordinator,
            host,
            port: i32::from(port),
            cluster_id: "consumer-groups-broker".to_string(),
            next_producer_id: AtomicI64::new(first_pid),
        }
    }

    pub(crate) fn new_producer_id(&self) -> i64 {
        self.next_producer_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The partition count of `topic`, creating the topic first when auto-creation is on and
    /// `allow_create` (Metadata's `allow_auto_topic_creation`) says so.
    pub(crate) async fn topic_or_create(
        &self,
        topic: &str,
        allow_create: bool,
    ) -> Result<Option<u32>, LogError> {
        if let Some(n) = self.log.partition_count(topic) {
            return Ok(Some(n));
        }
        if !(self.config.auto_create_topics && allow_create) {
            return Ok(None);
        }
        match self
            .log
            .create_topic(topic, self.config.num_partitions)
            .await
        {
            Ok(()) => {
                tracing::info!(
                    topic,
                    partitions = self.config.num_partitions,
                    "topic auto-created"
                );
            }
            // Another connection created it in between: that is what we wanted.
            Err(LogError::TopicAlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
        Ok(self.log.partition_count(topic))
    }
}
