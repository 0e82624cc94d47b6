//! Topic configs: the catalogue of the configs a topic has (Kafka's names, defaults, types
//! and broker-level synonyms), the values clients set at creation or alter later, and the
//! entries DescribeConfigs and CreateTopics v5+ report.
//!
//! The values are kept where the broker keeps its state ([`TopicConfigs`]: the data directory's
//! or PostgreSQL's document `topic-configs.json`, else memory), written whole before they take
//! effect ([`TopicConfigs::set`] / [`TopicConfigs::remove`] are the only writes). The broker's
//! retention applies `retention.ms` and `retention.bytes`; the others are accepted, validated
//! and reported.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use kafka_protocol::protocol::StrBytes;
use serde::{Deserialize, Serialize};

use super::codes;
use crate::documents::Documents;
use crate::error::BrokerError;

/// A wire string of `s` (the admin handlers' messages and names).
pub(crate) fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Kafka's `ConfigSource` values (DescribeConfigs v1+, CreateTopics v5+).
pub(crate) mod source {
    /// Set on the topic (Kafka's `DYNAMIC_TOPIC_CONFIG`, "TOPIC_CONFIG" in AdminClients).
    pub(crate) const TOPIC_CONFIG: i8 = 1;
    /// A cluster-wide default set dynamically (Kafka's `DYNAMIC_DEFAULT_BROKER_CONFIG`): see
    /// [`CLUSTER_DEFAULTS`](super::CLUSTER_DEFAULTS).
    pub(crate) const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
    /// A broker setting given at start-up.
    pub(crate) const STATIC_BROKER_CONFIG: i8 = 4;
    /// Kafka's default.
    pub(crate) const DEFAULT_CONFIG: i8 = 5;
}

/// Kafka's `ConfigType` values (DescribeConfigs v3+).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Boolean = 1,
    String = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
}

/// One topic config Kafka defines.
#[derive(Debug)]
pub(crate) struct Spec {
    pub(crate) name: &'static str,
    /// Kafka's default (the broker's, as a fresh Kafka 3.x broker reports it).
    pub(crate) default: &'static str,
    pub(crate) kind: Kind,
    /// The broker config that supplies the default, reported as a synonym.
    pub(crate) broker_synonym: &'static str,
    /// The values a string or list config accepts (empty: any).
    pub(crate) allowed: &'static [&'static str],
    pub(crate) doc: &'static str,
}

const LONG_MAX: &str = "9223372036854775807";

const fn spec(
    name: &'static str,
    default: &'static str,
    kind: Kind,
    broker_synonym: &'static str,
    doc: &'static str,
) -> Spec {
    Spec {
        name,
        default,
        kind,
        broker_synonym,
        allowed: &[],
        doc,
    }
}

