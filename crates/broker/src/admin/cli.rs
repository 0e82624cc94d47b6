//! The command line, with the flags of Kafka's `kafka-consumer-groups.sh`, and its checks:
//! [`Args`] is what clap parses, [`Args::validate`] turns it into [`Options`] or a usage
//! error naming the flags (Kafka's rules of `ConsumerGroupCommandOptions.checkArgs`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use super::datetime;
use super::error::AdminError;

/// List, describe (with lag), reset and delete the offsets of consumer groups, against a
/// running broker (Kafka's protocol) or a data directory while nothing runs. The flags are
/// those of Kafka's kafka-consumer-groups.sh.
///
/// Exit codes: 0 done; 1 the group, the broker or the data directory refused or failed
/// (nothing was changed unless the message says so); 2 the command line is wrong. Errors are
/// one line on stderr: `error[CODE]: message` (a JSON object with --output json).
#[derive(Debug, Default, Parser)]
#[command(name = "groups", version)]
pub struct Args {
    /// The broker(s) to connect to, HOST:PORT[,HOST:PORT...].
    #[arg(long, value_name = "HOST:PORT", help_heading = "Target (exactly one)")]
    pub bootstrap_server: Option<String>,
    /// A broker's data directory (its group log groups/, or offsets.json), while no broker
    /// runs on it.
    #[arg(long, value_name = "DIR", help_heading = "Target (exactly one)")]
    pub data_dir: Option<PathBuf>,

    /// List all consumer groups.
    #[arg(long, help_heading = "Action (exactly one)")]
    pub list: bool,
    /// Describe groups: one row per partition with its offset and lag (or --members, --state).
    #[arg(long, help_heading = "Action (exactly one)")]
    pub describe: bool,
    /// Delete groups (Empty groups only) with their committed offsets.
    #[arg(long, help_heading = "Action (exactly one)")]
    pub delete: bool,
    /// Reset the offsets of inactive groups: --dry-run (the default) or --execute.
    #[arg(long, help_heading = "Action (exactly one)")]
    pub reset_offsets: bool,
    /// Delete a group's committed offsets of some topics.
    #[arg(long, help_heading = "Action (exactly one)")]
    pub delete_offsets: bool,

    /// The group to act on; repeat for more (--delete-offsets takes one).
    #[arg(long, value_name = "GROUP")]
    pub group: Vec<String>,
    /// Act on every consumer group.
    #[arg(long)]
    pub all_groups: bool,
    /// A topic, or some of its partitions as TOPIC:P,P,...; repeatable.
    #[arg(long, value_name = "TOPIC[:P,...]")]
    pub topic: Vec<String>,
    /// Every topic the group has committed offsets for (--reset-offsets).
    #[arg(long)]
    pub all_topics: bool,

    /// With --describe: the members (id, host, client id, number of partitions).
    #[arg(long, help_heading = "Describe")]
    pub members: bool,
    /// With --describe: the partitions and their lag (the default).
    #[arg(long, help_heading = "Describe")]
    pub offsets: bool,
    /// With --describe: coordinator, strategy, state and member count. With --list: a STATE
    /// column, and an optional filter of states, e.g. --state stable,empty.
    #[arg(long, value_name = "STATES", num_args = 0..=1, default_missing_value = "", help_heading = "Describe")]
    pub state: Option<String>,
    /// With --describe --members: each member's assignment too.
    #[arg(long, help_heading = "Describe")]
    pub verbose: bool,

    /// Reset to the log start offset.
    #[arg(long, help_heading = "Reset")]
    pub to_earliest: bool,
    /// Reset to the log end offset.
    #[arg(long, help_heading = "Reset")]
    pub to_latest: bool,
    /// Reset to this offset (clamped to the log's range).
    #[arg(
        long,
        value_name = "OFFSET",
        allow_negative_numbers = true,
        help_heading = "Reset"
    )]
    pub to_offset: Option<i64>,
    /// Move the committed offset by N (negative: back), clamped to the log's range.
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        help_heading = "Reset"
    )]
    pub shift_by: Option<i64>,
    /// Reset to the first offset at or after this time: YYYY-MM-DDTHH:mm:SS.sss[Z|+hh:mm].
    #[arg(long, value_name = "DATETIME", help_heading = "Reset")]
    pub to_datetime: Option<String>,
    /// Only show the new offsets (the default).
    #[arg(long, help_heading = "Reset")]
    pub dry_run: bool,
    /// Apply the new offsets.
    #[arg(long, help_heading = "Reset")]
    pub execute: bool,

    /// text (Kafka's tables) or json (one object per line; see the README for the schema).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// How long to wait for the broker: connecting, and each request (Kafka's --timeout).
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    pub timeout: u64,
}

