//! [`PostgresLog`]: the `partition-log` crate's [`PartitionLog`] port over PostgreSQL, a
//! durable log that several processes can share.
//!
//! # What it stores (migration 2)
//!
//! - `topics`: one row per topic: `name`, `topic_id` (16 random bytes drawn by the database
//!   at creation, `uuid_send(gen_random_uuid())`, never all zeros), `partitions`.
//! - `partitions`: one row per partition: `topic`, `partition`, `log_start`,
//!   `high_watermark` (the offset the next record gets; every record below it is readable).
//! - `batches`: one row per appended batch that still holds a readable record: `topic`,
//!   `partition`, `base_offset`, `last_offset`, `max_timestamp`, `timestamps` (every
//!   record's, in offset order, for `ListOffsets` by timestamp and `MAX_TIMESTAMP`) and
//!   `encoded`, the bytes the appender's closure built, stored as given (`bytea`).
//!
//! Migration 6 adds what compaction needs: a batch a pass rewrote lists the offsets of the
//! records it kept (`offsets`, NULL for a batch whose records run on from its base offset)
//! and may carry a `delete_horizon`; `partitions.cleaned_offset` is where the last pass left
//! the partition compacted.
//!
//! Deleting a topic deletes its partitions and batches (`ON DELETE CASCADE`).
//!
//! # Compaction
//!
//! [`compact`](PartitionLog::compact) makes the decisions `partition-log`'s
//! [`Cleaning`] makes for the other logs, over three sweeps of the compactable batches in
//! pages of [`READ_PAGE`] (the transactions, the keys of the batches written since the last
//! pass, the outcome of each batch): there are no segments, so every batch below the stable
//! offset whose records have passed the minimum lag is compactable. Each page's deletions
//! and rewrites are one transaction, fenced as appends are; appends never wait for a pass.
//!
//! # Appends
//!
//! An append is one transaction: `SELECT … FOR UPDATE` of the partition's row (the row lock
//! serialises the appends of one partition, across processes), the batch's base offset is
//! the row's high watermark, the closure builds the encoding from it, then one statement
//! inserts the batch, advances the high watermark and queues a `NOTIFY` on
//! [`APPENDS_CHANNEL`], which PostgreSQL delivers at `COMMIT`. A failed append rolls back:
//! nothing changes and no reader is woken.
//!
//! # Long polls
//!
//! [`appends`](PartitionLog::appends) is a local watch. This process's appends, deletions
//! and growths bump it after their commit. A dedicated connection (not from the pool)
//! `LISTEN`s on [`APPENDS_CHANNEL`] and bumps it on every notification from another
//! `PostgresLog` (another process, or another log of this one), so a long poll here wakes
//! when another process appends, without polling the database. If that connection drops,
//! a task reconnects with a bounded backoff ([`RECONNECT_MIN`] doubling up to
//! [`RECONNECT_MAX`]) and bumps the watch once it listens again: notifications sent while
//! it was away are lost, so every waiting reader re-checks.
//!
//! # Where it differs from `SegmentLog`
//!
//! - Retention removes whole batches (as `MemoryLog` does), not segments; nothing runs it
//!   in the background: the caller calls [`apply_retention`](PartitionLog::apply_retention).
//! - Durability is PostgreSQL's: an append is durable when its `COMMIT` returns (no flush
//!   interval of its own). A connection lost after `COMMIT` was sent leaves the append
//!   undecided: the caller gets a storage error, yet the batch may be there.
//! - Every read is a query: `read_batches` reads in pages of [`READ_PAGE`] batches in one
//!   `REPEATABLE READ` snapshot, so it may fetch up to `READ_PAGE - 1` batches beyond the
//!   budget and drop them.
//! - [`TopicMetadata`]'s synchronous answers come from a cache loaded at connect and
//!   updated by this log's own creations, deletions and growths, and refreshed by every
//!   [`topics`](PartitionLog::topics) call; a topic another process creates is seen there
//!   after the next `topics()`. Appends, reads and bounds always ask the database.
//!
//! Every database failure is a [`LogError::Storage`] whose source is the crate's
//! [`StorageError`], of kind [`Io`](StorageErrorKind::Io) for a lost connection (retriable)
//! and [`Other`](StorageErrorKind::Other) for a refusal.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::task::Poll;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use coordinator_core::{
    validate_topic_name, Bytes, Clock, LogError, NewRecord, OutOfRange, StorageError,
    StorageErrorKind, TopicMetadata, TopicPartition,
};
use deadpool_postgres::Pool;
use partition_log::compaction::{
    due, lag_passed, Cleaning, Compaction, CompactionPolicy, Outcome, RecordFormat, Stored,
};
use partition_log::{Batch, BatchRead, EncodeBatch, PartitionLog};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_postgres::tls::NoTlsStream;
use tokio_postgres::{AsyncMessage, Client, Connection, IsolationLevel, NoTls, Socket};
use tracing::{info, warn};

use crate::cluster::SlotFence;
use crate::error::{db_error, pool_error};
use crate::{build_pool, migrations, with_defaults, DEFAULT_CONNECT_TIMEOUT};

/// The channel of the notifications: every `PostgresLog` on a database `LISTEN`s on it, and
/// every append, topic deletion, partition growth and log-start move `NOTIFY`s it. The
/// payload is `<sender's instance id> <topic> [<partition>]`.
pub const APPENDS_CHANNEL: &str = "partition_log_appends";

/// The key of the advisory lock that serialises topic creations, deletions and growths
/// (the bytes of `cgtopic1`), so that the name checks see every topic.
pub const TOPICS_LOCK: i64 = 0x6367_746f_7069_6331;

/// How many batches a read fetches per query.
pub const READ_PAGE: i64 = 32;

/// The first wait before the `LISTEN` connection is re-opened.
pub const RECONNECT_MIN: Duration = Duration::from_millis(100);

/// The longest wait between two attempts to re-open the `LISTEN` connection.
pub const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// Milliseconds since the Unix epoch: record timestamps and retention are wall-clock times.
#[derive(Debug)]
struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// What the cache knows of a topic.
#[derive(Clone, Copy, Debug)]
struct CachedTopic {
    id: [u8; 16],
    partitions: u32,
}

/// The topic cache, with a count of this log's own changes (so that a refresh read before
/// a change does not undo it).
#[derive(Debug, Default)]
struct Cache {
    topics: BTreeMap<String, CachedTopic>,
    changes: u64,
}

/// The [`PartitionLog`] port over PostgreSQL; see the [module docs](self). Cheap to share
/// (`Arc<dyn PartitionLog>`); every call takes a connection from the log's pool.
pub struct PostgresLog {
    pool: Pool,
    clock: Arc<dyn Clock>,
    cache: RwLock<Cache>,
    appended: Arc<watch::Sender<u64>>,
    /// This log's id in the notifications it sends, so its listener skips its own.
    instance: String,
    listener: JoinHandle<()>,
    /// With several brokers over the database: the slots this process owns; every append
    /// checks one (see [`with_fence`](Self::with_fence)).
    fence: Option<SlotFence>,
    /// Compaction passes are one at a time in this process (across processes, the fence:
    /// only a partition's leader compacts it).
    cleaning: tokio::sync::Mutex<()>,
}

