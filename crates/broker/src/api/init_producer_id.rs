//! InitProducerId: a fresh producer id for idempotent producers. No transactions.

use std::ops::RangeInclusive;

use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::registry::Api;
use super::{codes, Call};
use crate::shutdown::Shutdown;

fn handle(call: &Call<'_>, request: &InitProducerIdRequest) -> InitProducerIdResponse {
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

pub(crate) struct InitProducerId;

impl Api for InitProducerId {
    const KEY: ApiKey = ApiKey::InitProducerId;
    const VERSIONS: RangeInclusive<i16> = 0..=1;
    type Request = InitProducerIdRequest;

    async fn handle(
        call: &Call<'_>,
        request: InitProducerIdRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<InitProducerIdResponse> {
        Some(handle(call, &request))
    }

    fn unsupported(version: i16) -> Option<(i16, InitProducerIdResponse)> {
        let body = InitProducerIdResponse::default().with_error_code(codes::UNSUPPORTED_VERSION);
        Some((version, body))
    }
}
