//! # coordinator-driver
//!
//! The coordinator core is sans-IO: it never sleeps, spawns or reads the operating system's
//! clock. It says when it next needs attention
//! ([`Coordinator::poll_timeout`](coordinator_core::Coordinator::poll_timeout), in its
//! [`Clock`](coordinator_core::Clock)'s milliseconds) and does everything due when called
//! ([`Coordinator::handle_timeout`](coordinator_core::Coordinator::handle_timeout)), the
//! shape of quinn-proto's `poll_timeout` / `handle_timeout`. This crate is the small adapter
//! that runs it live: one tokio task that sleeps until the next deadline, or until the core
//! signals an earlier one ([`Coordinator::timeout_changed`](coordinator_core::Coordinator::timeout_changed)),
//! then calls `handle_timeout`. A run whose group waits for its commit gate (a commit slow
//! in the offset store) is handed to a task of its own after its first poll has taken the
//! due work, so one slow group never delays another group's deadlines.
//!
//! ```text
//!   broker, labs ──► coordinator-driver ──► coordinator-core
//! ```
//!
//! Tests do not need it: with a [`ManualClock`](coordinator_core::ManualClock) they advance
//! time and call `handle_timeout` themselves, deterministically.
//!
//! ```
//! # use std::sync::Arc;
//! # use std::collections::BTreeMap;
//! # use coordinator_core::Coordinator;
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let topics: BTreeMap<String, u32> = [("orders".to_string(), 4)].into();
//! let coordinator = Arc::new(
//!     Coordinator::builder(
//!         Arc::new(offset_store::MemoryStore::new()),
//!         Arc::new(topics),
//!         Arc::new(assignor::RangeAssignor),
//!     )
//!     .session_timeout_ms(10_000)
//!     .build()?,
//! );
//! let driver = coordinator_driver::Driver::spawn(coordinator.clone());
//! // ... serve requests; sessions now expire by themselves ...
//! driver.shutdown().await;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use std::future::Future;
use std::task::Poll;

use coordinator_core::{Coordinator, ExpiredMember};
use tokio::sync::watch;
use tokio::task::{JoinError, JoinHandle, JoinSet};

/// The longest the driver sleeps without asking the core again, as a guard against a clock
/// whose milliseconds do not match the runtime's (a `ManualClock` moved by hand).
const MAX_SLEEP: Duration = Duration::from_secs(1);

/// A running timer task; see the [crate docs](crate).
pub struct Driver {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver")
            .field("running", &!self.task.is_finished())
            .finish()
    }
}

impl Driver {
    /// Spawns the timer task on the current tokio runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime (as `tokio::spawn` does).
    pub fn spawn(coordinator: Arc<Coordinator>) -> Driver {
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(run(coordinator, stopped));
        Driver { stop, task }
    }

    /// Stops the task and waits for it. A timer run still waiting for a group's commit gate
    /// is cancelled (the core arms that group again), so a stuck store write cannot hold
    /// up shutdown.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        if let Err(e) = self.task.await {
            tracing::warn!(error = %e, "the coordinator's timer task ended abnormally");
        }
    }
}

async fn run(coordinator: Arc<Coordinator>, mut stopped: watch::Receiver<bool>) {
    // Timer runs still waiting for a group's commit gate (a commit slow in the store).
    let mut waiting = JoinSet::new();
    loop {
        while let Some(done) = waiting.try_join_next() {
            report(done);
        }
        let now = coordinator.clock().now_ms();
        let sleep = match coordinator.poll_timeout() {
            Some(at) if at <= now => Duration::ZERO,
            Some(at) => Duration::from_millis(at - now).min(MAX_SLEEP),
            None => MAX_SLEEP,
        };
        if !sleep.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(sleep) => {}
                _ = coordinator.timeout_changed() => {}
                Some(done) = waiting.join_next(), if !waiting.is_empty() => {
                    report(done);
                    continue;
                }
                _ = stopped.changed() => break,
            }
        }
        if *stopped.borrow() {
            break;
        }
        // The first poll takes every due deadline off the core's heap and does the work of
        // each group whose gate is free; a group whose gate is held by a commit in the store
        // finishes in a task of its own, so it never delays the next deadline of another.
        let c = coordinator.clone();
        let mut timer_run = Box::pin(async move { c.handle_timeout().await });
        match std::future::poll_fn(|cx| Poll::Ready(timer_run.as_mut().poll(cx))).await {
            Poll::Ready(expired) => report(Ok(expired)),
            Poll::Pending => {
                waiting.spawn(timer_run);
            }
        }
    }
    // A run still waiting for a gate at shutdown may wait for a store write that never
    // ends; runs are cancel-safe (the core re-arms what they had not done), so stop them.
    waiting.abort_all();
    while let Some(done) = waiting.join_next().await {
        if !matches!(&done, Err(e) if e.is_cancelled()) {
            report(done);
        }
    }
}

