//! Decompression bombs against a running broker, and its peak memory: `connections`
//! concurrent Produce requests, each one gzip batch of about 1 MiB that inflates to 1 GiB of
//! zeros (issue 21's attack). Prints each answer's error code and the broker's peak RSS
//! (`VmHWM` of `/proc/PID/status`) before and after.
//!
//! ```text
//! cargo build --release -p consumer-groups-broker --bins --examples
//! target/release/broker --listen 127.0.0.1:0 --topic t:1 &   # note its address and PID
//! target/release/examples/bombs ADDRESS PID [CONNECTIONS]
//! ```

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use bytes::{Bytes, BytesMut};
use kafka_client::Connection;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
};

fn peak_rss_kib(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn bomb() -> Bytes {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
        producer_id: NO_PRODUCER_ID,
        producer_epoch: NO_PRODUCER_EPOCH,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 0,
        key: None,
        value: Some(Bytes::from(vec![0u8; 1 << 30])),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &[record],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::Gzip,
        },
    )
    .unwrap();
    buf.freeze()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr = args[1].parse().unwrap();
    let pid = args[2].clone();
    let n: usize = args.get(3).map_or(3, |v| v.parse().unwrap());
    let batch = bomb();
    println!(
        "bomb: {} bytes compressed, 1 GiB inflated; broker peak RSS before: {} KiB",
        batch.len(),
        peak_rss_kib(&pid)
    );
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch))])]);
    let mut tasks = Vec::new();
    for _ in 0..n {
        let request = request.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = Connection::connect(addr).await.unwrap();
            let r = c.call(&request, 7).await.unwrap();
            r.responses[0].partition_responses[0].error_code
        }));
    }
    for t in tasks {
        println!("error code {}", t.await.unwrap());
    }
    println!("broker peak RSS after: {} KiB", peak_rss_kib(&pid));
}
