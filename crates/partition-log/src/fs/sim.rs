//! [`SimFs`], a simulated file system that loses power and fails on request.
//!
//! It is to the durable logs what LevelDB's fault-injection environment is to LevelDB: a log
//! runs unchanged on top of it (`SegmentLogBuilder::open_with_fs`, and `offset-store`'s
//! `open_with_fs`), while a test
//!
//! - cuts power after any single operation ([`SimFs::cut_power_after`]) and then looks at
//!   what a restart would find ([`SimFs::restart`]) under one of the [`CrashMode`]s;
//! - fails the Nth call of an operation with `EIO` or `ENOSPC` ([`SimFs::fail_nth`]), or
//!   every call until told otherwise ([`SimFs::set_failing`]);
//! - runs a hook before each operation ([`SimFs::set_hook`]), for instance to park a commit
//!   in the middle of its fsync.
//!
//! Locks ([`Fs::try_lock`]) are modelled as a process's locks are: exclusive between every
//! handle of one `SimFs` (its clones included), and gone after a [`restart`](SimFs::restart)
//! (the process that held them died with the power).
//!
//! The model of durability is the one the logs' protocols rely on: a file's data is durable
//! once fsynced, and a directory entry (a creation, a rename or a removal, of a file or of a
//! directory) once its directory is fsynced. Everything else may or may not survive a power
//! cut; each crash mode picks one such outcome.
//!
//! Directories made with [`Fs::create_dir_all`] are modelled as entries of their parent:
//! after a restart that drops unsynced names, a directory whose creation was never made
//! durable is gone with everything in it. A directory nobody created but that holds files
//! (put there by [`SimFs::put_file`], or created in a path no one made) exists as long as
//! they do, as if it had always been there.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{parent, Fs};

/// One operation of the [`Fs`] seam. Non-exhaustive: the seam grows with what the logs
/// need.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum FsOp {
    /// [`Fs::read`], and the reads of an open file: [`Fs::read_at`], [`Fs::len`]; also
    /// [`Fs::exists`].
    Read,
    /// [`Fs::create_temp`].
    CreateTemp,
    /// [`Fs::write_all`] and [`Fs::write_at`].
    WriteAll,
    /// [`Fs::fsync`].
    Fsync,
    /// [`Fs::rename`].
    Rename,
    /// [`Fs::fsync_dir`].
    FsyncDir,
    /// [`Fs::remove_file`].
    RemoveFile,
    /// [`Fs::try_lock`].
    Lock,
    /// [`Fs::list_dir`].
    ListDir,
    /// [`Fs::open_append`].
    OpenAppend,
    /// [`Fs::truncate`].
    Truncate,
    /// [`Fs::open`].
    Open,
    /// [`Fs::create_dir_all`].
    CreateDir,
    /// [`Fs::remove_dir_all`].
    RemoveDir,
}

impl FsOp {
    /// Every operation: `Read` (used by `open`), those of a commit in the order it uses them,
    /// `RemoveFile` (cleaning up after a failure, or stale temp files at `open`), then the
    /// two that only `open` uses, then the two that the group log store uses
    /// ([`Fs::try_lock_dir`] counts as `Lock`), then the three that only the segment log
    /// uses.
    pub const ALL: [FsOp; 14] = [
        FsOp::Read,
        FsOp::CreateTemp,
        FsOp::WriteAll,
        FsOp::Fsync,
        FsOp::Rename,
        FsOp::FsyncDir,
        FsOp::RemoveFile,
        FsOp::Lock,
        FsOp::ListDir,
        FsOp::OpenAppend,
        FsOp::Truncate,
        FsOp::Open,
        FsOp::CreateDir,
        FsOp::RemoveDir,
    ];
}

/// An error a [`SimFs`] operation can be made to fail with. A failing
/// [`write_all`](Fs::write_all) has written the first half of its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// `EIO`: the device reported an I/O error.
    Eio,
    /// `ENOSPC`: no space left on the device.
    Enospc,
}

impl Fault {
    /// The `io::Error` the operation returns (Linux error numbers).
    pub fn to_io_error(self) -> io::Error {
        match self {
            Fault::Eio => io::Error::from_raw_os_error(5),
            Fault::Enospc => io::Error::from_raw_os_error(28),
        }
    }
}

