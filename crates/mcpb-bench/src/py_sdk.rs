//! `mcpb-bench --python-sdk`: throughput through the official MCP Python SDK client (from
//! .test-deps, installed by `scripts/install-test-deps`) with 8 calls in flight, the example
//! server spoken to directly against the same server behind `mcp-broker stdio`. The SDK's own
//! cost per call is large beside the broker's, which is what a real client sees.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::env::Env;

const SCRIPT: &str = include_str!("../py/sdk_throughput.py");

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

pub(crate) fn run(quick: bool) -> anyhow::Result<()> {
    let exe = crate::env::broker_exe()?;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = repo.join(".test-deps/venv/bin/python");
    if !python.is_file() {
        bail!(
            "no Python SDK client in .test-deps\nhint: run scripts/install-test-deps, then this again"
        );
    }
    let home = PathBuf::from(format!("/tmp/mcpb-bench-pysdk-{}", std::process::id()));
    std::fs::create_dir_all(&home)?;
    let config = home.join("bench.yaml");
    std::fs::write(
        &config,
        "schema_version: 1\nupstreams:\n  example: {command: \"{broker.exe}\", args: [example-server], trust_annotations: true}\nprofiles:\n  default: {allow_mutating_upstreams: true}\n",
    )?;
    let script = home.join("sdk_throughput.py");
    std::fs::write(&script, SCRIPT)?;
    let path = std::env::var("PATH").unwrap_or_default();
    let env = Env::new(exe.clone(), home.clone(), config.clone(), path.clone());
    let result = (|| -> anyhow::Result<()> {
        env.start()?;
        let home_s = home.display().to_string();
        let side_env = json!({
            "HOME": home_s,
            "PATH": path,
            "MCP_BROKER_HOME": home_s,
            "MCP_BROKER_CONFIG": config.display().to_string(),
        });
        let (calls, rounds) = if quick { (500, 3) } else { (3000, 7) };
        let cfg = json!({
            "direct": {"command": exe, "args": ["example-server"], "env": side_env},
            "broker": {"command": exe, "args": ["stdio"], "env": side_env},
            "tool_direct": "echo",
            "tool_broker": "example.echo",
            "concurrency": 8,
            "calls": calls,
            "rounds": rounds,
        });
        let out = std::process::Command::new(&python)
            .arg(&script)
            .arg(cfg.to_string())
            .output()
            .context("running the Python SDK client")?;
        if !out.status.success() {
            bail!(
                "the Python SDK client failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let v: Value = serde_json::from_slice(&out.stdout)?;
        print_rates(&v, calls, rounds);
        Ok(())
    })();
    let _ = env.broker(&["stop"]).output();
    let _ = std::fs::remove_dir_all(&home);
    result
}

/// The client's calls per second on each side and their ratio, round by round.
fn print_rates(v: &Value, calls: usize, rounds: usize) {
    let rates = |k: &str| -> Vec<f64> {
        v[k].as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    let (direct, broker) = (rates("direct"), rates("broker"));
    let ratios: Vec<f64> = direct.iter().zip(&broker).map(|(d, b)| b / d).collect();
    println!(
        "\n## The official Python SDK client, 8 calls in flight ({calls} calls x {rounds} interleaved rounds)\n"
    );
    println!("| path | calls/s p50 | range |");
    println!("|---|---|---|");
    for (name, r) in [("direct", &direct), ("through the broker", &broker)] {
        let (lo, hi) = r
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
        println!("| {name} | {:.0} | {lo:.0}-{hi:.0} |", median(r.clone()));
    }
    let (lo, hi) = ratios
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
    println!(
        "| ratio, round by round | {:.2}x | {lo:.2}x-{hi:.2}x |",
        median(ratios.clone())
    );
}
