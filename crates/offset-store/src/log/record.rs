//! The log store's on-disk format: frames of records, checksummed with CRC-32C.
//!
//! # Frame
//!
//! Every write is one frame (Kafka's record batch): all the records of one writer batch, or
//! one chunk of a snapshot. A frame lands or is cut off as a whole.
//!
//! ```text
//! frame  = body_len:u32 body_crc:u32 header_crc:u32 body
//! body   = version:u8 (1) count:u32 record*count
//! record = len:u32 type:u8 version:u8 payload      (len counts type, version, payload)
//! ```
//!
//! Integers are little-endian. `body_crc` is the CRC-32C of `body`; `header_crc` is the
//! CRC-32C of the first eight bytes, so a damaged length is detected as damage, never read as
//! a short or long frame. Strings are `len:u32` then UTF-8; bytes are `len:u32` then the
//! bytes; an optional value is a `0`/`1` byte, then the value.
//!
//! # Records (each at version 1)
//!
//! | type | record | payload |
//! | --- | --- | --- |
//! | 1 | offset commit | group, topic, partition:u32, offset:i64, leader epoch (optional i32), metadata, commit time ms:u64 |
//! | 2 | offset deletion | group, topic, partition:u32 |
//! | 3 | deletion of a group's offsets | group (read, no longer written: a group's offsets are deleted one partition at a time, each deletion keyed as its commit) |
//! | 4 | group record | see [`put_group`] |
//! | 5 | group tombstone | group |
//! | 6 | snapshot start | base segment:u64 |
//! | 7 | snapshot end | offsets:u64, groups:u64 |
//! | 8 | transaction record | see [`put_transaction`] |
//! | 9 | transaction tombstone | transactional id |
//!
//! Types 8 and 9 came with the transaction coordinator: a log written before them loads
//! unchanged; a log holding them is refused by an older build ("unknown record type").
//!
//! A group record is written at version 2 when one of its consumer-protocol members
//! subscribes with a regular expression (version 2 adds it, see [`put_group`]), else at
//! version 1: a log without such members stays readable by the builds before version 2,
//! and one with them is refused by those builds ("at unknown version 2"), never misread.
//!
//! A transaction record is written at version 2 when its transaction version (KIP-890 part
//! 2) is not 0 (version 2 adds it, see [`put_transaction`]), else at version 1, the same way:
//! a log of classic transactions stays readable by the builds before version 2.

use std::sync::Arc;

use super::keyed::BATCH_VERSION;

use coordinator_core::txn::{TransactionRecord, TxnState};
use coordinator_core::{
    ClassicProtocol, CommittedOffsets, ConsumerMemberRecord, Generation, GroupKind, GroupRecord,
    GroupState, MemberRecord, OffsetAndMetadata, TopicPartition,
};

/// The bytes before a frame's body.
pub(crate) const FRAME_HEADER: usize = 12;
/// The version of a frame's body.
const FRAME_VERSION: u8 = 1;
/// The largest body a frame may have: larger lengths are damage.
pub(crate) const MAX_BODY: usize = 1 << 30;
/// The version every record is written at (group records: see [`group_version`]).
const RECORD_VERSION: u8 = 1;
/// The version of a group record with a member's regular expression.
const GROUP_VERSION_REGEX: u8 = 2;
/// The version of a transaction record with a transaction version.
const TRANSACTION_VERSION_TV: u8 = 2;

const COMMIT: u8 = 1;
const DELETE_OFFSET: u8 = 2;
const DELETE_GROUP_OFFSETS: u8 = 3;
const GROUP: u8 = 4;
const GROUP_TOMBSTONE: u8 = 5;
const SNAPSHOT_START: u8 = 6;
const SNAPSHOT_END: u8 = 7;
const TRANSACTION: u8 = 8;
const TRANSACTION_TOMBSTONE: u8 = 9;

/// One decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// `group` committed `offset` for `tp`.
    Commit {
        /// The group.
        group: String,
        /// The partition.
        tp: TopicPartition,
        /// What was committed.
        offset: OffsetAndMetadata,
    },
    /// `group`'s offset of `tp` was deleted.
    DeleteOffset {
        /// The group.
        group: String,
        /// The partition.
        tp: TopicPartition,
    },
    /// Every offset of `group` was deleted.
    DeleteGroupOffsets {
        /// The group.
        group: String,
    },
    /// A group's durable record.
    Group(GroupRecord),
    /// A group's record was removed.
    GroupTombstone {
        /// The group.
        group: String,
    },
    /// The first record of a snapshot: it holds the state before segment `base`.
    SnapshotStart {
        /// The first segment replayed after this snapshot.
        base: u64,
    },
    /// The last record of a snapshot, with what it held.
    SnapshotEnd {
        /// Offsets in the snapshot.
        offsets: u64,
        /// Group records in the snapshot.
        groups: u64,
    },
    /// A transactional id's record (the transaction coordinator's state).
    Transaction(TransactionRecord),
    /// A transactional id's record was removed (expired).
    TransactionTombstone {
        /// The transactional id.
        id: String,
    },
}

/// Builds one frame (the old log's format), or one batch of the group partition (the
/// format of [`keyed`](super::keyed)), at the end of a buffer.
pub(crate) struct Frame<'a> {
    buf: &'a mut Vec<u8>,
    start: usize,
    count: u32,
    /// A batch of the group partition: no frame header, and each record's offset delta
    /// (its index) before it.
    keyed: bool,
}

