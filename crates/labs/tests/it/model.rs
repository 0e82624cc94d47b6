//! Model-based tests: random operation sequences run against the real coordinator, the
//! chapter's round-robin assignor and the JSON offset store (over a simulated file system, and
//! on the real disk for a share of the runs), and against a small reference model written to
//! be obviously correct. After every step the two must agree exactly, and the invariants hold.
//!
//! - `MODEL_SEQUENCES` (default 10,000) scales the number of sequences; each has 1 to 200
//!   operations.
//! - `MODEL_SEED=<n>` replays one sequence.
//! - A failure is shrunk (greedy chunk removal) and reported with its seed and the short
//!   operation list that still fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use coordinator_core::testing::FaultyStore;
use coordinator_core::{
    Coordinator, Error, Generation, GroupState, ManualClock, OffsetMap, OffsetStore, TopicPartition,
};
use offset_store::testing::SimFs;
use offset_store::JsonFileStore;

use crate::common;
use common::Rng;

const SESSION_MS: u64 = 100;
const TOPICS: [(&str, u32); 3] = [("audit", 3), ("orders", 4), ("payments", 2)];
const GROUPS: [&str; 3] = ["g1", "g2", "g3"];
const MEMBERS: [&str; 5] = ["m1", "m2", "m3", "m4", "m5"];

// ------------------------------------------------------------------ operations

#[derive(Clone, Debug)]
enum Op {
    Join {
        g: &'static str,
        m: &'static str,
        topics: Vec<&'static str>,
    },
    Leave {
        g: &'static str,
        m: &'static str,
    },
    Heartbeat {
        g: &'static str,
        m: &'static str,
        gen_delta: i64,
    },
    /// Commits the member's partitions (in the model's view) picked by `mask`, plus
    /// `extra` partitions named directly (foreign or non-existent ones).
    Commit {
        g: &'static str,
        m: &'static str,
        gen_delta: i64,
        mask: u64,
        extra: Vec<(&'static str, u32)>,
        offset: i64,
    },
    Refresh {
        g: &'static str,
        m: &'static str,
    },
    Advance {
        ms: u64,
    },
    Expire,
    Reopen,
}

fn gen_op(rng: &mut Rng) -> Op {
    let g = if rng.chance(3) {
        ""
    } else {
        rng.pick(&GROUPS[..2])
    };
    let m = if rng.chance(3) {
        ""
    } else {
        rng.pick(&MEMBERS[..4])
    };
    let gen_delta = match rng.below(10) {
        0 => -1,
        1 => 1,
        _ => 0,
    };
    match rng.below(100) {
        0..=21 => {
            let mut topics: Vec<&'static str> = TOPICS
                .iter()
                .map(|t| t.0)
                .filter(|_| rng.chance(55))
                .collect();
            if rng.chance(4) {
                topics.push("ghost");
            }
            Op::Join { g, m, topics }
        }
        22..=31 => Op::Leave {
            g: rng.pick(&GROUPS),
            m: rng.pick(&MEMBERS),
        },
        32..=41 => Op::Heartbeat { g, m, gen_delta },
        42..=71 => {
            let extra = if rng.chance(25) {
                let (t, n) = rng.pick(&TOPICS);
                vec![(t, rng.below(u64::from(n) + 1) as u32)]
            } else {
                vec![]
            };
            let offset = if rng.chance(3) {
                -1
            } else {
                rng.below(1000) as i64
            };
            Op::Commit {
                g,
                m,
                gen_delta,
                mask: rng.next(),
                extra,
                offset,
            }
        }
        72..=79 => Op::Refresh { g, m },
        80..=89 => Op::Advance { ms: rng.below(60) },
        90..=95 => Op::Expire,
        _ => Op::Reopen,
    }
}

fn gen_ops(seed: u64) -> Vec<Op> {
    let mut rng = Rng::new(seed);
    let len = 1 + rng.below(200) as usize;
    (0..len).map(|_| gen_op(&mut rng)).collect()
}

// ------------------------------------------------------------------ the reference model

#[derive(Clone, Debug, Default)]
struct MGroup {
    generation: u64,
    members: BTreeMap<&'static str, (BTreeSet<&'static str>, u64)>,
    assignment: BTreeMap<&'static str, Vec<TopicPartition>>,
}

impl MGroup {
    fn stable(&self) -> bool {
        !self.members.is_empty()
    }

