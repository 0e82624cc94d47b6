//! Test kits: [`SimFs`], a simulated file system that loses power and fails on request, and
//! the log store's record codec ([`decode_log`], [`encode_log_frame`]).
//!
//! It is to [`JsonFileStore`](crate::JsonFileStore) and [`LogStore`](crate::LogStore) what LevelDB's fault-injection
//! environment is to LevelDB: the store runs unchanged on top of it
//! ([`JsonFileStore::open_with_fs`](crate::JsonFileStore::open_with_fs)), while a test
//!
//! - cuts power after any single operation ([`SimFs::cut_power_after`]) and then looks at
//!   what a restart would find ([`SimFs::restart`]) under one of the [`CrashMode`]s;
//! - fails the Nth call of an operation with `EIO` or `ENOSPC` ([`SimFs::fail_nth`]), or
//!   every call until told otherwise ([`SimFs::set_failing`]);
//! - runs a hook before each operation ([`SimFs::set_hook`]), for instance to park a commit
//!   in the middle of its fsync.
//!
//! `SimFs` is `partition-log`'s (re-exported here), the same that tests the segment log.
//!
//! Locks ([`Fs::try_lock`](crate::fs::Fs::try_lock)) are modelled as a process's locks are: exclusive between every
//! handle of one `SimFs` (its clones included), and gone after a [`restart`](SimFs::restart)
//! (the process that held them died with the power).
//!
//! The model of durability is the one the store's protocol relies on: a file's data is
//! durable once fsynced, and a directory entry (a creation or a rename) once its directory is
//! fsynced. Everything else may or may not survive a power cut; each crash mode picks one
//! such outcome.

pub use partition_log::fs::sim::{CrashMode, Fault, FsOp, Hook, SimFile, SimFs, SimLock};

/// The record codec of the log store's old files (before its log was a partition of the
/// segment log), for the fuzz target and tests: [`decode_log`] reads a sequence of frames (a
/// segment's bytes) as the import does, [`encode_log_frame`] writes records as one frame.
/// The records of a closed [`LogStore`](crate::LogStore)'s group partition, with their
/// offsets.
pub use crate::log::group_log_records;

pub use crate::log::record::{
    decode_frames as decode_log, encode_frame as encode_log_frame, Record as LogRecord,
};
