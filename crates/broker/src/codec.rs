//! The edge: which API versions the broker speaks, how a request frame becomes a typed
//! request, and how a response becomes a frame. Everything `kafka-protocol` stays here and in
//! the `api` handlers; the core never sees it.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable, Encodable};

/// One API the broker answers: the versions it advertises, and the lowest it can decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiRange {
    /// The API.
    pub key: ApiKey,
    /// The lowest version advertised in ApiVersions.
    pub advertised_min: i16,
    /// The lowest version the codec decodes (above `advertised_min` only for Produce).
    pub decodable_min: i16,
    /// The highest version advertised and answered.
    pub max: i16,
}

const fn api(key: ApiKey, min: i16, max: i16) -> ApiRange {
    ApiRange {
        key,
        advertised_min: min,
        decodable_min: min,
        max,
    }
}

/// The versions the broker advertises: docs/wire.md#api-versions, "safe maximum for all", intersected
/// with what kafka-protocol 0.18 decodes (its request structs start at Produce 3, Fetch 4,
/// ListOffsets 1, OffsetCommit 2, OffsetFetch 1). The group admin APIs are advertised at the
/// ranges Kafka 3.x brokers advertise, which every client here handles.
///
/// Produce is advertised from 0 although v0-2 cannot be decoded: librdkafka derives its
/// compression features from the advertised Produce range and silently stops compressing
/// when the minimum is 3 (Kafka 4 does the same, KAFKA-18659). A v0-2 Produce closes the
/// connection, as an undecodable request does.
pub const SUPPORTED: &[ApiRange] = &[
    ApiRange {
        key: ApiKey::Produce,
        advertised_min: 0,
        decodable_min: 3,
        max: 7,
    },
    api(ApiKey::Fetch, 4, 11),
    api(ApiKey::ListOffsets, 1, 3),
    api(ApiKey::Metadata, 0, 5),
    api(ApiKey::OffsetCommit, 2, 3),
    api(ApiKey::OffsetFetch, 1, 3),
    api(ApiKey::FindCoordinator, 0, 1),
    api(ApiKey::JoinGroup, 0, 5),
    api(ApiKey::Heartbeat, 0, 1),
    api(ApiKey::LeaveGroup, 0, 1),
    api(ApiKey::SyncGroup, 0, 3),
    api(ApiKey::DescribeGroups, 0, 5),
    api(ApiKey::ListGroups, 0, 4),
    api(ApiKey::ApiVersions, 0, 3),
    api(ApiKey::InitProducerId, 0, 1),
    api(ApiKey::DeleteGroups, 0, 2),
    api(ApiKey::OffsetDelete, 0, 0),
];

/// The broker's range for `key`, if it answers that API at all.
pub fn range(key: ApiKey) -> Option<&'static ApiRange> {
    SUPPORTED.iter().find(|r| r.key == key)
}

