//! InitProducerId: a fresh producer id for idempotent producers. No transactions.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{codes, Call};

pub(super) fn handle(call: &Call<'_>, request: &InitProducerIdRequest) -> InitProducerIdResponse {
    if request.transactional_id.is_some() {
        // A transactional producer asks FindCoordinator for its transaction coordinator
        // first and already gets this code there; one that skips it gets it here.
        return InitProducerIdResponse::default()
            .with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
    }
    InitProducerIdResponse::default()
        .with_producer_id(ProducerId(call.context.new_producer_id()))
        .with_producer_epoch(0)
}
