//! DescribeCluster: the live brokers (this one alone, or every live broker over the same
//! PostgreSQL database, as reached through the listener the request came in on), the cluster
//! id, and the lowest live node id as the controller (every broker serves what Kafka sends
//! to its controller).

use std::ops::RangeInclusive;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{ApiKey, BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::registry::Api;
use super::Call;
use crate::shutdown::Shutdown;

/// Kafka's "authorized operations not asked for" value.
const NOT_ASKED: i32 = i32::MIN;

/// Every operation on a cluster (Kafka's `AclOperation` codes: CREATE 5, ALTER 7,
/// DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12) as
/// a bit set: there are no ACLs here, so every client may do each.
const CLUSTER_OPERATIONS: i32 = 1 << 5 | 1 << 7 | 1 << 8 | 1 << 9 | 1 << 10 | 1 << 11 | 1 << 12;

fn describe_cluster(call: &Call<'_>, request: &DescribeClusterRequest) -> DescribeClusterResponse {
    let context = call.context;
    let broker = |id: i32, host: &str, port: i32| {
        DescribeClusterBroker::default()
            .with_broker_id(BrokerId(id))
            .with_host(StrBytes::from_string(host.to_string()))
            .with_port(port)
            .with_rack(None)
    };
    let mut brokers = vec![broker(
        context.ownership.node_id(),
        &call.endpoint().host,
        call.endpoint().port,
    )];
    brokers.extend(
        context
            .ownership
            .others(call.endpoint().protocol)
            .iter()
            .map(|o| broker(o.node_id, &o.host, o.port)),
    );
    brokers.sort_by_key(|b| b.broker_id.0);
    // As Metadata: the lowest live node id.
    let controller = brokers
        .first()
        .map_or(BrokerId(context.ownership.node_id()), |b| b.broker_id);
    let operations = if request.include_cluster_authorized_operations {
        CLUSTER_OPERATIONS
    } else {
        NOT_ASKED
    };
    DescribeClusterResponse::default()
        .with_error_message(None)
        .with_endpoint_type(request.endpoint_type)
        .with_cluster_id(StrBytes::from_string(context.cluster_id.clone()))
        .with_controller_id(controller)
        .with_brokers(brokers)
        .with_cluster_authorized_operations(operations)
}

pub(crate) struct DescribeCluster;

impl Api for DescribeCluster {
    const KEY: ApiKey = ApiKey::DescribeCluster;
    /// v1 adds the endpoint type; this node is both the broker and the controller, so either
    /// type lists it. v2 may ask for fenced brokers too (KIP-1073): a broker that serves is
    /// never fenced, so the list is the same and says so (`is_fenced` false).
    const VERSIONS: RangeInclusive<i16> = 0..=2;
    type Request = DescribeClusterRequest;

    async fn handle(
        call: &Call<'_>,
        request: DescribeClusterRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<DescribeClusterResponse> {
        Some(describe_cluster(call, &request))
    }
}
