//! The broker's settings, with Kafka's names and defaults where Kafka has them.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

use crate::error::BrokerError;
use crate::store::StoreConfig;

/// A topic to create at start: `NAME:PARTITIONS` on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicSpec {
    /// The topic name (Kafka's rules apply when it is created).
    pub name: String,
    /// How many partitions.
    pub partitions: u32,
}

impl FromStr for TopicSpec {
    type Err = BrokerError;

    /// Parses `orders:4`. The name is everything before the last `:`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = |reason: &str| BrokerError::InvalidConfig {
            setting: "topic",
            reason: format!("{s:?}: {reason}; write NAME:PARTITIONS, e.g. orders:4"),
        };
        let (name, count) = s.rsplit_once(':').ok_or_else(|| invalid("no `:`"))?;
        let partitions = count
            .parse::<u32>()
            .map_err(|_| invalid("the partition count is not a positive integer"))?;
        if name.is_empty() {
            return Err(invalid("the name is empty"));
        }
        Ok(TopicSpec {
            name: name.to_string(),
            partitions,
        })
    }
}

/// Everything the broker needs to start. [`Default`] gives Kafka's defaults (and a loopback
/// listener on Kafka's port 9092), except where the field says otherwise.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// Where to listen. Port 0 lets the operating system pick one.
    pub listen: SocketAddr,
    /// Where committed offsets live (`<dir>/offsets.json`, the `JsonFileStore`), and topics
    /// and records (`<dir>/records/`, the `SegmentLog`); `None` keeps them in memory.
    pub data_dir: Option<PathBuf>,
    /// Topics to create at start.
    pub topics: Vec<TopicSpec>,
    /// Kafka's `auto.create.topics.enable`: a Metadata request for a missing topic creates it.
    /// Default `false` here (Kafka's default is `true`), so a typo is an error, not a topic.
    pub auto_create_topics: bool,
    /// Kafka's `num.partitions`: the partition count of auto-created topics (default 1).
    pub num_partitions: u32,
    /// Kafka's `group.initial.rebalance.delay.ms` (default 3000).
    pub group_initial_rebalance_delay_ms: u64,
    /// Kafka's `group.min.session.timeout.ms` (default 6000).
    pub group_min_session_timeout_ms: u64,
    /// Kafka's `group.max.session.timeout.ms` (default 1800000).
    pub group_max_session_timeout_ms: u64,
    /// Kafka's `group.max.size` (default 2147483647).
    pub group_max_size: u32,
    /// Kafka's `offsets.retention.minutes` (default 10080, seven days).
    pub offsets_retention_minutes: u64,
    /// Kafka's `socket.request.max.bytes`: the largest request frame (default 104857600).
    pub max_frame_bytes: usize,
    /// The most connections served at once (Kafka's `max.connections`, whose default is
    /// unlimited; here 1024). Further clients wait in the accept queue.
    pub max_connections: usize,
    /// The partitions' log (`<data_dir>/records/`, the `SegmentLog`; without a data
    /// directory the partitions live in memory and these settings are unused).
    pub records: RecordsConfig,
}

/// The settings of the partitions' segment log, with Kafka's names and defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordsConfig {
    /// Kafka's `log.flush.interval.ms`: `None` (the default here) acknowledges a produce
    /// once its batch is `fdatasync`ed; `Some(n)` once written to the OS, synced every `n` ms.
    pub flush_interval_ms: Option<u64>,
    /// Kafka's `log.segment.bytes` (default 1073741824).
    pub segment_bytes: u64,
    /// Kafka's `log.retention.ms` (default 604800000, seven days); `-1`: no time limit.
    pub retention_ms: i64,
    /// Kafka's `log.retention.bytes` per partition (default `-1`: no size limit).
    pub retention_bytes: i64,
}

impl Default for RecordsConfig {
    fn default() -> Self {
        RecordsConfig {
            flush_interval_ms: None,
            segment_bytes: partition_log::segment::DEFAULT_SEGMENT_BYTES,
            retention_ms: partition_log::segment::DEFAULT_RETENTION_MS,
            retention_bytes: -1,
        }
    }
}

