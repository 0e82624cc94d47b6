//! A small Kafka client over one TCP connection: ApiVersions at connect, then one request at
//! a time, each at the highest version both sides speak, each bounded by the timeout.
//!
//! The exchange itself is the workspace's wire client ([`kafka_client::Connection`], over the
//! same codec as the broker), so what it sends is what any Kafka client sends; it is not tied
//! to this broker. This module adds version negotiation and the tool's error codes.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use kafka_client::{ClientError, Connection};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Request;
use tokio::net::TcpStream;

use super::error::AdminError;

/// The client id the tool sends (it shows in the broker's logs).
const CLIENT_ID: &str = "groups-tool";

/// The versions this tool speaks, per API: those whose fields it fills and reads. The
/// highest one the broker also speaks is used.
const SPOKEN: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Metadata, 4, 9),
    (ApiKey::FindCoordinator, 0, 3),
    (ApiKey::ListGroups, 0, 4),
    (ApiKey::DescribeGroups, 0, 5),
    // v2 is the first with "every partition of the group"; v8 batches groups.
    (ApiKey::OffsetFetch, 2, 7),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    // Consumer-protocol groups (KIP-848), which DescribeGroups does not describe.
    (ApiKey::ConsumerGroupDescribe, 0, 0),
    // Share groups (KIP-932): their members, and their start offsets for the lag.
    (ApiKey::ShareGroupDescribe, 1, 1),
    (ApiKey::DescribeShareGroupOffsets, 0, 0),
];

fn api_name(key: ApiKey) -> &'static str {
    match key {
        ApiKey::Metadata => "Metadata",
        ApiKey::FindCoordinator => "FindCoordinator",
        ApiKey::ListGroups => "ListGroups",
        ApiKey::DescribeGroups => "DescribeGroups",
        ApiKey::OffsetFetch => "OffsetFetch",
        ApiKey::ListOffsets => "ListOffsets",
        ApiKey::OffsetCommit => "OffsetCommit",
        ApiKey::DeleteGroups => "DeleteGroups",
        ApiKey::OffsetDelete => "OffsetDelete",
        ApiKey::ConsumerGroupDescribe => "ConsumerGroupDescribe",
        ApiKey::ShareGroupDescribe => "ShareGroupDescribe",
        ApiKey::DescribeShareGroupOffsets => "DescribeShareGroupOffsets",
        ApiKey::ApiVersions => "ApiVersions",
        _ => "a request",
    }
}

/// The version to use for `key`: the highest both sides speak, given the broker's ranges.
pub(crate) fn negotiate(key: ApiKey, broker: &HashMap<i16, (i16, i16)>) -> Result<i16, (i16, i16)> {
    let (ours_min, ours_max) = SPOKEN
        .iter()
        .find(|(k, _, _)| *k == key)
        .map_or((0, -1), |&(_, lo, hi)| (lo, hi));
    match broker.get(&(key as i16)) {
        Some(&(lo, hi)) if lo.max(ours_min) <= hi.min(ours_max) => Ok(hi.min(ours_max)),
        _ => Err((ours_min, ours_max)),
    }
}

/// One connection to one broker.
#[derive(Debug)]
pub(crate) struct Client {
    connection: Connection,
    /// HOST:PORT as given, for messages.
    address: String,
    timeout: Duration,
    /// The broker's ranges, by API key.
    versions: HashMap<i16, (i16, i16)>,
}

