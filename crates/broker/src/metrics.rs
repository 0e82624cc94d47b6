//! The broker's metrics (`--metrics-listen HOST:PORT`): `GET /metrics` in the Prometheus text
//! format (0.0.4), from the Prometheus organisation's `prometheus-client` crate.
//!
//! # Names
//!
//! Kafka publishes its metrics over JMX as `DOMAIN:type=TYPE,name=NAME,TAG=VALUE…`. One
//! mapping gives the Prometheus names here, everywhere:
//!
//! - the name is `DOMAIN_TYPE_NAME`, lower case, every `.` and `-` made `_`
//!   (`kafka.network:type=RequestMetrics,name=…` → `kafka_network_requestmetrics_…`);
//! - Kafka's tags are the labels, with their names (`request`, `version`, `error`,
//!   `listener`, `protocol`, `state`);
//! - a meter (`…PerSec`) is a counter: the `PerSec` goes and the counter's `_total` comes
//!   (Prometheus's `rate()` gives the rate); a `…-total` counter keeps its name
//!   (`incoming-byte-total` → `incoming_byte_total`);
//! - a time in milliseconds (`TotalTimeMs`) is a histogram in seconds, Prometheus's unit
//!   (`totaltime_seconds`).
//!
//! | Prometheus | Kafka |
//! | --- | --- |
//! | `kafka_network_requestmetrics_requests_total{request,version}` | `kafka.network:type=RequestMetrics,name=RequestsPerSec,request=…,version=…` |
//! | `kafka_network_requestmetrics_errors_total{request,error}` | `kafka.network:type=RequestMetrics,name=ErrorsPerSec,request=…,error=…` |
//! | `kafka_network_requestmetrics_totaltime_seconds{request}` | `kafka.network:type=RequestMetrics,name=TotalTimeMs,request=…` |
//! | `kafka_server_socket_server_metrics_connection_count{listener,address}` | `kafka.server:type=socket-server-metrics,listener=…,networkProcessor=…,name=connection-count` |
//! | `kafka_server_socket_server_metrics_incoming_byte_total{listener,address}` | `kafka.server:type=socket-server-metrics,…,name=incoming-byte-total` |
//! | `kafka_server_socket_server_metrics_outgoing_byte_total{listener,address}` | `kafka.server:type=socket-server-metrics,…,name=outgoing-byte-total` |
//! | `kafka_server_group_coordinator_metrics_group_count{protocol,state}` | `kafka.server:type=group-coordinator-metrics,name=group-count,protocol=…` (KIP-848), by state as `consumer-group-count,state=…` and the classic `NumGroups<State>` |
//!
//! `error` is Kafka's error name (`NONE`, `UNKNOWN_MEMBER_ID`, …) of the response's top-level
//! code; a response without one counts under its first partition's error for a commit
//! (OffsetCommit, TxnOffsetCommit: refused whole, every partition carries it) and not at
//! all otherwise. `address` is the listener's bound address (Kafka's tag is its network
//! processor; this broker has none). Nothing is recorded without `--metrics-listen`.

use std::any::Any;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordinator_core::Coordinator;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, OffsetCommitResponse, TxnOffsetCommitResponse};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, Semaphore};
use tracing::{debug, info, warn};

use crate::config::SecurityProtocol;
use crate::shutdown::Shutdown;

/// An API as a label value: Kafka's name of it (`ApiVersions`, `OffsetCommit`), written only
/// when scraped (the label set is two words, built without allocating per request).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Api(ApiKey);

impl EncodeLabelValue for Api {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        write!(encoder, "{:?}", self.0)
    }
}

/// A Kafka error code as a label value: Kafka's name (`NONE`, `UNKNOWN_MEMBER_ID`); an
/// unknown code as its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ErrorName(i16);

