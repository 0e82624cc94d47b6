//! InitProducerId: a fresh producer id for idempotent producers; for a transactional id,
//! the transaction coordinator's answer (epoch bumps, fencing, KIP-360 from v3). A
//! transactional id this broker does not coordinate (several brokers over PostgreSQL) is
//! refused NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while its slot loads) after the
//! checks Kafka makes first; without a transactional id any broker answers.

use std::ops::RangeInclusive;

use coordinator_core::txn::{ProducerIdAndEpoch, ProducerIdSource};
use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::registry::Api;
use super::transactions::txn_refusal;
use super::Call;
use crate::api::codes;
use crate::shutdown::Shutdown;

async fn handle(call: &Call<'_>, request: &InitProducerIdRequest) -> InitProducerIdResponse {
    let Some(id) = request.transactional_id.as_ref() else {
        // Kafka hands an idempotent producer a new id whatever it presents.
        return InitProducerIdResponse::default()
            .with_producer_id(ProducerId(call.context.producer_ids.next_producer_id()))
            .with_producer_epoch(0);
    };
    let expected = if call.version >= 3 {
        ProducerIdAndEpoch::from_wire(request.producer_id.0, request.producer_epoch)
    } else {
        Ok(None)
    };
    // Kafka's `TransactionCoordinator.handleInitProducerId` checks the timeout first
    // (INVALID_TRANSACTION_TIMEOUT, answered by the core), then the coordinator.
    let max = call.context.txn.config().transaction_max_timeout_ms;
    let timeout_ok = u64::try_from(request.transaction_timeout_ms).is_ok_and(|t| t > 0 && t <= max);
    if let (Ok(_), true, Some(c)) = (&expected, timeout_ok, txn_refusal(call, id)) {
        return InitProducerIdResponse::default()
            .with_error_code(c)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
    }
    let answer = match expected {
        Ok(expected) => {
            call.context
                .txn
                .init_producer_id(id, request.transaction_timeout_ms, expected)
                .await
        }
        Err(e) => Err(e),
    };
    match answer {
        Ok(p) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(p.producer_id))
            .with_producer_epoch(p.epoch),
        Err(e) => InitProducerIdResponse::default()
            .with_error_code(e.kafka_code_for(call.version >= 4))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    }
}

pub(crate) struct InitProducerId;

impl Api for InitProducerId {
    const KEY: ApiKey = ApiKey::InitProducerId;
    /// v3 carries the producer id and epoch (KIP-360), v4 knows PRODUCER_FENCED (KIP-588), v5
    /// TRANSACTION_ABORTABLE (KIP-890, never answered here). v6 (two-phase commit, KIP-939)
    /// is unstable in Kafka 4.2, which does not advertise it either.
    const VERSIONS: RangeInclusive<i16> = 0..=5;
    type Request = InitProducerIdRequest;

    async fn handle(
        call: &Call<'_>,
        request: InitProducerIdRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<InitProducerIdResponse> {
        Some(handle(call, &request).await)
    }

    fn unsupported(version: i16) -> Option<(i16, InitProducerIdResponse)> {
        let body = InitProducerIdResponse::default().with_error_code(codes::UNSUPPORTED_VERSION);
        Some((version, body))
    }
}
