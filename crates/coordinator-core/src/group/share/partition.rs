//! A share-partition (KIP-932, Kafka's `SharePartition`): which records of one partition a
//! share group has handed out, to whom, until when, and how often. Synchronous and without
//! I/O: the caller reads the records from its log and passes the clock's time.
//!
//! Every offset from the share-partition start offset (SPSO) up to the end offset (SPEO, the
//! next offset never handed out) is in flight and in one state:
//!
//! ```text
//!            acquire (delivery count + 1)
//! Available ───────────────────────────────► Acquired (by one member, until now + lock)
//!     ▲                                         │  accept          ► Acknowledged
//!     │ release, or the lock expires            │  reject, gap     ► Archived
//!     └─────────────────────────────────────────┘  (at the delivery count limit ► Archived)
//! ```
//!
//! The start moves past offsets that are Acknowledged or Archived, so what is in flight is
//! bounded by `max_in_flight` (Kafka's `group.share.partition.max.record.locks`): no new
//! offset is acquired while that many are in flight. Locks expire when the share-partition is
//! next used (an acquisition, an acknowledgement): nothing needs a timer, and what a reader
//! sees is the same as with Kafka's timers.

use std::collections::BTreeMap;

/// How a member acknowledges records (Kafka's `AcknowledgeType`, the numbers of the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AcknowledgeType {
    /// 0: an offset the member did not get a record for (a gap in the log): archived.
    Gap,
    /// 1: processed: the record is acknowledged and never delivered again.
    Accept,
    /// 2: given back: the record becomes available again (its delivery count kept).
    Release,
    /// 3: unprocessable: the record is archived and never delivered again.
    Reject,
}

impl AcknowledgeType {
    /// The type of wire number `v` (0–3), if it is one.
    pub fn from_wire(v: i8) -> Option<AcknowledgeType> {
        match v {
            0 => Some(AcknowledgeType::Gap),
            1 => Some(AcknowledgeType::Accept),
            2 => Some(AcknowledgeType::Release),
            3 => Some(AcknowledgeType::Reject),
            _ => None,
        }
    }
}

/// The limits a share-partition runs with (Kafka's share group configs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharePartitionConfig {
    /// `share.record.lock.duration.ms` (Kafka's default 30000): how long an acquired record
    /// is its member's.
    pub lock_duration_ms: u64,
    /// `group.share.delivery.count.limit` (Kafka's default 5): a record delivered this many
    /// times is archived instead of made available again.
    pub delivery_count_limit: i16,
    /// `group.share.partition.max.record.locks` (Kafka 4.2's default 2000): the most offsets
    /// in flight.
    pub max_in_flight: u64,
}

impl Default for SharePartitionConfig {
    fn default() -> Self {
        SharePartitionConfig {
            lock_duration_ms: 30_000,
            delivery_count_limit: 5,
            max_in_flight: 2_000,
        }
    }
}

/// Offsets `first_offset..=last_offset`, acquired with `delivery_count` (Kafka's
/// `AcquiredRecords`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcquiredRange {
    /// The first offset.
    pub first_offset: i64,
    /// The last offset.
    pub last_offset: i64,
    /// How many times these records have been delivered, this time included.
    pub delivery_count: i16,
}

/// Why an acknowledgement was refused; nothing of it was applied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShareAcknowledgeError {
    /// Kafka's `INVALID_REQUEST` (42): a batch that is not one (last before first, the wrong
    /// number of types, an unknown type).
    #[error("{reason}")]
    InvalidRequest {
        /// Why.
        reason: String,
    },
    /// Kafka's `INVALID_RECORD_STATE` (121): an offset of the batch is not acquired by this
    /// member (never acquired, acknowledged already, another member's, or its lock expired).
    #[error("The record state is invalid. The acknowledgement of delivery could not be completed (offset {offset}).")]
    InvalidRecordState {
        /// The first offset found in another state.
        offset: i64,
    },
}

