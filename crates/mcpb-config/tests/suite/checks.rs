//! The semantic checks that keep secrets and reach safe: names, credentials written literally,
//! HTTP tokens, OAuth grants and the sandbox asked for by the environment.

use mcpb_config::sandbox::SandboxMode;
use mcpb_config::{ConfigSource, Settings, load_str};

fn load(text: &str, sandbox: Option<&str>) -> Result<Settings, String> {
    load_str(
        text,
        "b.yaml",
        ConfigSource::File("b.yaml".into()),
        &super::context(sandbox),
    )
    .map_err(|e| e.to_string())
}

fn errors(text: &str) -> String {
    load(text, None).err().unwrap_or_else(|| "ok".into())
}

#[test]
fn names_must_start_and_end_with_a_letter_or_digit() {
    for bad in ["-gh", "gh-", "_gh", "gh_"] {
        let text = format!("schema_version: 1\nupstreams:\n  {bad}: {{command: x}}\n");
        assert!(
            errors(&text).contains("must start and end with a letter or digit"),
            "{bad}: {}",
            errors(&text)
        );
    }
    assert_eq!(
        errors("schema_version: 1\nupstreams:\n  g-h_1: {command: x}\n"),
        "ok"
    );
}

#[test]
fn only_env_keys_must_be_variable_names() {
    let text = "schema_version: 1\nupstreams:\n  gh:\n    command: x\n    env: {BAD-NAME: v}\n";
    assert!(
        errors(text).contains("'BAD-NAME' is not a valid environment variable name"),
        "{}",
        errors(text)
    );
    let headers = "schema_version: 1\nupstreams:\n  docs:\n    transport: streamable_http\n    url: \"http://127.0.0.1:1/mcp\"\n    headers: {X-Request-Source: broker}\n";
    assert_eq!(errors(headers), "ok");
}

#[test]
fn an_http_token_is_one_reference_to_a_known_profile() {
    let with = |token: &str, profile: &str| {
        errors(&format!(
            "schema_version: 1\nupstreams:\n  gh: {{command: x}}\nprofiles:\n  p: {{upstreams: [gh]}}\nhttp:\n  tokens:\n    - {{token: \"{token}\", profile: {profile}}}\n"
        ))
    };
    assert_eq!(with("${TEAM_TOKEN}", "p"), "ok");
    assert_eq!(with("${file:team-token}", "p"), "ok");
    for literal in ["abc123", "Bearer ${TEAM_TOKEN}", "${A}${B}"] {
        assert!(
            with(literal, "p").contains("an HTTP token must be a reference"),
            "{literal}: {}",
            with(literal, "p")
        );
    }
    let unknown = with("${TEAM_TOKEN}", "nope");
    assert!(
        unknown.contains("names unknown profile 'nope'"),
        "{unknown}"
    );
    assert!(unknown.contains("known profiles: p"), "{unknown}");
}

#[test]
fn the_client_credentials_grant_needs_both_halves() {
    let with = |oauth: &str| {
        errors(&format!(
            "schema_version: 1\nupstreams:\n  api:\n    transport: streamable_http\n    url: \"http://127.0.0.1:1/mcp\"\n    oauth: {oauth}\n"
        ))
    };
    let needs = "the client_credentials grant needs a client_id and a client_secret";
    assert!(with("{grant: client_credentials, client_id: c}").contains(needs));
    assert!(with("{grant: client_credentials, client_secret: \"${S}\"}").contains(needs));
    assert_eq!(
        with("{grant: client_credentials, client_id: c, client_secret: \"${S}\"}"),
        "ok"
    );
    assert_eq!(with("{client_id: c}"), "ok");
    assert!(
        with("{client_metadata_url: \"http://127.0.0.1/meta\"}").contains("is not an https:// URL")
    );
    assert_eq!(
        with("{client_metadata_url: \"https://127.0.0.1/meta\"}"),
        "ok"
    );
}

#[test]
fn the_environment_can_ask_for_the_sandbox_where_the_file_does_not() {
    let text = "schema_version: 1\nupstreams:\n  gh: {command: x}\n";
    let mode = |env| load(text, env).map(|s| s.broker.upstream_sandbox);
    assert_eq!(mode(None), Ok(SandboxMode::Off));
    assert_eq!(mode(Some("off")), Ok(SandboxMode::Off));
    assert_eq!(mode(Some("standard")), Ok(SandboxMode::Standard));
    let bad = mode(Some("strict")).unwrap_err();
    assert!(bad.contains("'strict' is not a sandbox mode"), "{bad}");
}
