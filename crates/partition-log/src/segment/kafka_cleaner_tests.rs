#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The log cleaner against Apache Kafka 4's `Cleaner` and `CleanedTransactionMetadata`
//! (`storage/src/main/java/org/apache/kafka/storage/internals/log/`), from a review that found
//! each difference (2026-12-07; each test was seen failing before its fix): each test runs
//! the same inputs on the segment log and the memory log.

use std::path::Path;

use coordinator_core::ManualClock;

use super::*;
use crate::testing::compaction::{batches, compact, contents, fill, put, put_as, row, topic};
use crate::MemoryLog;

/// A log with 1 KiB segments on the test's clock, topic `c` of one partition.
async fn segment_log(dir: &Path) -> SegmentLog {
    let log = SegmentLog::builder(dir)
        .clock(Arc::new(ManualClock::new()))
        .segment_bytes(1024)
        .open()
        .unwrap();
    topic(&log).await;
    log
}

fn memory_log() -> MemoryLog {
    let log = MemoryLog::with_clock(Arc::new(ManualClock::new()));
    log.create_topic("c", 1).unwrap();
    log
}

fn policy(now: i64) -> CompactionPolicy {
    CompactionPolicy {
        delete_retention_ms: 1000,
        min_cleanable_dirty_ratio: 0.0,
        ..CompactionPolicy::at(now)
    }
}

/// A committed transaction's record `a=v1`, then a tombstone of `a` outside it; the
/// transaction's commit marker lands above the first pass's stable offset (another producer's
/// transaction is open). The first pass keeps the transactional batch whole and does not map
/// it; the later passes only map their dirty part, so `a=v1` is never compared with the
/// tombstone again, and once the tombstone's horizon passes, `a` is back with its old value.
async fn committed_transaction_decided_later(log: &dyn PartitionLog) {
    topic(log).await;
    put_as(log, "#T 7", &[("a", "v1")], 1).await; // 0: committed, below
    put(log, &[("a", "-")], 1).await; // 1: a deleted
    fill(log, 8).await;
    let open = put_as(log, "#T 9", &[("z", "open")], 1).await; // still open at pass 1
    put_as(log, "#M 7 commit", &[("m", "m")], 1).await;
    fill(log, 8).await;
    // Pass 1: the last stable offset is producer 9's open transaction.
    compact(
        log,
        &CompactionPolicy {
            stable_offset: open,
            ..policy(100)
        },
    )
    .await;
    put_as(log, "#M 9 commit", &[("m", "m")], 1).await;
    fill(log, 8).await;
    compact(log, &policy(200)).await; // producer 7's transaction is decided now
    fill(log, 8).await;
    compact(log, &policy(1100)).await; // the tombstone's horizon (100 + 1000) passed
    fill(log, 8).await;
    compact(log, &policy(1200)).await;
    let rows = contents(log).await;
    assert!(
        !rows.iter().any(|r| r.1 == "a"),
        "a was deleted at offset 1 and its tombstone has expired: {rows:?}"
    );
    assert!(!rows.contains(&row(0, "a", "v1")), "{rows:?}");
}

/// Kafka treats every transactional batch below the first uncleanable offset (itself at most
/// the last stable offset) that is not in an aborted transaction as committed: it learns the
/// aborted ones from the transaction index of the whole log, markers beyond the cleaned range
/// included (`Cleaner.buildOffsetMap` and `Cleaner.cleanSegments` call
/// `log.collectAbortedTransactions`, which reads the later segments' indexes until complete;
/// `CleanedTransactionMetadata.onBatchRead` returns false for a committed batch, whose keys
/// `buildOffsetMapForSegment` then maps). So Kafka's first pass maps `a` at 0 then at 1 and
/// removes `a=v1` (`Cleaner.shouldRetainRecord`: `record.offset() >= foundOffset` fails); the
/// tombstone removed later leaves nothing of `a`. Here `Cleaning::decide` keeps a batch
/// whose marker it has not read "whole" and `Cleaning::map` skips it, so `a=v1` outlives the
/// tombstone: a deleted key comes back.
#[tokio::test]
async fn a_transaction_decided_after_the_pass_does_not_resurrect_a_deleted_key_segment_log() {
    let dir = tempfile::tempdir().unwrap();
    committed_transaction_decided_later(&segment_log(dir.path()).await).await;
}

