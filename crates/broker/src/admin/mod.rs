//! The `groups` tool: Kafka's `kafka-consumer-groups.sh` for this project. It lists groups,
//! describes them (members, state, and per partition the committed offset, the log end and
//! the lag), resets their offsets and deletes groups or their offsets.
//!
//! It works against a running broker through Kafka's protocol (ListGroups, DescribeGroups,
//! FindCoordinator, Metadata, OffsetFetch, ListOffsets, OffsetCommit, DeleteGroups,
//! OffsetDelete), so it works against any Kafka broker that speaks those; or against a
//! broker's data directory while nothing runs on it, through the offset store
//! ([`JsonFileStore`](offset_store::JsonFileStore)), whose owner lock refuses the tool while a
//! broker holds the directory.
//!
//! The binary (`src/bin/groups.rs`) parses [`Args`], calls [`run`] and turns an
//! [`AdminError`] into one line on stderr and an exit code ([`ErrorKind::exit_code`]).
//!
//! ```no_run
//! use broker::admin::{run, Args};
//! use clap::Parser;
//! # async fn example() -> Result<(), broker::admin::AdminError> {
//! let args = Args::parse_from(["groups", "--bootstrap-server", "127.0.0.1:9092", "--list"]);
//! let options = args.validate()?;
//! run(&options, &mut std::io::stdout(), &mut std::io::stderr()).await?;
//! # Ok(())
//! # }
//! ```

mod cli;
mod client;
mod commands;
mod datetime;
mod error;
pub(crate) mod report;
mod source;

use std::io::Write;

pub use cli::{Action, Args, Format, Groups, Options, ResetSpec, Scope, Target, TopicArg, View};
pub use error::{kafka_error_name, AdminError, ErrorKind};
pub use report::error_json;

use report::Printer;
use source::{BrokerSource, DataDirSource, Source};

/// Runs one checked command: rows to `out` (flushed per row or block), notes and warnings
/// to `notes`. Needs a tokio runtime (the data directory's store uses its blocking pool).
///
/// # Errors
/// Every refusal and failure, as an [`AdminError`]; checks run before anything changes, so
/// a refused command changed nothing unless its message says so.
pub async fn run(
    options: &Options,
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> Result<(), AdminError> {
    let mut source = match &options.target {
        Target::Broker { bootstrap, timeout } => {
            Source::Broker(Box::new(BrokerSource::connect(bootstrap, *timeout).await?))
        }
        Target::DataDir(dir) => Source::DataDir(DataDirSource::open(dir).await?),
    };
    let mut printer = Printer::new(options.format, out, notes);
    commands::run(&mut source, &options.action, &mut printer).await
}
