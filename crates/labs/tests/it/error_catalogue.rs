//! Every row of docs/errors.md, provoked through the public API: the code, Kafka's code and
//! the class the catalogue promises are the ones the crates return, and no crate returns a
//! code the catalogue does not list.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

use common::TestCluster;
use consumer::{AutoOffsetReset, ConsumerError, LogError};
use coordinator_core::{
    AssignError, Assignment, AssignmentInput, Assignor, ClassicProtocol, Coordinator, Error,
    ErrorClass, JoinGroupRequest, OffsetMap, SyncGroupRequest, TopicPartition,
};
use labs::Cluster;

const CATALOGUE: &str = include_str!("../../../../docs/errors.md");

/// (kafka code, class) per code, from the "Library errors" table.
fn library_rows() -> BTreeMap<String, (Option<i16>, String)> {
    section_rows("## Library errors")
        .into_iter()
        .map(|cells| {
            let kafka = cells[1].parse().ok();
            (cells[0].clone(), (kafka, cells[2].clone()))
        })
        .collect()
}

fn section_rows(heading: &str) -> Vec<Vec<String>> {
    let section = CATALOGUE.split(heading).nth(1).expect("section");
    let section = section.split("\n## ").next().unwrap_or_default();
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().trim_matches('`').to_string())
                .collect()
        })
        .collect()
}

/// What an error looked like when provoked.
#[derive(Debug)]
struct Seen {
    code: &'static str,
    kafka: Option<i16>,
    class: ErrorClass,
}

fn core(e: Error) -> Seen {
    Seen {
        code: e.code(),
        kafka: e.kafka_code(),
        class: e.class(),
    }
}

fn consumer(e: ConsumerError) -> Seen {
    Seen {
        code: e.code(),
        kafka: e.kafka_code(),
        class: e.class(),
    }
}

fn log(e: LogError) -> Seen {
    Seen {
        code: e.code(),
        kafka: e.kafka_code(),
        class: e.class(),
    }
}

struct Refuses;

impl Assignor for Refuses {
    fn name(&self) -> &str {
        "refuses"
    }
    fn assign(&self, _: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
        Err(AssignError::new("refused"))
    }
}