impl Client {
    /// Connects to the first address of `address` (HOST:PORT) that accepts, within
    /// `timeout`, and asks for the broker's API versions.
    pub(crate) async fn connect(address: &str, timeout: Duration) -> Result<Client, AdminError> {
        let unreachable = |reason: String| AdminError::Unreachable {
            address: address.to_string(),
            reason,
        };
        let addrs: Vec<SocketAddr> =
            match tokio::time::timeout(timeout, tokio::net::lookup_host(address)).await {
                Ok(Ok(addrs)) => addrs.collect(),
                Ok(Err(e)) => return Err(unreachable(format!("cannot resolve it: {e}"))),
                Err(_) => {
                    return Err(unreachable(format!(
                        "resolving it took longer than {} ms",
                        timeout.as_millis()
                    )))
                }
            };
        let mut last = String::from("it resolves to no address");
        for addr in addrs {
            match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => {
                    let mut connection = Connection::new(stream);
                    connection.set_client_id(CLIENT_ID);
                    let mut client = Client {
                        connection,
                        address: address.to_string(),
                        timeout,
                        versions: HashMap::new(),
                    };
                    client.api_versions().await?;
                    return Ok(client);
                }
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => {
                    last = format!("no connection within {} ms", timeout.as_millis());
                }
            }
        }
        Err(unreachable(last))
    }

    /// Whether the broker and this tool share a version of `key`.
    pub(crate) fn supports(&self, key: ApiKey) -> bool {
        negotiate(key, &self.versions).is_ok()
    }

    async fn api_versions(&mut self) -> Result<(), AdminError> {
        // v0 is answered by every broker, whatever it speaks.
        let response = self.call_at(&ApiVersionsRequest::default(), 0).await?;
        if response.error_code != 0 {
            return Err(AdminError::Broker {
                api: "ApiVersions",
                context: None,
                code: response.error_code,
            });
        }
        self.versions = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        Ok(())
    }

    /// Sends `request` at the highest version both sides speak and returns the response
    /// with that version.
    pub(crate) async fn call<R: Request>(
        &mut self,
        request: &R,
    ) -> Result<(R::Response, i16), AdminError> {
        let version = self.version(R::KEY)?;
        Ok((self.call_at(request, version).await?, version))
    }

    /// The version [`call`](Self::call) would use for `key`.
    pub(crate) fn version(&self, key: i16) -> Result<i16, AdminError> {
        let api = ApiKey::try_from(key).unwrap_or(ApiKey::ApiVersions);
        negotiate(api, &self.versions).map_err(|(min, max)| AdminError::UnsupportedApi {
            address: self.address.clone(),
            api: api_name(api),
            min,
            max,
        })
    }

    async fn call_at<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, AdminError> {
        let api = api_name(ApiKey::try_from(R::KEY).unwrap_or(ApiKey::ApiVersions));
        self.connection
            .call_within(request, version, self.timeout)
            .await
            .map_err(|e| match e {
                ClientError::Timeout(timeout_ms) => AdminError::Timeout {
                    address: self.address.clone(),
                    api,
                    timeout_ms,
                },
                other => AdminError::Protocol {
                    address: self.address.clone(),
                    api,
                    reason: other.to_string(),
                },
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_common_version_is_used_and_a_missing_api_is_an_error() {
        let broker: HashMap<i16, (i16, i16)> = [
            (ApiKey::OffsetFetch as i16, (1, 3)),
            (ApiKey::DescribeGroups as i16, (0, 9)),
            (ApiKey::OffsetDelete as i16, (1, 1)),
        ]
        .into();
        assert_eq!(negotiate(ApiKey::OffsetFetch, &broker), Ok(3));
        assert_eq!(negotiate(ApiKey::DescribeGroups, &broker), Ok(5));
        assert_eq!(negotiate(ApiKey::OffsetDelete, &broker), Err((0, 0)));
        assert_eq!(negotiate(ApiKey::ListGroups, &broker), Err((0, 4)));
    }

    #[test]
    fn every_version_spoken_is_inside_the_codec() {
        use kafka_protocol::protocol::Message;
        fn check<Req: Message, Resp: Message>(lo: i16, hi: i16) {
            assert!(Req::VERSIONS.min <= lo && Req::VERSIONS.max >= hi);
            assert!(Resp::VERSIONS.min <= lo && Resp::VERSIONS.max >= hi);
        }
        for &(key, lo, hi) in SPOKEN {
            match key {
                ApiKey::Metadata => check::<MetadataRequest, MetadataResponse>(lo, hi),
                ApiKey::FindCoordinator => {
                    check::<FindCoordinatorRequest, FindCoordinatorResponse>(lo, hi)
                }
                ApiKey::ListGroups => check::<ListGroupsRequest, ListGroupsResponse>(lo, hi),
                ApiKey::DescribeGroups => {
                    check::<DescribeGroupsRequest, DescribeGroupsResponse>(lo, hi)
                }
                ApiKey::OffsetFetch => check::<OffsetFetchRequest, OffsetFetchResponse>(lo, hi),
                ApiKey::ListOffsets => check::<ListOffsetsRequest, ListOffsetsResponse>(lo, hi),
                ApiKey::OffsetCommit => check::<OffsetCommitRequest, OffsetCommitResponse>(lo, hi),
                ApiKey::DeleteGroups => check::<DeleteGroupsRequest, DeleteGroupsResponse>(lo, hi),
                ApiKey::OffsetDelete => check::<OffsetDeleteRequest, OffsetDeleteResponse>(lo, hi),
                ApiKey::ConsumerGroupDescribe => {
                    check::<ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse>(lo, hi)
                }
                ApiKey::ShareGroupDescribe => {
                    check::<ShareGroupDescribeRequest, ShareGroupDescribeResponse>(lo, hi)
                }
                ApiKey::DescribeShareGroupOffsets => check::<
                    DescribeShareGroupOffsetsRequest,
                    DescribeShareGroupOffsetsResponse,
                >(lo, hi),
                other => panic!("{other:?} has no check"),
            }
        }
    }
}
