//! `mcp-broker pins list|approve`: the approved tool definitions, what is quarantined and why,
//! and what the description scan found. Works on the files under state/ (the cached tool lists
//! and the pin store), so it needs no running upstream; a running daemon is told to re-read.

use std::process::ExitCode;

use mcpb_catalog::{ListStore, Pins, Quarantine};
use mcpb_config::Settings;
use serde_json::{Value, json};

use mcpb_protocol::AdminCommand;

use crate::cli::PinsCommand;
use crate::daemon_client::admin;
use crate::{fail, printable};

fn open(settings: &Settings) -> Pins {
    Pins::open(settings.runtime.pins_path(), settings.pins.into())
}

struct Row {
    upstream: String,
    tool: mcpb_protocol::Tool,
    verdict: Option<Quarantine>,
    findings: Vec<mcpb_catalog::Finding>,
    /// A person rejected this definition (`pins reject`).
    rejected: bool,
}

fn rows(settings: &Settings, pins: &mut Pins) -> Vec<Row> {
    let store = ListStore::new(settings.runtime.catalog_dir());
    let lists: Vec<_> = settings
        .upstreams
        .keys()
        .filter_map(|name| store.load(name).ok().flatten())
        .collect();
    let mut out = Vec::new();
    for list in &lists {
        let others: Vec<&str> = lists
            .iter()
            .filter(|l| l.upstream != list.upstream)
            .flat_map(|l| l.tools.iter().map(mcpb_protocol::Tool::name))
            .collect();
        let scanned = mcpb_catalog::scan::scan_list(&list.tools, &others);
        let judged = pins.judge_scanned(
            &list.upstream,
            &list.tools,
            scanned,
            mcpb_config::unix_now(),
        );
        for ((tool, verdict), findings) in
            list.tools.iter().zip(judged.verdicts).zip(judged.findings)
        {
            out.push(Row {
                upstream: list.upstream.clone(),
                rejected: verdict.is_some() && pins.rejected(&list.upstream, tool),
                tool: tool.clone(),
                verdict,
                findings,
            });
        }
    }
    out
}

fn name(r: &Row) -> String {
    mcpb_policy::dotted(&r.upstream, r.tool.name())
}

/// What changed in a quarantined tool's definition since the one approved before it (all of
/// it for a new tool).
fn diff(pins: &Pins, r: &Row) -> Option<String> {
    let q = r.verdict.as_ref()?;
    let before = match q {
        Quarantine::Changed => pins.pins(&r.upstream).and_then(|p| p.get(r.tool.name())),
        Quarantine::Renamed { from } => pins.pins(&r.upstream).and_then(|p| p.get(from)),
        Quarantine::New
        | Quarantine::AwaitingApproval
        | Quarantine::Flagged
        | Quarantine::StoreUnreadable { .. } => None,
    }
    .and_then(|p| serde_json::from_str(p.definition.get()).ok())
    .unwrap_or(Value::Null);
    Some(mcpb_catalog::pins::diff(&before, &r.tool.to_value()))
}

/// One line in the audit log for a person's verdict, `event` being `pins.approve` or
/// `pins.reject` (the daemon writes the calls' lines; this one is appended whole in one
/// write, so it never lands inside one of theirs).
fn audit_verdict(settings: &Settings, event: &str, tool: &str, verdict: &Quarantine, by: &str) {
    if !settings.broker.audit.enabled {
        return;
    }
    let line = json!({
        "ts": humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        "event": event,
        "tool": tool,
        "verdict": verdict.to_string(),
        "by": by,
    });
    let path = settings.runtime.audit_path();
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            std::os::unix::fs::OpenOptionsExt::mode(
                std::fs::OpenOptions::new().create(true).append(true),
                0o600,
            )
            .open(&path)
        })
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()));
    if let Err(e) = written {
        errln!(
            "mcp-broker: warning: {event} of {tool} is not in the audit log ({}): {e}",
            path.display()
        );
    }
}

