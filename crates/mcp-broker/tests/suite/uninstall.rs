//! `uninstall --apply --purge` as a user with a client moved and the service installed: the
//! client's file back byte for byte, the service stopped before its unit goes, the daemon
//! stopped, the broker's files and the backups gone (a file of the user's stays); a runtime
//! dir that holds the home is never deleted.

use std::path::Path;
use std::process::Output;

use super::adoption::fake_systemctl;
use super::support::{Home, fixture};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn uninstall_with_purge_stops_the_service_first_and_leaves_no_trace_but_the_clients_files() {
    let home = Home::new();
    let user = home.root().join("user");
    let broker = home.root().join("broker");
    std::fs::create_dir_all(&user).unwrap();
    let path = fake_systemctl(&home.root().join("bus"), "ok");
    let run = |args: &[&str]| -> Output {
        home.cmd(args)
            .env("HOME", &user)
            .env("MCP_BROKER_HOME", &broker)
            .env("PATH", &path)
            .current_dir(&user)
            .output()
            .unwrap()
    };
    let ok = |args: &[&str]| -> String {
        let out = run(args);
        let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{args:?}: {said}");
        said
    };
    ok(&["config", "init"]);
    let file = user.join(".cursor/mcp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let theirs = format!(
        "{{\"mcpServers\": {{\"mine\": {{\"command\": \"{}\", \"args\": [\"--name\", \"mine\"]}}}}}}\n",
        fixture().display()
    );
    std::fs::write(&file, &theirs).unwrap();
    ok(&["service", "install", "--apply"]);
    ok(&["client", "import", "--client", "cursor"]);
    ok(&["client", "import", "--client", "cursor", "--apply"]);
    let unit = user.join(".config/systemd/user/mcp-broker.service");
    let backups = user.join(".local/state/mcp-broker/backups");
    assert!(unit.is_file() && backups.is_dir());

    let shown = ok(&["uninstall", "--purge"]);
    assert!(
        shown.contains(&format!("put back  {}", file.display()))
            && shown.contains(&format!(
                "stop      the service, then remove {}",
                unit.display()
            ))
            && shown.contains(&format!("remove    {}", broker.display()))
            && shown.contains("a dry run: nothing was changed"),
        "{shown}"
    );
    assert!(broker.join("broker.yaml").is_file());

    // A file of the user's in the runtime dir is not the broker's to delete.
    std::fs::write(broker.join("thesis.tex"), "mine").unwrap();
    let said = ok(&["uninstall", "--apply", "--purge"]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), theirs, "{said}");
    let calls = std::fs::read_to_string(home.root().join("bus/bin/calls")).unwrap();
    assert!(
        calls.ends_with("--user disable --now mcp-broker\n--user daemon-reload\n"),
        "{calls}"
    );
    assert!(!unit.exists() && !backups.exists(), "{said}");
    let left: Vec<_> = std::fs::read_dir(&broker)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["thesis.tex"], "{said}");
    assert!(!user.join(".local/state/mcp-broker").exists(), "{said}");
}

#[test]
fn purge_never_deletes_a_runtime_dir_that_holds_the_home() {
    let home = Home::new();
    let user = home.root().join("user");
    std::fs::create_dir_all(&user).unwrap();
    let out = home
        .cmd(&["config", "init"])
        .env("HOME", &user)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = home
        .cmd(&["uninstall", "--apply", "--purge"])
        .env("HOME", &user)
        .output()
        .unwrap();
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("was kept: it is not a runtime dir the broker may delete"),
        "{said}"
    );
    assert!(Path::new(home.root()).join("broker.yaml").is_file());
}
