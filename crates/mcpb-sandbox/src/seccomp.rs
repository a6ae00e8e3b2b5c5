//! The seccomp filters. A denylist, because interpreters use a wide and changing set of system
//! calls; what it denies is what reaches outside the jail or widens the kernel's attack surface:
//! new sockets, io_uring, tracing, namespaces and mounts, BPF, perf, keyrings, userfaultfd,
//! modules, kexec. Dangerous calls kill the process (the run is a `violation`); creating a
//! socket (or System V IPC) fails with EPERM so that libraries which probe for one degrade
//! instead of dying.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

use crate::{Layer, SandboxError};

/// open_tree_attr (Linux 6.15) is newer than the libc crate's tables. Numbers from 424 on are
/// the same on every architecture.
const SYS_OPEN_TREE_ATTR: libc::c_long = 467;
/// statmount and listmount (Linux 6.8): the mount table of every namespace the caller can name.
const SYS_STATMOUNT: libc::c_long = 457;
const SYS_LISTMOUNT: libc::c_long = 458;
/// memfd_secret (Linux 5.14): memory the kernel itself cannot read, unaccounted where the
/// machine lacks secretmem limits.
const SYS_MEMFD_SECRET: libc::c_long = 447;

/// Calls no server or snippet needs that widen what the kernel exposes: they fail with EPERM
/// (a library probing for one degrades instead of dying). modify_ldt (x86 only) has been the
/// door of several kernel bugs.
fn needless() -> Vec<libc::c_long> {
    let mut out = vec![SYS_STATMOUNT, SYS_LISTMOUNT, SYS_MEMFD_SECRET];
    #[cfg(target_arch = "x86_64")]
    out.push(libc::SYS_modify_ldt);
    out
}

/// Every call here ends the program with SIGSYS.
const KILL: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_userfaultfd,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_fanotify_init,
    libc::SYS_mount_setattr,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    SYS_OPEN_TREE_ATTR,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_pidfd_getfd,
    libc::SYS_syslog,
    libc::SYS_vhangup,
];

const SYSV_IPC: &[libc::c_long] = &[
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmctl,
    libc::SYS_shmdt,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semctl,
    libc::SYS_semtimedop,
];

/// clone flags that create namespaces.
const CLONE_NEW: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

fn arch() -> Result<TargetArch, SandboxError> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| SandboxError::at(Layer::Seccomp, format!("{}: {e}", std::env::consts::ARCH)))
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value)
        .map_err(|e| SandboxError::at(Layer::Seccomp, e))
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    SeccompRule::new(conditions).map_err(|e| SandboxError::at(Layer::Seccomp, e))
}

fn program(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    action: SeccompAction,
) -> Result<BpfProgram, SandboxError> {
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, action, arch()?)
        .map_err(|e| SandboxError::at(Layer::Seccomp, e))?;
    BpfProgram::try_from(filter).map_err(|e| SandboxError::at(Layer::Seccomp, e))
}

pub(crate) fn filters() -> Result<Vec<BpfProgram>, SandboxError> {
    let mut kill: BTreeMap<i64, Vec<SeccompRule>> =
        KILL.iter().map(|nr| (*nr, Vec::new())).collect();
    let clone_rules = CLONE_NEW
        .iter()
        .map(|flag| rule(vec![cond(0, SeccompCmpOp::MaskedEq(*flag), *flag)?]))
        .collect::<Result<Vec<_>, _>>()?;
    kill.insert(libc::SYS_clone, clone_rules);

    let mut eperm: BTreeMap<i64, Vec<SeccompRule>> =
        needless().into_iter().map(|nr| (nr, Vec::new())).collect();
    eperm.insert(libc::SYS_socket, Vec::new());
    // System V IPC memory counts against no rlimit (a detached segment not even against the
    // address space): it is off, like sockets. POSIX shared memory needs /dev/shm, which the
    // jail does not have.
    for nr in SYSV_IPC {
        eperm.insert(*nr, Vec::new());
    }
    // A connected pair of local sockets reaches nothing; asyncio's self-pipe needs one.
    eperm.insert(
        libc::SYS_socketpair,
        vec![rule(vec![cond(
            0,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )?])?],
    );

    // clone3 passes its flags in memory a filter cannot read: ENOSYS makes libc fall back to
    // clone, whose flags the filter above checks.
    let mut enosys: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    enosys.insert(libc::SYS_clone3, Vec::new());

    let mut out = vec![
        program(kill, SeccompAction::KillProcess)?,
        program(eperm, SeccompAction::Errno(libc::EPERM as u32))?,
        program(enosys, SeccompAction::Errno(libc::ENOSYS as u32))?,
    ];
    if cfg!(target_arch = "x86_64") {
        out.push(x32_kill());
    }
    Ok(out)
}