impl EncodeLabelValue for ErrorName {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        match ResponseError::try_from_code(self.0) {
            None => encoder.write_str("NONE"),
            Some(ResponseError::Unknown(code)) => write!(encoder, "{code}"),
            // kafka-protocol names them in CamelCase (`UnknownMemberId`); Kafka's `Errors`
            // in upper snake case (`UNKNOWN_MEMBER_ID`).
            Some(known) => {
                let camel = format!("{known:?}");
                for (i, c) in camel.chars().enumerate() {
                    if c.is_ascii_uppercase() && i > 0 {
                        encoder.write_char('_')?;
                    }
                    encoder.write_char(c.to_ascii_uppercase())?;
                }
                Ok(())
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    request: Api,
    version: i16,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ErrorLabels {
    request: Api,
    error: ErrorName,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ApiLabels {
    request: Api,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ListenerLabels {
    listener: &'static str,
    address: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct GroupLabels {
    protocol: &'static str,
    state: &'static str,
}

type Histograms = Family<ApiLabels, Histogram, fn() -> Histogram>;

/// The request latency buckets: 0.5 ms to about 16 s, doubling.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// The broker's metrics: recorded by the connections' handlers, read by the scrape.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    latency: Histograms,
    connections: Family<ListenerLabels, Gauge>,
    bytes_in: Family<ListenerLabels, Counter>,
    bytes_out: Family<ListenerLabels, Counter>,
    groups: Family<GroupLabels, Gauge>,
    /// One scrape at a time: the groups' gauges are set from the coordinator, then encoded.
    scrape: tokio::sync::Mutex<()>,
}

/// What one listener's connections record into: its connection gauge and byte counters,
/// made once per listener (a connection clones them: no lookup, no allocation).
#[derive(Clone, Debug)]
pub(crate) struct ListenerMetrics {
    metrics: Arc<Metrics>,
    connections: Gauge,
    bytes_in: Counter,
    bytes_out: Counter,
}

/// An open connection, counted in its listener's gauge until dropped.
#[derive(Debug)]
pub(crate) struct OpenConnection(Gauge);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "kafka_network_requestmetrics_requests",
            "Requests answered, by API and version (Kafka's RequestsPerSec)",
            requests.clone(),
        );
        let errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "kafka_network_requestmetrics_errors",
            "Responses by API and Kafka error code, NONE included (Kafka's ErrorsPerSec)",
            errors.clone(),
        );
        let latency: Histograms = Family::new_with_constructor(latency_histogram);
        registry.register(
            "kafka_network_requestmetrics_totaltime_seconds",
            "Time from a request read to its answer written, by API (Kafka's TotalTimeMs)",
            latency.clone(),
        );
        let connections = Family::<ListenerLabels, Gauge>::default();
        registry.register(
            "kafka_server_socket_server_metrics_connection_count",
            "Connections open, by listener (Kafka's socket-server-metrics connection-count)",
            connections.clone(),
        );
        let bytes_in = Family::<ListenerLabels, Counter>::default();
        registry.register(
            "kafka_server_socket_server_metrics_incoming_byte",
            "Bytes of request frames read, by listener (Kafka's incoming-byte-total)",
            bytes_in.clone(),
        );
        let bytes_out = Family::<ListenerLabels, Counter>::default();
        registry.register(
            "kafka_server_socket_server_metrics_outgoing_byte",
            "Bytes of response frames written, by listener (Kafka's outgoing-byte-total)",
            bytes_out.clone(),
        );
        let groups = Family::<GroupLabels, Gauge>::default();
        registry.register(
            "kafka_server_group_coordinator_metrics_group_count",
            "Groups by protocol (classic, consumer) and state (Kafka's group-count, \
             consumer-group-count and NumGroups<State>)",
            groups.clone(),
        );
        Metrics {
            registry,
            requests,
            errors,
            latency,
            connections,
            bytes_in,
            bytes_out,
            groups,
            scrape: tokio::sync::Mutex::new(()),
        }
    }

    /// The gauge and counters of one listener, made at start.
    pub(crate) fn listener(
        self: &Arc<Self>,
        protocol: SecurityProtocol,
        address: SocketAddr,
    ) -> ListenerMetrics {
        let labels = ListenerLabels {
            listener: protocol.name(),
            address: address.to_string(),
        };
        ListenerMetrics {
            metrics: self.clone(),
            connections: self.connections.get_or_create_owned(&labels),
            bytes_in: self.bytes_in.get_or_create_owned(&labels),
            bytes_out: self.bytes_out.get_or_create_owned(&labels),
        }
    }

