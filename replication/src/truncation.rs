//! Where a follower cuts its log before fetching from a new leader (KIP-101,
//! refined by KIP-279): never at the high watermark alone, which loses
//! committed records when leaders change twice in quick succession, but at
//! the end of the last leader epoch both logs share.
//!
//! The follower asks the leader (OffsetForLeaderEpoch) for the end offset of
//! the follower's latest epoch. The leader answers with that epoch, or with
//! the largest epoch it has below it, and where that epoch ended in its log.
//! If the follower also has the epoch the leader named, the logs agree up to
//! the smaller of the two end offsets: cut there, done. If not, the follower
//! cuts at the end of its own largest epoch below the one named and asks
//! again with what is then its latest epoch; each round cuts lower, so this
//! ends.

use ferrite_engine::types::{LeaderEpoch, Offset};

/// A replica's leader-epoch history (epoch → start offset), as the engine's
/// leader-epoch cache keeps it.
pub trait EpochHistory {
    fn latest_epoch(&self) -> Option<LeaderEpoch>;

    /// Kafka's `endOffsetFor`: `None` when undefined (no epochs, or
    /// `requested` above the latest); the latest epoch ends at `log_end`; an
    /// older one ends where the next larger epoch starts, and is reported
    /// as the largest epoch at or below `requested` (or `requested` itself
    /// when it is below every epoch).
    fn end_offset_for(&self, requested: LeaderEpoch, log_end: Offset) -> Option<(LeaderEpoch, Offset)>;
}

impl EpochHistory for ferrite_engine::LeaderEpochCache {
    fn latest_epoch(&self) -> Option<LeaderEpoch> {
        ferrite_engine::LeaderEpochCache::latest_epoch(self)
    }

    fn end_offset_for(&self, requested: LeaderEpoch, log_end: Offset) -> Option<(LeaderEpoch, Offset)> {
        ferrite_engine::LeaderEpochCache::end_offset_for(self, requested, log_end)
    }
}

/// A live log answers from its own epoch cache, the latest epoch ending at
/// `log_end` or at its own log end if that is further (an append that just
/// completed may have moved it past what the caller saw).
impl EpochHistory for ferrite_engine::PartitionLog {
    fn latest_epoch(&self) -> Option<LeaderEpoch> {
        ferrite_engine::PartitionLog::latest_epoch(self)
    }

    fn end_offset_for(&self, requested: LeaderEpoch, log_end: Offset) -> Option<(LeaderEpoch, Offset)> {
        self.end_offset_for_epoch_ending(requested, log_end.max(self.log_end_offset()))
    }
}

/// One truncation step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncation {
    /// Cut the log here (no-op when at or above the log end).
    pub offset: Offset,
    pub next: AfterTruncation,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterTruncation {
    /// The logs now agree: start fetching.
    Fetch,
    /// Ask the leader again, with the latest epoch left after the cut.
    AskAgain,
}

