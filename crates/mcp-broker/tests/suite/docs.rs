//! The user's pages stay true of the code: every message troubleshooting.md explains is still
//! one the code can print, every `mcp-broker` command the pages show parses, and README links
//! every page.

use std::path::{Path, PathBuf};

use super::support::bin;

const PAGES: [&str; 7] = [
    "install.md",
    "troubleshooting.md",
    "compatibility.md",
    "auth-recipes.md",
    "runtime-layout.md",
    "adoption.md",
    "comparison.md",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_sources(dir: &Path, out: &mut String) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push_str(&std::fs::read_to_string(&p).unwrap());
        }
    }
}

#[test]
fn every_message_troubleshooting_explains_is_one_the_code_prints() {
    let page = std::fs::read_to_string(repo().join("docs/troubleshooting.md")).unwrap();
    let mut code = String::new();
    for e in std::fs::read_dir(repo().join("crates")).unwrap().flatten() {
        let src = e.path().join("src");
        if src.is_dir() {
            rust_sources(&src, &mut code);
        }
    }
    // A message is quoted on a line of its own: > `text`
    let messages: Vec<&str> = page
        .lines()
        .filter_map(|l| l.strip_prefix("> `")?.strip_suffix('`'))
        .collect();
    assert!(messages.len() >= 30, "{} messages", messages.len());
    let gone: Vec<&&str> = messages
        .iter()
        .filter(|m| !code.contains(**m) && !code.contains(&m.replace('"', "\\\"")))
        .collect();
    assert!(
        gone.is_empty(),
        "troubleshooting.md explains messages the code no longer prints: {gone:#?}"
    );
}

/// `line` split as a shell would split a simple command (quotes, no expansions).
fn words(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (_, c) => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

#[test]
fn every_mcp_broker_command_the_pages_show_parses() {
    let mut checked = 0;
    let mut bad = Vec::new();
    let files: Vec<PathBuf> = PAGES
        .iter()
        .map(|p| repo().join("docs").join(p))
        .chain([repo().join("README.md")])
        .collect();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let mut in_block = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                in_block = !in_block;
                continue;
            }
            let line = line.trim();
            let Some(rest) = line.strip_prefix("mcp-broker ") else {
                continue;
            };
            // Placeholders and shell constructs are prose, not a command to run as written.
            if !in_block
                || ["<", "...", "…", "|", "$(", "&&", ";", "#", "\\"]
                    .iter()
                    .any(|p| rest.contains(p))
            {
                continue;
            }
            let mut args = words(rest);
            args.push("--help".into());
            let out = std::process::Command::new(bin())
                .args(&args)
                .env("HOME", "/nonexistent")
                .output()
                .unwrap();
            checked += 1;
            if !out.status.success() {
                bad.push(format!(
                    "{}: mcp-broker {rest}: {}",
                    file.display(),
                    String::from_utf8_lossy(&out.stderr)
                        .lines()
                        .next()
                        .unwrap_or("")
                ));
            }
        }
    }
    assert!(checked >= 20, "only {checked} commands found in the pages");
    assert!(
        bad.is_empty(),
        "commands in the docs that do not parse: {bad:#?}"
    );
}

#[test]
fn readme_links_every_page() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    for page in PAGES {
        assert!(
            readme.contains(&format!("docs/{page}")),
            "README does not link docs/{page}"
        );
    }
}
