//! Log retention, as Kafka's `LogManager` runs it every `log.retention.check.interval.ms`:
//! each partition of a topic whose `cleanup.policy` includes `delete` loses what is older
//! than its `retention.ms` and what it can lose while staying at or above its
//! `retention.bytes` — the topic's own configs where set (CreateTopics, AlterConfigs,
//! IncrementalAlterConfigs), the broker's `--log-retention-ms` / `--log-retention-bytes`
//! otherwise. The log removes whole units (the segment log's closed segments, the memory
//! log's batches), never at or above the high watermark, so a broker without a data
//! directory no longer grows without bound either.
//!
//! A segment is also closed by age, by its topic's `segment.ms` (Kafka's `log.roll.ms`, 7
//! days), before retention looks at it: Kafka closes it at the next append, this broker at
//! the next check. A compact-only topic is `crate::cleaner`'s.

use std::sync::Arc;
use std::time::Duration;

use coordinator_core::TopicPartition;
use tokio::task::JoinHandle;
use tracing::warn;

use crate::context::Context;

/// Runs [`apply`] every `interval` until dropped.
pub(crate) struct Retention(JoinHandle<()>);

impl Retention {
    pub(crate) fn spawn(context: Arc<Context>, interval: Duration) -> Retention {
        Retention(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                apply(&context).await;
            }
        }))
    }
}

impl Drop for Retention {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `topic`'s `segment.ms`: its own config, else Kafka's default (7 days).
pub(crate) fn segment_ms(context: &Context, topic: &str) -> i64 {
    context
        .topic_configs
        .get(topic)
        .get("segment.ms")
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(7 * 24 * 60 * 60 * 1000)
}

/// The limits of `topic`: its `retention.ms` and `retention.bytes`, or `None` if its
/// `cleanup.policy` does not delete.
fn limits(context: &Context, topic: &str) -> Option<(i64, i64)> {
    let overrides = context.topic_configs.get(topic);
    if let Some(policy) = overrides.get("cleanup.policy") {
        if !policy.split(',').any(|p| p.trim() == "delete") {
            return None;
        }
    }
    let records = &context.config.records;
    let number = |key: &str, default: i64| {
        overrides
            .get(key)
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(default)
    };
    Some((
        number("retention.ms", records.retention_ms),
        number("retention.bytes", records.retention_bytes),
    ))
}

/// Applies retention to every partition once.
pub(crate) async fn apply(context: &Context) {
    let log = &context.log;
    let topics = match log.topics().await {
        Ok(topics) => topics,
        Err(e) => {
            warn!(error = %e, "retention: cannot list the topics");
            return;
        }
    };
    for (topic, count) in topics {
        let Some((ms, bytes)) = limits(context, &topic) else {
            continue;
        };
        if ms < 0 && bytes < 0 {
            continue;
        }
        let roll_ms = segment_ms(context, &topic);
        for p in 0..count {
            let tp = TopicPartition::new(topic.as_str(), p);
            if let Err(e) = log.roll_older_than(&tp, roll_ms).await {
                warn!(partition = %tp, error = %e, "cannot close the active segment by age");
            }
            if let Err(e) = log.apply_retention(&tp, ms, bytes).await {
                // A topic deleted meanwhile, or a failed file removal: the next check retries.
                warn!(partition = %tp, error = %e, "retention failed");
            }
        }
    }
}
