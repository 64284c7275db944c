//! Wall clocks that step. A run that skews clocks starts every broker with
//! libfaketime preloaded (Debian's `faketime` package), each reading its
//! offset from true time out of a file of its own, which the executor
//! rewrites; a broker rereads it at most [`REREAD_S`] seconds later.
//!
//! Only the wall clock moves (`DONT_FAKE_MONOTONIC`): the fault is a clock
//! stepped by NTP or an operator, or a VM resumed, not a monotonic clock
//! that jumps, which no real host has. What a broker reads off the wall
//! clock — retention by time, `segment.ms` — must keep every acknowledged
//! record; what it measures itself (ISR lag,
//! sessions, `flush.ms`) runs on the monotonic clock and must not notice.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::ChaosError;

/// How often a broker rereads its offset file, in seconds.
pub const REREAD_S: u64 = 1;

/// Where Debian puts the multi-threaded libfaketime.
pub fn library() -> PathBuf {
    let arch = std::env::consts::ARCH;
    PathBuf::from(format!("/usr/lib/{arch}-linux-gnu/faketime/libfaketimeMT.so.1"))
}

/// One broker's offset file.
pub struct FakeClock {
    file: PathBuf,
}

impl FakeClock {
    /// Creates `file` at true time, readable by the broker's user.
    pub fn create(file: &Path) -> Result<FakeClock, ChaosError> {
        let lib = library();
        if !lib.exists() {
            return Err(ChaosError::Cluster(format!(
                "skewing clocks needs {} (apt install faketime)",
                lib.display()
            )));
        }
        let clock = FakeClock {
            file: file.to_path_buf(),
        };
        clock.set_offset_s(0)?;
        Ok(clock)
    }

    /// The environment that makes a process read its wall clock through
    /// this file.
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        vec![
            ("LD_PRELOAD", library().into_os_string()),
            ("FAKETIME_TIMESTAMP_FILE", self.file.clone().into_os_string()),
            ("FAKETIME_CACHE_DURATION", REREAD_S.to_string().into()),
            // libfaketime 0.9.10 reads the first name, later ones the second.
            ("DONT_FAKE_MONOTONIC", "1".into()),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
        ]
    }

    /// Sets the wall clock `offset_s` seconds from true time (negative:
    /// behind). Written whole, then renamed, so that a reader never sees
    /// half a line.
    pub fn set_offset_s(&self, offset_s: i64) -> Result<(), ChaosError> {
        let next = self.file.with_extension("next");
        let io = |op| move |source| ChaosError::Io { op, source };
        std::fs::write(&next, format!("{offset_s:+}\n")).map_err(io("write a clock offset"))?;
        let readable = std::os::unix::fs::PermissionsExt::from_mode(0o644);
        std::fs::set_permissions(&next, readable).map_err(io("chmod a clock offset"))?;
        std::fs::rename(&next, &self.file).map_err(io("rename a clock offset"))
    }
}
