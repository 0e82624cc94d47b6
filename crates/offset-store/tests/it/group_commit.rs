//! Group commit in the JSON store: writes that queue while a file write is in flight share
//! the next one; each caller hears back only once the file write carrying its write is
//! durable and visible; a failed file write fails every write of its batch and changes
//! nothing; fences are held until the batch is visible; and a dropped store finishes what
//! was queued before it lets the file go.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Waker};

use common::{check_error, reference_encoding, tp, Groups};
use coordinator_core::{
    AssignError, Assignment, AssignmentInput, Assignor, CommitFence, Coordinator, OffsetMap,
    OffsetStore, StorageError, StorageErrorKind, TopicIndex,
};
use offset_store::testing::{Fault, FsOp, SimFs};
use offset_store::JsonFileStore;

const PATH: &str = "/data/offsets.json";

fn offsets(entries: &[(&str, u32, i64)]) -> OffsetMap {
    entries.iter().map(|&(t, p, o)| (tp(t, p), o)).collect()
}

type WriteFuture<'a> = Pin<Box<dyn Future<Output = Result<(), StorageError>> + Send + 'a>>;

/// Polls `future` once with a waker that does nothing.
fn poll_once(future: &mut WriteFuture<'_>) -> Poll<Result<(), StorageError>> {
    future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
}

/// A minimal executor that is not tokio: the store needs no runtime.
fn block_on<F: Future>(future: F) -> F::Output {
    use std::task::Wake;
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(out) => return out,
            Poll::Pending => std::thread::park(),
        }
    }
}

/// Parks the writer thread each time it reaches `op`, until told to go on.
struct Parking {
    reached: mpsc::Receiver<()>,
    resume: mpsc::Sender<()>,
}

impl Parking {
    fn at(fs: &SimFs, op: FsOp) -> Parking {
        let (reached_tx, reached) = mpsc::channel();
        let (resume, resume_rx) = mpsc::channel();
        let (reached_tx, resume_rx) = (Mutex::new(reached_tx), Mutex::new(resume_rx));
        fs.set_hook(Some(Arc::new(move |seen| {
            if seen == op {
                reached_tx.lock().unwrap().send(()).unwrap();
                resume_rx.lock().unwrap().recv().unwrap();
            }
        })));
        Parking { reached, resume }
    }

    /// Waits until the writer is parked.
    fn wait(&self) {
        self.reached.recv().unwrap();
    }

    /// Lets the parked writer go on.
    fn release(&self) {
        self.resume.send(()).unwrap();
    }
}

/// How many file writes a history of `ops` file operations made (five per file write).
fn file_writes(ops: u64) -> u64 {
    assert_eq!(ops % 5, 0, "{ops} operations are not whole file writes");
    ops / 5
}

#[test]
fn writes_queued_together_share_one_file_write() {
    let rt = common::runtime();
    // Eight writes: three groups, the same partition committed twice, a delete in between.
    let writes = vec![
        common::Write::Commit("a".into(), offsets(&[("t", 0, 1), ("t", 1, 1)])),
        common::Write::Commit("b".into(), offsets(&[("t", 0, 2)])),
        common::Write::Commit("a".into(), offsets(&[("t", 0, 3)])),
        common::Write::Delete("a".into(), Some(vec![tp("t", 1)])),
        common::Write::Commit("c".into(), offsets(&[("u", 7, 4)])),
        common::Write::Commit("b".into(), offsets(&[("t", 5, 5)])),
        common::Write::Delete("c".into(), None),
        common::Write::Commit("c".into(), offsets(&[("u", 8, 6)])),
    ];
    let expected = common::apply(&Groups::new(), &writes);
    assert_eq!(
        expected,
        BTreeMap::from([
            ("a".to_string(), offsets(&[("t", 0, 3)])),
            ("b".to_string(), offsets(&[("t", 0, 2), ("t", 5, 5)])),
            ("c".to_string(), offsets(&[("u", 8, 6)])),
        ])
    );
    // max_batch, and the file writes eight queued writes take under it.
    for (max_batch, writes_expected) in [(usize::MAX, 1), (3, 3), (1, 8)] {
        let fs = SimFs::new();
        let store = JsonFileStore::builder()
            .fs(fs.clone())
            .max_batch(max_batch)
            .open(PATH)
            .unwrap();
        let before = fs.ops();
        let outcome = common::write_batch(&rt, &store, &writes);
        assert_eq!(outcome.queued, 8);
        assert!(outcome.all_or_nothing().unwrap().is_ok());
        assert_eq!(
            file_writes(fs.ops() - before),
            writes_expected,
            "max_batch {max_batch}"
        );
        assert_eq!(store.snapshot(), expected, "max_batch {max_batch}");
        assert_eq!(fs.file(PATH), Some(reference_encoding(&expected)));
    }
}

