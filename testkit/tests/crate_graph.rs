//! The workspace's crates point one way: each uses only crates below it
//! (`docs/architecture.md` draws the picture). Read from `cargo metadata`,
//! so a new dependency that points up fails here, not in a review.

use std::collections::BTreeMap;

/// Each crate of ours and the crates of ours it may use (as a normal or
/// build dependency): the engine's stack (ids ← engine ← replication ←
/// controller) and the wire's (ids ← protocol ← client) side by side, the transport and
/// the broker on both, the benchmarks on top. `ferrite-testkit` (test helpers, using no
/// crate of ours) may be a dev-dependency of any crate, and a dependency of
/// the benchmarks and of the fault suite.
const ALLOWED: &[(&str, &[&str])] = &[
    ("ferrite-ids", &[]),
    // Who a client is: SASL mechanisms and SCRAM credentials, pure.
    ("ferrite-security", &[]),
    ("ferrite-protocol", &["ferrite-ids"]),
    ("ferrite-client", &["ferrite-ids", "ferrite-protocol"]),
    ("ferrite-groups", &["ferrite-ids", "ferrite-protocol"]),
    ("ferrite-transactions", &["ferrite-ids", "ferrite-protocol"]),
    ("ferrite-engine", &["ferrite-ids"]),
    // The engine for its truncation marks (nothing read ahead outlives a
    // truncation).
    (
        "ferrite-transport",
        &["ferrite-ids", "ferrite-protocol", "ferrite-engine"],
    ),
    ("ferrite-replication", &["ferrite-ids", "ferrite-engine"]),
    // The engine for `LogConfig` (a topic's log settings), not for types.
    ("ferrite-controller", &["ferrite-ids", "ferrite-engine"]),
    // The broker's configuration under Kafka's names.
    (
        "ferrite-config",
        &[
            "ferrite-ids",
            "ferrite-protocol",
            "ferrite-groups",
            "ferrite-transactions",
            "ferrite-engine",
            "ferrite-controller",
            "ferrite-security",
        ],
    ),
    // The administration commands: the client, and the controller's
    // ZooKeeper store for partition reassignment.
    (
        "ferrite-cli",
        &[
            "ferrite-ids",
            "ferrite-protocol",
            "ferrite-client",
            "ferrite-controller",
            "ferrite-security",
        ],
    ),
    (
        "ferrite-broker",
        &[
            "ferrite-ids",
            "ferrite-protocol",
            "ferrite-client",
            "ferrite-groups",
            "ferrite-transactions",
            "ferrite-engine",
            "ferrite-transport",
            "ferrite-replication",
            "ferrite-controller",
            "ferrite-config",
            "ferrite-cli",
            "ferrite-security",
        ],
    ),
    (
        "ferrite-bench",
        &[
            "ferrite-ids",
            "ferrite-protocol",
            "ferrite-client",
            "ferrite-engine",
            "ferrite-broker",
            "ferrite-testkit",
        ],
    ),
    // The fault suite runs the `ferrite` binary; it never links the broker.
    (
        "ferrite-chaos",
        &[
            "ferrite-ids",
            "ferrite-protocol",
            "ferrite-client",
            "ferrite-engine",
            "ferrite-testkit",
        ],
    ),
];

fn workspace_dependencies() -> BTreeMap<String, Vec<(String, Option<String>)>> {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
            "--manifest-path",
        ])
        .arg(&manifest)
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let ours: Vec<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap_or_default().to_string())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| ours.iter().any(|o| d["name"] == o.as_str()))
                .map(|d| {
                    let name = d["name"].as_str().unwrap_or_default().to_string();
                    (name, d["kind"].as_str().map(str::to_string))
                })
                .collect();
            (p["name"].as_str().unwrap_or_default().to_string(), deps)
        })
        .collect()
}

#[test]
fn every_crate_uses_only_the_crates_below_it() {
    let graph = workspace_dependencies();
    for (krate, _) in ALLOWED {
        assert!(graph.contains_key(*krate), "{krate} is not in the workspace");
    }
    assert!(
        graph["ferrite-testkit"].iter().all(|(_, kind)| kind.is_some()),
        "testkit uses a crate of ours"
    );
    let mut wrong = Vec::new();
    for (krate, deps) in &graph {
        for (dep, kind) in deps {
            if dep == "ferrite-testkit" && kind.as_deref() == Some("dev") {
                continue;
            }
            let Some((_, allowed)) = ALLOWED.iter().find(|(k, _)| k == krate) else {
                wrong.push(format!("{krate} (not in ALLOWED) uses {dep}"));
                continue;
            };
            if !allowed.contains(&dep.as_str()) {
                wrong.push(format!("{krate} uses {dep} ({})", kind.as_deref().unwrap_or("normal")));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies that point up or sideways:\n{}",
        wrong.join("\n")
    );
}
