//! Golden files: every client × (no file, a file with other servers and comments, a broken
//! file), an entry replaced in place, and a backup round trip that gives the file back byte
//! for byte.

use std::path::Path;

use mcpb_clients::{
    Backups, Client, ClientsError, Entry, current_entry, diff, entry_value, render,
};

/// What a user already has, in each client's own format.
fn theirs(client: Client) -> &'static str {
    match client {
        Client::Codex => {
            "# my codex setup\nmodel = \"o4\"\n\n[mcp_servers.git]\ncommand = \"uvx\"   # the git server\nargs = [\"mcp-server-git\"]\n\n[profiles.fast]\nmodel = \"o4-mini\"\n"
        }
        Client::Vscode => {
            "{\n  // my servers\n  \"servers\": {\n    \"git\": {\"type\": \"stdio\", \"command\": \"uvx\", \"args\": [\"mcp-server-git\"]}, // git\n  },\n  \"inputs\": []\n}\n"
        }
        Client::ClaudeDesktop
        | Client::ClaudeCode
        | Client::Gemini
        | Client::Cursor
        | Client::Agy => {
            "{\n  // my servers\n  \"theme\": \"dark\",\n  \"mcpServers\": {\n    \"git\": {\"command\": \"uvx\", \"args\": [\"mcp-server-git\"]} // git\n  }\n}\n"
        }
    }
}

fn broken(client: Client) -> &'static str {
    match client {
        Client::Codex => "[mcp_servers.git\ncommand = \"uvx\"\n",
        Client::ClaudeDesktop
        | Client::ClaudeCode
        | Client::Gemini
        | Client::Cursor
        | Client::Vscode
        | Client::Agy => "{\n  \"mcpServers\": {\n    \"git\": {\"command\": \"uvx\",,}\n",
    }
}

fn entry(client: Client) -> Entry {
    Entry::for_client(
        Path::new("/home/u/.cargo/bin/mcp-broker"),
        client,
        Some("compact"),
    )
}

#[test]
fn every_client_gets_its_entry_in_its_own_format_and_keeps_the_rest() {
    let path = Path::new("/home/u/client-file");
    for client in Client::ALL {
        let e = entry(client);
        let fresh = render(client, path, None, &e).unwrap();
        insta::assert_snapshot!(format!("{}-no-file", client.name()), fresh);
        let mine = theirs(client);
        let next = render(client, path, Some(mine), &e).unwrap();
        insta::assert_snapshot!(
            format!("{}-with-other-servers", client.name()),
            diff(path, mine, &next)
        );
        // What was there stays: every line of theirs is still in the file (a comma may come
        // after the last entry, now that it is not last).
        let next_plain = next.replace(',', "");
        for line in mine.lines().filter(|l| !l.trim().is_empty()) {
            let kept = line.replace(',', "");
            assert!(
                next_plain.contains(kept.trim()),
                "{}: lost {line:?}\n{next}",
                client.name()
            );
        }
        assert_eq!(
            current_entry(client, path, &next).unwrap(),
            Some(entry_value(client, &e)),
            "{}",
            client.name()
        );
        // Rendering again changes nothing; a new profile replaces the entry in place.
        assert_eq!(render(client, path, Some(&next), &e).unwrap(), next);
        let other = Entry::for_client(Path::new("/home/u/.cargo/bin/mcp-broker"), client, None);
        let replaced = render(client, path, Some(&next), &other).unwrap();
        assert_eq!(
            current_entry(client, path, &replaced).unwrap(),
            Some(entry_value(client, &other))
        );
        let entries = replaced.matches("\"mcp-broker\":").count()
            + replaced.matches("[mcp_servers.mcp-broker]").count();
        assert_eq!(entries, 1, "one entry, replaced in place: {replaced}");
    }
}

#[test]
fn a_broken_file_is_left_alone_and_said_where_it_breaks() {
    let path = Path::new("/home/u/client-file");
    for client in Client::ALL {
        let err = render(client, path, Some(broken(client)), &entry(client)).unwrap_err();
        match &err {
            ClientsError::Broken { line, .. } => assert!(*line >= 1),
            other @ ClientsError::Shape { .. }
            | other @ ClientsError::Io { .. }
            | other @ ClientsError::NoBackup { .. }
            | other @ ClientsError::Changed { .. } => panic!("{}: {other}", client.name()),
        }
        insta::assert_snapshot!(format!("{}-broken", client.name()), err.to_string());
    }
}

#[test]
fn a_backup_round_trip_gives_the_file_back_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("backups");
    for client in Client::ALL {
        let file = dir.path().join(format!("{}.conf", client.name()));
        let backups = Backups::new(&root, client, &file);
        // A file that was there.
        std::fs::write(&file, theirs(client)).unwrap();
        let before = std::fs::read(&file).unwrap();
        let next = render(client, &file, Some(theirs(client)), &entry(client)).unwrap();
        backups
            .take(
                &file,
                Some(&before),
                &mcpb_clients::sha256(next.as_bytes()),
                1000,
            )
            .unwrap();
        mcpb_clients::write_keeping_mode(&file, next.as_bytes()).unwrap();
        backups.restore(None, client.name(), false).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), before, "{}", client.name());
        // A file that was not: the rollback removes it.
        std::fs::remove_file(&file).unwrap();
        backups
            .take(&file, None, &mcpb_clients::sha256(b"{}"), 1001)
            .unwrap();
        mcpb_clients::write_keeping_mode(&file, b"{}").unwrap();
        backups.restore(None, client.name(), false).unwrap();
        assert!(!file.exists());
    }
}

