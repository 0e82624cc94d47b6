//! The group APIs through the protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups, ListGroups, DeleteGroups.

use crate::common;

use bytes::{BufMut, Bytes, BytesMut};
use common::*;
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as WireTp;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn subscription(topics: &[&str]) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(0);
    ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| s(t)).collect())
        .encode(&mut out, 0)
        .unwrap();
    out.freeze()
}

pub(crate) fn assignment(topic: &str, partitions: &[i32]) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(0);
    ConsumerProtocolAssignment::default()
        .with_assigned_partitions(vec![WireTp::default()
            .with_topic(topic_name(topic))
            .with_partitions(partitions.to_vec())])
        .encode(&mut out, 0)
        .unwrap();
    out.freeze()
}

pub(crate) fn join_request(group: &str, member: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(60_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(s("range"))
        .with_metadata(subscription(&["t"]))])
}

/// JoinGroup v5 twice (MEMBER_ID_REQUIRED, then with the id): the completed join.
pub(crate) async fn join(c: &mut Client, group: &str) -> JoinGroupResponse {
    let first = c.call(&join_request(group, ""), 5).await;
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    assert!(
        first.member_id.starts_with("test-client-"),
        "{:?}",
        first.member_id
    );
    let joined = c.call(&join_request(group, &first.member_id), 5).await;
    assert_eq!(joined.error_code, 0);
    joined
}

pub(crate) fn sync_request(
    group: &str,
    joined: &JoinGroupResponse,
    assignments: &[(&str, Bytes)],
) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone())
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    sync_group_request::SyncGroupRequestAssignment::default()
                        .with_member_id(s(m))
                        .with_assignment(a.clone())
                })
                .collect(),
        )
}

fn heartbeat(group: &str, member: &str, generation: i32) -> HeartbeatRequest {
    HeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_generation_id(generation)
}

fn describe(groups: &[&str]) -> DescribeGroupsRequest {
    DescribeGroupsRequest::default().with_groups(groups.iter().map(|g| GroupId(s(g))).collect())
}

