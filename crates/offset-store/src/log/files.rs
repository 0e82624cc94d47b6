//! The files the store wrote before its log was a partition of the segment log, read (never
//! written) to import them at open.
//!
//! ```text
//! segment-<n>.log         the log, in segments numbered from 0 (20 digits, zero-padded)
//! snapshot-<n>.snap       the live state before segment n (the newest one counts)
//! snapshot-<n>.snap.tmp   a snapshot being written (ignored, removed after the import)
//! ```
//!
//! The reader takes the newest snapshot (or none), then replays every segment from its base
//! on, in order. Segments must follow one another without a gap, from the snapshot's base
//! (or 0). Only the tail of the last segment may be an interrupted write: it is left out.
//! Any other damage is a [`Corrupt`](StorageErrorKind::Corrupt) error naming the file and
//! the byte position, and nothing is changed.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use coordinator_core::{StorageError, StorageErrorKind};

use super::record::{decode_body_with, next_frame, Next, Record};
use super::state::Live;
use crate::fs::Fs;
use crate::group_commit::io_error;

const SEGMENT: (&str, &str) = ("segment-", ".log");
const SNAPSHOT: (&str, &str) = ("snapshot-", ".snap");
const TEMP: (&str, &str) = ("snapshot-", ".snap.tmp");

pub(crate) fn segment_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{}{n:020}{}", SEGMENT.0, SEGMENT.1))
}

pub(crate) fn snapshot_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{}{n:020}{}", SNAPSHOT.0, SNAPSHOT.1))
}

pub(crate) fn temp_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{}{n:020}{}", TEMP.0, TEMP.1))
}

/// The number in `name` if it is `<prefix><digits><suffix>`.
fn numbered(name: &OsStr, (prefix, suffix): (&str, &str)) -> Option<u64> {
    let name = name.to_str()?;
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The log files found in a directory, sorted.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    pub(crate) segments: Vec<u64>,
    pub(crate) snapshots: Vec<u64>,
    pub(crate) temps: Vec<u64>,
}

impl Listing {
    /// Whether the directory holds none of the old engine's files.
    pub(crate) fn is_empty(&self) -> bool {
        self.segments.is_empty() && self.snapshots.is_empty() && self.temps.is_empty()
    }

    /// The paths of every file listed.
    pub(crate) fn paths(&self, dir: &Path) -> Vec<PathBuf> {
        let segments = self.segments.iter().map(|&n| segment_path(dir, n));
        let snapshots = self.snapshots.iter().map(|&n| snapshot_path(dir, n));
        let temps = self.temps.iter().map(|&n| temp_path(dir, n));
        segments.chain(snapshots).chain(temps).collect()
    }
}

pub(crate) fn list<F: Fs>(fs: &F, dir: &Path) -> Result<Listing, StorageError> {
    let names = fs
        .list_dir(dir)
        .map_err(|e| io_error(format!("cannot list log directory `{}`", dir.display()), e))?;
    let mut listing = Listing::default();
    for name in &names {
        // The temp suffix first: `.snap.tmp` also ends in neither `.snap` nor `.log`.
        if let Some(n) = numbered(name, TEMP) {
            listing.temps.push(n);
        } else if let Some(n) = numbered(name, SNAPSHOT) {
            listing.snapshots.push(n);
        } else if let Some(n) = numbered(name, SEGMENT) {
            listing.segments.push(n);
        }
    }
    listing.segments.sort_unstable();
    listing.snapshots.sort_unstable();
    listing.temps.sort_unstable();
    Ok(listing)
}

fn corrupt(path: &Path, at: usize, why: &str) -> StorageError {
    StorageError::new(
        StorageErrorKind::Corrupt,
        format!(
            "log file `{}` is damaged at byte {at}: {why}; nothing was changed (a damaged \
             record before the end of the log is never cut off, since acknowledged writes \
             follow it)",
            path.display()
        ),
    )
}

fn read<F: Fs>(fs: &F, path: &Path) -> Result<Vec<u8>, StorageError> {
    match fs.read(path) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(StorageError::new(
            StorageErrorKind::Io,
            format!(
                "log file `{}` disappeared while it was read",
                path.display()
            ),
        )),
        Err(e) => Err(io_error(
            format!("cannot read log file `{}`", path.display()),
            e,
        )),
    }
}

