//! Share groups' settings (Kafka 4.2's `ShareGroupConfig` and the share part of
//! `GroupConfig`): the broker-wide defaults and bounds, and the two text-valued group configs
//! `share.auto.offset.reset` and `share.isolation.level`.

use crate::coordinator::{
    check_bounds, DEFAULT_SHARE_HEARTBEAT_INTERVAL_MS, DEFAULT_SHARE_SESSION_TIMEOUT_MS,
};
use crate::error::Error;

use super::SharePartitionConfig;

/// `group.share.max.size`'s default (Kafka 4.2: 200 members).
pub const DEFAULT_SHARE_MAX_SIZE: u32 = 200;

/// Where a share-partition starts when the group has no start offset for it yet (Kafka's
/// `share.auto.offset.reset`, a group config; default `latest`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ShareAutoOffsetReset {
    /// `earliest`: the log start offset.
    Earliest,
    /// `latest` (Kafka's default): the high watermark.
    #[default]
    Latest,
    /// `by_duration:<ISO-8601 duration>`: the first record whose timestamp is at least this
    /// many milliseconds before now (the high watermark when there is none).
    ByDuration {
        /// The duration, in milliseconds.
        ms: u64,
    },
}

impl ShareAutoOffsetReset {
    /// Parses Kafka's text (`earliest`, `latest`, `by_duration:PnDTnHnMn.nS`, any case).
    ///
    /// # Errors
    /// Kafka's message for a value its validator refuses.
    pub fn parse(value: &str) -> Result<ShareAutoOffsetReset, String> {
        let refused = || {
            format!(
                "Invalid value {value} for configuration share.auto.offset.reset: the value must be either 'earliest', 'latest', or of the format 'by_duration:<PnDTnHnMn.nS.>'."
            )
        };
        let lower = value.trim().to_ascii_lowercase();
        match lower.as_str() {
            "earliest" => Ok(ShareAutoOffsetReset::Earliest),
            "latest" => Ok(ShareAutoOffsetReset::Latest),
            other => {
                let iso = other.strip_prefix("by_duration:").ok_or_else(refused)?;
                let ms = parse_iso_duration_ms(iso).ok_or_else(refused)?;
                Ok(ShareAutoOffsetReset::ByDuration { ms })
            }
        }
    }
}

impl std::fmt::Display for ShareAutoOffsetReset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShareAutoOffsetReset::Earliest => f.write_str("earliest"),
            ShareAutoOffsetReset::Latest => f.write_str("latest"),
            // As Java's `Duration.toString` writes it: PT#H#M#.###S, zero parts left out.
            ShareAutoOffsetReset::ByDuration { ms } => {
                f.write_str("by_duration:PT")?;
                let (hours, minutes) = (ms / 3_600_000, ms / 60_000 % 60);
                let (secs, millis) = (ms / 1000 % 60, ms % 1000);
                if hours > 0 {
                    write!(f, "{hours}H")?;
                }
                if minutes > 0 {
                    write!(f, "{minutes}M")?;
                }
                if millis > 0 {
                    let frac = format!("{millis:03}");
                    write!(f, "{secs}.{}S", frac.trim_end_matches('0'))
                } else if secs > 0 || (hours == 0 && minutes == 0) {
                    write!(f, "{secs}S")
                } else {
                    Ok(())
                }
            }
        }
    }
}

/// A non-negative ISO-8601 duration as Java's `Duration.parse` reads it (`PnDTnHnMn.nS`, each
/// part optional but at least one, seconds with up to nine decimals), in milliseconds.
fn parse_iso_duration_ms(text: &str) -> Option<u64> {
    let rest = text.strip_prefix('p')?;
    let (days, time) = match rest.split_once('t') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let mut total: u64 = 0;
    let mut any = false;
    if !days.is_empty() {
        let n: u64 = days.strip_suffix('d')?.parse().ok()?;
        total = n.checked_mul(86_400_000)?;
        any = true;
    }
    if let Some(mut time) = time {
        if time.is_empty() {
            return None;
        }
        for (unit, ms) in [('h', 3_600_000u64), ('m', 60_000)] {
            if let Some(i) = time.find(unit) {
                let n: u64 = time[..i].parse().ok()?;
                total = total.checked_add(n.checked_mul(ms)?)?;
                time = &time[i + 1..];
                any = true;
            }
        }
        if !time.is_empty() {
            let secs = time.strip_suffix('s')?;
            let (whole, frac) = secs.split_once('.').unwrap_or((secs, ""));
            if whole.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let whole: u64 = whole.parse().ok()?;
            let frac_ms: u64 = format!("{frac:0<3}")[..3].parse().ok()?;
            total = total.checked_add(whole.checked_mul(1000)?.checked_add(frac_ms)?)?;
            any = true;
        }
    }
    any.then_some(total)
}

