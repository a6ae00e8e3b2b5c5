//! `mcp-broker config import FILE`: an MCP Exec Broker config (JSON: `workspace_root`,
//! `defaults`, `targets`) as broker.yaml's upstreams, one profile in that broker's vocabulary
//! with its run defaults, and its workspace root. A dry run (the diff of broker.yaml) unless
//! --apply, which writes exactly what the last dry run showed. Each target goes through the
//! checks a client's server does on `client import` (literal secrets to files, no secret in
//! arguments, relative paths made absolute), so the two imports cannot drift apart.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpb_config::{NameFilter, Settings};
use serde::Deserialize;
use serde_json::Value;

use crate::cli::ConfigImportArgs;
use crate::commands::config::import_apply::{finish, source};
use crate::commands::import::change::{Change, Files};
use crate::commands::import::plan::{Options, Plan, same_as_upstream, upstream_name};
use crate::commands::upstream::{entry, file_to_edit, validate};
use crate::fail;
use crate::out::word;
use crate::yaml_edit::{self, quoted, yaml_name};

/// The exec broker's config file, as its document gives it. Keys it has that the broker has
/// no use for are collected, to be said, not dropped in silence.
#[derive(Debug, Deserialize)]
struct ExecConfig {
    workspace_root: Option<String>,
    #[serde(default)]
    defaults: Defaults,
    #[serde(default)]
    targets: Vec<Target>,
    #[serde(flatten)]
    other: BTreeMap<String, Value>,
}

#[derive(Debug, Default, Deserialize)]
struct Defaults {
    wall_clock_ms: Option<u64>,
    per_call_ms: Option<u64>,
    max_calls: Option<u64>,
    max_output_kb: Option<u64>,
    persist: Option<bool>,
    #[serde(flatten)]
    other: BTreeMap<String, Value>,
}

#[derive(Debug, Deserialize)]
struct Target {
    name: String,
    command: String,
    #[serde(default)]
    args: Vec<String>,
    cwd: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    tools_allow: Vec<String>,
    #[serde(flatten)]
    other: BTreeMap<String, Value>,
}

/// What becomes of one target.
enum Fate {
    New(String),
    Same(String),
    Skipped,
    Refused(String),
}

/// The import, decided before anything is written.
struct Import {
    rows: Vec<Vec<String>>,
    plan: Plan,
    /// Upstream names the profile lists, in the file's order.
    upstreams: Vec<String>,
    /// `upstream.tool` names the user listed (`tools_allow`).
    listed: Vec<String>,
    refused: bool,
    notes: Vec<String>,
}

const MAX_FILE: u64 = 4 << 20;

