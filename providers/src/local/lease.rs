//! Who uses a state directory's cgroup group right now. Every local provider
//! (a server, a `doctor`, a one-shot `exec`) holds a shared `flock` on the
//! state directory for its life. Only a provider that finds itself alone (an
//! exclusive lock taken without waiting) removes what nobody else may be
//! using: the group itself when it ends, and at its start the cgroups whose
//! computer's state is gone (another live server's spare, or a computer it
//! is making, has a cgroup and no state yet). So a one-shot ending beside a
//! running server never takes the group from under it.

use std::fs::File;
use std::io;
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

/// A provider's hold on its state directory; dropping it lets go.
#[derive(Debug)]
pub struct Lease {
    lock: Flock<File>,
}

impl Lease {
    /// Take the state directory's lease (the directory is made if missing).
    /// True with it when no other provider holds one: the lease is then
    /// exclusive until [`Lease::share`], so that no other provider starts
    /// or ends meanwhile. Otherwise it waits for a shared lease (an
    /// exclusive one is held only for a start's or an end's tidying).
    pub fn take(state_dir: &Path) -> io::Result<(Lease, bool)> {
        std::fs::create_dir_all(state_dir)?;
        super::state::make_private(state_dir)?;
        let dir = File::open(state_dir)?;
        match Flock::lock(dir, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => Ok((Lease { lock }, true)),
            Err((dir, nix::errno::Errno::EWOULDBLOCK)) => {
                let lock = Flock::lock(dir, FlockArg::LockShared).map_err(|(_, e)| e)?;
                Ok((Lease { lock }, false))
            }
            Err((_, e)) => Err(e.into()),
        }
    }

    /// Exclusive now if no other provider holds a lease (then
    /// [`Lease::share`] after the tidying); else false, and the lease must
    /// be taken again with [`Lease::share`] (a failed conversion lets go).
    pub fn exclusive_now(&self) -> bool {
        self.lock.relock(FlockArg::LockExclusiveNonblock).is_ok()
    }

    /// From exclusive to shared, once a lone start's tidying is done.
    pub fn share(&self) -> io::Result<()> {
        Ok(self.lock.relock(FlockArg::LockShared)?)
    }

    /// Let go; `if_last` runs first when no other provider holds a lease
    /// (with the lease exclusive, so none starts meanwhile). Whether it
    /// ran.
    pub fn end(self, if_last: impl FnOnce()) -> bool {
        // A failed conversion drops the shared lock, which ending does anyway.
        let last = self.lock.relock(FlockArg::LockExclusiveNonblock).is_ok();
        if last {
            if_last();
        }
        last
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn only_the_last_lease_of_a_state_directory_runs_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let (first, alone) = Lease::take(&state).unwrap();
        assert!(alone, "the first lease is alone");
        first.share().unwrap();
        let (second, alone) = Lease::take(&state).unwrap();
        assert!(!alone, "a second lease beside a shared first is not alone");
        let (one_shot, alone) = Lease::take(&state).unwrap();
        assert!(!alone);
        assert!(!one_shot.exclusive_now());
        one_shot.share().unwrap();
        assert!(!one_shot.end(|| panic!("a lease with others beside it tidied")));
        assert!(!second.end(|| panic!("a lease with the first beside it tidied")));
        let mut ran = false;
        assert!(first.end(|| ran = true));
        assert!(ran, "the last lease tidies");
        let (again, alone) = Lease::take(&state).unwrap();
        assert!(alone, "after every lease ended the next one is alone");
        drop(again);
    }
}
