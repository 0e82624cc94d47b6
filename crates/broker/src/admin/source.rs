//! Where the tool reads and writes groups: a running broker through Kafka's protocol, or a
//! data directory through the offset store. Both answer the same questions; what a data
//! directory cannot know (members, the log) it answers as "none" or "unknown".

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use coordinator_core::{
    offsets_of, CommitFence, CommittedOffsets, GroupRecord, OffsetAndMetadata, OffsetMap,
    OffsetStore, TopicPartition,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::client::Client;
use super::error::AdminError;
use crate::api::consumer_protocol::{assignment_partitions, subscription_topics, CONSUMER};
use crate::store::StoreConfig;

/// Kafka's state of a group that does not exist.
pub(crate) const DEAD: &str = "Dead";
/// The protocol type ListGroups gives a share group (KIP-932).
pub(crate) const SHARE: &str = "share";
/// Kafka's state of a group without members.
pub(crate) const EMPTY: &str = "Empty";
/// Kafka's state of a group whose members all have their assignment.
pub(crate) const STABLE: &str = "Stable";

/// How many groups one DescribeGroups asks about.
const DESCRIBE_BATCH: usize = 64;

/// A group as ListGroups tells it.
#[derive(Clone, Debug)]
pub(crate) struct Listed {
    pub(crate) group: String,
    pub(crate) state: Option<String>,
    pub(crate) protocol_type: Option<String>,
}

/// A member as DescribeGroups tells it.
#[derive(Clone, Debug)]
pub(crate) struct Member {
    pub(crate) id: String,
    pub(crate) instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) host: String,
    /// Its partitions, sorted (empty if it has none, or the protocol is not `consumer`).
    pub(crate) assignment: Vec<TopicPartition>,
    /// The topics it subscribes to, when known (a Stable consumer group).
    pub(crate) subscription: Option<Vec<String>>,
    /// A consumer-protocol member's (KIP-848) epochs and target, from ConsumerGroupDescribe.
    pub(crate) epochs: Option<MemberEpochs>,
}

/// What ConsumerGroupDescribe adds for a consumer-protocol member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MemberEpochs {
    /// The member epoch (its current assignment's).
    pub(crate) current: i32,
    /// The group's target assignment epoch.
    pub(crate) target_epoch: i32,
    /// The member's target assignment, sorted.
    pub(crate) target: Vec<TopicPartition>,
}

/// A group as DescribeGroups tells it; state `Dead` for a group that does not exist.
#[derive(Clone, Debug)]
pub(crate) struct GroupInfo {
    pub(crate) group: String,
    pub(crate) state: String,
    pub(crate) protocol_type: String,
    /// The assignment strategy (set by the broker only while Stable).
    pub(crate) protocol: String,
    pub(crate) members: Vec<Member>,
    /// A consumer-protocol group's (KIP-848) group epoch and target assignment epoch.
    pub(crate) epochs: Option<(i32, i32)>,
}

impl GroupInfo {
    pub(crate) fn exists(&self) -> bool {
        self.state != DEAD
    }

    pub(crate) fn inactive(&self) -> bool {
        self.state == EMPTY || self.state == DEAD
    }
}

/// A broker node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    pub(crate) id: i32,
    pub(crate) host: String,
    pub(crate) port: i32,
}

impl Node {
    fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Which offset of a partition's log to look up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LogPoint {
    Earliest,
    Latest,
    /// The first offset whose record's timestamp is at or after this (epoch ms).
    Timestamp(i64),
}

impl LogPoint {
    fn wire(self) -> i64 {
        match self {
            LogPoint::Earliest => -2,
            LogPoint::Latest => -1,
            LogPoint::Timestamp(ts) => ts,
        }
    }
}

/// A broker or a data directory.
#[derive(Debug)]
pub(crate) enum Source {
    Broker(Box<BrokerSource>),
    DataDir(DataDirSource),
}

impl Source {
    /// Whether partition logs can be asked (a data directory has none).
    pub(crate) fn has_log(&self) -> bool {
        matches!(self, Source::Broker(_))
    }

    pub(crate) async fn list_groups(&mut self) -> Result<Vec<Listed>, AdminError> {
        match self {
            Source::Broker(b) => b.list_groups().await,
            Source::DataDir(d) => d.list_groups().await,
        }
    }

    /// One answer per group, in order.
    pub(crate) async fn describe_groups(
        &mut self,
        groups: &[String],
    ) -> Result<Vec<GroupInfo>, AdminError> {
        let mut all = Vec::with_capacity(groups.len());
        for batch in groups.chunks(DESCRIBE_BATCH) {
            match self {
                Source::Broker(b) => all.extend(b.describe_groups(batch).await?),
                Source::DataDir(d) => all.extend(d.describe_groups(batch).await?),
            }
        }
        Ok(all)
    }

