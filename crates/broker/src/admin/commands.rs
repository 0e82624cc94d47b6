//! The five actions. Each checks everything it can before it changes anything, so that a
//! refusal (a missing group, a group with members, an unknown partition) changes nothing.

use std::collections::{BTreeMap, BTreeSet};

use coordinator_core::{OffsetMap, TopicPartition};

use super::cli::{Action, Groups, ResetSpec, Scope, TopicArg, View};
use super::error::AdminError;
use super::report::{self, OffsetColumns, OffsetRow, Printer, ResetRow};
use super::source::{GroupInfo, LogPoint, Member, Source, EMPTY, SHARE, STABLE};

pub(crate) async fn run(
    source: &mut Source,
    action: &Action,
    p: &mut Printer<'_>,
) -> Result<(), AdminError> {
    match action {
        Action::List { states } => list(source, states.as_deref(), p).await,
        Action::Describe { groups, view } => describe(source, groups, *view, p).await,
        Action::ResetOffsets {
            groups,
            scope,
            spec,
            execute,
            implicit_dry_run,
        } => {
            if *implicit_dry_run {
                p.note("WARN: No action will be performed as the --execute option is missing.")?;
            }
            reset(source, groups, scope, spec, *execute, p).await
        }
        Action::Delete { groups } => delete(source, groups, p).await,
        Action::DeleteOffsets { group, topics } => delete_offsets(source, group, topics, p).await,
    }
}

async fn list(
    source: &mut Source,
    states: Option<&[String]>,
    p: &mut Printer<'_>,
) -> Result<(), AdminError> {
    let listed = source.list_groups().await?;
    let keep = |state: &Option<String>| match states {
        None | Some([]) => true,
        Some(filter) => state
            .as_deref()
            .is_some_and(|s| filter.contains(&s.to_ascii_lowercase())),
    };
    let listed: Vec<_> = listed.into_iter().filter(|g| keep(&g.state)).collect();
    if p.json() {
        for g in &listed {
            p.object(&serde_json::json!({
                "group": g.group,
                "state": g.state,
                "protocol_type": g.protocol_type,
            }))?;
            p.flush()?;
        }
        return Ok(());
    }
    match states {
        None => {
            for g in &listed {
                p.line(&g.group)?;
                p.flush()?;
            }
        }
        Some(_) => {
            let pairs: Vec<(String, Option<String>)> = listed
                .iter()
                .map(|g| (g.group.clone(), g.state.clone()))
                .collect();
            let f = report::list_format(&pairs);
            p.line(&f("GROUP", "STATE"))?;
            for (g, state) in &pairs {
                p.line(&f(g, state.as_deref().unwrap_or("Unknown")))?;
                p.flush()?;
            }
        }
    }
    Ok(())
}

/// The named groups, all described up front (a missing one stops the command before
/// anything is printed or changed); or every consumer group.
async fn resolve(source: &mut Source, groups: &Groups) -> Result<Vec<GroupInfo>, AdminError> {
    let names: Vec<String> = match groups {
        Groups::Named(names) => {
            let mut seen = BTreeSet::new();
            names.iter().filter(|g| seen.insert(*g)).cloned().collect()
        }
        Groups::All => source
            .list_groups()
            .await?
            .into_iter()
            .map(|g| g.group)
            .collect(),
    };
    source.describe_groups(&names).await
}

/// Kafka's notes on the state of a described group; `false` for a group that is gone.
fn state_note(p: &mut Printer<'_>, info: &GroupInfo) -> Result<bool, AdminError> {
    match info.state.as_str() {
        s if s == STABLE => {}
        s if s == EMPTY => p.note(&format!(
            "Consumer group '{}' has no active members.",
            info.group
        ))?,
        "Dead" => {
            p.note(&format!("Consumer group '{}' does not exist.", info.group))?;
            return Ok(false);
        }
        _ => p.note(&format!(
            "Warning: Consumer group '{}' is rebalancing.",
            info.group
        ))?,
    }
    Ok(true)
}

