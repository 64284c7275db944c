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

use crate::cluster::Needs;

/// How long `lose-isr` lets the writes go on after the first follower dies:
/// past the brokers' `replica.lag.time.max.ms` (4 s), so that it has left
/// the ISR.
pub const ISR_DROP_WAIT_MS: u64 = 8_000;

/// `flap-leader`'s cycles, and how long the leader is cut off and then
/// joined in each: a cut past `replica.lag.time.max.ms` (4 s) but within
/// the ZooKeeper session (6 s), so that the ISR shrinks and grows again
/// while the leader keeps its session.
pub const FLAP_CYCLES: usize = 4;
pub const FLAP_CUT_MS: u64 = 5_000;
pub const FLAP_JOINED_MS: u64 = 2_000;

/// `skew-clocks`: how far the wall clocks step (an hour back, a day
/// ahead: within the default seven days of retention, `segment.ms` and
/// offsets retention, so that nothing is due to go by the clock alone),
/// and how long each step holds.
pub const SKEW_BACK_S: i64 = -3_600;
pub const SKEW_AHEAD_S: i64 = 86_400;
pub const SKEW_HOLD_MS: u64 = 8_000;

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

    /// The other follower.
    fn second_follower(&self) -> usize {
        (self.leader + 2) % self.brokers
    }

    /// Every node but broker `b`.
    fn everyone_but(&self, b: usize) -> Vec<Node> {
        let mut nodes = self.other_brokers(b);
        nodes.extend(self.zk());
        nodes
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
    /// Drop packets between the two nodes at random, both ways
    /// ([`crate::net::LOSS_PCT`] %).
    Lossy(Node, Node),
    /// Remove every cut and lossy link.
    HealNetwork,
    /// Wait this many milliseconds before the next action.
    Sleep(u64),
    /// Fill the broker's own disk.
    FillDisk(Node),
    /// Give the broker's own disk its room back.
    FreeDisk(Node),
    /// Bit rot: change the last byte of a closed segment's first batch in
    /// the node's replica of the aimed-at partition (the broker's scrubber
    /// is to find it and the cluster to heal it).
    Rot(Node),
    /// Step the broker's wall clock to this many seconds from true time
    /// (0: true time again).
    StepClock(Node, i64),
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
    /// The seeds' scenario of every ISR member failing: a follower is
    /// killed and drops out of the ISR, the writes go on, then the other
    /// follower and the leader are killed and the stale follower comes
    /// back alone. Without unclean election the partition waits for an ISR
    /// member; with it, the stale replica leads and acknowledged records
    /// are lost (the negative control).
    LoseIsr,
    /// Two ZooKeeper servers killed: the ensemble loses its quorum.
    LoseZkQuorum,
    /// Every ZooKeeper server killed, then all started again.
    RestartZooKeeper,
    /// The leader and one ZooKeeper server cut from the other nodes: the
    /// leader on the minority side.
    SplitLeaderMinority,
    /// Two sides — the leader with one ZooKeeper server, a follower with
    /// another — cut from each other, and the third broker and server
    /// reaching both (a bridge).
    Bridge,
    /// The leader cut from every other node and reconnected, over and over
    /// ([`FLAP_CYCLES`] cycles of [`FLAP_CUT_MS`] cut, [`FLAP_JOINED_MS`]
    /// joined).
    FlapLeader,
    /// Every link of the leader (to brokers and ZooKeeper) loses a fifth of
    /// its packets.
    LossyLeader,
    /// The leader's disk fills up: its log refuses writes (clients are
    /// answered KAFKA_STORAGE_ERROR) and it hands leadership over. Healed
    /// by freeing the disk and restarting the broker, as Kafka needs for a
    /// log directory that failed.
    FillLeaderDisk,
    /// The same on a follower: it falls out of the ISR.
    FillFollowerDisk,
    /// Bit rot in a closed segment of the leader's replica: it hands
    /// leadership over and fetches the range again.
    RotLeader,
    /// Bit rot in a closed segment of a follower's replica: it fetches the
    /// range again.
    RotFollower,
    /// The brokers' wall clocks step apart: the leader an hour back and a
    /// follower a day ahead, then the other way round ([`SKEW_HOLD_MS`]
    /// each), then all to true time at healing.
    SkewClocks,
}

