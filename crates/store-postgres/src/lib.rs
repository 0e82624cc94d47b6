//! A PostgreSQL adapter of [`coordinator_core`]'s [`OffsetStore`] port: committed offsets
//! with Kafka's metadata, groups' durable records and the transaction coordinator's records
//! with their tombstones, in one PostgreSQL database, with brokers registered under leases and coordinator slots fenced by epochs ([`cluster`]).
//!
//! [`PostgresStore::connect`] opens a pool of connections, applies the
//! [versioned migrations](migrations) under an advisory lock, and serves the port:
//!
//! - every write is one transaction, on a pooled connection, run by a task of its own that
//!   also holds the write's [`CommitFence`] until PostgreSQL has answered its `COMMIT`: a
//!   caller that drops the future does not cut the write short, and the fence is never
//!   released before the write is visible;
//! - a commit is one `INSERT … SELECT FROM UNNEST(…) ON CONFLICT DO UPDATE` of every
//!   partition, so it lands whole or not at all;
//! - [`write_group`](OffsetStore::write_group) upserts the group's row, or deletes it for a
//!   tombstone; [`write_transaction`](OffsetStore::write_transaction) does the same with the
//!   transactional id's row;
//! - every write goes through one function, which (for a store built
//!   [`with_fence`](PostgresStore::with_fence)) checks the writer's coordinator-slot epoch
//!   inside the same transaction: a broker another one deposed writes nothing (see
//!   [`cluster`] and `docs/postgres.md`).
//!
//! The store keeps nothing in memory that a client can grow: every row is in the database,
//! whose size the coordinator's own bounds (groups, partitions, `offset.metadata.max.bytes`)
//! limit; a group or transaction record is refused above [`MAX_RECORD_BYTES`].
//!
//! With the `harness` feature, `harness::TempPostgres` starts a throwaway server for tests.
//!
//! ```no_run
//! use coordinator_core::{CommitFence, OffsetMap, OffsetStore, TopicPartition};
//! use store_postgres::PostgresStore;
//!
//! # async fn demo() -> Result<(), coordinator_core::StorageError> {
//! let store = PostgresStore::connect("postgres://broker@127.0.0.1/offsets", 8).await?;
//! let offsets: OffsetMap = [(TopicPartition::new("orders", 0), 42)].into();
//! store.commit("workers", &offsets, CommitFence::none()).await?;
//! assert_eq!(store.committed("workers", &TopicPartition::new("orders", 0)).await?, Some(42));
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

pub mod cluster;
mod documents;
mod error;
#[cfg(feature = "harness")]
pub mod harness;
pub mod log;
pub mod migrations;
mod record;
mod target;
mod txn_record;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use coordinator_core::txn::TransactionRecord;
use coordinator_core::{
    validate_committed, validate_offsets, CommitFence, CommittedOffsets, GroupRecord,
    OffsetAndMetadata, OffsetMap, OffsetStore, StorageError, StorageErrorKind, TopicPartition,
};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

pub use crate::cluster::{Balance, Cluster, ClusterView, LiveBroker, SlotFence};
pub use crate::documents::{PostgresDocuments, MAX_DOCUMENT_BYTES};
use crate::error::{db_error, pool_error};
pub use crate::log::PostgresLog;
pub use crate::migrations::SCHEMA_VERSION;
pub use crate::target::describe_target;
/// The parsed connection settings that [`PostgresStore::connect_with`],
/// [`PostgresLog::connect_config`] and [`bound_idle_transactions`] take.
pub use tokio_postgres::Config as ConnectConfig;

/// The largest encoded group or transaction record the store writes (16 MiB): a larger one
/// is refused before anything is written. PostgreSQL's own limit for a `jsonb` value is 255 MiB.
pub const MAX_RECORD_BYTES: usize = 16 << 20;

/// How long opening a connection may take when the connection string sets no
/// `connect_timeout`; also the pool's bound on creating and recycling one.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a call waits for a free connection of a full pool before failing with an
/// [`Io`](StorageErrorKind::Io) error.
pub const POOL_WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// An [`OffsetStore`] over PostgreSQL. Cheap to share (`Arc<dyn OffsetStore>`); every call
/// takes a connection from the store's pool.
///
/// # Slot fencing
/// Every write goes through one private function (`apply`) that opens the transaction and,
/// for a store built [`with_fence`](Self::with_fence), first checks under a share lock that
/// this process still owns the key's coordinator slot at its epoch (`SELECT … FROM
/// coordinator_slots … FOR SHARE`), then writes: a broker that lost its slots can no longer
/// write (see [`cluster`]).
///
/// # Where it differs from the port's contract
/// A connection lost after `COMMIT` was sent and before its answer arrived leaves the write
/// undecided: the store returns an [`Io`](StorageErrorKind::Io) error, yet the transaction
/// may have committed. (Kafka's producers face the same with a lost acknowledgement.) Every
/// write is idempotent (an upsert of values, a delete), so retrying it is safe.
pub struct PostgresStore {
    pool: Pool,
    /// With several brokers over the database: the slots this process owns, which every
    /// write checks (see [`with_fence`](Self::with_fence)).
    fence: Option<SlotFence>,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = self.pool.status();
        f.debug_struct("PostgresStore")
            .field("pool_max_size", &status.max_size)
            .field("pool_size", &status.size)
            .field("pool_available", &status.available)
            .finish()
    }
}

