//! Brokers over one database (`store_postgres::cluster`) against a real server: one live
//! registration per node id, slots claimed by one live broker at a time at growing epochs,
//! and a deposed broker's writes refused inside their own transactions.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use crate::common::{bounded, server};
use coordinator_core::{
    Bytes, CommitFence, LogError, NewRecord, OffsetMap, OffsetStore, StorageErrorKind,
    TopicPartition,
};
use partition_log::PartitionLog;
use store_postgres::cluster::{group_slot, transaction_slot, Liveness, SLOTS};
use store_postgres::{Cluster, PostgresLog, PostgresStore};

fn offsets(offset: i64) -> OffsetMap {
    [(TopicPartition::new("orders", 0), offset)].into()
}

async fn cluster(url: &str, node: i32, session_ms: u64) -> Cluster {
    bounded(
        "connect",
        Cluster::connect(url, node, Duration::from_millis(session_ms)),
    )
    .await
    .expect("connect the cluster registration")
}

#[tokio::test]
async fn one_live_registration_per_node_id() {
    let Some(pg) = server().await else { return };
    let url = bounded("db", pg.create_database("register")).await.unwrap();
    let mut first = cluster(&url, 3, 60_000).await;
    let mut second = cluster(&url, 3, 60_000).await;
    assert_eq!(bounded("register", first.register()).await.unwrap(), None);
    let held = bounded("register", second.register())
        .await
        .unwrap()
        .expect("the node id is held");
    assert_eq!(held.node_id, 3);
    assert!(held.lease_left_ms > 50_000, "{held:?}");
    // Another node id registers beside it.
    let mut other = cluster(&url, 4, 60_000).await;
    assert_eq!(bounded("register", other.register()).await.unwrap(), None);
    // A clean stop frees the node id at once; the next process gets a new incarnation.
    bounded("deregister", first.deregister()).await.unwrap();
    assert_eq!(bounded("register", second.register()).await.unwrap(), None);
    assert_ne!(second.incarnation(), first.incarnation());
    assert_eq!(
        bounded("heartbeat", first.heartbeat(None)).await.unwrap(),
        Liveness::Deposed(
            "another process registered node 3 after this one's lease ran out".into()
        )
    );
}