impl ShareAcknowledgeError {
    /// Kafka's error code: 42 or 121.
    pub fn kafka_code(&self) -> i16 {
        match self {
            ShareAcknowledgeError::InvalidRequest { .. } => 42,
            ShareAcknowledgeError::InvalidRecordState { .. } => 121,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Available,
    Acquired { member: String, until: u64 },
    Acknowledged,
    Archived,
}

#[derive(Clone, Debug)]
struct InFlight {
    state: State,
    delivery_count: i16,
}

/// One share-partition's state. See the [module](self) docs.
#[derive(Clone, Debug)]
pub struct SharePartition {
    start: i64,
    end: i64,
    records: BTreeMap<i64, InFlight>,
}

impl SharePartition {
    /// A share-partition whose first record to deliver is `start_offset` (the log start for
    /// `share.auto.offset.reset=earliest`, the high watermark for `latest`, Kafka's default).
    pub fn new(start_offset: i64) -> SharePartition {
        let start = start_offset.max(0);
        SharePartition {
            start,
            end: start,
            records: BTreeMap::new(),
        }
    }

    /// The share-partition start offset (SPSO): every offset below it is done.
    pub fn start_offset(&self) -> i64 {
        self.start
    }

    /// The share-partition end offset (SPEO): the next offset never handed out.
    pub fn end_offset(&self) -> i64 {
        self.end
    }

    /// How many offsets are in flight (between the start and the end offset).
    pub fn in_flight(&self) -> u64 {
        u64::try_from(self.end - self.start).unwrap_or(0)
    }

    /// How many records are acquired (by any member) now.
    pub fn acquired(&self) -> usize {
        self.records
            .values()
            .filter(|r| matches!(r.state, State::Acquired { .. }))
            .count()
    }

    /// The records deleted below `log_start` (retention, DeleteRecords) are done: the start
    /// moves up to it, as Kafka's does.
    pub fn move_start(&mut self, log_start: i64) {
        if log_start <= self.start {
            return;
        }
        self.records = self.records.split_off(&log_start);
        self.start = log_start;
        self.end = self.end.max(log_start);
    }

    /// Makes the records whose lock expired by `now` available again (archived at the
    /// delivery count limit).
    pub fn expire_locks(&mut self, now: u64, config: &SharePartitionConfig) {
        let limit = config.delivery_count_limit;
        let mut changed = false;
        for r in self.records.values_mut() {
            if matches!(&r.state, State::Acquired { until, .. } if *until <= now) {
                r.state = give_back(r.delivery_count, limit);
                changed = true;
            }
        }
        if changed {
            self.advance();
        }
    }

    /// The first offset an acquisition would hand out now (an available one, else the end
    /// offset), once the locks expired by `now` are given back: where to read the log from.
    pub fn first_deliverable(&mut self, now: u64, config: &SharePartitionConfig) -> i64 {
        self.expire_locks(now, config);
        self.records
            .iter()
            .find(|(_, r)| r.state == State::Available)
            .map_or(self.end, |(&offset, _)| offset)
    }

    /// Acquires for `member`, until `now` + the lock duration, at most `max_records` records
    /// of `within` (the offsets the caller read from its log; its end at most the high
    /// watermark, or the last stable offset for read_committed): first those available again
    /// (their delivery count grows), then new offsets from the end offset, while fewer than
    /// `max_in_flight` are in flight. Returns the ranges acquired, in offset order, each with
    /// one delivery count.
    pub fn acquire(
        &mut self,
        member: &str,
        now: u64,
        within: std::ops::Range<i64>,
        max_records: usize,
        config: &SharePartitionConfig,
    ) -> Vec<AcquiredRange> {
        self.expire_locks(now, config);
        let log_end = within.end;
        if log_end < self.start {
            // The log was truncated below what was handed out: start again from its end.
            *self = SharePartition::new(log_end);
        }
        let until = now.saturating_add(config.lock_duration_ms);
        let mut taken: Vec<(i64, i16)> = Vec::new();
        for (&offset, r) in self.records.range_mut(within.start..within.end) {
            if taken.len() >= max_records {
                break;
            }
            if r.state == State::Available {
                r.delivery_count = r.delivery_count.saturating_add(1);
                r.state = State::Acquired {
                    member: member.to_string(),
                    until,
                };
                taken.push((offset, r.delivery_count));
            }
        }
        let max_in_flight = i64::try_from(config.max_in_flight).unwrap_or(i64::MAX);
        while taken.len() < max_records
            && self.end >= within.start
            && self.end < log_end
            && self.end - self.start < max_in_flight
        {
            self.records.insert(
                self.end,
                InFlight {
                    state: State::Acquired {
                        member: member.to_string(),
                        until,
                    },
                    delivery_count: 1,
                },
            );
            taken.push((self.end, 1));
            self.end += 1;
        }
        taken.sort_unstable();
        let mut ranges: Vec<AcquiredRange> = Vec::new();
        for (offset, count) in taken {
            match ranges.last_mut() {
                Some(r) if r.last_offset + 1 == offset && r.delivery_count == count => {
                    r.last_offset = offset;
                }
                _ => ranges.push(AcquiredRange {
                    first_offset: offset,
                    last_offset: offset,
                    delivery_count: count,
                }),
            }
        }
        ranges
    }

    /// Applies `member`'s acknowledgement of `first..=last`: one type for the whole batch, or
    /// one per offset. Every offset must be acquired by `member` (its lock not expired at
    /// `now`); otherwise nothing changes.
    ///
    /// # Errors
    /// [`ShareAcknowledgeError::InvalidRequest`] for a malformed batch,
    /// [`ShareAcknowledgeError::InvalidRecordState`] for an offset not acquired by `member`.
    pub fn acknowledge(
        &mut self,
        member: &str,
        now: u64,
        first: i64,
        last: i64,
        types: &[AcknowledgeType],
        config: &SharePartitionConfig,
    ) -> Result<(), ShareAcknowledgeError> {
        let invalid = |reason: String| ShareAcknowledgeError::InvalidRequest { reason };
        if first < 0 || last < first {
            return Err(invalid(format!(
                "acknowledgement batch {first}..{last}: the last offset is before the first"
            )));
        }
        let len = u64::try_from(last - first)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        if types.is_empty() || (types.len() != 1 && u64::try_from(types.len()).ok() != Some(len)) {
            return Err(invalid(format!(
                "acknowledgement batch {first}..{last}: {} types for {len} offsets (1, or one per offset)",
                types.len()
            )));
        }
        self.expire_locks(now, config);
        for offset in first..=last {
            let mine = self.records.get(&offset).is_some_and(
                |r| matches!(&r.state, State::Acquired { member: m, .. } if m == member),
            );
            if !mine {
                return Err(ShareAcknowledgeError::InvalidRecordState { offset });
            }
        }
        let limit = config.delivery_count_limit;
        for (i, offset) in (first..=last).enumerate() {
            let kind = if types.len() == 1 { types[0] } else { types[i] };
            if let Some(r) = self.records.get_mut(&offset) {
                r.state = match kind {
                    AcknowledgeType::Accept => State::Acknowledged,
                    AcknowledgeType::Reject | AcknowledgeType::Gap => State::Archived,
                    AcknowledgeType::Release => give_back(r.delivery_count, limit),
                };
            }
        }
        self.advance();
        Ok(())
    }

    /// Makes every record `member` holds available again (archived at the delivery count
    /// limit): its share session closed, or it left the group. Returns how many.
    pub fn release_member(&mut self, member: &str, config: &SharePartitionConfig) -> usize {
        let limit = config.delivery_count_limit;
        let mut released = 0;
        for r in self.records.values_mut() {
            if matches!(&r.state, State::Acquired { member: m, .. } if m == member) {
                r.state = give_back(r.delivery_count, limit);
                released += 1;
            }
        }
        if released > 0 {
            self.advance();
        }
        released
    }

    /// Moves the start past the offsets that are done.
    fn advance(&mut self) {
        while let Some(entry) = self.records.first_entry() {
            if *entry.key() != self.start
                || !matches!(entry.get().state, State::Acknowledged | State::Archived)
            {
                break;
            }
            entry.remove();
            self.start += 1;
        }
    }
}

/// A record's state as the share coordinator keeps it (Kafka's `RecordState`, its numbers);
/// an acquired record is kept as available, as a restart frees its lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeptRecordState {
    /// 0: to be delivered (again).
    Available,
    /// 2: accepted: never delivered again.
    Acknowledged,
    /// 4: rejected, a gap, or delivered too often: never delivered again.
    Archived,
}

impl KeptRecordState {
    /// Kafka's number of the state.
    pub fn code(self) -> i8 {
        match self {
            KeptRecordState::Available => 0,
            KeptRecordState::Acknowledged => 2,
            KeptRecordState::Archived => 4,
        }
    }

