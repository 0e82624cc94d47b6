//! Every coordinator rule of docs/rules.md, and the chapter's exercises 2, 3 and 4.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::*;
use coordinator_core::{
    AssignError, Assignment, AssignmentInput, Assignor, Coordinator, Error, ExpiredMember,
    Generation, GroupState, StorageErrorKind,
};

fn code<T: std::fmt::Debug>(r: Result<T, Error>) -> &'static str {
    r.expect_err("expected an error").code()
}

// ---------------------------------------------------------------- join

#[tokio::test]
async fn first_join_creates_the_group_at_generation_one_and_owns_everything() {
    let f = fixture();
    let a = f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    assert_eq!(a.generation, Generation::new(1));
    assert_eq!(
        a.partitions,
        tps(&[("orders", 0), ("orders", 1), ("orders", 2), ("orders", 3)])
    );
    assert_eq!(f.coordinator.state("g").await.unwrap(), GroupState::Stable);
}

#[tokio::test]
async fn every_join_and_rejoin_is_a_new_generation() {
    let f = fixture();
    f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    let second = f.coordinator.join("g", "m2", &["orders"]).await.unwrap();
    assert_eq!(second.generation, Generation::new(2));
    assert_eq!(second.partitions, tps(&[("orders", 1), ("orders", 3)]));
    // A re-join replaces the member's subscriptions and still makes a new generation.
    let rejoin = f.coordinator.join("g", "m2", &["payments"]).await.unwrap();
    assert_eq!(rejoin.generation, Generation::new(3));
    assert_eq!(rejoin.partitions, tps(&[("payments", 0)]));
    let m1 = f.coordinator.assignment("g", "m1").await.unwrap();
    assert_eq!(
        m1.partitions.len(),
        4,
        "m1 is now the only subscriber of orders"
    );
    let d = f.coordinator.describe("g").await.unwrap();
    assert_eq!(d.members.len(), 2);
    assert_eq!(d.members[1].topics, vec!["payments".to_string()]);
}

#[tokio::test]
async fn join_deadline_is_now_plus_session_timeout() {
    let f = fixture();
    f.clock.advance(40);
    f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    let d = f.coordinator.describe("g").await.unwrap();
    assert_eq!(d.members[0].deadline_ms, 140);
}

#[tokio::test]
async fn a_member_may_subscribe_to_nothing_and_then_owns_nothing() {
    let f = fixture();
    let none: [&str; 0] = [];
    let a = f.coordinator.join("g", "idle", &none).await.unwrap();
    assert!(a.partitions.is_empty());
    assert_eq!(a.generation, Generation::new(1));
    let b = f.coordinator.join("g", "busy", &["orders"]).await.unwrap();
    assert_eq!(b.partitions.len(), 4);
}

#[tokio::test]
async fn duplicate_subscriptions_count_once() {
    let f = fixture();
    let a = f
        .coordinator
        .join("g", "m", &["orders", "orders"])
        .await
        .unwrap();
    assert_eq!(a.partitions.len(), 4);
}