async fn describe(
    source: &mut Source,
    groups: &Groups,
    view: View,
    p: &mut Printer<'_>,
) -> Result<(), AdminError> {
    let infos = resolve(source, groups).await?;
    if let (Groups::Named(_), Some(missing)) = (groups, infos.iter().find(|i| !i.exists())) {
        return Err(AdminError::GroupNotFound {
            group: missing.group.clone(),
        });
    }
    for mut info in infos {
        // With --all-groups, a group deleted since the listing is noted and skipped.
        if !state_note(p, &info)? {
            continue;
        }
        // Members in a stable order (Kafka prints the broker's order).
        info.members.sort_by(|a, b| a.id.cmp(&b.id));
        match view {
            View::Offsets => describe_offsets(source, &info, p).await?,
            View::Members { verbose } => describe_members(&info, verbose, p)?,
            View::State => {
                let coordinator = source.coordinator(&info.group).await?;
                let (g, n) = (&info.group, info.members.len());
                if p.json() {
                    let v = report::state_json(
                        g,
                        coordinator.as_ref(),
                        &info.protocol,
                        &info.state,
                        n,
                        info.epochs,
                    );
                    p.object(&v)?;
                } else {
                    let lines = report::state_lines(
                        g,
                        coordinator.as_ref(),
                        &info.protocol,
                        &info.state,
                        n,
                    );
                    p.line("")?;
                    for l in lines {
                        p.line(&l)?;
                    }
                }
                p.flush()?;
            }
        }
    }
    Ok(())
}

async fn describe_offsets(
    source: &mut Source,
    info: &GroupInfo,
    p: &mut Printer<'_>,
) -> Result<(), AdminError> {
    let committed = if info.protocol_type == SHARE {
        source.share_start_offsets(&info.group).await?
    } else {
        source.committed_with_metadata(&info.group).await?
    };
    // Kafka's order: members with partitions, the most partitions first; then the
    // committed partitions no member owns.
    let mut owners: Vec<&Member> = info
        .members
        .iter()
        .filter(|m| !m.assignment.is_empty())
        .collect();
    owners.sort_by_key(|m| std::cmp::Reverse(m.assignment.len()));
    let owned: BTreeSet<&TopicPartition> = owners.iter().flat_map(|m| &m.assignment).collect();
    let orphans: Vec<TopicPartition> = committed
        .keys()
        .filter(|tp| !owned.contains(tp))
        .cloned()
        .collect();
    let mut blocks: Vec<(Option<&Member>, &[TopicPartition])> = owners
        .iter()
        .map(|m| (Some(*m), m.assignment.as_slice()))
        .collect();
    if !orphans.is_empty() {
        blocks.push((None, orphans.as_slice()));
    }
    if blocks.is_empty() {
        return Ok(());
    }
    let columns = OffsetColumns::new(
        &info.group,
        blocks
            .iter()
            .flat_map(|(_, tps)| tps.iter().map(TopicPartition::topic)),
        blocks.iter().map(|(m, _)| *m),
    );
    if !p.json() {
        p.line("")?;
        p.line(&columns.header())?;
    }
    for (member, partitions) in blocks {
        let ends = source.log_offsets(partitions, LogPoint::Latest).await?;
        for tp in partitions {
            let row = OffsetRow {
                group: &info.group,
                partition: tp,
                current: committed.get(tp).map(|o| o.offset),
                metadata: committed.get(tp).map(|o| o.metadata.as_str()),
                end: ends.get(tp).copied(),
                member,
            };
            if p.json() {
                p.object(&report::offset_json(&row))?;
            } else {
                p.line(&columns.row(&row))?;
            }
        }
        p.flush()?;
    }
    Ok(())
}

fn describe_members(
    info: &GroupInfo,
    verbose: bool,
    p: &mut Printer<'_>,
) -> Result<(), AdminError> {
    if p.json() {
        for m in &info.members {
            p.object(&report::member_json(&info.group, m))?;
        }
    } else {
        let columns = report::MemberColumns::new(&info.group, &info.members, verbose);
        p.line("")?;
        p.line(&columns.header())?;
        for m in &info.members {
            p.line(&columns.row(&info.group, m))?;
        }
    }
    p.flush()?;
    Ok(())
}

