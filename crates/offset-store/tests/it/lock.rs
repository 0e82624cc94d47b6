//! One owner per offsets file, within one process: a second store on the same file is refused
//! at once with an error naming the file, touches nothing, and the first store goes on
//! working; stale temp files from a crash are removed by the next owner. (Across processes:
//! `lock_across_processes.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::collections::BTreeMap;
use std::error::Error as _;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};

use common::{check_error, tp};
use coordinator_core::{CommitFence, OffsetMap, OffsetStore, StorageError, StorageErrorKind};
use offset_store::testing::{Fault, FsOp, SimFs};
use offset_store::JsonFileStore;

const SIM_PATH: &str = "/data/offsets.json";

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

/// Every file of a simulated file system with its bytes.
fn sim_content(fs: &SimFs) -> BTreeMap<PathBuf, Vec<u8>> {
    fs.paths()
        .into_iter()
        .map(|p| {
            let bytes = fs.file(&p).unwrap();
            (p, bytes)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_store_in_this_process_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets.json");
    let first = JsonFileStore::open(&path).unwrap();
    first
        .commit("g", &offsets(&[("t", 0, 1)]), CommitFence::none())
        .await
        .unwrap();
    let before = dir_content(dir.path());

    for _ in 0..2 {
        check_in_use(&JsonFileStore::open(&path).unwrap_err(), &path);
        check_in_use(&JsonFileStore::open_async(&path).await.unwrap_err(), &path);
    }
    assert_eq!(
        dir_content(dir.path()),
        before,
        "the refused openers touched nothing"
    );

    // The first store keeps working, and a file beside it has its own owner.
    first
        .commit("g", &offsets(&[("t", 1, 2)]), CommitFence::none())
        .await
        .unwrap();
    let neighbour = JsonFileStore::open(dir.path().join("other.json")).unwrap();
    drop(neighbour);

    let committed = first.snapshot();
    drop(first);
    let second = JsonFileStore::open(&path).unwrap();
    assert_eq!(
        second.snapshot(),
        committed,
        "once the owner is gone, the next one opens"
    );
}

#[test]
fn a_refused_open_on_the_simulated_fs_does_nothing_but_try_the_lock() {
    let fs = SimFs::new();
    let first = JsonFileStore::open_with_fs(SIM_PATH, fs.clone()).unwrap();
    let before = sim_content(&fs);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    fs.set_hook(Some(Arc::new(move |op| record.lock().unwrap().push(op))));
    let err = JsonFileStore::open_with_fs(SIM_PATH, fs.clone()).unwrap_err();
    fs.set_hook(None);
    check_in_use(&err, Path::new(SIM_PATH));
    assert_eq!(
        *seen.lock().unwrap(),
        [FsOp::Lock],
        "no read, no listing, no removal"
    );
    assert_eq!(sim_content(&fs), before);
    drop(first);
    assert!(!fs.is_locked("/data/offsets.json.lock"));
    JsonFileStore::open_with_fs(SIM_PATH, fs).unwrap();
}

/// The owner is in the middle of a commit, its temp file written but not yet renamed: a
/// refused opener must not take that temp file for a stale one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_opener_leaves_the_owners_temp_file_alone() {
    let fs = SimFs::new();
    let store = Arc::new(JsonFileStore::open_with_fs(SIM_PATH, fs.clone()).unwrap());
    let (reached_tx, reached_rx) = mpsc::channel::<()>();
    let (resume_tx, resume_rx) = mpsc::channel::<()>();
    let (reached_tx, resume_rx) = (Mutex::new(reached_tx), Mutex::new(resume_rx));
    fs.set_hook(Some(Arc::new(move |op| {
        if op == FsOp::Rename {
            reached_tx.lock().unwrap().send(()).unwrap();
            resume_rx.lock().unwrap().recv().unwrap();
        }
    })));
    let commit = tokio::spawn({
        let store = Arc::clone(&store);
        async move {
            store
                .commit("g", &offsets(&[("t", 0, 5)]), CommitFence::none())
                .await
        }
    });
    tokio::task::spawn_blocking(move || reached_rx.recv().unwrap())
        .await
        .unwrap();
    let temps = common::temp_files(&fs, SIM_PATH);
    assert_eq!(temps.len(), 1, "the commit's temp file is written");

    let err = JsonFileStore::open_with_fs(SIM_PATH, fs.clone()).unwrap_err();
    check_in_use(&err, Path::new(SIM_PATH));
    assert_eq!(common::temp_files(&fs, SIM_PATH), temps);

    resume_tx.send(()).unwrap();
    commit.await.unwrap().unwrap();
    assert_eq!(store.committed("g", &tp("t", 0)).await.unwrap(), Some(5));
    assert!(common::temp_files(&fs, SIM_PATH).is_empty());
}

#[test]
fn the_next_owner_removes_stale_temp_files_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets.json");
    let stale = ["offsets.json.tmp", "offsets.json.tmp.4242.00000000deadbeef"];
    let kept = [
        "offsets.json.tmpx",
        "other.json.tmp.1.2",
        "offsets.json.bak",
    ];
    for name in stale.iter().chain(&kept) {
        std::fs::write(dir.path().join(name), b"torn").unwrap();
    }
    let store = JsonFileStore::open(&path).unwrap();
    let names: Vec<String> = dir_content(dir.path()).into_keys().collect();
    let mut expected: Vec<String> = kept.iter().map(|s| s.to_string()).collect();
    expected.push("offsets.json.lock".into());
    expected.sort();
    assert_eq!(names, expected);
    assert!(store.snapshot().is_empty());
}

/// Removing stale temp files is best effort: if it fails, the store opens anyway.
#[test]
fn a_failing_cleanup_does_not_fail_the_open() {
    for (op, fault) in [(FsOp::ListDir, Fault::Eio), (FsOp::RemoveFile, Fault::Eio)] {
        let fs = SimFs::new();
        fs.put_file("/data/offsets.json.tmp.1.1", "torn");
        fs.fail_nth(op, 1, fault);
        let store = JsonFileStore::open_with_fs(SIM_PATH, fs.clone()).unwrap();
        assert_eq!(common::temp_files(&fs, SIM_PATH).len(), 1, "{op:?}");
        drop(store);
        JsonFileStore::open_with_fs(SIM_PATH, fs.clone()).unwrap();
        assert!(common::temp_files(&fs, SIM_PATH).is_empty(), "{op:?}");
    }
}

#[test]
fn a_failing_lock_fails_the_open_naming_the_file_and_changes_nothing() {
    for fault in [Fault::Eio, Fault::Enospc] {
        let fs = SimFs::new();
        fs.put_file(SIM_PATH, r#"{"groups":{},"version":1}"#);
        fs.put_file("/data/offsets.json.tmp.1.1", "torn");
        let before = sim_content(&fs);
        fs.fail_nth(FsOp::Lock, 1, fault);
        let err = JsonFileStore::open_with_fs(SIM_PATH, fs.clone()).unwrap_err();
        check_error(&err, StorageErrorKind::Io, Path::new(SIM_PATH)).unwrap();
        assert!(err.message().contains("cannot lock"), "{err}");
        assert_eq!(sim_content(&fs), before);
    }
}
