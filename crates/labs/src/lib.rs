//! # labs
//!
//! The composition root of the workspace and the chapter's runnable labs.
//!
//! - [`Cluster`] wires the parts for applications, tests and labs: the core's
//!   [`Coordinator`](coordinator_core::Coordinator), the MiniKafka round-robin assignor as
//!   the default strategy and Kafka's four for negotiation (`assignor`), the JSON offset store in a data directory (`offset-store`) and the
//!   in-memory partition log ([`partition_log::MemoryLog`], `partition-log`). It lives here because the
//!   composition root is the only crate allowed to depend on several adapters; the adapters
//!   themselves know only the core's ports.
//! - [`lab`] holds the labs, one module each, and `src/bin/` one thin binary per lab:
//!   `rebalance` (the chapter's "Measured output", line for line), `fencing` (exercise 2),
//!   `expiry` (exercise 3) and `replay` (exercise 1). Each uses a temporary directory,
//!   removes it, and exits non-zero if the system does not behave as the chapter says.
//! - [`narrate`] holds what the labs share: numbered steps, the chapter's spelling of
//!   partition lists, and the runner [`run_lab`].
//!
//! ## Where it sits
//!
//! ```text
//!   labs ──► consumer ──► coordinator-core ◄── assignor, partition-log
//!     ├──────────────────────────▲────────────── offset-store
//!     └─► assignor, offset-store, partition-log (concrete adapters chosen here, and only here)
//! ```
//!
//! ## Example
//!
//! Run a lab as a reader of the book would: `cargo run -q -p labs --bin rebalance`. From
//! code, the facade hands out consumers with member ids `member-1`, `member-2`, …:
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! use consumer::AutoOffsetReset;
//! use coordinator_core::ManualClock;
//! use labs::Cluster;
//!
//! let dir = tempfile::tempdir()?;
//! let clock = ManualClock::new();
//! let cluster = Cluster::builder().clock(clock.clone()).session_timeout_ms(100).open(dir.path())?;
//! cluster.create_topic("orders", 4)?;
//! assert_eq!(cluster.create_topic("orders", 4).unwrap_err().code(), "TOPIC_ALREADY_EXISTS");
//!
//! let mut a = cluster.consumer("workers", AutoOffsetReset::Earliest)?;
//! let mut b = cluster.consumer("workers", AutoOffsetReset::Earliest)?;
//! a.subscribe(&["orders"]).await?;
//! b.subscribe(&["orders"]).await?;
//! a.refresh_assignment().await?;
//! assert_eq!(a.assignment().len() + b.assignment().len(), 4);
//! assert!(a.assignment().iter().all(|tp| !b.assignment().contains(tp)));
//!
//! clock.advance(101);
//! assert_eq!(cluster.expire_group_members().await.len(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })
//! # }
//! ```

#![forbid(unsafe_code)]

mod cluster;
mod error;
pub mod lab;
pub mod narrate;

pub use cluster::{Cluster, ClusterBuilder, OFFSETS_FILE};
pub use error::{ClusterError, LabError};
pub use narrate::{run_lab, Narrator};
