//! The cluster facade: topic rules, member ids, durability across reopen, and the refusal of
//! every invalid call of docs/rules.md with its code.

use crate::common;

use common::{tp, TestCluster};
use consumer::AutoOffsetReset::{self, Earliest};
use coordinator_core::{GroupState, ManualClock};
use labs::{Cluster, OFFSETS_FILE};

#[test]
fn topics_follow_kafkas_rules() {
    let t = TestCluster::new();
    let long = "t".repeat(249);
    for ok in ["orders", "a.b", "A_b-9", "...", long.as_str()] {
        t.cluster
            .create_topic(ok, 1)
            .unwrap_or_else(|e| panic!("{ok:?}: {e}"));
    }
    let too_long = "t".repeat(250);
    let cases: &[(&str, u32, &str, i16)] = &[
        ("", 1, "INVALID_TOPIC_EXCEPTION", 17),
        (".", 1, "INVALID_TOPIC_EXCEPTION", 17),
        ("..", 1, "INVALID_TOPIC_EXCEPTION", 17),
        (&too_long, 1, "INVALID_TOPIC_EXCEPTION", 17),
        ("has space", 1, "INVALID_TOPIC_EXCEPTION", 17),
        ("slash/name", 1, "INVALID_TOPIC_EXCEPTION", 17),
        ("ünïcode", 1, "INVALID_TOPIC_EXCEPTION", 17),
        ("zero", 0, "INVALID_PARTITIONS", 37),
        ("orders", 3, "TOPIC_ALREADY_EXISTS", 36),
    ];
    for &(name, partitions, code, kafka) in cases {
        let err = t.cluster.create_topic(name, partitions).unwrap_err();
        assert_eq!(
            (err.code(), err.kafka_code()),
            (code, Some(kafka)),
            "{name:?}"
        );
    }
    assert_eq!(
        t.cluster.log().topics().len(),
        5,
        "refused creations change nothing"
    );
}

#[test]
fn appends_return_consecutive_offsets_per_partition() {
    let t = TestCluster::new();
    t.cluster.create_topic("orders", 2).unwrap();
    assert_eq!(t.cluster.append("orders", 0, "a").unwrap(), 0);
    assert_eq!(t.cluster.append("orders", 0, "b").unwrap(), 1);
    assert_eq!(t.cluster.append("orders", 1, "c").unwrap(), 0);
    let err = t.cluster.append("orders", 2, "d").unwrap_err();
    assert_eq!(err.code(), "UNKNOWN_TOPIC_OR_PARTITION");
    assert_eq!(
        t.cluster.append("nope", 0, "e").unwrap_err().kafka_code(),
        Some(3)
    );
}

#[test]
fn consumers_get_member_ids_in_order_and_refusals_use_none() {
    let t = TestCluster::new();
    let first = t.consumer(Earliest);
    let err = t.cluster.consumer("", Earliest).unwrap_err();
    assert_eq!(err.code(), "INVALID_ARGUMENT");
    let second = t
        .cluster
        .consumer("other-group", AutoOffsetReset::Latest)
        .unwrap();
    let third = t.consumer(Earliest);
    let ids = [first.member_id(), second.member_id(), third.member_id()];
    assert_eq!(ids, ["member-1", "member-2", "member-3"]);
    assert_eq!(second.group_id(), "other-group");
    assert_eq!(second.auto_offset_reset(), AutoOffsetReset::Latest);
}

#[tokio::test]
async fn committed_offsets_survive_reopening_the_data_directory() {
    let t = TestCluster::new();
    t.topic("orders", 2, 5);
    let mut c = t.consumer(Earliest);
    c.subscribe(&["orders"]).await.unwrap();
    c.poll(7).await.unwrap();
    let committed = c.commit().await.unwrap();
    assert!(t.dir.path().join(OFFSETS_FILE).is_file());
    drop(c);

    let t = t.reopen();
    let coordinator = t.cluster.coordinator();
    assert_eq!(
        coordinator.committed_offsets("workers").await.unwrap(),
        committed
    );
    // Topics and records live in memory: recreate them; a new consumer resumes at the commits.
    t.topic("orders", 2, 5);
    let mut resumed = t.consumer(Earliest);
    assert_eq!(
        resumed.member_id(),
        "member-1",
        "a new cluster numbers members afresh"
    );
    resumed.subscribe(&["orders"]).await.unwrap();
    let records = resumed.poll(100).await.unwrap();
    assert_eq!(records.len(), 10 - 7, "only what was not committed");
    for record in &records {
        assert!(record.offset >= committed[&record.topic_partition()]);
    }
}

#[test]
fn a_corrupt_offset_file_refuses_to_open_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(OFFSETS_FILE), "{not json").unwrap();
    let err = Cluster::open(dir.path()).unwrap_err();
    assert_eq!(err.code(), "STORAGE_ERROR");
    assert!(err.to_string().contains(OFFSETS_FILE), "{err}");
}

#[test]
fn a_data_directory_that_is_a_file_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, "").unwrap();
    let err = Cluster::open(&file).unwrap_err();
    assert_eq!(err.code(), "STORAGE_ERROR");
    assert!(err.to_string().contains("plain-file"), "{err}");
}

#[test]
fn a_zero_session_timeout_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = Cluster::builder()
        .session_timeout_ms(0)
        .open(dir.path())
        .unwrap_err();
    assert_eq!(err.code(), "INVALID_ARGUMENT");
}

