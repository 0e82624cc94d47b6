//! `PostgresLog` against a real PostgreSQL server: the `PartitionLog` port's behaviour suite
//! (each test on a database of its own), then what the suite cannot see: notifications
//! between logs, durability across logs, failed appends, topic deletion and growth,
//! retention, a lost `LISTEN` connection and a stopped server.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;

use crate::common::{bounded, server};
use coordinator_core::{
    Bytes, ManualClock, NewRecord, StorageError, StorageErrorKind, TopicMetadata, TopicPartition,
};
use partition_log::testing::{run_suite, Fresh};
use partition_log::PartitionLog;
use store_postgres::harness::TempPostgres;
use store_postgres::PostgresLog;

fn tp(p: u32) -> TopicPartition {
    TopicPartition::new("t", p)
}

/// A log over a new database `name` of `pg`.
async fn log(pg: &TempPostgres, name: &str) -> PostgresLog {
    let url = bounded("create database", pg.create_database(name))
        .await
        .expect("create the database");
    bounded("connect", PostgresLog::connect(&url, 4))
        .await
        .expect("connect a log")
}

/// Appends one batch of records with timestamps `ts`, encoded as `bytes`.
async fn put(log: &dyn PartitionLog, tp: &TopicPartition, ts: &[i64], bytes: &[u8]) -> i64 {
    let records = ts
        .iter()
        .map(|t| NewRecord::new(&b"v"[..]).timestamp(*t))
        .collect();
    let bytes = Bytes::from(bytes);
    bounded(
        "append",
        log.append_encoded(tp, records, Box::new(move |_| bytes)),
    )
    .await
    .expect("append")
}

async fn count(pg: &TempPostgres, db: &str, sql: &str) -> i64 {
    let client = bounded("connect", pg.connect(db)).await.unwrap();
    bounded("count", client.query_one(sql, &[]))
        .await
        .unwrap()
        .get(0)
}

/// The whole suite, each test on a fresh database of one server.
async fn suite(pg: &TempPostgres, prefix: &str) {
    let mut n = 0;
    run_suite(|_name| {
        n += 1;
        let db = format!("{prefix}_{n}");
        async move { Fresh::new(Arc::new(log(pg, &db).await)) }
    })
    .await;
}