impl fmt::Debug for PostgresLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = self.pool.status();
        f.debug_struct("PostgresLog")
            .field("instance", &self.instance)
            .field("topics", &self.read_cache().topics.len())
            .field("pool_max_size", &status.max_size)
            .field("pool_size", &status.size)
            .finish()
    }
}

impl Drop for PostgresLog {
    fn drop(&mut self) {
        // Closes the LISTEN connection.
        self.listener.abort();
    }
}

fn bump(appended: &watch::Sender<u64>) {
    appended.send_modify(|n| *n = n.wrapping_add(1));
}

/// Bumps the watch when dropped: armed just before a `COMMIT`, so readers re-check even if
/// the caller stops waiting for the answer (the commit may have happened).
struct WakeOnDrop<'a>(&'a watch::Sender<u64>);

impl Drop for WakeOnDrop<'_> {
    fn drop(&mut self) {
        bump(self.0);
    }
}

/// A [`StorageError`] as the port's error, keeping it as the source (with its kind).
fn storage(e: StorageError) -> LogError {
    LogError::Storage {
        message: e.message().to_string(),
        source: Some(Box::new(e)),
    }
}

fn db(op: &str) -> impl Fn(tokio_postgres::Error) -> LogError + '_ {
    move |e| storage(db_error(op, e))
}

fn unknown(tp: &TopicPartition) -> LogError {
    LogError::UnknownTopicOrPartition {
        partition: tp.clone(),
    }
}

fn corrupt(op: &str, what: String) -> LogError {
    storage(StorageError::new(
        StorageErrorKind::Corrupt,
        format!("cannot {op}: {what}"),
    ))
}

/// The partition's key columns, or `UNKNOWN_TOPIC_OR_PARTITION` for a topic name no topic
/// can have (PostgreSQL's `text` cannot hold U+0000, and topic names never do).
fn key(tp: &TopicPartition) -> Result<(&str, i64), LogError> {
    if tp.topic().contains('\0') {
        return Err(unknown(tp));
    }
    Ok((tp.topic(), i64::from(tp.partition())))
}

/// Kafka refuses a topic whose name equals an existing one once `.` is read as `_`.
fn metric_name(topic: &str) -> String {
    topic.replace('.', "_")
}

/// The checks and errors of `MemoryLog::create_topic`, against the `existing` names.
fn check_new_topic<'a>(
    name: &str,
    partitions: u32,
    existing: impl Iterator<Item = &'a str>,
) -> Result<(), LogError> {
    validate_topic_name(name)?;
    if partitions == 0 || partitions > coordinator_core::MAX_PARTITIONS_PER_TOPIC {
        return Err(LogError::InvalidPartitions {
            topic: name.to_string(),
            partitions,
        });
    }
    let metric = metric_name(name);
    let mut collision = None;
    for other in existing {
        if other == name {
            return Err(LogError::TopicAlreadyExists {
                topic: name.to_string(),
            });
        }
        if collision.is_none() && metric_name(other) == metric {
            collision = Some(other.to_string());
        }
    }
    if let Some(other) = collision {
        return Err(LogError::InvalidTopic {
            name: name.to_string(),
            reason: format!("it collides with existing topic `{other}` (`.` and `_` collide)"),
        });
    }
    Ok(())
}

/// A cached topic from a row's id and partition count.
fn cached(op: &str, name: &str, id: &[u8], partitions: i64) -> Result<CachedTopic, LogError> {
    let id: [u8; 16] = id.try_into().map_err(|_| {
        corrupt(
            op,
            format!("topic `{name}` has an id of {} bytes", id.len()),
        )
    })?;
    let partitions = u32::try_from(partitions).map_err(|_| {
        corrupt(
            op,
            format!("topic `{name}` has {partitions} partitions, outside the u32 range"),
        )
    })?;
    Ok(CachedTopic { id, partitions })
}

/// A fresh id for a log instance: the process, a counter and the time, in hex.
fn instance_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{:x}.{:x}.{nanos:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

impl PostgresLog {
    /// Connects to the database named by `url` (a `postgres://…` URL or a `key=value`
    /// connection string, as libpq takes them) with a pool of at most `pool_size`
    /// connections plus one `LISTEN` connection, applies the migrations the database lacks,
    /// and loads the topics. Records without a timestamp get the system's wall-clock time,
    /// which retention also reads. TLS is not used.
    ///
    /// Fails (with [`LogError::Storage`]) if the string does not parse, `pool_size` is 0,
    /// the server cannot be reached, a migration fails, or the database's schema is newer
    /// than [`SCHEMA_VERSION`](crate::SCHEMA_VERSION).
    pub async fn connect(url: &str, pool_size: usize) -> Result<Self, LogError> {
        let config = crate::parse_url(url).map_err(storage)?;
        Self::connect_config(config, pool_size).await
    }

    /// [`connect`](Self::connect) with a parsed configuration (for example one whose idle
    /// transactions are bounded, [`bound_idle_transactions`](crate::bound_idle_transactions)),
    /// on the system's wall clock.
    pub async fn connect_config(
        config: tokio_postgres::Config,
        pool_size: usize,
    ) -> Result<Self, LogError> {
        Self::connect_with(config, pool_size, Arc::new(SystemClock)).await
    }

    /// [`connect`](Self::connect) with a parsed configuration and the clock that stamps
    /// records without a timestamp and that retention reads (milliseconds since the Unix
    /// epoch, as record timestamps are). Must be called on a tokio runtime: it spawns the
    /// task that keeps the `LISTEN` connection.
    pub async fn connect_with(
        config: tokio_postgres::Config,
        pool_size: usize,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, LogError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            storage(StorageError::new(
                StorageErrorKind::Other,
                "a PostgreSQL log runs on a tokio runtime, and `connect` was not called on one",
            ))
        })?;
        let config = with_defaults(config);
        let pool = build_pool(config.clone(), pool_size, "log").map_err(storage)?;
        {
            const OP: &str = "apply the schema migrations";
            let mut client = pool.get().await.map_err(|e| storage(pool_error(OP, e)))?;
            migrations::migrate(&mut client).await.map_err(storage)?;
        }
        let instance = instance_id();
        let appended = Arc::new(watch::Sender::new(0));
        let listener = Listener::open(&config).await.map_err(storage)?;
        let task = runtime.spawn(listen(config, instance.clone(), appended.clone(), listener));
        let log = PostgresLog {
            pool,
            clock,
            cache: RwLock::new(Cache::default()),
            appended,
            instance,
            listener: task,
            fence: None,
            cleaning: tokio::sync::Mutex::new(()),
        };
        log.topics().await?;
        Ok(log)
    }

    /// This log with every append fenced by `fence`: inside the append's transaction it also
    /// takes a share lock on a coordinator slot's row at the epoch `fence` holds (the slot
    /// [`append_slot`] picks for the partition, spreading the locks over the slots), and is
    /// refused (a `Storage` error whose source has kind
    /// [`NotCoordinator`](StorageErrorKind::NotCoordinator), nothing appended) once another
    /// broker has claimed that slot. While one broker owns every slot, that fences a deposed
    /// broker's appends; a partition's own leader epoch replaces it when partitions are led
    /// by several brokers.
    pub fn with_fence(mut self, fence: SlotFence) -> Self {
        self.fence = Some(fence);
        self
    }

    // Nothing panics while a guard is held, so a poisoned lock still guards consistent data.
    fn read_cache(&self) -> std::sync::RwLockReadGuard<'_, Cache> {
        self.cache.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_cache(&self) -> std::sync::RwLockWriteGuard<'_, Cache> {
        self.cache.write().unwrap_or_else(PoisonError::into_inner)
    }

    async fn client(&self, op: &str) -> Result<deadpool_postgres::Object, LogError> {
        self.pool
            .get()
            .await
            .map_err(|e| storage(pool_error(op, e)))
    }

    fn now_ms(&self) -> i64 {
        i64::try_from(self.clock.now_ms()).unwrap_or(i64::MAX)
    }

    fn payload(&self, topic: &str, partition: Option<i64>) -> String {
        match partition {
            Some(p) => format!("{} {topic} {p}", self.instance),
            None => format!("{} {topic}", self.instance),
        }
    }

    /// Closes the pool: every later call fails. The `LISTEN` connection closes when the
    /// log is dropped.
    pub fn close(&self) {
        self.pool.close();
    }

    /// Moves `tp`'s log start to `target` inside `tx` (whose partition row is locked),
    /// deleting the batches wholly below it, and notifies.
    async fn move_log_start(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        op: &str,
        topic: &str,
        partition: i64,
        target: i64,
    ) -> Result<(), LogError> {
        let stmt = tx
            .prepare_cached(
                "WITH p AS (UPDATE partitions SET log_start = $3 \
                 WHERE topic = $1 AND partition = $2), \
                 b AS (DELETE FROM batches WHERE topic = $1 AND partition = $2 \
                 AND last_offset < $3) \
                 SELECT pg_notify($4, $5)",
            )
            .await
            .map_err(db(op))?;
        let payload = self.payload(topic, Some(partition));
        tx.execute(
            &stmt,
            &[&topic, &partition, &target, &APPENDS_CHANNEL, &payload],
        )
        .await
        .map_err(db(op))?;
        Ok(())
    }
}

