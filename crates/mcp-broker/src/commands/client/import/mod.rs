//! `mcp-broker client import --client C [--apply]`: the servers a client starts itself, from
//! every scope it keeps them in, become the broker's upstreams behind a profile that shows the
//! client exactly those servers; the client's user file keeps one entry, the broker's, naming
//! that profile. The default is a dry run: every change as a diff, and a table of what moves
//! and what stays. `--apply` writes exactly those (refused when any file changed since), after
//! a backup of each client file, then compares the client's tools before and after.

pub(crate) mod apply;
pub(crate) mod parity;
pub(crate) mod plan;
pub(crate) mod profile;
pub(crate) mod record;
pub(crate) mod report;
pub(crate) mod scan;
pub(crate) mod secrets;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpb_clients::{Client, Entry, Scope};
use mcpb_config::Settings;

use crate::cli::ImportArgs;
use crate::commands::client::files::{entry_env, refused};
use crate::commands::client::import::plan::{Fate, Options, Plan, plan};
use crate::commands::client::import::profile::profile_change;
use crate::commands::client::import::report::{Files, print_table, say_variables};
use crate::commands::client::import::scan::{masked, scan};
use crate::commands::upstream::{entry, file_to_edit, validate};
use crate::fail;

/// The command line again, with the flags that change what it does (for hints).
fn again(a: &ImportArgs, apply: bool) -> String {
    let mut s = format!("mcp-broker client import --client {}", a.client);
    let valued = [
        ("--profile", a.profile.iter().collect::<Vec<_>>()),
        ("--scope", a.scope.iter().collect()),
        ("--keep", a.keep.iter().collect()),
        ("--rename", a.rename.iter().collect()),
    ];
    for (flag, values) in valued {
        for v in values {
            s.push_str(&format!(" {flag} {v}"));
        }
    }
    let switches = [
        (a.project, " --scope project"),
        (a.all_projects, " --all-projects"),
        (a.view.compact, " --compact"),
        (a.view.raw, " --raw"),
        (a.read_only, " --read-only"),
        (a.no_sandbox, " --no-sandbox"),
        (apply, " --apply"),
    ];
    for (on, flag) in switches {
        if on {
            s.push_str(flag);
        }
    }
    if let Some(n) = a.view.budget {
        s.push_str(&format!(" --budget {n}"));
    }
    s
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

/// Flags that cannot work together, refused before anything is read.
fn check_flags(
    a: &ImportArgs,
    client: Client,
    renames: &BTreeMap<String, String>,
) -> Result<(), ExitCode> {
    if a.all_projects && client != Client::ClaudeCode {
        return Err(fail(
            &format!(
                "mcp-broker: --all-projects is for Claude Code's local scope; {} has none",
                client.name()
            ),
            &["drop --all-projects"],
        ));
    }
    let mut targets: Vec<&str> = Vec::new();
    for (old, new) in renames {
        let ok = new.len() <= 40
            && new.starts_with(|c: char| c.is_ascii_alphanumeric())
            && new
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            && !new.contains("__");
        if !ok {
            return Err(fail(
                &format!("mcp-broker: --rename {old}={new}: {new:?} is not an upstream name"),
                &[
                    "letters, digits, '-' and '_' (no '__'), starting with a letter or digit, at most 40",
                ],
            ));
        }
        if targets.contains(&new.as_str()) {
            return Err(fail(
                &format!("mcp-broker: two servers are renamed to {new}"),
                &["give each --rename its own new name"],
            ));
        }
        targets.push(new);
        if a.keep.contains(old) {
            return Err(fail(
                &format!("mcp-broker: {old} is both kept (--keep) and renamed (--rename)"),
                &["drop one of them"],
            ));
        }
    }
    Ok(())
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
    if let Err(code) = check_flags(a, client, &renames) {
        return code;
    }
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
    let scan = match scan(
        client,
        &home,
        &cwd,
        &scopes,
        a.all_projects,
        a.trust_project,
    ) {
        Ok(s) => s,
        Err(code) => return code,
    };
    // A name given to --keep or --rename that no server has is a typo, not a no-op.
    let names: Vec<&str> = scan.found.iter().map(|(_, s, _)| s.name.as_str()).collect();
    let unknown: Vec<&str> = a
        .keep
        .iter()
        .map(String::as_str)
        .chain(renames.keys().map(String::as_str))
        .filter(|n| !names.contains(n))
        .collect();
    if !unknown.is_empty() {
        return fail(
            &format!(
                "mcp-broker: {} has no server named {}",
                client.name(),
                unknown.join(", ")
            ),
            &[&format!("its servers here: {}", names.join(", "))],
        );
    }
    if scan.found.is_empty()
        && let Some(view) = a.view.ask()
    {
        return change_view(
            settings,
            a,
            client,
            scan.entry_profile.as_deref(),
            view,
            explicit_config,
        );
    }
    if scan.found.is_empty() {
        print_table(&Plan::default(), &scan.stays, &[]);
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
        for (f, n) in &scan.elsewhere {
            errln!("hint: {n} server(s) local to {f}: run the import there, or add --all-projects");
        }
        return ExitCode::SUCCESS;
    }
    let mask = scan.mask.clone();
    let (config_path, config_before) = match file_to_edit(explicit_config) {
        Ok(f) => f,
        Err(code) => return code,
    };
    // What the file to edit holds, not the embedded default's example (it will not be there).
    let base = match validate(&config_path, &config_before) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let secrets_dir = settings.runtime.secrets_dir();
    // Project files git tracks are the team's: Claude Code's servers there are switched off
    // for this user in ~/.claude.json; other clients' stay, unless --edit-project-files.
    let tracked: Vec<PathBuf> = if a.edit_project_files {
        Vec::new()
    } else {
        let mut t: Vec<PathBuf> = scan
            .places
            .iter()
            .filter(|p| p.scope == Scope::Project)
            .map(|p| p.path.clone())
            .filter(|p| scan.before.get(p).is_some_and(Option::is_some))
            .filter(|p| crate::commands::client::import::scan::tracked_by_git(p))
            .collect();
        t.dedup();
        t
    };
    let switched = client == Client::ClaudeCode;
    let shared: Vec<PathBuf> = if switched {
        Vec::new()
    } else {
        tracked.clone()
    };
    let mut plan = plan(
        scan.found,
        &Options {
            keep: &a.keep,
            rename: &renames,
            existing: &base.upstreams,
            secrets_dir: &secrets_dir,
            folder: &cwd,
            read_only: a.read_only,
            sandbox: !a.no_sandbox,
            shared: &shared,
        },
    );
    // --read-only shows a server's tools only when its read-only annotations are believed: an
    // upstream already in the broker that does not believe them would show none.
    if a.read_only {
        let blind: Vec<&str> = plan
            .found
            .iter()
            .filter_map(|f| match &f.fate {
                Fate::Same(u) => base.upstreams.get(u).filter(|s| !s.trust_annotations),
                Fate::Moved(_) | Fate::Kept(_) | Fate::Off(_) => None,
            })
            .map(|u| u.name.as_str())
            .collect();
        if !blind.is_empty() {
            return fail(
                &format!(
                    "mcp-broker: with --read-only, upstream(s) {} (already in the broker) would show no tools: they do not believe their read-only annotations",
                    blind.join(", ")
                ),
                &[
                    "set `trust_annotations: true` on them in broker.yaml, or import without --read-only",
                ],
            );
        }
    }
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
    // Already moved: what is left is what the client does not start either.
    let all_off = plan.found.iter().all(|f| matches!(f.fate, Fate::Off(_)));
    if reached.is_empty() && all_off && scan.entry_profile.is_some() {
        print_table(&plan, &scan.stays, &mask);
        outln!(
            "{}: every server it starts is on the broker already; the rest it does not start either (see the table)",
            client.name()
        );
        return ExitCode::SUCCESS;
    }
    if reached.is_empty() {
        print_table(&plan, &scan.stays, &mask);
        return fail(
            "mcp-broker: nothing could be imported; every server stays in the client",
            &["the table above says why for each"],
        );
    }
    let profile = match profile_change(
        &base,
        a,
        client,
        &config_after,
        &reached,
        scan.entry_profile.as_deref(),
    ) {
        Ok(p) => p,
        Err(code) => return code,
    };
    config_after = profile.text.clone();
    let settings_after = match validate(&config_path, &config_after) {
        Ok(s) => s,
        Err(code) => return code,
    };
    // The client's files: the moved servers out of each place, the broker's entry into the
    // user file.
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .unwrap_or_else(|_| PathBuf::from("mcp-broker"));
    let mut broker_entry = Entry::for_client(&exe, client, Some(&profile.name));
    broker_entry.env = entry_env(explicit_config);
    let user_file = client.config_path(Scope::User, &home, &cwd);
    let mut files = Files {
        before: scan.before,
        after: BTreeMap::new(),
    };
    // Claude Code's switch: the moved servers of a shared `.mcp.json`, by folder.
    let mut switch_off: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in scan
        .places
        .iter()
        .filter(|p| switched && tracked.contains(&p.path))
    {
        let folder = p
            .folder
            .clone()
            .unwrap_or_else(|| cwd.display().to_string());
        switch_off.entry(folder).or_default().extend(
            plan.found
                .iter()
                .filter(|f| &f.place == p && matches!(f.fate, Fate::Moved(_) | Fate::Same(_)))
                .map(|f| f.server.name.clone()),
        );
        plan.notes.push(format!(
            "{}: tracked by git, so left as the team has it; its moved servers are switched off for you in Claude Code's settings (--edit-project-files edits it instead)",
            p.path.display(),
        ));
    }
    for (path, before) in &files.before {
        let mut text = before.clone().unwrap_or_default();
        for p in scan.places.iter().filter(|p| &p.path == path) {
            let gone: Vec<String> = plan
                .found
                .iter()
                .filter(|f| &f.place == p && matches!(f.fate, Fate::Moved(_) | Fate::Same(_)))
                .map(|f| f.server.name.clone())
                .collect();
            if switched && tracked.contains(path) {
                continue;
            }
            if !gone.is_empty() {
                text = match mcpb_clients::without(p, &text, &gone) {
                    Ok(t) => t,
                    Err(e) => return refused(&e),
                };
            }
        }
        if path == &user_file {
            for (folder, names) in switch_off
                .iter()
                .filter(|(f, n)| !n.is_empty() && local_settings(f).is_none())
            {
                text = match mcpb_clients::disable_project_servers(path, &text, Some(folder), names)
                {
                    Ok(t) => t,
                    Err(e) => return refused(&e),
                };
            }
            let existing = (before.is_some() || !text.is_empty()).then_some(text.as_str());
            text = match mcpb_clients::render(client, path, existing, &broker_entry) {
                Ok(t) => t,
                Err(e) => return refused(&e),
            };
        }
        // A file that was not there and gets nothing stays not there.
        if before.as_deref().unwrap_or("") != text {
            files.after.insert(path.clone(), text);
        }
    }
    // Claude Code keeps a project's switches in its `.claude/settings.local.json`, this user's
    // own (one git tracks is the team's: the switch goes in ~/.claude.json then).
    for (folder, names) in switch_off.iter().filter(|(_, n)| !n.is_empty()) {
        let Some(local) = local_settings(folder) else {
            continue;
        };
        let before = match std::fs::read_to_string(&local) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return fail(&format!("mcp-broker: {}: {e}", local.display()), &[]),
        };
        let text = before.clone().unwrap_or_default();
        let text = match mcpb_clients::disable_project_servers(&local, &text, None, names) {
            Ok(t) => t,
            Err(e) => return refused(&e),
        };
        files.before.insert(local.clone(), before);
        files.after.insert(local, text);
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
            // The lines taken out hold the client's secrets: hidden, never printed.
            let d = mcpb_clients::diff(p, files.before[p].as_deref().unwrap_or(""), after);
            out!("{}", masked(&d, &mask));
        }
        print_table(&plan, &scan.stays, &mask);
        for line in profile.said.iter().chain(&plan.notes) {
            outln!("{line}");
        }
        let new: Vec<String> = plan.upstreams.iter().map(|u| u.name.clone()).collect();
        for line in crate::commands::sandbox::sandbox_grants(&settings_after, Some(&new)) {
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
        if !scan.elsewhere.is_empty() {
            let list: Vec<String> = scan
                .elsewhere
                .iter()
                .map(|(f, n)| format!("{f} ({n})"))
                .collect();
            outln!(
                "not in this import: servers local to other folders, {}; run the import there, or add --all-projects",
                list.join(", ")
            );
        }
        errln!("a dry run: nothing was written");
        if let Some(why) =
            crate::commands::client::import::apply::other_daemon(settings, &config_path)
        {
            errln!(
                "mcp-broker: {why}, not {}: --apply will refuse until it stops",
                config_path.display()
            );
            errln!("hint: `mcp-broker stop` first");
        }
        say_variables(&plan, "the client's file");
        errln!("hint: `{}` writes all of it", again(a, true));
        return ExitCode::SUCCESS;
    }
    if !crate::commands::client::import::report::seen_in_dry_run(&note_file, &note) {
        return fail(
            "mcp-broker: a file changed since the dry run (or none was made); nothing was written",
            &[&format!("`{}` shows the change", again(a, false))],
        );
    }
    crate::commands::client::import::apply::apply(&crate::commands::client::import::apply::Apply {
        settings,
        client,
        plan: &plan,
        files: &files,
        profile: &profile,
        config_path: &config_path,
        config_after: &config_after,
        stays: &scan.stays,
        note_file: &note_file,
        mask: &mask,
    })
}

