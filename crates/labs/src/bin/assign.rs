//! `assign`: prints the partitions each member would get from an assignment strategy.
//!
//! Reads one JSON request on standard input and writes the assignment as one line of JSON
//! on standard output; see [`USAGE`]. Any error — malformed JSON, an unknown field or
//! strategy, a subscription to a topic not listed, a partition owned twice or not
//! existing — is one line on standard error, `error[CODE]: message`, and exit code 2.

use std::fmt;
use std::io::{Read, Write};
use std::marker::PhantomData;
use std::process::ExitCode;

use coordinator_core::AssignmentRequest;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

const USAGE: &str = r#"usage: assign < request.json
       assign --strategies     (list the strategy names, the default first)

Prints the partitions each member would get from an assignment strategy.

Request (JSON on standard input; unknown fields are refused):
  {"strategy": "<name>",                      optional, default minikafka-roundrobin
   "topics":  {"<topic>": <partition count>, ...},
   "members": {"<member id>": {"topics": ["<topic>", ...],
                               "owned": [{"topic": "<t>", "partition": <p>}, ...]}, ...}}
  "owned" (optional) is the member's previous assignment, for the sticky strategies.

Answer (one line of JSON on standard output), every member present, partitions in
topic then partition order:
  {"<member id>": [{"topic": "<t>", "partition": <p>}, ...], ...}

Errors: one line on standard error, exit code 2."#;

/// What the tool reads.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    #[serde(default)]
    strategy: Option<String>,
    topics: Entries<u32>,
    members: Entries<MemberSpec>,
}

/// One member of the request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MemberSpec {
    #[serde(default)]
    topics: Vec<String>,
    #[serde(default)]
    owned: Vec<Partition>,
}

/// A topic partition, as read and as written.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Partition {
    topic: String,
    partition: u32,
}

/// A JSON object read as its entries in order, so that a repeated key is reported instead
/// of silently replacing the first.
#[derive(Debug)]
struct Entries<T>(Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Entries<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for EntriesVisitor<T> {
            type Value = Entries<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }

        deserializer.deserialize_map(EntriesVisitor(PhantomData))
    }
}

/// Everything that can go wrong, each with a stable code.
#[derive(Debug, thiserror::Error)]
enum ToolError {
    #[error("{0}")]
    Usage(String),
    #[error("cannot read the request: {0}")]
    Read(#[source] std::io::Error),
    #[error("malformed request: {0}")]
    Malformed(#[source] serde_json::Error),
    #[error("unknown strategy `{name}` (known: {})", assignor::names::ALL.join(", "))]
    UnknownStrategy { name: String },
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("strategy `{strategy}` failed: {reason}")]
    AssignFailed { strategy: String, reason: String },
    #[error("cannot write the answer: {0}")]
    Write(#[source] std::io::Error),
}

impl ToolError {
    fn code(&self) -> &'static str {
        match self {
            ToolError::Usage(_) => "USAGE",
            ToolError::Read(_) => "READ_FAILED",
            ToolError::Malformed(_) => "MALFORMED_REQUEST",
            ToolError::UnknownStrategy { .. } => "UNKNOWN_STRATEGY",
            ToolError::Invalid(_) => "INVALID_REQUEST",
            ToolError::AssignFailed { .. } => "ASSIGNOR_FAILED",
            ToolError::Write(_) => "WRITE_FAILED",
        }
    }
}

/// Parses a request and computes its answer, as one line of JSON (without the newline).
fn answer(json: &str) -> Result<String, ToolError> {
    let request: Request = serde_json::from_str(json).map_err(ToolError::Malformed)?;
    let strategy = request
        .strategy
        .unwrap_or_else(|| assignor::names::DEFAULT.to_string());
    let assignor =
        assignor::by_name(&strategy).ok_or(ToolError::UnknownStrategy { name: strategy })?;

    let mut builder = AssignmentRequest::builder();
    for (topic, partitions) in request.topics.0 {
        if topic.is_empty() {
            return Err(ToolError::Invalid("a topic name is empty".into()));
        }
        builder = builder.topic(topic, partitions);
    }
    for (id, spec) in &request.members.0 {
        if id.is_empty() {
            return Err(ToolError::Invalid("a member id is empty".into()));
        }
        builder = builder.member(id.as_str(), spec.topics.iter().map(String::as_str));
    }
    for (id, spec) in &request.members.0 {
        for p in &spec.owned {
            builder = builder.owned(id, p.topic.as_str(), p.partition);
        }
    }
    let built = builder
        .build()
        .map_err(|e| ToolError::Invalid(e.message().to_string()))?;

    let input = built.input();
    let fail = |reason: String| ToolError::AssignFailed {
        strategy: assignor.name().to_string(),
        reason,
    };
    let assignment = assignor
        .assign(&input)
        .map_err(|e| fail(e.message().to_string()))?;
    assignment
        .validate(&input)
        .map_err(|e| fail(e.message().to_string()))?;
    let answer: std::collections::BTreeMap<String, Vec<Partition>> = assignment
        .to_map(&input)
        .into_iter()
        .map(|(member, tps)| {
            let partitions = tps
                .into_iter()
                .map(|tp| Partition {
                    topic: tp.topic().to_string(),
                    partition: tp.partition(),
                })
                .collect();
            (member, partitions)
        })
        .collect();
    serde_json::to_string(&answer).map_err(|e| fail(e.to_string()))
}

fn run() -> Result<(), ToolError> {
    let mut args = std::env::args().skip(1);
    match (args.next().as_deref(), args.next()) {
        (None, _) => {}
        (Some("-h" | "--help"), None) => {
            println!("{USAGE}");
            return Ok(());
        }
        (Some("--strategies"), None) => {
            for name in assignor::names::ALL {
                println!("{name}");
            }
            return Ok(());
        }
        (Some(arg), _) => {
            return Err(ToolError::Usage(format!(
                "unexpected argument `{arg}`; the request is read from standard input (see --help)"
            )))
        }
    }
    let mut json = String::new();
    std::io::stdin()
        .read_to_string(&mut json)
        .map_err(ToolError::Read)?;
    let line = answer(&json)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(ToolError::Write)
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line, whatever the message contains.
            let message = e.to_string().replace(['\n', '\r'], " ");
            eprintln!("error[{}]: {message}", e.code());
            ExitCode::from(2)
        }
    }
}
