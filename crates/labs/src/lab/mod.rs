//! The chapter's labs, one module each. Every lab is an `async fn run(dir, narrator)` that
//! opens a [`Cluster`] over `dir`, narrates what it does, and fails with a
//! [`LabError`] when the system behaves otherwise than the chapter says. The
//! binaries in `src/bin/` only hand them to [`run_lab`](crate::run_lab).

use std::path::Path;

use coordinator_core::ManualClock;

use crate::{Cluster, LabError};

pub mod expiry;
pub mod fencing;
pub mod rebalance;
pub mod replay;

/// The group every lab uses.
pub const GROUP: &str = "workers";
/// The topic every lab uses.
pub const TOPIC: &str = "orders";

/// The session timeout of the labs that drive time by hand.
pub const SESSION_TIMEOUT_MS: u64 = 100;

/// A cluster over `dir` whose time moves only through the returned [`ManualClock`], with a
/// [`SESSION_TIMEOUT_MS`] session.
fn manual_cluster(dir: &Path) -> Result<(Cluster, ManualClock), LabError> {
    let clock = ManualClock::new();
    let cluster = Cluster::builder()
        .clock(clock.clone())
        .session_timeout_ms(SESSION_TIMEOUT_MS)
        .open(dir)?;
    Ok((cluster, clock))
}
