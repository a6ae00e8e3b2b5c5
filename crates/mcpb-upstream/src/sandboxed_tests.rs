//! What a sandboxed server is granted, from configs and homes made in a temporary folder.

use super::*;

/// The upstream `u` of a config text.
fn upstream_u(text: &str) -> UpstreamSettings {
    mcpb_config::load_str(
        text,
        "t",
        mcpb_config::ConfigSource::Embedded,
        &mcpb_config::ResolveContext::default(),
    )
    .unwrap()
    .upstreams["u"]
        .clone()
}

#[test]
fn a_server_is_granted_its_cwd_its_argument_paths_and_its_tools() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let data = dir.path().join("data");
    let tools = home.join(".nvm/versions/node/v22/bin");
    for d in [&data, &tools, &home.join(".npm"), &home.join(".ssh")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(tools.join("npx"), "").unwrap();
    let text = format!(
        "schema_version: 1\nupstreams:\n  u: {{command: npx, args: [-y, server, \"--root={}\", /nowhere]}}\n",
        data.display()
    );
    let settings = upstream_u(&text);
    let env = BTreeMap::from([
        ("HOME".to_string(), home.display().to_string()),
        ("PATH".to_string(), format!("{}:/usr/bin", tools.display())),
    ]);
    let rt = dir.path().join("rt");
    let (read, write) = grants(&settings, &SandboxPolicy::default(), &env, &rt);
    let canon = std::fs::canonicalize(&data).unwrap();
    let mut want = vec![canon.clone(), home.join(".npm")];
    want.sort();
    assert_eq!(write, want);
    assert_eq!(read, [home.join(".nvm/versions/node/v22")]);
    // Listed as read: never writable.
    let policy = SandboxPolicy {
        read: vec![canon.clone()],
        ..SandboxPolicy::default()
    };
    let (read, write) = grants(&settings, &policy, &env, &rt);
    assert!(read.contains(&canon) && !write.contains(&canon));
    assert!(!read.iter().chain(&write).any(|p| p.ends_with(".ssh")));
}

#[test]
fn a_program_a_shell_script_runs_or_a_script_given_by_path_is_granted_read_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let srv = home.join("srv/bin");
    let app = home.join("app");
    std::fs::create_dir_all(&srv).unwrap();
    std::fs::create_dir_all(app.join("node_modules")).unwrap();
    let server = srv.join("server");
    std::fs::write(&server, "").unwrap();
    std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(app.join("index.js"), "").unwrap();
    let notes = home.join("notes.txt");
    std::fs::write(&notes, "").unwrap();
    let settings = |command: &str, args: &str| {
        let text =
            format!("schema_version: 1\nupstreams:\n  u: {{command: {command}, args: {args}}}\n");
        upstream_u(&text)
    };
    let env = BTreeMap::from([
        ("HOME".to_string(), home.display().to_string()),
        ("PATH".to_string(), "/usr/bin:/bin".to_string()),
    ]);
    let rt = dir.path().join("rt");
    let script = format!(
        "[-c, \"cat {} > /dev/null; exec {} --flag\"]",
        notes.display(),
        server.display()
    );
    let (read, write) = grants(
        &settings("sh", &script),
        &SandboxPolicy::default(),
        &env,
        &rt,
    );
    assert_eq!(read, [srv]);
    assert!(
        write.is_empty(),
        "a path a script mentions is no grant: {write:?}"
    );
    let args = format!("[\"{}\"]", app.join("index.js").display());
    let (read, _) = grants(
        &settings("node", &args),
        &SandboxPolicy::default(),
        &env,
        &rt,
    );
    assert_eq!(read, [app]);
}

#[test]
fn a_script_is_not_a_path_a_tilde_is_the_home_and_installed_tools_stay_read_only() {
    let home = Path::new("/home/me");
    let got = named_paths(
        [
            "/home/me/.local/bin/mcp-foo --stdio",
            "--x=/a b",
            "~/notes",
            "/data",
        ]
        .into_iter(),
        None,
        Some(home),
    );
    assert_eq!(got, [home.join("notes"), PathBuf::from("/data")]);
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    for d in [".cache/uv", ".local/share/uv/tools"] {
        std::fs::create_dir_all(home.join(d)).unwrap();
    }
    let text = "schema_version: 1\nupstreams:\n  u: {command: uvx, args: [mcp-server-time]}\n";
    let settings = upstream_u(text);
    let env = BTreeMap::from([
        ("HOME".to_string(), home.display().to_string()),
        ("PATH".to_string(), "/usr/bin".to_string()),
    ]);
    let (read, write) = grants(
        &settings,
        &SandboxPolicy::default(),
        &env,
        &dir.path().join("rt"),
    );
    assert_eq!(write, [home.join(".cache/uv")]);
    assert_eq!(read, [home.join(".local/share/uv")]);
}

