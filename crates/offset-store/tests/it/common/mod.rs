//! Shared kit of the integration tests: a seeded generator, replayable seed loops, random
//! offset maps and a reference encoding built with serde_json.
//!
//! Counts scale with `OFFSET_STORE_SCALE` (a multiplier, default 1). A failure names its
//! seed; `OFFSET_STORE_SEED=<seed>` replays exactly that case.

#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use coordinator_core::{
    CommitFence, OffsetMap, OffsetStore, StorageError, StorageErrorKind, TopicPartition,
};
use offset_store::fs::Fs;
use offset_store::JsonFileStore;

/// Every group's offsets, as the stores' `snapshot()` returns them.
pub type Groups = BTreeMap<String, OffsetMap>;

/// SplitMix64: tiny, fast, and good enough to drive test generators.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// True with probability `percent`/100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }
}

/// The multiplier of every count, from `OFFSET_STORE_SCALE`.
pub fn scale() -> u64 {
    std::env::var("OFFSET_STORE_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// Runs `case` for `count × scale()` seeds derived from `base`, or only for the seed in
/// `OFFSET_STORE_SEED`. A failing case (an `Err` or a panic) fails the test with its seed.
/// Returns how many cases ran.
pub fn for_each_seed(
    base: u64,
    count: u64,
    mut case: impl FnMut(u64) -> Result<(), String>,
) -> u64 {
    let seeds: Vec<u64> = match std::env::var("OFFSET_STORE_SEED") {
        Ok(s) => vec![s.parse().expect("OFFSET_STORE_SEED is a number")],
        Err(_) => (0..count * scale()).map(|i| base.wrapping_add(i)).collect(),
    };
    for &seed in &seeds {
        let outcome = catch_unwind(AssertUnwindSafe(|| case(seed)));
        let failure = match outcome {
            Ok(Ok(())) => continue,
            Ok(Err(message)) => message,
            Err(panic) => panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panicked".into()),
        };
        panic!("case with seed {seed} failed: {failure}\nreplay it with OFFSET_STORE_SEED={seed}");
    }
    seeds.len() as u64
}

/// `Err(message)` unless `cond`.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

pub fn tp(topic: &str, partition: u32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

/// Characters that exercise every escaping rule of JSON strings and UTF-8 widths.
const PALETTE: &[char] = &[
    'a', 'b', 'z', 'A', '0', '9', '-', '_', '.', ' ', '"', '\\', '/', '\n', '\r', '\t', '\u{0}',
    '\u{8}', '\u{c}', '\u{1f}', '\u{7f}', 'é', 'ß', '☃', '中', '𝄞', '\u{2028}', '\u{feff}',
];

/// A random string of up to `max_len` characters; mostly plain, sometimes hostile.
pub fn random_string(rng: &mut Rng, max_len: usize) -> String {
    let len = rng.index(max_len + 1);
    if rng.percent(60) {
        (0..len)
            .map(|_| char::from(b'a' + rng.below(6) as u8))
            .collect()
    } else {
        (0..len).map(|_| *rng.pick(PALETTE)).collect()
    }
}

const GROUPS: &[&str] = &[
    "workers",
    "billing",
    "a",
    "b",
    "",
    "grp \"q\" \\ ☃",
    "g\n\u{1}",
];
const TOPICS: &[&str] = &[
    "orders",
    "payments",
    "audit",
    "t.with-dots_and-dashes",
    "é\"\\",
];

/// A group id: mostly from a small pool (so commits collide), sometimes random.
pub fn random_group(rng: &mut Rng) -> String {
    if rng.percent(80) {
        rng.pick(GROUPS).to_string()
    } else {
        random_string(rng, 8)
    }
}

/// An offset, biased towards the edges.
pub fn random_offset(rng: &mut Rng) -> i64 {
    match rng.below(8) {
        0 => 0,
        1 => i64::MAX,
        2 => i64::MAX - rng.below(1000) as i64,
        3 => (rng.next_u64() >> 1) as i64,
        _ => rng.below(100_000) as i64,
    }
}

/// A partition number, biased towards the edges.
pub fn random_partition(rng: &mut Rng) -> u32 {
    match rng.below(8) {
        0 => 0,
        1 => u32::MAX,
        2 => rng.next_u64() as u32,
        _ => rng.below(16) as u32,
    }
}

/// Up to `max_entries` random, valid offsets.
pub fn random_offsets(rng: &mut Rng, max_entries: usize) -> OffsetMap {
    let n = rng.index(max_entries + 1);
    (0..n)
        .map(|_| {
            let topic = if rng.percent(85) {
                rng.pick(TOPICS).to_string()
            } else {
                random_string(rng, 6)
            };
            (
                TopicPartition::new(topic, random_partition(rng)),
                random_offset(rng),
            )
        })
        .collect()
}

/// Up to `max_groups` groups of random offsets (empty groups left out, as stores do).
pub fn random_groups(rng: &mut Rng, max_groups: usize, max_entries: usize) -> Groups {
    let n = rng.index(max_groups + 1);
    (0..n)
        .map(|_| (random_group(rng), random_offsets(rng, max_entries)))
        .filter(|(_, offsets)| !offsets.is_empty())
        .collect()
}

/// `groups` with `commit` merged in: what a store must hold after the commit succeeds.
pub fn merged(groups: &Groups, commit: &Groups) -> Groups {
    let mut out = groups.clone();
    for (group, offsets) in commit {
        if !offsets.is_empty() {
            let stored = out.entry(group.clone()).or_default();
            stored.extend(offsets.iter().map(|(tp, &o)| (tp.clone(), o)));
        }
    }
    out
}

/// The file docs/rules.md#json-format describes for `groups`, built with serde_json's own
/// writer: compact, keys sorted, groups sorted by id, entries by (topic, partition).
pub fn reference_encoding(groups: &Groups) -> Vec<u8> {
    let mut json_groups = serde_json::Map::new();
    for (group, offsets) in groups {
        let entries: Vec<serde_json::Value> = offsets
            .iter()
            .map(|(tp, &offset)| {
                serde_json::json!({
                    "offset": offset,
                    "partition": tp.partition(),
                    "topic": tp.topic(),
                })
            })
            .collect();
        json_groups.insert(group.clone(), entries.into());
    }
    let file = serde_json::json!({ "groups": json_groups, "version": 1 });
    serde_json::to_vec(&file).expect("a Value always serialises")
}

/// A current-thread runtime: tests stay deterministic and spawn_blocking still runs the
/// store's file work on the blocking pool.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a tokio runtime")
}

/// Commits each group of `commit` in turn (each one atomically).
pub fn commit(
    rt: &tokio::runtime::Runtime,
    store: &dyn OffsetStore,
    commit: &Groups,
) -> Result<(), StorageError> {
    rt.block_on(async {
        for (group, offsets) in commit {
            store.commit(group, offsets, CommitFence::none()).await?;
        }
        Ok(())
    })
}

/// One write of a batch.
#[derive(Clone, Debug)]
pub enum Write {
    Commit(String, OffsetMap),
    /// Some partitions of the group, or all of them.
    Delete(String, Option<Vec<TopicPartition>>),
}

/// `groups` after `writes`, applied in order: what a store must hold once they succeed.
pub fn apply(groups: &Groups, writes: &[Write]) -> Groups {
    let mut out = groups.clone();
    for write in writes {
        match write {
            Write::Commit(group, offsets) => {
                if !offsets.is_empty() {
                    let stored = out.entry(group.clone()).or_default();
                    stored.extend(offsets.iter().map(|(tp, &o)| (tp.clone(), o)));
                }
            }
            Write::Delete(group, None) => {
                out.remove(group);
            }
            Write::Delete(group, Some(partitions)) => {
                if let Some(stored) = out.get_mut(group) {
                    for tp in partitions {
                        stored.remove(tp);
                    }
                    if stored.is_empty() {
                        out.remove(group);
                    }
                }
            }
        }
    }
    out
}

/// A non-empty commit of one group's random offsets.
pub fn random_commit_write(rng: &mut Rng) -> Write {
    loop {
        let offsets = random_offsets(rng, 4);
        if !offsets.is_empty() {
            return Write::Commit(random_group(rng), offsets);
        }
    }
}

/// A batch of 1 to `max` writes, about one in five a delete (of partitions `state` holds
/// and of ones it does not, or of a whole group).
pub fn random_batch(rng: &mut Rng, state: &Groups, max: usize) -> Vec<Write> {
    let mut state = state.clone();
    let mut batch = Vec::new();
    for _ in 0..1 + rng.index(max) {
        let write = if rng.percent(20) && !state.is_empty() {
            let groups: Vec<&String> = state.keys().collect();
            let group = (*rng.pick(&groups)).clone();
            if rng.percent(30) {
                Write::Delete(group, None)
            } else {
                let stored: Vec<TopicPartition> = state[&group].keys().cloned().collect();
                let mut partitions: Vec<TopicPartition> = (0..1 + rng.index(2))
                    .map(|_| rng.pick(&stored).clone())
                    .collect();
                if rng.percent(30) {
                    partitions.push(TopicPartition::new("never-committed", 1));
                }
                Write::Delete(group, Some(partitions))
            }
        } else {
            random_commit_write(rng)
        };
        state = apply(&state, std::slice::from_ref(&write));
        batch.push(write);
    }
    batch
}

type WriteFuture<'a> = Pin<Box<dyn Future<Output = Result<(), StorageError>> + Send + 'a>>;

/// What the writes of one batch returned.
pub struct BatchResults {
    /// Each write's result, in order.
    pub results: Vec<Result<(), StorageError>>,
    /// How many of them were queued for the writer (the others had nothing to write).
    pub queued: usize,
}

impl BatchResults {
    /// The results of the writes that were queued: `Ok` if all succeeded, the first error if
    /// all failed, and `Err(message)` as the test's failure if some did and some did not.
    pub fn all_or_nothing(&self) -> Result<Result<(), &StorageError>, String> {
        let failed: Vec<&StorageError> = self
            .results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .collect();
        match failed.first() {
            None => Ok(Ok(())),
            Some(first) if failed.len() == self.queued => Ok(Err(first)),
            Some(first) => Err(format!(
                "{} of the batch's {} queued writes failed ({first}), the others succeeded",
                failed.len(),
                self.queued
            )),
        }
    }
}

/// Runs `writes` as one batch: holds the store's writer, polls each write once (it validates
/// and queues itself, or finishes at once if it has nothing to write), releases the writer,
/// and waits for them all.
pub fn write_batch<F: Fs>(
    rt: &tokio::runtime::Runtime,
    store: &JsonFileStore<F>,
    writes: &[Write],
) -> BatchResults {
    let hold = store.hold_writes();
    let mut cx = Context::from_waker(Waker::noop());
    let mut pending: Vec<Result<WriteFuture<'_>, Result<(), StorageError>>> = Vec::new();
    for write in writes {
        let mut future: WriteFuture<'_> = match write {
            Write::Commit(group, offsets) => store.commit(group, offsets, CommitFence::none()),
            Write::Delete(group, partitions) => {
                store.delete(group, partitions.as_deref(), CommitFence::none())
            }
        };
        pending.push(match future.as_mut().poll(&mut cx) {
            Poll::Ready(result) => Err(result),
            Poll::Pending => Ok(future),
        });
    }
    let queued = pending.iter().filter(|p| p.is_ok()).count();
    assert_eq!(
        store.queued_writes(),
        queued,
        "every pending write is queued"
    );
    drop(hold);
    let results = rt.block_on(async {
        let mut results = Vec::new();
        for p in pending {
            results.push(match p {
                Ok(future) => future.await,
                Err(done) => done,
            });
        }
        results
    });
    BatchResults { results, queued }
}

/// The temporary files beside the offset file `path` on `fs` (`<path>.tmp…`).
pub fn temp_files(fs: &offset_store::testing::SimFs, path: &str) -> Vec<std::path::PathBuf> {
    let prefix = format!("{path}.tmp");
    fs.paths()
        .into_iter()
        .filter(|p| p.to_string_lossy().starts_with(&prefix))
        .collect()
}

/// `Ok` if `err` is a `kind` error whose message names `path`.
pub fn check_error(err: &StorageError, kind: StorageErrorKind, path: &Path) -> Result<(), String> {
    ensure!(err.kind() == kind, "expected a {kind:?} error, got {err}");
    ensure!(
        err.message().contains(&path.display().to_string()),
        "the error does not name {}: {err}",
        path.display()
    );
    ensure!(
        err.code() == "STORAGE_ERROR",
        "code {} for {err}",
        err.code()
    );
    Ok(())
}
