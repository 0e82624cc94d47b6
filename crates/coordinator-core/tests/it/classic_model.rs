//! Model-based test of classic groups: random interleavings of JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup, OffsetCommit, dropped requests, clock advances and timer runs, on a
//! `ManualClock`. A small model of what clients may observe is kept beside the coordinator —
//! which generation each member was told, which assignment each generation installed, when
//! each member last renewed its lease, which requests are still waiting — and after every
//! step the contract's invariants are checked:
//!
//! 1. at most one installed assignment per generation (every SyncGroup answer of generation
//!    G carries what one leader sent for G), and the generations a member is told never go
//!    back nor run ahead of the group's;
//! 2. no commit checked against generation G is in the store once a member was told G+1;
//! 3. a member that renews its lease within its session, has joined the current generation
//!    and synced it, is never removed by a timer;
//! 4. every waiting JoinGroup and SyncGroup is answered once the timers have run past the
//!    rebalance timeout (checked at the end of every sequence).
//!
//! `CLASSIC_MODEL_SEQUENCES=n` scales the run (default 2,000); `CLASSIC_MODEL_SEED=s` replays
//! one sequence. Sequences run on a current-thread runtime, so a seed replays exactly.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::{ModuloAssignor, Rng, TestStore, Topics};
use coordinator_core::{
    with_no_metadata, ClassicProtocol, CommitAuthority, Coordinator, Error, Generation,
    JoinGroupRequest, JoinGroupResponse, LeavingMember, ManualClock, OffsetCommitRequest,
    OffsetMap, SequentialMemberIds, SyncAssignment, SyncGroupRequest, SyncGroupResponse,
    TopicPartition,
};
use tokio::task::JoinHandle;

const MEMBERS: usize = 4;
const SESSION: u64 = 1_000;
const REBALANCE: u64 = 2_000;
const NEW_MEMBER: u64 = 5_000;

/// A store that reports a commit tagged with a generation older than one a member was told
/// (`told`), checked four times while the commit is in the store.
/// With `keep_groups`, the store keeps group records too: leaders' assignments are staged
/// until the group's record is written.
fn checking_store(
    told: Arc<AtomicU64>,
    keep_groups: bool,
) -> (Arc<TestStore>, Arc<Mutex<Vec<String>>>) {
    let store = Arc::new(TestStore::new(common::MapStore {
        keep_groups,
        ..common::MapStore::default()
    }));
    let violations = Arc::new(Mutex::new(Vec::new()));
    let found = violations.clone();
    store.inspect_commits(4, move |_, o| {
        let told = told.load(Ordering::SeqCst);
        for (tp, &tag) in o {
            if (tag as u64) < told {
                found.lock().unwrap().push(format!(
                    "a commit of {tp} checked against generation {tag} was in the store \
                     after a member was told generation {told}"
                ));
            }
        }
    });
    (store, violations)
}

#[derive(Clone, Debug)]
enum Op {
    Join(usize),
    Sync(usize),
    Heartbeat(usize),
    Commit(usize),
    Leave(usize),
    /// The client goes away while its JoinGroup or SyncGroup waits.
    Drop(usize),
    Advance(u64),
}

fn gen_ops(seed: u64) -> Vec<Op> {
    let mut rng = Rng::new(seed);
    let n = 1 + rng.below(80) as usize;
    (0..n)
        .map(|_| {
            let i = rng.below(MEMBERS as u64) as usize;
            match rng.below(100) {
                0..=21 => Op::Join(i),
                22..=41 => Op::Sync(i),
                42..=59 => Op::Heartbeat(i),
                60..=71 => Op::Commit(i),
                72..=77 => Op::Leave(i),
                78..=80 => Op::Drop(i),
                _ => Op::Advance(rng.below(SESSION * 3 / 2)),
            }
        })
        .collect()
}

type SyncTask = JoinHandle<Result<SyncGroupResponse, Error>>;

