//! The broker's settings, with Kafka's names and defaults where Kafka has them.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

use crate::error::BrokerError;
use crate::store::{OffsetsStore, StoreConfig};
use coordinator_core::MigrationPolicy;

/// A topic to create at start: `NAME:PARTITIONS` on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicSpec {
    /// The topic name (Kafka's rules apply when it is created).
    pub name: String,
    /// How many partitions.
    pub partitions: u32,
}

impl FromStr for TopicSpec {
    type Err = BrokerError;

    /// Parses `orders:4`. The name is everything before the last `:`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = |reason: &str| BrokerError::InvalidConfig {
            setting: "topic",
            reason: format!("{s:?}: {reason}; write NAME:PARTITIONS, e.g. orders:4"),
        };
        let (name, count) = s.rsplit_once(':').ok_or_else(|| invalid("no `:`"))?;
        let partitions = count
            .parse::<u32>()
            .map_err(|_| invalid("the partition count is not a positive integer"))?;
        if name.is_empty() {
            return Err(invalid("the name is empty"));
        }
        Ok(TopicSpec {
            name: name.to_string(),
            partitions,
        })
    }
}

/// A listener's security protocol (Kafka's `listener.security.protocol.map` values).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecurityProtocol {
    /// No authentication, no encryption (the default, as a bare `HOST:PORT`).
    #[default]
    Plaintext,
    /// SASL authentication over plain TCP.
    SaslPlaintext,
    /// TLS (rustls), with client-certificate authentication when `--ssl-client-ca` is given.
    Ssl,
    /// SASL authentication over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name of the protocol.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether its connections authenticate with SASL (SASL_PLAINTEXT, SASL_SSL).
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }

    /// Whether its connections are TLS (SSL, SASL_SSL).
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }
}

/// A `--listen` value: `PROTOCOL://HOST:PORT`, or a bare `HOST:PORT` for PLAINTEXT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenerSpec {
    /// The security protocol.
    pub protocol: SecurityProtocol,
    /// The address (an IP address and a port; port 0 lets the OS pick one).
    pub address: SocketAddr,
}

impl FromStr for ListenerSpec {
    type Err = BrokerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = |reason: String| BrokerError::InvalidConfig {
            setting: "listen",
            reason: format!(
                "{s:?}: {reason}; write PROTOCOL://HOST:PORT (PLAINTEXT, SSL, SASL_PLAINTEXT or \
                 SASL_SSL) or HOST:PORT, e.g. SASL_SSL://127.0.0.1:9093"
            ),
        };
        let (protocol, address) = match s.split_once("://") {
            None => (SecurityProtocol::Plaintext, s),
            Some((name, address)) => {
                let protocol = protocol_named(name).ok_or_else(|| {
                    invalid(format!(
                        "unknown security protocol `{}`",
                        name.to_ascii_uppercase()
                    ))
                })?;
                (protocol, address)
            }
        };
        let address = address
            .parse::<SocketAddr>()
            .map_err(|_| invalid("not an IP address and port".into()))?;
        Ok(ListenerSpec { protocol, address })
    }
}

/// Kafka's `ssl.client.auth`: whether a TLS listener asks its clients for a certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SslClientAuth {
    /// A certificate of `--ssl-client-ca` is required: a client without one is refused in
    /// the handshake.
    Required,
    /// A certificate is asked for and, when one is presented, checked against
    /// `--ssl-client-ca`; a client may also come in without one.
    Requested,
    /// No certificate is asked for.
    None,
}

impl SslClientAuth {
    /// Kafka's name of the setting's value.
    pub fn name(self) -> &'static str {
        match self {
            SslClientAuth::Required => "required",
            SslClientAuth::Requested => "requested",
            SslClientAuth::None => "none",
        }
    }
}

/// A `--listener-ssl-client-auth` value, `NAME=required|requested|none`: client
/// authentication on one TLS listener, as Kafka's listener-prefixed
/// `listener.name.<name>.ssl.client.auth` (KIP-684). A listener's name is its security
/// protocol's (Kafka's default `listener.security.protocol.map`): `SSL` or `SASL_SSL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenerClientAuth {
    /// The listener (by its name, which is its protocol's).
    pub listener: SecurityProtocol,
    /// Its setting.
    pub mode: SslClientAuth,
}

impl FromStr for ListenerClientAuth {
    type Err = BrokerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = |reason: String| BrokerError::InvalidConfig {
            setting: "listener-ssl-client-auth",
            reason: format!(
                "{s:?}: {reason}; write NAME=required|requested|none with NAME a TLS \
                 listener's name (SSL or SASL_SSL), e.g. SASL_SSL=requested"
            ),
        };
        let (name, mode) = s.split_once('=').ok_or_else(|| invalid("no `=`".into()))?;
        let listener = protocol_named(name).ok_or_else(|| {
            invalid(format!(
                "`{name}` names no listener (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)"
            ))
        })?;
        if !listener.uses_tls() {
            return Err(invalid(format!(
                "{} is not a TLS listener: it has no client certificates",
                listener.name()
            )));
        }
        let mode = match mode.to_ascii_lowercase().as_str() {
            "required" => SslClientAuth::Required,
            "requested" => SslClientAuth::Requested,
            "none" => SslClientAuth::None,
            other => return Err(invalid(format!("`{other}` is not a setting"))),
        };
        Ok(ListenerClientAuth { listener, mode })
    }
}

/// An `--advertised-listeners` value, `NAME://HOST:PORT`: what Metadata, FindCoordinator and
/// DescribeCluster tell the clients that came in through the listener of that name (Kafka's
/// `advertised.listeners`), e.g. the host name a server certificate names
/// (`SSL://localhost:9093`) or an address clients reach through a proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdvertisedListener {
    /// The listener (by its name, which is its protocol's).
    pub listener: SecurityProtocol,
    /// The host clients are told (a name or an address, not resolved here).
    pub host: String,
    /// The port clients are told.
    pub port: u16,
}

impl FromStr for AdvertisedListener {
    type Err = BrokerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = |reason: String| BrokerError::InvalidConfig {
            setting: "advertised-listeners",
            reason: format!(
                "{s:?}: {reason}; write NAME://HOST:PORT with NAME a listener's name (PLAINTEXT, \
                 SSL, SASL_PLAINTEXT or SASL_SSL), e.g. SSL://localhost:9093"
            ),
        };
        let (name, rest) = s
            .split_once("://")
            .ok_or_else(|| invalid("no `://`".into()))?;
        let listener =
            protocol_named(name).ok_or_else(|| invalid(format!("`{name}` names no listener")))?;
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| invalid("no `:PORT`".into()))?;
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if host.is_empty() || host.contains(['/', ' ', ',']) {
            return Err(invalid(format!("`{host}` is not a host")));
        }
        let port = port
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| invalid(format!("`{port}` is not a port (1-65535)")))?;
        Ok(AdvertisedListener {
            listener,
            host: host.to_string(),
            port,
        })
    }
}

/// The security protocol a listener name stands for (case-insensitive).
fn protocol_named(name: &str) -> Option<SecurityProtocol> {
    match name.to_ascii_uppercase().as_str() {
        "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
        "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
        "SSL" => Some(SecurityProtocol::Ssl),
        "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
        _ => None,
    }
}

/// A PostgreSQL connection string (`--postgres`): a `postgres://` URL or libpq's
/// `key=value` form. Shown (Debug, Display, logs, errors) with its password replaced by `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl(String);

impl PostgresUrl {
    /// Wraps a connection string (parsed when the broker connects).
    pub fn new(url: impl Into<String>) -> PostgresUrl {
        PostgresUrl(url.into())
    }

    /// The connection string as given, password included.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The connection string with any password replaced by `***`.
    pub fn redacted(&self) -> String {
        redact_password(&self.0)
    }
}

impl fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PostgresUrl({})", self.redacted())
    }
}

impl fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl FromStr for PostgresUrl {
    type Err = BrokerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().is_empty() {
            return Err(BrokerError::InvalidConfig {
                setting: "postgres",
                reason: "empty; write postgres://USER:PASSWORD@HOST:PORT/DATABASE or libpq's \
                         `host=… dbname=…` form"
                    .into(),
            });
        }
        Ok(PostgresUrl(s.to_string()))
    }
}