/// A write that arrives while a file write is in flight waits for the next one, and nobody
/// hears back before the file write carrying their write is durable.
#[test]
fn a_write_is_acknowledged_only_once_its_file_write_is_durable() {
    let fs = SimFs::new();
    let store = JsonFileStore::open_with_fs(PATH, fs.clone()).unwrap();
    let parking = Parking::at(&fs, FsOp::FsyncDir);
    let (a, b, c) = (
        offsets(&[("t", 0, 1)]),
        offsets(&[("t", 1, 2)]),
        offsets(&[("t", 2, 3)]),
    );
    let mut first: WriteFuture<'_> = store.commit("g", &a, CommitFence::none());
    assert!(poll_once(&mut first).is_pending());
    parking.wait(); // the first file write is renamed, its directory fsync not yet done

    let mut second: WriteFuture<'_> = store.commit("g", &b, CommitFence::none());
    let mut third: WriteFuture<'_> = store.commit("h", &c, CommitFence::none());
    assert!(poll_once(&mut second).is_pending());
    assert!(poll_once(&mut third).is_pending());
    assert_eq!(
        store.queued_writes(),
        2,
        "they wait for the next file write"
    );
    assert!(
        poll_once(&mut first).is_pending(),
        "acknowledged before the directory fsync"
    );
    assert!(store.snapshot().is_empty(), "visible before it is durable");

    parking.release();
    parking.wait(); // the second file write, carrying both queued writes
    assert_eq!(
        store.queued_writes(),
        0,
        "both queued writes are in this file write"
    );
    block_on(first).unwrap();
    assert_eq!(
        store.snapshot(),
        BTreeMap::from([("g".to_string(), a.clone())])
    );
    assert!(poll_once(&mut second).is_pending());
    assert!(poll_once(&mut third).is_pending());

    parking.release();
    block_on(second).unwrap();
    block_on(third).unwrap();
    fs.set_hook(None);
    let mut g = a;
    g.extend(b);
    let expected = BTreeMap::from([("g".to_string(), g), ("h".to_string(), c)]);
    assert_eq!(store.snapshot(), expected);
    assert_eq!(fs.file(PATH), Some(reference_encoding(&expected)));
    assert_eq!(store.queued_writes(), 0);
}

#[test]
fn a_failed_file_write_fails_every_write_of_its_batch_and_changes_nothing() {
    let rt = common::runtime();
    for op in [FsOp::WriteAll, FsOp::Fsync, FsOp::Rename, FsOp::FsyncDir] {
        let fs = SimFs::new();
        let store = JsonFileStore::open_with_fs(PATH, fs.clone()).unwrap();
        common::commit(
            &rt,
            &store,
            &BTreeMap::from([("g".to_string(), offsets(&[("t", 0, 1)]))]),
        )
        .unwrap();
        let (bytes, snapshot) = (fs.file(PATH), store.snapshot());
        fs.fail_nth(op, 1, Fault::Enospc);
        let writes: Vec<common::Write> = (0..5)
            .map(|i| common::Write::Commit(format!("g{}", i % 2), offsets(&[("t", i, 9)])))
            .chain([common::Write::Delete("g".into(), None)])
            .collect();
        let outcome = common::write_batch(&rt, &store, &writes);
        assert_eq!(outcome.queued, 6, "{op:?}");
        for result in &outcome.results {
            let err = result.as_ref().unwrap_err();
            check_error(err, StorageErrorKind::Io, std::path::Path::new(PATH)).unwrap();
            assert!(err.message().contains("No space left"), "{op:?}: {err}");
        }
        assert_eq!(fs.file(PATH), bytes, "{op:?}");
        assert_eq!(store.snapshot(), snapshot, "{op:?}");
        // The next batch goes through.
        let outcome = common::write_batch(&rt, &store, &writes);
        assert!(outcome.all_or_nothing().unwrap().is_ok(), "{op:?}");
        assert_eq!(
            store.snapshot(),
            common::apply(&snapshot, &writes),
            "{op:?}"
        );
    }
}

