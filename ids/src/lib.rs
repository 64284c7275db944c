//! Ferrite's identifiers and quantities as newtypes, so that an offset
//! cannot be passed where an epoch, a broker id or a byte position is
//! expected.
//!
//! This crate is at the bottom of the workspace: every other crate may use
//! it, and it uses none of them (only `serde`, for the ids that go into
//! ZooKeeper's JSON). It holds no logic beyond what a value's own meaning
//! asks (an offset's checked addition, a directory name's parsing, the
//! order three offsets of one log keep).

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::fmt;

use serde::{Deserialize, Serialize};

/// A Kafka offset: the position of a record in a partition's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Offset(pub i64);

impl Offset {
    pub const ZERO: Offset = Offset(0);
    /// No offset: -1 on the wire (an unknown HW or log start, a consumer's
    /// log start in a fetch).
    pub const NONE: Offset = Offset(-1);

    pub fn get(self) -> i64 {
        self.0
    }

    /// `self + n`, asserting that the sum does not overflow.
    pub fn plus(self, n: i64) -> Offset {
        let sum = self.0.checked_add(n);
        assert!(sum.is_some(), "offset overflow: {} + {}", self.0, n);
        Offset(sum.unwrap_or_default())
    }
}

/// Three offsets of one log that stay in order, `0 ≤ low ≤ mid ≤ high`,
/// named by their owner (the engine's log start, durable offset and log
/// end; a replica's log start, high watermark and log end). [`Self::set`]
/// is the one place they change, and it asserts the order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderedOffsets {
    names: &'static [&'static str; 3],
    low: Offset,
    mid: Offset,
    high: Offset,
}

impl OrderedOffsets {
    pub fn new(names: &'static [&'static str; 3], low: Offset, mid: Offset, high: Offset) -> OrderedOffsets {
        let mut o = OrderedOffsets { names, low, mid, high };
        o.set(low, mid, high);
        o
    }

    pub fn set(&mut self, low: Offset, mid: Offset, high: Offset) {
        let [l, m, h] = self.names;
        assert!(low.0 >= 0, "negative {l} {low}");
        assert!(low <= mid, "{l} {low} above {m} {mid}");
        assert!(mid <= high, "{m} {mid} above {h} {high}");
        self.low = low;
        self.mid = mid;
        self.high = high;
    }

    pub fn low(&self) -> Offset {
        self.low
    }

    pub fn mid(&self) -> Offset {
        self.mid
    }

    pub fn high(&self) -> Offset {
        self.high
    }
}

/// Declares a newtype over [`OrderedOffsets`] whose three offsets have
/// their owner's names: a constructor, the one setter and a getter each.
/// Each name comes with the words its assertion messages use.
///
/// ```
/// ferrite_ids::ordered_offsets! {
///     /// A replica's offsets.
///     pub struct Marks { log_start: "log start", hw: "hw", leo: "log end" }
/// }
/// let m = Marks::new(ferrite_ids::Offset(0), ferrite_ids::Offset(2), ferrite_ids::Offset(5));
/// assert_eq!(m.hw(), ferrite_ids::Offset(2));
/// ```
#[macro_export]
macro_rules! ordered_offsets {
    ($(#[$meta:meta])* $vis:vis struct $name:ident {
        $low:ident: $low_words:literal, $mid:ident: $mid_words:literal, $high:ident: $high_words:literal $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis struct $name($crate::OrderedOffsets);

        impl $name {
            pub fn new($low: $crate::Offset, $mid: $crate::Offset, $high: $crate::Offset) -> $name {
                $name($crate::OrderedOffsets::new(&[$low_words, $mid_words, $high_words], $low, $mid, $high))
            }

            /// The one place the offsets change.
            pub fn set(&mut self, $low: $crate::Offset, $mid: $crate::Offset, $high: $crate::Offset) {
                self.0.set($low, $mid, $high);
            }

            pub fn $low(&self) -> $crate::Offset {
                self.0.low()
            }

            pub fn $mid(&self) -> $crate::Offset {
                self.0.mid()
            }

            pub fn $high(&self) -> $crate::Offset {
                self.0.high()
            }
        }
    };
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The leader epoch stamped into every batch a leader appends
/// (`partitionLeaderEpoch` in the batch header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LeaderEpoch(pub i32);

impl LeaderEpoch {
    /// Kafka's "no epoch" value.
    pub const NONE: LeaderEpoch = LeaderEpoch(-1);
}

impl fmt::Display for LeaderEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Milliseconds since the Unix epoch, as carried in batch headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TimestampMs(pub i64);

impl TimestampMs {
    /// Kafka's "no timestamp" value.
    pub const NONE: TimestampMs = TimestampMs(-1);
}

/// Index of a shard (one glommio executor pinned to one CPU).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShardId(pub usize);

impl fmt::Display for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shard-{}", self.0)
    }
}

