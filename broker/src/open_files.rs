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

#[cfg(test)]
mod tests {
    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        let (soft, hard) = super::raise_to_hard();
        assert!(hard > 0);
        assert_eq!(soft, hard);
    }
}
