//! The `OffsetStore` port's conformance suite, run against every adapter of this crate.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use coordinator_core::testing::offset_store_conformance;
use coordinator_core::OffsetStore;
use offset_store::testing::SimFs;
use offset_store::{JsonFileStore, MemoryStore};

#[tokio::test]
async fn memory_store_conforms() {
    offset_store_conformance(|| Arc::new(MemoryStore::new()) as Arc<dyn OffsetStore>).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_store_on_disk_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let n = AtomicUsize::new(0);
    offset_store_conformance(|| {
        let path = dir.path().join(format!(
            "offsets-{}.json",
            n.fetch_add(1, Ordering::Relaxed)
        ));
        Arc::new(JsonFileStore::open(path).unwrap()) as Arc<dyn OffsetStore>
    })
    .await;
    assert!(n.load(Ordering::Relaxed) > 0);
}

#[tokio::test]
async fn json_store_on_simulated_fs_conforms() {
    offset_store_conformance(|| {
        Arc::new(JsonFileStore::open_with_fs("/data/offsets.json", SimFs::new()).unwrap())
            as Arc<dyn OffsetStore>
    })
    .await;
}

/// The suite again, each store reopened from its file after the suite is done with it: what
/// the suite committed through one instance is re-read by the next.
#[tokio::test]
async fn json_store_reopened_after_each_rule_still_holds_its_commits() {
    let fs = SimFs::new();
    let n = AtomicUsize::new(0);
    let stores = std::sync::Mutex::new(Vec::new());
    offset_store_conformance(|| {
        let path = format!("/data/offsets-{}.json", n.fetch_add(1, Ordering::Relaxed));
        let store = Arc::new(JsonFileStore::open_with_fs(&path, fs.clone()).unwrap());
        stores.lock().unwrap().push(Arc::clone(&store));
        store as Arc<dyn OffsetStore>
    })
    .await;
    for store in stores.into_inner().unwrap() {
        let (path, snapshot) = (store.path().to_path_buf(), store.snapshot());
        // The suite kept no clone: dropping ours closes the store and frees its file.
        drop(Arc::into_inner(store).expect("the suite dropped its handles"));
        let reopened = JsonFileStore::open_with_fs(&path, fs.clone()).unwrap();
        assert_eq!(reopened.snapshot(), snapshot, "{}", path.display());
    }
}
