//! How a provider's settings reach it: typed, from flags and variables
//! scoped to it (`--<id>-<key>`, `COMPUTER_MCP_<ID>_<KEY>`), from its
//! `[providers.<id>]` table of the server's TOML file, and from defaults that
//! need the environment, which the server finds (it is the only crate that
//! reads the environment) and hands in as [`HostDefaults`].
//!
//! [`layer`] is the one merge of flags, variables, a file's table and
//! defaults; the server layers its own options with it too.

use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, FromArgMatches};
use computerd::launch::Screen;
use computerd::protocol::SettingKind;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// One table of a TOML file, as JSON values (the shape serde reads).
pub type Table = serde_json::Map<String, serde_json::Value>;

/// Defaults that depend on the machine the server runs on, found by the
/// server and handed to every provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostDefaults {
    /// Where the server keeps its state: `/var/lib/computer-mcp` as root,
    /// else `$XDG_STATE_HOME/computer-mcp` or `~/.local/state/computer-mcp`;
    /// none without HOME or XDG_STATE_HOME.
    pub state_dir: Option<PathBuf>,
    /// `computerd` beside the server's binary, else the server's binary
    /// itself (it is computerd too); none when the binary cannot be found.
    pub computerd: Option<PathBuf>,
    /// The server's HOME, which computers must not see.
    pub home: Option<PathBuf>,
    /// The directory relative paths in options are taken from.
    pub cwd: Option<PathBuf>,
    /// The kind of computer the server makes (`--kind`).
    pub kind: SettingKind,
    /// A desktop's screen (`--screen`).
    pub screen: Screen,
    /// Where a provider that keeps no files of its own on this host (the
    /// cloud vendors, Kubernetes) keeps the snapshots it takes through
    /// the daemon's `tar.*`, one directory per provider id under it: the
    /// server's state directory's `snapshots`. None: no snapshots there.
    pub snapshot_dir: Option<PathBuf>,
}

impl Default for HostDefaults {
    fn default() -> Self {
        HostDefaults {
            state_dir: None,
            computerd: None,
            home: None,
            cwd: None,
            kind: SettingKind::Sandbox,
            screen: Screen::DEFAULT,
            snapshot_dir: None,
        }
    }
}

impl HostDefaults {
    /// Some when the server makes desktops: their screen.
    pub fn desktop(&self) -> Option<Screen> {
        (self.kind == SettingKind::Desktop).then_some(self.screen)
    }

    /// The snapshot store of provider `id` under [`Self::snapshot_dir`].
    pub fn snapshot_store(&self, id: &'static str) -> Option<crate::snapshot::SnapshotStore> {
        self.snapshot_dir
            .as_ref()
            .map(|d| crate::snapshot::SnapshotStore::new(id, d.join(id)))
    }

    /// Whether the server makes browsers.
    pub fn browser(&self) -> bool {
        self.kind == SettingKind::Browser
    }

    /// `path`, made absolute from the server's directory.
    pub fn absolute(&self, option: &str, path: PathBuf) -> Result<PathBuf, String> {
        if path.is_absolute() {
            return Ok(path);
        }
        match &self.cwd {
            Some(cwd) => Ok(cwd.join(path)),
            None => Err(format!(
                "{option} {} is relative and the server's directory is unknown; give an absolute path",
                path.display()
            )),
        }
    }
}

/// Whether the user gave the option with clap id `id` (a flag or a
/// variable), rather than leaving it to its default.
pub fn given(matches: &ArgMatches, id: &str) -> Option<ValueSource> {
    // try_contains_id: an id the command does not define is "not given",
    // where value_source would panic in a debug build.
    if !matches.try_contains_id(id).unwrap_or(false) {
        return None;
    }
    matches
        .value_source(id)
        .filter(|s| matches!(s, ValueSource::CommandLine | ValueSource::EnvVariable))
}

