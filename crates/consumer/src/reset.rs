//! Where a partition without a position starts reading.

use std::fmt;
use std::str::FromStr;

use crate::error::ConsumerError;

/// What `poll` does for a partition with no position and no committed offset, and after a
/// fetch position falls outside the log (Kafka's `auto.offset.reset`).
///
/// Parses from exactly `earliest`, `latest` or `error`; anything else is refused:
///
/// ```
/// use consumer::AutoOffsetReset;
/// assert_eq!("earliest".parse::<AutoOffsetReset>()?, AutoOffsetReset::Earliest);
/// let err = "none".parse::<AutoOffsetReset>().unwrap_err();
/// assert_eq!(err.code(), "INVALID_ARGUMENT");
/// assert_eq!(AutoOffsetReset::Latest.to_string(), "latest");
/// # Ok::<(), consumer::ConsumerError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum AutoOffsetReset {
    /// Start at the log start offset (the oldest record retention kept).
    Earliest,
    /// Start at the visible end (high watermark): only records appended from now on. Kafka's
    /// default, and this crate's.
    #[default]
    Latest,
    /// Refuse with `OFFSET_OUT_OF_RANGE` (Kafka calls this policy `none`).
    Error,
}

impl AutoOffsetReset {
    /// Every policy, in the order of their names in the docs.
    pub const ALL: [AutoOffsetReset; 3] = [
        AutoOffsetReset::Earliest,
        AutoOffsetReset::Latest,
        AutoOffsetReset::Error,
    ];

    /// The policy's name: `earliest`, `latest` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            AutoOffsetReset::Earliest => "earliest",
            AutoOffsetReset::Latest => "latest",
            AutoOffsetReset::Error => "error",
        }
    }
}

impl fmt::Display for AutoOffsetReset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AutoOffsetReset {
    type Err = ConsumerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(policy) = AutoOffsetReset::ALL.into_iter().find(|p| p.as_str() == s) {
            return Ok(policy);
        }
        // Kafka spells the refusing policy `none`; point a Kafka user at our name for it.
        let hint = if s == "none" {
            " (Kafka's `none` is spelled `error` here)"
        } else {
            ""
        };
        Err(ConsumerError::invalid(
            "auto_offset_reset",
            format!("{s:?} is not one of `earliest`, `latest`, `error`{hint}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for policy in AutoOffsetReset::ALL {
            assert_eq!(
                policy.as_str().parse::<AutoOffsetReset>().ok(),
                Some(policy)
            );
        }
    }

    #[test]
    fn anything_else_is_refused_with_a_clear_message() {
        for bad in ["", "Earliest", "LATEST", " earliest", "smallest", "none"] {
            let err = bad.parse::<AutoOffsetReset>().expect_err(bad);
            assert_eq!(err.code(), "INVALID_ARGUMENT");
            let msg = err.to_string();
            assert!(msg.contains("auto_offset_reset"), "{msg}");
            assert!(msg.contains("`earliest`, `latest`, `error`"), "{msg}");
        }
        let none = "none".parse::<AutoOffsetReset>().expect_err("none");
        assert!(none.to_string().contains("spelled `error`"));
    }
}
