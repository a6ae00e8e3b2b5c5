//! A ledger of the process groups the daemon started, one small file per group under
//! `state/pgroups/`. If the daemon dies without stopping its upstreams (SIGKILL, OOM), the
//! direct children die with it (PR_SET_PDEATHSIG) but their own children would not; the next
//! daemon start, or `mcp-broker reap`, kills every group the ledger still lists.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::process::Signal;
use serde::{Deserialize, Serialize};

use crate::process::signal_group;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LedgerEntry {
    pub upstream: String,
    pub pgid: u32,
    /// Start time of the group leader (clock ticks since boot), to tell a reused pid apart.
    pub leader_start: u64,
    pub daemon_pid: u32,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Reaped {
    pub upstream: String,
    pub pgid: u32,
    /// Processes that were still alive in the group and got SIGKILL.
    pub killed: usize,
}

#[derive(Debug, Clone)]
pub struct Ledger {
    dir: PathBuf,
}

impl Ledger {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn path(&self, pgid: u32) -> PathBuf {
        self.dir.join(format!("{pgid}.json"))
    }

    pub fn record(&self, upstream: &str, pgid: u32) {
        let entry = LedgerEntry {
            upstream: upstream.to_string(),
            pgid,
            leader_start: start_time(pgid).unwrap_or(0),
            daemon_pid: std::process::id(),
        };
        let write = std::fs::create_dir_all(&self.dir).and_then(|()| {
            std::fs::write(
                self.path(pgid),
                serde_json::to_vec(&entry).unwrap_or_default(),
            )
        });
        if let Err(e) = write {
            tracing::warn!(upstream, pgid, error = %e, "cannot record the process group in the ledger");
        }
    }

    pub fn forget(&self, pgid: u32) {
        let _ = std::fs::remove_file(self.path(pgid));
    }

    pub fn entries(&self) -> Vec<LedgerEntry> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| std::fs::read(e.path()).ok())
            .filter_map(|b| serde_json::from_slice(&b).ok())
            .collect()
    }

    /// Kills every leftover group. With `skip_live_daemons`, entries of a daemon that is still
    /// running are left alone (they are its live upstreams).
    pub fn reap(&self, skip_live_daemons: bool) -> Vec<Reaped> {
        let mut reaped = Vec::new();
        for entry in self.entries() {
            if skip_live_daemons
                && entry.daemon_pid != std::process::id()
                && alive(entry.daemon_pid)
            {
                continue;
            }
            // A live leader with another start time means the pid was reused: not ours.
            let leader = start_time(entry.pgid);
            let reused = leader.is_some_and(|t| {
                t != entry.leader_start && pgrp_of(entry.pgid) == Some(entry.pgid)
            });
            let members = if reused {
                Vec::new()
            } else {
                group_members(entry.pgid)
            };
            if !members.is_empty() {
                signal_group(entry.pgid, Signal::KILL);
                wait_group_gone(entry.pgid, Duration::from_secs(2));
                tracing::warn!(upstream = %entry.upstream, pgid = entry.pgid, killed = members.len(), "reaped a leftover upstream process group");
            }
            reaped.push(Reaped {
                upstream: entry.upstream.clone(),
                pgid: entry.pgid,
                killed: members.len(),
            });
            self.forget(entry.pgid);
        }
        reaped
    }
}

pub(crate) fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Fields after the command name: state(0) ppid(1) pgrp(2) ... starttime(19).
fn start_time(pid: u32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

fn pgrp_of(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(2)?.parse().ok()
}

fn alive(pid: u32) -> bool {
    stat_fields(pid).is_some_and(|f| f.first().map(String::as_str) != Some("Z"))
}

/// Live (non-zombie) processes whose process group is `pgid`.
pub(crate) fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(proc_dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    proc_dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            stat_fields(*pid).is_some_and(|f| {
                f.first().map(String::as_str) != Some("Z")
                    && f.get(2).and_then(|g| g.parse().ok()) == Some(pgid)
            })
        })
        .collect()
}

pub(crate) fn wait_group_gone(pgid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if group_members(pgid).is_empty() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn ledger_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("pgroups")
}
