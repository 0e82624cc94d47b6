//! The `groups` tool against a data directory while no broker runs: it reads and writes the
//! directory's store — the group log (`groups/`) or the JSON file (`offsets.json`), whichever
//! is there — and a broker started afterwards serves what it wrote.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "it/common/mod.rs"]
mod common;
#[path = "it/tool/mod.rs"]
mod tool;

use std::path::Path;

use coordinator_core::{CommitFence, OffsetMap, OffsetStore, TopicPartition};
use offset_store::{JsonFileStore, LogStore};
use tool::*;

/// The tests of this file run one at a time. Each opens and drops stores in this process
/// and spawns processes (the tool, a broker); a process spawned by one test starts with a
/// copy of another test's open lock file until it `exec`s, so that test's immediate reopen
/// after a drop could be refused as "in use" (the store's docs, "Ownership"). One test at a
/// time keeps what each test checks its own.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The two kinds of data directory: the group log (`groups/`, what a broker writes by
/// default) and the JSON file (`offsets.json`, an older broker's or `--offsets-store json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Log,
    Json,
}

async fn store(dir: &Path, kind: Kind) -> Box<dyn OffsetStore> {
    match kind {
        Kind::Json => Box::new(
            JsonFileStore::open_async(dir.join("offsets.json"))
                .await
                .expect("the store opens"),
        ),
        Kind::Log => {
            std::fs::create_dir_all(dir.join("groups")).unwrap();
            Box::new(
                LogStore::open_async(dir.join("groups"))
                    .await
                    .expect("the store opens"),
            )
        }
    }
}

/// Commits through the store, and closes it (releasing the directory) before the tool runs.
async fn seed(dir: &Path, kind: Kind, group: &str, offsets: &[(&str, u32, i64)]) {
    let s = store(dir, kind).await;
    let map: OffsetMap = offsets
        .iter()
        .map(|(t, p, o)| (TopicPartition::new(*t, *p), *o))
        .collect();
    s.commit(group, &map, CommitFence::none())
        .await
        .expect("seeded");
}

/// What the store holds for `group`: `(topic, partition, offset)`, sorted.
async fn read(dir: &Path, kind: Kind, group: &str) -> Vec<(String, u32, i64)> {
    store(dir, kind)
        .await
        .list(group)
        .await
        .expect("readable")
        .into_iter()
        .map(|(tp, o)| (tp.topic().to_string(), tp.partition(), o))
        .collect()
}

fn rows(v: &[(&str, u32, i64)]) -> Vec<(String, u32, i64)> {
    v.iter().map(|(t, p, o)| (t.to_string(), *p, *o)).collect()
}

#[tokio::test]
async fn a_log_data_directory_is_listed_described_reset_and_cleaned_while_nothing_runs() {
    listed_described_reset_and_cleaned(Kind::Log).await;
}

#[tokio::test]
async fn a_json_data_directory_is_listed_described_reset_and_cleaned_while_nothing_runs() {
    listed_described_reset_and_cleaned(Kind::Json).await;
}

