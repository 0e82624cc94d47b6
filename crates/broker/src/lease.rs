//! With `--postgres`: this broker's registration and coordinator slots in the database
//! (`store_postgres::cluster`), held under a lease that a task extends every
//! `--broker-heartbeat-interval-ms`.
//!
//! At start the broker registers its node id (waiting while another live process holds it,
//! Kafka's `DUPLICATE_BROKER_REGISTRATION`) and takes its fair share of the coordinator
//! slots no live broker owns, before it loads or writes anything. At every heartbeat it
//! balances again ([`Cluster::balance`]): it releases slots beyond its share when brokers
//! joined, takes over the slots of a broker whose lease ran out, drops from memory the
//! groups, transactions and producer states of the slots it lost, and loads the groups and
//! transactions of the slots it gained (answering COORDINATOR_LOAD_IN_PROGRESS for them
//! meanwhile). Every write of a group, a transaction or a record checks its slot's epoch
//! inside its own database transaction, so nothing a broker writes after losing a slot lands.
//! At each heartbeat the broker also reads again what another broker may have changed (topics,
//! ACLs, topic and group configs, SCRAM credentials).
//! A broker whose node id another process registered meanwhile stops with `BROKER_FENCED`. A
//! clean stop deregisters at once, so its slots move without waiting for the lease to run
//! out.

use std::sync::Arc;
use std::time::Duration;

use store_postgres::cluster::{group_slot, transaction_slot, Balance, Holder, Liveness};
use store_postgres::log::append_slot;
use store_postgres::{Cluster, SlotFence};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::config::{BrokerConfig, PostgresUrl};
use crate::context::Context;
use crate::error::BrokerError;
use crate::ownership::Ownership;
use crate::server::postgres_unavailable;

/// A registration and the slots it owns, not yet heartbeating.
#[derive(Debug)]
pub(crate) struct Lease {
    cluster: Cluster,
    fence: SlotFence,
    interval: Duration,
    /// `broker.session.timeout.ms`.
    session_timeout: Duration,
    /// Which broker serves what, from the first balance on.
    ownership: Arc<Ownership>,
}

/// How long to wait before trying again after `holder` stood in the way: until its lease may
/// have run out, at most one heartbeat interval (so that this broker's own registration is
/// kept alive meanwhile), at least 50 ms.
fn retry_after(holder: &Holder, interval: Duration) -> Duration {
    let left = u64::try_from(holder.lease_left_ms.saturating_add(50)).unwrap_or(0);
    Duration::from_millis(left).clamp(
        Duration::from_millis(50),
        interval.max(Duration::from_millis(50)),
    )
}

impl Lease {
    /// Registers `config.node_id` (waiting for as long as another live process holds it)
    /// and takes this broker's share of the free coordinator slots.
    pub(crate) async fn acquire(
        config: &BrokerConfig,
        url: &PostgresUrl,
    ) -> Result<Lease, BrokerError> {
        let fail = |e: coordinator_core::StorageError| postgres_unavailable(url, &e);
        let interval = Duration::from_millis(config.broker_heartbeat_interval_ms);
        let mut cluster = Cluster::connect(
            url.as_str(),
            config.node_id,
            Duration::from_millis(config.broker_session_timeout_ms),
        )
        .await
        .map_err(fail)?;
        while let Some(holder) = cluster.register().await.map_err(fail)? {
            warn!(
                node_id = config.node_id,
                lease_left_ms = holder.lease_left_ms,
                "another live process holds this node id (DUPLICATE_BROKER_REGISTRATION): \
                 waiting until it stops or its lease runs out"
            );
            tokio::time::sleep(retry_after(&holder, interval)).await;
        }
        let fence = cluster.empty_fence().map_err(fail)?;
        let first = cluster.balance(&fence).await.map_err(fail)?;
        if let Liveness::Deposed(reason) = first.liveness {
            return Err(BrokerError::Fenced {
                node_id: config.node_id,
                reason,
            });
        }
        info!(
            node_id = config.node_id,
            incarnation = fence.incarnation(),
            live_brokers = first.view.brokers.len(),
            slots = first.gained.len(),
            session_timeout_ms = config.broker_session_timeout_ms,
            heartbeat_interval_ms = config.broker_heartbeat_interval_ms,
            "registered; coordinator slots taken"
        );
        let ownership = Arc::new(Ownership::cluster(
            config.node_id,
            fence.clone(),
            first.view,
        ));
        Ok(Lease {
            cluster,
            fence,
            interval,
            session_timeout: Duration::from_millis(config.broker_session_timeout_ms),
            ownership,
        })
    }

    /// `url` parsed, its sessions bounded by this broker's lease: the server ends one that
    /// sits idle inside a transaction for longer (`store_postgres::bound_idle_transactions`),
    /// so that this broker, stopped in the middle of a write, never holds the other brokers'
    /// writes up beyond its lease (they wait on the rows its transaction locked).
    pub(crate) fn bounded(
        &self,
        url: &PostgresUrl,
    ) -> Result<store_postgres::ConnectConfig, coordinator_core::StorageError> {
        let config = store_postgres::parse_url(url.as_str())?;
        Ok(store_postgres::bound_idle_transactions(
            config,
            self.session_timeout,
        ))
    }

    /// The slots every write of the offset store and the log must still own.
    pub(crate) fn fence(&self) -> SlotFence {
        self.fence.clone()
    }

    /// Which broker serves what.
    pub(crate) fn ownership(&self) -> Arc<Ownership> {
        self.ownership.clone()
    }