    /// docs/rules.md#rebalance with the chapter's round-robin, written the plain way.
    fn rebalance(&mut self) {
        self.generation += 1;
        self.assignment.clear();
        for m in self.members.keys() {
            self.assignment.insert(m, Vec::new());
        }
        let mut cursor = 0usize;
        for (topic, partitions) in TOPICS {
            let eligible: Vec<&'static str> = self
                .members
                .iter()
                .filter(|(_, (subs, _))| subs.contains(topic))
                .map(|(m, _)| *m)
                .collect();
            if eligible.is_empty() {
                continue;
            }
            for p in 0..partitions {
                let owner = eligible[cursor % eligible.len()];
                self.assignment
                    .get_mut(owner)
                    .unwrap()
                    .push(TopicPartition::new(topic, p));
                cursor += 1;
            }
        }
    }
}

#[derive(Default)]
struct Model {
    now: u64,
    groups: BTreeMap<&'static str, MGroup>,
    committed: BTreeMap<&'static str, OffsetMap>,
}

/// What an operation returned, comparable between model and system.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Code(&'static str),
    Joined(u64, Vec<TopicPartition>),
    Left(Option<u64>),
    Ok,
    Expired(Vec<(String, String)>),
}

fn invalid_ids(g: &str, m: &str) -> bool {
    g.is_empty() || m.is_empty()
}

impl Model {
    fn gen_of(&self, g: &str, delta: i64) -> u64 {
        let current = self.groups.get(g).map_or(0, |x| x.generation);
        (current as i64 + delta).max(0) as u64
    }

    fn apply(&mut self, op: &Op, resolved: &OffsetMap, generation: u64) -> Outcome {
        use Outcome::*;
        match op {
            Op::Join { g, m, topics } => {
                if invalid_ids(g, m) {
                    return Code("INVALID_ARGUMENT");
                }
                if topics.iter().any(|t| !TOPICS.iter().any(|x| x.0 == *t)) {
                    return Code("UNKNOWN_TOPIC");
                }
                let group = self.groups.entry(g).or_default();
                group
                    .members
                    .insert(m, (topics.iter().copied().collect(), self.now + SESSION_MS));
                group.rebalance();
                Joined(group.generation, group.assignment[m].clone())
            }
            Op::Leave { g, m } => {
                let Some(group) = self.groups.get_mut(g) else {
                    return Left(None);
                };
                if group.members.remove(m).is_none() {
                    return Left(None);
                }
                group.rebalance();
                Left(Some(group.generation))
            }
            Op::Heartbeat { g, m, .. } => {
                if invalid_ids(g, m) {
                    return Code("INVALID_ARGUMENT");
                }
                let now = self.now;
                let Some(group) = self.groups.get_mut(g) else {
                    return Code("GROUP_ID_NOT_FOUND");
                };
                if generation != group.generation {
                    return Code("ILLEGAL_GENERATION");
                }
                let Some(member) = group.members.get_mut(m) else {
                    return Code("UNKNOWN_MEMBER");
                };
                member.1 = now + SESSION_MS;
                Ok
            }
            Op::Commit { g, m, .. } => {
                if invalid_ids(g, m) {
                    return Code("INVALID_ARGUMENT");
                }
                let Some(group) = self.groups.get(g) else {
                    return Code("GROUP_ID_NOT_FOUND");
                };
                if !group.stable() {
                    return Code("REBALANCE_IN_PROGRESS");
                }
                if generation != group.generation {
                    return Code("ILLEGAL_GENERATION");
                }
                let Some(owned) = group.assignment.get(m) else {
                    return Code("UNKNOWN_MEMBER");
                };
                if !resolved.keys().all(|tp| owned.contains(tp)) {
                    return Code("NOT_PARTITION_OWNER");
                }
                if resolved.values().any(|&o| o < 0) {
                    return Code("INVALID_ARGUMENT");
                }
                let entry = self.committed.entry(g).or_default();
                for (tp, o) in resolved {
                    entry.insert(tp.clone(), *o);
                }
                Ok
            }
            Op::Refresh { g, m } => {
                if invalid_ids(g, m) {
                    return Code("INVALID_ARGUMENT");
                }
                let Some(group) = self.groups.get(g) else {
                    return Code("GROUP_ID_NOT_FOUND");
                };
                match group.assignment.get(m) {
                    Some(parts) => Joined(group.generation, parts.clone()),
                    None => Code("UNKNOWN_MEMBER"),
                }
            }
            Op::Advance { ms } => {
                self.now += ms;
                Ok
            }
            Op::Expire => {
                let mut out = Vec::new();
                for (g, group) in self.groups.iter_mut() {
                    let dead: Vec<&'static str> = group
                        .members
                        .iter()
                        .filter(|(_, (_, deadline))| self.now > *deadline)
                        .map(|(m, _)| *m)
                        .collect();
                    if dead.is_empty() {
                        continue;
                    }
                    for m in &dead {
                        group.members.remove(m);
                        out.push((g.to_string(), m.to_string()));
                    }
                    group.rebalance();
                }
                Expired(out)
            }
            Op::Reopen => Ok,
        }
    }

