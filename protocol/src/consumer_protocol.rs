//! Kafka's *consumer embedded protocol*.
//!
//! When a group's `protocol_type` is `"consumer"`, the broker treats the
//! JoinGroup protocol metadata and the SyncGroup assignment as opaque bytes,
//! but the clients fill them with two small messages defined by Kafka's
//! `ConsumerProtocolSubscription` and `ConsumerProtocolAssignment` schemas.
//! A broker that wants to inspect a group (describe it, run a server-side
//! assignor, validate what a leader sent) has to read and write them.
//!
//! Both messages start with an `int16` version and then use the classic,
//! non-flexible, big-endian Kafka encoding: arrays are an `int32` count then
//! the elements, strings an `int16` length then UTF-8 bytes, nullable bytes an
//! `int32` length or `-1` for null, nullable strings an `int16` length or `-1`.
//!
//! Subscription layout (fields appear from the version in brackets):
//! `topics: [string]`, `user_data: nullable bytes`,
//! `owned_partitions: [{topic: string, partitions: [int32]}]` (v1+),
//! `generation_id: int32` (v2+, default -1), `rack_id: nullable string` (v3+).
//!
//! Assignment layout (identical for v0–v3):
//! `assigned_partitions: [{topic: string, partitions: [int32]}]`,
//! `user_data: nullable bytes`.
//!
//! Decoding is defensive because the bytes come from the network: every
//! length is validated against the bytes that remain *before* anything is
//! allocated from it, and negative or oversized lengths are errors. As in
//! Kafka, a version newer than the newest known one is parsed with the newest
//! known layout and any trailing bytes are ignored (the decoded value then
//! reports the newest known version); a negative version is rejected.

use bytes::Bytes;

use super::wire::{capacity, Reader, WireError, WireResult, Writer};

/// Classic encoding: no compact lengths, no tagged fields.
const CLASSIC: bool = false;

/// Maps a decoded version to the layout to parse: negative versions are
/// refused, newer ones are read as `max` (their known prefix).
fn known_version(what: &'static str, version: i16, max: i16) -> WireResult<i16> {
    if version < 0 {
        return Err(WireError::UnsupportedVersion { what, version });
    }
    Ok(version.min(max))
}

/// Accepts only versions `0..=max` for encoding.
fn check_version(what: &'static str, version: i16, max: i16) -> WireResult<i16> {
    if (0..=max).contains(&version) {
        Ok(version)
    } else {
        Err(WireError::UnsupportedVersion { what, version })
    }
}

/// Newest `ConsumerProtocolSubscription` version this module understands.
pub const SUBSCRIPTION_VERSION_MAX: i16 = 3;
/// Newest `ConsumerProtocolAssignment` version this module understands.
pub const ASSIGNMENT_VERSION_MAX: i16 = 3;

/// The partitions of one topic, as the consumer protocol groups them (see
/// `assignor::to_topic_partitions` for converting from flat pairs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicPartitions {
    pub topic: String,
    pub partitions: Vec<i32>,
}

/// What a consumer sends in JoinGroup: the topics it wants, and (v1+) what it
/// owned in the previous generation so a cooperative/sticky assignor can keep it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// Version to encode at (0–3); after decoding, the version that was parsed.
    pub version: i16,
    pub topics: Vec<String>,
    pub user_data: Option<Bytes>,
    /// Partitions owned in the previous generation (v1+; empty before).
    pub owned_partitions: Vec<TopicPartitions>,
    /// Generation in which `owned_partitions` were owned (v2+; -1 before).
    pub generation_id: i32,
    /// The consumer's `client.rack` (v3+; `None` before).
    pub rack_id: Option<String>,
}

impl Default for Subscription {
    fn default() -> Self {
        Subscription {
            version: SUBSCRIPTION_VERSION_MAX,
            topics: Vec::new(),
            user_data: None,
            owned_partitions: Vec::new(),
            generation_id: -1,
            rack_id: None,
        }
    }
}

impl Subscription {
    /// Encodes at `self.version`; fields newer than that version are omitted.
    ///
    /// # Panics
    /// If the value cannot be represented (see [`Subscription::try_encode`]).
    pub fn encode(&self) -> Bytes {
        self.try_encode()
            .unwrap_or_else(|err| panic!("cannot encode consumer subscription: {err}"))
    }

