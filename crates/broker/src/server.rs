//! The network adapter in mini-redis's shape: a [`Server`] (its listeners, one accept loop
//! each) accepts under one connection limit, a `Handler` per connection answers one request at
//! a time, and shutdown is broadcast to every accept loop and handler and waited for before
//! the broker stops.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordinator_core::{Clock, Coordinator, TopicMetadata};
use coordinator_driver::Driver;
use partition_log::{MemoryLog, PartitionLog, SegmentLog};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, mpsc, Semaphore};
use tracing::{debug, error, info, warn, Instrument};

use crate::api::group_configs::GroupConfigs;
use crate::api::topic_configs::TopicConfigs;
use crate::auth::{allowed_before_authentication, Authenticator, Session, Users};
use crate::cleaner::Cleaner;
use crate::codec::{self, Incoming};
use crate::config::{BrokerConfig, SecurityProtocol};
use crate::connection::{Connection, Frame, FrameError, ReadPhase};
use crate::context::{Context, Endpoint, ProducerIds, Transactions, WallClock};
use crate::documents::Documents;
use crate::error::BrokerError;
use crate::faults::{Instead, Outcome, SeenRequest};
use crate::lease::Lease;
use crate::manual_clock::ManualTimers;
use crate::metrics::{ListenerMetrics, Metrics, MetricsListener};
use crate::producers::Producers;
use crate::retention::Retention;
use crate::shutdown::Shutdown;
use crate::store::StoreConfig;
use crate::tls::{Stream, Tls};
use crate::txn_markers::LogMarkers;
use coordinator_core::txn::TransactionCoordinator;

/// The partitions' log: with a data directory the segment log in `DIR/records/` (topics,
/// ids, records and bounds survive a restart), otherwise in memory.
///
/// With `metrics`, the segment log's syncs are timed into them (`log="records"`).
async fn open_log(
    config: &BrokerConfig,
    lease: Option<&Lease>,
    metrics: Option<&Metrics>,
) -> Result<Arc<dyn PartitionLog>, BrokerError> {
    if let Some(url) = &config.postgres {
        let unavailable = |e: &dyn std::fmt::Display| postgres_unavailable(url, e);
        let pool_size = config.postgres_pool_size;
        let log = match lease {
            // Appends lock the partition's row, which the other brokers' appends wait for:
            // this broker's sessions are bounded by its lease (see `Lease::bounded`).
            Some(lease) => {
                let bounded = lease.bounded(url).map_err(|e| unavailable(&e))?;
                store_postgres::PostgresLog::connect_config(bounded, pool_size)
                    .await
                    .map_err(|e| unavailable(&e))?
                    .with_fence(lease.fence())
            }
            None => store_postgres::PostgresLog::connect(url.as_str(), pool_size)
                .await
                .map_err(|e| unavailable(&e))?,
        };
        info!(database = %store_postgres::describe_target(url.as_str()), "topics and records are kept in PostgreSQL");
        return Ok(Arc::new(log));
    }
    let Some(dir) = &config.data_dir else {
        warn!("no --data-dir: topics and records live in memory and are lost at exit");
        return Ok(Arc::new(MemoryLog::with_clock(Arc::new(WallClock))));
    };
    let r = config.records;
    let builder = SegmentLog::builder(dir.join(RECORDS_DIR))
        .clock(Arc::new(WallClock))
        .flush_interval_ms(r.flush_interval_ms)
        .segment_bytes(r.segment_bytes)
        // Retention is the broker's (crate::retention): with each topic's own limits.
        .retention_ms(-1)
        .retention_bytes(-1);
    let builder = match metrics {
        Some(m) => builder.on_sync(m.log_flush_observer("records")),
        None => builder,
    };
    let log = builder.open()?;
    info!(path = %log.dir().display(), flush_interval_ms = ?r.flush_interval_ms, "topics and records are kept in this directory");
    Ok(Arc::new(log))
}

/// The partitions' log directory inside the data directory.
pub(crate) const RECORDS_DIR: &str = "records";

/// How long a stopping broker waits for connections to finish their request in flight
/// before it stops without them (a client that does not read its socket cannot hold the
/// process forever).
const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// A bound, not yet serving broker: the offset store is open (and, for a data directory,
/// owned), the topics exist, the sockets listen. [`run`](Server::run) serves it.
#[derive(Debug)]
pub struct Server {
    listeners: Vec<Bound>,
    context: Arc<Context>,
    /// With `--postgres`: the registration and slots this broker holds.
    lease: Option<Lease>,
    /// With `--control-listen`: the control port (see [`crate::control`]).
    control: Option<crate::control::ControlListener>,
    /// With `--metrics-listen`: the metrics listener and what the connections record into
    /// (see [`crate::metrics`]).
    metrics: Option<(Arc<Metrics>, MetricsListener)>,
}

/// One bound listener: its socket, its endpoint, and what its connections need (SASL's users
/// on SASL_PLAINTEXT and SASL_SSL, TLS on SSL and SASL_SSL).
#[derive(Debug)]
struct Bound {
    listener: TcpListener,
    endpoint: Arc<Endpoint>,
    authenticator: Option<Arc<Authenticator>>,
    tls: Option<Tls>,
    /// With `--metrics-listen`: the listener's connection gauge and byte counters.
    metrics: Option<ListenerMetrics>,
}

