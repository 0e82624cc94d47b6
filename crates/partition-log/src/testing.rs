//! The behaviour of the [`PartitionLog`] port (feature `testing`), written once and run on
//! every implementation: `MemoryLog` and `SegmentLog` here, `PostgresLog` in
//! `consumer-groups-store-postgres`. Each test takes a fresh, empty log.
//!
//! Two ways to run it from an adapter's tests:
//!
//! - [`partition_log_suite!`](crate::partition_log_suite) generates one `#[tokio::test]` per
//!   test in the module it is called in, from an async factory of [`Fresh`] logs (the caller
//!   needs `tokio` with the `macros` and `rt` features among its dev-dependencies);
//! - [`run_suite`] runs every test in turn, each on a fresh log from the factory, in one
//!   test (for logs whose setup is costly or may be skipped, such as a database server).
//!
//! Every test panics with a message naming what broke, so this belongs in tests only.
//! [`TESTS`] lists them; both ways run all of them.
//!
//! ```ignore
//! use std::sync::Arc;
//! use partition_log::testing::Fresh;
//! use partition_log::MemoryLog;
//!
//! partition_log::partition_log_suite!(|_name: &'static str| async {
//!     Fresh::new(Arc::new(MemoryLog::new()))
//! });
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use coordinator_core::{Bytes, NewRecord, TopicPartition};

use crate::PartitionLog;

pub mod compaction;

pub use compaction::{
    compaction_drops_aborted_records_and_lone_markers,
    compaction_keeps_the_latest_record_of_each_key,
    compaction_keeps_the_offsets_and_timestamps_of_kept_records,
    compaction_keeps_tombstones_until_their_horizon,
    compaction_of_batches_appended_with_timestamps_only,
};

/// A fresh, empty log for one test, and whatever must live as long as it (a directory, a
/// database).
pub struct Fresh {
    log: Arc<dyn PartitionLog>,
    _keep: Option<Box<dyn Any + Send>>,
}

impl fmt::Debug for Fresh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fresh").field("log", &self.log).finish()
    }
}

impl Fresh {
    /// A log that needs nothing else kept alive.
    pub fn new(log: Arc<dyn PartitionLog>) -> Self {
        Fresh { log, _keep: None }
    }

    /// A log, and `keep`, dropped after it (e.g. the temporary directory it lives in).
    pub fn keeping(log: Arc<dyn PartitionLog>, keep: impl Any + Send) -> Self {
        Fresh {
            log,
            _keep: Some(Box::new(keep)),
        }
    }

    /// The log.
    pub fn log(&self) -> &dyn PartitionLog {
        &*self.log
    }
}

/// One test of the suite: it takes a fresh log and panics if the log breaks the port's
/// contract.
pub type Test = for<'a> fn(&'a dyn PartitionLog) -> Pin<Box<dyn Future<Output = ()> + 'a>>;

macro_rules! tests {
    ($($test:ident),* $(,)?) => {
        /// Every test of the suite, by name, in the order [`run_suite`] runs them.
        pub const TESTS: &[(&str, Test)] = &[
            $((stringify!($test), |log| Box::pin($test(log)))),*
        ];
    };
}

tests!(
    topics_are_created_once_and_refused_clearly,
    appends_get_consecutive_offsets_and_keep_their_bytes,
    unknown_partitions_and_out_of_range_offsets_are_refused,
    reads_return_the_first_batch_whatever_its_size_then_respect_the_budget,
    offset_for_timestamp_finds_the_first_record_at_or_after,
    offset_of_max_timestamp_finds_the_first_record_with_the_largest,
    partition_size_grows_with_appends,
    delete_records_moves_the_log_start_inside_a_batch,
    a_failed_append_wakes_nobody,
    appends_of_timestamps_only_read_back_as_appends_of_records,
    compaction_keeps_the_latest_record_of_each_key,
    compaction_keeps_tombstones_until_their_horizon,
    compaction_drops_aborted_records_and_lone_markers,
    compaction_keeps_the_offsets_and_timestamps_of_kept_records,
    compaction_of_batches_appended_with_timestamps_only,
);

