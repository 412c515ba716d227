//! What a run found: every case's result, Core's verdict, what cleanup
//! saw, and the text a person reads.

use serde::{Deserialize, Serialize};

use super::{CaseGroup, KindVerdict, Level};

/// A case passed, failed or was skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Skip,
}

/// One case's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseResult {
    pub id: String,
    pub level: Level,
    pub group: CaseGroup,
    pub status: Status,
    /// What the case found (a failure), or why it did not run (a skip).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The need that is not declared, for a skip that takes a Core case
    /// out of Core's count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undeclared: Option<String>,
    pub ms: u64,
}

impl CaseResult {
    /// A Core case that counts for Core: not skipped for an undeclared need.
    pub fn counts_for_core(&self) -> bool {
        self.level == Level::Core && self.undeclared.is_none()
    }
}

/// What hello said on the shared computer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonInfo {
    pub version: String,
    pub os: String,
    pub arch: String,
}

/// Core's verdict: `pass`, `fail` or `partial`, with its count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CoreSummary {
    pub verdict: String,
    pub passed: usize,
    pub total: usize,
    /// Core cases skipped for a need not declared (out of the count).
    pub optional_skipped: usize,
}

/// What cleanup saw.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cleanup {
    /// Computers that arrived after their case ended, and what became of them.
    pub late: Vec<String>,
    /// Calls that failed or did not answer in time (a release, a list, a
    /// create still pending at the end).
    pub errors: Vec<String>,
    /// Computers the run's label still listed at the end (deleted then).
    pub left: Vec<String>,
}

impl Cleanup {
    pub fn clean(&self) -> bool {
        self.errors.is_empty() && self.left.is_empty()
    }
}

/// A note a create returned, naming its computer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComputerNote {
    pub computer: String,
    pub note: String,
}

/// A whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub provider: String,
    pub run_id: String,
    pub kind: String,
    pub daemon_mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon: Option<DaemonInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only: Option<Vec<CaseGroup>>,
    /// Core cases a partial run did not run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub core_not_run: Vec<String>,
    pub results: Vec<CaseResult>,
    pub core: CoreSummary,
    /// Every need not declared that skipped a case.
    pub undeclared: Vec<String>,
    pub cleanup: Cleanup,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub computer_notes: Vec<ComputerNote>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind_verdict: Option<KindVerdict>,
    pub elapsed_ms: u64,
}

impl Report {
    /// A case's result by id.
    pub fn result(&self, id: &str) -> Option<&CaseResult> {
        self.results.iter().find(|r| r.id == id)
    }

    /// What the command exits with: with a kind, 0 when the provider
    /// passes it, else 1; without, 0 Core pass, 1 fail, 3 partial.
    pub fn exit_code(&self) -> i32 {
        if let Some(k) = &self.kind_verdict {
            return if k.verdict == "pass" { 0 } else { 1 };
        }
        match self.core.verdict.as_str() {
            "pass" => 0,
            "partial" => 3,
            _ => 1,
        }
    }

