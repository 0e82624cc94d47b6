//! The file-system seam of [`JsonFileStore`](crate::JsonFileStore) and
//! [`LogStore`](crate::LogStore).
//!
//! The stores touch the file system only through the operations of [`Fs`], so a test
//! can replace the real file system ([`StdFs`]) with one that cuts power after any single
//! operation or fails one with `EIO` or `ENOSPC` ([`SimFs`](crate::testing::SimFs)). The
//! store is generic over its `Fs`, so the production path is monomorphised: no boxing and no
//! dynamic dispatch between the store and `std::fs`.

use std::ffi::OsString;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::path::Path;

/// The file operations the JSON store and the log store need, and nothing more (the JSON
/// store uses the first nine; the log store adds [`open_append`](Fs::open_append),
/// [`truncate`](Fs::truncate) and [`try_lock_dir`](Fs::try_lock_dir)).
///
/// # To ensure correctness
/// The store's durability argument assumes POSIX semantics:
/// - [`rename`](Fs::rename) atomically replaces `to`: a concurrent or later reader sees the
///   old file or the new one, never a mix or no file;
/// - data written to a file is durable once [`fsync`](Fs::fsync) on it returns `Ok`;
/// - a rename, a creation or a removal is durable once [`fsync_dir`](Fs::fsync_dir) on the
///   parent directory returns `Ok`;
/// - a [`truncate`](Fs::truncate) is durable once [`fsync`](Fs::fsync) on the file returns
///   `Ok`; until then a power cut may bring the cut bytes back.
///
/// - [`try_lock`](Fs::try_lock) is exclusive between every holder, in this process or any
///   other: while one handle holds the lock on a path, every other attempt fails.
///
/// Every method is blocking; the store calls them only from `open` and from its writer
/// thread, never from an async task.
pub trait Fs: Send + Sync + 'static {
    /// An open, writable file.
    type File: Send;

    /// A held lock; dropping it releases the lock.
    type Lock: Send + Sync + 'static;

    /// The whole content of `path`, or `None` if it does not exist.
    fn read(&self, path: &Path) -> io::Result<Option<Vec<u8>>>;

    /// Creates `path` for writing, truncating it if it exists.
    fn create_temp(&self, path: &Path) -> io::Result<Self::File>;

    /// Writes all of `data` at the end of `file`.
    fn write_all(&self, file: &mut Self::File, data: &[u8]) -> io::Result<()>;

    /// Makes `file`'s content durable (`fdatasync`).
    fn fsync(&self, file: &mut Self::File) -> io::Result<()>;

    /// Atomically renames `from` to `to`, replacing `to` if it exists.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Makes the entries of directory `dir` durable (`fsync` on the directory).
    fn fsync_dir(&self, dir: &Path) -> io::Result<()>;

    /// Removes the file `path`.
    fn remove_file(&self, path: &Path) -> io::Result<()>;

    /// Takes an exclusive lock on the file `path`, creating it empty if it does not exist,
    /// without waiting: if anyone holds it already (another process, or another handle in
    /// this one) this fails at once with [`io::ErrorKind::WouldBlock`]. The lock is held
    /// until the returned value is dropped or the process ends. The file's content is never
    /// touched.
    fn try_lock(&self, path: &Path) -> io::Result<Self::Lock>;

    /// The names of the entries of directory `dir`, in no particular order.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>>;

    /// Opens `path` for appending, creating it empty if it does not exist; every
    /// [`write_all`](Fs::write_all) on it goes at its end. A creation is durable once the
    /// directory is fsynced.
    fn open_append(&self, path: &Path) -> io::Result<Self::File>;

    /// Cuts `file` to its first `len` bytes; later appends go on from there.
    fn truncate(&self, file: &mut Self::File, len: u64) -> io::Result<()>;

    /// Takes an exclusive lock on the directory `dir` itself, without waiting, as
    /// [`try_lock`](Fs::try_lock) does on a file. No file is created, so removing any file
    /// in `dir` cannot release or bypass it.
    fn try_lock_dir(&self, dir: &Path) -> io::Result<Self::Lock>;
}

/// The real file system, through `std::fs`.
#[derive(Clone, Copy, Debug, Default)]
pub struct StdFs;

impl Fs for StdFs {
    type File = File;
    /// The open lock file; closing it releases the lock.
    type Lock = File;