pub(crate) fn list(settings: &Settings, json_out: bool) -> ExitCode {
    let mut pins = open(settings);
    let rows = rows(settings, &mut pins);
    if json_out {
        let items: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({"tool": name(r), "quarantine": r.verdict,
                    "why": r.verdict.as_ref().map(ToString::to_string), "rejected": r.rejected,
                    "hash": mcpb_catalog::pins::definition_hash(&r.tool),
                    "findings": r.findings, "diff": diff(&pins, r)})
            })
            .collect();
        outln!(
            "{:#}",
            json!({"pin_store_error": pins.error(), "tools": items})
        );
        return ExitCode::SUCCESS;
    }
    if let Some(e) = pins.error() {
        errln!("mcp-broker: the pin store is unreadable, every tool is quarantined: {e}");
        errln!("hint: fix the file, or start over with `mcp-broker pins approve --all --reset`");
    }
    if rows.is_empty() {
        outln!("no tool lists cached yet; they appear once an upstream has been listed");
    }
    for r in &rows {
        let state = match &r.verdict {
            None => "approved".to_string(),
            Some(q) if r.rejected => format!("QUARANTINED ({q}; rejected)"),
            Some(q) => format!("QUARANTINED ({q})"),
        };
        outln!("{}  {state}", printable(&name(r)));
        for f in &r.findings {
            outln!("    {}", finding_line(f));
        }
    }
    ExitCode::SUCCESS
}

/// One finding as `pins list` and `pins approve` print it: a note says it holds nothing.
fn finding_line(f: &mcpb_catalog::Finding) -> String {
    let what = match f.severity {
        mcpb_catalog::Severity::Quarantine => "finding",
        mcpb_catalog::Severity::Note => "note",
    };
    format!("{what}: {}: {}", f.kind, printable(&f.detail))
}

/// Whether the person at the terminal approves a tool whose description has findings; with
/// no terminal to ask, only `--yes` approves it.
fn confirmed(tool: &str, yes: bool) -> bool {
    if yes {
        return true;
    }
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        errln!("mcp-broker: {tool} has findings; not approved without a person to confirm");
        errln!("hint: read them above, then run again with --yes to approve it anyway");
        return false;
    }
    err!("approve {tool} despite its findings? [y/N] ");
    let mut answer = String::new();
    let _ = std::io::stdin().read_line(&mut answer);
    matches!(answer.trim(), "y" | "Y" | "yes")
}

/// An unreadable pin store, with --reset: moved aside (kept), a new one begun.
fn reset_unreadable(settings: &Settings, pins: &mut Pins, reset: bool) -> Result<(), ExitCode> {
    let Some(e) = pins.error() else {
        return Ok(());
    };
    if !reset {
        return Err(fail(
            &format!("mcp-broker: the pin store is unreadable: {e}"),
            &[
                "repair the file, or pass --reset to start a new store (the old one is kept beside it)",
            ],
        ));
    }
    let old = settings.runtime.pins_path();
    let aside = old.with_extension(format!("json.unreadable-{}", mcpb_config::unix_now()));
    if old.exists()
        && let Err(e) = std::fs::rename(&old, &aside)
    {
        return Err(fail(
            &format!("mcp-broker: cannot move {} aside: {e}", old.display()),
            &[],
        ));
    }
    if aside.exists() {
        errln!(
            "mcp-broker: unreadable pin store moved to {}",
            aside.display()
        );
    }
    pins.reset();
    Ok(())
}

/// How `pins approve` is to go: which tools, asked how, by whom.
pub(crate) struct Approval<'a> {
    pub names: &'a [String],
    pub all: bool,
    pub reset: bool,
    pub yes: bool,
    pub by: &'a str,
    pub expect_hash: Option<&'a str>,
}

/// One quarantined tool shown, then approved, unless its definition changed since it was
/// shown or a person said no to its findings: `None` when declined.
fn approve_one(pins: &mut Pins, r: &Row, q: &Quarantine, x: &Approval<'_>) -> Option<()> {
    let n = name(r);
    outln!("approving {} ({q})", printable(&n));
    out!("{}", printable(&diff(pins, r).unwrap_or_default()));
    for f in &r.findings {
        outln!("    {}", finding_line(f));
    }
    let now = mcpb_catalog::pins::definition_hash(&r.tool);
    if let Some(want) = x.expect_hash
        && now.as_deref() != Some(want)
    {
        errln!(
            "mcp-broker: {} changed since it was shown; not approved",
            printable(&n)
        );
        errln!("hint: look at it again (`mcp-broker pins list`), then approve what you see");
        return None;
    }
    if mcpb_catalog::scan::holds(&r.findings) && !confirmed(&printable(&n), x.yes) {
        return None;
    }
    let from = match q {
        Quarantine::Renamed { from } => Some(from.as_str()),
        Quarantine::Changed
        | Quarantine::New
        | Quarantine::AwaitingApproval
        | Quarantine::Flagged
        | Quarantine::StoreUnreadable { .. } => None,
    };
    pins.approve(&r.upstream, &r.tool, from, mcpb_config::unix_now());
    Some(())
}