fn report(done: Result<Vec<ExpiredMember>, JoinError>) {
    match done {
        Ok(expired) if !expired.is_empty() => {
            tracing::debug!(members = expired.len(), "timer run expired members");
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "a timer run ended abnormally"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use coordinator_core::{Clock, GroupState};
    use std::collections::BTreeMap;

    /// Milliseconds of tokio's clock, so a paused runtime drives the coordinator's time too.
    struct TokioClock(tokio::time::Instant);

    impl Clock for TokioClock {
        fn now_ms(&self) -> u64 {
            self.0.elapsed().as_millis() as u64
        }
    }

    fn coordinator(session_ms: u64) -> Arc<Coordinator> {
        let topics: BTreeMap<String, u32> = [("orders".to_string(), 2)].into();
        Arc::new(
            Coordinator::builder(
                Arc::new(offset_store::MemoryStore::new()),
                Arc::new(topics),
                Arc::new(assignor::RangeAssignor),
            )
            .clock(Arc::new(TokioClock(tokio::time::Instant::now())))
            .session_timeout_ms(session_ms)
            .build()
            .unwrap(),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_expires_on_time_without_anyone_calling_expire() {
        let c = coordinator(30);
        let driver = Driver::spawn(c.clone());
        // Let the driver go to sleep with nothing scheduled (it would sleep MAX_SLEEP).
        tokio::time::sleep(Duration::from_millis(5)).await;
        c.join("g", "m1", &["orders"]).await.unwrap();
        // The deadline is 35 ms: the member expires at 36 ms (now > deadline). Only a driver
        // woken by the earlier deadline has done it by 100 ms; one that slept on would wake
        // at 1 s.
        tokio::time::sleep(Duration::from_millis(29)).await;
        assert_eq!(c.state("g").await.unwrap(), GroupState::Stable, "at 34 ms");
        tokio::time::sleep(Duration::from_millis(66)).await;
        assert_eq!(c.state("g").await.unwrap(), GroupState::Empty, "at 100 ms");
        driver.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeats_keep_a_member_alive_and_shutdown_stops_the_task() {
        let c = coordinator(30);
        let driver = Driver::spawn(c.clone());
        let joined = c.join("g", "m1", &["orders"]).await.unwrap();
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            c.heartbeat("g", "m1", joined.generation).await.unwrap();
        }
        assert_eq!(c.state("g").await.unwrap(), GroupState::Stable);
        driver.shutdown().await;
        // Stopped: nothing expires any more.
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(c.state("g").await.unwrap(), GroupState::Stable);
    }

    /// A commit held in the store (the shared `FaultyStore` over a memory store).
    #[tokio::test(start_paused = true)]
    async fn a_commit_stuck_in_one_group_does_not_hold_up_another_groups_deadlines() {
        use coordinator_core::testing::{FaultyStore, StoreOp};
        let store = Arc::new(FaultyStore::<offset_store::MemoryStore>::default());
        let topics: BTreeMap<String, u32> = [("orders".to_string(), 2)].into();
        let c = Arc::new(
            Coordinator::builder(
                store.clone(),
                Arc::new(topics),
                Arc::new(assignor::RangeAssignor),
            )
            .clock(Arc::new(TokioClock(tokio::time::Instant::now())))
            .session_timeout_ms(30)
            .build()
            .unwrap(),
        );
        let driver = Driver::spawn(c.clone());
        let a = c.join("a", "m1", &["orders"]).await.unwrap();
        c.join("b", "m1", &["orders"]).await.unwrap();
        let hold = store.hold(StoreOp::Commit);
        let commit = {
            let c = c.clone();
            let offsets = [(coordinator_core::TopicPartition::new("orders", 0), 1)].into();
            tokio::spawn(async move { c.commit("a", "m1", a.generation, &offsets).await })
        };
        while store.waiting(StoreOp::Commit) == 0 {
            tokio::task::yield_now().await;
        }
        // Both sessions end at 30 ms; a's expiry waits for its gate, b's does not.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(c.state("b").await.unwrap(), GroupState::Empty, "at 100 ms");
        assert_eq!(c.state("a").await.unwrap(), GroupState::Stable);
        // Later deadlines keep firing while a's run still waits.
        c.join("b", "m2", &["orders"]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(c.state("b").await.unwrap(), GroupState::Empty, "at 200 ms");
        drop(hold);
        commit.await.unwrap().unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(c.state("a").await.unwrap(), GroupState::Empty);
        driver.shutdown().await;
    }
}
