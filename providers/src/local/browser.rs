//! Local browsers: a local computer whose connection starts this machine's
//! Chromium inside it, headless, as the computer's user, under its limits
//! and its network (with an allowlist, through its egress proxy), its
//! profile in the computer's own /work. CDP rides the computer's daemon
//! connection ([`crate::cdp::pipe`]): nothing listens, in the computer or
//! on this machine. The provider makes browsers when the server asks for
//! them (`--kind browser`) and only where Chromium is installed. A
//! desktop gets the same browser, shown on its screen and started only
//! when a page tool first needs it, where Chromium is installed.

use std::path::PathBuf;

use computerd::protocol::Group;

use crate::cdp::chromium::{self, Launch};
use crate::daemon_backed::browser as in_computer;
use crate::types::{NetworkKind, Result};

pub use chromium::PROFILE;

/// The groups a local browser declares beside exec, files and processes.
pub const GROUPS: &[Group] = &[Group::Cdp];

/// What a local browser is started with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Browser {
    pub chromium: PathBuf,
}

impl Browser {
    /// A browser from this machine's Chromium; refused, naming the package
    /// to install, where there is none.
    pub fn find() -> Result<Browser> {
        Ok(Browser {
            chromium: chromium::find()?,
        })
    }

    /// How the browser of a computer with `network` is started: headless,
    /// or on a desktop's screen (`shown`).
    pub fn launch(&self, network: NetworkKind, shown: bool) -> Launch {
        in_computer::launch(self.chromium.clone(), network == NetworkKind::Allow, shown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon_backed::browser::EGRESS_PROXY;

    #[test]
    fn an_allowlist_browser_goes_through_the_egress_and_others_do_not() {
        let b = Browser {
            chromium: "/usr/lib/chromium/chromium".into(),
        };
        assert_eq!(
            b.launch(NetworkKind::Allow, false).proxy.as_deref(),
            Some(EGRESS_PROXY)
        );
        assert_eq!(b.launch(NetworkKind::None, false).proxy, None);
        assert_eq!(b.launch(NetworkKind::Open, false).proxy, None);
        let argv = b.launch(NetworkKind::None, false).argv();
        assert!(argv.contains(&"--user-data-dir=/work/.browser".to_string()));
        assert!(argv.contains(&"--remote-debugging-pipe".to_string()));
        assert!(argv.contains(&"--headless=new".to_string()));
        // On a desktop it is shown.
        let shown = b.launch(NetworkKind::None, true).argv();
        assert!(
            !shown.iter().any(|a| a.starts_with("--headless")),
            "{shown:?}"
        );
    }
}
