//! Faults as descriptions, without I/O: what each fault does to which node
//! when it starts, and what undoes it when it heals. The runner's executor
//! carries the actions out (signals, nftables rules); the plans are tested
//! here on their own.
//!
//! The seeds' scenarios (`docs/reliability.md`) are a leader or a follower
//! cut off from the other brokers and/or from ZooKeeper, with acks=1 and
//! acks=all; the process faults (kill -9, a pause past the ZooKeeper
//! session) are Kafka's other classic ways to lose a leader.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A process of the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Node {
    /// ZooKeeper server `i` (0-based).
    Zk(usize),
    /// Broker `i` (0-based; its broker id is `i + 1`).
    Broker(usize),
}

/// Who holds which role when a fault starts, as the runner found out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roles {
    pub zk_servers: usize,
    pub brokers: usize,
    /// The leader of the partition the fault aims at.
    pub leader: usize,
    /// The controller.
    pub controller: usize,
}

impl Roles {
    /// The brokers other than `b`, in order.
    fn other_brokers(&self, b: usize) -> Vec<Node> {
        (0..self.brokers).filter(|&o| o != b).map(Node::Broker).collect()
    }

    fn zk(&self) -> Vec<Node> {
        (0..self.zk_servers).map(Node::Zk).collect()
    }

    /// A follower of the aimed-at partition (every broker holds a replica:
    /// the runner's topic has RF = the broker count).
    fn follower(&self) -> usize {
        (self.leader + 1) % self.brokers
    }
}

/// One thing the executor does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    /// SIGKILL.
    Kill(Node),
    /// Start again a node that was killed.
    Restart(Node),
    /// SIGSTOP.
    Pause(Node),
    /// SIGCONT.
    Resume(Node),
    /// Drop every packet between the two nodes, both ways.
    Cut(Node, Node),
    /// Remove every cut.
    HealNetwork,
}

/// What a fault does when it starts and what undoes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub start: Vec<Action>,
    pub heal: Vec<Action>,
}

/// The faults the suite injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Fault {
    /// No fault: the baseline.
    None,
    KillLeader,
    KillFollower,
    KillController,
    /// SIGSTOP the leader past the ZooKeeper session timeout, then SIGCONT
    /// (the zombie leader).
    PauseLeader,
    /// The leader cut off from the other brokers (it still reaches
    /// ZooKeeper and clients).
    IsolateLeaderFromFollowers,
    /// The leader cut off from ZooKeeper (it still reaches the brokers and
    /// clients).
    IsolateLeaderFromZooKeeper,
    /// The leader cut off from every other node; clients still reach it.
    IsolateLeader,
    /// A follower cut off from every other node.
    IsolateFollower,
    /// One ZooKeeper server killed (the ensemble keeps its quorum).
    KillZkMember,
}

impl Fault {
    pub const ALL: [Fault; 10] = [
        Fault::None,
        Fault::KillLeader,
        Fault::KillFollower,
        Fault::KillController,
        Fault::PauseLeader,
        Fault::IsolateLeaderFromFollowers,
        Fault::IsolateLeaderFromZooKeeper,
        Fault::IsolateLeader,
        Fault::IsolateFollower,
        Fault::KillZkMember,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::KillLeader => "kill-leader",
            Fault::KillFollower => "kill-follower",
            Fault::KillController => "kill-controller",
            Fault::PauseLeader => "pause-leader",
            Fault::IsolateLeaderFromFollowers => "isolate-leader-from-followers",
            Fault::IsolateLeaderFromZooKeeper => "isolate-leader-from-zookeeper",
            Fault::IsolateLeader => "isolate-leader",
            Fault::IsolateFollower => "isolate-follower",
            Fault::KillZkMember => "kill-zk-member",
        }
    }

    /// The actions that start and heal this fault, given who holds which
    /// role.
    pub fn plan(self, roles: &Roles) -> Plan {
        let leader = Node::Broker(roles.leader);
        let cut_from = |node: Node, others: Vec<Node>| -> Vec<Action> {
            others.into_iter().map(|o| Action::Cut(node, o)).collect()
        };
        let network = |start: Vec<Action>| Plan {
            start,
            heal: vec![Action::HealNetwork],
        };
        let kill = |node: Node| Plan {
            start: vec![Action::Kill(node)],
            heal: vec![Action::Restart(node)],
        };
        match self {
            Fault::None => Plan {
                start: Vec::new(),
                heal: Vec::new(),
            },
            Fault::KillLeader => kill(leader),
            Fault::KillFollower => kill(Node::Broker(roles.follower())),
            Fault::KillController => kill(Node::Broker(roles.controller)),
            Fault::KillZkMember => kill(Node::Zk(0)),
            Fault::PauseLeader => Plan {
                start: vec![Action::Pause(leader)],
                heal: vec![Action::Resume(leader)],
            },
            Fault::IsolateLeaderFromFollowers => network(cut_from(leader, roles.other_brokers(roles.leader))),
            Fault::IsolateLeaderFromZooKeeper => network(cut_from(leader, roles.zk())),
            Fault::IsolateLeader => {
                let mut others = roles.other_brokers(roles.leader);
                others.extend(roles.zk());
                network(cut_from(leader, others))
            }
            Fault::IsolateFollower => {
                let f = roles.follower();
                let mut others = roles.other_brokers(f);
                others.extend(roles.zk());
                network(cut_from(Node::Broker(f), others))
            }
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Fault, String> {
        Fault::ALL.into_iter().find(|f| f.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
            format!("unknown fault '{s}' (one of: {})", names.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles() -> Roles {
        Roles {
            zk_servers: 3,
            brokers: 3,
            leader: 1,
            controller: 2,
        }
    }

    #[test]
    fn names_parse_back() {
        for f in Fault::ALL {
            assert_eq!(f.name().parse::<Fault>(), Ok(f));
        }
        assert!("nope".parse::<Fault>().unwrap_err().contains("kill-leader"));
    }

    #[test]
    fn isolating_the_leader_cuts_it_from_every_other_node_and_heals_all() {
        let p = Fault::IsolateLeader.plan(&roles());
        let b = Node::Broker(1);
        assert_eq!(
            p.start,
            vec![
                Action::Cut(b, Node::Broker(0)),
                Action::Cut(b, Node::Broker(2)),
                Action::Cut(b, Node::Zk(0)),
                Action::Cut(b, Node::Zk(1)),
                Action::Cut(b, Node::Zk(2)),
            ]
        );
        assert_eq!(p.heal, vec![Action::HealNetwork]);
    }

    #[test]
    fn leader_and_follower_faults_aim_at_different_brokers() {
        let r = roles();
        assert_eq!(Fault::KillLeader.plan(&r).start, vec![Action::Kill(Node::Broker(1))]);
        assert_eq!(Fault::KillFollower.plan(&r).start, vec![Action::Kill(Node::Broker(2))]);
        assert_eq!(
            Fault::KillController.plan(&r).heal,
            vec![Action::Restart(Node::Broker(2))]
        );
        let zk_only = Fault::IsolateLeaderFromZooKeeper.plan(&r);
        assert!(zk_only
            .start
            .iter()
            .all(|a| matches!(a, Action::Cut(Node::Broker(1), Node::Zk(_)))));
        assert!(Fault::None.plan(&r).start.is_empty());
    }
}
