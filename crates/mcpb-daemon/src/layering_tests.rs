//! The crate doc promises that data flows down its list: the view and the broker tools never
//! reach the broker, sessions or connections. This reads the sources and holds the code to it
//! (the workspace test `tests/suite/layering.rs` of mcp-broker checks every crate for cycles).

use std::collections::{BTreeMap, BTreeSet};

/// Top-level module of each source file and the top-level modules it names as `crate::x`.
fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .to_string();
            if !rel.ends_with(".rs") || rel.ends_with("_tests.rs") || rel == "lib.rs" {
                continue;
            }
            let module = rel
                .split('/')
                .next()
                .unwrap()
                .trim_end_matches(".rs")
                .to_string();
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap();
            for (i, _) in code.match_indices("crate::") {
                let name: String = code[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name != module && name.chars().next().is_some_and(|c| c.is_lowercase()) {
                    out.entry(module.clone()).or_default().insert(name);
                }
            }
        }
    }
    out
}

fn reaches(edges: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_string()];
    while let Some(m) = todo.pop() {
        for next in edges.get(&m).into_iter().flatten() {
            if next == to {
                return true;
            }
            if seen.insert(next.clone()) {
                todo.push(next.clone());
            }
        }
    }
    false
}

#[test]
fn the_profile_view_and_the_broker_tools_never_reach_back_into_the_broker() {
    let edges = edges();
    for low in [
        "view",
        "tools",
        "route",
        "known",
        "generation",
        "link",
        "outbox",
    ] {
        for high in ["broker", "session", "connection", "listener", "admin"] {
            assert!(!reaches(&edges, low, high), "{low} reaches {high}");
        }
    }
}
