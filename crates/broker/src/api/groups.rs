//! The classic group APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
//! ListGroups, DeleteGroups. Each translates the request into a call on the core's classic
//! groups and the result into the response; the group state is the core's alone.
//!
//! For protocol type `consumer`, the members' subscriptions and the leader's assignments are
//! decoded here (the consumer protocol is part of the codec) and handed to the core as
//! topics and partitions, so describe, lag and the optional ownership check see them.
//!
//! A group this broker does not coordinate (several brokers over PostgreSQL) is refused
//! NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while its slot loads) after the ACL check,
//! as Kafka's `GroupCoordinatorService` answers; ListGroups lists the groups held here.

use crate::acl::Operation;
use std::ops::RangeInclusive;

use bytes::Bytes;
use coordinator_core::{
    ClassicProtocol, Error, ErrorCode, Generation, GroupKind, GroupState,
    JoinGroupRequest as CoreJoin, LeavingMember, StorageErrorKind, SyncAssignment,
    SyncGroupRequest as CoreSync,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tracing::info;

use super::consumer_protocol::{
    assignment_partitions, empty_assignment, subscription_topics, CONSUMER,
};
use super::registry::Api;
use super::{codes, Call};
use crate::shutdown::Shutdown;

/// Kafka's code for a core error. `NOT_PARTITION_OWNER` (the optional ownership check,
/// beyond Kafka) has none: it is sent as ILLEGAL_GENERATION, because the member's view of its
/// assignment is stale and every client rejoins on 22.
pub(super) fn code(e: &Error) -> i16 {
    // A write a deposed broker tried (another one owns the group's coordinator slot now):
    // NOT_COORDINATOR, on which clients find the coordinator again (Kafka's answer after a
    // coordinator moved).
    if matches!(e, Error::Storage(s) if s.kind() == StorageErrorKind::NotCoordinator) {
        return codes::NOT_COORDINATOR;
    }
    match e.error_code() {
        ErrorCode::NotPartitionOwner => codes::ILLEGAL_GENERATION,
        other => other.kafka().unwrap_or(codes::UNKNOWN_SERVER_ERROR),
    }
}

/// Kafka's code for a core error of a call that writes the group's record (SyncGroup,
/// ConsumerGroupHeartbeat): a storage error is NOT_COORDINATOR, as Kafka's
/// `appendGroupMetadataErrorToResponseError` answers a failed append, on which clients find
/// the coordinator again and retry; any other error as [`code`].
pub(super) fn record_write_code(e: &Error) -> i16 {
    if e.error_code() == ErrorCode::StorageError {
        codes::NOT_COORDINATOR
    } else {
        code(e)
    }
}

fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

/// A wire generation: negative means "none" (a member that has not joined yet).
pub(super) fn generation(wire: i32) -> Option<Generation> {
    u64::try_from(wire).ok().map(Generation::new)
}

/// The core's generations are u64; Kafka's are i32, which the core's never exceed in
/// practice (one per rebalance). Clamped rather than wrapped if they ever did.
fn wire_generation(g: Generation) -> i32 {
    i32::try_from(g.get()).unwrap_or(i32::MAX)
}

fn optional(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|v| v.to_string())
}

/// The coordinator's refusal of a request about `group_id` when another broker coordinates
/// it ([`Call::group_coordinator_error`]). None for the empty group id, which Kafka's
/// `GroupCoordinatorService` refuses first (INVALID_GROUP_ID, as the core does here) for the
/// APIs that call this; DescribeGroups, DeleteGroups, OffsetCommit and OffsetFetch, which
/// Kafka serves for the empty id, ask [`Call::group_coordinator_error`] directly.
pub(super) fn refusal(call: &Call<'_>, group_id: &str) -> Option<i16> {
    if group_id.is_empty() {
        return None;
    }
    call.group_coordinator_error(group_id)
}

