//! Every topic-level config of Kafka 3.9: its name, kind, default, the check
//! its values pass, the broker settings that stand in for it when a topic
//! does not override it (its synonyms, most specific first), what it does,
//! and whether Ferrite does it yet.
//!
//! Operators and admin tools set and read all of them (`kafka-configs.sh`,
//! Terraform providers and AdminClients copy topic configs whole), so an
//! unknown name would break them even where the behaviour is not built: such
//! a config is accepted, checked and stored, and its documentation says
//! what Ferrite does instead ([`Built::Not`]).

/// A config's kind, as DescribeConfigs reports it (`ConfigType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigKind {
    Boolean,
    String,
    Int,
    /// A 16-bit integer (broker settings only: no topic config is one).
    Short,
    Long,
    Double,
    List,
}

impl ConfigKind {
    /// DescribeConfigs' `config_type` code.
    pub fn code(self) -> i8 {
        match self {
            ConfigKind::Boolean => 1,
            ConfigKind::String => 2,
            ConfigKind::Int => 3,
            ConfigKind::Short => 4,
            ConfigKind::Long => 5,
            ConfigKind::Double => 6,
            ConfigKind::List => 7,
        }
    }
}

/// What a value must be, beyond its kind.
#[derive(Clone, Copy, Debug)]
pub enum Check {
    /// Any value of the kind.
    Any,
    AtLeast(i64),
    Between(i64, i64),
    /// A number in [0, 1].
    Ratio,
    /// One of these strings.
    OneOf(&'static [&'static str]),
    /// A list of these strings, comma separated (empty: none of them).
    ListOf(&'static [&'static str]),
    /// gzip's level: -1 (the codec's default) or 1 to 9.
    GzipLevel,
    /// `*`, or `partition:broker` pairs, or empty.
    ThrottledReplicas,
    /// A Kafka release (`3.0`, `3.0-IV1`, …).
    Release,
}

/// Whether Ferrite does what the config asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Built {
    Yes,
    /// Accepted and stored; what Ferrite does instead.
    Not(&'static str),
}

#[derive(Debug)]
pub struct TopicConfigDef {
    pub name: &'static str,
    pub kind: ConfigKind,
    /// Kafka's default, as DescribeConfigs shows it.
    pub default: &'static str,
    pub check: Check,
    /// Broker settings that give the default, in the order Kafka lists them.
    pub synonyms: &'static [&'static str],
    pub doc: &'static str,
    pub built: Built,
}

const LONG_MAX: &str = "9223372036854775807";

macro_rules! def {
    ($name:expr, $kind:ident, $default:expr, $check:expr, [$($syn:expr),*], $built:expr, $doc:expr) => {
        TopicConfigDef {
            name: $name,
            kind: ConfigKind::$kind,
            default: $default,
            check: $check,
            synonyms: &[$($syn),*],
            doc: $doc,
            built: $built,
        }
    };
}

