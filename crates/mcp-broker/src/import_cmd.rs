//! `mcp-broker client import --client C [--apply]`: the servers a client starts itself, from
//! every scope it keeps them in, become the broker's upstreams behind a profile that shows the
//! client exactly those servers; the client's user file keeps one entry, the broker's, naming
//! that profile. The default is a dry run: every change as a diff, and a table of what moves
//! and what stays. `--apply` writes exactly those (refused when any file changed since), after
//! a backup of each client file, then compares the client's tools before and after.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpb_clients::{Backups, Client, Entry, Place, Scope};
use mcpb_config::{NameStyle, Settings};

use crate::cli::ImportArgs;
use crate::client_cmd::{entry_env, read, refused};
use crate::fail;
use crate::import_plan::{Fate, Options, Plan, plan};
use crate::upstreams_cmd::{entry, file_to_edit, validate};

/// The files a client keeps servers in, as they are and as the import leaves them.
struct Files {
    before: BTreeMap<PathBuf, Option<String>>,
    after: BTreeMap<PathBuf, String>,
}

/// Where an import's record is kept: what the parity check reads.
pub(crate) fn record_path(settings: &Settings, client: Client) -> PathBuf {
    settings
        .runtime
        .state_dir()
        .join("imports")
        .join(format!("{}.json", client.name()))
}

/// The command line again, with the flags that change what it does (for hints).
fn again(a: &ImportArgs, apply: bool) -> String {
    let mut s = format!("mcp-broker client import --client {}", a.client);
    if let Some(p) = &a.profile {
        s.push_str(&format!(" --profile {p}"));
    }
    for sc in &a.scope {
        s.push_str(&format!(" --scope {sc}"));
    }
    if a.project {
        s.push_str(" --scope project");
    }
    if a.all_projects {
        s.push_str(" --all-projects");
    }
    for k in &a.keep {
        s.push_str(&format!(" --keep {k}"));
    }
    for r in &a.rename {
        s.push_str(&format!(" --rename {r}"));
    }
    if a.compact {
        s.push_str(" --compact");
    }
    if a.read_only {
        s.push_str(" --read-only");
    }
    if apply {
        s.push_str(" --apply");
    }
    s
}

/// Every place of the client for this folder (and, with `all_projects`, Claude Code's local
/// servers of every folder); the chosen ones are those in `scopes`.
fn places(client: Client, home: &Path, cwd: &Path, all_projects: bool) -> Vec<Place> {
    let claude = read(&client.config_path(Scope::User, home, cwd))
        .ok()
        .flatten()
        .unwrap_or_default();
    let here = mcpb_clients::local_folder(&claude, cwd);
    let mut out = client.places(home, cwd, Some(&here));
    if all_projects && client == Client::ClaudeCode {
        for folder in mcpb_clients::local_folders(&claude) {
            if folder != here {
                out.push(Place {
                    client,
                    scope: Scope::Local,
                    path: client.config_path(Scope::Local, home, cwd),
                    folder: Some(folder),
                });
            }
        }
    }
    out
}

/// The profile the client's entry is to name, and the config's text with what it needs.
struct ProfileChange {
    name: String,
    text: String,
    said: Vec<String>,
}

fn profile_change(
    settings: &Settings,
    a: &ImportArgs,
    client: Client,
    text: &str,
    upstreams: &[String],
) -> Result<ProfileChange, ExitCode> {
    let mut said = Vec::new();
    // The profile asked for, else the client's own from `clients:` when it can show the
    // servers as the client had them, else one named after the client.
    let mut candidates: Vec<String> = Vec::new();
    match &a.profile {
        Some(p) => candidates.push(p.clone()),
        None => {
            if let Some(m) = settings.clients.get(client.name()) {
                candidates.push(m.clone());
            }
            candidates.push(client.name().to_string());
        }
    }
    for (i, name) in candidates.iter().enumerate() {
        let last = i + 1 == candidates.len();
        let Some(existing) = settings.profiles.get(name) else {
            return new_profile(a, client, text, name, upstreams, said);
        };
        if let Err((why, fixes)) = fits(existing, a, client) {
            if last {
                let mut hints: Vec<&str> = fixes.iter().map(String::as_str).collect();
                let fix = format!("--profile NEW makes a profile for {} alone", client.name());
                hints.push(&fix);
                return Err(fail(&format!("mcp-broker: profile {name} {why}"), &hints));
            }
            said.push(format!(
                "`clients:` maps {} to profile {name}, which {why}; the entry names its own profile instead",
                client.name()
            ));
            continue;
        }
        return extend_profile(a, text, name, existing, upstreams, said);
    }
    Err(fail("mcp-broker: no profile to use", &[]))
}

