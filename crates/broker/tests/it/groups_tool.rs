//! The `groups` tool against a running broker (the binary on a free loopback port): its
//! output compared with golden files, every refusal (one stderr line, non-zero exit,
//! nothing changed), and resets that a consumer then reads from.
//!
//! Golden files are in `tests/golden/`; `UPDATE_GOLDEN=1` rewrites them from the output
//! (then read the diff before committing it).

use crate::common;
use crate::tool;

use std::path::PathBuf;

use common::{decode_records, fetch_request};
use tool::*;

const TOPICS: &[&str] = &[
    "--topic", "orders:3", "--topic", "audit:1", "--topic", "legacy:1",
];

/// Compares `actual` with `tests/golden/<name>`, or rewrites the file with UPDATE_GOLDEN=1.
fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).expect("write golden");
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert_eq!(
        actual,
        expected,
        "output differs from {}:\n--- actual ---\n{actual}--- expected ---\n{expected}",
        path.display()
    );
}

/// Member ids are `<client id>-<random uuid>`: the golden files hold fixed uuids of the
/// same length, so the columns stay as wide as printed.
fn normalise(text: &str, ids: &[(&str, &str)]) -> String {
    let mut out = text.to_string();
    for (real, fixed) in ids {
        assert_eq!(real.len(), fixed.len(), "{real} / {fixed}");
        out = out.replace(real, fixed);
    }
    out
}

/// The golden group: Stable, two members, a lagging partition, one without a commit and
/// one committed partition no member owns.
///
/// | partition | records | committed | owner     |
/// | orders-0  | 5       | 2         | billing-1 |
/// | orders-1  | 3       | 3         | billing-1 |
/// | orders-2  | 0       | -         | billing-1 |
/// | audit-0   | 4       | 1         | audit-1   |
/// | legacy-0  | 2       | 2         | -         |
async fn golden_group(broker: &Broker) -> (Member, Member) {
    let mut producer = broker.client("producer").await;
    produce_n(&mut producer, "orders", 0, 5, 1_000).await;
    produce_n(&mut producer, "orders", 1, 3, 1_000).await;
    produce_n(&mut producer, "audit", 0, 4, 1_000).await;
    produce_n(&mut producer, "legacy", 0, 2, 1_000).await;
    let topics = &["orders", "audit"];
    let mut billing = Member::join_alone(
        broker,
        "billing-1",
        "golden",
        topics,
        &[("orders", &[0, 1, 2]), ("audit", &[0])],
    )
    .await;
    let audit = billing
        .admit(
            broker,
            "audit-1",
            topics,
            &[("orders", &[0, 1, 2])],
            &[("audit", &[0])],
        )
        .await;
    billing
        .commit(&[
            ("orders", 0, 2),
            ("orders", 1, 3),
            ("audit", 0, 1),
            ("legacy", 0, 2),
        ])
        .await;
    (billing, audit)
}

#[tokio::test]
async fn describe_members_and_state_match_the_golden_files() {
    let broker = Broker::start(TOPICS).await;
    let (billing, audit) = golden_group(&broker).await;
    let ids = [
        (
            billing.id.as_str(),
            "billing-1-00000000-0000-4000-8000-000000000001",
        ),
        (
            audit.id.as_str(),
            "audit-1-00000000-0000-4000-8000-000000000002",
        ),
    ];
    let describe = on(&broker, &["--describe", "--group", "golden"]).await;
    golden("describe.txt", &normalise(describe.ok(), &ids));
    assert_eq!(describe.stderr, "", "a Stable group has no note");
    // --offsets is the default view.
    let offsets = on(&broker, &["--describe", "--group", "golden", "--offsets"]).await;
    assert_eq!(offsets.ok(), describe.stdout);

    let members = on(&broker, &["--describe", "--group", "golden", "--members"]).await;
    golden("members.txt", &normalise(members.ok(), &ids));
    let verbose = on(
        &broker,
        &["--describe", "--group", "golden", "--members", "--verbose"],
    )
    .await;
    golden("members-verbose.txt", &normalise(verbose.ok(), &ids));

    let state = on(&broker, &["--describe", "--group", "golden", "--state"]).await;
    // The coordinator column is 25 wide; its port is the free one the broker got.
    let real = format!("{:<25}", format!("127.0.0.1:{}  (0)", broker.addr.port()));
    let fixed = format!("{:<25}", "127.0.0.1:9092  (0)");
    golden("state.txt", &state.ok().replace(&real, &fixed));

    assert_eq!(on(&broker, &["--list"]).await.ok(), "golden\n");
    broker.stop().await;
}

