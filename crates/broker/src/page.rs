//! The page of groups, on the metrics listener (`--metrics-listen`): `/` lists every group
//! this broker coordinates, with its kind, protocol, state, generation or epoch, members
//! (client id, host, assignment) and lag per partition; `/group/<id>` shows one group and its
//! recent history as a timeline drawn in SVG: who owned what in each generation, who joined
//! and who left. Server-rendered HTML with no script, font or style from outside; both pages
//! refresh themselves every two seconds.
//!
//! The history is [`History`], observed by a task that looks at every group every
//! [`SAMPLE_EVERY`] while the listener runs (nothing without `--metrics-listen`), and at each
//! page shown, keeping an observation only when something changed: a rebalance quicker than
//! that shows as its last generation, and a member that leaves and one whose session expires
//! both show as leaving.
//! Bounded: [`MAX_HISTORY_GROUPS`] groups of [`MAX_OBSERVATIONS`] observations each, the
//! oldest dropped first.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use coordinator_core::{Coordinator, GroupKind, TopicPartition};
use partition_log::PartitionLog;

use crate::admin::report::assignment_text;

/// How often the groups are observed for their history.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// The most groups with a history; past it the group seen least recently is forgotten.
pub(crate) const MAX_HISTORY_GROUPS: usize = 1_000;
/// The most observations kept of one group.
pub(crate) const MAX_OBSERVATIONS: usize = 64;
/// The most groups the index lists.
const MAX_LISTED: usize = 500;

/// A group as one look at the coordinator saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GroupView {
    pub(crate) id: String,
    /// `classic`, `consumer`, `share`, `simple` or `chapter`.
    pub(crate) kind: &'static str,
    /// The protocol type and protocol (classic), or the assignor (consumer, share).
    pub(crate) protocol: String,
    pub(crate) state: String,
    /// The generation (classic, chapter) or group epoch (consumer, share).
    pub(crate) generation: i64,
    pub(crate) members: Vec<MemberView>,
}

/// A member of a [`GroupView`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MemberView {
    pub(crate) id: String,
    pub(crate) client_id: String,
    pub(crate) host: String,
    pub(crate) assignment: Vec<TopicPartition>,
}

/// One observation kept in a group's history.
#[derive(Clone, Debug)]
struct Observation {
    /// Milliseconds since the Unix epoch.
    at_ms: u64,
    state: String,
    generation: i64,
    /// Member id → (client id, assignment).
    members: BTreeMap<String, (String, Vec<TopicPartition>)>,
}

impl Observation {
    fn of(view: &GroupView, at_ms: u64) -> Observation {
        Observation {
            at_ms,
            state: view.state.clone(),
            generation: view.generation,
            members: view
                .members
                .iter()
                .map(|m| (m.id.clone(), (m.client_id.clone(), m.assignment.clone())))
                .collect(),
        }
    }

    fn same(&self, other: &Observation) -> bool {
        self.state == other.state
            && self.generation == other.generation
            && self.members == other.members
    }
}

/// The recent history of the groups. See the [module](self) docs.
#[derive(Debug, Default)]
pub(crate) struct History {
    groups: Mutex<HashMap<String, VecDeque<Observation>>>,
}

impl History {
    /// Takes in what one look at the groups saw at `at_ms`.
    pub(crate) fn observe(&self, views: &[GroupView], at_ms: u64) {
        let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        for view in views {
            let seen = Observation::of(view, at_ms);
            if !groups.contains_key(&view.id) && groups.len() >= MAX_HISTORY_GROUPS {
                // Forget the group whose last observation is the oldest.
                let oldest = groups
                    .iter()
                    .min_by_key(|(_, o)| o.back().map_or(0, |o| o.at_ms))
                    .map(|(id, _)| id.clone());
                if let Some(id) = oldest {
                    groups.remove(&id);
                }
            }
            let kept = groups.entry(view.id.clone()).or_default();
            if kept.back().is_some_and(|last| last.same(&seen)) {
                continue;
            }
            if kept.len() >= MAX_OBSERVATIONS {
                kept.pop_front();
            }
            kept.push_back(seen);
        }
    }

