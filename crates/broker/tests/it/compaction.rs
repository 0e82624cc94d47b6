//! Compaction of topics whose `cleanup.policy` includes `compact`, with a data directory:
//! Kafka batches (plain and compressed) written over the wire, compacted by the broker's
//! cleaner, fetched back with only the latest value of each key, at their offsets, and the
//! same after a restart.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common;

use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub(crate) fn broker_config(dir: Option<&std::path::Path>) -> broker::BrokerConfig {
    broker::BrokerConfig {
        data_dir: dir.map(Into::into),
        records: broker::RecordsConfig {
            retention_ms: -1,
            segment_bytes: 2048,
            cleaner_backoff_ms: 50,
            ..Default::default()
        },
        ..common::config()
    }
}

async fn create_compacted(c: &mut Client, name: &str) {
    create_with(c, name, &[("cleanup.policy", "compact")]).await;
}

pub(crate) async fn create_with(c: &mut Client, name: &str, configs: &[(&str, &str)]) {
    let topic = create_topics_request::CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(1)
        .with_replication_factor(1)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    create_topics_request::CreatableTopicConfig::default()
                        .with_name(s(k))
                        .with_value(Some(s(v)))
                })
                .collect(),
        );
    let r = c
        .call(
            &CreateTopicsRequest::default()
                .with_topics(vec![topic])
                .with_timeout_ms(5000),
            7,
        )
        .await;
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
}

/// A record with `key` and `value` (`None`: a tombstone) at `offset` within its batch.
pub(crate) fn keyed(offset: i64, key: &str, value: Option<&str>) -> Record {
    let mut r = record(offset as usize, 1_000);
    r.key = Some(bytes::Bytes::from(key.to_string()));
    r.value = value.map(|v| bytes::Bytes::from(format!("{v}-{}", "x".repeat(100))));
    r.headers.clear();
    r
}

/// Every record of `topic`-0 from offset 0 to the end, fetched batch by batch.
async fn fetch_all(c: &mut Client, topic: &str) -> Vec<Record> {
    let mut out = Vec::new();
    let mut next = 0;
    loop {
        let r = c.call(&fetch_request(topic, 0, next), 12).await;
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        let records = decode_records(p);
        let Some(last) = records.last().map(|r| r.offset) else {
            return out;
        };
        let from = next;
        out.extend(records.into_iter().filter(|r| r.offset >= from));
        next = last + 1;
        if next >= p.high_watermark {
            return out;
        }
    }
}

