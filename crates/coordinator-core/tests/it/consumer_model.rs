//! Model-based test of consumer-protocol groups (KIP-848): random interleavings of joins,
//! heartbeats carrying owned partitions, leaves (−1, and −2 for static members), crashes,
//! lost responses, topic changes (a topic created later that a member's regular expression
//! matches among them), commits, clock advances and timer runs, on a
//! `ManualClock`. Clients behave as Kafka's do: they own what their last answer assigned,
//! report it on every heartbeat, drop everything and join again when fenced. After every
//! step:
//!
//! 1. no partition is in two members' current assignments (assigned or still revoking) at
//!    once;
//! 2. a member's epoch never decreases (but for −2, a static member's temporary leave);
//! 3. no commit with a stale epoch lands: a commit is accepted only with the member's epoch
//!    at that moment;
//!
//! and at the end of every sequence, once the disruptions stop and heartbeats continue,
//! 4. every partition of a subscribed topic (named, or matched by a member's regular
//!    expression) is owned by exactly one member, and the group is Stable.
//!
//! `CONSUMER_MODEL_SEQUENCES=n` scales the run (default 300); `CONSUMER_MODEL_SEED=s`
//! replays one sequence.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use common::{env_count, ModuloAssignor, Rng, TestStore, Topics};
use coordinator_core::{
    named, CommitAuthority, ConsumerGroupHeartbeatRequest as Req, ConsumerGroupState, Coordinator,
    ErrorCode, ManualClock, OffsetAndMetadata, OffsetCommitRequest, TopicPartition,
};

const G: &str = "g";
const CLIENTS: usize = 4;
const SESSION: u64 = 45_000;
const REBALANCE: i32 = 20_000;
/// The regular expression some clients subscribe with.
const PAY: &str = "pay.*";

#[derive(Default)]
struct Client {
    /// (member id, epoch) while it believes it is a member.
    member: Option<(String, i32)>,
    owned: BTreeSet<TopicPartition>,
    instance: Option<String>,
    topics: Vec<String>,
    /// Its regular-expression subscription (`None`: it sends `""`, as librdkafka does).
    regex: Option<String>,
    incarnation: u32,
    /// Its last answer was lost: like Kafka's client, it sends a full heartbeat next.
    full_next: bool,
}

struct World {
    c: Coordinator,
    clock: ManualClock,
    topics: Arc<Topics>,
    partitions: BTreeMap<&'static str, u32>,
    clients: Vec<Client>,
    /// Highest epoch each member id was seen at.
    seen: BTreeMap<String, i32>,
    log: Vec<String>,
}

impl World {
    /// With `keep_groups`, over a store that keeps group records (every changing heartbeat
    /// writes the group's record before it is answered).
    fn new(keep_groups: bool) -> Self {
        let clock = ManualClock::new();
        let topics = Topics::with(&[("orders", 4)]);
        let c = Coordinator::builder(
            Arc::new(TestStore::new(common::MapStore {
                keep_groups,
                ..common::MapStore::default()
            })),
            topics.clone(),
            ModuloAssignor::named("chapter"),
        )
        .clock(Arc::new(clock.clone()))
        .consumer_assignor(named("uniform", ModuloAssignor::named("modulo")))
        .build()
        .unwrap();
        World {
            c,
            clock,
            topics,
            partitions: [("orders", 4)].into(),
            clients: (0..CLIENTS).map(|_| Client::default()).collect(),
            seen: BTreeMap::new(),
            log: Vec::new(),
        }
    }

    async fn heartbeat(&mut self, i: usize, lose: bool) {
        let cl = &mut self.clients[i];
        let Some((id, epoch)) = cl.member.clone() else {
            return;
        };
        let mut req = if epoch == 0 {
            // The answer to its join was lost: it joins again, in full.
            Req {
                rebalance_timeout_ms: REBALANCE,
                ..Req::join(G, id.clone(), cl.topics.clone())
                    .with_regex(cl.regex.clone().unwrap_or_default())
            }
        } else if cl.full_next {
            Req {
                rebalance_timeout_ms: REBALANCE,
                subscribed_topic_names: Some(cl.topics.clone()),
                subscribed_topic_regex: Some(cl.regex.clone().unwrap_or_default()),
                ..Req::heartbeat(G, id.clone(), epoch).owning(cl.owned.iter().cloned())
            }
        } else {
            Req::heartbeat(G, id.clone(), epoch).owning(cl.owned.iter().cloned())
        };
        req.instance_id.clone_from(&cl.instance);
        let r = self.c.consumer().heartbeat(&req).await;
        self.log.push(format!(
            "hb {id}@{epoch} owned={:?} lose={lose} -> {r:?}",
            cl.owned
        ));
        self.answer(i, r.map(|r| (r.member_epoch, r.assignment)), lose);
    }

