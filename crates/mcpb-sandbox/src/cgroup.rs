//! A memory cgroup per run where the daemon may make one (a writable cgroup v1 memory
//! hierarchy, or cgroup v2 with the memory controller delegated to the daemon's cgroup). The
//! run's processes, its tmpfs workspace and its memfds are charged to it, which RLIMIT_AS alone
//! does not cover; over the limit the kernel's OOM killer stops the run inside it and nothing
//! else. Where none can be made the run still has its rlimits and disk quota.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

pub(crate) struct RunCgroup {
    dir: PathBuf,
    v2: bool,
}

fn write(p: &Path, text: &str) -> bool {
    std::fs::write(p, text).is_ok()
}

impl RunCgroup {
    /// A new cgroup holding at most `limit` bytes, or None where the machine gives none.
    pub(crate) fn create(limit: u64) -> Option<Self> {
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let name = format!("mcpb-run-{}", std::process::id());
        for line in own.lines() {
            let mut parts = line.splitn(3, ':');
            let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let path = path.trim_start_matches('/');
            if controllers.split(',').any(|c| c == "memory") {
                let dir = Path::new("/sys/fs/cgroup/memory").join(path).join(&name);
                if std::fs::create_dir(&dir).is_ok() {
                    let cg = RunCgroup { dir, v2: false };
                    if write(&cg.dir.join("memory.limit_in_bytes"), &limit.to_string()) {
                        // No swap beyond the limit where the kernel accounts for it.
                        let _ = write(
                            &cg.dir.join("memory.memsw.limit_in_bytes"),
                            &limit.to_string(),
                        );
                        return Some(cg);
                    }
                }
            } else if id == "0" && controllers.is_empty() {
                let base = Path::new("/sys/fs/cgroup").join(path);
                let delegated = std::fs::read_to_string(base.join("cgroup.subtree_control"))
                    .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
                let dir = base.join(&name);
                if delegated && std::fs::create_dir(&dir).is_ok() {
                    let cg = RunCgroup { dir, v2: true };
                    if write(&cg.dir.join("memory.max"), &limit.to_string()) {
                        let _ = write(&cg.dir.join("memory.swap.max"), "0");
                        return Some(cg);
                    }
                }
            }
        }
        None
    }

    /// Moves `pid` (and so everything it will start) into the cgroup.
    pub(crate) fn enter(&self, pid: i32) -> std::io::Result<()> {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
    }

    /// Whether the kernel's OOM killer acted inside the cgroup.
    pub(crate) fn oom_killed(&self) -> bool {
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
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        // The last processes of the run may take a moment to leave it.
        for _ in 0..100 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