#[tokio::test]
async fn expire_group_members_follows_the_builders_clock_and_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let cluster = Cluster::builder()
        .clock(clock.clone())
        .session_timeout_ms(100)
        .open(dir.path())
        .unwrap();
    cluster.create_topic("orders", 2).unwrap();
    let mut a = cluster.consumer("workers", Earliest).unwrap();
    let mut b = cluster.consumer("workers", Earliest).unwrap();
    a.subscribe(&["orders"]).await.unwrap();
    b.subscribe(&["orders"]).await.unwrap();
    clock.set(100).unwrap();
    assert!(cluster.expire_group_members().await.is_empty());
    clock.set(101).unwrap();
    let gone: Vec<_> = cluster
        .expire_group_members()
        .await
        .into_iter()
        .map(|e| (e.group, e.member))
        .collect();
    let expected = [("workers", "member-1"), ("workers", "member-2")]
        .map(|(g, m)| (g.to_string(), m.to_string()));
    assert_eq!(gone, expected);
    let group = cluster.coordinator().describe("workers").await.unwrap();
    assert_eq!(
        (group.state, group.generation.get()),
        (GroupState::Empty, 3)
    );
}

/// Every call docs/rules.md#consumer says a consumer must refuse, with the code it is refused with.
#[tokio::test]
async fn every_invalid_consumer_call_is_refused_with_its_code() {
    let t = TestCluster::new();
    t.topic("orders", 2, 3);
    let p0 = tp("orders", 0);
    let mut refusals: Vec<(&str, &str)> = Vec::new();
    let mut check = |what: &'static str, code: &'static str, result: Result<(), String>| {
        let got = result.err().unwrap_or_else(|| "accepted".to_string());
        refusals.push((what, code));
        assert_eq!(got, code, "{what}");
    };
    let code = |r: Result<(), consumer::ConsumerError>| r.map_err(|e| e.code().to_string());

    let policy = "smallest".parse::<AutoOffsetReset>().map(|_| ());
    check(
        "auto_offset_reset outside earliest/latest/error",
        "INVALID_ARGUMENT",
        code(policy),
    );
    let empty_group = t
        .cluster
        .consumer("", Earliest)
        .map(|_| ())
        .map_err(|e| e.code().to_string());
    check(
        "a consumer with an empty group id",
        "INVALID_ARGUMENT",
        empty_group,
    );

    let mut idle = t.consumer(AutoOffsetReset::Error);
    check(
        "heartbeat before joining",
        "ILLEGAL_STATE",
        code(idle.heartbeat().await),
    );
    check(
        "refresh before joining",
        "ILLEGAL_STATE",
        code(idle.refresh_assignment().await),
    );
    check(
        "commit before joining or assigning",
        "ILLEGAL_STATE",
        code(idle.commit().await.map(|_| ())),
    );
    check(
        "subscribe to an unknown topic",
        "UNKNOWN_TOPIC",
        code(idle.subscribe(&["nope"]).await),
    );
    let unknown = [tp("orders", 2)];
    check(
        "assign an unknown partition",
        "UNKNOWN_TOPIC_OR_PARTITION",
        code(idle.assign(unknown).await),
    );

    idle.assign([p0.clone()]).await.unwrap();
    check(
        "subscribe after assign",
        "ILLEGAL_STATE",
        code(idle.subscribe(&["orders"]).await),
    );
    check(
        "position of an unassigned partition",
        "NOT_ASSIGNED",
        code(idle.position(&tp("orders", 1)).map(|_| ())),
    );
    check(
        "position never initialised",
        "NO_POSITION",
        code(idle.position(&p0).map(|_| ())),
    );
    check(
        "seek an unassigned partition",
        "NOT_ASSIGNED",
        code(idle.seek(&tp("orders", 1), 0)),
    );
    check(
        "seek to a negative offset",
        "INVALID_ARGUMENT",
        code(idle.seek(&p0, -1)),
    );
    check(
        "policy error with no committed offset",
        "OFFSET_OUT_OF_RANGE",
        code(idle.poll(1).await.map(|_| ())),
    );
    idle.seek(&p0, 9).unwrap();
    check(
        "policy error past the visible end",
        "OFFSET_OUT_OF_RANGE",
        code(idle.poll(1).await.map(|_| ())),
    );

    let mut member = t.consumer(Earliest);
    member.subscribe(&["orders"]).await.unwrap();
    check(
        "assign after subscribe",
        "ILLEGAL_STATE",
        code(member.assign([p0.clone()]).await),
    );
    member.poll(10).await.unwrap();
    let mut other = t.consumer(Earliest);
    other.subscribe(&["orders"]).await.unwrap();
    check(
        "heartbeat with a stale generation",
        "ILLEGAL_GENERATION",
        code(member.heartbeat().await),
    );
    check(
        "commit with a stale generation",
        "ILLEGAL_GENERATION",
        code(member.commit().await.map(|_| ())),
    );

    member.close().await.unwrap();
    check(
        "poll after close",
        "ILLEGAL_STATE",
        code(member.poll(1).await.map(|_| ())),
    );

    t.clock.advance(common::SESSION_TIMEOUT_MS + 1);
    t.cluster.expire_group_members().await;
    check(
        "refresh after the session expired",
        "UNKNOWN_MEMBER",
        code(other.refresh_assignment().await),
    );
    assert_eq!(refusals.len(), 19, "every check above ran");
}