/// The error code to send for an answer about `group_id` that the coordinator gave as
/// `code`, once it is made: a group's slot lost to another broker while the request was
/// being served (several brokers over PostgreSQL: a paused broker resumed with requests
/// queued, past its lease) unloads the group under a request already past [`refusal`], and
/// the core then answers GROUP_ID_NOT_FOUND or UNKNOWN_MEMBER_ID for a group its new
/// coordinator knows; GROUP_ID_NOT_FOUND is fatal to a consumer-protocol client. Any error
/// made while the slot moved becomes the refusal (NOT_COORDINATOR: the client finds the
/// coordinator again), as Kafka's coordinator runtime answers a request for a partition it
/// no longer leads. NONE, and any code while the group is still served here, pass as they are.
pub(super) fn settle(call: &Call<'_>, group_id: &str, code: i16) -> i16 {
    if code == codes::NONE {
        return code;
    }
    refusal(call, group_id).unwrap_or(code)
}

/// [`refusal`] of a JoinGroup, after the session timeout check Kafka's
/// `GroupCoordinatorService.joinGroup` makes first (INVALID_SESSION_TIMEOUT, answered by the
/// core).
fn join_refusal(call: &Call<'_>, request: &JoinGroupRequest) -> Option<i16> {
    let bounds = &call.context.coordinator.config().groups;
    let session = u64::try_from(request.session_timeout_ms).ok()?;
    if session < bounds.min_session_timeout_ms || session > bounds.max_session_timeout_ms {
        return None;
    }
    refusal(call, &request.group_id)
}

async fn join(
    call: &Call<'_>,
    request: JoinGroupRequest,
    shutdown: &mut Shutdown,
) -> JoinGroupResponse {
    let v = call.version;
    let group = request.group_id.to_string();
    let protocol_type = request.protocol_type.to_string();
    let protocols = request
        .protocols
        .iter()
        .map(|p| {
            let mut protocol = ClassicProtocol::new(p.name.to_string(), &p.metadata[..]);
            if protocol_type == CONSUMER {
                protocol.topics = subscription_topics(&p.metadata);
            }
            protocol
        })
        .collect();
    let core = CoreJoin {
        group_id: group.clone(),
        member_id: request.member_id.to_string(),
        group_instance_id: optional(&request.group_instance_id),
        client_id: call.client_id.to_string(),
        // Kafka spells the host as Java's InetAddress.toString(): "/127.0.0.1".
        client_host: format!("/{}", call.peer.ip()),
        session_timeout_ms: request.session_timeout_ms,
        // JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout.
        rebalance_timeout_ms: if v == 0 {
            request.session_timeout_ms
        } else {
            request.rebalance_timeout_ms
        },
        protocol_type: protocol_type.clone(),
        protocols,
        require_known_member_id: v >= 4,
        supports_skip_assignment: v >= 9,
        reason: optional(&request.reason),
    };
    let result = tokio::select! {
        result = call.context.coordinator.classic().join(core) => Some(result),
        _ = shutdown.recv() => None,
    };
    // v0-6 need a protocol name even on errors; v7+ send null (Kafka's JoinGroupResponse).
    let error = |code: i16, member: StrBytes| {
        JoinGroupResponse::default()
            .with_error_code(code)
            .with_member_id(member)
            .with_generation_id(-1)
            .with_protocol_name((v < 7).then(StrBytes::default))
    };
    match result {
        None => error(codes::NOT_COORDINATOR, request.member_id),
        Some(Ok(joined)) => {
            if joined.member_id == joined.leader {
                info!(
                    group = %group,
                    generation = joined.generation.get(),
                    members = joined.members.len(),
                    protocol = joined.protocol_name.as_deref().unwrap_or(""),
                    leader = %joined.leader,
                    "group rebalanced"
                );
            }
            JoinGroupResponse::default()
                .with_generation_id(wire_generation(joined.generation))
                .with_protocol_type(joined.protocol_type.as_deref().map(s))
                .with_protocol_name(Some(s(joined.protocol_name.as_deref().unwrap_or(""))))
                .with_leader(s(&joined.leader))
                // v9+ (KIP-814): a static leader that rejoined a stable group without
                // changes keeps the assignment it computed; the core sets this only for a
                // client that asked at v9+.
                .with_skip_assignment(joined.skip_assignment)
                .with_member_id(s(&joined.member_id))
                .with_members(
                    joined
                        .members
                        .iter()
                        .map(|m| {
                            join_group_response::JoinGroupResponseMember::default()
                                .with_member_id(s(&m.member_id))
                                .with_group_instance_id(m.group_instance_id.as_deref().map(s))
                                .with_metadata(Bytes::copy_from_slice(&m.metadata))
                        })
                        .collect(),
                )
        }
        Some(Err(Error::MemberIdRequired { member_id, .. })) => {
            error(codes::MEMBER_ID_REQUIRED, s(&member_id))
        }
        Some(Err(e)) => {
            let c = code(&e);
            // Kafka answers these with an empty member id: the client must not reuse it.
            let member = if c == codes::UNKNOWN_MEMBER_ID || c == codes::GROUP_MAX_SIZE_REACHED {
                StrBytes::default()
            } else {
                request.member_id
            };
            error(c, member)
        }
    }
}

