//! The broker's error enum: what can stop it from starting or end it abnormally.
//!
//! Errors of single requests are not here: they go back to the client as Kafka error codes
//! (see the `api` module). Codes are stable: never renamed, never reused.

use coordinator_core::{LogError, StorageError};

/// Why the broker could not start, or stopped abnormally.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// A setting is malformed: fix the command line.
    #[error("invalid setting `{setting}`: {reason}")]
    InvalidConfig {
        /// The setting, spelled as its command-line flag.
        setting: &'static str,
        /// Why it was refused.
        reason: String,
    },

    /// The listener could not be bound (address in use, no permission).
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address asked for.
        address: std::net::SocketAddr,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },

    /// PostgreSQL (`--postgres`) could not be reached or used at start; `target` names the
    /// host, port, database and user, never the password.
    #[error("PostgreSQL ({target}): {reason}")]
    Postgres {
        /// Where the broker tried to connect.
        target: String,
        /// What failed.
        reason: String,
    },

    /// With `--postgres`: another process took this broker's node id or coordinator slots
    /// over after its lease ran out (it was paused, or cut off from the database, for longer
    /// than `--broker-session-timeout-ms`). Its writes were refused from then on; it stops.
    #[error("node {node_id} was deposed: {reason}; it stops (start it again to rejoin)")]
    Fenced {
        /// This broker's node id.
        node_id: i32,
        /// What the heartbeat found.
        reason: String,
    },

    /// The offset store could not be opened or written: another broker holds the data
    /// directory's lock, or the directory is unusable.
    #[error("offset store: {0}")]
    Store(#[from] StorageError),

    /// A topic given at start could not be created.
    #[error("cannot create topic: {0}")]
    Topic(#[from] LogError),

    /// The coordinator refused its settings.
    #[error("coordinator: {0}")]
    Coordinator(#[from] coordinator_core::Error),

    /// The transaction coordinator refused its settings, or could not load its records.
    #[error("transaction coordinator: {0}")]
    Transactions(#[from] coordinator_core::txn::TxnError),
}

impl BrokerError {
    /// Every code [`BrokerError::code`] can return, besides those forwarded from the store and
    /// the coordinator.
    pub const CODES: &'static [&'static str] = &[
        "INVALID_CONFIG",
        "BIND_FAILED",
        "POSTGRES_UNAVAILABLE",
        "BROKER_FENCED",
    ];

    /// The stable code: `INVALID_CONFIG`, `BIND_FAILED`, `POSTGRES_UNAVAILABLE`,
    /// `BROKER_FENCED`, or the store's, log's or
    /// coordinator's own code.
    pub fn code(&self) -> &'static str {
        match self {
            BrokerError::InvalidConfig { .. } => "INVALID_CONFIG",
            BrokerError::Bind { .. } => "BIND_FAILED",
            BrokerError::Postgres { .. } => "POSTGRES_UNAVAILABLE",
            BrokerError::Fenced { .. } => "BROKER_FENCED",
            BrokerError::Store(e) => e.code(),
            BrokerError::Topic(e) => e.code(),
            BrokerError::Coordinator(e) => e.code(),
            BrokerError::Transactions(e) => e.code(),
        }
    }
}