/// Whether an existing profile shows the servers as the client had them: why not, and fixes.
fn fits(
    existing: &mcpb_config::ProfileSettings,
    a: &ImportArgs,
    client: Client,
) -> Result<(), (String, Vec<String>)> {
    let name = &existing.name;
    if !a.read_only && !existing.allow_mutating_upstreams {
        return Err((
            format!(
                "hides mutating tools, which {}'s servers gave it",
                client.name()
            ),
            vec![
                "--read-only accepts that the client loses them".into(),
                format!("or set `allow_mutating_upstreams: true` in profile {name}"),
            ],
        ));
    }
    if needs_plain_names(client) && existing.broker_tool_name_style == NameStyle::Dotted {
        return Err((
            format!("names tools with dots, which {} refuses", client.name()),
            vec![format!(
                "set `broker_tool_name_style: double_underscore` in profile {name}"
            )],
        ));
    }
    Ok(())
}

fn new_profile(
    a: &ImportArgs,
    client: Client,
    text: &str,
    name: &str,
    upstreams: &[String],
    mut said: Vec<String>,
) -> Result<ProfileChange, ExitCode> {
    let mut lines = vec![
        format!("{name}:"),
        format!(
            "  description: {}",
            serde_json::to_string(&format!("The servers {} had before import", client.name()))
                .unwrap_or_default()
        ),
        format!("  upstreams: [{}]", upstreams.join(", ")),
        format!("  allow_mutating_upstreams: {}", !a.read_only),
    ];
    if needs_plain_names(client) {
        lines.push("  broker_tool_name_style: double_underscore".into());
    }
    if a.compact {
        lines.push("  compact_tools_enabled: true".into());
    }
    let text = crate::yaml_edit::add_entry(text, "profiles", name, &lines)
        .map_err(|e| fail(&format!("mcp-broker: cannot add profile {name}: {e}"), &[]))?;
    said.push(format!(
        "profile {name} (new): exactly these servers, {}, {} tools{}",
        if a.read_only {
            "mutating tools hidden"
        } else {
            "mutating tools shown as the client had them (--read-only hides them)"
        },
        if a.compact { "compact" } else { "raw" },
        if needs_plain_names(client) {
            ", names like server__tool"
        } else {
            ""
        }
    ));
    Ok(ProfileChange {
        name: name.to_string(),
        text,
        said,
    })
}

fn extend_profile(
    a: &ImportArgs,
    text: &str,
    name: &str,
    existing: &mcpb_config::ProfileSettings,
    upstreams: &[String],
    mut said: Vec<String>,
) -> Result<ProfileChange, ExitCode> {
    let missing: Vec<String> = upstreams
        .iter()
        .filter(|u| !existing.upstreams.contains(u))
        .cloned()
        .collect();
    let mut text = text.to_string();
    if missing.is_empty() {
        said.push(format!("profile {name}: shows them already"));
    } else {
        match crate::yaml_edit::add_to_profile_upstreams(&text, name, &missing) {
            Ok(Some(t)) => {
                text = t;
                said.push(format!(
                    "profile {name}: {} added to its upstreams",
                    missing.join(", ")
                ));
            }
            Ok(None) => said.push(format!("profile {name}: sees every upstream already")),
            Err(e) => {
                return Err(fail(
                    &format!("mcp-broker: profile {name} would hide the imported servers: {e}"),
                    &[
                        &format!(
                            "add {} to profiles.{name}.upstreams by hand",
                            missing.join(", ")
                        ),
                        "--profile NEW makes a profile for this client alone",
                    ],
                ));
            }
        }
    }
    if a.compact && !existing.compact_tools_enabled {
        said.push(format!(
            "profile {name} is raw; --compact applies to a new profile only"
        ));
    }
    Ok(ProfileChange {
        name: name.to_string(),
        text,
        said,
    })
}

/// Clients whose model API takes tool names of `^[a-zA-Z0-9_-]{1,64}$` only.
fn needs_plain_names(client: Client) -> bool {
    matches!(client, Client::Codex)
}

fn parse_renames(items: &[String]) -> Result<BTreeMap<String, String>, ExitCode> {
    items
        .iter()
        .map(|r| match r.split_once('=') {
            Some((o, n)) if !o.is_empty() && !n.is_empty() => Ok((o.to_string(), n.to_string())),
            _ => Err(fail(
                &format!("mcp-broker: --rename takes OLD=NEW, not {r:?}"),
                &["e.g. --rename github=gh"],
            )),
        })
        .collect()
}

