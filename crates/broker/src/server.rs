//! The network adapter in mini-redis's shape: a [`Server`] (the listener) accepts under a
//! connection limit, a `Handler` per connection answers one request at a time, and shutdown
//! is broadcast to every handler and waited for before the broker stops.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordinator_core::{Coordinator, TopicMetadata};
use coordinator_driver::Driver;
use partition_log::{MemoryLog, PartitionLog, SegmentLog};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, mpsc, Semaphore};
use tracing::{debug, error, info, warn, Instrument};

use crate::codec::{self, Incoming};
use crate::config::BrokerConfig;
use crate::connection::Connection;
use crate::context::{Context, WallClock};
use crate::error::BrokerError;
use crate::shutdown::Shutdown;

/// The partitions' log: with a data directory the segment log in `DIR/records/` (topics,
/// ids, records and bounds survive a restart), otherwise in memory.
fn open_log(config: &BrokerConfig) -> Result<Arc<dyn PartitionLog>, BrokerError> {
    let Some(dir) = &config.data_dir else {
        warn!("no --data-dir: topics and records live in memory and are lost at exit");
        return Ok(Arc::new(MemoryLog::with_clock(Arc::new(WallClock))));
    };
    let r = config.records;
    let log = SegmentLog::builder(dir.join(RECORDS_DIR))
        .clock(Arc::new(WallClock))
        .flush_interval_ms(r.flush_interval_ms)
        .segment_bytes(r.segment_bytes)
        .retention_ms(r.retention_ms)
        .retention_bytes(r.retention_bytes)
        .open()?;
    info!(path = %log.dir().display(), flush_interval_ms = ?r.flush_interval_ms, "topics and records are kept in this directory");
    Ok(Arc::new(log))
}

/// The partitions' log directory inside the data directory.
const RECORDS_DIR: &str = "records";

/// How long a stopping broker waits for connections to finish their request in flight
/// before it stops without them (a client that does not read its socket cannot hold the
/// process forever).
const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// A bound, not yet serving broker: the offset store is open (and, for a data directory,
/// owned), the topics exist, the socket listens. [`run`](Server::run) serves it.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    context: Arc<Context>,
    local_addr: SocketAddr,
}

