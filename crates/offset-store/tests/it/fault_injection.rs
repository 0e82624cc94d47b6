//! Error injection into the JSON store's file operations: each one failing with `EIO` or
//! `ENOSPC` on its Nth call, N = 1..20, under batches of several writes sharing one file
//! write. Every write of the failing batch returns an I/O error naming the file and the
//! fault, the file and the in-memory view are exactly as before, and writes succeed again
//! once the fault has passed.

use crate::common;

use std::collections::BTreeMap;
use std::error::Error as _;
use std::path::Path;

use common::{
    apply, check_error, commit, merged, random_batch, random_groups, reference_encoding, runtime,
    temp_files, write_batch, BatchResults, Groups, Rng,
};
use coordinator_core::{StorageError, StorageErrorKind};
use offset_store::testing::{CrashMode, Fault, FsOp, SimFs};
use offset_store::JsonFileStore;

const PATH: &str = "/data/offsets.json";
/// The operations of one commit, each called exactly once when nothing fails.
const COMMIT_OPS: [FsOp; 5] = [
    FsOp::CreateTemp,
    FsOp::WriteAll,
    FsOp::Fsync,
    FsOp::Rename,
    FsOp::FsyncDir,
];
const FAULTS: [Fault; 2] = [Fault::Eio, Fault::Enospc];

/// A commit of one to three groups (never empty: an empty commit touches no file).
fn random_commit(rng: &mut Rng) -> Groups {
    loop {
        let commit = random_groups(rng, 1, 4);
        if !commit.is_empty() {
            return commit;
        }
    }
}

/// A store over a file that already holds some offsets.
#[allow(clippy::expect_used)] // test setup: a failure here is a broken test
fn seeded_store(rng: &mut Rng) -> (SimFs, JsonFileStore<SimFs>) {
    let fs = SimFs::new();
    fs.put_file(PATH, reference_encoding(&random_groups(rng, 3, 4)));
    let store = JsonFileStore::open_with_fs(PATH, fs.clone()).expect("a valid initial file");
    (fs, store)
}

/// The failed commit changed nothing: same bytes, same memory, same state after a restart,
/// no temp file left behind.
fn check_unchanged(
    fs: &SimFs,
    store: &JsonFileStore<SimFs>,
    bytes: &Option<Vec<u8>>,
    snapshot: &Groups,
) -> Result<(), String> {
    ensure!(fs.file(PATH) == *bytes, "the file changed");
    ensure!(store.snapshot() == *snapshot, "memory changed");
    ensure!(
        temp_files(fs, PATH).is_empty(),
        "a temp file was left behind"
    );
    for mode in CrashMode::ALL {
        let reopened = JsonFileStore::open_with_fs(PATH, fs.restart(mode))
            .map_err(|e| format!("{mode:?}: reopening failed: {e}"))?;
        ensure!(
            reopened.snapshot() == *snapshot,
            "{mode:?}: durable state changed"
        );
    }
    Ok(())
}

fn check_io_error(err: &StorageError, fault: Fault) -> Result<(), String> {
    check_error(err, StorageErrorKind::Io, Path::new(PATH))?;
    let io = err
        .source()
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .ok_or_else(|| format!("no io::Error source in {err}"))?;
    ensure!(
        io.raw_os_error() == fault.to_io_error().raw_os_error(),
        "source {io} is not {fault:?}"
    );
    Ok(())
}

/// Every queued write of the batch failed with `fault`, naming the file.
fn check_batch_failed(outcome: &BatchResults, fault: Fault) -> Result<(), String> {
    ensure!(outcome.queued > 0, "nothing was queued");
    ensure!(outcome.all_or_nothing()?.is_err(), "the batch did not fail");
    let mut failed = 0;
    for err in outcome.results.iter().filter_map(|r| r.as_ref().err()) {
        check_io_error(err, fault)?;
        failed += 1;
    }
    ensure!(
        failed == outcome.queued,
        "{failed} of {} failed",
        outcome.queued
    );
    Ok(())
}