pub(crate) fn import(
    settings: &Settings,
    a: &ImportArgs,
    explicit_config: Option<&Path>,
) -> ExitCode {
    let Some(client) = Client::parse(&a.client) else {
        return fail(&format!("mcp-broker: no client named {:?}", a.client), &[]);
    };
    let Some(home) = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
    else {
        return fail(
            "mcp-broker: HOME is not set to an absolute path, so the client's files cannot be found",
            &["run it as the user whose clients these are (HOME=/home/you)"],
        );
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let renames = match parse_renames(&a.rename) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut scopes: Vec<Scope> = a.scope.iter().filter_map(|s| Scope::parse(s)).collect();
    if a.project {
        scopes.push(Scope::Project);
    }
    if let Some(s) = scopes.iter().find(|s| !client.scopes().contains(s)) {
        return fail(
            &format!("mcp-broker: {} has no {} scope", client.name(), s.name()),
            &[&format!(
                "its scopes: {}",
                client
                    .scopes()
                    .iter()
                    .map(|s| s.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )],
        );
    }
    let all = places(client, &home, &cwd, a.all_projects);
    let chosen = |p: &Place| scopes.is_empty() || scopes.contains(&p.scope);
    let mut files = Files {
        before: BTreeMap::new(),
        after: BTreeMap::new(),
    };
    let user_file = client.config_path(Scope::User, &home, &cwd);
    for p in all.iter().map(|p| &p.path).chain([&user_file]) {
        if !files.before.contains_key(p) {
            match read(p) {
                Ok(t) => {
                    files.before.insert(p.clone(), t);
                }
                Err(code) => return code,
            }
        }
    }
    let mut found = Vec::new();
    let mut elsewhere = Vec::new();
    for p in &all {
        let text = files.before[&p.path].clone().unwrap_or_default();
        let servers = match mcpb_clients::servers(p, &text) {
            Ok(s) => s,
            Err(e) => return refused(&e),
        };
        for s in servers {
            if chosen(p) {
                found.push((p.clone(), s));
            } else {
                elsewhere.push((p.clone(), s.name));
            }
        }
    }
    if found.is_empty() {
        errln!(
            "{}: no servers of its own to import in {}",
            client.name(),
            if scopes.is_empty() {
                "any scope".to_string()
            } else {
                scopes
                    .iter()
                    .map(|s| s.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
        return ExitCode::SUCCESS;
    }
    let secrets_dir = settings.runtime.secrets_dir();
    let plan = plan(
        found,
        &Options {
            keep: &a.keep,
            rename: &renames,
            existing: &settings.upstreams,
            secrets_dir: &secrets_dir,
            folder: &cwd,
        },
    );
    let (config_path, config_before) = match file_to_edit(explicit_config) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let mut config_after = config_before.clone();
    for u in &plan.upstreams {
        let lines = match entry(u) {
            Ok(l) => l,
            Err(e) => return fail(&format!("mcp-broker: {}: {e}", u.name), &[]),
        };
        match crate::yaml_edit::add_upstream(&config_after, &u.name, &lines) {
            Ok(next) => config_after = next,
            Err(e) => return fail(&format!("mcp-broker: {e}"), &[]),
        }
    }
    let mut reached: Vec<String> = Vec::new();
    for f in &plan.found {
        if let Fate::Moved(u) | Fate::Same(u) = &f.fate
            && !reached.contains(u)
        {
            reached.push(u.clone());
        }
    }
    if reached.is_empty() {
        print_table(&plan, &elsewhere);
        return fail(
            "mcp-broker: nothing could be imported; every server stays in the client",
            &["the table above says why for each"],
        );
    }
    let profile = match profile_change(settings, a, client, &config_after, &reached) {
        Ok(p) => p,
        Err(code) => return code,
    };
    config_after = profile.text.clone();
    if let Err(code) = validate(&config_path, &config_after) {
        return code;
    }
    // The client's files: the moved servers out of each place, the broker's entry into the
    // user file.
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .unwrap_or_else(|_| PathBuf::from("mcp-broker"));
    let mut broker_entry = Entry::for_client(&exe, client, Some(&profile.name));
    broker_entry.env = entry_env(explicit_config);
    for (path, before) in &files.before {
        let mut text = before.clone().unwrap_or_default();
        for p in all.iter().filter(|p| &p.path == path) {
            let gone: Vec<String> = plan
                .found
                .iter()
                .filter(|f| &f.place == p && !matches!(f.fate, Fate::Kept(_)))
                .map(|f| f.server.name.clone())
                .collect();
            if !gone.is_empty() {
                text = match mcpb_clients::without(p, &text, &gone) {
                    Ok(t) => t,
                    Err(e) => return refused(&e),
                };
            }
        }
        if path == &user_file {
            let existing = (before.is_some() || !text.is_empty()).then_some(text.as_str());
            text = match mcpb_clients::render(client, path, existing, &broker_entry) {
                Ok(t) => t,
                Err(e) => return refused(&e),
            };
        }
        if before.as_deref() != Some(text.as_str()) {
            files.after.insert(path.clone(), text);
        }
    }
    let note_file = settings
        .runtime
        .state_dir()
        .join("renders")
        .join(format!("import-{}.json", client.name()));
    let hashes: BTreeMap<String, (String, String)> = files
        .after
        .iter()
        .map(|(p, after)| {
            let before = files.before[p].as_deref().unwrap_or("");
            (
                p.display().to_string(),
                (
                    mcpb_clients::sha256(before.as_bytes()),
                    mcpb_clients::sha256(after.as_bytes()),
                ),
            )
        })
        .collect();
    let secrets: Vec<(String, String)> = plan
        .secrets
        .iter()
        .map(|s| (s.name.clone(), mcpb_clients::sha256(s.value.as_bytes())))
        .collect();
    let note = serde_json::json!({
        "files": hashes,
        "secrets": secrets,
        "config": config_path.display().to_string(),
        "config_before": mcpb_clients::sha256(config_before.as_bytes()),
        "config_after": mcpb_clients::sha256(config_after.as_bytes()),
    });
    if !a.apply {
        out!(
            "{}",
            mcpb_clients::diff(&config_path, &config_before, &config_after)
        );
        for (p, after) in &files.after {
            // The lines taken out hold the secrets being moved: shown masked, never whole.
            let mut d = mcpb_clients::diff(p, files.before[p].as_deref().unwrap_or(""), after);
            for s in &plan.secrets {
                d = d.replace(&s.value, &format!("<moved to secrets/{}>", s.name));
            }
            out!("{d}");
        }
        print_table(&plan, &elsewhere);
        for line in &profile.said {
            outln!("{line}");
        }
        for s in &plan.secrets {
            outln!(
                "secret {} -> {} (0600; the config refers to it as ${{file:{}}})",
                s.from,
                secrets_dir.join(&s.name).display(),
                s.name
            );
        }
        if let Err(e) = mcpb_config::layout::write_private(&note_file, note.to_string().as_bytes())
        {
            return fail(&format!("mcp-broker: cannot note the dry run: {e}"), &[]);
        }
        errln!("a dry run: nothing was written");
        say_variables(&plan);
        errln!("hint: `{}` writes all of it", again(a, true));
        return ExitCode::SUCCESS;
    }
    let seen: serde_json::Value = std::fs::read_to_string(&note_file)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    if seen != note {
        return fail(
            "mcp-broker: a file changed since the dry run (or none was made); nothing was written",
            &[&format!("`{}` shows the change", again(a, false))],
        );
    }
    apply(
        settings,
        a,
        client,
        &plan,
        &files,
        &profile,
        &config_path,
        &config_after,
        &elsewhere,
        &note_file,
    )
}

/// The home a client's user file is under (for telling a user file from a project file).
fn home_of(_p: &Path) -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// The variables the moved servers still take from the daemon's environment.
fn say_variables(plan: &Plan) {
    if plan.variables.is_empty() {
        return;
    }
    let names: Vec<String> = plan
        .variables
        .iter()
        .map(|(v, u)| format!("{v} ({u})"))
        .collect();
    errln!(
        "the client's file takes these from its environment; the daemon must have them too: {}",
        names.join(", ")
    );
    errln!(
        "hint: put each value in a file under the secrets dir and write ${{file:NAME}} instead, so no client's environment matters"
    );
}

/// What moved and what stays, per scope.
fn print_table(plan: &Plan, elsewhere: &[(Place, String)]) {
    let mut rows = Vec::new();
    for f in &plan.found {
        let now = match &f.fate {
            Fate::Moved(u) => format!("moves: upstream {u}"),
            Fate::Same(u) => format!("moves: same as upstream {u}"),
            Fate::Kept(why) => format!("stays: {why}"),
        };
        rows.push(vec![
            f.place.label(),
            f.server.name.clone(),
            now,
            f.place.path.display().to_string(),
        ]);
    }
    for (p, name) in elsewhere {
        rows.push(vec![
            p.label(),
            name.clone(),
            "stays: scope not imported".into(),
            p.path.display().to_string(),
        ]);
    }
    out!(
        "{}",
        crate::commands::table(&["SCOPE", "SERVER", "NOW", "FILE"], rows)
    );
}

#[allow(clippy::too_many_arguments)]
fn apply(
    settings: &Settings,
    a: &ImportArgs,
    client: Client,
    plan: &Plan,
    files: &Files,
    profile: &ProfileChange,
    config_path: &Path,
    config_after: &str,
    elsewhere: &[(Place, String)],
    note_file: &Path,
) -> ExitCode {
    if let Err(e) = settings.runtime.ensure() {
        return fail(
            &format!("mcp-broker: cannot make the runtime dir: {e}"),
            &[],
        );
    }
    let mut backups = Vec::new();
    for (path, after) in &files.after {
        let b = Backups::new(&settings.runtime.root.join("backups"), client, path);
        let before = files.before[path].as_deref().map(str::as_bytes);
        match b.take(
            path,
            before,
            &mcpb_clients::sha256(after.as_bytes()),
            mcpb_config::unix_now(),
        ) {
            Ok(taken) => backups.push((path.clone(), taken.name)),
            Err(e) => {
                return fail(
                    &format!("mcp-broker: no backup could be taken, so nothing was written: {e}"),
                    &[],
                );
            }
        }
    }
    // Secrets first, then the broker, then the client: a client pointed at the broker before
    // it has the servers (and their secrets) would lose them for a while.
    let secrets_dir = settings.runtime.secrets_dir();
    for s in &plan.secrets {
        let path = secrets_dir.join(&s.name);
        if let Err(e) = mcpb_config::layout::write_private(&path, s.value.as_bytes()) {
            return fail(
                &format!("mcp-broker: cannot write {}: {e}", path.display()),
                &["nothing else was written"],
            );
        }
    }
    let moved = plan.upstreams.len();
    let code = crate::upstreams_cmd::commit(
        config_path,
        config_after,
        &format!(
            "imported {moved} server(s) as upstreams, profile {}",
            profile.name
        ),
    );
    if code != ExitCode::SUCCESS {
        return code;
    }
    for (path, after) in &files.after {
        if let Err(e) = mcpb_clients::write_keeping_mode(path, after.as_bytes()) {
            return fail(
                &format!("mcp-broker: {e}"),
                &[&format!(
                    "`mcp-broker client rollback --client {}` puts back what was written",
                    client.name()
                )],
            );
        }
    }
    let _ = std::fs::remove_file(note_file);
    let record = serde_json::json!({
        "client": client.name(),
        "profile": profile.name,
        "backups": backups.iter().map(|(p, n)| serde_json::json!({"path": p, "backup": n})).collect::<Vec<_>>(),
        "servers": plan.found.iter().filter_map(|f| match &f.fate {
            Fate::Moved(u) | Fate::Same(u) => Some(serde_json::json!({
                "name": f.server.name, "scope": f.place.scope.name(), "folder": f.place.folder,
                "path": f.place.path, "upstream": u})),
            Fate::Kept(_) => None,
        }).collect::<Vec<_>>(),
    });
    let record_file = record_path(settings, client);
    if let Err(e) = mcpb_config::layout::write_private(&record_file, record.to_string().as_bytes())
    {
        errln!("mcp-broker: cannot keep the import's record: {e}");
    }
    print_table(plan, elsewhere);
    for line in &profile.said {
        outln!("{line}");
    }
    let stays = plan
        .found
        .iter()
        .filter(|f| matches!(f.fate, Fate::Kept(_)))
        .count()
        + elsewhere.len();
    if stays == 0 {
        outln!(
            "{}: the client starts only the broker now (profile {})",
            client.name(),
            profile.name
        );
    } else {
        outln!(
            "{}: the client starts the broker (profile {}) and still {stays} server(s) of its own, listed above",
            client.name(),
            profile.name
        );
    }
    for (p, n) in &backups {
        errln!("backup {n} of {}", p.display());
    }
    say_variables(plan);
    // The config as written now: the daemon that answers must be the one for this file.
    let now = validate(config_path, config_after).unwrap_or_else(|_| settings.clone());
    let parity = crate::import_parity::run(&now, &a.client, false);
    let undo: Vec<String> = files
        .after
        .keys()
        .map(|p| {
            let project = p != &client.config_path(Scope::User, &home_of(p), Path::new("/"));
            format!(
                "`mcp-broker client rollback --client {}{}` puts {} back",
                client.name(),
                if project { " --project" } else { "" },
                p.display()
            )
        })
        .collect();
    if parity == ExitCode::SUCCESS {
        errln!("hint: restart {} to use it", client.name());
    }
    for u in undo {
        errln!("hint: {u}");
    }
    parity
}
