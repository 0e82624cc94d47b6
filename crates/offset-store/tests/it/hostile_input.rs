//! Hostile input for the JSON store's loader: generated malformed, truncated and torn files.
//!
//! Each file's verdict is checked against an independent oracle: a generic JSON tree that
//! keeps repeated keys, validated by hand against docs/rules.md#json-format. The loader must accept
//! exactly what the oracle accepts (with the same offsets), and refuse everything else with
//! a `Corrupt` error naming the file — never panic, never load an empty store instead.

use crate::common;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use common::{check_error, for_each_seed, random_groups, reference_encoding, tp, Groups, Rng};
use coordinator_core::{OffsetMap, StorageErrorKind};
use offset_store::testing::SimFs;
use offset_store::JsonFileStore;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

const PATH: &str = "/data/offsets.json";
const CASES: u64 = 13_000;
const MALFORMED: u64 = 10_000;

/// A JSON value that keeps every key of an object, repeated ones included.
#[derive(Clone, Debug)]
enum Json {
    Null,
    Bool,
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Json;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_unit<E>(self) -> Result<Json, E> {
                Ok(Json::Null)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Json, E> {
                Ok(Json::Bool)
            }
            fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
                Ok(Json::Number(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
                Ok(Json::Number(v.into()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
                serde_json::Number::from_f64(v)
                    .map(Json::Number)
                    .ok_or_else(|| E::custom("not a finite number"))
            }
            fn visit_str<E>(self, v: &str) -> Result<Json, E> {
                Ok(Json::String(v.to_owned()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Json::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Json::Object(entries))
            }
        }
        d.deserialize_any(V)
    }
}

/// The keys of `object` if they are exactly `expected`, each once, in any order.
fn exact_keys<'a>(object: &'a Json, expected: &[&str]) -> Option<BTreeMap<&'a str, &'a Json>> {
    let Json::Object(entries) = object else {
        return None;
    };
    let fields: BTreeMap<&str, &Json> = entries.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let exact = entries.len() == expected.len()
        && fields.len() == expected.len()
        && expected.iter().all(|k| fields.contains_key(k));
    exact.then_some(fields)
}

/// What a correct loader makes of `bytes`: the offsets, or `None` for an invalid file.
fn oracle(bytes: &[u8]) -> Option<Groups> {
    let file: Json = serde_json::from_slice(bytes).ok()?;
    let top = exact_keys(&file, &["groups", "version"])?;
    match top["version"] {
        Json::Number(n) if n.as_u64() == Some(1) => {}
        _ => return None,
    }
    let Json::Object(groups) = top["groups"] else {
        return None;
    };
    let mut out = Groups::new();
    let mut seen = std::collections::BTreeSet::new();
    for (group, entries) in groups {
        if !seen.insert(group.as_str()) {
            return None;
        }
        let Json::Array(entries) = entries else {
            return None;
        };
        let mut offsets = OffsetMap::new();
        for entry in entries {
            let fields = exact_keys(entry, &["offset", "partition", "topic"])?;
            let (Json::Number(offset), Json::Number(partition), Json::String(topic)) =
                (fields["offset"], fields["partition"], fields["topic"])
            else {
                return None;
            };
            let offset = offset.as_i64().filter(|&o| o >= 0)?;
            let partition = u32::try_from(partition.as_u64()?).ok()?;
            if offsets.insert(tp(topic, partition), offset).is_some() {
                return None;
            }
        }
        if !offsets.is_empty() {
            out.insert(group.clone(), offsets);
        }
    }
    Some(out)
}

const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\\",
    "-",
    "0",
    "-1",
    "1.5",
    "1e999",
    "null",
    "true",
    "\"x\"",
    "\\u0000",
    "\\ud800",
    " ",
    "\n",
    "4294967296",
    "9223372036854775808",
    "{}",
    "[]",
    "\"offset\":1",
    "\"version\":1",
    "\"groups\":{}",
];

/// Replaces the value of the first occurrence of `"key":` with `with`.
fn replace_value(text: &str, key: &str, with: &str, rng: &mut Rng) -> String {
    let pattern = format!("\"{key}\":");
    let hits: Vec<usize> = text.match_indices(&pattern).map(|(i, _)| i).collect();
    if hits.is_empty() {
        return text.to_owned();
    }
    let start = hits[rng.index(hits.len())] + pattern.len();
    let end = text[start..]
        .find([',', '}', ']'])
        .map_or(text.len(), |i| start + i);
    format!("{}{with}{}", &text[..start], &text[end..])
}

/// A damaged offset file, built from a valid one.
fn hostile_file(rng: &mut Rng) -> Vec<u8> {
    let valid = reference_encoding(&random_groups(rng, 3, 4));
    let text = String::from_utf8(valid.clone()).unwrap_or_default();
    let mut bytes = match rng.below(12) {
        // Truncated: a strict prefix.
        0 | 1 => valid[..rng.index(valid.len())].to_vec(),
        // Torn: the start of one file, the end of another.
        2 => {
            let other = reference_encoding(&random_groups(rng, 3, 4));
            let mut torn = valid[..rng.index(valid.len())].to_vec();
            torn.extend_from_slice(&other[rng.index(other.len())..]);
            torn
        }
        // One byte changed.
        3 => {
            let mut b = valid.clone();
            let at = rng.index(b.len());
            b[at] = rng.next_u64() as u8;
            b
        }
        // A token inserted.
        4 => {
            let at = rng.index(text.len() + 1);
            let at = (0..=at)
                .rev()
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(0);
            format!("{}{}{}", &text[..at], rng.pick(TOKENS), &text[at..]).into_bytes()
        }
        // A range deleted, or repeated (duplicate entries, groups and keys).
        5 | 6 => {
            let (a, b) = (rng.index(valid.len() + 1), rng.index(valid.len() + 1));
            let (a, b) = (a.min(b), a.max(b));
            let mut out = valid[..a].to_vec();
            if rng.percent(50) {
                out.extend_from_slice(&valid[a..b]);
            }
            out.extend_from_slice(&valid[b..]);
            if a == b {
                out.push(b'#');
            }
            out
        }
        // A value of the wrong type or out of range.
        7 => {
            let key = *rng.pick(&["offset", "partition", "topic", "version", "groups"]);
            let with = *rng.pick(&[
                "-1",
                "-9223372036854775808",
                "4294967296",
                "1.0",
                "1e0",
                "\"1\"",
                "null",
                "[]",
                "{}",
                "true",
                "2",
                "0",
            ]);
            replace_value(&text, key, with, rng).into_bytes()
        }
        // A key renamed: missing plus unknown.
        8 => {
            let key = *rng.pick(&[
                "\"offset\"",
                "\"partition\"",
                "\"topic\"",
                "\"version\"",
                "\"groups\"",
            ]);
            text.replacen(key, "\"other\"", 1).into_bytes()
        }
        // A group repeated.
        9 => {
            let g = r#""dup":[{"offset":1,"partition":0,"topic":"t"}]"#;
            text.replacen("{\"groups\":{", &format!("{{\"groups\":{{{g},{g},"), 1)
                .replace(",}", "}")
                .into_bytes()
        }
        // Noise.
        10 => (0..rng.index(64)).map(|_| rng.next_u64() as u8).collect(),
        // Deep nesting.
        _ => {
            let depth = 100 + rng.index(1000);
            format!(
                r#"{{"groups":{}{},"version":1}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            )
            .into_bytes()
        }
    };
    if rng.percent(10) {
        // And sometimes a second, smaller wound.
        if !bytes.is_empty() {
            let at = rng.index(bytes.len());
            bytes[at] ^= 1 << rng.below(8);
        }
    }
    bytes
}

#[test]
fn generated_malformed_files_are_refused_with_a_typed_error_naming_the_file() {
    let mut malformed = 0u64;
    let mut accepted = 0u64;
    let dir = tempfile::tempdir().unwrap();
    let disk_path = dir.path().join("offsets.json");
    let cases = for_each_seed(0xBAD_F11E_0000, CASES, |seed| {
        let mut rng = Rng::new(seed);
        let bytes = hostile_file(&mut rng);
        let fs = SimFs::new();
        fs.put_file(PATH, bytes.clone());
        let loaded = JsonFileStore::open_with_fs(PATH, fs);
        // Every 50th case also goes through the real file system.
        let on_disk = (seed % 50 == 0).then(|| {
            std::fs::write(&disk_path, &bytes).unwrap();
            JsonFileStore::open(&disk_path)
        });
        let shown = String::from_utf8_lossy(&bytes);
        match (oracle(&bytes), loaded) {
            (Some(expected), Ok(store)) => {
                ensure!(store.snapshot() == expected, "{shown}: loaded differently");
                if let Some(on_disk) = on_disk {
                    let store = on_disk.map_err(|e| format!("{shown}: disk: {e}"))?;
                    ensure!(store.snapshot() == expected, "{shown}: disk differs");
                }
                accepted += 1;
            }
            (None, Err(err)) => {
                check_error(&err, StorageErrorKind::Corrupt, Path::new(PATH))
                    .map_err(|e| format!("{shown}: {e}"))?;
                if let Some(on_disk) = on_disk {
                    let err = on_disk
                        .err()
                        .ok_or_else(|| format!("{shown}: disk accepted it"))?;
                    check_error(&err, StorageErrorKind::Corrupt, &disk_path)?;
                }
                malformed += 1;
            }
            (Some(expected), Err(err)) => {
                return Err(format!(
                    "{shown}: refused a valid file ({expected:?}): {err}"
                ))
            }
            (None, Ok(store)) => {
                return Err(format!(
                    "{shown}: accepted an invalid file as {:?}",
                    store.snapshot()
                ))
            }
        }
        Ok(())
    });
    println!(
        "{cases} generated files: {malformed} malformed (refused), {accepted} still valid (loaded)"
    );
    if std::env::var("OFFSET_STORE_SEED").is_err() {
        assert!(
            malformed >= MALFORMED * common::scale(),
            "only {malformed} malformed files"
        );
    }
}

#[test]
fn the_oracle_agrees_with_the_documented_format() {
    let valid = reference_encoding(&BTreeMap::from([(
        "g".to_string(),
        OffsetMap::from([(tp("t", 0), 5)]),
    )]));
    assert_eq!(oracle(&valid).map(|g| g.len()), Some(1));
    assert_eq!(oracle(br#"{"groups":{},"version":1}"#), Some(Groups::new()));
    assert!(oracle(br#"{"groups":{},"version":2}"#).is_none());
    assert!(oracle(br#"{"groups":{"g":[],"g":[]},"version":1}"#).is_none());
    assert!(oracle(br#"{"groups":{},"version":1,"version":1}"#).is_none());
}