    fn read(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        match std::fs::read(path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn create_temp(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
    }

    fn write_all(&self, file: &mut File, data: &[u8]) -> io::Result<()> {
        file.write_all(data)
    }

    fn fsync(&self, file: &mut File) -> io::Result<()> {
        // fdatasync also flushes the metadata needed to read the data back (the new size and
        // block map), which is all a freshly written temp file needs.
        file.sync_data()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    #[cfg(unix)]
    fn fsync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    #[cfg(not(unix))]
    fn fsync_dir(&self, _dir: &Path) -> io::Result<()> {
        // Directories cannot be opened as files here; the rename's durability is left to the
        // platform (NTFS journals metadata).
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    /// `File::try_lock`: `flock(LOCK_EX | LOCK_NB)` on Unix, `LockFileEx` on Windows. The
    /// lock belongs to the open file, so two handles in one process exclude each other as
    /// two processes do, and the kernel drops it when the process dies, however it dies.
    fn try_lock(&self, path: &Path) -> io::Result<File> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(file),
            Err(TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the lock is held by another handle",
            )),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        std::fs::read_dir(dir)?
            .map(|entry| entry.map(|e| e.file_name()))
            .collect()
    }

    /// `O_APPEND | O_CREAT`: the kernel puts every write at the current end of the file,
    /// including after a [`truncate`](Fs::truncate).
    fn open_append(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new().append(true).create(true).open(path)
    }

    /// `ftruncate`.
    fn truncate(&self, file: &mut File, len: u64) -> io::Result<()> {
        file.set_len(len)
    }

    /// `flock(LOCK_EX | LOCK_NB)` on the directory opened read-only (Linux and the BSDs lock
    /// directories as they lock files). The lock belongs to that open directory, so it
    /// excludes every other handle, in this process or another, and dies with the process.
    fn try_lock_dir(&self, dir: &Path) -> io::Result<File> {
        let handle = File::open(dir)?;
        match handle.try_lock() {
            Ok(()) => Ok(handle),
            Err(TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the directory is locked by another handle",
            )),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn std_fs_round_trips_through_rename() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let (tmp, target) = (dir.path().join("f.tmp"), dir.path().join("f"));
        let fs = StdFs;
        assert_eq!(fs.read(&target)?, None);
        let mut file = fs.create_temp(&tmp)?;
        fs.write_all(&mut file, b"hello")?;
        fs.fsync(&mut file)?;
        drop(file);
        fs.rename(&tmp, &target)?;
        fs.fsync_dir(dir.path())?;
        assert_eq!(fs.read(&target)?, Some(b"hello".to_vec()));
        assert_eq!(fs.read(&tmp)?, None);
        // create_temp truncates what an earlier, interrupted attempt left behind.
        std::fs::write(&tmp, b"a much longer leftover")?;
        let mut file = fs.create_temp(&tmp)?;
        fs.write_all(&mut file, b"x")?;
        drop(file);
        assert_eq!(std::fs::read(&tmp)?, b"x");
        fs.remove_file(&tmp)?;
        assert_eq!(fs.read(&tmp)?, None);
        Ok(())
    }

    #[test]
    fn a_lock_excludes_every_other_handle_until_dropped() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f.lock");
        let held = StdFs.try_lock(&path)?;
        assert_eq!(std::fs::read(&path)?, b"", "the lock file is created empty");
        let err = StdFs.try_lock(&path).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        drop(held);
        let again = StdFs.try_lock(&path)?;
        drop(again);
        let names = StdFs.list_dir(dir.path())?;
        assert_eq!(names, [OsString::from("f.lock")]);
        Ok(())
    }

    #[test]
    fn appends_go_at_the_end_even_after_a_truncate() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("seg");
        let fs = StdFs;
        let mut file = fs.open_append(&path)?;
        fs.write_all(&mut file, b"abcdef")?;
        fs.truncate(&mut file, 2)?;
        fs.write_all(&mut file, b"xy")?;
        fs.fsync(&mut file)?;
        drop(file);
        let mut again = fs.open_append(&path)?;
        fs.write_all(&mut again, b"!")?;
        assert_eq!(std::fs::read(&path)?, b"abxy!");
        Ok(())
    }

    #[test]
    fn a_directory_lock_excludes_other_handles_and_survives_removing_files() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("f"), b"")?;
        let held = StdFs.try_lock_dir(dir.path())?;
        std::fs::remove_file(dir.path().join("f"))?;
        let err = StdFs.try_lock_dir(dir.path()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert!(
            StdFs.list_dir(dir.path())?.is_empty(),
            "no lock file is made"
        );
        drop(held);
        drop(StdFs.try_lock_dir(dir.path())?);
        Ok(())
    }

    #[test]
    fn reading_a_directory_is_an_error_not_a_missing_file() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        assert!(StdFs.read(dir.path()).is_err());
        Ok(())
    }
}