impl PostgresStore {
    /// Connects to the database named by `url` (a `postgres://…` URL or a `key=value`
    /// connection string, as libpq takes them), with at most `pool_size` connections, and
    /// applies the migrations the database lacks. TLS is not used: connect over loopback, a
    /// unix socket or a trusted network.
    ///
    /// Fails if the string does not parse, `pool_size` is 0, the server cannot be reached
    /// ([`Io`](StorageErrorKind::Io)), a migration fails, or the database's schema is newer
    /// than [`SCHEMA_VERSION`].
    pub async fn connect(url: &str, pool_size: usize) -> Result<Self, StorageError> {
        Self::connect_with(parse_url(url)?, pool_size).await
    }

    /// [`connect`](Self::connect) with a parsed configuration.
    pub async fn connect_with(
        config: tokio_postgres::Config,
        pool_size: usize,
    ) -> Result<Self, StorageError> {
        let pool = build_pool(config, pool_size, "store")?;
        let store = PostgresStore { pool, fence: None };
        store.migrate().await?;
        Ok(store)
    }

    /// This store with every write fenced by `fence`: a write of a group or a transactional
    /// id first checks, inside its own transaction and under a share lock, that this process
    /// still owns the key's coordinator slot at the epoch `fence` holds, and is refused with
    /// [`NotCoordinator`](StorageErrorKind::NotCoordinator) (nothing written) once another
    /// broker has claimed it (see [`cluster`]).
    pub fn with_fence(mut self, fence: SlotFence) -> Self {
        self.fence = Some(fence);
        self
    }

    /// Applies the migrations the database lacks and returns their versions (empty when
    /// the schema is current, as it is after [`connect`](Self::connect)).
    pub async fn migrate(&self) -> Result<Vec<i32>, StorageError> {
        migrate_pool(&self.pool).await
    }

    /// The database's schema version (the highest applied migration).
    pub async fn schema_version(&self) -> Result<i32, StorageError> {
        let client = self
            .pool
            .get()
            .await
            .map_err(|e| pool_error("read the schema version", e))?;
        migrations::current_version(&**client).await
    }

    /// Closes the pool: every later call fails; connections close as they are returned.
    pub fn close(&self) {
        self.pool.close();
    }

    /// Runs `write` as one transaction in a task of its own that keeps `fence` until the
    /// transaction has committed or failed, and waits for it. Dropping the returned future
    /// does not stop the task (the port's fence and cancellation rules).
    async fn write(&self, write: Write, fence: CommitFence) -> Result<(), StorageError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            StorageError::new(
                StorageErrorKind::Other,
                format!(
                    "cannot {}: the PostgreSQL store runs on a tokio runtime, and this call \
                     is not on one; nothing was written",
                    write.describe()
                ),
            )
        })?;
        let pool = self.pool.clone();
        let slots = self.fence.clone();
        let task = runtime.spawn(async move {
            let result = apply(&pool, slots.as_ref(), &write).await;
            // Only now: the transaction's COMMIT has been answered (or it failed).
            drop(fence);
            result
        });
        task.await.map_err(|e| {
            StorageError::new(
                StorageErrorKind::Other,
                format!("the PostgreSQL write task did not finish: {e}"),
            )
        })?
    }

    async fn client(&self, op: &str) -> Result<deadpool_postgres::Object, StorageError> {
        self.pool.get().await.map_err(|e| pool_error(op, e))
    }

    async fn read_offsets(&self, group: &str) -> Result<CommittedOffsets, StorageError> {
        let op = format!("list the offsets of group `{group}`");
        if group.contains('\0') {
            return Ok(CommittedOffsets::new());
        }
        let client = self.client(&op).await?;
        let stmt = client
            .prepare_cached(
                "SELECT topic, partition, committed_offset, leader_epoch, metadata, \
                 commit_timestamp FROM offsets WHERE group_id = $1",
            )
            .await
            .map_err(|e| db_error(&op, e))?;
        let rows = client
            .query(&stmt, &[&group])
            .await
            .map_err(|e| db_error(&op, e))?;
        let mut out = CommittedOffsets::new();
        for row in rows {
            let topic: String = row.try_get(0).map_err(|e| db_error(&op, e))?;
            let partition: i64 = row.try_get(1).map_err(|e| db_error(&op, e))?;
            let offset: i64 = row.try_get(2).map_err(|e| db_error(&op, e))?;
            let leader_epoch: Option<i32> = row.try_get(3).map_err(|e| db_error(&op, e))?;
            let metadata: String = row.try_get(4).map_err(|e| db_error(&op, e))?;
            let ts: i64 = row.try_get(5).map_err(|e| db_error(&op, e))?;
            let (partition, ts) = match (u32::try_from(partition), u64::try_from(ts)) {
                (Ok(p), Ok(ts)) if offset >= 0 => (p, ts),
                _ => {
                    return Err(StorageError::new(
                        StorageErrorKind::Corrupt,
                        format!(
                            "table offsets, group `{group}`, topic `{topic}`: partition \
                             {partition}, offset {offset} or commit time {ts} is out of range"
                        ),
                    ))
                }
            };
            let mut o = OffsetAndMetadata::new(offset)
                .with_leader_epoch(leader_epoch)
                .with_metadata(metadata);
            o.commit_timestamp_ms = ts;
            out.insert(TopicPartition::new(topic, partition), o);
        }
        Ok(out)
    }
}

