//! What the tool prints: Kafka's tables (the formats of `ConsumerGroupCommand` and
//! `GroupOffsetsResetter`, column for column) or one JSON object per line, and the notes and
//! warnings Kafka prints beside them (on stderr here).
//!
//! Rows are written as they are computed and stdout is flushed after each row or block, so
//! a long listing streams.

use std::io::{self, Write};

use coordinator_core::TopicPartition;
use serde_json::{json, Value};

use super::cli::Format;
use super::error::AdminError;
use super::source::{Member, Node};

/// Kafka's `MISSING_COLUMN_VALUE`.
pub(crate) const MISSING: &str = "-";

/// Where rows and notes go.
pub(crate) struct Printer<'a> {
    pub(crate) format: Format,
    out: &'a mut dyn Write,
    notes: &'a mut dyn Write,
}

impl std::fmt::Debug for Printer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Printer")
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

impl<'a> Printer<'a> {
    pub(crate) fn new(format: Format, out: &'a mut dyn Write, notes: &'a mut dyn Write) -> Self {
        Printer { format, out, notes }
    }

    pub(crate) fn json(&self) -> bool {
        self.format == Format::Json
    }

    /// A note or warning for the operator, on stderr (Kafka prints some on stdout).
    pub(crate) fn note(&mut self, line: &str) -> io::Result<()> {
        writeln!(self.notes, "{line}")?;
        self.notes.flush()
    }

    /// One line of output.
    pub(crate) fn line(&mut self, line: &str) -> io::Result<()> {
        writeln!(self.out, "{line}")
    }

    /// One JSON object, on its own line.
    pub(crate) fn object(&mut self, value: &Value) -> io::Result<()> {
        writeln!(self.out, "{value}")
    }

    /// Ends a row or block: what was written reaches stdout now.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

fn opt<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| MISSING.to_string(), |v| v.to_string())
}

fn width<'s>(min: usize, values: impl IntoIterator<Item = &'s str>) -> usize {
    values
        .into_iter()
        .map(|v| v.chars().count())
        .fold(min, usize::max)
}

/// The JSON of an error: `{"code", "kafka_code", "message"}`.
pub fn error_json(e: &AdminError) -> Value {
    json!({"code": e.code(), "kafka_code": e.kafka_code(), "message": e.to_string()})
}

// ----- --describe (offsets)

/// One partition row of `--describe`.
#[derive(Clone, Debug)]
pub(crate) struct OffsetRow<'a> {
    pub(crate) group: &'a str,
    pub(crate) partition: &'a TopicPartition,
    pub(crate) current: Option<i64>,
    /// The metadata committed with `current`, where the source keeps it.
    pub(crate) metadata: Option<&'a str>,
    pub(crate) end: Option<i64>,
    /// The member that owns it, if any.
    pub(crate) member: Option<&'a Member>,
}

impl OffsetRow<'_> {
    /// Kafka's lag: end − committed, when both are known.
    pub(crate) fn lag(&self) -> Option<i64> {
        self.current.zip(self.end).map(|(c, e)| e - c)
    }
}

/// The column widths of one group's `--describe` table (Kafka computes them from every
/// row; all but the offsets are known before the log is asked, so rows can stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OffsetColumns {
    group: usize,
    topic: usize,
    consumer: usize,
    host: usize,
}

impl OffsetColumns {
    pub(crate) fn new<'m>(
        group: &str,
        topics: impl IntoIterator<Item = &'m str>,
        members: impl IntoIterator<Item = Option<&'m Member>> + Clone,
    ) -> Self {
        let ids = members
            .clone()
            .into_iter()
            .map(|m| m.map_or(MISSING, |m| m.id.as_str()));
        let hosts = members
            .into_iter()
            .map(|m| m.map_or(MISSING, |m| m.host.as_str()));
        OffsetColumns {
            group: width(15, [group]),
            topic: width(15, topics),
            consumer: width(15, ids),
            host: width(15, hosts),
        }
    }

    pub(crate) fn header(&self) -> String {
        self.format([
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ])
    }

    pub(crate) fn row(&self, row: &OffsetRow<'_>) -> String {
        let partition = row.partition.partition().to_string();
        let (current, end, lag) = (opt(row.current), opt(row.end), opt(row.lag()));
        self.format([
            row.group,
            row.partition.topic(),
            &partition,
            &current,
            &end,
            &lag,
            row.member.map_or(MISSING, |m| m.id.as_str()),
            row.member.map_or(MISSING, |m| m.host.as_str()),
            row.member.map_or(MISSING, |m| m.client_id.as_str()),
        ])
    }

    fn format(&self, c: [&str; 9]) -> String {
        let OffsetColumns {
            group,
            topic,
            consumer,
            host,
        } = *self;
        format!(
            "{:<group$} {:<topic$} {:<10} {:<15} {:<15} {:<15} {:<consumer$} {:<host$} {}",
            c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]
        )
    }
}

