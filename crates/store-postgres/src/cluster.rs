//! Brokers over one database: each broker process registers its node id under a lease, and
//! owns coordinator slots at an epoch that every group and transaction write checks.
//!
//! Groups and transactional ids hash to slots as Kafka hashes them to the partitions of
//! `__consumer_offsets` and `__transaction_state` (`Utils.abs(key.hashCode()) % 50`, over
//! Java's `String.hashCode`): [`group_slot`] gives 0–49, [`transaction_slot`] 50–99.
//!
//! - [`Cluster::register`] takes the node id for this process (a new *incarnation*, drawn
//!   from a sequence), unless a live registration of another process holds it: Kafka's
//!   `DUPLICATE_BROKER_REGISTRATION`, and the caller retries until that lease runs out.
//! - [`Cluster::balance`], run at every heartbeat of a serving broker, extends the lease
//!   and shares the slots out over the live brokers: each takes its fair share
//!   (`ceil(50 / live brokers)` of each kind) of the slots no live broker owns, at an epoch
//!   one higher, and releases what it holds beyond its share; a dead broker's slots move to
//!   the live ones once its lease has run out. It reports the slots gained (to load) and lost
//!   (to drop), and the cluster as seen (live brokers, their listeners, each slot's owner).
//! - [`Cluster::claim_all`] takes every slot no live broker owns, each at an epoch one
//!   higher than before, in one transaction, or none of them (one broker at a time, with
//!   the others standing by).
//! - [`Cluster::heartbeat`] extends the lease; it tells the caller when the registration or a
//!   slot was taken over meanwhile ([`Liveness::Deposed`]).
//! - A write of the [`PostgresStore`](crate::PostgresStore) built
//!   [`with_fence`](crate::PostgresStore::with_fence) first takes a share lock on its slot's
//!   row at the epoch it was given (`SELECT … FOR SHARE`): a claim, which updates the row,
//!   waits for writes in flight to commit, and no write of the old owner commits after it
//!   (the write finds no row at its epoch and is refused with
//!   [`NotCoordinator`](StorageErrorKind::NotCoordinator), writing nothing).
//!
//! Leases are measured on the database's clock (`now()`), the one clock every broker shares.
//! A clean stop ([`Cluster::deregister`]) frees the node id and the slots at once.

use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use coordinator_core::{StorageError, StorageErrorKind};
use deadpool_postgres::Pool;

use crate::error::{db_error, pool_error};
use crate::{bound_idle_transactions, build_pool, migrate_pool, parse_url};

/// Coordinator slots for groups (Kafka's default `offsets.topic.num.partitions`).
pub const GROUP_SLOTS: i32 = 50;
/// Coordinator slots for transactional ids (Kafka's default
/// `transaction.state.log.num.partitions`), numbered after the groups'.
pub const TRANSACTION_SLOTS: i32 = 50;
/// Every slot: `0..SLOTS`.
pub const SLOTS: i32 = GROUP_SLOTS + TRANSACTION_SLOTS;

/// Extends the lease of registration (`$1` node id, `$2` incarnation) by `$3` ms from now;
/// updates no row when another process holds the node id now.
const EXTEND_LEASE: &str =
    "UPDATE brokers SET lease_until = now() + $3 * interval '1 millisecond' \
     WHERE node_id = $1 AND incarnation = $2";

/// The advisory lock that registrations and claims take, so that they run one at a time
/// (the bytes of `cgbroker`).
const CLUSTER_LOCK: i64 = 0x6367_6272_6f6b_6572;

