//! The program's last steps before exec, inside the pivoted root: drop to the jail user, set
//! rlimits, keep only fds 0/1/2 and the SDK fd, no_new_privs, landlock, seccomp. Any step that
//! fails is reported as the refusing layer and the program never starts.

use std::convert::Infallible;
use std::os::unix::process::CommandExt;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, path_beneath_rules,
};
use rustix::fs::{Mode, OFlags};
use rustix::process::{Gid, Resource, Rlimit, Uid};

use crate::report::{Report, refuse};
use crate::{JAIL_UID, JAIL_WORK, JailSpec, Layer, SDK_FD, SandboxError, seccomp};

pub(crate) fn program(spec: &JailSpec, report: &Report) -> ! {
    let Err(e) = confine(spec, report);
    refuse(report, e);
    std::process::exit(127)
}

fn at(layer: Layer) -> impl Fn(rustix::io::Errno) -> SandboxError {
    move |e| SandboxError::at(layer, e)
}

fn identity() -> Result<(), SandboxError> {
    rustix::process::setsid().map_err(at(Layer::Identity))?;
    drop_capabilities(JAIL_UID)
}

/// Becomes `id` (uid and gid) in the namespace and drops every capability: the bounding,
/// ambient and process sets, checked empty afterwards.
pub(crate) fn drop_capabilities(id: u32) -> Result<(), SandboxError> {
    let gid = Gid::from_raw(id);
    let uid = Uid::from_raw(id);
    rustix::thread::set_thread_res_gid(gid, gid, gid).map_err(at(Layer::Identity))?;
    rustix::thread::set_thread_res_uid(uid, uid, uid).map_err(at(Layer::Identity))?;
    // The jail user still holds every capability of its namespace (it never was root there,
    // so changing ids dropped nothing): empty the bounding, ambient and process sets.
    use rustix::thread::{CapabilitySet, CapabilitySets};
    for cap in CapabilitySet::all().iter() {
        match rustix::thread::remove_capability_from_bounding_set(cap) {
            Ok(()) | Err(rustix::io::Errno::INVAL) => {}
            Err(e) => {
                return Err(SandboxError::at(
                    Layer::Identity,
                    format!("bounding set: {e}"),
                ));
            }
        }
    }
    rustix::thread::clear_ambient_capability_set().map_err(at(Layer::Identity))?;
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    rustix::thread::set_capabilities(None, none).map_err(at(Layer::Identity))?;
    let caps = rustix::thread::capabilities(None).map_err(at(Layer::Identity))?;
    if !caps.effective.is_empty() || !caps.permitted.is_empty() {
        return Err(SandboxError::at(
            Layer::Identity,
            "capabilities remain after dropping to the jail user",
        ));
    }
    Ok(())
}

fn rlimits(spec: &JailSpec) -> Result<(), SandboxError> {
    // When the machine runs short of memory, the run goes first. Best effort: without /proc
    // in the jail there is no file to write.
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");
    let l = &spec.limits;
    for (resource, value) in [
        (Resource::As, l.memory_bytes),
        (Resource::Nproc, l.processes),
        (Resource::Fsize, l.file_size_bytes),
        (Resource::Nofile, l.open_files.max(8)),
        (Resource::Cpu, l.cpu_seconds.max(1)),
        (Resource::Core, 0),
        (Resource::Memlock, 0),
        (Resource::Msgqueue, 0),
    ] {
        rustix::process::setrlimit(
            resource,
            Rlimit {
                current: Some(value),
                maximum: Some(value),
            },
        )
        .map_err(|e| SandboxError::at(Layer::Rlimits, format!("{resource:?}: {e}")))?;
    }
    Ok(())
}

/// stdin from /dev/null; every fd above the SDK's closed, except the report pipe, which is
/// close-on-exec (so a refusal from the steps below can still be reported).
fn fds(report: &Report) -> Result<(), SandboxError> {
    let null =
        rustix::fs::open("/dev/null", OFlags::RDONLY, Mode::empty()).map_err(at(Layer::Fds))?;
    rustix::stdio::dup2_stdin(&null).map_err(at(Layer::Fds))?;
    drop(null);
    close_fds_from(u32::try_from(SDK_FD + 1).unwrap_or(4), report)
}

