#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Regression tests for bugs a review of the engine found (2026-12-07): syncs racing the
//! flush thread, a failed sync racing a roll, DeleteRecords racing a merge of segments, a
//! recreated topic and the checkpoints of the one deleted before it, a failed metadata write.
//! Each was seen failing before its fix.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as chan;
use std::time::Duration;

use coordinator_core::{Bytes, NewRecord};

use super::*;
use crate::compaction::CompactionPolicy;
use crate::fs::sim::{CrashMode, Fault, FsOp, SimFs};
use crate::testing::compaction::{contents, try_put_as, TextRecords};

const DIR: &str = "/data/log";

fn tp() -> TopicPartition {
    TopicPartition::new("c", 0)
}

fn thread_is(name: &str) -> bool {
    std::thread::current().name() == Some(name)
}

/// A hook that parks the first operation `op` for which `which()` holds (after `armed` is
/// set), telling `parked` and waiting for `release`.
struct Park {
    parked: chan::Receiver<()>,
    release: chan::Sender<()>,
}

fn park_first(
    fs: &SimFs,
    op: FsOp,
    which: impl Fn() -> bool + Send + Sync + 'static,
) -> (Park, Arc<AtomicBool>) {
    let (tell, parked) = chan::channel::<()>();
    let (release, wait) = chan::channel::<()>();
    let tell = Mutex::new(tell);
    let wait = Mutex::new(wait);
    let armed = Arc::new(AtomicBool::new(false));
    let done = AtomicBool::new(false);
    let arm = armed.clone();
    fs.set_hook(Some(Arc::new(move |o| {
        if o != op || !arm.load(Ordering::SeqCst) || !which() {
            return;
        }
        if done.swap(true, Ordering::SeqCst) {
            return;
        }
        tell.lock().unwrap().send(()).unwrap();
        let _ = wait.lock().unwrap().recv_timeout(Duration::from_secs(30));
    })));
    (Park { parked, release }, armed)
}

/// `SegmentLog::sync` returns only once what was written is durable, even when the
/// background thread's periodic sync has taken the dirty flag and its `fdatasync` is still
/// running: it waits for that sync (partition.rs `sync_if_dirty`, one at a time). The group
/// store's import relies on it (it then writes `log.imported` and removes the old files).
/// (Found in review: `sync` returned `Ok` at once, and a power cut then lost the write.)
#[test]
fn sync_waits_for_a_periodic_sync_under_way() {
    let fs = SimFs::new();
    let log = SegmentLog::builder(DIR)
        .flush_interval_ms(Some(5))
        .open_with_fs(fs.clone())
        .unwrap();
    log.create_topic_blocking("c", 1).unwrap();
    let (park, armed) = park_first(&fs, FsOp::Fsync, || thread_is("segment-log"));
    armed.store(true, Ordering::SeqCst);
    log.append_blocking(&tp(), 1, 1, b"acknowledged", false)
        .unwrap();
    // The background thread took the dirty flag and is inside its fdatasync.
    park.parked
        .recv_timeout(Duration::from_secs(10))
        .expect("the periodic sync ran");
    let log = Arc::new(log);
    let (done, synced) = chan::channel();
    let syncer = std::thread::spawn({
        let log = log.clone();
        move || {
            let result = log.sync();
            let _ = done.send(());
            result
        }
    });
    // A sync that returns while the periodic one is parked would be a lie: the power goes
    // the moment it returns. (One that waits lets the periodic sync finish first.)
    let after = match synced.recv_timeout(Duration::from_millis(500)) {
        Ok(()) => fs.restart(CrashMode::DropUnsyncedData),
        Err(_) => {
            park.release.send(()).unwrap();
            synced.recv_timeout(Duration::from_secs(10)).unwrap();
            fs.restart(CrashMode::DropUnsyncedData)
        }
    };
    let _ = park.release.send(());
    syncer
        .join()
        .unwrap()
        .expect("sync says the write is durable");
    drop(log);
    let log = SegmentLog::builder(DIR).open_with_fs(after).unwrap();
    assert_eq!(
        log.bounds_blocking(&tp()).unwrap(),
        (0, 1),
        "what sync() reported durable survives the power cut"
    );
}