/// topic, partition, committed, log end, lag, consumer id
type Row = (
    String,
    u64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<String>,
);

#[tokio::test]
async fn json_output_is_one_object_per_line_with_the_documented_fields() {
    let broker = Broker::start(TOPICS).await;
    let (billing, audit) = golden_group(&broker).await;
    let rows = on(
        &broker,
        &["--describe", "--group", "golden", "--output", "json"],
    )
    .await
    .json();
    let got: Vec<Row> = rows
        .iter()
        .map(|r| {
            assert_eq!(r["group"], "golden");
            (
                r["topic"].as_str().unwrap().to_string(),
                r["partition"].as_u64().unwrap(),
                r["current_offset"].as_i64(),
                r["log_end_offset"].as_i64(),
                r["lag"].as_i64(),
                r["consumer_id"].as_str().map(str::to_string),
            )
        })
        .collect();
    let b = Some(billing.id.clone());
    assert_eq!(
        got,
        vec![
            ("orders".into(), 0, Some(2), Some(5), Some(3), b.clone()),
            ("orders".into(), 1, Some(3), Some(3), Some(0), b.clone()),
            ("orders".into(), 2, None, Some(0), None, b),
            (
                "audit".into(),
                0,
                Some(1),
                Some(4),
                Some(3),
                Some(audit.id.clone())
            ),
            ("legacy".into(), 0, Some(2), Some(2), Some(0), None),
        ]
    );
    assert_eq!(rows[3]["host"], "/127.0.0.1");
    assert_eq!(rows[3]["client_id"], "audit-1");
    assert!(rows[4]["client_id"].is_null() && rows[4]["host"].is_null());

    let members = on(
        &broker,
        &[
            "--describe",
            "--group",
            "golden",
            "--members",
            "--output",
            "json",
        ],
    )
    .await
    .json();
    assert_eq!(members.len(), 2);
    assert_eq!(members[0]["consumer_id"], audit.id.as_str());
    assert_eq!(members[0]["partitions"], 1);
    assert_eq!(
        members[0]["assignment"],
        serde_json::json!([{"topic": "audit", "partition": 0}])
    );
    assert!(members[0]["group_instance_id"].is_null());
    assert_eq!(members[1]["client_id"], "billing-1");

    let state = on(
        &broker,
        &[
            "--describe",
            "--group",
            "golden",
            "--state",
            "--output",
            "json",
        ],
    )
    .await
    .json();
    assert_eq!(
        state,
        vec![serde_json::json!({
            "group": "golden",
            "coordinator": {"id": 0, "host": "127.0.0.1", "port": broker.addr.port()},
            "assignment_strategy": "range",
            "state": "Stable",
            "members": 2,
        })]
    );
    let listed = on(&broker, &["--list", "--output", "json"]).await.json();
    assert_eq!(
        listed,
        vec![
            serde_json::json!({"group": "golden", "state": "Stable", "protocol_type": "consumer"})
        ]
    );
    broker.stop().await;
}

