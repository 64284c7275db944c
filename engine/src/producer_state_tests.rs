use super::*;
use crate::batch::{Compression, TimestampType};
use crate::types::LeaderEpoch;

fn batch(pid: i64, epoch: i16, first_seq: i32, count: i32, base: i64) -> BatchInfo {
    BatchInfo {
        base_offset: Offset(base),
        last_offset_delta: count - 1,
        size: 100,
        leader_epoch: LeaderEpoch(0),
        max_timestamp: TimestampMs(1_000 + base),
        base_timestamp: TimestampMs(1_000),
        record_count: count,
        compression: Compression::None,
        timestamp_type: TimestampType::CreateTime,
        producer_id: ProducerId(pid),
        producer_epoch: epoch,
        base_sequence: first_seq,
        is_transactional: false,
        is_control: false,
        has_delete_horizon: false,
    }
}

#[test]
fn in_order_batches_append_and_retries_are_duplicates() {
    let mut s = ProducerStates::new();
    let b0 = batch(7, 0, 0, 10, 100);
    assert_eq!(s.check(&b0), Ok(SeqCheck::Append));
    s.record(&b0);
    let b1 = batch(7, 0, 10, 5, 110);
    assert_eq!(s.check(&b1), Ok(SeqCheck::Append));
    s.record(&b1);
    assert_eq!(
        s.check(&batch(7, 0, 0, 10, -1)),
        Ok(SeqCheck::Duplicate {
            first_offset: Offset(100),
            last_offset: Offset(109)
        })
    );
    assert_eq!(
        s.check(&batch(7, 0, 10, 5, -1)),
        Ok(SeqCheck::Duplicate {
            first_offset: Offset(110),
            last_offset: Offset(114)
        })
    );
}

#[test]
fn gaps_and_stale_epochs_are_refused() {
    let mut s = ProducerStates::new();
    s.record(&batch(7, 3, 0, 10, 0));
    assert_eq!(
        s.check(&batch(7, 3, 11, 1, -1)),
        Err(SequenceError::OutOfOrder {
            producer_id: ProducerId(7),
            epoch: 3,
            expected: 10,
            got: 11
        })
    );
    assert_eq!(
        s.check(&batch(7, 2, 10, 1, -1)),
        Err(SequenceError::StaleEpoch {
            producer_id: ProducerId(7),
            epoch: 2,
            current: 3
        })
    );
    // A new epoch starts again at 0, and only there.
    assert!(s.check(&batch(7, 4, 5, 1, -1)).is_err());
    assert_eq!(s.check(&batch(7, 4, 0, 1, -1)), Ok(SeqCheck::Append));
    // Unknown producers and non-idempotent batches go through.
    assert_eq!(s.check(&batch(8, 0, 42, 1, -1)), Ok(SeqCheck::Append));
    assert_eq!(s.check(&batch(-1, -1, -1, 1, -1)), Ok(SeqCheck::Append));
}

#[test]
fn only_the_last_five_batches_are_remembered() {
    let mut s = ProducerStates::new();
    for i in 0..7 {
        s.record(&batch(1, 0, i * 2, 2, i64::from(i) * 2));
    }
    assert_eq!(s.get(ProducerId(1)).map(|e| e.batches.len()), Some(BATCHES_KEPT));
    // The sixth-from-last is forgotten: its retry looks out of order.
    assert!(s.check(&batch(1, 0, 2, 2, -1)).is_err());
    assert!(matches!(
        s.check(&batch(1, 0, 4, 2, -1)),
        Ok(SeqCheck::Duplicate { .. })
    ));
}

#[test]
fn sequences_wrap_at_i32_max() {
    let mut s = ProducerStates::new();
    s.record(&batch(1, 0, i32::MAX - 1, 2, 0));
    assert_eq!(
        s.get(ProducerId(1)).and_then(|e| e.batches.back().map(|b| b.last_seq)),
        Some(i32::MAX)
    );
    assert_eq!(s.check(&batch(1, 0, 0, 1, -1)), Ok(SeqCheck::Append));
}

