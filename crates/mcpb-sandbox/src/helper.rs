//! The helper process of a code run: reads the spec, starts the holder (see `launch`), which
//! opens what the jail needs from the host while it still can and becomes the jail's user
//! before it forks the jail's init.

use std::io::Read;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};
use std::time::Instant;

use rustix::process::{Gid, Signal, Uid, WaitOptions};

use crate::host::{Host, host_entries};
use crate::launch::{self, Handshake, Holder, IdMaps};
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
    let launch = Holder {
        cgroup: spec.cgroup.as_ref(),
        maps: IdMaps {
            inside_uid: crate::JAIL_UID,
            host_uid: spec.host_uid,
            inside_gid: crate::JAIL_UID,
            host_gid: spec.host_gid,
        },
        refused: 1,
    };
    let child = launch.start(
        report,
        |_| Ok(()),
        |handshake| holder(&spec, &mut host, report, handshake),
    )?;
    let _ = rustix::process::waitpid(Some(child), WaitOptions::empty());
    Ok(0)
}

/// The holder: enters the new namespaces (the mount namespace before the host's entries are
/// opened, the others after it has the jail's ids), then forks the jail's init (the first
/// process of the new PID namespace) and waits for it.
fn holder(
    spec: &JailSpec,
    host: &mut Host,
    report: &Report,
    handshake: &Handshake,
) -> Result<i32, SandboxError> {
    if !launch::enter(handshake, report)? {
        return Ok(1);
    }
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
    launch::enter_the_rest(false, report)?;
    let Some(child) = fork(Layer::PidNamespace)? else {
        jail::init(spec, host, report);
    };
    let status = rustix::process::waitpid(Some(child), WaitOptions::empty())
        .map_err(|e| SandboxError::at(Layer::Supervise, e))?;
    Ok(status.and_then(|(_, s)| s.exit_status()).unwrap_or(1))
}
