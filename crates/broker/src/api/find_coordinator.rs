//! FindCoordinator: the broker that coordinates a group or a transactional id — this one,
//! alone, or with several brokers over PostgreSQL the live owner of the key's coordinator
//! slot (see [`crate::ownership`]), as reached through the listener the request came in on.
//! No share coordinator runs (KIP-932's share-group state).
//!
//! Versions 0-3 ask for one `key` and answer in the top-level fields; from v4 (KIP-699) a
//! request batches `coordinator_keys` and each key gets its own entry in `coordinators`. The
//! schema allows no other shape: v0-3 have no `coordinator_keys` and v4+ no `key`, so neither
//! a batch below v4 nor a lone `key` from v4 reaches a broker (Kafka's client-side
//! `FindCoordinatorRequest.Builder` moves a single key between the two fields and refuses a
//! batch below v4). Kafka's `KafkaApis.handleFindCoordinatorRequest` picks the form from the
//! version alone, as [`handle`] does. v5 (KIP-890) and v6 (KIP-932) change no field.
//!
//! Each key is checked as Kafka's `KafkaApis.getCoordinator` checks it, except where noted
//! on [`check`].

use crate::acl::Operation;
use std::ops::RangeInclusive;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::registry::Api;
use super::{codes, Call};
use crate::ownership::Serving;
use crate::shutdown::Shutdown;

/// `key_type` 0 asks for a group coordinator (the only type v0 can ask for).
const GROUP: i8 = 0;
/// `key_type` 1 asks for a transaction coordinator (from v1).
const TRANSACTION: i8 = 1;
/// `key_type` 2 asks for a share coordinator, keyed `groupId:topicId:partition` (KIP-932).
const SHARE: i8 = 2;

/// The first version that batches keys (Kafka's `FindCoordinatorRequest.MIN_BATCHED_VERSION`).
const BATCHED: i16 = 4;
/// The first version that may ask for a share coordinator.
const SHARE_VERSION: i16 = 6;

/// Why one key gets no coordinator.
struct Refusal {
    code: i16,
    message: String,
    /// Whether a v4+ entry carries `message` too. Kafka's batched answer leaves a key's
    /// message null when `getCoordinator` returns the error, and fills in the error's
    /// message when the whole request failed (`FindCoordinatorRequest.getErrorResponse`);
    /// v0-3 always carry one.
    batched_message: bool,
}

impl Refusal {
    fn new(code: i16, message: impl Into<String>, batched_message: bool) -> Self {
        Refusal {
            code,
            message: message.into(),
            batched_message,
        }
    }
}

/// Whether `key` of `key_type` is coordinated here, at request `version`.
///
/// - A group (0): DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED (Kafka).
/// - A transactional id (1): Kafka checks DESCRIBE on the TRANSACTIONAL_ID resource
///   (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); this broker does not enforce TRANSACTIONAL_ID
///   ACLs (see the README's Security section), so none is checked. An empty id is
///   INVALID_REQUEST here: Kafka's FindCoordinator would name the coordinator of the empty
///   id's partition, and its transaction coordinator then refuses the empty id with
///   INVALID_REQUEST (`TransactionCoordinator`); this broker says so at once.
/// - A share key (2): below v6 INVALID_REQUEST (Kafka); at v6 Kafka first requires
///   CLUSTER_ACTION on the cluster (a refusal fails the whole request: every key gets
///   CLUSTER_AUTHORIZATION_FAILED with its message), then answers INVALID_REQUEST when no
///   share coordinator runs, as when share groups are disabled. None runs here.
/// - Any other type: Kafka's `CoordinatorType.forId` throws InvalidRequestException, which
///   fails the whole request: INVALID_REQUEST for every key, with a message.
fn check(call: &Call<'_>, key_type: i8, key: &str) -> Result<(), Refusal> {
    match key_type {
        GROUP if !call.may_group(Operation::Describe, key) => Err(Refusal::new(
            codes::GROUP_AUTHORIZATION_FAILED,
            "Group authorization failed.",
            false,
        )),
        GROUP => Ok(()),
        TRANSACTION if key.is_empty() => Err(Refusal::new(
            codes::INVALID_REQUEST,
            "the transactional id must not be empty",
            true,
        )),
        TRANSACTION => Ok(()),
        SHARE if call.version < SHARE_VERSION => Err(Refusal::new(
            codes::INVALID_REQUEST,
            format!("share coordinators are found from version {SHARE_VERSION}"),
            false,
        )),
        SHARE if !call.may_cluster(Operation::ClusterAction) => Err(Refusal::new(
            codes::CLUSTER_AUTHORIZATION_FAILED,
            "Cluster authorization failed.",
            true,
        )),
        SHARE => Err(Refusal::new(
            codes::INVALID_REQUEST,
            "this broker runs no share coordinator (share groups are not served)",
            false,
        )),
        other => Err(Refusal::new(
            codes::INVALID_REQUEST,
            format!("unknown coordinator key type {other}"),
            true,
        )),
    }
}

