#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::path::Path;

use coordinator_core::{Bytes, ManualClock};

use super::*;

fn tp(p: u32) -> TopicPartition {
    TopicPartition::new("t", p)
}

/// A log in `dir` on the test's clock, with 1 KiB segments.
fn builder(dir: &Path, clock: &ManualClock) -> SegmentLogBuilder {
    SegmentLog::builder(dir)
        .clock(Arc::new(clock.clone()))
        .segment_bytes(1024)
}

fn open(dir: &Path, clock: &ManualClock) -> Result<SegmentLog, LogError> {
    builder(dir, clock).open()
}

/// Appends a batch of `n` records at timestamp `ts` whose data is `len` copies of `fill`.
async fn put(
    log: &SegmentLog,
    tp: &TopicPartition,
    n: usize,
    ts: i64,
    fill: u8,
    len: usize,
) -> i64 {
    let records = (0..n)
        .map(|_| NewRecord::new(&b"v"[..]).timestamp(ts))
        .collect();
    log.append_encoded(tp, records, Box::new(move |_| Bytes::from(vec![fill; len])))
        .await
        .unwrap()
}

/// A log in `dir` with topic `t` of one partition holding twelve one-record batches of 200
/// bytes (four to a segment), closed again.
async fn twelve_batches(dir: &Path, clock: &ManualClock) {
    let log = open(dir, clock).unwrap();
    log.create_topic("t", 1).await.unwrap();
    for i in 0..12u8 {
        put(&log, &tp(0), 1, 1, i, 200).await;
    }
}

fn segment_file(dir: &Path, tp: &TopicPartition, base: i64) -> PathBuf {
    dir.join(files::partition_dir(tp))
        .join(files::segment_name(base))
}

fn segment_files(dir: &Path, tp: &TopicPartition) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir.join(files::partition_dir(tp)))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_reopened_log_keeps_topics_ids_records_and_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let (id, written) = {
        let log = open(dir.path(), &clock).unwrap();
        log.create_topic("t", 2).await.unwrap();
        log.create_topic("other", 1).await.unwrap();
        for i in 0..30u8 {
            put(&log, &tp(0), 2, i64::from(i), i, 100).await;
        }
        put(&log, &tp(1), 1, 7, 9, 3).await;
        let id = log.topic_id("t").unwrap();
        assert_ne!(Some(id), log.topic_id("other"), "ids are drawn per topic");
        assert_eq!(log.topic_id("missing"), None);
        let written = log.read_batches(&tp(0), 0, usize::MAX).await.unwrap();
        (id, written)
    };
    assert!(
        segment_files(dir.path(), &tp(0)).len() > 2,
        "the appends rolled segments"
    );
    let log = open(dir.path(), &clock).unwrap();
    assert_eq!(
        log.topics().await.unwrap(),
        [("other".to_string(), 1), ("t".to_string(), 2)]
    );
    assert_eq!(log.topic_id("t"), Some(id), "the id survives");
    assert_eq!(log.bounds(&tp(0)).await.unwrap(), (0, 60));
    assert_eq!(log.bounds(&tp(1)).await.unwrap(), (0, 1));
    let read = log.read_batches(&tp(0), 0, usize::MAX).await.unwrap();
    assert_eq!(read, written, "the same batches, byte for byte");
    assert_eq!(
        log.offset_for_timestamp(&tp(0), 12).await.unwrap(),
        Some((24, 12))
    );
    assert_eq!(put(&log, &tp(0), 1, 99, 0, 1).await, 60, "offsets continue");
}

#[tokio::test]
async fn a_torn_tail_at_every_byte_of_the_last_batch_is_truncated_to_the_previous_batch() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let (before_last, full) = {
        let log = open(dir.path(), &clock).unwrap();
        log.create_topic("t", 1).await.unwrap();
        put(&log, &tp(0), 2, 1, 1, 50).await;
        put(&log, &tp(0), 1, 2, 2, 50).await;
        let path = segment_file(dir.path(), &tp(0), 0);
        let before_last = fs::metadata(&path).unwrap().len();
        put(&log, &tp(0), 3, 3, 3, 50).await;
        (before_last as usize, fs::read(&path).unwrap())
    };
    let path = segment_file(dir.path(), &tp(0), 0);
    for cut in before_last..full.len() {
        fs::write(&path, &full[..cut]).unwrap();
        let log = open(dir.path(), &clock).unwrap();
        assert_eq!(
            log.bounds(&tp(0)).await.unwrap(),
            (0, 3),
            "cut at byte {cut}"
        );
        assert_eq!(
            fs::metadata(&path).unwrap().len() as usize,
            before_last,
            "truncated"
        );
        let read = log.read_batches(&tp(0), 0, usize::MAX).await.unwrap();
        assert_eq!(read.batches.len(), 2);
        assert_eq!(read.batches[1].encoded().unwrap()[..], [2; 50]);
    }
    // The log goes on from the truncation, and the new batch survives a restart.
    {
        let log = open(dir.path(), &clock).unwrap();
        assert_eq!(put(&log, &tp(0), 1, 4, 4, 5).await, 3);
    }
    let log = open(dir.path(), &clock).unwrap();
    assert_eq!(log.bounds(&tp(0)).await.unwrap(), (0, 4));
}