impl Fault {
    pub const ALL: [Fault; 22] = [
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
        Fault::LoseIsr,
        Fault::LoseZkQuorum,
        Fault::RestartZooKeeper,
        Fault::SplitLeaderMinority,
        Fault::Bridge,
        Fault::FlapLeader,
        Fault::LossyLeader,
        Fault::FillLeaderDisk,
        Fault::FillFollowerDisk,
        Fault::RotLeader,
        Fault::RotFollower,
        Fault::SkewClocks,
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
            Fault::LoseIsr => "lose-isr",
            Fault::LoseZkQuorum => "lose-zk-quorum",
            Fault::RestartZooKeeper => "restart-zookeeper",
            Fault::SplitLeaderMinority => "split-leader-minority",
            Fault::Bridge => "bridge",
            Fault::FlapLeader => "flap-leader",
            Fault::LossyLeader => "lossy-leader",
            Fault::FillLeaderDisk => "fill-leader-disk",
            Fault::FillFollowerDisk => "fill-follower-disk",
            Fault::RotLeader => "rot-leader",
            Fault::RotFollower => "rot-follower",
            Fault::SkewClocks => "skew-clocks",
        }
    }

    /// What the run must give its brokers for this fault.
    pub fn needs(self) -> Needs {
        Needs {
            own_disks: matches!(self, Fault::FillLeaderDisk | Fault::FillFollowerDisk),
            fake_clocks: self == Fault::SkewClocks,
        }
    }

    /// The actions that start and heal this fault, given who holds which
    /// role.
    pub fn plan(self, roles: &Roles) -> Plan {
        let leader = Node::Broker(roles.leader);
        match self {
            Fault::None => Plan {
                start: Vec::new(),
                heal: Vec::new(),
            },
            Fault::KillLeader => kill_all(vec![leader]),
            Fault::KillFollower => kill_all(vec![Node::Broker(roles.follower())]),
            Fault::KillController => kill_all(vec![Node::Broker(roles.controller)]),
            Fault::KillZkMember => kill_all(vec![Node::Zk(0)]),
            Fault::LoseZkQuorum => kill_all(vec![Node::Zk(0), Node::Zk(1)]),
            Fault::RestartZooKeeper => kill_all(roles.zk()),
            Fault::PauseLeader => Plan {
                start: vec![Action::Pause(leader)],
                heal: vec![Action::Resume(leader)],
            },
            Fault::IsolateLeaderFromFollowers => network(cut_sides(&[leader], &roles.other_brokers(roles.leader))),
            Fault::IsolateLeaderFromZooKeeper => network(cut_sides(&[leader], &roles.zk())),
            Fault::IsolateLeader => network(cut_sides(&[leader], &roles.everyone_but(roles.leader))),
            Fault::IsolateFollower => {
                let f = roles.follower();
                network(cut_sides(&[Node::Broker(f)], &roles.everyone_but(f)))
            }
            Fault::SplitLeaderMinority => {
                let mut majority = roles.other_brokers(roles.leader);
                majority.extend((1..roles.zk_servers).map(Node::Zk));
                network(cut_sides(&[leader, Node::Zk(0)], &majority))
            }
            Fault::Bridge => {
                let far = Node::Broker(roles.second_follower());
                let last_zk = Node::Zk(roles.zk_servers - 1);
                network(cut_sides(&[leader, Node::Zk(0)], &[far, last_zk]))
            }
            Fault::FlapLeader => flap(leader, &roles.everyone_but(roles.leader)),
            Fault::LoseIsr => lose_isr(roles),
            Fault::LossyLeader => network(
                roles
                    .everyone_but(roles.leader)
                    .into_iter()
                    .map(|other| Action::Lossy(leader, other))
                    .collect(),
            ),
            Fault::FillLeaderDisk => fill_disk(leader),
            Fault::FillFollowerDisk => fill_disk(Node::Broker(roles.follower())),
            // Nothing to undo: healing is the cluster's own work.
            Fault::RotLeader => Plan {
                start: vec![Action::Rot(leader)],
                heal: Vec::new(),
            },
            Fault::RotFollower => Plan {
                start: vec![Action::Rot(Node::Broker(roles.follower()))],
                heal: Vec::new(),
            },
            Fault::SkewClocks => skew_clocks(roles),
        }
    }
}

/// Actions that `start` a network fault; healing removes every cut.
fn network(start: Vec<Action>) -> Plan {
    Plan {
        start,
        heal: vec![Action::HealNetwork],
    }
}

/// `node` cut from `others` and joined again, [`FLAP_CYCLES`] times.
fn flap(node: Node, others: &[Node]) -> Plan {
    let mut start = Vec::new();
    for _ in 0..FLAP_CYCLES {
        start.extend(cut_sides(&[node], others));
        start.extend([
            Action::Sleep(FLAP_CUT_MS),
            Action::HealNetwork,
            Action::Sleep(FLAP_JOINED_MS),
        ]);
    }
    network(start)
}

/// See [`Fault::LoseIsr`].
fn lose_isr(roles: &Roles) -> Plan {
    let leader = Node::Broker(roles.leader);
    let stale = Node::Broker(roles.follower());
    let other = Node::Broker(roles.second_follower());
    Plan {
        start: vec![
            Action::Kill(stale),
            Action::Sleep(ISR_DROP_WAIT_MS),
            Action::Kill(other),
            Action::Kill(leader),
            Action::Restart(stale),
        ],
        heal: vec![Action::Restart(other), Action::Restart(leader)],
    }
}

