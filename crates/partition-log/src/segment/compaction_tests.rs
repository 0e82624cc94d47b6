#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Compaction of the segment log, through the port, with a small text record format.

use std::fs;
use std::path::Path;

use coordinator_core::ManualClock;

use super::*;
use crate::compaction::{BatchKind, KeyedRecord, RetainedBatch};
use crate::testing::compaction::{
    batches, compact, compaction_drops_aborted_records_and_lone_markers, contents, many_values,
    put, put_as, row, tp, TextRecords as Lines,
};
use crate::MemoryLog;

/// A log with 1 KiB segments on the test's clock, topic `c` of one partition.
async fn open_log(dir: &Path, clock: &ManualClock) -> SegmentLog {
    let log = SegmentLog::builder(dir)
        .clock(Arc::new(clock.clone()))
        .segment_bytes(1024)
        .open()
        .unwrap();
    if log.partition_count("c").is_none() {
        log.create_topic("c", 1).await.unwrap();
    }
    log
}

#[tokio::test]
async fn compaction_keeps_the_latest_value_of_each_key_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let log = open_log(dir.path(), &clock).await;
    many_values(&log).await;
    let before = contents(&log).await;
    assert_eq!(before.len(), 20);
    let active_base = {
        let p = log.inner.partition(&tp()).unwrap();
        let s = p.read();
        s.segments.last().unwrap().base_offset
    };
    let done = compact(&log, &CompactionPolicy::at(10)).await;
    assert!(done.segments > 0, "{done:?}");
    assert_eq!(done.cleaned_up_to, active_base);
    let after = contents(&log).await;
    // Below the active segment only each key's latest value survives (a later value in
    // the active segment also counts: it is not compacted, but the closed ones are only
    // compacted against what they themselves hold, as Kafka's dirty part ends at the active
    // segment).
    let closed: Vec<_> = before
        .iter()
        .filter(|(o, _, _)| *o < active_base)
        .cloned()
        .collect();
    let mut latest: std::collections::BTreeMap<String, (i64, String, String)> = Default::default();
    for r in &closed {
        latest.insert(r.1.clone(), r.clone());
    }
    let mut expected: Vec<_> = latest.into_values().collect();
    expected.sort();
    expected.extend(before.iter().filter(|(o, _, _)| *o >= active_base).cloned());
    assert_eq!(after, expected);
    assert!(done.bytes_after < done.bytes_before);
    assert_eq!(
        done.records_removed as usize,
        closed.len() - 3,
        "three keys kept"
    );
    // The bounds do not move; a read from a removed offset starts at the next record.
    assert_eq!(log.bounds(&tp()).await.unwrap(), (0, 20));
    let read = log.read_batches(&tp(), 0, 1).await.unwrap();
    assert!(read.batches[0].base_offset() > 0);

    // A restart reads the compacted segments, gaps and all. The cleaner starts over (its
    // checkpoint cannot say the last pass ended): the first pass reads everything and
    // changes no record; the next has nothing to do.
    drop(log);
    let log = open_log(dir.path(), &clock).await;
    assert_eq!(contents(&log).await, after);
    let first = compact(&log, &CompactionPolicy::at(10)).await;
    assert_eq!(first.records_removed, 0, "{first:?}");
    assert_eq!(contents(&log).await, after);
    let again = compact(&log, &CompactionPolicy::at(10)).await;
    assert_eq!(again.segments, 0, "nothing new to compact: {again:?}");
}

