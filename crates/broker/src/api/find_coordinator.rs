//! FindCoordinator: this broker coordinates every group. Transactions have no coordinator.

use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::{codes, Call};
use crate::context::NODE_ID;

/// `key_type` 1 asks for a transaction coordinator.
const TRANSACTION: i8 = 1;

pub(super) fn handle(call: &Call<'_>, request: &FindCoordinatorRequest) -> FindCoordinatorResponse {
    // Served versions are 0-1: the answer sits in the top-level fields.
    if request.key_type == TRANSACTION {
        return FindCoordinatorResponse::default()
            .with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
            .with_error_message(Some(StrBytes::from_static_str(
                "this broker has no transaction coordinator",
            )))
            .with_node_id(BrokerId(-1))
            .with_host(StrBytes::default())
            .with_port(-1);
    }
    FindCoordinatorResponse::default()
        .with_error_message(None)
        .with_node_id(BrokerId(NODE_ID))
        .with_host(StrBytes::from_string(call.context.host.clone()))
        .with_port(call.context.port)
}
