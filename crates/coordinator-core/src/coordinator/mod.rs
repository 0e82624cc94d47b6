//! The coordinator: the map of groups with their tombstones, the timer engine, the
//! lifecycle and the offsets. Everything kind-specific lives in [`crate::group`]; this
//! module reaches it through the `Group` interface.
//!
//! - `mod.rs`: the [`Coordinator`], its builder and settings, the group map;
//! - `entry.rs`: one group's cell (commit gate and state lock);
//! - `timers.rs`: the deadline heap and the timer run (`poll_timeout`, `handle_timeout`);
//! - `lifecycle.rs`: removal of Empty groups, DeleteGroups, ListGroups, `load`, and
//!   `load_where`/`unload_where` (coordinator slots moving between brokers);
//! - `offsets.rs`: Kafka's OffsetCommit for any kind, direct commits, fetches, OffsetDelete;
//! - [`concurrency`]: the locking and cancel-safety contract, in one place.

pub mod concurrency;
#[allow(deprecated)]
pub use group_config::GROUP_CONFIG_NAMES;
pub use group_config::{
    GroupConfig, GroupConfigError, DEFAULT_SHARE_HEARTBEAT_INTERVAL_MS,
    DEFAULT_SHARE_RECORD_LOCK_DURATION_MS, DEFAULT_SHARE_SESSION_TIMEOUT_MS, MAX_GROUP_CONFIGS,
};
mod entry;
mod group_config;
mod lifecycle;
mod offsets;
mod records;
mod stats;
mod timers;
mod txn_offsets;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use tokio::sync::{Notify, OwnedRwLockWriteGuard};

use crate::error::Error;
use crate::group::{Ctx, GroupKind};
use crate::ports::clock::MonotonicClock;
use crate::ports::member_ids::RandomMemberIds;
use crate::ports::{Assignor, Clock, MemberIdSource, OffsetStore, TopicMetadata};
use crate::types::Generation;

pub(crate) use entry::{GroupCell, GroupEntry};
pub(crate) use offsets::Batch;
pub use offsets::Offsets;
pub use stats::CoordinatorStats;
pub(crate) use stats::Stats;
use timers::Timers;
pub use txn_offsets::{TxnOffsetCommitRequest, MAX_PENDING_TXN_OFFSETS_PER_PRODUCER};

/// Kafka's default `offset.metadata.max.bytes`.
pub const DEFAULT_OFFSET_METADATA_MAX_BYTES: usize = 4096;
/// Kafka's default `session.timeout.ms` (45 s).
pub const DEFAULT_SESSION_TIMEOUT_MS: u64 = 45_000;
/// Kafka's default `offsets.retention.minutes` (7 days), in milliseconds.
pub const DEFAULT_OFFSETS_RETENTION_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// How long an Empty group without offsets is kept: Kafka's default
/// `offsets.retention.check.interval.ms` (10 minutes), the longest Kafka keeps one.
pub const DEFAULT_EMPTY_GROUP_GRACE_MS: u64 = 600_000;
/// Kafka's default `group.min.session.timeout.ms`.
pub const DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS: u64 = 6_000;
/// Kafka's default `group.max.session.timeout.ms` (30 minutes).
pub const DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS: u64 = 1_800_000;
/// Kafka's default `group.initial.rebalance.delay.ms`.
pub const DEFAULT_GROUP_INITIAL_REBALANCE_DELAY_MS: u64 = 3_000;
/// How long a new classic member may wait in its first JoinGroup (Kafka's hard-coded
/// `CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS`, 5 minutes).
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: u64 = 300_000;

/// A member removed by [`Coordinator::expire_members`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExpiredMember {
    /// The group the member was in.
    pub group: String,
    /// The member's id.
    pub member: String,
}

/// The coordinator's settings, with Kafka's names and defaults where Kafka has them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoordinatorConfig {
    /// The session timeout of the chapter's groups (default [`DEFAULT_SESSION_TIMEOUT_MS`]).
    pub session_timeout_ms: u64,
    /// The settings of classic groups.
    pub groups: GroupSettings,
    /// Kafka's `offsets.retention.minutes`, in ms: an Empty group's committed offsets are
    /// deleted this long after it became Empty (default 7 days).
    pub offsets_retention_ms: u64,
    /// How long an Empty group without committed offsets is kept before it is removed
    /// (default 10 minutes, Kafka's `offsets.retention.check.interval.ms`).
    pub empty_group_grace_ms: u64,
    /// Kafka's `offset.metadata.max.bytes` (default 4096): the longest metadata string a
    /// commit may carry, in bytes; a longer one is refused with `OFFSET_METADATA_TOO_LARGE`.
    pub offset_metadata_max_bytes: usize,
    /// The settings of consumer-protocol groups (KIP-848).
    pub consumer: ConsumerGroupSettings,
    /// The settings of share groups (KIP-932).
    pub share: crate::group::share::ShareGroupSettings,
}