async fn sync(
    call: &Call<'_>,
    request: SyncGroupRequest,
    shutdown: &mut Shutdown,
) -> SyncGroupResponse {
    let core = CoreSync {
        group_id: request.group_id.to_string(),
        generation: generation(request.generation_id),
        member_id: request.member_id.to_string(),
        group_instance_id: optional(&request.group_instance_id),
        protocol_type: optional(&request.protocol_type),
        protocol_name: optional(&request.protocol_name),
        assignments: request
            .assignments
            .iter()
            .map(|a| SyncAssignment {
                member_id: a.member_id.to_string(),
                assignment: a.assignment[..].into(),
                partitions: assignment_partitions(&a.assignment),
            })
            .collect(),
    };
    let result = tokio::select! {
        result = call.context.coordinator.classic().sync(core) => Some(result),
        _ = shutdown.recv() => None,
    };
    match result {
        None => SyncGroupResponse::default().with_error_code(codes::NOT_COORDINATOR),
        Some(Ok(synced)) => {
            let consumer = synced.protocol_type.as_deref() == Some(CONSUMER);
            let assignment = if synced.assignment.is_empty() && consumer {
                // A member the leader left out gets empty bytes from the core; clients of
                // the consumer protocol cannot decode zero bytes (kfake does the same).
                empty_assignment()
            } else {
                Bytes::copy_from_slice(&synced.assignment)
            };
            SyncGroupResponse::default()
                .with_protocol_type(synced.protocol_type.as_deref().map(s))
                .with_protocol_name(synced.protocol_name.as_deref().map(s))
                .with_assignment(assignment)
        }
        Some(Err(e)) => SyncGroupResponse::default().with_error_code(record_write_code(&e)),
    }
}

async fn heartbeat(call: &Call<'_>, request: HeartbeatRequest) -> HeartbeatResponse {
    let result = call
        .context
        .coordinator
        .classic()
        .heartbeat(
            &request.group_id,
            &request.member_id,
            request.group_instance_id.as_deref(),
            generation(request.generation_id),
        )
        .await;
    HeartbeatResponse::default().with_error_code(result.err().map_or(codes::NONE, |e| code(&e)))
}