#[async_trait]
impl PartitionLog for PostgresLog {
    async fn create_topic(&self, name: &str, partitions: u32) -> Result<(), LogError> {
        // The name and count first, so that nothing PostgreSQL cannot hold is sent.
        check_new_topic(name, partitions, std::iter::empty())?;
        let op = format!("create topic `{name}`");
        let mut client = self.client(&op).await?;
        let tx = client.transaction().await.map_err(db(&op))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&TOPICS_LOCK])
            .await
            .map_err(db(&op))?;
        let rows = tx
            .query("SELECT name FROM topics", &[])
            .await
            .map_err(db(&op))?;
        let names = rows
            .iter()
            .map(|r| r.try_get::<_, String>(0))
            .collect::<Result<Vec<_>, _>>()
            .map_err(db(&op))?;
        check_new_topic(name, partitions, names.iter().map(String::as_str))?;
        let count = i64::from(partitions);
        let row = tx
            .query_one(
                "WITH t AS (INSERT INTO topics (name, partitions) VALUES ($1, $2) \
                 RETURNING topic_id), \
                 p AS (INSERT INTO partitions (topic, partition) \
                 SELECT $1, generate_series(0, $2 - 1)) \
                 SELECT topic_id FROM t",
                &[&name, &count],
            )
            .await
            .map_err(db(&op))?;
        let id: Vec<u8> = row.try_get(0).map_err(db(&op))?;
        let topic = cached(&op, name, &id, count)?;
        tx.commit().await.map_err(db(&op))?;
        let mut cache = self.write_cache();
        cache.topics.insert(name.to_string(), topic);
        cache.changes += 1;
        info!(topic = name, partitions, "topic created");
        Ok(())
    }

    async fn delete_topic(&self, name: &str) -> Result<(), LogError> {
        let missing = || unknown(&TopicPartition::new(name, 0));
        if name.contains('\0') {
            return Err(missing());
        }
        let op = format!("delete topic `{name}`");
        let mut client = self.client(&op).await?;
        let tx = client.transaction().await.map_err(db(&op))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&TOPICS_LOCK])
            .await
            .map_err(db(&op))?;
        let deleted = tx
            .execute("DELETE FROM topics WHERE name = $1", &[&name])
            .await
            .map_err(db(&op))?;
        if deleted == 0 {
            return Err(missing());
        }
        tx.execute(
            "SELECT pg_notify($1, $2)",
            &[&APPENDS_CHANNEL, &self.payload(name, None)],
        )
        .await
        .map_err(db(&op))?;
        let wake = WakeOnDrop(&self.appended);
        tx.commit().await.map_err(db(&op))?;
        {
            let mut cache = self.write_cache();
            cache.topics.remove(name);
            cache.changes += 1;
        }
        drop(wake);
        info!(topic = name, "topic deleted");
        Ok(())
    }

    async fn create_partitions(&self, name: &str, partitions: u32) -> Result<(), LogError> {
        let missing = || unknown(&TopicPartition::new(name, 0));
        if name.contains('\0') {
            return Err(missing());
        }
        let op = format!("add partitions to topic `{name}`");
        let mut client = self.client(&op).await?;
        let tx = client.transaction().await.map_err(db(&op))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&TOPICS_LOCK])
            .await
            .map_err(db(&op))?;
        let row = tx
            .query_opt(
                "SELECT topic_id, partitions FROM topics WHERE name = $1 FOR UPDATE",
                &[&name],
            )
            .await
            .map_err(db(&op))?
            .ok_or_else(missing)?;
        let id: Vec<u8> = row.try_get(0).map_err(db(&op))?;
        let current: i64 = row.try_get(1).map_err(db(&op))?;
        let count = i64::from(partitions);
        if count <= current || partitions > coordinator_core::MAX_PARTITIONS_PER_TOPIC {
            return Err(LogError::InvalidPartitions {
                topic: name.to_string(),
                partitions,
            });
        }
        tx.execute(
            "WITH t AS (UPDATE topics SET partitions = $2 WHERE name = $1), \
             p AS (INSERT INTO partitions (topic, partition) \
             SELECT $1, generate_series($3, $2 - 1)) \
             SELECT pg_notify($4, $5)",
            &[
                &name,
                &count,
                &current,
                &APPENDS_CHANNEL,
                &self.payload(name, None),
            ],
        )
        .await
        .map_err(db(&op))?;
        let topic = cached(&op, name, &id, count)?;
        let wake = WakeOnDrop(&self.appended);
        tx.commit().await.map_err(db(&op))?;
        {
            let mut cache = self.write_cache();
            cache.topics.insert(name.to_string(), topic);
            cache.changes += 1;
        }
        drop(wake);
        info!(topic = name, partitions, "partitions added");
        Ok(())
    }

    async fn topics(&self) -> Result<Vec<(String, u32)>, LogError> {
        const OP: &str = "list the topics";
        let seen = self.read_cache().changes;
        let client = self.client(OP).await?;
        let rows = client
            .query(
                "SELECT name, topic_id, partitions FROM topics ORDER BY name",
                &[],
            )
            .await
            .map_err(db(OP))?;
        let mut topics = BTreeMap::new();
        for row in rows {
            let name: String = row.try_get(0).map_err(db(OP))?;
            let id: Vec<u8> = row.try_get(1).map_err(db(OP))?;
            let partitions: i64 = row.try_get(2).map_err(db(OP))?;
            let topic = cached(OP, &name, &id, partitions)?;
            topics.insert(name, topic);
        }
        let listed = topics
            .iter()
            .map(|(name, t)| (name.clone(), t.partitions))
            .collect();
        let mut cache = self.write_cache();
        if cache.changes == seen {
            // No change of ours since the read began: the database's list is the newest.
            cache.topics = topics;
        }
        Ok(listed)
    }

    async fn append_encoded(
        &self,
        tp: &TopicPartition,
        records: Vec<NewRecord>,
        encode: EncodeBatch<'_>,
    ) -> Result<i64, LogError> {
        if records.is_empty() {
            return Err(LogError::InvalidArgument {
                what: "batch",
                reason: format!("an append to {tp} must carry at least one record"),
            });
        }
        let (topic, partition) = key(tp)?;
        let now = self.now_ms();
        let timestamps: Vec<i64> = records.iter().map(|r| r.timestamp.unwrap_or(now)).collect();
        drop(records);
        let max_timestamp = timestamps.iter().copied().max().unwrap_or(-1);
        let count = i64::try_from(timestamps.len()).unwrap_or(i64::MAX);
        let op = format!("append to {tp}");
        let mut client = self.client(&op).await?;
        let tx = client.transaction().await.map_err(db(&op))?;
        let lock = tx
            .prepare_cached(
                "SELECT high_watermark FROM partitions \
                 WHERE topic = $1 AND partition = $2 FOR UPDATE",
            )
            .await
            .map_err(db(&op))?;
        // The fence's check is sent with the lock (pipelined): no round trip of its own.
        let check = async {
            match &self.fence {
                Some(fence) => fence.check(&tx, append_slot(topic, partition), &op).await,
                None => Ok(()),
            }
        };
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&topic, &partition];
        let (row, checked) = tokio::join!(tx.query_opt(&lock, &params), check);
        checked.map_err(storage)?;
        let row = row.map_err(db(&op))?.ok_or_else(|| unknown(tp))?;
        let base: i64 = row.try_get(0).map_err(db(&op))?;
        let end = base
            .checked_add(count)
            .ok_or_else(|| LogError::InvalidArgument {
                what: "batch",
                reason: format!("{count} records after offset {base} of {tp} overflow the offsets"),
            })?;
        // Called once, while the partition's row is locked.
        let encoded = encode(base);
        let bytes: &[u8] = &encoded;
        let insert = tx
            .prepare_cached(
                "WITH b AS (INSERT INTO batches (topic, partition, base_offset, last_offset, \
                 max_timestamp, timestamps, encoded) VALUES ($1, $2, $3, $4, $5, $6, $7)), \
                 p AS (UPDATE partitions SET high_watermark = $8 \
                 WHERE topic = $1 AND partition = $2) \
                 SELECT pg_notify($9, $10)",
            )
            .await
            .map_err(db(&op))?;
        let payload = self.payload(topic, Some(partition));
        tx.execute(
            &insert,
            &[
                &topic,
                &partition,
                &base,
                &(end - 1),
                &max_timestamp,
                &timestamps,
                &bytes,
                &end,
                &APPENDS_CHANNEL,
                &payload,
            ],
        )
        .await
        .map_err(db(&op))?;
        let _wake = WakeOnDrop(&self.appended);
        tx.commit().await.map_err(db(&op))?;
        Ok(base)
    }

    async fn bounds(&self, tp: &TopicPartition) -> Result<(i64, i64), LogError> {
        let (topic, partition) = key(tp)?;
        let op = format!("read the bounds of {tp}");
        let client = self.client(&op).await?;
        let stmt = client
            .prepare_cached(
                "SELECT log_start, high_watermark FROM partitions \
                 WHERE topic = $1 AND partition = $2",
            )
            .await
            .map_err(db(&op))?;
        let row = client
            .query_opt(&stmt, &[&topic, &partition])
            .await
            .map_err(db(&op))?
            .ok_or_else(|| unknown(tp))?;
        Ok((
            row.try_get(0).map_err(db(&op))?,
            row.try_get(1).map_err(db(&op))?,
        ))
    }

    async fn read_batches(
        &self,
        tp: &TopicPartition,
        from_offset: i64,
        max_bytes: usize,
    ) -> Result<BatchRead, LogError> {
        let (topic, partition) = key(tp)?;
        let op = format!("read {tp} from offset {from_offset}");
        let mut client = self.client(&op).await?;
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(db(&op))?;
        let bounds = tx
            .prepare_cached(
                "SELECT log_start, high_watermark FROM partitions \
                 WHERE topic = $1 AND partition = $2",
            )
            .await
            .map_err(db(&op))?;
        let row = tx
            .query_opt(&bounds, &[&topic, &partition])
            .await
            .map_err(db(&op))?
            .ok_or_else(|| unknown(tp))?;
        let log_start: i64 = row.try_get(0).map_err(db(&op))?;
        let high_watermark: i64 = row.try_get(1).map_err(db(&op))?;
        if from_offset < log_start || from_offset > high_watermark {
            return Err(LogError::OffsetOutOfRange(OutOfRange {
                partition: tp.clone(),
                offset: from_offset,
                log_start,
                visible_end: high_watermark,
            }));
        }
        let page = tx
            .prepare_cached(
                "SELECT base_offset, last_offset, max_timestamp, encoded FROM batches \
                 WHERE topic = $1 AND partition = $2 AND last_offset >= $3 \
                 AND last_offset < $4 ORDER BY last_offset LIMIT $5",
            )
            .await
            .map_err(db(&op))?;
        let mut batches = Vec::new();
        let mut size = 0usize;
        let mut cursor = from_offset;
        'pages: loop {
            let rows = tx
                .query(
                    &page,
                    &[&topic, &partition, &cursor, &high_watermark, &READ_PAGE],
                )
                .await
                .map_err(db(&op))?;
            let full = i64::try_from(rows.len()).is_ok_and(|n| n >= READ_PAGE);
            for row in rows {
                if !batches.is_empty() && size >= max_bytes {
                    break 'pages;
                }
                let base: i64 = row.try_get(0).map_err(db(&op))?;
                let last: i64 = row.try_get(1).map_err(db(&op))?;
                let max_timestamp: i64 = row.try_get(2).map_err(db(&op))?;
                let encoded: Vec<u8> = row.try_get(3).map_err(db(&op))?;
                size = size.saturating_add(encoded.len());
                cursor = last.saturating_add(1);
                batches.push(Arc::new(Batch::from_encoded(
                    base,
                    last,
                    max_timestamp,
                    Bytes::from(encoded),
                )));
            }
            if !full {
                break;
            }
        }
        tx.commit().await.map_err(db(&op))?;
        Ok(BatchRead {
            log_start,
            high_watermark,
            batches,
        })
    }

    async fn offset_for_timestamp(
        &self,
        tp: &TopicPartition,
        timestamp: i64,
    ) -> Result<Option<(i64, i64)>, LogError> {
        let (topic, partition) = key(tp)?;
        let op = format!("find the offset of timestamp {timestamp} in {tp}");
        let client = self.client(&op).await?;
        let stmt = client
            .prepare_cached(
                "SELECT f.o, f.t FROM partitions p LEFT JOIN LATERAL ( \
                   SELECT COALESCE(b.offsets[u.i], b.base_offset + u.i - 1) AS o, u.t \
                   FROM batches b CROSS JOIN LATERAL \
                     unnest(b.timestamps) WITH ORDINALITY AS u(t, i) \
                   WHERE b.topic = p.topic AND b.partition = p.partition \
                     AND b.last_offset >= p.log_start AND b.last_offset < p.high_watermark \
                     AND b.max_timestamp >= $3 \
                     AND COALESCE(b.offsets[u.i], b.base_offset + u.i - 1) >= p.log_start \
                     AND u.t >= $3 \
                   ORDER BY b.base_offset, u.i LIMIT 1) f ON true \
                 WHERE p.topic = $1 AND p.partition = $2",
            )
            .await
            .map_err(db(&op))?;
        let row = client
            .query_opt(&stmt, &[&topic, &partition, &timestamp])
            .await
            .map_err(db(&op))?
            .ok_or_else(|| unknown(tp))?;
        found(&op, &row)
    }

    async fn delete_records(&self, tp: &TopicPartition, offset: i64) -> Result<i64, LogError> {
        let (topic, partition) = key(tp)?;
        let op = format!("delete the records of {tp} below {offset}");
        let mut client = self.client(&op).await?;
        let tx = client.transaction().await.map_err(db(&op))?;
        let (log_start, high_watermark) = lock_partition(&tx, &op, tp, topic, partition).await?;
        if offset < 0 || offset > high_watermark {
            return Err(LogError::OffsetOutOfRange(OutOfRange {
                partition: tp.clone(),
                offset,
                log_start,
                visible_end: high_watermark,
            }));
        }
        if offset <= log_start {
            return Ok(log_start);
        }
        self.move_log_start(&tx, &op, topic, partition, offset)
            .await?;
        let _wake = WakeOnDrop(&self.appended);
        tx.commit().await.map_err(db(&op))?;
        info!(partition = %tp, log_start = offset, "records deleted");
        Ok(offset)
    }

    async fn apply_retention(
        &self,
        tp: &TopicPartition,
        retention_ms: i64,
        retention_bytes: i64,
    ) -> Result<i64, LogError> {
        let (topic, partition) = key(tp)?;
        let op = format!("apply retention to {tp}");
        let now = self.now_ms();
        let mut client = self.client(&op).await?;
        // (log start, where retention would move it) as `view` reads the partition.
        let target = |(log_start, high_watermark, batches): (i64, i64, Vec<(i64, i64, i64)>)| {
            let target = retention_target(
                &batches,
                log_start,
                high_watermark,
                now,
                retention_ms,
                retention_bytes,
            );
            (log_start, target)
        };
        // A first look without the partition's lock: most checks delete nothing, and appends
        // must not wait for them (a broker paused in the middle of one would hold every
        // append to the partition up, whichever broker leads it).
        let (log_start, to) = target(retention_view(&client, &op, tp, topic, partition).await?);
        if to <= log_start {
            return Ok(log_start);
        }
        let tx = client.transaction().await.map_err(db(&op))?;
        lock_partition(&tx, &op, tp, topic, partition).await?;
        let (log_start, target) = target(retention_view(&tx, &op, tp, topic, partition).await?);
        if target <= log_start {
            return Ok(log_start);
        }
        self.move_log_start(&tx, &op, topic, partition, target)
            .await?;
        let _wake = WakeOnDrop(&self.appended);
        tx.commit().await.map_err(db(&op))?;
        info!(partition = %tp, log_start = target, "retention deleted batches");
        Ok(target)
    }

    async fn partition_size(&self, tp: &TopicPartition) -> Result<u64, LogError> {
        let (topic, partition) = key(tp)?;
        let op = format!("read the size of {tp}");
        let client = self.client(&op).await?;
        let stmt = client
            .prepare_cached(
                "SELECT (SELECT COALESCE(sum(octet_length(b.encoded)), 0)::bigint \
                   FROM batches b WHERE b.topic = p.topic AND b.partition = p.partition) \
                 FROM partitions p WHERE p.topic = $1 AND p.partition = $2",
            )
            .await
            .map_err(db(&op))?;
        let row = client
            .query_opt(&stmt, &[&topic, &partition])
            .await
            .map_err(db(&op))?
            .ok_or_else(|| unknown(tp))?;
        let size: i64 = row.try_get(0).map_err(db(&op))?;
        u64::try_from(size).map_err(|_| corrupt(&op, format!("a negative size {size}")))
    }

    async fn offset_of_max_timestamp(
        &self,
        tp: &TopicPartition,
    ) -> Result<Option<(i64, i64)>, LogError> {
        let (topic, partition) = key(tp)?;
        let op = format!("find the largest timestamp of {tp}");
        let client = self.client(&op).await?;
        // Only batches whose largest timestamp reaches the largest of the batches wholly
        // readable can hold the answer; a batch straddling the log start is looked into,
        // as its largest timestamp may belong to a removed record.
        let stmt = client
            .prepare_cached(
                "SELECT f.o, f.t FROM partitions p LEFT JOIN LATERAL ( \
                   SELECT COALESCE(b.offsets[u.i], b.base_offset + u.i - 1) AS o, u.t \
                   FROM batches b CROSS JOIN LATERAL \
                     unnest(b.timestamps) WITH ORDINALITY AS u(t, i) \
                   WHERE b.topic = p.topic AND b.partition = p.partition \
                     AND b.last_offset >= p.log_start AND b.last_offset < p.high_watermark \
                     AND b.max_timestamp >= COALESCE(( \
                       SELECT max(w.max_timestamp) FROM batches w \
                       WHERE w.topic = p.topic AND w.partition = p.partition \
                         AND w.base_offset >= p.log_start \
                         AND w.last_offset < p.high_watermark), \
                       -9223372036854775808) \
                     AND COALESCE(b.offsets[u.i], b.base_offset + u.i - 1) >= p.log_start \
                   ORDER BY u.t DESC, COALESCE(b.offsets[u.i], b.base_offset + u.i - 1) \
                   LIMIT 1) f ON true \
                 WHERE p.topic = $1 AND p.partition = $2",
            )
            .await
            .map_err(db(&op))?;
        let row = client
            .query_opt(&stmt, &[&topic, &partition])
            .await
            .map_err(db(&op))?
            .ok_or_else(|| unknown(tp))?;
        found(&op, &row)
    }

    /// One pass (see the module docs): three sweeps over the compactable batches in pages
    /// of [`READ_PAGE`] (the transactions, the dirty keys, the decisions), each page's changes
    /// written in a transaction of its own, fenced as appends are; appends never wait for it.
    async fn compact(
        &self,
        tp: &TopicPartition,
        policy: &CompactionPolicy,
        format: Arc<dyn RecordFormat>,
    ) -> Result<Compaction, LogError> {
        let (topic, partition) = key(tp)?;
        let op = format!("compact {tp}");
        let Ok(_one) = self.cleaning.try_lock() else {
            return Ok(Compaction::default());
        };
        let mut client = self.client(&op).await?;
        // The topic's id names the topic the pass reads: one deleted and created again under
        // the same name during the pass is another, and none of the pass's writes are its.
        let bounds = client
            .prepare_cached(
                "SELECT p.log_start, p.high_watermark, p.cleaned_offset, t.topic_id \
                 FROM partitions p JOIN topics t ON t.name = p.topic \
                 WHERE p.topic = $1 AND p.partition = $2",
            )
            .await
            .map_err(db(&op))?;
        let row = client
            .query_opt(&bounds, &[&topic, &partition])
            .await
            .map_err(db(&op))?
            .ok_or_else(|| unknown(tp))?;
        let log_start: i64 = row.try_get(0).map_err(db(&op))?;
        let high_watermark: i64 = row.try_get(1).map_err(db(&op))?;
        let cleaned: i64 = row.try_get(2).map_err(db(&op))?;
        let topic_id: Vec<u8> = row.try_get(3).map_err(db(&op))?;
        let nothing = Compaction::up_to(cleaned);
        let dirty_start = cleaned.max(log_start);
        let mut pass = Cleaning::new(policy, &*format);

        // Sweep 1: the compactable batches (below the stable offset, up to the first one
        // within the minimum lag), their transactions, and whether the partition is due.
        let mut upper = high_watermark.min(policy.stable_offset);
        let (mut total, mut dirty, mut oldest_dirty) = (0u64, 0u64, None);
        let mut sweep = Sweep::new(topic, partition, upper);
        'learn: while let Some(page) = sweep.next(&client, &op).await? {
            for b in &page {
                if !lag_passed(policy, Some(b.max_timestamp)) {
                    upper = b.base_offset;
                    break 'learn;
                }
                pass.learn(b.base_offset, &b.encoded);
                total += b.encoded.len() as u64;
                if b.last_offset >= dirty_start {
                    dirty += b.encoded.len() as u64;
                    oldest_dirty.get_or_insert(b.max_timestamp);
                }
            }
        }
        if dirty == 0 || !due(policy, total, dirty, oldest_dirty) {
            return Ok(nothing);
        }
        if pass.undecided() {
            // The markers of transactions the compactable batches leave open, from the
            // batches after them, up to the high watermark.
            let mut sweep = Sweep::new(topic, partition, high_watermark);
            sweep.after = upper.saturating_sub(1);
            'after: while let Some(page) = sweep.next(&client, &op).await? {
                for b in &page {
                    if !pass.undecided() {
                        break 'after;
                    }
                    pass.learn_after(b.base_offset, &b.encoded);
                }
            }
        }

        // Sweep 2: the latest offset of each key of the dirty batches, up to the bound.
        let mut mapped_to = upper;
        let mut sweep = Sweep::new(topic, partition, upper);
        'map: while let Some(page) = sweep.next(&client, &op).await? {
            for b in page.iter().filter(|b| b.last_offset >= dirty_start) {
                pass.map(b.base_offset, &b.encoded);
                if pass.full() {
                    mapped_to = b.last_offset.saturating_add(1);
                    break 'map;
                }
            }
        }

        // Sweep 3: each batch's outcome, written page by page.
        let mut done = Compaction::up_to(mapped_to);
        let mut sweep = Sweep::new(topic, partition, mapped_to);
        while let Some(page) = sweep.next(&client, &op).await? {
            let mut changes = Vec::new();
            for b in &page {
                let index = b.index();
                let stored = Stored {
                    base_offset: b.base_offset,
                    last_offset: b.last_offset,
                    data: &b.encoded,
                    index,
                    delete_horizon: b.delete_horizon,
                };
                match pass.decide(&stored) {
                    Outcome::Same => {}
                    Outcome::Dropped => changes.push((b, None)),
                    Outcome::Rewritten(r) => changes.push((b, Some(r))),
                }
            }
            if changes.is_empty() {
                continue;
            }
            let tx = client.transaction().await.map_err(db(&op))?;
            if let Some(fence) = &self.fence {
                fence
                    .check(&tx, append_slot(topic, partition), &op)
                    .await
                    .map_err(storage)?;
            }
            // Still the topic the pass read, and its partition row held until the page
            // commits: a deletion, an append or retention (which decides under the row's
            // lock) waits for the page rather than deciding from sizes it changes.
            let same = tx
                .prepare_cached(
                    "SELECT 1 FROM partitions p JOIN topics t ON t.name = p.topic \
                     WHERE p.topic = $1 AND p.partition = $2 AND t.topic_id = $3 FOR SHARE",
                )
                .await
                .map_err(db(&op))?;
            if tx
                .query_opt(&same, &[&topic, &partition, &topic_id])
                .await
                .map_err(db(&op))?
                .is_none()
            {
                info!(partition = %tp, "the topic was deleted during a compaction pass: stopped");
                return Ok(done);
            }
            let delete = tx
                .prepare_cached(
                    "DELETE FROM batches WHERE topic = $1 AND partition = $2 \
                     AND base_offset = $3 AND last_offset = $4",
                )
                .await
                .map_err(db(&op))?;
            let update = tx
                .prepare_cached(
                    "UPDATE batches SET base_offset = $5, last_offset = $6, max_timestamp = $7, \
                     timestamps = $8, offsets = $9, delete_horizon = $10, encoded = $11 \
                     WHERE topic = $1 AND partition = $2 AND base_offset = $3 \
                     AND last_offset = $4",
                )
                .await
                .map_err(db(&op))?;
            for (b, change) in &changes {
                let before = b.encoded.len() as u64;
                let was = i64::try_from(b.timestamps.len()).unwrap_or(i64::MAX);
                match change {
                    None => {
                        tx.execute(
                            &delete,
                            &[&topic, &partition, &b.base_offset, &b.last_offset],
                        )
                        .await
                        .map_err(db(&op))?;
                        done.records_removed += u64::try_from(was).unwrap_or(0);
                    }
                    Some(r) => {
                        let timestamps: Vec<i64> = r.index.iter().map(|x| x.1).collect();
                        let offsets: Vec<i64> = r.index.iter().map(|x| x.0).collect();
                        let dense = offsets.len() as i64 == r.last_offset - r.base_offset + 1;
                        let offsets = (!dense).then_some(offsets);
                        let max_timestamp = timestamps.iter().copied().max().unwrap_or(-1);
                        let bytes: &[u8] = &r.data;
                        tx.execute(
                            &update,
                            &[
                                &topic,
                                &partition,
                                &b.base_offset,
                                &b.last_offset,
                                &r.base_offset,
                                &r.last_offset,
                                &max_timestamp,
                                &timestamps,
                                &offsets,
                                &r.delete_horizon,
                                &bytes,
                            ],
                        )
                        .await
                        .map_err(db(&op))?;
                        done.bytes_after += r.data.len() as u64;
                        let now = i64::try_from(r.index.len()).unwrap_or(0);
                        done.records_removed += u64::try_from(was - now).unwrap_or(0);
                    }
                }
                done.bytes_before += before;
                done.segments += 1;
            }
            tx.commit().await.map_err(db(&op))?;
        }
        let mark = client
            .prepare_cached(
                "UPDATE partitions p SET cleaned_offset = GREATEST(p.cleaned_offset, $3) \
                 FROM topics t WHERE p.topic = $1 AND p.partition = $2 \
                 AND t.name = p.topic AND t.topic_id = $4",
            )
            .await
            .map_err(db(&op))?;
        client
            .execute(&mark, &[&topic, &partition, &mapped_to, &topic_id])
            .await
            .map_err(db(&op))?;
        if done.segments > 0 {
            info!(
                partition = %tp,
                batches = done.segments,
                records_removed = done.records_removed,
                cleaned_up_to = mapped_to,
                "compacted"
            );
        }
        Ok(done)
    }

    fn appends(&self) -> watch::Receiver<u64> {
        self.appended.subscribe()
    }

    fn topic_id(&self, topic: &str) -> Option<[u8; 16]> {
        self.read_cache().topics.get(topic).map(|t| t.id)
    }
}

