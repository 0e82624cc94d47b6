//! Kafka's `cooperative-sticky` strategy.

use coordinator_core::{AssignError, Assignment, AssignmentInput, Assignor, MemberIndex};

use crate::common::member_indices;
use crate::names::COOPERATIVE_STICKY;

use super::sticky_assignment;

/// Kafka's `CooperativeStickyAssignor`, `"cooperative-sticky"`: sticky, handed over in two
/// generations (KIP-429).
///
/// The assignment is [`StickyAssignor`](crate::StickyAssignor)'s, except that a partition
/// which would pass directly from its previous owner to a different member is left
/// unassigned ([`Assignment::UNASSIGNED`]) in this generation. Its previous owner revokes
/// it; in the next generation nobody owns it, so it goes to its new owner then. A member
/// therefore never starts on a partition another member may still be processing.
/// Partitions whose previous owner has left are free and assigned at once.
///
/// ```
/// use assignor::CooperativeStickyAssignor;
/// use coordinator_core::{AssignmentRequest, Assignor};
///
/// // a and b share t-0…t-3; c joins. Sticky would move t-3 from b to c at once.
/// let request = AssignmentRequest::builder()
///     .topic("t", 4)
///     .member("a", ["t"]).member("b", ["t"]).member("c", ["t"])
///     .owned("a", "t", 0).owned("a", "t", 1)
///     .owned("b", "t", 2).owned("b", "t", 3)
///     .build()?;
/// let input = request.input();
/// let map = CooperativeStickyAssignor.assign(&input)?.to_map(&input);
/// assert_eq!(format!("{:?}", map["a"]), "[t-0, t-1]");
/// assert_eq!(format!("{:?}", map["b"]), "[t-2]"); // revokes t-3
/// assert!(map["c"].is_empty()); // gets t-3 in the next generation
/// # Ok::<(), coordinator_core::AssignError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CooperativeStickyAssignor;

impl Assignor for CooperativeStickyAssignor {
    fn name(&self) -> &str {
        COOPERATIVE_STICKY
    }

    fn assign(&self, input: &AssignmentInput<'_>) -> Result<Assignment, AssignError> {
        let mut out = sticky_assignment(input)?;
        withhold_transfers(&mut out, input);
        Ok(out)
    }
}

/// Clears every partition whose new owner is a member other than its previous owner.
fn withhold_transfers(out: &mut Assignment, input: &AssignmentInput<'_>) {
    for m in member_indices(input) {
        for &p in input.owned(m) {
            if out.owner(p).is_some_and(|new: MemberIndex| new != m) {
                out.clear_owner(p);
            }
        }
    }
}
