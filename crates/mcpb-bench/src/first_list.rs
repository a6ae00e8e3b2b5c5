//! `mcpb-bench --first-list`: how long a client's first raw `tools/list` takes, from the shim's
//! start to the answer, in front of 10, 40 and 100 fixture upstreams that each take a second to
//! start (like a package runner fetching a server): on a daemon whose catalog is empty (cold),
//! then on a new daemon over the same catalog (warm); and with one upstream slower than
//! `broker.first_list_wait_ms`. `MCPB_BENCH_OLD=/path/to/mcp-broker` adds another build's
//! daemon, run interleaved round by round with the same servers.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::env::Env;

const ROUNDS: usize = 3;
const START_MS: u64 = 1000;

pub(crate) fn run(quick: bool) -> anyhow::Result<()> {
    let new = crate::env::broker_exe()?;
    let fixture = new.with_file_name("mcpb-fixture");
    if !fixture.is_file() {
        bail!(
            "{} is missing; build it with `cargo build --release -p mcpb-testkit`",
            fixture.display()
        );
    }
    let mut builds = vec![("this build".to_string(), new)];
    if let Some(old) = std::env::var_os("MCPB_BENCH_OLD") {
        builds.insert(0, ("MCPB_BENCH_OLD".to_string(), PathBuf::from(old)));
    }
    let sizes: &[usize] = if quick { &[10] } else { &[10, 40, 100] };
    let rounds = if quick { 1 } else { ROUNDS };
    println!(
        "first raw tools/list, shim start to answer; fixture upstreams starting in {START_MS} ms each; medians of {rounds} interleaved rounds"
    );
    println!();
    println!("| upstreams | daemon | cold catalog (ms) | tools | warm catalog (ms) | tools |");
    println!("|---|---|---|---|---|---|");
    // Per build: (upstreams, cold median, warm median), for the chart.
    let mut lines: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); builds.len()];
    for &n in sizes {
        let mut got: Vec<Vec<Sample>> = vec![Vec::new(); builds.len()];
        for _ in 0..rounds {
            for (b, (_, exe)) in builds.iter().enumerate() {
                got[b].push(round(exe, &fixture, n, None)?);
            }
        }
        for (b, (label, _)) in builds.iter().enumerate() {
            println!("{}", row(n, label, &got[b]));
            let cold = median(got[b].iter().map(|s| s.cold.0).collect());
            let warm = median(got[b].iter().map(|s| s.warm.0).collect());
            lines[b].push((n as f64, ms(cold), ms(warm)));
        }
    }
    let mut series = Vec::new();
    for ((label, _), points) in builds.iter().zip(&lines) {
        series.push((
            format!("{label}, cold catalog"),
            points.iter().map(|p| (p.0, p.1)).collect(),
        ));
        series.push((
            format!("{label}, warm catalog"),
            points.iter().map(|p| (p.0, p.2)).collect(),
        ));
    }
    crate::charts::line_chart(
        "first_list_vs_upstreams",
        "First tools/list against upstreams (each takes 1 s to start)",
        "upstreams",
        "shim start to answer (ms)",
        &series,
    )?;
    println!();
    println!("| one of 40 upstreams takes 10 s to start | daemon | cold catalog (ms) | tools |");
    println!("|---|---|---|---|");
    for (label, exe) in &builds {
        let s = round(exe, &fixture, 40, Some(10_000))?;
        println!("| 40 | {label} | {:.0} | {} |", ms(s.cold.0), s.cold.1);
    }
    Ok(())
}

#[derive(Clone)]
struct Sample {
    cold: (Duration, usize),
    warm: (Duration, usize),
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn row(n: usize, label: &str, samples: &[Sample]) -> String {
    let cold = median(samples.iter().map(|s| s.cold.0).collect());
    let warm = median(samples.iter().map(|s| s.warm.0).collect());
    let tools = |f: fn(&Sample) -> usize| {
        let (lo, hi) = samples
            .iter()
            .map(f)
            .fold((usize::MAX, 0), |(lo, hi), t| (lo.min(t), hi.max(t)));
        if lo == hi {
            lo.to_string()
        } else {
            format!("{lo}-{hi}")
        }
    };
    format!(
        "| {n} | {label} | {:.0} | {} | {:.1} | {} |",
        ms(cold),
        tools(|s| s.cold.1),
        ms(warm),
        tools(|s| s.warm.1)
    )
}

/// One cold listing on a new home, then one warm listing on a new daemon over its catalog.
fn round(exe: &Path, fixture: &Path, n: usize, slow_one: Option<u64>) -> anyhow::Result<Sample> {
    let home = tempfile::Builder::new()
        .prefix("mcpb-first-")
        .tempdir_in("/tmp")?;
    let mut yaml = String::from("schema_version: 1\nupstreams:\n");
    for i in 0..n {
        let start = match slow_one {
            Some(slow) if i == n - 1 => slow,
            _ => START_MS,
        };
        yaml.push_str(&format!(
            "  u{i}: {{command: \"{}\", args: [--slow-start-ms, \"{start}\"], trust_annotations: true}}\n",
            fixture.display()
        ));
    }
    yaml.push_str("profiles:\n  default: {allow_mutating_upstreams: true}\n");
    let config = home.path().join("first.yaml");
    std::fs::write(&config, yaml)?;
    let path = std::env::var("PATH").unwrap_or_default();
    let env = Env::new(exe.to_path_buf(), home.path().to_path_buf(), config, path);
    let cold = listing(&env)?;
    let _ = env.broker(&["stop"]).output()?;
    let warm = listing(&env)?;
    let _ = env.broker(&["stop"]).output()?;
    Ok(Sample { cold, warm })
}

/// Starts the daemon, then times a new session's first `tools/list`.
fn listing(env: &Env) -> anyhow::Result<(Duration, usize)> {
    env.start()?;
    let t = Instant::now();
    let answer = env.ask(&[], "tools/list", "{}")?;
    let took = t.elapsed();
    let tools = answer["result"]["tools"].as_array().map_or(0, Vec::len);
    Ok((took, tools))
}
