//! What became of each tool call that reached an upstream, on every path (raw, the facade's
//! call_tool, a code run's SDK): counted per upstream with recent latencies for `status` and
//! `top`, and written as one JSON line to logs/audit.jsonl (who, profile, tool, duration,
//! outcome, result size; argument values only when `broker.audit.arguments` says so).
//!
//! The file is written by a thread of its own through a bounded queue: a slow disk never stalls
//! the daemon's event loop, and a full queue drops lines (counted in `status`) instead of
//! growing. Lines are written in batches: the writer is woken when the queue stops being
//! empty, waits `BATCH` for more and writes them all at once, so a busy daemon pays one
//! thread wake-up and one write every `BATCH`, not one per call (a quarter of its CPU per call
//! went there).

use std::collections::{HashMap, VecDeque};
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use parking_lot::{Condvar, Mutex};
use serde::Serialize;

/// Latencies kept per upstream for the percentiles.
const RECENT: usize = 512;
/// Lines waiting for the writer thread; past this they are dropped and counted.
const QUEUE: usize = 4096;
/// How long the writer waits after the first line of a batch for the ones after it.
const BATCH: Duration = Duration::from_millis(20);
/// How long `flush` waits for the writer.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// Which door a call came through.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Via {
    /// A raw `tools/call` of an exposed tool.
    Raw,
    /// `broker.call_tool`.
    Facade,
    /// A code run's `call_tool`.
    Exec,
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    Ok,
    /// The tool answered with `isError: true`.
    ToolError,
    /// A JSON-RPC error: from the upstream, or the broker's (timeout, crash, cancelled).
    Error,
    /// No answer was waited for: the caller gave up on the call (a client's cancel, a code
    /// run's own time limit) or its session ended (the client went away, the daemon stopped).
    /// Not counted as the upstream's error, and its time is not a latency.
    Abandoned,
}

/// One call, as the audit log shows it.
#[derive(Debug, Serialize)]
pub(crate) struct CallRecord<'a> {
    pub(crate) ts: String,
    pub(crate) session: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) client: Option<&'a str>,
    pub(crate) profile: &'a str,
    pub(crate) upstream: &'a str,
    pub(crate) tool: &'a str,
    pub(crate) via: Via,
    pub(crate) ms: f64,
    pub(crate) outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// What the tool or upstream said when it failed, for `status`, `top` and the console
    /// only: it may repeat argument values, so the log gets it only as `error`, when the log
    /// keeps arguments.
    #[serde(skip)]
    pub(crate) detail: Option<String>,
    pub(crate) result_bytes: usize,
    /// Re-serialised compactly: a client's raw line breaks never split the file's lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) arguments: Option<serde_json::Value>,
}

impl CallRecord<'_> {
    /// The record as one JSON line (no newline), written by hand: it is written for every
    /// call, and serde's serializer spent a tenth of the daemon's instructions per call on it
    /// (`mcpb-bench`, docs/benchmarks.md). The same text as the derived `Serialize` (a test
    /// compares them).
    pub(crate) fn to_line(&self) -> String {
        let mut out = String::with_capacity(256 + self.error.as_ref().map_or(0, String::len));
        out.push_str("{\"ts\":");
        push_str(&mut out, &self.ts);
        out.push_str(",\"session\":");
        out.push_str(itoa::Buffer::new().format(self.session));
        if let Some(client) = self.client {
            out.push_str(",\"client\":");
            push_str(&mut out, client);
        }
        out.push_str(",\"profile\":");
        push_str(&mut out, self.profile);
        out.push_str(",\"upstream\":");
        push_str(&mut out, self.upstream);
        out.push_str(",\"tool\":");
        push_str(&mut out, self.tool);
        out.push_str(match self.via {
            Via::Raw => ",\"via\":\"raw\"",
            Via::Facade => ",\"via\":\"facade\"",
            Via::Exec => ",\"via\":\"exec\"",
        });
        out.push_str(",\"ms\":");
        push_ms(&mut out, self.ms);
        out.push_str(match self.outcome {
            Outcome::Ok => ",\"outcome\":\"ok\"",
            Outcome::ToolError => ",\"outcome\":\"tool_error\"",
            Outcome::Error => ",\"outcome\":\"error\"",
            Outcome::Abandoned => ",\"outcome\":\"abandoned\"",
        });
        if let Some(error) = &self.error {
            out.push_str(",\"error\":");
            push_str(&mut out, error);
        }
        out.push_str(",\"result_bytes\":");
        out.push_str(itoa::Buffer::new().format(self.result_bytes));
        if let Some(arguments) = &self.arguments {
            out.push_str(",\"arguments\":");
            push_json(&mut out, arguments);
        }
        out.push('}');
        out
    }
}

