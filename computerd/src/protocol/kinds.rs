//! Two axes of "what computer": the machine kind a daemon or provider
//! reports (hello's `kind`), and the setting kind an agent is given, which
//! is a set of machine kinds plus the capability groups it needs.

use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

/// The machine kind: hello's and capabilities' `kind`. A kind this client
/// does not know fails to decode, naming it: no client can serve a machine
/// it has never heard of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum MachineKind {
    Linux,
    Desktop,
    Android,
    Ios,
    Browser,
}

impl MachineKind {
    pub const ALL: &'static [MachineKind] = &[
        MachineKind::Linux,
        MachineKind::Desktop,
        MachineKind::Android,
        MachineKind::Ios,
        MachineKind::Browser,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            MachineKind::Linux => "linux",
            MachineKind::Desktop => "desktop",
            MachineKind::Android => "android",
            MachineKind::Ios => "ios",
            MachineKind::Browser => "browser",
        }
    }
}

crate::display_as_str!(MachineKind);

impl PartialEq<&str> for MachineKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A capability group a computer declares (hello's and capabilities'
/// `groups`): the methods it answers. On the wire, its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
pub enum Group {
    #[serde(rename = "exec")]
    Exec,
    #[serde(rename = "files")]
    Files,
    #[serde(rename = "processes")]
    Processes,
    #[serde(rename = "screen")]
    Screen,
    #[serde(rename = "input.pointer")]
    InputPointer,
    #[serde(rename = "input.keys")]
    InputKeys,
    #[serde(rename = "input.touch")]
    InputTouch,
    #[serde(rename = "apps")]
    Apps,
    #[serde(rename = "apps.install")]
    AppsInstall,
    #[serde(rename = "apps.ui_tree")]
    AppsUiTree,
    #[serde(rename = "cdp")]
    Cdp,
    #[serde(rename = "stream")]
    Stream,
    #[serde(rename = "downloads")]
    Downloads,
}

impl Group {
    pub const ALL: &'static [Group] = &[
        Group::Exec,
        Group::Files,
        Group::Processes,
        Group::Screen,
        Group::InputPointer,
        Group::InputKeys,
        Group::InputTouch,
        Group::Apps,
        Group::AppsInstall,
        Group::AppsUiTree,
        Group::Cdp,
        Group::Stream,
        Group::Downloads,
    ];

    /// The name on the wire (the same as serde's).
    pub const fn as_str(self) -> &'static str {
        match self {
            Group::Exec => "exec",
            Group::Files => "files",
            Group::Processes => "processes",
            Group::Screen => "screen",
            Group::InputPointer => "input.pointer",
            Group::InputKeys => "input.keys",
            Group::InputTouch => "input.touch",
            Group::Apps => "apps",
            Group::AppsInstall => "apps.install",
            Group::AppsUiTree => "apps.ui_tree",
            Group::Cdp => "cdp",
            Group::Stream => "stream",
            Group::Downloads => "downloads",
        }
    }

    pub fn from_name(name: &str) -> Option<Group> {
        Group::ALL.iter().copied().find(|g| g.as_str() == name)
    }
}

impl FromStr for Group {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Group::from_name(s).ok_or_else(|| {
            let names: Vec<&str> = Group::ALL.iter().map(|g| g.as_str()).collect();
            format!("{s:?} is not a capability group ({})", names.join(", "))
        })
    }
}

crate::display_as_str!(Group);

/// Compare with a group's wire name, for tables that hold names.
impl PartialEq<&str> for Group {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for Group {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

/// Groups read from a daemon, leaving out the names this client does not
/// know: a newer daemon may declare a group more (a linux computer that
/// gains a screen), and this client, which has no tool for it, must still
/// serve the groups it knows.
pub fn known_groups<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Group>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    Ok(names.iter().filter_map(|n| Group::from_name(n)).collect())
}

/// What an agent is given: each is a set of machine kinds and groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
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
    pub required: &'static [Group],
    pub optional: &'static [Group],
}

/// The table: setting kind → machine kinds, required and optional groups.
pub const SETTING_KINDS: &[KindRow] = &[
    KindRow {
        kind: SettingKind::Sandbox,
        machines: &[MachineKind::Linux],
        required: &[Group::Exec, Group::Files, Group::Processes],
        optional: &[],
    },
    KindRow {
        kind: SettingKind::Desktop,
        machines: &[MachineKind::Desktop],
        required: &[Group::Screen, Group::InputPointer, Group::InputKeys],
        // cdp beside the seed's: the page tools drive a desktop's visible
        // browser.
        optional: &[
            Group::Exec,
            Group::Files,
            Group::Processes,
            Group::Apps,
            Group::Stream,
            Group::Cdp,
        ],
    },
    KindRow {
        kind: SettingKind::Phone,
        machines: &[MachineKind::Android, MachineKind::Ios],
        required: &[Group::Screen, Group::InputTouch, Group::Apps],
        optional: &[
            Group::InputKeys,
            Group::AppsInstall,
            Group::AppsUiTree,
            Group::Stream,
        ],
    },
    KindRow {
        kind: SettingKind::Browser,
        machines: &[MachineKind::Browser],
        required: &[Group::Cdp],
        optional: &[Group::Stream, Group::Downloads],
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

    pub const fn as_str(self) -> &'static str {
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
pub fn serving_refusals(kind: SettingKind, machine: MachineKind, groups: &[Group]) -> Vec<String> {
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
        if !groups.contains(g) {
            why.push(format!(
                "a {} needs the group {g}, which is not declared",
                kind.as_str()
            ));
        }
    }
    why
}

/// Whether a computer of `machine` with `groups` serves `kind`.
pub fn serves(kind: SettingKind, machine: MachineKind, groups: &[Group]) -> bool {
    serving_refusals(kind, machine, groups).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linux_daemon_serves_a_sandbox_and_nothing_else() {
        let groups = [Group::Exec, Group::Files, Group::Processes];
        assert!(serves(SettingKind::Sandbox, MachineKind::Linux, &groups));
        assert!(!serves(SettingKind::Desktop, MachineKind::Linux, &groups));
        let fewer = [Group::Exec, Group::Files];
        assert_eq!(
            serving_refusals(SettingKind::Sandbox, MachineKind::Linux, &fewer),
            vec!["a sandbox needs the group processes, which is not declared".to_string()]
        );
    }
}