    /// Encodes at `self.version`, failing if the version is not 0–3 or a
    /// string, byte field or array is too long for its length prefix.
    pub fn try_encode(&self) -> WireResult<Bytes> {
        let version = check_version("subscription", self.version, SUBSCRIPTION_VERSION_MAX)?;
        let mut w = Writer::new();
        w.i16(version);
        w.checked_array_len(self.topics.len(), "topics")?;
        for topic in &self.topics {
            w.checked_string(Some(topic), "topics")?;
        }
        w.checked_bytes(self.user_data.as_deref(), "user_data")?;
        if version >= 1 {
            write_topic_partitions(&mut w, "owned_partitions", &self.owned_partitions)?;
        }
        if version >= 2 {
            w.i32(self.generation_id);
        }
        if version >= 3 {
            w.checked_string(self.rack_id.as_deref(), "rack_id")?;
        }
        Ok(w.into_bytes().freeze())
    }

    /// Decodes a subscription; see the module docs for the version rules.
    pub fn decode(buf: &Bytes) -> WireResult<Subscription> {
        let mut r = Reader::new(buf.clone());
        let raw = r.i16("subscription version")?;
        let version = known_version("subscription", raw, SUBSCRIPTION_VERSION_MAX)?;
        let count = r.array_len_required(CLASSIC, 2, "topics")?;
        let mut topics = Vec::with_capacity(capacity(count));
        for _ in 0..count {
            topics.push(r.string(CLASSIC, "topics")?);
        }
        let user_data = r.nullable_bytes(CLASSIC, "user_data")?;
        let mut sub = Subscription {
            version,
            topics,
            user_data,
            ..Subscription::default()
        };
        if version >= 1 {
            sub.owned_partitions = read_topic_partitions(&mut r, "owned_partitions")?;
        }
        if version >= 2 {
            sub.generation_id = r.i32("generation_id")?;
        }
        if version >= 3 {
            sub.rack_id = r.nullable_string(CLASSIC, "rack_id")?;
        }
        Ok(sub)
    }
}

/// What the group leader hands each member in SyncGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// Version to encode at (0–3); after decoding, the version that was parsed.
    pub version: i16,
    pub partitions: Vec<TopicPartitions>,
    pub user_data: Option<Bytes>,
}

impl Default for Assignment {
    fn default() -> Self {
        Assignment {
            version: ASSIGNMENT_VERSION_MAX,
            partitions: Vec::new(),
            user_data: None,
        }
    }
}

impl Assignment {
    /// Encodes at `self.version` (the layout is the same for every version).
    ///
    /// # Panics
    /// If the value cannot be represented (see [`Assignment::try_encode`]).
    pub fn encode(&self) -> Bytes {
        self.try_encode()
            .unwrap_or_else(|err| panic!("cannot encode consumer assignment: {err}"))
    }

    /// Encodes, failing if the version is not 0–3 or a length overflows.
    pub fn try_encode(&self) -> WireResult<Bytes> {
        let version = check_version("assignment", self.version, ASSIGNMENT_VERSION_MAX)?;
        let mut w = Writer::new();
        w.i16(version);
        write_topic_partitions(&mut w, "assigned_partitions", &self.partitions)?;
        w.checked_bytes(self.user_data.as_deref(), "user_data")?;
        Ok(w.into_bytes().freeze())
    }

    /// Decodes an assignment; see the module docs for the version rules.
    pub fn decode(buf: &Bytes) -> WireResult<Assignment> {
        let mut r = Reader::new(buf.clone());
        let raw = r.i16("assignment version")?;
        let version = known_version("assignment", raw, ASSIGNMENT_VERSION_MAX)?;
        let partitions = read_topic_partitions(&mut r, "assigned_partitions")?;
        let user_data = r.nullable_bytes(CLASSIC, "user_data")?;
        Ok(Assignment {
            version,
            partitions,
            user_data,
        })
    }
}

