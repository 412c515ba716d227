//! A desktop made by a daemon-backed provider whose init starts its own X
//! server (`computerd init --xvfb /usr/bin/Xvfb --screen WxH`, as the local
//! desktop does): the X server runs as the daemon's user, on a display
//! init picks, held by init and ended with the computer. E2B and
//! Kubernetes make desktops this way; Docker starts its X server through
//! the daemon after init is up (`docker::desktop`), with the same groups.

use computerd::launch::{InitArgs, Screen};
use computerd::protocol::{Group, MachineKind, SettingKind};

use super::hello::{Drift, Expect};

/// The groups a desktop declares beside exec, files and processes.
pub const GROUPS: &[Group] = &[Group::Screen, Group::InputPointer, Group::InputKeys];
/// The X server a desktop's image must have.
pub const XVFB: &str = "/usr/bin/Xvfb";
/// A sandbox's groups.
pub const SANDBOX: &[Group] = &[Group::Exec, Group::Files, Group::Processes];

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
            g.extend_from_slice(GROUPS);
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
        super::hello::drift(hello, &expect)
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