fn summary(records: &[Record]) -> Vec<(i64, String, Option<String>)> {
    records
        .iter()
        .map(|r| {
            (
                r.offset,
                String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned(),
                r.value
                    .as_ref()
                    .map(|v| String::from_utf8_lossy(&v[..v.len().min(4)]).into_owned()),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_compacted_topic_keeps_the_latest_value_of_each_key_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let compacted = latest_values(broker_config(Some(dir.path()))).await;
    let broker = TestBroker::with(broker_config(Some(dir.path()))).await;
    let mut c = broker.client().await;
    assert_eq!(
        summary(&fetch_all(&mut c, "latest").await),
        compacted,
        "the same after a restart"
    );
    broker.stop().await.unwrap();
}

/// A compacted topic refuses a batch holding a record without a key, whole (Kafka's
/// `LogValidator.validateKey`: "Compacted topic cannot accept message without key"; the
/// cleaner would remove such a record), and takes the same batch keyed; a topic that is not
/// compacted takes it.
#[tokio::test]
async fn a_compacted_topic_refuses_records_without_a_key() {
    let broker = TestBroker::with(broker_config(None)).await;
    let mut c = broker.client().await;
    create_compacted(&mut c, "keyed").await;
    create_with(&mut c, "plain", &[]).await;
    let mut keyless = record(1, 1);
    keyless.key = None;
    let mixed = batch(&[record(0, 1), keyless], Compression::None);
    for version in [3, 9] {
        let r = c
            .call(&produce_request("keyed", 0, mixed.clone(), -1), version)
            .await;
        let p = &r.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 2, "v{version}: CORRUPT_MESSAGE");
        if version >= 8 {
            assert!(p
                .error_message
                .as_ref()
                .is_some_and(|m| m.contains("without key")));
        }
    }
    assert!(
        fetch_all(&mut c, "keyed").await.is_empty(),
        "nothing appended"
    );
    let keyed = batch(&[record(0, 1), record(1, 1)], Compression::None);
    assert_eq!(produce(&mut c, "keyed", 0, keyed, 9).await, (0, 0));
    assert_eq!(produce(&mut c, "plain", 0, mixed, 9).await, (0, 0));
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn a_compacted_topic_in_memory_keeps_the_latest_value_of_each_key() {
    latest_values(broker_config(None)).await;
}

/// Writes values, a tombstone and filler to a new compacted topic `latest` of a broker
/// started with `config`, waits until the cleaner left one record per key, checks them, and
/// returns what a fetch from 0 reads (the broker is stopped).
pub(crate) async fn latest_values(
    config: broker::BrokerConfig,
) -> Vec<(i64, String, Option<String>)> {
    let broker = TestBroker::with(config).await;
    let mut c = broker.client().await;
    create_compacted(&mut c, "latest").await;
    // Forty batches of two records over keys a..e, every other one gzip'ed; then a tombstone
    // for `c`; then filler with keys of its own, so that all of the above is in closed
    // segments.
    let keys = ["a", "b", "c", "d", "e"];
    let mut written: Vec<(i64, String, Option<String>)> = Vec::new();
    for i in 0..40usize {
        let k1 = keys[(2 * i) % 5];
        let k2 = keys[(2 * i + 1) % 5];
        let v1 = format!("v{:03}", 2 * i);
        let v2 = format!("v{:03}", 2 * i + 1);
        let records = [keyed(0, k1, Some(&v1)), keyed(1, k2, Some(&v2))];
        let compression = if i % 2 == 0 {
            Compression::None
        } else {
            Compression::Gzip
        };
        let (code, base) = produce(&mut c, "latest", 0, batch(&records, compression), 9).await;
        assert_eq!(code, 0);
        written.push((base, k1.into(), Some(v1[..4].to_string())));
        written.push((base + 1, k2.into(), Some(v2[..4].to_string())));
    }
    let tombstone = [keyed(0, "c", None)];
    let (code, base) = produce(&mut c, "latest", 0, batch(&tombstone, Compression::None), 9).await;
    assert_eq!(code, 0);
    written.push((base, "c".into(), None));
    for i in 0..30usize {
        let records = [keyed(0, &format!("filler{i}"), Some("f"))];
        produce(&mut c, "latest", 0, batch(&records, Compression::None), 9).await;
    }
    // The latest of each key among the first 81 records.
    let mut latest: BTreeMap<String, (i64, String, Option<String>)> = BTreeMap::new();
    for w in &written {
        latest.insert(w.1.clone(), w.clone());
    }
    let expected: Vec<_> = latest.into_values().collect();
    let compacted = bounded("compaction", async {
        loop {
            let all = summary(&fetch_all(&mut c, "latest").await);
            let head: Vec<_> = all.iter().filter(|r| r.0 <= 80).cloned().collect();
            if head.len() == 5 {
                return all;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let mut head: Vec<_> = compacted.iter().filter(|r| r.0 <= 80).cloned().collect();
    head.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(
        head, expected,
        "one record per key, the latest, at its offset"
    );
    assert!(
        expected.contains(&(80, "c".into(), None)),
        "the tombstone is kept (delete.retention.ms): {expected:?}"
    );
    let fillers = compacted
        .iter()
        .filter(|r| r.1.starts_with("filler"))
        .count();
    assert_eq!(fillers, 30, "keys written once are all kept");
    broker.stop().await.unwrap();
    compacted
}

/// With Kafka's default segment size nothing closes a segment but its age: a compacted topic
/// with `segment.ms` set gets its active segment closed by the cleaner, then compacted.
#[tokio::test]
async fn segment_ms_closes_a_segment_so_that_it_is_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = broker_config(Some(dir.path()));
    config.records.segment_bytes = partition_log::segment::DEFAULT_SEGMENT_BYTES;
    let broker = TestBroker::with(config).await;
    let mut c = broker.client().await;
    create_with(
        &mut c,
        "aged",
        &[("cleanup.policy", "compact"), ("segment.ms", "100")],
    )
    .await;
    for i in 0..10 {
        // Stamped in 1970: older than `segment.ms` at once.
        let records = [keyed(0, "k", Some(&format!("v{i}")))];
        let (code, _) = produce(&mut c, "aged", 0, batch(&records, Compression::None), 9).await;
        assert_eq!(code, 0);
    }
    let left = bounded("compaction", async {
        loop {
            let all = summary(&fetch_all(&mut c, "aged").await);
            if all.len() == 1 {
                return all;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_eq!(left, [(9, "k".to_string(), Some("v9-x".to_string()))]);
    broker.stop().await.unwrap();
}