/// Every topic config, sorted by name (Kafka's `LogConfig`).
pub(crate) static CATALOGUE: [Spec; 24] = [
    Spec {
        allowed: &["compact", "delete"],
        ..spec("cleanup.policy", "delete", Kind::List, "log.cleanup.policy",
            "A string that is either \"delete\" or \"compact\" or both: the retention policy of old log segments.")
    },
    Spec {
        allowed: &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"],
        ..spec("compression.type", "producer", Kind::String, "compression.type",
            "The final compression type of the topic; \"producer\" keeps the producer's codec.")
    },
    spec("delete.retention.ms", "86400000", Kind::Long, "log.cleaner.delete.retention.ms",
        "How long delete tombstone markers are retained on log compacted topics."),
    spec("file.delete.delay.ms", "60000", Kind::Long, "log.segment.delete.delay.ms",
        "The time to wait before deleting a file from the filesystem."),
    spec("flush.messages", LONG_MAX, Kind::Long, "log.flush.interval.messages",
        "The number of messages written to a log partition before an fsync is forced."),
    spec("flush.ms", LONG_MAX, Kind::Long, "log.flush.interval.ms",
        "The maximum time between fsyncs of the log."),
    spec("follower.replication.throttled.replicas", "", Kind::List,
        "follower.replication.throttled.replicas",
        "The replicas whose log replication is throttled on the follower side."),
    spec("index.interval.bytes", "4096", Kind::Int, "log.index.interval.bytes",
        "How frequently Kafka adds an index entry to its offset index."),
    spec("leader.replication.throttled.replicas", "", Kind::List,
        "leader.replication.throttled.replicas",
        "The replicas whose log replication is throttled on the leader side."),
    spec("max.compaction.lag.ms", LONG_MAX, Kind::Long, "log.cleaner.max.compaction.lag.ms",
        "The maximum time a message remains ineligible for compaction."),
    spec("max.message.bytes", "1048588", Kind::Int, "message.max.bytes",
        "The largest record batch size allowed by Kafka (after compression)."),
    spec("message.timestamp.after.max.ms", LONG_MAX, Kind::Long,
        "log.message.timestamp.after.max.ms",
        "The allowed difference of a message's timestamp ahead of the broker's time."),
    spec("message.timestamp.before.max.ms", LONG_MAX, Kind::Long,
        "log.message.timestamp.before.max.ms",
        "The allowed difference of a message's timestamp behind the broker's time."),
    Spec {
        allowed: &["CreateTime", "LogAppendTime"],
        ..spec("message.timestamp.type", "CreateTime", Kind::String,
            "log.message.timestamp.type",
            "Whether the timestamp in the message is the creation time or the log append time.")
    },
    spec("min.cleanable.dirty.ratio", "0.5", Kind::Double, "log.cleaner.min.cleanable.ratio",
        "How frequently the log compactor will attempt to clean the log."),
    spec("min.compaction.lag.ms", "0", Kind::Long, "log.cleaner.min.compaction.lag.ms",
        "The minimum time a message will remain uncompacted in the log."),
    spec("min.insync.replicas", "1", Kind::Int, "min.insync.replicas",
        "The minimum number of replicas that must acknowledge a write with acks=all."),
    spec("preallocate", "false", Kind::Boolean, "log.preallocate",
        "True if we should preallocate the file on disk when creating a new log segment."),
    spec("retention.bytes", "-1", Kind::Long, "log.retention.bytes",
        "The maximum size a partition can grow to before old segments are discarded."),
    spec("retention.ms", "604800000", Kind::Long, "log.retention.ms",
        "The maximum time a log is retained before old segments are discarded."),
    spec("segment.bytes", "1073741824", Kind::Int, "log.segment.bytes",
        "The segment file size for the log."),
    spec("segment.index.bytes", "10485760", Kind::Int, "log.index.size.max.bytes",
        "The size of the index that maps offsets to file positions."),
    spec("segment.ms", "604800000", Kind::Long, "log.roll.ms",
        "The period of time after which Kafka will force the log to roll."),
    spec("unclean.leader.election.enable", "false", Kind::Boolean,
        "unclean.leader.election.enable",
        "Whether replicas not in the ISR may be elected as leader as a last resort."),
];

/// The catalogue entry of `name`.
pub(crate) fn find(name: &str) -> Option<&'static Spec> {
    CATALOGUE.iter().find(|s| s.name == name)
}

/// A refused config, as the wire reports it: the code and Kafka's kind of message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub(crate) code: i16,
    pub(crate) message: String,
}

impl Refused {
    pub(crate) fn new(code: i16, message: impl Into<String>) -> Refused {
        Refused {
            code,
            message: message.into(),
        }
    }
}

