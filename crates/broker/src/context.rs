//! What every request handler shares: the log, the coordinator, the settings and the
//! broker's own addresses.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use std::time::{SystemTime, UNIX_EPOCH};
use uuid::Uuid;

use coordinator_core::txn::{ProducerIdSource, TransactionCoordinator};
use coordinator_core::{Clock, Coordinator, LogError, TopicMetadata};
use partition_log::PartitionLog;

use crate::api::group_configs::GroupConfigs;
use crate::api::topic_configs::TopicConfigs;
use crate::config::{BrokerConfig, SecurityProtocol};
use crate::ownership::Ownership;
use crate::producers::Producers;

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
    /// Every listener, with the address clients are told to connect to through it (a
    /// connection is answered with its own listener's, see [`Session::endpoint`]).
    ///
    /// [`Session::endpoint`]: crate::auth::Session::endpoint
    pub(crate) endpoints: Vec<Arc<Endpoint>>,
    /// The ACLs and their judge, with `--authorizer`; `None` lets every principal do
    /// anything.
    pub(crate) authorizer: Option<Arc<crate::acl::Authorizer>>,
    pub(crate) cluster_id: String,
    /// The configs clients set on topics (CreateTopics, AlterConfigs), kept where the broker
    /// keeps its state (see [`TopicConfigs`]).
    pub(crate) topic_configs: TopicConfigs,
    /// The configs clients set on groups (IncrementalAlterConfigs on a GROUP resource), in
    /// force in the coordinator and kept where the broker keeps its state.
    pub(crate) group_configs: GroupConfigs,
    /// The SCRAM credentials DescribeUserScramCredentials and AlterUserScramCredentials
    /// serve: the SASL listeners' users, or (without a SASL listener) a store of their own,
    /// as Kafka keeps credentials whatever its listeners.
    pub(crate) scram_users: Arc<crate::auth::Users>,
    /// Every partition's producer state: sequences, open transactions, markers (shared
    /// with the transaction coordinator's marker writer).
    pub(crate) producers: Arc<Producers>,
    /// New producer ids, for idempotent and transactional producers alike.
    pub(crate) producer_ids: Arc<ProducerIds>,
    /// The transaction coordinator.
    pub(crate) txn: Arc<TransactionCoordinator>,
    /// The share groups' partitions and sessions this broker serves (KIP-932).
    pub(crate) share: Arc<crate::share::ShareState>,
    /// Which broker coordinates each group and transactional id and leads each partition:
    /// this one for all, unless several brokers share a PostgreSQL database.
    pub(crate) ownership: Arc<Ownership>,
    /// The faults a test set and the record of the requests received (see
    /// [`crate::faults`]).
    pub(crate) faults: Arc<crate::faults::Faults>,
    /// The memory of the request frames being read, shared by every connection of every
    /// listener (`--queued-max-request-bytes`); `None`: unbounded.
    pub(crate) frame_memory: Option<Arc<crate::memory_pool::MemoryPool>>,
}

/// The broker's producer-id allocator: one counter, started from the start time so that ids
/// stay apart across restarts (producer ids only need to be unique while records live).
#[derive(Debug)]
pub(crate) struct ProducerIds(AtomicI64);

impl ProducerIds {
    pub(crate) fn new() -> ProducerIds {
        ProducerIds(AtomicI64::new(
            i64::try_from(WallClock.now_ms()).unwrap_or(0),
        ))
    }

    /// An allocator handing out ids from `first` on: with several brokers over PostgreSQL,
    /// each process takes its own block (see [`cluster_block`](Self::cluster_block)).
    pub(crate) fn starting_at(first: i64) -> ProducerIds {
        ProducerIds(AtomicI64::new(first))
    }

    /// The first id of the block of registration `incarnation` (unique per broker process
    /// over one database, drawn from a sequence): `2^42 + incarnation * 2^32`. Blocks of 2^32
    /// ids never overlap, and all lie above the ids of a broker of before (started from the
    /// clock's milliseconds, below 2^42 until the year 2109).
    pub(crate) fn cluster_block(incarnation: i64) -> i64 {
        (1i64 << 42).saturating_add(incarnation.saturating_mul(1i64 << 32))
    }

    /// Moves the counter past `at_least` (a producer id a restart loaded).
    pub(crate) fn skip_past(&self, at_least: i64) {
        self.0
            .fetch_max(at_least.saturating_add(1), Ordering::Relaxed);
    }
}

