//! Kafka's group configs (config resource type GROUP, 32): DescribeConfigs,
//! IncrementalAlterConfigs and AlterConfigs on a group, as Kafka 4's `GroupConfig` defines
//! them. The coordinator applies them (a consumer-protocol member sees a change at its next
//! heartbeat); this module keeps them where the broker keeps its state (the document
//! [`GROUP_CONFIGS_FILE`] of the data directory or of PostgreSQL; in memory without either)
//! and sets them again at start.

use std::collections::BTreeMap;

use coordinator_core::{Coordinator, GroupConfig, GroupConfigError};
use serde::{Deserialize, Serialize};

use super::codes;
use super::topic_configs::{Kind, Refused};
use crate::documents::Documents;
use crate::error::BrokerError;

/// The document holding every group's configs.
pub(crate) const GROUP_CONFIGS_FILE: &str = "group-configs.json";

/// Kafka's `ConfigSource.GROUP_CONFIG`: a value set on the group.
pub(crate) const GROUP_CONFIG_SOURCE: i8 = 8;

#[derive(Serialize, Deserialize)]
struct GroupConfigsFile {
    version: u32,
    groups: BTreeMap<String, BTreeMap<String, Kept>>,
}

/// One kept value: a number (every config of version 1 files) or a text config's text.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Kept {
    Int(u64),
    Text(String),
}

/// Kafka's documentation of each group config.
pub(crate) fn doc(name: &str) -> &'static str {
    match name {
        "consumer.session.timeout.ms" => {
            "The timeout to detect client failures when using the consumer group protocol."
        }
        "consumer.heartbeat.interval.ms" => {
            "The heartbeat interval given to the members of a consumer group."
        }
        "share.session.timeout.ms" => {
            "The timeout to detect client failures when using the share group protocol."
        }
        "share.heartbeat.interval.ms" => {
            "The heartbeat interval given to the members of a share group."
        }
        "share.record.lock.duration.ms" => {
            "The record acquisition lock duration in milliseconds for share groups."
        }
        "share.delivery.count.limit" => {
            "The maximum number of delivery attempts for a record delivered to a share group."
        }
        "share.partition.max.record.locks" => {
            "Share-partition record lock limit. When this limit is reached, the share-partition does not acquire any more records."
        }
        "share.auto.offset.reset" => {
            "The strategy to initialize the share-partition start offset: earliest, latest, or by_duration:<duration> (ISO8601, PnDTnHnMn.nS)."
        }
        "share.isolation.level" => {
            "Controls how to read records written transactionally: read_committed or read_uncommitted."
        }
        _ => "",
    }
}

/// `(name, value, set on the group, type)` of every group config of `group`, in Kafka's
/// names' order.
pub(crate) fn entries(
    coordinator: &Coordinator,
    group: &str,
) -> Vec<(&'static str, String, bool, Kind)> {
    let set = coordinator.group_config(group);
    let consumer = coordinator.consumer_settings(group);
    let share = coordinator.share_settings(group);
    GroupConfig::NAMES
        .iter()
        .map(|&name| {
            let (default, kind) = match name {
                "consumer.session.timeout.ms" => {
                    (consumer.session_timeout_ms.to_string(), Kind::Int)
                }
                "consumer.heartbeat.interval.ms" => {
                    (consumer.heartbeat_interval_ms.to_string(), Kind::Int)
                }
                "share.session.timeout.ms" => (share.session_timeout_ms.to_string(), Kind::Int),
                "share.heartbeat.interval.ms" => {
                    (share.heartbeat_interval_ms.to_string(), Kind::Int)
                }
                "share.record.lock.duration.ms" => {
                    (share.record_lock_duration_ms.to_string(), Kind::Int)
                }
                "share.delivery.count.limit" => (share.delivery_count_limit.to_string(), Kind::Int),
                "share.partition.max.record.locks" => {
                    (share.partition_max_record_locks.to_string(), Kind::Int)
                }
                "share.auto.offset.reset" => (share.auto_offset_reset.to_string(), Kind::String),
                _ => (share.isolation_level.to_string(), Kind::String),
            };
            match set.text(name) {
                Some(v) => (name, v, true, kind),
                None => (name, default, false, kind),
            }
        })
        .collect()
}

/// `config` with `name` set from `value` (reset with `None`), as Kafka parses it.
pub(crate) fn with(
    config: GroupConfig,
    name: &str,
    value: Option<&str>,
) -> Result<GroupConfig, Refused> {
    config.with_text(name, value).map_err(refused)
}

/// A refused config, as Kafka answers it.
pub(crate) fn refused(e: GroupConfigError) -> Refused {
    Refused::new(codes::INVALID_CONFIG, e.to_string())
}

/// Where the groups' configs are kept. See the [module](self) docs.
#[derive(Debug, Default)]
pub(crate) struct GroupConfigs {
    /// Serializes the writers: read, write the document, apply.
    write: tokio::sync::Mutex<()>,
    documents: Option<Documents>,
}

