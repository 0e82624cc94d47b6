//! Fuzzes the segment log's recovery with arbitrary bytes as a partition's only segment.
//!
//! Checks, for every input: opening never panics; it either fails with a storage error
//! naming the segment file, or opens a log whose batches all read back, which takes an
//! append at its end, and whose segment file then starts with the bytes recovery kept.

#![no_main]

use coordinator_core::{Bytes, LogError, NewRecord, TopicPartition};
use libfuzzer_sys::fuzz_target;
use partition_log::fs::sim::SimFs;
use partition_log::{PartitionLog, SegmentLog};

const DIR: &str = "/fuzz";
const SEGMENT: &str = "/fuzz/t-0/00000000000000000000.log";

fuzz_target!(|data: &[u8]| {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let fs = SimFs::new();
    let tp = TopicPartition::new("t", 0);
    rt.block_on(async {
        let log = SegmentLog::builder(DIR)
            .open_with_fs(fs.clone())
            .expect("a new log");
        log.create_topic("t", 1).await.expect("a topic");
    });
    fs.put_file(SEGMENT, data);
    match SegmentLog::builder(DIR).open_with_fs(fs.clone()) {
        Err(LogError::Storage { message, .. }) => {
            assert!(message.contains(SEGMENT), "{message}");
        }
        Err(e) => panic!("not a storage error: {e:?}"),
        Ok(log) => rt.block_on(async {
            let (start, end) = log.bounds(&tp).await.expect("bounds");
            let mut next = start;
            while next < end {
                let read = log.read_batches(&tp, next, 1 << 20).await.expect("a read");
                next = read.batches.last().expect("a batch").last_offset() + 1;
            }
            let kept = fs.file(SEGMENT).unwrap_or_default();
            assert!(data.starts_with(&kept), "recovery only cuts a tail");
            let base = log
                .append_encoded(
                    &tp,
                    vec![NewRecord::new(&b"x"[..])],
                    Box::new(|_| Bytes::from(&b"after"[..])),
                )
                .await
                .expect("an append after recovery");
            assert_eq!(base, end);
        }),
    }
});