fn write_topic_partitions(w: &mut Writer, field: &'static str, list: &[TopicPartitions]) -> WireResult<()> {
    w.checked_array_len(list.len(), field)?;
    for tp in list {
        w.checked_string(Some(&tp.topic), field)?;
        w.checked_array_len(tp.partitions.len(), field)?;
        for p in &tp.partitions {
            w.i32(*p);
        }
    }
    Ok(())
}

fn read_topic_partitions(r: &mut Reader, field: &'static str) -> WireResult<Vec<TopicPartitions>> {
    // Smallest element: empty topic name (2 bytes) + empty partition array (4).
    let count = r.array_len_required(CLASSIC, 6, field)?;
    let mut out = Vec::with_capacity(capacity(count));
    for _ in 0..count {
        let topic = r.string(CLASSIC, field)?;
        let partitions = r.i32_array(CLASSIC, field)?;
        out.push(TopicPartitions { topic, partitions });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes(b: &[u8]) -> Bytes {
        Bytes::copy_from_slice(b)
    }

    fn tps(topic: &str, partitions: &[i32]) -> TopicPartitions {
        let (topic, partitions) = (topic.to_string(), partitions.to_vec());
        TopicPartitions { topic, partitions }
    }

    fn sample_subscription(version: i16) -> Subscription {
        Subscription {
            version,
            topics: vec!["t0".into(), "t1".into()],
            user_data: Some(Bytes::from_static(b"\x01\x02")),
            owned_partitions: vec![tps("t0", &[0, 2]), tps("t1", &[])],
            generation_id: 7,
            rack_id: Some("rack-a".into()),
        }
    }

    fn sample_assignment(version: i16) -> Assignment {
        let partitions = vec![tps("t0", &[0, 1]), tps("t1", &[3])];
        let user_data = Some(Bytes::from_static(b"ud"));
        Assignment {
            version,
            partitions,
            user_data,
        }
    }

    /// What a subscription looks like after a trip through `version`.
    fn as_seen_at(mut s: Subscription, version: i16) -> Subscription {
        s.version = version;
        if version < 1 {
            s.owned_partitions.clear();
        }
        if version < 2 {
            s.generation_id = -1;
        }
        if version < 3 {
            s.rack_id = None;
        }
        s
    }

    #[test]
    fn exact_bytes() {
        let v0 = Subscription {
            version: 0,
            topics: vec!["ab".into()],
            ..Subscription::default()
        };
        let expected: &[u8] = &[0, 0, 0, 0, 0, 1, 0, 2, b'a', b'b', 0xff, 0xff, 0xff, 0xff];
        assert_eq!(v0.encode().as_ref(), expected);

        let v3 = Subscription {
            version: 3,
            topics: vec![],
            user_data: Some(Bytes::from_static(b"x")),
            owned_partitions: vec![tps("t", &[5])],
            generation_id: 2,
            rack_id: Some("r".into()),
        };
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 3, // version
            0, 0, 0, 0, // topics: empty
            0, 0, 0, 1, b'x', // user_data
            0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 5, // owned_partitions
            0, 0, 0, 2, // generation_id
            0, 1, b'r', // rack_id
        ];
        assert_eq!(v3.encode().as_ref(), expected);

        let a = Assignment {
            version: 1,
            partitions: vec![tps("t", &[1, 2])],
            user_data: Some(Bytes::new()),
        };
        #[rustfmt::skip]
        let expected: &[u8] = &[0, 1, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0];
        assert_eq!(a.encode().as_ref(), expected);
    }

    #[test]
    fn round_trips_at_every_version_and_every_strict_prefix_fails() {
        for version in 0..=3 {
            let s = sample_subscription(version);
            let bytes = s.encode();
            assert_eq!(Subscription::decode(&bytes).unwrap(), as_seen_at(s, version));
            for len in 0..bytes.len() {
                assert!(
                    Subscription::decode(&bytes.slice(..len)).is_err(),
                    "v{version} len {len}"
                );
            }
            let a = sample_assignment(version);
            let bytes = a.encode();
            assert_eq!(Assignment::decode(&bytes).unwrap(), a);
            for len in 0..bytes.len() {
                assert!(Assignment::decode(&bytes.slice(..len)).is_err(), "v{version} len {len}");
            }
        }
    }

    #[test]
    fn newer_version_decodes_known_fields_and_ignores_trailing_bytes() {
        let mut bytes = sample_subscription(3).encode().to_vec();
        bytes[1] = 9; // claim version 9
        bytes.extend_from_slice(&[0xde, 0xad]);
        assert_eq!(Subscription::decode(&bytes.into()).unwrap(), sample_subscription(3));

        let mut bytes = sample_assignment(3).encode().to_vec();
        bytes[1] = 42;
        bytes.push(7);
        assert_eq!(Assignment::decode(&bytes.into()).unwrap(), sample_assignment(3));
    }

    #[test]
    fn huge_array_count_fails_before_allocating() {
        // i32::MAX topic names would need >4 GiB; the bound check fires first.
        let err = Subscription::decode(&bytes(&[0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 1])).unwrap_err();
        assert!(matches!(err, WireError::Truncated { what: "topics", .. }), "{err}");
        let err = Assignment::decode(&bytes(&[0, 0, 0x7f, 0xff, 0xff, 0xff])).unwrap_err();
        assert!(matches!(err, WireError::Truncated { .. }), "{err}");
        // A huge partition array nested in an otherwise valid element.
        let huge = bytes(&[0, 0, 0, 0, 0, 1, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1]);
        let err = Assignment::decode(&huge).unwrap_err();
        assert!(
            matches!(err, WireError::Truncated { what: "assigned_partitions", needed, .. } if needed > 1 << 30),
            "{err}"
        );
    }

    #[test]
    fn negative_version_is_rejected() {
        let err = Subscription::decode(&bytes(&[0xff, 0xff, 0, 0])).unwrap_err();
        assert!(matches!(err, WireError::UnsupportedVersion { version: -1, .. }));
        assert!(Assignment::decode(&bytes(&[0x80, 0x00])).is_err());
    }

    #[test]
    fn try_encode_reports_unrepresentable_values() {
        let s = Subscription {
            version: 4,
            ..Subscription::default()
        };
        assert!(matches!(s.try_encode(), Err(WireError::UnsupportedVersion { .. })));
        let s = Subscription {
            topics: vec!["x".repeat(40_000)],
            ..Subscription::default()
        };
        assert!(matches!(
            s.try_encode(),
            Err(WireError::TooLarge { what: "topics", .. })
        ));
    }

    fn arb_tps() -> impl Strategy<Value = Vec<TopicPartitions>> {
        let one = ("[a-z0-9._-]{0,12}", prop::collection::vec(any::<i32>(), 0..5));
        prop::collection::vec(
            one.prop_map(|(topic, partitions)| TopicPartitions { topic, partitions }),
            0..4,
        )
    }

    fn arb_bytes() -> impl Strategy<Value = Option<Bytes>> {
        prop::option::of(prop::collection::vec(any::<u8>(), 0..16).prop_map(Bytes::from))
    }

    proptest! {
        #[test]
        fn prop_subscription_round_trip(
            version in 0i16..=3, topics in prop::collection::vec("\\PC{0,10}", 0..5),
            user_data in arb_bytes(), owned_partitions in arb_tps(), generation_id in any::<i32>(),
            rack_id in prop::option::of("[a-z0-9]{0,8}"),
        ) {
            let s = Subscription { version, topics, user_data, owned_partitions, generation_id, rack_id };
            let s = as_seen_at(s, version);
            let bytes = s.encode();
            prop_assert_eq!(Subscription::decode(&bytes).unwrap(), s);
            for len in 0..bytes.len() {
                prop_assert!(Subscription::decode(&bytes.slice(..len)).is_err());
            }
        }

        #[test]
        fn prop_assignment_round_trip(version in 0i16..=3, partitions in arb_tps(), user_data in arb_bytes()) {
            let a = Assignment { version, partitions, user_data };
            let bytes = a.encode();
            prop_assert_eq!(Assignment::decode(&bytes).unwrap(), a);
            for len in 0..bytes.len() {
                prop_assert!(Assignment::decode(&bytes.slice(..len)).is_err());
            }
        }

        #[test]
        fn prop_decoding_garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let bytes = Bytes::from(bytes);
            let _ = Subscription::decode(&bytes);
            let _ = Assignment::decode(&bytes);
        }
    }
}
