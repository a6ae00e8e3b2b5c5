//! Every scope of every client: where its servers are read from (Claude Code's local scope
//! inside ~/.claude.json included), what is left when some move, the broker's entry found
//! under any key, and a profile's allowlist rendered into Gemini CLI's and AGY's settings.

use std::path::Path;

use mcpb_clients::{
    Client, Entry, Place, Scope, local_folder, local_folders, render, servers, without,
};

const HOME: &str = "/home/u";
const CWD: &str = "/home/u/app";

fn names(place: &Place, text: &str) -> Vec<String> {
    servers(place, text)
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect()
}

#[test]
fn each_client_has_its_scopes_and_files() {
    let table: Vec<String> = Client::ALL
        .iter()
        .flat_map(|c| {
            c.places(Path::new(HOME), Path::new(CWD), Some(CWD))
                .into_iter()
                .map(move |p| {
                    format!(
                        "{:15} {:8} {} {}",
                        c.name(),
                        p.label().split(' ').next().unwrap(),
                        p.path.display(),
                        p.keys().join(".")
                    )
                })
        })
        .collect();
    insta::assert_snapshot!(table.join("\n"));
}

#[test]
fn claude_codes_local_scope_is_read_and_emptied_apart_from_the_user_scope() {
    let text = r#"{
  "projects": {
    "/home/u/app": {"mcpServers": {"loc": {"type": "stdio", "command": "x", "env": {"K": "v"}}}, "allowedTools": []},
    "/home/u/other": {"mcpServers": {"far": {"command": "y"}}},
    "/home/u/none": {"mcpServers": {}}
  },
  "mcpServers": {"usr": {"type": "stdio", "command": "u"}, "broker": {"command": "/bin/mcp-broker", "args": ["stdio"]}}
}
"#;
    assert_eq!(local_folder(text, Path::new(CWD)), CWD);
    assert_eq!(local_folders(text), ["/home/u/app", "/home/u/other"]);
    let places = Client::ClaudeCode.places(Path::new(HOME), Path::new(CWD), Some(CWD));
    let (user, local) = (&places[0], &places[1]);
    assert_eq!(local.scope, Scope::Local);
    assert_eq!(
        names(user, text),
        ["usr"],
        "the broker's entry is not a server"
    );
    assert_eq!(names(local, text), ["loc"]);
    let after = without(local, text, &["loc".into()]).unwrap();
    assert_eq!(names(local, &after), Vec::<String>::new());
    assert_eq!(names(user, &after), ["usr"]);
    assert!(
        after.contains("\"allowedTools\": []") && after.contains("\"far\""),
        "{after}"
    );
}

#[test]
fn vscode_keeps_servers_and_inputs_in_user_and_workspace_files() {
    let text = r#"{
  // workspace servers
  "inputs": [{"type": "promptString", "id": "gh", "password": true}],
  "servers": {
    "github": {"type": "stdio", "command": "npx", "args": ["-y", "gh"], "env": {"GITHUB_TOKEN": "${input:gh}"}},
    "fs": {"type": "stdio", "command": "npx", "args": ["${workspaceFolder}"]}
  }
}
"#;
    for scope in [Scope::User, Scope::Project] {
        let place = Place {
            client: Client::Vscode,
            scope,
            path: Client::Vscode.config_path(scope, Path::new(HOME), Path::new(CWD)),
            folder: None,
        };
        let found = servers(&place, text).unwrap();
        assert_eq!(
            found[0].env,
            [("GITHUB_TOKEN".to_string(), "${input:gh}".to_string())]
        );
        assert_eq!(found[1].args, ["${workspaceFolder}"]);
        let after = without(&place, text, &["fs".into()]).unwrap();
        assert!(after.contains("\"inputs\"") && after.contains("// workspace servers"));
        assert_eq!(names(&place, &after), ["github"]);
    }
}