/// Runs every test of [`TESTS`] in turn, each on the log `fresh` makes for it (it gets the
/// test's name, e.g. to name a database after it). Prints each test's name to stderr before
/// running it, so a failure's output says which test broke.
pub async fn run_suite<F, Fut>(mut fresh: F)
where
    F: FnMut(&'static str) -> Fut,
    Fut: Future<Output = Fresh>,
{
    for (name, test) in TESTS {
        eprintln!("partition-log suite: {name}");
        let log = fresh(name).await;
        test(log.log()).await;
    }
}

/// Generates one `#[tokio::test]` per test of the [`PartitionLog`](crate::PartitionLog)
/// suite ([`testing::TESTS`](crate::testing::TESTS)), each on the log that `$fresh` (an async
/// factory: `FnMut(&'static str) -> impl Future<Output = Fresh>`, given the test's name)
/// makes, and a `#[test]` checking that the generated tests are the whole suite. Call it
/// in a module of its own; needs feature `testing`, and `tokio` (`macros`, `rt`) in the
/// caller's dev-dependencies.
#[macro_export]
macro_rules! partition_log_suite {
    ($fresh:expr) => {
        $crate::partition_log_suite!(@tests $fresh;
            topics_are_created_once_and_refused_clearly,
            appends_get_consecutive_offsets_and_keep_their_bytes,
            unknown_partitions_and_out_of_range_offsets_are_refused,
            reads_return_the_first_batch_whatever_its_size_then_respect_the_budget,
            offset_for_timestamp_finds_the_first_record_at_or_after,
            offset_of_max_timestamp_finds_the_first_record_with_the_largest,
            partition_size_grows_with_appends,
            delete_records_moves_the_log_start_inside_a_batch,
            a_failed_append_wakes_nobody,
            appends_of_timestamps_only_read_back_as_appends_of_records,
            compaction_keeps_the_latest_record_of_each_key,
            compaction_keeps_tombstones_until_their_horizon,
            compaction_drops_aborted_records_and_lone_markers,
            compaction_keeps_the_offsets_and_timestamps_of_kept_records,
            compaction_of_batches_appended_with_timestamps_only,
        );
    };
    (@tests $fresh:expr; $($test:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $test() {
                let fresh: $crate::testing::Fresh = ($fresh)(stringify!($test)).await;
                $crate::testing::$test(fresh.log()).await;
            }
        )*

        #[test]
        fn the_generated_tests_are_the_whole_suite() {
            let generated: &[&str] = &[$(stringify!($test)),*];
            let suite: ::std::vec::Vec<&str> =
                $crate::testing::TESTS.iter().map(|(name, _)| *name).collect();
            assert_eq!(generated, &suite[..]);
        }
    };
}

fn tp(p: u32) -> TopicPartition {
    TopicPartition::new("t", p)
}

/// Appends one batch of `n` records with timestamps `ts`, encoded as its base offset and a
/// marker byte.
async fn put(log: &dyn PartitionLog, tp: &TopicPartition, ts: &[i64], marker: u8) -> i64 {
    let records = ts
        .iter()
        .map(|t| NewRecord::new(&b"v"[..]).timestamp(*t))
        .collect();
    log.append_encoded(tp, records, marked(marker))
        .await
        .unwrap()
}

/// The encoding of [`put`]'s batches: the base offset then `marker`.
fn marked(marker: u8) -> crate::port::EncodeBatch<'static> {
    Box::new(move |base| {
        let mut b = base.to_be_bytes().to_vec();
        b.push(marker);
        Bytes::from(b)
    })
}

/// [`put`] through [`PartitionLog::append_encoded_timestamps`]: the same batch, known by
/// its timestamps only.
async fn put_timestamps(
    log: &dyn PartitionLog,
    tp: &TopicPartition,
    ts: &[i64],
    marker: u8,
) -> i64 {
    log.append_encoded_timestamps(tp, ts, marked(marker))
        .await
        .unwrap()
}