impl Server {
    /// Opens the offset store, creates the configured topics, builds the coordinator, loads
    /// the groups the store knows, and binds the listener.
    ///
    /// # Errors
    /// `INVALID_CONFIG`, the store's error (a data directory another broker owns, an
    /// unreadable offset file), a topic that cannot be created, `BIND_FAILED`.
    pub async fn bind(config: BrokerConfig) -> Result<Server, BrokerError> {
        config.validate()?;
        let store_config = config.store();
        if let Some(dir) = &config.data_dir {
            // The broker creates its data directory (the groups tool refuses a missing one).
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| BrokerError::InvalidConfig {
                    setting: "data-dir",
                    reason: format!("cannot create `{}`: {e}", dir.display()),
                })?;
        }
        let store = store_config.open().await?;
        match store_config.path() {
            Some(path) => info!(path = %path.display(), "committed offsets are kept in this file"),
            None => warn!("no --data-dir: committed offsets live in memory and are lost at exit"),
        }
        let log = open_log(&config)?;
        for topic in &config.topics {
            match log.partition_count(&topic.name) {
                Some(kept) if kept == topic.partitions => {
                    info!(topic = %topic.name, partitions = kept, "topic kept from the data directory");
                }
                Some(kept) => warn!(
                    topic = %topic.name,
                    partitions = kept,
                    asked = topic.partitions,
                    "--topic asks for another partition count than the data directory keeps: \
                     the topic keeps its {kept} partitions (a topic's partitions are not changed at start)"
                ),
                None => {
                    log.create_topic(&topic.name, topic.partitions).await?;
                    info!(topic = %topic.name, partitions = topic.partitions, "topic created");
                }
            }
        }
        let coordinator = Coordinator::builder(
            store,
            log.clone(),
            // The chapter's synchronous groups need an assignor; Kafka's clients assign
            // their classic groups themselves.
            Arc::new(assignor::RangeAssignor),
        )
        .offsets_retention_ms(config.offsets_retention_minutes.saturating_mul(60_000))
        .group_min_session_timeout_ms(config.group_min_session_timeout_ms)
        .group_max_session_timeout_ms(config.group_max_session_timeout_ms)
        .group_initial_rebalance_delay_ms(config.group_initial_rebalance_delay_ms)
        .group_max_size(config.group_max_size)
        .build()?;
        let coordinator = Arc::new(coordinator);
        let loaded = coordinator.load().await?;
        if loaded > 0 {
            info!(groups = loaded, "groups with committed offsets loaded");
        }
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| BrokerError::Bind {
                    address: config.listen,
                    source,
                })?;
        let local_addr = listener.local_addr().map_err(|source| BrokerError::Bind {
            address: config.listen,
            source,
        })?;
        // A wildcard address cannot be connected to; tell clients the loopback one.
        let host = match local_addr.ip() {
            ip if ip.is_unspecified() => match ip {
                IpAddr::V4(_) => Ipv4Addr::LOCALHOST.to_string(),
                IpAddr::V6(_) => "::1".to_string(),
            },
            ip => ip.to_string(),
        };
        let context = Arc::new(Context::new(
            config,
            log,
            coordinator,
            host,
            local_addr.port(),
        ));
        Ok(Server {
            listener,
            context,
            local_addr,
        })
    }

    /// The address the broker listens on (with the port the OS picked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves until `shutdown` resolves, then stops: no new connections, every handler
    /// answers the request it is working on (a long-polling Fetch answers at once) and
    /// closes, the coordinator's timers stop. Committed offsets are durable when their
    /// commit was answered, so nothing is left to flush.
    pub async fn run(self, shutdown: impl Future) -> Result<(), BrokerError> {
        let driver = Driver::spawn(self.context.coordinator.clone());
        let (notify_shutdown, _) = broadcast::channel(1);
        let (shutdown_complete_tx, mut shutdown_complete_rx) = mpsc::channel::<()>(1);
        let mut listener = Listener {
            listener: self.listener,
            limit: Arc::new(Semaphore::new(self.context.config.max_connections)),
            context: self.context,
            notify_shutdown,
            shutdown_complete_tx,
            next_id: 0,
        };
        tokio::select! {
            result = listener.accept_loop() => {
                if let Err(e) = result {
                    error!(error = %e, "the listener failed; stopping");
                }
            }
            _ = shutdown => info!("shutting down: no new connections"),
        }
        let Listener {
            notify_shutdown,
            shutdown_complete_tx,
            ..
        } = listener;
        drop(notify_shutdown);
        drop(shutdown_complete_tx);
        // Every handler holds a sender; recv returns None once all have finished.
        if tokio::time::timeout(DRAIN_LIMIT, shutdown_complete_rx.recv())
            .await
            .is_err()
        {
            warn!(
                "connections still busy after {}s; stopping without them",
                DRAIN_LIMIT.as_secs()
            );
        }
        driver.shutdown().await;
        info!("stopped");
        Ok(())
    }
}

struct Listener {
    listener: TcpListener,
    limit: Arc<Semaphore>,
    context: Arc<Context>,
    notify_shutdown: broadcast::Sender<()>,
    shutdown_complete_tx: mpsc::Sender<()>,
    next_id: u64,
}

impl Listener {
    async fn accept_loop(&mut self) -> std::io::Result<()> {
        loop {
            // Waits while max-connections are open; the semaphore is never closed.
            let Ok(permit) = self.limit.clone().acquire_owned().await else {
                return Ok(());
            };
            let (socket, peer) = self.accept().await?;
            self.next_id += 1;
            let mut handler = Handler {
                id: self.next_id,
                peer,
                context: self.context.clone(),
                connection: Connection::new(socket, self.context.config.max_frame_bytes),
                shutdown: Shutdown::new(self.notify_shutdown.subscribe()),
                _shutdown_complete: self.shutdown_complete_tx.clone(),
            };
            tokio::spawn(async move {
                info!(connection = handler.id, %peer, "connection opened");
                let reason = handler.run().await;
                info!(connection = handler.id, %peer, reason = %reason, "connection closed");
                drop(permit);
            });
        }
    }