/// How results are printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Kafka's aligned tables.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Where the groups live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A running broker, by its bootstrap addresses.
    Broker {
        /// HOST:PORT, tried in order.
        bootstrap: Vec<String>,
        /// The bound of connecting and of each request.
        timeout: Duration,
    },
    /// A data directory (`<dir>/groups/` or `<dir>/offsets.json`) while no broker runs on it.
    DataDir(PathBuf),
}

/// Which groups a command acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Groups {
    /// These, in this order.
    Named(Vec<String>),
    /// Every consumer group.
    All,
}

/// What `--describe` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// One row per partition (Kafka's `--offsets`, the default).
    Offsets,
    /// One row per member; with their assignments when verbose.
    Members {
        /// `--verbose`.
        verbose: bool,
    },
    /// One row per group.
    State,
}

/// A topic, or some of its partitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicArg {
    /// The topic.
    pub topic: String,
    /// The partitions named after `:`, or `None` for all of them.
    pub partitions: Option<Vec<u32>>,
}

/// Where the new offsets of a reset come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResetSpec {
    /// `--to-earliest`.
    ToEarliest,
    /// `--to-latest`.
    ToLatest,
    /// `--to-offset N`.
    ToOffset(i64),
    /// `--shift-by N`.
    ShiftBy(i64),
    /// `--to-datetime`, in epoch milliseconds.
    ToDatetime(i64),
}

impl ResetSpec {
    /// The flag, for messages.
    pub fn flag(&self) -> &'static str {
        match self {
            ResetSpec::ToEarliest => "--to-earliest",
            ResetSpec::ToLatest => "--to-latest",
            ResetSpec::ToOffset(_) => "--to-offset",
            ResetSpec::ShiftBy(_) => "--shift-by",
            ResetSpec::ToDatetime(_) => "--to-datetime",
        }
    }

    /// Whether the new offsets can only come from the partition log.
    pub fn needs_log(&self) -> bool {
        matches!(
            self,
            ResetSpec::ToEarliest | ResetSpec::ToLatest | ResetSpec::ToDatetime(_)
        )
    }
}

/// The partitions a reset covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `--all-topics`: every partition the group has an offset for.
    AllTopics,
    /// `--topic ...`.
    Topics(Vec<TopicArg>),
}

/// One action, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// `--list`; `Some(states)` with `--state` (empty: every state), lower-cased.
    List {
        /// The `--state` filter.
        states: Option<Vec<String>>,
    },
    /// `--describe`.
    Describe {
        /// The groups.
        groups: Groups,
        /// What to show.
        view: View,
    },
    /// `--reset-offsets`.
    ResetOffsets {
        /// The groups.
        groups: Groups,
        /// The partitions.
        scope: Scope,
        /// The new offsets.
        spec: ResetSpec,
        /// `--execute`.
        execute: bool,
        /// Neither `--execute` nor `--dry-run` was given (Kafka warns).
        implicit_dry_run: bool,
    },
    /// `--delete`.
    Delete {
        /// The groups.
        groups: Groups,
    },
    /// `--delete-offsets`.
    DeleteOffsets {
        /// The group.
        group: String,
        /// The topics.
        topics: Vec<TopicArg>,
    },
}

/// A checked command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Broker or data directory.
    pub target: Target,
    /// What to do.
    pub action: Action,
    /// Text or JSON.
    pub format: Format,
}

/// Kafka's valid states of consumer groups, for `--list --state`.
const STATES: &[&str] = &[
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
    "Empty",
];

fn only_with(present: bool, flag: &str, allowed: &str) -> Result<(), AdminError> {
    if present {
        Err(AdminError::usage(format!(
            "Option {flag} can only be used with {allowed}"
        )))
    } else {
        Ok(())
    }
}

