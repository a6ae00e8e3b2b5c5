//! The real clients, moved onto the broker as a user would (no model or API key is needed):
//! Claude Code, Gemini CLI and Codex CLI, installed by the test command, each given servers
//! with its own `mcp add` in each of its scopes (one with a literal API key that the server
//! cannot start without), then `client import` and `--apply`; then the client's own `mcp list`,
//! a listing through the exact command the client's file now holds started without the key's
//! variable, and a rollback byte for byte. On a fresh HOME, with and without `config init`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use super::support::{Home, Shim, deps, deps_path, fixture};

const KEY: &str = "sk-live-0123456789abcdefXYZ";

/// A fresh user: HOME, a project folder in it, and a broker home apart from both.
struct User {
    broker: Home,
    home: PathBuf,
    proj: PathBuf,
    path: String,
    clients: PathBuf,
}

impl User {
    fn new(config_init: bool) -> Self {
        let broker = Home::new();
        let home = broker.root().join("u");
        let proj = home.join("proj");
        std::fs::create_dir_all(&proj).unwrap();
        let deps = deps();
        let user = User {
            path: deps_path(&deps),
            clients: deps.join("clients/node_modules/.bin"),
            broker,
            home,
            proj,
        };
        if config_init {
            let out = user.broker_cmd(&["config", "init"]);
            assert!(out.status.success(), "{}", text(&out.stderr));
        }
        user
    }

