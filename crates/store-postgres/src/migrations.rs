//! The store's versioned schema: migrations embedded in the binary, applied at
//! [`connect`](crate::PostgresStore::connect).
//!
//! Each migration runs in its own transaction that first takes a transaction-scoped
//! advisory lock ([`MIGRATION_LOCK`]), so brokers starting together apply each migration
//! exactly once: the second waits for the first, then sees the version recorded in
//! `schema_migrations` and skips it. A database whose schema is newer than this build knows
//! is refused rather than served.

use coordinator_core::{StorageError, StorageErrorKind};
use tokio_postgres::Client;

use crate::error::db_error;

/// One migration: a version and the SQL that brings the schema from `version - 1` to it.
#[derive(Clone, Copy, Debug)]
pub struct Migration {
    /// The schema version after this migration (1, 2, …, with no gaps).
    pub version: i32,
    /// What it does, for logs.
    pub name: &'static str,
    /// The statements, run as one batch inside the migration's transaction.
    pub sql: &'static str,
}

/// Every migration, in order. Released migrations are never edited: a change of schema is
/// a new one.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "offsets, groups and coordinator_slots",
        sql: include_str!("../migrations/0001_initial.sql"),
    },
    Migration {
        version: 2,
        name: "the partition log: topics, partitions and batches",
        sql: include_str!("../migrations/0002_partition_log.sql"),
    },
    Migration {
        version: 3,
        name: "documents: a broker's ACLs and SCRAM credentials",
        sql: include_str!("../migrations/0003_documents.sql"),
    },
    Migration {
        version: 4,
        name: "transactions: the transaction coordinator's records",
        sql: include_str!("../migrations/0004_transactions.sql"),
    },
    Migration {
        version: 5,
        name: "brokers under a lease, and the coordinator slots' owners",
        sql: include_str!("../migrations/0005_brokers.sql"),
    },
    Migration {
        version: 6,
        name: "compaction of the partition log: sparse batches and the cleaner's offset",
        sql: include_str!("../migrations/0006_compaction.sql"),
    },
];

/// The schema version this build serves: the last migration's.
pub const SCHEMA_VERSION: i32 = 6;

/// The key of the advisory lock every migration transaction takes (the bytes of
/// `cgstore1`), the same in every database.
pub const MIGRATION_LOCK: i64 = 0x6367_7374_6f72_6531;

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (\
     version integer PRIMARY KEY, \
     name text NOT NULL, \
     applied_at timestamptz NOT NULL DEFAULT now())";

/// Applies every migration the database lacks; returns the versions it applied (empty when
/// the schema was already current).
pub(crate) async fn migrate(client: &mut Client) -> Result<Vec<i32>, StorageError> {
    const OP: &str = "apply the schema migrations";
    // The table of versions itself, under the lock: two concurrent `CREATE TABLE IF NOT
    // EXISTS` can otherwise both try to create it and one fail.
    {
        let tx = client.transaction().await.map_err(|e| db_error(OP, e))?;
        lock(&tx).await?;
        tx.batch_execute(CREATE_TABLE)
            .await
            .map_err(|e| db_error("create the table schema_migrations", e))?;
        tx.commit().await.map_err(|e| db_error(OP, e))?;
    }
    let mut applied = Vec::new();
    for m in MIGRATIONS {
        let tx = client.transaction().await.map_err(|e| db_error(OP, e))?;
        lock(&tx).await?;
        let current = current_version(&tx).await?;
        if current > SCHEMA_VERSION {
            return Err(newer_schema(current));
        }
        if current >= m.version {
            continue;
        }
        if current != m.version - 1 {
            return Err(StorageError::new(
                StorageErrorKind::Corrupt,
                format!(
                    "the database's schema is at version {current}, migration {} needs {}",
                    m.version,
                    m.version - 1
                ),
            ));
        }
        let what = format!("apply schema migration {} ({})", m.version, m.name);
        tx.batch_execute(m.sql)
            .await
            .map_err(|e| db_error(&what, e))?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            &[&m.version, &m.name],
        )
        .await
        .map_err(|e| db_error(&what, e))?;
        tx.commit().await.map_err(|e| db_error(&what, e))?;
        tracing::info!(
            version = m.version,
            name = m.name,
            "applied schema migration"
        );
        applied.push(m.version);
    }
    // A newer schema with no migration left for us to run.
    let version = current_version(client).await?;
    if version > SCHEMA_VERSION {
        return Err(newer_schema(version));
    }
    Ok(applied)
}

async fn lock(tx: &tokio_postgres::Transaction<'_>) -> Result<(), StorageError> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map(drop)
        .map_err(|e| db_error("take the migrations' advisory lock", e))
}

/// The highest version recorded in `schema_migrations` (0: none).
pub(crate) async fn current_version(
    client: &impl tokio_postgres::GenericClient,
) -> Result<i32, StorageError> {
    let row = client
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            &[],
        )
        .await
        .map_err(|e| db_error("read the schema version", e))?;
    row.try_get(0)
        .map_err(|e| db_error("read the schema version", e))
}

fn newer_schema(version: i32) -> StorageError {
    StorageError::new(
        StorageErrorKind::Other,
        format!(
            "the database's schema is at version {version}, newer than this build's \
             {SCHEMA_VERSION}: upgrade this broker before serving from that database"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_count_up_from_one_to_the_schema_version() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(usize::try_from(m.version).ok(), Some(i + 1), "{}", m.name);
            assert!(!m.sql.trim().is_empty());
        }
        assert_eq!(MIGRATIONS.last().map(|m| m.version), Some(SCHEMA_VERSION));
    }
}