/// Decides the next step from the leader's answer to OffsetForLeaderEpoch
/// for the follower's latest epoch. `leader_answer` is `None` when the leader
/// has no end offset for it (an empty history, or one cut by retention): the
/// follower then falls back to its high watermark, as before KIP-101.
pub fn decide(
    local: &dyn EpochHistory,
    local_leo: Offset,
    local_hw: Offset,
    leader_answer: Option<(LeaderEpoch, Offset)>,
) -> Truncation {
    let Some((leader_epoch, leader_end)) = leader_answer else {
        return Truncation {
            offset: local_hw.min(local_leo),
            next: AfterTruncation::Fetch,
        };
    };
    match local.end_offset_for(leader_epoch, local_leo) {
        Some((epoch, local_end)) if epoch == leader_epoch => Truncation {
            offset: leader_end.min(local_end).min(local_leo),
            next: AfterTruncation::Fetch,
        },
        Some((_, local_end)) => Truncation {
            offset: local_end.min(local_leo),
            next: AfterTruncation::AskAgain,
        },
        // No local epoch at or below the leader's: this log predates epoch
        // tracking; the leader's end offset is the best bound there is.
        None => Truncation {
            offset: leader_end.min(local_leo),
            next: AfterTruncation::Fetch,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (epoch, start offset) pairs, ascending.
    struct Hist(Vec<(i32, i64)>);

    impl EpochHistory for Hist {
        fn latest_epoch(&self) -> Option<LeaderEpoch> {
            self.0.last().map(|e| LeaderEpoch(e.0))
        }

        fn end_offset_for(&self, requested: LeaderEpoch, log_end: Offset) -> Option<(LeaderEpoch, Offset)> {
            let latest = self.latest_epoch()?;
            if requested == latest {
                return Some((latest, log_end));
            }
            let higher = self.0.iter().find(|e| e.0 > requested.0)?;
            let floor = self.0.iter().rev().find(|e| e.0 <= requested.0);
            Some((LeaderEpoch(floor.map_or(requested.0, |f| f.0)), Offset(higher.1)))
        }
    }

    #[test]
    fn the_engine_cache_answers_as_the_model_does() {
        let mut cache = ferrite_engine::LeaderEpochCache::new();
        let model = Hist(vec![(1, 0), (2, 10), (4, 20)]);
        for (e, s) in &model.0 {
            cache.assign(LeaderEpoch(*e), Offset(*s));
        }
        for requested in -1..=6 {
            let r = LeaderEpoch(requested);
            let expected = if requested < 0 {
                None
            } else {
                model.end_offset_for(r, Offset(30))
            };
            assert_eq!(
                EpochHistory::end_offset_for(&cache, r, Offset(30)),
                expected,
                "epoch {requested}"
            );
        }
        assert_eq!(EpochHistory::latest_epoch(&cache), Some(LeaderEpoch(4)));
    }

    fn answer(epoch: i32, end: i64) -> Option<(LeaderEpoch, Offset)> {
        Some((LeaderEpoch(epoch), Offset(end)))
    }

    #[test]
    fn a_follower_in_the_same_epoch_cuts_at_the_leaders_end() {
        // Follower wrote 0..12 in epoch 1; the leader's epoch 1 ended at 10.
        let local = Hist(vec![(1, 0)]);
        let t = decide(&local, Offset(12), Offset(8), answer(1, 10));
        assert_eq!(
            t,
            Truncation {
                offset: Offset(10),
                next: AfterTruncation::Fetch
            }
        );
    }

    #[test]
    fn a_shorter_follower_keeps_everything() {
        let local = Hist(vec![(1, 0)]);
        let t = decide(&local, Offset(7), Offset(7), answer(1, 10));
        assert_eq!(t.offset, Offset(7));
    }

    #[test]
    fn kip_101_double_failover_keeps_committed_records_above_the_hw() {
        // The follower has 0..2 in epoch 0 but a stale HW of 1 (the HW it
        // learnt lags). Truncating to the HW would drop offset 1, which the
        // new leader (epoch 1, starting at 2) also has.
        let local = Hist(vec![(0, 0)]);
        let t = decide(&local, Offset(2), Offset(1), answer(0, 2));
        assert_eq!(
            t,
            Truncation {
                offset: Offset(2),
                next: AfterTruncation::Fetch
            }
        );
    }

    #[test]
    fn kip_279_an_epoch_the_leader_never_saw_cuts_to_the_shared_one_and_asks_again() {
        // Follower: epoch 1 from 0, epoch 2 from 5 (it led briefly, unseen).
        // The leader has epochs 1 (0..8) and 3: it answers (1, 8).
        let local = Hist(vec![(1, 0), (2, 5)]);
        let t = decide(&local, Offset(9), Offset(4), answer(1, 8));
        assert_eq!(
            t,
            Truncation {
                offset: Offset(5),
                next: AfterTruncation::Fetch
            }
        );
        // Follower: epochs 1 and 3; leader answers with epoch 2, which the
        // follower never had: cut at the end of its epoch 1 and ask again.
        let local = Hist(vec![(1, 0), (3, 6)]);
        let t = decide(&local, Offset(9), Offset(4), answer(2, 7));
        assert_eq!(
            t,
            Truncation {
                offset: Offset(6),
                next: AfterTruncation::AskAgain
            }
        );
    }

    #[test]
    fn no_answer_falls_back_to_the_high_watermark() {
        let local = Hist(vec![(1, 0)]);
        let t = decide(&local, Offset(9), Offset(4), None);
        assert_eq!(
            t,
            Truncation {
                offset: Offset(4),
                next: AfterTruncation::Fetch
            }
        );
    }
}
