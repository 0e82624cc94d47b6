#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Crash points of the segment log: seeded histories of appends (rolling 1 KiB segments),
//! `DeleteRecords`, compaction passes, retention and a topic creation, on a [`SimFs`], with
//! the power cut after every single file operation and the log reopened under every crash
//! mode. A reopen must succeed (a crash is never "damage"), every acknowledged append must
//! be there with its bytes (unless a later record of the same key made compaction drop it),
//! nothing appears that was never written, the log start is one the history made durable or
//! was making, and the reopened log takes appends.
//!
//! `SEGMENT_LOG_SEED=<n>` replays one history.

use std::collections::BTreeMap;
use std::path::PathBuf;

use coordinator_core::ManualClock;
use tokio::runtime::Runtime;

use super::*;
use crate::fs::sim::{CrashMode, Fault, FsOp, SimFs};
use crate::testing::compaction::{parse, try_put_as, TextRecords};

const DIR: &str = "/data/log";
const HISTORIES: u64 = 40;

fn tp() -> TopicPartition {
    TopicPartition::new("c", 0)
}

#[derive(Clone, Debug)]
enum Op {
    CreateTopic(&'static str),
    /// A batch of `(key, value)` records.
    Append(Vec<(String, String)>),
    /// `DeleteRecords` up to this many offsets below the end.
    DeleteRecords(i64),
    Compact,
    /// Retention keeping about this many bytes.
    Retain(i64),
    /// `SegmentLog::sync`: under a flush interval, what was written becomes durable.
    Sync,
    /// The active segment closed (if it holds a batch): small segments, which a pass
    /// merges.
    Roll,
}

fn history(seed: u64) -> Vec<Op> {
    let mut rng = Rng::seeded(seed);
    let mut ops = vec![Op::CreateTopic("c")];
    let mut value = 0;
    for _ in 0..12 + rng.below(10) {
        ops.push(match rng.below(20) {
            0 => Op::DeleteRecords(1 + rng.below(4) as i64),
            1..=2 => Op::Compact,
            3 => Op::Retain(600 + 200 * rng.below(8) as i64),
            4 => Op::CreateTopic("d"),
            5..=6 => Op::Sync,
            7..=9 => Op::Roll,
            _ => Op::Append(
                (0..1 + rng.below(3))
                    .map(|_| {
                        value += 1;
                        let key = ["a", "b", "c", "d", "e"][rng.below(5)];
                        (key.to_string(), format!("v{value}"))
                    })
                    .collect(),
            ),
        });
    }
    ops
}

/// What a history made durable (acknowledged), and what it was doing when the power went.
#[derive(Debug, Default)]
struct Model {
    /// Every record appended, acknowledged or not, by offset: `(key, value)`.
    written: BTreeMap<i64, (String, String)>,
    /// The acknowledged end of `c`.
    end: i64,
    /// The end of `c` known durable: `end` with a sync per append; under a flush interval,
    /// `end` as of the last sync.
    durable: i64,
    /// The log start of `c` as of the last acknowledged change.
    start: i64,
    topics: Vec<&'static str>,
    interrupted: Option<Op>,
    /// Operations after opening.
    ops: u64,
}

async fn append(log: &SegmentLog<SimFs>, records: &[(String, String)]) -> Result<i64, LogError> {
    let pairs: Vec<(&str, &str)> = records
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    try_put_as(log, "", &pairs, 1).await
}

fn open(fs: SimFs) -> Result<SegmentLog<SimFs>, LogError> {
    open_with(fs, false)
}

/// With `flush`, a flush interval too long to come: appends are acknowledged unsynced, and
/// only `Op::Sync`, a segment's roll and the log's drop sync them.
fn open_with(fs: SimFs, flush: bool) -> Result<SegmentLog<SimFs>, LogError> {
    SegmentLog::builder(DIR)
        .clock(Arc::new(ManualClock::new()))
        .segment_bytes(1024)
        .flush_interval_ms(flush.then_some(1 << 40))
        .open_with_fs(fs)
}

/// Runs `ops` on a new log on `fs`, with the power cut after `cut` operations if set, until
/// one fails.
fn run(rt: &Runtime, fs: &SimFs, ops: &[Op], cut: Option<u64>) -> Result<Model, String> {
    run_with(rt, fs, ops, cut, false)
}

fn run_with(
    rt: &Runtime,
    fs: &SimFs,
    ops: &[Op],
    cut: Option<u64>,
    flush: bool,
) -> Result<Model, String> {
    let log = open_with(fs.clone(), flush).map_err(|e| format!("opening a new log: {e}"))?;
    let opened_at = fs.ops();
    if let Some(cut) = cut {
        fs.cut_power_after(cut);
    }
    let mut m = run_on(rt, &log, ops, flush)?;
    if m.interrupted.is_some() && cut.is_none() {
        return Err(format!("{:?} failed without a power cut", m.interrupted));
    }
    m.ops = fs.ops() - opened_at;
    Ok(m)
}

/// What a restart finds must be one of the states the history made or was making.
fn check(rt: &Runtime, fs: SimFs, m: &Model) -> Result<(), String> {
    let log = open(fs).map_err(|e| format!("reopening failed: {e}"))?;
    rt.block_on(async {
        let topics: Vec<String> = log
            .topics()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.0)
            .collect();
        for t in &m.topics {
            if !topics.iter().any(|x| x == t) {
                return Err(format!("acknowledged topic {t} is gone: {topics:?}"));
            }
        }
        let maybe = match &m.interrupted {
            Some(Op::CreateTopic(t)) => Some(*t),
            _ => None,
        };
        for t in &topics {
            if !m.topics.contains(&t.as_str()) && maybe != Some(t.as_str()) {
                return Err(format!("topic {t} was never created"));
            }
        }
        if !topics.iter().any(|t| t == "c") {
            return Ok(());
        }
        let (start, end) = log.bounds(&tp()).await.map_err(|e| e.to_string())?;
        let extra = match &m.interrupted {
            Some(Op::Append(r)) => r.len() as i64,
            _ => 0,
        };
        if end < m.durable || end > m.end + extra {
            return Err(format!(
                "end {end}, durable {} (acknowledged {}, +{extra} interrupted)",
                m.durable, m.end
            ));
        }
        let max_start = match &m.interrupted {
            Some(Op::DeleteRecords(_) | Op::Retain(_)) => end,
            _ => m.start.min(end),
        };
        // An unsynced tail lost takes the log start back to the end at most.
        if start < m.start.min(end) || start > max_start {
            return Err(format!(
                "log start {start}, acknowledged {} (at most {max_start})",
                m.start
            ));
        }
        // Everything readable, as written.
        let mut found: BTreeMap<i64, (String, String)> = BTreeMap::new();
        let mut next = start;
        while next < end {
            let read = log
                .read_batches(&tp(), next, 1 << 20)
                .await
                .map_err(|e| format!("reading at {next}: {e}"))?;
            let Some(last) = read.batches.last() else {
                return Err(format!("nothing read at {next} below the end {end}"));
            };
            next = last.last_offset() + 1;
            for b in &read.batches {
                for (o, k, v) in parse(b.encoded().unwrap()) {
                    if o >= start {
                        found.insert(o, (k, v));
                    }
                }
            }
        }
        for (o, r) in &found {
            if m.written.get(o) != Some(r) || *o >= end {
                return Err(format!("offset {o} holds {r:?}, never written there"));
            }
        }
        // Every durable record is there, unless a later one of its key is.
        for (o, (k, v)) in m.written.range(start..m.durable.max(start)) {
            let superseded = found.range(o + 1..).any(|(_, (k2, _))| k2 == k);
            if !found.contains_key(o) && !superseded {
                return Err(format!("acknowledged record {o} {k}={v} is lost"));
            }
        }
        // The reopened log goes on.
        let base = append(&log, &[("z".into(), "after".into())])
            .await
            .map_err(|e| format!("appending after the restart: {e}"))?;
        if base != end {
            return Err(format!(
                "the first append after the restart got {base}, not {end}"
            ));
        }
        Ok(())
    })
}

