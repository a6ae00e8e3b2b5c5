//! `broker.status`: what the profile's upstreams are doing and what is wrong with them; starts
//! nothing.

use mcpb_protocol::BrokerRpcError;
use serde_json::{Value, json};

use super::{Answer, Apply, BrokerTool, Ctx, Naming, done, tool_result};

/// Takes no arguments (any given are ignored).
pub type Args = super::NoArgs;

pub struct Status;

impl BrokerTool for Status {
    const VERB: &'static str = super::names::STATUS.verb;
    const MUTATES: bool = false;
    const NEEDS_EXEC: bool = false;
    type Args = Args;

    fn description(_: Naming) -> String {
        "State of each server (running, stopped, failed), last error and whether it needs credentials. Starts nothing.".to_string()
    }
}

impl Apply for Status {
    async fn apply(ctx: Ctx<'_>, _args: Args) -> Result<Answer, BrokerRpcError> {
        let view = ctx.servers;
        let servers: Vec<Value> = view
            .list()
            .iter()
            .map(|up| {
                let st = up.status();
                let (quarantined, findings) = view.trust_counts(up.name());
                let auth = auth_of(up, view.runtime());
                // A remote upstream's answer is known: what its server said of the credentials
                // and what the token file holds. A process says nothing but its error's words.
                let auth_needed = match &auth {
                    Some((_, needed)) => *needed,
                    None => st.last_error.as_deref().is_some_and(needs_auth),
                };
                let mut server = json!({
                    "name": st.name,
                    "state": st.state,
                    "tools": view.known_count(up),
                    "quarantined": quarantined,
                    "findings": findings,
                    "last_error": st.last_error,
                    "auth_needed": auth_needed,
                });
                if let Some((auth, _)) = auth {
                    server["auth"] = auth;
                }
                server
            })
            .collect();
        let mut out = json!({
            "servers": servers,
            "socket": view.runtime().socket_path().display().to_string(),
        });
        if let Some(e) = view.pin_error() {
            out["pin_store_error"] = e.into();
        }
        done(tool_result(out))
    }
}

/// How a remote upstream signs its requests, from its config and the token store: a sign-in
/// (`signed_in`: a token file is there; `mcp-broker auth login` makes one; `token`: when it
/// runs out and whether it renews itself), an `Authorization` header of the config, or
/// nothing; with the server's last refusal (401/403) and the last failed refresh, until a
/// request goes through again. The second value: whether it needs a person now. Local (stdio)
/// upstreams have none.
fn auth_of(
    upstream: &crate::view::Shown,
    runtime: &mcpb_config::RuntimeLayout,
) -> Option<(Value, bool)> {
    let up = upstream.settings();
    if up.transport.is_local_process() {
        return None;
    }
    let store = mcpb_oauth::FileStore::for_upstream(&runtime.state_dir(), &up.name);
    let signed_in = store.exists();
    let token = store.state(mcpb_config::unix_now());
    let seen = upstream.auth_seen();
    let header = up
        .headers
        .keys()
        .any(|k| k.eq_ignore_ascii_case("authorization"));
    let kind = if up.oauth.is_some() || signed_in {
        "sign_in"
    } else if header {
        "header"
    } else {
        "none"
    };
    let mut auth = json!({"kind": kind, "signed_in": signed_in});
    if let Some(t) = &token {
        auth["token"] = json!(t);
    }
    if let Value::Object(facts) = json!(seen) {
        auth.as_object_mut()?.extend(facts);
    }
    let needed = seen.refused()
        || (kind == "sign_in" && !signed_in)
        || token.is_some_and(|t| t.expired && !t.refreshable);
    Some((auth, needed))
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