    /// The partitions a commit names: the member's own (per the model) chosen by `mask`,
    /// plus the extra ones.
    fn resolve(&self, op: &Op) -> OffsetMap {
        let Op::Commit {
            g,
            m,
            mask,
            extra,
            offset,
            ..
        } = op
        else {
            return OffsetMap::new();
        };
        let mut out = OffsetMap::new();
        if let Some(owned) = self.groups.get(g).and_then(|x| x.assignment.get(m)) {
            for (i, tp) in owned.iter().enumerate() {
                if mask >> (i % 64) & 1 == 1 {
                    out.insert(tp.clone(), *offset);
                }
            }
        }
        for (t, p) in extra {
            out.insert(TopicPartition::new(*t, *p), *offset);
        }
        out
    }
}

// ------------------------------------------------------------------ the system under test

/// The coordinator's store, which the `Reopen` operation replaces with a fresh
/// `JsonFileStore` read back from the (simulated or real) disk.
type Reopenable = FaultyStore<dyn OffsetStore>;

enum Disk {
    Sim(SimFs),
    Real(#[allow(dead_code)] tempfile::TempDir),
}

struct System {
    clock: ManualClock,
    coordinator: Coordinator,
    store: Arc<Reopenable>,
    disk: Disk,
    path: PathBuf,
}

impl System {
    fn new(real_disk: bool) -> Self {
        let (disk, path) = if real_disk {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("offsets.json");
            (Disk::Real(dir), path)
        } else {
            (Disk::Sim(SimFs::new()), PathBuf::from("/sim/offsets.json"))
        };
        let store = Arc::new(Reopenable::from_arc(open(&disk, &path)));
        let clock = ManualClock::new();
        let metadata: BTreeMap<String, u32> =
            TOPICS.iter().map(|(t, n)| (t.to_string(), *n)).collect();
        let coordinator = Coordinator::builder(
            store.clone(),
            Arc::new(metadata),
            Arc::new(assignor::MiniKafkaRoundRobinAssignor),
        )
        .clock(Arc::new(clock.clone()))
        .session_timeout_ms(SESSION_MS)
        .build()
        .unwrap();
        System {
            clock,
            coordinator,
            store,
            disk,
            path,
        }
    }

    async fn apply(&self, op: &Op, resolved: &OffsetMap, generation: u64) -> Outcome {
        let c = &self.coordinator;
        let code = |e: Error| Outcome::Code(e.code());
        match op {
            Op::Join { g, m, topics } => match c.join(g, m, topics).await {
                Ok(a) => Outcome::Joined(a.generation.get(), a.partitions),
                Err(e) => code(e),
            },
            Op::Leave { g, m } => match c.leave(g, m).await {
                Ok(gen) => Outcome::Left(gen.map(Generation::get)),
                Err(e) => code(e),
            },
            Op::Heartbeat { g, m, .. } => {
                match c.heartbeat(g, m, Generation::new(generation)).await {
                    Ok(()) => Outcome::Ok,
                    Err(e) => code(e),
                }
            }
            Op::Commit { g, m, .. } => {
                match c.commit(g, m, Generation::new(generation), resolved).await {
                    Ok(()) => Outcome::Ok,
                    Err(e) => code(e),
                }
            }
            Op::Refresh { g, m } => match c.assignment(g, m).await {
                Ok(a) => Outcome::Joined(a.generation.get(), a.partitions),
                Err(e) => code(e),
            },
            Op::Advance { ms } => {
                self.clock.advance(*ms);
                Outcome::Ok
            }
            Op::Expire => Outcome::Expired(
                c.expire_members()
                    .await
                    .into_iter()
                    .map(|e| (e.group, e.member))
                    .collect(),
            ),
            Op::Reopen => {
                // A file has one owner: the old store must be gone before the new one opens.
                let _reopening = common::reopening();
                self.store.replace_inner(|| open(&self.disk, &self.path));
                Outcome::Ok
            }
        }
    }
}

fn open(disk: &Disk, path: &PathBuf) -> Arc<dyn OffsetStore> {
    match disk {
        Disk::Sim(fs) => Arc::new(JsonFileStore::open_with_fs(path, fs.clone()).unwrap()),
        Disk::Real(_) => Arc::new(JsonFileStore::open(path).unwrap()),
    }
}

// ------------------------------------------------------------------ running and checking

struct Failure {
    step: usize,
    message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {}: {}", self.step, self.message)
    }
}

