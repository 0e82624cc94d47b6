//! Faults on demand and the record of requests (issue 44): through the library's
//! `broker::testing::TestBroker`, the wire, the control port and the binary.

use std::net::SocketAddr;

use crate::common;

use broker::faults::Outcome;
use broker::testing::TestBroker;
use broker::BrokerConfig;
use bytes::{BufMut, Bytes, BytesMut};
use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::Compression;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const REBALANCE_IN_PROGRESS: i16 = 27;
const NOT_COORDINATOR: i16 = 16;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

async fn start(config: BrokerConfig) -> TestBroker {
    bounded("start", TestBroker::with_config(config))
        .await
        .expect("the broker starts")
}

async fn client(broker: &TestBroker, client_id: &'static str) -> Client {
    let mut c = Client::connect(broker.addr()).await;
    c.client_id = client_id;
    c
}

fn join_request(group: &str, member: &str) -> JoinGroupRequest {
    let mut subscription = BytesMut::new();
    subscription.put_i16(0);
    ConsumerProtocolSubscription::default()
        .with_topics(vec![s("t")])
        .encode(&mut subscription, 0)
        .unwrap();
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(60_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(s("range"))
        .with_metadata(subscription.freeze())])
}

/// The only member of `group`, joined and synced: (member id, generation).
async fn member_of(c: &mut Client, group: &str) -> (StrBytes, i32) {
    member_with_session(c, group, 10_000).await
}

/// The only member of `group` with a session of `session_ms`, joined and synced.
async fn member_with_session(c: &mut Client, group: &str, session_ms: i32) -> (StrBytes, i32) {
    let join = |member: &str| join_request(group, member).with_session_timeout_ms(session_ms);
    let first = c.call(&join(""), 5).await;
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    let joined = c.call(&join(&first.member_id), 5).await;
    assert_eq!(joined.error_code, 0);
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone())
        .with_assignments(vec![
            sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(joined.member_id.clone())
                .with_assignment(Bytes::new()),
        ]);
    assert_eq!(c.call(&sync, 3).await.error_code, 0);
    (joined.member_id, joined.generation_id)
}

fn heartbeat(group: &str, member: &StrBytes, generation: i32) -> HeartbeatRequest {
    HeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(member.clone())
        .with_generation_id(generation)
}

#[tokio::test]
async fn a_heartbeat_fails_twice_for_one_client_only_then_succeeds() {
    let broker = start(TestBroker::test_config()).await;
    let mut a = client(&broker, "a").await;
    let mut b = client(&broker, "b").await;
    let (ma, ga) = member_of(&mut a, "ga").await;
    let (mb, gb) = member_of(&mut b, "gb").await;
    broker
        .faults()
        .fail(ApiKey::Heartbeat, REBALANCE_IN_PROGRESS, 2, Some("a"))
        .unwrap();
    let beat_b = b.call(&heartbeat("gb", &mb, gb), 4).await;
    assert_eq!(beat_b.error_code, 0, "client b is not affected");
    for _ in 0..2 {
        let beat_a = a.call(&heartbeat("ga", &ma, ga), 4).await;
        assert_eq!(beat_a.error_code, REBALANCE_IN_PROGRESS);
    }
    assert_eq!(a.call(&heartbeat("ga", &ma, ga), 4).await.error_code, 0);
    assert_eq!(b.call(&heartbeat("gb", &mb, gb), 4).await.error_code, 0);
    // The failed heartbeats were not handled: a's group is still stable at its generation
    // (an older Heartbeat version answers the same).
    assert_eq!(a.call(&heartbeat("ga", &ma, ga), 0).await.error_code, 0);
    assert_eq!(broker.faults().rule_count(), 0, "the rule is used up");
}

#[tokio::test]
async fn a_failed_offset_commit_commits_nothing() {
    let broker = start(common::config()).await;
    let mut c = client(&broker, "c").await;
    let r = c
        .call(&commit("g", "", -1, &[("t", 0, 5), ("t", 1, 6)]), 8)
        .await;
    assert_eq!(commit_codes(&r), [0, 0]);
    broker
        .faults()
        .fail(ApiKey::OffsetCommit, NOT_COORDINATOR, 1, None)
        .unwrap();
    let r = c
        .call(&commit("g", "", -1, &[("t", 0, 9), ("t", 1, 9)]), 8)
        .await;
    assert_eq!(
        commit_codes(&r),
        [NOT_COORDINATOR, NOT_COORDINATOR],
        "per partition"
    );
    assert_eq!(r.topics[0].name.as_str(), "t");
    // OffsetFetch: the old offsets.
    let r = c.call(&offset_fetch("g", &[0, 1]), 7).await;
    assert_eq!((r.error_code, fetched(&r)), (0, vec![5, 6]));
    // The rule is used up: the next commit lands.
    let r = c.call(&commit("g", "", -1, &[("t", 0, 9)]), 8).await;
    assert_eq!(commit_codes(&r), [0]);
    // OffsetFetch failed per group (v8+) and at the top level (v2-7).
    broker
        .faults()
        .fail(ApiKey::OffsetFetch, NOT_COORDINATOR, 2, None)
        .unwrap();
    assert_eq!(
        c.call(&offset_fetch("g", &[0]), 7).await.error_code,
        NOT_COORDINATOR
    );
    let batched = OffsetFetchRequest::default().with_groups(vec![
        offset_fetch_request::OffsetFetchRequestGroup::default().with_group_id(GroupId(s("g"))),
    ]);
    let r = c.call(&batched, 8).await;
    assert_eq!(r.groups[0].error_code, NOT_COORDINATOR);
    assert_eq!(r.groups[0].group_id.as_str(), "g");
}