#[test]
fn snapshots_round_trip_and_damage_is_detected() {
    let mut s = ProducerStates::new();
    for pid in 0..20 {
        for i in 0..(pid % 7) as i32 {
            s.record(&batch(pid, (pid % 3) as i16, i * 3, 3, pid * 100 + i64::from(i) * 3));
        }
    }
    let bytes = s.encode(Offset(12_345));
    let back = ProducerStates::decode(&bytes).expect("decodes");
    assert_eq!(back.offset, Offset(12_345));
    assert_eq!(back.states, s);
    assert!(back.legacy_aborted.is_empty());
    for cut in 0..bytes.len() {
        assert!(ProducerStates::decode(&bytes[..cut]).is_err(), "prefix {cut}");
    }
    let mut flipped = bytes.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    assert!(ProducerStates::decode(&flipped).is_err());
    let mut huge = bytes[..HEADER_BYTES].to_vec();
    huge[16..20].copy_from_slice(&u32::MAX.to_be_bytes());
    let crc = crc32c::crc32c(&huge[8..]);
    huge[4..8].copy_from_slice(&crc.to_be_bytes());
    assert!(ProducerStates::decode(&huge).is_err());
}

#[test]
fn idle_producers_expire() {
    let mut s = ProducerStates::new();
    s.record(&batch(1, 0, 0, 1, 0));
    s.record(&batch(2, 0, 0, 1, 500));
    assert_eq!(s.expire_before(TimestampMs(1_200)), 1);
    assert!(s.get(ProducerId(1)).is_none());
    assert!(s.get(ProducerId(2)).is_some());
}

/// A batch the log cleaner emptied keeps its offsets, and so its sequences:
/// state rebuilt from it expects the sequence after its last offset.
#[test]
fn a_compacted_batch_still_spans_its_sequences() {
    let mut s = ProducerStates::new();
    let mut cleaned = batch(7, 0, 0, 5, 0);
    cleaned.record_count = 0;
    s.record(&cleaned);
    assert_eq!(s.check(&batch(7, 0, 5, 1, 5)), Ok(SeqCheck::Append));
    assert!(
        s.check(&batch(7, 0, 1, 1, 5)).is_err(),
        "the sequences it spanned are used"
    );
}

/// Snapshots written before transaction indexes (FPS3, whose aborted
/// transactions are handed back for them), before coordinator epochs
/// (FPS2) and before transactions (FPS1) still load: no marker's
/// coordinator epoch known, no transaction open or aborted.
#[test]
fn older_snapshots_still_load() {
    let mut s = ProducerStates::new();
    s.record(&batch(3, 1, 0, 2, 40));
    let v4 = s.encode(Offset(42));
    let reseal = |mut b: Vec<u8>, magic: &[u8; 4]| {
        b[..4].copy_from_slice(magic);
        let crc = crc32c::crc32c(&b[8..]);
        b[4..8].copy_from_slice(&crc.to_be_bytes());
        b
    };
    // FPS3: an aborted-transaction list after the open ones.
    let aborted = AbortedTxn {
        producer_id: ProducerId(3),
        first_offset: Offset(10),
        last_offset: Offset(20),
        last_stable_offset: Offset(21),
    };
    let mut v3 = v4.clone();
    v3.extend_from_slice(&1u32.to_be_bytes());
    aborted.encode(&mut v3);
    let v3 = reseal(v3, b"FPS3");
    // FPS2: the producer's coordinator epoch (after its pid, epoch and
    // timestamp, 20 bytes into the file) is not there.
    let at = 20 + 8 + 2 + 8;
    let mut v2 = v3[..at].to_vec();
    v2.extend_from_slice(&v3[at + 4..]);
    let v2 = reseal(v2, b"FPS2");
    // FPS1 ends without the two transaction lists.
    let v1 = reseal(v2[..v2.len() - 8 - AbortedTxn::BYTES].to_vec(), b"FPS1");
    for (name, bytes) in [("FPS1", &v1), ("FPS2", &v2), ("FPS3", &v3), ("FPS4", &v4)] {
        let back = ProducerStates::decode(bytes).unwrap_or_else(|e| panic!("an {name} snapshot: {e}"));
        assert_eq!((back.offset, back.states), (Offset(42), s.clone()), "{name}");
        let legacy = match name {
            "FPS2" | "FPS3" => vec![aborted],
            _ => vec![],
        };
        assert_eq!(back.legacy_aborted, legacy, "{name}");
    }
}

/// A marker's coordinator epoch is kept, survives a snapshot, and is what
/// DescribeProducers shows.
#[test]
fn a_markers_coordinator_epoch_is_kept_and_snapshotted() {
    let mut s = ProducerStates::new();
    let mut marker = batch(3, 1, -1, 1, 40);
    marker.is_control = true;
    marker.is_transactional = true;
    s.record(&marker);
    s.note_coordinator_epoch(&marker, Some(7));
    assert_eq!(s.get(ProducerId(3)).map(|e| e.coordinator_epoch), Some(7));
    assert_eq!(s.active()[0].coordinator_epoch, Some(7));
    let back = ProducerStates::decode(&s.encode(Offset(41))).expect("decodes");
    assert_eq!(back.states, s);
}
