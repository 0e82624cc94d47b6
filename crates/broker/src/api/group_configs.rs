//! Kafka's group configs (config resource type GROUP, 32): DescribeConfigs,
//! IncrementalAlterConfigs and AlterConfigs on a group, as Kafka 4's `GroupConfig` defines
//! them. The coordinator applies them (a consumer-protocol member sees a change at its next
//! heartbeat); this module keeps them where the broker keeps its state (the document
//! [`GROUP_CONFIGS_FILE`] of the data directory or of PostgreSQL; in memory without either)
//! and sets them again at start.

use std::collections::BTreeMap;

use coordinator_core::{
    Coordinator, GroupConfig, GroupConfigError, DEFAULT_SHARE_HEARTBEAT_INTERVAL_MS,
    DEFAULT_SHARE_RECORD_LOCK_DURATION_MS, DEFAULT_SHARE_SESSION_TIMEOUT_MS, GROUP_CONFIG_NAMES,
};
use serde::{Deserialize, Serialize};

use super::codes;
use super::topic_configs::Refused;
use crate::documents::Documents;
use crate::error::BrokerError;

/// The document holding every group's configs.
pub(crate) const GROUP_CONFIGS_FILE: &str = "group-configs.json";

/// Kafka's `ConfigSource.GROUP_CONFIG`: a value set on the group.
pub(crate) const GROUP_CONFIG_SOURCE: i8 = 8;

#[derive(Serialize, Deserialize)]
struct GroupConfigsFile {
    version: u32,
    groups: BTreeMap<String, BTreeMap<String, u64>>,
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
        _ => "",
    }
}

/// `(name, value, set on the group)` of every group config of `group`, in Kafka's names' order.
pub(crate) fn entries(coordinator: &Coordinator, group: &str) -> Vec<(&'static str, u64, bool)> {
    let set = coordinator.group_config(group);
    let consumer = &coordinator.config().consumer;
    GROUP_CONFIG_NAMES
        .iter()
        .map(|&name| {
            let default = match name {
                "consumer.session.timeout.ms" => consumer.session_timeout_ms,
                "consumer.heartbeat.interval.ms" => consumer.heartbeat_interval_ms,
                "share.session.timeout.ms" => DEFAULT_SHARE_SESSION_TIMEOUT_MS,
                "share.heartbeat.interval.ms" => DEFAULT_SHARE_HEARTBEAT_INTERVAL_MS,
                _ => DEFAULT_SHARE_RECORD_LOCK_DURATION_MS,
            };
            match set.get(name) {
                Some(v) => (name, v, true),
                None => (name, default, false),
            }
        })
        .collect()
}

/// A value of an INT config as Kafka parses it: `None` (unset) stays `None`.
pub(crate) fn parse(name: &str, value: &str) -> Result<u64, Refused> {
    let n: i32 = value.trim().parse().map_err(|_| {
        Refused::new(
            codes::INVALID_CONFIG,
            format!("Invalid value {value} for configuration {name}: Not a number of type INT"),
        )
    })?;
    u64::try_from(n).map_err(|_| {
        Refused::new(
            codes::INVALID_CONFIG,
            format!("Invalid value {value} for configuration {name}: Value must be at least 1"),
        )
    })
}

/// The config `name` is a group config, or INVALID_CONFIG as Kafka says.
pub(crate) fn known(name: &str) -> Result<(), Refused> {
    if GROUP_CONFIG_NAMES.contains(&name) {
        Ok(())
    } else {
        Err(Refused::new(
            codes::INVALID_CONFIG,
            format!("Unknown group config name: {name}"),
        ))
    }
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
                    let mut groups: BTreeMap<String, BTreeMap<String, u64>> =
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
                .try_fold(GroupConfig::default(), |c, (k, v)| c.with(k, Some(*v)))
                .map(|config| (group.clone(), config))
                .ok_or_else(|| format!("group `{group}` has an unknown config"))
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

fn values(config: &GroupConfig) -> BTreeMap<String, u64> {
    GROUP_CONFIG_NAMES
        .iter()
        .filter_map(|name| config.get(name).map(|v| (name.to_string(), v)))
        .collect()
}

fn not_kept(group: &str, e: &str) -> Refused {
    Refused::new(
        codes::KAFKA_STORAGE_ERROR,
        format!("The configs of group '{group}' could not be kept: {e}"),
    )
}