/// Java's `String.hashCode` (over UTF-16 code units), as Kafka hashes a group id or a
/// transactional id.
fn java_hash(key: &str) -> i32 {
    key.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// Kafka's `Utils.abs`: the absolute value, with `i32::MIN` mapped to 0.
fn kafka_abs(n: i32) -> i32 {
    if n == i32::MIN {
        0
    } else {
        n.abs()
    }
}

/// The coordinator slot of group `group_id` (0–49): Kafka's partition of
/// `__consumer_offsets` for it.
pub fn group_slot(group_id: &str) -> i32 {
    kafka_abs(java_hash(group_id)) % GROUP_SLOTS
}

/// The coordinator slot of transactional id `id` (50–99): [`GROUP_SLOTS`] plus Kafka's
/// partition of `__transaction_state` for it.
pub fn transaction_slot(id: &str) -> i32 {
    GROUP_SLOTS + kafka_abs(java_hash(id)) % TRANSACTION_SLOTS
}

/// What a write must hold to land: the slots this process owns, each at its epoch. Cheap to
/// clone, and every clone sees the same slots: [`Cluster::balance`] updates them in place as
/// slots come and go. Given to [`PostgresStore::with_fence`](crate::PostgresStore::with_fence)
/// and [`PostgresLog::with_fence`](crate::PostgresLog::with_fence).
#[derive(Clone, Debug)]
pub struct SlotFence {
    incarnation: i64,
    /// The epoch of each slot, indexed by slot; `None` for a slot this process does not own.
    epochs: Arc<RwLock<Vec<Option<i64>>>>,
}

impl SlotFence {
    fn new(incarnation: i64, epochs: Vec<Option<i64>>) -> SlotFence {
        SlotFence {
            incarnation,
            epochs: Arc::new(RwLock::new(epochs)),
        }
    }

    /// A fence owning `slots` at the given epochs under no registration (incarnation 0,
    /// which PostgreSQL's sequence never hands out, so every write checked against it is
    /// refused): for tests of code that reads which slots a broker owns.
    pub fn detached(slots: impl IntoIterator<Item = (i32, i64)>) -> SlotFence {
        let mut epochs = vec![None; usize::try_from(SLOTS).unwrap_or(0)];
        for (slot, epoch) in slots {
            if let Some(e) = usize::try_from(slot).ok().and_then(|i| epochs.get_mut(i)) {
                *e = Some(epoch);
            }
        }
        SlotFence::new(0, epochs)
    }

    /// The process's registration these slots belong to.
    pub fn incarnation(&self) -> i64 {
        self.incarnation
    }

    /// The epoch at which this process owns `slot`, if it does.
    pub fn epoch(&self, slot: i32) -> Option<i64> {
        let epochs = self.epochs.read().unwrap_or_else(PoisonError::into_inner);
        usize::try_from(slot)
            .ok()
            .and_then(|i| epochs.get(i).copied().flatten())
    }

    /// The slots this process owns, in order.
    pub fn owned(&self) -> Vec<i32> {
        let epochs = self.epochs.read().unwrap_or_else(PoisonError::into_inner);
        (0..SLOTS)
            .filter(|&s| {
                usize::try_from(s)
                    .ok()
                    .and_then(|i| epochs.get(i))
                    .is_some_and(Option::is_some)
            })
            .collect()
    }

    fn snapshot(&self) -> Vec<Option<i64>> {
        self.epochs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn replace(&self, epochs: Vec<Option<i64>>) {
        *self.epochs.write().unwrap_or_else(PoisonError::into_inner) = epochs;
    }

    /// Checks, inside `tx`, that this process still owns `slot` at its epoch, holding a share
    /// lock on the slot's row until `tx` ends. `what` names the write for the error.
    pub(crate) async fn check(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        slot: i32,
        what: &str,
    ) -> Result<(), StorageError> {
        let Some(epoch) = self.epoch(slot) else {
            return Err(not_coordinator(what, slot, "this broker does not own it"));
        };
        let stmt = tx
            .prepare_cached(
                "SELECT 1 FROM coordinator_slots \
                 WHERE slot = $1 AND owner_incarnation = $2 AND epoch = $3 FOR SHARE",
            )
            .await
            .map_err(|e| db_error(what, e))?;
        let rows = tx
            .query(&stmt, &[&slot, &self.incarnation, &epoch])
            .await
            .map_err(|e| db_error(what, e))?;
        if rows.is_empty() {
            return Err(not_coordinator(
                what,
                slot,
                &format!("another broker took it over (this broker held it at epoch {epoch})"),
            ));
        }
        Ok(())
    }
}

fn not_coordinator(what: &str, slot: i32, why: &str) -> StorageError {
    StorageError::new(
        StorageErrorKind::NotCoordinator,
        format!("refused to {what}: coordinator slot {slot} is not this broker's: {why}; nothing was written"),
    )
}

/// A live registration or slot owner that stands in the way, with how long its lease still
/// runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The node id of the broker that holds it.
    pub node_id: i32,
    /// Milliseconds until its lease runs out, unless it heartbeats again.
    pub lease_left_ms: i64,
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "node {} (its lease runs out in {} ms unless it heartbeats)",
            self.node_id, self.lease_left_ms
        )
    }
}

