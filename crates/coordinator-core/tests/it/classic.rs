//! Kafka's classic group protocol in the core: one test per rule of the contract (named
//! after it), then scenarios in the shape real clients drive them. Time is a `ManualClock`;
//! timers run when a test calls `handle_timeout`. No sleeps.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::sync::Arc;

use common::{StoreOp, TestStore, Topics};
use coordinator_core::{
    with_no_metadata, ClassicProtocol, CommitAuthority, Coordinator, Error, Generation, GroupKind,
    GroupState, JoinGroupRequest, JoinGroupResponse, LeavingMember, ManualClock,
    OffsetCommitRequest, OffsetMap, SequentialMemberIds, SyncAssignment, SyncGroupRequest,
    SyncGroupResponse, TopicPartition,
};
use tokio::task::JoinHandle;

const SESSION: i32 = 10_000;
const REBALANCE: i32 = 30_000;

struct H {
    c: Arc<Coordinator>,
    clock: ManualClock,
    store: Arc<TestStore>,
}

fn harness() -> H {
    harness_with(|b| b)
}

fn harness_with(
    configure: impl FnOnce(coordinator_core::CoordinatorBuilder) -> coordinator_core::CoordinatorBuilder,
) -> H {
    let clock = ManualClock::new();
    // A store that keeps group records, as the broker's (memory and log) do: a leader's
    // assignment is installed once the group's record is written.
    let store = Arc::new(TestStore::new(common::MapStore::keeping_groups()));
    let builder = Coordinator::builder(
        store.clone(),
        Topics::with(&[("orders", 4)]),
        common::ModuloAssignor::named("modulo"),
    )
    .clock(Arc::new(clock.clone()))
    .member_ids(Arc::new(SequentialMemberIds::new()))
    .group_min_session_timeout_ms(100)
    .group_max_session_timeout_ms(60_000)
    .group_initial_rebalance_delay_ms(0);
    let c = Arc::new(configure(builder).build().unwrap());
    H { c, clock, store }
}

fn protocol(name: &str, client: &str) -> ClassicProtocol {
    ClassicProtocol::new(name, format!("{name}:{client}").into_bytes()).with_topics(["orders"])
}

fn join_req(group: &str, member: &str, client: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: group.into(),
        member_id: member.into(),
        group_instance_id: None,
        client_id: client.into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: REBALANCE,
        protocol_type: "consumer".into(),
        protocols: vec![protocol("range", client)],
        require_known_member_id: true,
        supports_skip_assignment: false,
        reason: None,
    }
}

fn static_req(group: &str, instance: &str, client: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        group_instance_id: Some(instance.into()),
        ..join_req(group, "", client)
    }
}

fn sync_req(group: &str, member: &str, generation: Generation) -> SyncGroupRequest {
    SyncGroupRequest {
        group_id: group.into(),
        generation: Some(generation),
        member_id: member.into(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments: Vec::new(),
    }
}

fn assignment(member: &str, partitions: &[u32]) -> SyncAssignment {
    SyncAssignment {
        member_id: member.into(),
        assignment: format!("{member}:{partitions:?}").into_bytes().into(),
        partitions: Some(
            partitions
                .iter()
                .map(|&p| TopicPartition::new("orders", p))
                .collect(),
        ),
    }
}

fn commit_req(
    group: &str,
    member: &str,
    generation: Option<Generation>,
    offset: i64,
) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: group.into(),
        authority: CommitAuthority::generation(generation, member, None),
        offsets: with_no_metadata(&OffsetMap::from([(
            TopicPartition::new("orders", 0),
            offset,
        )])),
    }
}

fn code<T: std::fmt::Debug>(r: Result<T, Error>) -> &'static str {
    r.expect_err("expected an error").code()
}

/// Lets spawned requests run until they park or finish.
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

impl H {
    fn spawn_join(&self, req: JoinGroupRequest) -> JoinHandle<Result<JoinGroupResponse, Error>> {
        let c = self.c.clone();
        tokio::spawn(async move { c.classic().join(req).await })
    }

    fn spawn_sync(&self, req: SyncGroupRequest) -> JoinHandle<Result<SyncGroupResponse, Error>> {
        let c = self.c.clone();
        tokio::spawn(async move { c.classic().sync(req).await })
    }

    /// Advances the clock and runs whatever is due.
    async fn tick(&self, ms: u64) -> Vec<coordinator_core::ExpiredMember> {
        settle().await;
        self.clock.advance(ms);
        let expired = self.c.handle_timeout().await;
        settle().await;
        expired
    }

    /// A new member's id, through the MEMBER_ID_REQUIRED round trip.
    async fn member_id(&self, group: &str, client: &str) -> String {
        match self.c.classic().join(join_req(group, "", client)).await {
            Err(Error::MemberIdRequired { member_id, .. }) => member_id,
            other => panic!("expected MEMBER_ID_REQUIRED, got {other:?}"),
        }
    }

    async fn state(&self, group: &str) -> GroupState {
        self.c.classic().describe(group).await.unwrap().state
    }

    /// One member alone in a Stable group: (member id, generation).
    async fn stable_alone(&self, group: &str, client: &str) -> (String, Generation) {
        let id = self.member_id(group, client).await;
        let join = self.spawn_join(join_req(group, &id, client));
        self.tick(0).await;
        let joined = join.await.unwrap().unwrap();
        let mut sync = sync_req(group, &id, joined.generation);
        sync.assignments = vec![assignment(&id, &[0, 1, 2, 3])];
        self.c.classic().sync(sync).await.unwrap();
        (id, joined.generation)
    }

    /// Two members in a Stable group: (leader, follower, generation).
    async fn stable_pair(&self, group: &str) -> (String, String, Generation) {
        let a = self.member_id(group, "a").await;
        let b = self.member_id(group, "b").await;
        let ja = self.spawn_join(join_req(group, &a, "a"));
        let jb = self.spawn_join(join_req(group, &b, "b"));
        settle().await;
        self.tick(0).await;
        let (ra, rb) = (ja.await.unwrap().unwrap(), jb.await.unwrap().unwrap());
        assert_eq!(ra.generation, rb.generation);
        let (leader, follower) = if ra.leader == a { (a, b) } else { (b, a) };
        let generation = ra.generation;
        let f = self.spawn_sync(sync_req(group, &follower, generation));
        let mut s = sync_req(group, &leader, generation);
        s.assignments = vec![assignment(&leader, &[0, 1]), assignment(&follower, &[2, 3])];
        self.c.classic().sync(s).await.unwrap();
        f.await.unwrap().unwrap();
        assert_eq!(self.state(group).await, GroupState::Stable);
        (leader, follower, generation)
    }
}

// ====================================================================== JoinGroup rules

#[tokio::test]
async fn join_with_an_empty_group_id_is_invalid_group_id() {
    let h = harness();
    let err = h.c.classic().join(join_req("", "", "a")).await.unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_code()),
        ("INVALID_GROUP_ID", Some(24))
    );
}

#[tokio::test]
async fn join_with_a_session_timeout_outside_the_bounds_is_invalid_session_timeout() {
    let h = harness();
    for bad in [99, 60_001, -1] {
        let mut r = join_req("g", "", "a");
        r.session_timeout_ms = bad;
        let err = h.c.classic().join(r).await.unwrap_err();
        assert_eq!(
            (err.code(), err.kafka_code()),
            ("INVALID_SESSION_TIMEOUT", Some(26)),
            "{bad}"
        );
    }
    for good in [100, 60_000] {
        let mut r = join_req("g", "", "a");
        r.session_timeout_ms = good;
        assert_eq!(
            code(h.c.classic().join(r).await),
            "MEMBER_ID_REQUIRED",
            "{good} is within bounds"
        );
    }
}

#[tokio::test]
async fn join_without_protocol_type_or_protocols_is_inconsistent_group_protocol() {
    let h = harness();
    let mut no_type = join_req("g", "", "a");
    no_type.protocol_type.clear();
    let mut no_protocols = join_req("g", "", "a");
    no_protocols.protocols.clear();
    for r in [no_type, no_protocols] {
        let err = h.c.classic().join(r).await.unwrap_err();
        assert_eq!(
            (err.code(), err.kafka_code()),
            ("INCONSISTENT_GROUP_PROTOCOL", Some(23))
        );
    }
}

#[tokio::test]
async fn join_with_no_protocol_in_common_is_inconsistent_group_protocol() {
    let h = harness();
    h.stable_alone("g", "a").await;
    let mut other = join_req("g", "", "b");
    other.protocols = vec![protocol("roundrobin", "b")];
    assert_eq!(
        code(h.c.classic().join(other).await),
        "INCONSISTENT_GROUP_PROTOCOL"
    );
    let mut other_type = join_req("g", "", "b");
    other_type.protocol_type = "connect".into();
    assert_eq!(
        code(h.c.classic().join(other_type).await),
        "INCONSISTENT_GROUP_PROTOCOL"
    );
}

#[tokio::test]
async fn join_of_a_full_group_is_group_max_size_reached() {
    let h = harness_with(|b| b.group_max_size(1));
    h.stable_alone("g", "a").await;
    // Kafka checks the size before anything else, so not even an id is handed out.
    let err =
        h.c.classic()
            .join(join_req("g", "", "b"))
            .await
            .unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_code()),
        ("GROUP_MAX_SIZE_REACHED", Some(81))
    );
    assert_eq!(h.c.classic().describe("g").await.unwrap().members.len(), 1);
}

