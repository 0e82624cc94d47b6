//! Documents: small named values kept whole and replaced whole, one row each (the broker's
//! ACLs and its SCRAM credentials changed at run time, which a data directory keeps as files).
//!
//! A replace is one statement (an upsert): it commits whole or not at all, so a failed
//! write leaves the previous document as it was, as the data directory's atomic file
//! replacement does.

use std::fmt;

use coordinator_core::{StorageError, StorageErrorKind};
use deadpool_postgres::Pool;

use crate::error::{db_error, pool_error};
use crate::{build_pool, migrate_pool, parse_url};

/// The largest document kept (16 MiB): a larger one is refused before anything is written.
pub const MAX_DOCUMENT_BYTES: usize = 16 << 20;

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
        let pool = build_pool(parse_url(url)?, pool_size, "documents")?;
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
            return Err(StorageError::new(
                StorageErrorKind::Other,
                format!(
                    "the document `{name}` ({} bytes) is refused: a name is needed and at most \
                     {MAX_DOCUMENT_BYTES} bytes are kept",
                    body.len()
                ),
            ));
        }
        let op = format!("replace the document `{name}`");
        let client = self.pool.get().await.map_err(|e| pool_error(&op, e))?;
        client
            .execute(
                "INSERT INTO documents (name, body) VALUES ($1, $2) \
                 ON CONFLICT (name) DO UPDATE SET body = EXCLUDED.body, updated_at = now()",
                &[&name, &body],
            )
            .await
            .map_err(|e| db_error(&op, e))?;
        Ok(())
    }

    /// Closes the pool: every later call fails.
    pub fn close(&self) {
        self.pool.close();
    }
}