/// What a heartbeat found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// The registration and every slot are still this process's; the lease was extended.
    Live,
    /// Another process took the node id or a slot over (this one's lease had run out):
    /// this process must stop serving.
    Deposed(String),
}

/// A live broker as the database lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveBroker {
    /// Its node id.
    pub node_id: i32,
    /// Its listeners as it published them ([`Cluster::publish_endpoints`]): an array of
    /// `{"security_protocol", "host", "port"}`; empty until it has published them.
    pub endpoints: serde_json::Value,
}

/// The cluster as one [`Cluster::balance`] saw it, inside its transaction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterView {
    /// The live brokers (their lease runs), by node id.
    pub brokers: Vec<LiveBroker>,
    /// The node id of each slot's owner, indexed by slot: `None` while no live broker owns
    /// it (its owner died and nobody has taken it yet, or it was just released).
    pub owners: Vec<Option<i32>>,
}

impl ClusterView {
    /// The live owner of `slot`, if any.
    pub fn owner(&self, slot: i32) -> Option<i32> {
        usize::try_from(slot)
            .ok()
            .and_then(|i| self.owners.get(i).copied().flatten())
    }

    /// The live broker `node_id`, if it is live.
    pub fn broker(&self, node_id: i32) -> Option<&LiveBroker> {
        self.brokers.iter().find(|b| b.node_id == node_id)
    }
}

/// What a [`Cluster::balance`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Balance {
    /// `Deposed` when another process holds this node id now: nothing else was done, and
    /// the process must stop.
    pub liveness: Liveness,
    /// Slots this process owns from now on at a new epoch (their groups and transactions
    /// must be loaded from the database before they are served).
    pub gained: Vec<i32>,
    /// Slots this process owned and no longer does: released to make room for another
    /// broker, or taken over by one while this process's lease had run out. The fence
    /// already refuses their writes; their groups and transactions must be dropped from
    /// memory.
    pub lost: Vec<i32>,
    /// The cluster after the balance.
    pub view: ClusterView,
    /// How long until the lease of another broker that owns slots runs out (unless it
    /// heartbeats): the caller balances again then, to take its slots over without delay.
    pub next_expiry: Option<Duration>,
}

/// One broker's registration and slots in the database. See the [module](self) docs.
pub struct Cluster {
    pool: Pool,
    node_id: i32,
    session_timeout_ms: i64,
    incarnation: Option<i64>,
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("node_id", &self.node_id)
            .field("session_timeout_ms", &self.session_timeout_ms)
            .field("incarnation", &self.incarnation)
            .finish()
    }
}