/// One group of options, layered: a flag, then its variable (clap reads
/// both), then the key of `table`, then clap's default. `T`'s serde field
/// names are its keys in the table and its clap ids are `scope` + the key.
/// A key `T` does not have is refused naming the key and every known one;
/// a value of the wrong type is refused naming its key.
pub fn layer<T>(matches: &ArgMatches, table: Option<&Table>, scope: &str) -> Result<T, String>
where
    T: FromArgMatches + Serialize + DeserializeOwned,
{
    let from_flags = T::from_arg_matches(matches).map_err(|e| e.to_string())?;
    let mut merged = match serde_json::to_value(&from_flags) {
        Ok(serde_json::Value::Object(m)) => m,
        Ok(_) => return Err("options must be a table of keys".into()),
        Err(e) => return Err(e.to_string()),
    };
    for (key, value) in table.into_iter().flatten() {
        // A key T lacks goes in too: deserializing refuses it in words.
        let known = merged.contains_key(key);
        if !known || given(matches, &format!("{scope}{key}")).is_none() {
            merged.insert(key.clone(), value.clone());
        }
    }
    serde_path_to_error::deserialize(serde_json::Value::Object(merged)).map_err(|e| {
        let (path, inner) = (e.path().to_string(), e.inner().to_string());
        // An unknown key's message names it already.
        if path == "." || inner.starts_with("unknown field") {
            inner
        } else {
            format!("{path}: {inner}")
        }
    })
}

/// The keys of a group of options (its serde field names), in order.
pub fn keys_of<T>(cmd: clap::Command) -> Vec<String>
where
    T: FromArgMatches + Serialize,
{
    let Ok(m) = cmd
        .no_binary_name(true)
        .try_get_matches_from(Vec::<String>::new())
    else {
        return Vec::new();
    };
    match T::from_arg_matches(&m).map(|t| serde_json::to_value(&t)) {
        Ok(Ok(serde_json::Value::Object(map))) => map.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Args, CommandFactory, Parser};
    use serde::Deserialize;

    #[derive(Parser, Debug, Serialize, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Opts {
        #[arg(long, default_value_t = 3)]
        size: u32,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        #[serde(default)]
        loud: bool,
    }

    fn layered(argv: &[&str], table: &str) -> Result<Opts, String> {
        let m = Opts::command()
            .no_binary_name(true)
            .try_get_matches_from(argv)
            .unwrap();
        let t: Table = serde_json::from_str(table).unwrap();
        layer(&m, Some(&t), "")
    }

    #[test]
    fn a_flag_beats_the_table_and_the_table_beats_the_default() {
        let o = layered(&["--size", "5"], r#"{"size": 9, "name": "x"}"#).unwrap();
        assert_eq!(
            o,
            Opts {
                size: 5,
                name: Some("x".into()),
                loud: false
            }
        );
        let o = layered(&[], r#"{"size": 9, "loud": true}"#).unwrap();
        assert_eq!(
            o,
            Opts {
                size: 9,
                name: None,
                loud: true
            }
        );
        let o = layered(&[], "{}").unwrap();
        assert_eq!((o.size, o.name), (3, None));
    }

    #[test]
    fn an_unknown_key_or_a_wrong_type_is_refused_by_name() {
        let e = layered(&[], r#"{"colour": "red"}"#).unwrap_err();
        assert_eq!(
            e,
            "unknown field `colour`, expected one of `size`, `name`, `loud`"
        );
        let e = layered(&[], r#"{"size": "big"}"#).unwrap_err();
        assert!(e.starts_with("size: invalid type: string \"big\""), "{e}");
    }

    #[test]
    fn keys_are_the_serde_fields() {
        #[derive(Args, Serialize)]
        struct Two {
            #[arg(long)]
            a: Option<u8>,
            #[arg(long)]
            b_c: Option<u8>,
        }
        let cmd = Two::augment_args(clap::Command::new("t"));
        assert_eq!(keys_of::<Two>(cmd), vec!["a", "b_c"]);
    }
}