impl<'a> Frame<'a> {
    /// Starts a frame of the old log's format at the end of `buf`.
    pub(crate) fn begin(buf: &'a mut Vec<u8>) -> Self {
        Self::start(buf, false)
    }

    /// Starts a batch of the group partition at the end of `buf`.
    pub(crate) fn batch(buf: &'a mut Vec<u8>) -> Self {
        Self::start(buf, true)
    }

    fn start(buf: &'a mut Vec<u8>, keyed: bool) -> Self {
        let start = buf.len();
        if !keyed {
            buf.extend_from_slice(&[0; FRAME_HEADER]);
        }
        buf.push(if keyed { BATCH_VERSION } else { FRAME_VERSION });
        buf.extend_from_slice(&[0; 4]);
        Frame {
            buf,
            start,
            count: 0,
            keyed,
        }
    }

    /// The bytes of the frame so far.
    pub(crate) fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    fn record(&mut self, kind: u8, payload: impl FnOnce(&mut Vec<u8>)) {
        self.record_at(kind, RECORD_VERSION, payload);
    }

    fn record_at(&mut self, kind: u8, version: u8, payload: impl FnOnce(&mut Vec<u8>)) {
        if self.keyed {
            self.buf.extend_from_slice(&self.count.to_le_bytes());
        }
        let at = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        self.buf.push(kind);
        self.buf.push(version);
        payload(self.buf);
        let len = u32_len(self.buf.len() - at - 4);
        self.buf[at..at + 4].copy_from_slice(&len.to_le_bytes());
        self.count += 1;
    }

    pub(crate) fn commit(&mut self, group: &str, tp: &TopicPartition, o: &OffsetAndMetadata) {
        self.record(COMMIT, |b| {
            put_str(b, group);
            put_tp(b, tp);
            put_offset(b, o);
        });
    }

    pub(crate) fn delete_offset(&mut self, group: &str, tp: &TopicPartition) {
        self.record(DELETE_OFFSET, |b| {
            put_str(b, group);
            put_tp(b, tp);
        });
    }

    pub(crate) fn delete_group_offsets(&mut self, group: &str) {
        self.record(DELETE_GROUP_OFFSETS, |b| put_str(b, group));
    }

    pub(crate) fn group(&mut self, record: &GroupRecord) {
        self.record_at(GROUP, group_version(record), |b| put_group(b, record));
    }

    pub(crate) fn group_tombstone(&mut self, group: &str) {
        self.record(GROUP_TOMBSTONE, |b| put_str(b, group));
    }

    pub(crate) fn transaction(&mut self, record: &TransactionRecord) {
        self.record_at(TRANSACTION, transaction_version(record), |b| {
            put_transaction(b, record)
        });
    }

    pub(crate) fn transaction_tombstone(&mut self, id: &str) {
        self.record(TRANSACTION_TOMBSTONE, |b| put_str(b, id));
    }

    pub(crate) fn snapshot_start(&mut self, base: u64) {
        self.record(SNAPSHOT_START, |b| b.extend_from_slice(&base.to_le_bytes()));
    }

    pub(crate) fn snapshot_end(&mut self, offsets: u64, groups: u64) {
        self.record(SNAPSHOT_END, |b| {
            b.extend_from_slice(&offsets.to_le_bytes());
            b.extend_from_slice(&groups.to_le_bytes());
        });
    }

    /// Fills in the count and (a frame's) header: length and both checksums. Returns the
    /// count.
    pub(crate) fn finish(self) -> u32 {
        let body = self.start + if self.keyed { 0 } else { FRAME_HEADER };
        self.buf[body + 1..body + 5].copy_from_slice(&self.count.to_le_bytes());
        if self.keyed {
            return self.count;
        }
        let body_len = u32_len(self.buf.len() - body);
        let body_crc = crc32c::crc32c(&self.buf[body..]);
        let header = &mut self.buf[self.start..body];
        header[..4].copy_from_slice(&body_len.to_le_bytes());
        header[4..8].copy_from_slice(&body_crc.to_le_bytes());
        let header_crc = crc32c::crc32c(&header[..8]);
        header[8..12].copy_from_slice(&header_crc.to_le_bytes());
        self.count
    }
}

/// A length the callers have bounded (every write is checked against [`MAX_BODY`] by
/// [`commit_size`] and [`group_size`] before it is queued).
fn u32_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    put_bytes(b, s.as_bytes());
}

fn put_bytes(b: &mut Vec<u8>, s: &[u8]) {
    b.extend_from_slice(&u32_len(s.len()).to_le_bytes());
    b.extend_from_slice(s);
}

fn put_opt_str(b: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => {
            b.push(1);
            put_str(b, s);
        }
        None => b.push(0),
    }
}

fn put_tp(b: &mut Vec<u8>, tp: &TopicPartition) {
    put_str(b, tp.topic());
    b.extend_from_slice(&tp.partition().to_le_bytes());
}

fn put_count(b: &mut Vec<u8>, n: usize) {
    b.extend_from_slice(&u32_len(n).to_le_bytes());
}

