//! Shorthands for the unit tests: build requests from names, read results as names.

#![allow(clippy::expect_used)]

use std::collections::BTreeMap;

use coordinator_core::{AssignmentRequest, Assignor};

/// A request with `topics` (name, partitions) and `members` (id, subscriptions).
pub(crate) fn request(topics: &[(&str, u32)], members: &[(&str, &[&str])]) -> AssignmentRequest {
    request_owned(topics, members, &[])
}

/// As [`request`], plus previously owned partitions (member, topic, partition).
pub(crate) fn request_owned(
    topics: &[(&str, u32)],
    members: &[(&str, &[&str])],
    owned: &[(&str, &str, u32)],
) -> AssignmentRequest {
    let mut b = AssignmentRequest::builder();
    for &(t, p) in topics {
        b = b.topic(t, p);
    }
    for &(m, subs) in members {
        b = b.member(m, subs.iter().copied());
    }
    for &(m, t, p) in owned {
        b = b.owned(m, t, p);
    }
    b.build().expect("valid test request")
}

/// Runs `assignor`, checks the result against its input, and lists every member's
/// partitions as `topic-partition` strings.
pub(crate) fn assign_names(
    assignor: &dyn Assignor,
    request: &AssignmentRequest,
) -> BTreeMap<String, Vec<String>> {
    let input = request.input();
    let out = assignor.assign(&input).expect("assignment succeeds");
    out.validate(&input).expect("assignment is valid");
    out.to_map(&input)
        .into_iter()
        .map(|(m, tps)| (m, tps.iter().map(ToString::to_string).collect()))
        .collect()
}
