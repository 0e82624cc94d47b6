//! Properties of every strategy over random groups: validity and coverage, determinism
//! whatever order a group is declared in, agreement with naive reference models (the seed's round-robin, range,
//! roundrobin), balance, stickiness, and cooperative hand-over.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;

use assignor::{
    CooperativeStickyAssignor, MiniKafkaRoundRobinAssignor, RangeAssignor, RoundRobinAssignor,
    StickyAssignor,
};
use coordinator_core::{
    Assignment, AssignmentInput, AssignmentRequest, Assignor, MemberIndex, PartitionRef, TopicIndex,
};
use proptest::prelude::*;

/// A random group: topic `t{i}` has `topics[i]` partitions; member `m{j}` subscribes to
/// topic `i` iff `subs[j][i]`; `prev[i][p]` is the member that owned `t{i}-{p}` before.
#[derive(Clone, Debug)]
struct Group {
    topics: Vec<u32>,
    subs: Vec<Vec<bool>>,
    prev: Vec<Vec<Option<usize>>>,
}

fn group(identical: bool) -> impl Strategy<Value = Group> {
    (1..=4usize, 0..=6usize)
        .prop_flat_map(move |(topic_count, members)| {
            let topics = prop::collection::vec(0..=9u32, topic_count);
            let subs = if identical {
                prop::collection::vec(any::<bool>(), topic_count)
                    .prop_map(move |s| vec![s; members])
                    .boxed()
            } else {
                prop::collection::vec(prop::collection::vec(any::<bool>(), topic_count), members)
                    .boxed()
            };
            (Just(members), topics, subs)
        })
        .prop_flat_map(|(members, topics, subs)| {
            let owner = prop::option::weighted(0.7, 0..members.max(1));
            let prev: Vec<_> = topics
                .iter()
                .map(|&p| prop::collection::vec(owner.clone(), p as usize))
                .collect();
            (Just(members), Just(topics), Just(subs), prev)
        })
        .prop_map(|(members, topics, subs, prev)| Group {
            topics,
            subs,
            // with no members, no previous owners
            prev: prev
                .into_iter()
                .map(|ps| ps.into_iter().map(|o| o.filter(|&m| m < members)).collect())
                .collect(),
        })
}

/// A group with a random order for declaring its topics and its members.
fn shuffled_group() -> impl Strategy<Value = (Group, Vec<usize>, Vec<usize>)> {
    group(false).prop_flat_map(|g| {
        let topics = Just((0..g.topics.len()).collect::<Vec<_>>()).prop_shuffle();
        let members = Just((0..g.subs.len()).collect::<Vec<_>>()).prop_shuffle();
        (Just(g), topics, members)
    })
}

fn topic_name(i: usize) -> String {
    format!("t{i}")
}

fn member_name(j: usize) -> String {
    format!("m{j}")
}

impl Group {
    /// The request, with builder calls in the given orders of topics and members.
    fn request_in(&self, topic_order: &[usize], member_order: &[usize]) -> AssignmentRequest {
        let mut b = AssignmentRequest::builder();
        for &i in topic_order {
            b = b.topic(topic_name(i), self.topics[i]);
        }
        for &j in member_order {
            let subs = (0..self.topics.len())
                .filter(|&i| self.subs[j][i])
                .map(topic_name);
            b = b.member(member_name(j), subs);
        }
        for &i in topic_order.iter().rev() {
            for (p, owner) in self.prev[i].iter().enumerate() {
                if let Some(m) = owner {
                    b = b.owned(&member_name(*m), topic_name(i), p as u32);
                }
            }
        }
        b.build().expect("generated groups are valid")
    }

    fn request(&self) -> AssignmentRequest {
        let topics: Vec<usize> = (0..self.topics.len()).collect();
        let members: Vec<usize> = (0..self.subs.len()).collect();
        self.request_in(&topics, &members)
    }

