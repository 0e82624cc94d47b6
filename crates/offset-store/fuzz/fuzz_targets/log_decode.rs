//! Fuzzes the log store's record decoder and its recovery with arbitrary segment bytes.
//!
//! The bytes are a segment of the store's old format, which a store imports at open (see
//! `LogStore`'s *Recovery*). Checks, for every input: decoding never panics; what decodes
//! re-encodes to a frame that decodes to the same records; a log store opened on the bytes as
//! its only old segment agrees with the decoder (it opens when the decoder accepts the bytes
//! and they hold no snapshot record, else it fails with a `Corrupt` error naming the segment,
//! leaving the segment as it was); a store that opened holds the offsets the records before
//! the torn tail give, has removed the old segment, and reopens to the same offsets.

#![no_main]

use std::collections::BTreeMap;

use coordinator_core::{CommittedOffsets, StorageErrorKind};
use libfuzzer_sys::fuzz_target;
use offset_store::testing::{decode_log, encode_log_frame, LogRecord, SimFs};
use offset_store::LogStore;

const SEGMENT: &str = "/fuzz/segment-00000000000000000000.log";

fuzz_target!(|data: &[u8]| {
    let decoded = decode_log(data);
    if let Ok((records, _)) = &decoded {
        let again = encode_log_frame(records);
        assert_eq!(decode_log(&again), Ok((records.clone(), None)));
    }
    let fs = SimFs::new();
    fs.put_file(SEGMENT, data);
    let opened = LogStore::open_with_fs("/fuzz", fs.clone());
    match (&decoded, opened) {
        (Ok((records, _)), Ok(store)) => {
            assert!(!records.iter().any(|r| matches!(
                r,
                LogRecord::SnapshotStart { .. } | LogRecord::SnapshotEnd { .. }
            )));
            let expected = replay(records);
            assert_eq!(store.snapshot(), expected);
            drop(store);
            assert!(fs.file(SEGMENT).is_none(), "the imported segment is removed");
            let reopened = LogStore::open_with_fs("/fuzz", fs.clone()).expect("reopens");
            assert_eq!(reopened.snapshot(), expected);
        }
        (Ok(_), Err(err)) | (Err(_), Err(err)) => {
            assert_eq!(err.kind(), StorageErrorKind::Corrupt, "{err}");
            assert!(err.message().contains(SEGMENT), "{err}");
            assert_eq!(fs.file(SEGMENT).as_deref(), Some(data), "left as it was");
        }
        (Err(e), Ok(_)) => panic!("the store opened bytes the decoder refused: {e:?}"),
    }
});

/// Every group's offsets after `records`, as the store keeps them (a group without offsets
/// is absent).
fn replay(records: &[LogRecord]) -> BTreeMap<String, CommittedOffsets> {
    let mut offsets: BTreeMap<String, CommittedOffsets> = BTreeMap::new();
    for record in records {
        match record {
            LogRecord::Commit { group, tp, offset } => {
                offsets
                    .entry(group.clone())
                    .or_default()
                    .insert(tp.clone(), offset.clone());
            }
            LogRecord::DeleteOffset { group, tp } => {
                if let Some(o) = offsets.get_mut(group) {
                    o.remove(tp);
                }
            }
            LogRecord::DeleteGroupOffsets { group } => {
                offsets.remove(group);
            }
            _ => {}
        }
    }
    offsets.retain(|_, o| !o.is_empty());
    offsets
}