/// `s` with the password of a `postgres://user:password@…` URL, and any `password=…`
/// parameter (URL query or libpq's `key=value` form, quoted or not), replaced by `***`.
fn redact_password(s: &str) -> String {
    let mut out = s.to_string();
    for scheme in ["postgres://", "postgresql://"] {
        if let Some(rest) = out.strip_prefix(scheme) {
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            if let Some(at) = rest[..end].rfind('@') {
                if let Some(colon) = rest[..at].find(':') {
                    out = format!("{scheme}{}:***{}", &rest[..colon], &rest[at..]);
                }
            }
            break;
        }
    }
    let mut from = 0;
    while let Some(i) = out[from..].find("password=").map(|i| i + from) {
        let value = i + "password=".len();
        let preceded = i == 0 || out[..i].ends_with([' ', '?', '&', '\t']);
        if !preceded {
            from = value;
            continue;
        }
        let rest = &out[value..];
        let len = if let Some(quoted) = rest.strip_prefix('\'') {
            // libpq: a quoted value ends at the first unescaped quote
            let mut escaped = false;
            let mut n = quoted.len();
            for (k, c) in quoted.char_indices() {
                match c {
                    '\\' if !escaped => escaped = true,
                    '\'' if !escaped => {
                        n = k + 1;
                        break;
                    }
                    _ => escaped = false,
                }
            }
            1 + n
        } else {
            rest.find([' ', '&', '\t']).unwrap_or(rest.len())
        };
        out.replace_range(value..value + len, "***");
        from = value + 3;
    }
    out
}

/// A SASL mechanism the broker serves (`--sasl-enabled-mechanisms`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SaslMechanism {
    /// RFC 4616: the password travels in the clear (use it over TLS, or on loopback).
    Plain,
    /// RFC 7677.
    ScramSha256,
    /// RFC 5802 with SHA-512, as Kafka serves it.
    ScramSha512,
}

impl SaslMechanism {
    /// Every mechanism served, the default `--sasl-enabled-mechanisms`.
    pub const ALL: [SaslMechanism; 3] = [
        SaslMechanism::Plain,
        SaslMechanism::ScramSha256,
        SaslMechanism::ScramSha512,
    ];

    /// The mechanism's SASL name.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

impl FromStr for SaslMechanism {
    type Err = BrokerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SaslMechanism::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| BrokerError::InvalidConfig {
                setting: "sasl-enabled-mechanisms",
                reason: format!(
                    "`{s}` is not served (served: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; GSSAPI \
                     and OAUTHBEARER are not)"
                ),
            })
    }
}

