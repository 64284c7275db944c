//! The transport's counters, recorded into the process-wide `metrics`
//! recorder that the broker installs (`broker/src/metrics.rs` lists every
//! metric):
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `ferrite_fetch_file_sent_bytes_total` | counter | path — `sendfile`, `direct` or `inline` |
//! | `ferrite_fetch_read_ahead_bytes_total` | counter | outcome — `used` or `dropped` |

use crate::direct_read::SendPath;

thread_local! {
    // Each shard looks its handles up in the registry once.
    static FILE_SENT_SENDFILE: metrics::Counter = metrics::counter!("ferrite_fetch_file_sent_bytes_total", "path" => "sendfile");
    static FILE_SENT_DIRECT: metrics::Counter = metrics::counter!("ferrite_fetch_file_sent_bytes_total", "path" => "direct");
    static FILE_SENT_INLINE: metrics::Counter = metrics::counter!("ferrite_fetch_file_sent_bytes_total", "path" => "inline");
    static READ_AHEAD_USED: metrics::Counter = metrics::counter!("ferrite_fetch_read_ahead_bytes_total", "outcome" => "used");
    static READ_AHEAD_DROPPED: metrics::Counter = metrics::counter!("ferrite_fetch_read_ahead_bytes_total", "outcome" => "dropped");
}

/// File-region bytes of fetch responses sent, by how: `sendfile` from the
/// page cache (on a blocking thread, or inline on the shard), or read with
/// O_DIRECT and sent from memory (`direct_read.rs`).
pub fn file_sent(path: SendPath, bytes: u64) {
    match path {
        SendPath::Sendfile => FILE_SENT_SENDFILE.with(|c| c.increment(bytes)),
        SendPath::Direct => FILE_SENT_DIRECT.with(|c| c.increment(bytes)),
        SendPath::Inline => FILE_SENT_INLINE.with(|c| c.increment(bytes)),
    }
}

/// Bytes read ahead of a fetch that a later fetch sent.
pub fn read_ahead_used(bytes: u64) {
    READ_AHEAD_USED.with(|c| c.increment(bytes));
}

/// Bytes read ahead (or being read) that no fetch took.
pub fn read_ahead_dropped(bytes: u64) {
    READ_AHEAD_DROPPED.with(|c| c.increment(bytes));
}
