//! A [`TransactionRecord`] as the JSON document stored in the `transactions` table's
//! `jsonb` column.
//!
//! Like a group record ([`record`](crate::record)), the document carries a format version
//! `"v": 1` and is checked field by field when read; an error names the field. The state is
//! Kafka's name (`"PrepareCommit"`); the sets (partitions, groups) are arrays in the core's
//! order; partitions are `[topic, partition]` pairs as in group records; a PrepareCommit's
//! pending offsets are an array of `{"group", "offsets"}` objects whose offsets are
//! `{"topic", "partition", "offset", "leader_epoch", "metadata", "commit_timestamp_ms"}`
//! objects (Kafka's `OffsetAndMetadata`, as the `offsets` table's columns hold it). Arrays,
//! not objects keyed by name: `jsonb` reorders an object's keys and keeps only the last of a
//! duplicate, and a duplicate is refused when read instead.
//!
//! Version 2 adds `"transaction_version"` (KIP-890 part 2's transaction version, Kafka's
//! `clientTransactionVersion`). A record of transaction version 0 is still written at
//! version 1, so that the builds before version 2 keep reading the classic transactions; a
//! record at version 2 is refused by them ("format version 2"), never misread.

use std::collections::{BTreeMap, BTreeSet};

use coordinator_core::txn::{TransactionRecord, TxnState};
use coordinator_core::{CommittedOffsets, OffsetAndMetadata, TopicPartition};
use serde_json::{json, Value};

use crate::record::Obj;

/// The version of the document of a transaction of transaction version 0.
pub(crate) const TXN_RECORD_VERSION: u64 = 1;
/// The version of the document with a transaction version (KIP-890 part 2), the newest this
/// build reads.
pub(crate) const TXN_RECORD_VERSION_TV: u64 = 2;

/// `record` as a JSON document.
pub(crate) fn encode(r: &TransactionRecord) -> Value {
    let mut doc = json!({
        "v": TXN_RECORD_VERSION,
        "transactional_id": r.transactional_id,
        "producer_id": r.producer_id,
        "producer_epoch": r.producer_epoch,
        "last_producer_id": r.last_producer_id,
        "last_producer_epoch": r.last_producer_epoch,
        "timeout_ms": r.timeout_ms,
        "state": r.state.name(),
        "partitions": r
            .partitions
            .iter()
            .map(|tp| json!([tp.topic(), tp.partition()]))
            .collect::<Vec<_>>(),
        "groups": r.groups.iter().collect::<Vec<_>>(),
        "pending_offsets": r
            .pending_offsets
            .iter()
            .map(|(group, offsets)| json!({
                "group": group,
                "offsets": offsets.iter().map(|(tp, o)| offset(tp, o)).collect::<Vec<_>>(),
            }))
            .collect::<Vec<_>>(),
        "start_ms": r.start_ms,
        "last_update_ms": r.last_update_ms,
    });
    if r.transaction_version != 0 {
        doc["v"] = json!(TXN_RECORD_VERSION_TV);
        doc["transaction_version"] = json!(r.transaction_version);
    }
    doc
}

fn offset(tp: &TopicPartition, o: &OffsetAndMetadata) -> Value {
    json!({
        "topic": tp.topic(),
        "partition": tp.partition(),
        "offset": o.offset,
        "leader_epoch": o.leader_epoch,
        "metadata": o.metadata,
        "commit_timestamp_ms": o.commit_timestamp_ms,
    })
}

/// Every string a record holds, for the check that none contains U+0000 (which `jsonb`
/// cannot store).
pub(crate) fn strings(r: &TransactionRecord) -> impl Iterator<Item = &str> {
    std::iter::once(r.transactional_id.as_str())
        .chain(r.partitions.iter().map(TopicPartition::topic))
        .chain(r.groups.iter().map(String::as_str))
        .chain(r.pending_offsets.iter().flat_map(|(group, offsets)| {
            std::iter::once(group.as_str()).chain(
                offsets
                    .iter()
                    .flat_map(|(tp, o)| [tp.topic(), o.metadata.as_str()]),
            )
        }))
}

