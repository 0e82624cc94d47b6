//! The share groups' partitions and share sessions (KIP-932) this broker serves as the
//! partitions' leader: one [`SharePartition`] per group and partition (the core's state
//! machine), and one share session per group and member. In memory, bounded: at most
//! [`MAX_SHARE_PARTITIONS`] share-partitions and [`MAX_SHARE_SESSIONS`] sessions (Kafka's
//! `group.share.max.share.sessions` is 2000 per broker); past them a new one is refused
//! (`SHARE_SESSION_LIMIT_REACHED` for a session, as Kafka's cache answers when full).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use coordinator_core::{SharePartition, TopicPartition};

/// The most share-partitions the broker keeps.
pub(crate) const MAX_SHARE_PARTITIONS: usize = 100_000;

/// The most share sessions the broker keeps.
pub(crate) const MAX_SHARE_SESSIONS: usize = 10_000;

/// Kafka's `INVALID_RECORD_STATE`.
pub(crate) const INVALID_RECORD_STATE: i16 = 121;
/// Kafka's `SHARE_SESSION_NOT_FOUND`.
pub(crate) const SHARE_SESSION_NOT_FOUND: i16 = 122;
/// Kafka's `INVALID_SHARE_SESSION_EPOCH`.
pub(crate) const INVALID_SHARE_SESSION_EPOCH: i16 = 123;
/// Kafka's `SHARE_SESSION_LIMIT_REACHED`.
pub(crate) const SHARE_SESSION_LIMIT_REACHED: i16 = 133;

/// A share session's epoch that opens one (Kafka's `ShareRequestMetadata.INITIAL_EPOCH`).
pub(crate) const INITIAL_EPOCH: i32 = 0;
/// A share session's epoch that closes it (`FINAL_EPOCH`).
pub(crate) const FINAL_EPOCH: i32 = -1;

/// One member's share session: the epoch its next request must carry and the partitions
/// it fetches.
#[derive(Debug, Clone, Default)]
pub(crate) struct ShareSession {
    pub(crate) epoch: i32,
    pub(crate) partitions: BTreeSet<TopicPartition>,
}

/// Why a share session refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionRefusal {
    /// No session for this member (`SHARE_SESSION_NOT_FOUND`).
    NotFound,
    /// Another epoch than the session's (`INVALID_SHARE_SESSION_EPOCH`).
    Epoch,
    /// Too many sessions (`SHARE_SESSION_LIMIT_REACHED`).
    Full,
}

impl SessionRefusal {
    pub(crate) fn code(self) -> i16 {
        match self {
            SessionRefusal::NotFound => SHARE_SESSION_NOT_FOUND,
            SessionRefusal::Epoch => INVALID_SHARE_SESSION_EPOCH,
            SessionRefusal::Full => SHARE_SESSION_LIMIT_REACHED,
        }
    }
}

type Key = (String, String);

/// The share-partitions and share sessions. See the [module](self) docs.
#[derive(Debug, Default)]
pub(crate) struct ShareState {
    partitions: Mutex<HashMap<(String, TopicPartition), SharePartition>>,
    sessions: Mutex<HashMap<Key, ShareSession>>,
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl ShareState {
    /// Runs `f` on `group`'s share-partition of `tp`, made with `new` if there is none (and
    /// room for it): `None` when the broker keeps [`MAX_SHARE_PARTITIONS`] already.
    pub(crate) fn with_partition<R>(
        &self,
        group: &str,
        tp: &TopicPartition,
        new: impl FnOnce() -> SharePartition,
        f: impl FnOnce(&mut SharePartition) -> R,
    ) -> Option<R> {
        let mut map = self
            .partitions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (group.to_string(), tp.clone());
        if !map.contains_key(&key) {
            if map.len() >= MAX_SHARE_PARTITIONS {
                return None;
            }
            map.insert(key.clone(), new());
        }
        map.get_mut(&key).map(f)
    }

    /// Runs `f` on `group`'s share-partition of `tp` if there is one (none is made).
    pub(crate) fn with_existing<R>(
        &self,
        group: &str,
        tp: &TopicPartition,
        f: impl FnOnce(&mut SharePartition) -> R,
    ) -> Option<R> {
        self.partitions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_mut(&(group.to_string(), tp.clone()))
            .map(f)
    }

    /// Opens (or opens again) `member`'s session with `partitions`; the next request must
    /// carry epoch 1.
    pub(crate) fn open(
        &self,
        group: &str,
        member: &str,
        partitions: BTreeSet<TopicPartition>,
    ) -> Result<(), SessionRefusal> {
        let mut map = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (group.to_string(), member.to_string());
        if !map.contains_key(&key) && map.len() >= MAX_SHARE_SESSIONS {
            return Err(SessionRefusal::Full);
        }
        map.insert(
            key,
            ShareSession {
                epoch: 1,
                partitions,
            },
        );
        Ok(())
    }

    /// Checks `epoch` against `member`'s session and moves it on; `update` changes its
    /// partitions. Returns the session's partitions after the update.
    pub(crate) fn advance(
        &self,
        group: &str,
        member: &str,
        epoch: i32,
        update: impl FnOnce(&mut BTreeSet<TopicPartition>),
    ) -> Result<BTreeSet<TopicPartition>, SessionRefusal> {
        let mut map = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let session = map
            .get_mut(&(group.to_string(), member.to_string()))
            .ok_or(SessionRefusal::NotFound)?;
        if session.epoch != epoch {
            return Err(SessionRefusal::Epoch);
        }
        session.epoch = next_epoch(session.epoch);
        update(&mut session.partitions);
        Ok(session.partitions.clone())
    }

    /// Whether `member` has a session.
    pub(crate) fn has_session(&self, group: &str, member: &str) -> bool {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains_key(&(group.to_string(), member.to_string()))
    }

    /// Closes `member`'s session, if it has one, and gives back what it holds in the
    /// session's share-partitions (`release` runs on each that exists; none is made).
    pub(crate) fn close(
        &self,
        group: &str,
        member: &str,
        mut release: impl FnMut(&mut SharePartition),
    ) {
        let closed = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&(group.to_string(), member.to_string()));
        for tp in closed.map(|s| s.partitions).unwrap_or_default() {
            self.with_existing(group, &tp, &mut release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_moves_one_epoch_at_a_time_and_closes() {
        let s = ShareState::default();
        assert_eq!(
            s.advance("g", "m", 1, |_| {}),
            Err(SessionRefusal::NotFound)
        );
        s.open("g", "m", [TopicPartition::new("t", 0)].into())
            .unwrap();
        assert_eq!(s.advance("g", "m", 2, |_| {}), Err(SessionRefusal::Epoch));
        let parts = s
            .advance("g", "m", 1, |p| {
                p.insert(TopicPartition::new("t", 1));
            })
            .unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(s.advance("g", "m", 1, |_| {}), Err(SessionRefusal::Epoch));
        assert!(s.advance("g", "m", 2, |_| {}).is_ok());
        let mut released = 0;
        s.close("g", "m", |_| released += 1);
        assert_eq!(released, 0, "no share-partition exists to release in");
        assert!(!s.has_session("g", "m"));
        assert_eq!(
            next_epoch(i32::MAX),
            1,
            "the epoch wraps to 1, never 0 or -1"
        );
    }
}