#[tokio::test]
async fn a_new_dynamic_member_gets_member_id_required_and_stays_pending() {
    let h = harness();
    let err =
        h.c.classic()
            .join(join_req("g", "", "client"))
            .await
            .unwrap_err();
    let Error::MemberIdRequired { member_id, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(member_id, "client-00000000-0000-4000-8000-000000000001");
    assert_eq!(err.kafka_code(), Some(79));
    // Pending: no member yet, no rebalance.
    let d = h.c.classic().describe("g").await.unwrap();
    assert_eq!((d.state, d.members.len()), (GroupState::Empty, 0));
    // Joining again with the id makes it a member.
    let join = h.spawn_join(join_req("g", member_id, "client"));
    h.tick(0).await;
    let joined = join.await.unwrap().unwrap();
    assert_eq!(joined.member_id, *member_id);
    assert_eq!(joined.generation, Generation::new(1));
}

#[tokio::test]
async fn before_join_group_v4_a_new_member_is_added_at_once() {
    let h = harness();
    let mut r = join_req("g", "", "old-client");
    r.require_known_member_id = false;
    let join = h.spawn_join(r);
    h.tick(0).await;
    let joined = join.await.unwrap().unwrap();
    assert!(joined.member_id.starts_with("old-client-"));
    assert_eq!(joined.leader, joined.member_id);
}

#[tokio::test]
async fn a_pending_member_expires_after_its_session_timeout() {
    let h = harness();
    let id = h.member_id("g", "a").await;
    h.tick(SESSION as u64 + 1).await;
    assert_eq!(
        code(h.c.classic().join(join_req("g", &id, "a")).await),
        "UNKNOWN_MEMBER",
        "the pending id is forgotten"
    );
}

#[tokio::test]
async fn a_member_id_for_a_group_that_does_not_exist_is_unknown_member() {
    let h = harness();
    assert_eq!(
        code(h.c.classic().join(join_req("nobody", "m-1", "a")).await),
        "UNKNOWN_MEMBER"
    );
    assert_eq!(
        code(h.c.classic().describe("nobody").await),
        "GROUP_ID_NOT_FOUND",
        "not created"
    );
}

#[tokio::test]
async fn a_known_member_in_preparing_rebalance_waits_for_the_barrier() {
    let h = harness();
    let (leader, follower, g1) = h.stable_pair("g").await;
    // The leader re-joins: a rebalance starts and its join waits for the follower.
    let lj = h.spawn_join(join_req("g", &leader, "a"));
    settle().await;
    assert_eq!(h.state("g").await, GroupState::PreparingRebalance);
    assert!(!lj.is_finished(), "the leader waits at the barrier");
    let fj = h.spawn_join(join_req("g", &follower, "b"));
    settle().await;
    let (l, f) = (lj.await.unwrap().unwrap(), fj.await.unwrap().unwrap());
    assert_eq!((l.generation, f.generation), (g1.next(), g1.next()));
}

#[tokio::test]
async fn a_follower_joining_again_unchanged_in_stable_is_answered_at_once() {
    let h = harness();
    let (leader, follower, g1) = h.stable_pair("g").await;
    let again =
        h.c.classic()
            .join(join_req("g", &follower, "b"))
            .await
            .unwrap();
    assert_eq!(again.generation, g1);
    assert_eq!(again.leader, leader);
    assert!(again.members.is_empty());
    assert_eq!(h.state("g").await, GroupState::Stable, "no rebalance");
}

#[tokio::test]
async fn the_leader_joining_again_in_stable_always_starts_a_rebalance() {
    let h = harness();
    let (leader, _, _) = h.stable_pair("g").await;
    let _lj = h.spawn_join(join_req("g", &leader, "a"));
    settle().await;
    assert_eq!(h.state("g").await, GroupState::PreparingRebalance);
}

#[tokio::test]
async fn joining_again_with_new_metadata_starts_a_rebalance() {
    let h = harness();
    let (_, follower, _) = h.stable_pair("g").await;
    let mut changed = join_req("g", &follower, "b");
    changed.protocols = vec![protocol("range", "b-with-more-topics")];
    let _fj = h.spawn_join(changed);
    settle().await;
    assert_eq!(h.state("g").await, GroupState::PreparingRebalance);
}

#[tokio::test]
async fn a_join_in_completing_rebalance_with_unchanged_metadata_is_answered_at_once() {
    let h = harness();
    let id = h.member_id("g", "a").await;
    let join = h.spawn_join(join_req("g", &id, "a"));
    h.tick(0).await;
    let first = join.await.unwrap().unwrap();
    assert_eq!(h.state("g").await, GroupState::CompletingRebalance);
    let again = h.c.classic().join(join_req("g", &id, "a")).await.unwrap();
    assert_eq!(again.generation, first.generation);
    assert_eq!(
        again.members.len(),
        1,
        "the leader gets the member list again"
    );
    assert_eq!(h.state("g").await, GroupState::CompletingRebalance);
}

#[tokio::test]
async fn the_barrier_completes_when_every_known_member_has_joined_again() {
    let h = harness();
    let (leader, follower, g1) = h.stable_pair("g").await;
    let lj = h.spawn_join(join_req("g", &leader, "a"));
    settle().await;
    assert!(!lj.is_finished());
    let fj = h.spawn_join(join_req("g", &follower, "b"));
    settle().await;
    assert!(
        lj.is_finished() && fj.is_finished(),
        "no timer needed: everyone is in"
    );
    assert_eq!(h.state("g").await, GroupState::CompletingRebalance);
    assert_eq!(lj.await.unwrap().unwrap().generation, g1.next());
}

#[tokio::test]
async fn members_not_joined_again_by_the_rebalance_timeout_are_removed() {
    let h = harness();
    let (leader, follower, g1) = h.stable_pair("g").await;
    let lj = h.spawn_join(join_req("g", &leader, "a"));
    // The follower keeps heartbeating (and learning of the rebalance) but never re-joins.
    for _ in 0..5 {
        h.tick(REBALANCE as u64 / 6).await;
        assert_eq!(
            code(
                h.c.classic()
                    .heartbeat("g", &follower, None, Some(g1))
                    .await
            ),
            "REBALANCE_IN_PROGRESS"
        );
    }
    assert!(!lj.is_finished());
    h.tick(REBALANCE as u64 / 6).await;
    let l = lj.await.unwrap().unwrap();
    assert_eq!(l.generation, g1.next());
    assert_eq!(l.members.len(), 1, "the follower is gone");
    assert_eq!(
        code(
            h.c.classic()
                .heartbeat("g", &follower, None, Some(l.generation))
                .await
        ),
        "UNKNOWN_MEMBER"
    );
}

#[tokio::test]
async fn the_initial_rebalance_delay_holds_the_first_rebalance_of_an_empty_group() {
    let h = harness_with(|b| b.group_initial_rebalance_delay_ms(3_000));
    let a = h.member_id("g", "a").await;
    let ja = h.spawn_join(join_req("g", &a, "a"));
    settle().await;
    h.tick(2_999).await;
    assert!(
        !ja.is_finished(),
        "joins never complete the initial rebalance early"
    );
    let b = h.member_id("g", "b").await;
    let jb = h.spawn_join(join_req("g", &b, "b"));
    h.tick(1).await;
    // A member arrived during the delay: it is extended by another delay.
    assert!(!ja.is_finished() && !jb.is_finished());
    h.tick(3_000).await;
    let (ra, rb) = (ja.await.unwrap().unwrap(), jb.await.unwrap().unwrap());
    assert_eq!(ra.generation, Generation::new(1));
    assert_eq!(rb.generation, Generation::new(1));
}

#[tokio::test]
async fn the_barrier_picks_a_protocol_by_vote_keeps_the_leader_and_gives_it_every_member() {
    let h = harness();
    let a = h.member_id("g", "a").await;
    let b = h.member_id("g", "b").await;
    let c = h.member_id("g", "c").await;
    let mut ra = join_req("g", &a, "a");
    ra.protocols = vec![protocol("roundrobin", "a"), protocol("range", "a")];
    let mut rb = join_req("g", &b, "b");
    rb.protocols = vec![protocol("range", "b"), protocol("roundrobin", "b")];
    let mut rc = join_req("g", &c, "c");
    rc.protocols = vec![protocol("range", "c"), protocol("roundrobin", "c")];
    let joins = [h.spawn_join(ra), h.spawn_join(rb), h.spawn_join(rc)];
    settle().await;
    h.tick(0).await;
    let mut answers = Vec::new();
    for j in joins {
        answers.push(j.await.unwrap().unwrap());
    }
    assert!(
        answers
            .iter()
            .all(|r| r.protocol_name.as_deref() == Some("range")),
        "two votes to one"
    );
    assert!(
        answers.iter().all(|r| r.leader == a),
        "the first member is the leader"
    );
    let leader = &answers[0];
    let listed: Vec<(&str, &[u8])> = leader
        .members
        .iter()
        .map(|m| (m.member_id.as_str(), &*m.metadata))
        .collect();
    assert_eq!(
        listed,
        [
            (a.as_str(), &b"range:a"[..]),
            (b.as_str(), &b"range:b"[..]),
            (c.as_str(), &b"range:c"[..])
        ],
        "every member with its metadata for the chosen protocol"
    );
    assert!(answers[1].members.is_empty() && answers[2].members.is_empty());
}

// ====================================================================== SyncGroup rules

#[tokio::test]
async fn sync_of_an_unknown_group_or_member_is_unknown_member() {
    let h = harness();
    assert_eq!(
        code(
            h.c.classic()
                .sync(sync_req("nobody", "m", Generation::new(1)))
                .await
        ),
        "UNKNOWN_MEMBER"
    );
    let (_, g1) = h.stable_alone("g", "a").await;
    assert_eq!(
        code(h.c.classic().sync(sync_req("g", "ghost", g1)).await),
        "UNKNOWN_MEMBER"
    );
}

#[tokio::test]
async fn sync_with_another_generation_is_illegal_generation() {
    let h = harness();
    let (id, g1) = h.stable_alone("g", "a").await;
    let err =
        h.c.classic()
            .sync(sync_req("g", &id, g1.next()))
            .await
            .unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_code()),
        ("ILLEGAL_GENERATION", Some(22))
    );
    let mut none = sync_req("g", &id, g1);
    none.generation = None;
    assert_eq!(code(h.c.classic().sync(none).await), "ILLEGAL_GENERATION");
}

