//! The chapter's consumer semantics, end to end through the cluster facade: real assignor,
//! JSON offset store in a temporary directory, in-memory log, manual clock. No test sleeps.

use crate::common;

use common::{at, offsets, tp, TestCluster, SESSION_TIMEOUT_MS};
use consumer::AutoOffsetReset::{self, Earliest, Latest};
use coordinator_core::OffsetMap;

/// "A crash after processing but before commit replays records."
#[tokio::test]
async fn process_then_crash_before_commit_replays() {
    let t = TestCluster::new();
    t.topic("orders", 1, 5);
    let mut first = t.consumer(Earliest);
    first.subscribe(&["orders"]).await.unwrap();
    let processed = offsets(&first.poll(3).await.unwrap());
    assert_eq!(processed, [0, 1, 2]);
    drop(first); // crash: processed, never committed

    t.clock.advance(SESSION_TIMEOUT_MS + 1);
    assert_eq!(t.cluster.expire_group_members().await.len(), 1);
    let mut second = t.consumer(Earliest);
    second.subscribe(&["orders"]).await.unwrap();
    let again = offsets(&second.poll(3).await.unwrap());
    assert_eq!(again, processed, "the same records are delivered again");
}

/// "A commit before processing can skip them."
#[tokio::test]
async fn commit_then_crash_before_processing_skips() {
    let t = TestCluster::new();
    t.topic("orders", 1, 5);
    let mut first = t.consumer(Earliest);
    first.subscribe(&["orders"]).await.unwrap();
    let fetched = offsets(&first.poll(3).await.unwrap());
    first.commit().await.unwrap();
    drop(first); // crash: committed, never processed `fetched`

    t.clock.advance(SESSION_TIMEOUT_MS + 1);
    t.cluster.expire_group_members().await;
    let mut second = t.consumer(Earliest);
    second.subscribe(&["orders"]).await.unwrap();
    let delivered = offsets(&second.poll(10).await.unwrap());
    assert_eq!(delivered, [3, 4]);
    assert!(
        fetched.iter().all(|o| !delivered.contains(o)),
        "offsets {fetched:?} are never processed by anyone"
    );
}

#[tokio::test]
async fn position_and_committed_offset_move_independently() {
    let t = TestCluster::new();
    t.topic("orders", 1, 10);
    let p0 = tp("orders", 0);
    let mut c = t.consumer(Earliest);
    c.subscribe(&["orders"]).await.unwrap();

    c.poll(4).await.unwrap();
    assert_eq!(
        (c.position(&p0).unwrap(), c.committed(&p0).await.unwrap()),
        (4, None)
    );

    c.commit().await.unwrap();
    assert_eq!(
        (c.position(&p0).unwrap(), c.committed(&p0).await.unwrap()),
        (4, Some(4))
    );

    c.poll(3).await.unwrap();
    assert_eq!(
        (c.position(&p0).unwrap(), c.committed(&p0).await.unwrap()),
        (7, Some(4))
    );

    c.seek(&p0, 1).unwrap();
    assert_eq!(
        (c.position(&p0).unwrap(), c.committed(&p0).await.unwrap()),
        (1, Some(4))
    );
    assert_eq!(
        offsets(&c.poll(2).await.unwrap()),
        [1, 2],
        "the position is what poll reads"
    );
    assert_eq!(c.committed(&p0).await.unwrap(), Some(4));
}

#[tokio::test]
async fn latest_starts_at_the_log_end() {
    let t = TestCluster::new();
    t.topic("orders", 1, 5);
    let mut c = t.consumer(Latest);
    c.subscribe(&["orders"]).await.unwrap();
    assert!(
        c.poll(10).await.unwrap().is_empty(),
        "nothing old is delivered"
    );
    assert_eq!(c.position(&tp("orders", 0)).unwrap(), 5);
    assert_eq!(c.lag(&tp("orders", 0)).await.unwrap(), 0);
    t.cluster.append("orders", 0, "new").unwrap();
    assert_eq!(c.lag(&tp("orders", 0)).await.unwrap(), 1);
    assert_eq!(offsets(&c.poll(10).await.unwrap()), [5]);
}

#[tokio::test]
async fn a_committed_offset_wins_over_the_reset_policy() {
    let t = TestCluster::new();
    t.topic("orders", 1, 5);
    t.cluster
        .coordinator()
        .commit_direct("workers", &OffsetMap::from([(tp("orders", 0), 2)]))
        .await
        .unwrap();
    for policy in AutoOffsetReset::ALL {
        let mut c = t.consumer(policy);
        c.assign([tp("orders", 0)]).await.unwrap();
        assert_eq!(offsets(&c.poll(10).await.unwrap()), [2, 3, 4], "{policy}");
    }
}

