//! The house rules a reader should not have to check by eye (TigerBeetle's
//! `tidy.zig` is the model), over the non-test source of every crate:
//!
//! - no file over `FILE_LINES_MAX` lines;
//! - no function over `FUNCTION_LINES_MAX` lines, but for those listed in
//!   `LONG_FUNCTIONS`, today's debt: the list may only shrink (a listed
//!   function that got short, or went, fails the test until it is struck
//!   off);
//! - no `.unwrap()` or `.expect(` (assert the condition, or carry it in a
//!   type);
//! - every `unsafe` block or impl has a `SAFETY:` comment just above it;
//! - limits are named `…_MAX`, not `MAX_…`.
//!
//! Test code is not checked: `tests/`, `benches/`, `*_tests.rs` files and
//! `#[cfg(test)]` modules. The scan reads rustfmt's layout (a function's
//! closing brace at the indentation of its `fn` line), which `cargo fmt`
//! keeps.

use std::path::{Path, PathBuf};

const FILE_LINES_MAX: usize = 800;
const FUNCTION_LINES_MAX: usize = 70;

/// Functions over `FUNCTION_LINES_MAX` lines today: (file, function).
const LONG_FUNCTIONS: &[(&str, &str)] = &[
    ("bench/src/bin/ferrite-bench.rs", "main"),
    ("broker/src/server.rs", "start"),
    ("config/src/lib.rs", "apply"),
    ("broker/src/cluster/zk_thread.rs", "serve"),
    ("engine/src/recovery.rs", "open_with_report"),
    ("broker/src/cluster/fetcher.rs", "fetch"),
    ("bench/src/engine_run.rs", "engine_append_on_shard"),
    ("broker/src/cluster/admin.rs", "cluster_admin"),
    ("bench/src/matrix.rs", "svg"),
    ("engine/src/log.rs", "reserve"),
    ("bench/src/partitions.rs", "run_in"),
    ("broker/src/handlers/produce.rs", "produce"),
    ("cli/src/topics.rs", "run"),
    ("controller/src/driver/watches.rs", "read_and_arm"),
    ("broker/src/shard.rs", "apply_metadata"),
    ("broker/src/handlers/inter_broker.rs", "controller_request"),
    ("broker/src/cluster/fetcher.rs", "epoch_queries"),
    ("engine/src/segment_appender.rs", "plan_group"),
    ("engine/src/segment_load.rs", "scan_segment"),
    ("broker/src/handlers/inter_broker.rs", "elect_leaders"),
];

/// The crates whose source is checked (testkit is test code).
const SOURCE_DIRS: &[&str] = &[
    "ids/src",
    "protocol/src",
    "client/src",
    "groups/src",
    "cli/src",
    "config/src",
    "engine/src",
    "transport/src",
    "replication/src",
    "controller/src",
    "broker/src",
    "bench/src",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !path.to_string_lossy().ends_with("_tests.rs") {
            out.push(path);
        }
    }
}

/// Leading spaces.
fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Whether `line` opens a module: `mod x {`, `pub mod x {`, `pub(super) mod x {`.
fn opens_module(line: &str) -> bool {
    let t = line.trim_start();
    let t = t.strip_prefix("pub").map_or(t, |rest| {
        let rest = rest.trim_start();
        match rest.strip_prefix('(') {
            Some(r) => r.split_once(')').map_or(rest, |(_, after)| after.trim_start()),
            None => rest,
        }
    });
    t.starts_with("mod ") && t.trim_end().ends_with('{')
}

/// The file's lines outside `#[cfg(test)]` modules: (line number, text).
fn non_test_lines(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim() == "#[cfg(test)]" {
            // `#[cfg(test)] #[path = "…"] mod tests;` or an inline module.
            let mut j = i + 1;
            while j < lines.len() && lines[j].trim_start().starts_with("#[") {
                j += 1;
            }
            if j < lines.len() && opens_module(lines[j]) {
                let at = indent(lines[j]);
                let mut k = j + 1;
                while k < lines.len() && !(indent(lines[k]) == at && lines[k].trim() == "}") {
                    k += 1;
                }
                i = k + 1;
                continue;
            }
            if j < lines.len() && lines[j].trim_end().ends_with(';') {
                i = j + 1;
                continue;
            }
        }
        out.push((i + 1, line));
        i += 1;
    }
    out
}