#[tokio::test]
async fn sync_during_preparing_rebalance_is_rebalance_in_progress() {
    let h = harness();
    let (leader, follower, g1) = h.stable_pair("g").await;
    let _lj = h.spawn_join(join_req("g", &leader, "a"));
    settle().await;
    let err =
        h.c.classic()
            .sync(sync_req("g", &follower, g1))
            .await
            .unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_code()),
        ("REBALANCE_IN_PROGRESS", Some(27))
    );
}

#[tokio::test]
async fn sync_with_another_protocol_is_inconsistent_group_protocol() {
    let h = harness();
    let (id, g1) = h.stable_alone("g", "a").await;
    let mut s = sync_req("g", &id, g1);
    s.protocol_name = Some("roundrobin".into());
    assert_eq!(
        code(h.c.classic().sync(s).await),
        "INCONSISTENT_GROUP_PROTOCOL"
    );
    let mut old = sync_req("g", &id, g1);
    (old.protocol_type, old.protocol_name) = (None, None);
    assert!(
        h.c.classic().sync(old).await.is_ok(),
        "pre-v5 requests carry no protocol: not checked"
    );
}

#[tokio::test]
async fn a_followers_sync_waits_for_the_leaders_and_gets_what_the_leader_sent() {
    let h = harness();
    let a = h.member_id("g", "a").await;
    let b = h.member_id("g", "b").await;
    let c = h.member_id("g", "c").await;
    let joins = [
        h.spawn_join(join_req("g", &a, "a")),
        h.spawn_join(join_req("g", &b, "b")),
        h.spawn_join(join_req("g", &c, "c")),
    ];
    settle().await;
    h.tick(0).await;
    let mut gen = Generation::INITIAL;
    for j in joins {
        gen = j.await.unwrap().unwrap().generation;
    }
    let fb = h.spawn_sync(sync_req("g", &b, gen));
    let fc = h.spawn_sync(sync_req("g", &c, gen));
    settle().await;
    assert!(
        !fb.is_finished() && !fc.is_finished(),
        "followers wait for the leader"
    );
    assert_eq!(h.state("g").await, GroupState::CompletingRebalance);
    let mut lead = sync_req("g", &a, gen);
    // The leader leaves c out.
    lead.assignments = vec![assignment(&a, &[0, 1]), assignment(&b, &[2, 3])];
    let own = h.c.classic().sync(lead).await.unwrap();
    assert_eq!(&*own.assignment, format!("{a}:[0, 1]").as_bytes());
    assert_eq!(
        &*fb.await.unwrap().unwrap().assignment,
        format!("{b}:[2, 3]").as_bytes()
    );
    assert!(
        fc.await.unwrap().unwrap().assignment.is_empty(),
        "left out: empty assignment"
    );
    assert_eq!(h.state("g").await, GroupState::Stable);
    // In Stable, a sync answers the installed assignment at once.
    let again = h.c.classic().sync(sync_req("g", &b, gen)).await.unwrap();
    assert_eq!(&*again.assignment, format!("{b}:[2, 3]").as_bytes());
}

#[tokio::test]
async fn members_that_do_not_sync_within_the_rebalance_timeout_are_removed_and_a_rebalance_starts()
{
    let h = harness();
    let a = h.member_id("g", "a").await;
    let b = h.member_id("g", "b").await;
    let joins = [
        h.spawn_join(join_req("g", &a, "a")),
        h.spawn_join(join_req("g", &b, "b")),
    ];
    settle().await;
    h.tick(0).await;
    let mut gen = Generation::INITIAL;
    for j in joins {
        gen = j.await.unwrap().unwrap().generation;
    }
    // Only the leader syncs (b never does), and keeps heartbeating.
    let mut lead = sync_req("g", &a, gen);
    lead.assignments = vec![assignment(&a, &[0, 1]), assignment(&b, &[2, 3])];
    h.c.classic().sync(lead).await.unwrap();
    // Both keep their sessions alive; b just never syncs.
    for _ in 0..5 {
        h.tick(REBALANCE as u64 / 6).await;
        h.c.classic()
            .heartbeat("g", &a, None, Some(gen))
            .await
            .unwrap();
        h.c.classic()
            .heartbeat("g", &b, None, Some(gen))
            .await
            .unwrap();
    }
    let expired = h.tick(REBALANCE as u64 / 6).await;
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].member, b);
    assert_eq!(h.state("g").await, GroupState::PreparingRebalance);
    assert_eq!(
        code(h.c.classic().heartbeat("g", &a, None, Some(gen)).await),
        "REBALANCE_IN_PROGRESS"
    );
}

// ====================================================================== Heartbeat rules

#[tokio::test]
async fn heartbeat_of_an_unknown_member_or_group_is_unknown_member() {
    let h = harness();
    assert_eq!(
        code(
            h.c.classic()
                .heartbeat("nobody", "m", None, Some(Generation::new(1)))
                .await
        ),
        "UNKNOWN_MEMBER"
    );
    let (_, g1) = h.stable_alone("g", "a").await;
    let err =
        h.c.classic()
            .heartbeat("g", "ghost", None, Some(g1))
            .await
            .unwrap_err();
    assert_eq!((err.code(), err.kafka_code()), ("UNKNOWN_MEMBER", Some(25)));
}

#[tokio::test]
async fn heartbeat_with_another_generation_is_illegal_generation() {
    let h = harness();
    let (id, g1) = h.stable_alone("g", "a").await;
    assert_eq!(
        code(
            h.c.classic()
                .heartbeat("g", &id, None, Some(g1.next()))
                .await
        ),
        "ILLEGAL_GENERATION"
    );
    assert_eq!(
        code(h.c.classic().heartbeat("g", &id, None, None).await),
        "ILLEGAL_GENERATION"
    );
}

#[tokio::test]
async fn heartbeat_during_preparing_rebalance_is_rebalance_in_progress_and_still_extends_the_lease()
{
    let h = harness();
    let (leader, follower, g1) = h.stable_pair("g").await;
    let _lj = h.spawn_join(join_req("g", &leader, "a"));
    settle().await;
    h.clock.advance(SESSION as u64 - 10);
    assert_eq!(
        code(
            h.c.classic()
                .heartbeat("g", &follower, None, Some(g1))
                .await
        ),
        "REBALANCE_IN_PROGRESS"
    );
    // Without that heartbeat the follower would expire at SESSION + 1.
    let expired = h.tick(20).await;
    assert!(expired.is_empty(), "{expired:?}");
}

#[tokio::test]
async fn heartbeat_during_completing_rebalance_succeeds() {
    let h = harness();
    let id = h.member_id("g", "a").await;
    let join = h.spawn_join(join_req("g", &id, "a"));
    h.tick(0).await;
    let gen = join.await.unwrap().unwrap().generation;
    assert_eq!(h.state("g").await, GroupState::CompletingRebalance);
    h.c.classic()
        .heartbeat("g", &id, None, Some(gen))
        .await
        .unwrap();
}

#[tokio::test]
async fn session_expiry_is_strict_and_starts_a_rebalance() {
    let h = harness();
    let (leader, follower, g1) = h.stable_pair("g").await;
    // Both synced at 0; the leader keeps heartbeating, the follower does not.
    h.clock.advance(SESSION as u64 - 1);
    h.c.classic()
        .heartbeat("g", &leader, None, Some(g1))
        .await
        .unwrap();
    assert!(
        h.tick(1).await.is_empty(),
        "at exactly the deadline the follower is alive"
    );
    let expired = h.tick(1).await;
    assert_eq!(
        expired
            .iter()
            .map(|e| e.member.as_str())
            .collect::<Vec<_>>(),
        [follower.as_str()]
    );
    assert_eq!(h.state("g").await, GroupState::PreparingRebalance);
}

// ====================================================================== LeaveGroup rules

#[tokio::test]
async fn leave_answers_each_member_and_starts_a_rebalance_at_once() {
    let h = harness();
    let (leader, follower, g1) = h.stable_pair("g").await;
    let results =
        h.c.classic()
            .leave(
                "g",
                &[
                    LeavingMember {
                        member_id: follower.clone(),
                        group_instance_id: None,
                    },
                    LeavingMember {
                        member_id: "ghost".into(),
                        group_instance_id: None,
                    },
                ],
            )
            .await
            .unwrap();
    assert!(results[0].is_ok());
    assert_eq!(results[1].as_ref().unwrap_err().code(), "UNKNOWN_MEMBER");
    assert_eq!(
        h.state("g").await,
        GroupState::PreparingRebalance,
        "no waiting for a session timeout"
    );
    let lj = h.spawn_join(join_req("g", &leader, "a"));
    settle().await;
    let l = lj.await.unwrap().unwrap();
    assert_eq!((l.generation, l.members.len()), (g1.next(), 1));
}

#[tokio::test]
async fn leave_of_an_unknown_group_answers_unknown_member_for_each() {
    let h = harness();
    let results =
        h.c.classic()
            .leave(
                "nobody",
                &[LeavingMember {
                    member_id: "m".into(),
                    group_instance_id: None,
                }],
            )
            .await
            .unwrap();
    assert_eq!(results[0].as_ref().unwrap_err().code(), "UNKNOWN_MEMBER");
}

