//! A memory cgroup per run where the daemon may make one (a writable cgroup v1 memory
//! hierarchy, or cgroup v2 with the memory controller delegated to the daemon's cgroup). The
//! run's processes, its tmpfs workspace and its memfds are charged to it, which RLIMIT_AS alone
//! does not cover; over the limit the kernel's OOM killer stops the run inside it and nothing
//! else.
//!
//! The daemon owns each run's cgroup: it makes it before the helper starts, names it after
//! itself and the run (`mcpb-<daemon pid>-<run id>`, never after a helper's pid, which a later
//! run could get again), and removes it however the run ended, killing what is left in it. A
//! daemon that died leaves cgroups named after a pid that no longer runs: the next daemon to
//! start sweeps them.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where this process may make run cgroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupBase {
    dir: PathBuf,
    v2: bool,
}

/// One run's memory cgroup. Dropping it does not remove it: call [`RunCgroup::remove`].
#[derive(Debug)]
pub struct RunCgroup {
    dir: PathBuf,
    v2: bool,
}

fn write(p: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(p, text)
}

/// The name every run cgroup of a daemon starts with.
fn prefix(daemon_pid: u32) -> String {
    format!("mcpb-{daemon_pid}-")
}

impl CgroupBase {
    /// The directory of this process's own memory cgroup, when run cgroups can be made under
    /// it; `None` where the machine gives none.
    pub fn find() -> Option<Self> {
        Self::find_in(
            &std::fs::read_to_string("/proc/self/cgroup").ok()?,
            Path::new("/sys/fs/cgroup"),
        )
    }

    fn find_in(own: &str, root: &Path) -> Option<Self> {
        for line in own.lines() {
            let mut parts = line.splitn(3, ':');
            let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let path = path.trim_start_matches('/');
            if controllers.split(',').any(|c| c == "memory") {
                let dir = root.join("memory").join(path);
                if dir.join("cgroup.procs").exists() {
                    return Some(Self { dir, v2: false });
                }
            } else if id == "0" && controllers.is_empty() {
                let dir = root.join(path);
                let delegated = std::fs::read_to_string(dir.join("cgroup.subtree_control"))
                    .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
                if delegated {
                    return Some(Self { dir, v2: true });
                }
            }
        }
        None
    }

    /// For tests: a base at `dir`.
    pub fn at(dir: PathBuf, v2: bool) -> Self {
        Self { dir, v2 }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new cgroup `mcpb-<daemon_pid>-<run>` holding at most `limit` bytes.
    pub fn create(&self, daemon_pid: u32, run: &str, limit: u64) -> Result<RunCgroup, String> {
        let dir = self.dir.join(format!("{}{run}", prefix(daemon_pid)));
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let cg = RunCgroup { dir, v2: self.v2 };
        let limit_file = if self.v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        if let Err(e) = write(&cg.dir.join(limit_file), &limit.to_string()) {
            cg.remove();
            return Err(format!("{limit_file}: {e}"));
        }
        // No swap beyond the limit where the kernel accounts for it.
        let _ = if self.v2 {
            write(&cg.dir.join("memory.swap.max"), "0")
        } else {
            write(
                &cg.dir.join("memory.memsw.limit_in_bytes"),
                &limit.to_string(),
            )
        };
        Ok(cg)
    }

    /// Removes the run cgroups of daemons that no longer run (and of the old pid-named
    /// scheme when empty); returns how many went.
    pub fn sweep(&self) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut n = 0;
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(rest) = name.strip_prefix("mcpb-") else {
                continue;
            };
            let Some((owner, _run)) = rest.split_once('-') else {
                continue;
            };
            let stale = if owner == "run" {
                // The old scheme named a cgroup after its helper: only an empty one can go.
                true
            } else {
                owner
                    .parse::<u32>()
                    .is_ok_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
            };
            if !stale || !e.path().is_dir() {
                continue;
            }
            let cg = RunCgroup {
                dir: e.path(),
                v2: self.v2,
            };
            if owner == "run" {
                if std::fs::remove_dir(&cg.dir).is_ok() {
                    n += 1;
                }
            } else if cg.remove() {
                n += 1;
            }
        }
        n
    }
}

