//! The share groups' partitions and share sessions (KIP-932) this broker serves as the
//! partitions' leader: one [`SharePartition`] per group and partition (the core's state
//! machine), and one share session per group and member. Bounded: at most
//! [`MAX_SHARE_PARTITIONS`] share-partitions and [`MAX_SHARE_SESSIONS`] sessions (Kafka's
//! `group.share.max.share.sessions` is 2000 per broker); past them a new one is refused
//! (`SHARE_SESSION_LIMIT_REACHED` for a session, as Kafka's cache answers when full).
//!
//! Durable where the broker keeps its state (the document [`SHARE_STATE_FILE`] of the data
//! directory or of PostgreSQL): each share-partition's start offset and the states and
//! delivery counts of its in-flight records (the core's [`SharePartition::snapshot`], Kafka's
//! share snapshot), written before an acknowledgement is answered. At start each is restored
//! as Kafka's share-partition loads its state: what was accepted or archived is never
//! delivered again, what was acquired is available again. Sessions are not kept (Kafka's are
//! not either: a client opens a new one).
//!
//! With several brokers over one PostgreSQL database the document is shared: each broker
//! holds in memory only the share-partitions of the partitions it leads. At start it takes
//! from the document those it leads; a partition whose leadership it gains later is read
//! from the document at its first use ([`ShareState::ensure_read`]), and one it loses is
//! dropped from memory ([`ShareState::release_where`]) for its new leader to read.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use coordinator_core::{KeptRecordState, SharePartition, StateBatch, TopicPartition};
use serde::{Deserialize, Serialize};

use crate::documents::Documents;
use crate::error::BrokerError;

/// The document holding every share-partition's state.
pub(crate) const SHARE_STATE_FILE: &str = "share-state.json";

/// The most share-partitions the broker keeps.
pub(crate) const MAX_SHARE_PARTITIONS: usize = 100_000;

/// The most share sessions the broker keeps.
pub(crate) const MAX_SHARE_SESSIONS: usize = 10_000;

/// Kafka's `INVALID_RECORD_STATE`.
pub(crate) const INVALID_RECORD_STATE: i16 = 121;
/// Kafka's `SHARE_SESSION_NOT_FOUND`.
pub(crate) const SHARE_SESSION_NOT_FOUND: i16 = 122;
/// Kafka's `INVALID_SHARE_SESSION_EPOCH`.
pub(crate) const INVALID_SHARE_SESSION_EPOCH: i16 = 123;
/// Kafka's `SHARE_SESSION_LIMIT_REACHED`.
pub(crate) const SHARE_SESSION_LIMIT_REACHED: i16 = 133;

/// A share session's epoch that opens one (Kafka's `ShareRequestMetadata.INITIAL_EPOCH`).
pub(crate) const INITIAL_EPOCH: i32 = 0;
/// A share session's epoch that closes it (`FINAL_EPOCH`).
pub(crate) const FINAL_EPOCH: i32 = -1;

/// One member's share session: the epoch its next request must carry and the partitions
/// it fetches.
#[derive(Debug, Clone, Default)]
pub(crate) struct ShareSession {
    pub(crate) epoch: i32,
    pub(crate) partitions: BTreeSet<TopicPartition>,
    /// The connection that opened it (`Session::id`).
    pub(crate) connection: u64,
    /// The topic ids its partitions were asked by (Kafka keys a share session by topic id: a
    /// topic made again under its name is not in it).
    pub(crate) topic_ids: BTreeMap<String, uuid::Uuid>,
}

/// Why a share session refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionRefusal {
    /// No session for this member (`SHARE_SESSION_NOT_FOUND`).
    NotFound,
    /// Another epoch than the session's (`INVALID_SHARE_SESSION_EPOCH`).
    Epoch,
    /// Too many sessions (`SHARE_SESSION_LIMIT_REACHED`).
    Full,
}

impl SessionRefusal {
    pub(crate) fn code(self) -> i16 {
        match self {
            SessionRefusal::NotFound => SHARE_SESSION_NOT_FOUND,
            SessionRefusal::Epoch => INVALID_SHARE_SESSION_EPOCH,
            SessionRefusal::Full => SHARE_SESSION_LIMIT_REACHED,
        }
    }
}

type Key = (String, String);

