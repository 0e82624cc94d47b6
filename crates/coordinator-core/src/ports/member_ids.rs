//! Where new classic members' ids come from: a port, with Kafka's random ids and
//! deterministic ones for tests.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where new members' ids come from: `<prefix>-<unique>`, the prefix being the client id
/// (or the instance id of a static member), as in Kafka.
///
/// # To ensure correctness
/// Ids must never repeat, not even across restarts of the process: a client that kept an
/// old member id must not be taken for a new member that happens to get the same id.
pub trait MemberIdSource: Send + Sync {
    /// A fresh member id starting with `prefix`.
    fn member_id(&self, prefix: &str) -> String;
}

/// Kafka's `<prefix>-<uuid>` ids with random version-4 UUIDs, from std's per-process random
/// keys (`RandomState`, seeded by the operating system) hashed with a counter. The
/// coordinator's default.
pub struct RandomMemberIds {
    keys: RandomState,
    counter: AtomicU64,
}

impl RandomMemberIds {
    /// A source with fresh random keys.
    pub fn new() -> Self {
        RandomMemberIds {
            keys: RandomState::new(),
            counter: AtomicU64::new(0),
        }
    }
}

impl Default for RandomMemberIds {
    fn default() -> Self {
        RandomMemberIds::new()
    }
}

impl fmt::Debug for RandomMemberIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RandomMemberIds").finish_non_exhaustive()
    }
}

impl MemberIdSource for RandomMemberIds {
    fn member_id(&self, prefix: &str) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let hi = self.keys.hash_one((n, 0u8));
        let lo = self.keys.hash_one((n, 1u8));
        uuid_form(prefix, hi, lo)
    }
}

/// Deterministic ids for tests: `<prefix>-00000000-0000-4000-8000-000000000001`,
/// `…-000000000002`, … Unique within one source only: never use it where a member id may
/// outlive the process.
#[derive(Debug, Default)]
pub struct SequentialMemberIds {
    counter: AtomicU64,
}

impl SequentialMemberIds {
    /// A source starting at 1.
    pub fn new() -> Self {
        SequentialMemberIds::default()
    }
}

impl MemberIdSource for SequentialMemberIds {
    fn member_id(&self, prefix: &str) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        uuid_form(prefix, 0, n)
    }
}

/// `prefix-xxxxxxxx-xxxx-4xxx-8xxx-xxxxxxxxxxxx` from 128 bits (version and variant set).
fn uuid_form(prefix: &str, hi: u64, lo: u64) -> String {
    let hi = (hi & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000;
    let lo = (lo & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000;
    format!(
        "{prefix}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xFFFF,
        hi & 0xFFFF,
        lo >> 48,
        lo & 0xFFFF_FFFF_FFFF
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_look_like_kafkas_and_count_up() {
        let ids = SequentialMemberIds::new();
        assert_eq!(
            ids.member_id("client"),
            "client-00000000-0000-4000-8000-000000000001"
        );
        assert_eq!(
            ids.member_id("client"),
            "client-00000000-0000-4000-8000-000000000002"
        );
    }

    #[test]
    fn random_ids_differ_between_sources_and_calls() {
        let (a, b) = (RandomMemberIds::new(), RandomMemberIds::new());
        let (x, y, z) = (a.member_id("c"), a.member_id("c"), b.member_id("c"));
        assert_ne!(x, y);
        assert_ne!(x, z);
        assert!(x.starts_with("c-"));
        assert_eq!(x.len(), "c-".len() + 36);
        assert_eq!(&x[2 + 14..2 + 15], "4", "version 4: {x}");
    }
}