impl RunCgroup {
    /// The cgroup at `dir`, as the helper is given it.
    pub fn open(dir: PathBuf, v2: bool) -> Self {
        Self { dir, v2 }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn is_v2(&self) -> bool {
        self.v2
    }

    /// Moves `pid` (and so everything it will start) into the cgroup.
    pub fn enter(&self, pid: i32) -> std::io::Result<()> {
        write(&self.dir.join("cgroup.procs"), &pid.to_string())
    }

    /// Whether the kernel's OOM killer acted inside the cgroup.
    pub fn oom_killed(&self) -> bool {
        let (file, key) = if self.v2 {
            ("memory.events", "oom_kill")
        } else {
            ("memory.oom_control", "oom_kill")
        };
        std::fs::read_to_string(self.dir.join(file)).is_ok_and(|t| {
            t.lines().any(|l| {
                l.split_once(' ')
                    .is_some_and(|(k, v)| k == key && v.trim().parse::<u64>().is_ok_and(|n| n > 0))
            })
        })
    }

    /// Kills whatever is left in the cgroup and removes it, trying for up to two seconds (the
    /// last processes take a moment to leave). Blocking. Returns whether it is gone.
    pub fn remove(&self) -> bool {
        for attempt in 0..200 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return true;
            }
            if attempt % 10 == 0 {
                self.kill_all();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    fn kill_all(&self) {
        if self.v2 && write(&self.dir.join("cgroup.kill"), "1").is_ok() {
            return;
        }
        let Ok(pids) = std::fs::read_to_string(self.dir.join("cgroup.procs")) else {
            return;
        };
        for pid in pids.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_is_the_memory_hierarchy_or_a_delegated_v2_group() {
        let root = tempfile::tempdir().unwrap();
        let v1 = root.path().join("memory/a/b");
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::write(v1.join("cgroup.procs"), "").unwrap();
        let own = "4:memory:/a/b\n0::/x\n";
        assert_eq!(
            CgroupBase::find_in(own, root.path()),
            Some(CgroupBase::at(v1, false))
        );
        let v2 = root.path().join("x");
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::write(v2.join("cgroup.subtree_control"), "cpu memory").unwrap();
        assert_eq!(
            CgroupBase::find_in("0::/x\n", root.path()),
            Some(CgroupBase::at(v2.clone(), true))
        );
        std::fs::write(v2.join("cgroup.subtree_control"), "cpu").unwrap();
        assert_eq!(CgroupBase::find_in("0::/x\n", root.path()), None);
    }

    #[test]
    fn a_cgroup_that_cannot_be_made_is_an_error_not_a_silent_none() {
        let root = tempfile::tempdir().unwrap();
        let base = CgroupBase::at(root.path().join("missing"), false);
        let e = base.create(1, "run", 1 << 20).unwrap_err();
        assert!(e.contains("missing"), "{e}");
    }

    #[test]
    fn the_sweep_takes_only_dead_daemons_cgroups() {
        let root = tempfile::tempdir().unwrap();
        let base = CgroupBase::at(root.path().to_path_buf(), false);
        let me = std::process::id();
        for name in [
            format!("mcpb-{me}-live"),
            "mcpb-4000000000-dead".to_string(),
            "mcpb-run-123".to_string(),
            "other".to_string(),
        ] {
            std::fs::create_dir(root.path().join(name)).unwrap();
        }
        assert_eq!(base.sweep(), 2);
        assert!(root.path().join(format!("mcpb-{me}-live")).exists());
        assert!(root.path().join("other").exists());
        assert!(!root.path().join("mcpb-4000000000-dead").exists());
    }
}