    /// The text of a scrape: the groups read from the coordinator now, then every family.
    async fn encode(&self, coordinator: &Coordinator) -> Result<String, std::fmt::Error> {
        let _one = self.scrape.lock().await;
        let listed = coordinator.list_groups().await;
        self.groups.clear();
        for g in &listed {
            self.groups
                .get_or_create(&GroupLabels {
                    protocol: crate::api::groups::group_type(g.kind),
                    state: g.state.as_str(),
                })
                .inc();
        }
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

impl ListenerMetrics {
    /// A connection opened on the listener: counted until the value is dropped.
    pub(crate) fn opened(&self) -> OpenConnection {
        self.connections.inc();
        OpenConnection(self.connections.clone())
    }

    /// A request frame of `bytes` (without its length prefix) was read: its time starts.
    pub(crate) fn read(&self, bytes: usize) -> Instant {
        self.bytes_in.inc_by(frame_bytes(bytes));
        Instant::now()
    }

    /// The request read at `started` was answered: `written` bytes (the whole frame, `0` for
    /// no answer) with the response's error code (`None`: not counted among the errors).
    pub(crate) fn answered(
        &self,
        started: Instant,
        key: ApiKey,
        version: i16,
        error_code: Option<i16>,
        written: usize,
    ) {
        let m = &self.metrics;
        let request = Api(key);
        m.requests
            .get_or_create(&RequestLabels { request, version })
            .inc();
        if let Some(code) = error_code {
            m.errors
                .get_or_create(&ErrorLabels {
                    request,
                    error: ErrorName(code),
                })
                .inc();
        }
        m.latency
            .get_or_create(&ApiLabels { request })
            .observe(started.elapsed().as_secs_f64());
        self.bytes_out.inc_by(written as u64);
    }
}

/// A frame's bytes on the wire: its body and the 4-byte length before it.
fn frame_bytes(body: usize) -> u64 {
    (body as u64).saturating_add(4)
}

/// The code a response is counted under in `errors_total`: its top-level error code, or for
/// a commit (which has none) its first partition's error, a commit being refused whole.
pub(crate) fn response_code(body: &dyn Any, version: i16) -> Option<i16> {
    if let Some(code) = crate::faults::top_level_code(body, version) {
        return Some(code);
    }
    let codes: Box<dyn Iterator<Item = i16>> =
        if let Some(r) = body.downcast_ref::<OffsetCommitResponse>() {
            Box::new(
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            )
        } else if let Some(r) = body.downcast_ref::<TxnOffsetCommitResponse>() {
            Box::new(
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            )
        } else {
            return None;
        };
    let mut first = None;
    for code in codes {
        if code != 0 {
            return Some(code);
        }
        first.get_or_insert(code);
    }
    first
}

/// The most metrics connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 16;
/// The longest request head read (request line and headers); a longer one is answered 431.
const MAX_REQUEST: usize = 8 * 1024;
/// How long a scraper has to send its request and read the answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The bound metrics listener (`--metrics-listen`).
///
/// HTTP is written by hand here rather than with hyper: hyper is not in the dependency tree,
/// and a scrape needs one thing, `GET /metrics` answered and the connection closed. The
/// request head is read up to [`MAX_REQUEST`] bytes within [`TIMEOUT`]; anything but a GET
/// of `/metrics` is answered 404 (or 405, 400, 431) and closed.
#[derive(Debug)]
pub(crate) struct MetricsListener {
    listener: TcpListener,
    address: SocketAddr,
}

impl MetricsListener {
    pub(crate) async fn bind(address: SocketAddr) -> Result<MetricsListener, crate::BrokerError> {
        let bind_failed = |source| crate::BrokerError::Bind { address, source };
        let listener = TcpListener::bind(address).await.map_err(bind_failed)?;
        let address = listener.local_addr().map_err(bind_failed)?;
        info!(%address, "metrics listener (GET /metrics; no authentication)");
        Ok(MetricsListener { listener, address })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Serves scrapes until the shutdown signal.
    pub(crate) async fn serve(
        self,
        metrics: Arc<Metrics>,
        coordinator: Arc<Coordinator>,
        notify: broadcast::Receiver<()>,
    ) {
        let mut shutdown = Shutdown::new(notify.resubscribe());
        let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let accept = async {
            loop {
                let Ok(permit) = limit.clone().acquire_owned().await else {
                    return;
                };
                let (socket, peer) = match self.listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        warn!(error = %e, "metrics listener: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let metrics = metrics.clone();
                let coordinator = coordinator.clone();
                let mut stop = Shutdown::new(notify.resubscribe());
                tokio::spawn(async move {
                    let served = tokio::time::timeout(
                        TIMEOUT,
                        http_connection(socket, &metrics, &coordinator),
                    );
                    tokio::select! {
                        outcome = served => match outcome {
                            Ok(Ok(())) => {}
                            Ok(Err(e)) => debug!(%peer, error = %e, "metrics connection failed"),
                            Err(_) => debug!(%peer, "metrics connection timed out"),
                        },
                        () = stop.recv() => {}
                    }
                    drop(permit);
                });
            }
        };
        tokio::select! {
            () = accept => {}
            () = shutdown.recv() => {}
        }
    }
}

/// Reads one request head and answers it, then the connection closes.
async fn http_connection(
    mut socket: TcpStream,
    metrics: &Metrics,
    coordinator: &Coordinator,
) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let complete = loop {
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            break true;
        }
        if head.len() > MAX_REQUEST {
            break false;
        }
        let n = socket.read(&mut buf).await?;
        if n == 0 {
            // Closed before the head ended: a request line alone still gets its answer.
            break !head.is_empty();
        }
        head.extend_from_slice(&buf[..n]);
    };
    let answer = if complete {
        answer(&head, metrics, coordinator).await
    } else {
        plain(
            431,
            "Request Header Fields Too Large",
            "request too large\n",
        )
    };
    socket.write_all(&answer).await?;
    socket.shutdown().await
}

/// The answer to a request head.
async fn answer(head: &[u8], metrics: &Metrics, coordinator: &Coordinator) -> Vec<u8> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_ascii_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return plain(400, "Bad Request", "bad request line\n");
    };
    let path = target.split(['?', '#']).next().unwrap_or_default();
    if path != "/metrics" {
        return plain(404, "Not Found", "not found: the metrics are at /metrics\n");
    }
    if method != "GET" && method != "HEAD" {
        return plain(405, "Method Not Allowed", "GET /metrics\n");
    }
    match metrics.encode(coordinator).await {
        Ok(text) => {
            let body = if method == "HEAD" { "" } else { text.as_str() };
            response(
                200,
                "OK",
                prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                text.len(),
                body,
            )
        }
        Err(_) => plain(
            500,
            "Internal Server Error",
            "the metrics could not be encoded\n",
        ),
    }
}

fn plain(status: u16, reason: &str, body: &str) -> Vec<u8> {
    response(
        status,
        reason,
        "text/plain; charset=utf-8",
        body.len(),
        body,
    )
}

fn response(status: u16, reason: &str, content_type: &str, length: usize, body: &str) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: \
         {length}\r\nConnection: close\r\n\r\n"
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::offset_commit_response::{
        OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    };