#[tokio::test]
async fn one_member_joins_syncs_heartbeats_commits_and_leaves() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let joined = join(&mut c, "g").await;
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.leader, joined.member_id, "the only member leads");
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    assert_eq!(joined.members.len(), 1);
    assert_eq!(joined.members[0].metadata, subscription(&["t"]));
    let mine = assignment("t", &[0, 1]);
    let synced = c
        .call(
            &sync_request("g", &joined, &[(joined.member_id.as_str(), mine.clone())]),
            3,
        )
        .await;
    assert_eq!((synced.error_code, synced.assignment.clone()), (0, mine));
    assert_eq!(
        c.call(&heartbeat("g", &joined.member_id, 1), 1)
            .await
            .error_code,
        0
    );
    let r = c
        .call(
            &commit("g", &joined.member_id, 1, &[("t", 0, 5), ("t", 1, 7)]),
            3,
        )
        .await;
    assert_eq!(commit_codes(&r), [0, 0]);
    let r = c.call(&offset_fetch("g", &[0, 1]), 3).await;
    assert_eq!((r.error_code, fetched(&r)), (0, vec![5, 7]));
    // DescribeGroups: Stable, the protocol, the member with its client id and host.
    let d = c.call(&describe(&["g"]), 5).await;
    let g = &d.groups[0];
    assert_eq!(
        (
            g.error_code,
            g.group_state.as_str(),
            g.protocol_data.as_str()
        ),
        (0, "Stable", "range")
    );
    assert_eq!(g.members[0].client_id.as_str(), "test-client");
    assert_eq!(g.members[0].client_host.as_str(), "/127.0.0.1");
    let l = c.call(&ListGroupsRequest::default(), 4).await;
    assert!(l
        .groups
        .iter()
        .any(|x| x.group_id.as_str() == "g" && x.group_state.as_str() == "Stable"));
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(joined.member_id.clone());
    assert_eq!(c.call(&leave, 1).await.error_code, 0);
    let d = c.call(&describe(&["g"]), 5).await;
    assert_eq!(d.groups[0].group_state.as_str(), "Empty");
    assert_eq!(
        c.call(&heartbeat("g", &joined.member_id, 1), 1)
            .await
            .error_code,
        25
    );
    broker.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_second_member_rebalances_the_group_and_a_left_out_member_gets_a_valid_empty_assignment()
{
    let broker = TestBroker::start().await;
    let mut a = broker.client().await;
    let mut b = broker.client().await;
    let first = join(&mut a, "g").await;
    a.call(
        &sync_request(
            "g",
            &first,
            &[(first.member_id.as_str(), assignment("t", &[0, 1]))],
        ),
        3,
    )
    .await;
    // B joins: its JoinGroup waits for A, whose heartbeat now says REBALANCE_IN_PROGRESS.
    let b_first = b.call(&join_request("g", ""), 5).await;
    let b_join = b.send(&join_request("g", &b_first.member_id), 5).await;
    let mut code = 0;
    for _ in 0..100 {
        code = a
            .call(&heartbeat("g", &first.member_id, 1), 1)
            .await
            .error_code;
        if code == 27 {
            break;
        }
    }
    assert_eq!(code, 27, "REBALANCE_IN_PROGRESS");
    let a_joined = a.call(&join_request("g", &first.member_id), 5).await;
    let b_joined = b.receive::<JoinGroupRequest>(b_join, 5).await;
    assert_eq!((a_joined.generation_id, b_joined.generation_id), (2, 2));
    assert_eq!(
        a_joined.leader, first.member_id,
        "the leader stays the leader"
    );
    assert_eq!(a_joined.members.len(), 2);
    assert!(b_joined.members.is_empty(), "followers get no member list");
    // The follower's SyncGroup waits for the leader's, which leaves B out.
    let b_sync = b.send(&sync_request("g", &b_joined, &[]), 3).await;
    let a_synced = a
        .call(
            &sync_request(
                "g",
                &a_joined,
                &[(first.member_id.as_str(), assignment("t", &[0, 1]))],
            ),
            3,
        )
        .await;
    assert_eq!(a_synced.error_code, 0);
    let b_synced = b.receive::<SyncGroupRequest>(b_sync, 3).await;
    assert_eq!(b_synced.error_code, 0);
    assert_eq!(
        &b_synced.assignment[..],
        &[0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]
    );
    // A stale generation is fenced.
    let r = a
        .call(&commit("g", &first.member_id, 1, &[("t", 0, 1)]), 3)
        .await;
    assert_eq!(commit_codes(&r), [22], "ILLEGAL_GENERATION");
    assert_eq!(
        a.call(&heartbeat("g", &first.member_id, 1), 1)
            .await
            .error_code,
        22
    );
}

#[tokio::test]
async fn group_requests_get_kafkas_error_codes() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let short = join_request("g", "").with_session_timeout_ms(1);
    assert_eq!(
        c.call(&short, 5).await.error_code,
        26,
        "INVALID_SESSION_TIMEOUT"
    );
    assert_eq!(
        c.call(&join_request("", ""), 5).await.error_code,
        24,
        "INVALID_GROUP_ID"
    );
    let none = join_request("g", "").with_protocols(Vec::new());
    assert_eq!(
        c.call(&none, 5).await.error_code,
        23,
        "INCONSISTENT_GROUP_PROTOCOL"
    );
    assert_eq!(
        c.call(&join_request("nope", "ghost"), 5).await.error_code,
        25
    );
    let joined = join(&mut c, "g").await;
    let ghost = SyncGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id(joined.generation_id)
        .with_member_id(s("ghost"));
    assert_eq!(c.call(&ghost, 3).await.error_code, 25);
    // Commits: unknown topics and partitions per partition, checked before the group.
    let r = c
        .call(
            &commit(
                "g",
                &joined.member_id,
                joined.generation_id,
                &[("t", 0, 1), ("nope", 0, 1), ("t", 9, 1)],
            ),
            3,
        )
        .await;
    assert_eq!(
        commit_codes(&r),
        [27, 3, 3],
        "CompletingRebalance refuses the valid one"
    );
    // OffsetFetch of a group that does not exist: -1, no error (Kafka's behaviour).
    let r = c.call(&offset_fetch("unknown", &[0]), 3).await;
    assert_eq!((r.error_code, fetched(&r)), (0, vec![-1]));
    // DescribeGroups v0-5 of an unknown group: Dead, no error; v6 (KIP-1043): Dead,
    // GROUP_ID_NOT_FOUND with Kafka's message.
    let d = c.call(&describe(&["unknown"]), 5).await;
    assert_eq!(
        (d.groups[0].error_code, d.groups[0].group_state.as_str()),
        (0, "Dead")
    );
    let d = c.call(&describe(&["unknown", "g"]), 6).await;
    let g = &d.groups[0];
    assert_eq!(
        (
            g.error_code,
            g.group_state.as_str(),
            g.error_message.as_deref()
        ),
        (69, "Dead", Some("Group unknown not found."))
    );
    assert_eq!(
        (d.groups[1].error_code, d.groups[1].error_message.as_deref()),
        (0, None)
    );
    // DeleteGroups: NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND.
    let del = DeleteGroupsRequest::default()
        .with_groups_names(vec![GroupId(s("g")), GroupId(s("unknown"))]);
    let r = c.call(&del, 2).await;
    let codes: Vec<i16> = r.results.iter().map(|x| x.error_code).collect();
    assert_eq!(codes, [68, 69]);
}

