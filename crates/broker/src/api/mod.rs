//! Request handlers: each translates one Kafka request into calls on the log or the
//! coordinator, and their results into the response of the request's version. No handler
//! keeps state of its own.

pub(crate) mod codes;

mod api_versions;
pub(crate) mod consumer_protocol;
mod fetch;
mod find_coordinator;
mod groups;
mod init_producer_id;
mod list_offsets;
mod metadata;
mod offsets;
mod produce;
mod records;

use std::net::SocketAddr;

use bytes::BytesMut;
use kafka_protocol::messages::{ApiKey, RequestHeader};

use crate::codec::{encode_response, Request};
use crate::context::Context;
use crate::shutdown::Shutdown;

/// What a handler knows about the request besides its body.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    pub(crate) context: &'a Context,
    pub(crate) version: i16,
    pub(crate) client_id: &'a str,
    pub(crate) peer: SocketAddr,
}

/// Answers one request: `Ok(None)` for a request Kafka does not answer (Produce with
/// `acks=0`), `Err` for a response this crate failed to encode (a bug; the connection is
/// closed).
pub(crate) async fn handle(
    context: &Context,
    shutdown: &mut Shutdown,
    peer: SocketAddr,
    header: &RequestHeader,
    request: Request,
) -> Result<Option<BytesMut>, String> {
    let version = header.request_api_version;
    let correlation = header.correlation_id;
    let call = Call {
        context,
        version,
        client_id: header.client_id.as_deref().unwrap_or(""),
        peer,
    };
    macro_rules! answer {
        ($key:expr, $body:expr) => {
            encode_response($key, version, correlation, &$body).map(Some)
        };
    }
    match request {
        Request::ApiVersions(r) => answer!(ApiKey::ApiVersions, api_versions::handle(&call, &r)),
        Request::Metadata(r) => answer!(ApiKey::Metadata, metadata::handle(&call, r)),
        Request::FindCoordinator(r) => {
            answer!(ApiKey::FindCoordinator, find_coordinator::handle(&call, &r))
        }
        Request::InitProducerId(r) => {
            answer!(ApiKey::InitProducerId, init_producer_id::handle(&call, &r))
        }
        Request::Produce(r) => match produce::handle(&call, r) {
            Some(body) => answer!(ApiKey::Produce, body),
            None => Ok(None),
        },
        Request::Fetch(r) => answer!(ApiKey::Fetch, fetch::handle(&call, r, shutdown).await),
        Request::ListOffsets(r) => answer!(ApiKey::ListOffsets, list_offsets::handle(&call, r)),
        Request::OffsetCommit(r) => {
            answer!(ApiKey::OffsetCommit, offsets::commit(&call, r).await)
        }
        Request::OffsetFetch(r) => answer!(ApiKey::OffsetFetch, offsets::fetch(&call, r).await),
        Request::OffsetDelete(r) => {
            answer!(ApiKey::OffsetDelete, offsets::delete(&call, r).await)
        }
        Request::JoinGroup(r) => {
            answer!(ApiKey::JoinGroup, groups::join(&call, r, shutdown).await)
        }
        Request::SyncGroup(r) => {
            answer!(ApiKey::SyncGroup, groups::sync(&call, r, shutdown).await)
        }
        Request::Heartbeat(r) => answer!(ApiKey::Heartbeat, groups::heartbeat(&call, r).await),
        Request::LeaveGroup(r) => answer!(ApiKey::LeaveGroup, groups::leave(&call, r).await),
        Request::DescribeGroups(r) => {
            answer!(ApiKey::DescribeGroups, groups::describe(&call, r).await)
        }
        Request::ListGroups(r) => answer!(ApiKey::ListGroups, groups::list(&call, r).await),
        Request::DeleteGroups(r) => {
            answer!(ApiKey::DeleteGroups, groups::delete(&call, r).await)
        }
    }
}