#[tokio::test]
async fn corruption_before_the_tail_is_refused_naming_file_and_byte() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    twelve_batches(dir.path(), &clock).await;
    let first = segment_file(dir.path(), &tp(0), 0);
    let pristine = fs::read(&first).unwrap();
    assert!(segment_files(dir.path(), &tp(0)).len() > 1);
    // Four equal frames of 200 bytes fit in 1 KiB.
    let frame_len = pristine.len() / 4;
    // A flipped byte in the first frame's data (data follows it), and in the last frame of a
    // segment that is not the last: both refused.
    for at in [100, pristine.len() - 1] {
        let mut bad = pristine.clone();
        bad[at] ^= 0xff;
        fs::write(&first, &bad).unwrap();
        let err = open(dir.path(), &clock).unwrap_err();
        assert_eq!(err.code(), "STORAGE_ERROR");
        let text = err.to_string();
        let byte = if at == 100 { 0 } else { 3 * frame_len };
        assert!(text.contains("00000000000000000000.log"), "{text}");
        assert!(text.contains(&format!("byte {byte}")), "{text}");
        assert!(text.contains("CRC"), "{text}");
    }
    // A segment cut short that is not the last: refused too.
    fs::write(&first, &pristine[..pristine.len() - 3]).unwrap();
    let text = open(dir.path(), &clock).unwrap_err().to_string();
    assert!(text.contains("is corrupt"), "{text}");
    // The pristine file opens.
    fs::write(&first, &pristine).unwrap();
    let log = open(dir.path(), &clock).unwrap();
    assert_eq!(log.bounds(&tp(0)).await.unwrap(), (0, 12));
}

#[tokio::test]
async fn a_missing_segment_is_a_gap_and_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    twelve_batches(dir.path(), &clock).await;
    let bases = segment_files(dir.path(), &tp(0));
    assert!(bases.len() >= 3);
    fs::remove_file(dir.path().join("t-0").join(&bases[1])).unwrap();
    let text = open(dir.path(), &clock).unwrap_err().to_string();
    assert!(text.contains("previous segment ends"), "{text}");
}

#[tokio::test]
async fn retention_deletes_whole_closed_segments_by_time_and_keeps_the_start_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    clock.advance(1_000_000);
    let open_with = |retention_ms: i64, retention_bytes: i64| {
        builder(dir.path(), &clock)
            .retention_ms(retention_ms)
            .retention_bytes(retention_bytes)
            .open()
            .unwrap()
    };
    {
        let log = open_with(-1, -1);
        log.create_topic("t", 1).await.unwrap();
        // Four 200-byte batches a segment: segments [0..4) at t=1000, [4..8) at t=2000, ...
        for i in 0..12 {
            put(&log, &tp(0), 1, 1000 * (1 + i / 4), 0, 200).await;
        }
        assert_eq!(segment_files(dir.path(), &tp(0)).len(), 3);
        assert_eq!(log.apply_retention().unwrap(), 0, "unlimited: nothing goes");
    }
    let log = open_with(500, -1);
    // now = 1_000_000: every closed segment is older than 500 ms, the active one stays.
    assert_eq!(log.apply_retention().unwrap(), 2);
    assert_eq!(log.bounds(&tp(0)).await.unwrap(), (8, 12));
    assert_eq!(
        log.read_batches(&tp(0), 7, 10).await.unwrap_err().code(),
        "OFFSET_OUT_OF_RANGE"
    );
    assert_eq!(segment_files(dir.path(), &tp(0)), [files::segment_name(8)]);
    assert_eq!(
        log.apply_retention().unwrap(),
        0,
        "the active segment is never deleted"
    );
    drop(log);
    let log = open_with(-1, -1);
    assert_eq!(
        log.bounds(&tp(0)).await.unwrap(),
        (8, 12),
        "the start survives"
    );
    assert_eq!(
        log.offset_for_timestamp(&tp(0), 0).await.unwrap(),
        Some((8, 3000))
    );
}

#[tokio::test]
async fn retention_by_time_keeps_recent_segments_and_runs_at_roll() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let log = builder(dir.path(), &clock)
        .retention_ms(10_000)
        .open()
        .unwrap();
    log.create_topic("t", 1).await.unwrap();
    clock.advance(100_000);
    for i in 0..8 {
        // [0..4) at t=1000 (old), [4..8) at t=100_000 (recent).
        let ts = if i < 4 { 1000 } else { 100_000 };
        put(&log, &tp(0), 1, ts, 0, 200).await;
    }
    // The second roll (at offset 8) deleted the old segment: retention runs at roll.
    put(&log, &tp(0), 1, 100_000, 0, 200).await;
    assert_eq!(log.bounds(&tp(0)).await.unwrap(), (4, 9));
    clock.advance(5_000);
    assert_eq!(log.apply_retention().unwrap(), 0, "5 s old: kept");
    clock.advance(6_000);
    assert_eq!(log.apply_retention().unwrap(), 1, "11 s old: deleted");
    assert_eq!(log.bounds(&tp(0)).await.unwrap(), (8, 9));
}

