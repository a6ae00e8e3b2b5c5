//! The daemon's side of the SDK channel: JSON lines from the program, each a call_tool,
//! save_artifact or result request, answered on the same channel. Here the run's own rules
//! apply before anything reaches the broker: the allow list, max_calls, max_concurrent_calls
//! and per_call_ms. A frame over the size limit is abuse (the run is stopped), a malformed one
//! gets an error answer.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use futures_util::future::BoxFuture;
use mcpb_protocol::Line;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::AsyncBufRead;

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
        arguments: Box<RawValue>,
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

/// The bytes every run's SDK frames may hold in the daemon at once (`broker.exec.frame_budget_mb`).
/// A frame is charged as it is read and while what it carries (a result, a call's arguments)
/// is kept; over the budget it is refused, not buffered.
#[derive(Clone)]
pub(crate) struct FrameBudget(Arc<AtomicUsize>);

impl FrameBudget {
    pub(crate) fn new(bytes: usize) -> Self {
        Self(Arc::new(AtomicUsize::new(bytes)))
    }

    /// What is left.
    pub(crate) fn available(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    fn take(&self, bytes: usize) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(bytes)
            })
            .is_ok()
    }

    pub(crate) fn empty(&self) -> Held {
        Held {
            budget: self.clone(),
            bytes: 0,
        }
    }
}

/// Bytes taken from a [`FrameBudget`], given back when dropped.
pub(crate) struct Held {
    budget: FrameBudget,
    bytes: usize,
}

impl Held {
    /// Takes at least `to` bytes in all, in steps of a mebibyte; false when the budget is out.
    fn grow(&mut self, to: usize) -> bool {
        if to <= self.bytes {
            return true;
        }
        let step = (to - self.bytes).next_multiple_of(1 << 20);
        if self.budget.take(step) {
            self.bytes += step;
            true
        } else {
            false
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.0.fetch_add(self.bytes, Ordering::AcqRel);
    }
}

/// Frames up to this size are not charged: small frames are the common case and cost little.
const FREE_FRAME_BYTES: usize = 64 << 10;

/// One frame off the channel.
pub(crate) enum Incoming {
    /// A whole line, with the budget it holds.
    Line(Vec<u8>, Held),
    /// A line the budget had no room for, read and thrown away; its leading id to answer.
    OverBudget { id: Value, bytes: usize },
}

/// Reads the program's frames: the protocol's capped line reader (lines of at most `max`
/// bytes; a line cut by the program's end is dropped), each line charged to the budget past its
/// first 64 KiB as it grows. Cancel-safe: what was read stays here for the next call.
pub(crate) struct FrameReader<R> {
    lines: mcpb_protocol::FrameReader<R>,
    held: Held,
}

impl<R: AsyncBufRead + Unpin> FrameReader<R> {
    pub(crate) fn new(r: R, max: usize, budget: &FrameBudget) -> Self {
        Self {
            lines: mcpb_protocol::FrameReader::new(r, max).whole_lines_only(),
            held: budget.empty(),
        }
    }

    /// The next frame; `None` at the end.
    pub(crate) async fn next(&mut self) -> Result<Option<Incoming>, FrameError> {
        let held = &mut self.held;
        // A line over the budget holds nothing while it is read to its end.
        let hold = |bytes: usize| {
            if bytes <= FREE_FRAME_BYTES || held.grow(bytes) {
                return true;
            }
            *held = held.budget.empty();
            false
        };
        let refused = match self.lines.next_line(hold).await {
            Ok(Line::Frame(_)) => None,
            Ok(Line::Refused { head, bytes }) => Some((leading_id(head), bytes)),
            Ok(Line::End) => {
                self.release();
                return Ok(None);
            }
            Err(e) => {
                self.release();
                return Err(match e {
                    mcpb_protocol::FrameError::TooLarge { .. } => FrameError::TooLarge,
                    mcpb_protocol::FrameError::Io(e) => FrameError::Io(e.to_string()),
                });
            }
        };
        if let Some((id, bytes)) = refused {
            self.release();
            return Ok(Some(Incoming::OverBudget { id, bytes }));
        }
        let fresh = self.held.budget.empty();
        let held = std::mem::replace(&mut self.held, fresh);
        Ok(Some(Incoming::Line(self.lines.take_frame(), held)))
    }

    /// Gives back what the current line held.
    fn release(&mut self) {
        self.held = self.held.budget.empty();
    }
}

/// A frame as read: only its envelope is parsed, the rest stays as the program wrote it.
#[derive(Deserialize)]
struct Frame<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ResultParams<'a> {
    #[serde(default, borrow)]
    value: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct SaveParams<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    base64: Option<Cow<'a, str>>,
}

/// What went wrong in a frame, without echoing any of it: serde's messages quote the offending
/// value, which a program could make as large as a frame (and larger once escaped).
fn error_text(e: &serde_json::Error) -> String {
    let what = match e.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not JSON",
        serde_json::error::Category::Data => "not the shape the method takes",
        serde_json::error::Category::Eof => "cut short",
    };
    format!("{what} (line {}, column {})", e.line(), e.column())
}

/// The id to answer with: a number or a short string, as the SDKs send; anything else is null
/// (an answer never echoes a large value back).
fn frame_id(raw: Option<&RawValue>) -> Value {
    match raw {
        Some(r) if r.get().len() <= 64 => match serde_json::from_str::<Value>(r.get()) {
            Ok(v @ (Value::Number(_) | Value::String(_))) => v,
            _ => Value::Null,
        },
        _ => Value::Null,
    }
}