/// The share-partitions and share sessions. See the [module](self) docs.
#[derive(Debug, Default)]
pub(crate) struct ShareState {
    partitions: Mutex<HashMap<(String, TopicPartition), SharePartition>>,
    sessions: Mutex<HashMap<Key, ShareSession>>,
    /// Kept share-partitions not used since the start: taken at their first use.
    restored: Mutex<HashMap<(String, TopicPartition), SharePartition>>,
    kept: Option<Kept>,
    /// The topic ids of the assignment each member was last sent (a topic made again under
    /// its name has another id: the member is sent its assignment again).
    sent: Mutex<HashMap<Key, Vec<(String, uuid::Uuid)>>>,
    /// Several brokers share the document: a share-partition not in memory is looked for in
    /// it at its first use.
    cluster: bool,
    /// The share-partitions looked for in the document since this broker last gained their
    /// partition (found or not); at most [`MAX_SHARE_PARTITIONS`].
    checked: Mutex<HashSet<(String, TopicPartition)>>,
    /// The in-flight bound a restored share-partition is cut to.
    max_in_flight: u64,
}

/// Where the share-partitions are kept, and what is left to write.
#[derive(Debug)]
struct Kept {
    documents: Documents,
    /// Changes made so far (each [`ShareState::keep`] counts one).
    changes: AtomicU64,
    /// Share-partitions changed since the last write.
    dirty: Mutex<BTreeSet<(String, TopicPartition)>>,
    /// Serializes the writers; holds the changes written so far.
    written: tokio::sync::Mutex<u64>,
}

#[derive(Serialize, Deserialize, Default)]
struct StateFile {
    version: u32,
    partitions: Vec<KeptPartition>,
}

#[derive(Serialize, Deserialize, Clone)]
struct KeptPartition {
    group: String,
    topic: String,
    partition: u32,
    start_offset: i64,
    /// `[first offset, last offset, Kafka's state number, delivery count]`.
    batches: Vec<(i64, i64, i8, i16)>,
}

impl KeptPartition {
    fn of(group: &str, tp: &TopicPartition, sp: &SharePartition) -> KeptPartition {
        let (start_offset, batches) = sp.snapshot();
        KeptPartition {
            group: group.to_string(),
            topic: tp.topic().to_string(),
            partition: tp.partition(),
            start_offset,
            batches: batches
                .iter()
                .map(|b| {
                    (
                        b.first_offset,
                        b.last_offset,
                        b.state.code(),
                        b.delivery_count,
                    )
                })
                .collect(),
        }
    }

    /// The core's share-partition this state describes, at most `max_in_flight` offsets.
    fn restore(&self, max_in_flight: u64) -> Result<SharePartition, String> {
        let batches: Option<Vec<StateBatch>> = self
            .batches
            .iter()
            .map(|&(first, last, state, count)| {
                Some(StateBatch {
                    first_offset: first,
                    last_offset: last,
                    state: KeptRecordState::from_code(state)?,
                    delivery_count: count,
                })
            })
            .collect();
        let batches = batches.ok_or_else(|| {
            format!(
                "group `{}` partition {}-{}: a record state Kafka does not have",
                self.group, self.topic, self.partition
            )
        })?;
        Ok(SharePartition::restore(
            self.start_offset,
            &batches,
            max_in_flight,
        ))
    }

    fn key(&self) -> (String, TopicPartition) {
        (
            self.group.clone(),
            TopicPartition::new(self.topic.clone(), self.partition),
        )
    }
}