/// Parses `topic` or `topic:0,1,2` (Kafka's `parseTopicsWithPartitions`).
pub(crate) fn parse_topic(arg: &str) -> Result<TopicArg, AdminError> {
    let Some((topic, partitions)) = arg.split_once(':') else {
        if arg.is_empty() {
            return Err(AdminError::usage(
                "Invalid topic arg '', expected a topic name",
            ));
        }
        return Ok(TopicArg {
            topic: arg.to_string(),
            partitions: None,
        });
    };
    if topic.is_empty() || partitions.contains(':') {
        return Err(AdminError::usage(format!(
            "Invalid topic arg '{arg}', expected topic name and partitions"
        )));
    }
    let partitions = partitions
        .split(',')
        .map(|p| {
            p.trim().parse::<u32>().map_err(|_| {
                AdminError::usage(format!(
                    "Invalid partition '{p}' specified in topic arg '{arg}'"
                ))
            })
        })
        .collect::<Result<Vec<u32>, AdminError>>()?;
    Ok(TopicArg {
        topic: topic.to_string(),
        partitions: Some(partitions),
    })
}

impl Args {
    /// Checks the flags as Kafka's tool does and returns what to do.
    ///
    /// # Errors
    /// [`AdminError::Usage`] naming the flags, or [`AdminError::LogUnavailable`] for a reset
    /// that needs the log against a data directory.
    pub fn validate(&self) -> Result<Options, AdminError> {
        let actions = [
            self.list,
            self.describe,
            self.delete,
            self.reset_offsets,
            self.delete_offsets,
        ];
        if actions.iter().filter(|&&a| a).count() != 1 {
            return Err(AdminError::usage(
                "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets",
            ));
        }
        let target = match (&self.bootstrap_server, &self.data_dir) {
            (Some(servers), None) => {
                let bootstrap: Vec<String> = servers
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                if bootstrap.is_empty() {
                    return Err(AdminError::usage(
                        "Option --bootstrap-server needs HOST:PORT",
                    ));
                }
                if self.timeout == 0 {
                    return Err(AdminError::usage("Option --timeout must be at least 1 ms"));
                }
                Target::Broker {
                    bootstrap,
                    timeout: Duration::from_millis(self.timeout),
                }
            }
            (None, Some(dir)) => Target::DataDir(dir.clone()),
            _ => {
                return Err(AdminError::usage(
                    "Command must include exactly one of --bootstrap-server and --data-dir",
                ))
            }
        };
        if self.group.iter().any(String::is_empty) {
            return Err(AdminError::usage(
                "Option --group needs a non-empty group id",
            ));
        }
        if !self.group.is_empty() && self.all_groups {
            return Err(AdminError::usage(
                "Option --group can't be used with option --all-groups",
            ));
        }
        let groups = || -> Result<Groups, AdminError> {
            if self.all_groups {
                Ok(Groups::All)
            } else if !self.group.is_empty() {
                Ok(Groups::Named(self.group.clone()))
            } else {
                Err(AdminError::usage(format!(
                    "Option {} takes one of these options: --group, --all-groups",
                    self.action_flag()
                )))
            }
        };
        // Flags that belong to one action only.
        let describe_only = self.members || self.offsets || self.verbose;
        only_with(
            !self.describe && describe_only,
            "--members/--offsets/--verbose",
            "--describe",
        )?;
        only_with(
            !self.describe && !self.list && self.state.is_some(),
            "--state",
            "--describe or --list",
        )?;
        let reset_only = self.to_earliest
            || self.to_latest
            || self.to_offset.is_some()
            || self.shift_by.is_some()
            || self.to_datetime.is_some()
            || self.dry_run
            || self.execute
            || self.all_topics;
        only_with(
            !self.reset_offsets && reset_only,
            "--to-earliest/--to-latest/--to-offset/--shift-by/--to-datetime/--dry-run/--execute/--all-topics",
            "--reset-offsets",
        )?;
        only_with(
            !(self.topic.is_empty() || self.reset_offsets || self.delete_offsets),
            "--topic",
            "--reset-offsets or --delete-offsets",
        )?;
        let action = if self.list {
            only_with(
                !self.group.is_empty() || self.all_groups,
                "--group/--all-groups",
                "--describe, --delete, --reset-offsets or --delete-offsets",
            )?;
            let states = match &self.state {
                None => None,
                Some(filter) => Some(parse_states(filter)?),
            };
            Action::List { states }
        } else if self.describe {
            let views = [self.members, self.offsets, self.state.is_some()];
            if views.iter().filter(|&&v| v).count() > 1 {
                return Err(AdminError::usage(
                    "Option --describe takes at most one of these options: --members, --offsets, --state",
                ));
            }
            if self.state.as_deref().is_some_and(|s| !s.is_empty()) {
                return Err(AdminError::usage(
                    "Option --describe does not take a value for --state",
                ));
            }
            let view = if self.members {
                View::Members {
                    verbose: self.verbose,
                }
            } else if self.state.is_some() {
                View::State
            } else {
                View::Offsets
            };
            Action::Describe {
                groups: groups()?,
                view,
            }
        } else if self.delete {
            Action::Delete { groups: groups()? }
        } else if self.delete_offsets {
            if self.group.len() != 1 || self.topic.is_empty() || self.all_groups {
                return Err(AdminError::usage(
                    "Option --delete-offsets takes the following options: --group (one), --topic",
                ));
            }
            Action::DeleteOffsets {
                group: self.group[0].clone(),
                topics: self.topics()?,
            }
        } else {
            self.reset_action(groups()?)?
        };
        if let (Target::DataDir(_), Action::ResetOffsets { spec, .. }) = (&target, &action) {
            if spec.needs_log() {
                return Err(AdminError::LogUnavailable { flag: spec.flag() });
            }
        }
        Ok(Options {
            target,
            action,
            format: self.output,
        })
    }