/// What survives a power cut, for [`SimFs::restart`]. Non-exhaustive: more outcomes may be
/// modelled; [`CrashMode::ALL`] lists every one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CrashMode {
    /// Directory entries survive as they are; each file's data reverts to what its last
    /// fsync made durable (a file never fsynced is empty).
    DropUnsyncedData,
    /// Each directory's entries revert to its last fsync (files created since are gone,
    /// renames since are undone); file data survives as written.
    DropUnsyncedNames,
    /// Both at once: the strictest outcome.
    DropBoth,
    /// Directory entries survive as they are; each file keeps what its last fsync made
    /// durable and the first half of what was appended after it: a write torn by the power
    /// cut (a file changed otherwise since its fsync reverts to it).
    TearUnsyncedData,
}

impl CrashMode {
    /// Every mode.
    pub const ALL: [CrashMode; 4] = [
        CrashMode::DropUnsyncedData,
        CrashMode::DropUnsyncedNames,
        CrashMode::DropBoth,
        CrashMode::TearUnsyncedData,
    ];
}

/// A hook run before each operation (outside the file system's lock, so it may block).
pub type Hook = Arc<dyn Fn(FsOp) + Send + Sync>;

/// A crash-consistent, fault-injecting, in-memory [`Fs`]. Cloning gives another handle to
/// the same file system.
#[derive(Clone, Default)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
}

/// An open file of a [`SimFs`].
#[derive(Debug)]
pub struct SimFile {
    inode: usize,
}

/// A lock held on a path of a [`SimFs`]; dropping it releases the lock.
pub struct SimLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl Drop for SimLock {
    fn drop(&mut self) {
        lock_state(&self.state).locks.remove(&self.path);
    }
}

impl fmt::Debug for SimLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimLock").field("path", &self.path).finish()
    }
}

#[derive(Default)]
struct State {
    inodes: Vec<Inode>,
    /// Directory entries as a reader sees them now.
    live: BTreeMap<PathBuf, usize>,
    /// Directory entries as of each directory's last fsync.
    durable: BTreeMap<PathBuf, usize>,
    ops: u64,
    power_off_at: Option<u64>,
    powered_off: bool,
    faults: Vec<Armed>,
    hook: Option<Hook>,
    /// Paths locked now.
    locks: BTreeSet<PathBuf>,
    /// Directories made by `create_dir_all`, as a reader sees them now.
    dirs: BTreeSet<PathBuf>,
    /// Those directories as of their parent's last fsync.
    durable_dirs: BTreeSet<PathBuf>,
}

#[derive(Default)]
struct Inode {
    data: Vec<u8>,
    synced: Vec<u8>,
}

struct Armed {
    op: FsOp,
    /// Calls of `op` still to let through before failing; `None`: fail every call.
    calls_before: Option<u64>,
    fault: Fault,
}

impl SimFs {
    /// An empty file system that does not fail.
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts a file at `path` with `bytes`, already durable (data and name).
    pub fn put_file(&self, path: impl AsRef<Path>, bytes: impl Into<Vec<u8>>) {
        let bytes = bytes.into();
        let mut st = self.lock();
        let inode = st.new_inode();
        st.inodes[inode] = Inode {
            synced: bytes.clone(),
            data: bytes,
        };
        let path = path.as_ref().to_path_buf();
        st.live.insert(path.clone(), inode);
        st.durable.insert(path, inode);
    }

    /// The current content of `path` as a reader sees it, if the file exists.
    pub fn file(&self, path: impl AsRef<Path>) -> Option<Vec<u8>> {
        let st = self.lock();
        st.live
            .get(path.as_ref())
            .map(|&inode| st.inodes[inode].data.clone())
    }

