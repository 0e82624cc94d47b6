//! With `--postgres`: this broker's registration and coordinator slots in the database
//! (`store_postgres::cluster`), held under a lease that a task extends every
//! `--broker-heartbeat-interval-ms`.
//!
//! At start the broker registers its node id (waiting while another live process holds it,
//! Kafka's `DUPLICATE_BROKER_REGISTRATION`) and claims every coordinator slot (waiting as a
//! standby while another live broker holds them), before it loads or writes anything. Every
//! write of a group or a transaction then checks its slot's epoch inside its own database
//! transaction, so once another broker has claimed the slots (this one was paused or cut off
//! past `--broker-session-timeout-ms`) nothing this one writes lands. Its next heartbeat finds
//! out, and the broker stops with `BROKER_FENCED`. A clean stop deregisters at once, so a
//! replacement need not wait for the lease to run out.

use std::sync::Arc;
use std::time::Duration;

use store_postgres::cluster::{Holder, Liveness};
use store_postgres::{Cluster, SlotFence};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::config::{BrokerConfig, PostgresUrl};
use crate::error::BrokerError;
use crate::server::postgres_unavailable;

/// A registration and the slots it owns, not yet heartbeating.
#[derive(Debug)]
pub(crate) struct Lease {
    cluster: Cluster,
    fence: SlotFence,
    interval: Duration,
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
    /// Registers `config.node_id` and claims every coordinator slot, waiting for as long as
    /// another live process holds either.
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
        let fence = loop {
            match cluster.claim_all().await.map_err(fail)? {
                Ok(fence) => break fence,
                Err(holder) => {
                    info!(
                        holder = holder.node_id,
                        lease_left_ms = holder.lease_left_ms,
                        "standby: another live broker owns the coordinator slots; waiting \
                         until it stops or its lease runs out"
                    );
                    tokio::time::sleep(retry_after(&holder, interval)).await;
                    if let Liveness::Deposed(reason) =
                        cluster.heartbeat(None).await.map_err(fail)?
                    {
                        return Err(BrokerError::Fenced {
                            node_id: config.node_id,
                            reason,
                        });
                    }
                }
            }
        };
        info!(
            node_id = config.node_id,
            incarnation = fence.incarnation(),
            session_timeout_ms = config.broker_session_timeout_ms,
            heartbeat_interval_ms = config.broker_heartbeat_interval_ms,
            "registered; this broker owns every coordinator slot"
        );
        Ok(Lease {
            cluster,
            fence,
            interval,
        })
    }

    /// The slots every write of the offset store must still own.
    pub(crate) fn fence(&self) -> SlotFence {
        self.fence.clone()
    }

    /// Writes the listeners clients reach this broker on into its registration.
    pub(crate) async fn publish(&self, endpoints: serde_json::Value) {
        if let Err(e) = self.cluster.publish_endpoints(endpoints).await {
            warn!(error = %e, "cannot write this broker's listeners into its registration");
        }
    }

    /// Starts the heartbeat task.
    pub(crate) fn spawn(self) -> Heartbeat {
        let cluster = Arc::new(self.cluster);
        let (deposed_tx, deposed) = oneshot::channel();
        let task = tokio::spawn(beat(cluster.clone(), self.fence, self.interval, deposed_tx));
        Heartbeat {
            cluster,
            task,
            deposed,
        }
    }
}

async fn beat(
    cluster: Arc<Cluster>,
    fence: SlotFence,
    interval: Duration,
    deposed: oneshot::Sender<String>,
) {
    loop {
        tokio::time::sleep(interval).await;
        match cluster.heartbeat(Some(&fence)).await {
            Ok(Liveness::Live) => {}
            Ok(Liveness::Deposed(reason)) => {
                let _ = deposed.send(reason);
                return;
            }
            // The lease runs on; if PostgreSQL stays away past it, another broker may take
            // the slots, and the fence refuses this one's writes from then on.
            Err(e) => warn!(error = %e, "cannot extend this broker's lease; retrying"),
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
