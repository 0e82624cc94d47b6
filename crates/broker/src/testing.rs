//! A broker inside your own tests: [`TestBroker`] starts one on a free loopback port in the
//! test's tokio runtime, gives its bootstrap address, and stops it on [`stop`](TestBroker::stop)
//! or drop. Any number can run in one test process, each with its own state (in memory, or in
//! a data directory you give it).
//!
//! In your crate's `Cargo.toml`:
//!
//! ```toml
//! [dev-dependencies]
//! consumer-groups-broker = "0.1"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! Then, in a test, point any Kafka client at [`bootstrap`](TestBroker::bootstrap):
//!
//! ```
//! use broker::testing::TestBroker;
//! use kafka_protocol::messages::ApiVersionsRequest;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let broker = TestBroker::start().await?;
//! let bootstrap: String = broker.bootstrap(); // "127.0.0.1:PORT"
//! assert!(bootstrap.starts_with("127.0.0.1:"));
//!
//! // Here your consumer or producer would use `bootstrap`; this crate's own wire client
//! // asks which API versions the broker serves.
//! let mut connection = kafka_client::Connection::connect(broker.addr()).await?;
//! let versions = connection.call(&ApiVersionsRequest::default(), 3).await?;
//! assert_eq!(versions.error_code, 0);
//!
//! broker.stop().await?; // or drop it
//! # Ok(())
//! # }
//! ```
//!
//! # Faults, and what the broker saw
//!
//! [`faults`](TestBroker::faults) makes the broker misbehave on purpose, as librdkafka's mock
//! cluster and franz-go's kfake do: fail the next requests of an API with an error code
//! (for every client or one client id), delay an API, close a connection instead of
//! answering, kick a member from a group, force a rebalance, pause a group's coordinator;
//! and it lists the requests the broker received, in order, with their error
//! codes. See [`crate::faults`] for where the faults apply and how they differ from the
//! mock's.
//!
//! ```
//! use broker::testing::TestBroker;
//! use kafka_protocol::messages::{ApiKey, GroupId, HeartbeatRequest};
//! use kafka_protocol::protocol::StrBytes;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let broker = TestBroker::start().await?;
//! // The next Heartbeat of client "app" is answered REBALANCE_IN_PROGRESS, unhandled.
//! broker.faults().fail(ApiKey::Heartbeat, 27, 1, Some("app"))?;
//!
//! let mut connection = kafka_client::Connection::connect(broker.addr()).await?;
//! connection.set_client_id("app");
//! let heartbeat = HeartbeatRequest::default()
//!     .with_group_id(GroupId(StrBytes::from_static_str("g")))
//!     .with_member_id(StrBytes::from_static_str("m"));
//! let answer = connection.call(&heartbeat, 4).await?;
//! assert_eq!(answer.error_code, 27);
//!
//! // What the broker saw: the API, version, client id, group and error code, in order.
//! let seen = broker.faults().requests();
//! let last = seen.last().expect("one request");
//! assert_eq!((last.api, last.client_id.as_str()), (ApiKey::Heartbeat, "app"));
//! assert_eq!((last.group_id.as_deref(), last.error_code), (Some("g"), Some(27)));
//! broker.faults().clear();
//! # Ok(())
//! # }
//! ```
//!
//! # Time a test moves
//!
//! With `manual_clock` the coordinators' timers (sessions, rebalance timeouts, transaction
//! timeouts) follow a clock that moves only by [`Faults::advance_clock`], which runs what is
//! due before it returns: a test sees a session expire without sleeping for it.
//!
//! ```
//! use broker::testing::TestBroker;
//! use broker::BrokerConfig;
//! use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, GroupId, TopicName};
//! use kafka_protocol::protocol::StrBytes;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let broker = TestBroker::with_config(BrokerConfig {
//!     manual_clock: true,
//!     group_consumer_session_timeout_ms: 10_000,
//!     ..TestBroker::test_config()
//! })
//! .await?;
//! let mut connection = kafka_client::Connection::connect(broker.addr()).await?;
//! let join = ConsumerGroupHeartbeatRequest::default()
//!     .with_group_id(GroupId(StrBytes::from_static_str("g")))
//!     .with_rebalance_timeout_ms(30_000)
//!     .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str("t"))]))
//!     .with_topic_partitions(Some(Vec::new()));
//! let member = connection.call(&join, 0).await?.member_id.expect("a member id");
//!
//! // Almost ten seconds pass for the broker, none for the test: the member is still there...
//! assert!(broker.faults().advance_clock(9_999).await?.expired.is_empty());
//! // ...at ten its session has expired, before the call returns.
//! let advanced = broker.faults().advance_clock(1).await?;
//! assert_eq!(advanced.expired[0].member, member.as_str());
//! # Ok(())
//! # }
//! ```
//!
//! [`TestBroker::test_config`] is what [`start`](TestBroker::start) runs: topics created on
//! first use, no initial rebalance delay. Change it and pass it to
//! [`with_config`](TestBroker::with_config) for a data directory (`data_dir`), topics made at
//! start (`topics`), TLS, SASL or ACLs.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::config::{BrokerConfig, SecurityProtocol};
use crate::error::BrokerError;
use crate::faults::Faults;
use crate::server::Server;