    /// The node coordinating `group`, if there is one.
    pub(crate) async fn coordinator(&mut self, group: &str) -> Result<Option<Node>, AdminError> {
        match self {
            Source::Broker(b) => b.coordinator(group).await.map(Some),
            Source::DataDir(_) => Ok(None),
        }
    }

    pub(crate) async fn committed(&mut self, group: &str) -> Result<OffsetMap, AdminError> {
        Ok(offsets_of(&self.committed_with_metadata(group).await?))
    }

    /// The group's committed offsets with the metadata they were committed with (empty from
    /// a data directory whose store keeps offsets only).
    pub(crate) async fn committed_with_metadata(
        &mut self,
        group: &str,
    ) -> Result<CommittedOffsets, AdminError> {
        match self {
            Source::Broker(b) => b.committed(group).await,
            Source::DataDir(d) => Ok(d.store.list_with_metadata(group).await?),
        }
    }

    /// A share group's start offsets (KIP-932), which the describe shows where a consumer
    /// group's committed offsets are (none from a data directory, which keeps no share group).
    pub(crate) async fn share_start_offsets(
        &mut self,
        group: &str,
    ) -> Result<CommittedOffsets, AdminError> {
        match self {
            Source::Broker(b) => b.share_start_offsets(group).await,
            Source::DataDir(_) => Ok(CommittedOffsets::new()),
        }
    }

    /// Partition counts of the topics that exist, or `None` if this source knows no topics.
    pub(crate) async fn topic_partitions(
        &mut self,
        topics: &[String],
    ) -> Result<Option<BTreeMap<String, u32>>, AdminError> {
        match self {
            Source::Broker(b) => b.topic_partitions(topics).await.map(Some),
            Source::DataDir(_) => Ok(None),
        }
    }

    /// The offsets at `point` of the partitions the log could answer for (others are left
    /// out: unknown, or no record at or after the timestamp). Empty for a data directory.
    pub(crate) async fn log_offsets(
        &mut self,
        partitions: &[TopicPartition],
        point: LogPoint,
    ) -> Result<BTreeMap<TopicPartition, i64>, AdminError> {
        match self {
            Source::Broker(b) => b.log_offsets(partitions, point).await,
            Source::DataDir(_) => Ok(BTreeMap::new()),
        }
    }

    /// Commits `offsets` for `group` as an admin (no generation, no member): all or none.
    pub(crate) async fn commit(
        &mut self,
        group: &str,
        offsets: &OffsetMap,
    ) -> Result<(), AdminError> {
        match self {
            Source::Broker(b) => b.commit(group, offsets).await,
            Source::DataDir(d) => Ok(d.store.commit(group, offsets, CommitFence::none()).await?),
        }
    }

    /// Deletes each group; one result per group, in order.
    pub(crate) async fn delete_groups(
        &mut self,
        groups: &[String],
    ) -> Result<Vec<(String, Result<(), AdminError>)>, AdminError> {
        match self {
            Source::Broker(b) => b.delete_groups(groups).await,
            Source::DataDir(d) => {
                let mut results = Vec::new();
                for g in groups {
                    d.store.delete(g, None, CommitFence::none()).await?;
                    if d.store.keeps_groups() {
                        // Kafka's DeleteGroups removes the group's metadata with its offsets.
                        d.store.write_group(g, None, CommitFence::none()).await?;
                    }
                    results.push((g.clone(), Ok(())));
                }
                Ok(results)
            }
        }
    }

    /// Deletes `group`'s offsets of `partitions`; a Kafka error code per partition (0: done).
    pub(crate) async fn delete_offsets(
        &mut self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, i16)>, AdminError> {
        match self {
            Source::Broker(b) => b.delete_offsets(group, partitions).await,
            Source::DataDir(d) => {
                d.store
                    .delete(group, Some(partitions), CommitFence::none())
                    .await?;
                Ok(partitions.iter().map(|tp| (tp.clone(), 0)).collect())
            }
        }
    }
}

fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

fn topic_name(name: &str) -> TopicName {
    TopicName(s(name))
}

fn broker_error(api: &'static str, context: impl Into<String>, code: i16) -> AdminError {
    AdminError::Broker {
        api,
        context: Some(context.into()),
        code,
    }
}