/// `config` with PostgreSQL's `idle_in_transaction_session_timeout` set to `limit` (at least
/// 1 ms, at most `i32::MAX` ms) for every session it opens, after the `options` the
/// configuration already carries, so that this bound wins over one the connection string
/// sets.
///
/// With several brokers over one database, a broker's transactions hold locks the other
/// brokers wait for: a partition's row while it appends, deletes records or applies
/// retention; a coordinator slot's row (`FOR SHARE`) while a fenced write is in flight,
/// which a claim of the slot waits for; the cluster's advisory lock while it registers or
/// balances. A broker process stopped between two statements of such a transaction
/// (SIGSTOP, a paused VM, a stalled host) leaves its session idle in the transaction with
/// those locks held for as long as it stays stopped: every other broker's append to that
/// partition waited until it resumed. Under this bound the server ends a session idle in a
/// transaction for `limit` (SQLSTATE 25P03) and rolls the transaction back, which releases
/// its locks. Brokers pass their lease (`broker.session.timeout.ms`): a stopped broker
/// then holds the others up for at most its lease, after which they take its slots over
/// anyway, and its write in flight never lands, as the slot fence demands. A live broker
/// sends a transaction's statements back to back; should it stall that long between two of
/// them, the write fails with a retriable [`Io`](StorageErrorKind::Io) error and nothing of
/// it is written.
pub fn bound_idle_transactions(
    mut config: tokio_postgres::Config,
    limit: Duration,
) -> tokio_postgres::Config {
    let ms = limit.as_millis().clamp(1, i32::MAX as u128);
    let ours = format!("-c idle_in_transaction_session_timeout={ms}");
    let options = match config.get_options() {
        Some(theirs) if !theirs.trim().is_empty() => format!("{theirs} {ours}"),
        _ => ours,
    };
    config.options(options);
    config
}

/// `config` with the crate's defaults filled in: [`DEFAULT_CONNECT_TIMEOUT`] and the
/// application name, unless the configuration sets them.
pub(crate) fn with_defaults(mut config: tokio_postgres::Config) -> tokio_postgres::Config {
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("consumer-groups-store-postgres");
    }
    config
}

/// A pool of at most `pool_size` connections to the database of `config` (with the crate's
/// defaults, see [`with_defaults`]), for a PostgreSQL `what` (`store`, `log`).
/// A connection string (a `postgres://` URL or libpq's `key=value` form) parsed; the error
/// does not repeat the string (it may hold a password).
pub fn parse_url(url: &str) -> Result<tokio_postgres::Config, StorageError> {
    url.parse().map_err(|e| {
        StorageError::new(
            StorageErrorKind::Other,
            format!("the PostgreSQL connection string does not parse: {e}"),
        )
    })
}

/// Applies the migrations the database of `pool` lacks (on one of its connections).
pub(crate) async fn migrate_pool(pool: &Pool) -> Result<Vec<i32>, StorageError> {
    const OP: &str = "apply the schema migrations";
    let mut client = pool.get().await.map_err(|e| pool_error(OP, e))?;
    migrations::migrate(&mut client).await
}

