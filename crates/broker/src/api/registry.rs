//! The registry of the APIs the broker serves: one [`Api`] implementation per API (next to
//! its handler) and one [`entry`] in [`REGISTRY`]. ApiVersions, request decoding, dispatch,
//! response encoding and the UNSUPPORTED_VERSION answers all come from that table, so adding
//! an API is one entry here and one handler file.

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::pin::Pin;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{api_versions_response, ApiKey, RequestHeader};
use kafka_protocol::protocol::{Message, Request};

use super::Call;
use crate::auth::Session;
use crate::codec::encode_response;
use crate::context::Context;
use crate::shutdown::Shutdown;

/// The response type of API `A`.
pub(crate) type Response<A> = <<A as Api>::Request as Request>::Response;

/// One API the broker serves: its key, the versions it advertises, the request type the codec
/// decodes, and the handler.
pub(crate) trait Api: 'static {
    /// The API's key (checked at compile time against the request type's key).
    const KEY: ApiKey;
    /// The versions advertised in ApiVersions and answered.
    const VERSIONS: RangeInclusive<i16>;
    /// The lowest version the codec decodes: above the advertised minimum only for Produce
    /// (see its handler). A version in between closes the connection.
    const DECODABLE_MIN: i16 = *Self::VERSIONS.start();
    /// The request body `kafka-protocol` decodes.
    type Request: Request + Send + fmt::Debug + 'static;

    /// Answers one request of a served version; `None` means no answer is sent (Produce with
    /// `acks=0`).
    fn handle<'a>(
        call: &'a Call<'a>,
        request: Self::Request,
        shutdown: &'a mut Shutdown,
    ) -> impl Future<Output = Option<Response<Self>>> + Send + 'a;

    /// The answer to a request of `version` outside the served ones, as the version to
    /// encode it at and the body, if that response can carry UNSUPPORTED_VERSION at its top
    /// level; `None` (the default) closes the connection instead, as Kafka does.
    fn unsupported(version: i16) -> Option<(i16, Response<Self>)> {
        let _ = version;
        None
    }
}

/// A future answering one request: the encoded response frame, `None` for no answer, `Err`
/// for a response this crate failed to encode (a bug; the connection is closed). Boxed: it is
/// as large as its API's handler, and inline it would make every idle connection that large.
pub(crate) type Answer<'a> =
    Pin<Box<dyn Future<Output = Result<Option<BytesMut>, String>> + Send + 'a>>;

/// A decoded request of some registered API, ready to be answered.
pub(crate) trait Decoded: Send + fmt::Debug {
    /// Runs the API's handler and encodes its response at the request's version.
    fn answer<'a>(
        self: Box<Self>,
        context: &'a Context,
        shutdown: &'a mut Shutdown,
        peer: SocketAddr,
        header: &'a RequestHeader,
        session: &'a Session,
    ) -> Answer<'a>;
}

struct Body<A: Api>(A::Request);

impl<A: Api> fmt::Debug for Body<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<A: Api> Decoded for Body<A> {
    fn answer<'a>(
        self: Box<Self>,
        context: &'a Context,
        shutdown: &'a mut Shutdown,
        peer: SocketAddr,
        header: &'a RequestHeader,
        session: &'a Session,
    ) -> Answer<'a> {
        Box::pin(async move {
            let version = header.request_api_version;
            let call = Call {
                context,
                version,
                client_id: header.client_id.as_deref().unwrap_or(""),
                peer,
                session,
            };
            match A::handle(&call, self.0, shutdown).await {
                Some(body) => {
                    encode_response(A::KEY, version, header.correlation_id, &body).map(Some)
                }
                None => Ok(None),
            }
        })
    }
}

/// Decodes a request body of a version into the API's request.
type DecodeFn = fn(&mut Bytes, i16) -> Result<Box<dyn Decoded>, String>;