/// Partitions grouped by topic, in order, as the wire wants them.
fn by_topic(partitions: &[TopicPartition]) -> BTreeMap<&str, Vec<i32>> {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        topics
            .entry(tp.topic())
            .or_default()
            .push(i32::try_from(tp.partition()).unwrap_or(i32::MAX));
    }
    topics
}

/// A running broker, through its protocol. Connections are opened as needed: the bootstrap
/// broker, each group's coordinator, each partition's leader (for this project's single
/// broker, all one connection).
#[derive(Debug)]
pub(crate) struct BrokerSource {
    timeout: Duration,
    bootstrap: String,
    clients: HashMap<String, Client>,
    coordinators: HashMap<String, Node>,
}

impl BrokerSource {
    /// Connects to the first bootstrap address that answers.
    pub(crate) async fn connect(
        bootstrap: &[String],
        timeout: Duration,
    ) -> Result<BrokerSource, AdminError> {
        let mut last = None;
        for address in bootstrap {
            match Client::connect(address, timeout).await {
                Ok(client) => {
                    let mut clients = HashMap::new();
                    clients.insert(address.clone(), client);
                    return Ok(BrokerSource {
                        timeout,
                        bootstrap: address.clone(),
                        clients,
                        coordinators: HashMap::new(),
                    });
                }
                Err(e @ AdminError::Unreachable { .. }) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| AdminError::usage("Option --bootstrap-server needs HOST:PORT")))
    }

    async fn client(&mut self, address: &str) -> Result<&mut Client, AdminError> {
        if !self.clients.contains_key(address) {
            let client = Client::connect(address, self.timeout).await?;
            self.clients.insert(address.to_string(), client);
        }
        self.clients
            .get_mut(address)
            .ok_or_else(|| AdminError::Unreachable {
                address: address.to_string(),
                reason: "the connection was lost".into(),
            })
    }

    async fn bootstrap_client(&mut self) -> Result<&mut Client, AdminError> {
        let address = self.bootstrap.clone();
        self.client(&address).await
    }

    async fn coordinator(&mut self, group: &str) -> Result<Node, AdminError> {
        if let Some(node) = self.coordinators.get(group) {
            return Ok(node.clone());
        }
        let client = self.bootstrap_client().await?;
        let request = FindCoordinatorRequest::default()
            .with_key(s(group))
            .with_key_type(0);
        let (r, _) = client.call(&request).await?;
        if r.error_code != 0 {
            return Err(broker_error(
                "FindCoordinator",
                format!("group '{group}'"),
                r.error_code,
            ));
        }
        let node = Node {
            id: r.node_id.0,
            host: r.host.to_string(),
            port: r.port,
        };
        self.coordinators.insert(group.to_string(), node.clone());
        Ok(node)
    }

    async fn coordinator_client(&mut self, group: &str) -> Result<&mut Client, AdminError> {
        // Connections are kept by address: the bootstrap one is reused when the
        // coordinator is the broker it reached.
        let address = self.coordinator(group).await?.address();
        self.client(&address).await
    }

    /// Every broker of the cluster, by id.
    async fn brokers(&mut self) -> Result<BTreeMap<i32, Node>, AdminError> {
        let client = self.bootstrap_client().await?;
        let request = MetadataRequest::default()
            .with_topics(Some(Vec::new()))
            .with_allow_auto_topic_creation(false);
        let (r, _) = client.call(&request).await?;
        Ok(r.brokers
            .iter()
            .map(|b| {
                (
                    b.node_id.0,
                    Node {
                        id: b.node_id.0,
                        host: b.host.to_string(),
                        port: b.port,
                    },
                )
            })
            .collect())
    }

    /// ListGroups on every broker (each lists the groups it coordinates), consumer groups
    /// only (protocol type `consumer`, or none for groups known by their offsets), sorted.
    async fn list_groups(&mut self) -> Result<Vec<Listed>, AdminError> {
        let mut listed = BTreeMap::new();
        for node in self.brokers().await?.into_values() {
            let address = node.address();
            let client = self.client(&address).await?;
            let (r, _) = client.call(&ListGroupsRequest::default()).await?;
            if r.error_code != 0 {
                return Err(broker_error(
                    "ListGroups",
                    format!("broker {address}"),
                    r.error_code,
                ));
            }
            for g in r.groups {
                let protocol_type = g.protocol_type.to_string();
                if !(protocol_type.is_empty()
                    || protocol_type == CONSUMER
                    || protocol_type == SHARE)
                {
                    continue;
                }
                let state = (!g.group_state.is_empty()).then(|| g.group_state.to_string());
                listed.insert(
                    g.group_id.to_string(),
                    Listed {
                        group: g.group_id.to_string(),
                        state,
                        protocol_type: Some(protocol_type),
                    },
                );
            }
        }
        Ok(listed.into_values().collect())
    }

