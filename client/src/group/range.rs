//! Kafka's `RangeAssignor` (protocol name `"range"`).
//!
//! Each topic is handled on its own: the members subscribed to it are put in
//! Kafka's member order and its partitions are cut into contiguous ranges,
//! `n / m` each, with the first `n % m` members taking one extra. Because the
//! same members come first for every topic, range tends to load them more
//! when many topics do not divide evenly; that is Kafka's behaviour and
//! clients that choose "range" expect exactly it (co-partitioned topics land
//! on the same member). Kafka's rack-aware variant is not implemented.

use std::collections::BTreeMap;

use super::assignor::{
    empty_assignment, sort_assignment, sorted_members, Assignor, GroupAssignment, MemberSubscription,
};

/// Contiguous per-topic ranges, as Kafka's `RangeAssignor`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RangeAssignor;

impl Assignor for RangeAssignor {
    fn name(&self) -> &'static str {
        "range"
    }

    fn assign(&self, partitions_per_topic: &BTreeMap<String, i32>, members: &[MemberSubscription]) -> GroupAssignment {
        let sorted = sorted_members(members);
        let mut out = empty_assignment(&sorted);
        for (topic, &count) in partitions_per_topic {
            let subscribers: Vec<&MemberSubscription> =
                sorted.iter().copied().filter(|m| m.is_subscribed(topic)).collect();
            if count <= 0 || subscribers.is_empty() {
                continue;
            }
            let n = count as usize;
            let per_member = n / subscribers.len();
            let with_extra = n % subscribers.len();
            for (i, member) in subscribers.iter().enumerate() {
                let start = per_member * i + i.min(with_extra);
                let len = per_member + usize::from(i < with_extra);
                if let Some(list) = out.get_mut(&member.member_id) {
                    list.extend((start..start + len).map(|p| (topic.clone(), p as i32)));
                }
            }
        }
        sort_assignment(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::assignor::test_support::*;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn seed_document_example() {
        let ppt = topics(&[("t0", 3), ("t1", 3)]);
        let result = RangeAssignor.assign(&ppt, &seed_members(&["C0", "C1", "C2"]));
        assert_eq!(result["C0"], [tp("t0", 0), tp("t1", 0)]);
        assert_eq!(result["C1"], [tp("t0", 1), tp("t1", 1)]);
        assert_eq!(result["C2"], [tp("t0", 2), tp("t1", 2)]);

        // C1 leaves: 3 partitions over 2 members, C0 (first) takes the extra.
        let result = RangeAssignor.assign(&ppt, &seed_members(&["C0", "C2"]));
        assert_eq!(result["C0"], [tp("t0", 0), tp("t0", 1), tp("t1", 0), tp("t1", 1)]);
        assert_eq!(result["C2"], [tp("t0", 2), tp("t1", 2)]);
    }

    #[test]
    fn static_members_come_first() {
        let ppt = topics(&[("t", 3)]);
        let members = vec![
            MemberSubscription::new("a", ["t"]),
            MemberSubscription::new("b", ["t"]).with_instance_id("static"),
        ];
        let result = RangeAssignor.assign(&ppt, &members);
        assert_eq!(result["b"], [tp("t", 0), tp("t", 1)]);
        assert_eq!(result["a"], [tp("t", 2)]);
    }

    #[test]
    fn unknown_topics_and_members_without_topics() {
        let ppt = topics(&[("t", 2), ("empty", 0)]);
        let members = vec![
            MemberSubscription::new("a", ["t", "missing", "empty"]),
            MemberSubscription::new("b", Vec::<String>::new()),
        ];
        let result = RangeAssignor.assign(&ppt, &members);
        assert_eq!(result["a"], [tp("t", 0), tp("t", 1)]);
        assert!(result["b"].is_empty());
        assert_eq!(RangeAssignor.name(), "range");
    }

    proptest! {
        #[test]
        fn prop_range_is_valid_and_per_topic_ranges((ppt, members) in arb_group()) {
            let result = RangeAssignor.assign(&ppt, &members);
            check_valid(&ppt, &members, &result);
            let order = sorted_members(&members);
            for (topic, &count) in &ppt {
                let subs: Vec<_> = order.iter().filter(|m| m.is_subscribed(topic)).collect();
                let mut next = 0;
                for (i, m) in subs.iter().enumerate() {
                    let mine: Vec<i32> = result[&m.member_id]
                        .iter().filter(|(t, _)| t == topic).map(|(_, p)| *p).collect();
                    let expected = count as usize / subs.len()
                        + usize::from(i < count as usize % subs.len());
                    // Contiguous, in member order, first (n % m) get one extra.
                    prop_assert_eq!(mine, (next..next + expected as i32).collect::<Vec<_>>());
                    next += expected as i32;
                }
            }
            prop_assert_eq!(RangeAssignor.assign(&ppt, &members), result);
        }
    }
}