/// The partitions `topics` name: all of a topic's, or those listed. Against a broker each
/// must exist; against a data directory "all" means those the group has offsets for.
async fn partitions_of(
    source: &mut Source,
    group: &str,
    topics: &[TopicArg],
    committed: &OffsetMap,
) -> Result<Vec<TopicPartition>, AdminError> {
    let names: Vec<String> = topics.iter().map(|t| t.topic.clone()).collect();
    let known = source.topic_partitions(&names).await?;
    let mut out = BTreeSet::new();
    let mut unknown = BTreeSet::new();
    for arg in topics {
        match (&known, &arg.partitions) {
            (Some(known), partitions) => {
                let Some(&count) = known.get(&arg.topic) else {
                    if partitions.is_none() {
                        return Err(AdminError::UnknownTopic {
                            topic: arg.topic.clone(),
                        });
                    }
                    unknown.extend(
                        partitions
                            .iter()
                            .flatten()
                            .map(|&p| TopicPartition::new(arg.topic.as_str(), p)),
                    );
                    continue;
                };
                match partitions {
                    None => {
                        out.extend((0..count).map(|p| TopicPartition::new(arg.topic.as_str(), p)))
                    }
                    Some(ps) => {
                        for &p in ps {
                            let tp = TopicPartition::new(arg.topic.as_str(), p);
                            if p < count {
                                out.insert(tp);
                            } else {
                                unknown.insert(tp);
                            }
                        }
                    }
                }
            }
            (None, Some(ps)) => {
                out.extend(
                    ps.iter()
                        .map(|&p| TopicPartition::new(arg.topic.as_str(), p)),
                );
            }
            (None, None) => {
                let mine: Vec<_> = committed
                    .keys()
                    .filter(|tp| tp.topic() == arg.topic)
                    .cloned()
                    .collect();
                if mine.is_empty() {
                    return Err(AdminError::NoOffsetsForTopic {
                        group: group.to_string(),
                        topic: arg.topic.clone(),
                    });
                }
                out.extend(mine);
            }
        }
    }
    if !unknown.is_empty() {
        return Err(AdminError::UnknownPartitions {
            partitions: unknown.into_iter().collect(),
        });
    }
    Ok(out.into_iter().collect())
}

/// What the log says of the partitions a reset covers.
#[derive(Debug, Default)]
pub(crate) struct LogView {
    /// `(log start, log end)` per partition; empty without a log.
    pub(crate) range: BTreeMap<TopicPartition, (i64, i64)>,
    /// `--to-datetime`: the first offset at or after the time, where there is one.
    pub(crate) by_time: BTreeMap<TopicPartition, i64>,
    /// Whether there is a log at all.
    pub(crate) has_log: bool,
}

/// The new offset of one partition (Kafka's `GroupOffsetsResetter`), with the warnings
/// Kafka logs when it clamps.
pub(crate) fn plan_offset(
    spec: &ResetSpec,
    tp: &TopicPartition,
    committed: Option<i64>,
    log: &LogView,
    warnings: &mut Vec<String>,
) -> Result<i64, AdminError> {
    let range = log.range.get(tp).copied();
    // The log could not tell this partition's range: it has no leader or no longer exists.
    let missing = || AdminError::UnknownPartitions {
        partitions: vec![tp.clone()],
    };
    let clamp = |offset: i64, warnings: &mut Vec<String>| match range {
        Some((_, end)) if offset > end => {
            warnings.push(format!(
                "WARN: New offset ({offset}) is higher than latest offset for topic partition {tp}. Value will be set to {end}."
            ));
            end
        }
        Some((start, _)) if offset < start => {
            warnings.push(format!(
                "WARN: New offset ({offset}) is lower than earliest offset for topic partition {tp}. Value will be set to {start}."
            ));
            start
        }
        // No log (a data directory): only the one bound every log has.
        None if offset < 0 => {
            warnings.push(format!(
                "WARN: New offset ({offset}) is negative for topic partition {tp}. Value will be set to 0."
            ));
            0
        }
        _ => offset,
    };
    match spec {
        ResetSpec::ToEarliest => range.map(|(start, _)| start).ok_or_else(missing),
        ResetSpec::ToLatest => range.map(|(_, end)| end).ok_or_else(missing),
        ResetSpec::ToOffset(n) => Ok(clamp(*n, warnings)),
        ResetSpec::ShiftBy(n) => {
            let current = committed.ok_or_else(|| AdminError::NoCommittedOffset {
                partition: tp.clone(),
            })?;
            Ok(clamp(current.saturating_add(*n), warnings))
        }
        ResetSpec::ToDatetime(_) => match log.by_time.get(tp) {
            Some(&offset) => Ok(offset),
            None => {
                warnings.push(format!(
                    "Warn: Partition {} from topic {} is empty. Falling back to latest known offset.",
                    tp.partition(),
                    tp.topic()
                ));
                range.map(|(_, end)| end).ok_or_else(missing)
            }
        },
    }
}