impl Cluster {
    /// Connects (two pooled connections) to the database of `url`, applying the migrations it
    /// lacks, for node `node_id` with leases of `session_timeout`. Registers nothing yet.
    /// Its sessions are ended by the server once idle in a transaction for
    /// `session_timeout` ([`bound_idle_transactions`](crate::bound_idle_transactions)).
    pub async fn connect(
        url: &str,
        node_id: i32,
        session_timeout: Duration,
    ) -> Result<Cluster, StorageError> {
        if node_id < 0 {
            return Err(StorageError::new(
                StorageErrorKind::Other,
                format!("a broker's node id is 0 or more (got {node_id})"),
            ));
        }
        // A broker stopped inside a registration or a balance holds the cluster's advisory
        // lock and slot rows every other broker waits for: bounded by its lease.
        let config = bound_idle_transactions(parse_url(url)?, session_timeout);
        let pool = build_pool(config, 2, "cluster registration")?;
        migrate_pool(&pool).await?;
        Ok(Cluster {
            pool,
            node_id,
            session_timeout_ms: i64::try_from(session_timeout.as_millis())
                .unwrap_or(i64::MAX)
                .max(1),
            incarnation: None,
        })
    }

    /// This broker's node id.
    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// This process's incarnation, once registered.
    pub fn incarnation(&self) -> Option<i64> {
        self.incarnation
    }

    /// Registers this process under its node id with a fresh lease: `Ok(None)` when it did,
    /// `Ok(Some(holder))` when a live registration of another process holds the node id
    /// (Kafka's `DUPLICATE_BROKER_REGISTRATION`; try again once its lease may have run out).
    pub async fn register(&mut self) -> Result<Option<Holder>, StorageError> {
        const OP: &str = "register the broker";
        let mut client = self.pool.get().await.map_err(|e| pool_error(OP, e))?;
        let tx = client.transaction().await.map_err(|e| db_error(OP, e))?;
        lock(&tx, OP).await?;
        let held = tx
            .query_opt(
                "SELECT incarnation, \
                 (EXTRACT(EPOCH FROM (lease_until - now())) * 1000)::bigint \
                 FROM brokers WHERE node_id = $1 AND lease_until > now()",
                &[&self.node_id],
            )
            .await
            .map_err(|e| db_error(OP, e))?;
        if let Some(row) = held {
            let incarnation: i64 = row.try_get(0).map_err(|e| db_error(OP, e))?;
            if Some(incarnation) != self.incarnation {
                return Ok(Some(Holder {
                    node_id: self.node_id,
                    lease_left_ms: row.try_get(1).map_err(|e| db_error(OP, e))?,
                }));
            }
        }
        let row = tx
            .query_one(
                "INSERT INTO brokers (node_id, incarnation, lease_until) \
                 VALUES ($1, nextval('broker_incarnations'), now() + $2 * interval '1 millisecond') \
                 ON CONFLICT (node_id) DO UPDATE SET incarnation = EXCLUDED.incarnation, \
                 endpoints = '[]', registered_at = now(), lease_until = EXCLUDED.lease_until \
                 RETURNING incarnation",
                &[&self.node_id, &(self.session_timeout_ms as f64)],
            )
            .await
            .map_err(|e| db_error(OP, e))?;
        let incarnation: i64 = row.try_get(0).map_err(|e| db_error(OP, e))?;
        tx.commit().await.map_err(|e| db_error(OP, e))?;
        self.incarnation = Some(incarnation);
        Ok(None)
    }