/// Checks that `name` is a topic config and `value` a valid value of it (INVALID_CONFIG
/// otherwise, as Kafka).
pub(crate) fn validate(name: &str, value: Option<&str>) -> Result<(), Refused> {
    let spec = find(name).ok_or_else(|| {
        Refused::new(
            codes::INVALID_CONFIG,
            format!("Unknown topic config name: {name}"),
        )
    })?;
    let value = value.ok_or_else(|| {
        Refused::new(
            codes::INVALID_CONFIG,
            format!("Null value not supported for topic config: {name}"),
        )
    })?;
    let invalid = |why: &str| {
        Refused::new(
            codes::INVALID_CONFIG,
            format!("Invalid value {value} for configuration {name}: {why}"),
        )
    };
    let trimmed = value.trim();
    match spec.kind {
        Kind::Boolean => {
            if !trimmed.eq_ignore_ascii_case("true") && !trimmed.eq_ignore_ascii_case("false") {
                return Err(invalid("Expected value to be either true or false"));
            }
        }
        Kind::Int => {
            trimmed
                .parse::<i32>()
                .map_err(|_| invalid("Not a number of type INT"))?;
        }
        Kind::Short => {
            trimmed
                .parse::<i16>()
                .map_err(|_| invalid("Not a number of type SHORT"))?;
        }
        Kind::Long => {
            trimmed
                .parse::<i64>()
                .map_err(|_| invalid("Not a number of type LONG"))?;
        }
        Kind::Double => {
            trimmed
                .parse::<f64>()
                .map_err(|_| invalid("Not a number of type DOUBLE"))?;
        }
        Kind::String => {
            if !spec.allowed.is_empty() && !spec.allowed.contains(&trimmed) {
                return Err(invalid(&format!(
                    "String must be one of: {}",
                    spec.allowed.join(", ")
                )));
            }
        }
        Kind::List => {
            if !spec.allowed.is_empty() {
                // An empty list is valid, as Kafka parses it (no item to check).
                let items: Vec<&str> = trimmed
                    .split(',')
                    .map(str::trim)
                    .filter(|i| !i.is_empty())
                    .collect();
                if items.iter().any(|i| !spec.allowed.contains(i)) {
                    return Err(invalid(&format!(
                        "Each value must be one of: {}",
                        spec.allowed.join(", ")
                    )));
                }
            }
        }
    }
    Ok(())
}

/// The refusal of a change whose configs could not be kept (the write's error `e`):
/// KAFKA_STORAGE_ERROR, which clients retry.
pub(crate) fn not_kept(topic: &str, e: &str) -> Refused {
    Refused::new(
        codes::KAFKA_STORAGE_ERROR,
        format!("The configs of topic '{topic}' could not be kept: {e}"),
    )
}

/// The configs set on one topic (name → value); absent ones are at their defaults.
pub(crate) type Overrides = BTreeMap<String, String>;

/// The configs set on every topic, kept where the broker keeps its state (the document
/// [`TOPIC_CONFIGS_FILE`] of the data directory or of PostgreSQL; in memory without either).
/// Topics created by auto-creation or the broker's `--topic` flag have none set until a
/// client alters them.
#[derive(Debug, Default)]
pub(crate) struct TopicConfigs {
    topics: Mutex<BTreeMap<String, Overrides>>,
    /// Serializes the writers: read, write the document, swap.
    write: tokio::sync::Mutex<()>,
    documents: Option<Documents>,
}

/// The document holding every topic's configs.
pub(crate) const TOPIC_CONFIGS_FILE: &str = "topic-configs.json";

#[derive(Serialize, Deserialize)]
struct TopicConfigsFile {
    version: u32,
    topics: BTreeMap<String, Overrides>,
}

/// The configs of a kept topic configs document (none without one).
fn parse_topic_configs(bytes: Option<&[u8]>) -> Result<BTreeMap<String, Overrides>, String> {
    let Some(bytes) = bytes else {
        return Ok(BTreeMap::new());
    };
    let file: TopicConfigsFile = serde_json::from_slice(bytes)
        .map_err(|e| format!("not a topic configs file of this broker: {e}"))?;
    if file.version != 1 {
        return Err(format!(
            "topic configs version {} is not known to this broker (1 is)",
            file.version
        ));
    }
    Ok(file.topics)
}

impl TopicConfigs {
    /// The configs `documents` keep, if any.
    ///
    /// # Errors
    /// `INVALID_CONFIG` (setting `topic`) if the document cannot be read or parsed: a broker
    /// does not start with topic configs it cannot read.
    pub(crate) async fn open(documents: Option<Documents>) -> Result<TopicConfigs, BrokerError> {
        let mut topics = BTreeMap::new();
        if let Some(documents) = &documents {
            let shown = documents.shown(TOPIC_CONFIGS_FILE);
            let refuse = |reason: String| BrokerError::InvalidConfig {
                setting: "topic",
                reason: format!("`{shown}`: {reason}"),
            };
            let bytes = documents
                .load(TOPIC_CONFIGS_FILE)
                .await
                .map_err(|e| refuse(format!("cannot read the topic configs: {e}")))?;
            topics = parse_topic_configs(bytes.as_deref()).map_err(refuse)?;
        }
        Ok(TopicConfigs {
            topics: Mutex::new(topics),
            write: tokio::sync::Mutex::new(()),
            documents,
        })
    }

