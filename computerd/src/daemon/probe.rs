//! `computerd probe`: what the computer's network answers, read from inside.
//!
//! Every target is tried at once, each on a thread of its own, and the probe
//! prints one [`ProbeReport`] line. A target is reached only when bytes come
//! back from it; a TCP connection that is accepted and then stays silent is
//! accepted, which a provider names in its notes and never counts as reached
//! (some firewalls accept every connection first and decide after).
//!
//! Each TCP target is sent a request by its port, so a server that waits for
//! its client speaks: 443 a TLS 1.2 ClientHello, 80 and any other port an
//! HTTP/1.0 HEAD, 53 a DNS query behind its length. A UDP target gets one DNS
//! query whatever its port. Only those bytes leave: a random nonce, a random
//! DNS id, the target's own host name, and nothing of the computer's.
//!
//! The requests are built by hand (a few hundred bytes) so the daemon stays
//! one small static binary with no TLS or DNS library; they are in `wire`,
//! and one target's check is in `target`.

mod target;
mod wire;

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::errno::Errno;

use super::sys;
use crate::protocol::{
    DIAGNOSE_ANSWER_MS, DIAGNOSE_CONNECT_MS, DIAGNOSE_TARGETS, DIAGNOSE_TOTAL_MS, PROBE_ANSWER_MS,
    PROBE_CONNECT_MS, PROBE_TOTAL_MS, ProbeOutcome, ProbeReport, ProbeResult, ProbeTarget,
    ProbeVerdict, parse_target, targets_with,
};
use target::check;

/// How long one target (or `--diagnose` check) may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bounds {
    /// From the probe's start to a connection (a name's resolution included).
    connect: Duration,
    /// From the request to the answer.
    answer: Duration,
    /// From the probe's start to the end of everything.
    total: Duration,
}

impl Bounds {
    const PROBE: Bounds = Bounds {
        connect: Duration::from_millis(PROBE_CONNECT_MS),
        answer: Duration::from_millis(PROBE_ANSWER_MS),
        total: Duration::from_millis(PROBE_TOTAL_MS),
    };
    const DIAGNOSE: Bounds = Bounds {
        connect: Duration::from_millis(DIAGNOSE_CONNECT_MS),
        answer: Duration::from_millis(DIAGNOSE_ANSWER_MS),
        total: Duration::from_millis(DIAGNOSE_TOTAL_MS),
    };

    /// The longest one target can take from the probe's start.
    fn window(self) -> Duration {
        (self.connect + self.answer).min(self.total)
    }
}

/// How long past the longest window the probe waits for a target's thread to
/// report. Only a name whose resolution hangs (getaddrinfo takes no bound)
/// keeps a thread past its window; the probe reports it and leaves it behind.
const JOIN_SLACK: Duration = Duration::from_millis(500);

/// What a target whose thread never reported reads as.
const STILL_CONNECTING: &str = "no answer within the bound (still connecting)";

/// `computerd probe --connect <target>... [--diagnose]`: print the report as
/// one JSON line; 0 when the probe ran, whatever its targets answered, and 1
/// with words on stderr for a malformed target.
pub fn main(connect: &[String], diagnose: bool) -> i32 {
    let mut targets = Vec::with_capacity(connect.len());
    for s in connect {
        match parse_target(s) {
            Ok(t) => targets.push(t),
            Err(e) => {
                eprintln!("computerd probe: --connect {e}");
                return 1;
            }
        }
    }
    let report = run(&targets, diagnose);
    let line = match serde_json::to_string(&report) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("computerd probe: the report could not be encoded: {e}");
            return 1;
        }
    };
    let mut out = io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
        eprintln!("computerd probe: the report could not be written to stdout: {e}");
        return 1;
    }
    0
}