    /// The same group with `owners` as the previous assignment.
    fn with_previous(&self, input: &AssignmentInput<'_>, owners: &Assignment) -> Group {
        let mut next = self.clone();
        for (i, ps) in next.prev.iter_mut().enumerate() {
            let t = topic_index(input, i);
            for (p, slot) in ps.iter_mut().enumerate() {
                *slot = owners
                    .owner(PartitionRef::new(t, p as u32))
                    .map(|m| member_of(input, m));
            }
        }
        next
    }
}

fn topic_index(input: &AssignmentInput<'_>, i: usize) -> TopicIndex {
    let name = topic_name(i);
    input
        .topics()
        .iter()
        .position(|t| *t.name == *name)
        .expect("topic in input") as TopicIndex
}

fn member_of(input: &AssignmentInput<'_>, m: MemberIndex) -> usize {
    input.member_ids()[m as usize][1..].parse().expect("m{j}")
}

fn strategies() -> Vec<Box<dyn Assignor>> {
    vec![
        Box::new(MiniKafkaRoundRobinAssignor),
        Box::new(RangeAssignor),
        Box::new(RoundRobinAssignor),
        Box::new(StickyAssignor),
        Box::new(CooperativeStickyAssignor),
    ]
}

fn counts(out: &Assignment, members: usize) -> Vec<usize> {
    let mut c = vec![0; members];
    for &o in out.owners() {
        if o != Assignment::UNASSIGNED {
            c[o as usize] += 1;
        }
    }
    c
}

fn spread(c: &[usize]) -> usize {
    c.iter().max().unwrap_or(&0) - c.iter().min().unwrap_or(&0)
}

fn subscribers(input: &AssignmentInput<'_>, t: TopicIndex) -> Vec<MemberIndex> {
    (0..input.member_count() as MemberIndex)
        .filter(|&m| input.is_subscribed(m, t))
        .collect()
}

/// Every partition of a subscribed topic has one owner, a subscriber (`validate`);
/// partitions nobody subscribes to have none. `withheld(p)` excuses a missing owner.
fn check_coverage(
    input: &AssignmentInput<'_>,
    out: &Assignment,
    withheld: impl Fn(PartitionRef) -> bool,
) -> Result<(), TestCaseError> {
    out.validate(input)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    for t in 0..input.topics().len() as TopicIndex {
        let subscribed = !subscribers(input, t).is_empty();
        for (p, &o) in out.topic_owners(t).iter().enumerate() {
            let pr = PartitionRef::new(t, p as u32);
            if subscribed {
                prop_assert!(
                    o != Assignment::UNASSIGNED || withheld(pr),
                    "{pr:?} unowned"
                );
            } else {
                prop_assert_eq!(o, Assignment::UNASSIGNED);
            }
        }
    }
    Ok(())
}

fn previous_owner(input: &AssignmentInput<'_>, p: PartitionRef) -> Option<MemberIndex> {
    (0..input.member_count() as MemberIndex).find(|&m| input.owned(m).contains(&p))
}

/// Kafka's balance: no partition could move to a subscriber of its topic that has two or
/// more fewer partitions than its owner.
fn check_kafka_balance(input: &AssignmentInput<'_>, out: &Assignment) -> Result<(), TestCaseError> {
    let c = counts(out, input.member_count());
    for t in 0..input.topics().len() as TopicIndex {
        let subs = subscribers(input, t);
        for &o in out.topic_owners(t) {
            if o == Assignment::UNASSIGNED {
                continue;
            }
            for &m in &subs {
                prop_assert!(
                    c[o as usize] <= c[m as usize] + 1,
                    "owner {o} has {}, subscriber {m} has {}",
                    c[o as usize],
                    c[m as usize]
                );
            }
        }
    }
    Ok(())
}

type Named = BTreeMap<String, Vec<(String, u32)>>;

fn named(input: &AssignmentInput<'_>, out: &Assignment) -> Named {
    out.to_map(input)
        .into_iter()
        .map(|(m, tps)| {
            let tps = tps
                .iter()
                .map(|tp| (tp.topic().to_string(), tp.partition()))
                .collect();
            (m, tps)
        })
        .collect()
}

