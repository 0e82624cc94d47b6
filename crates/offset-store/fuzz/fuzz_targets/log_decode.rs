//! Fuzzes the log store's record decoder and its recovery with arbitrary segment bytes.
//!
//! Checks, for every input: decoding never panics; what decodes re-encodes to a frame that
//! decodes to the same records; a log store opened on the bytes as its only segment agrees
//! with the decoder (it opens when the decoder accepts the bytes and they hold no snapshot
//! record, else it fails with a `Corrupt` error naming the segment), and a store that opened
//! has cut off exactly the torn tail the decoder found.

#![no_main]

use coordinator_core::StorageErrorKind;
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
        (Ok((records, torn)), Ok(store)) => {
            assert!(!records.iter().any(|r| matches!(
                r,
                LogRecord::SnapshotStart { .. } | LogRecord::SnapshotEnd { .. }
            )));
            drop(store);
            let kept = fs.file(SEGMENT).unwrap_or_default();
            assert_eq!(kept.len(), torn.unwrap_or(data.len()));
        }
        (Ok(_), Err(err)) | (Err(_), Err(err)) => {
            assert_eq!(err.kind(), StorageErrorKind::Corrupt, "{err}");
            assert!(err.message().contains(SEGMENT), "{err}");
        }
        (Err(e), Ok(_)) => panic!("the store opened bytes the decoder refused: {e:?}"),
    }
});
