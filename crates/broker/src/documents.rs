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
