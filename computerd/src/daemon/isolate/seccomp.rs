//! The seccomp policy: reviewed data, one reason per entry, compiled with
//! seccompiler and installed on every thread (TSYNC) before any program runs.
//!
//! Everything not listed is allowed: the filter is a deny list for calls
//! that open a way around the computer's other lines (vsock past the network
//! namespace, io_uring past a filter on socket(2)), plus calls in the spirit
//! of Docker's default profile that a program in a computer has no use for
//! and that widen the kernel's attack surface. A call of another
//! architecture or table (32-bit x86, x32) gets ENOSYS whatever it is.

use crate::daemon::setup::SetupError;
use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

/// What a listed call gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deny {
    /// EPERM: the call exists and is refused.
    Eperm,
    /// ENOSYS: as if the kernel had no such call, so libc falls back.
    Enosys,
}

/// Which calls of a syscall number an entry matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Always,
    /// The first argument, compared as 32 bits, equals this.
    Arg0Is(u64),
    /// The first argument, compared as 32 bits, has every bit of this mask.
    Arg0Has(u64),
}

#[derive(Clone, Copy, Debug)]
pub struct Entry {
    pub name: &'static str,
    pub nr: i64,
    pub when: When,
    pub deny: Deny,
    pub reason: &'static str,
}

/// An entry by the call's `SYS_` constant, from which its name comes too,
/// so the two cannot disagree; without a `When` and a `Deny`, every call
/// of it gets EPERM.
macro_rules! deny {
    ($sys:ident, $reason:literal) => {
        deny!($sys, When::Always, Deny::Eperm, $reason)
    };
    ($sys:ident, $when:expr, $deny:expr, $reason:literal) => {
        Entry {
            name: stringify!($sys).split_at("SYS_".len()).1,
            nr: libc::$sys,
            when: $when,
            deny: $deny,
            reason: $reason,
        }
    };
}

/// The policy. A test compiles it and runs the program against every entry.
pub const POLICY: &[Entry] = &[
    deny!(
        SYS_socket,
        When::Arg0Is(libc::AF_VSOCK as u64),
        Deny::Eperm,
        "AF_VSOCK: a network namespace does not cut vsock, where a virtual machine's own agent may listen"
    ),
    deny!(
        SYS_io_uring_setup,
        "io_uring rings open sockets and files past a filter on socket(2)"
    ),
    deny!(SYS_io_uring_enter, "io_uring: as io_uring_setup"),
    deny!(SYS_io_uring_register, "io_uring: as io_uring_setup"),
    deny!(
        SYS_unshare,
        When::Arg0Has(libc::CLONE_NEWUSER as u64),
        Deny::Eperm,
        "a user namespace hands an unprivileged program every capability over new namespaces: the widest kernel surface there is (Docker refuses it)"
    ),
    deny!(
        SYS_clone,
        When::Arg0Has(libc::CLONE_NEWUSER as u64),
        Deny::Eperm,
        "CLONE_NEWUSER: as unshare"
    ),
    deny!(
        SYS_clone3,
        When::Always,
        Deny::Enosys,
        "its flags are in memory a filter cannot read; ENOSYS makes libc fall back to clone, whose flags it can"
    ),
    deny!(
        SYS_setns,
        "joining another namespace (Docker refuses it without CAP_SYS_ADMIN)"
    ),
    deny!(
        SYS_bpf,
        "eBPF programs run in the kernel: a large surface for unprivileged code (Docker)"
    ),
    deny!(
        SYS_perf_event_open,
        "kernel surface and side channels (Docker, without CAP_PERFMON)"
    ),
    deny!(
        SYS_userfaultfd,
        "lets a program stall the kernel on a page fault, a staple of kernel exploits (Docker)"
    ),
    deny!(SYS_add_key, "the kernel keyring is not namespaced (Docker)"),
    deny!(SYS_keyctl, "the kernel keyring is not namespaced (Docker)"),
    deny!(
        SYS_request_key,
        "the kernel keyring is not namespaced (Docker)"
    ),
    deny!(
        SYS_open_by_handle_at,
        "opens files by handle past the mount tree, the classic container escape (Docker)"
    ),
    deny!(SYS_kexec_load, "loads a new kernel (Docker)"),
    deny!(SYS_kexec_file_load, "loads a new kernel (Docker)"),
    deny!(SYS_init_module, "loads kernel code (Docker)"),
    deny!(SYS_finit_module, "loads kernel code (Docker)"),
    deny!(SYS_delete_module, "unloads kernel code (Docker)"),
    deny!(SYS_acct, "process accounting is the host's (Docker)"),
    deny!(SYS_swapon, "swap is the host's (Docker)"),
    deny!(SYS_swapoff, "swap is the host's (Docker)"),
    deny!(
        SYS_reboot,
        "the machine is not the computer's to reboot (Docker)"
    ),
    deny!(
        SYS_mount,
        "the mount tree is set up before programs run (Docker)"
    ),
    deny!(SYS_umount2, "as mount"),
    deny!(SYS_pivot_root, "as mount"),
    deny!(SYS_move_mount, "the new mount API: as mount"),
    deny!(SYS_open_tree, "the new mount API: as mount"),
    deny!(SYS_fsopen, "the new mount API: as mount"),
    deny!(SYS_fsmount, "the new mount API: as mount"),
    deny!(SYS_fspick, "the new mount API: as mount"),
];

