//! `sandbox check`'s tracer: the init follows the server's system calls (ptrace, every process
//! and thread it starts) and says each one the kernel refused with a path or an address,
//! so a user tunes `fs` and `network` from what the kernel said rather than from what the
//! server chose to print. Only for a check: a server the daemon runs is never traced.
//!
//! The tracer's lines go to a file the check made under the runtime dir (`FILE_VAR`), opened
//! by the init before it builds the server's view: the server never holds it nor sees the
//! place (its stderr, which it can reopen, would let it read or forge them). The file says
//! `traced` first; without that line the check takes nothing in it as the kernel's account.
//! A process the server starts with CLONE_UNTRACED is not followed.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::os::unix::fs::FileExt;

use rustix::process::Pid;

use crate::{Layer, SandboxError};

/// Enough to tune a policy; a server that keeps failing the same way says so once per path.
const MAX_LINES: usize = 200;
/// Paths missing in the sandbox, most of them missing on the host too (a module search), which
/// the check drops: more of them, so that they never crowd out a refusal.
const MAX_MISSING: usize = 2000;

/// The variable naming the check's file (removed from the server's environment).
pub use crate::env::TRACE_FILE as FILE_VAR;

/// Where the tracer's lines go.
pub(crate) struct Said {
    out: std::fs::File,
    lines: HashSet<String>,
    refused: usize,
    missing: usize,
    failed: bool,
}

impl Said {
    /// The check's file, opened while the host's paths are still in sight; `None` when there
    /// is none (the check then finds no `traced` line).
    pub(crate) fn open() -> Option<Self> {
        let path = std::env::var_os(FILE_VAR)?;
        let out = std::fs::OpenOptions::new().append(true).open(path).ok()?;
        Some(Self {
            out,
            lines: HashSet::new(),
            refused: 0,
            missing: 0,
            failed: false,
        })
    }

    fn line(&mut self, text: &str) {
        let _ = writeln!(self.out, "{text}");
    }

    /// Following the server from here on.
    pub(crate) fn traced(&mut self) {
        self.line("traced");
    }

    /// `not traced: why`, once: what follows is not the kernel's account.
    pub(crate) fn not_traced(&mut self, why: &str) {
        if !self.failed {
            self.failed = true;
            self.line(&format!("not traced: {why}"));
        }
    }

    fn denied(&mut self, line: String) {
        let (count, cap) = if line.starts_with("ENOENT ") {
            (&mut self.missing, MAX_MISSING)
        } else {
            (&mut self.refused, MAX_LINES)
        };
        if *count < cap && self.lines.insert(line.clone()) {
            *count += 1;
            self.line(&format!("denied: {line}"));
        }
    }
}

/// Starts following `program`, which waits (on the pipe the caller holds) until this returns.
pub(crate) fn seize(program: Pid) -> Result<(), SandboxError> {
    let options = libc::PTRACE_O_TRACESYSGOOD
        | libc::PTRACE_O_TRACEFORK
        | libc::PTRACE_O_TRACEVFORK
        | libc::PTRACE_O_TRACECLONE
        | libc::PTRACE_O_TRACEEXEC
        | libc::PTRACE_O_EXITKILL;
    let pid = program.as_raw_pid();
    let null = std::ptr::null_mut::<libc::c_void>();
    // SAFETY: PTRACE_SEIZE and PTRACE_INTERRUPT take a null address and an integer (the
    // options, passed where the kernel reads its data word); the tracee is this process's own
    // child.
    let rc = unsafe {
        let rc = libc::ptrace(libc::PTRACE_SEIZE, pid, null, options as libc::c_long);
        if rc == 0 {
            libc::ptrace(libc::PTRACE_INTERRUPT, pid, null, 0 as libc::c_long)
        } else {
            rc
        }
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(SandboxError::at(
            Layer::Supervise,
            format!(
                "cannot trace the server: {}",
                std::io::Error::last_os_error()
            ),
        ))
    }
}

