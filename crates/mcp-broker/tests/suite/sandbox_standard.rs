//! The standard sandbox, as import and `add` write it, lets real servers do their ordinary
//! work: each reference server the tests install makes a write or state-changing call through
//! the broker under `sandbox: standard` with no grant written by hand (the memory server with
//! its file absent, then present: it saves through a temp file renamed over it). A call the
//! sandbox refused comes back with a hint, and `sandbox check --call` names the refusal.

use std::io::{Read, Write};
use std::path::PathBuf;

use serde_json::json;

use super::support::{Home, Shim, deps, deps_path, text};

/// An HTTP server on loopback answering every request with one page, for the fetch server.
fn page_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let body = "<html><body><p>page from loopback</p></body></html>";
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

fn ok(r: &serde_json::Value) -> String {
    assert!(
        r["result"].is_object() && r["result"]["isError"] != true,
        "{r}"
    );
    text(r)
}

#[test]
fn reference_servers_do_their_work_under_the_standard_sandbox() {
    let deps = deps();
    let npm = deps.join("npm/node_modules/.bin");
    let venv = deps.join("venv/bin");
    let dir = tempfile::Builder::new()
        .prefix("mcpb-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let world = tempfile::Builder::new()
        .prefix("mcpb-w-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let h: PathBuf = world.path().join("home");
    for d in ["files", "mem-new", "mem-old", "repo"] {
        std::fs::create_dir_all(h.join(d)).unwrap();
    }
    std::fs::write(
        h.join("mem-old/memory.jsonl"),
        "{\"type\":\"entity\",\"name\":\"old\",\"entityType\":\"t\",\"observations\":[]}",
    )
    .unwrap();
    let repo = h.join("repo");
    let git = |args: &[&str]| {
        let st = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("HOME", &h)
            .status()
            .unwrap();
        assert!(st.success());
    };
    git(&["init", "-q"]);
    git(&["config", "user.name", "t"]);
    git(&["config", "user.email", "t@t"]);
    std::fs::write(repo.join("a.txt"), "a").unwrap();

    let up = |name: &str, rest: &str| format!("  {name}: {{{rest}, sandbox: standard}}\n");
    let yaml = [
        "schema_version: 1\nupstreams:\n".to_string(),
        up(
            "filesystem",
            &format!(
                "command: \"{}/mcp-server-filesystem\", args: [\"{}\"]",
                npm.display(),
                h.join("files").display()
            ),
        ),
        up(
            "memnew",
            &format!(
                "command: \"{}/mcp-server-memory\", env: {{MEMORY_FILE_PATH: \"{}\"}}",
                npm.display(),
                h.join("mem-new/memory.jsonl").display()
            ),
        ),
        up(
            "memold",
            &format!(
                "command: \"{}/mcp-server-memory\", env: {{MEMORY_FILE_PATH: \"{}\"}}",
                npm.display(),
                h.join("mem-old/memory.jsonl").display()
            ),
        ),
        up(
            "everything",
            &format!("command: \"{}/mcp-server-everything\"", npm.display()),
        ),
        up(
            "thinking",
            &format!(
                "command: \"{}/mcp-server-sequential-thinking\"",
                npm.display()
            ),
        ),
        up(
            "time",
            &format!(
                "command: \"{}/mcp-server-time\", args: [--local-timezone, UTC]",
                venv.display()
            ),
        ),
        up(
            "fetch",
            &format!(
                "command: \"{}/mcp-server-fetch\", args: [--ignore-robots-txt, --allow-private-ips]",
                venv.display()
            ),
        ),
        up(
            "git",
            &format!(
                "command: \"{}/mcp-server-git\", args: [--repository, \"{}\"]",
                venv.display(),
                repo.display()
            ),
        ),
        "profiles:\n  default: {allow_mutating_upstreams: true}\n".to_string(),
    ]
    .concat();
    let config = dir.path().join("test.yaml");
    std::fs::write(&config, yaml).unwrap();
    let home = Home {
        dir,
        config: Some(config),
    };
    let path = deps_path(&deps);
    let mut cmd = home.cmd(&["stdio"]);
    cmd.env("HOME", &h).env("PATH", &path);
    let mut s = Shim::spawn(cmd);
    s.initialize("2025-11-25");

    ok(&s.call(
        "filesystem.write_file",
        json!({"path": h.join("files/new.txt"), "content": "made inside"}),
    ));
    ok(&s.call(
        "filesystem.create_directory",
        json!({"path": h.join("files/sub")}),
    ));
    assert_eq!(
        std::fs::read_to_string(h.join("files/new.txt")).unwrap(),
        "made inside"
    );
    // The memory server saves through a temp file beside its file, renamed over it: its
    // folder is granted, absent file or present.
    for (up, file) in [("memnew", "mem-new"), ("memold", "mem-old")] {
        for n in 0..2 {
            ok(&s.call(
                &format!("{up}.create_entities"),
                json!({"entities": [{"name": format!("e{n}"), "entityType": "t", "observations": ["kept"]}]}),
            ));
        }
        let saved = std::fs::read_to_string(h.join(file).join("memory.jsonl")).unwrap();
        assert!(
            saved.contains("\"e0\"") && saved.contains("\"e1\""),
            "{up}: {saved}"
        );
    }
    let old = std::fs::read_to_string(h.join("mem-old/memory.jsonl")).unwrap();
    assert!(old.contains("\"old\""), "{old}");

    let gz = s.call(
        "everything.gzip-file-as-resource",
        json!({"name": "a.gz", "data": "data:text/plain;base64,aGVsbG8=", "outputType": "resourceLink"}),
    );
    ok(&gz);
    assert!(gz.to_string().contains("a.gz"), "{gz}");
    let thought = ok(&s.call(
        "thinking.sequentialthinking",
        json!({"thought": "one step", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": false}),
    ));
    assert!(thought.contains("thoughtHistoryLength"), "{thought}");
    let now = ok(&s.call("time.get_current_time", json!({"timezone": "UTC"})));
    assert!(now.contains("UTC"), "{now}");
    let port = page_server();
    let page = ok(&s.call(
        "fetch.fetch",
        json!({"url": format!("http://127.0.0.1:{port}/")}),
    ));
    assert!(page.contains("page from loopback"), "{page}");
    ok(&s.call(
        "git.git_add",
        json!({"repo_path": repo, "files": ["a.txt"]}),
    ));
    ok(&s.call(
        "git.git_commit",
        json!({"repo_path": repo, "message": "from the sandbox"}),
    ));
    let log = std::process::Command::new("git")
        .args(["log", "--oneline"])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&log.stdout).contains("from the sandbox"),
        "the commit is in the repository"
    );

    // Outside its grants, the filesystem server is refused, and the answer says where to look.
    let outside = world.path().join("elsewhere.txt");
    let r = s.call(
        "filesystem.write_file",
        json!({"path": outside, "content": "x"}),
    );
    assert!(!outside.exists(), "{r}");
    drop(s);
    let _ = home.run(&["stop"]);
}

/// A server writing where it has no grant: the call's answer names the sandbox and the check,
/// and the check traces the call and names the grant that would allow it.
#[test]
fn a_refused_write_says_it_was_the_sandbox_and_the_check_names_the_grant() {
    let deps = deps();
    let npm = deps.join("npm/node_modules/.bin");
    let dir = tempfile::Builder::new()
        .prefix("mcpb-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let world = tempfile::Builder::new()
        .prefix("mcpb-w-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let h = world.path().join("home");
    let data = world.path().join("data");
    std::fs::create_dir_all(&h).unwrap();
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("memory.jsonl"), "").unwrap();
    // The file is granted read-only by hand: its save must fail, and say why.
    let yaml = format!(
        "schema_version: 1\nupstreams:\n  memory: {{command: \"{npm}/mcp-server-memory\", env: {{MEMORY_FILE_PATH: \"{file}\"}}, sandbox: {{fs: {{read: [\"{data}\"]}}}}}}\nprofiles:\n  default: {{allow_mutating_upstreams: true}}\n",
        npm = npm.display(),
        file = data.join("memory.jsonl").display(),
        data = data.display(),
    );
    let config = dir.path().join("test.yaml");
    std::fs::write(&config, yaml).unwrap();
    let home = Home {
        dir,
        config: Some(config),
    };
    let path = deps_path(&deps);
    let mut cmd = home.cmd(&["stdio"]);
    cmd.env("HOME", &h).env("PATH", &path);
    let mut s = Shim::spawn(cmd);
    s.initialize("2025-11-25");
    let args = json!({"entities": [{"name": "x", "entityType": "t", "observations": []}]});
    let r = s.call("memory.create_entities", args.clone());
    let said = r.to_string();
    assert!(
        said.contains("sandbox check memory --call create_entities"),
        "{said}"
    );
    drop(s);
    let _ = home.run(&["stop"]);
    let out = home
        .cmd(&[
            "sandbox",
            "check",
            "memory",
            "--call",
            "create_entities",
            "--args",
            &args.to_string(),
        ])
        .env("HOME", &h)
        .env("PATH", &path)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("call create_entities: answered with an error"),
        "{shown}"
    );
    let grant = format!("write: [{}]", data.display());
    assert!(
        shown
            .lines()
            .any(|l| l.contains("denied:") && l.contains(&grant)),
        "{shown}"
    );
}