/// A group record's payload:
///
/// ```text
/// group, kind:u8 (0 chapter, 1 classic, 2 simple, 3 consumer), generation:u64,
/// state:u8 (0 Empty, 1 PreparingRebalance, 2 CompletingRebalance, 3 Stable, 4 Dead),
/// protocol type, protocol (optional), leader (optional), members:u32 then each member:
///   member id, instance id (optional), client id, client host, session ms:u64,
///   rebalance ms:u64, protocols:u32 then each: name, metadata bytes, topics (optional:
///   count:u32 then strings), assignment bytes, partitions:u32 then each: topic, partition:u32,
///   consumer (optional: member epoch:i32, previous epoch:i32, state, rack (optional),
///   assignor (optional), subscribed topics:u32 then strings, [version 2: regular
///   expression (optional)], pending revocation and target assignment: each
///   partitions:u32 then topic, partition:u32; target epoch:i32)
/// ```
pub(crate) fn put_group(b: &mut Vec<u8>, r: &GroupRecord) {
    let version = group_version(r);
    put_str(b, &r.group_id);
    b.push(match r.kind {
        GroupKind::Chapter => 0,
        GroupKind::Classic => 1,
        GroupKind::Simple => 2,
        GroupKind::Consumer => 3,
        GroupKind::Share => 4,
    });
    b.extend_from_slice(&r.generation.get().to_le_bytes());
    b.push(match r.state {
        GroupState::Empty => 0,
        GroupState::PreparingRebalance => 1,
        GroupState::CompletingRebalance => 2,
        GroupState::Stable => 3,
        GroupState::Dead => 4,
    });
    put_str(b, &r.protocol_type);
    put_opt_str(b, r.protocol.as_deref());
    put_opt_str(b, r.leader.as_deref());
    put_count(b, r.members.len());
    for m in &r.members {
        put_str(b, &m.member_id);
        put_opt_str(b, m.group_instance_id.as_deref());
        put_str(b, &m.client_id);
        put_str(b, &m.client_host);
        b.extend_from_slice(&m.session_timeout_ms.to_le_bytes());
        b.extend_from_slice(&m.rebalance_timeout_ms.to_le_bytes());
        put_count(b, m.protocols.len());
        for p in &m.protocols {
            put_str(b, &p.name);
            put_bytes(b, &p.metadata);
            match &p.topics {
                Some(topics) => {
                    b.push(1);
                    put_count(b, topics.len());
                    for t in topics {
                        put_str(b, t);
                    }
                }
                None => b.push(0),
            }
        }
        put_bytes(b, &m.assignment);
        put_count(b, m.partitions.len());
        for tp in &m.partitions {
            put_tp(b, tp);
        }
        match &m.consumer {
            None => b.push(0),
            Some(c) => {
                b.push(1);
                b.extend_from_slice(&c.member_epoch.to_le_bytes());
                b.extend_from_slice(&c.previous_member_epoch.to_le_bytes());
                put_str(b, &c.state);
                put_opt_str(b, c.rack_id.as_deref());
                put_opt_str(b, c.server_assignor.as_deref());
                put_count(b, c.subscribed_topic_names.len());
                for t in &c.subscribed_topic_names {
                    put_str(b, t);
                }
                if version >= GROUP_VERSION_REGEX {
                    put_opt_str(b, c.subscribed_topic_regex.as_deref());
                }
                for list in [&c.partitions_pending_revocation, &c.target_assignment] {
                    put_count(b, list.len());
                    for tp in list {
                        put_tp(b, tp);
                    }
                }
                b.extend_from_slice(&c.target_assignment_epoch.to_le_bytes());
            }
        }
    }
}

/// The bytes one commit record of `group` takes.
pub(crate) fn commit_size(group: &str, tp: &TopicPartition, o: &OffsetAndMetadata) -> usize {
    // len, type, version; group; topic, partition; offset; epoch; metadata; time.
    6 + 4 + group.len() + 4 + tp.topic().len() + 4 + 8 + 5 + 4 + o.metadata.len() + 8
}

/// A transaction record's payload:
///
/// ```text
/// id, producer id:i64, epoch:i16, last producer id:i64, last epoch:i16, timeout ms:i32,
/// state:u8 (Kafka's state id), partitions:u32 then topic, partition:u32; groups:u32 then
/// strings; pending offsets: groups:u32 then group, offsets:u32 then topic, partition:u32,
/// offset:i64, leader epoch (optional i32), metadata, commit time ms:u64; start ms
/// (optional u64), last update ms:u64, [version 2: transaction version:i16]
/// ```
pub(crate) fn put_transaction(b: &mut Vec<u8>, r: &TransactionRecord) {
    put_str(b, &r.transactional_id);
    b.extend_from_slice(&r.producer_id.to_le_bytes());
    b.extend_from_slice(&r.producer_epoch.to_le_bytes());
    b.extend_from_slice(&r.last_producer_id.to_le_bytes());
    b.extend_from_slice(&r.last_producer_epoch.to_le_bytes());
    b.extend_from_slice(&r.timeout_ms.to_le_bytes());
    b.push(r.state.id());
    put_count(b, r.partitions.len());
    for tp in &r.partitions {
        put_tp(b, tp);
    }
    put_count(b, r.groups.len());
    for g in &r.groups {
        put_str(b, g);
    }
    put_count(b, r.pending_offsets.len());
    for (group, offsets) in &r.pending_offsets {
        put_str(b, group);
        put_count(b, offsets.len());
        for (tp, o) in offsets {
            put_tp(b, tp);
            put_offset(b, o);
        }
    }
    match r.start_ms {
        Some(ms) => {
            b.push(1);
            b.extend_from_slice(&ms.to_le_bytes());
        }
        None => b.push(0),
    }
    b.extend_from_slice(&r.last_update_ms.to_le_bytes());
    if transaction_version(r) >= TRANSACTION_VERSION_TV {
        b.extend_from_slice(&r.transaction_version.to_le_bytes());
    }
}