#[tokio::test]
async fn plain_commits_offset_delete_and_delete_groups() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    // Generation -1 and no member: a plain commit, which creates a simple group.
    let r = c
        .call(&commit("simple", "", -1, &[("t", 0, 3), ("t", 1, 4)]), 2)
        .await;
    assert_eq!(commit_codes(&r), [0, 0]);
    let r = c.call(&offset_fetch("simple", &[0, 1]), 1).await;
    assert_eq!(fetched(&r), [3, 4]);
    // OffsetDelete of an Empty group removes the offsets.
    let delete = OffsetDeleteRequest::default()
        .with_group_id(GroupId(s("simple")))
        .with_topics(vec![
            offset_delete_request::OffsetDeleteRequestTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![
                    offset_delete_request::OffsetDeleteRequestPartition::default()
                        .with_partition_index(0),
                ]),
        ]);
    let r = c.call(&delete, 0).await;
    assert_eq!((r.error_code, r.topics[0].partitions[0].error_code), (0, 0));
    let r = c.call(&offset_fetch("simple", &[0, 1]), 1).await;
    assert_eq!(fetched(&r), [-1, 4]);
    // A group subscribed to the topic keeps its offsets.
    let joined = join(&mut c, "live").await;
    c.call(
        &sync_request(
            "live",
            &joined,
            &[(joined.member_id.as_str(), assignment("t", &[0]))],
        ),
        3,
    )
    .await;
    let r = c
        .call(&delete.clone().with_group_id(GroupId(s("live"))), 0)
        .await;
    assert_eq!(
        r.topics[0].partitions[0].error_code, 86,
        "GROUP_SUBSCRIBED_TO_TOPIC"
    );
    let r = c
        .call(
            &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("simple"))]),
            2,
        )
        .await;
    assert_eq!(r.results[0].error_code, 0);
    let r = c.call(&offset_fetch("simple", &[1]), 1).await;
    assert_eq!(fetched(&r), [-1], "deleting the group removed its offsets");
}

#[tokio::test]
async fn a_join_waiting_at_shutdown_is_answered_not_coordinator() {
    let broker = TestBroker::start().await;
    let mut a = broker.client().await;
    let mut b = broker.client().await;
    let first = join(&mut a, "g").await;
    a.call(&sync_request("g", &first, &[]), 3).await;
    let b_first = b.call(&join_request("g", ""), 5).await;
    let waiting = b.send(&join_request("g", &b_first.member_id), 5).await;
    // B's join waits for A to rejoin; A's heartbeat shows the rebalance has started.
    let mut code = 0;
    for _ in 0..100 {
        code = a
            .call(&heartbeat("g", &first.member_id, 1), 1)
            .await
            .error_code;
        if code == 27 {
            break;
        }
    }
    assert_eq!(code, 27);
    let stopping = tokio::spawn(broker.stop());
    let r = b.receive::<JoinGroupRequest>(waiting, 5).await;
    assert_eq!(r.error_code, 16, "NOT_COORDINATOR");
    bounded("stop", stopping).await.unwrap().unwrap();
}

