//! The file-system seam of [`JsonFileStore`](crate::JsonFileStore).
//!
//! The store touches the file system only through the seven operations of [`Fs`], so a test
//! can replace the real file system ([`StdFs`]) with one that cuts power after any single
//! operation or fails one with `EIO` or `ENOSPC` ([`SimFs`](crate::testing::SimFs)). The
//! store is generic over its `Fs`, so the production path is monomorphised: no boxing and no
//! dynamic dispatch between the store and `std::fs`.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// The file operations the JSON store needs, and nothing more.
///
/// # To ensure correctness
/// The store's durability argument assumes POSIX semantics:
/// - [`rename`](Fs::rename) atomically replaces `to`: a concurrent or later reader sees the
///   old file or the new one, never a mix or no file;
/// - data written to a file is durable once [`fsync`](Fs::fsync) on it returns `Ok`;
/// - a rename is durable once [`fsync_dir`](Fs::fsync_dir) on the parent directory returns
///   `Ok`.
///
/// Every method is blocking; the store calls them only from a blocking thread.
pub trait Fs: Send + Sync + 'static {
    /// An open, writable file.
    type File: Send;

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
}

/// The real file system, through `std::fs`.
#[derive(Clone, Copy, Debug, Default)]
pub struct StdFs;

impl Fs for StdFs {
    type File = File;

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
    fn reading_a_directory_is_an_error_not_a_missing_file() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        assert!(StdFs.read(dir.path()).is_err());
        Ok(())
    }
}
