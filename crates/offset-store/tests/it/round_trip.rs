//! Save-then-load round trips over random offset maps: what a commit writes is exactly
//! serde_json's rendering of docs/rules.md#json-format, and reopening the file gives back the map.

use crate::common;

use common::{for_each_seed, merged, random_groups, reference_encoding, runtime, Groups, Rng};
use coordinator_core::{OffsetMap, TopicPartition};
use offset_store::testing::SimFs;
use offset_store::JsonFileStore;

const PATH: &str = "/data/offsets.json";
const MAPS: u64 = 10_000;

/// Mostly small maps; one in a hundred has hundreds of entries over a few topics.
fn random_map(rng: &mut Rng) -> Groups {
    if rng.percent(1) {
        let offsets: OffsetMap = (0..rng.below(800) as u32)
            .map(|p| {
                (
                    TopicPartition::new(format!("topic-{}", p % 7), p),
                    rng.below(1 << 40) as i64,
                )
            })
            .collect();
        return Groups::from([(format!("big-{}", rng.below(3)), offsets)]);
    }
    random_groups(rng, 5, 8)
}

#[test]
fn random_offset_maps_survive_save_then_load_byte_exact() {
    let rt = runtime();
    let mut entries = 0usize;
    let maps = for_each_seed(0x0FF5_E700_0000, MAPS, |seed| {
        let mut rng = Rng::new(seed);
        let (first, second) = (random_map(&mut rng), random_map(&mut rng));
        let fs = SimFs::new();
        let mut store = JsonFileStore::open_with_fs(PATH, fs.clone()).map_err(|e| e.to_string())?;
        let mut expected = Groups::new();
        for map in [&first, &second] {
            common::commit(&rt, &store, map).map_err(|e| e.to_string())?;
            expected = merged(&expected, map);
            entries += map.values().map(OffsetMap::len).sum::<usize>();
            let bytes = fs.file(PATH).unwrap_or_default();
            ensure!(
                expected.is_empty() || bytes == reference_encoding(&expected),
                "the file is not serde_json's rendering:\n{}\n{}",
                String::from_utf8_lossy(&bytes),
                String::from_utf8_lossy(&reference_encoding(&expected))
            );
            ensure!(store.snapshot() == expected, "memory differs");
            // The next commit goes through a store reopened from the file.
            drop(store);
            store = JsonFileStore::open_with_fs(PATH, fs.clone()).map_err(|e| e.to_string())?;
            ensure!(store.snapshot() == expected, "reopened differently");
        }
        Ok(())
    });
    println!("{maps} maps (each saved twice, merged), {entries} entries committed");
    assert!(maps >= MAPS || std::env::var("OFFSET_STORE_SEED").is_ok());
}
