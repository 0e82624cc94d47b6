//! The JSON store's rules (docs/rules.md#json-offset-store) on the real file system (and the
//! simulated one where a fault is needed): the exact format, reopening, corrupt files, failed
//! writes, cancellation.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};

use common::{check_error, reference_encoding, tp};
use coordinator_core::{CommitFence, OffsetMap, OffsetStore, StorageErrorKind};
use offset_store::testing::{CrashMode, Fault, FsOp, SimFs};
use offset_store::JsonFileStore;

fn offsets(entries: &[(&str, u32, i64)]) -> OffsetMap {
    entries.iter().map(|&(t, p, o)| (tp(t, p), o)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_is_the_exact_compact_sorted_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets.json");
    let store = JsonFileStore::open(&path).unwrap();
    assert_eq!(store.path(), path);
    store
        .commit(
            "workers",
            &offsets(&[("orders", 1, 7), ("orders", 0, 42)]),
            CommitFence::none(),
        )
        .await
        .unwrap();
    let many = BTreeMap::from([
        (
            "billing".to_string(),
            offsets(&[("payments", 10, 0), ("payments", 2, 5)]),
        ),
        (
            "workers".to_string(),
            offsets(&[("audit", 3, 9), ("orders", 0, 43)]),
        ),
    ]);
    for (group, offsets) in &many {
        store
            .commit(group, offsets, CommitFence::none())
            .await
            .unwrap();
    }
    store
        .commit(
            "q\"\\\n",
            &offsets(&[("é", 0, i64::MAX)]),
            CommitFence::none(),
        )
        .await
        .unwrap();

    let golden = concat!(
        r#"{"groups":{"#,
        r#""billing":[{"offset":5,"partition":2,"topic":"payments"},{"offset":0,"partition":10,"topic":"payments"}],"#,
        r#""q\"\\\n":[{"offset":9223372036854775807,"partition":0,"topic":"é"}],"#,
        r#""workers":[{"offset":9,"partition":3,"topic":"audit"},{"offset":43,"partition":0,"topic":"orders"},{"offset":7,"partition":1,"topic":"orders"}]"#,
        r#"},"version":1}"#
    );
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(String::from_utf8(bytes.clone()).unwrap(), golden);
    assert_eq!(bytes, reference_encoding(&store.snapshot()));
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["offsets.json", "offsets.json.lock"],
        "every temp file was renamed away; the lock file stays"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopening_reads_back_what_was_committed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets.json");
    let store = JsonFileStore::open(&path).unwrap();
    assert!(
        store.snapshot().is_empty(),
        "a missing file is an empty store"
    );
    for i in 0..20 {
        let group = format!("group-{}", i % 3);
        store
            .commit(
                &group,
                &offsets(&[("orders", i % 4, i64::from(i) * 10)]),
                CommitFence::none(),
            )
            .await
            .unwrap();
    }
    let committed = store.snapshot();
    let group_2 = store.list("group-2").await.unwrap();
    drop(store);
    let reopened = JsonFileStore::open_async(&path).await.unwrap();
    assert_eq!(reopened.snapshot(), committed);
    assert_eq!(
        reopened
            .committed("group-1", &tp("orders", 3))
            .await
            .unwrap(),
        Some(190)
    );
    assert_eq!(reopened.list("group-2").await.unwrap(), group_2);
    // The reopened store goes on from where the file was.
    reopened
        .commit(
            "group-0",
            &offsets(&[("orders", 9, 1)]),
            CommitFence::none(),
        )
        .await
        .unwrap();
    let committed = reopened.snapshot();
    drop(reopened);
    let again = JsonFileStore::open(&path).unwrap();
    assert_eq!(again.snapshot(), committed);
    assert_eq!(again.list("group-0").await.unwrap().len(), 5);
}

#[tokio::test]
async fn nothing_is_written_for_an_empty_or_refused_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets.json");
    let store = JsonFileStore::open(&path).unwrap();
    store
        .commit("g", &OffsetMap::new(), CommitFence::none())
        .await
        .unwrap();
    let err = store
        .commit(
            "g",
            &offsets(&[("t", 0, 1), ("t", 1, -1)]),
            CommitFence::none(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StorageErrorKind::InvalidOffset);
    assert!(!path.exists());
}

#[test]
fn each_kind_of_corrupt_file_fails_to_open_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets.json");
    let cases = [
        ("malformed", "{\"groups\":{"),
        ("empty file", ""),
        ("not an object", "[]"),
        ("wrong type of groups", r#"{"groups":[],"version":1}"#),
        (
            "wrong type of offset",
            r#"{"groups":{"g":[{"offset":"1","partition":0,"topic":"t"}]},"version":1}"#,
        ),
        ("missing groups", r#"{"version":1}"#),
        ("missing version", r#"{"groups":{}}"#),
        (
            "missing topic",
            r#"{"groups":{"g":[{"offset":1,"partition":0}]},"version":1}"#,
        ),
        (
            "negative offset",
            r#"{"groups":{"g":[{"offset":-5,"partition":0,"topic":"t"}]},"version":1}"#,
        ),
        (
            "partition out of range",
            r#"{"groups":{"g":[{"offset":5,"partition":4294967296,"topic":"t"}]},"version":1}"#,
        ),
        (
            "duplicate entry",
            r#"{"groups":{"g":[{"offset":1,"partition":0,"topic":"t"},{"offset":1,"partition":0,"topic":"t"}]},"version":1}"#,
        ),
        (
            "duplicate group",
            r#"{"groups":{"g":[{"offset":1,"partition":0,"topic":"t"}],"g":[{"offset":1,"partition":1,"topic":"t"}]},"version":1}"#,
        ),
        ("unknown version", r#"{"groups":{},"version":2}"#),
        ("unknown key", r#"{"groups":{},"version":1,"owner":"x"}"#),
        ("trailing garbage", r#"{"groups":{},"version":1}{}"#),
        (
            "invalid UTF-8",
            "{\"groups\":{\"\u{0}\u{0}\":[]},\"version\":1}",
        ),
    ];
    for (what, text) in cases {
        let mut bytes = text.as_bytes().to_vec();
        if what == "invalid UTF-8" {
            let at = bytes.iter().position(|&b| b == 0).unwrap();
            bytes[at] = 0xc3;
        }
        std::fs::write(&path, &bytes).unwrap();
        let err = JsonFileStore::open(&path).expect_err(what);
        check_error(&err, StorageErrorKind::Corrupt, &path)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }
}

#[test]
fn an_unreadable_file_is_an_io_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets.json");
    std::fs::create_dir(&path).unwrap();
    let err = JsonFileStore::open(&path).unwrap_err();
    check_error(&err, StorageErrorKind::Io, &path).unwrap();

    let err = JsonFileStore::open("/").unwrap_err();
    assert_eq!(err.kind(), StorageErrorKind::Other);
}

/// The owner lock lives beside the file, so the directory must exist when the store opens.
#[tokio::test]
async fn a_missing_directory_fails_the_open_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gone").join("offsets.json");
    let err = JsonFileStore::open(&path).unwrap_err();
    check_error(&err, StorageErrorKind::Io, &path).unwrap();
    assert!(err.message().contains("cannot lock"), "{err}");
    assert!(!path.parent().unwrap().exists(), "nothing was created");
    std::fs::create_dir(path.parent().unwrap()).unwrap();
    let store = JsonFileStore::open(&path).unwrap();
    store
        .commit("g", &offsets(&[("t", 0, 2)]), CommitFence::none())
        .await
        .unwrap();
    let committed = store.snapshot();
    drop(store);
    assert_eq!(JsonFileStore::open(&path).unwrap().snapshot(), committed);
}

#[tokio::test]
async fn a_relative_path_is_made_durable_by_fsyncing_the_current_directory() {
    let fs = SimFs::new();
    let store = JsonFileStore::open_with_fs("offsets.json", fs.clone()).unwrap();
    store
        .commit("g", &offsets(&[("t", 0, 1)]), CommitFence::none())
        .await
        .unwrap();
    let after = fs.restart(CrashMode::DropBoth);
    let reopened = JsonFileStore::open_with_fs("offsets.json", after).unwrap();
    assert_eq!(reopened.snapshot(), store.snapshot());
}

#[tokio::test]
async fn a_failed_directory_fsync_puts_the_previous_file_back() {
    let fs = SimFs::new();
    let path = Path::new("/data/offsets.json");
    let store = JsonFileStore::open_with_fs(path, fs.clone()).unwrap();
    store
        .commit("g", &offsets(&[("t", 0, 1)]), CommitFence::none())
        .await
        .unwrap();
    let before = fs.file(path).unwrap();

    fs.fail_nth(FsOp::FsyncDir, 1, Fault::Eio);
    let err = store
        .commit("g", &offsets(&[("t", 0, 2)]), CommitFence::none())
        .await
        .unwrap_err();
    check_error(&err, StorageErrorKind::Io, path).unwrap();
    assert!(
        err.message().contains("previous content was restored"),
        "{err}"
    );
    assert_eq!(fs.file(path).unwrap(), before);
    assert_eq!(store.committed("g", &tp("t", 0)).await.unwrap(), Some(1));
    for mode in CrashMode::ALL {
        let reopened = JsonFileStore::open_with_fs(path, fs.restart(mode)).unwrap();
        assert_eq!(reopened.snapshot(), store.snapshot(), "{mode:?}");
    }
}

/// The one case the store cannot hide: the directory fsync fails and so does every attempt
/// to put the old file back. The error says so, and the next successful commit repairs it.
#[tokio::test]
async fn when_the_restore_fails_too_the_error_says_so_and_the_next_commit_repairs() {
    let fs = SimFs::new();
    let path = Path::new("/data/offsets.json");
    let store = JsonFileStore::open_with_fs(path, fs.clone()).unwrap();
    store
        .commit("g", &offsets(&[("t", 0, 1)]), CommitFence::none())
        .await
        .unwrap();

    fs.set_failing(FsOp::FsyncDir, Fault::Eio);
    let err = store
        .commit("g", &offsets(&[("t", 0, 2)]), CommitFence::none())
        .await
        .unwrap_err();
    assert!(
        err.message()
            .contains("restoring the previous content also failed"),
        "{err}"
    );
    assert_eq!(store.committed("g", &tp("t", 0)).await.unwrap(), Some(1));

    fs.clear_faults();
    store
        .commit("g", &offsets(&[("t", 1, 5)]), CommitFence::none())
        .await
        .unwrap();
    let reopened = JsonFileStore::open_with_fs(path, fs.restart(CrashMode::DropBoth)).unwrap();
    assert_eq!(reopened.snapshot(), store.snapshot());
    assert_eq!(reopened.committed("g", &tp("t", 0)).await.unwrap(), Some(1));
}

/// A commit whose future is dropped while its fsync is in progress still completes on the
/// store's writer thread, and memory follows the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_commit_future_leaves_file_and_memory_agreeing() {
    for fail_the_fsync in [false, true] {
        let fs = SimFs::new();
        let path = Path::new("/data/offsets.json");
        let store = Arc::new(JsonFileStore::open_with_fs(path, fs.clone()).unwrap());
        store
            .commit("g", &offsets(&[("t", 0, 1)]), CommitFence::none())
            .await
            .unwrap();

        let (reached_tx, reached_rx) = mpsc::channel::<()>();
        let (resume_tx, resume_rx) = mpsc::channel::<()>();
        let (reached_tx, resume_rx) = (Mutex::new(reached_tx), Mutex::new(resume_rx));
        fs.set_hook(Some(Arc::new(move |op| {
            if op == FsOp::Fsync {
                reached_tx.lock().unwrap().send(()).unwrap();
                resume_rx.lock().unwrap().recv().unwrap();
            }
        })));
        if fail_the_fsync {
            fs.fail_nth(FsOp::Fsync, 1, Fault::Eio);
        }
        let task = tokio::spawn({
            let store = Arc::clone(&store);
            async move {
                store
                    .commit("g", &offsets(&[("t", 0, 2)]), CommitFence::none())
                    .await
            }
        });
        tokio::task::spawn_blocking(move || reached_rx.recv().unwrap())
            .await
            .unwrap();
        task.abort();
        assert!(task.await.unwrap_err().is_cancelled());
        fs.set_hook(None);
        resume_tx.send(()).unwrap();

        // This one waits for the abandoned one's file write, then goes in the next.
        store
            .commit("g", &offsets(&[("t", 1, 7)]), CommitFence::none())
            .await
            .unwrap();
        let expected = if fail_the_fsync { 1 } else { 2 };
        assert_eq!(
            store.committed("g", &tp("t", 0)).await.unwrap(),
            Some(expected)
        );
        let reopened = JsonFileStore::open_with_fs(path, fs.restart(CrashMode::DropBoth)).unwrap();
        assert_eq!(
            reopened.snapshot(),
            store.snapshot(),
            "fsync fails: {fail_the_fsync}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_commits_to_many_groups_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets.json");
    let store = Arc::new(JsonFileStore::open(&path).unwrap());
    let tasks: Vec<_> = (0..8)
        .map(|g| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                for i in 0..10 {
                    let o = offsets(&[("t", i, i64::from(g * 100 + i))]);
                    store
                        .commit(&format!("g{g}"), &o, CommitFence::none())
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let snapshot = store.snapshot();
    assert_eq!(snapshot.len(), 8);
    assert!(snapshot.values().all(|o| o.len() == 10));
    drop(store);
    assert_eq!(JsonFileStore::open(&path).unwrap().snapshot(), snapshot);
}

/// Without a tokio runtime (another executor polls the future) commits still work: the
/// store's writer is its own thread and the answer comes through a runtime-free channel.
#[test]
fn commits_work_without_a_tokio_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets.json");
    let store = JsonFileStore::open(&path).unwrap();
    block_on(store.commit("g", &offsets(&[("t", 0, 3)]), CommitFence::none())).unwrap();
    let committed = store.snapshot();
    drop(store);
    assert_eq!(
        block_on(JsonFileStore::open_async(&path))
            .unwrap()
            .snapshot(),
        committed
    );
}

/// A minimal executor that is not tokio.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(out) => return out,
            Poll::Pending => std::thread::park(),
        }
    }
}
