//! The producers of a run: each producer has a thread per partition (as a
//! Kafka producer sends each partition's batches on their own, so that one
//! partition without a leader does not stop the others), writing values
//! `client << 40 | partition << 32 | n`, unique across the run, so that a
//! record in the log names the one produce that wrote it.
//!
//! With `acks=all` a producer is idempotent, as Kafka's is by default: it
//! takes a producer id (InitProducerId), numbers its batches, and retries a
//! batch that failed or went unanswered, with the same sequence, for up to
//! [`RETRY_WINDOW`]; the leader must write it once. With `acks=1` or `0` it
//! sends each value once and never retries. Either way a value the log
//! holds twice was doubled by the cluster.

use std::time::{Duration, Instant};

use ferrite_client::codec;
use ferrite_engine::batch;
use ferrite_engine::types::{Offset, ProducerId, TimestampMs};
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::init_producer_id::{self, InitProducerIdRequest, InitProducerIdResponse};

use crate::history::{Op, OpKind, Outcome};
use crate::workload::{Routes, Shared, BACKOFF, REQUEST_TIMEOUT, TOPIC};

const PRODUCE_KEY: i16 = 0;
const INIT_PRODUCER_ID_V: i16 = 1;
/// How long an idempotent producer retries one batch.
pub const RETRY_WINDOW: Duration = Duration::from_secs(20);

/// An idempotent producer's identity and its next sequence on its
/// partition.
struct Idempotence {
    id: ProducerId,
    epoch: i16,
    next_sequence: i32,
}

/// How a produce's error code ends it: codes the broker returns before it
/// appends are `Fail`; any other may have left the record behind.
pub fn produce_outcome(error: i16, base: i64) -> Outcome {
    let certain_failures = [
        ErrorCode::NotLeaderOrFollower,
        ErrorCode::UnknownTopicOrPartition,
        ErrorCode::LeaderNotAvailable,
        ErrorCode::NotEnoughReplicas,
        ErrorCode::OutOfOrderSequenceNumber,
        ErrorCode::InvalidProducerEpoch,
    ];
    if error == 0 {
        Outcome::Ok { offset: Some(base) }
    } else if certain_failures.iter().any(|c| c.code() == error) {
        Outcome::Fail {
            error: format!("error {error}"),
        }
    } else {
        Outcome::Unknown {
            error: format!("error {error}"),
        }
    }
}

/// Errors after which an idempotent producer starts over with a new id.
fn needs_new_id(outcome: &Outcome) -> bool {
    let codes = [
        ErrorCode::OutOfOrderSequenceNumber.code(),
        ErrorCode::InvalidProducerEpoch.code(),
        UNKNOWN_PRODUCER_ID,
    ];
    let error = match outcome {
        Outcome::Fail { error } | Outcome::Unknown { error } => error,
        Outcome::Ok { .. } => return false,
    };
    codes.iter().any(|c| *error == format!("error {c}"))
}

/// Kafka's UNKNOWN_PRODUCER_ID.
const UNKNOWN_PRODUCER_ID: i16 = 59;

/// A producer id from any broker; `None` once stopped.
fn init_producer_id(routes: &mut Routes, shared: &Shared) -> Option<Idempotence> {
    let request = InitProducerIdRequest {
        transactional_id: None,
        transaction_timeout_ms: 60_000,
        producer_id: ProducerId::NONE,
        producer_epoch: -1,
    };
    while !shared.stopped() {
        for addr in shared.bootstrap.clone() {
            let Some(c) = routes.conn(&addr) else { continue };
            let answer = c
                .call(init_producer_id::API_KEY, INIT_PRODUCER_ID_V, |w| {
                    request.encode(w, INIT_PRODUCER_ID_V)
                })
                .and_then(|mut r| Ok(InitProducerIdResponse::decode(&mut r, INIT_PRODUCER_ID_V)?));
            match answer {
                Ok(a) if a.error_code == 0 => {
                    return Some(Idempotence {
                        id: a.producer_id,
                        epoch: a.producer_epoch,
                        next_sequence: 0,
                    })
                }
                Ok(_) => {}
                Err(_) => routes.forget(&addr),
            }
        }
        std::thread::sleep(BACKOFF);
    }
    None
}

