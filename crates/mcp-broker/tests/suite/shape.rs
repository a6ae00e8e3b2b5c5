//! The house's size rules, held by machine over every crate's sources: no file over 900 lines,
//! few functions over 80 lines (a ceiling that only comes down), and the binary crate's top
//! level small beside its command tree. Tests are left out: files under `tests/`, `*_tests.rs`
//! and a file's `#[cfg(test)] mod` block.

use std::path::{Path, PathBuf};

/// The most lines a source file may have.
const MAX_FILE_LINES: usize = 900;
/// A function longer than this is counted as long.
const LONG_FUNCTION: usize = 80;
/// How many long functions the workspace may hold; lower it when it has fewer.
const MAX_LONG_FUNCTIONS: usize = 17;
/// Files at the top of the binary crate's `src/`, beside its command tree.
const MAX_BINARY_TOP_FILES: usize = 12;

fn crates() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            if name != "tests" && name != "target" {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") && !name.ends_with("_tests.rs") {
            out.push(path);
        }
    }
}

/// Every non-test source file of the workspace, with its text.
fn workspace() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    sources(&crates(), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

/// The lines before a file's `#[cfg(test)] mod NAME {` block.
fn non_test(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| {
            w[0].trim() == "#[cfg(test)]"
                && w[1].trim_start().starts_with("mod ")
                && w[1].trim_end().ends_with('{')
        })
        .unwrap_or(lines.len());
    lines[..end].to_vec()
}

/// Each function's name and length in lines, from its `fn` line to the brace that closes it
/// at the same indent (rustfmt's layout, which the test command enforces).
fn functions(lines: &[&str]) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let indent = line.len() - line.trim_start().len();
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.iter().position(|w| *w == "fn");
        let is_fn = at.is_some_and(|at| {
            words[..at].iter().all(|w| {
                w.starts_with("pub")
                    || matches!(*w, "const" | "async" | "unsafe" | "extern" | "\"C\"")
            })
        });
        if !is_fn {
            i += 1;
            continue;
        }
        let name = words[at.unwrap() + 1]
            .split(['(', '<'])
            .next()
            .unwrap()
            .to_string();
        let close = format!("{}}}", " ".repeat(indent));
        let Some(open) = (i..lines.len()).find(|&j| {
            let t = lines[j].trim_end();
            t.ends_with('{') || t.ends_with(';')
        }) else {
            break;
        };
        if lines[open].trim_end().ends_with(';') {
            i = open + 1;
            continue;
        }
        let end = (open + 1..lines.len())
            .find(|&j| lines[j].trim_end() == close)
            .unwrap_or(lines.len() - 1);
        out.push((name, i + 1, end - i + 1));
        i = open + 1;
    }
    out
}

#[test]
fn no_source_file_is_over_900_lines() {
    let long: Vec<String> = workspace()
        .iter()
        .filter(|(_, t)| t.lines().count() > MAX_FILE_LINES)
        .map(|(p, t)| format!("{}: {} lines", p.display(), t.lines().count()))
        .collect();
    assert!(long.is_empty(), "split these files:\n{}", long.join("\n"));
}

#[test]
fn few_functions_are_over_80_lines() {
    let mut long = Vec::new();
    for (path, text) in workspace() {
        for (name, line, len) in functions(&non_test(&text)) {
            if len > LONG_FUNCTION {
                long.push(format!("{}:{line} {name}: {len} lines", path.display()));
            }
        }
    }
    assert!(
        long.len() <= MAX_LONG_FUNCTIONS,
        "{} functions over {LONG_FUNCTION} lines (at most {MAX_LONG_FUNCTIONS}); split one of:\n{}",
        long.len(),
        long.join("\n")
    );
}

#[test]
fn the_binary_crate_is_a_command_tree_with_a_small_top() {
    let src = crates().join("mcp-broker/src");
    let top: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    assert!(
        top.len() <= MAX_BINARY_TOP_FILES,
        "{} files at the top of mcp-broker/src (at most {MAX_BINARY_TOP_FILES}): {top:?}; a command goes under commands/<group>/",
        top.len()
    );
    assert!(src.join("commands/mod.rs").is_file());
}

#[test]
fn the_function_counter_reads_rustfmt_layout() {
    let text = "fn a() {\n    x;\n}\n\npub(crate) fn b(\n    y: u8,\n) -> u8 {\n    y\n}\n\
                trait T {\n    fn c(&self);\n}\n#[cfg(test)]\nmod tests {\n    fn d() {}\n}\n";
    let found = functions(&non_test(text));
    assert_eq!(
        found,
        vec![("a".to_string(), 1, 3), ("b".to_string(), 5, 5)]
    );
}
