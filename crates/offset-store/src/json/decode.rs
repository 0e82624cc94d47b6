//! The strict reader of the version-1 file format.
//!
//! Every visitor is written by hand rather than derived: a derived struct would also accept a
//! JSON array in place of an object (`[{…}, 1]`) and a later duplicate key would silently
//! replace an earlier group. Here anything but the exact shape is refused — wrong types,
//! missing or unknown keys, duplicate keys, groups or partitions, negative offsets,
//! partitions outside `u32` — and serde_json adds the line and column of the fault.
//!
//! Reading is two passes. The first reads only `version`, so a file of another version is
//! reported as such instead of as whatever its other keys happen to break.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use coordinator_core::{OffsetMap, StorageError, StorageErrorKind, TopicPartition};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The only format version this build reads and writes.
pub(crate) const VERSION: u64 = 1;

/// Every group's committed offsets, by group id.
pub(crate) type Groups = BTreeMap<String, OffsetMap>;

/// Reads a whole offset file. Every failure is a [`StorageErrorKind::Corrupt`] error whose
/// message names `path`.
pub(crate) fn decode(path: &Path, bytes: &[u8]) -> Result<Groups, StorageError> {
    let corrupt = |detail: String| {
        StorageError::new(
            StorageErrorKind::Corrupt,
            format!("`{}` is not a valid offset file: {detail}", path.display()),
        )
    };
    let version = probe_version(bytes).map_err(|e| corrupt(e.to_string()).with_source(e))?;
    match version {
        None => return Err(corrupt("it has no `version` (or it is null)".into())),
        Some(v) if v.as_u64() == Some(VERSION) => {}
        Some(v @ serde_json::Value::Number(_)) => {
            return Err(corrupt(format!(
                "it has format version {v}; this build reads only version {VERSION}"
            )))
        }
        Some(v) => return Err(corrupt(format!("`version` must be an integer, not {v}"))),
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.deserialize_map(FileVisitor)
        .and_then(|groups| de.end().map(|()| groups))
        .map_err(|e| corrupt(e.to_string()).with_source(e))
}

fn probe_version(bytes: &[u8]) -> Result<Option<serde_json::Value>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let version = de.deserialize_map(VersionProbe)?;
    de.end()?;
    Ok(version)
}

/// The top-level object, read for its `version` only.
struct VersionProbe;

impl<'de> Visitor<'de> for VersionProbe {
    type Value = Option<serde_json::Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an offset file object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut version = None;
        let mut seen = false;
        while let Some(key) = map.next_key::<Key<'_>>()? {
            if key.0 == "version" {
                if seen {
                    return Err(de::Error::duplicate_field("version"));
                }
                seen = true;
                version = map.next_value::<Option<serde_json::Value>>()?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(version)
    }
}

/// `{"groups":{…},"version":1}`, keys in any order, each exactly once.
struct FileVisitor;

impl<'de> Visitor<'de> for FileVisitor {
    type Value = Groups;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an offset file object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Groups, A::Error> {
        let mut groups = None;
        let mut version_seen = false;
        while let Some(key) = map.next_key::<Key<'_>>()? {
            match &*key.0 {
                "groups" if groups.is_some() => return Err(de::Error::duplicate_field("groups")),
                "groups" => groups = Some(map.next_value_seed(GroupsSeed)?),
                // The probe has already checked the value.
                "version" if !version_seen => {
                    version_seen = true;
                    map.next_value::<IgnoredAny>()?;
                }
                "version" => return Err(de::Error::duplicate_field("version")),
                other => return Err(de::Error::unknown_field(other, &["groups", "version"])),
            }
        }
        groups.ok_or_else(|| de::Error::missing_field("groups"))
    }
}

/// `{"<group>":[…],…}`.
struct GroupsSeed;

impl<'de> DeserializeSeed<'de> for GroupsSeed {
    type Value = Groups;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Groups, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for GroupsSeed {
    type Value = Groups;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of groups")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Groups, A::Error> {
        let mut groups = Groups::new();
        while let Some(group) = map.next_key::<String>()? {
            if groups.contains_key(&group) {
                return Err(de::Error::custom(format_args!(
                    "group `{group}` appears twice"
                )));
            }
            let offsets = map.next_value_seed(EntriesSeed { group: &group })?;
            // `[]` holds nothing; keeping it would only make a later rewrite differ.
            if !offsets.is_empty() {
                groups.insert(group, offsets);
            }
        }
        Ok(groups)
    }
}

/// `[{"offset":N,"partition":P,"topic":"T"},…]` of one group.
struct EntriesSeed<'g> {
    group: &'g str,
}

