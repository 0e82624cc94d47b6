//! Power cuts against the log store: at every byte of every frame it wrote, and after every
//! file operation of a workload that includes two compaction switches, reopened under each
//! crash mode. No acknowledged write may be lost, and no unacknowledged one half-applied.
//! And a process that dies: its directory lock dies with it, and while it lives another
//! process is refused. (The other tests here use only `SimFs`, so none holds a real file
//! that a spawned child could inherit between its fork and its exec.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use coordinator_core::{
    ClassicProtocol, CommitFence, CommittedOffsets, Generation, GroupKind, GroupRecord, GroupState,
    MemberRecord, OffsetAndMetadata, OffsetMap, OffsetStore, StorageError, TopicPartition,
};
use offset_store::testing::{CrashMode, SimFs};
use offset_store::LogStore;

const DIR: &str = "/data";
/// The group partition's first segment file.
const SEGMENT_0: &str = "/data/log/__consumer_offsets-0/00000000000000000000.log";

type State = (BTreeMap<String, CommittedOffsets>, Vec<GroupRecord>);

fn tp(p: u32) -> TopicPartition {
    TopicPartition::new("t", p)
}

fn committed(entries: &[(u32, i64)], metadata: &str) -> CommittedOffsets {
    entries
        .iter()
        .map(|&(p, o)| {
            let m = OffsetAndMetadata {
                offset: o,
                leader_epoch: Some(7),
                metadata: metadata.to_owned(),
                commit_timestamp_ms: 99,
            };
            (tp(p), m)
        })
        .collect()
}