/// The version a transaction record is written at: 2 if it has a transaction version
/// (KIP-890 part 2), else 1.
fn transaction_version(r: &TransactionRecord) -> u8 {
    if r.transaction_version != 0 {
        TRANSACTION_VERSION_TV
    } else {
        RECORD_VERSION
    }
}

/// An offset with its metadata, as a commit record holds it after its partition.
fn put_offset(b: &mut Vec<u8>, o: &OffsetAndMetadata) {
    b.extend_from_slice(&o.offset.to_le_bytes());
    match o.leader_epoch {
        Some(epoch) => {
            b.push(1);
            b.extend_from_slice(&epoch.to_le_bytes());
        }
        None => b.push(0),
    }
    put_str(b, &o.metadata);
    b.extend_from_slice(&o.commit_timestamp_ms.to_le_bytes());
}

/// The bytes one transaction record takes (exact, computed by encoding).
pub(crate) fn transaction_size(r: &TransactionRecord) -> usize {
    let mut b = Vec::new();
    put_transaction(&mut b, r);
    6 + b.len()
}

/// The version a group record is written at: 2 if a member subscribes with a regular
/// expression, else 1.
fn group_version(r: &GroupRecord) -> u8 {
    let regex = r.members.iter().any(|m| {
        m.consumer
            .as_ref()
            .is_some_and(|c| c.subscribed_topic_regex.is_some())
    });
    if regex {
        GROUP_VERSION_REGEX
    } else {
        RECORD_VERSION
    }
}

/// The bytes one group record takes (an upper bound: the exact size, computed by encoding).
pub(crate) fn group_size(r: &GroupRecord) -> usize {
    let mut b = Vec::new();
    put_group(&mut b, r);
    6 + b.len()
}

/// Why bytes did not decode.
pub(crate) type DecodeError = String;

/// Reads a frame body's records, in order.
pub(crate) fn decode_body(body: &[u8]) -> Result<Vec<Record>, DecodeError> {
    decode_body_with(body, &mut None)
}

/// [`decode_body`], sharing one `Arc` for a topic name that repeats from one record to the
/// next (`last_topic` carries it from frame to frame): a replayed log of a million offsets
/// holds its topic names once each, not once per offset.
pub(crate) fn decode_body_with(
    body: &[u8],
    last_topic: &mut Option<Arc<str>>,
) -> Result<Vec<Record>, DecodeError> {
    let mut r = Reader {
        bytes: body,
        at: 0,
        last_topic: std::mem::take(last_topic),
    };
    let version = r.u8()?;
    if version != FRAME_VERSION {
        return Err(format!("unknown frame version {version}"));
    }
    let count = r.u32()?;
    let mut records = Vec::with_capacity((count as usize).min(body.len() / 6));
    for i in 0..count {
        let len = r.u32()? as usize;
        let bytes = r.take(len).map_err(|e| format!("record {i}: {e}"))?;
        let mut inner = Reader {
            bytes,
            at: 0,
            last_topic: r.last_topic.take(),
        };
        let record = decode_record(&mut inner).map_err(|e| format!("record {i}: {e}"))?;
        r.last_topic = inner.last_topic;
        records.push(record);
    }
    *last_topic = r.last_topic.take();
    if r.at != body.len() {
        return Err(format!(
            "{} bytes after the frame's {count} records",
            body.len() - r.at
        ));
    }
    Ok(records)
}

/// One record's bytes (type, version, payload: what a frame's length field counts),
/// decoded; `last_topic` as [`decode_body_with`]'s.
pub(crate) fn decode_record_bytes(
    bytes: &[u8],
    last_topic: &mut Option<Arc<str>>,
) -> Result<Record, DecodeError> {
    let mut r = Reader {
        bytes,
        at: 0,
        last_topic: last_topic.take(),
    };
    let record = decode_record(&mut r);
    *last_topic = r.last_topic.take();
    record
}

