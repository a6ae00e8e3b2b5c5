//! A sandboxed server's failed call that reads like the sandbox's doing (a permission, a
//! read-only file system, a busy mount, a path the host has but the server could not find)
//! gets a hint that names the sandbox and the command that shows what the kernel refused.
//! Only failures are read, so a call that works pays nothing.

use mcpb_upstream::Reply;
use serde_json::Value;
use serde_json::value::RawValue;

/// Words programs use when the kernel refuses them something (lower case).
const REFUSED: &[&str] = &[
    "eacces",
    "eperm",
    "erofs",
    "ebusy",
    "permission denied",
    "operation not permitted",
    "read-only file system",
    "resource busy",
];

/// Words of a missing path: the sandbox's doing only when the host has the path.
const MISSING: &[&str] = &["enoent", "no such file or directory"];

/// Whether `text` reads like a refusal of the sandbox.
fn sandbox_like(text: &str) -> bool {
    let lower = text.to_lowercase();
    if REFUSED.iter().any(|w| lower.contains(w)) {
        return true;
    }
    MISSING.iter().any(|w| lower.contains(w))
        && text
            .split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | ',' | '`' | '(' | ')'))
            .filter(|w| w.starts_with('/') && w.len() > 1)
            .any(|p| {
                let p = std::path::Path::new(p.trim_end_matches([':', '.']));
                p.exists()
                    || p.parent()
                        .is_some_and(|d| d != std::path::Path::new("/") && d.is_dir())
            })
}

fn hint(upstream: &str, tool: &str) -> String {
    format!(
        "hint: {upstream} runs in mcp-broker's sandbox, which may have refused this; `mcp-broker sandbox check {upstream} --call {tool} --args JSON` shows what the kernel refused and the grant that allows it"
    )
}

/// The answer, with the hint added when it is a failure that reads like the sandbox's.
pub(super) fn add(reply: Reply, upstream: &str, tool: &str) -> Reply {
    match reply {
        Reply::Result(r)
            if r.get().contains("\"isError\":true") || r.get().contains("\"isError\": true") =>
        {
            let Ok(mut v) = serde_json::from_str::<Value>(r.get()) else {
                return Reply::Result(r);
            };
            let said: String = v["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n");
            if v["isError"] != true || !sandbox_like(&said) {
                return Reply::Result(r);
            }
            if let Some(content) = v["content"].as_array_mut() {
                content.push(serde_json::json!({"type": "text", "text": hint(upstream, tool)}));
            }
            match to_raw(&v) {
                Some(raw) => Reply::Result(raw),
                None => Reply::Result(r),
            }
        }
        Reply::Error(e) => {
            let Ok(mut v) = serde_json::from_str::<Value>(e.get()) else {
                return Reply::Error(e);
            };
            let Some(message) = v["message"].as_str().filter(|m| sandbox_like(m)) else {
                return Reply::Error(e);
            };
            v["message"] = Value::String(format!("{message}\n{}", hint(upstream, tool)));
            match to_raw(&v) {
                Some(raw) => Reply::Error(raw),
                None => Reply::Error(e),
            }
        }
        other => other,
    }
}

fn to_raw(v: &Value) -> Option<Box<RawValue>> {
    serde_json::value::to_raw_value(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(text: &str) -> Reply {
        let v = serde_json::json!({"content": [{"type": "text", "text": text}], "isError": true});
        Reply::Result(to_raw(&v).unwrap())
    }

    fn texts(r: &Reply) -> String {
        match r {
            Reply::Result(r) | Reply::Error(r) => r.get().to_string(),
        }
    }

    #[test]
    fn a_refusal_gets_the_hint_and_other_failures_do_not() {
        let r = add(
            result("EROFS: read-only file system, open '/data/x'"),
            "memory",
            "create_entities",
        );
        assert!(
            texts(&r).contains("sandbox check memory --call create_entities"),
            "{}",
            texts(&r)
        );
        let r = add(result("Entity with name x not found"), "memory", "t");
        assert!(!texts(&r).contains("hint:"));
        // A missing path is the sandbox's only when the host has it (or its folder).
        let r = add(
            result("ENOENT: no such file or directory, open '/tmp/x.json'"),
            "m",
            "t",
        );
        assert!(texts(&r).contains("hint:"));
        let r = add(
            result("ENOENT: no such file or directory, open '/nonexistent-zz/x'"),
            "m",
            "t",
        );
        assert!(!texts(&r).contains("hint:"));
        let ok = Reply::Result(
            to_raw(
                &serde_json::json!({"content": [{"type": "text", "text": "permission denied"}]}),
            )
            .unwrap(),
        );
        assert!(
            !texts(&add(ok, "m", "t")).contains("hint:"),
            "a result that worked is not read"
        );
        let err = Reply::Error(
            to_raw(&serde_json::json!({"code": -32603, "message": "EACCES: permission denied"}))
                .unwrap(),
        );
        assert!(texts(&add(err, "m", "t")).contains("hint:"));
    }
}