    /// A client's own command, with the environment a user's shell gives it: no broker
    /// variables (the entry must carry them).
    fn client(&self, bin: &str, args: &[&str]) -> Output {
        let out = Command::new(self.clients.join(bin))
            .args(args)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", &self.path)
            .env("NO_COLOR", "1")
            .env("CI", "1")
            .current_dir(&self.proj)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{bin} {args:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        out
    }

    fn broker_cmd(&self, args: &[&str]) -> Output {
        self.broker
            .cmd(args)
            .env("HOME", &self.home)
            .env("PATH", &self.path)
            .current_dir(&self.proj)
            .output()
            .unwrap()
    }

    /// The approval of the project's `team` server that Claude Code's dialog records.
    fn approve_team(&self) {
        let file = self.home.join(".claude.json");
        let mut claude: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let folder = self.proj.display().to_string();
        claude["projects"][&folder]["enabledMcpjsonServers"] = json!(["team"]);
        claude["projects"][&folder]["hasTrustDialogAccepted"] = json!(true);
        std::fs::write(&file, serde_json::to_string_pretty(&claude).unwrap()).unwrap();
    }

    fn memory(&self) -> String {
        deps()
            .join("npm/node_modules/.bin/mcp-server-memory")
            .display()
            .to_string()
    }

    fn fixture(&self) -> String {
        fixture().display().to_string()
    }

    fn import(&self, client: &str) {
        let dry = self.broker_cmd(&["client", "import", "--client", client]);
        let shown = text(&dry.stdout);
        assert!(dry.status.success(), "{shown}{}", text(&dry.stderr));
        assert!(!shown.contains(KEY), "the dry run shows the key: {shown}");
        assert!(shown.contains("${file:"), "{shown}");
        let applied = self.broker_cmd(&["client", "import", "--client", client, "--apply"]);
        let said = format!("{}{}", text(&applied.stdout), text(&applied.stderr));
        assert!(applied.status.success(), "{said}");
        assert!(said.contains("starts only the broker now"), "{said}");
        assert!(
            said.contains("reaches exactly the tools its servers had"),
            "{said}"
        );
        let config = std::fs::read_to_string(self.broker.root().join("broker.yaml")).unwrap();
        assert!(!config.contains(KEY), "a secret was copied: {config}");
    }

    /// What the client's file now starts, started as the client would, without the key's
    /// variable in its environment: its tool names.
    fn listed_through_entry(
        &self,
        client: mcpb_clients::Client,
        file: &Path,
        parity: &Value,
    ) -> Vec<String> {
        self.listed_through_entry_in(client, file, parity, &self.proj)
    }

    /// The same, with the client started in `cwd`.
    fn listed_through_entry_in(
        &self,
        client: mcpb_clients::Client,
        file: &Path,
        parity: &Value,
        cwd: &Path,
    ) -> Vec<String> {
        let text = std::fs::read_to_string(file).unwrap();
        let entry = mcpb_clients::current_entry(client, file, &text)
            .unwrap()
            .expect("the broker's entry");
        let mut cmd = Command::new(entry["command"].as_str().unwrap());
        for a in entry["args"].as_array().unwrap() {
            cmd.arg(a.as_str().unwrap());
        }
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("PATH", &self.path)
            .current_dir(cwd);
        for (k, v) in entry["env"].as_object().into_iter().flatten() {
            cmd.env(k, v.as_str().unwrap());
        }
        let mut shim = Shim::spawn(cmd);
        shim.initialize("2025-06-18");
        let mut names = shim.tool_names();
        // A budgeted profile over its budget lists the facade: the servers' tools are reached
        // through its describe tool, under the names the entry's profile gives them.
        let Some(describe) = names.iter().find(|n| n.ends_with("describe_tool")).cloned() else {
            return names;
        };
        for s in parity["servers"].as_array().unwrap() {
            let up = s["upstream"].as_str().unwrap();
            for t in s["before"].as_array().into_iter().flatten() {
                let t = t.as_str().unwrap();
                for sep in [".", "__", "_"] {
                    let name = format!("{up}{sep}{t}");
                    let r = shim.call(&describe, json!({"name": name}));
                    let said = r["result"]["content"][0]["text"].as_str().unwrap_or("");
                    let found: Value = serde_json::from_str(said).unwrap_or_default();
                    if found["tools"][0]["name"] == name.as_str() {
                        names.push(name);
                        break;
                    }
                }
            }
        }
        names
    }

    fn parity(&self, client: &str) -> Value {
        let out = self.broker_cmd(&["client", "parity", "--client", client, "--json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Rolls `file` back: byte for byte when the client left it alone since the import; when
    /// it rewrote the file itself (Claude Code keeps its own state in `~/.claude.json`), only
    /// the broker's change is taken out: every server is back where it was.
    fn rollback(
        &self,
        client: &str,
        project: bool,
        file: &Path,
        before: &[u8],
        written: &[u8],
    ) -> String {
        let mut args = vec!["client", "rollback", "--client", client];
        if project {
            args.push("--project");
        }
        let touched = std::fs::read(file).unwrap() != written;
        let out = self.broker_cmd(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let now = std::fs::read(file).unwrap();
        if !touched {
            assert_eq!(now, before, "{}", file.display());
            return text(&out.stderr);
        }
        let c = mcpb_clients::Client::parse(client).unwrap();
        let servers = |bytes: &[u8]| -> Vec<String> {
            let t = String::from_utf8_lossy(bytes).into_owned();
            c.places(
                &self.home,
                &self.proj,
                Some(&self.proj.display().to_string()),
            )
            .iter()
            .filter(|p| p.path == file)
            .flat_map(|p| mcpb_clients::servers(p, &t).unwrap())
            .map(|s| format!("{s:?}"))
            .collect()
        };
        assert_eq!(servers(&now), servers(before), "{}", file.display());
        let entry = mcpb_clients::current_entry(c, file, &String::from_utf8_lossy(&now)).unwrap();
        assert!(entry.is_none(), "the broker's entry is gone: {entry:?}");
        text(&out.stderr)
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Every tool the old servers had, by server, is in what the entry lists now (whatever the
/// naming), and nothing is missing.
fn same_tools(parity: &Value, listed: &[String]) {
    assert_eq!(parity["missing"], 0, "{parity}");
    // And they work: a read-only call answers through the broker as it did directly.
    assert_eq!(parity["calls_differ"], 0, "{parity}");
    let tried: Vec<&Value> = parity["servers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s.get("call").filter(|c| !c.is_null()))
        .collect();
    assert!(
        !tried.is_empty()
            && tried
                .iter()
                .all(|c| c["direct"] == "ok" && c["broker"] == "ok"),
        "{parity}"
    );
    for s in parity["servers"].as_array().unwrap() {
        let up = s["upstream"].as_str().unwrap();
        let before = s["before"].as_array().expect("listed before");
        assert!(!before.is_empty(), "{s}");
        for t in before {
            let t = t.as_str().unwrap();
            assert!(
                listed
                    .iter()
                    .any(|n| [".", "__", "_"].iter().any(|s| n == &format!("{up}{s}{t}"))),
                "{up}'s {t} is not listed through the entry: {listed:?}"
            );
        }
    }
}

fn claude_code(config_init: bool) {
    let u = User::new(config_init);
    let fx = u.fixture();
    u.client(
        "claude",
        &[
            "mcp",
            "add",
            "notes",
            "-e",
            &format!("NOTES_API_KEY={KEY}"),
            "--",
            &fx,
            "--require-env",
            "NOTES_API_KEY",
        ],
    );
    u.client(
        "claude",
        &["mcp", "add", "-s", "user", "memory", "--", &u.memory()],
    );
    u.client(
        "claude",
        &[
            "mcp", "add", "-s", "project", "team", "--", &fx, "--name", "team",
        ],
    );
    let user_file = u.home.join(".claude.json");
    let project_file = u.proj.join(".mcp.json");
    // A project's servers wait for the user's approval in Claude Code; until then the
    // import leaves them where they are.
    let pending = u.broker_cmd(&["client", "import", "--client", "claude-code"]);
    let table = text(&pending.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.contains("team") && l.contains("stays, not started:")),
        "{table}"
    );
    u.approve_team();
    let user_before = std::fs::read(&user_file).unwrap();
    let project_before = std::fs::read(&project_file).unwrap();

    u.import("claude-code");
    let (user_written, project_written) = (
        std::fs::read(&user_file).unwrap(),
        std::fs::read(&project_file).unwrap(),
    );
    let listed = u.client("claude", &["mcp", "list"]);
    let listed = text(&listed.stdout);
    assert!(
        listed.contains("mcp-broker:") && listed.contains("Connected"),
        "{listed}"
    );
    for old in ["notes:", "memory:", "team:"] {
        assert!(
            !listed.contains(old),
            "{old} still started by Claude Code: {listed}"
        );
    }
    let parity = u.parity("claude-code");
    let names = u.listed_through_entry(mcpb_clients::Client::ClaudeCode, &user_file, &parity);
    same_tools(&parity, &names);

    u.rollback(
        "claude-code",
        false,
        &user_file,
        &user_before,
        &user_written,
    );
    u.rollback(
        "claude-code",
        true,
        &project_file,
        &project_before,
        &project_written,
    );
}

fn gemini(config_init: bool) {
    let u = User::new(config_init);
    let fx = u.fixture();
    // Gemini CLI starts no server in a folder it does not trust.
    std::fs::create_dir_all(u.home.join(".gemini")).unwrap();
    std::fs::write(
        u.home.join(".gemini/trustedFolders.json"),
        json!({u.proj.display().to_string(): "TRUST_FOLDER"}).to_string(),
    )
    .unwrap();
    u.client(
        "gemini",
        &[
            "mcp",
            "add",
            "-e",
            &format!("NOTES_API_KEY={KEY}"),
            "notes",
            &fx,
            "--require-env",
            "NOTES_API_KEY",
        ],
    );
    u.client(
        "gemini",
        &["mcp", "add", "-s", "user", "memory", &u.memory()],
    );
    u.client("gemini", &["mcp", "add", "-s", "user", "blocked", &fx]);
    let user_file = u.home.join(".gemini/settings.json");
    let project_file = u.proj.join(".gemini/settings.json");
    // What the user set by hand: a server Gemini CLI must not start, and a tool it hides.
    let edit = |file: &Path, f: &dyn Fn(&mut Value)| {
        let mut v: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        f(&mut v);
        std::fs::write(file, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    };
    edit(&user_file, &|v| v["mcp"] = json!({"excluded": ["blocked"]}));
    edit(&project_file, &|v| {
        v["mcpServers"]["notes"]["excludeTools"] = json!(["crash"])
    });
    let user_before = std::fs::read(&user_file).unwrap();
    let project_before = std::fs::read(&project_file).unwrap();

    u.import("gemini");
    let (user_written, project_written) = (
        std::fs::read(&user_file).unwrap(),
        std::fs::read(&project_file).unwrap(),
    );
    let listed = u.client("gemini", &["mcp", "list"]);
    let listed = format!("{}{}", text(&listed.stdout), text(&listed.stderr));
    assert!(
        listed.contains("mcp-broker") && listed.contains("Connected"),
        "{listed}"
    );
    for old in ["notes:", "memory:"] {
        assert!(
            !listed.contains(old),
            "{old} still started by Gemini CLI: {listed}"
        );
    }
    let parity = u.parity("gemini");
    let names = u.listed_through_entry(mcpb_clients::Client::Gemini, &user_file, &parity);
    assert!(
        !names
            .iter()
            .any(|n| n.contains("blocked") || n == "notes.crash"),
        "an excluded server or a hidden tool came through: {names:?}"
    );
    same_tools(&parity, &names);

    u.rollback("gemini", false, &user_file, &user_before, &user_written);
    u.rollback(
        "gemini",
        true,
        &project_file,
        &project_before,
        &project_written,
    );
}

fn codex(config_init: bool) {
    let u = User::new(config_init);
    let fx = u.fixture();
    u.client(
        "codex",
        &[
            "mcp",
            "add",
            "notes",
            "--env",
            &format!("NOTES_API_KEY={KEY}"),
            "--",
            &fx,
            "--require-env",
            "NOTES_API_KEY",
        ],
    );
    u.client("codex", &["mcp", "add", "memory", "--", &u.memory()]);
    let user_file = u.home.join(".codex/config.toml");
    let user_before = std::fs::read(&user_file).unwrap();

    u.import("codex");
    let user_written = std::fs::read(&user_file).unwrap();
    let listed = u.client("codex", &["mcp", "list"]);
    let listed = text(&listed.stdout);
    let rows: Vec<&str> = listed
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert!(
        rows.len() == 1 && rows[0].starts_with("mcp-broker") && rows[0].contains("enabled"),
        "{listed}"
    );
    let parity = u.parity("codex");
    let names = u.listed_through_entry(mcpb_clients::Client::Codex, &user_file, &parity);
    // Codex's model API takes only [a-zA-Z0-9_-] in tool names.
    assert!(
        names.iter().all(|n| n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')),
        "{names:?}"
    );
    same_tools(&parity, &names);

    let said = u.rollback("codex", false, &user_file, &user_before, &user_written);
    // The client has its servers back; the broker's config still has its copies, and says so.
    assert!(
        said.contains("still has the upstreams imported from this file: memory, notes")
            && said.contains("mcp-broker remove NAME"),
        "{said}"
    );
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
}

/// A project's `.mcp.json` that git tracks is the team's: the import leaves it byte for byte
/// and switches its servers off for this user in the folder's `.claude/settings.local.json`;
/// the broker shows them to sessions started in that folder only; a rollback switches them
/// back on.
#[test]
fn claude_code_keeps_a_shared_project_file_and_switches_its_servers_off_for_this_user() {
    let u = User::new(true);
    let fx = u.fixture();
    u.client(
        "claude",
        &[
            "mcp", "add", "-s", "project", "team", "--", &fx, "--name", "team",
        ],
    );
    git(&u.proj, &["init", "-q"]);
    git(&u.proj, &["add", ".mcp.json"]);
    git(&u.proj, &["commit", "-qm", "team servers"]);
    let user_file = u.home.join(".claude.json");
    let project_file = u.proj.join(".mcp.json");
    let folder = u.proj.display().to_string();
    u.approve_team();
    let user_before = std::fs::read(&user_file).unwrap();
    let project_before = std::fs::read(&project_file).unwrap();

    let dry = u.broker_cmd(&["client", "import", "--client", "claude-code"]);
    let shown = text(&dry.stdout);
    assert!(
        dry.status.success() && shown.contains("tracked by git, so left as the team has it"),
        "{shown}{}",
        text(&dry.stderr)
    );
    let applied = u.broker_cmd(&["client", "import", "--client", "claude-code", "--apply"]);
    let said = format!("{}{}", text(&applied.stdout), text(&applied.stderr));
    assert!(
        applied.status.success() && said.contains("reaches exactly the tools its servers had"),
        "{said}"
    );
    assert_eq!(std::fs::read(&project_file).unwrap(), project_before);
    let user_written = std::fs::read(&user_file).unwrap();
    // The switch goes where Claude Code keeps it: the folder's own settings, this user's.
    let local = u.proj.join(".claude/settings.local.json");
    let settings: Value = serde_json::from_slice(&std::fs::read(&local).unwrap()).unwrap();
    assert_eq!(
        settings["disabledMcpjsonServers"],
        json!(["team"]),
        "{settings}"
    );
    let listed = text(&u.client("claude", &["mcp", "list"]).stdout);
    assert!(
        listed.contains("mcp-broker:") && !listed.contains("team:"),
        "{listed}"
    );
    let config = std::fs::read_to_string(u.broker.root().join("broker.yaml")).unwrap();
    assert!(
        config.contains(&format!("project: \"{folder}\"")),
        "{config}"
    );

    let parity = u.parity("claude-code");
    let here = u.listed_through_entry(mcpb_clients::Client::ClaudeCode, &user_file, &parity);
    same_tools(&parity, &here);
    let elsewhere = u.listed_through_entry_in(
        mcpb_clients::Client::ClaudeCode,
        &user_file,
        &parity,
        &u.home,
    );
    assert!(
        !elsewhere.iter().any(|n| n.starts_with("team")),
        "a project's server shows in another folder: {elsewhere:?}"
    );

    u.rollback(
        "claude-code",
        false,
        &user_file,
        &user_before,
        &user_written,
    );
    let settings: Value = serde_json::from_slice(&std::fs::read(&local).unwrap()).unwrap();
    assert!(
        settings
            .get("disabledMcpjsonServers")
            .is_none_or(|d| d == &json!([])),
        "{settings}"
    );
    let listed = text(&u.client("claude", &["mcp", "list"]).stdout);
    assert!(listed.contains("team:"), "{listed}");
}

#[test]
fn claude_code_moves_every_scope_onto_the_broker_and_back() {
    claude_code(false);
    claude_code(true);
}

#[test]
fn gemini_cli_moves_its_user_and_project_servers_onto_the_broker_and_back() {
    gemini(false);
    gemini(true);
}

#[test]
fn codex_moves_onto_the_broker_with_names_its_model_accepts_and_back() {
    codex(false);
    codex(true);
}

/// `uninstall` puts both clients back (every scope), stops the daemon and keeps the config.
#[test]
fn uninstall_puts_claude_code_and_codex_back_and_keeps_the_config() {
    let u = User::new(true);
    let fx = u.fixture();
    u.client(
        "claude",
        &[
            "mcp", "add", "-s", "user", "one", "--", &fx, "--name", "one",
        ],
    );
    u.client(
        "claude",
        &[
            "mcp", "add", "-s", "project", "team", "--", &fx, "--name", "team",
        ],
    );
    u.approve_team();
    u.client("codex", &["mcp", "add", "two", "--", &fx, "--name", "two"]);
    let codex_file = u.home.join(".codex/config.toml");
    let project_file = u.proj.join(".mcp.json");
    let (codex_before, project_before) = (
        std::fs::read(&codex_file).unwrap(),
        std::fs::read(&project_file).unwrap(),
    );
    for client in ["claude-code", "codex"] {
        let dry = u.broker_cmd(&["client", "import", "--client", client]);
        assert!(dry.status.success(), "{}", text(&dry.stderr));
        let applied = u.broker_cmd(&["client", "import", "--client", client, "--apply"]);
        assert!(applied.status.success(), "{}", text(&applied.stderr));
    }
    assert!(text(&u.client("claude", &["mcp", "list"]).stdout).contains("mcp-broker:"));
    assert_ne!(std::fs::read(&project_file).unwrap(), project_before);

    let dry = u.broker_cmd(&["uninstall"]);
    let shown = text(&dry.stdout);
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    for f in [&u.home.join(".claude.json"), &codex_file, &project_file] {
        assert!(
            shown.contains(&format!("put back  {}", f.display())),
            "{shown}"
        );
    }
    assert!(
        shown.contains("stop      the daemon") && shown.contains("--purge removes them"),
        "{shown}"
    );

    let done = u.broker_cmd(&["uninstall", "--apply"]);
    let said = format!("{}{}", text(&done.stdout), text(&done.stderr));
    assert!(done.status.success(), "{said}");
    assert!(said.contains("mcp-broker is uninstalled"), "{said}");
    let listed = text(&u.client("claude", &["mcp", "list"]).stdout);
    assert!(
        listed.contains("one:") && listed.contains("team:") && !listed.contains("mcp-broker"),
        "{listed}"
    );
    let listed = text(&u.client("codex", &["mcp", "list"]).stdout);
    assert!(
        listed.contains("two") && !listed.contains("mcp-broker"),
        "{listed}"
    );
    assert_eq!(std::fs::read(&codex_file).unwrap(), codex_before);
    assert_eq!(std::fs::read(&project_file).unwrap(), project_before);
    assert!(!u.broker.root().join("run/daemon.pid").exists(), "{said}");
    assert!(u.broker.root().join("broker.yaml").is_file());
    // Nothing is left to put back.
    let again = u.broker_cmd(&["uninstall"]);
    assert!(
        text(&again.stdout).contains("no client file holds a change of the broker's"),
        "{}",
        text(&again.stdout)
    );
}