fn decode_record(r: &mut Reader<'_>) -> Result<Record, DecodeError> {
    let bytes = r.bytes;
    let kind = r.u8()?;
    let version = r.u8()?;
    let newer = (kind == GROUP && version == GROUP_VERSION_REGEX)
        || (kind == TRANSACTION && version == TRANSACTION_VERSION_TV);
    if version != RECORD_VERSION && !newer {
        return Err(format!("record type {kind} at unknown version {version}"));
    }
    let record = match kind {
        COMMIT => Record::Commit {
            group: r.string()?,
            tp: r.tp()?,
            offset: r.offset()?,
        },
        DELETE_OFFSET => Record::DeleteOffset {
            group: r.string()?,
            tp: r.tp()?,
        },
        DELETE_GROUP_OFFSETS => Record::DeleteGroupOffsets { group: r.string()? },
        GROUP => Record::Group(r.group(version)?),
        GROUP_TOMBSTONE => Record::GroupTombstone { group: r.string()? },
        SNAPSHOT_START => Record::SnapshotStart { base: r.u64()? },
        SNAPSHOT_END => Record::SnapshotEnd {
            offsets: r.u64()?,
            groups: r.u64()?,
        },
        TRANSACTION => Record::Transaction(r.transaction(version)?),
        TRANSACTION_TOMBSTONE => Record::TransactionTombstone { id: r.string()? },
        other => return Err(format!("unknown record type {other}")),
    };
    if r.at != bytes.len() {
        return Err(format!(
            "{} bytes after a record of type {kind}",
            bytes.len() - r.at
        ));
    }
    Ok(record)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// The topic name of the last partition read.
    last_topic: Option<Arc<str>>,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let rest = &self.bytes[self.at..];
        if rest.len() < n {
            return Err(format!(
                "{n} bytes needed at byte {}, {} left",
                self.at,
                rest.len()
            ));
        }
        self.at += n;
        Ok(&rest[..n])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    fn flag(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(format!("optional marker {other} is neither 0 nor 1")),
        }
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        let at = self.at;
        let bytes = self.bytes()?;
        String::from_utf8(bytes.to_vec()).map_err(|_| format!("string at byte {at} is not UTF-8"))
    }

    fn opt_string(&mut self) -> Result<Option<String>, DecodeError> {
        if self.flag()? {
            Ok(Some(self.string()?))
        } else {
            Ok(None)
        }
    }

    /// A count of items that take at least `min` bytes each: never more than the bytes left
    /// could hold, so a damaged count cannot make the decoder reserve memory it lacks.
    fn count(&mut self, min: usize) -> Result<usize, DecodeError> {
        let n = self.u32()? as usize;
        let left = self.bytes.len() - self.at;
        if n.saturating_mul(min) > left {
            return Err(format!("a count of {n} with only {left} bytes left"));
        }
        Ok(n)
    }

    fn tp(&mut self) -> Result<TopicPartition, DecodeError> {
        let at = self.at;
        let bytes = self.bytes()?;
        let topic = match &self.last_topic {
            Some(last) if last.as_bytes() == bytes => Arc::clone(last),
            _ => {
                let name = std::str::from_utf8(bytes)
                    .map_err(|_| format!("string at byte {at} is not UTF-8"))?;
                let name: Arc<str> = Arc::from(name);
                self.last_topic = Some(Arc::clone(&name));
                name
            }
        };
        let partition = self.u32()?;
        Ok(TopicPartition::new(topic, partition))
    }

    fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_le_bytes(self.array()?))
    }

    /// An offset with its metadata (see [`put_offset`]).
    fn offset(&mut self) -> Result<OffsetAndMetadata, DecodeError> {
        let offset = self.i64()?;
        if offset < 0 {
            return Err(format!("negative offset {offset}"));
        }
        let leader_epoch = if self.flag()? {
            Some(self.i32()?)
        } else {
            None
        };
        let metadata = self.string()?;
        let commit_timestamp_ms = self.u64()?;
        Ok(OffsetAndMetadata {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp_ms,
        })
    }

    fn transaction(&mut self, version: u8) -> Result<TransactionRecord, DecodeError> {
        let transactional_id = self.string()?;
        let producer_id = self.i64()?;
        let producer_epoch = self.i16()?;
        let last_producer_id = self.i64()?;
        let last_producer_epoch = self.i16()?;
        let timeout_ms = self.i32()?;
        let state = self.u8()?;
        let state =
            TxnState::from_id(state).ok_or_else(|| format!("unknown transaction state {state}"))?;
        let mut partitions = std::collections::BTreeSet::new();
        for _ in 0..self.count(8)? {
            partitions.insert(self.tp()?);
        }
        let mut groups = std::collections::BTreeSet::new();
        for _ in 0..self.count(4)? {
            groups.insert(self.string()?);
        }
        let mut pending_offsets = std::collections::BTreeMap::new();
        for _ in 0..self.count(8)? {
            let group = self.string()?;
            let mut offsets = CommittedOffsets::new();
            for _ in 0..self.count(8 + 8 + 1 + 4 + 8)? {
                let tp = self.tp()?;
                offsets.insert(tp, self.offset()?);
            }
            pending_offsets.insert(group, offsets);
        }
        let start_ms = if self.flag()? {
            Some(self.u64()?)
        } else {
            None
        };
        let last_update_ms = self.u64()?;
        let transaction_version = if version >= TRANSACTION_VERSION_TV {
            self.i16()?
        } else {
            0
        };
        Ok(TransactionRecord {
            transactional_id,
            producer_id,
            producer_epoch,
            last_producer_id,
            last_producer_epoch,
            timeout_ms,
            state,
            partitions,
            groups,
            pending_offsets,
            start_ms,
            last_update_ms,
            transaction_version,
        })
    }

    fn group(&mut self, version: u8) -> Result<GroupRecord, DecodeError> {
        let group_id = self.string()?;
        let kind = match self.u8()? {
            0 => GroupKind::Chapter,
            1 => GroupKind::Classic,
            2 => GroupKind::Simple,
            3 => GroupKind::Consumer,
            4 => GroupKind::Share,
            other => return Err(format!("unknown group kind {other}")),
        };
        let generation = Generation::new(self.u64()?);
        let state = match self.u8()? {
            0 => GroupState::Empty,
            1 => GroupState::PreparingRebalance,
            2 => GroupState::CompletingRebalance,
            3 => GroupState::Stable,
            4 => GroupState::Dead,
            other => return Err(format!("unknown group state {other}")),
        };
        let protocol_type = self.string()?;
        let protocol = self.opt_string()?;
        let leader = self.opt_string()?;
        let n = self.count(4 + 1 + 4 + 4 + 8 + 8 + 4 + 4 + 4)?;
        let mut members = Vec::with_capacity(n);
        for _ in 0..n {
            let member_id = self.string()?;
            let group_instance_id = self.opt_string()?;
            let client_id = self.string()?;
            let client_host = self.string()?;
            let session_timeout_ms = self.u64()?;
            let rebalance_timeout_ms = self.u64()?;
            let np = self.count(4 + 4 + 1)?;
            let mut protocols = Vec::with_capacity(np);
            for _ in 0..np {
                let name = self.string()?;
                let metadata: Arc<[u8]> = Arc::from(self.bytes()?);
                let topics = if self.flag()? {
                    let nt = self.count(4)?;
                    let mut topics = Vec::with_capacity(nt);
                    for _ in 0..nt {
                        topics.push(self.string()?);
                    }
                    Some(topics)
                } else {
                    None
                };
                protocols.push(ClassicProtocol {
                    name,
                    metadata,
                    topics,
                });
            }
            let assignment: Arc<[u8]> = Arc::from(self.bytes()?);
            let nparts = self.count(8)?;
            let mut partitions = Vec::with_capacity(nparts);
            for _ in 0..nparts {
                partitions.push(self.tp()?);
            }
            let consumer = if self.flag()? {
                let member_epoch = self.i32()?;
                let previous_member_epoch = self.i32()?;
                let state = self.string()?;
                let rack_id = self.opt_string()?;
                let server_assignor = self.opt_string()?;
                let nt = self.count(4)?;
                let mut subscribed_topic_names = Vec::with_capacity(nt);
                for _ in 0..nt {
                    subscribed_topic_names.push(self.string()?);
                }
                let subscribed_topic_regex = if version >= GROUP_VERSION_REGEX {
                    self.opt_string()?
                } else {
                    None
                };
                let mut lists = [Vec::new(), Vec::new()];
                for list in &mut lists {
                    let n = self.count(8)?;
                    list.reserve(n);
                    for _ in 0..n {
                        list.push(self.tp()?);
                    }
                }
                let [partitions_pending_revocation, target_assignment] = lists;
                Some(ConsumerMemberRecord {
                    member_epoch,
                    previous_member_epoch,
                    state,
                    rack_id,
                    server_assignor,
                    subscribed_topic_names,
                    subscribed_topic_regex,
                    partitions_pending_revocation,
                    target_assignment,
                    target_assignment_epoch: self.i32()?,
                })
            } else {
                None
            };
            members.push(MemberRecord {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                session_timeout_ms,
                rebalance_timeout_ms,
                protocols,
                assignment,
                partitions,
                consumer,
            });
        }
        Ok(GroupRecord {
            group_id,
            kind,
            generation,
            state,
            protocol_type,
            protocol,
            leader,
            members,
        })
    }
}