// ---- Kafka's consumer group protocol (KIP-848): settings ----

/// Kafka's default `group.consumer.session.timeout.ms` (45 s).
pub const DEFAULT_CONSUMER_SESSION_TIMEOUT_MS: u64 = 45_000;
/// Kafka's default `group.consumer.min.session.timeout.ms` (45 s).
pub const DEFAULT_CONSUMER_MIN_SESSION_TIMEOUT_MS: u64 = 45_000;
/// Kafka's default `group.consumer.max.session.timeout.ms` (60 s).
pub const DEFAULT_CONSUMER_MAX_SESSION_TIMEOUT_MS: u64 = 60_000;
/// Kafka's default `group.consumer.heartbeat.interval.ms` (5 s).
pub const DEFAULT_CONSUMER_HEARTBEAT_INTERVAL_MS: u64 = 5_000;
/// Kafka's default `group.consumer.min.heartbeat.interval.ms` (5 s).
pub const DEFAULT_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS: u64 = 5_000;
/// Kafka's default `group.consumer.max.heartbeat.interval.ms` (15 s).
pub const DEFAULT_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS: u64 = 15_000;

/// Settings of Kafka's consumer-protocol groups, with Kafka's names and defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerGroupSettings {
    /// `group.consumer.session.timeout.ms` (default 45000): a member whose last heartbeat is
    /// this old is removed.
    pub session_timeout_ms: u64,
    /// `group.consumer.min.session.timeout.ms` (default 45000).
    pub min_session_timeout_ms: u64,
    /// `group.consumer.max.session.timeout.ms` (default 60000).
    pub max_session_timeout_ms: u64,
    /// `group.consumer.heartbeat.interval.ms` (default 5000): the interval every response
    /// tells members to heartbeat at.
    pub heartbeat_interval_ms: u64,
    /// `group.consumer.min.heartbeat.interval.ms` (default 5000).
    pub min_heartbeat_interval_ms: u64,
    /// `group.consumer.max.heartbeat.interval.ms` (default 15000).
    pub max_heartbeat_interval_ms: u64,
    /// `group.consumer.max.size` (default unlimited: `u32::MAX`).
    pub max_size: u32,
    /// `group.consumer.migration.policy` (default `bidirectional`, Kafka 4's): which
    /// conversions between a classic group and a consumer-protocol group happen while the
    /// group has members.
    pub migration_policy: MigrationPolicy,
}

/// Kafka's `group.consumer.migration.policy`: whether a live group may go from the classic
/// protocol to the consumer protocol (a ConsumerGroupHeartbeat joining a classic group of
/// protocol type `consumer` with members), and back (the last consumer-protocol member of a
/// group whose other members speak the classic protocol leaving). An Empty group of either
/// kind is taken over by the next member whatever the policy, as in Kafka.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MigrationPolicy {
    /// No conversion of a group with members.
    Disabled,
    /// Classic to consumer only.
    Upgrade,
    /// Consumer to classic only.
    Downgrade,
    /// Both ways (Kafka 4's default).
    #[default]
    Bidirectional,
}

impl MigrationPolicy {
    /// Kafka's name: `disabled`, `upgrade`, `downgrade`, `bidirectional`.
    pub fn as_str(self) -> &'static str {
        match self {
            MigrationPolicy::Disabled => "disabled",
            MigrationPolicy::Upgrade => "upgrade",
            MigrationPolicy::Downgrade => "downgrade",
            MigrationPolicy::Bidirectional => "bidirectional",
        }
    }

    /// Whether a classic group with members may become a consumer-protocol group.
    pub fn is_upgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Upgrade | MigrationPolicy::Bidirectional
        )
    }

    /// Whether a consumer-protocol group with classic members may become a classic group.
    pub fn is_downgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Downgrade | MigrationPolicy::Bidirectional
        )
    }
}

impl std::fmt::Display for MigrationPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for MigrationPolicy {
    type Err = Error;

