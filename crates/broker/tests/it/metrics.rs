//! `--metrics-listen` (issue 50): `GET /metrics` in the Prometheus text format, scraped with
//! a plain TCP GET while clients are connected, a group rebalances and commits, checked
//! against what they sent and what the coordinator did.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::common;

use broker::testing::TestBroker;
use broker::BrokerConfig;
use bytes::{BufMut, BytesMut};
use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MEMBER_ID_REQUIRED: i16 = 79;
const UNKNOWN_MEMBER_ID: i16 = 25;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

async fn start() -> TestBroker {
    start_with("t:1", broker::DEFAULT_METRICS_MAX_LAG_SERIES).await
}

/// A broker with metrics, topic `topic` (`NAME:PARTITIONS`) and `--metrics-max-lag-series`.
async fn start_with(topic: &str, max_lag_series: usize) -> TestBroker {
    let config = BrokerConfig {
        metrics_listen: Some("127.0.0.1:0".parse().unwrap()),
        metrics_max_lag_series: max_lag_series,
        topics: vec![topic.parse().unwrap()],
        ..TestBroker::test_config()
    };
    bounded("start", TestBroker::with_config(config))
        .await
        .expect("the broker starts")
}

/// `GET path` over a fresh TCP connection: the status line and the body (the server closes
/// the connection after its answer).
async fn get(addr: SocketAddr, path: &str) -> (String, String, String) {
    let mut socket = bounded("connect", TcpStream::connect(addr)).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: */*\r\n\r\n");
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    bounded("read the answer", socket.read_to_end(&mut answer))
        .await
        .unwrap();
    let answer = String::from_utf8(answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    let status = head.lines().next().unwrap_or_default().to_string();
    let content_type = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Type: "))
        .unwrap_or_default()
        .to_string();
    (status, content_type, body.to_string())
}

/// Every sample of a scrape: `name{labels}` → value.
async fn scrape(addr: SocketAddr) -> BTreeMap<String, f64> {
    let (status, content_type, body) = get(addr, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap_or_else(|| panic!("{l:?}"));
            (series.to_string(), value.parse().unwrap())
        })
        .collect()
}

fn value(samples: &BTreeMap<String, f64>, series: &str) -> f64 {
    *samples
        .get(series)
        .unwrap_or_else(|| panic!("no {series} in {samples:#?}"))
}

fn join(group: &str, member: &str) -> JoinGroupRequest {
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

#[tokio::test]
async fn metrics_count_requests_errors_connections_bytes_and_groups() {
    let broker = start().await;
    let metrics = broker.metrics_addr().expect("a metrics listener");
    let mut c = Client::connect(broker.addr()).await;
    for _ in 0..2 {
        assert_eq!(
            c.call(&ApiVersionsRequest::default(), 3).await.error_code,
            0
        );
    }
    let first = c.call(&join("g", ""), 5).await;
    assert_eq!(first.error_code, MEMBER_ID_REQUIRED);
    let joined = c.call(&join("g", &first.member_id), 5).await;
    assert_eq!(joined.error_code, 0);
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone())
        .with_assignments(vec![
            sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(joined.member_id.clone())
                .with_assignment(bytes::Bytes::new()),
        ]);
    assert_eq!(c.call(&sync, 3).await.error_code, 0);
    // A commit by a member the group does not have: refused, for every partition.
    let refused = c
        .call(
            &commit("g", "nobody", joined.generation_id, &[("t", 0, 5)]),
            8,
        )
        .await;
    assert_eq!(commit_codes(&refused), [UNKNOWN_MEMBER_ID]);

    let m = scrape(metrics).await;
    let requests = |api: &str, version: i16| {
        value(
            &m,
            &format!(
                "kafka_network_requestmetrics_requests_total{{request=\"{api}\",version=\"{version}\"}}"
            ),
        )
    };
    assert_eq!(requests("ApiVersions", 3), 2.0);
    assert_eq!(requests("JoinGroup", 5), 2.0);
    assert_eq!(requests("SyncGroup", 3), 1.0);
    assert_eq!(requests("OffsetCommit", 8), 1.0);
    let errors = |api: &str, error: &str| {
        value(
            &m,
            &format!(
                "kafka_network_requestmetrics_errors_total{{request=\"{api}\",error=\"{error}\"}}"
            ),
        )
    };
    assert_eq!(errors("ApiVersions", "NONE"), 2.0);
    assert_eq!(errors("JoinGroup", "MEMBER_ID_REQUIRED"), 1.0);
    assert_eq!(errors("JoinGroup", "NONE"), 1.0);
    assert_eq!(errors("OffsetCommit", "UNKNOWN_MEMBER_ID"), 1.0);
    assert!(
        !m.contains_key(
            "kafka_network_requestmetrics_errors_total{request=\"OffsetCommit\",error=\"NONE\"}"
        ),
        "the refused commit is not counted as answered without error"
    );
    // The latency histogram: one observation per request, in seconds.
    let latency = |api: &str, part: &str| {
        value(
            &m,
            &format!("kafka_network_requestmetrics_totaltime_seconds_{part}{{request=\"{api}\"}}"),
        )
    };
    assert_eq!(latency("ApiVersions", "count"), 2.0);
    assert_eq!(latency("JoinGroup", "count"), 2.0);
    let sum = latency("JoinGroup", "sum");
    assert!(sum > 0.0 && sum < 10.0, "{sum}");
    assert_eq!(
        value(
            &m,
            "kafka_network_requestmetrics_totaltime_seconds_bucket{request=\"OffsetCommit\",le=\"+Inf\"}"
        ),
        1.0
    );
    // One connection open on the listener; bytes read and written on it.
    let listener = format!("listener=\"PLAINTEXT\",address=\"{}\"", broker.addr());
    assert_eq!(
        value(
            &m,
            &format!("kafka_server_socket_server_metrics_connection_count{{{listener}}}")
        ),
        1.0
    );
    let bytes_in = value(
        &m,
        &format!("kafka_server_socket_server_metrics_incoming_byte_total{{{listener}}}"),
    );
    let bytes_out = value(
        &m,
        &format!("kafka_server_socket_server_metrics_outgoing_byte_total{{{listener}}}"),
    );
    // Six requests of at least 12 bytes each (size, key, version, correlation id, client
    // id), and ApiVersions' answers alone are hundreds of bytes.
    assert!(bytes_in >= 6.0 * 12.0, "{bytes_in}");
    assert!(bytes_out > 2.0 * 200.0, "{bytes_out}");
    // The group, by protocol and state, read from the coordinator at scrape time.
    assert_eq!(
        value(
            &m,
            "kafka_server_group_coordinator_metrics_group_count{protocol=\"classic\",state=\"Stable\"}"
        ),
        1.0
    );

    // The client leaves: no connection open (the broker notices the close at once).
    drop(c);
    let mut open = 1.0;
    for _ in 0..100 {
        let m = scrape(metrics).await;
        open = value(
            &m,
            &format!("kafka_server_socket_server_metrics_connection_count{{{listener}}}"),
        );
        if open == 0.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(open, 0.0);
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn the_metrics_listener_answers_404_elsewhere_and_bounds_the_request() {
    let broker = start().await;
    let metrics = broker.metrics_addr().expect("a metrics listener");
    let (status, _, _) = get(metrics, "/nothing").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, content_type, _) = get(metrics, "/").await;
    assert_eq!(status, "HTTP/1.1 200 OK", "the page of groups");
    assert_eq!(content_type, "text/html; charset=utf-8");
    let (status, _, _) = get(metrics, "/group/no-such-group").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, _, _) = get(metrics, "/group/%zz").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found", "a bad escape");
    let (status, _, _) = get(metrics, "/metrics?x=1").await;
    assert_eq!(status, "HTTP/1.1 200 OK", "a query string is ignored");
    // A request that never ends its head is cut off, not buffered without bound.
    let mut socket = TcpStream::connect(metrics).await.unwrap();
    let huge = vec![b'a'; 64 * 1024];
    let _ = socket.write_all(b"GET /").await;
    let _ = socket.write_all(&huge).await;
    let mut answer = Vec::new();
    let _ = bounded("read the refusal", socket.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
        "{answer}"
    );
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn no_metrics_listener_unless_asked() {
    let broker = bounded("start", TestBroker::start()).await.unwrap();
    assert_eq!(broker.metrics_addr(), None);
}

/// The group coordinator's meters, scraped: (group_rebalance, group_completed_rebalance,
/// consumer_group_rebalance, offset_commit).
fn meters(m: &BTreeMap<String, f64>) -> [f64; 4] {
    [
        "group_rebalance",
        "group_completed_rebalance",
        "consumer_group_rebalance",
        "offset_commit",
    ]
    .map(|name| {
        value(
            m,
            &format!("kafka_server_group_coordinator_metrics_{name}_total"),
        )
    })
}

use crate::share_groups::produce_n;

#[tokio::test]
async fn a_classic_group_rebalancing_and_committing_shows_in_the_coordinator_metrics_and_lag() {
    use crate::groups::{assignment, join_request, sync_request};
    let broker = start_with("t:2", broker::DEFAULT_METRICS_MAX_LAG_SERIES).await;
    let metrics = broker.metrics_addr().expect("a metrics listener");
    let mut a = Client::connect(broker.addr()).await;
    let mut b = Client::connect(broker.addr()).await;
    produce_n(&mut a, 0, 10).await;
    produce_n(&mut a, 1, 4).await;
    let before = meters(&scrape(metrics).await);

    // A joins alone (generation 1) and syncs as leader: one rebalance, completed.
    let first = crate::groups::join(&mut a, "g").await;
    assert_eq!(first.generation_id, 1);
    let synced = a
        .call(
            &sync_request(
                "g",
                &first,
                &[(first.member_id.as_str(), assignment("t", &[0, 1]))],
            ),
            3,
        )
        .await;
    assert_eq!(synced.error_code, 0);
    let m = scrape(metrics).await;
    let after_one = meters(&m);
    assert_eq!(after_one[0] - before[0], 1.0, "{after_one:?} {before:?}");
    assert_eq!(after_one[1] - before[1], 1.0, "{after_one:?} {before:?}");
    assert_eq!(
        value(&m, "kafka_consumergroup_members{consumergroup=\"g\"}"),
        1.0
    );

    // B joins; A re-joins at its heartbeat's REBALANCE_IN_PROGRESS: generation 2.
    let b_first = b.call(&join_request("g", ""), 5).await;
    assert_eq!(b_first.error_code, MEMBER_ID_REQUIRED);
    let b_join = b.send(&join_request("g", &b_first.member_id), 5).await;
    let mut code = 0;
    for _ in 0..100 {
        let hb = HeartbeatRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_member_id(first.member_id.clone())
            .with_generation_id(1);
        code = a.call(&hb, 1).await.error_code;
        if code == 27 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(code, 27, "REBALANCE_IN_PROGRESS");
    let a_joined = a.call(&join_request("g", &first.member_id), 5).await;
    let b_joined = b.receive::<JoinGroupRequest>(b_join, 5).await;
    assert_eq!((a_joined.generation_id, b_joined.generation_id), (2, 2));
    // Between the barrier and the leader's SyncGroup: rebalanced, not yet completed.
    let m = scrape(metrics).await;
    let joined = meters(&m);
    assert_eq!(joined[0] - before[0], 2.0, "{joined:?} {before:?}");
    assert_eq!(joined[1] - before[1], 1.0, "{joined:?} {before:?}");
    assert_eq!(
        value(
            &m,
            "kafka_server_group_coordinator_metrics_group_count{protocol=\"classic\",state=\"CompletingRebalance\"}"
        ),
        1.0
    );
    let b_sync = b.send(&sync_request("g", &b_joined, &[]), 3).await;
    let a_synced = a
        .call(
            &sync_request(
                "g",
                &a_joined,
                &[
                    (first.member_id.as_str(), assignment("t", &[0])),
                    (b_first.member_id.as_str(), assignment("t", &[1])),
                ],
            ),
            3,
        )
        .await;
    assert_eq!(a_synced.error_code, 0);
    assert_eq!(b.receive::<SyncGroupRequest>(b_sync, 3).await.error_code, 0);

    // Each commits its partition in generation 2.
    let r = a
        .call(&commit("g", &first.member_id, 2, &[("t", 0, 7)]), 8)
        .await;
    assert_eq!(commit_codes(&r), [0]);
    let r = b
        .call(&commit("g", &b_first.member_id, 2, &[("t", 1, 1)]), 8)
        .await;
    assert_eq!(commit_codes(&r), [0]);

    let m = scrape(metrics).await;
    let after = meters(&m);
    assert_eq!(after[0] - before[0], 2.0, "two generations: {after:?}");
    assert_eq!(after[1] - before[1], 2.0, "both completed: {after:?}");
    assert_eq!(after[2] - before[2], 0.0, "no consumer-protocol group");
    assert_eq!(after[3] - before[3], 2.0, "two offsets committed");
    assert_eq!(
        value(
            &m,
            "kafka_coordinator_group_groupmetadatamanager_numoffsets"
        ),
        2.0
    );
    assert_eq!(
        value(&m, "kafka_consumergroup_members{consumergroup=\"g\"}"),
        2.0
    );
    assert_eq!(
        value(
            &m,
            "kafka_server_group_coordinator_metrics_group_count{protocol=\"classic\",state=\"Stable\"}"
        ),
        1.0
    );
    for (partition, end, committed) in [(0, 10.0, 7.0), (1, 4.0, 1.0)] {
        let labels = format!("consumergroup=\"g\",topic=\"t\",partition=\"{partition}\"");
        assert_eq!(
            value(
                &m,
                &format!("kafka_consumergroup_current_offset{{{labels}}}")
            ),
            committed
        );
        assert_eq!(
            value(
                &m,
                &format!(
                    "kafka_topic_partition_current_offset{{topic=\"t\",partition=\"{partition}\"}}"
                )
            ),
            end
        );
        assert_eq!(
            value(&m, &format!("kafka_consumergroup_lag{{{labels}}}")),
            end - committed,
            "lag is the log end less the committed offset"
        );
    }
    assert_eq!(value(&m, "consumer_groups_lag_series_omitted"), 0.0);

    // More records: the lag grows with the log end, the committed offset stays.
    produce_n(&mut a, 0, 5).await;
    let m = scrape(metrics).await;
    assert_eq!(
        value(
            &m,
            "kafka_consumergroup_lag{consumergroup=\"g\",topic=\"t\",partition=\"0\"}"
        ),
        8.0
    );
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn a_consumer_protocol_group_counts_its_epochs_and_lag_series_are_bounded_by_the_flag() {
    let broker = start_with("t:2", 1).await;
    let metrics = broker.metrics_addr().expect("a metrics listener");
    let mut c = Client::connect(broker.addr()).await;
    produce_n(&mut c, 0, 3).await;
    let before = meters(&scrape(metrics).await);
    // A member joins a consumer-protocol group: its group epoch goes to 1.
    let join = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("cg")))
        .with_member_id(s("m1"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
        .with_topic_partitions(Some(Vec::new()));
    let joined = c.call(&join, 1).await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.member_epoch, 1);
    // A tool commits two partitions for a simple group: two (group, partition) pairs, one
    // shown under --metrics-max-lag-series 1.
    let r = c
        .call(&commit("simple", "", -1, &[("t", 0, 2), ("t", 1, 0)]), 8)
        .await;
    assert_eq!(commit_codes(&r), [0, 0]);
    let m = scrape(metrics).await;
    let after = meters(&m);
    assert_eq!(after[2] - before[2], 1.0, "one epoch bump: {after:?}");
    assert_eq!(after[0] - before[0], 0.0, "no classic rebalance: {after:?}");
    assert_eq!(after[3] - before[3], 2.0, "{after:?}");
    assert_eq!(
        value(
            &m,
            "kafka_coordinator_group_groupmetadatamanager_numoffsets"
        ),
        2.0
    );
    assert_eq!(
        value(&m, "kafka_consumergroup_members{consumergroup=\"cg\"}"),
        1.0
    );
    let shown: Vec<&String> = m
        .keys()
        .filter(|k| k.starts_with("kafka_consumergroup_current_offset{"))
        .collect();
    assert_eq!(
        shown,
        ["kafka_consumergroup_current_offset{consumergroup=\"simple\",topic=\"t\",partition=\"0\"}"]
    );
    assert_eq!(
        value(
            &m,
            "kafka_consumergroup_lag{consumergroup=\"simple\",topic=\"t\",partition=\"0\"}"
        ),
        1.0
    );
    assert_eq!(value(&m, "consumer_groups_lag_series_omitted"), 1.0);
    broker.stop().await.unwrap();
}

/// `GET path` until its body holds `text` (bounded: 10 s); the body.
async fn page_until(addr: SocketAddr, path: &str, text: &str) -> String {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (status, _, body) = get(addr, path).await;
        if status == "HTTP/1.1 200 OK" && body.contains(text) {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path} never showed {text:?}: {status}\n{body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The page of groups lists a group with its members and lag, and the group's page draws
/// its history: each generation, the member who left (red) and the one who joined (green),
/// with what each owned. Ids are escaped.
#[tokio::test]
async fn the_page_of_groups_shows_members_lag_and_the_history_of_generations() {
    use crate::groups::{assignment, join, sync_request};
    let broker = start_with("t:2", broker::DEFAULT_METRICS_MAX_LAG_SERIES).await;
    let metrics = broker.metrics_addr().expect("a metrics listener");
    let mut a = Client::connect(broker.addr()).await;
    produce_n(&mut a, 0, 10).await;
    let group = "g<&>";
    let path = "/group/g%3C%26%3E";

    // Generation 1: a alone, owning t-0 and t-1; it commits 7 on t-0.
    let first = join(&mut a, group).await;
    let synced = a
        .call(
            &sync_request(
                group,
                &first,
                &[(first.member_id.as_str(), assignment("t", &[0, 1]))],
            ),
            3,
        )
        .await;
    assert_eq!(synced.error_code, 0);
    let r = a
        .call(&commit(group, &first.member_id, 1, &[("t", 0, 7)]), 8)
        .await;
    assert_eq!(commit_codes(&r), [0]);
    let page = page_until(metrics, path, "gen 1").await;
    assert!(
        page.contains("<h1>g&lt;&amp;&gt;</h1>"),
        "the id escaped: {page}"
    );
    assert!(page.contains("t(0,1)"), "a's assignment: {page}");

    // a leaves: the group is empty (generation 2); c joins alone (generation 3).
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_members(vec![
            leave_group_request::MemberIdentity::default().with_member_id(first.member_id.clone())
        ]);
    assert_eq!(a.call(&leave, 3).await.error_code, 0);
    page_until(metrics, path, "class=\"state\">Empty</b>").await;
    let mut c = Client::connect(broker.addr()).await;
    let third = join(&mut c, group).await;
    assert_eq!(third.generation_id, 3);
    let synced = c
        .call(
            &sync_request(
                group,
                &third,
                &[(third.member_id.as_str(), assignment("t", &[1]))],
            ),
            3,
        )
        .await;
    assert_eq!(synced.error_code, 0);
    let page = page_until(metrics, path, "class=\"generation\">3</b>").await;
    let svg = &page[page.find("<svg").expect("a timeline")..];
    for shown in [
        "gen 1",
        "gen 3",
        "class=\"leave\"",
        "class=\"join\"",
        "t(1)",
    ] {
        assert!(svg.contains(shown), "{shown} in the timeline: {svg}");
    }
    assert!(
        page.contains(third.member_id.as_str()),
        "c is a member: {page}"
    );

    // The index: the group, its kind, state, generation, and t-0's lag (10 − 7).
    let index = page_until(metrics, "/", "g%3C%26%3E").await;
    assert!(index.contains("<td>classic</td>"), "{index}");
    assert!(
        index.contains(
            "<td>t</td><td class=\"n\">0</td><td class=\"n\">7</td><td class=\"n\">10</td>\
             <td class=\"n\">3</td>"
        ),
        "t-0: committed 7, log end 10, lag 3: {index}"
    );
    broker.stop().await.unwrap();
}

/// The flushes `log` (`records` or `groups`) made, from a scrape: `None` without a series.
fn flushes(m: &BTreeMap<String, f64>, log: &str) -> Option<f64> {
    m.get(&format!(
        "kafka_log_logflushstats_logflushrateandtime_seconds_count{{log=\"{log}\"}}"
    ))
    .copied()
}

#[tokio::test]
async fn with_a_data_directory_each_logs_fdatasyncs_are_counted_and_timed() {
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig {
        metrics_listen: Some("127.0.0.1:0".parse().unwrap()),
        data_dir: Some(dir.path().to_path_buf()),
        topics: vec!["t:1".parse().unwrap()],
        ..TestBroker::test_config()
    };
    let broker = bounded("start", TestBroker::with_config(config))
        .await
        .expect("the broker starts");
    let metrics = broker.metrics_addr().expect("a metrics listener");
    let before = scrape(metrics).await;
    let (records, groups) = (
        flushes(&before, "records").expect("the records' series, from the start"),
        flushes(&before, "groups").expect("the groups' series, from the start"),
    );
    let mut c = Client::connect(broker.addr()).await;
    produce_n(&mut c, 0, 10).await;
    produce_n(&mut c, 0, 5).await;
    let r = c.call(&commit("g", "", -1, &[("t", 0, 15)]), 8).await;
    assert_eq!(commit_codes(&r), [0]);

    let m = scrape(metrics).await;
    let records_after = flushes(&m, "records").unwrap();
    let groups_after = flushes(&m, "groups").unwrap();
    // Each produce is acknowledged once its batch is fdatasynced; so is the commit.
    assert!(
        records_after - records >= 2.0,
        "{records} → {records_after}"
    );
    assert!(groups_after - groups >= 1.0, "{groups} → {groups_after}");
    for (log, count) in [("records", records_after), ("groups", groups_after)] {
        let series = format!(
            "kafka_log_logflushstats_logflushrateandtime_seconds_bucket{{log=\"{log}\",le=\"+Inf\"}}"
        );
        assert_eq!(value(&m, &series), count, "every flush in a bucket");
    }
    drop(c);
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn without_a_data_directory_there_is_no_log_flush_series() {
    let broker = start().await;
    let metrics = broker.metrics_addr().expect("a metrics listener");
    let mut c = Client::connect(broker.addr()).await;
    produce_n(&mut c, 0, 3).await;
    let r = c.call(&commit("g", "", -1, &[("t", 0, 3)]), 8).await;
    assert_eq!(commit_codes(&r), [0]);
    let m = scrape(metrics).await;
    let flush_series: Vec<_> = m
        .keys()
        .filter(|k| k.starts_with("kafka_log_logflushstats_"))
        .collect();
    assert!(
        flush_series.is_empty(),
        "the memory logs never sync: {flush_series:?}"
    );
    drop(c);
    broker.stop().await.unwrap();
}
