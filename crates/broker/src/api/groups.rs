//! The classic group APIs. Until the core's classic-group API is merged they answer
//! COORDINATOR_NOT_AVAILABLE, which clients retry.

use kafka_protocol::messages::*;

use super::{codes, Call};
use crate::shutdown::Shutdown;

pub(super) async fn join(
    call: &Call<'_>,
    _request: JoinGroupRequest,
    _shutdown: &mut Shutdown,
) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
        .with_protocol_name((call.version < 7).then(Default::default))
}

pub(super) async fn sync(
    _call: &Call<'_>,
    _request: SyncGroupRequest,
    _shutdown: &mut Shutdown,
) -> SyncGroupResponse {
    SyncGroupResponse::default().with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
}

pub(super) async fn heartbeat(_call: &Call<'_>, _request: HeartbeatRequest) -> HeartbeatResponse {
    HeartbeatResponse::default().with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
}

pub(super) async fn leave(_call: &Call<'_>, _request: LeaveGroupRequest) -> LeaveGroupResponse {
    LeaveGroupResponse::default().with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
}

pub(super) async fn describe(
    _call: &Call<'_>,
    request: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    DescribeGroupsResponse::default().with_groups(
        request
            .groups
            .into_iter()
            .map(|g| {
                describe_groups_response::DescribedGroup::default()
                    .with_group_id(g)
                    .with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
            })
            .collect(),
    )
}

pub(super) async fn list(_call: &Call<'_>, _request: ListGroupsRequest) -> ListGroupsResponse {
    ListGroupsResponse::default().with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
}

pub(super) async fn delete(call: &Call<'_>, request: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut results = Vec::new();
    for group in request.groups_names {
        let code = match call.context.coordinator.delete_group(group.as_str()).await {
            Ok(()) => codes::NONE,
            Err(e) => e.kafka_code().unwrap_or(codes::UNKNOWN_SERVER_ERROR),
        };
        results.push(
            delete_groups_response::DeletableGroupResult::default()
                .with_group_id(group)
                .with_error_code(code),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