/// The same as
/// [`a_transaction_decided_after_the_pass_does_not_resurrect_a_deleted_key_segment_log`], on
/// the memory log.
#[tokio::test]
async fn a_transaction_decided_after_the_pass_does_not_resurrect_a_deleted_key_memory_log() {
    committed_transaction_decided_later(&memory_log()).await;
}

/// An aborted transaction below the stable offset whose abort marker lies above the pass's
/// range.
async fn aborted_transaction_decided_later(log: &dyn PartitionLog) {
    topic(log).await;
    put_as(log, "#T 7", &[("a", "aborted")], 1).await; // 0
    fill(log, 8).await;
    let open = put_as(log, "#T 9", &[("z", "open")], 1).await;
    put_as(log, "#M 7 abort", &[("m", "m")], 1).await;
    fill(log, 8).await;
    compact(
        log,
        &CompactionPolicy {
            stable_offset: open,
            ..policy(100)
        },
    )
    .await;
    let rows = contents(log).await;
    assert!(
        !rows.iter().any(|r| r.2 == "aborted"),
        "the aborted record is below the stable offset: {rows:?}"
    );
}

/// Kafka removes an aborted transaction's batches in the first pass that cleans them, its
/// abort marker wherever it is: `Cleaner.cleanSegments` collects the aborted transactions
/// with `log.collectAbortedTransactions(startOffset, upperBoundOffset)`, which reads the
/// transaction indexes of the later segments too (`UnifiedLog.collectAbortedTransactions`),
/// and `CleanedTransactionMetadata.onBatchRead` then returns true (discard). Here
/// `Cleaning::learn` only reads the markers within the compactable batches, so the aborted
/// record stays until a later pass reaches its marker.
#[tokio::test]
async fn aborted_records_go_even_if_their_marker_is_above_the_pass_segment_log() {
    let dir = tempfile::tempdir().unwrap();
    aborted_transaction_decided_later(&segment_log(dir.path()).await).await;
}

/// The same as [`aborted_records_go_even_if_their_marker_is_above_the_pass_segment_log`], on
/// the memory log.
#[tokio::test]
async fn aborted_records_go_even_if_their_marker_is_above_the_pass_memory_log() {
    aborted_transaction_decided_later(&memory_log()).await;
}

/// A record without a key (key `_` in the test format), then enough to compact it.
async fn keyless_record(log: &dyn PartitionLog) {
    topic(log).await;
    put(log, &[("_", "no-key"), ("a", "1")], 1).await; // 0, 1
    fill(log, 8).await;
    compact(log, &policy(100)).await;
    let rows = contents(log).await;
    assert!(rows.contains(&row(1, "a", "1")), "{rows:?}");
    assert!(
        !rows.contains(&row(0, "_", "no-key")),
        "Kafka's cleaner drops a record without a key: {rows:?}"
    );
}

/// Kafka's `Cleaner.shouldRetainRecord` returns false for a record without a key at or below
/// the offset map's latest offset (`stats.invalidMessage(); return false;`): the cleaner
/// removes it. `KeyedRecord::key`'s docs say such a record "is always kept (Kafka refuses
/// them on a compacted topic; one written before the topic was compacted stays)", and
/// `Cleaning::records` keeps it; it is not listed among the deliberate differences.
#[tokio::test]
async fn a_record_without_a_key_is_removed_as_kafka_does_segment_log() {
    let dir = tempfile::tempdir().unwrap();
    keyless_record(&segment_log(dir.path()).await).await;
}

