//! Leader election: which replica leads a partition after a change, and the
//! ISR that goes with it. Pure functions over the assignment, the ISR and the
//! set of *eligible* brokers (alive and not shutting down), one per reason for
//! an election, as the seed documents describe:
//!
//! - [`offline`]: the leader is gone. The first replica of the assignment that
//!   is eligible and in the ISR leads (a *clean* election); the ISR keeps its
//!   eligible members. If no ISR member is eligible, the partition stays
//!   offline — unless unclean election is enabled, in which case the first
//!   eligible replica leads alone, and the records it never received are lost.
//! - [`preferred`]: leadership goes back to the first replica of the
//!   assignment, if it is eligible and in the ISR.
//! - [`controlled_shutdown`]: leadership moves off a broker that is shutting
//!   down, to the first eligible ISR member; the ISR loses the brokers that
//!   are shutting down.
//! - [`reassigned`]: leadership moves into the target replica set of a
//!   reassignment.

use std::collections::BTreeSet;

use crate::metadata::BrokerId;

/// Whether a replica outside the ISR may be elected when no ISR member is
/// left (`unclean.leader.election.enable`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UncleanElection {
    Disabled,
    Enabled,
}

/// An election's outcome: the new leader (`None`: offline) and ISR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub leader: Option<BrokerId>,
    pub isr: Vec<BrokerId>,
    pub kind: OutcomeKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutcomeKind {
    /// The leader came from the ISR.
    Clean,
    /// The leader came from outside the ISR: acknowledged records may be lost.
    Unclean,
    /// Nobody may lead.
    Offline,
}

fn eligible_isr(isr: &[BrokerId], eligible: &BTreeSet<BrokerId>) -> Vec<BrokerId> {
    isr.iter().copied().filter(|b| eligible.contains(b)).collect()
}

/// The leader of a partition whose leader is gone (or that has none).
pub fn offline(
    replicas: &[BrokerId],
    isr: &[BrokerId],
    eligible: &BTreeSet<BrokerId>,
    unclean: UncleanElection,
) -> Outcome {
    let live_isr = eligible_isr(isr, eligible);
    if let Some(&leader) = replicas.iter().find(|b| live_isr.contains(b)) {
        return Outcome {
            leader: Some(leader),
            isr: live_isr,
            kind: OutcomeKind::Clean,
        };
    }
    if unclean == UncleanElection::Enabled {
        if let Some(&leader) = replicas.iter().find(|b| eligible.contains(b)) {
            return Outcome {
                leader: Some(leader),
                isr: vec![leader],
                kind: OutcomeKind::Unclean,
            };
        }
    }
    // Nobody may lead. The ISR is kept as it was: its members are the only
    // replicas known to hold every committed record, and the first of them to
    // come back will be elected.
    Outcome {
        leader: None,
        isr: isr.to_vec(),
        kind: OutcomeKind::Offline,
    }
}

/// The preferred replica, when it may lead now and does not already.
pub fn preferred(
    replicas: &[BrokerId],
    isr: &[BrokerId],
    leader: Option<BrokerId>,
    eligible: &BTreeSet<BrokerId>,
) -> Option<BrokerId> {
    let &first = replicas.first()?;
    let electable = eligible.contains(&first) && isr.contains(&first);
    (electable && leader != Some(first)).then_some(first)
}

/// The new leader and ISR of a partition led by a broker that is shutting
/// down (`shutting_down` holds every broker that is). `None` when no other
/// ISR member may lead: the partition then stays where it is.
pub fn controlled_shutdown(
    replicas: &[BrokerId],
    isr: &[BrokerId],
    eligible: &BTreeSet<BrokerId>,
    shutting_down: &BTreeSet<BrokerId>,
) -> Option<(BrokerId, Vec<BrokerId>)> {
    let staying: Vec<BrokerId> = isr.iter().copied().filter(|b| !shutting_down.contains(b)).collect();
    let &leader = replicas
        .iter()
        .find(|b| staying.contains(b) && eligible.contains(b) && !shutting_down.contains(b))?;
    Some((leader, staying))
}