    /// Kafka's names, case-insensitively (Kafka's `ConsumerGroupMigrationPolicy.parse`).
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "disabled" => Ok(MigrationPolicy::Disabled),
            "upgrade" => Ok(MigrationPolicy::Upgrade),
            "downgrade" => Ok(MigrationPolicy::Downgrade),
            "bidirectional" => Ok(MigrationPolicy::Bidirectional),
            other => Err(Error::invalid(
                "group.consumer.migration.policy",
                format!("`{other}` is none of disabled, upgrade, downgrade, bidirectional"),
            )),
        }
    }
}

impl Default for ConsumerGroupSettings {
    fn default() -> Self {
        ConsumerGroupSettings {
            session_timeout_ms: DEFAULT_CONSUMER_SESSION_TIMEOUT_MS,
            min_session_timeout_ms: DEFAULT_CONSUMER_MIN_SESSION_TIMEOUT_MS,
            max_session_timeout_ms: DEFAULT_CONSUMER_MAX_SESSION_TIMEOUT_MS,
            heartbeat_interval_ms: DEFAULT_CONSUMER_HEARTBEAT_INTERVAL_MS,
            min_heartbeat_interval_ms: DEFAULT_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS,
            max_heartbeat_interval_ms: DEFAULT_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS,
            max_size: u32::MAX,
            migration_policy: MigrationPolicy::default(),
        }
    }
}

