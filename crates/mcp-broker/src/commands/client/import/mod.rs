//! `mcp-broker client import --client C [--apply]`: the servers a client starts itself, from
//! every scope it keeps them in, become the broker's upstreams behind a profile that shows the
//! client exactly those servers; the client's user file keeps one entry, the broker's, naming
//! that profile. The default is a dry run: every change as a diff, and a table of what moves
//! and what stays. `--apply` writes exactly those (refused when any file changed since), after
//! a backup of each client file, then compares the client's tools before and after.

pub(crate) mod apply;
pub(crate) mod files;
pub(crate) mod parity;
pub(crate) mod profile;
pub(crate) mod record;
pub(crate) mod report;
pub(crate) mod scan;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpb_clients::{Client, Entry, Scope};
use mcpb_config::Settings;

use crate::cli::ImportArgs;
use crate::commands::client::files::entry_env;
use crate::commands::client::import::profile::{ProfileChange, profile_change};
use crate::commands::client::import::report::{print_table, say_variables};
use crate::commands::client::import::scan::{Scan, scan};
use crate::commands::import::change::Change;
use crate::commands::import::plan::{Fate, Options, Plan, plan};
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

/// The flags a client import was given, checked: the client, where it looks, its renames.
struct Asked {
    client: Client,
    home: PathBuf,
    cwd: PathBuf,
    renames: BTreeMap<String, String>,
    scopes: Vec<Scope>,
}

pub(crate) fn import(
    settings: &Settings,
    a: &ImportArgs,
    explicit_config: Option<&Path>,
) -> ExitCode {
    match run(settings, a, explicit_config) {
        Ok(code) | Err(code) => code,
    }
}

/// The pipeline for a client: its files scanned (the source), the plan, broker.yaml and the
/// client's files as they would become (the change), then the dry run or `--apply`.
fn run(
    settings: &Settings,
    a: &ImportArgs,
    explicit_config: Option<&Path>,
) -> Result<ExitCode, ExitCode> {
    let asked = asked(a)?;
    let client = asked.client;
    let scan = scan(
        client,
        &asked.home,
        &asked.cwd,
        &asked.scopes,
        a.all_projects,
        a.trust_project,
    )?;
    unknown_names(a, &asked, &scan)?;
    if scan.found.is_empty() {
        return Ok(nothing_found(settings, a, &asked, &scan, explicit_config));
    }
    let (config_path, config_before) = file_to_edit(explicit_config)?;
    // What the file to edit holds, not the embedded default's example (it will not be there).
    let base = validate(&config_path, &config_before)?;
    let shared = files::SharedFiles::of(a, client, &scan);
    let mut plan = plan(
        scan.found.clone(),
        &Options {
            keep: &a.keep,
            rename: &asked.renames,
            existing: &base.upstreams,
            secrets_dir: &settings.runtime.secrets_dir(),
            folder: &asked.cwd,
            read_only: a.read_only,
            sandbox: !a.no_sandbox,
            shared: shared.left_as_they_are(),
        },
    );
    read_only_believed(a, &plan, &base)?;
    let with_upstreams = with_upstreams(&config_before, &plan)?;
    let reached = reached(&plan);
    if reached.is_empty() {
        return nothing_reached(&plan, &scan, client);
    }
    let profile = profile_change(
        &base,
        a,
        client,
        &with_upstreams,
        &reached,
        scan.entry_profile.as_deref(),
    )?;
    let config_after = profile.text.clone();
    let settings_after = validate(&config_path, &config_after)?;
    let entry = broker_entry(client, &profile.name, explicit_config);
    let files = files::client_files(
        (client, &asked.home, &asked.cwd),
        &scan,
        &shared,
        &mut plan,
        &entry,
    )?;
    let change = Change {
        settings,
        plan: &plan,
        config_path: &config_path,
        config_before: &config_before,
        config_after: &config_after,
        files: &files,
        note_file: Change::note_path(settings, &format!("import-{}", client.name())),
        source: serde_json::Value::Null,
    };
    if !a.apply {
        return dry_run(a, &change, &scan, &profile, &settings_after);
    }
    change.check_seen(&again(a, false))?;
    Ok(crate::commands::client::import::apply::apply(
        &crate::commands::client::import::apply::Apply {
            change: &change,
            client,
            profile: &profile,
            stays: &scan.stays,
            mask: &scan.mask,
        },
    ))
}