#[tokio::test]
async fn retention_by_size_keeps_at_least_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let log = builder(dir.path(), &clock)
        .retention_ms(-1)
        .retention_bytes(2000)
        .open()
        .unwrap();
    log.create_topic("t", 1).await.unwrap();
    for _ in 0..4 {
        // Each batch's frame is 4 + 25 + 8 + 203 = 240 bytes: four a segment (960 bytes).
        put(&log, &tp(0), 1, 1, 0, 203).await;
    }
    let _ = log.apply_retention().unwrap();
    for _ in 0..12 {
        put(&log, &tp(0), 1, 1, 0, 203).await;
    }
    // 16 batches: segments of 960 bytes at 0, 4, 8 and 12 (the active one). Total 3840:
    // without the first two 1920 < 2000, so only the first goes.
    assert_eq!(log.bounds(&tp(0)).await.unwrap(), (4, 16));
    assert_eq!(log.apply_retention().unwrap(), 0);
}

#[tokio::test]
async fn one_owner_per_directory() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let first = open(dir.path(), &clock).unwrap();
    let text = open(dir.path(), &clock).unwrap_err().to_string();
    assert!(text.contains("in use by another log"), "{text}");
    // Removing the lock file does not let a second owner in.
    fs::remove_file(dir.path().join(files::LOCK)).unwrap();
    drop(first);
    let _again = open(dir.path(), &clock).unwrap();
}

#[tokio::test]
async fn the_flush_interval_mode_acknowledges_written_appends_and_syncs_them() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    {
        let log = builder(dir.path(), &clock)
            .flush_interval_ms(Some(10))
            .open()
            .unwrap();
        log.create_topic("t", 1).await.unwrap();
        assert_eq!(put(&log, &tp(0), 2, 1, 7, 10).await, 0);
        log.sync().unwrap();
        assert_eq!(put(&log, &tp(0), 1, 1, 8, 10).await, 2);
    }
    let log = open(dir.path(), &clock).unwrap();
    assert_eq!(
        log.bounds(&tp(0)).await.unwrap(),
        (0, 3),
        "written and synced at drop"
    );
}

#[tokio::test]
async fn bad_settings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for builder in [
        SegmentLog::builder(dir.path()).segment_bytes(10),
        SegmentLog::builder(dir.path()).retention_ms(-2),
        SegmentLog::builder(dir.path()).flush_interval_ms(Some(0)),
    ] {
        assert_eq!(builder.open().unwrap_err().code(), "INVALID_ARGUMENT");
    }
}

#[tokio::test]
async fn a_damaged_topics_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    {
        let log = open(dir.path(), &clock).unwrap();
        log.create_topic("t", 1).await.unwrap();
    }
    fs::write(dir.path().join(files::TOPICS), "garbage\n").unwrap();
    let text = open(dir.path(), &clock).unwrap_err().to_string();
    assert!(
        text.contains("topics") && text.contains("damaged"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_to_one_partition_get_distinct_consecutive_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let log = Arc::new(open(dir.path(), &clock).unwrap());
    log.create_topic("t", 1).await.unwrap();
    let tasks: Vec<_> = (0..8u8)
        .map(|i| {
            let log = log.clone();
            tokio::spawn(async move {
                let mut bases = Vec::new();
                for _ in 0..5 {
                    bases.push(put(&log, &tp(0), 2, 1, i, 30).await);
                }
                bases
            })
        })
        .collect();
    let mut bases = Vec::new();
    for t in tasks {
        bases.extend(t.await.unwrap());
    }
    bases.sort_unstable();
    assert_eq!(bases, (0..40).map(|i| 2 * i).collect::<Vec<i64>>());
    drop(log);
    let log = open(dir.path(), &clock).unwrap();
    assert_eq!(log.bounds(&tp(0)).await.unwrap(), (0, 80));
}

#[tokio::test]
async fn a_failed_append_changes_nothing_visible_and_leaves_nothing_on_disk() {
    for interval in [None, Some(60_000)] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        let log = builder(dir.path(), &clock)
            .flush_interval_ms(interval)
            .open()
            .unwrap();
        log.create_topic("t", 1).await.unwrap();
        put(&log, &tp(0), 2, 1, 1, 10).await;
        let path = segment_file(dir.path(), &tp(0), 0);
        let size = fs::metadata(&path).unwrap().len();
        let appends = log.appends();
        log.inner
            .partition(&tp(0))
            .unwrap()
            .fail_next_sync
            .store(true, std::sync::atomic::Ordering::Release);
        let err = log
            .append_encoded(
                &tp(0),
                vec![NewRecord::from("x")],
                Box::new(|_| Bytes::from(vec![9; 100])),
            )
            .await
            .unwrap_err();
        assert_eq!(err.code(), "STORAGE_ERROR", "{interval:?}");
        let text = err.to_string();
        assert!(
            text.contains(if interval.is_none() {
                "fdatasync"
            } else {
                "append to"
            }) && text.contains(".log"),
            "{text}"
        );
        assert!(!appends.has_changed().unwrap(), "nobody is woken");
        assert_eq!(log.bounds(&tp(0)).await.unwrap(), (0, 2));
        assert_eq!(fs::metadata(&path).unwrap().len(), size, "cut back");
        assert_eq!(
            put(&log, &tp(0), 1, 1, 2, 10).await,
            2,
            "the offset is reused"
        );
        drop(log);
        let log = open(dir.path(), &clock).unwrap();
        let read = log.read_batches(&tp(0), 0, usize::MAX).await.unwrap();
        let data: Vec<u8> = read
            .batches
            .iter()
            .map(|b| b.encoded().unwrap()[0])
            .collect();
        assert_eq!(data, [1, 2], "the failed batch is nowhere");
    }
}