/// Probe every target at once (10 s to connect, 10 s to answer), and with
/// `diagnose` the fixed checks too (3 s and 3 s, 15 s in all), whose results
/// come last and alone make the verdict. Returns within the longest bound
/// plus half a second, whatever the network or the resolver does.
pub fn run(targets: &[ProbeTarget], diagnose: bool) -> ProbeReport {
    let mut jobs: Vec<(ProbeTarget, Bounds)> =
        targets.iter().map(|t| (t.clone(), Bounds::PROBE)).collect();
    let first_check = jobs.len();
    if diagnose {
        jobs.extend(diagnose_targets().map(|t| (t, Bounds::DIAGNOSE)));
    }
    let results = check_all(&jobs, check);
    report(results, diagnose.then_some(first_check))
}

/// The report around `results`; with `verdict_from`, the verdict over the
/// results from that index on (`--diagnose`'s checks).
fn report(results: Vec<ProbeResult>, verdict_from: Option<usize>) -> ProbeReport {
    let verdict = verdict_from.map(|i| ProbeVerdict::of(results.get(i..).unwrap_or_default()));
    ProbeReport {
        uid: nix::unistd::getuid().as_raw(),
        gid: nix::unistd::getgid().as_raw(),
        kernel: kernel_release(),
        interfaces: interfaces(),
        reached: targets_with(&results, ProbeOutcome::Answered),
        accepted: targets_with(&results, ProbeOutcome::Accepted),
        results,
        verdict,
    }
}

fn diagnose_targets() -> impl Iterator<Item = ProbeTarget> {
    // Every entry parses (a test holds it to that).
    DIAGNOSE_TARGETS.iter().filter_map(|s| parse_target(s).ok())
}

/// The interfaces of this network namespace that are up or hold an address,
/// sorted: `["lo"]` alone under `--own-network`. A tunnel the kernel gives
/// every namespace (tunl0, gre0, sit0...) is down with no address there, and
/// stays so with no CAP_NET_ADMIN; it is named once anything brings it up or
/// addresses it. When the kernel cannot be asked, every interface
/// /proc/self/net/dev names is reported, so the list errs towards more.
pub fn interfaces() -> Vec<String> {
    use nix::net::if_::InterfaceFlags;
    // One netlink dump, in the calling thread's namespace, gives flags and
    // addresses together.
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return sys::interface_names().unwrap_or_default();
    };
    let mut names = BTreeSet::new();
    for a in addrs {
        let addressed = a
            .address
            .as_ref()
            .is_some_and(|s| s.as_sockaddr_in().is_some() || s.as_sockaddr_in6().is_some());
        if addressed || a.flags.contains(InterfaceFlags::IFF_UP) {
            names.insert(a.interface_name);
        }
    }
    names.into_iter().collect()
}

/// The kernel's release, as uname(2) gives it. Read by the system call, not
/// from /proc/sys/kernel/osrelease, which a sandboxed kernel (gVisor) may not
/// carry, and which a provider's check of the runtime depends on.
fn kernel_release() -> String {
    sys::kernel_release().unwrap_or_else(|e| format!("unknown (uname: {})", errno_words(e)))
}

type Check = fn(&ProbeTarget, Bounds, Instant) -> ProbeResult;

/// Run `check` for every job at once, each on its own thread, and collect the
/// results in the jobs' order. Waits until the longest window plus
/// [`JOIN_SLACK`]; a thread still running then (a name whose resolution
/// hangs) is left behind and its target reads refused.
fn check_all(jobs: &[(ProbeTarget, Bounds)], check: Check) -> Vec<ProbeResult> {
    let start = Instant::now();
    let (tx, rx) = mpsc::channel::<(usize, ProbeResult)>();
    let mut results: Vec<Option<ProbeResult>> = vec![None; jobs.len()];
    for (i, (target, bounds)) in jobs.iter().enumerate() {
        let tx = tx.clone();
        let job = target.clone();
        let bounds = *bounds;
        let spawned = std::thread::Builder::new()
            .name(format!("probe-{i}"))
            .spawn(move || {
                let _ = tx.send((i, check(&job, bounds, start)));
            });
        if let Err(e) = spawned {
            results[i] = Some(refused(
                target,
                format!("the probe could not start a thread for it: {e}"),
            ));
        }
    }
    drop(tx);
    let longest = jobs
        .iter()
        .map(|(_, b)| b.window())
        .max()
        .unwrap_or_default();
    let join_by = start + longest + JOIN_SLACK;
    while results.iter().any(Option::is_none) {
        let left = join_by.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((i, r)) => results[i] = Some(r),
            Err(_) => break,
        }
    }
    // Whatever reported in the last instant still counts.
    while let Ok((i, r)) = rx.try_recv() {
        results[i] = Some(r);
    }
    jobs.iter()
        .zip(results)
        .map(|((target, _), r)| r.unwrap_or_else(|| refused(target, STILL_CONNECTING.into())))
        .collect()
}