    #[test]
    fn apis_and_error_codes_are_named_as_kafka_names_them() {
        let metrics = Metrics::new();
        for code in [0, 25, 79, 9999] {
            metrics
                .errors
                .get_or_create(&ErrorLabels {
                    request: Api(ApiKey::OffsetCommit),
                    error: ErrorName(code),
                })
                .inc();
        }
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &metrics.registry).unwrap();
        for error in ["NONE", "UNKNOWN_MEMBER_ID", "MEMBER_ID_REQUIRED", "9999"] {
            let series = format!(
                "kafka_network_requestmetrics_errors_total{{request=\"OffsetCommit\",error=\"{error}\"}} 1\n"
            );
            assert!(text.contains(&series), "{series} in {text}");
        }
    }

    #[test]
    fn a_commit_counts_under_its_first_partition_error() {
        let partitions = |codes: &[i16]| {
            OffsetCommitResponse::default().with_topics(vec![OffsetCommitResponseTopic::default()
                .with_partitions(
                    codes
                        .iter()
                        .map(|&c| OffsetCommitResponsePartition::default().with_error_code(c))
                        .collect(),
                )])
        };
        assert_eq!(response_code(&partitions(&[0, 25, 22]), 8), Some(25));
        assert_eq!(response_code(&partitions(&[0, 0]), 8), Some(0));
        assert_eq!(response_code(&partitions(&[]), 8), None);
    }
}