    /// The report as a person reads it: a line per level and group with
    /// the cases and their counts, failures and skips under it with what
    /// the case found, cleanup, notes, and the verdict line.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let daemon = match &self.daemon {
            Some(d) => format!(" · computerd {} {}/{}", d.version, d.os, d.arch),
            None => String::new(),
        };
        out.push_str(&format!(
            "computer conformance · {} · {}, daemon {}{daemon} · run {}\n",
            self.provider, self.kind, self.daemon_mode, self.run_id
        ));
        let mut lines: Vec<(String, CaseGroup, Vec<&CaseResult>)> = Vec::new();
        for r in &self.results {
            let level = if r.level == Level::Core && r.undeclared.is_some() {
                "optional".to_string()
            } else {
                r.level.as_str().to_string()
            };
            match lines
                .iter_mut()
                .find(|(l, g, _)| *l == level && *g == r.group)
            {
                Some((_, _, v)) => v.push(r),
                None => lines.push((level, r.group, vec![r])),
            }
        }
        for (level, group, rs) in &lines {
            let prefix = format!("{}.", group.as_str());
            let names: Vec<&str> = rs
                .iter()
                .map(|r| r.id.strip_prefix(&prefix).unwrap_or(&r.id))
                .collect();
            let count = |s: Status| rs.iter().filter(|r| r.status == s).count();
            let mut counts = Vec::new();
            for (mark, s) in [
                ("✓", Status::Pass),
                ("✗", Status::Fail),
                ("-", Status::Skip),
            ] {
                let n = count(s);
                if n > 0 {
                    counts.push(format!("{mark} {n}"));
                }
            }
            out.push_str(&format!(
                "{level:<8} {:<10} {:<60} {}\n",
                group.as_str(),
                names.join(" "),
                counts.join(" ")
            ));
            for r in rs.iter().filter(|r| r.status != Status::Pass) {
                let mark = if r.status == Status::Fail { "✗" } else { "-" };
                out.push_str(&format!(
                    "  {mark} {}: {}\n",
                    r.id,
                    r.reason.as_deref().unwrap_or("")
                ));
            }
        }
        if !self.core_not_run.is_empty() {
            out.push_str(&format!("core not run: {}\n", self.core_not_run.join(" ")));
        }
        for l in &self.cleanup.late {
            out.push_str(&format!("cleanup late: {l}\n"));
        }
        for e in &self.cleanup.errors {
            out.push_str(&format!("cleanup error: {e}\n"));
        }
        for l in &self.cleanup.left {
            out.push_str(&format!("cleanup left behind: {l}\n"));
        }
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        // The same words of several computers are one line naming them all.
        let mut grouped: Vec<(Vec<&str>, &str)> = Vec::new();
        for n in &self.computer_notes {
            match grouped.iter_mut().find(|(_, w)| *w == n.note) {
                Some((who, _)) => who.push(&n.computer),
                None => grouped.push((vec![&n.computer], &n.note)),
            }
        }
        for (who, words) in grouped {
            out.push_str(&format!("note {}: {words}\n", who.join(", ")));
        }
        out.push_str(&self.verdict_line());
        out.push('\n');
        if let Some(k) = &self.kind_verdict {
            if k.verdict == "pass" {
                out.push_str(&format!("kind {} PASS\n", k.kind.as_str()));
            } else {
                out.push_str(&format!(
                    "kind {} FAIL: {}\n",
                    k.kind.as_str(),
                    k.reasons.join("; ")
                ));
            }
        }
        out
    }

    /// `core PASS 30/30 · 2 optional cases skipped, not declared · full
    /// 1/4 · … not declared · 41 s`.
    pub fn verdict_line(&self) -> String {
        let mut parts = vec![format!(
            "core {} {}/{}",
            self.core.verdict.to_uppercase(),
            self.core.passed,
            self.core.total
        )];
        if !self.core_not_run.is_empty() {
            parts.push(format!("{} Core cases not run", self.core_not_run.len()));
        }
        if self.core.optional_skipped > 0 {
            parts.push(format!(
                "{} optional case{} skipped, not declared",
                self.core.optional_skipped,
                if self.core.optional_skipped == 1 {
                    ""
                } else {
                    "s"
                }
            ));
        }
        let full: Vec<&CaseResult> = self
            .results
            .iter()
            .filter(|r| r.level == Level::Full)
            .collect();
        if !full.is_empty() {
            let passed = full.iter().filter(|r| r.status == Status::Pass).count();
            parts.push(format!("full {passed}/{}", full.len()));
        }
        if !self.undeclared.is_empty() {
            parts.push(format!("{} not declared", self.undeclared.join(" ")));
        }
        if !self.cleanup.clean() {
            parts.push("cleanup failed".into());
        }
        parts.push(format!("{} s", self.elapsed_ms.div_ceil(1000)));
        parts.join(" · ")
    }
}
