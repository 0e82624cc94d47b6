//! The segment log's small files: the owner lock, the topics file and the log-start
//! checkpoint, the last two written atomically (temporary file, `fsync`, rename, `fsync` of
//! the directory).

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use coordinator_core::{LogError, TopicPartition};

pub(crate) use crate::fs::parent;
use crate::fs::Fs;

/// The owner lock's file name.
pub(crate) const LOCK: &str = ".lock";
/// The topics file's name.
pub(crate) const TOPICS: &str = "topics";
/// Kafka's name for the file of log start offsets.
pub(crate) const CHECKPOINT: &str = "log-start-offset-checkpoint";
/// Where each compacted partition is compacted up to (Kafka's file of that name, same
/// format as [`CHECKPOINT`]).
pub(crate) const CLEANER_CHECKPOINT: &str = "cleaner-offset-checkpoint";
const TOPICS_HEADER: &str =
    "# partition-log topics v1: <topic id, 32 hex digits> <partitions> <name>";

/// A storage error naming the step and the file.
pub(crate) fn storage(step: &str, path: &Path, e: io::Error) -> LogError {
    LogError::storage(format!("cannot {step} `{}`", path.display()), e)
}

/// A storage error for a file whose content is not what this log wrote.
pub(crate) fn malformed(path: &Path, reason: impl Into<String>) -> LogError {
    LogError::Storage {
        message: format!("`{}` is damaged: {}", path.display(), reason.into()),
        source: None,
    }
}

/// `fsync`s a directory, so the names created or removed in it are durable.
pub(crate) fn sync_dir<F: Fs>(fs: &F, dir: &Path) -> Result<(), LogError> {
    fs.fsync_dir(dir)
        .map_err(|e| storage("sync the directory", dir, e))
}

/// Replaces `path` with `bytes` atomically: a reader (or a restart after a crash) finds the
/// old content or the new, never a mix. A failure changes nothing: if the directory's sync
/// fails once the new file is renamed into place (the rename may still reach the disk), the
/// old content is put back the same way, or the file removed if there was none; only if
/// that fails too may a restart find the new content, and the error says so.
pub(crate) fn write_atomically<F: Fs>(fs: &F, path: &Path, bytes: &[u8]) -> Result<(), LogError> {
    let old = fs.read(path).map_err(|e| storage("read", path, e))?;
    replace(fs, path, bytes)?;
    let Err(e) = sync_dir(fs, parent(path)) else {
        return Ok(());
    };
    let restored = match &old {
        Some(old) => replace(fs, path, old),
        None => fs.remove_file(path).map_err(|e| storage("remove", path, e)),
    }
    .and_then(|()| sync_dir(fs, parent(path)));
    match (restored, e) {
        (Err(again), LogError::Storage { message, source }) => Err(LogError::Storage {
            message: format!(
                "{message}; putting the previous content back failed too ({again}): after a \
                 restart `{}` may hold the new content",
                path.display()
            ),
            source,
        }),
        (_, e) => Err(e),
    }
}

/// Writes `bytes` to `<path>.tmp`, syncs it and renames it over `path`.
fn replace<F: Fs>(fs: &F, path: &Path, bytes: &[u8]) -> Result<(), LogError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let write = || -> io::Result<()> {
        let f = fs.create_temp(&tmp)?;
        fs.write_all(&f, bytes)?;
        fs.fsync(&f)
    };
    write().map_err(|e| storage("write", &tmp, e))?;
    fs.rename(&tmp, path)
        .map_err(|e| storage("rename into place", path, e))
}

/// Takes the owner lock of `dir`: an `flock` held as long as the returned lock lives, so
/// a second process (or a second log in this one) is refused, and removing the file does not
/// let it in while the first one lives (the lock is on the open file, which the first owner
/// keeps).
pub(crate) fn lock<F: Fs>(fs: &F, dir: &Path) -> Result<F::Lock, LogError> {
    let path = dir.join(LOCK);
    match fs.try_lock(&path) {
        Ok(lock) => Ok(lock),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(LogError::Storage {
            message: format!(
                "`{}` is in use by another log (its lock `{}` is held): one owner per directory",
                dir.display(),
                path.display()
            ),
            source: None,
        }),
        Err(e) => Err(storage("lock", &path, e)),
    }
}

