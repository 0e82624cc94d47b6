//! The broker binary: parses flags, sets up logging, serves until SIGINT or SIGTERM.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context as _;
use broker::{
    AdvertisedListener, BrokerConfig, ListenerClientAuth, ListenerSpec, OffsetsStore, PostgresUrl,
    RecordsConfig, SaslMechanism, Server, TopicSpec,
};
use clap::Parser;
use coordinator_core::MigrationPolicy;

/// A Kafka-protocol broker for development and tests: produce, fetch, consumer groups and
/// committed offsets over the coordinator core.
///
/// Without --data-dir everything lives in memory and is lost at exit. With it, committed
/// offsets and group records survive in DATA_DIR/groups/ (the group log; or, with
/// --offsets-store json, offsets alone in DATA_DIR/offsets.json) and topics and records in
/// DATA_DIR/records/. Once accepting, prints `listening on HOST:PORT` to stdout (the first
/// listener; each further one follows as `listening on PROTOCOL://HOST:PORT`); logs go
/// to stderr, filtered by RUST_LOG (default `info`). SIGINT or SIGTERM stops it gracefully
/// (exit 0).
#[derive(Debug, Parser)]
#[command(name = "broker", version)]
struct Args {
    /// Where to listen, PROTOCOL://HOST:PORT or HOST:PORT (PLAINTEXT); PROTOCOL is
    /// PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (Kafka's listeners). Repeat it, or separate
    /// listeners with commas, for several. Port 0 lets the OS pick one. A listener on an
    /// address that is not loopback must authenticate its clients (SASL, or SSL with
    /// --ssl-client-ca) unless --allow-plaintext-remote is given.
    #[arg(long, default_value = "127.0.0.1:9092", env = "BROKER_LISTEN", value_name = "[PROTOCOL://]HOST:PORT", value_delimiter = ',', value_parser = parse_listener)]
    listen: Vec<ListenerSpec>,
    /// Serve clients that do not authenticate on a listener that is not on loopback
    /// (PLAINTEXT, or SSL without --ssl-client-ca): anyone who reaches the address may then
    /// read, commit and delete groups. Logged as a warning at start.
    #[arg(long)]
    allow_plaintext_remote: bool,
    /// Serve the control port on HOST:PORT (off by default): a JSON-lines protocol over TCP,
    /// one object per line in and out, to fail the next N requests of an API with a Kafka
    /// error code ({"op":"fail","api":"Heartbeat","error":27,"count":2,"client_id":"c1"}),
    /// delay an API ({"op":"latency","api":"Fetch","ms":200}), close the connection instead
    /// of answering ({"op":"drop","api":"OffsetCommit","count":1}), remove every fault
    /// ({"op":"clear"}) and read the requests the broker received ({"op":"requests",
    /// "since":0}); see the README's "Faults and the control port". It has no
    /// authentication: an address that is not loopback is refused unless
    /// --allow-plaintext-remote. Once bound, prints `control on HOST:PORT` to stdout after
    /// the `listening on` lines.
    #[arg(long, value_name = "HOST:PORT")]
    control_listen: Option<std::net::SocketAddr>,
    /// Serve `GET /metrics` on HOST:PORT (off by default): the broker's metrics in the
    /// Prometheus text format, under Kafka's names (requests, errors and latency per API,
    /// connections open and bytes per listener, groups by protocol and state, lag), and at
    /// `/` a page of the groups for a browser (members, lag, each group's timeline); see the
    /// README's "Metrics". It has no authentication: an address that is not loopback is
    /// refused unless --allow-plaintext-remote. Once bound, prints `metrics on HOST:PORT`
    /// to stdout after the `listening on` and `control on` lines.
    #[arg(long, value_name = "HOST:PORT")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// The most (group, partition) pairs whose committed offset, log end offset and lag a
    /// scrape of /metrics shows (kafka-exporter's kafka_consumergroup_current_offset and
    /// kafka_consumergroup_lag, and kafka_topic_partition_current_offset); past it the rest
    /// are left out and consumer_groups_lag_series_omitted counts them. 0 shows none; at most
    /// 1000000.
    #[arg(long, default_value_t = broker::DEFAULT_METRICS_MAX_LAG_SERIES, value_name = "N")]
    metrics_max_lag_series: usize,
    /// How many of the last requests the broker remembers for the control port's
    /// `requests` (API, version, client id, group, error code); 0 remembers none.
    #[arg(long, default_value_t = broker::faults::DEFAULT_REQUESTS_RECORDED, value_name = "K")]
    requests_recorded: usize,
    /// Run the group and transaction coordinators' timers (session expiries, rebalance and
    /// join timeouts, the initial rebalance delay, offsets retention, transaction timeouts)
    /// on a clock that moves only when a test advances it: the control port's
    /// {"op":"advance_clock","ms":N} moves it and runs what is due before answering. It
    /// starts at the wall-clock time of the start; record timestamps, retention of records
    /// and connection timeouts keep real time. For tests of consumers only.
    #[arg(long)]
    manual_clock: bool,
    /// Enforce ACLs (Kafka's authorizer.class.name=StandardAuthorizer): every request is
    /// checked against them; CreateAcls, DescribeAcls and DeleteAcls manage them, and
    /// DATA_DIR/acls.json keeps them (in memory without --data-dir).
    #[arg(long)]
    authorizer: bool,
    /// Kafka's super.users: principals the ACLs do not restrict, separated by `;`
    /// (User:admin;User:ops). Needs --authorizer.
    #[arg(long, value_name = "PRINCIPALS", value_delimiter = ';')]
    super_users: Vec<String>,
    /// Kafka's allow.everyone.if.no.acl.found: a resource that no ACL names is open to
    /// everyone (default: refused). Needs --authorizer.
    #[arg(long)]
    allow_everyone_if_no_acl_found: bool,
    /// The certificate chain (PEM, the server's certificate first) of SSL and SASL_SSL
    /// listeners. Kafka's ssl.keystore.location, in PEM.
    #[arg(long, value_name = "PEM")]
    ssl_certificate: Option<PathBuf>,
    /// The private key (PEM: PKCS#8, PKCS#1 or SEC1) of --ssl-certificate.
    #[arg(long, value_name = "PEM")]
    ssl_key: Option<PathBuf>,
    /// The authorities (PEM) client certificates must chain to: SSL listeners then require a
    /// client certificate (Kafka's ssl.client.auth=required) unless
    /// --listener-ssl-client-auth says otherwise, and an SSL connection's principal is its
    /// subject, User:CN=... (Kafka's default principal builder). SASL_SSL listeners ask for
    /// one only when --listener-ssl-client-auth names them (their clients authenticate with
    /// SASL).
    #[arg(long, value_name = "PEM")]
    ssl_client_ca: Option<PathBuf>,
    /// Client authentication on one TLS listener, NAME=required|requested|none, NAME being
    /// the listener's (SSL or SASL_SSL): Kafka's listener.name.NAME.ssl.client.auth. requested
    /// checks a certificate when one is presented and lets a client in without one. Repeat
    /// it, or separate the settings with commas.
    #[arg(long, value_name = "NAME=MODE", value_delimiter = ',', value_parser = parse_client_auth)]
    listener_ssl_client_auth: Vec<ListenerClientAuth>,
    /// What the clients of a listener are told to connect to, NAME://HOST:PORT (Kafka's
    /// advertised.listeners), e.g. SSL://localhost:9093 when the server certificate names
    /// localhost (clients check the certificate against the host they are told). Repeat it,
    /// or separate listeners with commas. A listener not named advertises the address it is
    /// bound to.
    #[arg(long, value_name = "NAME://HOST:PORT", value_delimiter = ',', value_parser = parse_advertised)]
    advertised_listeners: Vec<AdvertisedListener>,
    /// Kafka's sasl.enabled.mechanisms on SASL_PLAINTEXT and SASL_SSL listeners: any of PLAIN,
    /// SCRAM-SHA-256, SCRAM-SHA-512 (GSSAPI, Kafka's default, needs Kerberos and is not served).
    #[arg(long, value_delimiter = ',', default_value = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", value_parser = parse_mechanism)]
    sasl_enabled_mechanisms: Vec<SaslMechanism>,
    /// The SASL users, `name:password` lines (blank lines and `#` comments skipped); the
    /// file must be readable by its owner only (chmod 600). Needed by SASL_PLAINTEXT and
    /// SASL_SSL.
    #[arg(long, value_name = "FILE", env = "BROKER_USERS")]
    users: Option<PathBuf>,
    /// Kafka's connection.failed.authentication.delay.ms: a connection whose authentication
    /// failed is closed this long after its SASL_AUTHENTICATION_FAILED answer.
    #[arg(long, default_value_t = 100)]
    connection_failed_authentication_delay_ms: u64,
    /// Keep the whole state — topics, records, offsets, group records, transactions, ACLs,
    /// SCRAM credentials — in this PostgreSQL database and nothing on local disk
    /// (postgres://USER:PASSWORD@HOST:PORT/DATABASE, or libpq's key=value form; the schema is
    /// created or migrated at start). Another broker process started on the same database
    /// carries on where this one stopped. Not with --data-dir.
    #[arg(long, value_name = "URL", env = "BROKER_POSTGRES", value_parser = parse_postgres, hide_env_values = true)]
    postgres: Option<PostgresUrl>,
    /// The most connections to PostgreSQL of the offset store, and as many again of the log.
    #[arg(long, default_value_t = 16, value_name = "N")]
    postgres_pool_size: usize,
    /// This broker's id (Kafka's node.id) in Metadata, DescribeCluster and FindCoordinator.
    /// With --postgres it is registered in the database under a lease: a second process with
    /// the same id waits until the first stops or its lease runs out.
    #[arg(long, default_value_t = 0, value_name = "ID", value_parser = clap::value_parser!(i32).range(0..))]
    node_id: i32,
    /// With --postgres: how long this broker's registration and coordinator slots outlive its
    /// last heartbeat (Kafka's broker.session.timeout.ms); another broker over the same
    /// database takes them over after that.
    #[arg(long, default_value_t = 9000, value_name = "MS")]
    broker_session_timeout_ms: u64,
    /// With --postgres: how often this broker extends its lease (Kafka's
    /// broker.heartbeat.interval.ms); below --broker-session-timeout-ms.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    broker_heartbeat_interval_ms: u64,
    /// Directory for committed offsets and group records (DATA_DIR/groups/, the group log;
    /// an older broker's DATA_DIR/offsets.json is imported at the first start and kept as
    /// offsets.json.imported) and the partitions' records (DATA_DIR/records/); without it
    /// everything lives in memory. Only one broker may use a directory at a time.
    #[arg(long, env = "BROKER_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Where the data directory keeps offsets: `log` (DATA_DIR/groups/: offsets with their
    /// metadata and group records; a commit costs its own bytes) or `json` (one readable
    /// DATA_DIR/offsets.json holding offsets only, rewritten whole on every batch; refused on
    /// a directory that holds a group log).
    #[arg(long, value_enum, default_value_t = StoreKind::Log)]
    offsets_store: StoreKind,
    /// Kafka's log.flush.interval.ms for the group log: acknowledge a commit once written to
    /// the OS and fdatasync at most N ms later (survives a crash of the process; a power
    /// loss may lose the last N ms). Without it every batch is synced before it is
    /// acknowledged. Needs --data-dir and the log store.
    #[arg(long, value_name = "N")]
    offsets_flush_interval_ms: Option<u64>,
    /// A topic to create at start, NAME:PARTITIONS; repeat for more.
    #[arg(long = "topic", value_name = "NAME:PARTITIONS", value_parser = parse_topic)]
    topics: Vec<TopicSpec>,
    /// Create a topic when a client asks for metadata of a missing one (Kafka's
    /// auto.create.topics.enable).
    #[arg(long)]
    auto_create_topics: bool,
    /// Partitions of auto-created topics (Kafka's num.partitions).
    #[arg(long, default_value_t = 1)]
    num_partitions: u32,
    /// Kafka's group.initial.rebalance.delay.ms.
    #[arg(long, default_value_t = 3000)]
    group_initial_rebalance_delay_ms: u64,
    /// Kafka's group.min.session.timeout.ms.
    #[arg(long, default_value_t = 6000)]
    group_min_session_timeout_ms: u64,
    /// Kafka's group.max.session.timeout.ms.
    #[arg(long, default_value_t = 1_800_000)]
    group_max_session_timeout_ms: u64,
    /// Kafka's group.max.size.
    #[arg(long, default_value_t = i32::MAX as u32)]
    group_max_size: u32,
    /// Kafka's transaction.max.timeout.ms: the longest transaction.timeout.ms a producer may
    /// ask for (INVALID_TRANSACTION_TIMEOUT above).
    #[arg(long, default_value_t = 900_000)]
    transaction_max_timeout_ms: u64,
    /// Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms: how often
    /// timed-out transactions are aborted (their producers fenced).
    #[arg(long, default_value_t = 10_000)]
    transaction_abort_timed_out_transaction_cleanup_interval_ms: u64,
    /// Kafka's transactional.id.expiration.ms: an idle transactional id is forgotten after it.
    #[arg(long, default_value_t = 604_800_000)]
    transactional_id_expiration_ms: u64,
    /// Kafka's offsets.retention.minutes.
    #[arg(long, default_value_t = 10_080)]
    offsets_retention_minutes: u64,
    /// The largest request frame accepted, in bytes (Kafka's socket.request.max.bytes); a
    /// larger one closes its connection.
    #[arg(long, default_value_t = 100 * 1024 * 1024)]
    max_frame_bytes: usize,
    /// Kafka's queued.max.request.bytes: the most bytes of request frames held at once, all
    /// connections together. A frame takes its announced length once its length prefix is
    /// read and gives it back when its request is handled; while none is left the broker
    /// reads no new request (no connection is closed for it) until memory comes back. As in
    /// Kafka a frame is let in while any memory is left, so up to this plus one frame may be
    /// held. -1: unbounded (Kafka's default); else at least --max-frame-bytes.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    queued_max_request_bytes: i64,
    /// The most connections served at once; further clients wait to be accepted. Default:
    /// what the open-file limit allows (its soft limit less 128).
    #[arg(long, default_value_t = broker::default_max_connections())]
    max_connections: usize,
    /// Kafka's max.connections.per.ip: a connection from an address that already has this
    /// many is closed at once. Default: unlimited.
    #[arg(long)]
    max_connections_per_ip: Option<usize>,
    /// Kafka's offsets.retention.check.interval.ms: an Empty group without committed offsets
    /// is removed this long after it became Empty.
    #[arg(long, default_value_t = 600_000)]
    offsets_retention_check_interval_ms: u64,
    /// Kafka's connections.max.idle.ms: a connection that starts no request for this long is
    /// closed.
    #[arg(long, default_value_t = 600_000)]
    connections_max_idle_ms: u64,
    /// How long a request frame may take to arrive once its first byte did; a slower one
    /// closes its connection.
    #[arg(long, default_value_t = 30_000)]
    request_timeout_ms: u64,
    /// Kafka's group.consumer.assignors: the server-side assignors of consumer-protocol
    /// groups (group.protocol=consumer), the default first.
    #[arg(long, value_delimiter = ',', default_value = "uniform,range")]
    group_consumer_assignors: Vec<String>,
    /// Kafka's group.consumer.session.timeout.ms.
    #[arg(long, default_value_t = 45_000)]
    group_consumer_session_timeout_ms: u64,
    /// Kafka's group.consumer.heartbeat.interval.ms: how often consumer-protocol members
    /// heartbeat.
    #[arg(long, default_value_t = 5_000)]
    group_consumer_heartbeat_interval_ms: u64,
    /// Kafka's group.consumer.max.size.
    #[arg(long, default_value_t = i32::MAX as u32)]
    group_consumer_max_size: u32,
    /// Kafka's group.share.session.timeout.ms: a share group member whose last heartbeat is
    /// this old is removed (the bounds of a group's share.session.timeout.ms, Kafka's 45000 to
    /// 60000, widen to take it).
    #[arg(long, default_value_t = 45_000)]
    group_share_session_timeout_ms: u64,
    /// Kafka's group.share.heartbeat.interval.ms (its bounds, 5000 to 15000, widen to take it).
    #[arg(long, default_value_t = 5_000)]
    group_share_heartbeat_interval_ms: u64,
    /// Kafka's group.share.max.size: the most members of one share group.
    #[arg(long, default_value_t = 200)]
    group_share_max_size: u32,
    /// Kafka's group.share.record.lock.duration.ms: how long a share consumer's acquired
    /// records are its own.
    #[arg(long, default_value_t = 30_000)]
    group_share_record_lock_duration_ms: u64,
    /// Kafka's group.share.min.record.lock.duration.ms: the least a group's
    /// share.record.lock.duration.ms may be.
    #[arg(long, default_value_t = 15_000)]
    group_share_min_record_lock_duration_ms: u64,
    /// Kafka's group.share.max.record.lock.duration.ms: the most a group's
    /// share.record.lock.duration.ms may be.
    #[arg(long, default_value_t = 60_000)]
    group_share_max_record_lock_duration_ms: u64,
    /// Kafka's group.share.delivery.count.limit: a record delivered this many times is
    /// archived instead of delivered again (a group's share.delivery.count.limit may be 2 to 10,
    /// widened to take this).
    #[arg(long, default_value_t = 5)]
    group_share_delivery_count_limit: u64,
    /// Kafka's group.share.partition.max.record.locks: the most records of one
    /// share-partition in flight (a group's own may be 100 to 10000, widened to take this).
    #[arg(long, default_value_t = 2_000)]
    group_share_partition_max_record_locks: u64,
    /// Kafka's group.consumer.migration.policy: disabled, upgrade, downgrade or
    /// bidirectional (a live classic group becomes a consumer-protocol group on a
    /// ConsumerGroupHeartbeat, and back when its last consumer-protocol member leaves).
    #[arg(long, default_value = "bidirectional", value_parser = parse_migration_policy)]
    group_consumer_migration_policy: MigrationPolicy,
    /// The most bytes one compressed record batch may decompress to; a larger one is
    /// refused (MESSAGE_TOO_LARGE) without being inflated further.
    #[arg(long, default_value_t = 16 * 1024 * 1024)]
    max_decompressed_batch_bytes: usize,
    /// The most bytes one Produce request's compressed batches may decompress to together.
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    max_decompressed_request_bytes: usize,
    /// Kafka's log.flush.interval.ms for the partitions' log: a produce is acknowledged once
    /// written to the OS and synced every N ms (survives a crash of the broker, may lose the
    /// last N ms on power loss). Without it, once its batch is fdatasync'ed.
    #[arg(long, value_name = "N")]
    log_flush_interval_ms: Option<u64>,
    /// Kafka's log.segment.bytes: the size of a partition's segment files.
    #[arg(long, default_value_t = partition_log::segment::DEFAULT_SEGMENT_BYTES)]
    log_segment_bytes: u64,
    /// Kafka's log.retention.ms: closed segments whose newest record is older are deleted;
    /// -1: no time limit.
    #[arg(long, default_value_t = partition_log::segment::DEFAULT_RETENTION_MS, allow_negative_numbers = true)]
    log_retention_ms: i64,
    /// Kafka's log.retention.bytes: a partition's closed segments are deleted, oldest
    /// first, while it stays at or above this size without them; -1: no size limit.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    log_retention_bytes: i64,
    /// Kafka's log.retention.check.interval.ms: how often retention runs (each topic's
    /// retention.ms and retention.bytes, else the two flags above), also without a data
    /// directory.
    #[arg(long, default_value_t = 300_000)]
    log_retention_check_interval_ms: u64,
    /// Kafka's log.cleaner.backoff.ms: how often the partitions of topics whose
    /// cleanup.policy includes compact get a compaction pass (Kafka's log cleaner).
    #[arg(long, default_value_t = 15_000)]
    log_cleaner_backoff_ms: u64,
    /// Kafka's log.cleaner.dedupe.buffer.size: the most key bytes one compaction pass holds
    /// in memory; a pass that reaches it compacts up to there and the next goes on.
    #[arg(long, default_value_t = 128 << 20)]
    log_cleaner_dedupe_buffer_size: u64,
}