#[tokio::test]
async fn out_of_range_positions_reset_per_policy_and_error_propagates() {
    let t = TestCluster::new();
    t.topic("orders", 1, 10);
    let p0 = tp("orders", 0);
    t.cluster.log().advance_log_start(&p0, 5).unwrap(); // retention removes 0..=4

    let mut earliest = t.consumer(Earliest);
    earliest.assign([p0.clone()]).await.unwrap();
    earliest.seek(&p0, 1).unwrap();
    assert_eq!(offsets(&earliest.poll(2).await.unwrap()), [5, 6]);

    let mut latest = t.consumer(Latest);
    latest.assign([p0.clone()]).await.unwrap();
    latest.seek(&p0, 42).unwrap();
    assert!(latest.poll(2).await.unwrap().is_empty());
    assert_eq!(latest.position(&p0).unwrap(), 10);

    let mut strict = t.consumer(AutoOffsetReset::Error);
    strict.assign([p0.clone()]).await.unwrap();
    let err = strict.poll(2).await.unwrap_err();
    assert_eq!(
        err.code(),
        "OFFSET_OUT_OF_RANGE",
        "no committed offset: {err}"
    );
    strict.seek(&p0, 2).unwrap();
    let err = strict.poll(2).await.unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_code()),
        ("OFFSET_OUT_OF_RANGE", Some(1))
    );
    assert!(
        err.to_string().contains("valid positions are 5..=10"),
        "{err}"
    );
    assert_eq!(strict.position(&p0).unwrap(), 2, "nothing moved");
}

#[tokio::test]
async fn two_consumers_own_disjoint_partitions_after_refresh() {
    let t = TestCluster::new();
    t.topic("orders", 4, 0);
    let mut a = t.consumer(Earliest);
    let mut b = t.consumer(Earliest);
    a.subscribe(&["orders"]).await.unwrap();
    b.subscribe(&["orders"]).await.unwrap();
    assert_eq!(
        a.assignment().len(),
        4,
        "before refresh, a's view overlaps b's"
    );
    a.refresh_assignment().await.unwrap();
    b.refresh_assignment().await.unwrap();
    let mut all: Vec<_> = a.assignment().to_vec();
    all.extend_from_slice(b.assignment());
    all.sort();
    let len = all.len();
    all.dedup();
    assert_eq!(len, all.len(), "no partition has two owners");
    assert_eq!(all.len(), 4, "every partition has an owner");
    assert_eq!(a.generation(), b.generation());
}

#[tokio::test]
async fn at_most_one_owner_per_partition_for_any_group_size() {
    for members in 1..=5usize {
        let t = TestCluster::new();
        t.topic("orders", 7, 0);
        t.topic("payments", 3, 0);
        let mut consumers = Vec::new();
        for i in 0..members {
            let mut c = t.consumer(Earliest);
            let topics: &[&str] = if i % 2 == 0 {
                &["orders", "payments"]
            } else {
                &["orders"]
            };
            c.subscribe(topics).await.unwrap();
            consumers.push(c);
        }
        let mut owned = Vec::new();
        for c in &mut consumers {
            c.refresh_assignment().await.unwrap();
            owned.extend_from_slice(c.assignment());
        }
        owned.sort();
        let total = owned.len();
        owned.dedup();
        assert_eq!((total, owned.len()), (10, 10), "{members} members");
    }
}

#[tokio::test]
async fn a_stale_commit_is_fenced_before_refresh_and_lands_after() {
    let t = TestCluster::new();
    t.topic("orders", 2, 3);
    let mut a = t.consumer(Earliest);
    a.subscribe(&["orders"]).await.unwrap();
    a.poll(10).await.unwrap();
    let mut b = t.consumer(Earliest);
    b.subscribe(&["orders"]).await.unwrap();

    let err = a.commit().await.unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_code()),
        ("ILLEGAL_GENERATION", Some(22))
    );
    assert!(err.is_fenced());
    let coordinator = t.cluster.coordinator();
    assert!(coordinator
        .committed_offsets("workers")
        .await
        .unwrap()
        .is_empty());

    a.refresh_assignment().await.unwrap();
    let committed = a.commit().await.unwrap();
    assert_eq!(committed, OffsetMap::from([(tp("orders", 0), 3)]));
    assert_eq!(
        coordinator.committed_offsets("workers").await.unwrap(),
        committed
    );
}

