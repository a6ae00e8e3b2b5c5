//! Jails started ahead of their runs. Every run takes over a started jail: one from the pool
//! when a jail of the same spec is ready there, else one started for it on the spot. A jail
//! serves one run and is gone with it; after a run, one jail of its spec is started for the
//! next. What a started jail holds before its run is the runtime and its SDK, confined: no
//! workspace, no job, no tool (those come with the take-over).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use mcpb_sandbox::{CgroupBase, JailSpec, RunCgroup};

use crate::workspace::RunIds;
use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;

/// A started jail and the daemon's ends of its channels.
pub(crate) struct Started {
    pub(crate) child: tokio::process::Child,
    /// The SDK channel (the program's fd 3).
    pub(crate) sdk: tokio::net::UnixStream,
    /// The helper's report pipe.
    pub(crate) report: OwnedFd,
    /// The take-over socket (init's fd 5).
    pub(crate) control: tokio::net::UnixStream,
    /// The memory cgroup made for this jail; removed after its run (or its discard).
    pub(crate) cgroup: CgroupGuard,
    /// The host ids this jail's user maps to when the daemon is root (its run adopts them);
    /// held until its processes are gone.
    pub(crate) run_ids: Option<RunIds>,
}

impl Started {
    /// Whether the helper still runs (a jail whose tree died while it waited is no use).
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// What starts jails: the broker's binary (its helper mode) and where memory cgroups go.
pub(crate) struct Starter {
    pub(crate) helper: PathBuf,
    /// None where the machine gives no memory cgroup (then runs have their rlimits and disk
    /// quota only, as docs/security.md says).
    pub(crate) cgroups: Option<CgroupBase>,
}

impl Starter {
    /// Starts a jail for `spec`: its memory cgroup made, its helper spawned with the spec on
    /// stdin. Returns at once; the jail builds itself and its runtime loads meanwhile.
    /// `run_ids`, when given, are the ids `spec` maps the jail's user to.
    pub(crate) async fn start(
        &self,
        spec: &JailSpec,
        run_ids: Option<RunIds>,
    ) -> Result<Started, String> {
        // The daemon makes the jail's cgroup and removes it however the run ends: a helper
        // killed at the deadline cleans up nothing.
        let cgroup = match &self.cgroups {
            None => None,
            Some(base) => {
                let l = &spec.limits;
                let limit = l
                    .memory_bytes
                    .saturating_add(l.disk_bytes)
                    .saturating_add(64 << 20);
                let name = uuid::Uuid::new_v4().simple().to_string();
                match base.create(std::process::id(), &name, limit) {
                    Ok(cg) => Some(cg),
                    Err(e) => {
                        return Err(format!(
                            "sandbox layer 'memory cgroup' could not be applied: {e}"
                        ));
                    }
                }
            }
        };
        let mut spec = spec.clone();
        spec.cgroup = cgroup.as_ref().map(|c| mcpb_sandbox::JailCgroup {
            dir: c.dir().to_path_buf(),
            v2: c.is_v2(),
        });
        match self.spawn(&spec).await {
            Ok((child, sdk, report, control)) => Ok(Started {
                child,
                sdk,
                report,
                control,
                cgroup: CgroupGuard(cgroup),
                run_ids,
            }),
            Err(e) => {
                if let Some(cg) = cgroup {
                    let _ = tokio::task::spawn_blocking(move || cg.remove()).await;
                }
                Err(format!("supervision: {e}"))
            }
        }
    }