    /// The state of Kafka's number `code` (the acquired state, 1, is read as available).
    pub fn from_code(code: i8) -> Option<KeptRecordState> {
        match code {
            0 | 1 => Some(KeptRecordState::Available),
            2 => Some(KeptRecordState::Acknowledged),
            4 => Some(KeptRecordState::Archived),
            _ => None,
        }
    }
}

/// Offsets `first_offset..=last_offset` in one kept state with one delivery count (Kafka's
/// `PersisterStateBatch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateBatch {
    /// The first offset.
    pub first_offset: i64,
    /// The last offset.
    pub last_offset: i64,
    /// Their state.
    pub state: KeptRecordState,
    /// How many times they were delivered.
    pub delivery_count: i16,
}

impl SharePartition {
    /// What the share coordinator keeps of this share-partition (Kafka's share snapshot): its
    /// start offset and the in-flight offsets' states and delivery counts, runs of one state
    /// and count as one batch. Acquired records are kept as available with their count.
    pub fn snapshot(&self) -> (i64, Vec<StateBatch>) {
        let mut batches: Vec<StateBatch> = Vec::new();
        for (&offset, r) in &self.records {
            let state = match r.state {
                State::Available | State::Acquired { .. } => KeptRecordState::Available,
                State::Acknowledged => KeptRecordState::Acknowledged,
                State::Archived => KeptRecordState::Archived,
            };
            match batches.last_mut() {
                Some(b)
                    if b.last_offset + 1 == offset
                        && b.state == state
                        && b.delivery_count == r.delivery_count =>
                {
                    b.last_offset = offset;
                }
                _ => batches.push(StateBatch {
                    first_offset: offset,
                    last_offset: offset,
                    state,
                    delivery_count: r.delivery_count,
                }),
            }
        }
        (self.start, batches)
    }