/// `--offsets-store`'s values.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum StoreKind {
    Log,
    Json,
}

impl From<StoreKind> for OffsetsStore {
    fn from(kind: StoreKind) -> Self {
        match kind {
            StoreKind::Log => OffsetsStore::Log,
            StoreKind::Json => OffsetsStore::Json,
        }
    }
}

fn parse_migration_policy(s: &str) -> Result<MigrationPolicy, String> {
    s.parse()
        .map_err(|e: coordinator_core::Error| e.to_string())
}

fn parse_listener(s: &str) -> Result<ListenerSpec, String> {
    s.parse().map_err(|e: broker::BrokerError| e.to_string())
}

fn parse_mechanism(s: &str) -> Result<SaslMechanism, String> {
    s.parse().map_err(|e: broker::BrokerError| e.to_string())
}

fn parse_client_auth(s: &str) -> Result<ListenerClientAuth, String> {
    s.parse().map_err(|e: broker::BrokerError| e.to_string())
}

fn parse_advertised(s: &str) -> Result<AdvertisedListener, String> {
    s.parse().map_err(|e: broker::BrokerError| e.to_string())
}

fn parse_postgres(s: &str) -> Result<PostgresUrl, String> {
    s.parse().map_err(|e: broker::BrokerError| e.to_string())
}

