//! The files a [`JsonFileStore`](super::JsonFileStore) keeps beside its offset file
//! `<name>`: the owner lock `<name>.lock` and temporary files `<name>.tmp.<pid>.<random>`.
//!
//! # Why a sibling lock file
//!
//! The offset file itself cannot carry the lock: every commit replaces it by a rename, and a
//! lock belongs to the file (the inode) it was taken on, so a second opener would lock the
//! new file while the first still held the old one. The directory is stable, but a lock on it
//! would let only one store live in a directory whatever its file name. `<name>.lock` is
//! never renamed, truncated or removed, so every opener of `<name>` locks the same file. It is
//! not removed on close either: removing it would let an opener that had already opened the
//! old lock file and one that creates a new one both "hold" the lock. Its presence means
//! nothing; only a lock held on it does, and the kernel releases that when the owning process
//! ends, however it ends.

use std::ffi::{OsStr, OsString};
use std::hash::{BuildHasher, RandomState};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use coordinator_core::{StorageError, StorageErrorKind};

/// The paths of one store.
#[derive(Debug)]
pub(crate) struct Files {
    /// The offset file.
    pub(crate) path: PathBuf,
    /// Its directory, fsynced after each rename (`.` for a bare file name).
    pub(crate) dir: PathBuf,
    /// The owner lock, `<name>.lock`.
    pub(crate) lock: PathBuf,
    /// This store's temporary file, `<name>.tmp.<pid>.<random>`.
    pub(crate) temp: PathBuf,
    /// `<name>.tmp`: every temporary file of this offset file starts with it.
    temp_stem: OsString,
}

impl Files {
    /// The paths for the offset file `path`.
    ///
    /// # Errors
    /// [`Other`](StorageErrorKind::Other) if `path` has no file name.
    pub(crate) fn new(path: &Path) -> Result<Files, StorageError> {
        let Some(name) = path.file_name() else {
            return Err(StorageError::new(
                StorageErrorKind::Other,
                format!("offset file path `{}` has no file name", path.display()),
            ));
        };
        let with_suffix = |suffix: &str| {
            let mut s = name.to_os_string();
            s.push(suffix);
            s
        };
        let temp_stem = with_suffix(".tmp");
        let mut temp_name = temp_stem.clone();
        temp_name.push(format!(".{}.{:016x}", std::process::id(), random()));
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Ok(Files {
            path: path.to_path_buf(),
            dir,
            lock: path.with_file_name(with_suffix(".lock")),
            temp: path.with_file_name(temp_name),
            temp_stem,
        })
    }

    /// Whether the directory entry `entry` is a temporary file of this offset file: one of
    /// any store (`<name>.tmp.…`), or the fixed `<name>.tmp` of earlier versions.
    pub(crate) fn is_temp(&self, entry: &OsStr) -> bool {
        let (entry, stem) = (entry.as_encoded_bytes(), self.temp_stem.as_encoded_bytes());
        entry
            .strip_prefix(stem)
            .is_some_and(|rest| rest.is_empty() || rest[0] == b'.')
    }

    /// The path of the directory entry `entry`, a sibling of the offset file.
    pub(crate) fn sibling(&self, entry: &OsStr) -> PathBuf {
        self.path.with_file_name(entry)
    }
}

/// 64 bits that differ between processes and between calls: a per-process random key
/// (std's `RandomState`), the time and a counter.
fn random() -> u64 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    RandomState::new().hash_one((SystemTime::now(), CALLS.fetch_add(1, Ordering::Relaxed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siblings_of_the_offset_file() -> Result<(), StorageError> {
        let files = Files::new(Path::new("/data/offsets.json"))?;
        assert_eq!(files.dir, Path::new("/data"));
        assert_eq!(files.lock, Path::new("/data/offsets.json.lock"));
        let temp = files.temp.to_string_lossy().into_owned();
        let prefix = format!("/data/offsets.json.tmp.{}.", std::process::id());
        assert!(temp.starts_with(&prefix), "{temp}");
        assert_eq!(temp.len(), prefix.len() + 16, "{temp}");
        let other = Files::new(Path::new("/data/offsets.json"))?;
        assert_ne!(files.temp, other.temp, "two stores never share a temp file");

        let bare = Files::new(Path::new("offsets.json"))?;
        assert_eq!(bare.dir, Path::new("."));
        assert_eq!(bare.sibling(OsStr::new("x")), Path::new("x"));
        assert!(Files::new(Path::new("/")).is_err());
        Ok(())
    }

    #[test]
    fn only_this_files_temps_are_temps() -> Result<(), StorageError> {
        let files = Files::new(Path::new("/data/offsets.json"))?;
        for temp in [
            "offsets.json.tmp",
            "offsets.json.tmp.1.ab",
            "offsets.json.tmp.",
        ] {
            assert!(files.is_temp(OsStr::new(temp)), "{temp}");
        }
        let others = [
            "offsets.json",
            "offsets.json.lock",
            "offsets.json.tmpx",
            "offsets.json.tm",
            "other.json.tmp.1.ab",
            "xoffsets.json.tmp",
        ];
        for other in others {
            assert!(!files.is_temp(OsStr::new(other)), "{other}");
        }
        Ok(())
    }
}
