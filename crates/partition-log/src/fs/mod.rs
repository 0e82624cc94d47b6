//! The file-system seam of the durable logs: [`SegmentLog`](crate::SegmentLog) and the
//! group stores of `offset-store` (`JsonFileStore`, `LogStore`).
//!
//! A log touches the file system only through the operations of [`Fs`], so a test can
//! replace the real file system ([`StdFs`]) with one that cuts power after any single
//! operation or fails one with `EIO` or `ENOSPC` ([`SimFs`](sim::SimFs)). The logs are
//! generic over their `Fs`, so the production path is monomorphised: no boxing and no
//! dynamic dispatch between the log and `std::fs`.

use std::ffi::OsString;
use std::fmt::Debug;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::path::Path;

pub mod sim;

/// The directory `path` is in (`.` for a bare name): the directory whose fsync makes an
/// entry for `path` durable.
pub(crate) fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The file operations the durable logs need, and nothing more.
///
/// Files are written in two ways: at their end ([`write_all`](Fs::write_all), the group
/// stores' appends and every atomically replaced small file), or at a position
/// ([`write_at`](Fs::write_at), the segment log's appends, whose files are also read at
/// positions by concurrent readers through a shared handle). Every method on an open file
/// takes it by shared reference, so one handle can be read and written from several threads.
///
/// # To ensure correctness
/// The logs' durability argument assumes POSIX semantics:
/// - [`rename`](Fs::rename) atomically replaces `to`: a concurrent or later reader sees the
///   old file or the new one, never a mix or no file;
/// - data written to a file is durable once [`fsync`](Fs::fsync) on it returns `Ok`;
/// - a rename, a creation or a removal is durable once [`fsync_dir`](Fs::fsync_dir) on the
///   parent directory returns `Ok` (a directory's creation or removal included);
/// - a [`truncate`](Fs::truncate) is durable once [`fsync`](Fs::fsync) on the file returns
///   `Ok`; until then a power cut may bring the cut bytes back.
/// - [`try_lock`](Fs::try_lock) is exclusive between every holder, in this process or any
///   other: while one handle holds the lock on a path, every other attempt fails.
///
/// Every method is blocking; the logs call them from `open`, their writer threads and
/// `spawn_blocking`, never directly from an async task.
pub trait Fs: Send + Sync + Debug + 'static {
    /// An open file, readable and writable.
    type File: Send + Sync + Debug + 'static;

    /// A held lock; dropping it releases the lock.
    type Lock: Send + Sync + 'static;

    /// The whole content of `path`, or `None` if it does not exist.
    fn read(&self, path: &Path) -> io::Result<Option<Vec<u8>>>;

    /// Creates `path` for reading and writing, truncating it if it exists.
    fn create_temp(&self, path: &Path) -> io::Result<Self::File>;

    /// Writes all of `data` at the end of `file`.
    fn write_all(&self, file: &Self::File, data: &[u8]) -> io::Result<()>;

    /// Makes `file`'s content durable (`fdatasync`).
    fn fsync(&self, file: &Self::File) -> io::Result<()>;

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
    fn truncate(&self, file: &Self::File, len: u64) -> io::Result<()>;

    /// Takes an exclusive lock on the directory `dir` itself, without waiting, as
    /// [`try_lock`](Fs::try_lock) does on a file. No file is created, so removing any file
    /// in `dir` cannot release or bypass it.
    fn try_lock_dir(&self, dir: &Path) -> io::Result<Self::Lock>;

    /// Opens the existing file `path` for reading and for writing at positions
    /// ([`write_at`](Fs::write_at)); [`io::ErrorKind::NotFound`] if it does not exist.
    fn open(&self, path: &Path) -> io::Result<Self::File>;

    /// Writes all of `data` into `file` at byte `position`, extending the file (with zeros
    /// before `position`, if it is past the end) as needed.
    fn write_at(&self, file: &Self::File, data: &[u8], position: u64) -> io::Result<()>;

    /// Fills `buf` from `file` at byte `position`;
    /// [`io::ErrorKind::UnexpectedEof`] if the file ends first.
    fn read_at(&self, file: &Self::File, buf: &mut [u8], position: u64) -> io::Result<()>;

    /// The length of `file` in bytes.
    fn len(&self, file: &Self::File) -> io::Result<u64>;

    /// Whether a file or a directory exists at `path`.
    fn exists(&self, path: &Path) -> io::Result<bool>;

    /// Creates the directory `dir` and any missing parent. Each creation is durable once
    /// the parent of the directory created is fsynced.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;

    /// Removes the directory `dir` with everything in it. Durable once its parent is
    /// fsynced.
    fn remove_dir_all(&self, dir: &Path) -> io::Result<()>;
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
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
    }

    fn write_all(&self, mut file: &File, data: &[u8]) -> io::Result<()> {
        file.write_all(data)
    }

    fn fsync(&self, file: &File) -> io::Result<()> {
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
    fn truncate(&self, file: &File, len: u64) -> io::Result<()> {
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

    fn open(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new().read(true).write(true).open(path)
    }

    /// `pwrite` (the file must not be opened with `O_APPEND`, which would ignore the
    /// position: [`create_temp`](Fs::create_temp) and [`open`](Fs::open) do not).
    fn write_at(&self, file: &File, data: &[u8], position: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(file, data, position)
    }

    /// `pread`.
    fn read_at(&self, file: &File, buf: &mut [u8], position: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, position)
    }

    fn len(&self, file: &File) -> io::Result<u64> {
        Ok(file.metadata()?.len())
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        path.try_exists()
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(dir)
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
        let file = fs.create_temp(&tmp)?;
        fs.write_all(&file, b"hello")?;
        fs.fsync(&file)?;
        drop(file);
        fs.rename(&tmp, &target)?;
        fs.fsync_dir(dir.path())?;
        assert_eq!(fs.read(&target)?, Some(b"hello".to_vec()));
        assert_eq!(fs.read(&tmp)?, None);
        // create_temp truncates what an earlier, interrupted attempt left behind.
        std::fs::write(&tmp, b"a much longer leftover")?;
        let file = fs.create_temp(&tmp)?;
        fs.write_all(&file, b"x")?;
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
        let file = fs.open_append(&path)?;
        fs.write_all(&file, b"abcdef")?;
        fs.truncate(&file, 2)?;
        fs.write_all(&file, b"xy")?;
        fs.fsync(&file)?;
        drop(file);
        let again = fs.open_append(&path)?;
        fs.write_all(&again, b"!")?;
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

    #[test]
    fn positional_writes_and_reads_share_one_handle() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let sub = dir.path().join("a/b");
        let fs = StdFs;
        assert!(!fs.exists(&sub)?);
        fs.create_dir_all(&sub)?;
        assert!(fs.exists(&sub)?);
        let path = sub.join("seg");
        assert_eq!(fs.open(&path).unwrap_err().kind(), io::ErrorKind::NotFound);
        let file = fs.create_temp(&path)?;
        fs.write_at(&file, b"abc", 0)?;
        fs.write_at(&file, b"xy", 5)?;
        assert_eq!(fs.len(&file)?, 7);
        let mut buf = [0; 7];
        fs.read_at(&file, &mut buf, 0)?;
        assert_eq!(&buf, b"abc\0\0xy");
        let again = fs.open(&path)?;
        let mut two = [0; 2];
        fs.read_at(&again, &mut two, 5)?;
        assert_eq!(&two, b"xy");
        let err = fs.read_at(&again, &mut buf, 3).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        fs.remove_dir_all(&dir.path().join("a"))?;
        assert!(!fs.exists(&sub)?);
        Ok(())
    }
}
