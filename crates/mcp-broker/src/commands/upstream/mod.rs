//! `mcp-broker add | remove | list`: upstreams managed from the command line. The file keeps
//! the user's comments and order (see `yaml_edit`); a change is validated whole before it is
//! written, written atomically, and a running daemon is told to reload.

pub(crate) mod auth;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpb_config::{ConfigSource, ResolveContext, Settings};
use mcpb_protocol::AdminCommand;

use crate::cli::{AddArgs, UpstreamCommand};
use crate::daemon_client::admin;
use crate::fail;
use crate::yaml_edit::{self, quoted, yaml_name};

/// What `add` was told.
#[derive(Debug, Default, Clone)]
pub(crate) struct NewUpstream {
    pub name: String,
    pub command: Vec<String>,
    pub url: Option<String>,
    pub transport: Option<String>,
    pub headers: Vec<String>,
    pub env: Vec<String>,
    pub lifecycle: Option<String>,
    pub cwd: Option<String>,
    /// A project's server: shown only to sessions started in this folder.
    pub project: Option<String>,
    pub tools_allow: Vec<String>,
    pub tools_deny: Vec<String>,
    pub tags: Vec<String>,
    pub trust_annotations: bool,
    /// A local server gets `sandbox: standard`.
    pub sandbox: bool,
}

/// `K=V` pairs as a block mapping's lines; the first malformed one is the error. Keys are
/// held to what they name (an environment variable, an HTTP header), so nothing but a key
/// ever lands in the file where a key goes.
fn pairs(what: &str, items: &[String]) -> Result<Vec<String>, String> {
    let key_ok = |k: &str| {
        !k.is_empty()
            && if what == "env" {
                k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            } else {
                k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
            }
    };
    items
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if key_ok(k.trim()) => Ok(format!("    {}: {}", k.trim(), quoted(v))),
            Some((k, _)) => Err(format!("--{what}: {k:?} is not a valid name")),
            None => Err(format!("--{what} takes KEY=VALUE, not {kv:?}")),
        })
        .collect()
}

pub(crate) fn entry(new: &NewUpstream) -> Result<Vec<String>, String> {
    // The name goes into the file as a key: only the characters upstream names may have.
    let name_ok = new.name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && new
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !name_ok {
        return Err(format!(
            "{:?} is not an upstream name (letters, digits, '-' and '_', starting with a letter or digit)",
            new.name
        ));
    }
    if new.transport.is_some() && new.url.is_none() {
        return Err("--transport goes with --url".into());
    }
    let mut lines = vec![format!("{}:", yaml_name(&new.name))];
    match (&new.url, new.command.split_first()) {
        (Some(url), None) => {
            let transport = new.transport.as_deref().unwrap_or("streamable_http");
            lines.push(format!("  transport: {transport}"));
            lines.push(format!("  url: {}", quoted(url)));
        }
        (None, Some((cmd, args))) => {
            lines.push(format!("  command: {}", quoted(cmd)));
            if !args.is_empty() {
                let args: Vec<String> = args.iter().map(|a| quoted(a)).collect();
                lines.push(format!("  args: [{}]", args.join(", ")));
            }
        }
        (Some(_), Some(_)) => return Err("give a command (after --) or --url, not both".into()),
        (None, None) => {
            return Err("give the server's command after `--`, or its --url".into());
        }
    }
    if !new.env.is_empty() {
        lines.push("  env:".into());
        lines.extend(pairs("env", &new.env)?);
    }
    if !new.headers.is_empty() {
        lines.push("  headers:".into());
        lines.extend(pairs("header", &new.headers)?);
    }
    if let Some(p) = &new.project {
        lines.push(format!("  project: {}", quoted(p)));
    }
    if let Some(c) = &new.cwd {
        lines.push(format!("  cwd: {}", quoted(c)));
    }
    for (key, list) in [
        ("tools_allow", &new.tools_allow),
        ("tools_deny", &new.tools_deny),
        ("tags", &new.tags),
    ] {
        if !list.is_empty() {
            let items: Vec<String> = list.iter().map(|t| quoted(t)).collect();
            lines.push(format!("  {key}: [{}]", items.join(", ")));
        }
    }
    if new.trust_annotations {
        lines.push("  trust_annotations: true".into());
    }
    if let Some(l) = &new.lifecycle {
        lines.push(format!("  lifecycle: {l}"));
    }
    if new.sandbox && new.url.is_none() {
        lines.push("  sandbox: standard".into());
    }
    Ok(lines)
}

