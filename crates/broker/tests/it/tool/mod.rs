//! The `groups` tool's test kit: the broker binary on a free loopback port (stopped by
//! SIGTERM, killed if a test panics), the tool binary run to completion, and group members
//! driven through the raw protocol so their ids and assignments are known. Every wait is
//! bounded by `common::BOUND`.

#![allow(
    dead_code,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic
)]

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as WireTp;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use tokio::process::{Child, Command};

use crate::common::{batch, bounded, produce, record, topic_name, Client};

/// The broker binary, serving on 127.0.0.1:<free port>.
pub struct Broker {
    child: Child,
    pub addr: SocketAddr,
}

impl Broker {
    /// Starts the binary with `args` (besides a free loopback port, no rebalance delay and no
    /// retention by time)
    /// and waits for its `listening on` line.
    pub async fn start(args: &[&str]) -> Broker {
        let mut command = Command::new(env!("CARGO_BIN_EXE_broker"));
        command
            .args([
                "--listen",
                "127.0.0.1:0",
                "--group-initial-rebalance-delay-ms",
                "0",
                // The tests stamp records in 1970: the 7-day default would delete them.
                "--log-retention-ms",
                "-1",
            ])
            .args(args)
            .env("RUST_LOG", "warn")
            .stderr(Stdio::null());
        let (child, addr, _) = crate::common::spawn_listening(command).await;
        Broker { child, addr }
    }

    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    pub async fn client(&self, client_id: &'static str) -> Client {
        let mut c = Client::connect(self.addr).await;
        c.client_id = client_id;
        c
    }

    /// SIGTERM, then waits (bounded) for exit 0.
    pub async fn stop(mut self) {
        let pid = self.child.id().expect("running").to_string();
        let status = bounded(
            "kill",
            Command::new("kill").args(["-s", "TERM", &pid]).status(),
        )
        .await
        .expect("kill runs");
        assert!(status.success());
        let status = bounded("broker exit", self.child.wait())
            .await
            .expect("wait");
        assert_eq!(status.code(), Some(0), "the broker stops cleanly");
    }
}

/// What one run of the tool did.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The one error line; panics unless the run failed with exactly one stderr line.
    pub fn error_line(&self) -> &str {
        assert_ne!(self.code, Some(0), "the run failed: {self:?}");
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one line on stderr: {self:?}");
        lines[0]
    }

    pub fn ok(&self) -> &str {
        assert_eq!(self.code, Some(0), "the run succeeded: {self:?}");
        &self.stdout
    }

    /// stdout as JSON objects, one per line.
    pub fn json(&self) -> Vec<serde_json::Value> {
        self.ok()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
            .collect()
    }
}

/// Runs the tool with `args` to completion (bounded).
pub async fn groups(args: &[&str]) -> Run {
    let out = bounded(
        "the groups tool",
        Command::new(env!("CARGO_BIN_EXE_groups"))
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the tool runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

/// Runs the tool against `broker`.
pub async fn on(broker: &Broker, args: &[&str]) -> Run {
    let bootstrap = broker.bootstrap();
    let mut all = vec!["--bootstrap-server", bootstrap.as_str()];
    all.extend_from_slice(args);
    groups(&all).await
}

/// Runs the tool against the data directory `dir`.
pub async fn on_dir(dir: &Path, args: &[&str]) -> Run {
    let dir = dir.to_str().expect("utf-8 path");
    let mut all = vec!["--data-dir", dir];
    all.extend_from_slice(args);
    groups(&all).await
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub fn subscription(topics: &[&str]) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(0);
    ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| s(t)).collect())
        .encode(&mut out, 0)
        .unwrap();
    out.freeze()
}

pub fn assignment(partitions: &[(&str, &[i32])]) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(0);
    ConsumerProtocolAssignment::default()
        .with_assigned_partitions(
            partitions
                .iter()
                .map(|(t, ps)| {
                    WireTp::default()
                        .with_topic(topic_name(t))
                        .with_partitions(ps.to_vec())
                })
                .collect(),
        )
        .encode(&mut out, 0)
        .unwrap();
    out.freeze()
}

/// A group member over its own connection.
pub struct Member {
    pub client: Client,
    pub group: String,
    pub id: String,
    pub generation: i32,
    topics: Vec<&'static str>,
}

fn join_request(group: &str, member: &str, topics: &[&str]) -> JoinGroupRequest {
    // Sessions far longer than any test: members need no heartbeats.
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_session_timeout_ms(1_800_000)
        .with_rebalance_timeout_ms(1_800_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(s("range"))
        .with_metadata(subscription(topics))])
}

