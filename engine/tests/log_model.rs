//! Property test: any sequence of appends, rolls, retention runs, truncations,
//! restarts and reads returns exactly the appended batches at the assigned
//! offsets. The model is a list of batches with their offsets.

mod common;

use std::rc::Rc;

use common::*;
use ferrite_engine::batch::{stamp, validate, Validation};
use ferrite_engine::clock::{Clock, ManualClock};
use ferrite_engine::{EngineError, LeaderEpoch, LogConfig, Offset, PartitionLog, SizeLimit, WriteMode};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Append {
        batches: usize,
        records: usize,
        value_len: usize,
    },
    AdvanceClockMs(i64),
    Retention,
    Truncate {
        at_permille: u16,
    },
    Flush,
    RestartClean,
    RestartUnclean,
    Read {
        at_permille: u16,
        max_bytes: usize,
        strict: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (1usize..4, 1usize..6, 0usize..700).prop_map(|(batches, records, value_len)| Op::Append { batches, records, value_len }),
        1 => (0i64..7_200_000).prop_map(Op::AdvanceClockMs),
        1 => Just(Op::Retention),
        1 => (0u16..1000).prop_map(|at_permille| Op::Truncate { at_permille }),
        1 => Just(Op::Flush),
        1 => Just(Op::RestartClean),
        1 => Just(Op::RestartUnclean),
        3 => (0u16..1001, 1usize..6000, any::<bool>()).prop_map(|(at_permille, max_bytes, strict)| Op::Read { at_permille, max_bytes, strict }),
    ]
}

#[derive(Clone, Debug)]
struct ModelBatch {
    base: Offset,
    next: Offset,
    bytes: Vec<u8>,
}

struct Model {
    batches: Vec<ModelBatch>,
    log_start: Offset,
    next: Offset,
}

impl Model {
    fn live(&self) -> impl Iterator<Item = &ModelBatch> {
        self.batches.iter().filter(move |b| b.next > self.log_start)
    }
}

fn config_strategy() -> impl Strategy<Value = (LogConfig, WriteMode)> {
    (
        prop_oneof![Just(1024u64), Just(3000), Just(20_000)],
        prop_oneof![Just(0u64), Just(100), Just(4096)],
        prop_oneof![Just(0usize), Just(3000), Just(1 << 20)],
        prop_oneof![Just(-1i64), Just(3_600_000)],
        prop_oneof![Just(-1i64), Just(10_000)],
        any::<bool>(),
    )
        .prop_map(
            |(segment_bytes, index_interval_bytes, cache_bytes_max, retention_ms, retention_bytes, direct)| {
                let config = LogConfig {
                    segment_bytes,
                    index_interval_bytes,
                    cache_bytes_max,
                    retention_ms,
                    retention_bytes,
                    ..LogConfig::default()
                };
                (config, if direct { WriteMode::Direct } else { WriteMode::Buffered })
            },
        )
}

async fn check_read(log: &PartitionLog, model: &Model, at_permille: u16, max_bytes: usize, strict: bool) {
    let start = model.log_start;
    let end = model.next;
    let at = Offset(start.0 + (end.0 - start.0) * i64::from(at_permille) / 1000);
    let limit = if strict {
        SizeLimit::Strict
    } else {
        SizeLimit::AtLeastOneBatch
    };
    let r = log.read(at, max_bytes, end, limit).await.expect("read in range");
    let bytes = r.to_vec().await.expect("bytes");
    assert_eq!(bytes.len() as u64, r.bytes);
    let got = split_batches(&bytes);
    let expected: Vec<&ModelBatch> = model.live().filter(|b| b.next > at).collect();
    assert!(got.len() <= expected.len());
    for (g, e) in got.iter().zip(&expected) {
        assert_eq!(g, &e.bytes, "batch at {} differs", e.base);
    }
    if !got.is_empty() {
        assert!(
            bytes.len() <= max_bytes || (!strict && got.len() == 1),
            "read over its limit"
        );
        assert_eq!(r.first_offset, expected[0].base);
        assert_eq!(r.next_offset, expected[got.len() - 1].next);
    } else if let Some(first) = expected.first() {
        assert!(
            strict && first.bytes.len() > max_bytes,
            "empty read although {} fits",
            first.base
        );
    }
    // Whole batches only, and as many as fit — a read from disk stops at the
    // end of its segment, as in Kafka.
    if let Some(following) = expected.get(got.len()) {
        let at_segment_start = log.segment_bases().contains(&following.base);
        assert!(
            bytes.len() + following.bytes.len() > max_bytes || at_segment_start,
            "read stopped early at {}",
            following.base
        );
    }
}

