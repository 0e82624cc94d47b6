//! Criterion benchmarks of the assignment and commit paths, and the inputs they share.
//!
//! The benches live in `benches/benches/*.rs` (`cargo bench -p benches`); this library builds
//! their inputs outside the timed parts, so every bench and every quick probe uses the same
//! member ids (`member-00000`, …), topic names (`topic-0000`, …) and subscriptions.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use coordinator_core::{
    AssignmentRequest, Coordinator, ManualClock, OffsetMap, OffsetStore, TopicPartition,
};

/// `member-00000`, `member-00001`, …
pub fn member_ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("member-{i:05}")).collect()
}

/// `topic-0000`, `topic-0001`, …
pub fn topic_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("topic-{i:04}")).collect()
}

/// `total` partitions spread evenly over `topics` topics (the first ones get the remainder).
pub fn spread(total: u32, topics: usize) -> Vec<u32> {
    let topics_u32 = u32::try_from(topics.max(1)).unwrap_or(u32::MAX);
    (0..topics_u32)
        .map(|t| total / topics_u32 + u32::from(t < total % topics_u32))
        .collect()
}

/// Every member subscribed to every topic.
pub fn uniform(members: usize, topics: usize, partitions: u32) -> AssignmentRequest {
    subscribed(members, topics, partitions, |_, _| true)
}

/// Mixed subscriptions: member `m` subscribes to topic `t` when `(m + t) % every == 0`, so
/// each member takes about one topic in `every` and each topic has about one member in `every`.
pub fn mixed(members: usize, topics: usize, partitions: u32, every: usize) -> AssignmentRequest {
    subscribed(members, topics, partitions, |m, t| (m + t) % every == 0)
}

fn subscribed(
    members: usize,
    topics: usize,
    partitions: u32,
    subscribes: impl Fn(usize, usize) -> bool,
) -> AssignmentRequest {
    let names = topic_names(topics);
    let mut builder = AssignmentRequest::builder();
    for (name, count) in names.iter().zip(spread(partitions, topics)) {
        builder = builder.topic(name.clone(), count);
    }
    for (m, id) in member_ids(members).into_iter().enumerate() {
        let subs: Vec<String> = (0..topics)
            .filter(|&t| subscribes(m, t))
            .map(|t| names[t].clone())
            .collect();
        builder = builder.member(id, subs);
    }
    match builder.build() {
        Ok(request) => request,
        Err(e) => unreachable_input(&e.to_string()),
    }
}

#[allow(clippy::panic)]
fn unreachable_input(why: &str) -> ! {
    panic!("bench input is invalid: {why}")
}

/// The request for the generation after `previous`: the same topics and members minus
/// `leaving`, each member owning what `previous` gave it (the sticky strategies' input).
pub fn after_leave(
    members: usize,
    topics: usize,
    partitions: u32,
    previous: &BTreeMap<String, Vec<TopicPartition>>,
    leaving: &str,
) -> AssignmentRequest {
    let names = topic_names(topics);
    let mut builder = AssignmentRequest::builder();
    for (name, count) in names.iter().zip(spread(partitions, topics)) {
        builder = builder.topic(name.clone(), count);
    }
    for id in member_ids(members) {
        if id == leaving {
            continue;
        }
        builder = builder.member(id.clone(), names.clone());
        for tp in previous.get(&id).into_iter().flatten() {
            builder = builder.owned(&id, tp.topic(), tp.partition());
        }
    }
    match builder.build() {
        Ok(request) => request,
        Err(e) => unreachable_input(&e.to_string()),
    }
}

/// A coordinator for the commit benches: manual clock, the given store, topic `orders` with
/// `partitions` partitions and the chapter's round-robin assignor.
pub fn coordinator(store: Arc<dyn OffsetStore>, partitions: u32) -> Coordinator {
    let topics: BTreeMap<String, u32> = [("orders".to_string(), partitions)].into();
    let built = Coordinator::builder(
        store,
        Arc::new(topics),
        Arc::new(assignor::MiniKafkaRoundRobinAssignor),
    )
    .clock(Arc::new(ManualClock::new()))
    .build();
    match built {
        Ok(c) => c,
        Err(e) => unreachable_input(&e.to_string()),
    }
}

/// `orders-0 .. orders-(n-1)`, each at `offset`.
pub fn orders_offsets(n: u32, offset: i64) -> OffsetMap {
    (0..n)
        .map(|p| (TopicPartition::new("orders", p), offset))
        .collect()
}

/// The floor under *any* durable commit on this disk, whatever the format: append `record`
/// to a file kept open, then `fdatasync`, as benchmark `<group>/record=<n>B`. No temp file, no
/// rename, no directory sync: what an append-only log pays per batch at least.
// A bench that cannot set up its file has nothing to measure: it stops there.
#[allow(clippy::unwrap_used)]
pub fn append_fdatasync_floor(c: &mut criterion::Criterion, group: &str, record: &[u8]) {
    use std::io::Write;
    let mut g = c.benchmark_group(group);
    g.sample_size(30)
        .measurement_time(std::time::Duration::from_secs(8));
    let dir = tempfile::tempdir().unwrap();
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("floor.log"))
        .unwrap();
    g.bench_function(format!("record={}B", record.len()), |b| {
        b.iter(|| {
            log.write_all(record).unwrap();
            log.sync_data().unwrap();
        });
    });
    g.finish();
}
