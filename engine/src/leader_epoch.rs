//! The leader-epoch cache (Kafka's `LeaderEpochFileCache`, KIP-101 and
//! KIP-279) and its file, `<topic>-<partition>/leader-epoch-checkpoint`.
//!
//! The cache maps each leader epoch that wrote to the log to the first offset
//! it wrote: `(epoch, start_offset)` pairs, strictly increasing in both
//! columns. A follower that comes back asks its leader for the end of its own
//! latest epoch (OffsetForLeaderEpoch, [`LeaderEpochCache::end_offset_for`])
//! and truncates to it, instead of to its high watermark, so that neither
//! acknowledged data is lost nor diverged data kept.
//!
//! # Layout of `leader-epoch-checkpoint`
//!
//! Kafka's own text format, byte for byte, so that an operator who knows
//! Kafka can read (and compare) it. ASCII decimal numbers (written without
//! sign or padding; a sign is refused on reading), each line ended by `\n`:
//!
//! ```text
//! line  content                 example
//!    1  version                 0
//!    2  number of entries N     3
//!  3..  <epoch> <start_offset>  1 0
//!       (N lines, one space     2 10
//!        between the fields)    4 20
//! ```
//!
//! Entries are in increasing order of epoch and of start offset (both
//! strictly); epochs and offsets are non-negative. The reader accepts a last
//! line without its `\n` (a hand-edited file) but nothing else: a version
//! other than 0, a count that disagrees with the lines, a field that is not
//! a decimal number, a line with other than two fields, more than
//! [`ENTRIES_MAX`] entries, or entries out of order are refused with
//! [`EngineError::BadLeaderEpochFile`] naming the file. The size is checked
//! against [`FILE_BYTES_MAX`] before anything is read.
//!
//! Why text and why whole: the file holds one line per leader change, so it
//! is small, and it changes rarely (a new epoch, a truncation, retention).
//! Rewriting it whole keeps the format trivial and the update atomic: it is
//! written to `leader-epoch-checkpoint.tmp`, fdatasync'd, renamed over
//! `leader-epoch-checkpoint`, and the directory fsync'd (the same
//! replacement as the partition checkpoint, [`crate::checkpoint`]). There is
//! no checksum, as in Kafka; the cache is derived data — every batch header
//! carries its epoch — so a file that does not parse is rebuilt from the
//! segments when the log opens, and a missing file on a log that holds data
//! (a directory from before this file existed) is rebuilt the same way.
//!
//! The log keeps the file ahead of its recovery point: an append that starts
//! an epoch returns only once the file records it, and a flush writes the
//! file before the recovery point moves. Recovery therefore only has to
//! rebuild the entries of the batches it scans, and to drop entries past the
//! end it recovered.

use std::path::Path;

use crate::checkpoint::{self, ReplaceOps};
use crate::error::{EngineError, Result};
use crate::types::{LeaderEpoch, Offset};

pub const FILE_NAME: &str = "leader-epoch-checkpoint";
const TMP_NAME: &str = "leader-epoch-checkpoint.tmp";
/// The only version Kafka has written.
pub const VERSION: u32 = 0;
/// Most entries the cache holds and a file may claim. One entry per leader
/// change; a partition reaching this has had a million elections. Past it,
/// `assign` drops the oldest entry, so the file never exceeds the bound.
pub const ENTRIES_MAX: usize = 1_000_000;
/// Longest line accepted in the budget: an entry is at most 10 + 1 + 19 + 1
/// = 31 bytes (largest epoch, space, largest offset, newline).
pub const LINE_BYTES_MAX: u64 = 40;
/// Largest file read: the two header lines and `ENTRIES_MAX` entries.
pub const FILE_BYTES_MAX: u64 = (ENTRIES_MAX as u64 + 2) * LINE_BYTES_MAX;

/// `epoch` started (its leader wrote its first batch) at `start_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: LeaderEpoch,
    pub start_offset: Offset,
}