/// An append whose group sync fails after a roll synced its frame (the roll closes the
/// segment with a sync of its own) is acknowledged: its batch is durable, readable, and not
/// cut back (partition.rs `group_sync`, `frame_fate`). (Found in review: the appender was
/// told its append failed while its batch stayed, so a retry duplicated it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_a_concurrent_roll_made_durable_succeeds_though_its_sync_failed() {
    let fs = SimFs::new();
    let log = Arc::new(SegmentLog::builder(DIR).open_with_fs(fs.clone()).unwrap());
    log.create_topic_blocking("c", 1).unwrap();
    // The appender's group fdatasync is parked; a roll (segment.ms, or another appender's
    // full segment) syncs the segment and closes it; then the appender's sync fails.
    let (park, armed) = park_first(&fs, FsOp::Fsync, || true);
    armed.store(true, Ordering::SeqCst);
    let appender = {
        let log = log.clone();
        tokio::spawn(async move {
            log.append_encoded(
                &tp(),
                vec![NewRecord::new(&b"x"[..]).timestamp(1)],
                Box::new(|_| Bytes::from(&b"batch"[..])),
            )
            .await
        })
    };
    tokio::task::spawn_blocking({
        let park_rx = park.parked;
        move || park_rx.recv_timeout(Duration::from_secs(10)).unwrap()
    })
    .await
    .unwrap();
    // Calls from now: the roll's fdatasync (1st) succeeds, the appender's (2nd) fails.
    fs.fail_nth(FsOp::Fsync, 2, Fault::Eio);
    let rolled = tokio::task::spawn_blocking({
        let log = log.clone();
        move || log.roll_blocking(&tp())
    })
    .await
    .unwrap();
    assert!(rolled.unwrap(), "the roll closed the segment");
    park.release.send(()).unwrap();
    let result = appender.await.unwrap();
    assert_eq!(result.unwrap(), 0, "the roll made the batch durable");
    assert_eq!(log.bounds(&tp()).await.unwrap(), (0, 1));
    let after = fs.restart(CrashMode::DropUnsyncedData);
    let reopened = SegmentLog::builder(DIR).open_with_fs(after).unwrap();
    assert_eq!(reopened.bounds_blocking(&tp()).unwrap(), (0, 1));
}

/// `DeleteRecords` (and retention: mod.rs `retain`) decides how many leading segments to
/// delete (`segments_below` / `expired`) before it takes the state lock, then writes the
/// checkpoint and drops that many segments (`remove_segments`). A compaction pass that
/// merges segments in between (clean.rs `swap`, under the state lock) makes the first
/// segment the merged one, so the deletion drops records at and above the offset asked:
/// here `DeleteRecords(1)` loses offsets 1 and 2, live and never deleted, for good.
#[test]
fn delete_records_racing_a_merge_deletes_only_below_its_offset() {
    let fs = SimFs::new();
    let log = Arc::new(
        SegmentLog::builder(DIR)
            .segment_bytes(1024)
            .retention_ms(-1)
            .open_with_fs(fs.clone())
            .unwrap(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        log.create_topic("c", 1).await.unwrap();
        // Four small segments: offsets 0, 1, 2 closed, 3 in the active one.
        for (i, key) in ["a", "b", "c", "d"].iter().enumerate() {
            try_put_as(&*log, "", &[(key, "v")], 1).await.unwrap();
            if i < 3 {
                assert!(log.roll_blocking(&tp()).unwrap());
            }
        }
    });
    let before = rt.block_on(contents(&*log));
    assert_eq!(before.len(), 4);
    // DeleteRecords(1) decides to delete one segment (offset 0's), and is parked at the
    // checkpoint's write.
    let (park, armed) = park_first(&fs, FsOp::CreateTemp, || thread_is("deleter"));
    armed.store(true, Ordering::SeqCst);
    let deleter = std::thread::Builder::new()
        .name("deleter".into())
        .spawn({
            let log = log.clone();
            move || {
                tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap()
                    .block_on(log.delete_records(&tp(), 1))
            }
        })
        .unwrap();
    park.parked.recv_timeout(Duration::from_secs(10)).unwrap();
    // Meanwhile a pass merges the three closed segments into one.
    let policy = CompactionPolicy {
        min_cleanable_dirty_ratio: 0.0,
        ..CompactionPolicy::at(10)
    };
    let done = log.compact_blocking(&tp(), &policy, &TextRecords).unwrap();
    assert_eq!(done.segments, 3, "merged: {done:?}");
    park.release.send(()).unwrap();
    assert_eq!(deleter.join().unwrap().unwrap(), 1);
    let expected: Vec<_> = before.into_iter().filter(|r| r.0 >= 1).collect();
    assert_eq!(
        rt.block_on(contents(&*log)),
        expected,
        "DeleteRecords(1) keeps offsets 1 and up"
    );
}