impl Member {
    /// Joins `group` alone (JoinGroup v5 twice: MEMBER_ID_REQUIRED, then with the id),
    /// leads it and takes `owns`.
    pub async fn join_alone(
        broker: &Broker,
        client_id: &'static str,
        group: &str,
        topics: &[&'static str],
        owns: &[(&str, &[i32])],
    ) -> Member {
        let mut client = broker.client(client_id).await;
        let first = client.call(&join_request(group, "", topics), 5).await;
        assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
        let joined = client
            .call(&join_request(group, &first.member_id, topics), 5)
            .await;
        assert_eq!(joined.error_code, 0, "joined");
        let mut m = Member {
            client,
            group: group.to_string(),
            id: joined.member_id.to_string(),
            generation: joined.generation_id,
            topics: topics.to_vec(),
        };
        let mine = assignment(owns);
        let synced = m.sync(&[(m.id.clone(), mine.clone())]).await;
        assert_eq!(synced, mine);
        m
    }

    /// `self` (the leader, alone in the group) lets `client_id` in: a rebalance to the next
    /// generation where the leader owns `leader_owns` and the newcomer `newcomer_owns`.
    pub async fn admit(
        &mut self,
        broker: &Broker,
        client_id: &'static str,
        topics: &[&'static str],
        leader_owns: &[(&str, &[i32])],
        newcomer_owns: &[(&str, &[i32])],
    ) -> Member {
        let mut client = broker.client(client_id).await;
        let first = client.call(&join_request(&self.group, "", topics), 5).await;
        assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
        // The newcomer's join waits for the leader's rejoin.
        let parked = client
            .send(&join_request(&self.group, &first.member_id, topics), 5)
            .await;
        let rejoined = self
            .client
            .call(&join_request(&self.group, &self.id, &self.topics), 5)
            .await;
        assert_eq!(rejoined.error_code, 0);
        assert_eq!(
            rejoined.leader, rejoined.member_id,
            "the first member leads"
        );
        let joined = client.receive::<JoinGroupRequest>(parked, 5).await;
        assert_eq!(joined.error_code, 0);
        self.generation = rejoined.generation_id;
        let mut newcomer = Member {
            client,
            group: self.group.clone(),
            id: joined.member_id.to_string(),
            generation: joined.generation_id,
            topics: topics.to_vec(),
        };
        // The follower's SyncGroup waits for the leader's.
        let follower_sync = newcomer.client.send(&newcomer.sync_request(&[]), 3).await;
        let leader_assignment = assignment(leader_owns);
        let synced = self
            .sync(&[
                (self.id.clone(), leader_assignment.clone()),
                (newcomer.id.clone(), assignment(newcomer_owns)),
            ])
            .await;
        assert_eq!(synced, leader_assignment);
        let r = newcomer
            .client
            .receive::<SyncGroupRequest>(follower_sync, 3)
            .await;
        assert_eq!((r.error_code, r.assignment), (0, assignment(newcomer_owns)));
        newcomer
    }

    fn sync_request(&self, assignments: &[(String, Bytes)]) -> SyncGroupRequest {
        SyncGroupRequest::default()
            .with_group_id(GroupId(s(&self.group)))
            .with_generation_id(self.generation)
            .with_member_id(s(&self.id))
            .with_assignments(
                assignments
                    .iter()
                    .map(|(m, a)| {
                        sync_group_request::SyncGroupRequestAssignment::default()
                            .with_member_id(s(m))
                            .with_assignment(a.clone())
                    })
                    .collect(),
            )
    }

    async fn sync(&mut self, assignments: &[(String, Bytes)]) -> Bytes {
        let request = self.sync_request(assignments);
        let r = self.client.call(&request, 3).await;
        assert_eq!(r.error_code, 0, "synced");
        r.assignment
    }

    /// Commits as this member of its current generation.
    pub async fn commit(&mut self, offsets: &[(&str, i32, i64)]) {
        let r = self
            .client
            .call(
                &commit_request(&self.group, &self.id, self.generation, offsets),
                3,
            )
            .await;
        let codes: Vec<i16> = r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect();
        assert!(codes.iter().all(|&c| c == 0), "committed: {codes:?}");
    }

    /// Leaves the group (LeaveGroup v1).
    pub async fn leave(mut self) {
        let r = self
            .client
            .call(
                &LeaveGroupRequest::default()
                    .with_group_id(GroupId(s(&self.group)))
                    .with_member_id(s(&self.id)),
                1,
            )
            .await;
        assert_eq!(r.error_code, 0, "left");
    }
}

/// An OffsetCommit of `offsets` (topic, partition, offset) by `member` under `generation`.
pub fn commit_request(
    group: &str,
    member: &str,
    generation: i32,
    offsets: &[(&str, i32, i64)],
) -> OffsetCommitRequest {
    crate::common::commit(group, member, generation, offsets)
}

/// An admin's commit (no generation, no member), as for a group without members.
pub async fn commit_plain(client: &mut Client, group: &str, offsets: &[(&str, i32, i64)]) {
    let r = client
        .call(&commit_request(group, "", -1, offsets), 3)
        .await;
    for t in &r.topics {
        for p in &t.partitions {
            assert_eq!(
                p.error_code,
                0,
                "plain commit of {}-{}",
                t.name.as_str(),
                p.partition_index
            );
        }
    }
}

/// Every committed offset of `group`, sorted: `(topic, partition, offset)`.
pub async fn committed(client: &mut Client, group: &str) -> Vec<(String, i32, i64)> {
    let r = client
        .call(
            &OffsetFetchRequest::default()
                .with_group_id(GroupId(s(group)))
                .with_topics(None),
            3,
        )
        .await;
    assert_eq!(r.error_code, 0);
    let mut out: Vec<(String, i32, i64)> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.to_string(), p.partition_index, p.committed_offset))
        })
        .collect();
    out.sort();
    out
}

/// The state DescribeGroups reports for `group`.
pub async fn state(client: &mut Client, group: &str) -> String {
    let r = client
        .call(
            &DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]),
            5,
        )
        .await;
    r.groups[0].group_state.to_string()
}

/// Produces `n` records to `topic`-`partition` (timestamps `ts`, `ts+1`, ...).
pub async fn produce_n(client: &mut Client, topic: &str, partition: i32, n: usize, ts: i64) {
    if n == 0 {
        return;
    }
    let records: Vec<_> = (0..n).map(|i| record(i, ts + i as i64)).collect();
    let (code, _) = produce(
        client,
        topic,
        partition,
        batch(&records, kafka_protocol::records::Compression::None),
        7,
    )
    .await;
    assert_eq!(code, 0, "produced");
}
