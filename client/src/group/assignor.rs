//! The partition-assignor abstraction shared by the range, round-robin and
//! sticky assignors.
//!
//! An assignor turns "these topics have this many partitions" and "these
//! members subscribe to these topics (and owned these partitions last
//! generation)" into a member → partitions map. It is a pure function, so a
//! broker can run it server-side, check a leader's result, or test it.
//!
//! Conventions every assignor here follows:
//! * every input member appears in the result, possibly with no partitions;
//! * only topics present in `partitions_per_topic` with a positive count are
//!   assigned, and only to members subscribed to them;
//! * output is deterministic: members are ordered as Kafka's
//!   `AbstractPartitionAssignor.MemberInfo` orders them (members with a
//!   `group.instance.id` first, by instance id; then the rest by member id),
//!   and each member's list is sorted by `(topic, partition)`.
//!
//! Strings compare by bytes here, Java compares UTF-16 units; the two orders
//! agree for every legal Kafka topic name (`[a-zA-Z0-9._-]`) and any ASCII id.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use ferrite_protocol::consumer_protocol::{Subscription, TopicPartitions};

/// Member id → assigned `(topic, partition)` pairs, sorted.
pub type GroupAssignment = BTreeMap<String, Vec<(String, i32)>>;

/// One member's input to an assignor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberSubscription {
    pub member_id: String,
    /// `group.instance.id` for static members.
    pub instance_id: Option<String>,
    pub topics: Vec<String>,
    /// Partitions owned in the previous generation (used by sticky).
    pub owned: Vec<(String, i32)>,
}

impl MemberSubscription {
    /// A dynamic member subscribed to `topics`, owning nothing.
    pub fn new<S: Into<String>>(member_id: impl Into<String>, topics: impl IntoIterator<Item = S>) -> Self {
        MemberSubscription {
            member_id: member_id.into(),
            instance_id: None,
            topics: topics.into_iter().map(Into::into).collect(),
            owned: Vec::new(),
        }
    }

    /// Sets the static `group.instance.id`.
    pub fn with_instance_id(mut self, instance_id: impl Into<String>) -> Self {
        self.instance_id = Some(instance_id.into());
        self
    }

    /// Sets the partitions owned in the previous generation.
    pub fn with_owned(mut self, owned: Vec<(String, i32)>) -> Self {
        self.owned = owned;
        self
    }

    /// Builds the assignor input from a decoded consumer-protocol subscription.
    pub fn from_subscription(member_id: impl Into<String>, instance_id: Option<String>, sub: &Subscription) -> Self {
        MemberSubscription {
            member_id: member_id.into(),
            instance_id,
            topics: sub.topics.clone(),
            owned: from_topic_partitions(&sub.owned_partitions),
        }
    }

    /// Whether `topic` is among this member's subscribed topics.
    pub fn is_subscribed(&self, topic: &str) -> bool {
        self.topics.iter().any(|t| t == topic)
    }
}

/// A partition assignment strategy.
pub trait Assignor {
    /// The protocol name advertised in JoinGroup (e.g. `"range"`).
    fn name(&self) -> &'static str;

    /// Assigns the partitions of `partitions_per_topic` (topic → partition
    /// count) to `members`. Member ids are expected to be unique; if one is
    /// repeated, only its first occurrence is considered.
    fn assign(&self, partitions_per_topic: &BTreeMap<String, i32>, members: &[MemberSubscription]) -> GroupAssignment;
}

/// Groups flat `(topic, partition)` pairs by topic for the consumer protocol,
/// keeping the order in which topics first appear and the partition order.
pub fn to_topic_partitions(pairs: &[(String, i32)]) -> Vec<TopicPartitions> {
    let mut out: Vec<TopicPartitions> = Vec::new();
    for (topic, partition) in pairs {
        match out.iter_mut().find(|tp| &tp.topic == topic) {
            Some(tp) => tp.partitions.push(*partition),
            None => out.push(TopicPartitions {
                topic: topic.clone(),
                partitions: vec![*partition],
            }),
        }
    }
    out
}

