use super::*;
use ferrite_protocol::api::ApiKey;

#[test]
fn the_versions_used_are_served_with_the_expected_encoding() {
    let used = [
        (
            gm::FindCoordinatorRequest::KEY,
            gm::FindCoordinatorRequest::VERSION,
            true,
        ),
        (ga::ListGroupsRequest::KEY, ga::ListGroupsRequest::VERSION, true),
        (ga::DescribeGroupsRequest::KEY, ga::DescribeGroupsRequest::VERSION, true),
        (ga::DeleteGroupsRequest::KEY, ga::DeleteGroupsRequest::VERSION, true),
        (go::OffsetFetchRequest::KEY, go::OffsetFetchRequest::VERSION, true),
        (go::OffsetCommitRequest::KEY, go::OffsetCommitRequest::VERSION, true),
        (LIST_OFFSETS_KEY, LIST_OFFSETS_V, false),
        (METADATA_KEY, METADATA_V, false),
    ];
    for (key, v, flexible) in used {
        let s = ApiKey::from_code(key).expect("served");
        assert!(s.accepts(v), "{:?} v{v}", s.key);
        assert_eq!(s.is_flexible(v), flexible, "{:?} v{v}", s.key);
    }
}

#[test]
fn new_offsets_are_clamped_to_the_log() {
    let tp = ("t".to_string(), 0);
    let t = |e, l, o, s| ResetTarget {
        to_earliest: e,
        to_latest: l,
        to_offset: o,
        shift_by: s,
    };
    let cases = [
        (t(true, false, None, None), 5, None, 5),
        (t(false, true, None, None), 5, None, 50),
        (t(false, false, Some(99), None), 5, None, 50),
        (t(false, false, Some(0), None), 5, None, 5),
        (t(false, false, None, Some(-5)), 0, Some(10), 5),
        (t(false, false, None, Some(-50)), 2, Some(10), 2),
        (t(false, false, None, Some(i64::MAX)), 0, Some(10), 50),
    ];
    for (target, start, current, want) in cases {
        assert_eq!(
            new_offset(&target, &tp, start, 50, current).unwrap(),
            want,
            "{target:?}"
        );
    }
    assert!(new_offset(&t(false, false, None, Some(1)), &tp, 0, 50, None).is_err());
}