pub(crate) fn answer_line(id: &Value, body: Value) -> Vec<u8> {
    let mut obj = match body {
        Value::Object(m) => m,
        other @ Value::Null
        | other @ Value::Bool(_)
        | other @ Value::Number(_)
        | other @ Value::String(_)
        | other @ Value::Array(_) => {
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

/// Longest error message a program is sent: an upstream's error text can be as large as a frame.
const MAX_ERROR_CHARS: usize = 4096;

fn error(kind: &str, message: impl Into<String>) -> Value {
    let mut message = message.into();
    if message.len() > MAX_ERROR_CHARS {
        let mut end = MAX_ERROR_CHARS;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str("... (cut)");
    }
    json!({"error": {"kind": kind, "message": message}})
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
    /// What the program passed to `result()`, as it wrote it, with the budget it holds.
    pub(crate) result: Option<(Box<RawValue>, Held)>,
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

    /// A frame the budget had no room for: an error to the program, which may try again.
    pub(crate) fn over_budget(&mut self, id: &Value, bytes: usize, left: usize) -> Step<'static> {
        if let Some(stop) = self.refused() {
            return stop;
        }
        Step::Answer(answer_line(
            id,
            error(
                "limit",
                format!(
                    "the broker is holding too many large SDK frames to take this one ({} MiB; {} MiB free of broker.exec.frame_budget_mb)\nhint: send smaller results or arguments (save large data with save_artifact in pieces), or try again when other runs are done",
                    bytes.div_ceil(1 << 20),
                    left >> 20
                ),
            ),
        ))
    }

    pub(crate) fn handle<'a>(
        &mut self,
        raw: &[u8],
        held: Held,
        host: &'a dyn ToolHost,
    ) -> Step<'a> {
        let frame: Frame<'_> = match serde_json::from_slice(raw) {
            Ok(f) => f,
            Err(e) => return self.malformed(&leading_id(raw), &e),
        };
        let id = frame_id(frame.id);
        let params = frame.params.map_or("null", RawValue::get);
        match frame.method.as_ref() {
            "call_tool" => match serde_json::from_str::<CallParams<'_>>(params) {
                Ok(p) => self.call(id, p, held, host),
                Err(e) => self.malformed(&id, &e),
            },
            "save_artifact" => match serde_json::from_str::<SaveParams<'_>>(params) {
                Ok(p) => Step::Answer(answer_line(&id, self.save(p, host))),
                Err(e) => self.malformed(&id, &e),
            },
            "result" => match serde_json::from_str::<ResultParams<'_>>(params) {
                Ok(p)
                    if let Some(Err(e)) =
                        p.value.map(|v| mcpb_protocol::json::check_text(v.get())) =>
                {
                    self.protocol(&id, format!("the result {e}"))
                }
                Ok(p) => {
                    // The value is kept as the program wrote it (one copy, charged to the
                    // budget through the frame's hold) and parsed only if it fits the answer.
                    let value = p.value.map_or_else(null_raw, RawValue::to_owned);
                    self.result = None;
                    self.result = Some((value, held));
                    Step::Answer(answer_line(&id, json!({"result": true})))
                }
                Err(e) => self.malformed(&id, &e),
            },
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

    fn malformed(&mut self, id: &Value, e: &serde_json::Error) -> Step<'static> {
        self.protocol(id, format!("malformed SDK frame: {}", error_text(e)))
    }

    fn protocol(&mut self, id: &Value, message: String) -> Step<'static> {
        if let Some(stop) = self.refused() {
            return stop;
        }
        Step::Answer(answer_line(id, error("protocol", message)))
    }

    fn call<'a>(
        &mut self,
        id: Value,
        params: CallParams<'_>,
        held: Held,
        host: &'a dyn ToolHost,
    ) -> Step<'a> {
        // Exposed names are at most a few hundred bytes; more is never echoed back.
        let name: String = params
            .name
            .as_deref()
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
        let arguments = match params.arguments {
            None => empty_object(),
            Some(a) if a.get() == "null" => empty_object(),
            Some(a) if a.get().starts_with('{') => {
                if let Err(e) = mcpb_protocol::json::check_text(a.get()) {
                    return refuse(
                        self,
                        "protocol",
                        "error",
                        format!("the arguments {e}"),
                        &name,
                    );
                }
                a.to_owned()
            }
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
            // The arguments stay charged to the budget until the call is over.
            let _held = held;
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

    fn save(&mut self, params: SaveParams<'_>, host: &dyn ToolHost) -> Value {
        if self.artifacts.len() >= MAX_ARTIFACTS {
            return error(
                "limit",
                format!("a run may save at most {MAX_ARTIFACTS} artifacts"),
            );
        }
        let name: String = params
            .name
            .as_deref()
            .unwrap_or("artifact")
            .chars()
            .take(200)
            .collect();
        let (text, bytes, encoding) = if let Some(t) = params.text {
            let n = t.len();
            (t.into_owned(), n, "utf-8")
        } else if let Some(b) = params.base64 {
            match base64::engine::general_purpose::STANDARD.decode(b.as_bytes()) {
                Ok(raw) => match String::from_utf8(raw) {
                    Ok(t) => {
                        let n = t.len();
                        (t, n, "utf-8")
                    }
                    Err(e) => (b.into_owned(), e.into_bytes().len(), "base64"),
                },
                Err(_) => return error("protocol", "base64: not valid base64"),
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

fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".into()).unwrap_or_default()
}

/// JSON null.
fn null_raw() -> Box<RawValue> {
    Box::default()
}

#[cfg(test)]
#[path = "sdk_tests.rs"]
mod tests;