/// A write whose future is dropped while it is queued is still written, with its batch.
#[test]
fn a_dropped_write_still_goes_out_with_its_batch() {
    let fs = SimFs::new();
    let store = JsonFileStore::open_with_fs(PATH, fs.clone()).unwrap();
    let (a, b) = (offsets(&[("t", 0, 1)]), offsets(&[("t", 1, 2)]));
    let hold = store.hold_writes();
    let mut kept: WriteFuture<'_> = store.commit("g", &a, CommitFence::none());
    let mut dropped: WriteFuture<'_> = store.commit("g", &b, CommitFence::none());
    assert!(poll_once(&mut kept).is_pending());
    assert!(poll_once(&mut dropped).is_pending());
    drop(dropped);
    // Counted while the hold still stops the writer: once it goes, the writer may finish
    // before this thread looks (the count was taken after `drop(hold)` and raced it).
    let before = fs.ops();
    drop(hold);
    block_on(kept).unwrap();
    assert_eq!(file_writes(fs.ops() - before), 1);
    let mut both = a;
    both.extend(b);
    assert_eq!(store.snapshot(), BTreeMap::from([("g".to_string(), both)]));
}

/// Dropping the store lets the writer finish every queued write before the lock goes.
#[test]
fn a_dropped_store_finishes_its_queue_before_it_lets_the_file_go() {
    let fs = SimFs::new();
    let store = JsonFileStore::open_with_fs(PATH, fs.clone()).unwrap();
    let hold = store.hold_writes();
    let all: Vec<OffsetMap> = (0..3)
        .map(|i| offsets(&[("t", i, 10 + i64::from(i))]))
        .collect();
    let mut futures: Vec<WriteFuture<'_>> = all
        .iter()
        .map(|o| store.commit("g", o, CommitFence::none()))
        .collect();
    for f in &mut futures {
        assert!(poll_once(f).is_pending());
    }
    drop(futures);
    drop(hold);
    drop(store);
    assert!(!fs.is_locked("/data/offsets.json.lock"));
    let reopened = JsonFileStore::open_with_fs(PATH, fs).unwrap();
    let expected: OffsetMap = all.into_iter().flatten().collect();
    assert_eq!(
        reopened.snapshot(),
        BTreeMap::from([("g".to_string(), expected)])
    );
}

/// A delete issued after a commit that is still queued must come after it, not be skipped
/// as "nothing to delete" because the commit is not visible yet.
#[test]
fn a_delete_after_a_queued_commit_is_not_skipped() {
    let fs = SimFs::new();
    let store = JsonFileStore::open_with_fs(PATH, fs.clone()).unwrap();
    let o = offsets(&[("t", 0, 1)]);
    let hold = store.hold_writes();
    let mut commit: WriteFuture<'_> = store.commit("g", &o, CommitFence::none());
    assert!(poll_once(&mut commit).is_pending());
    let partitions = [tp("t", 0)];
    let mut delete: WriteFuture<'_> = store.delete("g", Some(&partitions), CommitFence::none());
    assert!(
        poll_once(&mut delete).is_pending(),
        "the delete was skipped"
    );
    drop(hold);
    block_on(commit).unwrap();
    block_on(delete).unwrap();
    assert!(store.snapshot().is_empty());
    // With nothing in flight, a delete of nothing writes nothing.
    let before = fs.ops();
    block_on(store.delete("g", None, CommitFence::none())).unwrap();
    assert_eq!(fs.ops(), before);
}