async fn check_all(log: &PartitionLog, model: &Model) {
    assert_eq!(log.log_end_offset(), model.next);
    assert_eq!(log.log_start_offset(), model.log_start);
    let got = read_all(log, model.log_start, 5000).await;
    let expected: Vec<Vec<u8>> = model.live().map(|b| b.bytes.clone()).collect();
    assert_eq!(got.len(), expected.len(), "batch count");
    assert!(got == expected, "log content differs from the model");
    if model.log_start.0 > 0 {
        let below = log
            .read(Offset(model.log_start.0 - 1), 100, model.next, SizeLimit::Strict)
            .await;
        assert!(matches!(below, Err(EngineError::OffsetOutOfRange { .. })));
    }
}

fn run_case(config: LogConfig, mode: WriteMode, ops: Vec<Op>) {
    if std::env::var("FERRITE_TRACE_CASES").is_ok() {
        eprintln!("CASE {mode:?} {config:?} {ops:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    run(|| async {
        let clock = Rc::new(ManualClock::new(ferrite_engine::TimestampMs(1_700_000_000_000)));
        let dyn_clock: Rc<dyn Clock> = clock.clone();
        let open = || PartitionLog::open(params(dir.path(), config.clone(), mode, dyn_clock.clone()));
        let mut log = open().await.unwrap();
        let mut model = Model {
            batches: Vec::new(),
            log_start: Offset(0),
            next: Offset(0),
        };
        let mut fill = 0u8;
        for op in ops {
            match op {
                Op::Append {
                    batches,
                    records,
                    value_len,
                } => {
                    let mut set = bytes::BytesMut::new();
                    let mut expected = Vec::new();
                    let mut next = model.next;
                    for _ in 0..batches {
                        fill = fill.wrapping_add(1);
                        let b = producer_batch(records, value_len, clock.now_ms().0, fill);
                        let mut stamped = b.to_vec();
                        stamp(&mut stamped, next, LeaderEpoch(3));
                        let info = validate(&stamped, 1 << 20, Validation::Producer).unwrap();
                        expected.push(ModelBatch {
                            base: next,
                            next: info.next_offset(),
                            bytes: stamped,
                        });
                        next = info.next_offset();
                        set.extend_from_slice(&b);
                    }
                    let info = log.append(set, LEADER).await.unwrap();
                    assert_eq!(info.first_offset, model.next);
                    assert_eq!(info.next_offset, next);
                    model.batches.extend(expected);
                    model.next = next;
                }
                Op::AdvanceClockMs(ms) => clock.advance_ms(ms),
                Op::Retention => {
                    let before_size = log.size_bytes();
                    let outcome = log.apply_retention().await.unwrap();
                    assert!(outcome.log_start >= model.log_start);
                    assert!(
                        outcome.log_start == model.next || model.batches.iter().any(|b| b.base == outcome.log_start),
                        "log start {} is not a batch boundary",
                        outcome.log_start
                    );
                    if config.retention_bytes >= 0 && config.retention_ms < 0 {
                        assert!(log.size_bytes() >= (config.retention_bytes as u64).min(before_size));
                    }
                    model.log_start = outcome.log_start;
                }
                Op::Truncate { at_permille } => {
                    let span = model.next.0 - model.log_start.0;
                    let at = Offset(model.log_start.0 + span * i64::from(at_permille) / 1000);
                    let end = log.truncate_to(at).await.unwrap();
                    let keep = model.batches.iter().take_while(|b| b.next <= at).count();
                    model.batches.truncate(keep);
                    model.next = model
                        .batches
                        .last()
                        .map(|b| b.next)
                        .unwrap_or(Offset(0))
                        .max(model.log_start);
                    assert_eq!(end, model.next);
                }
                Op::Flush => {
                    assert_eq!(log.flush().await.unwrap(), model.next);
                }
                Op::RestartClean => {
                    log.close().await.unwrap();
                    drop(log);
                    log = open().await.unwrap();
                }
                Op::RestartUnclean => {
                    drop(log);
                    log = open().await.unwrap();
                }
                Op::Read {
                    at_permille,
                    max_bytes,
                    strict,
                } => {
                    check_read(&log, &model, at_permille, max_bytes, strict).await;
                }
            }
            assert_eq!(log.log_end_offset(), model.next);
        }
        check_all(&log, &model).await;
        log.close().await.unwrap();
        drop(log);
        let log = open().await.unwrap();
        check_all(&log, &model).await;
        log.close().await.unwrap();
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn log_returns_exactly_what_was_appended((config, mode) in config_strategy(), ops in proptest::collection::vec(op(), 1..60)) {
        run_case(config, mode, ops);
    }
}
