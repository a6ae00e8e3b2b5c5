//! What other crates read off resolved settings: name filters, where code runs live, name
//! separators, the environment the daemon needs, floors on byte limits.

use mcpb_config::settings::NameFilter;
use mcpb_config::template::{Part, Template};
use mcpb_config::{ConfigSource, NameStyle, Settings, load_str};

fn load(text: &str) -> Result<Settings, String> {
    let ctx = super::context(None);
    load_str(text, "b.yaml", ConfigSource::File("b.yaml".into()), &ctx).map_err(|e| e.to_string())
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_filter_admits_what_allow_matches_and_deny_does_not() {
    let f = NameFilter::new(&strings(&["read_*", "list"]), &strings(&["read_secret*"])).unwrap();
    assert!(f.admits("read_file"));
    assert!(f.admits("list"));
    assert!(!f.admits("read_secret_key"));
    assert!(!f.admits("write_file"));
    assert!(!f.is_empty());
    assert_eq!(f.patterns(), (vec!["read_*", "list"], vec!["read_secret*"]));

    let open = NameFilter::new(&[], &[]).unwrap();
    assert!(open.is_empty());
    assert!(open.admits("anything"));
    let deny_only = NameFilter::new(&[], &strings(&["rm*"])).unwrap();
    assert!(!deny_only.is_empty());
    assert!(deny_only.admits("ls"));
    assert!(!deny_only.admits("rm_rf"));
    let allow_only = NameFilter::new(&strings(&["ls"]), &[]).unwrap();
    assert!(!allow_only.is_empty());
    assert!(!allow_only.admits("rm"));

    let (bad, _) = NameFilter::new(&strings(&["ok", "[unclosed"]), &[]).unwrap_err();
    assert_eq!(bad, "[unclosed");
}

#[test]
fn an_exact_pattern_matches_only_its_own_name() {
    let name = "get[1]*?";
    let f = NameFilter::new(&[NameFilter::exact(name)], &[]).unwrap();
    assert!(f.admits(name));
    assert!(!f.admits("get1xx"));
    assert!(!f.admits("get[1]abc"));
}

#[test]
fn a_filter_shows_under_the_keys_it_came_from() {
    let tools = NameFilter::new(&strings(&["a*"]), &strings(&["b"])).unwrap();
    assert_eq!(
        serde_json::to_value(&tools).unwrap(),
        serde_json::json!({"tools_allow": ["a*"], "tools_deny": ["b"]})
    );
    let resources = NameFilter::resources(&strings(&["file:///*"]), &[]).unwrap();
    assert!(resources.admits("file:///notes"));
    assert!(!resources.admits("https://x"));
    assert_eq!(
        serde_json::to_value(&resources).unwrap(),
        serde_json::json!({"resources_allow": ["file:///*"], "resources_deny": []})
    );
}

#[test]
fn code_runs_live_under_the_state_dir_unless_the_file_says_where() {
    let base = "schema_version: 1\nupstreams:\n  gh: {command: x}\n";
    let default = load(base).unwrap();
    assert_eq!(default.exec_root(), default.runtime.exec_dir());
    let set = load(&format!(
        "{base}broker:\n  exec: {{workspace_root: ~/ws}}\n"
    ))
    .unwrap();
    assert_eq!(set.exec_root(), std::path::PathBuf::from("/home/user/ws"));
    let relative = load(&format!("{base}broker:\n  exec: {{workspace_root: ws}}\n")).unwrap_err();
    assert!(relative.contains("is not an absolute path"), "{relative}");
}

#[test]
fn each_name_style_has_its_separator() {
    assert_eq!(NameStyle::Dotted.separator(), ".");
    assert_eq!(NameStyle::DoubleUnderscore.separator(), "__");
    assert_eq!(NameStyle::Underscore.separator(), "_");
}

/// The daemon is started with these variables and a base allowlist, never the whole
/// environment of whoever started it: a name missing here is a secret an upstream never gets.
#[test]
fn the_daemon_needs_every_variable_the_file_refers_to() {
    let text = r#"schema_version: 1
broker:
  env_passthrough: [PASSED]
upstreams:
  gh:
    command: x
    env: {GITHUB_TOKEN: "${GH_TOKEN}", FROM_FILE: "${file:gh-token}", LANG: en}
  docs:
    transport: streamable_http
    url: "http://127.0.0.1:1/mcp"
    headers: {Authorization: "Bearer ${DOCS_TOKEN}"}
    oauth: {grant: client_credentials, client_id: c, client_secret: "${OAUTH_SECRET}"}
profiles:
  p: {upstreams: [gh]}
http:
  tokens:
    - {token: "${TEAM_TOKEN}", profile: p}
"#;
    let settings = load(text).unwrap();
    assert_eq!(
        settings.daemon_env_names(),
        [
            "DOCS_TOKEN",
            "GH_TOKEN",
            "OAUTH_SECRET",
            "PASSED",
            "TEAM_TOKEN"
        ]
    );
}

#[test]
fn byte_limits_have_a_floor_of_64_kib() {
    let settings = load(
        "schema_version: 1\nbroker:\n  max_outbound_bytes: 1\n  log_max_bytes: 1\nupstreams:\n  gh: {command: x}\n",
    )
    .unwrap();
    assert_eq!(settings.broker.max_outbound_bytes, 64 * 1024);
    assert_eq!(settings.broker.log_max_bytes, 64 * 1024);
}

#[test]
fn a_stdio_upstream_takes_no_url() {
    let err = load(
        "schema_version: 1\nupstreams:\n  gh: {command: x, url: \"http://127.0.0.1:1/mcp\"}\n",
    )
    .unwrap_err();
    assert!(err.contains("a stdio upstream takes no url"), "{err}");
}

#[test]
fn env_keys_and_references_are_variable_names() {
    for bad in ["1ABC", "A-B", "A B"] {
        let text = format!(
            "schema_version: 1\nupstreams:\n  gh:\n    command: x\n    env: {{\"{bad}\": v}}\n"
        );
        assert!(
            load(&text)
                .unwrap_err()
                .contains("is not a valid environment variable name"),
            "{bad}"
        );
        assert!(Template::parse(&format!("${{{bad}}}")).is_err(), "{bad}");
    }
    assert!(
        load("schema_version: 1\nupstreams:\n  gh:\n    command: x\n    env: {_OK_1: v}\n").is_ok()
    );
    let t = Template::parse("Bearer ${_TOKEN_2}").unwrap();
    assert_eq!(
        t.parts(),
        [
            Part::Literal("Bearer ".into()),
            Part::Env("_TOKEN_2".into())
        ]
    );
}

#[test]
fn a_profile_without_namespaces_sees_exactly_one_upstream() {
    let with = |upstreams: &str| {
        load(&format!(
            "schema_version: 1\nupstreams:\n  a: {{command: x}}\n  b: {{command: y}}\nprofiles:\n  p: {{upstreams: [{upstreams}], namespace: false}}\n"
        ))
    };
    assert!(with("a").is_ok(), "{:?}", with("a").err());
    let err = with("a, b").unwrap_err();
    assert!(
        err.contains("has namespace: false but sees 2 upstreams"),
        "{err}"
    );
}
