//! ApiVersions: the versions this broker serves (the [registry](super::registry)'s).

use std::ops::RangeInclusive;

use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use super::registry::{advertised_versions, Api};
use super::{codes, Call};
use crate::shutdown::Shutdown;

pub(crate) struct ApiVersions;

impl Api for ApiVersions {
    const KEY: ApiKey = ApiKey::ApiVersions;
    /// v3 adds the client's software name and version, v4 only lets a feature's minimum
    /// version be 0 (KAFKA-17011; this broker lists no features), so v4 is answered as v3.
    const VERSIONS: RangeInclusive<i16> = 0..=4;
    type Request = ApiVersionsRequest;

    async fn handle(
        _call: &Call<'_>,
        _request: ApiVersionsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<ApiVersionsResponse> {
        // v3's client software name and version are not checked: Kafka only uses them for
        // metrics.
        Some(ApiVersionsResponse::default().with_api_keys(advertised_versions()))
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
