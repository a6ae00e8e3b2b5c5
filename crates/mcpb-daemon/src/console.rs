//! The daemon's side of the web console (`mcpb-console`): started by the admin `console`
//! command, not before, so a daemon nobody opens the console of pays nothing for it; and the
//! answers its pages are built from. Its actions are the CLI's: approvals and measurements
//! run `mcp-broker` itself, upstream starts and stops are the admin commands' code.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use mcpb_console::{Outcome, Series, ToolRow, UpstreamAction};
use serde_json::Value;
use tokio::sync::watch;

use crate::broker::Broker;

/// A session id no client gets: instances the console's searches start for themselves.
const CONSOLE_SESSION: u64 = u64::MAX - 1;
/// Rows the Tools page shows for a query.
const SEARCH_ROWS: usize = 50;

pub(crate) struct ConsoleBackend {
    broker: Arc<Broker>,
}

/// The console's address, starting it the first time (or again, when its settings changed).
pub(crate) fn open(
    broker: &Arc<Broker>,
    shutdown: watch::Receiver<bool>,
) -> Result<String, String> {
    let settings = broker.config().settings.console.clone();
    if !settings.enabled {
        return Err("the console is off (console.enabled: false)".into());
    }
    let mut slot = broker.console.lock();
    if let Some(running) = slot.as_ref() {
        return Ok(running.url.clone());
    }
    let backend = Arc::new(ConsoleBackend {
        broker: broker.clone(),
    });
    let (stop, stopped) = watch::channel(false);
    let stop = Arc::new(stop);
    let started =
        mcpb_console::start(&settings.listen, backend, stopped).map_err(|e| e.to_string())?;
    tokio::spawn(started.serve);
    // The daemon's stop is the console's too.
    let (to_stop, mut daemon) = (stop.clone(), shutdown);
    tokio::spawn(async move {
        let _ = daemon.wait_for(|s| *s).await;
        to_stop.send_replace(true);
    });
    tracing::info!(listen = %started.bound, "console started");
    *slot = Some(crate::broker::ConsoleSlot {
        url: started.url.clone(),
        settings,
        stop,
    });
    Ok(started.url)
}

/// After a reload: a console whose settings changed (turned off, another address) stops;
/// `mcp-broker console` starts it again, with a new key, where the new settings say.
pub(crate) fn reloaded(broker: &Broker) {
    let settings = &broker.config().settings.console;
    let mut slot = broker.console.lock();
    if slot.as_ref().is_some_and(|r| r.settings != *settings)
        && let Some(running) = slot.take()
    {
        running.stop.send_replace(true);
        tracing::info!("console stopped: its settings changed");
    }
}

/// `mcp-broker upstream <action> <name>`.
pub(crate) async fn upstream_action(
    broker: &Arc<Broker>,
    name: &str,
    action: UpstreamAction,
) -> Outcome {
    let Some(up) = broker
        .all_upstreams()
        .into_iter()
        .find(|u| u.name() == name)
    else {
        let known: Vec<String> = broker.config().upstreams.keys().cloned().collect();
        return Outcome {
            ok: false,
            text: format!(
                "unknown upstream '{name}'\nhint: known upstreams: {}",
                known.join(", ")
            ),
        };
    };
    if matches!(action, UpstreamAction::Stop | UpstreamAction::Restart) {
        up.stop().await;
        if action == UpstreamAction::Stop {
            return Outcome {
                ok: true,
                text: format!("stopped {name}; it starts again on its next call"),
            };
        }
    }
    if up.settings().lifecycle != mcpb_config::Lifecycle::Shared {
        return Outcome {
            ok: true,
            text: format!(
                "{name} runs a process per {}; it starts with the next one",
                if up.settings().lifecycle == mcpb_config::Lifecycle::PerCall {
                    "call"
                } else {
                    "session"
                }
            ),
        };
    }
    match up.start_now().await {
        Ok(tools) => {
            broker
                .known
                .observe(name, &tools, &crate::known::listing_key(up.settings()));
            broker.registry.list_changed(name);
            Outcome {
                ok: true,
                text: format!("{name} is running with {} tools", tools.len()),
            }
        }
        Err(e) => Outcome {
            ok: false,
            text: format!("{name} did not start: {e}"),
        },
    }
}

impl ConsoleBackend {
    /// The visible tools of a profile, by the upstream's own name, for "seen by": from the
    /// known lists, without building the profile's search index (a few MiB each).
    async fn seen(&self, profile: mcpb_config::ProfileSettings) -> BTreeSet<(String, String)> {
        let view = self.broker.view(Arc::new(profile), CONSOLE_SESSION);
        view.tools()
            .await
            .iter()
            .map(|t| (t.upstream.name().to_string(), t.tool_name().to_string()))
            .collect()
    }

