//! Which broker serves what: with several brokers over one PostgreSQL database (`--postgres`),
//! each group and transactional id has one coordinator and each partition one leader, the
//! live broker owning its coordinator slot (`store_postgres::cluster`): a group's slot is
//! Kafka's partition of `__consumer_offsets` for it, a transactional id's the partition of
//! `__transaction_state`, and a partition's the group slot of its name (`topic-partition`),
//! the slot whose epoch fences its appends.
//!
//! Without `--postgres` this broker serves everything. With it, [`Ownership`] answers from
//! the slots this process owns (its [`SlotFence`], exact: updated as slots are claimed and
//! released) and, for the others, from the cluster as the last balance saw it (at most one
//! heartbeat interval old; a client sent to a broker that no longer owns the slot is told
//! NOT_COORDINATOR or NOT_LEADER_OR_FOLLOWER and looks again, as with Kafka).

use std::collections::BTreeMap;
use std::sync::{PoisonError, RwLock};

use store_postgres::cluster::{group_slot, transaction_slot};
use store_postgres::log::append_slot;
use store_postgres::{ClusterView, SlotFence};

use crate::api::codes;
use crate::config::SecurityProtocol;

/// Who serves a group, a transactional id or a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Serving {
    /// This broker.
    Here,
    /// This broker, once it has loaded the slot's groups and transactions
    /// (COORDINATOR_LOAD_IN_PROGRESS meanwhile).
    Loading,
    /// Another live broker, by node id.
    Elsewhere(i32),
    /// No live broker: the owner died and no broker has taken the slot yet.
    Nobody,
}

impl Serving {
    /// The error a coordinator request (group or transaction) gets here, if any: none when
    /// served here, COORDINATOR_LOAD_IN_PROGRESS while loading, else NOT_COORDINATOR (Kafka's
    /// answer from a broker that does not lead the key's partition; clients find the
    /// coordinator again).
    pub(crate) fn coordinator_error(self) -> Option<i16> {
        match self {
            Serving::Here => None,
            Serving::Loading => Some(codes::COORDINATOR_LOAD_IN_PROGRESS),
            Serving::Elsewhere(_) | Serving::Nobody => Some(codes::NOT_COORDINATOR),
        }
    }

    /// The error a partition request (Produce, Fetch, ListOffsets …) gets here, if any:
    /// NOT_LEADER_OR_FOLLOWER when another broker leads it or none does. A partition needs
    /// no loading (its producer state is read from the log at first use).
    pub(crate) fn leader_error(self) -> Option<i16> {
        match self {
            Serving::Here | Serving::Loading => None,
            Serving::Elsewhere(_) | Serving::Nobody => Some(codes::NOT_LEADER_OR_FOLLOWER),
        }
    }
}

/// A live broker as clients reach it through one kind of listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    pub(crate) node_id: i32,
    pub(crate) host: String,
    pub(crate) port: i32,
}

#[derive(Debug)]
struct Shared {
    fence: SlotFence,
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    view: ClusterView,
    /// The owned slots whose groups and transactions are loaded, with the fence epoch they
    /// were loaded under. A slot in the fence at another epoch (or not here) is loading:
    /// the fence takes a gained slot in before [`Ownership::update`] runs, and a request
    /// checked in between must not be served from a coordinator that lacks its groups.
    served: BTreeMap<i32, i64>,
}

/// See the [module](self) docs.
#[derive(Debug)]
pub(crate) struct Ownership {
    node_id: i32,
    /// `None`: a broker alone (no `--postgres`) serves everything.
    shared: Option<Shared>,
}

impl Ownership {
    /// A broker that serves everything.
    pub(crate) fn alone(node_id: i32) -> Ownership {
        Ownership {
            node_id,
            shared: None,
        }
    }

    /// A broker of a cluster over PostgreSQL, owning the slots of `fence`, none of them
    /// loaded yet ([`loaded`](Self::loaded)).
    pub(crate) fn cluster(node_id: i32, fence: SlotFence, view: ClusterView) -> Ownership {
        Ownership {
            node_id,
            shared: Some(Shared {
                fence,
                state: RwLock::new(State {
                    view,
                    served: BTreeMap::new(),
                }),
            }),
        }
    }

    /// Whether this broker is alone (no `--postgres`): it coordinates every transaction and
    /// leads every partition.
    pub(crate) fn is_alone(&self) -> bool {
        self.shared.is_none()
    }

    /// This broker's node id.
    pub(crate) fn node_id(&self) -> i32 {
        self.node_id
    }

    fn slot(&self, slot: i32) -> Serving {
        let Some(shared) = &self.shared else {
            return Serving::Here;
        };
        let state = shared.state.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(epoch) = shared.fence.epoch(slot) {
            return if state.served.get(&slot) == Some(&epoch) {
                Serving::Here
            } else {
                Serving::Loading
            };
        }
        match state.view.owner(slot) {
            Some(node) if node != self.node_id => Serving::Elsewhere(node),
            _ => Serving::Nobody,
        }
    }

    /// Who coordinates group `group_id`.
    pub(crate) fn group(&self, group_id: &str) -> Serving {
        self.slot(group_slot(group_id))
    }

    /// Who coordinates transactional id `id`.
    pub(crate) fn transaction(&self, id: &str) -> Serving {
        self.slot(transaction_slot(id))
    }

    /// Who coordinates the groups of group slot `slot` (Kafka's `__consumer_offsets`
    /// partition `slot`, 0–49).
    pub(crate) fn group_slot(&self, slot: i32) -> Serving {
        self.slot(slot)
    }

    /// Who leads `topic`'s `partition`.
    pub(crate) fn partition(&self, topic: &str, partition: i32) -> Serving {
        self.slot(append_slot(topic, i64::from(partition)))
    }

