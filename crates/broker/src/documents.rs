//! Where the broker keeps the state it rewrites whole (the ACLs, the SCRAM credentials changed
//! at run time): files of the data directory, or documents in PostgreSQL (`--postgres`). One
//! name per state (`acls.json`, `scram-credentials.json`) in both.

use std::path::PathBuf;
use std::sync::Arc;

/// A place for whole documents. Replacing one is atomic in both: a failed write leaves the
/// previous document as it was.
#[derive(Clone, Debug)]
pub(crate) enum Documents {
    /// Files of a data directory (written beside, synced, renamed over).
    Dir(PathBuf),
    /// Rows of PostgreSQL's `documents` table.
    Postgres(Arc<store_postgres::PostgresDocuments>),
}

impl Documents {
    /// Where document `name` lives, for messages: a path, or the table row.
    pub(crate) fn shown(&self, name: &str) -> String {
        match self {
            Documents::Dir(dir) => dir.join(name).display().to_string(),
            Documents::Postgres(_) => format!("PostgreSQL document {name}"),
        }
    }

    /// The document `name`, or `None` if there is none.
    ///
    /// # Errors
    /// What failed, naming where.
    pub(crate) async fn load(&self, name: &str) -> Result<Option<Vec<u8>>, String> {
        match self {
            Documents::Dir(dir) => {
                let path = dir.join(name);
                match tokio::fs::read(&path).await {
                    Ok(bytes) => Ok(Some(bytes)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(format!("cannot read `{}`: {e}", path.display())),
                }
            }
            Documents::Postgres(db) => db.load(name).await.map_err(|e| e.to_string()),
        }
    }

    /// Replaces the document `name` with what `change` makes of it (`None`: leave it), read
    /// and written as one step: in PostgreSQL in one transaction under a lock, so brokers
    /// sharing the database never lose each other's changes; in a data directory (owned by
    /// one process, whose writers the caller serializes) a read, then a replace.
    ///
    /// # Errors
    /// `change`'s refusal, or what failed, naming where; the previous document is unchanged.
    pub(crate) async fn update(
        &self,
        name: &str,
        private: bool,
        change: impl FnOnce(Option<Vec<u8>>) -> Result<Option<Vec<u8>>, String>,
    ) -> Result<(), String> {
        match self {
            Documents::Dir(_) => match change(self.load(name).await?)? {
                Some(bytes) => self.replace(name, bytes, private).await,
                None => Ok(()),
            },
            Documents::Postgres(db) => db.update(name, change).await.map_err(|e| e.to_string())?,
        }
    }

    /// Whether another process may change the documents meanwhile (several brokers over
    /// one database), so that what is in force is read again now and then.
    pub(crate) fn is_shared(&self) -> bool {
        matches!(self, Documents::Postgres(_))
    }

    /// Replaces the document `name` with `bytes` (a file of mode 600 when `private`).
    ///
    /// # Errors
    /// What failed, naming where; the previous document is unchanged.
    pub(crate) async fn replace(
        &self,
        name: &str,
        bytes: Vec<u8>,
        private: bool,
    ) -> Result<(), String> {
        match self {
            Documents::Dir(dir) => {
                let path = dir.join(name);
                tokio::task::spawn_blocking(move || crate::files::replace(&path, &bytes, private))
                    .await
                    .map_err(|e| format!("writing {name} failed: {e}"))?
            }
            Documents::Postgres(db) => db.replace(name, &bytes).await.map_err(|e| e.to_string()),
        }
    }
}
