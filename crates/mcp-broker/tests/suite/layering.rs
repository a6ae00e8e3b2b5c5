//! Data flows one way inside every crate of the workspace: no module imports a module that
//! imports it back, directly or through others. This reads the sources and holds each crate to
//! it (the daemon adds its own rules about which layer may reach which, in its unit tests).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Edges = BTreeMap<String, BTreeSet<String>>;

/// The names a `crate::` or `super::` path at the start of `rest` reaches: one, or each
/// member of a `{...}` group.
fn named(rest: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 1;
        let mut members = Vec::new();
        let mut start = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 1 => {
                    members.push(ident(&group[start..i]));
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 1 => {
                    members.push(ident(&group[start..i]));
                    start = i + 1;
                }
                _ => {}
            }
        }
        members
    } else {
        vec![ident(rest)]
    }
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

/// Top-level module of each source file of the crate at `src` and the top-level modules it
/// names. Tests are left out: they may look at anything.
fn edges(src: &Path) -> Edges {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut out = Edges::new();
    for path in files {
        let rel = path
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .to_string();
        let parts: Vec<&str> = rel.split('/').collect();
        let file = *parts.last().unwrap();
        if matches!(rel.as_str(), "lib.rs" | "main.rs")
            || file.ends_with("_tests.rs")
            || file == "tests.rs"
            || rel.starts_with("bin/")
        {
            continue;
        }
        let module = parts[0].trim_end_matches(".rs").to_string();
        // `super::` from a top-level file (or a directory's mod.rs) is the crate root.
        let super_is_root = parts.len() == 1 || (parts.len() == 2 && file == "mod.rs");
        let text = std::fs::read_to_string(&path).unwrap();
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut prefixes = vec!["crate::"];
        if super_is_root {
            prefixes.push("super::");
        }
        for prefix in prefixes {
            for (i, _) in code.match_indices(prefix) {
                for name in named(&code[i + prefix.len()..]) {
                    if name != module && name.chars().next().is_some_and(|c| c.is_lowercase()) {
                        out.entry(module.clone()).or_default().insert(name);
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

#[test]
fn imports_are_read_from_groups_too() {
    assert_eq!(named("{a, b::{c, d}, e}; x"), ["a", "b", "e"]);
    assert_eq!(named("view::ProfileView"), ["view"]);
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
