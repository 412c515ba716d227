//! E2B desktops (`--provider e2b --kind desktop`): a sandbox made from a
//! template that has X (E2B's own is `desktop`, whose SDK starts Xvfb in
//! it), with the daemon's init starting the X server itself, as the local
//! desktop does (`computerd init --xvfb /usr/bin/Xvfb --screen WxH`): the
//! X server runs as the daemon's user, on a display it picks, in the
//! daemon's own network namespace, held by init and ended with the
//! computer. Before init starts, the template is asked for its Xvfb, so a
//! template without X is refused in words, not by a daemon that died.

use std::time::Duration;

use computerd::launch::{InitArgs, Screen};
use computerd::protocol::{Group, MachineKind, SettingKind};

use crate::daemon_backed::child::ChildHost;
use crate::daemon_backed::hello::{Drift, Expect};
use crate::types::{ProviderError, Result};

/// E2B's own desktop template.
pub const DEFAULT_TEMPLATE: &str = "desktop";
/// The X server a desktop template must have.
pub const XVFB: &str = "/usr/bin/Xvfb";
/// How long asking the template for its X server may take.
const CHECK_WITHIN: Duration = Duration::from_secs(20);
/// A sandbox's groups.
const SANDBOX: &[Group] = &[Group::Exec, Group::Files, Group::Processes];

/// What the provider makes: a sandbox, or a desktop of this screen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Made {
    pub screen: Option<Screen>,
}

impl Made {
    pub fn kind(self) -> MachineKind {
        match self.screen {
            Some(_) => MachineKind::Desktop,
            None => MachineKind::Linux,
        }
    }

    pub fn setting(self) -> SettingKind {
        match self.screen {
            Some(_) => SettingKind::Desktop,
            None => SettingKind::Sandbox,
        }
    }

    /// The groups its daemon answers, exactly.
    pub fn groups(self) -> Vec<Group> {
        let mut g = SANDBOX.to_vec();
        if self.screen.is_some() {
            g.extend_from_slice(crate::docker::desktop::GROUPS);
        }
        g
    }

    /// Init's flags beside the child layer's: a desktop's init starts
    /// its own X server.
    pub fn init_args(self, mut init: InitArgs) -> InitArgs {
        if let Some(screen) = self.screen {
            init.xvfb = Some(XVFB.into());
            init.screen = screen;
        }
        init
    }

    /// Every way a hello differs from what this provider makes, in words.
    pub fn drift(self, hello: &computerd::protocol::HelloResult) -> Vec<String> {
        let groups = self.groups();
        let expect = Expect {
            kind: self.kind(),
            groups: &groups,
            exact: true,
            arch: None,
        };
        crate::daemon_backed::hello::drift(hello, &expect)
            .into_iter()
            .map(|d| match d {
                Drift::Kind { got, .. } if self.screen.is_some() && got == MachineKind::Linux => {
                    "the daemon says kind linux, not desktop: the desktop's X server has gone"
                        .into()
                }
                d => format!("{d:?}"),
            })
            .collect()
    }

    /// Refuse a template with no X server before init is started.
    pub async fn check_template(self, host: &dyn ChildHost, template: &str) -> Result<()> {
        if self.screen.is_none() {
            return Ok(());
        }
        let argv: Vec<String> = [
            "/bin/sh",
            "-c",
            "[ -x \"$1\" ] && [ -f \"$1\" ]",
            "sh",
            XVFB,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let ran = host.run(&argv, CHECK_WITHIN).await?;
        if ran.code == 0 {
            return Ok(());
        }
        Err(ProviderError::unsupported(format!(
            "the E2B template {template} has no X server ({XVFB}): a desktop needs a template with X, such as E2B's {DEFAULT_TEMPLATE} (--e2b-desktop-template)"
        ))
        .with_field("kind"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(kind: MachineKind, groups: Vec<Group>) -> computerd::protocol::HelloResult {
        computerd::protocol::HelloResult {
            version: computerd::VERSION.into(),
            os: "linux".into(),
            kind,
            arch: "amd64".into(),
            groups,
            bytes_frames: None,
        }
    }

    #[test]
    fn a_desktop_starts_its_x_through_init_and_expects_the_screen_groups() {
        let screen: Screen = "1024x768".parse().unwrap();
        let desk = Made {
            screen: Some(screen),
        };
        let init = desk.init_args(InitArgs::new(
            computerd::launch::Time::new(time::OffsetDateTime::UNIX_EPOCH),
            "/s",
        ));
        let args: Vec<String> = init
            .to_args()
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            args.windows(4)
                .any(|w| w == ["--xvfb", XVFB, "--screen", "1024x768"]),
            "{args:?}"
        );
        assert_eq!(desk.setting(), SettingKind::Desktop);
        assert!(
            desk.drift(&hello(MachineKind::Desktop, desk.groups()))
                .is_empty()
        );
        let gone = desk.drift(&hello(MachineKind::Linux, SANDBOX.to_vec()));
        assert_eq!(
            gone[0],
            "the daemon says kind linux, not desktop: the desktop's X server has gone"
        );
        assert_eq!(gone.len(), 2, "{gone:?}");
        let sandbox = Made { screen: None };
        let plain = sandbox.init_args(InitArgs::new(init.deadline, "/s"));
        assert_eq!(plain.xvfb, None);
        assert!(
            sandbox
                .drift(&hello(MachineKind::Linux, sandbox.groups()))
                .is_empty()
        );
        assert_eq!(
            sandbox
                .drift(&hello(MachineKind::Desktop, desk.groups()))
                .len(),
            2
        );
    }
}