/// Everything the broker needs to start. [`Default`] gives Kafka's defaults (and a loopback
/// listener on Kafka's port 9092), except where the field says otherwise.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// Where the first listener listens (the first `--listen`). Port 0 lets the operating
    /// system pick one.
    pub listen: SocketAddr,
    /// The first listener's security protocol (`--listen PROTOCOL://HOST:PORT`; default
    /// PLAINTEXT).
    pub security_protocol: SecurityProtocol,
    /// The further listeners (every `--listen` after the first), each with its own protocol;
    /// [`all_listeners`](Self::all_listeners) lists them after the first. Default none.
    pub listeners: Vec<ListenerSpec>,
    /// Kafka's `sasl.enabled.mechanisms` on SASL_PLAINTEXT and SASL_SSL listeners (default
    /// PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
    pub sasl_enabled_mechanisms: Vec<SaslMechanism>,
    /// `--users FILE`: the SASL users, `name:password` lines, in a file only its owner may
    /// read. Needed by SASL_PLAINTEXT and SASL_SSL listeners.
    pub users_file: Option<PathBuf>,
    /// `--ssl-certificate PEM`: the certificate chain SSL and SASL_SSL listeners present
    /// (the server's certificate first). Needed by them, with [`ssl_key`](Self::ssl_key).
    pub ssl_certificate: Option<PathBuf>,
    /// `--ssl-key PEM`: the private key of [`ssl_certificate`](Self::ssl_certificate)
    /// (PKCS#8, PKCS#1 or SEC1).
    pub ssl_key: Option<PathBuf>,
    /// `--ssl-client-ca PEM`: the certificate authorities client certificates must chain to.
    /// When given, SSL listeners require a client certificate (Kafka's
    /// `ssl.client.auth=required`) unless
    /// [`listener_ssl_client_auth`](Self::listener_ssl_client_auth) says otherwise, and an SSL
    /// connection's principal is its subject, `User:CN=…` (Kafka's default principal builder). SASL_SSL listeners ask
    /// for certificates only when [`listener_ssl_client_auth`](Self::listener_ssl_client_auth)
    /// names them: their clients authenticate with SASL (as Kafka, KIP-684).
    pub ssl_client_ca: Option<PathBuf>,
    /// `--listener-ssl-client-auth NAME=required|requested|none`: client authentication per
    /// TLS listener (Kafka's `listener.name.<name>.ssl.client.auth`); see
    /// [`ssl_client_auth`](Self::ssl_client_auth) for the defaults. Default none given.
    pub listener_ssl_client_auth: Vec<ListenerClientAuth>,
    /// `--advertised-listeners NAME://HOST:PORT`: what the clients of a listener are told to
    /// connect to (Kafka's `advertised.listeners`); a listener not named here advertises the
    /// address it is bound to. Default none given.
    pub advertised_listeners: Vec<AdvertisedListener>,
    /// `--allow-plaintext-remote`: let a listener on an address that is not loopback serve
    /// connections that do not authenticate (PLAINTEXT, or SSL without `--ssl-client-ca`);
    /// without it the broker refuses to start. Default `false`.
    pub allow_plaintext_remote: bool,
    /// `--control-listen HOST:PORT`: serve the control port there (faults and the record of
    /// requests, a JSON-lines protocol: see [`crate::faults`] and the crate's README). Default
    /// `None`: no control port. An address that is not loopback is refused without
    /// [`allow_plaintext_remote`](Self::allow_plaintext_remote): the port has no
    /// authentication.
    pub control_listen: Option<SocketAddr>,
    /// `--metrics-listen HOST:PORT`: serve `GET /metrics` there, in the Prometheus text
    /// format, and the page of groups at `/` (see the crate's README, "Metrics"). Default `None`:
    /// no metrics listener, and the broker records nothing (the coordinator's own counters,
    /// `Coordinator::stats`, count regardless). An address that is not loopback is
    /// refused without [`allow_plaintext_remote`](Self::allow_plaintext_remote), as for the
    /// control port: the listener has no authentication.
    pub metrics_listen: Option<SocketAddr>,
    /// `--metrics-max-lag-series N`: the most (group, partition) pairs whose committed
    /// offset, log end offset and lag a scrape of `/metrics` shows (default
    /// [`DEFAULT_METRICS_MAX_LAG_SERIES`], at most [`MAX_METRICS_MAX_LAG_SERIES`]; 0 shows
    /// none). Past it the rest are left out, and
    /// `consumer_groups_lag_series_omitted` says how many.
    pub metrics_max_lag_series: usize,
    /// `--requests-recorded K`: how many of the last requests the broker remembers for
    /// [`Faults::requests_since`](crate::faults::Faults::requests_since) (default 10,000; 0
    /// remembers none).
    pub requests_recorded: usize,
    /// `--manual-clock`: the group and transaction coordinators' timers (session expiries,
    /// rebalance and join timeouts, the initial rebalance delay, offsets retention,
    /// transaction timeouts, transactional id expiration) follow a clock that moves only
    /// when a test advances it ([`Faults::advance_clock`](crate::faults::Faults::advance_clock),
    /// or `{"op":"advance_clock","ms":N}` on the control port). It starts at the wall-clock
    /// time the broker starts. Record timestamps, retention of records, faults' latencies,
    /// connection timeouts and the several brokers' leases keep real time. Default `false`.
    pub manual_clock: bool,
    /// `--authorizer` (Kafka's `authorizer.class.name` set to its `StandardAuthorizer`):
    /// every request is checked against the ACLs, which CreateAcls, DescribeAcls and
    /// DeleteAcls manage and `<data-dir>/acls.json` keeps. Default off: anyone may do anything.
    pub authorizer: bool,
    /// `--super-users`: principals (`User:name`) the ACLs do not restrict (Kafka's
    /// `super.users`).
    pub super_users: Vec<String>,
    /// `--allow-everyone-if-no-acl-found`: a resource no ACL names is open to everyone
    /// (Kafka's `allow.everyone.if.no.acl.found`, default `false`).
    pub allow_everyone_if_no_acl_found: bool,
    /// Kafka's `connection.failed.authentication.delay.ms` (default 100): a connection whose
    /// authentication failed is closed this long after its error answer.
    pub connection_failed_authentication_delay_ms: u64,
    /// The data directory: committed offsets and group records live in its group log
    /// (`<dir>/groups/`, the `LogStore`) or, with [`offsets_store`](Self::offsets_store)
    /// `Json`, in `<dir>/offsets.json`; topics and records in `<dir>/records/` (the
    /// `SegmentLog`). `None` keeps everything in memory.
    pub data_dir: Option<PathBuf>,
    /// `--postgres URL`: the whole state — topics, records, offsets, group records,
    /// transactions, ACLs and SCRAM credentials — in this PostgreSQL database (the
    /// `store-postgres` crate's schema, migrated at start), and nothing on this machine's
    /// disk: another broker process started on the same database carries on. Refused with
    /// [`data_dir`](Self::data_dir). Default none.
    pub postgres: Option<PostgresUrl>,
    /// `--postgres-pool-size`: the most connections to PostgreSQL for the offset store and as
    /// many again for the log (default 16 each).
    pub postgres_pool_size: usize,
    /// `--node-id` (Kafka's `node.id`, default 0): this broker's id in Metadata,
    /// DescribeCluster and FindCoordinator, and, with `--postgres`, the id it registers in
    /// the database under a lease (one live process per id).
    pub node_id: i32,
    /// `--broker-session-timeout-ms` (Kafka's `broker.session.timeout.ms`, default 9000):
    /// with `--postgres`, how long the broker's registration and coordinator slots outlive
    /// its last heartbeat; another broker takes them over after that.
    pub broker_session_timeout_ms: u64,
    /// `--broker-heartbeat-interval-ms` (Kafka's `broker.heartbeat.interval.ms`, default
    /// 2000): with `--postgres`, how often the broker extends its lease.
    pub broker_heartbeat_interval_ms: u64,
    /// `--offsets-store`: which store of the data directory keeps the offsets (default the
    /// log). Without a data directory, ignored.
    pub offsets_store: OffsetsStore,
    /// `--offsets-flush-interval-ms` (Kafka's `log.flush.interval.ms`, for the group log):
    /// acknowledge a commit once written to the OS and sync at most this many ms later.
    /// `None` (the default) syncs every batch before acknowledging it. Only with the log
    /// store of a data directory.
    pub offsets_flush_interval_ms: Option<u64>,
    /// Topics to create at start.
    pub topics: Vec<TopicSpec>,
    /// Kafka's `auto.create.topics.enable`: a Metadata request for a missing topic creates it.
    /// Default `false` here (Kafka's default is `true`), so a typo is an error, not a topic.
    pub auto_create_topics: bool,
    /// Kafka's `num.partitions`: the partition count of auto-created topics (default 1).
    pub num_partitions: u32,
    /// Kafka's `group.initial.rebalance.delay.ms` (default 3000).
    pub group_initial_rebalance_delay_ms: u64,
    /// Kafka's `group.min.session.timeout.ms` (default 6000).
    pub group_min_session_timeout_ms: u64,
    /// Kafka's `group.max.session.timeout.ms` (default 1800000).
    pub group_max_session_timeout_ms: u64,
    /// Kafka's `group.max.size` (default 2147483647).
    pub group_max_size: u32,
    /// Kafka's `transaction.max.timeout.ms` (default 900000).
    pub transaction_max_timeout_ms: u64,
    /// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms` (default 10000).
    pub transaction_abort_timed_out_cleanup_interval_ms: u64,
    /// Kafka's `transactional.id.expiration.ms` (default 604800000, seven days).
    pub transactional_id_expiration_ms: u64,
    /// Kafka's `offsets.retention.minutes` (default 10080, seven days).
    pub offsets_retention_minutes: u64,
    /// Kafka's `socket.request.max.bytes`: the largest request frame (default 104857600).
    pub max_frame_bytes: usize,
    /// Kafka's `queued.max.request.bytes` (`--queued-max-request-bytes`, default `-1`:
    /// unbounded): the most bytes of request frames held at once, all connections together.
    /// A frame's announced length is taken from it once its length prefix is read, and given
    /// back when its request has been handled; while none is left the broker reads no new
    /// request (no connection is closed for it) until memory comes back. As Kafka's pool, a
    /// frame is served while any memory is left, so up to this plus one frame
    /// (`max_frame_bytes`) may be held. `-1` or at least `max_frame_bytes` (Kafka's rule).
    pub queued_max_request_bytes: i64,
    /// The most connections served at once (Kafka's `max.connections`, whose default is
    /// unlimited; here [`default_max_connections`], what the open-file limit allows).
    /// Further clients wait in the accept queue.
    pub max_connections: usize,
    /// Kafka's `connections.max.idle.ms` (default 600000, ten minutes): a connection that
    /// sends no byte of a new request for this long is closed.
    pub connections_max_idle_ms: u64,
    /// How long a request frame may take to arrive once its first byte did (default 30000,
    /// Kafka's clients' `request.timeout.ms`): a slower one closes its connection, so a peer
    /// sending a byte at a time cannot hold a connection slot.
    pub request_timeout_ms: u64,
    /// Kafka's `group.consumer.assignors`: the server-side assignors of consumer-protocol
    /// groups (KIP-848) by the names clients give in `group.remote.assignor`, the default
    /// first (default `uniform,range`).
    pub group_consumer_assignors: Vec<String>,
    /// Kafka's `group.consumer.session.timeout.ms` (default 45000).
    pub group_consumer_session_timeout_ms: u64,
    /// Kafka's `group.consumer.heartbeat.interval.ms` (default 5000).
    pub group_consumer_heartbeat_interval_ms: u64,
    /// Kafka's `group.consumer.max.size` (default 2147483647).
    pub group_consumer_max_size: u32,
    /// Share groups' broker-wide settings (Kafka's `group.share.…`: session timeout,
    /// heartbeat interval, record lock duration, delivery count limit, record locks per
    /// share-partition, with their bounds; Kafka 4.2's defaults).
    pub group_share: coordinator_core::ShareGroupSettings,
    /// Kafka's `group.consumer.migration.policy` (default `bidirectional`): whether a live
    /// classic group becomes a consumer-protocol group on a ConsumerGroupHeartbeat, and back
    /// when its last consumer-protocol member leaves.
    pub group_consumer_migration_policy: MigrationPolicy,
    /// Kafka's `max.connections.per.ip` (default unlimited): a connection from an address
    /// that already has this many is closed at once.
    pub max_connections_per_ip: usize,
    /// Kafka's `offsets.retention.check.interval.ms` (default 600000): an Empty group
    /// without committed offsets is removed this long after it became Empty.
    pub offsets_retention_check_interval_ms: u64,
    /// The most bytes one compressed record batch of a Produce may decompress to (default
    /// 16 MiB; Kafka has no such setting, it validates records as it streams them): a batch
    /// beyond it is refused with MESSAGE_TOO_LARGE, decompression stopping at the bound.
    pub max_decompressed_batch_bytes: usize,
    /// The most bytes all the compressed batches of one Produce request may decompress to
    /// together (default 64 MiB); beyond it the rest of the request's partitions are
    /// refused with MESSAGE_TOO_LARGE.
    pub max_decompressed_request_bytes: usize,
    /// The partitions' log (`<data_dir>/records/`, the `SegmentLog`; without a data
    /// directory the partitions live in memory and only the retention settings apply).
    pub records: RecordsConfig,
}

