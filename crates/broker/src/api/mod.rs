//! Request handlers: each translates one Kafka request into calls on the log or the
//! coordinator, and their results into the response of the request's version. No handler
//! keeps state of its own. Each API is an [`Api`](registry::Api) implementation next to its
//! handler, listed once in the [`registry`].

pub(crate) mod codes;

mod acls;
mod api_versions;
mod cluster_admin;
mod configs;
mod consumer_groups;
pub(crate) mod consumer_protocol;
mod describe_cluster;
mod describe_producers;
mod fetch;
pub(crate) mod fetch_session;
mod find_coordinator;
pub(crate) mod group_configs;
pub(crate) mod groups;
pub(crate) mod inflate;
mod init_producer_id;
mod list_offsets;
mod metadata;
mod offsets;
mod produce;
pub(crate) mod records;
pub(crate) mod registry;
mod sasl;
mod scram_credentials;
mod share_fetch;
mod share_groups;
pub(crate) use share_fetch::close_connection as close_share_sessions;
mod share_offsets;
pub(crate) mod topic_configs;
mod topics;
mod transactions;
mod write_txn_markers;

use std::net::SocketAddr;

use crate::auth::Session;
use crate::context::Context;

/// What a handler knows about the request besides its body.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    pub(crate) context: &'a Context,
    pub(crate) version: i16,
    pub(crate) client_id: &'a str,
    pub(crate) peer: SocketAddr,
    /// The connection's authentication (SaslHandshake and SaslAuthenticate change it).
    pub(crate) session: &'a Session,
}

impl Call<'_> {
    /// The listener this request came in on, with the address its clients are told.
    pub(crate) fn endpoint(&self) -> &crate::context::Endpoint {
        self.session.endpoint()
    }

    /// Whether this connection's principal may do `operation` on the resource `(kind,
    /// name)`: always without `--authorizer`, else as the ACLs say (see [`crate::acl`]).
    pub(crate) fn authorize(
        &self,
        operation: crate::acl::Operation,
        kind: crate::acl::ResourceType,
        name: &str,
    ) -> bool {
        let Some(authorizer) = self.context.authorizer.as_deref() else {
            return true;
        };
        let principal = self.session.principal().unwrap_or_default();
        let allowed = authorizer.authorize(&principal, self.peer.ip(), operation, kind, name);
        if !allowed {
            // Kafka's authorizer logs denials at INFO ("Principal = … is Denied operation")
            tracing::info!(principal, host = %self.peer.ip(), ?operation, resource = ?kind, name, "denied by the ACLs");
        }
        allowed
    }

    /// The error a request about group `group_id` gets from this broker when it is not the
    /// group's coordinator (several brokers over PostgreSQL): NOT_COORDINATOR, or
    /// COORDINATOR_LOAD_IN_PROGRESS while this broker loads the group's slot. `None`: served
    /// here (always, for a broker alone).
    pub(crate) fn group_coordinator_error(&self, group_id: &str) -> Option<i16> {
        self.context.ownership.group(group_id).coordinator_error()
    }

    /// As [`group_coordinator_error`](Self::group_coordinator_error), for transactional id
    /// `id`'s coordinator.
    pub(crate) fn txn_coordinator_error(&self, id: &str) -> Option<i16> {
        self.context.ownership.transaction(id).coordinator_error()
    }

    /// NOT_LEADER_OR_FOLLOWER when another broker leads `topic`'s `partition` or none does
    /// (several brokers over PostgreSQL); `None`: this broker leads it.
    pub(crate) fn leader_error(&self, topic: &str, partition: i32) -> Option<i16> {
        self.context
            .ownership
            .partition(topic, partition)
            .leader_error()
    }

    /// The broker that leads `topic`'s `partition`, as this connection's clients reach it,
    /// when it is another live broker (for the current-leader fields of Produce and Fetch).
    pub(crate) fn other_leader(
        &self,
        topic: &str,
        partition: i32,
    ) -> Option<crate::ownership::Node> {
        match self.context.ownership.partition(topic, partition) {
            crate::ownership::Serving::Elsewhere(node) => {
                self.context.ownership.other(node, self.endpoint().protocol)
            }
            _ => None,
        }
    }

    /// [`authorize`](Self::authorize) on a group.
    pub(crate) fn may_group(&self, operation: crate::acl::Operation, group: &str) -> bool {
        self.authorize(operation, crate::acl::ResourceType::Group, group)
    }

    /// [`authorize`](Self::authorize) on a topic.
    pub(crate) fn may_topic(&self, operation: crate::acl::Operation, topic: &str) -> bool {
        self.authorize(operation, crate::acl::ResourceType::Topic, topic)
    }

    /// [`authorize`](Self::authorize) on the cluster.
    pub(crate) fn may_cluster(&self, operation: crate::acl::Operation) -> bool {
        self.authorize(
            operation,
            crate::acl::ResourceType::Cluster,
            crate::acl::CLUSTER_NAME,
        )
    }
}
