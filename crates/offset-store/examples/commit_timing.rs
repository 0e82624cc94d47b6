//! A quick, rough timing of durable JSON commits against the bare file-protocol floor.
//!
//! `cargo run --release -p offset-store --example commit_timing [commits]`
//!
//! For 10, 1,000 and 10,000 stored partitions of one group, it times single-partition
//! commits into a JSON store in a temporary directory, and the same bytes written with the
//! same protocol (temp file, fsync, rename, directory fsync) without the store: the floor.
//! Rounds alternate between the two so both see the same disk weather. It prints medians;
//! the criterion benches under `benches/` are the measurement of record.

use std::error::Error;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use coordinator_core::{CommitFence, OffsetMap, OffsetStore, TopicPartition};
use offset_store::JsonFileStore;

fn floor_write(dir: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let (tmp, target) = (dir.join("floor.json.tmp"), dir.join("floor.json"));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?; // as the fsync_floor bench does
    drop(file);
    std::fs::rename(&tmp, &target)?;
    File::open(dir)?.sync_all()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn main() -> Result<(), Box<dyn Error>> {
    let commits: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(200);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()?;
    println!("stored     json commit   floor       ratio   (medians of {commits})");
    for stored in [10u32, 1_000, 10_000] {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("offsets.json");
        let store = JsonFileStore::open(&path)?;
        let all: OffsetMap = (0..stored)
            .map(|p| {
                (
                    TopicPartition::new("topic-0000", p),
                    1_000_000 + i64::from(p),
                )
            })
            .collect();
        let (mut json, mut floor) = (Vec::new(), Vec::new());
        runtime.block_on(async {
            store.commit("group", &all, CommitFence::none()).await?;
            for i in 0..commits {
                let one: OffsetMap =
                    [(TopicPartition::new("topic-0000", 0), 2_000_000 + i as i64)].into();
                let start = Instant::now();
                store.commit("group", &one, CommitFence::none()).await?;
                json.push(start.elapsed());

                let bytes = std::fs::read(&path)?;
                let start = Instant::now();
                floor_write(dir.path(), &bytes)?;
                floor.push(start.elapsed());
            }
            Ok::<(), Box<dyn Error>>(())
        })?;
        let size = std::fs::metadata(&path)?.len();
        let (json, floor) = (median(json), median(floor));
        println!(
            "{stored:>6}     {json:>10.3?}   {floor:>10.3?}   {:.2}x   ({size} bytes)",
            json.as_secs_f64() / floor.as_secs_f64()
        );
    }
    Ok(())
}