/// Topics: created once, bad names and counts refused with Kafka's codes, listed sorted, each with its own id.
pub async fn topics_are_created_once_and_refused_clearly(log: &dyn PartitionLog) {
    log.create_topic("a.b", 2).await.unwrap();
    let cases = [
        ("a.b", 3, "TOPIC_ALREADY_EXISTS", Some(36)),
        ("a_b", 1, "INVALID_TOPIC_EXCEPTION", Some(17)),
        ("c", 0, "INVALID_PARTITIONS", Some(37)),
        ("..", 1, "INVALID_TOPIC_EXCEPTION", Some(17)),
    ];
    for (name, parts, code, kafka) in cases {
        let err = log.create_topic(name, parts).await.expect_err(name);
        assert_eq!((err.code(), err.kafka_code()), (code, kafka), "{name}");
    }
    log.create_topic("0", 1).await.unwrap();
    assert_eq!(
        log.topics().await.unwrap(),
        [("0".to_string(), 1), ("a.b".to_string(), 2)]
    );
    assert_eq!(log.partition_count("a.b"), Some(2), "the topic metadata");
    assert_eq!(log.partition_count("x"), None);
    let (a, b) = (log.topic_id("a.b"), log.topic_id("0"));
    assert!(
        a.is_some() && b.is_some() && a != b,
        "each topic its own id"
    );
    assert_ne!(a, Some([0; 16]), "never Kafka's zero id");
    assert_eq!(log.topic_id("x"), None);
}

/// Appends: consecutive offsets per partition, the encoding kept as given, an empty batch refused, the append signalled.
pub async fn appends_get_consecutive_offsets_and_keep_their_bytes(log: &dyn PartitionLog) {
    log.create_topic("t", 2).await.unwrap();
    let appends = log.appends();
    assert_eq!(put(log, &tp(0), &[10, 30], 1).await, 0);
    assert!(appends.has_changed().unwrap(), "the append is signalled");
    assert_eq!(put(log, &tp(0), &[20], 2).await, 2);
    assert_eq!(put(log, &tp(1), &[5], 3).await, 0, "partitions count apart");
    assert_eq!(log.bounds(&tp(0)).await.unwrap(), (0, 3));
    let read = log.read_batches(&tp(0), 1, 1 << 20).await.unwrap();
    assert_eq!((read.log_start, read.high_watermark), (0, 3));
    assert_eq!(read.batches.len(), 2, "from the batch holding offset 1");
    let first = &read.batches[0];
    assert_eq!((first.base_offset(), first.last_offset()), (0, 1));
    assert_eq!(first.max_timestamp(), 30);
    let mut expected = 0i64.to_be_bytes().to_vec();
    expected.push(1);
    assert_eq!(first.encoded().map(|b| b.to_vec()), Some(expected));
    assert_eq!(read.batches[1].base_offset(), 2);
    let empty = log
        .append_encoded(&tp(0), Vec::new(), Box::new(|_| Bytes::from(Vec::new())))
        .await;
    assert_eq!(empty.unwrap_err().code(), "INVALID_ARGUMENT");
    assert_eq!(
        log.bounds(&tp(0)).await.unwrap(),
        (0, 3),
        "a refused append changes nothing"
    );
}

/// Unknown topics and partitions, and offsets outside `log_start..=high_watermark`, are refused.
pub async fn unknown_partitions_and_out_of_range_offsets_are_refused(log: &dyn PartitionLog) {
    log.create_topic("t", 1).await.unwrap();
    put(log, &tp(0), &[1, 2], 0).await;
    for missing in [TopicPartition::new("u", 0), tp(1)] {
        assert_eq!(
            log.bounds(&missing).await.unwrap_err().kafka_code(),
            Some(3)
        );
        assert_eq!(
            log.read_batches(&missing, 0, 10)
                .await
                .unwrap_err()
                .kafka_code(),
            Some(3)
        );
        let appended = log
            .append_encoded(
                &missing,
                vec![NewRecord::from("v")],
                Box::new(|_| Bytes::from(Vec::new())),
            )
            .await;
        assert_eq!(appended.unwrap_err().kafka_code(), Some(3));
        assert!(log.offset_for_timestamp(&missing, 0).await.is_err());
    }
    assert!(
        log.read_batches(&tp(0), 2, 10)
            .await
            .unwrap()
            .batches
            .is_empty(),
        "at the end"
    );
    for bad in [-1, 3] {
        let err = log.read_batches(&tp(0), bad, 10).await.unwrap_err();
        assert_eq!(err.code(), "OFFSET_OUT_OF_RANGE", "{bad}");
    }
}

