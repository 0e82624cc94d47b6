//! The store's integration tests, one binary: each module a file of the old `tests/` tree,
//! against a real throwaway PostgreSQL server of the harness (`common`).

mod common;

mod cluster;
mod conformance;
mod documents;
mod log;
mod store;
mod transactions;