/// The epochs of a log and where each started.
///
/// Invariants: epochs and start offsets are non-negative, strictly
/// increasing in both, and there are at most [`ENTRIES_MAX`] entries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    pub fn new() -> Self {
        LeaderEpochCache::default()
    }

    /// A cache holding `entries`, refused unless they keep the invariants.
    pub fn from_entries(entries: Vec<EpochEntry>) -> std::result::Result<Self, String> {
        if entries.len() > ENTRIES_MAX {
            return Err(format!(
                "{} entries, more than the {ENTRIES_MAX} allowed",
                entries.len()
            ));
        }
        for (i, e) in entries.iter().enumerate() {
            if e.epoch.0 < 0 {
                return Err(format!("entry {i}: negative epoch {}", e.epoch));
            }
            if e.start_offset.0 < 0 {
                return Err(format!("entry {i}: negative start offset {}", e.start_offset));
            }
        }
        for (i, w) in entries.windows(2).enumerate() {
            if w[1].epoch <= w[0].epoch {
                return Err(format!(
                    "entry {}: epoch {} does not increase (after {})",
                    i + 1,
                    w[1].epoch,
                    w[0].epoch
                ));
            }
            if w[1].start_offset <= w[0].start_offset {
                return Err(format!(
                    "entry {}: start offset {} does not increase (after {})",
                    i + 1,
                    w[1].start_offset,
                    w[0].start_offset
                ));
            }
        }
        Ok(LeaderEpochCache { entries })
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.latest().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset`. Returns whether
    /// anything changed.
    ///
    /// - `epoch < 0` ([`LeaderEpoch::NONE`], batches of old clients): ignored.
    /// - `epoch` equal to the latest: no change, the earlier start stays.
    /// - `epoch` below the latest: ignored (a stale leader or a replica
    ///   batch from before the latest epoch; the caller may warn).
    /// - `epoch` above the latest: entries starting at or after
    ///   `start_offset` are removed first (their epochs wrote nothing that
    ///   is still in the log), then the entry is appended.
    pub fn assign(&mut self, epoch: LeaderEpoch, start_offset: Offset) -> bool {
        if epoch.0 < 0 {
            return false;
        }
        if self.latest_epoch().is_some_and(|latest| epoch <= latest) {
            return false;
        }
        assert!(
            start_offset.0 >= 0,
            "epoch {epoch} starts at negative offset {start_offset}"
        );
        let keep = self.entries.partition_point(|e| e.start_offset < start_offset);
        self.entries.truncate(keep);
        if self.entries.len() == ENTRIES_MAX {
            self.entries.remove(0);
        }
        self.entries.push(EpochEntry { epoch, start_offset });
        self.check_tail();
        true
    }

    /// Kafka's `endOffsetFor` (OffsetForLeaderEpoch): the largest epoch at
    /// or below `requested` and the offset where the epoch after it starts,
    /// i.e. the end of `requested` in this log. `None` is Kafka's
    /// "undefined": `requested` is [`LeaderEpoch::NONE`], above the latest
    /// epoch, or the cache is empty.
    ///
    /// - `requested` is the latest epoch: `(latest, log_end)`;
    /// - otherwise, with `higher` the first entry above `requested` and
    ///   `floor` the last at or below it: `(floor.epoch, higher.start)`, or
    ///   `(requested, higher.start)` when there is no floor (`requested` is
    ///   older than the cache).
    pub fn end_offset_for(&self, requested: LeaderEpoch, log_end: Offset) -> Option<(LeaderEpoch, Offset)> {
        if requested.0 < 0 {
            return None;
        }
        let latest = self.latest()?;
        if requested == latest.epoch {
            return Some((latest.epoch, log_end));
        }
        if requested > latest.epoch {
            return None;
        }
        let higher_at = self.entries.partition_point(|e| e.epoch <= requested);
        let higher = self.entries[higher_at];
        match higher_at.checked_sub(1) {
            None => Some((requested, higher.start_offset)),
            Some(floor_at) => Some((self.entries[floor_at].epoch, higher.start_offset)),
        }
    }

    /// The log end was cut to `end`: removes the entries that start at or
    /// after it. Returns whether anything changed.
    pub fn truncate_from_end(&mut self, end: Offset) -> bool {
        let keep = self.entries.partition_point(|e| e.start_offset < end);
        if keep == self.entries.len() {
            return false;
        }
        self.entries.truncate(keep);
        self.check_tail();
        true
    }

    /// The log start moved up to `start` (retention): drops the entries
    /// wholly below it, and the last entry starting at or below `start` now
    /// starts at `start`. Returns whether anything changed.
    pub fn truncate_from_start(&mut self, start: Offset) -> bool {
        let at_or_below = self.entries.partition_point(|e| e.start_offset <= start);
        let Some(last_below) = at_or_below.checked_sub(1) else {
            return false;
        };
        let moved = self.entries[last_below].start_offset != start;
        if last_below == 0 && !moved {
            return false;
        }
        self.entries.drain(..last_below);
        self.entries[0].start_offset = start;
        self.check_head();
        true
    }

    /// Removes every entry. Returns whether there were any.
    pub fn clear(&mut self) -> bool {
        let changed = !self.entries.is_empty();
        self.entries.clear();
        changed
    }

    /// The invariants around the last entry (the only one `assign` and
    /// `truncate_from_end` can break).
    fn check_tail(&self) {
        assert!(
            self.entries.len() <= ENTRIES_MAX,
            "{} epoch entries",
            self.entries.len()
        );
        let n = self.entries.len();
        if let Some(last) = self.entries.last() {
            assert!(last.epoch.0 >= 0, "negative epoch {:?}", last);
            assert!(last.start_offset.0 >= 0, "negative start {:?}", last);
        }
        if n >= 2 {
            let (a, b) = (self.entries[n - 2], self.entries[n - 1]);
            assert!(a.epoch < b.epoch, "epochs not increasing: {a:?} then {b:?}");
            assert!(
                a.start_offset < b.start_offset,
                "start offsets not increasing: {a:?} then {b:?}"
            );
        }
    }

    /// The invariants around the first entry (the one `truncate_from_start`
    /// moves).
    fn check_head(&self) {
        if let Some(first) = self.entries.first() {
            assert!(first.start_offset.0 >= 0, "negative start {:?}", first);
        }
        if self.entries.len() >= 2 {
            let (a, b) = (self.entries[0], self.entries[1]);
            assert!(a.epoch < b.epoch, "epochs not increasing: {a:?} then {b:?}");
            assert!(
                a.start_offset < b.start_offset,
                "start offsets not increasing: {a:?} then {b:?}"
            );
        }
    }

    /// The file's bytes (see the module documentation).
    pub fn encode(&self) -> Vec<u8> {
        use std::fmt::Write;
        let mut out = String::with_capacity(16 + self.entries.len() * 16);
        // Writing to a String cannot fail.
        let _ = write!(out, "{VERSION}\n{}\n", self.entries.len());
        for e in &self.entries {
            let _ = writeln!(out, "{} {}", e.epoch.0, e.start_offset.0);
        }
        out.into_bytes()
    }

    /// Parses the file's bytes; the error says what is wrong, and where.
    pub fn decode(bytes: &[u8]) -> std::result::Result<LeaderEpochCache, String> {
        if bytes.len() as u64 > FILE_BYTES_MAX {
            return Err(format!("{} bytes, more than the {FILE_BYTES_MAX} allowed", bytes.len()));
        }
        let text = std::str::from_utf8(bytes).map_err(|e| format!("not text: {e}"))?;
        let body = text.strip_suffix('\n').unwrap_or(text);
        let mut lines = body.split('\n');
        let version = lines.next().unwrap_or("");
        let version: u32 = number(version).map_err(|e| format!("line 1 (version): {e}"))?;
        if version != VERSION {
            return Err(format!("line 1: unknown version {version} (expected {VERSION})"));
        }
        let count = lines
            .next()
            .ok_or_else(|| "line 2 (entry count) is missing".to_string())?;
        let count: usize = number(count).map_err(|e| format!("line 2 (entry count): {e}"))?;
        if count > ENTRIES_MAX {
            return Err(format!("line 2: {count} entries, more than the {ENTRIES_MAX} allowed"));
        }
        let mut entries = Vec::with_capacity(count);
        for (i, line) in lines.enumerate() {
            let line_no = i + 3;
            if entries.len() == count {
                return Err(format!("line {line_no}: more entries than the {count} announced"));
            }
            let mut fields = line.split(' ');
            let (Some(epoch), Some(start), None) = (fields.next(), fields.next(), fields.next()) else {
                return Err(format!(
                    "line {line_no}: expected \"<epoch> <start_offset>\", found {line:?}"
                ));
            };
            let epoch: i32 = number(epoch).map_err(|e| format!("line {line_no} (epoch): {e}"))?;
            let start: i64 = number(start).map_err(|e| format!("line {line_no} (start offset): {e}"))?;
            entries.push(EpochEntry {
                epoch: LeaderEpoch(epoch),
                start_offset: Offset(start),
            });
        }
        if entries.len() != count {
            return Err(format!("{count} entries announced, {} found", entries.len()));
        }
        LeaderEpochCache::from_entries(entries)
    }

    /// Reads `dir/leader-epoch-checkpoint`; `None` when there is none.
    pub async fn load(dir: &Path) -> Result<Option<LeaderEpochCache>> {
        let path = dir.join(FILE_NAME);
        let bytes = match crate::index::read_whole(&path, FILE_BYTES_MAX).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Ok(None),
            Err(EngineError::BadFile { path, reason }) => return Err(EngineError::BadLeaderEpochFile { path, reason }),
            Err(e) => return Err(e),
        };
        LeaderEpochCache::decode(&bytes)
            .map(Some)
            .map_err(|reason| EngineError::BadLeaderEpochFile { path, reason })
    }

    /// Replaces `dir/leader-epoch-checkpoint` atomically and durably.
    pub async fn store(&self, dir: &Path) -> Result<()> {
        checkpoint::replace_file(
            dir,
            FILE_NAME,
            TMP_NAME,
            &self.encode(),
            &ReplaceOps {
                create: "create leader-epoch checkpoint",
                fdatasync: "fdatasync leader-epoch checkpoint",
                close: "close leader-epoch checkpoint",
            },
        )
        .await
    }
}

/// A non-negative decimal number: ASCII digits only (no sign, no spaces).
fn number<T: std::str::FromStr>(field: &str) -> std::result::Result<T, String> {
    if field.is_empty() || !field.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{field:?} is not a decimal number"));
    }
    field.parse().map_err(|_| format!("{field} is out of range"))
}

/// A log's OffsetForLeaderEpoch answers, from its cache.
impl crate::log::PartitionLog {
    /// Kafka's OffsetForLeaderEpoch answer for this log: the largest epoch
    /// at or below `requested` and the end offset of `requested` (the log
    /// end offset for the latest epoch). `None` for "undefined" (see
    /// [`LeaderEpochCache::end_offset_for`]).
    pub fn end_offset_for_epoch(&self, requested: LeaderEpoch) -> Option<(LeaderEpoch, Offset)> {
        self.epochs.borrow().end_offset_for(requested, self.log_end_offset())
    }

    /// [`Self::end_offset_for_epoch`] with the latest epoch ending at
    /// `latest_end` (a leader's appends under way included).
    pub fn end_offset_for_epoch_ending(
        &self,
        requested: LeaderEpoch,
        latest_end: Offset,
    ) -> Option<(LeaderEpoch, Offset)> {
        self.epochs.borrow().end_offset_for(requested, latest_end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn e(epoch: i32, start: i64) -> EpochEntry {
        EpochEntry {
            epoch: LeaderEpoch(epoch),
            start_offset: Offset(start),
        }
    }

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
        LeaderEpochCache::from_entries(entries.iter().map(|&(a, b)| e(a, b)).collect()).expect("valid entries")
    }

    /// Entries as `(epoch, start_offset)` literals.
    type Pairs = &'static [(i32, i64)];

    fn pairs(c: &LeaderEpochCache) -> Vec<(i32, i64)> {
        c.entries().iter().map(|e| (e.epoch.0, e.start_offset.0)).collect()
    }

    #[test]
    fn assign_table() {
        // (initial, epoch, start, changed, after)
        let cases: &[(Pairs, i32, i64, bool, Pairs)] = &[
            (&[], 1, 0, true, &[(1, 0)]),
            (&[], -1, 0, false, &[]),
            (&[(1, 0)], -1, 5, false, &[(1, 0)]),
            // The same epoch keeps its earlier start, whichever start comes.
            (&[(1, 0)], 1, 5, false, &[(1, 0)]),
            (&[(1, 5)], 1, 2, false, &[(1, 5)]),
            // An older epoch is ignored.
            (&[(1, 0), (3, 10)], 2, 20, false, &[(1, 0), (3, 10)]),
            (&[(1, 0), (3, 10)], 2, 5, false, &[(1, 0), (3, 10)]),
            // A newer epoch appends...
            (&[(1, 0), (3, 10)], 4, 20, true, &[(1, 0), (3, 10), (4, 20)]),
            // ...after removing entries that start at or after it.
            (&[(1, 0), (3, 10)], 4, 10, true, &[(1, 0), (4, 10)]),
            (&[(1, 0), (3, 10)], 4, 5, true, &[(1, 0), (4, 5)]),
            (&[(1, 0), (3, 10)], 4, 0, true, &[(4, 0)]),
        ];
        for (initial, epoch, start, changed, after) in cases {
            let mut c = cache(initial);
            let got = c.assign(LeaderEpoch(*epoch), Offset(*start));
            assert_eq!(
                (got, pairs(&c).as_slice()),
                (*changed, *after),
                "{initial:?} assign({epoch}, {start})"
            );
        }
    }

    #[test]
    fn end_offset_for_follows_kafka() {
        let c = cache(&[(1, 0), (2, 10), (4, 20)]);
        let leo = Offset(30);
        let end = |epoch: i32| c.end_offset_for(LeaderEpoch(epoch), leo).map(|(e, o)| (e.0, o.0));
        assert_eq!(end(2), Some((2, 20)));
        assert_eq!(
            end(3),
            Some((2, 20)),
            "an epoch with no entry ends where the next starts"
        );
        assert_eq!(
            end(0),
            Some((0, 0)),
            "older than the cache: the requested epoch, first start"
        );
        assert_eq!(end(1), Some((1, 10)));
        assert_eq!(end(4), Some((4, 30)), "the latest epoch ends at the log end");
        assert_eq!(end(5), None, "above the latest: undefined");
        assert_eq!(end(-1), None, "NONE: undefined");
        assert_eq!(LeaderEpochCache::new().end_offset_for(LeaderEpoch(0), leo), None);
        let late = cache(&[(3, 100)]);
        assert_eq!(
            late.end_offset_for(LeaderEpoch(1), leo),
            Some((LeaderEpoch(1), Offset(100)))
        );
    }

    #[test]
    fn truncate_from_end_table() {
        let cases: &[(i64, bool, Pairs)] = &[
            (31, false, &[(1, 0), (2, 10), (4, 20)]),
            (21, false, &[(1, 0), (2, 10), (4, 20)]),
            (20, true, &[(1, 0), (2, 10)]),
            (11, true, &[(1, 0), (2, 10)]),
            (10, true, &[(1, 0)]),
            (0, true, &[]),
        ];
        for (end, changed, after) in cases {
            let mut c = cache(&[(1, 0), (2, 10), (4, 20)]);
            assert_eq!(c.truncate_from_end(Offset(*end)), *changed, "end {end}");
            assert_eq!(pairs(&c), *after, "end {end}");
        }
        assert!(!LeaderEpochCache::new().truncate_from_end(Offset(0)));
    }

    #[test]
    fn truncate_from_start_table() {
        let cases: &[(i64, bool, Pairs)] = &[
            (0, false, &[(1, 0), (2, 10), (4, 20)]),
            (5, true, &[(1, 5), (2, 10), (4, 20)]),
            (10, true, &[(2, 10), (4, 20)]),
            (15, true, &[(2, 15), (4, 20)]),
            (20, true, &[(4, 20)]),
            (25, true, &[(4, 25)]),
        ];
        for (start, changed, after) in cases {
            let mut c = cache(&[(1, 0), (2, 10), (4, 20)]);
            assert_eq!(c.truncate_from_start(Offset(*start)), *changed, "start {start}");
            assert_eq!(pairs(&c), *after, "start {start}");
        }
        // A start below the first entry changes nothing.
        let mut c = cache(&[(1, 5), (2, 10)]);
        assert!(!c.truncate_from_start(Offset(3)));
        assert_eq!(pairs(&c), vec![(1, 5), (2, 10)]);
        assert!(!LeaderEpochCache::new().truncate_from_start(Offset(7)));
        let mut c = cache(&[(1, 5)]);
        assert!(c.clear());
        assert!(!c.clear());
    }

    #[test]
    fn from_entries_checks_the_invariants() {
        assert!(LeaderEpochCache::from_entries(vec![e(1, 0), e(1, 5)]).is_err());
        assert!(LeaderEpochCache::from_entries(vec![e(2, 0), e(1, 5)]).is_err());
        assert!(LeaderEpochCache::from_entries(vec![e(1, 5), e(2, 5)]).is_err());
        assert!(LeaderEpochCache::from_entries(vec![e(1, 5), e(2, 4)]).is_err());
        assert!(LeaderEpochCache::from_entries(vec![e(-1, 0)]).is_err());
        assert!(LeaderEpochCache::from_entries(vec![e(0, -1)]).is_err());
        assert!(LeaderEpochCache::from_entries(vec![e(0, 0), e(7, 1)]).is_ok());
    }

    #[test]
    fn file_format_is_kafkas() {
        let c = cache(&[(1, 0), (2, 10), (4, 20)]);
        assert_eq!(c.encode(), b"0\n3\n1 0\n2 10\n4 20\n");
        assert_eq!(LeaderEpochCache::new().encode(), b"0\n0\n");
        assert_eq!(LeaderEpochCache::decode(&c.encode()), Ok(c.clone()));
        assert_eq!(
            LeaderEpochCache::decode(b"0\n3\n1 0\n2 10\n4 20"),
            Ok(c),
            "no final newline"
        );
        assert_eq!(LeaderEpochCache::decode(b"0\n0\n"), Ok(LeaderEpochCache::new()));
        let big = cache(&[(i32::MAX - 1, 0), (i32::MAX, i64::MAX)]);
        let bytes = big.encode();
        assert!(bytes.len() as u64 <= 2 * LINE_BYTES_MAX + 4);
        assert_eq!(LeaderEpochCache::decode(&bytes), Ok(big));
    }

    #[test]
    fn malformed_files_are_refused() {
        let bad: &[&[u8]] = &[
            b"",
            b"\n",
            b"1\n0\n",
            b"0\n",
            b"0\n1\n",
            b"0\n2\n1 0\n",
            b"0\n1\n1 0\n2 10\n",
            b"0\n1\n1 x\n",
            b"0\n1\nx 0\n",
            b"0\n1\n1  0\n",
            b"0\n1\n1\t0\n",
            b"0\n1\n1 0 7\n",
            b"0\n1\n1\n",
            b"0\n1\n-1 0\n",
            b"0\n1\n+1 0\n",
            b"0\n1\n1 -5\n",
            b"0\n1\n1 99999999999999999999\n",
            b"0\n1\n4294967296 0\n",
            b"0\n2\n1 10\n2 5\n",
            b"0\n2\n2 0\n1 5\n",
            b"0\n2\n1 0\n1 5\n",
            b"0\n1\n1 0\n\n",
            b"0\r\n1\r\n1 0\r\n",
            b"0\n1000001\n",
            b"0\n\xff\n",
        ];
        for b in bad {
            assert!(
                LeaderEpochCache::decode(b).is_err(),
                "accepted {:?}",
                String::from_utf8_lossy(b)
            );
        }
    }

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .make()
            .expect("executor")
            .run(f)
    }

    #[test]
    fn file_round_trip_and_errors_name_the_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        run(async {
            assert_eq!(LeaderEpochCache::load(dir.path()).await.expect("load"), None);
            let c = cache(&[(1, 0), (2, 10), (4, 20)]);
            c.store(dir.path()).await.expect("store");
            assert!(!dir.path().join(TMP_NAME).exists());
            let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).expect("read");
            assert_eq!(text, "0\n3\n1 0\n2 10\n4 20\n");
            assert_eq!(LeaderEpochCache::load(dir.path()).await.expect("load"), Some(c));
            let path = dir.path().join(FILE_NAME);
            std::fs::write(&path, "0\n2\n1 0\n").expect("write");
            match LeaderEpochCache::load(dir.path()).await {
                Err(EngineError::BadLeaderEpochFile { path: p, reason }) => {
                    assert_eq!(p, path);
                    assert!(reason.contains("2 entries announced"), "{reason}");
                }
                other => panic!("accepted a wrong count: {other:?}"),
            }
            // Size is checked before reading.
            let f = std::fs::File::create(&path).expect("create");
            f.set_len(FILE_BYTES_MAX + 1).expect("set_len");
            match LeaderEpochCache::load(dir.path()).await {
                Err(EngineError::BadLeaderEpochFile { path: p, reason }) => {
                    assert_eq!(p, path);
                    assert!(reason.contains("bytes"), "{reason}");
                }
                other => panic!("accepted a huge file: {other:?}"),
            }
        });
    }

    #[derive(Clone, Debug)]
    enum Op {
        Assign(i32, i64),
        TruncateEnd(i64),
        TruncateStart(i64),
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (-1i32..12, 0i64..60).prop_map(|(e, o)| Op::Assign(e, o)),
            2 => (0i64..60).prop_map(Op::TruncateEnd),
            2 => (0i64..60).prop_map(Op::TruncateStart),
            1 => Just(Op::Clear),
        ]
    }

    /// The model: a map from epoch to start offset, updated by brute force.
    #[derive(Default)]
    struct Model(std::collections::BTreeMap<i32, i64>);

    impl Model {
        fn apply(&mut self, op: &Op) -> bool {
            let before = self.0.clone();
            match *op {
                Op::Assign(epoch, start) => {
                    let latest = self.0.keys().next_back().copied();
                    if epoch >= 0 && latest.is_none_or(|l| epoch > l) {
                        self.0.retain(|_, s| *s < start);
                        self.0.insert(epoch, start);
                    }
                }
                Op::TruncateEnd(end) => self.0.retain(|_, s| *s < end),
                Op::TruncateStart(start) => {
                    let floor = self.0.iter().filter(|(_, s)| **s <= start).map(|(e, _)| *e).max();
                    if let Some(floor) = floor {
                        self.0.retain(|e, _| *e >= floor);
                        self.0.insert(floor, start);
                    }
                }
                Op::Clear => self.0.clear(),
            }
            self.0 != before
        }

        fn end_offset_for(&self, requested: i32, log_end: i64) -> Option<(i32, i64)> {
            let latest = *self.0.keys().next_back()?;
            if requested < 0 || requested > latest {
                return None;
            }
            if requested == latest {
                return Some((latest, log_end));
            }
            let (_, higher_start) = self.0.iter().find(|(e, _)| **e > requested)?;
            let floor = self.0.keys().filter(|e| **e <= requested).max();
            Some((floor.copied().unwrap_or(requested), *higher_start))
        }
    }

    proptest! {
        #[test]
        fn random_ops_keep_the_invariants_and_match_the_model(ops in proptest::collection::vec(op(), 0..60)) {
            let mut c = LeaderEpochCache::new();
            let mut m = Model::default();
            for op in &ops {
                let changed = match *op {
                    Op::Assign(epoch, start) => c.assign(LeaderEpoch(epoch), Offset(start)),
                    Op::TruncateEnd(end) => c.truncate_from_end(Offset(end)),
                    Op::TruncateStart(start) => c.truncate_from_start(Offset(start)),
                    Op::Clear => c.clear(),
                };
                let model_changed = m.apply(op);
                prop_assert_eq!(changed, model_changed, "{:?}", op);
                let expected: Vec<(i32, i64)> = m.0.iter().map(|(e, s)| (*e, *s)).collect();
                prop_assert_eq!(pairs(&c), expected, "{:?}", op);
                prop_assert!(LeaderEpochCache::from_entries(c.entries().to_vec()).is_ok());
                for requested in -1..14 {
                    let got = c.end_offset_for(LeaderEpoch(requested), Offset(100)).map(|(e, o)| (e.0, o.0));
                    prop_assert_eq!(got, m.end_offset_for(requested, 100), "requested {}", requested);
                }
                prop_assert_eq!(LeaderEpochCache::decode(&c.encode()), Ok(c.clone()));
            }
        }
    }
}
