//! FindCoordinator: this broker coordinates every group and every transactional id.

use crate::acl::Operation;
use std::ops::RangeInclusive;

use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::registry::Api;
use super::{codes, Call};
use crate::context::NODE_ID;
use crate::shutdown::Shutdown;

/// `key_type` 1 asks for a transaction coordinator.
const TRANSACTION: i8 = 1;

fn handle(call: &Call<'_>, request: &FindCoordinatorRequest) -> FindCoordinatorResponse {
    // Served versions are 0-1: the answer sits in the top-level fields. An empty
    // transactional id is INVALID_REQUEST, as in Kafka's `KafkaApis`.
    if request.key_type == TRANSACTION && request.key.is_empty() {
        return FindCoordinatorResponse::default()
            .with_error_code(codes::INVALID_REQUEST)
            .with_error_message(Some(StrBytes::from_static_str(
                "the transactional id must not be empty",
            )))
            .with_node_id(BrokerId(-1))
            .with_host(StrBytes::default())
            .with_port(-1);
    }
    // A group's coordinator is told to those who may describe the group (Kafka); a
    // transactional id's is not checked (TRANSACTIONAL_ID ACLs are not enforced here).
    if request.key_type != TRANSACTION && !call.may_group(Operation::Describe, request.key.as_str())
    {
        return FindCoordinatorResponse::default()
            .with_error_code(codes::GROUP_AUTHORIZATION_FAILED)
            .with_error_message(Some(StrBytes::from_static_str(
                "Group authorization failed.",
            )))
            .with_node_id(BrokerId(-1))
            .with_host(StrBytes::default())
            .with_port(-1);
    }
    FindCoordinatorResponse::default()
        .with_error_message(None)
        .with_node_id(BrokerId(NODE_ID))
        .with_host(StrBytes::from_string(call.endpoint().host.clone()))
        .with_port(call.endpoint().port)
}

pub(crate) struct FindCoordinator;

impl Api for FindCoordinator {
    const KEY: ApiKey = ApiKey::FindCoordinator;
    const VERSIONS: RangeInclusive<i16> = 0..=1;
    type Request = FindCoordinatorRequest;

    async fn handle(
        call: &Call<'_>,
        request: FindCoordinatorRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<FindCoordinatorResponse> {
        Some(handle(call, &request))
    }

    /// v0-3 carry a top-level error; v4's batched form does not.
    fn unsupported(version: i16) -> Option<(i16, FindCoordinatorResponse)> {
        (version <= 3).then(|| {
            let body = FindCoordinatorResponse::default()
                .with_error_code(codes::UNSUPPORTED_VERSION)
                .with_error_message(None);
            (version, body)
        })
    }
}
