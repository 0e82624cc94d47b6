//! The file-system seam of [`JsonFileStore`](crate::JsonFileStore) and
//! [`LogStore`](crate::LogStore): `partition-log`'s, which the segment log uses too, so one
//! simulated file system ([`SimFs`](crate::testing::SimFs)) tests every durable log of the
//! workspace.
//!
//! The stores touch the file system only through the operations of [`Fs`]; the JSON store
//! uses the first nine, the log store adds [`open_append`](Fs::open_append),
//! [`truncate`](Fs::truncate) and [`try_lock_dir`](Fs::try_lock_dir).

pub use partition_log::fs::{Fs, StdFs};