impl<'de> DeserializeSeed<'de> for EntriesSeed<'_> {
    type Value = OffsetMap;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<OffsetMap, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EntriesSeed<'_> {
    type Value = OffsetMap;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an array of offset entries for group `{}`", self.group)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OffsetMap, A::Error> {
        let mut offsets = OffsetMap::new();
        // Entries come sorted by topic, so consecutive entries share one topic allocation.
        let mut last_topic: Option<Arc<str>> = None;
        while let Some(entry) = seq.next_element_seed(EntrySeed { group: self.group })? {
            let topic = match last_topic {
                Some(t) if *t == *entry.topic => t,
                _ => Arc::from(entry.topic),
            };
            last_topic = Some(Arc::clone(&topic));
            let tp = TopicPartition::new(topic, entry.partition);
            if offsets.contains_key(&tp) {
                return Err(de::Error::custom(format_args!(
                    "group `{}` lists partition {tp} twice",
                    self.group
                )));
            }
            offsets.insert(tp, entry.offset);
        }
        Ok(offsets)
    }
}

struct Entry {
    offset: i64,
    partition: u32,
    topic: String,
}

/// `{"offset":N,"partition":P,"topic":"T"}`, keys in any order, each exactly once.
struct EntrySeed<'g> {
    group: &'g str,
}

impl<'de> DeserializeSeed<'de> for EntrySeed<'_> {
    type Value = Entry;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Entry, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EntrySeed<'_> {
    type Value = Entry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an offset entry object of group `{}`", self.group)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
        const FIELDS: &[&str] = &["offset", "partition", "topic"];
        let (mut offset, mut partition, mut topic) = (None, None, None);
        while let Some(key) = map.next_key::<Key<'_>>()? {
            match &*key.0 {
                "offset" if offset.is_some() => return Err(de::Error::duplicate_field("offset")),
                "offset" => offset = Some(map.next_value::<i64>()?),
                "partition" if partition.is_some() => {
                    return Err(de::Error::duplicate_field("partition"))
                }
                "partition" => partition = Some(map.next_value::<u32>()?),
                "topic" if topic.is_some() => return Err(de::Error::duplicate_field("topic")),
                "topic" => topic = Some(map.next_value::<String>()?),
                other => return Err(de::Error::unknown_field(other, FIELDS)),
            }
        }
        let offset = offset.ok_or_else(|| de::Error::missing_field("offset"))?;
        let partition = partition.ok_or_else(|| de::Error::missing_field("partition"))?;
        let topic = topic.ok_or_else(|| de::Error::missing_field("topic"))?;
        if offset < 0 {
            return Err(de::Error::custom(format_args!(
                "group `{}`, partition {topic}-{partition}: offset {offset} is negative",
                self.group
            )));
        }
        Ok(Entry {
            offset,
            partition,
            topic,
        })
    }
}