/// Which records of transactions a share group hands out (Kafka's `share.isolation.level`, a
/// group config; default `read_uncommitted`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ShareIsolationLevel {
    /// `read_uncommitted`: every record up to the high watermark.
    #[default]
    ReadUncommitted,
    /// `read_committed`: up to the last stable offset, aborted transactions' records left out.
    ReadCommitted,
}

impl ShareIsolationLevel {
    /// Parses Kafka's text (`read_committed`, `read_uncommitted`).
    ///
    /// # Errors
    /// Kafka's message for another value.
    pub fn parse(value: &str) -> Result<ShareIsolationLevel, String> {
        match value {
            "read_uncommitted" => Ok(ShareIsolationLevel::ReadUncommitted),
            "read_committed" => Ok(ShareIsolationLevel::ReadCommitted),
            _ => Err(format!(
                "Invalid value {value} for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"
            )),
        }
    }
}

impl std::fmt::Display for ShareIsolationLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ShareIsolationLevel::ReadUncommitted => "read_uncommitted",
            ShareIsolationLevel::ReadCommitted => "read_committed",
        })
    }
}

/// Settings of share groups, with Kafka 4.2's names and defaults: the broker-wide values
/// (`group.share.…`) a group runs with unless its own config (`share.…`) says otherwise, and
/// the bounds a group's own config must stay within.
///
/// From [`Coordinator::share_settings`](crate::Coordinator::share_settings), the values one
/// group runs with: its own configs applied.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShareGroupSettings {
    /// `group.share.session.timeout.ms` (default 45000): a member whose last heartbeat is
    /// this old is removed.
    pub session_timeout_ms: u64,
    /// `group.share.min.session.timeout.ms` (default 45000).
    pub min_session_timeout_ms: u64,
    /// `group.share.max.session.timeout.ms` (default 60000).
    pub max_session_timeout_ms: u64,
    /// `group.share.heartbeat.interval.ms` (default 5000): the interval every response tells
    /// members to heartbeat at.
    pub heartbeat_interval_ms: u64,
    /// `group.share.min.heartbeat.interval.ms` (default 5000).
    pub min_heartbeat_interval_ms: u64,
    /// `group.share.max.heartbeat.interval.ms` (default 15000).
    pub max_heartbeat_interval_ms: u64,
    /// `group.share.max.size` (default 200).
    pub max_size: u32,
    /// `group.share.record.lock.duration.ms` (default 30000): how long an acquired record is
    /// its member's.
    pub record_lock_duration_ms: u64,
    /// `group.share.min.record.lock.duration.ms` (default 15000).
    pub min_record_lock_duration_ms: u64,
    /// `group.share.max.record.lock.duration.ms` (default 60000).
    pub max_record_lock_duration_ms: u64,
    /// `group.share.delivery.count.limit` (default 5): a record delivered this many times is
    /// archived instead of made available again.
    pub delivery_count_limit: u64,
    /// `group.share.min.delivery.count.limit` (default 2).
    pub min_delivery_count_limit: u64,
    /// `group.share.max.delivery.count.limit` (default 10).
    pub max_delivery_count_limit: u64,
    /// `group.share.partition.max.record.locks` (default 2000): the most offsets of one
    /// share-partition in flight.
    pub partition_max_record_locks: u64,
    /// `group.share.min.partition.max.record.locks` (default 100).
    pub min_partition_max_record_locks: u64,
    /// `group.share.max.partition.max.record.locks` (default 10000).
    pub max_partition_max_record_locks: u64,
    /// The group's `share.auto.offset.reset` (default `latest`; no broker-wide setting).
    pub auto_offset_reset: ShareAutoOffsetReset,
    /// The group's `share.isolation.level` (default `read_uncommitted`; no broker-wide
    /// setting).
    pub isolation_level: ShareIsolationLevel,
}

