//! The core's `OffsetStore` conformance suite against a real PostgreSQL server: each rule
//! gets a store over a database of its own.

#![allow(clippy::expect_used)]

use std::sync::Arc;

use coordinator_core::testing::offset_store_conformance;
use coordinator_core::OffsetStore;
use store_postgres::PostgresStore;

/// How many stores the suite asks for (one per rule); a surplus is harmless, a shortage
/// fails the test with a message.
const RULES: usize = 16;

// A current-thread runtime (the default): the suite's fence rule is checked
// deterministically there.
#[tokio::test]
async fn postgres_store_passes_the_offset_store_conformance_suite() {
    let Some(pg) = crate::common::server().await else {
        return;
    };
    let mut stores: Vec<Arc<dyn OffsetStore>> = Vec::new();
    for i in 0..RULES {
        let store: PostgresStore = crate::common::store(&pg, &format!("rule_{i}")).await;
        stores.push(Arc::new(store));
    }
    crate::common::bounded(
        "the conformance suite",
        offset_store_conformance(move || {
            stores
                .pop()
                .expect("the suite asked for more stores than RULES: raise RULES")
        }),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_passes_the_suite_on_a_multi_threaded_runtime() {
    let Some(pg) = crate::common::server().await else {
        return;
    };
    let mut stores: Vec<Arc<dyn OffsetStore>> = Vec::new();
    for i in 0..RULES {
        stores.push(Arc::new(
            crate::common::store(&pg, &format!("rule_{i}")).await,
        ));
    }
    crate::common::bounded(
        "the conformance suite",
        offset_store_conformance(move || {
            stores
                .pop()
                .expect("the suite asked for more stores than RULES: raise RULES")
        }),
    )
    .await;
}