/// The settings of the partitions' segment log, with Kafka's names and defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordsConfig {
    /// Kafka's `log.flush.interval.ms`: `None` (the default here) acknowledges a produce
    /// once its batch is `fdatasync`ed; `Some(n)` once written to the OS, synced every `n` ms.
    pub flush_interval_ms: Option<u64>,
    /// Kafka's `log.segment.bytes` (default 1073741824).
    pub segment_bytes: u64,
    /// Kafka's `log.retention.ms` (default 604800000, seven days); `-1`: no time limit.
    pub retention_ms: i64,
    /// Kafka's `log.retention.bytes` per partition (default `-1`: no size limit).
    pub retention_bytes: i64,
    /// Kafka's `log.retention.check.interval.ms` (default 300000): how often retention runs,
    /// with each topic's `retention.ms` / `retention.bytes` or the two settings above.
    pub retention_check_interval_ms: u64,
    /// Kafka's `log.cleaner.backoff.ms` (default 15000): how often the partitions of
    /// compacted topics get a compaction pass.
    pub cleaner_backoff_ms: u64,
    /// Kafka's `log.cleaner.dedupe.buffer.size` (default 134217728): the most key bytes one
    /// compaction pass holds in memory.
    pub cleaner_dedupe_buffer_size: u64,
}

impl Default for RecordsConfig {
    fn default() -> Self {
        RecordsConfig {
            flush_interval_ms: None,
            segment_bytes: partition_log::segment::DEFAULT_SEGMENT_BYTES,
            retention_ms: partition_log::segment::DEFAULT_RETENTION_MS,
            retention_bytes: -1,
            retention_check_interval_ms: 300_000,
            cleaner_backoff_ms: 15_000,
            cleaner_dedupe_buffer_size: 128 << 20,
        }
    }
}

impl RecordsConfig {
    fn validate(&self) -> Result<(), BrokerError> {
        let invalid = |setting, reason: String| Err(BrokerError::InvalidConfig { setting, reason });
        if self.flush_interval_ms == Some(0) {
            return invalid("log-flush-interval-ms", "must be at least 1".into());
        }
        if self.cleaner_backoff_ms == 0 {
            return invalid("log-cleaner-backoff-ms", "must be at least 1".into());
        }
        if self.cleaner_dedupe_buffer_size < 1024 {
            return invalid(
                "log-cleaner-dedupe-buffer-size",
                format!("{} is below 1024", self.cleaner_dedupe_buffer_size),
            );
        }
        if self.retention_check_interval_ms == 0 {
            return invalid(
                "log-retention-check-interval-ms",
                "must be at least 1".into(),
            );
        }
        if self.segment_bytes < 1024 {
            return invalid(
                "log-segment-bytes",
                format!("{} is below the smallest segment, 1024", self.segment_bytes),
            );
        }
        if self.retention_ms < -1 {
            return invalid(
                "log-retention-ms",
                "must be -1 (unlimited) or at least 0".into(),
            );
        }
        if self.retention_bytes < -1 {
            return invalid(
                "log-retention-bytes",
                "must be -1 (unlimited) or at least 0".into(),
            );
        }
        Ok(())
    }
}

/// The server-side assignors the broker can register, by name.
pub(crate) const CONSUMER_ASSIGNORS: [&str; 2] = ["uniform", "range"];

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 9092)),
            security_protocol: SecurityProtocol::Plaintext,
            listeners: Vec::new(),
            sasl_enabled_mechanisms: SaslMechanism::ALL.to_vec(),
            users_file: None,
            ssl_certificate: None,
            ssl_key: None,
            ssl_client_ca: None,
            listener_ssl_client_auth: Vec::new(),
            advertised_listeners: Vec::new(),
            allow_plaintext_remote: false,
            control_listen: None,
            metrics_listen: None,
            metrics_max_lag_series: DEFAULT_METRICS_MAX_LAG_SERIES,
            requests_recorded: crate::faults::DEFAULT_REQUESTS_RECORDED,
            manual_clock: false,
            authorizer: false,
            super_users: Vec::new(),
            allow_everyone_if_no_acl_found: false,
            connection_failed_authentication_delay_ms: 100,
            data_dir: None,
            offsets_store: OffsetsStore::Log,
            postgres: None,
            postgres_pool_size: 16,
            node_id: 0,
            broker_session_timeout_ms: 9000,
            broker_heartbeat_interval_ms: 2000,
            offsets_flush_interval_ms: None,
            topics: Vec::new(),
            auto_create_topics: false,
            num_partitions: 1,
            group_initial_rebalance_delay_ms: 3000,
            group_min_session_timeout_ms: 6000,
            group_max_session_timeout_ms: 1_800_000,
            group_max_size: i32::MAX as u32,
            transaction_max_timeout_ms: 900_000,
            transaction_abort_timed_out_cleanup_interval_ms: 10_000,
            transactional_id_expiration_ms: 604_800_000,
            offsets_retention_minutes: 10_080,
            max_frame_bytes: 100 * 1024 * 1024,
            queued_max_request_bytes: -1,
            max_connections: default_max_connections(),
            connections_max_idle_ms: 600_000,
            request_timeout_ms: 30_000,
            group_consumer_assignors: CONSUMER_ASSIGNORS.iter().map(|s| s.to_string()).collect(),
            group_consumer_session_timeout_ms: 45_000,
            group_consumer_heartbeat_interval_ms: 5_000,
            group_consumer_max_size: i32::MAX as u32,
            group_share: coordinator_core::ShareGroupSettings::default(),
            group_consumer_migration_policy: MigrationPolicy::Bidirectional,
            max_connections_per_ip: usize::MAX,
            offsets_retention_check_interval_ms: 600_000,
            max_decompressed_batch_bytes: 16 * 1024 * 1024,
            max_decompressed_request_bytes: 64 * 1024 * 1024,
            records: RecordsConfig::default(),
        }
    }
}

impl BrokerConfig {
    /// The bound of the frames' memory pool, `None` when unbounded (the field
    /// `queued_max_request_bytes` is `-1`).
    pub(crate) fn queued_max_request_bytes(&self) -> Option<u64> {
        u64::try_from(self.queued_max_request_bytes)
            .ok()
            .filter(|&bytes| bytes > 0)
    }

    /// The offset store these settings choose (see [`StoreConfig`]).
    pub fn store(&self) -> StoreConfig {
        if let Some(url) = &self.postgres {
            return StoreConfig::Postgres {
                url: url.clone(),
                pool_size: self.postgres_pool_size,
            };
        }
        StoreConfig::of(
            self.data_dir.as_deref(),
            self.offsets_store,
            self.offsets_flush_interval_ms,
        )
    }

