//! The faults a step may inject: a crash (kill -9) and a restart, a
//! broker cut off from everyone or from ZooKeeper alone, two brokers cut
//! from each other.

use super::{Up, World, BROKERS};

impl World {
    pub(super) fn down_count(&self) -> usize {
        self.brokers.iter().filter(|b| b.up != Up::Running).count()
    }

    pub(super) fn crash(&mut self) {
        if self.down_count() >= 2 {
            return;
        }
        let id = BROKERS[self.rng.below(3) as usize];
        let b = self.broker(id);
        if b.up != Up::Running {
            return;
        }
        b.up = Up::Crashed;
        b.incarnation += 1;
        let end = b.log.written;
        self.note(|| format!("{id} crashes (written end {end})"));
        let b = self.broker(id);
        b.replica = None;
        b.log.lose_unwritten();
        b.leader_acks.clear();
        self.stats.crashes += 1;
        self.controller_broker_gone(id);
    }

    pub(super) fn restart(&mut self) {
        let Some(id) = self.brokers.iter().find(|b| b.up == Up::Crashed).map(|b| b.id) else {
            return;
        };
        self.note(|| format!("{id} restarts"));
        let b = self.broker(id);
        b.up = Up::Running;
        b.incarnation += 1;
        self.start_replica(id);
        self.controller_broker_back(id);
    }

    pub(super) fn isolate(&mut self) {
        if self.down_count() >= 1 {
            return;
        }
        let id = BROKERS[self.rng.below(3) as usize];
        let until = self.now + 200 + self.rng.below(2_800);
        self.broker(id).up = Up::Isolated { until };
        self.note(|| format!("{id} isolated until {until}"));
        self.stats.isolations += 1;
        self.controller_broker_gone(id);
        // Clients on the broker's side keep producing to it.
        if self.rng.chance(50) {
            self.producer_leader = Some(id);
        }
    }

    /// A broker loses its ZooKeeper session alone: the controller takes it
    /// for gone, the other brokers still reach it.
    pub(super) fn cut_zk(&mut self) {
        if self.down_count() >= 1 {
            return;
        }
        let id = BROKERS[self.rng.below(3) as usize];
        let until = self.now + 200 + self.rng.below(2_800);
        self.broker(id).up = Up::ZkCut { until };
        self.note(|| format!("{id} cut from ZooKeeper until {until}"));
        self.stats.zk_cuts += 1;
        self.controller_broker_gone(id);
        if self.rng.chance(50) {
            self.producer_leader = Some(id);
        }
    }

    /// Two brokers lose the link between them; ZooKeeper sees nothing.
    pub(super) fn cut_pair(&mut self) {
        if self.pair_cut.is_some_and(|(_, _, until)| self.now < until) {
            return;
        }
        let a = self.rng.below(3) as usize;
        let b = (a + 1 + self.rng.below(2) as usize) % 3;
        let until = self.now + 200 + self.rng.below(2_800);
        self.pair_cut = Some((BROKERS[a], BROKERS[b], until));
        self.note(|| format!("{} and {} cut from each other until {until}", BROKERS[a], BROKERS[b]));
        self.stats.pair_cuts += 1;
    }
}
