//! `mcpb-bench --scan`: the description scan on real catalogs (each upstream scanned as the
//! daemon scans it, against every other upstream's tool names) and on the injection corpus:
//! how many ordinary tools are quarantined on first contact, and how many injections are caught.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

/// Flagged tools of a catalog given as (server, tool definition) pairs.
fn flagged(tools: &[(String, Value)]) -> Vec<String> {
    let mut by_server: BTreeMap<&str, Vec<mcpb_protocol::Tool>> = BTreeMap::new();
    for (server, tool) in tools {
        // What is no tool (no name) never reaches the daemon's scan either.
        if let Ok(tool) = mcpb_protocol::Tool::from_value(tool) {
            by_server.entry(server).or_default().push(tool);
        }
    }
    let mut out = Vec::new();
    for (server, list) in &by_server {
        let others: Vec<&str> = by_server
            .iter()
            .filter(|(s, _)| *s != server)
            .flat_map(|(_, l)| l.iter().map(mcpb_protocol::Tool::name))
            .collect();
        for (tool, findings) in list
            .iter()
            .zip(mcpb_catalog::scan::scan_list(list, &others))
        {
            if let Some(f) = findings.first() {
                out.push(format!(
                    "{server}/{}: {} ({})",
                    tool.name(),
                    f.kind,
                    f.detail
                ));
            }
        }
    }
    out
}

pub(crate) fn run() -> anyhow::Result<()> {
    let root = crate::retrieval::data_root();
    println!("| catalog | servers | tools | flagged on first contact |");
    println!("|---|---|---|---|");
    let path = root.join("livemcpbench/tools.jsonl");
    let tools: Vec<(String, Value)> = crate::retrieval::read_jsonl(&path)?
        .into_iter()
        .map(|t| {
            let server = t["server"].as_str().unwrap_or("?").to_string();
            let def = serde_json::json!({
                "name": t["name"], "description": t["description"], "inputSchema": t["inputSchema"]
            });
            (server, def)
        })
        .collect();
    let servers = tools
        .iter()
        .map(|(s, _)| s.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let hits = flagged(&tools);
    println!(
        "| livemcpbench (public) | {servers} | {} | {} |",
        tools.len(),
        hits.len()
    );
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcpb-catalog/tests/data");
    let others = [
        "send_email",
        "get_weather",
        "read_file",
        "list_pages",
        "run_pipeline",
        "list_directory",
    ];
    for (name, want_flagged) in [("injections.jsonl", true), ("benign.jsonl", false)] {
        let cases = crate::retrieval::read_jsonl(&corpus.join(name))?;
        let n = cases
            .iter()
            .filter(|c| !mcpb_catalog::scan::scan(&c["tool"], &others).is_empty())
            .count();
        println!(
            "| corpus {name} ({}) | - | {} | {n} |",
            if want_flagged {
                "all should be flagged"
            } else {
                "none should be"
            },
            cases.len()
        );
    }
    for h in hits {
        println!("\nflagged: {h}");
    }
    Ok(())
}