/// The x32 ABI reaches the same kernel entry points under numbers with bit 30 set, which a
/// filter keyed on the x86_64 numbers would let through.
fn x32_kill() -> BpfProgram {
    const LD_W_ABS: u16 = 0x20;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    vec![
        sock_filter {
            code: LD_W_ABS,
            jt: 0,
            jf: 0,
            k: 0,
        },
        sock_filter {
            code: JGE_K,
            jt: 0,
            jf: 1,
            k: 0x4000_0000,
        },
        sock_filter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k: 0x8000_0000,
        },
        sock_filter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k: 0x7fff_0000,
        },
    ]
}

/// A server's filters: the same calls kill it, except io_uring, which fails with ENOSYS
/// (libuv and others probe for it and fall back); sockets and System V IPC stay (a server
/// talks to its network, when it has one, and to its own children).
pub(crate) fn server_filters() -> Result<Vec<BpfProgram>, SandboxError> {
    let io_uring = [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ];
    let mut kill: BTreeMap<i64, Vec<SeccompRule>> = KILL
        .iter()
        .filter(|nr| !io_uring.contains(nr))
        .map(|nr| (*nr, Vec::new()))
        .collect();
    let clone_rules = CLONE_NEW
        .iter()
        .map(|flag| rule(vec![cond(0, SeccompCmpOp::MaskedEq(*flag), *flag)?]))
        .collect::<Result<Vec<_>, _>>()?;
    kill.insert(libc::SYS_clone, clone_rules);
    // clone3's flags are out of a filter's reach: ENOSYS sends libc back to clone.
    let mut enosys: BTreeMap<i64, Vec<SeccompRule>> =
        io_uring.iter().map(|nr| (*nr, Vec::new())).collect();
    enosys.insert(libc::SYS_clone3, Vec::new());
    // Sockets of the families a server talks over (local, IP, netlink for its interfaces);
    // others (vsock to the hypervisor, packet, bluetooth...) reach past any namespace. And no
    // typing into a terminal.
    let mut eperm: BTreeMap<i64, Vec<SeccompRule>> =
        needless().into_iter().map(|nr| (nr, Vec::new())).collect();
    let families = [
        libc::AF_UNIX,
        libc::AF_INET,
        libc::AF_INET6,
        libc::AF_NETLINK,
    ];
    eperm.insert(
        libc::SYS_socket,
        vec![rule(
            families
                .iter()
                .map(|f| cond(0, SeccompCmpOp::Ne, *f as u64))
                .collect::<Result<Vec<_>, _>>()?,
        )?],
    );
    eperm.insert(
        libc::SYS_ioctl,
        // The kernel reads the request as 32 bits: compared as 64, a request with high bits
        // set would pass the filter and still be TIOCSTI.
        [libc::TIOCSTI, libc::TIOCLINUX]
            .iter()
            .map(|req| {
                rule(vec![
                    SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, *req)
                        .map_err(|e| SandboxError::at(Layer::Seccomp, e))?,
                ])
            })
            .collect::<Result<Vec<_>, _>>()?,
    );
    // The server is PID 1 of its namespace and dies with the sandbox's helper by its death
    // signal alone: it may not take that signal off (or trade it for one it handles).
    eperm.insert(
        libc::SYS_prctl,
        vec![rule(vec![
            SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                libc::PR_SET_PDEATHSIG as u64,
            )
            .map_err(|e| SandboxError::at(Layer::Seccomp, e))?,
        ])?],
    );
    let mut out = vec![
        program(kill, SeccompAction::KillProcess)?,
        program(enosys, SeccompAction::Errno(libc::ENOSYS as u32))?,
        program(eperm, SeccompAction::Errno(libc::EPERM as u32))?,
    ];
    if cfg!(target_arch = "x86_64") {
        out.push(x32_kill());
    }
    Ok(out)
}

pub(crate) fn apply_server() -> Result<(), SandboxError> {
    for f in server_filters()? {
        seccompiler::apply_filter(&f).map_err(|e| SandboxError::at(Layer::Seccomp, e))?;
    }
    Ok(())
}

/// Installs every filter on the calling thread (no_new_privs must be set).
pub(crate) fn apply() -> Result<(), SandboxError> {
    for f in filters()? {
        seccompiler::apply_filter(&f).map_err(|e| SandboxError::at(Layer::Seccomp, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_call_of_the_new_mount_api_is_killed() {
        for nr in [
            libc::SYS_fsopen,
            libc::SYS_fsconfig,
            libc::SYS_fsmount,
            libc::SYS_fspick,
            libc::SYS_move_mount,
            libc::SYS_open_tree,
            super::SYS_OPEN_TREE_ATTR,
            libc::SYS_mount_setattr,
        ] {
            assert!(super::KILL.contains(&nr), "{nr}");
        }
    }

    #[test]
    fn the_filters_compile_for_this_machine() {
        let filters = super::filters().unwrap();
        assert!(filters.len() >= 3);
        assert!(filters.iter().all(|f| !f.is_empty()));
    }
}
