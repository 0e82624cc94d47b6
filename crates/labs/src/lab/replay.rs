//! Exercise 1: a replacement consumer starts at the committed offset, not at the crashed
//! consumer's position, so the records in between are delivered again.

use std::path::PathBuf;

use consumer::{AutoOffsetReset, Record};
use coordinator_core::TopicPartition;

use super::{manual_cluster, GROUP, SESSION_TIMEOUT_MS, TOPIC};
use crate::narrate::{expect, expired, offset_range, partitions, Narrator};
use crate::LabError;

/// Member 1 polls offsets 0–5, commits 6, polls 6–9 (position 10) and crashes without
/// committing. Once its session expires, a replacement joins, starts at 6 and sees 6–9 again.
pub async fn run(dir: PathBuf, mut out: Narrator) -> Result<(), LabError> {
    let (cluster, clock) = manual_cluster(&dir)?;
    cluster.create_topic(TOPIC, 1)?;
    for i in 0..10 {
        cluster.append(TOPIC, 0, format!("order {i}"))?;
    }
    let tp = TopicPartition::new(TOPIC, 0);
    out.line(format!(
        "Topic {TOPIC} has one partition holding offsets 0-9."
    ))?;

    let mut first = cluster.consumer(GROUP, AutoOffsetReset::Earliest)?;
    first.subscribe(&[TOPIC]).await?;
    let batch = first.poll(6).await?;
    let committed = first.commit().await?;
    out.step("Member 1 polls six records, processes them and commits.")?;
    out.detail(format!(
        "polled offsets {}",
        offset_range(&offsets_of(&batch))
    ))?;
    out.detail(format!(
        "committed offset {}",
        committed.get(&tp).copied().unwrap_or_default()
    ))?;

    let batch = first.poll(100).await?;
    let position = first.position(&tp)?;
    let still = first.committed(&tp).await?.unwrap_or_default();
    out.step("Member 1 polls the rest, then crashes before committing.")?;
    out.detail(format!(
        "polled offsets {}",
        offset_range(&offsets_of(&batch))
    ))?;
    out.detail(format!(
        "position {position}, committed offset still {still}"
    ))?;
    expect(position == 10 && still == 6, "position 10, committed 6")?;
    // A crash: no commit, no leave. The coordinator learns of it only through expiry.
    drop(first);

    clock.advance(SESSION_TIMEOUT_MS + 1);
    let gone = cluster.expire_group_members().await;
    let mut replacement = cluster.consumer(GROUP, AutoOffsetReset::Earliest)?;
    replacement.subscribe(&[TOPIC]).await?;
    out.step("Member 1's session expires; a replacement joins the group.")?;
    out.detail(format!("expired: {}", expired(&gone)))?;
    out.detail(format!(
        "member 2: {}",
        partitions(replacement.assignment())
    ))?;

    let start = replacement.committed(&tp).await?.unwrap_or_default();
    let batch = replacement.poll(100).await?;
    let seen = offsets_of(&batch);
    out.step(format!(
        "The replacement has no position, so it starts at the committed offset {start}."
    ))?;
    out.detail(format!("polled offsets {}", offset_range(&seen)))?;
    out.detail(
        "Offsets 6-9 are delivered again: the position died with member 1; the committed \
         offset is the group's durable progress (at-least-once).",
    )?;
    expect(
        seen == [6, 7, 8, 9],
        "the replacement sees offsets 6-9 again",
    )?;
    replacement.close().await?;
    Ok(())
}

fn offsets_of(records: &[Record]) -> Vec<i64> {
    records.iter().map(|r| r.offset).collect()
}