#[tokio::test]
async fn after_a_reset_to_earliest_a_member_of_the_group_reads_again_from_the_start() {
    let broker = Broker::start(&["--topic", "t:2"]).await;
    let mut producer = broker.client("producer").await;
    produce_n(&mut producer, "t", 0, 5, 1_000).await;
    let mut first = Member::join_alone(&broker, "app", "replay", &["t"], &[("t", &[0, 1])]).await;
    first.commit(&[("t", 0, 5), ("t", 1, 0)]).await;
    first.leave().await;
    let mut admin = broker.client("check").await;
    assert_eq!(state(&mut admin, "replay").await, "Empty");

    // The dry run (the default) changes nothing.
    let dry = on(
        &broker,
        &[
            "--reset-offsets",
            "--group",
            "replay",
            "--topic",
            "t",
            "--to-earliest",
        ],
    )
    .await;
    assert_eq!(
        dry.ok(),
        "\nGROUP           TOPIC           PARTITION  NEW-OFFSET\nreplay          t               0          0\nreplay          t               1          0\n"
    );
    assert_eq!(
        dry.stderr,
        "WARN: No action will be performed as the --execute option is missing.\n"
    );
    assert_eq!(
        committed(&mut admin, "replay").await,
        [("t".into(), 0, 5), ("t".into(), 1, 0)]
    );

    let done = on(
        &broker,
        &[
            "--reset-offsets",
            "--group",
            "replay",
            "--topic",
            "t:0",
            "--to-earliest",
            "--execute",
        ],
    )
    .await;
    assert_eq!(done.ok(), "\nGROUP           TOPIC           PARTITION  NEW-OFFSET\nreplay          t               0          0\n");
    assert_eq!(done.stderr, "");
    assert_eq!(
        committed(&mut admin, "replay").await,
        [("t".into(), 0, 0), ("t".into(), 1, 0)]
    );

    // A new member of the group starts from the committed offsets: all five records again.
    let mut second = Member::join_alone(&broker, "app", "replay", &["t"], &[("t", &[0, 1])]).await;
    let offsets = committed(&mut second.client, "replay").await;
    let position = offsets
        .iter()
        .find(|(t, p, _)| t == "t" && *p == 0)
        .unwrap()
        .2;
    assert_eq!(position, 0);
    let fetched = second
        .client
        .call(&fetch_request("t", 0, position), 11)
        .await;
    let records = decode_records(&fetched.responses[0].partitions[0]);
    let read: Vec<i64> = records.iter().map(|r| r.offset).collect();
    assert_eq!(read, [0, 1, 2, 3, 4]);
    assert_eq!(records[0].key.as_deref(), Some(&b"k0"[..]));
    broker.stop().await;
}

#[tokio::test]
async fn resets_shift_clamp_and_find_offsets_by_time() {
    let broker = Broker::start(&["--topic", "t:2"]).await;
    let mut c = broker.client("setup").await;
    produce_n(&mut c, "t", 0, 10, 1_000).await; // timestamps 1000..=1009
    produce_n(&mut c, "t", 1, 4, 5_000).await; // timestamps 5000..=5003
    commit_plain(&mut c, "g", &[("t", 0, 6), ("t", 1, 2)]).await;

    let shifted = on(
        &broker,
        &[
            "--reset-offsets",
            "--group",
            "g",
            "--all-topics",
            "--shift-by",
            "-3",
            "--execute",
            "--output",
            "json",
        ],
    )
    .await;
    let rows = shifted.json();
    assert_eq!(
        rows,
        vec![
            serde_json::json!({"group": "g", "topic": "t", "partition": 0, "previous_offset": 6, "new_offset": 3, "executed": true}),
            serde_json::json!({"group": "g", "topic": "t", "partition": 1, "previous_offset": 2, "new_offset": 0, "executed": true}),
        ]
    );
    assert_eq!(
        shifted.stderr,
        "WARN: New offset (-1) is lower than earliest offset for topic partition t-1. Value will be set to 0.\n"
    );
    assert_eq!(
        committed(&mut c, "g").await,
        [("t".into(), 0, 3), ("t".into(), 1, 0)]
    );

    let high = on(
        &broker,
        &[
            "--reset-offsets",
            "--group",
            "g",
            "--topic",
            "t",
            "--to-offset",
            "7",
            "--execute",
        ],
    )
    .await;
    assert!(high.stderr.contains("New offset (7) is higher than latest offset for topic partition t-1. Value will be set to 4."), "{}", high.stderr);
    assert_eq!(
        committed(&mut c, "g").await,
        [("t".into(), 0, 7), ("t".into(), 1, 4)]
    );

    let latest = on(
        &broker,
        &[
            "--reset-offsets",
            "--group",
            "g",
            "--topic",
            "t:0",
            "--to-latest",
            "--execute",
        ],
    )
    .await;
    latest.ok();
    assert_eq!(
        committed(&mut c, "g").await,
        [("t".into(), 0, 10), ("t".into(), 1, 4)]
    );

    // 1970-01-01T00:00:01.004Z is 1004 ms: offset 4 of t-0; t-1 has nothing earlier than
    // 5000, so its first record; both as Kafka answers ListOffsets by timestamp.
    let by_time = on(
        &broker,
        &[
            "--reset-offsets",
            "--group",
            "g",
            "--all-topics",
            "--to-datetime",
            "1970-01-01T00:00:01.004",
            "--execute",
        ],
    )
    .await;
    by_time.ok();
    assert_eq!(
        committed(&mut c, "g").await,
        [("t".into(), 0, 4), ("t".into(), 1, 0)]
    );
    // After every record of t-0 and t-1: Kafka falls back to the log end, and says so.
    let late = on(
        &broker,
        &[
            "--reset-offsets",
            "--group",
            "g",
            "--all-topics",
            "--to-datetime",
            "1970-01-01T00:00:05.000+00:00",
            "--execute",
        ],
    )
    .await;
    late.ok();
    assert!(
        late.stderr.contains(
            "Warn: Partition 0 from topic t is empty. Falling back to latest known offset."
        ),
        "{}",
        late.stderr
    );
    assert_eq!(
        committed(&mut c, "g").await,
        [("t".into(), 0, 10), ("t".into(), 1, 0)]
    );
    broker.stop().await;
}