#[test]
fn a_rollback_never_loses_what_came_after_the_broker_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("claude.json");
    let backups = Backups::new(&dir.path().join("backups"), Client::ClaudeCode, &file);
    std::fs::write(&file, "{}\n").unwrap();
    let ours = "{\"mcpServers\": {}}\n";
    backups
        .take(
            &file,
            Some(b"{}\n"),
            &mcpb_clients::sha256(ours.as_bytes()),
            1,
        )
        .unwrap();
    // The client rewrote the file after the broker did.
    std::fs::write(&file, "{\"mcpServers\": {}, \"projects\": 1}\n").unwrap();
    let refused = backups.restore(None, "claude-code", false).unwrap_err();
    assert!(matches!(refused, ClientsError::Changed { .. }), "{refused}");
    assert!(std::fs::read_to_string(&file).unwrap().contains("projects"));
    // Asked to on purpose, it does; and a backup is used once.
    backups.restore(None, "claude-code", true).unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{}\n");
    assert!(matches!(
        backups.restore(None, "claude-code", false),
        Err(ClientsError::NoBackup { .. })
    ));
    // Another file of the same client has backups of its own.
    let other = dir.path().join("project.mcp.json");
    assert!(
        Backups::new(&dir.path().join("backups"), Client::ClaudeCode, &other)
            .list()
            .is_empty()
    );
}

#[test]
fn the_newest_ten_backups_are_kept_in_order_within_one_second() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cursor.conf");
    let backups = Backups::new(&dir.path().join("backups"), Client::Cursor, &file);
    for _ in 0..15 {
        backups.take(&file, Some(b"x"), "sha256:x", 2000).unwrap();
    }
    let kept = backups.list();
    assert_eq!(kept.len(), 10);
    assert_eq!(kept[0].name, "000000002000-0005");
    assert_eq!(kept[9].name, "000000002000-0014");
    assert!(matches!(
        backups.restore(Some("nope"), "cursor", false),
        Err(ClientsError::NoBackup { .. })
    ));
}

#[test]
fn an_entry_keeps_the_users_own_keys_and_a_servers_value_that_is_no_object_is_refused() {
    let path = Path::new("/home/u/client-file");
    let mine = "{\"mcpServers\": {\"mcp-broker\": {\"command\": \"old\", \"env\": {\"MCP_BROKER_HOME\": \"/x\"}, \"disabled\": false}}}\n";
    let next = render(Client::Cursor, path, Some(mine), &entry(Client::Cursor)).unwrap();
    assert!(
        next.contains("\"MCP_BROKER_HOME\": \"/x\"") && next.contains("\"disabled\": false"),
        "{next}"
    );
    let held = current_entry(Client::Cursor, path, &next).unwrap().unwrap();
    assert!(mcpb_clients::runs(
        Client::Cursor,
        &held,
        &entry(Client::Cursor)
    ));
    let codex =
        "[mcp_servers.mcp-broker]\ncommand = \"old\"\nstartup_timeout_sec = 30 # slow disk\n";
    let next = render(Client::Codex, path, Some(codex), &entry(Client::Codex)).unwrap();
    assert!(
        next.contains("startup_timeout_sec = 30 # slow disk"),
        "{next}"
    );
    for odd in [
        "{\"mcpServers\": []}",
        "{\"mcpServers\": \"x\"}",
        "{\"mcpServers\": null}",
    ] {
        let err = render(Client::Cursor, path, Some(odd), &entry(Client::Cursor)).unwrap_err();
        assert!(matches!(err, ClientsError::Shape { .. }), "{odd}: {err}");
    }
}

#[test]
fn gemini_allowed_servers_list_gets_the_broker() {
    let path = Path::new("/home/u/.gemini/settings.json");
    let mine = "{\n  \"mcp\": {\"allowed\": [\"git\"]},\n  \"mcpServers\": {\"git\": {\"command\": \"uvx\"}}\n}\n";
    let e = entry(Client::Gemini);
    let next = render(Client::Gemini, path, Some(mine), &e).unwrap();
    let v: serde_json::Value = serde_json::from_str(&next).unwrap();
    assert_eq!(
        v["mcp"]["allowed"],
        serde_json::json!(["git", "mcp-broker"])
    );
    // Once is enough: rendering again changes nothing.
    assert_eq!(render(Client::Gemini, path, Some(&next), &e).unwrap(), next);
    // Without such a list nothing is added, and other clients never get one.
    let plain = render(Client::Gemini, path, None, &e).unwrap();
    assert!(!plain.contains("allowed"), "{plain}");
    let cursor = render(Client::Cursor, path, Some(mine), &entry(Client::Cursor)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&cursor).unwrap();
    assert_eq!(v["mcp"]["allowed"], serde_json::json!(["git"]));
}

#[test]
fn agy_keeps_its_servers_in_its_own_file() {
    let home = Path::new("/home/u");
    let file = Client::Agy.config_path(mcpb_clients::Scope::User, home, Path::new("/w"));
    assert_eq!(file, home.join(".gemini/config/mcp_config.json"));
    assert!(!Client::Agy.has_project_scope());
    assert_eq!(Client::parse("agy"), Some(Client::Agy));
}