    /// The share-partition a [`snapshot`](Self::snapshot) kept, as Kafka's share-partition
    /// loads its state: nothing acquired, the end offset after the last kept batch. Offsets
    /// below the start offset, or in a batch overlapping one before it, are left out; an
    /// offset between batches is available, never delivered; at most `max_offsets` offsets
    /// are taken (the in-flight bound), the ones after are handed out as new.
    pub fn restore(start_offset: i64, batches: &[StateBatch], max_offsets: u64) -> SharePartition {
        let mut sp = SharePartition::new(start_offset);
        let mut taken: u64 = 0;
        'batches: for b in batches {
            // From the end so far: an offset before the batch (a hole) was never handed out.
            for offset in sp.end..=b.last_offset {
                if taken >= max_offsets {
                    break 'batches;
                }
                let (state, delivery_count) = if offset < b.first_offset {
                    (State::Available, 0)
                } else {
                    let state = match b.state {
                        KeptRecordState::Available => State::Available,
                        KeptRecordState::Acknowledged => State::Acknowledged,
                        KeptRecordState::Archived => State::Archived,
                    };
                    (state, b.delivery_count.max(0))
                };
                sp.records.insert(
                    offset,
                    InFlight {
                        state,
                        delivery_count,
                    },
                );
                sp.end = offset + 1;
                taken += 1;
            }
        }
        sp.advance();
        sp
    }
}

