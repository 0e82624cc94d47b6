//! Appends and reads 1 KiB batches through the `PartitionLog` port, in process, on the
//! memory log and on the segment log (each append `fdatasync`ed, from one task and from 16
//! concurrent ones, which group commit serves with shared syncs; and with a 1000 ms flush
//! interval), and prints MB/s each way: the log's own cost, without the wire.
//!
//! ```text
//! cargo run --release -p partition-log --example segment_throughput -- [BATCHES] [DIR]
//! ```
//!
//! `DIR` (default: a directory under the system's temporary one, removed at the end) must be
//! on the disk to measure.

use std::sync::Arc;
use std::time::Instant;

use coordinator_core::{Bytes, LogError, NewRecord, TopicPartition};
use partition_log::{MemoryLog, PartitionLog, SegmentLog};

const RECORD: usize = 1024;
const PER_BATCH: usize = 16;

/// Appends `batches` batches to one partition from `appenders` concurrent tasks, then reads
/// them back.
async fn measure(
    name: &str,
    log: Arc<dyn PartitionLog>,
    batches: usize,
    appenders: usize,
) -> Result<(), LogError> {
    log.create_topic("bench", 1).await?;
    let tp = TopicPartition::new("bench", 0);
    let data = Bytes::from(vec![7u8; RECORD * PER_BATCH]);
    let started = Instant::now();
    let tasks: Vec<_> = (0..appenders)
        .map(|_| {
            let (log, tp, data) = (log.clone(), tp.clone(), data.clone());
            tokio::spawn(async move {
                for _ in 0..batches / appenders {
                    let records = (0..PER_BATCH).map(|_| NewRecord::from("v")).collect();
                    let data = data.clone();
                    log.append_encoded(&tp, records, Box::new(move |_| data))
                        .await?;
                }
                Ok::<(), LogError>(())
            })
        })
        .collect();
    for task in tasks {
        task.await
            .map_err(|e| LogError::storage("an appender panicked", e))??;
    }
    let batches = batches / appenders * appenders;
    let append_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let (mut offset, mut bytes) = (0, 0usize);
    loop {
        let read = log.read_batches(&tp, offset, 1 << 20).await?;
        let Some(last) = read.batches.last() else {
            break;
        };
        offset = last.last_offset() + 1;
        bytes += read.batches.iter().map(|b| b.size()).sum::<usize>();
    }
    let read_s = started.elapsed().as_secs_f64();
    let mb = (batches * RECORD * PER_BATCH) as f64 / 1e6;
    println!(
        "{name:<30} append {:>8.1} MB/s ({:>6.0} batches/s)   read {:>8.1} MB/s",
        mb / append_s,
        batches as f64 / append_s,
        bytes as f64 / 1e6 / read_s
    );
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let batches: usize = args.next().map_or(Ok(2000), |a| a.parse())?;
    let base = args.next().map_or_else(std::env::temp_dir, Into::into);
    let dir = base.join(format!("log-throughput-{}", std::process::id()));
    measure("memory", Arc::new(MemoryLog::new()), batches, 1).await?;
    let sync = SegmentLog::builder(dir.join("sync")).open()?;
    measure("segment, fdatasync each", Arc::new(sync), batches, 1).await?;
    let group = SegmentLog::builder(dir.join("group")).open()?;
    measure("segment, fdatasync, 16 tasks", Arc::new(group), batches, 16).await?;
    let interval = SegmentLog::builder(dir.join("interval"))
        .flush_interval_ms(Some(1000))
        .open()?;
    measure("segment, flush 1000 ms", Arc::new(interval), batches, 1).await?;
    // Recovery: a reopen scans every byte and checks every CRC.
    let bytes = batches * RECORD * PER_BATCH * 3;
    let started = Instant::now();
    for name in ["sync", "group", "interval"] {
        drop(SegmentLog::builder(dir.join(name)).open()?);
    }
    let open_s = started.elapsed().as_secs_f64();
    println!(
        "{:<30} {:>8.1} MB/s ({:.0} ms for {:.0} MB, from the page cache)",
        "reopen (recovery scan)",
        bytes as f64 / 1e6 / open_s,
        open_s * 1000.0,
        bytes as f64 / 1e6
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
