//! Log compaction, as Kafka's `LogCleaner` runs it: every `log.cleaner.backoff.ms`, each
//! partition of a topic whose `cleanup.policy` includes `compact` gets a compaction pass
//! (`PartitionLog::compact`) with the topic's `min.cleanable.dirty.ratio`,
//! `min.compaction.lag.ms`, `max.compaction.lag.ms` and `delete.retention.ms` (its own
//! configs where set, Kafka's defaults otherwise), up to its last stable offset.
//!
//! The log keeps the batches producers sent without reading them; [`KafkaBatches`] reads
//! them for the pass: a record's key and whether it is a tombstone, and a batch rewritten
//! without some records. A rewritten batch keeps each kept record byte for byte (its
//! headers all, two of one key included) and, as Kafka's `MemoryRecords.filterTo` /
//! `buildRetainedRecordsInto`, the original batch's base offset, last offset, producer id,
//! epoch and base sequence (`NO_SEQUENCE` stays -1), transactional and control flags,
//! partition leader epoch and compression codec ([`crate::stored_batch`]). A batch that does
//! not read (a bad CRC, a malformed record, more than `max_decompressed_batch_bytes`
//! decompressed) takes no part: it is kept as it is.
//!
//! Transactions as Kafka's cleaner treats them: an aborted transaction's records are
//! removed, a committed one's take part, a marker goes once its transaction has no record
//! left and its delete horizon has passed. Differences from Kafka, kept on purpose for now
//! (the broker README lists them):
//! - a batch left empty is dropped (Kafka keeps an empty batch where the producer state
//!   needs it);
//! - a rewritten batch keeps its base timestamp, so each kept record's bytes stay as stored
//!   (Kafka re-appends the kept records: its base timestamp becomes the first kept record's,
//!   or the delete horizon, which Kafka writes into the batch and the log here keeps beside
//!   it); every record's offset and timestamp read the same either way;
//! - consecutive segments are merged as Kafka's `groupSegmentsBySize` merges them; the
//!   swap that commits a merge names the range it replaces (see partition-log's
//!   `segment/clean.rs` for how its recovery differs from Kafka's);
//! - the in-memory and PostgreSQL logs have no segments: every batch below the last stable
//!   offset is compactable once past `min.compaction.lag.ms`.
//!
//! With several brokers over PostgreSQL, a broker compacts only the partitions it leads (and
//! the log fences each write of a pass as it fences appends).

use std::sync::Arc;
use std::time::Duration;

use coordinator_core::{Clock, LogError, TopicPartition};
use partition_log::compaction::{
    BatchKind, Compaction, CompactionPolicy, KeyedRecord, RecordFormat, RetainedBatch,
};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::api::topic_configs;
use crate::context::{Context, WallClock};
use crate::producers::{read_marker, BatchHeader};
use crate::stored_batch::StoredBatch;

/// Kafka's v2 record batches, as compaction reads them: in place, each record's bytes as
/// stored ([`StoredBatch`]), a compressed batch's records decompressing to at most
/// `max_decompressed` bytes (the broker's `max_decompressed_batch_bytes`, Produce's bound).
#[derive(Debug)]
pub(crate) struct KafkaBatches {
    max_decompressed: usize,
}

impl KafkaBatches {
    /// Reads batches whose records decompress to at most `max_decompressed` bytes.
    pub(crate) fn new(max_decompressed: usize) -> Self {
        KafkaBatches { max_decompressed }
    }

    fn read<'a>(&self, encoded: &'a [u8]) -> Result<StoredBatch<'a>, String> {
        StoredBatch::read(encoded, self.max_decompressed)
    }
}

impl RecordFormat for KafkaBatches {
    fn kind(&self, encoded: &[u8]) -> BatchKind {
        let Some(header) = BatchHeader::parse(encoded) else {
            return BatchKind::Unknown;
        };
        if header.control {
            return match read_marker(encoded) {
                Some((commit, _, _)) => BatchKind::Marker {
                    producer_id: header.producer_id,
                    commit,
                },
                None => BatchKind::Unknown,
            };
        }
        if header.transactional {
            return BatchKind::Transactional {
                producer_id: header.producer_id,
            };
        }
        BatchKind::Plain
    }

    fn keys(&self, encoded: &[u8], _base_offset: i64) -> Option<Vec<KeyedRecord>> {
        let batch = self
            .read(encoded)
            .map_err(|reason| debug!(%reason, "a batch the cleaner cannot read: kept as it is"))
            .ok()?;
        Some(
            batch
                .records()
                .iter()
                .map(|r| KeyedRecord {
                    offset: r.offset,
                    tombstone: r.tombstone,
                    key: batch.key(r).map(Arc::from),
                })
                .collect(),
        )
    }

    fn retain(
        &self,
        encoded: &[u8],
        _base_offset: i64,
        keep: &dyn Fn(i64) -> bool,
    ) -> Result<RetainedBatch, String> {
        let batch = self
            .read(encoded)
            .map_err(|e| format!("cannot read the batch: {e}"))?;
        let rewritten = batch.retain(keep)?;
        Ok(RetainedBatch {
            encoded: Arc::from(rewritten.encoded),
            base_offset: rewritten.base_offset,
            last_offset: rewritten.last_offset,
        })
    }
}