#[tokio::test]
async fn refusals_are_one_line_a_non_zero_exit_and_change_nothing() {
    let broker = Broker::start(TOPICS).await;
    let (_billing, _audit) = golden_group(&broker).await;
    let mut c = broker.client("check").await;
    commit_plain(&mut c, "idle", &[("orders", 0, 1)]).await;
    let before = (
        committed(&mut c, "golden").await,
        committed(&mut c, "idle").await,
    );

    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--describe", "--group", "nope"],
            "error[GROUP_ID_NOT_FOUND]: Consumer group 'nope' does not exist.",
        ),
        (
            vec!["--describe", "--group", "golden", "--group", "nope", "--members"],
            "error[GROUP_ID_NOT_FOUND]: Consumer group 'nope' does not exist.",
        ),
        (
            vec!["--reset-offsets", "--group", "golden", "--all-topics", "--to-earliest", "--execute"],
            "error[NON_EMPTY_GROUP]: Assignments can only be reset if the group 'golden' is inactive, but the current state is Stable.",
        ),
        (
            // One active group refuses the whole command: 'idle' is not reset either.
            vec!["--reset-offsets", "--group", "idle", "--group", "golden", "--topic", "orders", "--to-latest", "--execute"],
            "error[NON_EMPTY_GROUP]: Assignments can only be reset if the group 'golden' is inactive, but the current state is Stable.",
        ),
        (
            vec!["--reset-offsets", "--group", "nope", "--all-topics", "--to-earliest", "--execute"],
            "error[GROUP_ID_NOT_FOUND]: Consumer group 'nope' does not exist.",
        ),
        (
            vec!["--reset-offsets", "--group", "idle", "--topic", "missing", "--to-earliest", "--execute"],
            "error[UNKNOWN_TOPIC_OR_PARTITION]: The topic 'missing' does not exist.",
        ),
        (
            vec!["--reset-offsets", "--group", "idle", "--topic", "orders:1,7", "--topic", "audit:3", "--to-earliest", "--execute"],
            "error[UNKNOWN_TOPIC_OR_PARTITION]: The partitions \"audit-3,orders-7\" do not exist",
        ),
        (
            // orders-0 could shift, orders-1 has no offset: neither changes.
            vec!["--reset-offsets", "--group", "idle", "--topic", "orders:0,1", "--shift-by", "1", "--execute"],
            "error[NO_COMMITTED_OFFSET]: Cannot shift offset for partition orders-1 since there is no current committed offset",
        ),
        (
            vec!["--delete", "--group", "golden"],
            "error[NON_EMPTY_GROUP]: Group 'golden' could not be deleted due to: The group is not empty (its state is Stable).",
        ),
        (
            vec!["--delete", "--group", "idle", "--group", "golden"],
            "error[NON_EMPTY_GROUP]: Group 'golden' could not be deleted due to: The group is not empty (its state is Stable).",
        ),
        (
            vec!["--delete", "--group", "nope"],
            "error[GROUP_ID_NOT_FOUND]: Consumer group 'nope' does not exist.",
        ),
        (
            vec!["--delete-offsets", "--group", "golden", "--topic", "legacy", "--topic", "orders:0"],
            "error[GROUP_SUBSCRIBED_TO_TOPIC]: Offsets of topic 'orders' cannot be deleted: the consumer group 'golden' is actively subscribed to the topic.",
        ),
        (
            vec!["--delete-offsets", "--group", "nope", "--topic", "orders"],
            "error[GROUP_ID_NOT_FOUND]: Consumer group 'nope' does not exist.",
        ),
        (
            vec!["--delete-offsets", "--group", "idle", "--topic", "missing"],
            "error[UNKNOWN_TOPIC_OR_PARTITION]: The topic 'missing' does not exist.",
        ),
    ];
    for (args, expected) in cases {
        let run = on(&broker, &args).await;
        let line = run.error_line();
        assert_eq!(line, expected, "{args:?}");
        assert_eq!(run.code, Some(1), "{args:?}: operational errors exit 1");
        assert_eq!(run.stdout, "", "{args:?}: nothing printed");
        let after = (
            committed(&mut c, "golden").await,
            committed(&mut c, "idle").await,
        );
        assert_eq!(after, before, "{args:?} changed offsets");
    }
    assert_eq!(state(&mut c, "golden").await, "Stable");

    // With --output json the one line is a JSON object.
    let run = on(
        &broker,
        &["--describe", "--group", "nope", "--output", "json"],
    )
    .await;
    let error: serde_json::Value = serde_json::from_str(run.error_line()).unwrap();
    assert_eq!(
        error,
        serde_json::json!({"error": {"code": "GROUP_ID_NOT_FOUND", "kafka_code": 69,
            "message": "Consumer group 'nope' does not exist."}})
    );

    // Offsets of a topic nobody subscribes to can go while the group is Stable.
    let run = on(
        &broker,
        &["--delete-offsets", "--group", "golden", "--topic", "legacy"],
    )
    .await;
    assert_eq!(
        run.ok(),
        "Request succeeded for deleting offsets from group golden.\n\nTOPIC           PARTITION  STATUS         \nlegacy          0          Successful     \n"
    );
    let left: Vec<String> = committed(&mut c, "golden")
        .await
        .into_iter()
        .map(|(t, p, _)| format!("{t}-{p}"))
        .collect();
    assert_eq!(left, ["audit-0", "orders-0", "orders-1"]);
    broker.stop().await;
}

