//! `[topic string, partitions [...]]`: the topic-then-partitions nesting
//! that many requests and responses share, with one struct per partition.
//! Each topic and each partition struct ends with its tagged fields in
//! flexible versions.

use super::wire::{Reader, WireResult, Writer};

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
        // topic (at least 1) + partitions (at least 1) + tagged fields.
        let topic_bytes_min = if flexible { 3 } else { 6 };
        r.structs(flexible, topic_bytes_min, what[0], |r| {
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