/// Starts `n` appends of one record each to `t-0` (the test holds the partition's sync lock,
/// so they form one group) and waits, bounded, until all are written.
async fn start_a_group(
    log: &Arc<SegmentLog>,
    n: u8,
) -> Vec<tokio::task::JoinHandle<Result<i64, LogError>>> {
    start_a_group_after(log, n, 0).await
}

/// As [`start_a_group`], on a partition already holding `before` records.
async fn start_a_group_after(
    log: &Arc<SegmentLog>,
    n: u8,
    before: i64,
) -> Vec<tokio::task::JoinHandle<Result<i64, LogError>>> {
    let tasks = (0..n)
        .map(|i| {
            let log = log.clone();
            tokio::spawn(async move {
                log.append_encoded(
                    &tp(0),
                    vec![NewRecord::from("v")],
                    Box::new(move |_| Bytes::from(vec![i; 10])),
                )
                .await
            })
        })
        .collect();
    let partition = log.inner.partition(&tp(0)).unwrap();
    let written = async {
        while partition.read().written_end < before + i64::from(n) {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), written)
        .await
        .expect("every append written within the bound");
    tasks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_written_during_a_sync_are_synced_together_and_hidden_until_then() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let log = Arc::new(open(dir.path(), &clock).unwrap());
    log.create_topic("t", 1).await.unwrap();
    let partition = log.inner.partition(&tp(0)).unwrap();
    let held = partition.syncer.lock().await;
    let tasks = start_a_group(&log, 8).await;
    assert_eq!(
        log.bounds(&tp(0)).await.unwrap(),
        (0, 0),
        "written, not yet durable: hidden"
    );
    assert!(log
        .read_batches(&tp(0), 0, usize::MAX)
        .await
        .unwrap()
        .batches
        .is_empty());
    assert_eq!(log.offset_for_timestamp(&tp(0), 0).await.unwrap(), None);
    drop(held);
    let mut bases = Vec::new();
    for t in tasks {
        bases.push(t.await.unwrap().unwrap());
    }
    bases.sort_unstable();
    assert_eq!(bases, (0..8).collect::<Vec<i64>>());
    assert_eq!(
        partition.syncs.load(std::sync::atomic::Ordering::Acquire),
        1,
        "one fdatasync for the group of eight"
    );
    assert_eq!(log.bounds(&tp(0)).await.unwrap(), (0, 8));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_group_sync_fails_every_append_in_it_and_cuts_them_all_back() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let log = Arc::new(open(dir.path(), &clock).unwrap());
    log.create_topic("t", 1).await.unwrap();
    put(&log, &tp(0), 1, 1, 0xaa, 10).await;
    let path = segment_file(dir.path(), &tp(0), 0);
    let size = fs::metadata(&path).unwrap().len();
    let partition = log.inner.partition(&tp(0)).unwrap();
    let held = partition.syncer.lock().await;
    let tasks = start_a_group_after(&log, 6, 1).await;
    partition
        .fail_next_sync
        .store(true, std::sync::atomic::Ordering::Release);
    drop(held);
    for t in tasks {
        let err = t.await.unwrap().unwrap_err();
        assert_eq!(err.code(), "STORAGE_ERROR");
    }
    assert_eq!(log.bounds(&tp(0)).await.unwrap(), (0, 1));
    assert_eq!(fs::metadata(&path).unwrap().len(), size, "all six cut back");
    assert_eq!(
        put(&log, &tp(0), 1, 1, 0xbb, 10).await,
        1,
        "the next append goes on"
    );
    drop(partition);
    drop(Arc::try_unwrap(log).unwrap());
    let log = open(dir.path(), &clock).unwrap();
    let read = log.read_batches(&tp(0), 0, usize::MAX).await.unwrap();
    let data: Vec<u8> = read
        .batches
        .iter()
        .map(|b| b.encoded().unwrap()[0])
        .collect();
    assert_eq!(data, [0xaa, 0xbb]);
}