    /// Claims every slot no live broker but this process owns, each at its epoch plus one,
    /// all in one transaction: `Ok(Ok(fence))` with the slots' epochs, or `Ok(Err(holder))`
    /// (nothing claimed) when a live broker holds one of them.
    pub async fn claim_all(&self) -> Result<Result<SlotFence, Holder>, StorageError> {
        const OP: &str = "claim the coordinator slots";
        let incarnation = self.registered(OP)?;
        let mut client = self.pool.get().await.map_err(|e| pool_error(OP, e))?;
        let tx = client.transaction().await.map_err(|e| db_error(OP, e))?;
        lock(&tx, OP).await?;
        let held = tx
            .query_opt(
                "SELECT b.node_id, \
                 (EXTRACT(EPOCH FROM (b.lease_until - now())) * 1000)::bigint \
                 FROM coordinator_slots s JOIN brokers b \
                 ON b.node_id = s.owner_node AND b.incarnation = s.owner_incarnation \
                 WHERE b.lease_until > now() AND b.incarnation <> $1 \
                 ORDER BY b.lease_until DESC LIMIT 1",
                &[&incarnation],
            )
            .await
            .map_err(|e| db_error(OP, e))?;
        if let Some(row) = held {
            return Ok(Err(Holder {
                node_id: row.try_get(0).map_err(|e| db_error(OP, e))?,
                lease_left_ms: row.try_get(1).map_err(|e| db_error(OP, e))?,
            }));
        }
        // Slots this incarnation already owns keep their epoch; every other one moves to it.
        let rows = tx
            .query(
                "UPDATE coordinator_slots SET owner_node = $1, owner_incarnation = $2, \
                 epoch = CASE WHEN owner_incarnation = $2 THEN epoch ELSE epoch + 1 END \
                 WHERE slot >= 0 AND slot < $3 RETURNING slot, epoch",
                &[&self.node_id, &incarnation, &SLOTS],
            )
            .await
            .map_err(|e| db_error(OP, e))?;
        let mut epochs = vec![None; usize::try_from(SLOTS).unwrap_or(0)];
        for row in &rows {
            let slot: i32 = row.try_get(0).map_err(|e| db_error(OP, e))?;
            let epoch: i64 = row.try_get(1).map_err(|e| db_error(OP, e))?;
            if let Some(e) = usize::try_from(slot).ok().and_then(|i| epochs.get_mut(i)) {
                *e = Some(epoch);
            }
        }
        if epochs.iter().any(Option::is_none) {
            return Err(StorageError::new(
                StorageErrorKind::Corrupt,
                format!(
                    "the table coordinator_slots lacks some of the slots 0-{} (found {})",
                    SLOTS - 1,
                    rows.len()
                ),
            ));
        }
        tx.commit().await.map_err(|e| db_error(OP, e))?;
        Ok(Ok(SlotFence::new(incarnation, epochs)))
    }

    /// Writes this broker's listeners (`[{"name", "host", "port", "security_protocol"}]`, as
    /// clients reach them) into its registration.
    pub async fn publish_endpoints(
        &self,
        endpoints: serde_json::Value,
    ) -> Result<(), StorageError> {
        const OP: &str = "publish the broker's listeners";
        let incarnation = self.registered(OP)?;
        let client = self.pool.get().await.map_err(|e| pool_error(OP, e))?;
        client
            .execute(
                "UPDATE brokers SET endpoints = $3 WHERE node_id = $1 AND incarnation = $2",
                &[&self.node_id, &incarnation, &endpoints],
            )
            .await
            .map_err(|e| db_error(OP, e))?;
        Ok(())
    }

    /// Extends the lease by the session timeout from now, and checks that the registration
    /// and the slots of `fence` are still this process's.
    pub async fn heartbeat(&self, fence: Option<&SlotFence>) -> Result<Liveness, StorageError> {
        const OP: &str = "heartbeat the broker's lease";
        let incarnation = self.registered(OP)?;
        let client = self.pool.get().await.map_err(|e| pool_error(OP, e))?;
        let extended = client
            .execute(
                EXTEND_LEASE,
                &[&self.node_id, &incarnation, &self.session_timeout()],
            )
            .await
            .map_err(|e| db_error(OP, e))?;
        if extended == 0 {
            return Ok(Liveness::Deposed(self.taken_over()));
        }
        let Some(fence) = fence else {
            return Ok(Liveness::Live);
        };
        let rows = client
            .query(
                "SELECT slot, epoch FROM coordinator_slots WHERE owner_incarnation = $1",
                &[&incarnation],
            )
            .await
            .map_err(|e| db_error(OP, e))?;
        let mut kept = 0;
        for row in &rows {
            let slot: i32 = row.try_get(0).map_err(|e| db_error(OP, e))?;
            let epoch: i64 = row.try_get(1).map_err(|e| db_error(OP, e))?;
            if fence.epoch(slot) == Some(epoch) {
                kept += 1;
            }
        }
        let owned = fence.snapshot().iter().filter(|e| e.is_some()).count();
        if kept < owned {
            return Ok(Liveness::Deposed(format!(
                "another broker took over {} of this broker's {owned} coordinator slots after \
                 its lease ran out",
                owned - kept
            )));
        }
        Ok(Liveness::Live)
    }

