//! Crash points of the JSON store: random histories of batches — several commits and deletes
//! queued together into one file write — with the power cut after every single file
//! operation, restarted under every crash mode. A restart must find exactly the state before
//! or after the interrupted batch, with all of its writes — never an error, never a mix, never
//! a part of a batch — and every write that returned `Ok` must be there.

use crate::common;

use common::{
    apply, for_each_seed, random_batch, random_groups, reference_encoding, runtime, write_batch,
    Groups, Rng, Write,
};
use offset_store::testing::{CrashMode, SimFs};
use offset_store::JsonFileStore;
use tokio::runtime::Runtime;

const PATH: &str = "/data/offsets.json";
const HISTORIES: u64 = 1_000;

struct Outcome {
    /// Operations the history performed after opening the store.
    ops: u64,
    /// What every acknowledged batch adds up to.
    acknowledged: Groups,
    /// The batch that failed because the power was cut, if one did.
    interrupted: Option<Vec<Write>>,
    /// How many batches wrote more than one write.
    multi: u64,
}

/// Opens the store on `fs`, optionally arms a power cut after `cut` operations, and runs
/// `batches` until one fails.
fn run(
    rt: &Runtime,
    fs: &SimFs,
    initial: &Groups,
    batches: &[Vec<Write>],
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
    let mut multi = 0;
    for batch in batches {
        let outcome = write_batch(rt, &store, batch);
        multi += u64::from(outcome.queued > 1);
        match outcome.all_or_nothing()? {
            Ok(()) => acknowledged = apply(&acknowledged, batch),
            Err(e) => {
                ensure!(cut.is_some(), "a batch failed without a power cut: {e}");
                ensure!(
                    store.snapshot() == acknowledged,
                    "a failed batch changed what the store reads"
                );
                return Ok(Outcome {
                    ops: fs.ops() - opened_at,
                    acknowledged,
                    interrupted: Some(batch.clone()),
                    multi,
                });
            }
        }
        ensure!(
            store.snapshot() == acknowledged,
            "memory differs from the acknowledged writes"
        );
    }
    Ok(Outcome {
        ops: fs.ops() - opened_at,
        acknowledged,
        interrupted: None,
        multi,
    })
}

#[test]
fn a_power_cut_after_any_operation_recovers_to_before_or_after_the_batch() {
    let rt = runtime();
    let mut crash_points = 0u64;
    let mut restarts = 0u64;
    let mut multi_batches = 0u64;
    let histories = for_each_seed(0xC4A5_0000, HISTORIES, |seed| {
        let mut rng = Rng::new(seed);
        let initial = random_groups(&mut rng, 3, 4);
        let mut state = initial.clone();
        let batches: Vec<Vec<Write>> = (0..1 + rng.index(6))
            .map(|_| {
                let batch = random_batch(&mut rng, &state, 4);
                state = apply(&state, &batch);
                batch
            })
            .collect();
        let fresh_fs = || {
            let fs = SimFs::new();
            if !initial.is_empty() || rng_flag(seed) {
                fs.put_file(PATH, reference_encoding(&initial));
            }
            fs
        };

        let full = run(&rt, &fresh_fs(), &initial, &batches, None)?;
        multi_batches += full.multi;
        for cut in 0..=full.ops {
            let fs = fresh_fs();
            let outcome = run(&rt, &fs, &initial, &batches, Some(cut))?;
            crash_points += 1;
            let before = &outcome.acknowledged;
            let after = outcome.interrupted.as_ref().map(|b| apply(before, b));
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
    println!(
        "{histories} histories ({multi_batches} batches of several writes), {crash_points} \
         crash points, {restarts} restarts checked"
    );
    assert!(histories >= HISTORIES || std::env::var("OFFSET_STORE_SEED").is_ok());
    assert!(
        crash_points >= 5 * histories,
        "histories must reach their file operations"
    );
    assert!(
        multi_batches >= histories,
        "most histories must hold batches of several writes"
    );
}

/// Whether a history with no initial offsets starts from an empty file rather than no file.
fn rng_flag(seed: u64) -> bool {
    seed.is_multiple_of(2)
}
