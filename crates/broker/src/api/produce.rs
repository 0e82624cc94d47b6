//! Produce: check each partition's batches, append them with the producer's bytes, answer
//! with the first offset. `acks=0` gets no answer, as in Kafka.

use std::ops::RangeInclusive;

use coordinator_core::{LogError, TopicPartition};
use kafka_protocol::messages::produce_request::PartitionProduceData;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use tracing::debug;

use super::records::{check_batches, stamp_base_offset, Inflation, Refused};
use super::registry::Api;
use super::{codes, Call};
use crate::shutdown::Shutdown;

async fn handle(call: &Call<'_>, request: ProduceRequest) -> Option<ProduceResponse> {
    let transactional = request.transactional_id.is_some();
    let config = &call.context.config;
    let mut inflation = Inflation {
        per_batch: config.max_decompressed_batch_bytes,
        left: config.max_decompressed_request_bytes,
    };
    let mut responses = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            partitions.push(append(call, &name, transactional, data, &mut inflation).await);
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_partition_responses(partitions),
        );
    }
    (request.acks != 0).then(|| ProduceResponse::default().with_responses(responses))
}

/// Checks one partition's batches and appends them with the producer's bytes.
async fn append(
    call: &Call<'_>,
    topic: &str,
    transactional: bool,
    data: PartitionProduceData,
    inflation: &mut Inflation,
) -> PartitionProduceResponse {
    let log = &call.context.log;
    let answer = PartitionProduceResponse::default().with_index(data.index);
    let Ok(partition) = u32::try_from(data.index) else {
        return answer.with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION);
    };
    let tp = TopicPartition::new(topic, partition);
    if let Err(e) = log.bounds(&tp).await {
        return answer.with_error_code(log_code(&e));
    }
    let checked = match (transactional, data.records.as_ref()) {
        (true, _) => Err(Refused::Corrupt("transactions are not supported".into())),
        (false, None) => Err(Refused::Corrupt("the record set is null".into())),
        (false, Some(raw)) => check_batches(raw, inflation),
    };
    let batches = match checked {
        Ok(batches) => batches,
        Err(Refused::TooLarge(reason)) => {
            debug!(partition = %tp, %reason, "produce refused");
            return answer.with_error_code(codes::MESSAGE_TOO_LARGE);
        }
        Err(Refused::Corrupt(reason)) => {
            debug!(partition = %tp, %reason, "produce refused");
            // INVALID_RECORD (87) exists from Produce v8; older versions report
            // CORRUPT_MESSAGE, as Kafka does.
            return answer.with_error_code(codes::CORRUPT_MESSAGE);
        }
    };
    let mut first = None;
    for batch in batches {
        let bytes = batch.bytes;
        let encode = Box::new(move |base| stamp_base_offset(&bytes, base));
        match log.append_encoded(&tp, batch.records, encode).await {
            Ok(base) => {
                first.get_or_insert(base);
            }
            Err(e) => return answer.with_error_code(log_code(&e)),
        }
    }
    let log_start = log.bounds(&tp).await.map_or(-1, |(start, _)| start);
    answer
        .with_base_offset(first.unwrap_or(-1))
        .with_log_append_time_ms(-1)
        .with_log_start_offset(log_start)
}

pub(super) fn log_code(e: &LogError) -> i16 {
    e.kafka_code().unwrap_or(codes::UNKNOWN_SERVER_ERROR)
}

pub(crate) struct Produce;

impl Api for Produce {
    const KEY: ApiKey = ApiKey::Produce;
    /// Advertised from 0 although kafka-protocol 0.18 decodes from 3 only: librdkafka derives
    /// its compression features from the advertised Produce range and silently stops
    /// compressing when the minimum is 3 (Kafka 4 does the same, KAFKA-18659). A v0-2
    /// Produce closes the connection, as an undecodable request does.
    const VERSIONS: RangeInclusive<i16> = 0..=7;
    const DECODABLE_MIN: i16 = 3;
    type Request = ProduceRequest;

    async fn handle(
        call: &Call<'_>,
        request: ProduceRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<ProduceResponse> {
        handle(call, request).await
    }
}