async fn check_state(model: &Model, sys: &System) -> Result<(), String> {
    for g in GROUPS {
        let real = sys.coordinator.describe(g).await;
        match (model.groups.get(g), real) {
            (None, Err(e)) if e.code() == "GROUP_ID_NOT_FOUND" => {}
            (Some(mg), Ok(d)) => {
                if d.generation.get() != mg.generation {
                    return Err(format!(
                        "{g}: generation {} vs model {}",
                        d.generation, mg.generation
                    ));
                }
                let expected_state = if mg.stable() {
                    GroupState::Stable
                } else {
                    GroupState::Empty
                };
                if d.state != expected_state {
                    return Err(format!("{g}: state {} vs model {expected_state}", d.state));
                }
                let real_members: BTreeMap<&str, &Vec<TopicPartition>> = d
                    .members
                    .iter()
                    .map(|m| (m.member.as_str(), &m.partitions))
                    .collect();
                let model_members: BTreeMap<&str, &Vec<TopicPartition>> =
                    mg.assignment.iter().map(|(m, p)| (*m, p)).collect();
                if real_members != model_members {
                    return Err(format!(
                        "{g}: members {real_members:?} vs model {model_members:?}"
                    ));
                }
                // Invariant: in a Stable group every partition of a subscribed topic has
                // exactly one owner, and that owner subscribes to its topic.
                if d.state == GroupState::Stable {
                    let mut owners: BTreeMap<&TopicPartition, usize> = BTreeMap::new();
                    for m in &d.members {
                        for tp in &m.partitions {
                            *owners.entry(tp).or_default() += 1;
                            if !m.topics.iter().any(|t| t == tp.topic()) {
                                return Err(format!(
                                    "{g}: {} owns {tp} without subscribing",
                                    m.member
                                ));
                            }
                        }
                    }
                    for (topic, n) in TOPICS {
                        if d.members
                            .iter()
                            .any(|m| m.topics.iter().any(|t| t == topic))
                        {
                            for p in 0..n {
                                let tp = TopicPartition::new(topic, p);
                                if owners.get(&tp) != Some(&1) {
                                    return Err(format!(
                                        "{g}: {tp} has {:?} owners",
                                        owners.get(&tp)
                                    ));
                                }
                            }
                        }
                    }
                }
            }
            (m, r) => return Err(format!("{g}: model {m:?} vs system {r:?}")),
        }
        let stored = sys.store.list(g).await.map_err(|e| e.to_string())?;
        let expected = model.committed.get(g).cloned().unwrap_or_default();
        if stored != expected {
            return Err(format!(
                "{g}: store holds {stored:?}, model says {expected:?}"
            ));
        }
    }
    Ok(())
}

/// Outcome kind (e.g. `Commit:Ok`, `Commit:ILLEGAL_GENERATION`) → how often it happened.
type Tally = BTreeMap<String, u64>;

fn kind(op: &Op, outcome: &Outcome) -> String {
    let name = format!("{op:?}");
    let name = name
        .split([' ', '{'])
        .next()
        .unwrap_or_default()
        .to_string();
    let result = match outcome {
        Outcome::Code(c) => c.to_string(),
        Outcome::Expired(list) if list.is_empty() => "none".into(),
        Outcome::Left(None) => "no-op".into(),
        _ => "Ok".into(),
    };
    format!("{name}:{result}")
}

