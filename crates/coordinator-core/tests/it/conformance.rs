//! The `OffsetStore` conformance suite checks what it says: a correct store passes it, and a
//! store that releases its fence before its write is visible fails it.

use crate::common;

use std::sync::Arc;

use async_trait::async_trait;
use common::TestStore;
use coordinator_core::testing::offset_store_conformance;
use coordinator_core::{CommitFence, OffsetMap, OffsetStore, StorageError, TopicPartition};

#[tokio::test]
async fn the_test_store_conforms() {
    offset_store_conformance(|| Arc::new(TestStore::default())).await;
}

/// Drops the fence, lets others run, and only then writes: the bug the fence rule exists for.
struct EarlyRelease(TestStore);

#[async_trait]
impl OffsetStore for EarlyRelease {
    async fn committed(
        &self,
        group: &str,
        tp: &TopicPartition,
    ) -> Result<Option<i64>, StorageError> {
        self.0.committed(group, tp).await
    }
    async fn list(&self, group: &str) -> Result<OffsetMap, StorageError> {
        self.0.list(group).await
    }
    async fn groups(&self) -> Result<Vec<String>, StorageError> {
        self.0.groups().await
    }
    async fn commit(
        &self,
        group: &str,
        offsets: &OffsetMap,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        drop(fence);
        tokio::task::yield_now().await;
        self.0.commit(group, offsets, CommitFence::none()).await
    }
    async fn delete<'a>(
        &self,
        group: &str,
        partitions: Option<&'a [TopicPartition]>,
        fence: CommitFence,
    ) -> Result<(), StorageError> {
        self.0.delete(group, partitions, fence).await
    }
}

#[tokio::test]
async fn a_store_that_releases_its_fence_before_writing_fails_the_suite() {
    let run = tokio::spawn(offset_store_conformance(|| {
        Arc::new(EarlyRelease(TestStore::default()))
    }));
    let err = run.await.expect_err("the suite must fail this store");
    let message = err
        .into_panic()
        .downcast::<String>()
        .map(|m| *m)
        .unwrap_or_default();
    assert!(
        message.contains("the fence was released before the write was visible"),
        "the suite failed for another reason: {message}"
    );
}
