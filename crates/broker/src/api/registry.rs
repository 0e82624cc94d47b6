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

use super::{codes, Call};
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

/// A future answering one request: the encoded response frame (`None` for no answer) with
/// the response's top-level error code where it has one, `Err` for a response this crate
/// failed to encode (a bug; the connection is closed). Boxed: it is as large as its API's
/// handler, and inline it would make every idle connection that large.
pub(crate) type Answer<'a> = Pin<Box<dyn Future<Output = Result<Answered, String>> + Send + 'a>>;

/// What a handler answered.
#[derive(Debug)]
pub(crate) struct Answered {
    /// The response frame; `None` for no answer (Produce with `acks=0`).
    pub(crate) frame: Option<BytesMut>,
    /// The response's top-level error code, where the response has one at its version.
    pub(crate) error_code: Option<i16>,
    /// The code the metrics count the answer under (see [`crate::metrics::response_code`]).
    pub(crate) metric_code: Option<i16>,
}

/// A decoded request of some registered API, ready to be answered.
pub(crate) trait Decoded: Send + fmt::Debug {
    /// The decoded request, for what the record of requests reads of it (its group).
    fn request(&self) -> &dyn std::any::Any;

    /// The answer carrying Kafka error `code` instead of the handler's (a fault, see
    /// [`crate::faults`]): the API's response at the request's version, with the code per
    /// partition (or topic, or group) for the APIs that carry errors there, else at the top
    /// level ([`Entry::error_answer`]). `Err` if the response cannot carry an error at this
    /// version ([`Entry::carries_errors`] is checked before a fault is set).
    fn error_answer(
        &self,
        version: i16,
        correlation_id: i32,
        code: i16,
    ) -> Result<BytesMut, String>;

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
    fn request(&self) -> &dyn std::any::Any {
        &self.0
    }

    fn error_answer(
        &self,
        version: i16,
        correlation_id: i32,
        code: i16,
    ) -> Result<BytesMut, String> {
        crate::faults::per_partition_answer(A::KEY, &self.0, version, correlation_id, code)
            .or_else(|| top_level_error::<A>(version, correlation_id, code))
            .unwrap_or_else(|| {
                Err(format!(
                    "{:?} v{version} responses cannot carry an error code",
                    A::KEY
                ))
            })
    }

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
                Some(body) => Ok(Answered {
                    error_code: crate::faults::top_level_code(&body, version),
                    metric_code: crate::metrics::response_code(&body, version),
                    frame: Some(encode_response(
                        A::KEY,
                        version,
                        header.correlation_id,
                        &body,
                    )?),
                }),
                None => Ok(Answered {
                    frame: None,
                    error_code: None,
                    metric_code: None,
                }),
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
    /// The top-level error answer with any code, where the response has one (see
    /// [`top_level_error`]).
    error: fn(i16, i32, i16) -> Option<Result<BytesMut, String>>,
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

    /// Whether a response of every version served can carry an error code a fault injects:
    /// per partition (or topic, or group, or key) for Produce, Fetch, ListOffsets,
    /// OffsetCommit, OffsetFetch, Metadata and FindCoordinator, at the top level for
    /// ConsumerGroupHeartbeat, else at the top level, where the API's UNSUPPORTED_VERSION
    /// answer puts it (see [`top_level_error`]).
    pub(crate) fn carries_errors(&self) -> bool {
        PER_PARTITION_ERRORS.contains(&self.key)
            || (self.decodable_min..=*self.versions.end())
                .all(|v| matches!((self.error)(v, 0, codes::UNKNOWN_SERVER_ERROR), Some(Ok(_))))
    }
}

/// The APIs whose fault answers carry the error per partition (or per topic, or per group):
/// built from the request by [`crate::faults::per_partition_answer`].
/// FindCoordinator (per key from v4) and ConsumerGroupHeartbeat (no UNSUPPORTED_VERSION
/// answer to generalise) are built there too.
const PER_PARTITION_ERRORS: [ApiKey; 8] = [
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::Metadata,
    ApiKey::FindCoordinator,
    ApiKey::ConsumerGroupHeartbeat,
];

fn decode<A: Api>(body: &mut Bytes, version: i16) -> Result<Box<dyn Decoded>, String> {
    use kafka_protocol::protocol::Decodable;
    let request = A::Request::decode(body, version).map_err(|e| format!("{e:#}"))?;
    Ok(Box::new(Body::<A>(request)))
}

fn unsupported<A: Api>(version: i16, correlation_id: i32) -> Option<Result<BytesMut, String>> {
    let (at, body) = A::unsupported(version)?;
    Some(encode_response(A::KEY, at, correlation_id, &body))
}

/// The answer of API `A` at `version` carrying Kafka error `code` at its top level, for
/// every API whose UNSUPPORTED_VERSION answer ([`Api::unsupported`]) has one: that answer,
/// encoded at `version`, with its error code replaced by `code`. `None` when the API has no
/// such answer at `version`.
///
/// The error code's place is found in the encoded body itself: an UNSUPPORTED_VERSION body
/// is a default body but for its error code, and every field before the error code of
/// these responses is a default (zero or -1 numbers, empty or null strings and arrays, empty
/// tagged fields), whose bytes are all 0x00, 0x01 or 0xff; so the first 0x00 0x23 (35,
/// UNSUPPORTED_VERSION) after the response header is the error code. Fields after it (the
/// versions ApiVersions lists) are left as they are. The unit tests check every API at every
/// version served by decoding the result.
fn top_level_error<A: Api>(
    version: i16,
    correlation_id: i32,
    code: i16,
) -> Option<Result<BytesMut, String>> {
    let (_, body) = A::unsupported(version)?;
    let mut frame = match encode_response(A::KEY, version, correlation_id, &body) {
        Ok(frame) => frame,
        Err(e) => return Some(Err(e)),
    };
    // [length][correlation id][tagged fields, flexible headers only]
    let body_start = 8 + usize::from(A::KEY.response_header_version(version) >= 1);
    let unsupported = codes::UNSUPPORTED_VERSION.to_be_bytes();
    let at = frame
        .get(body_start..)?
        .windows(2)
        .position(|w| w == unsupported)?
        + body_start;
    frame[at..at + 2].copy_from_slice(&code.to_be_bytes());
    Some(Ok(frame))
}

