//! How PostgreSQL's and the pool's failures become the core's [`StorageError`].
//!
//! Every message names the operation that failed and, for an error the server sent, its
//! SQLSTATE. A failure of the connection (no server, a dropped connection, the server
//! shutting down, too many connections, a serialization failure or deadlock) has kind
//! [`StorageErrorKind::Io`]: the request may succeed once the cause is gone. Anything else
//! the server refuses has kind [`StorageErrorKind::Other`].

use coordinator_core::{StorageError, StorageErrorKind};
use deadpool_postgres::PoolError;

/// Whether a SQLSTATE says the connection or the server's state failed, not the request.
fn is_transient(sqlstate: &str) -> bool {
    // 08: connection exception; 53: insufficient resources (53300 too many connections);
    // 57P01-57P05: admin/crash shutdown, cannot connect now, database dropped, idle session
    // timeout; 25P03 idle-in-transaction session timeout (the session stalled inside a
    // transaction, which was rolled back); 40001 serialization failure; 40P01 deadlock
    // detected.
    sqlstate.starts_with("08")
        || sqlstate.starts_with("53")
        || sqlstate.starts_with("57P")
        || sqlstate == "25P03"
        || sqlstate == "40001"
        || sqlstate == "40P01"
}

/// A failed statement or transaction of `op` (e.g. `commit offsets of group `g``).
pub(crate) fn db_error(op: &str, e: tokio_postgres::Error) -> StorageError {
    let (kind, message) = match e.as_db_error() {
        Some(db) => {
            let code = db.code().code();
            let kind = if is_transient(code) {
                StorageErrorKind::Io
            } else {
                StorageErrorKind::Other
            };
            let retry = if is_transient(code) {
                "; retriable once the server is back"
            } else {
                ""
            };
            (
                kind,
                format!(
                    "PostgreSQL failed to {op} (SQLSTATE {code}): {}{retry}",
                    db.message()
                ),
            )
        }
        // No SQLSTATE: the connection itself failed (closed, refused, timed out, or a
        // protocol error).
        None => (
            StorageErrorKind::Io,
            format!(
                "the connection to PostgreSQL failed while trying to {op}: {}; retriable \
                 once the server is back",
                chain(&e)
            ),
        ),
    };
    StorageError::new(kind, message).with_source(e)
}

/// `e` and its causes: `error connecting to server: No such file or directory (os error 2)`.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A failure to get a connection from the pool for `op`.
pub(crate) fn pool_error(op: &str, e: PoolError) -> StorageError {
    match e {
        PoolError::Backend(e) => db_error(op, e),
        PoolError::Timeout(which) => StorageError::new(
            StorageErrorKind::Io,
            format!(
                "no PostgreSQL connection to {op}: the pool timed out ({which:?}); \
                 retriable once the server is back"
            ),
        ),
        PoolError::Closed => StorageError::new(
            StorageErrorKind::Other,
            format!("cannot {op}: the store's connection pool is closed"),
        ),
        other => StorageError::new(
            StorageErrorKind::Other,
            format!("no PostgreSQL connection to {op}: {other}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_states_are_transient_and_others_are_not() {
        for code in [
            "08006", "08001", "57P01", "57P03", "53300", "40001", "40P01", "25P03",
        ] {
            assert!(is_transient(code), "{code}");
        }
        for code in ["23505", "22021", "42P01", "23514", "25P02"] {
            assert!(!is_transient(code), "{code}");
        }
    }

    #[test]
    fn a_closed_pool_names_the_operation() {
        let e = pool_error("list offsets of group `g`", PoolError::Closed);
        assert_eq!(e.kind(), StorageErrorKind::Other);
        assert!(e.message().contains("list offsets of group `g`"), "{e}");
    }

    #[test]
    fn a_pool_timeout_is_io() {
        let e = pool_error(
            "commit",
            PoolError::Timeout(deadpool_postgres::TimeoutType::Create),
        );
        assert_eq!(e.kind(), StorageErrorKind::Io);
        assert!(e.message().contains("retriable"), "{e}");
    }
}