#[tokio::test]
async fn join_rejects_empty_ids_and_changes_nothing() {
    let f = fixture();
    assert_eq!(
        code(f.coordinator.join("", "m", &["orders"]).await),
        "INVALID_ARGUMENT"
    );
    assert_eq!(
        code(f.coordinator.join("g", "", &["orders"]).await),
        "INVALID_ARGUMENT"
    );
    assert_eq!(code(f.coordinator.state("g").await), "GROUP_ID_NOT_FOUND");
    assert_eq!(f.assignor.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn join_names_every_unknown_topic_sorted_and_changes_nothing() {
    let f = fixture();
    f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    let err = f
        .coordinator
        .join("g", "m2", &["zeta", "orders", "alpha", "zeta"])
        .await
        .unwrap_err();
    match &err {
        Error::UnknownTopic { topics } => assert_eq!(topics, &["alpha", "zeta"]),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(err.code(), "UNKNOWN_TOPIC");
    assert_eq!(err.kafka_code(), Some(3));
    let d = f.coordinator.describe("g").await.unwrap();
    assert_eq!(d.generation, Generation::new(1));
    assert_eq!(d.members.len(), 1);
    // A failed first join does not create the group either.
    assert_eq!(
        code(f.coordinator.join("h", "m", &["nope"]).await),
        "UNKNOWN_TOPIC"
    );
    assert_eq!(code(f.coordinator.state("h").await), "GROUP_ID_NOT_FOUND");
}

#[tokio::test]
async fn oversized_topics_are_refused_before_anything_is_allocated() {
    let f = fixture();
    f.topics.set("huge", u32::MAX);
    let err = f.coordinator.join("g", "m", &["huge"]).await.unwrap_err();
    assert_eq!(err.code(), "INVALID_ARGUMENT");
    assert!(err.to_string().contains("huge"), "{err}");
    // Each topic under the per-topic cap, together over the per-assignment cap.
    let names: Vec<String> = (0..17).map(|i| format!("big-{i}")).collect();
    for n in &names {
        f.topics.set(n, coordinator_core::MAX_PARTITIONS_PER_TOPIC);
    }
    let err = f.coordinator.join("g", "m", &names).await.unwrap_err();
    assert_eq!(err.code(), "INVALID_ARGUMENT");
    assert!(err.to_string().contains("in all"), "{err}");
    assert_eq!(code(f.coordinator.state("g").await), "GROUP_ID_NOT_FOUND");
}

// ---------------------------------------------------------------- leave

#[tokio::test]
async fn leave_rebalances_and_the_last_leave_empties_the_group() {
    let f = fixture();
    f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    f.coordinator.join("g", "m2", &["orders"]).await.unwrap();
    assert_eq!(
        f.coordinator.leave("g", "m2").await.unwrap(),
        Some(Generation::new(3))
    );
    let m1 = f.coordinator.assignment("g", "m1").await.unwrap();
    assert_eq!(m1.generation, Generation::new(3));
    assert_eq!(m1.partitions.len(), 4);
    assert_eq!(
        f.coordinator.leave("g", "m1").await.unwrap(),
        Some(Generation::new(4))
    );
    let d = f.coordinator.describe("g").await.unwrap();
    assert_eq!(d.state, GroupState::Empty);
    assert_eq!(d.generation, Generation::new(4));
    assert!(d.members.is_empty());
    assert_eq!(d.strategy, None);
}

#[tokio::test]
async fn leave_is_idempotent_for_unknown_groups_and_members() {
    let f = fixture();
    assert_eq!(f.coordinator.leave("nope", "m").await.unwrap(), None);
    f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    assert_eq!(f.coordinator.leave("g", "ghost").await.unwrap(), None);
    assert_eq!(
        f.coordinator.leave("g", "m1").await.unwrap(),
        Some(Generation::new(2))
    );
    assert_eq!(f.coordinator.leave("g", "m1").await.unwrap(), None);
    let d = f.coordinator.describe("g").await.unwrap();
    assert_eq!(
        d.generation,
        Generation::new(2),
        "no-op leaves make no generation"
    );
    assert_eq!(code(f.coordinator.leave("", "m").await), "INVALID_ARGUMENT");
}

#[tokio::test]
async fn a_group_can_be_joined_again_after_it_emptied() {
    let f = fixture();
    f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    f.coordinator.leave("g", "m1").await.unwrap();
    let again = f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    assert_eq!(again.generation, Generation::new(3));
    assert_eq!(f.coordinator.state("g").await.unwrap(), GroupState::Stable);
}

// ---------------------------------------------------------------- heartbeat

#[tokio::test]
async fn heartbeat_checks_group_then_generation_then_member() {
    let f = fixture();
    let g1 = Generation::new(1);
    assert_eq!(
        code(f.coordinator.heartbeat("g", "m1", g1).await),
        "GROUP_ID_NOT_FOUND"
    );
    f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    // Stale generation AND unknown member: the generation is checked first.
    let err = f
        .coordinator
        .heartbeat("g", "ghost", Generation::new(7))
        .await
        .unwrap_err();
    match err {
        Error::IllegalGeneration {
            requested, current, ..
        } => {
            assert_eq!(requested, Some(Generation::new(7)));
            assert_eq!(current, g1);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        code(f.coordinator.heartbeat("g", "ghost", g1).await),
        "UNKNOWN_MEMBER"
    );
    f.coordinator.heartbeat("g", "m1", g1).await.unwrap();
    assert_eq!(
        code(f.coordinator.heartbeat("", "m1", g1).await),
        "INVALID_ARGUMENT"
    );
}

#[tokio::test]
async fn heartbeat_extends_the_lease_and_nothing_else() {
    let f = fixture();
    let a = f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    let before = f.coordinator.describe("g").await.unwrap();
    f.clock.advance(90);
    f.coordinator
        .heartbeat("g", "m1", a.generation)
        .await
        .unwrap();
    let after = f.coordinator.describe("g").await.unwrap();
    assert_eq!(after.members[0].deadline_ms, 190);
    assert_eq!(after.generation, before.generation);
    assert_eq!(after.members[0].partitions, before.members[0].partitions);
    assert!(
        f.store.calls(StoreOp::Commit) == 0,
        "a heartbeat never commits"
    );
    f.clock.set(190).unwrap();
    assert!(f.coordinator.expire_members().await.is_empty());
    f.clock.set(191).unwrap();
    assert_eq!(f.coordinator.expire_members().await.len(), 1);
}

// ---------------------------------------------------------------- expiry

#[tokio::test]
async fn exercise_3_expiry_is_strict_and_empties_the_group_in_one_rebalance() {
    let f = fixture();
    f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    f.coordinator.join("g", "m2", &["orders"]).await.unwrap();
    f.clock.set(100).unwrap();
    assert_eq!(
        f.coordinator.expire_members().await,
        vec![],
        "alive at exactly the deadline"
    );
    f.clock.set(101).unwrap();
    let expired = f.coordinator.expire_members().await;
    assert_eq!(
        expired,
        vec![
            ExpiredMember {
                group: "g".into(),
                member: "m1".into()
            },
            ExpiredMember {
                group: "g".into(),
                member: "m2".into()
            },
        ]
    );
    let d = f.coordinator.describe("g").await.unwrap();
    assert_eq!(d.state, GroupState::Empty);
    assert_eq!(
        d.generation,
        Generation::new(3),
        "two joins, then one rebalance"
    );
}

#[tokio::test]
async fn expiry_is_ordered_by_group_then_member_and_rebalances_only_losers() {
    let f = fixture();
    f.coordinator.join("b", "z", &["orders"]).await.unwrap();
    f.coordinator.join("b", "a", &["orders"]).await.unwrap();
    f.coordinator.join("a", "y", &["orders"]).await.unwrap();
    f.clock.set(50).unwrap();
    f.coordinator.join("c", "late", &["orders"]).await.unwrap();
    f.clock.set(120).unwrap();
    let expired: Vec<(String, String)> = f
        .coordinator
        .expire_members()
        .await
        .into_iter()
        .map(|e| (e.group, e.member))
        .collect();
    assert_eq!(
        expired,
        vec![
            ("a".into(), "y".into()),
            ("b".into(), "a".into()),
            ("b".into(), "z".into())
        ]
    );
    let c = f.coordinator.describe("c").await.unwrap();
    assert_eq!(
        c.generation,
        Generation::new(1),
        "a group that lost nobody does not rebalance"
    );
    assert_eq!(c.state, GroupState::Stable);
}

// ---------------------------------------------------------------- assignment & state

#[tokio::test]
async fn assignment_checks_group_then_member_then_state() {
    let f = fixture();
    assert_eq!(
        code(f.coordinator.assignment("g", "m1").await),
        "GROUP_ID_NOT_FOUND"
    );
    f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    assert_eq!(
        code(f.coordinator.assignment("g", "ghost").await),
        "UNKNOWN_MEMBER"
    );
    f.coordinator.leave("g", "m1").await.unwrap();
    assert_eq!(
        code(f.coordinator.assignment("g", "m1").await),
        "UNKNOWN_MEMBER"
    );
    assert_eq!(code(f.coordinator.state("").await), "INVALID_ARGUMENT");
}

// ---------------------------------------------------------------- commit

#[tokio::test]
async fn owner_commit_under_current_generation_lands() {
    let f = fixture();
    let a = f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    let o = offsets(&[("orders", 0, 5), ("orders", 3, 9)]);
    f.coordinator
        .commit("g", "m1", a.generation, &o)
        .await
        .unwrap();
    assert_eq!(
        f.coordinator
            .committed("g", &tp("orders", 3))
            .await
            .unwrap(),
        Some(9)
    );
    assert_eq!(f.coordinator.committed_offsets("g").await.unwrap(), o);
}

#[tokio::test]
async fn commit_checks_run_in_spec_order_and_write_nothing() {
    let f = fixture();
    let g1 = Generation::new(1);
    let o = offsets(&[("orders", 0, 5)]);
    assert_eq!(
        code(f.coordinator.commit("g", "m1", g1, &o).await),
        "GROUP_ID_NOT_FOUND"
    );
    f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    f.coordinator.join("g", "m2", &["orders"]).await.unwrap(); // generation 2
    let g2 = Generation::new(2);
    // stale generation + unknown member + foreign partition → generation first
    let foreign = offsets(&[("orders", 1, 5)]);
    assert_eq!(
        code(f.coordinator.commit("g", "ghost", g1, &foreign).await),
        "ILLEGAL_GENERATION"
    );
    // current generation + unknown member + foreign partition → member next
    assert_eq!(
        code(f.coordinator.commit("g", "ghost", g2, &foreign).await),
        "UNKNOWN_MEMBER"
    );
    // current generation, known member, foreign partition → ownership
    assert_eq!(
        code(f.coordinator.commit("g", "m1", g2, &foreign).await),
        "NOT_PARTITION_OWNER"
    );
    // owned partition, negative offset → invalid argument, still before the store
    let negative = offsets(&[("orders", 0, -1)]);
    assert_eq!(
        code(f.coordinator.commit("g", "m1", g2, &negative).await),
        "INVALID_ARGUMENT"
    );
    // empty group: the state check comes before the generation check
    f.coordinator.leave("g", "m1").await.unwrap();
    f.coordinator.leave("g", "m2").await.unwrap();
    assert_eq!(
        code(f.coordinator.commit("g", "m1", g1, &o).await),
        "REBALANCE_IN_PROGRESS"
    );
    assert!(
        f.store.calls(StoreOp::Commit) == 0,
        "no rejected commit reached the store"
    );
    assert_eq!(
        code(f.coordinator.commit("", "m1", g1, &o).await),
        "INVALID_ARGUMENT"
    );
    assert_eq!(
        code(f.coordinator.commit("g", "", g1, &o).await),
        "INVALID_ARGUMENT"
    );
}

#[tokio::test]
async fn exercise_4_not_owner_names_the_member_and_only_the_foreign_partitions() {
    let f = fixture();
    f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    let m2 = f.coordinator.join("g", "m2", &["orders"]).await.unwrap();
    // m1 owns orders-0 and orders-2; m2 owns orders-1 and orders-3.
    let mixed = offsets(&[("orders", 0, 1), ("orders", 1, 1), ("orders", 3, 1)]);
    let err = f
        .coordinator
        .commit("g", "m1", m2.generation, &mixed)
        .await
        .unwrap_err();
    match &err {
        Error::NotPartitionOwner {
            member, partitions, ..
        } => {
            assert_eq!(member, "m1");
            assert_eq!(partitions, &tps(&[("orders", 1), ("orders", 3)]));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("orders-1, orders-3"));
    // A partition of a topic nobody subscribes to, or one that does not exist, is not owned.
    let elsewhere = offsets(&[("payments", 0, 1), ("orders", 99, 1)]);
    assert_eq!(
        code(
            f.coordinator
                .commit("g", "m1", m2.generation, &elsewhere)
                .await
        ),
        "NOT_PARTITION_OWNER"
    );
    assert!(f.store.calls(StoreOp::Commit) == 0);
}

#[tokio::test]
async fn exercise_2_stale_commit_fails_until_refresh() {
    let f = fixture();
    let first = f
        .coordinator
        .join("workers", "member-1", &["orders"])
        .await
        .unwrap();
    f.coordinator
        .join("workers", "member-2", &["orders"])
        .await
        .unwrap();
    // member-1 still believes in generation 1 and all four partitions.
    let positions = offsets(&[
        ("orders", 0, 3),
        ("orders", 1, 3),
        ("orders", 2, 3),
        ("orders", 3, 3),
    ]);
    let stale = f
        .coordinator
        .commit("workers", "member-1", first.generation, &positions)
        .await;
    assert_eq!(code(stale), "ILLEGAL_GENERATION");
    // Refresh: current generation and the member's own partitions only.
    let refreshed = f
        .coordinator
        .assignment("workers", "member-1")
        .await
        .unwrap();
    let own: coordinator_core::OffsetMap = refreshed
        .partitions
        .iter()
        .map(|tp| (tp.clone(), 3))
        .collect();
    f.coordinator
        .commit("workers", "member-1", refreshed.generation, &own)
        .await
        .unwrap();
    assert_eq!(
        f.coordinator.committed_offsets("workers").await.unwrap(),
        own
    );
}

#[tokio::test]
async fn empty_commit_passes_checks_without_writing() {
    let f = fixture();
    let a = f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    f.coordinator
        .commit("g", "m1", a.generation, &Default::default())
        .await
        .unwrap();
    assert!(f.store.calls(StoreOp::Commit) == 0);
}

#[tokio::test]
async fn store_failure_is_a_storage_error_and_changes_nothing() {
    let f = fixture();
    let a = f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
    f.store.fail(
        StoreOp::Commit,
        StorageErrorKind::Io,
        "disk on fire: /dev/null",
    );
    let before = f.coordinator.describe("g").await.unwrap();
    let err = f
        .coordinator
        .commit("g", "m1", a.generation, &offsets(&[("orders", 0, 1)]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "STORAGE_ERROR");
    assert_eq!(err.kafka_code(), Some(56));
    assert_eq!(f.coordinator.describe("g").await.unwrap(), before);
    assert!(f
        .coordinator
        .committed_offsets("g")
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn direct_commits_skip_fencing() {
    let f = fixture();
    let o = offsets(&[("orders", 2, 11)]);
    f.coordinator.commit_direct("manual", &o).await.unwrap();
    assert_eq!(
        f.coordinator
            .committed("manual", &tp("orders", 2))
            .await
            .unwrap(),
        Some(11)
    );
    assert_eq!(
        code(
            f.coordinator
                .commit_direct("manual", &offsets(&[("orders", 2, -3)]))
                .await
        ),
        "INVALID_ARGUMENT"
    );
    assert_eq!(
        code(f.coordinator.commit_direct("", &o).await),
        "INVALID_ARGUMENT"
    );
}

// ---------------------------------------------------------------- metadata changes

#[tokio::test]
async fn metadata_changes_apply_at_the_next_rebalance() {
    let f = fixture();
    f.coordinator
        .join("g", "m1", &["orders", "payments"])
        .await
        .unwrap();
    f.topics.set("orders", 6);
    f.topics.delete("payments");
    let a = f.coordinator.join("g", "m2", &["orders"]).await.unwrap();
    assert_eq!(
        a.partitions,
        tps(&[("orders", 1), ("orders", 3), ("orders", 5)])
    );
    let m1 = f.coordinator.assignment("g", "m1").await.unwrap();
    assert_eq!(
        m1.partitions,
        tps(&[("orders", 0), ("orders", 2), ("orders", 4)])
    );
    // The old owner's commit for a deleted topic's partition is not owned any more.
    assert_eq!(
        code(
            f.coordinator
                .commit("g", "m1", m1.generation, &offsets(&[("payments", 0, 1)]))
                .await
        ),
        "NOT_PARTITION_OWNER"
    );
}

// ---------------------------------------------------------------- assignor failures

struct Broken(&'static str);

impl Assignor for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    fn assign(&self, input: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
        match self.0 {
            "error" => Err(AssignError::new("no can do")),
            // gives every partition to the last member, subscribed or not
            _ => {
                let mut out = Assignment::new(input);
                let last = input.member_count() as u32 - 1;
                for t in 0..input.topics().len() as u32 {
                    out.topic_owners_mut(t).fill(last);
                }
                Ok(out)
            }
        }
    }
}

#[tokio::test]
async fn a_failing_or_lying_assignor_refuses_joins_but_not_removals() {
    for mode in ["error", "lie"] {
        let topics = Topics::with(&[("orders", 2), ("payments", 1)]);
        let coordinator = Coordinator::builder(
            Arc::new(TestStore::default()),
            topics,
            Arc::new(Broken(mode)),
        )
        .build()
        .unwrap();
        if mode == "lie" {
            // The lie (everything to the last member id) is harmless while that member
            // subscribes to every topic: c first, then a and b.
            coordinator
                .join("g", "c", &["orders", "payments"])
                .await
                .unwrap();
            coordinator.join("g", "a", &["payments"]).await.unwrap();
            coordinator.join("g", "b", &["orders"]).await.unwrap();
            let before = coordinator.describe("g").await.unwrap();
            // A join whose rebalance fails is undone: nothing changes.
            let err = coordinator.join("g", "d", &["orders"]).await.unwrap_err();
            assert_eq!(err.code(), "ASSIGNOR_FAILED");
            assert!(err.to_string().contains("does not subscribe"), "{err}");
            assert_eq!(coordinator.describe("g").await.unwrap(), before);
            // A removal never fails: without c the lie breaks the contract, so the
            // chapter's round-robin assigns the generation instead, and says so.
            let left = coordinator.leave("g", "c").await.unwrap();
            assert_eq!(left, Some(before.generation.next()));
            let after = coordinator.describe("g").await.unwrap();
            let ids: Vec<&str> = after.members.iter().map(|m| m.member.as_str()).collect();
            assert_eq!(ids, ["a", "b"], "c is gone");
            assert_eq!(after.strategy, None);
            let why = after.assignment_error.expect("the fallback is surfaced");
            assert!(why.contains("does not subscribe"), "{why}");
            assert_eq!(after.members[0].partitions, tps(&[("payments", 0)]));
            assert_eq!(
                after.members[1].partitions,
                tps(&[("orders", 0), ("orders", 1)])
            );
        } else {
            let err = coordinator.join("g", "a", &["orders"]).await.unwrap_err();
            assert_eq!(err.code(), "ASSIGNOR_FAILED");
            assert!(err.to_string().contains("no can do"));
            assert_eq!(code(coordinator.state("g").await), "GROUP_ID_NOT_FOUND");
        }
    }
}

/// Modulo assignment until told to fail, then an error on every call.
struct Switch {
    fail: std::sync::atomic::AtomicBool,
}

impl Assignor for Switch {
    fn name(&self) -> &str {
        "switch"
    }
    fn assign(&self, input: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(AssignError::new("switched off"));
        }
        ModuloAssignor::named("inner").assign(input)
    }
}

#[tokio::test]
async fn leave_and_expiry_remove_members_even_when_the_assignor_always_fails() {
    let clock = coordinator_core::ManualClock::new();
    let switch = Arc::new(Switch {
        fail: std::sync::atomic::AtomicBool::new(false),
    });
    let c = Coordinator::builder(
        Arc::new(TestStore::default()),
        Topics::with(&[("orders", 4)]),
        switch.clone(),
    )
    .clock(Arc::new(clock.clone()))
    .session_timeout_ms(100)
    .build()
    .unwrap();
    for m in ["m1", "m2", "m3"] {
        c.join("g", m, &["orders"]).await.unwrap();
    }
    switch.fail.store(true, Ordering::SeqCst);
    let before = c.describe("g").await.unwrap().generation;

    // A leave removes the member and makes a new generation, whatever the assignor says.
    assert_eq!(c.leave("g", "m1").await.unwrap(), Some(before.next()));
    let d = c.describe("g").await.unwrap();
    assert_eq!(
        d.members
            .iter()
            .map(|m| m.member.as_str())
            .collect::<Vec<_>>(),
        ["m2", "m3"]
    );
    assert!(
        d.assignment_error
            .as_deref()
            .unwrap_or("")
            .contains("switched off"),
        "{d:?}"
    );
    let owned: usize = d.members.iter().map(|m| m.partitions.len()).sum();
    assert_eq!(owned, 4, "the fallback assigns every partition");

    // Expiry too: m2 goes silent, m3 heartbeats.
    clock.advance(60);
    c.heartbeat("g", "m3", d.generation).await.unwrap();
    clock.advance(60);
    let expired = c.expire_members().await;
    assert_eq!(
        expired,
        [ExpiredMember {
            group: "g".into(),
            member: "m2".into()
        }]
    );
    let d2 = c.describe("g").await.unwrap();
    assert_eq!(d2.generation, d.generation.next());
    assert_eq!(d2.members.len(), 1);
    assert_eq!(d2.members[0].partitions.len(), 4);
    // Once the strategy works again, the next rebalance says so.
    switch.fail.store(false, Ordering::SeqCst);
    c.join("g", "m4", &["orders"]).await.unwrap();
    assert_eq!(c.describe("g").await.unwrap().assignment_error, None);
}

// ---------------------------------------------------------------- negotiation

fn negotiating() -> (Coordinator, Arc<ModuloAssignor>, Arc<ModuloAssignor>) {
    let a = ModuloAssignor::named("alpha");
    let b = ModuloAssignor::named("beta");
    let c = ModuloAssignor::named("gamma");
    let coordinator = Coordinator::builder(
        Arc::new(TestStore::default()),
        Topics::with(&[("orders", 4)]),
        a.clone(),
    )
    .assignor(b.clone())
    .assignor(c)
    .build()
    .unwrap();
    (coordinator, a, b)
}

#[tokio::test]
async fn the_group_uses_the_strategy_most_members_prefer_among_shared_ones() {
    let (c, _, _) = negotiating();
    c.join_with_strategies("g", "m1", &["orders"], &["beta", "alpha"])
        .await
        .unwrap();
    assert_eq!(
        c.describe("g").await.unwrap().strategy.as_deref(),
        Some("beta")
    );
    c.join_with_strategies("g", "m2", &["orders"], &["alpha", "beta"])
        .await
        .unwrap();
    // One vote each: the tie goes to the strategy registered first.
    assert_eq!(
        c.describe("g").await.unwrap().strategy.as_deref(),
        Some("alpha")
    );
    c.join_with_strategies("g", "m3", &["orders"], &["beta", "alpha", "gamma"])
        .await
        .unwrap();
    assert_eq!(
        c.describe("g").await.unwrap().strategy.as_deref(),
        Some("beta")
    );
    // Without m3's vote, the tie is back and goes to alpha.
    c.leave("g", "m3").await.unwrap();
    assert_eq!(
        c.describe("g").await.unwrap().strategy.as_deref(),
        Some("alpha")
    );
}

#[tokio::test]
async fn a_join_sharing_no_strategy_is_refused_and_changes_nothing() {
    let (c, _, _) = negotiating();
    c.join_with_strategies("g", "m1", &["orders"], &["alpha", "beta"])
        .await
        .unwrap();
    c.join_with_strategies("g", "m2", &["orders"], &["beta"])
        .await
        .unwrap();
    let err = c
        .join_with_strategies("g", "m3", &["orders"], &["alpha", "gamma"])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "INCONSISTENT_GROUP_PROTOCOL");
    assert_eq!(err.kafka_code(), Some(23));
    match &err {
        Error::InconsistentGroupProtocol {
            offered, shared, ..
        } => {
            assert_eq!(offered, &["alpha", "gamma"]);
            assert_eq!(shared, &["beta"]);
        }
        other => panic!("unexpected {other:?}"),
    }
    let d = c.describe("g").await.unwrap();
    assert_eq!(d.generation, Generation::new(2));
    assert_eq!(d.members.len(), 2);
    // m2 may re-join with another list: its own old list does not count against it.
    c.join_with_strategies("g", "m2", &["orders"], &["alpha"])
        .await
        .unwrap();
    assert_eq!(
        c.describe("g").await.unwrap().strategy.as_deref(),
        Some("alpha")
    );
    // After the narrowing member leaves, gamma-only is still refused by m1 … until m1 leaves.
    c.leave("g", "m1").await.unwrap();
    c.leave("g", "m2").await.unwrap();
    c.join_with_strategies("g", "m3", &["orders"], &["gamma"])
        .await
        .unwrap();
    assert_eq!(
        c.describe("g").await.unwrap().strategy.as_deref(),
        Some("gamma")
    );
}

#[tokio::test]
async fn default_members_use_the_first_registered_strategy() {
    let (c, alpha, beta) = negotiating();
    c.join("g", "m1", &["orders"]).await.unwrap();
    assert_eq!(alpha.calls.load(Ordering::SeqCst), 1);
    assert_eq!(beta.calls.load(Ordering::SeqCst), 0);
    let err = c
        .join_with_strategies("g", "m2", &["orders"], &["beta"])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "INCONSISTENT_GROUP_PROTOCOL");
    let unknown = c
        .join_with_strategies("g", "m2", &["orders"], &["delta"])
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), "INVALID_ARGUMENT");
    assert!(unknown.to_string().contains("delta"));
    let none: [&str; 0] = [];
    assert_eq!(
        code(c.join_with_strategies("g", "m2", &["orders"], &none).await),
        "INVALID_ARGUMENT"
    );
}

#[test]
fn builder_refuses_bad_settings() {
    let build = |timeout: u64, names: &[&'static str]| {
        let mut b = Coordinator::builder(
            Arc::new(TestStore::default()),
            Topics::with(&[]),
            ModuloAssignor::named(names[0]),
        )
        .session_timeout_ms(timeout);
        for n in &names[1..] {
            b = b.assignor(ModuloAssignor::named(n));
        }
        b.build()
    };
    assert_eq!(build(0, &["a"]).unwrap_err().code(), "INVALID_ARGUMENT");
    assert_eq!(
        build(10, &["a", "a"]).unwrap_err().code(),
        "INVALID_ARGUMENT"
    );
    assert_eq!(build(10, &[""]).unwrap_err().code(), "INVALID_ARGUMENT");
    assert!(build(10, &["a", "b"]).is_ok());
}

#[test]
fn coordinator_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Coordinator>();
}