impl TopicMetadata for PostgresLog {
    fn partition_count(&self, topic: &str) -> Option<u32> {
        self.read_cache().topics.get(topic).map(|t| t.partitions)
    }

    fn topic_names(&self) -> Vec<String> {
        self.read_cache().topics.keys().cloned().collect()
    }
}

/// A stored batch as a compaction pass reads it.
struct Row {
    base_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
    timestamps: Vec<i64>,
    offsets: Option<Vec<i64>>,
    delete_horizon: Option<i64>,
    encoded: Vec<u8>,
}

impl Row {
    /// Each record's `(offset, timestamp)`.
    fn index(&self) -> Vec<(i64, i64)> {
        match &self.offsets {
            Some(offsets) => offsets
                .iter()
                .copied()
                .zip(self.timestamps.iter().copied())
                .collect(),
            None => (self.base_offset..)
                .zip(self.timestamps.iter().copied())
                .collect(),
        }
    }
}

/// The batches of a partition whose last offset is below an offset, page by page in offset
/// order.
struct Sweep<'a> {
    topic: &'a str,
    partition: i64,
    below: i64,
    after: i64,
    done: bool,
}

impl<'a> Sweep<'a> {
    fn new(topic: &'a str, partition: i64, below: i64) -> Self {
        Sweep {
            topic,
            partition,
            below,
            after: -1,
            done: false,
        }
    }