/// A client moved already, asked to see its tools another way: its profile is changed (the one
/// its entry names, else its own from `clients:`).
fn change_view(
    settings: &Settings,
    a: &ImportArgs,
    client: Client,
    entry_profile: Option<&str>,
    view: crate::cli::ViewAsk,
    explicit_config: Option<&Path>,
) -> ExitCode {
    let profile = a
        .profile
        .as_deref()
        .or(entry_profile)
        .or(settings.clients.get(client.name()).map(String::as_str));
    let Some(profile) = profile else {
        return fail(
            &format!(
                "mcp-broker: {} has no servers of its own and no broker entry naming a profile",
                client.name()
            ),
            &[
                "--profile P names the profile to change",
                "`mcp-broker profile set P --budget N` changes one",
            ],
        );
    };
    if !a.apply {
        outln!(
            "{}: no servers of its own; profile {profile} (its entry's) would show {}",
            client.name(),
            view.describe()
        );
        errln!("hint: {} writes it", again(a, true));
        return ExitCode::SUCCESS;
    }
    crate::commands::profile::view::set(explicit_config, profile, Some(view))
}

/// Claude Code's per-user settings of a project folder, when the switch may go there: not a
/// file git tracks (the team's), not below a `.claude` that is a link (out of the folder).
fn local_settings(folder: &str) -> Option<PathBuf> {
    let dir = Path::new(folder).join(".claude");
    let file = dir.join("settings.local.json");
    let dir_ok = match std::fs::symlink_metadata(&dir) {
        Ok(m) => m.is_dir(),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    };
    (dir_ok && !crate::commands::client::import::scan::tracked_by_git(&file)).then_some(file)
}