/// A string as JSON: copied when nothing in it needs an escape, else through serde.
fn push_str(out: &mut String, s: &str) {
    if s.bytes()
        .all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b != 0x7f)
    {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        push_json(out, s);
    }
}

/// A duration in milliseconds as serde_json writes an `f64` (its own float printer, `null`
/// where JSON has no number), without a `String` of its own.
fn push_ms(out: &mut String, ms: f64) {
    if ms.is_finite() {
        out.push_str(ryu::Buffer::new().format_finite(ms));
    } else {
        out.push_str("null");
    }
}

fn push_json(out: &mut String, v: &(impl Serialize + ?Sized)) {
    if let Ok(text) = serde_json::to_string(v) {
        out.push_str(&text);
    } else {
        out.push_str("null");
    }
}

/// Calls of one upstream since the daemon started.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct UpstreamCalls {
    pub(crate) calls: u64,
    pub(crate) errors: u64,
    pub(crate) p50_ms: Option<f64>,
    pub(crate) p99_ms: Option<f64>,
    /// The newest failed call's error (`top` shows it when the upstream itself is fine).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) last_error: Option<String>,
}

/// What `status` shows of the calls.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct CallsReport {
    pub(crate) total: u64,
    pub(crate) errors: u64,
    pub(crate) upstreams: HashMap<String, UpstreamCalls>,
    /// The audit log's path, when it is written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) audit_log: Option<String>,
    /// Audit lines dropped because the writer fell behind.
    pub(crate) audit_dropped: u64,
    /// The last write to the audit log failed (see the daemon's log for why).
    pub(crate) audit_failing: bool,
}

#[derive(Default)]
struct Counts {
    calls: u64,
    errors: u64,
    recent: VecDeque<f64>,
    last_error: Option<String>,
    /// The last hour, a bucket per minute that had calls, oldest first.
    minutes: VecDeque<mcpb_console::Bucket>,
}

/// Minutes of calls kept per upstream for the console's charts.
const MINUTES: u64 = 60;
/// Lines the console's live view may fall behind by before it is told it missed some.
const LIVE: usize = 256;

impl Counts {
    fn count_minute(&mut self, now_unix: u64, ms: f64, failed: bool) {
        let minute = now_unix - now_unix % 60;
        if self.minutes.back().is_none_or(|b| b.minute != minute) {
            while self
                .minutes
                .front()
                .is_some_and(|b| b.minute + MINUTES * 60 <= minute)
            {
                self.minutes.pop_front();
            }
            self.minutes.push_back(mcpb_console::Bucket {
                minute,
                ..Default::default()
            });
        }
        if let Some(b) = self.minutes.back_mut() {
            b.calls += 1;
            b.errors += u32::from(failed);
            b.ms_sum += ms;
            b.ms_max = b.ms_max.max(ms);
        }
    }
}

#[derive(Default)]
struct State {
    total: u64,
    errors: u64,
    dropped: u64,
    upstreams: HashMap<String, Counts>,
}

/// Lines on their way to the audit log's writer thread.
#[derive(Default)]
struct Queue {
    pending: Mutex<Pending>,
    /// The writer waits here for a first line.
    wake: Condvar,
    /// `flush` waits here for the writer to have written everything.
    written: Condvar,
}

#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    lines: usize,
    /// The writer took a batch and has not finished writing it.
    writing: bool,
}

impl Queue {
    /// Queues one line; false when the queue is full.
    fn push(&self, line: &[u8]) -> bool {
        let mut p = self.pending.lock();
        if p.lines >= QUEUE {
            return false;
        }
        let first = p.lines == 0;
        p.bytes.extend_from_slice(line);
        p.lines += 1;
        drop(p);
        if first {
            self.wake.notify_one();
        }
        true
    }

