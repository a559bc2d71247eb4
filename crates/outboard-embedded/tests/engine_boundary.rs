//! DESIGN.md item 10: applications link only the host-boundary contract
//! (`outboard-board`), never the engine. The native API, liboutboard and the
//! socket shim must not have `outboard-engine` in their dependency closure
//! (normal and build dependencies, as Cargo resolved them) nor among their
//! dev-dependencies; this crate, the one that puts the engine in an
//! application's process, must have it (so the check can fail).

use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::process::Command;

const APPLICATION_CRATES: [&str; 3] = ["outboard-api", "outboard-capi", "outboard-shim"];
const ENGINE: &str = "outboard-engine";

/// The resolved dependency graph of the workspace, as `cargo metadata` gives it.
struct Graph {
    /// Package id → name.
    names: HashMap<String, String>,
    /// Package id → (dependency id, its kinds: "normal", "build", "dev").
    deps: HashMap<String, Vec<(String, Vec<String>)>>,
}

fn graph() -> Graph {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    // This host only (the project is Linux-only): other platforms' crates
    // need not be downloaded, so `--offline` works.
    let env = if cfg!(target_env = "musl") { "musl" } else { "gnu" };
    let host = format!("{}-unknown-linux-{env}", std::env::consts::ARCH);
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--offline", "--locked", "--filter-platform", &host, "--manifest-path", manifest])
        .output()
        .expect("run cargo metadata");
    assert!(out.status.success(), "cargo metadata failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let names = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| (p["id"].as_str().unwrap().to_string(), p["name"].as_str().unwrap().to_string()))
        .collect();
    let deps = meta["resolve"]["nodes"]
        .as_array()
        .expect("a resolve graph")
        .iter()
        .map(|n| {
            let edges = n["deps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| {
                    let kinds = d["dep_kinds"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|k| k["kind"].as_str().unwrap_or("normal").to_string())
                        .collect();
                    (d["pkg"].as_str().unwrap().to_string(), kinds)
                })
                .collect();
            (n["id"].as_str().unwrap().to_string(), edges)
        })
        .collect();
    Graph { names, deps }
}

impl Graph {
    fn id(&self, name: &str) -> String {
        let ids: Vec<&String> = self.names.iter().filter(|(_, n)| *n == name).map(|(id, _)| id).collect();
        assert_eq!(ids.len(), 1, "one package named {name} in the workspace");
        ids[0].clone()
    }

    /// Names of every package `name` links or runs to build: its normal and
    /// build dependencies, and theirs.
    fn closure(&self, name: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![self.id(name)];
        while let Some(id) = todo.pop() {
            for (dep, kinds) in self.deps.get(&id).map(Vec::as_slice).unwrap_or_default() {
                if kinds.iter().any(|k| k != "dev") && seen.insert(dep.clone()) {
                    todo.push(dep.clone());
                }
            }
        }
        seen.iter().map(|id| self.names[id].clone()).collect()
    }

    /// Names of the direct dependencies of `name`, of any kind (dev included).
    fn direct(&self, name: &str) -> BTreeSet<String> {
        self.deps[&self.id(name)].iter().map(|(dep, _)| self.names[dep].clone()).collect()
    }
}

#[test]
fn applications_do_not_link_the_engine() {
    let g = graph();
    for app in APPLICATION_CRATES {
        let closure = g.closure(app);
        assert!(closure.contains("outboard-board"), "{app} should link the board's contract: {closure:?}");
        assert!(!closure.contains(ENGINE), "{app} links the engine (dependency closure: {closure:?})");
        assert!(!g.direct(app).contains(ENGINE), "{app} names the engine among its dependencies (dev ones included)");
    }
    // The check sees the engine where it is.
    assert!(g.closure("outboard-embedded").contains(ENGINE), "outboard-embedded should link the engine");
    assert!(g.closure("outboard-cli").contains(ENGINE));
}
