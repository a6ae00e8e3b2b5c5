//! `mcpb-bench --http`: the HTTP front against the shim, same daemon, same upstream, same run:
//! sequential latency of `tools/call example.echo`, and calls per second with 8 and 32 callers
//! (HTTP: one keep-alive connection and session per caller; shim: that many requests pipelined
//! on one session). Loopback only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::env::Env;
use crate::load::{Peer, percentile};

const TOKEN: &str = "bench-token-0123456789abcdef";

/// One MCP session over HTTP/1.1 keep-alive, written by hand so the client costs little.
struct HttpPeer {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    port: u16,
    session: Option<String>,
    next: u64,
}

impl HttpPeer {
    fn connect(port: u16) -> anyhow::Result<Self> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_nodelay(true)?;
        let mut p = Self {
            reader: BufReader::new(s.try_clone()?),
            writer: s,
            port,
            session: None,
            next: 0,
        };
        let (sid, _) = p.post(r#""method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcpb-bench","version":"1"}}"#, true)?;
        p.session = sid;
        p.post_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
        Ok(p)
    }

    fn post(&mut self, body: &str, request: bool) -> anyhow::Result<(Option<String>, String)> {
        let text = if request {
            self.next += 1;
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{},{body}}}", self.next)
        } else {
            body.to_string()
        };
        self.post_raw(&text)
    }

    fn post_raw(&mut self, body: &str) -> anyhow::Result<(Option<String>, String)> {
        let session = self
            .session
            .as_ref()
            .map(|s| format!("Mcp-Session-Id: {s}\r\n"))
            .unwrap_or_default();
        write!(
            self.writer,
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{session}Content-Length: {}\r\n\r\n{body}",
            self.port,
            body.len()
        )?;
        let mut status = String::new();
        self.reader.read_line(&mut status)?;
        let (mut len, mut sid) = (0usize, None);
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line)?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length: ") {
                len = v.parse()?;
            } else if lower.starts_with("mcp-session-id: ") {
                sid = Some(line["mcp-session-id: ".len()..].to_string());
            }
        }
        let mut buf = vec![0; len];
        self.reader.read_exact(&mut buf)?;
        if !status.contains(" 200 ") && !status.contains(" 202 ") {
            bail!("HTTP {}: {}", status.trim(), String::from_utf8_lossy(&buf));
        }
        Ok((sid, String::from_utf8_lossy(&buf).into_owned()))
    }

    fn call(&mut self) -> anyhow::Result<()> {
        let (_, body) = self.post(r#""method":"tools/call","params":{"name":"example.echo","arguments":{"message":"hi"}}"#, true)?;
        if !body.contains("\"result\"") {
            bail!("no result: {body}");
        }
        Ok(())
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Calls per second with `callers` HTTP sessions calling at once, `per` calls each.
fn http_throughput(port: u16, callers: usize, per: usize) -> anyhow::Result<f64> {
    let mut peers = (0..callers)
        .map(|_| HttpPeer::connect(port))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let start = Instant::now();
    std::thread::scope(|s| -> anyhow::Result<()> {
        let handles: Vec<_> = peers
            .iter_mut()
            .map(|p| s.spawn(move || (0..per).try_for_each(|_| p.call())))
            .collect();
        for h in handles {
            h.join().map_err(|_| anyhow::anyhow!("caller panicked"))??;
        }
        Ok(())
    })?;
    Ok((callers * per) as f64 / start.elapsed().as_secs_f64())
}

pub(crate) fn run(quick: bool) -> anyhow::Result<()> {
    let exe = crate::env::broker_exe()?;
    let home = std::path::PathBuf::from(format!("/tmp/mcpb-bench-http-{}", std::process::id()));
    std::fs::create_dir_all(&home)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let config = home.join("bench.yaml");
    std::fs::write(
        &config,
        format!(
            "schema_version: 1\nupstreams:\n  example: {{command: \"{{broker.exe}}\", args: [example-server], trust_annotations: true}}\nprofiles:\n  default: {{allow_mutating_upstreams: true}}\nhttp:\n  listen: 127.0.0.1:{port}\n  tokens:\n    - {{token: \"${{MCPB_BENCH_TOKEN}}\", profile: default, max_sessions: 64, max_in_flight: 64}}\n"
        ),
    )?;
    let env = Env::new(
        exe,
        home.clone(),
        config,
        std::env::var("PATH").unwrap_or_default(),
    );
    let result = compare(&env, port, quick);
    let _ = env.broker(&["stop"]).output();
    let _ = std::fs::remove_dir_all(&home);
    result
}

/// Starts the daemon with its HTTP front on `port`, then prints the same calls made through
/// the shim and through HTTP side by side.
fn compare(env: &Env, port: u16, quick: bool) -> anyhow::Result<()> {
    let started = env
        .broker(&["start"])
        .env("MCPB_BENCH_TOKEN", TOKEN)
        .output()?;
    if !started.status.success() {
        bail!(
            "daemon did not start: {}",
            String::from_utf8_lossy(&started.stderr)
        );
    }
    let (n, per) = if quick { (300, 100) } else { (3000, 500) };
    let mut shim = Peer::spawn(
        env.broker(&["stdio"]),
        "example.echo",
        r#"{"message":"hi"}"#,
    )?;
    let mut http = HttpPeer::connect(port).context("HTTP session")?;
    for _ in 0..100 {
        shim.call("example.echo", r#"{"message":"hi"}"#)?;
        http.call()?;
    }
    let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let t = Instant::now();
        shim.call("example.echo", r#"{"message":"hi"}"#)?;
        a.push(t.elapsed());
        let t = Instant::now();
        http.call()?;
        b.push(t.elapsed());
    }
    a.sort();
    b.sort();
    println!("\n## HTTP front against the shim (example.echo, same daemon, loopback)\n");
    println!("| path | p50 ms | p99 ms | calls/s at 8 | calls/s at 32 |");
    println!("|---|---|---|---|---|");
    let shim8 = shim.throughput(per * 8, 8)?;
    let shim32 = shim.throughput(per * 32, 32)?;
    let http8 = http_throughput(port, 8, per)?;
    let http32 = http_throughput(port, 32, per)?;
    println!(
        "| shim (stdio, one session, pipelined) | {:.3} | {:.3} | {shim8:.0} | {shim32:.0} |",
        ms(percentile(&a, 0.5)),
        ms(percentile(&a, 0.99))
    );
    println!(
        "| HTTP front (a keep-alive session per caller) | {:.3} | {:.3} | {http8:.0} | {http32:.0} |",
        ms(percentile(&b, 0.5)),
        ms(percentile(&b, 0.99))
    );
    println!(
        "\nHTTP adds {:.3} ms at p50; throughput ratio HTTP/shim {:.2} at 8, {:.2} at 32",
        ms(percentile(&b, 0.5)) - ms(percentile(&a, 0.5)),
        http8 / shim8,
        http32 / shim32
    );
    shim.close();
    Ok(())
}
