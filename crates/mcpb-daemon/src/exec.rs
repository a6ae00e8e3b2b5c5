//! The daemon's code-execution state: the workspaces of every profile and the runner. Both
//! live as long as the daemon (a reload keeps open workspaces); the interpreter and the
//! workspace limit are read at start.

use mcpb_config::Settings;
use std::time::Duration;

use mcpb_exec::{Persisted, Runner, Workspaces};

pub(crate) struct Exec {
    pub(crate) workspaces: Workspaces,
    pub(crate) runner: Runner,
}

impl Exec {
    pub(crate) fn new(settings: &Settings) -> Self {
        let exec = &settings.broker.exec;
        // The helper is this very binary in its sandbox mode; /proc/self/exe still names it
        // after an upgrade replaced the file on disk.
        let helper = std::env::current_exe().unwrap_or_else(|_| "/proc/self/exe".into());
        let workspaces =
            Workspaces::new(settings.exec_root(), exec.max_workspaces).with_persisted(Persisted {
                max: exec.max_persisted,
                ttl: Duration::from_millis(exec.persist_ttl_ms),
                disk_bytes: exec.persisted_disk_bytes,
            });
        // Persisted workspaces past their time to live go at start too, not only when a
        // profile opens a new one.
        let cleared = workspaces.clear_dead_runs();
        if cleared > 0 {
            tracing::info!(
                cleared,
                "cleared workspaces left mid-run by a daemon that stopped"
            );
        }
        let expired = workspaces.expire(None);
        if expired > 0 {
            tracing::info!(expired, "removed persisted workspaces past persist_ttl_ms");
        }
        Self {
            workspaces,
            runner: Runner::with_max_running(
                helper,
                exec.python.as_deref(),
                usize::try_from(exec.frame_budget_bytes).unwrap_or(usize::MAX),
                exec.max_concurrent_runs as usize,
            )
            .with_pool(
                exec.pool as usize,
                std::time::Duration::from_millis(exec.pool_idle_ms),
            ),
        }
    }
}