    /// The next page, or `None` once every batch was read.
    async fn next(
        &mut self,
        client: &deadpool_postgres::ClientWrapper,
        op: &str,
    ) -> Result<Option<Vec<Row>>, LogError> {
        if self.done {
            return Ok(None);
        }
        let stmt = client
            .prepare_cached(
                "SELECT base_offset, last_offset, max_timestamp, timestamps, offsets, \
                 delete_horizon, encoded FROM batches \
                 WHERE topic = $1 AND partition = $2 AND last_offset > $3 \
                 AND last_offset < $4 ORDER BY last_offset LIMIT $5",
            )
            .await
            .map_err(db(op))?;
        let rows = client
            .query(
                &stmt,
                &[
                    &self.topic,
                    &self.partition,
                    &self.after,
                    &self.below,
                    &READ_PAGE,
                ],
            )
            .await
            .map_err(db(op))?;
        self.done = i64::try_from(rows.len()).map_or(true, |n| n < READ_PAGE);
        let mut page = Vec::with_capacity(rows.len());
        for row in rows {
            page.push(Row {
                base_offset: row.try_get(0).map_err(db(op))?,
                last_offset: row.try_get(1).map_err(db(op))?,
                max_timestamp: row.try_get(2).map_err(db(op))?,
                timestamps: row.try_get(3).map_err(db(op))?,
                offsets: row.try_get(4).map_err(db(op))?,
                delete_horizon: row.try_get(5).map_err(db(op))?,
                encoded: row.try_get(6).map_err(db(op))?,
            });
        }
        // By last offset: a rewritten batch's last offset never grows, so a page written
        // back is never read again.
        if let Some(last) = page.last() {
            self.after = last.last_offset;
        }
        if page.is_empty() {
            return Ok(None);
        }
        Ok(Some(page))
    }
}

