//! The cluster facade: one object that wires the coordinator, the assignor, the offset store
//! and the partition log, for applications, tests and labs.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use consumer::{AutoOffsetReset, Consumer, ConsumerConfig, NewRecord};
use coordinator_core::{
    Clock, Coordinator, ExpiredMember, MonotonicClock, StorageError, StorageErrorKind,
    TopicPartition, DEFAULT_SESSION_TIMEOUT_MS,
};
use offset_store::JsonFileStore;
use partition_log::MemoryLog;

use crate::error::ClusterError;

/// The offset file inside a cluster's data directory.
pub const OFFSETS_FILE: &str = "offsets.json";

/// Options of a [`Cluster`]; see [`Cluster::builder`].
pub struct ClusterBuilder {
    clock: Arc<dyn Clock>,
    session_timeout_ms: u64,
}

impl fmt::Debug for ClusterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterBuilder")
            .field("now_ms", &self.clock.now_ms())
            .field("session_timeout_ms", &self.session_timeout_ms)
            .finish()
    }
}

impl ClusterBuilder {
    /// The clock of session deadlines and record timestamps (default: a
    /// [`MonotonicClock`]). Labs and tests pass a `ManualClock` and keep a clone to move time.
    #[must_use]
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The consumer session timeout (default [`DEFAULT_SESSION_TIMEOUT_MS`]).
    #[must_use]
    pub fn session_timeout_ms(mut self, ms: u64) -> Self {
        self.session_timeout_ms = ms;
        self
    }

    /// Opens a cluster over `data_dir`, creating the directory if needed. Committed offsets
    /// are read from and written to `<data_dir>/offsets.json`, so a cluster reopened over the
    /// same directory sees every offset committed before.
    ///
    /// Errors: `STORAGE_ERROR` if the directory cannot be created or the offset file is
    /// unreadable or malformed; `INVALID_ARGUMENT` for a zero session timeout.
    pub fn open(self, data_dir: impl AsRef<Path>) -> Result<Cluster, ClusterError> {
        let data_dir = data_dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&data_dir).map_err(|e| {
            StorageError::new(
                StorageErrorKind::Io,
                format!("cannot create data directory {}", data_dir.display()),
            )
            .with_source(e)
        })?;
        let store = JsonFileStore::open(data_dir.join(OFFSETS_FILE))?;
        let log = Arc::new(MemoryLog::with_clock(self.clock.clone()));
        // The chapter's round-robin is the default; Kafka's strategies are registered after
        // it so consumers can negotiate them.
        let mut builder = Coordinator::builder(
            Arc::new(store),
            log.clone(),
            Arc::new(assignor::MiniKafkaRoundRobinAssignor),
        );
        for strategy in assignor::all() {
            if strategy.name() != assignor::names::DEFAULT {
                builder = builder.assignor(strategy);
            }
        }
        let coordinator = builder
            .clock(self.clock.clone())
            .session_timeout_ms(self.session_timeout_ms)
            .build()?;
        Ok(Cluster {
            coordinator: Arc::new(coordinator),
            log,
            clock: self.clock,
            data_dir,
            next_member: Mutex::new(1),
        })
    }
}