impl ConsumerGroupSettings {
    /// Refuses settings outside Kafka's bounds, as Kafka's `GroupCoordinatorConfig` does.
    fn validate(&self) -> Result<(), Error> {
        check_bounds(
            "group.consumer.session.timeout.ms",
            self.session_timeout_ms,
            self.min_session_timeout_ms,
            self.max_session_timeout_ms,
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
        )?;
        check_bounds(
            "group.consumer.heartbeat.interval.ms",
            self.heartbeat_interval_ms,
            self.min_heartbeat_interval_ms,
            self.max_heartbeat_interval_ms,
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
        )?;
        if self.heartbeat_interval_ms >= self.session_timeout_ms {
            return Err(Error::invalid(
                "group.consumer.heartbeat.interval.ms",
                format!(
                    "{} must be below group.consumer.session.timeout.ms ({})",
                    self.heartbeat_interval_ms, self.session_timeout_ms
                ),
            ));
        }
        if self.max_size == 0 {
            return Err(Error::invalid(
                "group.consumer.max.size",
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

/// Refuses `v` outside `[min, max]`, or `min` above `max`, naming the setting `name`.
pub(crate) fn check_bounds(
    name: &'static str,
    v: u64,
    min: u64,
    max: u64,
    min_name: &str,
    max_name: &str,
) -> Result<(), Error> {
    if min > max {
        return Err(Error::invalid(
            name,
            format!("{min_name} ({min}) is above {max_name} ({max})"),
        ));
    }
    if v < min || v > max {
        return Err(Error::invalid(
            name,
            format!("{v} is outside [{min_name}, {max_name}] = [{min}, {max}]"),
        ));
    }
    Ok(())
}
// ---- end of the consumer group protocol's settings ----

/// Settings of Kafka's classic groups, with Kafka's names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSettings {
    /// `group.min.session.timeout.ms` (default 6000).
    pub min_session_timeout_ms: u64,
    /// `group.max.session.timeout.ms` (default 1800000).
    pub max_session_timeout_ms: u64,
    /// `group.initial.rebalance.delay.ms` (default 3000): how long the first rebalance of an
    /// Empty group waits for more members.
    pub initial_rebalance_delay_ms: u64,
    /// `group.max.size` (default unlimited: `u32::MAX`).
    pub max_size: u32,
    /// How long a new member may wait in its first JoinGroup (default 300000, Kafka's).
    pub new_member_join_timeout_ms: u64,
    /// BEYOND Kafka: refuse a commit of a partition the member's installed assignment does
    /// not hold (for protocol type `consumer`, when the front decoded the assignments).
    /// Off by default, as in Kafka.
    pub check_commit_ownership: bool,
}

impl Default for GroupSettings {
    fn default() -> Self {
        GroupSettings {
            min_session_timeout_ms: DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS,
            max_session_timeout_ms: DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS,
            initial_rebalance_delay_ms: DEFAULT_GROUP_INITIAL_REBALANCE_DELAY_MS,
            max_size: u32::MAX,
            new_member_join_timeout_ms: NEW_MEMBER_JOIN_TIMEOUT_MS,
            check_commit_ownership: false,
        }
    }
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            session_timeout_ms: DEFAULT_SESSION_TIMEOUT_MS,
            groups: GroupSettings::default(),
            offsets_retention_ms: DEFAULT_OFFSETS_RETENTION_MS,
            empty_group_grace_ms: DEFAULT_EMPTY_GROUP_GRACE_MS,
            offset_metadata_max_bytes: DEFAULT_OFFSET_METADATA_MAX_BYTES,
            consumer: ConsumerGroupSettings::default(),
            share: crate::group::share::ShareGroupSettings::default(),
        }
    }
}

/// The groups, and the last generation of every group that was removed.
#[derive(Debug, Default)]
pub(crate) struct Groups {
    pub(crate) map: HashMap<Arc<str>, Arc<GroupCell>>,
    /// Group id → the generation it had when it was removed. A group re-created under the
    /// same id continues from there, so a member of the old incarnation can never present a
    /// generation the new one will use (see the crate docs, "Lifecycle").
    pub(crate) tombstones: HashMap<Arc<str>, Generation>,
}

impl Groups {
    /// Takes `cell` out of the map if it is still the group's cell there (a newer cell
    /// under the same id stays); says whether it was.
    pub(crate) fn remove_cell(&mut self, cell: &Arc<GroupCell>) -> bool {
        let current = self.map.get(&cell.id).is_some_and(|c| Arc::ptr_eq(c, cell));
        if current {
            self.map.remove(&cell.id);
        }
        current
    }
}

/// The consumer-group coordinator.
///
/// `Send + Sync`: share it as `Arc<Coordinator>` between the tasks of a multi-threaded
/// runtime. See the [crate docs](crate) for the locking design and the timer model.
pub struct Coordinator {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) store: Arc<dyn OffsetStore>,
    pub(crate) metadata: Arc<dyn TopicMetadata>,
    /// Registered strategies; index 0 is the default a member gets when it names none.
    pub(crate) assignors: Vec<Arc<dyn Assignor>>,
    /// The consumer protocol's server-side assignors (`group.consumer.assignors`), by the
    /// names clients give in `group.remote.assignor`; index 0 is the default.
    pub(crate) consumer_assignors: Vec<Arc<dyn Assignor>>,
    pub(crate) config: CoordinatorConfig,
    pub(crate) member_ids: Arc<dyn MemberIdSource>,
    /// This lock is held only to find, insert or remove a group, never across an await and
    /// never while taking a group's lock.
    pub(crate) groups: RwLock<Groups>,
    /// Whether the store keeps groups' durable records (read once, at build): then the
    /// coordinator writes a classic group's record before its members hear of a generation,
    /// and loads the records at [`load`](Coordinator::load).
    pub(crate) durable_groups: bool,
    /// Lock order: a group's state lock, then this one.
    pub(crate) timers: Mutex<Timers>,
    /// Signalled when a deadline earlier than every other one is armed.
    pub(crate) wake: Notify,
    /// Transactional offsets pending per (group, producer id) (KIP-447); never held across
    /// an await.
    pub(crate) txn_offsets: Mutex<txn_offsets::PendingTxnOffsets>,
    /// Groups' own configs (Kafka's group configs), read at each consumer heartbeat.
    pub(crate) group_configs: RwLock<group_config::GroupConfigs>,
    /// What the coordinator counts of its work ([`Coordinator::stats`]).
    pub(crate) stats: Stats,
}

impl fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.assignors.iter().map(|a| a.name()).collect();
        f.debug_struct("Coordinator")
            .field("assignors", &names)
            .field("config", &self.config)
            .field("groups", &self.read_groups().map.len())
            .finish_non_exhaustive()
    }
}

/// Builds a [`Coordinator`]; see [`Coordinator::builder`].
pub struct CoordinatorBuilder {
    clock: Arc<dyn Clock>,
    store: Arc<dyn OffsetStore>,
    metadata: Arc<dyn TopicMetadata>,
    assignors: Vec<Arc<dyn Assignor>>,
    consumer_assignors: Vec<Arc<dyn Assignor>>,
    config: CoordinatorConfig,
    member_ids: Arc<dyn MemberIdSource>,
}

