//! `--postgres URL`: a broker whose whole state is in PostgreSQL (a throwaway server of the
//! store-postgres harness, on a unix socket): a second broker process on another port, with no
//! local files, carries on with the first one's topics, records and committed offsets.

use std::time::Duration;

use broker::{BrokerConfig, PostgresUrl, Server};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record};
use store_postgres::harness::{HarnessError, TempPostgres};
use uuid::Uuid;

use crate::common::*;

/// A started server; `None` (after saying why) when PostgreSQL is not installed and `CI` is
/// not set. Under CI a missing PostgreSQL fails the test.
async fn server() -> Option<TempPostgres> {
    match tokio::time::timeout(Duration::from_secs(180), TempPostgres::start()).await {
        Ok(Ok(pg)) => Some(pg),
        Ok(Err(HarnessError::NotInstalled(why))) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set, so PostgreSQL must be installed for these tests: {why}"
            );
            eprintln!("skipping: {why}");
            None
        }
        Ok(Err(e)) => panic!("{e}"),
        Err(_) => panic!("the test PostgreSQL did not start within 180 s"),
    }
}

fn on(url: &str) -> BrokerConfig {
    BrokerConfig {
        postgres: Some(PostgresUrl::new(url)),
        postgres_pool_size: 4,
        // ACLs are kept in the database too (PLAINTEXT clients are User:ANONYMOUS)
        authorizer: true,
        super_users: vec!["User:ANONYMOUS".into()],
        ..config()
    }
}

fn acl_filter() -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1)
}

async fn topic_id(c: &mut Client, topic: &str) -> Uuid {
    let r = c
        .call(
            &MetadataRequest::default()
                .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
                )
                .with_name(Some(topic_name(topic)))])),
            12,
        )
        .await;
    assert_eq!(r.topics[0].error_code, 0);
    r.topics[0].topic_id
}

