//! The broker's integration tests, one binary: each module a file of the old `tests/`
//! tree, with its test names. `groups_tool_data_dir` stays a binary of its own: its tests
//! open and drop stores in this process while spawning processes, which a shared binary
//! would race (see that file).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod tool;

mod bad_input;
mod groups;
mod groups_tool;
mod lifecycle;
mod wire;