fn parse_state(bytes: Option<&[u8]>) -> Result<StateFile, String> {
    let Some(bytes) = bytes else {
        return Ok(StateFile {
            version: 1,
            partitions: Vec::new(),
        });
    };
    let file: StateFile = serde_json::from_slice(bytes)
        .map_err(|e| format!("not a share state file of this broker: {e}"))?;
    if file.version != 1 {
        return Err(format!(
            "share state version {} is not known to this broker (1 is)",
            file.version
        ));
    }
    Ok(file)
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl ShareState {
    /// The share state kept in `documents` (none without them: in memory only), its
    /// share-partitions restored (at most [`MAX_SHARE_PARTITIONS`], each at most its
    /// `max_in_flight` offsets). `leads`: with several brokers over one database, whether
    /// this broker leads a partition (only those are restored now; see the module docs).
    ///
    /// # Errors
    /// A document that cannot be read or is not this broker's.
    pub(crate) async fn load(
        documents: Option<Documents>,
        max_in_flight: u64,
        leads: Option<&dyn Fn(&TopicPartition) -> bool>,
    ) -> Result<ShareState, BrokerError> {
        let Some(documents) = documents else {
            return Ok(ShareState::default());
        };
        let shown = documents.shown(SHARE_STATE_FILE);
        let refuse = |reason: String| BrokerError::InvalidConfig {
            setting: "share state",
            reason: format!("`{shown}`: {reason}"),
        };
        let bytes = documents.load(SHARE_STATE_FILE).await.map_err(refuse)?;
        let file = parse_state(bytes.as_deref()).map_err(refuse)?;
        let mut restored = HashMap::new();
        let cluster = leads.is_some();
        let ours = file
            .partitions
            .into_iter()
            .filter(|p| leads.is_none_or(|leads| leads(&p.key().1)))
            .take(MAX_SHARE_PARTITIONS);
        for p in ours {
            let sp = p.restore(max_in_flight).map_err(refuse)?;
            restored.insert(p.key(), sp);
        }
        if !restored.is_empty() {
            tracing::info!(
                share_partitions = restored.len(),
                "share-partitions restored"
            );
        }
        Ok(ShareState {
            restored: Mutex::new(restored),
            cluster,
            max_in_flight,
            kept: Some(Kept {
                documents,
                changes: AtomicU64::new(0),
                dirty: Mutex::new(BTreeSet::new()),
                written: tokio::sync::Mutex::new(0),
            }),
            ..ShareState::default()
        })
    }

    /// With several brokers over one database: `group`'s share-partition of `tp`, if not in
    /// memory and not looked for since this broker gained the partition, is read from the
    /// document (its previous leader's last state), to be taken at its first use. Nothing to
    /// do for a broker alone (everything was read at start).
    ///
    /// # Errors
    /// The document cannot be read; the share-partition is looked for again next time.
    pub(crate) async fn ensure_read(&self, group: &str, tp: &TopicPartition) -> Result<(), String> {
        let Some(kept) = self.kept.as_ref().filter(|_| self.cluster) else {
            return Ok(());
        };
        let key = (group.to_string(), tp.clone());
        let known = lock(&self.partitions).contains_key(&key)
            || lock(&self.restored).contains_key(&key)
            || lock(&self.checked).contains(&key);
        if known {
            return Ok(());
        }
        let bytes = kept.documents.load(SHARE_STATE_FILE).await?;
        let file = parse_state(bytes.as_deref())?;
        let found = file.partitions.iter().find(|p| p.key() == key);
        let sp = found.map(|p| p.restore(self.max_in_flight)).transpose()?;
        // Another request may have read it meanwhile, and made changes since: keep those.
        let partitions = lock(&self.partitions);
        if let (false, Some(sp)) = (partitions.contains_key(&key), sp) {
            lock(&self.restored).entry(key.clone()).or_insert(sp);
        }
        let mut checked = lock(&self.checked);
        // Bounded: past it the marks go (what they saved is a document read each).
        if checked.len() >= MAX_SHARE_PARTITIONS {
            checked.clear();
        }
        checked.insert(key);
        Ok(())
    }

    /// Drops from memory the share-partitions of the partitions `lost` says this broker no
    /// longer leads (several brokers over one database), with their changes not yet written:
    /// their new leader reads the document. Their share sessions stay (a fetch of a partition
    /// led elsewhere is refused, as any).
    pub(crate) fn release_where(&self, lost: impl Fn(&TopicPartition) -> bool) -> usize {
        let mut dropped = 0;
        for map in [&self.partitions, &self.restored] {
            let mut map = lock(map);
            let before = map.len();
            map.retain(|(_, tp), _| !lost(tp));
            dropped += before - map.len();
        }
        lock(&self.checked).retain(|(_, tp)| !lost(tp));
        if let Some(kept) = &self.kept {
            lock(&kept.dirty).retain(|(_, tp)| !lost(tp));
        }
        dropped
    }

    /// Every share-partition of `group` with its start offset, in partition order: those in
    /// memory, and, with several brokers over one database, those the document holds for
    /// partitions other brokers lead.
    ///
    /// # Errors
    /// The document cannot be read.
    pub(crate) async fn all_start_offsets(
        &self,
        group: &str,
    ) -> Result<Vec<(TopicPartition, i64)>, String> {
        let mut out: BTreeMap<TopicPartition, i64> = BTreeMap::new();
        if let Some(kept) = self.kept.as_ref().filter(|_| self.cluster) {
            let bytes = kept.documents.load(SHARE_STATE_FILE).await?;
            for p in parse_state(bytes.as_deref())?.partitions {
                if p.group == group {
                    out.insert(p.key().1, p.start_offset);
                }
            }
        }
        out.extend(self.start_offsets(group));
        Ok(out.into_iter().collect())
    }

    /// Keeps `group`'s share-partitions of `tps` as they are now, with every other change
    /// not yet written (one write carries all: the writers queue behind one lock, and one
    /// finding its change written by another returns). Nothing to do without documents.
    ///
    /// # Errors
    /// What failed; the kept state is the one before, the changes stay to be written.
    pub(crate) async fn keep(&self, group: &str, tps: &[TopicPartition]) -> Result<(), String> {
        let keys: Vec<(String, TopicPartition)> = tps
            .iter()
            .map(|tp| (group.to_string(), tp.clone()))
            .collect();
        self.keep_keys(keys).await
    }

    /// [`keep`](Self::keep) for share-partitions of any groups.
    pub(crate) async fn keep_keys(
        &self,
        keys: Vec<(String, TopicPartition)>,
    ) -> Result<(), String> {
        let Some(kept) = &self.kept else {
            return Ok(());
        };
        if keys.is_empty() {
            return Ok(());
        }
        let mine = {
            let mut dirty = kept
                .dirty
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            dirty.extend(keys);
            kept.changes.fetch_add(1, Ordering::SeqCst) + 1
        };
        let mut written = kept.written.lock().await;
        if *written >= mine {
            return Ok(());
        }
        let (upto, keys) = {
            let mut dirty = kept
                .dirty
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            (
                kept.changes.load(Ordering::SeqCst),
                std::mem::take(&mut *dirty),
            )
        };
        // Each dirty share-partition as it is now (gone: removed from the document).
        let now: Vec<((String, TopicPartition), Option<KeptPartition>)> = {
            let map = self
                .partitions
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            keys.iter()
                .map(|key| {
                    let p = map.get(key).map(|sp| KeptPartition::of(&key.0, &key.1, sp));
                    (key.clone(), p)
                })
                .collect()
        };
        let result = kept
            .documents
            .update(SHARE_STATE_FILE, false, |bytes| {
                let file = parse_state(bytes.as_deref())?;
                let mut all: BTreeMap<(String, TopicPartition), KeptPartition> =
                    file.partitions.into_iter().map(|p| (p.key(), p)).collect();
                for (key, p) in &now {
                    match p {
                        Some(p) => all.insert(key.clone(), p.clone()),
                        None => all.remove(key),
                    };
                }
                serde_json::to_vec(&StateFile {
                    version: 1,
                    partitions: all.into_values().collect(),
                })
                .map(Some)
                .map_err(|e| e.to_string())
            })
            .await;
        match result {
            Ok(()) => {
                *written = upto;
                Ok(())
            }
            Err(e) => {
                kept.dirty
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .extend(keys);
                Err(e)
            }
        }
    }

    /// Runs `f` on `group`'s share-partition of `tp`, made with `new` if there is none (and
    /// room for it; a kept one is taken first): `None` when the broker keeps
    /// [`MAX_SHARE_PARTITIONS`] already.
    pub(crate) fn with_partition<R>(
        &self,
        group: &str,
        tp: &TopicPartition,
        new: impl FnOnce() -> SharePartition,
        f: impl FnOnce(&mut SharePartition) -> R,
    ) -> Option<R> {
        let mut map = self
            .partitions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (group.to_string(), tp.clone());
        if !map.contains_key(&key) {
            if map.len() >= MAX_SHARE_PARTITIONS {
                return None;
            }
            let kept = self
                .restored
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&key);
            map.insert(key.clone(), kept.unwrap_or_else(new));
        }
        map.get_mut(&key).map(f)
    }

    /// Runs `f` on `group`'s share-partition of `tp` if there is one (none is made).
    pub(crate) fn with_existing<R>(
        &self,
        group: &str,
        tp: &TopicPartition,
        f: impl FnOnce(&mut SharePartition) -> R,
    ) -> Option<R> {
        let key = (group.to_string(), tp.clone());
        let mut map = self
            .partitions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !map.contains_key(&key) && map.len() < MAX_SHARE_PARTITIONS {
            let kept = self
                .restored
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&key);
            if let Some(sp) = kept {
                map.insert(key.clone(), sp);
            }
        }
        map.get_mut(&key).map(f)
    }

    /// Every share-partition of `group` (used since the start, or kept) with its start offset,
    /// in partition order.
    pub(crate) fn start_offsets(&self, group: &str) -> Vec<(TopicPartition, i64)> {
        let mut out: BTreeMap<TopicPartition, i64> = BTreeMap::new();
        for map in [&self.restored, &self.partitions] {
            let map = map
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for ((g, tp), sp) in map.iter() {
                if g == group {
                    out.insert(tp.clone(), sp.start_offset());
                }
            }
        }
        out.into_iter().collect()
    }

    /// Sets `group`'s share-partition of `tp` to start at `offset`, nothing in flight (Kafka's
    /// AlterShareGroupOffsets); `false` when the broker keeps [`MAX_SHARE_PARTITIONS`] already.
    pub(crate) fn set_start(&self, group: &str, tp: &TopicPartition, offset: i64) -> bool {
        self.restored
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&(group.to_string(), tp.clone()));
        self.with_partition(
            group,
            tp,
            || SharePartition::new(offset),
            |sp| {
                *sp = SharePartition::new(offset);
            },
        )
        .is_some()
    }

    /// Forgets `group`'s share-partitions of `topic` (Kafka's DeleteShareGroupOffsets); returns
    /// them, for [`keep`](Self::keep) to remove.
    pub(crate) fn forget_group_topic(&self, group: &str, topic: &str) -> Vec<TopicPartition> {
        self.forget_where(|g, tp| g == group && tp.topic() == topic)
            .into_iter()
            .map(|(_, tp)| tp)
            .collect()
    }

    /// Forgets every share-partition of `group` (the group was deleted; Kafka deletes its
    /// share state with it); returns them, for [`keep`](Self::keep) to remove.
    pub(crate) fn forget(&self, group: &str) -> Vec<TopicPartition> {
        self.forget_where(|g, _| g == group)
            .into_iter()
            .map(|(_, tp)| tp)
            .collect()
    }

    /// Forgets every group's share-partitions of `topic` (the topic was deleted: one made
    /// again under its name is another topic, as Kafka's topic ids make it); returns them, for
    /// [`keep_keys`](Self::keep_keys) to remove.
    pub(crate) fn forget_topic(&self, topic: &str) -> Vec<(String, TopicPartition)> {
        self.forget_where(|_, tp| tp.topic() == topic)
    }

    fn forget_where(
        &self,
        gone_if: impl Fn(&str, &TopicPartition) -> bool,
    ) -> Vec<(String, TopicPartition)> {
        let mut gone: Vec<(String, TopicPartition)> = Vec::new();
        let mut take = |map: &mut HashMap<(String, TopicPartition), SharePartition>| {
            map.retain(|(g, tp), _| {
                let forget = gone_if(g, tp);
                if forget {
                    gone.push((g.clone(), tp.clone()));
                }
                !forget
            });
        };
        take(
            &mut self
                .partitions
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        take(
            &mut self
                .restored
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        gone
    }

    /// Notes the topic ids `member` of `group` was sent with its assignment (`None`: it left).
    pub(crate) fn sent_assignment(
        &self,
        group: &str,
        member: &str,
        ids: Option<Vec<(String, uuid::Uuid)>>,
    ) {
        let mut sent = self
            .sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (group.to_string(), member.to_string());
        match ids {
            Some(ids) if sent.contains_key(&key) || sent.len() < MAX_SHARE_SESSIONS => {
                sent.insert(key, ids);
            }
            _ => {
                sent.remove(&key);
            }
        }
    }

    /// Whether a topic of the assignment `member` was last sent now has another id.
    pub(crate) fn sent_ids_changed(
        &self,
        group: &str,
        member: &str,
        id_of: impl Fn(&str) -> uuid::Uuid,
    ) -> bool {
        self.sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(group.to_string(), member.to_string()))
            .is_some_and(|ids| ids.iter().any(|(name, id)| id_of(name) != *id))
    }

    /// Opens (or opens again) `member`'s session with `partitions`; the next request must
    /// carry epoch 1.
    pub(crate) fn open(
        &self,
        group: &str,
        member: &str,
        partitions: BTreeSet<TopicPartition>,
        connection: u64,
    ) -> Result<(), SessionRefusal> {
        let mut map = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (group.to_string(), member.to_string());
        if !map.contains_key(&key) && map.len() >= MAX_SHARE_SESSIONS {
            return Err(SessionRefusal::Full);
        }
        map.insert(
            key,
            ShareSession {
                epoch: 1,
                partitions,
                connection,
                topic_ids: BTreeMap::new(),
            },
        );
        Ok(())
    }

    /// Checks `epoch` against `member`'s session and moves it on; `update` changes its
    /// partitions. Returns the session's partitions after the update.
    pub(crate) fn advance(
        &self,
        group: &str,
        member: &str,
        epoch: i32,
        update: impl FnOnce(&mut BTreeSet<TopicPartition>),
    ) -> Result<BTreeSet<TopicPartition>, SessionRefusal> {
        let mut map = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let session = map
            .get_mut(&(group.to_string(), member.to_string()))
            .ok_or(SessionRefusal::NotFound)?;
        if session.epoch != epoch {
            return Err(SessionRefusal::Epoch);
        }
        session.epoch = next_epoch(session.epoch);
        update(&mut session.partitions);
        Ok(session.partitions.clone())
    }

    /// Adds `ids` (topic name to the id it was asked by) to `member`'s session, and returns
    /// all the session's (empty without a session).
    pub(crate) fn topic_ids(
        &self,
        group: &str,
        member: &str,
        ids: impl IntoIterator<Item = (String, uuid::Uuid)>,
    ) -> BTreeMap<String, uuid::Uuid> {
        let mut map = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match map.get_mut(&(group.to_string(), member.to_string())) {
            Some(session) => {
                session.topic_ids.extend(ids);
                session.topic_ids.clone()
            }
            None => BTreeMap::new(),
        }
    }

    /// Whether `member` has a session.
    pub(crate) fn has_session(&self, group: &str, member: &str) -> bool {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains_key(&(group.to_string(), member.to_string()))
    }

    /// Closes `member`'s session, if it has one, and gives back what it holds in the
    /// session's share-partitions (`release` runs on each that exists; none is made).
    /// Returns those share-partitions.
    pub(crate) fn close(
        &self,
        group: &str,
        member: &str,
        release: impl FnMut(&mut SharePartition),
    ) -> Vec<TopicPartition> {
        self.close_if(group, member, None, release)
    }

    /// [`close`](Self::close), only if the session was opened on `connection` (the member
    /// may have opened it again on another since).
    pub(crate) fn close_opened_on(
        &self,
        group: &str,
        member: &str,
        connection: u64,
        release: impl FnMut(&mut SharePartition),
    ) -> Vec<TopicPartition> {
        self.close_if(group, member, Some(connection), release)
    }

    fn close_if(
        &self,
        group: &str,
        member: &str,
        connection: Option<u64>,
        mut release: impl FnMut(&mut SharePartition),
    ) -> Vec<TopicPartition> {
        let closed = {
            let mut sessions = self
                .sessions
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let key = (group.to_string(), member.to_string());
            match (sessions.get(&key), connection) {
                (Some(s), Some(c)) if s.connection != c => None,
                _ => sessions.remove(&key),
            }
        };
        closed
            .map(|s| s.partitions)
            .unwrap_or_default()
            .into_iter()
            .filter(|tp| self.with_existing(group, tp, &mut release).is_some())
            .collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_moves_one_epoch_at_a_time_and_closes() {
        let s = ShareState::default();
        assert_eq!(
            s.advance("g", "m", 1, |_| {}),
            Err(SessionRefusal::NotFound)
        );
        s.open("g", "m", [TopicPartition::new("t", 0)].into(), 1)
            .unwrap();
        assert_eq!(s.advance("g", "m", 2, |_| {}), Err(SessionRefusal::Epoch));
        let parts = s
            .advance("g", "m", 1, |p| {
                p.insert(TopicPartition::new("t", 1));
            })
            .unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(s.advance("g", "m", 1, |_| {}), Err(SessionRefusal::Epoch));
        assert!(s.advance("g", "m", 2, |_| {}).is_ok());
        let mut released = 0;
        s.close("g", "m", |_| released += 1);
        assert_eq!(released, 0, "no share-partition exists to release in");
        assert!(!s.has_session("g", "m"));
        assert_eq!(
            next_epoch(i32::MAX),
            1,
            "the epoch wraps to 1, never 0 or -1"
        );
    }
}