async fn leave(call: &Call<'_>, request: LeaveGroupRequest) -> LeaveGroupResponse {
    // v0-2 name one member by id; v3+ a batch, each by id or (a static member) instance id,
    // each with its own answer (KIP-345: the admin client's removeMembersFromConsumerGroup).
    let batched = call.version >= 3;
    let members: Vec<LeavingMember> = if batched {
        request
            .members
            .iter()
            .map(|m| LeavingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: optional(&m.group_instance_id),
            })
            .collect()
    } else {
        vec![LeavingMember {
            member_id: request.member_id.to_string(),
            group_instance_id: None,
        }]
    };
    let (top, results) = match call
        .context
        .coordinator
        .classic()
        .leave(&request.group_id, &members)
        .await
    {
        Ok(results) => (codes::NONE, results),
        Err(e) => (code(&e), Vec::new()),
    };
    let answers: Vec<i16> = results
        .iter()
        .map(|r| r.as_ref().err().map_or(codes::NONE, code))
        .collect();
    for (m, c) in members.iter().zip(&answers) {
        if *c == codes::NONE {
            info!(
                group = %request.group_id.as_str(),
                member = %m.member_id,
                instance = m.group_instance_id.as_deref().unwrap_or(""),
                reason = members_reason(&request, &m.member_id).unwrap_or(""),
                "member left"
            );
        }
    }
    if !batched {
        // Kafka's LeaveGroupResponse below v3: the top-level error, else the member's.
        let error = if top != codes::NONE {
            top
        } else {
            answers.first().copied().unwrap_or(codes::NONE)
        };
        return LeaveGroupResponse::default().with_error_code(error);
    }
    LeaveGroupResponse::default()
        .with_error_code(top)
        .with_members(
            members
                .iter()
                .zip(&answers)
                .map(|(m, c)| {
                    leave_group_response::MemberResponse::default()
                        .with_member_id(s(&m.member_id))
                        .with_group_instance_id(m.group_instance_id.as_deref().map(s))
                        .with_error_code(*c)
                })
                .collect(),
        )
}

/// The reason a v5+ LeaveGroup gives for member `member_id`, for the log.
fn members_reason<'a>(request: &'a LeaveGroupRequest, member_id: &str) -> Option<&'a str> {
    request
        .members
        .iter()
        .find(|m| m.member_id.as_str() == member_id)
        .and_then(|m| m.reason.as_deref())
}

async fn describe(call: &Call<'_>, request: DescribeGroupsRequest) -> DescribeGroupsResponse {
    let mut groups = Vec::with_capacity(request.groups.len());
    for group in request.groups {
        let described =
            describe_groups_response::DescribedGroup::default().with_group_id(group.clone());
        if !call.may_group(Operation::Describe, group.as_str()) {
            groups.push(described.with_error_code(codes::GROUP_AUTHORIZATION_FAILED));
            continue;
        }
        if let Some(c) = call.group_coordinator_error(&group) {
            groups.push(described.with_error_code(c));
            continue;
        }
        let answer = match call.context.coordinator.classic().describe(&group).await {
            Ok(d) => {
                let stable = d.state == GroupState::Stable;
                let consumer = d.protocol_type == CONSUMER;
                described
                    .with_group_state(s(d.state.as_str()))
                    .with_protocol_type(s(&d.protocol_type))
                    // Kafka names the protocol, and sends members' metadata, only when Stable.
                    .with_protocol_data(if stable {
                        s(&d.protocol_name)
                    } else {
                        StrBytes::default()
                    })
                    .with_members(
                        d.members
                            .iter()
                            .map(|m| {
                                let assignment = if m.assignment.is_empty() && consumer {
                                    empty_assignment()
                                } else {
                                    Bytes::copy_from_slice(&m.assignment)
                                };
                                describe_groups_response::DescribedGroupMember::default()
                                    .with_member_id(s(&m.member_id))
                                    .with_group_instance_id(m.group_instance_id.as_deref().map(s))
                                    .with_client_id(s(&m.client_id))
                                    .with_client_host(s(&m.client_host))
                                    .with_member_metadata(if stable {
                                        Bytes::copy_from_slice(&m.metadata)
                                    } else {
                                        Bytes::new()
                                    })
                                    .with_member_assignment(assignment)
                            })
                            .collect(),
                    )
            }
            // An unknown group is "Dead": without an error before v6, GROUP_ID_NOT_FOUND with
            // Kafka's message from v6 (KIP-1043). So is a consumer-protocol group (KIP-848):
            // Kafka 4's DescribeGroups describes classic groups only; ConsumerGroupDescribe
            // describes the others.
            Err(e) if code(&e) == codes::GROUP_ID_NOT_FOUND => not_found(
                call.version,
                described,
                format!("Group {} not found.", group.as_str()),
            ),
            Err(_)
                if matches!(
                    call.context.coordinator.group_kind(&group),
                    Some(GroupKind::Consumer | GroupKind::Share)
                ) =>
            {
                not_found(
                    call.version,
                    described,
                    format!("Group {} is not a classic group.", group.as_str()),
                )
            }
            Err(e) => described.with_error_code(code(&e)),
        };
        groups.push(answer);
    }
    DescribeGroupsResponse::default().with_groups(groups)
}