#[tokio::test]
async fn a_second_broker_on_the_same_database_carries_on() {
    let Some(pg) = server().await else { return };
    let url = bounded("create database", pg.create_database("carry_on"))
        .await
        .unwrap();
    let first = TestBroker::with(on(&url)).await;
    let mut c = first.client().await;
    let id = topic_id(&mut c, "t").await;
    let records: Vec<_> = (0..3).map(|i| record(i, 1_000 + i as i64)).collect();
    let (code, base) = produce(&mut c, "t", 1, batch(&records, Compression::None), 9).await;
    assert_eq!((code, base), (0, 0));
    let (code, base) = produce(&mut c, "t", 1, batch(&records[..1], Compression::None), 9).await;
    assert_eq!((code, base), (0, 3));
    let r = c.call(&commit("g", "", -1, &[("t", 1, 4)]), 2).await;
    assert_eq!(commit_codes(&r), vec![0]);
    let created = c
        .call(
            &CreateTopicsRequest::default().with_topics(vec![
                create_topics_request::CreatableTopic::default()
                    .with_name(topic_name("later"))
                    .with_num_partitions(3)
                    .with_replication_factor(1),
            ]),
            5,
        )
        .await;
    assert_eq!(created.topics[0].error_code, 0);
    let acl = CreateAclsRequest::default().with_creations(vec![
        create_acls_request::AclCreation::default()
            .with_resource_type(3)
            .with_resource_name(StrBytes::from_static_str("g"))
            .with_resource_pattern_type(3)
            .with_principal(StrBytes::from_static_str("User:alice"))
            .with_host(StrBytes::from_static_str("*"))
            .with_operation(3)
            .with_permission_type(3),
    ]);
    assert_eq!(c.call(&acl, 3).await.results[0].error_code, 0);
    assert_eq!(c.call(&acl_filter(), 3).await.resources.len(), 1);
    let altered = c
        .call(
            &IncrementalAlterConfigsRequest::default().with_resources(vec![
                incremental_alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("t"))
                    .with_configs(vec![
                        incremental_alter_configs_request::AlterableConfig::default()
                            .with_name(StrBytes::from_static_str("max.message.bytes"))
                            .with_config_operation(0)
                            .with_value(Some(StrBytes::from_static_str("2000000"))),
                    ]),
            ]),
            1,
        )
        .await;
    assert_eq!(altered.responses[0].error_code, 0);
    drop(c);
    first.stop().await.unwrap();

    // another process would do the same: a new broker, a new port, nothing but the URL
    let second = TestBroker::with(on(&url)).await;
    let mut c = second.client().await;
    assert_eq!(topic_id(&mut c, "t").await, id, "the topic keeps its id");
    let r = c.call(&fetch_request("t", 1, 0), 12).await;
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert_eq!(p.high_watermark, 4);
    let fetched_records = decode_records(p);
    assert_eq!(
        fetched_records.iter().map(|r| r.offset).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    assert_eq!(fetched_records[1].value, records[1].value);
    let r = c.call(&offset_fetch("g", &[1]), 1).await;
    assert_eq!(fetched(&r), vec![4], "the committed offset");
    let r = c
        .call(
            &MetadataRequest::default()
                .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
                )
                .with_name(Some(topic_name("later")))])),
            12,
        )
        .await;
    assert_eq!(
        r.topics[0].partitions.len(),
        3,
        "a topic created at run time"
    );
    let dirs = c
        .call(&DescribeLogDirsRequest::default().with_topics(None), 1)
        .await;
    assert!(
        dirs.results[0].log_dir.starts_with("(postgresql host="),
        "DescribeLogDirs names the database: {}",
        dirs.results[0].log_dir.as_str()
    );
    let described = c
        .call(
            &DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("t"))
                    .with_configuration_keys(Some(vec![StrBytes::from_static_str(
                        "max.message.bytes",
                    )])),
            ]),
            4,
        )
        .await;
    let retention = &described.results[0].configs[0];
    assert_eq!(
        (
            retention.value.as_ref().map(|v| v.as_str()),
            retention.config_source
        ),
        (Some("2000000"), 1),
        "a topic config set through the first broker"
    );
    let acls = c.call(&acl_filter(), 3).await;
    assert_eq!(acls.error_code, 0);
    assert_eq!(
        acls.resources
            .iter()
            .map(|r| (r.resource_name.to_string(), r.acls[0].principal.to_string()))
            .collect::<Vec<_>>(),
        vec![("g".to_string(), "User:alice".to_string())],
        "the ACL created through the first broker"
    );
    let (code, base) = produce(&mut c, "t", 1, batch(&records[..1], Compression::None), 9).await;
    assert_eq!((code, base), (0, 4), "appends go on after the last offset");
    second.stop().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_database_is_named_at_start_without_its_password() {
    let Some(pg) = server().await else { return };
    // a database that does not exist on a running server
    let url = format!(
        "postgres://postgres:hunter2@/no_such_db?host={}",
        pg.socket_dir().display()
    );
    let Err(err) = Server::bind(on(&url)).await else {
        panic!("started on a database that does not exist");
    };
    let text = err.to_string();
    assert!(text.contains("dbname=no_such_db"), "{text}");
    assert!(text.contains("port=5432"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    // nothing listens there at all
    let Err(err) = Server::bind(on("postgres://u:hunter2@127.0.0.1:1/kafka")).await else {
        panic!("started without a database");
    };
    let text = err.to_string();
    assert!(
        text.contains("host=127.0.0.1 port=1 dbname=kafka"),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
}

/// Produces `records` to `t-0` every 100 ms until it is acknowledged (bounded by
/// [`BOUND`]): its base offset.
async fn produce_until_acknowledged(c: &mut Client, records: &[Record]) -> i64 {
    bounded("a produce once PostgreSQL is back", async {
        loop {
            let (code, base) = produce(c, "t", 0, batch(records, Compression::None), 9).await;
            if code == 0 {
                return base;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
}

/// PostgreSQL stopped under a running broker: produce and commit fail with Kafka's retriable
/// storage error (the broker neither hangs nor dies, ApiVersions is still answered); once the
/// server is back the broker reconnects by itself, and nothing acknowledged before is lost.
#[tokio::test]
async fn the_broker_rides_out_a_postgresql_restart() {
    let Some(mut pg) = server().await else { return };
    let url = bounded("create database", pg.create_database("restart"))
        .await
        .unwrap();
    let broker = TestBroker::with(on(&url)).await;
    let mut c = broker.client().await;
    let one = vec![record(0, 1_000)];
    assert_eq!(
        produce(&mut c, "t", 0, batch(&one, Compression::None), 9).await,
        (0, 0)
    );
    let r = c.call(&commit("g", "", -1, &[("t", 0, 1)]), 2).await;
    assert_eq!(commit_codes(&r), vec![0]);

    pg.stop().unwrap();
    let (code, _) = produce(&mut c, "t", 0, batch(&one, Compression::None), 9).await;
    assert_eq!(code, 56, "KAFKA_STORAGE_ERROR while PostgreSQL is down");
    let r = c.call(&commit("g", "", -1, &[("t", 0, 2)]), 2).await;
    let code = commit_codes(&r)[0];
    assert_eq!(
        code, 56,
        "KAFKA_STORAGE_ERROR for a commit while PostgreSQL is down"
    );
    let versions = c.call(&ApiVersionsRequest::default(), 3).await;
    assert_eq!(versions.error_code, 0, "the broker still answers");

    bounded("restart PostgreSQL", pg.start_again())
        .await
        .unwrap();
    let base = produce_until_acknowledged(&mut c, &one).await;
    assert_eq!(base, 1, "the refused produce wrote nothing");
    let r = c.call(&offset_fetch("g", &[0]), 1).await;
    assert_eq!(
        fetched(&r),
        vec![1],
        "the acknowledged commit, not the refused one"
    );
    let r = c.call(&commit("g", "", -1, &[("t", 0, 2)]), 2).await;
    assert_eq!(commit_codes(&r), vec![0]);
    // a long poll is woken by an append again (the LISTEN connection came back)
    let mut reader = broker.client().await;
    let poll = fetch_request("t", 0, 2).with_max_wait_ms(10_000);
    let waiting = tokio::spawn(async move { reader.call(&poll, 12).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(produce_until_acknowledged(&mut c, &one).await, 2);
    let r = bounded("the long poll", waiting).await.unwrap();
    assert_eq!(decode_records(&r.responses[0].partitions[0]).len(), 1);
    broker.stop().await.unwrap();
}

/// Idempotent and transactional producers' state (duplicates, sequences, the last stable
/// offset of an open transaction) is rebuilt from the batches PostgreSQL keeps.
#[tokio::test]
async fn producer_state_survives_a_restart_on_postgresql() {
    let Some(pg) = server().await else { return };
    let url = bounded("create database", pg.create_database("producers"))
        .await
        .unwrap();
    crate::idempotence::producer_state_survives_a_restart(|| on(&url)).await;
}

/// The transaction coordinator's records are kept in PostgreSQL: a committed transaction,
/// an open one its producer commits after the restart, producer ids continued.
#[tokio::test]
async fn transactions_survive_a_restart_on_postgresql() {
    let Some(pg) = server().await else { return };
    let url = bounded("create database", pg.create_database("transactions"))
        .await
        .unwrap();
    crate::transactions::transactions_survive_a_restart(|| on(&url)).await;
}

/// A group migrated between the two protocols (issue 49) is reloaded from PostgreSQL as it
/// was.
#[tokio::test]
async fn a_migrated_group_survives_a_restart_on_postgresql() {
    let Some(pg) = server().await else { return };
    let url = bounded("create database", pg.create_database("migrated"))
        .await
        .unwrap();
    crate::consumer_groups::a_migrated_group_survives_a_restart(|| on(&url)).await;
}

/// Share groups' share-partitions are kept in PostgreSQL.
#[tokio::test]
async fn share_state_survives_a_restart_on_postgresql() {
    let Some(pg) = server().await else { return };
    let url = bounded("create database", pg.create_database("share"))
        .await
        .unwrap();
    crate::share_groups::share_state_survives_a_restart(|| on(&url)).await;
}

/// Starts the broker binary on `url` as node `node` with a short lease (1.5 s, heartbeats
/// every 300 ms) and `--topic topic`, and waits for its `listening on` line.
async fn spawn_node(
    url: &str,
    node: &str,
    topic: &str,
) -> (tokio::process::Child, std::net::SocketAddr) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_broker"));
    command
        .args([
            "--listen",
            "127.0.0.1:0",
            "--topic",
            topic,
            "--postgres",
            url,
        ])
        .args(["--node-id", node, "--broker-session-timeout-ms", "1500"])
        .args(["--broker-heartbeat-interval-ms", "300"])
        .stderr(std::process::Stdio::null());
    let (child, addr, _) = spawn_listening(command).await;
    (child, addr)
}

async fn kill(child: &tokio::process::Child, signal: &str) {
    let pid = child.id().expect("running").to_string();
    let status = bounded(
        "kill",
        tokio::process::Command::new("kill")
            .args(["-s", signal, &pid])
            .status(),
    )
    .await
    .expect("kill runs");
    assert!(status.success(), "kill -s {signal} {pid}");
}

/// The coordinator of `group` as `c`'s broker answers FindCoordinator v3: `(error, node)`.
async fn coordinator_of(c: &mut Client, group: &str) -> (i16, i32) {
    let r = c
        .call(
            &FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.into())),
            3,
        )
        .await;
    (r.error_code, r.node_id.0)
}

/// Asks `c`'s broker until `done` holds for its answer (bounded at 20 s).
async fn until<T: std::fmt::Debug>(
    what: &str,
    c: &mut Client,
    mut ask: impl for<'a> FnMut(
        &'a mut Client,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = T> + 'a>>,
    done: impl Fn(&T) -> bool,
) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let answer = ask(c).await;
        if done(&answer) {
            return answer;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: still {answer:?} after 20 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_paused_broker_loses_its_slots_and_none_of_its_commits_land() {
    let Some(pg) = server().await else { return };
    let url = bounded("create database", pg.create_database("deposed"))
        .await
        .expect("database");
    let (a, a_addr) = spawn_node(&url, "1", "t:1").await;
    let mut to_a = Client::connect(a_addr).await;
    let r = to_a.call(&commit("g", "", -1, &[("t", 0, 5)]), 8).await;
    assert_eq!(commit_codes(&r), [0]);
    let one = batch(&[record(0, 1)], Compression::None);
    assert_eq!(produce(&mut to_a, "t", 0, one.clone(), 9).await, (0, 0));
    let mut produce_to_a = Client::connect(a_addr).await;
    assert_eq!(
        coordinator_of(&mut to_a, "g").await,
        (0, 1),
        "node 1 coordinates"
    );

    // Node 1 pauses past its lease; node 2, started meanwhile, takes every slot over once
    // node 1's lease has run out (until then node 1 still owns them: NOT_COORDINATOR).
    kill(&a, "STOP").await;
    let (b, b_addr) = spawn_node(&url, "2", "t:1").await;
    let mut to_b = Client::connect(b_addr).await;
    until(
        "node 2 coordinates g",
        &mut to_b,
        |c| Box::pin(coordinator_of(c, "g")),
        |&r| r == (0, 2),
    )
    .await;
    let r = to_b.call(&offset_fetch("g", &[0]), 7).await;
    assert_eq!(fetched(&r), [5], "node 2 loaded node 1's commit");
    let r = to_b.call(&commit("g", "", -1, &[("t", 0, 7)]), 8).await;
    assert_eq!(commit_codes(&r), [0]);
    assert_eq!(produce(&mut to_b, "t", 0, one.clone(), 9).await, (0, 1));

    // A commit and an append that reach node 1 as it wakes up never land: whether node 1's
    // heartbeat or its write finds out first, they are refused.
    let mut commits = Vec::new();
    for offset in 9..14 {
        commits.push(
            to_a.send(&commit("g", "", -1, &[("t", 0, offset)]), 8)
                .await,
        );
    }
    let mut appends = Vec::new();
    for _ in 0..3 {
        appends.push(
            produce_to_a
                .send(&produce_request("t", 0, one.clone(), -1), 9)
                .await,
        );
    }
    kill(&a, "CONT").await;
    let mut refused = 0;
    for correlation in commits {
        let r = to_a.receive::<OffsetCommitRequest>(correlation, 8).await;
        assert_eq!(commit_codes(&r), [16], "NOT_COORDINATOR");
        refused += 1;
    }
    for correlation in appends {
        let r = produce_to_a.receive::<ProduceRequest>(correlation, 9).await;
        let code = r.responses[0].partition_responses[0].error_code;
        assert!(
            code == 6 || code == 56,
            "NOT_LEADER_OR_FOLLOWER, or KAFKA_STORAGE_ERROR from the fence: {code}"
        );
        refused += 1;
    }
    assert_eq!(
        refused, 8,
        "every write in flight at the paused broker refused"
    );
    // Node 1 carries on as a broker of the cluster: it never serves the state it had before
    // the pause again. Asked about g, it says NOT_COORDINATOR, or, once the two brokers have
    // shared the slots out and g's slot is node 1's again, serves what the database holds
    // (COORDINATOR_LOAD_IN_PROGRESS while it loads it).
    for _ in 0..10 {
        let r = to_a.call(&offset_fetch("g", &[0]), 7).await;
        match r.error_code {
            14 | 16 => {}
            0 => assert_eq!(fetched(&r), [7], "node 1 reloaded g"),
            other => panic!("unexpected error {other}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (code, node) = coordinator_of(&mut to_b, "g").await;
    assert_eq!(code, 0);
    let to_coordinator = if node == 1 { &mut to_a } else { &mut to_b };
    let r = until(
        "g served",
        to_coordinator,
        |c| Box::pin(async { c.call(&offset_fetch("g", &[0]), 7).await }),
        |r| r.error_code == 0,
    )
    .await;
    assert_eq!(fetched(&r), [7], "node 1's late commit did not land");
    // The late append did not land either: the next offset is 2, wherever t-0 is led.
    let mut appended = None;
    for c in [&mut to_a, &mut to_b] {
        let (code, base) = produce(c, "t", 0, one.clone(), 9).await;
        if code == 0 {
            appended = Some(base);
            break;
        }
        assert_eq!(code, 6, "NOT_LEADER_OR_FOLLOWER");
    }
    assert_eq!(appended, Some(2), "node 1's late append did not land");
    for mut child in [a, b] {
        kill(&child, "TERM").await;
        let status = bounded("a broker stops", child.wait()).await.expect("wait");
        assert!(status.success(), "{status}");
    }
}

/// Three brokers over one database share the groups and the partitions out; each answers
/// for what it does not serve with the broker that does; a killed broker's groups move to
/// the live ones and carry on from what they had committed.
#[tokio::test]
async fn three_brokers_share_the_work_and_a_killed_ones_moves() {
    let Some(pg) = server().await else { return };
    let url = bounded("create database", pg.create_database("three"))
        .await
        .expect("database");
    let mut nodes = Vec::new();
    for node in ["1", "2", "3"] {
        nodes.push(spawn_node(&url, node, "t:6").await);
    }
    let mut clients = Vec::new();
    for (_, addr) in &nodes {
        clients.push(Client::connect(*addr).await);
    }
    // Every broker lists the three, and names a leader for every partition of t.
    for c in clients.iter_mut() {
        until(
            "three brokers, every partition led",
            c,
            |c| {
                Box::pin(async {
                    let r = c
                        .call(
                            &MetadataRequest::default().with_topics(Some(vec![
                                metadata_request::MetadataRequestTopic::default()
                                    .with_name(Some(topic_name("t"))),
                            ])),
                            12,
                        )
                        .await;
                    let brokers: Vec<i32> = r.brokers.iter().map(|b| b.node_id.0).collect();
                    let leaders: Vec<i32> = r.topics[0]
                        .partitions
                        .iter()
                        .map(|p| p.leader_id.0)
                        .collect();
                    (brokers, leaders)
                })
            },
            |(brokers, leaders)| brokers == &[1, 2, 3] && leaders.iter().all(|&l| l > 0),
        )
        .await;
    }
    // Twenty groups: their coordinators are spread, and every broker names the same one
    // once the slots have settled (the same answers from all three, three rounds in a row,
    // each round longer than a heartbeat interval).
    let groups: Vec<String> = (0..20).map(|i| format!("group-{i}")).collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut last = Vec::new();
    let mut same = 0;
    let coordinators = loop {
        let mut round = Vec::new();
        for c in clients.iter_mut() {
            for g in &groups {
                round.push(coordinator_of(c, g).await);
            }
        }
        let agreed = round.iter().all(|&(code, _)| code == 0) && round[..20].repeat(3) == round;
        same = if agreed && round == last { same + 1 } else { 0 };
        if same == 2 {
            break round[..20]
                .iter()
                .map(|&(_, node)| node)
                .collect::<Vec<_>>();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the coordinators never settled: {round:?}"
        );
        last = round;
        tokio::time::sleep(Duration::from_millis(400)).await;
    };
    let mut distinct = coordinators.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() >= 2, "spread: {coordinators:?}");
    // A Produce at a broker that does not lead the partition: NOT_LEADER_OR_FOLLOWER, with
    // the leader in Kafka's current-leader fields (Produce v10+, KIP-951); the leader takes
    // it.
    let leader = leaders_of_t(&mut clients[0]).await[0];
    let other = usize::try_from(leader % 3).unwrap();
    let one = batch(&[record(0, 1)], Compression::None);
    let r = clients[other]
        .call(&produce_request("t", 0, one.clone(), -1), 10)
        .await;
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 6, "NOT_LEADER_OR_FOLLOWER");
    assert_eq!(p.current_leader.leader_id.0, leader);
    let endpoint = r
        .node_endpoints
        .iter()
        .find(|e| e.node_id.0 == leader)
        .expect("the leader's endpoint");
    let leader_at = usize::try_from(leader - 1).unwrap();
    assert_eq!(
        (endpoint.host.to_string(), endpoint.port),
        (
            nodes[leader_at].1.ip().to_string(),
            i32::from(nodes[leader_at].1.port())
        )
    );
    assert_eq!(
        produce(&mut clients[leader_at], "t", 0, one, 10).await,
        (0, 0)
    );
    // The coordinator takes a commit; another broker answers NOT_COORDINATOR and writes
    // nothing.
    for (g, &node) in groups.iter().zip(&coordinators) {
        let at = usize::try_from(node - 1).unwrap();
        let r = clients[at]
            .call(&commit(g, "", -1, &[("t", 0, 11)]), 8)
            .await;
        assert_eq!(commit_codes(&r), [0], "{g} at node {node}");
        let other = (at + 1) % 3;
        let r = clients[other]
            .call(&commit(g, "", -1, &[("t", 0, 99)]), 8)
            .await;
        assert_eq!(commit_codes(&r), [16], "{g} at another broker");
    }

    // Kill the coordinator of group-0; the survivors take its slots over, and the group is
    // served by one of them with its commit.
    let victim = coordinators[0];
    let at = usize::try_from(victim - 1).unwrap();
    nodes[at].0.start_kill().expect("kill");
    bounded("the victim exits", nodes[at].0.wait())
        .await
        .expect("wait");
    let survivor = (at + 1) % 3;
    let (_, node) = until(
        "group-0 moved",
        &mut clients[survivor],
        |c| Box::pin(coordinator_of(c, "group-0")),
        |&(code, node)| code == 0 && node != victim,
    )
    .await;
    let to = usize::try_from(node - 1).unwrap();
    let r = until(
        "group-0 served",
        &mut clients[to],
        |c| Box::pin(async { c.call(&offset_fetch("group-0", &[0]), 7).await }),
        |r| r.error_code == 0,
    )
    .await;
    assert_eq!(fetched(&r), [11], "the commit made before the kill");
    let r = clients[to]
        .call(&commit("group-0", "", -1, &[("t", 0, 12)]), 8)
        .await;
    assert_eq!(commit_codes(&r), [0]);
    for (i, (child, _)) in nodes.iter_mut().enumerate() {
        if i != at {
            kill(child, "TERM").await;
            let status = bounded("a broker stops", child.wait()).await.expect("wait");
            assert!(status.success(), "{status}");
        }
    }
}

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_string()))
}

/// The coordinator of transactional id `id` as `c`'s broker answers FindCoordinator v3:
/// `(error, node)`.
async fn txn_coordinator_of(c: &mut Client, id: &str) -> (i16, i32) {
    let r = c
        .call(
            &FindCoordinatorRequest::default()
                .with_key(StrBytes::from_string(id.into()))
                .with_key_type(1),
            3,
        )
        .await;
    (r.error_code, r.node_id.0)
}

/// The leader of every partition of `t` as `c`'s broker answers Metadata v12.
async fn leaders_of_t(c: &mut Client) -> Vec<i32> {
    let r = c
        .call(
            &MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name("t"))),
            ])),
            12,
        )
        .await;
    let mut partitions: Vec<(i32, i32)> = r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect();
    partitions.sort_unstable();
    partitions.into_iter().map(|(_, leader)| leader).collect()
}

