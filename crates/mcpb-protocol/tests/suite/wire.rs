//! The exact bytes the broker writes and the checks it makes on what it reads: error codes,
//! frames it builds, the hello reply, revisions and eras, the JSON text checks, tools.

use mcpb_protocol::json::{JsonTextError, MAX_DEPTH, check_text};
use mcpb_protocol::message::{
    error_line, notification_line, raw_error_line, request_line, request_line_with_id,
    response_line,
};
use mcpb_protocol::{BrokerRpcError, Era, HelloReply, Incoming, RpcCode, Tool, revision};
use serde_json::value::RawValue;

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_string()).unwrap()
}

fn text(line: Vec<u8>) -> String {
    String::from_utf8(line).unwrap()
}

#[test]
fn error_codes_are_the_ones_json_rpc_and_mcp_define() {
    let codes: Vec<i64> = [
        RpcCode::ParseError,
        RpcCode::InvalidRequest,
        RpcCode::MethodNotFound,
        RpcCode::InvalidParams,
        RpcCode::ResourceNotFound,
        RpcCode::InternalError,
        RpcCode::RequestTimeout,
        RpcCode::UpstreamUnavailable,
        RpcCode::Overloaded,
    ]
    .into_iter()
    .map(RpcCode::code)
    .collect();
    assert_eq!(
        codes,
        [
            -32700, -32600, -32601, -32602, -32002, -32603, -32001, -32010, -32011
        ]
    );
    assert_eq!(revision::UNSUPPORTED_PROTOCOL_VERSION, -32022);
}

#[test]
fn frames_the_broker_builds_are_exact() {
    let id = raw("7");
    assert_eq!(
        text(response_line(&id, &raw("{\"ok\":true}"))),
        "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"ok\":true}}\n"
    );
    assert_eq!(
        text(raw_error_line(&id, &raw("{\"code\":-1,\"message\":\"x\"}"))),
        "{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-1,\"message\":\"x\"}}\n"
    );
    assert_eq!(
        text(request_line(3, "tools/list", None)),
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}\n"
    );
    assert_eq!(
        text(request_line_with_id(
            "\"b-1\"",
            "tools/call",
            Some(&raw("{\"name\":\"a\"}"))
        )),
        "{\"jsonrpc\":\"2.0\",\"id\":\"b-1\",\"method\":\"tools/call\",\"params\":{\"name\":\"a\"}}\n"
    );
    assert_eq!(
        text(notification_line("notifications/tools/list_changed", None)),
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n"
    );
    assert_eq!(
        text(notification_line(
            "notifications/cancelled",
            Some(&raw("{\"requestId\":3}"))
        )),
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":3}}\n"
    );
    // A method name is written as a JSON string, escapes and all.
    assert_eq!(
        text(notification_line("a\"b", None)),
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\\\"b\"}\n"
    );
    assert_eq!(
        text(error_line(None, RpcCode::ParseError, "bad")),
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"bad\"}}\n"
    );
}

#[test]
fn a_batch_is_refused_by_name() {
    let err = |frame: &[u8]| Incoming::parse(frame).err().unwrap().to_string();
    assert!(err(b" [{\"jsonrpc\":\"2.0\"}]").contains("a batch (JSON array)"));
    assert!(err(b"42").contains("not a JSON object"));
}

#[test]
fn did_you_mean_comes_only_with_names_to_offer() {
    let id = raw("1");
    let near = BrokerRpcError::UnknownToolNear {
        name: "serch".into(),
        near: vec!["search".into()],
    };
    let with: serde_json::Value = serde_json::from_slice(&near.to_line(Some(&id))).unwrap();
    assert_eq!(
        with["error"]["data"]["did_you_mean"],
        serde_json::json!(["search"])
    );
    assert_eq!(with["error"]["code"], -32602);
    let none = BrokerRpcError::UnknownToolNear {
        name: "zzz".into(),
        near: vec![],
    };
    let without: serde_json::Value = serde_json::from_slice(&none.to_line(Some(&id))).unwrap();
    assert!(without["error"].get("data").is_none(), "{without}");
    assert_eq!(without["error"]["message"], "Unknown tool: zzz");
}

