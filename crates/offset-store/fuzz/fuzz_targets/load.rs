//! Fuzzes the JSON offset store's loader with arbitrary file contents.
//!
//! Checks, for every input: opening never panics; a refused file is a `Corrupt` storage
//! error naming the file; an accepted file holds no negative offset, and writing what was
//! loaded back through a fresh store reloads to the same offsets (the loader and the writer
//! agree).

#![no_main]

use coordinator_core::{CommitFence, OffsetStore, StorageErrorKind};
use libfuzzer_sys::fuzz_target;
use offset_store::testing::SimFs;
use offset_store::JsonFileStore;

const PATH: &str = "/fuzz/offsets.json";

fuzz_target!(|data: &[u8]| {
    let fs = SimFs::new();
    fs.put_file(PATH, data);
    let loaded = match JsonFileStore::open_with_fs(PATH, fs) {
        Ok(store) => store.snapshot(),
        Err(err) => {
            assert_eq!(err.kind(), StorageErrorKind::Corrupt, "{err}");
            assert!(err.message().contains(PATH), "{err}");
            return;
        }
    };
    assert!(loaded.values().flat_map(|o| o.values()).all(|&o| o >= 0));

    let rewritten = SimFs::new();
    let store = JsonFileStore::open_with_fs(PATH, rewritten.clone()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        for (group, offsets) in &loaded {
            store.commit(group, offsets, CommitFence::none()).await.unwrap();
        }
    });
    // A file has one owner: the writing store goes before the file is read back.
    drop(store);
    let reloaded = JsonFileStore::open_with_fs(PATH, rewritten).unwrap();
    assert_eq!(reloaded.snapshot(), loaded);
});