    /// Every file that exists now.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.lock().live.keys().cloned().collect()
    }

    /// Whether a lock is held on `path` now.
    pub fn is_locked(&self, path: impl AsRef<Path>) -> bool {
        self.lock().locks.contains(path.as_ref())
    }

    /// How many operations have been attempted so far.
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// Cuts power once `n` more operations have been attempted: every later operation fails
    /// without effect, as if the process had died. `0` cuts it now.
    pub fn cut_power_after(&self, n: u64) {
        let mut st = self.lock();
        let at = st.ops.saturating_add(n);
        st.power_off_at = Some(at);
        st.powered_off = n == 0;
    }

    /// The `n`th call of `op` from now (`1` is the next one) fails with `fault`, once.
    pub fn fail_nth(&self, op: FsOp, n: u64, fault: Fault) {
        self.lock().faults.push(Armed {
            op,
            calls_before: Some(n.saturating_sub(1)),
            fault,
        });
    }

    /// Every call of `op` fails with `fault` until [`clear_faults`](Self::clear_faults).
    pub fn set_failing(&self, op: FsOp, fault: Fault) {
        self.lock().faults.push(Armed {
            op,
            calls_before: None,
            fault,
        });
    }

    /// Disarms every pending fault.
    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    /// Runs `hook` before every operation, or no hook with `None`.
    pub fn set_hook(&self, hook: Option<Hook>) {
        self.lock().hook = hook;
    }

    /// What a restart after losing power now would find, under `mode`: a new, independent
    /// file system whose content is all durable, with no faults and power on.
    pub fn restart(&self, mode: CrashMode) -> SimFs {
        let st = self.lock();
        let (names, dirs) = match mode {
            CrashMode::DropUnsyncedData | CrashMode::TearUnsyncedData => (&st.live, &st.dirs),
            CrashMode::DropUnsyncedNames | CrashMode::DropBoth => (&st.durable, &st.durable_dirs),
        };
        // A path survives only if every directory made on the way to it survives.
        let made = |path: &Path| st.dirs.contains(path) || st.durable_dirs.contains(path);
        let reachable = |path: &Path| {
            path.ancestors()
                .skip(1)
                .all(|a| !made(a) || dirs.contains(a))
        };
        let after = SimFs::new();
        for (path, &inode) in names {
            if !reachable(path) {
                continue;
            }
            let inode = &st.inodes[inode];
            let data = match mode {
                CrashMode::DropUnsyncedNames => inode.data.clone(),
                CrashMode::DropUnsyncedData | CrashMode::DropBoth => inode.synced.clone(),
                CrashMode::TearUnsyncedData => match inode.data.strip_prefix(&inode.synced[..]) {
                    Some(appended) => {
                        let mut torn = inode.synced.clone();
                        torn.extend_from_slice(&appended[..appended.len() / 2]);
                        torn
                    }
                    None => inode.synced.clone(),
                },
            };
            after.put_file(path, data);
        }
        {
            let mut next = after.lock();
            let kept: BTreeSet<PathBuf> = dirs.iter().filter(|d| reachable(d)).cloned().collect();
            next.dirs = kept.clone();
            next.durable_dirs = kept;
        }
        after
    }

    /// Every directory made by [`Fs::create_dir_all`] that exists now.
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.lock().dirs.iter().cloned().collect()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock_state(&self.state)
    }

    /// Runs the hook, then checks power and faults: the operation may go ahead with the
    /// returned guard, or is refused.
    fn begin(&self, op: FsOp) -> Result<MutexGuard<'_, State>, Refusal<'_>> {
        let hook = self.lock().hook.clone();
        if let Some(hook) = hook {
            hook(op);
        }
        let mut st = self.lock();
        if st.powered_off {
            return Err(Refusal::PowerCut);
        }
        st.ops += 1;
        if st.power_off_at == Some(st.ops) {
            st.powered_off = true;
        }
        match st.take_fault(op) {
            Some(fault) => Err(Refusal::Fault(st, fault)),
            None => Ok(st),
        }
    }
}

fn lock_state(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // No operation panics halfway through a change of the state.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why an operation did not go ahead.
enum Refusal<'a> {
    /// Power is off: nothing happens any more.
    PowerCut,
    /// An injected fault, with the state for an operation that fails halfway.
    Fault(MutexGuard<'a, State>, Fault),
}

impl Refusal<'_> {
    fn into_error(self) -> io::Error {
        match self {
            Refusal::PowerCut => power_cut(),
            Refusal::Fault(_, fault) => fault.to_io_error(),
        }
    }
}

fn power_cut() -> io::Error {
    io::Error::other("simulated power cut: the file system is gone")
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("no such file: {}", path.display()),
    )
}

impl State {
    /// Whether `path` is a file, a directory made, or a directory holding anything.
    fn exists(&self, path: &Path) -> bool {
        let below = |p: &PathBuf| p.starts_with(path) && p.as_path() != path;
        self.live.contains_key(path)
            || self.dirs.contains(path)
            || self.live.keys().any(below)
            || self.dirs.iter().any(below)
    }

