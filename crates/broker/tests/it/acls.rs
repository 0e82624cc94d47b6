//! ACLs over the wire (`--authorizer`), with principals that log in with SASL PLAIN: what a
//! principal without ACLs is refused (and that a refused call changes nothing), ACLs made
//! with CreateAcls letting it in and DeleteAcls shutting it out again, who may manage ACLs,
//! bad ACLs refused, ACLs surviving a restart in the data directory.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use crate::common::*;
use broker::{BrokerConfig, SecurityProtocol};

const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A SASL_PLAINTEXT broker with the ACLs enforced; `admin` is a super user.
pub(crate) async fn acl_broker(
    data_dir: Option<&std::path::Path>,
) -> (TestBroker, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    std::fs::File::create(&users)
        .unwrap()
        .write_all(b"admin:admin-pw\nalice:alice-pw\nbob:bob-pw\n")
        .unwrap();
    std::fs::set_permissions(&users, std::fs::Permissions::from_mode(0o600)).unwrap();
    let broker = TestBroker::with(BrokerConfig {
        security_protocol: SecurityProtocol::SaslPlaintext,
        users_file: Some(users),
        authorizer: true,
        super_users: vec!["User:admin".into()],
        data_dir: data_dir.map(Into::into),
        ..config()
    })
    .await;
    (broker, dir)
}

/// A connection logged in as `user` (PLAIN, password `<user>-pw`).
pub(crate) async fn login(broker: &TestBroker, user: &str) -> Client {
    let mut c = broker.client().await;
    let handshake = SaslHandshakeRequest::default().with_mechanism(s("PLAIN"));
    assert_eq!(c.call(&handshake, 1).await.error_code, 0);
    let token = SaslAuthenticateRequest::default()
        .with_auth_bytes(Bytes::from(format!("\0{user}\0{user}-pw")));
    assert_eq!(c.call(&token, 2).await.error_code, 0, "{user} logs in");
    c
}

fn creation(
    kind: i8,
    name: &str,
    pattern: i8,
    principal: &str,
    op: i8,
) -> create_acls_request::AclCreation {
    create_acls_request::AclCreation::default()
        .with_resource_type(kind)
        .with_resource_name(s(name))
        .with_resource_pattern_type(pattern)
        .with_principal(s(principal))
        .with_host(s("*"))
        .with_operation(op)
        .with_permission_type(3)
}

const TOPIC: i8 = 2;
const GROUP: i8 = 3;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const READ: i8 = 3;
const WRITE: i8 = 4;
const DESCRIBE: i8 = 8;

async fn create(c: &mut Client, creations: Vec<create_acls_request::AclCreation>) -> Vec<i16> {
    let r = c
        .call(&CreateAclsRequest::default().with_creations(creations), 3)
        .await;
    r.results.iter().map(|x| x.error_code).collect()
}

/// Every ACL (null name, principal and host: kafka-protocol's defaults are empty strings).
fn any_filter() -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1)
}

async fn committed(c: &mut Client, group: &str) -> Vec<i64> {
    fetched(&c.call(&offset_fetch(group, &[0]), 1).await)
}