/// Reads: whole batches in order, the first whatever its size, then within `max_bytes`.
pub async fn reads_return_the_first_batch_whatever_its_size_then_respect_the_budget(
    log: &dyn PartitionLog,
) {
    log.create_topic("t", 1).await.unwrap();
    // Enough batches to span several 1 KiB segments of the segment log.
    for i in 0..40u8 {
        put(log, &tp(0), &[i64::from(i)], i).await;
    }
    let all = log.read_batches(&tp(0), 0, usize::MAX).await.unwrap();
    assert_eq!(all.batches.len(), 40);
    for (i, b) in all.batches.iter().enumerate() {
        assert_eq!(b.base_offset(), i as i64);
        assert_eq!(b.encoded().unwrap()[8], i as u8, "batch {i}'s own bytes");
    }
    let one = log.read_batches(&tp(0), 0, 1).await.unwrap();
    assert_eq!(one.batches.len(), 1);
    let size = all.batches[0].size();
    assert_eq!(size, 9);
    let two = log.read_batches(&tp(0), 0, size + 1).await.unwrap();
    assert_eq!(two.batches.len(), 2);
    let many = log.read_batches(&tp(0), 5, 10 * size).await.unwrap();
    let offsets: Vec<i64> = many.batches.iter().map(|b| b.base_offset()).collect();
    assert_eq!(offsets, (5..15).collect::<Vec<_>>());
}

/// `offset_for_timestamp`: the first record at or after the timestamp, inside batches.
pub async fn offset_for_timestamp_finds_the_first_record_at_or_after(log: &dyn PartitionLog) {
    log.create_topic("t", 1).await.unwrap();
    put(log, &tp(0), &[5, 20], 0).await;
    put(log, &tp(0), &[10, 30], 0).await;
    let tp0 = tp(0);
    for (ts, expected) in [
        (0, Some((0, 5))),
        (10, Some((1, 20))),
        (25, Some((3, 30))),
        (31, None),
    ] {
        assert_eq!(
            log.offset_for_timestamp(&tp0, ts).await.unwrap(),
            expected,
            "{ts}"
        );
    }
}

/// `offset_of_max_timestamp`: the first record with the largest timestamp (KIP-734).
pub async fn offset_of_max_timestamp_finds_the_first_record_with_the_largest(
    log: &dyn PartitionLog,
) {
    log.create_topic("t", 2).await.unwrap();
    assert_eq!(log.offset_of_max_timestamp(&tp(0)).await.unwrap(), None);
    put(log, &tp(0), &[5, 40], 0).await;
    put(log, &tp(0), &[10, 40, 30], 0).await;
    put(log, &tp(0), &[20], 0).await;
    // Two batches reach 40; the first record with it wins, not the batch's last offset.
    assert_eq!(
        log.offset_of_max_timestamp(&tp(0)).await.unwrap(),
        Some((1, 40))
    );
    put(log, &tp(1), &[7, 9, 8], 0).await;
    assert_eq!(
        log.offset_of_max_timestamp(&tp(1)).await.unwrap(),
        Some((1, 9))
    );
    let missing = TopicPartition::new("nope", 0);
    assert!(log.offset_of_max_timestamp(&missing).await.is_err());
}

/// `partition_size`: grows with every append; an unknown partition is refused.
pub async fn partition_size_grows_with_appends(log: &dyn PartitionLog) {
    log.create_topic("t", 2).await.unwrap();
    let empty = log.partition_size(&tp(0)).await.unwrap();
    put(log, &tp(0), &[1, 2], 0).await;
    let one = log.partition_size(&tp(0)).await.unwrap();
    put(log, &tp(0), &[3], 0).await;
    let two = log.partition_size(&tp(0)).await.unwrap();
    assert!(empty < one && one < two, "{empty} < {one} < {two}");
    assert_eq!(log.partition_size(&tp(1)).await.unwrap(), empty);
    let missing = TopicPartition::new("nope", 0);
    assert!(log.partition_size(&missing).await.is_err());
}