/// Kafka 4.2's newest version of an API, `newest`, or the newest the codec decodes and
/// encodes for `R` (request and response) if it stops short: the workspace patches
/// `kafka-protocol` 0.18 (vendor/kafka-protocol/PATCHED.md) to Kafka 4.2's stable versions,
/// but a package built from crates.io gets the published crate, generated from Kafka 4.1,
/// and then advertises what that crate can serve (OffsetCommit 2–9, OffsetFetch 1–9,
/// ListOffsets 1–10).
pub(crate) const fn up_to_codec<R: Request>(newest: i16) -> i16
where
    R::Response: Message,
{
    let request = <R as Message>::VERSIONS.max;
    let response = <R::Response as Message>::VERSIONS.max;
    let codec = if request < response {
        request
    } else {
        response
    };
    if codec < newest {
        codec
    } else {
        newest
    }
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
        error: top_level_error::<A>,
    }
}

/// Every API the broker serves, in ApiVersions order. The versions are docs/wire.md#api-versions' "safe
/// maximum for all" column intersected with what kafka-protocol 0.18 decodes; the group admin
/// APIs are advertised at the ranges Kafka 3.x brokers advertise, which every client handles.
static REGISTRY: [Entry; 57] = [
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
    entry::<super::share_groups::ShareGroupHeartbeat>(),
    entry::<super::share_groups::ShareGroupDescribe>(),
    entry::<super::share_fetch::ShareFetch>(),
    entry::<super::share_fetch::ShareAcknowledge>(),
    entry::<super::share_offsets::DescribeShareGroupOffsets>(),
    entry::<super::share_offsets::AlterShareGroupOffsets>(),
    entry::<super::share_offsets::DeleteShareGroupOffsets>(),
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

    /// The generic top-level error answer puts the code in the error code field, at every
    /// version served, of every API it serves; the others are refused when a fault is set.
    #[test]
    fn the_top_level_error_answer_carries_any_code_at_every_version() {
        use kafka_protocol::messages::*;
        use kafka_protocol::protocol::Decodable;
        fn body<R: Decodable>(frame: &BytesMut, key: ApiKey, version: i16) -> R {
            let start = 8 + usize::from(key.response_header_version(version) >= 1);
            let mut bytes = Bytes::copy_from_slice(&frame[start..]);
            let decoded = R::decode(&mut bytes, version).expect("a well-formed body");
            assert!(bytes.is_empty(), "{key:?} v{version}: bytes left");
            decoded
        }
        let code = 27;
        let mut carried = Vec::new();
        for e in &REGISTRY {
            if e.carries_errors() {
                carried.push(e.key);
            }
            for v in e.decodable_min..=*e.versions.end() {
                let Some(frame) = (e.error)(v, 7, code) else {
                    continue;
                };
                let frame = frame.expect("encodes");
                assert_eq!(&frame[4..8], &7i32.to_be_bytes(), "the correlation id");
                let got = match e.key {
                    ApiKey::Heartbeat => body::<HeartbeatResponse>(&frame, e.key, v).error_code,
                    ApiKey::JoinGroup => body::<JoinGroupResponse>(&frame, e.key, v).error_code,
                    ApiKey::SyncGroup => body::<SyncGroupResponse>(&frame, e.key, v).error_code,
                    ApiKey::LeaveGroup => body::<LeaveGroupResponse>(&frame, e.key, v).error_code,
                    ApiKey::ListGroups => body::<ListGroupsResponse>(&frame, e.key, v).error_code,
                    ApiKey::ApiVersions => {
                        let r = body::<ApiVersionsResponse>(&frame, e.key, v);
                        assert_eq!(r.api_keys.len(), REGISTRY.len(), "the versions stay");
                        r.error_code
                    }
                    ApiKey::InitProducerId => {
                        body::<InitProducerIdResponse>(&frame, e.key, v).error_code
                    }
                    ApiKey::AddOffsetsToTxn => {
                        body::<AddOffsetsToTxnResponse>(&frame, e.key, v).error_code
                    }
                    ApiKey::EndTxn => body::<EndTxnResponse>(&frame, e.key, v).error_code,
                    ApiKey::ListTransactions => {
                        body::<ListTransactionsResponse>(&frame, e.key, v).error_code
                    }
                    ApiKey::OffsetFetch => body::<OffsetFetchResponse>(&frame, e.key, v).error_code,
                    ApiKey::Fetch => body::<FetchResponse>(&frame, e.key, v).error_code,
                    other => panic!("{other:?} v{v}: a top-level answer this test does not know"),
                };
                assert_eq!(got, code, "{:?} v{v}", e.key);
            }
        }
        for key in [
            ApiKey::Produce,
            ApiKey::Fetch,
            ApiKey::OffsetCommit,
            ApiKey::OffsetFetch,
            ApiKey::Heartbeat,
            ApiKey::JoinGroup,
            ApiKey::SyncGroup,
            ApiKey::ApiVersions,
        ] {
            assert!(carried.contains(&key), "{key:?}");
        }
        assert!(!carried.contains(&ApiKey::DescribeGroups));
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