/// The file to edit: the one in use (a file not there yet starts empty; one that cannot be
/// read is never replaced), or a new one in the runtime root when the embedded default is in
/// use (it is not a file to edit).
pub(crate) fn file_to_edit(explicit: Option<&Path>) -> Result<(PathBuf, String), ExitCode> {
    let ctx = ResolveContext::from_env();
    match mcpb_config::locate(explicit, &ctx) {
        ConfigSource::File(p) => match std::fs::read_to_string(&p) {
            Ok(text) => Ok((p, text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok((p, "schema_version: 1\n".into()))
            }
            Err(e) => Err(fail(
                &format!("mcp-broker: cannot read {}: {e}", p.display()),
                &["nothing was changed"],
            )),
        },
        ConfigSource::Embedded => {
            let root = ctx.runtime_root(None);
            if let Err(e) = mcpb_config::RuntimeLayout::new(root.clone()).ensure() {
                return Err(fail(
                    &format!("mcp-broker: cannot make {}: {e}", root.display()),
                    &[],
                ));
            }
            Ok((
                root.join("broker.yaml"),
                "# yaml-language-server: $schema=./broker.schema.json\nschema_version: 1\n\nprofiles:\n  default: {allow_mutating_upstreams: true}\n".into(),
            ))
        }
    }
}

/// Validates `text`, writes it to `path` in one step, and tells a running daemon.
/// The settings `text` would give as the file at `path`, or the errors, said.
pub(crate) fn validate(path: &Path, text: &str) -> Result<Settings, ExitCode> {
    let ctx = ResolveContext::from_env();
    let source = ConfigSource::File(path.to_path_buf());
    mcpb_config::load_str(text, &path.display().to_string(), source, &ctx).map_err(|e| {
        errln!("mcp-broker: the change would make the config invalid; nothing was written");
        errln!("{e}");
        ExitCode::FAILURE
    })
}

pub(crate) fn commit(path: &Path, text: &str, done: &str) -> ExitCode {
    let settings = match validate(path, text) {
        Ok(s) => s,
        Err(code) => return code,
    };
    // Through a symlink to where it points, keeping the file's mode.
    if let Err(e) = mcpb_clients::write_keeping_mode(path, text.as_bytes()) {
        return fail(&format!("mcp-broker: cannot write: {e}"), &[]);
    }
    errln!("{done} ({})", path.display());
    match admin(&settings, AdminCommand::Reload) {
        Ok(Some(r)) if r.ok => errln!("mcp-broker: the running daemon reloaded it"),
        Ok(Some(r)) => errln!(
            "mcp-broker: the daemon did not take it: {}",
            r.error.unwrap_or_default()
        ),
        _ => {}
    }
    ExitCode::SUCCESS
}

/// The profiles of the config `text`: all of them, and the clients' (mapped to a client, or
/// made by a client's import), when the text reads as a config.
fn profiles_of(text: &str) -> (Vec<String>, Vec<String>) {
    let Ok(s) = mcpb_config::load_str(
        text,
        "edit",
        ConfigSource::Embedded,
        &ResolveContext::from_env(),
    ) else {
        return (Vec::new(), Vec::new());
    };
    let mut clients: Vec<String> = s.clients.values().cloned().collect();
    for c in mcpb_clients::Client::ALL {
        if let Some(p) = crate::commands::client::import::record::read_record(&s, c)
            .as_ref()
            .and_then(|r| r["profile"].as_str())
        {
            clients.push(p.to_string());
        }
    }
    clients.retain(|p| s.profiles.contains_key(p));
    clients.sort();
    clients.dedup();
    (s.profiles.keys().cloned().collect(), clients)
}

/// `add`: `next` with the new upstream in the lists of `asked` profiles, else of every
/// client's profile that lists its upstreams (a profile without a list sees it already).
fn reach_profiles(
    before: &str,
    mut next: String,
    name: &str,
    asked: &[String],
) -> Result<(String, Vec<String>), ExitCode> {
    let targets = if asked.is_empty() {
        profiles_of(before).1
    } else {
        asked.to_vec()
    };
    let mut reached = Vec::new();
    for p in &targets {
        match yaml_edit::add_to_profile_upstreams(&next, p, &[name.to_string()]) {
            Ok(Some(t)) => {
                next = t;
                reached.push(p.clone());
            }
            Ok(None) => {}
            Err(e) => {
                return Err(fail(
                    &format!("mcp-broker: profile {p}: {e}; nothing was written"),
                    &["`mcp-broker profile list` names the profiles"],
                ));
            }
        }
    }
    Ok((next, reached))
}

/// `mcp-broker add NAME (--url URL | -- COMMAND…)`.
pub(crate) fn add(explicit: Option<&Path>, a: &AddArgs) -> ExitCode {
    let new = NewUpstream {
        sandbox: !a.no_sandbox && a.url.is_none(),
        name: a.name.clone(),
        command: a.command.clone(),
        url: a.url.clone(),
        transport: a.transport.clone(),
        headers: a.headers.clone(),
        env: a.env.clone(),
        lifecycle: a.lifecycle.clone(),
        ..Default::default()
    };
    add_upstream(explicit, &new, &a.profile)
}

/// Writes `new` into the config file (and the profiles that list upstreams), checked first.
pub(crate) fn add_upstream(
    explicit: Option<&Path>,
    new: &NewUpstream,
    profiles: &[String],
) -> ExitCode {
    let unsandboxed;
    let mut new = new;
    if new.sandbox
        && let Some(why) = blind_spot(new)
    {
        errln!("mcp-broker: {} is not sandboxed: {why}", new.name);
        errln!(
            "hint: keep its data in a folder of its own, then add `sandbox: standard` to upstreams.{}",
            new.name
        );
        unsandboxed = NewUpstream {
            sandbox: false,
            ..new.clone()
        };
        new = &unsandboxed;
    }
    let lines = match entry(new) {
        Ok(l) => l,
        Err(e) => {
            return fail(
                &format!("mcp-broker: {e}"),
                &[
                    "e.g. `mcp-broker add git -- uvx mcp-server-git`, or `mcp-broker add notes --url https://host/mcp`",
                ],
            );
        }
    };
    let (path, text) = match file_to_edit(explicit) {
        Ok(f) => f,
        Err(code) => return code,
    };
    match yaml_edit::add_upstream(&text, &new.name, &lines) {
        Ok(next) => {
            let (next, reached) = match reach_profiles(&text, next, &new.name, profiles) {
                Ok(r) => r,
                Err(code) => return code,
            };
            let said = if reached.is_empty() {
                format!("added upstream {}", new.name)
            } else {
                format!(
                    "added upstream {} to profile(s) {}",
                    new.name,
                    reached.join(", ")
                )
            };
            let code = commit(&path, &next, &said);
            if let Some(cmd) = new.command.first()
                && code == ExitCode::SUCCESS
                && !found(cmd)
            {
                errln!(
                    "mcp-broker: upstream {}: {cmd} is not found (not on PATH, or not executable); it will fail to start",
                    new.name
                );
                errln!(
                    "hint: install it, or give its absolute path: `mcp-broker remove {}` then add it again",
                    new.name
                );
            }
            code
        }
        Err(e) => fail(
            &format!("mcp-broker: {e}"),
            &[&format!(
                "`mcp-broker remove {}` first, or pick another name",
                new.name
            )],
        ),
    }
}

/// Whether `cmd` names an executable (a placeholder like `{broker.exe}` is the broker's).
fn found(cmd: &str) -> bool {
    cmd.contains('{')
        || crate::commands::config::checks::runnable(
            cmd,
            &std::env::var("PATH").unwrap_or_default(),
        )
}

pub(crate) fn remove(explicit: Option<&Path>, name: &str) -> ExitCode {
    let (path, text) = match file_to_edit(explicit) {
        Ok(f) => f,
        Err(code) => return code,
    };
    // The profiles that list it let it go too, or the config would name a missing upstream.
    let mut text = text;
    let mut left = Vec::new();
    for p in profiles_of(&text).0 {
        match yaml_edit::remove_from_profile_upstreams(&text, &p, name) {
            Ok(Some(t)) => {
                text = t;
                left.push(p);
            }
            Ok(None) => {}
            Err(e) => {
                return fail(
                    &format!("mcp-broker: profile {p}: {e}; nothing was written"),
                    &[&format!(
                        "take {name} out of its upstreams by hand, then remove it"
                    )],
                );
            }
        }
    }
    let said = if left.is_empty() {
        format!("removed upstream {name}")
    } else {
        format!(
            "removed upstream {name} (and from profile(s) {})",
            left.join(", ")
        )
    };
    match yaml_edit::remove_upstream(&text, name) {
        Ok(next) => commit(&path, &next, &said),
        Err(e) => fail(
            &format!("mcp-broker: {e}"),
            &["`mcp-broker list` shows the upstreams"],
        ),
    }
}

pub(crate) fn list(settings: &Settings, json: bool) -> ExitCode {
    let live = admin(settings, AdminCommand::Status)
        .ok()
        .flatten()
        .and_then(|r| r.data);
    let store = mcpb_catalog::ListStore::new(settings.runtime.catalog_dir());
    let rows: Vec<serde_json::Value> = settings
        .upstreams
        .values()
        .map(|u| {
            let status = live.as_ref().and_then(|d| {
                d["upstreams"]
                    .as_array()?
                    .iter()
                    .find(|s| s["name"] == u.name.as_str())
                    .cloned()
            });
            let state = status
                .as_ref()
                .and_then(|s| s["state"].as_str().map(str::to_string))
                .unwrap_or_else(|| if u.enabled() { "stopped" } else { "disabled" }.into());
            let tools = status
                .as_ref()
                .and_then(|s| s["tool_count"].as_u64())
                .or_else(|| {
                    store
                        .load(&u.name)
                        .ok()
                        .flatten()
                        .map(|l| l.tools.len() as u64)
                });
            let transport = u.transport.name();
            let lifecycle = serde_json::to_value(u.lifecycle).unwrap_or_default();
            serde_json::json!({"name": u.name, "transport": transport,
                "lifecycle": lifecycle, "state": state, "tools": tools})
        })
        .collect();
    if json {
        out!("{:#}\n", serde_json::Value::Array(rows));
        return ExitCode::SUCCESS;
    }
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "-".into(),
        v @ serde_json::Value::Bool(_)
        | v @ serde_json::Value::Number(_)
        | v @ serde_json::Value::Array(_)
        | v @ serde_json::Value::Object(_) => v.to_string(),
    };
    let table = rows
        .iter()
        .map(|r| {
            ["name", "transport", "lifecycle", "state", "tools"]
                .iter()
                .map(|k| text(&r[*k]))
                .collect()
        })
        .collect();
    out!(
        "{}",
        crate::commands::render::table(
            &["NAME", "TRANSPORT", "LIFECYCLE", "STATE", "TOOLS"],
            table
        )
    );
    ExitCode::SUCCESS
}

