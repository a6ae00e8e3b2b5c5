//! The import's decisions, server by server, without a client or a daemon.
use super::*;
use mcpb_clients::{Client, Scope};

fn server(name: &str, args: &[&str], env: &[(&str, &str)]) -> Server {
    Server {
        name: name.into(),
        command: Some("npx".into()),
        args: args.iter().map(|a| a.to_string()).collect(),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Server::default()
    }
}

fn place(scope: Scope) -> Place {
    Place {
        client: Client::ClaudeCode,
        scope,
        path: "/h/.claude.json".into(),
        folder: None,
    }
}

fn text(t: &str, vars: &[&str]) -> Value<'static> {
    Value::Text {
        text: t.into(),
        vars: vars.iter().map(|v| v.to_string()).collect(),
    }
}

fn options<'a>(
    existing: &'a BTreeMap<String, UpstreamSettings>,
    rename: &'a BTreeMap<String, String>,
    keep: &'a [String],
    dir: &'a Path,
) -> Options<'a> {
    Options {
        keep,
        rename,
        existing,
        secrets_dir: dir,
        folder: Path::new("/w"),
        read_only: false,
        sandbox: false,
        shared: &[],
    }
}

fn settings(yaml: &str) -> BTreeMap<String, UpstreamSettings> {
    mcpb_config::load_str(
        yaml,
        "t",
        mcpb_config::ConfigSource::Embedded,
        &mcpb_config::ResolveContext::from_env(),
    )
    .unwrap()
    .upstreams
}

#[test]
fn names_and_values_are_made_safe_for_the_config() {
    assert_eq!(upstream_name("GitHub Server"), "github-server");
    assert_eq!(upstream_name("@scope/pkg"), "scope-pkg");
    assert_eq!(upstream_name("a__b"), "a_b");
    assert!(upstream_name(&"x".repeat(90)).len() <= 40);
    assert!(secret_looking("ghp_abcdefghijkl1234567890"));
    assert!(secret_looking("postgres://u:pw@db/x"));
    assert!(!secret_looking("debug"));
    assert!(!secret_looking("/home/u/projects/repo2026"));
    assert!(credential_key("DB_PASS") && credential_key("api-key") && !credential_key("LOG"));
    let f = Path::new("/w/app");
    assert_eq!(value("${GH}", f), text("${GH}", &["GH"]));
    assert_eq!(value("${env:GH}", f), text("${GH}", &["GH"]));
    assert_eq!(value("Bearer ${TOK}", f), text("Bearer ${TOK}", &["TOK"]));
    // Claude Code does not expand `$VAR`: it is text.
    assert_eq!(value("$ecret123", f), text("$ecret123", &[]));
    assert_eq!(value("${workspaceFolder}/db", f), text("/w/app/db", &[]));
    assert_eq!(value("${input:token}", f), Value::Foreign("${input:token}"));
}

#[test]
fn literal_secrets_go_to_files_duplicates_share_one_upstream_and_clashes_get_names() {
    let dir = tempfile::tempdir().unwrap();
    let existing =
        settings("schema_version: 1\nupstreams:\n  git: {command: uvx, args: [other]}\n");
    let rename = BTreeMap::from([("dup".to_string(), "git2".to_string())]);
    let keep = ["kept".to_string()];
    let o = options(&existing, &rename, &keep, dir.path());
    let found = vec![
        (
            place(Scope::User),
            server(
                "mem",
                &["-y", "server-memory"],
                &[("API_KEY", "sk-live-0123456789abcdef"), ("LOG", "info")],
            ),
            None,
        ),
        (
            place(Scope::User),
            server(
                "memory",
                &["-y", "server-memory"],
                &[("API_KEY", "sk-live-0123456789abcdef"), ("LOG", "info")],
            ),
            None,
        ),
        (place(Scope::Local), server("git", &["x"], &[]), None),
        (place(Scope::Local), server("dup", &["y"], &[]), None),
        (place(Scope::Project), server("kept", &["k"], &[]), None),
        (
            place(Scope::Project),
            server("mem", &["-y", "other"], &[("TOKEN", "${GH_TOKEN}")]),
            None,
        ),
        (
            place(Scope::Project),
            server("pending", &["p"], &[]),
            Some("not approved".to_string()),
        ),
    ];
    let p = plan(found, &o);
    let fates: Vec<&Fate> = p.found.iter().map(|f| &f.fate).collect();
    assert_eq!(fates[0], &Fate::Moved("mem".into()));
    assert_eq!(fates[1], &Fate::Same("mem".into()));
    assert_eq!(fates[2], &Fate::Moved("git-local".into()), "git is taken");
    assert_eq!(fates[3], &Fate::Moved("git2".into()), "--rename dup=git2");
    assert_eq!(fates[4], &Fate::Kept("--keep".into()));
    assert_eq!(fates[5], &Fate::Moved("mem-project".into()));
    assert_eq!(fates[6], &Fate::Off("not approved".into()));
    assert_eq!(
        p.upstreams[0].env,
        ["API_KEY=${file:mem-api_key}", "LOG=info"]
    );
    assert_eq!(p.secrets.len(), 1);
    assert_eq!(p.secrets[0].value, "sk-live-0123456789abcdef");
    assert_eq!(p.upstreams[3].env, ["TOKEN=${GH_TOKEN}"]);
    assert_eq!(p.variables, [("GH_TOKEN".into(), "mem-project".into())]);
    // A project's server runs in the project's folder.
    assert_eq!(p.upstreams[3].cwd.as_deref(), Some("/w"));
    let all = format!("{:?}", p.upstreams);
    assert!(!all.contains("sk-live"), "{all}");
}

