//! Documents: small named values kept whole and replaced whole, one row each (the broker's
//! ACLs and its SCRAM credentials changed at run time, which a data directory keeps as files).
//!
//! A replace is one statement (an upsert): it commits whole or not at all, so a failed
//! write leaves the previous document as it was, as the data directory's atomic file
//! replacement does. An [`update`](PostgresDocuments::update) reads and replaces in one
//! transaction under an advisory lock, so brokers sharing the database never lose each
//! other's changes.

use std::fmt;

use coordinator_core::{StorageError, StorageErrorKind};
use deadpool_postgres::Pool;

use crate::error::{db_error, pool_error};
use crate::{build_pool, migrate_pool, parse_url};

/// The largest document kept (16 MiB): a larger one is refused before anything is written.
pub const MAX_DOCUMENT_BYTES: usize = 16 << 20;

/// The advisory lock [`PostgresDocuments::update`] takes (the bytes of `cgdocum1`).
const DOCUMENTS_LOCK: i64 = 0x6367_646f_6375_6d31;

/// Writes a document whole (creating it).
const UPSERT: &str = "INSERT INTO documents (name, body) VALUES ($1, $2) \
     ON CONFLICT (name) DO UPDATE SET body = EXCLUDED.body, updated_at = now()";

fn too_large(name: &str, len: usize) -> StorageError {
    StorageError::new(
        StorageErrorKind::Other,
        format!(
            "the document `{name}` ({len} bytes) is refused: a name is needed and at most \
             {MAX_DOCUMENT_BYTES} bytes are kept"
        ),
    )
}

/// Named documents in the `documents` table. Cheap to share; every call takes a connection
/// from its own pool.
pub struct PostgresDocuments {
    pool: Pool,
}

impl fmt::Debug for PostgresDocuments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = self.pool.status();
        f.debug_struct("PostgresDocuments")
            .field("pool_max_size", &status.max_size)
            .field("pool_size", &status.size)
            .finish()
    }
}

impl PostgresDocuments {
    /// Connects to the database of `url` with at most `pool_size` connections and applies
    /// the migrations it lacks (as [`PostgresStore::connect`](crate::PostgresStore::connect)).
    ///
    /// # Errors
    /// As `PostgresStore::connect`'s: a string that does not parse, a `pool_size` of 0, a
    /// server that cannot be reached ([`Io`](StorageErrorKind::Io)), a failed migration, a
    /// schema newer than this build.
    pub async fn connect(url: &str, pool_size: usize) -> Result<Self, StorageError> {
        Self::connect_with(parse_url(url)?, pool_size).await
    }

    /// [`connect`](Self::connect) with a parsed configuration (for example one whose idle
    /// transactions are bounded, [`bound_idle_transactions`](crate::bound_idle_transactions):
    /// an update holds the lock every other process's update waits for).
    pub async fn connect_with(
        config: tokio_postgres::Config,
        pool_size: usize,
    ) -> Result<Self, StorageError> {
        let pool = build_pool(config, pool_size, "documents")?;
        migrate_pool(&pool).await?;
        Ok(PostgresDocuments { pool })
    }

    /// The document `name`, or `None` if none was ever stored.
    ///
    /// # Errors
    /// The database's ([`Io`](StorageErrorKind::Io) when the connection failed).
    pub async fn load(&self, name: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let op = format!("read the document `{name}`");
        let client = self.pool.get().await.map_err(|e| pool_error(&op, e))?;
        let row = client
            .query_opt("SELECT body FROM documents WHERE name = $1", &[&name])
            .await
            .map_err(|e| db_error(&op, e))?;
        Ok(row.map(|r| r.get::<_, Vec<u8>>(0)))
    }

    /// Replaces the document `name` with `body` (creating it), in one statement: on error
    /// the previous document is unchanged.
    ///
    /// # Errors
    /// An empty name or a body over [`MAX_DOCUMENT_BYTES`] (nothing written); the
    /// database's.
    pub async fn replace(&self, name: &str, body: &[u8]) -> Result<(), StorageError> {
        if name.is_empty() || body.len() > MAX_DOCUMENT_BYTES {
            return Err(too_large(name, body.len()));
        }
        let op = format!("replace the document `{name}`");
        let client = self.pool.get().await.map_err(|e| pool_error(&op, e))?;
        client
            .execute(UPSERT, &[&name, &body])
            .await
            .map_err(|e| db_error(&op, e))?;
        Ok(())
    }

    /// Reads the document `name` and replaces it with what `change` makes of it, in one
    /// transaction under a lock that every `update` takes (so two processes changing one
    /// document never lose each other's change). `change` gets the body as stored (`None`
    /// if there is none) and returns the new body, or `None` to leave it as it is, or its own
    /// refusal, which is returned inside `Ok` with nothing written.
    ///
    /// # Errors
    /// A new body over [`MAX_DOCUMENT_BYTES`] (nothing written); the database's.
    pub async fn update<E>(
        &self,
        name: &str,
        change: impl FnOnce(Option<Vec<u8>>) -> Result<Option<Vec<u8>>, E>,
    ) -> Result<Result<(), E>, StorageError> {
        let op = format!("update the document `{name}`");
        let mut client = self.pool.get().await.map_err(|e| pool_error(&op, e))?;
        let tx = client.transaction().await.map_err(|e| db_error(&op, e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&DOCUMENTS_LOCK])
            .await
            .map_err(|e| db_error(&op, e))?;
        let row = tx
            .query_opt("SELECT body FROM documents WHERE name = $1", &[&name])
            .await
            .map_err(|e| db_error(&op, e))?;
        let body = match change(row.map(|r| r.get::<_, Vec<u8>>(0))) {
            Ok(Some(body)) => body,
            Ok(None) => return Ok(Ok(())),
            Err(refused) => return Ok(Err(refused)),
        };
        if name.is_empty() || body.len() > MAX_DOCUMENT_BYTES {
            return Err(too_large(name, body.len()));
        }
        tx.execute(UPSERT, &[&name, &body])
            .await
            .map_err(|e| db_error(&op, e))?;
        tx.commit().await.map_err(|e| db_error(&op, e))?;
        Ok(Ok(()))
    }

    /// Closes the pool: every later call fails.
    pub fn close(&self) {
        self.pool.close();
    }
}
