//! Borrowed views of JSON-RPC messages and writers for the few messages the broker makes itself.
//!
//! Payloads (`params`, `result`, `error`) stay as raw JSON text: the broker forwards what it does
//! not need to read byte for byte, so vendor fields, `_meta`, number formats and unknown keys reach
//! the other side untouched.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    #[error("{0}")]
    Json(serde_json::Error),
    #[error("{0} is not a JSON-RPC message")]
    NotAnObject(&'static str),
}

impl MessageError {
    /// Syntax errors are parse errors; well-formed JSON of the wrong shape is an invalid request.
    pub fn is_syntax(&self) -> bool {
        matches!(self, MessageError::Json(e) if e.is_syntax() || e.is_eof())
    }
}

/// JSON-RPC error codes the broker emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcCode {
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
    /// The MCP convention for a request that ran out of time.
    RequestTimeout,
    /// An upstream could not be started, crashed or refused the handshake.
    UpstreamUnavailable,
    /// The broker is at a capacity limit or shutting down.
    Overloaded,
    /// MCP's code for a resource URI nobody serves.
    ResourceNotFound,
}

impl RpcCode {
    pub fn code(self) -> i64 {
        match self {
            RpcCode::ParseError => -32700,
            RpcCode::InvalidRequest => -32600,
            RpcCode::MethodNotFound => -32601,
            RpcCode::InvalidParams => -32602,
            RpcCode::ResourceNotFound => -32002,
            RpcCode::InternalError => -32603,
            RpcCode::RequestTimeout => -32001,
            RpcCode::UpstreamUnavailable => -32010,
            RpcCode::Overloaded => -32011,
        }
    }
}

/// One parsed frame. Only the routing fields are decoded; the rest is left raw.
#[derive(Debug, Deserialize)]
pub struct Incoming<'a> {
    #[serde(borrow, default)]
    pub id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub error: Option<&'a RawValue>,
}

/// What a frame is, decided from which fields are present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncomingKind {
    Request,
    Notification,
    Response,
    Invalid,
}

impl<'a> Incoming<'a> {
    /// Parses one frame. Batches (JSON arrays, dropped from MCP in 2025-06-18) and other
    /// non-objects are refused before serde gets a chance to read an array as a struct.
    pub fn parse(frame: &'a [u8]) -> Result<Self, MessageError> {
        match frame.iter().find(|b| !b.is_ascii_whitespace()) {
            // Checked as text once, whole: read from bytes, serde_json checks each raw value's
            // text again (a tenth of the parse). A frame with a bad byte is read from bytes: one
            // in a member nobody reads is let be (an upstream's stray byte must not cost its
            // caller the whole call timeout), one in a value the broker keeps is an error.
            Some(b'{') => match std::str::from_utf8(frame) {
                Ok(text) => serde_json::from_str(text).map_err(MessageError::Json),
                Err(_) => serde_json::from_slice(frame).map_err(MessageError::Json),
            },
            Some(b'[') => Err(MessageError::NotAnObject("a batch (JSON array)")),
            _ => Err(MessageError::NotAnObject("not a JSON object")),
        }
    }

    pub fn kind(&self) -> IncomingKind {
        match (
            &self.method,
            self.id,
            self.result.is_some() || self.error.is_some(),
        ) {
            (Some(_), Some(_), false) => IncomingKind::Request,
            (Some(_), None, false) => IncomingKind::Notification,
            (None, Some(_), true) => IncomingKind::Response,
            _ => IncomingKind::Invalid,
        }
    }

    pub fn method(&self) -> &str {
        self.method.as_deref().unwrap_or("")
    }
}

/// `{"jsonrpc":"2.0","id":<id>,"result":<result>}` followed by a newline.
pub fn response_line(id: &RawValue, result: &RawValue) -> Vec<u8> {
    envelope(id, b",\"result\":", result)
}

