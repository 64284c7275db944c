//! Log levels changed while the broker runs: Kafka's BROKER_LOGGER resource
//! (`kafka-configs.sh --entity-type broker-loggers`). Each config of the
//! resource is a logger — `root`, or a module path such as
//! `ferrite_engine::log` (a tracing target) — and its value a level (TRACE,
//! DEBUG, INFO, WARN, ERROR; FATAL counts as ERROR, OFF silences). SET
//! gives a logger its level, DELETE gives it back the root's; the root
//! cannot be deleted. Like Kafka, levels are the process's and are not
//! kept across a restart: `FERRITE_LOG` gives them at start.
//!
//! The levels become the filter of the process's tracing subscriber,
//! reloaded through the function `main` installs ([`install`]); without one
//! (a library user), describing and changing levels is refused.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

/// The name of the logger every other one inherits from.
pub const ROOT: &str = "root";

/// The levels Kafka accepts.
const LEVELS: &[&str] = &["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"];

/// The workspace's loggers, listed whether or not they have a level of
/// their own.
const CRATES: &[&str] = &[
    "ferrite_broker",
    "ferrite_controller",
    "ferrite_engine",
    "ferrite_replication",
];

/// Longest logger name accepted.
const NAME_BYTES_MAX: usize = 256;

type Reload = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

struct Levels {
    root: String,
    /// `target=level` directives given at start (`FERRITE_LOG`).
    started: BTreeMap<String, String>,
    /// Levels set while running.
    set: BTreeMap<String, String>,
    reload: Reload,
}

static LEVELS_IN_FORCE: OnceLock<Mutex<Levels>> = OnceLock::new();

/// Why a change was refused: the request (INVALID_REQUEST) or a value
/// (INVALID_CONFIG).
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Request(String),
    Config(String),
}

/// One change to a logger.
pub enum LevelOp {
    Set(String, String),
    Delete(String),
}

/// Takes the directives the process started with (an env-filter string
/// such as `info,ferrite_engine=debug`) and the function that installs a
/// new filter.
pub fn install(started: &str, reload: Reload) {
    let mut root = "INFO".to_string();
    let mut targets = BTreeMap::new();
    for d in started.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        match d.split_once('=') {
            Some((t, l)) => {
                targets.insert(t.to_string(), l.to_ascii_uppercase());
            }
            None => root = d.to_ascii_uppercase(),
        }
    }
    let levels = Levels {
        root,
        started: targets,
        set: BTreeMap::new(),
        reload,
    };
    if LEVELS_IN_FORCE.set(Mutex::new(levels)).is_err() {
        tracing::warn!("log levels installed twice; the first kept");
    }
}

fn levels() -> Result<std::sync::MutexGuard<'static, Levels>, Refusal> {
    LEVELS_IN_FORCE
        .get()
        .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()))
        .ok_or_else(|| Refusal::Request("log levels cannot be changed in this process".into()))
}

impl Levels {
    fn level_of(&self, logger: &str) -> String {
        if logger == ROOT {
            return self.root.clone();
        }
        self.set
            .get(logger)
            .or_else(|| self.started.get(logger))
            .cloned()
            .unwrap_or_else(|| self.root.clone())
    }

    /// The env-filter directives of these levels.
    fn directives(&self) -> String {
        let mut merged: BTreeMap<&str, &str> = BTreeMap::new();
        for (t, l) in self.started.iter().chain(&self.set) {
            merged.insert(t, l);
        }
        std::iter::once(filter_level(&self.root).to_string())
            .chain(merged.into_iter().map(|(t, l)| format!("{t}={}", filter_level(l))))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// A Kafka level as an env-filter level.
fn filter_level(level: &str) -> &'static str {
    match level {
        "TRACE" => "trace",
        "DEBUG" => "debug",
        "WARN" => "warn",
        "ERROR" | "FATAL" => "error",
        "OFF" => "off",
        _ => "info",
    }
}

/// Whether `name` can name a logger: `root` or a Rust module path.
fn valid_name(name: &str) -> bool {
    name == ROOT
        || (name.len() <= NAME_BYTES_MAX
            && name
                .split("::")
                .all(|seg| !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')))
}

/// Every logger listed, with its level: the root, the workspace's crates,
/// and those given a level at start or since.
pub fn describe() -> Result<Vec<(String, String)>, Refusal> {
    let l = levels()?;
    let mut names: Vec<String> = std::iter::once(ROOT.to_string())
        .chain(CRATES.iter().map(|c| c.to_string()))
        .chain(l.started.keys().cloned())
        .chain(l.set.keys().cloned())
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    names.retain(|n| seen.insert(n.clone()));
    Ok(names.into_iter().map(|n| (n.clone(), l.level_of(&n))).collect())
}

/// Applies `ops` (all or nothing); with `validate_only`, checks them only.
pub fn alter(ops: &[LevelOp], validate_only: bool) -> Result<(), Refusal> {
    let mut l = levels()?;
    let mut root = l.root.clone();
    let mut set = l.set.clone();
    let mut started = l.started.clone();
    for op in ops {
        match op {
            LevelOp::Set(name, level) => {
                if !valid_name(name) {
                    return Err(Refusal::Config(format!("{name:?} is not a logger name")));
                }
                if !LEVELS.contains(&level.as_str()) {
                    return Err(Refusal::Config(format!(
                        "{level:?} is not a log level: one of {}",
                        LEVELS.join(", ")
                    )));
                }
                if name == ROOT {
                    root = level.clone();
                } else {
                    set.insert(name.clone(), level.clone());
                }
            }
            LevelOp::Delete(name) if name == ROOT => {
                return Err(Refusal::Request("the root logger cannot be removed".into()))
            }
            LevelOp::Delete(name) => {
                set.remove(name);
                started.remove(name);
            }
        }
    }
    if validate_only {
        return Ok(());
    }
    let before = (
        std::mem::replace(&mut l.root, root),
        std::mem::replace(&mut l.set, set),
        std::mem::replace(&mut l.started, started),
    );
    let directives = l.directives();
    if let Err(e) = (l.reload)(&directives) {
        (l.root, l.set, l.started) = before;
        return Err(Refusal::Request(format!("the log filter {directives:?}: {e}")));
    }
    tracing::info!(%directives, "log levels changed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_put_the_root_first_and_later_levels_over_earlier_ones() {
        let mut l = Levels {
            root: "INFO".into(),
            started: BTreeMap::from([("ferrite_engine".to_string(), "DEBUG".to_string())]),
            set: BTreeMap::new(),
            reload: Box::new(|_| Ok(())),
        };
        assert_eq!(l.directives(), "info,ferrite_engine=debug");
        l.set.insert("ferrite_engine".into(), "FATAL".into());
        l.set.insert("ferrite_broker::net".into(), "TRACE".into());
        l.root = "WARN".into();
        assert_eq!(l.directives(), "warn,ferrite_broker::net=trace,ferrite_engine=error");
        assert_eq!(l.level_of("ferrite_engine"), "FATAL");
        assert_eq!(l.level_of("ferrite_replication"), "WARN", "the root's");
    }

    #[test]
    fn logger_names_are_the_root_or_module_paths() {
        assert!(valid_name("root"));
        assert!(valid_name("ferrite_engine::log"));
        assert!(!valid_name("ferrite_engine::"));
        assert!(!valid_name("a=b"));
        assert!(!valid_name(""));
        assert!(!valid_name(&"a".repeat(300)));
    }
}
