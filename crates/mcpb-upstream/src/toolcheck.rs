//! One tool definition from an upstream's list, checked on its own: readable JSON within the
//! parser's depth, an object, and a name within MCP's rules. A tool that fails is refused alone.

use mcpb_protocol::Tool;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::status::RejectedTool;

/// MCP's tool name rule: 1 to 128 characters out of ASCII letters, digits, `_`, `-`, `.` and
/// `/`. Anything else (control characters, escape sequences, spaces) could reach a terminal or
/// a model as something other than a name.
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/'))
}

/// A name fit to show in a log or a terminal: control and non-ASCII characters escaped, cut
/// to 128 characters.
pub(crate) fn shown(name: &str) -> String {
    let escaped: String = name.chars().flat_map(char::escape_default).collect();
    escaped.chars().take(128).collect()
}

pub(crate) fn accept(raw: &RawValue, index: usize) -> Result<Tool, RejectedTool> {
    #[derive(serde::Deserialize)]
    struct NameOnly {
        #[serde(default)]
        name: Option<String>,
    }
    let name = serde_json::from_str::<NameOnly>(raw.get())
        .ok()
        .and_then(|n| n.name);
    let refuse = |reason: String| RejectedTool {
        tool: name.as_deref().map_or_else(|| format!("#{index}"), shown),
        reason,
    };
    let tool: Value = serde_json::from_str(raw.get())
        .map_err(|e| refuse(format!("unreadable definition: {e}")))?;
    if !tool.is_object() {
        return Err(refuse("the definition is not an object".into()));
    }
    match tool.get("name").and_then(Value::as_str) {
        None => Err(refuse("the definition has no name".into())),
        Some(n) if !valid_name(n) => Err(refuse(
            "the name breaks MCP's rules (1-128 of A-Z a-z 0-9 _ - . /)".into(),
        )),
        Some(_) => Tool::from_value(&tool).map_err(|e| refuse(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn names_follow_the_mcp_rules() {
        for ok in ["echo", "get_file-v2", "fs.read", "a/b", &"x".repeat(128)] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in [
            "",
            "has space",
            "\u{1b}[2Jwipe",
            "caf\u{e9}",
            &"x".repeat(129),
        ] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_bad_tool_is_refused_alone_with_its_name_escaped() {
        assert!(accept(&raw(r#"{"name":"echo","inputSchema":{}}"#), 0).is_ok());
        let r = accept(&raw(r#"{"name":"\u001b]0;pwned\u0007"}"#), 3).unwrap_err();
        assert_eq!(r.tool, "\\u{1b}]0;pwned\\u{7}");
        assert!(r.reason.contains("MCP's rules"));
        let deep = format!(
            r#"{{"name":"deep","inputSchema":{}1{}}}"#,
            "{\"a\":".repeat(200),
            "}".repeat(200)
        );
        let r = accept(&raw(&deep), 0).unwrap_err();
        assert_eq!(r.tool, "deep");
        assert!(r.reason.contains("unreadable"), "{}", r.reason);
        assert_eq!(accept(&raw("[1]"), 5).unwrap_err().tool, "#5");
    }
}