    /// Checks the settings that do not depend on the environment.
    pub fn validate(&self) -> Result<(), BrokerError> {
        let invalid = |setting, reason: String| Err(BrokerError::InvalidConfig { setting, reason });
        self.validate_security()?;
        if self.num_partitions == 0 {
            return invalid("num-partitions", "must be at least 1".into());
        }
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms {
            return invalid(
                "group-min-session-timeout-ms",
                format!(
                    "{} is above group-max-session-timeout-ms {}",
                    self.group_min_session_timeout_ms, self.group_max_session_timeout_ms
                ),
            );
        }
        if self.group_max_size == 0 {
            return invalid("group-max-size", "must be at least 1".into());
        }
        // Kafka's ranges: at least 1 ms, at most i32::MAX (the wire's timeout is an i32).
        for (setting, value) in [
            (
                "transaction-max-timeout-ms",
                self.transaction_max_timeout_ms,
            ),
            (
                "transaction-abort-timed-out-transaction-cleanup-interval-ms",
                self.transaction_abort_timed_out_cleanup_interval_ms,
            ),
            (
                "transactional-id-expiration-ms",
                self.transactional_id_expiration_ms,
            ),
        ] {
            if value == 0 || value > i32::MAX as u64 {
                return invalid(setting, format!("{value} is not within 1 ..= {}", i32::MAX));
            }
        }
        if self.max_frame_bytes < 64 {
            return invalid(
                "max-frame-bytes",
                format!("{} cannot hold a request header", self.max_frame_bytes),
            );
        }
        if self.queued_max_request_bytes != -1
            && u64::try_from(self.queued_max_request_bytes)
                .map_or(true, |bytes| bytes < self.max_frame_bytes as u64)
        {
            return invalid(
                "queued-max-request-bytes",
                format!(
                    "{} must be -1 (unbounded) or at least max-frame-bytes ({}): one request must fit",
                    self.queued_max_request_bytes, self.max_frame_bytes
                ),
            );
        }
        if self.max_connections == 0 {
            return invalid("max-connections", "must be at least 1".into());
        }
        if self.metrics_max_lag_series > MAX_METRICS_MAX_LAG_SERIES {
            return invalid(
                "metrics-max-lag-series",
                format!(
                    "{} is above {MAX_METRICS_MAX_LAG_SERIES}: a scrape would grow without a \
                     useful bound",
                    self.metrics_max_lag_series
                ),
            );
        }
        if self.max_connections_per_ip == 0 {
            return invalid("max-connections-per-ip", "must be at least 1".into());
        }
        if self.connections_max_idle_ms == 0 {
            return invalid("connections-max-idle-ms", "must be at least 1".into());
        }
        if self.request_timeout_ms == 0 {
            return invalid("request-timeout-ms", "must be at least 1".into());
        }
        for (i, name) in self.group_consumer_assignors.iter().enumerate() {
            if !CONSUMER_ASSIGNORS.contains(&name.as_str()) {
                return invalid(
                    "group-consumer-assignors",
                    format!(
                        "unknown assignor `{name}` (known: {})",
                        CONSUMER_ASSIGNORS.join(", ")
                    ),
                );
            }
            if self.group_consumer_assignors[..i].contains(name) {
                return invalid(
                    "group-consumer-assignors",
                    format!("`{name}` is listed twice"),
                );
            }
        }
        if self.group_consumer_session_timeout_ms == 0 {
            return invalid(
                "group-consumer-session-timeout-ms",
                "must be at least 1".into(),
            );
        }
        if self.group_consumer_heartbeat_interval_ms == 0
            || self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms
        {
            return invalid(
                "group-consumer-heartbeat-interval-ms",
                "must be at least 1 and below group-consumer-session-timeout-ms".into(),
            );
        }
        if self.postgres.is_some() {
            if let Some(dir) = &self.data_dir {
                return invalid(
                    "postgres",
                    format!(
                        "--postgres and --data-dir `{}` both keep the broker's state: give one \
                         (--postgres keeps everything in the database, --data-dir on this \
                         machine's disk)",
                        dir.display()
                    ),
                );
            }
            if self.postgres_pool_size == 0 {
                return invalid("postgres-pool-size", "must be at least 1".into());
            }
            if self.broker_heartbeat_interval_ms == 0
                || self.broker_heartbeat_interval_ms >= self.broker_session_timeout_ms
            {
                return invalid(
                    "broker-heartbeat-interval-ms",
                    format!(
                        "{} must be at least 1 and below broker-session-timeout-ms ({})",
                        self.broker_heartbeat_interval_ms, self.broker_session_timeout_ms
                    ),
                );
            }
        }
        if let Some(ms) = self.offsets_flush_interval_ms {
            let why = if self.postgres.is_some() {
                Some(
                    "applies to the group log of --data-dir; with --postgres every commit is \
                     durable when PostgreSQL commits it",
                )
            } else if self.data_dir.is_none() {
                Some("needs --data-dir: without one, offsets live in memory and nothing is synced")
            } else if self.offsets_store == OffsetsStore::Json {
                Some(
                    "applies to the group log only, not to --offsets-store json (the JSON \
                     store syncs every write)",
                )
            } else {
                None
            };
            if let Some(why) = why {
                return invalid("offsets-flush-interval-ms", format!("{ms}: {why}"));
            }
        }
        self.records.validate()
    }
}

impl BrokerConfig {
    /// Every listener: the first ([`listen`](Self::listen), with
    /// [`security_protocol`](Self::security_protocol)), then [`listeners`](Self::listeners).
    pub fn all_listeners(&self) -> Vec<ListenerSpec> {
        let first = ListenerSpec {
            protocol: self.security_protocol,
            address: self.listen,
        };
        std::iter::once(first)
            .chain(self.listeners.iter().copied())
            .collect()
    }

    /// Client authentication on the listeners of `protocol` (Kafka's `ssl.client.auth`, with
    /// its rules): what [`listener_ssl_client_auth`](Self::listener_ssl_client_auth) says for
    /// the listener; else `required` on an SSL listener when
    /// [`ssl_client_ca`](Self::ssl_client_ca) is given; else `none` (a SASL_SSL listener's
    /// clients authenticate with SASL; a listener without TLS has no certificates).
    pub fn ssl_client_auth(&self, protocol: SecurityProtocol) -> SslClientAuth {
        if !protocol.uses_tls() {
            return SslClientAuth::None;
        }
        if let Some(set) = self
            .listener_ssl_client_auth
            .iter()
            .find(|l| l.listener == protocol)
        {
            return set.mode;
        }
        if protocol == SecurityProtocol::Ssl && self.ssl_client_ca.is_some() {
            SslClientAuth::Required
        } else {
            SslClientAuth::None
        }
    }

