//! Data flows one way inside every crate of the workspace: no module (file by file) imports a
//! module that imports it back, directly or through others, and the daemon's layers keep their
//! order. This reads the sources and holds each crate to it; it is the one copy of the check.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Edges = BTreeMap<String, BTreeSet<String>>;

/// A module path: `["tools", "call_tool"]`; the crate root is `[]`.
type Module = Vec<String>;

fn ident(s: &str) -> (String, &str) {
    let s = s.trim_start();
    let n: String = s
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let rest = &s[n.len()..];
    (n, rest)
}

/// The paths a use-path at the start of `rest` names, each as its segments: `a::b::C` is one,
/// `{a, b::{c, d}}` is `a`, `b::c` and `b::d`.
fn paths(rest: &str) -> Vec<Vec<String>> {
    if let Some(group) = rest.trim_start().strip_prefix('{') {
        let mut depth = 1;
        let mut out = Vec::new();
        let mut start = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' | ',' if depth == 1 => {
                    out.extend(paths(&group[start..i]));
                    if c == '}' {
                        break;
                    }
                    start = i + 1;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        return out;
    }
    let (first, mut after) = ident(rest);
    if first.is_empty() {
        return Vec::new();
    }
    let mut path = vec![first];
    while let Some(next) = after.strip_prefix("::") {
        if next.trim_start().starts_with('{') {
            return paths(next)
                .into_iter()
                .map(|p| path.iter().cloned().chain(p).collect())
                .collect();
        }
        let (seg, r) = ident(next);
        if seg.is_empty() {
            break;
        }
        path.push(seg);
        after = r;
    }
    vec![path]
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Each source file's module and the modules it names through `crate::`, `super::` and
/// `self::` paths, file by file (`tools::call_tool` is not `tools::get_artifact`). A module and
/// its own ancestors may name each other (a `mod.rs` holds what its children share). Tests are
/// left out: they may look at anything.
fn edges(src: &Path) -> Edges {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut modules: BTreeMap<Module, PathBuf> = BTreeMap::new();
    for path in files {
        let rel = path
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .to_string();
        let file = rel.rsplit('/').next().unwrap();
        if matches!(rel.as_str(), "lib.rs" | "main.rs")
            || file.ends_with("_tests.rs")
            || file == "tests.rs"
            || rel.starts_with("bin/")
        {
            continue;
        }
        let mut m: Module = rel
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_string)
            .collect();
        if m.last().is_some_and(|l| l == "mod") {
            m.pop();
        }
        modules.insert(m, path);
    }
    let mut out = Edges::new();
    for (module, path) in &modules {
        let text = std::fs::read_to_string(path).unwrap();
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        // `self::` is this module; `super::` its parent (a `mod.rs` is its folder's module).
        let this: Module = module.clone();
        let parent: Module = module[..module.len().saturating_sub(1)].to_vec();
        for (prefix, base) in [
            ("crate::", Vec::new()),
            ("super::", parent),
            ("self::", this),
        ] {
            for (i, _) in code.match_indices(prefix) {
                // `xcrate::` or `a::super::` is not a path's start.
                let before = code[..i].chars().next_back();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                for p in paths(&code[i + prefix.len()..]) {
                    let mut full = base.clone();
                    let mut rest = p.as_slice();
                    while let Some((_, r)) = rest.split_first().filter(|(s, _)| *s == "super") {
                        full.pop();
                        rest = r;
                    }
                    full.extend(rest.iter().cloned());
                    // The deepest module the path reaches.
                    let target = (1..=full.len())
                        .rev()
                        .map(|n| full[..n].to_vec())
                        .find(|m| modules.contains_key(m));
                    let Some(target) = target else { continue };
                    let related = target.starts_with(module) || module.starts_with(&target);
                    if !related {
                        out.entry(module.join("::"))
                            .or_default()
                            .insert(target.join("::"));
                    }
                }
            }
        }
    }
    out
}

fn reaches(edges: &Edges, from: &str, to: &str) -> bool {
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
fn no_crate_has_a_module_cycle() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut cycles = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        checked += 1;
        let name = src
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        let edges = edges(&src);
        for (module, imports) in &edges {
            for import in imports {
                if reaches(&edges, import, module) {
                    cycles.push(format!(
                        "{name}: {module} imports {import}, which leads back"
                    ));
                }
            }
        }
    }
    assert!(checked >= 14, "only {checked} crates found");
    assert!(cycles.is_empty(), "module cycles:\n{}", cycles.join("\n"));
}

/// mcpb-daemon's crate doc promises that data flows down its list: the view and the broker
/// tools never reach the broker, sessions or connections.
#[test]
fn the_daemons_view_and_broker_tools_never_reach_back_into_the_broker() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcpb-daemon/src");
    let mut top = Edges::new();
    for (from, to) in edges(&src) {
        let head = |m: &str| m.split("::").next().unwrap_or(m).to_string();
        top.entry(head(&from))
            .or_default()
            .extend(to.iter().map(|t| head(t)).filter(|t| *t != head(&from)));
    }
    assert!(
        top.contains_key("session") && top.contains_key("view"),
        "{top:?}"
    );
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
            assert!(!reaches(&top, low, high), "{low} reaches {high}");
        }
    }
}