/// Waits (bounded) until `done` holds, checking between yields of a few milliseconds.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let wait = async {
        while !done() {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), wait)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within the bound"));
}

#[tokio::test]
async fn the_background_thread_syncs_written_appends_and_applies_retention() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let log = builder(dir.path(), &clock)
        .flush_interval_ms(Some(5))
        .retention_ms(1000)
        .retention_check_interval_ms(5)
        .open()
        .unwrap();
    log.create_topic("t", 1).await.unwrap();
    for _ in 0..8 {
        put(&log, &tp(0), 1, 0, 0, 200).await;
    }
    let partition = log.inner.partition(&tp(0)).unwrap();
    eventually("synced", || {
        !partition.dirty.load(std::sync::atomic::Ordering::Acquire)
    })
    .await;
    assert_eq!(
        log.bounds(&tp(0)).await.unwrap(),
        (0, 8),
        "records at t=0, now 0: kept"
    );
    clock.advance(5000);
    eventually("retention applied", || partition.bounds().0 == 4).await;
    assert_eq!(segment_files(dir.path(), &tp(0)), [files::segment_name(4)]);
}

#[tokio::test]
async fn a_leftover_of_a_crashed_creation_is_replaced_and_a_missing_partition_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let leftover = dir.path().join("t-0");
    fs::create_dir_all(&leftover).unwrap();
    fs::write(leftover.join(files::segment_name(0)), b"junk").unwrap();
    {
        let log = open(dir.path(), &clock).unwrap();
        assert!(
            log.topics().await.unwrap().is_empty(),
            "not in the topics file: no topic"
        );
        log.create_topic("t", 2).await.unwrap();
        assert_eq!(put(&log, &tp(0), 1, 1, 1, 1).await, 0);
    }
    let log = open(dir.path(), &clock).unwrap();
    assert_eq!(log.bounds(&tp(0)).await.unwrap(), (0, 1));
    drop(log);
    fs::remove_dir_all(dir.path().join("t-1")).unwrap();
    let text = open(dir.path(), &clock).unwrap_err().to_string();
    assert!(text.contains("t-1") && text.contains("missing"), "{text}");
}

/// DeleteTopics and CreatePartitions on disk: a deleted topic is gone after a reopen (its
/// directories too) and its name free; grown partitions survive a reopen, records kept.
#[tokio::test]
async fn deleted_topics_and_added_partitions_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    {
        let log = open(dir.path(), &clock).unwrap();
        log.create_topic("t", 2).await.unwrap();
        log.create_topic("gone", 1).await.unwrap();
        put(&log, &tp(0), 2, 10, b'a', 8).await;
        let mut appends = log.appends();
        appends.borrow_and_update();
        log.delete_topic("gone").await.unwrap();
        assert!(appends.has_changed().unwrap(), "readers are woken");
        assert_eq!(
            log.delete_topic("gone").await.unwrap_err().kafka_code(),
            Some(3)
        );
        log.create_partitions("t", 4).await.unwrap();
        for n in [4, 1] {
            assert_eq!(
                log.create_partitions("t", n).await.unwrap_err().code(),
                "INVALID_PARTITIONS"
            );
        }
        put(&log, &tp(3), 1, 11, b'b', 8).await;
    }
    assert!(
        !dir.path().join("gone-0").exists(),
        "the deleted topic's directory is removed"
    );
    let log = open(dir.path(), &clock).unwrap();
    assert_eq!(log.topics().await.unwrap(), [("t".to_string(), 4)]);
    assert_eq!(log.bounds(&tp(0)).await.unwrap(), (0, 2), "records kept");
    assert_eq!(log.bounds(&tp(3)).await.unwrap(), (0, 1));
    log.create_topic("gone", 3).await.unwrap();
    assert_eq!(
        log.bounds(&TopicPartition::new("gone", 0)).await.unwrap(),
        (0, 0),
        "a new topic of the name starts empty"
    );
}