impl Server {
    /// Opens the offset store, creates the configured topics, builds the coordinator, loads
    /// the groups the store knows, and binds the listener.
    ///
    /// # Errors
    /// `INVALID_CONFIG` (also for unreadable or invalid TLS files), the store's error (a data
    /// directory another broker owns, an unreadable offset file), a topic that cannot be
    /// created, `BIND_FAILED`.
    pub async fn bind(config: BrokerConfig) -> Result<Server, BrokerError> {
        config.validate()?;
        if let Some(dir) = &config.data_dir {
            // The broker creates its data directory (the groups tool refuses a missing one).
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| BrokerError::InvalidConfig {
                    setting: "data-dir",
                    reason: format!("cannot create `{}`: {e}", dir.display()),
                })?;
        }
        // With --postgres: this process's registration and coordinator slots, before anything
        // is loaded or written (a standby waits here).
        let lease = match &config.postgres {
            Some(url) => Some(Lease::acquire(&config, url).await?),
            None => None,
        };
        let documents = documents(&config, lease.as_ref()).await?;
        let (authenticator, scram_users) = authenticator(&config, documents.clone()).await?;
        // One TLS configuration per client-authentication setting the listeners use.
        let mut tls_by_auth: Vec<Tls> = Vec::new();
        if let (Some(cert), Some(key)) = (&config.ssl_certificate, &config.ssl_key) {
            for spec in config.all_listeners() {
                let auth = config.ssl_client_auth(spec.protocol);
                if spec.protocol.uses_tls() && !tls_by_auth.iter().any(|t| t.client_auth == auth) {
                    tls_by_auth.push(Tls::from_files(
                        cert,
                        key,
                        config.ssl_client_ca.as_deref(),
                        auth,
                    )?);
                }
            }
        }
        // Made before the logs are opened: they time their syncs into it.
        let metrics = config
            .metrics_listen
            .map(|_| Arc::new(Metrics::new(config.metrics_max_lag_series)));
        let store_config = config.store();
        // Only the group log has syncs of ours to time (and a series for them).
        let groups_flushes = match (&metrics, &store_config) {
            (Some(m), StoreConfig::Log { .. }) => Some(m.log_flush_observer("groups")),
            _ => None,
        };
        let store = store_config
            .open_fenced(lease.as_ref(), groups_flushes)
            .await?;
        match &store_config {
            StoreConfig::Postgres { url, .. } => info!(
                database = %store_postgres::describe_target(url.as_str()),
                "committed offsets and group records are kept in PostgreSQL"
            ),
            StoreConfig::Log {
                flush_interval_ms, ..
            } => info!(
                path = %store_config.path().unwrap_or_default().display(),
                sync = %flush_interval_ms.map_or("every batch".into(), |ms| format!("every {ms} ms")),
                "committed offsets and group records are kept in this log"
            ),
            StoreConfig::Memory => {
                warn!("no --data-dir: committed offsets live in memory and are lost at exit")
            }
            _ => info!(
                path = %store_config.path().unwrap_or_default().display(),
                "committed offsets are kept in this file"
            ),
        }
        let log = open_log(&config, lease.as_ref(), metrics.as_deref()).await?;
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
        // --manual-clock: one clock a test moves, for both coordinators' timers, starting at
        // the wall-clock time (transactions' start times read as real ones).
        let manual_clock = config.manual_clock.then(|| {
            let clock = coordinator_core::ManualClock::new();
            clock.advance(WallClock.now_ms());
            clock
        });
        let timer_clock: Option<Arc<dyn Clock>> =
            manual_clock.clone().map(|c| Arc::new(c) as Arc<dyn Clock>);
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
        // Kafka's bounds (45-60 s, 5-15 s), widened to take a setting outside them (tests and
        // development want short intervals).
        .consumer_session_timeout_ms(config.group_consumer_session_timeout_ms)
        .consumer_session_timeout_bounds_ms(
            config.group_consumer_session_timeout_ms.min(45_000),
            config.group_consumer_session_timeout_ms.max(60_000),
        )
        .consumer_heartbeat_interval_ms(config.group_consumer_heartbeat_interval_ms)
        .consumer_heartbeat_interval_bounds_ms(
            config.group_consumer_heartbeat_interval_ms.min(5_000),
            config.group_consumer_heartbeat_interval_ms.max(15_000),
        )
        .consumer_max_size(config.group_consumer_max_size)
        .share_group_settings(config.group_share.clone())
        .consumer_migration_policy(config.group_consumer_migration_policy)
        .empty_group_grace_ms(config.offsets_retention_check_interval_ms);
        let coordinator = match &timer_clock {
            Some(clock) => coordinator.clock(clock.clone()),
            None => coordinator,
        };
        let coordinator = config
            .group_consumer_assignors
            .iter()
            .fold(coordinator, |b, name| {
                b.consumer_assignor(consumer_assignor(name))
            })
            .build()?;
        let coordinator = Arc::new(coordinator);
        // Alone, every group; with several brokers, the groups of the slots this one took.
        let fence = lease.as_ref().map(Lease::fence);
        let owns = |slot: i32| fence.as_ref().is_none_or(|f| f.epoch(slot).is_some());
        let loaded = coordinator
            .load_where(|g| owns(store_postgres::cluster::group_slot(g)))
            .await?;
        if loaded > 0 {
            info!(groups = loaded, "groups with committed offsets loaded");
        }
        let group_configs = GroupConfigs::open(documents.clone(), &coordinator).await?;
        // With several brokers, the share-partitions of the partitions this one leads.
        let leads = |tp: &coordinator_core::TopicPartition| {
            owns(store_postgres::log::append_slot(
                tp.topic(),
                i64::from(tp.partition()),
            ))
        };
        let share = crate::share::ShareState::load(
            documents.clone(),
            config.group_share.max_partition_max_record_locks,
            fence.is_some().then_some(&leads as &dyn Fn(&_) -> bool),
        )
        .await?;
        let transactions = transactions(
            &config,
            &log,
            &coordinator,
            lease.as_ref(),
            timer_clock.unwrap_or_else(|| Arc::new(WallClock)),
        )
        .await?;
        let manual_timers = manual_clock.map(|clock| {
            info!(
                "--manual-clock: the coordinators' timers move only when a test advances the clock"
            );
            Arc::new(ManualTimers::new(
                clock,
                coordinator.clone(),
                transactions.txn.clone(),
            ))
        });
        if let Some(lease) = &lease {
            let ownership = lease.ownership();
            ownership.loaded(&ownership.loading());
        }
        let metrics = match (config.metrics_listen, metrics) {
            (Some(address), Some(metrics)) => {
                Some((metrics, MetricsListener::bind(address).await?))
            }
            _ => None,
        };
        let mut listeners = Vec::new();
        for spec in config.all_listeners() {
            let bind_failed = |source| BrokerError::Bind {
                address: spec.address,
                source,
            };
            let listener = TcpListener::bind(spec.address).await.map_err(bind_failed)?;
            let address = listener.local_addr().map_err(bind_failed)?;
            let protocol = spec.protocol;
            let client_auth = config.ssl_client_auth(protocol);
            let (host, port) = config.advertised(protocol, address);
            info!(
                protocol = protocol.name(),
                %address,
                advertised = %format_args!("{host}:{port}"),
                client_auth = client_auth.name(),
                "listener"
            );
            listeners.push(Bound {
                listener,
                endpoint: Arc::new(Endpoint {
                    protocol,
                    address,
                    host,
                    port: i32::from(port),
                }),
                authenticator: authenticator.clone().filter(|_| protocol.uses_sasl()),
                tls: tls_by_auth
                    .iter()
                    .find(|t| protocol.uses_tls() && t.client_auth == client_auth)
                    .cloned(),
                metrics: metrics.as_ref().map(|(m, _)| m.listener(protocol, address)),
            });
        }
        for open in config.unauthenticated_remote_listeners() {
            warn!(
                protocol = open.protocol.name(),
                address = %open.address,
                "--allow-plaintext-remote: anyone who reaches this address is served without \
                 authenticating (read, commit, delete groups)"
            );
        }
        if let Some(lease) = &lease {
            let published = listeners
                .iter()
                .map(|l| {
                    serde_json::json!({
                        "security_protocol": l.endpoint.protocol.name(),
                        "host": l.endpoint.host,
                        "port": l.endpoint.port,
                    })
                })
                .collect();
            lease.publish(serde_json::Value::Array(published)).await;
        }
        let endpoints = listeners.iter().map(|l| l.endpoint.clone()).collect();
        let authorizer = if config.authorizer {
            let a = crate::acl::Authorizer::open(
                documents.clone(),
                config.super_users.clone(),
                config.allow_everyone_if_no_acl_found,
            )
            .await?;
            info!(
                acls = a.acls().len(),
                super_users = %config.super_users.join(";"),
                allow_everyone_if_no_acl_found = config.allow_everyone_if_no_acl_found,
                "ACLs enforced"
            );
            Some(Arc::new(a))
        } else {
            None
        };
        let control = match config.control_listen {
            Some(address) => Some(crate::control::ControlListener::bind(address).await?),
            None => None,
        };
        let ownership = lease.as_ref().map(Lease::ownership);
        let context = Context::new(
            config,
            log,
            coordinator,
            transactions,
            endpoints,
            authorizer,
            authenticator,
        )
        .with_topic_configs(TopicConfigs::open(documents).await?)
        .with_group_configs(group_configs)
        .with_share(share)
        .with_scram_users(scram_users)
        .with_manual_timers(manual_timers);
        let context = Arc::new(match ownership {
            Some(ownership) => context.with_ownership(ownership),
            None => context,
        });
        Ok(Server {
            listeners,
            context,
            lease,
            control,
            metrics,
        })
    }

    /// The control port's address (with the port the OS picked for port 0), with
    /// `--control-listen`.
    pub fn control_addr(&self) -> Option<SocketAddr> {
        self.control
            .as_ref()
            .map(crate::control::ControlListener::local_addr)
    }

    /// The metrics listener's address, with `--metrics-listen`.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(|(_, l)| l.local_addr())
    }

    /// The broker's faults and its record of requests (see [`crate::faults`]).
    pub fn faults(&self) -> Arc<crate::faults::Faults> {
        self.context.faults.clone()
    }

    /// The address the first listener listens on (with the port the OS picked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listeners
            .first()
            .map_or(self.context.config.listen, |l| l.endpoint.address)
    }

    /// Every listener: its security protocol and the address it listens on, in the order
    /// of the configuration (the first is [`local_addr`](Self::local_addr)).
    pub fn local_addrs(&self) -> Vec<(SecurityProtocol, SocketAddr)> {
        self.listeners
            .iter()
            .map(|l| (l.endpoint.protocol, l.endpoint.address))
            .collect()
    }

    /// Serves until `shutdown` resolves, then stops: no new connections, every handler
    /// answers the request it is working on (a long-polling Fetch answers at once) and
    /// closes, the coordinator's timers stop. Committed offsets are durable when their
    /// commit was answered, so nothing is left to flush.
    pub async fn run(self, shutdown: impl Future) -> Result<(), BrokerError> {
        let node_id = self.context.config.node_id;
        let mut heartbeat = self.lease.map(|l| l.spawn(self.context.clone()));
        // The coordinators' timers: on the OS clock, or on the manual clock a test moves.
        let timers = match self.context.faults.manual_timers() {
            Some(manual) => Timers::Manual(manual.spawn()),
            None => Timers::Live(
                Driver::spawn(self.context.coordinator.clone()),
                TxnTimer::spawn(self.context.txn.clone()),
            ),
        };
        let interval = self.context.config.records.retention_check_interval_ms;
        let retention = Retention::spawn(self.context.clone(), Duration::from_millis(interval));
        let backoff = self.context.config.records.cleaner_backoff_ms;
        let cleaner = Cleaner::spawn(self.context.clone(), Duration::from_millis(backoff));
        let (notify_shutdown, _) = broadcast::channel(1);
        let (shutdown_complete_tx, mut shutdown_complete_rx) = mpsc::channel::<()>(1);
        if let Some(control) = self.control {
            let faults = self.context.faults.clone();
            tokio::spawn(control.serve(faults, notify_shutdown.subscribe()));
        }
        if let Some((metrics, listener)) = self.metrics {
            let coordinator = self.context.coordinator.clone();
            let log = self.context.log.clone();
            tokio::spawn(listener.serve(metrics, coordinator, log, notify_shutdown.subscribe()));
        }
        // One connection limit and one per-address count over every listener, as Kafka's
        // max.connections and max.connections.per.ip are broker-wide.
        // Kept to the end: `run` returns once every other holder of the context is gone.
        let context = self.context.clone();
        let shared = Arc::new(Shared {
            limit: Arc::new(Semaphore::new(self.context.config.max_connections)),
            per_ip: Arc::new(PerIp::default()),
            context: self.context,
            next_id: AtomicU64::new(0),
        });
        for bound in self.listeners {
            let mut listener = Listener {
                bound,
                shared: shared.clone(),
                shutdown: notify_shutdown.subscribe(),
                shutdown_complete_tx: shutdown_complete_tx.clone(),
            };
            // Each accept loop ends (and closes its socket) at the shutdown signal.
            tokio::spawn(async move { listener.accept_loop().await });
        }
        drop(shared);
        let deposed = async {
            match heartbeat.as_mut() {
                Some(h) => h.deposed().await,
                None => std::future::pending().await,
            }
        };
        let fenced = tokio::select! {
            _ = shutdown => None,
            reason = deposed => {
                error!(node_id, %reason, "deposed: another broker took over; stopping");
                Some(reason)
            }
        };
        info!("shutting down: no new connections");
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
        match timers {
            Timers::Manual(task) => task.shutdown().await,
            Timers::Live(driver, txn_timer) => {
                driver.shutdown().await;
                txn_timer.shutdown().await;
            }
        }
        drop(retention);
        drop(cleaner);
        if let Some(h) = heartbeat {
            h.release(fenced.is_some()).await;
        }
        released(context).await;
        if let Some(reason) = fenced {
            return Err(BrokerError::Fenced { node_id, reason });
        }
        info!("stopped");
        Ok(())
    }
}

