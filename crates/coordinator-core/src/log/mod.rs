//! The partition-log port: records as consumers read them and producers hand them over, the
//! [`RecordSource`] port consumers read through, its error, and Kafka's topic-name rule.
//!
//! This is vocabulary and contract only, free of I/O like the rest of the core. Logs live in
//! adapter crates (the in-memory `partition-log`), and both the `consumer` client and the
//! `broker` reach them through this module's types, so neither depends on the other.

mod error;
mod record;
mod source;

pub use error::{LogError, OutOfRange};
pub use record::{Bytes, Header, NewRecord, Record};
pub use source::RecordSource;

/// Kafka's longest legal topic name.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Checks a topic name against Kafka's rules: 1 to 249 characters, each ASCII alphanumeric,
/// `.`, `_` or `-`, and neither `.` nor `..`.
///
/// ```
/// use coordinator_core::validate_topic_name;
/// assert!(validate_topic_name("orders.v2_eu-west").is_ok());
/// assert_eq!(validate_topic_name("..").unwrap_err().code(), "INVALID_TOPIC_EXCEPTION");
/// assert_eq!(validate_topic_name("a/b").unwrap_err().kafka_code(), Some(17));
/// ```
pub fn validate_topic_name(name: &str) -> Result<(), LogError> {
    let invalid = |reason: String| {
        Err(LogError::InvalidTopic {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("a topic name must not be empty".into());
    }
    if name == "." || name == ".." {
        return invalid("`.` and `..` are not allowed as topic names".into());
    }
    // Characters first: the allowed ones are ASCII, so afterwards bytes and characters agree.
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return invalid(format!(
            "character {bad:?} is not allowed; use ASCII letters, digits, `.`, `_` and `-`"
        ));
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return invalid(format!(
            "it is {} characters long; the limit is {MAX_TOPIC_NAME_LEN}",
            name.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka_rules() {
        let long = "x".repeat(MAX_TOPIC_NAME_LEN);
        for ok in ["a", "A-Z_0.9", "...", long.as_str()] {
            assert!(validate_topic_name(ok).is_ok(), "{ok:?}");
        }
        let too_long = "x".repeat(MAX_TOPIC_NAME_LEN + 1);
        for bad in ["", ".", "..", "a b", "a/b", "é", too_long.as_str()] {
            let err = validate_topic_name(bad).err();
            assert_eq!(
                err.map(|e| e.code()),
                Some("INVALID_TOPIC_EXCEPTION"),
                "{bad:?}"
            );
        }
    }
}
