//! Regular-expression subscriptions (KIP-848's `SubscribedTopicRegex`).
//!
//! Kafka 4 compiles a member's expression with RE2/J and matches it against every topic
//! name with `Matcher.matches()`: the whole name must match. The `regex` crate follows
//! RE2's design (linear-time matching, no backreferences, no lookaround), so an expression
//! that compiles in one compiles in the other with the same meaning for topic names
//! (`[a-zA-Z0-9._-]`, where the ASCII and Unicode readings of `\w`, `\d` and `\b` agree).
//! The differences, written down in `docs/architecture.md`: RE2/J's `\Q…\E` quoting is
//! refused here (the `regex` crate has no such escape: write `\.` for a literal dot), and the
//! compiled program is capped at [`MAX_PROGRAM_BYTES`] so a hostile expression cannot take
//! the coordinator's memory. Backreferences and lookaround are refused by both.

use regex::{Regex, RegexBuilder};

use crate::error::Error;

/// How long a group's resolved expressions are trusted before a heartbeat matches them
/// against the topics again (Kafka's `REGEX_BATCH_REFRESH_INTERVAL_MS`, 10 s).
pub(crate) const REFRESH_INTERVAL_MS: u64 = 10_000;

/// The most memory one compiled expression may use (its program and its lazy DFA each).
pub(crate) const MAX_PROGRAM_BYTES: usize = 1 << 20;

fn builder(pattern: &str) -> RegexBuilder {
    let mut b = RegexBuilder::new(pattern);
    b.size_limit(MAX_PROGRAM_BYTES)
        .dfa_size_limit(MAX_PROGRAM_BYTES);
    b
}

/// One line of the `regex` crate's error: the `error: …` line of a syntax error (which
/// otherwise spans several lines with a caret under the pattern), else the whole message.
fn describe(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .find_map(|l| l.strip_prefix("error: "))
        .map(str::to_string)
        .unwrap_or_else(|| text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Compiles `pattern` to match whole topic names, or Kafka's `INVALID_REGULAR_EXPRESSION`
/// with its message.
pub(crate) fn compile(pattern: &str) -> Result<Regex, Error> {
    let invalid = |e: regex::Error| Error::InvalidRegularExpression {
        regex: pattern.to_string(),
        reason: describe(&e),
    };
    // The expression alone must compile: `a)|(b` is not valid, though `^(?:a)|(b)$` is.
    builder(pattern).build().map_err(invalid)?;
    builder(&format!("^(?:{pattern})$"))
        .build()
        .map_err(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expression_matches_whole_topic_names_only() {
        let r = compile("orders-.*").unwrap();
        assert!(r.is_match("orders-eu"));
        assert!(!r.is_match("old-orders-eu"));
        let alt = compile("a|ab").unwrap();
        assert!(alt.is_match("ab"), "the whole name, as Matcher.matches");
        assert!(!compile("ord").unwrap().is_match("orders"));
    }

    #[test]
    fn an_invalid_expression_is_refused_with_kafkas_message() {
        // The last two are the differences from RE2/J the module documents.
        for bad in [
            "a)|(b",
            "(",
            "[z-a]",
            "(?<=a)b",
            r"(a)\1",
            r"\Qa.b\E",
            "(?P<n>a)(?P=n)",
        ] {
            let e = compile(bad).unwrap_err();
            assert_eq!(e.code(), "INVALID_REGULAR_EXPRESSION", "{bad}");
            assert_eq!(e.kafka_code(), Some(128));
            let msg = e.to_string();
            assert!(
                msg.starts_with(&format!(
                    "SubscribedTopicRegex `{bad}` is not a valid regular expression: "
                )),
                "{msg}"
            );
            assert!(!msg.contains('\n'), "one line: {msg}");
        }
    }

    #[test]
    fn an_expression_too_large_to_compile_is_refused() {
        let e = compile("(\\w{100}){100}").unwrap_err();
        assert_eq!(e.code(), "INVALID_REGULAR_EXPRESSION");
        assert!(e.to_string().contains("size limit"), "{e}");
    }
}