/// OffsetCommit keeps the metadata a client committed (the memory store keeps it),
/// OffsetFetch returns it, and metadata over `offset.metadata.max.bytes` is refused for that
/// partition alone. (Leader epochs travel from OffsetCommit v6 and OffsetFetch v5, above the
/// versions served.)
#[tokio::test]
async fn offset_fetch_returns_the_metadata_a_client_committed() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let mut request = commit("meta", "", -1, &[("t", 0, 7), ("t", 1, 8)]);
    request.topics[0].partitions[0].committed_metadata = Some(s("checkpoint-7"));
    request.topics[1].partitions[0].committed_metadata = Some(s(&"x".repeat(4097)));
    let r = c.call(&request, 3).await;
    assert_eq!(
        commit_codes(&r),
        [0, 12],
        "OFFSET_METADATA_TOO_LARGE for the second"
    );
    let r = c.call(&offset_fetch("meta", &[0, 1]), 3).await;
    let partitions = &r.topics[0].partitions;
    assert_eq!(fetched(&r), [7, -1]);
    assert_eq!(
        partitions[0].metadata.as_ref().map(|m| m.as_str()),
        Some("checkpoint-7")
    );
}

/// Kafka accepts the empty group id on OffsetCommit, OffsetFetch and DeleteGroups (for
/// backwards compatibility): OffsetFetch of "" returns that group's offsets, DeleteGroups
/// of "" deletes it, or answers GROUP_ID_NOT_FOUND (69) when it does not exist. Both
/// answered UNKNOWN_SERVER_ERROR (-1) before.
#[tokio::test]
async fn the_empty_group_id_is_a_group_id_like_any_other() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let delete_empty = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(""))]);
    let r = c.call(&delete_empty, 2).await;
    assert_eq!(r.results[0].error_code, 69, "GROUP_ID_NOT_FOUND");
    let r = c.call(&commit("", "", -1, &[("t", 0, 5)]), 2).await;
    assert_eq!(commit_codes(&r), [0]);
    let r = c.call(&offset_fetch("", &[0]), 1).await;
    assert_eq!((r.error_code, fetched(&r)), (0, vec![5]));
    let r = c.call(&delete_empty, 2).await;
    assert_eq!(r.results[0].error_code, 0);
    let r = c.call(&offset_fetch("", &[0]), 1).await;
    assert_eq!(fetched(&r), [-1], "deleted with its offsets");
}