impl fmt::Debug for CoordinatorBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.assignors.iter().map(|a| a.name()).collect();
        f.debug_struct("CoordinatorBuilder")
            .field("assignors", &names)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl CoordinatorBuilder {
    /// Uses `clock` for every deadline (default: [`MonotonicClock`]).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Sets the session timeout of the chapter's groups: a member expires when
    /// `now > last heartbeat + timeout` (default [`DEFAULT_SESSION_TIMEOUT_MS`]).
    #[must_use]
    pub fn session_timeout_ms(mut self, ms: u64) -> Self {
        self.config.session_timeout_ms = ms;
        self
    }

    /// Kafka's `offsets.retention.minutes`, in milliseconds (default
    /// [`DEFAULT_OFFSETS_RETENTION_MS`]): an Empty group's offsets are deleted this long after
    /// it became Empty; a simple group's (plain commits only) this long after its last
    /// commit, Kafka's per-offset commit time approximated by the group's latest.
    #[must_use]
    pub fn offsets_retention_ms(mut self, ms: u64) -> Self {
        self.config.offsets_retention_ms = ms;
        self
    }

    /// Kafka's `offset.metadata.max.bytes`: the longest metadata string a commit may carry
    /// (default [`DEFAULT_OFFSET_METADATA_MAX_BYTES`]).
    #[must_use]
    pub fn offset_metadata_max_bytes(mut self, bytes: usize) -> Self {
        self.config.offset_metadata_max_bytes = bytes;
        self
    }

    /// How long an Empty group without committed offsets is kept (default
    /// [`DEFAULT_EMPTY_GROUP_GRACE_MS`]).
    #[must_use]
    pub fn empty_group_grace_ms(mut self, ms: u64) -> Self {
        self.config.empty_group_grace_ms = ms;
        self
    }

    /// `group.min.session.timeout.ms` of classic groups (default 6000).
    #[must_use]
    pub fn group_min_session_timeout_ms(mut self, ms: u64) -> Self {
        self.config.groups.min_session_timeout_ms = ms;
        self
    }

    /// `group.max.session.timeout.ms` of classic groups (default 1800000).
    #[must_use]
    pub fn group_max_session_timeout_ms(mut self, ms: u64) -> Self {
        self.config.groups.max_session_timeout_ms = ms;
        self
    }

    /// `group.initial.rebalance.delay.ms` of classic groups (default 3000; tests use 0).
    #[must_use]
    pub fn group_initial_rebalance_delay_ms(mut self, ms: u64) -> Self {
        self.config.groups.initial_rebalance_delay_ms = ms;
        self
    }

    /// `group.max.size` of classic groups (default unlimited).
    #[must_use]
    pub fn group_max_size(mut self, members: u32) -> Self {
        self.config.groups.max_size = members;
        self
    }

    /// How long a new classic member may wait in its first JoinGroup (default 300000).
    #[must_use]
    pub fn new_member_join_timeout_ms(mut self, ms: u64) -> Self {
        self.config.groups.new_member_join_timeout_ms = ms;
        self
    }

    /// BEYOND Kafka: refuse classic commits of partitions the member's installed
    /// assignment does not hold (`NOT_PARTITION_OWNER`). Off by default.
    #[must_use]
    pub fn check_classic_commit_ownership(mut self, on: bool) -> Self {
        self.config.groups.check_commit_ownership = on;
        self
    }

    /// Where new classic members' ids come from (default [`RandomMemberIds`]; tests use
    /// [`SequentialMemberIds`](crate::SequentialMemberIds)).
    #[must_use]
    pub fn member_ids(mut self, source: Arc<dyn MemberIdSource>) -> Self {
        self.member_ids = source;
        self
    }

    /// Registers another assignment strategy members may negotiate.
    #[must_use]
    pub fn assignor(mut self, assignor: Arc<dyn Assignor>) -> Self {
        self.assignors.push(assignor);
        self
    }

    // ---- Kafka's consumer group protocol (KIP-848): builder settings ----

    /// Registers a server-side assignor of consumer-protocol groups under its
    /// [`name`](Assignor::name), the name clients give in `group.remote.assignor` (Kafka's
    /// `group.consumer.assignors`; the first registered is the default, as Kafka's first).
    /// Kafka's default list is `uniform,range`; wrap an assignor in
    /// [`named`](crate::named) to register it under another name. Without any, consumer
    /// heartbeats are refused with `UNSUPPORTED_ASSIGNOR`.
    #[must_use]
    pub fn consumer_assignor(mut self, assignor: Arc<dyn Assignor>) -> Self {
        self.consumer_assignors.push(assignor);
        self
    }

    /// `group.consumer.session.timeout.ms` (default 45000; Kafka's bounds 45000–60000 unless
    /// [`consumer_session_timeout_bounds_ms`](Self::consumer_session_timeout_bounds_ms)
    /// moves them).
    #[must_use]
    pub fn consumer_session_timeout_ms(mut self, ms: u64) -> Self {
        self.config.consumer.session_timeout_ms = ms;
        self
    }

    /// `group.consumer.min.session.timeout.ms` and `group.consumer.max.session.timeout.ms`.
    #[must_use]
    pub fn consumer_session_timeout_bounds_ms(mut self, min: u64, max: u64) -> Self {
        self.config.consumer.min_session_timeout_ms = min;
        self.config.consumer.max_session_timeout_ms = max;
        self
    }

    /// `group.consumer.heartbeat.interval.ms` (default 5000; Kafka's bounds 5000–15000).
    #[must_use]
    pub fn consumer_heartbeat_interval_ms(mut self, ms: u64) -> Self {
        self.config.consumer.heartbeat_interval_ms = ms;
        self
    }

    /// `group.consumer.min.heartbeat.interval.ms` and
    /// `group.consumer.max.heartbeat.interval.ms`.
    #[must_use]
    pub fn consumer_heartbeat_interval_bounds_ms(mut self, min: u64, max: u64) -> Self {
        self.config.consumer.min_heartbeat_interval_ms = min;
        self.config.consumer.max_heartbeat_interval_ms = max;
        self
    }

    /// `group.consumer.max.size` (default unlimited).
    #[must_use]
    pub fn consumer_max_size(mut self, members: u32) -> Self {
        self.config.consumer.max_size = members;
        self
    }

    /// `group.consumer.migration.policy` (default [`MigrationPolicy::Bidirectional`]).
    #[must_use]
    pub fn consumer_migration_policy(mut self, policy: MigrationPolicy) -> Self {
        self.config.consumer.migration_policy = policy;
        self
    }
    // ---- end of the consumer group protocol's builder settings ----

    /// `group.share.session.timeout.ms` (default 45000): a share group member whose last
    /// heartbeat is this old is removed.
    #[must_use]
    pub fn share_session_timeout_ms(mut self, ms: u64) -> Self {
        self.config.share.session_timeout_ms = ms;
        self
    }

    /// `group.share.heartbeat.interval.ms` (default 5000).
    #[must_use]
    pub fn share_heartbeat_interval_ms(mut self, ms: u64) -> Self {
        self.config.share.heartbeat_interval_ms = ms;
        self
    }

    /// `group.share.max.size` (default 200).
    #[must_use]
    pub fn share_max_size(mut self, members: u32) -> Self {
        self.config.share.max_size = members;
        self
    }

    /// Every share-group setting at once (Kafka's `group.share.…`), checked by
    /// [`build`](Self::build).
    #[must_use]
    pub fn share_group_settings(
        mut self,
        settings: crate::group::share::ShareGroupSettings,
    ) -> Self {
        self.config.share = settings;
        self
    }

    /// `group.share.min.session.timeout.ms` and `…max…` (default 45000 and 60000): the bounds
    /// of a group's `share.session.timeout.ms`.
    #[must_use]
    pub fn share_session_timeout_bounds_ms(mut self, min: u64, max: u64) -> Self {
        self.config.share.min_session_timeout_ms = min;
        self.config.share.max_session_timeout_ms = max;
        self
    }

    /// `group.share.min.heartbeat.interval.ms` and `…max…` (default 5000 and 15000).
    #[must_use]
    pub fn share_heartbeat_interval_bounds_ms(mut self, min: u64, max: u64) -> Self {
        self.config.share.min_heartbeat_interval_ms = min;
        self.config.share.max_heartbeat_interval_ms = max;
        self
    }

    /// `group.share.record.lock.duration.ms` (default 30000).
    #[must_use]
    pub fn share_record_lock_duration_ms(mut self, ms: u64) -> Self {
        self.config.share.record_lock_duration_ms = ms;
        self
    }

    /// `group.share.min.record.lock.duration.ms` and `…max…` (default 15000 and 60000).
    #[must_use]
    pub fn share_record_lock_duration_bounds_ms(mut self, min: u64, max: u64) -> Self {
        self.config.share.min_record_lock_duration_ms = min;
        self.config.share.max_record_lock_duration_ms = max;
        self
    }

    /// `group.share.delivery.count.limit` (default 5).
    #[must_use]
    pub fn share_delivery_count_limit(mut self, limit: u64) -> Self {
        self.config.share.delivery_count_limit = limit;
        self
    }

    /// `group.share.min.delivery.count.limit` and `…max…` (default 2 and 10).
    #[must_use]
    pub fn share_delivery_count_limit_bounds(mut self, min: u64, max: u64) -> Self {
        self.config.share.min_delivery_count_limit = min;
        self.config.share.max_delivery_count_limit = max;
        self
    }

    /// `group.share.partition.max.record.locks` (default 2000).
    #[must_use]
    pub fn share_partition_max_record_locks(mut self, locks: u64) -> Self {
        self.config.share.partition_max_record_locks = locks;
        self
    }

    /// `group.share.min.partition.max.record.locks` and `…max…` (default 100 and 10000).
    #[must_use]
    pub fn share_partition_max_record_locks_bounds(mut self, min: u64, max: u64) -> Self {
        self.config.share.min_partition_max_record_locks = min;
        self.config.share.max_partition_max_record_locks = max;
        self
    }

    /// Builds the coordinator. Refuses a zero session timeout and two strategies with one name.
    pub fn build(self) -> Result<Coordinator, Error> {
        self.config.consumer.validate()?;
        self.config.share.validate()?;
        for (i, a) in self.consumer_assignors.iter().enumerate() {
            if a.name().is_empty()
                || self.consumer_assignors[..i]
                    .iter()
                    .any(|b| b.name() == a.name())
            {
                return Err(Error::invalid(
                    "group.consumer.assignors",
                    format!("assignor name `{}` is empty or registered twice", a.name()),
                ));
            }
        }
        if self.config.session_timeout_ms == 0 {
            return Err(Error::invalid("session timeout", "must be at least 1 ms"));
        }
        let g = &self.config.groups;
        if g.min_session_timeout_ms > g.max_session_timeout_ms {
            return Err(Error::invalid(
                "group.min.session.timeout.ms",
                format!(
                    "{} is above group.max.session.timeout.ms ({})",
                    g.min_session_timeout_ms, g.max_session_timeout_ms
                ),
            ));
        }
        if g.max_size == 0 {
            return Err(Error::invalid("group.max.size", "must be at least 1"));
        }
        for (i, a) in self.assignors.iter().enumerate() {
            if a.name().is_empty() {
                return Err(Error::invalid(
                    "assignor",
                    "a strategy name must not be empty",
                ));
            }
            if self.assignors[..i].iter().any(|b| b.name() == a.name()) {
                return Err(Error::invalid(
                    "assignor",
                    format!("strategy `{}` is registered twice", a.name()),
                ));
            }
        }
        let durable_groups = self.store.keeps_groups();
        Ok(Coordinator {
            durable_groups,
            clock: self.clock,
            store: self.store,
            metadata: self.metadata,
            assignors: self.assignors,
            consumer_assignors: self.consumer_assignors,
            config: self.config,
            member_ids: self.member_ids,
            groups: RwLock::new(Groups::default()),
            timers: Mutex::new(Timers::default()),
            wake: Notify::new(),
            txn_offsets: Mutex::new(txn_offsets::PendingTxnOffsets::new()),
            group_configs: RwLock::new(group_config::GroupConfigs::new()),
            stats: Stats::default(),
        })
    }
}