/// A read_committed fetch of `t`-`partition` from 0: (data records outside aborted
/// transactions, last stable offset, high watermark, producer ids of the aborted
/// transactions).
async fn read_committed_at(c: &mut Client, partition: i32) -> (usize, i64, i64, Vec<i64>) {
    let request = fetch_request("t", partition, 0).with_isolation_level(1);
    let r = c.call(&request, 11).await;
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "fetch of t-{partition}");
    let aborted: Vec<(i64, i64)> = p
        .aborted_transactions
        .clone()
        .unwrap_or_default()
        .iter()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    let records = decode_records(p)
        .iter()
        .filter(|r| !r.control)
        .filter(|r| {
            !aborted
                .iter()
                .any(|&(pid, first)| pid == r.producer_id && r.offset >= first)
        })
        .count();
    (
        records,
        p.last_stable_offset,
        p.high_watermark,
        aborted.iter().map(|&(pid, _)| pid).collect(),
    )
}

/// One transaction of `id` (producer `p`) as a client runs it: `partitions` (each with the
/// client of its leader and the sequence of its first record) get three records each, the
/// group gets `offset` for t-0 at its coordinator, then EndTxn at the transaction's
/// coordinator, retried while it answers CONCURRENT_TRANSACTIONS (markers not all written
/// yet); returns EndTxn's last answer.
#[allow(clippy::too_many_arguments)]
async fn run_transaction(
    coordinator: &mut Client,
    leaders: &mut [(i32, &mut Client, i32)],
    group_coordinator: &mut Client,
    id: &'static str,
    (pid, epoch): (i64, i16),
    group: &str,
    offset: i64,
    commit: bool,
) -> i16 {
    let add = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(id))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(leaders.iter().map(|(p, _, _)| *p).collect()),
        ]);
    let r = coordinator.call(&add, 3).await;
    for t in &r.results_by_topic_v3_and_below {
        for p in &t.results_by_partition {
            assert_eq!(p.partition_error_code, 0, "AddPartitionsToTxn");
        }
    }
    for (partition, c, sequence) in leaders.iter_mut() {
        let records = crate::idempotence::producer_batch(pid, epoch, *sequence, 3, true);
        let request =
            produce_request("t", *partition, records, -1).with_transactional_id(Some(txn_id(id)));
        let r = c.call(&request, 7).await;
        let code = r.responses[0].partition_responses[0].error_code;
        assert_eq!(
            code, 0,
            "transactional produce to t-{partition} at its leader"
        );
        *sequence += 3;
    }
    let add_offsets = AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())));
    assert_eq!(coordinator.call(&add_offsets, 3).await.error_code, 0);
    let txn_commit = TxnOffsetCommitRequest::default()
        .with_transactional_id(txn_id(id))
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_member_id(StrBytes::default())
        .with_topics(vec![
            txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(-1),
                ]),
        ]);
    let r = group_coordinator.call(&txn_commit, 3).await;
    let codes: Vec<i16> = r
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect();
    assert_eq!(codes, [0], "TxnOffsetCommit at the group's coordinator");
    let end = EndTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let code = coordinator.call(&end, 3).await.error_code;
        // CONCURRENT_TRANSACTIONS: Prepare* with markers still due; a client retries.
        if code != 51 || tokio::time::Instant::now() >= deadline {
            return code;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The state of transactional id `id` at `c`'s broker (DescribeTransactions).
async fn txn_state(c: &mut Client, id: &str) -> (i16, String) {
    let r = c
        .call(
            &DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id(id)]),
            0,
        )
        .await;
    let s = &r.transaction_states[0];
    (s.error_code, s.transaction_state.to_string())
}