/// The leader of a partition whose replicas move to `target`: the current
/// leader if it is in the target set and eligible, else the first target
/// replica that is eligible and in the ISR.
pub fn reassigned(
    target: &[BrokerId],
    isr: &[BrokerId],
    leader: Option<BrokerId>,
    eligible: &BTreeSet<BrokerId>,
) -> Option<BrokerId> {
    if let Some(l) = leader.filter(|l| target.contains(l) && eligible.contains(l)) {
        return Some(l);
    }
    target.iter().copied().find(|b| isr.contains(b) && eligible.contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn b(ids: &[i32]) -> Vec<BrokerId> {
        ids.iter().map(|&i| BrokerId(i)).collect()
    }

    fn set(ids: &[i32]) -> BTreeSet<BrokerId> {
        ids.iter().map(|&i| BrokerId(i)).collect()
    }

    #[test]
    fn offline_picks_the_first_live_isr_member_in_assignment_order() {
        let o = offline(&b(&[1, 2, 3]), &b(&[3, 2]), &set(&[2, 3]), UncleanElection::Disabled);
        assert_eq!(o.leader, Some(BrokerId(2)));
        assert_eq!(o.isr, b(&[3, 2]));
        assert_eq!(o.kind, OutcomeKind::Clean);
    }

    #[test]
    fn offline_without_isr_waits_unless_unclean() {
        let replicas = b(&[1, 2, 3]);
        let o = offline(&replicas, &b(&[1]), &set(&[2, 3]), UncleanElection::Disabled);
        assert_eq!((o.leader, o.kind), (None, OutcomeKind::Offline));
        assert_eq!(o.isr, b(&[1]), "the last ISR member stays in the ISR");
        let o = offline(&replicas, &b(&[1]), &set(&[2, 3]), UncleanElection::Enabled);
        assert_eq!((o.leader, o.kind), (Some(BrokerId(2)), OutcomeKind::Unclean));
        assert_eq!(o.isr, b(&[2]));
        let o = offline(&replicas, &b(&[1]), &set(&[4]), UncleanElection::Enabled);
        assert_eq!(o.kind, OutcomeKind::Offline);
    }

    #[test]
    fn preferred_only_when_in_isr_and_not_leading() {
        let r = b(&[1, 2, 3]);
        assert_eq!(
            preferred(&r, &b(&[1, 2]), Some(BrokerId(2)), &set(&[1, 2])),
            Some(BrokerId(1))
        );
        assert_eq!(preferred(&r, &b(&[2]), Some(BrokerId(2)), &set(&[1, 2])), None);
        assert_eq!(preferred(&r, &b(&[1, 2]), Some(BrokerId(1)), &set(&[1, 2])), None);
        assert_eq!(preferred(&r, &b(&[1, 2]), Some(BrokerId(2)), &set(&[2])), None);
    }

    #[test]
    fn controlled_shutdown_moves_to_a_staying_isr_member() {
        let r = b(&[1, 2, 3]);
        let got = controlled_shutdown(&r, &b(&[1, 2, 3]), &set(&[2, 3]), &set(&[1]));
        assert_eq!(got, Some((BrokerId(2), b(&[2, 3]))));
        assert_eq!(controlled_shutdown(&r, &b(&[1]), &set(&[2, 3]), &set(&[1])), None);
        assert_eq!(controlled_shutdown(&b(&[1]), &b(&[1]), &set(&[]), &set(&[1])), None);
    }

    #[test]
    fn reassigned_keeps_a_leader_inside_the_target() {
        let isr = b(&[1, 2, 3, 4]);
        let live = set(&[1, 2, 3, 4]);
        assert_eq!(
            reassigned(&b(&[2, 3, 4]), &isr, Some(BrokerId(3)), &live),
            Some(BrokerId(3))
        );
        assert_eq!(
            reassigned(&b(&[2, 3, 4]), &isr, Some(BrokerId(1)), &live),
            Some(BrokerId(2))
        );
        assert_eq!(reassigned(&b(&[4]), &b(&[1]), Some(BrokerId(1)), &live), None);
    }

    proptest! {
        /// A clean election never picks a replica outside the ISR or a
        /// broker that is not eligible; only unclean ones leave the ISR.
        #[test]
        fn elected_leaders_are_eligible_and_clean_ones_in_isr(
            n in 1usize..6,
            isr_mask in 0u32..64,
            live_mask in 0u32..64,
            unclean in any::<bool>(),
        ) {
            let replicas: Vec<BrokerId> = (1..=n as i32).map(BrokerId).collect();
            let isr: Vec<BrokerId> = replicas.iter().copied().filter(|b| isr_mask & (1 << b.0) != 0).collect();
            let live: BTreeSet<BrokerId> = replicas.iter().copied().filter(|b| live_mask & (1 << b.0) != 0).collect();
            let policy = if unclean { UncleanElection::Enabled } else { UncleanElection::Disabled };
            let o = offline(&replicas, &isr, &live, policy);
            match o.kind {
                OutcomeKind::Clean => {
                    let l = o.leader.unwrap();
                    prop_assert!(isr.contains(&l) && live.contains(&l));
                    prop_assert!(o.isr.iter().all(|m| isr.contains(m) && live.contains(m)));
                }
                OutcomeKind::Unclean => {
                    prop_assert!(unclean);
                    prop_assert!(isr.iter().all(|m| !live.contains(m)));
                    prop_assert!(live.contains(&o.leader.unwrap()));
                }
                OutcomeKind::Offline => {
                    prop_assert!(o.leader.is_none());
                    prop_assert!(isr.iter().all(|m| !live.contains(m)));
                    prop_assert!(!unclean || live.is_empty());
                }
            }
        }
    }
}