/// A position made before someone else owned the partition must not survive: the other
/// owner may have committed past it, and committing it would move the group backwards.
#[tokio::test]
async fn a_stale_position_never_moves_the_committed_offset_backwards() {
    let t = TestCluster::new();
    t.topic("orders", 2, 60);
    let orders1 = tp("orders", 1);
    // A (member-1) owns both partitions and reads orders-1 up to position 10.
    let mut a = t.consumer(Earliest);
    a.subscribe(&["orders"]).await.unwrap();
    a.seek(&orders1, 10).unwrap();
    assert_eq!(a.position(&orders1).unwrap(), 10);
    // B (member-2) joins and gets orders-1; A does not refresh. B reads and commits 50.
    let mut b = t.consumer(Earliest);
    b.subscribe(&["orders"]).await.unwrap();
    assert_eq!(b.assignment(), std::slice::from_ref(&orders1));
    b.seek(&orders1, 50).unwrap();
    b.commit().await.unwrap();
    // B leaves: orders-1 goes back to A, which refreshes only now.
    b.close().await.unwrap();
    a.refresh_assignment().await.unwrap();
    assert!(a.assignment().contains(&orders1));
    assert_eq!(
        a.position(&orders1).unwrap_err().code(),
        "NO_POSITION",
        "the position from before B owned the partition is gone"
    );
    let polled = a.poll(100).await.unwrap();
    let first = polled
        .iter()
        .find(|r| r.partition == 1)
        .expect("orders-1 has records from 50 on");
    assert_eq!(first.offset, 50, "A restarts from the committed offset");
    let committed = a.commit().await.unwrap();
    assert_eq!(committed[&orders1], 60);
}

/// After exactly one rebalance that left a partition with its member, the position stays
/// (the chapter's exercise 2).
#[tokio::test]
async fn a_position_survives_a_rebalance_that_left_the_partition_with_its_member() {
    let t = TestCluster::new();
    t.topic("orders", 2, 20);
    let orders0 = tp("orders", 0);
    let mut a = t.consumer(Earliest);
    a.subscribe(&["orders"]).await.unwrap();
    a.seek(&orders0, 7).unwrap();
    let mut b = t.consumer(Earliest);
    b.subscribe(&["orders"]).await.unwrap();
    a.refresh_assignment().await.unwrap();
    assert_eq!(a.assignment(), std::slice::from_ref(&orders0));
    assert_eq!(a.position(&orders0).unwrap(), 7);
}

/// docs/rules.md#exercise-4: a current-generation member cannot commit another member's partition.
#[tokio::test]
async fn a_current_member_cannot_commit_another_members_partition() {
    let t = TestCluster::new();
    t.topic("orders", 2, 0);
    let mut a = t.consumer(Earliest);
    let mut b = t.consumer(Earliest);
    a.subscribe(&["orders"]).await.unwrap();
    b.subscribe(&["orders"]).await.unwrap();
    a.refresh_assignment().await.unwrap();
    let generation = a.generation().unwrap();
    let theirs = OffsetMap::from([(b.assignment()[0].clone(), 1)]);
    let err = t
        .cluster
        .coordinator()
        .commit("workers", a.member_id(), generation, &theirs)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "NOT_PARTITION_OWNER");
}

#[tokio::test]
async fn poll_is_fair_across_partitions() {
    let t = TestCluster::new();
    t.topic("orders", 2, 3);
    let mut c = t.consumer(Earliest);
    c.subscribe(&["orders"]).await.unwrap();
    let first = at(&c.poll(1).await.unwrap());
    let second = at(&c.poll(1).await.unwrap());
    assert_eq!([first, second], [vec![(0, 0)], vec![(1, 0)]]);
    let mut rest = Vec::new();
    for _ in 0..4 {
        rest.extend(at(&c.poll(1).await.unwrap()));
    }
    assert_eq!(rest, [(0, 1), (1, 1), (0, 2), (1, 2)]);
    assert!(c.poll(1).await.unwrap().is_empty());
}

#[tokio::test]
async fn heartbeats_keep_a_member_alive_and_expiry_is_strict() {
    let t = TestCluster::new();
    t.topic("orders", 1, 0);
    let mut c = t.consumer(Earliest);
    c.subscribe(&["orders"]).await.unwrap();
    t.clock.advance(60);
    c.heartbeat().await.unwrap(); // deadline 160
    t.clock.set(160).unwrap();
    assert!(t.cluster.expire_group_members().await.is_empty());
    t.clock.advance(1);
    let gone = t.cluster.expire_group_members().await;
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].member, "member-1");
    assert_eq!(
        c.refresh_assignment().await.unwrap_err().code(),
        "UNKNOWN_MEMBER"
    );
}
