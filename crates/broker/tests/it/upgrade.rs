//! Upgrades: a data directory written by an earlier main opens unchanged. The fixture
//! `tests/fixtures/data-dir-2026-12-07` was written on 2026-12-07 by main (whose on-disk
//! formats are those of 1a35c68 and before: the segment log's frames, dense and compacted,
//! its checkpoints, and the group log's snapshot and segment) through
//! `write_the_upgrade_fixture` below; `expected.txt` beside it is what that main read back.
//! Whatever the logs' engines become, this directory must read back the same.

use std::path::{Path, PathBuf};

use crate::common;
use crate::compaction::{broker_config, create_with, keyed};
use crate::groups::{assignment, join, sync_request};
use crate::transactions::{describe, end_txn_at, open_transaction};

use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/data-dir-2026-12-07")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Every record of `topic`-`partition` as `offset key value` lines (the value up to its
/// padding), fetched batch by batch.
async fn dump_partition(c: &mut Client, topic: &str, partition: i32, out: &mut Vec<String>) {
    let mut next = 0;
    loop {
        let r = c.call(&fetch_request(topic, partition, next), 12).await;
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch {topic}-{partition} at {next}");
        let records = decode_records(p);
        let Some(last) = records.last() else {
            out.push(format!(
                "{topic}-{partition} bounds {} {}",
                p.log_start_offset, p.high_watermark
            ));
            return;
        };
        next = last.offset + 1;
        for r in records {
            let text = |b: &Option<bytes::Bytes>| {
                b.as_ref().map_or("-".to_string(), |b| {
                    let s = String::from_utf8_lossy(b).to_string();
                    let head = s.split('-').next().unwrap_or_default();
                    head.escape_default().to_string()
                })
            };
            out.push(format!(
                "{topic}-{partition} {} {} {}",
                r.offset,
                text(&r.key),
                text(&r.value)
            ));
        }
    }
}

/// What a broker on the directory reads: the records of `t`-0, `t`-1 and `c`-0, group `g`'s
/// committed offsets with their metadata, the classic group `cg`'s record and the
/// transactional id `done`'s.
async fn dump(c: &mut Client) -> Vec<String> {
    let mut out = Vec::new();
    dump_partition(c, "t", 0, &mut out).await;
    dump_partition(c, "t", 1, &mut out).await;
    dump_partition(c, "c", 0, &mut out).await;
    let r = c.call(&offset_fetch("g", &[0, 1]), 7).await;
    assert_eq!(r.error_code, 0);
    for t in &r.topics {
        for p in &t.partitions {
            out.push(format!(
                "g {}-{} {} {}",
                t.name.0,
                p.partition_index,
                p.committed_offset,
                p.metadata.as_deref().unwrap_or("<null>")
            ));
        }
    }
    let d = c
        .call(
            &DescribeGroupsRequest::default()
                .with_groups(vec![GroupId(StrBytes::from_static_str("cg"))]),
            5,
        )
        .await;
    let g = &d.groups[0];
    out.push(format!(
        "cg {} {} {} {} members {}",
        g.error_code,
        g.group_state.as_str(),
        g.protocol_type.as_str(),
        g.protocol_data.as_str(),
        g.members.len()
    ));
    let t = describe(c, "done").await;
    out.push(format!(
        "done {} {} pid {} epoch {} partitions {}",
        t.error_code,
        t.transaction_state.as_str(),
        t.producer_id.0,
        t.producer_epoch,
        t.topics.iter().map(|x| x.partitions.len()).sum::<usize>()
    ));
    out
}

#[tokio::test]
async fn a_data_directory_written_by_an_earlier_main_reads_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture().join("data"), dir.path());
    let expected = std::fs::read_to_string(fixture().join("expected.txt")).unwrap();
    let broker = TestBroker::with(broker_config(Some(dir.path()))).await;
    let mut c = broker.client().await;
    let found = dump(&mut c).await;
    assert_eq!(found.join("\n") + "\n", expected);
    assert!(
        found.iter().filter(|l| l.starts_with("c-0 ")).count() < 80,
        "the fixture holds a compacted partition"
    );
    // The directory goes on: appends continue from its ends.
    let end: i64 = found
        .iter()
        .find_map(|l| l.strip_prefix("t-0 bounds 0 "))
        .expect("t-0's bounds")
        .parse()
        .unwrap();
    let (code, base) = produce(&mut c, "t", 0, batch(&[record(0, 5)], Compression::None), 7).await;
    assert_eq!((code, base), (0, end));
    drop(c);
    broker.stop().await.unwrap();
}