/// A transaction whose coordinator is one broker, whose partitions other brokers lead and
/// whose group a third coordinates completes: its coordinator sends WriteTxnMarkers to the
/// leaders (the markers move their last stable offsets) and a marker into the group's
/// `__consumer_offsets` partition to the group's coordinator (the offsets become visible);
/// an aborted one leaves its records skipped and its offsets uncommitted.
#[tokio::test]
async fn a_transaction_across_brokers_completes_with_markers_sent_to_the_leaders() {
    let Some(pg) = server().await else { return };
    let url = bounded("create database", pg.create_database("txn_across"))
        .await
        .expect("database");
    let mut nodes = Vec::new();
    for node in ["1", "2", "3"] {
        nodes.push(spawn_node(&url, node, "t:6").await);
    }
    let mut clients = Vec::new();
    for (_, addr) in &nodes {
        clients.push(Client::connect(*addr).await);
    }
    let ids: Vec<&'static str> = vec![
        "tx-0", "tx-1", "tx-2", "tx-3", "tx-4", "tx-5", "tx-6", "tx-7", "tx-8", "tx-9",
    ];
    let groups: Vec<String> = (0..10).map(|i| format!("group-{i}")).collect();
    // Wait until the three brokers agree, twice in a row, on the leaders of t and on the
    // coordinators of the ids and groups.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut last = None;
    let mut same = 0;
    let (leaders, txn_coordinators, group_coordinators) = loop {
        let mut round = Vec::new();
        for c in clients.iter_mut() {
            let leaders = leaders_of_t(c).await;
            let mut txns = Vec::new();
            for id in &ids {
                txns.push(txn_coordinator_of(c, id).await);
            }
            let mut gs = Vec::new();
            for g in &groups {
                gs.push(coordinator_of(c, g).await);
            }
            round.push((leaders, txns, gs));
        }
        let settled = round.iter().all(|(leaders, txns, gs)| {
            leaders.len() == 6
                && leaders.iter().all(|&l| l > 0)
                && txns.iter().chain(gs).all(|&(code, _)| code == 0)
        }) && round.iter().all(|r| *r == round[0]);
        same = if settled && last.as_ref() == Some(&round[0]) {
            same + 1
        } else {
            0
        };
        if same == 2 {
            break round.swap_remove(0);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cluster never settled: {round:?}"
        );
        last = Some(round.swap_remove(0));
        tokio::time::sleep(Duration::from_millis(400)).await;
    };
    // A transactional id coordinated by X, a partition led by each other broker (at least
    // one), and a group coordinated by another broker than X.
    let (id, x, partitions, group, w) = ids
        .iter()
        .zip(&txn_coordinators)
        .find_map(|(id, &(_, x))| {
            let mut partitions: Vec<(i32, i32)> = Vec::new();
            for (p, &leader) in leaders.iter().enumerate() {
                if leader != x && !partitions.iter().any(|&(_, l)| l == leader) {
                    partitions.push((i32::try_from(p).unwrap(), leader));
                }
            }
            let (g, &(_, w)) = groups
                .iter()
                .zip(&group_coordinators)
                .find(|(_, &(_, w))| w != x)?;
            (!partitions.is_empty()).then(|| (*id, x, partitions, g.clone(), w))
        })
        .expect("a transactional id, partitions and a group spread over the brokers");
    assert!(partitions.iter().all(|&(_, leader)| leader != x));
    let index = |node: i32| usize::try_from(node - 1).unwrap();
    // One client per role: the coordinator's, one per leader, the group coordinator's.
    let mut coordinator = Client::connect(nodes[index(x)].1).await;
    let mut group_coordinator = Client::connect(nodes[index(w)].1).await;
    let mut leader_clients = Vec::new();
    for &(_, leader) in &partitions {
        leader_clients.push(Client::connect(nodes[index(leader)].1).await);
    }
    let r = coordinator
        .call(
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(txn_id(id)))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
            4,
        )
        .await;
    assert_eq!(r.error_code, 0, "InitProducerId at the coordinator");
    let producer = (r.producer_id.0, r.producer_epoch);

    // Committed: the records are read_committed at each leader once the marker moved the
    // LSO past them; the offset is visible at the group's coordinator.
    let mut leaders_rw: Vec<(i32, &mut Client, i32)> = partitions
        .iter()
        .zip(leader_clients.iter_mut())
        .map(|(&(p, _), c)| (p, c, 0))
        .collect();
    let code = run_transaction(
        &mut coordinator,
        &mut leaders_rw,
        &mut group_coordinator,
        id,
        producer,
        &group,
        7,
        true,
    )
    .await;
    assert_eq!(code, 0, "EndTxn(commit) completes");
    assert_eq!(
        txn_state(&mut coordinator, id).await,
        (0, "CompleteCommit".to_string())
    );
    for (partition, c, _) in leaders_rw.iter_mut() {
        let (records, lso, hw, aborted) = read_committed_at(c, *partition).await;
        assert_eq!(
            (records, lso, hw, aborted),
            (3, 4, 4, vec![]),
            "t-{partition}: three records and the commit marker, all stable"
        );
    }
    let r = group_coordinator
        .call(&offset_fetch(&group, &[0]).with_require_stable(true), 7)
        .await;
    assert_eq!(r.error_code, 0);
    assert_eq!(
        r.topics[0].partitions[0].error_code, 0,
        "nothing pending any more"
    );
    assert_eq!(fetched(&r), [7], "the transactional offset is committed");

    // Aborted: its records are skipped by read_committed, its offset never lands.
    let code = run_transaction(
        &mut coordinator,
        &mut leaders_rw,
        &mut group_coordinator,
        id,
        producer,
        &group,
        9,
        false,
    )
    .await;
    assert_eq!(code, 0, "EndTxn(abort) completes");
    assert_eq!(
        txn_state(&mut coordinator, id).await,
        (0, "CompleteAbort".to_string())
    );
    for (partition, c, _) in leaders_rw.iter_mut() {
        let (records, lso, hw, aborted) = read_committed_at(c, *partition).await;
        assert_eq!(
            (records, lso, hw, aborted),
            (3, 8, 8, vec![producer.0]),
            "t-{partition}: the aborted records are skipped, the abort marker is stable"
        );
    }
    let r = group_coordinator
        .call(&offset_fetch(&group, &[0]).with_require_stable(true), 7)
        .await;
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    assert_eq!(fetched(&r), [7], "the aborted offset was dropped");
    // And the id starts again: InitProducerId bumps the epoch (nothing is left pending).
    let r = coordinator
        .call(
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(txn_id(id)))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
            4,
        )
        .await;
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (0, producer.0, producer.1 + 1)
    );
    drop(leaders_rw);
    for (child, _) in nodes.iter_mut() {
        kill(child, "TERM").await;
        let status = bounded("a broker stops", child.wait()).await.expect("wait");
        assert!(status.success(), "{status}");
    }
}

