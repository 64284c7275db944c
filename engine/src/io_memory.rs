//! The shard's registered I/O memory and the largest direct write it holds.
//!
//! glommio gives each executor one pool of memory registered with io_uring
//! (`LocalExecutorBuilder::io_memory`, Ferrite's
//! `ferrite.io.memory.bytes.per.shard`). Direct writes and reads take their
//! buffers from it with a buddy allocator, so a buffer occupies the power of
//! two at or above its length; when the pool has no room, glommio falls back
//! to a heap buffer that the kernel pins for every write, which costs speed
//! (measured: 15-25 % at librdkafka's request shape with 4 MiB groups and an
//! 8 MiB pool, `docs/benchmarks.md`). Registered memory is pinned from the
//! start, so the pool is most of an idle broker's resident memory.
//!
//! Rather than size the pool for the largest writes, the writes follow the
//! pool: a segment appender's write group is at most
//! [`group_bytes_max_for`] the shard's pool, an eighth of it rounded down to
//! a power of two (between [`GROUP_BYTES_FLOOR`] and
//! [`crate::segment_appender::WRITE_BYTES_MAX`]), less two blocks for the
//! partial blocks a group's buffer may add at either end. Eight such buffers
//! fit: four partitions of a shard, each with its two groups in flight
//! ([`crate::segment_appender::WRITES_IN_FLIGHT_MAX`]), write from
//! registered memory.
//!
//! What it costs: a follower's fetch of a full `replica.fetch.max.bytes`
//! (1 MiB) of one partition is written as a group just under 1 MiB and a
//! few KiB after it, where one write took it before; and on a device with
//! blocks larger than 4 KiB (up to 64 KiB), a group's buffer can pass its
//! power of two, so fewer fit. Both cost speed only.
//!
//! The limit is per executor thread, as glommio's pool is: the shard runtime
//! sets it when a shard starts ([`set_pool_bytes`]); an executor that never
//! set it (the engine's tests and benches) keeps the full
//! `WRITE_BYTES_MAX`.

use std::cell::Cell;

use crate::segment_appender::WRITE_BYTES_MAX;

/// The smallest write group a small pool leads to.
pub const GROUP_BYTES_FLOOR: usize = 128 << 10;
/// Room left in a group's buffer for a partial block at each end (the
/// largest direct-I/O alignment Ferrite sees is 4 KiB).
pub const GROUP_SLACK_BYTES: usize = 2 * 4096;
/// Write groups the pool is sized to hold at once.
pub const GROUPS_PER_POOL: usize = 8;

const _: () = assert!(GROUP_BYTES_FLOOR.is_power_of_two());
const _: () = assert!(WRITE_BYTES_MAX.is_power_of_two());
const _: () = assert!(GROUP_SLACK_BYTES < GROUP_BYTES_FLOOR);

thread_local! {
    static GROUP_BYTES_MAX: Cell<usize> = const { Cell::new(WRITE_BYTES_MAX) };
}

/// The largest write group for a pool of `pool_bytes`.
pub fn group_bytes_max_for(pool_bytes: usize) -> usize {
    let share = (pool_bytes / GROUPS_PER_POOL).max(1);
    let power = 1usize << (usize::BITS - 1 - share.leading_zeros());
    power.clamp(GROUP_BYTES_FLOOR, WRITE_BYTES_MAX) - GROUP_SLACK_BYTES
}

/// Records this executor's pool size; called once as a shard starts.
pub fn set_pool_bytes(pool_bytes: usize) {
    GROUP_BYTES_MAX.with(|g| g.set(group_bytes_max_for(pool_bytes)));
}

/// The largest write group on this executor.
pub fn group_bytes_max() -> usize {
    GROUP_BYTES_MAX.with(|g| g.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_an_eighth_of_the_pool_in_powers_of_two_less_the_slack() {
        let slack = GROUP_SLACK_BYTES;
        assert_eq!(group_bytes_max_for(8 << 20), (1 << 20) - slack);
        assert_eq!(group_bytes_max_for(12 << 20), (1 << 20) - slack);
        assert_eq!(group_bytes_max_for(16 << 20), (2 << 20) - slack);
        assert_eq!(group_bytes_max_for(32 << 20), (4 << 20) - slack);
        // Bounded on both sides.
        assert_eq!(group_bytes_max_for(1 << 30), WRITE_BYTES_MAX - slack);
        assert_eq!(group_bytes_max_for(1 << 20), GROUP_BYTES_FLOOR - slack);
        assert_eq!(group_bytes_max_for(0), GROUP_BYTES_FLOOR - slack);
    }

    #[test]
    fn eight_groups_with_their_partial_blocks_fit_the_pool() {
        for mib in [2usize, 4, 8, 16, 32, 64] {
            let pool = mib << 20;
            let buffer = group_bytes_max_for(pool) + GROUP_SLACK_BYTES;
            assert!(buffer.is_power_of_two(), "{mib} MiB");
            assert!(buffer * GROUPS_PER_POOL <= pool, "{mib} MiB");
        }
    }

    #[test]
    fn the_limit_is_per_thread_and_defaults_to_the_largest_write() {
        std::thread::spawn(|| {
            assert_eq!(group_bytes_max(), WRITE_BYTES_MAX);
            set_pool_bytes(8 << 20);
            assert_eq!(group_bytes_max(), (1 << 20) - GROUP_SLACK_BYTES);
        })
        .join()
        .unwrap();
        std::thread::spawn(|| assert_eq!(group_bytes_max(), WRITE_BYTES_MAX))
            .join()
            .unwrap();
    }
}