/// A deleted topic's entry stays in `log-start-offset-checkpoint` (mod.rs `delete_topic`
/// rewrites the topics file only; the checkpoint is rewritten, from the live partitions, only
/// when some log start moves), and `Partition::open` applies it to a new topic of the same
/// name: at the next restart the new partition's log start jumps to the old one's and the
/// segments below it are deleted. Here the old `t` had `DeleteRecords(2)`; the new `t`'s
/// offsets 0 and 1, acknowledged, are gone after a restart.
#[test]
fn a_recreated_topic_keeps_its_records_across_a_restart() {
    let fs = SimFs::new();
    let open = |fs: &SimFs| {
        SegmentLog::builder(DIR)
            .segment_bytes(1024)
            .open_with_fs(fs.clone())
            .unwrap()
    };
    let t = TopicPartition::new("t", 0);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let append = |log: &SegmentLog<SimFs>| {
        log.append_blocking(&t, 1, 1, b"record", true).unwrap();
        assert!(log.roll_blocking(&t).unwrap());
    };
    {
        let log = open(&fs);
        rt.block_on(async {
            log.create_topic("t", 1).await.unwrap();
            for _ in 0..3 {
                append(&log);
            }
            assert_eq!(log.delete_records(&t, 2).await.unwrap(), 2);
            log.delete_topic("t").await.unwrap();
            log.create_topic("t", 1).await.unwrap();
            for _ in 0..3 {
                append(&log);
            }
            assert_eq!(log.bounds(&t).await.unwrap(), (0, 3));
        });
    }
    let log = open(&fs);
    assert_eq!(
        log.bounds_blocking(&t).unwrap(),
        (0, 3),
        "the new topic's records 0 and 1 were never deleted"
    );
}

/// Likewise a deleted topic's entry stays in `cleaner-offset-checkpoint` (mod.rs
/// `delete_topic` drops it from memory only; the file is rewritten at the next
/// `mark_cleaned`), and at the next open a new topic of the same name, never compacted,
/// gets compaction's leniency below the old offset (partition.rs `open` and
/// `recover_segment`: gaps accepted below `cleaned`): a lost segment file is accepted
/// silently instead of refused as damage.
#[test]
fn a_recreated_topic_is_not_taken_for_a_compacted_one() {
    let fs = SimFs::new();
    let open = |fs: &SimFs| {
        SegmentLog::builder(DIR)
            .segment_bytes(1024)
            .open_with_fs(fs.clone())
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    {
        let log = open(&fs).unwrap();
        rt.block_on(async {
            log.create_topic("c", 1).await.unwrap();
            for key in ["a", "b", "c", "d"] {
                try_put_as(&log, "", &[(key, "v")], 1).await.unwrap();
                assert!(log.roll_blocking(&tp()).unwrap());
            }
            let policy = CompactionPolicy {
                min_cleanable_dirty_ratio: 0.0,
                ..CompactionPolicy::at(10)
            };
            let done = log.compact_blocking(&tp(), &policy, &TextRecords).unwrap();
            assert_eq!(done.cleaned_up_to, 4);
            log.delete_topic("c").await.unwrap();
            log.create_topic("c", 1).await.unwrap();
            for key in ["a", "b", "c", "d"] {
                try_put_as(&log, "", &[(key, "v")], 1).await.unwrap();
                assert!(log.roll_blocking(&tp()).unwrap());
            }
        });
    }
    // The new, never compacted partition loses a closed segment.
    let lost = PathBuf::from(DIR).join("c-0").join(files::segment_name(1));
    fs.remove_file(&lost).unwrap();
    let reopened = open(&fs);
    assert!(
        reopened.is_err(),
        "a gap in a never-compacted partition is damage, but it opened with bounds {:?}",
        reopened.map(|l| l.bounds_blocking(&tp()).unwrap())
    );
}

/// `delete_topic` whose directory sync fails (files.rs `write_atomically`: the new topics
/// file is renamed into place, then `fsync_dir` fails) reports the deletion failed and keeps
/// the topic in memory, so appends to it go on and are acknowledged; but the topics file
/// without it is already in place, and the next open finds no such topic: every record of
/// it, those acknowledged after the failed deletion included, is gone. (`create_topic`,
/// the checkpoints' rewrites and `create_partitions` share the shape: a step reported failed
/// that takes effect at the next restart.)
#[test]
fn a_failed_topic_deletion_changes_nothing() {
    let fs = SimFs::new();
    let t = TopicPartition::new("t", 0);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    {
        let log = SegmentLog::builder(DIR).open_with_fs(fs.clone()).unwrap();
        rt.block_on(async {
            log.create_topic("t", 1).await.unwrap();
            log.append_blocking(&t, 1, 1, b"before", true).unwrap();
            fs.fail_nth(FsOp::FsyncDir, 1, Fault::Eio);
            let failed = log.delete_topic("t").await;
            assert!(failed.is_err(), "the deletion reports its failure");
            // The topic is still there: an append to it is acknowledged.
            log.append_blocking(&t, 1, 1, b"after", true).unwrap();
            assert_eq!(log.bounds(&t).await.unwrap(), (0, 2));
        });
    }
    let log = SegmentLog::builder(DIR).open_with_fs(fs.clone()).unwrap();
    assert_eq!(
        log.bounds_blocking(&t).map_err(|e| e.to_string()),
        Ok((0, 2)),
        "the topic whose deletion failed, with its acknowledged records"
    );
}