    fn answer(
        &mut self,
        i: usize,
        r: Result<(i32, Option<Vec<TopicPartition>>), coordinator_core::Error>,
        lose: bool,
    ) {
        let cl = &mut self.clients[i];
        cl.full_next = lose;
        match r {
            Ok(_) if lose => {}
            Ok((epoch, assignment)) => {
                if let Some((_, e)) = cl.member.as_mut() {
                    *e = epoch;
                }
                if let Some(a) = assignment {
                    cl.owned = a.into_iter().collect();
                }
            }
            Err(e) => {
                assert!(
                    matches!(
                        e.error_code(),
                        ErrorCode::FencedMemberEpoch
                            | ErrorCode::UnknownMember
                            | ErrorCode::GroupIdNotFound
                            | ErrorCode::UnreleasedInstanceId
                            | ErrorCode::FencedInstanceId
                    ),
                    "unexpected {e}\n{}",
                    self.log.join("\n")
                );
                // Kafka's client: give up every partition and join again later.
                cl.member = None;
                cl.owned.clear();
            }
        }
    }

    async fn join(&mut self, i: usize, rng: &mut Rng, lose: bool) {
        let cl = &mut self.clients[i];
        if cl.member.is_some() {
            return;
        }
        cl.incarnation += 1;
        if cl.instance.is_none() && rng.chance(40) {
            cl.instance = Some(format!("instance-{i}"));
        }
        let choice = rng.below(10);
        cl.topics = if choice < 8 {
            vec!["orders".into()]
        } else {
            vec!["orders".into(), "payments".into()]
        };
        cl.regex = (5..8).contains(&choice).then(|| PAY.to_string());
        let id = format!("m{i}-{}", cl.incarnation);
        let mut req = Req {
            rebalance_timeout_ms: REBALANCE,
            ..Req::join(G, id.clone(), cl.topics.clone())
                .with_regex(cl.regex.clone().unwrap_or_default())
        };
        req.instance_id.clone_from(&cl.instance);
        let r = self.c.consumer().heartbeat(&req).await;
        self.log
            .push(format!("join {id} {:?} -> {r:?}", cl.instance));
        match r {
            Ok(r) => {
                cl.member = Some((r.member_id, 0));
                cl.owned.clear();
                self.answer(i, Ok((r.member_epoch, r.assignment)), lose);
            }
            Err(e) => {
                assert!(
                    matches!(
                        e.error_code(),
                        ErrorCode::UnreleasedInstanceId | ErrorCode::FencedMemberEpoch
                    ),
                    "unexpected {e}\n{}",
                    self.log.join("\n")
                );
                // The instance id is still held by its previous incarnation.
                cl.instance = None;
            }
        }
    }

    async fn leave(&mut self, i: usize, temporary: bool) {
        let cl = &mut self.clients[i];
        let Some((id, _)) = cl.member.clone() else {
            return;
        };
        let epoch = if temporary && cl.instance.is_some() {
            -2
        } else {
            -1
        };
        let mut req = Req::heartbeat(G, id.clone(), epoch);
        req.instance_id.clone_from(&cl.instance);
        let r = self.c.consumer().heartbeat(&req).await;
        self.log.push(format!("leave {id} {epoch} -> {r:?}"));
        cl.member = None;
        cl.owned.clear();
        if epoch == -1 {
            cl.instance = None;
        }
    }

    async fn commit(&mut self, i: usize) {
        let Some((id, epoch)) = self.clients[i].member.clone() else {
            return;
        };
        let before = self.member_epoch(&id).await;
        let req = OffsetCommitRequest {
            group_id: G.into(),
            authority: CommitAuthority::MemberEpoch {
                member_id: id.clone(),
                member_epoch: epoch,
            },
            offsets: [(TopicPartition::new("orders", 0), OffsetAndMetadata::new(1))].into(),
        };
        let r = self.c.offsets().commit(&req).await;
        self.log.push(format!(
            "commit {id}@{epoch} (coordinator: {before:?}) -> {r:?}"
        ));
        match r {
            Ok(()) => assert_eq!(
                before,
                Some(epoch),
                "a commit with a stale epoch landed\n{}",
                self.log.join("\n")
            ),
            Err(e) => {
                assert_ne!(before, Some(epoch), "{e}");
                assert!(matches!(
                    e.error_code(),
                    ErrorCode::StaleMemberEpoch
                        | ErrorCode::UnknownMember
                        | ErrorCode::GroupIdNotFound
                ));
            }
        }
    }

    async fn member_epoch(&self, id: &str) -> Option<i32> {
        let d = self.c.consumer().describe(G).await.ok()?;
        d.members
            .into_iter()
            .find(|m| m.member_id == id)
            .map(|m| m.member_epoch)
    }

    fn grow(&mut self, rng: &mut Rng) {
        // payments and payments-eu do not exist at first: created later, and matched by
        // the regular expression.
        let topic = match rng.below(3) {
            0 => "orders",
            1 => "payments",
            _ => "payments-eu",
        };
        let n = self.partitions.entry(topic).or_insert(0);
        if *n < 8 {
            *n += 1 + rng.below(2) as u32;
            self.topics.set(topic, *n);
            self.log
                .push(format!("topic {topic} now has {n} partitions"));
        }
    }