/// Runs [`clean`] every `interval` until dropped.
pub(crate) struct Cleaner(JoinHandle<()>);

impl Cleaner {
    pub(crate) fn spawn(context: Arc<Context>, interval: Duration) -> Cleaner {
        Cleaner(tokio::spawn(async move {
            let format: Arc<dyn RecordFormat> = Arc::new(KafkaBatches::new(
                context.config.max_decompressed_batch_bytes,
            ));
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if clean(&context, &format).await.is_err() {
                    info!("this log does not compact: compacted topics are kept whole");
                    return;
                }
            }
        }))
    }
}

impl Drop for Cleaner {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The compaction rules of `topic` at `now_ms`, or `None` if its `cleanup.policy` does not
/// compact.
fn policy(context: &Context, topic: &str, now_ms: i64) -> Option<CompactionPolicy> {
    if !context.topic_configs.compacts(topic) {
        return None;
    }
    let overrides = context.topic_configs.get(topic);
    let value = |name: &str| {
        overrides
            .get(name)
            .map(|v| v.to_string())
            .or_else(|| topic_configs::find(name).map(|s| s.default.to_string()))
    };
    let number = |name: &str, default: i64| {
        value(name)
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(default)
    };
    let defaults = CompactionPolicy::at(now_ms);
    let mut policy = CompactionPolicy::at(now_ms);
    policy.min_cleanable_dirty_ratio = value("min.cleanable.dirty.ratio")
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(defaults.min_cleanable_dirty_ratio);
    policy.min_compaction_lag_ms = number("min.compaction.lag.ms", defaults.min_compaction_lag_ms);
    policy.max_compaction_lag_ms = number("max.compaction.lag.ms", defaults.max_compaction_lag_ms);
    policy.delete_retention_ms = number("delete.retention.ms", defaults.delete_retention_ms);
    policy.max_key_bytes =
        usize::try_from(context.config.records.cleaner_dedupe_buffer_size).unwrap_or(usize::MAX);
    Some(policy)
}

/// One compaction pass over every partition of every compacted topic. Returns the
/// partitions compacted, or the log's refusal if it cannot compact.
pub(crate) async fn clean(
    context: &Context,
    format: &Arc<dyn RecordFormat>,
) -> Result<Vec<(TopicPartition, Compaction)>, LogError> {
    let log = &context.log;
    let topics = match log.topics().await {
        Ok(topics) => topics,
        Err(e) => {
            warn!(error = %e, "compaction: cannot list the topics");
            return Ok(Vec::new());
        }
    };
    let mut done = Vec::new();
    for (topic, count) in topics {
        let now_ms = i64::try_from(WallClock.now_ms()).unwrap_or(i64::MAX);
        let Some(mut policy) = policy(context, &topic, now_ms) else {
            continue;
        };
        for p in 0..count {
            let index = i32::try_from(p).unwrap_or(i32::MAX);
            if context
                .ownership
                .partition(&topic, index)
                .leader_error()
                .is_some()
            {
                continue; // another broker leads it (several brokers over PostgreSQL)
            }
            let tp = TopicPartition::new(topic.as_str(), p);
            // Kafka closes a compacted topic's segment by `max.compaction.lag.ms` too
            // (KIP-354): the active segment is never compacted.
            let roll_ms =
                crate::retention::segment_ms(context, &topic).min(policy.max_compaction_lag_ms);
            if let Err(e) = log.roll_older_than(&tp, roll_ms).await {
                warn!(partition = %tp, error = %e, "cannot close the active segment by age");
            }
            policy.stable_offset = match stable_offset(context, &tp, now_ms).await {
                Ok(offset) => offset,
                Err(e) => {
                    warn!(partition = %tp, error = %e, "compaction: no last stable offset");
                    continue;
                }
            };
            match log.compact(&tp, &policy, format.clone()).await {
                Ok(c) if c.segments > 0 => {
                    info!(
                        partition = %tp,
                        rewritten = c.segments,
                        records_removed = c.records_removed,
                        cleaned_up_to = c.cleaned_up_to,
                        "log compacted"
                    );
                    done.push((tp, c));
                }
                Ok(_) => {}
                Err(e @ LogError::InvalidArgument { .. }) => return Err(e),
                // A topic deleted meanwhile, or a failed write: the next pass retries.
                Err(e) => warn!(partition = %tp, error = %e, "compaction failed"),
            }
        }
    }
    Ok(done)
}

/// `tp`'s last stable offset: no pass compacts an undecided transaction.
async fn stable_offset(
    context: &Context,
    tp: &TopicPartition,
    now_ms: i64,
) -> Result<i64, LogError> {
    let state = context.producers.lock(&*context.log, tp, now_ms).await?;
    let (_, high_watermark) = context.log.bounds(tp).await?;
    Ok(state.last_stable_offset(high_watermark))
}

#[cfg(test)]
#[path = "cleaner_tests.rs"]
mod tests;