impl GroupConfigs {
    /// Reads the kept configs and sets them on `coordinator`. A kept config the coordinator's
    /// bounds now refuse (the broker restarted with other bounds) is left out with a warning,
    /// as the group runs with the defaults then.
    ///
    /// # Errors
    /// A document that cannot be read or is not this broker's.
    pub(crate) async fn open(
        documents: Option<Documents>,
        coordinator: &Coordinator,
    ) -> Result<GroupConfigs, BrokerError> {
        if let Some(documents) = &documents {
            let shown = documents.shown(GROUP_CONFIGS_FILE);
            let refuse = |reason: String| BrokerError::InvalidConfig {
                setting: "group configs",
                reason: format!("`{shown}`: {reason}"),
            };
            let bytes = documents
                .load(GROUP_CONFIGS_FILE)
                .await
                .map_err(|e| refuse(format!("cannot read the group configs: {e}")))?;
            apply(coordinator, parse_kept(bytes.as_deref()).map_err(refuse)?);
        }
        Ok(GroupConfigs {
            write: tokio::sync::Mutex::new(()),
            documents,
        })
    }

    /// Replaces `group`'s configs with `config`: checked, then kept, then in force. A failed
    /// write changes nothing (KAFKA_STORAGE_ERROR).
    pub(crate) async fn set(
        &self,
        coordinator: &Coordinator,
        group: &str,
        config: GroupConfig,
    ) -> Result<(), Refused> {
        coordinator.check_group_config(&config).map_err(refused)?;
        let _writer = self.write.lock().await;
        if let Some(documents) = &self.documents {
            // The configs as kept (another broker over the same database may have changed
            // them), changed and written back in one step.
            documents
                .update(GROUP_CONFIGS_FILE, false, |bytes| {
                    let mut groups: BTreeMap<String, BTreeMap<String, Kept>> =
                        parse_kept(bytes.as_deref())?
                            .into_iter()
                            .map(|(g, c)| (g, values(&c)))
                            .collect();
                    if config.is_empty() {
                        groups.remove(group);
                    } else {
                        groups.insert(group.to_string(), values(&config));
                    }
                    serde_json::to_vec_pretty(&GroupConfigsFile { version: 1, groups })
                        .map(Some)
                        .map_err(|e| e.to_string())
                })
                .await
                .map_err(|e| not_kept(group, &e))?;
        }
        coordinator.set_group_config(group, config).map_err(refused)
    }

    /// Reads the kept configs again and sets them on `coordinator` (several brokers over one
    /// database: another one may have changed them); a group whose configs are no longer kept
    /// goes back to the defaults. Those in force stay if the document cannot be read.
    pub(crate) async fn refresh(&self, coordinator: &Coordinator) {
        let Some(documents) = self.documents.as_ref().filter(|d| d.is_shared()) else {
            return;
        };
        let _writer = self.write.lock().await;
        match documents
            .load(GROUP_CONFIGS_FILE)
            .await
            .and_then(|b| parse_kept(b.as_deref()))
        {
            Ok(kept) => {
                for (group, _) in coordinator.group_configs() {
                    if !kept.contains_key(&group) {
                        let _ = coordinator.set_group_config(&group, GroupConfig::default());
                    }
                }
                apply(coordinator, kept);
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the group configs again; those in force stay")
            }
        }
    }
}

/// The configs of a kept group configs document (none without one), by group.
fn parse_kept(bytes: Option<&[u8]>) -> Result<BTreeMap<String, GroupConfig>, String> {
    let Some(bytes) = bytes else {
        return Ok(BTreeMap::new());
    };
    let file: GroupConfigsFile = serde_json::from_slice(bytes)
        .map_err(|e| format!("not a group configs file of this broker: {e}"))?;
    if file.version != 1 {
        return Err(format!(
            "group configs version {} is not known to this broker (1 is)",
            file.version
        ));
    }
    file.groups
        .into_iter()
        .map(|(group, values)| {
            values
                .iter()
                .try_fold(GroupConfig::default(), |c, (k, v)| {
                    let text = match v {
                        Kept::Int(n) => n.to_string(),
                        Kept::Text(t) => t.clone(),
                    };
                    c.with_text(k, Some(&text))
                })
                .map(|config| (group.clone(), config))
                .map_err(|e| format!("group `{group}`: {e}"))
        })
        .collect()
}

/// Sets the kept `configs` on `coordinator`; one its bounds refuse (the broker restarted with
/// other bounds) is left out with a warning, as the group runs with the defaults then.
fn apply(coordinator: &Coordinator, configs: BTreeMap<String, GroupConfig>) {
    for (group, config) in configs {
        if coordinator.group_config(&group) == config {
            continue;
        }
        if let Err(e) = coordinator.set_group_config(&group, config) {
            tracing::warn!(group, error = %e, "a kept group config is refused by this broker's bounds: the group runs with the defaults");
        }
    }
}

fn values(config: &GroupConfig) -> BTreeMap<String, Kept> {
    GroupConfig::NAMES
        .iter()
        .filter_map(|name| {
            let kept = match config.get(name) {
                Some(n) => Kept::Int(n),
                None => Kept::Text(config.text(name)?),
            };
            Some((name.to_string(), kept))
        })
        .collect()
}

fn not_kept(group: &str, e: &str) -> Refused {
    Refused::new(
        codes::KAFKA_STORAGE_ERROR,
        format!("The configs of group '{group}' could not be kept: {e}"),
    )
}
