//! The client side: a producer that sends to the broker it takes for the
//! leader (acks=1 or acks=all, as the configuration's mix says), and the
//! acknowledgements it gets, which the checks hold every replica to.

use ferrite_engine::types::Offset;
use ferrite_replication::{Acks, Commit, MonoMs, ReplicationError, WaiterId};

use super::model::Rec;
use super::{local, Up, World, REQUEST_TIMEOUT_MS};

impl World {
    pub(super) fn ack(&mut self, offset: Offset, value: u64) {
        self.note(|| format!("acknowledged {value} at {offset}"));
        let before = self.acked.insert(offset, value);
        assert!(
            before.is_none_or(|v| v == value),
            "offset {offset} acknowledged twice, for {before:?} and {value}"
        );
    }

    pub(super) fn produce(&mut self) {
        let Some(leader) = self.producer_leader else {
            self.producer_leader = self.zk.leader;
            return;
        };
        let acks = if self.rng.chance(self.cfg.acks_all_percent) {
            Acks::All
        } else {
            Acks::Leader
        };
        let value = self.next_value;
        self.next_value += 1;
        let now = self.now;
        let must_survive = self.cfg.acks_one_must_survive;
        let trace = self.trace;
        let b = self.broker(leader);
        if b.up == Up::Crashed {
            self.producer_leader = self.zk.leader;
            return;
        }
        let Some(r) = b.replica.as_mut() else { return };
        if let Err(e) = r.check_produce(acks) {
            if matches!(e, ReplicationError::NotEnoughReplicas { .. }) {
                self.stats.not_enough_replicas += 1;
            }
            self.producer_leader = self.zk.leader;
            return;
        }
        let rec = Rec {
            epoch: r.leader_epoch(),
            value,
        };
        let offset = b.log.appended_end();
        if trace {
            println!(
                "t={:>6} {leader} takes {value} at {offset} ({acks:?}, hw {}, isr {:?})",
                now,
                r.hw(),
                r.isr()
            );
        }
        b.log.append(rec);
        r.appended(local(&b.log));
        let mut acked_now = None;
        match acks {
            Acks::All => match r.await_commit(WaiterId(value), offset, MonoMs(now + REQUEST_TIMEOUT_MS)) {
                Ok(Commit::Done) => acked_now = Some((offset, value)),
                Ok(Commit::Waiting) => {
                    b.waiting.insert(WaiterId(value), (offset, value));
                }
                Err(_) => {}
            },
            // acks=1 is answered once the leader's write is done.
            Acks::Leader if must_survive => b.leader_acks.push((offset, value)),
            Acks::Leader | Acks::None => {}
        }
        self.run_actions(leader);
        if let Some((offset, value)) = acked_now {
            self.ack(offset, value);
        }
    }
}