/// A running broker for a test. See the [module](self) docs.
#[derive(Debug)]
pub struct TestBroker {
    addr: SocketAddr,
    listeners: Vec<(SecurityProtocol, SocketAddr)>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), BrokerError>>>,
    faults: Arc<Faults>,
    control: Option<SocketAddr>,
    metrics: Option<SocketAddr>,
}

impl TestBroker {
    /// The settings [`start`](Self::start) uses: a PLAINTEXT listener on `127.0.0.1:0` (a
    /// free port), everything in memory, topics created on first use with one partition,
    /// and no initial rebalance delay (Kafka waits 3 s for more members before a new group's
    /// first rebalance; a test rarely wants to).
    pub fn test_config() -> BrokerConfig {
        BrokerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            auto_create_topics: true,
            group_initial_rebalance_delay_ms: 0,
            ..BrokerConfig::default()
        }
    }

    /// Starts a broker with [`test_config`](Self::test_config) on the current tokio runtime.
    ///
    /// # Errors
    /// As [`Server::bind`]: a listener that cannot be bound, above all.
    pub async fn start() -> Result<TestBroker, BrokerError> {
        TestBroker::with_config(Self::test_config()).await
    }

    /// Starts a broker with `config` on the current tokio runtime.
    ///
    /// # Errors
    /// As [`Server::bind`]: a setting refused (`INVALID_CONFIG`), a listener that cannot be
    /// bound, a data directory another process holds.
    pub async fn with_config(config: BrokerConfig) -> Result<TestBroker, BrokerError> {
        let server = Server::bind(config).await?;
        let addr = server.local_addr();
        let listeners = server.local_addrs();
        let faults = server.faults();
        let control = server.control_addr();
        let metrics = server.metrics_addr();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async move {
            let _ = stopped.await;
        }));
        Ok(TestBroker {
            addr,
            listeners,
            stop: Some(stop),
            task: Some(task),
            faults,
            control,
            metrics,
        })
    }

    /// The broker's faults and its record of requests: see the [module](self) docs and
    /// [`crate::faults`].
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// The control port's address, when the configuration asked for one
    /// ([`BrokerConfig::control_listen`]).
    pub fn control_addr(&self) -> Option<SocketAddr> {
        self.control
    }

    /// The metrics listener's address (`GET /metrics`), when the configuration asked for
    /// one ([`BrokerConfig::metrics_listen`]).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics
    }

    /// `HOST:PORT` of the first listener: what a client's `bootstrap.servers` takes.
    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    /// The first listener's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every listener, with its security protocol, in the order of the configuration.
    pub fn listeners(&self) -> &[(SecurityProtocol, SocketAddr)] {
        &self.listeners
    }

    /// Stops the broker as SIGTERM stops the binary (every connection's request in flight is
    /// answered, then it closes) and waits until it has.
    ///
    /// # Errors
    /// What the broker stopped with, if it stopped abnormally.
    pub async fn stop(mut self) -> Result<(), BrokerError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => match task.await {
                Ok(stopped) => stopped,
                // The broker's task panicked: the test sees that panic.
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => Ok(()),
            },
            None => Ok(()),
        }
    }
}

impl Drop for TestBroker {
    /// Tells the broker to stop, without waiting: it stops in the background while the
    /// runtime runs (and with the runtime at the latest).
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
