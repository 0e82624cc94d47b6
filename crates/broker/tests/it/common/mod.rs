//! The test kit: a broker on a free loopback port, stopped by its handle, and the
//! workspace's Kafka wire client. Every wait is bounded by [`BOUND`].

#![allow(
    dead_code,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic
)]

use std::net::SocketAddr;
use std::time::Duration;

use broker::{BrokerConfig, BrokerError, Server};
use bytes::{Bytes, BytesMut};
use kafka_client::Connection;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The longest any single wait in these tests may take before the test fails. Not a
/// timing threshold: nothing asserts how fast anything is, only that it happens at all.
pub const BOUND: Duration = Duration::from_secs(20);

pub async fn bounded<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(BOUND, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: not done within {BOUND:?}"))
}

/// A broker serving on 127.0.0.1:<free port> in this process.
pub struct TestBroker {
    pub addr: SocketAddr,
    /// Every listener (the first is `addr`).
    pub addrs: Vec<(broker::SecurityProtocol, SocketAddr)>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), BrokerError>>>,
}

pub fn config() -> BrokerConfig {
    BrokerConfig {
        listen: "127.0.0.1:0".parse().expect("address"),
        topics: vec!["t:2".parse().expect("topic")],
        group_initial_rebalance_delay_ms: 0,
        // The tests stamp records in 1970: the 7-day default would delete them.
        records: broker::RecordsConfig {
            retention_ms: -1,
            ..Default::default()
        },
        ..BrokerConfig::default()
    }
}

impl TestBroker {
    pub async fn start() -> TestBroker {
        TestBroker::with(config()).await
    }

    pub async fn with(config: BrokerConfig) -> TestBroker {
        let server = bounded("bind", Server::bind(config))
            .await
            .expect("the broker starts");
        let addr = server.local_addr();
        let addrs = server.local_addrs();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async move {
            let _ = stopped.await;
        }));
        TestBroker {
            addr,
            addrs,
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.addr).await
    }

    /// Signals shutdown and waits (bounded) for the server to return.
    pub async fn stop(mut self) -> Result<(), BrokerError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let task = self.task.take().expect("running");
        bounded("broker stop", task).await.expect("server task")
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The workspace's wire client ([`kafka_client::Connection`]) with the test kit's manners:
/// every wait bounded, every failure a panic naming it.
pub struct Client {
    connection: Connection,
    /// The client id of the next requests.
    pub client_id: &'static str,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Client {
        let connection = bounded("connect", Connection::connect(addr))
            .await
            .expect("connect");
        Client {
            connection,
            client_id: "test-client",
        }
    }

    /// The socket, for what the client does not do (a half close).
    pub fn stream(&mut self) -> &mut TcpStream {
        self.connection.stream_mut()
    }

    pub fn request_frame<R: Request>(&mut self, request: &R, version: i16) -> (i32, BytesMut) {
        self.connection.set_client_id(self.client_id);
        self.connection
            .encode(request, version)
            .expect("request encodes")
    }

    /// Sends a request and returns the decoded response, checking the correlation id and
    /// that no bytes trail the body.
    pub async fn call<R: Request>(&mut self, request: &R, version: i16) -> R::Response {
        let correlation = self.send(request, version).await;
        self.receive::<R>(correlation, version).await
    }

    pub async fn send<R: Request>(&mut self, request: &R, version: i16) -> i32 {
        let (correlation, frame) = self.request_frame(request, version);
        self.send_raw(&frame).await;
        correlation
    }

    /// The response to `correlation` (answers come in order), with nothing trailing it.
    pub async fn receive<R: Request>(&mut self, correlation: i32, version: i16) -> R::Response {
        bounded("read", self.connection.receive::<R>(correlation, version))
            .await
            .unwrap_or_else(|e| panic!("no valid answer to request {correlation}: {e}"))
    }

    /// The response to `correlation`, or `None` when the broker closed the connection (or
    /// its process ended) instead of answering.
    pub async fn receive_or_closed<R: Request>(
        &mut self,
        correlation: i32,
        version: i16,
    ) -> Option<R::Response> {
        match bounded("read", self.connection.receive::<R>(correlation, version)).await {
            Ok(r) => Some(r),
            Err(kafka_client::ClientError::Closed | kafka_client::ClientError::Io(_)) => None,
            Err(e) => panic!("no valid answer to request {correlation}: {e}"),
        }
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        bounded("write", self.connection.send_raw(bytes))
            .await
            .expect("write");
    }

    /// The next response frame, or `None` if the broker closed the connection.
    pub async fn read_frame(&mut self) -> Option<Bytes> {
        bounded("read", self.connection.read_frame())
            .await
            .unwrap_or(None)
    }

    /// True once the broker has closed this connection (bounded wait).
    pub async fn is_closed(&mut self) -> bool {
        self.read_frame().await.is_none()
    }
}

