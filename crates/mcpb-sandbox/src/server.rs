//! The server mode: one stdio MCP server run for as long as the broker keeps it, under a
//! [`ServerSpec`]. One process of the sandbox's own beside it (`alone`): the helper enters the
//! new namespaces itself and its fork, PID 1 of the new PID namespace, becomes the server. A
//! check's tracer keeps a code run's tree (helper → holder in new namespaces → init, PID 1,
//! the tracer → the server). The server keeps the helper's stdin, stdout, stderr and
//! environment, sees the host's root read-only with its grants, and is exec'd as the daemon's
//! own user. A layer that cannot be applied is said on stderr, naming the layer, and the
//! server never starts.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::time::Instant;

use rustix::process::{Pid, Signal, WaitOptions};
use rustix::thread::UnshareFlags;

use crate::launch::{self, Handshake, Holder, IdMaps};
use crate::relay;
use crate::report::{Report, fork, refuse};
use crate::server_root::{Opened, build};
use crate::{Layer, SandboxError, ServerSpec};

/// The spec is a few paths; more is a broken caller.
const MAX_SPEC_BYTES: usize = 1 << 20;

/// The uid the server has inside its namespace: the daemon's own, so that the host's
/// `/etc/passwd` names it; root's is mapped from an ordinary id instead, because a process
/// that is uid 0 in its namespace regains every capability there at exec.
pub(crate) fn inside_uid(host_uid: u32) -> u32 {
    if host_uid == 0 {
        crate::JAIL_UID
    } else {
        host_uid
    }
}

pub(crate) fn main() -> ! {
    let start = Instant::now();
    let Ok(err) = rustix::io::fcntl_dupfd_cloexec(rustix::stdio::stderr(), 3) else {
        std::process::exit(125);
    };
    let report = Report::text(err, start);
    let code = match run(&report) {
        Ok(code) => code,
        Err(e) => {
            refuse(&report, e);
            125
        }
    };
    std::process::exit(code)
}

fn parse() -> Result<(ServerSpec, Vec<OsString>), SandboxError> {
    let mut args = std::env::args_os().skip(2);
    let spec = args
        .next()
        .ok_or_else(|| SandboxError::at(Layer::Spec, "no spec"))?;
    let text = spec
        .to_str()
        .filter(|t| t.len() <= MAX_SPEC_BYTES)
        .ok_or_else(|| SandboxError::at(Layer::Spec, "the spec is not text of a sane size"))?;
    let spec: ServerSpec =
        serde_json::from_str(text).map_err(|e| SandboxError::at(Layer::Spec, e))?;
    let argv: Vec<OsString> = args.collect();
    if argv.is_empty() {
        return Err(SandboxError::at(Layer::Spec, "nothing to run"));
    }
    Ok((spec, argv))
}

fn run(report: &Report) -> Result<i32, SandboxError> {
    let (spec, argv) = parse()?;
    relay::note_daemon();
    if !spec.trace {
        return alone(&spec, &argv, report);
    }
    let launch = Holder {
        cgroup: spec.cgroup.as_ref(),
        maps: ids(&spec),
        refused: 125,
    };
    let child = launch.start(
        report,
        |child| relay::relay_term(child.as_raw_pid(), None),
        |handshake| holder(&spec, &argv, report, handshake),
    )?;
    Ok(exit_code(relay::reap(child).map_err(sup)?))
}

fn sup(e: rustix::io::Errno) -> SandboxError {
    SandboxError::at(Layer::Supervise, e)
}

fn exit_code(status: Option<(Pid, rustix::process::WaitStatus)>) -> i32 {
    match status {
        Some((_, s)) => s
            .exit_status()
            .or_else(|| {
                s.terminating_signal()
                    .map(|sig| 128 + relay::told_signal(sig))
            })
            .unwrap_or(125),
        None => 125,
    }
}