pub(crate) fn build_pool(
    config: tokio_postgres::Config,
    pool_size: usize,
    what: &str,
) -> Result<Pool, StorageError> {
    if pool_size == 0 {
        return Err(StorageError::new(
            StorageErrorKind::Other,
            format!("a PostgreSQL {what} needs a pool of at least one connection (pool size 0)"),
        ));
    }
    let manager = Manager::from_config(
        with_defaults(config),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(pool_size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(POOL_WAIT_TIMEOUT))
        .create_timeout(Some(DEFAULT_CONNECT_TIMEOUT))
        .recycle_timeout(Some(DEFAULT_CONNECT_TIMEOUT))
        .build()
        .map_err(|e| {
            StorageError::new(
                StorageErrorKind::Other,
                format!("cannot build the PostgreSQL connection pool: {e}"),
            )
        })
}

/// One write, owned so that it can move into the task that runs it.
#[derive(Debug)]
enum Write {
    /// Upsert of every partition in the arrays (one element per partition).
    Commit {
        group: String,
        topics: Vec<String>,
        partitions: Vec<i64>,
        offsets: Vec<i64>,
        epochs: Vec<Option<i32>>,
        metadata: Vec<String>,
        timestamps: Vec<i64>,
    },
    /// Deletion of the listed partitions, or of all the group's offsets.
    Delete {
        group: String,
        partitions: Option<(Vec<String>, Vec<i64>)>,
    },
    /// Upsert of the group's record (already encoded).
    PutGroup {
        group: String,
        record: serde_json::Value,
    },
    /// A tombstone: deletion of the group's record.
    DeleteGroup { group: String },
    /// Upsert of a transactional id's record (already encoded).
    PutTransaction {
        id: String,
        record: serde_json::Value,
    },
    /// A tombstone: deletion of a transactional id's record.
    DeleteTransaction { id: String },
}

impl Write {
    /// The coordinator slot of the write's key: a group's, or a transactional id's.
    fn slot(&self) -> i32 {
        match self {
            Write::PutTransaction { id, .. } | Write::DeleteTransaction { id } => {
                cluster::transaction_slot(id)
            }
            _ => cluster::group_slot(self.key()),
        }
    }

    /// The group, or the transactional id, the write is about: the key of its coordinator
    /// slot.
    fn key(&self) -> &str {
        match self {
            Write::Commit { group, .. }
            | Write::Delete { group, .. }
            | Write::PutGroup { group, .. }
            | Write::DeleteGroup { group } => group,
            Write::PutTransaction { id, .. } | Write::DeleteTransaction { id } => id,
        }
    }

    fn describe(&self) -> String {
        let k = self.key();
        match self {
            Write::Commit { .. } => format!("commit offsets of group `{k}`"),
            Write::Delete { .. } => format!("delete offsets of group `{k}`"),
            Write::PutGroup { .. } => format!("write the record of group `{k}`"),
            Write::DeleteGroup { .. } => format!("delete the record of group `{k}`"),
            Write::PutTransaction { .. } => {
                format!("write the record of transactional id `{k}`")
            }
            Write::DeleteTransaction { .. } => {
                format!("delete the record of transactional id `{k}`")
            }
        }
    }
}

/// The one write path: a transaction that checks the slot (with a fence), writes, commits. An
/// error at any step drops the transaction, which rolls it back.
///
/// The check and the write are sent together (tokio-postgres pipelines statements issued
/// concurrently on one connection), so the fence costs no round trip of its own. Their order
/// does not matter: both run inside the transaction, which commits only when both succeeded,
/// and the check's share lock on the slot row is held until then.
async fn apply(pool: &Pool, fence: Option<&SlotFence>, write: &Write) -> Result<(), StorageError> {
    let op = write.describe();
    let mut client = pool.get().await.map_err(|e| pool_error(&op, e))?;
    let tx = client.transaction().await.map_err(|e| db_error(&op, e))?;
    let check = async {
        match fence {
            Some(fence) => fence.check(&tx, write.slot(), &op).await,
            None => Ok(()),
        }
    };
    let (checked, written) = tokio::join!(check, execute(&tx, write, &op));
    checked?;
    written?;
    tx.commit().await.map_err(|e| db_error(&op, e))
}

/// The write's one statement, inside `tx`.
async fn execute(
    tx: &deadpool_postgres::Transaction<'_>,
    write: &Write,
    op: &str,
) -> Result<(), StorageError> {
    let sql = match write {
        Write::Commit { .. } => {
            "INSERT INTO offsets (group_id, topic, partition, committed_offset, leader_epoch, \
             metadata, commit_timestamp) \
             SELECT $1, u.topic, u.partition, u.committed_offset, u.leader_epoch, u.metadata, \
             u.commit_timestamp FROM UNNEST($2::text[], $3::bigint[], $4::bigint[], \
             $5::integer[], $6::text[], $7::bigint[]) \
             AS u(topic, partition, committed_offset, leader_epoch, metadata, commit_timestamp) \
             ON CONFLICT (group_id, topic, partition) DO UPDATE SET \
             committed_offset = EXCLUDED.committed_offset, \
             leader_epoch = EXCLUDED.leader_epoch, metadata = EXCLUDED.metadata, \
             commit_timestamp = EXCLUDED.commit_timestamp"
        }
        Write::Delete {
            partitions: None, ..
        } => "DELETE FROM offsets WHERE group_id = $1",
        Write::Delete {
            partitions: Some(_),
            ..
        } => {
            "DELETE FROM offsets WHERE group_id = $1 AND (topic, partition) IN \
             (SELECT * FROM UNNEST($2::text[], $3::bigint[]))"
        }
        Write::PutGroup { .. } => {
            "INSERT INTO groups (group_id, record, updated_at) VALUES ($1, $2, now()) \
             ON CONFLICT (group_id) DO UPDATE SET record = EXCLUDED.record, \
             updated_at = EXCLUDED.updated_at"
        }
        Write::DeleteGroup { .. } => "DELETE FROM groups WHERE group_id = $1",
        Write::PutTransaction { .. } => {
            "INSERT INTO transactions (transactional_id, record, updated_at) \
             VALUES ($1, $2, now()) \
             ON CONFLICT (transactional_id) DO UPDATE SET record = EXCLUDED.record, \
             updated_at = EXCLUDED.updated_at"
        }
        Write::DeleteTransaction { .. } => "DELETE FROM transactions WHERE transactional_id = $1",
    };
    let stmt = tx.prepare_cached(sql).await.map_err(|e| db_error(op, e))?;
    let result = match write {
        Write::Commit {
            group,
            topics,
            partitions,
            offsets,
            epochs,
            metadata,
            timestamps,
        } => {
            tx.execute(
                &stmt,
                &[
                    group, topics, partitions, offsets, epochs, metadata, timestamps,
                ],
            )
            .await
        }
        Write::Delete {
            group,
            partitions: None,
        }
        | Write::DeleteGroup { group }
        | Write::DeleteTransaction { id: group } => tx.execute(&stmt, &[group]).await,
        Write::Delete {
            group,
            partitions: Some((topics, partitions)),
        } => tx.execute(&stmt, &[group, topics, partitions]).await,
        Write::PutGroup { group, record } | Write::PutTransaction { id: group, record } => {
            tx.execute(&stmt, &[group, record]).await
        }
    };
    result.map(drop).map_err(|e| db_error(op, e))
}

/// Refuses a string PostgreSQL's `text` and `jsonb` cannot hold (one with U+0000) before
/// anything is written. `owner` says whose strings they are (`group`, `transactional id`).
fn check_text<'a>(
    owner: &str,
    id: &str,
    what: &str,
    mut strings: impl Iterator<Item = &'a str>,
) -> Result<(), StorageError> {
    if strings.any(|s| s.contains('\0')) {
        return Err(StorageError::new(
            StorageErrorKind::Other,
            format!(
                "{owner} `{}`: {what} contains a NUL character (U+0000), which PostgreSQL \
                 cannot store; nothing was written",
                id.escape_debug()
            ),
        ));
    }
    Ok(())
}