pub(crate) fn require(what: &'static str, value: &str) -> Result<(), Error> {
    if value.is_empty() {
        Err(Error::invalid(what, "must not be empty"))
    } else {
        Ok(())
    }
}

pub(crate) fn not_found(group: &str) -> Error {
    Error::GroupIdNotFound {
        group: group.to_string(),
    }
}

impl Coordinator {
    /// Starts building a coordinator over its three ports. `default_assignor` is the strategy
    /// of members that name none.
    pub fn builder(
        store: Arc<dyn OffsetStore>,
        metadata: Arc<dyn TopicMetadata>,
        default_assignor: Arc<dyn Assignor>,
    ) -> CoordinatorBuilder {
        CoordinatorBuilder {
            clock: Arc::new(MonotonicClock::new()),
            store,
            metadata,
            assignors: vec![default_assignor],
            consumer_assignors: Vec::new(),
            config: CoordinatorConfig::default(),
            member_ids: Arc::new(RandomMemberIds::new()),
        }
    }

    /// The session timeout of the chapter's groups, in milliseconds.
    pub fn session_timeout_ms(&self) -> u64 {
        self.config.session_timeout_ms
    }

    /// The coordinator's settings.
    pub fn config(&self) -> &CoordinatorConfig {
        &self.config
    }