async fn provoke_all() -> Vec<Seen> {
    let t = TestCluster::new();
    t.topic("orders", 2, 5);
    let c = t.cluster.coordinator().clone();
    let mut seen = Vec::new();

    // ILLEGAL_GENERATION: a stale consumer commits.
    let mut first = t.consumer(AutoOffsetReset::Earliest);
    first.subscribe(&["orders"]).await.unwrap();
    first.poll(10).await.unwrap();
    let mut second = t.consumer(AutoOffsetReset::Earliest);
    second.subscribe(&["orders"]).await.unwrap();
    seen.push(consumer(first.commit().await.unwrap_err()));
    let generation = second.generation().unwrap();
    // UNKNOWN_MEMBER, NOT_PARTITION_OWNER
    seen.push(core(
        c.commit("workers", "ghost", generation, &OffsetMap::new())
            .await
            .unwrap_err(),
    ));
    let theirs: OffsetMap = second
        .assignment()
        .iter()
        .map(|tp| (tp.clone(), 1))
        .collect();
    seen.push(core(
        c.commit("workers", "member-1", generation, &theirs)
            .await
            .unwrap_err(),
    ));
    // REBALANCE_IN_PROGRESS: the group is Empty after everyone left.
    first.close().await.unwrap();
    second.close().await.unwrap();
    let now = c.describe("workers").await.unwrap().generation;
    seen.push(core(
        c.commit("workers", "member-2", now, &OffsetMap::new())
            .await
            .unwrap_err(),
    ));
    // GROUP_ID_NOT_FOUND, INVALID_ARGUMENT, UNKNOWN_TOPIC
    seen.push(core(c.state("nobody").await.unwrap_err()));
    seen.push(core(c.join("", "m", &["orders"]).await.unwrap_err()));
    let mut lost = t.consumer(AutoOffsetReset::Earliest);
    seen.push(consumer(lost.subscribe(&["ghost"]).await.unwrap_err()));
    // INCONSISTENT_GROUP_PROTOCOL
    let mut ranged = t
        .cluster
        .consumer_with("picky", |cfg| cfg.assignment_strategies(["range"]))
        .unwrap();
    ranged.subscribe(&["orders"]).await.unwrap();
    let mut plain = t
        .cluster
        .consumer("picky", AutoOffsetReset::Earliest)
        .unwrap();
    seen.push(consumer(plain.subscribe(&["orders"]).await.unwrap_err()));
    // NON_EMPTY_GROUP: only an Empty group can be deleted.
    seen.push(core(c.delete_group("picky").await.unwrap_err()));
    // OFFSET_METADATA_TOO_LARGE: metadata over offset.metadata.max.bytes.
    let long = coordinator_core::OffsetAndMetadata::new(1)
        .with_metadata("m".repeat(coordinator_core::DEFAULT_OFFSET_METADATA_MAX_BYTES + 1));
    let too_long: coordinator_core::CommittedOffsets =
        [(TopicPartition::new("orders", 0), long)].into();
    seen.push(core(
        c.commit_direct_with_metadata("manual", &too_long)
            .await
            .unwrap_err(),
    ));
    // The classic protocol's own codes.
    seen.extend(provoke_classic().await);
    seen.extend(provoke_consumer_protocol().await);
    // ASSIGNOR_FAILED
    let topics: BTreeMap<String, u32> = [("orders".to_string(), 1)].into();
    let refusing = Coordinator::builder(
        Arc::new(offset_store::MemoryStore::new()),
        Arc::new(topics),
        Arc::new(Refuses),
    )
    .build()
    .unwrap();
    seen.push(core(
        refusing.join("g", "m", &["orders"]).await.unwrap_err(),
    ));
    // STORAGE_ERROR: a store that fails its write; and a corrupt offsets file is refused,
    // never read as empty.
    let failing = Arc::new(offset_store::MemoryStore::new());
    let topics: BTreeMap<String, u32> = [("orders".to_string(), 1)].into();
    let over_failing = Coordinator::builder(
        failing.clone(),
        Arc::new(topics),
        Arc::new(assignor::MiniKafkaRoundRobinAssignor),
    )
    .build()
    .unwrap();
    let joined = over_failing.join("g", "m", &["orders"]).await.unwrap();
    failing.set_failing(true);
    let own: OffsetMap = joined.partitions.iter().map(|tp| (tp.clone(), 1)).collect();
    seen.push(core(
        over_failing
            .commit("g", "m", joined.generation, &own)
            .await
            .unwrap_err(),
    ));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("offsets.json"),
        b"{\"version\":1,\"groups\":",
    )
    .unwrap();
    let err = Cluster::open(dir.path()).expect_err("corrupt file refused");
    assert_eq!((err.code(), err.kafka_code()), ("STORAGE_ERROR", Some(56)));
    // ILLEGAL_STATE, UNKNOWN_TOPIC_OR_PARTITION, NOT_ASSIGNED, NO_POSITION, OFFSET_OUT_OF_RANGE
    let mut idle = t.consumer(AutoOffsetReset::Error);
    seen.push(consumer(idle.heartbeat().await.unwrap_err()));
    seen.push(consumer(
        idle.assign([TopicPartition::new("orders", 9)])
            .await
            .unwrap_err(),
    ));
    let orders0 = TopicPartition::new("orders", 0);
    seen.push(consumer(idle.position(&orders0).unwrap_err()));
    idle.assign([orders0.clone()]).await.unwrap();
    seen.push(consumer(idle.position(&orders0).unwrap_err()));
    seen.push(consumer(idle.poll(1).await.unwrap_err()));
    // INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS
    let log_ = t.cluster.log();
    seen.push(log(log_.create_topic("..", 1).unwrap_err()));
    seen.push(log(log_.create_topic("orders", 1).unwrap_err()));
    seen.push(log(log_.create_topic("empty", 0).unwrap_err()));
    seen
}

/// INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT, MEMBER_ID_REQUIRED, GROUP_MAX_SIZE_REACHED,
/// FENCED_INSTANCE_ID, GROUP_SUBSCRIBED_TO_TOPIC through the classic calls.
async fn provoke_classic() -> Vec<Seen> {
    let coordinator = |max: u32| {
        let topics: BTreeMap<String, u32> = [("orders".to_string(), 2)].into();
        Arc::new(
            Coordinator::builder(
                Arc::new(offset_store::MemoryStore::new()),
                Arc::new(topics),
                Arc::new(assignor::RangeAssignor),
            )
            .group_initial_rebalance_delay_ms(0)
            .group_max_size(max)
            .build()
            .unwrap(),
        )
    };
    let join = |member: &str, instance: Option<&str>| JoinGroupRequest {
        group_id: "classic".into(),
        member_id: member.into(),
        group_instance_id: instance.map(str::to_string),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![ClassicProtocol::new("range", vec![0u8]).with_topics(["orders"])],
        require_known_member_id: true,
        supports_skip_assignment: false,
        reason: None,
    };
    // A static member alone in a Stable group of `c`.
    let stable_static = |c: Arc<Coordinator>| async move {
        let first = {
            let c = c.clone();
            let r = join("", Some("instance"));
            tokio::spawn(async move { c.classic().join(r).await })
        };
        while c.classic().describe("classic").await.map_or(true, |d| {
            d.state != coordinator_core::GroupState::PreparingRebalance
        }) {
            tokio::task::yield_now().await;
        }
        c.handle_timeout().await;
        let first = first.await.unwrap().unwrap();
        let sync = SyncGroupRequest {
            group_id: "classic".into(),
            generation: Some(first.generation),
            member_id: first.member_id.clone(),
            group_instance_id: Some("instance".into()),
            protocol_type: None,
            protocol_name: None,
            assignments: Vec::new(),
        };
        c.classic().sync(sync.clone()).await.unwrap();
        sync
    };
    let mut seen = Vec::new();
    let c = coordinator(u32::MAX);
    seen.push(core(
        c.classic()
            .join(join("", None).tap(|r| r.group_id.clear()))
            .await
            .unwrap_err(),
    ));
    seen.push(core(
        c.classic()
            .join(join("", None).tap(|r| r.session_timeout_ms = 1))
            .await
            .unwrap_err(),
    ));
    seen.push(core(c.classic().join(join("", None)).await.unwrap_err()));
    let old = stable_static(c.clone()).await;
    // The instance restarts: its old member id is fenced.
    c.classic().join(join("", Some("instance"))).await.unwrap();
    seen.push(core(c.classic().sync(old).await.unwrap_err()));
    let orders0 = [TopicPartition::new("orders", 0)];
    let deleted = c.offsets().delete("classic", &orders0).await.unwrap();
    seen.push(core(deleted.into_iter().next().unwrap().1.unwrap_err()));
    let full = coordinator(1);
    stable_static(full.clone()).await;
    seen.push(core(full.classic().join(join("", None)).await.unwrap_err()));
    seen
}

// ---- Kafka's consumer group protocol (KIP-848): its rows, self-contained ----

/// FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, STALE_MEMBER_EPOCH,
/// INVALID_REQUEST, UNSUPPORTED_VERSION, INVALID_REGULAR_EXPRESSION (and GROUP_MAX_SIZE_REACHED, GROUP_ID_NOT_FOUND
/// again) through `coordinator.consumer()` and `coordinator.offsets()`.
async fn provoke_consumer_protocol() -> Vec<Seen> {
    use coordinator_core::{
        named, CommitAuthority, ConsumerGroupHeartbeatRequest as Req, Generation,
        OffsetAndMetadata, OffsetCommitRequest,
    };
    let topics: BTreeMap<String, u32> = [("orders".to_string(), 2)].into();
    let c = Coordinator::builder(
        Arc::new(offset_store::MemoryStore::new()),
        Arc::new(topics),
        Arc::new(assignor::RangeAssignor),
    )
    .consumer_assignor(named("uniform", Arc::new(assignor::StickyAssignor)))
    .consumer_assignor(named("range", Arc::new(assignor::RangeAssignor)))
    .consumer_max_size(2)
    .build()
    .unwrap();
    let hb = |r: Req| {
        let c = &c;
        async move { c.consumer().heartbeat(&r).await }
    };
    let mut seen = Vec::new();
    let joined = hb(Req::join("kip848", "m1", ["orders"]).with_instance_id("i"))
        .await
        .unwrap();
    seen.push(core(
        hb(Req::heartbeat("kip848", "m1", joined.member_epoch + 1).with_instance_id("i"))
            .await
            .unwrap_err(),
    ));
    seen.push(core(
        hb(Req::join("kip848", "m2", ["orders"]).with_instance_id("i"))
            .await
            .unwrap_err(),
    ));
    seen.push(core(
        hb(Req::join("kip848", "m2", ["orders"]).with_assignor("nope"))
            .await
            .unwrap_err(),
    ));
    seen.push(core(
        hb(Req::heartbeat("kip848", "m1", -3)).await.unwrap_err(),
    ));
    seen.push(core(
        hb(Req::join("kip848", "m2", ["orders"]).with_regex("orders("))
            .await
            .unwrap_err(),
    ));
    seen.push(core(
        hb(Req::heartbeat("absent", "m1", 1)).await.unwrap_err(),
    ));
    hb(Req::join("kip848", "m2", ["orders"])).await.unwrap();
    seen.push(core(
        hb(Req::join("kip848", "m3", ["orders"])).await.unwrap_err(),
    ));
    let commit = |authority| OffsetCommitRequest {
        group_id: "kip848".into(),
        authority,
        offsets: [(TopicPartition::new("orders", 0), OffsetAndMetadata::new(1))].into(),
    };
    seen.push(core(
        c.offsets()
            .commit(&commit(CommitAuthority::MemberEpoch {
                member_id: "m1".into(),
                member_epoch: joined.member_epoch - 1,
            }))
            .await
            .unwrap_err(),
    ));
    seen.push(core(
        c.offsets()
            .commit(&commit(CommitAuthority::generation(
                Some(Generation::new(1)),
                "m1",
                None,
            )))
            .await
            .unwrap_err(),
    ));
    seen
}
// ---- end of the consumer group protocol's rows ----