    async fn describe_groups(&mut self, groups: &[String]) -> Result<Vec<GroupInfo>, AdminError> {
        let mut answers: HashMap<String, GroupInfo> = HashMap::new();
        // One request per coordinator, for the groups it coordinates.
        let mut by_coordinator: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for g in groups {
            let node = self.coordinator(g).await?;
            by_coordinator
                .entry(node.address())
                .or_default()
                .push(g.clone());
        }
        for names in by_coordinator.into_values() {
            let Some(first) = names.first() else { continue };
            let client = self.coordinator_client(first).await?;
            let request = DescribeGroupsRequest::default()
                .with_groups(names.iter().map(|g| GroupId(s(g))).collect());
            let (r, _) = client.call(&request).await?;
            for d in r.groups {
                let group = d.group_id.to_string();
                let info = match d.error_code {
                    0 => described(d),
                    69 => GroupInfo {
                        group: group.clone(),
                        state: DEAD.into(),
                        protocol_type: String::new(),
                        protocol: String::new(),
                        members: Vec::new(),
                        epochs: None,
                    },
                    code => {
                        return Err(broker_error(
                            "DescribeGroups",
                            format!("group '{group}'"),
                            code,
                        ))
                    }
                };
                answers.insert(group, info);
            }
            // A consumer-protocol group (KIP-848) is "Dead" to DescribeGroups, as in Kafka 4:
            // ask ConsumerGroupDescribe about those, as Kafka's Admin client does.
            let dead = still_dead(&names, &answers);
            if !dead.is_empty() && client.supports(ApiKey::ConsumerGroupDescribe) {
                let request = ConsumerGroupDescribeRequest::default()
                    .with_group_ids(dead.iter().map(|g| GroupId(s(g))).collect());
                let (r, _) = client.call(&request).await?;
                for d in r.groups {
                    if d.error_code == 0 {
                        answers.insert(d.group_id.to_string(), consumer_described(d));
                    }
                }
            }
            // A share group (KIP-932) is unknown to both: ShareGroupDescribe.
            let dead = still_dead(&names, &answers);
            if !dead.is_empty() && client.supports(ApiKey::ShareGroupDescribe) {
                let request = ShareGroupDescribeRequest::default()
                    .with_group_ids(dead.iter().map(|g| GroupId(s(g))).collect());
                let (r, _) = client.call(&request).await?;
                for d in r.groups {
                    if d.error_code == 0 {
                        answers.insert(d.group_id.to_string(), share_described(d));
                    }
                }
            }
        }
        groups
            .iter()
            .map(|g| {
                answers.get(g).cloned().ok_or_else(|| AdminError::Protocol {
                    address: self.bootstrap.clone(),
                    api: "DescribeGroups",
                    reason: format!("the answer leaves out group '{g}'"),
                })
            })
            .collect()
    }

