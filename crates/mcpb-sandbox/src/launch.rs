//! The skeleton both sandbox modes stand on (code runs and sandboxed servers): the helper forks
//! a holder; the holder enters a new user namespace and says so; the helper puts it in its
//! memory cgroup and writes its id maps from outside (only the parent namespace may map an id
//! other than the writer's own), then lets it go on into its mount namespace and the rest.
//! What each mode builds inside and how it confines its program stay in its own files.

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::mount::MountFlags;
use rustix::pipe::{PipeFlags, pipe_with};
use rustix::process::{Pid, Signal, WaitOptions};
use rustix::thread::UnshareFlags;

use crate::report::{Report, fork, refuse};
use crate::{JailCgroup, Layer, SandboxError};

/// The one id of each kind the holder's user namespace has, each mapped from a host id.
pub(crate) struct IdMaps {
    pub inside_uid: u32,
    pub host_uid: u32,
    pub inside_gid: u32,
    pub host_gid: u32,
}

/// The holder's ends of the handshake with the helper.
pub(crate) struct Handshake {
    ready: OwnedFd,
    go: OwnedFd,
}

/// What the helper needs to start a holder.
pub(crate) struct Holder<'a> {
    pub cgroup: Option<&'a JailCgroup>,
    pub maps: IdMaps,
    /// The exit code of a holder that could not apply a layer (it reports which first).
    pub refused: i32,
}

fn supervise(e: rustix::io::Errno) -> SandboxError {
    SandboxError::at(Layer::Supervise, e)
}

impl Holder<'_> {
    /// Forks the holder, which runs `body` and exits with its code. `forked` runs in the helper
    /// at once (a server's helper relays signals to it from then on). Once the holder has its
    /// user namespace the helper moves it into its cgroup and writes its maps; a failure there
    /// kills it and is returned. The holder's pid, for the mode to wait on as it must.
    pub(crate) fn start(
        &self,
        report: &Report,
        forked: impl FnOnce(Pid) -> Result<(), SandboxError>,
        body: impl FnOnce(&Handshake) -> Result<i32, SandboxError>,
    ) -> Result<Pid, SandboxError> {
        let (ready_r, ready_w) = pipe_with(PipeFlags::CLOEXEC).map_err(supervise)?;
        let (go_r, go_w) = pipe_with(PipeFlags::CLOEXEC).map_err(supervise)?;
        let Some(child) = fork(Layer::Supervise)? else {
            drop((ready_r, go_w));
            let handshake = Handshake {
                ready: ready_w,
                go: go_r,
            };
            let code = body(&handshake).unwrap_or_else(|e| {
                refuse(report, e);
                self.refused
            });
            std::process::exit(code);
        };
        drop((ready_w, go_r));
        forked(child)?;
        let mut byte = [0u8; 1];
        // EOF instead of the byte: the holder failed and reported why.
        if rustix::io::read(&ready_r, &mut byte).map_err(supervise)? == 1 {
            if let Err(e) = self.place(child, report) {
                let _ = rustix::process::kill_process(child, Signal::KILL);
                let _ = rustix::process::waitpid(Some(child), WaitOptions::empty());
                return Err(e);
            }
            rustix::io::write(&go_w, b"g").map_err(supervise)?;
        }
        Ok(child)
    }

    /// The holder into its cgroup, then its id maps written.
    fn place(&self, child: Pid, report: &Report) -> Result<(), SandboxError> {
        if let Some(c) = self.cgroup {
            // The daemon made this cgroup for the run: a jail outside it would run with
            // rlimits only, so a failure here refuses the run.
            crate::cgroup::RunCgroup::open(c.dir.clone(), c.v2)
                .enter(child.as_raw_pid())
                .map_err(|e| {
                    SandboxError::at(Layer::Cgroup, format!("{}: {e}", c.dir.display()))
                })?;
            report.applied(Layer::Cgroup);
        }
        self.maps.write(&child.as_raw_pid().to_string())
    }
}