#[tokio::test]
async fn without_acls_a_principal_is_refused_everything_and_a_refused_call_changes_nothing() {
    let (broker, _dir) = acl_broker(None).await;
    let mut admin = login(&broker, "admin").await;
    let r = admin.call(&commit("g", "", -1, &[("t", 0, 1000)]), 2).await;
    assert_eq!(commit_codes(&r), vec![0], "the super user commits");
    let mut bob = login(&broker, "bob").await;
    // OffsetCommit: every partition refused, the offset unchanged
    let r = bob.call(&commit("g", "", -1, &[("t", 0, 0)]), 2).await;
    assert_eq!(commit_codes(&r), vec![GROUP_AUTHORIZATION_FAILED]);
    assert_eq!(committed(&mut admin, "g").await, vec![1000]);
    let r = bob.call(&offset_fetch("g", &[0]), 3).await;
    assert_eq!(r.error_code, GROUP_AUTHORIZATION_FAILED);
    let r = bob.call(&offset_fetch("g", &[0]), 1).await;
    assert_eq!(
        r.topics[0].partitions[0].error_code, GROUP_AUTHORIZATION_FAILED,
        "v1: per partition"
    );
    // the group APIs
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(s("consumer"));
    assert_eq!(
        bob.call(&join, 5).await.error_code,
        GROUP_AUTHORIZATION_FAILED
    );
    let hb = HeartbeatRequest::default().with_group_id(GroupId(s("g")));
    assert_eq!(
        bob.call(&hb, 1).await.error_code,
        GROUP_AUTHORIZATION_FAILED
    );
    let find = FindCoordinatorRequest::default().with_key(s("g"));
    assert_eq!(
        bob.call(&find, 1).await.error_code,
        GROUP_AUTHORIZATION_FAILED
    );
    let described = bob
        .call(
            &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]),
            1,
        )
        .await;
    assert_eq!(described.groups[0].error_code, GROUP_AUTHORIZATION_FAILED);
    let listed = bob.call(&ListGroupsRequest::default(), 1).await;
    assert!(listed.groups.is_empty(), "{:?}", listed.groups);
    assert_eq!(
        admin
            .call(&ListGroupsRequest::default(), 1)
            .await
            .groups
            .len(),
        1,
        "the super user lists g"
    );
    let deleted = bob
        .call(
            &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("g"))]),
            1,
        )
        .await;
    assert_eq!(deleted.results[0].error_code, GROUP_AUTHORIZATION_FAILED);
    assert_eq!(committed(&mut admin, "g").await, vec![1000], "g survived");
    // records: produce and fetch refused, nothing appended
    let records = batch(&[record(0, 1)], Compression::None);
    let (code, _) = produce(&mut bob, "t", 0, records.clone(), 7).await;
    assert_eq!(code, TOPIC_AUTHORIZATION_FAILED);
    let fetched = bob.call(&fetch_request("t", 0, 0), 11).await;
    assert_eq!(
        fetched.responses[0].partitions[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );
    let seen = admin.call(&fetch_request("t", 0, 0), 11).await;
    assert!(
        decode_records(&seen.responses[0].partitions[0]).is_empty(),
        "bob's record landed"
    );
    // metadata: no topic listed; the one named is refused
    let all = bob
        .call(&MetadataRequest::default().with_topics(None), 4)
        .await;
    assert!(all.topics.is_empty(), "{:?}", all.topics);
    let named = bob
        .call(
            &MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name("t"))),
            ])),
            4,
        )
        .await;
    assert_eq!(named.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(named.topics[0].partitions.is_empty());
    broker.stop().await.unwrap();
}

/// FindCoordinator v4+ for `keys` of `key_type`, answered as (key, error, node, message?).
async fn find_batch(
    c: &mut Client,
    version: i16,
    key_type: i8,
    keys: &[&str],
) -> Vec<(String, i16, i32, bool)> {
    let request = FindCoordinatorRequest::default()
        .with_key_type(key_type)
        .with_coordinator_keys(keys.iter().map(|k| s(k)).collect());
    let r = c.call(&request, version).await;
    r.coordinators
        .iter()
        .map(|e| {
            let key = e.key.to_string();
            (key, e.error_code, e.node_id.0, e.error_message.is_some())
        })
        .collect()
}