    fn action_flag(&self) -> &'static str {
        if self.describe {
            "--describe"
        } else if self.delete {
            "--delete"
        } else if self.reset_offsets {
            "--reset-offsets"
        } else if self.delete_offsets {
            "--delete-offsets"
        } else {
            "--list"
        }
    }

    fn topics(&self) -> Result<Vec<TopicArg>, AdminError> {
        self.topic.iter().map(|t| parse_topic(t)).collect()
    }

    fn reset_action(&self, groups: Groups) -> Result<Action, AdminError> {
        if self.dry_run && self.execute {
            return Err(AdminError::usage(
                "Option --reset-offsets only accepts one of --execute and --dry-run",
            ));
        }
        let mut specs = Vec::new();
        if self.to_earliest {
            specs.push(ResetSpec::ToEarliest);
        }
        if self.to_latest {
            specs.push(ResetSpec::ToLatest);
        }
        if let Some(n) = self.to_offset {
            specs.push(ResetSpec::ToOffset(n));
        }
        if let Some(n) = self.shift_by {
            specs.push(ResetSpec::ShiftBy(n));
        }
        if let Some(text) = &self.to_datetime {
            specs.push(ResetSpec::ToDatetime(
                datetime::parse(text).map_err(AdminError::usage)?,
            ));
        }
        let spec = match specs.len() {
            1 => specs.remove(0),
            0 => {
                return Err(AdminError::usage(
                    "Option --reset-offsets requires one of the following scenarios: --to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime",
                ))
            }
            _ => {
                return Err(AdminError::usage(format!(
                    "Option {} can't be used with option {}",
                    specs[0].flag(),
                    specs[1].flag()
                )))
            }
        };
        let scope = match (self.all_topics, self.topic.is_empty()) {
            (true, true) => Scope::AllTopics,
            (false, false) => Scope::Topics(self.topics()?),
            (false, true) => {
                return Err(AdminError::usage(
                    "One of the reset scopes should be defined: --all-topics, --topic.",
                ))
            }
            (true, false) => {
                return Err(AdminError::usage(
                    "Option --all-topics can't be used with option --topic",
                ))
            }
        };
        Ok(Action::ResetOffsets {
            groups,
            scope,
            spec,
            execute: self.execute,
            implicit_dry_run: !self.execute && !self.dry_run,
        })
    }
}

