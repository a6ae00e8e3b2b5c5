//! Which tools each profile's clients call, and how often: what a budgeted profile lists beside
//! the facade. Counted as calls are recorded, and learnt at start from the tail of the audit
//! log, so a restart does not forget what the clients use.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use parking_lot::Mutex;

/// How much of the audit log's end is read at start: thousands of calls, read in milliseconds.
const TAIL: u64 = 2 << 20;

#[derive(Default)]
pub(crate) struct Usage {
    /// profile → exposed tool name → calls.
    counts: Mutex<HashMap<String, HashMap<String, u64>>>,
}

impl Usage {
    pub(crate) fn count(&self, profile: &str, tool: &str) {
        let mut counts = self.counts.lock();
        let of = match counts.get_mut(profile) {
            Some(m) => m,
            None => counts.entry(profile.to_string()).or_default(),
        };
        match of.get_mut(tool) {
            Some(n) => *n += 1,
            None => {
                of.insert(tool.to_string(), 1);
            }
        }
    }

    /// Calls of `tool` by `profile`'s clients.
    pub(crate) fn calls(&self, profile: &str, tool: &str) -> u64 {
        self.counts
            .lock()
            .get(profile)
            .and_then(|m| m.get(tool))
            .copied()
            .unwrap_or(0)
    }

    /// Adds the answered calls of the audit log's last `TAIL` bytes. An unreadable log is
    /// nothing learnt, never an error: the counts start again from the calls to come.
    pub(crate) fn learn_from(&self, audit_log: &Path) {
        #[derive(serde::Deserialize)]
        struct Line {
            profile: String,
            tool: String,
            outcome: String,
            #[serde(default)]
            client: Option<String>,
        }
        let Ok(mut file) = std::fs::File::open(audit_log) else {
            return;
        };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let start = len.saturating_sub(TAIL);
        if file.seek(SeekFrom::Start(start)).is_err() {
            return;
        }
        let mut bytes = Vec::new();
        if file.take(TAIL).read_to_end(&mut bytes).is_err() {
            return;
        }
        let text = String::from_utf8_lossy(&bytes);
        // The first line may be cut by the start offset: it does not parse and is skipped.
        for line in text.lines() {
            if let Ok(l) = serde_json::from_str::<Line>(line)
                && matches!(l.outcome.as_str(), "ok" | "tool_error")
                && l.client.as_deref() != Some(mcpb_protocol::CHECK_CLIENT)
            {
                self.count(&l.profile, &l.tool);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answered_calls_of_the_audit_log_are_learnt_per_profile() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        let line = |p: &str, t: &str, o: &str| {
            format!(
                "{{\"ts\":\"x\",\"session\":1,\"profile\":\"{p}\",\"upstream\":\"u\",\"tool\":\"{t}\",\"via\":\"raw\",\"ms\":1.0,\"outcome\":\"{o}\",\"result_bytes\":0}}\n"
            )
        };
        let text = [
            "half a line}\n".to_string(),
            line("codex", "u_a", "ok"),
            line("codex", "u_a", "tool_error"),
            line("codex", "u_b", "error"),
            line("claude", "u.a", "ok"),
            // The broker's own checks are no client's calls.
            line("claude", "u.b", "ok").replace(
                "\"session\":1,",
                "\"session\":1,\"client\":\"mcp-broker-check\",",
            ),
        ]
        .concat();
        std::fs::write(&log, text).unwrap();
        let usage = Usage::default();
        usage.learn_from(&log);
        usage.count("codex", "u_a");
        assert_eq!(usage.calls("codex", "u_a"), 3);
        assert_eq!(usage.calls("codex", "u_b"), 0, "a failed call is no use");
        assert_eq!(usage.calls("claude", "u.a"), 1);
        assert_eq!(usage.calls("claude", "u.b"), 0);
        usage.learn_from(&dir.path().join("absent"));
    }
}
