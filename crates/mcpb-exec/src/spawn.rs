//! Placing the SDK channel, the report pipe and the take-over socket at fixed numbers in the
//! sandbox helper.
#![allow(unsafe_code)]

use std::os::fd::RawFd;

use mcpb_sandbox::{CONTROL_FD, REPORT_FD, SDK_FD};

/// After fork, before exec: `[sdk, report, control]` become fds 3, 4 and 5 (without
/// close-on-exec), and the helper dies with the daemon.
pub(crate) fn place_fds(cmd: &mut tokio::process::Command, [sdk, report, control]: [RawFd; 3]) {
    // SAFETY: the closure runs in the forked child between fork and exec and calls only
    // fcntl, dup2 and prctl, which are async-signal-safe, allocate nothing and touch no state
    // shared with the daemon's other threads. The fds are first moved above 9 so that placing
    // one cannot overwrite another.
    unsafe {
        cmd.pre_exec(move || {
            let high_sdk = libc_like::dup_above(sdk, 10)?;
            let high_report = libc_like::dup_above(report, 10)?;
            let high_control = libc_like::dup_above(control, 10)?;
            libc_like::dup_to(high_sdk, SDK_FD)?;
            libc_like::dup_to(high_report, REPORT_FD)?;
            libc_like::dup_to(high_control, CONTROL_FD)?;
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(std::io::Error::from)
        });
    }
}

/// The two fd calls on raw numbers: the targets may be closed in the child, which no owned
/// fd type can stand for.
mod libc_like {
    use std::os::fd::RawFd;

    fn check(rc: libc::c_int) -> std::io::Result<libc::c_int> {
        if rc < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(rc)
        }
    }

    pub(super) fn dup_above(fd: RawFd, min: RawFd) -> std::io::Result<RawFd> {
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) takes two integers and touches no memory.
        check(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, min) })
    }

    pub(super) fn dup_to(fd: RawFd, target: RawFd) -> std::io::Result<()> {
        // SAFETY: dup2 takes two integers and touches no memory; the copy at `target` has no
        // close-on-exec flag, which is the point.
        check(unsafe { libc::dup2(fd, target) }).map(|_| ())
    }
}