fn read(path: &Path) -> Result<ExecConfig, String> {
    let size = std::fs::metadata(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .len();
    if size > MAX_FILE {
        return Err(format!(
            "{} is {size} bytes; an exec broker config is at most {MAX_FILE}",
            path.display()
        ));
    }
    // A pipe or device says size 0: the read itself is capped too.
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(
            std::fs::File::open(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
            MAX_FILE + 1,
        ),
        &mut text,
    )
    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if text.len() as u64 > MAX_FILE {
        return Err(format!(
            "{} is over {MAX_FILE} bytes; an exec broker config is smaller",
            path.display()
        ));
    }
    serde_json::from_str(&text)
        .map_err(|e| format!("{} is not an MCP Exec Broker config: {e}", path.display()))
}

/// `p` as an absolute path: `~/…` from the home, a relative one from `dir`, without `.`
/// steps. A `${…}` in it is refused: the broker's paths take no variables.
fn anchored(dir: &Path, p: &str) -> Result<String, String> {
    if p.contains("${") {
        return Err(format!(
            "its path {p:?} holds a variable; the broker's command and cwd take none"
        ));
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let p = mcpb_config::layout::expand_home(p, home.as_deref());
    Ok(dir
        .join(p)
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect::<PathBuf>()
        .display()
        .to_string())
}

/// A target's folder and command as the broker runs them: both absolute when they are
/// paths (a relative command is found from the folder it runs in, as a process started there
/// finds it: its cwd, else the file's folder); a bare command stays a name on PATH.
fn start_of(t: &Target, dir: &Path) -> Result<(Option<String>, String), String> {
    if t.command.trim().is_empty() {
        return Err("its command is empty".into());
    }
    let cwd = t.cwd.as_deref().map(|c| anchored(dir, c)).transpose()?;
    let command = if t.command.contains('/') || t.command.starts_with('~') {
        let from = cwd
            .as_deref()
            .map_or_else(|| dir.to_path_buf(), PathBuf::from);
        anchored(&from, &t.command)?
    } else {
        t.command.clone()
    };
    Ok((cwd, command))
}

/// What becomes of one target: a new upstream (added to `plan`), the same as one there, left
/// out, or refused with why. `taken`: the names earlier targets became.
fn fate(
    t: &Target,
    (a, dir, o): (&ConfigImportArgs, &Path, &Options<'_>),
    taken: &mut BTreeSet<String>,
    plan: &mut Plan,
) -> Fate {
    let (renames, base) = (o.rename, o.existing);
    let name = renames
        .get(&t.name)
        .cloned()
        .unwrap_or_else(|| upstream_name(&t.name));
    let (cwd, command, bad_start) = match start_of(t, dir) {
        Ok((cwd, command)) => (cwd, command, None),
        Err(why) => (None, String::new(), Some(why)),
    };
    let server = mcpb_clients::Server {
        name: t.name.clone(),
        command: Some(command),
        args: t.args.clone(),
        env: t.env.clone().into_iter().collect(),
        cwd: cwd.clone(),
        tools_allow: t.tools_allow.iter().map(|n| NameFilter::exact(n)).collect(),
        ..Default::default()
    };
    let rename_hint = || word(&format!("{}=NEW", t.name));
    if a.skip.contains(&t.name) {
        Fate::Skipped
    } else if let Some(why) = bad_start {
        Fate::Refused(why)
    } else if !taken.insert(name.clone()) {
        Fate::Refused(format!(
            "another target is imported as {name} too; --rename {}",
            rename_hint()
        ))
    } else if let Some(u) = base.get(&name) {
        if same_as_upstream(&server, cwd.as_deref(), u, o) {
            Fate::Same(name)
        } else {
            Fate::Refused(format!(
                "upstream {name} exists and starts something else; --rename {}",
                rename_hint()
            ))
        }
    } else {
        match plan.as_upstream(o, cwd, &server, &name) {
            Ok(mut new) => {
                new.tags = t.tags.clone();
                plan.upstreams.push(new);
                Fate::New(name)
            }
            Err(why) => Fate::Refused(why),
        }
    }
}

fn plan_targets(
    cfg: &ExecConfig,
    a: &ConfigImportArgs,
    renames: &BTreeMap<String, String>,
    base: &Settings,
    dir: &Path,
) -> Import {
    let secrets_dir = base.runtime.secrets_dir();
    let o = Options {
        keep: &[],
        rename: renames,
        existing: &base.upstreams,
        secrets_dir: &secrets_dir,
        folder: dir,
        read_only: a.read_only,
        sandbox: !a.no_sandbox,
        shared: &[],
    };
    let mut x = Import {
        rows: Vec::new(),
        plan: Plan::default(),
        upstreams: Vec::new(),
        listed: Vec::new(),
        refused: false,
        notes: Vec::new(),
    };
    let mut taken = BTreeSet::new();
    for t in &cfg.targets {
        let fate = fate(t, (a, dir, &o), &mut taken, &mut x.plan);
        let now = match &fate {
            Fate::New(u) => format!("new upstream {u}"),
            Fate::Same(u) => format!("same as upstream {u}, already there"),
            Fate::Skipped => "left out (--skip)".into(),
            Fate::Refused(why) => format!("refused: {why}"),
        };
        if let Fate::New(u) | Fate::Same(u) = &fate {
            x.upstreams.push(u.clone());
            x.listed
                .extend(t.tools_allow.iter().map(|tool| format!("{u}.{tool}")));
        }
        x.refused |= matches!(fate, Fate::Refused(_));
        for key in t.other.keys() {
            x.notes.push(format!(
                "target {}: `{key}` is not carried (the broker has no such setting)",
                t.name
            ));
        }
        x.rows.push(vec![
            crate::out::one_line(&t.name).into_owned(),
            crate::out::one_line(&now).into_owned(),
        ]);
    }
    for key in cfg.other.keys().chain(cfg.defaults.other.keys()) {
        x.notes.push(format!(
            "`{key}` is not carried (the broker has no such setting)"
        ));
    }
    x
}

/// The profile's lines: the targets in the exec broker's vocabulary, with its run defaults.
fn profile_entry(a: &ConfigImportArgs, cfg: &ExecConfig, x: &Import, file: &Path) -> Vec<String> {
    let d = &cfg.defaults;
    let names: Vec<String> = x.upstreams.iter().map(|u| yaml_name(u)).collect();
    let mut lines = vec![
        format!("{}:", yaml_name(&a.profile)),
        format!(
            "  description: {}",
            quoted(&format!("MCP Exec Broker targets from {}", file.display()))
        ),
        format!("  upstreams: [{}]", names.join(", ")),
        "  compact_tools_enabled: true".into(),
        "  facade_vocabulary: exec_broker".into(),
        format!("  allow_mutating_upstreams: {}", !a.read_only),
    ];
    if a.read_only && !x.listed.is_empty() {
        let listed: Vec<String> = x.listed.iter().map(|n| quoted(n)).collect();
        lines.push(format!("  mutating_allowlist: [{}]", listed.join(", ")));
    }
    lines.push("  exec:".into());
    lines.push("    languages: [python, javascript]".into());
    if d.persist == Some(true) {
        lines.push("    persist: true".into());
    }
    let limits: Vec<String> = [
        ("wall_clock_ms", d.wall_clock_ms),
        ("per_call_ms", d.per_call_ms),
        ("max_calls", d.max_calls),
        ("max_output_kb", d.max_output_kb),
    ]
    .iter()
    .filter_map(|(k, v)| v.map(|v| format!("{k}: {v}")))
    .collect();
    if !limits.is_empty() {
        lines.push(format!("    limits: {{{}}}", limits.join(", ")));
    }
    lines
}

/// Limits above the broker's ceilings: the profile gets the ceiling; said, with the key that
/// raises it.
fn over_ceilings(cfg: &ExecConfig, base: &Settings) -> Vec<String> {
    let c = &base.broker.exec.ceilings;
    let d = &cfg.defaults;
    [
        ("wall_clock_ms", d.wall_clock_ms, c.wall_clock_ms),
        ("per_call_ms", d.per_call_ms, c.per_call_ms),
        ("max_calls", d.max_calls, c.max_calls),
        ("max_output_kb", d.max_output_kb, c.max_output_kb),
    ]
    .iter()
    .filter_map(|(k, asked, ceiling)| {
        asked.filter(|v| v > ceiling).map(|v| {
            format!(
                "defaults.{k} {v} is above broker.exec.ceilings.{k} ({ceiling}): runs get {ceiling} unless you raise the ceiling"
            )
        })
    })
    .collect()
}

/// broker.yaml with the import in it: upstreams, the profile (new, or an existing one
/// extended), the workspace root.
fn edited(
    text: &str,
    a: &ConfigImportArgs,
    cfg: &ExecConfig,
    x: &mut Import,
    base: &Settings,
    file: &Path,
    dir: &Path,
) -> Result<String, String> {
    let entries = x
        .plan
        .upstreams
        .iter()
        .map(|new| Ok((new.name.clone(), entry(new)?)))
        .collect::<Result<Vec<_>, String>>()?;
    let mut text = if entries.is_empty() {
        text.to_string()
    } else {
        yaml_edit::add_entries(text, "upstreams", &entries).map_err(|e| e.to_string())?
    };
    match base.profiles.get(&a.profile) {
        Some(p) => {
            let missing: Vec<String> = x
                .upstreams
                .iter()
                .filter(|u| !p.upstreams.contains(u))
                .cloned()
                .collect();
            x.notes.push(format!(
                "profile {} exists: its settings stay as they are; only its upstreams are extended",
                a.profile
            ));
            if !missing.is_empty()
                && let Some(t) = yaml_edit::add_to_profile_upstreams(&text, &a.profile, &missing)
                    .map_err(|e| e.to_string())?
            {
                text = t;
            }
        }
        None => {
            let lines = profile_entry(a, cfg, x, file);
            text = yaml_edit::add_entry(&text, "profiles", &a.profile, &lines)
                .map_err(|e| e.to_string())?;
        }
    }
    if let Some(root) = &cfg.workspace_root {
        let root = anchored(dir, root).map_err(|e| format!("workspace_root: {e}"))?;
        if Path::new(&root) != base.exec_root() {
            if let Some(old) = &base.broker.exec.workspace_root {
                x.notes.push(format!(
                    "broker.exec.workspace_root {} becomes {root}, for every profile",
                    old.display()
                ));
            }
            text = yaml_edit::set_value(
                &text,
                &["broker", "exec", "workspace_root"],
                &quoted(&root),
            )
            .map_err(|e| {
                format!("{e}; add `workspace_root: {root}` under broker.exec yourself, then import again")
            })?;
        }
    }
    Ok(text)
}

fn renames(items: &[String]) -> Result<BTreeMap<String, String>, String> {
    items
        .iter()
        .map(|r| match r.split_once('=') {
            Some((old, new)) if !old.is_empty() && !new.is_empty() => {
                Ok((old.to_string(), new.to_string()))
            }
            _ => Err(format!("--rename takes OLD=NEW, not {r:?}")),
        })
        .collect()
}

/// The exec broker's file as asked for (the argument, else `MCP_EXEC_CONFIG`), read, with the
/// flags checked against it: its absolute path and contents.
fn source_file(
    a: &ConfigImportArgs,
) -> Result<(PathBuf, ExecConfig, BTreeMap<String, String>), ExitCode> {
    let Some(file) = a
        .file
        .clone()
        .or_else(|| std::env::var_os(mcpb_config::env::EXEC_CONFIG).map(PathBuf::from))
    else {
        return Err(fail(
            "mcp-broker: no exec broker config given",
            &["`mcp-broker config import FILE`, or set MCP_EXEC_CONFIG to its path"],
        ));
    };
    let file = std::path::absolute(&file).unwrap_or(file);
    let cfg = read(&file).map_err(|e| {
        fail(
            &format!("mcp-broker: {e}"),
            &[
                "its keys: workspace_root, defaults, targets [{name, command, args, cwd, env, tags, tools_allow}]",
            ],
        )
    })?;
    if let Err(e) = mcpb_config::resolve::check_name(&a.profile) {
        return Err(fail(
            &format!("mcp-broker: --profile {}: {e}", word(&a.profile)),
            &["letters, digits, '-' and '_'"],
        ));
    }
    let renames = renames(&a.rename).map_err(|e| fail(&format!("mcp-broker: {e}"), &[]))?;
    let names: Vec<&str> = cfg.targets.iter().map(|t| t.name.as_str()).collect();
    if let Some(unknown) = renames
        .keys()
        .chain(&a.skip)
        .find(|n| !names.contains(&n.as_str()))
    {
        return Err(fail(
            &format!("mcp-broker: the file has no target named {unknown}"),
            &[&format!("its targets: {}", names.join(", "))],
        ));
    }
    Ok((file, cfg, renames))
}

/// `mcp-broker config import FILE`: the exec broker's file as a source of the import pipeline.
pub(crate) fn run(settings: &Settings, a: &ConfigImportArgs, explicit: Option<&Path>) -> ExitCode {
    let (file, cfg, renames) = match source_file(a) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
    let (config_path, before) = match file_to_edit(explicit) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let base = match validate(&config_path, &before) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let mut x = plan_targets(&cfg, a, &renames, &base, &dir);
    x.notes.extend(over_ceilings(&cfg, &base));
    let after = match edited(&before, a, &cfg, &mut x, &base, &file, &dir) {
        Ok(t) => t,
        Err(e) => return fail(&format!("mcp-broker: {e}"), &["nothing was written"]),
    };
    let rows = std::mem::take(&mut x.rows);
    let files = Files::default();
    let change = Change {
        settings,
        plan: &x.plan,
        config_path: &config_path,
        config_before: &before,
        config_after: &after,
        files: &files,
        note_file: Change::note_path(settings, "config-import"),
        source: source(&file),
    };
    if !a.apply {
        change.print_diffs(&[]);
    }
    out!(
        "{}",
        crate::commands::render::table(&["TARGET", "BECOMES"], rows)
    );
    for n in &x.notes {
        outln!("note: {n}");
    }
    change.say_secrets();
    crate::commands::client::import::report::say_variables(&x.plan, "the exec broker's config");
    if x.refused {
        return fail(
            "mcp-broker: a target cannot be imported as it is (see the table); nothing was written",
            &["fix it in the file, --rename it, or leave it out with --skip NAME"],
        );
    }
    let Ok(settings_after) = validate(&config_path, &after) else {
        return ExitCode::FAILURE;
    };
    if !a.apply {
        let new: Vec<String> = x.plan.upstreams.iter().map(|u| u.name.clone()).collect();
        for line in crate::commands::sandbox::sandbox_grants(&settings_after, Some(&new)) {
            outln!("{line}");
        }
    }
    finish(&change, a, &file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(read_only: bool) -> ConfigImportArgs {
        ConfigImportArgs {
            file: None,
            profile: "eb".into(),
            rename: vec![],
            skip: vec![],
            read_only,
            no_sandbox: false,
            apply: false,
        }
    }

    #[test]
    fn a_read_only_profile_allows_only_the_tools_a_target_lists() {
        let cfg: ExecConfig = serde_json::from_value(serde_json::json!({
            "defaults": {"max_calls": 3},
            "targets": [{"name": "gh", "command": "x", "tools_allow": ["create_issue"]}]
        }))
        .unwrap();
        let x = Import {
            rows: vec![],
            plan: Plan::default(),
            upstreams: vec!["gh".into()],
            listed: vec!["gh.create_issue".into()],
            refused: false,
            notes: vec![],
        };
        let ro = profile_entry(&args(true), &cfg, &x, Path::new("/e.json")).join("\n");
        assert!(ro.contains("allow_mutating_upstreams: false"), "{ro}");
        assert!(
            ro.contains("mutating_allowlist: [\"gh.create_issue\"]"),
            "{ro}"
        );
        assert!(ro.contains("limits: {max_calls: 3}"), "{ro}");
        let rw = profile_entry(&args(false), &cfg, &x, Path::new("/e.json")).join("\n");
        assert!(
            rw.contains("allow_mutating_upstreams: true") && !rw.contains("mutating_allowlist")
        );
        assert_eq!(NameFilter::exact("a*[b]"), "a[*][[]b[]]");
    }
}