/// Produces unique values to `partition` until stopped: one thread of
/// producer `client`.
pub fn produce_loop(shared: Shared, client: u32, partition: i32, acks: i16) {
    let mut routes = Routes::new(shared.clone(), format!("chaos-producer-{client}-{partition}"));
    let idempotent = acks == -1;
    let mut id = if idempotent {
        match init_producer_id(&mut routes, &shared) {
            Some(id) => Some(id),
            None => return,
        }
    } else {
        None
    };
    let mut n: u64 = 0;
    while !shared.stopped() {
        n += 1;
        let value = u64::from(client) << 40 | (partition as u64) << 32 | n;
        let invoked_ms = shared.now_ms();
        let mut records = batch::build_batch(Offset(0), TimestampMs(now_unix_ms()), &[&value.to_be_bytes()]);
        if let Some(i) = &id {
            batch::set_producer(&mut records, i.id, i.epoch, i.next_sequence);
        }
        let outcome = send(&mut routes, &shared, partition, &records, acks, idempotent);
        let start_over = needs_new_id(&outcome);
        let failed = !matches!(outcome, Outcome::Ok { .. });
        if let Some(i) = &mut id {
            // A batch that may have been written used its sequence; one
            // that certainly was not leaves it for the next.
            if !matches!(outcome, Outcome::Fail { .. }) {
                i.next_sequence = i.next_sequence.wrapping_add(1);
            }
        }
        shared.record(Op {
            client,
            kind: OpKind::Produce { partition, value },
            invoked_ms,
            completed_ms: shared.now_ms(),
            outcome,
        });
        if start_over {
            id = init_producer_id(&mut routes, &shared);
        }
        if failed {
            std::thread::sleep(BACKOFF);
        }
    }
}

/// Sends one batch; an idempotent producer retries it (same sequence)
/// within [`RETRY_WINDOW`]. The outcome is `Ok` if an attempt was, else
/// `Unknown` if any attempt may have written it, else `Fail`.
fn send(routes: &mut Routes, shared: &Shared, partition: i32, records: &[u8], acks: i16, retry: bool) -> Outcome {
    let deadline = Instant::now() + RETRY_WINDOW;
    let mut maybe_written: Option<String> = None;
    loop {
        let outcome = produce_once(routes, partition, records, acks);
        let last_error = match &outcome {
            Outcome::Ok { .. } => return outcome,
            Outcome::Unknown { error } => {
                maybe_written = Some(error.clone());
                error.clone()
            }
            Outcome::Fail { error } => error.clone(),
        };
        if !retry || needs_new_id(&outcome) || shared.stopped() || Instant::now() > deadline {
            return match maybe_written {
                Some(error) => Outcome::Unknown { error },
                None => Outcome::Fail { error: last_error },
            };
        }
        std::thread::sleep(BACKOFF);
    }
}

fn produce_once(routes: &mut Routes, partition: i32, records: &[u8], acks: i16) -> Outcome {
    let Some(addr) = routes.leader(partition) else {
        return Outcome::Fail {
            error: "no leader known".into(),
        };
    };
    let Some(c) = routes.conn(&addr) else {
        routes.forget(&addr);
        return Outcome::Fail {
            error: format!("cannot connect to {addr}"),
        };
    };
    let timeout_ms = REQUEST_TIMEOUT.as_millis() as i32 / 2;
    let answer = c
        .call(PRODUCE_KEY, codec::PRODUCE_V, |w| {
            codec::produce(w, acks, timeout_ms, TOPIC, partition, records)
        })
        .and_then(|mut r| Ok(codec::decode_produce(&mut r)?));
    match answer {
        Ok((error, base)) => {
            if error != 0 {
                routes.leaders.remove(&partition);
            }
            produce_outcome(error, base)
        }
        Err(e) => {
            routes.forget(&addr);
            Outcome::Unknown { error: e.to_string() }
        }
    }
}

fn now_unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_before_the_append_fail_the_others_leave_it_unknown() {
        assert_eq!(produce_outcome(0, 4), Outcome::Ok { offset: Some(4) });
        assert!(matches!(produce_outcome(6, -1), Outcome::Fail { .. }));
        assert!(matches!(produce_outcome(19, -1), Outcome::Fail { .. }));
        assert!(matches!(produce_outcome(20, -1), Outcome::Unknown { .. }));
        assert!(matches!(produce_outcome(7, -1), Outcome::Unknown { .. }));
    }

    #[test]
    fn a_sequence_error_starts_an_idempotent_producer_over() {
        assert!(needs_new_id(&produce_outcome(45, -1)));
        assert!(needs_new_id(&produce_outcome(59, -1)));
        assert!(!needs_new_id(&produce_outcome(6, -1)));
        assert!(!needs_new_id(&produce_outcome(0, 3)));
    }
}