#[tokio::test]
async fn deleted_records_stay_deleted_across_a_restart_and_their_segments_go() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let segments = |dir: &Path| {
        fs::read_dir(dir.join("t-0"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "log"))
            })
            .count()
    };
    {
        let log = open(dir.path(), &clock).unwrap();
        log.create_topic("t", 1).await.unwrap();
        // 240-byte frames: four a segment, so segments start at 0, 4, 8 and 12 (active).
        for _ in 0..14 {
            put(&log, &tp(0), 1, 1, 0, 203).await;
        }
        assert_eq!(segments(dir.path()), 4);
        // Offset 9 is inside the third segment: the first two go, the third stays.
        assert_eq!(log.delete_records(&tp(0), 9).await.unwrap(), 9);
        assert_eq!(segments(dir.path()), 2);
        assert_eq!(log.bounds(&tp(0)).await.unwrap(), (9, 14));
    }
    let log = open(dir.path(), &clock).unwrap();
    assert_eq!(
        log.bounds(&tp(0)).await.unwrap(),
        (9, 14),
        "from the checkpoint"
    );
    assert!(log.read_batches(&tp(0), 8, 1 << 20).await.is_err());
    let read = log.read_batches(&tp(0), 9, 1 << 20).await.unwrap();
    assert_eq!(read.batches[0].base_offset(), 9);
}

#[tokio::test]
async fn retention_asked_through_the_port_uses_the_given_limits() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let log = builder(dir.path(), &clock)
        .retention_ms(-1)
        .retention_bytes(-1)
        .open()
        .unwrap();
    log.create_topic("t", 1).await.unwrap();
    for _ in 0..14 {
        put(&log, &tp(0), 1, 1, 0, 203).await;
    }
    // The log's own policy keeps everything.
    assert_eq!(log.apply_retention().unwrap(), 0);
    // Segments at 0, 4, 8 (960 bytes each) and 12 (480): 3360 bytes; without the first,
    // 2400 >= 2000, without the second too 1440 < 2000.
    assert_eq!(
        PartitionLog::apply_retention(&log, &tp(0), -1, 2000)
            .await
            .unwrap(),
        4
    );
    clock.advance(10_000);
    // Every closed segment is older than 1 s; the active one stays.
    assert_eq!(
        PartitionLog::apply_retention(&log, &tp(0), 1000, -1)
            .await
            .unwrap(),
        12
    );
    let missing = TopicPartition::new("nope", 0);
    assert!(PartitionLog::apply_retention(&log, &missing, 1, 1)
        .await
        .is_err());
}

/// An observer for [`SegmentLogBuilder::on_sync`] that counts its calls.
fn sync_counter() -> (Arc<std::sync::atomic::AtomicU64>, SyncObserver) {
    let calls = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = calls.clone();
    let observer: SyncObserver = Arc::new(move |_took: Duration| {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    (calls, observer)
}

#[tokio::test]
async fn the_sync_observer_is_told_every_group_sync_and_every_roll_but_no_failed_sync() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let (calls, observer) = sync_counter();
    let log = builder(dir.path(), &clock)
        .on_sync(observer)
        .open()
        .unwrap();
    log.create_topic("t", 1).await.unwrap();
    let told = || calls.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(told(), 0, "creating a topic syncs directories only");
    // One at a time: each append's sync is its own group's.
    for i in 0..12u8 {
        put(&log, &tp(0), 1, 1, i, 200).await;
    }
    let partition = log.inner.partition(&tp(0)).unwrap();
    let group_syncs = partition.syncs.load(std::sync::atomic::Ordering::Acquire);
    assert_eq!(group_syncs, 12, "a sync per append");
    let rolls = segment_files(dir.path(), &tp(0)).len() as u64 - 1;
    assert_eq!(rolls, 2, "four batches to a 1 KiB segment");
    assert_eq!(
        told(),
        group_syncs + rolls,
        "every group sync and roll told"
    );
    partition
        .fail_next_sync
        .store(true, std::sync::atomic::Ordering::Release);
    let failed = log
        .append_encoded(
            &tp(0),
            vec![NewRecord::from("x")],
            Box::new(|_| Bytes::from(&b"x"[..])),
        )
        .await;
    assert!(failed.is_err());
    assert_eq!(told(), 14, "a failed sync is not told");
    put(&log, &tp(0), 1, 1, 0, 10).await;
    assert_eq!(told(), 15);
}

#[tokio::test]
async fn under_a_flush_interval_the_observer_is_told_the_periodic_syncs_only() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let (calls, observer) = sync_counter();
    let told = || calls.load(std::sync::atomic::Ordering::Relaxed);
    {
        // An hour: the background thread does not sync during the test.
        let log = builder(dir.path(), &clock)
            .flush_interval_ms(Some(3_600_000))
            .on_sync(observer)
            .open()
            .unwrap();
        log.create_topic("t", 2).await.unwrap();
        for i in 0..5u8 {
            put(&log, &tp(0), 1, 1, i, 10).await;
        }
        assert_eq!(told(), 0, "acknowledged without a sync");
        log.sync().unwrap();
        assert_eq!(
            told(),
            1,
            "one sync for the written partition, none for the other"
        );
        log.sync().unwrap();
        assert_eq!(told(), 1, "nothing written since: no sync");
        put(&log, &tp(1), 1, 1, 9, 10).await;
    }
    assert_eq!(told(), 2, "the last sync, at drop");
}

