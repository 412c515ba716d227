//! What the benches of this crate share: the server under test, the
//! daemon, and percentiles printed one way.

use std::path::{Path, PathBuf};
use std::time::Duration;

pub const SERVER: &str = env!("CARGO_BIN_EXE_computer-mcp");

/// The server under test: `CMCP_BENCH_SERVER` (another build, e.g. a
/// release one or main's, to compare), else the one built beside the bench.
pub fn server() -> PathBuf {
    std::env::var_os("CMCP_BENCH_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(SERVER))
}

/// `computer-mcp serve` on its own state directory and the daemon of
/// [`computerd`], logging errors only, with `extra` flags.
#[allow(dead_code)] // not the cp bench's: it runs the server with Docker's flags
pub fn server_cmd(state: &Path, extra: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(server());
    cmd.arg("serve")
        .arg("--local-state-dir")
        .arg(state)
        .arg("--local-computerd")
        .arg(computerd())
        .args(["--log", "error"])
        .args(extra);
    cmd
}

#[allow(dead_code)] // as server_cmd
pub fn computerd() -> PathBuf {
    if let Some(p) = std::env::var_os("COMPUTERD_BIN") {
        return PathBuf::from(p);
    }
    let beside = Path::new(SERVER).with_file_name("computerd");
    if beside.is_file() {
        beside
    } else {
        PathBuf::from(SERVER)
    }
}

/// A count a bench takes from the variable `var`, else `default`.
pub fn count_from_env(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort_unstable();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One line of figures: median and p99 of `v`; returns the median.
pub fn line(name: &str, v: &mut [Duration]) -> Duration {
    let med = pct(v, 0.5);
    let p99 = pct(v, 0.99);
    println!(
        "{name:<52} median {:>8.3} ms   p99 {:>8.3} ms   ({} runs)",
        ms(med),
        ms(p99),
        v.len()
    );
    med
}

/// The bytes of a result as a model reads them: its text, and its images'
/// base64.
#[allow(dead_code)] // used by the benches that size answers: browser, phone
pub fn answer_bytes(r: &rmcp::model::CallToolResult) -> usize {
    r.content
        .iter()
        .map(|c| match (c.as_text(), c.as_image()) {
            (Some(t), _) => t.text.len(),
            (_, Some(i)) => i.data.len(),
            _ => 0,
        })
        .sum()
}

/// A tool call: `name` with the JSON object `args`.
#[allow(dead_code)] // the benches that call tools by name
pub fn call(name: &str, args: serde_json::Value) -> rmcp::model::CallToolRequestParams {
    rmcp::model::CallToolRequestParams::new(name.to_string())
        .with_arguments(args.as_object().cloned().unwrap_or_default())
}

/// Whether `program` is on PATH.
#[allow(dead_code)] // the benches that compare with other programs
pub fn installed(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

/// An Xvfb of the host's own (1280x800, started as a desktop computer's
/// is), on the display it picks.
#[allow(dead_code)] // the benches that need a host display: desktop, viewer
pub struct HostX {
    child: std::process::Child,
    pub display: String,
}

#[allow(dead_code)]
impl HostX {
    pub fn start() -> Option<HostX> {
        use std::io::Read;
        let mut child = computer_testkit::xvfb(&["-displayfd", "1"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .ok()?;
        let mut out = child.stdout.take()?;
        let mut said = Vec::new();
        let mut b = [0u8; 1];
        while out.read(&mut b).ok()? == 1 && b[0] != b'\n' {
            said.push(b[0]);
        }
        // Held open for Xvfb's life: a write to a closed pipe would end it.
        std::mem::forget(out);
        let n = String::from_utf8(said).ok()?;
        Some(HostX {
            child,
            display: format!(":{}", n.trim()),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for HostX {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU seconds of each process: pid → (command name, utime+stime).
pub type CpuReading = std::collections::HashMap<u32, (String, f64)>;

/// utime+stime of `pid` in seconds (/proc/PID/stat), and its command name.
#[allow(dead_code)] // the viewer bench's
pub fn cpu_of(pid: u32) -> Option<(String, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, tail) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_string();
    let f: Vec<&str> = tail.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf only reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some((comm, ticks as f64 / hz))
}

/// Every process under `roots`, and the roots themselves.
#[allow(dead_code)] // the viewer bench's
pub fn cpu_tree(roots: &[u32]) -> CpuReading {
    let mut parent = std::collections::HashMap::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, t)| t.split_whitespace().nth(1));
        if let Some(ppid) = ppid.and_then(|p| p.parse::<u32>().ok()) {
            parent.insert(pid, ppid);
        }
    }
    let under = |mut p: u32| loop {
        if roots.contains(&p) {
            return true;
        }
        match parent.get(&p) {
            Some(&q) if q > 1 => p = q,
            _ => return false,
        }
    };
    let pids = parent.keys().copied().filter(|&p| under(p));
    pids.filter_map(|p| cpu_of(p).map(|c| (p, c))).collect()
}

/// CPU seconds spent between two readings (a process new in `after`
/// counts whole), split into (the processes not named `apart`, those named
/// `apart`).
#[allow(dead_code)] // the viewer bench's
pub fn cpu_spent(before: &CpuReading, after: &CpuReading, apart: &str) -> (f64, f64) {
    let (mut rest, mut named) = (0.0, 0.0);
    for (pid, (comm, s)) in after {
        let d = s - before.get(pid).map_or(0.0, |b| b.1);
        if comm == apart {
            named += d;
        } else {
            rest += d;
        }
    }
    (rest, named)
}