/// `mcp-broker pins approve NAME…|--all`.
pub(crate) fn approve(settings: &Settings, x: &Approval<'_>) -> ExitCode {
    let mut pins = open(settings);
    if let Err(code) = reset_unreadable(settings, &mut pins, x.reset) {
        return code;
    }
    if x.names.is_empty() && !x.all {
        return fail(
            "mcp-broker: name the tools to approve, or pass --all",
            &["`mcp-broker pins list` shows what is quarantined"],
        );
    }
    let rows = rows(settings, &mut pins);
    let mut declined = 0;
    let mut approved_now = Vec::new();
    for r in &rows {
        let Some(q) = &r.verdict else { continue };
        let n = name(r);
        if !x.all && !x.names.contains(&n) {
            continue;
        }
        match approve_one(&mut pins, r, q, x) {
            Some(()) => approved_now.push((n, q.clone())),
            None => declined += 1,
        }
    }
    // Approving what is approved already is done, not an error.
    for n in x.names {
        if rows.iter().any(|r| &name(r) == n && r.verdict.is_none()) {
            errln!("mcp-broker: {} is approved already", printable(n));
        }
    }
    let unknown: Vec<&str> = x
        .names
        .iter()
        .filter(|n| !rows.iter().any(|r| &name(r) == *n))
        .map(String::as_str)
        .collect();
    // A reset store is written even when nothing was quarantined: first contact approved it.
    let dirty = !approved_now.is_empty() || x.reset;
    if dirty && let Err(e) = pins.save() {
        return fail(&format!("mcp-broker: cannot save the pin store: {e}"), &[]);
    }
    for (tool, verdict) in &approved_now {
        audit_verdict(settings, "pins.approve", tool, verdict, x.by);
    }
    if dirty && matches!(admin(settings, AdminCommand::PinsReload), Ok(Some(_))) {
        errln!("mcp-broker: the running daemon picked up the approvals");
    }
    outln!("{} tool(s) approved", approved_now.len());
    if declined > 0 {
        return ExitCode::FAILURE;
    }
    if !unknown.is_empty() {
        return fail(
            &format!(
                "mcp-broker: not quarantined or not known: {}",
                unknown.join(", ")
            ),
            &["names are <upstream>.<tool>; `mcp-broker pins list` shows the cached ones"],
        );
    }
    ExitCode::SUCCESS
}

/// `pins reject`: a person looked at these quarantined definitions and said no. They stay
/// hidden and uncallable (as they were), and are no longer put to anyone, until the upstream
/// changes them again.
pub(crate) fn reject(settings: &Settings, names: &[String], by: &str) -> ExitCode {
    let mut pins = open(settings);
    if let Some(e) = pins.error() {
        return fail(
            &format!("mcp-broker: the pin store is unreadable: {e}"),
            &["repair the file, or start a new store with `mcp-broker pins approve --all --reset`"],
        );
    }
    if names.is_empty() {
        return fail(
            "mcp-broker: name the tools to reject",
            &["`mcp-broker pins list` shows what is quarantined"],
        );
    }
    let rows = rows(settings, &mut pins);
    let mut rejected = Vec::new();
    let mut refused = Vec::new();
    for n in names {
        match rows.iter().find(|r| &name(r) == n) {
            Some(r) => match &r.verdict {
                Some(q) if pins.reject(&r.upstream, &r.tool, mcpb_config::unix_now()) => {
                    rejected.push((n.clone(), q.clone()));
                }
                _ => refused.push(format!("{} is approved, not quarantined", printable(n))),
            },
            None => refused.push(format!("{} is not a cached tool", printable(n))),
        }
    }
    if !rejected.is_empty() {
        if let Err(e) = pins.save() {
            return fail(&format!("mcp-broker: cannot save the pin store: {e}"), &[]);
        }
        for (tool, verdict) in &rejected {
            audit_verdict(settings, "pins.reject", tool, verdict, by);
        }
    }
    outln!(
        "{} tool(s) rejected: they stay hidden until their definition changes",
        rejected.len()
    );
    if !refused.is_empty() {
        return fail(
            &format!("mcp-broker: {}", refused.join("; ")),
            &["names are <upstream>.<tool>; `mcp-broker pins list` shows the quarantined ones"],
        );
    }
    ExitCode::SUCCESS
}

/// `mcp-broker pins …`.
pub(crate) fn run(s: &Settings, command: PinsCommand) -> ExitCode {
    match command {
        PinsCommand::List { json } => list(s, json),
        PinsCommand::Approve {
            names,
            all,
            reset,
            yes,
            by,
            expect_hash,
        } => approve(
            s,
            &Approval {
                names: &names,
                all,
                reset,
                yes,
                by: &by,
                expect_hash: expect_hash.as_deref(),
            },
        ),
        PinsCommand::Reject { names, by } => reject(s, &names, &by),
    }
}