#[test]
fn a_profiles_allowlist_is_rendered_into_gemini_and_agy_settings() {
    let mut e = Entry::for_client(Path::new("/bin/mcp-broker"), Client::Gemini, Some("p"));
    e.allowed_servers = Some(vec!["docs".into()]);
    for client in [Client::Gemini, Client::Agy] {
        let path = Path::new("/home/u/settings.json");
        let fresh = render(client, path, None, &e).unwrap();
        let v: serde_json::Value = serde_json::from_str(&fresh).unwrap();
        assert_eq!(
            v["mcp"]["allowed"],
            serde_json::json!(["docs", "mcp-broker"]),
            "{fresh}"
        );
        let theirs = "{\"mcp\": {\"allowed\": [\"git\"], \"excluded\": []}}\n";
        let next = render(client, path, Some(theirs), &e).unwrap();
        let v: serde_json::Value = serde_json::from_str(&next).unwrap();
        assert_eq!(
            v["mcp"]["allowed"],
            serde_json::json!(["docs", "mcp-broker"]),
            "{next}"
        );
        assert_eq!(v["mcp"]["excluded"], serde_json::json!([]));
    }
}

#[test]
fn a_rollback_of_a_file_the_client_rewrote_takes_out_only_the_brokers_change() {
    let path = Path::new("/home/u/.claude.json");
    let before = "{\n  \"numStartups\": 1,\n  \"mcpServers\": {\n    \"git\": {\"command\": \"uvx\", \"args\": [\"mcp-server-git\"]}\n  }\n}\n";
    let place = Client::ClaudeCode.places(Path::new(HOME), Path::new(CWD), Some(CWD))[0].clone();
    let e = Entry::for_client(Path::new("/bin/mcp-broker"), Client::ClaudeCode, None);
    let written = render(
        Client::ClaudeCode,
        path,
        Some(&without(&place, before, &["git".into()]).unwrap()),
        &e,
    )
    .unwrap();
    // The client counts its starts and adds a server of its own.
    let current = written
        .replace("\"numStartups\": 1", "\"numStartups\": 7")
        .replace(
            "\"mcpServers\": {",
            "\"mcpServers\": {\n    \"new\": {\"command\": \"x\"},",
        );
    let back = mcpb_clients::undo(Client::ClaudeCode, path, before, &written, &current).unwrap();
    let v: serde_json::Value = serde_json::from_str(&back).unwrap();
    assert_eq!(v["numStartups"], 7);
    assert_eq!(
        names(&place, &back),
        ["new", "git"],
        "the client's server stays, the moved one is back: {back}"
    );
    assert!(v["mcpServers"].get("mcp-broker").is_none(), "{back}");
    // The broker's own entry changed by hand: a conflict, nothing is guessed.
    let edited = written.replace("\"stdio\"", "\"stdio\", \"--x\"");
    assert!(mcpb_clients::undo(Client::ClaudeCode, path, before, &written, &edited).is_err());
    // Codex's TOML: the table comes back as it was written.
    let toml_before = "model = \"o4\"\n\n[mcp_servers.git]\ncommand = \"uvx\"  # git\nargs = [\"mcp-server-git\"]\n";
    let cplace = Client::Codex.places(Path::new(HOME), Path::new(CWD), None)[0].clone();
    let ce = Entry::for_client(Path::new("/bin/mcp-broker"), Client::Codex, None);
    let cwritten = render(
        Client::Codex,
        cplace.path.as_path(),
        Some(&without(&cplace, toml_before, &["git".into()]).unwrap()),
        &ce,
    )
    .unwrap();
    let ccurrent = cwritten.replace("model = \"o4\"", "model = \"o5\"");
    let cback = mcpb_clients::undo(
        Client::Codex,
        &cplace.path,
        toml_before,
        &cwritten,
        &ccurrent,
    )
    .unwrap();
    assert!(
        cback.contains("model = \"o5\"") && cback.contains("[mcp_servers.git]"),
        "{cback}"
    );
    assert!(cback.contains("command = \"uvx\"  # git"), "{cback}");
    assert!(!cback.contains("mcp-broker"), "{cback}");
}

