//! Kafka's group configs (KIP-848): settings one group overrides, which its consumer-protocol
//! members see at their next heartbeat. The coordinator keeps them in memory; whoever sets
//! them keeps them durable (the broker in its documents) and sets them again at start.

use std::collections::HashMap;
use std::sync::PoisonError;

use super::{ConsumerGroupSettings, Coordinator};

/// The most groups that may have configs of their own (a bound on what clients can grow).
pub const MAX_GROUP_CONFIGS: usize = 100_000;

/// Kafka's default `share.session.timeout.ms` (a share group's config; share groups are not
/// served yet: the value is kept, as Kafka keeps it).
pub const DEFAULT_SHARE_SESSION_TIMEOUT_MS: u64 = 45_000;
/// Kafka's default `share.heartbeat.interval.ms`.
pub const DEFAULT_SHARE_HEARTBEAT_INTERVAL_MS: u64 = 5_000;
/// Kafka's default `share.record.lock.duration.ms`.
pub const DEFAULT_SHARE_RECORD_LOCK_DURATION_MS: u64 = 30_000;

/// One group's own settings (Kafka's `GroupConfig`); `None` keeps the default. Build one with
/// [`GroupConfig::default`] and [`GroupConfig::with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupConfig {
    /// `consumer.session.timeout.ms`: a consumer-protocol member whose last heartbeat is this
    /// old is removed (the coordinator's `group.consumer.session.timeout.ms` otherwise).
    pub consumer_session_timeout_ms: Option<u64>,
    /// `consumer.heartbeat.interval.ms`: the interval every heartbeat response tells the
    /// group's members (the coordinator's `group.consumer.heartbeat.interval.ms` otherwise).
    pub consumer_heartbeat_interval_ms: Option<u64>,
    /// `share.session.timeout.ms` (kept for share groups).
    pub share_session_timeout_ms: Option<u64>,
    /// `share.heartbeat.interval.ms` (kept for share groups).
    pub share_heartbeat_interval_ms: Option<u64>,
    /// `share.record.lock.duration.ms` (kept for share groups).
    pub share_record_lock_duration_ms: Option<u64>,
}

/// Kafka's names of the group configs, in the order DescribeConfigs lists them.
pub const GROUP_CONFIG_NAMES: [&str; 5] = [
    "consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms",
    "share.session.timeout.ms",
    "share.heartbeat.interval.ms",
    "share.record.lock.duration.ms",
];

impl GroupConfig {
    /// This config with the config named `name` (one of [`GROUP_CONFIG_NAMES`]) set, or reset
    /// with `None`; `None` for a name that is not a group config.
    pub fn with(mut self, name: &str, value: Option<u64>) -> Option<Self> {
        *self.slot(name)? = value;
        Some(self)
    }

    /// The value set for `name`, if any (`None` also for a name that is not a group config).
    pub fn get(&self, name: &str) -> Option<u64> {
        let mut copy = *self;
        copy.slot(name).and_then(|v| *v)
    }

    fn slot(&mut self, name: &str) -> Option<&mut Option<u64>> {
        Some(match name {
            "consumer.session.timeout.ms" => &mut self.consumer_session_timeout_ms,
            "consumer.heartbeat.interval.ms" => &mut self.consumer_heartbeat_interval_ms,
            "share.session.timeout.ms" => &mut self.share_session_timeout_ms,
            "share.heartbeat.interval.ms" => &mut self.share_heartbeat_interval_ms,
            "share.record.lock.duration.ms" => &mut self.share_record_lock_duration_ms,
            _ => return None,
        })
    }

    /// Whether it overrides nothing.
    pub fn is_empty(&self) -> bool {
        *self == GroupConfig::default()
    }

    /// `base` with this config's consumer-protocol overrides.
    pub(crate) fn apply(&self, base: &ConsumerGroupSettings) -> ConsumerGroupSettings {
        let mut out = base.clone();
        if let Some(ms) = self.consumer_session_timeout_ms {
            out.session_timeout_ms = ms;
        }
        if let Some(ms) = self.consumer_heartbeat_interval_ms {
            out.heartbeat_interval_ms = ms;
        }
        out
    }
}

/// Why [`Coordinator::set_group_config`] refused a config (Kafka: `INVALID_CONFIG`, 40, with
/// Kafka's message). Nothing was changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GroupConfigError {
    /// A value breaks a bound; the message is Kafka's.
    #[error("{0}")]
    Invalid(String),
    /// [`MAX_GROUP_CONFIGS`] groups already have configs of their own.
    #[error("{MAX_GROUP_CONFIGS} groups already have configs of their own")]
    TooManyGroups,
}