async fn reset(
    source: &mut Source,
    groups: &Groups,
    scope: &Scope,
    spec: &ResetSpec,
    execute: bool,
    p: &mut Printer<'_>,
) -> Result<(), AdminError> {
    let infos = resolve(source, groups).await?;
    // Kafka's rule: only inactive groups (Empty, or not existing yet) can be reset.
    if let Some(active) = infos.iter().find(|i| !i.inactive()) {
        return Err(AdminError::GroupNotInactive {
            group: active.group.clone(),
            state: active.state.clone(),
        });
    }
    // Plan every group before changing any.
    let mut plans: Vec<(String, Vec<ResetRow>)> = Vec::new();
    let mut warnings = Vec::new();
    for info in &infos {
        let group = info.group.as_str();
        let committed = source.committed(group).await?;
        let partitions = match scope {
            Scope::AllTopics => {
                if !info.exists() {
                    return Err(AdminError::GroupNotFound {
                        group: group.to_string(),
                    });
                }
                committed.keys().cloned().collect()
            }
            Scope::Topics(topics) => partitions_of(source, group, topics, &committed).await?,
        };
        if partitions.is_empty() {
            p.note(&format!(
                "Consumer group '{group}' has no committed offsets: nothing to reset."
            ))?;
            continue;
        }
        let mut log = LogView {
            has_log: source.has_log(),
            ..LogView::default()
        };
        if log.has_log {
            let starts = source.log_offsets(&partitions, LogPoint::Earliest).await?;
            let ends = source.log_offsets(&partitions, LogPoint::Latest).await?;
            for tp in &partitions {
                if let (Some(&s), Some(&e)) = (starts.get(tp), ends.get(tp)) {
                    log.range.insert(tp.clone(), (s, e));
                }
            }
            if let ResetSpec::ToDatetime(ts) = spec {
                log.by_time = source
                    .log_offsets(&partitions, LogPoint::Timestamp(*ts))
                    .await?;
            }
        }
        let mut rows = Vec::with_capacity(partitions.len());
        for tp in partitions {
            let previous = committed.get(&tp).copied();
            let new = plan_offset(spec, &tp, previous, &log, &mut warnings)?;
            rows.push(ResetRow {
                group: group.to_string(),
                partition: tp,
                previous,
                new,
            });
        }
        plans.push((group.to_string(), rows));
    }
    for w in &warnings {
        p.note(w)?;
    }
    let all: Vec<ResetRow> = plans
        .iter()
        .flat_map(|(_, rows)| rows.iter().cloned())
        .collect();
    if all.is_empty() {
        return Ok(());
    }
    let f = report::reset_format(&all);
    for (i, (group, rows)) in plans.iter().enumerate() {
        if execute {
            let offsets: OffsetMap = rows.iter().map(|r| (r.partition.clone(), r.new)).collect();
            if let Err(e) = source.commit(group, &offsets).await {
                return Err(refused_commit(source, group, e).await);
            }
        }
        // The header once the first rows are certain: a refused commit prints nothing.
        if i == 0 && !p.json() {
            p.line("")?;
            p.line(&f("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"))?;
        }
        for r in rows {
            if p.json() {
                p.object(&report::reset_json(r, execute))?;
            } else {
                let (partition, offset) = (r.partition.partition().to_string(), r.new.to_string());
                p.line(&f(&r.group, r.partition.topic(), &partition, &offset))?;
            }
        }
        p.flush()?;
    }
    Ok(())
}

