//! Kafka's group configs (KIP-848): settings one group overrides, which its consumer-protocol
//! members see at their next heartbeat. The coordinator keeps them in memory; whoever sets
//! them keeps them durable (the broker in its documents) and sets them again at start.

use std::collections::HashMap;
use std::sync::PoisonError;

use super::{ConsumerGroupSettings, Coordinator};
use crate::group::share::{ShareAutoOffsetReset, ShareGroupSettings, ShareIsolationLevel};

/// The most groups that may have configs of their own (a bound on what clients can grow).
pub const MAX_GROUP_CONFIGS: usize = 100_000;

/// Kafka's default `group.share.session.timeout.ms`.
pub const DEFAULT_SHARE_SESSION_TIMEOUT_MS: u64 = 45_000;
/// Kafka's default `group.share.heartbeat.interval.ms`.
pub const DEFAULT_SHARE_HEARTBEAT_INTERVAL_MS: u64 = 5_000;
/// Kafka's default `group.share.record.lock.duration.ms`.
pub const DEFAULT_SHARE_RECORD_LOCK_DURATION_MS: u64 = 30_000;

/// One group's own settings (Kafka's `GroupConfig`); `None` keeps the default. Build one with
/// [`GroupConfig::default`] and [`GroupConfig::with_text`] (any config, from Kafka's text) or
/// [`GroupConfig::with`] (the numeric ones).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupConfig {
    /// `consumer.session.timeout.ms`: a consumer-protocol member whose last heartbeat is this
    /// old is removed (the coordinator's `group.consumer.session.timeout.ms` otherwise).
    pub consumer_session_timeout_ms: Option<u64>,
    /// `consumer.heartbeat.interval.ms`: the interval every heartbeat response tells the
    /// group's members (the coordinator's `group.consumer.heartbeat.interval.ms` otherwise).
    pub consumer_heartbeat_interval_ms: Option<u64>,
    /// `share.session.timeout.ms`: a share group member whose last heartbeat is this old is
    /// removed.
    pub share_session_timeout_ms: Option<u64>,
    /// `share.heartbeat.interval.ms`: the interval a share group's members are told.
    pub share_heartbeat_interval_ms: Option<u64>,
    /// `share.record.lock.duration.ms`: how long a share group's acquired record is its
    /// member's.
    pub share_record_lock_duration_ms: Option<u64>,
    /// `share.delivery.count.limit`: a record delivered this many times is archived.
    pub share_delivery_count_limit: Option<u64>,
    /// `share.partition.max.record.locks`: the most offsets of one share-partition in flight.
    pub share_partition_max_record_locks: Option<u64>,
    /// `share.auto.offset.reset`: where a share-partition without a start offset starts.
    pub share_auto_offset_reset: Option<ShareAutoOffsetReset>,
    /// `share.isolation.level`: which transactional records a share group hands out.
    pub share_isolation_level: Option<ShareIsolationLevel>,
}

/// Kafka's names of the numeric group configs of Kafka 4.0.
#[deprecated(
    since = "0.2.0",
    note = "lists only the numeric configs of Kafka 4.0; use `GroupConfig::NAMES`"
)]
pub const GROUP_CONFIG_NAMES: [&str; 5] = [
    "consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms",
    "share.session.timeout.ms",
    "share.heartbeat.interval.ms",
    "share.record.lock.duration.ms",
];

/// The numeric group configs and the least value Kafka's `ConfigDef` takes for each.
const INT_CONFIGS: [(&str, u64); 7] = [
    ("consumer.session.timeout.ms", 1),
    ("consumer.heartbeat.interval.ms", 1),
    ("share.session.timeout.ms", 1),
    ("share.heartbeat.interval.ms", 1),
    ("share.record.lock.duration.ms", 1000),
    ("share.delivery.count.limit", 2),
    ("share.partition.max.record.locks", 100),
];

impl GroupConfig {
    /// Kafka 4.2's names of the group configs served here, in the order of its `GroupConfig`.
    pub const NAMES: [&'static str; 9] = [
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
        "share.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "share.record.lock.duration.ms",
        "share.delivery.count.limit",
        "share.partition.max.record.locks",
        "share.auto.offset.reset",
        "share.isolation.level",
    ];

    /// This config with the numeric config named `name` set, or reset with `None`; `None`
    /// for a name that is not a numeric group config (see [`with_text`](Self::with_text)).
    pub fn with(mut self, name: &str, value: Option<u64>) -> Option<Self> {
        *self.slot(name)? = value;
        Some(self)
    }

    /// The value set for the numeric config `name`, if any (`None` also for a name that is
    /// not a numeric group config; see [`text`](Self::text)).
    pub fn get(&self, name: &str) -> Option<u64> {
        let mut copy = *self;
        copy.slot(name).and_then(|v| *v)
    }