#[tokio::test]
async fn a_failed_produce_appends_nothing() {
    let broker = start(common::config()).await;
    let mut c = client(&broker, "p").await;
    let one = batch(&[record(0, 1)], Compression::None);
    assert_eq!(produce(&mut c, "t", 0, one.clone(), 9).await, (0, 0));
    broker
        .faults()
        .fail(ApiKey::Produce, NOT_LEADER_OR_FOLLOWER, 1, None)
        .unwrap();
    let (code, _) = produce(&mut c, "t", 0, one.clone(), 9).await;
    assert_eq!(code, NOT_LEADER_OR_FOLLOWER);
    let r = c.call(&fetch_request("t", 0, 0), 12).await;
    let p = &r.responses[0].partitions[0];
    assert_eq!(
        (p.error_code, p.high_watermark),
        (0, 1),
        "one record, not two"
    );
    assert_eq!(decode_records(p).len(), 1);
    // The rule is used up; and a Fetch fault is per partition (and top-level from v7).
    assert_eq!(produce(&mut c, "t", 0, one, 9).await, (0, 1));
    broker
        .faults()
        .fail(ApiKey::Fetch, NOT_LEADER_OR_FOLLOWER, 1, None)
        .unwrap();
    let r = c.call(&fetch_request("t", 0, 0), 12).await;
    assert_eq!(r.error_code, NOT_LEADER_OR_FOLLOWER);
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        NOT_LEADER_OR_FOLLOWER
    );
    let records = &r.responses[0].partitions[0].records;
    assert!(records.as_ref().is_none_or(Bytes::is_empty), "no records");
}