/// Refuses an encoded record larger than [`MAX_RECORD_BYTES`] before anything is written.
fn check_size(owner: &str, id: &str, doc: &serde_json::Value) -> Result<(), StorageError> {
    let size = doc.to_string().len();
    if size > MAX_RECORD_BYTES {
        return Err(StorageError::new(
            StorageErrorKind::Other,
            format!(
                "the record of {owner} `{}` is {size} bytes encoded, more than the store's \
                 {MAX_RECORD_BYTES}; nothing was written",
                id.escape_debug()
            ),
        ));
    }
    Ok(())
}

/// The write of transactional id `id`'s record (an upsert) or tombstone (a delete), after
/// the checks that refuse what must not be written; `None` when there is nothing to write
/// (a tombstone for an id no row can have).
fn transaction_write(
    id: &str,
    record: Option<&TransactionRecord>,
) -> Result<Option<Write>, StorageError> {
    const OWNER: &str = "transactional id";
    let Some(r) = record else {
        if id.contains('\0') {
            return Ok(None); // nothing stored can have this id
        }
        return Ok(Some(Write::DeleteTransaction { id: id.to_string() }));
    };
    if r.transactional_id != id {
        return Err(StorageError::new(
            StorageErrorKind::Other,
            format!(
                "the record of transactional id `{}` cannot be written as `{}`; nothing was \
                 written",
                r.transactional_id.escape_debug(),
                id.escape_debug()
            ),
        ));
    }
    check_text(
        OWNER,
        id,
        "a string of the transaction's record",
        txn_record::strings(r),
    )?;
    // An offset the coordinator would have refused, which would not decode once stored.
    for (group, offsets) in &r.pending_offsets {
        validate_committed(group, offsets).map_err(|e| {
            StorageError::new(
                e.kind(),
                format!(
                    "transactional id `{}`, pending offsets: {}; nothing was written",
                    id.escape_debug(),
                    e.message()
                ),
            )
        })?;
    }
    let doc = txn_record::encode(r);
    check_size(OWNER, id, &doc)?;
    Ok(Some(Write::PutTransaction {
        id: id.to_string(),
        record: doc,
    }))
}

