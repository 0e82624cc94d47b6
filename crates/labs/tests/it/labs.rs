//! Runs each lab binary, as a reader of the book would, and checks what it prints.

#![allow(clippy::expect_used)] // test helpers outside #[test] functions

use std::path::Path;
use std::process::Command;

/// The chapter's "Measured output" of the rebalance lab, copied from the chapter.
const REBALANCE_MEASURED_OUTPUT: &str = "\
1. First member joins and initially owns every partition.
   member 1: orders-0, orders-1, orders-2, orders-3
2. Second member joins, triggering a new generation.
   member 2: orders-1, orders-3
   member 1 local view before refresh: orders-0, orders-1, orders-2, orders-3
   MiniKafka deliberately has no revoke barrier: the old local assignment remains until refresh_assignment().
3. Member 1 refreshes and observes the stable assignment.
   member 1: orders-0, orders-2
   member 2: orders-1, orders-3
   overlap after refresh: False
4. Member 2 leaves; the remaining member owns all partitions.
   member 1: orders-0, orders-1, orders-2, orders-3
   Real Kafka coordinates JoinGroup/SyncGroup and revocation; this mini coordinator completes rebalance synchronously.
";

/// Runs a lab with its temporary directory under a fresh `TMPDIR`, checks that it succeeded
/// and removed its directory, and returns its standard output.
fn run_lab(exe: &str) -> String {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let _spawning = crate::common::spawning();
    let output = Command::new(exe)
        .env("TMPDIR", tmp.path())
        .output()
        .expect("the lab binary runs");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{exe} failed with {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    assert_eq!(
        entries(tmp.path()),
        Vec::<String>::new(),
        "the lab removes its temporary directory"
    );
    stdout
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("readable")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect()
}

/// Asserts that `stdout` contains each of `lines` as a whole line, in this order.
fn assert_lines_in_order(stdout: &str, lines: &[&str]) {
    let mut rest = stdout.lines();
    for wanted in lines {
        assert!(
            rest.any(|line| line == *wanted),
            "missing (or out of order) line {wanted:?} in:\n{stdout}"
        );
    }
}

#[test]
fn rebalance_prints_the_chapters_measured_output_line_for_line() {
    let stdout = run_lab(env!("CARGO_BIN_EXE_rebalance"));
    let expected: Vec<&str> = REBALANCE_MEASURED_OUTPUT.lines().collect();
    let printed: Vec<&str> = stdout.lines().collect();
    assert_eq!(printed, expected);
    assert_eq!(stdout, REBALANCE_MEASURED_OUTPUT, "no trailing text either");
}

#[test]
fn fencing_lab_shows_the_stale_commit_refused_then_accepted() {
    let stdout = run_lab(env!("CARGO_BIN_EXE_fencing"));
    assert_lines_in_order(
        &stdout,
        &[
            "   polled 12 records; positions: orders-0=3, orders-1=3, orders-2=3, orders-3=3",
            "   member 1 still believes (generation 1): orders-0, orders-1, orders-2, orders-3",
            "3. Member 1 commits before refreshing.",
            "   commit failed: ILLEGAL_GENERATION",
            "   committed offsets of workers: (none)",
            "4. Member 1 refreshes, then commits again.",
            "   member 1 (generation 2): orders-0, orders-2",
            "   commit succeeded: orders-0=3, orders-2=3",
            "   committed offsets of workers: orders-0=3, orders-2=3",
        ],
    );
}

#[test]
fn expiry_lab_expires_nobody_at_the_deadline_and_both_one_ms_later() {
    let stdout = run_lab(env!("CARGO_BIN_EXE_expiry"));
    assert_lines_in_order(
        &stdout,
        &[
            "   member-1: deadline 100 ms",
            "   member-2: deadline 100 ms",
            "   group workers: generation 2, Stable",
            "2. Advance to exactly 100 ms and expire.",
            "   expired: (none)",
            "3. Advance one millisecond (101 ms) and expire again.",
            "   expired: workers/member-1, workers/member-2",
            "   group workers: generation 3, Empty",
            "   member 1 afterwards: heartbeat ILLEGAL_GENERATION, refresh UNKNOWN_MEMBER; it must subscribe again",
        ],
    );
}

#[test]
fn replay_lab_redelivers_offsets_six_to_nine() {
    let stdout = run_lab(env!("CARGO_BIN_EXE_replay"));
    assert_lines_in_order(
        &stdout,
        &[
            "   polled offsets 0-5",
            "   committed offset 6",
            "   polled offsets 6-9",
            "   position 10, committed offset still 6",
            "   expired: workers/member-1",
            "   member 2: orders-0",
            "4. The replacement has no position, so it starts at the committed offset 6.",
            "   polled offsets 6-9",
        ],
    );
}