/// The `(offset, timestamp)` of a lookup's row, whose columns are null when nothing was
/// found.
fn found(op: &str, row: &tokio_postgres::Row) -> Result<Option<(i64, i64)>, LogError> {
    let offset: Option<i64> = row.try_get(0).map_err(db(op))?;
    let timestamp: Option<i64> = row.try_get(1).map_err(db(op))?;
    Ok(offset.zip(timestamp))
}

/// The coordinator slot whose epoch fences appends to `topic`'s `partition` (see
/// [`PostgresLog::with_fence`]): a group slot, by the partition's name as Kafka prints it.
pub fn append_slot(topic: &str, partition: i64) -> i32 {
    crate::cluster::group_slot(&format!("{topic}-{partition}"))
}

/// Locks `tp`'s row in `tx` and returns its `(log_start, high_watermark)`.
async fn lock_partition(
    tx: &deadpool_postgres::Transaction<'_>,
    op: &str,
    tp: &TopicPartition,
    topic: &str,
    partition: i64,
) -> Result<(i64, i64), LogError> {
    let stmt = tx
        .prepare_cached(
            "SELECT log_start, high_watermark FROM partitions \
             WHERE topic = $1 AND partition = $2 FOR UPDATE",
        )
        .await
        .map_err(db(op))?;
    let row = tx
        .query_opt(&stmt, &[&topic, &partition])
        .await
        .map_err(db(op))?
        .ok_or_else(|| unknown(tp))?;
    Ok((
        row.try_get(0).map_err(db(op))?,
        row.try_get(1).map_err(db(op))?,
    ))
}