async fn listed_described_reset_and_cleaned(kind: Kind) {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    seed(d, kind, "g1", &[("t", 0, 5), ("t", 1, 3), ("u", 0, 1)]).await;
    seed(d, kind, "g2", &[("t", 0, 0)]).await;

    assert_eq!(on_dir(d, &["--list"]).await.ok(), "g1\ng2\n");
    assert_eq!(
        on_dir(d, &["--list", "--state", "--output", "json"])
            .await
            .json(),
        vec![
            serde_json::json!({"group": "g1", "state": "Empty", "protocol_type": null}),
            serde_json::json!({"group": "g2", "state": "Empty", "protocol_type": null}),
        ]
    );
    // No log, no members: the log end and the lag are unknown.
    let describe = on_dir(d, &["--describe", "--group", "g1"]).await;
    assert_eq!(
        describe.ok(),
        "\nGROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID\n\
         g1              t               0          5               -               -               -               -               -\n\
         g1              t               1          3               -               -               -               -               -\n\
         g1              u               0          1               -               -               -               -               -\n"
    );
    assert_eq!(
        describe.stderr,
        "Consumer group 'g1' has no active members.\n"
    );
    assert_eq!(
        on_dir(d, &["--describe", "--group", "g1", "--state"]).await.ok(),
        "\nGROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE                #MEMBERS\n\
         g1              -                         -                    Empty                0\n"
    );

    // --to-offset and --shift-by need no log; only 0 bounds them.
    let run = on_dir(
        d,
        &[
            "--reset-offsets",
            "--group",
            "g1",
            "--topic",
            "t",
            "--to-offset",
            "2",
            "--execute",
        ],
    )
    .await;
    assert_eq!(
        run.ok(),
        "\nGROUP           TOPIC           PARTITION  NEW-OFFSET\ng1              t               0          2\ng1              t               1          2\n"
    );
    assert_eq!(
        read(d, kind, "g1").await,
        rows(&[("t", 0, 2), ("t", 1, 2), ("u", 0, 1)])
    );
    on_dir(
        d,
        &[
            "--reset-offsets",
            "--group",
            "g1",
            "--all-topics",
            "--shift-by",
            "10",
            "--execute",
        ],
    )
    .await
    .ok();
    assert_eq!(
        read(d, kind, "g1").await,
        rows(&[("t", 0, 12), ("t", 1, 12), ("u", 0, 11)])
    );
    let run = on_dir(
        d,
        &[
            "--reset-offsets",
            "--group",
            "g1",
            "--topic",
            "u:0",
            "--shift-by",
            "-20",
            "--execute",
        ],
    )
    .await;
    run.ok();
    assert_eq!(
        run.stderr,
        "WARN: New offset (-9) is negative for topic partition u-0. Value will be set to 0.\n"
    );
    assert_eq!(
        read(d, kind, "g1").await,
        rows(&[("t", 0, 12), ("t", 1, 12), ("u", 0, 0)])
    );
    // A dry run changes nothing.
    on_dir(
        d,
        &[
            "--reset-offsets",
            "--group",
            "g1",
            "--all-topics",
            "--to-offset",
            "0",
        ],
    )
    .await
    .ok();
    assert_eq!(
        read(d, kind, "g1").await,
        rows(&[("t", 0, 12), ("t", 1, 12), ("u", 0, 0)])
    );
    // As in Kafka, offsets can be set for a group that has none yet.
    on_dir(
        d,
        &[
            "--reset-offsets",
            "--group",
            "g3",
            "--topic",
            "t:1",
            "--to-offset",
            "7",
            "--execute",
        ],
    )
    .await
    .ok();
    assert_eq!(read(d, kind, "g3").await, rows(&[("t", 1, 7)]));

    let run = on_dir(d, &["--delete-offsets", "--group", "g1", "--topic", "u"]).await;
    assert!(run
        .ok()
        .starts_with("Request succeeded for deleting offsets from group g1.\n"));
    assert_eq!(
        read(d, kind, "g1").await,
        rows(&[("t", 0, 12), ("t", 1, 12)])
    );
    let run = on_dir(d, &["--delete", "--group", "g2"]).await;
    assert_eq!(
        run.ok(),
        "Deletion of requested consumer groups ('g2') was successful.\n"
    );
    assert!(read(d, kind, "g2").await.is_empty());
    assert_eq!(
        on_dir(d, &["--describe", "--group", "g2"])
            .await
            .error_line(),
        "error[GROUP_ID_NOT_FOUND]: Consumer group 'g2' does not exist."
    );

    // A broker started on the directory serves what the tool wrote.
    let dir_arg = d.to_str().unwrap();
    let broker = Broker::start(&["--data-dir", dir_arg, "--topic", "t:2"]).await;
    let mut c = broker.client("check").await;
    assert_eq!(
        committed(&mut c, "g1").await,
        [("t".to_string(), 0, 12), ("t".to_string(), 1, 12)]
    );
    assert_eq!(committed(&mut c, "g3").await, [("t".to_string(), 1, 7)]);
    broker.stop().await;
    // The broker keeps the log: a JSON directory was imported into one (and its file kept
    // as a backup), and the tool now reads the log.
    assert!(d.join("groups").is_dir());
    assert!(!d.join("offsets.json").exists());
    assert_eq!(
        d.join("offsets.json.imported").is_file(),
        kind == Kind::Json
    );
    assert_eq!(on_dir(d, &["--list"]).await.ok(), "g1\ng3\n");
    assert_eq!(
        read(d, Kind::Log, "g1").await,
        rows(&[("t", 0, 12), ("t", 1, 12)])
    );
}