/// The name of the function `line` starts, if it starts one with a body.
fn function_name(line: &str) -> Option<&str> {
    let mut t = line.trim_start();
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "async ",
        "const ",
        "unsafe ",
        "extern \"C\" ",
    ] {
        while let Some(rest) = t.strip_prefix(prefix) {
            t = rest;
        }
    }
    let rest = t.strip_prefix("fn ")?;
    if line.trim_end().ends_with(';') {
        return None;
    }
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The code of `line` before a `//` comment (a rough cut: enough for the
/// patterns looked for, which do not occur inside strings here).
fn code_of(line: &str) -> &str {
    line.split("//").next().unwrap_or("")
}

struct Findings {
    long_functions: Vec<(String, String, usize)>,
    problems: Vec<String>,
}

fn scan() -> Findings {
    let root = workspace();
    let mut files = Vec::new();
    for dir in SOURCE_DIRS {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    assert!(files.len() > 100, "found only {} source files", files.len());
    let mut found = Findings {
        long_functions: Vec::new(),
        problems: Vec::new(),
    };
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let name = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace("/../", "/");
        let name = name.trim_start_matches("./").to_string();
        let total = text.lines().count();
        if total > FILE_LINES_MAX {
            found
                .problems
                .push(format!("{name}: {total} lines (over {FILE_LINES_MAX})"));
        }
        let lines = non_test_lines(&text);
        for (k, (number, line)) in lines.iter().enumerate() {
            let code = code_of(line);
            if code.contains(".unwrap()") || code.contains(".expect(") {
                found
                    .problems
                    .push(format!("{name}:{number}: unwrap or expect outside tests"));
            }
            if code.contains("unsafe {") || code.contains("unsafe impl") {
                let above = lines[k.saturating_sub(6)..k].iter().any(|(_, l)| l.contains("SAFETY"));
                if !above && !line.contains("SAFETY") {
                    found
                        .problems
                        .push(format!("{name}:{number}: unsafe without a SAFETY comment"));
                }
            }
            let t = code.trim_start();
            // MAX_TIMESTAMP is Kafka's name for ListOffsets' -3, not a limit.
            let limit_first = t.starts_with("const MAX_") || t.starts_with("pub const MAX_");
            if limit_first && !t.contains("MAX_TIMESTAMP") {
                found
                    .problems
                    .push(format!("{name}:{number}: a limit named MAX_…, not …_MAX"));
            }
            if let Some(function) = function_name(line) {
                let at = indent(line);
                let end = lines[k..].iter().find(|(_, l)| indent(l) == at && l.trim() == "}");
                if let Some((end_number, _)) = end {
                    let length = end_number - number + 1;
                    if length > FUNCTION_LINES_MAX {
                        found.long_functions.push((name.clone(), function.to_string(), length));
                    }
                }
            }
        }
    }
    found
}

#[test]
fn the_source_keeps_the_house_rules() {
    let found = scan();
    let mut problems = found.problems;
    for (file, function, length) in &found.long_functions {
        if !LONG_FUNCTIONS.contains(&(file.as_str(), function.as_str())) {
            problems.push(format!(
                "{file}: fn {function} is {length} lines (over {FUNCTION_LINES_MAX}); split it"
            ));
        }
    }
    for (file, function) in LONG_FUNCTIONS {
        if !found.long_functions.iter().any(|(f, n, _)| f == file && n == function) {
            problems.push(format!(
                "{file}: fn {function} is no longer over {FUNCTION_LINES_MAX} lines (or is gone): strike it from LONG_FUNCTIONS"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_scan_sees_what_it_looks_for() {
    let text = "fn short() {\n    1\n}\n\n#[cfg(test)]\nmod tests {\n    fn t() { x.unwrap() }\n}\n";
    let lines = non_test_lines(text);
    assert_eq!(lines.len(), 4, "the test module is skipped");
    assert_eq!(function_name("    pub(crate) async fn read_here("), Some("read_here"));
    assert_eq!(function_name("    fn declared(&self) -> u8;"), None);
    assert!(opens_module("pub(super) mod test_support {"));
    assert_eq!(code_of("let x = 1; // y.unwrap()"), "let x = 1; ");
}