/// `tp`'s `(log_start, high_watermark)` and its batches as `(last_offset, max_timestamp,
/// size)` in offset order, what [`retention_target`] reads.
async fn retention_view(
    client: &impl deadpool_postgres::GenericClient,
    op: &str,
    tp: &TopicPartition,
    topic: &str,
    partition: i64,
) -> Result<(i64, i64, Vec<(i64, i64, i64)>), LogError> {
    let row = client
        .query_opt(
            "SELECT log_start, high_watermark FROM partitions \
             WHERE topic = $1 AND partition = $2",
            &[&topic, &partition],
        )
        .await
        .map_err(db(op))?
        .ok_or_else(|| unknown(tp))?;
    let log_start: i64 = row.try_get(0).map_err(db(op))?;
    let high_watermark: i64 = row.try_get(1).map_err(db(op))?;
    let rows = client
        .query(
            "SELECT last_offset, max_timestamp, octet_length(encoded)::bigint FROM batches \
             WHERE topic = $1 AND partition = $2 ORDER BY base_offset",
            &[&topic, &partition],
        )
        .await
        .map_err(db(op))?;
    let mut batches = Vec::with_capacity(rows.len());
    for row in rows {
        let last: i64 = row.try_get(0).map_err(db(op))?;
        let max_timestamp: i64 = row.try_get(1).map_err(db(op))?;
        let size: i64 = row.try_get(2).map_err(db(op))?;
        batches.push((last, max_timestamp, size));
    }
    Ok((log_start, high_watermark, batches))
}

/// The log start retention leaves, from the partition's batches as `(last_offset,
/// max_timestamp, size)` in offset order: `MemoryLog`'s rules, whole batches only. Leading
/// batches whose newest record is older than `retention_ms` go; leading batches go while
/// the partition stays at or above `retention_bytes` without them (`-1` disables either);
/// nothing at or above the high watermark goes.
fn retention_target(
    batches: &[(i64, i64, i64)],
    log_start: i64,
    high_watermark: i64,
    now_ms: i64,
    retention_ms: i64,
    retention_bytes: i64,
) -> i64 {
    let kept = || batches.iter().filter(|(last, _, _)| *last < high_watermark);
    let mut target = log_start;
    if retention_ms >= 0 {
        for (last, _, _) in kept().take_while(|(_, t, _)| now_ms.saturating_sub(*t) > retention_ms)
        {
            target = target.max(last.saturating_add(1));
        }
    }
    if retention_bytes >= 0 {
        let mut size: i64 = batches.iter().map(|(_, _, s)| *s).sum();
        for (last, _, batch) in kept() {
            if size.saturating_sub(*batch) < retention_bytes {
                break;
            }
            size -= batch;
            target = target.max(last.saturating_add(1));
        }
    }
    target
}