#[tokio::test]
async fn the_last_member_leaving_makes_the_group_empty_in_a_new_generation() {
    let h = harness();
    let (id, g1) = h.stable_alone("g", "a").await;
    h.c.classic()
        .leave(
            "g",
            &[LeavingMember {
                member_id: id,
                group_instance_id: None,
            }],
        )
        .await
        .unwrap();
    let d = h.c.classic().describe("g").await.unwrap();
    assert_eq!((d.state, d.generation), (GroupState::Empty, g1.next()));
    assert_eq!(
        d.protocol_type, "consumer",
        "an Empty group keeps its protocol type"
    );
}

// ====================================================================== static members

#[tokio::test]
async fn a_static_member_is_added_without_member_id_required() {
    let h = harness();
    let join = h.spawn_join(static_req("g", "instance-1", "a"));
    h.tick(0).await;
    let joined = join.await.unwrap().unwrap();
    assert!(
        joined.member_id.starts_with("instance-1-"),
        "{}",
        joined.member_id
    );
}

#[tokio::test]
async fn a_static_member_restarting_in_stable_keeps_generation_and_assignment_and_fences_its_old_id(
) {
    let h = harness();
    let join = h.spawn_join(static_req("g", "instance-1", "a"));
    let other = h.member_id("g", "b").await;
    let jo = h.spawn_join(join_req("g", &other, "b"));
    settle().await;
    h.tick(0).await;
    let first = join.await.unwrap().unwrap();
    let g1 = first.generation;
    jo.await.unwrap().unwrap();
    let old = first.member_id.clone();
    let leader = first.leader.clone();
    let mut s = sync_req("g", &leader, g1);
    s.assignments = vec![assignment(&old, &[0, 1]), assignment(&other, &[2, 3])];
    let follower = if leader == old {
        other.clone()
    } else {
        old.clone()
    };
    let f = h.spawn_sync(sync_req("g", &follower, g1));
    h.c.classic().sync(s).await.unwrap();
    f.await.unwrap().unwrap();

    // The process restarts: same instance id, no member id.
    let again =
        h.c.classic()
            .join(static_req("g", "instance-1", "a"))
            .await
            .unwrap();
    assert_ne!(again.member_id, old);
    assert_eq!(again.generation, g1, "no rebalance");
    assert_eq!(h.state("g").await, GroupState::Stable);
    let mine =
        h.c.classic()
            .sync(sync_req("g", &again.member_id, g1))
            .await
            .unwrap();
    assert_eq!(
        &*mine.assignment,
        format!("{old}:[0, 1]").as_bytes(),
        "same partitions"
    );
    // The old id, with its instance id, is fenced everywhere.
    let fenced =
        h.c.classic()
            .heartbeat("g", &old, Some("instance-1"), Some(g1))
            .await
            .unwrap_err();
    assert_eq!(
        (fenced.code(), fenced.kafka_code()),
        ("FENCED_INSTANCE_ID", Some(82))
    );
    let mut s = sync_req("g", &old, g1);
    s.group_instance_id = Some("instance-1".into());
    assert_eq!(code(h.c.classic().sync(s).await), "FENCED_INSTANCE_ID");
    let mut cm = commit_req("g", &old, Some(g1), 5);
    cm.authority = CommitAuthority::generation(Some(g1), old.as_str(), Some("instance-1".into()));
    assert_eq!(code(h.c.offsets().commit(&cm).await), "FENCED_INSTANCE_ID");
    assert!(
        h.store.calls(StoreOp::Commit) == 0,
        "nothing reached the store"
    );
}

#[tokio::test]
async fn a_static_member_leaves_by_instance_id_and_its_session_can_expire() {
    let h = harness();
    let join = h.spawn_join(static_req("g", "i-1", "a"));
    h.tick(0).await;
    join.await.unwrap().unwrap();
    let results =
        h.c.classic()
            .leave(
                "g",
                &[LeavingMember {
                    member_id: String::new(),
                    group_instance_id: Some("i-1".into()),
                }],
            )
            .await
            .unwrap();
    assert!(results[0].is_ok());
    assert_eq!(h.state("g").await, GroupState::Empty);

    let join = h.spawn_join(static_req("g", "i-2", "b"));
    h.tick(0).await;
    let id = join.await.unwrap().unwrap().member_id;
    let expired = h.tick(SESSION as u64 + 1).await;
    assert_eq!(
        expired
            .iter()
            .map(|e| e.member.as_str())
            .collect::<Vec<_>>(),
        [id.as_str()]
    );
}

#[tokio::test]
async fn leaving_with_an_instance_id_that_is_now_another_member_is_fenced() {
    let h = harness();
    let join = h.spawn_join(static_req("g", "i-1", "a"));
    h.tick(0).await;
    let old = join.await.unwrap().unwrap();
    let mut s = sync_req("g", &old.member_id, old.generation);
    s.assignments = vec![assignment(&old.member_id, &[0])];
    h.c.classic().sync(s).await.unwrap();
    h.c.classic()
        .join(static_req("g", "i-1", "a"))
        .await
        .unwrap();
    let results =
        h.c.classic()
            .leave(
                "g",
                &[LeavingMember {
                    member_id: old.member_id,
                    group_instance_id: Some("i-1".into()),
                }],
            )
            .await
            .unwrap();
    assert_eq!(
        results[0].as_ref().unwrap_err().code(),
        "FENCED_INSTANCE_ID"
    );
    assert_eq!(
        h.c.classic().describe("g").await.unwrap().members.len(),
        1,
        "not removed"
    );
}

// ====================================================================== OffsetCommit rules

#[tokio::test]
async fn a_plain_commit_is_allowed_while_the_group_is_empty_or_absent_and_creates_a_simple_group() {
    let h = harness();
    h.c.offsets()
        .commit(&commit_req("simple", "", None, 7))
        .await
        .unwrap();
    let listed = h.c.list_groups().await;
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].state, listed[0].kind),
        (GroupState::Empty, GroupKind::Simple)
    );
    assert_eq!(
        h.c.committed("simple", &TopicPartition::new("orders", 0))
            .await
            .unwrap(),
        Some(7)
    );
}

#[tokio::test]
async fn a_plain_commit_to_a_group_with_members_is_unknown_member() {
    let h = harness();
    h.stable_alone("g", "a").await;
    assert_eq!(
        code(h.c.offsets().commit(&commit_req("g", "", None, 7)).await),
        "UNKNOWN_MEMBER"
    );
}

#[tokio::test]
async fn a_members_commit_to_a_group_that_does_not_exist_is_group_id_not_found() {
    let h = harness();
    let err =
        h.c.offsets()
            .commit(&commit_req("nobody", "m", Some(Generation::new(1)), 7))
            .await
            .unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_code()),
        ("GROUP_ID_NOT_FOUND", Some(69))
    );
}

#[tokio::test]
async fn a_commit_by_an_unknown_member_or_generation_is_refused() {
    let h = harness();
    let (id, g1) = h.stable_alone("g", "a").await;
    assert_eq!(
        code(
            h.c.offsets()
                .commit(&commit_req("g", "ghost", Some(g1), 1))
                .await
        ),
        "UNKNOWN_MEMBER"
    );
    assert_eq!(
        code(
            h.c.offsets()
                .commit(&commit_req("g", &id, Some(g1.next()), 1))
                .await
        ),
        "ILLEGAL_GENERATION"
    );
    assert!(h.store.calls(StoreOp::Commit) == 0);
    h.c.offsets()
        .commit(&commit_req("g", &id, Some(g1), 1))
        .await
        .unwrap();
    assert_eq!(h.store.calls(StoreOp::Commit), 1);
}

#[tokio::test]
async fn a_commit_during_completing_rebalance_is_rebalance_in_progress() {
    let h = harness();
    let id = h.member_id("g", "a").await;
    let join = h.spawn_join(join_req("g", &id, "a"));
    h.tick(0).await;
    let gen = join.await.unwrap().unwrap().generation;
    assert_eq!(
        code(
            h.c.offsets()
                .commit(&commit_req("g", &id, Some(gen), 1))
                .await
        ),
        "REBALANCE_IN_PROGRESS"
    );
}

#[tokio::test]
async fn a_commit_during_preparing_rebalance_under_the_old_generation_succeeds() {
    let h = harness();
    let (leader, follower, g1) = h.stable_pair("g").await;
    let _lj = h.spawn_join(join_req("g", &leader, "a"));
    settle().await;
    assert_eq!(h.state("g").await, GroupState::PreparingRebalance);
    // An eager client commits before revoking.
    h.c.offsets()
        .commit(&commit_req("g", &follower, Some(g1), 9))
        .await
        .unwrap();
    assert_eq!(
        h.c.committed("g", &TopicPartition::new("orders", 0))
            .await
            .unwrap(),
        Some(9)
    );
}

#[tokio::test]
async fn the_ownership_check_is_off_by_default_and_refuses_foreign_partitions_when_on() {
    for on in [false, true] {
        let h = harness_with(|b| b.check_classic_commit_ownership(on));
        let (_, follower, g1) = h.stable_pair("g").await;
        // The follower owns orders 2 and 3; orders-0 is the leader's.
        let result =
            h.c.offsets()
                .commit(&commit_req("g", &follower, Some(g1), 5))
                .await;
        if on {
            assert_eq!(code(result), "NOT_PARTITION_OWNER");
        } else {
            result.unwrap();
        }
    }
}

#[tokio::test]
async fn a_commit_checked_against_a_generation_never_lands_after_the_next_is_installed() {
    // A store whose write blocks until released: the barrier cannot complete meanwhile.
    let h = harness();
    let (leader, follower, g1) = h.stable_pair("g").await;
    let gate = h.store.hold(StoreOp::Commit);
    let c = h.c.clone();
    let f = follower.clone();
    let commit =
        tokio::spawn(async move { c.offsets().commit(&commit_req("g", &f, Some(g1), 3)).await });
    settle().await;
    let lj = h.spawn_join(join_req("g", &leader, "a"));
    let fj = h.spawn_join(join_req("g", &follower, "b"));
    settle().await;
    assert!(
        !lj.is_finished() && !fj.is_finished(),
        "the barrier waits for the commit in flight"
    );
    assert_eq!(h.c.classic().describe("g").await.unwrap().generation, g1);
    drop(gate);
    commit.await.unwrap().unwrap();
    settle().await;
    assert_eq!(lj.await.unwrap().unwrap().generation, g1.next());
    fj.await.unwrap().unwrap();
}