    /// This config with `name` set from its text as Kafka parses it (an INT, or one of the
    /// values a text config takes), or reset with `None`.
    ///
    /// # Errors
    /// [`GroupConfigError::UnknownName`] for a name that is not a group config;
    /// [`GroupConfigError::Invalid`] with Kafka's message for a value its type or validator
    /// refuses (the bounds of the coordinator are checked when the config is set).
    pub fn with_text(mut self, name: &str, value: Option<&str>) -> Result<Self, GroupConfigError> {
        let unknown = || GroupConfigError::UnknownName(name.to_string());
        match name {
            "share.auto.offset.reset" => {
                self.share_auto_offset_reset = value
                    .map(ShareAutoOffsetReset::parse)
                    .transpose()
                    .map_err(GroupConfigError::Invalid)?;
            }
            "share.isolation.level" => {
                self.share_isolation_level = value
                    .map(ShareIsolationLevel::parse)
                    .transpose()
                    .map_err(GroupConfigError::Invalid)?;
            }
            _ => {
                let least = INT_CONFIGS
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, least)| *least)
                    .ok_or_else(unknown)?;
                let value = value.map(|v| parse_int(name, v, least)).transpose()?;
                *self.slot(name).ok_or_else(unknown)? = value;
            }
        }
        Ok(self)
    }

    /// The value set for `name` as Kafka shows it, if any.
    pub fn text(&self, name: &str) -> Option<String> {
        match name {
            "share.auto.offset.reset" => self.share_auto_offset_reset.map(|v| v.to_string()),
            "share.isolation.level" => self.share_isolation_level.map(|v| v.to_string()),
            _ => self.get(name).map(|v| v.to_string()),
        }
    }

    fn slot(&mut self, name: &str) -> Option<&mut Option<u64>> {
        Some(match name {
            "consumer.session.timeout.ms" => &mut self.consumer_session_timeout_ms,
            "consumer.heartbeat.interval.ms" => &mut self.consumer_heartbeat_interval_ms,
            "share.session.timeout.ms" => &mut self.share_session_timeout_ms,
            "share.heartbeat.interval.ms" => &mut self.share_heartbeat_interval_ms,
            "share.record.lock.duration.ms" => &mut self.share_record_lock_duration_ms,
            "share.delivery.count.limit" => &mut self.share_delivery_count_limit,
            "share.partition.max.record.locks" => &mut self.share_partition_max_record_locks,
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
    /// A name that is not a group config.
    #[error("Unknown group config name: {0}")]
    UnknownName(String),
}

/// An INT config's text as Kafka's `ConfigDef` parses it, at least `least`.
fn parse_int(name: &str, value: &str, least: u64) -> Result<u64, GroupConfigError> {
    let n: i32 = value.trim().parse().map_err(|_| {
        GroupConfigError::Invalid(format!(
            "Invalid value {value} for configuration {name}: Not a number of type INT"
        ))
    })?;
    u64::try_from(n)
        .ok()
        .filter(|n| *n >= least)
        .ok_or_else(|| {
            GroupConfigError::Invalid(format!(
                "Invalid value {n} for configuration {name}: Value must be at least {least}"
            ))
        })
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
        validate(&config, &self.config.consumer, &self.config.share)?;
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
        validate(config, &self.config.consumer, &self.config.share)
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
    /// own `share.…` configs applied.
    pub fn share_settings(&self, group_id: &str) -> ShareGroupSettings {
        self.group_config(group_id).apply_share(&self.config.share)
    }
}

impl GroupConfig {
    /// `base` with this config's share-group overrides.
    fn apply_share(&self, base: &ShareGroupSettings) -> ShareGroupSettings {
        let mut s = base.clone();
        let pairs = [
            (&mut s.session_timeout_ms, self.share_session_timeout_ms),
            (
                &mut s.heartbeat_interval_ms,
                self.share_heartbeat_interval_ms,
            ),
            (
                &mut s.record_lock_duration_ms,
                self.share_record_lock_duration_ms,
            ),
            (&mut s.delivery_count_limit, self.share_delivery_count_limit),
            (
                &mut s.partition_max_record_locks,
                self.share_partition_max_record_locks,
            ),
        ];
        for (slot, value) in pairs {
            if let Some(v) = value {
                *slot = v;
            }
        }
        if let Some(v) = self.share_auto_offset_reset {
            s.auto_offset_reset = v;
        }
        if let Some(v) = self.share_isolation_level {
            s.isolation_level = v;
        }
        s
    }
}

/// Kafka's `GroupConfig.validate` over the resulting config, with the effective defaults.
fn validate(
    config: &GroupConfig,
    c: &ConsumerGroupSettings,
    share: &ShareGroupSettings,
) -> Result<(), GroupConfigError> {
    let invalid = |m: String| Err(GroupConfigError::Invalid(m));
    for (name, least) in INT_CONFIGS {
        if let Some(v) = config.get(name).filter(|v| *v < least) {
            return invalid(format!(
                "Invalid value {v} for configuration {name}: Value must be at least {least}"
            ));
        }
    }
    let consumer_bounds = [
        (
            "consumer.heartbeat.interval.ms",
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
            c.min_heartbeat_interval_ms,
            c.max_heartbeat_interval_ms,
        ),
        (
            "consumer.session.timeout.ms",
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
            c.min_session_timeout_ms,
            c.max_session_timeout_ms,
        ),
    ];
    // The share group's broker-wide bounds, by the group config each bounds.
    let share_bounds = share
        .bounded()
        .map(|(broker_name, _, min, max, min_name, max_name)| {
            let name = broker_name.trim_start_matches("group.");
            (name, min_name, max_name, min, max)
        });
    for (name, min_name, max_name, min, max) in consumer_bounds.into_iter().chain(share_bounds) {
        let Some(v) = config.get(name) else { continue };
        if v < min {
            return invalid(format!(
                "{name} must be greater than or equal to {min_name}"
            ));
        }
        if v > max {
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
    let share = config.apply_share(share);
    if share.session_timeout_ms <= share.heartbeat_interval_ms {
        return invalid(
            "share.session.timeout.ms must be greater than share.heartbeat.interval.ms".into(),
        );
    }
    Ok(())
}

/// The map [`Coordinator`] keeps.
pub(crate) type GroupConfigs = HashMap<String, GroupConfig>;
