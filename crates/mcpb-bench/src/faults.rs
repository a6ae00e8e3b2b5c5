//! The soak's fault mix: while sessions pipeline checked echo calls through a shared upstream,
//! others cancel per-call calls mid-flight, kill their client during a slow per-session start,
//! and stall an upstream that stops reading its input. Afterwards: no echo lost or misrouted,
//! no upstream process left beyond the shared ones, per-call capacity back to its baseline,
//! and the daemon's memory bounded.

use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::env::{Env, rss_kib};

const KINDS: usize = 4;

fn config(fixture: &Path) -> String {
    let fx = fixture.display();
    [
        "schema_version: 1".to_string(),
        "broker: {call_timeout_ms: 1500, max_call_ms: 3000, startup_timeout_ms: 10000}".into(),
        "upstreams:".into(),
        format!("  steady: {{command: \"{fx}\", trust_annotations: true}}"),
        format!("  once: {{command: \"{fx}\", lifecycle: per_call, max_instances: 4, trust_annotations: true}}"),
        format!("  slow: {{command: \"{fx}\", args: [--slow-start-ms, \"800\"], lifecycle: per_session, trust_annotations: true}}"),
        format!("  stuck: {{command: \"{fx}\", trust_annotations: true}}"),
        "profiles:".into(),
        "  default: {allow_mutating_upstreams: true}".into(),
    ]
    .join("\n")
        + "\n"
}

struct Client {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: Receiver<String>,
}

/// How long any one answer may take: every call here has a deadline of a few seconds.
const ANSWER_WAIT: Duration = Duration::from_secs(20);

impl Client {
    fn open(env: &Env) -> anyhow::Result<Self> {
        let (child, stdin, stdout) = crate::env::open_session(env)?;
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut c = Self {
            child,
            stdin,
            lines,
        };
        c.answer(0)?;
        Ok(c)
    }

    fn send(&mut self, line: &str) -> anyhow::Result<()> {
        writeln!(self.stdin, "{line}")?;
        Ok(self.stdin.flush()?)
    }

    fn call(&mut self, id: u64, tool: &str, args: &str) -> anyhow::Result<()> {
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#
        ))
    }

    /// Answers to every id of `ids`, in whatever order they come.
    fn answers(&mut self, ids: std::ops::RangeInclusive<u64>) -> anyhow::Result<()> {
        let mut waiting: std::collections::BTreeSet<u64> = ids.collect();
        let deadline = Instant::now() + ANSWER_WAIT;
        while let Some(first) = waiting.first().copied() {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = self.lines.recv_timeout(left) else {
                bail!("{} answers missing (first: request {first})", waiting.len());
            };
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if let Some(id) = v["id"].as_u64() {
                waiting.remove(&id);
            }
        }
        Ok(())
    }

    /// The answer to `id`, skipping notifications and other answers.
    fn answer(&mut self, id: u64) -> anyhow::Result<Value> {
        let deadline = Instant::now() + ANSWER_WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(l) => l,
                Err(RecvTimeoutError::Timeout) => {
                    bail!("no answer to request {id} within {ANSWER_WAIT:?}")
                }
                Err(RecvTimeoutError::Disconnected) => {
                    bail!("the session ended before answering {id}")
                }
            };
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if v["id"] == id {
                return Ok(v);
            }
        }
    }
}

#[derive(Default)]
struct Tally {
    echoes: usize,
    lost: usize,
    misrouted: usize,
    cancels: usize,
    killed_starts: usize,
    stalls: usize,
}

impl Tally {
    fn add(&mut self, w: &Tally) {
        self.echoes += w.echoes;
        self.lost += w.lost;
        self.misrouted += w.misrouted;
        self.cancels += w.cancels;
        self.killed_starts += w.killed_starts;
        self.stalls += w.stalls;
    }
}

/// One worker: rounds of one fault each, interleaved with checked echoes.
fn worker(env: &Env, tag: usize, rounds: usize) -> anyhow::Result<Tally> {
    let mut t = Tally::default();
    let mut c = Client::open(env)?;
    let mut id = 0u64;
    for round in 0..rounds {
        id += 1;
        let text = format!("w{tag}-r{round}");
        c.call(id, "steady.echo", &format!(r#"{{"text":"{text}"}}"#))?;
        match c.answer(id).context("steady.echo") {
            Ok(v) if v["result"]["content"][0]["text"] == text.as_str() => t.echoes += 1,
            Ok(_) => t.misrouted += 1,
            Err(_) => t.lost += 1,
        }
        id += 1;
        match (tag + round) % KINDS {
            0 => {
                c.call(id, "once.sleep", r#"{"ms":2000}"#)?;
                std::thread::sleep(Duration::from_millis(30 + (round as u64 % 5) * 40));
                c.send(&format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
                ))?;
                t.cancels += 1;
            }
            1 => {
                let mut doomed = Client::open(env)?;
                doomed.call(1, "slow.echo", r#"{"text":"x"}"#)?;
                std::thread::sleep(Duration::from_millis(100 + (round as u64 % 4) * 150));
                let _ = doomed.child.kill();
                let _ = doomed.child.wait();
                t.killed_starts += 1;
            }
            2 if round % 3 == 0 => {
                c.call(id, "stuck.stall", "{}")?;
                let _ = c.answer(id).context("stuck.stall")?;
                for k in 0..50 {
                    id += 1;
                    c.call(
                        id,
                        "stuck.echo",
                        &format!(r#"{{"text":"{}"}}"#, "p".repeat(4096 + k)),
                    )?;
                }
                // Every queued call is answered (error or not) within its deadline, in any order.
                c.answers((id - 49)..=id)
                    .context("a call behind a stalled upstream was never answered")?;
                t.stalls += 1;
            }
            _ => {
                c.call(id, "once.echo", r#"{"text":"p"}"#)?;
                let _ = c.answer(id).context("once.echo")?;
            }
        }
    }
    drop(c.stdin);
    let _ = c.child.wait();
    Ok(t)
}

fn status(env: &Env) -> anyhow::Result<Value> {
    let out = env.broker(&["status", "--json"]).output()?;
    Ok(serde_json::from_slice(&out.stdout)?)
}

fn upstream<'a>(st: &'a Value, name: &str) -> &'a Value {
    st["upstreams"]
        .as_array()
        .and_then(|a| a.iter().find(|u| u["name"] == name))
        .unwrap_or(&Value::Null)
}

/// Live children of `ppid`.
fn children(ppid: u64) -> usize {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read_to_string(e.path().join("stat"))
                        .ok()
                        .and_then(|s| {
                            let rest = s.rsplit_once(')')?.1.to_string();
                            let f: Vec<&str> = rest.split_whitespace().collect();
                            Some(f.first() != Some(&"Z") && f.get(1)?.parse::<u64>().ok()? == ppid)
                        })
                        == Some(true)
                })
                .count()
        })
        .unwrap_or(0)
}

