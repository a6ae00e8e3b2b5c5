//! `measure --client`: a client's context before and after it moved onto the broker, from its
//! own files (and their backup), each server started as the client starts it.

use super::support::{Home, fixture};

fn run(home: &Home, args: &[&str]) -> (bool, String, String) {
    let out = home.cmd(args).current_dir(home.root()).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn a_clients_context_is_measured_before_and_after_its_import() {
    let home = Home::with_config("schema_version: 1\nprofiles:\n  default: {}\n");
    let dir = home.root().join(".cursor");
    std::fs::create_dir_all(&dir).unwrap();
    let fx = fixture().display().to_string();
    std::fs::write(
        dir.join("mcp.json"),
        serde_json::json!({"mcpServers": {
            "alpha": {"command": fx, "args": ["--tools", "20"]},
            "beta": {"command": fx},
        }})
        .to_string(),
    )
    .unwrap();

    let (ok, before, said) = run(&home, &["measure", "--client", "cursor"]);
    assert!(ok, "{said}");
    insta::assert_snapshot!("measure_cursor_before_import", before);
    assert!(said.contains("has no broker entry yet"), "{said}");

    let (ok, _, said) = run(
        &home,
        &["client", "import", "--client", "cursor", "--compact"],
    );
    assert!(ok, "{said}");
    let (ok, _, said) = run(
        &home,
        &[
            "client",
            "import",
            "--client",
            "cursor",
            "--compact",
            "--apply",
        ],
    );
    assert!(ok, "{said}");
    let (ok, after, said) = run(&home, &["measure", "--client", "cursor"]);
    assert!(ok, "{said}");
    insta::assert_snapshot!("measure_cursor_after_import", after);

    // --all-clients finds the same client, and only clients that have something here.
    let (ok, all, _) = run(&home, &["measure", "--all-clients", "--json"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&all).unwrap();
    let clients: Vec<&str> = v["clients"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["client"].as_str())
        .collect();
    assert_eq!(clients, ["cursor"], "{all}");
    assert_eq!(v["clients"][0]["rows"][0]["before"], 2);
    assert_eq!(v["clients"][0]["rows"][0]["after"], 1);
}

/// A remote server is listed on both sides (over its transport, by the daemon), so a raw
/// import measures the same definitions before and after, as `measure --profile` counts them;
/// the same URL in a second client is the same upstream, with no folder.
#[test]
fn a_remote_server_counts_on_both_sides_and_one_url_is_one_upstream() {
    let deps = super::support::deps();
    let path = super::support::deps_path(&deps);
    let http = super::interop_http::HttpServer::start(&deps, &path, "streamableHttp");
    let url = format!("http://127.0.0.1:{}/mcp", http.port);
    let home = Home::with_config("schema_version: 1\nprofiles:\n  default: {}\n");
    let dir = home.root().join(".cursor");
    std::fs::create_dir_all(&dir).unwrap();
    let fx = fixture().display().to_string();
    std::fs::write(
        dir.join("mcp.json"),
        serde_json::json!({"mcpServers": {
            "alpha": {"command": fx},
            "web": {"url": url},
        }})
        .to_string(),
    )
    .unwrap();
    let gemini = home.root().join(".gemini");
    std::fs::create_dir_all(&gemini).unwrap();
    std::fs::write(
        gemini.join("settings.json"),
        serde_json::json!({"mcpServers": {"everything": {"httpUrl": url}}}).to_string(),
    )
    .unwrap();
    let json_rows = |client: &str| -> serde_json::Value {
        let (ok, out, said) = run(&home, &["measure", "--client", client, "--json"]);
        assert!(ok, "{said}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["clients"][0]["rows"].clone()
    };
    let before = json_rows("cursor");
    for args in [
        &["client", "import", "--client", "cursor", "--raw"][..],
        &["client", "import", "--client", "cursor", "--raw", "--apply"],
        &["client", "import", "--client", "gemini", "--raw"],
        &["client", "import", "--client", "gemini", "--raw", "--apply"],
    ] {
        let (ok, _, said) = run(&home, args);
        assert!(ok, "{args:?}: {said}");
    }
    let after = json_rows("cursor");
    let defs = |rows: &serde_json::Value, which: &str| -> u64 {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["what"] == "MCP tool definitions")
            .unwrap_or_else(|| panic!("{rows}"))[which]
            .as_u64()
            .unwrap()
    };
    // Before any import the broker has no upstream for the URL: the server is left out of
    // both sides, and the table's notes say so.
    assert_eq!(defs(&before, "before"), defs(&before, "after"), "{before}");
    let remote_before = defs(&after, "before");
    assert!(remote_before > defs(&before, "before"), "{before} {after}");
    assert_eq!(
        defs(&after, "after"),
        remote_before,
        "raw: the same definitions: {after}"
    );
    let (ok, profile, said) = run(&home, &["measure", "--profile", "cursor", "--json"]);
    assert!(ok, "{said}");
    let profile: serde_json::Value = serde_json::from_str(&profile).unwrap();
    assert_eq!(
        profile["after"]["tools"].as_u64(),
        Some(remote_before),
        "{profile}"
    );
    // One URL, one upstream, and no folder for it.
    let config = std::fs::read_to_string(home.config_path()).unwrap();
    assert_eq!(config.matches(url.as_str()).count(), 1, "{config}");
    let (ok, shown, _) = run(&home, &["config", "show", "--json"]);
    assert!(ok);
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    let web = shown["upstreams"]
        .as_object()
        .unwrap()
        .values()
        .find(|u| u["url"] == url.as_str())
        .unwrap();
    assert!(web["cwd"].is_null(), "{web}");
    drop(http);
    let _ = home.run(&["stop"]);
}

/// Codex's cache of its hosted apps' tools, as Codex 0.171.0 writes it: `apps` of (id, name,
/// tool count), each tool with its app and annotations.
fn codex_apps_cache(home: &Home, apps: &[(&str, &str, usize)]) {
    let mut tools = Vec::new();
    for (id, name, n) in apps {
        let ns = name.to_lowercase().replace(' ', "_");
        for i in 0..*n {
            let tool = format!("{ns}_op{i}");
            tools.push(serde_json::json!({
                "server_name": "codex_apps", "supports_parallel_tool_calls": false,
                "server_origin": null, "tool_name": tool, "tool_namespace": format!("codex_apps__{ns}"),
                "namespace_description": name, "connector_id": id, "connector_name": name,
                "plugin_display_names": [],
                "tool": {"name": tool, "title": tool,
                    "description": format!("Operation {i} of {name}."),
                    "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
                    "annotations": {"readOnlyHint": i % 2 == 0, "destructiveHint": i % 5 == 0, "openWorldHint": true}},
            }));
        }
    }
    let dir = home.root().join(".codex/cache/codex_apps_tools");
    std::fs::create_dir_all(&dir).unwrap();
    let cache = serde_json::json!({"discovery_scope": [], "schema_version": 4, "tools": tools});
    std::fs::write(
        dir.join("a7319872fc994a9f726692e5f3905a33db8696a4.json"),
        cache.to_string(),
    )
    .unwrap();
}

fn row(measured: &str, what: &str) -> (u64, u64) {
    let v: serde_json::Value = serde_json::from_str(measured).unwrap();
    let rows = v["clients"][0]["rows"].as_array().unwrap();
    let r = rows.iter().find(|r| r["what"] == what).unwrap();
    (r["before"].as_u64().unwrap(), r["after"].as_u64().unwrap())
}

/// The design's Codex table: 195 hosted app tools cached, an allowlist of one app and some
/// tools of another keeps 39; with the client's own servers moved behind the broker's entry,
/// `measure --client codex` counts both sides. The allowlist is a dry run until --apply, is
/// backed up, and rolls back.
#[test]
fn codexs_hosted_apps_are_limited_to_an_allowlist_and_measured_before_and_after() {
    let home = Home::with_config("schema_version: 1\nprofiles:\n  default: {}\n");
    let fx = fixture().display().to_string();
    let codex = home.root().join(".codex");
    std::fs::create_dir_all(&codex).unwrap();
    let config = codex.join("config.toml");
    std::fs::write(
        &config,
        format!("model = \"gpt-5\"\n\n[mcp_servers.alpha]\ncommand = \"{fx}\"\nargs = [\"--tools\", \"20\"]\n"),
    )
    .unwrap();
    codex_apps_cache(
        &home,
        &[
            ("connector_gh", "GitHub", 40),
            ("connector_drive", "Google Drive", 30),
            ("connector_mail", "Gmail", 35),
            ("connector_slack", "Slack", 30),
            ("connector_linear", "Linear", 25),
            ("connector_notion", "Notion", 35),
        ],
    );
    for args in [
        &["client", "import", "--client", "codex", "--compact"][..],
        &[
            "client",
            "import",
            "--client",
            "codex",
            "--compact",
            "--apply",
        ],
    ] {
        let (ok, _, said) = run(&home, args);
        assert!(ok, "{said}");
    }
    let (ok, listed, said) = run(&home, &["client", "codex-apps"]);
    assert!(ok, "{said}");
    assert!(
        listed.contains("connector_linear\tLinear\t25\t25"),
        "{listed}"
    );

    let mut allow = String::from("linear");
    for i in 0..14 {
        allow.push_str(&format!(",Notion/notion_op{i}"));
    }
    let imported = std::fs::read_to_string(&config).unwrap();
    let (ok, dry, said) = run(&home, &["client", "codex-apps", "--allow", &allow]);
    assert!(ok, "{said}");
    assert!(dry.contains("+[apps._default]\n+enabled = false"), "{dry}");
    assert!(
        dry.contains("hosted app tools shown: 195 of 195 now, 39 after"),
        "{dry}"
    );
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        imported,
        "a dry run wrote"
    );
    let (ok, _, said) = run(
        &home,
        &["client", "codex-apps", "--allow", &allow, "--apply"],
    );
    assert!(ok, "{said}");
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(
        written.starts_with(&imported),
        "the rest of the file moved:\n{written}"
    );

    let (ok, measured, said) = run(&home, &["measure", "--client", "codex", "--json"]);
    assert!(ok, "{said}");
    assert_eq!(
        row(&measured, "hosted codex_apps tool definitions"),
        (195, 39)
    );
    // Before: alpha's own tools, as the import's backup kept the file; after: the entry's.
    let (mcp_before, mcp_after) = row(&measured, "MCP tool definitions");
    assert!(mcp_before > 20 && mcp_after < mcp_before, "{measured}");
    let all = row(&measured, "always-loaded definitions in all");
    assert_eq!(all, (195 + mcp_before, 39 + mcp_after), "{measured}");

    let (ok, _, said) = run(&home, &["client", "rollback", "--client", "codex"]);
    assert!(ok, "{said}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), imported);
    let (_, listed, _) = run(&home, &["client", "codex-apps"]);
    assert!(
        listed.contains("connector_notion\tNotion\t35\t35"),
        "{listed}"
    );
}
