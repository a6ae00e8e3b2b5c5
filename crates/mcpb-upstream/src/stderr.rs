//! An upstream's stderr: read line by line to the end (a closed pipe would kill the server with
//! SIGPIPE), cut when a line is too long, kept as a short tail for `status`, and logged at a
//! bounded rate.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use std::time::{Duration, Instant};

use mcpb_protocol::{FrameError, FrameReader};
use tokio::io::BufReader;
use tokio::process::ChildStderr;
use tokio::sync::Notify;

/// Lines of an upstream's stderr kept for its status.
pub(crate) const STDERR_TAIL: usize = 20;
/// Longest stderr line kept whole; longer ones are cut, never a reason to stop reading (a
/// server whose stderr pipe closes dies of SIGPIPE or hangs on EPIPE).
const STDERR_LINE: usize = 64 * 1024;
/// What of a cut line reaches the log and the status tail.
const STDERR_SHOWN: usize = 2048;
/// Lines per second one upstream may add to the daemon's log; the rest are counted, not logged.
const STDERR_LINES_PER_SEC: u32 = 50;

/// An upstream's last stderr lines, shared by its processes so they outlive one that failed,
/// and how many readers are still at a pipe.
#[derive(Default)]
pub(crate) struct StderrTail {
    lines: Mutex<VecDeque<String>>,
    readers: AtomicUsize,
    ended: Notify,
}

impl StderrTail {
    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines.lock().iter().cloned().collect()
    }

    pub(crate) fn clear(&self) {
        self.lines.lock().clear();
    }

    /// Keeps a line (already redacted).
    fn push(&self, text: String) {
        let mut t = self.lines.lock();
        if t.len() == STDERR_TAIL {
            t.pop_front();
        }
        t.push_back(text);
    }

    /// Waits, at most `limit`, until every reader reached the end of its pipe: a process that
    /// just failed has said all it will say, and its last words are what explains it.
    pub(crate) async fn settled(&self, limit: Duration) {
        let _ = tokio::time::timeout(limit, async {
            loop {
                let ended = self.ended.notified();
                tokio::pin!(ended);
                ended.as_mut().enable();
                if self.readers.load(Ordering::SeqCst) == 0 {
                    return;
                }
                ended.await;
            }
        })
        .await;
    }
}

/// Counts a reader in, and out when it is dropped.
struct Reading<'a>(&'a StderrTail);

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        self.0.readers.fetch_sub(1, Ordering::SeqCst);
        self.0.ended.notify_waiters();
    }
}

pub(crate) async fn stderr_loop(name: String, stderr: ChildStderr, tail: Arc<StderrTail>) {
    tail.readers.fetch_add(1, Ordering::SeqCst);
    let _reading = Reading(&tail);
    // Log lines are short and come seldom: a small buffer, held by every running upstream.
    let mut frames = FrameReader::new(BufReader::with_capacity(1024, stderr), STDERR_LINE);
    let mut budget = LogBudget::new(STDERR_LINES_PER_SEC);
    // Secrets are taken out of each line before it goes anywhere, with what came before in
    // view: a secret written across several lines is found in each of them.
    let mut secrets = mcpb_redact::LineStream::default();
    loop {
        let text = match frames.next_frame().await {
            Ok(Some(line)) => String::from_utf8_lossy(line).into_owned(),
            Ok(None) | Err(FrameError::Io(_)) => break,
            Err(FrameError::TooLarge { limit }) => {
                let prefix = frames.refused_prefix();
                let shown =
                    String::from_utf8_lossy(&prefix[..prefix.len().min(STDERR_SHOWN)]).into_owned();
                let text = format!("{shown}... (line over {limit} bytes, cut)");
                match frames.skip_rest_of_line().await {
                    Ok(true) => text,
                    _ => break,
                }
            }
        };
        let text = secrets.line(&text);
        // The log gets at most STDERR_SHOWN bytes of a line: with the line rate, one upstream
        // adds at most ~100 KiB a second to the daemon's log.
        let logged = if text.len() > STDERR_SHOWN + 64 {
            std::borrow::Cow::Owned(format!(
                "{}... ({} bytes, cut)",
                cut(&text, STDERR_SHOWN),
                text.len()
            ))
        } else {
            std::borrow::Cow::Borrowed(text.as_str())
        };
        match budget.take(Instant::now()) {
            LogTurn::Log => tracing::info!(target: "upstream_stderr", upstream = %name, "{logged}"),
            LogTurn::LogWithSkipped(skipped) => {
                tracing::warn!(target: "upstream_stderr", upstream = %name, skipped, "stderr lines not logged (over {STDERR_LINES_PER_SEC} a second)");
                tracing::info!(target: "upstream_stderr", upstream = %name, "{logged}");
            }
            LogTurn::Skip => {}
        }
        tail.push(text);
    }
}

/// At most `max` bytes of `text`, cut on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A per-second allowance of log lines.
struct LogBudget {
    per_sec: u32,
    window: Option<Instant>,
    used: u32,
    skipped: u64,
}

#[derive(Debug, PartialEq, Eq)]
enum LogTurn {
    Log,
    /// Log, after saying how many lines the last window dropped.
    LogWithSkipped(u64),
    Skip,
}

impl LogBudget {
    fn new(per_sec: u32) -> Self {
        Self {
            per_sec,
            window: None,
            used: 0,
            skipped: 0,
        }
    }

    fn take(&mut self, now: Instant) -> LogTurn {
        let fresh = self
            .window
            .is_none_or(|w| now.duration_since(w) >= Duration::from_secs(1));
        if fresh {
            self.window = Some(now);
            self.used = 0;
        }
        if self.used >= self.per_sec {
            self.skipped += 1;
            return LogTurn::Skip;
        }
        self.used += 1;
        match std::mem::take(&mut self.skipped) {
            0 => LogTurn::Log,
            n => LogTurn::LogWithSkipped(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_budget_drops_lines_over_the_rate_and_reports_how_many() {
        let mut b = LogBudget::new(2);
        let t0 = Instant::now();
        assert_eq!(b.take(t0), LogTurn::Log);
        assert_eq!(b.take(t0), LogTurn::Log);
        assert_eq!(b.take(t0), LogTurn::Skip);
        assert_eq!(b.take(t0 + Duration::from_millis(500)), LogTurn::Skip);
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(b.take(t1), LogTurn::LogWithSkipped(2));
        assert_eq!(b.take(t1), LogTurn::Log);
    }
}
