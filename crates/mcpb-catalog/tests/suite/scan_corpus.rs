//! The description scan against a corpus of injections (each class a review slipped past it:
//! folded letters, look-alikes, entities, invisible and control characters, orders aimed at
//! another upstream's tool) and a corpus of ordinary descriptions that merely look unusual
//! (a common tool name another server also has, emoji sequences, "before using this tool").

use mcpb_catalog::scan::{holds, scan};
use serde_json::Value;

const OTHER_TOOLS: &[&str] = &[
    "send_email",
    "get_weather",
    "read_file",
    "list_pages",
    "run_pipeline",
    "list_directory",
];

fn corpus(name: &str) -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_injection_of_the_corpus_is_flagged() {
    let missed: Vec<String> = corpus("injections.jsonl")
        .iter()
        .filter(|case| !holds(&scan(&case["tool"], OTHER_TOOLS)))
        .map(|case| case["what"].to_string())
        .collect();
    assert!(missed.is_empty(), "not flagged: {missed:?}");
}

#[test]
fn ordinary_descriptions_of_the_corpus_are_not_flagged() {
    let flagged: Vec<String> = corpus("benign.jsonl")
        .iter()
        .filter_map(|case| {
            let f = scan(&case["tool"], OTHER_TOOLS);
            holds(&f).then(|| format!("{}: {f:?}", case["tool"]["description"]))
        })
        .collect();
    assert!(flagged.is_empty(), "{flagged:#?}");
}