    /// The host and port the clients of a listener of `protocol` bound to `address` are told
    /// to connect to: its [`advertised_listeners`](Self::advertised_listeners) entry, else the
    /// bound address (a wildcard advertised as loopback: it cannot be connected to).
    pub(crate) fn advertised(
        &self,
        protocol: SecurityProtocol,
        address: SocketAddr,
    ) -> (String, u16) {
        if let Some(a) = self
            .advertised_listeners
            .iter()
            .find(|a| a.listener == protocol)
        {
            return (a.host.clone(), a.port);
        }
        let host = match address.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => Ipv4Addr::LOCALHOST.to_string(),
            IpAddr::V6(ip) if ip.is_unspecified() => "::1".to_string(),
            ip => ip.to_string(),
        };
        (host, address.port())
    }

    /// Whether a listener's connections authenticate: SASL, or a required client certificate.
    fn authenticates(&self, protocol: SecurityProtocol) -> bool {
        protocol.uses_sasl()
            || (protocol.uses_tls() && self.ssl_client_auth(protocol) == SslClientAuth::Required)
    }

    /// The per-listener settings name configured listeners, once each, and ask for client
    /// certificates only with an authority to check them against.
    fn validate_listener_settings(&self, listeners: &[ListenerSpec]) -> Result<(), BrokerError> {
        let invalid = |setting, reason: String| Err(BrokerError::InvalidConfig { setting, reason });
        let count = |p: SecurityProtocol| listeners.iter().filter(|l| l.protocol == p).count();
        for (i, set) in self.listener_ssl_client_auth.iter().enumerate() {
            let name = set.listener.name();
            if !set.listener.uses_tls() {
                return invalid(
                    "listener-ssl-client-auth",
                    format!("{name} is not a TLS listener: it has no client certificates"),
                );
            }
            if count(set.listener) == 0 {
                return invalid(
                    "listener-ssl-client-auth",
                    format!(
                        "{name}={}: no {name} listener is configured",
                        set.mode.name()
                    ),
                );
            }
            if self.listener_ssl_client_auth[..i]
                .iter()
                .any(|o| o.listener == set.listener)
            {
                return invalid("listener-ssl-client-auth", format!("{name} is set twice"));
            }
            if set.mode != SslClientAuth::None && self.ssl_client_ca.is_none() {
                return invalid(
                    "listener-ssl-client-auth",
                    format!(
                        "{name}={} needs --ssl-client-ca PEM (the authorities client \
                         certificates must chain to)",
                        set.mode.name()
                    ),
                );
            }
        }
        if self.ssl_client_ca.is_some()
            && listeners.iter().any(|l| l.protocol.uses_tls())
            && !listeners
                .iter()
                .any(|l| self.ssl_client_auth(l.protocol) != SslClientAuth::None)
        {
            return invalid(
                "ssl-client-ca",
                "no listener asks for client certificates: an SSL listener requires them with \
                 --ssl-client-ca, a SASL_SSL listener only with --listener-ssl-client-auth \
                 SASL_SSL=required (or requested); its clients authenticate with SASL"
                    .into(),
            );
        }
        for (i, a) in self.advertised_listeners.iter().enumerate() {
            let name = a.listener.name();
            match count(a.listener) {
                0 => {
                    return invalid(
                        "advertised-listeners",
                        format!(
                            "{name}://{}:{}: no {name} listener is configured",
                            a.host, a.port
                        ),
                    )
                }
                1 => {}
                n => {
                    return invalid(
                        "advertised-listeners",
                        format!(
                            "{name} names {n} listeners: advertise a name that only one \
                             listener has"
                        ),
                    )
                }
            }
            if self.advertised_listeners[..i]
                .iter()
                .any(|o| o.listener == a.listener)
            {
                return invalid(
                    "advertised-listeners",
                    format!("{name} is advertised twice"),
                );
            }
        }
        Ok(())
    }

    fn validate_security(&self) -> Result<(), BrokerError> {
        let invalid = |setting, reason: String| Err(BrokerError::InvalidConfig { setting, reason });
        let listeners = self.all_listeners();
        let sasl = listeners.iter().any(|l| l.protocol.uses_sasl());
        let tls = listeners.iter().any(|l| l.protocol.uses_tls());
        self.validate_listener_settings(&listeners)?;
        for (i, l) in listeners.iter().enumerate() {
            if l.address.port() != 0
                && listeners[..i].iter().any(|o| {
                    o.address.port() == l.address.port() && o.address.ip() == l.address.ip()
                })
            {
                return invalid(
                    "listen",
                    format!("two listeners on {}: each needs its own port", l.address),
                );
            }
            if !l.address.ip().is_loopback()
                && !self.authenticates(l.protocol)
                && !self.allow_plaintext_remote
            {
                return invalid(
                    "listen",
                    format!(
                        "{}://{} lets anyone who reaches {} in without authenticating; use \
                         SASL_SSL (or SASL_PLAINTEXT, or SSL with --ssl-client-ca), a loopback \
                         address, or --allow-plaintext-remote if that is what you mean",
                        l.protocol.name(),
                        l.address,
                        l.address.ip()
                    ),
                );
            }
        }
        // The control and metrics ports have no authentication: loopback only, unless
        // allowed outright.
        let unauthenticated_ports = [
            (
                "control-listen",
                self.control_listen,
                "could fail, delay or drop every request",
            ),
            (
                "metrics-listen",
                self.metrics_listen,
                "could read the broker's metrics (its groups, APIs and clients' traffic)",
            ),
        ];
        for (setting, address, what) in unauthenticated_ports {
            if let Some(address) = address {
                if !address.ip().is_loopback() && !self.allow_plaintext_remote {
                    return invalid(
                        setting,
                        format!(
                            "{address} is not a loopback address: anyone who reaches it {what} \
                             without authenticating; use 127.0.0.1 or ::1, or \
                             --allow-plaintext-remote if that is what you mean"
                        ),
                    );
                }
            }
        }
        if sasl && self.users_file.is_none() {
            return invalid(
                "users",
                "a SASL_PLAINTEXT or SASL_SSL listener needs --users FILE (name:password lines)"
                    .into(),
            );
        }
        if sasl && self.sasl_enabled_mechanisms.is_empty() {
            return invalid(
                "sasl-enabled-mechanisms",
                "needs at least one mechanism".into(),
            );
        }
        if !sasl && self.users_file.is_some() {
            return invalid(
                "users",
                "users authenticate on SASL_PLAINTEXT and SASL_SSL listeners only; these are \
                 not (write --listen SASL_SSL://HOST:PORT or SASL_PLAINTEXT://HOST:PORT)"
                    .into(),
            );
        }
        if !self.authorizer && (!self.super_users.is_empty() || self.allow_everyone_if_no_acl_found)
        {
            return invalid(
                if self.super_users.is_empty() {
                    "allow-everyone-if-no-acl-found"
                } else {
                    "super-users"
                },
                "applies to the ACLs, which only --authorizer enforces".into(),
            );
        }
        if let Some(bad) = self
            .super_users
            .iter()
            .find(|p| !matches!(p.split_once(':'), Some((k, n)) if !k.is_empty() && !n.is_empty()))
        {
            return invalid(
                "super-users",
                format!("`{bad}` is not a principal; write User:NAME (several separated by `;`)"),
            );
        }
        let files = [
            ("ssl-certificate", &self.ssl_certificate),
            ("ssl-key", &self.ssl_key),
            ("ssl-client-ca", &self.ssl_client_ca),
        ];
        if tls {
            for (setting, file) in &files[..2] {
                if file.is_none() {
                    return invalid(
                        setting,
                        format!("an SSL or SASL_SSL listener needs --{setting} PEM"),
                    );
                }
            }
        } else if let Some((setting, _)) = files.iter().find(|(_, f)| f.is_some()) {
            return invalid(
                setting,
                format!(
                    "--{setting} is for SSL and SASL_SSL listeners; none is configured \
                     (write --listen SSL://HOST:PORT or SASL_SSL://HOST:PORT)"
                ),
            );
        }
        Ok(())
    }

    /// The listeners that let anyone who reaches them in without authenticating although
    /// they are not on loopback (allowed by `--allow-plaintext-remote`; warned about at start).
    pub(crate) fn unauthenticated_remote_listeners(&self) -> Vec<ListenerSpec> {
        self.all_listeners()
            .into_iter()
            .filter(|l| !l.address.ip().is_loopback() && !self.authenticates(l.protocol))
            .collect()
    }
}

/// Descriptors kept for everything but connections: the listener, the runtime, the group
/// and segment logs' files.
const RESERVED_DESCRIPTORS: usize = 128;

/// The default `--metrics-max-lag-series`: the (group, partition) pairs a scrape shows lag
/// for (three series each).
pub const DEFAULT_METRICS_MAX_LAG_SERIES: usize = 10_000;
/// The most `--metrics-max-lag-series` takes: a million pairs are three million series, a
/// scrape of hundreds of megabytes, already more than Prometheus wants from one target.
pub const MAX_METRICS_MAX_LAG_SERIES: usize = 1_000_000;