/// What the model knows of one member slot.
#[derive(Default)]
struct Slot {
    id: Option<String>,
    /// The last JoinGroup answer.
    joined: Option<JoinGroupResponse>,
    /// The generation it has a SyncGroup answer for.
    synced: Option<Generation>,
    /// When it last renewed its lease (an answer that renews it).
    renewed: u64,
    join: Option<JoinHandle<Result<JoinGroupResponse, Error>>>,
    /// The SyncGroup in flight: its generation, whether its answer renews the lease (Kafka
    /// renews the sessions of the members whose SyncGroup the leader's assignment answers;
    /// a SyncGroup answered at once in Stable does not renew), and the request.
    sync: Option<(Generation, bool, SyncTask)>,
}

struct Run {
    c: Arc<Coordinator>,
    clock: ManualClock,
    /// The highest generation a member was told.
    told: Arc<AtomicU64>,
    violations: Arc<Mutex<Vec<String>>>,
    slots: Vec<Slot>,
    /// Generation → the leader whose assignment it installed.
    installed: BTreeMap<Generation, String>,
    /// Every generation a member was told.
    generations: BTreeSet<Generation>,
}

fn join_req(member: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: "g".into(),
        member_id: member.into(),
        group_instance_id: None,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION as i32,
        rebalance_timeout_ms: REBALANCE as i32,
        protocol_type: "consumer".into(),
        protocols: vec![ClassicProtocol::new("range", vec![7u8])],
        require_known_member_id: false,
        supports_skip_assignment: false,
        reason: None,
    }
}

async fn settle() {
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
}

impl Run {
    fn new(keep_groups: bool) -> Self {
        let clock = ManualClock::new();
        let told = Arc::new(AtomicU64::new(0));
        let (store, violations) = checking_store(told.clone(), keep_groups);
        let c = Arc::new(
            Coordinator::builder(
                store.clone(),
                Topics::with(&[("orders", 4)]),
                ModuloAssignor::named("m"),
            )
            .clock(Arc::new(clock.clone()))
            .member_ids(Arc::new(SequentialMemberIds::new()))
            .group_initial_rebalance_delay_ms(0)
            .group_min_session_timeout_ms(1)
            .new_member_join_timeout_ms(NEW_MEMBER)
            .build()
            .unwrap(),
        );
        Run {
            c,
            clock,
            told,
            violations,
            slots: (0..MEMBERS).map(|_| Slot::default()).collect(),
            installed: BTreeMap::new(),
            generations: BTreeSet::new(),
        }
    }

    fn now(&self) -> u64 {
        use coordinator_core::Clock;
        self.clock.now_ms()
    }

    /// Collects finished requests into the model, checking invariant 1 on the way.
    async fn collect(&mut self) -> Result<(), String> {
        let now = self.now();
        for i in 0..MEMBERS {
            if self.slots[i]
                .join
                .as_ref()
                .is_some_and(JoinHandle::is_finished)
            {
                let handle = self.slots[i].join.take().unwrap();
                if let Ok(Ok(answer)) = handle.await {
                    let before = self.slots[i].joined.as_ref().map(|j| j.generation);
                    if before.is_some_and(|g| answer.generation < g) {
                        return Err(format!(
                            "member slot {i} was told generation {} after {before:?}",
                            answer.generation
                        ));
                    }
                    let current = self.c.classic().describe("g").await.map(|d| d.generation);
                    if current.as_ref().is_ok_and(|g| answer.generation > *g) {
                        return Err(format!(
                            "told generation {} ahead of the group",
                            answer.generation
                        ));
                    }
                    let told = &self.told;
                    told.fetch_max(answer.generation.get(), Ordering::SeqCst);
                    self.generations.insert(answer.generation);
                    let slot = &mut self.slots[i];
                    slot.id = Some(answer.member_id.clone());
                    slot.joined = Some(answer);
                    slot.synced = None;
                    slot.renewed = now;
                }
            }
            if self.slots[i]
                .sync
                .as_ref()
                .is_some_and(|(_, _, h)| h.is_finished())
            {
                let (generation, renews, handle) = self.slots[i].sync.take().unwrap();
                if let Ok(Ok(answer)) = handle.await {
                    let text = String::from_utf8_lossy(&answer.assignment).to_string();
                    if !answer.assignment.is_empty() {
                        let mut parts = text.splitn(3, ':');
                        let (g, leader, whom) = (
                            parts.next().unwrap_or(""),
                            parts.next().unwrap_or(""),
                            parts.next().unwrap_or(""),
                        );
                        if g != generation.get().to_string() {
                            return Err(format!("a sync of generation {generation} got {text}"));
                        }
                        if Some(whom) != self.slots[i].id.as_deref() {
                            return Err(format!(
                                "member slot {i} got another's assignment: {text}"
                            ));
                        }
                        let first = self
                            .installed
                            .entry(generation)
                            .or_insert_with(|| leader.to_string());
                        if first != leader {
                            return Err(format!(
                                "generation {generation} installed the assignments of two \
                                 leaders: {first} and {leader}"
                            ));
                        }
                    }
                    let slot = &mut self.slots[i];
                    slot.synced = Some(generation);
                    if renews {
                        slot.renewed = now;
                    }
                }
            }
        }
        Ok(())
    }