#[tokio::test]
async fn an_unreachable_broker_and_bad_flags_are_one_line_each() {
    // A port nothing listens on: bound, then released.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let address = format!("127.0.0.1:{port}");
    let run = groups(&["--bootstrap-server", &address, "--list"]).await;
    let line = run.error_line();
    assert!(
        line.starts_with(&format!(
            "error[BROKER_UNREACHABLE]: cannot connect to the broker at {address}: "
        )),
        "{line}"
    );
    assert_eq!(run.code, Some(1));

    // A server that accepts and never answers: the tool gives up after --timeout. One that
    // accepts and hangs up: the tool says so.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap().to_string();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let run = groups(&[
        "--bootstrap-server",
        &silent_addr,
        "--timeout",
        "300",
        "--list",
    ])
    .await;
    assert_eq!(
        run.error_line(),
        format!("error[REQUEST_TIMED_OUT]: the broker at {silent_addr} did not answer ApiVersions within 300 ms")
    );
    assert_eq!(run.code, Some(1));
    holder.abort();
    let rude = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let rude_addr = rude.local_addr().unwrap().to_string();
    let closer = tokio::spawn(async move {
        while let Ok((stream, _)) = rude.accept().await {
            drop(stream);
        }
    });
    let run = groups(&["--bootstrap-server", &rude_addr, "--list"]).await;
    let line = run.error_line();
    assert!(
        line.starts_with(&format!(
            "error[NETWORK_EXCEPTION]: the broker at {rude_addr} failed ApiVersions: "
        )),
        "{line}"
    );
    closer.abort();

    for (args, expect) in [
        (
            vec!["--bootstrap-server", &address, "--lst"],
            "unexpected argument '--lst'",
        ),
        (vec!["--bootstrap-server", &address], "exactly one action"),
        (
            vec!["--list"],
            "exactly one of --bootstrap-server and --data-dir",
        ),
        (
            vec!["--bootstrap-server", &address, "--describe"],
            "takes one of these options: --group, --all-groups",
        ),
        (
            vec![
                "--bootstrap-server",
                &address,
                "--reset-offsets",
                "--group",
                "g",
                "--all-topics",
            ],
            "requires one of the following scenarios",
        ),
        (
            vec![
                "--bootstrap-server",
                &address,
                "--reset-offsets",
                "--group",
                "g",
                "--topic",
                "t:a",
                "--to-latest",
            ],
            "Invalid partition 'a'",
        ),
        (
            vec![
                "--bootstrap-server",
                &address,
                "--to-offset",
                "x",
                "--reset-offsets",
            ],
            "invalid value 'x'",
        ),
        (
            vec!["--bootstrap-server", &address, "--list", "--output", "yaml"],
            "invalid value 'yaml'",
        ),
    ] {
        let run = groups(&args).await;
        let line = run.error_line();
        assert!(
            line.starts_with("error[USAGE]: ") && line.contains(expect),
            "{args:?}: {line}"
        );
        assert_eq!(run.code, Some(2), "{args:?}: usage errors exit 2");
        assert_eq!(run.stdout, "");
    }
    let help = groups(&["--help"]).await;
    assert!(help.ok().contains("--reset-offsets"));
}

