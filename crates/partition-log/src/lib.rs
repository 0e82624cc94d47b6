//! # partition-log
//!
//! Partitioned logs: an in-memory one, [`MemoryLog`], and a durable one, [`SegmentLog`].
//! Both hold topics of numbered partitions, each a sequence of [`Batch`]es of records with
//! consecutive offsets, a log start that retention moves forward, and a high watermark.
//!
//! ## Where it sits
//!
//! An adapter of the core's [`RecordSource`](coordinator_core::RecordSource) port (how
//! consumers read) and [`TopicMetadata`](coordinator_core::TopicMetadata) port (how the
//! coordinator sizes topics). It depends on the core only, so the `consumer` client and the
//! `broker` both use it without depending on each other:
//!
//! ```text
//!   labs ──► consumer ──► coordinator-core ◄── partition-log ◄── labs, broker
//! ```
//!
//! Besides the port, it offers what a Kafka wire front needs: batches kept with the bytes the
//! producer sent ([`MemoryLog::append_encoded`], or
//! [`MemoryLog::append_encoded_timestamps`] for a front that serves only the bytes and needs
//! no decoded copy of the records; [`MemoryLog::read_batches`]), the bounds
//! ([`MemoryLog::bounds`]), a lookup by timestamp ([`MemoryLog::offset_for_timestamp`]) and a
//! change signal to wait for appends without polling ([`MemoryLog::appends`]).
//!
//! Those are also the [`PartitionLog`] port, the log as the broker's handlers see it
//! (`Arc<dyn PartitionLog>`), which `MemoryLog` implements so that another log can take its
//! place.
//!
//! Both logs compact (Kafka's log cleaner, for `cleanup.policy=compact`) through
//! [`PartitionLog::compact`], reading the batches they never read otherwise through a
//! [`compaction::RecordFormat`] the caller supplies (the broker's reads Kafka's v2 batches).
//!
//! `MemoryLog` writes nothing to disk: records do not survive the process. [`SegmentLog`]
//! is the durable implementation of the same port: each partition a directory of segment
//! files holding the batches as appended, checked by CRC and recovered at open, with
//! Kafka's flush policy, retention and topic ids (the [`segment`] module documents the
//! on-disk format and the guarantees). The broker uses it with `--data-dir`.
//!
//! With the `testing` feature, the `testing` module is the port's behaviour suite, which every
//! implementation runs (this crate's on both logs, `consumer-groups-store-postgres`'s on
//! `PostgresLog`).
//!
//! ```
//! use partition_log::MemoryLog;
//! use coordinator_core::{NewRecord, TopicPartition};
//!
//! let log = MemoryLog::new();
//! log.create_topic("orders", 1)?;
//! let tp = TopicPartition::new("orders", 0);
//! let base = log.append_records(&tp, vec![NewRecord::from("a"), NewRecord::from("b")])?;
//! assert_eq!(base, 0);
//! let read = log.read_batches(&tp, 1, 1024)?;
//! assert_eq!(read.high_watermark, 2);
//! assert_eq!(read.batches[0].records()[1].offset, 1);
//! # Ok::<(), coordinator_core::LogError>(())
//! ```

#![forbid(unsafe_code)]

mod batch;
mod cleaning;
pub mod compaction;
pub mod fs;
mod memory_log;
mod port;
pub mod segment;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use batch::Batch;
pub use memory_log::{BatchRead, MemoryLog};
pub use port::{EncodeBatch, PartitionLog};
pub use segment::{SegmentLog, SegmentLogBuilder};