#[test]
fn a_server_its_client_would_not_start_is_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let cwd = home.join("app");
    std::fs::create_dir_all(cwd.join(".claude")).unwrap();
    let folder = cwd.display().to_string();
    std::fs::write(
        home.join(".claude.json"),
        serde_json::json!({"projects": {folder.clone(): {
            "enabledMcpjsonServers": ["ok"], "disabledMcpjsonServers": ["no"],
            "disabledMcpServers": ["off"], "hasTrustDialogAccepted": true}}})
        .to_string(),
    )
    .unwrap();
    let places = Client::ClaudeCode.places(home, &cwd, Some(&folder));
    let (user, project) = (&places[0], &places[2]);
    let a = mcpb_clients::Approvals::read(Client::ClaudeCode, home, &cwd, &folder);
    assert_eq!(a.refused(project, "ok"), None);
    assert!(a.refused(project, "no").unwrap().contains("rejected"));
    assert!(a.refused(project, "new").unwrap().contains("not approved"));
    assert!(a.refused(user, "off").unwrap().contains("switched off"));
    assert_eq!(
        a.refused(user, "new"),
        None,
        "user servers need no approval"
    );
    std::fs::write(
        cwd.join(".claude/settings.local.json"),
        "{\"enableAllProjectMcpServers\": true}",
    )
    .unwrap();
    let a = mcpb_clients::Approvals::read(Client::ClaudeCode, home, &cwd, &folder);
    assert_eq!(a.refused(project, "new"), None);
    // An untrusted folder starts no project server, approved or not.
    std::fs::write(
        home.join(".claude.json"),
        serde_json::json!({"projects": {folder.clone(): {"enabledMcpjsonServers": ["ok"]}}})
            .to_string(),
    )
    .unwrap();
    let a = mcpb_clients::Approvals::read(Client::ClaudeCode, home, &cwd, &folder);
    assert!(a.refused(project, "ok").unwrap().contains("trust"));
    // Codex reads a project's config only in a trusted folder.
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    let codex = Client::Codex.places(home, &cwd, None);
    let a = mcpb_clients::Approvals::read(Client::Codex, home, &cwd, "");
    assert!(a.refused(&codex[1], "cp").unwrap().contains("not trusted"));
    assert_eq!(a.refused(&codex[0], "cu"), None);
    std::fs::write(
        home.join(".codex/config.toml"),
        format!("[projects.\"{folder}\"]\ntrust_level = \"trusted\"\n"),
    )
    .unwrap();
    let a = mcpb_clients::Approvals::read(Client::Codex, home, &cwd, "");
    assert_eq!(a.refused(&codex[1], "cp"), None);

    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(
        home.join(".gemini/settings.json"),
        "{\"mcp\": {\"allowed\": [\"a\", \"x\"], \"excluded\": [\"x\"]}}",
    )
    .unwrap();
    let g = Client::Gemini.places(home, &cwd, None);
    let a = mcpb_clients::Approvals::read(Client::Gemini, home, &cwd, "");
    assert_eq!(a.refused(&g[0], "a"), None);
    assert!(a.refused(&g[0], "x").unwrap().contains("excluded"));
    assert!(a.refused(&g[0], "b").unwrap().contains("allowed"));
    assert!(a.refused(&g[1], "a").unwrap().contains("not trusted"));
    std::fs::write(
        home.join(".gemini/trustedFolders.json"),
        serde_json::json!({home.display().to_string(): "TRUST_FOLDER"}).to_string(),
    )
    .unwrap();
    let a = mcpb_clients::Approvals::read(Client::Gemini, home, &cwd, "");
    assert_eq!(
        a.refused(&g[1], "a"),
        None,
        "a trusted parent trusts the folder"
    );
    // The rule of the nearest folder decides; `/mcp disable` switches a server off.
    std::fs::write(
        home.join(".gemini/trustedFolders.json"),
        serde_json::json!({home.display().to_string(): "TRUST_FOLDER", folder.clone(): "DO_NOT_TRUST"})
            .to_string(),
    )
    .unwrap();
    std::fs::write(
        home.join(".gemini/mcp-server-enablement.json"),
        "{\"a\": {\"enabled\": false}}",
    )
    .unwrap();
    let a = mcpb_clients::Approvals::read(Client::Gemini, home, &cwd, "");
    assert!(a.refused(&g[1], "a").unwrap().contains("not trusted"));
    assert!(a.refused(&g[0], "a").unwrap().contains("switched off"));
}

