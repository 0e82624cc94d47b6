//! Test kits for adapters of the core's ports and for tests of the coordinator (feature
//! `testing`).
//!
//! - [`offset_store_conformance`] is the contract of the [`OffsetStore`](crate::OffsetStore)
//!   port as executable checks; every store adapter runs it.
//! - [`FaultyStore`] wraps any store and lets a test install a fault per method: fail every
//!   call, hold calls until released, count them, inspect commits while they are in the
//!   store, or break the fence rule on purpose. It is the one "wrap a store and override one
//!   method" helper of the workspace's tests.

mod conformance;
mod faulty_store;

pub use conformance::offset_store_conformance;
pub use faulty_store::{FaultyStore, Hold, StoreOp};