/// Calls the issue names that have no number here: the architecture check covers them.
pub const BY_ARCHITECTURE: &[(&str, &str)] = &[(
    "socketcall",
    "exists only in the 32-bit x86 table; every call of that table gets ENOSYS from the architecture check",
)];

/// The first x32 syscall number: x32 calls run in an x86_64 process with
/// this bit set, and the architecture check alone lets them through.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

fn target_arch() -> Result<TargetArch, SetupError> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|e| {
        SetupError::from(format!(
            "seccomp: this architecture ({}) has no filter ({e})",
            std::env::consts::ARCH
        ))
    })
}

fn filter_for(deny: Deny) -> Result<BpfProgram, SetupError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for e in POLICY.iter().filter(|e| e.deny == deny) {
        let cond = |op: SeccompCmpOp, v: u64| {
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, op, v)
                .and_then(|c| SeccompRule::new(vec![c]))
                .map_err(|err| format!("seccomp: the rule for {} does not compile ({err})", e.name))
        };
        let entry = rules.entry(e.nr).or_default();
        match e.when {
            When::Always => {}
            When::Arg0Is(v) => entry.push(cond(SeccompCmpOp::Eq, v)?),
            When::Arg0Has(mask) => entry.push(cond(SeccompCmpOp::MaskedEq(mask), mask)?),
        }
    }
    let errno = match deny {
        Deny::Eperm => libc::EPERM,
        Deny::Enosys => libc::ENOSYS,
    } as u32;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno),
        target_arch()?,
    )
    .map_err(|e| format!("seccomp: the policy does not compile ({e})"))?;
    let mut prog: BpfProgram = filter
        .try_into()
        .map_err(|e| format!("seccomp: the policy does not compile ({e})"))?;
    other_tables_get_enosys(&mut prog)?;
    Ok(prog)
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;
const RET_ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;

/// seccompiler kills the process on another architecture and has no x32
/// check: make both ENOSYS, as if the kernel had no such table. The
/// program's first three instructions are its architecture check
/// (load arch; jump if ours; return kill).
fn other_tables_get_enosys(prog: &mut BpfProgram) -> Result<(), SetupError> {
    let kill = prog
        .get_mut(2)
        .filter(|i| i.code == BPF_RET_K && i.k == libc::SECCOMP_RET_KILL_PROCESS);
    let Some(kill) = kill else {
        return Err(
            "seccomp: the compiled filter does not start with the architecture check it should"
                .into(),
        );
    };
    kill.k = RET_ENOSYS;
    if std::env::consts::ARCH == "x86_64" {
        let guard = [
            sock_filter {
                code: BPF_LD_W_ABS,
                jt: 0,
                jf: 0,
                k: 0,
            },
            sock_filter {
                code: BPF_JMP_JGE_K,
                jt: 0,
                jf: 1,
                k: X32_SYSCALL_BIT,
            },
            sock_filter {
                code: BPF_RET_K,
                jt: 0,
                jf: 0,
                k: RET_ENOSYS,
            },
        ];
        prog.splice(3..3, guard);
    }
    Ok(())
}

/// The compiled programs, in the order they are installed.
pub fn programs() -> Result<Vec<BpfProgram>, SetupError> {
    Ok(vec![filter_for(Deny::Eperm)?, filter_for(Deny::Enosys)?])
}