#[tokio::test]
async fn find_coordinator_refuses_each_group_key_the_principal_may_not_describe() {
    let (broker, _dir) = acl_broker(None).await;
    let mut admin = login(&broker, "admin").await;
    let mine = creation(GROUP, "mine", PREFIXED, "User:bob", DESCRIBE);
    assert_eq!(create(&mut admin, vec![mine]).await, vec![0]);
    let mut bob = login(&broker, "bob").await;
    let key = |k: &str, error, node, message| (k.to_string(), error, node, message);
    for version in 4..=6 {
        // Each key on its own: only "theirs" is refused, without a message (Kafka's
        // batched answer carries none for a key `getCoordinator` refuses).
        let got = find_batch(&mut bob, version, 0, &["mine-1", "theirs", "mine-2"]).await;
        assert_eq!(
            got,
            [
                key("mine-1", 0, 0, false),
                key("theirs", GROUP_AUTHORIZATION_FAILED, -1, false),
                key("mine-2", 0, 0, false)
            ],
            "v{version}"
        );
        // Transactional ids are not ACL resources here; an empty one is still refused.
        let got = find_batch(&mut bob, version, 1, &["txn", ""]).await;
        assert_eq!(
            got,
            [key("txn", 0, 0, false), key("", 42, -1, true)],
            "v{version}"
        );
    }
    for version in 0..=3 {
        let one = FindCoordinatorRequest::default().with_key(s("theirs"));
        let r = bob.call(&one, version).await;
        assert_eq!(
            (r.error_code, r.node_id.0, r.port),
            (GROUP_AUTHORIZATION_FAILED, -1, -1),
            "v{version}"
        );
        let r = bob.call(&one.with_key(s("mine-1")), version).await;
        assert_eq!((r.error_code, r.node_id.0), (0, 0), "v{version}");
    }
    // Share keys (v6) need CLUSTER_ACTION on the cluster first, else the whole request fails
    // (every key, with a message); then INVALID_REQUEST, as Kafka without share groups.
    let shares = ["g:AAAAAAAAAAAAAAAAAAAAAA:0", "g:AAAAAAAAAAAAAAAAAAAAAA:1"];
    let got = find_batch(&mut bob, 6, 2, &shares).await;
    assert_eq!(
        got,
        [
            key(shares[0], CLUSTER_AUTHORIZATION_FAILED, -1, true),
            key(shares[1], CLUSTER_AUTHORIZATION_FAILED, -1, true)
        ]
    );
    let got = find_batch(&mut admin, 6, 2, &shares).await;
    assert_eq!(
        got,
        [key(shares[0], 42, -1, false), key(shares[1], 42, -1, false)]
    );
    // Below v6 the version is checked first: INVALID_REQUEST whoever asks.
    let got = find_batch(&mut bob, 5, 2, &shares[..1]).await;
    assert_eq!(got, [key(shares[0], 42, -1, false)]);
    broker.stop().await.expect("clean stop");
}