impl IdMaps {
    /// Writes the maps of `process` (a pid, or `self`). A process in a user namespace it
    /// has just made may write its own, as long as each maps the host id it has (that is
    /// the server's case: the daemon's ids); anything else needs its parent to write them.
    pub(crate) fn write(&self, process: &str) -> Result<(), SandboxError> {
        let map = |file: &str, text: String| {
            std::fs::write(format!("/proc/{process}/{file}"), text)
                .map_err(|e| SandboxError::at(Layer::IdMap, format!("{file}: {e}")))
        };
        map("setgroups", "deny".into())?;
        map(
            "uid_map",
            format!("{} {} 1\n", self.inside_uid, self.host_uid),
        )?;
        map(
            "gid_map",
            format!("{} {} 1\n", self.inside_gid, self.host_gid),
        )
    }
}

/// The holder's first steps: it dies with the helper (and stops if the helper is gone
/// already: nobody would send the signal then), enters a new user namespace, waits for its
/// maps, then enters a new mount namespace. `false`: the helper failed and said why.
pub(crate) fn enter(handshake: &Handshake, report: &Report) -> Result<bool, SandboxError> {
    let helper = rustix::process::getppid();
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL)).map_err(supervise)?;
    if rustix::process::getppid() != helper {
        return Ok(false);
    }
    unshare(UnshareFlags::NEWUSER, Layer::UserNamespace)?;
    report.applied(Layer::UserNamespace);
    rustix::io::write(&handshake.ready, b"r").map_err(supervise)?;
    let mut byte = [0u8; 1];
    let got = rustix::io::read(&handshake.go, &mut byte)
        .map_err(|e| SandboxError::at(Layer::IdMap, e))?;
    if got != 1 {
        return Ok(false);
    }
    unshare(UnshareFlags::NEWNS, Layer::MountNamespace)?;
    report.applied(Layer::MountNamespace);
    Ok(true)
}

/// The namespaces the holder's child is the first process of: PID, IPC, UTS, and network
/// unless the host's is kept.
pub(crate) fn enter_the_rest(host_network: bool, report: &Report) -> Result<(), SandboxError> {
    let mut flags = vec![(UnshareFlags::NEWPID, Layer::PidNamespace)];
    if !host_network {
        flags.push((UnshareFlags::NEWNET, Layer::NetNamespace));
    }
    flags.push((UnshareFlags::NEWIPC, Layer::IpcNamespace));
    flags.push((UnshareFlags::NEWUTS, Layer::UtsNamespace));
    for (flag, layer) in flags {
        unshare(flag, layer)?;
        report.applied(layer);
    }
    Ok(())
}

pub(crate) fn unshare(flags: UnshareFlags, layer: Layer) -> Result<(), SandboxError> {
    // SAFETY: none of the flags is CLONE_FILES, the one whose unsharing can leave another
    // thread with a stale descriptor table; and this process has a single thread anyway.
    unsafe { rustix::thread::unshare_unsafe(flags) }.map_err(|e| {
        let mut reason = e.to_string();
        if layer == Layer::UserNamespace
            && let Some(hint) = crate::userns_hint()
        {
            reason.push_str("; ");
            reason.push_str(&hint);
        }
        SandboxError::at(layer, reason)
    })
}

/// A tmpfs on `target` (nosuid, nodev) with `options`; a failure names `layer`.
pub(crate) fn tmpfs(target: &Path, options: &str, layer: Layer) -> Result<(), SandboxError> {
    let data = CString::new(options).map_err(|e| SandboxError::at(layer, e))?;
    rustix::mount::mount(
        "tmpfs",
        target,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        Some(data.as_c_str()),
    )
    .map_err(|e| SandboxError::at(layer, format!("tmpfs on {}: {e}", target.display())))
}

/// A proc of the new PID namespace on `target` (it shows only the namespace's processes);
/// `false` where the machine forbids one (some container runtimes mask the host's /proc).
pub(crate) fn mount_proc(target: &Path) -> bool {
    rustix::mount::mount(
        "proc",
        target,
        "proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        None,
    )
    .is_ok()
}