#[test]
fn each_operation_failing_on_its_nth_call_changes_nothing() {
    let rt = runtime();
    let mut injected = 0;
    for op in COMMIT_OPS {
        for fault in FAULTS {
            for n in 1..=20u64 {
                let seed = n * 100 + op as u64 * 10 + fault as u64;
                let mut rng = Rng::new(seed);
                let (fs, store) = seeded_store(&mut rng);
                fs.fail_nth(op, n, fault);
                let outcome = (|| {
                    for attempt in 1..=n {
                        let (bytes, snapshot) = (fs.file(PATH), store.snapshot());
                        // Each attempt is one batch, so the Nth file write is the Nth batch.
                        let mut batch = random_batch(&mut rng, &snapshot, 4);
                        if !batch.iter().any(|w| matches!(w, common::Write::Commit(..))) {
                            batch.push(common::random_commit_write(&mut rng));
                        }
                        let results = write_batch(&rt, &store, &batch);
                        match results.all_or_nothing()? {
                            Ok(()) => {
                                ensure!(attempt < n, "batch {attempt} did not meet the fault");
                                ensure!(store.snapshot() == apply(&snapshot, &batch), "lost write");
                            }
                            Err(err) => {
                                ensure!(attempt == n, "batch {attempt} failed early: {err}");
                                check_batch_failed(&results, fault)?;
                                check_unchanged(&fs, &store, &bytes, &snapshot)?;
                            }
                        }
                    }
                    // The fault was one-shot: the next batch succeeds and is durable.
                    let batch = random_batch(&mut rng, &store.snapshot(), 4);
                    let expected = apply(&store.snapshot(), &batch);
                    write_batch(&rt, &store, &batch)
                        .all_or_nothing()?
                        .map_err(|e| format!("after the fault: {e}"))?;
                    let reopened =
                        JsonFileStore::open_with_fs(PATH, fs.restart(CrashMode::DropBoth))
                            .map_err(|e| e.to_string())?;
                    ensure!(
                        reopened.snapshot() == expected,
                        "the recovery batch is not durable"
                    );
                    ensure!(
                        fs.file(PATH) == Some(reference_encoding(&expected)),
                        "bytes differ"
                    );
                    Ok(())
                })();
                if let Err(e) = outcome {
                    panic!("{op:?} failing with {fault:?} on call {n}: {e}");
                }
                injected += 1;
            }
        }
    }
    println!("{injected} injected faults");
    assert_eq!(injected, 5 * 2 * 20);
}

#[test]
fn an_operation_failing_every_time_fails_every_commit_until_it_clears() {
    let rt = runtime();
    // A directory fsync that keeps failing also defeats the restore: json_store.rs covers it.
    for op in [FsOp::CreateTemp, FsOp::WriteAll, FsOp::Fsync, FsOp::Rename] {
        for fault in FAULTS {
            let mut rng = Rng::new(op as u64 * 10 + fault as u64);
            let (fs, store) = seeded_store(&mut rng);
            fs.set_failing(op, fault);
            let (bytes, snapshot) = (fs.file(PATH), store.snapshot());
            for _ in 0..3 {
                let err = commit(&rt, &store, &random_commit(&mut rng)).unwrap_err();
                check_io_error(&err, fault).unwrap();
                check_unchanged(&fs, &store, &bytes, &snapshot).unwrap();
                let mut batch = random_batch(&mut rng, &snapshot, 4);
                batch.push(common::random_commit_write(&mut rng));
                check_batch_failed(&write_batch(&rt, &store, &batch), fault).unwrap();
                check_unchanged(&fs, &store, &bytes, &snapshot).unwrap();
            }
            fs.clear_faults();
            let c = random_commit(&mut rng);
            commit(&rt, &store, &c).unwrap();
            assert_eq!(store.snapshot(), merged(&snapshot, &c));
        }
    }
}

#[test]
fn a_failed_cleanup_leaves_a_temp_file_that_the_next_commit_overwrites() {
    let rt = runtime();
    for fault in FAULTS {
        let mut rng = Rng::new(7 + fault as u64);
        let (fs, store) = seeded_store(&mut rng);
        let (bytes, snapshot) = (fs.file(PATH), store.snapshot());
        fs.fail_nth(FsOp::WriteAll, 1, fault);
        fs.fail_nth(FsOp::RemoveFile, 1, Fault::Eio);
        let err = commit(&rt, &store, &random_commit(&mut rng)).unwrap_err();
        check_io_error(&err, fault).unwrap();
        assert_eq!(fs.file(PATH), bytes);
        assert_eq!(store.snapshot(), snapshot);
        let torn = temp_files(&fs, PATH);
        assert_eq!(torn.len(), 1, "the torn temp file is still there");

        let c = random_commit(&mut rng);
        commit(&rt, &store, &c).unwrap();
        assert!(
            temp_files(&fs, PATH).is_empty(),
            "the next commit overwrote and renamed it"
        );
        assert_eq!(
            fs.file(PATH),
            Some(reference_encoding(&merged(&snapshot, &c)))
        );
    }
}

#[test]
fn a_failing_read_fails_the_open_naming_the_file() {
    for fault in FAULTS {
        let fs = SimFs::new();
        fs.put_file(PATH, reference_encoding(&BTreeMap::new()));
        fs.fail_nth(FsOp::Read, 1, fault);
        let err = JsonFileStore::open_with_fs(PATH, fs.clone()).unwrap_err();
        check_io_error(&err, fault).unwrap();
        assert!(
            JsonFileStore::open_with_fs(PATH, fs).is_ok(),
            "the fault was one-shot"
        );
    }
}