pub(crate) fn offset_json(row: &OffsetRow<'_>) -> Value {
    json!({
        "group": row.group,
        "topic": row.partition.topic(),
        "partition": row.partition.partition(),
        "current_offset": row.current,
        "metadata": row.metadata,
        "log_end_offset": row.end,
        "lag": row.lag(),
        "consumer_id": row.member.map(|m| &m.id),
        "host": row.member.map(|m| &m.host),
        "client_id": row.member.map(|m| &m.client_id),
    })
}

// ----- --describe --members

/// Kafka 3's `ASSIGNMENT` column: `topic(0,1), other(2)`, topics sorted.
pub(crate) fn assignment_text(partitions: &[TopicPartition]) -> String {
    if partitions.is_empty() {
        return MISSING.to_string();
    }
    let mut by_topic: std::collections::BTreeMap<&str, Vec<u32>> = Default::default();
    for tp in partitions {
        by_topic.entry(tp.topic()).or_default().push(tp.partition());
    }
    by_topic
        .into_iter()
        .map(|(topic, mut ps)| {
            ps.sort_unstable();
            let list: Vec<String> = ps.iter().map(u32::to_string).collect();
            format!("{topic}({})", list.join(","))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `--members` table of one group.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MemberColumns {
    group: usize,
    consumer: usize,
    /// Set when a member is static: Kafka adds a GROUP-INSTANCE-ID column.
    instance: Option<usize>,
    host: usize,
    client: usize,
    verbose: bool,
    /// A consumer-protocol group (KIP-848): verbose rows show each member's epoch, current
    /// and target assignments (Kafka 4's CURRENT-EPOCH … TARGET-ASSIGNMENT), this wide.
    epochs: Option<usize>,
}

impl MemberColumns {
    pub(crate) fn new(group: &str, members: &[Member], verbose: bool) -> Self {
        let static_members = members.iter().any(|m| m.instance_id.is_some());
        MemberColumns {
            group: width(15, [group]),
            consumer: width(15, members.iter().map(|m| m.id.as_str())),
            instance: static_members.then(|| {
                width(
                    17,
                    members
                        .iter()
                        .map(|m| m.instance_id.as_deref().unwrap_or("")),
                )
            }),
            host: width(15, members.iter().map(|m| m.host.as_str())),
            client: width(15, members.iter().map(|m| m.client_id.as_str())),
            verbose,
            epochs: members.iter().any(|m| m.epochs.is_some()).then(|| {
                let texts: Vec<String> = members
                    .iter()
                    .map(|m| assignment_text(&m.assignment))
                    .collect();
                width(18, texts.iter().map(String::as_str))
            }),
        }
    }

    pub(crate) fn header(&self) -> String {
        let last = match self.epochs {
            Some(w) => format!(
                "{:<15} {:<w$} {:<15} {}",
                "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"
            ),
            None => "ASSIGNMENT".to_string(),
        };
        self.format(
            "GROUP",
            "CONSUMER-ID",
            "GROUP-INSTANCE-ID",
            "HOST",
            "CLIENT-ID",
            "#PARTITIONS",
            &last,
        )
    }

    pub(crate) fn row(&self, group: &str, m: &Member) -> String {
        let current = assignment_text(&m.assignment);
        let last = match (self.epochs, &m.epochs) {
            (Some(w), Some(e)) => format!(
                "{:<15} {current:<w$} {:<15} {}",
                e.current,
                e.target_epoch,
                assignment_text(&e.target)
            ),
            (Some(w), None) => format!("{:<15} {current:<w$} {:<15} -", "-", "-"),
            (None, _) => current,
        };
        self.format(
            group,
            &m.id,
            m.instance_id.as_deref().unwrap_or(""),
            &m.host,
            &m.client_id,
            &m.assignment.len().to_string(),
            &last,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn format(
        &self,
        group: &str,
        consumer: &str,
        instance: &str,
        host: &str,
        client: &str,
        count: &str,
        assignment: &str,
    ) -> String {
        let (g, c, h, cl) = (self.group, self.consumer, self.host, self.client);
        // Kafka's "%-15s " leaves a space after #PARTITIONS, then the assignment if verbose.
        let mut line = match self.instance {
            Some(i) => format!(
                "{group:<g$} {consumer:<c$} {instance:<i$} {host:<h$} {client:<cl$} {count:<15} "
            ),
            None => format!("{group:<g$} {consumer:<c$} {host:<h$} {client:<cl$} {count:<15} "),
        };
        if self.verbose {
            line.push_str(assignment);
        }
        line
    }
}

pub(crate) fn member_json(group: &str, m: &Member) -> Value {
    let mut v = json!({
        "group": group,
        "consumer_id": m.id,
        "group_instance_id": m.instance_id,
        "host": m.host,
        "client_id": m.client_id,
        "partitions": m.assignment.len(),
        "assignment": m.assignment.iter()
            .map(|tp| json!({"topic": tp.topic(), "partition": tp.partition()}))
            .collect::<Vec<_>>(),
    });
    // A consumer-protocol member's epochs and target; classic members have none.
    if let (Some(e), Some(o)) = (&m.epochs, v.as_object_mut()) {
        o.insert("current_epoch".into(), json!(e.current));
        o.insert("target_epoch".into(), json!(e.target_epoch));
        o.insert(
            "target_assignment".into(),
            e.target
                .iter()
                .map(|tp| json!({"topic": tp.topic(), "partition": tp.partition()}))
                .collect::<Vec<_>>()
                .into(),
        );
    }
    v
}

// ----- --describe --state

/// Kafka's coordinator column: `host:port  (id)`.
pub(crate) fn coordinator_text(node: Option<&Node>) -> String {
    node.map_or_else(
        || MISSING.to_string(),
        |n| format!("{}:{}  ({})", n.host, n.port, n.id),
    )
}

/// The `--state` table of one group: header and row.
pub(crate) fn state_lines(
    group: &str,
    coordinator: Option<&Node>,
    strategy: &str,
    state: &str,
    members: usize,
) -> [String; 2] {
    let coordinator = coordinator_text(coordinator);
    let strategy = if strategy.is_empty() {
        MISSING
    } else {
        strategy
    };
    let g = width(15, [group]);
    let co = width(25, [coordinator.as_str()]);
    let f = |a: &str, b: &str, c: &str, d: &str, e: &str| {
        format!("{a:<g$} {b:<co$} {c:<20} {d:<20} {e}")
    };
    [
        f(
            "GROUP",
            "COORDINATOR (ID)",
            "ASSIGNMENT-STRATEGY",
            "STATE",
            "#MEMBERS",
        ),
        f(group, &coordinator, strategy, state, &members.to_string()),
    ]
}

pub(crate) fn state_json(
    group: &str,
    coordinator: Option<&Node>,
    strategy: &str,
    state: &str,
    members: usize,
    epochs: Option<(i32, i32)>,
) -> Value {
    let mut v = json!({
        "group": group,
        "coordinator": coordinator.map(|n| json!({"id": n.id, "host": n.host, "port": n.port})),
        "assignment_strategy": (!strategy.is_empty()).then_some(strategy),
        "state": state,
        "members": members,
    });
    // A consumer-protocol group's epochs; classic groups have none.
    if let (Some((group_epoch, target)), Some(o)) = (epochs, v.as_object_mut()) {
        o.insert("group_epoch".into(), json!(group_epoch));
        o.insert("target_assignment_epoch".into(), json!(target));
    }
    v
}

// ----- --list --state

/// Kafka's `--list --state` format: the group column is 10 wider than the longest id.
pub(crate) fn list_format(groups: &[(String, Option<String>)]) -> impl Fn(&str, &str) -> String {
    let w = groups
        .iter()
        .map(|(g, _)| width(15, [g.as_str()]))
        .max()
        .unwrap_or(15)
        + 10;
    move |group: &str, state: &str| format!("{group:<w$} {state:<20}")
}

// ----- --reset-offsets

/// One planned reset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResetRow {
    pub(crate) group: String,
    pub(crate) partition: TopicPartition,
    pub(crate) previous: Option<i64>,
    pub(crate) new: i64,
}

/// Kafka's reset table format, for every row of every group.
pub(crate) fn reset_format(rows: &[ResetRow]) -> impl Fn(&str, &str, &str, &str) -> String {
    let g = width(15, rows.iter().map(|r| r.group.as_str()));
    let t = width(15, rows.iter().map(|r| r.partition.topic()));
    move |group: &str, topic: &str, partition: &str, offset: &str| {
        format!("{group:<g$} {topic:<t$} {partition:<10} {offset}")
    }
}

pub(crate) fn reset_json(row: &ResetRow, executed: bool) -> Value {
    json!({
        "group": row.group,
        "topic": row.partition.topic(),
        "partition": row.partition.partition(),
        "previous_offset": row.previous,
        "new_offset": row.new,
        "executed": executed,
    })
}

// ----- --delete-offsets

/// Kafka's `TOPIC PARTITION STATUS` format.
pub(crate) fn delete_offsets_format(
    partitions: &[TopicPartition],
) -> impl Fn(&str, &str, &str) -> String {
    let t = width(15, partitions.iter().map(TopicPartition::topic));
    move |topic: &str, partition: &str, status: &str| {
        format!("{topic:<t$} {partition:<10} {status:<15}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, host: &str, client: &str, parts: &[(&str, u32)]) -> Member {
        Member {
            epochs: None,
            id: id.into(),
            instance_id: None,
            client_id: client.into(),
            host: host.into(),
            assignment: parts
                .iter()
                .map(|(t, p)| TopicPartition::new(*t, *p))
                .collect(),
            subscription: None,
        }
    }

    #[test]
    fn describe_rows_are_kafkas_columns_with_dashes_for_the_unknown() {
        let m = member(
            "consumer-1-a-very-long-member-id",
            "/127.0.0.1",
            "consumer-1",
            &[("orders", 0)],
        );
        let tp0 = TopicPartition::new("orders", 0);
        let tp1 = TopicPartition::new("orders", 1);
        let cols = OffsetColumns::new("g", ["orders", "orders"], [Some(&m), None]);
        assert_eq!(
            cols.header(),
            "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID                      HOST            CLIENT-ID"
        );
        let owned = OffsetRow {
            group: "g",
            partition: &tp0,
            current: Some(3),
            metadata: Some("checkpoint"),
            end: Some(10),
            member: Some(&m),
        };
        assert_eq!(
            cols.row(&owned),
            "g               orders          0          3               10              7               consumer-1-a-very-long-member-id /127.0.0.1      consumer-1"
        );
        let orphan = OffsetRow {
            group: "g",
            partition: &tp1,
            current: None,
            metadata: None,
            end: Some(4),
            member: None,
        };
        assert_eq!(
            cols.row(&orphan),
            "g               orders          1          -               4               -               -                                -               -"
        );
        assert_eq!(
            offset_json(&orphan),
            json!({"group": "g", "topic": "orders", "partition": 1, "current_offset": null,
                   "metadata": null, "log_end_offset": 4, "lag": null, "consumer_id": null,
                   "host": null, "client_id": null})
        );
    }

    #[test]
    fn members_and_state_tables_follow_kafka() {
        let a = member("m-1", "/10.0.0.1", "app", &[("t", 2), ("t", 0), ("u", 1)]);
        let cols = MemberColumns::new("g", std::slice::from_ref(&a), true);
        assert_eq!(
            cols.header(),
            "GROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS     ASSIGNMENT"
        );
        assert_eq!(
            cols.row("g", &a),
            "g               m-1             /10.0.0.1       app             3               t(0,2), u(1)"
        );
        let plain = MemberColumns::new("g", std::slice::from_ref(&a), false);
        assert!(plain.row("g", &a).ends_with("3               "));
        assert_eq!(assignment_text(&[]), "-");
        let node = Node {
            id: 0,
            host: "127.0.0.1".into(),
            port: 9092,
        };
        let [h, r] = state_lines("g", Some(&node), "range", "Stable", 2);
        assert_eq!(h, "GROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE                #MEMBERS");
        assert_eq!(
            r,
            "g               127.0.0.1:9092  (0)       range                Stable               2"
        );
        let [_, r] = state_lines("g", None, "", "Empty", 0);
        assert_eq!(
            r,
            "g               -                         -                    Empty                0"
        );
    }

    /// Counts the flushes between writes, to check that rows reach stdout as they are made.
    #[derive(Default)]
    struct Recorder {
        events: Vec<&'static str>,
    }

    impl Write for Recorder {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.events.last() != Some(&"write") {
                self.events.push("write");
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            self.events.push("flush");
            Ok(())
        }
    }

    #[test]
    fn a_printer_flushes_when_told_and_notes_go_to_the_other_stream() {
        let (mut out, mut notes) = (Recorder::default(), Vec::new());
        let mut p = Printer::new(Format::Text, &mut out, &mut notes);
        p.line("a").unwrap();
        p.flush().unwrap();
        p.note("careful").unwrap();
        p.line("b").unwrap();
        p.flush().unwrap();
        assert_eq!(out.events, ["write", "flush", "write", "flush"]);
        assert_eq!(String::from_utf8(notes).unwrap(), "careful\n");
    }
}