/// The client and scopes asked for, with the home its files are found under.
fn asked(a: &ImportArgs) -> Result<Asked, ExitCode> {
    let Some(client) = Client::parse(&a.client) else {
        return Err(fail(
            &format!("mcp-broker: no client named {:?}", a.client),
            &[],
        ));
    };
    let Some(home) = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
    else {
        return Err(fail(
            "mcp-broker: HOME is not set to an absolute path, so the client's files cannot be found",
            &["run it as the user whose clients these are (HOME=/home/you)"],
        ));
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let renames = parse_renames(&a.rename)?;
    check_flags(a, client, &renames)?;
    let mut scopes: Vec<Scope> = a.scope.iter().filter_map(|s| Scope::parse(s)).collect();
    if a.project {
        scopes.push(Scope::Project);
    }
    if let Some(s) = scopes.iter().find(|s| !client.scopes().contains(s)) {
        let all: Vec<&str> = client.scopes().iter().map(|s| s.name()).collect();
        return Err(fail(
            &format!("mcp-broker: {} has no {} scope", client.name(), s.name()),
            &[&format!("its scopes: {}", all.join(", "))],
        ));
    }
    Ok(Asked {
        client,
        home,
        cwd,
        renames,
        scopes,
    })
}

/// A name given to --keep or --rename that no server has is a typo, not a no-op.
fn unknown_names(a: &ImportArgs, asked: &Asked, scan: &Scan) -> Result<(), ExitCode> {
    let names: Vec<&str> = scan.found.iter().map(|(_, s, _)| s.name.as_str()).collect();
    let unknown: Vec<&str> = a
        .keep
        .iter()
        .map(String::as_str)
        .chain(asked.renames.keys().map(String::as_str))
        .filter(|n| !names.contains(n))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(fail(
        &format!(
            "mcp-broker: {} has no server named {}",
            asked.client.name(),
            unknown.join(", ")
        ),
        &[&format!("its servers here: {}", names.join(", "))],
    ))
}

/// No server of the client's own here: its view changed when one was asked for, else said.
fn nothing_found(
    settings: &Settings,
    a: &ImportArgs,
    asked: &Asked,
    scan: &Scan,
    explicit_config: Option<&Path>,
) -> ExitCode {
    if let Some(view) = a.view.ask() {
        return change_view(
            settings,
            a,
            asked.client,
            scan.entry_profile.as_deref(),
            view,
            explicit_config,
        );
    }
    print_table(&Plan::default(), &scan.stays, &[]);
    let scopes: Vec<&str> = asked.scopes.iter().map(|s| s.name()).collect();
    errln!(
        "{}: no servers of its own to import in {}",
        asked.client.name(),
        if scopes.is_empty() {
            "any scope".to_string()
        } else {
            scopes.join(", ")
        }
    );
    for (f, n) in &scan.elsewhere {
        errln!("hint: {n} server(s) local to {f}: run the import there, or add --all-projects");
    }
    ExitCode::SUCCESS
}

/// --read-only shows a server's tools only when its read-only annotations are believed: an
/// upstream already in the broker that does not believe them would show none.
fn read_only_believed(a: &ImportArgs, plan: &Plan, base: &Settings) -> Result<(), ExitCode> {
    if !a.read_only {
        return Ok(());
    }
    let blind: Vec<&str> = plan
        .found
        .iter()
        .filter_map(|f| match &f.fate {
            Fate::Same(u) => base.upstreams.get(u).filter(|s| !s.trust_annotations),
            Fate::Moved(_) | Fate::Kept(_) | Fate::Off(_) => None,
        })
        .map(|u| u.name.as_str())
        .collect();
    if blind.is_empty() {
        return Ok(());
    }
    Err(fail(
        &format!(
            "mcp-broker: with --read-only, upstream(s) {} (already in the broker) would show no tools: they do not believe their read-only annotations",
            blind.join(", ")
        ),
        &["set `trust_annotations: true` on them in broker.yaml, or import without --read-only"],
    ))
}

/// broker.yaml with the plan's new upstreams in it.
fn with_upstreams(config: &str, plan: &Plan) -> Result<String, ExitCode> {
    let mut text = config.to_string();
    for u in &plan.upstreams {
        let lines = entry(u).map_err(|e| fail(&format!("mcp-broker: {}: {e}", u.name), &[]))?;
        text = crate::yaml_edit::add_upstream(&text, &u.name, &lines)
            .map_err(|e| fail(&format!("mcp-broker: {e}"), &[]))?;
    }
    Ok(text)
}

/// The upstreams the client reaches through the broker after the import, once each.
fn reached(plan: &Plan) -> Vec<String> {
    let mut reached: Vec<String> = Vec::new();
    for f in &plan.found {
        if let Fate::Moved(u) | Fate::Same(u) = &f.fate
            && !reached.contains(u)
        {
            reached.push(u.clone());
        }
    }
    reached
}

/// Nothing would move: done already (every server the client starts is on the broker), or
/// refused for each (the table says why).
fn nothing_reached(plan: &Plan, scan: &Scan, client: Client) -> Result<ExitCode, ExitCode> {
    print_table(plan, &scan.stays, &scan.mask);
    // Already moved: what is left is what the client does not start either.
    let all_off = plan.found.iter().all(|f| matches!(f.fate, Fate::Off(_)));
    if all_off && scan.entry_profile.is_some() {
        outln!(
            "{}: every server it starts is on the broker already; the rest it does not start either (see the table)",
            client.name()
        );
        return Ok(ExitCode::SUCCESS);
    }
    Err(fail(
        "mcp-broker: nothing could be imported; every server stays in the client",
        &["the table above says why for each"],
    ))
}

/// The broker's entry for the client, naming its profile (and the config, when not the
/// default one).
fn broker_entry(client: Client, profile: &str, explicit_config: Option<&Path>) -> Entry {
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .unwrap_or_else(|_| PathBuf::from("mcp-broker"));
    let mut entry = Entry::for_client(&exe, client, Some(profile));
    entry.env = entry_env(explicit_config);
    entry
}

/// The dry run: every change as a diff, the table, what the import will do besides, noted
/// for `--apply`.
fn dry_run(
    a: &ImportArgs,
    change: &Change<'_>,
    scan: &Scan,
    profile: &ProfileChange,
    settings_after: &Settings,
) -> Result<ExitCode, ExitCode> {
    change.print_diffs(&scan.mask);
    print_table(change.plan, &scan.stays, &scan.mask);
    for line in profile.said.iter().chain(&change.plan.notes) {
        outln!("{line}");
    }
    let new: Vec<String> = change
        .plan
        .upstreams
        .iter()
        .map(|u| u.name.clone())
        .collect();
    for line in crate::commands::sandbox::sandbox_grants(settings_after, Some(&new)) {
        outln!("{line}");
    }
    change.say_secrets();
    change.note_dry_run()?;
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
        crate::commands::client::import::apply::other_daemon(change.settings, change.config_path)
    {
        errln!(
            "mcp-broker: {why}, not {}: --apply will refuse until it stops",
            change.config_path.display()
        );
        errln!("hint: `mcp-broker stop` first");
    }
    say_variables(change.plan, "the client's file");
    errln!("hint: `{}` writes all of it", again(a, true));
    Ok(ExitCode::SUCCESS)
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
