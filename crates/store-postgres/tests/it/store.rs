//! The PostgreSQL store's own behaviour against a real server: migrations, concurrent
//! starts, durability across stores, a server that stops and comes back, cancellation, and
//! the refusals.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use crate::common::{bounded, server, store};
use coordinator_core::{
    CommitFence, CommittedOffsets, Generation, GroupKind, GroupRecord, GroupState, MemberRecord,
    OffsetAndMetadata, OffsetMap, OffsetStore, StorageErrorKind, TopicPartition,
};
use store_postgres::migrations::MIGRATIONS;
use store_postgres::{PostgresStore, SCHEMA_VERSION};

fn tp(t: &str, p: u32) -> TopicPartition {
    TopicPartition::new(t, p)
}

fn offsets(entries: &[(&str, u32, i64)]) -> OffsetMap {
    entries.iter().map(|&(t, p, o)| (tp(t, p), o)).collect()
}

fn record(group: &str, generation: u64) -> GroupRecord {
    GroupRecord {
        group_id: group.to_string(),
        kind: GroupKind::Classic,
        generation: Generation::new(generation),
        state: GroupState::Stable,
        protocol_type: "consumer".to_string(),
        protocol: Some("range".to_string()),
        leader: Some("m-1".to_string()),
        members: vec![MemberRecord {
            member_id: "m-1".to_string(),
            group_instance_id: None,
            client_id: "c".to_string(),
            client_host: "/127.0.0.1".to_string(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocols: vec![],
            assignment: vec![1u8, 2, 3].into(),
            partitions: vec![tp("t", 0)],
            consumer: None,
        }],
    }
}

async fn count(pg: &store_postgres::harness::TempPostgres, db: &str, sql: &str) -> i64 {
    let client = bounded("connect", pg.connect(db)).await.unwrap();
    bounded("count", client.query_one(sql, &[]))
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn migrations_applied_twice_are_a_no_op() {
    let Some(pg) = server().await else { return };
    let first = store(&pg, "twice").await;
    assert_eq!(
        bounded("version", first.schema_version()).await.unwrap(),
        SCHEMA_VERSION
    );
    bounded(
        "commit",
        first.commit("g", &offsets(&[("t", 0, 7)]), CommitFence::none()),
    )
    .await
    .unwrap();
    assert_eq!(
        bounded("migrate", first.migrate()).await.unwrap(),
        Vec::<i32>::new(),
        "a second run on the same store applies nothing"
    );
    let again = bounded("connect", PostgresStore::connect(&pg.url("twice"), 2))
        .await
        .unwrap();
    assert_eq!(
        bounded("version", again.schema_version()).await.unwrap(),
        SCHEMA_VERSION
    );
    let rows = count(&pg, "twice", "SELECT count(*) FROM schema_migrations").await;
    assert_eq!(rows, i64::try_from(MIGRATIONS.len()).unwrap());
    assert_eq!(
        bounded("list", again.list("g")).await.unwrap(),
        offsets(&[("t", 0, 7)]),
        "migrating again keeps the data"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_connecting_at_once_both_succeed() {
    let Some(pg) = server().await else { return };
    let url = bounded("create", pg.create_database("race")).await.unwrap();
    let (a, b) = bounded(
        "two connects",
        futures_join(
            {
                let url = url.clone();
                async move { PostgresStore::connect(&url, 2).await }
            },
            async move { PostgresStore::connect(&url, 2).await },
        ),
    )
    .await;
    let (a, b) = (a.expect("first store"), b.expect("second store"));
    let rows = count(&pg, "race", "SELECT count(*) FROM schema_migrations").await;
    assert_eq!(
        rows,
        i64::try_from(MIGRATIONS.len()).unwrap(),
        "each migration once"
    );
    bounded(
        "commit",
        a.commit("g", &offsets(&[("t", 0, 1)]), CommitFence::none()),
    )
    .await
    .unwrap();
    assert_eq!(
        bounded("read", b.committed("g", &tp("t", 0)))
            .await
            .unwrap(),
        Some(1)
    );
}

/// Both futures, polled concurrently on the runtime's threads.
async fn futures_join<A, B>(a: A, b: B) -> (A::Output, B::Output)
where
    A: std::future::Future + Send + 'static,
    B: std::future::Future + Send + 'static,
    A::Output: Send + 'static,
    B::Output: Send + 'static,
{
    let (a, b) = (tokio::spawn(a), tokio::spawn(b));
    (a.await.unwrap(), b.await.unwrap())
}

#[tokio::test]
async fn data_survives_a_new_store() {
    let Some(pg) = server().await else { return };
    let first = store(&pg, "durable").await;
    let mut committed = CommittedOffsets::new();
    let mut o = OffsetAndMetadata::new(42)
        .with_leader_epoch(Some(3))
        .with_metadata("meta ☃");
    o.commit_timestamp_ms = 1_700_000_000_000;
    committed.insert(tp("orders", u32::MAX), o);
    committed.insert(tp("orders", 0), OffsetAndMetadata::new(i64::MAX));
    bounded(
        "commit",
        first.commit_with_metadata("g", &committed, CommitFence::none()),
    )
    .await
    .unwrap();
    bounded(
        "write group",
        first.write_group("g", Some(&record("g", 5)), CommitFence::none()),
    )
    .await
    .unwrap();
    first.close();
    drop(first);

    let second = bounded("connect", PostgresStore::connect(&pg.url("durable"), 1))
        .await
        .unwrap();
    assert_eq!(
        bounded("list", second.list_with_metadata("g"))
            .await
            .unwrap(),
        committed
    );
    assert_eq!(
        bounded("load", second.load_groups()).await.unwrap(),
        [record("g", 5)]
    );
    assert_eq!(bounded("groups", second.groups()).await.unwrap(), ["g"]);
}

#[tokio::test]
async fn a_stopped_server_fails_calls_and_the_store_recovers_after_a_restart() {
    let Some(mut pg) = server().await else { return };
    let store = store(&pg, "restart").await;
    bounded(
        "commit",
        store.commit("g", &offsets(&[("t", 0, 1)]), CommitFence::none()),
    )
    .await
    .unwrap();

    pg.stop().unwrap();
    assert!(!pg.is_running());
    let err = bounded("list while stopped", store.list("g"))
        .await
        .expect_err("a read with no server must fail");
    assert_eq!(err.kind(), StorageErrorKind::Io, "{err}");
    assert!(err.message().contains("offsets of group `g`"), "{err}");
    let err = bounded(
        "commit while stopped",
        store.commit("g", &offsets(&[("t", 0, 2)]), CommitFence::none()),
    )
    .await
    .expect_err("a commit with no server must fail");
    assert_eq!(err.kind(), StorageErrorKind::Io, "{err}");
    assert!(
        err.message().contains("commit offsets of group `g`"),
        "{err}"
    );
    let err = bounded("load while stopped", store.load_groups())
        .await
        .expect_err("a load with no server must fail");
    assert_eq!(err.kind(), StorageErrorKind::Io, "{err}");

    bounded("restart", pg.start_again()).await.unwrap();
    assert_eq!(
        bounded("list after restart", store.list("g"))
            .await
            .unwrap(),
        offsets(&[("t", 0, 1)]),
        "the pool reconnects, and the failed commit changed nothing"
    );
    bounded(
        "commit after restart",
        store.commit("g", &offsets(&[("t", 0, 3)]), CommitFence::none()),
    )
    .await
    .unwrap();
    assert_eq!(
        bounded("read", store.committed("g", &tp("t", 0)))
            .await
            .unwrap(),
        Some(3)
    );
}

#[tokio::test]
async fn connecting_to_no_server_fails_with_an_io_error() {
    let Some(pg) = server().await else { return };
    // A socket directory with no server in it.
    let url = format!(
        "host={}/absent port=5432 user=postgres dbname=x",
        pg.socket_dir().display()
    );
    let err = bounded("connect", PostgresStore::connect(&url, 1))
        .await
        .expect_err("no server");
    assert_eq!(err.kind(), StorageErrorKind::Io, "{err}");
    assert!(err.message().contains("schema migrations"), "{err}");
    assert!(
        err.message().contains("No such file or directory"),
        "the cause is named: {err}"
    );

    let err = bounded("bad url", PostgresStore::connect("postgres://[", 1))
        .await
        .expect_err("a bad url");
    assert!(err.message().contains("does not parse"), "{err}");
    let err = bounded("pool 0", PostgresStore::connect(&pg.url("postgres"), 0))
        .await
        .expect_err("pool size 0");
    assert!(err.message().contains("pool size 0"), "{err}");
}

#[tokio::test]
async fn a_dropped_commit_still_lands_whole() {
    let Some(pg) = server().await else { return };
    let store = store(&pg, "cancel").await;
    bounded(
        "commit",
        store.commit("g", &offsets(&[("t", 0, 1)]), CommitFence::none()),
    )
    .await
    .unwrap();
    // Another session holds the row lock of t-0, so the store's commit cannot finish.
    let blocker = bounded("connect", pg.connect("cancel")).await.unwrap();
    bounded(
        "lock",
        blocker.batch_execute(
            "BEGIN; SELECT * FROM offsets WHERE group_id = 'g' AND topic = 't' FOR UPDATE",
        ),
    )
    .await
    .unwrap();
    let next = offsets(&[("t", 0, 2), ("t", 1, 2)]);
    let commit = store.commit("g", &next, CommitFence::none());
    // Poll the commit until the server shows it waiting for the lock, then drop it: the
    // caller gives up on a write that has reached the database.
    let watcher = bounded("connect", pg.connect("cancel")).await.unwrap();
    let waiting = async {
        loop {
            let row = watcher
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
                    &[],
                )
                .await
                .unwrap();
            if row.get::<_, i64>(0) > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    bounded("the commit waits for the lock", async {
        tokio::select! {
            biased;
            done = commit => panic!("the commit finished while its row was locked: {done:?}"),
            () = waiting => {}
        }
    })
    .await;
    assert_eq!(
        bounded("read", store.list("g")).await.unwrap(),
        offsets(&[("t", 0, 1)]),
        "nothing of the blocked commit is visible"
    );
    bounded("unlock", blocker.batch_execute("COMMIT"))
        .await
        .unwrap();
    // The write goes on without its caller and lands whole.
    bounded("the dropped commit lands", async {
        loop {
            let seen = store.list("g").await.unwrap();
            if seen != offsets(&[("t", 0, 1)]) {
                assert_eq!(seen, offsets(&[("t", 0, 2), ("t", 1, 2)]), "landed in part");
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_write_the_database_refuses_midway_changes_nothing() {
    let Some(pg) = server().await else { return };
    let store = store(&pg, "midway").await;
    bounded(
        "commit",
        store.commit(
            "g",
            &offsets(&[("a", 0, 1), ("boom", 0, 1)]),
            CommitFence::none(),
        ),
    )
    .await
    .unwrap();
    // From now on the database refuses any row of topic `boom`, after it has written the
    // rows before it in the same statement.
    bounded(
        "trigger",
        pg.execute(
            "midway",
            "CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             IF (TG_OP = 'DELETE' AND OLD.topic = 'boom') \
                OR (TG_OP <> 'DELETE' AND NEW.topic = 'boom') THEN \
             RAISE EXCEPTION 'boom refused'; END IF; \
             IF TG_OP = 'DELETE' THEN RETURN OLD; END IF; RETURN NEW; END $$; \
             CREATE TRIGGER refuse_boom BEFORE INSERT OR UPDATE OR DELETE ON offsets \
             FOR EACH ROW EXECUTE FUNCTION refuse_boom();",
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let err = bounded(
        "refused commit",
        store.commit(
            "g",
            &offsets(&[("a", 0, 9), ("boom", 0, 9)]),
            CommitFence::none(),
        ),
    )
    .await
    .expect_err("the trigger refuses the commit");
    assert_eq!(err.kind(), StorageErrorKind::Other, "{err}");
    assert!(
        err.message().contains("(SQLSTATE P0001): boom refused"),
        "{err}"
    );
    let err = bounded(
        "refused delete",
        store.delete("g", None, CommitFence::none()),
    )
    .await
    .expect_err("the trigger refuses the delete");
    assert!(
        err.message().contains("delete offsets of group `g`"),
        "{err}"
    );
    assert_eq!(
        bounded("list", store.list("g")).await.unwrap(),
        offsets(&[("a", 0, 1), ("boom", 0, 1)]),
        "neither the commit nor the delete changed anything, not even the rows before `boom`"
    );
}

#[tokio::test]
async fn what_postgres_cannot_store_is_refused_and_nothing_is_written() {
    let Some(pg) = server().await else { return };
    let store = store(&pg, "refusals").await;
    let err = bounded(
        "nul group",
        store.commit("g\0", &offsets(&[("t", 0, 1)]), CommitFence::none()),
    )
    .await
    .expect_err("a NUL in the group id");
    assert!(err.message().contains("NUL"), "{err}");

    let mut bad = CommittedOffsets::new();
    bad.insert(tp("t", 0), OffsetAndMetadata::new(1));
    bad.insert(tp("t", 1), OffsetAndMetadata::new(1).with_metadata("a\0b"));
    let err = bounded(
        "nul metadata",
        store.commit_with_metadata("g", &bad, CommitFence::none()),
    )
    .await
    .expect_err("a NUL in metadata");
    assert!(err.message().contains("NUL"), "{err}");

    let mut late = CommittedOffsets::new();
    let mut o = OffsetAndMetadata::new(1);
    o.commit_timestamp_ms = u64::MAX;
    late.insert(tp("t", 0), o);
    let err = bounded(
        "timestamp",
        store.commit_with_metadata("g", &late, CommitFence::none()),
    )
    .await
    .expect_err("a commit time beyond i64");
    assert!(err.message().contains("commit time"), "{err}");

    let mut r = record("h", 1);
    r.members[0].client_id = "c\0".to_string();
    let err = bounded(
        "nul record",
        store.write_group("h", Some(&r), CommitFence::none()),
    )
    .await
    .expect_err("a NUL in a record");
    assert!(err.message().contains("NUL"), "{err}");
    let err = bounded(
        "mismatch",
        store.write_group("other", Some(&record("h", 1)), CommitFence::none()),
    )
    .await
    .expect_err("a record written under another id");
    assert!(
        err.message().contains("cannot be written as group `other`"),
        "{err}"
    );

    assert!(bounded("groups", store.groups()).await.unwrap().is_empty());
    assert!(bounded("load", store.load_groups())
        .await
        .unwrap()
        .is_empty());
    // Reads of what cannot be stored find nothing rather than failing.
    assert_eq!(
        bounded("read", store.committed("g\0", &tp("t", 0)))
            .await
            .unwrap(),
        None
    );
    assert!(bounded("list", store.list("g\0")).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_corrupt_record_or_a_newer_schema_is_refused_with_a_clear_error() {
    let Some(pg) = server().await else { return };
    let store = store(&pg, "corrupt").await;
    bounded(
        "insert",
        pg.execute(
            "corrupt",
            r#"INSERT INTO groups (group_id, record) VALUES ('bad', '{"v": 1, "kind": "classic"}')"#,
        ),
    )
    .await
    .unwrap();
    let err = bounded("load", store.load_groups())
        .await
        .expect_err("a record that does not decode");
    assert_eq!(err.kind(), StorageErrorKind::Corrupt, "{err}");
    assert!(err.message().contains("table groups, group `bad`"), "{err}");
    assert!(err.message().contains("field `state` is missing"), "{err}");

    bounded(
        "future",
        pg.execute(
            "corrupt",
            "INSERT INTO schema_migrations (version, name) VALUES (99, 'from the future')",
        ),
    )
    .await
    .unwrap();
    let err = bounded("connect", PostgresStore::connect(&pg.url("corrupt"), 1))
        .await
        .expect_err("a newer schema");
    assert!(
        err.message()
            .contains("version 99, newer than this build's"),
        "{err}"
    );
}

#[tokio::test]
async fn a_database_error_names_the_operation_and_its_sqlstate() {
    let Some(pg) = server().await else { return };
    let store = store(&pg, "dropped").await;
    bounded("drop", pg.execute("dropped", "DROP TABLE offsets"))
        .await
        .unwrap();
    let err = bounded(
        "commit",
        store.commit("g", &offsets(&[("t", 0, 1)]), CommitFence::none()),
    )
    .await
    .expect_err("no table");
    assert_eq!(err.kind(), StorageErrorKind::Other, "{err}");
    assert!(
        err.message()
            .contains("commit offsets of group `g` (SQLSTATE 42P01)"),
        "{err}"
    );
}
