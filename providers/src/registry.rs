//! The registry: the one place a provider id becomes a provider. It is one
//! table, [`PROVIDERS`], from which the id list, the lookup and every
//! provider's scoped flags all come.
//!
//! A provider's settings are its own typed struct ([`Configure::Settings`]):
//! clap reads it from flags and variables scoped to the provider
//! (`--local-state-dir`, `COMPUTER_MCP_LOCAL_STATE_DIR`; clap ids
//! `local.state_dir`), serde from the provider's `[providers.<id>]` table of
//! the server's TOML file (key `state_dir`), and [`layer`] merges the two.
//! The names follow from the id and the key by rule, and a test holds every
//! registered provider to that rule.

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, Command};
use futures::future::BoxFuture;

use crate::provider::{Configure, Preflight, Provider};
use crate::settings::{HostDefaults, Table, given, keys_of, layer};
use crate::types::{ErrorCode, ProviderError, Result};

/// How the registry makes one provider: its flags, and the provider from
/// them.
#[derive(Clone, Copy)]
pub struct Constructor {
    settings: fn(Command) -> Command,
    keys: fn(Command) -> Vec<String>,
    make: fn(&str, &Sources<'_>, &HostDefaults) -> Result<Box<dyn Provider>>,
    survey: for<'a> fn(Option<&'a Table>, &'a HostDefaults) -> BoxFuture<'a, Vec<Preflight>>,
}

impl Constructor {
    /// The constructor of provider `P`.
    pub const fn of<P: Configure>() -> Self {
        Self {
            settings: P::Settings::augment_args,
            keys: keys_of::<P::Settings>,
            make: make::<P>,
            survey: survey_of::<P>,
        }
    }

    /// The provider's own flags, as clap arguments (global, so they are
    /// taken after a subcommand too).
    pub fn args(&self, id: &'static str) -> Vec<clap::Arg> {
        (self.settings)(Command::new(id))
            .get_arguments()
            .map(|a| a.clone().global(true))
            .collect()
    }

    /// The provider's keys in its `[providers.<id>]` table.
    pub fn keys(&self, id: &'static str) -> Vec<String> {
        (self.keys)((self.settings)(Command::new(id)))
    }
}

/// Every provider, by id.
pub const PROVIDERS: &[(&str, Constructor)] = &[
    ("local", Constructor::of::<crate::local::LocalProvider>()),
    ("docker", Constructor::of::<crate::docker::DockerProvider>()),
    (
        "browserbase",
        Constructor::of::<crate::browserbase::BrowserbaseProvider>(),
    ),
    ("kernel", Constructor::of::<crate::kernel::KernelProvider>()),
    ("adb", Constructor::of::<crate::adb::AdbProvider>()),
    (
        "phone-harness",
        Constructor::of::<crate::phone_harness::PhoneHarnessProvider>(),
    ),
    (
        "daytona",
        Constructor::of::<crate::daytona::DaytonaProvider>(),
    ),
    ("e2b", Constructor::of::<crate::e2b::E2bProvider>()),
    #[cfg(feature = "modal")]
    ("modal", Constructor::of::<crate::modal::ModalProvider>()),
    #[cfg(feature = "kubernetes")]
    (
        "kubernetes",
        Constructor::of::<crate::kubernetes::KubernetesProvider>(),
    ),
];

/// Every id the registry holds, in the table's order.
pub const PROVIDER_IDS: [&str; PROVIDERS.len()] = {
    let mut ids = [""; PROVIDERS.len()];
    let mut i = 0;
    while i < PROVIDERS.len() {
        ids[i] = PROVIDERS[i].0;
        i += 1;
    }
    ids
};

/// What `doctor` says of every registered provider but `configured`, in
/// the table's order ([`Configure::survey`]); `tables` is the file's
/// `[providers]` table.
pub async fn survey_others(
    configured: &str,
    tables: Option<&Table>,
    host: &HostDefaults,
) -> Vec<Preflight> {
    let mut out = Vec::new();
    for (id, c) in PROVIDERS.iter().filter(|(id, _)| *id != configured) {
        let table = tables
            .and_then(|t| t.get(*id))
            .and_then(serde_json::Value::as_object);
        out.extend((c.survey)(table, host).await);
    }
    out
}

/// Where a provider's settings come from besides the host's defaults.
#[derive(Clone, Copy, Debug)]
pub struct Sources<'a> {
    /// The server's parsed command line (flags and variables), made with
    /// [`with_provider_flags`].
    pub matches: &'a ArgMatches,
    /// The file's `[providers]` table: one table per provider id.
    pub tables: Option<&'a Table>,
}