/// Writes the fixture: `UPGRADE_FIXTURE_OUT=<empty dir> cargo test -p consumer-groups-broker
/// --test it upgrade::write_the_upgrade_fixture -- --ignored`, then copy `<dir>/data` and
/// `<dir>/expected.txt` into `tests/fixtures/<name>`.
#[tokio::test]
#[ignore = "writes the fixture of a_data_directory_written_by_an_earlier_main_reads_back_the_same"]
async fn write_the_upgrade_fixture() {
    let out = PathBuf::from(std::env::var("UPGRADE_FIXTURE_OUT").expect("UPGRADE_FIXTURE_OUT"));
    let data = out.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let broker = TestBroker::with(broker_config(Some(&data))).await;
    let mut c = broker.client().await;
    let codecs = [Compression::None, Compression::Gzip, Compression::Lz4];
    for (i, codec) in codecs.into_iter().enumerate() {
        let records: Vec<_> = (0..5).map(|j| record(5 * i + j, 1_000)).collect();
        let (code, _) = produce(&mut c, "t", 0, batch(&records, codec), 7).await;
        assert_eq!(code, 0);
    }
    let (code, _) = produce(&mut c, "t", 1, batch(&[record(0, 5)], Compression::None), 7).await;
    assert_eq!(code, 0);
    create_with(&mut c, "c", &[("cleanup.policy", "compact")]).await;
    // Each batch: a key written over and over (the last write of one a tombstone) and a key
    // of its own, so compaction rewrites batches it keeps in part (version 1 frames).
    for n in 0..40 {
        let key = format!("k{}", n % 4);
        let value = if n == 37 { None } else { Some(format!("v{n}")) };
        let own = format!("u{n}");
        let records = [keyed(0, &key, value.as_deref()), keyed(1, &own, Some("w"))];
        let codec = [Compression::None, Compression::Gzip][n % 2];
        let (code, _) = produce(&mut c, "c", 0, batch(&records, codec), 7).await;
        assert_eq!(code, 0);
    }
    // A committed transaction (records on t-0, group g's offset), and a classic group whose
    // member joined, synced and left: the group log holds transaction and group records.
    let p = open_transaction(&mut c, "done").await;
    assert_eq!(end_txn_at(&mut c, "done", p, true, 3).await, 0);
    let joined = join(&mut c, "cg").await;
    let mine = assignment("t", &[0, 1]);
    let synced = c
        .call(
            &sync_request("cg", &joined, &[(joined.member_id.as_str(), mine)]),
            3,
        )
        .await;
    assert_eq!(synced.error_code, 0);
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("cg")))
        .with_member_id(joined.member_id.clone());
    assert_eq!(c.call(&leave, 1).await.error_code, 0);
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(7)
                        .with_committed_metadata(Some(StrBytes::from_static_str("m0"))),
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(1)
                        .with_committed_offset(1)
                        .with_committed_metadata(Some(StrBytes::from_static_str("m1"))),
                ]),
        ]);
    let r = c.call(&commit, 8).await;
    assert_eq!(commit_codes(&r), [0, 0]);
    // The cleaner (every 50 ms here) compacts the closed segments of `c`.
    let mut compacted = false;
    for _ in 0..100 {
        let mut lines = Vec::new();
        dump_partition(&mut c, "c", 0, &mut lines).await;
        if lines.len() < 80 {
            compacted = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(compacted, "the cleaner compacted c within 10 s");
    // Until a pass has nothing left to do (every closed segment cleaned), so that the
    // directory is what a reader's own first pass leaves as it is.
    let mut before = dump(&mut c).await;
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let now = dump(&mut c).await;
        if now == before {
            break;
        }
        before = now;
    }
    drop(c);
    broker.stop().await.unwrap();
    // The group log compacted into a snapshot, so that the directory holds both of its file
    // kinds (a snapshot, and the segment after it).
    // A commit after it (the same offset and metadata again: what a reader sees is
    // unchanged) puts a record in that segment.
    {
        use coordinator_core::{CommitFence, OffsetAndMetadata, OffsetStore, TopicPartition};
        let store = offset_store::LogStore::open(data.join("groups")).unwrap();
        store.compact().await.unwrap();
        let mut again = OffsetAndMetadata::new(1);
        again.metadata = "m1".into();
        let offsets = [(TopicPartition::new("t", 1), again)].into_iter().collect();
        store
            .commit_with_metadata("g", &offsets, CommitFence::none())
            .await
            .unwrap();
    }
    // What a restart reads is what is written down.
    let broker = TestBroker::with(broker_config(Some(&data))).await;
    let mut c = broker.client().await;
    let found = dump(&mut c).await;
    assert_eq!(found, before, "a restart reads what was there before it");
    drop(c);
    broker.stop().await.unwrap();
    std::fs::write(out.join("expected.txt"), found.join("\n") + "\n").unwrap();
}
