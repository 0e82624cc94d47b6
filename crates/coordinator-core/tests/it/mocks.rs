//! Interaction tests with mockall mocks of the ports (feature `mocks`): which port is called,
//! how often, and never when a request is fenced.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use coordinator_core::mocks::{MockAssignor, MockClock, MockOffsetStore, MockTopicMetadata};
use coordinator_core::{
    Assignment, Coordinator, Generation, GroupState, ManualClock, StorageError, StorageErrorKind,
};

fn orders_metadata() -> Arc<Topics> {
    Topics::with(&[("orders", 4)])
}

/// A coordinator over the mocked store: topic `orders` (4 partitions), a manual clock.
fn over(store: MockOffsetStore) -> Coordinator {
    Coordinator::builder(
        Arc::new(store),
        orders_metadata(),
        ModuloAssignor::named("m"),
    )
    .clock(Arc::new(ManualClock::new()))
    .build()
    .unwrap()
}

#[tokio::test]
async fn fenced_commits_never_reach_the_store() {
    let mut store = MockOffsetStore::new();
    store.expect_commit().never();
    store.expect_delete().never();
    let c = over(store);
    let first = c.join("g", "m1", &["orders"]).await.unwrap();
    let second = c.join("g", "m2", &["orders"]).await.unwrap();
    let own = offsets(&[("orders", 0, 1)]);
    let cases = [
        (
            "m1",
            first.generation,
            offsets(&[("orders", 0, 1)]),
            "ILLEGAL_GENERATION",
        ),
        (
            "m1",
            second.generation,
            offsets(&[("orders", 1, 1)]),
            "NOT_PARTITION_OWNER",
        ),
        ("ghost", second.generation, own.clone(), "UNKNOWN_MEMBER"),
    ];
    for (member, generation, o, expected) in cases {
        let err = c.commit("g", member, generation, &o).await.unwrap_err();
        assert_eq!(err.code(), expected);
    }
    c.leave("g", "m1").await.unwrap();
    c.leave("g", "m2").await.unwrap();
    let err = c
        .commit("g", "m1", Generation::new(4), &own)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "REBALANCE_IN_PROGRESS");
    // MockOffsetStore panics on drop if `commit` was called.
}

#[tokio::test]
async fn an_accepted_commit_calls_the_store_once_with_the_request() {
    let mut store = MockOffsetStore::new();
    store
        .expect_commit()
        .withf(|group, offsets, fence| {
            // The coordinator hands the store its hold on the group, not an empty fence.
            group == "g" && *offsets == offsets_of(&[("orders", 2, 7)]) && fence.is_held()
        })
        .times(1)
        .returning(|_, _, _| Ok(()));
    let c = over(store);
    let a = c.join("g", "m1", &["orders"]).await.unwrap();
    c.commit("g", "m1", a.generation, &offsets(&[("orders", 2, 7)]))
        .await
        .unwrap();
}

fn offsets_of(entries: &[(&str, u32, i64)]) -> coordinator_core::OffsetMap {
    offsets(entries)
}

#[tokio::test]
async fn a_store_failure_surfaces_as_storage_error_and_leaves_the_group_unchanged() {
    let mut store = MockOffsetStore::new();
    store.expect_commit().times(1).returning(|_, _, _| {
        Err(StorageError::new(
            StorageErrorKind::Io,
            "fsync of /data/offsets.json.tmp failed",
        ))
    });
    store.expect_list().returning(|_| Ok(BTreeMap::new()));
    let c = over(store);
    let a = c.join("g", "m1", &["orders"]).await.unwrap();
    let before = c.describe("g").await.unwrap();
    let err = c
        .commit("g", "m1", a.generation, &offsets(&[("orders", 0, 3)]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "STORAGE_ERROR");
    assert!(err.to_string().contains("/data/offsets.json.tmp"));
    assert_eq!(c.describe("g").await.unwrap(), before);
    assert_eq!(c.state("g").await.unwrap(), GroupState::Stable);
    assert!(c.committed_offsets("g").await.unwrap().is_empty());
}

#[tokio::test]
async fn a_mocked_clock_drives_expiry() {
    // The clock answers 0 for both joins, then 100 (alive at the deadline), then 101.
    let now = Arc::new(AtomicU64::new(0));
    let mut clock = MockClock::new();
    let reading = now.clone();
    clock
        .expect_now_ms()
        .returning(move || reading.load(Ordering::SeqCst));
    let c = Coordinator::builder(
        Arc::new(TestStore::default()),
        orders_metadata(),
        ModuloAssignor::named("m"),
    )
    .clock(Arc::new(clock))
    .session_timeout_ms(100)
    .build()
    .unwrap();
    c.join("g", "m1", &["orders"]).await.unwrap();
    c.join("g", "m2", &["orders"]).await.unwrap();
    now.store(100, Ordering::SeqCst);
    assert!(c.expire_members().await.is_empty());
    now.store(101, Ordering::SeqCst);
    assert_eq!(c.expire_members().await.len(), 2);
    assert_eq!(c.state("g").await.unwrap(), GroupState::Empty);
}

#[tokio::test]
async fn the_assignor_is_called_once_per_rebalance_with_the_previous_assignment() {
    let calls = Arc::new(AtomicU64::new(0));
    let seen = calls.clone();
    let mut assignor = MockAssignor::new();
    assignor.expect_name().return_const("mock".to_string());
    assignor.expect_assign().times(3).returning(move |input| {
        let call = seen.fetch_add(1, Ordering::SeqCst) + 1;
        // Member 0 is always m1 here; it owned everything in the previous generation.
        assert_eq!(&*input.member_ids()[0], "m1");
        let owned = input.owned(0).len();
        assert_eq!(owned, if call == 1 { 0 } else { 4 }, "call {call}");
        let mut out = Assignment::new(input);
        out.topic_owners_mut(0).fill(0);
        Ok(out)
    });
    let c = Coordinator::builder(
        Arc::new(TestStore::default()),
        orders_metadata(),
        Arc::new(assignor),
    )
    .build()
    .unwrap();
    c.join("g", "m1", &["orders"]).await.unwrap();
    c.join("g", "m2", &["orders"]).await.unwrap();
    c.leave("g", "m2").await.unwrap();
    // The last leave empties the group: no assignment to compute.
    c.leave("g", "m1").await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn join_asks_the_metadata_port_about_each_subscribed_topic() {
    let mut metadata = MockTopicMetadata::new();
    metadata
        .expect_partition_count()
        .returning(|topic| (topic == "orders").then_some(2));
    let c = Coordinator::builder(
        Arc::new(TestStore::default()),
        Arc::new(metadata),
        ModuloAssignor::named("m"),
    )
    .build()
    .unwrap();
    let err = c.join("g", "m1", &["orders", "ghost"]).await.unwrap_err();
    assert_eq!(err.code(), "UNKNOWN_TOPIC");
    let a = c.join("g", "m1", &["orders"]).await.unwrap();
    assert_eq!(a.partitions, tps(&[("orders", 0), ("orders", 1)]));
}
