//! ApiVersions: the versions this broker serves (see `codec::SUPPORTED`).

use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use super::Call;
use crate::codec::advertised_versions;

pub(super) fn handle(_call: &Call<'_>, _request: &ApiVersionsRequest) -> ApiVersionsResponse {
    // v3's client software name and version are not checked: Kafka only uses them for metrics.
    ApiVersionsResponse::default().with_api_keys(advertised_versions())
}
