//! What a run answers: its status, result, output, the calls it made, its artifacts and what it
//! used. The model reads it, so the text line says in a few words what happened.

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// The program failed (an exception, a non-zero exit).
    Error,
    /// A limit was reached (calls, output, quota); the program may still have finished.
    Limit,
    /// The wall-clock deadline passed; the whole process tree was killed.
    Timeout,
    /// The sandbox stopped the program (a forbidden system call) or the SDK channel was abused.
    Violation,
    /// The run never started: a layer of the sandbox could not be applied, or the request was
    /// not allowed.
    Refused,
}

#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    pub tool: String,
    pub ms: u64,
    /// ok | error | unknown | refused | timeout | limit
    pub outcome: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct ArtifactRecord {
    pub id: String,
    pub name: String,
    pub bytes: usize,
    /// utf-8, or base64 for bytes that are not text.
    pub encoding: &'static str,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Usage {
    pub wall_ms: u64,
    pub cpu_ms: u64,
    pub max_rss_kb: u64,
    pub calls: u64,
    pub output_bytes: u64,
    /// The run's own host uid, when the daemon is root (each concurrent run has its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunAnswer {
    pub status: Status,
    /// What `result()` set, or null.
    pub result: Value,
    pub stdout: String,
    pub stderr: String,
    pub calls: Vec<CallRecord>,
    pub artifacts: Vec<ArtifactRecord>,
    pub usage: Usage,
    /// Why, for every status but ok (the failing layer, the limit, the signal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Set when output went over max_output_kb and was cut.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Sandbox setup, by layer, in microseconds since the helper started (for benchmarks and
    /// `--verbose`; never in the model's answer).
    #[serde(skip)]
    pub layers: Vec<(String, u64)>,
}

impl RunAnswer {
    pub fn refused(reason: impl Into<String>) -> Self {
        Self {
            status: Status::Refused,
            result: Value::Null,
            stdout: String::new(),
            stderr: String::new(),
            calls: Vec::new(),
            artifacts: Vec::new(),
            usage: Usage::default(),
            reason: Some(reason.into()),
            truncated: false,
            layers: Vec::new(),
        }
    }

    /// One line for the model; the details are in the structured answer.
    pub fn summary(&self) -> String {
        let what = match self.status {
            Status::Ok => "run ok",
            Status::Error => "run failed",
            Status::Limit => "run hit a limit",
            Status::Timeout => "run timed out",
            Status::Violation => "run stopped by the sandbox",
            Status::Refused => "run refused",
        };
        let mut line = format!(
            "{what} in {} ms, {} tool call{}",
            self.usage.wall_ms,
            self.calls.len(),
            if self.calls.len() == 1 { "" } else { "s" }
        );
        if let Some(r) = &self.reason {
            line.push_str(": ");
            line.push_str(r);
        }
        line
    }

    /// The answer as a tool result: structuredContent plus the same as text.
    pub fn to_tool_result(&self) -> Value {
        let data = serde_json::to_value(self).unwrap_or(Value::Null);
        // Clients that read only text get the part a model acts on; the rest is structured.
        let short = serde_json::json!({
            "result": data["result"], "stdout": data["stdout"], "stderr": data["stderr"],
            "artifacts": data["artifacts"],
        });
        serde_json::json!({
            "content": [{"type": "text", "text": format!("{}\n{short}", self.summary())}],
            "structuredContent": data,
            "isError": matches!(self.status, Status::Refused | Status::Violation),
        })
    }
}