fn parse_topic(s: &str) -> Result<TopicSpec, String> {
    s.parse().map_err(|e: broker::BrokerError| e.to_string())
}

impl Args {
    /// The share groups' settings of the `--group-share-…` flags: Kafka's bounds, widened
    /// to take a value outside them (tests and development want short timeouts), but for the
    /// record lock duration's, which have flags of their own.
    fn group_share(&self) -> coordinator_core::ShareGroupSettings {
        let mut s = coordinator_core::ShareGroupSettings::default();
        s.session_timeout_ms = self.group_share_session_timeout_ms;
        s.min_session_timeout_ms = s.min_session_timeout_ms.min(s.session_timeout_ms);
        s.max_session_timeout_ms = s.max_session_timeout_ms.max(s.session_timeout_ms);
        s.heartbeat_interval_ms = self.group_share_heartbeat_interval_ms;
        s.min_heartbeat_interval_ms = s.min_heartbeat_interval_ms.min(s.heartbeat_interval_ms);
        s.max_heartbeat_interval_ms = s.max_heartbeat_interval_ms.max(s.heartbeat_interval_ms);
        s.max_size = self.group_share_max_size;
        s.record_lock_duration_ms = self.group_share_record_lock_duration_ms;
        s.min_record_lock_duration_ms = self.group_share_min_record_lock_duration_ms;
        s.max_record_lock_duration_ms = self.group_share_max_record_lock_duration_ms;
        s.delivery_count_limit = self.group_share_delivery_count_limit;
        s.min_delivery_count_limit = s.min_delivery_count_limit.min(s.delivery_count_limit);
        s.max_delivery_count_limit = s.max_delivery_count_limit.max(s.delivery_count_limit);
        s.partition_max_record_locks = self.group_share_partition_max_record_locks;
        s.min_partition_max_record_locks = s
            .min_partition_max_record_locks
            .min(s.partition_max_record_locks);
        s.max_partition_max_record_locks = s
            .max_partition_max_record_locks
            .max(s.partition_max_record_locks);
        s
    }

