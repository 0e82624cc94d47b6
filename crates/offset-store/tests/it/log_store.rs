//! The log store: the port's conformance suite (on disk, over SimFs, reopened), metadata and
//! group records across reopens and compactions, the directory lock, a torn tail against a
//! damaged middle, injected EIO and ENOSPC, the flush interval and automatic compaction.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use coordinator_core::testing::offset_store_conformance;
use coordinator_core::txn::{TransactionRecord, TxnState};
use coordinator_core::{
    ClassicProtocol, CommitFence, CommittedOffsets, Generation, GroupKind, GroupRecord, GroupState,
    MemberRecord, OffsetAndMetadata, OffsetMap, OffsetStore, StorageErrorKind, TopicPartition,
};
use offset_store::testing::{CrashMode, Fault, FsOp, SimFs};
use offset_store::LogStore;

const DIR: &str = "/data";

fn tp(topic: &str, p: u32) -> TopicPartition {
    TopicPartition::new(topic, p)
}

fn offsets(entries: &[(u32, i64)]) -> OffsetMap {
    entries.iter().map(|&(p, o)| (tp("t", p), o)).collect()
}

fn with_metadata(entries: &[(u32, i64, &str)]) -> CommittedOffsets {
    entries
        .iter()
        .map(|&(p, o, m)| {
            let meta = OffsetAndMetadata {
                offset: o,
                leader_epoch: Some(p as i32 + 3),
                metadata: m.to_owned(),
                commit_timestamp_ms: 1_700_000_000_000 + p as u64,
            };
            (tp("t", p), meta)
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
        leader: Some("m-1".into()),
        members: (1..=2)
            .map(|i| MemberRecord {
                member_id: format!("m-{i}"),
                group_instance_id: (i == 1).then(|| "static-1".to_owned()),
                client_id: "client".into(),
                client_host: "/127.0.0.1".into(),
                session_timeout_ms: 45_000,
                rebalance_timeout_ms: 300_000,
                protocols: vec![ClassicProtocol::new("range", vec![0u8, 1, i]).with_topics(["t"])],
                assignment: Arc::from(vec![i; 4]),
                partitions: vec![tp("t", u32::from(i))],
                // One member with the consumer protocol's fields, so they round-trip too.
                consumer: (i == 2).then(|| coordinator_core::ConsumerMemberRecord {
                    member_epoch: 7,
                    previous_member_epoch: 6,
                    state: "UNREVOKED_PARTITIONS".into(),
                    rack_id: Some("rack-a".into()),
                    server_assignor: None,
                    subscribed_topic_names: vec!["t".into(), "u".into()],
                    subscribed_topic_regex: Some("u.*".into()),
                    partitions_pending_revocation: vec![tp("t", 3)],
                    target_assignment: vec![tp("t", 2), tp("u", 0)],
                    target_assignment_epoch: 8,
                }),
            })
            .collect(),
    }
}

fn sim_store(fs: &SimFs) -> LogStore<SimFs> {
    LogStore::builder()
        .fs(fs.clone())
        .auto_compaction(false)
        .open(DIR)
        .unwrap()
}

/// A store under a flush interval that never comes: it syncs only when closed.
fn unsynced_store(fs: &SimFs) -> LogStore<SimFs> {
    LogStore::builder()
        .fs(fs.clone())
        .flush_interval_ms(u64::MAX)
        .open(DIR)
        .unwrap()
}

async fn commit(store: &dyn OffsetStore, group: &str, o: &OffsetMap) {
    store.commit(group, o, CommitFence::none()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_store_on_disk_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let n = AtomicUsize::new(0);
    offset_store_conformance(|| {
        let sub = dir
            .path()
            .join(format!("log-{}", n.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir(&sub).unwrap();
        Arc::new(LogStore::open(sub).unwrap()) as Arc<dyn OffsetStore>
    })
    .await;
    assert!(n.load(Ordering::Relaxed) > 0);
}

#[tokio::test]
async fn log_store_on_simulated_fs_conforms() {
    offset_store_conformance(|| {
        Arc::new(LogStore::open_with_fs(DIR, SimFs::new()).unwrap()) as Arc<dyn OffsetStore>
    })
    .await;
}

/// The suite again, each store reopened after the suite is done with it (once from its
/// segments, once more after a compaction): what one instance acknowledged, the next reads.
#[tokio::test]
async fn log_store_reopened_after_each_rule_still_holds_its_writes() {
    let fs = SimFs::new();
    let n = AtomicUsize::new(0);
    let stores = Mutex::new(Vec::new());
    offset_store_conformance(|| {
        let dir = format!("/data/{}", n.fetch_add(1, Ordering::Relaxed));
        let store = Arc::new(LogStore::open_with_fs(&dir, fs.clone()).unwrap());
        stores.lock().unwrap().push(Arc::clone(&store));
        store as Arc<dyn OffsetStore>
    })
    .await;
    for store in stores.into_inner().unwrap() {
        let (dir, snapshot) = (store.dir().to_path_buf(), store.snapshot());
        drop(Arc::into_inner(store).expect("the suite dropped its handles"));
        let reopened = LogStore::open_with_fs(&dir, fs.clone()).unwrap();
        assert_eq!(reopened.snapshot(), snapshot, "{}", dir.display());
        reopened.compact().await.unwrap();
        drop(reopened);
        let compacted = LogStore::open_with_fs(&dir, fs.clone()).unwrap();
        assert_eq!(compacted.snapshot(), snapshot, "{}", dir.display());
    }
}

#[tokio::test]
async fn metadata_and_group_records_round_trip_across_reopens_and_compactions() {
    let fs = SimFs::new();
    let store = sim_store(&fs);
    assert!(store.keeps_metadata() && store.keeps_groups());
    let first = with_metadata(&[(0, 10, "a"), (1, 11, ""), (2, 0, "ünïcode")]);
    store
        .commit_with_metadata("g", &first, CommitFence::none())
        .await
        .unwrap();
    commit(&store, "plain", &offsets(&[(7, 70)])).await;
    for (group, generation) in [("g", 3), ("h", 1), ("g", 4), ("gone", 9)] {
        let r = record(group, generation);
        store
            .write_group(group, Some(&r), CommitFence::none())
            .await
            .unwrap();
    }
    store
        .write_group("gone", None, CommitFence::none())
        .await
        .unwrap();
    let expected_groups = vec![record("g", 4), record("h", 1)];
    async fn check(store: &LogStore<SimFs>, first: &CommittedOffsets, groups: &[GroupRecord]) {
        let snapshot = store.snapshot();
        assert_eq!(&snapshot["g"], first);
        assert_eq!(
            snapshot["plain"][&tp("t", 7)],
            OffsetAndMetadata::new(70),
            "a commit without metadata keeps none"
        );
        assert_eq!(groups, store.load_groups().await.unwrap());
    }
    assert_eq!(store.load_groups().await.unwrap(), expected_groups);
    assert_eq!(store.list_with_metadata("g").await.unwrap(), first);

    check(&store, &first, &expected_groups).await;
    drop(store);
    for mode in CrashMode::ALL {
        let reopened = sim_store(&fs.restart(mode));
        check(&reopened, &first, &expected_groups).await;
    }
    let reopened = sim_store(&fs);
    reopened.compact().await.unwrap();
    assert_eq!(reopened.stats().compactions, 1);
    drop(reopened);
    for mode in CrashMode::ALL {
        let compacted = sim_store(&fs.restart(mode));
        check(&compacted, &first, &expected_groups).await;
        assert_eq!(compacted.stats().offsets, 4);
        assert_eq!(compacted.stats().groups, 2);
    }
    let names: Vec<PathBuf> = fs.paths();
    assert!(
        names
            .iter()
            .all(|p| !p.to_string_lossy().contains("segment-00000000000000000000")),
        "the compacted segment is removed: {names:?}"
    );
}

fn transaction(id: &str, epoch: i16, state: TxnState) -> TransactionRecord {
    TransactionRecord {
        transactional_id: id.into(),
        producer_id: 4000,
        producer_epoch: epoch,
        last_producer_id: -1,
        last_producer_epoch: -1,
        timeout_ms: 60_000,
        state,
        partitions: [tp("t", 0), tp("t", 1)].into(),
        groups: ["g".to_string()].into(),
        pending_offsets: [("g".to_string(), with_metadata(&[(0, 10, "a")]))].into(),
        start_ms: Some(1),
        last_update_ms: 2,
        transaction_version: 0,
    }
}

#[tokio::test]
async fn transaction_records_round_trip_across_reopens_and_compactions() {
    let fs = SimFs::new();
    let store = sim_store(&fs);
    assert!(store.keeps_transactions());
    for (id, epoch, state) in [
        ("a", 0, TxnState::Ongoing),
        ("b", 3, TxnState::CompleteAbort),
        ("a", 1, TxnState::PrepareCommit),
        ("gone", 0, TxnState::Empty),
    ] {
        store
            .write_transaction(
                id,
                Some(&transaction(id, epoch, state)),
                CommitFence::none(),
            )
            .await
            .unwrap();
    }
    store
        .write_transaction("gone", None, CommitFence::none())
        .await
        .unwrap();
    let expected = vec![
        transaction("a", 1, TxnState::PrepareCommit),
        transaction("b", 3, TxnState::CompleteAbort),
    ];
    assert_eq!(store.load_transactions().await.unwrap(), expected);
    let err = store
        .write_transaction(
            "x",
            Some(&transaction("y", 0, TxnState::Empty)),
            CommitFence::none(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StorageErrorKind::Other);
    drop(store);
    for mode in CrashMode::ALL {
        let reopened = sim_store(&fs.restart(mode));
        assert_eq!(reopened.load_transactions().await.unwrap(), expected);
    }
    let reopened = sim_store(&fs);
    reopened.compact().await.unwrap();
    drop(reopened);
    for mode in CrashMode::ALL {
        let compacted = sim_store(&fs.restart(mode));
        assert_eq!(compacted.load_transactions().await.unwrap(), expected);
    }
}

#[tokio::test]
async fn a_record_for_another_group_is_refused() {
    let store = sim_store(&SimFs::new());
    let err = store
        .write_group("a", Some(&record("b", 1)), CommitFence::none())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StorageErrorKind::Other);
    assert!(store.load_groups().await.unwrap().is_empty());
}

fn dir_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_has_one_owner_whatever_files_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = LogStore::open(dir.path()).unwrap();
    commit(&store, "g", &offsets(&[(0, 1)])).await;
    let refused = |why: &str| {
        let err = LogStore::open(dir.path()).unwrap_err();
        assert_eq!(err.kind(), StorageErrorKind::Io, "{why}");
        assert!(err.to_string().contains("in use"), "{why}: {err}");
        assert!(
            err.to_string().contains(&dir.path().display().to_string()),
            "{why}: {err}"
        );
    };
    refused("while the owner is open");
    for file in dir_files(dir.path()) {
        if file.is_dir() {
            std::fs::remove_dir_all(&file).unwrap();
        } else {
            std::fs::remove_file(&file).unwrap();
        }
    }
    refused("after every file of the directory was removed");
    drop(store);
    let next = LogStore::open(dir.path()).unwrap();
    assert_eq!(next.committed("g", &tp("t", 0)).await.unwrap(), None);

    // The simulated file system keeps the same rule.
    let fs = SimFs::new();
    let owner = sim_store(&fs);
    let err = LogStore::open_with_fs(DIR, fs.clone()).unwrap_err();
    assert!(err.to_string().contains("in use"), "{err}");
    drop(owner);
    drop(sim_store(&fs));
}

/// The directory of the group partition in a store's directory.
fn partition_dir(dir: &Path) -> PathBuf {
    dir.join("log").join("__consumer_offsets-0")
}

/// Three commits, each in its own frame, on disk; the segment's bytes and where each frame
/// ends.
async fn three_frames(dir: &Path) -> (PathBuf, Vec<u8>, Vec<usize>) {
    let store = LogStore::open(dir).unwrap();
    let segment = dir_files(&partition_dir(dir)).pop().unwrap();
    let mut ends = Vec::new();
    for i in 0..3 {
        commit(&store, "g", &offsets(&[(i, i64::from(i) + 100)])).await;
        ends.push(std::fs::metadata(&segment).unwrap().len() as usize);
    }
    drop(store);
    (segment.clone(), std::fs::read(&segment).unwrap(), ends)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_tail_is_cut_off_and_a_damaged_middle_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, bytes, ends) = three_frames(dir.path()).await;

    // Torn: the last frame cut short, then garbage that fails its checksum at the very end.
    std::fs::write(&segment, &bytes[..ends[2] - 3]).unwrap();
    let store = LogStore::open(dir.path()).unwrap();
    assert_eq!(
        store.list("g").await.unwrap(),
        offsets(&[(0, 100), (1, 101)])
    );
    assert_eq!(
        std::fs::read(&segment).unwrap(),
        &bytes[..ends[1]],
        "cut at the frame"
    );
    commit(&store, "g", &offsets(&[(2, 7)])).await;
    drop(store);
    let store = LogStore::open(dir.path()).unwrap();
    assert_eq!(
        store.list("g").await.unwrap(),
        offsets(&[(0, 100), (1, 101), (2, 7)])
    );
    drop(store);

    // Damaged middle: one flipped bit in the second frame, with the third after it.
    let mut damaged = bytes.clone();
    damaged[ends[0] + 20] ^= 0x10;
    std::fs::write(&segment, &damaged).unwrap();
    let err = LogStore::open(dir.path()).unwrap_err();
    assert_eq!(err.kind(), StorageErrorKind::Corrupt, "{err}");
    let message = err.to_string();
    assert!(
        message.contains(&segment.display().to_string()),
        "{message}"
    );
    assert!(message.contains(&format!("byte {}", ends[0])), "{message}");
    assert_eq!(std::fs::read(&segment).unwrap(), damaged, "nothing was cut");

    // A damaged length in the first frame's header is damage too, not a torn write.
    let mut header = bytes.clone();
    header[1] ^= 0x01;
    std::fs::write(&segment, &header).unwrap();
    let err = LogStore::open(dir.path()).unwrap_err();
    assert_eq!(err.kind(), StorageErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains("byte 0"), "{err}");
}

#[tokio::test]
async fn a_damaged_closed_segment_or_one_past_a_gap_is_refused() {
    let fs = SimFs::new();
    let store = sim_store(&fs);
    commit(&store, "g", &offsets(&[(0, 1)])).await;
    store.compact().await.unwrap();
    commit(&store, "g", &offsets(&[(1, 2)])).await;
    store.compact().await.unwrap();
    commit(&store, "g", &offsets(&[(2, 3)])).await;
    drop(store);
    let partition = partition_dir(Path::new(DIR));
    let mut segments: Vec<PathBuf> = fs
        .paths()
        .into_iter()
        .filter(|p| p.parent() == Some(&partition) && p.extension().is_some_and(|e| e == "log"))
        .collect();
    segments.sort();
    assert!(
        segments.len() >= 2,
        "a closed segment and the active one: {segments:?}"
    );
    let closed = segments[0].clone();
    let mut bytes = fs.file(&closed).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    let damaged = fs.restart(CrashMode::DropBoth);
    damaged.put_file(&closed, bytes);
    let err = LogStore::open_with_fs(DIR, damaged).unwrap_err();
    assert_eq!(err.kind(), StorageErrorKind::Corrupt, "{err}");
    assert!(
        err.to_string().contains(&closed.display().to_string()),
        "{err}"
    );

    // A segment starting past the end of the one before it: records are missing.
    let gap = fs.restart(CrashMode::DropBoth);
    let far = partition.join("00000000000000000999.log");
    gap.put_file(&far, Vec::new());
    let err = LogStore::open_with_fs(DIR, gap).unwrap_err();
    assert_eq!(err.kind(), StorageErrorKind::Corrupt, "{err}");
    assert!(
        err.to_string().contains(&far.display().to_string()),
        "{err}"
    );
    assert!(err.to_string().contains("starts at offset 999"), "{err}");
}

/// Queues `n` commits (group `g`, partition i → offset i + 10) behind a hold, then lets them
/// go as one batch; their outcomes.
async fn one_batch(store: &Arc<LogStore<SimFs>>, n: u32) -> Vec<Result<(), String>> {
    let hold = store.hold_writes();
    let mut tasks = Vec::new();
    for i in 0..n {
        let store = Arc::clone(store);
        tasks.push(tokio::spawn(async move {
            store
                .commit(
                    "g",
                    &offsets(&[(i, i64::from(i) + 10)]),
                    CommitFence::none(),
                )
                .await
                .map_err(|e| e.to_string())
        }));
    }
    while store.queued_writes() < n as usize {
        tokio::task::yield_now().await;
    }
    drop(hold);
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_changes_nothing_and_every_committer_hears_it() {
    for (op, fault) in [
        (FsOp::WriteAll, Fault::Eio),
        (FsOp::WriteAll, Fault::Enospc),
        (FsOp::Fsync, Fault::Eio),
        (FsOp::Fsync, Fault::Enospc),
    ] {
        let case = format!("{op:?} {fault:?}");
        let fs = SimFs::new();
        let store = Arc::new(sim_store(&fs));
        commit(&*store, "g", &offsets(&[(0, 1)])).await;
        let segment = partition_dir(Path::new(DIR)).join("00000000000000000000.log");
        let before = fs.file(&segment).unwrap();
        fs.fail_nth(op, 1, fault);
        let outcomes = one_batch(&store, 4).await;
        let errno = match fault {
            Fault::Eio => "os error 5",
            Fault::Enospc => "os error 28",
        };
        for outcome in &outcomes {
            let err = outcome.as_ref().unwrap_err();
            assert!(err.contains(errno), "{case}: {err}");
            assert!(err.contains("nothing changed"), "{case}: {err}");
            assert!(
                err.contains(&segment.display().to_string()),
                "{case}: {err}"
            );
        }
        assert_eq!(store.list("g").await.unwrap(), offsets(&[(0, 1)]), "{case}");
        assert_eq!(fs.file(&segment).unwrap(), before, "{case}: cut back");
        for mode in CrashMode::ALL {
            let after = sim_store(&fs.restart(mode));
            assert_eq!(after.list("g").await.unwrap(), offsets(&[(0, 1)]), "{case}");
        }
        // The next batch lands.
        assert!(
            one_batch(&store, 2).await.iter().all(Result::is_ok),
            "{case}"
        );
        assert_eq!(
            store.list("g").await.unwrap(),
            offsets(&[(0, 10), (1, 11)]),
            "{case}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_cut_fails_too_blocks_writes_until_the_cut_succeeds() {
    let fs = SimFs::new();
    let store = Arc::new(sim_store(&fs));
    commit(&*store, "g", &offsets(&[(0, 1)])).await;
    fs.fail_nth(FsOp::WriteAll, 1, Fault::Eio);
    fs.fail_nth(FsOp::Truncate, 1, Fault::Eio);
    let outcomes = one_batch(&store, 3).await;
    for outcome in &outcomes {
        let err = outcome.as_ref().unwrap_err();
        assert!(err.contains("refuses appends"), "{err}");
    }
    // The half-written batch is on disk, but a reopen would cut it as a torn tail.
    for mode in CrashMode::ALL {
        let after = sim_store(&fs.restart(mode));
        assert_eq!(after.list("g").await.unwrap(), offsets(&[(0, 1)]));
    }
    // No write lands while the cut fails, and a compaction leaves the segment holding the
    // failed bytes alone; the next write first cuts them off, then lands.
    fs.set_failing(FsOp::Truncate, Fault::Eio);
    store.compact().await.unwrap();
    let err = store
        .commit("g", &offsets(&[(5, 5)]), CommitFence::none())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cut back"), "{err}");
    fs.clear_faults();
    commit(&*store, "g", &offsets(&[(5, 5)])).await;
    drop(store);
    for mode in CrashMode::ALL {
        let after = sim_store(&fs.restart(mode));
        assert_eq!(after.list("g").await.unwrap(), offsets(&[(0, 1), (5, 5)]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_one_write_and_one_fdatasync() {
    let fs = SimFs::new();
    let store = Arc::new(sim_store(&fs));
    let calls = Arc::new(Mutex::new(BTreeMap::<FsOp, u32>::new()));
    let counter = Arc::clone(&calls);
    fs.set_hook(Some(Arc::new(move |op| {
        *counter.lock().unwrap().entry(op).or_default() += 1;
    })));
    assert!(one_batch(&store, 16).await.iter().all(Result::is_ok));
    fs.set_hook(None);
    let calls = calls.lock().unwrap().clone();
    assert_eq!(
        calls,
        BTreeMap::from([(FsOp::WriteAll, 1), (FsOp::Fsync, 1)]),
        "16 commits of one batch"
    );
    assert_eq!(store.list("g").await.unwrap().len(), 16);
    let stats = store.stats();
    assert_eq!((stats.batches, stats.writes), (1, 16), "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_flush_interval_a_commit_is_acknowledged_before_its_sync() {
    let fs = SimFs::new();
    let store = unsynced_store(&fs);
    let syncs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&syncs);
    fs.set_hook(Some(Arc::new(move |op| {
        if op == FsOp::Fsync {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    })));
    for i in 0..20 {
        commit(&store, "g", &offsets(&[(i, 1)])).await;
    }
    assert_eq!(syncs.load(Ordering::Relaxed), 0, "no sync per commit");
    // A process crash keeps them (the OS has the bytes); a power cut now loses them whole.
    let process_crash = sim_store(&fs.restart(CrashMode::DropUnsyncedNames));
    assert_eq!(process_crash.list("g").await.unwrap().len(), 20);
    let power_cut = sim_store(&fs.restart(CrashMode::DropUnsyncedData));
    assert!(power_cut.list("g").await.unwrap().is_empty());
    // Closing the store syncs.
    drop(store);
    assert_eq!(syncs.load(Ordering::Relaxed), 1);
    let after = sim_store(&fs.restart(CrashMode::DropBoth));
    assert_eq!(after.list("g").await.unwrap().len(), 20);
}

/// Which threads made `op`, while the hook is set.
fn threads_doing(fs: &SimFs, op: FsOp) -> Arc<Mutex<Vec<String>>> {
    let names = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&names);
    fs.set_hook(Some(Arc::new(move |o| {
        if o == op {
            let name = std::thread::current().name().unwrap_or("?").to_owned();
            seen.lock().unwrap().push(name);
        }
    })));
    names
}

#[tokio::test]
async fn with_a_flush_interval_an_idle_stores_commit_is_written_by_its_caller() {
    let fs = SimFs::new();
    let store = unsynced_store(&fs);
    let here = std::thread::current().name().unwrap_or("?").to_owned();
    let writers = threads_doing(&fs, FsOp::WriteAll);
    // The first write leaves the log unsynced and pokes the writer thread once (it may be
    // waiting with no deadline); a commit that meets the thread awake is queued for it, which
    // on a loaded machine happened in CI. So the first write is made apart, and probes (another
    // group) follow until three in a row were written here, bounded: the wake-up has passed,
    // and nothing wakes the thread again.
    commit(&store, "probe", &offsets(&[(1_000, 1)])).await;
    let mut in_a_row = 0;
    for i in 0..300 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        writers.lock().unwrap().clear();
        commit(&store, "probe", &offsets(&[(i, 1)])).await;
        if *writers.lock().unwrap() == [here.clone()] {
            in_a_row += 1;
            if in_a_row == 3 {
                break;
            }
        } else {
            in_a_row = 0;
        }
    }
    assert_eq!(
        in_a_row, 3,
        "no three probe commits in a row were written by their caller"
    );
    writers.lock().unwrap().clear();
    let before = store.stats();
    for i in 0..5 {
        commit(&store, "g", &offsets(&[(i, 1)])).await;
    }
    // No hand-off to the writer thread and back: the caller's thread appended each one.
    assert_eq!(*writers.lock().unwrap(), vec![here; 5]);
    assert_eq!(store.list("g").await.unwrap().len(), 5);
    let stats = store.stats();
    assert_eq!(
        (stats.batches - before.batches, stats.writes - before.writes),
        (5, 5),
        "{stats:?}"
    );

    // A held writer is not bypassed: the commit waits in the queue for the thread.
    let hold = store.hold_writes();
    let late = offsets(&[(9, 9)]);
    let mut waiting = store.commit("g", &late, CommitFence::none());
    assert!(poll_once(&mut waiting).await.is_none());
    assert_eq!(store.queued_writes(), 1);
    drop(hold);
    waiting.await.unwrap();
    assert_eq!(
        writers.lock().unwrap().last().map(String::as_str),
        Some("offset-log-writer")
    );
    fs.set_hook(None);
    drop(store);
    let after = sim_store(&fs.restart(CrashMode::DropBoth));
    assert_eq!(after.list("g").await.unwrap().len(), 6);
}

/// Polls `f` once: its output if it is ready at once.
async fn poll_once<F: std::future::Future + Unpin>(mut f: F) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
            std::task::Poll::Ready(out) => Some(out),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_flush_interval_concurrent_committers_keep_the_log_and_the_view_in_step() {
    // Writes made inline and writes batched by the thread mix; whatever order they land in,
    // the log replays to exactly what the store answered.
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        LogStore::builder()
            .flush_interval_ms(1)
            .compaction_ratio(2)
            .compaction_min_bytes(8 << 10)
            .open(dir.path())
            .unwrap(),
    );
    let tasks: Vec<_> = (0..8u32)
        .map(|t| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                for round in 0..300i64 {
                    let o: OffsetMap = (0..3).map(|p| (tp(&format!("t{t}"), p), round)).collect();
                    commit(&*store, &format!("g{}", t % 3), &o).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let stats = store.stats();
    assert_eq!(stats.writes, 8 * 300, "{stats:?}");
    // A compaction runs on a thread of its own (snapshot, fsync, rename) and is taken in by
    // the writer after a later write: on a busy machine the 2,400 writes can all land before
    // the first snapshot is on disk (seen in CI). Writing the last round again (the same
    // offsets) until one has been taken in, bounded, checks that one happens without
    // timing the machine.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while store.stats().compactions == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no compaction within 60 s: {:?}",
            store.stats()
        );
        let o: OffsetMap = (0..3).map(|p| (tp("t0", p), 299)).collect();
        commit(&*store, "g0", &o).await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let snapshot = store.snapshot();
    for t in 0..8u32 {
        let group = &snapshot[&format!("g{}", t % 3)];
        for p in 0..3 {
            assert_eq!(group[&tp(&format!("t{t}"), p)].offset, 299, "t{t} p{p}");
        }
    }
    drop(Arc::into_inner(store).expect("every task is done"));
    let reopened = LogStore::open(dir.path()).unwrap();
    assert_eq!(reopened.snapshot(), snapshot);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automatic_compaction_keeps_the_files_within_a_multiple_of_the_live_data() {
    let dir = tempfile::tempdir().unwrap();
    let store = LogStore::builder()
        .compaction_ratio(2)
        .compaction_min_bytes(16 << 10)
        .open(dir.path())
        .unwrap();
    let mut largest = 0u64;
    for round in 0..3000i64 {
        let o: OffsetMap = (0..4).map(|p| (tp("orders", p), round)).collect();
        commit(&store, &format!("g{}", round % 8), &o).await;
        let on_disk: u64 = dir_files(dir.path())
            .iter()
            .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
            .sum();
        largest = largest.max(on_disk);
    }
    let stats = store.stats();
    assert!(stats.compactions > 0, "{stats:?}");
    assert_eq!(stats.offsets, 32);
    // 3,000 commits of ~200 bytes each went in; the files never held more than the
    // compaction bound (16 KiB of log over ~2 KiB of live data), a snapshot in flight and the
    // segment written while it was being made.
    let written = 3000 * 4 * 50;
    assert!(
        largest < written / 4,
        "at most {largest} bytes on disk for {written} written"
    );
    drop(store);
    let reopened = LogStore::open(dir.path()).unwrap();
    for g in 0..8 {
        let last = 2999 - (7 - g);
        let expected: OffsetMap = (0..4).map(|p| (tp("orders", p), last)).collect();
        assert_eq!(reopened.list(&format!("g{g}")).await.unwrap(), expected);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_go_on_while_a_compaction_is_parked_in_its_switch() {
    use std::sync::Condvar;
    let fs = SimFs::new();
    let store = LogStore::builder()
        .fs(fs.clone())
        .compaction_ratio(1)
        .compaction_min_bytes(1)
        .open(DIR)
        .unwrap();
    // The compactor is the only caller of rename: park it there until released.
    let gate = Arc::new((Mutex::new((false, false)), Condvar::new()));
    let hook_gate = Arc::clone(&gate);
    fs.set_hook(Some(Arc::new(move |op| {
        if op == FsOp::Rename {
            let (lock, changed) = &*hook_gate;
            let mut state = lock.lock().unwrap();
            state.0 = true;
            changed.notify_all();
            while !state.1 {
                state = changed.wait(state).unwrap();
            }
        }
    })));
    let mut i = 0i64;
    while !gate.0.lock().unwrap().0 {
        commit(&store, "g", &offsets(&[(0, i)])).await;
        i += 1;
        assert!(i < 10_000, "no compaction started");
    }
    // Parked in the middle of the switch: commits still land, one batch at a time.
    for k in 0..20 {
        commit(&store, "h", &offsets(&[(k, 1)])).await;
    }
    assert_eq!(store.list("h").await.unwrap().len(), 20);
    assert_eq!(store.stats().compactions, 0);
    {
        let (lock, changed) = &*gate;
        lock.lock().unwrap().1 = true;
        changed.notify_all();
    }
    drop(store);
    fs.set_hook(None);
    let reopened = sim_store(&fs.restart(CrashMode::DropBoth));
    assert_eq!(reopened.list("h").await.unwrap().len(), 20);
    assert_eq!(reopened.list("g").await.unwrap(), offsets(&[(0, i - 1)]));
    // The pass completed: its checkpoint is written.
    assert!(fs.file("/data/log/cleaner-offset-checkpoint").is_some());
}

/// Polls `done` every few milliseconds, for at most a minute (a bound on a hang, not a
/// timing requirement).
async fn eventually(what: &str, mut done: impl AsyncFnMut() -> bool) {
    for _ in 0..12_000 {
        if done().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("never: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_flush_interval_the_writer_syncs_by_itself_and_stops_on_a_failed_sync() {
    let fs = SimFs::new();
    let store = LogStore::builder()
        .fs(fs.clone())
        .flush_interval_ms(5)
        .open(DIR)
        .unwrap();
    commit(&store, "g", &offsets(&[(0, 1)])).await;
    eventually("the periodic sync makes the commit durable", async || {
        let after = sim_store(&fs.restart(CrashMode::DropBoth));
        after.committed("g", &tp("t", 0)).await.unwrap() == Some(1)
    })
    .await;

    // A failed periodic sync: writes are refused until a sync succeeds.
    fs.set_failing(FsOp::Fsync, Fault::Eio);
    commit(&store, "g", &offsets(&[(1, 1)])).await;
    eventually(
        "a write is refused after the failed sync",
        async || match store
            .commit("g", &offsets(&[(2, 2)]), CommitFence::none())
            .await
        {
            Ok(()) => false,
            Err(e) => {
                assert!(e.to_string().contains("periodic fdatasync"), "{e}");
                true
            }
        },
    )
    .await;
    fs.clear_faults();
    eventually("writes are taken again once a sync succeeds", async || {
        store
            .commit("g", &offsets(&[(3, 3)]), CommitFence::none())
            .await
            .is_ok()
    })
    .await;
    drop(store);
    let after = sim_store(&fs.restart(CrashMode::DropBoth));
    let stored = after.list("g").await.unwrap();
    assert_eq!(
        stored[&tp("t", 1)],
        1,
        "acknowledged before the failed sync"
    );
    assert_eq!(stored[&tp("t", 3)], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_compaction_keeps_the_log_whole_and_the_next_one_succeeds() {
    // Every file operation a compaction makes (the roll of the active segment, the cleaner's
    // checkpoint, the rewritten segment and its swap), each failing on its first, second
    // and third call.
    let mut failed = 0;
    for op in FsOp::ALL {
        for nth in 1..=3 {
            for fault in [Fault::Eio, Fault::Enospc] {
                let case = format!("{op:?} #{nth} {fault:?}");
                let fs = SimFs::new();
                let store = sim_store(&fs);
                // Two commits of one partition, so the pass has a record to remove.
                commit(&store, "g", &offsets(&[(0, 0), (1, 2)])).await;
                commit(&store, "g", &offsets(&[(0, 1)])).await;
                store
                    .write_group("g", Some(&record("g", 5)), CommitFence::none())
                    .await
                    .unwrap();
                fs.fail_nth(op, nth, fault);
                if let Err(err) = store.compact().await {
                    assert_eq!(err.kind(), StorageErrorKind::Io, "{case}: {err}");
                    failed += 1;
                }
                fs.clear_faults();
                // Writes go on, and every crash mode still replays everything.
                commit(&store, "g", &offsets(&[(2, 3)])).await;
                let expected = offsets(&[(0, 1), (1, 2), (2, 3)]);
                for mode in CrashMode::ALL {
                    let after = sim_store(&fs.restart(mode));
                    assert_eq!(after.list("g").await.unwrap(), expected, "{case} {mode:?}");
                    assert_eq!(
                        after.load_groups().await.unwrap(),
                        [record("g", 5)],
                        "{case}"
                    );
                }
                store.compact().await.unwrap();
                drop(store);
                let after = sim_store(&fs.restart(CrashMode::DropBoth));
                assert_eq!(after.list("g").await.unwrap(), expected, "{case}");
                drop(after);
            }
        }
    }
    assert!(failed >= 10, "only {failed} cases failed the compaction");
}

/// An observer for [`LogStoreBuilder::on_sync`](offset_store::LogStoreBuilder::on_sync)
/// that counts its calls.
type SyncObserver = Arc<dyn Fn(std::time::Duration) + Send + Sync>;
fn sync_counter() -> (Arc<AtomicUsize>, SyncObserver) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let observer: SyncObserver = Arc::new(move |_took| {
        counted.fetch_add(1, Ordering::Relaxed);
    });
    (calls, observer)
}

/// Counts `op` on `fs` from now on.
fn count_op(fs: &SimFs, op: FsOp) -> Arc<AtomicUsize> {
    let n = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&n);
    fs.set_hook(Some(Arc::new(move |o| {
        if o == op {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    })));
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sync_observer_is_told_each_batchs_fdatasync_and_no_failed_one() {
    let fs = SimFs::new();
    let (told, observer) = sync_counter();
    let store = LogStore::builder()
        .fs(fs.clone())
        .auto_compaction(false)
        .on_sync(observer)
        .open(DIR)
        .unwrap();
    let fsyncs = count_op(&fs, FsOp::Fsync);
    for i in 0..10 {
        commit(&store, "g", &offsets(&[(i, 1)])).await;
    }
    store
        .write_group("g", Some(&record("g", 1)), CommitFence::none())
        .await
        .unwrap();
    let stats = store.stats();
    assert_eq!(stats.batches, 11, "one at a time: a batch each");
    assert_eq!(told.load(Ordering::Relaxed), 11, "a sync told per batch");
    assert_eq!(fsyncs.load(Ordering::Relaxed), 11, "and each was a sync");
    // A failed sync is not told. (The cut that undoes its batch is not synced: the next
    // batch is written over the place it held, and a power cut before that leaves a torn
    // tail, which the next open cuts.)
    fs.fail_nth(FsOp::Fsync, 1, Fault::Eio);
    let failed = store
        .commit("g", &offsets(&[(0, 2)]), CommitFence::none())
        .await;
    assert!(failed.is_err());
    assert_eq!(fsyncs.load(Ordering::Relaxed), 12, "the failed one");
    assert_eq!(told.load(Ordering::Relaxed), 11);
    commit(&store, "g", &offsets(&[(0, 3)])).await;
    assert_eq!(told.load(Ordering::Relaxed), 12);
    assert_eq!(store.stats().batches, 12);
    fs.set_hook(None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_flush_interval_the_sync_observer_is_told_the_syncs_made() {
    let fs = SimFs::new();
    let (told, observer) = sync_counter();
    // An interval that never comes: the store syncs only when closed.
    let store = LogStore::builder()
        .fs(fs.clone())
        .flush_interval_ms(u64::MAX)
        .on_sync(observer)
        .open(DIR)
        .unwrap();
    for i in 0..20 {
        commit(&store, "g", &offsets(&[(i, 1)])).await;
    }
    assert_eq!(
        told.load(Ordering::Relaxed),
        0,
        "no sync per commit: none told"
    );
    drop(store);
    assert_eq!(told.load(Ordering::Relaxed), 1, "the sync at close");
}

/// Deleting all of a group's offsets writes one deletion per partition (each with the key of
/// the commit it deletes, as Kafka's tombstones), including a partition committed earlier in
/// the same batch; the log holds no deletion of a whole group, and replays to no offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_groups_offsets_writes_a_deletion_per_partition() {
    use offset_store::testing::{group_log_records, LogRecord};
    let fs = SimFs::new();
    let store = Arc::new(sim_store(&fs));
    commit(&*store, "g", &offsets(&[(0, 1), (1, 2)])).await;
    commit(&*store, "other", &offsets(&[(0, 9)])).await;
    {
        let hold = store.hold_writes();
        let (a, b) = (Arc::clone(&store), Arc::clone(&store));
        let first = tokio::spawn(async move {
            a.commit("g", &offsets(&[(2, 3)]), CommitFence::none())
                .await
        });
        while store.queued_writes() < 1 {
            tokio::task::yield_now().await;
        }
        let second = tokio::spawn(async move { b.delete("g", None, CommitFence::none()).await });
        while store.queued_writes() < 2 {
            tokio::task::yield_now().await;
        }
        drop(hold);
        first.await.unwrap().unwrap();
        second.await.unwrap().unwrap();
    }
    assert!(!store.snapshot().contains_key("g"));
    drop(store);
    let records: Vec<LogRecord> = group_log_records(fs.clone(), Path::new(DIR))
        .unwrap()
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    assert!(
        !records
            .iter()
            .any(|r| matches!(r, LogRecord::DeleteGroupOffsets { .. })),
        "{records:?}"
    );
    let mut deleted: Vec<u32> = records
        .iter()
        .filter_map(|r| match r {
            LogRecord::DeleteOffset { group, tp } if group == "g" => Some(tp.partition()),
            _ => None,
        })
        .collect();
    deleted.sort_unstable();
    assert_eq!(deleted, [0, 1, 2]);
    let reopened = sim_store(&fs.restart(CrashMode::DropBoth));
    let after = reopened.snapshot();
    assert!(!after.contains_key("g"), "{after:?}");
    assert_eq!(after["other"].len(), 1);
}

/// Every compaction closes the active segment, and the cleaner merges the closed ones: after
/// many compactions the partition is a few files, not one more per compaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_compactions_leave_a_few_segment_files() {
    let fs = SimFs::new();
    let store = LogStore::builder()
        .fs(fs.clone())
        .auto_compaction(false)
        .open(DIR)
        .unwrap();
    for round in 0..60i64 {
        for p in 0..5 {
            commit(&store, "g", &offsets(&[(p, round * 10 + i64::from(p))])).await;
        }
        store.compact().await.unwrap();
    }
    assert_eq!(store.stats().compactions, 60);
    let expected = store.list("g").await.unwrap();
    drop(store);
    let partition = partition_dir(Path::new(DIR));
    let files = fs
        .paths()
        .into_iter()
        .filter(|p| p.parent() == Some(&partition))
        .count();
    assert!(files <= 4, "{files} files: {:?}", fs.paths());
    let reopened = sim_store(&fs.restart(CrashMode::DropBoth));
    assert_eq!(reopened.list("g").await.unwrap(), expected);
}