impl Default for ShareGroupSettings {
    fn default() -> Self {
        ShareGroupSettings {
            session_timeout_ms: DEFAULT_SHARE_SESSION_TIMEOUT_MS,
            min_session_timeout_ms: 45_000,
            max_session_timeout_ms: 60_000,
            heartbeat_interval_ms: DEFAULT_SHARE_HEARTBEAT_INTERVAL_MS,
            min_heartbeat_interval_ms: 5_000,
            max_heartbeat_interval_ms: 15_000,
            max_size: DEFAULT_SHARE_MAX_SIZE,
            record_lock_duration_ms: 30_000,
            min_record_lock_duration_ms: 15_000,
            max_record_lock_duration_ms: 60_000,
            delivery_count_limit: 5,
            min_delivery_count_limit: 2,
            max_delivery_count_limit: 10,
            partition_max_record_locks: 2_000,
            min_partition_max_record_locks: 100,
            max_partition_max_record_locks: 10_000,
            auto_offset_reset: ShareAutoOffsetReset::Latest,
            isolation_level: ShareIsolationLevel::ReadUncommitted,
        }
    }
}

impl ShareGroupSettings {
    /// The limits each share-partition of the group runs with.
    pub fn partition_config(&self) -> SharePartitionConfig {
        SharePartitionConfig {
            lock_duration_ms: self.record_lock_duration_ms,
            delivery_count_limit: i16::try_from(self.delivery_count_limit).unwrap_or(i16::MAX),
            max_in_flight: self.partition_max_record_locks,
        }
    }