#[tokio::test]
async fn latency_delays_one_clients_answers_behind_a_later_request() {
    let broker = start(TestBroker::test_config()).await;
    broker
        .faults()
        .latency(ApiKey::ApiVersions, 1_000, Some("slow"))
        .unwrap();
    let mut slow = client(&broker, "slow").await;
    let mut fast = client(&broker, "fast").await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    // The slow client's request is written first.
    let correlation = slow.send(&ApiVersionsRequest::default(), 3).await;
    let slow_tx = tx.clone();
    let slow_task = tokio::spawn(async move {
        let r = slow.receive::<ApiVersionsRequest>(correlation, 3).await;
        slow_tx.send(("slow", r.error_code)).unwrap();
    });
    let fast_task = tokio::spawn(async move {
        let r = fast.call(&ApiVersionsRequest::default(), 3).await;
        tx.send(("fast", r.error_code)).unwrap();
    });
    let mut order = Vec::new();
    for _ in 0..2 {
        order.push(bounded("an answer", rx.recv()).await.unwrap());
    }
    assert_eq!(order, [("fast", 0), ("slow", 0)]);
    slow_task.await.unwrap();
    fast_task.await.unwrap();
    // The delayed request was handled, once.
    let seen = broker.faults().requests();
    assert_eq!(
        seen.iter().filter(|r| r.client_id == "slow").count(),
        1,
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_drop_closes_that_connection_only() {
    let broker = start(TestBroker::test_config()).await;
    let mut other = client(&broker, "x").await;
    let mut victim = client(&broker, "x").await;
    assert_eq!(
        other
            .call(&ApiVersionsRequest::default(), 3)
            .await
            .error_code,
        0
    );
    broker
        .faults()
        .drop_connection(ApiKey::Metadata, 1, Some("x"))
        .unwrap();
    let correlation = victim.send(&MetadataRequest::default(), 12).await;
    assert!(victim
        .receive_or_closed::<MetadataRequest>(correlation, 12)
        .await
        .is_none());
    // The other connection of the same client is untouched, and the rule is used up.
    assert_eq!(
        other
            .call(&ApiVersionsRequest::default(), 3)
            .await
            .error_code,
        0
    );
    let r = other.call(&MetadataRequest::default(), 12).await;
    assert_eq!(r.brokers.len(), 1);
    let seen = broker.faults().requests();
    let dropped: Vec<_> = seen
        .iter()
        .filter(|r| r.outcome == Outcome::Dropped)
        .collect();
    assert_eq!(dropped.len(), 1);
    assert_eq!(
        (dropped[0].api, dropped[0].error_code),
        (ApiKey::Metadata, None)
    );
}

#[tokio::test]
async fn the_record_lists_requests_in_order_with_codes_and_is_bounded() {
    let config = BrokerConfig {
        requests_recorded: 4,
        ..common::config()
    };
    let broker = start(config).await;
    let faults = broker.faults();
    faults
        .fail(ApiKey::Heartbeat, REBALANCE_IN_PROGRESS, 1, None)
        .unwrap();
    let mut c = client(&broker, "rec").await;
    let mut d = client(&broker, "other").await;
    assert_eq!(
        c.call(&ApiVersionsRequest::default(), 3).await.error_code,
        0
    );
    let hb = heartbeat("g", &s("m"), 1);
    assert_eq!(c.call(&hb, 4).await.error_code, REBALANCE_IN_PROGRESS);
    let unknown_member = c.call(&hb, 4).await.error_code;
    assert_ne!(unknown_member, 0);
    assert_eq!(c.call(&join_request("g", ""), 5).await.error_code, 79);
    assert_eq!(d.call(&ListGroupsRequest::default(), 4).await.error_code, 0);
    let r = c.call(&commit("g2", "", -1, &[("t", 0, 1)]), 8).await;
    assert_eq!(commit_codes(&r), [0]);

    let all = faults.requests_since(0);
    assert_eq!((all.next, all.missed), (6, 2), "{all:?}");
    let got: Vec<_> = all
        .requests
        .iter()
        .map(|r| {
            (
                r.seq,
                r.api,
                r.version,
                r.client_id.as_str(),
                r.group_id.as_deref(),
                r.outcome,
                r.error_code,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                2,
                ApiKey::Heartbeat,
                4,
                "rec",
                Some("g"),
                Outcome::Answered,
                Some(unknown_member)
            ),
            (
                3,
                ApiKey::JoinGroup,
                5,
                "rec",
                Some("g"),
                Outcome::Answered,
                Some(79)
            ),
            (
                4,
                ApiKey::ListGroups,
                4,
                "other",
                None,
                Outcome::Answered,
                Some(0)
            ),
            (
                5,
                ApiKey::OffsetCommit,
                8,
                "rec",
                Some("g2"),
                Outcome::Answered,
                None
            ),
        ]
    );
    assert_ne!(all.requests[2].connection, all.requests[3].connection);
    assert_eq!(all.requests[0].connection, all.requests[3].connection);
    let since = faults.requests_since(4);
    assert_eq!((since.requests.len(), since.missed, since.next), (2, 0, 6));
    assert!(faults.requests_since(6).requests.is_empty());
}

#[tokio::test]
async fn the_record_keeps_a_failed_request_with_its_injected_code() {
    let broker = start(TestBroker::test_config()).await;
    broker
        .faults()
        .fail(ApiKey::Heartbeat, REBALANCE_IN_PROGRESS, 1, None)
        .unwrap();
    let mut c = client(&broker, "rec").await;
    c.call(&heartbeat("g", &s("m"), 1), 2).await;
    let seen = broker.faults().requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (
            seen[0].seq,
            seen[0].outcome,
            seen[0].error_code,
            seen[0].version
        ),
        (0, Outcome::Failed, Some(REBALANCE_IN_PROGRESS), 2)
    );
}

/// One JSON-lines connection to the control port.
struct Control {
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    write: tokio::net::tcp::OwnedWriteHalf,
}

impl Control {
    async fn connect(addr: SocketAddr) -> Control {
        let stream = bounded("control connect", TcpStream::connect(addr))
            .await
            .unwrap();
        let (read, write) = stream.into_split();
        Control {
            lines: BufReader::new(read).lines(),
            write,
        }
    }

    async fn send_line(&mut self, line: &str) -> Option<Value> {
        self.write.write_all(line.as_bytes()).await.unwrap();
        self.write.write_all(b"\n").await.unwrap();
        let answer = bounded("control answer", self.lines.next_line())
            .await
            .unwrap()?;
        Some(serde_json::from_str(&answer).expect("one JSON object per line"))
    }

    async fn call(&mut self, request: Value) -> Value {
        self.send_line(&request.to_string())
            .await
            .expect("an answer")
    }
}

#[tokio::test]
async fn the_control_port_sets_faults_reads_the_record_and_answers_bad_lines() {
    let config = BrokerConfig {
        control_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..TestBroker::test_config()
    };
    let broker = start(config).await;
    let addr = broker.control_addr().expect("a control port");
    let mut control = Control::connect(addr).await;
    let ok = json!({"ok": true});
    assert_eq!(
        control
            .call(json!({"op":"fail","api":"Heartbeat","error":27,"count":2,"client_id":"a"}))
            .await,
        ok
    );
    let mut a = client(&broker, "a").await;
    let mut b = client(&broker, "b").await;
    let (ma, ga) = member_of(&mut a, "ga").await;
    let (mb, gb) = member_of(&mut b, "gb").await;
    assert_eq!(b.call(&heartbeat("gb", &mb, gb), 4).await.error_code, 0);
    for _ in 0..2 {
        let code = a.call(&heartbeat("ga", &ma, ga), 4).await.error_code;
        assert_eq!(code, REBALANCE_IN_PROGRESS);
    }
    assert_eq!(a.call(&heartbeat("ga", &ma, ga), 4).await.error_code, 0);

    // Bad lines are answered with an error, and the connection goes on.
    let bad = control.send_line("{this is not json").await.unwrap();
    assert_eq!(
        (bad["ok"].clone(), bad["code"].clone()),
        (json!(false), json!("BAD_JSON"))
    );
    assert!(bad["error"].as_str().is_some_and(|e| !e.is_empty()));
    let bad = control
        .call(json!({"op":"fail","api":"DescribeGroups","error":1}))
        .await;
    assert_eq!(bad["code"], "NO_ERROR_FIELD");
    assert!(
        bad["error"].as_str().unwrap().contains("DescribeGroups"),
        "{bad}"
    );
    let bad = control
        .call(json!({"op":"latency","api":"Nope","ms":1}))
        .await;
    assert_eq!(bad["code"], "UNKNOWN_API");
    assert_eq!(
        control
            .call(json!({"op":"drop","api":3,"count":1,"client_id":"a"}))
            .await,
        ok
    );
    assert_eq!(control.call(json!({"op":"clear"})).await, ok);

    // The record over the port, in order, with the codes.
    let seen = control.call(json!({"op":"requests","since":0})).await;
    assert_eq!(seen["ok"], true);
    let heartbeats: Vec<(String, i64, String)> = seen["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["api"] == "Heartbeat")
        .map(|r| {
            (
                r["client_id"].as_str().unwrap().to_owned(),
                r["error_code"].as_i64().unwrap(),
                r["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let row = |c: &str, code, o: &str| (c.to_owned(), code, o.to_owned());
    assert_eq!(
        heartbeats,
        [
            row("b", 0, "answered"),
            row("a", 27, "failed"),
            row("a", 27, "failed"),
            row("a", 0, "answered"),
        ]
    );
    let next = seen["next"].as_u64().unwrap();
    let later = control.call(json!({"op":"requests","since":next})).await;
    assert_eq!(later["requests"], json!([]));

    // A line over the limit is refused and closes that control connection only.
    let long = format!("{{\"op\":\"clear\",\"x\":\"{}\"}}", "x".repeat(70 * 1024));
    let refused = control.send_line(&long).await.unwrap();
    assert_eq!(refused["code"], "LINE_TOO_LONG");
    let mut again = Control::connect(addr).await;
    assert_eq!(again.call(json!({"op":"clear"})).await, ok);
}

#[tokio::test]
async fn the_binary_refuses_a_remote_control_port_and_serves_a_loopback_one() {
    let out = bounded(
        "broker refuses",
        tokio::process::Command::new(env!("CARGO_BIN_EXE_broker"))
            .args(["--listen", "127.0.0.1:0", "--control-listen", "0.0.0.0:0"])
            .env("RUST_LOG", "off")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("control-listen") && stderr.contains("loopback"),
        "{stderr}"
    );

    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_broker"));
    command
        .args([
            "--listen",
            "127.0.0.1:0",
            "--control-listen",
            "127.0.0.1:0",
            "--requests-recorded",
            "2",
        ])
        .env("RUST_LOG", "off");
    let (_child, addr, mut lines) = spawn_listening(command).await;
    let line = bounded("control line", lines.next_line())
        .await
        .unwrap()
        .expect("a control line");
    let control_addr: SocketAddr = line
        .strip_prefix("control on ")
        .unwrap_or_else(|| panic!("{line:?}"))
        .parse()
        .unwrap();
    let mut control = Control::connect(control_addr).await;
    let set = json!({"op":"fail","api":"ApiVersions","error":REBALANCE_IN_PROGRESS,"count":1});
    assert_eq!(control.call(set).await, json!({"ok": true}));
    let mut c = Client::connect(addr).await;
    assert_eq!(
        c.call(&ApiVersionsRequest::default(), 3).await.error_code,
        REBALANCE_IN_PROGRESS
    );
    assert_eq!(
        c.call(&ApiVersionsRequest::default(), 3).await.error_code,
        0
    );
    c.call(&ApiVersionsRequest::default(), 3).await;
    let seen = control.call(json!({"op":"requests"})).await;
    assert_eq!(
        (seen["next"].clone(), seen["missed"].clone()),
        (json!(3), json!(1))
    );
    assert_eq!(seen["requests"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn find_coordinator_fails_per_key_and_is_recorded_with_its_group() {
    const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    let broker = start(TestBroker::test_config()).await;
    broker
        .faults()
        .fail(ApiKey::FindCoordinator, COORDINATOR_NOT_AVAILABLE, 1, None)
        .unwrap();
    let mut c = client(&broker, "f").await;
    let find = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![s("g1"), s("g2")]);
    let r = c.call(&find, 4).await;
    let codes: Vec<_> = r
        .coordinators
        .iter()
        .map(|k| (k.key.as_str(), k.error_code))
        .collect();
    assert_eq!(
        codes,
        [
            ("g1", COORDINATOR_NOT_AVAILABLE),
            ("g2", COORDINATOR_NOT_AVAILABLE)
        ]
    );
    let r = c.call(&find, 4).await;
    assert!(r.coordinators.iter().all(|k| k.error_code == 0), "used up");
    let old = FindCoordinatorRequest::default().with_key(s("g3"));
    assert_eq!(c.call(&old, 3).await.error_code, 0);
    let seen = broker.faults().requests();
    let got: Vec<_> = seen
        .iter()
        .map(|r| (r.version, r.group_id.as_deref(), r.outcome, r.error_code))
        .collect();
    assert_eq!(
        got,
        [
            (
                4,
                Some("g1"),
                Outcome::Failed,
                Some(COORDINATOR_NOT_AVAILABLE)
            ),
            (4, Some("g1"), Outcome::Answered, Some(0)),
            (3, Some("g3"), Outcome::Answered, Some(0)),
        ]
    );
}

// ------------------------------------------------------------------ group faults

const UNKNOWN_MEMBER_ID: i16 = 25;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;

/// Two members of `group`, joined and synced: (a's client and member id, b's, generation).
async fn pair_of(
    broker: &TestBroker,
    group: &'static str,
) -> ((Client, StrBytes), (Client, StrBytes), i32) {
    let mut a = client(broker, "a").await;
    let mut b = client(broker, "b").await;
    let (ma, ga) = member_of(&mut a, group).await;
    let first = b.call(&join_request(group, ""), 5).await;
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    let mb = first.member_id.clone();
    let join_b = tokio::spawn(async move {
        let r = b.call(&join_request(group, mb.as_str()), 5).await;
        (b, r)
    });
    // a learns of the rebalance at its heartbeat, and joins again.
    let mut beat = a.call(&heartbeat(group, &ma, ga), 4).await;
    for _ in 0..100 {
        if beat.error_code == REBALANCE_IN_PROGRESS {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        beat = a.call(&heartbeat(group, &ma, ga), 4).await;
    }
    assert_eq!(beat.error_code, REBALANCE_IN_PROGRESS);
    let ja = a.call(&join_request(group, ma.as_str()), 5).await;
    let (mut b, jb) = join_b.await.unwrap();
    assert_eq!((ja.error_code, jb.error_code), (0, 0));
    let generation = ja.generation_id;
    let sync = |member: &StrBytes, leader: bool| {
        let r = SyncGroupRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_generation_id(generation)
            .with_member_id(member.clone());
        if leader {
            r.with_assignments(
                [&ja.member_id, &jb.member_id]
                    .iter()
                    .map(|m| {
                        sync_group_request::SyncGroupRequestAssignment::default()
                            .with_member_id((*m).clone())
                            .with_assignment(Bytes::new())
                    })
                    .collect(),
            )
        } else {
            r
        }
    };
    let (sa, sb) = (
        sync(&ja.member_id, ja.leader == ja.member_id),
        sync(&jb.member_id, jb.leader == jb.member_id),
    );
    let sync_b = tokio::spawn(async move {
        let r = b.call(&sb, 3).await;
        (b, r)
    });
    assert_eq!(a.call(&sa, 3).await.error_code, 0);
    let (b, rb) = sync_b.await.unwrap();
    assert_eq!(rb.error_code, 0);
    ((a, ja.member_id), (b, jb.member_id), generation)
}

#[tokio::test]
async fn a_kicked_classic_member_is_unknown_and_the_other_rebalances() {
    let broker = start(TestBroker::test_config()).await;
    let ((mut a, ma), (mut b, mb), generation) = pair_of(&broker, "g").await;
    assert_eq!(
        a.call(&heartbeat("g", &ma, generation), 4).await.error_code,
        0
    );
    broker.faults().kick("g", ma.as_str()).await.unwrap();
    let beat_a = a.call(&heartbeat("g", &ma, generation), 4).await;
    assert_eq!(beat_a.error_code, UNKNOWN_MEMBER_ID, "the kicked member");
    let beat_b = b.call(&heartbeat("g", &mb, generation), 4).await;
    assert_eq!(beat_b.error_code, REBALANCE_IN_PROGRESS, "the other member");
    let e = broker.faults().kick("g", ma.as_str()).await.unwrap_err();
    assert_eq!(e.code(), "UNKNOWN_MEMBER", "{e}");
    let e = broker.faults().kick("nope", "m").await.unwrap_err();
    assert_eq!(e.code(), "UNKNOWN_GROUP", "{e}");
}

fn consumer_join(group: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
        .with_topic_partitions(Some(Vec::new()))
}

#[tokio::test]
async fn a_kicked_consumer_protocol_member_is_unknown_member_id() {
    let broker = start(common::config()).await;
    let mut a = client(&broker, "a").await;
    let mut b = client(&broker, "b").await;
    let ja = a.call(&consumer_join("cg"), 0).await;
    let jb = b.call(&consumer_join("cg"), 0).await;
    assert_eq!((ja.error_code, jb.error_code), (0, 0));
    let member = ja.member_id.clone().unwrap();
    broker.faults().kick("cg", member.as_str()).await.unwrap();
    let beat = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("cg")))
        .with_member_id(member.clone())
        .with_member_epoch(ja.member_epoch);
    let r = a.call(&beat, 0).await;
    assert_eq!(r.error_code, UNKNOWN_MEMBER_ID, "{:?}", r.error_message);
    // b is moved on to a new group epoch, with both partitions in time.
    let beat_b = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("cg")))
        .with_member_id(jb.member_id.clone().unwrap())
        .with_member_epoch(jb.member_epoch);
    let rb = b.call(&beat_b, 0).await;
    assert_eq!(rb.error_code, 0);
    assert!(rb.member_epoch > jb.member_epoch, "a new epoch for b");
    // The kicked member joins again.
    let again = a
        .call(&consumer_join("cg").with_member_id(member.clone()), 0)
        .await;
    assert_eq!(again.error_code, 0);
}

#[tokio::test]
async fn a_forced_rebalance_is_rebalance_in_progress_at_the_next_heartbeat() {
    let broker = start(TestBroker::test_config()).await;
    let mut a = client(&broker, "a").await;
    let (ma, ga) = member_of(&mut a, "g").await;
    assert_eq!(a.call(&heartbeat("g", &ma, ga), 4).await.error_code, 0);
    broker.faults().rebalance("g").await.unwrap();
    let beat = a.call(&heartbeat("g", &ma, ga), 4).await;
    assert_eq!(beat.error_code, REBALANCE_IN_PROGRESS);
    // It joins again, alone: a new generation.
    let joined = a.call(&join_request("g", ma.as_str()), 5).await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.generation_id, ga + 1);
    // A consumer-protocol group: a new group epoch, so a new member epoch at the next
    // heartbeat.
    let j = a.call(&consumer_join("cg"), 0).await;
    assert_eq!(j.error_code, 0);
    broker.faults().rebalance("cg").await.unwrap();
    let beat = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("cg")))
        .with_member_id(j.member_id.clone().unwrap())
        .with_member_epoch(j.member_epoch);
    let r = a.call(&beat, 0).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(r.member_epoch, j.member_epoch + 1);
}

#[tokio::test]
async fn a_paused_coordinator_answers_coordinator_not_available_for_its_group_only() {
    let config = BrokerConfig {
        control_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..common::config()
    };
    let broker = start(config).await;
    let mut c = client(&broker, "c").await;
    for group in ["g", "other"] {
        let r = c
            .call(&commit(group, "", -1, &[("t", 0, 5), ("t", 1, 6)]), 8)
            .await;
        assert_eq!(commit_codes(&r), [0, 0]);
    }
    let mut control = Control::connect(broker.control_addr().unwrap()).await;
    assert_eq!(
        control.call(json!({"op": "pause", "group": "g"})).await,
        json!({"ok": true, "was_running": true})
    );
    assert_eq!(broker.faults().paused_coordinators(), ["g"]);
    let find = |group: &str| FindCoordinatorRequest::default().with_key(s(group));
    assert_eq!(
        c.call(&find("g"), 3).await.error_code,
        COORDINATOR_NOT_AVAILABLE
    );
    assert_eq!(c.call(&find("other"), 3).await.error_code, 0);
    let batch = FindCoordinatorRequest::default().with_coordinator_keys(vec![s("g")]);
    let r = c.call(&batch, 4).await;
    assert_eq!(r.coordinators[0].error_code, COORDINATOR_NOT_AVAILABLE);
    let joined = c.call(&join_request("g", ""), 5).await;
    assert_eq!(joined.error_code, COORDINATOR_NOT_AVAILABLE);
    assert_eq!(c.call(&join_request("other", ""), 5).await.error_code, 79);
    let r = c.call(&commit("g", "", -1, &[("t", 0, 9)]), 8).await;
    assert_eq!(commit_codes(&r), [COORDINATOR_NOT_AVAILABLE]);
    let r = c.call(&commit("other", "", -1, &[("t", 0, 9)]), 8).await;
    assert_eq!(commit_codes(&r), [0]);
    let r = c.call(&offset_fetch("g", &[0, 1]), 7).await;
    assert_eq!(r.error_code, COORDINATOR_NOT_AVAILABLE);
    let r = c.call(&offset_fetch("other", &[0, 1]), 7).await;
    assert_eq!((r.error_code, fetched(&r)), (0, vec![9, 6]));
    let seen = broker.faults().requests();
    assert!(seen
        .iter()
        .filter(|r| r.group_id.as_deref() == Some("g") && r.api != ApiKey::OffsetCommit)
        .skip(2)
        .all(|r| r.outcome == Outcome::Failed && r.error_code == Some(COORDINATOR_NOT_AVAILABLE)));
    // Resumed: nothing was lost, and the paused commit did not land.
    assert_eq!(
        control.call(json!({"op": "resume", "group": "g"})).await,
        json!({"ok": true, "was_paused": true})
    );
    assert!(broker.faults().paused_coordinators().is_empty());
    let r = c.call(&offset_fetch("g", &[0, 1]), 7).await;
    assert_eq!((r.error_code, fetched(&r)), (0, vec![5, 6]));
    assert_eq!(c.call(&find("g"), 3).await.error_code, 0);
    // The group faults from the control port, refused with their codes.
    let r = control
        .call(json!({"op": "kick", "group": "nope", "member": "m"}))
        .await;
    assert_eq!(r["code"], "UNKNOWN_GROUP");
    let r = control
        .call(json!({"op": "rebalance", "group": "nope"}))
        .await;
    assert_eq!(r["code"], "UNKNOWN_GROUP");
    let r = control.call(json!({"op": "pause"})).await;
    assert_eq!(r["code"], "BAD_REQUEST");
}

/// Records deleted below an offset, or all of them: the log start moves up, a fetch below it
/// is OFFSET_OUT_OF_RANGE (what a consumer meets after Kafka's DeleteRecords or retention);
/// from Rust and from the control port, with its refusals.
#[tokio::test]
async fn deleted_records_move_the_log_start_and_a_fetch_below_it_is_out_of_range() {
    let config = BrokerConfig {
        control_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..common::config()
    };
    let broker = start(config).await;
    let mut c = client(&broker, "c").await;
    for p in [0, 1] {
        for i in 0..4 {
            let records = batch(&[record(i, 1)], Compression::None);
            assert_eq!(produce(&mut c, "t", p, records, 7).await.0, 0);
        }
    }
    // From Rust: partition 0 below 3.
    let starts = broker
        .faults()
        .delete_records("t", Some(0), Some(3))
        .await
        .unwrap();
    assert_eq!(starts, vec![(0, 3)]);
    let r = c.call(&fetch_request("t", 0, 0), 12).await;
    assert_eq!(
        r.responses[0].partitions[0].error_code, 1,
        "OFFSET_OUT_OF_RANGE"
    );
    let r = c.call(&fetch_request("t", 0, 3), 12).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    assert_eq!(decode_records(&r.responses[0].partitions[0]).len(), 1);
    let r = c.call(&fetch_request("t", 1, 0), 12).await;
    assert_eq!(
        decode_records(&r.responses[0].partitions[0]).len(),
        4,
        "partition 1 untouched"
    );
    // From the control port: every record of every partition.
    let mut control = Control::connect(broker.control_addr().unwrap()).await;
    assert_eq!(
        control
            .call(json!({"op": "delete_records", "topic": "t"}))
            .await,
        json!({"ok": true, "log_start": {"0": 4, "1": 4}})
    );
    let r = c.call(&fetch_request("t", 1, 0), 12).await;
    assert_eq!(
        r.responses[0].partitions[0].error_code, 1,
        "OFFSET_OUT_OF_RANGE"
    );
    // Refusals: an unknown topic or partition, an offset past the end (nothing changes).
    let r = control
        .call(json!({"op": "delete_records", "topic": "nope"}))
        .await;
    assert_eq!(r["code"], "UNKNOWN_PARTITION", "{r}");
    let r = control
        .call(json!({"op": "delete_records", "topic": "t", "partition": 7}))
        .await;
    assert_eq!(r["code"], "UNKNOWN_PARTITION", "{r}");
    let r = control
        .call(json!({"op": "delete_records", "topic": "t", "partition": 0, "before": 99}))
        .await;
    assert_eq!(r["code"], "RECORDS", "{r}");
    let r = control
        .call(json!({"op": "delete_records", "topic": "t", "partition": -1}))
        .await;
    assert_eq!(r["code"], "BAD_REQUEST", "{r}");
}

/// A broker whose coordinators' timers follow a clock the test moves.
fn manual_clock_config() -> BrokerConfig {
    BrokerConfig {
        manual_clock: true,
        group_min_session_timeout_ms: 1_000,
        control_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..common::config()
    }
}

#[tokio::test]
async fn on_a_manual_clock_a_session_expires_when_the_clock_passes_it_not_before() {
    let broker = start(manual_clock_config()).await;
    let mut a = client(&broker, "a").await;
    let (member, generation) = member_with_session(&mut a, "mc", 1_000).await;
    // Real time passes the 1 s session: the clock did not move, the member is alive.
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    assert_eq!(
        a.call(&heartbeat("mc", &member, generation), 4)
            .await
            .error_code,
        0,
        "a session on the manual clock does not expire on real time"
    );
    // Up to the deadline (now + 1,000 ms at that heartbeat): still a member.
    let advanced = broker.faults().advance_clock(1_000).await.unwrap();
    assert!(advanced.expired.is_empty(), "{advanced:?}");
    // Past it: expired before the call returns, and named in its answer.
    let advanced = broker.faults().advance_clock(1).await.unwrap();
    assert_eq!(advanced.expired.len(), 1, "{advanced:?}");
    assert_eq!(
        (
            advanced.expired[0].group.as_str(),
            advanced.expired[0].member.as_str()
        ),
        ("mc", member.as_str())
    );
    assert_eq!(
        a.call(&heartbeat("mc", &member, generation), 4)
            .await
            .error_code,
        UNKNOWN_MEMBER_ID
    );
    // A broker on the OS clock refuses to advance it.
    let live = start(TestBroker::test_config()).await;
    let e = live.faults().advance_clock(1).await.unwrap_err();
    assert_eq!(e.code(), "NO_MANUAL_CLOCK", "{e}");
}

#[tokio::test]
async fn on_a_manual_clock_a_consumer_protocol_member_expires_when_advanced() {
    let config = BrokerConfig {
        group_consumer_session_timeout_ms: 6_000,
        ..manual_clock_config()
    };
    let broker = start(config).await;
    let mut a = client(&broker, "a").await;
    let mut b = client(&broker, "b").await;
    let ja = a.call(&consumer_join("mk"), 0).await;
    let jb = b.call(&consumer_join("mk"), 0).await;
    assert_eq!((ja.error_code, jb.error_code), (0, 0));
    let advanced = broker.faults().advance_clock(5_000).await.unwrap();
    assert!(advanced.expired.is_empty(), "{advanced:?}");
    // b heartbeats; a does not.
    let beat_b = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("mk")))
        .with_member_id(jb.member_id.clone().unwrap())
        .with_member_epoch(jb.member_epoch);
    assert_eq!(b.call(&beat_b, 0).await.error_code, 0);
    let advanced = broker.faults().advance_clock(1_001).await.unwrap();
    let expired: Vec<_> = advanced.expired.iter().map(|e| e.member.clone()).collect();
    assert_eq!(
        expired,
        [ja.member_id.clone().unwrap().to_string()],
        "a, not b"
    );
    let beat_a = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("mk")))
        .with_member_id(ja.member_id.clone().unwrap())
        .with_member_epoch(ja.member_epoch);
    assert_eq!(a.call(&beat_a, 0).await.error_code, UNKNOWN_MEMBER_ID);
}