// ====================================================================== admin rules

#[tokio::test]
async fn describe_and_list_use_kafkas_state_names_and_member_details() {
    let h = harness();
    let (leader, _, g1) = h.stable_pair("g").await;
    let d = h.c.classic().describe("g").await.unwrap();
    assert_eq!(
        (
            d.state.as_str(),
            d.protocol_type.as_str(),
            d.protocol_name.as_str()
        ),
        ("Stable", "consumer", "range")
    );
    assert_eq!(d.generation, g1);
    assert_eq!(d.leader.as_deref(), Some(leader.as_str()));
    let m = &d.members[0];
    assert_eq!(
        (m.client_id.as_str(), m.client_host.as_str()),
        ("a", "/127.0.0.1")
    );
    assert_eq!(&*m.metadata, b"range:a");
    assert_eq!(m.topics, ["orders"]);
    assert_eq!(m.partitions.len(), 2);
    let listed = h.c.list_groups().await;
    assert_eq!(listed[0].state.as_str(), "Stable");
    assert_eq!(
        (listed[0].protocol_type.as_str(), listed[0].kind),
        ("consumer", GroupKind::Classic)
    );
    assert_eq!(
        code(h.c.classic().describe("nobody").await),
        "GROUP_ID_NOT_FOUND"
    );
}

#[tokio::test]
async fn delete_groups_refuses_a_group_with_members_and_removes_an_empty_ones_offsets() {
    let h = harness();
    let (id, g1) = h.stable_alone("g", "a").await;
    h.c.offsets()
        .commit(&commit_req("g", &id, Some(g1), 4))
        .await
        .unwrap();
    let err = h.c.delete_group("g").await.unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_code()),
        ("NON_EMPTY_GROUP", Some(68))
    );
    h.c.classic()
        .leave(
            "g",
            &[LeavingMember {
                member_id: id,
                group_instance_id: None,
            }],
        )
        .await
        .unwrap();
    h.c.delete_group("g").await.unwrap();
    assert_eq!(
        h.c.committed("g", &TopicPartition::new("orders", 0))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        code(h.c.classic().describe("g").await),
        "GROUP_ID_NOT_FOUND"
    );
    assert_eq!(code(h.c.delete_group("g").await), "GROUP_ID_NOT_FOUND");
}

#[tokio::test]
async fn offset_delete_refuses_subscribed_topics_while_the_group_has_members() {
    let h = harness();
    let (id, g1) = h.stable_alone("g", "a").await;
    h.c.offsets()
        .commit(&commit_req("g", &id, Some(g1), 4))
        .await
        .unwrap();
    let gone = [TopicPartition::new("orders", 0)];
    let results = h.c.offsets().delete("g", &gone).await.unwrap();
    let err = results[0].1.as_ref().unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_code()),
        ("GROUP_SUBSCRIBED_TO_TOPIC", Some(86))
    );
    h.c.classic()
        .leave(
            "g",
            &[LeavingMember {
                member_id: id,
                group_instance_id: None,
            }],
        )
        .await
        .unwrap();
    let results = h.c.offsets().delete("g", &gone).await.unwrap();
    assert!(results[0].1.is_ok());
    assert_eq!(h.c.committed("g", &gone[0]).await.unwrap(), None);
}

#[tokio::test]
async fn the_offsets_of_a_deleted_topic_go_even_while_a_member_subscribes_to_it() {
    let h = harness();
    let (id, g1) = h.stable_alone("g", "a").await;
    h.c.offsets()
        .commit(&commit_req("g", &id, Some(g1), 4))
        .await
        .unwrap();
    let gone = [TopicPartition::new("orders", 0)];
    h.c.offsets()
        .delete_of_deleted_topic("g", &gone)
        .await
        .unwrap();
    assert_eq!(h.c.committed("g", &gone[0]).await.unwrap(), None);
    assert_eq!(
        code(h.c.offsets().delete_of_deleted_topic("nope", &gone).await),
        "GROUP_ID_NOT_FOUND"
    );
}

#[tokio::test]
async fn a_call_for_the_other_kind_of_group_is_inconsistent_group_protocol() {
    let h = harness();
    h.c.join("chapter", "m1", &["orders"]).await.unwrap();
    let err =
        h.c.classic()
            .join(join_req("chapter", "", "a"))
            .await
            .unwrap_err();
    assert_eq!(
        (err.code(), err.kafka_code()),
        ("INCONSISTENT_GROUP_PROTOCOL", Some(23))
    );
    assert!(err.to_string().contains("chapter group"), "{err}");
    h.stable_alone("classic", "a").await;
    let err = h.c.join("classic", "m1", &["orders"]).await.unwrap_err();
    assert_eq!(err.code(), "INCONSISTENT_GROUP_PROTOCOL");
    assert_eq!(
        code(h.c.describe("classic").await),
        "INCONSISTENT_GROUP_PROTOCOL"
    );
    // An Empty group of one kind can be taken over by the other, keeping its generation.
    h.c.leave("chapter", "m1").await.unwrap();
    let before = h.c.describe("chapter").await.unwrap().generation;
    let join = h.spawn_join(JoinGroupRequest {
        require_known_member_id: false,
        ..join_req("chapter", "", "a")
    });
    h.tick(0).await;
    assert_eq!(join.await.unwrap().unwrap().generation, before.next());
}

// ====================================================================== scenarios

/// Two clients start together, the way kafka-python and librdkafka do.
#[tokio::test]
async fn scenario_two_new_members_handshake_join_and_sync() {
    let h = harness();
    let a = h.member_id("g", "a").await;
    let b = h.member_id("g", "b").await;
    let ja = h.spawn_join(join_req("g", &a, "a"));
    let jb = h.spawn_join(join_req("g", &b, "b"));
    settle().await;
    h.tick(0).await;
    let (ra, rb) = (ja.await.unwrap().unwrap(), jb.await.unwrap().unwrap());
    assert_eq!(ra.generation, Generation::new(1));
    assert_eq!(ra.leader, a);
    assert_eq!(
        ra.members.len(),
        2,
        "the leader gets both members' metadata"
    );
    assert!(rb.members.is_empty());
    let fb = h.spawn_sync(sync_req("g", &b, rb.generation));
    settle().await;
    assert!(
        !fb.is_finished(),
        "the follower waits for the leader's sync"
    );
    let mut s = sync_req("g", &a, ra.generation);
    s.assignments = vec![assignment(&a, &[0, 1]), assignment(&b, &[2, 3])];
    h.c.classic().sync(s).await.unwrap();
    assert_eq!(
        &*fb.await.unwrap().unwrap().assignment,
        format!("{b}:[2, 3]").as_bytes()
    );
}

/// A third member arrives while the group is Stable.
#[tokio::test]
async fn scenario_a_third_member_makes_everyone_rejoin_into_the_next_generation() {
    let h = harness();
    let (leader, follower, g1) = h.stable_pair("g").await;
    let c = h.member_id("g", "c").await;
    let jc = h.spawn_join(join_req("g", &c, "c"));
    settle().await;
    for m in [&leader, &follower] {
        assert_eq!(
            code(h.c.classic().heartbeat("g", m, None, Some(g1)).await),
            "REBALANCE_IN_PROGRESS"
        );
    }
    let jl = h.spawn_join(join_req("g", &leader, "a"));
    let jf = h.spawn_join(join_req("g", &follower, "b"));
    settle().await;
    let all = [
        jl.await.unwrap().unwrap(),
        jf.await.unwrap().unwrap(),
        jc.await.unwrap().unwrap(),
    ];
    assert!(all.iter().all(|r| r.generation == g1.next()));
    assert_eq!(all[0].members.len(), 3);
}

/// A leader that leaves hands leadership to a remaining member.
#[tokio::test]
async fn scenario_the_leader_leaves_and_a_remaining_member_leads() {
    let h = harness();
    let (leader, follower, _) = h.stable_pair("g").await;
    h.c.classic()
        .leave(
            "g",
            &[LeavingMember {
                member_id: leader,
                group_instance_id: None,
            }],
        )
        .await
        .unwrap();
    let jf = h.spawn_join(join_req("g", &follower, "b"));
    settle().await;
    let r = jf.await.unwrap().unwrap();
    assert_eq!(r.leader, follower);
    assert_eq!(r.members.len(), 1);
}

/// A client disconnects while its JoinGroup waits: the member stays, exactly as in Kafka.
/// It had joined, so the barrier completes with it; then, silent, its session ends.
#[tokio::test]
async fn scenario_a_dropped_join_future_leaves_the_group_consistent() {
    let h = harness();
    let (leader, follower, g1) = h.stable_pair("g").await;
    let jl = h.spawn_join(join_req("g", &leader, "a"));
    settle().await;
    // The follower's join reaches the coordinator, then its client goes away.
    let jf = h.spawn_join(join_req("g", &follower, "b"));
    settle().await;
    jf.abort();
    settle().await;
    // The follower's join was received before the drop: the barrier completes with both.
    let l = jl.await.unwrap().unwrap();
    assert_eq!((l.generation, l.members.len()), (g1.next(), 2));
    assert_eq!(h.state("g").await, GroupState::CompletingRebalance);
    // The dropped follower never syncs nor heartbeats: its session ends, and a rebalance
    // starts; the leader, which heartbeats, stays.
    let mut s = sync_req("g", &leader, l.generation);
    s.assignments = vec![assignment(&leader, &[0, 1, 2, 3])];
    h.c.classic().sync(s).await.unwrap();
    for _ in 0..2 {
        h.tick(SESSION as u64 / 3).await;
        h.c.classic()
            .heartbeat("g", &leader, None, Some(l.generation))
            .await
            .unwrap();
    }
    let expired = h.tick(SESSION as u64 / 2).await;
    assert_eq!(
        expired
            .iter()
            .map(|e| e.member.as_str())
            .collect::<Vec<_>>(),
        [follower.as_str()]
    );
    assert_eq!(h.state("g").await, GroupState::PreparingRebalance);
    // And a join that is dropped before the coordinator saw it changes nothing.
    let before = h.c.classic().describe("g").await.unwrap();
    let ghost = h.spawn_join(join_req("g", "", "c"));
    ghost.abort();
    settle().await;
    let after = h.c.classic().describe("g").await.unwrap();
    assert_eq!(before.members.len(), after.members.len());
}