/// What a restart finds of an unfinished merge: each swap file with the number of the
/// segment files it replaces (besides its first) still there.
fn swaps(fs: &SimFs) -> Vec<(PathBuf, usize)> {
    let paths = fs.paths();
    let name = |p: &PathBuf| {
        p.file_name()
            .and_then(|n| n.to_str())
            .map(str::to_string)
            .unwrap_or_default()
    };
    paths
        .iter()
        .filter_map(|p| files::parse_swap_name(&name(p)).map(|r| (p, r)))
        .map(|(p, (first, end))| {
            let others = paths
                .iter()
                .filter(|q| q.parent() == p.parent())
                .filter_map(|q| files::parse_segment_name(&name(q)))
                .filter(|b| *b > first && *b < end)
                .count();
            (p.clone(), others)
        })
        .collect()
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn seeds() -> Vec<u64> {
    match std::env::var("SEGMENT_LOG_SEED") {
        Ok(s) => vec![s.parse().expect("SEGMENT_LOG_SEED is a number")],
        Err(_) => (0..HISTORIES).collect(),
    }
}

#[test]
fn a_power_cut_after_any_operation_recovers_what_was_acknowledged() {
    let rt = runtime();
    let (mut cuts, mut restarts, mut compacted) = (0u64, 0u64, 0u64);
    // Restarts that found a committed merge with the segments it replaces still there,
    // and with them removed (the swap not yet renamed).
    let (mut before_removal, mut after_removal) = (0u64, 0u64);
    for seed in seeds() {
        let ops = history(seed);
        let full = run(&rt, &SimFs::new(), &ops, None)
            .unwrap_or_else(|e| panic!("seed {seed}, no cut: {e}"));
        compacted += u64::from(ops.iter().any(|o| matches!(o, Op::Compact)));
        for cut in 0..=full.ops {
            let fs = SimFs::new();
            let m = run(&rt, &fs, &ops, Some(cut))
                .unwrap_or_else(|e| panic!("seed {seed}, cut after {cut}: {e}"));
            cuts += 1;
            for mode in CrashMode::ALL {
                restarts += 1;
                let after = fs.restart(mode);
                for (_, others) in swaps(&after) {
                    before_removal += u64::from(others > 0);
                    after_removal += u64::from(others == 0);
                }
                check(&rt, after, &m).unwrap_or_else(|e| {
                    panic!(
                        "seed {seed}, cut after {cut} of {} ops, {mode:?}, interrupted {:?}: {e}",
                        full.ops, m.interrupted
                    )
                });
            }
        }
    }
    println!(
        "{cuts} crash points, {restarts} restarts checked; {before_removal} found a merge's \
         swap with its segments, {after_removal} with them removed"
    );
    assert!(
        cuts >= 50 * seeds().len() as u64,
        "histories reach the disk: {cuts}"
    );
    if std::env::var("SEGMENT_LOG_SEED").is_err() {
        assert!(compacted > 0);
        assert!(
            before_removal > 0 && after_removal > 0,
            "the histories merge segments and cut power inside the swap: \
             {before_removal} and {after_removal}"
        );
    }
}

/// A pass merging small segments (two groups of several), with the power cut after each of
/// its file operations, in particular right after the rename of a group's output to its
/// `.swap` name (the commit point: the segments it replaces all still there) and after
/// their removal (the swap not yet renamed). Every restart reads each key's latest value
/// at its offset (and nothing never written); one that found a swap finishes it: the swap
/// and the segments it replaces are gone, the merged segment in their place.
const MERGED_KEYS: [&str; 7] = ["a", "b", "a", "c", "b", "a", "d"];

/// A log on `fs` whose partition `c-0` holds one batch of [`MERGED_KEYS`] per segment (each
/// rolled), and the model of what it holds.
fn small_segments(rt: &Runtime, fs: &SimFs) -> (SegmentLog<SimFs>, Model) {
    let log = open(fs.clone()).unwrap();
    let mut m = Model {
        topics: vec!["c"],
        ..Model::default()
    };
    rt.block_on(async {
        log.create_topic("c", 1).await.unwrap();
        for (i, key) in MERGED_KEYS.iter().enumerate() {
            let record = (key.to_string(), format!("v{i}"));
            append(&log, std::slice::from_ref(&record)).await.unwrap();
            assert!(log.roll_older_than(&tp(), -1).await.unwrap());
            m.written.insert(i as i64, record);
        }
    });
    m.end = MERGED_KEYS.len() as i64;
    m.durable = m.end;
    (log, m)
}

/// A pass over `c-0` that is always due.
fn merge_pass(rt: &Runtime, log: &SegmentLog<SimFs>) -> Result<Compaction, LogError> {
    let mut policy = CompactionPolicy::at(1_000);
    policy.min_cleanable_dirty_ratio = 0.0;
    rt.block_on(log.compact(&tp(), &policy, Arc::new(TextRecords)))
}

/// The segment files of `c-0` on `fs` and in `log`'s index: the same bases.
fn files_match_the_index(fs: &SimFs, log: &SegmentLog<SimFs>) -> Result<(), String> {
    let mut on_disk: Vec<i64> = fs
        .paths()
        .iter()
        .filter(|p| p.parent().is_some_and(|d| d.ends_with("c-0")))
        .filter_map(|p| p.file_name()?.to_str().and_then(files::parse_segment_name))
        .collect();
    on_disk.sort_unstable();
    let indexed: Vec<i64> = log
        .inner
        .partition(&tp())
        .map_err(|e| e.to_string())?
        .read()
        .segments
        .iter()
        .map(|s| s.base_offset)
        .collect();
    if on_disk != indexed {
        return Err(format!(
            "segment files {on_disk:?}, index {indexed:?}: {:?}",
            fs.paths()
        ));
    }
    Ok(())
}

#[test]
fn a_power_cut_inside_a_merge_keeps_every_record() {
    let rt = runtime();
    let setup = |fs: &SimFs| small_segments(&rt, fs);
    let pass = |log: &SegmentLog<SimFs>| merge_pass(&rt, log);
    let fs = SimFs::new();
    let (log, _) = setup(&fs);
    let from = fs.ops();
    let done = pass(&log).unwrap();
    let ops = fs.ops() - from;
    assert_eq!(done.segments, MERGED_KEYS.len(), "{done:?}");
    files_match_the_index(&fs, &log).unwrap();
    drop(log);
    assert_eq!(
        swaps(&fs).len(),
        0,
        "a finished pass leaves no swap: {:?}",
        fs.paths()
    );
    let (mut before_removal, mut after_removal) = (0, 0);
    for cut in 0..=ops {
        let fs = SimFs::new();
        let (log, mut m) = setup(&fs);
        fs.cut_power_after(cut);
        if pass(&log).is_err() {
            m.interrupted = Some(Op::Compact);
        }
        drop(log);
        for mode in CrashMode::ALL {
            let after = fs.restart(mode);
            let found = swaps(&after);
            for (_, others) in &found {
                before_removal += u64::from(*others > 0);
                after_removal += u64::from(*others == 0);
            }
            check(&rt, after.clone(), &m)
                .unwrap_or_else(|e| panic!("cut after {cut} of {ops}, {mode:?}: {e}"));
            let left = swaps(&after);
            assert!(
                left.is_empty(),
                "cut after {cut}, {mode:?}: the reopen finished {found:?}, left {left:?}"
            );
        }
    }
    assert!(
        before_removal > 0 && after_removal > 0,
        "cuts right after the commit ({before_removal}) and after the removals ({after_removal})"
    );
}

/// The same under a flush interval (Kafka's `log.flush.interval.ms`): appends are
/// acknowledged before they are synced, so a power cut may lose what was written since the
/// last sync, but never what a sync made durable, and never leaves a hole or bytes that were
/// not written.
#[test]
fn under_a_flush_interval_a_power_cut_loses_at_most_the_unsynced_tail() {
    let rt = runtime();
    let (mut cuts, mut lost) = (0u64, 0u64);
    for seed in seeds().into_iter().take(20) {
        let ops = history(seed);
        let full = run_with(&rt, &SimFs::new(), &ops, None, true)
            .unwrap_or_else(|e| panic!("seed {seed}, no cut: {e}"));
        for cut in 0..=full.ops {
            let fs = SimFs::new();
            let m = run_with(&rt, &fs, &ops, Some(cut), true)
                .unwrap_or_else(|e| panic!("seed {seed}, cut after {cut}: {e}"));
            cuts += 1;
            for mode in CrashMode::ALL {
                let after = fs.restart(mode);
                let end = rt.block_on(async {
                    let log = open_with(after.clone(), true).ok()?;
                    log.bounds(&tp()).await.ok().map(|b| b.1)
                });
                lost += u64::from(end.is_some_and(|e| e < m.end));
                check(&rt, after, &m).unwrap_or_else(|e| {
                    panic!(
                        "seed {seed}, cut after {cut} of {} ops, {mode:?}, interrupted {:?}: {e}",
                        full.ops, m.interrupted
                    )
                });
            }
        }
    }
    println!("{cuts} crash points; {lost} restarts lost an unsynced tail");
    assert!(lost > 0, "some restarts lose what was never synced");
}

/// `EIO` or `ENOSPC` on any single file operation of a history: the operation fails with a
/// storage error (a failed append visibly changes nothing), the same log takes appends once
/// the fault is gone, and a restart finds what was acknowledged.
#[test]
fn a_failed_operation_changes_nothing_and_the_log_goes_on() {
    let rt = runtime();
    let (mut tried, mut failed) = (0u64, 0u64);
    for seed in seeds().into_iter().take(12) {
        let ops = history(seed);
        let kinds = op_kinds(&rt, &ops);
        let faults = [Fault::Eio, Fault::Enospc].into_iter().cycle();
        for ((n, kind), fault) in kinds.iter().enumerate().zip(faults) {
            // Fail exactly the nth operation: the how-manieth of its kind it is.
            let nth = kinds[..=n].iter().filter(|k| *k == kind).count() as u64;
            let fs = SimFs::new();
            let log = open(fs.clone()).unwrap();
            fs.fail_nth(*kind, nth, fault);
            let mut m = run_on(&rt, &log, &ops, false)
                .unwrap_or_else(|e| panic!("seed {seed}, {fault:?} at op {n} ({kind:?}): {e}"));
            tried += 1;
            failed += u64::from(m.interrupted.is_some());
            rt.block_on(async {
                if log.topics().await.unwrap().iter().any(|t| t.0 == "c") {
                    append(&log, &[("z".into(), "on".into())])
                        .await
                        .unwrap_or_else(|e| {
                            panic!("seed {seed}, {fault:?} at op {n} ({kind:?}): the log does not go on: {e}")
                        });
                    m.written.insert(m.end, ("z".into(), "on".into()));
                    m.end += 1;
                    m.durable = m.end;
                }
            });
            if matches!(m.interrupted, Some(Op::Append(_))) {
                m.interrupted = None; // a failed append is not kept, durable or not
            }
            drop(log);
            check(&rt, fs.restart(CrashMode::DropBoth), &m).unwrap_or_else(|e| {
                panic!("seed {seed}, {fault:?} at op {n} ({kind:?}), then a restart: {e}")
            });
        }
    }
    println!("{tried} faults injected, {failed} reported");
    assert!(
        failed * 2 > tried,
        "most faults reach the caller: {failed} of {tried}"
    );
}

/// The kind of each file operation a history makes after opening, in order.
fn op_kinds(rt: &Runtime, ops: &[Op]) -> Vec<FsOp> {
    let fs = SimFs::new();
    let log = open(fs.clone()).unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    fs.set_hook(Some(Arc::new(move |op| record.lock().unwrap().push(op))));
    let m = run_on(rt, &log, ops, false).unwrap();
    assert!(m.interrupted.is_none());
    fs.set_hook(None);
    let kinds = seen.lock().unwrap().clone();
    kinds
}

/// Runs `ops` on `log` until one fails (then `interrupted` names it; a failure must be a
/// storage error, and a failed append must leave the end where it was).
fn run_on(rt: &Runtime, log: &SegmentLog<SimFs>, ops: &[Op], flush: bool) -> Result<Model, String> {
    let mut m = Model::default();
    for op in ops {
        let has_c = m.topics.contains(&"c");
        let done: Result<(), LogError> = rt.block_on(async {
            match op {
                Op::CreateTopic(name) if !m.topics.contains(name) => {
                    log.create_topic(name, 1).await?;
                    m.topics.push(name);
                }
                Op::Append(records) if has_c => {
                    for (o, r) in (m.end..).zip(records) {
                        m.written.insert(o, r.clone());
                    }
                    let base = append(log, records).await?;
                    assert_eq!(base, m.end, "offsets run on");
                    m.end += records.len() as i64;
                    if !flush {
                        m.durable = m.end;
                    }
                }
                Op::Sync => {
                    log.sync()?;
                    m.durable = m.end;
                }
                Op::DeleteRecords(back) if has_c => {
                    let to = (m.end - back).max(m.start);
                    m.start = log.delete_records(&tp(), to).await?;
                }
                Op::Compact if has_c => {
                    let mut policy = CompactionPolicy::at(1_000);
                    policy.min_cleanable_dirty_ratio = 0.0;
                    log.compact(&tp(), &policy, Arc::new(TextRecords)).await?;
                }
                Op::Roll if has_c => {
                    log.roll_older_than(&tp(), -1).await?;
                }
                Op::Retain(bytes) if has_c => {
                    m.start = PartitionLog::apply_retention(log, &tp(), -1, *bytes).await?;
                }
                _ => {}
            }
            Ok(())
        });
        if let Err(e) = done {
            if !matches!(e, LogError::Storage { .. }) {
                return Err(format!("{op:?} failed with a non-storage error: {e:?}"));
            }
            if let Op::Append(_) = op {
                let end = rt.block_on(log.bounds(&tp())).map_err(|e| e.to_string())?.1;
                if end != m.end {
                    return Err(format!("a failed append moved the end to {end}"));
                }
            }
            m.interrupted = Some(op.clone());
            break;
        }
    }
    Ok(m)
}

/// A merge whose swap fails after its commit point (`EIO` on the removal of a segment it
/// replaces): the pass reports a storage error, reads go on from the merged segment, and
/// the next pass finishes the swap first; or, if `DeleteRecords` took the merged segment
/// meanwhile, removes the swap and what is left of its segments. The files then match the
/// index, and a restart finds every record.
#[test]
fn a_merge_failing_after_its_commit_is_finished_by_the_next_pass() {
    let rt = runtime();
    for delete_between in [false, true] {
        let fs = SimFs::new();
        let (log, mut m) = small_segments(&rt, &fs);
        fs.fail_nth(FsOp::RemoveFile, 1, Fault::Eio);
        let err = merge_pass(&rt, &log).unwrap_err();
        assert!(matches!(err, LogError::Storage { .. }), "{err:?}");
        let left = swaps(&fs);
        assert!(
            left.len() == 1 && left[0].1 > 0,
            "a swap and its segments: {:?}",
            fs.paths()
        );
        rt.block_on(async {
            let read = log.read_batches(&tp(), 0, 1 << 20).await.unwrap();
            assert!(!read.batches.is_empty());
            if delete_between {
                m.start = log.delete_records(&tp(), m.end - 1).await.unwrap();
            }
            let more = [("e".to_string(), "after".to_string())];
            append(&log, &more).await.unwrap();
            m.written.insert(m.end, more[0].clone());
            m.end += 1;
            m.durable = m.end;
            log.roll_older_than(&tp(), -1).await.unwrap();
        });
        // A restart now finishes the swap, or removes it below the log start.
        for mode in CrashMode::ALL {
            check(&rt, fs.restart(mode), &m).unwrap_or_else(|e| {
                panic!("delete between: {delete_between}, {mode:?}, before the next pass: {e}")
            });
        }
        merge_pass(&rt, &log).unwrap();
        assert!(swaps(&fs).is_empty(), "finished: {:?}", fs.paths());
        files_match_the_index(&fs, &log).unwrap_or_else(|e| panic!("{delete_between}: {e}"));
        drop(log);
        for mode in CrashMode::ALL {
            check(&rt, fs.restart(mode), &m)
                .unwrap_or_else(|e| panic!("delete between: {delete_between}, {mode:?}: {e}"));
        }
    }
}
