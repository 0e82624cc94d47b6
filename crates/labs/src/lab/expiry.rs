//! Exercise 3: session expiry is strict (`now > deadline`), driven by a manual clock.

use std::path::PathBuf;

use consumer::AutoOffsetReset;
use coordinator_core::GroupState;

use super::{manual_cluster, GROUP, SESSION_TIMEOUT_MS, TOPIC};
use crate::narrate::{expect, expired, Narrator};
use crate::LabError;

/// Two members join at 0 ms with a 100 ms session; expiry at exactly 100 ms removes nobody,
/// at 101 ms both, in one rebalance that leaves the group Empty.
pub async fn run(dir: PathBuf, mut out: Narrator) -> Result<(), LabError> {
    let (cluster, clock) = manual_cluster(&dir)?;
    cluster.create_topic(TOPIC, 2)?;
    out.line(format!(
        "Session timeout {SESSION_TIMEOUT_MS} ms; a manual clock starts at 0 ms and moves only when told."
    ))?;

    let mut first = cluster.consumer(GROUP, AutoOffsetReset::Earliest)?;
    let mut second = cluster.consumer(GROUP, AutoOffsetReset::Earliest)?;
    first.subscribe(&[TOPIC]).await?;
    second.subscribe(&[TOPIC]).await?;
    let group = cluster.coordinator().describe(GROUP).await?;
    out.step("Two members join at 0 ms.")?;
    for member in &group.members {
        out.detail(format!(
            "{}: deadline {} ms",
            member.member, member.deadline_ms
        ))?;
    }
    out.detail(format!(
        "group {GROUP}: generation {}, {}",
        group.generation, group.state
    ))?;

    clock
        .set(SESSION_TIMEOUT_MS)
        .map_err(|e| LabError::Expectation(e.to_string()))?;
    let at_deadline = cluster.expire_group_members().await;
    out.step(format!(
        "Advance to exactly {SESSION_TIMEOUT_MS} ms and expire."
    ))?;
    out.detail(format!("expired: {}", expired(&at_deadline)))?;
    out.detail("At its deadline a member is still alive: expiry needs now > deadline.")?;
    expect(at_deadline.is_empty(), "nobody expires at the deadline")?;

    clock.advance(1);
    let after = cluster.expire_group_members().await;
    let group = cluster.coordinator().describe(GROUP).await?;
    out.step(format!(
        "Advance one millisecond ({} ms) and expire again.",
        SESSION_TIMEOUT_MS + 1
    ))?;
    out.detail(format!("expired: {}", expired(&after)))?;
    out.detail(format!(
        "group {GROUP}: generation {}, {}",
        group.generation, group.state
    ))?;
    expect(
        after.len() == 2,
        "both members expire one millisecond later",
    )?;
    expect(group.state == GroupState::Empty, "the group ends Empty")?;

    // The consumer objects outlive their sessions; the coordinator now refuses them.
    let heartbeat = first.heartbeat().await.err().map(|e| e.code());
    let refresh = first.refresh_assignment().await.err().map(|e| e.code());
    out.detail(format!(
        "member 1 afterwards: heartbeat {}, refresh {}; it must subscribe again",
        heartbeat.unwrap_or("accepted"),
        refresh.unwrap_or("accepted")
    ))?;
    expect(
        heartbeat == Some("ILLEGAL_GENERATION") && refresh == Some("UNKNOWN_MEMBER"),
        "an expired member is fenced and unknown",
    )?;
    Ok(())
}