/// `delete_records`: moves the log start (inside a batch too), never back, wakes readers; lookups skip what was deleted.
pub async fn delete_records_moves_the_log_start_inside_a_batch(log: &dyn PartitionLog) {
    log.create_topic("t", 1).await.unwrap();
    put(log, &tp(0), &[10, 50, 20], 0).await;
    put(log, &tp(0), &[30, 40], 0).await;
    let missing = TopicPartition::new("nope", 0);
    assert!(log.delete_records(&missing, 0).await.is_err());
    for bad in [-1, 6] {
        let err = log.delete_records(&tp(0), bad).await.unwrap_err();
        assert_eq!(err.code(), "OFFSET_OUT_OF_RANGE", "{bad}");
    }
    assert_eq!(log.bounds(&tp(0)).await.unwrap(), (0, 5), "nothing changed");
    let mut appends = log.appends();
    appends.borrow_and_update();
    assert_eq!(log.delete_records(&tp(0), 2).await.unwrap(), 2);
    assert!(appends.has_changed().unwrap(), "readers are woken");
    assert_eq!(
        log.delete_records(&tp(0), 1).await.unwrap(),
        2,
        "never back"
    );
    assert_eq!(log.bounds(&tp(0)).await.unwrap(), (2, 5));
    assert!(log.read_batches(&tp(0), 1, 1 << 20).await.is_err());
    // The batch holding offset 2 is still served whole; lookups skip what was deleted.
    let read = log.read_batches(&tp(0), 2, 1 << 20).await.unwrap();
    assert_eq!(read.batches[0].base_offset(), 0);
    assert_eq!(
        log.offset_for_timestamp(&tp(0), 0).await.unwrap(),
        Some((2, 20))
    );
    assert_eq!(
        log.offset_of_max_timestamp(&tp(0)).await.unwrap(),
        Some((4, 40)),
        "the deleted record with 50 no longer counts"
    );
    assert_eq!(log.delete_records(&tp(0), 5).await.unwrap(), 5);
    assert_eq!(log.offset_of_max_timestamp(&tp(0)).await.unwrap(), None);
}

/// A failed append wakes no reader; a successful one does.
pub async fn a_failed_append_wakes_nobody(log: &dyn PartitionLog) {
    log.create_topic("t", 1).await.unwrap();
    let mut appends = log.appends();
    assert!(!appends.has_changed().unwrap(), "nothing appended yet");
    let missing = TopicPartition::new("nope", 0);
    let failed = log
        .append_encoded(
            &missing,
            vec![NewRecord::from("v")],
            Box::new(|_| Bytes::from(Vec::new())),
        )
        .await;
    assert!(failed.is_err());
    assert!(
        !appends.has_changed().unwrap(),
        "a failed append wakes nobody"
    );
    put(log, &tp(0), &[1], 0).await;
    appends.changed().await.unwrap();
}