/// What reading the frame at a position found.
#[derive(Debug)]
pub(crate) enum Next<'a> {
    /// A whole, intact frame's body, and where the next frame starts.
    Frame(&'a [u8], usize),
    /// The end of the bytes, exactly at a frame boundary.
    End,
    /// The bytes from here on are an interrupted write: a header cut short, a frame that
    /// runs past the end, a last frame whose body fails its checksum, or only zeros.
    Torn(String),
    /// Damage that is not the tail of a write: what follows would be lost if it were cut.
    Corrupt(String),
}

/// Reads the frame at `at` in `bytes`.
pub(crate) fn next_frame(bytes: &[u8], at: usize) -> Next<'_> {
    let rest = &bytes[at.min(bytes.len())..];
    if rest.is_empty() {
        return Next::End;
    }
    if rest.iter().all(|&b| b == 0) {
        return Next::Torn(format!("{} zero bytes after the last frame", rest.len()));
    }
    if rest.len() < FRAME_HEADER {
        return Next::Torn(format!("a frame header cut short ({} bytes)", rest.len()));
    }
    let word = |i: usize| u32::from_le_bytes([rest[i], rest[i + 1], rest[i + 2], rest[i + 3]]);
    let (body_len, body_crc, header_crc) = (word(0) as usize, word(4), word(8));
    if crc32c::crc32c(&rest[..8]) != header_crc {
        return Next::Corrupt("a frame header fails its checksum".to_owned());
    }
    if body_len > MAX_BODY {
        return Next::Corrupt(format!("a frame body of {body_len} bytes"));
    }
    let end = FRAME_HEADER + body_len;
    if rest.len() < end {
        return Next::Torn(format!(
            "a frame of {end} bytes cut short at {} bytes",
            rest.len()
        ));
    }
    let body = &rest[FRAME_HEADER..end];
    if crc32c::crc32c(body) != body_crc {
        let why = format!("a frame body of {body_len} bytes fails its checksum");
        return if rest.len() == end {
            Next::Torn(why)
        } else {
            Next::Corrupt(why)
        };
    }
    Next::Frame(body, at + end)
}