/// The blocking appends of a partition's own writer thread (the group store's): a durable
/// one is synced before it returns, an undurable one is readable at once and durable only
/// after `sync`; a power cut keeps exactly that.
#[test]
fn a_blocking_append_is_durable_when_asked_and_readable_at_once_either_way() {
    use crate::fs::sim::{CrashMode, SimFs};
    let t = tp(0);
    for mode in CrashMode::ALL {
        let fs = SimFs::new();
        let log = SegmentLog::builder("/d").open_with_fs(fs.clone()).unwrap();
        log.create_topic_blocking("t", 1).unwrap();
        assert_eq!(log.append_blocking(&t, 2, 7, b"ab", true).unwrap(), 0);
        assert_eq!(log.append_blocking(&t, 1, 8, b"c", false).unwrap(), 2);
        assert_eq!(log.bounds_blocking(&t).unwrap(), (0, 3), "{mode:?}");
        let read = log.read_batches_blocking(&t, 0, usize::MAX).unwrap();
        let data: Vec<&[u8]> = read
            .batches
            .iter()
            .map(|b| &b.encoded().unwrap()[..])
            .collect();
        assert_eq!(data, [&b"ab"[..], &b"c"[..]], "{mode:?}");

        // The power is cut: the undurable batch may go (never half of it), the durable one
        // stays.
        let after = fs.restart(mode);
        drop(log);
        let log = SegmentLog::builder("/d")
            .open_with_fs(after.clone())
            .unwrap();
        let (start, end) = log.bounds_blocking(&t).unwrap();
        assert_eq!(start, 0, "{mode:?}");
        assert!(end == 2 || end == 3, "{mode:?}: end {end}");
        assert_eq!(log.append_blocking(&t, 1, 9, b"d", false).unwrap(), end);
        log.sync().unwrap();
        let again = after.restart(mode);
        drop(log);
        let log = SegmentLog::builder("/d").open_with_fs(again).unwrap();
        assert_eq!(log.bounds_blocking(&t).unwrap(), (0, end + 1), "{mode:?}");
    }
}

/// A durable blocking append whose sync fails is cut back: the error names the file, the
/// partition's end does not move, the next append takes the same offset, and a power cut
/// then keeps only what was acknowledged.
#[test]
fn a_blocking_append_whose_sync_fails_changes_nothing() {
    use crate::fs::sim::{Fault, FsOp, SimFs};
    let t = tp(0);
    let fs = SimFs::new();
    let log = SegmentLog::builder("/d").open_with_fs(fs.clone()).unwrap();
    log.create_topic_blocking("t", 1).unwrap();
    log.append_blocking(&t, 1, 1, b"kept", true).unwrap();
    fs.fail_nth(FsOp::Fsync, 1, Fault::Eio);
    let err = log.append_blocking(&t, 1, 1, b"lost", true).unwrap_err();
    assert!(
        matches!(err, LogError::Storage { .. }) && err.to_string().contains("fdatasync"),
        "{err}"
    );
    assert_eq!(log.bounds_blocking(&t).unwrap(), (0, 1));
    assert_eq!(
        log.read_batches_blocking(&t, 0, usize::MAX)
            .unwrap()
            .batches
            .len(),
        1
    );
    assert_eq!(log.append_blocking(&t, 1, 1, b"next", true).unwrap(), 1);
    drop(log);
    assert_eq!(data_after_power_cut(&fs, &t), [&b"kept"[..], &b"next"[..]]);
}

/// The data of every batch of `t` in the log at `/d` after a power cut that drops what was
/// not synced.
fn data_after_power_cut(fs: &crate::fs::sim::SimFs, t: &TopicPartition) -> Vec<Vec<u8>> {
    let after = fs.restart(crate::fs::sim::CrashMode::DropBoth);
    let log = SegmentLog::builder("/d").open_with_fs(after).unwrap();
    let read = log.read_batches_blocking(t, 0, usize::MAX).unwrap();
    read.batches
        .iter()
        .map(|b| b.encoded().unwrap().to_vec())
        .collect()
}

