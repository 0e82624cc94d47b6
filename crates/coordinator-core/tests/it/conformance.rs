//! The `OffsetStore` conformance suite checks what it says: a correct store passes it, and a
//! store that releases its fence before its write is visible fails it.

use crate::common;

use std::sync::Arc;

use common::{StoreOp, TestStore};
use coordinator_core::testing::offset_store_conformance;

#[tokio::test]
async fn the_test_store_conforms() {
    offset_store_conformance(|| Arc::new(TestStore::default())).await;
}

#[tokio::test]
async fn a_store_that_releases_its_fence_before_writing_fails_the_suite() {
    // Drops the fence, lets others run, and only then writes: the bug the fence rule
    // exists for.
    let run = tokio::spawn(offset_store_conformance(|| {
        let store = TestStore::default();
        store.release_fence_early(StoreOp::Commit);
        Arc::new(store)
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
