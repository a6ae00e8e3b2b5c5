//! Every semantic check has one clear message, with location and key path.

use mcpb_config::{ConfigSource, ResolveContext, load_str};

fn errors(text: &str) -> String {
    let ctx = ResolveContext {
        home: Some("/home/user".into()),
        broker_home: None,
        exe: "/opt/mcp-broker".into(),
        upstream_sandbox: None,
    };
    match load_str(
        text,
        "broker.yaml",
        ConfigSource::File("broker.yaml".into()),
        &ctx,
    ) {
        Ok(_) => "ok".to_string(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn unknown_key_has_location_and_path() {
    let text = "schema_version: 1\nupstreams:\n  gh:\n    command: npx\n    comand: oops\n";
    insta::assert_snapshot!(errors(text));
}

#[test]
fn unknown_top_level_key() {
    insta::assert_snapshot!(errors("schema_version: 1\nupstream: {}\n"));
}

#[test]
fn duplicate_keys_are_rejected() {
    let text = "schema_version: 1\nupstreams:\n  a: {command: x}\n  a: {command: y}\n";
    insta::assert_snapshot!(errors(text));
}

#[test]
fn yaml_1_1_booleans_stay_strings() {
    let text = "schema_version: 1\nupstreams:\n  a: {command: NO}\n";
    assert_eq!(errors(text), "ok");
}

#[test]
fn every_semantic_error_is_listed() {
    let text = r#"schema_version: 2
upstreams:
  my.server: {command: x}
  a__b: {command: x}
  nocmd: {}
  leaky:
    command: x
    env: {GITHUB_TOKEN: ghp_literal, NEWS_LANG: en, DB_PASSWORD: "${DB_PASSWORD}", BAD: "${oops"}
profiles:
  p:
    upstreams: [leaky, missing, leaky]
clients:
  codex: {profile: nope}
"#;
    insta::assert_snapshot!(errors(text));
}

#[test]
fn remote_upstreams_and_unsupported_modes() {
    let text = r#"schema_version: 1
upstreams:
  ok: {transport: streamable_http, url: "http://127.0.0.1:1/mcp", headers: {Authorization: "Bearer ${T}"}}
  nourl: {transport: sse}
  both: {transport: sse, url: "http://127.0.0.1:1/sse", command: x}
  ftp: {transport: streamable_http, url: "ftp://example/x"}
  each: {transport: streamable_http, url: "http://127.0.0.1:1/mcp", lifecycle: per_session}
  leak: {transport: streamable_http, url: "http://127.0.0.1:1/mcp", headers: {Authorization: "Bearer abc"}}
profiles:
  c: {compact_tools_enabled: true, pinned_tools: [nowhere.tool]}
"#;
    insta::assert_snapshot!(errors(text));
}

#[test]
fn a_tool_filter_that_is_not_a_glob_is_named_with_its_upstream() {
    let text =
        "schema_version: 1\nupstreams:\n  gh:\n    command: npx\n    tools_deny: [\"get_[\"]\n";
    let e = errors(text);
    assert!(e.contains("upstreams.gh.tools_allow"), "{e}");
    assert!(e.contains("'get_[' is not a tool name glob"), "{e}");
    assert!(e.contains("hint:"), "{e}");
    let ok = "schema_version: 1\nupstreams:\n  gh:\n    command: npx\n    tools_allow: [\"get_*\", \"list_?\"]\n    tools_deny: [\"get_secret*\"]\n";
    assert_eq!(errors(ok), "ok");
}

#[test]
fn oauth_settings_are_checked_where_they_are_written() {
    let text = r#"schema_version: 1
upstreams:
  notes:
    url: https://notes.example/mcp
    transport: streamable_http
    oauth: {client_id: app, client_secret: "literally-secret", grant: client_credentials, client_metadata_url: "http://x/doc.json"}
  cc:
    url: https://cc.example/mcp
    transport: streamable_http
    oauth: {grant: client_credentials}
  local:
    command: npx
    oauth: {}
"#;
    let e = errors(text);
    assert!(
        e.contains("upstreams.notes.oauth.client_secret: the client secret is written literally"),
        "{e}"
    );
    assert!(
        e.contains("upstreams.notes.oauth.client_metadata_url"),
        "{e}"
    );
    assert!(e.contains("upstreams.cc.oauth.grant: the client_credentials grant needs a client_id and a client_secret"), "{e}");
    assert!(
        e.contains("upstreams.local.oauth: oauth is for remote upstreams"),
        "{e}"
    );
    let ok = "schema_version: 1\nupstreams:\n  notes:\n    url: https://notes.example/mcp\n    transport: streamable_http\n    oauth: {client_id: app, client_secret: \"${NOTES_SECRET}\", scopes: [read]}\n";
    assert_eq!(errors(ok), "ok");
}

#[test]
fn durations_are_taken_as_people_write_them_and_a_wrong_one_says_how() {
    let ok = "schema_version: 1\nbroker: {call_timeout_ms: \"30s\", max_call_ms: \"10m\"}\nupstreams:\n  gh: {command: npx, idle_timeout_ms: \"1 minute\", startup_timeout_ms: 5000}\n";
    assert_eq!(errors(ok), "ok");
    let ctx = mcpb_config::ResolveContext::default();
    let s = mcpb_config::load_str(ok, "broker.yaml", mcpb_config::ConfigSource::Embedded, &ctx)
        .unwrap();
    assert_eq!(s.broker.call_timeout, std::time::Duration::from_secs(30));
    assert_eq!(
        s.upstreams["gh"].idle_timeout,
        Some(std::time::Duration::from_secs(60))
    );
    let bad = "schema_version: 1\nbroker: {call_timeout_ms: \"a while\"}\n";
    let e = errors(bad);
    assert!(e.contains("\"a while\" is not a duration"), "{e}");
    assert!(e.contains("\"30s\""), "{e}");
}

#[test]
fn an_unknown_key_far_from_every_known_one_lists_them() {
    let e = errors("schema_version: 1\nbroker: {zzzz: 1}\n");
    assert!(e.contains("unknown field `zzzz`"), "{e}");
    assert!(e.contains("hint: the keys here: "), "{e}");
    assert!(e.contains("call_timeout_ms"), "{e}");
}

/// A 50 MB scalar took 3 s and 220 MB to load; a file past the cap is refused unread.
#[test]
fn a_file_past_the_size_cap_is_refused_without_parsing_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.yaml");
    let text = format!(
        "schema_version: 1\nupstreams:\n  a: {{command: \"{}\"}}\n",
        "x".repeat(5 << 20)
    );
    std::fs::write(&path, text).unwrap();
    let ctx = ResolveContext {
        home: Some("/home/user".into()),
        broker_home: None,
        exe: "/opt/mcp-broker".into(),
        upstream_sandbox: None,
    };
    let started = std::time::Instant::now();
    let e = mcpb_config::load(&ConfigSource::File(path), &ctx).unwrap_err();
    assert!(e.to_string().contains("larger than 4 MiB"), "{e}");
    assert!(e.to_string().contains("hint:"), "{e}");
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
}

#[test]
fn the_underscore_style_refuses_upstream_names_it_could_not_split() {
    let text = "schema_version: 1\nupstreams:\n  my_srv: {command: x}\n  git: {command: y}\nprofiles:\n  codex: {broker_tool_name_style: underscore}\n";
    insta::assert_snapshot!(errors(text));
    let fine = "schema_version: 1\nupstreams:\n  my-srv: {command: x}\nprofiles:\n  codex: {broker_tool_name_style: underscore}\n";
    assert_eq!(errors(fine), "ok");
}

#[test]
fn a_sandboxed_server_cannot_be_given_a_home() {
    let text = "schema_version: 1\nupstreams:\n  gh:\n    command: npx\n    env: {HOME: /srv/other}\n    sandbox: standard\n";
    let e = errors(text);
    assert!(
        e.contains("upstreams.gh.env.HOME: a sandboxed server gets a home of its own"),
        "{e}"
    );
    let off =
        "schema_version: 1\nupstreams:\n  gh:\n    command: npx\n    env: {HOME: /srv/other}\n";
    assert_eq!(errors(off), "ok");
}

#[test]
fn a_remote_upstream_takes_no_folder() {
    let text = "schema_version: 1\nupstreams:\n  web: {transport: streamable_http, url: \"http://127.0.0.1:9/mcp\", cwd: /srv}\n";
    let said = errors(text);
    assert!(
        said.contains("upstreams.web.cwd") && said.contains("runs elsewhere"),
        "{said}"
    );
}