    #[allow(clippy::type_complexity)]
    async fn spawn(
        &self,
        spec: &JailSpec,
    ) -> std::io::Result<(
        tokio::process::Child,
        tokio::net::UnixStream,
        OwnedFd,
        tokio::net::UnixStream,
    )> {
        let (ours, theirs) = tokio::net::UnixStream::pair()?;
        let (control, their_control) = tokio::net::UnixStream::pair()?;
        // The jail's ends are ordinary blocking sockets, whatever tokio made of them.
        let blocking = |s: tokio::net::UnixStream| -> std::io::Result<OwnedFd> {
            let s = s.into_std()?;
            s.set_nonblocking(false)?;
            Ok(s.into())
        };
        let theirs = blocking(theirs)?;
        let their_control = blocking(their_control)?;
        let (report_r, report_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let mut cmd = tokio::process::Command::new(&self.helper);
        cmd.arg(mcpb_sandbox::HELPER_ARG)
            .env_clear()
            .envs(mcpb_sandbox::coverage::profile_env())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        crate::spawn::place_fds(
            &mut cmd,
            [
                theirs.as_raw_fd(),
                report_w.as_raw_fd(),
                their_control.as_raw_fd(),
            ],
        );
        let mut child = cmd.spawn()?;
        drop((theirs, report_w, their_control));
        if let Some(mut stdin) = child.stdin.take() {
            let text = serde_json::to_vec(spec).map_err(std::io::Error::other)?;
            stdin.write_all(&text).await?;
        }
        Ok((child, ours, report_r, control))
    }
}

/// A jail's memory cgroup, removed however its owner ends: by `remove`, or, when a run's
/// future is dropped half-way (its client went away), by a thread of its own on drop.
pub(crate) struct CgroupGuard(Option<RunCgroup>);

impl CgroupGuard {
    pub(crate) fn get(&self) -> Option<&RunCgroup> {
        self.0.as_ref()
    }

    /// Kills what is left in it and removes it; false when it could not be removed.
    pub(crate) async fn remove(mut self) -> bool {
        let Some(cg) = self.0.take() else {
            return true;
        };
        matches!(
            tokio::task::spawn_blocking(move || cg.remove()).await,
            Ok(true)
        )
    }
}

impl Drop for CgroupGuard {
    fn drop(&mut self) {
        if let Some(cg) = self.0.take() {
            // No thread to be had: the next daemon start sweeps it.
            let _ = std::thread::Builder::new().spawn(move || cg.remove());
        }
    }
}

/// Ends a jail that no run took: its tree killed, its cgroup removed.
pub(crate) async fn discard(mut started: Started) {
    drop(started.control);
    if let Some(pid) = started
        .child
        .id()
        .and_then(|p| rustix::process::Pid::from_raw(i32::try_from(p).unwrap_or(0)))
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    let _ = started.child.wait().await;
    started.cgroup.remove().await;
    // Only now may another jail map its user to these ids.
    drop(started.run_ids);
}

struct Ready {
    id: u64,
    /// Ends the jail after the idle time; aborted when a run takes it.
    expiry: tokio::task::AbortHandle,
    /// The spec the jail was started for, its host ids left out where the daemon is root
    /// (each jail has its own; the run adopts them).
    key: JailSpec,
    started: Started,
}

#[derive(Default)]
struct Held {
    ready: Vec<Ready>,
    /// Keys whose jail is being started for the pool.
    starting: Vec<JailSpec>,
    next_id: u64,
    /// The daemon is stopping: nothing more is started or kept.
    closed: bool,
}

/// Started jails waiting for a run of their spec.
#[derive(Clone)]
pub(crate) struct Pool {
    starter: Arc<Starter>,
    /// Jails kept ready at most, all specs together; 0 turns the pool off.
    size: usize,
    /// How long a ready jail waits for a run before it is ended.
    idle: Duration,
    held: Arc<Mutex<Held>>,
}

impl Pool {
    pub(crate) fn new(starter: Arc<Starter>, size: usize, idle: Duration) -> Self {
        Self {
            starter,
            // A jail ended as soon as it is ready would only cost a start.
            size: if idle.is_zero() { 0 } else { size },
            idle,
            held: Arc::default(),
        }
    }

