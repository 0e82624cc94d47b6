//! A [`GroupRecord`] as the JSON document stored in the `groups` table's `jsonb` column.
//!
//! The core has no serde derives and the log store's binary encoding is private to its
//! crate, so this module writes and reads its own document, with a format version `"v": 1`
//! so that a later change of shape can be read alongside the old one. Opaque bytes
//! (protocol metadata, assignments) are lowercase hex strings; numbers are JSON numbers
//! (`jsonb` keeps them exactly: they are `numeric`). Decoding checks every field and names
//! the one that is wrong.

use std::sync::Arc;

use coordinator_core::{
    ClassicProtocol, ConsumerMemberRecord, Generation, GroupKind, GroupRecord, GroupState,
    MemberRecord, TopicPartition,
};
use serde_json::{json, Map, Value};

/// The version of the document this build writes (and the only one it reads).
pub(crate) const RECORD_VERSION: u64 = 1;

/// `record` as a JSON document.
pub(crate) fn encode(record: &GroupRecord) -> Value {
    json!({
        "v": RECORD_VERSION,
        "group_id": record.group_id,
        "kind": record.kind.as_str(),
        "generation": record.generation.get(),
        "state": record.state.as_str(),
        "protocol_type": record.protocol_type,
        "protocol": record.protocol,
        "leader": record.leader,
        "members": record.members.iter().map(member).collect::<Vec<_>>(),
    })
}

fn member(m: &MemberRecord) -> Value {
    json!({
        "member_id": m.member_id,
        "group_instance_id": m.group_instance_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "session_timeout_ms": m.session_timeout_ms,
        "rebalance_timeout_ms": m.rebalance_timeout_ms,
        "protocols": m.protocols.iter().map(|p| json!({
            "name": p.name,
            "metadata": hex(&p.metadata),
            "topics": p.topics,
        })).collect::<Vec<_>>(),
        "assignment": hex(&m.assignment),
        "partitions": partitions(&m.partitions),
        "consumer": m.consumer.as_ref().map(|c| json!({
            "member_epoch": c.member_epoch,
            "previous_member_epoch": c.previous_member_epoch,
            "state": c.state,
            "rack_id": c.rack_id,
            "server_assignor": c.server_assignor,
            "subscribed_topic_names": c.subscribed_topic_names,
            "subscribed_topic_regex": c.subscribed_topic_regex,
            "partitions_pending_revocation": partitions(&c.partitions_pending_revocation),
            "target_assignment": partitions(&c.target_assignment),
            "target_assignment_epoch": c.target_assignment_epoch,
        })),
    })
}