/// Runs every traced process until `program` ends; says the refusals; returns the program's
/// exit code (128 + the signal for a killed one).
pub(crate) fn follow(program: Pid, said: &mut Said) -> i32 {
    let mut entries: HashMap<i32, (i64, [u64; 6])> = HashMap::new();
    let null = std::ptr::null_mut::<libc::c_void>();
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer for the call's duration.
        let tid = unsafe { libc::waitpid(-1, &mut status, libc::__WALL) };
        if tid < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return 125;
        }
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            entries.remove(&tid);
            if tid == program.as_raw_pid() {
                return if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else {
                    128 + libc::WTERMSIG(status)
                };
            }
            continue;
        }
        if !libc::WIFSTOPPED(status) {
            continue;
        }
        let sig = libc::WSTOPSIG(status);
        let event = status >> 16;
        let group_stop = event == libc::PTRACE_EVENT_STOP
            && matches!(
                sig,
                libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
            );
        let (request, inject) = if sig == (libc::SIGTRAP | 0x80) {
            syscall_stop(tid, &mut entries, said);
            (libc::PTRACE_SYSCALL, 0)
        } else if group_stop {
            // Stopped as it asked: it stays stopped until a SIGCONT, as untraced.
            (libc::PTRACE_LISTEN, 0)
        } else if event != 0 {
            // Fork, clone, exec, and the stops of a seizure: nothing to pass on.
            (libc::PTRACE_SYSCALL, 0)
        } else {
            (libc::PTRACE_SYSCALL, sig)
        };
        // SAFETY: resumes a tracee in a ptrace stop; a null address and the signal to deliver.
        unsafe { libc::ptrace(request, tid, null, inject as libc::c_long) };
    }
}

fn syscall_stop(tid: i32, entries: &mut HashMap<i32, (i64, [u64; 6])>, said: &mut Said) {
    // SAFETY: a zeroed ptrace_syscall_info is a valid value; the kernel writes at most its
    // size, which is passed.
    let mut info: libc::ptrace_syscall_info = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::ptrace_syscall_info>();
    // SAFETY: `info` is valid for `size` bytes for the call's duration.
    let rc = unsafe {
        libc::ptrace(
            libc::PTRACE_GET_SYSCALL_INFO,
            tid,
            size,
            &mut info as *mut libc::ptrace_syscall_info,
        )
    };
    if rc <= 0 {
        said.not_traced(&format!(
            "the kernel does not describe system calls to a tracer ({})",
            std::io::Error::last_os_error()
        ));
        return;
    }
    match info.op {
        libc::PTRACE_SYSCALL_INFO_ENTRY => {
            // SAFETY: the kernel filled the entry member for an entry stop.
            let entry = unsafe { info.u.entry };
            entries.insert(tid, (entry.nr as i64, entry.args));
        }
        libc::PTRACE_SYSCALL_INFO_EXIT => {
            // SAFETY: the kernel filled the exit member for an exit stop.
            let exit = unsafe { info.u.exit };
            let Some((nr, args)) = entries.remove(&tid) else {
                return;
            };
            if exit.is_error == 0 {
                return;
            }
            let errno = i32::try_from(-exit.sval).unwrap_or(0);
            match refusal(tid, nr, &args, errno) {
                Ok(Some(line)) => said.denied(line),
                Ok(None) => {}
                Err(e) => said.not_traced(&format!("cannot read the server's memory: {e}")),
            }
        }
        _ => {}
    }
}

/// `<errno> <call> <path or address>` for a refusal worth a user's attention; an error when
/// the tracee's memory cannot be opened at all.
fn refusal(tid: i32, nr: i64, args: &[u64; 6], errno: i32) -> std::io::Result<Option<String>> {
    let why = match errno {
        libc::EACCES => "EACCES",
        libc::EPERM => "EPERM",
        libc::EROFS => "EROFS",
        libc::ENOENT => "ENOENT",
        // A file granted alone, replaced by a rename over it: a mount point cannot be.
        libc::EBUSY => "EBUSY",
        libc::ENETUNREACH => "ENETUNREACH",
        _ => return Ok(None),
    };
    let call = if let Some(c) = path_call(nr) {
        Some(c)
    } else if nr == libc::SYS_connect {
        Some(("connect", usize::MAX))
    } else if nr == libc::SYS_bind {
        Some(("bind", usize::MAX))
    } else {
        None
    };
    let Some((call, index)) = call else {
        return Ok(None);
    };
    let mem = std::fs::File::open(format!("/proc/{tid}/mem"))?;
    let what = if index == usize::MAX {
        read_address(&mem, args[1], args[2])
    } else {
        read_string(&mem, args[index])
    };
    // A missing relative path is a server looking around; a missing absolute one may be a
    // path the sandbox hides (the caller checks the host).
    Ok(what
        .filter(|w| errno != libc::ENOENT || w.starts_with('/'))
        .map(|w| format!("{why} {call} {w}")))
}

