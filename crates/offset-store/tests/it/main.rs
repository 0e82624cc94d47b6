//! The offset stores' integration tests, one module per area, in one test binary (each
//! binary links the whole crate graph again; one binary links it once).
//!
//! `common` is the kit the modules share (seeded generator, replayable seed loops, random
//! offset maps, a reference encoding). Run one area with
//! `cargo test -p offset-store --test it <module>::`, e.g. `crash_points::`. The test that
//! spawns a second process, `tests/lock_across_processes.rs`, is a binary of its own (its
//! docs say why).

#[macro_use]
mod common;

mod conformance;
mod crash_points;
mod fault_injection;
mod group_commit;
mod hostile_input;
mod json_store;
mod lock;
mod log_crash;
mod log_import;
mod log_store;
mod round_trip;
