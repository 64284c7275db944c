//! Kafka's `RoundRobinAssignor` (protocol name `"roundrobin"`).
//!
//! All partitions of all subscribed topics are laid out sorted by
//! `(topic, partition)` and dealt one at a time around the members in Kafka's
//! member order. The dealer's position carries over from topic to topic; a
//! member not subscribed to the current partition's topic is skipped. With
//! identical subscriptions this gives counts within one of each other; with
//! differing subscriptions it can be unbalanced, exactly as in Kafka.

use std::collections::{BTreeMap, BTreeSet};

use super::assignor::{
    empty_assignment, sort_assignment, sorted_members, Assignor, GroupAssignment, MemberSubscription,
};

/// Partitions dealt in turn over the members, as Kafka's `RoundRobinAssignor`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobinAssignor;

impl Assignor for RoundRobinAssignor {
    fn name(&self) -> &'static str {
        "roundrobin"
    }

    fn assign(&self, partitions_per_topic: &BTreeMap<String, i32>, members: &[MemberSubscription]) -> GroupAssignment {
        let sorted = sorted_members(members);
        let mut out = empty_assignment(&sorted);
        let subscriptions: Vec<BTreeSet<&str>> = sorted
            .iter()
            .map(|m| m.topics.iter().map(String::as_str).collect())
            .collect();
        let mut cursor = 0usize;
        for (topic, &count) in partitions_per_topic {
            if !subscriptions.iter().any(|s| s.contains(topic.as_str())) {
                continue;
            }
            for partition in 0..count.max(0) {
                // Terminates: at least one member is subscribed to `topic`.
                while !subscriptions[cursor].contains(topic.as_str()) {
                    cursor = (cursor + 1) % sorted.len();
                }
                if let Some(list) = out.get_mut(&sorted[cursor].member_id) {
                    list.push((topic.clone(), partition));
                }
                cursor = (cursor + 1) % sorted.len();
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
        let result = RoundRobinAssignor.assign(&ppt, &seed_members(&["C0", "C1", "C2"]));
        assert_eq!(result["C0"], [tp("t0", 0), tp("t1", 0)]);
        assert_eq!(result["C1"], [tp("t0", 1), tp("t1", 1)]);
        assert_eq!(result["C2"], [tp("t0", 2), tp("t1", 2)]);

        // C1 leaves: t0p0→C0, t0p1→C2, t0p2→C0, t1p0→C2, t1p1→C0, t1p2→C2.
        let result = RoundRobinAssignor.assign(&ppt, &seed_members(&["C0", "C2"]));
        assert_eq!(result["C0"], [tp("t0", 0), tp("t0", 2), tp("t1", 1)]);
        assert_eq!(result["C2"], [tp("t0", 1), tp("t1", 0), tp("t1", 2)]);
    }

    #[test]
    fn differing_subscriptions_skip_unsubscribed_members() {
        // Kafka's javadoc example: t0 (1), t1 (2), t2 (3) partitions;
        // C0 ⊂ {t0}, C1 ⊂ {t0, t1}, C2 ⊂ {t0, t1, t2}.
        let ppt = topics(&[("t0", 1), ("t1", 2), ("t2", 3)]);
        let members = vec![
            MemberSubscription::new("C0", ["t0"]),
            MemberSubscription::new("C1", ["t0", "t1"]),
            MemberSubscription::new("C2", ["t0", "t1", "t2"]),
        ];
        let result = RoundRobinAssignor.assign(&ppt, &members);
        assert_eq!(result["C0"], [tp("t0", 0)]);
        assert_eq!(result["C1"], [tp("t1", 0)]);
        assert_eq!(result["C2"], [tp("t1", 1), tp("t2", 0), tp("t2", 1), tp("t2", 2)]);
        assert_eq!(RoundRobinAssignor.name(), "roundrobin");
    }

    #[test]
    fn no_members_or_no_partitions() {
        let ppt = topics(&[("t", 4)]);
        assert!(RoundRobinAssignor.assign(&ppt, &[]).is_empty());
        let result = RoundRobinAssignor.assign(&topics(&[]), &seed_members(&["a"]));
        assert!(result["a"].is_empty());
    }

    proptest! {
        #[test]
        fn prop_round_robin_is_valid((ppt, members) in arb_group()) {
            let result = RoundRobinAssignor.assign(&ppt, &members);
            check_valid(&ppt, &members, &result);
            prop_assert_eq!(RoundRobinAssignor.assign(&ppt, &members), result);
        }

        #[test]
        fn prop_round_robin_balances_identical_subscriptions(
            (ppt, mut members) in arb_group(),
            shared in prop::collection::btree_set(0usize..5, 0..4),
        ) {
            for m in &mut members {
                m.topics = shared.iter().map(|t| format!("t{t}")).collect();
            }
            let result = RoundRobinAssignor.assign(&ppt, &members);
            check_valid(&ppt, &members, &result);
            check_spread_at_most_one(&result);
        }
    }
}