/// An ACL for `principal` on group `g` (READ, ALLOW).
fn acl_for(principal: &str) -> CreateAclsRequest {
    CreateAclsRequest::default().with_creations(vec![create_acls_request::AclCreation::default()
        .with_resource_type(3)
        .with_resource_name(StrBytes::from_static_str("g"))
        .with_resource_pattern_type(3)
        .with_principal(StrBytes::from_string(principal.into()))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(3)
        .with_permission_type(3)])
}

/// The principals of every ACL `c`'s broker holds.
async fn principals(c: &mut Client) -> Vec<String> {
    let r = c.call(&acl_filter(), 3).await;
    assert_eq!(r.error_code, 0);
    let mut all: Vec<String> = r
        .resources
        .iter()
        .flat_map(|res| res.acls.iter().map(|a| a.principal.to_string()))
        .collect();
    all.sort();
    all
}

/// `max.message.bytes` of topic `t` as `c`'s broker describes it.
async fn max_message_bytes(c: &mut Client) -> Option<String> {
    let r = c
        .call(
            &DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("t"))
                    .with_configuration_keys(Some(vec![StrBytes::from_static_str(
                        "max.message.bytes",
                    )])),
            ]),
            4,
        )
        .await;
    r.results[0].configs[0]
        .value
        .as_ref()
        .map(|v| v.to_string())
}

