//! Two axes of "what computer": the machine kind a daemon or provider
//! reports (hello's `kind`), and the setting kind an agent is given, which
//! is a set of machine kinds plus the capability groups it needs.

use serde::{Deserialize, Serialize};

use super::group;

/// The machine kind: hello's and capabilities' `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MachineKind {
    Linux,
    Desktop,
    Android,
    Ios,
    Browser,
}

impl MachineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MachineKind::Linux => "linux",
            MachineKind::Desktop => "desktop",
            MachineKind::Android => "android",
            MachineKind::Ios => "ios",
            MachineKind::Browser => "browser",
        }
    }
}

/// What an agent is given: each is a set of machine kinds and groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SettingKind {
    Sandbox,
    Desktop,
    Phone,
    Browser,
}

/// One row of the setting-kind table.
#[derive(Clone, Copy, Debug)]
pub struct KindRow {
    pub kind: SettingKind,
    pub machines: &'static [MachineKind],
    pub required: &'static [&'static str],
    pub optional: &'static [&'static str],
}

/// The table: setting kind → machine kinds, required and optional groups.
pub const SETTING_KINDS: &[KindRow] = &[
    KindRow {
        kind: SettingKind::Sandbox,
        machines: &[MachineKind::Linux],
        required: &[group::EXEC, group::FILES, group::PROCESSES],
        optional: &[],
    },
    KindRow {
        kind: SettingKind::Desktop,
        machines: &[MachineKind::Desktop],
        required: &[group::SCREEN, group::INPUT_POINTER, group::INPUT_KEYS],
        optional: &[
            group::EXEC,
            group::FILES,
            group::PROCESSES,
            group::APPS,
            group::STREAM,
        ],
    },
    KindRow {
        kind: SettingKind::Phone,
        machines: &[MachineKind::Android, MachineKind::Ios],
        required: &[group::SCREEN, group::INPUT_TOUCH, group::APPS],
        optional: &[
            group::INPUT_KEYS,
            group::APPS_INSTALL,
            group::APPS_UI_TREE,
            group::STREAM,
        ],
    },
    KindRow {
        kind: SettingKind::Browser,
        machines: &[MachineKind::Browser],
        required: &[group::CDP],
        optional: &[group::STREAM, group::DOWNLOADS],
    },
];

impl SettingKind {
    pub fn row(self) -> &'static KindRow {
        // Every variant has its row; the fallback is unreachable by construction.
        SETTING_KINDS
            .iter()
            .find(|r| r.kind == self)
            .unwrap_or(&SETTING_KINDS[0])
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SettingKind::Sandbox => "sandbox",
            SettingKind::Desktop => "desktop",
            SettingKind::Phone => "phone",
            SettingKind::Browser => "browser",
        }
    }
}

/// Why a computer of `machine` with `groups` does not serve `kind`, in
/// words; empty when it does.
pub fn serving_refusals(kind: SettingKind, machine: MachineKind, groups: &[String]) -> Vec<String> {
    let row = kind.row();
    let mut why = Vec::new();
    if !row.machines.contains(&machine) {
        let names: Vec<&str> = row.machines.iter().map(|m| m.as_str()).collect();
        why.push(format!(
            "a {} needs a machine of kind {}, and this one is {}",
            kind.as_str(),
            names.join(" or "),
            machine.as_str()
        ));
    }
    for g in row.required {
        if !groups.iter().any(|x| x == g) {
            why.push(format!(
                "a {} needs the group {g}, which is not declared",
                kind.as_str()
            ));
        }
    }
    why
}

/// Whether a computer of `machine` with `groups` serves `kind`.
pub fn serves(kind: SettingKind, machine: MachineKind, groups: &[String]) -> bool {
    serving_refusals(kind, machine, groups).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linux_daemon_serves_a_sandbox_and_nothing_else() {
        let groups: Vec<String> = ["exec", "files", "processes"].map(String::from).to_vec();
        assert!(serves(SettingKind::Sandbox, MachineKind::Linux, &groups));
        assert!(!serves(SettingKind::Desktop, MachineKind::Linux, &groups));
        let fewer: Vec<String> = ["exec", "files"].map(String::from).to_vec();
        assert_eq!(
            serving_refusals(SettingKind::Sandbox, MachineKind::Linux, &fewer),
            vec!["a sandbox needs the group processes, which is not declared".to_string()]
        );
    }
}