#[tokio::test]
async fn tombstones_are_kept_for_the_delete_retention_then_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let log = open_log(dir.path(), &clock).await;
    put(&log, &[("a", "1"), ("b", "1")], 1).await;
    put(&log, &[("a", "-")], 1).await;
    for _ in 0..8 {
        put(&log, &[("z", "2")], 1).await;
    }
    let policy = CompactionPolicy {
        delete_retention_ms: 1000,
        ..CompactionPolicy::at(100)
    };
    compact(&log, &policy).await;
    let rows = contents(&log).await;
    assert!(
        rows.contains(&row(2, "a", "-")),
        "the tombstone stays: {rows:?}"
    );
    assert!(!rows.iter().any(|r| r.1 == "a" && r.2 == "1"), "{rows:?}");
    assert!(rows.contains(&row(1, "b", "1")));
    // Before the horizon (100 + 1000) it stays; at it, it goes. New writes make the
    // partition dirty again.
    for _ in 0..8 {
        put(&log, &[("y", "3")], 1).await;
    }
    let early = CompactionPolicy {
        min_cleanable_dirty_ratio: 0.0,
        ..CompactionPolicy::at(1099)
    };
    compact(&log, &early).await;
    assert!(contents(&log).await.contains(&row(2, "a", "-")));
    for _ in 0..8 {
        put(&log, &[("x", "4")], 1).await;
    }
    let late = CompactionPolicy {
        min_cleanable_dirty_ratio: 0.0,
        ..CompactionPolicy::at(1100)
    };
    compact(&log, &late).await;
    let rows = contents(&log).await;
    assert!(!rows.iter().any(|r| r.1 == "a"), "{rows:?}");
    assert!(rows.contains(&row(1, "b", "1")));
}

#[tokio::test]
async fn the_dirty_ratio_and_the_lags_decide_when_a_partition_is_due() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let log = open_log(dir.path(), &clock).await;
    many_values(&log).await;
    // Records written at 1: with a 100 ms minimum lag at 50, nothing is old enough.
    let young = CompactionPolicy {
        min_compaction_lag_ms: 100,
        ..CompactionPolicy::at(50)
    };
    assert_eq!(compact(&log, &young).await.segments, 0);
    // A dirty ratio of 1.0 is never exceeded...
    let never = CompactionPolicy {
        min_cleanable_dirty_ratio: 1.0,
        ..CompactionPolicy::at(50)
    };
    assert_eq!(compact(&log, &never).await.segments, 0);
    // ...unless a record waited past the maximum lag.
    let overdue = CompactionPolicy {
        max_compaction_lag_ms: 10,
        ..never.clone()
    };
    assert!(compact(&log, &overdue).await.segments > 0);
}

#[tokio::test]
async fn nothing_at_or_above_the_stable_offset_and_no_kept_whole_batch_is_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let log = open_log(dir.path(), &clock).await;
    let txn = put_as(&log, "#?", &[("u", "1")], 1).await; // unknown to the format: kept whole
    many_values(&log).await;
    let before = contents(&log).await;
    let nothing = CompactionPolicy {
        stable_offset: 3,
        ..CompactionPolicy::at(10)
    };
    assert_eq!(compact(&log, &nothing).await.segments, 0);
    assert_eq!(contents(&log).await, before);
    compact(&log, &CompactionPolicy::at(10)).await;
    let read = log.read_batches(&tp(), txn, 1).await.unwrap();
    assert_eq!(read.batches[0].base_offset(), txn, "the kept-whole batch");
    assert!(read.batches[0].encoded().unwrap().starts_with(b"#?\n0 u 1"));
}

#[tokio::test]
async fn a_gap_above_the_compacted_part_is_still_refused_and_an_unfinished_pass_removed() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let log = open_log(dir.path(), &clock).await;
    many_values(&log).await;
    compact(&log, &CompactionPolicy::at(10)).await;
    for _ in 0..12 {
        put(&log, &[("q", "1")], 1).await;
    }
    drop(log);
    let part = dir.path().join("c-0");
    let mut names: Vec<String> = fs::read_dir(&part)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names[0],
        files::segment_name(0),
        "an emptied segment stays: {names:?}"
    );
    let leftover = part.join(format!("{}{}", names[0], partition::CLEANED));
    fs::write(&leftover, b"half a compaction").unwrap();
    let log = open_log(dir.path(), &clock).await;
    assert!(
        !leftover.exists(),
        "the unfinished output is removed at open"
    );
    drop(log);
    // Remove a segment written after the compaction (not the last: nothing follows it to
    // tell): that gap is damage.
    let cleaned =
        files::read_checkpoint(&StdFs, &dir.path().join(files::CLEANER_CHECKPOINT)).unwrap();
    let upto = cleaned[&tp()];
    let victim = names
        .iter()
        .filter_map(|n| files::parse_segment_name(n))
        .filter(|b| *b >= upto)
        .nth(1)
        .unwrap();
    fs::remove_file(part.join(files::segment_name(victim))).unwrap();
    let err = SegmentLog::builder(dir.path())
        .open()
        .unwrap_err()
        .to_string();
    assert!(err.contains("previous segment ends"), "{err}");
}