/// Kafka 3.9's topic configs, in Kafka's order.
pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def!("segment.bytes", Int, "1073741824", Check::AtLeast(14), ["log.segment.bytes"], Built::Yes,
        "Bytes a segment file holds before the log rolls to a new one."),
    def!("segment.ms", Long, "604800000", Check::AtLeast(1), ["log.roll.ms", "log.roll.hours"], Built::Yes,
        "Milliseconds after which the active segment is rolled even if not full, so that retention can delete it."),
    def!("segment.jitter.ms", Long, "0", Check::AtLeast(0), ["log.roll.jitter.ms", "log.roll.jitter.hours"],
        Built::Not("segments roll at segment.ms exactly"),
        "Largest random amount taken off segment.ms, to spread the rolls of many partitions."),
    def!("segment.index.bytes", Int, "10485760", Check::AtLeast(4), ["log.index.size.max.bytes"], Built::Yes,
        "Bytes of the offset index of one segment; a full index rolls the segment."),
    def!("flush.messages", Long, LONG_MAX, Check::AtLeast(1), ["log.flush.interval.messages"], Built::Yes,
        "Records appended between two fsyncs of the log."),
    def!("flush.ms", Long, LONG_MAX, Check::AtLeast(0), ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
        Built::Yes, "Milliseconds between two fsyncs of the log."),
    def!("retention.bytes", Long, "-1", Check::Any, ["log.retention.bytes"], Built::Yes,
        "Bytes a partition keeps before its oldest segments are deleted (-1: no limit); applies with cleanup.policy delete."),
    def!("retention.ms", Long, "604800000", Check::AtLeast(-1), ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
        Built::Yes, "Milliseconds a segment is kept after its newest record (-1: forever); applies with cleanup.policy delete."),
    def!("max.message.bytes", Int, "1048588", Check::AtLeast(0), ["message.max.bytes"], Built::Yes,
        "Largest record batch a produce may append to this topic."),
    def!("index.interval.bytes", Int, "4096", Check::AtLeast(0), ["log.index.interval.bytes"], Built::Yes,
        "Bytes of log between two entries of the offset and time indexes."),
    def!("delete.retention.ms", Long, "86400000", Check::AtLeast(0), ["log.cleaner.delete.retention.ms"], Built::Yes,
        "How long a compacted topic keeps a key's tombstone."),
    def!("min.compaction.lag.ms", Long, "0", Check::AtLeast(0), ["log.cleaner.min.compaction.lag.ms"], Built::Yes,
        "Youngest a record may be and still be compacted away."),
    def!("max.compaction.lag.ms", Long, LONG_MAX, Check::AtLeast(1), ["log.cleaner.max.compaction.lag.ms"], Built::Yes,
        "Oldest a record may get before its segment must be compacted."),
    def!("file.delete.delay.ms", Long, "60000", Check::AtLeast(0), ["log.segment.delete.delay.ms"],
        Built::Not("a segment retention removes is deleted at once, once no reader holds it"),
        "Milliseconds between removing a segment from the log and deleting its files."),
    def!("min.cleanable.dirty.ratio", Double, "0.5", Check::Ratio, ["log.cleaner.min.cleanable.ratio"], Built::Yes,
        "Share of a compacted log not yet compacted that starts a compaction."),
    def!("cleanup.policy", List, "delete", Check::ListOf(&["compact", "delete"]), ["log.cleanup.policy"],
        Built::Yes,
        "delete: old segments go by retention.ms and retention.bytes; compact: the latest record of each key is kept."),
    def!("unclean.leader.election.enable", Boolean, "false", Check::Any, ["unclean.leader.election.enable"], Built::Yes,
        "Whether a replica outside the ISR may become leader when no ISR member is left (loses acknowledged records)."),
    def!("min.insync.replicas", Int, "1", Check::AtLeast(1), ["min.insync.replicas"], Built::Yes,
        "Fewest in-sync replicas with which an acks=all produce is accepted (else NOT_ENOUGH_REPLICAS)."),
    def!("compression.type", String, "producer", Check::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
        ["compression.type"], Built::Not("batches are stored as the producer compressed them"),
        "The codec batches are stored with; producer keeps the producer's."),
    def!("compression.gzip.level", Int, "-1", Check::GzipLevel, ["compression.gzip.level"],
        Built::Not("batches are stored as the producer compressed them"),
        "gzip level when the broker compresses (compression.type gzip)."),
    def!("compression.lz4.level", Int, "9", Check::Between(1, 17), ["compression.lz4.level"],
        Built::Not("batches are stored as the producer compressed them"),
        "lz4 level when the broker compresses (compression.type lz4)."),
    def!("compression.zstd.level", Int, "3", Check::Between(-131072, 22), ["compression.zstd.level"],
        Built::Not("batches are stored as the producer compressed them"),
        "zstd level when the broker compresses (compression.type zstd)."),
    def!("preallocate", Boolean, "false", Check::Any, ["log.preallocate"],
        Built::Not("preallocation follows the broker's log.preallocate"),
        "Whether new segment files are allocated ahead of the writes."),
    def!("message.format.version", String, "3.0-IV1", Check::Release, ["log.message.format.version"],
        Built::Not("records are stored as RecordBatch v2 whatever the value (as Kafka 3 does)"),
        "Deprecated: the record format of older releases."),
    def!("message.timestamp.type", String, "CreateTime", Check::OneOf(&["CreateTime", "LogAppendTime"]),
        ["log.message.timestamp.type"], Built::Not("records keep the producer's timestamps"),
        "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches with the broker's clock."),
    def!("message.timestamp.difference.max.ms", Long, LONG_MAX, Check::AtLeast(0),
        ["log.message.timestamp.difference.max.ms"], Built::Not("record timestamps are not checked against the clock"),
        "Deprecated: largest distance between a record's timestamp and the broker's clock."),
    def!("message.timestamp.before.max.ms", Long, LONG_MAX, Check::AtLeast(0),
        ["log.message.timestamp.before.max.ms"], Built::Not("record timestamps are not checked against the clock"),
        "Largest amount a record's timestamp may lie behind the broker's clock."),
    def!("message.timestamp.after.max.ms", Long, LONG_MAX, Check::AtLeast(0),
        ["log.message.timestamp.after.max.ms"], Built::Not("record timestamps are not checked against the clock"),
        "Largest amount a record's timestamp may lie ahead of the broker's clock."),
    def!("leader.replication.throttled.replicas", List, "", Check::ThrottledReplicas, [],
        Built::Not("replication is not throttled"),
        "Replicas whose leader side of replication is throttled: partition:broker pairs, or *."),
    def!("follower.replication.throttled.replicas", List, "", Check::ThrottledReplicas, [],
        Built::Not("replication is not throttled"),
        "Replicas whose follower side of replication is throttled: partition:broker pairs, or *."),
    def!("message.downconversion.enable", Boolean, "true", Check::Any, ["log.message.downconversion.enable"],
        Built::Not("fetches older than v4 are not served, so nothing is converted"),
        "Whether records are converted for consumers that fetch with an older format."),
    def!("remote.storage.enable", Boolean, "false", Check::Any, [],
        Built::Not("tiered storage is not built: true is refused"),
        "Whether the topic's old segments move to remote (tiered) storage."),
    def!("local.retention.ms", Long, "-2", Check::AtLeast(-2), ["log.local.retention.ms"],
        Built::Not("tiered storage is not built"),
        "With tiered storage: how long segments stay on local disk (-2: retention.ms)."),
    def!("local.retention.bytes", Long, "-2", Check::AtLeast(-2), ["log.local.retention.bytes"],
        Built::Not("tiered storage is not built"),
        "With tiered storage: bytes kept on local disk (-2: retention.bytes)."),
    def!("remote.log.copy.disable", Boolean, "false", Check::Any, [], Built::Not("tiered storage is not built"),
        "With tiered storage: stop copying segments to remote storage."),
    def!("remote.log.delete.on.disable", Boolean, "false", Check::Any, [], Built::Not("tiered storage is not built"),
        "With tiered storage: delete remote segments when tiering is turned off."),
];

