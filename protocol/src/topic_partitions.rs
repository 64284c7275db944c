//! `[topic string, partitions [...]]`: the topic-then-partitions nesting
//! that many requests and responses share, with one struct per partition.
//! Each topic and each partition struct ends with its tagged fields in
//! flexible versions; a topic's plain int32 array of partition indexes
//! (`TopicPartitions<i32>`) has none per index.

use super::wire::{Reader, WireResult, Writer};

/// A partition index and its error code: the per-partition answer of
/// many responses (`[partition_index int32, error_code int16]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionError {
    pub partition_index: i32,
    pub error_code: i16,
}

/// One topic's partitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicPartitions<P> {
    pub topic: String,
    pub partitions: Vec<P>,
}

impl<P> TopicPartitions<P> {
    /// `(topic, partition)` pairs grouped into topics by runs of the same
    /// topic, keeping their order.
    pub fn from_runs(items: impl IntoIterator<Item = (String, P)>) -> Vec<TopicPartitions<P>> {
        let mut out: Vec<TopicPartitions<P>> = Vec::new();
        for (topic, partition) in items {
            match out.last_mut() {
                Some(t) if t.topic == topic => t.partitions.push(partition),
                _ => out.push(TopicPartitions {
                    topic,
                    partitions: vec![partition],
                }),
            }
        }
        out
    }

    /// A non-null array of topics, each partition as `read` reads it (at
    /// least `partition_bytes_min` bytes with its tagged fields); `what`
    /// names the topic and the partition arrays in errors.
    pub(crate) fn read_all(
        r: &mut Reader,
        flexible: bool,
        partition_bytes_min: usize,
        what: [&'static str; 2],
        read: impl FnMut(&mut Reader) -> WireResult<P> + Copy,
    ) -> WireResult<Vec<TopicPartitions<P>>> {
        r.structs(flexible, topic_bytes_min(flexible), what[0], |r| {
            Ok(TopicPartitions {
                topic: r.string(flexible, "topic")?,
                partitions: r.structs(flexible, partition_bytes_min, what[1], read)?,
            })
        })
    }

    /// Writes topics in the layout [`TopicPartitions::read_all`] reads.
    pub(crate) fn write_all(
        w: &mut Writer,
        flexible: bool,
        topics: &[TopicPartitions<P>],
        write: impl FnMut(&mut Writer, &P) + Copy,
    ) {
        w.structs(flexible, topics, |w, t| {
            w.string(flexible, &t.topic);
            w.structs(flexible, &t.partitions, write);
        });
    }
}

/// The fewest bytes a topic takes: the length prefixes of its name and its
/// partitions (2 and 4 bytes classic; 1 each compact, then 1 of tagged
/// fields).
fn topic_bytes_min(flexible: bool) -> usize {
    if flexible {
        3
    } else {
        6
    }
}

impl TopicPartitions<i32> {
    /// A non-null array of topics, each with a plain int32 array of
    /// partition indexes; `what` names the topic and the index arrays.
    pub(crate) fn read_indexes(
        r: &mut Reader,
        flexible: bool,
        what: [&'static str; 2],
    ) -> WireResult<Vec<TopicPartitions<i32>>> {
        r.structs(flexible, topic_bytes_min(flexible), what[0], |r| {
            Ok(TopicPartitions {
                topic: r.string(flexible, "topic")?,
                partitions: r.i32_array(flexible, what[1])?,
            })
        })
    }

    /// Writes topics in the layout [`TopicPartitions::read_indexes`] reads.
    pub(crate) fn write_indexes(w: &mut Writer, flexible: bool, topics: &[TopicPartitions<i32>]) {
        w.structs(flexible, topics, |w, t| {
            w.string(flexible, &t.topic);
            w.i32_array(flexible, &t.partitions);
        });
    }
}

impl TopicPartitions<PartitionError> {
    /// A non-null array of topics, each with its partitions' error codes.
    pub(crate) fn read_errors(
        r: &mut Reader,
        flexible: bool,
        what: [&'static str; 2],
    ) -> WireResult<Vec<TopicPartitions<PartitionError>>> {
        TopicPartitions::read_all(r, flexible, 6, what, |r| {
            Ok(PartitionError {
                partition_index: r.i32("partition_index")?,
                error_code: r.i16("error_code")?,
            })
        })
    }

    /// Writes topics in the layout [`TopicPartitions::read_errors`] reads.
    pub(crate) fn write_errors(w: &mut Writer, flexible: bool, topics: &[TopicPartitions<PartitionError>]) {
        TopicPartitions::write_all(w, flexible, topics, |w, p| {
            w.i32(p.partition_index);
            w.i16(p.error_code);
        });
    }
}