#[tokio::test]
async fn acls_made_with_create_acls_let_a_principal_in_and_delete_acls_shuts_it_out() {
    let (broker, _dir) = acl_broker(None).await;
    let mut admin = login(&broker, "admin").await;
    let mut bob = login(&broker, "bob").await;
    let codes = create(
        &mut admin,
        vec![
            creation(GROUP, "orders-", PREFIXED, "User:bob", READ),
            creation(TOPIC, "t", LITERAL, "User:bob", READ),
            creation(TOPIC, "t", LITERAL, "User:bob", WRITE),
        ],
    )
    .await;
    assert_eq!(codes, vec![0, 0, 0]);
    let r = bob
        .call(&commit("orders-eu", "", -1, &[("t", 0, 7)]), 2)
        .await;
    assert_eq!(commit_codes(&r), vec![0]);
    assert_eq!(
        committed(&mut bob, "orders-eu").await,
        vec![7],
        "READ implies DESCRIBE"
    );
    // another group is not covered by the prefix
    let r = bob
        .call(&commit("payments", "", -1, &[("t", 0, 7)]), 2)
        .await;
    assert_eq!(commit_codes(&r), vec![GROUP_AUTHORIZATION_FAILED]);
    let (code, _) = produce(
        &mut bob,
        "t",
        0,
        batch(&[record(0, 1)], Compression::None),
        7,
    )
    .await;
    assert_eq!(code, 0, "WRITE on t");
    // DescribeAcls lists them by resource
    let described = admin.call(&any_filter(), 3).await;
    assert_eq!(described.error_code, 0);
    let resources: Vec<(i8, String, i8, usize)> = described
        .resources
        .iter()
        .map(|r| {
            (
                r.resource_type,
                r.resource_name.to_string(),
                r.pattern_type,
                r.acls.len(),
            )
        })
        .collect();
    assert_eq!(
        resources,
        vec![
            (TOPIC, "t".to_string(), LITERAL, 2),
            (GROUP, "orders-".to_string(), PREFIXED, 1)
        ]
    );
    // DeleteAcls by a filter: the group's ACL goes, bob is refused again
    let filter = delete_acls_request::DeleteAclsFilter::default()
        .with_resource_type_filter(GROUP)
        .with_resource_name_filter(Some(s("orders-eu")))
        .with_pattern_type_filter(2) // MATCH: every ACL that applies to orders-eu
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    let deleted = admin
        .call(&DeleteAclsRequest::default().with_filters(vec![filter]), 3)
        .await;
    let result = &deleted.filter_results[0];
    assert_eq!(result.error_code, 0);
    assert_eq!(result.matching_acls.len(), 1);
    assert_eq!(result.matching_acls[0].resource_name.as_str(), "orders-");
    let r = bob
        .call(&commit("orders-eu", "", -1, &[("t", 0, 9)]), 2)
        .await;
    assert_eq!(commit_codes(&r), vec![GROUP_AUTHORIZATION_FAILED]);
    assert_eq!(committed(&mut admin, "orders-eu").await, vec![7]);
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn only_alter_on_the_cluster_manages_acls_and_bad_acls_are_refused() {
    let (broker, _dir) = acl_broker(None).await;
    let mut bob = login(&broker, "bob").await;
    let codes = create(
        &mut bob,
        vec![creation(GROUP, "g", LITERAL, "User:bob", READ)],
    )
    .await;
    assert_eq!(codes, vec![CLUSTER_AUTHORIZATION_FAILED]);
    assert_eq!(
        bob.call(&any_filter(), 3).await.error_code,
        CLUSTER_AUTHORIZATION_FAILED
    );
    let mut admin = login(&broker, "admin").await;
    // one good, one with a principal that does not parse: the good one lands alone
    let codes = create(
        &mut admin,
        vec![
            creation(GROUP, "g", LITERAL, "User:bob", READ),
            creation(GROUP, "h", LITERAL, "bob", READ),
        ],
    )
    .await;
    assert_eq!(codes, vec![0, 42]);
    let described = admin.call(&any_filter(), 3).await;
    assert_eq!(described.resources.len(), 1);
    assert_eq!(described.resources[0].resource_name.as_str(), "g");
    // ALTER on the cluster lets alice manage them too
    let cluster = create_acls_request::AclCreation::default()
        .with_resource_type(4)
        .with_resource_name(s("kafka-cluster"))
        .with_resource_pattern_type(LITERAL)
        .with_principal(s("User:alice"))
        .with_host(s("*"))
        .with_operation(7)
        .with_permission_type(3);
    assert_eq!(create(&mut admin, vec![cluster]).await, vec![0]);
    let mut alice = login(&broker, "alice").await;
    assert_eq!(
        alice.call(&any_filter(), 3).await.error_code,
        0,
        "ALTER implies DESCRIBE"
    );
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn without_the_authorizer_the_acl_apis_answer_security_disabled() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let codes = create(
        &mut c,
        vec![creation(GROUP, "g", LITERAL, "User:bob", READ)],
    )
    .await;
    assert_eq!(codes, vec![54]);
    assert_eq!(c.call(&any_filter(), 3).await.error_code, 54);
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn acls_survive_a_restart_in_the_data_directory() {
    let data = tempfile::tempdir().unwrap();
    let (broker, _dir) = acl_broker(Some(data.path())).await;
    let mut admin = login(&broker, "admin").await;
    let codes = create(
        &mut admin,
        vec![
            creation(GROUP, "g", LITERAL, "User:bob", READ),
            creation(TOPIC, "t", LITERAL, "User:bob", READ),
        ],
    )
    .await;
    assert_eq!(codes, vec![0, 0]);
    drop(admin);
    broker.stop().await.unwrap();
    let (broker, _dir) = acl_broker(Some(data.path())).await;
    let mut bob = login(&broker, "bob").await;
    let r = bob.call(&commit("g", "", -1, &[("t", 0, 3)]), 2).await;
    assert_eq!(commit_codes(&r), vec![0], "the ACLs came back");
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn topic_and_cluster_admin_apis_are_refused_without_acls() {
    let (broker, _dir) = acl_broker(None).await;
    let mut bob = login(&broker, "bob").await;
    let created = bob
        .call(
            &CreateTopicsRequest::default().with_topics(vec![
                create_topics_request::CreatableTopic::default()
                    .with_name(topic_name("new"))
                    .with_num_partitions(1)
                    .with_replication_factor(1),
            ]),
            5,
        )
        .await;
    assert_eq!(created.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    let deleted = bob
        .call(
            &DeleteTopicsRequest::default().with_topic_names(vec![topic_name("t")]),
            4,
        )
        .await;
    assert_eq!(deleted.responses[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    let offsets = bob
        .call(
            &ListOffsetsRequest::default().with_topics(vec![
                list_offsets_request::ListOffsetsTopic::default()
                    .with_name(topic_name("t"))
                    .with_partitions(vec![
                        list_offsets_request::ListOffsetsPartition::default().with_timestamp(-1)
                    ]),
            ]),
            3,
        )
        .await;
    assert_eq!(
        offsets.topics[0].partitions[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );
    let configs = bob
        .call(
            &DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(s("0"))
                    .with_configuration_keys(None),
            ]),
            1,
        )
        .await;
    assert_eq!(configs.results[0].error_code, CLUSTER_AUTHORIZATION_FAILED);
    let elect = bob
        .call(
            &ElectLeadersRequest::default().with_topic_partitions(None),
            2,
        )
        .await;
    assert_eq!(elect.error_code, CLUSTER_AUTHORIZATION_FAILED);
    let quorum = bob.call(&DescribeQuorumRequest::default(), 2).await;
    assert_eq!(quorum.error_code, CLUSTER_AUTHORIZATION_FAILED);
    let described = bob
        .call(
            &DescribeTopicPartitionsRequest::default().with_response_partition_limit(100),
            0,
        )
        .await;
    assert!(described.topics.is_empty(), "{:?}", described.topics);
    // the topic is still there for the super user
    let mut admin = login(&broker, "admin").await;
    let all = admin
        .call(&MetadataRequest::default().with_topics(None), 4)
        .await;
    assert_eq!(all.topics.len(), 1);
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn group_configs_need_describe_configs_and_alter_configs_on_the_group() {
    let (broker, _dir) = acl_broker(None).await;
    let mut admin = login(&broker, "admin").await;
    let mut bob = login(&broker, "bob").await;
    let describe = DescribeConfigsRequest::default().with_resources(vec![
        describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(32)
            .with_resource_name(s("bobs"))
            .with_configuration_keys(None),
    ]);
    let alter = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(32)
            .with_resource_name(s("bobs"))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(s("consumer.session.timeout.ms"))
                    .with_config_operation(0)
                    .with_value(Some(s("50000"))),
            ]),
    ]);
    // No ACL: GROUP_AUTHORIZATION_FAILED both ways, and nothing changed.
    assert_eq!(bob.call(&describe, 4).await.results[0].error_code, 30);
    assert_eq!(bob.call(&alter, 1).await.responses[0].error_code, 30);
    let r = admin.call(&describe, 4).await;
    assert!(r.results[0].configs.iter().all(|e| e.config_source == 5));
    // DESCRIBE_CONFIGS (10) lets bob read them; altering still needs ALTER_CONFIGS (11).
    let codes = create(
        &mut admin,
        vec![creation(GROUP, "bobs", LITERAL, "User:bob", 10)],
    )
    .await;
    assert_eq!(codes, [0]);
    assert_eq!(bob.call(&describe, 4).await.results[0].error_code, 0);
    assert_eq!(bob.call(&alter, 1).await.responses[0].error_code, 30);
    let codes = create(
        &mut admin,
        vec![creation(GROUP, "bobs", LITERAL, "User:bob", 11)],
    )
    .await;
    assert_eq!(codes, [0]);
    assert_eq!(bob.call(&alter, 1).await.responses[0].error_code, 0);
    broker.stop().await.expect("clean stop");
}