    /// The next batch: waits for a first line, then `BATCH` for the others.
    fn next_batch(&self) -> Vec<u8> {
        let mut p = self.pending.lock();
        while p.lines == 0 {
            self.wake.wait(&mut p);
        }
        drop(p);
        std::thread::sleep(BATCH);
        let mut p = self.pending.lock();
        p.lines = 0;
        p.writing = true;
        std::mem::take(&mut p.bytes)
    }

    fn batch_written(&self) {
        self.pending.lock().writing = false;
        self.written.notify_all();
    }

    /// Waits until every line queued before the call is written (or `FLUSH_WAIT` passed).
    fn flush(&self) {
        let deadline = std::time::Instant::now() + FLUSH_WAIT;
        let mut p = self.pending.lock();
        while p.lines > 0 || p.writing {
            if self.written.wait_until(&mut p, deadline).timed_out() {
                return;
            }
        }
    }
}

/// The daemon's record of calls: counts in memory, lines to the audit log.
pub(crate) struct Calls {
    state: Mutex<State>,
    /// Answered calls per profile and tool, for budgeted profiles.
    pub(crate) usage: Arc<crate::usage::Usage>,
    audit: Option<(PathBuf, Arc<Queue>)>,
    arguments: bool,
    failing: Arc<AtomicBool>,
    /// Each call's line for the console's live view: made when the console first asks.
    live: std::sync::OnceLock<tokio::sync::broadcast::Sender<Arc<str>>>,
}

impl Default for Calls {
    fn default() -> Self {
        Self::new(None, 0, false)
    }
}

impl Calls {
    /// Counts only, or also an audit log at `path` rotated past `max_bytes`.
    pub(crate) fn new(path: Option<PathBuf>, max_bytes: u64, arguments: bool) -> Self {
        let failing = Arc::new(AtomicBool::new(false));
        let usage = Arc::new(crate::usage::Usage::default());
        let audit = path.and_then(|p| {
            let queue = Arc::new(Queue::default());
            let (at, flag, from) = (p.clone(), failing.clone(), queue.clone());
            let learner = usage.clone();
            let spawned = std::thread::Builder::new().name("audit".into()).spawn(move || {
                // Off the daemon's start: the log's tail is read before the first batch.
                learner.learn_from(&at);
                let batches = std::iter::repeat_with(|| {
                    let batch = from.next_batch();
                    (batch, from.clone())
                });
                write_lines(
                    &at,
                    max_bytes,
                    batches.map(|(batch, queue)| Written(batch, Some(queue))),
                    &flag,
                );
            });
            match spawned {
                Ok(_) => Some((p, queue)),
                Err(e) => {
                    tracing::error!(error = %e, "cannot start the audit log's writer; calls are not audited");
                    None
                }
            }
        });
        Self {
            state: Mutex::default(),
            usage,
            audit,
            arguments,
            failing,
            live: std::sync::OnceLock::new(),
        }
    }

    /// Every call's line from now on (the audit log's, redacted the same way).
    pub(crate) fn watch(&self) -> tokio::sync::broadcast::Receiver<Arc<str>> {
        self.live
            .get_or_init(|| tokio::sync::broadcast::channel(LIVE).0)
            .subscribe()
    }

