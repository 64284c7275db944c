//! The open-loop schedule of a produce run, free of clocks: when each record
//! is meant to be sent, when the request carrying it is due, and each
//! record's latency once the request is acknowledged.
//!
//! At a fixed rate, record `i` of a connection is *intended* at `i /
//! rate` after the start, whatever happened to the records before it. A
//! request carries a contiguous run of records and is due once its last
//! record is intended: a linger (a real client's `linger.ms`) makes the
//! batches smaller, so that a request's records are all intended within
//! it — down to one record a batch, below which a request waits for its
//! last record (nothing is sent before it is meant to exist). A record's
//! latency runs from its intended time to the
//! acknowledgement of its request: a stalled acknowledgement is charged to
//! every record it delayed, and a sender that falls behind is charged for
//! it too (coordinated omission corrected, as wrk2 and the OpenMessaging
//! Benchmark record it). The share of it a record spent waiting for its
//! batch to close (linger) is reported apart.
//!
//! At rate 0 (as fast as possible) there is no schedule: a request's
//! records are intended when it is sent.

use std::time::Duration;

use hdrhistogram::Histogram;

/// A connection's schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Time between two records; `None`: as fast as possible.
    spacing: Option<Duration>,
    /// Longest a request's first record waits for it to be due.
    linger: Option<Duration>,
}

/// One request as planned, times from the start of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Its first record's intended time.
    pub first_intended: Duration,
    /// Between two of its records' intended times.
    pub spacing: Duration,
    pub records: u64,
    /// When it is due to be sent.
    pub due: Duration,
}

impl Schedule {
    /// `records_per_sec` for this connection (0: as fast as possible);
    /// `linger`: `None` waits for whole batches.
    pub fn new(records_per_sec: f64, linger: Option<Duration>) -> Schedule {
        let spacing = (records_per_sec > 0.0).then(|| Duration::from_secs_f64(1.0 / records_per_sec));
        Schedule { spacing, linger }
    }

    pub fn is_paced(&self) -> bool {
        self.spacing.is_some()
    }

    /// Records per batch when a request carries `batches` batches (one
    /// per partition, filling side by side): `batch_records`, or fewer
    /// when the linger closes them before they fill at this rate.
    pub fn batch_records(&self, batch_records: usize, batches: usize) -> usize {
        let (Some(spacing), Some(linger)) = (self.spacing, self.linger) else {
            return batch_records.max(1);
        };
        let within = (linger.as_secs_f64() / spacing.as_secs_f64()).floor() as usize + 1;
        (within / batches.max(1)).clamp(1, batch_records.max(1))
    }

    /// The request carrying records `first .. first + records`; `sent_at`
    /// (from the start) stands in for the schedule when unpaced.
    pub fn plan(&self, first: u64, records: u64, sent_at: Duration) -> Planned {
        assert!(records > 0, "a request carries records");
        let Some(spacing) = self.spacing else {
            return Planned {
                first_intended: sent_at,
                spacing: Duration::ZERO,
                records,
                due: sent_at,
            };
        };
        let first_intended = spacing.mul_f64(first as f64);
        let fill = spacing.mul_f64((records - 1) as f64);
        Planned {
            first_intended,
            spacing,
            records,
            due: first_intended + fill,
        }
    }
}

impl Planned {
    /// Record `j`'s intended time.
    fn intended(&self, j: u64) -> Duration {
        self.first_intended + self.spacing.mul_f64(j as f64)
    }

    /// Records each record's latency (µs), the request acknowledged at
    /// `acked`, into `latency`; returns the time its records waited for it
    /// to be due, summed (the linger's share).
    pub fn record(&self, acked: Duration, latency: &mut Histogram<u64>) -> Duration {
        let mut lingered = Duration::ZERO;
        for j in 0..self.records {
            let intended = self.intended(j);
            let micros = acked.saturating_sub(intended).as_micros().max(1);
            latency.record(u64::try_from(micros).unwrap_or(u64::MAX)).ok();
            lingered += self.due.saturating_sub(intended);
        }
        lingered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram() -> Histogram<u64> {
        Histogram::new_with_bounds(1, 600_000_000, 3).unwrap()
    }

    #[test]
    fn a_request_is_due_when_its_last_record_is_or_a_linger_after_its_first() {
        let s = Schedule::new(1000.0, None);
        let p = s.plan(20, 10, Duration::ZERO);
        assert_eq!(p.first_intended, Duration::from_millis(20));
        assert_eq!(p.due, Duration::from_millis(29), "its tenth record");
        let lingering = Schedule::new(1000.0, Some(Duration::from_millis(4)));
        assert_eq!(
            lingering.batch_records(10, 1),
            5,
            "records intended within 4 ms of the first"
        );
        assert_eq!(lingering.batch_records(10, 2), 2, "two batches fill side by side");
        assert_eq!(lingering.batch_records(10, 9), 1);
        // Never before its last record is intended, linger or not.
        assert_eq!(lingering.plan(20, 10, Duration::ZERO).due, Duration::from_millis(29));
        assert_eq!(lingering.plan(20, 4, Duration::ZERO).due, Duration::from_millis(23));
        assert_eq!(
            Schedule::new(1000.0, Some(Duration::from_secs(1))).batch_records(10, 1),
            10
        );
        let unpaced = Schedule::new(0.0, Some(Duration::from_millis(4)));
        assert!(!unpaced.is_paced());
        assert_eq!(unpaced.batch_records(10, 2), 10);
        let p = unpaced.plan(500, 10, Duration::from_millis(7));
        assert_eq!(
            (p.first_intended, p.due),
            (Duration::from_millis(7), Duration::from_millis(7))
        );
    }

    /// A stalled acknowledgement shows in every record it delayed, each
    /// from its own intended time.
    #[test]
    fn a_stalled_acknowledgement_is_charged_to_every_record_it_delayed() {
        let s = Schedule::new(1000.0, None);
        let p = s.plan(0, 10, Duration::ZERO);
        let mut h = histogram();
        let lingered = p.record(Duration::from_millis(100), &mut h);
        assert_eq!(h.len(), 10);
        assert_eq!(
            h.min(),
            h.lowest_equivalent(91_000),
            "the last record, intended at 9 ms"
        );
        assert_eq!(h.max(), h.highest_equivalent(100_000), "the first, intended at 0");
        // Waiting for the batch to fill: 9 + 8 + ... + 0 ms.
        assert_eq!(lingered, Duration::from_millis(45));
        // Acknowledged at once: the latency is the wait for the batch.
        let mut quick = histogram();
        p.record(Duration::from_millis(9), &mut quick);
        assert_eq!(quick.max(), quick.highest_equivalent(9_000));
        assert_eq!(quick.min(), 1, "the last record waited for nothing");
    }

    /// A sender that falls behind its schedule does not move the intended
    /// times: the delay is in the latency.
    #[test]
    fn falling_behind_the_schedule_is_measured() {
        let s = Schedule::new(100.0, None);
        let p = s.plan(100, 1, Duration::from_secs(5));
        assert_eq!(p.first_intended, Duration::from_secs(1));
        let mut h = histogram();
        p.record(Duration::from_secs(5), &mut h);
        assert!(h.min() >= 3_990_000, "{} µs", h.min());
    }
}