fn result(
    target: &ProbeTarget,
    outcome: ProbeOutcome,
    bytes: usize,
    detail: String,
) -> ProbeResult {
    ProbeResult {
        target: target.to_string(),
        protocol: target.protocol,
        outcome,
        bytes: bytes as u64,
        detail,
    }
}

fn refused(target: &ProbeTarget, detail: String) -> ProbeResult {
    result(target, ProbeOutcome::Refused, 0, detail)
}

/// A duration in words: "10 s", "0.3 s".
fn secs(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

fn at_least_a_ms(d: Duration) -> Duration {
    d.max(Duration::from_millis(1))
}

fn errno_words(e: Errno) -> String {
    e.desc().to_lowercase()
}

/// An io::Error in words: the errno's description when it carries one.
fn io_words(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => errno_words(Errno::from_raw(n)),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::{TcpListener, TcpStream, UdpSocket};

    use crate::protocol::ProbeProtocol;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// Short bounds, so a silent target costs a test a fraction of a second.
    pub(super) const SHORT: Bounds = Bounds {
        connect: Duration::from_secs(2),
        answer: Duration::from_millis(300),
        total: Duration::from_secs(5),
    };

    pub(super) fn target(s: &str) -> ProbeTarget {
        parse_target(s).unwrap()
    }

    pub(super) fn probe(targets: &[ProbeTarget]) -> Vec<ProbeResult> {
        let jobs: Vec<_> = targets.iter().map(|t| (t.clone(), SHORT)).collect();
        check_all(&jobs, check)
    }

    pub(super) fn probe_one(t: &str) -> ProbeResult {
        probe(&[target(t)]).remove(0)
    }

    pub(super) fn want(t: &str, outcome: ProbeOutcome, bytes: u64, detail: &str) -> ProbeResult {
        let target = target(t);
        ProbeResult {
            target: target.to_string(),
            protocol: target.protocol,
            outcome,
            bytes,
            detail: detail.into(),
        }
    }

    /// A TCP listener on 127.0.0.1 whose one connection `serve` handles;
    /// the port and what the listener read, once the connection ends.
    pub(super) fn tcp_server(
        serve: impl FnOnce(&mut TcpStream) -> Vec<u8> + Send + 'static,
    ) -> (u16, std::thread::JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let handle = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            serve(&mut conn)
        });
        (port, handle)
    }

    /// A server that says `greeting` first, then reads the request.
    pub(super) fn speaking_server(
        greeting: &'static [u8],
    ) -> (u16, std::thread::JoinHandle<Vec<u8>>) {
        tcp_server(move |conn| {
            conn.write_all(greeting).unwrap();
            read_request(conn)
        })
    }

    /// Read until the blank line that ends an HTTP request (or EOF).
    pub(super) fn read_request(conn: &mut TcpStream) -> Vec<u8> {
        let mut got = Vec::new();
        let mut byte = [0u8; 1];
        while !got.ends_with(b"\r\n\r\n") {
            match conn.read(&mut byte) {
                Ok(1) => got.push(byte[0]),
                _ => break,
            }
        }
        got
    }

    pub(super) fn closed_port() -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }

    #[test]
    fn every_target_runs_at_once_and_keeps_its_order() {
        let release = Arc::new(AtomicBool::new(false));
        let silent_tcp = || {
            let held = Arc::clone(&release);
            tcp_server(move |conn| {
                let got = read_request(conn);
                while !held.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                got
            })
        };
        let (silent_a, server_a) = silent_tcp();
        let (silent_b, server_b) = silent_tcp();
        let quiet = UdpSocket::bind("127.0.0.1:0").unwrap();
        let targets = [
            format!("127.0.0.1:{silent_a}"),
            format!("127.0.0.1:{}/udp", quiet.local_addr().unwrap().port()),
            format!("127.0.0.1:{}", closed_port()),
            format!("127.0.0.1:{silent_b}"),
        ];
        let bounds = Bounds {
            answer: Duration::from_secs(1),
            ..SHORT
        };
        let jobs: Vec<_> = targets.iter().map(|t| (target(t), bounds)).collect();
        let started = Instant::now();
        let results = check_all(&jobs, check);
        let took = started.elapsed();
        release.store(true, Ordering::SeqCst);
        server_a.join().unwrap();
        server_b.join().unwrap();
        // Three silent targets of 1 s each: at once, not one after another.
        assert!(
            took >= bounds.answer && took < 2 * bounds.answer,
            "{took:?}"
        );
        let outcomes: Vec<_> = results
            .iter()
            .map(|r| (r.target.as_str(), r.outcome))
            .collect();
        assert_eq!(
            outcomes,
            [
                (targets[0].as_str(), ProbeOutcome::Accepted),
                (targets[1].as_str(), ProbeOutcome::Refused),
                (targets[2].as_str(), ProbeOutcome::Refused),
                (targets[3].as_str(), ProbeOutcome::Accepted),
            ]
        );
    }

    #[test]
    fn a_target_whose_thread_hangs_reads_refused_still_connecting_within_the_bound() {
        fn hangs(_: &ProbeTarget, _: Bounds, _: Instant) -> ProbeResult {
            std::thread::sleep(Duration::from_secs(3));
            refused(&target("late.example:1"), "too late to be read".into())
        }
        let bounds = Bounds {
            connect: Duration::from_millis(100),
            answer: Duration::from_millis(100),
            total: Duration::from_secs(15),
        };
        let t = target("hangs.example:443");
        let started = Instant::now();
        let results = check_all(&[(t.clone(), bounds)], hangs);
        let took = started.elapsed();
        assert!(
            took < bounds.window() + JOIN_SLACK + Duration::from_millis(300),
            "{took:?}"
        );
        assert_eq!(
            results,
            [want(
                "hangs.example:443",
                ProbeOutcome::Refused,
                0,
                STILL_CONNECTING
            )]
        );
    }

    #[test]
    fn bounds_are_the_seeds() {
        assert_eq!(Bounds::PROBE.window(), Duration::from_secs(20));
        assert_eq!(Bounds::DIAGNOSE.connect, Duration::from_secs(3));
        assert_eq!(Bounds::DIAGNOSE.answer, Duration::from_secs(3));
        assert_eq!(Bounds::DIAGNOSE.window(), Duration::from_secs(6));
        let capped = Bounds {
            total: Duration::from_secs(4),
            ..Bounds::DIAGNOSE
        };
        assert_eq!(capped.window(), Duration::from_secs(4));
        let checks: Vec<String> = diagnose_targets().map(|t| t.to_string()).collect();
        assert_eq!(checks, DIAGNOSE_TARGETS);
    }

    #[test]
    fn the_verdict_reads_the_diagnose_checks_alone() {
        let r = |t: &str, outcome| want(t, outcome, 0, "");
        let results = vec![
            // A --connect target to the loopback is no egress.
            r("127.0.0.1:22", ProbeOutcome::Answered),
            r("1.1.1.1:443", ProbeOutcome::Accepted),
            r("1.1.1.1:53/udp", ProbeOutcome::Refused),
        ];
        let report = report(results.clone(), Some(1));
        assert_eq!(report.verdict, Some(ProbeVerdict::AcceptedOnly));
        assert_eq!(report.reached, ["127.0.0.1:22"]);
        assert_eq!(report.accepted, ["1.1.1.1:443"]);
        assert_eq!(report.results, results);
        assert_eq!(super::report(results.clone(), None).verdict, None);
        assert_eq!(
            super::report(results.clone(), Some(0)).verdict,
            Some(ProbeVerdict::Egress)
        );
        assert_eq!(
            super::report(results.clone(), Some(2)).verdict,
            Some(ProbeVerdict::None)
        );
        assert_eq!(
            super::report(results, Some(3)).verdict,
            Some(ProbeVerdict::None)
        );
    }

    #[test]
    fn the_report_names_who_ran_the_kernel_and_the_interfaces() {
        let report = run(&[], false);
        assert_eq!(report.uid, nix::unistd::getuid().as_raw());
        assert_eq!(report.gid, nix::unistd::getgid().as_raw());
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        assert_eq!(report.kernel, release.trim());
        assert!(report.interfaces.contains(&"lo".to_string()), "{report:?}");
        let mut sorted = report.interfaces.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(report.interfaces, sorted);
        assert!(report.results.is_empty() && report.verdict.is_none());
        // Every interface reported is one the namespace holds.
        let all = sys::interface_names().unwrap();
        assert!(report.interfaces.iter().all(|i| all.contains(i)), "{all:?}");
    }

    use computer_testkit::need;

    #[test]
    fn interfaces_are_those_up_or_addressed_in_a_namespace_of_its_own() {
        if !need(
            "root",
            nix::unistd::geteuid().is_root(),
            "this test needs root (to make a network namespace and interfaces in it)",
        ) {
            return;
        }
        // unshare moves this thread alone, and `ip` started from it runs in
        // its namespace, which ends with the thread.
        let seen = std::thread::spawn(|| -> Result<Vec<Vec<String>>, String> {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| format!("unshare(CLONE_NEWNET) failed: {e}"))?;
            let ip = |args: &[&str]| -> Result<(), String> {
                let status = std::process::Command::new("ip")
                    .args(args)
                    .stderr(std::process::Stdio::null())
                    .status()
                    .map_err(|e| format!("ip could not run: {e}"))?;
                if status.success() {
                    Ok(())
                } else {
                    Err(format!("ip {} failed", args.join(" ")))
                }
            };
            let mut seen = vec![interfaces()];
            ip(&["link", "set", "lo", "up"])?;
            seen.push(interfaces());
            // Down with no address, as the kernel's fallback tunnels are.
            ip(&["link", "add", "pv0", "type", "veth", "peer", "name", "pv1"])?;
            seen.push(interfaces());
            ip(&["link", "set", "pv0", "up"])?;
            seen.push(interfaces());
            ip(&["addr", "add", "10.9.9.9/24", "dev", "pv1"])?;
            seen.push(interfaces());
            Ok(seen)
        })
        .join()
        .unwrap();
        let seen = match seen {
            Ok(seen) => seen,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        };
        let want: [&[&str]; 5] = [&[], &["lo"], &["lo"], &["lo", "pv0"], &["lo", "pv0", "pv1"]];
        assert_eq!(seen, want);
    }

    #[test]
    fn main_refuses_a_malformed_target_in_words() {
        assert_eq!(main(&["example.com".into()], false), 1);
    }

    #[test]
    fn durations_read_in_seconds() {
        assert_eq!(secs(Duration::from_secs(10)), "10 s");
        assert_eq!(secs(Duration::from_millis(300)), "0.3 s");
        assert_eq!(secs(Duration::from_millis(2500)), "2.5 s");
    }

    #[test]
    fn the_protocol_of_a_result_is_its_targets() {
        assert_eq!(
            refused(&target("1.1.1.1:53/udp"), String::new()).protocol,
            ProbeProtocol::Udp
        );
    }
}