/// The same as [`a_record_without_a_key_is_removed_as_kafka_does_segment_log`], on the
/// memory log.
#[tokio::test]
async fn a_record_without_a_key_is_removed_as_kafka_does_memory_log() {
    keyless_record(&memory_log()).await;
}

/// An aborted transaction whose producer writes nothing more here, cleaned at 100 and again
/// at 1100 (`delete.retention.ms` 1000).
async fn abort_marker_after_its_records(log: &dyn PartitionLog) {
    topic(log).await;
    put_as(log, "#T 7", &[("a", "aborted")], 1).await; // 0
    let abort = put_as(log, "#M 7 abort", &[("m", "m")], 1).await; // 1
    fill(log, 8).await;
    compact(log, &policy(100)).await;
    assert!(!contents(log).await.iter().any(|r| r.2 == "aborted"));
    fill(log, 8).await;
    compact(log, &policy(1100)).await;
    let stored = batches(log).await;
    assert!(
        stored.contains(&(abort, "#M 7 abort".into())),
        "Kafka sets the marker's horizon at the second pass (1100 + 1000): {stored:?}"
    );
}

/// Kafka keeps a marker without a horizon in the pass that removes its transaction's
/// batches: `CleanedTransactionMetadata.onControlBatchRead` answers "cannot discard" for an
/// ABORT whose batches it observed in this pass (`lastObservedBatchOffset.isPresent()`) and
/// for a COMMIT whose batches it traversed (`ongoingCommittedTxns.remove`), and
/// `MemoryRecords.filterTo` sets a control batch's delete horizon only when the filter says
/// it can be discarded (`Cleaner.cleanInto`: `BatchRetentionResult(..., canDiscardBatch &&
/// batch.isControlBatch())`). Its horizon is set by the next pass, so the marker outlives
/// its records by `delete.retention.ms` after that pass. Here `Cleaning::removed` counts the
/// batches dropped in the same pass and `Cleaning::decide` gives the marker its horizon at
/// once: it goes one pass earlier (at 1100 here, where Kafka keeps it until 2100). The
/// producer is taken as no longer active, so Kafka's `isBatchLastRecordOfProducer` (a
/// documented difference) plays no part.
#[tokio::test]
async fn a_marker_gets_its_horizon_at_the_pass_after_its_records_went_segment_log() {
    let dir = tempfile::tempdir().unwrap();
    abort_marker_after_its_records(&segment_log(dir.path()).await).await;
}

/// The same as
/// [`a_marker_gets_its_horizon_at_the_pass_after_its_records_went_segment_log`], on the
/// memory log.
#[tokio::test]
async fn a_marker_gets_its_horizon_at_the_pass_after_its_records_went_memory_log() {
    abort_marker_after_its_records(&memory_log()).await;
}