/// The dedicated connection that `LISTEN`s on [`APPENDS_CHANNEL`].
struct Listener {
    /// Kept so that the connection stays open.
    _client: Client,
    connection: Connection<Socket, NoTlsStream>,
}

impl Listener {
    /// Connects and runs `LISTEN`, within [`DEFAULT_CONNECT_TIMEOUT`] (or the configuration's
    /// own connect timeout, for the connection itself).
    async fn open(config: &tokio_postgres::Config) -> Result<Listener, StorageError> {
        const OP: &str = "listen for appends";
        let opening = async {
            let (client, mut connection) =
                config.connect(NoTls).await.map_err(|e| db_error(OP, e))?;
            let sql = format!("LISTEN {APPENDS_CHANNEL}");
            let listened = {
                let mut listen = std::pin::pin!(client.batch_execute(&sql));
                // The connection is driven here (poll_message also sends and receives the
                // statement) until LISTEN has been answered.
                std::future::poll_fn(|cx| {
                    loop {
                        match connection.poll_message(cx) {
                            Poll::Ready(Some(Ok(_))) => continue,
                            Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(Some(e))),
                            Poll::Ready(None) => return Poll::Ready(Err(None)),
                            Poll::Pending => break,
                        }
                    }
                    listen.as_mut().poll(cx).map(|r| r.map_err(Some))
                })
                .await
            };
            match listened {
                Ok(()) => Ok(Listener {
                    _client: client,
                    connection,
                }),
                Err(Some(e)) => Err(db_error(OP, e)),
                Err(None) => Err(StorageError::new(
                    StorageErrorKind::Io,
                    format!(
                        "the connection to PostgreSQL closed while trying to {OP}; \
                         retriable once the server is back"
                    ),
                )),
            }
        };
        tokio::time::timeout(DEFAULT_CONNECT_TIMEOUT, opening)
            .await
            .unwrap_or_else(|_| {
                Err(StorageError::new(
                    StorageErrorKind::Io,
                    format!(
                        "no answer from PostgreSQL within {DEFAULT_CONNECT_TIMEOUT:?} while \
                         trying to {OP}; retriable once the server is back"
                    ),
                ))
            })
    }

    /// Receives notifications until the connection ends, bumping `appended` for each one
    /// another log sent; returns why the connection ended.
    async fn pump(&mut self, instance: &str, appended: &watch::Sender<u64>) -> String {
        loop {
            match std::future::poll_fn(|cx| self.connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    let sender = n.payload().split(' ').next();
                    if n.channel() == APPENDS_CHANNEL && sender != Some(instance) {
                        bump(appended);
                    }
                }
                Some(Ok(_)) => {} // a notice
                Some(Err(e)) => return e.to_string(),
                None => return "the server closed the connection".to_string(),
            }
        }
    }
}

/// The listener's task: pumps notifications; when the connection ends, re-opens it with a
/// bounded backoff and bumps the watch once it listens again (notifications sent meanwhile
/// are lost, so readers re-check).
async fn listen(
    config: tokio_postgres::Config,
    instance: String,
    appended: Arc<watch::Sender<u64>>,
    mut listener: Listener,
) {
    loop {
        let why = listener.pump(&instance, &appended).await;
        warn!(reason = %why, "the LISTEN connection of the PostgreSQL log ended; reconnecting");
        let mut backoff = RECONNECT_MIN;
        listener = loop {
            tokio::time::sleep(backoff).await;
            match Listener::open(&config).await {
                Ok(l) => break l,
                Err(e) => {
                    warn!(error = %e, retry_in = ?backoff, "cannot re-open the LISTEN connection");
                    backoff = (backoff * 2).min(RECONNECT_MAX);
                }
            }
        };
        info!("the PostgreSQL log listens for appends again");
        bump(&appended);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Four batches of 4 bytes, one record each, at 1000, 2000, 3000 and 4000 ms.
    const BATCHES: [(i64, i64, i64); 4] =
        [(0, 1_000, 4), (1, 2_000, 4), (2, 3_000, 4), (3, 4_000, 4)];

    #[test]
    fn retention_removes_leading_batches_by_time_and_by_size() {
        let target = |hw, ms, bytes| retention_target(&BATCHES, 0, hw, 5_000, ms, bytes);
        assert_eq!(target(4, -1, -1), 0, "both rules off");
        assert_eq!(target(4, 2_500, -1), 2, "older than 2500 ms: two batches");
        assert_eq!(target(4, 3_000, -1), 1, "exactly 3000 ms old is kept");
        assert_eq!(target(4, -1, 8), 2, "the partition keeps 8 bytes");
        assert_eq!(target(4, -1, 5), 2, "at or above 5 bytes: two batches left");
        assert_eq!(target(4, -1, 4), 3, "at or above 4 bytes: one batch left");
        assert_eq!(target(4, -1, 0), 4, "0 bytes: everything");
        assert_eq!(target(4, 2_500, 12), 2, "the rule removing more wins");
    }

    #[test]
    fn retention_never_reaches_the_high_watermark() {
        assert_eq!(retention_target(&BATCHES, 0, 2, 5_000, 0, -1), 2);
        assert_eq!(retention_target(&BATCHES, 0, 2, 5_000, -1, 0), 2);
        assert_eq!(
            retention_target(&BATCHES, 3, 4, 5_000, -1, -1),
            3,
            "the log start never moves back"
        );
    }

    #[test]
    fn new_topics_are_checked_as_the_memory_log_checks_them() {
        let code = |name, parts, existing: &[&str]| {
            check_new_topic(name, parts, existing.iter().copied())
                .err()
                .map(|e| e.code())
        };
        assert_eq!(code("a.b", 1, &["x"]), None);
        assert_eq!(code("a.b", 1, &["a.b"]), Some("TOPIC_ALREADY_EXISTS"));
        assert_eq!(code("a.b", 1, &["a_b"]), Some("INVALID_TOPIC_EXCEPTION"));
        assert_eq!(code("a b", 1, &[]), Some("INVALID_TOPIC_EXCEPTION"));
        assert_eq!(code("t", 0, &[]), Some("INVALID_PARTITIONS"));
        let too_many = coordinator_core::MAX_PARTITIONS_PER_TOPIC + 1;
        assert_eq!(code("t", too_many, &[]), Some("INVALID_PARTITIONS"));
    }

    #[test]
    fn a_name_with_nul_is_an_unknown_topic_and_never_reaches_the_database() {
        let tp = TopicPartition::new("a\0b", 0);
        assert_eq!(key(&tp).unwrap_err().kafka_code(), Some(3));
        assert_eq!(
            key(&TopicPartition::new("t", u32::MAX)).unwrap(),
            ("t", 4_294_967_295)
        );
    }

    #[test]
    fn instance_ids_differ() {
        assert_ne!(instance_id(), instance_id());
    }
}
