//! Exercise 2: a stale member's commit is fenced with `ILLEGAL_GENERATION` until it refreshes.

use std::path::PathBuf;

use consumer::{AutoOffsetReset, Consumer};

use super::{GROUP, TOPIC};
use crate::narrate::{expect, offsets, partitions, Narrator};
use crate::{Cluster, LabError};

/// Records per partition in this lab.
const RECORDS_PER_PARTITION: usize = 3;

/// Member 1 polls every partition, member 2 joins, member 1 commits under its old generation
/// (fenced, nothing written), refreshes, and commits again (accepted).
pub async fn run(dir: PathBuf, mut out: Narrator) -> Result<(), LabError> {
    let cluster = Cluster::open(&dir)?;
    cluster.create_topic(TOPIC, 4)?;
    for partition in 0..4 {
        for i in 0..RECORDS_PER_PARTITION {
            cluster.append(TOPIC, partition, format!("order {partition}.{i}"))?;
        }
    }
    out.line(format!(
        "Topic {TOPIC} has 4 partitions with {RECORDS_PER_PARTITION} records each."
    ))?;

    let mut first = cluster.consumer(GROUP, AutoOffsetReset::Earliest)?;
    first.subscribe(&[TOPIC]).await?;
    let polled = first.poll(100).await?;
    out.step("Member 1 joins and polls every partition.")?;
    out.detail(format!("member 1 {}", view(&first)))?;
    out.detail(format!(
        "polled {} records; positions: {}",
        polled.len(),
        offsets(&first.positions())
    ))?;

    let mut second = cluster.consumer(GROUP, AutoOffsetReset::Earliest)?;
    second.subscribe(&[TOPIC]).await?;
    out.step("Member 2 joins, triggering a new generation.")?;
    out.detail(format!("member 2 {}", view(&second)))?;
    out.detail(format!("member 1 still believes {}", view(&first)))?;

    out.step("Member 1 commits before refreshing.")?;
    match first.commit().await {
        Ok(committed) => {
            return Err(LabError::Expectation(format!(
                "a stale commit was accepted: {}",
                offsets(&committed)
            )))
        }
        Err(e) => {
            out.detail(format!("commit failed: {}", e.code()))?;
            out.detail(format!("reason: {e}"))?;
            expect(
                e.code() == "ILLEGAL_GENERATION",
                format!("expected ILLEGAL_GENERATION, got {}", e.code()),
            )?;
        }
    }
    let stored = cluster.coordinator().committed_offsets(GROUP).await?;
    out.detail(format!(
        "committed offsets of {GROUP}: {}",
        offsets(&stored)
    ))?;
    expect(stored.is_empty(), "a fenced commit must write nothing")?;

    first.refresh_assignment().await?;
    out.step("Member 1 refreshes, then commits again.")?;
    out.detail(format!("member 1 {}", view(&first)))?;
    let committed = first.commit().await?;
    out.detail(format!("commit succeeded: {}", offsets(&committed)))?;
    let stored = cluster.coordinator().committed_offsets(GROUP).await?;
    out.detail(format!(
        "committed offsets of {GROUP}: {}",
        offsets(&stored)
    ))?;
    expect(
        stored == committed,
        "the store holds what member 1 committed",
    )?;

    second.close().await?;
    first.close().await?;
    Ok(())
}

/// `(generation 2): orders-0, orders-2`: what a consumer believes it owns, and under which
/// generation.
fn view(consumer: &Consumer) -> String {
    let generation = consumer
        .generation()
        .map_or_else(|| "none".to_string(), |g| g.to_string());
    format!(
        "(generation {generation}): {}",
        partitions(consumer.assignment())
    )
}
