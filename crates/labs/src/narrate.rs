//! Narration shared by the lab binaries: numbered steps, indented details, the chapter's
//! spelling of partition lists, and the runner that gives each lab a temporary directory
//! and an exit code.

use std::future::Future;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use coordinator_core::{ExpiredMember, OffsetMap, TopicPartition};

use crate::error::LabError;

/// Writes a lab's story: numbered steps (`1. …`) with details indented by three spaces, the
/// layout of the chapter's "Measured output".
///
/// ```
/// use labs::Narrator;
/// let mut out = Narrator::new(Vec::new());
/// out.step("First member joins.")?;
/// out.detail("member 1: orders-0")?;
/// out.step("Second member joins.")?;
/// assert_eq!(
///     String::from_utf8(out.into_inner()).unwrap(),
///     "1. First member joins.\n   member 1: orders-0\n2. Second member joins.\n"
/// );
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Narrator<W: Write = io::Stdout> {
    out: W,
    steps: u32,
}

impl Narrator {
    /// A narrator printing to standard output.
    pub fn stdout() -> Self {
        Narrator::new(io::stdout())
    }
}

impl<W: Write> Narrator<W> {
    /// A narrator writing to `out`.
    pub fn new(out: W) -> Self {
        Narrator { out, steps: 0 }
    }

    /// Prints the next numbered step.
    pub fn step(&mut self, text: impl std::fmt::Display) -> io::Result<()> {
        self.steps += 1;
        writeln!(self.out, "{}. {text}", self.steps)
    }

    /// Prints a detail line under the current step, indented by three spaces.
    pub fn detail(&mut self, text: impl std::fmt::Display) -> io::Result<()> {
        writeln!(self.out, "   {text}")
    }

    /// Prints an unnumbered line (a lab's setup or conclusion).
    pub fn line(&mut self, text: impl std::fmt::Display) -> io::Result<()> {
        writeln!(self.out, "{text}")
    }

    /// The writer, for tests.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// `orders-0, orders-2`, or `(none)` for an empty list.
pub fn partitions(list: &[TopicPartition]) -> String {
    if list.is_empty() {
        return "(none)".to_string();
    }
    let names: Vec<String> = list.iter().map(ToString::to_string).collect();
    names.join(", ")
}

/// `orders-0=3, orders-2=3`, or `(none)`.
pub fn offsets(map: &OffsetMap) -> String {
    if map.is_empty() {
        return "(none)".to_string();
    }
    let entries: Vec<String> = map.iter().map(|(tp, o)| format!("{tp}={o}")).collect();
    entries.join(", ")
}

/// `workers/member-1, workers/member-2`, or `(none)`.
pub fn expired(list: &[ExpiredMember]) -> String {
    if list.is_empty() {
        return "(none)".to_string();
    }
    let names: Vec<String> = list
        .iter()
        .map(|e| format!("{}/{}", e.group, e.member))
        .collect();
    names.join(", ")
}

/// `6-9` for a run of consecutive offsets, `6` for one, `(none)` for none; a gap is shown
/// as a list (`1, 3`).
pub fn offset_range(offsets: &[i64]) -> String {
    match offsets {
        [] => "(none)".to_string(),
        [one] => one.to_string(),
        [first, .., last] if offsets.windows(2).all(|w| w[1] == w[0] + 1) => {
            format!("{first}-{last}")
        }
        _ => {
            let each: Vec<String> = offsets.iter().map(ToString::to_string).collect();
            each.join(", ")
        }
    }
}

/// Python's spelling of a boolean (`True`/`False`), which the chapter's output uses.
pub fn python_bool(value: bool) -> &'static str {
    if value {
        "True"
    } else {
        "False"
    }
}

/// Fails the lab with `message` unless `condition` holds.
pub fn expect(condition: bool, message: impl Into<String>) -> Result<(), LabError> {
    if condition {
        Ok(())
    } else {
        Err(LabError::Expectation(message.into()))
    }
}

/// Runs a lab: creates a temporary directory, runs `lab` in it on a single-threaded runtime
/// with a narrator on standard output, removes the directory, and turns the outcome into the
/// process's exit code (failure: the error and its code on standard error).
pub fn run_lab<F, Fut>(name: &str, lab: F) -> ExitCode
where
    F: FnOnce(PathBuf, Narrator) -> Fut,
    Fut: Future<Output = Result<(), LabError>>,
{
    let outcome = (|| -> Result<(), LabError> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{name}-lab-"))
            .tempdir()?;
        let runtime = tokio::runtime::Builder::new_current_thread().build()?;
        runtime.block_on(lab(dir.path().to_path_buf(), Narrator::stdout()))?;
        // Close explicitly so a failure to remove the directory is reported, not ignored.
        dir.close()?;
        Ok(())
    })();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name} lab failed [{}]: {e}", e.code());
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_spelled_as_in_the_chapter() {
        let tps = [
            TopicPartition::new("orders", 0),
            TopicPartition::new("orders", 2),
        ];
        assert_eq!(partitions(&tps), "orders-0, orders-2");
        assert_eq!(partitions(&[]), "(none)");
        let map: OffsetMap = [(tps[1].clone(), 3), (tps[0].clone(), 7)].into();
        assert_eq!(offsets(&map), "orders-0=7, orders-2=3");
        let gone = [ExpiredMember {
            group: "workers".into(),
            member: "member-1".into(),
        }];
        assert_eq!(expired(&gone), "workers/member-1");
        assert_eq!(expired(&[]), "(none)");
        assert_eq!(python_bool(false), "False");
    }

    #[test]
    fn offset_ranges_collapse_only_consecutive_runs() {
        assert_eq!(offset_range(&[6, 7, 8, 9]), "6-9");
        assert_eq!(offset_range(&[4]), "4");
        assert_eq!(offset_range(&[1, 3]), "1, 3");
        assert_eq!(offset_range(&[]), "(none)");
    }

    #[test]
    fn steps_are_numbered_in_order() {
        let mut n = Narrator::new(Vec::new());
        n.line("Setup").unwrap();
        n.step("a").unwrap();
        n.detail("x").unwrap();
        n.step("b").unwrap();
        let text = String::from_utf8(n.into_inner()).unwrap();
        assert_eq!(text, "Setup\n1. a\n   x\n2. b\n");
    }

    #[test]
    fn expect_fails_with_the_message() {
        assert!(expect(true, "fine").is_ok());
        let err = expect(false, "commit should have been fenced").unwrap_err();
        assert_eq!(err.code(), "LAB_EXPECTATION_FAILED");
        assert!(err.to_string().contains("fenced"));
    }
}