impl Coordinator {
    /// Sets `group_id`'s own config, replacing the one it had (an empty config removes it).
    /// Its consumer-protocol members get the new values at their next heartbeat, as in Kafka.
    /// The group need not exist yet.
    ///
    /// # Errors
    /// [`GroupConfigError::Invalid`], checked as Kafka's `GroupConfig.validate` checks the
    /// whole resulting config: each value at least 1 (the record lock at least 1000), then the
    /// consumer heartbeat interval and session timeout within
    /// `group.consumer.min/max.heartbeat.interval.ms` and `…session.timeout.ms`, the share
    /// ones within Kafka's share-group bounds, and each session timeout above its heartbeat
    /// interval; [`GroupConfigError::TooManyGroups`] past [`MAX_GROUP_CONFIGS`].
    pub fn set_group_config(
        &self,
        group_id: &str,
        config: GroupConfig,
    ) -> Result<(), GroupConfigError> {
        validate(&config, &self.config.consumer)?;
        let mut configs = self
            .group_configs
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if config.is_empty() {
            configs.remove(group_id);
            return Ok(());
        }
        if !configs.contains_key(group_id) && configs.len() >= MAX_GROUP_CONFIGS {
            return Err(GroupConfigError::TooManyGroups);
        }
        configs.insert(group_id.to_string(), config);
        Ok(())
    }

    /// Checks `config` as [`set_group_config`](Self::set_group_config) does, changing
    /// nothing (to validate a change before keeping it durable).
    ///
    /// # Errors
    /// As [`set_group_config`](Self::set_group_config)'s [`GroupConfigError::Invalid`].
    pub fn check_group_config(&self, config: &GroupConfig) -> Result<(), GroupConfigError> {
        validate(config, &self.config.consumer)
    }

    /// `group_id`'s own config (empty when it has none).
    pub fn group_config(&self, group_id: &str) -> GroupConfig {
        self.group_configs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(group_id)
            .copied()
            .unwrap_or_default()
    }

    /// Every group with a config of its own, in no particular order.
    pub fn group_configs(&self) -> Vec<(String, GroupConfig)> {
        self.group_configs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(g, c)| (g.clone(), *c))
            .collect()
    }

    /// The consumer-protocol settings `group_id` runs with: the coordinator's, with the
    /// group's own config applied.
    pub fn consumer_settings(&self, group_id: &str) -> ConsumerGroupSettings {
        self.group_config(group_id).apply(&self.config.consumer)
    }

    /// The share-group settings `group_id` runs with: the coordinator's, with the group's
    /// own `share.session.timeout.ms` and `share.heartbeat.interval.ms` applied.
    pub fn share_settings(&self, group_id: &str) -> crate::group::share::ShareGroupSettings {
        let config = self.group_config(group_id);
        let mut settings = self.config.share.clone();
        if let Some(ms) = config.share_session_timeout_ms {
            settings.session_timeout_ms = ms;
        }
        if let Some(ms) = config.share_heartbeat_interval_ms {
            settings.heartbeat_interval_ms = ms;
        }
        settings
    }
}

/// Kafka's `GroupConfig.validate` over the resulting config, with the effective defaults.
fn validate(config: &GroupConfig, c: &ConsumerGroupSettings) -> Result<(), GroupConfigError> {
    let invalid = |m: String| Err(GroupConfigError::Invalid(m));
    for name in GROUP_CONFIG_NAMES {
        let least = if name == "share.record.lock.duration.ms" {
            1000
        } else {
            1
        };
        if let Some(v) = config.get(name).filter(|v| *v < least) {
            return invalid(format!(
                "Invalid value {v} for configuration {name}: Value must be at least {least}"
            ));
        }
    }
    let bounds: [(&str, &str, u64, u64); 5] = [
        (
            "consumer.heartbeat.interval.ms",
            "group.consumer.min.heartbeat.interval.ms",
            c.min_heartbeat_interval_ms,
            c.max_heartbeat_interval_ms,
        ),
        (
            "consumer.session.timeout.ms",
            "group.consumer.min.session.timeout.ms",
            c.min_session_timeout_ms,
            c.max_session_timeout_ms,
        ),
        (
            "share.heartbeat.interval.ms",
            "group.share.min.heartbeat.interval.ms",
            5_000,
            15_000,
        ),
        (
            "share.session.timeout.ms",
            "group.share.min.session.timeout.ms",
            45_000,
            60_000,
        ),
        (
            "share.record.lock.duration.ms",
            "group.share.min.record.lock.duration.ms",
            15_000,
            60_000,
        ),
    ];
    for (name, min_name, min, max) in bounds {
        let Some(v) = config.get(name) else { continue };
        if v < min {
            return invalid(format!(
                "{name} must be greater than or equal to {min_name}"
            ));
        }
        if v > max {
            let max_name = min_name.replace(".min.", ".max.");
            return invalid(format!("{name} must be less than or equal to {max_name}"));
        }
    }
    let consumer = config.apply(c);
    if consumer.session_timeout_ms <= consumer.heartbeat_interval_ms {
        return invalid(
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
                .into(),
        );
    }
    let share_session = config
        .share_session_timeout_ms
        .unwrap_or(DEFAULT_SHARE_SESSION_TIMEOUT_MS);
    let share_heartbeat = config
        .share_heartbeat_interval_ms
        .unwrap_or(DEFAULT_SHARE_HEARTBEAT_INTERVAL_MS);
    if share_session <= share_heartbeat {
        return invalid(
            "share.session.timeout.ms must be greater than share.heartbeat.interval.ms".into(),
        );
    }
    Ok(())
}

/// The map [`Coordinator`] keeps.
pub(crate) type GroupConfigs = HashMap<String, GroupConfig>;