    /// A fence that owns no slot yet, for [`balance`](Self::balance) to fill in.
    pub fn empty_fence(&self) -> Result<SlotFence, StorageError> {
        let incarnation = self.registered("build a slot fence")?;
        Ok(SlotFence::new(
            incarnation,
            vec![None; usize::try_from(SLOTS).unwrap_or(0)],
        ))
    }

    /// Extends this process's lease and takes its fair share of the slots, in one
    /// transaction, updating `fence` in place (a fence of this process's registration, from
    /// [`empty_fence`](Self::empty_fence) or [`claim_all`](Self::claim_all)).
    ///
    /// Each kind of slot (groups, transactional ids) is shared out separately: with `L` live
    /// brokers, a fair share is `ceil(slots / L)`. A broker holding more than its share
    /// releases the excess (the slot then has no owner until another broker claims it);
    /// one holding fewer claims slots that no live broker owns (never one from a live
    /// owner), each at its epoch plus one. Slots are sticky: a balanced cluster moves
    /// nothing, and which slots move is chosen by rendezvous hashing of slot and node id,
    /// so that brokers agree without talking. A release waits (a row lock) for the writes in
    /// flight on that slot to commit; none of this process's writes lands after it.
    pub async fn balance(&self, fence: &SlotFence) -> Result<Balance, StorageError> {
        const OP: &str = "balance the coordinator slots";
        let incarnation = self.registered(OP)?;
        if fence.incarnation != incarnation {
            return Err(StorageError::new(
                StorageErrorKind::Other,
                format!(
                    "cannot {OP}: the fence belongs to incarnation {} and this process is incarnation {incarnation}",
                    fence.incarnation
                ),
            ));
        }
        let mut client = self.pool.get().await.map_err(|e| pool_error(OP, e))?;
        let tx = client.transaction().await.map_err(|e| db_error(OP, e))?;
        lock(&tx, OP).await?;
        let extended = tx
            .execute(
                EXTEND_LEASE,
                &[&self.node_id, &incarnation, &self.session_timeout()],
            )
            .await
            .map_err(|e| db_error(OP, e))?;
        if extended == 0 {
            let lost = fence.owned();
            fence.replace(vec![None; usize::try_from(SLOTS).unwrap_or(0)]);
            return Ok(Balance {
                liveness: Liveness::Deposed(self.taken_over()),
                gained: Vec::new(),
                lost,
                view: ClusterView::default(),
                next_expiry: None,
            });
        }
        let rows = tx
            .query(
                "SELECT node_id, incarnation, endpoints, \
                 (EXTRACT(EPOCH FROM (lease_until - now())) * 1000)::bigint \
                 FROM brokers WHERE lease_until > now() ORDER BY node_id",
                &[],
            )
            .await
            .map_err(|e| db_error(OP, e))?;
        let mut live = Vec::with_capacity(rows.len());
        for row in &rows {
            let node_id: i32 = row.try_get(0).map_err(|e| db_error(OP, e))?;
            let inc: i64 = row.try_get(1).map_err(|e| db_error(OP, e))?;
            let endpoints: serde_json::Value = row.try_get(2).map_err(|e| db_error(OP, e))?;
            let left: i64 = row.try_get(3).map_err(|e| db_error(OP, e))?;
            live.push((node_id, inc, endpoints, left));
        }
        let rows = tx
            .query(
                "SELECT slot, owner_node, owner_incarnation, epoch FROM coordinator_slots \
                 WHERE slot >= 0 AND slot < $1 ORDER BY slot",
                &[&SLOTS],
            )
            .await
            .map_err(|e| db_error(OP, e))?;
        let mut slots: Vec<SlotRow> = Vec::with_capacity(rows.len());
        for row in &rows {
            slots.push(SlotRow {
                slot: row.try_get(0).map_err(|e| db_error(OP, e))?,
                owner_node: row.try_get(1).map_err(|e| db_error(OP, e))?,
                owner_incarnation: row.try_get(2).map_err(|e| db_error(OP, e))?,
                epoch: row.try_get(3).map_err(|e| db_error(OP, e))?,
            });
        }
        if slots.len() != usize::try_from(SLOTS).unwrap_or(0) {
            return Err(StorageError::new(
                StorageErrorKind::Corrupt,
                format!(
                    "the table coordinator_slots lacks some of the slots 0-{} (found {})",
                    SLOTS - 1,
                    slots.len()
                ),
            ));
        }
        let is_live = |row: &SlotRow| {
            live.iter()
                .any(|(n, i, _, _)| Some(*n) == row.owner_node && Some(*i) == row.owner_incarnation)
        };
        let brokers = i32::try_from(live.len()).unwrap_or(i32::MAX).max(1);
        let mut release = Vec::new();
        let mut claim = Vec::new();
        for range in [0..GROUP_SLOTS, GROUP_SLOTS..SLOTS] {
            let fair =
                usize::try_from((range.end - range.start + brokers - 1) / brokers).unwrap_or(0);
            let kind: Vec<&SlotRow> = slots.iter().filter(|r| range.contains(&r.slot)).collect();
            let mut mine: Vec<&SlotRow> = kind
                .iter()
                .copied()
                .filter(|r| r.owner_incarnation == Some(incarnation))
                .collect();
            if mine.len() > fair {
                // Give up the slots this node ranks lowest.
                mine.sort_by_key(|r| rank(r.slot, self.node_id));
                release.extend(mine.iter().take(mine.len() - fair).map(|r| r.slot));
            } else if mine.len() < fair {
                let mut free: Vec<&SlotRow> =
                    kind.iter().copied().filter(|r| !is_live(r)).collect();
                free.sort_by_key(|r| std::cmp::Reverse(rank(r.slot, self.node_id)));
                claim.extend(free.iter().take(fair - mine.len()).map(|r| r.slot));
            }
        }
        if !release.is_empty() {
            tx.execute(
                "UPDATE coordinator_slots SET owner_node = NULL, owner_incarnation = NULL \
                 WHERE slot = ANY($1) AND owner_incarnation = $2",
                &[&release, &incarnation],
            )
            .await
            .map_err(|e| db_error(OP, e))?;
        }
        if !claim.is_empty() {
            tx.execute(
                "UPDATE coordinator_slots SET owner_node = $1, owner_incarnation = $2, \
                 epoch = epoch + 1 WHERE slot = ANY($3)",
                &[&self.node_id, &incarnation, &claim],
            )
            .await
            .map_err(|e| db_error(OP, e))?;
        }
        tx.commit().await.map_err(|e| db_error(OP, e))?;

        // The slots as they are now, and what changed for this process.
        let before = fence.snapshot();
        let mut after = vec![None; slots.len()];
        let mut owners = vec![None; slots.len()];
        for (i, row) in slots.iter().enumerate() {
            if claim.contains(&row.slot) {
                after[i] = Some(row.epoch + 1);
                owners[i] = Some(self.node_id);
            } else if release.contains(&row.slot) {
                // Released: nobody's until another broker claims it.
            } else if row.owner_incarnation == Some(incarnation) {
                after[i] = Some(row.epoch);
                owners[i] = Some(self.node_id);
            } else if is_live(row) {
                owners[i] = row.owner_node;
            }
        }
        let (mut gained, mut lost) = (Vec::new(), Vec::new());
        for (slot, (was, now)) in (0..SLOTS).zip(before.iter().zip(&after)) {
            if was.is_some() && was != now {
                lost.push(slot);
            }
            if now.is_some() && was != now {
                gained.push(slot);
            }
        }
        fence.replace(after);
        let next_expiry = live
            .iter()
            .filter(|(n, i, _, _)| *i != incarnation && owners.contains(&Some(*n)))
            .map(|(_, _, _, left)| Duration::from_millis(u64::try_from(*left).unwrap_or(0)))
            .min();
        Ok(Balance {
            liveness: Liveness::Live,
            gained,
            lost,
            view: ClusterView {
                brokers: live
                    .into_iter()
                    .map(|(node_id, _, endpoints, _)| LiveBroker { node_id, endpoints })
                    .collect(),
                owners,
            },
            next_expiry,
        })
    }

