//! apps.install: an APK from the computer's files onto the phone.
//!
//! A phone has no files of its own in the computer protocol: its files
//! are the folders the user shared with the server (`--share DIR`), which
//! a phone's computer sees at `/workspace` (or `/workspace/<name>` each,
//! for several), as a local computer would. An install reads the APK from
//! there on this side, pushes it over adb's `sync:` service to a temporary
//! file of its own under `/data/local/tmp`, runs `pm install -r` on it and
//! removes it. A path outside those folders is refused before anything is
//! sent to the phone.
//!
//! `pm install` says `Success` and nothing of the package (AOSP
//! `PackageManagerShellCommand`: `doCommitSession` prints `Success`, or
//! `Failure [<status message>]`), so the package is read from
//! `pm list packages -f` before and after: its `package:<path>=<name>`
//! lines (`runListPackages`). Every install moves a package to a new code
//! path (Android 11+ draws a random `/data/app/~~…==/<pkg>-…==/` for each,
//! older ones alternate `<pkg>-1` and `<pkg>-2`), so the one name whose
//! path changed, or that is new, is the package installed.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use computerd::protocol::RpcError;

use crate::client::{Shell, ShellError};

/// The largest APK an install reads (it is held in memory while pushed).
pub const MAX_APK_BYTES: u64 = 512 * 1024 * 1024;

/// Where a phone's computer sees a shared host folder.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Folder {
    /// The path inside the computer: `/workspace` or `/workspace/<name>`.
    pub inside: String,
    /// The host directory, canonical.
    pub host: PathBuf,
}

/// Why an install did not happen.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The path or the file was refused; nothing was sent.
    #[error("{0}")]
    Refused(RpcError),
    /// The phone went away.
    #[error("{0}")]
    Gone(ShellError),
    /// The phone's package manager refused the APK, in its words.
    #[error("{0}")]
    Failed(String),
}

impl From<ShellError> for InstallError {
    fn from(e: ShellError) -> Self {
        InstallError::Gone(e)
    }
}

fn refuse(words: String) -> InstallError {
    InstallError::Refused(RpcError::invalid_field("path", words))
}

/// The words naming what a phone's files are, for a refusal.
fn where_files_are(folders: &[Folder]) -> String {
    if folders.is_empty() {
        return "this phone has no files: share a host folder with the server (--share DIR) and give the APK as /workspace/<name>.apk".into();
    }
    let names: Vec<&str> = folders.iter().map(|f| f.inside.as_str()).collect();
    format!(
        "a phone's files are the shared folders {}",
        names.join(", ")
    )
}

/// The host file `path` (a path in the computer's files) names: inside a
/// shared folder, with no `.`/`..` part and no symlink leading out, a
/// regular `.apk` file of at most [`MAX_APK_BYTES`].
pub fn resolve(folders: &[Folder], path: &str) -> Result<PathBuf, InstallError> {
    let p = Path::new(path);
    if !p.is_absolute() || path.contains('\0') {
        return Err(refuse(format!(
            "path {path:?} is not an absolute path; {}",
            where_files_are(folders)
        )));
    }
    if p.components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(refuse(format!(
            "path {path:?} has a . or .. part; give the APK's plain path"
        )));
    }
    if p.extension().is_none_or(|e| !e.eq_ignore_ascii_case("apk")) {
        return Err(refuse(format!(
            "path {path:?} does not name an .apk file; an Android package is installed from its APK"
        )));
    }
    // The deepest folder that holds the path (`/workspace/a` before
    // `/workspace`).
    let folder = folders
        .iter()
        .filter(|f| p.starts_with(&f.inside))
        .max_by_key(|f| f.inside.len())
        .ok_or_else(|| {
            refuse(format!(
                "path {path:?} is outside the computer's files; {}",
                where_files_are(folders)
            ))
        })?;
    let rest = p.strip_prefix(&folder.inside).unwrap_or(p);
    let host = folder.host.join(rest);
    let real = std::fs::canonicalize(&host).map_err(|e| {
        let words = if e.kind() == std::io::ErrorKind::NotFound {
            format!("no file {path} in the computer's files")
        } else {
            format!("{path} cannot be read: {e}")
        };
        InstallError::Refused(RpcError::not_found(words).with_field("path"))
    })?;
    if !real.starts_with(&folder.host) {
        return Err(refuse(format!(
            "path {path:?} is a symlink that leads out of the shared folder {}; give the APK itself",
            folder.inside
        )));
    }
    let meta = std::fs::metadata(&real).map_err(|e| refuse(format!("{path}: {e}")))?;
    if !meta.is_file() {
        return Err(refuse(format!("path {path:?} is not a file")));
    }
    if meta.len() > MAX_APK_BYTES {
        return Err(InstallError::Refused(
            RpcError::limit(format!(
                "{path} is {} bytes; an APK installed here is at most {MAX_APK_BYTES} bytes",
                meta.len()
            ))
            .with_field("path"),
        ));
    }
    Ok(real)
}

/// `pm list packages -f`: each package's code path, by name.
pub fn code_paths(out: &str) -> BTreeMap<String, String> {
    out.lines()
        .filter_map(|l| {
            let (path, name) = l.trim().strip_prefix("package:")?.rsplit_once('=')?;
            crate::facts::is_package(name).then(|| (name.to_string(), path.to_string()))
        })
        .collect()
}