/// An object key, borrowed from the input when it holds no escapes.
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(v.into()))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(v.to_owned().into()))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Groups, StorageError> {
        decode(Path::new("/data/offsets.json"), text.as_bytes())
    }

    fn corrupt(text: &str) -> String {
        match load(text) {
            Ok(groups) => panic!("accepted {text:?} as {groups:?}"),
            Err(e) => {
                assert_eq!(e.kind(), StorageErrorKind::Corrupt, "{e}");
                assert!(e.message().contains("/data/offsets.json"), "{e}");
                e.message().to_owned()
            }
        }
    }

    #[test]
    fn reads_the_canonical_format() -> Result<(), StorageError> {
        let groups = load(
            r#"{"groups":{"a":[{"offset":0,"partition":3,"topic":"audit"},{"offset":12,"partition":0,"topic":"orders"}],"b":[{"offset":7,"partition":4294967295,"topic":"orders"}]},"version":1}"#,
        )?;
        assert_eq!(groups.len(), 2);
        assert_eq!(groups["a"][&TopicPartition::new("orders", 0)], 12);
        assert_eq!(groups["b"][&TopicPartition::new("orders", u32::MAX)], 7);
        Ok(())
    }

    #[test]
    fn key_order_whitespace_and_escapes_do_not_matter() -> Result<(), StorageError> {
        let groups = load(
            "\n { \"version\" : 1 , \"groups\" : { \"g\\u0041\" : [ { \"topic\" : \"t\\n\", \"partition\" : 2 , \"offset\" : 9 } ] , \"e\": [] } }\n",
        )?;
        assert_eq!(groups.len(), 1, "an empty group holds nothing");
        assert_eq!(groups["gA"][&TopicPartition::new("t\n", 2)], 9);
        Ok(())
    }

    #[test]
    fn consecutive_entries_share_their_topic() -> Result<(), StorageError> {
        let groups = load(
            r#"{"groups":{"g":[{"offset":1,"partition":0,"topic":"t"},{"offset":2,"partition":1,"topic":"t"}]},"version":1}"#,
        )?;
        let tps: Vec<_> = groups["g"].keys().collect();
        assert!(Arc::ptr_eq(tps[0].topic_arc(), tps[1].topic_arc()));
        Ok(())
    }

    #[test]
    fn each_kind_of_damage_is_named() {
        let cases = [
            ("", "EOF"),
            ("{", "EOF"),
            ("[]", "expected an offset file object"),
            ("[1, {}]", "expected an offset file object"),
            ("null", "expected an offset file object"),
            (r#"{"groups":{}}"#, "no `version`"),
            (r#"{"groups":{},"version":null}"#, "no `version`"),
            (r#"{"groups":{},"version":2}"#, "format version 2"),
            (r#"{"groups":{},"version":0}"#, "format version 0"),
            (r#"{"groups":{},"version":1.0}"#, "format version 1.0"),
            (r#"{"groups":{},"version":"1"}"#, "must be an integer"),
            (
                r#"{"groups":{},"version":1,"version":1}"#,
                "duplicate field `version`",
            ),
            (r#"{"version":1}"#, "missing field `groups`"),
            (
                r#"{"groups":[],"version":1}"#,
                "expected an object of groups",
            ),
            (
                r#"{"groups":{},"groups":{},"version":1}"#,
                "duplicate field `groups`",
            ),
            (
                r#"{"groups":{},"version":1,"extra":0}"#,
                "unknown field `extra`",
            ),
            (r#"{"groups":{},"version":1} x"#, "trailing characters"),
            (
                r#"{"groups":{"g":{}},"version":1}"#,
                "array of offset entries",
            ),
            (
                r#"{"groups":{"g":[[5,0,"t"]]},"version":1}"#,
                "offset entry object",
            ),
            (
                r#"{"groups":{"g":[]},"groups":{},"version":1}"#,
                "duplicate field `groups`",
            ),
            (
                r#"{"groups":{"g":[{"offset":1,"partition":0,"topic":"t"}],"g":[]},"version":1}"#,
                "group `g` appears twice",
            ),
            (
                r#"{"groups":{"g":[{"offset":1,"partition":0,"topic":"t"},{"offset":2,"partition":0,"topic":"t"}]},"version":1}"#,
                "lists partition t-0 twice",
            ),
            (
                r#"{"groups":{"g":[{"offset":-1,"partition":0,"topic":"t"}]},"version":1}"#,
                "offset -1 is negative",
            ),
            (
                r#"{"groups":{"g":[{"offset":1,"partition":4294967296,"topic":"t"}]},"version":1}"#,
                "expected u32",
            ),
            (
                r#"{"groups":{"g":[{"offset":1,"partition":-1,"topic":"t"}]},"version":1}"#,
                "expected u32",
            ),
            (
                r#"{"groups":{"g":[{"offset":9223372036854775808,"partition":0,"topic":"t"}]},"version":1}"#,
                "expected i64",
            ),
            (
                r#"{"groups":{"g":[{"offset":1.5,"partition":0,"topic":"t"}]},"version":1}"#,
                "expected i64",
            ),
            (
                r#"{"groups":{"g":[{"offset":"1","partition":0,"topic":"t"}]},"version":1}"#,
                "expected i64",
            ),
            (
                r#"{"groups":{"g":[{"offset":1,"partition":0,"topic":7}]},"version":1}"#,
                "expected a string",
            ),
            (
                r#"{"groups":{"g":[{"partition":0,"topic":"t"}]},"version":1}"#,
                "missing field `offset`",
            ),
            (
                r#"{"groups":{"g":[{"offset":1,"topic":"t"}]},"version":1}"#,
                "missing field `partition`",
            ),
            (
                r#"{"groups":{"g":[{"offset":1,"partition":0}]},"version":1}"#,
                "missing field `topic`",
            ),
            (
                r#"{"groups":{"g":[{"offset":1,"offset":1,"partition":0,"topic":"t"}]},"version":1}"#,
                "duplicate field `offset`",
            ),
            (
                r#"{"groups":{"g":[{"offset":1,"partition":0,"topic":"t","leader":0}]},"version":1}"#,
                "unknown field `leader`",
            ),
        ];
        for (text, expected) in cases {
            let message = corrupt(text);
            assert!(
                message.contains(expected),
                "{text}: expected {expected:?} in {message:?}"
            );
        }
    }

    #[test]
    fn invalid_utf8_and_deep_nesting_are_errors_not_crashes() {
        let mut bytes =
            br#"{"groups":{"g":[{"offset":1,"partition":0,"topic":"X"}]},"version":1}"#.to_vec();
        let x = bytes.iter().position(|&b| b == b'X').unwrap_or(0);
        bytes[x] = 0xff;
        let err = decode(Path::new("f.json"), &bytes).err();
        assert_eq!(err.map(|e| e.kind()), Some(StorageErrorKind::Corrupt));

        // Nesting deep enough to overflow a recursive parser's stack, in a value that is
        // parsed and in one that is skipped.
        let nested = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let parsed = corrupt(&format!(r#"{{"groups":{{}},"version":{nested}}}"#));
        assert!(parsed.contains("recursion limit"), "{parsed}");
        let skipped = corrupt(&format!(r#"{{"groups":{{}},"version":1,"x":{nested}}}"#));
        assert!(skipped.contains("unknown field `x`"), "{skipped}");
    }
}
