//! Processes that leave their upstream's process group (a double fork with `setsid`) escape the
//! group kill. The daemon is a child subreaper, so such orphans become its children: zombies
//! among them are reaped as they come, and at shutdown every child left is killed and reaped.

use rustix::process::{Pid, Signal, WaitOptions};

/// Makes orphans of the daemon's descendants its own children instead of init's. False where
/// the kernel refuses (they then go to init, as before).
pub fn adopt_orphans() -> bool {
    match rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "cannot become a child subreaper; processes that leave their group may outlive the daemon");
            false
        }
    }
}

/// This process's children: (pid, is a zombie).
fn children() -> Vec<(u32, bool)> {
    let me = rustix::process::getpid()
        .as_raw_nonzero()
        .get()
        .unsigned_abs();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let fields = crate::ledger::stat_fields(pid)?;
            let ppid: u32 = fields.get(1)?.parse().ok()?;
            (ppid == me).then(|| (pid, fields.first().map(String::as_str) == Some("Z")))
        })
        .collect()
}

fn reap(pid: u32) {
    if let Some(p) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = rustix::process::waitpid(Some(p), WaitOptions::NOHANG);
    }
}

/// Reaps adopted children that exited. `spawned` are the upstream processes the daemon started
/// itself: their exit status belongs to their supervisor, never taken here.
pub fn reap_adopted(spawned: &[u32]) -> usize {
    let mut n = 0;
    for (pid, zombie) in children() {
        if zombie && !spawned.contains(&pid) {
            reap(pid);
            n += 1;
        }
    }
    n
}

/// At shutdown, after every upstream stopped: kills and reaps every child left (orphans that
/// escaped their group). Returns how many there were.
pub fn kill_adopted() -> usize {
    let left = children();
    for (pid, zombie) in &left {
        if !zombie {
            crate::process::signal_pid(*pid, Signal::KILL);
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        let now = children();
        for (pid, zombie) in &now {
            if *zombie {
                reap(*pid);
            }
        }
        if now.iter().all(|(_, z)| *z) || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    left.len()
}
