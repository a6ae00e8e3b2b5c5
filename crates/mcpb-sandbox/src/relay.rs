//! What crosses the PID namespace between a sandboxed server and the broker besides its
//! stdio: the server's pid as the host sees it (told to the server, so that it can name
//! itself the way an unsandboxed one does), and SIGTERM, relayed down the tree so that the
//! stop ladder's TERM reaches the server as it would without the sandbox.

use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SocketFlags, SocketType,
};

use crate::{Layer, SandboxError};

/// The variable a sandboxed server finds its host pid in (its own pid there is 2).
pub(crate) use crate::env::SANDBOX_PID as HOST_PID_VAR;

/// Where the next process down the tree is: a host pid, or -1 for "every process of the
/// namespace" (from its init). 0: not yet known, relay nothing.
static RELAY_TO: AtomicI32 = AtomicI32::new(0);
/// The daemon's pid: a TERM it sent went to the whole process group, so it reached the next
/// process down already and relaying it would deliver it twice.
static DAEMON: AtomicI32 = AtomicI32::new(0);
/// When set, only a TERM from this pid is relayed: the holder passes on what the helper
/// relayed, never a TERM that reached every process of the tree at once.
static ONLY_FROM: AtomicI32 = AtomicI32::new(0);

/// A socket pair whose first end (the holder's) is told the credentials of every writer,
/// translated by the kernel into the holder's PID namespace: the host's.
pub(crate) fn pid_link() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    let err = |e: rustix::io::Errno| SandboxError::at(Layer::Supervise, e);
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(err)?;
    rustix::net::sockopt::set_socket_passcred(&ours, true).map_err(err)?;
    Ok((ours, theirs))
}

/// In the holder: waits for the server's question and answers its host pid. Returns at once
/// when the other end closes without asking (the init refused to start the server).
#[expect(
    clippy::wildcard_enum_match_arm,
    reason = "rustix's ancillary messages are non-exhaustive; only credentials are wanted"
)]
pub(crate) fn answer_host_pid(ours: &OwnedFd) {
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmCredentials(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = rustix::net::recvmsg(
        ours,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::empty(),
    );
    if !matches!(received, Ok(ref m) if m.bytes == 1) {
        return;
    }
    let pid = control.drain().find_map(|m| match m {
        RecvAncillaryMessage::ScmCredentials(c) => Some(c.pid.as_raw_pid()),
        _ => None,
    });
    if let Some(pid) = pid {
        let _ = rustix::io::write(ours, pid.to_string().as_bytes());
    }
}

/// Whether the other end of a pid link is closed (its process died); never waits.
pub(crate) fn peer_gone(link: &OwnedFd) -> bool {
    matches!(
        rustix::net::recv(
            link,
            &mut [0u8; 1],
            rustix::net::RecvFlags::DONTWAIT | rustix::net::RecvFlags::PEEK,
        ),
        Ok((0, _))
    )
}

/// In the server, before its exec: its pid as the host sees it, when the holder answers.
/// Takes the fd: it is closed here, before the server's fds are closed wholesale.
pub(crate) fn ask_host_pid(theirs: OwnedFd) -> Option<u32> {
    rustix::io::write(&theirs, b"?").ok()?;
    let mut answer = [0u8; 16];
    let n = rustix::io::read(&theirs, &mut answer).ok()?;
    std::str::from_utf8(answer.get(..n)?).ok()?.parse().ok()
}

/// Remembers the daemon (the helper's parent) before anything is forked.
pub(crate) fn note_daemon() {
    DAEMON.store(
        rustix::process::getppid().map_or(0, |p| p.as_raw_pid()),
        Ordering::Relaxed,
    );
}

/// Relays SIGTERM to `to` (a host pid, or -1 from the namespace's init: all its processes);
/// with `only_from`, only a TERM that pid sent.
pub(crate) fn relay_term(to: i32, only_from: Option<i32>) -> Result<(), SandboxError> {
    RELAY_TO.store(to, Ordering::Relaxed);
    ONLY_FROM.store(only_from.unwrap_or(0), Ordering::Relaxed);
    // SAFETY: a zeroed sigaction is a valid value (no handler, empty flags) that is then
    // filled in; `relay` only reads atomics, calls kill(2) and saves and restores errno, all
    // async-signal-safe; SA_RESTART keeps the waits and reads it interrupts going.
    let rc = unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = relay as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut())
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(SandboxError::at(
            Layer::Supervise,
            std::io::Error::last_os_error(),
        ))
    }
}

extern "C" fn relay(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let to = RELAY_TO.load(Ordering::Relaxed);
    // SAFETY: the kernel hands an SA_SIGINFO handler a valid siginfo for the signal.
    let from = if info.is_null() {
        0
    } else {
        unsafe { (*info).si_pid() }
    };
    let wanted = match ONLY_FROM.load(Ordering::Relaxed) {
        0 => from != DAEMON.load(Ordering::Relaxed),
        only => from == only,
    };
    if to == -1 || (to > 0 && wanted) {
        // SAFETY: __errno_location gives this thread's errno, valid for the thread's life;
        // kill(2) takes no pointers and is async-signal-safe. errno is put back so the code
        // the signal interrupted sees its own.
        unsafe {
            let errno = libc::__errno_location();
            let saved = *errno;
            libc::kill(to, sig);
            *errno = saved;
        }
    }
}

/// Waits for `child` and reaps it; its pid stops being a relay target before it can be
/// reused (it is reaped only after).
pub(crate) fn reap(
    child: rustix::process::Pid,
) -> rustix::io::Result<Option<(rustix::process::Pid, rustix::process::WaitStatus)>> {
    loop {
        match rustix::process::waitid(
            rustix::process::WaitId::Pid(child),
            rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOWAIT,
        ) {
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e),
            Ok(_) => break,
        }
    }
    RELAY_TO.store(0, Ordering::Relaxed);
    rustix::process::waitpid(Some(child), rustix::process::WaitOptions::empty())
}