#[test]
fn a_codex_bearer_token_is_read_as_the_authorization_header_it_sends() {
    let text = "[mcp_servers.api]\nurl = \"https://api.example/mcp\"\nbearer_token = \"tok-123\"\n[mcp_servers.env]\nurl = \"https://e.example/mcp\"\nbearer_token_env_var = \"E_TOKEN\"\n";
    let place = Client::Codex.places(Path::new(HOME), Path::new(CWD), None)[0].clone();
    let found = servers(&place, text).unwrap();
    assert_eq!(
        found[0].headers,
        [("Authorization".to_string(), "Bearer tok-123".to_string())]
    );
    assert!(found[1].headers.is_empty());
    assert_eq!(
        found[1].env_headers,
        [(
            "Authorization".to_string(),
            "E_TOKEN".to_string(),
            "Bearer ".to_string()
        )]
    );
}

#[test]
fn codex_servers_written_as_an_inline_table_take_the_entry() {
    let text = "mcp_servers = { git = { command = \"uvx\", args = [\"mcp-server-git\"] } }\n";
    let path = Path::new("/home/u/.codex/config.toml");
    let e = Entry::for_client(Path::new("/bin/mcp-broker"), Client::Codex, None);
    let out = render(Client::Codex, path, Some(text), &e).unwrap();
    let place = Client::Codex.places(Path::new(HOME), Path::new(CWD), None)[0].clone();
    assert_eq!(names(&place, &out), ["git"], "{out}");
    assert!(
        mcpb_clients::current_entry(Client::Codex, path, &out)
            .unwrap()
            .is_some(),
        "{out}"
    );
}

#[test]
fn a_rollback_puts_servers_back_where_the_client_removed_their_list_and_keeps_its_own() {
    // Codex: `codex mcp remove mcp-broker` left the file empty.
    let cpath = Path::new("/home/u/.codex/config.toml");
    let before = "[mcp_servers.c1]\ncommand = \"x\"\n\n[mcp_servers.c2]\ncommand = \"y\"\n";
    let cplace = Client::Codex.places(Path::new(HOME), Path::new(CWD), None)[0].clone();
    let e = Entry::for_client(Path::new("/bin/mcp-broker"), Client::Codex, None);
    let written = render(
        Client::Codex,
        cpath,
        Some(&without(&cplace, before, &["c1".into(), "c2".into()]).unwrap()),
        &e,
    )
    .unwrap();
    let back = mcpb_clients::undo(Client::Codex, cpath, before, &written, "").unwrap();
    assert_eq!(names(&cplace, &back), ["c1", "c2"], "{back}");
    // Claude Code: the import made the user `mcpServers` (only a local server was there);
    // the user then added a server of their own to it.
    let path = Path::new("/home/u/.claude.json");
    let before =
        "{\"projects\": {\"/home/u/app\": {\"mcpServers\": {\"l1\": {\"command\": \"x\"}}}}}\n";
    let places = Client::ClaudeCode.places(Path::new(HOME), Path::new(CWD), Some(CWD));
    let (user, local) = (&places[0], &places[1]);
    let e = Entry::for_client(Path::new("/bin/mcp-broker"), Client::ClaudeCode, None);
    let written = render(
        Client::ClaudeCode,
        path,
        Some(&without(local, before, &["l1".into()]).unwrap()),
        &e,
    )
    .unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&written).unwrap();
    v["mcpServers"]["other"] = serde_json::json!({"command": "o"});
    let current = serde_json::to_string_pretty(&v).unwrap();
    let back = mcpb_clients::undo(Client::ClaudeCode, path, before, &written, &current).unwrap();
    assert_eq!(names(user, &back), ["other"], "{back}");
    assert_eq!(names(local, &back), ["l1"], "{back}");
    // The whole list removed by the client: the server comes back, the list with it.
    let gone = "{\"projects\": {\"/home/u/app\": {}}}\n";
    let back = mcpb_clients::undo(Client::ClaudeCode, path, before, &written, gone).unwrap();
    assert_eq!(names(local, &back), ["l1"], "{back}");
}