/// One row of the registry: what the codec and ApiVersions need of an API, type-erased.
pub(crate) struct Entry {
    /// The API.
    pub(crate) key: ApiKey,
    /// The versions advertised and answered.
    pub(crate) versions: RangeInclusive<i16>,
    /// The lowest version decoded.
    pub(crate) decodable_min: i16,
    decode: DecodeFn,
    unsupported: fn(i16, i32) -> Option<Result<BytesMut, String>>,
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("key", &self.key)
            .field("versions", &self.versions)
            .field("decodable_min", &self.decodable_min)
            .finish_non_exhaustive()
    }
}

impl Entry {
    /// Whether `version` is decoded and answered.
    pub(crate) fn serves(&self, version: i16) -> bool {
        version >= self.decodable_min && version <= *self.versions.end()
    }

    /// Decodes a request body of `version`.
    pub(crate) fn decode(
        &self,
        body: &mut Bytes,
        version: i16,
    ) -> Result<Box<dyn Decoded>, String> {
        (self.decode)(body, version)
    }

    /// The UNSUPPORTED_VERSION frame for a request of `version`, if the API's response can
    /// carry it (see [`Api::unsupported`]); an encoding failure counts as "cannot".
    pub(crate) fn unsupported_version(
        &self,
        version: i16,
        correlation_id: i32,
    ) -> Option<BytesMut> {
        (self.unsupported)(version, correlation_id).and_then(Result::ok)
    }
}

fn decode<A: Api>(body: &mut Bytes, version: i16) -> Result<Box<dyn Decoded>, String> {
    use kafka_protocol::protocol::Decodable;
    let request = A::Request::decode(body, version).map_err(|e| format!("{e:#}"))?;
    Ok(Box::new(Body::<A>(request)))
}

fn unsupported<A: Api>(version: i16, correlation_id: i32) -> Option<Result<BytesMut, String>> {
    let (at, body) = A::unsupported(version)?;
    Some(encode_response(A::KEY, at, correlation_id, &body))
}

/// The registry row of `A`. Evaluated at compile time, so an API whose key is not its request
/// type's, or whose versions lie outside what `kafka-protocol` decodes and encodes, does not
/// build.
const fn entry<A: Api>() -> Entry {
    let request = <A::Request as Message>::VERSIONS;
    let response = <Response<A> as Message>::VERSIONS;
    let (min, max) = (A::DECODABLE_MIN, *A::VERSIONS.end());
    assert!(A::KEY as i16 == <A::Request as Request>::KEY);
    assert!(*A::VERSIONS.start() <= min && min <= max);
    assert!(request.min <= min && request.max >= max);
    assert!(response.min <= min && response.max >= max);
    Entry {
        key: A::KEY,
        versions: A::VERSIONS,
        decodable_min: min,
        decode: decode::<A>,
        unsupported: unsupported::<A>,
    }
}

