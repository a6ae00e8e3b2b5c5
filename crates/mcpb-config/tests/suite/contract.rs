//! The committed schema and example must match the code.

use std::path::PathBuf;

use mcpb_config::{ConfigSource, ResolveContext, load_str, schema::json_schema};

fn repo_file(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

fn ctx() -> ResolveContext {
    super::context(None)
}

#[test]
fn committed_schema_matches_the_types() {
    let committed =
        std::fs::read_to_string(repo_file("config/broker.schema.json")).unwrap_or_default();
    let generated = json_schema();
    if std::env::var_os("MCP_BROKER_BLESS").is_some() {
        std::fs::write(repo_file("config/broker.schema.json"), &generated).unwrap();
        return;
    }
    assert!(
        committed == generated,
        "config/broker.schema.json is out of date; regenerate it with \
         `mcp-broker config schema > config/broker.schema.json` (or MCP_BROKER_BLESS=1 cargo test)"
    );
}

#[test]
fn example_and_embedded_default_are_valid() {
    let example = std::fs::read_to_string(repo_file("config/broker.example.yaml")).unwrap();
    let settings = load_str(
        &example,
        "broker.example.yaml",
        ConfigSource::Embedded,
        &ctx(),
    )
    .unwrap();
    assert_eq!(settings.clients["codex"], "readonly");
    let default = load_str(
        mcpb_config::EMBEDDED_DEFAULT,
        "default",
        ConfigSource::Embedded,
        &ctx(),
    )
    .unwrap();
    let example_up = &default.upstreams["example"];
    assert_eq!(example_up.command.as_deref(), Some("/opt/mcp-broker"));
    assert_eq!(example_up.args, vec!["example-server"]);
    assert_eq!(default.profiles["default"].upstreams, vec!["example"]);
    assert!(default.profiles["default"].allow_mutating_upstreams);
    assert_eq!(
        default.runtime.root,
        PathBuf::from("/home/user/mcp/mcp-broker")
    );
}

#[test]
fn resolved_settings_snapshot() {
    let text = r#"
schema_version: 1
runtime: {root: "~/b"}
broker: {call_timeout_ms: 1000}
upstreams:
  gh:
    command: npx
    args: [-y, "@modelcontextprotocol/server-github", "{runtime.state_dir}/gh"]
    env: {GITHUB_PERSONAL_ACCESS_TOKEN: "${GITHUB_TOKEN}", NEWS_LANG: en, API_KEY: "${file:api}"}
    tags: [code]
  off: {command: "x", lifecycle: disabled}
profiles:
  all: {}
  two: {upstreams: [gh], broker_tool_name_style: double_underscore}
clients:
  codex: {profile: two}
"#;
    let settings = load_str(text, "t.yaml", ConfigSource::File("t.yaml".into()), &ctx()).unwrap();
    insta::assert_json_snapshot!(settings);
}