/// Two live brokers over one database: what is changed through one (ACLs, a topic config,
/// SCRAM credentials) is in force at the other a heartbeat later, and changes made through
/// both, each before it has seen the other's, are all kept.
#[tokio::test]
async fn changes_through_one_broker_reach_the_others_and_none_is_lost() {
    let Some(pg) = server().await else { return };
    let url = bounded("create database", pg.create_database("documents_across"))
        .await
        .unwrap();
    let node = |id: i32| BrokerConfig {
        node_id: id,
        broker_session_timeout_ms: 1_500,
        broker_heartbeat_interval_ms: 200,
        ..on(&url)
    };
    let a = TestBroker::with(node(1)).await;
    let b = TestBroker::with(node(2)).await;
    let (mut to_a, mut to_b) = (a.client().await, b.client().await);
    // One right after the other, before either has read the documents again: both kept.
    assert_eq!(
        to_a.call(&acl_for("User:alice"), 3).await.results[0].error_code,
        0
    );
    assert_eq!(
        to_b.call(&acl_for("User:bob"), 3).await.results[0].error_code,
        0
    );
    let both = vec!["User:alice".to_string(), "User:bob".to_string()];
    for c in [&mut to_a, &mut to_b] {
        until("both ACLs", c, |c| Box::pin(principals(c)), |p| *p == both).await;
    }
    // A topic config set through one broker is described by the other (topic `t` is the
    // test configuration's).
    let altered = to_a
        .call(
            &IncrementalAlterConfigsRequest::default().with_resources(vec![
                incremental_alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("t"))
                    .with_configs(vec![
                        incremental_alter_configs_request::AlterableConfig::default()
                            .with_name(StrBytes::from_static_str("max.message.bytes"))
                            .with_config_operation(0)
                            .with_value(Some(StrBytes::from_static_str("2000000"))),
                    ]),
            ]),
            1,
        )
        .await;
    assert_eq!(altered.responses[0].error_code, 0);
    until(
        "the topic config at the other broker",
        &mut to_b,
        |c| Box::pin(max_message_bytes(c)),
        |v| v.as_deref() == Some("2000000"),
    )
    .await;
    // A SCRAM credential created through one broker is described by the other.
    let upsert = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_static_str("carol"))
            .with_mechanism(1)
            .with_iterations(4096)
            .with_salt(bytes::Bytes::from_static(b"0123456789abcdef"))
            .with_salted_password(bytes::Bytes::from(vec![7u8; 32])),
    ]);
    let r = to_a.call(&upsert, 0).await;
    assert_eq!(r.results[0].error_code, 0, "{r:?}");
    until(
        "the credential at the other broker",
        &mut to_b,
        |c| {
            Box::pin(async {
                let r = c
                    .call(
                        &DescribeUserScramCredentialsRequest::default().with_users(None),
                        0,
                    )
                    .await;
                r.results
                    .iter()
                    .map(|u| u.user.to_string())
                    .collect::<Vec<_>>()
            })
        },
        |users| users.iter().any(|u| u == "carol"),
    )
    .await;
    drop((to_a, to_b));
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