    fn of(&self, group: &str) -> Vec<Observation> {
        let groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        groups
            .get(group)
            .map(|o| o.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// Every group the coordinator has, as the page shows it (at most `limit`, by id).
pub(crate) async fn views(coordinator: &Coordinator, limit: usize) -> Vec<GroupView> {
    let mut listed = coordinator.list_groups().await;
    listed.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    let mut out = Vec::new();
    for group in listed.into_iter().take(limit) {
        if let Some(view) = view(coordinator, &group.group_id, group.kind).await {
            out.push(view);
        }
    }
    out
}

/// `id` as the page shows it; `None` if it is gone.
async fn view(coordinator: &Coordinator, id: &str, kind: GroupKind) -> Option<GroupView> {
    Some(match kind {
        GroupKind::Classic | GroupKind::Simple => {
            let d = coordinator.classic().describe(id).await.ok()?;
            let protocol = match (d.protocol_type.as_str(), d.protocol_name.as_str()) {
                ("", _) => String::new(),
                (t, "") => t.to_string(),
                (t, p) => format!("{t} / {p}"),
            };
            GroupView {
                id: id.to_string(),
                kind: if kind == GroupKind::Simple {
                    "simple"
                } else {
                    "classic"
                },
                protocol,
                state: d.state.as_str().to_string(),
                generation: i64::try_from(d.generation.get()).unwrap_or(i64::MAX),
                members: members_of(
                    d.members
                        .into_iter()
                        .map(|m| (m.member_id, m.client_id, m.client_host, m.partitions)),
                ),
            }
        }
        GroupKind::Consumer => {
            let d = coordinator.consumer().describe(id).await.ok()?;
            let members = d
                .members
                .into_iter()
                .map(|m| (m.member_id, m.client_id, m.client_host, m.assignment));
            let state = d.state.as_str();
            epoch_view(
                id,
                "consumer",
                &d.assignor_name,
                state,
                d.group_epoch,
                members,
            )
        }
        GroupKind::Share => {
            let d = coordinator.share().describe(id).await.ok()?;
            let members = d
                .members
                .into_iter()
                .map(|m| (m.member_id, m.client_id, m.client_host, m.assignment));
            let state = d.state.as_str();
            epoch_view(id, "share", &d.assignor_name, state, d.group_epoch, members)
        }
        _ => GroupView {
            id: id.to_string(),
            kind: kind.as_str(),
            protocol: String::new(),
            state: String::new(),
            generation: -1,
            members: Vec::new(),
        },
    })
}

type Member = (String, String, String, Vec<TopicPartition>);

fn members_of(members: impl Iterator<Item = Member>) -> Vec<MemberView> {
    members
        .map(|(id, client_id, host, assignment)| MemberView {
            id,
            client_id,
            host,
            assignment,
        })
        .collect()
}

/// A group of the consumer protocol's kind or a share group: an epoch and an assignor.
fn epoch_view(
    id: &str,
    kind: &'static str,
    assignor: &str,
    state: &str,
    epoch: i32,
    members: impl Iterator<Item = Member>,
) -> GroupView {
    GroupView {
        id: id.to_string(),
        kind,
        protocol: format!("{kind} / {assignor}"),
        state: state.to_string(),
        generation: i64::from(epoch),
        members: members_of(members),
    }
}

/// Observes the groups every [`SAMPLE_EVERY`] into `history`, until dropped (aborted).
pub(crate) async fn observe(coordinator: Arc<Coordinator>, history: Arc<History>) {
    let mut ticks = tokio::time::interval(SAMPLE_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let seen = views(&coordinator, MAX_HISTORY_GROUPS).await;
        history.observe(&seen, now_ms());
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Escapes `text` for HTML (text and attribute values).
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes `text` for a path segment (every byte but unreserved ones).
fn encode_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Decodes a percent-encoded path segment; `None` if it is not valid UTF-8 once decoded or a
/// `%` is not followed by two hex digits.
pub(crate) fn decode_segment(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:0.5em 0 1.5em}\
th,td{border:1px solid #ccc;padding:0.25em 0.6em;text-align:left;vertical-align:top}\
th{background:#f0f0f0}td.n{text-align:right}.muted{color:#777}";

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"2\"><title>{}</title>\
         <style>{STYLE}</style></head><body>{body}</body></html>\n",
        esc(title)
    )
}

/// Each partition of `group` with a committed offset or an assignment: (committed, log end,
/// lag), the lag `None` where either is unknown.
async fn lags(
    coordinator: &Coordinator,
    log: &dyn PartitionLog,
    view: &GroupView,
) -> Vec<(TopicPartition, Option<i64>, Option<i64>)> {
    let committed = coordinator
        .committed_offsets(&view.id)
        .await
        .unwrap_or_default();
    let mut partitions: BTreeSet<TopicPartition> = committed.keys().cloned().collect();
    for m in &view.members {
        partitions.extend(m.assignment.iter().cloned());
    }
    let mut out = Vec::with_capacity(partitions.len());
    for tp in partitions {
        let end = log.bounds(&tp).await.ok().map(|(_, high)| high);
        out.push((tp.clone(), committed.get(&tp).copied(), end));
    }
    out
}

fn lag_rows(out: &mut String, rows: &[(TopicPartition, Option<i64>, Option<i64>)]) {
    if rows.is_empty() {
        out.push_str("<p class=\"muted\">No committed offsets.</p>");
        return;
    }
    out.push_str(
        "<table class=\"lag\"><tr><th>topic</th><th>partition</th><th>committed</th>\
         <th>log end</th><th>lag</th></tr>",
    );
    let number = |n: Option<i64>| n.map_or_else(|| "-".to_string(), |n| n.to_string());
    for (tp, committed, end) in rows {
        let lag = match (committed, end) {
            (Some(c), Some(e)) => Some((e - c).max(0)),
            _ => None,
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td></tr>",
            esc(tp.topic()),
            tp.partition(),
            number(*committed),
            number(*end),
            number(lag)
        );
    }
    out.push_str("</table>");
}

fn member_rows(out: &mut String, members: &[MemberView]) {
    if members.is_empty() {
        out.push_str("<p class=\"muted\">No members.</p>");
        return;
    }
    out.push_str(
        "<table class=\"members\"><tr><th>member</th><th>client id</th><th>host</th>\
         <th>assignment</th></tr>",
    );
    for m in members {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&m.id),
            esc(&m.client_id),
            esc(&m.host),
            esc(&assignment_text(&m.assignment))
        );
    }
    out.push_str("</table>");
}

/// The index page: every group, its members and its lag.
pub(crate) async fn index(
    coordinator: &Coordinator,
    log: &dyn PartitionLog,
    history: &History,
) -> String {
    let groups = views(coordinator, MAX_LISTED).await;
    history.observe(&groups, now_ms());
    let mut body = String::from("<h1>Groups</h1>");
    if groups.is_empty() {
        body.push_str("<p class=\"muted\">No groups.</p>");
    }
    body.push_str(
        "<table class=\"groups\"><tr><th>group</th><th>kind</th><th>protocol</th><th>state</th>\
         <th>generation / epoch</th><th>members</th></tr>",
    );
    for g in &groups {
        let _ = write!(
            body,
            "<tr><td><a href=\"/group/{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            encode_segment(&g.id),
            esc(&g.id),
            g.kind,
            esc(&g.protocol),
            esc(&g.state),
            g.generation,
            g.members.len()
        );
    }
    body.push_str("</table>");
    for g in &groups {
        let _ = write!(
            body,
            "<h2 id=\"g-{}\">{}</h2>",
            encode_segment(&g.id),
            esc(&g.id)
        );
        member_rows(&mut body, &g.members);
        lag_rows(&mut body, &lags(coordinator, log, g).await);
    }
    page("Groups", &body)
}

/// The page of group `id`: its members, lag and timeline; `None` if there is no such group.
pub(crate) async fn group(
    coordinator: &Coordinator,
    log: &dyn PartitionLog,
    history: &History,
    id: &str,
) -> Option<String> {
    let kind = coordinator.group_kind(id)?;
    let g = view(coordinator, id, kind).await?;
    let mut body = format!(
        "<p><a href=\"/\">All groups</a></p><h1>{}</h1><p>{} group, {}state <b \
         class=\"state\">{}</b>, generation / epoch <b class=\"generation\">{}</b>, {} \
         member(s).</p>",
        esc(&g.id),
        g.kind,
        if g.protocol.is_empty() {
            String::new()
        } else {
            format!("protocol {}, ", esc(&g.protocol))
        },
        esc(&g.state),
        g.generation,
        g.members.len()
    );
    member_rows(&mut body, &g.members);
    lag_rows(&mut body, &lags(coordinator, log, &g).await);
    body.push_str("<h2>History</h2>");
    let now = now_ms();
    history.observe(std::slice::from_ref(&g), now);
    body.push_str(&timeline(&history.of(id), now));
    Some(page(&format!("Group {id}"), &body))
}

/// The observations drawn as a timeline: a row per member, a bar per observation while it
/// was a member, labelled with what it owned; a line at each new generation; a dot where a
/// member joined (green) and where it left (red).
fn timeline(seen: &[Observation], now_ms: u64) -> String {
    let Some(first) = seen.first() else {
        return "<p class=\"muted\">Nothing observed yet.</p>".into();
    };
    let mut rows: Vec<(String, String)> = Vec::new();
    for o in seen {
        for (id, (client, _)) in &o.members {
            if !rows.iter().any(|(r, _)| r == id) {
                rows.push((id.clone(), client.clone()));
            }
        }
    }
    const LEFT: f64 = 220.0;
    const WIDTH: f64 = 760.0;
    const ROW: f64 = 28.0;
    const TOP: f64 = 30.0;
    let start = first.at_ms;
    let span = now_ms.saturating_sub(start).max(1) as f64;
    let x = |t: u64| LEFT + (t.saturating_sub(start) as f64) / span * WIDTH;
    let height = TOP + ROW * rows.len().max(1) as f64 + 20.0;
    let mut svg = format!(
        "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" \
         height=\"{height}\" viewBox=\"0 0 {} {height}\" font-family=\"sans-serif\" \
         font-size=\"11\">",
        LEFT + WIDTH + 20.0,
        LEFT + WIDTH + 20.0
    );
    for (i, (id, client)) in rows.iter().enumerate() {
        let y = TOP + ROW * i as f64;
        let label: String = format!("{client} {id}").chars().take(34).collect();
        let _ = write!(
            svg,
            "<text x=\"4\" y=\"{}\" class=\"member\">{}</text>",
            y + 17.0,
            esc(&label)
        );
    }
    let mut previous: Option<&Observation> = None;
    for (k, o) in seen.iter().enumerate() {
        let x0 = x(o.at_ms);
        let x1 = seen.get(k + 1).map_or_else(|| x(now_ms), |n| x(n.at_ms));
        if previous.is_none_or(|p| p.generation != o.generation) {
            let _ = write!(
                svg,
                "<line x1=\"{x0:.1}\" y1=\"12\" x2=\"{x0:.1}\" y2=\"{}\" stroke=\"#888\" \
                 stroke-dasharray=\"3,2\"/><text x=\"{:.1}\" y=\"11\" class=\"gen\">gen {}</text>",
                height - 10.0,
                x0 + 2.0,
                o.generation
            );
        }
        for (i, (id, _)) in rows.iter().enumerate() {
            let y = TOP + ROW * i as f64;
            let now_in = o.members.get(id);
            let was_in = previous.and_then(|p| p.members.get(id));
            if let Some((_, assignment)) = now_in {
                let fill = if assignment.is_empty() {
                    "#ddd"
                } else {
                    "#9cc3e6"
                };
                let _ = write!(
                    svg,
                    "<rect x=\"{x0:.1}\" y=\"{}\" width=\"{:.1}\" height=\"20\" fill=\"{fill}\" \
                     stroke=\"#fff\"><title>{}</title></rect>",
                    y + 4.0,
                    (x1 - x0).max(1.0),
                    esc(&format!(
                        "{id}: {} (gen {})",
                        assignment_text(assignment),
                        o.generation
                    ))
                );
                if x1 - x0 > 40.0 {
                    let text: String = assignment_text(assignment).chars().take(40).collect();
                    let _ = write!(
                        svg,
                        "<text x=\"{:.1}\" y=\"{}\" class=\"owned\">{}</text>",
                        x0 + 3.0,
                        y + 18.0,
                        esc(&text)
                    );
                }
                if was_in.is_none() && previous.is_some() {
                    let _ = write!(
                        svg,
                        "<circle cx=\"{x0:.1}\" cy=\"{}\" r=\"4\" fill=\"#2a2\" class=\"join\"/>",
                        y + 14.0
                    );
                }
            } else if was_in.is_some() {
                let _ = write!(
                    svg,
                    "<circle cx=\"{x0:.1}\" cy=\"{}\" r=\"4\" fill=\"#c22\" class=\"leave\"/>",
                    y + 14.0
                );
            }
        }
        previous = Some(o);
    }
    svg.push_str("</svg>");
    let seconds = (now_ms.saturating_sub(start)) / 1000;
    format!(
        "{svg}<p class=\"muted\">The last {seconds} s, {} observation(s): a bar while a member, \
         labelled with what it owned; a dashed line at each new generation; a green dot where \
         a member joined, a red one where it left or its session expired.</p>",
        seen.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, parts: &[u32]) -> MemberView {
        MemberView {
            id: id.into(),
            client_id: format!("client-{id}"),
            host: "/127.0.0.1".into(),
            assignment: parts.iter().map(|&p| TopicPartition::new("t", p)).collect(),
        }
    }

    fn group(generation: i64, members: Vec<MemberView>) -> GroupView {
        GroupView {
            id: "g<1>".into(),
            kind: "classic",
            protocol: "consumer / range".into(),
            state: "Stable".into(),
            generation,
            members,
        }
    }

    #[test]
    fn the_history_keeps_changes_only_and_is_bounded() {
        let h = History::default();
        h.observe(&[group(1, vec![member("a", &[0, 1])])], 1_000);
        h.observe(&[group(1, vec![member("a", &[0, 1])])], 1_250);
        h.observe(
            &[group(2, vec![member("a", &[0]), member("b", &[1])])],
            1_500,
        );
        let seen = h.of("g<1>");
        assert_eq!(seen.len(), 2, "an unchanged look is not kept");
        assert_eq!(seen[1].generation, 2);
        for i in 0..(MAX_OBSERVATIONS as i64 + 10) {
            h.observe(&[group(3 + i, vec![])], 2_000 + i as u64);
        }
        assert_eq!(h.of("g<1>").len(), MAX_OBSERVATIONS);
        for i in 0..MAX_HISTORY_GROUPS + 5 {
            let mut g = group(1, vec![]);
            g.id = format!("other-{i}");
            h.observe(&[g], 10_000 + i as u64);
        }
        let kept = h
            .groups
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        assert_eq!(kept, MAX_HISTORY_GROUPS);
    }

    #[test]
    fn the_timeline_shows_generations_joins_leaves_and_ownership() {
        let seen = vec![
            Observation::of(&group(1, vec![member("a", &[0, 1])]), 0),
            Observation::of(&group(2, vec![member("a", &[0]), member("b", &[1])]), 5_000),
            Observation::of(&group(3, vec![member("b", &[0, 1])]), 10_000),
        ];
        let svg = timeline(&seen, 15_000);
        for g in ["gen 1", "gen 2", "gen 3"] {
            assert!(svg.contains(g), "{g} in {svg}");
        }
        assert_eq!(svg.matches("class=\"join\"").count(), 1, "b joined once");
        assert_eq!(svg.matches("class=\"leave\"").count(), 1, "a left once");
        assert!(svg.contains("t(0,1)"), "what b owned last");
        assert!(svg.contains("client-a a"));
    }

    #[test]
    fn text_is_escaped_and_ids_are_encoded_both_ways() {
        assert_eq!(
            esc("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
        let id = "g 1/é?<x>";
        let encoded = encode_segment(id);
        assert!(!encoded.contains(['/', ' ', '?', '<']), "{encoded}");
        assert_eq!(decode_segment(&encoded).as_deref(), Some(id));
        assert_eq!(decode_segment("%zz"), None);
        assert_eq!(decode_segment("%f"), None);
        assert_eq!(decode_segment("%ff"), None, "not UTF-8");
    }
}