#[tokio::test]
async fn a_deposed_broker_writes_nothing() {
    let Some(pg) = server().await else { return };
    let url = bounded("db", pg.create_database("fence")).await.unwrap();
    // Node 1 claims every slot; node 2 stands by while node 1's lease runs.
    let mut a = cluster(&url, 1, 1_500).await;
    assert_eq!(bounded("register", a.register()).await.unwrap(), None);
    let a_fence = bounded("claim", a.claim_all())
        .await
        .unwrap()
        .expect("free slots");
    let mut b = cluster(&url, 2, 1_500).await;
    assert_eq!(bounded("register", b.register()).await.unwrap(), None);
    let held = bounded("claim", b.claim_all()).await.unwrap().unwrap_err();
    assert_eq!(held.node_id, 1);
    let a_store = bounded("connect", PostgresStore::connect(&url, 2))
        .await
        .unwrap()
        .with_fence(a_fence.clone());
    bounded(
        "commit",
        a_store.commit("g", &offsets(5), CommitFence::none()),
    )
    .await
    .expect("the owner writes");
    let a_log = bounded("connect", PostgresLog::connect(&url, 2))
        .await
        .unwrap()
        .with_fence(a_fence.clone());
    bounded("create", a_log.create_topic("orders", 1))
        .await
        .unwrap();
    let orders = TopicPartition::new("orders", 0);
    async fn append(log: &PostgresLog, tp: &TopicPartition) -> Result<i64, LogError> {
        log.append_encoded(
            tp,
            vec![NewRecord::from("v")],
            Box::new(|_| Bytes::from(&b"batch"[..])),
        )
        .await
    }
    assert_eq!(bounded("append", append(&a_log, &orders)).await.unwrap(), 0);
    assert_eq!(
        bounded("heartbeat", a.heartbeat(Some(&a_fence)))
            .await
            .unwrap(),
        Liveness::Live
    );

    // Node 1 stops heartbeating (a paused process); node 2 heartbeats and, once node 1's
    // lease has run out, claims every slot at an epoch one higher.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let b_fence = loop {
        assert_eq!(
            bounded("heartbeat", b.heartbeat(None)).await.unwrap(),
            Liveness::Live
        );
        match bounded("claim", b.claim_all()).await.unwrap() {
            Ok(fence) => break fence,
            Err(holder) => {
                assert_eq!(holder.node_id, 1);
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "node 1's lease never ran out"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    let (g, t) = (group_slot("g"), transaction_slot("tx"));
    assert_eq!(b_fence.epoch(g), a_fence.epoch(g).map(|e| e + 1));
    assert_eq!(b_fence.epoch(t), a_fence.epoch(t).map(|e| e + 1));
    assert!((0..SLOTS).all(|s| b_fence.epoch(s).is_some()));

    // Node 1's next append and write are refused and change nothing; node 2's land.
    let refused = bounded("append", append(&a_log, &orders))
        .await
        .unwrap_err();
    assert_eq!(refused.kafka_code(), Some(56), "{refused}");
    assert!(
        refused.to_string().contains("another broker took it over"),
        "{refused}"
    );
    let b_log = bounded("connect", PostgresLog::connect(&url, 2))
        .await
        .unwrap()
        .with_fence(b_fence.clone());
    assert_eq!(
        bounded("bounds", b_log.bounds(&orders)).await.unwrap(),
        (0, 1)
    );
    assert_eq!(bounded("append", append(&b_log, &orders)).await.unwrap(), 1);
    let err = bounded(
        "commit",
        a_store.commit("g", &offsets(9), CommitFence::none()),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), StorageErrorKind::NotCoordinator, "{err}");
    assert!(
        err.to_string().contains("another broker took it over"),
        "{err}"
    );
    let b_store = bounded("connect", PostgresStore::connect(&url, 2))
        .await
        .unwrap()
        .with_fence(b_fence.clone());
    assert_eq!(
        bounded(
            "read",
            b_store.committed("g", &TopicPartition::new("orders", 0))
        )
        .await
        .unwrap(),
        Some(5)
    );
    bounded(
        "commit",
        b_store.commit("g", &offsets(7), CommitFence::none()),
    )
    .await
    .expect("the new owner writes");
    // Node 1 finds out at its next heartbeat (its registration is still its own).
    match bounded("heartbeat", a.heartbeat(Some(&a_fence)))
        .await
        .unwrap()
    {
        Liveness::Deposed(why) => assert!(why.contains("took over 100 of"), "{why}"),
        Liveness::Live => panic!("node 1 was deposed"),
    }
    // A store without a fence (a single broker of before) is not checked.
    let unfenced = bounded("connect", PostgresStore::connect(&url, 1))
        .await
        .unwrap();
    assert_eq!(
        bounded(
            "read",
            unfenced.committed("g", &TopicPartition::new("orders", 0))
        )
        .await
        .unwrap(),
        Some(7)
    );
}

/// Every slot of each kind is owned by one live broker, and no slot by two.
fn assert_shared_out(fences: &[&store_postgres::SlotFence]) -> Vec<Vec<i32>> {
    let owned: Vec<Vec<i32>> = fences.iter().map(|f| f.owned()).collect();
    for slot in 0..SLOTS {
        let owners = owned.iter().filter(|o| o.contains(&slot)).count();
        assert_eq!(owners, 1, "slot {slot} has {owners} owners: {owned:?}");
    }
    owned
}

#[tokio::test]
async fn slots_are_shared_out_and_a_dead_brokers_move_to_the_live_ones() {
    let Some(pg) = server().await else { return };
    let url = bounded("db", pg.create_database("balance")).await.unwrap();
    let mut nodes = Vec::new();
    let mut fences = Vec::new();
    for node in 1..=3 {
        let mut c = cluster(&url, node, 1_500).await;
        assert_eq!(bounded("register", c.register()).await.unwrap(), None);
        fences.push(c.empty_fence().unwrap());
        nodes.push(c);
    }
    // All three are live, so each takes its fair share
    // (17 of each kind's 50) of the free slots; the last one finds 16 of each left.
    let mut gained = Vec::new();
    for (c, f) in nodes.iter().zip(&fences) {
        let b = bounded("balance", c.balance(f)).await.unwrap();
        assert_eq!(b.liveness, Liveness::Live);
        assert!(b.lost.is_empty(), "{b:?}");
        assert_eq!(b.gained, f.owned());
        gained.push(b.gained.len());
    }
    assert_eq!(gained, vec![34, 34, 32]);
    let owned = assert_shared_out(&fences.iter().collect::<Vec<_>>());
    // A balanced cluster moves nothing, and every broker sees the same owners.
    let mut views = Vec::new();
    for (c, f) in nodes.iter().zip(&fences) {
        let b = bounded("balance", c.balance(f)).await.unwrap();
        assert!(b.gained.is_empty() && b.lost.is_empty(), "{b:?}");
        assert_eq!(b.view.brokers.len(), 3);
        views.push(b.view);
    }
    assert!(views.windows(2).all(|w| w[0].owners == w[1].owners));
    for (i, mine) in owned.iter().enumerate() {
        for &slot in mine {
            assert_eq!(views[0].owner(slot), Some(i32::try_from(i).unwrap() + 1));
        }
    }
    let b = bounded("balance", nodes[0].balance(&fences[0]))
        .await
        .unwrap();
    let left = b.next_expiry.expect("the others own slots under a lease");
    assert!(left <= Duration::from_millis(1_500), "{left:?}");

    // Node 3 stops heartbeating. Its slots stay its own while its lease runs; once it has
    // run out, the two live brokers take them over (25 of each kind each, at new epochs)
    // and node 3's writes are refused.
    let store3 = bounded("connect", PostgresStore::connect(&url, 2))
        .await
        .unwrap()
        .with_fence(fences[2].clone());
    let g3 = *owned[2]
        .iter()
        .find(|&&s| s < store_postgres::cluster::GROUP_SLOTS)
        .unwrap();
    let group = (0..10_000)
        .map(|i| format!("g{i}"))
        .find(|g| group_slot(g) == g3)
        .unwrap();
    bounded(
        "commit",
        store3.commit(&group, &offsets(1), CommitFence::none()),
    )
    .await
    .expect("node 3 owns the group's slot");
    let epoch3 = fences[2].epoch(g3).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let mut gained = 0;
        for (c, f) in nodes[..2].iter().zip(&fences) {
            gained += bounded("balance", c.balance(f)).await.unwrap().gained.len();
        }
        if fences[..2].iter().all(|f| f.owned().len() == 50) {
            break;
        }
        assert!(
            gained == 0 || fences[0].owned().len() + fences[1].owned().len() <= 100,
            "over-claimed"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "node 3's slots never moved"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_shared_out(&[&fences[0], &fences[1]]);
    let new_owner = if fences[0].epoch(g3).is_some() { 0 } else { 1 };
    assert_eq!(fences[new_owner].epoch(g3), Some(epoch3 + 1));
    let err = bounded(
        "commit",
        store3.commit(&group, &offsets(2), CommitFence::none()),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), StorageErrorKind::NotCoordinator, "{err}");

    // Node 3 comes back: it learns it lost every slot it had (none is its own any more),
    // and takes its share again only as the others release their excess.
    let before = fences[2].owned();
    let b = bounded("balance", nodes[2].balance(&fences[2]))
        .await
        .unwrap();
    assert_eq!(b.liveness, Liveness::Live);
    assert_eq!(b.lost, before);
    assert!(b.gained.is_empty() && fences[2].owned().is_empty(), "{b:?}");
    for _ in 0..2 {
        for (c, f) in nodes.iter().zip(&fences) {
            bounded("balance", c.balance(f)).await.unwrap();
        }
    }
    let owned = assert_shared_out(&fences.iter().collect::<Vec<_>>());
    assert!(
        owned.iter().all(|o| (32..=34).contains(&o.len())),
        "{owned:?}"
    );

    // A clean stop frees the node id: a balance of the stopped process is deposed.
    bounded("deregister", nodes[2].deregister()).await.unwrap();
    let b = bounded("balance", nodes[2].balance(&fences[2]))
        .await
        .unwrap();
    assert!(matches!(b.liveness, Liveness::Deposed(_)), "{b:?}");
    assert!(fences[2].owned().is_empty());
}
