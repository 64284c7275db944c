//! A sticky assignor (protocol name `"sticky"`): balanced like round robin,
//! but it keeps each member's previously owned partitions where it can, so a
//! rebalance moves (and therefore pauses) as few partitions as possible.
//!
//! Guarantees:
//! * every partition of a subscribed, existing topic goes to exactly one
//!   member subscribed to it;
//! * no partition could be moved to a subscribed member that has two or more
//!   fewer partitions than its owner (so identical subscriptions give counts
//!   within one of each other);
//! * with identical subscriptions, the number of previously owned partitions
//!   that change owner is the minimum any balanced result allows;
//! * running it again with its own result as `owned` changes nothing.
//!
//! Ownership claims are first cleaned: claims on topics the member no longer
//! subscribes to, on topics without metadata, or on partitions that do not
//! exist are dropped, and a partition claimed by several members stays with
//! the first of them in Kafka's member order (this assignor has no generation
//! to break the tie with).
//!
//! Identical subscriptions (the common case) use quotas: with `n` partitions
//! and `m` members, everybody ends with `floor = n / m` or `floor + 1`, and
//! exactly `n % m` members get `floor + 1`. Each member keeps up to `floor`
//! of its partitions, plus one more while `floor + 1` slots remain; the rest
//! are revoked. Freed and unowned partitions are dealt round robin to members
//! below `floor`, then one each to members at `floor` until the slots run out.
//! Only partitions above a member's quota move, which meets the lower bound
//! proved in the tests.
//!
//! Differing subscriptions keep every valid claim, give each unowned partition
//! (least-subscribed topics first) to its least-loaded subscriber, then move
//! partitions from fuller to emptier subscribers while some owner has at least
//! two more than an eligible member, preferring partitions the owner did not
//! own before. Each move strictly lowers the sum of squared counts, so the loop
//! ends; its cost is roughly `moves × (partitions + topics × members)`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use super::assignor::{
    empty_assignment, sort_assignment, sorted_members, Assignor, GroupAssignment, MemberSubscription,
};

/// A partition, borrowing the topic name from the metadata map.
type Tp<'a> = (&'a str, i32);

/// Balanced assignment that preserves previous ownership.
#[derive(Debug, Clone, Copy, Default)]
pub struct StickyAssignor;

impl Assignor for StickyAssignor {
    fn name(&self) -> &'static str {
        "sticky"
    }

    fn assign(&self, partitions_per_topic: &BTreeMap<String, i32>, members: &[MemberSubscription]) -> GroupAssignment {
        let sorted = sorted_members(members);
        let mut out = empty_assignment(&sorted);
        if sorted.is_empty() {
            return out;
        }
        let subs = effective_subscriptions(partitions_per_topic, &sorted);
        let kept = valid_owned(partitions_per_topic, &sorted, &subs);
        let lists = if subs.windows(2).all(|w| w[0] == w[1]) {
            assign_identical(all_partitions(partitions_per_topic, &subs[0]), kept)
        } else {
            assign_general(partitions_per_topic, &subs, kept)
        };
        for (member, list) in sorted.iter().zip(lists) {
            if let Some(slot) = out.get_mut(&member.member_id) {
                slot.extend(list.into_iter().map(|(t, p)| (t.to_string(), p)));
            }
        }
        sort_assignment(out)
    }
}

/// Each member's subscribed topics that have metadata and at least one partition.
fn effective_subscriptions<'a>(
    ppt: &'a BTreeMap<String, i32>,
    members: &[&MemberSubscription],
) -> Vec<BTreeSet<&'a str>> {
    members
        .iter()
        .map(|m| {
            m.topics
                .iter()
                .filter_map(|t| ppt.get_key_value(t.as_str()))
                .filter(|(_, &count)| count > 0)
                .map(|(topic, _)| topic.as_str())
                .collect()
        })
        .collect()
}

/// All partitions of `topics`, sorted by `(topic, partition)`.
fn all_partitions<'a>(ppt: &'a BTreeMap<String, i32>, topics: &BTreeSet<&'a str>) -> Vec<Tp<'a>> {
    topics
        .iter()
        .flat_map(|&t| (0..ppt.get(t).copied().unwrap_or(0)).map(move |p| (t, p)))
        .collect()
}

