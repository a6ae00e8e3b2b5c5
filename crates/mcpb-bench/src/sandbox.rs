//! `mcpb-bench --sandbox`: what the sandbox costs a stdio upstream. Each call to a `per_call`
//! upstream starts a process, so its latency holds a start: the built-in example server with
//! and without `sandbox: standard`, calls interleaved so both see the same machine; then the
//! call latency through a shared (already started) instance of each; then what the sandbox
//! keeps running beside each sandboxed server (processes and their PSS).

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::Value;

use crate::env::{Env, open_session};
use crate::load::percentile;

fn call(
    stdin: &mut std::process::ChildStdin,
    out: &mut impl BufRead,
    id: u64,
    tool: &str,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"message":"x"}}}}}}"#
    )?;
    stdin.flush()?;
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line)? == 0 {
            bail!("the session ended");
        }
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if v["id"] == id {
            if v.get("error").is_some() || v["result"]["isError"] == true {
                bail!("{tool} failed: {v}");
            }
            return Ok(started.elapsed());
        }
    }
}

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    percentile(&v, 0.5)
}

pub(crate) fn run(quick: bool) -> anyhow::Result<()> {
    let exe = crate::env::broker_exe()?;
    let home = std::path::PathBuf::from(format!("/tmp/mcpb-bench-sandbox-{}", std::process::id()));
    std::fs::create_dir_all(&home)?;
    let example = "command: \"{broker.exe}\", args: [example-server], trust_annotations: true";
    let yaml = format!(
        "schema_version: 1\nupstreams:\n  plain: {{{example}, lifecycle: per_call}}\n  boxed: {{{example}, lifecycle: per_call, sandbox: standard}}\n  plain_s: {{{example}}}\n  boxed_s: {{{example}, sandbox: standard}}\nprofiles:\n  default: {{allow_mutating_upstreams: true}}\n"
    );
    let config = home.join("bench.yaml");
    std::fs::write(&config, yaml)?;
    let env = Env::new(
        exe,
        home.clone(),
        config,
        std::env::var("PATH").unwrap_or_default(),
    );
    let (starts, calls) = if quick { (10, 50) } else { (60, 1000) };
    let result = (|| -> anyhow::Result<()> {
        let (mut child, mut stdin, mut out) = open_session(&env)?;
        let mut line = String::new();
        out.read_line(&mut line)?;
        let mut id = 1;
        let mut next = || {
            id += 1;
            id
        };
        // Warm both (the daemon, the page cache of the binary).
        for tool in ["plain.echo", "boxed.echo", "plain_s.echo", "boxed_s.echo"] {
            call(&mut stdin, &mut out, next(), tool)?;
        }
        let (mut plain, mut boxed) = (Vec::new(), Vec::new());
        for _ in 0..starts {
            plain.push(call(&mut stdin, &mut out, next(), "plain.echo")?);
            boxed.push(call(&mut stdin, &mut out, next(), "boxed.echo")?);
        }
        let (mut plain_s, mut boxed_s) = (Vec::new(), Vec::new());
        for _ in 0..calls {
            plain_s.push(call(&mut stdin, &mut out, next(), "plain_s.echo")?);
            boxed_s.push(call(&mut stdin, &mut out, next(), "boxed_s.echo")?);
        }
        drop(stdin);
        let _ = child.wait();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let (a, b) = (p50(plain), p50(boxed));
        let (c, d) = (p50(plain_s), p50(boxed_s));
        println!(
            "\n## The sandbox's cost (example server, {starts} starts and {calls} calls each, interleaved)\n"
        );
        println!("| p50 | unsandboxed | sandbox: standard | difference |");
        println!("|---|---|---|---|");
        println!(
            "| call that starts the server (per_call) | {:.2} ms | {:.2} ms | +{:.2} ms |",
            ms(a),
            ms(b),
            ms(b) - ms(a)
        );
        println!(
            "| call to a running server (shared) | {:.3} ms | {:.3} ms | {:+.3} ms |",
            ms(c),
            ms(d),
            ms(d) - ms(c)
        );
        Ok(())
    })();
    let _ = env.broker(&["stop"]).output();
    let helpers = result.and_then(|()| helpers(&env, quick));
    let _ = env.broker(&["stop"]).output();
    let _ = std::fs::remove_dir_all(&home);
    helpers
}

/// What the sandbox itself keeps running per sandboxed server: `n` shared example servers
/// with `sandbox: standard`, each started by a call; every process under the daemon that is
/// not a server is the sandbox's (its helper).
fn helpers(env: &Env, quick: bool) -> anyhow::Result<()> {
    let n = if quick { 3 } else { 10 };
    let example = "command: \"{broker.exe}\", args: [example-server], trust_annotations: true";
    let mut yaml = String::from("schema_version: 1\nupstreams:\n");
    for i in 0..n {
        yaml.push_str(&format!("  b{i}: {{{example}, sandbox: standard}}\n"));
    }
    yaml.push_str("profiles:\n  default: {allow_mutating_upstreams: true}\n");
    let env = env.with_config("helpers.yaml", &yaml);
    env.start()?;
    let (mut child, mut stdin, mut out) = open_session(&env)?;
    let mut line = String::new();
    out.read_line(&mut line)?;
    for i in 0..n {
        call(&mut stdin, &mut out, 10 + i as u64, &format!("b{i}.echo"))?;
    }
    let daemon = crate::env::daemon_pid(&env)?;
    let (mut servers, mut sandbox) = (Vec::new(), Vec::new());
    for pid in crate::env::descendants(daemon) {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.get(1) == Some(&&b"example-server"[..]) {
            servers.push(pid);
        } else {
            sandbox.push(pid);
        }
    }
    drop(stdin);
    let _ = child.wait();
    let mib =
        |pids: &[u64], f: fn(u64) -> u64| pids.iter().map(|p| f(*p)).sum::<u64>() as f64 / 1024.0;
    let per = |x: f64| x / servers.len().max(1) as f64;
    println!(
        "\n## What the sandbox keeps running ({} sandboxed example servers, shared, each called once)\n",
        servers.len()
    );
    println!("| | processes | PSS (MiB) | RSS (MiB) | per server: processes | PSS (MiB) |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (what, pids) in [("the sandbox's own", &sandbox), ("the servers", &servers)] {
        let (pss, rss) = (
            mib(pids, crate::env::pss_kib),
            mib(pids, crate::env::rss_kib),
        );
        println!(
            "| {what} | {} | {pss:.1} | {rss:.1} | {:.1} | {:.2} |",
            pids.len(),
            per(pids.len() as f64),
            per(pss)
        );
    }
    Ok(())
}