/// A group DescribeGroups does not describe: "Dead", and from v6 GROUP_ID_NOT_FOUND with
/// `message` (Kafka's `GroupMetadataManager.describeGroups`).
fn not_found(
    version: i16,
    described: describe_groups_response::DescribedGroup,
    message: String,
) -> describe_groups_response::DescribedGroup {
    let dead = described.with_group_state(s(GroupState::Dead.as_str()));
    if version < 6 {
        return dead;
    }
    dead.with_error_code(codes::GROUP_ID_NOT_FOUND)
        .with_error_message(Some(StrBytes::from_string(message)))
}

/// Kafka's group type of a kind: `consumer` for the consumer protocol's groups (KIP-848),
/// `share` for share groups (KIP-932), `classic` for the others (the chapter's groups and
/// those known by their offsets only).
pub(crate) fn group_type(kind: GroupKind) -> &'static str {
    match kind {
        GroupKind::Consumer => "consumer",
        GroupKind::Share => "share",
        _ => "classic",
    }
}

async fn list(call: &Call<'_>, request: ListGroupsRequest) -> ListGroupsResponse {
    // v4's state filter: case-insensitive, trimmed; empty means all (Kafka's rule).
    let filter: Vec<String> = request
        .states_filter
        .iter()
        .map(|s| s.trim().to_ascii_lowercase())
        .collect();
    // v5's type filter: `classic`, `consumer` or `share`, case-insensitive (Kafka's `Group.GroupType`).
    let types: Vec<String> = request
        .types_filter
        .iter()
        .map(|s| s.trim().to_ascii_lowercase())
        .collect();
    // Kafka: DESCRIBE on the cluster lists every group, else those the principal may
    // describe.
    let all = call.may_cluster(Operation::Describe);
    let groups = call
        .context
        .coordinator
        .list_groups()
        .await
        .into_iter()
        .filter(|g| filter.is_empty() || filter.contains(&g.state.as_str().to_ascii_lowercase()))
        .filter(|g| types.is_empty() || types.contains(&group_type(g.kind).to_string()))
        .filter(|g| all || call.may_group(Operation::Describe, &g.group_id))
        .map(|g| {
            list_groups_response::ListedGroup::default()
                .with_group_id(GroupId(s(&g.group_id)))
                .with_protocol_type(s(&g.protocol_type))
                .with_group_state(s(g.state.as_str()))
                .with_group_type(s(group_type(g.kind)))
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}

async fn delete(call: &Call<'_>, request: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut results = Vec::new();
    for group in request.groups_names {
        if !call.may_group(Operation::Delete, group.as_str()) {
            results.push(
                delete_groups_response::DeletableGroupResult::default()
                    .with_group_id(group)
                    .with_error_code(codes::GROUP_AUTHORIZATION_FAILED),
            );
            continue;
        }
        if let Some(c) = call.group_coordinator_error(&group) {
            results.push(
                delete_groups_response::DeletableGroupResult::default()
                    .with_group_id(group)
                    .with_error_code(c),
            );
            continue;
        }
        let code = match call.context.coordinator.delete_group(group.as_str()).await {
            Ok(()) => {
                info!(group = %group.as_str(), "group deleted");
                // A share group's share-partitions go with it.
                let share = &call.context.share;
                let gone = share.forget(group.as_str());
                if let Err(e) = share.keep(group.as_str(), &gone).await {
                    tracing::warn!(group = %group.as_str(), error = %e, "a deleted share group's state could not be removed; it is removed with the next change");
                }
                codes::NONE
            }
            Err(e) => code(&e),
        };
        results.push(
            delete_groups_response::DeletableGroupResult::default()
                .with_group_id(group)
                .with_error_code(code),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}

pub(crate) struct JoinGroup;

impl Api for JoinGroup {
    const KEY: ApiKey = ApiKey::JoinGroup;
    const VERSIONS: RangeInclusive<i16> = 0..=9;
    type Request = JoinGroupRequest;

    async fn handle(
        call: &Call<'_>,
        request: JoinGroupRequest,
        shutdown: &mut Shutdown,
    ) -> Option<JoinGroupResponse> {
        if !call.may_group(Operation::Read, request.group_id.as_str()) {
            return Some(
                JoinGroupResponse::default()
                    .with_error_code(codes::GROUP_AUTHORIZATION_FAILED)
                    .with_generation_id(-1)
                    .with_protocol_name((call.version < 7).then(Default::default)),
            );
        }
        if let Some(c) = join_refusal(call, &request) {
            return Some(
                JoinGroupResponse::default()
                    .with_error_code(c)
                    .with_generation_id(-1)
                    .with_protocol_name((call.version < 7).then(Default::default)),
            );
        }
        let group_id = request.group_id.to_string();
        let mut answer = join(call, request, shutdown).await;
        answer.error_code = settle(call, &group_id, answer.error_code);
        Some(answer)
    }

    fn unsupported(version: i16) -> Option<(i16, JoinGroupResponse)> {
        let body = JoinGroupResponse::default()
            .with_error_code(codes::UNSUPPORTED_VERSION)
            .with_protocol_name((version < 7).then(Default::default));
        Some((version, body))
    }
}

pub(crate) struct SyncGroup;

impl Api for SyncGroup {
    const KEY: ApiKey = ApiKey::SyncGroup;
    const VERSIONS: RangeInclusive<i16> = 0..=5;
    type Request = SyncGroupRequest;

    async fn handle(
        call: &Call<'_>,
        request: SyncGroupRequest,
        shutdown: &mut Shutdown,
    ) -> Option<SyncGroupResponse> {
        // v5+ must name the protocol type and name (KIP-559), checked before the ACL as
        // Kafka's `KafkaApis.handleSyncGroupRequest` does.
        if call.version >= 5 && (request.protocol_type.is_none() || request.protocol_name.is_none())
        {
            return Some(
                SyncGroupResponse::default().with_error_code(codes::INCONSISTENT_GROUP_PROTOCOL),
            );
        }
        if !call.may_group(Operation::Read, request.group_id.as_str()) {
            return Some(
                SyncGroupResponse::default().with_error_code(codes::GROUP_AUTHORIZATION_FAILED),
            );
        }
        if let Some(c) = refusal(call, &request.group_id) {
            return Some(SyncGroupResponse::default().with_error_code(c));
        }
        let group_id = request.group_id.to_string();
        let mut answer = sync(call, request, shutdown).await;
        answer.error_code = settle(call, &group_id, answer.error_code);
        Some(answer)
    }

    fn unsupported(version: i16) -> Option<(i16, SyncGroupResponse)> {
        let body = SyncGroupResponse::default().with_error_code(codes::UNSUPPORTED_VERSION);
        Some((version, body))
    }
}

pub(crate) struct Heartbeat;

impl Api for Heartbeat {
    const KEY: ApiKey = ApiKey::Heartbeat;
    const VERSIONS: RangeInclusive<i16> = 0..=4;
    type Request = HeartbeatRequest;

    async fn handle(
        call: &Call<'_>,
        request: HeartbeatRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<HeartbeatResponse> {
        if !call.may_group(Operation::Read, request.group_id.as_str()) {
            return Some(
                HeartbeatResponse::default().with_error_code(codes::GROUP_AUTHORIZATION_FAILED),
            );
        }
        // Kafka answers a heartbeat while the group loads with no error ("blindly").
        if let Some(c) = refusal(call, &request.group_id) {
            let c = if c == codes::COORDINATOR_LOAD_IN_PROGRESS {
                codes::NONE
            } else {
                c
            };
            return Some(HeartbeatResponse::default().with_error_code(c));
        }
        let group_id = request.group_id.to_string();
        let mut answer = heartbeat(call, request).await;
        answer.error_code = match settle(call, &group_id, answer.error_code) {
            codes::COORDINATOR_LOAD_IN_PROGRESS => codes::NONE,
            c => c,
        };
        Some(answer)
    }

    fn unsupported(version: i16) -> Option<(i16, HeartbeatResponse)> {
        let body = HeartbeatResponse::default().with_error_code(codes::UNSUPPORTED_VERSION);
        Some((version, body))
    }
}

pub(crate) struct LeaveGroup;

impl Api for LeaveGroup {
    const KEY: ApiKey = ApiKey::LeaveGroup;
    const VERSIONS: RangeInclusive<i16> = 0..=5;
    type Request = LeaveGroupRequest;

    async fn handle(
        call: &Call<'_>,
        request: LeaveGroupRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<LeaveGroupResponse> {
        if !call.may_group(Operation::Read, request.group_id.as_str()) {
            return Some(
                LeaveGroupResponse::default().with_error_code(codes::GROUP_AUTHORIZATION_FAILED),
            );
        }
        if let Some(c) = refusal(call, &request.group_id) {
            return Some(LeaveGroupResponse::default().with_error_code(c));
        }
        let group_id = request.group_id.to_string();
        let mut answer = leave(call, request).await;
        answer.error_code = settle(call, &group_id, answer.error_code);
        Some(answer)
    }

    fn unsupported(version: i16) -> Option<(i16, LeaveGroupResponse)> {
        let body = LeaveGroupResponse::default().with_error_code(codes::UNSUPPORTED_VERSION);
        Some((version, body))
    }
}

pub(crate) struct DescribeGroups;

impl Api for DescribeGroups {
    const KEY: ApiKey = ApiKey::DescribeGroups;
    const VERSIONS: RangeInclusive<i16> = 0..=6;
    type Request = DescribeGroupsRequest;

    async fn handle(
        call: &Call<'_>,
        request: DescribeGroupsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<DescribeGroupsResponse> {
        Some(describe(call, request).await)
    }
}

pub(crate) struct ListGroups;

impl Api for ListGroups {
    const KEY: ApiKey = ApiKey::ListGroups;
    const VERSIONS: RangeInclusive<i16> = 0..=5;
    type Request = ListGroupsRequest;

    async fn handle(
        call: &Call<'_>,
        request: ListGroupsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<ListGroupsResponse> {
        Some(list(call, request).await)
    }

    fn unsupported(version: i16) -> Option<(i16, ListGroupsResponse)> {
        let body = ListGroupsResponse::default().with_error_code(codes::UNSUPPORTED_VERSION);
        Some((version, body))
    }
}

pub(crate) struct DeleteGroups;

impl Api for DeleteGroups {
    const KEY: ApiKey = ApiKey::DeleteGroups;
    const VERSIONS: RangeInclusive<i16> = 0..=2;
    type Request = DeleteGroupsRequest;

    async fn handle(
        call: &Call<'_>,
        request: DeleteGroupsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<DeleteGroupsResponse> {
        Some(delete(call, request).await)
    }
}
