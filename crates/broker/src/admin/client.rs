//! A small Kafka client over one TCP connection: ApiVersions at connect, then one request at
//! a time, each at the highest version both sides speak, each bounded by the timeout.
//!
//! It uses the same codec (`kafka-protocol`) as the broker, so what it sends is what any
//! Kafka client sends; it is not tied to this broker.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{
    encode_request_header_into_buffer, Decodable, HeaderVersion, Request, StrBytes,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::error::AdminError;

/// The client id the tool sends (it shows in the broker's logs).
const CLIENT_ID: &str = "groups-tool";

/// The largest response accepted: a broker answering more is broken or hostile.
const MAX_RESPONSE: usize = 64 * 1024 * 1024;

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
    stream: TcpStream,
    /// HOST:PORT as given, for messages.
    address: String,
    timeout: Duration,
    correlation: i32,
    buffer: BytesMut,
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
                    let _ = stream.set_nodelay(true);
                    let mut client = Client {
                        stream,
                        address: address.to_string(),
                        timeout,
                        correlation: 0,
                        buffer: BytesMut::new(),
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
        let protocol = |address: &str, reason: String| AdminError::Protocol {
            address: address.to_string(),
            api,
            reason,
        };
        self.correlation = self.correlation.wrapping_add(1);
        let correlation = self.correlation;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        encode_request_header_into_buffer(&mut frame, &header)
            .and_then(|()| request.encode(&mut frame, version))
            .map_err(|e| protocol(&self.address, format!("cannot encode the request: {e:#}")))?;
        let size = i32::try_from(frame.len() - 4)
            .map_err(|_| protocol(&self.address, "the request exceeds 2 GiB".into()))?;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        let timeout = self.timeout;
        let exchange = async {
            self.stream
                .write_all(&frame)
                .await
                .map_err(|e| e.to_string())?;
            self.read_frame().await
        };
        let mut body = match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(body)) => body,
            Ok(Err(reason)) => return Err(protocol(&self.address, reason)),
            Err(_) => {
                return Err(AdminError::Timeout {
                    address: self.address.clone(),
                    api,
                    timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                })
            }
        };
        let header_version = <R::Response as HeaderVersion>::header_version(version);
        let header = ResponseHeader::decode(&mut body, header_version)
            .map_err(|e| protocol(&self.address, format!("malformed response header: {e:#}")))?;
        if header.correlation_id != correlation {
            return Err(protocol(
                &self.address,
                format!(
                    "answered correlation id {} to request {correlation}",
                    header.correlation_id
                ),
            ));
        }
        let response = <R::Response as Decodable>::decode(&mut body, version)
            .map_err(|e| protocol(&self.address, format!("malformed response: {e:#}")))?;
        Ok(response)
    }

    /// The next response frame (without its length).
    async fn read_frame(&mut self) -> Result<Bytes, String> {
        loop {
            if self.buffer.len() >= 4 {
                let len = i32::from_be_bytes([
                    self.buffer[0],
                    self.buffer[1],
                    self.buffer[2],
                    self.buffer[3],
                ]);
                let len = usize::try_from(len)
                    .ok()
                    .filter(|&l| l <= MAX_RESPONSE)
                    .ok_or_else(|| format!("a response frame declares {len} bytes"))?;
                if self.buffer.len() >= 4 + len {
                    self.buffer.advance(4);
                    return Ok(self.buffer.split_to(len).freeze());
                }
            }
            match self.stream.read_buf(&mut self.buffer).await {
                Ok(0) => return Err("the broker closed the connection".into()),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
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
                other => panic!("{other:?} has no check"),
            }
        }
    }
}
