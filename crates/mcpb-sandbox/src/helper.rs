//! The helper process: reads the spec, opens what the jail needs from the host while it still
//! can, forks the holder that unshares the namespaces, and writes the holder's id maps from
//! outside (only the parent user namespace may map a uid other than the writer's own).

use std::io::Read;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};
use std::time::Instant;

use rustix::process::{Gid, Signal, Uid, WaitOptions};
use rustix::thread::UnshareFlags;

use crate::host::{Host, host_entries};
use crate::report::{Report, fork, refuse};
use crate::{CONTROL_FD, JailSpec, Layer, REPORT_FD, SDK_FD, SandboxError, jail};

/// The spec is small (the snippet is its largest part); more is a broken caller.
const MAX_SPEC_BYTES: u64 = 16 << 20;

/// Takes fd 3 (SDK), fd 4 (report) and fd 5 (take-over) from the daemon.
fn inherited() -> Option<(OwnedFd, OwnedFd, OwnedFd)> {
    for fd in [SDK_FD, REPORT_FD, CONTROL_FD] {
        // SAFETY: the fd is only borrowed for the duration of fcntl(F_GETFD), which reads
        // the descriptor table and fails cleanly (EBADF) when the number is not open.
        let open = unsafe { BorrowedFd::borrow_raw(fd) };
        rustix::io::fcntl_getfd(open).ok()?;
    }
    // SAFETY: the three numbers are open (checked above) and were set up by the daemon for
    // this process alone; nothing else in this single-threaded helper has taken ownership of
    // them.
    Some(unsafe {
        (
            OwnedFd::from_raw_fd(SDK_FD),
            OwnedFd::from_raw_fd(REPORT_FD),
            OwnedFd::from_raw_fd(CONTROL_FD),
        )
    })
}

pub(crate) fn main(in_process: Option<crate::InProcess>) -> ! {
    if let Some(f) = in_process {
        let _ = crate::IN_PROCESS.set(f);
    }
    let start = Instant::now();
    let Some((sdk, report, control)) = inherited() else {
        eprintln!(
            "mcp-broker {}: fd {SDK_FD} (SDK), fd {REPORT_FD} (report) and fd {CONTROL_FD} (take-over) must be open\nhint: this mode is started by the daemon for code runs, not by hand",
            crate::HELPER_ARG
        );
        std::process::exit(2);
    };
    let report = Report::new(report, start);
    let code = match run(&report, &sdk, control) {
        Ok(code) => code,
        Err(e) => {
            refuse(&report, e);
            1
        }
    };
    std::process::exit(code)
}

fn read_spec() -> Result<JailSpec, SandboxError> {
    let mut text = Vec::new();
    std::io::stdin()
        .take(MAX_SPEC_BYTES)
        .read_to_end(&mut text)
        .map_err(|e| SandboxError::at(Layer::Spec, e))?;
    let spec: JailSpec =
        serde_json::from_slice(&text).map_err(|e| SandboxError::at(Layer::Spec, e))?;
    if spec.argv.is_empty() {
        return Err(SandboxError::at(Layer::Spec, "nothing to run"));
    }
    Ok(spec)
}