/// `append_encoded_timestamps`: the same batches appended with their timestamps only read
/// back as appended with records (offsets, bytes, lookups by timestamp, sizes, deletion),
/// with no record view; an empty batch and an unknown partition are refused.
pub async fn appends_of_timestamps_only_read_back_as_appends_of_records(log: &dyn PartitionLog) {
    log.create_topic("t", 2).await.unwrap();
    let batches: [&[i64]; 3] = [&[5, 40], &[10, 40, 30], &[20]];
    for (i, ts) in (0u8..).zip(batches) {
        let base = put(log, &tp(0), ts, i).await;
        assert_eq!(put_timestamps(log, &tp(1), ts, i).await, base);
    }
    assert_eq!(log.bounds(&tp(1)).await.unwrap(), (0, 6));
    let with = log.read_batches(&tp(0), 0, 1 << 20).await.unwrap();
    let without = log.read_batches(&tp(1), 0, 1 << 20).await.unwrap();
    let shape = |b: &crate::Batch| {
        (
            b.base_offset(),
            b.last_offset(),
            b.max_timestamp(),
            b.encoded().map(|e| e.to_vec()),
        )
    };
    assert_eq!(
        without.batches.iter().map(|b| shape(b)).collect::<Vec<_>>(),
        with.batches.iter().map(|b| shape(b)).collect::<Vec<_>>()
    );
    assert_eq!(without.batches.len(), 3);
    assert!(
        without.batches.iter().all(|b| b.records().is_empty()),
        "no record view"
    );
    for ts in [0, 5, 6, 15, 25, 30, 31, 40, 41] {
        assert_eq!(
            log.offset_for_timestamp(&tp(1), ts).await.unwrap(),
            log.offset_for_timestamp(&tp(0), ts).await.unwrap(),
            "{ts}"
        );
    }
    assert_eq!(
        log.offset_for_timestamp(&tp(1), 25).await.unwrap(),
        Some((1, 40))
    );
    assert_eq!(
        log.offset_for_timestamp(&tp(1), 35).await.unwrap(),
        Some((1, 40))
    );
    assert_eq!(
        log.offset_of_max_timestamp(&tp(1)).await.unwrap(),
        Some((1, 40))
    );
    assert_eq!(
        log.partition_size(&tp(1)).await.unwrap(),
        log.partition_size(&tp(0)).await.unwrap()
    );
    log.delete_records(&tp(1), 2).await.unwrap();
    assert_eq!(
        log.offset_for_timestamp(&tp(1), 0).await.unwrap(),
        Some((2, 10))
    );
    assert_eq!(
        log.offset_of_max_timestamp(&tp(1)).await.unwrap(),
        Some((3, 40))
    );
    let empty = log
        .append_encoded_timestamps(&tp(1), &[], Box::new(|_| Bytes::from(Vec::new())))
        .await;
    assert_eq!(empty.unwrap_err().code(), "INVALID_ARGUMENT");
    assert_eq!(log.bounds(&tp(1)).await.unwrap(), (2, 6), "nothing changed");
    let missing = log
        .append_encoded_timestamps(
            &TopicPartition::new("nope", 0),
            &[1],
            Box::new(|_| Bytes::from(Vec::new())),
        )
        .await;
    assert_eq!(missing.unwrap_err().kafka_code(), Some(3));
}

// The suite on this crate's logs: `testing::memory_log::*` and `testing::segment_log::*`.
#[cfg(test)]
mod memory_log {
    use std::sync::Arc;

    use coordinator_core::ManualClock;

    use super::Fresh;
    use crate::MemoryLog;

    crate::partition_log_suite!(|_name: &'static str| async {
        Fresh::new(Arc::new(MemoryLog::with_clock(
            Arc::new(ManualClock::new()),
        )))
    });
}

#[cfg(test)]
mod segment_log {
    use std::sync::Arc;

    use coordinator_core::ManualClock;

    use super::Fresh;
    use crate::SegmentLog;

    crate::partition_log_suite!(|_name: &'static str| async {
        let dir = tempfile::tempdir().unwrap();
        let log = SegmentLog::builder(dir.path())
            .clock(Arc::new(ManualClock::new()))
            .segment_bytes(1024)
            .open()
            .unwrap();
        Fresh::keeping(Arc::new(log), dir)
    });
}

// The segment log again, on the simulated file system the crash suites use: what the
// engine does through the seam is what it does on a disk.
#[cfg(test)]
mod segment_log_on_sim_fs {
    use std::sync::Arc;

    use coordinator_core::ManualClock;

    use super::Fresh;
    use crate::fs::sim::SimFs;
    use crate::SegmentLog;

    crate::partition_log_suite!(|_name: &'static str| async {
        let log = SegmentLog::builder("/data/log")
            .clock(Arc::new(ManualClock::new()))
            .segment_bytes(1024)
            .open_with_fs(SimFs::new())
            .unwrap();
        Fresh::new(Arc::new(log))
    });
}

/// `run_suite` runs every test.
#[cfg(test)]
#[tokio::test]
async fn run_suite_runs_every_test_on_a_fresh_log() {
    let mut names = Vec::new();
    run_suite(|name| {
        names.push(name);
        async { Fresh::new(Arc::new(crate::MemoryLog::new())) }
    })
    .await;
    let all: Vec<&str> = TESTS.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, all);
}