// A current-thread runtime (the default): the listener task and the tests share one thread.
#[tokio::test]
async fn postgres_log_passes_the_partition_log_suite() {
    let Some(pg) = server().await else { return };
    bounded("the suite", suite(&pg, "suite")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_log_passes_the_suite_on_a_multi_threaded_runtime() {
    let Some(pg) = server().await else { return };
    bounded("the suite", suite(&pg, "suite_mt")).await;
}

#[tokio::test]
async fn an_append_by_a_second_log_wakes_the_first_ones_readers() {
    let Some(pg) = server().await else { return };
    let first = log(&pg, "shared").await;
    bounded("create", first.create_topic("t", 1)).await.unwrap();
    let second = bounded("connect", PostgresLog::connect(&pg.url("shared"), 2))
        .await
        .unwrap();
    assert_eq!(
        second.partition_count("t"),
        Some(1),
        "a new log loads the topics"
    );
    let mut appends = first.appends();
    appends.borrow_and_update();
    assert_eq!(put(&second, &tp(0), &[1], b"x").await, 0);
    // Only the NOTIFY of the second log's commit can wake the first one's watch.
    bounded("the first log's watch", appends.changed())
        .await
        .expect("the watch is open");
    let read = bounded("read", first.read_batches(&tp(0), 0, 1 << 20))
        .await
        .unwrap();
    assert_eq!(read.high_watermark, 1, "the woken reader finds the batch");
    assert_eq!(
        read.batches[0].encoded().map(|b| b.to_vec()),
        Some(b"x".to_vec())
    );
    // And the other way round.
    let mut appends = second.appends();
    appends.borrow_and_update();
    assert_eq!(
        put(&first, &tp(0), &[2], b"y").await,
        1,
        "one sequence of offsets"
    );
    bounded("the second log's watch", appends.changed())
        .await
        .expect("the watch is open");
}

#[tokio::test]
async fn a_topic_created_elsewhere_is_in_the_metadata_after_topics() {
    let Some(pg) = server().await else { return };
    let first = log(&pg, "elsewhere").await;
    let second = bounded("connect", PostgresLog::connect(&pg.url("elsewhere"), 1))
        .await
        .unwrap();
    bounded("create", second.create_topic("u", 3))
        .await
        .unwrap();
    assert_eq!(first.partition_count("u"), None, "not seen before topics()");
    // The database's rules see it at once: the name is taken.
    let err = bounded("create", first.create_topic("u", 1))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "TOPIC_ALREADY_EXISTS");
    assert_eq!(
        bounded("topics", first.topics()).await.unwrap(),
        [("u".to_string(), 3)]
    );
    assert_eq!(
        first.partition_count("u"),
        Some(3),
        "the cache is refreshed"
    );
    assert_eq!(first.topic_id("u"), second.topic_id("u"), "one id");
    assert_eq!(first.topic_names(), ["u"]);
    bounded("delete", second.delete_topic("u")).await.unwrap();
    assert!(bounded("topics", first.topics()).await.unwrap().is_empty());
    assert_eq!(first.partition_count("u"), None, "and so is a deletion");
}

#[tokio::test]
async fn records_survive_the_log_and_a_new_one_serves_them() {
    let Some(pg) = server().await else { return };
    let (id, bytes) = {
        let first = log(&pg, "durable").await;
        bounded("create", first.create_topic("t", 2)).await.unwrap();
        put(&first, &tp(1), &[5, 7], b"first").await;
        put(&first, &tp(1), &[6], b"second").await;
        bounded("delete records", first.delete_records(&tp(1), 1))
            .await
            .unwrap();
        (first.topic_id("t").unwrap(), b"second".to_vec())
    };
    let again = bounded("connect", PostgresLog::connect(&pg.url("durable"), 2))
        .await
        .unwrap();
    assert_eq!(again.partition_count("t"), Some(2));
    assert_eq!(again.topic_names(), ["t"]);
    assert_eq!(again.topic_id("t"), Some(id), "the topic keeps its id");
    assert_eq!(
        bounded("bounds", again.bounds(&tp(1))).await.unwrap(),
        (1, 3)
    );
    let read = bounded("read", again.read_batches(&tp(1), 2, 1 << 20))
        .await
        .unwrap();
    assert_eq!(read.batches.len(), 1);
    let batch = &read.batches[0];
    assert_eq!((batch.base_offset(), batch.last_offset()), (2, 2));
    assert_eq!(batch.max_timestamp(), 6);
    assert_eq!(batch.encoded().map(|b| b.to_vec()), Some(bytes));
    assert_eq!(
        bounded("lookup", again.offset_for_timestamp(&tp(1), 6))
            .await
            .unwrap(),
        Some((1, 7)),
        "the per-record timestamps survive"
    );
    assert_eq!(
        put(&again, &tp(1), &[8], b"third").await,
        3,
        "offsets go on"
    );
}

#[tokio::test]
async fn a_failed_append_changes_nothing() {
    let Some(pg) = server().await else { return };
    let log = log(&pg, "failed").await;
    bounded("create", log.create_topic("t", 1)).await.unwrap();
    put(&log, &tp(0), &[1], b"a").await;
    let mut appends = log.appends();
    appends.borrow_and_update();

    // An unknown partition: refused before anything is written.
    let missing = bounded(
        "append",
        log.append_encoded(
            &tp(1),
            vec![NewRecord::from("v")],
            Box::new(|_| Bytes::from(&b"b"[..])),
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(missing.kafka_code(), Some(3), "{missing}");

    // A batch the database refuses after the partition was locked and the encoding built:
    // the transaction rolls back.
    pg.execute(
        "failed",
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$; \
         CREATE TRIGGER refuse BEFORE INSERT ON batches FOR EACH ROW EXECUTE FUNCTION refuse();",
    )
    .await
    .unwrap();
    let mut built = None;
    let refused = bounded(
        "append",
        log.append_encoded(
            &tp(0),
            vec![NewRecord::from("v")],
            Box::new(|base| {
                built = Some(base);
                Bytes::from(&b"c"[..])
            }),
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(
        built,
        Some(1),
        "the encoding was built from the next offset"
    );
    assert_eq!(refused.code(), "STORAGE_ERROR");
    assert!(
        refused.to_string().contains("refused by the test"),
        "{refused}"
    );
    let source = std::error::Error::source(&refused)
        .and_then(|s| s.downcast_ref::<StorageError>())
        .expect("the crate's StorageError is the source");
    assert_eq!(source.kind(), StorageErrorKind::Other, "a refusal, not I/O");

    assert!(
        !appends.has_changed().unwrap(),
        "a failed append wakes nobody"
    );
    assert_eq!(bounded("bounds", log.bounds(&tp(0))).await.unwrap(), (0, 1));
    assert_eq!(
        count(&pg, "failed", "SELECT count(*) FROM batches").await,
        1
    );
    pg.execute("failed", "DROP TRIGGER refuse ON batches")
        .await
        .unwrap();
    assert_eq!(
        put(&log, &tp(0), &[2], b"d").await,
        1,
        "no offset was used up"
    );
}

#[tokio::test]
async fn deleting_a_topic_deletes_its_rows_and_growing_one_adds_empty_partitions() {
    let Some(pg) = server().await else { return };
    let log = log(&pg, "topics").await;
    bounded("create", log.create_topic("t", 2)).await.unwrap();
    bounded("create", log.create_topic("u", 1)).await.unwrap();
    put(&log, &tp(0), &[1], b"a").await;
    put(&log, &tp(1), &[1], b"b").await;

    bounded("grow", log.create_partitions("t", 4))
        .await
        .unwrap();
    assert_eq!(log.partition_count("t"), Some(4));
    assert_eq!(bounded("bounds", log.bounds(&tp(3))).await.unwrap(), (0, 0));
    assert_eq!(bounded("bounds", log.bounds(&tp(0))).await.unwrap(), (0, 1));
    for n in [4, 3, 0, coordinator_core::MAX_PARTITIONS_PER_TOPIC + 1] {
        let err = bounded("grow", log.create_partitions("t", n))
            .await
            .unwrap_err();
        assert_eq!(err.code(), "INVALID_PARTITIONS", "{n}");
    }
    let err = bounded("grow", log.create_partitions("nope", 2))
        .await
        .unwrap_err();
    assert_eq!(err.kafka_code(), Some(3));
    assert_eq!(
        count(
            &pg,
            "topics",
            "SELECT partitions FROM topics WHERE name = 't'"
        )
        .await,
        4
    );

    let mut appends = log.appends();
    appends.borrow_and_update();
    bounded("delete", log.delete_topic("t")).await.unwrap();
    assert!(appends.has_changed().unwrap(), "waiting readers are woken");
    assert_eq!(log.partition_count("t"), None);
    assert_eq!(log.topic_id("t"), None);
    assert_eq!(
        bounded("bounds", log.bounds(&tp(0)))
            .await
            .unwrap_err()
            .kafka_code(),
        Some(3)
    );
    for table in ["partitions", "batches"] {
        let sql = format!("SELECT count(*) FROM {table} WHERE topic = 't'");
        assert_eq!(count(&pg, "topics", &sql).await, 0, "{table}");
    }
    assert_eq!(
        count(&pg, "topics", "SELECT count(*) FROM partitions").await,
        1,
        "the other topic's partition stays"
    );
    let err = bounded("delete", log.delete_topic("t")).await.unwrap_err();
    assert_eq!(err.code(), "UNKNOWN_TOPIC_OR_PARTITION");
    // The name is free again; the new topic starts empty with a new id.
    bounded("create", log.create_topic("t", 1)).await.unwrap();
    assert_eq!(bounded("bounds", log.bounds(&tp(0))).await.unwrap(), (0, 0));
}

#[tokio::test]
async fn retention_removes_whole_old_batches_and_keeps_the_partition_at_its_size() {
    let Some(pg) = server().await else { return };
    let url = bounded("create database", pg.create_database("retention"))
        .await
        .unwrap();
    let clock = ManualClock::new();
    let log = bounded(
        "connect",
        PostgresLog::connect_with(url.parse().unwrap(), 2, Arc::new(clock.clone())),
    )
    .await
    .unwrap();
    bounded("create", log.create_topic("t", 1)).await.unwrap();
    for ts in [1_000, 2_000, 3_000, 4_000] {
        put(&log, &tp(0), &[ts], b"abcd").await;
    }
    clock.advance(5_000);
    let now = i64::try_from(coordinator_core::Clock::now_ms(&clock)).unwrap();
    // Older than now - 2500 ms: the first two batches.
    let ms = now - 2_500;
    let tp0 = tp(0);
    let retain = |ms: i64, bytes: i64| bounded("retention", log.apply_retention(&tp0, ms, bytes));
    assert_eq!(retain(-1, -1).await.unwrap(), 0);
    let mut appends = log.appends();
    appends.borrow_and_update();
    assert_eq!(retain(ms, -1).await.unwrap(), 2);
    assert!(
        appends.has_changed().unwrap(),
        "a log-start move wakes readers"
    );
    assert_eq!(retain(ms, -1).await.unwrap(), 2, "once");
    assert_eq!(
        count(&pg, "retention", "SELECT count(*) FROM batches").await,
        2
    );
    // By size: one batch's size keeps the last batch only.
    assert_eq!(
        bounded("size", log.partition_size(&tp(0))).await.unwrap(),
        8
    );
    assert_eq!(retain(-1, 4).await.unwrap(), 3);
    assert_eq!(
        retain(-1, 0).await.unwrap(),
        4,
        "0: everything below the end"
    );
    assert_eq!(bounded("bounds", log.bounds(&tp(0))).await.unwrap(), (4, 4));
    assert_eq!(
        count(&pg, "retention", "SELECT count(*) FROM batches").await,
        0
    );
    assert!(retain(1, 1).await.is_ok(), "nothing left to remove");
    let missing = TopicPartition::new("nope", 0);
    assert!(bounded("retention", log.apply_retention(&missing, 1, 1))
        .await
        .is_err());
}

#[tokio::test]
async fn a_lost_listen_connection_is_reopened_and_readers_are_woken() {
    let Some(pg) = server().await else { return };
    let first = log(&pg, "relisten").await;
    bounded("create", first.create_topic("t", 1)).await.unwrap();
    let mut appends = first.appends();
    appends.borrow_and_update();
    let terminated = count(
        &pg,
        "relisten",
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = 'relisten' AND query LIKE 'LISTEN%') t",
    )
    .await;
    assert_eq!(terminated, 1, "one LISTEN connection");
    bounded("the wake after reconnecting", appends.changed())
        .await
        .expect("the watch is open");
    // It listens again: another log's append wakes it.
    let second = bounded("connect", PostgresLog::connect(&pg.url("relisten"), 1))
        .await
        .unwrap();
    bounded("wait for the LISTEN", async {
        // The reconnection's LISTEN may still be on its way: wait until it is registered.
        loop {
            let n = count(
                &pg,
                "relisten",
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = 'relisten' AND query LIKE 'LISTEN%'",
            )
            .await;
            if n == 2 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    appends.borrow_and_update();
    put(&second, &tp(0), &[1], b"x").await;
    bounded("the wake by the second log", appends.changed())
        .await
        .expect("the watch is open");
}

#[tokio::test]
async fn a_stopped_server_is_a_retriable_storage_error() {
    let Some(mut pg) = server().await else { return };
    let log = log(&pg, "stopped").await;
    bounded("create", log.create_topic("t", 1)).await.unwrap();
    put(&log, &tp(0), &[1], b"a").await;
    pg.stop().unwrap();
    let err = bounded("bounds", log.bounds(&tp(0))).await.unwrap_err();
    assert_eq!(err.code(), "STORAGE_ERROR");
    assert_eq!(err.kafka_code(), Some(56));
    let source = std::error::Error::source(&err)
        .and_then(|s| s.downcast_ref::<StorageError>())
        .expect("the crate's StorageError is the source");
    assert_eq!(source.kind(), StorageErrorKind::Io, "{err}");
    let err = bounded(
        "append",
        log.append_encoded(
            &tp(0),
            vec![NewRecord::from("v")],
            Box::new(|_| Bytes::from(&b"b"[..])),
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "STORAGE_ERROR");
    bounded("restart", pg.start_again()).await.unwrap();
    assert_eq!(
        bounded("bounds", log.bounds(&tp(0))).await.unwrap(),
        (0, 1),
        "served again, and the failed append left nothing"
    );
}

/// A log whose process stops in the middle of an append, the partition's row locked (here
/// its encoding closure blocks its single-threaded runtime, as a SIGSTOPped broker leaves its
/// session idle in the transaction), holds another log's appends to the partition up only
/// for its sessions' bound on idle transactions (`bound_idle_transactions`), not until it
/// resumes: the server ends its session and rolls its append back, which then fails,
/// retriable, having written nothing. Without the bound the other append waits for as long
/// as the first process is stopped.
#[tokio::test]
async fn a_stopped_appender_holds_the_partition_up_only_for_its_bound() {
    const LIMIT: std::time::Duration = std::time::Duration::from_millis(500);
    let Some(pg) = server().await else { return };
    let url = bounded("create database", pg.create_database("stopped"))
        .await
        .unwrap();
    let other = bounded("connect", PostgresLog::connect(&url, 2))
        .await
        .unwrap();
    bounded("create", other.create_topic("t", 1)).await.unwrap();
    let (locked, is_locked) = tokio::sync::oneshot::channel::<i64>();
    let (resume, stopped) = std::sync::mpsc::channel::<()>();
    let config =
        store_postgres::bound_idle_transactions(store_postgres::parse_url(&url).unwrap(), LIMIT);
    let first = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let log = PostgresLog::connect_config(config, 2).await?;
            log.append_encoded(
                &tp(0),
                vec![NewRecord::from("late")],
                Box::new(move |base| {
                    let _ = locked.send(base);
                    // The whole process stops here, the partition's row locked.
                    let _ = stopped.recv_timeout(std::time::Duration::from_secs(60));
                    Bytes::from(&b"late"[..])
                }),
            )
            .await
        })
    });
    let base = bounded("the first append locks the partition", is_locked)
        .await
        .unwrap();
    assert_eq!(base, 0);
    let started = std::time::Instant::now();
    let appended = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        other.append_encoded(
            &tp(0),
            vec![NewRecord::from("v")],
            Box::new(|_| Bytes::from(&b"v"[..])),
        ),
    )
    .await
    .expect("the other append waited for as long as the first process was stopped")
    .unwrap();
    assert_eq!(appended, 0, "the stopped append never landed");
    assert!(started.elapsed() >= LIMIT / 2, "{:?}", started.elapsed());
    resume.send(()).unwrap();
    let late = first.join().unwrap().unwrap_err();
    let source = std::error::Error::source(&late)
        .and_then(|s| s.downcast_ref::<StorageError>())
        .expect("the crate's StorageError is the source");
    assert_eq!(source.kind(), StorageErrorKind::Io, "retriable: {late}");
    assert_eq!(
        bounded("bounds", other.bounds(&tp(0))).await.unwrap(),
        (0, 1)
    );
}

/// [`TextRecords`](partition_log::testing::compaction::TextRecords), held at its first
/// `keys` call (inside a pass's key map, sweep 2) until the test lets it go.
#[derive(Debug)]
struct Held {
    reached: std::sync::mpsc::SyncSender<()>,
    go: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    once: std::sync::Once,
}

impl partition_log::compaction::RecordFormat for Held {
    fn kind(&self, encoded: &[u8]) -> partition_log::compaction::BatchKind {
        partition_log::testing::compaction::TextRecords.kind(encoded)
    }

    fn keys(
        &self,
        encoded: &[u8],
        base_offset: i64,
    ) -> Option<Vec<partition_log::compaction::KeyedRecord>> {
        // Off the worker (`block_in_place`): the tasks queued on it (the pool connection's)
        // move to another one meanwhile.
        self.once.call_once(|| {
            tokio::task::block_in_place(|| {
                let _ = self.reached.send(());
                let _ = self.go.lock().unwrap().recv();
            })
        });
        partition_log::testing::compaction::TextRecords.keys(encoded, base_offset)
    }

    fn retain(
        &self,
        encoded: &[u8],
        base_offset: i64,
        keep: &dyn Fn(i64) -> bool,
    ) -> Result<partition_log::compaction::RetainedBatch, String> {
        partition_log::testing::compaction::TextRecords.retain(encoded, base_offset, keep)
    }
}

/// A pass whose topic is deleted and created again under the same name while it runs writes
/// nothing to the new topic: each page's transaction checks the topic's id (and holds it),
/// and so does the cleaned offset's update. (Found in review, seen failing: the pass re-read
/// the partition by name and judged the new topic's acknowledged records at offsets 0 and 1
/// (key `k`) superseded by the old topic's `k` at offset 2, deleted both, and left the old
/// topic's cleaned offset on the new one.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_straddling_topic_recreation_keeps_the_new_topics_records() {
    use partition_log::compaction::CompactionPolicy;
    use partition_log::testing::compaction::{parse, put, row, tp};
    let Some(pg) = server().await else { return };
    let log = Arc::new(log(&pg, "recreate_compact").await);
    bounded("create", log.create_topic("c", 1)).await.unwrap();
    for v in ["v0", "v1", "v2"] {
        put(&*log, &[("k", v)], 1).await;
    }
    let (reached_tx, reached) = std::sync::mpsc::sync_channel(1);
    let (go, go_rx) = std::sync::mpsc::sync_channel(1);
    let format = Arc::new(Held {
        reached: reached_tx,
        go: std::sync::Mutex::new(go_rx),
        once: std::sync::Once::new(),
    });
    let mut policy = CompactionPolicy::at(10);
    policy.min_cleanable_dirty_ratio = 0.0;
    let pass = {
        let log = log.clone();
        tokio::spawn(async move { log.compact(&tp(), &policy, format).await })
    };
    tokio::task::spawn_blocking(move || reached.recv().unwrap())
        .await
        .unwrap();
    // The pass has mapped the old topic's keys; the topic is deleted and recreated.
    bounded("delete", log.delete_topic("c")).await.unwrap();
    bounded("create", log.create_topic("c", 1)).await.unwrap();
    put(&*log, &[("k", "new0")], 1).await;
    put(&*log, &[("k", "new1")], 1).await;
    go.send(()).unwrap();
    bounded("pass", pass).await.unwrap().unwrap();

    let read = bounded("read", log.read_batches(&tp(), 0, 1 << 20))
        .await
        .unwrap();
    let rows: Vec<_> = read
        .batches
        .iter()
        .flat_map(|b| parse(b.encoded().unwrap()))
        .collect();
    assert!(
        rows.contains(&row(1, "k", "new1")),
        "the new topic's latest record of `k` is gone: {rows:?}"
    );
}
