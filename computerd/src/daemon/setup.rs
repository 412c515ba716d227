//! Why a step of start-up (`init`, `sandbox`, `egress`) failed, as a type:
//! what was asked against this host (words that name the flag and say what
//! to do), or a system call of a named step with its error kept.
//!
//! [`crate::daemon::cli::StartError`] says which subcommand it was; the
//! words here are the step's.

use std::borrow::Cow;

/// A start-up step that did not happen.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// What was asked cannot be done here: a flag against this host or
    /// another flag, or a state read back that is not the one made.
    #[error("{0}")]
    Refused(String),
    /// A system call (through nix) of `step` failed.
    #[error("{flag}could not {step} ({source})")]
    Sys {
        flag: Flag,
        step: Cow<'static, str>,
        #[source]
        source: nix::Error,
    },
    /// A file or process operation of `step` failed.
    #[error("{flag}could not {step} ({source})")]
    Io {
        flag: Flag,
        step: Cow<'static, str>,
        #[source]
        source: std::io::Error,
    },
}

/// The flag a failed step serves, said before it (`--user: could not …`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flag(pub Option<&'static str>);

impl std::fmt::Display for Flag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(flag) => write!(f, "{flag}: "),
            None => Ok(()),
        }
    }
}

/// Start-up's result.
pub type Result<T> = std::result::Result<T, SetupError>;

impl From<String> for SetupError {
    fn from(words: String) -> Self {
        SetupError::Refused(words)
    }
}

impl From<&'static str> for SetupError {
    fn from(words: &'static str) -> Self {
        SetupError::Refused(words.into())
    }
}

/// A system call's error turned into the [`SetupError`] of its step.
pub trait Step<T> {
    /// `could not {step} ({error})`.
    fn step(self, step: impl Into<Cow<'static, str>>) -> Result<T>;
    /// `{flag}: could not {step} ({error})`.
    fn flag_step(self, flag: &'static str, step: impl Into<Cow<'static, str>>) -> Result<T>;
}

/// An error a [`Step`] keeps as its source.
pub trait StepSource {
    fn in_step(self, flag: Flag, step: Cow<'static, str>) -> SetupError;
}

impl StepSource for nix::Error {
    fn in_step(self, flag: Flag, step: Cow<'static, str>) -> SetupError {
        SetupError::Sys {
            flag,
            step,
            source: self,
        }
    }
}

impl StepSource for std::io::Error {
    fn in_step(self, flag: Flag, step: Cow<'static, str>) -> SetupError {
        SetupError::Io {
            flag,
            step,
            source: self,
        }
    }
}

impl<T, E: StepSource> Step<T> for std::result::Result<T, E> {
    fn step(self, step: impl Into<Cow<'static, str>>) -> Result<T> {
        self.map_err(|e| e.in_step(Flag(None), step.into()))
    }
    fn flag_step(self, flag: &'static str, step: impl Into<Cow<'static, str>>) -> Result<T> {
        self.map_err(|e| e.in_step(Flag(Some(flag)), step.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_step_says_its_flag_its_step_and_the_error() {
        let said: Vec<String> = [
            Err::<(), _>(nix::Error::EPERM).step("set no_new_privs"),
            Err::<(), _>(nix::Error::EPERM).flag_step("--user", "become uid 5"),
            Err::<(), _>(std::io::Error::from_raw_os_error(libc::ENOENT)).step("enter /work"),
            Err::<(), _>(SetupError::from("--user 0:0: never root")),
        ]
        .into_iter()
        .map(|r| r.unwrap_err().to_string())
        .collect();
        assert_eq!(
            said,
            [
                "could not set no_new_privs (EPERM: Operation not permitted)",
                "--user: could not become uid 5 (EPERM: Operation not permitted)",
                "could not enter /work (No such file or directory (os error 2))",
                "--user 0:0: never root",
            ]
        );
    }
}