/// A single-process cluster: topics and records in a [`MemoryLog`], committed offsets in a
/// JSON file in a data directory, and one [`Coordinator`] over both.
///
/// This is the **composition root**: the one place that picks concrete adapters (the
/// MiniKafka round-robin assignor as the default strategy, with Kafka's `range`,
/// `roundrobin`, `sticky` and `cooperative-sticky` registered for consumers that negotiate
/// them; the JSON offset store; the in-memory log) and hands them
/// to the core. It lives in `labs` because only the composition root may depend on several
/// adapter crates at once; every other crate sees the others only through the core's ports.
///
/// The log is also the coordinator's topic metadata, so the topics the coordinator assigns
/// are exactly the topics consumers can read. Topics and records live in memory only;
/// committed offsets are what survives a reopen (as in the chapter, where the durable object
/// is one JSON file).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// use consumer::AutoOffsetReset;
/// use labs::Cluster;
///
/// let dir = tempfile::tempdir()?;
/// let cluster = Cluster::open(dir.path())?;
/// cluster.create_topic("orders", 2)?;
/// cluster.append("orders", 0, "first order")?;
///
/// let mut worker = cluster.consumer("workers", AutoOffsetReset::Earliest)?;
/// assert_eq!(worker.member_id(), "member-1");
/// worker.subscribe(&["orders"]).await?;
/// let records = worker.poll(10).await?;
/// assert_eq!(&*records[0].value, b"first order");
/// worker.commit().await?;
///
/// // Reopening the data directory restores what was committed. A data directory has one
/// // owner at a time, so everything holding the first cluster's store goes first.
/// drop(worker);
/// drop(cluster);
/// let reopened = Cluster::open(dir.path())?;
/// let committed = reopened.coordinator().committed_offsets("workers").await?;
/// assert_eq!(committed.values().copied().collect::<Vec<_>>(), [1, 0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })
/// # }
/// ```
pub struct Cluster {
    coordinator: Arc<Coordinator>,
    log: Arc<MemoryLog>,
    clock: Arc<dyn Clock>,
    data_dir: PathBuf,
    /// The number of the next member id; advanced only when a consumer is handed out.
    next_member: Mutex<u64>,
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("data_dir", &self.data_dir)
            .field("topics", &self.log)
            .field("coordinator", &self.coordinator)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Options: clock and session timeout.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder {
            clock: Arc::new(MonotonicClock::new()),
            session_timeout_ms: DEFAULT_SESSION_TIMEOUT_MS,
        }
    }

    /// Opens a cluster over `data_dir` with the default options; see [`ClusterBuilder::open`].
    pub fn open(data_dir: impl AsRef<Path>) -> Result<Cluster, ClusterError> {
        Cluster::builder().open(data_dir)
    }

    /// Creates a topic. Kafka's rules: a name of 1 to 249 characters of `[A-Za-z0-9._-]`,
    /// not `.` or `..`, and at least one partition.
    ///
    /// Errors: `INVALID_TOPIC_EXCEPTION` (17), `INVALID_PARTITIONS` (37),
    /// `TOPIC_ALREADY_EXISTS` (36). Nothing changes on error.
    pub fn create_topic(&self, name: &str, partitions: u32) -> Result<(), ClusterError> {
        Ok(self.log.create_topic(name, partitions)?)
    }

    /// Appends a record (a `&str`, a `String` or a [`NewRecord`]) and returns its offset.
    ///
    /// Error: `UNKNOWN_TOPIC_OR_PARTITION`.
    pub fn append(
        &self,
        topic: &str,
        partition: u32,
        record: impl Into<NewRecord>,
    ) -> Result<i64, ClusterError> {
        Ok(self
            .log
            .append(&TopicPartition::new(topic, partition), record)?)
    }

    /// A new consumer of `group` with the next member id: `member-1`, `member-2`, … in the
    /// order consumers are handed out (a refused request uses up no id).
    ///
    /// Error: `INVALID_ARGUMENT` for an empty group id.
    pub fn consumer(
        &self,
        group: &str,
        auto_offset_reset: AutoOffsetReset,
    ) -> Result<Consumer, ClusterError> {
        self.consumer_with(group, |config| config.auto_offset_reset(auto_offset_reset))
    }

    /// A consumer for `group` with the next member id, configured by `configure` (for
    /// example to list assignment strategies). The member id set by the facade wins.
    pub fn consumer_with(
        &self,
        group: &str,
        configure: impl FnOnce(ConsumerConfig) -> ConsumerConfig,
    ) -> Result<Consumer, ClusterError> {
        let mut next = self
            .next_member
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let member = format!("member-{}", *next);
        let mut config = configure(ConsumerConfig::new(group, member.clone()));
        config.member_id = member;
        config.group_id = group.to_string();
        let consumer = Consumer::new(config, self.coordinator.clone(), self.log.clone())?;
        *next += 1;
        Ok(consumer)
    }

    /// Removes every member whose session has expired (`now > deadline`) and rebalances each
    /// group that lost members once. Nothing expires by itself: a caller drives this.
    pub async fn expire_group_members(&self) -> Vec<ExpiredMember> {
        self.coordinator.expire_members().await
    }

    /// The coordinator, for group inspection (`describe`, `state`, `committed_offsets`).
    pub fn coordinator(&self) -> &Arc<Coordinator> {
        &self.coordinator
    }

    /// The partition log, for retention and high-watermark experiments.
    pub fn log(&self) -> &Arc<MemoryLog> {
        &self.log
    }

    /// The clock the cluster reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }
}
