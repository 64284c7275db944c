//! The order in which a connection's requests take effect.
//!
//! Kafka processes a connection's requests one after another, and clients
//! rely on it: fifty pipelined OffsetCommits end at the fiftieth offset, a
//! produce pipelined behind another to the same partition lands after it.
//! Ferrite starts a connection's requests as they arrive (responses still
//! leave in request order, see `connection.rs`) and orders their effects
//! here:
//!
//! - a *write* (produce, commits, group and admin operations, controller
//!   requests) starts once the write before it on the connection has taken
//!   effect, so writes take effect in arrival order;
//! - a *read* (metadata, fetch, offsets and descriptions) starts once every
//!   write before it has taken effect, so it sees them; reads run
//!   concurrently with each other and with the writes behind them.
//!
//! A write takes effect when its handler says so through its [`Effect`], or
//! else when the handler returns. Produce says so once each partition's
//! append has its place in the log (before the bytes reach the disk or the
//! ISR), so that pipelined produces still overlap their writes. Reads are
//! not waited for: a long-polling fetch does not hold the produce behind it,
//! which Kafka would hold (its connection is muted until the fetch answers).
//!
//! Requests take their turn in [`Sequencer::turn`], called by the
//! connection's reader in arrival order, before the handler's task exists.

use futures::channel::oneshot;
use futures::future::{FutureExt, Shared};

use ferrite_protocol::api::ApiKey;

/// Whether a request's effect must be ordered with its connection's others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ordering {
    /// Changes nothing a later request could see.
    Read,
    /// Changes state: takes effect after the writes before it.
    Write,
}

impl Ordering {
    pub fn of(api: ApiKey) -> Ordering {
        match api {
            ApiKey::ApiVersions
            | ApiKey::Metadata
            | ApiKey::DescribeCluster
            | ApiKey::Fetch
            | ApiKey::ListOffsets
            | ApiKey::DescribeConfigs
            | ApiKey::OffsetForLeaderEpoch
            | ApiKey::FindCoordinator
            | ApiKey::OffsetFetch
            | ApiKey::ListGroups
            | ApiKey::DescribeGroups
            | ApiKey::DescribeUserScramCredentials
            | ApiKey::DescribeAcls
            | ApiKey::DescribeTransactions
            | ApiKey::ListTransactions
            | ApiKey::DescribeProducers => Ordering::Read,
            ApiKey::Produce
            | ApiKey::CreateTopics
            | ApiKey::DeleteTopics
            | ApiKey::CreatePartitions
            | ApiKey::AlterConfigs
            | ApiKey::IncrementalAlterConfigs
            | ApiKey::LeaderAndIsr
            | ApiKey::StopReplica
            | ApiKey::UpdateMetadata
            | ApiKey::ControlledShutdown
            | ApiKey::ElectLeaders
            | ApiKey::DeleteRecords
            | ApiKey::InitProducerId
            | ApiKey::JoinGroup
            | ApiKey::Heartbeat
            | ApiKey::LeaveGroup
            | ApiKey::SyncGroup
            | ApiKey::OffsetCommit
            | ApiKey::OffsetDelete
            | ApiKey::DeleteGroups
            | ApiKey::SaslHandshake
            | ApiKey::SaslAuthenticate
            | ApiKey::AlterUserScramCredentials
            | ApiKey::CreateAcls
            | ApiKey::DeleteAcls
            | ApiKey::AddPartitionsToTxn
            | ApiKey::AddOffsetsToTxn
            | ApiKey::EndTxn
            | ApiKey::WriteTxnMarkers
            | ApiKey::TxnOffsetCommit => Ordering::Write,
        }
    }
}

/// Resolves once a write has taken effect (its sender fired or dropped).
type Applied = Shared<oneshot::Receiver<()>>;

/// A connection's order of effects: the last write's [`Applied`].
#[derive(Default)]
pub struct Sequencer {
    last_write: Option<Applied>,
}

impl Sequencer {
    /// The turn of the next request to arrive.
    pub fn turn(&mut self, ordering: Ordering) -> Turn {
        let after = self.last_write.clone();
        let effect = match ordering {
            Ordering::Read => Effect(None),
            Ordering::Write => {
                let (tx, rx) = oneshot::channel();
                self.last_write = Some(rx.shared());
                Effect(Some(tx))
            }
        };
        Turn { after, effect }
    }
}

/// One request's place: what it waits for, and how it says it took effect.
pub struct Turn {
    after: Option<Applied>,
    effect: Effect,
}

impl Turn {
    /// A turn that waits for nothing (a request outside any connection).
    pub fn unordered() -> Turn {
        Turn {
            after: None,
            effect: Effect(None),
        }
    }

    /// Waits until the writes before this request have taken effect; returns
    /// what the handler marks (or drops) once its own effect is in place.
    pub async fn start(self) -> Effect {
        if let Some(after) = self.after {
            // A dropped sender is as good as a fired one: the write is over.
            let _ = after.await;
        }
        self.effect
    }
}

/// A write's handle on its effect: marked once the effect is in place (or
/// dropped when the handler is done, which marks it).
#[must_use = "dropping the effect marks it at once"]
pub struct Effect(Option<oneshot::Sender<()>>);

impl Effect {
    /// Says the effect is in place: the next write may start.
    pub fn mark(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::future::poll_immediate;

    #[test]
    fn a_write_waits_for_the_write_before_it_and_not_for_reads() {
        futures::executor::block_on(async {
            let mut s = Sequencer::default();
            let first = s.turn(Ordering::Write);
            let read = s.turn(Ordering::Read);
            let second = s.turn(Ordering::Write);
            let read_after = s.turn(Ordering::Read);
            let mut first = first.start().await;
            let mut read = Box::pin(read.start());
            let mut second = Box::pin(second.start());
            let mut read_after = Box::pin(read_after.start());
            assert!(
                poll_immediate(&mut read).await.is_none(),
                "a read waits for the write before it"
            );
            assert!(
                poll_immediate(&mut second).await.is_none(),
                "a write waits for the one before it"
            );
            first.mark();
            assert!(poll_immediate(&mut read).await.is_some(), "the write took effect");
            let second = poll_immediate(&mut second).await.expect("the first write took effect");
            assert!(
                poll_immediate(&mut read_after).await.is_none(),
                "a read waits for every write before it"
            );
            drop(second);
            assert!(
                poll_immediate(&mut read_after).await.is_some(),
                "a dropped effect is marked"
            );
        });
    }

    #[test]
    fn reads_do_not_wait_for_each_other() {
        futures::executor::block_on(async {
            let mut s = Sequencer::default();
            let a = s.turn(Ordering::Read);
            let b = s.turn(Ordering::Read);
            let w = s.turn(Ordering::Write);
            assert!(poll_immediate(Box::pin(b.start())).await.is_some());
            assert!(
                poll_immediate(Box::pin(w.start())).await.is_some(),
                "a write does not wait for reads"
            );
            assert!(poll_immediate(Box::pin(a.start())).await.is_some());
        });
    }
}