/// The text of the small file `path`, or `None` if it does not exist.
fn read_text<F: Fs>(fs: &F, path: &Path) -> Result<Option<String>, LogError> {
    match fs.read(path).map_err(|e| storage("read", path, e))? {
        None => Ok(None),
        Some(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| malformed(path, "it is not UTF-8 text")),
    }
}

/// An open file read from its start through the seam's positional reads (recovery's scan).
pub(crate) struct FileReader<'a, F: Fs> {
    pub(crate) fs: &'a F,
    pub(crate) file: &'a F::File,
    pub(crate) position: u64,
    pub(crate) len: u64,
}

impl<F: Fs> Read for FileReader<'_, F> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.len.saturating_sub(self.position);
        let n = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
        if n == 0 {
            return Ok(0);
        }
        self.fs.read_at(self.file, &mut buf[..n], self.position)?;
        self.position += n as u64;
        Ok(n)
    }
}

/// A topic as the topics file keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TopicEntry {
    pub(crate) name: String,
    pub(crate) id: [u8; 16],
    pub(crate) partitions: u32,
}

pub(crate) fn encode_topics<'a>(topics: impl Iterator<Item = &'a TopicEntry>) -> String {
    let mut out = format!("{TOPICS_HEADER}\n");
    for t in topics {
        let id: String = t.id.iter().map(|b| format!("{b:02x}")).collect();
        out.push_str(&format!("{id} {} {}\n", t.partitions, t.name));
    }
    out
}

/// Reads the topics file; a missing file is no topics (a new directory).
pub(crate) fn read_topics<F: Fs>(fs: &F, path: &Path) -> Result<Vec<TopicEntry>, LogError> {
    let Some(text) = read_text(fs, path)? else {
        return Ok(Vec::new());
    };
    let mut lines = text.lines();
    if lines.next() != Some(TOPICS_HEADER) {
        return Err(malformed(path, "its first line is not the topics header"));
    }
    lines
        .enumerate()
        .map(|(i, line)| {
            let bad = || malformed(path, format!("line {}: {line:?}", i + 2));
            let mut parts = line.splitn(3, ' ');
            let (Some(id), Some(count), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(bad());
            };
            let id = parse_id(id).ok_or_else(bad)?;
            let partitions = count.parse().map_err(|_| bad())?;
            Ok(TopicEntry {
                name: name.to_string(),
                id,
                partitions,
            })
        })
        .collect()
}

fn parse_id(hex: &str) -> Option<[u8; 16]> {
    if hex.len() != 32 || !hex.is_ascii() {
        return None;
    }
    let mut id = [0; 16];
    for (i, b) in id.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(id)
}

/// Kafka's checkpoint format: a version line `0`, a count line, then `topic partition offset`.
pub(crate) fn encode_checkpoint(starts: &BTreeMap<TopicPartition, i64>) -> String {
    let mut out = format!("0\n{}\n", starts.len());
    for (tp, start) in starts {
        out.push_str(&format!("{} {} {start}\n", tp.topic(), tp.partition()));
    }
    out
}

