//! The process's open-files limit (`RLIMIT_NOFILE`). Every segment a
//! partition has open costs descriptors, so a broker raises its soft limit
//! to the hard one at start, as Kafka's packaging asks operators to, and
//! says both in the log: the limit bounds how many partitions a broker can
//! serve.

/// The soft and hard limits after raising the soft one to the hard one
/// (the limits as found when that fails, which is logged).
pub fn raise_to_hard() -> (u64, u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given, nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        let e = std::io::Error::last_os_error();
        tracing::warn!(error = %e, "reading the open-files limit");
        return (0, 0);
    }
    let found = lim.rlim_cur;
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim = raised;
        } else {
            let e = std::io::Error::last_os_error();
            tracing::warn!(error = %e, soft = found, hard = lim.rlim_max, "raising the open-files limit");
        }
    }
    tracing::info!(
        soft = lim.rlim_cur,
        hard = lim.rlim_max,
        soft_at_start = found,
        "open-files limit"
    );
    (lim.rlim_cur, lim.rlim_max)
}

/// Descriptors kept for everything but segment files: connections,
/// ZooKeeper, index and checkpoint files opened for a moment, descriptors
/// duplicated for fetch responses in flight: a quarter of the limit, at
/// least this many.
pub const RESERVE_MIN: u64 = 1024;
/// Segment files a shard keeps open at the least, whatever the limit.
pub const SEGMENT_FILES_PER_SHARD_MIN: usize = 16;

/// The default of `ferrite.log.open.files.per.shard`: what the open-files
/// limit `soft_limit` leaves after the reserve, shared by `shards`.
pub fn segment_files_per_shard(soft_limit: u64, shards: usize) -> usize {
    let reserve = (soft_limit / 4).max(RESERVE_MIN);
    let for_files = soft_limit.saturating_sub(reserve);
    let per_shard = usize::try_from(for_files / shards.max(1) as u64).unwrap_or(usize::MAX);
    per_shard.max(SEGMENT_FILES_PER_SHARD_MIN)
}

#[cfg(test)]
mod tests {
    #[test]
    fn segment_files_leave_a_reserve_for_connections() {
        use super::segment_files_per_shard as per_shard;
        assert_eq!(per_shard(20_000, 2), 7_500);
        assert_eq!(per_shard(20_000, 1), 15_000);
        // A small limit keeps 1024 for connections.
        assert_eq!(per_shard(2_048, 2), 512);
        // Tiny limits still leave a shard a few files.
        assert_eq!(per_shard(1_024, 4), super::SEGMENT_FILES_PER_SHARD_MIN);
        // "unlimited" (RLIM_INFINITY) does not overflow.
        assert!(per_shard(u64::MAX, 3) > 1 << 40);
    }

    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        let (soft, hard) = super::raise_to_hard();
        assert!(hard > 0);
        assert_eq!(soft, hard);
    }
}
