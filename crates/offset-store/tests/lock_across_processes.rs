//! One owner per offsets file, across processes: while this process owns the file another
//! process is refused (and changes nothing), and the other way round; a killed owner's lock
//! dies with it. The second process is this test binary again, running `child_process`.
//!
//! This file is its own test binary on purpose: spawning a process copies every open file
//! descriptor into the child until it execs, the lock file's included, so a test in the same
//! binary that drops a store and reopens it at that moment could find the lock still held
//! (see the `JsonFileStore` docs, "Ownership"). The other tests of this crate are the
//! modules of `tests/it`; this binary shares their kit.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[macro_use]
#[path = "it/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::error::Error as _;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::{check_error, tp};
use coordinator_core::{CommitFence, OffsetMap, OffsetStore, StorageError, StorageErrorKind};
use offset_store::JsonFileStore;

fn offsets(entries: &[(&str, u32, i64)]) -> OffsetMap {
    entries.iter().map(|&(t, p, o)| (tp(t, p), o)).collect()
}

/// Every file of `dir` with its bytes.
fn dir_content(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let bytes = std::fs::read(e.path()).unwrap();
            (e.file_name().into_string().unwrap(), bytes)
        })
        .collect()
}

/// The refusal a second opener gets: an I/O error, code STORAGE_ERROR, naming the file and
/// saying it is in use, with the lock's `WouldBlock` as its source.
fn check_in_use(err: &StorageError, path: &Path) {
    check_error(err, StorageErrorKind::Io, path).unwrap();
    assert!(err.message().contains("is in use"), "{err}");
    let io = err
        .source()
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .unwrap_or_else(|| panic!("no io::Error source in {err}"));
    assert_eq!(io.kind(), std::io::ErrorKind::WouldBlock, "{err}");
}

/// The environment variable that turns this test binary into the child of
/// `a_second_process_is_refused_and_a_dead_owner_frees_the_file`: `open:<path>` tries to
/// open the store and reports; `hold:<path>` opens it and waits until killed.
const CHILD: &str = "OFFSET_STORE_LOCK_CHILD";

/// The child half of the cross-process test; it does nothing unless that test runs it.
#[test]
#[ignore = "run by a_second_process_is_refused_and_a_dead_owner_frees_the_file"]
fn child_process() {
    let Ok(task) = std::env::var(CHILD) else {
        return;
    };
    let (mode, path) = task.split_once(':').unwrap();
    match JsonFileStore::open(path) {
        Err(e) => println!("CHILD refused {} {}", e.code(), e),
        Ok(store) => {
            println!("CHILD opened {}", store.snapshot().len());
            if mode == "hold" {
                // Wait for the parent to kill this process.
                let _ = std::io::stdin().read_to_end(&mut Vec::new());
            }
        }
    }
}

/// Runs this test binary as the child, in `mode` on `path`.
fn spawn_child(mode: &str, path: &Path) -> (Child, impl Iterator<Item = String>) {
    spawn("child_process", CHILD, mode, path)
}

/// Runs the ignored test `test` of this binary as a child process, told `mode:path` through
/// the environment variable `var`; its `CHILD <report>` lines come back in order.
fn spawn(test: &str, var: &str, mode: &str, path: &Path) -> (Child, impl Iterator<Item = String>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--ignored", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(var, format!("{mode}:{}", path.display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let reports = stdout
        .lines()
        .map(Result::unwrap)
        // The harness may print `test child_process ... ` on the same line first.
        .filter_map(|line| line.split_once("CHILD ").map(|(_, r)| r.to_owned()));
    (child, reports)
}

/// The child's first report.
fn report(reports: &mut impl Iterator<Item = String>) -> String {
    reports.next().expect("the child reports before it exits")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_is_refused_and_a_dead_owner_frees_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets.json");

    // This process owns the file; another process is refused and changes nothing.
    let owner = JsonFileStore::open(&path).unwrap();
    owner
        .commit("g", &offsets(&[("t", 0, 1)]), CommitFence::none())
        .await
        .unwrap();
    let before = dir_content(dir.path());
    let (mut child, mut reports) = spawn_child("open", &path);
    let refused = report(&mut reports);
    assert!(child.wait().unwrap().success());
    assert!(refused.starts_with("refused STORAGE_ERROR "), "{refused}");
    assert!(refused.contains("is in use"), "{refused}");
    assert!(refused.contains(&path.display().to_string()), "{refused}");
    assert_eq!(dir_content(dir.path()), before);
    owner
        .commit("g", &offsets(&[("t", 1, 2)]), CommitFence::none())
        .await
        .unwrap();
    let committed = owner.snapshot();
    drop(owner);

    // Now another process owns it: this process is refused until that process dies.
    let (mut child, mut reports) = spawn_child("hold", &path);
    assert_eq!(report(&mut reports), "opened 1");
    check_in_use(&JsonFileStore::open(&path).unwrap_err(), &path);
    child.kill().unwrap();
    child.wait().unwrap();
    let reopened = JsonFileStore::open(&path).unwrap();
    assert_eq!(reopened.snapshot(), committed);
}

// ---- The log store's lock across processes (the child is this binary again).

/// `open:<dir>` or `hold:<dir>`: turns this test binary into the child of
/// `a_second_process_is_refused_until_the_owner_dies`.
const LOG_CHILD: &str = "OFFSET_LOG_LOCK_CHILD";

/// The child half of the cross-process test; it does nothing unless that test runs it.
#[test]
#[ignore = "run by a_second_process_is_refused_until_the_owner_dies"]
fn log_lock_child() {
    let Ok(task) = std::env::var(LOG_CHILD) else {
        return;
    };
    let (mode, dir) = task.split_once(':').unwrap();
    match offset_store::LogStore::open(dir) {
        Err(e) => println!("CHILD refused {} {}", e.code(), e),
        Ok(store) => {
            println!("CHILD opened {}", store.stats().offsets);
            if mode == "hold" {
                // Wait for the parent to kill this process.
                let _ = std::io::stdin().read_to_end(&mut Vec::new());
            }
        }
    }
}

fn spawn_log_child(mode: &str, dir: &Path) -> (Child, impl Iterator<Item = String>) {
    spawn("log_lock_child", LOG_CHILD, mode, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_is_refused_until_the_owner_dies() {
    let dir = tempfile::tempdir().unwrap();
    let owner = offset_store::LogStore::open(dir.path()).unwrap();
    let o: OffsetMap = [(tp("t", 0), 1)].into();
    owner.commit("g", &o, CommitFence::none()).await.unwrap();
    let (mut child, mut reports) = spawn_log_child("open", dir.path());
    let refused = reports.next().expect("the child reports");
    assert!(child.wait().unwrap().success());
    assert!(refused.starts_with("refused STORAGE_ERROR "), "{refused}");
    assert!(refused.contains("in use"), "{refused}");
    assert!(
        refused.contains(&dir.path().display().to_string()),
        "{refused}"
    );
    drop(owner);

    let (mut child, mut reports) = spawn_log_child("hold", dir.path());
    assert_eq!(reports.next().expect("the child reports"), "opened 1");
    let err = offset_store::LogStore::open(dir.path()).unwrap_err();
    assert!(err.to_string().contains("in use"), "{err}");
    child.kill().unwrap();
    child.wait().unwrap();
    let reopened = offset_store::LogStore::open(dir.path()).unwrap();
    assert_eq!(reopened.committed("g", &tp("t", 0)).await.unwrap(), Some(1));
}
