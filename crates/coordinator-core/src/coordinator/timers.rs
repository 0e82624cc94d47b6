//! The coordinator's deadlines: one min-heap of (time, group), armed lazily.
//!
//! Every group keeps in its entry the time of the one heap entry that is live for it
//! (`armed`). Arming an earlier time pushes a new entry and makes the old one stale; a stale
//! entry is skipped when it pops. Deadlines that move *later* (a heartbeat extending a
//! lease) do not touch the heap: the live entry fires early, the group finds nothing due and
//! arms its real next deadline. So a heartbeat costs no heap work, and a timer run costs
//! O(log n) per due entry plus the work of the groups that are due — never a scan of every
//! group.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// The heap of deadlines.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<(u64, Arc<str>)>>,
}

impl Timers {
    /// Pushes `(at, group)`. Returns whether it is now the earliest deadline (a driver
    /// sleeping until a later one must be woken).
    pub(crate) fn push(&mut self, at: u64, group: Arc<str>) -> bool {
        let earliest = self.next().is_none_or(|next| at < next);
        self.heap.push(Reverse((at, group)));
        earliest
    }

    /// The earliest deadline, if any (possibly a stale entry: waking for it is harmless).
    pub(crate) fn next(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// Pops every entry due at `now` (`at <= now`).
    pub(crate) fn pop_due(&mut self, now: u64) -> Vec<(u64, Arc<str>)> {
        let mut due = Vec::new();
        while let Some(Reverse((at, _))) = self.heap.peek() {
            if *at > now {
                break;
            }
            if let Some(Reverse(entry)) = self.heap.pop() {
                due.push(entry);
            }
        }
        due
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_only_what_is_due_in_time_order() {
        let mut t = Timers::default();
        assert!(t.push(30, Arc::from("c")));
        assert!(t.push(10, Arc::from("a")));
        assert!(!t.push(20, Arc::from("b")));
        assert_eq!(t.next(), Some(10));
        let due: Vec<(u64, String)> = t
            .pop_due(20)
            .into_iter()
            .map(|(at, g)| (at, g.to_string()))
            .collect();
        assert_eq!(due, [(10, "a".to_string()), (20, "b".to_string())]);
        assert_eq!(t.next(), Some(30));
        assert!(t.pop_due(29).is_empty());
        assert_eq!(t.len(), 1);
    }
}