#[tokio::test]
async fn aborted_records_go_committed_ones_take_part_and_markers_go_once_alone() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let log = open_log(dir.path(), &clock).await;
    compaction_drops_aborted_records_and_lone_markers(&log).await;
    // What the passes left reads back the same after a restart.
    let before = batches(&log).await;
    drop(log);
    let log = open_log(dir.path(), &clock).await;
    assert_eq!(batches(&log).await, before);
}

/// A memory log with topic `c` of one partition on the test's clock.
fn memory_log(clock: &ManualClock) -> MemoryLog {
    let log = MemoryLog::with_clock(Arc::new(clock.clone()));
    log.create_topic("c", 1).unwrap();
    log
}

#[tokio::test]
async fn the_memory_log_keeps_the_latest_of_each_key_and_its_tombstones_for_a_while() {
    let clock = ManualClock::new();
    let log = memory_log(&clock);
    many_values(&log).await;
    put(&log, &[("b", "-")], 1).await; // offset 20: b deleted
    let policy = |now| CompactionPolicy {
        delete_retention_ms: 1000,
        ..CompactionPolicy::at(now)
    };
    let done = compact(&log, &policy(10)).await;
    assert!(done.segments > 0 && done.records_removed > 0, "{done:?}");
    // No segments: everything below the high watermark is compactable.
    let rows = contents(&log).await;
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.contains(&row(20, "b", "-")), "{rows:?}");
    let keys: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(keys, ["c", "a", "b"], "each key once, in offset order");
    // The records the consumer port reads are the compacted ones too.
    let fetched = coordinator_core::RecordSource::fetch(&log, &tp(), 0, 100)
        .await
        .unwrap();
    assert_eq!(
        fetched.iter().map(|r| r.offset).collect::<Vec<_>>(),
        rows.iter().map(|r| r.0).collect::<Vec<_>>()
    );
    assert_eq!(compact(&log, &policy(10)).await.segments, 0, "not dirty");
    // A new write makes it dirty; past the horizon the tombstone goes.
    put(&log, &[("a", "again")], 1).await;
    let any_dirt = CompactionPolicy {
        min_cleanable_dirty_ratio: 0.0,
        ..policy(1010)
    };
    compact(&log, &any_dirt).await;
    let rows = contents(&log).await;
    assert_eq!(rows, [row(16, "c", "v16"), row(21, "a", "again")]);
    assert_eq!(log.bounds(&tp()).unwrap(), (0, 22), "offsets never move");
}

/// [`Lines`], held at its first `keys` call until the test lets it go.
#[derive(Debug)]
struct Held {
    reached: std::sync::mpsc::SyncSender<()>,
    go: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    once: std::sync::Once,
}

impl RecordFormat for Held {
    fn kind(&self, encoded: &[u8]) -> BatchKind {
        Lines.kind(encoded)
    }

    fn keys(&self, encoded: &[u8], base_offset: i64) -> Option<Vec<KeyedRecord>> {
        self.once.call_once(|| {
            let _ = self.reached.send(());
            let _ = self.go.lock().unwrap().recv();
        });
        Lines.keys(encoded, base_offset)
    }

