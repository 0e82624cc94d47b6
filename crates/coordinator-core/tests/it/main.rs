//! The coordinator's integration tests, one module per area, in one test binary (each binary
//! links the whole crate graph again; one binary links it once).
//!
//! `common` holds the fakes of the ports the modules share. Run one area with
//! `cargo test -p coordinator-core --test it <module>::`, e.g. `classic::`.

mod common;

mod classic;
mod classic_model;
mod conformance;
mod consumer;
mod consumer_model;
mod coordinator;
mod faulty_store;
mod followup_rearm;
mod lifecycle;
mod migration;
mod mocks;
mod nonblocking;
mod observability;
mod share;
mod slots;
mod stress;
mod txn;