#[test]
fn a_server_is_the_same_as_an_upstream_only_with_the_same_credentials() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("work-token"), "ghp_WORK0123456789abcd\n").unwrap();
    let existing = settings(
        "schema_version: 1\nupstreams:\n  gh: {command: npx, args: [gh], env: {GH_TOKEN: \"${file:work-token}\"}}\n",
    );
    let rename = BTreeMap::new();
    let o = options(&existing, &rename, &[], dir.path());
    let work = server("gh", &["gh"], &[("GH_TOKEN", "ghp_WORK0123456789abcd")]);
    let personal = server("gh", &["gh"], &[("GH_TOKEN", "ghp_PERSONAL0123456789")]);
    let p = plan(
        vec![
            (place(Scope::User), work, None),
            (place(Scope::Local), personal, None),
        ],
        &o,
    );
    assert_eq!(p.found[0].fate, Fate::Same("gh".into()));
    assert_eq!(p.found[1].fate, Fate::Moved("gh-local".into()));
    assert_eq!(p.upstreams[0].env, ["GH_TOKEN=${file:gh-local-gh_token}"]);
}

#[test]
fn what_the_config_cannot_hold_safely_stays_in_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let existing = BTreeMap::new();
    let rename = BTreeMap::new();
    let o = options(&existing, &rename, &[], dir.path());
    let mut remote = server("r", &[], &[]);
    remote.command = None;
    remote.url = Some("https://h.example/mcp?api_key=abcdef0123456789".into());
    let mut ws = remote.clone();
    ws.name = "ws".into();
    ws.url = Some("ws://h.example/mcp".into());
    let mut env_file = server("ef", &[], &[]);
    env_file.env_file = Some("/w/.env".into());
    let found = vec![
        (
            place(Scope::User),
            server("a", &["--api-key", "abc"], &[]),
            None,
        ),
        (place(Scope::User), server("b", &["--token=xyz"], &[]), None),
        (
            place(Scope::User),
            server("c", &[], &[("MY-VAR", "1")]),
            None,
        ),
        (place(Scope::User), remote, None),
        (place(Scope::User), ws, None),
        (place(Scope::User), env_file, None),
        (place(Scope::User), server("null", &["ok"], &[]), None),
    ];
    let p = plan(found, &o);
    for f in &p.found[..6] {
        assert!(
            matches!(f.fate, Fate::Kept(_)),
            "{}: {:?}",
            f.server.name,
            f.fate
        );
    }
    assert_eq!(p.found[6].fate, Fate::Moved("null".into()));
    let lines = crate::commands::upstream::entry(&p.upstreams[0]).unwrap();
    assert_eq!(lines[0], "\"null\":");
}

#[test]
fn the_same_command_in_two_folders_is_two_upstreams() {
    let dir = tempfile::tempdir().unwrap();
    let existing = BTreeMap::new();
    let rename = BTreeMap::new();
    let o = options(&existing, &rename, &[], dir.path());
    let in_folder = |f: &str| Place {
        folder: Some(f.into()),
        ..place(Scope::Local)
    };
    let files = || server("files", &["server-filesystem", "."], &[]);
    let p = plan(
        vec![
            (in_folder("/w/a"), files(), None),
            (in_folder("/w/b"), files(), None),
            (place(Scope::User), files(), None),
        ],
        &o,
    );
    assert_eq!(p.found[0].fate, Fate::Moved("files".into()));
    assert_eq!(p.found[1].fate, Fate::Moved("files-b".into()));
    assert_eq!(p.upstreams[1].cwd.as_deref(), Some("/w/b"));
    assert!(
        matches!(&p.found[2].fate, Fate::Kept(w) if w.contains("relative")),
        "a user server's `.` is whichever folder the client started in: {:?}",
        p.found[2].fate
    );
}

#[test]
fn a_projects_server_belongs_to_its_folder_and_a_shared_files_stay() {
    let dir = tempfile::tempdir().unwrap();
    let existing = BTreeMap::new();
    let rename = BTreeMap::new();
    let shared = [std::path::PathBuf::from("/w/team/.cursor/mcp.json")];
    let o = Options {
        shared: &shared,
        ..options(&existing, &rename, &[], dir.path())
    };
    let project = |f: &str, file: &str| Place {
        client: Client::Cursor,
        scope: Scope::Project,
        path: file.into(),
        folder: Some(f.into()),
    };
    let time = || server("time", &["mcp-server-time"], &[]);
    let p = plan(
        vec![
            (place(Scope::User), time(), None),
            (project("/w/app", "/w/app/.cursor/mcp.json"), time(), None),
            (project("/w/team", "/w/team/.cursor/mcp.json"), time(), None),
        ],
        &o,
    );
    // The user's is everyone's; the project's shows in its folder only: two upstreams.
    assert_eq!(p.found[0].fate, Fate::Moved("time".into()));
    assert_eq!(p.upstreams[0].project, None);
    assert_eq!(p.found[1].fate, Fate::Moved("time-app".into()));
    assert_eq!(p.upstreams[1].project.as_deref(), Some("/w/app"));
    assert!(
        matches!(&p.found[2].fate, Fate::Kept(w) if w.contains("shared through git") && w.contains("--edit-project-files")),
        "{:?}",
        p.found[2].fate
    );
}

#[test]
fn a_header_or_url_argument_with_a_credential_is_a_secret() {
    assert!(arg_secret("Authorization:Bearer tok_0123456789abcdefghij"));
    assert!(arg_secret("X-API-Key: abc123"));
    assert!(arg_secret(
        "https://host.example/mcp?apiKey=QUERYSECRET0123456789"
    ));
    assert!(!arg_secret("https://host.example/mcp"));
    assert!(!arg_secret("--name"));
}