/// Control characters escaped (one line per refusal); everything else as the path is, so the
/// check can look it up on the host.
fn one_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

/// Calls that take a path, and which argument it is.
fn path_call(nr: i64) -> Option<(&'static str, usize)> {
    let named: &[(i64, &str, usize)] = &[
        (libc::SYS_openat, "open", 1),
        (libc::SYS_openat2, "open", 1),
        (libc::SYS_newfstatat, "stat", 1),
        (libc::SYS_statx, "stat", 1),
        (libc::SYS_faccessat, "access", 1),
        (libc::SYS_faccessat2, "access", 1),
        (libc::SYS_mkdirat, "mkdir", 1),
        (libc::SYS_unlinkat, "unlink", 1),
        (libc::SYS_renameat2, "rename", 1),
        (libc::SYS_execve, "exec", 0),
        (libc::SYS_execveat, "exec", 1),
        (libc::SYS_chdir, "chdir", 0),
        (libc::SYS_readlinkat, "readlink", 1),
        (libc::SYS_truncate, "truncate", 0),
        (libc::SYS_fchmodat, "chmod", 1),
        (libc::SYS_utimensat, "utimes", 1),
        (libc::SYS_symlinkat, "symlink", 2),
        (libc::SYS_linkat, "link", 3),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_open, "open", 0),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_creat, "open", 0),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_stat, "stat", 0),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_lstat, "stat", 0),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_access, "access", 0),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_mkdir, "mkdir", 0),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_unlink, "unlink", 0),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_rmdir, "rmdir", 0),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_rename, "rename", 0),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_renameat, "rename", 1),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_readlink, "readlink", 0),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_symlink, "symlink", 1),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_link, "link", 1),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_chmod, "chmod", 0),
    ];
    named
        .iter()
        .find(|(n, ..)| *n == nr)
        .map(|&(_, call, index)| (call, index))
}

/// A NUL-terminated string at `addr` in the tracee (through /proc/<tid>/mem, which a tracer
/// may read), printable.
fn read_string(mem: &std::fs::File, addr: u64) -> Option<String> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 256];
    while out.len() < 4096 {
        let n = mem.read_at(&mut chunk, addr + out.len() as u64).ok()?;
        if n == 0 {
            return None;
        }
        if let Some(end) = chunk[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return Some(one_line(&out));
        }
        out.extend_from_slice(&chunk[..n]);
    }
    None
}

/// An IPv4 or IPv6 address and port, or a unix socket's path, from a sockaddr in the tracee.
fn read_address(mem: &std::fs::File, addr: u64, len: u64) -> Option<String> {
    let mut raw = vec![0u8; usize::try_from(len).ok()?.min(128)];
    let n = mem.read_at(&mut raw, addr).ok()?;
    let raw = raw.get(..n)?;
    let family = i32::from(u16::from_ne_bytes([*raw.first()?, *raw.get(1)?]));
    let port = |b: &[u8]| u16::from_be_bytes([b[2], b[3]]);
    match family {
        libc::AF_INET if raw.len() >= 8 => {
            let ip = std::net::Ipv4Addr::new(raw[4], raw[5], raw[6], raw[7]);
            Some(format!("{ip}:{}", port(raw)))
        }
        libc::AF_INET6 if raw.len() >= 24 => {
            let octets: [u8; 16] = raw[8..24].try_into().ok()?;
            Some(format!(
                "[{}]:{}",
                std::net::Ipv6Addr::from(octets),
                port(raw)
            ))
        }
        libc::AF_UNIX => {
            let path = raw.get(2..)?;
            let path = path.split(|&b| b == 0).next().unwrap_or_default();
            (!path.is_empty()).then(|| one_line(path))
        }
        _ => None,
    }
}
