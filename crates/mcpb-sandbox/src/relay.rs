//! What crosses the PID namespace between a sandboxed server and the broker besides its
//! stdio: the server's pid as the host sees it (told to the server, so that it can name
//! itself the way an unsandboxed one does), and SIGTERM, relayed down the tree so that the
//! stop ladder's TERM reaches the server as it would without the sandbox.

use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

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
    // `relay` only reads atomics, calls kill(2) and saves and restores errno, all
    // async-signal-safe.
    on_term(relay as *const () as libc::sighandler_t, libc::SA_SIGINFO)
}

/// Installs `handler` for SIGTERM; SA_RESTART keeps the waits and reads it interrupts going.
/// The handler must be async-signal-safe and match `flags` (SA_SIGINFO or not).
fn on_term(handler: libc::sighandler_t, flags: libc::c_int) -> Result<(), SandboxError> {
    // SAFETY: a zeroed sigaction is a valid value (no handler, empty flags) that is then
    // filled in; the callers pass a handler of the signature `flags` says, that only makes
    // async-signal-safe calls.
    let rc = unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler;
        action.sa_flags = flags | libc::SA_RESTART;
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
    reap_with(child, &RELAY_TO)
}

/// Waits for `child` to end, clears `target` (so its pid, soon free, is signalled no more),
/// then reaps it.
fn reap_with(
    child: rustix::process::Pid,
    target: &AtomicI32,
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
    target.store(0, Ordering::Relaxed);
    rustix::process::waitpid(Some(child), rustix::process::WaitOptions::empty())
}

/// The server, when it is PID 1 of its namespace (a server without a tracer): its host pid
/// and an fd of its `/proc/<pid>/status`, opened by the helper from the host's /proc.
static FIRST: AtomicI32 = AtomicI32::new(0);
static FIRST_STATUS: AtomicI32 = AtomicI32::new(-1);
/// A TERM was passed on as KILL (the server had no handler for it): its end is told as the
/// TERM's, the way it would have ended outside the sandbox.
static TERM_AS_KILL: AtomicBool = AtomicBool::new(false);

/// In the helper: relays every SIGTERM to `first`, the server, PID 1 of its namespace. The
/// kernel delivers to a namespace's PID 1 only the signals it has a handler for (and KILL):
/// a server that left TERM at its default action would never see the stop ladder's TERM, so
/// it gets what the default action would have done, KILL. Its `/proc` status says which.
pub(crate) fn relay_term_to_first(first: i32, status: &OwnedFd) -> Result<(), SandboxError> {
    FIRST_STATUS.store(status.as_raw_fd(), Ordering::Relaxed);
    FIRST.store(first, Ordering::Relaxed);
    // `to_first` only reads atomics and a stack buffer, calls pread(2) and kill(2), and
    // saves and restores errno, all async-signal-safe.
    on_term(to_first as *const () as libc::sighandler_t, 0)
}

extern "C" fn to_first(_: libc::c_int) {
    let first = FIRST.load(Ordering::Relaxed);
    if first <= 0 {
        return;
    }
    // /proc/<pid>/status is about 1.5 KiB; the mask sits in its first half.
    let mut buf = [0u8; 4096];
    // SAFETY: the buffer is this frame's and its length is passed; pread(2) on a possibly
    // closed fd fails cleanly. __errno_location and kill(2) as in `relay`.
    unsafe {
        let errno = libc::__errno_location();
        let saved = *errno;
        let fd = FIRST_STATUS.load(Ordering::Relaxed);
        let n = libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0);
        let read = usize::try_from(n).ok().and_then(|n| buf.get(..n));
        // Unknown (the status could not be read): TERM, and the ladder's KILL follows.
        let sig = if read.and_then(|s| catches(s, libc::SIGTERM)) == Some(false) {
            TERM_AS_KILL.store(true, Ordering::Relaxed);
            libc::SIGKILL
        } else {
            libc::SIGTERM
        };
        libc::kill(first, sig);
        *errno = saved;
    }
}

/// Whether a `/proc/<pid>/status` text says the process has a handler for `sig` (its
/// `SigCgt` mask, hex, signal n at bit n-1). Allocates nothing: it runs in a signal handler.
pub(crate) fn catches(status: &[u8], sig: i32) -> Option<bool> {
    const FIELD: &[u8] = b"\nSigCgt:";
    let at = status.windows(FIELD.len()).position(|w| w == FIELD)? + FIELD.len();
    let rest = status.get(at..)?;
    let start = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    let rest = rest.get(start..)?;
    let digits = rest.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let bit = u32::try_from(sig.checked_sub(1)?).ok()?;
    let index = digits.checked_sub(1 + usize::try_from(bit / 4).ok()?)?;
    let nibble = char::from(*rest.get(index)?).to_digit(16)?;
    Some(nibble & (1 << (bit % 4)) != 0)
}

/// A server's exit told by the helper: killed by a KILL that stood for a TERM it had no
/// handler for is told as killed by TERM.
pub(crate) fn told_signal(sig: i32) -> i32 {
    if sig == libc::SIGKILL && TERM_AS_KILL.load(Ordering::Relaxed) {
        libc::SIGTERM
    } else {
        sig
    }
}

/// Waits for the server (PID 1 of its namespace) and reaps it; the relay stops first.
pub(crate) fn reap_first(
    child: rustix::process::Pid,
) -> rustix::io::Result<Option<(rustix::process::Pid, rustix::process::WaitStatus)>> {
    let status = reap_with(child, &FIRST);
    FIRST_STATUS.store(-1, Ordering::Relaxed);
    status
}

#[cfg(test)]
mod tests {
    use super::catches;

    const STATUS: &[u8] =
        b"Name:\tnode\nSigQ:\t0/1\nSigIgn:\t0000000000001000\nSigCgt:\t0000000188004a02\nCapInh:\t0\n";

    #[test]
    fn the_caught_mask_is_read_bit_by_signal() {
        // 0x...4a02: bits 1, 9, 11 and 14: SIGINT, SIGUSR1, SIGUSR2 and SIGTERM.
        assert_eq!(catches(STATUS, libc::SIGINT), Some(true));
        assert_eq!(catches(STATUS, libc::SIGUSR1), Some(true));
        assert_eq!(catches(STATUS, libc::SIGTERM), Some(true));
        assert_eq!(catches(STATUS, libc::SIGHUP), Some(false));
        assert_eq!(catches(STATUS, libc::SIGPIPE), Some(false));
        assert_eq!(catches(STATUS, 32), Some(true));
        assert_eq!(catches(STATUS, 64), Some(false));
        assert_eq!(
            catches(b"Name:\tsh\nSigCgt:\t0000000000000000\n", libc::SIGTERM),
            Some(false)
        );
        assert_eq!(catches(b"Name:\tsh\n", libc::SIGTERM), None);
        assert_eq!(catches(STATUS, 65), None);
        assert_eq!(catches(STATUS, 0), None);
    }
}