    /// Ends the registration: the node id and the slots are free for another process at once.
    pub async fn deregister(&self) -> Result<(), StorageError> {
        const OP: &str = "deregister the broker";
        let incarnation = self.registered(OP)?;
        let client = self.pool.get().await.map_err(|e| pool_error(OP, e))?;
        client
            .execute(
                "DELETE FROM brokers WHERE node_id = $1 AND incarnation = $2",
                &[&self.node_id, &incarnation],
            )
            .await
            .map_err(|e| db_error(OP, e))?;
        Ok(())
    }

    /// The lease's length, as the SQL of [`EXTEND_LEASE`] takes it.
    fn session_timeout(&self) -> f64 {
        self.session_timeout_ms as f64
    }

    /// Why a process whose registration another one took is deposed.
    fn taken_over(&self) -> String {
        format!(
            "another process registered node {} after this one's lease ran out",
            self.node_id
        )
    }

    fn registered(&self, op: &str) -> Result<i64, StorageError> {
        self.incarnation.ok_or_else(|| {
            StorageError::new(
                StorageErrorKind::Other,
                format!("cannot {op}: the broker has not registered"),
            )
        })
    }
}

/// One row of `coordinator_slots`.
struct SlotRow {
    slot: i32,
    owner_node: Option<i32>,
    owner_incarnation: Option<i64>,
    epoch: i64,
}