    /// The names of the registered strategies; the first is the default.
    pub fn strategies(&self) -> Vec<&str> {
        self.assignors.iter().map(|a| a.name()).collect()
    }

    /// The names of the consumer protocol's server-side assignors; the first is the default.
    pub fn consumer_assignors(&self) -> Vec<&str> {
        self.consumer_assignors.iter().map(|a| a.name()).collect()
    }

    /// The clock the coordinator reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    // ------------------------------------------------------------------ the group map

    pub(crate) fn read_groups(&self) -> std::sync::RwLockReadGuard<'_, Groups> {
        // Nothing panics while holding this lock, so a poisoned map is still consistent.
        self.groups.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn write_groups(&self) -> std::sync::RwLockWriteGuard<'_, Groups> {
        self.groups.write().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn group(&self, group: &str) -> Option<Arc<GroupCell>> {
        self.read_groups().map.get(group).cloned()
    }

    pub(crate) fn group_or_insert(&self, group: &str) -> Arc<GroupCell> {
        if let Some(g) = self.group(group) {
            return g;
        }
        let mut groups = self.write_groups();
        if let Some(g) = groups.map.get(group) {
            return g.clone();
        }
        let id: Arc<str> = Arc::from(group);
        let generation = groups
            .tombstones
            .remove(group)
            .unwrap_or(Generation::INITIAL);
        let cell = Arc::new(GroupCell::new(id.clone(), generation));
        // Offsets the store may hold from before count from now, never from earlier.
        cell.lock().offset_times.known_since = self.clock.now_ms();
        groups.map.insert(id, cell.clone());
        cell
    }