/// What a record given back becomes: available, or archived once delivered `limit` times.
fn give_back(delivery_count: i16, limit: i16) -> State {
    if delivery_count >= limit {
        State::Archived
    } else {
        State::Available
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AcknowledgeType::*;

    fn cfg() -> SharePartitionConfig {
        SharePartitionConfig {
            lock_duration_ms: 1_000,
            delivery_count_limit: 3,
            max_in_flight: 10,
        }
    }

    fn range(first: i64, last: i64, count: i16) -> AcquiredRange {
        AcquiredRange {
            first_offset: first,
            last_offset: last,
            delivery_count: count,
        }
    }

    #[test]
    fn a_snapshot_restores_what_was_done_and_frees_what_was_acquired() {
        let mut sp = SharePartition::new(0);
        assert_eq!(sp.acquire("a", 0, 0..8, 8, &cfg()), [range(0, 7, 1)]);
        // 0 accepted, 1 released then acquired again by b (count 2), 2 rejected, 3-7 held.
        sp.acknowledge("a", 0, 0, 2, &[Accept, Release, Reject], &cfg())
            .unwrap();
        assert_eq!(sp.acquire("b", 0, 0..8, 1, &cfg()), [range(1, 1, 2)]);
        let (start, batches) = sp.snapshot();
        assert_eq!(start, 1);
        let kept = |first, last, state, delivery_count| StateBatch {
            first_offset: first,
            last_offset: last,
            state,
            delivery_count,
        };
        use KeptRecordState::*;
        assert_eq!(
            batches,
            [
                kept(1, 1, Available, 2),
                kept(2, 2, Archived, 1),
                kept(3, 7, Available, 1)
            ]
        );
        // Restored: nothing acquired; 1 and 3-7 delivered again with their counts grown, 2
        // never again, then new offsets.
        let mut back = SharePartition::restore(start, &batches, 100);
        assert_eq!(
            (back.start_offset(), back.end_offset(), back.acquired()),
            (1, 8, 0)
        );
        assert_eq!(
            back.acquire("c", 0, 0..10, 10, &cfg()),
            [range(1, 1, 3), range(3, 7, 2), range(8, 9, 1)]
        );
        // Batches below the start are left out; a hole between batches is a new offset; the
        // bound cuts what is restored.
        let back = SharePartition::restore(
            5,
            &[kept(0, 5, Acknowledged, 1), kept(8, 8, Archived, 2)],
            100,
        );
        assert_eq!((back.start_offset(), back.end_offset()), (6, 9));
        let mut again = back.clone();
        assert_eq!(
            again.acquire("c", 0, 0..20, 20, &cfg()),
            [range(6, 7, 1), range(9, 15, 1)]
        );
        let back = SharePartition::restore(0, &[kept(0, 1_000_000, Available, 1)], 10);
        assert_eq!(back.end_offset(), 10);
        assert_eq!(KeptRecordState::from_code(1), Some(Available));
        assert_eq!(KeptRecordState::from_code(3), None);
    }

    #[test]
    fn acquired_records_go_to_one_member_until_acknowledged() {
        let mut sp = SharePartition::new(0);
        assert_eq!(sp.acquire("a", 0, 0..5, 3, &cfg()), [range(0, 2, 1)]);
        assert_eq!(sp.acquire("b", 0, 0..5, 10, &cfg()), [range(3, 4, 1)]);
        assert_eq!(sp.acquire("c", 0, 0..5, 10, &cfg()), [], "all acquired");
        // b cannot acknowledge a's records: nothing changes.
        assert_eq!(
            sp.acknowledge("b", 0, 0, 0, &[Accept], &cfg()),
            Err(ShareAcknowledgeError::InvalidRecordState { offset: 0 })
        );
        sp.acknowledge("a", 0, 0, 2, &[Accept], &cfg()).unwrap();
        assert_eq!(sp.start_offset(), 3, "the start moves past what is done");
        assert_eq!(
            sp.acknowledge("a", 0, 0, 0, &[Accept], &cfg()),
            Err(ShareAcknowledgeError::InvalidRecordState { offset: 0 }),
            "never twice"
        );
    }

    #[test]
    fn released_records_are_delivered_again_and_archived_at_the_limit() {
        let mut sp = SharePartition::new(10);
        assert_eq!(sp.acquire("a", 0, 0..12, 10, &cfg()), [range(10, 11, 1)]);
        // One released, one accepted, in one batch with a type per offset.
        sp.acknowledge("a", 0, 10, 11, &[Release, Accept], &cfg())
            .unwrap();
        assert_eq!(sp.acquire("b", 0, 0..12, 10, &cfg()), [range(10, 10, 2)]);
        sp.acknowledge("b", 0, 10, 10, &[Release], &cfg()).unwrap();
        assert_eq!(sp.acquire("a", 0, 0..12, 10, &cfg()), [range(10, 10, 3)]);
        // The third delivery was the last: released, it is archived.
        sp.acknowledge("a", 0, 10, 10, &[Release], &cfg()).unwrap();
        assert_eq!(sp.acquire("a", 0, 0..12, 10, &cfg()), []);
        assert_eq!(sp.start_offset(), 12);
    }

    #[test]
    fn a_rejected_record_is_never_delivered_again() {
        let mut sp = SharePartition::new(0);
        sp.acquire("a", 0, 0..2, 10, &cfg());
        sp.acknowledge("a", 0, 0, 1, &[Reject], &cfg()).unwrap();
        assert_eq!(sp.acquire("a", 0, 0..2, 10, &cfg()), []);
        assert_eq!(sp.start_offset(), 2);
    }

    #[test]
    fn an_expired_lock_makes_the_records_available_to_others() {
        let mut sp = SharePartition::new(0);
        sp.acquire("a", 0, 0..3, 10, &cfg());
        assert_eq!(sp.acquire("b", 999, 0..3, 10, &cfg()), [], "a's lock holds");
        assert_eq!(sp.acquire("b", 1_000, 0..3, 10, &cfg()), [range(0, 2, 2)]);
        // a's late acknowledgement is refused: the records are b's now.
        assert_eq!(
            sp.acknowledge("a", 1_000, 0, 2, &[Accept], &cfg()),
            Err(ShareAcknowledgeError::InvalidRecordState { offset: 0 })
        );
        sp.acknowledge("b", 1_000, 0, 2, &[Accept], &cfg()).unwrap();
        assert_eq!(sp.start_offset(), 3);
    }

    #[test]
    fn a_member_that_goes_gives_back_what_it_held() {
        let mut sp = SharePartition::new(0);
        sp.acquire("a", 0, 0..4, 2, &cfg());
        sp.acquire("b", 0, 0..4, 2, &cfg());
        assert_eq!(sp.release_member("a", &cfg()), 2);
        assert_eq!(sp.acquire("b", 0, 0..4, 10, &cfg()), [range(0, 1, 2)]);
    }

    #[test]
    fn no_more_than_max_in_flight_offsets_are_handed_out() {
        let mut sp = SharePartition::new(0);
        assert_eq!(sp.acquire("a", 0, 0..100, 100, &cfg()), [range(0, 9, 1)]);
        assert_eq!(sp.in_flight(), 10);
        assert_eq!(sp.acquire("b", 0, 0..100, 100, &cfg()), []);
        sp.acknowledge("a", 0, 0, 4, &[Accept], &cfg()).unwrap();
        assert_eq!(sp.acquire("b", 0, 0..100, 100, &cfg()), [range(10, 14, 1)]);
    }

    #[test]
    fn malformed_batches_are_invalid_requests_and_change_nothing() {
        let mut sp = SharePartition::new(0);
        sp.acquire("a", 0, 0..3, 10, &cfg());
        for (first, last, types) in [
            (2, 1, vec![Accept]),
            (0, 2, vec![Accept, Accept]),
            (0, 2, vec![]),
            (-1, 0, vec![Accept]),
        ] {
            let e = sp
                .acknowledge("a", 0, first, last, &types, &cfg())
                .unwrap_err();
            assert_eq!(e.kafka_code(), 42, "{first}..{last} {types:?}");
        }
        // One offset of the batch is not a's: nothing of the batch applies.
        assert_eq!(
            sp.acknowledge("a", 0, 1, 3, &[Accept], &cfg()),
            Err(ShareAcknowledgeError::InvalidRecordState { offset: 3 })
        );
        sp.acknowledge("a", 0, 0, 2, &[Accept], &cfg()).unwrap();
        assert_eq!(AcknowledgeType::from_wire(4), None);
    }

    #[test]
    fn deleted_records_move_the_start_and_a_truncated_log_starts_over() {
        let mut sp = SharePartition::new(0);
        sp.acquire("a", 0, 0..5, 10, &cfg());
        sp.move_start(3);
        assert_eq!((sp.start_offset(), sp.end_offset()), (3, 5));
        assert_eq!(sp.acquired(), 2);
        let mut sp = SharePartition::new(8);
        assert_eq!(sp.acquire("a", 0, 0..4, 10, &cfg()), []);
        assert_eq!(sp.start_offset(), 4);
    }
}
