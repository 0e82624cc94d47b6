//! A dropped timer run re-arms a group whose cooperative follow-up was due.
#![allow(clippy::unwrap_used)]
use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{ModuloAssignor, StoreOp, TestStore, Topics};
use coordinator_core::{
    AssignError, Assignment, AssignmentInput, Assignor, Clock, Coordinator, ManualClock,
    TopicPartition,
};

/// The modulo assignment (`common::ModuloAssignor`), except that a partition another member
/// still owns is withheld (left unowned) until the follow-up: a cooperative strategy.
struct Coop(Arc<ModuloAssignor>);
impl Assignor for Coop {
    fn name(&self) -> &str {
        "coop"
    }
    fn assign(&self, input: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
        let mut out = self.0.assign(input)?;
        for m in 0..input.member_count() as u32 {
            for &p in input.owned(m) {
                if out.owner(p).is_some_and(|o| o != m) {
                    out.clear_owner(p);
                }
            }
        }
        Ok(out)
    }
}

#[tokio::test]
async fn a_dropped_timer_run_rearms_a_due_followup() {
    let clock = ManualClock::new();
    let store = Arc::new(TestStore::default());
    let c = Arc::new(
        Coordinator::builder(
            store.clone(),
            Topics::with(&[("t", 4)]),
            Arc::new(Coop(ModuloAssignor::named("modulo"))),
        )
        .clock(Arc::new(clock.clone()))
        .session_timeout_ms(10_000)
        .build()
        .unwrap(),
    );
    c.join("g", "m1", &["t"]).await.unwrap();
    let g2 = c.join("g", "m2", &["t"]).await.unwrap(); // withholds 1 and 3 from m1; m1 keeps 0 and 2
    let hold = store.hold(StoreOp::Commit);
    let commit = {
        let c = c.clone();
        let offsets = [(TopicPartition::new("t", 0), 1)].into();
        tokio::spawn(async move { c.commit("g", "m1", g2.generation, &offsets).await })
    };
    for _ in 0..1000 {
        if store.waiting(StoreOp::Commit) > 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(
        store.waiting(StoreOp::Commit) > 0,
        "the commit reached the store"
    );
    // m1 acknowledges: the follow-up is due, but a commit holds the gate: armed at now.
    c.assignment("g", "m1").await.unwrap();
    let now = clock.now_ms();
    assert_eq!(c.poll_timeout(), Some(now), "follow-up armed at once");
    // A timer run takes the group, waits for the gate, and is dropped (a caller's timeout).
    let run = tokio::time::timeout(Duration::from_millis(20), c.handle_timeout()).await;
    assert!(run.is_err(), "the run waited for the commit's gate");
    // "Dropping the future ... loses nothing": the follow-up must still be armed now.
    assert_eq!(
        c.poll_timeout(),
        Some(now),
        "the dropped run re-armed the group only at its next session deadline"
    );
    drop(hold);
    commit.await.unwrap().unwrap();
}
