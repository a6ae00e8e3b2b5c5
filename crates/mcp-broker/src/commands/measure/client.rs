//! `mcp-broker measure --client C` (and `--all-clients`): what a client loads into its model's
//! context before and after it moved onto the broker. Before: its config files as the newest
//! backup kept them (the current files when none was taken), each server started as the
//! client starts it and listed. After: the broker's entry (its profile's exposed list) plus the
//! servers the client still starts itself. Codex's cached hosted `codex_apps` tools count on
//! both sides when present, each side as its config.toml's `[apps]` tables show them (see
//! `client codex-apps`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpb_clients::{Backups, Client, Place, Server};
use mcpb_config::Settings;
use mcpb_protocol::AdminCommand;
use serde_json::{Value, json};

use crate::commands::client::apps;
use crate::commands::client::import::parity::list_definitions;
use crate::commands::measure::{Size, reduction, size};
use crate::daemon_client::{admin_about, connect_or_start_for_cli};
use crate::fail;

/// One side of the comparison.
#[derive(Default)]
struct Side {
    entries: usize,
    tools: Vec<Value>,
    apps: Vec<Value>,
    /// Per server: (label, tools, or why it was not counted).
    servers: Vec<(String, Result<usize, String>)>,
}

/// The servers a file held at `place`, as the client starts them (not switched off).
fn started(place: &Place, text: &str) -> Vec<Server> {
    mcpb_clients::servers(place, text)
        .unwrap_or_default()
        .into_iter()
        .filter(|s| !s.disabled)
        .collect()
}

/// The text of `path` before the client moved onto the broker: its newest backup without the
/// broker's entry (a later edit of the broker's, such as Codex's apps allowlist, was backed up
/// with the entry in), else its newest; `None` when the broker never took one (`Some("")`
/// when the file did not exist then).
fn before_broker(settings: &Settings, client: Client, path: &Path) -> Option<String> {
    let b = Backups::new(&settings.runtime.backups_dir(), client, path);
    let texts: Vec<String> = b
        .list()
        .iter()
        .map(|k| {
            b.bytes(&k.name)
                .map(|x| String::from_utf8_lossy(&x).into_owned())
                .unwrap_or_default()
        })
        .collect();
    let without_entry = texts.iter().rev().find(|t| {
        mcpb_clients::current_entry(client, path, t)
            .ok()
            .flatten()
            .is_none()
    });
    without_entry.or(texts.last()).cloned()
}

/// What the daemon lists for each upstream of the measured profile, by upstream name: how a
/// remote server is listed (over its transport, by the daemon) on both sides.
type Remote = std::collections::BTreeMap<String, Vec<Value>>;

/// A remote server's tools as its client shows them, from the daemon's listing of the
/// upstream with its URL; why not, when there is none.
fn remote_tools(settings: &Settings, remote: &Remote, s: &Server) -> Result<Vec<Value>, String> {
    let url = s.url.as_deref().unwrap_or_default();
    let up = settings
        .upstreams
        .values()
        .find(|u| u.url.as_deref() == Some(url))
        .ok_or("a remote server the broker has no upstream for: not counted on either side")?;
    let tools = remote.get(&up.name).ok_or_else(|| {
        format!(
            "a remote server (upstream {}) outside the measured profile: not counted on either side",
            up.name
        )
    })?;
    Ok(tools
        .iter()
        .filter(|t| {
            let n = t["name"].as_str().unwrap_or_default().to_string();
            (s.tools_allow.is_empty() || s.tools_allow.contains(&n)) && !s.tools_deny.contains(&n)
        })
        .cloned()
        .collect())
}