/// `--offsets-retention-check-interval-ms`: an Empty group without committed offsets is gone
/// from ListGroups that long after its last member left (Kafka removes it at its next check).
#[tokio::test]
async fn an_empty_group_without_offsets_is_removed_after_the_check_interval() {
    let broker = TestBroker::with(broker::BrokerConfig {
        offsets_retention_check_interval_ms: 200,
        group_initial_rebalance_delay_ms: 0,
        ..config()
    })
    .await;
    let mut c = broker.client().await;
    let joined = join(&mut c, "fleeting").await;
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(s("fleeting")))
        .with_member_id(joined.member_id.clone());
    assert_eq!(c.call(&leave, 1).await.error_code, 0);
    let listed =
        |r: &ListGroupsResponse| r.groups.iter().any(|g| g.group_id.as_str() == "fleeting");
    assert!(
        listed(&c.call(&ListGroupsRequest::default(), 4).await),
        "Empty, still listed"
    );
    bounded("the empty group is removed", async {
        while listed(&c.call(&ListGroupsRequest::default(), 4).await) {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn the_newest_classic_versions_join_sync_heartbeat_and_leave_in_batches() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    // JoinGroup v9: a static member (instance id) joins at once; v7+ names the protocol
    // type, v9 says whether to skip the assignment.
    let request = join_request("g9", "")
        .with_group_instance_id(Some(s("inst-a")))
        .with_reason(Some(s("starting")));
    let joined = c.call(&request, 9).await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    assert!(!joined.skip_assignment);
    assert_eq!(joined.leader, joined.member_id);
    // SyncGroup v5: the protocol type and name must be the group's (KIP-559).
    let mine = assignment("t", &[0]);
    let wrong = sync_request("g9", &joined, &[(joined.member_id.as_str(), mine.clone())])
        .with_group_instance_id(Some(s("inst-a")))
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(Some(s("roundrobin")));
    assert_eq!(
        c.call(&wrong, 5).await.error_code,
        23,
        "INCONSISTENT_GROUP_PROTOCOL"
    );
    let unnamed = wrong.clone().with_protocol_name(None);
    assert_eq!(
        c.call(&unnamed, 5).await.error_code,
        23,
        "v5 names the protocol"
    );
    let right = wrong.with_protocol_name(Some(s("range")));
    let synced = c.call(&right, 5).await;
    assert_eq!((synced.error_code, synced.assignment.clone()), (0, mine));
    assert_eq!(synced.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(synced.protocol_name.as_deref(), Some("range"));
    // Heartbeat v4 with the instance id: its own member id passes, another is fenced.
    let beat = heartbeat("g9", &joined.member_id, joined.generation_id)
        .with_group_instance_id(Some(s("inst-a")));
    assert_eq!(c.call(&beat, 4).await.error_code, 0);
    let impostor = beat.with_member_id(s("someone-else"));
    assert_eq!(
        c.call(&impostor, 4).await.error_code,
        82,
        "FENCED_INSTANCE_ID"
    );
    // LeaveGroup v5: a batch, each member with its own answer (the static member named by
    // its instance id alone, as the admin client removes it).
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(s("g9")))
        .with_members(vec![
            leave_group_request::MemberIdentity::default()
                .with_member_id(s(""))
                .with_group_instance_id(Some(s("inst-a")))
                .with_reason(Some(s("removed by the operator"))),
            leave_group_request::MemberIdentity::default().with_member_id(s("nobody")),
        ]);
    let left = c.call(&leave, 5).await;
    assert_eq!(left.error_code, 0);
    let answers: Vec<(&str, Option<&str>, i16)> = left
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.as_str(),
                m.group_instance_id.as_deref(),
                m.error_code,
            )
        })
        .collect();
    assert_eq!(answers, [("", Some("inst-a"), 0), ("nobody", None, 25)]);
    let d = c.call(&describe(&["g9"]), 5).await;
    assert_eq!(d.groups[0].group_state.as_str(), "Empty");
    broker.stop().await.expect("clean stop");
}

/// kafkajs commits its default offset (-2, or -1) when a fetch meets OFFSET_OUT_OF_RANGE and
/// reads it back as "no committed offset"; Kafka stores it. Here the partition's committed
/// offset is cleared (read back as -1), under the same validation as any commit.
#[tokio::test]
async fn a_negative_committed_offset_clears_the_partitions_offset_under_the_commits_checks() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let r = c
        .call(&commit("g", "", -1, &[("t", 0, 5), ("t", 1, 6)]), 8)
        .await;
    assert_eq!(commit_codes(&r), [0, 0]);
    let r = c.call(&commit("g", "", -1, &[("t", 0, -2)]), 8).await;
    assert_eq!(commit_codes(&r), [0], "accepted, as Kafka accepts it");
    let r = c.call(&offset_fetch("g", &[0, 1]), 7).await;
    assert_eq!((r.error_code, fetched(&r)), (0, vec![-1, 6]));
    // A member the group does not know cannot clear an offset either.
    let r = c.call(&commit("g", "ghost", 3, &[("t", 1, -2)]), 8).await;
    assert_eq!(commit_codes(&r), [25], "UNKNOWN_MEMBER_ID");
    let r = c.call(&offset_fetch("g", &[0, 1]), 7).await;
    assert_eq!(fetched(&r), vec![-1, 6], "nothing changed");
    // Cleared and committed in one request.
    let r = c
        .call(&commit("g", "", -1, &[("t", 0, 9), ("t", 1, -1)]), 8)
        .await;
    assert_eq!(commit_codes(&r), [0, 0]);
    let r = c.call(&offset_fetch("g", &[0, 1]), 7).await;
    assert_eq!(fetched(&r), vec![9, -1]);
    broker.stop().await.expect("clean stop");
}