    fn into_config(self) -> BrokerConfig {
        let group_share = self.group_share();
        // clap gives at least one (the default); the config's own default otherwise
        let mut listeners = self.listen.into_iter();
        let first = listeners.next().unwrap_or(ListenerSpec {
            protocol: broker::SecurityProtocol::Plaintext,
            address: BrokerConfig::default().listen,
        });
        BrokerConfig {
            listen: first.address,
            security_protocol: first.protocol,
            listeners: listeners.collect(),
            ssl_certificate: self.ssl_certificate,
            ssl_key: self.ssl_key,
            ssl_client_ca: self.ssl_client_ca,
            listener_ssl_client_auth: self.listener_ssl_client_auth,
            advertised_listeners: self.advertised_listeners,
            allow_plaintext_remote: self.allow_plaintext_remote,
            control_listen: self.control_listen,
            metrics_listen: self.metrics_listen,
            metrics_max_lag_series: self.metrics_max_lag_series,
            requests_recorded: self.requests_recorded,
            manual_clock: self.manual_clock,
            authorizer: self.authorizer,
            super_users: self.super_users,
            allow_everyone_if_no_acl_found: self.allow_everyone_if_no_acl_found,
            sasl_enabled_mechanisms: self.sasl_enabled_mechanisms,
            users_file: self.users,
            connection_failed_authentication_delay_ms: self
                .connection_failed_authentication_delay_ms,
            data_dir: self.data_dir,
            postgres: self.postgres,
            postgres_pool_size: self.postgres_pool_size,
            node_id: self.node_id,
            broker_session_timeout_ms: self.broker_session_timeout_ms,
            broker_heartbeat_interval_ms: self.broker_heartbeat_interval_ms,
            offsets_store: self.offsets_store.into(),
            offsets_flush_interval_ms: self.offsets_flush_interval_ms,
            topics: self.topics,
            auto_create_topics: self.auto_create_topics,
            num_partitions: self.num_partitions,
            group_initial_rebalance_delay_ms: self.group_initial_rebalance_delay_ms,
            group_min_session_timeout_ms: self.group_min_session_timeout_ms,
            group_max_session_timeout_ms: self.group_max_session_timeout_ms,
            group_max_size: self.group_max_size,
            transaction_max_timeout_ms: self.transaction_max_timeout_ms,
            transaction_abort_timed_out_cleanup_interval_ms: self
                .transaction_abort_timed_out_transaction_cleanup_interval_ms,
            transactional_id_expiration_ms: self.transactional_id_expiration_ms,
            offsets_retention_minutes: self.offsets_retention_minutes,
            max_frame_bytes: self.max_frame_bytes,
            queued_max_request_bytes: self.queued_max_request_bytes,
            max_connections: self.max_connections,
            max_connections_per_ip: self.max_connections_per_ip.unwrap_or(usize::MAX),
            offsets_retention_check_interval_ms: self.offsets_retention_check_interval_ms,
            connections_max_idle_ms: self.connections_max_idle_ms,
            request_timeout_ms: self.request_timeout_ms,
            group_consumer_assignors: self.group_consumer_assignors,
            group_consumer_session_timeout_ms: self.group_consumer_session_timeout_ms,
            group_consumer_heartbeat_interval_ms: self.group_consumer_heartbeat_interval_ms,
            group_consumer_max_size: self.group_consumer_max_size,
            group_share,
            group_consumer_migration_policy: self.group_consumer_migration_policy,
            max_decompressed_batch_bytes: self.max_decompressed_batch_bytes,
            max_decompressed_request_bytes: self.max_decompressed_request_bytes,
            records: RecordsConfig {
                flush_interval_ms: self.log_flush_interval_ms,
                segment_bytes: self.log_segment_bytes,
                retention_ms: self.log_retention_ms,
                retention_bytes: self.log_retention_bytes,
                retention_check_interval_ms: self.log_retention_check_interval_ms,
                cleaner_backoff_ms: self.log_cleaner_backoff_ms,
                cleaner_dedupe_buffer_size: self.log_cleaner_dedupe_buffer_size,
            },
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colours only on a terminal: logs captured to files stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(args.into_config()))
}

async fn serve(config: BrokerConfig) -> anyhow::Result<()> {
    let server = Server::bind(config)
        .await
        .context("the broker cannot start")?;
    // The handlers are installed before the `listening on` line: a signal sent as soon as
    // the broker answers stops it cleanly, never kills it.
    let stop = stop_signal().context("cannot listen for signals")?;
    let mut stdout = std::io::stdout().lock();
    // The first listener as `HOST:PORT` (what every reader of this line expects), each
    // further one with its protocol.
    for (i, (protocol, address)) in server.local_addrs().into_iter().enumerate() {
        if i == 0 {
            writeln!(stdout, "listening on {address}")?;
        } else {
            writeln!(stdout, "listening on {}://{address}", protocol.name())?;
        }
    }
    if let Some(control) = server.control_addr() {
        writeln!(stdout, "control on {control}")?;
    }
    if let Some(metrics) = server.metrics_addr() {
        writeln!(stdout, "metrics on {metrics}")?;
    }
    stdout.flush()?;
    drop(stdout);
    server.run(stop).await.map_err(|e| {
        let code = e.code();
        anyhow::Error::new(e).context(format!("the broker stopped abnormally ({code})"))
    })?;
    Ok(())
}

/// A future resolving at the first SIGINT or SIGTERM, with both handlers installed now.
#[cfg(unix)]
fn stop_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => tracing::info!("SIGINT received"),
            _ = term.recv() => tracing::info!("SIGTERM received"),
        }
    })
}

/// A future resolving at the first Ctrl-C.
#[cfg(not(unix))]
fn stop_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