    /// A share group's start offsets (its share-partition start offsets, KIP-932) as the
    /// offsets the group "committed": what it has done with stops below each.
    async fn share_start_offsets(&mut self, group: &str) -> Result<CommittedOffsets, AdminError> {
        let client = self.coordinator_client(group).await?;
        let mut offsets = CommittedOffsets::new();
        if !client.supports(ApiKey::DescribeShareGroupOffsets) {
            return Ok(offsets);
        }
        let request = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
            describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default()
                .with_group_id(GroupId(s(group)))
                .with_topics(None),
        ]);
        let (r, _) = client.call(&request).await?;
        for g in r.groups {
            if g.error_code != 0 {
                return Err(broker_error(
                    "DescribeShareGroupOffsets",
                    format!("group '{group}'"),
                    g.error_code,
                ));
            }
            for t in g.topics {
                for p in t.partitions {
                    let tp = u32::try_from(p.partition_index)
                        .map(|i| TopicPartition::new(t.topic_name.as_str(), i));
                    if let (Ok(tp), true) = (tp, p.error_code == 0 && p.start_offset >= 0) {
                        offsets.insert(tp, OffsetAndMetadata::new(p.start_offset));
                    }
                }
            }
        }
        Ok(offsets)
    }

    async fn committed(&mut self, group: &str) -> Result<CommittedOffsets, AdminError> {
        let client = self.coordinator_client(group).await?;
        // Null topics: every partition the group has committed (v2+).
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(None);
        let (r, _) = client.call(&request).await?;
        if r.error_code != 0 {
            return Err(broker_error(
                "OffsetFetch",
                format!("group '{group}'"),
                r.error_code,
            ));
        }
        let mut offsets = CommittedOffsets::new();
        for t in r.topics {
            for p in t.partitions {
                let tp = u32::try_from(p.partition_index)
                    .map(|i| TopicPartition::new(t.name.as_str(), i));
                if p.error_code != 0 {
                    return Err(broker_error(
                        "OffsetFetch",
                        format!("group '{group}', {}-{}", t.name.as_str(), p.partition_index),
                        p.error_code,
                    ));
                }
                if let (Ok(tp), true) = (tp, p.committed_offset >= 0) {
                    let metadata = p
                        .metadata
                        .as_ref()
                        .map(|m| m.to_string())
                        .unwrap_or_default();
                    let epoch = Some(p.committed_leader_epoch).filter(|&e| e >= 0);
                    offsets.insert(
                        tp,
                        OffsetAndMetadata::new(p.committed_offset)
                            .with_metadata(metadata)
                            .with_leader_epoch(epoch),
                    );
                }
            }
        }
        Ok(offsets)
    }

    /// Metadata of `topics`: partition count and each partition's leader, for those that
    /// exist. Never creates a topic.
    async fn metadata(
        &mut self,
        topics: &[String],
    ) -> Result<(BTreeMap<String, Vec<(u32, i32)>>, BTreeMap<i32, Node>), AdminError> {
        let client = self.bootstrap_client().await?;
        let request = MetadataRequest::default()
            .with_topics(Some(
                topics
                    .iter()
                    .map(|t| {
                        metadata_request::MetadataRequestTopic::default()
                            .with_name(Some(topic_name(t)))
                    })
                    .collect(),
            ))
            .with_allow_auto_topic_creation(false);
        let (r, _) = client.call(&request).await?;
        let brokers = r
            .brokers
            .iter()
            .map(|b| {
                (
                    b.node_id.0,
                    Node {
                        id: b.node_id.0,
                        host: b.host.to_string(),
                        port: b.port,
                    },
                )
            })
            .collect();
        let mut found = BTreeMap::new();
        for t in r.topics {
            let Some(name) = t.name else { continue };
            match t.error_code {
                0 => {}
                // UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION: it does not exist.
                3 | 17 => continue,
                code => {
                    return Err(broker_error(
                        "Metadata",
                        format!("topic '{}'", name.as_str()),
                        code,
                    ))
                }
            }
            let partitions = t
                .partitions
                .iter()
                .filter_map(|p| Some((u32::try_from(p.partition_index).ok()?, p.leader_id.0)))
                .collect();
            found.insert(name.to_string(), partitions);
        }
        Ok((found, brokers))
    }

    async fn topic_partitions(
        &mut self,
        topics: &[String],
    ) -> Result<BTreeMap<String, u32>, AdminError> {
        let (found, _) = self.metadata(topics).await?;
        Ok(found
            .into_iter()
            .map(|(t, ps)| {
                let count = ps.iter().map(|(p, _)| p + 1).max().unwrap_or(0);
                (t, count)
            })
            .collect())
    }

    async fn log_offsets(
        &mut self,
        partitions: &[TopicPartition],
        point: LogPoint,
    ) -> Result<BTreeMap<TopicPartition, i64>, AdminError> {
        let mut answers = BTreeMap::new();
        if partitions.is_empty() {
            return Ok(answers);
        }
        let topics: Vec<String> = by_topic(partitions).keys().map(|t| t.to_string()).collect();
        let (meta, brokers) = self.metadata(&topics).await?;
        // Each partition is asked of its leader.
        let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
        for tp in partitions {
            let leader = meta
                .get(tp.topic())
                .and_then(|ps| ps.iter().find(|(p, _)| *p == tp.partition()))
                .map(|(_, leader)| *leader);
            if let Some(leader) = leader.filter(|l| brokers.contains_key(l)) {
                by_leader.entry(leader).or_default().push(tp.clone());
            }
        }
        for (leader, tps) in by_leader {
            let Some(node) = brokers.get(&leader) else {
                continue;
            };
            let address = node.address();
            let client = self.client(&address).await?;
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(
                    by_topic(&tps)
                        .into_iter()
                        .map(|(topic, ps)| {
                            list_offsets_request::ListOffsetsTopic::default()
                                .with_name(topic_name(topic))
                                .with_partitions(
                                    ps.into_iter()
                                        .map(|p| {
                                            list_offsets_request::ListOffsetsPartition::default()
                                                .with_partition_index(p)
                                                .with_timestamp(point.wire())
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
            let (r, _) = client.call(&request).await?;
            for t in r.topics {
                for p in t.partitions {
                    if p.error_code != 0 || p.offset < 0 {
                        continue;
                    }
                    if let Ok(index) = u32::try_from(p.partition_index) {
                        answers.insert(TopicPartition::new(t.name.as_str(), index), p.offset);
                    }
                }
            }
        }
        Ok(answers)
    }

    async fn commit(&mut self, group: &str, offsets: &OffsetMap) -> Result<(), AdminError> {
        let mut topics: BTreeMap<&str, Vec<(i32, i64)>> = BTreeMap::new();
        for (tp, &offset) in offsets {
            topics
                .entry(tp.topic())
                .or_default()
                .push((i32::try_from(tp.partition()).unwrap_or(i32::MAX), offset));
        }
        // Generation -1 and no member: an admin's commit, which Kafka accepts for Empty
        // (or unknown) groups only.
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(
                topics
                    .into_iter()
                    .map(|(topic, ps)| {
                        offset_commit_request::OffsetCommitRequestTopic::default()
                            .with_name(topic_name(topic))
                            .with_partitions(
                                ps.into_iter()
                                    .map(|(p, o)| {
                                        offset_commit_request::OffsetCommitRequestPartition::default()
                                            .with_partition_index(p)
                                            .with_committed_offset(o)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let client = self.coordinator_client(group).await?;
        let (r, _) = client.call(&request).await?;
        for t in r.topics {
            for p in t.partitions {
                if p.error_code != 0 {
                    return Err(broker_error(
                        "OffsetCommit",
                        format!("group '{group}', {}-{}", t.name.as_str(), p.partition_index),
                        p.error_code,
                    ));
                }
            }
        }
        Ok(())
    }

    async fn delete_groups(
        &mut self,
        groups: &[String],
    ) -> Result<Vec<(String, Result<(), AdminError>)>, AdminError> {
        let mut results = Vec::new();
        for g in groups {
            let client = self.coordinator_client(g).await?;
            let request = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(g))]);
            let (r, _) = client.call(&request).await?;
            let code = r
                .results
                .iter()
                .find(|x| x.group_id.as_str() == g)
                .map_or(-1, |x| x.error_code);
            let result = match code {
                0 => Ok(()),
                69 => Err(AdminError::GroupNotFound { group: g.clone() }),
                code => Err(broker_error("DeleteGroups", format!("group '{g}'"), code)),
            };
            results.push((g.clone(), result));
        }
        Ok(results)
    }

    async fn delete_offsets(
        &mut self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, i16)>, AdminError> {
        let request = OffsetDeleteRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(
                by_topic(partitions)
                    .into_iter()
                    .map(|(topic, ps)| {
                        offset_delete_request::OffsetDeleteRequestTopic::default()
                            .with_name(topic_name(topic))
                            .with_partitions(
                                ps.into_iter()
                                    .map(|p| {
                                        offset_delete_request::OffsetDeleteRequestPartition::default()
                                            .with_partition_index(p)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let client = self.coordinator_client(group).await?;
        let (r, _) = client.call(&request).await?;
        match r.error_code {
            0 => {}
            69 => {
                return Err(AdminError::GroupNotFound {
                    group: group.to_string(),
                })
            }
            code => {
                return Err(broker_error(
                    "OffsetDelete",
                    format!("group '{group}'"),
                    code,
                ))
            }
        }
        let mut codes: HashMap<(String, i32), i16> = HashMap::new();
        for t in r.topics {
            for p in t.partitions {
                codes.insert((t.name.to_string(), p.partition_index), p.error_code);
            }
        }
        Ok(partitions
            .iter()
            .map(|tp| {
                let key = (
                    tp.topic().to_string(),
                    i32::try_from(tp.partition()).unwrap_or(i32::MAX),
                );
                (tp.clone(), codes.get(&key).copied().unwrap_or(0))
            })
            .collect())
    }
}

fn described(d: describe_groups_response::DescribedGroup) -> GroupInfo {
    let consumer = d.protocol_type.as_str() == CONSUMER;
    let members = d
        .members
        .into_iter()
        .map(|m| {
            let mut assignment = if consumer {
                assignment_partitions(&m.member_assignment).unwrap_or_default()
            } else {
                Vec::new()
            };
            assignment.sort();
            let subscription = (consumer && !m.member_metadata.is_empty())
                .then(|| subscription_topics(&m.member_metadata))
                .flatten();
            Member {
                id: m.member_id.to_string(),
                instance_id: m.group_instance_id.map(|i| i.to_string()),
                client_id: m.client_id.to_string(),
                host: m.client_host.to_string(),
                assignment,
                subscription,
                epochs: None,
            }
        })
        .collect();
    GroupInfo {
        group: d.group_id.to_string(),
        state: d.group_state.to_string(),
        protocol_type: d.protocol_type.to_string(),
        protocol: d.protocol_data.to_string(),
        members,
        epochs: None,
    }
}

/// A consumer-protocol group as ConsumerGroupDescribe tells it: its assignor as the strategy,
/// members with their current and target assignments (topics by the names the answer gives).
fn consumer_described(d: consumer_group_describe_response::DescribedGroup) -> GroupInfo {
    let partitions = |a: &consumer_group_describe_response::Assignment| {
        let mut out: Vec<TopicPartition> = a
            .topic_partitions
            .iter()
            .flat_map(|t| {
                t.partitions.iter().filter_map(move |&p| {
                    u32::try_from(p)
                        .ok()
                        .map(|p| TopicPartition::new(t.topic_name.as_str(), p))
                })
            })
            .collect();
        out.sort();
        out
    };
    let members = d
        .members
        .iter()
        .map(|m| Member {
            id: m.member_id.to_string(),
            instance_id: m.instance_id.as_ref().map(|i| i.to_string()),
            client_id: m.client_id.to_string(),
            host: m.client_host.to_string(),
            assignment: partitions(&m.assignment),
            subscription: Some(
                m.subscribed_topic_names
                    .iter()
                    .map(|t| t.to_string())
                    .collect(),
            ),
            epochs: Some(MemberEpochs {
                current: m.member_epoch,
                target_epoch: d.assignment_epoch,
                target: partitions(&m.target_assignment),
            }),
        })
        .collect();
    GroupInfo {
        group: d.group_id.to_string(),
        state: d.group_state.to_string(),
        protocol_type: CONSUMER.to_string(),
        protocol: d.assignor_name.to_string(),
        members,
        epochs: Some((d.group_epoch, d.assignment_epoch)),
    }
}

/// The groups of `names` the answers so far say do not exist (another kind's API may know
/// them).
fn still_dead(names: &[String], answers: &HashMap<String, GroupInfo>) -> Vec<String> {
    names
        .iter()
        .filter(|g| answers.get(*g).is_some_and(|i| !i.exists()))
        .cloned()
        .collect()
}

/// A share group as ShareGroupDescribe tells it: its assignor as the strategy, members with
/// their assignments (a partition may have several).
fn share_described(d: share_group_describe_response::DescribedGroup) -> GroupInfo {
    let members = d
        .members
        .iter()
        .map(|m| {
            let mut assignment: Vec<TopicPartition> = m
                .assignment
                .topic_partitions
                .iter()
                .flat_map(|t| {
                    t.partitions.iter().filter_map(move |&p| {
                        u32::try_from(p)
                            .ok()
                            .map(|p| TopicPartition::new(t.topic_name.as_str(), p))
                    })
                })
                .collect();
            assignment.sort();
            Member {
                id: m.member_id.to_string(),
                instance_id: None,
                client_id: m.client_id.to_string(),
                host: m.client_host.to_string(),
                assignment,
                subscription: Some(
                    m.subscribed_topic_names
                        .iter()
                        .map(|t| t.to_string())
                        .collect(),
                ),
                epochs: None,
            }
        })
        .collect();
    GroupInfo {
        group: d.group_id.to_string(),
        state: d.group_state.to_string(),
        protocol_type: SHARE.to_string(),
        protocol: d.assignor_name.to_string(),
        members,
        epochs: Some((d.group_epoch, d.assignment_epoch)),
    }
}

/// A data directory's offsets, opened through its store — the group log if `groups/` is
/// there, else `offsets.json` (which owns the directory while open: a running broker's lock
/// refuses the tool, and the tool's refuses a broker). A log with an `offsets.json` beside it
/// (an import a broker did not finish) is opened as a broker opens it: the import is
/// finished first.
pub(crate) struct DataDirSource {
    store: Arc<dyn OffsetStore>,
}

impl fmt::Debug for DataDirSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataDirSource").finish_non_exhaustive()
    }
}

impl DataDirSource {
    pub(crate) async fn open(dir: &Path) -> Result<DataDirSource, AdminError> {
        let is_dir = tokio::fs::metadata(dir).await.is_ok_and(|m| m.is_dir());
        if !is_dir {
            return Err(AdminError::DataDirMissing {
                path: dir.to_path_buf(),
            });
        }
        let Some(config) = StoreConfig::detect(dir).await else {
            return Err(AdminError::DataDirEmpty {
                path: dir.to_path_buf(),
            });
        };
        let store = config
            .open()
            .await
            .map_err(|source| AdminError::DataDirUnavailable {
                path: dir.to_path_buf(),
                source,
            })?;
        Ok(DataDirSource { store })
    }

    /// The group records the store keeps, by group (none from a store of offsets only).
    async fn records(&self) -> Result<BTreeMap<String, GroupRecord>, AdminError> {
        if !self.store.keeps_groups() {
            return Ok(BTreeMap::new());
        }
        Ok(self
            .store
            .load_groups()
            .await?
            .into_iter()
            .map(|r| (r.group_id.clone(), r))
            .collect())
    }

    /// Groups known by their offsets or by their record; consumer groups only (a record's
    /// protocol type `consumer`, or none), as ListGroups answers. Sorted.
    async fn list_groups(&mut self) -> Result<Vec<Listed>, AdminError> {
        let mut records = self.records().await?;
        let mut names: Vec<String> = self.store.groups().await?;
        names.extend(records.keys().cloned());
        names.sort();
        names.dedup();
        Ok(names
            .into_iter()
            .filter_map(|group| {
                let protocol_type = records.remove(&group).map(|r| r.protocol_type);
                if protocol_type
                    .as_deref()
                    .is_some_and(|p| !p.is_empty() && p != CONSUMER)
                {
                    return None;
                }
                Some(Listed {
                    group,
                    // Nothing runs on the directory: no group has members.
                    state: Some(EMPTY.into()),
                    protocol_type,
                })
            })
            .collect())
    }

    async fn describe_groups(&mut self, groups: &[String]) -> Result<Vec<GroupInfo>, AdminError> {
        let records = self.records().await?;
        let mut infos = Vec::with_capacity(groups.len());
        for g in groups {
            let record = records.get(g);
            let exists = record.is_some() || !self.store.list(g).await?.is_empty();
            infos.push(GroupInfo {
                group: g.clone(),
                state: if exists { EMPTY } else { DEAD }.into(),
                protocol_type: record.map(|r| r.protocol_type.clone()).unwrap_or_default(),
                protocol: record.and_then(|r| r.protocol.clone()).unwrap_or_default(),
                members: Vec::new(),
                epochs: None,
            });
        }
        Ok(infos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordinator_core::{Generation, GroupKind, GroupState};
    use offset_store::LogStore;

    /// A group the log knows by its record only (a Stable group that never committed) is
    /// listed and described from the record, and deleting it removes the record too.
    #[tokio::test]
    async fn a_log_directory_knows_groups_by_their_records_too() {
        let dir = tempfile::tempdir().unwrap();
        let groups = dir.path().join(crate::GROUPS_DIR);
        std::fs::create_dir(&groups).unwrap();
        {
            let log = LogStore::open_async(&groups).await.unwrap();
            let record = |id: &str, protocol_type: &str| GroupRecord {
                group_id: id.to_string(),
                kind: GroupKind::Classic,
                generation: Generation::new(3),
                state: GroupState::Stable,
                protocol_type: protocol_type.to_string(),
                protocol: Some("range".to_string()),
                leader: None,
                members: Vec::new(),
            };
            for r in [record("r", CONSUMER), record("connect", "connect")] {
                log.write_group(&r.group_id.clone(), Some(&r), CommitFence::none())
                    .await
                    .unwrap();
            }
            let offsets = OffsetMap::from([(TopicPartition::new("t", 0), 4)]);
            log.commit("o", &offsets, CommitFence::none())
                .await
                .unwrap();
        }
        let mut source = Source::DataDir(DataDirSource::open(dir.path()).await.unwrap());
        let listed: Vec<_> = source
            .list_groups()
            .await
            .unwrap()
            .into_iter()
            .map(|l| (l.group, l.protocol_type))
            .collect();
        assert_eq!(
            listed,
            [
                ("o".to_string(), None),
                ("r".to_string(), Some(CONSUMER.to_string()))
            ]
        );
        let described = source
            .describe_groups(&["r".to_string(), "gone".to_string()])
            .await
            .unwrap();
        assert_eq!(
            described
                .iter()
                .map(|d| (
                    d.state.as_str(),
                    d.protocol_type.as_str(),
                    d.protocol.as_str()
                ))
                .collect::<Vec<_>>(),
            [(EMPTY, CONSUMER, "range"), (DEAD, "", "")]
        );
        source.delete_groups(&["r".to_string()]).await.unwrap();
        let listed = source.list_groups().await.unwrap();
        assert_eq!(
            listed.iter().map(|l| l.group.as_str()).collect::<Vec<_>>(),
            ["o"]
        );
    }
}
