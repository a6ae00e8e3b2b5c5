//! The daemon's side of the SDK channel: JSON lines from the program, each a call_tool,
//! save_artifact or result request, answered on the same channel. Here the run's own rules
//! apply before anything reaches the broker: the allow list, max_calls, max_concurrent_calls
//! and per_call_ms. A frame over the size limit is abuse (the run is stopped), a malformed one
//! gets an error answer.

use std::time::{Duration, Instant};

use base64::Engine;
use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use crate::answer::{ArtifactRecord, CallRecord};

/// Largest frame the program may send (arguments of one call, one artifact).
pub const MAX_FRAME_BYTES: usize = 16 << 20;
/// Most artifacts one run may save.
pub(crate) const MAX_ARTIFACTS: usize = 32;

/// What the broker says about one call of a run.
pub enum CallOutcome {
    /// The tool's result, a CallToolResult.
    Result(Value),
    /// Not a tool this profile sees (hidden, quarantined, absent).
    Unknown,
    /// Policy refused it (a mutating tool in a read-only run).
    Refused(String),
    /// The upstream or the broker failed.
    Failed(String),
}

/// The broker as a run sees it: the one path every tool call takes.
pub trait ToolHost: Sync {
    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
        read_only: bool,
    ) -> BoxFuture<'a, CallOutcome>;
    /// Stores an artifact's text for the run's profile and returns its id.
    fn save_artifact(&self, text: &str) -> Result<String, String>;
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum FrameError {
    TooLarge,
    Io(String),
}

/// The next line of at most `max` bytes; `None` at the end. Cancel-safe: what was read stays
/// in `buf` for the next call.
pub(crate) async fn next_frame<R: AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> Result<Option<Vec<u8>>, FrameError> {
    loop {
        let chunk = r
            .fill_buf()
            .await
            .map_err(|e| FrameError::Io(e.to_string()))?;
        if chunk.is_empty() {
            // A truncated last frame is dropped: the program ended mid-write.
            buf.clear();
            return Ok(None);
        }
        if let Some(i) = chunk.iter().position(|b| *b == b'\n') {
            if buf.len() + i > max {
                return Err(FrameError::TooLarge);
            }
            buf.extend_from_slice(&chunk[..i]);
            r.consume(i + 1);
            return Ok(Some(std::mem::take(buf)));
        }
        let n = chunk.len();
        buf.extend_from_slice(chunk);
        r.consume(n);
        if buf.len() > max {
            return Err(FrameError::TooLarge);
        }
    }
}

#[derive(Deserialize)]
struct Frame {
    id: Option<Value>,
    method: String,
    #[serde(default)]
    params: Value,
}

pub(crate) fn answer_line(id: &Value, body: Value) -> Vec<u8> {
    let mut obj = match body {
        Value::Object(m) => m,
        other => {
            let mut m = serde_json::Map::new();
            m.insert("result".into(), other);
            m
        }
    };
    obj.insert("id".into(), id.clone());
    let mut line = serde_json::to_vec(&Value::Object(obj)).unwrap_or_default();
    line.push(b'\n');
    line
}

fn error(kind: &str, message: impl Into<String>) -> Value {
    json!({"error": {"kind": kind, "message": message.into()}})
}

/// What `call_tool` returns to the snippet: structured content, else JSON text, else text.
fn sdk_value(result: &Value) -> Result<Value, String> {
    let text = || {
        result
            .get("content")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    };
    if result.get("isError") == Some(&Value::Bool(true)) {
        let t = text();
        return Err(if t.is_empty() {
            "the tool failed".into()
        } else {
            t
        });
    }
    if let Some(s) = result.get("structuredContent").filter(|s| !s.is_null()) {
        return Ok(s.clone());
    }
    let t = text();
    Ok(serde_json::from_str::<Value>(&t).unwrap_or(Value::String(t)))
}

/// The run's rules and what it has done so far.
pub(crate) struct Calls {
    pub(crate) allow: Vec<glob::Pattern>,
    pub(crate) read_only: bool,
    pub(crate) max_calls: u64,
    pub(crate) max_concurrent: u64,
    pub(crate) per_call: Duration,
    pub(crate) made: u64,
    pub(crate) in_flight: u64,
    pub(crate) limit_hit: Option<String>,
    pub(crate) result: Option<Value>,
    pub(crate) artifacts: Vec<ArtifactRecord>,
    pub(crate) artifact_bytes_left: usize,
    /// Finished calls, refused ones included (the first MAX_RECORDS).
    pub(crate) records: Vec<CallRecord>,
    /// Calls past MAX_RECORDS.
    pub(crate) unlisted: u64,
    /// Requests refused so far.
    pub(crate) refused: u64,
}