/// Reads the log-start checkpoint; a missing file is no entries.
pub(crate) fn read_checkpoint<F: Fs>(
    fs: &F,
    path: &Path,
) -> Result<BTreeMap<TopicPartition, i64>, LogError> {
    let Some(text) = read_text(fs, path)? else {
        return Ok(BTreeMap::new());
    };
    let mut lines = text.lines();
    if lines.next() != Some("0") {
        return Err(malformed(path, "its version line is not `0`"));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.parse().ok())
        .ok_or_else(|| malformed(path, "its second line is not a count"))?;
    let mut out = BTreeMap::new();
    for (i, line) in lines.enumerate() {
        let bad = || malformed(path, format!("line {}: {line:?}", i + 3));
        let mut parts = line.rsplitn(3, ' ');
        let (Some(offset), Some(partition), Some(topic)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let offset: i64 = offset.parse().map_err(|_| bad())?;
        let partition: u32 = partition.parse().map_err(|_| bad())?;
        out.insert(TopicPartition::new(topic, partition), offset);
    }
    if out.len() != count {
        return Err(malformed(
            path,
            format!("it announces {count} entries but holds {}", out.len()),
        ));
    }
    Ok(out)
}

/// A segment file's name: its base offset, 20 digits zero-padded, `.log` (Kafka's naming).
pub(crate) fn segment_name(base_offset: i64) -> String {
    format!("{base_offset:020}.log")
}

/// The base offset a segment file's name gives, or `None` for another file.
pub(crate) fn parse_segment_name(name: &str) -> Option<i64> {
    let digits = name.strip_suffix(".log")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The name of a compaction's committed output that replaces the segments whose base
/// offsets are in `first..end` (see the `clean` module): `<first>.log.<end>.swap`, both
/// offsets in 20 digits.
pub(crate) fn swap_name(first: i64, end: i64) -> String {
    format!("{}.{end:020}.swap", segment_name(first))
}

/// The `(first, end)` a swap file's name gives (`first < end`), or `None` if it is not one.
pub(crate) fn parse_swap_name(name: &str) -> Option<(i64, i64)> {
    let (segment, end) = name.strip_suffix(".swap")?.rsplit_once('.')?;
    let first = parse_segment_name(segment)?;
    let end: i64 = (end.len() == 20 && end.bytes().all(|b| b.is_ascii_digit()))
        .then(|| end.parse().ok())
        .flatten()?;
    (first < end).then_some((first, end))
}

/// A partition's directory name: `<topic>-<partition>` (Kafka's naming).
pub(crate) fn partition_dir(tp: &TopicPartition) -> String {
    format!("{}-{}", tp.topic(), tp.partition())
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::fs::StdFs;

    #[test]
    fn the_small_files_round_trip_and_refuse_damage() {
        let dir = tempfile::tempdir().unwrap();
        let topics = [TopicEntry {
            name: "a.b-c".into(),
            id: [0xab; 16],
            partitions: 3,
        }];
        let path = dir.path().join(TOPICS);
        assert!(
            read_topics(&StdFs, &path).unwrap().is_empty(),
            "missing: none"
        );
        write_atomically(&StdFs, &path, encode_topics(topics.iter()).as_bytes()).unwrap();
        assert_eq!(read_topics(&StdFs, &path).unwrap(), topics);
        fs::write(&path, format!("{TOPICS_HEADER}\nxyz 3 t\n")).unwrap();
        let err = read_topics(&StdFs, &path).unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("topics"), "{err}");

        let mut starts = BTreeMap::new();
        starts.insert(TopicPartition::new("a-1", 2), 40);
        starts.insert(TopicPartition::new("b", 0), 0);
        let path = dir.path().join(CHECKPOINT);
        write_atomically(&StdFs, &path, encode_checkpoint(&starts).as_bytes()).unwrap();
        assert_eq!(read_checkpoint(&StdFs, &path).unwrap(), starts);
        fs::write(&path, "0\n3\nb 0 0\n").unwrap();
        assert!(
            read_checkpoint(&StdFs, &path).is_err(),
            "a short checkpoint"
        );

        assert_eq!(segment_name(42), "00000000000000000042.log");
        assert_eq!(parse_segment_name(&segment_name(42)), Some(42));
        assert_eq!(parse_segment_name("42.log"), None);
        assert_eq!(parse_segment_name("00000000000000000042.log.tmp"), None);
        assert_eq!(
            swap_name(42, 4096),
            "00000000000000000042.log.00000000000000004096.swap"
        );
        assert_eq!(parse_swap_name(&swap_name(42, 4096)), Some((42, 4096)));
        assert_eq!(parse_swap_name(&swap_name(42, 42)), None, "an empty range");
        assert_eq!(parse_swap_name(&swap_name(43, 42)), None);
        assert_eq!(parse_swap_name("00000000000000000042.log.swap"), None);
        assert_eq!(parse_swap_name("00000000000000000042.log.4096.swap"), None);
        assert_eq!(parse_swap_name(&segment_name(42)), None);
    }

    #[test]
    fn a_second_owner_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock(&StdFs, dir.path()).unwrap();
        let err = lock(&StdFs, dir.path()).unwrap_err().to_string();
        assert!(err.contains("in use by another log"), "{err}");
        drop(first);
        lock(&StdFs, dir.path()).unwrap();
    }
}