    /// The inode at `path`, created empty if there is none.
    fn inode_at(&mut self, path: &Path) -> usize {
        match self.live.get(path) {
            Some(&inode) => inode,
            None => {
                let inode = self.new_inode();
                self.live.insert(path.to_path_buf(), inode);
                inode
            }
        }
    }

    fn new_inode(&mut self) -> usize {
        self.inodes.push(Inode::default());
        self.inodes.len() - 1
    }

    fn take_fault(&mut self, op: FsOp) -> Option<Fault> {
        let mut hit = None;
        self.faults.retain_mut(|armed| {
            if armed.op != op || hit.is_some() {
                return true;
            }
            match &mut armed.calls_before {
                None => {
                    hit = Some(armed.fault);
                    true
                }
                Some(0) => {
                    hit = Some(armed.fault);
                    false
                }
                Some(n) => {
                    *n -= 1;
                    true
                }
            }
        });
        hit
    }
}

impl Fs for SimFs {
    type File = SimFile;
    type Lock = SimLock;

    fn read(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        let st = self.begin(FsOp::Read).map_err(Refusal::into_error)?;
        Ok(st
            .live
            .get(path)
            .map(|&inode| st.inodes[inode].data.clone()))
    }

    fn create_temp(&self, path: &Path) -> io::Result<SimFile> {
        let mut st = self.begin(FsOp::CreateTemp).map_err(Refusal::into_error)?;
        // O_TRUNC keeps the inode: what an earlier fsync made durable stays durable.
        let inode = st.inode_at(path);
        st.inodes[inode].data.clear();
        Ok(SimFile { inode })
    }

    fn write_all(&self, file: &SimFile, data: &[u8]) -> io::Result<()> {
        match self.begin(FsOp::WriteAll) {
            Ok(mut st) => {
                st.inodes[file.inode].data.extend_from_slice(data);
                Ok(())
            }
            Err(Refusal::Fault(mut st, fault)) => {
                // A failing write may have written part of its data, as a real one may.
                let half = &data[..data.len() / 2];
                st.inodes[file.inode].data.extend_from_slice(half);
                Err(fault.to_io_error())
            }
            Err(refusal @ Refusal::PowerCut) => Err(refusal.into_error()),
        }
    }

    fn fsync(&self, file: &SimFile) -> io::Result<()> {
        let mut st = self.begin(FsOp::Fsync).map_err(Refusal::into_error)?;
        let inode = &mut st.inodes[file.inode];
        inode.synced = inode.data.clone();
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.begin(FsOp::Rename).map_err(Refusal::into_error)?;
        let inode = st.live.remove(from).ok_or_else(|| not_found(from))?;
        st.live.insert(to.to_path_buf(), inode);
        Ok(())
    }

