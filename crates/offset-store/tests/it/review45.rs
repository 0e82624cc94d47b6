//! Review 45: failing tests for bugs found in the log store (each `#[ignore]`d with the bug
//! in one line; run one with `--ignored`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use coordinator_core::{CommitFence, OffsetMap, OffsetStore, TopicPartition};
use offset_store::testing::{CrashMode, Fault, FsOp, SimFs};
use offset_store::LogStore;

const DIR: &str = "/data";

fn tp(p: u32) -> TopicPartition {
    TopicPartition::new("t", p)
}

fn offsets(entries: &[(u32, i64)]) -> OffsetMap {
    entries.iter().map(|&(p, o)| (tp(p), o)).collect()
}

fn sim_store(fs: &SimFs) -> LogStore<SimFs> {
    LogStore::builder()
        .fs(fs.clone())
        .auto_compaction(false)
        .open(DIR)
        .unwrap()
}

/// A batch whose `fdatasync` fails and whose cut back (`truncate`) fails too is reported
/// failed to its committers and kept out of memory, but its whole frame stays in the segment
/// file (partition.rs `append_blocking` → `cut_back_unsynced`, the cut only retried before
/// the next append). The store's docs (log/mod.rs, *Group commit*) say "a reopen cuts the
/// tail off as torn": it does not, the frame is whole and its CRC matches, so after a
/// process crash (or any restart before the next append) the commit that failed is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "bug: a batch reported failed (sync and cut failed) is replayed after a restart"]
async fn a_batch_whose_sync_and_cut_fail_does_not_come_back_at_reopen() {
    let fs = SimFs::new();
    let store = sim_store(&fs);
    store
        .commit("g", &offsets(&[(0, 1)]), CommitFence::none())
        .await
        .unwrap();
    fs.fail_nth(FsOp::Fsync, 1, Fault::Eio);
    fs.fail_nth(FsOp::Truncate, 1, Fault::Eio);
    let err = store
        .commit("g", &offsets(&[(0, 2)]), CommitFence::none())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("refuses appends"), "{err}");
    assert_eq!(store.committed("g", &tp(0)).await.unwrap(), Some(1));
    // The process dies before a next write retries the cut (the OS keeps the file's bytes).
    let after = sim_store(&fs.restart(CrashMode::DropUnsyncedNames));
    assert_eq!(
        after.committed("g", &tp(0)).await.unwrap(),
        Some(1),
        "the commit reported failed is back after the restart"
    );
}