/// Install every program on every thread (TSYNC).
pub fn install() -> Result<(), SetupError> {
    for prog in programs()? {
        seccompiler::apply_filter_all_threads(&prog)
            .map_err(|e| format!("seccomp: the filter could not be installed ({e})"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;
    const AUDIT_ARCH_I386: u32 = 0x4000_0003;

    fn native_arch() -> u32 {
        if cfg!(target_arch = "x86_64") {
            AUDIT_ARCH_X86_64
        } else {
            AUDIT_ARCH_AARCH64
        }
    }

    /// A classic-BPF interpreter for what seccompiler emits: enough to hold
    /// the compiled program to the policy without installing it.
    fn run(prog: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_ne_bytes());
        data[4..8].copy_from_slice(&arch.to_ne_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let ins = &prog[pc];
            pc += 1;
            let class = ins.code & 0x07;
            match class {
                0x00 => {
                    assert_eq!(ins.code, BPF_LD_W_ABS, "only word loads are expected");
                    let k = ins.k as usize;
                    acc = u32::from_ne_bytes(data[k..k + 4].try_into().unwrap());
                }
                0x04 => {
                    assert_eq!(ins.code, 0x54, "only AND K is expected");
                    acc &= ins.k;
                }
                0x05 => {
                    let taken = match ins.code & 0xf0 {
                        0x00 => {
                            pc += ins.k as usize;
                            continue;
                        }
                        0x10 => acc == ins.k,
                        0x20 => acc > ins.k,
                        0x30 => acc >= ins.k,
                        0x40 => acc & ins.k != 0,
                        other => panic!("unexpected jump {other:#x}"),
                    };
                    pc += if taken { ins.jt } else { ins.jf } as usize;
                }
                0x06 => return ins.k,
                other => panic!("unexpected class {other:#x}"),
            }
        }
    }

    /// The strictest answer of all programs, as the kernel takes it.
    fn verdict(nr: i64, arch: u32, args: [u64; 6]) -> u32 {
        let progs = programs().unwrap();
        let answers: Vec<u32> = progs
            .iter()
            .map(|p| run(p, arch, nr as u32, args))
            .collect();
        // The kernel takes the action whose top 16 bits are least as a signed int.
        *answers
            .iter()
            .min_by_key(|a| (**a & 0xffff_0000) as i32)
            .unwrap()
    }

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;

    #[test]
    fn every_policy_entry_is_refused_as_written() {
        for e in POLICY {
            let want = match e.deny {
                Deny::Eperm => EPERM,
                Deny::Enosys => RET_ENOSYS,
            };
            let matching = match e.when {
                When::Always => 0,
                When::Arg0Is(v) => v,
                When::Arg0Has(m) => m | 0x11,
            };
            assert_eq!(
                verdict(e.nr, native_arch(), [matching, 0, 0, 0, 0, 0]),
                want,
                "{}",
                e.name
            );
            assert!(!e.reason.is_empty(), "{} has no reason", e.name);
            if e.when != When::Always {
                assert_eq!(
                    verdict(e.nr, native_arch(), [0, 0, 0, 0, 0, 0]),
                    ALLOW,
                    "{} without its argument",
                    e.name
                );
            }
        }
    }

    #[test]
    fn vsock_is_refused_and_other_sockets_are_not() {
        let vsock = [libc::AF_VSOCK as u64, 1, 0, 0, 0, 0];
        assert_eq!(verdict(libc::SYS_socket, native_arch(), vsock), EPERM);
        // Compared as 32 bits: high bits set do not hide AF_VSOCK.
        let high = [(1u64 << 32) | libc::AF_VSOCK as u64, 1, 0, 0, 0, 0];
        assert_eq!(verdict(libc::SYS_socket, native_arch(), high), EPERM);
        for af in [
            libc::AF_UNIX,
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_NETLINK,
        ] {
            assert_eq!(
                verdict(libc::SYS_socket, native_arch(), [af as u64, 1, 0, 0, 0, 0]),
                ALLOW
            );
        }
    }

    #[test]
    fn everyday_calls_pass() {
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_openat,
            libc::SYS_execve,
            libc::SYS_ptrace,
            libc::SYS_clone,
        ] {
            assert_eq!(verdict(nr, native_arch(), [0; 6]), ALLOW, "{nr}");
        }
        // A thread's clone flags carry no CLONE_NEWUSER.
        let thread_flags = (libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD) as u64;
        assert_eq!(
            verdict(
                libc::SYS_clone,
                native_arch(),
                [thread_flags, 0, 0, 0, 0, 0]
            ),
            ALLOW
        );
    }

    #[test]
    fn other_tables_get_enosys() {
        assert_eq!(
            verdict(20, AUDIT_ARCH_I386, [0; 6]),
            RET_ENOSYS,
            "a 32-bit x86 call"
        );
        if cfg!(target_arch = "x86_64") {
            assert_eq!(
                verdict(i64::from(X32_SYSCALL_BIT) + 39, AUDIT_ARCH_X86_64, [0; 6]),
                RET_ENOSYS,
                "an x32 getpid"
            );
        }
    }
}