/// The longest `run` waits, once stopped, for the tasks still holding the broker's state
/// (accept loops, the control and metrics listeners, a connection that just finished, the
/// aborted retention task) to let go of it.
const RELEASE_LIMIT: Duration = Duration::from_secs(5);

/// Waits (bounded by [`RELEASE_LIMIT`]) until `context` is the last handle on the broker's
/// state, then drops it: the log, its files and the data directory's lock are released when
/// `run` returns, so a broker started again at once on the same data directory finds it free.
async fn released(context: Arc<Context>) {
    let deadline = Instant::now() + RELEASE_LIMIT;
    while Arc::strong_count(&context) > 1 {
        if Instant::now() >= deadline {
            warn!(
                holders = Arc::strong_count(&context) - 1,
                "the broker's state is still held {}s after the stop; returning without it",
                RELEASE_LIMIT.as_secs()
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(context);
}

/// A connection accepted and not yet served: what its handler is built from.
struct Accepted {
    id: u64,
    peer: SocketAddr,
    socket: TcpStream,
    tls: Option<Tls>,
    authenticator: Option<Arc<Authenticator>>,
    endpoint: Arc<Endpoint>,
    metrics: Option<ListenerMetrics>,
    context: Arc<Context>,
    shutdown: Shutdown,
    shutdown_complete: mpsc::Sender<()>,
}

impl Accepted {
    /// The connection's handler, once its TLS handshake (if any) is done, and its count in
    /// the listener's open connections; `None` if the handshake failed (logged).
    async fn open(self: Box<Self>) -> Option<(Handler, Option<crate::metrics::OpenConnection>)> {
        let Accepted {
            id,
            peer,
            socket,
            tls,
            authenticator,
            endpoint,
            metrics,
            context,
            mut shutdown,
            shutdown_complete,
        } = *self;
        info!(connection = id, %peer, protocol = endpoint.protocol.name(), "connection opened");
        let open = metrics.as_ref().map(ListenerMetrics::opened);
        let stream = match tls {
            None => Stream::Tcp(socket),
            Some(tls) => match handshake(&tls, socket, &context, &mut shutdown).await {
                Ok(stream) => stream,
                Err(reason) => {
                    // Kafka: "Failed authentication with /IP (SSL handshake failed)"
                    warn!(connection = id, %peer, reason = %reason, "TLS handshake failed; closing the connection");
                    return None;
                }
            },
        };
        let principal = stream.peer_principal();
        let handler = Handler {
            id,
            peer,
            connection: Connection::new(
                stream,
                context.config.max_frame_bytes,
                context.frame_memory.clone(),
            ),
            context,
            shutdown,
            told_unsupported: false,
            session: Session::new(authenticator, peer, endpoint, principal),
            metrics,
            _shutdown_complete: shutdown_complete,
        };
        Some((handler, open))
    }
}

/// The TLS handshake of a new connection, bounded by the request timeout (a client that
/// opens a socket and sends nothing holds it no longer) and by the shutdown.
async fn handshake(
    tls: &Tls,
    socket: TcpStream,
    context: &Context,
    shutdown: &mut Shutdown,
) -> Result<Stream, String> {
    let limit = context.config.request_timeout_ms;
    tokio::select! {
        done = tokio::time::timeout(Duration::from_millis(limit), tls.acceptor.accept(socket)) => match done {
            Ok(Ok(stream)) => Ok(Stream::Tls(Box::new(stream))),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no TLS handshake within {limit} ms (request.timeout.ms)")),
        },
        () = shutdown.recv() => Err("broker shutting down".into()),
    }
}

/// The users and mechanisms of the SASL_PLAINTEXT and SASL_SSL listeners, read from
/// `--users` (the SCRAM credentials are derived here, off the async workers: 8192 PBKDF2
/// rounds per user).
/// PostgreSQL (`--postgres`) could not be used at start: where (never the password), and why.
pub(crate) fn postgres_unavailable(
    url: &crate::config::PostgresUrl,
    e: &dyn std::fmt::Display,
) -> BrokerError {
    BrokerError::Postgres {
        target: store_postgres::describe_target(url.as_str()),
        reason: e.to_string(),
    }
}

/// Where the ACLs, the topic configs and the SCRAM credentials changed at run time are kept:
/// PostgreSQL with `--postgres`, the data directory with `--data-dir`, else nowhere (memory).
/// With `lease`, the database's sessions are bounded by it (`Lease::bounded`): an update
/// holds the lock the other brokers' updates wait for.
async fn documents(
    config: &BrokerConfig,
    lease: Option<&Lease>,
) -> Result<Option<Documents>, BrokerError> {
    if let Some(url) = &config.postgres {
        let unavailable = |e: coordinator_core::StorageError| postgres_unavailable(url, &e);
        let db = match lease {
            Some(lease) => {
                let bounded = lease.bounded(url).map_err(unavailable)?;
                store_postgres::PostgresDocuments::connect_with(bounded, 2).await
            }
            None => store_postgres::PostgresDocuments::connect(url.as_str(), 2).await,
        }
        .map_err(unavailable)?;
        return Ok(Some(Documents::Postgres(Arc::new(db))));
    }
    Ok(config.data_dir.clone().map(Documents::Dir))
}

async fn authenticator(
    config: &BrokerConfig,
    documents: Option<Documents>,
) -> Result<(Option<Arc<Authenticator>>, Arc<Users>), BrokerError> {
    let sasl = config
        .all_listeners()
        .iter()
        .any(|l| l.protocol.uses_sasl());
    // credentials changed by AlterUserScramCredentials apply over the file
    let kept = match &documents {
        Some(d) => d
            .load(crate::auth::users::CREDENTIALS_FILE)
            .await
            .map_err(|reason| BrokerError::InvalidConfig {
                setting: "users",
                reason,
            })?,
        None => None,
    };
    let (true, Some(path)) = (sasl, config.users_file.clone()) else {
        // Kafka keeps SCRAM credentials whatever its listeners: without a SASL listener the
        // credential APIs still describe and alter them (for a listener added later).
        let users = match documents {
            Some(d) => Users::default().with_store(d, kept.as_deref())?,
            None => Users::default(),
        };
        return Ok((None, Arc::new(users)));
    };
    let users = tokio::task::spawn_blocking(move || match documents {
        Some(d) => Users::load(&path).and_then(|u| u.with_store(d, kept.as_deref())),
        None => Users::load(&path),
    })
    .await
    .map_err(|e| BrokerError::InvalidConfig {
        setting: "users",
        reason: format!("reading the users failed: {e}"),
    })??;
    let mechanisms = config.sasl_enabled_mechanisms.clone();
    let names: Vec<&str> = mechanisms.iter().map(|m| m.name()).collect();
    info!(users = users.len(), mechanisms = %names.join(","), "SASL authentication required");
    let users = Arc::new(users);
    Ok((
        Some(Arc::new(Authenticator {
            mechanisms,
            users: users.clone(),
        })),
        users,
    ))
}

/// The server-side assignor registered under `name` (one of
/// [`CONSUMER_ASSIGNORS`](crate::config::CONSUMER_ASSIGNORS), checked by the config).
/// `uniform` is the project's sticky assignor (balance first, then stickiness, over
/// homogeneous and heterogeneous subscriptions — what Kafka's `UniformAssignor` promises,
/// by another algorithm); `range` its range assignor.
fn consumer_assignor(name: &str) -> Arc<dyn coordinator_core::Assignor> {
    match name {
        "range" => coordinator_core::named("range", Arc::new(assignor::RangeAssignor)),
        _ => coordinator_core::named("uniform", Arc::new(assignor::StickyAssignor)),
    }
}

/// Open connections per peer address, for `max.connections.per.ip`. An address leaves the
/// map with its last connection, so the map holds at most one entry per open connection.
#[derive(Debug, Default)]
struct PerIp(std::sync::Mutex<std::collections::HashMap<IpAddr, usize>>);

/// One connection counted in [`PerIp`]; uncounted when dropped.
struct IpSlot {
    per_ip: Arc<PerIp>,
    ip: IpAddr,
}

impl PerIp {
    /// Counts a connection from `ip`, unless that address already has `max`.
    fn enter(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<IpSlot> {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = map.entry(ip).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(IpSlot {
            per_ip: self.clone(),
            ip,
        })
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut map = self
            .per_ip
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = map.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

/// What every accept loop shares.
struct Shared {
    limit: Arc<Semaphore>,
    per_ip: Arc<PerIp>,
    context: Arc<Context>,
    /// The last connection id given (ids are unique across listeners, for the logs).
    next_id: AtomicU64,
}

struct Listener {
    bound: Bound,
    shared: Arc<Shared>,
    /// The shutdown signal; each handler gets its own receiver of it.
    shutdown: broadcast::Receiver<()>,
    shutdown_complete_tx: mpsc::Sender<()>,
}

impl Listener {
    /// Accepts until the shutdown signal (then the socket closes with the loop).
    async fn accept_loop(&mut self) {
        let mut stop = Shutdown::new(self.shutdown.resubscribe());
        tokio::select! {
            () = self.accept_connections() => {}
            () = stop.recv() => {}
        }
    }

    async fn accept_connections(&mut self) {
        let context = self.shared.context.clone();
        loop {
            // Waits while max-connections are open; the semaphore is never closed.
            let Ok(permit) = self.shared.limit.clone().acquire_owned().await else {
                return;
            };
            let (socket, peer) = self.accept().await;
            let max_per_ip = context.config.max_connections_per_ip;
            let Some(slot) = self.shared.per_ip.enter(peer.ip(), max_per_ip) else {
                // Kafka's acceptor closes it at once ("Rejecting connection").
                warn!(%peer, max = max_per_ip, "too many connections from this address (max-connections-per-ip); closing the new one");
                drop(socket);
                continue;
            };
            // Kafka's acceptor sets TCP_NODELAY on every connection: a response written while
            // an earlier one is unacknowledged must not wait for the client's delayed ACK
            // (Nagle's algorithm), which costs a pipelining client ~40 ms per round.
            if let Err(e) = socket.set_nodelay(true) {
                debug!(%peer, error = %e, "cannot set TCP_NODELAY");
            }
            let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed) + 1;
            // Boxed, and consumed once the handler is built: the task's state keeps only
            // what lives as long as the connection (measured in BENCHMARKS.md, 2026-12-07).
            let accepted = Box::new(Accepted {
                id,
                peer,
                socket,
                tls: self.bound.tls.clone(),
                authenticator: self.bound.authenticator.clone(),
                endpoint: self.bound.endpoint.clone(),
                metrics: self.bound.metrics.clone(),
                context: context.clone(),
                shutdown: Shutdown::new(self.shutdown.resubscribe()),
                shutdown_complete: self.shutdown_complete_tx.clone(),
            });
            tokio::spawn(async move {
                // Boxed: the handshake's future (rustls mid-handshake) would otherwise sit
                // inline in every connection's task, plaintext ones included, for the
                // connection's whole life.
                let Some((mut handler, open)) = Box::pin(accepted.open()).await else {
                    return;
                };
                let reason = handler.run().await;
                // Boxed: awaited inline, its state machine made every connection's task
                // ~1.5 KiB larger for its whole life (BENCHMARKS.md, 2026-12-07).
                Box::pin(crate::api::close_share_sessions(
                    &handler.context,
                    &handler.session,
                ))
                .await;
                let principal = handler.session.principal().unwrap_or_default();
                info!(connection = handler.id, peer = %handler.peer, principal, reason = %reason, "connection closed");
                drop(open);
                drop(slot);
                drop(permit);
            });
        }
    }

    /// Accepts the next connection. A failed accept (most often: out of file descriptors)
    /// never stops the broker, as Kafka's acceptor never does: it keeps serving its
    /// connections and retries with a back-off from 10 ms up to 1 s, so it accepts again
    /// within a second of descriptors freeing up. One warning per streak of failures.
    async fn accept(&mut self) -> (TcpStream, SocketAddr) {
        let mut backoff = Duration::from_millis(10);
        let mut failures = 0u64;
        loop {
            match self.bound.listener.accept().await {
                Ok(accepted) => {
                    if failures > 0 {
                        info!(failures, "accepting connections again");
                    }
                    return accepted;
                }
                Err(e) => {
                    if failures == 0 {
                        warn!(error = %e, "accept failed; serving the open connections and retrying");
                    }
                    failures += 1;
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
    }
}

struct Handler {
    id: u64,
    peer: SocketAddr,
    context: Arc<Context>,
    connection: Connection,
    shutdown: Shutdown,
    /// Whether this connection was already logged for a version the broker does not serve
    /// (one warning per connection, not per attempt).
    told_unsupported: bool,
    /// The connection's authentication and principal.
    session: Session,
    /// With `--metrics-listen`: what the requests are recorded into.
    metrics: Option<ListenerMetrics>,
    /// Dropped when the handler ends; the server waits for every one.
    _shutdown_complete: mpsc::Sender<()>,
}

impl Handler {
    /// The next frame, or why the connection ends without one: the broker stops, the
    /// connection started no request within `connections.max.idle.ms`, or a frame did not
    /// complete within the request timeout. A connection whose next frame waits for the
    /// pool's memory (`--queued-max-request-bytes`) has neither deadline: it waits as long
    /// as the pool is exhausted, and its frame's request timeout starts once it has memory.
    async fn next_frame(&mut self) -> Result<Result<Option<Frame>, FrameError>, String> {
        let config = &self.context.config;
        let idle = Duration::from_millis(config.connections_max_idle_ms);
        let slow = Duration::from_millis(config.request_timeout_ms);
        let idle_since = Instant::now();
        loop {
            // Between frames, wake at least every request timeout: a frame that starts
            // arriving meanwhile is then held to its own deadline.
            let deadline = match self.connection.phase() {
                ReadPhase::Reading(started) => Some(started + slow),
                ReadPhase::WaitingForMemory => None,
                ReadPhase::Idle => Some((idle_since + idle).min(Instant::now() + slow)),
            };
            tokio::select! {
                frame = self.connection.read_frame() => return Ok(frame),
                _ = self.shutdown.recv() => return Err("broker shutting down".into()),
                _ = sleep_until_some(deadline) => {}
            }
            // The deadline passed, or a frame started arriving meanwhile (the next loop
            // then waits for the frame's own deadline; the read keeps its bytes and its
            // place in the pool's queue).
            let now = Instant::now();
            match self.connection.phase() {
                ReadPhase::Reading(started) if now >= started + slow => {
                    warn!(connection = self.id, peer = %self.peer, timeout_ms = config.request_timeout_ms, "a request did not arrive within the request timeout; closing the connection");
                    return Err(format!(
                        "a request took more than {} ms to arrive",
                        config.request_timeout_ms
                    ));
                }
                ReadPhase::Idle if now >= idle_since + idle => {
                    return Err(format!(
                        "idle for {} ms (connections.max.idle.ms)",
                        config.connections_max_idle_ms
                    ));
                }
                _ => {}
            }
        }
    }

    /// Serves requests until the peer leaves, a request is refused, or the broker stops.
    /// Returns why the connection ended, for the log line.
    async fn run(&mut self) -> String {
        while !self.shutdown.is_shutdown() {
            // Before authentication a frame is at most Kafka's sasl.server.max.receive.size.
            let max_frame = self.context.config.max_frame_bytes;
            self.connection
                .set_max_frame(if self.session.is_authenticated() {
                    max_frame
                } else {
                    max_frame.min(SASL_MAX_RECEIVE_SIZE)
                });
            let frame = match self.next_frame().await {
                Ok(frame) => frame,
                Err(reason) => return reason,
            };
            let frame = match frame {
                Ok(Some(frame)) => frame,
                Ok(None) => return "closed by the client".into(),
                Err(e) => {
                    warn!(connection = self.id, peer = %self.peer, error = %e, "bad frame; closing the connection");
                    return format!("bad frame: {e}");
                }
            };
            // Boxed: serving a request holds its header, the decoded request and what is
            // recorded of it across awaits; inline, that state would sit in every
            // connection's task while it waits for its next frame (BENCHMARKS.md, 2026-12-07).
            if let Some(reason) = Box::pin(self.serve(frame)).await {
                return reason;
            }
        }
        "broker shutting down".into()
    }

    /// Serves one request frame: answers it (or not, as the request or a fault says) and
    /// records it; returns why the connection closes, if it does.
    async fn serve(&mut self, frame: Frame) -> Option<String> {
        // The frame's share of the pool goes back once its request is handled (below), or
        // when the connection ends.
        let Frame {
            bytes: frame,
            memory,
        } = frame;
        // Metrics: the frame's bytes, and the time its answer takes (see `answered`).
        let timing = self.metrics.as_ref().map(|m| m.read(frame.len()));
        // What the metrics count the answer under: API, version, error code.
        let answered: Option<(kafka_protocol::messages::ApiKey, i16, Option<i16>)>;
        if self.session.expects_raw_token() {
            // After a v0 SaslHandshake: a bare token, answered by a bare token; a failure
            // closes the connection without an answer (Kafka's v0 behaviour).
            match self.session.authenticate(&frame) {
                Ok(token) => {
                    if let Err(e) = self.connection.write_frame(&raw_frame(&token)).await {
                        return Some(format!("write failed: {e}"));
                    }
                    return None;
                }
                Err(_) => return Some(self.close_after_failed_authentication().await),
            }
        }
        let response = match codec::parse_request(frame) {
            Incoming::Request {
                header,
                key,
                request,
            } => {
                if let Some(reason) = self.refused_before_authentication(key) {
                    return Some(reason);
                }
                let span = tracing::debug_span!(
                    "request",
                    connection = self.id,
                    api = ?key,
                    version = header.request_api_version,
                    correlation_id = header.correlation_id,
                    client_id = header.client_id.as_deref().unwrap_or(""),
                );
                let started = Instant::now();
                let version = header.request_api_version;
                let client_id = header.client_id.as_deref().unwrap_or("");
                let mut seen = SeenRequest::new(
                    self.id,
                    key,
                    version,
                    client_id,
                    crate::faults::group_of(request.request(), version),
                    Outcome::Answered,
                    None,
                );
                // Faults (crate::faults): here, after the request is decoded and its
                // connection authenticated, before its handler.
                let faults = self.context.faults.clone();
                let verdict = faults.on_request(key, client_id, seen.group_id.as_deref());
                if let Some(delay) = verdict.delay {
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = self.shutdown.recv() => {}
                    }
                }
                match verdict.action {
                    Some(Instead::Drop) => {
                        seen.outcome = Outcome::Dropped;
                        faults.record(seen);
                        info!(connection = self.id, api = ?key, client_id, "a drop fault closes the connection instead of answering");
                        return Some(format!("{key:?} dropped by a fault"));
                    }
                    Some(Instead::Fail(code)) => {
                        answered = Some((key, version, Some(code)));
                        seen.outcome = Outcome::Failed;
                        seen.error_code = Some(code);
                        faults.record(seen);
                        debug!(connection = self.id, api = ?key, client_id, code, "answered with a fault's error");
                        match request.error_answer(version, header.correlation_id, code) {
                            Ok(frame) => Some(frame),
                            Err(e) => {
                                error!(connection = self.id, api = ?key, error = %e, "cannot answer with the fault's error; closing the connection");
                                return Some(format!("internal error: {e}"));
                            }
                        }
                    }
                    None => {
                        // The answer is boxed (see `registry::Answer`): an idle
                        // connection's task does not carry the largest handler's future.
                        let answer = request
                            .answer(
                                &self.context,
                                &mut self.shutdown,
                                self.peer,
                                &header,
                                &self.session,
                            )
                            .instrument(span.clone())
                            .await;
                        span.in_scope(|| {
                            debug!(
                                latency_us = started.elapsed().as_micros() as u64,
                                "answered"
                            )
                        });
                        match answer {
                            Ok(answer) => {
                                answered = Some((key, version, answer.metric_code));
                                seen.error_code = answer.error_code;
                                if answer.frame.is_none() {
                                    seen.outcome = Outcome::NoAnswer;
                                }
                                faults.record(seen);
                                answer.frame
                            }
                            Err(e) => {
                                seen.outcome = Outcome::Error;
                                faults.record(seen);
                                error!(connection = self.id, api = ?key, error = %e, "cannot answer; closing the connection");
                                return Some(format!("internal error: {e}"));
                            }
                        }
                    }
                }
            }
            Incoming::UnsupportedVersion { header, entry } => {
                let (key, version) = (entry.key, header.request_api_version);
                if let Some(reason) = self.refused_before_authentication(key) {
                    return Some(reason);
                }
                let answer = entry.unsupported_version(version, header.correlation_id);
                answered = Some((
                    key,
                    version,
                    answer
                        .is_some()
                        .then_some(crate::api::codes::UNSUPPORTED_VERSION),
                ));
                let client_id = header.client_id.as_deref().unwrap_or("");
                self.context.faults.record(SeenRequest::new(
                    self.id,
                    key,
                    version,
                    client_id,
                    None,
                    Outcome::UnsupportedVersion,
                    answer
                        .is_some()
                        .then_some(crate::api::codes::UNSUPPORTED_VERSION),
                ));
                let (min, max) = (entry.decodable_min, *entry.versions.end());
                if !std::mem::replace(&mut self.told_unsupported, true) {
                    // Old clients are told, not dropped silently: one line per connection
                    // naming the client, the API and the versions served (Kafka 4 dropped
                    // the oldest versions, KIP-896; see the README).
                    warn!(connection = self.id, peer = %self.peer, client_id, api = ?key, version, served = %format!("{min}..={max}"), answered = answer.is_some(), "a request of a version this broker does not serve");
                } else {
                    debug!(connection = self.id, client_id, api = ?key, version, "unsupported version");
                }
                match answer {
                    Some(frame) => Some(frame),
                    None => return Some(format!("{key:?} v{version} is not supported")),
                }
            }
            Incoming::Reject { reason } => {
                warn!(connection = self.id, peer = %self.peer, %reason, "bad request; closing the connection");
                return Some(format!("bad request: {reason}"));
            }
        };
        // Handled: its frame's memory goes back to the pool before the answer is written
        // (Kafka releases a request's buffer when its handler is done).
        drop(memory);
        let written = response.as_ref().map_or(0, |frame| frame.len());
        if let Some(frame) = response {
            if let Err(e) = self.connection.write_frame(&frame).await {
                return Some(format!("write failed: {e}"));
            }
        }
        if let (Some(m), Some(timing), Some((key, version, code))) =
            (&self.metrics, timing, answered)
        {
            m.answered(timing, key, version, code, written);
        }
        if self.session.has_failed() {
            return Some(self.close_after_failed_authentication().await);
        }
        None
    }

    /// Why the connection closes if `key` is not answered yet: before authentication only
    /// ApiVersions, SaslHandshake and SaslAuthenticate are (Kafka closes the connection on
    /// anything else, without an answer).
    fn refused_before_authentication(
        &self,
        key: kafka_protocol::messages::ApiKey,
    ) -> Option<String> {
        if self.session.is_authenticated() || allowed_before_authentication(key) {
            return None;
        }
        warn!(connection = self.id, peer = %self.peer, api = ?key, "a request before SASL authentication; closing the connection");
        Some(format!("{key:?} before authentication"))
    }

    /// Waits Kafka's `connection.failed.authentication.delay.ms` (so the client reads its
    /// error before the close, and a password guesser is slowed), then closes.
    async fn close_after_failed_authentication(&mut self) -> String {
        let delay = self
            .context
            .config
            .connection_failed_authentication_delay_ms;
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(delay)) => {}
            _ = self.shutdown.recv() => {}
        }
        "authentication failed".into()
    }
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

/// Kafka's `sasl.server.max.receive.size` default: the largest frame a connection may send
/// before it has authenticated; a larger one closes it (a client that has not logged in cannot
/// make the broker buffer `--max-frame-bytes`).
const SASL_MAX_RECEIVE_SIZE: usize = 524_288;

/// A bare SASL token as a frame: `[length][token]` (after a v0 SaslHandshake).
fn raw_frame(token: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(4 + token.len());
    frame.extend_from_slice(&u32::try_from(token.len()).unwrap_or(u32::MAX).to_be_bytes());
    frame.extend_from_slice(token);
    frame
}

/// The transaction coordinator over the group coordinator's store, with the marker writer
/// over the log and the broker's producer-id allocator; loaded from the store (a restart
/// with `--data-dir` finishes or aborts what was in flight).
async fn transactions(
    config: &BrokerConfig,
    log: &Arc<dyn PartitionLog>,
    coordinator: &Arc<Coordinator>,
    lease: Option<&Lease>,
    clock: Arc<dyn Clock>,
) -> Result<Transactions, BrokerError> {
    let producers = Arc::new(Producers::default());
    // With several brokers, each process hands out ids from its own block.
    let producer_ids = Arc::new(match lease {
        Some(l) => ProducerIds::starting_at(ProducerIds::cluster_block(l.fence().incarnation())),
        None => ProducerIds::new(),
    });
    // With several brokers, markers for what others lead go to them (WriteTxnMarkers).
    let ownership = lease.map_or_else(
        || Arc::new(crate::ownership::Ownership::alone(config.node_id)),
        Lease::ownership,
    );
    let markers = Arc::new(LogMarkers::new(log.clone(), producers.clone(), ownership));
    let txn = TransactionCoordinator::builder(coordinator.clone(), markers, producer_ids.clone())
        .clock(clock)
        .transaction_max_timeout_ms(config.transaction_max_timeout_ms)
        .abort_timed_out_cleanup_interval_ms(config.transaction_abort_timed_out_cleanup_interval_ms)
        .transactional_id_expiration_ms(config.transactional_id_expiration_ms)
        .build()?;
    let loaded = match lease {
        Some(l) => {
            let fence = l.fence();
            txn.load_where(|id| {
                fence
                    .epoch(store_postgres::cluster::transaction_slot(id))
                    .is_some()
            })
            .await?
        }
        None => txn.load().await?,
    };
    if loaded > 0 {
        info!(transactional_ids = loaded, "transactional ids loaded");
    }
    if lease.is_none() {
        // A broker alone: past every id a transaction holds (a cluster's block is above
        // them, and another broker's ids are in its own block).
        for t in txn.list(&[], &[], -1).await.0 {
            producer_ids.skip_past(t.producer_id);
        }
    }
    Ok(Transactions {
        producers,
        producer_ids,
        txn: Arc::new(txn),
    })
}

/// The coordinators' timer tasks while the broker runs.
enum Timers {
    /// On the OS clock: the group coordinator's driver and the transaction timer.
    Live(Driver, TxnTimer),
    /// On the manual clock (`--manual-clock`): only work due at its current time runs by
    /// itself; the rest when a test advances it.
    Manual(crate::manual_clock::ManualTimersTask),
}

/// The transaction coordinator's timer task: sleeps until its next run (at most
/// [`TXN_TIMER_MAX_SLEEP`]) and runs `handle_timeout`, until shut down.
struct TxnTimer {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// The longest the transaction timer sleeps without looking at the clock again.
const TXN_TIMER_MAX_SLEEP: Duration = Duration::from_secs(1);

impl TxnTimer {
    fn spawn(txn: Arc<TransactionCoordinator>) -> TxnTimer {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            loop {
                let due = txn.poll_timeout();
                let now = WallClock.now_ms();
                let wait = Duration::from_millis(due.saturating_sub(now)).min(TXN_TIMER_MAX_SLEEP);
                tokio::select! {
                    _ = stopped.changed() => return,
                    () = tokio::time::sleep(wait) => {}
                }
                txn.handle_timeout().await;
            }
        });
        TxnTimer { stop, task }
    }

    async fn shutdown(self) {
        let _ = self.stop.send(true);
        if let Err(e) = self.task.await {
            warn!(error = %e, "the transaction timer task failed");
        }
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