/// Reads a document written by [`encode`]; the error says which field is wrong.
pub(crate) fn decode(doc: &Value) -> Result<TransactionRecord, String> {
    let o = Obj::new(doc, "the record")?;
    let version = o.u64("v")?;
    if version != TXN_RECORD_VERSION && version != TXN_RECORD_VERSION_TV {
        return Err(format!(
            "record format version {version} is not one this build reads \
             ({TXN_RECORD_VERSION} or {TXN_RECORD_VERSION_TV})"
        ));
    }
    let state = o.str("state")?;
    let state = TxnState::from_name(state)
        .ok_or_else(|| format!("field `state`: unknown transaction state `{state}`"))?;
    let mut partitions = BTreeSet::new();
    for tp in o.partitions("partitions")? {
        if !partitions.insert(tp.clone()) {
            return Err(format!(
                "field `partitions`: partition {tp} is listed twice"
            ));
        }
    }
    let mut groups = BTreeSet::new();
    for g in o.strings("groups")? {
        if let Some(g) = groups.replace(g) {
            return Err(format!("field `groups`: group `{g}` is listed twice"));
        }
    }
    let mut pending_offsets = BTreeMap::new();
    for (i, p) in o.array("pending_offsets")?.iter().enumerate() {
        let p = Obj::new(p, &format!("pending_offsets[{i}]"))?;
        let group = p.string("group")?;
        let offsets = decode_offsets(&p)?;
        if pending_offsets.insert(group, offsets).is_some() {
            return Err(format!("{}: the group is listed twice", p.path));
        }
    }
    Ok(TransactionRecord {
        transactional_id: o.string("transactional_id")?,
        producer_id: i64_field(&o, "producer_id")?,
        producer_epoch: i16_field(&o, "producer_epoch")?,
        last_producer_id: i64_field(&o, "last_producer_id")?,
        last_producer_epoch: i16_field(&o, "last_producer_epoch")?,
        timeout_ms: o.i32("timeout_ms")?,
        state,
        partitions,
        groups,
        pending_offsets,
        start_ms: match o.get("start_ms")? {
            Value::Null => None,
            _ => Some(o.u64("start_ms")?),
        },
        last_update_ms: o.u64("last_update_ms")?,
        transaction_version: if version >= TXN_RECORD_VERSION_TV {
            i16_field(&o, "transaction_version")?
        } else {
            0
        },
    })
}

/// The `offsets` array of one `pending_offsets` entry.
fn decode_offsets(p: &Obj<'_>) -> Result<CommittedOffsets, String> {
    let mut out = CommittedOffsets::new();
    for (j, v) in p.array("offsets")?.iter().enumerate() {
        let e = Obj::new(v, &format!("{}.offsets[{j}]", p.path))?;
        let partition = e
            .get("partition")?
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| e.wrong("partition", "a partition (0 to 4294967295)"))?;
        let tp = TopicPartition::new(e.str("topic")?, partition);
        let offset = i64_field(&e, "offset")?;
        if offset < 0 {
            return Err(e.wrong("offset", "a non-negative offset"));
        }
        let leader_epoch = match e.get("leader_epoch")? {
            Value::Null => None,
            _ => Some(e.i32("leader_epoch")?),
        };
        let mut o = OffsetAndMetadata::new(offset)
            .with_leader_epoch(leader_epoch)
            .with_metadata(e.string("metadata")?);
        o.commit_timestamp_ms = e.u64("commit_timestamp_ms")?;
        if out.insert(tp.clone(), o).is_some() {
            return Err(format!("{}: partition {tp} is listed twice", e.path));
        }
    }
    Ok(out)
}

fn i64_field(o: &Obj<'_>, key: &str) -> Result<i64, String> {
    o.get(key)?
        .as_i64()
        .ok_or_else(|| o.wrong(key, "a signed 64-bit integer"))
}