/// Lists every server (side by side: each may take a while to start) into `side`; a remote
/// one as the daemon lists its upstream (`remote`).
fn list_into(side: &mut Side, servers: &[(String, Server)], settings: &Settings, remote: &Remote) {
    let results: Vec<Result<Vec<Value>, String>> = std::thread::scope(|sc| {
        let handles: Vec<_> = servers
            .iter()
            .map(|(_, s)| {
                sc.spawn(move || match &s.command {
                    Some(_) => list_definitions(s),
                    None => remote_tools(settings, remote, s),
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("the lister failed".into())))
            .collect()
    });
    for ((label, _), r) in servers.iter().zip(results) {
        side.servers.push((
            label.clone(),
            r.as_ref().map(Vec::len).map_err(Clone::clone),
        ));
        if let Ok(tools) = r {
            side.tools.extend(tools);
        }
    }
}

/// Codex's cached hosted-app tools its config.toml shows the model, before (the newest
/// backup's config) and now; an apps allowlist (`client codex-apps`) shows on the after side.
fn codex_apps(settings: &Settings, home: &Path, cwd: &Path) -> (Vec<Value>, Vec<Value>) {
    let tools = mcpb_clients::apps::cached_tools(&apps::codex_home(home));
    if tools.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let path = Client::Codex.config_path(mcpb_clients::Scope::User, home, cwd);
    let now = std::fs::read_to_string(&path).unwrap_or_default();
    let then = before_broker(settings, Client::Codex, &path).unwrap_or_else(|| now.clone());
    let defs = |config: &str| {
        mcpb_clients::apps::shown(config, &tools)
            .into_iter()
            .map(|t| t.definition)
            .collect()
    };
    (defs(&then), defs(&now))
}

/// The profile's exposed list, and each of its upstreams' own lists, from the daemon.
fn exposed(settings: &Settings, profile: &str) -> Result<(Vec<Value>, Remote), String> {
    connect_or_start_for_cli(settings).map_err(|e| format!("cannot reach the daemon: {e:#}"))?;
    let reply = admin_about(settings, AdminCommand::Measure, Some(profile))
        .map_err(|e| format!("{e:#}"))?
        .ok_or("the daemon stopped before answering")?;
    if !reply.ok {
        return Err(reply.error.unwrap_or_default());
    }
    let data = reply.data.unwrap_or(Value::Null);
    if let Some(e) = data["exposed"]["error"].as_str() {
        return Err(format!("the profile's own list failed: {e}"));
    }
    let lists = data["upstreams"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|u| {
            let tools = u["tools"].as_array()?.clone();
            Some((u["name"].as_str()?.to_string(), tools))
        })
        .collect();
    Ok((
        data["exposed"]["tools"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
        lists,
    ))
}

/// One client's two sides, or `None` when it has nothing to measure here.
struct Measured {
    profile: Option<String>,
    before: Side,
    after: Side,
    notes: Vec<String>,
}

/// `Err(None)`: the failure was said already (a client file that cannot be read).
fn measure_one(
    settings: &Settings,
    client: Client,
    home: &Path,
    cwd: &Path,
) -> Result<Option<Measured>, Option<String>> {
    // Every project's server counts as the client starts it, unless the client's own state
    // says it does not (an editor's trust, which the broker cannot read, is taken as given).
    let scan = crate::commands::client::import::scan::scan(client, home, cwd, &[], false, true)
        .map_err(|_| None)?;
    let switched_off = |place: &Place, name: &str| {
        scan.found
            .iter()
            .any(|(p, s, why)| p == place && s.name == name && why.is_some())
    };
    // The client's literal credentials are secrets like the config's: a server started to be
    // measured may say one in its error, and the CLI redacts like the daemon.
    for v in &scan.mask {
        mcpb_redact::register(v);
    }
    let mut notes = Vec::new();
    let mut before_servers = Vec::new();
    let mut after_servers = Vec::new();
    let mut has_entry = false;
    let mut backed_up = false;
    let mut seen = std::collections::BTreeSet::new();
    for place in &scan.places {
        if !seen.insert((place.path.clone(), place.folder.clone())) {
            continue;
        }
        let now = scan.before[&place.path].clone().unwrap_or_default();
        has_entry |= mcpb_clients::current_entry(client, &place.path, &now)
            .ok()
            .flatten()
            .is_some();
        let then = match before_broker(settings, client, &place.path) {
            Some(t) => {
                backed_up = true;
                t
            }
            None => now.clone(),
        };
        for s in started(place, &then) {
            before_servers.push((format!("{} ({})", s.name, place.label()), s));
        }
        for s in started(place, &now) {
            if switched_off(place, &s.name) {
                continue;
            }
            after_servers.push((format!("{} ({})", s.name, place.label()), s));
        }
    }
    let (apps_before, apps_after) = if client == Client::Codex {
        codex_apps(settings, home, cwd)
    } else {
        (Vec::new(), Vec::new())
    };
    if before_servers.is_empty() && !has_entry && apps_before.is_empty() {
        return Ok(None);
    }
    let profile = has_entry.then(|| {
        scan.entry_profile
            .clone()
            .or_else(|| settings.clients.get(client.name()).cloned())
            .unwrap_or_else(|| "default".into())
    });
    let (entry_tools, remote) = match &profile {
        Some(p) => exposed(settings, p).map_err(|e| Some(format!("profile {p}: {e}")))?,
        None => (Vec::new(), Remote::new()),
    };
    let mut before = Side {
        entries: before_servers.len(),
        ..Side::default()
    };
    list_into(&mut before, &before_servers, settings, &remote);
    let mut after = Side {
        entries: after_servers.len() + usize::from(has_entry),
        ..Side::default()
    };
    list_into(&mut after, &after_servers, settings, &remote);
    if let Some(p) = &profile {
        after
            .servers
            .push((format!("mcp-broker (profile {p})"), Ok(entry_tools.len())));
        after.tools.extend(entry_tools);
    } else {
        notes.push(format!(
            "{} has no broker entry yet: `mcp-broker client import --client {}` moves its servers",
            client.name(),
            client.name()
        ));
    }
    if has_entry && !backed_up {
        notes.push(
            "no backup of the client's files was found: before is their current state".into(),
        );
    }
    before.apps = apps_before;
    after.apps = apps_after;
    Ok(Some(Measured {
        profile,
        before,
        after,
        notes,
    }))
}

fn sizes(side: &Side, bpe: &tiktoken_rs::CoreBPE) -> (Size, Size) {
    let all: Vec<Value> = side.tools.iter().chain(&side.apps).cloned().collect();
    (size(&side.tools, bpe), size(&all, bpe))
}

/// The document's table for one client: rows of before / after / reduction.
fn rows(m: &Measured, bpe: &tiktoken_rs::CoreBPE) -> Vec<(String, usize, usize)> {
    let (b_mcp, b_all) = sizes(&m.before, bpe);
    let (a_mcp, a_all) = sizes(&m.after, bpe);
    let mut rows = vec![
        (
            "client config entries".to_string(),
            m.before.entries,
            m.after.entries,
        ),
        ("MCP tool definitions".into(), b_mcp.tools, a_mcp.tools),
    ];
    if !m.before.apps.is_empty() {
        rows.push((
            "hosted codex_apps tool definitions".into(),
            m.before.apps.len(),
            m.after.apps.len(),
        ));
    }
    rows.push((
        "always-loaded definitions in all".into(),
        b_all.tools,
        a_all.tools,
    ));
    rows.push(("serialized bytes".into(), b_all.bytes, a_all.bytes));
    rows.push(("o200k_base tokens".into(), b_all.tokens, a_all.tokens));
    rows
}

pub(crate) fn run(settings: &Settings, client: Option<&str>, json: bool) -> ExitCode {
    let clients: Vec<Client> = match client {
        Some(name) => match Client::parse(name) {
            Some(c) => vec![c],
            None => return fail(&format!("mcp-broker: no client named {name:?}"), &[]),
        },
        None => Client::ALL.to_vec(),
    };
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return fail(
            "mcp-broker: HOME is not set, so the clients' files cannot be found",
            &[],
        );
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let bpe = match crate::commands::measure::tokenizer() {
        Ok(b) => b,
        Err(code) => return code,
    };
    let mut all = Vec::new();
    for c in clients {
        match measure_one(settings, c, &home, &cwd) {
            Ok(Some(m)) => all.push((c, m)),
            Ok(None) if client.is_some() => {
                return fail(
                    &format!(
                        "mcp-broker: {} has no servers and no broker entry here",
                        c.name()
                    ),
                    &["`mcp-broker client status` shows each client's files"],
                );
            }
            Ok(None) => {}
            // One client's unreadable file does not hide the others.
            Err(e) if client.is_none() => {
                if let Some(e) = e {
                    errln!("mcp-broker: {}: {e}", c.name());
                }
            }
            Err(Some(e)) => return fail(&format!("mcp-broker: {e}"), &[]),
            Err(None) => return ExitCode::FAILURE,
        }
    }
    if json {
        let items: Vec<Value> = all
            .iter()
            .map(|(c, m)| {
                let rows: Vec<Value> = rows(m, &bpe)
                    .into_iter()
                    .map(|(k, b, a)| json!({"what": k, "before": b, "after": a}))
                    .collect();
                let servers = |s: &Side| -> Vec<Value> {
                    s.servers
                        .iter()
                        .map(|(n, r)| match r {
                            Ok(t) => json!({"server": n, "tools": t}),
                            Err(e) => json!({"server": n, "error": e}),
                        })
                        .collect()
                };
                json!({"client": c.name(), "profile": m.profile, "rows": rows,
                    "before": servers(&m.before), "after": servers(&m.after), "notes": m.notes})
            })
            .collect();
        let mut all = json!({"clients": items});
        mcpb_redact::redact_value(&mut all);
        outln!("{all:#}");
        return ExitCode::SUCCESS;
    }
    if all.is_empty() {
        errln!("mcp-broker: no client here has servers or a broker entry");
        return ExitCode::SUCCESS;
    }
    for (i, (c, m)) in all.iter().enumerate() {
        if i > 0 {
            outln!();
        }
        match &m.profile {
            Some(p) => outln!("{} (broker profile {p})", c.name()),
            None => outln!("{} (no broker entry)", c.name()),
        }
        let table: Vec<Vec<String>> = rows(m, &bpe)
            .into_iter()
            .map(|(k, b, a)| vec![k, b.to_string(), a.to_string(), reduction(b, a)])
            .collect();
        out!(
            "{}",
            crate::commands::render::table(&["", "BEFORE", "AFTER", "REDUCTION"], table)
        );
        for (side, s) in [("before", &m.before), ("after", &m.after)] {
            for (name, r) in &s.servers {
                match r {
                    Ok(n) => outln!("  {side}: {name}: {n} tools"),
                    Err(e) => outln!("  {side}: {name}: {}", mcpb_redact::redact(e)),
                }
            }
        }
        for n in &m.notes {
            errln!("note: {}", mcpb_redact::redact(n));
        }
    }
    ExitCode::SUCCESS
}