    fn retain(
        &self,
        encoded: &[u8],
        base_offset: i64,
        keep: &dyn Fn(i64) -> bool,
    ) -> Result<RetainedBatch, String> {
        Lines.retain(encoded, base_offset, keep)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn appends_and_reads_go_on_while_a_pass_runs() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let log = Arc::new(open_log(dir.path(), &clock).await);
    many_values(&*log).await;
    let (reached_tx, reached) = std::sync::mpsc::sync_channel(1);
    let (go, go_rx) = std::sync::mpsc::sync_channel(1);
    let format = Arc::new(Held {
        reached: reached_tx,
        go: std::sync::Mutex::new(go_rx),
        once: std::sync::Once::new(),
    });
    let pass = {
        let log = log.clone();
        tokio::spawn(async move {
            log.compact(&tp(), &CompactionPolicy::at(10), format)
                .await
                .unwrap()
        })
    };
    // The pass is inside its key map: appends (rolling segments) and reads still answer.
    let bound = std::time::Duration::from_secs(20);
    tokio::task::spawn_blocking(move || reached.recv_timeout(bound).unwrap())
        .await
        .unwrap();
    // On a task of its own: a pass holding the partition's lock would block its thread.
    let during = {
        let log = log.clone();
        tokio::spawn(async move {
            for _ in 0..10 {
                put(&*log, &[("during", "x")], 1).await;
            }
            contents(&*log).await.len()
        })
    };
    let read = tokio::time::timeout(bound, during)
        .await
        .map(|joined| joined.unwrap());
    go.send(()).unwrap(); // released first, so that a failure below ends the test
    let read = read.expect("appends and reads answer while the pass is held");
    assert!(read >= 30, "{read}");
    let done = pass.await.unwrap();
    assert!(done.segments > 0, "{done:?}");
    let rows = contents(&*log).await;
    assert_eq!(
        rows.iter().filter(|r| r.1 == "during").count(),
        10,
        "the appends made during the pass are all there: {rows:?}"
    );
}

#[tokio::test]
async fn a_segment_is_closed_by_age_so_that_compaction_reaches_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    clock.set(1_000).unwrap();
    let log = open_log(dir.path(), &clock).await; // the active segment opened at 1,000
                                                  // Stamped in the past: the age is the segment's, not its records' (a client's
                                                  // timestamps do not close segments, as in Kafka).
    put(&log, &[("a", "1")], 1).await;
    put(&log, &[("a", "2")], 1).await;
    // Both in the active segment: a pass has nothing to compact.
    let policy = CompactionPolicy::at(1_000);
    assert_eq!(compact(&log, &policy).await.segments, 0);
    assert!(
        !log.roll_older_than(&tp(), 100).await.unwrap(),
        "not old enough"
    );
    clock.advance(100);
    assert!(
        !log.roll_older_than(&tp(), 100).await.unwrap(),
        "not more than 100 ms"
    );
    clock.advance(1);
    assert!(log.roll_older_than(&tp(), 100).await.unwrap());
    clock.advance(1_000);
    assert!(
        !log.roll_older_than(&tp(), 100).await.unwrap(),
        "the new active segment is empty"
    );
    assert_eq!(log.bounds(&tp()).await.unwrap(), (0, 2));
    let done = compact(&log, &CompactionPolicy::at(2_101)).await;
    assert_eq!(done.records_removed, 1, "{done:?}");
    assert_eq!(contents(&log).await, [row(1, "a", "2")]);
    put(&log, &[("b", "1")], 1).await;
    assert_eq!(
        log.bounds(&tp()).await.unwrap(),
        (0, 3),
        "appends go on after it"
    );
    // The segment the roll opened is aged from the roll (1,101), not from the log's opening.
    assert!(
        !log.roll_older_than(&tp(), 1_000).await.unwrap(),
        "opened 1,000 ms ago"
    );
    assert!(log.roll_older_than(&tp(), 999).await.unwrap());
    drop(log);
    let log = open_log(dir.path(), &clock).await;
    assert_eq!(contents(&log).await, [row(1, "a", "2"), row(2, "b", "1")]);
}

/// A first segment that compaction leaves empty stays, as an empty file, however often the
/// log is reopened: the log start does not move over offsets that are compacted away (an
/// open used to take an empty leading segment for one below the log start and remove it,
/// and the next open then started the log at the following segment).
#[tokio::test]
async fn an_emptied_first_segment_keeps_the_log_start_across_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    {
        let log = open_log(dir.path(), &clock).await;
        for i in 0..12 {
            put(&log, &[("a", &format!("v{i}"))], 1).await;
        }
        let done = compact(&log, &CompactionPolicy::at(10)).await;
        assert!(done.segments > 0, "{done:?}");
        assert_eq!(batches(&log).await.first().map(|b| b.0 > 0), Some(true));
    }
    let part = dir.path().join(files::partition_dir(&tp()));
    for reopen in 0..3 {
        let log = open_log(dir.path(), &clock).await;
        assert_eq!(log.bounds(&tp()).await.unwrap().0, 0, "reopen {reopen}");
        let first = log.read_batches(&tp(), 0, 1 << 20).await.unwrap();
        assert!(
            !first.batches.is_empty(),
            "reopen {reopen}: offset 0 reads on"
        );
        assert!(
            part.join(files::segment_name(0)).exists(),
            "reopen {reopen}"
        );
    }
}