/// The whole sandbox of a server in this one process: it moves itself into the server's
/// cgroup, makes the user namespace and writes its own id maps (it maps only the ids it has,
/// which needs nobody outside), then the mount namespace and the rest; its one fork is PID 1
/// of the new PID namespace and becomes the server. Nothing else runs beside the server: when
/// it ends, the kernel ends what it left. A check's tracer keeps the tree of `holder`.
fn alone(spec: &ServerSpec, argv: &[OsString], report: &Report) -> Result<i32, SandboxError> {
    let daemon = rustix::process::getppid();
    if let Some(c) = spec.cgroup.as_ref() {
        crate::cgroup::RunCgroup::open(c.dir.clone(), c.v2)
            .enter(rustix::process::getpid().as_raw_pid())
            .map_err(|e| SandboxError::at(Layer::Cgroup, format!("{}: {e}", c.dir.display())))?;
        report.applied(Layer::Cgroup);
    }
    launch::unshare(UnshareFlags::NEWUSER, Layer::UserNamespace)?;
    report.applied(Layer::UserNamespace);
    ids(spec).write("self")?;
    // The daemon's death signal survives the new namespace; asked again all the same, and
    // a daemon gone already means nobody wants this server.
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL)).map_err(sup)?;
    if rustix::process::getppid() != daemon {
        return Ok(125);
    }
    launch::unshare(UnshareFlags::NEWNS, Layer::MountNamespace)?;
    report.applied(Layer::MountNamespace);
    let opened = Opened::open(spec)?;
    launch::enter_the_rest(spec.network, report)?;
    let (wait, told) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(sup)?;
    let Some(child) = fork(Layer::PidNamespace)? else {
        drop(told);
        let Err(e) = first(spec, opened, argv, report, wait);
        refuse(report, e);
        std::process::exit(125);
    };
    drop((wait, opened));
    let kill = |e: SandboxError| {
        let _ = rustix::process::kill_process(child, Signal::KILL);
        let _ = rustix::process::waitpid(Some(child), WaitOptions::empty());
        e
    };
    // Opened now, from the host's /proc: the server's root replaces this process's too.
    let status = rustix::fs::open(
        format!("/proc/{}/status", child.as_raw_pid()),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| kill(sup(e)))?;
    relay::relay_term_to_first(child.as_raw_pid(), &status).map_err(kill)?;
    rustix::io::write(&told, child.as_raw_pid().to_string().as_bytes())
        .map_err(|e| kill(sup(e)))?;
    drop(told);
    let code = exit_code(relay::reap_first(child).map_err(sup)?);
    drop(status);
    Ok(code)
}

fn ids(spec: &ServerSpec) -> IdMaps {
    IdMaps {
        inside_uid: inside_uid(spec.host_uid),
        host_uid: spec.host_uid,
        inside_gid: inside_uid(spec.host_gid),
        host_gid: spec.host_gid,
    }
}

/// The server before its exec, PID 1 of its namespace: it dies with the helper, learns its
/// host pid from it (end of file: the helper is gone), builds its view of the files, and
/// becomes the server. The host's fds are closed once bound: nothing of them reaches it.
fn first(
    spec: &ServerSpec,
    opened: Opened,
    argv: &[OsString],
    report: &Report,
    wait: OwnedFd,
) -> Result<std::convert::Infallible, SandboxError> {
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL)).map_err(sup)?;
    let mut answer = [0u8; 16];
    let n = rustix::io::read(&wait, &mut answer).map_err(sup)?;
    let host_pid = std::str::from_utf8(answer.get(..n).unwrap_or_default())
        .ok()
        .and_then(|t| t.parse::<u32>().ok());
    drop(wait);
    if host_pid.is_none() {
        std::process::exit(125);
    }
    build(spec, &opened)?;
    drop(opened);
    rustix::system::sethostname(b"sandbox").map_err(|e| SandboxError::at(Layer::Hostname, e))?;
    exec(spec, argv, report, host_pid)
}

/// In new user and mount namespaces (and PID, IPC, UTS, network), forks the init and waits.
fn holder(
    spec: &ServerSpec,
    argv: &[OsString],
    report: &Report,
    handshake: &Handshake,
) -> Result<i32, SandboxError> {
    let helper = rustix::process::getppid();
    if !launch::enter(handshake, report)? {
        return Ok(125);
    }
    let opened = Opened::open(spec)?;
    launch::enter_the_rest(spec.network, report)?;
    let (ours, theirs) = relay::pid_link()?;
    let Some(child) = fork(Layer::PidNamespace)? else {
        drop(ours);
        let code = match init(spec, &opened, argv, report, theirs) {
            Ok(code) => code,
            Err(e) => {
                refuse(report, e);
                125
            }
        };
        std::process::exit(code);
    };
    drop(theirs);
    relay::relay_term(child.as_raw_pid(), helper.map(Pid::as_raw_pid))?;
    relay::answer_host_pid(&ours);
    drop(ours);
    Ok(exit_code(relay::reap(child).map_err(sup)?))
}

