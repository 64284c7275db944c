use super::*;
use proptest::prelude::*;

const NOW: i64 = 1_000_000;

fn tp(t: &str, p: i32) -> TopicPartition {
    TopicPartition::new(t, p)
}

fn caller(m: &TxnMeta) -> Caller {
    Caller {
        producer_id: m.producer_id,
        producer_epoch: m.producer_epoch,
    }
}

fn written(step: InitStep) -> TxnMeta {
    match step {
        InitStep::Write(m) => m,
        other => panic!("expected a write, got {other:?}"),
    }
}

#[test]
fn a_transaction_commits_through_prepare_and_complete() {
    let m = TxnMeta::fresh(ProducerId(9), 60_000, NOW);
    assert_eq!(TxnMeta::init(None, 60_000, None, NOW), Ok(InitStep::FreshId));
    let open = m
        .add_partitions(caller(&m), &[tp("a", 0), tp("b", 1)], NOW + 1)
        .unwrap()
        .unwrap();
    assert_eq!(open.status, TxnStatus::Ongoing);
    assert_eq!(open.start_ms, NOW + 1);
    assert_eq!(open.add_partitions(caller(&open), &[tp("a", 0)], NOW + 2), Ok(None));
    let more = open
        .add_partitions(caller(&open), &[tp("c", 0)], NOW + 3)
        .unwrap()
        .unwrap();
    assert_eq!(more.partitions.len(), 3);
    assert_eq!(more.start_ms, NOW + 1, "adding keeps the start");
    let EndStep::Prepare(prepared) = more.end(caller(&more), true, NOW + 4).unwrap() else {
        panic!("an open transaction prepares")
    };
    assert_eq!(prepared.status, TxnStatus::PrepareCommit);
    assert_eq!(
        prepared.end(caller(&prepared), true, NOW + 5),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(
        prepared.end(caller(&prepared), false, NOW + 5),
        Err(TxnError::InvalidTxnState)
    );
    assert_eq!(
        prepared.add_partitions(caller(&prepared), &[tp("a", 0)], NOW + 5),
        Err(TxnError::ConcurrentTransactions)
    );
    let done = prepared.complete(NOW + 6);
    assert_eq!(done.status, TxnStatus::CompleteCommit);
    assert!(done.partitions.is_empty());
    assert_eq!(
        done.end(caller(&done), true, NOW + 7),
        Ok(EndStep::Done),
        "a retried commit"
    );
    assert_eq!(done.end(caller(&done), false, NOW + 7), Err(TxnError::InvalidTxnState));
    let next = done
        .add_partitions(caller(&done), &[tp("z", 0)], NOW + 8)
        .unwrap()
        .unwrap();
    assert_eq!(next.partitions.iter().cloned().collect::<Vec<_>>(), vec![tp("z", 0)]);
    assert_eq!(next.start_ms, NOW + 8);
}

#[test]
fn a_new_instance_fences_the_old_one() {
    let m = TxnMeta::fresh(ProducerId(9), 60_000, NOW);
    let old = caller(&m);
    let open = m.add_partitions(old, &[tp("a", 0)], NOW).unwrap().unwrap();
    // The new instance finds a transaction open: it is aborted at epoch 1.
    let InitStep::AbortFirst(abort) = TxnMeta::init(Some(&open), 30_000, None, NOW + 1).unwrap() else {
        panic!("an open transaction is aborted first")
    };
    assert_eq!(
        (abort.status, abort.producer_epoch, abort.last_producer_epoch),
        (TxnStatus::PrepareAbort, 1, -1)
    );
    assert_eq!(
        abort.partitions, open.partitions,
        "the markers go where the transaction wrote"
    );
    assert_eq!(
        TxnMeta::init(Some(&abort), 30_000, None, NOW + 2),
        Err(TxnError::ConcurrentTransactions)
    );
    let aborted = abort.complete(NOW + 3);
    let fresh = written(TxnMeta::init(Some(&aborted), 30_000, None, NOW + 4).unwrap());
    assert_eq!(
        (fresh.producer_epoch, fresh.timeout_ms, fresh.status),
        (2, 30_000, TxnStatus::Empty)
    );
    // The old instance is refused everything.
    assert_eq!(
        fresh.add_partitions(old, &[tp("a", 0)], NOW),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(fresh.end(old, true, NOW), Err(TxnError::ProducerFenced));
    let stranger = Caller {
        producer_id: ProducerId(10),
        producer_epoch: 2,
    };
    assert_eq!(fresh.end(stranger, true, NOW), Err(TxnError::InvalidProducerIdMapping));
}

#[test]
fn a_timed_out_transaction_is_aborted_at_a_raised_epoch() {
    let m = TxnMeta::fresh(ProducerId(9), 1_000, NOW);
    let open = m.add_partitions(caller(&m), &[tp("a", 0)], NOW).unwrap().unwrap();
    assert_eq!(open.expire(NOW + 1_000), None, "not past its timeout yet");
    let abort = open.expire(NOW + 1_001).unwrap();
    assert_eq!((abort.status, abort.producer_epoch), (TxnStatus::PrepareAbort, 1));
    assert_eq!(
        abort.complete(NOW + 2_000).expire(NOW + 99_000),
        None,
        "only open ones expire"
    );
    // The timed-out producer is fenced: its old epoch is refused.
    let aborted = abort.complete(NOW + 2_000);
    let with = |e| {
        Some(Caller {
            producer_id: ProducerId(9),
            producer_epoch: e,
        })
    };
    assert_eq!(
        TxnMeta::init(Some(&aborted), 1_000, with(0), NOW),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        TxnMeta::init(Some(&aborted), 1_000, with(5), NOW),
        Err(TxnError::ProducerFenced)
    );
    let other = Some(Caller {
        producer_id: ProducerId(10),
        producer_epoch: 1,
    });
    assert_eq!(
        TxnMeta::init(Some(&aborted), 1_000, other, NOW),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn a_retried_init_producer_id_gets_the_epoch_it_raised() {
    let with = |e| {
        Some(Caller {
            producer_id: ProducerId(9),
            producer_epoch: e,
        })
    };
    let m = TxnMeta::fresh(ProducerId(9), 1_000, NOW);
    // A producer at epoch 0 asks again naming it (KIP-360): epoch 1, and
    // epoch 0 is remembered.
    let raised = written(TxnMeta::init(Some(&m), 1_000, with(0), NOW).unwrap());
    assert_eq!((raised.producer_epoch, raised.last_producer_epoch), (1, 0));
    // Its answer was lost: the retry with epoch 0 gets epoch 1 again.
    assert_eq!(TxnMeta::init(Some(&raised), 1_000, with(0), NOW), Ok(InitStep::Current));
    // A new instance (no epoch named) raises it and forgets epoch 0.
    let fresh = written(TxnMeta::init(Some(&raised), 1_000, None, NOW).unwrap());
    assert_eq!((fresh.producer_epoch, fresh.last_producer_epoch), (2, -1));
    assert_eq!(
        TxnMeta::init(Some(&fresh), 1_000, with(0), NOW),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn epochs_used_up_take_a_new_producer_id() {
    let mut m = TxnMeta::fresh(ProducerId(9), 1_000, NOW);
    m.producer_epoch = EPOCH_MAX;
    assert_eq!(TxnMeta::init(Some(&m), 1_000, None, NOW), Ok(InitStep::FreshId));
    m.status = TxnStatus::Ongoing;
    let abort = m.expire(i64::MAX).unwrap();
    assert_eq!(
        abort.producer_epoch,
        i16::MAX,
        "the fencing abort still raises the epoch"
    );
    let aborted = abort.complete(0);
    assert_eq!(TxnMeta::init(Some(&aborted), 1_000, None, NOW), Ok(InitStep::FreshId));
    assert_eq!(aborted.expire(i64::MAX), None);
}

#[test]
fn statuses_keep_kafkas_codes_and_names() {
    for s in TxnStatus::ALL {
        assert_eq!(TxnStatus::of_code(s.code()), Some(s));
        assert_eq!(TxnStatus::of_name(s.name()), Some(s));
    }
    assert_eq!(TxnStatus::PrepareEpochFence.code(), 7);
    assert_eq!(TxnStatus::of_code(8), None);
}

#[derive(Clone, Debug)]
enum Op {
    Init,
    Add(i32),
    End(bool),
    Complete,
    Expire(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Init),
        (0..4i32).prop_map(Op::Add),
        any::<bool>().prop_map(Op::End),
        Just(Op::Complete),
        (0..5_000i64).prop_map(Op::Expire),
    ]
}

proptest! {
    /// Whatever the requests, the epoch never goes down, only a prepared
    /// transaction completes, and partitions are held only while a
    /// transaction is open or being completed.
    #[test]
    fn transitions_keep_their_invariants(ops in proptest::collection::vec(op(), 1..60)) {
        let mut m = TxnMeta::fresh(ProducerId(1), 1_000, 0);
        let mut now = 0;
        for o in ops {
            now += 100;
            let next = match o {
                Op::Init => match TxnMeta::init(Some(&m), 1_000, None, now) {
                    Ok(InitStep::Write(n)) | Ok(InitStep::AbortFirst(n)) => Some(n),
                    Ok(InitStep::FreshId) => Some(TxnMeta::fresh(ProducerId(m.producer_id.0 + 1), 1_000, now)),
                    Ok(InitStep::Current) | Err(_) => None,
                },
                Op::Add(p) => m.add_partitions(caller(&m), &[tp("t", p)], now).ok().flatten(),
                Op::End(commit) => match m.end(caller(&m), commit, now) {
                    Ok(EndStep::Prepare(n)) => Some(n),
                    _ => None,
                },
                Op::Complete => m.status.is_prepared().then(|| m.complete(now)),
                Op::Expire(later) => m.expire(now + later),
            };
            if let Some(n) = next {
                if n.producer_id == m.producer_id {
                    prop_assert!(n.producer_epoch >= m.producer_epoch);
                }
                let holds = matches!(n.status, TxnStatus::Ongoing | TxnStatus::PrepareCommit | TxnStatus::PrepareAbort);
                prop_assert_eq!(!n.partitions.is_empty(), holds, "{:?}", n);
                if n.status.is_prepared() {
                    prop_assert!(m.status == TxnStatus::Ongoing, "prepared from {:?}", m.status);
                }
                m = n;
            }
        }
    }
}

#[test]
fn verification_passes_only_for_a_partition_of_the_open_transaction() {
    let m = TxnMeta::fresh(ProducerId(9), 60_000, NOW);
    assert_eq!(
        m.verify(caller(&m), &tp("a", 0)),
        Err(TxnError::InvalidTxnState),
        "nothing open"
    );
    let open = m.add_partitions(caller(&m), &[tp("a", 0)], NOW).unwrap().unwrap();
    assert_eq!(open.verify(caller(&open), &tp("a", 0)), Ok(()));
    assert_eq!(open.verify(caller(&open), &tp("a", 1)), Err(TxnError::InvalidTxnState));
    let old = Caller {
        producer_id: open.producer_id,
        producer_epoch: open.producer_epoch - 1,
    };
    assert_eq!(open.verify(old, &tp("a", 0)), Err(TxnError::ProducerFenced));
    let stranger = Caller {
        producer_id: ProducerId(10),
        producer_epoch: open.producer_epoch,
    };
    assert_eq!(
        open.verify(stranger, &tp("a", 0)),
        Err(TxnError::InvalidProducerIdMapping)
    );
    let EndStep::Prepare(prepared) = open.end(caller(&open), true, NOW + 1).unwrap() else {
        panic!("prepares")
    };
    assert_eq!(
        prepared.verify(caller(&prepared), &tp("a", 0)),
        Err(TxnError::ConcurrentTransactions)
    );
    let done = prepared.complete(NOW + 2);
    assert_eq!(
        done.verify(caller(&done), &tp("a", 0)),
        Err(TxnError::InvalidTxnState),
        "a late write after the commit"
    );
}

#[test]
fn only_an_idle_id_expires_and_only_after_its_expiration() {
    let m = TxnMeta::fresh(ProducerId(9), 60_000, NOW);
    assert!(!m.idle_past(NOW + 1_000, 1_000), "not yet");
    assert!(m.idle_past(NOW + 1_001, 1_000));
    let open = m.add_partitions(caller(&m), &[tp("a", 0)], NOW).unwrap().unwrap();
    assert!(
        !open.idle_past(NOW + 1_000_000, 1_000),
        "an open transaction is not idle"
    );
    let EndStep::Prepare(prepared) = open.end(caller(&open), true, NOW).unwrap() else {
        panic!("prepares")
    };
    assert!(!prepared.idle_past(NOW + 1_000_000, 1_000), "nor an ending one");
    let done = prepared.complete(NOW + 5);
    assert!(!done.idle_past(NOW + 1_005, 1_000));
    assert!(done.idle_past(NOW + 1_006, 1_000), "idle since it completed");
}

#[test]
fn a_transaction_holds_at_most_the_partitions_its_record_can_name() {
    let m = TxnMeta::fresh(ProducerId(9), 60_000, NOW);
    let many: Vec<TopicPartition> = (0..crate::log_format::PARTITIONS_MAX as i32)
        .map(|p| tp("t", p))
        .collect();
    let full = m.add_partitions(caller(&m), &many, NOW).unwrap().unwrap();
    assert_eq!(
        full.add_partitions(caller(&full), &[tp("u", 0)], NOW),
        Err(TxnError::TooManyPartitions)
    );
    assert_eq!(
        full.add_partitions(caller(&full), &[tp("t", 0)], NOW),
        Ok(None),
        "already held"
    );
}