/// Reference models, written from the rules' wording over names, with no index machinery.
mod reference {
    use super::*;

    pub(super) struct Sorted {
        pub(super) topics: Vec<(String, u32)>,
        pub(super) members: Vec<(String, Vec<String>)>,
    }

    pub(super) fn sorted(g: &Group) -> Sorted {
        let mut topics: Vec<(String, u32)> = g
            .topics
            .iter()
            .enumerate()
            .map(|(i, &p)| (topic_name(i), p))
            .collect();
        topics.sort();
        let mut members: Vec<(String, Vec<String>)> = g
            .subs
            .iter()
            .enumerate()
            .map(|(j, s)| {
                let subs = (0..s.len()).filter(|&i| s[i]).map(topic_name).collect();
                (member_name(j), subs)
            })
            .collect();
        members.sort();
        Sorted { topics, members }
    }

    fn empty(s: &Sorted) -> Named {
        s.members
            .iter()
            .map(|(m, _)| (m.clone(), Vec::new()))
            .collect()
    }

    fn eligible<'a>(s: &'a Sorted, topic: &str) -> Vec<&'a str> {
        s.members
            .iter()
            .filter(|(_, subs)| subs.iter().any(|t| t == topic))
            .map(|(m, _)| m.as_str())
            .collect()
    }

    pub(super) fn minikafka(g: &Group) -> Named {
        let s = sorted(g);
        let mut out = empty(&s);
        let mut cursor = 0usize;
        for (topic, partitions) in &s.topics {
            let eligible = eligible(&s, topic);
            if eligible.is_empty() {
                continue;
            }
            for p in 0..*partitions {
                let owner = eligible[cursor % eligible.len()];
                out.get_mut(owner).unwrap().push((topic.clone(), p));
                cursor += 1;
            }
        }
        out
    }

    pub(super) fn range(g: &Group) -> Named {
        let s = sorted(g);
        let mut out = empty(&s);
        for (topic, partitions) in &s.topics {
            let eligible = eligible(&s, topic);
            if eligible.is_empty() {
                continue;
            }
            let (n, extra) = (
                *partitions as usize / eligible.len(),
                *partitions as usize % eligible.len(),
            );
            for (i, m) in eligible.iter().enumerate() {
                let start = n * i + i.min(extra);
                let len = n + usize::from(i < extra);
                for p in start..start + len {
                    out.get_mut(*m).unwrap().push((topic.clone(), p as u32));
                }
            }
        }
        out
    }

    /// Kafka's `CircularIterator` walk, literally.
    pub(super) fn roundrobin(g: &Group) -> Named {
        let s = sorted(g);
        let mut out = empty(&s);
        let mut at = 0usize;
        for (topic, partitions) in &s.topics {
            if eligible(&s, topic).is_empty() {
                continue;
            }
            for p in 0..*partitions {
                while !s.members[at].1.iter().any(|t| t == topic) {
                    at = (at + 1) % s.members.len();
                }
                out.get_mut(&s.members[at].0)
                    .unwrap()
                    .push((topic.clone(), p));
                at = (at + 1) % s.members.len();
            }
        }
        out
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_strategy_covers_every_subscribed_partition_once(g in group(false)) {
        let request = g.request();
        let input = request.input();
        for s in strategies() {
            let out = s.assign(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
            if s.name() == "cooperative-sticky" {
                // Withheld: a partition whose previous owner is not its sticky owner.
                let sticky = StickyAssignor.assign(&input).unwrap();
                check_coverage(&input, &out, |p| {
                    previous_owner(&input, p).is_some_and(|prev| sticky.owner(p) != Some(prev))
                })?;
            } else {
                check_coverage(&input, &out, |_| false)?;
            }
        }
    }

    /// An assignor never sees arrival order: `AssignmentInput` lists topics and members
    /// sorted, so a group declared in any order is the same input, and every strategy is a
    /// function of it. (Genuinely reordered inputs cannot be built: the type forbids them.)
    #[test]
    fn declaration_order_never_reaches_an_assignor_and_every_strategy_is_deterministic(
        (g, topics, members) in shuffled_group()
    ) {
        let request = g.request();
        let shuffled = g.request_in(&topics, &members);
        prop_assert_eq!(
            format!("{:?}", request.input()),
            format!("{:?}", shuffled.input()),
            "the builder canonicalises the declaration order"
        );
        for s in strategies() {
            let a = s.assign(&request.input()).unwrap();
            let b = s.assign(&shuffled.input()).unwrap();
            prop_assert_eq!(
                named(&request.input(), &a),
                named(&shuffled.input(), &b),
                "{} by name",
                s.name()
            );
            prop_assert_eq!(&a, &s.assign(&request.input()).unwrap(), "{} repeat", s.name());
        }
    }

    #[test]
    fn simple_strategies_match_their_reference_models(g in group(false)) {
        let request = g.request();
        let input = request.input();
        let seed = MiniKafkaRoundRobinAssignor.assign(&input).unwrap();
        prop_assert_eq!(named(&input, &seed), reference::minikafka(&g));
        let range = RangeAssignor.assign(&input).unwrap();
        prop_assert_eq!(named(&input, &range), reference::range(&g));
        let rr = RoundRobinAssignor.assign(&input).unwrap();
        prop_assert_eq!(named(&input, &rr), reference::roundrobin(&g));
    }

    #[test]
    fn identical_subscriptions_are_balanced(g in group(true)) {
        let request = g.request();
        let input = request.input();
        let members = input.member_count();
        for s in [&MiniKafkaRoundRobinAssignor as &dyn Assignor, &RoundRobinAssignor, &StickyAssignor] {
            let out = s.assign(&input).unwrap();
            prop_assert!(spread(&counts(&out, members)) <= 1, "{}", s.name());
        }
        // range balances each topic, not the whole.
        let out = RangeAssignor.assign(&input).unwrap();
        for t in 0..input.topics().len() as TopicIndex {
            let mut c = vec![0usize; members];
            for &o in out.topic_owners(t) {
                if o != Assignment::UNASSIGNED { c[o as usize] += 1; }
            }
            if !subscribers(&input, t).is_empty() {
                prop_assert!(spread(&c) <= 1);
            }
        }
    }

    #[test]
    fn sticky_keeps_every_owned_partition_balance_allows(g in group(true)) {
        // Identical subscriptions: P partitions over C members, quotas q and q + 1 (r of them).
        // Each member keeps min(owned, final count) — it never gains a new partition while
        // giving up an old one — and the total kept is the maximum any balanced assignment
        // could keep: Σ min(o, q) + min(r, #{o ≥ q + 1}).
        let request = g.request();
        let input = request.input();
        let members = input.member_count();
        prop_assume!(members > 0);
        let out = StickyAssignor.assign(&input).unwrap();
        let c = counts(&out, members);
        let subs = input.subscriptions(0);
        let total: usize = subs.iter().map(|&t| input.topics()[t as usize].partitions as usize).sum();
        let (q, r) = (total / members, total % members);
        let mut kept_total = 0;
        let mut best = 0;
        let mut over = 0;
        for m in 0..members as MemberIndex {
            let valid: Vec<_> = input.owned(m).iter().filter(|p| subs.contains(&p.topic)).collect();
            let kept = valid.iter().filter(|&&&p| out.owner(p) == Some(m)).count();
            prop_assert_eq!(kept, valid.len().min(c[m as usize]), "member {}", m);
            kept_total += kept;
            best += valid.len().min(q);
            over += usize::from(valid.len() > q);
        }
        if r > 0 { best += r.min(over); }
        prop_assert_eq!(kept_total, best);
    }

    #[test]
    fn sticky_is_balanced_in_kafkas_sense(g in group(false)) {
        let request = g.request();
        let input = request.input();
        let out = StickyAssignor.assign(&input).unwrap();
        check_kafka_balance(&input, &out)?;
    }

    #[test]
    fn sticky_leaves_its_own_result_unchanged(g in group(false)) {
        let request = g.request();
        let input = request.input();
        let first = StickyAssignor.assign(&input).unwrap();
        let again = g.with_previous(&input, &first).request();
        let second = StickyAssignor.assign(&again.input()).unwrap();
        prop_assert_eq!(first, second);
    }

    #[test]
    fn cooperative_never_moves_a_partition_directly(g in group(false)) {
        let request = g.request();
        let input = request.input();
        let coop = CooperativeStickyAssignor.assign(&input).unwrap();
        let sticky = StickyAssignor.assign(&input).unwrap();
        for t in 0..input.topics().len() as TopicIndex {
            for p in 0..input.topics()[t as usize].partitions {
                let pr = PartitionRef::new(t, p);
                let prev = previous_owner(&input, pr);
                match (prev, coop.owner(pr)) {
                    (Some(a), Some(b)) => prop_assert_eq!(a, b, "{:?} moved", pr),
                    // Otherwise it is sticky's answer, minus what changes owner.
                    (_, now) => {
                        let withheld = prev.is_some() && sticky.owner(pr).is_some();
                        prop_assert_eq!(now, if withheld { None } else { sticky.owner(pr) });
                    }
                }
            }
        }
    }
}

/// A larger mixed group than proptest draws: sticky stays valid, balanced and stable.
#[test]
fn sticky_on_a_larger_mixed_group() {
    let topics = 12usize;
    let mut b = AssignmentRequest::builder();
    for t in 0..topics {
        b = b.topic(format!("topic-{t:02}"), 40 + 7 * t as u32);
    }
    for m in 0..150usize {
        // member m subscribes to a window of topics whose width depends on m
        let subs: Vec<String> = (0..topics)
            .filter(|t| (t + m) % topics < 1 + m % topics)
            .map(|t| format!("topic-{t:02}"))
            .collect();
        b = b.member(format!("member-{m:03}"), subs);
    }
    let request = b.build().unwrap();
    let input = request.input();
    let out = StickyAssignor.assign(&input).unwrap();
    check_coverage(&input, &out, |_| false).unwrap();
    check_kafka_balance(&input, &out).unwrap();
    // every member subscribed to something gets something here
    assert!(counts(&out, input.member_count()).iter().all(|&c| c > 0));
}

/// The same group, but the previous generation gave every partition to a few members:
/// the balancing passes must move most of them, some more than once.
#[test]
fn sticky_rebalances_a_skewed_previous_assignment() {
    let topics = 12usize;
    let subscribes = |m: usize, t: usize| (t + m) % topics < 1 + m % topics;
    let mut b = AssignmentRequest::builder();
    for t in 0..topics {
        b = b.topic(format!("topic-{t:02}"), 40 + 7 * t as u32);
    }
    for m in 0..150usize {
        let subs = (0..topics)
            .filter(|&t| subscribes(m, t))
            .map(|t| format!("topic-{t:02}"));
        b = b.member(format!("member-{m:03}"), subs);
    }
    for t in 0..topics {
        // the first subscriber (by id) of each topic owned all of it
        let owner = (0..150).find(|&m| subscribes(m, t)).unwrap();
        for p in 0..40 + 7 * t as u32 {
            b = b.owned(&format!("member-{owner:03}"), format!("topic-{t:02}"), p);
        }
    }
    let request = b.build().unwrap();
    let input = request.input();
    let out = StickyAssignor.assign(&input).unwrap();
    check_coverage(&input, &out, |_| false).unwrap();
    check_kafka_balance(&input, &out).unwrap();
    let coop = CooperativeStickyAssignor.assign(&input).unwrap();
    for (&c, &s) in coop.owners().iter().zip(out.owners()) {
        assert!(c == s || c == Assignment::UNASSIGNED);
    }
}