/// What `pm install` said went wrong: its `Failure [...]` line, else its
/// words when it did not say `Success`.
pub fn install_failure(out: &str, exit: u8) -> Option<String> {
    let lines: Vec<&str> = out
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if let Some(f) = lines.iter().find(|l| l.starts_with("Failure")) {
        return Some(f.to_string());
    }
    if exit == 0 && lines.contains(&"Success") {
        return None;
    }
    let said: String = lines.join(" ").chars().take(300).collect();
    Some(format!("pm install exited {exit} and said {said:?}"))
}

/// A temporary name under `/data/local/tmp` no other install uses.
fn temp_path() -> String {
    let mut b = [0u8; 8];
    // Without the OS's randomness the time still tells installs apart.
    if getrandom::fill(&mut b).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or_default();
        b = t.to_le_bytes();
    }
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("/data/local/tmp/computer-mcp-{hex}.apk")
}

/// Install the APK at `path` in the computer's files: the package name
/// it installed.
pub async fn install(
    shell: &dyn Shell,
    folders: &[Folder],
    path: &str,
) -> Result<String, InstallError> {
    let host = resolve(folders, path)?;
    let apk = tokio::fs::read(&host)
        .await
        .map_err(|e| refuse(format!("{path} cannot be read: {e}")))?;
    let before = code_paths(&shell.run("pm list packages -f").await?.stdout);
    let remote = temp_path();
    shell.push(&apk, &remote).await?;
    let ran = shell.run(&format!("pm install -r {remote}")).await;
    // The temporary copy goes whatever pm said.
    let removed = shell.run(&format!("rm -f {remote}")).await;
    let ran = ran?;
    if let Err(e) = removed {
        tracing::warn!("the pushed APK {remote} was not removed: {e}");
    }
    if let Some(why) = install_failure(&ran.stdout, ran.exit) {
        return Err(InstallError::Failed(format!(
            "the phone did not install {path}: {why}"
        )));
    }
    let after = code_paths(&shell.run("pm list packages -f").await?.stdout);
    let changed: Vec<&String> = after
        .iter()
        .filter(|(name, code)| before.get(*name) != Some(*code))
        .map(|(name, _)| name)
        .collect();
    match changed.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(InstallError::Failed(format!(
            "pm installed {path} (it said Success), but no package's code path changed in pm list packages -f, so which package it was is not known"
        ))),
        many => Err(InstallError::Failed(format!(
            "pm installed {path}, but {} packages changed meanwhile ({}), so which one it was is not known",
            many.len(),
            many.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folders(dir: &Path) -> Vec<Folder> {
        vec![Folder {
            inside: "/workspace".into(),
            host: std::fs::canonicalize(dir).unwrap(),
        }]
    }

    fn field_and_words(e: InstallError) -> (Option<String>, String) {
        match e {
            InstallError::Refused(r) => (r.data.and_then(|d| d.field), r.message),
            other => panic!("not a refusal: {other}"),
        }
    }

    #[test]
    fn only_an_apk_inside_a_shared_folder_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("app.apk"), b"apk").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"txt").unwrap();
        let f = folders(dir.path());
        let got = resolve(&f, "/workspace/app.apk").unwrap();
        assert_eq!(got, f[0].host.join("app.apk"));
        for (path, words) in [
            ("/etc/app.apk", "outside the computer's files"),
            ("workspace/app.apk", "not an absolute path"),
            ("/workspace/../etc/x.apk", ". or .. part"),
            ("/workspace/notes.txt", "not name an .apk"),
            ("/workspace/none.apk", "no file /workspace/none.apk"),
            ("/workspacex/app.apk", "outside the computer's files"),
        ] {
            let (field, msg) = field_and_words(resolve(&f, path).unwrap_err());
            assert_eq!(field.as_deref(), Some("path"), "{path}");
            assert!(msg.contains(words), "{path}: {msg}");
        }
        let (_, msg) = field_and_words(resolve(&[], "/workspace/app.apk").unwrap_err());
        assert!(msg.contains("--share"), "{msg}");
    }

    #[test]
    fn a_symlink_out_of_the_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.apk"), b"apk").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret.apk"),
            dir.path().join("link.apk"),
        )
        .unwrap();
        let (_, msg) =
            field_and_words(resolve(&folders(dir.path()), "/workspace/link.apk").unwrap_err());
        assert!(msg.contains("leads out"), "{msg}");
    }

    #[test]
    fn pms_words_are_read_as_aosp_prints_them() {
        let paths = code_paths(
            "package:/data/app/~~ab==/com.a.b-cd==/base.apk=com.a.b\npackage:/system/app/Settings/Settings.apk=com.android.settings\n",
        );
        assert_eq!(
            paths.get("com.a.b").map(String::as_str),
            Some("/data/app/~~ab==/com.a.b-cd==/base.apk")
        );
        assert_eq!(paths.len(), 2);
        assert_eq!(
            install_failure("Performing Streamed Install\nSuccess\n", 0),
            None
        );
        assert_eq!(
            install_failure(
                "Failure [INSTALL_FAILED_VERSION_DOWNGRADE: Downgrade detected]\n",
                1
            )
            .as_deref(),
            Some("Failure [INSTALL_FAILED_VERSION_DOWNGRADE: Downgrade detected]")
        );
        assert!(install_failure("", 1).unwrap().contains("exited 1"));
    }
}