    /// Whether `topic`'s `cleanup.policy` (its own, else the default) includes `compact`.
    pub(crate) fn compacts(&self, topic: &str) -> bool {
        let policy = self.get(topic).get("cleanup.policy").map_or_else(
            || find("cleanup.policy").map_or_else(String::new, |s| s.default.to_string()),
            |v| v.to_string(),
        );
        policy.split(',').any(|p| p.trim() == "compact")
    }

    /// The configs set on `topic`.
    pub(crate) fn get(&self, topic: &str) -> Overrides {
        self.lock().get(topic).cloned().unwrap_or_default()
    }

    /// Replaces the configs set on `topic` (none: back to the defaults), first where they
    /// are kept, then in force.
    ///
    /// # Errors
    /// The write's, with the configs in force unchanged.
    pub(crate) async fn set(&self, topic: &str, overrides: Overrides) -> Result<(), String> {
        self.change(|topics| {
            if overrides.is_empty() {
                topics.remove(topic).is_some()
            } else {
                topics.insert(topic.to_string(), overrides.clone()).as_ref() != Some(&overrides)
            }
        })
        .await
    }

    /// Forgets `topic`'s configs (it was deleted).
    ///
    /// # Errors
    /// As [`set`](Self::set)'s.
    pub(crate) async fn remove(&self, topic: &str) -> Result<(), String> {
        self.change(|topics| topics.remove(topic).is_some()).await
    }

    /// Applies `change` to a copy (it says whether anything changed), writes the copy, then
    /// makes it the configs in force.
    async fn change(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, Overrides>) -> bool,
    ) -> Result<(), String> {
        let _writer = self.write.lock().await;
        let Some(documents) = &self.documents else {
            let mut next = self.lock().clone();
            if change(&mut next) {
                *self.lock() = next;
            }
            return Ok(());
        };
        // The configs as kept (another broker over the same database may have changed
        // them), changed and written back in one step.
        let mut changed = None;
        documents
            .update(TOPIC_CONFIGS_FILE, false, |bytes| {
                let mut next = parse_topic_configs(bytes.as_deref())?;
                if !change(&mut next) {
                    changed = Some(next);
                    return Ok(None);
                }
                let file = TopicConfigsFile {
                    version: 1,
                    topics: next,
                };
                let bytes = serde_json::to_vec_pretty(&file)
                    .map_err(|e| format!("encoding the topic configs: {e}"))?;
                changed = Some(file.topics);
                Ok(Some(bytes))
            })
            .await?;
        if let Some(next) = changed {
            *self.lock() = next;
        }
        Ok(())
    }

    /// Reads the kept configs again (several brokers over one database: another one may
    /// have changed them), keeping those in force if they cannot be read.
    pub(crate) async fn refresh(&self) {
        let Some(documents) = self.documents.as_ref().filter(|d| d.is_shared()) else {
            return;
        };
        let _writer = self.write.lock().await;
        match documents
            .load(TOPIC_CONFIGS_FILE)
            .await
            .and_then(|b| parse_topic_configs(b.as_deref()))
        {
            Ok(topics) => *self.lock() = topics,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the topic configs again; those in force stay")
            }
        }
    }

    // Nothing panics while the guard is held, so a poisoned map is still consistent.
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Overrides>> {
        self.topics.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The cluster-level dynamic configs a fresh Kafka 4.1+ cluster holds: with eligible leader
/// replicas on (KIP-966; the default for new clusters since 4.1) the controller writes
/// `min.insync.replicas` at the cluster level, at the broker's static value, so every topic
/// without its own reports it as `DYNAMIC_DEFAULT_BROKER_CONFIG`, not `DEFAULT_CONFIG` (as
/// Kafka 4.0 did). Clients' suites written against Kafka 4.1+ expect it among a topic's
/// non-default configs.
pub(crate) const CLUSTER_DEFAULTS: &[&str] = &["min.insync.replicas"];

/// Where a topic config without an override of its own comes from.
pub(crate) fn default_source(name: &str) -> i8 {
    if CLUSTER_DEFAULTS.contains(&name) {
        source::DYNAMIC_DEFAULT_BROKER_CONFIG
    } else {
        source::DEFAULT_CONFIG
    }
}

/// One config of a topic as reported: its value and where it comes from.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) spec: &'static Spec,
    pub(crate) value: String,
    pub(crate) source: i8,
}

