//! Kafka's strategies behind the coordinator, end to end: consumers negotiate a strategy per
//! group, the previous generation reaches the sticky strategies, and cooperative-sticky's
//! withheld partitions belong to nobody.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::collections::BTreeSet;

use common::TestCluster;
use consumer::{AutoOffsetReset, Consumer};
use coordinator_core::{GroupDescription, TopicPartition};

fn with(t: &TestCluster, strategies: &[&str]) -> Consumer {
    let list: Vec<String> = strategies.iter().map(|s| s.to_string()).collect();
    t.cluster
        .consumer_with("g", |c| {
            c.auto_offset_reset(AutoOffsetReset::Earliest)
                .assignment_strategies(list)
        })
        .unwrap()
}

async fn describe(t: &TestCluster) -> GroupDescription {
    t.cluster.coordinator().describe("g").await.unwrap()
}

fn owned(d: &GroupDescription, member: &str) -> BTreeSet<TopicPartition> {
    d.members
        .iter()
        .find(|m| m.member == member)
        .map(|m| m.partitions.iter().cloned().collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn consumers_negotiate_the_strategy_most_of_them_prefer() {
    let t = TestCluster::new();
    t.topic("orders", 6, 0);
    let mut a = with(&t, &["range", "roundrobin"]);
    let mut b = with(&t, &["roundrobin", "range"]);
    let mut c = with(&t, &["roundrobin", "range", "sticky"]);
    a.subscribe(&["orders"]).await.unwrap();
    assert_eq!(describe(&t).await.strategy.as_deref(), Some("range"));
    b.subscribe(&["orders"]).await.unwrap();
    // One vote each: the tie goes to the strategy registered first (range before roundrobin).
    assert_eq!(describe(&t).await.strategy.as_deref(), Some("range"));
    c.subscribe(&["orders"]).await.unwrap();
    assert_eq!(describe(&t).await.strategy.as_deref(), Some("roundrobin"));
    // A consumer with only the default strategy shares nothing with this group.
    let mut plain = t.cluster.consumer("g", AutoOffsetReset::Earliest).unwrap();
    let err = plain.subscribe(&["orders"]).await.unwrap_err();
    assert_eq!(err.code(), "INCONSISTENT_GROUP_PROTOCOL");
    assert_eq!(err.kafka_code(), Some(23));
    assert_eq!(
        describe(&t).await.members.len(),
        3,
        "the refused join changed nothing"
    );
    // When c leaves, the vote ties again and the group goes back to range.
    c.close().await.unwrap();
    assert_eq!(describe(&t).await.strategy.as_deref(), Some("range"));
}

#[tokio::test]
async fn range_through_the_coordinator_gives_contiguous_blocks() {
    let t = TestCluster::new();
    t.topic("orders", 5, 0);
    let mut a = with(&t, &["range"]);
    let mut b = with(&t, &["range"]);
    a.subscribe(&["orders"]).await.unwrap();
    b.subscribe(&["orders"]).await.unwrap();
    a.refresh_assignment().await.unwrap();
    let parts =
        |c: &Consumer| -> Vec<u32> { c.assignment().iter().map(|tp| tp.partition()).collect() };
    assert_eq!(parts(&a), [0, 1, 2]);
    assert_eq!(parts(&b), [3, 4]);
}

#[tokio::test]
async fn sticky_keeps_partitions_across_rebalances_of_the_coordinator() {
    let t = TestCluster::new();
    t.topic("orders", 12, 0);
    let mut consumers: Vec<Consumer> = (0..4).map(|_| with(&t, &["sticky"])).collect();
    for c in &mut consumers {
        c.subscribe(&["orders"]).await.unwrap();
    }
    let before = describe(&t).await;
    for m in &before.members {
        assert_eq!(m.partitions.len(), 3, "{before:?}");
    }
    // member-2 leaves: everyone else keeps all three of theirs and takes one of its.
    consumers.remove(1).close().await.unwrap();
    let after = describe(&t).await;
    for m in ["member-1", "member-3", "member-4"] {
        let kept = owned(&before, m);
        let now = owned(&after, m);
        assert!(
            kept.is_subset(&now),
            "{m} lost partitions: {kept:?} → {now:?}"
        );
        assert_eq!(now.len(), 4);
    }
    // A newcomer takes partitions, and the others give up only what balance needs.
    let mut late = with(&t, &["sticky"]);
    late.subscribe(&["orders"]).await.unwrap();
    let last = describe(&t).await;
    let moved: usize = ["member-1", "member-3", "member-4"]
        .iter()
        .map(|m| owned(&after, m).difference(&owned(&last, m)).count())
        .sum();
    assert_eq!(moved, 3, "exactly the newcomer's share moved: {last:?}");
}

#[tokio::test]
async fn cooperative_sticky_withholds_moving_partitions_for_one_generation() {
    let t = TestCluster::new();
    t.topic("orders", 4, 1);
    let mut a = with(&t, &["cooperative-sticky"]);
    a.subscribe(&["orders"]).await.unwrap();
    assert_eq!(a.assignment().len(), 4);
    let mut b = with(&t, &["cooperative-sticky"]);
    b.subscribe(&["orders"]).await.unwrap();
    // Two partitions would pass from a to b: this generation gives them to nobody.
    let d = describe(&t).await;
    assert_eq!(owned(&d, "member-1").len(), 2);
    assert!(owned(&d, "member-2").is_empty(), "{d:?}");
    let withheld: Vec<TopicPartition> = (0..4)
        .map(|p| TopicPartition::new("orders", p))
        .filter(|tp| !owned(&d, "member-1").contains(tp))
        .collect();
    // a's stale commit of them is fenced by generation, and after refresh they are not a's.
    a.poll(10).await.unwrap();
    assert_eq!(a.commit().await.unwrap_err().code(), "ILLEGAL_GENERATION");
    a.refresh_assignment().await.unwrap();
    assert!(withheld.iter().all(|tp| !a.assignment().contains(tp)));
    // The next rebalance (here: b re-joins, as KIP-429's follow-up) hands them to b.
    b.subscribe(&["orders"]).await.unwrap();
    let d = describe(&t).await;
    assert_eq!(owned(&d, "member-2"), withheld.into_iter().collect());
}

/// KIP-429's hand-over without any other membership change: once the member that lost
/// withheld partitions has seen the generation without them, the coordinator runs the
/// follow-up rebalance by itself.
#[tokio::test]
async fn cooperative_hand_over_completes_after_each_member_refreshes_at_most_twice() {
    let t = TestCluster::new();
    t.topic("orders", 4, 1);
    let mut a = with(&t, &["cooperative-sticky"]);
    a.subscribe(&["orders"]).await.unwrap();
    let mut b = with(&t, &["cooperative-sticky"]);
    b.subscribe(&["orders"]).await.unwrap();
    let kept = owned(&describe(&t).await, "member-1");
    assert_eq!(kept.len(), 2);
    for _ in 0..2 {
        for c in [&mut a, &mut b] {
            c.refresh_assignment().await.unwrap();
            let _ = c.heartbeat().await; // may be fenced by the follow-up: refresh again
        }
        let local: BTreeSet<TopicPartition> = a.assignment().iter().cloned().collect();
        assert!(
            local.is_superset(&kept),
            "a never loses what it kept: {local:?}"
        );
    }
    let d = describe(&t).await;
    let (oa, ob) = (owned(&d, "member-1"), owned(&d, "member-2"));
    assert_eq!(oa, kept);
    assert_eq!(ob.len(), 2);
    assert_eq!(
        oa.union(&ob).count(),
        4,
        "every partition has exactly one owner: {d:?}"
    );
    assert_eq!(b.assignment().len(), 2, "b's local view has them too");
}

/// The stickiness rules the cooperative protocol exists for, over random membership
/// histories: a partition never has two owners in one generation, and it never goes to a new
/// owner before its previous owner has seen a generation in which it no longer owns it.
#[tokio::test]
async fn cooperative_partitions_never_reach_a_new_owner_before_the_old_one_let_go() {
    use std::collections::BTreeMap;
    const MEMBERS: [&str; 4] = ["m1", "m2", "m3", "m4"];
    let strategies = ["cooperative-sticky"];
    for seed in 0..300u64 {
        let t = TestCluster::new();
        t.topic("orders", 6, 0);
        let c = t.cluster.coordinator().clone();
        let mut rng = common::Rng::new(seed);
        // What each member last saw of its own assignment (a join or a refresh answer).
        let mut seen: BTreeMap<&str, BTreeSet<TopicPartition>> = BTreeMap::new();
        let mut generations: BTreeMap<&str, coordinator_core::Generation> = BTreeMap::new();
        for step in 0..150 {
            let m = rng.pick(&MEMBERS);
            match rng.below(100) {
                0..=19 => {
                    if let Ok(a) = c
                        .join_with_strategies("g", m, &["orders"], &strategies)
                        .await
                    {
                        seen.insert(m, a.partitions.into_iter().collect());
                        generations.insert(m, a.generation);
                    }
                }
                20..=54 => {
                    if let Ok(a) = c.assignment("g", m).await {
                        seen.insert(m, a.partitions.into_iter().collect());
                        generations.insert(m, a.generation);
                    }
                }
                55..=69 => {
                    if let Some(&g) = generations.get(m) {
                        let _ = c.heartbeat("g", m, g).await;
                    }
                }
                70..=79 => {
                    if c.leave("g", m).await.unwrap().is_some() {
                        seen.remove(m);
                    }
                }
                _ => {
                    t.clock.advance(rng.below(60));
                    for gone in c.expire_members().await {
                        let id = MEMBERS.iter().find(|x| **x == gone.member).unwrap();
                        seen.remove(id);
                    }
                }
            }
            let Ok(d) = c.describe("g").await else {
                continue;
            };
            let mut owners: BTreeMap<TopicPartition, &str> = BTreeMap::new();
            for member in &d.members {
                for tp in &member.partitions {
                    if let Some(other) = owners.insert(tp.clone(), &member.member) {
                        panic!("seed {seed} step {step}: {tp} owned by {other} and {} in generation {}", member.member, d.generation);
                    }
                    for (y, theirs) in &seen {
                        let still_member = d.members.iter().any(|x| x.member == **y);
                        if *y != member.member && still_member && theirs.contains(tp) {
                            panic!(
                                "seed {seed} step {step}: {tp} went to {} while {y} still \
                                 believes it owns it (generation {})",
                                member.member, d.generation
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The chapter's round-robin as a strategy, whose joins can be made to fail on command.
struct Switchable {
    failing: std::sync::atomic::AtomicBool,
}

impl coordinator_core::Assignor for Switchable {
    fn name(&self) -> &str {
        "minikafka-roundrobin"
    }
    fn assign(
        &self,
        input: &coordinator_core::AssignmentInput<'_>,
    ) -> Result<coordinator_core::Assignment, coordinator_core::AssignError> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(coordinator_core::AssignError::new("switched off"));
        }
        assignor::MiniKafkaRoundRobinAssignor.assign(input)
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// When the strategy fails during a removal, the coordinator's fallback assigns exactly
    /// what the assignor crate's chapter round-robin assigns the remaining members: the two
    /// copies of the chapter's rule agree (the core cannot depend on the assignor crate).
    #[test]
    fn the_removal_fallback_is_the_assignor_crates_round_robin(
        topics in proptest::collection::vec(1u32..6, 1..4),
        subscriptions in proptest::collection::vec(proptest::collection::vec(proptest::bool::ANY, 3), 2..7),
        leaving in 0usize..6,
    ) {
        use std::collections::BTreeMap;
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let names: Vec<String> = (0..topics.len()).map(|t| format!("t{t}")).collect();
        let sizes: BTreeMap<String, u32> =
            names.iter().cloned().zip(topics.iter().copied()).collect();
        let strategy = Arc::new(Switchable { failing: AtomicBool::new(false) });
        let c = coordinator_core::Coordinator::builder(
            Arc::new(offset_store::MemoryStore::new()),
            Arc::new(sizes.clone()),
            strategy.clone(),
        )
        .build()
        .unwrap();
        let members: Vec<(String, Vec<String>)> = subscriptions
            .iter()
            .enumerate()
            .map(|(i, subs)| {
                let mut own: Vec<String> = names
                    .iter()
                    .zip(subs)
                    .filter(|(_, &on)| on)
                    .map(|(n, _)| n.clone())
                    .collect();
                if own.is_empty() {
                    own.push(names[0].clone());
                }
                (format!("m{i}"), own)
            })
            .collect();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            for (id, subs) in &members {
                c.join("g", id, subs).await.unwrap();
            }
            strategy.failing.store(true, Ordering::SeqCst);
            let gone = &members[leaving % members.len()].0;
            c.leave("g", gone).await.unwrap();
            let d = c.describe("g").await.unwrap();
            proptest::prop_assert!(d.assignment_error.is_some(), "the fallback assigned");
            let mut request = coordinator_core::AssignmentRequest::builder();
            for (name, &n) in &sizes {
                request = request.topic(name.clone(), n);
            }
            for (id, subs) in members.iter().filter(|(id, _)| id != gone) {
                request = request.member(id.clone(), subs.clone());
            }
            let request = request.build().unwrap();
            let expected = {
                use coordinator_core::Assignor;
                assignor::MiniKafkaRoundRobinAssignor
                    .assign(&request.input())
                    .unwrap()
                    .to_map(&request.input())
            };
            for m in &d.members {
                let want = expected.get(&m.member).cloned().unwrap_or_default();
                proptest::prop_assert_eq!(&m.partitions, &want, "member {}", m.member);
            }
            Ok(())
        })?;
    }
}
