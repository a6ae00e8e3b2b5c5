//! `mcpb-bench --soak`: many sessions pipelining many calls through one shared upstream; every
//! answer must come back to its own caller with its own payload, and no process may be left
//! once the daemon stops. Then N clients over M shared upstreams must run exactly M processes.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::sync::mpsc::{channel, sync_channel};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::env::{Env, open_session};

#[derive(Debug, Default)]
struct Tally {
    ok: usize,
    lost: usize,
    misrouted: usize,
}

/// One session: `calls` echo calls with up to `window` in flight, each answer checked.
fn session(env: &Env, tag: usize, calls: usize, window: usize) -> anyhow::Result<Tally> {
    let (mut child, mut stdin, stdout) = open_session(env)?;
    let (line_tx, line_rx) = channel::<String>();
    std::thread::spawn(move || {
        for line in stdout.lines() {
            let Ok(line) = line else { break };
            if line_tx.send(line).is_err() {
                break;
            }
        }
    });
    line_rx
        .recv_timeout(Duration::from_secs(30))
        .context("no answer to initialize")?;
    let (permit_tx, permit_rx) = sync_channel::<()>(window);
    for _ in 0..window {
        permit_tx.send(())?;
    }
    let writer = std::thread::spawn(move || -> std::io::Result<std::process::ChildStdin> {
        for i in 1..=calls {
            if permit_rx.recv().is_err() {
                break;
            }
            writeln!(
                stdin,
                r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"example.echo","arguments":{{"message":"s{tag}-c{i}"}}}}}}"#
            )?;
        }
        stdin.flush()?;
        Ok(stdin)
    });
    let mut tally = Tally::default();
    let mut seen = BTreeSet::new();
    while seen.len() + tally.misrouted < calls {
        let Ok(line) = line_rx.recv_timeout(Duration::from_secs(30)) else {
            break;
        };
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        let Some(id) = v["id"].as_u64() else { continue };
        let expected = format!("s{tag}-c{id}");
        if v["result"]["content"][0]["text"] == expected.as_str() && seen.insert(id) {
            tally.ok += 1;
        } else {
            tally.misrouted += 1;
        }
        let _ = permit_tx.try_send(());
    }
    tally.lost = calls - tally.ok - tally.misrouted;
    if tally.lost > 0 && std::env::var_os("MCPB_SOAK_DEBUG").is_some() {
        let missing: Vec<usize> = (1..=calls)
            .filter(|i| !seen.contains(&(*i as u64)))
            .take(20)
            .collect();
        eprintln!("session {tag}: missing {missing:?}");
    }
    drop(permit_tx);
    if let Ok(Ok(stdin)) = writer.join() {
        drop(stdin);
    }
    let _ = child.wait();
    Ok(tally)
}

fn upstream_pids(env: &Env) -> anyhow::Result<Vec<u64>> {
    let out = env.broker(&["status", "--json"]).output()?;
    let v: Value = serde_json::from_slice(&out.stdout)?;
    Ok(v["upstreams"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|u| u["pids"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p.as_u64())
        .collect())
}

fn group_alive(pgid: u64) -> bool {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten().any(|e| {
                std::fs::read_to_string(e.path().join("stat"))
                    .ok()
                    .and_then(|s| {
                        let rest = s.rsplit_once(')')?.1.to_string();
                        let f: Vec<&str> = rest.split_whitespace().collect();
                        Some(
                            f.first() != Some(&"Z")
                                && f.get(2).and_then(|g| g.parse::<u64>().ok()) == Some(pgid),
                        )
                    })
                    == Some(true)
            })
        })
        .unwrap_or(false)
}

pub(crate) fn run(env: &Env, quick: bool) -> anyhow::Result<()> {
    let (sessions, calls) = if quick { (10, 100) } else { (100, 1000) };
    let (total, leaked) = concurrent_sessions(env, sessions, calls)?;
    // N clients x M shared upstreams run exactly M processes.
    let (n, m) = if quick { (5, 3) } else { (20, 5) };
    let processes = processes_for_shared(env, n, m)?;
    println!("| clients x shared upstreams | {n} x {m} |");
    println!("| upstream processes running | {processes} |");
    if total.lost > 0 || total.misrouted > 0 || leaked > 0 || processes != m {
        bail!(
            "soak failed: {} lost, {} misrouted, {leaked} leaked, {processes} processes for {m} upstreams",
            total.lost,
            total.misrouted
        );
    }
    Ok(())
}

/// `sessions` sessions of `calls` pipelined calls at once, then the daemon stopped; prints the
/// tally and gives it with the number of upstream processes left behind.
fn concurrent_sessions(env: &Env, sessions: usize, calls: usize) -> anyhow::Result<(Tally, usize)> {
    env.start()?;
    let t = Instant::now();
    let handles: Vec<_> = (0..sessions)
        .map(|tag| {
            let env = env.clone();
            std::thread::spawn(move || session(&env, tag, calls, 16))
        })
        .collect();
    let mut total = Tally::default();
    for h in handles {
        let s = h
            .join()
            .map_err(|_| anyhow::anyhow!("session thread panicked"))??;
        total.ok += s.ok;
        total.lost += s.lost;
        total.misrouted += s.misrouted;
    }
    let elapsed = t.elapsed();
    let pids = upstream_pids(env)?;
    let _ = env.broker(&["stop"]).output()?;
    let leaked = pids.iter().filter(|p| group_alive(**p)).count();
    println!("| soak | value |");
    println!("|---|---|");
    println!(
        "| sessions x calls | {sessions} x {calls} = {} |",
        sessions * calls
    );
    println!("| answered correctly | {} |", total.ok);
    println!("| lost | {} |", total.lost);
    println!("| misrouted | {} |", total.misrouted);
    println!(
        "| calls/s overall | {:.0} |",
        total.ok as f64 / elapsed.as_secs_f64()
    );
    println!("| upstream processes left after stop | {leaked} |");
    Ok((total, leaked))
}

/// `n` clients each calling every one of `m` shared upstreams: how many upstream processes run.
fn processes_for_shared(env: &Env, n: usize, m: usize) -> anyhow::Result<usize> {
    let started = env.with_upstreams(m).broker(&["start"]).output()?;
    if !started.status.success() {
        bail!(
            "daemon did not start: {}",
            String::from_utf8_lossy(&started.stderr)
        );
    }
    let env_m = env.with_upstreams(m);
    let mut clients = Vec::new();
    for _ in 0..n {
        let (child, mut stdin, mut out) = open_session(&env_m)?;
        for u in 0..m {
            writeln!(
                stdin,
                r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"u{u}.echo","arguments":{{"message":"x"}}}}}}"#,
                u + 1
            )?;
        }
        let mut line = String::new();
        for _ in 0..=m {
            line.clear();
            out.read_line(&mut line)?;
        }
        clients.push((child, stdin));
    }
    let processes = upstream_pids(&env_m)?.len();
    for (mut child, stdin) in clients {
        drop(stdin);
        let _ = child.wait();
    }
    let _ = env_m.broker(&["stop"]).output()?;
    Ok(processes)
}
