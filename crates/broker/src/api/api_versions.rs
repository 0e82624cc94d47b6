//! ApiVersions: the versions this broker serves (the [registry](super::registry)'s).

use std::ops::RangeInclusive;

use kafka_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::registry::{advertised_versions, Api};
use super::{codes, Call};
use crate::shutdown::Shutdown;

pub(crate) struct ApiVersions;

/// Kafka's `transaction.version` feature (`TransactionVersion.FEATURE_NAME`): what makes
/// Kafka's Java client use transaction version 2 (KIP-890 part 2) when finalized at 2.
pub(crate) const TRANSACTION_VERSION: &str = "transaction.version";
/// The finalized features' epoch this broker answers (Kafka: the metadata offset of the last
/// feature change; a client takes a broker's finalized features only with an epoch newer
/// than the last it saw, from −1).
const FINALIZED_FEATURES_EPOCH: i64 = 1;

/// The `transaction.version` level this broker finalizes: 2 for a broker alone, which serves
/// every call transaction version 2 makes (EndTxn v5, the implicit adds of Produce v12+ and
/// TxnOffsetCommit v5, AddPartitionsToTxn v4–5, WriteTxnMarkers v2); 0 for a broker of a
/// cluster over PostgreSQL, whose implicit adds cannot yet reach a transaction coordinator on
/// another broker (see the README), so its clients keep the classic protocol.
pub(crate) fn transaction_version_level(call: &Call<'_>) -> i16 {
    if call.context.ownership.is_alone() {
        2
    } else {
        0
    }
}

impl Api for ApiVersions {
    const KEY: ApiKey = ApiKey::ApiVersions;
    /// v3 adds the client's software name and version and the features (tagged fields), v4
    /// lets a feature's minimum version be 0 (KAFKA-17011): below v4 the supported features
    /// whose minimum is 0 are left out, as Kafka leaves them out (KAFKA-17492).
    const VERSIONS: RangeInclusive<i16> = 0..=4;
    type Request = ApiVersionsRequest;

    async fn handle(
        call: &Call<'_>,
        _request: ApiVersionsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<ApiVersionsResponse> {
        // v3's client software name and version are not checked: Kafka only uses them for
        // metrics.
        let mut response = ApiVersionsResponse::default().with_api_keys(advertised_versions());
        if call.version >= 3 {
            // transaction.version: supported 0-2 (Kafka 4.2's TV_0 to TV_2).
            let supported = if call.version >= 4 {
                vec![SupportedFeatureKey::default()
                    .with_name(StrBytes::from_static_str(TRANSACTION_VERSION))
                    .with_min_version(0)
                    .with_max_version(2)]
            } else {
                Vec::new()
            };
            let level = transaction_version_level(call);
            // A feature at level 0 is not finalized (Kafka lists none such).
            let finalized = if level > 0 {
                vec![FinalizedFeatureKey::default()
                    .with_name(StrBytes::from_static_str(TRANSACTION_VERSION))
                    .with_min_version_level(level)
                    .with_max_version_level(level)]
            } else {
                Vec::new()
            };
            response = response
                .with_supported_features(supported)
                .with_finalized_features_epoch(FINALIZED_FEATURES_EPOCH)
                .with_finalized_features(finalized);
        }
        Some(response)
    }

    /// A v0 body listing the supported versions, so the client can pick one (Kafka's rule:
    /// the client retries with the highest version both sides know).
    fn unsupported(_version: i16) -> Option<(i16, ApiVersionsResponse)> {
        let body = ApiVersionsResponse::default()
            .with_error_code(codes::UNSUPPORTED_VERSION)
            .with_api_keys(advertised_versions());
        Some((0, body))
    }
}
