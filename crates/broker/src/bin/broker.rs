//! The broker binary: parses flags, sets up logging, serves until SIGINT or SIGTERM.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use broker::{BrokerConfig, RecordsConfig, Server, TopicSpec};
use clap::Parser;

/// A Kafka-protocol broker for development and tests: produce, fetch, consumer groups and
/// committed offsets over the coordinator core.
///
/// Without --data-dir everything lives in memory and is lost at exit. With it, committed
/// offsets survive in DATA_DIR/offsets.json and topics and records in DATA_DIR/records/. Once accepting, prints `listening on HOST:PORT` to stdout; logs go
/// to stderr, filtered by RUST_LOG (default `info`). SIGINT or SIGTERM stops it gracefully
/// (exit 0).
#[derive(Debug, Parser)]
#[command(name = "broker", version)]
struct Args {
    /// Address to listen on; port 0 lets the OS pick one.
    #[arg(long, default_value = "127.0.0.1:9092", env = "BROKER_LISTEN")]
    listen: SocketAddr,
    /// Directory for committed offsets (offsets.json) and the partitions' records
    /// (records/); without it both live in memory. Only one broker may use a directory at a
    /// time.
    #[arg(long, env = "BROKER_DATA_DIR")]
    data_dir: Option<PathBuf>,
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
    /// Kafka's offsets.retention.minutes.
    #[arg(long, default_value_t = 10_080)]
    offsets_retention_minutes: u64,
    /// The largest request frame accepted, in bytes (Kafka's socket.request.max.bytes); a
    /// larger one closes its connection.
    #[arg(long, default_value_t = 100 * 1024 * 1024)]
    max_frame_bytes: usize,
    /// The most connections served at once; further clients wait to be accepted.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
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
}

fn parse_topic(s: &str) -> Result<TopicSpec, String> {
    s.parse().map_err(|e: broker::BrokerError| e.to_string())
}

impl Args {
    fn into_config(self) -> BrokerConfig {
        BrokerConfig {
            listen: self.listen,
            data_dir: self.data_dir,
            topics: self.topics,
            auto_create_topics: self.auto_create_topics,
            num_partitions: self.num_partitions,
            group_initial_rebalance_delay_ms: self.group_initial_rebalance_delay_ms,
            group_min_session_timeout_ms: self.group_min_session_timeout_ms,
            group_max_session_timeout_ms: self.group_max_session_timeout_ms,
            group_max_size: self.group_max_size,
            offsets_retention_minutes: self.offsets_retention_minutes,
            max_frame_bytes: self.max_frame_bytes,
            max_connections: self.max_connections,
            records: RecordsConfig {
                flush_interval_ms: self.log_flush_interval_ms,
                segment_bytes: self.log_segment_bytes,
                retention_ms: self.log_retention_ms,
                retention_bytes: self.log_retention_bytes,
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
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {}", server.local_addr())?;
    stdout.flush()?;
    drop(stdout);
    server.run(stop_signal()).await?;
    Ok(())
}

/// Resolves at the first SIGINT or SIGTERM.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received"),
                    _ = term.recv() => tracing::info!("SIGTERM received"),
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; stopping on SIGINT only");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
