//! Crash points of the JSON store: random commit histories, power cut after every single file
//! operation, restarted under every crash mode. A restart must find exactly the state before
//! or after the interrupted commit — never an error, never a mix — and every commit that
//! returned `Ok` must be there.

#[macro_use]
mod common;

use std::collections::BTreeMap;

use common::{
    for_each_seed, merged, random_group, random_groups, random_offsets, reference_encoding,
    runtime, Groups, Rng,
};
use offset_store::testing::{CrashMode, SimFs};
use offset_store::JsonFileStore;
use tokio::runtime::Runtime;

const PATH: &str = "/data/offsets.json";
const HISTORIES: u64 = 1_000;

/// One commit of a history: one group's offsets.
fn random_commit(rng: &mut Rng) -> Groups {
    BTreeMap::from([(random_group(rng), random_offsets(rng, 4))])
}

struct Outcome {
    /// Operations the history performed after opening the store.
    ops: u64,
    /// What every `Ok` commit adds up to.
    acknowledged: Groups,
    /// The commit that failed because the power was cut, if one did.
    interrupted: Option<Groups>,
}

/// Opens the store on `fs`, optionally arms a power cut after `cut` operations, and runs
/// `commits` until one fails.
fn run(
    rt: &Runtime,
    fs: &SimFs,
    initial: &Groups,
    commits: &[Groups],
    cut: Option<u64>,
) -> Result<Outcome, String> {
    let store = JsonFileStore::open_with_fs(PATH, fs.clone())
        .map_err(|e| format!("opening the initial file: {e}"))?;
    ensure!(
        store.snapshot() == *initial,
        "the initial file did not load"
    );
    let opened_at = fs.ops();
    if let Some(cut) = cut {
        fs.cut_power_after(cut);
    }
    let mut acknowledged = initial.clone();
    for commit in commits {
        match common::commit(rt, &store, commit) {
            Ok(()) => acknowledged = merged(&acknowledged, commit),
            Err(e) => {
                ensure!(cut.is_some(), "a commit failed without a power cut: {e}");
                ensure!(
                    store.snapshot() == acknowledged,
                    "a failed commit changed what the store reads"
                );
                return Ok(Outcome {
                    ops: fs.ops() - opened_at,
                    acknowledged,
                    interrupted: Some(commit.clone()),
                });
            }
        }
        ensure!(
            store.snapshot() == acknowledged,
            "memory differs from the commits"
        );
    }
    Ok(Outcome {
        ops: fs.ops() - opened_at,
        acknowledged,
        interrupted: None,
    })
}

#[test]
fn a_power_cut_after_any_operation_recovers_to_before_or_after_the_commit() {
    let rt = runtime();
    let mut crash_points = 0u64;
    let mut restarts = 0u64;
    let histories = for_each_seed(0xC4A5_0000, HISTORIES, |seed| {
        let mut rng = Rng::new(seed);
        let initial = random_groups(&mut rng, 3, 4);
        let commits: Vec<Groups> = (0..1 + rng.index(6))
            .map(|_| random_commit(&mut rng))
            .collect();
        let fresh_fs = || {
            let fs = SimFs::new();
            if !initial.is_empty() || rng_flag(seed) {
                fs.put_file(PATH, reference_encoding(&initial));
            }
            fs
        };

        let full = run(&rt, &fresh_fs(), &initial, &commits, None)?;
        for cut in 0..=full.ops {
            let fs = fresh_fs();
            let outcome = run(&rt, &fs, &initial, &commits, Some(cut))?;
            crash_points += 1;
            let before = &outcome.acknowledged;
            let after = outcome.interrupted.as_ref().map(|c| merged(before, c));
            for mode in CrashMode::ALL {
                restarts += 1;
                let reopened = JsonFileStore::open_with_fs(PATH, fs.restart(mode))
                    .map_err(|e| format!("cut after {cut} ops, {mode:?}: reopening failed: {e}"))?;
                let found = reopened.snapshot();
                ensure!(
                    found == *before || Some(&found) == after.as_ref(),
                    "cut after {cut} ops, {mode:?}: found {found:?}\nbefore {before:?}\nafter {after:?}"
                );
            }
        }
        Ok(())
    });
    println!("{histories} histories, {crash_points} crash points, {restarts} restarts checked");
    assert!(histories >= HISTORIES || std::env::var("OFFSET_STORE_SEED").is_ok());
    assert!(
        crash_points >= 5 * histories,
        "histories must reach their file operations"
    );
}

/// Whether a history with no initial offsets starts from an empty file rather than no file.
fn rng_flag(seed: u64) -> bool {
    seed.is_multiple_of(2)
}