#[test]
fn a_project_entry_that_only_looks_like_the_broker_is_listed_not_hidden() {
    let me = std::env::current_exe().unwrap();
    let text = format!(
        r#"{{"mcpServers": {{
  "mcp-broker": {{"command": "npx", "args": ["-y", "some-server"]}},
  "helper": {{"command": "./tools/mcp-broker", "args": ["stdio"]}},
  "redirected": {{"command": "{me}", "args": ["stdio"], "env": {{"MCP_BROKER_CONFIG": "{CWD}/.x/b.yaml"}}}},
  "flagged": {{"command": "{me}", "args": ["stdio", "--config", "./b.yaml"]}},
  "broker": {{"command": "{me}", "args": ["stdio", "--client", "claude-code"], "env": {{"MCP_BROKER_HOME": "/srv/broker-home"}}}}
}}}}"#,
        me = me.display()
    );
    let project = Client::ClaudeCode
        .places(Path::new(HOME), Path::new(CWD), None)
        .into_iter()
        .find(|p| p.scope == Scope::Project)
        .unwrap();
    // Keyed like the broker's entry but running something else: listed. A `… stdio` from the
    // repository's own folder: listed. This very binary's shim pointed at a config of the
    // repository's, by its environment or by a flag: listed. This very binary's shim as the
    // broker writes it for this user (its own home): the broker's own entry.
    let own = mcpb_clients::OwnEnv(vec![(
        "MCP_BROKER_HOME".to_string(),
        "/srv/broker-home".to_string(),
    )]);
    let listed = |text: &str| -> Vec<String> {
        mcpb_clients::servers_with(&project, text, &own)
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect()
    };
    assert_eq!(
        listed(&text),
        ["mcp-broker", "helper", "redirected", "flagged"]
    );
    // The broker's own variables pointing anywhere but this user's home are someone else's,
    // however the path is spelt: it is judged by what it resolves to when the client runs it.
    for home in [
        "/proc/self/cwd/.mcpb",
        "/proc/self/root/srv/broker-home",
        "/${PWD}/.mcpb",
        "/${workspaceFolder}/.mcpb",
        "/srv/broker-home/../broker-home",
        "/srv/./broker-home",
        "/srv/elsewhere",
        "relative/.mcpb",
    ] {
        let entry = format!(
            r#"{{"mcpServers": {{"mcp-broker": {{"command": "{me}", "args": ["stdio"], "env": {{"MCP_BROKER_HOME": "{home}"}}}}}}}}"#,
            me = me.display()
        );
        assert_eq!(listed(&entry), ["mcp-broker"], "{home}");
    }
    // An entry that also names a URL (or a type other than stdio) connects there, whatever its
    // command: someone else's.
    for extra in [
        r#""type": "http", "url": "http://127.0.0.1:9/evil""#,
        r#""httpUrl": "http://127.0.0.1:9/evil""#,
        r#""serverUrl": "http://127.0.0.1:9/evil""#,
        r#""headers": {"X": "y"}"#,
        r#""cwd": "/tmp""#,
    ] {
        let entry = format!(
            r#"{{"mcpServers": {{"mcp-broker": {{"command": "{me}", "args": ["stdio"], {extra}}}}}}}"#,
            me = me.display()
        );
        assert_eq!(listed(&entry), ["mcp-broker"], "{extra}");
    }
    let typed = format!(
        r#"{{"mcpServers": {{"mcp-broker": {{"type": "stdio", "command": "{me}", "args": ["stdio"]}}}}}}"#,
        me = me.display()
    );
    assert!(
        listed(&typed).is_empty(),
        "the broker's own, as it writes it"
    );
    // A config the broker did not write for this user is never its own, even with no home.
    let config = format!(
        r#"{{"mcpServers": {{"mcp-broker": {{"command": "{me}", "args": ["stdio"], "env": {{"MCP_BROKER_CONFIG": "/srv/other.yaml"}}}}}}}}"#,
        me = me.display()
    );
    assert_eq!(listed(&config), ["mcp-broker"]);
    // In the user's own file the name and shape are enough, as before.
    let user = Client::ClaudeCode.places(Path::new(HOME), Path::new(CWD), None)[0].clone();
    assert_eq!(user.scope, Scope::User);
    assert_eq!(
        names(&user, &text),
        ["helper", "redirected", "flagged", "broker"]
    );
}

