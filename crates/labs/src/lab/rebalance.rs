//! The chapter's rebalance lab ("Hands-on experiment: watch a rebalance"). Its output is the
//! chapter's "Measured output", line for line.

use std::path::PathBuf;

use consumer::AutoOffsetReset;

use super::{GROUP, TOPIC};
use crate::narrate::{partitions, python_bool, Narrator};
use crate::{Cluster, LabError};

/// Two members of `workers` share the four partitions of `orders`: the second join makes
/// the first member's local view stale until it refreshes; the second's leave hands every
/// partition back.
pub async fn run(dir: PathBuf, mut out: Narrator) -> Result<(), LabError> {
    let cluster = Cluster::open(&dir)?;
    cluster.create_topic(TOPIC, 4)?;

    let mut first = cluster.consumer(GROUP, AutoOffsetReset::Earliest)?;
    first.subscribe(&[TOPIC]).await?;
    out.step("First member joins and initially owns every partition.")?;
    out.detail(format!("member 1: {}", partitions(first.assignment())))?;

    let mut second = cluster.consumer(GROUP, AutoOffsetReset::Earliest)?;
    second.subscribe(&[TOPIC]).await?;
    out.step("Second member joins, triggering a new generation.")?;
    out.detail(format!("member 2: {}", partitions(second.assignment())))?;
    out.detail(format!(
        "member 1 local view before refresh: {}",
        partitions(first.assignment())
    ))?;
    out.detail(
        "MiniKafka deliberately has no revoke barrier: the old local assignment remains \
         until refresh_assignment().",
    )?;

    first.refresh_assignment().await?;
    out.step("Member 1 refreshes and observes the stable assignment.")?;
    out.detail(format!("member 1: {}", partitions(first.assignment())))?;
    out.detail(format!("member 2: {}", partitions(second.assignment())))?;
    let overlap = first
        .assignment()
        .iter()
        .any(|tp| second.assignment().contains(tp));
    out.detail(format!("overlap after refresh: {}", python_bool(overlap)))?;

    second.close().await?;
    first.refresh_assignment().await?;
    out.step("Member 2 leaves; the remaining member owns all partitions.")?;
    out.detail(format!("member 1: {}", partitions(first.assignment())))?;
    out.detail(
        "Real Kafka coordinates JoinGroup/SyncGroup and revocation; this mini coordinator \
         completes rebalance synchronously.",
    )?;
    first.close().await?;
    Ok(())
}