    /// Writes the listeners clients reach this broker on into its registration.
    pub(crate) async fn publish(&self, endpoints: serde_json::Value) {
        if let Err(e) = self.cluster.publish_endpoints(endpoints).await {
            warn!(error = %e, "cannot write this broker's listeners into its registration");
        }
    }

    /// Starts the heartbeat task, which balances the slots and loads and drops what they
    /// hold in `context`.
    pub(crate) fn spawn(self, context: Arc<Context>) -> Heartbeat {
        let cluster = Arc::new(self.cluster);
        let (deposed_tx, deposed) = oneshot::channel();
        let task = tokio::spawn(beat(
            cluster.clone(),
            self.fence,
            self.interval,
            context,
            deposed_tx,
        ));
        Heartbeat {
            cluster,
            task,
            deposed,
        }
    }
}

/// How long after another broker's lease runs out this one looks again, to take its slots.
const AFTER_EXPIRY: Duration = Duration::from_millis(50);

async fn beat(
    cluster: Arc<Cluster>,
    fence: SlotFence,
    interval: Duration,
    context: Arc<Context>,
    deposed: oneshot::Sender<String>,
) {
    let mut wait = interval;
    loop {
        tokio::time::sleep(wait).await;
        wait = interval;
        match cluster.balance(&fence).await {
            Ok(balance) => {
                if let Some(left) = balance.next_expiry {
                    wait = wait.min(left + AFTER_EXPIRY);
                }
                let liveness = balance.liveness.clone();
                apply(&context, balance).await;
                if let Liveness::Deposed(reason) = liveness {
                    let _ = deposed.send(reason);
                    return;
                }
            }
            // The lease runs on; if PostgreSQL stays away past it, other brokers take the
            // slots, and the fence refuses this one's writes from then on.
            Err(e) => warn!(error = %e, "cannot extend this broker's lease; retrying"),
        }
        refresh(&context).await;
    }
}

/// Reads again what other brokers over the same database may have changed: the topics (for
/// the answers that read the log's cache: Metadata, the topic checks of every request), the
/// ACLs, the topic and group configs, the SCRAM credentials. A heartbeat interval after a
/// change made through another broker, it is in force here.
async fn refresh(context: &Context) {
    if let Err(e) = context.log.topics().await {
        warn!(error = %e, "cannot refresh the topics");
    }
    if let Some(authorizer) = &context.authorizer {
        authorizer.refresh().await;
    }
    context.topic_configs.refresh().await;
    context.group_configs.refresh(&context.coordinator).await;
    context.scram_users.refresh().await;
}

/// Takes in a balance: drops what the lost slots held, then loads the groups and
/// transactions of every owned slot not loaded yet (the gained ones, and any whose load
/// failed before: retried at each heartbeat).
pub(crate) async fn apply(context: &Context, balance: Balance) {
    let Balance { lost, view, .. } = balance;
    context.ownership.update(view);
    if !lost.is_empty() {
        let groups = context
            .coordinator
            .unload_where(|g| lost.contains(&group_slot(g)))
            .await;
        let transactions = context
            .txn
            .unload_where(|id| lost.contains(&transaction_slot(id)))
            .await;
        let partitions = context
            .producers
            .forget(|tp| lost.contains(&append_slot(tp.topic(), i64::from(tp.partition()))));
        let share_partitions = context
            .share
            .release_where(|tp| lost.contains(&append_slot(tp.topic(), i64::from(tp.partition()))));
        info!(
            slots = ?lost,
            groups, transactions, partitions, share_partitions,
            "coordinator slots lost to another broker: their groups, transactions, \
             producer states and share-partitions are dropped"
        );
    }
    let loading = context.ownership.loading();
    if loading.is_empty() {
        return;
    }
    let slots: Vec<i32> = loading.iter().map(|&(s, _)| s).collect();
    let loaded = async {
        let groups = context
            .coordinator
            .load_where(|g| slots.contains(&group_slot(g)))
            .await
            .map_err(|e| format!("the groups: {e}"))?;
        let transactions = context
            .txn
            .load_where(|id| slots.contains(&transaction_slot(id)))
            .await
            .map_err(|e| format!("the transactions: {e}"))?;
        Ok::<_, String>((groups, transactions))
    }
    .await;
    match loaded {
        Ok((groups, transactions)) => {
            context.ownership.loaded(&loading);
            info!(slots = ?slots, groups, transactions, "coordinator slots loaded and served");
        }
        Err(e) => {
            warn!(error = %e, slots = ?slots, "cannot load new coordinator slots; retrying at the next heartbeat")
        }
    }
}

/// The running heartbeat of a [`Lease`].
#[derive(Debug)]
pub(crate) struct Heartbeat {
    cluster: Arc<Cluster>,
    task: JoinHandle<()>,
    deposed: oneshot::Receiver<String>,
}

impl Heartbeat {
    /// Resolves when a heartbeat found this broker deposed, with what it found.
    pub(crate) async fn deposed(&mut self) -> String {
        match (&mut self.deposed).await {
            Ok(reason) => reason,
            // The task ended without a verdict (it never does but by being aborted).
            Err(_) => std::future::pending().await,
        }
    }

    /// Stops heartbeating and, unless deposed, deregisters: the node id and the slots are
    /// free for another process at once.
    pub(crate) async fn release(self, deposed: bool) {
        self.task.abort();
        if deposed {
            return;
        }
        match self.cluster.deregister().await {
            Ok(()) => info!("deregistered: the node id and the coordinator slots are free"),
            Err(e) => warn!(error = %e, "cannot deregister; the lease runs out by itself"),
        }
    }
}