/// Every config of a topic with `overrides` set, in catalogue order.
pub(crate) fn entries(overrides: &Overrides) -> Vec<Entry> {
    CATALOGUE
        .iter()
        .map(|spec| match overrides.get(spec.name) {
            Some(value) => Entry {
                spec,
                value: value.clone(),
                source: source::TOPIC_CONFIG,
            },
            None => Entry {
                spec,
                value: spec.default.to_string(),
                source: default_source(spec.name),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_is_sorted_and_its_defaults_are_valid() {
        let names: Vec<&str> = CATALOGUE.iter().map(|s| s.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
        for s in &CATALOGUE {
            if !s.default.is_empty() {
                assert_eq!(validate(s.name, Some(s.default)), Ok(()), "{}", s.name);
            }
        }
        assert_eq!(find("retention.ms").map(|s| s.default), Some("604800000"));
        assert_eq!(
            find("max.message.bytes").map(|s| s.default),
            Some("1048588")
        );
    }

    #[test]
    fn validation_refuses_unknown_names_and_bad_values_with_invalid_config() {
        for (name, value) in [
            ("no.such.config", Some("1")),
            ("retention.ms", Some("soon")),
            ("retention.ms", None),
            ("min.insync.replicas", Some("99999999999")),
            ("cleanup.policy", Some("delete,shred")),
            ("compression.type", Some("brotli")),
            ("preallocate", Some("yes")),
        ] {
            let refused = validate(name, value).unwrap_err();
            assert_eq!(refused.code, codes::INVALID_CONFIG, "{name}={value:?}");
        }
        assert_eq!(validate("cleanup.policy", Some("compact,delete")), Ok(()));
        assert_eq!(validate("min.cleanable.dirty.ratio", Some("0.9")), Ok(()));
    }

    #[tokio::test]
    async fn entries_report_overrides_as_topic_config_and_the_rest_as_defaults() {
        let configs = TopicConfigs::default();
        configs
            .set(
                "t",
                [("retention.ms".to_string(), "1000".to_string())].into(),
            )
            .await
            .unwrap();
        let all = entries(&configs.get("t"));
        assert_eq!(all.len(), CATALOGUE.len());
        let retention = all.iter().find(|e| e.spec.name == "retention.ms").unwrap();
        assert_eq!((retention.value.as_str(), retention.source), ("1000", 1));
        let policy = all
            .iter()
            .find(|e| e.spec.name == "cleanup.policy")
            .unwrap();
        assert_eq!((policy.value.as_str(), policy.source), ("delete", 5));
        // Kafka 4.1+'s cluster-level min.insync.replicas (KIP-966).
        let min_isr = all
            .iter()
            .find(|e| e.spec.name == "min.insync.replicas")
            .unwrap();
        assert_eq!((min_isr.value.as_str(), min_isr.source), ("1", 3));
        configs.remove("t").await.unwrap();
        assert!(configs.get("t").is_empty());
    }

    #[tokio::test]
    async fn configs_are_kept_in_the_documents_and_a_failed_write_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let docs = |d: &std::path::Path| Some(Documents::Dir(d.to_path_buf()));
        let configs = TopicConfigs::open(docs(dir.path())).await.unwrap();
        let retention: Overrides = [("retention.ms".to_string(), "1000".to_string())].into();
        configs.set("t", retention.clone()).await.unwrap();
        configs.set("u", retention.clone()).await.unwrap();
        configs.remove("u").await.unwrap();
        let reopened = TopicConfigs::open(docs(dir.path())).await.unwrap();
        assert_eq!(reopened.get("t"), retention);
        assert!(reopened.get("u").is_empty());
        // a directory that is gone: the write fails and nothing changes in force
        let gone = TopicConfigs::open(docs(&dir.path().join("gone")))
            .await
            .unwrap();
        assert!(gone.set("t", retention.clone()).await.is_err());
        assert!(gone.get("t").is_empty());
        std::fs::write(dir.path().join(TOPIC_CONFIGS_FILE), "{not json").unwrap();
        let err = TopicConfigs::open(docs(dir.path())).await.unwrap_err();
        assert_eq!(err.code(), "INVALID_CONFIG");
    }
}