fn partitions(tps: &[TopicPartition]) -> Value {
    Value::Array(
        tps.iter()
            .map(|tp| json!([tp.topic(), tp.partition()]))
            .collect(),
    )
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

/// Every string a record holds, for the check that none contains U+0000 (which `jsonb`
/// cannot store).
pub(crate) fn strings(r: &GroupRecord) -> impl Iterator<Item = &str> {
    let head = [Some(r.group_id.as_str()), Some(r.protocol_type.as_str())]
        .into_iter()
        .chain([r.protocol.as_deref(), r.leader.as_deref()])
        .flatten();
    let members = r.members.iter().flat_map(|m| {
        let own = [
            Some(m.member_id.as_str()),
            m.group_instance_id.as_deref(),
            Some(m.client_id.as_str()),
            Some(m.client_host.as_str()),
        ]
        .into_iter()
        .flatten();
        let protocols = m.protocols.iter().flat_map(|p| {
            std::iter::once(p.name.as_str()).chain(p.topics.iter().flatten().map(String::as_str))
        });
        let consumer = m.consumer.iter().flat_map(|c| {
            [
                Some(c.state.as_str()),
                c.rack_id.as_deref(),
                c.server_assignor.as_deref(),
            ]
            .into_iter()
            .flatten()
            .chain(c.subscribed_topic_names.iter().map(String::as_str))
            .chain(c.subscribed_topic_regex.as_deref())
            .chain(c.partitions_pending_revocation.iter().map(|tp| tp.topic()))
            .chain(c.target_assignment.iter().map(|tp| tp.topic()))
        });
        own.chain(protocols)
            .chain(m.partitions.iter().map(|tp| tp.topic()))
            .chain(consumer)
    });
    head.chain(members)
}

/// Reads a document written by [`encode`]; the error says which field is wrong.
pub(crate) fn decode(doc: &Value) -> Result<GroupRecord, String> {
    let o = Obj::new(doc, "the record")?;
    let version = o.u64("v")?;
    if version != RECORD_VERSION {
        return Err(format!(
            "record format version {version} is not one this build reads ({RECORD_VERSION})"
        ));
    }
    let kind = match o.str("kind")? {
        "chapter" => GroupKind::Chapter,
        "classic" => GroupKind::Classic,
        "consumer" => GroupKind::Consumer,
        "simple" => GroupKind::Simple,
        "share" => GroupKind::Share,
        other => return Err(format!("field `kind`: unknown group kind `{other}`")),
    };
    let state = match o.str("state")? {
        "Empty" => GroupState::Empty,
        "PreparingRebalance" => GroupState::PreparingRebalance,
        "CompletingRebalance" => GroupState::CompletingRebalance,
        "Stable" => GroupState::Stable,
        "Dead" => GroupState::Dead,
        other => return Err(format!("field `state`: unknown group state `{other}`")),
    };
    let members = o
        .array("members")?
        .iter()
        .enumerate()
        .map(|(i, m)| decode_member(&Obj::new(m, &format!("members[{i}]"))?))
        .collect::<Result<_, _>>()?;
    Ok(GroupRecord {
        group_id: o.string("group_id")?,
        kind,
        generation: Generation::new(o.u64("generation")?),
        state,
        protocol_type: o.string("protocol_type")?,
        protocol: o.opt_string("protocol")?,
        leader: o.opt_string("leader")?,
        members,
    })
}

fn decode_member(o: &Obj<'_>) -> Result<MemberRecord, String> {
    let protocols = o
        .array("protocols")?
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let p = Obj::new(p, &format!("{}.protocols[{i}]", o.path))?;
            let topics = match p.get("topics")? {
                Value::Null => None,
                _ => Some(p.strings("topics")?),
            };
            Ok(ClassicProtocol {
                name: p.string("name")?,
                metadata: p.bytes("metadata")?,
                topics,
            })
        })
        .collect::<Result<_, String>>()?;
    let consumer = match o.get("consumer")? {
        Value::Null => None,
        c => {
            let c = Obj::new(c, &format!("{}.consumer", o.path))?;
            Some(ConsumerMemberRecord {
                member_epoch: c.i32("member_epoch")?,
                previous_member_epoch: c.i32("previous_member_epoch")?,
                state: c.string("state")?,
                rack_id: c.opt_string("rack_id")?,
                server_assignor: c.opt_string("server_assignor")?,
                subscribed_topic_names: c.strings("subscribed_topic_names")?,
                subscribed_topic_regex: c.opt_string_or_absent("subscribed_topic_regex")?,
                partitions_pending_revocation: c.partitions("partitions_pending_revocation")?,
                target_assignment: c.partitions("target_assignment")?,
                target_assignment_epoch: c.i32("target_assignment_epoch")?,
            })
        }
    };
    Ok(MemberRecord {
        member_id: o.string("member_id")?,
        group_instance_id: o.opt_string("group_instance_id")?,
        client_id: o.string("client_id")?,
        client_host: o.string("client_host")?,
        session_timeout_ms: o.u64("session_timeout_ms")?,
        rebalance_timeout_ms: o.u64("rebalance_timeout_ms")?,
        protocols,
        assignment: o.bytes("assignment")?,
        partitions: o.partitions("partitions")?,
        consumer,
    })
}