    async fn apply(&mut self, op: &Op) -> Result<(), String> {
        let now = self.now();
        match *op {
            Op::Join(i) => {
                if self.slots[i].join.is_none() {
                    let r = join_req(self.slots[i].id.as_deref().unwrap_or(""));
                    let (c, told) = (self.c.clone(), self.told.clone());
                    // The member learns its generation the moment its answer arrives, even
                    // while other requests (a commit in the store) are still under way.
                    self.slots[i].join = Some(tokio::spawn(async move {
                        let answer = c.classic().join(r).await;
                        if let Ok(a) = &answer {
                            told.fetch_max(a.generation.get(), Ordering::SeqCst);
                        }
                        answer
                    }));
                }
            }
            Op::Sync(i) => {
                let slot = &self.slots[i];
                if let (Some(joined), None) = (&slot.joined, &slot.sync) {
                    let generation = joined.generation;
                    let me = joined.member_id.clone();
                    let assignments = if joined.leader == me {
                        joined
                            .members
                            .iter()
                            .map(|m| SyncAssignment {
                                member_id: m.member_id.clone(),
                                assignment: format!("{}:{me}:{}", generation.get(), m.member_id)
                                    .into_bytes()
                                    .into(),
                                partitions: None,
                            })
                            .collect()
                    } else {
                        Vec::new()
                    };
                    let r = SyncGroupRequest {
                        group_id: "g".into(),
                        generation: Some(generation),
                        member_id: me,
                        group_instance_id: None,
                        protocol_type: Some("consumer".into()),
                        protocol_name: joined.protocol_name.clone(),
                        assignments,
                    };
                    let renews = self.c.classic().describe("g").await.is_ok_and(|d| {
                        d.state == coordinator_core::GroupState::CompletingRebalance
                    });
                    let c = self.c.clone();
                    let h = tokio::spawn(async move { c.classic().sync(r).await });
                    self.slots[i].sync = Some((generation, renews, h));
                }
            }
            Op::Heartbeat(i) => {
                let slot = &self.slots[i];
                if let (Some(id), Some(joined)) = (&slot.id, &slot.joined) {
                    let r = self
                        .c
                        .classic()
                        .heartbeat("g", id, None, Some(joined.generation))
                        .await;
                    if matches!(r, Ok(()) | Err(Error::RebalanceInProgress { .. })) {
                        self.slots[i].renewed = now;
                    }
                }
            }
            Op::Commit(i) => {
                let slot = &self.slots[i];
                if let (Some(id), Some(joined)) = (&slot.id, &slot.joined) {
                    let tag = joined.generation.get() as i64;
                    let r = OffsetCommitRequest {
                        group_id: "g".into(),
                        authority: CommitAuthority::generation(
                            Some(joined.generation),
                            id.clone(),
                            None,
                        ),
                        offsets: with_no_metadata(&OffsetMap::from([(
                            TopicPartition::new("orders", i as u32),
                            tag,
                        )])),
                    };
                    let c = self.c.clone();
                    // Not awaited, and not even started: the commit races whatever the next
                    // operation starts.
                    tokio::spawn(async move { c.offsets().commit(&r).await });
                    return Ok(());
                }
            }
            Op::Leave(i) => {
                if let Some(id) = self.slots[i].id.take() {
                    let leaving = [LeavingMember {
                        member_id: id,
                        group_instance_id: None,
                    }];
                    self.c.classic().leave("g", &leaving).await.unwrap();
                    let slot = &mut self.slots[i];
                    slot.joined = None;
                    slot.synced = None;
                }
            }
            Op::Drop(i) => {
                if let Some(h) = self.slots[i].join.take() {
                    h.abort();
                }
                if let Some((_, _, h)) = self.slots[i].sync.take() {
                    h.abort();
                }
            }
            Op::Advance(ms) => {
                self.clock.advance(ms);
                let now = self.now();
                let generation = self
                    .c
                    .classic()
                    .describe("g")
                    .await
                    .map(|d| d.generation)
                    .ok();
                let expired = self.c.handle_timeout().await;
                for e in expired {
                    let Some(slot) = self
                        .slots
                        .iter_mut()
                        .find(|s| s.id.as_deref() == Some(&e.member))
                    else {
                        continue;
                    };
                    // Invariant 3: a member in good standing whose lease is fresh stays.
                    let in_good_standing = slot.joined.as_ref().map(|j| j.generation) == generation
                        && slot.synced == generation
                        && generation.is_some();
                    if in_good_standing && now - slot.renewed <= SESSION {
                        return Err(format!(
                            "{} was removed at {now} although it renewed its lease at {} and \
                             had joined and synced generation {generation:?}",
                            e.member, slot.renewed
                        ));
                    }
                    slot.id = None;
                    slot.joined = None;
                    slot.synced = None;
                }
            }
        }
        settle().await;
        self.collect().await?;
        let violations = self.violations.lock().unwrap().clone();
        if !violations.is_empty() {
            return Err(violations.join("; "));
        }
        Ok(())
    }