    fn fsync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.begin(FsOp::FsyncDir).map_err(Refusal::into_error)?;
        let st = &mut *st;
        // Subdirectories removed since the last fsync: gone for good, with their content.
        let removed: Vec<PathBuf> = st
            .durable_dirs
            .iter()
            .filter(|d| parent(d) == dir && !st.dirs.contains(*d))
            .cloned()
            .collect();
        for gone in &removed {
            st.durable.retain(|path, _| !path.starts_with(gone));
            st.durable_dirs.retain(|d| !d.starts_with(gone));
        }
        st.durable.retain(|path, _| parent(path) != dir);
        let entries = st.live.iter().filter(|(path, _)| parent(path) == dir);
        let entries: Vec<(PathBuf, usize)> = entries.map(|(p, &i)| (p.clone(), i)).collect();
        st.durable.extend(entries);
        let made: Vec<PathBuf> = st
            .dirs
            .iter()
            .filter(|d| parent(d) == dir)
            .cloned()
            .collect();
        st.durable_dirs.extend(made);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut st = self.begin(FsOp::RemoveFile).map_err(Refusal::into_error)?;
        st.live
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }

    fn try_lock(&self, path: &Path) -> io::Result<SimLock> {
        let mut st = self.begin(FsOp::Lock).map_err(Refusal::into_error)?;
        if st.locks.contains(path) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked by another handle", path.display()),
            ));
        }
        if !st.live.contains_key(path) {
            let inode = st.new_inode();
            st.live.insert(path.to_path_buf(), inode);
        }
        st.locks.insert(path.to_path_buf());
        Ok(SimLock {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
        })
    }

    /// The files and directories directly in `dir`; none for a directory that does not
    /// exist (the group stores list a directory they never create).
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        let st = self.begin(FsOp::ListDir).map_err(Refusal::into_error)?;
        let mut names = BTreeSet::new();
        for path in st.live.keys().chain(st.dirs.iter()) {
            // The ancestor of `path` (or itself) directly in `dir`, if any.
            let mut at = path.as_path();
            loop {
                let up = parent(at);
                if up == dir {
                    names.extend(at.file_name().map(OsString::from));
                    break;
                }
                if up == at || up == Path::new(".") || up.parent().is_none() {
                    break;
                }
                at = up;
            }
        }
        Ok(names.into_iter().collect())
    }

    fn open_append(&self, path: &Path) -> io::Result<SimFile> {
        let mut st = self.begin(FsOp::OpenAppend).map_err(Refusal::into_error)?;
        let inode = st.inode_at(path);
        Ok(SimFile { inode })
    }

    /// The cut is in what readers see at once, and durable at the next fsync: a power cut
    /// before it may bring the cut bytes back (under the modes that drop unsynced data).
    fn truncate(&self, file: &SimFile, len: u64) -> io::Result<()> {
        let mut st = self.begin(FsOp::Truncate).map_err(Refusal::into_error)?;
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        st.inodes[file.inode].data.resize(len, 0);
        Ok(())
    }

    /// A lock on the directory's path: exclusive with every other lock on that path, and no
    /// file is created.
    fn try_lock_dir(&self, dir: &Path) -> io::Result<SimLock> {
        let mut st = self.begin(FsOp::Lock).map_err(Refusal::into_error)?;
        if st.locks.contains(dir) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked by another handle", dir.display()),
            ));
        }
        st.locks.insert(dir.to_path_buf());
        Ok(SimLock {
            state: Arc::clone(&self.state),
            path: dir.to_path_buf(),
        })
    }

    fn open(&self, path: &Path) -> io::Result<SimFile> {
        let st = self.begin(FsOp::Open).map_err(Refusal::into_error)?;
        let inode = *st.live.get(path).ok_or_else(|| not_found(path))?;
        Ok(SimFile { inode })
    }

    /// A failing write has written the first half of `data`, as [`Fs::write_all`]'s does.
    fn write_at(&self, file: &SimFile, data: &[u8], position: u64) -> io::Result<()> {
        let (mut st, data, result) = match self.begin(FsOp::WriteAll) {
            Ok(st) => (st, data, Ok(())),
            Err(Refusal::Fault(st, fault)) => {
                (st, &data[..data.len() / 2], Err(fault.to_io_error()))
            }
            Err(refusal @ Refusal::PowerCut) => return Err(refusal.into_error()),
        };
        let at = usize::try_from(position).map_err(|_| io::Error::other("position too large"))?;
        let bytes = &mut st.inodes[file.inode].data;
        if bytes.len() < at + data.len() {
            bytes.resize(at + data.len(), 0);
        }
        bytes[at..at + data.len()].copy_from_slice(data);
        result
    }

    fn read_at(&self, file: &SimFile, buf: &mut [u8], position: u64) -> io::Result<()> {
        let st = self.begin(FsOp::Read).map_err(Refusal::into_error)?;
        let bytes = &st.inodes[file.inode].data;
        let from = usize::try_from(position).unwrap_or(usize::MAX);
        match bytes.get(from..).and_then(|rest| rest.get(..buf.len())) {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of the file",
            )),
        }
    }

    fn len(&self, file: &SimFile) -> io::Result<u64> {
        let st = self.begin(FsOp::Read).map_err(Refusal::into_error)?;
        Ok(st.inodes[file.inode].data.len() as u64)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        let st = self.begin(FsOp::Read).map_err(Refusal::into_error)?;
        Ok(st.exists(path))
    }

    /// Makes `dir` and each missing parent; a directory that exists already (made, or
    /// holding files) is left as it is.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.begin(FsOp::CreateDir).map_err(Refusal::into_error)?;
        if st.live.contains_key(dir) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} is a file", dir.display()),
            ));
        }
        let missing: Vec<PathBuf> = dir
            .ancestors()
            .filter(|a| !a.as_os_str().is_empty() && a.parent().is_some())
            .take_while(|a| !st.exists(a))
            .map(Path::to_path_buf)
            .collect();
        st.dirs.extend(missing);
        Ok(())
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.begin(FsOp::RemoveDir).map_err(Refusal::into_error)?;
        if !st.exists(dir) || st.live.contains_key(dir) {
            return Err(not_found(dir));
        }
        st.live.retain(|path, _| !path.starts_with(dir));
        st.dirs.retain(|d| !d.starts_with(dir));
        Ok(())
    }
}