#[tokio::test]
async fn all_groups_and_list_filters() {
    let broker = Broker::start(&["--topic", "t:1"]).await;
    let mut c = broker.client("setup").await;
    commit_plain(&mut c, "b-idle", &[("t", 0, 0)]).await;
    let _a = Member::join_alone(&broker, "app", "a-busy", &["t"], &[("t", &[0])]).await;
    assert_eq!(on(&broker, &["--list"]).await.ok(), "a-busy\nb-idle\n");
    assert_eq!(
        on(&broker, &["--list", "--state"]).await.ok(),
        "GROUP                     STATE               \na-busy                    Stable              \nb-idle                    Empty               \n"
    );
    assert_eq!(
        on(&broker, &["--list", "--state", "empty"]).await.ok(),
        "GROUP                     STATE               \nb-idle                    Empty               \n"
    );
    let all = on(
        &broker,
        &["--describe", "--all-groups", "--state", "--output", "json"],
    )
    .await;
    let states: Vec<(String, String)> = all
        .json()
        .iter()
        .map(|v| {
            (
                v["group"].as_str().unwrap().into(),
                v["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("a-busy".into(), "Stable".into()),
            ("b-idle".into(), "Empty".into())
        ]
    );
    assert_eq!(
        all.stderr,
        "Consumer group 'b-idle' has no active members.\n"
    );
    // --all-groups with --delete: one non-empty group refuses the whole command.
    let run = on(&broker, &["--delete", "--all-groups"]).await;
    assert!(run
        .error_line()
        .starts_with("error[NON_EMPTY_GROUP]: Group 'a-busy'"));
    assert_eq!(on(&broker, &["--list"]).await.ok(), "a-busy\nb-idle\n");
    let run = on(&broker, &["--delete", "--group", "b-idle"]).await;
    assert_eq!(
        run.ok(),
        "Deletion of requested consumer groups ('b-idle') was successful.\n"
    );
    assert_eq!(on(&broker, &["--list"]).await.ok(), "a-busy\n");
    assert!(committed(&mut c, "b-idle").await.is_empty());
    broker.stop().await;
}

/// `--describe --output json` shows the metadata a client committed with each offset (the
/// broker's memory store keeps it; Kafka's tables do not show it, so the text output is as
/// Kafka's).
#[tokio::test]
async fn json_describe_shows_the_metadata_committed_with_each_offset() {
    let broker = Broker::start(TOPICS).await;
    let mut client = broker.client("meta").await;
    let mut request = commit_request("meta", "", -1, &[("orders", 0, 4), ("orders", 1, 2)]);
    request.topics[0].partitions[0].committed_metadata = Some(
        kafka_protocol::protocol::StrBytes::from_static_str("checkpoint-4"),
    );
    let r = client.call(&request, 3).await;
    assert!(r.topics.iter().all(|t| t.partitions[0].error_code == 0));
    let rows = on(
        &broker,
        &["--describe", "--group", "meta", "--output", "json"],
    )
    .await
    .json();
    let metadata: Vec<(u64, Option<&str>)> = rows
        .iter()
        .map(|r| (r["partition"].as_u64().unwrap(), r["metadata"].as_str()))
        .collect();
    assert_eq!(metadata, [(0, Some("checkpoint-4")), (1, Some(""))]);
}

/// A consumer-protocol group (KIP-848), which DescribeGroups answers Dead as Kafka 4 does, is
/// described through ConsumerGroupDescribe: `--members --verbose` shows each member's epoch
/// and current and target assignments (Kafka 4's columns), `--state` its assignor.
#[tokio::test]
async fn a_consumer_protocol_group_is_described_with_epochs_and_targets() {
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::StrBytes;
    let broker = Broker::start(TOPICS).await;
    let mut c = broker.client("kip848").await;
    let s = |v: &str| StrBytes::from_string(v.to_string());
    let join = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("modern")))
        .with_member_id(s("member-1"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("orders"))]))
        .with_topic_partitions(Some(Vec::new()));
    let r = c.call(&join, 1).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let epoch = r.member_epoch;
    let members = on(
        &broker,
        &["--describe", "--group", "modern", "--members", "--verbose"],
    )
    .await;
    let text = members.ok();
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    assert!(
        lines[0].contains("CURRENT-EPOCH")
            && lines[0].contains("CURRENT-ASSIGNMENT")
            && lines[0].contains("TARGET-EPOCH")
            && lines[0].contains("TARGET-ASSIGNMENT"),
        "{text}"
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(row[0], "modern", "{text}");
    assert_eq!(row[1], "member-1", "{text}");
    assert_eq!(row[4], "3", "#PARTITIONS: {text}");
    assert_eq!(row[5], epoch.to_string(), "{text}");
    assert_eq!(row[6], "orders(0,1,2)", "{text}");
    assert_eq!(row[8], "orders(0,1,2)", "{text}");
    let state = on(&broker, &["--describe", "--group", "modern", "--state"]).await;
    assert!(state.ok().contains("uniform"), "{}", state.ok());
    assert!(state.ok().contains("Stable"), "{}", state.ok());
    broker.stop().await;
}