    /// Invariant 4: with no more requests, timers run past the rebalance timeout answer every
    /// waiting request.
    async fn drain(&mut self) -> Result<(), String> {
        for _ in 0..((REBALANCE + NEW_MEMBER) / 500 + 4) {
            self.clock.advance(500);
            self.c.handle_timeout().await;
            settle().await;
        }
        self.collect().await?;
        for (i, slot) in self.slots.iter().enumerate() {
            if slot.join.is_some() || slot.sync.is_some() {
                return Err(format!("member slot {i} still waits for an answer"));
            }
        }
        Ok(())
    }
}

async fn run(ops: &[Op], keep_groups: bool) -> Result<usize, (usize, String)> {
    let mut r = Run::new(keep_groups);
    for (step, op) in ops.iter().enumerate() {
        r.apply(op)
            .await
            .map_err(|e| (step, format!("{op:?}: {e}")))?;
    }
    r.drain().await.map_err(|e| (ops.len(), e))?;
    Ok(r.installed.len())
}

fn run_blocking(ops: &[Op], keep_groups: bool) -> Result<usize, (usize, String)> {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(run(ops, keep_groups))
}

#[test]
fn classic_groups_keep_their_contract_over_random_interleavings() {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let seeds: Vec<u64> = match env("CLASSIC_MODEL_SEED") {
        Some(s) => vec![s],
        None => (0..env("CLASSIC_MODEL_SEQUENCES").unwrap_or(2_000)).collect(),
    };
    let mut installed = 0;
    for seed in seeds {
        let ops = gen_ops(seed);
        // Odd seeds over a store that keeps group records (staged installs), even ones over
        // one that does not.
        let keep = seed % 2 == 1;
        match run_blocking(&ops, keep) {
            Ok(n) => installed += n,
            Err((step, message)) => {
                let mut short = ops.clone();
                let mut chunk = short.len() / 2;
                while chunk >= 1 {
                    let mut i = 0;
                    while i + chunk <= short.len() {
                        let mut candidate = short.clone();
                        candidate.drain(i..i + chunk);
                        if run_blocking(&candidate, keep).is_err() {
                            short = candidate;
                        } else {
                            i += chunk;
                        }
                    }
                    chunk /= 2;
                }
                panic!(
                    "seed {seed} (replay: CLASSIC_MODEL_SEED={seed}, keeping group records: \
                     {keep}), step {step}: {message}\n\
                     shrunk to {} operations: {short:#?}\nfailure: {:?}",
                    short.len(),
                    run_blocking(&short, keep).err()
                );
            }
        }
    }
    assert!(
        installed > 0,
        "no generation installed an assignment: the run checked little"
    );
}