/// The arrays of a commit, after checking what PostgreSQL cannot store.
fn commit_write(group: &str, offsets: &CommittedOffsets) -> Result<Write, StorageError> {
    check_text("group", group, "the group id", std::iter::once(group))?;
    check_text(
        "group",
        group,
        "a topic name or metadata string",
        offsets
            .iter()
            .flat_map(|(tp, o)| [tp.topic(), o.metadata.as_str()]),
    )?;
    let n = offsets.len();
    let (mut topics, mut partitions, mut values) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut epochs, mut metadata, mut timestamps) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for (tp, o) in offsets {
        let ts = i64::try_from(o.commit_timestamp_ms).map_err(|_| {
            StorageError::new(
                StorageErrorKind::Other,
                format!(
                    "group `{group}`, partition {tp}: commit time {} ms does not fit a \
                     signed 64-bit column; nothing was written",
                    o.commit_timestamp_ms
                ),
            )
        })?;
        topics.push(tp.topic().to_string());
        partitions.push(i64::from(tp.partition()));
        values.push(o.offset);
        epochs.push(o.leader_epoch);
        metadata.push(o.metadata.clone());
        timestamps.push(ts);
    }
    Ok(Write::Commit {
        group: group.to_string(),
        topics,
        partitions,
        offsets: values,
        epochs,
        metadata,
        timestamps,
    })
}

#[async_trait]
impl OffsetStore for PostgresStore {
    async fn committed(
        &self,
        group: &str,
        tp: &TopicPartition,
    ) -> Result<Option<i64>, StorageError> {
        if group.contains('\0') || tp.topic().contains('\0') {
            return Ok(None);
        }
        let op = format!("read the offset of {tp} in group `{group}`");
        let client = self.client(&op).await?;
        let stmt = client
            .prepare_cached(
                "SELECT committed_offset FROM offsets \
                 WHERE group_id = $1 AND topic = $2 AND partition = $3",
            )
            .await
            .map_err(|e| db_error(&op, e))?;
        let row = client
            .query_opt(&stmt, &[&group, &tp.topic(), &i64::from(tp.partition())])
            .await
            .map_err(|e| db_error(&op, e))?;
        row.map(|r| r.try_get::<_, i64>(0))
            .transpose()
            .map_err(|e| db_error(&op, e))
    }

    async fn list(&self, group: &str) -> Result<OffsetMap, StorageError> {
        Ok(coordinator_core::offsets_of(
            &self.read_offsets(group).await?,
        ))
    }

