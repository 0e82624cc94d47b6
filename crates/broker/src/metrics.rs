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
//!   (`incoming-byte-total` → `incoming_byte_total`); a Kafka `Meter` published as a pair
//!   `X-rate` and `X-count` is one counter `X_total` in the same way (`offset-commit-rate`
//!   and `offset-commit-count` → `offset_commit_total`);
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
//! | `kafka_server_group_coordinator_metrics_group_rebalance_total` | `…group-coordinator-metrics,name=group-rebalance-count` / `-rate` (classic) |
//! | `kafka_server_group_coordinator_metrics_group_completed_rebalance_total` | `…,name=group-completed-rebalance-count` / `-rate` (classic) |
//! | `kafka_server_group_coordinator_metrics_consumer_group_rebalance_total` | `…,name=consumer-group-rebalance-count` / `-rate` (KIP-848) |
//! | `kafka_server_group_coordinator_metrics_share_group_rebalance_total` | `…,name=share-group-rebalance-count` / `-rate` (KIP-932) |
//! | `kafka_server_group_coordinator_metrics_offset_commit_total` | `…,name=offset-commit-count` / `-rate` |
//! | `kafka_server_group_coordinator_metrics_offset_expiration_total` | `…,name=offset-expiration-count` / `-rate` |
//! | `kafka_server_group_coordinator_metrics_offset_deletion_total` | `…,name=offset-deletion-count` / `-rate` |
//! | `kafka_coordinator_group_groupmetadatamanager_numoffsets` | `kafka.coordinator.group:type=GroupMetadataManager,name=NumOffsets` |
//! | `kafka_log_logflushstats_logflushrateandtime_seconds{log}` | `kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs` |
//!
//! The log flushes are timed by the logs themselves, through the observer each log's builder
//! takes ([`Metrics::log_flush_observer`], passed to `SegmentLogBuilder::on_sync` and
//! `LogStoreBuilder::on_sync`): a histogram per log, `log="records"` (the partitions'
//! segment log) and `log="groups"` (the group log), each `fdatasync` of the log's data
//! observed once with its duration; the histogram's `_count` is Kafka's flush count, its
//! `rate()` the flush rate. Only a log this broker keeps on its own disk has the series
//! (`--data-dir`; not the memory log, the JSON file nor PostgreSQL).
//!
//! The coordinator's counts are read from [`Coordinator::stats`] and the offsets from the
//! store at each scrape: recording them costs the commit path one relaxed atomic add.
//!
//! Per group and partition, kafka-exporter's names (Kafka has no such metric over JMX):
//! `kafka_consumergroup_current_offset{consumergroup,topic,partition}` (the committed
//! offset), `kafka_consumergroup_lag{…}` (the log end less it; negative if a commit is past
//! the log end), `kafka_topic_partition_current_offset{topic,partition}` (the log end, its
//! high watermark) and `kafka_consumergroup_members{consumergroup}`; at most
//! `--metrics-max-lag-series` (group, partition) pairs, the rest counted in
//! `consumer_groups_lag_series_omitted` (this project's own name).
//!
//! `error` is Kafka's error name (`NONE`, `UNKNOWN_MEMBER_ID`, …) of the response's top-level
//! code; a response without one counts under its first partition's error for a commit
//! (OffsetCommit, TxnOffsetCommit: refused whole, every partition carries it) and not at
//! all otherwise. `address` is the listener's bound address (Kafka's tag is its network
//! processor; this broker has none). Without `--metrics-listen` the broker records nothing
//! (the coordinator's [`stats`](Coordinator::stats) count whatever the flags).

use std::any::Any;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordinator_core::{Coordinator, CoordinatorStats, ListedGroup, TopicPartition};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, OffsetCommitResponse, TxnOffsetCommitResponse};
use partition_log::PartitionLog;
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