fn i16_field(o: &Obj<'_>, key: &str) -> Result<i16, String> {
    o.get(key)?
        .as_i64()
        .and_then(|n| i16::try_from(n).ok())
        .ok_or_else(|| o.wrong(key, "a 16-bit integer"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn tp(t: &str, p: u32) -> TopicPartition {
        TopicPartition::new(t, p)
    }

    /// One pending offset: topic, partition, offset, leader epoch, metadata, commit time.
    type Pending<'a> = (&'a str, u32, i64, Option<i32>, &'a str, u64);

    fn pending(entries: &[Pending<'_>]) -> CommittedOffsets {
        entries
            .iter()
            .map(|&(t, p, o, epoch, m, ts)| {
                let mut v = OffsetAndMetadata::new(o)
                    .with_leader_epoch(epoch)
                    .with_metadata(m);
                v.commit_timestamp_ms = ts;
                (tp(t, p), v)
            })
            .collect()
    }

    /// A PrepareCommit with pending offsets (metadata, leader epochs, commit times) and
    /// extreme values in every numeric field.
    fn prepare_commit() -> TransactionRecord {
        TransactionRecord {
            transactional_id: "txn \"q\" ☃".into(),
            producer_id: i64::MAX,
            producer_epoch: i16::MAX,
            last_producer_id: -1,
            last_producer_epoch: i16::MIN,
            timeout_ms: i32::MAX,
            state: TxnState::PrepareCommit,
            partitions: [tp("orders", 0), tp("orders", u32::MAX), tp("audit", 3)].into(),
            groups: ["g1".to_string(), "g2 ☃".to_string()].into(),
            pending_offsets: [
                (
                    "g1".to_string(),
                    pending(&[
                        ("orders", 0, 42, Some(7), "meta \"x\"\n", u64::MAX),
                        ("orders", u32::MAX, i64::MAX, None, "", 0),
                    ]),
                ),
                (
                    "g2 ☃".to_string(),
                    pending(&[("audit", 3, 0, Some(-1), "☃", 1_700_000_000_000)]),
                ),
            ]
            .into(),
            start_ms: Some(u64::MAX),
            last_update_ms: u64::MAX,
            transaction_version: 0,
        }
    }

    fn empty() -> TransactionRecord {
        TransactionRecord {
            transactional_id: String::new(),
            producer_id: 0,
            producer_epoch: 0,
            last_producer_id: i64::MIN,
            last_producer_epoch: -1,
            timeout_ms: i32::MIN,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            groups: BTreeSet::new(),
            pending_offsets: BTreeMap::new(),
            start_ms: None,
            last_update_ms: 0,
            transaction_version: 0,
        }
    }

    #[test]
    fn a_transaction_version_is_written_at_version_2_and_version_1_reads_as_0() {
        let mut r = prepare_commit();
        assert_eq!(encode(&r)["v"], json!(1));
        assert!(encode(&r).get("transaction_version").is_none());
        r.transaction_version = 2;
        let doc = encode(&r);
        assert_eq!(
            (doc["v"].clone(), doc["transaction_version"].clone()),
            (json!(2), json!(2))
        );
        assert_eq!(decode(&doc), Ok(r.clone()));
        let mut missing = doc.clone();
        missing
            .as_object_mut()
            .unwrap()
            .remove("transaction_version");
        assert!(decode(&missing)
            .unwrap_err()
            .contains("transaction_version"));
        let mut old = doc;
        old["v"] = json!(1);
        r.transaction_version = 0;
        assert_eq!(decode(&old), Ok(r));
    }

    #[test]
    fn a_prepare_commit_with_pending_offsets_round_trips() {
        let r = prepare_commit();
        assert_eq!(decode(&encode(&r)), Ok(r));
    }

    #[test]
    fn round_trips_through_json_text() {
        for r in [prepare_commit(), empty()] {
            let text = encode(&r).to_string();
            let back: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(decode(&back), Ok(r));
        }
    }

    #[test]
    fn every_state_round_trips_by_name() {
        for state in TxnState::ALL {
            let r = TransactionRecord { state, ..empty() };
            let doc = encode(&r);
            assert_eq!(doc["state"], json!(state.name()));
            assert_eq!(decode(&doc), Ok(r));
        }
    }

    #[test]
    fn the_document_has_the_documented_shape() {
        let doc = encode(&prepare_commit());
        assert_eq!(doc["v"], json!(1));
        assert_eq!(doc["state"], json!("PrepareCommit"));
        assert_eq!(doc["partitions"][0], json!(["audit", 3]));
        assert_eq!(doc["groups"], json!(["g1", "g2 ☃"]));
        assert_eq!(
            doc["pending_offsets"][0]["offsets"][0],
            json!({
                "topic": "orders",
                "partition": 0,
                "offset": 42,
                "leader_epoch": 7,
                "metadata": "meta \"x\"\n",
                "commit_timestamp_ms": u64::MAX,
            })
        );
        assert_eq!(encode(&empty())["start_ms"], Value::Null);
    }

    /// `doc` with `change` applied must be refused with an error containing `expected`.
    fn refused(change: impl FnOnce(&mut Value), expected: &str) {
        let mut doc = encode(&prepare_commit());
        change(&mut doc);
        let err = decode(&doc).expect_err(expected);
        assert!(
            err.contains(expected),
            "{err:?} should contain {expected:?}"
        );
    }

    #[test]
    fn a_malformed_document_is_refused_and_the_field_named() {
        assert_eq!(
            decode(&json!([1, 2])).unwrap_err(),
            "the record is not a JSON object"
        );
        refused(|d| d["v"] = json!(3), "format version 3");
        refused(
            |d| {
                d.as_object_mut().unwrap().remove("producer_id");
            },
            "field `producer_id` is missing",
        );
        refused(
            |d| d["state"] = json!("Committing"),
            "unknown transaction state `Committing`",
        );
        refused(|d| d["state"] = json!(2), "field `state` is not a string");
        refused(
            |d| d["producer_epoch"] = json!(40_000),
            "field `producer_epoch` is not a 16-bit integer",
        );
        refused(
            |d| d["producer_id"] = json!(u64::MAX),
            "field `producer_id` is not a signed 64-bit integer",
        );
        refused(
            |d| d["timeout_ms"] = json!("1000"),
            "field `timeout_ms` is not a 32-bit integer",
        );
        refused(
            |d| d["start_ms"] = json!(-5),
            "field `start_ms` is not an unsigned 64-bit integer",
        );
        refused(
            |d| d["partitions"] = json!([["orders", 0], ["orders", 0]]),
            "partition orders-0 is listed twice",
        );
        refused(
            |d| d["partitions"] = json!([["orders", -1]]),
            "field `partitions` is not an array of [topic, partition] pairs",
        );
        refused(
            |d| d["groups"] = json!(["g", "g"]),
            "group `g` is listed twice",
        );
        refused(
            |d| d["groups"] = json!({"g": true}),
            "field `groups` is not an array",
        );
        refused(
            |d| d["pending_offsets"][1]["group"] = json!("g1"),
            "pending_offsets[1]: the group is listed twice",
        );
        refused(
            |d| d["pending_offsets"][0]["offsets"][1]["offset"] = json!(-1),
            "pending_offsets[0].offsets[1]: field `offset` is not a non-negative offset",
        );
        refused(
            |d| d["pending_offsets"][0]["offsets"][0]["partition"] = json!(1_u64 << 32),
            "pending_offsets[0].offsets[0]: field `partition` is not a partition",
        );
        refused(
            |d| d["pending_offsets"][0]["offsets"][0]["leader_epoch"] = json!("7"),
            "field `leader_epoch` is not a 32-bit integer",
        );
        refused(
            |d| {
                d["pending_offsets"][0]["offsets"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("metadata");
            },
            "pending_offsets[0].offsets[0]: field `metadata` is missing",
        );
        refused(
            |d| d["pending_offsets"][0]["offsets"][1]["partition"] = json!(0),
            "pending_offsets[0].offsets[1]: partition orders-0 is listed twice",
        );
        refused(
            |d| d["pending_offsets"][0] = json!([]),
            "pending_offsets[0] is not a JSON object",
        );
    }

    #[test]
    fn strings_lists_every_string_of_the_record() {
        let r = prepare_commit();
        let all: Vec<&str> = strings(&r).collect();
        for s in [
            "txn \"q\" ☃",
            "orders",
            "audit",
            "g1",
            "g2 ☃",
            "meta \"x\"\n",
            "☃",
        ] {
            assert!(all.contains(&s), "{s:?} missing from {all:?}");
        }
        let mut r = prepare_commit();
        r.groups.insert("a\0".into());
        assert!(strings(&r).any(|s| s.contains('\0')));
        let mut r = prepare_commit();
        r.partitions.insert(tp("x\0", 0));
        assert!(strings(&r).any(|s| s.contains('\0')));
        let mut r = prepare_commit();
        r.pending_offsets
            .insert("g3".into(), pending(&[("t", 0, 1, None, "m\0", 0)]));
        assert!(strings(&r).any(|s| s.contains('\0')));
        let mut r = prepare_commit();
        r.pending_offsets
            .insert("g\0".into(), CommittedOffsets::new());
        assert!(strings(&r).any(|s| s.contains('\0')));
    }
}