#[tokio::test]
async fn refusals_against_a_data_directory_change_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    seed(d, Kind::Json, "g", &[("t", 0, 5)]).await;
    let before = std::fs::read(d.join("offsets.json")).unwrap();

    let missing = d.join("nowhere");
    let run = on_dir(&missing, &["--list"]).await;
    assert_eq!(
        run.error_line(),
        format!(
            "error[DATA_DIR_NOT_FOUND]: the data directory `{}` does not exist or is not a directory",
            missing.display()
        )
    );
    assert_eq!(run.code, Some(1));

    for flag in ["--to-earliest", "--to-latest"] {
        let run = on_dir(
            d,
            &[
                "--reset-offsets",
                "--group",
                "g",
                "--all-topics",
                flag,
                "--execute",
            ],
        )
        .await;
        assert_eq!(
            run.error_line(),
            format!("error[LOG_UNAVAILABLE]: {flag} needs the partition log, and a data directory holds committed offsets only: run it against the broker with --bootstrap-server")
        );
        assert_eq!(run.code, Some(2), "decided by the command line alone");
    }
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--reset-offsets", "--group", "g", "--topic", "t:0,1", "--shift-by", "1", "--execute"],
            "error[NO_COMMITTED_OFFSET]: Cannot shift offset for partition t-1 since there is no current committed offset",
        ),
        (
            vec!["--delete-offsets", "--group", "g", "--topic", "other"],
            "error[NO_COMMITTED_OFFSET]: Consumer group 'g' has no committed offsets for topic 'other' in the data directory; name the partitions as other:P,...",
        ),
        (
            vec!["--delete", "--group", "nope"],
            "error[GROUP_ID_NOT_FOUND]: Consumer group 'nope' does not exist.",
        ),
        (
            vec!["--reset-offsets", "--group", "nope", "--all-topics", "--to-offset", "1", "--execute"],
            "error[GROUP_ID_NOT_FOUND]: Consumer group 'nope' does not exist.",
        ),
    ];
    for (args, expected) in cases {
        let run = on_dir(d, &args).await;
        assert_eq!(run.error_line(), expected, "{args:?}");
        assert_eq!(run.code, Some(1), "{args:?}");
        assert_eq!(run.stdout, "", "{args:?}");
        assert_eq!(
            std::fs::read(d.join("offsets.json")).unwrap(),
            before,
            "{args:?} changed the file"
        );
    }

    // A damaged file is reported, naming it, and never read as empty.
    std::fs::write(d.join("offsets.json"), "{\"groups\":").unwrap();
    let run = on_dir(d, &["--list"]).await;
    let line = run.error_line();
    assert!(
        line.starts_with("error[STORAGE_ERROR]: cannot open the offsets of the data directory")
            && line.contains("offsets.json"),
        "{line}"
    );
    assert_eq!(run.code, Some(1));
}