/// The inverse of [`to_topic_partitions`]: flat `(topic, partition)` pairs.
pub fn from_topic_partitions(list: &[TopicPartitions]) -> Vec<(String, i32)> {
    list.iter()
        .flat_map(|tp| tp.partitions.iter().map(|p| (tp.topic.clone(), *p)))
        .collect()
}

/// Kafka's member order: static members (by instance id) before dynamic
/// ones (by member id). Ties fall back to the member id so the order is total.
pub fn compare_members(a: &MemberSubscription, b: &MemberSubscription) -> Ordering {
    match (&a.instance_id, &b.instance_id) {
        (Some(x), Some(y)) => x.cmp(y).then_with(|| a.member_id.cmp(&b.member_id)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    }
}

/// The members in Kafka's order, dropping repeated member ids (first wins).
pub fn sorted_members(members: &[MemberSubscription]) -> Vec<&MemberSubscription> {
    let mut seen = BTreeSet::new();
    let mut out: Vec<&MemberSubscription> = members.iter().filter(|m| seen.insert(m.member_id.as_str())).collect();
    out.sort_by(|a, b| compare_members(a, b));
    out
}

/// A result with every member present and no partitions.
pub fn empty_assignment(members: &[&MemberSubscription]) -> GroupAssignment {
    members.iter().map(|m| (m.member_id.clone(), Vec::new())).collect()
}

/// Sorts every member's partition list, giving the canonical output form.
pub fn sort_assignment(mut assignment: GroupAssignment) -> GroupAssignment {
    for list in assignment.values_mut() {
        list.sort();
    }
    assignment
}

/// Shared checks and fixtures for the assignor tests.
#[cfg(test)]
pub(super) mod test_support {
    use super::*;
    use proptest::prelude::*;

    pub fn tp(topic: &str, partition: i32) -> (String, i32) {
        (topic.to_string(), partition)
    }

    pub fn topics(counts: &[(&str, i32)]) -> BTreeMap<String, i32> {
        counts.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    /// The seed document's members: each subscribed to t0 and t1.
    pub fn seed_members(ids: &[&str]) -> Vec<MemberSubscription> {
        ids.iter()
            .map(|id| MemberSubscription::new(*id, ["t0", "t1"]))
            .collect()
    }

    /// Partitions that some member is subscribed to, sorted.
    pub fn subscribed_partitions(ppt: &BTreeMap<String, i32>, members: &[MemberSubscription]) -> Vec<(String, i32)> {
        let mut out = Vec::new();
        for (topic, &count) in ppt {
            if members.iter().any(|m| m.is_subscribed(topic)) {
                out.extend((0..count.max(0)).map(|p| (topic.clone(), p)));
            }
        }
        out
    }

    /// Every member present, every subscribed partition exactly once, each
    /// to a subscribed member, lists sorted.
    pub fn check_valid(ppt: &BTreeMap<String, i32>, members: &[MemberSubscription], result: &GroupAssignment) {
        let ids: BTreeSet<&str> = members.iter().map(|m| m.member_id.as_str()).collect();
        let got: BTreeSet<&str> = result.keys().map(String::as_str).collect();
        assert_eq!(ids, got, "result must list exactly the members");
        let mut all: Vec<(String, i32)> = Vec::new();
        for (member_id, list) in result {
            let member = members.iter().find(|m| &m.member_id == member_id).unwrap();
            for (topic, _) in list {
                assert!(member.is_subscribed(topic), "{member_id} got unsubscribed {topic}");
            }
            assert!(list.windows(2).all(|w| w[0] < w[1]), "list of {member_id} not sorted");
            all.extend(list.iter().cloned());
        }
        all.sort();
        assert_eq!(all, subscribed_partitions(ppt, members), "each partition exactly once");
    }

    /// No partition could move to a subscribed member with ≥2 fewer partitions.
    pub fn check_no_improving_move(members: &[MemberSubscription], result: &GroupAssignment) {
        for (owner, list) in result {
            for (topic, p) in list {
                for m in members.iter().filter(|m| m.is_subscribed(topic)) {
                    let (have, other) = (list.len(), result[&m.member_id].len());
                    assert!(
                        other + 1 >= have,
                        "{topic}-{p} could move from {owner} ({have}) to {} ({other})",
                        m.member_id
                    );
                }
            }
        }
    }

    /// Counts differ by at most one across all members.
    pub fn check_spread_at_most_one(result: &GroupAssignment) {
        let counts: Vec<usize> = result.values().map(Vec::len).collect();
        if let (Some(lo), Some(hi)) = (counts.iter().min(), counts.iter().max()) {
            assert!(hi - lo <= 1, "counts {counts:?}");
        }
    }

    /// A random group: up to 4 topics (some absent from metadata or with zero
    /// partitions), up to 6 members with random subscriptions, optional
    /// instance ids and random (possibly invalid or conflicting) owned lists.
    pub fn arb_group() -> impl Strategy<Value = (BTreeMap<String, i32>, Vec<MemberSubscription>)> {
        let ppt = prop::collection::vec(prop::option::of(0i32..7), 4).prop_map(|counts| {
            counts
                .into_iter()
                .enumerate()
                .filter_map(|(i, c)| c.map(|c| (format!("t{i}"), c)))
                .collect::<BTreeMap<_, _>>()
        });
        let member = (
            prop::collection::btree_set(0usize..5, 0..4),
            any::<bool>(),
            prop::collection::vec((0usize..5, -1i32..8), 0..8),
        );
        (ppt, prop::collection::vec(member, 0..7)).prop_map(|(ppt, raw)| {
            let members = raw
                .into_iter()
                .enumerate()
                .map(|(i, (subs, is_static, owned))| member_from_raw(i, subs, is_static, owned))
                .collect();
            (ppt, members)
        })
    }

    fn member_from_raw(
        i: usize,
        subs: BTreeSet<usize>,
        is_static: bool,
        owned: Vec<(usize, i32)>,
    ) -> MemberSubscription {
        MemberSubscription {
            member_id: format!("m{i}"),
            // Reverse order to member ids, to exercise the static-first order.
            instance_id: is_static.then(|| format!("g{}", 9 - i)),
            topics: subs.into_iter().map(|t| format!("t{t}")).collect(),
            owned: owned.into_iter().map(|(t, p)| (format!("t{t}"), p)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_members_sort_first_by_instance_id() {
        let members = vec![
            MemberSubscription::new("a", ["t"]),
            MemberSubscription::new("z", ["t"]).with_instance_id("i1"),
            MemberSubscription::new("b", ["t"]).with_instance_id("i2"),
            MemberSubscription::new("0", ["t"]),
        ];
        let order: Vec<&str> = sorted_members(&members).iter().map(|m| m.member_id.as_str()).collect();
        assert_eq!(order, ["z", "b", "0", "a"]);
    }

    #[test]
    fn repeated_member_ids_keep_the_first() {
        let members = vec![MemberSubscription::new("a", ["x"]), MemberSubscription::new("a", ["y"])];
        let sorted = sorted_members(&members);
        assert_eq!(sorted.len(), 1);
        assert_eq!(sorted[0].topics, ["x"]);
    }

    #[test]
    fn topic_partition_conversions_are_inverse() {
        let pairs = vec![("b".to_string(), 1), ("a".to_string(), 0), ("b".to_string(), 0)];
        let grouped = to_topic_partitions(&pairs);
        let tps = |t: &str, p: &[i32]| TopicPartitions {
            topic: t.into(),
            partitions: p.to_vec(),
        };
        assert_eq!(grouped, vec![tps("b", &[1, 0]), tps("a", &[0])]);
        let (mut flat, mut expected) = (from_topic_partitions(&grouped), pairs);
        flat.sort();
        expected.sort();
        assert_eq!(flat, expected);
    }

    #[test]
    fn from_subscription_flattens_owned() {
        let sub = Subscription {
            topics: vec!["t".into()],
            owned_partitions: vec![TopicPartitions {
                topic: "t".into(),
                partitions: vec![1, 0],
            }],
            ..Subscription::default()
        };
        let m = MemberSubscription::from_subscription("m", Some("s".into()), &sub);
        assert_eq!(m.owned, [("t".to_string(), 1), ("t".to_string(), 0)]);
        assert_eq!(m.instance_id.as_deref(), Some("s"));
        assert!(m.is_subscribed("t") && !m.is_subscribed("u"));
    }
}
