//! `mcpb-bench --many`: the daemon's memory in front of many upstreams, listed by a raw session
//! and searched by a compact one: 40 fixture servers (about 840 small tools), then one fixture
//! per server of the livemcpbench catalog serving that server's real definitions (70 upstreams,
//! 527 real tools beside the fixture's own). Prints RSS fresh, after the listing and after the
//! search.

use anyhow::{Context, bail};
use serde_json::Value;

use crate::env::{Env, rss_kib, rss_split_kib};

const UPSTREAMS: usize = 40;

pub(crate) fn run(env: &Env) -> anyhow::Result<()> {
    let fixture = env.exe_dir().join("mcpb-fixture");
    if !fixture.is_file() {
        bail!(
            "{} is missing; build it with `cargo build --release -p mcpb-testkit`",
            fixture.display()
        );
    }
    let plain: Vec<String> = (0..UPSTREAMS)
        .map(|i| {
            format!(
                "  u{i}: {{command: \"{}\", trust_annotations: true}}\n",
                fixture.display()
            )
        })
        .collect();
    measure(env, &format!("{UPSTREAMS} fixture upstreams"), &plain)?;
    let catalog = crate::retrieval::data_root().join("livemcpbench/tools.jsonl");
    let tools = crate::retrieval::read_jsonl(&catalog)?;
    let mut servers: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    for t in tools {
        let server = t["server"].as_str().unwrap_or("misc").to_string();
        servers.entry(server).or_default().push(t);
    }
    let dir = env.home().join("many-tools");
    std::fs::create_dir_all(&dir)?;
    let mut real = Vec::new();
    for (i, (_, tools)) in servers.iter().enumerate() {
        let file = dir.join(format!("s{i}.jsonl"));
        let lines: Vec<String> = tools.iter().map(Value::to_string).collect();
        std::fs::write(&file, lines.join("\n") + "\n")?;
        real.push(format!(
            "  s{i}: {{command: \"{}\", args: [--tools-file, \"{}\"], trust_annotations: true}}\n",
            fixture.display(),
            file.display()
        ));
    }
    measure(
        env,
        &format!("{} upstreams with real definitions", servers.len()),
        &real,
    )?;
    scaling(env, &fixture)
}

/// Daemon RSS against the number of tools it holds: about 1,000, 5,000 and 20,000 generated
/// tools (the fixture's `--tools N`), listed by a raw session and searched by a compact one,
/// and what each tool costs beyond its definition's own bytes.
fn scaling(env: &Env, fixture: &std::path::Path) -> anyhow::Result<()> {
    println!();
    println!(
        "| tools | upstreams | bytes per definition | RSS fresh (MiB) | after listing | after a search |"
    );
    println!("|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for (label, upstreams, per) in [("k1", 10, 100), ("k5", 20, 250), ("k20", 20, 1000)] {
        // The fixture's own tools come on top of the generated ones.
        let extra = per - 23;
        let yaml: Vec<String> = (0..upstreams)
            .map(|i| {
                format!(
                    "  {label}u{i}: {{command: \"{}\", args: [--tools, \"{extra}\"], trust_annotations: true}}\n",
                    fixture.display()
                )
            })
            .collect();
        let row = load(env, &yaml)?;
        println!(
            "| {} | {upstreams} | {:.0} | {:.1} | {:.1} | {:.1} |",
            row.tools,
            row.bytes as f64 / row.tools.max(1) as f64,
            row.fresh as f64 / 1024.0,
            row.listed as f64 / 1024.0,
            row.searched as f64 / 1024.0
        );
        rows.push(row);
    }
    let mib = |f: fn(&Load) -> u64| -> Vec<(f64, f64)> {
        rows.iter()
            .map(|r| (r.tools as f64, f(r) as f64 / 1024.0))
            .collect()
    };
    crate::charts::line_chart(
        "rss_vs_tools",
        "Daemon RSS against the tools it holds",
        "tools",
        "RSS (MiB)",
        &[
            ("after listing".into(), mib(|r| r.listed)),
            ("after a search".into(), mib(|r| r.searched)),
        ],
    )?;
    if let (Some(small), Some(large)) = (rows.first(), rows.last()) {
        let tools = large.tools.saturating_sub(small.tools).max(1) as f64;
        let per_tool = (large.listed.saturating_sub(small.listed) * 1024) as f64 / tools;
        let definition = large.bytes as f64 / large.tools.max(1) as f64;
        println!();
        println!(
            "each tool held costs {per_tool:.0} bytes of RSS after listing ({definition:.0} of them its definition's own JSON, {:.0} beyond)",
            per_tool - definition
        );
    }
    Ok(())
}

struct Load {
    tools: usize,
    found: usize,
    /// The listing answer's size: the definitions' own bytes.
    bytes: usize,
    fresh: u64,
    listed: u64,
    /// After listing: (anonymous, file-backed).
    listed_split: (u64, u64),
    searched: u64,
}

fn measure(env: &Env, label: &str, upstreams: &[String]) -> anyhow::Result<()> {
    let row = load(env, upstreams)?;
    let mib = |k: u64| k as f64 / 1024.0;
    println!("| daemon in front of {label} | value |");
    println!("|---|---|");
    println!(
        "| tools listed / search results | {} / {} |",
        row.tools, row.found
    );
    println!("| RSS fresh (MiB) | {:.1} |", mib(row.fresh));
    println!(
        "| RSS after listing every tool (MiB) | {:.1} |",
        mib(row.listed)
    );
    println!(
        "| of which anonymous / file-backed (MiB) | {:.1} / {:.1} |",
        mib(row.listed_split.0),
        mib(row.listed_split.1)
    );
    println!(
        "| RSS after a compact search (MiB) | {:.1} |",
        mib(row.searched)
    );
    Ok(())
}

/// Starts a daemon over `upstreams`, lists every tool, searches, stops it.
fn load(env: &Env, upstreams: &[String]) -> anyhow::Result<Load> {
    let mut yaml = String::from("schema_version: 1\n");
    // The search tier to measure (`MCPB_SEARCH_MODEL=off|static|minilm`; the default otherwise).
    if let Ok(model) = std::env::var("MCPB_SEARCH_MODEL") {
        yaml.push_str(&format!("broker: {{search: {{model: {model}}}}}\n"));
    }
    yaml.push_str("upstreams:\n");
    for u in upstreams {
        yaml.push_str(u);
    }
    yaml.push_str("profiles:\n  default: {allow_mutating_upstreams: true}\n  compact: {compact_tools_enabled: true}\n");
    let env = env.with_config("many.yaml", &yaml);
    env.start()?;
    let status = env.broker(&["status", "--json"]).output()?;
    let pid = serde_json::from_slice::<Value>(&status.stdout)?["daemon"]["pid"]
        .as_u64()
        .context("no daemon pid")?;
    let fresh = rss_kib(pid);
    let list = env.ask(&["--profile", "default"], "tools/list", "{}")?;
    let tools = list["result"]["tools"].as_array().map_or(0, Vec::len);
    let bytes = list["result"]["tools"].to_string().len();
    let listed = rss_kib(pid);
    let listed_split = rss_split_kib(pid);
    let search = env.ask(
        &["--profile", "compact"],
        "tools/call",
        r#"{"name":"broker.search_tools","arguments":{"query":"echo text"}}"#,
    )?;
    let found = search["result"]["structuredContent"]["results"]
        .as_array()
        .map_or(0, Vec::len);
    let searched = rss_kib(pid);
    let _ = env.broker(&["stop"]).output()?;
    Ok(Load {
        tools,
        bytes,
        found,
        fresh,
        listed,
        listed_split,
        searched,
    })
}