/// A JSON object being decoded, with its path for error messages (shared with
/// [`txn_record`](crate::txn_record)).
pub(crate) struct Obj<'a> {
    map: &'a Map<String, Value>,
    pub(crate) path: String,
}

impl<'a> Obj<'a> {
    pub(crate) fn new(v: &'a Value, path: &str) -> Result<Self, String> {
        match v {
            Value::Object(map) => Ok(Obj {
                map,
                path: path.to_string(),
            }),
            _ => Err(format!("{path} is not a JSON object")),
        }
    }

    pub(crate) fn get(&self, key: &str) -> Result<&'a Value, String> {
        self.map
            .get(key)
            .ok_or_else(|| format!("{}: field `{key}` is missing", self.path))
    }

    pub(crate) fn wrong(&self, key: &str, what: &str) -> String {
        format!("{}: field `{key}` is not {what}", self.path)
    }

    pub(crate) fn str(&self, key: &str) -> Result<&'a str, String> {
        self.get(key)?
            .as_str()
            .ok_or_else(|| self.wrong(key, "a string"))
    }

    pub(crate) fn string(&self, key: &str) -> Result<String, String> {
        self.str(key).map(str::to_string)
    }

    pub(crate) fn opt_string(&self, key: &str) -> Result<Option<String>, String> {
        match self.get(key)? {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s.clone())),
            _ => Err(self.wrong(key, "a string or null")),
        }
    }

    /// A field added after the first documents were written: absent reads as null.
    pub(crate) fn opt_string_or_absent(&self, key: &str) -> Result<Option<String>, String> {
        match self.map.get(key) {
            None => Ok(None),
            Some(_) => self.opt_string(key),
        }
    }

    pub(crate) fn u64(&self, key: &str) -> Result<u64, String> {
        self.get(key)?
            .as_u64()
            .ok_or_else(|| self.wrong(key, "an unsigned 64-bit integer"))
    }

    pub(crate) fn i32(&self, key: &str) -> Result<i32, String> {
        self.get(key)?
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| self.wrong(key, "a 32-bit integer"))
    }

    pub(crate) fn array(&self, key: &str) -> Result<&'a Vec<Value>, String> {
        self.get(key)?
            .as_array()
            .ok_or_else(|| self.wrong(key, "an array"))
    }

    pub(crate) fn strings(&self, key: &str) -> Result<Vec<String>, String> {
        self.array(key)?
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .ok_or_else(|| self.wrong(key, "an array of strings"))
    }

    pub(crate) fn partitions(&self, key: &str) -> Result<Vec<TopicPartition>, String> {
        self.array(key)?
            .iter()
            .map(|v| match v.as_array().map(Vec::as_slice) {
                Some([Value::String(t), p]) => p
                    .as_u64()
                    .and_then(|p| u32::try_from(p).ok())
                    .map(|p| TopicPartition::new(t.as_str(), p)),
                _ => None,
            })
            .collect::<Option<_>>()
            .ok_or_else(|| self.wrong(key, "an array of [topic, partition] pairs"))
    }

    pub(crate) fn bytes(&self, key: &str) -> Result<Arc<[u8]>, String> {
        let s = self.str(key)?.as_bytes();
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        if s.len() % 2 != 0 {
            return Err(self.wrong(key, "hex (odd length)"));
        }
        s.chunks_exact(2)
            .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
            .collect::<Option<Vec<u8>>>()
            .map(Arc::from)
            .ok_or_else(|| self.wrong(key, "lowercase hex"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn tp(t: &str, p: u32) -> TopicPartition {
        TopicPartition::new(t, p)
    }

    fn sample() -> GroupRecord {
        GroupRecord {
            group_id: "grp \"q\" ☃".into(),
            kind: GroupKind::Consumer,
            generation: Generation::new(u64::MAX),
            state: GroupState::PreparingRebalance,
            protocol_type: "consumer".into(),
            protocol: Some("uniform".into()),
            leader: None,
            members: vec![
                MemberRecord {
                    member_id: "m-1".into(),
                    group_instance_id: None,
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    session_timeout_ms: u64::MAX,
                    rebalance_timeout_ms: 0,
                    protocols: vec![
                        ClassicProtocol::new("range", vec![0u8, 255, 16]).with_topics(["a", "b"]),
                        ClassicProtocol::new("rr", Vec::<u8>::new()),
                    ],
                    assignment: vec![0xde_u8, 0xad].into(),
                    partitions: vec![tp("a", 0), tp("b", u32::MAX)],
                    consumer: Some(ConsumerMemberRecord {
                        member_epoch: -2,
                        previous_member_epoch: i32::MIN,
                        state: "UNREVOKED_PARTITIONS".into(),
                        rack_id: Some("r1".into()),
                        server_assignor: None,
                        subscribed_topic_names: vec!["a".into(), "b".into()],
                        subscribed_topic_regex: Some("c-.*".into()),
                        partitions_pending_revocation: vec![tp("a", 1)],
                        target_assignment: vec![],
                        target_assignment_epoch: i32::MAX,
                    }),
                },
                MemberRecord {
                    member_id: "m-2".into(),
                    group_instance_id: Some("i".into()),
                    client_id: String::new(),
                    client_host: String::new(),
                    session_timeout_ms: 1,
                    rebalance_timeout_ms: 2,
                    protocols: vec![],
                    assignment: Vec::<u8>::new().into(),
                    partitions: vec![],
                    consumer: None,
                },
            ],
        }
    }

    #[test]
    fn every_field_round_trips() {
        let r = sample();
        assert_eq!(decode(&encode(&r)), Ok(r));
    }

    #[test]
    fn a_document_from_before_regular_expressions_reads_as_none() {
        let mut doc = encode(&sample());
        doc["members"][0]["consumer"]
            .as_object_mut()
            .unwrap()
            .remove("subscribed_topic_regex");
        let back = decode(&doc).unwrap();
        let c = back.members[0].consumer.as_ref().unwrap();
        assert_eq!(c.subscribed_topic_regex, None);
    }

    #[test]
    fn round_trips_through_json_text() {
        let r = sample();
        let text = encode(&r).to_string();
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(decode(&back), Ok(r));
    }

    #[test]
    fn a_wrong_field_is_named() {
        let mut doc = encode(&sample());
        doc["members"][0]["assignment"] = json!("zz");
        let err = decode(&doc).unwrap_err();
        assert!(err.contains("members[0]: field `assignment`"), "{err}");

        let mut doc = encode(&sample());
        doc["members"][1]
            .as_object_mut()
            .unwrap()
            .remove("client_id");
        let err = decode(&doc).unwrap_err();
        assert!(
            err.contains("members[1]: field `client_id` is missing"),
            "{err}"
        );

        let mut doc = encode(&sample());
        doc["v"] = json!(2);
        assert!(decode(&doc).unwrap_err().contains("version 2"));

        let mut doc = encode(&sample());
        doc["kind"] = json!("weird");
        assert!(decode(&doc)
            .unwrap_err()
            .contains("unknown group kind `weird`"));

        let mut doc = encode(&sample());
        doc["members"][0]["consumer"]["member_epoch"] = json!(1_u64 << 40);
        let err = decode(&doc).unwrap_err();
        assert!(
            err.contains("members[0].consumer: field `member_epoch`"),
            "{err}"
        );
    }

    #[test]
    fn strings_lists_every_string_of_the_record() {
        let mut r = sample();
        assert!(strings(&r).all(|s| !s.contains('\0')));
        r.members[0].consumer.as_mut().unwrap().target_assignment = vec![tp("x\0y", 0)];
        assert!(strings(&r).any(|s| s.contains('\0')));
        let mut r = sample();
        r.members[0].protocols[0].topics = Some(vec!["\0".into()]);
        assert!(strings(&r).any(|s| s.contains('\0')));
    }
}