/// Fills `node`'s disk; healing frees it and restarts the broker.
fn fill_disk(node: Node) -> Plan {
    Plan {
        start: vec![Action::FillDisk(node)],
        heal: vec![Action::FreeDisk(node), Action::Kill(node), Action::Restart(node)],
    }
}

/// See [`Fault::SkewClocks`].
fn skew_clocks(roles: &Roles) -> Plan {
    let leader = Node::Broker(roles.leader);
    let follower = Node::Broker(roles.follower());
    Plan {
        start: vec![
            Action::StepClock(leader, SKEW_BACK_S),
            Action::StepClock(follower, SKEW_AHEAD_S),
            Action::Sleep(SKEW_HOLD_MS),
            Action::StepClock(leader, SKEW_AHEAD_S),
            Action::StepClock(follower, SKEW_BACK_S),
            Action::Sleep(SKEW_HOLD_MS),
        ],
        heal: (0..roles.brokers)
            .map(|b| Action::StepClock(Node::Broker(b), 0))
            .collect(),
    }
}

/// Kills `nodes` at the start and restarts them at healing.
fn kill_all(nodes: Vec<Node>) -> Plan {
    Plan {
        start: nodes.iter().map(|&n| Action::Kill(n)).collect(),
        heal: nodes.iter().map(|&n| Action::Restart(n)).collect(),
    }
}

/// Cuts every node of `a` from every node of `b`.
fn cut_sides(a: &[Node], b: &[Node]) -> Vec<Action> {
    a.iter()
        .flat_map(|&x| b.iter().map(move |&y| Action::Cut(x, y)))
        .collect()
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
    fn a_lossy_leader_loses_packets_to_every_other_node_and_rot_hits_one_replica() {
        let r = roles();
        let p = Fault::LossyLeader.plan(&r);
        let b = Node::Broker(1);
        let others = [Node::Broker(0), Node::Broker(2), Node::Zk(0), Node::Zk(1), Node::Zk(2)];
        assert_eq!(p.start, others.map(|o| Action::Lossy(b, o)).to_vec());
        assert_eq!(p.heal, vec![Action::HealNetwork]);
        assert_eq!(Fault::RotLeader.plan(&r).start, vec![Action::Rot(b)]);
        assert_eq!(Fault::RotFollower.plan(&r).start, vec![Action::Rot(Node::Broker(2))]);
        assert!(
            Fault::RotLeader.plan(&r).heal.is_empty(),
            "the cluster heals rot itself"
        );
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

    #[test]
    fn skewed_clocks_step_the_leader_and_a_follower_apart_and_all_back() {
        let r = roles();
        let p = Fault::SkewClocks.plan(&r);
        let (leader, follower) = (Node::Broker(1), Node::Broker(2));
        assert_eq!(p.start[0], Action::StepClock(leader, SKEW_BACK_S));
        assert_eq!(p.start[1], Action::StepClock(follower, SKEW_AHEAD_S));
        assert!(p.start.contains(&Action::StepClock(leader, SKEW_AHEAD_S)));
        assert_eq!(p.heal.len(), 3);
        assert!(p.heal.iter().all(|a| matches!(a, Action::StepClock(_, 0))));
        assert!(Fault::SkewClocks.needs().fake_clocks);
        assert!(!Fault::KillLeader.needs().fake_clocks);
    }

    #[test]
    fn a_bridge_cuts_only_its_two_ends_apart() {
        let p = Fault::Bridge.plan(&roles());
        let (leader, far) = (Node::Broker(1), Node::Broker(0));
        assert_eq!(
            p.start,
            vec![
                Action::Cut(leader, far),
                Action::Cut(leader, Node::Zk(2)),
                Action::Cut(Node::Zk(0), far),
                Action::Cut(Node::Zk(0), Node::Zk(2)),
            ]
        );
        let split = Fault::SplitLeaderMinority.plan(&roles());
        assert_eq!(split.start.len(), 2 * 4, "two nodes on one side, four on the other");
    }

    #[test]
    fn losing_the_isr_brings_back_only_the_stale_follower() {
        let p = Fault::LoseIsr.plan(&roles());
        let (stale, other, leader) = (Node::Broker(2), Node::Broker(0), Node::Broker(1));
        assert_eq!(p.start.first(), Some(&Action::Kill(stale)));
        assert_eq!(p.start.last(), Some(&Action::Restart(stale)));
        assert!(p.start.contains(&Action::Kill(other)) && p.start.contains(&Action::Kill(leader)));
        assert_eq!(p.heal, vec![Action::Restart(other), Action::Restart(leader)]);
    }
}