/// The gate is a type: a broker tool gets narrow handles (`Gate`, `Catalog`, `Servers`) and
/// never the view itself or an upstream, whose `call` would skip pins, policy and the audit.
/// Only `Ctx::new` (tools/mod.rs) sees the view, to make the handles.
#[test]
fn broker_tools_hold_handles_never_the_view_or_an_upstream() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcpb-daemon/src/tools");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.ends_with(".rs") || name == "mod.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for word in [
            "ProfileView",
            "Arc<Upstream>",
            "mcpb_upstream::Upstream",
            ".upstream()",
        ] {
            assert!(!text.contains(word), "tools/{name} names {word}");
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} tool files found");
}

/// A transport answers for itself: what callers ask of its kind (a local process? remote?
/// a named endpoint?) is a method of `mcpb_config::Transport`, the one place that matches on
/// it; no other crate's sources name its variants (tests may).
#[test]
fn transport_kinds_are_matched_only_where_they_are_defined() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut named = Vec::new();
    for entry in std::fs::read_dir(crates).unwrap() {
        let dir = entry.unwrap().path();
        if dir.ends_with("mcpb-config") || !dir.join("src").is_dir() {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        for f in files {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            if name.ends_with("_tests.rs") || name == "tests.rs" {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap();
            for v in [
                "Transport::Stdio",
                "Transport::StreamableHttp",
                "Transport::Sse",
            ] {
                if code.contains(v) {
                    named.push(format!("{}: {v}", f.display()));
                }
            }
        }
    }
    assert!(
        named.is_empty(),
        "ask the transport instead:\n{}",
        named.join("\n")
    );
}

#[test]
fn paths_are_read_from_groups_and_nested_groups_too() {
    let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        paths("{a, b::{c, d}, e::F}; x"),
        [p(&["a"]), p(&["b", "c"]), p(&["b", "d"]), p(&["e", "F"])]
    );
    assert_eq!(paths("view::ProfileView"), [p(&["view", "ProfileView"])]);
}

/// Every variable of the broker's is named in one place: `mcpb_config::env` (and the sandbox's
/// own in `mcpb_sandbox::env`); the bench's knobs and the test fixture are apart.
#[test]
fn environment_variable_names_are_spelt_in_one_module() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(crates).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if dir.join("src").is_dir() && !["mcpb-bench", "mcpb-testkit"].contains(&name.as_str()) {
            rust_files(&dir.join("src"), &mut files);
        }
    }
    let homes = [
        Path::new("mcpb-config/src/env.rs"),
        Path::new("mcpb-sandbox/src/env.rs"),
    ];
    let mut spelt = Vec::new();
    for f in &files {
        if homes.iter().any(|h| f.ends_with(h)) {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.contains("\"MCP_BROKER_") || line.contains("\"MCP_EXEC_") {
                spelt.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(files.len() > 100, "{} files read", files.len());
    assert!(
        spelt.is_empty(),
        "spelt outside the env modules:\n{}",
        spelt.join("\n")
    );
}

/// docs/architecture.md lists the crates so that data flows down the list: each crate's own
/// dependencies on the workspace's crates are below it there.
#[test]
fn the_architecture_docs_crate_list_has_every_dependency_below_its_user() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let order: Vec<String> = doc
        .lines()
        .filter(|l| l.starts_with("| `mcp"))
        .flat_map(|l| {
            let first = l.split('|').nth(1).unwrap_or("");
            first
                .split('`')
                .filter(|s| s.starts_with("mcp"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(order.len() >= 16, "{order:?}");
    let mut wrong = Vec::new();
    // The fixture and the bench stand beside the product, listed last: they may use anything.
    for (i, name) in order
        .iter()
        .enumerate()
        .filter(|(_, n)| !["mcpb-testkit", "mcpb-bench"].contains(&n.as_str()))
    {
        let manifest = std::fs::read_to_string(root.join("crates").join(name).join("Cargo.toml"))
            .unwrap_or_else(|_| panic!("{name} has no manifest"));
        let deps = manifest
            .split("[dependencies]")
            .nth(1)
            .unwrap_or("")
            .split("\n[")
            .next()
            .unwrap_or("");
        for dep in deps
            .lines()
            .filter_map(|l| l.split(['=', ' ', '.']).next())
            .filter(|d| d.starts_with("mcpb-"))
        {
            let at = order.iter().position(|o| o == dep);
            if at.is_none_or(|at| at <= i) {
                wrong.push(format!("{name} uses {dep}, which is not below it"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
