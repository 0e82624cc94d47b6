//! The edge: how a request frame becomes a typed request of a registered API (see
//! [`crate::api::registry`]), and how a response becomes a frame. Everything
//! `kafka-protocol` stays here and in the `api` handlers; the core never sees it.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{decode_request_header_from_buffer, Encodable};

use crate::api::registry::{self, Decoded, Entry};

/// What one request frame turned out to be.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A request the broker serves, decoded.
    Request {
        /// The request header.
        header: RequestHeader,
        /// The API.
        key: ApiKey,
        /// The decoded body, which knows its handler (boxed: bodies differ a lot in size).
        request: Box<dyn Decoded>,
    },
    /// A known API at a version the broker does not serve: answered with UNSUPPORTED_VERSION
    /// where the response can say so (see [`Entry::unsupported_version`]).
    UnsupportedVersion {
        /// The request header.
        header: RequestHeader,
        /// The API's registry entry.
        entry: &'static Entry,
    },
    /// Anything else: the connection is closed, with this reason in the log.
    Reject {
        /// Why.
        reason: String,
    },
}

/// Parses one request frame (without its length prefix). Never panics, whatever the bytes.
pub(crate) fn parse_request(mut frame: Bytes) -> Incoming {
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
    let Some(entry) = registry::find(key) else {
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
    if !entry.serves(version) {
        return Incoming::UnsupportedVersion { header, entry };
    }
    match entry.decode(&mut frame, version) {
        Ok(request) => {
            if frame.has_remaining() {
                // Kafka parses the body and ignores what follows it; librdkafka 2.16's
                // Metadata v12 for every topic carries three bytes past the body (it writes
                // IncludeClusterAuthorizedOperations, gone since v11, and a tagged field), so
                // refusing them would break `list_topics()`.
                tracing::debug!(api = ?key, version, trailing = frame.remaining(), "bytes after the request body ignored");
            }
            Incoming::Request {
                header,
                key,
                request,
            }
        }
        Err(e) => Incoming::Reject {
            reason: format!("{key:?} v{version}: malformed request body: {e}"),
        },
    }
}

/// Encodes `[length][response header][body]` for `key` at `version`.
///
/// An error means the handler built a body the version cannot carry: a bug of this crate,
/// reported to the caller (which logs it and closes the connection) rather than a panic.
pub(crate) fn encode_response<R: Encodable>(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_unknown_and_truncated_frames_are_rejected() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![0, 18, 0], "shorter than a header"),
            (vec![0x7f, 0, 0, 0, 0, 0, 0, 1], "unknown API key"),
            // ApiKey 38 (CreateDelegationToken) exists but is not served.
            (vec![0, 38, 0, 1, 0, 0, 0, 1, 0, 0], "not served"),
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
        // ApiVersions v5 (flexible header v2): a version after the newest, answered in a v0
        // body (EndTxn v5, the example before, is served since transaction version 2).
        let frame = vec![0, 18, 0, 5, 0, 0, 0, 9, 0, 2, b'a', b'b', 0];
        match parse_request(Bytes::from(frame)) {
            Incoming::UnsupportedVersion { header, entry } => {
                assert_eq!((entry.key, header.correlation_id), (ApiKey::ApiVersions, 9));
                let resp = entry
                    .unsupported_version(5, 9)
                    .expect("ApiVersions can say so");
                // length | corr 9 | the v0 body (ApiVersions' response header has no tags)
                assert_eq!(&resp[4..8], &[0, 0, 0, 9]);
                let mut body = Bytes::copy_from_slice(&resp[8..]);
                let decoded =
                    <kafka_protocol::messages::ApiVersionsResponse as kafka_protocol::protocol::Decodable>::decode(&mut body, 0)
                        .expect("a v0 body");
                assert_eq!(decoded.error_code, 35, "UNSUPPORTED_VERSION");
                assert!(body.is_empty());
            }
            other => panic!("{other:?}"),
        }
        let metadata = registry::find(ApiKey::Metadata).expect("served");
        assert!(metadata.unsupported_version(9, 1).is_none());
    }
}