/// An admin commit refused because a member joined after the check: Kafka's message, with
/// the state the group has now.
async fn refused_commit(source: &mut Source, group: &str, e: AdminError) -> AdminError {
    match e {
        // UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS: the group has members.
        AdminError::Broker {
            code: 25 | 22 | 27, ..
        } => {
            let state = match source.describe_groups(&[group.to_string()]).await {
                Ok(infos) => infos.into_iter().next().map(|i| i.state),
                Err(_) => None,
            };
            AdminError::GroupNotInactive {
                group: group.to_string(),
                state: state.unwrap_or_else(|| "not Empty".into()),
            }
        }
        other => other,
    }
}

async fn delete(
    source: &mut Source,
    groups: &Groups,
    p: &mut Printer<'_>,
) -> Result<(), AdminError> {
    let infos = resolve(source, groups).await?;
    for info in &infos {
        if !info.exists() {
            return Err(AdminError::GroupNotFound {
                group: info.group.clone(),
            });
        }
        if info.state != EMPTY {
            return Err(AdminError::GroupNotEmpty {
                group: info.group.clone(),
                state: info.state.clone(),
            });
        }
    }
    let names: Vec<String> = infos.into_iter().map(|i| i.group).collect();
    if names.is_empty() {
        return Ok(());
    }
    let results = source.delete_groups(&names).await?;
    let mut deleted = Vec::new();
    let mut failure = None;
    for (group, result) in results {
        match result {
            Ok(()) => deleted.push(group),
            Err(AdminError::Broker { code: 68, .. }) if failure.is_none() => {
                // A member joined after the check.
                let state = source
                    .describe_groups(std::slice::from_ref(&group))
                    .await
                    .ok()
                    .and_then(|i| i.into_iter().next())
                    .map_or_else(|| "not Empty".into(), |i| i.state);
                failure = Some(AdminError::GroupNotEmpty { group, state });
            }
            Err(e) => {
                failure.get_or_insert(e);
            }
        }
    }
    let quoted: Vec<String> = deleted.iter().map(|g| format!("'{g}'")).collect();
    if p.json() {
        for g in &deleted {
            p.object(&serde_json::json!({"group": g, "deleted": true}))?;
        }
    } else if failure.is_none() {
        p.line(&format!(
            "Deletion of requested consumer groups ({}) was successful.",
            quoted.join(", ")
        ))?;
    } else if !deleted.is_empty() {
        p.line(&format!(
            "These consumer groups were deleted successfully: {}",
            quoted.join(", ")
        ))?;
    }
    p.flush()?;
    failure.map_or(Ok(()), Err)
}