async fn run_ops(ops: &[Op], real_disk: bool) -> Result<Tally, Failure> {
    let sys = System::new(real_disk);
    let mut model = Model::default();
    let mut tally = Tally::new();
    for (step, op) in ops.iter().enumerate() {
        let generation = match op {
            Op::Heartbeat { g, gen_delta, .. } | Op::Commit { g, gen_delta, .. } => {
                model.gen_of(g, *gen_delta)
            }
            _ => 0,
        };
        let resolved = model.resolve(op);
        let before: BTreeMap<&str, u64> = model
            .groups
            .iter()
            .map(|(g, x)| (*g, x.generation))
            .collect();
        let expected = model.apply(op, &resolved, generation);
        let actual = sys.apply(op, &resolved, generation).await;
        if expected != actual {
            return Err(Failure {
                step,
                message: format!("{op:?}: system {actual:?}, model {expected:?}"),
            });
        }
        *tally.entry(kind(op, &actual)).or_default() += 1;
        // The generation grows by exactly one per membership change.
        for (g, group) in &model.groups {
            let was = before.get(g).copied().unwrap_or(0);
            let changes = match (&expected, op) {
                (Outcome::Joined(..), Op::Join { g: jg, .. }) if jg == g => 1,
                (Outcome::Left(Some(_)), Op::Leave { g: lg, .. }) if lg == g => 1,
                (Outcome::Expired(list), _) if list.iter().any(|(eg, _)| eg == g) => 1,
                _ => 0,
            };
            if group.generation != was + changes {
                return Err(Failure {
                    step,
                    message: format!("{g}: generation jumped {was} → {}", group.generation),
                });
            }
        }
        check_state(&model, &sys).await.map_err(|message| Failure {
            step,
            message: format!("after {op:?}: {message}"),
        })?;
    }
    Ok(tally)
}

fn run_blocking(ops: &[Op], real_disk: bool) -> Result<Tally, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(run_ops(ops, real_disk))
}