    /// `(name, value, min, max, min's name, max's name)` of each bounded setting.
    pub(crate) fn bounded(&self) -> [(&'static str, u64, u64, u64, &'static str, &'static str); 5] {
        [
            (
                "group.share.session.timeout.ms",
                self.session_timeout_ms,
                self.min_session_timeout_ms,
                self.max_session_timeout_ms,
                "group.share.min.session.timeout.ms",
                "group.share.max.session.timeout.ms",
            ),
            (
                "group.share.heartbeat.interval.ms",
                self.heartbeat_interval_ms,
                self.min_heartbeat_interval_ms,
                self.max_heartbeat_interval_ms,
                "group.share.min.heartbeat.interval.ms",
                "group.share.max.heartbeat.interval.ms",
            ),
            (
                "group.share.record.lock.duration.ms",
                self.record_lock_duration_ms,
                self.min_record_lock_duration_ms,
                self.max_record_lock_duration_ms,
                "group.share.min.record.lock.duration.ms",
                "group.share.max.record.lock.duration.ms",
            ),
            (
                "group.share.delivery.count.limit",
                self.delivery_count_limit,
                self.min_delivery_count_limit,
                self.max_delivery_count_limit,
                "group.share.min.delivery.count.limit",
                "group.share.max.delivery.count.limit",
            ),
            (
                "group.share.partition.max.record.locks",
                self.partition_max_record_locks,
                self.min_partition_max_record_locks,
                self.max_partition_max_record_locks,
                "group.share.min.partition.max.record.locks",
                "group.share.max.partition.max.record.locks",
            ),
        ]
    }

    /// Checks each value within its bounds, each minimum at most its maximum, the session
    /// timeout above the heartbeat interval, the record lock at least 1 s, the delivery count
    /// limit at least 2 and the record locks at least 100 (Kafka's own floors), and room for
    /// at least one member.
    pub(crate) fn validate(&self) -> Result<(), Error> {
        for (name, v, min, max, min_name, max_name) in self.bounded() {
            check_bounds(name, v, min, max, min_name, max_name)?;
        }
        let floors = [
            (
                "group.share.min.session.timeout.ms",
                self.min_session_timeout_ms,
                1,
            ),
            (
                "group.share.min.heartbeat.interval.ms",
                self.min_heartbeat_interval_ms,
                1,
            ),
            (
                "group.share.min.record.lock.duration.ms",
                self.min_record_lock_duration_ms,
                1_000,
            ),
            (
                "group.share.min.delivery.count.limit",
                self.min_delivery_count_limit,
                2,
            ),
            (
                "group.share.max.delivery.count.limit",
                self.max_delivery_count_limit,
                2,
            ),
            (
                "group.share.min.partition.max.record.locks",
                self.min_partition_max_record_locks,
                100,
            ),
            ("group.share.max.size", u64::from(self.max_size), 1),
        ];
        for (name, v, least) in floors {
            if v < least {
                return Err(Error::invalid(name, format!("{v} is below {least}")));
            }
        }
        if self.max_delivery_count_limit > i16::MAX as u64 {
            return Err(Error::invalid(
                "group.share.max.delivery.count.limit",
                format!("{} is above {}", self.max_delivery_count_limit, i16::MAX),
            ));
        }
        if self.heartbeat_interval_ms >= self.session_timeout_ms {
            return Err(Error::invalid(
                "group.share.heartbeat.interval.ms",
                format!(
                    "{} must be below group.share.session.timeout.ms ({})",
                    self.heartbeat_interval_ms, self.session_timeout_ms
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_offset_reset_reads_kafkas_values() {
        assert_eq!(
            ShareAutoOffsetReset::parse("EARLIEST"),
            Ok(ShareAutoOffsetReset::Earliest)
        );
        assert_eq!(
            ShareAutoOffsetReset::parse("latest"),
            Ok(ShareAutoOffsetReset::Latest)
        );
        assert_eq!(
            ShareAutoOffsetReset::parse("by_duration:P1DT2H3M4.5S"),
            Ok(ShareAutoOffsetReset::ByDuration {
                ms: 86_400_000 + 2 * 3_600_000 + 3 * 60_000 + 4_500
            })
        );
        assert_eq!(
            ShareAutoOffsetReset::parse("by_duration:PT0S"),
            Ok(ShareAutoOffsetReset::ByDuration { ms: 0 })
        );
        for bad in [
            "hello",
            "1.0",
            "by_duration:",
            "by_duration:P",
            "by_duration:PT",
            "by_duration:-PT1S",
            "by_duration:PT1X",
            "by_duration:PT.5S",
        ] {
            assert!(ShareAutoOffsetReset::parse(bad).is_err(), "{bad} accepted");
        }
        for (ms, text) in [
            (61_250, "by_duration:PT1M1.25S"),
            (3_600_000, "by_duration:PT1H"),
            (0, "by_duration:PT0S"),
            (86_400_000 + 5, "by_duration:PT24H0.005S"),
        ] {
            let d = ShareAutoOffsetReset::ByDuration { ms };
            assert_eq!(d.to_string(), text);
            assert_eq!(ShareAutoOffsetReset::parse(text), Ok(d));
        }
    }

    #[test]
    fn isolation_level_reads_kafkas_values() {
        assert_eq!(
            ShareIsolationLevel::parse("read_committed"),
            Ok(ShareIsolationLevel::ReadCommitted)
        );
        assert!(ShareIsolationLevel::parse("READ_COMMITTED").is_err());
        assert_eq!(
            ShareIsolationLevel::ReadUncommitted.to_string(),
            "read_uncommitted"
        );
    }

    #[test]
    fn settings_are_checked_against_their_bounds() {
        assert!(ShareGroupSettings::default().validate().is_ok());
        let mut s = ShareGroupSettings {
            delivery_count_limit: 11,
            ..Default::default()
        };
        assert!(s.validate().is_err());
        s.max_delivery_count_limit = 11;
        assert!(s.validate().is_ok());
        s.min_record_lock_duration_ms = 999;
        assert!(s.validate().is_err());
        let s = ShareGroupSettings {
            heartbeat_interval_ms: 45_000,
            max_heartbeat_interval_ms: 50_000,
            ..Default::default()
        };
        assert!(
            s.validate().is_err(),
            "the heartbeat is not below the session timeout"
        );
    }
}
