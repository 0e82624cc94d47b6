//! The broker's integration tests, one binary: each module a file of the old `tests/`
//! tree, with its test names. Two files stay binaries of their own, because what they check
//! would race the other tests of a shared process: `groups_tool_data_dir` opens and drops
//! stores in this process while spawning processes (see that file), and `lifecycle` checks
//! that a stopped broker's port no longer accepts, which another test's listener could take
//! over within the same process (a run of the shared binary failed that way).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod tool;

mod acls;
mod admin;
mod bad_input;
mod cluster_admin;
mod compaction;
mod consumer_groups;
mod faults;
mod groups;
mod groups_tool;
mod idempotence;
mod metrics;
mod postgres;
mod queued_bytes;
mod sasl;
mod scram_admin;
mod share_groups;
mod tls;
mod transactions;
mod transactions_v2;
mod upgrade;
mod versions_42;
mod wire;