/// The segment files of `c-0` in `dir`, by name.
fn segment_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir.join(files::partition_dir(&tp())))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// A partition compacted often, with a segment rolled before each pass (a store's changelog
/// does that), keeps few files: a pass cleans consecutive small segments into one, as
/// Kafka's `groupSegmentsBySize` does, instead of leaving every rolled segment (and its
/// open handle) behind, however small or empty compaction leaves it. Every key's latest
/// value still reads back at its offset, before and after a restart.
#[tokio::test]
async fn small_segments_compacted_again_and_again_are_merged_into_few_files() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let log = open_log(dir.path(), &clock).await;
    let policy = CompactionPolicy {
        min_cleanable_dirty_ratio: 0.0,
        ..CompactionPolicy::at(10)
    };
    let mut latest: std::collections::BTreeMap<String, (i64, String)> = Default::default();
    for round in 0..50 {
        log.roll_older_than(&tp(), -1).await.unwrap();
        for k in 0..3 {
            let key = format!("k{}", (round * 3 + k) % 7);
            let value = format!("r{round}.{k}");
            let offset = put(&log, &[(&key, &value)], 1).await;
            latest.insert(key, (offset, value));
        }
        compact(&log, &policy).await;
    }
    let check = |log: &SegmentLog, rows: Vec<(i64, String, String)>| {
        let sizes: Vec<u64> = log
            .inner
            .partition(&tp())
            .unwrap()
            .read()
            .segments
            .iter()
            .map(|s| s.size)
            .collect();
        let segments = sizes.len();
        assert!(
            sizes.iter().all(|s| *s <= 1024),
            "a merge holds at most a segment's size: {sizes:?}"
        );
        let names = segment_files(dir.path());
        assert!(segments <= 6, "{segments} segments in the index: {names:?}");
        assert_eq!(names.len(), segments, "one file per segment: {names:?}");
        for (key, (offset, value)) in &latest {
            assert!(
                rows.contains(&(*offset, key.clone(), value.clone())),
                "{key}={value} at {offset}: {rows:?}"
            );
        }
        let closed: Vec<&String> = rows.iter().filter(|r| r.0 < 147).map(|r| &r.1).collect();
        let keys: std::collections::BTreeSet<&String> = closed.iter().copied().collect();
        assert_eq!(
            closed.len(),
            keys.len(),
            "below the active segment, one record per key: {rows:?}"
        );
    };
    check(&log, contents(&log).await);
    assert_eq!(log.bounds(&tp()).await.unwrap(), (0, 150));
    drop(log);
    let log = open_log(dir.path(), &clock).await;
    check(&log, contents(&log).await);
    assert_eq!(log.bounds(&tp()).await.unwrap(), (0, 150));
}

/// A closed segment was synced when it was closed: a batch cut short at its end is damage,
/// not a torn write, even when it is the last segment holding bytes (the active one, after
/// a roll, is empty) and compaction accepts gaps up to the active segment. Truncating it
/// would drop an acknowledged batch, and leave offsets below the end that read nothing.
#[tokio::test]
async fn a_cut_batch_at_the_end_of_a_closed_compacted_segment_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    {
        let log = open_log(dir.path(), &clock).await;
        for key in ["a", "b", "c"] {
            put(&log, &[(key, "1")], 1).await;
        }
        put(&log, &[("a", "2")], 1).await;
        assert!(log.roll_older_than(&tp(), -1).await.unwrap());
        let policy = CompactionPolicy {
            min_cleanable_dirty_ratio: 0.0,
            ..CompactionPolicy::at(10)
        };
        assert_eq!(compact(&log, &policy).await.cleaned_up_to, 4);
    }
    let names = segment_files(dir.path());
    assert_eq!(names, [files::segment_name(0), files::segment_name(4)]);
    let path = dir.path().join(files::partition_dir(&tp())).join(&names[0]);
    let len = fs::metadata(&path).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 3)
        .unwrap();
    let err = SegmentLog::builder(dir.path())
        .segment_bytes(1024)
        .open()
        .unwrap_err()
        .to_string();
    assert!(err.contains(&names[0]) && err.contains("corrupt"), "{err}");
}