/// A response carrying an error object exactly as received from elsewhere.
pub fn raw_error_line(id: &RawValue, error: &RawValue) -> Vec<u8> {
    envelope(id, b",\"error\":", error)
}

/// `response_line` with a result the caller wrote as JSON text and vouches for.
pub fn response_line_text(id: &RawValue, result: &str) -> Vec<u8> {
    envelope_text(id, b",\"result\":", result)
}

fn envelope(id: &RawValue, member: &[u8], payload: &RawValue) -> Vec<u8> {
    envelope_text(id, member, payload.get())
}

fn envelope_text(id: &RawValue, member: &[u8], payload: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(40 + id.get().len() + payload.len());
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.get().as_bytes());
    out.extend_from_slice(member);
    out.extend_from_slice(payload.as_bytes());
    out.extend_from_slice(b"}\n");
    out
}

/// A response carrying an error the broker made itself. `id` is `null` when the request's id could
/// not be read (parse errors).
pub fn error_line(id: Option<&RawValue>, code: RpcCode, message: &str) -> Vec<u8> {
    error_frame(
        id,
        serde_json::json!({"code": code.code(), "message": message}),
    )
}

/// An error frame with a `data` member.
pub fn error_line_with_data(
    id: Option<&RawValue>,
    code: RpcCode,
    message: &str,
    data: &serde_json::Value,
) -> Vec<u8> {
    error_frame(
        id,
        serde_json::json!({"code": code.code(), "message": message, "data": data}),
    )
}

fn error_frame(id: Option<&RawValue>, error: serde_json::Value) -> Vec<u8> {
    let id = id.map(RawValue::get).unwrap_or("null");
    let mut out = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{error}}}").into_bytes();
    out.push(b'\n');
    out
}

/// A request frame with a numeric id the broker chose and params given as raw JSON.
pub fn request_line(id: u64, method: &str, params: Option<&RawValue>) -> Vec<u8> {
    request_line_text(&id.to_string(), method, params.map(RawValue::get))
}

/// A request frame with an id given as raw JSON text (for ids the broker makes up for clients).
pub fn request_line_with_id(id: &str, method: &str, params: Option<&RawValue>) -> Vec<u8> {
    request_line_text(id, method, params.map(RawValue::get))
}

/// A request frame whose params are JSON text the caller built and vouches for (a forwarded
/// call's params, rewritten member by member from a parsed object).
pub fn request_line_text(id: &str, method: &str, params: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + method.len() + params.map_or(0, str::len));
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b",\"method\":");
    push_string(&mut out, method);
    if let Some(params) = params {
        out.extend_from_slice(b",\"params\":");
        out.extend_from_slice(params.as_bytes());
    }
    out.extend_from_slice(b"}\n");
    out
}

/// A string as JSON text; a method name needs no escapes and is copied as it is.
fn push_string(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        out.extend_from_slice(serde_json::Value::from(s).to_string().as_bytes());
    }
}

/// A notification frame with params given as raw JSON.
pub fn notification_line(method: &str, params: Option<&RawValue>) -> Vec<u8> {
    let mut out = Vec::with_capacity(48 + method.len() + params.map_or(0, |p| p.get().len()));
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":");
    push_string(&mut out, method);
    if let Some(params) = params {
        out.extend_from_slice(b",\"params\":");
        out.extend_from_slice(params.get().as_bytes());
    }
    out.extend_from_slice(b"}\n");
    out
}

/// Serialises a value the broker built itself into owned raw JSON.
pub fn to_raw<T: serde::Serialize>(value: &T) -> Result<Box<RawValue>, serde_json::Error> {
    serde_json::value::to_raw_value(value)
}

