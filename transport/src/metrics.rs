//! The transport's counters, recorded into the process-wide `metrics`
//! recorder that the broker installs (`broker/src/metrics.rs` lists every
//! metric):
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `ferrite_fetch_file_sent_bytes_total` | counter | path — `sendfile`, `direct`, `inline` or `tls` (read into memory and encrypted) |
//! | `ferrite_fetch_read_ahead_bytes_total` | counter | outcome — `used` or `dropped` |
//! | `ferrite_tls_handshakes_total` | counter | outcome — `ok`, `failed` or `timed_out` |

use crate::direct_read::SendPath;
use crate::tls::Outcome;

thread_local! {
    // Each shard looks its handles up in the registry once.
    static FILE_SENT_SENDFILE: metrics::Counter = metrics::counter!("ferrite_fetch_file_sent_bytes_total", "path" => "sendfile");
    static FILE_SENT_DIRECT: metrics::Counter = metrics::counter!("ferrite_fetch_file_sent_bytes_total", "path" => "direct");
    static FILE_SENT_INLINE: metrics::Counter = metrics::counter!("ferrite_fetch_file_sent_bytes_total", "path" => "inline");
    static FILE_SENT_TLS: metrics::Counter = metrics::counter!("ferrite_fetch_file_sent_bytes_total", "path" => "tls");
    static TLS_OK: metrics::Counter = metrics::counter!("ferrite_tls_handshakes_total", "outcome" => "ok");
    static TLS_FAILED: metrics::Counter = metrics::counter!("ferrite_tls_handshakes_total", "outcome" => "failed");
    static TLS_TIMED_OUT: metrics::Counter = metrics::counter!("ferrite_tls_handshakes_total", "outcome" => "timed_out");
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

/// File-region bytes of fetch responses read into memory and sent through
/// a connection's TLS session.
pub fn file_sent_tls(bytes: u64) {
    FILE_SENT_TLS.with(|c| c.increment(bytes));
}

/// A TLS handshake ended.
pub fn tls_handshake(outcome: Outcome) {
    match outcome {
        Outcome::Ok => TLS_OK.with(|c| c.increment(1)),
        Outcome::Failed => TLS_FAILED.with(|c| c.increment(1)),
        Outcome::TimedOut => TLS_TIMED_OUT.with(|c| c.increment(1)),
    }
}