/// Which log a flush was of: `records` (the partitions' log) or `groups` (the group log).
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct LogLabels {
    log: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct GroupLabels {
    protocol: &'static str,
    state: &'static str,
}

/// kafka-exporter's labels of a group's series.
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ConsumerGroupLabels {
    consumergroup: String,
}

/// kafka-exporter's labels of a group's partition.
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct GroupPartitionLabels {
    consumergroup: String,
    topic: String,
    partition: u32,
}

/// kafka-exporter's labels of a partition.
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PartitionLabels {
    topic: String,
    partition: u32,
}

/// The group coordinator's counts ([`Coordinator::stats`]) as Kafka's meters, set from the
/// coordinator at each scrape.
#[derive(Debug, Default)]
struct CoordinatorCounters {
    group_rebalance: Counter,
    group_completed_rebalance: Counter,
    consumer_group_rebalance: Counter,
    share_group_rebalance: Counter,
    offset_commit: Counter,
    offset_expiration: Counter,
    offset_deletion: Counter,
}

impl CoordinatorCounters {
    fn register(&self, registry: &mut Registry) {
        let meters: [(&str, &str, &Counter); 7] = [
            (
                "group_rebalance",
                "Generations installed in classic groups (a join barrier completed) and the \
                 chapter's groups (Kafka's group-rebalance-count/-rate)",
                &self.group_rebalance,
            ),
            (
                "group_completed_rebalance",
                "Classic rebalances completed: the leader's assignment installed, the group \
                 Stable (Kafka's group-completed-rebalance-count/-rate)",
                &self.group_completed_rebalance,
            ),
            (
                "consumer_group_rebalance",
                "Group epochs bumped in consumer-protocol groups, KIP-848 \
                 (Kafka's consumer-group-rebalance-count/-rate)",
                &self.consumer_group_rebalance,
            ),
            (
                "share_group_rebalance",
                "Group epochs bumped in share groups, KIP-932 \
                 (Kafka's share-group-rebalance-count/-rate)",
                &self.share_group_rebalance,
            ),
            (
                "offset_commit",
                "Offsets committed, one per partition (Kafka's offset-commit-count/-rate)",
                &self.offset_commit,
            ),
            (
                "offset_expiration",
                "Offsets deleted once their retention passed \
                 (Kafka's offset-expiration-count/-rate)",
                &self.offset_expiration,
            ),
            (
                "offset_deletion",
                "Offsets deleted by OffsetDelete or with their topic \
                 (Kafka's offset-deletion-count/-rate)",
                &self.offset_deletion,
            ),
        ];
        for (name, help, counter) in meters {
            registry.register(
                format!("kafka_server_group_coordinator_metrics_{name}"),
                help,
                counter.clone(),
            );
        }
    }

    /// Sets every counter to the coordinator's count now.
    fn set(&self, stats: CoordinatorStats) {
        let pairs = [
            (&self.group_rebalance, stats.classic_rebalances),
            (
                &self.group_completed_rebalance,
                stats.classic_completed_rebalances,
            ),
            (&self.consumer_group_rebalance, stats.consumer_rebalances),
            (&self.share_group_rebalance, stats.share_rebalances),
            (&self.offset_commit, stats.offset_commits),
            (&self.offset_expiration, stats.offset_expirations),
            (&self.offset_deletion, stats.offset_deletions),
        ];
        for (counter, value) in pairs {
            counter.inner().store(value, Ordering::Relaxed);
        }
    }
}

type Histograms<L = ApiLabels> = Family<L, Histogram, fn() -> Histogram>;

/// The request latency buckets: 0.5 ms to about 16 s, doubling.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// The log flush buckets: 50 µs (a sync on a write-back cache) to about 1.6 s, doubling.
fn flush_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

/// What a log's builder is given to time its flushes (its `on_sync`).
pub(crate) type FlushObserver = Arc<dyn Fn(Duration) + Send + Sync>;

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
    coordinator: CoordinatorCounters,
    num_offsets: Gauge,
    members: Family<ConsumerGroupLabels, Gauge>,
    committed: Family<GroupPartitionLabels, Gauge>,
    lag: Family<GroupPartitionLabels, Gauge>,
    log_end: Family<PartitionLabels, Gauge>,
    lag_omitted: Gauge,
    log_flush: Histograms<LogLabels>,
    /// `--metrics-max-lag-series`: the most (group, partition) pairs a scrape shows.
    max_lag_pairs: usize,
    /// One scrape at a time: the groups' gauges are set from the coordinator, then encoded.
    scrape: tokio::sync::Mutex<()>,
    /// The groups' recent history, for the page of groups ([`crate::page`]).
    pub(crate) history: Arc<crate::page::History>,
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
    /// The metrics, showing committed offset, log end and lag for at most `max_lag_pairs`
    /// (group, partition) pairs per scrape.
    pub(crate) fn new(max_lag_pairs: usize) -> Metrics {
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
        let coordinator = CoordinatorCounters::default();
        coordinator.register(&mut registry);
        let num_offsets = Gauge::default();
        registry.register(
            "kafka_coordinator_group_groupmetadatamanager_numoffsets",
            "Committed offsets stored, over every group (Kafka's GroupMetadataManager NumOffsets)",
            num_offsets.clone(),
        );
        let members = Family::<ConsumerGroupLabels, Gauge>::default();
        registry.register(
            "kafka_consumergroup_members",
            "Members of each group (kafka-exporter's kafka_consumergroup_members)",
            members.clone(),
        );
        let committed = Family::<GroupPartitionLabels, Gauge>::default();
        registry.register(
            "kafka_consumergroup_current_offset",
            "A group's committed offset of a partition (kafka-exporter's)",
            committed.clone(),
        );
        let lag = Family::<GroupPartitionLabels, Gauge>::default();
        registry.register(
            "kafka_consumergroup_lag",
            "A partition's log end offset less the group's committed offset (kafka-exporter's)",
            lag.clone(),
        );
        let log_end = Family::<PartitionLabels, Gauge>::default();
        registry.register(
            "kafka_topic_partition_current_offset",
            "A partition's log end offset, its high watermark (kafka-exporter's), for the \
             partitions of the groups' series shown",
            log_end.clone(),
        );
        let lag_omitted = Gauge::default();
        registry.register(
            "consumer_groups_lag_series_omitted",
            "(group, partition) pairs whose offset, log end and lag series this scrape left \
             out, past --metrics-max-lag-series",
            lag_omitted.clone(),
        );
        let log_flush: Histograms<LogLabels> = Family::new_with_constructor(flush_histogram);
        registry.register(
            "kafka_log_logflushstats_logflushrateandtime_seconds",
            "Time of each fdatasync of a log's data, by log: records (the partitions' log), \
             groups (the group log); _count is the flush count (Kafka's LogFlushStats \
             LogFlushRateAndTimeMs)",
            log_flush.clone(),
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
            coordinator,
            num_offsets,
            members,
            committed,
            lag,
            log_end,
            lag_omitted,
            log_flush,
            max_lag_pairs,
            scrape: tokio::sync::Mutex::new(()),
            history: Arc::default(),
        }
    }

    /// What `log`'s builder is given (`on_sync`) to time its flushes into
    /// `kafka_log_logflushstats_logflushrateandtime_seconds{log}`: `records` for the
    /// partitions' log, `groups` for the group log. The series exists (at zero) from this call.
    pub(crate) fn log_flush_observer(&self, log: &'static str) -> FlushObserver {
        let histogram = self.log_flush.get_or_create_owned(&LogLabels { log });
        Arc::new(move |took: Duration| histogram.observe(took.as_secs_f64()))
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

    /// The text of a scrape: the groups, the coordinator's counts and the groups' offsets
    /// read now, then every family.
    async fn encode(
        &self,
        coordinator: &Coordinator,
        log: &dyn PartitionLog,
    ) -> Result<String, std::fmt::Error> {
        let _one = self.scrape.lock().await;
        let listed = coordinator.list_groups().await;
        self.groups.clear();
        self.members.clear();
        for g in &listed {
            self.groups
                .get_or_create(&GroupLabels {
                    protocol: crate::api::groups::group_type(g.kind),
                    state: g.state.as_str(),
                })
                .inc();
            self.members
                .get_or_create(&ConsumerGroupLabels {
                    consumergroup: g.group_id.clone(),
                })
                .set(gauge_value(
                    coordinator.member_count(&g.group_id).unwrap_or_default(),
                ));
        }
        self.coordinator.set(coordinator.stats());
        self.offsets(coordinator, log, &listed).await;
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

impl Metrics {
    /// Every group's committed offsets: their number (`NumOffsets`), and for the first
    /// `max_lag_pairs` (group, partition) pairs in group and partition order, the committed
    /// offset, the partition's log end (its high watermark) and the lag between them. A
    /// partition the log does not know (its topic deleted) shows its committed offset only.
    async fn offsets(
        &self,
        coordinator: &Coordinator,
        log: &dyn PartitionLog,
        listed: &[ListedGroup],
    ) {
        self.committed.clear();
        self.lag.clear();
        self.log_end.clear();
        let mut num_offsets: u64 = 0;
        let mut shown: usize = 0;
        let mut omitted: u64 = 0;
        // Each partition's log end, read once per scrape; at most one entry per pair shown.
        let mut ends: HashMap<TopicPartition, Option<i64>> = HashMap::new();
        for g in listed {
            let committed = match coordinator.committed_offsets(&g.group_id).await {
                Ok(committed) => committed,
                Err(e) => {
                    debug!(group = %g.group_id, error = %e, "metrics: committed offsets unread");
                    continue;
                }
            };
            num_offsets = num_offsets.saturating_add(committed.len() as u64);
            for (tp, &offset) in &committed {
                if shown >= self.max_lag_pairs {
                    omitted = omitted.saturating_add(1);
                    continue;
                }
                shown += 1;
                let labels = GroupPartitionLabels {
                    consumergroup: g.group_id.clone(),
                    topic: tp.topic().to_string(),
                    partition: tp.partition(),
                };
                self.committed.get_or_create(&labels).set(offset);
                let end = match ends.get(tp) {
                    Some(end) => *end,
                    None => {
                        let end = log.bounds(tp).await.ok().map(|(_, end)| end);
                        ends.insert(tp.clone(), end);
                        end
                    }
                };
                if let Some(end) = end {
                    self.lag
                        .get_or_create(&labels)
                        .set(end.saturating_sub(offset));
                }
            }
        }
        for (tp, end) in ends {
            if let Some(end) = end {
                self.log_end
                    .get_or_create(&PartitionLabels {
                        topic: tp.topic().to_string(),
                        partition: tp.partition(),
                    })
                    .set(end);
            }
        }
        self.num_offsets.set(gauge_value(num_offsets));
        self.lag_omitted.set(gauge_value(omitted));
    }
}

/// A count as a gauge's `i64`, saturating.
fn gauge_value(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
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
        log: Arc<dyn PartitionLog>,
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
                let log = log.clone();
                let mut stop = Shutdown::new(notify.resubscribe());
                tokio::spawn(async move {
                    let served = tokio::time::timeout(
                        TIMEOUT,
                        http_connection(socket, &metrics, &coordinator, &*log),
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
        // The page's history is observed while the listener serves.
        let observe = crate::page::observe(coordinator.clone(), metrics.history.clone());
        tokio::select! {
            () = accept => {}
            () = observe => {}
            () = shutdown.recv() => {}
        }
    }
}

/// Reads one request head and answers it, then the connection closes.
async fn http_connection(
    mut socket: TcpStream,
    metrics: &Metrics,
    coordinator: &Coordinator,
    log: &dyn PartitionLog,
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
        answer(&head, metrics, coordinator, log).await
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
async fn answer(
    head: &[u8],
    metrics: &Metrics,
    coordinator: &Coordinator,
    log: &dyn PartitionLog,
) -> Vec<u8> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_ascii_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return plain(400, "Bad Request", "bad request line\n");
    };
    let path = target.split(['?', '#']).next().unwrap_or_default();
    let page = if path == "/" {
        Some(Some(
            crate::page::index(coordinator, log, &metrics.history).await,
        ))
    } else if let Some(id) = path.strip_prefix("/group/") {
        match crate::page::decode_segment(id) {
            Some(id) => Some(crate::page::group(coordinator, log, &metrics.history, &id).await),
            None => Some(None),
        }
    } else {
        None
    };
    if page.is_some() && method != "GET" && method != "HEAD" {
        return plain(405, "Method Not Allowed", "GET the page\n");
    }
    match page {
        Some(Some(html)) => {
            let body = if method == "HEAD" { "" } else { html.as_str() };
            return response(200, "OK", "text/html; charset=utf-8", html.len(), body);
        }
        Some(None) => return plain(404, "Not Found", "no such group\n"),
        None => {}
    }
    if path != "/metrics" {
        return plain(
            404,
            "Not Found",
            "not found: the metrics are at /metrics, the groups at /\n",
        );
    }
    if method != "GET" && method != "HEAD" {
        return plain(405, "Method Not Allowed", "GET /metrics\n");
    }
    match metrics.encode(coordinator, log).await {
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
        let metrics = Metrics::new(10);
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
