//! The `assign` tool, run as a user runs it: JSON on stdin, JSON or one error line out.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run_with(args: &[&str], stdin: &str) -> Run {
    let _spawning = crate::common::spawning();
    let mut child = Command::new(env!("CARGO_BIN_EXE_assign"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the assign binary starts");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(stdin.as_bytes())
        .expect("stdin accepts the request");
    let out = child.wait_with_output().expect("the tool finishes");
    Run {
        code: out.status.code().expect("exited normally"),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

/// Runs a request that must succeed; returns the parsed answer.
fn assign(request: &Value) -> Value {
    let run = run_with(&[], &request.to_string());
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    assert_eq!(run.stdout.lines().count(), 1, "one line: {}", run.stdout);
    serde_json::from_str(&run.stdout).expect("the answer is JSON")
}

/// Runs a request that must fail: exit code 2, nothing on stdout, one line on stderr
/// carrying `code` and mentioning `needle`.
fn refuse(request: &str, code: &str, needle: &str) {
    let run = run_with(&[], request);
    assert_eq!(run.code, 2, "request {request}: stdout {}", run.stdout);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert_eq!(run.stderr.lines().count(), 1, "one line: {}", run.stderr);
    assert!(
        run.stderr.starts_with(&format!("error[{code}]: ")),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains(needle), "{needle} in {}", run.stderr);
}

fn tps(list: &[(&str, u32)]) -> Value {
    list.iter()
        .map(|(t, p)| json!({"topic": t, "partition": p}))
        .collect()
}

#[test]
fn the_default_strategy_is_the_seeds_round_robin() {
    let answer = assign(&json!({
        "topics": {"orders": 4},
        "members": {"b": {"topics": ["orders"]}, "a": {"topics": ["orders"]}}
    }));
    assert_eq!(
        answer,
        json!({
            "a": tps(&[("orders", 0), ("orders", 2)]),
            "b": tps(&[("orders", 1), ("orders", 3)]),
        })
    );
}

#[test]
fn chapter_mixed_example_and_every_member_is_listed() {
    let answer = assign(&json!({
        "strategy": "minikafka-roundrobin",
        "topics": {"orders": 2, "payments": 1, "unused": 3},
        "members": {
            "all": {"topics": ["orders", "payments"]},
            "orders-only": {"topics": ["orders"]},
            "idle": {"topics": []},
            "quiet": {}
        }
    }));
    assert_eq!(
        answer,
        json!({
            "all": tps(&[("orders", 0), ("payments", 0)]),
            "orders-only": tps(&[("orders", 1)]),
            "idle": [],
            "quiet": [],
        })
    );
}

#[test]
fn kafkas_strategies_by_their_kafka_names() {
    let request = |strategy: &str| {
        json!({
            "strategy": strategy,
            "topics": {"t0": 1, "t1": 2, "t2": 3},
            "members": {
                "C0": {"topics": ["t0"]},
                "C1": {"topics": ["t0", "t1"]},
                "C2": {"topics": ["t0", "t1", "t2"]}
            }
        })
    };
    assert_eq!(
        assign(&request("roundrobin")),
        json!({
            "C0": tps(&[("t0", 0)]),
            "C1": tps(&[("t1", 0)]),
            "C2": tps(&[("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)]),
        })
    );
    assert_eq!(
        assign(&request("range")),
        json!({
            "C0": tps(&[("t0", 0)]),
            "C1": tps(&[("t1", 0)]),
            "C2": tps(&[("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)]),
        })
    );
    let sticky = json!({
        "C0": tps(&[("t0", 0)]),
        "C1": tps(&[("t1", 0), ("t1", 1)]),
        "C2": tps(&[("t2", 0), ("t2", 1), ("t2", 2)]),
    });
    assert_eq!(assign(&request("sticky")), sticky);
    assert_eq!(assign(&request("cooperative-sticky")), sticky);
}

#[test]
fn sticky_strategies_use_owned_partitions() {
    let request = |strategy: &str| {
        json!({
            "strategy": strategy,
            "topics": {"t": 4},
            "members": {
                "a": {"topics": ["t"], "owned": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]},
                "b": {"topics": ["t"], "owned": [{"topic": "t", "partition": 2}, {"topic": "t", "partition": 3}]},
                "c": {"topics": ["t"]}
            }
        })
    };
    assert_eq!(
        assign(&request("sticky")),
        json!({
            "a": tps(&[("t", 0), ("t", 1)]),
            "b": tps(&[("t", 2)]),
            "c": tps(&[("t", 3)]),
        })
    );
    // t-3 passes from b to c: withheld for one generation.
    assert_eq!(
        assign(&request("cooperative-sticky")),
        json!({
            "a": tps(&[("t", 0), ("t", 1)]),
            "b": tps(&[("t", 2)]),
            "c": [],
        })
    );
}

#[test]
fn malformed_requests_are_refused() {
    refuse("", "MALFORMED_REQUEST", "EOF");
    refuse("{", "MALFORMED_REQUEST", "line 1");
    refuse("[]", "MALFORMED_REQUEST", "malformed request");
    refuse(
        r#"{"members": {}}"#,
        "MALFORMED_REQUEST",
        "missing field `topics`",
    );
    refuse(
        r#"{"topics": {}}"#,
        "MALFORMED_REQUEST",
        "missing field `members`",
    );
    refuse(
        r#"{"topics": {"t": "four"}, "members": {}}"#,
        "MALFORMED_REQUEST",
        "invalid type",
    );
    refuse(
        r#"{"topics": {"t": -1}, "members": {}}"#,
        "MALFORMED_REQUEST",
        "-1",
    );
    refuse(
        r#"{"topics": {"t": 1}, "members": {"a": {"topics": "t"}}}"#,
        "MALFORMED_REQUEST",
        "invalid type",
    );
}

#[test]
fn unknown_fields_are_refused_at_every_level() {
    refuse(
        r#"{"topics": {}, "members": {}, "extra": 1}"#,
        "MALFORMED_REQUEST",
        "unknown field `extra`",
    );
    refuse(
        r#"{"topics": {"t": 1}, "members": {"a": {"topics": ["t"], "subscriptions": []}}}"#,
        "MALFORMED_REQUEST",
        "unknown field `subscriptions`",
    );
    refuse(
        r#"{"topics": {"t": 1}, "members": {"a": {"topics": ["t"], "owned": [{"topic": "t", "partition": 0, "offset": 5}]}}}"#,
        "MALFORMED_REQUEST",
        "unknown field `offset`",
    );
}

#[test]
fn an_unknown_strategy_is_refused_with_the_known_names() {
    refuse(
        r#"{"strategy": "Range", "topics": {}, "members": {}}"#,
        "UNKNOWN_STRATEGY",
        "`Range` (known: minikafka-roundrobin, range, roundrobin, sticky, cooperative-sticky)",
    );
}

#[test]
fn inconsistent_requests_are_refused() {
    refuse(
        r#"{"topics": {"t": 1}, "members": {"a": {"topics": ["t", "nope"]}}}"#,
        "INVALID_REQUEST",
        "member `a` subscribes to unknown topic `nope`",
    );
    refuse(
        r#"{"topics": {"t": 2}, "members": {
            "a": {"topics": ["t"], "owned": [{"topic": "t", "partition": 1}]},
            "b": {"topics": ["t"], "owned": [{"topic": "t", "partition": 1}]}}}"#,
        "INVALID_REQUEST",
        "t-1 is owned by both `a` and `b`",
    );
    refuse(
        r#"{"topics": {"t": 2}, "members": {"a": {"topics": ["t"], "owned": [{"topic": "t", "partition": 2}]}}}"#,
        "INVALID_REQUEST",
        "t-2, which does not exist",
    );
    refuse(
        r#"{"topics": {"t": 2}, "members": {"a": {"topics": ["t"], "owned": [{"topic": "u", "partition": 0}]}}}"#,
        "INVALID_REQUEST",
        "u-0, which does not exist",
    );
    refuse(
        r#"{"topics": {"t": 1, "t": 2}, "members": {}}"#,
        "INVALID_REQUEST",
        "topic `t` is declared twice",
    );
    refuse(
        r#"{"topics": {"t": 1}, "members": {"a": {}, "a": {"topics": ["t"]}}}"#,
        "INVALID_REQUEST",
        "member `a` is declared twice",
    );
    refuse(
        r#"{"topics": {"": 1}, "members": {}}"#,
        "INVALID_REQUEST",
        "topic name is empty",
    );
    refuse(
        r#"{"topics": {}, "members": {"": {}}}"#,
        "INVALID_REQUEST",
        "member id is empty",
    );
}

#[test]
fn arguments_help_and_strategy_list() {
    let help = run_with(&["--help"], "");
    assert_eq!(help.code, 0);
    assert!(help.stdout.starts_with("usage: assign"));
    let list = run_with(&["--strategies"], "");
    assert_eq!(list.code, 0);
    assert_eq!(
        list.stdout.lines().collect::<Vec<_>>(),
        assignor::names::ALL
    );
    let bad = run_with(&["request.json"], "");
    assert_eq!(bad.code, 2);
    assert!(bad.stdout.is_empty());
    assert!(bad
        .stderr
        .starts_with("error[USAGE]: unexpected argument `request.json`"));
}
