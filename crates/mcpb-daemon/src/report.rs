//! What `status` reports: the daemon, each upstream, the catalog's quarantine and findings,
//! and the calls. Read by the admin `status` command and the web console; starts nothing.

use std::sync::atomic::Ordering;

use mcpb_upstream::UpstreamStatus;
use serde::Serialize;

use crate::broker::Broker;

#[derive(Debug, Clone, Serialize)]
pub(crate) struct DaemonStatus {
    pub pid: u32,
    pub version: String,
    pub started_at_unix: u64,
    pub uptime_ms: u64,
    pub socket: String,
    pub config: String,
    /// The daemon's log file.
    pub log: String,
    pub sessions: usize,
    /// Sessions waiting for a slot (`broker.max_clients` are served at once).
    pub waiting_sessions: usize,
    pub inflight_calls: usize,
    pub max_clients: usize,
    pub draining: bool,
    /// Which of the variables the config refers to are set in the daemon's environment:
    /// names only, never values (`doctor` checks references against these, not its shell).
    pub env_set: Vec<String>,
    /// Why the daemon serves the last valid copy of its config file, not the file itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_warning: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct StatusReport {
    pub daemon: DaemonStatus,
    pub upstreams: Vec<UpstreamStatus>,
    /// Quarantined tools and description findings, from the catalog (nothing is started).
    pub catalog: CatalogStatus,
    /// Tool calls since the daemon started, per upstream with recent latencies.
    pub calls: crate::calls::CallsReport,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct CatalogStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pin_store_error: Option<String>,
    pub quarantined: Vec<serde_json::Value>,
    pub findings: Vec<mcpb_catalog::Finding>,
}

fn catalog_status(broker: &Broker) -> CatalogStatus {
    let mut quarantined = Vec::new();
    let mut findings = Vec::new();
    for name in broker.config().upstreams.keys() {
        let Some(entry) = broker.known.cached(name) else {
            continue;
        };
        for (tool, verdict) in entry.tools().iter().zip(&entry.verdicts) {
            if let Some(q) = verdict {
                let tool = tool.name();
                quarantined.push(serde_json::json!({
                    "tool": mcpb_policy::dotted(name, tool),
                    "reason": q.to_string(),
                }));
            }
        }
        findings.extend(entry.findings.iter().map(|f| mcpb_catalog::Finding {
            tool: mcpb_policy::dotted(name, &f.tool),
            ..f.clone()
        }));
    }
    CatalogStatus {
        pin_store_error: broker.known.pin_error(),
        quarantined,
        findings,
    }
}

pub(crate) fn status(broker: &Broker) -> StatusReport {
    let config = broker.config();
    StatusReport {
        daemon: DaemonStatus {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            started_at_unix: broker.started_unix,
            uptime_ms: u64::try_from(broker.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            socket: config.settings.runtime.socket_path().display().to_string(),
            config: config.settings.source.to_string(),
            log: config.settings.runtime.log_path().display().to_string(),
            sessions: broker.sessions.load(Ordering::SeqCst),
            waiting_sessions: broker.waiting_sessions.load(Ordering::SeqCst),
            inflight_calls: broker.drain.inflight(),
            max_clients: config.settings.broker.max_clients,
            draining: broker.drain.is_draining(),
            env_set: config
                .settings
                .daemon_env_names()
                .into_iter()
                .filter(|n| std::env::var_os(n).is_some())
                .collect(),
            config_warning: broker.config_warning.lock().clone(),
        },
        upstreams: config.upstreams.values().map(|u| u.status()).collect(),
        catalog: catalog_status(broker),
        calls: broker.calls.report(),
    }
}
