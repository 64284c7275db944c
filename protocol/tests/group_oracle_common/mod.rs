//! What the consumer-group oracle tests share: the oracle's string and id
//! helpers, our codecs behind one trait, and the two-way check.
#![allow(dead_code)]

pub use std::fmt::Debug;
pub use std::ops::RangeInclusive;

pub use bytes::{Bytes, BytesMut};
pub use ferrite_protocol::group_membership::*;
pub use ferrite_protocol::group_offsets::*;
pub use ferrite_protocol::groups_admin::*;
pub use ferrite_protocol::wire::{Reader, WireResult, Writer};
pub use kafka_protocol::messages as km;
pub use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes};

pub fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

pub fn os(x: &Option<String>) -> Option<StrBytes> {
    x.as_deref().map(s)
}

pub fn gid(x: &str) -> km::GroupId {
    km::GroupId(s(x))
}

pub fn tn(x: &str) -> km::TopicName {
    km::TopicName(s(x))
}

pub fn since<T>(version: i16, from: i16, v: T, default: T) -> T {
    if version >= from {
        v
    } else {
        default
    }
}

pub fn id(version: i16, from: i16, x: &str) -> Option<String> {
    since(version, from, Some(x.to_string()), None)
}

pub trait Codec: Sized + PartialEq + Debug {
    fn enc(&self, w: &mut Writer, version: i16);
    fn dec(r: &mut Reader, version: i16) -> WireResult<Self>;
}

macro_rules! codec {
    ($($t:ty),*) => {$(
        impl Codec for $t {
            fn enc(&self, w: &mut Writer, version: i16) {
                self.encode(w, version)
            }
            fn dec(r: &mut Reader, version: i16) -> WireResult<Self> {
                <$t>::decode(r, version)
            }
        }
    )*};
}

codec!(
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse
);

/// The versions of `M` both we (up to `max`) and the oracle speak.
pub fn versions<M: Message>(max: i16) -> RangeInclusive<i16> {
    assert!(M::VERSIONS.max >= max, "the oracle stops at v{}", M::VERSIONS.max);
    M::VERSIONS.min.max(0)..=max
}

pub fn oracle_encode<O: Encodable>(theirs: &O, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    theirs
        .encode(&mut buf, version)
        .unwrap_or_else(|e| panic!("oracle encoding v{version}: {e}"));
    buf.freeze()
}

/// Both directions at `version` (see the module doc).
pub fn check<T: Codec, O: Encodable + Decodable + PartialEq + Debug>(version: i16, ours: &T, theirs: &O) {
    let bytes = oracle_encode(theirs, version);
    let mut r = Reader::new(bytes.clone());
    let decoded = T::dec(&mut r, version).unwrap_or_else(|e| panic!("v{version}: {e}"));
    assert_eq!(&decoded, ours, "v{version}");
    assert_eq!(r.remaining(), 0, "v{version}: bytes left over");
    let mut w = Writer::new();
    ours.enc(&mut w, version);
    assert_eq!(w.as_slice(), &bytes[..], "v{version}");
    let mut b = Bytes::copy_from_slice(w.as_slice());
    let back = O::decode(&mut b, version).unwrap_or_else(|e| panic!("oracle decoding v{version}: {e}"));
    assert_eq!(b.len(), 0, "v{version}: {} bytes left over", b.len());
    assert_eq!(&back, theirs, "v{version}");
}
