//! The `groups` binary: Kafka's kafka-consumer-groups.sh for this project's broker and data
//! directories. See `broker::admin` and the crate's README.
//!
//! Exit codes: 0 done; 1 refused or failed (the group, the broker, the data directory);
//! 2 a bad command line. Errors are one line on stderr: `error[CODE]: message`, or with
//! `--output json` a JSON object `{"error": {"code", "kafka_code", "message"}}`.

use std::io::Write;
use std::process::ExitCode;

use broker::admin::{self, AdminError, Args, Format};
use clap::error::ErrorKind as ClapKind;
use clap::Parser;

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) if matches!(e.kind(), ClapKind::DisplayHelp | ClapKind::DisplayVersion) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // clap's message is several lines (usage, a hint): keep its first, as one line.
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            let message = first.strip_prefix("error: ").unwrap_or(first);
            let argv: Vec<String> = std::env::args().collect();
            let json = argv.iter().any(|a| a == "--output=json")
                || argv
                    .windows(2)
                    .any(|w| w[0] == "--output" && w[1] == "json");
            return fail(
                &AdminError::Usage {
                    message: format!("{message} (see groups --help)"),
                },
                json,
            );
        }
    };
    let json = args.output == Format::Json;
    let options = match args.validate() {
        Ok(options) => options,
        Err(e) => return fail(&e, json),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&AdminError::Output(e), json),
    };
    let (mut out, mut notes) = (std::io::stdout().lock(), std::io::stderr());
    match runtime.block_on(admin::run(&options, &mut out, &mut notes)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = out.flush();
            fail(&e, json)
        }
    }
}

/// Prints the one error line and returns the exit code of its kind.
fn fail(e: &AdminError, json: bool) -> ExitCode {
    let mut stderr = std::io::stderr().lock();
    let _ = if json {
        writeln!(
            stderr,
            "{}",
            serde_json::json!({ "error": admin::error_json(e) })
        )
    } else {
        writeln!(stderr, "error[{}]: {e}", e.code())
    };
    ExitCode::from(e.kind().exit_code())
}