/// The leader of `t`'s `partition` as `c`'s broker names it (-1 while none).
async fn leader_of_t(c: &mut Client, partition: usize) -> i32 {
    let r = c
        .call(
            &MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name("t"))),
            ])),
            12,
        )
        .await;
    r.topics[0]
        .partitions
        .get(partition)
        .map_or(-1, |p| p.leader_id.0)
}

/// PostgreSQL stopped under three brokers for longer than their leases: once it is back,
/// the brokers share the slots out again and every group and partition is served, with
/// every commit and record acknowledged before the outage.
#[tokio::test]
async fn a_cluster_rides_out_a_postgresql_restart() {
    let Some(mut pg) = server().await else { return };
    let url = bounded("create database", pg.create_database("cluster_restart"))
        .await
        .unwrap();
    let node = |id: i32| BrokerConfig {
        node_id: id,
        broker_session_timeout_ms: 1_500,
        broker_heartbeat_interval_ms: 200,
        ..on(&url)
    };
    let brokers = [
        TestBroker::with(node(1)).await,
        TestBroker::with(node(2)).await,
        TestBroker::with(node(3)).await,
    ];
    let mut clients = Vec::new();
    for b in &brokers {
        clients.push(b.client().await);
    }
    let groups = ["a", "b", "c", "d", "e", "f"];
    // Served, each at the broker that serves it now (the slots settle as the three share
    // them out, so every step waits until its broker takes it).
    async fn commit_at_coordinator(clients: &mut [Client], group: &str, offset: i64) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let (code, node) = coordinator_of(&mut clients[0], group).await;
            if code == 0 {
                let at = usize::try_from(node - 1).unwrap();
                let r = clients[at]
                    .call(&commit(group, "", -1, &[("t", 0, offset)]), 8)
                    .await;
                if commit_codes(&r) == [0] {
                    return;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{group} never served"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    async fn produce_at_leader(clients: &mut [Client], partition: usize) -> i64 {
        let one = batch(&[record(0, 1_000)], Compression::None);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let leader = leader_of_t(&mut clients[0], partition).await;
            if leader > 0 {
                let at = usize::try_from(leader - 1).unwrap();
                let p = i32::try_from(partition).unwrap();
                let (code, base) = produce(&mut clients[at], "t", p, one.clone(), 9).await;
                if code == 0 {
                    return base;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "t-{partition} never led"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    for g in groups {
        commit_at_coordinator(&mut clients, g, 1).await;
    }
    for p in 0..2 {
        assert_eq!(produce_at_leader(&mut clients, p).await, 0);
    }

    // PostgreSQL goes away for twice the lease: every lease runs out meanwhile.
    pg.stop().unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    bounded("restart PostgreSQL", pg.start_again())
        .await
        .unwrap();

    for g in groups {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let offsets = loop {
            let (code, node) = coordinator_of(&mut clients[0], g).await;
            if code == 0 {
                let at = usize::try_from(node - 1).unwrap();
                let r = clients[at].call(&offset_fetch(g, &[0]), 7).await;
                if r.error_code == 0 {
                    break fetched(&r);
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{g} never served again"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(offsets, [1], "{g}: the acknowledged commit");
    }
    for p in 0..2 {
        assert_eq!(
            produce_at_leader(&mut clients, p).await,
            1,
            "t-{p}: the record acknowledged before the outage, and nothing else"
        );
    }
    drop(clients);
    for b in brokers {
        b.stop().await.unwrap();
    }
}

/// Two brokers over one database: a share-partition's state moves with its partition's
/// leadership. What its first leader had accepted is never delivered again by the next one,
/// and what the first leader's member held is delivered again, counted (the second broker
/// started before any of it was written, so only the database can have told it).
#[tokio::test]
async fn a_share_partition_moves_with_its_leader() {
    use crate::share_groups::{acquired, fetch, join, part, produce_n, topic_id_of};
    let Some(pg) = server().await else { return };
    let url = bounded("create database", pg.create_database("share_moves"))
        .await
        .expect("database");
    let (a, a_addr) = spawn_node(&url, "1", "t:1").await;
    let (b, b_addr) = spawn_node(&url, "2", "t:1").await;
    let mut to_a = Client::connect(a_addr).await;
    let mut to_b = Client::connect(b_addr).await;
    // Wait until the two brokers have shared the slots out (each coordinates some of twenty
    // groups: a broker releases or takes its whole share in one heartbeat) and agree on
    // t-0's leader.
    for c in [&mut to_a, &mut to_b] {
        until(
            "both brokers coordinate groups",
            c,
            |c| {
                Box::pin(async {
                    let mut nodes = std::collections::BTreeSet::new();
                    for g in 0..20 {
                        nodes.insert(coordinator_of(c, &format!("g{g}")).await);
                    }
                    nodes
                })
            },
            |nodes| nodes.contains(&(0, 1)) && nodes.contains(&(0, 2)),
        )
        .await;
    }
    let leader = until(
        "a leader of t-0 both brokers agree on",
        &mut to_a,
        |c| Box::pin(leader_of_t(c, 0)),
        |&l| l == 1 || l == 2,
    )
    .await;
    until(
        "node 2 agrees",
        &mut to_b,
        |c| Box::pin(leader_of_t(c, 0)),
        |&l| l == leader,
    )
    .await;
    let (first, next, first_child, next_child) = if leader == 1 {
        (&mut to_a, &mut to_b, a, b)
    } else {
        (&mut to_b, &mut to_a, b, a)
    };
    let id = topic_id_of(first).await;
    produce_n(first, 0, 6).await;
    let set = IncrementalAlterConfigsRequest::default().with_resources(vec![crate::admin::alter(
        32,
        "sg",
        &[("share.auto.offset.reset", 0, Some("earliest"))],
    )]);
    // Group requests go to the group's coordinator, either broker.
    let (code, coordinator) = coordinator_of(first, "sg").await;
    assert_eq!(code, 0);
    {
        let to_coordinator = if coordinator == leader {
            &mut *first
        } else {
            &mut *next
        };
        assert_eq!(
            to_coordinator.call(&set, 1).await.responses[0].error_code,
            0
        );
        assert_eq!(to_coordinator.call(&join("sg", "a"), 1).await.error_code, 0);
    }
    let r = first.call(&fetch("a", 0, id, &[], &[0]), 1).await;
    assert_eq!(acquired(&r, 0), [(0, 5, 1)]);
    // 0-1 accepted, 2 rejected; 3-5 held by a.
    let r = first
        .call(&fetch("a", 1, id, &[(0, 0, 1, 1), (0, 2, 2, 3)], &[]), 1)
        .await;
    assert_eq!(part(&r, 0).acknowledge_error_code, 0);

    // The leader stops (its member's records given back, that written); the other broker
    // leads t-0 from then on.
    kill(&first_child, "TERM").await;
    let mut first_child = first_child;
    let status = bounded("the first leader stops", first_child.wait())
        .await
        .expect("wait");
    assert!(status.success(), "{status}");
    let own = if leader == 1 { 2 } else { 1 };
    until(
        "the other broker leads t-0",
        next,
        |c| Box::pin(leader_of_t(c, 0)),
        |&l| l == own,
    )
    .await;
    until(
        "the other broker coordinates sg",
        next,
        |c| Box::pin(coordinator_of(c, "sg")),
        |&r| r == (0, own),
    )
    .await;
    assert_eq!(next.call(&set, 1).await.responses[0].error_code, 0);
    let joined = until(
        "b joins sg",
        next,
        |c| Box::pin(async { c.call(&join("sg", "b"), 1).await.error_code }),
        |&code| code != 14,
    )
    .await;
    assert_eq!(joined, 0);
    let r = next.call(&fetch("b", 0, id, &[], &[0]), 1).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    assert_eq!(
        acquired(&r, 0),
        [(3, 5, 2)],
        "only what the first leader had not seen done, delivered again"
    );
    let mut next_child = next_child;
    kill(&next_child, "TERM").await;
    let status = bounded("a broker stops", next_child.wait())
        .await
        .expect("wait");
    assert!(status.success(), "{status}");
}

/// Compaction over PostgreSQL: the broker's cleaner leaves each key's latest record (the
/// scenario of `compaction.rs`).
#[tokio::test]
async fn a_compacted_topic_over_postgres_keeps_the_latest_value_of_each_key() {
    let Some(pg) = server().await else {
        return;
    };
    let url = bounded("create database", pg.create_database("compacted"))
        .await
        .unwrap();
    let config = BrokerConfig {
        records: crate::compaction::broker_config(None).records,
        ..on(&url)
    };
    crate::compaction::latest_values(config).await;
}