/// Kafka moves the cleaner checkpoint only once a pass has cleaned and swapped in every
/// group: `LogCleaner.CleanerThread.cleanLog` starts with `endOffset =
/// cleanable.firstDirtyOffset()`, sets it to the pass's end only once `cleaner.clean`
/// returned, and calls `cleanerManager.doneCleaning(topicPartition, dir, endOffset)` (which
/// writes `cleaner-offset-checkpoint`) in `finally`: a pass that fails (an `IOException`
/// also takes the log directory offline) or a crash leaves the checkpoint where it was, and
/// the next pass cleans the same dirty part again. Here
/// `Partition::compact` (`segment/clean.rs`) calls `mark(cleaned_up_to)`, which writes the
/// checkpoint durably, before any group is rewritten; an error or a crash after it leaves
/// the checkpoint past segments that were never compacted, and the reopened log
/// (`Partition::open` sets the pass's first dirty offset from the checkpoint) treats them as
/// clean for good.
///
/// Here the pass's `.cleaned` file cannot be created (`ENOSPC`); `a=v1` and its tombstone
/// were both in the dirty part it never compacted. No later pass maps `a` again (each maps
/// its own dirty part only), so the tombstone expires and goes while `a=v1` stays.
#[tokio::test]
async fn a_failed_pass_then_a_restart_does_not_resurrect_a_deleted_key() {
    use crate::fs::sim::{Fault, FsOp, SimFs};
    let fs = SimFs::new();
    let open = |fs: SimFs| {
        SegmentLog::builder("/data/log")
            .clock(Arc::new(ManualClock::new()))
            .segment_bytes(1024)
            .open_with_fs(fs)
            .unwrap()
    };
    let log = open(fs.clone());
    topic(&log).await;
    put(&log, &[("a", "v1")], 1).await; // 0
    put(&log, &[("a", "-")], 1).await; // 1: a deleted
    fill(&log, 8).await;
    // The first file created by the pass is the checkpoint's temporary file, the second the
    // group's `.cleaned` file.
    fs.fail_nth(FsOp::CreateTemp, 2, Fault::Enospc);
    let failed = log
        .compact(
            &crate::testing::compaction::tp(),
            &policy(100),
            Arc::new(crate::testing::compaction::TextRecords),
        )
        .await;
    assert!(failed.is_err(), "the rewrite failed: {failed:?}");
    assert!(
        contents(&log).await.contains(&row(0, "a", "v1")),
        "nothing compacted"
    );
    drop(log);
    let log = open(fs.clone());
    fill(&log, 8).await;
    compact(&log, &policy(200)).await; // the tombstone's horizon: 1200
    fill(&log, 8).await;
    compact(&log, &policy(1200)).await;
    let rows = contents(&log).await;
    assert!(
        !rows.iter().any(|r| r.1 == "a"),
        "a was deleted at offset 1 and its tombstone has expired: {rows:?}"
    );
}

/// `a=v1` written with a timestamp ahead of the pass's clock (a producer's `CreateTime`;
/// the broker takes any, `message.timestamp.after.max.ms` defaulting to `Long.MAX_VALUE`),
/// then `a=v2`, compacted under the default `min.compaction.lag.ms` of 0.
async fn a_future_timestamp(log: &dyn PartitionLog) {
    topic(log).await;
    put(log, &[("a", "v1")], 1_000_000).await; // 0: "in the future" at 100
    put(log, &[("a", "v2")], 1).await; // 1
    fill(log, 8).await;
    compact(log, &policy(100)).await;
    let rows = contents(log).await;
    assert!(rows.contains(&row(1, "a", "v2")), "{rows:?}");
    assert!(
        !rows.contains(&row(0, "a", "v1")),
        "min.compaction.lag.ms is 0: Kafka does not look at timestamps: {rows:?}"
    );
}

/// Kafka applies the minimum lag only when `min.compaction.lag.ms` is above 0
/// (`LogCleanerManager.cleanableOffsets`: `minCompactionLagMs > 0 ?
/// findFirstUncleanableSegment(log, firstDirtyOffset, now, minCompactionLagMs) :
/// Optional.empty()`), and then to the dirty segments only (from `firstDirtyOffset`). Here
/// `cleaning::lag_passed` (`cleaning.rs`) is `now - max_timestamp >= min_compaction_lag_ms`
/// for every segment (memory log: batch) from the log start, so at a lag of 0 a record
/// stamped ahead of the broker's clock makes its segment, and every later one (the
/// compactable ones are taken with `take_while` from the log start), uncompactable until the
/// clock reaches that timestamp: a producer with a clock far ahead stops the partition's
/// compaction, tombstones and old values included.
#[tokio::test]
async fn a_future_timestamp_does_not_stop_compaction_at_lag_0_segment_log() {
    let dir = tempfile::tempdir().unwrap();
    a_future_timestamp(&segment_log(dir.path()).await).await;
}

/// The same as [`a_future_timestamp_does_not_stop_compaction_at_lag_0_segment_log`], on the
/// memory log.
#[tokio::test]
async fn a_future_timestamp_does_not_stop_compaction_at_lag_0_memory_log() {
    a_future_timestamp(&memory_log()).await;
}