/// Every API the broker serves, in ApiVersions order. The versions are docs/wire.md#api-versions' "safe
/// maximum for all" column intersected with what kafka-protocol 0.18 decodes; the group admin
/// APIs are advertised at the ranges Kafka 3.x brokers advertise, which every client handles.
static REGISTRY: [Entry; 50] = [
    entry::<super::produce::Produce>(),
    entry::<super::fetch::Fetch>(),
    entry::<super::list_offsets::ListOffsets>(),
    entry::<super::metadata::Metadata>(),
    entry::<super::offsets::OffsetCommit>(),
    entry::<super::offsets::OffsetFetch>(),
    entry::<super::find_coordinator::FindCoordinator>(),
    entry::<super::groups::JoinGroup>(),
    entry::<super::groups::Heartbeat>(),
    entry::<super::groups::LeaveGroup>(),
    entry::<super::groups::SyncGroup>(),
    entry::<super::groups::DescribeGroups>(),
    entry::<super::groups::ListGroups>(),
    entry::<super::sasl::SaslHandshake>(),
    entry::<super::api_versions::ApiVersions>(),
    entry::<super::topics::CreateTopics>(),
    entry::<super::topics::DeleteTopics>(),
    entry::<super::init_producer_id::InitProducerId>(),
    entry::<super::transactions::AddPartitionsToTxn>(),
    entry::<super::transactions::AddOffsetsToTxn>(),
    entry::<super::transactions::EndTxn>(),
    entry::<super::transactions::TxnOffsetCommit>(),
    entry::<super::write_txn_markers::WriteTxnMarkers>(),
    entry::<super::configs::DescribeConfigs>(),
    entry::<super::configs::AlterConfigs>(),
    entry::<super::sasl::SaslAuthenticate>(),
    entry::<super::topics::CreatePartitions>(),
    entry::<super::groups::DeleteGroups>(),
    entry::<super::configs::IncrementalAlterConfigs>(),
    entry::<super::offsets::OffsetDelete>(),
    entry::<super::describe_cluster::DescribeCluster>(),
    entry::<super::consumer_groups::ConsumerGroupHeartbeat>(),
    entry::<super::consumer_groups::ConsumerGroupDescribe>(),
    entry::<super::describe_producers::DescribeProducers>(),
    entry::<super::cluster_admin::DeleteRecords>(),
    entry::<super::cluster_admin::AlterReplicaLogDirs>(),
    entry::<super::cluster_admin::DescribeLogDirs>(),
    entry::<super::cluster_admin::ElectLeaders>(),
    entry::<super::cluster_admin::AlterPartitionReassignments>(),
    entry::<super::cluster_admin::ListPartitionReassignments>(),
    entry::<super::cluster_admin::DescribeQuorum>(),
    entry::<super::cluster_admin::ListConfigResources>(),
    entry::<super::cluster_admin::DescribeTopicPartitions>(),
    entry::<super::transactions::DescribeTransactions>(),
    entry::<super::transactions::ListTransactions>(),
    entry::<super::acls::DescribeAcls>(),
    entry::<super::acls::CreateAcls>(),
    entry::<super::acls::DeleteAcls>(),
    entry::<super::scram_credentials::DescribeUserScramCredentials>(),
    entry::<super::scram_credentials::AlterUserScramCredentials>(),
];

/// The registry's row for `key`, if the broker serves that API at all.
pub(crate) fn find(key: ApiKey) -> Option<&'static Entry> {
    REGISTRY.iter().find(|e| e.key == key)
}

/// The ApiVersions entries the broker advertises.
pub(crate) fn advertised_versions() -> Vec<api_versions_response::ApiVersion> {
    REGISTRY
        .iter()
        .map(|e| {
            api_versions_response::ApiVersion::default()
                .with_api_key(e.key as i16)
                .with_min_version(*e.versions.start())
                .with_max_version(*e.versions.end())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_api_has_one_entry_and_only_produce_decodes_above_its_minimum() {
        let mut keys: Vec<i16> = REGISTRY.iter().map(|e| e.key as i16).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), REGISTRY.len(), "one entry per API");
        for e in &REGISTRY {
            let expected = if e.key == ApiKey::Produce {
                3
            } else {
                *e.versions.start()
            };
            assert_eq!(e.decodable_min, expected, "{:?}", e.key);
        }
        let produce = find(ApiKey::Produce).map(|e| (e.versions.clone(), e.decodable_min));
        assert_eq!(produce, Some((0..=13, 3)));
        assert!(find(ApiKey::CreateDelegationToken).is_none());
    }

    #[test]
    fn api_versions_lists_the_registry() {
        let advertised = advertised_versions();
        assert_eq!(advertised.len(), REGISTRY.len());
        let heartbeat = advertised
            .iter()
            .find(|v| v.api_key == ApiKey::Heartbeat as i16)
            .map(|v| (v.min_version, v.max_version));
        assert_eq!(heartbeat, Some((0, 4)));
    }
}
