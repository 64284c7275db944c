//! The simulated ZooKeeper (the partition state znode, conditional writes)
//! and the controller's part: clean elections from the ISR when a broker's
//! registration goes, as `ferrite_controller::election::offline` does.

use ferrite_engine::types::LeaderEpoch;
use ferrite_replication::{BrokerId, FoundState, IsrWriteOutcome, ZkVersion};

use super::model::ZkState;
use super::{Dest, Msg, World, BROKERS};

impl World {
    pub(super) fn zk_receive(&mut self, from: BrokerId, msg: Msg) {
        let Msg::IsrWrite {
            leader,
            leader_epoch,
            isr,
            expected,
        } = msg
        else {
            unreachable!("only ISR writes go to ZooKeeper")
        };
        self.note(|| {
            format!(
                "{from} writes ISR {isr:?} (epoch {leader_epoch}, expecting version {expected:?}; zk at {:?})",
                self.zk.version
            )
        });
        let outcome = if self.zk.version == expected {
            assert_eq!(
                self.zk.leader,
                Some(leader),
                "an ISR write at the right version from a non-leader"
            );
            assert!(isr.contains(&leader), "a leader wrote an ISR without itself");
            self.zk.isr = isr;
            self.zk.version = ZkVersion(self.zk.version.0 + 1);
            IsrWriteOutcome::Written {
                version: self.zk.version,
            }
        } else {
            IsrWriteOutcome::Conflict {
                found: Some(FoundState {
                    leader: self.zk.leader,
                    leader_epoch: self.zk.epoch,
                    isr: self.zk.isr.clone(),
                    version: self.zk.version,
                }),
            }
        };
        self.send(from, Dest::Broker(from), Msg::IsrResp { leader_epoch, outcome }, 0);
    }

    /// Writes a new state (leader epoch + 1) and sends it to every
    /// registered broker.
    pub(super) fn controller_write(&mut self, leader: Option<BrokerId>, isr: Vec<BrokerId>) {
        self.note(|| format!("controller writes leader {leader:?} isr {isr:?}"));
        self.zk = ZkState {
            leader,
            epoch: LeaderEpoch(self.zk.epoch.0 + 1),
            isr,
            version: ZkVersion(self.zk.version.0 + 1),
        };
        if let Some(l) = leader {
            self.stats.elections += 1;
            self.check_acked_in(l, "a newly elected leader");
        }
        for b in BROKERS {
            if self.registered(b) {
                self.send_leader_and_isr(b);
            }
        }
    }

    pub(super) fn send_leader_and_isr(&mut self, to: BrokerId) {
        let state = self.zk.clone();
        self.send(to, Dest::Broker(to), Msg::LeaderAndIsr(state), 0);
    }

    /// The controller saw `/brokers/ids/<id>` go.
    pub(super) fn controller_broker_gone(&mut self, id: BrokerId) {
        let live_isr: Vec<BrokerId> = self.zk.isr.iter().copied().filter(|b| self.registered(*b)).collect();
        if self.zk.leader == Some(id) {
            match BROKERS.iter().find(|b| live_isr.contains(b)) {
                Some(&l) => self.controller_write(Some(l), live_isr),
                None => {
                    let isr = self.zk.isr.clone();
                    self.controller_write(None, isr);
                }
            }
        } else if self.zk.leader.is_some() && self.zk.isr.contains(&id) {
            self.controller_write(self.zk.leader, live_isr);
        }
    }

    /// The controller saw `/brokers/ids/<id>` appear.
    pub(super) fn controller_broker_back(&mut self, id: BrokerId) {
        if self.zk.leader.is_none() {
            let live_isr: Vec<BrokerId> = self.zk.isr.iter().copied().filter(|b| self.registered(*b)).collect();
            if let Some(&l) = BROKERS.iter().find(|b| live_isr.contains(b)) {
                self.controller_write(Some(l), live_isr);
                return;
            }
        }
        self.send_leader_and_isr(id);
    }
}
