//! Local desktops: a local computer whose init starts this machine's Xvfb
//! as the computer's user (`computerd init --xvfb … --screen …`), on a
//! display socket in the computer's own /tmp, and gives its programs
//! DISPLAY. The provider makes desktops when the server asks for them
//! (`--kind desktop`) and only where Xvfb is installed; a computer is
//! handed out once hello declares the screen.

use std::path::PathBuf;

use computerd::launch::{InitArgs, Screen};
use computerd::protocol::{Group, SettingKind};

use crate::types::{ProviderError, Result};

/// The groups a desktop declares beside exec, files and processes.
pub const GROUPS: &[Group] = &[Group::Screen, Group::InputPointer, Group::InputKeys];

/// Where Xvfb is looked for, in this machine's OS directories (the ones a
/// sandbox sees read-only at the same paths).
pub const XVFB_PATHS: &[&str] = &["/usr/bin/Xvfb", "/usr/local/bin/Xvfb", "/bin/Xvfb"];

/// The package that installs Xvfb, named in the refusal.
pub const PACKAGE: &str = "xvfb";

/// What a local desktop is started with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desktop {
    pub xvfb: PathBuf,
    pub screen: Screen,
}

impl Desktop {
    /// A desktop with `screen` from this machine's Xvfb; refused, naming
    /// the package to install, where there is none.
    pub fn find(screen: Screen) -> Result<Desktop> {
        Self::find_in(screen, XVFB_PATHS)
    }

    pub fn find_in(screen: Screen, paths: &[&str]) -> Result<Desktop> {
        match crate::cdp::chromium::find_in(paths) {
            Some(xvfb) => Ok(Desktop { xvfb, screen }),
            None => Err(ProviderError::unsupported(format!(
                "--kind desktop needs Xvfb on this machine, and there is none at {}: install the package {PACKAGE} (apt-get install {PACKAGE}), or serve sandboxes",
                paths.join(", ")
            ))
            .with_field("kind")),
        }
    }

    /// Init's flags for this desktop.
    pub fn launch(&self, init: &mut InitArgs) {
        init.xvfb = Some(self.xvfb.clone());
        init.screen = self.screen;
    }
}

/// The kinds a local provider makes: sandboxes, or the desktops or
/// browsers it was made for (`made`).
pub fn check_kind(kind: SettingKind, made: SettingKind) -> Result<()> {
    crate::daemon_backed::check_kind("the local provider", kind, made, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_xvfb_is_refused_naming_the_package() {
        let e = Desktop::find_in(Screen::DEFAULT, &["/nonexistent/Xvfb"]).unwrap_err();
        assert_eq!(
            e.message,
            "--kind desktop needs Xvfb on this machine, and there is none at /nonexistent/Xvfb: install the package xvfb (apt-get install xvfb), or serve sandboxes"
        );
        assert_eq!(e.field.as_deref(), Some("kind"));
    }

    #[test]
    fn a_desktop_starts_its_xvfb_through_inits_flags() {
        let d = Desktop {
            xvfb: "/usr/bin/Xvfb".into(),
            screen: "1920x1080".parse().unwrap(),
        };
        let mut init = InitArgs::new(
            computerd::launch::Time::from_unix_ms(1_900_000_000_000).unwrap(),
            "/run/computerd/computerd.sock",
        );
        d.launch(&mut init);
        let argv: Vec<String> = init
            .to_args()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            argv.windows(4)
                .any(|w| w == ["--xvfb", "/usr/bin/Xvfb", "--screen", "1920x1080"]),
            "{argv:?}"
        );
    }

    #[test]
    fn the_kind_asked_must_be_the_kind_made() {
        let e = check_kind(SettingKind::Desktop, SettingKind::Sandbox).unwrap_err();
        assert_eq!(
            e.message,
            "the local provider makes sandboxes here, not a desktop: a desktop needs a server started with --kind desktop"
        );
        let e = check_kind(SettingKind::Sandbox, SettingKind::Browser).unwrap_err();
        assert_eq!(
            e.message,
            "the local provider makes browsers here, not a sandbox: this server makes browsers (--kind browser)"
        );
        assert!(check_kind(SettingKind::Sandbox, SettingKind::Desktop).is_err());
    }
}