/// A record for producing: key `k<i>`, value `v<i>`, header `h=<i>`, timestamp `ts`.
pub fn record(i: usize, ts: i64) -> Record {
    let mut headers = kafka_protocol::indexmap::IndexMap::new();
    headers.insert(
        StrBytes::from_static_str("h"),
        Some(Bytes::from(i.to_string())),
    );
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: NO_PRODUCER_ID,
        producer_epoch: NO_PRODUCER_EPOCH,
        timestamp_type: TimestampType::Creation,
        offset: i as i64,
        sequence: i as i32,
        timestamp: ts,
        key: Some(Bytes::from(format!("k{i}"))),
        // Compressible, so every codec really compresses.
        value: Some(Bytes::from(format!("v{i}-{}", "x".repeat(200)))),
        headers,
    }
}

/// One v2 batch of `records` (offsets relative to 0, as producers send them).
pub fn batch(records: &[Record], compression: Compression) -> Bytes {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .expect("batch encodes");
    buf.freeze()
}

pub fn produce_request(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(records)),
            ])])
}

/// Produces and returns (error code, base offset) of the one partition.
pub async fn produce(
    client: &mut Client,
    topic: &str,
    partition: i32,
    records: Bytes,
    version: i16,
) -> (i16, i64) {
    let response = client
        .call(&produce_request(topic, partition, records, -1), version)
        .await;
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

pub fn fetch_request(topic: &str, partition: i32, offset: i64) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])])
}

/// The records of a fetched partition, decoded.
pub fn decode_records(partition: &fetch_response::PartitionData) -> Vec<Record> {
    let mut bytes = partition.records.clone().unwrap_or_default();
    RecordBatchDecoder::decode_all(&mut bytes)
        .expect("served batches decode")
        .into_iter()
        .flat_map(|set| set.records)
        .collect()
}

pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// (shared by the group tests and the data-directory tests)
pub fn commit(
    group: &str,
    member: &str,
    generation: i32,
    offsets: &[(&str, i32, i64)],
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_member_id(StrBytes::from_string(member.to_string()))
        .with_generation_id_or_member_epoch(generation)
        .with_topics(
            offsets
                .iter()
                .map(|(t, p, o)| {
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(topic_name(t))
                        .with_partitions(vec![
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_partition_index(*p)
                                .with_committed_offset(*o),
                        ])
                })
                .collect(),
        )
}

/// (shared by the group tests and the data-directory tests)
pub fn commit_codes(r: &OffsetCommitResponse) -> Vec<i16> {
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// (shared by the group tests and the data-directory tests)
pub fn offset_fetch(group: &str, partitions: &[i32]) -> OffsetFetchRequest {
    OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_topics(Some(vec![
            offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(topic_name("t"))
                .with_partition_indexes(partitions.to_vec()),
        ]))
}

/// (shared by the group tests and the data-directory tests)
pub fn fetched(r: &OffsetFetchResponse) -> Vec<i64> {
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.committed_offset))
        .collect()
}

/// The broker binary's stdout after its `listening on` line.
pub type StdoutLines = tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>;

/// Spawns `command` (the broker binary, or a shell that execs it) with stdout piped and
/// killed on drop, and waits (bounded) for its `listening on HOST:PORT` line: the child, the
/// address, and the rest of its stdout.
pub async fn spawn_listening(
    mut command: tokio::process::Command,
) -> (tokio::process::Child, SocketAddr, StdoutLines) {
    use tokio::io::AsyncBufReadExt;
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the broker starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = bounded("listening line", lines.next_line())
        .await
        .expect("read stdout")
        .expect("a line on stdout (the broker did not start)");
    let addr = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .expect("an address");
    (child, addr, lines)
}