/// Many threads commit at once with no async runtime anywhere; every commit lands.
#[test]
fn concurrent_commits_without_a_runtime_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offsets.json");
    let store = Arc::new(JsonFileStore::open(&path).unwrap());
    let threads: Vec<_> = (0..8u32)
        .map(|g| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for i in 0..10u32 {
                    let o = offsets(&[("t", i, i64::from(g * 100 + i))]);
                    block_on(store.commit(&format!("g{g}"), &o, CommitFence::none())).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let snapshot = store.snapshot();
    assert_eq!(snapshot.len(), 8);
    assert!(snapshot.values().all(|o| o.len() == 10));
    drop(Arc::into_inner(store).unwrap());
    assert_eq!(JsonFileStore::open(&path).unwrap().snapshot(), snapshot);
}

// ------------------------------------------------------------------ fences of a batch

/// Partition p of each topic goes to member p mod n, in member order.
struct Modulo;

impl Assignor for Modulo {
    fn name(&self) -> &str {
        "modulo"
    }
    fn assign(&self, input: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
        let mut out = Assignment::new(input);
        let members = input.member_count() as u32;
        for t in 0..input.topics().len() as TopicIndex {
            for (p, owner) in out.topic_owners_mut(t).iter_mut().enumerate() {
                *owner = p as u32 % members;
            }
        }
        Ok(out)
    }
}

/// Four members' fenced commits form one batch; while its file write is in flight a fifth
/// member joins. The rebalance must wait for the whole batch: once it has the group, every
/// one of the four commits is visible.
#[tokio::test]
async fn the_fences_of_a_batch_are_held_until_the_batch_is_visible() {
    const MEMBERS: u32 = 4;
    let fs = SimFs::new();
    let store = Arc::new(JsonFileStore::open_with_fs(PATH, fs.clone()).unwrap());
    let topics: BTreeMap<String, u32> = [("t".to_string(), MEMBERS)].into();
    let coordinator = Arc::new(
        Coordinator::builder(store.clone(), Arc::new(topics), Arc::new(Modulo))
            .build()
            .unwrap(),
    );
    let members: Vec<String> = (0..MEMBERS).map(|m| format!("m{m}")).collect();
    for m in &members {
        coordinator.join("g", m, &["t"]).await.unwrap();
    }

    let hold = store.hold_writes();
    let mut commits = Vec::new();
    let mut expected = OffsetMap::new();
    for m in &members {
        let assigned = coordinator.assignment("g", m).await.unwrap();
        assert_eq!(assigned.partitions.len(), 1);
        let o: OffsetMap = [(assigned.partitions[0].clone(), 100)].into();
        expected.extend(o.clone());
        let (c, m) = (coordinator.clone(), m.clone());
        commits.push(tokio::spawn(async move {
            c.commit("g", &m, assigned.generation, &o).await
        }));
    }
    while store.queued_writes() < MEMBERS as usize {
        tokio::task::yield_now().await;
    }
    let parking = Parking::at(&fs, FsOp::Fsync);
    drop(hold);
    parking.wait(); // the batch of four is in its file write

    let rebalance = {
        let (c, store) = (coordinator.clone(), store.clone());
        tokio::spawn(async move {
            let joined = c.join("g", "m9", &["t"]).await;
            let seen = store.list("g").await;
            (joined, seen)
        })
    };
    for _ in 0..3 {
        tokio::task::yield_now().await;
    }
    assert!(
        !rebalance.is_finished(),
        "the rebalance got the group while the batch was in flight"
    );
    parking.release();
    fs.set_hook(None);
    for commit in commits {
        commit.await.unwrap().unwrap();
    }
    let (joined, seen) = rebalance.await.unwrap();
    assert_eq!(joined.unwrap().generation.get(), u64::from(MEMBERS) + 1);
    assert_eq!(
        seen.unwrap(),
        expected,
        "the rebalance did not see every write of the batch"
    );
}
