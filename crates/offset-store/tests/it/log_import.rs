//! A directory written by the log store's old engine (its own `segment-<n>.log` and
//! `snapshot-<n>.snap` files, before the group log was a partition of the segment log) opens
//! with the state it held: imported into the group partition, then the old files removed.
//! A power cut at any file operation of the import leaves a directory that opens to the same
//! state.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;

use coordinator_core::{
    CommittedOffsets, GroupKind, GroupRecord, GroupState, OffsetAndMetadata, OffsetStore,
    StorageErrorKind, TopicPartition,
};
use offset_store::testing::{encode_log_frame, CrashMode, LogRecord, SimFs};
use offset_store::LogStore;

const DIR: &str = "/data";

fn commit(group: &str, p: u32, offset: i64) -> LogRecord {
    LogRecord::Commit {
        group: group.to_owned(),
        tp: TopicPartition::new("t", p),
        offset: OffsetAndMetadata {
            offset,
            leader_epoch: Some(4),
            metadata: format!("m{offset}"),
            commit_timestamp_ms: 1_700_000_000_000,
        },
    }
}

fn group(id: &str, generation: u64) -> LogRecord {
    LogRecord::Group(GroupRecord {
        group_id: id.to_owned(),
        kind: GroupKind::Classic,
        generation: coordinator_core::Generation::new(generation),
        state: GroupState::Empty,
        protocol_type: "consumer".into(),
        protocol: None,
        leader: None,
        members: Vec::new(),
    })
}

/// A directory of the old engine: a snapshot before segment 1 (g1's offsets 0 and 1, group
/// g1 at generation 3), segment 1 (g1/0 moved on, g2 committed, g1's group record
/// replaced), segment 2 (g2/0 deleted, a commit of g3) and a torn frame at its end.
fn old_directory() -> SimFs {
    let fs = SimFs::new();
    let snapshot = [
        LogRecord::SnapshotStart { base: 1 },
        commit("g1", 0, 10),
        commit("g1", 1, 11),
        group("g1", 3),
        LogRecord::SnapshotEnd {
            offsets: 2,
            groups: 1,
        },
    ];
    fs.put_file(
        "/data/snapshot-00000000000000000001.snap",
        encode_log_frame(&snapshot),
    );
    let mut one = encode_log_frame(&[commit("g1", 0, 20), commit("g2", 0, 5)]);
    one.extend(encode_log_frame(&[group("g1", 4)]));
    fs.put_file("/data/segment-00000000000000000001.log", one);
    let mut two = encode_log_frame(&[
        LogRecord::DeleteOffset {
            group: "g2".into(),
            tp: TopicPartition::new("t", 0),
        },
        commit("g3", 2, 7),
    ]);
    let torn = encode_log_frame(&[commit("g9", 0, 1)]);
    two.extend_from_slice(&torn[..torn.len() / 2]);
    fs.put_file("/data/segment-00000000000000000002.log", two);
    fs
}

type State = (BTreeMap<String, CommittedOffsets>, Vec<GroupRecord>);

async fn state(store: &LogStore<SimFs>) -> State {
    (store.snapshot(), store.load_groups().await.unwrap())
}

fn open(fs: &SimFs) -> Result<LogStore<SimFs>, coordinator_core::StorageError> {
    LogStore::builder()
        .fs(fs.clone())
        .auto_compaction(false)
        .open(DIR)
}

fn old_files(fs: &SimFs) -> Vec<String> {
    fs.paths()
        .into_iter()
        .filter(|p| p.parent() == Some(Path::new(DIR)))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|n| {
            n.starts_with("segment-") || n.starts_with("snapshot-") || n.starts_with("log.imported")
        })
        .collect()
}

#[tokio::test]
async fn an_old_directory_is_imported_with_its_state_and_its_files_removed() {
    let fs = old_directory();
    let store = open(&fs).unwrap();
    let (offsets, groups) = state(&store).await;
    let g1 = &offsets["g1"];
    assert_eq!(g1[&TopicPartition::new("t", 0)].offset, 20);
    assert_eq!(g1[&TopicPartition::new("t", 0)].metadata, "m20");
    assert_eq!(g1[&TopicPartition::new("t", 1)].offset, 11);
    assert!(!offsets.contains_key("g2"), "{offsets:?}");
    assert_eq!(offsets["g3"][&TopicPartition::new("t", 2)].offset, 7);
    assert!(
        !offsets.contains_key("g9"),
        "the torn frame is not imported"
    );
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].generation.get(), 4);
    assert!(old_files(&fs).is_empty(), "{:?}", old_files(&fs));
    let imported = (offsets, groups);
    drop(store);
    // A reopen (after a power cut, in every mode) reads the partition alone.
    for mode in CrashMode::ALL {
        let store = open(&fs.restart(mode)).unwrap();
        assert_eq!(state(&store).await, imported, "{mode:?}");
    }
}

#[tokio::test]
async fn a_power_cut_at_any_operation_of_the_import_leaves_the_same_state() {
    let reference = {
        let store = open(&old_directory()).unwrap();
        state(&store).await
    };
    let ops = {
        let fs = old_directory();
        drop(open(&fs).unwrap());
        fs.ops()
    };
    assert!(ops > 20, "the import takes {ops} operations");
    for cut in 0..ops {
        let fs = old_directory();
        fs.cut_power_after(cut);
        let _ = open(&fs).map(drop);
        for mode in CrashMode::ALL {
            let after = fs.restart(mode);
            let store =
                open(&after).unwrap_or_else(|e| panic!("cut after {cut} ops, {mode:?}: {e}"));
            assert_eq!(
                state(&store).await,
                reference,
                "cut after {cut} ops, {mode:?}"
            );
            assert!(old_files(&after).is_empty(), "cut after {cut}, {mode:?}");
        }
    }
}

#[tokio::test]
async fn a_damaged_old_directory_is_refused_and_left_as_it_is() {
    let fs = old_directory();
    let path = "/data/segment-00000000000000000001.log";
    let mut bytes = fs.file(path).unwrap();
    bytes[20] ^= 0x40;
    fs.put_file(path, bytes.clone());
    let err = open(&fs).unwrap_err();
    assert_eq!(err.kind(), StorageErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains(path), "{err}");
    assert_eq!(fs.file(path).unwrap(), bytes, "nothing changed");
    assert!(fs
        .file("/data/snapshot-00000000000000000001.snap")
        .is_some());
}

/// The marker of a finished import counts only beside the log it marks: with the log gone
/// (removed by hand) and the old files still there, they are imported again rather than
/// removed unread.
#[tokio::test]
async fn a_marker_without_its_log_does_not_skip_the_import() {
    let reference = {
        let store = open(&old_directory()).unwrap();
        state(&store).await
    };
    let fs = old_directory();
    fs.put_file("/data/log.imported", &b"imported\n"[..]);
    let store = open(&fs).unwrap();
    assert_eq!(state(&store).await, reference);
    drop(store);
    assert!(old_files(&fs).is_empty(), "{:?}", old_files(&fs));
}