/// Why the standard sandbox would break this new upstream's ordinary work, if it would (its
/// data file or folder where no grant may go): judged on its entry as the config will read it.
pub(crate) fn blind_spot(u: &NewUpstream) -> Option<String> {
    let lines = entry(u).ok()?;
    let text = format!("schema_version: 1\nupstreams:\n{}\n", lines.join("\n"));
    let settings = mcpb_config::load_str(
        &text,
        "import",
        mcpb_config::ConfigSource::Embedded,
        &mcpb_config::ResolveContext::from_env(),
    )
    .ok()?;
    let up = settings.upstreams.get(&u.name)?;
    // Literal values only: a secret is no path, and is not at hand before the apply.
    let lookup = |_: &str| None;
    let mut env: BTreeMap<String, String> = up
        .env
        .iter()
        .filter_map(|(k, t)| {
            Some((
                k.clone(),
                t.resolve(&lookup, Path::new("/nonexistent")).ok()?,
            ))
        })
        .collect();
    for k in ["HOME", "PATH"] {
        if let Ok(v) = std::env::var(k) {
            env.insert(k.to_string(), v);
        }
    }
    mcpb_upstream::sandboxed::blind_spot(up, &env, &settings.runtime.root)
}

/// `mcp-broker upstream start|stop|restart NAME`, asked of the running daemon.
pub(crate) fn control(s: &Settings, command: &UpstreamCommand) -> ExitCode {
    let (action, name) = match command {
        UpstreamCommand::Start { name } => ("start", name),
        UpstreamCommand::Stop { name } => ("stop", name),
        UpstreamCommand::Restart { name } => ("restart", name),
    };
    crate::commands::daemon::console::upstream(s, action, name)
}