// ============================================== timers, the gate and retention (a review's findings)

use std::time::Duration;

/// A static member replaced while its first join is parked is not new: Kafka's replacement
/// is a fresh ClassicGroupMember (isNew = false), kept alive while it waits in the join,
/// so it does not expire after its session timeout while parked.
#[tokio::test]
async fn a_replaced_static_member_parked_in_its_join_is_not_new_and_does_not_expire() {
    let h = harness();
    let (leader, follower, g1) = h.stable_pair("g").await;
    // A new static member joins: rebalance; it is parked (new).
    let s1 = h.spawn_join(static_req("g", "s", "s"));
    settle().await;
    // The leader re-joins; the follower is slow (still heartbeating).
    let leader_client = if leader.starts_with("a-") { "a" } else { "b" };
    let _jl = h.spawn_join(join_req("g", &leader, leader_client));
    settle().await;
    h.tick(1).await;
    // The static member's client restarts and joins again with its instance id.
    let s2 = h.spawn_join(static_req("g", "s", "s"));
    settle().await;
    assert_eq!(code(s1.await.unwrap()), "FENCED_INSTANCE_ID");
    for _ in 0..3 {
        h.tick(4_000).await;
        let _ =
            h.c.classic()
                .heartbeat("g", &follower, None, Some(g1))
                .await;
    }
    // t = 12_001 > 1 + SESSION: the replacement, parked in its join, must still be there.
    assert!(
        !s2.is_finished(),
        "the replaced static member's parked join was answered: {:?}",
        s2.await.unwrap()
    );
    let d = h.c.classic().describe("g").await.unwrap();
    assert!(d
        .members
        .iter()
        .any(|m| m.group_instance_id.as_deref() == Some("s")));
}

/// The leader's SyncGroup installs the assignment and gives every parked follower a finite
/// session deadline, which may be earlier than the one armed: the sync arms it, so
/// poll_timeout never answers later than a follower's real expiry.
#[tokio::test]
async fn the_leaders_sync_arms_the_followers_new_session_deadlines() {
    let h = harness();
    let a = h.member_id("g", "a").await;
    let b = h.member_id("g", "b").await;
    let mut ra = join_req("g", &a, "a");
    ra.session_timeout_ms = 30_000;
    let mut rb = join_req("g", &b, "b");
    rb.session_timeout_ms = 1_000;
    let ja = h.spawn_join(ra);
    settle().await;
    let jb = h.spawn_join(rb);
    settle().await;
    h.tick(0).await;
    let (ja, jb) = (ja.await.unwrap().unwrap(), jb.await.unwrap().unwrap());
    assert_eq!(ja.leader, a);
    let gen = ja.generation;
    assert_eq!(jb.generation, gen);
    h.tick(10).await; // t = 10
    let fsync = h.spawn_sync(sync_req("g", &b, gen)); // follower parks
    settle().await;
    h.tick(991).await; // t = 1_001: the follower's old deadline fires; it is parked
    h.tick(18_999).await; // t = 20_000
    let mut s = sync_req("g", &a, gen);
    s.assignments = vec![assignment(&a, &[0, 1]), assignment(&b, &[2, 3])];
    h.c.classic().sync(s).await.unwrap();
    fsync.await.unwrap().unwrap();
    // The follower now expires at 20_000 + 1_000 (+1, strict).
    let next = h.c.poll_timeout();
    assert!(
        next.is_some_and(|t| t <= 21_001),
        "poll_timeout = {next:?}, but the follower's session ends at 21_000"
    );
}

/// A simple group (generation -1 commits only) that keeps committing a partition keeps its
/// offset: Kafka counts a simple group's offsets each from its own last commit, never from
/// the group's first.
#[tokio::test]
async fn a_simple_groups_offsets_expire_counted_from_the_last_commit() {
    let h = harness_with(|b| b.offsets_retention_ms(1_000));
    h.c.offsets()
        .commit(&commit_req("s", "", None, 1))
        .await
        .unwrap();
    h.tick(999).await;
    h.c.offsets()
        .commit(&commit_req("s", "", None, 2))
        .await
        .unwrap();
    h.tick(1).await; // t = 1_000: one ms after the last commit
    let left = h.c.committed_offsets("s").await.unwrap();
    assert!(!left.is_empty(), "an offset committed 1 ms ago was expired");
}

impl H {
    /// A chapter commit of `member`, stuck in the store until the caller's hold is dropped.
    async fn stuck_commit(
        &self,
        group: &'static str,
        member: &'static str,
        generation: Generation,
    ) -> JoinHandle<Result<(), Error>> {
        let c = self.c.clone();
        let commit = tokio::spawn(async move {
            let offsets = common::offsets(&[("orders", 0, 7)]);
            c.commit(group, member, generation, &offsets).await
        });
        while self.store.waiting(StoreOp::Commit) == 0 {
            tokio::task::yield_now().await;
        }
        commit
    }
}