pub(crate) fn run(env: &Env, quick: bool) -> anyhow::Result<()> {
    let fixture = env.exe_dir().join("mcpb-fixture");
    if !fixture.is_file() {
        bail!(
            "{} is missing; build it with `cargo build -p mcpb-testkit`",
            fixture.display()
        );
    }
    let env = env.with_config("faults.yaml", &config(&fixture));
    env.start()?;
    let daemon = status(&env)?["daemon"]["pid"]
        .as_u64()
        .context("no daemon pid")?;
    let (workers, rounds) = if quick { (6, 24) } else { (16, 120) };
    let rss_before = rss_kib(daemon);
    let t = Instant::now();
    let (total, failures) = run_workers(&env, workers, rounds);
    let elapsed = t.elapsed();
    let rss_after = rss_kib(daemon);
    let (leaked, active) = settle(&env, daemon)?;
    let capacity_ok = capacity_back(&env);
    let _ = env.broker(&["stop"]).output()?;

    println!();
    println!("| soak with faults | value |");
    println!("|---|---|");
    println!(
        "| workers x rounds | {workers} x {rounds} ({:.1} s) |",
        elapsed.as_secs_f64()
    );
    println!(
        "| faults | {} cancelled per-call calls, {} clients killed mid-start, {} stalled upstreams |",
        total.cancels, total.killed_starts, total.stalls
    );
    println!("| echoes answered correctly | {} |", total.echoes);
    println!("| lost | {} |", total.lost);
    println!("| misrouted | {} |", total.misrouted);
    println!("| leaked upstream processes | {leaked} |");
    println!("| per-call capacity back (4 of max_instances 4 at once) | {capacity_ok} |");
    println!(
        "| daemon RSS before / after | {} / {} KiB |",
        rss_before, rss_after
    );
    if !failures.is_empty() {
        bail!("fault soak: {}", failures.join("; "));
    }
    if total.lost > 0 || total.misrouted > 0 || leaked > 0 || active > 0 || !capacity_ok {
        bail!(
            "fault soak failed: {} lost, {} misrouted, {leaked} leaked, {active} per-call calls still counted, capacity back: {capacity_ok}",
            total.lost,
            total.misrouted
        );
    }
    if rss_after > rss_before + 64 * 1024 {
        bail!("fault soak: daemon RSS grew from {rss_before} to {rss_after} KiB");
    }
    Ok(())
}

/// Runs the workers at once; gives their summed tally and what failed.
fn run_workers(env: &Env, workers: usize, rounds: usize) -> (Tally, Vec<String>) {
    let handles: Vec<_> = (0..workers)
        .map(|tag| {
            let env = env.clone();
            std::thread::spawn(move || worker(&env, tag, rounds))
        })
        .collect();
    let mut total = Tally::default();
    let mut failures = Vec::new();
    for h in handles {
        match h.join() {
            Ok(Ok(w)) => total.add(&w),
            Ok(Err(e)) => failures.push(format!("{e:#}")),
            Err(_) => failures.push("a worker panicked".into()),
        }
    }
    (total, failures)
}

/// Waits for stop ladders and background restarts to settle; gives the upstream processes
/// left beyond the shared ones, and the per-call calls still counted.
fn settle(env: &Env, daemon: u64) -> anyhow::Result<(usize, u64)> {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut st = status(env)?;
    while Instant::now() < deadline {
        st = status(env)?;
        let settled = upstream(&st, "once")["pids"]
            .as_array()
            .is_some_and(Vec::is_empty)
            && upstream(&st, "slow")["session_count"] == 0
            && children(daemon) <= 2;
        if settled {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let leaked = children(daemon).saturating_sub(2)
        + upstream(&st, "once")["pids"].as_array().map_or(0, Vec::len);
    let active = upstream(&st, "once")["active_call_count"]
        .as_u64()
        .unwrap_or(0);
    Ok((leaked, active))
}

/// Whether capacity is back: max_instances (4) per-call calls at once all succeed.
fn capacity_back(env: &Env) -> bool {
    let mut probes = Vec::new();
    for i in 0..4u64 {
        let env = env.clone();
        probes.push(std::thread::spawn(move || -> anyhow::Result<bool> {
            let mut c = Client::open(&env)?;
            c.call(1, "once.sleep", &format!(r#"{{"ms":{}}}"#, 300 + i))?;
            let v = c.answer(1)?;
            Ok(v["result"]["content"][0]["text"] == "slept")
        }));
    }
    probes
        .into_iter()
        .all(|p| p.join().ok().and_then(Result::ok).unwrap_or(false))
}