    /// Calls per minute over the last hour of each upstream named, oldest minute first, with
    /// the minutes without calls filled in.
    pub(crate) fn series<'a>(
        &self,
        upstreams: impl Iterator<Item = &'a str>,
        now_unix: u64,
    ) -> Vec<mcpb_console::Series> {
        let now = now_unix - now_unix % 60;
        let first = now.saturating_sub((MINUTES - 1) * 60);
        let s = self.state.lock();
        upstreams
            .map(|name| {
                let had = s.upstreams.get(name).map(|c| &c.minutes);
                let buckets = (0..MINUTES)
                    .map(|i| first + i * 60)
                    .map(|minute| {
                        had.and_then(|m| m.iter().find(|b| b.minute == minute))
                            .copied()
                            .unwrap_or(mcpb_console::Bucket {
                                minute,
                                ..Default::default()
                            })
                    })
                    .collect();
                mcpb_console::Series {
                    upstream: name.to_string(),
                    buckets,
                }
            })
            .collect()
    }

    /// Whether the audit log wants argument values (so the caller hands them over).
    pub(crate) fn wants_arguments(&self) -> bool {
        self.arguments && self.audit.is_some()
    }

    pub(crate) fn record(&self, rec: &CallRecord<'_>) {
        let live = self.live.get().filter(|l| l.receiver_count() > 0);
        let mut line = (self.audit.is_some() || live.is_some()).then(|| {
            let l = rec.to_line();
            match mcpb_redact::redact_own_json(&l) {
                std::borrow::Cow::Borrowed(_) => l.into_bytes(),
                std::borrow::Cow::Owned(redacted) => redacted.into_bytes(),
            }
        });
        if let (Some(live), Some(l)) = (live, line.as_ref()) {
            let _ = live.send(Arc::from(String::from_utf8_lossy(l)));
        }
        if let Some(l) = line.as_mut() {
            l.push(b'\n');
        }
        if matches!(rec.outcome, Outcome::Ok | Outcome::ToolError)
            && rec.client != Some(mcpb_protocol::CHECK_CLIENT)
        {
            self.usage.count(rec.profile, rec.tool);
        }
        let mut s = self.state.lock();
        s.total += 1;
        let failed = matches!(rec.outcome, Outcome::ToolError | Outcome::Error);
        if failed {
            s.errors += 1;
        }
        let counts = match s.upstreams.get_mut(rec.upstream) {
            Some(c) => c,
            None => s.upstreams.entry(rec.upstream.to_string()).or_default(),
        };
        counts.calls += 1;
        // The minute buckets chart answered calls' latency: an abandoned call's time is not one.
        if rec.outcome != Outcome::Abandoned {
            counts.count_minute(mcpb_config::unix_now(), rec.ms, failed);
        }
        if failed {
            counts.errors += 1;
            counts.last_error = Some(
                match (rec.detail.as_ref().or(rec.error.as_ref()), rec.outcome) {
                    (Some(e), _) => format!("{}: {e}", rec.tool),
                    (None, Outcome::ToolError) => {
                        format!("{}: the tool answered with an error", rec.tool)
                    }
                    (None, _) => format!("{}: failed", rec.tool),
                },
            );
        }
        if rec.outcome != Outcome::Abandoned {
            if counts.recent.len() == RECENT {
                counts.recent.pop_front();
            }
            counts.recent.push_back(rec.ms);
        }
        if let (Some((_, queue)), Some(line)) = (&self.audit, line)
            && !queue.push(&line)
        {
            s.dropped += 1;
        }
    }

    /// Writes out what the audit log's queue holds (the daemon is stopping).
    pub(crate) fn flush(&self) {
        if let Some((_, queue)) = &self.audit {
            queue.flush();
        }
    }

    pub(crate) fn report(&self) -> CallsReport {
        let s = self.state.lock();
        CallsReport {
            total: s.total,
            errors: s.errors,
            upstreams: s
                .upstreams
                .iter()
                .map(|(name, c)| {
                    let mut sorted: Vec<f64> = c.recent.iter().copied().collect();
                    sorted.sort_by(f64::total_cmp);
                    let at = |q: f64| {
                        let last = sorted.len().checked_sub(1)?;
                        // Nearest rank: the value at or above the q-th fraction of the sample.
                        let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, last + 1) - 1;
                        sorted.get(i).map(|v| (v * 1000.0).round() / 1000.0)
                    };
                    let calls = UpstreamCalls {
                        calls: c.calls,
                        errors: c.errors,
                        p50_ms: at(0.5),
                        p99_ms: at(0.99),
                        last_error: c
                            .last_error
                            .as_deref()
                            .map(|e| mcpb_redact::redact(e).into_owned()),
                    };
                    (name.clone(), calls)
                })
                .collect(),
            audit_log: self.audit.as_ref().map(|(p, _)| p.display().to_string()),
            audit_dropped: s.dropped,
            audit_failing: self.failing.load(Ordering::Relaxed),
        }
    }
}