/// What one frame asks of the run loop.
pub(crate) enum Step<'a> {
    /// Answer at once.
    Answer(Vec<u8>),
    /// Answer when the call finishes.
    Call(BoxFuture<'a, (Vec<u8>, CallRecord)>),
    /// Stop the run: the program is flooding the channel with refused requests.
    Abuse(String),
}

/// Calls kept in the answer's list; later ones are only counted.
const MAX_RECORDS: usize = 200;
/// Refused requests (bad frames, calls past a limit) a program may send before the run stops.
const MAX_REFUSED: u64 = 20_000;

/// The frame's `id` when the frame itself cannot be parsed: both SDKs write it first.
fn leading_id(frame: &[u8]) -> Value {
    let head = &frame[..frame.len().min(40)];
    let text = String::from_utf8_lossy(head);
    let Some(rest) = text.split_once("\"id\":").map(|(_, r)| r.trim_start()) else {
        return Value::Null;
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<u64>().map_or(Value::Null, Value::from)
}

impl Calls {
    fn allowed(&self, name: &str) -> bool {
        self.allow.iter().any(|p| p.matches(name))
    }

    /// Keeps a finished call in the answer's list, up to MAX_RECORDS.
    pub(crate) fn record(&mut self, record: CallRecord) {
        if self.records.len() < MAX_RECORDS {
            self.records.push(record);
        } else {
            self.unlisted += 1;
        }
    }

    fn refused(&mut self) -> Option<Step<'static>> {
        self.refused += 1;
        (self.refused > MAX_REFUSED).then(|| {
            Step::Abuse(format!(
                "the program sent {MAX_REFUSED} requests the broker had to refuse"
            ))
        })
    }

    pub(crate) fn handle<'a>(&mut self, raw: &[u8], host: &'a dyn ToolHost) -> Step<'a> {
        let frame: Frame = match serde_json::from_slice(raw) {
            Ok(f) => f,
            Err(e) => {
                if let Some(stop) = self.refused() {
                    return stop;
                }
                return Step::Answer(answer_line(
                    &leading_id(raw),
                    error("protocol", format!("malformed SDK frame: {e}")),
                ));
            }
        };
        let id = frame.id.unwrap_or(Value::Null);
        match frame.method.as_str() {
            "call_tool" => self.call(id, &frame.params, host),
            "save_artifact" => Step::Answer(answer_line(&id, self.save(&frame.params, host))),
            "result" => {
                self.result = Some(frame.params.get("value").cloned().unwrap_or(Value::Null));
                Step::Answer(answer_line(&id, json!({"result": true})))
            }
            other => {
                if let Some(stop) = self.refused() {
                    return stop;
                }
                let shown: String = other.chars().take(40).collect();
                Step::Answer(answer_line(
                    &id,
                    error("protocol", format!("unknown SDK method {shown:?}")),
                ))
            }
        }
    }

    fn call<'a>(&mut self, id: Value, params: &Value, host: &'a dyn ToolHost) -> Step<'a> {
        // Exposed names are at most a few hundred bytes; more is never echoed back.
        let name: String = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .chars()
            .take(300)
            .collect();
        let refuse =
            |this: &mut Self, kind: &str, outcome: &'static str, message: String, name: &str| {
                if let Some(stop) = this.refused() {
                    return stop;
                }
                this.record(CallRecord {
                    tool: name.chars().take(200).collect(),
                    ms: 0,
                    outcome,
                });
                Step::Answer(answer_line(&id, error(kind, message)))
            };
        if self.made >= self.max_calls {
            let why = format!("max_calls ({}) reached", self.max_calls);
            self.limit_hit.get_or_insert(why.clone());
            return refuse(self, "limit", "limit", why, &name);
        }
        if self.in_flight >= self.max_concurrent {
            let why = format!(
                "max_concurrent_calls ({}) calls already in flight",
                self.max_concurrent
            );
            return refuse(self, "limit", "limit", why, &name);
        }
        self.made += 1;
        if !self.allowed(&name) {
            return refuse(
                self,
                "unknown",
                "unknown",
                format!("unknown tool: {name} (not visible to this run: check its allow list)"),
                &name,
            );
        }
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(a @ Value::Object(_)) => a.clone(),
            Some(_) => {
                return refuse(
                    self,
                    "protocol",
                    "error",
                    "arguments must be an object".into(),
                    &name,
                );
            }
        };
        self.in_flight += 1;
        let per_call = self.per_call;
        let read_only = self.read_only;
        Step::Call(Box::pin(async move {
            let start = Instant::now();
            let got = tokio::time::timeout(per_call, host.call(&name, arguments, read_only)).await;
            let (body, outcome) = match got {
                Err(_) => (
                    error(
                        "timeout",
                        format!(
                            "{name} took longer than per_call_ms ({} ms)",
                            per_call.as_millis()
                        ),
                    ),
                    "timeout",
                ),
                Ok(CallOutcome::Result(r)) => match sdk_value(&r) {
                    Ok(v) => (json!({ "result": v }), "ok"),
                    Err(m) => (error("tool", m), "error"),
                },
                Ok(CallOutcome::Unknown) => {
                    (error("unknown", format!("unknown tool: {name}")), "unknown")
                }
                Ok(CallOutcome::Refused(m)) => (error("refused", m), "refused"),
                Ok(CallOutcome::Failed(m)) => (error("error", m), "error"),
            };
            let record = CallRecord {
                tool: name,
                ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
                outcome,
            };
            (answer_line(&id, body), record)
        }))
    }

    fn save(&mut self, params: &Value, host: &dyn ToolHost) -> Value {
        if self.artifacts.len() >= MAX_ARTIFACTS {
            return error(
                "limit",
                format!("a run may save at most {MAX_ARTIFACTS} artifacts"),
            );
        }
        let name: String = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("artifact")
            .chars()
            .take(200)
            .collect();
        let (text, bytes, encoding) = if let Some(t) = params.get("text").and_then(Value::as_str) {
            (t.to_string(), t.len(), "utf-8")
        } else if let Some(b) = params.get("base64").and_then(Value::as_str) {
            match base64::engine::general_purpose::STANDARD.decode(b) {
                Ok(raw) => match String::from_utf8(raw) {
                    Ok(t) => {
                        let n = t.len();
                        (t, n, "utf-8")
                    }
                    Err(e) => (b.to_string(), e.into_bytes().len(), "base64"),
                },
                Err(e) => return error("protocol", format!("base64: {e}")),
            }
        } else {
            return error("protocol", "save_artifact needs text or base64");
        };
        if text.len() > self.artifact_bytes_left {
            return error("limit", "the run's artifacts are over their size cap");
        }
        match host.save_artifact(&text) {
            Ok(id) => {
                self.artifact_bytes_left -= text.len();
                self.artifacts.push(ArtifactRecord {
                    id: id.clone(),
                    name,
                    bytes,
                    encoding,
                });
                json!({"result": {"id": id}})
            }
            Err(e) => error("error", e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_are_lines_under_a_cap() {
        let data: &[u8] = b"{\"a\":1}\n{\"b\":2}\npartial";
        let mut r = tokio::io::BufReader::new(data);
        let mut buf = Vec::new();
        assert_eq!(
            next_frame(&mut r, &mut buf, 100).await.unwrap().unwrap(),
            b"{\"a\":1}"
        );
        assert_eq!(
            next_frame(&mut r, &mut buf, 100).await.unwrap().unwrap(),
            b"{\"b\":2}"
        );
        assert_eq!(next_frame(&mut r, &mut buf, 100).await.unwrap(), None);
        let big = vec![b'x'; 1000];
        let mut r = tokio::io::BufReader::with_capacity(64, big.as_slice());
        assert_eq!(
            next_frame(&mut r, &mut Vec::new(), 100).await,
            Err(FrameError::TooLarge)
        );
    }

    #[test]
    fn the_snippet_gets_structured_then_json_then_text() {
        let structured =
            json!({"content": [{"type": "text", "text": "x"}], "structuredContent": {"a": 1}});
        assert_eq!(sdk_value(&structured).unwrap(), json!({"a": 1}));
        let json_text = json!({"content": [{"type": "text", "text": "[1,2]"}]});
        assert_eq!(sdk_value(&json_text).unwrap(), json!([1, 2]));
        let text = json!({"content": [{"type": "text", "text": "hello"}]});
        assert_eq!(sdk_value(&text).unwrap(), json!("hello"));
        let err = json!({"content": [{"type": "text", "text": "no such file"}], "isError": true});
        assert_eq!(sdk_value(&err).unwrap_err(), "no such file");
    }
}