    fn release(&self) {
        for up in self.broker.all_upstreams() {
            tokio::spawn(async move {
                up.release_session(CONSOLE_SESSION).await;
            });
        }
    }
}

impl mcpb_console::Backend for ConsoleBackend {
    fn status(&self) -> Value {
        serde_json::to_value(crate::report::status(&self.broker)).unwrap_or(Value::Null)
    }

    fn profiles(&self) -> Vec<(String, Vec<String>)> {
        let config = self.broker.config();
        let mut by_profile: BTreeMap<String, Vec<String>> = config
            .settings
            .profiles
            .keys()
            .map(|p| (p.clone(), Vec::new()))
            .collect();
        // A client's entry names its profile once it was imported (`--profile`), which wins
        // over the `clients:` mapping: the import's record says which.
        let imports = config.settings.runtime.state_dir().join("imports");
        let mut imported: BTreeMap<String, String> = BTreeMap::new();
        for e in std::fs::read_dir(&imports).into_iter().flatten().flatten() {
            let path = e.path();
            let Some(client) = path.file_stem().and_then(|c| c.to_str()) else {
                continue;
            };
            let record: Option<serde_json::Value> = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok());
            if let Some(p) = record.as_ref().and_then(|r| r["profile"].as_str()) {
                imported.insert(client.to_string(), p.to_string());
            }
        }
        let clients = config
            .settings
            .clients
            .iter()
            .filter(|(c, _)| !imported.contains_key(*c))
            .chain(&imported);
        for (client, profile) in clients {
            if let Some(list) = by_profile.get_mut(profile) {
                list.push(client.clone());
            }
        }
        by_profile.into_iter().collect()
    }

    async fn tools(&self, profile: &str, query: &str) -> Result<Vec<ToolRow>, String> {
        let Some(settings) = self.broker.profile(profile) else {
            return Err(format!("unknown profile '{profile}'"));
        };
        let view = self.broker.view(Arc::new(settings), CONSOLE_SESSION);
        // The whole list needs no index; a query is ranked by the one `broker.search_tools`
        // builds for this profile (and keeps for its clients' searches).
        let tools: Vec<crate::view::VisibleTool> = if query.trim().is_empty() {
            view.tools().await
        } else {
            let index = view.search_index().await;
            crate::tools::search_tools::ranked(view.handles().1, &index, query, SEARCH_ROWS, None)
                .await
                .into_iter()
                .filter_map(|i| index.tools.get(i).cloned())
                .collect()
        };
        let mut seen_by = Vec::new();
        for name in self.broker.config().settings.profiles.keys() {
            if let Some(p) = self.broker.profile(name) {
                seen_by.push((name.clone(), self.seen(p).await));
            }
        }
        self.release();
        Ok(tools
            .iter()
            .map(|t| {
                let key = (t.upstream.name().to_string(), t.tool_name().to_string());
                let def = t.definition().to_value();
                ToolRow {
                    name: t.exposed.clone(),
                    server: t.upstream.name().to_string(),
                    description: crate::tools::search_tools::one_line(
                        def.get("description").and_then(Value::as_str).unwrap_or(""),
                    ),
                    mutating: t.mutating,
                    profiles: seen_by
                        .iter()
                        .filter(|(_, seen)| seen.contains(&key))
                        .map(|(p, _)| p.clone())
                        .collect(),
                }
            })
            .collect())
    }

    async fn tool(&self, profile: &str, name: &str) -> Option<Value> {
        let settings = self.broker.profile(profile)?;
        let view = self.broker.view(Arc::new(settings), CONSOLE_SESSION);
        let tools = view.tools().await;
        self.release();
        tools
            .iter()
            .find(|t| t.exposed == name)
            .map(|t| t.definition().to_value())
    }

    async fn upstream(&self, name: &str, action: UpstreamAction) -> Outcome {
        upstream_action(&self.broker, name, action).await
    }

    fn cli(&self) -> tokio::process::Command {
        // This very binary, even after an upgrade replaced the file (or removed it): the CLI
        // that acts for the console is the daemon's own version.
        let mut cmd = tokio::process::Command::new("/proc/self/exe");
        if let mcpb_config::ConfigSource::File(path) = &self.broker.config().settings.source {
            cmd.arg("--config").arg(path);
        }
        cmd.env("NO_COLOR", "1");
        cmd
    }

    fn audit_log(&self) -> Option<std::path::PathBuf> {
        let settings = &self.broker.config().settings;
        settings
            .broker
            .audit
            .enabled
            .then(|| settings.runtime.audit_path())
    }

    fn live(&self) -> tokio::sync::broadcast::Receiver<Arc<str>> {
        self.broker.calls.watch()
    }

    fn series(&self) -> Vec<Series> {
        let config = self.broker.config();
        self.broker.calls.series(
            config.upstreams.keys().map(String::as_str),
            mcpb_config::unix_now(),
        )
    }
}
