//! Core by kind, a setting kind's cases and its verdict.

use computer_providers::types::{Capabilities, DaemonMode, NetworkKind};
use computerd::protocol::{Group, MachineKind, SettingKind, serving_refusals};
use serde::{Deserialize, Serialize};

use super::report::{CaseResult, Cleanup, Status};
use super::{Case, Level, Need, cases};

/// What a computer of `kind` must declare, wherever `daemon` runs: a
/// Core case that needs one of these and finds it undeclared fails.
pub fn core_needs(kind: MachineKind, daemon: DaemonMode) -> Vec<Need> {
    let linux = vec![
        Need::Group(Group::Exec),
        Need::Group(Group::Files),
        Need::Group(Group::Processes),
        Need::Network(NetworkKind::None),
    ];
    match kind {
        MachineKind::Linux => linux,
        MachineKind::Desktop => {
            let mut n = if daemon == DaemonMode::None {
                Vec::new()
            } else {
                linux
            };
            n.extend([
                Need::Group(Group::Screen),
                Need::Group(Group::InputPointer),
                Need::Group(Group::InputKeys),
            ]);
            n
        }
        MachineKind::Android | MachineKind::Ios => {
            vec![Need::Group(Group::Screen), Need::Group(Group::InputTouch)]
        }
        MachineKind::Browser => vec![Need::Group(Group::Cdp)],
    }
}

/// The protocol groups a case group exercises.
fn protocol_groups(case: &Case) -> Vec<Group> {
    case.needs
        .iter()
        .filter_map(|n| match n {
            Need::Group(g) => Some(*g),
            _ => None,
        })
        .collect()
}

/// A setting kind's cases: every case whose protocol groups the kind
/// requires or allows, and those that need no group.
pub fn kind_cases(kind: SettingKind) -> Vec<Case> {
    let row = kind.row();
    cases()
        .into_iter()
        .filter(|c| {
            protocol_groups(c)
                .iter()
                .all(|g| row.required.contains(g) || row.optional.contains(g))
        })
        .collect()
}

/// A provider's verdict on a setting kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KindVerdict {
    pub kind: SettingKind,
    /// `pass` or `fail`.
    pub verdict: String,
    pub reasons: Vec<String>,
}

/// A provider passes a kind when it serves it, no case failed, every
/// required group has a passing case, no Core case skipped but for an
/// undeclared optional group or an undeclared need that is no group, and
/// the run left nothing behind.
pub fn kind_verdict(
    kind: SettingKind,
    caps: &Capabilities,
    table: &[Case],
    results: &[CaseResult],
    cleanup: &Cleanup,
) -> KindVerdict {
    let mut reasons = serving_refusals(kind, caps.kind, &caps.groups);
    for r in results.iter().filter(|r| r.status == Status::Fail) {
        reasons.push(format!("{} failed", r.id));
    }
    let row = kind.row();
    for g in row.required {
        let passing = results.iter().any(|r| {
            r.status == Status::Pass
                && table
                    .iter()
                    .find(|c| c.id == r.id)
                    .is_some_and(|c| protocol_groups(c).contains(g))
        });
        if !passing {
            reasons.push(format!("no case of the group {g} passed"));
        }
    }
    for r in results
        .iter()
        .filter(|r| r.status == Status::Skip && r.level == Level::Core)
    {
        // Skipped for an undeclared need: fine when the need is an optional
        // group of the kind, or no group at all (a network the provider has
        // none left to refuse, a janitor): a need the kind requires fails
        // its case instead. Skipped for want of what the run was given (a
        // fixture, a drifted daemon): not a pass.
        let undeclared_optional = match r.undeclared.as_deref() {
            Some(need) => Group::from_name(need).is_none_or(|g| row.optional.contains(&g)),
            None => false,
        };
        if !undeclared_optional {
            reasons.push(format!(
                "{} skipped: {}",
                r.id,
                r.reason.as_deref().unwrap_or("")
            ));
        }
    }
    if !cleanup.clean() {
        reasons.push("the run left computers or calls behind".into());
    }
    KindVerdict {
        kind,
        verdict: if reasons.is_empty() { "pass" } else { "fail" }.into(),
        reasons,
    }
}

/// Core's verdict from the results: every Core case that counts passed
/// and cleanup is clean; a run that left Core cases out is partial at best.
pub(crate) fn core_summary(
    results: &[CaseResult],
    cleanup: &Cleanup,
    not_run: &[String],
) -> super::CoreSummary {
    let counted: Vec<&CaseResult> = results.iter().filter(|r| r.counts_for_core()).collect();
    let passed = counted.iter().filter(|r| r.status == Status::Pass).count();
    let all_passed = passed == counted.len();
    let verdict = match (all_passed && cleanup.clean(), not_run.is_empty()) {
        (true, true) => "pass",
        (true, false) => "partial",
        (false, _) => "fail",
    };
    super::CoreSummary {
        verdict: verdict.into(),
        passed,
        total: counted.len(),
        optional_skipped: results
            .iter()
            .filter(|r| r.level == Level::Core && r.undeclared.is_some())
            .count(),
    }
}

/// The Core cases of the whole table a selection left out.
pub(crate) fn core_not_run(selected: &[Case]) -> Vec<String> {
    cases()
        .into_iter()
        .filter(|c| c.level == Level::Core && !selected.iter().any(|s| s.id == c.id))
        .map(|c| c.id.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CaseGroup;
    use computer_providers::types::{LifetimeMode, Release};

    fn caps() -> Capabilities {
        Capabilities {
            kind: MachineKind::Linux,
            os: "linux".into(),
            daemon: DaemonMode::Pid1,
            groups: vec![Group::Exec, Group::Files, Group::Processes],
            lifetime: LifetimeMode::Enforced,
            release: vec![Release::Delete],
            max_lifetime_ms: 3_600_000,
            networks: vec![NetworkKind::None, NetworkKind::Open, NetworkKind::Allow],
            network_read_back: true,
            isolation: String::new(),
            extend: false,
            shares: computer_providers::ShareWay::None,
        }
    }

    fn result(id: &str, status: Status, undeclared: Option<&str>) -> CaseResult {
        CaseResult {
            id: id.into(),
            level: Level::Core,
            group: CaseGroup::Exec,
            status,
            reason: Some("why".into()),
            undeclared: undeclared.map(String::from),
            ms: 1,
        }
    }

    #[test]
    fn a_core_case_skipped_for_an_undeclared_need_that_is_no_group_passes_the_kind() {
        let table = cases();
        let mut results: Vec<CaseResult> = table
            .iter()
            .filter(|c| {
                c.group == CaseGroup::Exec
                    || c.group == CaseGroup::Files
                    || c.group == CaseGroup::Process
            })
            .map(|c| result(c.id, Status::Pass, None))
            .collect();
        results.push(result(
            "provider.network-change-refused",
            Status::Skip,
            Some("an undeclared network"),
        ));
        let clean = Cleanup::default();
        let v = kind_verdict(SettingKind::Sandbox, &caps(), &table, &results, &clean);
        assert_eq!(v.verdict, "pass", "{:?}", v.reasons);
        // A skip for want of what the run was given is not a pass.
        results.push(result("drift.refused", Status::Skip, None));
        let v = kind_verdict(SettingKind::Sandbox, &caps(), &table, &results, &clean);
        assert_eq!(v.verdict, "fail");
        assert_eq!(v.reasons, vec!["drift.refused skipped: why".to_string()]);
    }
}