/// Every fd from `first` on closed, except the report's, which becomes close-on-exec.
pub(crate) fn close_fds_from(first: u32, report: &Report) -> Result<(), SandboxError> {
    let keep = std::os::fd::AsRawFd::as_raw_fd(&report.fd());
    let report_fd = u32::try_from(keep).unwrap_or(u32::MAX);
    for (lo, hi) in [
        (first, report_fd.saturating_sub(1)),
        (report_fd.saturating_add(1), u32::MAX),
    ] {
        if lo > hi {
            continue;
        }
        // SAFETY: close_range only closes descriptors; the ranges leave out every fd below
        // `first` (the stdio, and a code run's SDK fd) and the report pipe, and no Rust object
        // of this process still uses any fd being closed (the host fds and pipes were held by
        // the init this process was forked from).
        let rc = unsafe { libc::syscall(libc::SYS_close_range, lo, hi, 0u32) };
        if rc != 0 {
            return Err(SandboxError::at(
                Layer::Fds,
                std::io::Error::last_os_error(),
            ));
        }
    }
    rustix::io::fcntl_setfd(report.fd(), rustix::io::FdFlags::CLOEXEC).map_err(at(Layer::Fds))?;
    Ok(())
}

fn landlock() -> Result<(), SandboxError> {
    restrict(&[JAIL_WORK.into()], &["/dev/null"], false)
}

/// Landlock for code runs and servers alike: read and run anywhere it can see, write only
/// under `writable`, read and write `devices`; no signals or abstract sockets out of its
/// domain; with `network` false, no TCP bind or connect.
pub(crate) fn restrict(
    writable: &[std::path::PathBuf],
    devices: &[&str],
    network: bool,
) -> Result<(), SandboxError> {
    let abi = ABI::V6;
    let err = |e: landlock::RulesetError| SandboxError::at(Layer::Landlock, e);
    let mut ruleset = landlock::Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?;
    if !network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(err)?;
    }
    let status = ruleset
        .scope(Scope::from_all(abi))
        .map_err(err)?
        .create()
        .map_err(err)?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))
        .map_err(err)?
        .add_rules(path_beneath_rules(writable, AccessFs::from_all(abi)))
        .map_err(err)?
        .add_rules(path_beneath_rules(
            devices,
            AccessFs::from_read(abi) | AccessFs::WriteFile,
        ))
        .map_err(err)?
        .restrict_self()
        .map_err(err)?;
    enforced(&status)
}

/// A ruleset the kernel took but does not enforce is a layer missing: refused.
pub(crate) fn enforced(status: &landlock::RestrictionStatus) -> Result<(), SandboxError> {
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(SandboxError::at(
            Layer::Landlock,
            "this kernel does not enforce landlock (enable it with lsm=landlock,... at boot)",
        ));
    }
    Ok(())
}

/// Closes the report pipe in a program that runs without exec.
fn close_report(report: &Report) {
    let fd = std::os::fd::AsRawFd::as_raw_fd(&report.fd());
    // SAFETY: close_range on the single number of the report pipe, which no code of the
    // program uses from here on (the Report is never written again in this process).
    unsafe { libc::syscall(libc::SYS_close_range, fd, fd, 0u32) };
}

fn confine(spec: &JailSpec, report: &Report) -> Result<Infallible, SandboxError> {
    identity()?;
    report.applied(Layer::Identity);
    rlimits(spec)?;
    report.applied(Layer::Rlimits);
    fds(report)?;
    report.applied(Layer::Fds);
    std::env::set_current_dir(JAIL_WORK).map_err(|e| SandboxError::at(Layer::Fds, e))?;
    rustix::thread::set_no_new_privs(true).map_err(at(Layer::NoNewPrivs))?;
    report.applied(Layer::NoNewPrivs);
    landlock()?;
    report.applied(Layer::Landlock);
    seccomp::apply()?;
    report.applied(Layer::Seccomp);
    if spec.in_process {
        let run = crate::IN_PROCESS
            .get()
            .ok_or_else(|| SandboxError::at(Layer::Exec, "this binary has no built-in runtime"))?;
        // The report pipe is close-on-exec only: without an exec it must go by hand.
        close_report(report);
        let code = run(&spec.argv);
        std::process::exit(code);
    }
    let err = std::process::Command::new(&spec.argv[0])
        .args(&spec.argv[1..])
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .exec();
    Err(SandboxError::at(
        Layer::Exec,
        format!("{}: {err}", spec.argv[0]),
    ))
}