async fn delete_offsets(
    source: &mut Source,
    group: &str,
    topics: &[TopicArg],
    p: &mut Printer<'_>,
) -> Result<(), AdminError> {
    let info = source
        .describe_groups(&[group.to_string()])
        .await?
        .into_iter()
        .next()
        .filter(GroupInfo::exists)
        .ok_or_else(|| AdminError::GroupNotFound {
            group: group.to_string(),
        })?;
    let committed = source.committed(group).await?;
    let partitions = partitions_of(source, group, topics, &committed).await?;
    // Kafka refuses, per partition, offsets of topics a member subscribes to. Refuse them
    // all before anything is deleted, so that nothing is deleted in part.
    if !info.members.is_empty() {
        if info.protocol_type != "consumer" {
            return Err(AdminError::GroupNotEmpty {
                group: group.to_string(),
                state: info.state.clone(),
            });
        }
        if info.state != STABLE || info.members.iter().any(|m| m.subscription.is_none()) {
            return Err(AdminError::GroupRebalancing {
                group: group.to_string(),
                state: info.state.clone(),
            });
        }
        let subscribed: BTreeSet<&str> = info
            .members
            .iter()
            .flat_map(|m| m.subscription.iter().flatten().map(String::as_str))
            .collect();
        if let Some(tp) = partitions.iter().find(|tp| subscribed.contains(tp.topic())) {
            return Err(AdminError::GroupSubscribedToTopic {
                group: group.to_string(),
                topic: tp.topic().to_string(),
            });
        }
    }
    let results = source.delete_offsets(group, &partitions).await?;
    let failed: Vec<&(TopicPartition, i16)> = results.iter().filter(|(_, c)| *c != 0).collect();
    let status = |code: i16| -> Option<AdminError> {
        (code != 0).then(|| AdminError::Broker {
            api: "OffsetDelete",
            context: None,
            code,
        })
    };
    if p.json() {
        for (tp, code) in &results {
            p.object(&serde_json::json!({
                "group": group,
                "topic": tp.topic(),
                "partition": tp.partition(),
                "error": status(*code).map(|e| report::error_json(&e)),
            }))?;
        }
    } else {
        if failed.is_empty() {
            p.line(&format!(
                "Request succeeded for deleting offsets from group {group}."
            ))?;
        }
        let f = report::delete_offsets_format(&partitions);
        p.line("")?;
        p.line(&f("TOPIC", "PARTITION", "STATUS"))?;
        for (tp, code) in &results {
            let text = match status(*code) {
                None => "Successful".to_string(),
                Some(e) => format!("Error: {e}"),
            };
            p.line(&f(tp.topic(), &tp.partition().to_string(), &text))?;
        }
    }
    p.flush()?;
    match failed.first() {
        None => Ok(()),
        // Only a member subscribing between the check and the request gets here.
        Some((tp, 86)) => Err(AdminError::GroupSubscribedToTopic {
            group: group.to_string(),
            topic: tp.topic().to_string(),
        }),
        Some((tp, code)) => Err(AdminError::Broker {
            api: "OffsetDelete",
            context: Some(format!("group '{group}', {tp}")),
            code: *code,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: u32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    fn log(start: i64, end: i64) -> LogView {
        LogView {
            range: [(tp(0), (start, end))].into(),
            by_time: BTreeMap::new(),
            has_log: true,
        }
    }

    #[test]
    fn offsets_are_clamped_to_the_logs_range_with_kafkas_warnings() {
        let mut w = Vec::new();
        let l = log(10, 50);
        assert_eq!(
            plan_offset(&ResetSpec::ToEarliest, &tp(0), Some(30), &l, &mut w).unwrap(),
            10
        );
        assert_eq!(
            plan_offset(&ResetSpec::ToLatest, &tp(0), Some(30), &l, &mut w).unwrap(),
            50
        );
        assert_eq!(
            plan_offset(&ResetSpec::ToOffset(20), &tp(0), None, &l, &mut w).unwrap(),
            20
        );
        assert!(w.is_empty());
        assert_eq!(
            plan_offset(&ResetSpec::ToOffset(99), &tp(0), None, &l, &mut w).unwrap(),
            50
        );
        assert_eq!(
            w.pop().unwrap(),
            "WARN: New offset (99) is higher than latest offset for topic partition t-0. Value will be set to 50."
        );
        assert_eq!(
            plan_offset(&ResetSpec::ShiftBy(-25), &tp(0), Some(30), &l, &mut w).unwrap(),
            10
        );
        assert!(w.pop().unwrap().contains("lower than earliest offset"));
        assert_eq!(
            plan_offset(&ResetSpec::ShiftBy(5), &tp(0), Some(30), &l, &mut w).unwrap(),
            35
        );
        let e = plan_offset(&ResetSpec::ShiftBy(5), &tp(0), None, &l, &mut w).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Cannot shift offset for partition t-0 since there is no current committed offset"
        );
    }

    #[test]
    fn a_datetime_without_a_record_falls_back_to_the_end_and_no_log_only_clamps_at_zero() {
        let mut w = Vec::new();
        let mut l = log(0, 7);
        assert_eq!(
            plan_offset(&ResetSpec::ToDatetime(5), &tp(0), None, &l, &mut w).unwrap(),
            7
        );
        assert_eq!(
            w.pop().unwrap(),
            "Warn: Partition 0 from topic t is empty. Falling back to latest known offset."
        );
        l.by_time.insert(tp(0), 3);
        assert_eq!(
            plan_offset(&ResetSpec::ToDatetime(5), &tp(0), None, &l, &mut w).unwrap(),
            3
        );
        let none = LogView::default();
        assert_eq!(
            plan_offset(&ResetSpec::ShiftBy(-9), &tp(0), Some(4), &none, &mut w).unwrap(),
            0
        );
        assert!(w.pop().unwrap().contains("negative"));
        assert_eq!(
            plan_offset(&ResetSpec::ToOffset(1_000), &tp(0), None, &none, &mut w).unwrap(),
            1_000
        );
        assert!(plan_offset(&ResetSpec::ToEarliest, &tp(0), None, &none, &mut w).is_err());
    }
}