fn parse_states(filter: &str) -> Result<Vec<String>, AdminError> {
    let mut states = Vec::new();
    for s in filter.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some(known) = STATES.iter().find(|k| k.eq_ignore_ascii_case(s)) else {
            return Err(AdminError::usage(format!(
                "Invalid state list '{filter}'. Valid states are: {}",
                STATES.join(", ")
            )));
        };
        states.push(known.to_ascii_lowercase());
    }
    Ok(states)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &[&str]) -> Result<Options, AdminError> {
        let argv = std::iter::once("groups").chain(line.iter().copied());
        Args::try_parse_from(argv)
            .map_err(|e| AdminError::usage(e.to_string()))?
            .validate()
    }

    fn usage(line: &[&str]) -> String {
        match args(line) {
            Err(e) => {
                assert_eq!(e.code(), "USAGE", "{line:?}: {e}");
                e.to_string()
            }
            Ok(o) => panic!("{line:?} was accepted: {o:?}"),
        }
    }

    const B: [&str; 2] = ["--bootstrap-server", "127.0.0.1:9092"];

    #[test]
    fn the_actions_parse_into_options() {
        let o = args(
            &[
                &B[..],
                &["--describe", "--group", "g", "--members", "--verbose"],
            ]
            .concat(),
        )
        .unwrap();
        assert_eq!(
            o.action,
            Action::Describe {
                groups: Groups::Named(vec!["g".into()]),
                view: View::Members { verbose: true }
            }
        );
        assert_eq!(
            o.target,
            Target::Broker {
                bootstrap: vec!["127.0.0.1:9092".into()],
                timeout: Duration::from_millis(5000)
            }
        );
        let o = args(&["--data-dir", "/d", "--list", "--state", "Stable,empty"]).unwrap();
        assert_eq!(o.target, Target::DataDir("/d".into()));
        assert_eq!(
            o.action,
            Action::List {
                states: Some(vec!["stable".into(), "empty".into()])
            }
        );
        let o = args(
            &[
                &B[..],
                &[
                    "--reset-offsets",
                    "--all-groups",
                    "--topic",
                    "t:0,2",
                    "--topic",
                    "u",
                ],
                &["--shift-by", "-3", "--execute", "--output", "json"],
            ]
            .concat(),
        )
        .unwrap();
        assert_eq!(o.format, Format::Json);
        assert_eq!(
            o.action,
            Action::ResetOffsets {
                groups: Groups::All,
                scope: Scope::Topics(vec![
                    TopicArg {
                        topic: "t".into(),
                        partitions: Some(vec![0, 2])
                    },
                    TopicArg {
                        topic: "u".into(),
                        partitions: None
                    }
                ]),
                spec: ResetSpec::ShiftBy(-3),
                execute: true,
                implicit_dry_run: false,
            }
        );
        let o = args(
            &[
                &B[..],
                &[
                    "--reset-offsets",
                    "--group",
                    "g",
                    "--all-topics",
                    "--to-datetime",
                    "1970-01-01T00:00:01.000",
                ],
            ]
            .concat(),
        )
        .unwrap();
        assert!(matches!(
            o.action,
            Action::ResetOffsets {
                spec: ResetSpec::ToDatetime(1000),
                execute: false,
                implicit_dry_run: true,
                ..
            }
        ));
    }

    #[test]
    fn kafkas_rules_refuse_bad_combinations_with_a_message_naming_the_flags() {
        let cases: Vec<(Vec<&str>, &str)> = vec![
            (
                vec!["--list"],
                "exactly one of --bootstrap-server and --data-dir",
            ),
            (
                vec!["--list", "--data-dir", "d", "--bootstrap-server", "h:1"],
                "exactly one of --bootstrap-server and --data-dir",
            ),
            (
                [&B[..], &["--list", "--describe"]].concat(),
                "exactly one action",
            ),
            (B.to_vec(), "exactly one action"),
            (
                [&B[..], &["--describe"]].concat(),
                "Option --describe takes one of these options: --group, --all-groups",
            ),
            (
                [&B[..], &["--describe", "--group", "g", "--all-groups"]].concat(),
                "--group can't be used with option --all-groups",
            ),
            (
                [
                    &B[..],
                    &["--describe", "--group", "g", "--members", "--state"],
                ]
                .concat(),
                "at most one of",
            ),
            (
                [&B[..], &["--describe", "--group", "g", "--state", "stable"]].concat(),
                "does not take a value for --state",
            ),
            (
                [&B[..], &["--list", "--state", "bogus"]].concat(),
                "Invalid state list 'bogus'",
            ),
            (
                [&B[..], &["--list", "--group", "g"]].concat(),
                "--group/--all-groups can only be used with",
            ),
            (
                [&B[..], &["--list", "--members"]].concat(),
                "can only be used with --describe",
            ),
            (
                [&B[..], &["--describe", "--group", "g", "--topic", "t"]].concat(),
                "--topic can only be used with",
            ),
            (
                [&B[..], &["--delete", "--group", "g", "--topic", "t"]].concat(),
                "--topic can only be used with",
            ),
            (
                [&B[..], &["--delete-offsets", "--group", "g"]].concat(),
                "--delete-offsets takes the following options",
            ),
            (
                [
                    &B[..],
                    &[
                        "--delete-offsets",
                        "--group",
                        "g",
                        "--group",
                        "h",
                        "--topic",
                        "t",
                    ],
                ]
                .concat(),
                "--delete-offsets takes the following options",
            ),
            (
                [&B[..], &["--reset-offsets", "--group", "g", "--all-topics"]].concat(),
                "requires one of the following scenarios",
            ),
            (
                [
                    &B[..],
                    &["--reset-offsets", "--group", "g", "--to-earliest"],
                ]
                .concat(),
                "One of the reset scopes should be defined",
            ),
            (
                [
                    &B[..],
                    &[
                        "--reset-offsets",
                        "--group",
                        "g",
                        "--all-topics",
                        "--topic",
                        "t",
                        "--to-latest",
                    ],
                ]
                .concat(),
                "--all-topics can't be used with option --topic",
            ),
            (
                [
                    &B[..],
                    &[
                        "--reset-offsets",
                        "--group",
                        "g",
                        "--all-topics",
                        "--to-earliest",
                        "--to-offset",
                        "3",
                    ],
                ]
                .concat(),
                "--to-earliest can't be used with option --to-offset",
            ),
            (
                [
                    &B[..],
                    &[
                        "--reset-offsets",
                        "--group",
                        "g",
                        "--all-topics",
                        "--to-latest",
                        "--execute",
                        "--dry-run",
                    ],
                ]
                .concat(),
                "only accepts one of --execute and --dry-run",
            ),
            (
                [
                    &B[..],
                    &[
                        "--reset-offsets",
                        "--group",
                        "g",
                        "--all-topics",
                        "--to-datetime",
                        "yesterday",
                    ],
                ]
                .concat(),
                "YYYY-MM-DDTHH:mm:SS.sss",
            ),
            (
                [
                    &B[..],
                    &[
                        "--reset-offsets",
                        "--group",
                        "g",
                        "--topic",
                        "t:x",
                        "--to-latest",
                    ],
                ]
                .concat(),
                "Invalid partition 'x' specified in topic arg 't:x'",
            ),
            (
                [
                    &B[..],
                    &[
                        "--reset-offsets",
                        "--group",
                        "g",
                        "--topic",
                        "t:-1",
                        "--to-latest",
                    ],
                ]
                .concat(),
                "Invalid partition '-1'",
            ),
            (
                [
                    &B[..],
                    &[
                        "--reset-offsets",
                        "--group",
                        "g",
                        "--topic",
                        ":1",
                        "--to-latest",
                    ],
                ]
                .concat(),
                "expected topic name and partitions",
            ),
            (
                [&B[..], &["--describe", "--group", "g", "--execute"]].concat(),
                "can only be used with --reset-offsets",
            ),
            (
                [&B[..], &["--describe", "--group", ""]].concat(),
                "non-empty group id",
            ),
            (
                [&B[..], &["--describe", "--group", "g", "--timeout", "0"]].concat(),
                "--timeout",
            ),
            (
                [&B[..], &["--describe", "--group", "g", "--bogus"]].concat(),
                "--bogus",
            ),
        ];
        for (line, expect) in cases {
            let message = usage(&line);
            assert!(message.contains(expect), "{line:?}: {message}");
        }
    }

    #[test]
    fn a_data_directory_cannot_answer_resets_that_need_the_log() {
        for flag in ["--to-earliest", "--to-latest"] {
            let e = args(&[
                "--data-dir",
                "d",
                "--reset-offsets",
                "--group",
                "g",
                "--all-topics",
                flag,
            ])
            .unwrap_err();
            assert_eq!((e.code(), e.kind().exit_code()), ("LOG_UNAVAILABLE", 2));
            assert!(e.to_string().contains(flag), "{e}");
        }
        let e = args(&[
            "--data-dir",
            "d",
            "--reset-offsets",
            "--group",
            "g",
            "--all-topics",
            "--to-datetime",
            "2020-01-01T00:00:00.000",
        ])
        .unwrap_err();
        assert_eq!(e.code(), "LOG_UNAVAILABLE");
        for ok in [["--to-offset", "3"], ["--shift-by", "-1"]] {
            let line = [
                &[
                    "--data-dir",
                    "d",
                    "--reset-offsets",
                    "--group",
                    "g",
                    "--all-topics",
                ][..],
                &ok[..],
            ]
            .concat();
            assert!(args(&line).is_ok(), "{ok:?}");
        }
    }
}