/// The default `max-connections`: the process's open-file limit (its soft `RLIMIT_NOFILE`,
/// read from `/proc/self/limits`) less what the rest of the broker needs, at least 16;
/// 1024 where the limit cannot be read.
pub fn default_max_connections() -> usize {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            limits
                .lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
        })
        .and_then(|soft| soft.parse::<usize>().ok())
        .map_or(1024, |soft| {
            soft.saturating_sub(RESERVED_DESCRIPTORS).max(16)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The control port has no authentication: only loopback, unless allowed outright.
    #[test]
    fn a_control_port_off_loopback_needs_allow_plaintext_remote() {
        let control = |address: &str, allow| BrokerConfig {
            control_listen: Some(address.parse().unwrap()),
            allow_plaintext_remote: allow,
            ..BrokerConfig::default()
        };
        for refused in ["0.0.0.0:0", "10.1.2.3:9999", "[::]:0"] {
            let err = control(refused, false).validate().unwrap_err();
            assert_eq!(err.code(), "INVALID_CONFIG");
            let text = err.to_string();
            assert!(
                text.contains("control-listen") && text.contains("loopback"),
                "{text}"
            );
        }
        for ok in [
            control("127.0.0.1:0", false),
            control("[::1]:7000", false),
            control("0.0.0.0:0", true),
            BrokerConfig::default(),
        ] {
            ok.validate().unwrap();
        }
        assert_eq!(
            BrokerConfig::default().control_listen,
            None,
            "off by default"
        );
    }

    /// The metrics port has no authentication either: the control port's check.
    #[test]
    fn a_metrics_port_off_loopback_needs_allow_plaintext_remote() {
        let metrics = |address: &str, allow| BrokerConfig {
            metrics_listen: Some(address.parse().unwrap()),
            allow_plaintext_remote: allow,
            ..BrokerConfig::default()
        };
        for refused in ["0.0.0.0:0", "10.1.2.3:9999", "[::]:0"] {
            let err = metrics(refused, false).validate().unwrap_err();
            assert_eq!(err.code(), "INVALID_CONFIG");
            let text = err.to_string();
            assert!(
                text.contains("metrics-listen") && text.contains("loopback"),
                "{text}"
            );
        }
        for ok in [
            metrics("127.0.0.1:0", false),
            metrics("[::1]:9404", false),
            metrics("0.0.0.0:0", true),
        ] {
            ok.validate().unwrap();
        }
        assert_eq!(
            BrokerConfig::default().metrics_listen,
            None,
            "off by default"
        );
    }

    #[test]
    fn a_postgres_url_is_shown_without_its_password() {
        for (given, shown) in [
            (
                "postgres://broker:s3cret@db:5432/kafka",
                "postgres://broker:***@db:5432/kafka",
            ),
            (
                "postgresql://broker:s3:cr@t@db/kafka?sslmode=disable",
                "postgresql://broker:***@db/kafka?sslmode=disable",
            ),
            (
                "postgres://db/kafka?password=s3cret&x=1",
                "postgres://db/kafka?password=***&x=1",
            ),
            (
                "host=db user=broker password='s3 \\' cret' dbname=kafka",
                "host=db user=broker password=*** dbname=kafka",
            ),
            ("host=db password=s3cret", "host=db password=***"),
            ("postgres://broker@db/kafka", "postgres://broker@db/kafka"),
            ("host=db mypassword=x", "host=db mypassword=x"),
        ] {
            let url: PostgresUrl = given.parse().unwrap();
            assert_eq!(url.redacted(), shown, "{given}");
            assert_eq!(format!("{url}"), shown);
            assert!(!format!("{url:?}").contains("s3"), "{url:?}");
            assert_eq!(url.as_str(), given);
        }
        assert!(" ".parse::<PostgresUrl>().is_err());
    }

    #[test]
    fn postgres_and_a_data_directory_are_refused_together() {
        let both = BrokerConfig {
            postgres: Some(PostgresUrl::new("postgres://u:p@h/d")),
            data_dir: Some("/var/lib/broker".into()),
            ..BrokerConfig::default()
        };
        let err = both.validate().unwrap_err();
        assert_eq!(err.code(), "INVALID_CONFIG");
        assert!(
            err.to_string()
                .contains("--postgres and --data-dir `/var/lib/broker`"),
            "{err}"
        );
        assert!(!err.to_string().contains("u:p@"), "{err}");
        let flush = BrokerConfig {
            postgres: Some(PostgresUrl::new("postgres://u:p@h/d")),
            offsets_flush_interval_ms: Some(100),
            ..BrokerConfig::default()
        };
        assert!(flush
            .validate()
            .unwrap_err()
            .to_string()
            .contains("with --postgres"));
        let ok = BrokerConfig {
            postgres: Some(PostgresUrl::new("postgres://u:p@h/d")),
            ..BrokerConfig::default()
        };
        ok.validate().unwrap();
        assert!(matches!(
            ok.store(),
            StoreConfig::Postgres { pool_size: 16, .. }
        ));
        assert!(!format!("{:?}", ok.store()).contains("u:p@"));
        for (heartbeat, session) in [(0, 9000), (9000, 9000), (10_000, 9000)] {
            let lease = BrokerConfig {
                postgres: Some(PostgresUrl::new("postgres://u:p@h/d")),
                broker_heartbeat_interval_ms: heartbeat,
                broker_session_timeout_ms: session,
                ..BrokerConfig::default()
            };
            let err = lease.validate().unwrap_err().to_string();
            assert!(
                err.contains("broker-heartbeat-interval-ms") && err.contains("below"),
                "{heartbeat}/{session}: {err}"
            );
        }
    }

    #[test]
    fn transaction_settings_are_checked() {
        assert!(BrokerConfig::default().validate().is_ok());
        let cases = [
            BrokerConfig {
                transaction_max_timeout_ms: 0,
                ..BrokerConfig::default()
            },
            BrokerConfig {
                transaction_abort_timed_out_cleanup_interval_ms: 0,
                ..BrokerConfig::default()
            },
            BrokerConfig {
                transactional_id_expiration_ms: u64::from(u32::MAX),
                ..BrokerConfig::default()
            },
        ];
        for (config, setting) in cases.into_iter().zip([
            "transaction-max-timeout-ms",
            "transaction-abort-timed-out-transaction-cleanup-interval-ms",
            "transactional-id-expiration-ms",
        ]) {
            let err = config.validate().unwrap_err();
            assert_eq!(err.code(), "INVALID_CONFIG");
            assert!(err.to_string().contains(setting), "{err}");
        }
    }

    #[test]
    fn topic_specs_parse_name_and_count() {
        let t: TopicSpec = "orders.v2:4".parse().unwrap();
        assert_eq!((t.name.as_str(), t.partitions), ("orders.v2", 4));
        for bad in ["orders", "orders:", ":3", "orders:-1", "orders:x"] {
            let err = bad.parse::<TopicSpec>().unwrap_err();
            assert_eq!(err.code(), "INVALID_CONFIG", "{bad}");
        }
    }

    #[test]
    fn listeners_parse_with_and_without_a_protocol() {
        let l: ListenerSpec = "127.0.0.1:9092".parse().unwrap();
        assert_eq!(l.protocol, SecurityProtocol::Plaintext);
        assert_eq!(l.address, "127.0.0.1:9092".parse().unwrap());
        let l: ListenerSpec = "SASL_PLAINTEXT://[::1]:0".parse().unwrap();
        assert_eq!(l.protocol, SecurityProtocol::SaslPlaintext);
        assert_eq!(l.address, "[::1]:0".parse().unwrap());
        let l: ListenerSpec = "plaintext://0.0.0.0:1".parse().unwrap();
        assert_eq!(l.protocol, SecurityProtocol::Plaintext);
        for bad in [
            "TLS://127.0.0.1:1",
            "SASL_PLAINTEXT://localhost",
            "127.0.0.1",
            "",
        ] {
            let err = bad.parse::<ListenerSpec>().unwrap_err();
            assert_eq!(err.code(), "INVALID_CONFIG", "{bad}");
        }
    }

    #[test]
    fn security_settings_are_checked() {
        let sasl = |users: Option<&str>| BrokerConfig {
            security_protocol: SecurityProtocol::SaslPlaintext,
            users_file: users.map(PathBuf::from),
            ..BrokerConfig::default()
        };
        assert!(sasl(Some("/u")).validate().is_ok());
        let cases = [
            (sasl(None), "needs --users"),
            (
                BrokerConfig {
                    sasl_enabled_mechanisms: Vec::new(),
                    ..sasl(Some("/u"))
                },
                "at least one mechanism",
            ),
            (
                BrokerConfig {
                    security_protocol: SecurityProtocol::Plaintext,
                    ..sasl(Some("/u"))
                },
                "SASL_SSL listeners only",
            ),
            (
                BrokerConfig {
                    security_protocol: SecurityProtocol::SaslSsl,
                    ..sasl(Some("/u"))
                },
                "needs --ssl-certificate",
            ),
            (
                BrokerConfig {
                    security_protocol: SecurityProtocol::Ssl,
                    ssl_certificate: Some("/c".into()),
                    ..BrokerConfig::default()
                },
                "needs --ssl-key",
            ),
            (
                BrokerConfig {
                    ssl_client_ca: Some("/ca".into()),
                    ..BrokerConfig::default()
                },
                "--ssl-client-ca is for SSL and SASL_SSL listeners",
            ),
            (
                BrokerConfig {
                    listen: "0.0.0.0:9092".parse().unwrap(),
                    ..BrokerConfig::default()
                },
                "--allow-plaintext-remote",
            ),
            (
                BrokerConfig {
                    listen: "10.0.0.1:9093".parse().unwrap(),
                    security_protocol: SecurityProtocol::Ssl,
                    ssl_certificate: Some("/c".into()),
                    ssl_key: Some("/k".into()),
                    ..BrokerConfig::default()
                },
                "SSL://10.0.0.1:9093 lets anyone",
            ),
            (
                BrokerConfig {
                    listeners: vec!["SASL_PLAINTEXT://127.0.0.1:9092".parse().unwrap()],
                    ..sasl(Some("/u"))
                },
                "two listeners on 127.0.0.1:9092",
            ),
            (
                BrokerConfig {
                    super_users: vec!["User:admin".into()],
                    ..BrokerConfig::default()
                },
                "only --authorizer enforces",
            ),
            (
                BrokerConfig {
                    authorizer: true,
                    super_users: vec!["admin".into()],
                    ..BrokerConfig::default()
                },
                "`admin` is not a principal",
            ),
        ];
        for (c, expect) in cases {
            let err = c.validate().unwrap_err();
            assert_eq!(err.code(), "INVALID_CONFIG");
            assert!(err.to_string().contains(expect), "{err}");
        }
        // what is accepted: a remote listener that authenticates, or one allowed outright
        let tls = |protocol, ip: &str, ca: bool, allow| BrokerConfig {
            listen: format!("{ip}:9093").parse().unwrap(),
            security_protocol: protocol,
            ssl_certificate: Some("/c".into()),
            ssl_key: Some("/k".into()),
            ssl_client_ca: ca.then(|| "/ca".into()),
            allow_plaintext_remote: allow,
            users_file: protocol.uses_sasl().then(|| "/u".into()),
            ..BrokerConfig::default()
        };
        for ok in [
            tls(SecurityProtocol::SaslSsl, "0.0.0.0", false, false),
            tls(SecurityProtocol::Ssl, "10.0.0.1", true, false),
            tls(SecurityProtocol::Ssl, "10.0.0.1", false, true),
            tls(SecurityProtocol::Ssl, "127.0.0.1", false, false),
            BrokerConfig {
                listen: "0.0.0.0:9092".parse().unwrap(),
                allow_plaintext_remote: true,
                ..BrokerConfig::default()
            },
            BrokerConfig {
                listeners: vec!["SASL_PLAINTEXT://127.0.0.1:9094".parse().unwrap()],
                users_file: Some("/u".into()),
                ..tls(SecurityProtocol::Ssl, "127.0.0.1", false, false)
            },
        ] {
            let l = ok.all_listeners();
            assert!(ok.validate().is_ok(), "{l:?}: {:?}", ok.validate());
        }
        let allowed = BrokerConfig {
            listen: "0.0.0.0:9092".parse().unwrap(),
            listeners: vec!["127.0.0.1:9094".parse().unwrap()],
            allow_plaintext_remote: true,
            ..BrokerConfig::default()
        };
        assert_eq!(
            allowed.unauthenticated_remote_listeners(),
            vec![allowed.all_listeners()[0]]
        );
        assert_eq!(
            "SCRAM-SHA-512".parse::<SaslMechanism>().unwrap(),
            SaslMechanism::ScramSha512
        );
        let err = "GSSAPI".parse::<SaslMechanism>().unwrap_err();
        assert!(err.to_string().contains("not served"), "{err}");
    }

    #[test]
    fn validation_names_the_setting() {
        let mut c = BrokerConfig::default();
        assert!(c.validate().is_ok());
        c.group_min_session_timeout_ms = 10;
        c.group_max_session_timeout_ms = 5;
        let err = c.validate().unwrap_err();
        assert!(
            err.to_string().contains("group-min-session-timeout-ms"),
            "{err}"
        );
        let c = BrokerConfig {
            max_connections: 0,
            ..BrokerConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("max-connections"));
        let c = BrokerConfig {
            metrics_max_lag_series: MAX_METRICS_MAX_LAG_SERIES + 1,
            ..BrokerConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("metrics-max-lag-series"));
        for fine in [0, MAX_METRICS_MAX_LAG_SERIES] {
            let c = BrokerConfig {
                metrics_max_lag_series: fine,
                ..BrokerConfig::default()
            };
            assert!(c.validate().is_ok(), "{fine}");
        }
    }

    /// Kafka's rule: `queued.max.request.bytes` unbounded (-1 here) or at least
    /// `socket.request.max.bytes`, so one request always fits.
    #[test]
    fn the_frames_memory_bound_holds_one_frame_or_is_unbounded() {
        let with = |queued, max_frame| BrokerConfig {
            queued_max_request_bytes: queued,
            max_frame_bytes: max_frame,
            ..BrokerConfig::default()
        };
        assert_eq!(BrokerConfig::default().queued_max_request_bytes(), None);
        assert_eq!(with(-1, 1024).queued_max_request_bytes(), None);
        let c = with(1024, 1024);
        assert!(c.validate().is_ok());
        assert_eq!(c.queued_max_request_bytes(), Some(1024));
        for queued in [0, -2, 1023, i64::MIN] {
            let err = with(queued, 1024).validate().unwrap_err();
            assert_eq!(err.code(), "INVALID_CONFIG");
            let message = err.to_string();
            assert!(
                message.starts_with("invalid setting `queued-max-request-bytes`: ")
                    && message.contains("at least max-frame-bytes (1024)"),
                "{message}"
            );
        }
    }

    #[test]
    fn the_flush_interval_needs_the_log_of_a_data_directory() {
        let with = |dir: Option<&str>, store| BrokerConfig {
            data_dir: dir.map(PathBuf::from),
            offsets_store: store,
            offsets_flush_interval_ms: Some(100),
            ..BrokerConfig::default()
        };
        let c = with(Some("/data"), OffsetsStore::Log);
        assert!(c.validate().is_ok());
        assert_eq!(
            c.store(),
            StoreConfig::Log {
                dir: "/data".into(),
                flush_interval_ms: Some(100)
            }
        );
        for (c, needs) in [
            (with(None, OffsetsStore::Log), "needs --data-dir"),
            (
                with(Some("/data"), OffsetsStore::Json),
                "--offsets-store json",
            ),
        ] {
            let err = c.validate().unwrap_err();
            assert_eq!(err.code(), "INVALID_CONFIG");
            let message = err.to_string();
            assert!(
                message.starts_with("invalid setting `offsets-flush-interval-ms`: 100: ")
                    && message.contains(needs),
                "{message}"
            );
        }
        let json = BrokerConfig {
            offsets_flush_interval_ms: None,
            ..with(Some("/data"), OffsetsStore::Json)
        };
        assert_eq!(
            json.store(),
            StoreConfig::JsonFile {
                dir: "/data".into()
            }
        );
        assert_eq!(BrokerConfig::default().store(), StoreConfig::Memory);
    }

    #[test]
    fn the_records_settings_are_kafkas_and_validated() {
        let r = RecordsConfig::default();
        assert_eq!(
            (
                r.flush_interval_ms,
                r.segment_bytes,
                r.retention_ms,
                r.retention_bytes
            ),
            (None, 1 << 30, 604_800_000, -1)
        );
        for (records, setting) in [
            (
                RecordsConfig {
                    flush_interval_ms: Some(0),
                    ..r
                },
                "log-flush-interval-ms",
            ),
            (
                RecordsConfig {
                    segment_bytes: 10,
                    ..r
                },
                "log-segment-bytes",
            ),
            (
                RecordsConfig {
                    cleaner_backoff_ms: 0,
                    ..r
                },
                "log-cleaner-backoff-ms",
            ),
            (
                RecordsConfig {
                    cleaner_dedupe_buffer_size: 10,
                    ..r
                },
                "log-cleaner-dedupe-buffer-size",
            ),
            (
                RecordsConfig {
                    retention_ms: -2,
                    ..r
                },
                "log-retention-ms",
            ),
            (
                RecordsConfig {
                    retention_bytes: -5,
                    ..r
                },
                "log-retention-bytes",
            ),
        ] {
            let c = BrokerConfig {
                records,
                ..BrokerConfig::default()
            };
            let err = c.validate().unwrap_err().to_string();
            assert!(err.contains(setting), "{err}");
        }
    }
}
