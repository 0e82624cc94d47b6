//! The `Clock` port: where the coordinator's notion of "now" comes from.
//!
//! The coordinator never reads the operating system's clock; it asks a [`Clock`]. Two
//! implementations ship here: [`ManualClock`] for tests and labs, and [`MonotonicClock`] for
//! production, which is built on [`std::time::Instant`] so a wall-clock jump (NTP step,
//! operator `date -s`) can neither expire every member at once nor keep dead ones alive.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A source of the current time in milliseconds.
///
/// # To ensure correctness
/// - `now_ms` never decreases between two calls (monotonic). Session deadlines are
///   `now + session_timeout`; a clock that goes backwards would keep expired members alive,
///   and one that jumps forwards expires live members.
/// - The epoch is arbitrary but fixed for the clock's lifetime; only differences matter.
/// - `now_ms` is cheap and does not block: it is called under a group's lock.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
pub trait Clock: Send + Sync {
    /// Milliseconds since the clock's epoch.
    fn now_ms(&self) -> u64;
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }
}

/// A clock that moves only when told to. Starts at 0 and never moves backwards.
///
/// Clones share the same time, so a test can keep one handle and give another to the
/// coordinator.
///
/// ```
/// use coordinator_core::{Clock, ManualClock};
/// let clock = ManualClock::new();
/// assert_eq!(clock.now_ms(), 0);
/// clock.advance(100);
/// assert_eq!(clock.now_ms(), 100);
/// assert!(clock.set(50).is_err()); // never backwards
/// assert_eq!(clock.now_ms(), 100);
/// ```
#[derive(Clone, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at 0 ms.
    pub fn new() -> Self {
        ManualClock::default()
    }

    /// Moves the clock forward by `ms` (saturating at `u64::MAX`) and returns the new time.
    pub fn advance(&self, ms: u64) -> u64 {
        let mut current = self.now.load(Ordering::Acquire);
        loop {
            let next = current.saturating_add(ms);
            match self
                .now
                .compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return next,
                Err(seen) => current = seen,
            }
        }
    }

    /// Sets the clock to `ms`. Refused (and nothing changes) if that is earlier than now.
    pub fn set(&self, ms: u64) -> Result<(), ClockWentBackwards> {
        let mut current = self.now.load(Ordering::Acquire);
        loop {
            if ms < current {
                return Err(ClockWentBackwards {
                    now_ms: current,
                    requested_ms: ms,
                });
            }
            match self
                .now
                .compare_exchange_weak(current, ms, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(()),
                Err(seen) => current = seen,
            }
        }
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::Acquire)
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("now_ms", &self.now_ms())
            .finish()
    }
}

/// [`ManualClock::set`] was asked to move the clock backwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "a ManualClock never moves backwards: it is at {now_ms} ms, {requested_ms} ms was requested"
)]
pub struct ClockWentBackwards {
    /// The clock's time when the call was made.
    pub now_ms: u64,
    /// The refused time.
    pub requested_ms: u64,
}

/// Milliseconds elapsed since the clock was created, from the OS monotonic clock
/// ([`Instant`]). Immune to wall-clock steps.
#[derive(Clone, Copy, Debug)]
pub struct MonotonicClock {
    start: Instant,
}

impl MonotonicClock {
    /// A clock whose epoch is now.
    pub fn new() -> Self {
        MonotonicClock {
            start: Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock::new()
    }
}

impl Clock for MonotonicClock {
    fn now_ms(&self) -> u64 {
        millis_between(self.start, Instant::now())
    }
}

/// Whole milliseconds from `start` to `now`: 0 if `now` is earlier, `u64::MAX` if the span
/// does not fit.
fn millis_between(start: Instant, now: Instant) -> u64 {
    u64::try_from(now.saturating_duration_since(start).as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_is_shared_between_clones() {
        let a = ManualClock::new();
        let b = a.clone();
        a.advance(7);
        assert_eq!(b.now_ms(), 7);
        b.set(9).expect("forward");
        assert_eq!(a.now_ms(), 9);
    }

    #[test]
    fn manual_clock_refuses_to_go_back_and_saturates() {
        let c = ManualClock::new();
        c.advance(10);
        let err = c.set(3).expect_err("backwards");
        assert_eq!(
            err,
            ClockWentBackwards {
                now_ms: 10,
                requested_ms: 3
            }
        );
        assert_eq!(c.now_ms(), 10);
        assert_eq!(c.advance(u64::MAX), u64::MAX);
    }

    #[test]
    fn monotonic_clock_counts_whole_milliseconds_from_its_epoch() {
        use std::time::Duration;
        let start = Instant::now();
        let at = |d: Duration| millis_between(start, start + d);
        assert_eq!(at(Duration::ZERO), 0);
        assert_eq!(
            at(Duration::from_micros(999)),
            0,
            "partial milliseconds are dropped"
        );
        assert_eq!(at(Duration::from_millis(1500)), 1500);
        assert_eq!(at(Duration::from_secs(86_400 * 365)), 31_536_000_000);
        assert_eq!(
            millis_between(start + Duration::from_secs(5), start),
            0,
            "an instant before the epoch reads as 0, never wraps"
        );
    }

    #[test]
    fn copies_of_a_monotonic_clock_share_its_epoch() {
        let a = MonotonicClock::new();
        let b = a;
        assert_eq!(a.start, b.start);
        let later = MonotonicClock::new();
        assert!(
            later.start >= a.start,
            "each clock's epoch is when it was made"
        );
    }
}