impl RecordsConfig {
    fn validate(&self) -> Result<(), BrokerError> {
        let invalid = |setting, reason: String| Err(BrokerError::InvalidConfig { setting, reason });
        if self.flush_interval_ms == Some(0) {
            return invalid("log-flush-interval-ms", "must be at least 1".into());
        }
        if self.segment_bytes < 1024 {
            return invalid(
                "log-segment-bytes",
                format!("{} is below the smallest segment, 1024", self.segment_bytes),
            );
        }
        if self.retention_ms < -1 {
            return invalid(
                "log-retention-ms",
                "must be -1 (unlimited) or at least 0".into(),
            );
        }
        if self.retention_bytes < -1 {
            return invalid(
                "log-retention-bytes",
                "must be -1 (unlimited) or at least 0".into(),
            );
        }
        Ok(())
    }
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 9092)),
            data_dir: None,
            topics: Vec::new(),
            auto_create_topics: false,
            num_partitions: 1,
            group_initial_rebalance_delay_ms: 3000,
            group_min_session_timeout_ms: 6000,
            group_max_session_timeout_ms: 1_800_000,
            group_max_size: i32::MAX as u32,
            offsets_retention_minutes: 10_080,
            max_frame_bytes: 100 * 1024 * 1024,
            max_connections: 1024,
            records: RecordsConfig::default(),
        }
    }
}

impl BrokerConfig {
    /// The offset store these settings choose (see [`StoreConfig`]).
    pub fn store(&self) -> StoreConfig {
        StoreConfig::from_data_dir(self.data_dir.as_deref())
    }

    /// Checks the settings that do not depend on the environment.
    pub fn validate(&self) -> Result<(), BrokerError> {
        let invalid = |setting, reason: String| Err(BrokerError::InvalidConfig { setting, reason });
        if self.num_partitions == 0 {
            return invalid("num-partitions", "must be at least 1".into());
        }
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms {
            return invalid(
                "group-min-session-timeout-ms",
                format!(
                    "{} is above group-max-session-timeout-ms {}",
                    self.group_min_session_timeout_ms, self.group_max_session_timeout_ms
                ),
            );
        }
        if self.group_max_size == 0 {
            return invalid("group-max-size", "must be at least 1".into());
        }
        if self.max_frame_bytes < 64 {
            return invalid(
                "max-frame-bytes",
                format!("{} cannot hold a request header", self.max_frame_bytes),
            );
        }
        if self.max_connections == 0 {
            return invalid("max-connections", "must be at least 1".into());
        }
        self.records.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_specs_parse_name_and_count() {
        let t: TopicSpec = "orders.v2:4".parse().unwrap();
        assert_eq!((t.name.as_str(), t.partitions), ("orders.v2", 4));
        for bad in ["orders", "orders:", ":3", "orders:-1", "orders:x"] {
            let err = bad.parse::<TopicSpec>().unwrap_err();
            assert_eq!(err.code(), "INVALID_CONFIG", "{bad}");
        }
    }

    #[test]
    fn validation_names_the_setting() {
        let mut c = BrokerConfig::default();
        assert!(c.validate().is_ok());
        c.group_min_session_timeout_ms = 10;
        c.group_max_session_timeout_ms = 5;
        let err = c.validate().unwrap_err();
        assert!(
            err.to_string().contains("group-min-session-timeout-ms"),
            "{err}"
        );
        let c = BrokerConfig {
            max_connections: 0,
            ..BrokerConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("max-connections"));
    }

    #[test]
    fn the_records_settings_are_kafkas_and_validated() {
        let r = RecordsConfig::default();
        assert_eq!(
            (
                r.flush_interval_ms,
                r.segment_bytes,
                r.retention_ms,
                r.retention_bytes
            ),
            (None, 1 << 30, 604_800_000, -1)
        );
        for (records, setting) in [
            (
                RecordsConfig {
                    flush_interval_ms: Some(0),
                    ..r
                },
                "log-flush-interval-ms",
            ),
            (
                RecordsConfig {
                    segment_bytes: 10,
                    ..r
                },
                "log-segment-bytes",
            ),
            (
                RecordsConfig {
                    retention_ms: -2,
                    ..r
                },
                "log-retention-ms",
            ),
            (
                RecordsConfig {
                    retention_bytes: -5,
                    ..r
                },
                "log-retention-bytes",
            ),
        ] {
            let c = BrokerConfig {
                records,
                ..BrokerConfig::default()
            };
            let err = c.validate().unwrap_err().to_string();
            assert!(err.contains(setting), "{err}");
        }
    }
}