#[test]
fn a_refusal_says_why_and_what_to_do() {
    let reply = HelloReply::refuse("profile 'x' is unknown", vec!["add it".into()]);
    assert!(!reply.ok);
    let line = reply.to_line();
    assert_eq!(line.last(), Some(&b'\n'));
    let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"], "profile 'x' is unknown");
    assert_eq!(v["hints"], serde_json::json!(["add it"]));
}

#[test]
fn revisions_and_their_eras() {
    assert_eq!(
        revision::all(),
        [
            "2024-11-05",
            "2025-03-26",
            "2025-06-18",
            "2025-11-25",
            "2026-07-28"
        ]
    );
    assert!(revision::is_supported("2025-06-18"));
    assert!(
        !revision::is_supported("2026-07-28"),
        "no initialize in that era"
    );
    assert!(!revision::is_supported("1999-01-01"));
    assert!(Era::of_revision("2026-07-28").is_stateless());
    assert!(!Era::of_revision("2025-11-25").is_stateless());
}

#[test]
fn text_checks_find_lone_surrogates_and_deep_nesting_wherever_they_are() {
    let ok = |t: &str| check_text(t).is_ok();
    let lone = |t: &str| matches!(check_text(t), Err(JsonTextError::LoneSurrogate));
    let deep = |t: &str| matches!(check_text(t), Err(JsonTextError::TooDeep));
    assert!(ok(r#"["\ud83d\ude00", "\u0041", "\n\t\\"]"#));
    // After a pair, a one-unit escape and a short escape, reading goes on at the right place.
    assert!(lone(r#"["\ud83d\ude00 \ud800"]"#));
    assert!(lone(r#"["\u0041\udc00"]"#));
    assert!(lone(r#"["\n\ud800x"]"#));
    assert!(lone(r#"["\ud83d\n"]"#));
    // A high unit followed by an escaped backslash and low-looking digits is no pair.
    assert!(lone(r#"["\ud83d\\dc00"]"#));
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert!(ok(&nested(MAX_DEPTH)));
    assert!(deep(&nested(MAX_DEPTH + 1)));
    assert!(deep(&format!("[\"\\u0041\",{}]", nested(MAX_DEPTH))));
    assert!(deep(&format!("[\"\\n\",{}]", nested(MAX_DEPTH))));
    assert!(deep(&format!("[\"\\ud83d\\ude00\",{}]", nested(MAX_DEPTH))));
    // Siblings are no deeper than one of them.
    assert!(ok(&format!("[{}]", vec!["[]"; MAX_DEPTH * 2].join(","))));
    assert!(ok(&format!(
        "{{{}}}",
        (0..MAX_DEPTH * 2)
            .map(|i| format!("\"k{i}\":{{}}"))
            .collect::<Vec<_>>()
            .join(",")
    )));
}

#[test]
fn a_tool_shows_its_description_and_compares_by_its_text() {
    let t = |v: serde_json::Value| Tool::from_value(&v).unwrap();
    let a = t(serde_json::json!({"name": "a", "description": "Reads"}));
    assert_eq!(a.description().as_deref(), Some("Reads"));
    assert_eq!(
        t(serde_json::json!({"name": "a", "description": 3})).description(),
        None
    );
    assert_eq!(t(serde_json::json!({"name": "a"})).description(), None);
    assert_eq!(
        a,
        t(serde_json::json!({"name": "a", "description": "Reads"}))
    );
    assert_ne!(
        a,
        t(serde_json::json!({"name": "a", "description": "Writes"}))
    );
    assert_eq!(
        format!("{a:?}"),
        "{\"name\":\"a\",\"description\":\"Reads\"}"
    );
}