/// `cmd` with every provider's scoped flags added (each provider's
/// settings name their own help heading).
pub fn with_provider_flags(cmd: Command) -> Command {
    with_flags_of(PROVIDERS, cmd)
}

fn with_flags_of(table: &[(&'static str, Constructor)], mut cmd: Command) -> Command {
    for (id, c) in table {
        cmd = cmd.args(c.args(id));
    }
    cmd
}

/// Build the provider `id` from its settings. Refused, in words: an unknown
/// id (naming the known ones), an option or a table of a provider that is
/// not `id`, an unknown key of its table (naming its keys).
pub fn provider_for(
    id: &str,
    sources: &Sources<'_>,
    host: &HostDefaults,
) -> Result<Box<dyn Provider>> {
    provider_in(PROVIDERS, id, sources, host)
}

fn provider_in(
    table: &[(&'static str, Constructor)],
    id: &str,
    sources: &Sources<'_>,
    host: &HostDefaults,
) -> Result<Box<dyn Provider>> {
    let known = || table.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ");
    let Some((_, chosen)) = table.iter().find(|(k, _)| *k == id) else {
        return Err(ProviderError::new(
            ErrorCode::Invalid,
            format!("no provider {id:?}; the providers are: {}", known()),
        )
        .with_field("provider"));
    };
    for (other, _) in sources.tables.into_iter().flatten() {
        if !table.iter().any(|(k, _)| k == other) {
            return Err(ProviderError::invalid(
                "providers",
                format!(
                    "the config file has a [providers.{other}] table, but there is no provider {other:?}; the providers are: {}",
                    known()
                ),
            ));
        }
        if other != id {
            return Err(ProviderError::invalid(
                "providers",
                format!(
                    "the config file has a [providers.{other}] table, but the provider is {id}: remove the table, or choose --provider {other}"
                ),
            ));
        }
    }
    for (other, c) in table.iter().filter(|(k, _)| *k != id) {
        for arg in c.args(other) {
            let how = match given(sources.matches, arg.get_id().as_str()) {
                Some(ValueSource::EnvVariable) => arg
                    .get_env()
                    .map(|e| format!("{} (set in the environment)", e.to_string_lossy())),
                Some(_) => arg.get_long().map(|l| format!("--{l}")),
                None => None,
            };
            if let Some(how) = how {
                return Err(ProviderError::invalid(
                    "provider",
                    format!(
                        "{how} is an option of the {other} provider, but the provider is {id}: leave it out, or choose --provider {other}"
                    ),
                ));
            }
        }
    }
    (chosen.make)(id, sources, host)
}

fn survey_of<'a, P: Configure>(
    table: Option<&'a Table>,
    host: &'a HostDefaults,
) -> BoxFuture<'a, Vec<Preflight>> {
    Box::pin(P::survey(table, host))
}

fn make<P: Configure>(
    id: &str,
    sources: &Sources<'_>,
    host: &HostDefaults,
) -> Result<Box<dyn Provider>> {
    let own = match sources.tables.and_then(|t| t.get(id)) {
        None => None,
        Some(serde_json::Value::Object(t)) => Some(t),
        Some(_) => {
            return Err(ProviderError::invalid(
                "providers",
                format!("[providers.{id}] must be a table of keys"),
            ));
        }
    };
    let settings = layer::<P::Settings>(sources.matches, own, &format!("{id}."))
        .map_err(|e| ProviderError::invalid("providers", format!("[providers.{id}]: {e}")))?;
    Ok(Box::new(P::configure(settings, host)?))
}

/// Words for a flag (`--local-bogus`) or a variable
/// (`COMPUTER_MCP_LOCAL_BOGUS`) that is scoped to a provider by its name but
/// is none of that provider's options, naming the ones it has; `None` for a
/// word that is an option, or not scoped to any provider.
pub fn unknown_option(word: &str) -> Option<String> {
    unknown_in(PROVIDERS, word)
}

fn unknown_in(table: &[(&'static str, Constructor)], word: &str) -> Option<String> {
    let word = word.split('=').next().unwrap_or(word);
    for (id, c) in table {
        let args = c.args(id);
        let (flag, name) = if let Some(rest) = word.strip_prefix("--") {
            (true, rest.strip_prefix(&format!("{id}-")))
        } else {
            let prefix = format!("COMPUTER_MCP_{}_", id.to_uppercase().replace('-', "_"));
            (false, word.strip_prefix(prefix.as_str()))
        };
        if name.is_none() {
            continue;
        }
        let names: Vec<String> = args
            .iter()
            .filter_map(|a| {
                if flag {
                    a.get_long().map(|l| format!("--{l}"))
                } else {
                    a.get_env().map(|e| e.to_string_lossy().into_owned())
                }
            })
            .collect();
        if names.iter().any(|n| n == word) {
            return None;
        }
        let what = if flag { "flag" } else { "variable" };
        return Some(format!(
            "{what} {word} is not an option of the {id} provider; its options are: {}",
            names.join(", ")
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{
        AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, Labels, NetworkPolicy,
        NetworkReadBack, Release,
    };
    use crate::{Connection, local::LocalProvider};
    use serde::{Deserialize, Serialize};
    use tokio_util::sync::CancellationToken;

    /// A second provider, for the rules that need more than one.
    struct Echo(EchoSettings);

    #[derive(Clone, Debug, Args, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct EchoSettings {
        /// How loud.
        #[arg(
            id = "echo.volume",
            long = "echo-volume",
            env = "COMPUTER_MCP_ECHO_VOLUME"
        )]
        volume: Option<u32>,
    }

    impl Configure for Echo {
        type Settings = EchoSettings;
        fn configure(settings: EchoSettings, _host: &HostDefaults) -> Result<Self> {
            Ok(Echo(settings))
        }
    }

    fn nothing<T>() -> Result<T> {
        Err(ProviderError::unsupported("echo makes nothing"))
    }

    #[async_trait::async_trait]
    impl Provider for Echo {
        fn id(&self) -> &'static str {
            "echo"
        }
        fn capabilities(&self) -> Capabilities {
            Capabilities {
                kind: computerd::protocol::MachineKind::Linux,
                os: "linux".into(),
                daemon: crate::types::DaemonMode::None,
                groups: vec![],
                lifetime: crate::types::LifetimeMode::Janitor,
                release: vec![Release::Delete],
                max_lifetime_ms: 1,
                networks: vec![],
                network_read_back: false,
                isolation: format!("none ({:?})", self.0.volume),
                extend: false,
                shares: crate::types::ShareWay::None,
            }
        }
        fn check(&self, _spec: &ComputerSpec) -> Result<()> {
            nothing()
        }
        async fn create(&self, _s: &ComputerSpec, _c: &CancellationToken) -> Result<Created> {
            nothing()
        }
        async fn attach(&self, _b: &AttachBy, _c: &CancellationToken) -> Result<ComputerRef> {
            nothing()
        }
        async fn list(&self, _l: &Labels, _c: &CancellationToken) -> Result<Vec<ComputerRef>> {
            nothing()
        }
        async fn network(
            &self,
            _r: &ComputerRef,
            _p: Option<&NetworkPolicy>,
            _c: &CancellationToken,
        ) -> Result<NetworkReadBack> {
            nothing()
        }
        async fn connect(&self, _r: &ComputerRef, _c: &CancellationToken) -> Result<Connection> {
            nothing()
        }
        async fn release(
            &self,
            _r: &ComputerRef,
            _h: Release,
            _c: &CancellationToken,
        ) -> Result<()> {
            nothing()
        }
    }

    const TWO: &[(&str, Constructor)] = &[
        ("local", Constructor::of::<LocalProvider>()),
        ("echo", Constructor::of::<Echo>()),
    ];

    fn host() -> HostDefaults {
        HostDefaults {
            state_dir: Some("/tmp/cmcp-registry-test".into()),
            computerd: Some("/bin/true".into()),
            home: None,
            cwd: Some("/".into()),
            ..Default::default()
        }
    }

    fn parsed(table: &[(&'static str, Constructor)], argv: &[&str]) -> ArgMatches {
        with_flags_of(table, Command::new("t").no_binary_name(true))
            .try_get_matches_from(argv)
            .unwrap()
    }

    fn made(argv: &[&str], id: &str, tables: &str) -> Result<Box<dyn Provider>> {
        let m = parsed(TWO, argv);
        let t: Table = serde_json::from_str(tables).unwrap();
        provider_in(
            TWO,
            id,
            &Sources {
                matches: &m,
                tables: Some(&t),
            },
            &host(),
        )
    }

    #[test]
    fn an_unknown_id_is_refused_naming_the_known_ones() {
        let m = parsed(PROVIDERS, &[]);
        let sources = Sources {
            matches: &m,
            tables: None,
        };
        let e = provider_for("fly", &sources, &host()).err().unwrap();
        assert_eq!(
            e.message,
            format!(
                "no provider \"fly\"; the providers are: local, docker, browserbase, kernel, adb, phone-harness, daytona, e2b{}{}",
                if cfg!(feature = "modal") {
                    ", modal"
                } else {
                    ""
                },
                if cfg!(feature = "kubernetes") {
                    ", kubernetes"
                } else {
                    ""
                }
            )
        );
        assert_eq!(e.field.as_deref(), Some("provider"));
    }

    #[test]
    fn the_id_list_and_the_lookup_come_from_one_table() {
        let mut want = vec![
            "local",
            "docker",
            "browserbase",
            "kernel",
            "adb",
            "phone-harness",
            "daytona",
            "e2b",
        ];
        if cfg!(feature = "modal") {
            want.push("modal");
        }
        if cfg!(feature = "kubernetes") {
            want.push("kubernetes");
        }
        assert_eq!(PROVIDER_IDS.to_vec(), want);
        let m = parsed(PROVIDERS, &[]);
        let sources = Sources {
            matches: &m,
            tables: None,
        };
        for id in PROVIDER_IDS {
            let p = provider_for(id, &sources, &host()).unwrap();
            assert_eq!(p.id(), id);
        }
    }

    #[test]
    fn the_defaults_the_help_states_for_users_are_the_ones_used() {
        let help = |id: &'static str, key: &str| -> String {
            let (_, c) = PROVIDERS.iter().find(|(k, _)| *k == id).unwrap();
            let arg = c
                .args(id)
                .into_iter()
                .find(|a| a.get_id().as_str() == format!("{id}.{key}"))
                .unwrap();
            arg.get_help().unwrap().to_string()
        };
        let (u, g) = crate::docker::DEFAULT_USER;
        assert!(
            help("docker", "user").contains(&format!(
                "or {u}:{g} (a uid no host account has) for a root server"
            )),
            "{}",
            help("docker", "user")
        );
        assert!(
            help("local", "run_as").contains("[default: a uid of its own for each computer"),
            "{}",
            help("local", "run_as")
        );
    }

    #[test]
    fn every_scoped_option_is_named_by_the_rule() {
        for (id, c) in PROVIDERS.iter().chain(TWO) {
            let mut from_args: Vec<String> = Vec::new();
            for a in c.args(id) {
                let key = a
                    .get_id()
                    .as_str()
                    .strip_prefix(&format!("{id}."))
                    .unwrap_or_else(|| panic!("{id}: clap id {} is not {id}.<key>", a.get_id()))
                    .to_string();
                assert_eq!(
                    a.get_long().map(String::from),
                    Some(format!("{id}-{}", key.replace('_', "-"))),
                    "{id}.{key}'s flag"
                );
                assert_eq!(
                    a.get_env().map(|e| e.to_string_lossy().into_owned()),
                    Some(format!(
                        "COMPUTER_MCP_{}_{}",
                        id.to_uppercase().replace('-', "_"),
                        key.to_uppercase()
                    )),
                    "{id}.{key}'s variable"
                );
                assert!(a.is_global_set(), "{id}.{key} is taken after a subcommand");
                from_args.push(key);
            }
            from_args.sort();
            assert_eq!(
                from_args,
                c.keys(id),
                "{id}: every key is a flag and the reverse"
            );
        }
    }

    #[test]
    fn the_selected_providers_table_and_flags_are_layered() {
        let p = made(
            &["--echo-volume", "3"],
            "echo",
            r#"{"echo": {"volume": 9}}"#,
        )
        .unwrap();
        assert_eq!(p.id(), "echo");
        let m = parsed(TWO, &[]);
        let t: Table = serde_json::from_str(r#"{"echo": {"volume": 9}}"#).unwrap();
        let s = Sources {
            matches: &m,
            tables: Some(&t),
        };
        let own = t.get("echo").and_then(|v| v.as_object());
        let settings: EchoSettings = layer(s.matches, own, "echo.").unwrap();
        assert_eq!(settings.volume, Some(9));
        let m = parsed(TWO, &["--echo-volume", "3"]);
        let settings: EchoSettings = layer(&m, own, "echo.").unwrap();
        assert_eq!(settings.volume, Some(3));
    }

    #[test]
    fn an_unknown_key_of_a_providers_table_is_refused_naming_its_keys() {
        let e = made(&[], "local", r#"{"local": {"stat_dir": "/x"}}"#)
            .err()
            .unwrap();
        assert_eq!(
            e.message,
            "[providers.local]: unknown field `stat_dir`, expected one of `state_dir`, `computerd`, `isolation`, `run_as`"
        );
        let e = made(&[], "local", r#"{"local": 5}"#).err().unwrap();
        assert_eq!(e.message, "[providers.local] must be a table of keys");
    }

    #[test]
    fn an_option_of_a_provider_not_chosen_is_refused() {
        let e = made(&["--local-state-dir", "/s"], "echo", "{}")
            .err()
            .unwrap();
        assert_eq!(
            e.message,
            "--local-state-dir is an option of the local provider, but the provider is echo: leave it out, or choose --provider local"
        );
        let e = made(&["--echo-volume", "1"], "local", "{}").err().unwrap();
        assert_eq!(
            e.message,
            "--echo-volume is an option of the echo provider, but the provider is local: leave it out, or choose --provider echo"
        );
        let e = made(&[], "echo", r#"{"local": {"state_dir": "/s"}}"#)
            .err()
            .unwrap();
        assert_eq!(
            e.message,
            "the config file has a [providers.local] table, but the provider is echo: remove the table, or choose --provider local"
        );
        let e = made(&[], "local", r#"{"fly": {}}"#).err().unwrap();
        assert_eq!(
            e.message,
            "the config file has a [providers.fly] table, but there is no provider \"fly\"; the providers are: local, echo"
        );
    }

    #[test]
    fn an_unknown_scoped_flag_or_variable_is_named_with_the_known_ones() {
        assert_eq!(
            unknown_in(TWO, "--echo-volum").as_deref(),
            Some(
                "flag --echo-volum is not an option of the echo provider; its options are: --echo-volume"
            )
        );
        assert_eq!(
            unknown_in(TWO, "COMPUTER_MCP_LOCAL_STATEDIR").as_deref(),
            Some(
                "variable COMPUTER_MCP_LOCAL_STATEDIR is not an option of the local provider; its options are: COMPUTER_MCP_LOCAL_STATE_DIR, COMPUTER_MCP_LOCAL_COMPUTERD, COMPUTER_MCP_LOCAL_ISOLATION, COMPUTER_MCP_LOCAL_RUN_AS"
            )
        );
        assert_eq!(unknown_in(TWO, "--local-state-dir=/x"), None);
        assert_eq!(unknown_in(TWO, "COMPUTER_MCP_LOCAL_RUN_AS"), None);
        assert_eq!(unknown_in(TWO, "--lifetime"), None);
        assert_eq!(unknown_in(TWO, "COMPUTER_MCP_LIFETIME"), None);
    }
}