fn record(group: &str, generation: u64) -> GroupRecord {
    GroupRecord {
        group_id: group.to_owned(),
        kind: GroupKind::Classic,
        generation: Generation::new(generation),
        state: GroupState::Stable,
        protocol_type: "consumer".into(),
        protocol: Some("range".into()),
        leader: Some("m".into()),
        members: vec![MemberRecord {
            member_id: "m".into(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 20_000,
            protocols: vec![ClassicProtocol::new("range", vec![1u8; 5])],
            assignment: Arc::from(vec![2u8; 3]),
            partitions: vec![tp(0)],
            consumer: None,
        }],
    }
}

fn open(fs: &SimFs) -> Result<LogStore<SimFs>, StorageError> {
    LogStore::builder()
        .fs(fs.clone())
        .auto_compaction(false)
        .open(DIR)
}

async fn state(store: &LogStore<SimFs>) -> State {
    (store.snapshot(), store.load_groups().await.unwrap())
}

/// Step `i` of the workload (`None` past its end).
async fn step(store: &LogStore<SimFs>, i: usize) -> Option<Result<(), StorageError>> {
    let none = CommitFence::none;
    let plain = |e: &[(u32, i64)]| -> OffsetMap { e.iter().map(|&(p, o)| (tp(p), o)).collect() };
    Some(match i {
        0 => {
            let o = committed(&[(0, 10), (1, 11), (2, 12)], "first");
            store.commit_with_metadata("g1", &o, none()).await
        }
        1 => {
            store
                .write_group("g1", Some(&record("g1", 1)), none())
                .await
        }
        2 => store.commit("g2", &plain(&[(0, 5)]), none()).await,
        3 => store.compact().await,
        4 => store.delete("g1", Some(&[tp(1)]), none()).await,
        5 => {
            store
                .write_group("g1", Some(&record("g1", 2)), none())
                .await
        }
        6 => {
            let o = committed(&[(3, 13), (0, 20)], "second");
            store.commit_with_metadata("g1", &o, none()).await
        }
        7 => store.compact().await,
        8 => store.write_group("g1", None, none()).await,
        9 => store.delete("g2", None, none()).await,
        10 => store.commit("g3", &plain(&[(0, 1), (1, 2)]), none()).await,
        _ => return None,
    })
}

/// The state after each prefix of the workload, and the file operations it takes (open and
/// close included).
async fn reference() -> (Vec<State>, u64) {
    let fs = SimFs::new();
    let store = open(&fs).unwrap();
    let mut states = vec![state(&store).await];
    let mut i = 0;
    while let Some(result) = step(&store, i).await {
        result.unwrap();
        states.push(state(&store).await);
        i += 1;
    }
    drop(store);
    (states, fs.ops())
}

#[tokio::test]
async fn a_power_cut_after_any_operation_keeps_every_acknowledged_write_and_no_half_one() {
    let (states, total) = reference().await;
    assert!(total > 40, "the workload takes {total} operations");
    for cut in 0..=total {
        let fs = SimFs::new();
        fs.cut_power_after(cut);
        let mut acked = 0;
        if let Ok(store) = open(&fs) {
            while let Some(result) = step(&store, acked).await {
                if result.is_err() {
                    break;
                }
                acked += 1;
            }
            drop(store);
        }
        // What was acknowledged, or that plus the one write in flight, as a whole.
        let allowed = &states[acked..(acked + 2).min(states.len())];
        for mode in CrashMode::ALL {
            let after = fs.restart(mode);
            let store = open(&after)
                .unwrap_or_else(|e| panic!("cut after {cut} ops, {mode:?}: reopen failed: {e}"));
            let found = state(&store).await;
            assert!(
                allowed.contains(&found),
                "cut after {cut} ops, {mode:?}, {acked} writes acknowledged: found {found:?}"
            );
            // The log goes on from there, and keeps what it takes next.
            let o: OffsetMap = [(tp(9), 9)].into();
            store
                .commit("after", &o, CommitFence::none())
                .await
                .unwrap();
            drop(store);
            let again = open(&after).unwrap();
            assert_eq!(again.committed("after", &tp(9)).await.unwrap(), Some(9));
            assert_eq!(again.load_groups().await.unwrap(), found.1);
        }
    }
}

/// A file system holding `fs`'s files, durable, with `SEGMENT_0` replaced by `segment`.
fn with_segment(fs: &SimFs, segment: &[u8]) -> SimFs {
    let copy = SimFs::new();
    for path in fs.paths() {
        if path == Path::new(SEGMENT_0) {
            copy.put_file(&path, segment);
        } else {
            copy.put_file(&path, fs.file(&path).unwrap());
        }
    }
    copy
}

#[tokio::test]
async fn a_power_cut_at_any_byte_of_any_frame_loses_that_frame_whole() {
    let fs = SimFs::new();
    let store = open(&fs).unwrap();
    let mut states = vec![state(&store).await];
    let mut ends = vec![0usize];
    for i in [0, 1, 2, 4, 5, 6, 8, 9, 10] {
        step(&store, i).await.unwrap().unwrap();
        states.push(state(&store).await);
        ends.push(fs.file(SEGMENT_0).unwrap().len());
    }
    drop(store);
    let bytes = fs.file(SEGMENT_0).unwrap();
    assert_eq!(bytes.len(), *ends.last().unwrap());
    let mut cuts = 0;
    for k in 1..ends.len() {
        for cut in ends[k - 1]..ends[k] {
            let torn = with_segment(&fs, &bytes[..cut]);
            let store = open(&torn).unwrap_or_else(|e| panic!("cut at byte {cut}: {e}"));
            assert_eq!(state(&store).await, states[k - 1], "cut at byte {cut}");
            assert_eq!(
                torn.file(SEGMENT_0).unwrap().len(),
                ends[k - 1],
                "cut at byte {cut}: the torn frame is cut off"
            );
            if cut % 7 == 0 {
                // Appends go on from the cut, and a reopen keeps them.
                let o: OffsetMap = [(tp(9), 9)].into();
                store
                    .commit("after", &o, CommitFence::none())
                    .await
                    .unwrap();
                drop(store);
                let again = open(&torn).unwrap_or_else(|e| panic!("cut at byte {cut}: {e}"));
                assert_eq!(again.committed("after", &tp(9)).await.unwrap(), Some(9));
            }
            cuts += 1;
        }
    }
    assert_eq!(cuts, bytes.len());
    // Whole frames are whole: the full segment replays to the last state.
    let whole = with_segment(&fs, &bytes);
    let store = open(&whole).unwrap();
    assert_eq!(state(&store).await, *states.last().unwrap());
    assert!(Path::new(SEGMENT_0).starts_with(DIR));
}
