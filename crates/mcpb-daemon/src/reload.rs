//! Reloading the configuration without a restart: the new file is checked whole, upstreams whose
//! settings did not change keep running (same processes), changed and removed ones are stopped
//! once their in-flight calls are done, and every session hears that the tool list may differ.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpb_config::{ResolveContext, Settings};
use mcpb_upstream::Upstream;
use serde::Serialize;

use crate::broker::Broker;
use crate::generation::Generation;

#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct ReloadReport {
    pub added: Vec<String>,
    pub restarted: Vec<String>,
    pub removed: Vec<String>,
    pub unchanged: Vec<String>,
    /// Broker settings that changed but are read once, when the daemon starts.
    pub need_restart: Vec<String>,
    /// Variables the new config refers to that the daemon's environment (the one it started
    /// with) does not have.
    pub missing_env: Vec<String>,
}

/// How long a retired upstream may finish its calls before it is stopped anyway.
const RETIRE_GRACE: Duration = Duration::from_secs(60);

pub(crate) fn reload(broker: &Arc<Broker>) -> Result<ReloadReport, String> {
    let current = broker.config();
    let ctx = ResolveContext::from_env();
    let next = mcpb_config::load(&current.settings.source, &ctx).map_err(|e| e.to_string())?;
    if next.runtime.root != current.settings.runtime.root {
        return Err(format!(
            "runtime.root changed from {} to {}; that needs a restart (`mcp-broker stop`, then start)",
            current.settings.runtime.root.display(),
            next.runtime.root.display()
        ));
    }
    let mut report = ReloadReport {
        need_restart: need_restart(&current.settings, &next),
        missing_env: next
            .daemon_env_names()
            .into_iter()
            .filter(|n| std::env::var_os(n).is_none())
            .collect(),
        ..ReloadReport::default()
    };
    let (upstreams, retire) = carry_over(broker, &current, &next, &mut report);
    let pins_changed = next.pins != current.settings.pins;
    let mode = next.pins;
    broker.swap_config(Generation::new(next, upstreams));
    crate::console::reloaded(broker);
    if pins_changed {
        broker.known.set_mode(mode);
        for up in broker.config().upstreams.keys() {
            broker.registry.list_changed(up);
        }
    }
    for old in retire {
        retire_later(broker, old);
    }
    broker.registry.all_lists_changed();
    *broker.config_warning.lock() = None;
    if let Err(e) = mcpb_config::last_good::remember_file(&broker.config().settings) {
        tracing::warn!(error = %e, "cannot keep a copy of the config file under state/");
    }
    tracing::info!(?report, "configuration reloaded");
    Ok(report)
}

/// The settings that changed but are read once, when the daemon starts.
fn need_restart(current: &Settings, next: &Settings) -> Vec<String> {
    let (was, now) = (&current.broker, &next.broker);
    let mut keys = Vec::new();
    // Settings read once, when the daemon starts (the upstream context, the connection pools,
    // the log and the drain take their copies then).
    macro_rules! read_at_start {
        ($($field:ident => $key:literal),* $(,)?) => { [$(($key, was.$field != now.$field)),*] };
    }
    for (key, changed) in read_at_start![
        env_passthrough => "broker.env_passthrough",
        max_frame_bytes => "broker.max_frame_bytes",
        max_processes => "broker.max_processes",
        max_tool_list_bytes => "broker.max_tool_list_bytes",
        max_tools_per_list => "broker.max_tools_per_list",
        forward_meta_keys => "broker.forward_meta_keys",
        log_max_bytes => "broker.log_max_bytes",
        max_clients => "broker.max_clients",
        shutdown_grace => "broker.shutdown_grace_ms",
        exec => "broker.exec",
        audit => "broker.audit",
    ] {
        if changed {
            keys.push(key.to_string());
        }
    }
    // The HTTP front binds and resolves its tokens once, at start.
    if current.http != next.http {
        keys.push("http".to_string());
    }
    keys
}

/// The next generation's upstreams: an unchanged one keeps running, a changed or new one is
/// made anew; gives them with the old ones to retire, each said in `report`.
fn carry_over(
    broker: &Broker,
    current: &Generation,
    next: &Settings,
    report: &mut ReloadReport,
) -> (BTreeMap<String, Arc<Upstream>>, Vec<Arc<Upstream>>) {
    let mut upstreams = BTreeMap::new();
    let mut retire: Vec<Arc<Upstream>> = Vec::new();
    for (name, settings) in &next.upstreams {
        match current.upstreams.get(name) {
            Some(old) if old.settings() == settings => {
                report.unchanged.push(name.clone());
                upstreams.insert(name.clone(), old.clone());
            }
            old => {
                if let Some(old) = old {
                    report.restarted.push(name.clone());
                    retire.push(old.clone());
                } else {
                    report.added.push(name.clone());
                }
                upstreams.insert(
                    name.clone(),
                    Arc::new(Upstream::new(settings.clone(), broker.ctx.clone())),
                );
            }
        }
    }
    for (name, old) in &current.upstreams {
        if !next.upstreams.contains_key(name) {
            report.removed.push(name.clone());
            retire.push(old.clone());
        }
    }
    (upstreams, retire)
}

/// Stops a retired upstream once its calls are done, or after `RETIRE_GRACE` anyway.
fn retire_later(broker: &Arc<Broker>, old: Arc<Upstream>) {
    broker.retired.lock().push(old.clone());
    let broker = broker.clone();
    tokio::spawn(async move {
        let deadline = Instant::now() + RETIRE_GRACE;
        while old.busy() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        old.stop().await;
        broker.retired.lock().retain(|u| !Arc::ptr_eq(u, &old));
    });
}