    async fn groups(&self) -> Result<Vec<String>, StorageError> {
        const OP: &str = "list the groups with offsets";
        let client = self.client(OP).await?;
        let rows = client
            .query("SELECT DISTINCT group_id FROM offsets", &[])
            .await
            .map_err(|e| db_error(OP, e))?;
        let mut groups = rows
            .iter()
            .map(|r| r.try_get::<_, String>(0))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| db_error(OP, e))?;
        groups.sort_unstable();
        Ok(groups)
    }

    async fn commit(
        &self,
        group: &str,
        offsets: &OffsetMap,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        validate_offsets(group, offsets)?;
        self.commit_with_metadata(group, &coordinator_core::with_no_metadata(offsets), fence)
            .await
    }

    async fn delete<'a>(
        &self,
        group: &str,
        partitions: Option<&'a [TopicPartition]>,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        if group.contains('\0') {
            return Ok(()); // nothing stored can have this id
        }
        let partitions = partitions.map(|tps| {
            tps.iter()
                .filter(|tp| !tp.topic().contains('\0'))
                .map(|tp| (tp.topic().to_string(), i64::from(tp.partition())))
                .unzip()
        });
        let write = Write::Delete {
            group: group.to_string(),
            partitions,
        };
        self.write(write, fence).await
    }

    fn keeps_metadata(&self) -> bool {
        true
    }

    async fn list_with_metadata(&self, group: &str) -> Result<CommittedOffsets, StorageError> {
        self.read_offsets(group).await
    }

    async fn commit_with_metadata(
        &self,
        group: &str,
        offsets: &CommittedOffsets,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        validate_committed(group, offsets)?;
        if offsets.is_empty() {
            return Ok(());
        }
        let write = commit_write(group, offsets)?;
        self.write(write, fence).await
    }

    fn keeps_groups(&self) -> bool {
        true
    }

    async fn write_group(
        &self,
        group: &str,
        record: Option<&GroupRecord>,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        let write = match record {
            Some(r) => {
                if r.group_id != group {
                    return Err(StorageError::new(
                        StorageErrorKind::Other,
                        format!(
                            "the record of group `{}` cannot be written as group `{group}`",
                            r.group_id
                        ),
                    ));
                }
                check_text(
                    "group",
                    group,
                    "a string of the group's record",
                    record::strings(r),
                )?;
                let doc = record::encode(r);
                check_size("group", group, &doc)?;
                Write::PutGroup {
                    group: group.to_string(),
                    record: doc,
                }
            }
            None if group.contains('\0') => return Ok(()),
            None => Write::DeleteGroup {
                group: group.to_string(),
            },
        };
        self.write(write, fence).await
    }

    async fn load_groups(&self) -> Result<Vec<GroupRecord>, StorageError> {
        const OP: &str = "load the groups' records";
        let client = self.client(OP).await?;
        let rows = client
            .query("SELECT group_id, record FROM groups", &[])
            .await
            .map_err(|e| db_error(OP, e))?;
        let mut records = Vec::with_capacity(rows.len());
        for row in rows {
            let id: String = row.try_get(0).map_err(|e| db_error(OP, e))?;
            let doc: serde_json::Value = row.try_get(1).map_err(|e| db_error(OP, e))?;
            let corrupt = |why: String| {
                StorageError::new(
                    StorageErrorKind::Corrupt,
                    format!("table groups, group `{id}`: {why}"),
                )
            };
            let r = record::decode(&doc).map_err(corrupt)?;
            if r.group_id != id {
                return Err(corrupt(format!("the record names group `{}`", r.group_id)));
            }
            records.push(r);
        }
        records.sort_unstable_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(records)
    }

    fn keeps_transactions(&self) -> bool {
        true
    }

    async fn write_transaction(
        &self,
        id: &str,
        record: Option<&TransactionRecord>,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        match transaction_write(id, record)? {
            Some(write) => self.write(write, fence).await,
            None => Ok(()),
        }
    }

    async fn load_transactions(&self) -> Result<Vec<TransactionRecord>, StorageError> {
        const OP: &str = "load the transactions' records";
        let client = self.client(OP).await?;
        let rows = client
            .query("SELECT transactional_id, record FROM transactions", &[])
            .await
            .map_err(|e| db_error(OP, e))?;
        let mut records = Vec::with_capacity(rows.len());
        for row in rows {
            let id: String = row.try_get(0).map_err(|e| db_error(OP, e))?;
            let doc: serde_json::Value = row.try_get(1).map_err(|e| db_error(OP, e))?;
            let corrupt = |why: String| {
                StorageError::new(
                    StorageErrorKind::Corrupt,
                    format!("table transactions, transactional id `{id}`: {why}"),
                )
            };
            let r = txn_record::decode(&doc).map_err(corrupt)?;
            if r.transactional_id != id {
                return Err(corrupt(format!(
                    "the record names transactional id `{}`",
                    r.transactional_id
                )));
            }
            records.push(r);
        }
        records.sort_unstable_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;

    #[test]
    fn idle_transactions_are_bounded_after_the_options_given() {
        let limit = Duration::from_millis(1500);
        let config = bound_idle_transactions(parse_url("host=/tmp dbname=d").unwrap(), limit);
        assert_eq!(
            config.get_options(),
            Some("-c idle_in_transaction_session_timeout=1500")
        );
        let given = parse_url("host=/tmp options='-c search_path=s'").unwrap();
        let config = bound_idle_transactions(given, limit);
        assert_eq!(
            config.get_options(),
            Some("-c search_path=s -c idle_in_transaction_session_timeout=1500")
        );
        // 0 would switch the bound off: the least bound is 1 ms.
        let config = bound_idle_transactions(parse_url("host=/tmp").unwrap(), Duration::ZERO);
        assert_eq!(
            config.get_options(),
            Some("-c idle_in_transaction_session_timeout=1")
        );
    }

    fn committed(entries: &[(&str, u32, i64, &str, u64)]) -> CommittedOffsets {
        entries
            .iter()
            .map(|&(t, p, o, m, ts)| {
                let mut v = OffsetAndMetadata::new(o).with_metadata(m);
                v.commit_timestamp_ms = ts;
                (TopicPartition::new(t, p), v)
            })
            .collect()
    }

    #[test]
    fn a_commit_becomes_one_array_element_per_partition_in_order() {
        let c = committed(&[("b", u32::MAX, 7, "x", 5), ("a", 0, 1, "", 0)]);
        let Write::Commit {
            group,
            topics,
            partitions,
            offsets,
            epochs,
            metadata,
            timestamps,
        } = commit_write("g", &c).unwrap()
        else {
            panic!("not a commit");
        };
        assert_eq!(group, "g");
        assert_eq!(topics, ["a", "b"]);
        assert_eq!(partitions, [0, i64::from(u32::MAX)]);
        assert_eq!(offsets, [1, 7]);
        assert_eq!(epochs, [None, None]);
        assert_eq!(metadata, ["", "x"]);
        assert_eq!(timestamps, [0, 5]);
    }

    #[test]
    fn what_postgres_cannot_hold_is_refused_before_any_write() {
        let err = commit_write("g", &committed(&[("t\0", 0, 1, "", 0)])).unwrap_err();
        assert!(err.message().contains("NUL"), "{err}");
        let err = commit_write("g", &committed(&[("t", 0, 1, "", u64::MAX)])).unwrap_err();
        assert!(err.message().contains("commit time"), "{err}");
        let err = commit_write("g\0h", &committed(&[("t", 0, 1, "", 0)])).unwrap_err();
        assert!(
            err.message().contains("group `g\\0h`"),
            "the id is escaped: {err}"
        );
    }

    fn txn(id: &str) -> TransactionRecord {
        TransactionRecord {
            transactional_id: id.to_string(),
            producer_id: 7,
            producer_epoch: 1,
            last_producer_id: -1,
            last_producer_epoch: -1,
            timeout_ms: 60_000,
            state: coordinator_core::txn::TxnState::PrepareCommit,
            partitions: [TopicPartition::new("t", 0)].into(),
            groups: ["g".to_string()].into(),
            pending_offsets: [("g".to_string(), committed(&[("t", 0, 5, "m", 9)]))].into(),
            start_ms: Some(1),
            last_update_ms: 2,
            transaction_version: 0,
        }
    }

    #[test]
    fn a_transaction_record_becomes_an_upsert_and_a_tombstone_a_delete() {
        let r = txn("tx");
        let Some(Write::PutTransaction { id, record }) = transaction_write("tx", Some(&r)).unwrap()
        else {
            panic!("not an upsert");
        };
        assert_eq!(id, "tx");
        assert_eq!(txn_record::decode(&record), Ok(r));
        let Some(Write::DeleteTransaction { id }) = transaction_write("tx", None).unwrap() else {
            panic!("not a delete");
        };
        assert_eq!(id, "tx");
        assert!(
            transaction_write("t\0x", None).unwrap().is_none(),
            "no row can have an id with NUL: nothing to delete"
        );
    }

    #[test]
    fn a_transaction_record_that_must_not_be_written_is_refused() {
        let err = transaction_write("other", Some(&txn("tx"))).unwrap_err();
        assert_eq!(err.kind(), StorageErrorKind::Other);
        assert!(
            err.message().contains("cannot be written as `other`"),
            "{err}"
        );

        let err = transaction_write("t\0x", Some(&txn("t\0x"))).unwrap_err();
        assert!(err.message().contains("transactional id `t\\0x`"), "{err}");
        assert!(err.message().contains("NUL"), "{err}");
        let mut r = txn("tx");
        r.pending_offsets
            .insert("g2".into(), committed(&[("t", 1, 1, "m\0", 0)]));
        let err = transaction_write("tx", Some(&r)).unwrap_err();
        assert!(err.message().contains("NUL"), "{err}");

        let mut r = txn("tx");
        r.pending_offsets
            .insert("g2".into(), committed(&[("t", 1, -1, "", 0)]));
        let err = transaction_write("tx", Some(&r)).unwrap_err();
        assert_eq!(err.kind(), StorageErrorKind::InvalidOffset);
        assert!(err.message().contains("transactional id `tx`"), "{err}");
        assert!(err.message().contains("group `g2`"), "{err}");

        let mut r = txn("tx");
        r.pending_offsets.insert(
            "big".into(),
            committed(&[("t", 1, 1, &"x".repeat(MAX_RECORD_BYTES), 0)]),
        );
        let err = transaction_write("tx", Some(&r)).unwrap_err();
        assert!(err.message().contains("bytes encoded, more than"), "{err}");
    }
}