fn run(report: &Report, _sdk: &OwnedFd, control: OwnedFd) -> Result<i32, SandboxError> {
    let spec = read_spec()?;
    let mut host = Host {
        control,
        entries: Vec::new(),
    };
    let sup = |e: rustix::io::Errno| SandboxError::at(Layer::Supervise, e);
    let (ready_r, ready_w) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(sup)?;
    let (go_r, go_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(sup)?;
    let Some(child) = fork(Layer::Supervise)? else {
        drop((ready_r, go_w));
        let code = match holder(&spec, &mut host, report, &ready_w, &go_r) {
            Ok(code) => code,
            Err(e) => {
                refuse(report, e);
                1
            }
        };
        std::process::exit(code);
    };
    drop((ready_w, go_r));
    let mut byte = [0u8; 1];
    let cgroup = spec
        .cgroup
        .as_ref()
        .map(|c| crate::cgroup::RunCgroup::open(c.dir.clone(), c.v2));
    // The holder says it has its user namespace; EOF means it failed and reported why.
    if rustix::io::read(&ready_r, &mut byte).map_err(sup)? == 1 {
        if let Some(cg) = &cgroup {
            // The daemon made this cgroup for the run: a jail outside it would run with
            // rlimits only, so a failure here refuses the run.
            if let Err(e) = cg.enter(child.as_raw_pid()) {
                let _ = rustix::process::kill_process(child, Signal::KILL);
                let _ = rustix::process::waitpid(Some(child), WaitOptions::empty());
                return Err(SandboxError::at(
                    Layer::Cgroup,
                    format!("{}: {e}", cg.dir().display()),
                ));
            }
            report.applied(Layer::Cgroup);
        }
        if let Err(e) = write_maps(child.as_raw_pid(), &spec) {
            let _ = rustix::process::kill_process(child, Signal::KILL);
            let _ = rustix::process::waitpid(Some(child), WaitOptions::empty());
            return Err(e);
        }
        rustix::io::write(&go_w, b"g").map_err(sup)?;
    }
    drop(go_w);
    let _ = rustix::process::waitpid(Some(child), WaitOptions::empty());
    Ok(0)
}

fn write_maps(pid: i32, spec: &JailSpec) -> Result<(), SandboxError> {
    let map = |file: &str, text: String| {
        std::fs::write(format!("/proc/{pid}/{file}"), text)
            .map_err(|e| SandboxError::at(Layer::IdMap, format!("{file}: {e}")))
    };
    map("setgroups", "deny".into())?;
    map(
        "uid_map",
        format!("{} {} 1\n", crate::JAIL_UID, spec.host_uid),
    )?;
    map(
        "gid_map",
        format!("{} {} 1\n", crate::JAIL_UID, spec.host_gid),
    )
}

/// The holder: enters the new namespaces, waits for its maps, then forks the jail's init (the
/// first process of the new PID namespace) and waits for it.
fn holder(
    spec: &JailSpec,
    host: &mut Host,
    report: &Report,
    ready: &OwnedFd,
    go: &OwnedFd,
) -> Result<i32, SandboxError> {
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(|e| SandboxError::at(Layer::Supervise, e))?;
    unshare(UnshareFlags::NEWUSER, Layer::UserNamespace)?;
    report.applied(Layer::UserNamespace);
    rustix::io::write(ready, b"r").map_err(|e| SandboxError::at(Layer::Supervise, e))?;
    let mut byte = [0u8; 1];
    if rustix::io::read(go, &mut byte).map_err(|e| SandboxError::at(Layer::IdMap, e))? != 1 {
        // The helper reported the failure.
        return Ok(1);
    }
    unshare(UnshareFlags::NEWNS, Layer::MountNamespace)?;
    report.applied(Layer::MountNamespace);
    // Bind sources must be mounts of the namespace that binds them, and the helper's host
    // ids can still reach every path the daemon can (an interpreter under a 0700 home).
    host.entries = host_entries(spec)?;
    // The holder still has the helper's host ids; becoming the mapped jail user makes what
    // it creates ownable in the namespace. The capabilities stay: the namespace has no root
    // id, so this is not a drop from root. The death signal resets with the credentials.
    let (uid, gid) = (
        Uid::from_raw(crate::JAIL_UID),
        Gid::from_raw(crate::JAIL_UID),
    );
    rustix::thread::set_thread_res_gid(gid, gid, gid)
        .map_err(|e| SandboxError::at(Layer::IdMap, e))?;
    rustix::thread::set_thread_res_uid(uid, uid, uid)
        .map_err(|e| SandboxError::at(Layer::IdMap, e))?;
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(|e| SandboxError::at(Layer::Supervise, e))?;
    report.applied(Layer::IdMap);
    for (flag, layer) in [
        (UnshareFlags::NEWPID, Layer::PidNamespace),
        (UnshareFlags::NEWNET, Layer::NetNamespace),
        (UnshareFlags::NEWIPC, Layer::IpcNamespace),
        (UnshareFlags::NEWUTS, Layer::UtsNamespace),
    ] {
        unshare(flag, layer)?;
        report.applied(layer);
    }
    let Some(child) = fork(Layer::PidNamespace)? else {
        jail::init(spec, host, report);
    };
    let status = rustix::process::waitpid(Some(child), WaitOptions::empty())
        .map_err(|e| SandboxError::at(Layer::Supervise, e))?;
    Ok(status.and_then(|(_, s)| s.exit_status()).unwrap_or(1))
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
