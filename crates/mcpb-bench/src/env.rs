//! What every scenario runs against: the release broker binary, a private home and config,
//! sessions through the shim, and the daemon's resource use read from /proc.

use std::io::{BufRead, BufReader, Write};

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

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
    pub(crate) fn exe(&self) -> &Path {
        &self.exe
    }

    pub(crate) fn exe_dir(&self) -> PathBuf {
        self.exe.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    /// Starts the daemon; its error output when it did not come up.
    pub(crate) fn start(&self) -> anyhow::Result<()> {
        let started = self.broker(&["start"]).output()?;
        if !started.status.success() {
            bail!(
                "daemon did not start: {}",
                String::from_utf8_lossy(&started.stderr)
            );
        }
        Ok(())
    }

    /// Sends one request on a new session (`extra`: more `stdio` arguments, `--profile P`)
    /// and returns its answer.
    pub(crate) fn ask(&self, extra: &[&str], method: &str, params: &str) -> anyhow::Result<Value> {
        let mut args = vec!["stdio"];
        args.extend_from_slice(extra);
        ask_with(self.broker(&args), method, params)
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

/// Processes under `root` (not counting it), by walking /proc's parent links.
pub(crate) fn descendants(root: u64) -> Vec<u64> {
    let mut parent_of = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u64>().ok()) else {
                continue;
            };
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            let f: Vec<&str> = rest.split_whitespace().collect();
            if f.first() == Some(&"Z") {
                continue;
            }
            if let Some(ppid) = f.get(1).and_then(|p| p.parse::<u64>().ok()) {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}

/// The process's proportional set size (its share of the pages it shares), from
/// /proc/PID/smaps_rollup: what a process adds to the machine's memory, shared pages split.
pub(crate) fn pss_kib(pid: u64) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Pss:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

pub(crate) fn rss_kib(pid: u64) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// The process's resident set split as (anonymous, file-backed) KiB: heap and relocated data
/// against the binary's and libraries' pages.
pub(crate) fn rss_split_kib(pid: u64) -> (u64, u64) {
    (status_kib(pid, "RssAnon:"), status_kib(pid, "RssFile:"))
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
pub(crate) fn cpu_time(pid: u64) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    Duration::from_millis(stat_ticks(&stat) * 10)
}

/// utime + stime from a `/proc/PID/stat` line, by position: after the command's closing
/// parenthesis come state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
/// utime stime. (tpgid is -1 for a process without a terminal, a daemon's case: skipping the
/// fields that are not unsigned numbers shifted utime out of the sum.)
fn stat_ticks(stat: &str) -> u64 {
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    field(11) + field(12)
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

pub(crate) type Session = (
    std::process::Child,
    std::process::ChildStdin,
    BufReader<std::process::ChildStdout>,
);

/// A shim with its `initialize` sent (its answer is left for the caller to read).
pub(crate) fn open_session(env: &Env) -> anyhow::Result<Session> {
    open_session_with(env, &[])
}

/// As `open_session`, with more `stdio` arguments (`--profile P`).
pub(crate) fn open_session_with(env: &Env, extra: &[&str]) -> anyhow::Result<Session> {
    let mut args = vec!["stdio"];
    args.extend_from_slice(extra);
    open_with(env.broker(&args))
}

/// A session on `cmd` (a shim's command line) with its `initialize` sent.
pub(crate) fn open_with(mut cmd: Command) -> anyhow::Result<Session> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let stdout = BufReader::new(child.stdout.take().context("stdout")?);
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"soak","version":"1"}}}}}}"#
    )?;
    Ok((child, stdin, stdout))
}

/// Sends one request on a new session of `cmd` (a shim's command line) and returns its answer.
pub(crate) fn ask_with(cmd: Command, method: &str, params: &str) -> anyhow::Result<Value> {
    let (mut child, mut stdin, mut out) = open_with(cmd)?;
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{params}}}"#
    )?;
    stdin.flush()?;
    let mut line = String::new();
    let answer = loop {
        line.clear();
        if out.read_line(&mut line)? == 0 {
            bail!("the session ended before answering {method}");
        }
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if v["id"] == 1 {
            break v;
        }
    };
    drop(stdin);
    let _ = child.wait();
    Ok(answer)
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_ticks_are_read_by_position_when_the_process_has_no_terminal() {
        let stat = "4242 (mcp broker) S 1 4242 4242 0 -1 4194560 900 0 0 0 137 58 7 3 20 0 3 0";
        assert_eq!(super::stat_ticks(stat), 137 + 58);
    }
}