/// The claims that survive cleaning (see the module docs), per member, sorted.
fn valid_owned<'a>(
    ppt: &'a BTreeMap<String, i32>,
    members: &[&MemberSubscription],
    subs: &[BTreeSet<&'a str>],
) -> Vec<Vec<Tp<'a>>> {
    let mut claimed: BTreeSet<Tp<'a>> = BTreeSet::new();
    members
        .iter()
        .zip(subs)
        .map(|(member, sub)| {
            let mut mine = Vec::new();
            for (topic, p) in &member.owned {
                let Some((topic, &count)) = ppt.get_key_value(topic.as_str()) else {
                    continue;
                };
                let tp = (topic.as_str(), *p);
                if sub.contains(tp.0) && (0..count).contains(p) && claimed.insert(tp) {
                    mine.push(tp);
                }
            }
            mine.sort_unstable();
            mine
        })
        .collect()
}

/// Quota-based assignment for members that all share one subscription.
fn assign_identical<'a>(all: Vec<Tp<'a>>, mut lists: Vec<Vec<Tp<'a>>>) -> Vec<Vec<Tp<'a>>> {
    let floor = all.len() / lists.len();
    let mut extra_slots = all.len() % lists.len();
    for list in &mut lists {
        let quota = if list.len() > floor && extra_slots > 0 {
            extra_slots -= 1;
            floor + 1
        } else {
            floor
        };
        list.truncate(quota);
    }
    let assigned: BTreeSet<Tp<'a>> = lists.iter().flatten().copied().collect();
    let mut pool = all.into_iter().filter(|tp| !assigned.contains(tp));

    // Deal round robin until everybody has `floor`.
    let mut needy: Vec<usize> = (0..lists.len()).filter(|&i| lists[i].len() < floor).collect();
    while !needy.is_empty() {
        needy.retain(|&i| match pool.next() {
            Some(tp) => {
                lists[i].push(tp);
                lists[i].len() < floor
            }
            None => false,
        });
    }
    // The remaining partitions are exactly the unused `floor + 1` slots.
    for list in lists.iter_mut().filter(|l| l.len() == floor) {
        if extra_slots == 0 {
            break;
        }
        if let Some(tp) = pool.next() {
            list.push(tp);
            extra_slots -= 1;
        }
    }
    lists
}

/// Keep-then-rebalance assignment for differing subscriptions.
fn assign_general<'a>(
    ppt: &'a BTreeMap<String, i32>,
    subs: &[BTreeSet<&'a str>],
    kept: Vec<Vec<Tp<'a>>>,
) -> Vec<Vec<Tp<'a>>> {
    let previously: Vec<BTreeSet<Tp<'a>>> = kept.iter().map(|l| l.iter().copied().collect()).collect();
    let taken: BTreeSet<Tp<'a>> = kept.iter().flatten().copied().collect();
    let mut lists = kept;

    let topics: BTreeSet<&'a str> = subs.iter().flatten().copied().collect();
    let subscriber_count = |t: &str| subs.iter().filter(|s| s.contains(t)).count();
    let mut unowned: Vec<Tp<'a>> = all_partitions(ppt, &topics)
        .into_iter()
        .filter(|tp| !taken.contains(tp))
        .collect();
    // Least flexible partitions first, so the greedy pass balances well.
    unowned.sort_by_cached_key(|tp| (subscriber_count(tp.0), *tp));
    for tp in unowned {
        if let Some(to) = least_loaded(subs, &lists, tp.0) {
            lists[to].push(tp);
        }
    }

    while let Some((from, idx, to)) = find_move(subs, &lists, &previously) {
        let tp = lists[from].swap_remove(idx);
        lists[to].push(tp);
    }
    lists
}