/// How much node `node_id` wants `slot` (rendezvous hashing: every broker computes the same
/// ranks, so claims and releases agree without talking): SplitMix64 of both.
fn rank(slot: i32, node_id: i32) -> u64 {
    let mut z = (u64::from(slot as u32) << 32 | u64::from(node_id as u32))
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

async fn lock(tx: &deadpool_postgres::Transaction<'_>, op: &str) -> Result<(), StorageError> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CLUSTER_LOCK])
        .await
        .map(drop)
        .map_err(|e| db_error(op, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_hash_to_kafkas_partitions() {
        // Java: "".hashCode() == 0; "a".hashCode() == 97; "group".hashCode() == 98629247.
        assert_eq!(java_hash(""), 0);
        assert_eq!(java_hash("a"), 97);
        assert_eq!(java_hash("group"), 98_629_247);
        assert_eq!(group_slot("group"), 98_629_247 % 50);
        // A hash that overflows: "polygenelubricants".hashCode() == Integer.MIN_VALUE,
        // which Kafka's Utils.abs maps to 0.
        assert_eq!(java_hash("polygenelubricants"), i32::MIN);
        assert_eq!(group_slot("polygenelubricants"), 0);
        // Outside the BMP: two UTF-16 code units, as Java counts them.
        assert_eq!(java_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
        for key in ["", "a", "orders", "tx-1", "polygenelubricants"] {
            assert!((0..GROUP_SLOTS).contains(&group_slot(key)));
            assert!((GROUP_SLOTS..SLOTS).contains(&transaction_slot(key)));
        }
    }
}