#[tokio::test]
async fn a_share_group_is_listed_and_described_with_its_start_offsets_and_lag() {
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::StrBytes;
    let broker = Broker::start(TOPICS).await;
    let mut c = broker.client("share-1").await;
    let s = |v: &str| StrBytes::from_string(v.to_string());
    produce_n(&mut c, "audit", 0, 4, 1_000).await;
    let join = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("queue")))
        .with_member_id(s("member-share-1"))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![TopicName(s("audit"))]));
    let r = c.call(&join, 1).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let metadata =
        MetadataRequest::default()
            .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
            )
            .with_name(Some(TopicName(s("audit"))))]));
    let id = c.call(&metadata, 12).await.topics[0].topic_id;
    // The member's first fetch makes the share-partition, at the high watermark (4).
    let fetch = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s("queue"))))
        .with_member_id(Some(s("member-share-1")))
        .with_share_session_epoch(0)
        .with_max_wait_ms(0)
        .with_max_records(10)
        .with_max_bytes(1 << 20)
        .with_topics(vec![share_fetch_request::FetchTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![
                share_fetch_request::FetchPartition::default().with_partition_index(0),
            ])]);
    assert_eq!(c.call(&fetch, 1).await.error_code, 0);
    produce_n(&mut c, "audit", 0, 3, 2_000).await;
    let list = on(&broker, &["--list"]).await;
    assert!(list.ok().lines().any(|l| l == "queue"), "{}", list.ok());
    let described = on(&broker, &["--describe", "--group", "queue"]).await;
    let text = described.ok();
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("queue"))
        .unwrap_or_else(|| panic!("no row: {text}"))
        .split_whitespace()
        .collect();
    // GROUP TOPIC PARTITION CURRENT-OFFSET (the start offset) LOG-END-OFFSET LAG CONSUMER-ID
    assert_eq!(
        &row[..7],
        ["queue", "audit", "0", "4", "7", "3", "member-share-1"],
        "{text}"
    );
    let state = on(&broker, &["--describe", "--group", "queue", "--state"]).await;
    assert!(state.ok().contains("simple"), "{}", state.ok());
    assert!(state.ok().contains("Stable"), "{}", state.ok());
    broker.stop().await;
}
