//! # broker
//!
//! A small broker that speaks Kafka's binary protocol, so applications written with the
//! Kafka clients people already use (librdkafka and confluent-kafka, kafka-python,
//! aiokafka, kafkajs, the Java client) can produce, consume in groups and commit against the
//! coordinator core: a fast, deterministic, single-binary Kafka for development and tests.
//!
//! ## Where it sits
//!
//! A driving adapter, the outermost crate: it depends on the core and on the adapters it
//! wires (the in-memory `partition-log`, the `offset-store`, the `coordinator-driver` that
//! runs the core's timers), and nothing depends on it.
//!
//! ```text
//!   Kafka clients ══TCP/TLS══► broker ──► coordinator-core ◄── partition-log, offset-store,
//!                                     └─► coordinator-driver    assignor
//! ```
//!
//! The network layer has mini-redis's shape: listeners accepting under one connection limit,
//! a handler per connection answering one request at a time in order, a connection reading
//! and writing frames, and a shutdown signal every handler hears and the server waits for.
//! Each listener has one of Kafka's security protocols (PLAINTEXT, SSL, SASL_PLAINTEXT,
//! SASL_SSL; TLS by rustls) and advertises itself to the clients that come in through it.
//! The codec (the `kafka-protocol` crate) stays at this edge: handlers translate requests
//! into calls on the log and the coordinator, and results into responses, nothing more.
//! Group state lives in the core only.
//!
//! Three seams keep it open to other parts: one registry of APIs (`src/api/registry.rs`),
//! from which ApiVersions and dispatch both come; the partition log behind the
//! [`PartitionLog`](partition_log::PartitionLog) port; and the offset store chosen in one
//! factory, [`StoreConfig`]. The groups tool and the tests speak to it through the
//! workspace's one wire client, `kafka-client`.
//!
//! Without a data directory everything lives in memory and is lost at exit. With one,
//! committed offsets and group records are kept in the group log `<data-dir>/groups/` (or
//! offsets alone in `<data-dir>/offsets.json` with `--offsets-store json`), and topics and
//! records in `<data-dir>/records/` (the `partition-log` crate's `SegmentLog`). See the crate's README for the
//! flags, the versions served and every place where the broker deliberately differs from
//! Kafka.
//!
//! ## Example
//!
//! Start a broker on a free loopback port, and stop it:
//!
//! ```
//! use broker::{BrokerConfig, Server, TopicSpec};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), broker::BrokerError> {
//! let config = BrokerConfig {
//!     listen: "127.0.0.1:0".parse().expect("an address"),
//!     topics: vec!["orders:4".parse()?],
//!     ..BrokerConfig::default()
//! };
//! let server = Server::bind(config).await?;
//! println!("listening on {}", server.local_addr());
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let running = tokio::spawn(server.run(stopped));
//! // ... point a Kafka client at the address ...
//! stop.send(()).expect("the server is running");
//! running.await.expect("the server task")?;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

mod acl;
pub mod admin;
mod api;
mod auth;
mod cleaner;
mod codec;
mod config;
mod connection;
mod context;
pub mod control;
mod documents;
mod error;
pub mod faults;
mod files;
mod lease;
pub mod manual_clock;
mod memory_pool;
mod metrics;
mod ownership;
mod page;
mod producers;
mod retention;
mod server;
mod share;
mod shutdown;
mod store;
mod stored_batch;
pub mod testing;
mod tls;
mod txn_markers;

pub use config::{
    default_max_connections, AdvertisedListener, BrokerConfig, ListenerClientAuth, ListenerSpec,
    PostgresUrl, RecordsConfig, SaslMechanism, SecurityProtocol, SslClientAuth, TopicSpec,
    DEFAULT_METRICS_MAX_LAG_SERIES, MAX_METRICS_MAX_LAG_SERIES,
};
pub use error::BrokerError;
pub use server::Server;
pub use store::{OffsetsStore, StoreConfig, GROUPS_DIR, IMPORTED_FILE, OFFSETS_FILE};
