//! Every strategy of this crate, by name.

use std::sync::Arc;

use coordinator_core::Assignor;

use crate::names;
use crate::{
    CooperativeStickyAssignor, MiniKafkaRoundRobinAssignor, RangeAssignor, RoundRobinAssignor,
    StickyAssignor,
};

/// Every strategy of this crate, the default ([`names::DEFAULT`], the seed's round-robin)
/// first, then Kafka's in the order of [`names::ALL`].
///
/// Registering them in this order with a coordinator keeps the seed's strategy the default
/// for members that name none, and makes it win negotiation ties.
pub fn all() -> Vec<Arc<dyn Assignor>> {
    names::ALL.iter().filter_map(|name| by_name(name)).collect()
}

/// The strategy called `name` (Kafka's spelling: `range`, `roundrobin`, `sticky`,
/// `cooperative-sticky`; or the seed's `minikafka-roundrobin`), if this crate has it.
pub fn by_name(name: &str) -> Option<Arc<dyn Assignor>> {
    let assignor: Arc<dyn Assignor> = match name {
        names::MINIKAFKA_ROUNDROBIN => Arc::new(MiniKafkaRoundRobinAssignor),
        names::RANGE => Arc::new(RangeAssignor),
        names::ROUNDROBIN => Arc::new(RoundRobinAssignor),
        names::STICKY => Arc::new(StickyAssignor),
        names::COOPERATIVE_STICKY => Arc::new(CooperativeStickyAssignor),
        _ => return None,
    };
    Some(assignor)
}

/// The default strategy: the seed's round-robin.
pub fn default_assignor() -> Arc<dyn Assignor> {
    Arc::new(MiniKafkaRoundRobinAssignor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_resolves_to_a_strategy_of_that_name() {
        for name in names::ALL {
            let a = by_name(name).expect("known name");
            assert_eq!(a.name(), name);
        }
        assert!(by_name("Range").is_none());
        assert!(by_name("").is_none());
    }

    #[test]
    fn all_lists_the_default_first_and_each_name_once() {
        let got: Vec<String> = all().iter().map(|a| a.name().to_string()).collect();
        assert_eq!(got, names::ALL);
        assert_eq!(got[0], names::DEFAULT);
        assert_eq!(default_assignor().name(), names::DEFAULT);
    }
}