    /// Accepts, retrying transient errors (too many open files) with a back-off, as
    /// mini-redis does; gives up after about a minute of failures.
    async fn accept(&mut self) -> std::io::Result<(TcpStream, SocketAddr)> {
        let mut backoff = 1;
        loop {
            match self.listener.accept().await {
                Ok(accepted) => return Ok(accepted),
                Err(e) if backoff > 64 => return Err(e),
                Err(e) => warn!(error = %e, "accept failed; retrying"),
            }
            tokio::time::sleep(Duration::from_secs(backoff)).await;
            backoff *= 2;
        }
    }
}

struct Handler {
    id: u64,
    peer: SocketAddr,
    context: Arc<Context>,
    connection: Connection,
    shutdown: Shutdown,
    /// Dropped when the handler ends; the server waits for every one.
    _shutdown_complete: mpsc::Sender<()>,
}

impl Handler {
    /// Serves requests until the peer leaves, a request is refused, or the broker stops.
    /// Returns why the connection ended, for the log line.
    async fn run(&mut self) -> String {
        while !self.shutdown.is_shutdown() {
            let frame = tokio::select! {
                frame = self.connection.read_frame() => frame,
                _ = self.shutdown.recv() => return "broker shutting down".into(),
            };
            let frame = match frame {
                Ok(Some(frame)) => frame,
                Ok(None) => return "closed by the client".into(),
                Err(e) => {
                    warn!(connection = self.id, peer = %self.peer, error = %e, "bad frame; closing the connection");
                    return format!("bad frame: {e}");
                }
            };
            let response = match codec::parse_request(frame) {
                Incoming::Request {
                    header,
                    key,
                    request,
                } => {
                    let span = tracing::debug_span!(
                        "request",
                        connection = self.id,
                        api = ?key,
                        version = header.request_api_version,
                        correlation_id = header.correlation_id,
                        client_id = header.client_id.as_deref().unwrap_or(""),
                    );
                    let started = Instant::now();
                    // The answer is boxed (see `registry::Answer`): an idle connection's
                    // task does not carry the largest handler's future.
                    let answer = request
                        .answer(&self.context, &mut self.shutdown, self.peer, &header)
                        .instrument(span.clone())
                        .await;
                    span.in_scope(|| {
                        debug!(
                            latency_us = started.elapsed().as_micros() as u64,
                            "answered"
                        )
                    });
                    match answer {
                        Ok(response) => response,
                        Err(e) => {
                            error!(connection = self.id, api = ?key, error = %e, "cannot answer; closing the connection");
                            return format!("internal error: {e}");
                        }
                    }
                }
                Incoming::UnsupportedVersion { header, entry } => {
                    let (key, version) = (entry.key, header.request_api_version);
                    match entry.unsupported_version(version, header.correlation_id) {
                        Some(frame) => {
                            debug!(connection = self.id, api = ?key, version, "unsupported version");
                            Some(frame)
                        }
                        None => {
                            warn!(connection = self.id, peer = %self.peer, api = ?key, version, "unsupported version; closing the connection");
                            return format!("{key:?} v{version} is not supported");
                        }
                    }
                }
                Incoming::Reject { reason } => {
                    warn!(connection = self.id, peer = %self.peer, %reason, "bad request; closing the connection");
                    return format!("bad request: {reason}");
                }
            };
            if let Some(frame) = response {
                if let Err(e) = self.connection.write_frame(&frame).await {
                    return format!("write failed: {e}");
                }
            }
        }
        "broker shutting down".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The data directory is created off the async workers, and a path that cannot be one is
    /// still the setting's error, naming it.
    #[tokio::test(flavor = "current_thread")]
    async fn a_data_directory_is_created_and_one_that_cannot_be_is_invalid_config() {
        let base = tempfile::tempdir().unwrap();
        let config = |dir: std::path::PathBuf| BrokerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            data_dir: Some(dir),
            ..BrokerConfig::default()
        };
        let nested = base.path().join("a/b");
        let server = Server::bind(config(nested.clone())).await.unwrap();
        assert!(nested.is_dir(), "created, parents included");
        drop(server);

        let file = base.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let err = Server::bind(config(file.join("dir"))).await.unwrap_err();
        assert_eq!(err.code(), "INVALID_CONFIG");
        assert!(err.to_string().contains("cannot create"), "{err}");
    }
}
