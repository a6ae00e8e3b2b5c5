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