impl ProducerIdSource for ProducerIds {
    fn next_producer_id(&self) -> i64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

/// One listener as clients see it: its security protocol, the address it is bound to, and the
/// host and port Metadata and FindCoordinator tell the clients that came in through it.
#[derive(Debug)]
pub(crate) struct Endpoint {
    pub(crate) protocol: SecurityProtocol,
    pub(crate) address: SocketAddr,
    pub(crate) host: String,
    pub(crate) port: i32,
}

/// What the server builds besides the coordinator and passes to [`Context::new`].
#[derive(Debug)]
pub(crate) struct Transactions {
    pub(crate) producers: Arc<Producers>,
    pub(crate) producer_ids: Arc<ProducerIds>,
    pub(crate) txn: Arc<TransactionCoordinator>,
}

impl Context {
    pub(crate) fn new(
        config: BrokerConfig,
        log: Arc<dyn PartitionLog>,
        coordinator: Arc<Coordinator>,
        transactions: Transactions,
        endpoints: Vec<Arc<Endpoint>>,
        authorizer: Option<Arc<crate::acl::Authorizer>>,
        sasl: Option<Arc<crate::auth::Authenticator>>,
    ) -> Context {
        Context {
            ownership: Arc::new(Ownership::alone(config.node_id)),
            faults: Arc::new(
                crate::faults::Faults::new(config.requests_recorded)
                    .with_coordinator(coordinator.clone())
                    .with_log(log.clone()),
            ),
            frame_memory: config
                .queued_max_request_bytes()
                .map(crate::memory_pool::MemoryPool::new),
            config,
            log,
            coordinator,
            endpoints,
            authorizer,
            cluster_id: "consumer-groups-broker".to_string(),
            topic_configs: TopicConfigs::default(),
            group_configs: GroupConfigs::default(),
            scram_users: sasl.map_or_else(Default::default, |a| a.users.clone()),
            producers: transactions.producers,
            producer_ids: transactions.producer_ids,
            txn: transactions.txn,
            share: Arc::default(),
        }
    }

    /// This context with `users` as the SCRAM credentials the credential APIs describe and
    /// alter (the SASL listeners' own, or a store of their own without one).
    pub(crate) fn with_scram_users(mut self, users: Arc<crate::auth::Users>) -> Context {
        self.scram_users = users;
        self
    }

    /// This context with the manual clock's timers (`--manual-clock`) for its faults'
    /// [`advance_clock`](crate::faults::Faults::advance_clock).
    pub(crate) fn with_manual_timers(
        mut self,
        timers: Option<Arc<crate::manual_clock::ManualTimers>>,
    ) -> Context {
        if let Some(timers) = timers {
            self.faults = Arc::new(
                crate::faults::Faults::new(self.config.requests_recorded)
                    .with_coordinator(self.coordinator.clone())
                    .with_log(self.log.clone())
                    .with_manual_timers(timers),
            );
        }
        self
    }

    /// This context with `group_configs` (the ones kept where the broker keeps its state,
    /// already set on the coordinator) instead of none.
    pub(crate) fn with_group_configs(mut self, group_configs: GroupConfigs) -> Context {
        self.group_configs = group_configs;
        self
    }

    /// This context with `share`, the share-partitions kept where the broker keeps its state.
    pub(crate) fn with_share(mut self, share: crate::share::ShareState) -> Context {
        self.share = Arc::new(share);
        self
    }

    /// This context with `ownership` (a broker of a cluster over PostgreSQL) instead of a
    /// broker alone.
    pub(crate) fn with_ownership(mut self, ownership: Arc<Ownership>) -> Context {
        self.ownership = ownership;
        self
    }

    /// This context with `topic_configs` (the ones kept where the broker keeps its state)
    /// instead of none.
    pub(crate) fn with_topic_configs(mut self, topic_configs: TopicConfigs) -> Context {
        self.topic_configs = topic_configs;
        self
    }

    /// Topic `name`'s id (Kafka's topic id, which Metadata v10+ and the consumer group
    /// protocol name topics by): the log's, drawn at the topic's creation (and kept across
    /// restarts by the segment log); for a log that keeps no ids, one derived from the name
    /// (FNV-1a, 128 bits), stable and never Kafka's reserved zero id.
    pub(crate) fn topic_id(&self, name: &str) -> Uuid {
        self.log
            .topic_id(name)
            .map_or_else(|| derived_topic_id(name), Uuid::from_bytes)
    }

    /// The name of the topic whose id is `id`, if there is one.
    pub(crate) async fn topic_by_id(&self, id: Uuid) -> Option<String> {
        let topics = self.log.topics().await.ok()?;
        topics
            .into_iter()
            .map(|(name, _)| name)
            .find(|name| self.topic_id(name) == id)
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
        if !(self.config.auto_create_topics && allow_create) || is_internal_topic(topic) {
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

/// Kafka's internal topics (`Topic.INTERNAL_TOPICS`, and the KRaft metadata log). This
/// broker keeps what they hold in its stores, not as topics: a client can neither create one
/// (CreateTopics answers INVALID_REQUEST, auto-creation does not happen) nor append to one
/// (Produce answers INVALID_TOPIC_EXCEPTION, as Kafka's `ReplicaManager` does).
pub(crate) const INTERNAL_TOPICS: [&str; 4] = [
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
    "__cluster_metadata",
];

/// Whether `name` is one of [`INTERNAL_TOPICS`].
pub(crate) fn is_internal_topic(name: &str) -> bool {
    INTERNAL_TOPICS.contains(&name)
}

/// A topic id derived from its name: FNV-1a over 128 bits, never zero.
fn derived_topic_id(name: &str) -> Uuid {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let hash = name
        .bytes()
        .fold(OFFSET, |h, b| (h ^ u128::from(b)).wrapping_mul(PRIME));
    Uuid::from_u128(hash.max(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_topic_ids_are_stable_distinct_and_never_reserved() {
        assert_eq!(derived_topic_id("orders"), derived_topic_id("orders"));
        assert_ne!(derived_topic_id("orders"), derived_topic_id("orders2"));
        assert_ne!(derived_topic_id(""), Uuid::nil());
        assert_ne!(derived_topic_id("a"), Uuid::from_u128(1));
    }
}