#[tokio::test]
async fn refusals_against_a_log_data_directory_change_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    // Neither kind: not a broker's data directory.
    let run = on_dir(d, &["--list"]).await;
    assert_eq!(
        run.error_line(),
        format!(
            "error[DATA_DIR_NOT_FOUND]: the data directory `{}` holds no offsets: neither a group log (`groups/`) nor `offsets.json`; point --data-dir at the directory a broker was started with",
            d.display()
        )
    );
    assert_eq!(run.code, Some(1));
    assert!(!d.join("groups").exists(), "the tool creates nothing");

    seed(d, Kind::Log, "g", &[("t", 0, 5)]).await;
    seed(d, Kind::Log, "g", &[("t", 1, 6)]).await;
    // Both kinds (an import a broker has not finished): the tool opens the log as a broker
    // does, which finishes the import first.
    seed(d, Kind::Json, "h", &[("t", 0, 1)]).await;
    assert_eq!(on_dir(d, &["--list"]).await.ok(), "g\nh\n");
    assert!(!d.join("offsets.json").exists());
    assert!(d.join("offsets.json.imported").is_file());
    for (args, expected) in [
        (
            vec!["--reset-offsets", "--group", "g", "--topic", "t:0,2", "--shift-by", "1", "--execute"],
            "error[NO_COMMITTED_OFFSET]: Cannot shift offset for partition t-2 since there is no current committed offset",
        ),
        (
            vec!["--delete", "--group", "nope"],
            "error[GROUP_ID_NOT_FOUND]: Consumer group 'nope' does not exist.",
        ),
    ] {
        let run = on_dir(d, &args).await;
        assert_eq!(run.error_line(), expected, "{args:?}");
        assert_eq!(run.code, Some(1), "{args:?}");
        assert_eq!(read(d, Kind::Log, "g").await, rows(&[("t", 0, 5), ("t", 1, 6)]));
    }

    // Damage before the log's tail is reported, naming the segment, and never read as empty.
    let segment = std::fs::read_dir(d.join("groups/log/__consumer_offsets-0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "log"))
        .expect("a segment");
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[12] ^= 0xff;
    std::fs::write(&segment, &bytes).unwrap();
    let run = on_dir(d, &["--list"]).await;
    let line = run.error_line();
    assert!(
        line.starts_with("error[STORAGE_ERROR]: cannot open the offsets of the data directory")
            && line.contains(&*segment.file_name().unwrap().to_string_lossy()),
        "{line}"
    );
    assert_eq!(run.code, Some(1));
    assert_eq!(std::fs::read(&segment).unwrap(), bytes, "left as it was");
}

#[tokio::test]
async fn the_tool_refuses_a_data_directory_a_broker_runs_on() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let broker = Broker::start(&["--data-dir", d.to_str().unwrap(), "--topic", "t:1"]).await;
    let mut c = broker.client("setup").await;
    commit_plain(&mut c, "g", &[("t", 0, 3)]).await;

    for args in [
        vec!["--list"],
        vec![
            "--reset-offsets",
            "--group",
            "g",
            "--all-topics",
            "--to-offset",
            "0",
            "--execute",
        ],
    ] {
        let run = on_dir(d, &args).await;
        let line = run.error_line();
        assert!(
            line.starts_with("error[STORAGE_ERROR]: cannot open the offsets of the data directory")
                && line.contains("in use")
                && line.ends_with("use --bootstrap-server)"),
            "{args:?}: {line}"
        );
        assert_eq!(run.code, Some(1));
    }
    assert_eq!(committed(&mut c, "g").await, [("t".to_string(), 0, 3)]);
    broker.stop().await;
    // Once the broker is gone, the tool may open it.
    assert_eq!(on_dir(d, &["--list"]).await.ok(), "g\n");
}

/// A broker restarted on the same data directory serves the offsets committed before (in
/// this binary: it closes and reopens a store in this process).
#[tokio::test]
async fn committed_offsets_survive_a_restart_on_the_same_data_dir() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let with_dir = || broker::BrokerConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..common::config()
    };
    let broker = common::TestBroker::with(with_dir()).await;
    let mut c = broker.client().await;
    let r = c
        .call(&common::commit("g", "", -1, &[("t", 1, 42)]), 3)
        .await;
    assert_eq!(common::commit_codes(&r), [0]);
    broker.stop().await.unwrap();
    let broker = common::TestBroker::with(with_dir()).await;
    let mut c = broker.client().await;
    let r = c.call(&common::offset_fetch("g", &[1]), 3).await;
    assert_eq!(common::fetched(&r), [42]);
    let l = c
        .call(&kafka_protocol::messages::ListGroupsRequest::default(), 4)
        .await;
    assert!(
        l.groups.iter().any(|g| g.group_id.as_str() == "g"),
        "loaded at start"
    );
    broker.stop().await.unwrap();
}