/// A decoded request body.
#[derive(Debug)]
#[allow(missing_docs)]
pub enum Request {
    Produce(ProduceRequest),
    Fetch(FetchRequest),
    ListOffsets(ListOffsetsRequest),
    Metadata(MetadataRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    FindCoordinator(FindCoordinatorRequest),
    JoinGroup(JoinGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    SyncGroup(SyncGroupRequest),
    DescribeGroups(DescribeGroupsRequest),
    ListGroups(ListGroupsRequest),
    ApiVersions(ApiVersionsRequest),
    InitProducerId(InitProducerIdRequest),
    DeleteGroups(DeleteGroupsRequest),
    OffsetDelete(OffsetDeleteRequest),
}

fn decode_body(key: ApiKey, body: &mut Bytes, v: i16) -> Result<Request, String> {
    fn d<T: Decodable>(body: &mut Bytes, v: i16) -> Result<T, String> {
        T::decode(body, v).map_err(|e| format!("{e:#}"))
    }
    Ok(match key {
        ApiKey::Produce => Request::Produce(d(body, v)?),
        ApiKey::Fetch => Request::Fetch(d(body, v)?),
        ApiKey::ListOffsets => Request::ListOffsets(d(body, v)?),
        ApiKey::Metadata => Request::Metadata(d(body, v)?),
        ApiKey::OffsetCommit => Request::OffsetCommit(d(body, v)?),
        ApiKey::OffsetFetch => Request::OffsetFetch(d(body, v)?),
        ApiKey::FindCoordinator => Request::FindCoordinator(d(body, v)?),
        ApiKey::JoinGroup => Request::JoinGroup(d(body, v)?),
        ApiKey::Heartbeat => Request::Heartbeat(d(body, v)?),
        ApiKey::LeaveGroup => Request::LeaveGroup(d(body, v)?),
        ApiKey::SyncGroup => Request::SyncGroup(d(body, v)?),
        ApiKey::DescribeGroups => Request::DescribeGroups(d(body, v)?),
        ApiKey::ListGroups => Request::ListGroups(d(body, v)?),
        ApiKey::ApiVersions => Request::ApiVersions(d(body, v)?),
        ApiKey::InitProducerId => Request::InitProducerId(d(body, v)?),
        ApiKey::DeleteGroups => Request::DeleteGroups(d(body, v)?),
        ApiKey::OffsetDelete => Request::OffsetDelete(d(body, v)?),
        other => return Err(format!("{other:?} is not served by this broker")),
    })
}

/// What one request frame turned out to be.
#[derive(Debug)]
pub enum Incoming {
    /// A request the broker serves, decoded.
    Request {
        /// The request header.
        header: RequestHeader,
        /// The API.
        key: ApiKey,
        /// The decoded body (boxed: bodies differ a lot in size).
        request: Box<Request>,
    },
    /// A known API at a version the broker does not serve: answered with UNSUPPORTED_VERSION
    /// where the response can say so (see [`unsupported_version_response`]).
    UnsupportedVersion {
        /// The request header.
        header: RequestHeader,
        /// The API.
        key: ApiKey,
    },
    /// Anything else: the connection is closed, with this reason in the log.
    Reject {
        /// Why.
        reason: String,
    },
}

/// Parses one request frame (without its length prefix). Never panics, whatever the bytes.
pub fn parse_request(mut frame: Bytes) -> Incoming {
    if frame.len() < 8 {
        return Incoming::Reject {
            reason: format!(
                "a request of {} bytes is shorter than a header",
                frame.len()
            ),
        };
    }
    let key_raw = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let Ok(key) = ApiKey::try_from(key_raw) else {
        return Incoming::Reject {
            reason: format!("unknown API key {key_raw}"),
        };
    };
    let Some(range) = range(key) else {
        return Incoming::Reject {
            reason: format!("API {key:?} (key {key_raw}) is not served by this broker"),
        };
    };
    // The header version depends on the request version; an unsupported version may still
    // have a decodable header (the crate knows every version Kafka 4.1 defines).
    let header = match decode_request_header_from_buffer(&mut frame) {
        Ok(h) => h,
        Err(e) => {
            return Incoming::Reject {
                reason: format!("{key:?} v{version}: malformed request header: {e:#}"),
            }
        }
    };
    if version < range.decodable_min || version > range.max {
        return Incoming::UnsupportedVersion { header, key };
    }
    match decode_body(key, &mut frame, version) {
        Ok(_) if frame.has_remaining() => Incoming::Reject {
            reason: format!(
                "{key:?} v{version}: {} trailing bytes after the request body",
                frame.remaining()
            ),
        },
        Ok(request) => Incoming::Request {
            header,
            key,
            request: Box::new(request),
        },
        Err(e) => Incoming::Reject {
            reason: format!("{key:?} v{version}: malformed request body: {e}"),
        },
    }
}

/// Encodes `[length][response header][body]` for `key` at `version`.
///
/// An error means the handler built a body the version cannot carry: a bug of this crate,
/// reported to the caller (which logs it and closes the connection) rather than a panic.
pub fn encode_response<R: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> Result<BytesMut, String> {
    let header_version = key.response_header_version(version);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i32(0);
    header
        .encode(&mut buf, header_version)
        .and_then(|()| body.encode(&mut buf, version))
        .map_err(|e| format!("cannot encode the {key:?} v{version} response: {e:#}"))?;
    let size = i32::try_from(buf.len() - 4)
        .map_err(|_| format!("the {key:?} v{version} response exceeds 2 GiB"))?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf)
}

/// The ApiVersions entries the broker advertises.
pub fn advertised_versions() -> Vec<api_versions_response::ApiVersion> {
    SUPPORTED
        .iter()
        .map(|r| {
            api_versions_response::ApiVersion::default()
                .with_api_key(r.key as i16)
                .with_min_version(r.advertised_min)
                .with_max_version(r.max)
        })
        .collect()
}

/// The answer to a known API at a version the broker does not serve, if the response of that
/// version can carry UNSUPPORTED_VERSION at its top level; `None` means the connection is
/// closed instead (as Kafka does for every API but ApiVersions).
///
/// ApiVersions gets a v0 body listing the supported versions, so the client can pick one
/// (Kafka's rule: the client retries with the highest version both sides know).
pub fn unsupported_version_response(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
) -> Option<BytesMut> {
    const UNSUPPORTED: i16 = crate::api::codes::UNSUPPORTED_VERSION;
    let frame = match key {
        ApiKey::ApiVersions => encode_response(
            key,
            0,
            correlation_id,
            &ApiVersionsResponse::default()
                .with_error_code(UNSUPPORTED)
                .with_api_keys(advertised_versions()),
        ),
        ApiKey::Heartbeat => encode_response(
            key,
            version,
            correlation_id,
            &HeartbeatResponse::default().with_error_code(UNSUPPORTED),
        ),
        ApiKey::JoinGroup => encode_response(
            key,
            version,
            correlation_id,
            &JoinGroupResponse::default()
                .with_error_code(UNSUPPORTED)
                .with_protocol_name((version < 7).then(Default::default)),
        ),
        ApiKey::SyncGroup => encode_response(
            key,
            version,
            correlation_id,
            &SyncGroupResponse::default().with_error_code(UNSUPPORTED),
        ),
        ApiKey::LeaveGroup => encode_response(
            key,
            version,
            correlation_id,
            &LeaveGroupResponse::default().with_error_code(UNSUPPORTED),
        ),
        ApiKey::ListGroups => encode_response(
            key,
            version,
            correlation_id,
            &ListGroupsResponse::default().with_error_code(UNSUPPORTED),
        ),
        ApiKey::InitProducerId => encode_response(
            key,
            version,
            correlation_id,
            &InitProducerIdResponse::default().with_error_code(UNSUPPORTED),
        ),
        ApiKey::FindCoordinator if version <= 3 => encode_response(
            key,
            version,
            correlation_id,
            &FindCoordinatorResponse::default()
                .with_error_code(UNSUPPORTED)
                .with_error_message(None),
        ),
        ApiKey::Fetch if version >= 7 => encode_response(
            key,
            version,
            correlation_id,
            &FetchResponse::default().with_error_code(UNSUPPORTED),
        ),
        ApiKey::OffsetFetch if (2..8).contains(&version) => encode_response(
            key,
            version,
            correlation_id,
            &OffsetFetchResponse::default().with_error_code(UNSUPPORTED),
        ),
        _ => return None,
    };
    frame.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::Message;

    /// Every advertised version can be decoded (requests) and encoded (responses) by the
    /// crate, except Produce v0-2, which is advertised on purpose and refused.
    #[test]
    fn every_served_version_is_inside_the_codec() {
        fn check<Req: Message, Resp: Message>(r: &ApiRange) {
            assert!(Req::VERSIONS.min <= r.decodable_min, "{:?}", r.key);
            assert!(Req::VERSIONS.max >= r.max, "{:?}", r.key);
            assert!(Resp::VERSIONS.min <= r.decodable_min, "{:?}", r.key);
            assert!(Resp::VERSIONS.max >= r.max, "{:?}", r.key);
        }
        for r in SUPPORTED {
            match r.key {
                ApiKey::Produce => check::<ProduceRequest, ProduceResponse>(r),
                ApiKey::Fetch => check::<FetchRequest, FetchResponse>(r),
                ApiKey::ListOffsets => check::<ListOffsetsRequest, ListOffsetsResponse>(r),
                ApiKey::Metadata => check::<MetadataRequest, MetadataResponse>(r),
                ApiKey::OffsetCommit => check::<OffsetCommitRequest, OffsetCommitResponse>(r),
                ApiKey::OffsetFetch => check::<OffsetFetchRequest, OffsetFetchResponse>(r),
                ApiKey::FindCoordinator => {
                    check::<FindCoordinatorRequest, FindCoordinatorResponse>(r)
                }
                ApiKey::JoinGroup => check::<JoinGroupRequest, JoinGroupResponse>(r),
                ApiKey::Heartbeat => check::<HeartbeatRequest, HeartbeatResponse>(r),
                ApiKey::LeaveGroup => check::<LeaveGroupRequest, LeaveGroupResponse>(r),
                ApiKey::SyncGroup => check::<SyncGroupRequest, SyncGroupResponse>(r),
                ApiKey::DescribeGroups => check::<DescribeGroupsRequest, DescribeGroupsResponse>(r),
                ApiKey::ListGroups => check::<ListGroupsRequest, ListGroupsResponse>(r),
                ApiKey::ApiVersions => check::<ApiVersionsRequest, ApiVersionsResponse>(r),
                ApiKey::InitProducerId => check::<InitProducerIdRequest, InitProducerIdResponse>(r),
                ApiKey::DeleteGroups => check::<DeleteGroupsRequest, DeleteGroupsResponse>(r),
                ApiKey::OffsetDelete => check::<OffsetDeleteRequest, OffsetDeleteResponse>(r),
                other => panic!("{other:?} is advertised but has no check"),
            }
            assert!(r.advertised_min <= r.decodable_min && r.decodable_min <= r.max);
        }
        let produce = range(ApiKey::Produce).map(|r| (r.advertised_min, r.decodable_min));
        assert_eq!(produce, Some((0, 3)));
    }

    #[test]
    fn short_unknown_and_truncated_frames_are_rejected() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![0, 18, 0], "shorter than a header"),
            (vec![0x7f, 0, 0, 0, 0, 0, 0, 1], "unknown API key"),
            // ApiKey 17 (SaslHandshake) exists but is not served.
            (vec![0, 17, 0, 1, 0, 0, 0, 1, 0, 0], "not served"),
            // Heartbeat v0, client id length 5 but 1 byte follows.
            (
                vec![0, 12, 0, 0, 0, 0, 0, 1, 0, 5, b'a'],
                "malformed request header",
            ),
            // Heartbeat v0 with a header and no body.
            (
                vec![0, 12, 0, 0, 0, 0, 0, 1, 0xff, 0xff],
                "malformed request body",
            ),
        ];
        for (bytes, expect) in cases {
            match parse_request(Bytes::from(bytes.clone())) {
                Incoming::Reject { reason } => assert!(reason.contains(expect), "{reason}"),
                other => panic!("{bytes:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_known_api_at_an_unserved_version_is_unsupported_not_rejected() {
        // Heartbeat v4 (flexible header v2): served by the codec, not advertised here.
        let frame = vec![0, 12, 0, 4, 0, 0, 0, 9, 0, 2, b'a', b'b', 0];
        match parse_request(Bytes::from(frame)) {
            Incoming::UnsupportedVersion { header, key } => {
                assert_eq!((key, header.correlation_id), (ApiKey::Heartbeat, 9));
                let resp = unsupported_version_response(key, 4, 9).expect("heartbeat can say so");
                // length 12 | corr 9 | tag byte | throttle 0 | error 35 | tag byte
                assert_eq!(
                    &resp[..],
                    &[0, 0, 0, 12, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 35, 0]
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(unsupported_version_response(ApiKey::Metadata, 9, 1).is_none());
    }
}
