//! The daemon's code-execution state: the workspaces of every profile and the runner. Both
//! live as long as the daemon (a reload keeps open workspaces); the interpreter and the
//! workspace limit are read at start.

use mcpb_config::Settings;
use mcpb_exec::{Runner, Workspaces};

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
        Self {
            workspaces: Workspaces::new(settings.runtime.exec_dir(), exec.max_workspaces),
            runner: Runner::new(helper, exec.python.as_deref()),
        }
    }
}