/// PID 1 of the server's namespace: builds its view of the files, starts it, and when it
/// ends, ends everything it left (the namespace dies with this process).
fn init(
    spec: &ServerSpec,
    opened: &Opened,
    argv: &[OsString],
    report: &Report,
    pid_link: OwnedFd,
) -> Result<i32, SandboxError> {
    let sup = |e: rustix::io::Errno| SandboxError::at(Layer::Supervise, e);
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL)).map_err(sup)?;
    // The holder may have died before the signal was asked for (nobody would send it then):
    // its end of the pid link is closed, which a peek sees at once.
    if relay::peer_gone(&pid_link) {
        return Ok(125);
    }
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(sup)?;
    // A check's file, opened while the host is in sight (the server's view has no way to it).
    let mut said = if spec.trace {
        crate::trace::Said::open()
    } else {
        None
    };
    build(spec, opened)?;
    rustix::system::sethostname(b"sandbox").map_err(|e| SandboxError::at(Layer::Hostname, e))?;
    // A check's tracer seizes the server before it goes on (it waits on `traced`).
    let traced = if spec.trace {
        // An undumpable process cannot be traced: the server starts as a dumpable copy of the
        // init (its exec sets it again by the usual rules), and the init goes back to
        // undumpable at once.
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::Dumpable)
            .map_err(sup)?;
        Some(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(sup)?)
    } else {
        None
    };
    let Some(program) = fork(Layer::Supervise)? else {
        if let Some((r, w)) = traced {
            drop(w);
            let _ = rustix::io::read(&r, &mut [0u8; 1]);
        }
        let host_pid = relay::ask_host_pid(pid_link);
        let Err(e) = exec(spec, argv, report, host_pid);
        refuse(report, e);
        std::process::exit(125);
    };
    drop(pid_link);
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(sup)?;
    relay::relay_term(-1, None)?;
    // The pipe's ends go at the end of the match: the server goes on, traced or not.
    let traced = match (traced, said.as_mut()) {
        (Some(_pipe), Some(said)) => match crate::trace::seize(program) {
            Ok(()) => {
                said.traced();
                true
            }
            Err(e) => {
                said.not_traced(&e.to_string());
                false
            }
        },
        _ => false,
    };
    let code = if let (true, Some(said)) = (traced, said.as_mut()) {
        crate::trace::follow(program, said)
    } else {
        loop {
            match rustix::process::wait(WaitOptions::empty()) {
                Ok(Some((p, s))) if p == program => break exit_code(Some((p, s))),
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(sup(e)),
            }
        }
    };
    // SAFETY: kill(-1) from PID 1 of a namespace signals every other process in it and
    // nothing outside; it takes no pointers.
    unsafe { libc::kill(-1, libc::SIGKILL) };
    Ok(code)
}

/// The server's last steps: its own user without capabilities, only fds 0/1/2, no_new_privs,
/// landlock, seccomp; then exec with the helper's environment.
fn exec(
    spec: &ServerSpec,
    argv: &[OsString],
    report: &Report,
    host_pid: Option<u32>,
) -> Result<std::convert::Infallible, SandboxError> {
    // A session of its own: no controlling terminal to type into (TIOCSTI) or read from.
    rustix::process::setsid().map_err(|e| SandboxError::at(Layer::Identity, e))?;
    crate::confine::drop_capabilities(inside_uid(spec.host_uid))?;
    for (resource, value) in [
        (rustix::process::Resource::Core, Some(0)),
        (rustix::process::Resource::Nproc, spec.processes),
    ] {
        if let Some(v) = value {
            rustix::process::setrlimit(
                resource,
                rustix::process::Rlimit {
                    current: Some(v),
                    maximum: Some(v),
                },
            )
            .map_err(|e| SandboxError::at(Layer::Rlimits, format!("{resource:?}: {e}")))?;
        }
    }
    crate::confine::close_fds_from(3, report)?;
    let dir = spec.cwd.clone().unwrap_or_else(|| spec.home.clone());
    std::env::set_current_dir(&dir)
        .map_err(|e| SandboxError::at(Layer::Fds, format!("{}: {e}", dir.display())))?;
    rustix::thread::set_no_new_privs(true).map_err(|e| SandboxError::at(Layer::NoNewPrivs, e))?;
    landlock(spec)?;
    crate::seccomp::apply_server()?;
    report.say(&format!(
        "{} runs with its own user, mount, pid, ipc, uts{} namespaces, no capabilities, no_new_privs, landlock and seccomp",
        spec.name,
        if spec.network { "" } else { ", network" }
    ));
    let mut command = std::process::Command::new(&argv[0]);
    command.args(&argv[1..]);
    if let Some(pid) = host_pid {
        command.env(relay::HOST_PID_VAR, pid.to_string());
    }
    command.env_remove(crate::trace::FILE_VAR);
    for var in crate::coverage::VARS {
        command.env_remove(var);
    }
    let err = command.exec();
    Err(SandboxError::at(
        Layer::Exec,
        format!("{}: {err}", argv[0].to_string_lossy()),
    ))
}

/// Read and run anywhere it can see; write only to its home, /tmp, /dev/shm and its write
/// grants; no signals or abstract sockets out of its domain; no TCP when it has no network.
fn landlock(spec: &ServerSpec) -> Result<(), SandboxError> {
    let mut writable: Vec<PathBuf> = vec![spec.home.clone(), "/tmp".into()];
    writable.extend(spec.write.iter().cloned());
    if std::path::Path::new("/dev/shm").is_dir() {
        writable.push("/dev/shm".into());
    }
    let devices: Vec<&str> = ["/dev/null", "/dev/zero", "/dev/full"]
        .into_iter()
        .filter(|d| std::path::Path::new(d).exists())
        .collect();
    crate::confine::restrict(&writable, &devices, spec.network)
}
