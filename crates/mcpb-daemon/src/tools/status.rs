//! `broker.status`: what the profile's upstreams are doing and what is wrong with them; starts
//! nothing.

use serde_json::{Value, json};

use super::tool_result;
use crate::view::ProfileView;

pub(super) fn apply(view: &ProfileView) -> Value {
    let servers: Vec<Value> = view
        .upstreams()
        .iter()
        .map(|up| {
            let st = up.status();
            let entry = view.known.cached(up.name());
            let quarantined = entry
                .as_ref()
                .map_or(0, |e| e.verdicts.iter().filter(|v| v.is_some()).count());
            let findings = entry.as_ref().map_or(0, |e| e.findings.len());
            let auth_needed = st.last_error.as_deref().is_some_and(needs_auth);
            json!({
                "name": st.name,
                "state": st.state,
                "tools": view.known_count(up),
                "quarantined": quarantined,
                "findings": findings,
                "last_error": st.last_error,
                "auth_needed": auth_needed,
            })
        })
        .collect();
    let mut out = json!({"servers": servers});
    if let Some(e) = view.known.pin_error() {
        out["pin_store_error"] = e.into();
    }
    tool_result(out)
}

/// A heuristic on the last error: the words servers use when credentials are missing or wrong.
fn needs_auth(error: &str) -> bool {
    let e = error.to_lowercase();
    [
        "401",
        "403",
        "unauthorized",
        "forbidden",
        "credential",
        "token",
        "secret",
    ]
    .iter()
    .any(|k| e.contains(k))
}

#[cfg(test)]
mod tests {
    #[test]
    fn auth_words_in_errors() {
        assert!(super::needs_auth("HTTP 401 Unauthorized"));
        assert!(super::needs_auth("missing GITHUB_TOKEN"));
        assert!(!super::needs_auth("exited (status 1)"));
    }
}
