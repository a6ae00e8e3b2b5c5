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