/// The subscriber of `topic` with the fewest partitions (lowest index on ties).
fn least_loaded(subs: &[BTreeSet<&str>], lists: &[Vec<Tp<'_>>], topic: &str) -> Option<usize> {
    (0..lists.len())
        .filter(|&i| subs[i].contains(topic))
        .min_by_key(|&i| (lists[i].len(), i))
}

/// A move `(from member, index in its list, to member)` to an eligible
/// member with at least two fewer partitions, fullest owners first and
/// partitions the owner did not previously own preferred.
fn find_move(
    subs: &[BTreeSet<&str>],
    lists: &[Vec<Tp<'_>>],
    previously: &[BTreeSet<Tp<'_>>],
) -> Option<(usize, usize, usize)> {
    let mut order: Vec<usize> = (0..lists.len()).collect();
    order.sort_by_key(|&i| (Reverse(lists[i].len()), i));
    for from in order {
        let have = lists[from].len();
        if have < 2 {
            break;
        }
        let mut targets: BTreeMap<&str, Option<usize>> = BTreeMap::new();
        let mut fallback = None;
        for (idx, tp) in lists[from].iter().enumerate() {
            let target = *targets.entry(tp.0).or_insert_with(|| least_loaded(subs, lists, tp.0));
            let Some(to) = target.filter(|&to| lists[to].len() + 2 <= have) else {
                continue;
            };
            if !previously[from].contains(tp) {
                return Some((from, idx, to));
            }
            fallback.get_or_insert((from, idx, to));
        }
        if fallback.is_some() {
            return fallback;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::assignor::test_support::*;
    use super::*;
    use proptest::prelude::*;

    /// Re-runs `members` with `owned` taken from `previous`.
    fn with_previous(members: &[MemberSubscription], previous: &GroupAssignment) -> Vec<MemberSubscription> {
        let mut next = members.to_vec();
        for m in &mut next {
            m.owned = previous.get(&m.member_id).cloned().unwrap_or_default();
        }
        next
    }

    #[test]
    fn seed_document_example() {
        let ppt = topics(&[("t0", 3), ("t1", 3)]);
        let first = StickyAssignor.assign(&ppt, &seed_members(&["C0", "C1", "C2"]));
        assert_eq!(first["C0"], [tp("t0", 0), tp("t1", 0)]);
        assert_eq!(first["C1"], [tp("t0", 1), tp("t1", 1)]);
        assert_eq!(first["C2"], [tp("t0", 2), tp("t1", 2)]);

        // C1 leaves: C0 and C2 keep theirs, C1's two partitions are shared.
        let second = StickyAssignor.assign(&ppt, &with_previous(&seed_members(&["C0", "C2"]), &first));
        assert_eq!(second["C0"], [tp("t0", 0), tp("t0", 1), tp("t1", 0)]);
        assert_eq!(second["C2"], [tp("t0", 2), tp("t1", 1), tp("t1", 2)]);
        for member in ["C0", "C2"] {
            assert!(first[member].iter().all(|p| second[member].contains(p)));
        }
    }

    #[test]
    fn differing_subscriptions_are_balanced() {
        // The round-robin javadoc case, which round robin leaves unbalanced.
        let ppt = topics(&[("t0", 1), ("t1", 2), ("t2", 3)]);
        let members = vec![
            MemberSubscription::new("C0", ["t0"]),
            MemberSubscription::new("C1", ["t0", "t1"]),
            MemberSubscription::new("C2", ["t0", "t1", "t2"]),
        ];
        let result = StickyAssignor.assign(&ppt, &members);
        assert_eq!(result["C0"], [tp("t0", 0)]);
        assert_eq!(result["C1"], [tp("t1", 0), tp("t1", 1)]);
        assert_eq!(result["C2"], [tp("t2", 0), tp("t2", 1), tp("t2", 2)]);
        assert_eq!(StickyAssignor.name(), "sticky");
    }

    #[test]
    fn invalid_and_conflicting_claims_are_cleaned() {
        let ppt = topics(&[("t", 2)]);
        let members = vec![
            MemberSubscription::new("a", ["t"]).with_owned(vec![tp("t", 0), tp("t", 5), tp("gone", 0)]),
            MemberSubscription::new("b", ["t"]).with_owned(vec![tp("t", 0), tp("t", -1)]),
        ];
        let result = StickyAssignor.assign(&ppt, &members);
        assert_eq!(result["a"], [tp("t", 0)]);
        assert_eq!(result["b"], [tp("t", 1)]);
    }

    #[test]
    fn overloaded_owner_gives_up_only_the_excess() {
        let ppt = topics(&[("t", 6)]);
        let all: Vec<_> = (0..6).map(|p| tp("t", p)).collect();
        let members = vec![
            MemberSubscription::new("a", ["t"]).with_owned(all),
            MemberSubscription::new("b", ["t"]),
            MemberSubscription::new("c", ["t"]),
        ];
        let result = StickyAssignor.assign(&ppt, &members);
        assert_eq!(result["a"], [tp("t", 0), tp("t", 1)]);
        assert_eq!(result["b"].len() + result["c"].len(), 4);
        check_spread_at_most_one(&result);
    }

    /// Claims made unique across the whole group, so "previous owner" is
    /// well defined, then cleaned like the assignor does.
    fn unique_valid_claims(ppt: &BTreeMap<String, i32>, members: &mut [MemberSubscription]) -> Vec<Vec<(String, i32)>> {
        let mut seen = BTreeSet::new();
        for m in members.iter_mut() {
            m.owned.retain(|tp| seen.insert(tp.clone()));
        }
        members
            .iter()
            .map(|m| {
                let count = |t: &String| ppt.get(t).copied().unwrap_or(0);
                m.owned
                    .iter()
                    .filter(|(t, p)| m.is_subscribed(t) && (0..count(t)).contains(p))
                    .cloned()
                    .collect()
            })
            .collect()
    }

    /// Minimum number of valid claims any balanced result must break.
    ///
    /// With identical subscriptions a balanced result gives each member
    /// `floor` or `floor + 1` partitions, exactly `r = n % m` of them
    /// `floor + 1`. A member keeping `owned_i` claims under quota `q_i` breaks
    /// at least `max(0, owned_i - q_i)`; spending the `r` larger quotas on
    /// members with `owned_i > floor` saves one each, so the minimum is
    /// `sum max(0, owned_i - floor) - min(r, #{i : owned_i > floor})`.
    fn movement_lower_bound(n: usize, owned: &[usize]) -> usize {
        let (floor, r) = (n / owned.len(), n % owned.len());
        let excess: usize = owned.iter().map(|&o| o.saturating_sub(floor)).sum();
        excess - r.min(owned.iter().filter(|&&o| o > floor).count())
    }

    proptest! {
        #[test]
        fn prop_sticky_is_valid_balanced_and_stable((ppt, members) in arb_group()) {
            let result = StickyAssignor.assign(&ppt, &members);
            check_valid(&ppt, &members, &result);
            check_no_improving_move(&members, &result);
            let again = StickyAssignor.assign(&ppt, &with_previous(&members, &result));
            prop_assert_eq!(again, result);
        }

        #[test]
        fn prop_sticky_moves_the_minimum_with_identical_subscriptions(
            (ppt, mut members) in arb_group(),
            shared in prop::collection::btree_set(0usize..5, 0..4),
        ) {
            prop_assume!(!members.is_empty());
            for m in &mut members {
                m.topics = shared.iter().map(|t| format!("t{t}")).collect();
            }
            let valid = unique_valid_claims(&ppt, &mut members);
            let result = StickyAssignor.assign(&ppt, &members);
            check_valid(&ppt, &members, &result);
            check_spread_at_most_one(&result);

            let n = subscribed_partitions(&ppt, &members).len();
            let owned_counts: Vec<usize> = valid.iter().map(Vec::len).collect();
            let moved: usize = members
                .iter()
                .zip(&valid)
                .map(|(m, claims)| claims.iter().filter(|c| !result[&m.member_id].contains(c)).count())
                .sum();
            prop_assert_eq!(moved, movement_lower_bound(n, &owned_counts));

            let again = StickyAssignor.assign(&ppt, &with_previous(&members, &result));
            prop_assert_eq!(again, result);
        }
    }
}