/// Greedy shrinking: drop chunks (halves, quarters, … single ops) while `fails` still holds.
fn shrink<T: Clone>(mut ops: Vec<T>, fails: impl Fn(&[T]) -> bool) -> Vec<T> {
    let mut chunk = ops.len() / 2;
    while chunk >= 1 {
        let mut i = 0;
        while i + chunk <= ops.len() {
            let mut candidate = ops.clone();
            candidate.drain(i..i + chunk);
            if fails(&candidate) {
                ops = candidate;
            } else {
                i += chunk;
            }
        }
        chunk /= 2;
    }
    ops
}

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Checks every seed, split into contiguous shares checked on parallel threads (one per core,
/// at most four): the sequences are independent, each on its own runtime and store. A
/// failure panics with the first failing seed, as a sequential run would: each thread stops
/// at its first failure, and the shares are in seed order.
fn check_seeds(seeds: impl Iterator<Item = u64>, real_disk: bool) -> (u64, u64, Tally) {
    let seeds: Vec<u64> = seeds.collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let share = seeds.len().div_ceil(threads).max(1);
    let results: Vec<Result<(u64, u64, Tally), String>> = std::thread::scope(|scope| {
        let workers: Vec<_> = seeds
            .chunks(share)
            .map(|chunk| scope.spawn(move || check_share(chunk, real_disk)))
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let (mut sequences, mut operations, mut total) = (0, 0, Tally::new());
    for result in results {
        match result {
            Ok((n, ops, tally)) => {
                sequences += n;
                operations += ops;
                for (k, v) in tally {
                    *total.entry(k).or_default() += v;
                }
            }
            Err(message) => panic!("{message}"),
        }
    }
    (sequences, operations, total)
}

/// Checks `seeds` in order; the first failure, shrunk, is the error.
fn check_share(seeds: &[u64], real_disk: bool) -> Result<(u64, u64, Tally), String> {
    let (mut sequences, mut operations, mut total) = (0, 0, Tally::new());
    for &seed in seeds {
        let ops = gen_ops(seed);
        match run_blocking(&ops, real_disk) {
            Ok(tally) => {
                for (k, v) in tally {
                    *total.entry(k).or_default() += v;
                }
            }
            Err(failure) => {
                let short = shrink(ops, |ops| run_blocking(ops, real_disk).is_err());
                let last = run_blocking(&short, real_disk)
                    .err()
                    .map(|f| f.to_string())
                    .unwrap_or_default();
                return Err(format!(
                "model mismatch, seed {seed} (replay: MODEL_SEED={seed} cargo test -p labs --test it model::)\n\
                 first failure: {failure}\nshrunk to {} operations:\n{short:#?}\nfailure: {last}",
                short.len()
            ));
            }
        }
        sequences += 1;
        operations += ops.len() as u64;
    }
    Ok((sequences, operations, total))
}

#[test]
fn coordinator_and_json_store_agree_with_the_model() {
    if let Some(seed) = env("MODEL_SEED") {
        check_seeds(std::iter::once(seed), false);
        return;
    }
    let n = env("MODEL_SEQUENCES").unwrap_or(10_000);
    let (sequences, operations, tally) = check_seeds(0..n, false);
    eprintln!("model: {sequences} sequences, {operations} operations (simulated disk): {tally:#?}");
    assert_eq!(sequences, n);
    // The run is only worth something if every kind of outcome actually happened.
    for outcome in [
        "Join:Ok",
        "Join:UNKNOWN_TOPIC",
        "Join:INVALID_ARGUMENT",
        "Leave:Ok",
        "Leave:no-op",
        "Heartbeat:Ok",
        "Heartbeat:ILLEGAL_GENERATION",
        "Heartbeat:UNKNOWN_MEMBER",
        "Heartbeat:GROUP_ID_NOT_FOUND",
        "Commit:Ok",
        "Commit:ILLEGAL_GENERATION",
        "Commit:NOT_PARTITION_OWNER",
        "Commit:UNKNOWN_MEMBER",
        "Commit:REBALANCE_IN_PROGRESS",
        "Commit:INVALID_ARGUMENT",
        "Commit:GROUP_ID_NOT_FOUND",
        "Refresh:Ok",
        "Refresh:UNKNOWN_MEMBER",
        "Expire:Ok",
        "Expire:none",
        "Reopen:Ok",
    ] {
        assert!(
            tally.get(outcome).copied().unwrap_or(0) > 0,
            "{outcome} never happened: {tally:#?}"
        );
    }
}

#[test]
fn model_agrees_on_the_real_disk() {
    let n = env("MODEL_DISK_SEQUENCES").unwrap_or(40);
    let (sequences, operations, tally) = check_seeds(1_000_000..1_000_000 + n, true);
    eprintln!("model: {sequences} sequences, {operations} operations (real disk)");
    assert!(
        tally.get("Commit:Ok").copied().unwrap_or(0) > 0,
        "{tally:#?}"
    );
}

// ------------------------------------------------------------------ consumers

/// What a consumer of the group does next.
#[derive(Clone, Debug)]
enum ConsumerOp {
    /// Creates consumer `i` if needed and subscribes it.
    Subscribe(usize),
    Poll(usize, usize),
    Commit(usize),
    Refresh(usize),
    Heartbeat(usize),
    /// The only way a consumer may commit lower: an explicit seek.
    Seek(usize, u32, i64),
    Close(usize),
    /// The process dies: no leave; the session expires later.
    Crash(usize),
    AdvanceAndExpire(u64),
}

const CONSUMERS: usize = 4;
const CONSUMER_PARTITIONS: u32 = 4;
const RECORDS_PER_PARTITION: usize = 200;

fn gen_consumer_ops(seed: u64) -> Vec<ConsumerOp> {
    let mut rng = Rng::new(seed);
    let n = 1 + rng.below(120) as usize;
    (0..n)
        .map(|_| {
            let i = rng.below(CONSUMERS as u64) as usize;
            match rng.below(100) {
                0..=14 => ConsumerOp::Subscribe(i),
                15..=44 => ConsumerOp::Poll(i, 1 + rng.below(40) as usize),
                45..=64 => ConsumerOp::Commit(i),
                65..=76 => ConsumerOp::Refresh(i),
                77..=82 => ConsumerOp::Heartbeat(i),
                83..=85 => ConsumerOp::Seek(
                    i,
                    rng.below(u64::from(CONSUMER_PARTITIONS)) as u32,
                    rng.below(RECORDS_PER_PARTITION as u64) as i64,
                ),
                86..=90 => ConsumerOp::Close(i),
                91..=93 => ConsumerOp::Crash(i),
                _ => ConsumerOp::AdvanceAndExpire(rng.below(150)),
            }
        })
        .collect()
}

/// Runs consumer operations against the cluster facade (real consumer, coordinator,
/// assignor, JSON store) and checks that no consumer commit moves a partition's committed
/// offset backwards, unless that consumer explicitly sought below it first.
async fn run_consumer_ops(ops: &[ConsumerOp]) -> Result<u64, Failure> {
    use consumer::{AutoOffsetReset, Consumer};
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let cluster = labs::Cluster::builder()
        .clock(clock.clone())
        .session_timeout_ms(SESSION_MS)
        .open(dir.path())
        .unwrap();
    cluster.create_topic("orders", CONSUMER_PARTITIONS).unwrap();
    for p in 0..CONSUMER_PARTITIONS {
        for r in 0..RECORDS_PER_PARTITION {
            cluster.append("orders", p, format!("{p}/{r}")).unwrap();
        }
    }
    let mut consumers: Vec<Option<(Consumer, BTreeSet<TopicPartition>)>> =
        (0..CONSUMERS).map(|_| None).collect();
    let mut committed: BTreeMap<TopicPartition, i64> = BTreeMap::new();
    let mut commits = 0;
    for (step, op) in ops.iter().enumerate() {
        match *op {
            ConsumerOp::Subscribe(i) => {
                let slot = consumers[i].get_or_insert_with(|| {
                    let c = cluster.consumer("g", AutoOffsetReset::Earliest).unwrap();
                    (c, BTreeSet::new())
                });
                let _ = slot.0.subscribe(&["orders"]).await;
            }
            ConsumerOp::Poll(i, n) => {
                if let Some((c, _)) = &mut consumers[i] {
                    let _ = c.poll(n).await;
                }
            }
            ConsumerOp::Commit(i) => {
                if let Some((c, sought)) = &mut consumers[i] {
                    if let Ok(offsets) = c.commit().await {
                        commits += 1;
                        for (tp, &o) in &offsets {
                            let before = committed.get(tp).copied().unwrap_or(0);
                            if o < before && !sought.contains(tp) {
                                return Err(Failure {
                                    step,
                                    message: format!(
                                        "{op:?}: {} committed {tp} = {o}, below the group's {before}",
                                        c.member_id()
                                    ),
                                });
                            }
                            committed.insert(tp.clone(), o);
                        }
                        sought.clear();
                    }
                }
            }
            ConsumerOp::Refresh(i) => {
                if let Some((c, _)) = &mut consumers[i] {
                    let _ = c.refresh_assignment().await;
                }
            }
            ConsumerOp::Heartbeat(i) => {
                if let Some((c, _)) = &mut consumers[i] {
                    let _ = c.heartbeat().await;
                }
            }
            ConsumerOp::Seek(i, p, offset) => {
                if let Some((c, sought)) = &mut consumers[i] {
                    let tp = TopicPartition::new("orders", p);
                    if c.seek(&tp, offset).is_ok() {
                        sought.insert(tp);
                    }
                }
            }
            ConsumerOp::Close(i) => {
                if let Some((mut c, _)) = consumers[i].take() {
                    let _ = c.close().await;
                }
            }
            ConsumerOp::Crash(i) => {
                consumers[i] = None;
            }
            ConsumerOp::AdvanceAndExpire(ms) => {
                clock.advance(ms);
                cluster.expire_group_members().await;
            }
        }
    }
    Ok(commits)
}

fn run_consumer_blocking(ops: &[ConsumerOp]) -> Result<u64, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(run_consumer_ops(ops))
}

#[test]
fn consumer_commits_never_move_a_committed_offset_backwards() {
    let seeds: Vec<u64> = match env("MODEL_SEED") {
        Some(seed) => vec![seed],
        None => (0..env("MODEL_CONSUMER_SEQUENCES").unwrap_or(1_000)).collect(),
    };
    let mut commits = 0;
    for seed in seeds {
        let ops = gen_consumer_ops(seed);
        match run_consumer_blocking(&ops) {
            Ok(n) => commits += n,
            Err(failure) => {
                let short = shrink(ops.clone(), |ops| run_consumer_blocking(ops).is_err());
                panic!(
                    "a committed offset moved backwards, seed {seed} (replay: MODEL_SEED={seed} \
                     cargo test -p labs --test it model::consumer_commits)\nfirst failure: {failure}\n\
                     shrunk to {} operations:\n{short:#?}",
                    short.len()
                );
            }
        }
    }
    assert!(
        commits > 0,
        "no consumer commit succeeded: the run checked nothing"
    );
}