impl fmt::Debug for SimFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.lock();
        f.debug_struct("SimFs")
            .field("files", &st.live.keys().collect::<Vec<_>>())
            .field("ops", &st.ops)
            .field("powered_off", &st.powered_off)
            .field("locks", &st.locks)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const DIR: &str = "/d";

    fn write_file(fs: &SimFs, name: &str, data: &[u8], sync: bool) -> io::Result<()> {
        let f = fs.create_temp(&Path::new(DIR).join(name))?;
        fs.write_all(&f, data)?;
        if sync {
            fs.fsync(&f)?;
        }
        Ok(())
    }

    fn content(fs: &SimFs, name: &str) -> Option<Vec<u8>> {
        fs.file(Path::new(DIR).join(name))
    }

    #[test]
    fn crash_modes_keep_exactly_what_was_made_durable() -> io::Result<()> {
        let fs = SimFs::new();
        fs.put_file("/d/f", "old");
        write_file(&fs, "f.tmp", b"new", true)?;
        fs.rename(Path::new("/d/f.tmp"), Path::new("/d/f"))?;
        write_file(&fs, "unsynced", b"data", false)?;

        // The rename was never made durable by a directory fsync.
        let names = fs.restart(CrashMode::DropUnsyncedNames);
        assert_eq!(content(&names, "f").as_deref(), Some(&b"old"[..]));
        assert_eq!(content(&names, "unsynced"), None);
        let data = fs.restart(CrashMode::DropUnsyncedData);
        assert_eq!(content(&data, "f").as_deref(), Some(&b"new"[..]));
        assert_eq!(content(&data, "unsynced").as_deref(), Some(&b""[..]));
        assert_eq!(
            content(&fs.restart(CrashMode::DropBoth), "f").as_deref(),
            Some(&b"old"[..])
        );

        fs.fsync_dir(Path::new(DIR))?;
        for mode in CrashMode::ALL {
            let after = fs.restart(mode);
            assert_eq!(
                content(&after, "f").as_deref(),
                Some(&b"new"[..]),
                "{mode:?}"
            );
            assert_eq!(content(&after, "f.tmp"), None, "{mode:?}");
        }
        assert_eq!(
            content(&fs.restart(CrashMode::DropBoth), "unsynced").as_deref(),
            Some(&b""[..])
        );
        assert_eq!(
            content(&fs.restart(CrashMode::TearUnsyncedData), "unsynced").as_deref(),
            Some(&b"da"[..]),
            "half of what was appended since the last fsync"
        );
        Ok(())
    }

    #[test]
    fn fsync_dir_covers_only_its_own_directory() -> io::Result<()> {
        let fs = SimFs::new();
        write_file(&fs, "a", b"1", true)?;
        let other = fs.create_temp(Path::new("/e/b"))?;
        fs.fsync(&other)?;
        fs.fsync_dir(Path::new(DIR))?;
        let after = fs.restart(CrashMode::DropBoth);
        assert_eq!(after.paths(), vec![PathBuf::from("/d/a")]);
        Ok(())
    }

    #[test]
    fn nth_call_fails_once_and_a_failed_write_is_partial() -> io::Result<()> {
        let fs = SimFs::new();
        fs.fail_nth(FsOp::WriteAll, 2, Fault::Enospc);
        let f = fs.create_temp(Path::new("/d/x"))?;
        fs.write_all(&f, b"ab")?;
        let err = fs.write_all(&f, b"cdef").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(28));
        fs.write_all(&f, b"gh")?;
        assert_eq!(content(&fs, "x").as_deref(), Some(&b"abcdgh"[..]));

        fs.set_failing(FsOp::Fsync, Fault::Eio);
        for _ in 0..3 {
            assert_eq!(fs.fsync(&f).unwrap_err().raw_os_error(), Some(5));
        }
        fs.clear_faults();
        fs.fsync(&f)?;
        Ok(())
    }

    #[test]
    fn after_a_power_cut_nothing_changes() -> io::Result<()> {
        let fs = SimFs::new();
        fs.cut_power_after(2);
        let f = fs.create_temp(Path::new("/d/x"))?;
        fs.write_all(&f, b"ab")?;
        assert!(fs.write_all(&f, b"cd").is_err());
        assert!(fs.fsync(&f).is_err());
        assert!(fs.read(Path::new("/d/x")).is_err());
        assert_eq!(fs.ops(), 2);
        assert_eq!(content(&fs, "x").as_deref(), Some(&b"ab"[..]));
        let after = fs.restart(CrashMode::DropUnsyncedData);
        assert_eq!(after.read(Path::new("/d/x"))?.as_deref(), Some(&b""[..]));
        Ok(())
    }

    #[test]
    fn a_lock_is_exclusive_until_dropped_and_gone_after_a_restart() -> io::Result<()> {
        let fs = SimFs::new();
        let path = Path::new("/d/f.lock");
        let held = fs.try_lock(path)?;
        assert!(fs.is_locked(path));
        assert_eq!(content(&fs, "f.lock").as_deref(), Some(&b""[..]));
        let other_handle = fs.clone();
        let err = other_handle.try_lock(path).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        let after = fs.restart(CrashMode::DropUnsyncedData);
        assert!(!after.is_locked(path), "locks die with the process");
        drop(after.try_lock(path)?);
        drop(held);
        assert!(!fs.is_locked(path));
        drop(other_handle.try_lock(path)?);
        Ok(())
    }

    #[test]
    fn list_dir_names_the_entries_of_one_directory() -> io::Result<()> {
        let fs = SimFs::new();
        fs.put_file("/d/a", "");
        fs.put_file("/d/b", "");
        fs.put_file("/e/c", "");
        fs.put_file("rel", "");
        let mut names = fs.list_dir(Path::new(DIR))?;
        names.sort();
        assert_eq!(names, [OsString::from("a"), OsString::from("b")]);
        assert_eq!(fs.list_dir(Path::new("."))?, [OsString::from("rel")]);
        Ok(())
    }

    #[test]
    fn unsynced_appends_and_truncates_are_lost_with_the_power() -> io::Result<()> {
        let fs = SimFs::new();
        let path = Path::new("/d/seg");
        let f = fs.open_append(path)?;
        fs.write_all(&f, b"abc")?;
        fs.fsync(&f)?;
        fs.fsync_dir(Path::new(DIR))?;
        fs.write_all(&f, b"def")?;
        assert_eq!(content(&fs, "seg").as_deref(), Some(&b"abcdef"[..]));
        let after = fs.restart(CrashMode::DropUnsyncedData);
        assert_eq!(content(&after, "seg").as_deref(), Some(&b"abc"[..]));
        fs.fsync(&f)?;
        fs.truncate(&f, 1)?;
        fs.write_all(&f, b"z")?;
        assert_eq!(content(&fs, "seg").as_deref(), Some(&b"az"[..]));
        let after = fs.restart(CrashMode::DropBoth);
        assert_eq!(content(&after, "seg").as_deref(), Some(&b"abcdef"[..]));
        fs.fsync(&f)?;
        let after = fs.restart(CrashMode::DropBoth);
        assert_eq!(content(&after, "seg").as_deref(), Some(&b"az"[..]));
        // A file created by open_append has no durable name until its directory is fsynced.
        let g = fs.open_append(Path::new("/d/new"))?;
        fs.fsync(&g)?;
        assert_eq!(
            content(&fs.restart(CrashMode::DropUnsyncedNames), "new"),
            None
        );
        Ok(())
    }

    #[test]
    fn a_directory_lock_is_exclusive_and_makes_no_file() -> io::Result<()> {
        let fs = SimFs::new();
        let held = fs.try_lock_dir(Path::new(DIR))?;
        let err = fs.clone().try_lock_dir(Path::new(DIR)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert!(fs.paths().is_empty());
        drop(held);
        drop(fs.try_lock_dir(Path::new(DIR))?);
        Ok(())
    }

    #[test]
    fn missing_files_are_reported() {
        let fs = SimFs::new();
        assert_eq!(fs.read(Path::new("/d/none")).unwrap(), None);
        let err = fs
            .rename(Path::new("/d/none"), Path::new("/d/x"))
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(fs.remove_file(Path::new("/d/none")).is_err());
    }

    #[test]
    fn a_directory_survives_only_once_its_parent_is_fsynced() -> io::Result<()> {
        let fs = SimFs::new();
        fs.create_dir_all(Path::new("/d/t-0"))?;
        assert!(fs.exists(Path::new("/d/t-0"))?);
        assert_eq!(fs.list_dir(Path::new("/d"))?, [OsString::from("t-0")]);
        let f = fs.create_temp(Path::new("/d/t-0/seg"))?;
        fs.write_at(&f, b"abc", 0)?;
        fs.fsync(&f)?;
        fs.fsync_dir(Path::new("/d/t-0"))?;
        // The file is durable in its directory, but the directory's own entry is not.
        let lost = fs.restart(CrashMode::DropUnsyncedNames);
        assert!(lost.paths().is_empty(), "{lost:?}");
        assert!(!lost.exists(Path::new("/d/t-0"))?);
        let data = fs.restart(CrashMode::DropUnsyncedData);
        assert_eq!(data.file("/d/t-0/seg").as_deref(), Some(&b"abc"[..]));
        fs.fsync_dir(Path::new("/d"))?;
        fs.fsync_dir(Path::new("/"))?;
        let kept = fs.restart(CrashMode::DropBoth);
        assert_eq!(kept.file("/d/t-0/seg").as_deref(), Some(&b"abc"[..]));
        assert_eq!(kept.dirs(), [PathBuf::from("/d"), PathBuf::from("/d/t-0")]);
        Ok(())
    }

    #[test]
    fn a_removed_directory_comes_back_until_its_parent_is_fsynced() -> io::Result<()> {
        let fs = SimFs::new();
        fs.create_dir_all(Path::new("/d/t-0"))?;
        let f = fs.create_temp(Path::new("/d/t-0/seg"))?;
        fs.fsync(&f)?;
        for dir in ["/d/t-0", "/d", "/"] {
            fs.fsync_dir(Path::new(dir))?;
        }
        fs.remove_dir_all(Path::new("/d/t-0"))?;
        assert!(!fs.exists(Path::new("/d/t-0"))?);
        assert!(fs.paths().is_empty());
        let back = fs.restart(CrashMode::DropBoth);
        assert!(
            back.file("/d/t-0/seg").is_some(),
            "the removal was not durable"
        );
        fs.fsync_dir(Path::new("/d"))?;
        let gone = fs.restart(CrashMode::DropBoth);
        assert!(gone.paths().is_empty(), "{gone:?}");
        assert_eq!(gone.dirs(), [PathBuf::from("/d")]);
        let err = fs.remove_dir_all(Path::new("/d/t-0")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        Ok(())
    }

    #[test]
    fn positional_writes_fill_gaps_and_reads_stop_at_the_end() -> io::Result<()> {
        let fs = SimFs::new();
        let f = fs.create_temp(Path::new("/d/seg"))?;
        fs.write_at(&f, b"ab", 3)?;
        assert_eq!(fs.len(&f)?, 5);
        let mut buf = [9; 5];
        fs.read_at(&f, &mut buf, 0)?;
        assert_eq!(&buf, b"\0\0\0ab");
        let err = fs.read_at(&f, &mut buf, 1).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        fs.fail_nth(FsOp::WriteAll, 1, Fault::Eio);
        assert!(fs.write_at(&f, b"wxyz", 0).is_err());
        assert_eq!(
            fs.file("/d/seg").as_deref(),
            Some(&b"wx\0ab"[..]),
            "half written"
        );
        fs.truncate(&f, 7)?;
        assert_eq!(fs.len(&f)?, 7, "a truncate past the end extends with zeros");
        let again = fs.open(Path::new("/d/seg"))?;
        fs.read_at(&again, &mut buf, 0)?;
        assert_eq!(&buf, b"wx\0ab");
        assert_eq!(
            fs.open(Path::new("/d/none")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        Ok(())
    }
}