/// A topic-partition: the unit of storage, replication and shard ownership.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    /// The directory name Kafka uses for this partition: `<topic>-<partition>`.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }

    /// Parses a `<topic>-<partition>` directory name. The topic may itself
    /// contain `-`; the partition is what follows the last one.
    pub fn parse_dir_name(name: &str) -> Option<TopicPartition> {
        let (topic, partition) = name.rsplit_once('-')?;
        if topic.is_empty() {
            return None;
        }
        let partition: i32 = partition.parse().ok()?;
        if partition < 0 {
            return None;
        }
        Some(TopicPartition::new(topic, partition))
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// A broker's `broker.id`; a partition's replicas are named by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BrokerId(pub i32);

impl fmt::Display for BrokerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A znode's data version (ZooKeeper's `Stat.version`). A leader's ISR
/// writes are conditional on the partition state znode's version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ZkVersion(pub i32);

impl fmt::Display for ZkVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A reading of a monotonic clock, in milliseconds from an arbitrary origin.
/// The state machines never read a clock: every event carries the time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MonoMs(pub u64);

impl MonoMs {
    /// Milliseconds from `earlier` to `self`; 0 if `earlier` is later.
    pub fn since(self, earlier: MonoMs) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    pub fn plus_ms(self, ms: u64) -> MonoMs {
        MonoMs(self.0.saturating_add(ms))
    }
}

/// Counts controller changes (`/controller_epoch`): 1 for the first
/// controller, +1 for each new one. Every controller request carries it and
/// brokers reject requests from an older one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ControllerEpoch(pub i32);

impl ControllerEpoch {
    /// No controller has been seen yet.
    pub const NONE: ControllerEpoch = ControllerEpoch(0);

    pub fn next(self) -> ControllerEpoch {
        assert!(self.0 < i32::MAX, "controller epoch overflow");
        ControllerEpoch(self.0 + 1)
    }
}

impl fmt::Display for ControllerEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Identifies one registration of a broker: the creation transaction id
/// (czxid) of its `/brokers/ids/<id>` znode. A broker that restarted within
/// one watch round trip has the same id but a new epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BrokerEpoch(pub i64);

/// A producer's id (KIP-98), handed out by InitProducerId from blocks the
/// cluster reserves; a batch's producer id field. -1 ([`ProducerId::NONE`])
/// marks a batch of no idempotent producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProducerId(pub i64);

impl ProducerId {
    /// No producer: a plain (not idempotent) batch, or an answer that
    /// carries no id.
    pub const NONE: ProducerId = ProducerId(-1);

    /// An id a producer was given (not [`ProducerId::NONE`]): its batches
    /// carry sequences the log checks.
    pub fn is_producer(self) -> bool {
        self.0 >= 0
    }
}

impl fmt::Display for ProducerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_name_round_trips_topics_with_dashes() {
        let tp = TopicPartition::new("my-topic-x", 12);
        assert_eq!(tp.dir_name(), "my-topic-x-12");
        assert_eq!(TopicPartition::parse_dir_name("my-topic-x-12"), Some(tp));
        assert_eq!(TopicPartition::parse_dir_name("-3"), None);
        assert_eq!(TopicPartition::parse_dir_name("topic"), None);
        assert_eq!(
            TopicPartition::parse_dir_name("t--1"),
            Some(TopicPartition::new("t-", 1))
        );
    }

    #[test]
    #[should_panic(expected = "b 3 above c 2")]
    fn ordered_offsets_refuse_disorder() {
        OrderedOffsets::new(&["a", "b", "c"], Offset(0), Offset(3), Offset(2));
    }
}
