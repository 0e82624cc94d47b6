//! The topic-metadata port: how many partitions a topic has.

use std::sync::Arc;

/// Reads the current topic → partition-count metadata.
///
/// Any `Fn(&str) -> Option<u32> + Send + Sync` closure is a `TopicMetadata`.
///
/// # To ensure correctness
/// - `partition_count` returns `None` for a topic that does not exist and `Some(n)` for one
///   that does; partitions are numbered `0..n`.
/// - The count of a topic never shrinks (Kafka never removes partitions). A deleted topic
///   simply stops being assigned at the next rebalance.
/// - It is cheap and does not block: the coordinator calls it under a group's lock.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
pub trait TopicMetadata: Send + Sync {
    /// The topic's partition count, or `None` if the topic does not exist.
    fn partition_count(&self, topic: &str) -> Option<u32>;
}

impl<F> TopicMetadata for F
where
    F: Fn(&str) -> Option<u32> + Send + Sync,
{
    fn partition_count(&self, topic: &str) -> Option<u32> {
        self(topic)
    }
}

impl TopicMetadata for std::collections::BTreeMap<String, u32> {
    fn partition_count(&self, topic: &str) -> Option<u32> {
        self.get(topic).copied()
    }
}

impl TopicMetadata for std::collections::HashMap<String, u32> {
    fn partition_count(&self, topic: &str) -> Option<u32> {
        self.get(topic).copied()
    }
}

impl<T: TopicMetadata + ?Sized> TopicMetadata for Arc<T> {
    fn partition_count(&self, topic: &str) -> Option<u32> {
        (**self).partition_count(topic)
    }
}