#[test]
fn codex_and_claude_code_find_a_repositorys_project_file_from_a_subfolder() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let deeper = repo.join("src/deeper");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join(".codex")).unwrap();
    std::fs::create_dir_all(&deeper).unwrap();
    std::fs::write(repo.join(".codex/config.toml"), "").unwrap();
    std::fs::write(repo.join(".mcp.json"), "{}").unwrap();
    let home = tmp.path().join("home");
    assert_eq!(
        Client::Codex.config_path(Scope::Project, &home, &deeper),
        repo.join(".codex/config.toml")
    );
    assert_eq!(
        Client::ClaudeCode.config_path(Scope::Project, &home, &deeper),
        repo.join(".mcp.json")
    );
    // Outside any repository, only the folder's own file.
    let loose = tmp.path().join("loose/sub");
    std::fs::create_dir_all(&loose).unwrap();
    assert_eq!(
        Client::Codex.config_path(Scope::Project, &home, &loose),
        loose.join(".codex/config.toml")
    );
    // A home kept in git: the user's own file is never the project's.
    assert_eq!(
        Client::Codex.config_path(Scope::Project, &repo, &deeper),
        deeper.join(".codex/config.toml")
    );
}

/// Codex's own rule: the trust recorded for the folder holding `.codex`, else the project root
/// (the nearest `.git`), else a worktree's main checkout; an enclosing folder's trust (the
/// home, a parent of many clones) counts for nothing.
#[test]
fn codex_trust_is_read_as_codex_reads_it() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let src = tmp.path().join("src");
    let repo = src.join("repo");
    let sub = repo.join("pkg");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(sub.join(".codex")).unwrap();
    std::fs::write(
        sub.join(".codex/config.toml"),
        "[mcp_servers.x]\ncommand = \"x\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    let project = Client::Codex
        .places(&home, &sub, None)
        .into_iter()
        .find(|p| p.scope == Scope::Project)
        .unwrap();
    let trusted_with = |entries: &[(&Path, &str)]| {
        let text: String = entries
            .iter()
            .map(|(p, level)| {
                format!(
                    "[projects.\"{}\"]\ntrust_level = \"{level}\"\n",
                    p.display()
                )
            })
            .collect();
        std::fs::write(home.join(".codex/config.toml"), text).unwrap();
        let a = mcpb_clients::Approvals::read(Client::Codex, &home, &sub, "");
        a.refused(&project, "x").is_none()
    };
    assert!(!trusted_with(&[(&src, "trusted")]), "an enclosing folder");
    assert!(!trusted_with(&[(tmp.path(), "trusted")]));
    assert!(
        trusted_with(&[(&sub, "trusted")]),
        "the folder holding .codex"
    );
    assert!(trusted_with(&[(&repo, "trusted")]), "the project root");
    // The folder's own word comes first.
    assert!(!trusted_with(&[(&sub, "untrusted"), (&repo, "trusted")]));
    assert!(!trusted_with(&[]));
}
