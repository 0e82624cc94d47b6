//! The topic-metadata port: which topics exist and how many partitions each has.

use std::sync::Arc;

/// Reads the current topic → partition-count metadata.
///
/// Any `Fn(&str) -> Option<u32> + Send + Sync` closure is a `TopicMetadata` (one that lists
/// no topics: see [`topic_names`](Self::topic_names)).
///
/// # To ensure correctness
/// - `partition_count` returns `None` for a topic that does not exist and `Some(n)` for one
///   that does; partitions are numbered `0..n`.
/// - The count of a topic never shrinks (Kafka never removes partitions). A deleted topic
///   simply stops being assigned at the next rebalance.
/// - `topic_names` lists exactly the topics for which `partition_count` is `Some`.
/// - Both are cheap and do not block: the coordinator calls them under a group's lock.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
pub trait TopicMetadata: Send + Sync {
    /// The topic's partition count, or `None` if the topic does not exist.
    fn partition_count(&self, topic: &str) -> Option<u32>;

    /// Every topic that exists, in any order. The consumer group protocol matches a member's
    /// regular-expression subscription (`SubscribedTopicRegex`) against them: when the group
    /// first sees the expression, and again at most every 10 seconds (Kafka's
    /// `REGEX_BATCH_REFRESH_INTERVAL_MS`) while members heartbeat.
    ///
    /// The default lists none, so through a port that does not override it a regular
    /// expression matches nothing (subscriptions by name are unaffected).
    fn topic_names(&self) -> Vec<String> {
        Vec::new()
    }
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

    fn topic_names(&self) -> Vec<String> {
        self.keys().cloned().collect()
    }
}

impl TopicMetadata for std::collections::HashMap<String, u32> {
    fn partition_count(&self, topic: &str) -> Option<u32> {
        self.get(topic).copied()
    }

    fn topic_names(&self) -> Vec<String> {
        self.keys().cloned().collect()
    }
}

impl<T: TopicMetadata + ?Sized> TopicMetadata for Arc<T> {
    fn partition_count(&self, topic: &str) -> Option<u32> {
        (**self).partition_count(topic)
    }

    fn topic_names(&self) -> Vec<String> {
        (**self).topic_names()
    }
}
