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