/// `value.tap(|v| …)`: a changed copy, for building requests.
trait Tap: Sized {
    fn tap(mut self, f: impl FnOnce(&mut Self)) -> Self {
        f(&mut self);
        self
    }
}

impl<T> Tap for T {}

#[tokio::test]
async fn every_library_error_in_the_catalogue_is_what_the_crates_return() {
    let rows = library_rows();
    assert!(rows.len() >= 25, "table not parsed: {rows:?}");
    let seen = provoke_all().await;
    let mut covered = BTreeSet::new();
    for s in &seen {
        let (kafka, class) = rows
            .get(s.code)
            .unwrap_or_else(|| panic!("{} is returned but not in docs/errors.md", s.code));
        assert_eq!(&s.kafka, kafka, "Kafka code of {}", s.code);
        assert_eq!(&format!("{:?}", s.class), class, "class of {}", s.code);
        covered.insert(s.code.to_string());
    }
    let listed: BTreeSet<String> = rows.keys().cloned().collect();
    assert_eq!(covered, listed, "every catalogue row is provoked");
    // And no crate has a code the catalogue misses.
    for code in Error::CODES
        .iter()
        .chain(ConsumerError::CODES)
        .chain(LogError::CODES)
    {
        assert!(
            rows.contains_key(*code),
            "{code} is missing from docs/errors.md"
        );
    }
}

fn assign_tool(args: &[&str], stdin: Stdio, input: &[u8], stdout: Stdio) -> String {
    let _spawning = common::spawning();
    let mut child = Command::new(env!("CARGO_BIN_EXE_assign"))
        .args(args)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(mut pipe) = child.stdin.take() {
        pipe.write_all(input).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    err.trim_start_matches("error[")
        .split(']')
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn every_assign_tool_error_in_the_catalogue_is_provoked() {
    let listed: BTreeSet<String> = section_rows("## The `assign` tool")
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    let valid = br#"{"topics":{"t":1},"members":{"a":{"topics":["t"]}}}"#;
    let mut seen = BTreeSet::new();
    seen.insert(assign_tool(
        &["--bogus"],
        Stdio::piped(),
        b"",
        Stdio::null(),
    ));
    let dir = std::fs::File::open(".").unwrap(); // reading a directory fails
    seen.insert(assign_tool(&[], Stdio::from(dir), b"", Stdio::null()));
    seen.insert(assign_tool(&[], Stdio::piped(), b"{", Stdio::null()));
    seen.insert(assign_tool(
        &[],
        Stdio::piped(),
        br#"{"strategy":"nope","topics":{},"members":{}}"#,
        Stdio::null(),
    ));
    seen.insert(assign_tool(
        &[],
        Stdio::piped(),
        br#"{"topics":{},"members":{"a":{"topics":["t"]}}}"#,
        Stdio::null(),
    ));
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    seen.insert(assign_tool(&[], Stdio::piped(), valid, Stdio::from(full)));
    assert_eq!(seen, listed);
}

#[test]
fn a_lab_that_cannot_make_its_directory_reports_io_error() {
    let _spawning = common::spawning();
    let out = Command::new(env!("CARGO_BIN_EXE_rebalance"))
        .env("TMPDIR", "/nonexistent/catalogue-test")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("rebalance lab failed [IO_ERROR]:"), "{err}");
    let listed: Vec<String> = section_rows("## The lab binaries")
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert!(listed.contains(&"IO_ERROR".to_string()));
}