#[tokio::test]
async fn on_a_manual_clock_a_transaction_times_out_when_advanced_over_the_control_port() {
    const PRODUCER_FENCED: i16 = 90;
    let broker = start(manual_clock_config()).await;
    let mut c = client(&broker, "p").await;
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s("tx"))))
        .with_transaction_timeout_ms(2_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let init = c.call(&init, 4).await;
    assert_eq!(init.error_code, 0);
    let add = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s("tx")))
        .with_v3_and_below_producer_id(init.producer_id)
        .with_v3_and_below_producer_epoch(init.producer_epoch)
        .with_v3_and_below_topics(vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![0]),
        ]);
    let added = c.call(&add, 3).await;
    assert_eq!(
        added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        0
    );
    let mut control = Control::connect(broker.control_addr().unwrap()).await;
    // Under the timeout (and the 10 s cleanup interval): nothing aborted.
    let answer = control.call(json!({"op":"advance_clock","ms":1_500})).await;
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["transactions_aborted"], json!([]), "{answer}");
    // Past the timeout and the cleanup interval: aborted, the producer fenced.
    let answer = control
        .call(json!({"op":"advance_clock","ms":10_000}))
        .await;
    assert_eq!(answer["transactions_aborted"], json!(["tx"]), "{answer}");
    assert!(answer["now_ms"].as_u64().unwrap() > 11_500, "{answer}");
    let end = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s("tx")))
        .with_producer_id(init.producer_id)
        .with_producer_epoch(init.producer_epoch)
        .with_committed(true);
    assert_eq!(c.call(&end, 4).await.error_code, PRODUCER_FENCED);
    // Bad lines: a negative advance, and a clock on a live broker.
    let answer = control.call(json!({"op":"advance_clock","ms":-1})).await;
    assert_eq!(answer["code"], "BAD_REQUEST", "{answer}");
    let live = start(BrokerConfig {
        control_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..TestBroker::test_config()
    })
    .await;
    let mut live_control = Control::connect(live.control_addr().unwrap()).await;
    let answer = live_control
        .call(json!({"op":"advance_clock","ms":1}))
        .await;
    assert_eq!(answer["code"], "NO_MANUAL_CLOCK", "{answer}");
}