/// A record's time stamp: the time now as RFC 3339 in UTC with milliseconds
/// (`2026-12-08T01:44:46.362Z`). The date and time
/// to the second are formatted once per second and kept: every call's record carries a stamp,
/// and formatting the whole of it each time was a tenth of the record's cost.
pub(crate) fn now_stamp() -> String {
    thread_local! {
        static SECOND: std::cell::RefCell<(u64, String)> = const { std::cell::RefCell::new((u64::MAX, String::new())) };
    }
    let now = SystemTime::now();
    let since = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    SECOND.with_borrow_mut(|(second, prefix)| {
        if *second != since.as_secs() {
            let whole = SystemTime::UNIX_EPOCH + Duration::from_secs(since.as_secs());
            *prefix = humantime::format_rfc3339_seconds(whole).to_string();
            prefix.pop(); // the `Z`
            *second = since.as_secs();
        }
        let millis = since.subsec_millis();
        let mut out = String::with_capacity(prefix.len() + 5);
        out.push_str(prefix);
        out.push('.');
        for digit in [millis / 100, millis / 10 % 10, millis % 10] {
            out.push(char::from(b'0' + digit as u8));
        }
        out.push('Z');
        out
    })
}

pub(crate) fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

/// Appends to the log, never through a link (the runtime dir is the user's alone, but a link
/// there would send call records elsewhere), and keeps it the owner's only.
fn open(path: &Path) -> std::io::Result<fs::File> {
    use std::os::unix::fs::PermissionsExt;
    let file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)?;
    file.set_permissions(fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

/// A batch of lines for `write_lines`; the queue it came from is told when it is written.
struct Written(Vec<u8>, Option<Arc<Queue>>);

impl Drop for Written {
    fn drop(&mut self) {
        if let Some(q) = &self.1 {
            q.batch_written();
        }
    }
}

impl From<Vec<u8>> for Written {
    fn from(line: Vec<u8>) -> Self {
        Written(line, None)
    }
}

/// The writer thread: appends each batch of lines, rotating past `max` bytes. A failure is said once in
/// the daemon's log (and shown in `status`) until a write succeeds again; the next line tries
/// again (a full disk may get room).
fn write_lines<W: Into<Written>>(
    path: &Path,
    max: u64,
    lines: impl Iterator<Item = W>,
    failing: &AtomicBool,
) {
    let mut file: Option<fs::File> = None;
    let mut size = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let mut said_rotate = false;
    for batch in lines {
        let batch: Written = batch.into();
        let line = &batch.0;
        if size > max && max > 0 {
            file = None;
            match mcpb_config::layout::rotate(path) {
                Ok(()) => {
                    size = 0;
                    said_rotate = false;
                }
                Err(e) if !said_rotate => {
                    said_rotate = true;
                    tracing::warn!(error = %e, "cannot rotate the audit log; it grows until it can");
                }
                Err(_) => {}
            }
        }
        let written = match file.as_mut() {
            Some(f) => f.write_all(line),
            None => open(path).and_then(|mut f| {
                let w = f.write_all(line);
                file = Some(f);
                w
            }),
        };
        match written {
            Ok(()) => {
                size += line.len() as u64;
                failing.store(false, Ordering::Relaxed);
            }
            Err(e) => {
                file = None;
                if !failing.swap(true, Ordering::Relaxed) {
                    tracing::error!(error = %e, path = %path.display(), "cannot write the audit log");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamp_is_rfc3339_with_milliseconds_and_the_time_now() {
        for _ in 0..3 {
            let before = SystemTime::now() - Duration::from_millis(1);
            let stamp = now_stamp();
            let after = SystemTime::now();
            assert_eq!(stamp.len(), "2026-12-08T01:44:46.362Z".len(), "{stamp}");
            let read = humantime::parse_rfc3339(&stamp).unwrap();
            assert!(before <= read && read <= after, "{stamp}");
            std::thread::sleep(Duration::from_millis(600));
        }
    }

    fn rec<'a>(upstream: &'a str, ms: f64, outcome: Outcome) -> CallRecord<'a> {
        CallRecord {
            ts: now_stamp(),
            session: 1,
            client: Some("codex"),
            profile: "default",
            upstream,
            tool: "t",
            via: Via::Raw,
            ms,
            outcome,
            error: None,
            detail: None,
            result_bytes: 10,
            arguments: None,
        }
    }

    #[test]
    fn the_hand_written_line_is_the_derived_serialisation() {
        let mut r = rec("u\"p", 1.25, Outcome::ToolError);
        r.client = Some("cl\u{1}ient\\");
        r.tool = "t\u{e9}\u{2028}";
        r.error = Some("bad \"x\"\n".into());
        r.arguments = Some(serde_json::json!({"a": [1, 2.5, "\u{7f}"]}));
        for (via, outcome) in [
            (Via::Raw, Outcome::Ok),
            (Via::Facade, Outcome::Error),
            (Via::Exec, Outcome::Abandoned),
            (Via::Raw, Outcome::ToolError),
        ] {
            r.via = via;
            r.outcome = outcome;
            assert_eq!(r.to_line(), serde_json::to_string(&r).unwrap());
        }
        let plain = rec("a", 0.001, Outcome::Ok);
        assert_eq!(plain.to_line(), serde_json::to_string(&plain).unwrap());
    }

    #[test]
    fn counts_and_percentiles_per_upstream() {
        let calls = Calls::default();
        for i in 1..=100 {
            calls.record(&rec("a", f64::from(i), Outcome::Ok));
        }
        calls.record(&rec("b", 5.0, Outcome::Error));
        let r = calls.report();
        assert_eq!((r.total, r.errors), (101, 1));
        let a = &r.upstreams["a"];
        assert_eq!((a.calls, a.errors), (100, 0));
        assert_eq!(a.p50_ms, Some(50.0));
        assert_eq!(a.p99_ms, Some(99.0));
        assert_eq!(r.upstreams["b"].errors, 1);
        assert!(r.upstreams["b"].last_error.is_some());
        assert!(r.upstreams["a"].last_error.is_none());
        assert!(r.audit_log.is_none());
    }

    #[test]
    fn keeps_only_recent_latencies() {
        let calls = Calls::default();
        for _ in 0..RECENT {
            calls.record(&rec("a", 1000.0, Outcome::Ok));
        }
        for _ in 0..RECENT {
            calls.record(&rec("a", 1.0, Outcome::Ok));
        }
        assert_eq!(calls.report().upstreams["a"].p99_ms, Some(1.0));
    }

    #[test]
    fn never_writes_through_a_link_and_keeps_the_file_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "").unwrap();
        let path = dir.path().join("audit.jsonl");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        let failing = AtomicBool::new(false);
        write_lines(&path, 0, std::iter::once(b"{}\n".to_vec()), &failing);
        assert_eq!(fs::read_to_string(&victim).unwrap(), "");
        assert!(
            failing.load(Ordering::Relaxed),
            "the failure is shown in status"
        );
        fs::remove_file(&path).unwrap();
        fs::write(&path, "").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        write_lines(&path, 0, std::iter::once(b"{}\n".to_vec()), &failing);
        assert!(!failing.load(Ordering::Relaxed));
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn lines_are_written_in_batches_and_flushed_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let calls = Calls::new(Some(path.clone()), 0, false);
        let started = std::time::Instant::now();
        calls.flush();
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "nothing queued, no wait"
        );
        for i in 0..300 {
            calls.record(&rec(if i % 2 == 0 { "a" } else { "b" }, 1.0, Outcome::Ok));
        }
        calls.flush();
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 300);
        assert!(
            text.lines()
                .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
        );
        assert_eq!(calls.report().audit_dropped, 0);
        // More than the queue holds at once is dropped and counted, never blocks.
        for _ in 0..QUEUE + 10 {
            calls.record(&rec("a", 1.0, Outcome::Ok));
        }
        calls.flush();
        let written = fs::read_to_string(&path).unwrap().lines().count() - 300;
        let dropped = calls.report().audit_dropped as usize;
        assert_eq!(written + dropped, QUEUE + 10);
    }

    #[test]
    fn writes_json_lines_and_rotates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let lines = (0..50).map(|i| format!("{{\"n\":{i}}}\n").into_bytes());
        write_lines(&path, 100, lines, &AtomicBool::new(false));
        let live = fs::read_to_string(&path).unwrap();
        assert!(live.len() <= 100 + 10, "{live}");
        assert!(live.ends_with("{\"n\":49}\n"));
        use mcpb_config::layout::numbered;
        assert!(numbered(&path, 1).exists() && numbered(&path, 3).exists());
        assert!(!numbered(&path, 4).exists());
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
