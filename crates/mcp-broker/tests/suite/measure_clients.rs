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
