//! A minimal MCP client over a child's stdio: handshake, sequential calls for latency, and a
//! pipelined window of N calls in flight for throughput.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::sync_channel;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

pub(crate) struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    tool: String,
    args: String,
    next_id: u64,
}

impl Peer {
    pub(crate) fn spawn(mut cmd: Command, tool: &str, args: &str) -> anyhow::Result<Self> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("spawn")?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("stdout")?);
        let mut peer = Self {
            child,
            stdin,
            stdout,
            tool: tool.into(),
            args: args.into(),
            next_id: 0,
        };
        peer.roundtrip(r#""method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcpb-bench","version":"1"}}"#)?;
        peer.stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")?;
        Ok(peer)
    }

    fn roundtrip(&mut self, body: &str) -> anyhow::Result<String> {
        self.next_id += 1;
        writeln!(
            self.stdin,
            "{{\"jsonrpc\":\"2.0\",\"id\":{},{body}}}",
            self.next_id
        )?;
        self.stdin.flush()?;
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            bail!("peer closed its output");
        }
        if line.contains("\"error\"") {
            bail!("error answer: {line}");
        }
        Ok(line)
    }

    /// The child's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// One `tools/call` of `tool` with `args` (JSON text); the answer line.
    pub(crate) fn call(&mut self, tool: &str, args: &str) -> anyhow::Result<String> {
        let body =
            format!(r#""method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}"#);
        self.roundtrip(&body)
    }

    fn call_body(&self) -> String {
        format!(
            r#""method":"tools/call","params":{{"name":"{}","arguments":{}}}"#,
            self.tool, self.args
        )
    }

    /// Sequential calls; returns each round trip.
    pub(crate) fn latencies(&mut self, n: usize) -> anyhow::Result<Vec<Duration>> {
        let body = self.call_body();
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            self.roundtrip(&body)?;
            out.push(t.elapsed());
        }
        Ok(out)
    }

    /// `n` calls with up to `window` in flight; returns calls per second.
    pub(crate) fn throughput(&mut self, n: usize, window: usize) -> anyhow::Result<f64> {
        let body = self.call_body();
        let (permit_tx, permit_rx) = sync_channel::<()>(window);
        for _ in 0..window {
            permit_tx.send(())?;
        }
        let first_id = self.next_id + 1;
        self.next_id += n as u64;
        let mut stdin = self.stdin.try_clone_handle()?;
        let start = Instant::now();
        let writer = std::thread::spawn(move || -> std::io::Result<()> {
            for i in 0..n as u64 {
                if permit_rx.recv().is_err() {
                    break;
                }
                writeln!(
                    stdin,
                    "{{\"jsonrpc\":\"2.0\",\"id\":{},{body}}}",
                    first_id + i
                )?;
                stdin.flush()?;
            }
            Ok(())
        });
        let mut line = String::new();
        for _ in 0..n {
            line.clear();
            if self.stdout.read_line(&mut line)? == 0 {
                bail!("peer closed its output");
            }
            let _ = permit_tx.try_send(());
        }
        let elapsed = start.elapsed();
        writer
            .join()
            .map_err(|_| anyhow::anyhow!("writer panicked"))??;
        Ok(n as f64 / elapsed.as_secs_f64())
    }

    pub(crate) fn close(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

/// A second handle on the child's stdin for the writer thread.
trait CloneHandle {
    fn try_clone_handle(&self) -> std::io::Result<std::fs::File>;
}

impl CloneHandle for ChildStdin {
    fn try_clone_handle(&self) -> std::io::Result<std::fs::File> {
        use std::os::fd::AsFd;
        Ok(std::fs::File::from(self.as_fd().try_clone_to_owned()?))
    }
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx]
}