/// The coordinator of a key that passed [`check`]: this broker, or the live broker owning the
/// key's slot. While no live broker owns it (its owner died and none has taken it yet), or
/// its owner has no listener of this connection's security protocol, COORDINATOR_NOT_AVAILABLE
/// (Kafka's answer when the key's partition has no leader reachable on the listener), with no
/// message in a batch (Kafka's `getCoordinator` gives none).
fn locate(call: &Call<'_>, key_type: i8, key: &str) -> Result<(BrokerId, StrBytes, i32), Refusal> {
    let ownership = &call.context.ownership;
    let serving = if key_type == TRANSACTION {
        ownership.transaction(key)
    } else {
        ownership.group(key)
    };
    let unavailable = |why: &str| {
        Refusal::new(
            codes::COORDINATOR_NOT_AVAILABLE,
            format!("the coordinator of `{key}` is not available: {why}"),
            false,
        )
    };
    match serving {
        Serving::Here | Serving::Loading => {
            let endpoint = call.endpoint();
            Ok((
                BrokerId(ownership.node_id()),
                StrBytes::from_string(endpoint.host.clone()),
                endpoint.port,
            ))
        }
        Serving::Elsewhere(node) => match ownership.other(node, call.endpoint().protocol) {
            Some(n) => Ok((BrokerId(n.node_id), StrBytes::from_string(n.host), n.port)),
            None => Err(unavailable(&format!(
                "its broker (node {node}) has no {} listener",
                call.endpoint().protocol.name()
            ))),
        },
        Serving::Nobody => Err(unavailable(
            "its broker stopped and no live broker has taken its slot over yet",
        )),
    }
}

/// The answer at the request's version: top-level fields below v4, one entry per key from v4
/// (an empty batch gets an empty list, as in Kafka).
fn handle(call: &Call<'_>, request: &FindCoordinatorRequest) -> FindCoordinatorResponse {
    // Kafka's `Node.noNode()`.
    let nowhere = || (BrokerId(-1), StrBytes::default(), -1);
    if call.version < BATCHED {
        let found = check(call, request.key_type, &request.key)
            .and_then(|()| locate(call, request.key_type, &request.key));
        let (node, error_code, error_message) = match found {
            Ok(node) => (node, codes::NONE, None),
            Err(refusal) => (
                nowhere(),
                refusal.code,
                Some(StrBytes::from_string(refusal.message)),
            ),
        };
        let (node_id, host, port) = node;
        return FindCoordinatorResponse::default()
            .with_error_code(error_code)
            .with_error_message(error_message)
            .with_node_id(node_id)
            .with_host(host)
            .with_port(port);
    }
    let coordinators = request
        .coordinator_keys
        .iter()
        .map(|key| {
            let found = check(call, request.key_type, key)
                .and_then(|()| locate(call, request.key_type, key));
            let (node, error_code, error_message) = match found {
                Ok(node) => (node, codes::NONE, None),
                Err(refusal) => (
                    nowhere(),
                    refusal.code,
                    refusal
                        .batched_message
                        .then(|| StrBytes::from_string(refusal.message)),
                ),
            };
            let (node_id, host, port) = node;
            Coordinator::default()
                .with_key(key.clone())
                .with_node_id(node_id)
                .with_host(host)
                .with_port(port)
                .with_error_code(error_code)
                .with_error_message(error_message)
        })
        .collect();
    FindCoordinatorResponse::default().with_coordinators(coordinators)
}

pub(crate) struct FindCoordinator;

impl Api for FindCoordinator {
    const KEY: ApiKey = ApiKey::FindCoordinator;
    /// Kafka 4's range: v0-3 one key, v4+ batched (KIP-699), v6 share keys (KIP-932).
    const VERSIONS: RangeInclusive<i16> = 0..=6;
    type Request = FindCoordinatorRequest;

    async fn handle(
        call: &Call<'_>,
        request: FindCoordinatorRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<FindCoordinatorResponse> {
        Some(handle(call, &request))
    }

    // No `unsupported` answer (the default): every version the response has (0-6) is
    // served, and a version outside them has no response body to carry UNSUPPORTED_VERSION
    // (v4+ would not carry it at the top level anyway), so the connection is closed, as
    // Kafka closes it.
}