/// One spelling per JSON-RPC id, whatever whitespace or escapes the peer used: the key under
/// which a request waits for its answer or its cancellation.
pub fn id_key(raw: &str) -> String {
    // The ids clients send, small integers and plain strings, are spelt one way already.
    let t = raw.trim_matches([' ', '\t', '\n', '\r']);
    let digits = t.strip_prefix('-').unwrap_or(t);
    let plain_integer = !digits.is_empty()
        && digits.len() <= 18
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && t != "-0";
    let plain_string = t.len() >= 2
        && t.starts_with('"')
        && t.ends_with('"')
        && !t[1..t.len() - 1]
            .bytes()
            .any(|b| b == b'"' || b == b'\\' || b < 0x20);
    if plain_integer || plain_string {
        return t.to_string();
    }
    serde_json::from_str::<serde_json::Value>(raw)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| raw.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_byte_fails_only_where_it_is_read() {
        let stray = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"ok\":true},\"x\":\"\xff\"}";
        let msg = Incoming::parse(stray).unwrap();
        assert_eq!(msg.result.unwrap().get(), "{\"ok\":true}");
        let kept = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"t\":\"\xff\"}}";
        assert!(Incoming::parse(kept).unwrap_err().is_syntax());
    }

    #[test]
    fn ids_have_one_spelling() {
        assert_eq!(id_key("\"a\\u0062\""), "\"ab\"");
        assert_eq!(id_key(" 7 "), "7");
        assert_ne!(id_key("7"), id_key("\"7\""));
        for raw in [
            "0",
            "-3",
            "12345678901234567890",
            "1.0",
            "1e3",
            "-0",
            "\"x y\"",
            "\"\"",
            "007",
        ] {
            let slow = serde_json::from_str::<serde_json::Value>(raw)
                .map(|v| v.to_string())
                .unwrap_or_else(|_| raw.to_string());
            assert_eq!(id_key(raw), slow, "{raw}");
        }
    }

    #[test]
    fn a_result_nested_past_the_parsers_depth_limit_still_routes_by_id() {
        let deep = format!(
            "{}{}",
            "{\"a\":".repeat(300),
            "1".to_string() + &"}".repeat(300)
        );
        let frame = format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{deep}}}");
        let msg = Incoming::parse(frame.as_bytes()).unwrap();
        assert_eq!(msg.id.unwrap().get(), "7");
        assert_eq!(msg.result.unwrap().get().len(), deep.len());
    }

    #[test]
    fn classifies_frames() {
        let req = Incoming::parse(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).unwrap();
        assert_eq!(req.kind(), IncomingKind::Request);
        let note =
            Incoming::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert_eq!(note.kind(), IncomingKind::Notification);
        let resp = Incoming::parse(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#).unwrap();
        assert_eq!(resp.kind(), IncomingKind::Response);
        let odd = Incoming::parse(br#"{"jsonrpc":"2.0","id":1}"#).unwrap();
        assert_eq!(odd.kind(), IncomingKind::Invalid);
        let batch = Incoming::parse(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#).unwrap_err();
        assert!(!batch.is_syntax());
        assert!(Incoming::parse(b"{not json").unwrap_err().is_syntax());
    }

    #[test]
    fn keeps_payload_bytes_verbatim() {
        let frame = br#"{"jsonrpc":"2.0","id":"x-1","result":{"content":[],"vendor":{"n":1.0e3},"_meta":{"k":1}}}"#;
        let msg = Incoming::parse(frame).unwrap();
        let line = response_line(msg.id.unwrap(), msg.result.unwrap());
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "{\"jsonrpc\":\"2.0\",\"id\":\"x-1\",\"result\":{\"content\":[],\"vendor\":{\"n\":1.0e3},\"_meta\":{\"k\":1}}}\n"
        );
    }

    #[test]
    fn escaped_method_names_decode() {
        let msg = Incoming::parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools\/list"}"#).unwrap();
        assert_eq!(msg.method(), "tools/list");
    }

    #[test]
    fn error_lines_are_valid_json() {
        let line = error_line(None, RpcCode::ParseError, "bad \"json\"");
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["id"], serde_json::Value::Null);
        assert_eq!(v["error"]["code"], -32700);
        assert_eq!(v["error"]["message"], "bad \"json\"");
    }
}