/// Every record of `bytes`, a sequence of frames, for the fuzz target: `Ok` with the records
/// of every intact frame and where a torn tail starts (if any), or the first damage that is
/// not a tail, with its byte position.
pub fn decode_frames(bytes: &[u8]) -> Result<(Vec<Record>, Option<usize>), (usize, String)> {
    let mut records = Vec::new();
    let mut at = 0;
    loop {
        match next_frame(bytes, at) {
            Next::End => return Ok((records, None)),
            Next::Torn(_) => return Ok((records, Some(at))),
            Next::Corrupt(why) => return Err((at, why)),
            Next::Frame(body, next) => {
                records.extend(decode_body(body).map_err(|why| (at, why))?);
                at = next;
            }
        }
    }
}

/// `records` encoded as one frame, for tests and the fuzz target.
pub fn encode_frame(records: &[Record]) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut frame = Frame::begin(&mut buf);
    frame.records(records);
    frame.finish();
    buf
}

impl Frame<'_> {
    /// Adds `records`, each as its own kind.
    pub(crate) fn records(&mut self, records: &[Record]) {
        let frame = self;
        for record in records {
            match record {
                Record::Commit { group, tp, offset } => frame.commit(group, tp, offset),
                Record::DeleteOffset { group, tp } => frame.delete_offset(group, tp),
                Record::DeleteGroupOffsets { group } => frame.delete_group_offsets(group),
                Record::Group(r) => frame.group(r),
                Record::GroupTombstone { group } => frame.group_tombstone(group),
                Record::SnapshotStart { base } => frame.snapshot_start(*base),
                Record::SnapshotEnd { offsets, groups } => frame.snapshot_end(*offsets, *groups),
                Record::Transaction(r) => frame.transaction(r),
                Record::TransactionTombstone { id } => frame.transaction_tombstone(id),
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    pub(crate) fn sample_group() -> GroupRecord {
        GroupRecord {
            group_id: "g".into(),
            kind: GroupKind::Classic,
            generation: Generation::new(7),
            state: GroupState::Stable,
            protocol_type: "consumer".into(),
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            members: vec![MemberRecord {
                member_id: "m1".into(),
                group_instance_id: Some("i1".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                session_timeout_ms: 10_000,
                rebalance_timeout_ms: 30_000,
                protocols: vec![ClassicProtocol::new("range", vec![1u8, 2, 3]).with_topics(["t"])],
                assignment: Arc::from(&[9u8, 8][..]),
                partitions: vec![TopicPartition::new("t", 0)],
                consumer: None,
            }],
        }
    }

    pub(crate) fn all_records() -> Vec<Record> {
        let tp = TopicPartition::new("orders", 3);
        vec![
            Record::Commit {
                group: "g".into(),
                tp: tp.clone(),
                offset: OffsetAndMetadata {
                    offset: i64::MAX,
                    leader_epoch: Some(-1),
                    metadata: "héllo".into(),
                    commit_timestamp_ms: 42,
                },
            },
            Record::Commit {
                group: "".into(),
                tp: tp.clone(),
                offset: OffsetAndMetadata::new(0),
            },
            Record::DeleteOffset {
                group: "g".into(),
                tp,
            },
            Record::DeleteGroupOffsets { group: "g".into() },
            Record::Group(sample_group()),
            Record::GroupTombstone { group: "g".into() },
            Record::SnapshotStart { base: 9 },
            Record::SnapshotEnd {
                offsets: 1,
                groups: 2,
            },
            Record::Transaction(sample_transaction()),
            Record::TransactionTombstone { id: "tx".into() },
        ]
    }

    pub(crate) fn sample_transaction() -> TransactionRecord {
        let tp = TopicPartition::new("orders", 3);
        let offset = OffsetAndMetadata {
            offset: 7,
            leader_epoch: Some(2),
            metadata: "m".into(),
            commit_timestamp_ms: 9,
        };
        TransactionRecord {
            transactional_id: "tx".into(),
            producer_id: i64::MAX,
            producer_epoch: i16::MAX,
            last_producer_id: -1,
            last_producer_epoch: -1,
            timeout_ms: 60_000,
            state: TxnState::PrepareCommit,
            partitions: [tp.clone(), TopicPartition::new("x", 0)].into(),
            groups: ["g".to_string()].into(),
            pending_offsets: [("g".to_string(), [(tp, offset)].into())].into(),
            start_ms: Some(5),
            last_update_ms: 6,
            transaction_version: 0,
        }
    }

    #[test]
    fn a_transaction_record_is_at_version_2_only_with_a_transaction_version() {
        for (tv, version) in [(0i16, 1u8), (2, 2)] {
            let mut t = sample_transaction();
            t.transaction_version = tv;
            let record = Record::Transaction(t.clone());
            let frame = encode_frame(std::slice::from_ref(&record));
            let at = FRAME_HEADER + 1 + 4 + 4;
            assert_eq!((frame[at], frame[at + 1]), (TRANSACTION, version), "{tv}");
            assert_eq!(decode_body(&frame[FRAME_HEADER..]).unwrap(), [record]);
            assert_eq!(frame.len() - FRAME_HEADER - 5, transaction_size(&t));
        }
        // A version 1 record (what builds before transaction version 2 wrote) reads as
        // transaction version 0.
        let mut t = sample_transaction();
        t.transaction_version = 2;
        let mut frame = encode_frame(&[Record::Transaction(t.clone())]);
        let at = FRAME_HEADER + 1 + 4 + 4;
        frame[at + 1] = 1;
        // Drop the trailing i16 and fix the record's length; the body is not checksummed
        // by decode_body.
        frame.truncate(frame.len() - 2);
        let len_at = FRAME_HEADER + 1 + 4;
        let len = u32::from_le_bytes(frame[len_at..len_at + 4].try_into().unwrap()) - 2;
        frame[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
        t.transaction_version = 0;
        assert_eq!(
            decode_body(&frame[FRAME_HEADER..]).unwrap(),
            [Record::Transaction(t)]
        );
    }

    #[test]
    fn every_record_round_trips_and_sizes_are_exact() {
        let records = all_records();
        let frame = encode_frame(&records);
        assert_eq!(decode_frames(&frame).unwrap(), (records.clone(), None));
        for r in &records {
            let one = encode_frame(std::slice::from_ref(r));
            let body = one.len() - FRAME_HEADER - 5;
            match r {
                Record::Commit { group, tp, offset } if offset.leader_epoch.is_some() => {
                    assert_eq!(body, commit_size(group, tp, offset));
                }
                Record::Group(g) => assert_eq!(body, group_size(g)),
                Record::Transaction(t) => assert_eq!(body, transaction_size(t)),
                _ => {}
            }
        }
    }

    /// A consumer-protocol group, with or without a member's regular expression.
    fn consumer_group(regex: Option<&str>) -> GroupRecord {
        let mut g = sample_group();
        g.kind = GroupKind::Consumer;
        g.members[0].consumer = Some(ConsumerMemberRecord {
            member_epoch: 3,
            previous_member_epoch: 2,
            state: "STABLE".into(),
            rack_id: None,
            server_assignor: Some("uniform".into()),
            subscribed_topic_names: vec!["t".into()],
            subscribed_topic_regex: regex.map(str::to_string),
            partitions_pending_revocation: vec![],
            target_assignment: vec![TopicPartition::new("t", 0)],
            target_assignment_epoch: 3,
        });
        g
    }

    #[test]
    fn a_group_record_is_at_version_2_only_with_a_regular_expression() {
        for (regex, version) in [(None, 1u8), (Some("t.*"), 2)] {
            let record = Record::Group(consumer_group(regex));
            let frame = encode_frame(std::slice::from_ref(&record));
            // frame header, body version and count, then the record's len and type.
            let at = FRAME_HEADER + 1 + 4 + 4;
            assert_eq!((frame[at], frame[at + 1]), (GROUP, version), "{regex:?}");
            let body = &frame[FRAME_HEADER..];
            assert_eq!(decode_body(body).unwrap(), [record]);
        }
        // Another record type at version 2 is still unknown.
        let mut frame = encode_frame(&[Record::GroupTombstone { group: "g".into() }]);
        let at = FRAME_HEADER + 1 + 4 + 4 + 1;
        frame[at] = 2;
        let err = decode_body(&frame[FRAME_HEADER..]).unwrap_err();
        assert!(err.contains("at unknown version 2"), "{err}");
    }

    #[test]
    fn a_repeated_topic_name_is_decoded_once() {
        let commit = |p| Record::Commit {
            group: "g".into(),
            tp: TopicPartition::new("orders", p),
            offset: OffsetAndMetadata::new(1),
        };
        let first = encode_frame(&[commit(0), commit(1)]);
        let second = encode_frame(&[commit(2)]);
        let mut last = None;
        let mut tps = Vec::new();
        for frame in [&first, &second] {
            for r in decode_body_with(&frame[FRAME_HEADER..], &mut last).unwrap() {
                if let Record::Commit { tp, .. } = r {
                    tps.push(tp);
                }
            }
        }
        assert_eq!(tps.len(), 3);
        assert!(tps
            .iter()
            .all(|tp| Arc::ptr_eq(tp.topic_arc(), tps[0].topic_arc())));
    }

    #[test]
    fn a_cut_frame_is_torn_and_a_damaged_middle_is_corrupt() {
        let mut two = encode_frame(&all_records());
        let first = two.len();
        two.extend(encode_frame(&all_records()[..2]));
        for cut in first + 1..two.len() {
            let (records, torn) = decode_frames(&two[..cut]).unwrap();
            assert_eq!(records.len(), all_records().len(), "cut at {cut}");
            assert_eq!(torn, Some(first), "cut at {cut}");
        }
        for flip in 0..first {
            let mut bad = two.clone();
            bad[flip] ^= 0x40;
            let (at, _) = decode_frames(&bad).unwrap_err();
            assert_eq!(at, 0, "flip at {flip}");
        }
        // A damaged body in the last frame is the tail of an interrupted write.
        let mut last = two.clone();
        let n = last.len();
        last[n - 1] ^= 1;
        assert_eq!(decode_frames(&last).unwrap().1, Some(first));
        let mut zeros = two.clone();
        zeros.extend([0; 100]);
        assert_eq!(decode_frames(&zeros).unwrap().1, Some(two.len()));
    }
}