    /// A ready jail for `key`, taken out of the pool.
    pub(crate) fn take(&self, key: &JailSpec) -> Option<Started> {
        loop {
            let mut held = self.held.lock();
            let i = held.ready.iter().position(|r| r.key == *key)?;
            let mut ready = held.ready.remove(i);
            drop(held);
            ready.expiry.abort();
            if ready.started.alive() {
                return Some(ready.started);
            }
            tokio::spawn(discard(ready.started));
        }
    }

    /// Starts a jail of `spec` for the pool under `key`, unless one is ready or starting
    /// already; the oldest ready jail of another key makes room when the pool is full.
    pub(crate) fn refill(&self, key: JailSpec, spec: JailSpec, run_ids: Option<RunIds>) {
        if self.size == 0 {
            return;
        }
        {
            let mut held = self.held.lock();
            if held.closed
                || held.ready.iter().any(|r| r.key == key)
                || held.starting.contains(&key)
            {
                return;
            }
            held.starting.push(key.clone());
        }
        let pool = self.clone();
        tokio::spawn(async move {
            let started = pool.starter.start(&spec, run_ids).await;
            // What to end once the lock is let go: this jail when the pool closed meanwhile,
            // else the oldest ready one when it makes room.
            let to_end = {
                let mut held = pool.held.lock();
                held.starting.retain(|s| *s != key);
                let Ok(started) = started else {
                    return;
                };
                if held.closed {
                    Some(started)
                } else {
                    // The oldest ready jail (of another key: this one had none) makes room.
                    let evicted = (held.ready.len() >= pool.size && !held.ready.is_empty())
                        .then(|| held.ready.remove(0));
                    held.next_id += 1;
                    let id = held.next_id;
                    let expiry = pool.expire(id);
                    held.ready.push(Ready {
                        id,
                        expiry,
                        key,
                        started,
                    });
                    evicted.map(|old| {
                        old.expiry.abort();
                        old.started
                    })
                }
            };
            if let Some(s) = to_end {
                discard(s).await;
            }
        });
    }

    /// Ends the ready jail `id` when no run has taken it within the idle time.
    fn expire(&self, id: u64) -> tokio::task::AbortHandle {
        let (held, idle) = (self.held.clone(), self.idle);
        tokio::spawn(async move {
            tokio::time::sleep(idle).await;
            let stale = {
                let mut held = held.lock();
                let i = held.ready.iter().position(|r| r.id == id);
                i.map(|i| held.ready.remove(i).started)
            };
            if let Some(s) = stale {
                discard(s).await;
            }
        })
        .abort_handle()
    }

    /// Ends every ready jail (the daemon is stopping).
    pub(crate) async fn clear(&self) {
        let all: Vec<Ready> = {
            let mut held = self.held.lock();
            held.closed = true;
            held.ready.drain(..).collect()
        };
        for r in all {
            r.expiry.abort();
            discard(r.started).await;
        }
    }
}

/// Hands a started jail its run's workspace (the directory to copy in, then the empty one
/// that receives it) over the take-over socket.
pub(crate) fn hand_over(
    control: &tokio::net::UnixStream,
    work: &OwnedFd,
    out: &OwnedFd,
) -> std::io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let fds = [work.as_fd(), out.as_fd()];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut ancillary = SendAncillaryBuffer::new(&mut space);
    if !ancillary.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(std::io::Error::other("no room for two fds"));
    }
    // One byte on an empty socket: the send never waits.
    rustix::net::sendmsg(
        control,
        &[std::io::IoSlice::new(b"g")],
        &mut ancillary,
        SendFlags::NOSIGNAL,
    )?;
    Ok(())
}

/// The run's directory at `path`, opened for handing over (never through a link).
pub(crate) fn open_dir(path: &std::path::Path) -> std::io::Result<OwnedFd> {
    rustix::fs::open(
        path,
        rustix::fs::OFlags::DIRECTORY
            | rustix::fs::OFlags::RDONLY
            | rustix::fs::OFlags::CLOEXEC
            | rustix::fs::OFlags::NOFOLLOW,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))
}