/// Under a flush interval, a periodic sync that fails makes the partition refuse appends,
/// async and blocking alike, until a sync succeeds (each append retries it); what was
/// acknowledged before the failure is kept, and appends are taken again after.
#[tokio::test]
async fn after_a_failed_periodic_sync_appends_are_refused_until_a_sync_succeeds() {
    use crate::fs::sim::{Fault, FsOp, SimFs};
    let t = tp(0);
    let fs = SimFs::new();
    let log = SegmentLog::builder("/d")
        .flush_interval_ms(Some(1 << 40))
        .open_with_fs(fs.clone())
        .unwrap();
    log.create_topic_blocking("t", 1).unwrap();
    assert_eq!(log.append_blocking(&t, 1, 1, b"a", false).unwrap(), 0);
    fs.set_failing(FsOp::Fsync, Fault::Eio);
    assert!(log.sync().is_err());
    let refused = |e: LogError| {
        let shown = e.to_string();
        assert!(
            matches!(e, LogError::Storage { .. })
                && shown.contains("periodic fdatasync")
                && shown.contains("refuses appends"),
            "{shown}"
        );
    };
    refused(log.append_blocking(&t, 1, 1, b"b", false).unwrap_err());
    let records = vec![NewRecord::new(&b"v"[..])];
    let batch = Box::new(|_| Bytes::from(&b"c"[..]));
    refused(log.append_encoded(&t, records, batch).await.unwrap_err());
    assert_eq!(log.bounds_blocking(&t).unwrap(), (0, 1), "nothing appended");
    fs.clear_faults();
    assert_eq!(log.append_blocking(&t, 1, 1, b"d", false).unwrap(), 1);
    log.sync().unwrap();
    drop(log);
    assert_eq!(data_after_power_cut(&fs, &t), [&b"a"[..], &b"d"[..]]);
}

/// A blocking append of more records than any frame can hold is refused before anything is
/// allocated for them (a `u32::MAX` count would be 32 GiB of timestamps), and changes nothing.
#[test]
fn a_blocking_append_of_too_many_records_is_refused() {
    let t = tp(0);
    let log = SegmentLog::builder("/d")
        .open_with_fs(crate::fs::sim::SimFs::new())
        .unwrap();
    log.create_topic_blocking("t", 1).unwrap();
    let err = log
        .append_blocking(&t, u32::MAX, 1, b"x", true)
        .unwrap_err();
    assert!(
        matches!(err, LogError::InvalidArgument { .. }) && err.to_string().contains("records"),
        "{err}"
    );
    assert_eq!(log.bounds_blocking(&t).unwrap(), (0, 0));
}

/// `roll_blocking` closes an active segment that holds a batch (what a compaction of it
/// needs), and does nothing to an empty one.
#[test]
fn a_blocking_roll_closes_only_a_segment_with_batches() {
    use crate::fs::sim::SimFs;
    let t = tp(0);
    let log = SegmentLog::builder("/d")
        .open_with_fs(SimFs::new())
        .unwrap();
    log.create_topic_blocking("t", 1).unwrap();
    assert!(!log.roll_blocking(&t).unwrap());
    log.append_blocking(&t, 3, 1, b"abc", true).unwrap();
    let before = log.partition_size_blocking(&t).unwrap();
    assert!(log.roll_blocking(&t).unwrap());
    assert!(!log.roll_blocking(&t).unwrap());
    let p = log.inner.partition(&t).unwrap();
    let bases: Vec<i64> = p.read().segments.iter().map(|s| s.base_offset).collect();
    assert_eq!(bases, [0, 3]);
    assert_eq!(log.partition_size_blocking(&t).unwrap(), before);
}

/// A roll whose directory sync fails leaves appends going into the segment before it; the
/// new segment's file, if it stays (its removal failed, or a power cut undid it), is an
/// empty file below its predecessor's end, which the next open removes, under every crash
/// mode and with the tail of the segment before it torn.
#[test]
fn a_failed_roll_leaves_no_segment_that_breaks_the_next_open() {
    use crate::fs::sim::{CrashMode, Fault, FsOp, SimFs};
    let t = tp(0);
    for remove_fails in [false, true] {
        let fs = SimFs::new();
        let log = SegmentLog::builder("/d").open_with_fs(fs.clone()).unwrap();
        log.create_topic_blocking("t", 1).unwrap();
        log.append_blocking(&t, 2, 1, b"ab", true).unwrap();
        fs.fail_nth(FsOp::FsyncDir, 1, Fault::Eio);
        if remove_fails {
            fs.fail_nth(FsOp::RemoveFile, 1, Fault::Eio);
        }
        assert!(log.roll_blocking(&t).is_err());
        fs.clear_faults();
        assert_eq!(log.append_blocking(&t, 1, 1, b"c", true).unwrap(), 2);
        assert_eq!(log.append_blocking(&t, 1, 1, b"d", false).unwrap(), 3);
        let orphan = Path::new("/d/t-0").join(files::segment_name(2));
        assert_eq!(fs.file(&orphan).is_some(), remove_fails);
        for mode in CrashMode::ALL {
            let after = fs.restart(mode);
            let reopened = SegmentLog::builder("/d")
                .open_with_fs(after.clone())
                .unwrap_or_else(|e| panic!("{mode:?}, removal failed {remove_fails}: {e}"));
            let (start, end) = reopened.bounds_blocking(&t).unwrap();
            assert_eq!(start, 0);
            assert!(end == 3 || end == 4, "{mode:?}: {end}");
            assert_eq!(reopened.append_blocking(&t, 1, 1, b"e", true).unwrap(), end);
            assert!(after.file(&orphan).is_none(), "{mode:?}: removed at open");
        }
    }
}