    async fn check(&mut self) {
        let Ok(d) = self.c.consumer().describe(G).await else {
            return;
        };
        let mut holder: BTreeMap<&TopicPartition, &str> = BTreeMap::new();
        for m in &d.members {
            for tp in m.assignment.iter().chain(&m.partitions_pending_revocation) {
                if let Some(other) = holder.insert(tp, &m.member_id) {
                    panic!(
                        "{tp} is held by {other} and {} at once\n{}",
                        m.member_id,
                        self.log.join("\n")
                    );
                }
            }
            if m.member_epoch != -2 {
                let seen = self
                    .seen
                    .entry(m.member_id.clone())
                    .or_insert(m.member_epoch);
                assert!(
                    m.member_epoch >= *seen,
                    "{}'s epoch went from {seen} to {}\n{}",
                    m.member_id,
                    m.member_epoch,
                    self.log.join("\n")
                );
                *seen = m.member_epoch;
            }
        }
    }

    /// Disruptions stop; every live client heartbeats on time until the group settles.
    async fn settle(&mut self) {
        for _ in 0..40 {
            for i in 0..CLIENTS {
                self.heartbeat(i, false).await;
            }
            self.clock.advance(5_000);
            self.c.handle_timeout().await;
            self.check().await;
        }
        let Ok(d) = self.c.consumer().describe(G).await else {
            return;
        };
        if d.members.is_empty() {
            return;
        }
        assert_eq!(
            d.state,
            ConsumerGroupState::Stable,
            "{d:#?}\n{}",
            self.log.join("\n")
        );
        let pay = regex::Regex::new(&format!("^(?:{PAY})$")).unwrap();
        let mut subscribed: BTreeSet<&str> = d
            .members
            .iter()
            .flat_map(|m| m.subscribed_topic_names.iter().map(String::as_str))
            .collect();
        if d.members.iter().any(|m| m.subscribed_topic_regex.is_some()) {
            subscribed.extend(self.partitions.keys().copied().filter(|t| pay.is_match(t)));
        }
        let mut owners: BTreeMap<TopicPartition, usize> = BTreeMap::new();
        for m in &d.members {
            for tp in &m.assignment {
                *owners.entry(tp.clone()).or_default() += 1;
            }
        }
        for (topic, &n) in &self.partitions {
            if !subscribed.contains(topic) {
                continue;
            }
            for p in 0..n {
                let tp = TopicPartition::new(*topic, p);
                assert_eq!(
                    owners.get(&tp).copied(),
                    Some(1),
                    "{tp} is not owned by exactly one member\n{d:#?}\n{}",
                    self.log.join("\n")
                );
            }
        }
        // And the clients agree with the coordinator.
        for cl in &self.clients {
            if let Some((id, _)) = &cl.member {
                let m = d.members.iter().find(|m| &m.member_id == id).unwrap();
                assert_eq!(cl.owned, m.assignment.iter().cloned().collect());
            }
        }
    }
}

async fn run(seed: u64, steps: usize) {
    let mut rng = Rng::new(seed);
    // Odd seeds over a store that keeps group records.
    let mut w = World::new(seed % 2 == 1);
    for _ in 0..steps {
        let i = rng.below(CLIENTS as u64) as usize;
        let lose = rng.chance(10);
        match rng.below(100) {
            0..=19 => w.join(i, &mut rng, lose).await,
            20..=59 => w.heartbeat(i, lose).await,
            60..=64 => w.leave(i, false).await,
            65..=69 => w.leave(i, true).await,
            70..=73 => {
                // A crash: the client forgets everything, the coordinator learns of it only
                // when the session expires.
                w.log.push(format!("crash client {i}"));
                let cl = &mut w.clients[i];
                cl.member = None;
                cl.owned.clear();
            }
            74..=77 => w.grow(&mut rng),
            78..=85 => w.commit(i).await,
            86..=95 => {
                let by = if rng.chance(10) {
                    SESSION
                } else {
                    rng.below(6_000)
                };
                w.clock.advance(by);
                w.log.push(format!("clock +{by}"));
            }
            _ => {
                let expired = w.c.handle_timeout().await;
                w.log.push(format!("timers -> {expired:?}"));
            }
        }
        w.check().await;
    }
    w.settle().await;
}

#[tokio::test(flavor = "current_thread")]
async fn random_interleavings_keep_the_consumer_protocols_invariants() {
    if let Ok(seed) = std::env::var("CONSUMER_MODEL_SEED") {
        run(seed.parse().unwrap(), 200).await;
        return;
    }
    let sequences = env_count("CONSUMER_MODEL_SEQUENCES", 300);
    for seed in 0..sequences {
        run(seed, 200).await;
    }
}