#[test]
fn shared_folders_private_ones_inside_a_grant_and_run_code_are_never_writable() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let srv = dir.path().join("srv");
    for d in [".local/share/uv", ".cargo", ".cache", "work"] {
        std::fs::create_dir_all(home.join(d)).unwrap();
    }
    std::fs::create_dir_all(&srv).unwrap();
    std::fs::write(srv.join("index.js"), "").unwrap();
    let text = format!(
        "schema_version: 1\nupstreams:\n  u: {{command: uvx, args: [\"{srv}/index.js\", --dir=~/.cargo, --out=~/work], env: {{DB_PATH: ~/.local/share/mem.db, XDG_CACHE_HOME: ~/.cache, UV_CACHE_DIR: ~/.local/share/uv}}}}\n",
        srv = srv.display()
    );
    let settings = upstream_u(&text);
    let env = BTreeMap::from([
        ("HOME".to_string(), home.display().to_string()),
        ("PATH".to_string(), "/usr/bin".to_string()),
        (
            "DB_PATH".to_string(),
            format!("{}/.local/share/mem.db", home.display()),
        ),
        (
            "XDG_CACHE_HOME".to_string(),
            format!("{}/.cache", home.display()),
        ),
        (
            "UV_CACHE_DIR".to_string(),
            format!("{}/.local/share/uv", home.display()),
        ),
    ]);
    let (read, write) = grants(
        &settings,
        &SandboxPolicy::default(),
        &env,
        &dir.path().join("rt"),
    );
    // Only what it names that is its own: ~/work.
    assert_eq!(write, [home.join("work")], "{read:?}");
    // The script it runs is read (here with its folder: it lies where the sandbox hides).
    assert!(read.contains(&srv), "{read:?}");
    assert!(read.contains(&home.join(".local/share/uv")), "{read:?}");
    // Its config cannot move the home the sandbox hides.
    let text = "schema_version: 1\nupstreams:\n  u: {command: uvx, env: {HOME: /srv}}\n";
    let prepared = Prepared {
        runtime_root: dir.path().join("rt"),
        read: Vec::new(),
        write: Vec::new(),
        trace: false,
    };
    let err = command(
        &upstream_u(text),
        &SandboxPolicy::default(),
        &env,
        &prepared,
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("sets HOME"), "{err}");
}

#[test]
fn a_data_file_stays_writable_once_it_exists_and_the_mode_bit_alone_is_no_program() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let mcp = home.join("mcp");
    std::fs::create_dir_all(&mcp).unwrap();
    let memory = mcp.join("memory.json");
    std::fs::write(&memory, "{}").unwrap();
    // Every file of some file systems has the bit; a data file does not start like code.
    std::fs::set_permissions(&memory, std::fs::Permissions::from_mode(0o755)).unwrap();
    let text = "schema_version: 1\nupstreams:\n  u: {command: npx, args: [-y, server-memory], env: {MEMORY_FILE_PATH: ~/mcp/memory.json}}\n";
    let env = BTreeMap::from([
        ("HOME".to_string(), home.display().to_string()),
        ("PATH".to_string(), "/usr/bin".to_string()),
        ("MEMORY_FILE_PATH".to_string(), memory.display().to_string()),
    ]);
    let (_, write) = grants(
        &upstream_u(text),
        &SandboxPolicy::default(),
        &env,
        &dir.path().join("rt"),
    );
    // Its folder: the server saves through a temp file renamed over it.
    assert_eq!(write, std::slice::from_ref(&mcp));
    assert!(!is_code(&memory));
    std::fs::write(&memory, "#!/bin/sh\n").unwrap();
    assert!(is_code(&memory));
}

#[test]
fn a_data_file_gets_its_folder_and_one_kept_where_no_grant_may_go_is_a_blind_spot() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let data = home.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let env_with = |file: &Path| {
        BTreeMap::from([
            ("HOME".to_string(), home.display().to_string()),
            ("PATH".to_string(), "/usr/bin".to_string()),
            ("MEMORY_FILE_PATH".to_string(), file.display().to_string()),
        ])
    };
    let text = "schema_version: 1\nupstreams:\n  u: {command: npx, args: [-y, server-memory], env: {MEMORY_FILE_PATH: x}}\n";
    let u = upstream_u(text);
    let rt = dir.path().join("rt");
    // Absent, in a folder not made yet: the folder above it.
    let absent = data.join("memory/graph.jsonl");
    let (_, write) = grants(&u, &SandboxPolicy::default(), &env_with(&absent), &rt);
    assert_eq!(write, std::slice::from_ref(&data));
    assert_eq!(blind_spot(&u, &env_with(&absent), &rt), None);
    // Directly in the home: nothing may be granted but the file, and the import is told.
    let in_home = home.join("memory.jsonl");
    let said = blind_spot(&u, &env_with(&in_home), &rt).unwrap();
    assert!(said.contains("memory.jsonl"), "{said}");
    std::fs::write(&in_home, "").unwrap();
    let (_, write) = grants(&u, &SandboxPolicy::default(), &env_with(&in_home), &rt);
    assert_eq!(write, std::slice::from_ref(&in_home));
    let said = blind_spot(&u, &env_with(&in_home), &rt).unwrap();
    assert!(said.contains("not replace it"), "{said}");
    // A server that runs in the home itself.
    let text = format!(
        "schema_version: 1\nupstreams:\n  u: {{command: npx, args: [x], cwd: {}}}\n",
        home.display()
    );
    let said = blind_spot(&upstream_u(&text), &env_with(&absent), &rt).unwrap();
    assert!(said.contains("runs in"), "{said}");
}
