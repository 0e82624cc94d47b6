//! The facade's integration tests, one module per area, in one test binary (each binary links
//! the whole crate graph again; one binary links it once).
//!
//! `common` is what the modules share: a cluster over a fresh temporary directory, a manual
//! clock, and the guard that keeps a spawned process from holding a store's lock while another
//! test reopens it. Run one area with `cargo test -p labs --test it <module>::`, e.g.
//! `model::`.

mod common;

mod assign_tool;
mod cancellation;
mod cluster;
mod error_catalogue;
mod hostile_input;
mod labs;
mod model;
mod semantics;
mod strategies;