/// Reads the old engine's log in `dir` (whose lock the caller holds), changing nothing: the
/// state it holds. A torn tail is left out (as the old engine cut it off at open).
pub(crate) fn recover<F: Fs>(fs: &F, dir: &Path) -> Result<Live, StorageError> {
    let listing = list(fs, dir)?;
    let mut live = Live::default();
    let base = match listing.snapshots.last() {
        Some(&n) => {
            let path = snapshot_path(dir, n);
            let bytes = read(fs, &path)?;
            load_snapshot(&path, &bytes, n, &mut live)?;
            n
        }
        None => 0,
    };
    let replayed: Vec<u64> = listing
        .segments
        .iter()
        .copied()
        .filter(|&n| n >= base)
        .collect();
    for (i, &n) in replayed.iter().enumerate() {
        let expected = base + i as u64;
        if n != expected {
            return Err(StorageError::new(
                StorageErrorKind::Corrupt,
                format!(
                    "log directory `{}` lacks segment `{}` (found `{}` after it): written \
                     records are missing",
                    dir.display(),
                    segment_path(dir, expected).display(),
                    segment_path(dir, n).display()
                ),
            ));
        }
    }
    if base > 0 && replayed.first() != Some(&base) {
        return Err(StorageError::new(
            StorageErrorKind::Corrupt,
            format!(
                "log directory `{}` has snapshot `{}` but not its segment `{}`",
                dir.display(),
                snapshot_path(dir, base).display(),
                segment_path(dir, base).display()
            ),
        ));
    }
    for (i, &n) in replayed.iter().enumerate() {
        let path = segment_path(dir, n);
        let bytes = read(fs, &path)?;
        let last = i + 1 == replayed.len();
        replay_segment(&path, &bytes, last, &mut live)?;
    }
    Ok(live)
}

/// Replays one segment into `live`; the length of its intact frames.
fn replay_segment(
    path: &Path,
    bytes: &[u8],
    last: bool,
    live: &mut Live,
) -> Result<usize, StorageError> {
    let mut at = 0;
    let mut topic = None;
    loop {
        match next_frame(bytes, at) {
            Next::End => return Ok(at),
            Next::Torn(why) if last => {
                tracing::warn!(
                    file = %path.display(), position = at, reason = %why,
                    "cutting off the torn tail of the log (a write that was never acknowledged)"
                );
                return Ok(at);
            }
            Next::Torn(why) => {
                return Err(corrupt(
                    path,
                    at,
                    &format!("{why}, in a segment that is not the last"),
                ))
            }
            Next::Corrupt(why) => return Err(corrupt(path, at, &why)),
            Next::Frame(body, next) => {
                let records = decode_body_with(body, &mut topic);
                for record in records.map_err(|why| corrupt(path, at, &why))? {
                    if !live.apply(record) {
                        return Err(corrupt(path, at, "a snapshot record in a segment"));
                    }
                }
                at = next;
            }
        }
    }
}

/// Loads a whole snapshot into `live`: it starts with its base and ends with its counts.
fn load_snapshot(
    path: &Path,
    bytes: &[u8],
    base: u64,
    live: &mut Live,
) -> Result<(), StorageError> {
    let mut at = 0;
    let mut started = false;
    let mut topic = None;
    loop {
        match next_frame(bytes, at) {
            Next::End => return Err(corrupt(path, at, "the snapshot has no end record")),
            Next::Torn(why) | Next::Corrupt(why) => return Err(corrupt(path, at, &why)),
            Next::Frame(body, next) => {
                let records = decode_body_with(body, &mut topic);
                let records = records.map_err(|why| corrupt(path, at, &why))?;
                let n = records.len();
                for (i, record) in records.into_iter().enumerate() {
                    match record {
                        Record::SnapshotEnd { .. } if i + 1 != n => {
                            return Err(corrupt(path, at, "records after the snapshot's end"));
                        }
                        Record::SnapshotStart { base: b } if !started && b == base => {
                            started = true;
                        }
                        Record::SnapshotEnd { offsets, groups } if started => {
                            if next != bytes.len() {
                                return Err(corrupt(path, next, "bytes after the snapshot's end"));
                            }
                            if offsets != live.count || groups != live.groups.len() as u64 {
                                return Err(corrupt(
                                    path,
                                    at,
                                    &format!(
                                        "the snapshot says {offsets} offsets and {groups} \
                                         groups, it holds {} and {}",
                                        live.count,
                                        live.groups.len()
                                    ),
                                ));
                            }
                            return Ok(());
                        }
                        record if started => {
                            if !live.apply(record) {
                                return Err(corrupt(path, at, "a misplaced snapshot record"));
                            }
                        }
                        _ => {
                            return Err(corrupt(
                                path,
                                at,
                                &format!("the snapshot does not start with its base {base}"),
                            ))
                        }
                    }
                }
                at = next;
            }
        }
    }
}