/// A group's timer work waits for that group's commit gate, so a commit stuck in the store
/// holds up that group's expiry, but never another group's: the due groups of one run are
/// worked on concurrently.
#[tokio::test]
async fn a_commit_stuck_in_the_store_does_not_delay_other_groups_timers() {
    let h = harness_with(|b| b.session_timeout_ms(100));
    let a = h.c.join("a-stuck", "m1", &["orders"]).await.unwrap();
    h.c.join("b-other", "m1", &["orders"]).await.unwrap();
    let hold = h.store.hold(StoreOp::Commit);
    let commit = h.stuck_commit("a-stuck", "m1", a.generation).await;
    h.clock.advance(101);
    let run = {
        let c = h.c.clone();
        tokio::spawn(async move { c.handle_timeout().await })
    };
    // b-other's member is expired while a-stuck's commit is still in the store.
    tokio::time::timeout(Duration::from_secs(10), async {
        while h.c.state("b-other").await.unwrap() != GroupState::Empty {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("b-other's expiry waited for a-stuck's commit");
    assert_eq!(h.c.state("a-stuck").await.unwrap(), GroupState::Stable);
    assert!(
        !run.is_finished(),
        "a-stuck's expiry did not wait for its gate"
    );
    // A second run meanwhile finds nothing to do: the first took a-stuck's work.
    assert!(h.c.handle_timeout().await.is_empty());
    drop(hold);
    commit.await.unwrap().unwrap();
    let expired = run.await.unwrap();
    let groups: Vec<&str> = expired.iter().map(|e| e.group.as_str()).collect();
    assert_eq!(groups, ["a-stuck", "b-other"]);
    assert_eq!(h.c.state("a-stuck").await.unwrap(), GroupState::Empty);
}

/// Dropping a timer run while a group's work waits for its gate loses nothing: the group
/// is armed again, and the next run does the work.
#[tokio::test]
async fn a_dropped_timer_run_arms_the_groups_it_had_not_finished() {
    let h = harness_with(|b| b.session_timeout_ms(100));
    let a = h.c.join("a-stuck", "m1", &["orders"]).await.unwrap();
    let hold = h.store.hold(StoreOp::Commit);
    let commit = h.stuck_commit("a-stuck", "m1", a.generation).await;
    h.clock.advance(101);
    let waited = tokio::time::timeout(Duration::from_millis(50), h.c.handle_timeout()).await;
    assert!(waited.is_err(), "the run should wait for a-stuck's gate");
    assert!(
        h.c.poll_timeout().is_some_and(|at| at <= 101),
        "a-stuck is no longer armed after the run was dropped: {:?}",
        h.c.poll_timeout()
    );
    drop(hold);
    commit.await.unwrap().unwrap();
    let expired = h.c.handle_timeout().await;
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert_eq!(h.c.state("a-stuck").await.unwrap(), GroupState::Empty);
}

/// A timer run that waited for a group's gate acts at the time it got it: the sessions a
/// completed barrier renews count from then, not from when the run started.
#[tokio::test]
async fn a_timer_run_that_waited_for_the_gate_counts_new_deadlines_from_when_it_got_it() {
    let h = harness();
    let (leader, _follower, g1) = h.stable_pair("g").await;
    let leader_client = if leader.starts_with("a-") { "a" } else { "b" };
    // A new member joins (rebalance); the leader re-joins; the follower never does.
    let n = h.member_id("g", "c").await;
    let jn = h.spawn_join(join_req("g", &n, "c"));
    let jl = h.spawn_join(join_req("g", &leader, leader_client));
    settle().await;
    // The leader's commit (allowed while PreparingRebalance) is stuck in the store.
    let hold = h.store.hold(StoreOp::Commit);
    let commit = {
        let c = h.c.clone();
        let leader = leader.clone();
        tokio::spawn(async move {
            c.offsets()
                .commit(&commit_req("g", &leader, Some(g1), 5))
                .await
        })
    };
    while h.store.waiting(StoreOp::Commit) == 0 {
        tokio::task::yield_now().await;
    }
    // The barrier's rebalance timeout passes; the run waits for the gate for 20 s more.
    h.clock.advance(REBALANCE as u64 + 1);
    let run = {
        let c = h.c.clone();
        tokio::spawn(async move { c.handle_timeout().await })
    };
    settle().await;
    h.clock.advance(20_000);
    drop(hold);
    commit.await.unwrap().unwrap();
    run.await.unwrap();
    let (jl, jn) = (jl.await.unwrap().unwrap(), jn.await.unwrap().unwrap());
    assert_eq!(jl.generation, jn.generation);
    // Sessions renewed at the barrier run from 50_001: nobody is due 1 ms later.
    let expired = h.tick(1).await;
    assert!(
        expired.is_empty(),
        "members answered a moment ago were expired: {expired:?}"
    );
    let d = h.c.classic().describe("g").await.unwrap();
    assert_eq!(d.members.len(), 2, "{:?}", d.members);
}

/// The retention run deletes offsets with the group's gate held exclusively, so no plain
/// commit runs beside it: a commit that landed after the delete while the run cleared
/// `has_offsets` and removed the group would stay in the store with nothing to expire it.
#[tokio::test]
async fn the_retention_delete_never_runs_beside_a_commit() {
    let clock = ManualClock::new();
    let store = Arc::new(TestStore::default());
    let c = Arc::new(
        Coordinator::builder(
            store.clone(),
            Topics::with(&[("orders", 4)]),
            common::ModuloAssignor::named("modulo"),
        )
        .clock(Arc::new(clock.clone()))
        .offsets_retention_ms(1_000)
        .empty_group_grace_ms(0)
        .build()
        .unwrap(),
    );
    c.offsets()
        .commit(&commit_req("s", "", None, 1))
        .await
        .unwrap();
    clock.advance(1_000);
    let hold_delete = store.hold(StoreOp::Delete);
    let run = {
        let c = c.clone();
        tokio::spawn(async move { c.handle_timeout().await })
    };
    while store.calls(StoreOp::Delete) == 0 {
        tokio::task::yield_now().await;
    }
    // A plain commit now: it shares the gate with the running delete.
    let hold_commit = store.hold(StoreOp::Commit);
    let before = store.calls(StoreOp::Commit);
    let commit = {
        let c = c.clone();
        tokio::spawn(async move { c.offsets().commit(&commit_req("s", "", None, 2)).await })
    };
    for _ in 0..200 {
        if store.calls(StoreOp::Commit) > before {
            break;
        }
        tokio::task::yield_now().await;
    }
    drop(hold_delete);
    run.await.unwrap();
    drop(hold_commit);
    commit.await.unwrap().unwrap();
    let kept = c.committed_offsets("s").await.unwrap();
    // Either the commit was fenced out (not in the store) or the group still tracks it.
    assert!(
        kept.is_empty() || c.group_count() == 1,
        "offsets {kept:?} are in the store but the group was removed: nothing will expire them"
    );
}

/// A timer run removes expired members one by one; the first removal can complete the
/// join phase, which renews everyone's session, so each later member is removed only if
/// still expired: a member answered with a new generation is not removed in the same run.
#[tokio::test]
async fn a_member_answered_by_a_barrier_is_not_removed_in_the_same_timer_run() {
    let h = harness_with(|b| b.new_member_join_timeout_ms(5_000));
    let (leader, _follower, _g1) = h.stable_pair("g").await;
    // t = 0: a new member joins (new-member join timeout 5 s), the leader re-joins, the
    // follower never does (its session ends at 10 s).
    let n = h.member_id("g", "c").await;
    let jn = h.spawn_join(join_req("g", &n, "c"));
    settle().await;
    let leader_client = if leader.starts_with("a-") { "a" } else { "b" };
    let jl = h.spawn_join(join_req("g", &leader, leader_client));
    settle().await;
    // One late timer run at t = 10_001 sees both the follower (session) and the new member
    // (new-member timeout) as due. Kafka would have expired the new member at 5 s already
    // (or, in the other order, renewed it at the barrier).
    h.tick(10_001).await;
    let jl = jl.await.unwrap();
    let jn = jn.await.unwrap();
    // Members are removed in id order: the follower's removal completes the barrier, which
    // answers the new member and renews its session, so it must not be removed after.
    let joined = jn.expect("the barrier answered the new member with the new generation");
    let leader_joined = jl.expect("the barrier answered the leader");
    assert_eq!(joined.generation, leader_joined.generation);
    let d = h.c.classic().describe("g").await.unwrap();
    assert!(
        d.members.iter().any(|m| m.member_id == n),
        "{n} got generation {:?} and was removed in the same run (state {:?})",
        joined.generation,
        d.state
    );
}

/// ListGroups and DescribeGroups report one protocol type for one group: a chapter group
/// that became Empty is a consumer group in both (DescribeGroups said "" before).
#[tokio::test]
async fn list_and_describe_report_the_same_protocol_type() {
    let h = harness();
    h.c.join("chapter", "m1", &["orders"]).await.unwrap();
    h.c.leave("chapter", "m1").await.unwrap();
    h.c.offsets()
        .commit(&commit_req("simple", "", None, 3))
        .await
        .unwrap();
    let (_leader, _follower, _g) = h.stable_pair("classic").await;
    let listed = h.c.list_groups().await;
    assert_eq!(listed.len(), 3, "{listed:?}");
    for l in &listed {
        let d = h.c.classic().describe(&l.group_id).await.unwrap();
        assert_eq!(
            (d.protocol_type.as_str(), d.state),
            (l.protocol_type.as_str(), l.state),
            "{}",
            l.group_id
        );
    }
    let types: Vec<&str> = listed.iter().map(|l| l.protocol_type.as_str()).collect();
    assert_eq!(types, ["consumer", "consumer", ""]);
}

/// A Stable classic group's durable record holds what a restart must know: generation,
/// leader, protocol, and each member with its protocols and installed assignment.
#[tokio::test]
async fn a_stable_groups_record_holds_generation_leader_protocol_and_assignments() {
    let h = harness();
    assert_eq!(h.c.group_record("g"), None);
    let (leader, follower, generation) = h.stable_pair("g").await;
    let record = h.c.group_record("g").expect("a record");
    assert_eq!(
        (
            record.kind,
            record.generation,
            record.state,
            record.protocol_type.as_str(),
            record.protocol.as_deref(),
            record.leader.as_deref(),
        ),
        (
            GroupKind::Classic,
            generation,
            GroupState::Stable,
            "consumer",
            Some("range"),
            Some(leader.as_str()),
        )
    );
    let ids: Vec<&str> = record
        .members
        .iter()
        .map(|m| m.member_id.as_str())
        .collect();
    let mut expected = vec![leader.as_str(), follower.as_str()];
    expected.sort_unstable();
    assert_eq!(ids, expected);
    let of = |id: &str| record.members.iter().find(|m| m.member_id == id).unwrap();
    assert_eq!(
        of(&leader).assignment,
        assignment(&leader, &[0, 1]).assignment
    );
    assert_eq!(
        of(&follower).assignment,
        assignment(&follower, &[2, 3]).assignment
    );
    assert_eq!(of(&leader).protocols[0].name, "range");
    // After the members leave, the record says the group is Empty at the next generation.
    h.c.classic()
        .leave(
            "g",
            &[
                LeavingMember {
                    member_id: leader.clone(),
                    group_instance_id: None,
                },
                LeavingMember {
                    member_id: follower.clone(),
                    group_instance_id: None,
                },
            ],
        )
        .await
        .unwrap();
    h.tick(0).await;
    let empty = h.c.group_record("g").unwrap();
    assert!(empty.members.is_empty(), "{empty:?}");
    assert!(empty.generation > generation);
}

/// A chapter group's record names its strategy and each member's topics and partitions.
#[tokio::test]
async fn a_chapter_groups_record_names_strategy_topics_and_partitions() {
    let h = harness();
    let joined = h.c.join("chapter", "m1", &["orders"]).await.unwrap();
    let record = h.c.group_record("chapter").unwrap();
    assert_eq!(
        (record.kind, record.generation, record.state),
        (GroupKind::Chapter, joined.generation, GroupState::Stable)
    );
    assert_eq!(record.members.len(), 1);
    assert_eq!(record.members[0].partitions, joined.partitions);
    assert_eq!(
        record.members[0].protocols[0].topics.as_deref(),
        Some(&["orders".to_string()][..])
    );
    assert_eq!(
        record.protocol.as_deref(),
        h.c.strategies().first().copied()
    );
}

// ====================================================================== durable records

impl H {
    /// Two members through a completed join, before any SyncGroup: (leader, follower,
    /// generation).
    async fn joined_pair(&self, group: &str) -> (String, String, Generation) {
        let a = self.member_id(group, "a").await;
        let b = self.member_id(group, "b").await;
        let ja = self.spawn_join(join_req(group, &a, "a"));
        let jb = self.spawn_join(join_req(group, &b, "b"));
        self.tick(0).await;
        let (ra, _) = (ja.await.unwrap().unwrap(), jb.await.unwrap().unwrap());
        let (leader, follower) = if ra.leader == a { (a, b) } else { (b, a) };
        (leader, follower, ra.generation)
    }

    /// The records the store holds now.
    fn stored_records(&self) -> Vec<coordinator_core::GroupRecord> {
        let inner = self.store.inner().expect("the store");
        let records = inner.records.lock().unwrap();
        records.values().cloned().collect()
    }

    /// A second coordinator over the same store (a broker restarted on its data), loaded.
    async fn restarted(&self) -> H {
        let inner = self.store.inner().expect("the store");
        let clock = self.clock.clone();
        let store = Arc::new(TestStore::from_arc(inner));
        let c = Coordinator::builder(
            store.clone(),
            Topics::with(&[("orders", 4)]),
            common::ModuloAssignor::named("modulo"),
        )
        .clock(Arc::new(clock.clone()))
        .member_ids(Arc::new(SequentialMemberIds::new()))
        .group_min_session_timeout_ms(100)
        .group_max_session_timeout_ms(60_000)
        .group_initial_rebalance_delay_ms(0)
        .build()
        .unwrap();
        c.load().await.unwrap();
        H {
            c: Arc::new(c),
            clock,
            store,
        }
    }
}

#[tokio::test]
async fn the_leaders_assignment_is_stored_before_any_member_hears_of_it() {
    let h = harness();
    let (leader, follower, generation) = h.joined_pair("g").await;
    let hold = h.store.hold(StoreOp::WriteGroup);
    let f = h.spawn_sync(sync_req("g", &follower, generation));
    let mut s = sync_req("g", &leader, generation);
    s.assignments = vec![assignment(&leader, &[0, 1]), assignment(&follower, &[2, 3])];
    let l = h.spawn_sync(s);
    settle().await;
    assert_eq!(
        h.store.waiting(StoreOp::WriteGroup),
        1,
        "the record is being written"
    );
    assert!(
        !f.is_finished() && !l.is_finished(),
        "nobody hears of the assignment before the store has it"
    );
    assert_eq!(h.state("g").await, GroupState::CompletingRebalance);
    assert!(h.stored_records().is_empty());
    drop(hold);
    let (fr, lr) = (f.await.unwrap().unwrap(), l.await.unwrap().unwrap());
    assert_eq!(&*fr.assignment, format!("{follower}:[2, 3]").as_bytes());
    assert_eq!(&*lr.assignment, format!("{leader}:[0, 1]").as_bytes());
    assert_eq!(h.state("g").await, GroupState::Stable);
    let stored = h.stored_records();
    assert_eq!(stored.len(), 1);
    assert_eq!(Some(&stored[0]), h.c.group_record("g").as_ref());
    assert_eq!(stored[0].generation, generation);
    assert_eq!(stored[0].state, GroupState::Stable);
}

#[tokio::test]
async fn a_restarted_coordinator_carries_a_stable_group_on_without_a_rebalance() {
    let h = harness();
    let (leader, follower, generation) = h.stable_pair("g").await;
    let before = h.c.classic().describe("g").await.unwrap();
    let r = h.restarted().await;
    let after = r.c.classic().describe("g").await.unwrap();
    assert_eq!(
        after, before,
        "the same generation, leader, protocol, members, assignments"
    );
    assert_eq!(after.state, GroupState::Stable);
    // Members that come back with their generation carry on.
    for m in [&leader, &follower] {
        r.c.classic()
            .heartbeat("g", m, None, Some(generation))
            .await
            .unwrap();
    }
    // A follower that rejoins unchanged is answered at once, with the same generation.
    let again =
        r.c.classic()
            .join(join_req("g", &follower, "b"))
            .await
            .unwrap();
    assert_eq!(again.generation, generation);
    assert_eq!(r.state("g").await, GroupState::Stable);
    // A commit of the loaded generation is accepted.
    r.c.offsets()
        .commit(&commit_req("g", &leader, Some(generation), 5))
        .await
        .unwrap();
    // The follower never heartbeats again: its session, counted from the load, expires.
    r.clock.advance(SESSION as u64 / 2);
    r.c.classic()
        .heartbeat("g", &leader, None, Some(generation))
        .await
        .unwrap();
    let expired = r.tick(SESSION as u64 / 2 + 1).await;
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert_eq!(expired[0].member, follower);
    assert_eq!(r.state("g").await, GroupState::PreparingRebalance);
}

#[tokio::test]
async fn a_failed_record_write_fails_every_sync_and_the_group_joins_again() {
    let h = harness();
    let (leader, follower, generation) = h.joined_pair("g").await;
    h.store.fail(
        StoreOp::WriteGroup,
        coordinator_core::StorageErrorKind::Io,
        "disk full",
    );
    let f = h.spawn_sync(sync_req("g", &follower, generation));
    settle().await;
    let mut s = sync_req("g", &leader, generation);
    s.assignments = vec![assignment(&leader, &[0, 1]), assignment(&follower, &[2, 3])];
    assert_eq!(code(h.c.classic().sync(s).await), "STORAGE_ERROR");
    assert_eq!(code(f.await.unwrap()), "STORAGE_ERROR");
    assert_eq!(h.state("g").await, GroupState::PreparingRebalance);
    assert!(h.stored_records().is_empty(), "nothing was stored");
    assert_eq!(
        h.c.group_record("g").unwrap().members[0].assignment.len(),
        0
    );
}

#[tokio::test]
async fn a_leader_sync_dropped_while_its_record_is_written_leaves_nobody_parked() {
    let h = harness();
    let (leader, follower, generation) = h.joined_pair("g").await;
    let hold = h.store.hold(StoreOp::WriteGroup);
    let f = h.spawn_sync(sync_req("g", &follower, generation));
    let mut s = sync_req("g", &leader, generation);
    s.assignments = vec![assignment(&leader, &[0, 1]), assignment(&follower, &[2, 3])];
    let l = h.spawn_sync(s);
    settle().await;
    l.abort();
    assert!(l.await.unwrap_err().is_cancelled());
    let answer = tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .expect("the follower is answered")
        .unwrap();
    assert!(answer.is_err(), "{answer:?}");
    assert_eq!(h.state("g").await, GroupState::PreparingRebalance);
    drop(hold);
}

#[tokio::test]
async fn an_emptied_group_stores_its_new_generation_and_a_deleted_one_its_tombstone() {
    let h = harness();
    let (id, generation) = h.stable_alone("g", "a").await;
    assert_eq!(h.stored_records().len(), 1);
    h.c.classic()
        .leave(
            "g",
            &[LeavingMember {
                member_id: id.clone(),
                group_instance_id: None,
            }],
        )
        .await
        .unwrap();
    assert_eq!(h.state("g").await, GroupState::Empty);
    let stored = h.stored_records();
    assert_eq!(stored.len(), 1);
    assert!(stored[0].members.is_empty(), "{stored:?}");
    assert_eq!(stored[0].generation, generation.next());
    // Loaded again, the Empty group continues its generations.
    let r = h.restarted().await;
    assert_eq!(r.state("g").await, GroupState::Empty);
    let (_, next) = r.stable_alone("g", "b").await;
    assert_eq!(next, generation.next().next());
    drop(r);
    h.c.delete_group("g").await.unwrap();
    assert!(h.stored_records().is_empty(), "the tombstone removed it");
}

/// A consumer that never joined commits with a member id it made up and generation (or, from
/// OffsetCommit v9, member epoch) −1, as librdkafka's consumers do: Kafka's coordinator accepts
/// it while the group is absent (creating a simple group) or Empty, and answers UNKNOWN_MEMBER
/// once the group has members (ClassicGroup.validateOffsetCommit).
#[tokio::test]
async fn a_commit_without_a_generation_from_a_made_up_member_lands_while_the_group_is_empty() {
    let h = harness();
    let made_up = |group: &str, offset: i64| commit_req(group, "rdkafka-made-up", None, offset);
    let epoch = |group: &str, offset: i64| OffsetCommitRequest {
        authority: CommitAuthority::MemberEpoch {
            member_id: "rdkafka-made-up".into(),
            member_epoch: -1,
        },
        ..commit_req(group, "", None, offset)
    };
    h.c.offsets().commit(&made_up("absent", 3)).await.unwrap();
    h.c.offsets().commit(&epoch("absent-v9", 4)).await.unwrap();
    // the simple group they created is Empty: the next one lands too
    h.c.offsets().commit(&made_up("absent", 5)).await.unwrap();
    h.c.offsets().commit(&epoch("absent", 6)).await.unwrap();
    let tp = TopicPartition::new("orders", 0);
    assert_eq!(h.c.committed("absent", &tp).await.unwrap(), Some(6));
    assert_eq!(h.c.committed("absent-v9", &tp).await.unwrap(), Some(4));
    // a group with members does not know the made-up member
    h.stable_alone("g", "a").await;
    assert_eq!(
        code(h.c.offsets().commit(&made_up("g", 7)).await),
        "UNKNOWN_MEMBER"
    );
    assert_eq!(
        code(h.c.offsets().commit(&epoch("g", 7)).await),
        "UNKNOWN_MEMBER"
    );
    // a member epoch that is not negative still needs a group
    let member = OffsetCommitRequest {
        authority: CommitAuthority::MemberEpoch {
            member_id: "m".into(),
            member_epoch: 1,
        },
        ..commit_req("nobody", "", None, 7)
    };
    assert_eq!(
        code(h.c.offsets().commit(&member).await),
        "GROUP_ID_NOT_FOUND"
    );
}

// ====================================================================== forced rebalance

#[tokio::test]
async fn a_forced_rebalance_of_a_stable_group_makes_heartbeats_rebalance_in_progress() {
    let h = harness();
    let (leader, follower, generation) = h.stable_pair("g").await;
    assert!(h.c.classic().rebalance("g", "a test").await.unwrap());
    assert_eq!(h.state("g").await, GroupState::PreparingRebalance);
    for m in [&leader, &follower] {
        assert_eq!(
            code(
                h.c.classic()
                    .heartbeat("g", m, None, Some(generation))
                    .await
            ),
            "REBALANCE_IN_PROGRESS"
        );
    }
    assert!(
        !h.c.classic().rebalance("g", "again").await.unwrap(),
        "already rebalancing: nothing more"
    );
    assert_eq!(
        code(h.c.classic().rebalance("nope", "a test").await),
        "GROUP_ID_NOT_FOUND"
    );
}