    /// The live brokers other than this one, as clients of a `protocol` listener reach them
    /// (a broker with no such listener, or that has not published its listeners yet, is
    /// left out), by node id.
    pub(crate) fn others(&self, protocol: SecurityProtocol) -> Vec<Node> {
        let Some(shared) = &self.shared else {
            return Vec::new();
        };
        let state = shared.state.read().unwrap_or_else(PoisonError::into_inner);
        state
            .view
            .brokers
            .iter()
            .filter(|b| b.node_id != self.node_id)
            .filter_map(|b| {
                let (host, port) = endpoint(&b.endpoints, protocol)?;
                Some(Node {
                    node_id: b.node_id,
                    host,
                    port,
                })
            })
            .collect()
    }

    /// Node `node_id` as clients of a `protocol` listener reach it, if it is another live
    /// broker with such a listener.
    pub(crate) fn other(&self, node_id: i32, protocol: SecurityProtocol) -> Option<Node> {
        self.others(protocol)
            .into_iter()
            .find(|n| n.node_id == node_id)
    }

    /// Takes in what a balance found: the cluster as seen. The slots gained (in the fence
    /// already, at a new epoch) are loading until [`loaded`](Self::loaded); the slots lost
    /// are forgotten.
    pub(crate) fn update(&self, view: ClusterView) {
        if let Some(shared) = &self.shared {
            let mut state = shared.state.write().unwrap_or_else(PoisonError::into_inner);
            state.view = view;
            state
                .served
                .retain(|&s, &mut e| shared.fence.epoch(s) == Some(e));
        }
    }

    /// Marks `slots` (as [`loading`](Self::loading) listed them, with their epochs) as
    /// loaded: served from now on, unless the fence moved on meanwhile.
    pub(crate) fn loaded(&self, slots: &[(i32, i64)]) {
        if let Some(shared) = &self.shared {
            let mut state = shared.state.write().unwrap_or_else(PoisonError::into_inner);
            state.served.extend(slots.iter().copied());
        }
    }

    /// The owned slots not loaded yet at their current epoch, with that epoch.
    pub(crate) fn loading(&self) -> Vec<(i32, i64)> {
        self.shared.as_ref().map_or_else(Vec::new, |shared| {
            let state = shared.state.read().unwrap_or_else(PoisonError::into_inner);
            shared
                .fence
                .owned()
                .into_iter()
                .filter_map(|s| Some((s, shared.fence.epoch(s)?)))
                .filter(|(s, e)| state.served.get(s) != Some(e))
                .collect()
        })
    }
}

/// The host and port of the first listener of `protocol` in a broker's published listeners.
fn endpoint(endpoints: &serde_json::Value, protocol: SecurityProtocol) -> Option<(String, i32)> {
    endpoints.as_array()?.iter().find_map(|e| {
        if e.get("security_protocol")?.as_str()? != protocol.name() {
            return None;
        }
        let host = e.get("host")?.as_str()?.to_string();
        let port = i32::try_from(e.get("port")?.as_i64()?).ok()?;
        Some((host, port))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broker_alone_serves_everything() {
        let o = Ownership::alone(7);
        assert_eq!(o.group("g"), Serving::Here);
        assert_eq!(o.transaction("t"), Serving::Here);
        assert_eq!(o.partition("orders", 3), Serving::Here);
        assert!(o.others(SecurityProtocol::Plaintext).is_empty());
        assert_eq!(Serving::Here.coordinator_error(), None);
        assert_eq!(Serving::Loading.coordinator_error(), Some(14));
        assert_eq!(Serving::Elsewhere(2).coordinator_error(), Some(16));
        assert_eq!(Serving::Nobody.leader_error(), Some(6));
        assert_eq!(Serving::Loading.leader_error(), None);
    }

    #[test]
    fn an_owned_slot_is_served_once_loaded_at_its_epoch() {
        let slot = group_slot("g");
        let o = Ownership::cluster(1, SlotFence::detached([(slot, 3)]), ClusterView::default());
        assert_eq!(o.group("g"), Serving::Loading, "owned, not loaded yet");
        assert_eq!(o.loading(), [(slot, 3)]);
        o.loaded(&o.loading());
        assert_eq!(o.group("g"), Serving::Here);
        assert!(o.loading().is_empty());
        // Loaded under an earlier epoch: the slot was lost and taken again since (the fence
        // moves before `update` runs), so its groups are loading again.
        let again = Ownership::cluster(1, SlotFence::detached([(slot, 4)]), ClusterView::default());
        again.loaded(&[(slot, 3)]);
        assert_eq!(again.group("g"), Serving::Loading);
        assert_eq!(again.loading(), [(slot, 4)]);
        again.update(ClusterView::default());
        assert_eq!(
            again.group("g"),
            Serving::Loading,
            "update forgets the stale epoch"
        );
        assert_ne!(group_slot("h"), slot, "another slot for the next check");
        assert_eq!(
            again.group("h"),
            Serving::Nobody,
            "not owned, no owner seen"
        );
    }

    #[test]
    fn listeners_are_matched_by_security_protocol() {
        let published = serde_json::json!([
            {"security_protocol": "SSL", "host": "a", "port": 9093},
            {"security_protocol": "PLAINTEXT", "host": "b", "port": 9092},
        ]);
        assert_eq!(
            endpoint(&published, SecurityProtocol::Plaintext),
            Some(("b".into(), 9092))
        );
        assert_eq!(endpoint(&published, SecurityProtocol::SaslSsl), None);
        assert_eq!(
            endpoint(&serde_json::json!({}), SecurityProtocol::Ssl),
            None
        );
    }
}
