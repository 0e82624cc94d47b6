//! The broker's timers on a clock a test moves (`--manual-clock`).
//!
//! With a manual clock the group coordinator and the transaction coordinator read a
//! [`ManualClock`] that starts at the wall-clock time of the start and moves only when
//! [`ManualTimers::advance`] is called (from [`Faults::advance_clock`](crate::faults::Faults::advance_clock)
//! or the control port's `advance_clock`). Nothing expires by itself: a member whose client
//! stopped keeps its session until the test moves time past it, and then it expires at once,
//! before the call answers, so the test needs no sleeps.
//!
//! Work the core arms for *now* (a classic group whose initial rebalance delay is 0, a
//! follow-up rebalance of a cooperative hand-over) still runs at once: a task waits for the
//! core's [`timeout_changed`](Coordinator::timeout_changed) and runs what is due at the
//! clock's time. That task and [`advance`](ManualTimers::advance) take the same lock, so when
//! `advance` answers, everything due at the new time has run, and the members it expired
//! are all in its answer.
//!
//! This is the timers of kfake's and librdkafka's mock cluster's tests made explicit: neither
//! has a clock a test moves (the mock's session timeouts run on real time); Kafka's own
//! coordinator tests use a `MockTime` the same way.

use std::sync::Arc;

use coordinator_core::txn::TransactionCoordinator;
use coordinator_core::{Clock, Coordinator, ExpiredMember, ManualClock};
use serde::Serialize;
use tokio::sync::{watch, Mutex};
use tracing::{debug, warn};

/// How long the timer task waits before it runs work due at the same instant again.
const RERUN_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

/// The manual clock and the coordinators whose timers follow it.
#[derive(Debug)]
pub struct ManualTimers {
    clock: ManualClock,
    coordinator: Arc<Coordinator>,
    txn: Arc<TransactionCoordinator>,
    /// Held while timers run, by the task and by `advance`.
    running: Mutex<()>,
}

/// What [`ManualTimers::advance`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ClockAdvanced {
    /// The clock's time after the advance, in milliseconds since the Unix epoch (it started
    /// at the wall-clock time of the broker's start).
    pub now_ms: u64,
    /// The members whose session expired (or whose rebalance timeout passed), by group id
    /// then member id.
    pub expired: Vec<ExpiredMemberId>,
    /// Transactional ids whose transaction timed out and was aborted (their producer fenced).
    pub transactions_aborted: Vec<String>,
    /// Transactional ids removed after `transactional.id.expiration.ms` idle.
    pub transactional_ids_expired: Vec<String>,
}

/// One expired member: its group and member id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExpiredMemberId {
    /// The group id.
    pub group: String,
    /// The member id.
    pub member: String,
}

impl From<ExpiredMember> for ExpiredMemberId {
    fn from(e: ExpiredMember) -> Self {
        ExpiredMemberId {
            group: e.group,
            member: e.member,
        }
    }
}

impl ManualTimers {
    /// Timers of `coordinator` and `txn`, which must have been built with `clock`.
    pub(crate) fn new(
        clock: ManualClock,
        coordinator: Arc<Coordinator>,
        txn: Arc<TransactionCoordinator>,
    ) -> ManualTimers {
        ManualTimers {
            clock,
            coordinator,
            txn,
            running: Mutex::new(()),
        }
    }

    /// The clock's time in milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Moves the clock `ms` forward (saturating) and runs every timer due at the new time
    /// before answering: session expiries and the rebalances they start, rebalance and join
    /// timeouts, offsets retention, transaction timeouts (checked at most once per
    /// `--transaction-abort-timed-out-cleanup-interval-ms` of this clock, as Kafka's).
    /// 0 moves nothing and runs what is due now.
    pub async fn advance(&self, ms: u64) -> ClockAdvanced {
        let _running = self.running.lock().await;
        let now_ms = self.clock.advance(ms);
        let expired = self.coordinator.handle_timeout().await;
        let txn = self.txn.handle_timeout().await;
        debug!(
            advanced_ms = ms,
            now_ms,
            expired = expired.len(),
            "manual clock advanced"
        );
        ClockAdvanced {
            now_ms,
            expired: expired.into_iter().map(ExpiredMemberId::from).collect(),
            transactions_aborted: txn.aborted,
            transactional_ids_expired: txn.expired,
        }
    }

    /// Runs the work the core arms for the clock's current time (never later: the clock
    /// does not move by itself) until `stopped` changes.
    pub(crate) fn spawn(self: &Arc<Self>) -> ManualTimersTask {
        let (stop, mut stopped) = watch::channel(false);
        let timers = self.clone();
        let task = tokio::spawn(async move {
            loop {
                let due_now = timers
                    .coordinator
                    .poll_timeout()
                    .is_some_and(|at| at <= timers.clock.now_ms());
                if !due_now {
                    tokio::select! {
                        _ = stopped.changed() => return,
                        () = timers.coordinator.timeout_changed() => continue,
                    }
                }
                {
                    let _running = timers.running.lock().await;
                    let expired = timers.coordinator.handle_timeout().await;
                    if !expired.is_empty() {
                        debug!(members = expired.len(), "timer run expired members");
                    }
                }
                // Work that keeps arming itself at the same instant (the core runs a few
                // passes per call) waits a little, rather than spinning on a clock that does
                // not move.
                tokio::select! {
                    _ = stopped.changed() => return,
                    () = timers.coordinator.timeout_changed() => {}
                    () = tokio::time::sleep(RERUN_PAUSE) => {}
                }
            }
        });
        ManualTimersTask { stop, task }
    }
}

/// The task of [`ManualTimers::spawn`].
pub(crate) struct ManualTimersTask {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl ManualTimersTask {
    /// Stops the task and waits for it.
    pub(crate) async fn shutdown(self) {
        let _ = self.stop.send(true);
        if let Err(e) = self.task.await {
            warn!(error = %e, "the manual clock's timer task failed");
        }
    }
}