    /// Takes a removed group's cell out of the map, leaving its generation as a tombstone.
    pub(crate) fn forget(&self, cell: &Arc<GroupCell>, generation: Generation) {
        let mut groups = self.write_groups();
        if groups.remove_cell(cell) {
            groups.tombstones.insert(cell.id.clone(), generation);
        }
    }

    /// Arms `entry`'s next deadline, if it is earlier than the one already armed.
    pub(crate) fn arm(&self, entry: &mut GroupEntry) {
        entry.offset_times.settle(|| self.clock.now_ms());
        let Some(at) = entry.next_deadline(
            self.config.offsets_retention_ms,
            self.config.empty_group_grace_ms,
        ) else {
            return;
        };
        self.arm_at(entry, at);
    }

    pub(crate) fn arm_at(&self, entry: &mut GroupEntry, at: u64) {
        // A removed group (expired, deleted, unloaded) is nobody's timer any more: whoever
        // still holds its cell (a stage finishing late) must not put it back on the heap.
        if entry.removed || entry.armed.is_some_and(|armed| armed <= at) {
            return;
        }
        entry.armed = Some(at);
        let earliest = self
            .timers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(at, entry.id.clone());
        if earliest {
            self.wake.notify_one();
        }
    }

    /// The gate of `group`, exclusively, with its cell: the group exists in the map (created
    /// if needed) and was not removed meanwhile.
    pub(crate) async fn install_lock(
        &self,
        group: &str,
    ) -> (Arc<GroupCell>, OwnedRwLockWriteGuard<()>) {
        loop {
            let cell = self.group_or_insert(group);
            let gate = cell.gate.clone().write_owned().await;
            if !cell.lock().removed {
                return (cell, gate);
            }
        }
    }

    /// The context a kind's transitions run with, at `now`, over `entry`'s generation.
    /// Generations installed through it count as rebalances of `kind`.
    pub(crate) fn ctx<'a>(
        &'a self,
        now: u64,
        generation: &'a mut Generation,
        kind: GroupKind,
    ) -> Ctx<'a> {
        self.ctx_with(now, generation, &self.config.consumer, kind)
    }

    /// [`ctx`](Self::ctx) with `consumer` as the consumer-protocol settings (a group's own,
    /// see [`consumer_settings`](Self::consumer_settings)).
    pub(crate) fn ctx_with<'a>(
        &'a self,
        now: u64,
        generation: &'a mut Generation,
        consumer: &'a ConsumerGroupSettings,
        kind: GroupKind,
    ) -> Ctx<'a> {
        let start = *generation;
        Ctx {
            now,
            generation,
            stats: &self.stats,
            counted: (kind, start),
            settings: &self.config.groups,
            ids: &*self.member_ids,
            assignors: &self.assignors,
            metadata: &*self.metadata,
            consumer,
            consumer_assignors: &self.consumer_assignors,
            durable_groups: self.durable_groups,
        }
    }
}