/// The definition of a topic config.
pub fn def(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

impl TopicConfigDef {
    /// Why `value` is refused, if it is.
    pub fn refusal(&self, value: &str) -> Option<String> {
        match self.kind {
            ConfigKind::Boolean if !matches!(value.to_ascii_lowercase().as_str(), "true" | "false") => {
                return Some("not true or false".into())
            }
            ConfigKind::Int if value.parse::<i32>().is_err() => return Some("not a 32-bit integer".into()),
            ConfigKind::Short if value.parse::<i16>().is_err() => return Some("not a 16-bit integer".into()),
            ConfigKind::Long if value.parse::<i64>().is_err() => return Some("not a 64-bit integer".into()),
            ConfigKind::Double if value.parse::<f64>().map_or(true, |v| !v.is_finite()) => {
                return Some("not a number".into())
            }
            _ => {}
        }
        let n = || value.parse::<i64>().unwrap_or(i64::MIN);
        let refused = match self.check {
            Check::Any => false,
            Check::AtLeast(min) => n() < min,
            Check::Between(min, max) => !(min..=max).contains(&n()),
            Check::Ratio => !value.parse::<f64>().is_ok_and(|v| (0.0..=1.0).contains(&v)),
            Check::OneOf(allowed) => !allowed.contains(&value),
            Check::ListOf(allowed) => !value.is_empty() && !value.split(',').all(|item| allowed.contains(&item.trim())),
            Check::GzipLevel => !(n() == -1 || (1..=9).contains(&n())),
            Check::ThrottledReplicas => !throttled_replicas_ok(value),
            Check::Release => !release_ok(value),
        };
        refused.then(|| self.allowed())
    }

    /// The values allowed, in words.
    fn allowed(&self) -> String {
        match self.check {
            Check::Any => "not allowed".into(),
            Check::AtLeast(min) => format!("must be at least {min}"),
            Check::Between(min, max) => format!("must be between {min} and {max}"),
            Check::Ratio => "must be between 0 and 1".into(),
            Check::OneOf(allowed) => format!("must be one of {}", allowed.join(", ")),
            Check::ListOf(allowed) => format!("must be a list of {}", allowed.join(", ")),
            Check::GzipLevel => "must be -1 or between 1 and 9".into(),
            Check::ThrottledReplicas => "must be *, or partition:broker pairs separated by commas".into(),
            Check::Release => "must be a Kafka release such as 3.0 or 3.0-IV1".into(),
        }
    }

    /// The documentation DescribeConfigs gives: what it does, and what
    /// Ferrite does instead where the behaviour is not built.
    pub fn documentation(&self) -> String {
        match self.built {
            Built::Yes => self.doc.to_string(),
            Built::Not(instead) => format!("{} Not built in Ferrite yet: {instead}.", self.doc),
        }
    }

    /// Whether the config holds a list (APPEND and SUBTRACT apply).
    pub fn is_list(&self) -> bool {
        self.kind == ConfigKind::List
    }
}

fn throttled_replicas_ok(value: &str) -> bool {
    let value = value.trim();
    if value.is_empty() || value == "*" {
        return true;
    }
    value.split(',').all(|pair| {
        let mut parts = pair.trim().split(':');
        let ok = |p: Option<&str>| p.is_some_and(|p| p.trim().parse::<u32>().is_ok());
        ok(parts.next()) && ok(parts.next()) && parts.next().is_none()
    })
}

fn release_ok(value: &str) -> bool {
    let (release, iv) = match value.split_once('-') {
        Some((r, iv)) => (r, Some(iv)),
        None => (value, None),
    };
    let numbers: Vec<&str> = release.split('.').collect();
    let release_ok = (2..=3).contains(&numbers.len()) && numbers.iter().all(|n| n.parse::<u32>().is_ok());
    let iv_ok = iv.is_none_or(|iv| iv.strip_prefix("IV").is_some_and(|n| n.parse::<u32>().is_ok()));
    release_ok && iv_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_passes_its_own_check() {
        for d in TOPIC_CONFIGS {
            assert_eq!(d.refusal(d.default), None, "{}'s default {:?}", d.name, d.default);
        }
    }

    #[test]
    fn names_are_unique_and_documented() {
        for (i, d) in TOPIC_CONFIGS.iter().enumerate() {
            assert!(TOPIC_CONFIGS[..i].iter().all(|o| o.name != d.name), "{} twice", d.name);
            assert!(!d.doc.is_empty(), "{} has no documentation", d.name);
            assert!(d.synonyms.iter().all(|s| !s.is_empty()));
        }
        assert_eq!(TOPIC_CONFIGS.len(), 36, "Kafka 3.9 has 36 topic configs");
    }

    #[test]
    fn values_are_checked_by_kind_and_range() {
        let d = |n| def(n).unwrap_or_else(|| panic!("{n} is defined"));
        assert!(d("retention.ms").refusal("-2").is_some());
        assert!(d("retention.ms").refusal("-1").is_none());
        assert!(d("retention.ms").refusal("soon").is_some());
        assert!(d("segment.bytes").refusal("4294967296").is_some(), "an int");
        assert!(d("min.cleanable.dirty.ratio").refusal("0.7").is_none());
        assert!(d("min.cleanable.dirty.ratio").refusal("1.5").is_some());
        assert!(d("cleanup.policy").refusal("compact,delete").is_none());
        assert!(d("cleanup.policy").refusal("compact,shred").is_some());
        assert!(
            d("cleanup.policy").refusal("").is_none(),
            "neither delete nor compact, as Kafka 3.9 allows"
        );
        assert!(d("compression.gzip.level").refusal("-1").is_none());
        assert!(d("compression.gzip.level").refusal("0").is_some());
        assert!(d("leader.replication.throttled.replicas").refusal("0:1,1:2").is_none());
        assert!(d("leader.replication.throttled.replicas").refusal("0:x").is_some());
        assert!(d("message.format.version").refusal("2.8-IV1").is_none());
        assert!(d("message.format.version").refusal("new").is_some());
        assert!(d("unclean.leader.election.enable").refusal("TRUE").is_none());
        assert!(d("unclean.leader.election.enable").refusal("yes").is_some());
        assert!(d("compression.type").refusal("brotli").is_some());
    }

    #[test]
    fn documentation_says_what_is_not_built() {
        let doc = def("segment.jitter.ms").map(|d| d.documentation()).unwrap_or_default();
        assert!(doc.contains("Not built in Ferrite yet"), "{doc}");
        let doc = def("retention.ms").map(|d| d.documentation()).unwrap_or_default();
        assert!(!doc.contains("Not built"), "{doc}");
    }
}
