//! The `adb` provider: a phone you already have (a USB device, an
//! emulator, a device at host:port) as a computer of kind phone. No daemon
//! runs on it: the phone client answers the protocol in this process over
//! the adb server's socket (see computer-phone), and nothing is spawned but
//! the adb server itself, when none answers on the port.
//!
//! A computer is a hold on one phone: two computers never hold the same
//! phone, and a second ask hears which computer holds it. Release lets the
//! phone go as it was, but for the apps its sessions launched, which are
//! terminated. The holds live in this server's memory.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use computer_adb::{Adb, DeviceInfo, DeviceState};
use computer_phone::adb::AdbShell;
use computer_phone::client::{Launched, PhoneClient, end_launched};
use computer_phone::install::Folder;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::android::{self, adb_error, client_over, start_adb};
use crate::provider::{Configure, Connection, Preflight, Provider};
use crate::settings::HostDefaults;
use crate::types::{
    AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, ErrorCode, Labels, LifetimeMode,
    NetworkPolicy, NetworkReadBack, ProviderError, Release, Result,
};
use crate::vendor::{Secret, now_rfc3339, plus_secs};

/// adb's own server port, used when none is named.
pub const DEFAULT_PORT: u16 = 5037;
/// A hold lasts at most this long unless released (a phone does not end
/// itself: the janitor lets it go).
pub const MAX_LIFETIME_MS: u64 = 24 * 3600 * 1000;

/// What a user sets of the adb provider: flags `--adb-<key>`, variables
/// `COMPUTER_MCP_ADB_<KEY>`, keys of `[providers.adb]`.
#[derive(Clone, Debug, Default, clap::Args, Serialize, Deserialize)]
#[command(next_help_heading = "The adb provider (--provider adb, --kind phone)")]
#[serde(deny_unknown_fields)]
pub struct AdbSettings {
    /// The phone, by its serial as `adb devices` lists it; without it, the
    /// only phone attached.
    #[arg(
        id = "adb.serial",
        long = "adb-serial",
        value_name = "SERIAL",
        env = "COMPUTER_MCP_ADB_SERIAL"
    )]
    pub serial: Option<String>,
    /// A phone to reach over TCP (HOST:PORT), given to the adb server over
    /// its socket, never on a command line (a secret: never printed).
    #[arg(
        id = "adb.connect",
        long = "adb-connect",
        value_name = "HOST:PORT",
        env = "COMPUTER_MCP_ADB_CONNECT",
        hide_env_values = true
    )]
    pub connect: Option<Secret>,
    /// The adb server's port on 127.0.0.1. [default: 5037]
    #[arg(
        id = "adb.port",
        long = "adb-port",
        value_name = "PORT",
        env = "COMPUTER_MCP_ADB_PORT"
    )]
    pub port: Option<u16>,
    /// The adb program that starts a server when none answers on the port.
    /// [default: adb on PATH]
    #[arg(
        id = "adb.program",
        long = "adb-program",
        value_name = "PATH",
        env = "COMPUTER_MCP_ADB_PROGRAM"
    )]
    pub program: Option<PathBuf>,
}

/// A hold on one phone.
#[derive(Clone)]
struct Held {
    serial: String,
    /// When the janitor lets it go, in ms since the epoch.
    deadline_ms: i64,
    computer: ComputerRef,
    launched: Launched,
    /// The host folders shared with it, where apps.install finds APKs.
    folders: Vec<Folder>,
}

/// The adb provider.
pub struct AdbProvider {
    adb: Adb,
    program: PathBuf,
    serial: Option<String>,
    connect: Option<Secret>,
    /// The server's state directory, never shared.
    state_dir: Option<PathBuf>,
    held: Mutex<BTreeMap<String, Held>>,
}

/// A computer's id for a phone: a digest of its serial, which may be an
/// endpoint and is never shown whole.
fn id_of(serial: &str) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(serial.as_bytes());
    let hex: String = d[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("adb-{hex}")
}

/// How a phone is named to a person: its model, else its product.
fn named(d: &DeviceInfo) -> String {
    d.model
        .clone()
        .or_else(|| d.product.clone())
        .unwrap_or_else(|| "a phone".into())
}

fn host_port(endpoint: &str) -> Result<(String, u16)> {
    endpoint
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h.trim_matches(['[', ']']).to_string(), p.parse().ok()?)))
        .filter(|(h, _)| !h.is_empty())
        .ok_or_else(|| ProviderError::invalid("adb.connect", "--adb-connect is HOST:PORT"))
}

impl AdbProvider {
    fn holds(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The adb server, started when none answers.
    async fn server(&self) -> Result<()> {
        start_adb(&self.program, self.adb.port()).await
    }

    /// The phones attached and ready, after connecting the configured
    /// endpoint.
    async fn phones(&self) -> Result<Vec<DeviceInfo>> {
        self.server().await?;
        self.attached().await
    }

    /// [`Self::phones`] of a server that already runs: none is started
    /// (where none answers, this is its error).
    async fn attached(&self) -> Result<Vec<DeviceInfo>> {
        if let Some(e) = &self.connect {
            let (host, port) = host_port(e.expose())?;
            self.adb.connect(&host, port).await.map_err(adb_error)?;
        }
        let mut all = self.adb.devices().await.map_err(adb_error)?;
        all.retain(|d| d.state == DeviceState::Device && d.transport_id.is_some());
        Ok(all)
    }

    /// The phone this provider is to use: the configured serial (or
    /// endpoint), else the only one attached.
    async fn pick(&self) -> Result<DeviceInfo> {
        let phones = self.phones().await?;
        let wanted = self
            .serial
            .clone()
            .or_else(|| self.connect.as_ref().map(|c| c.expose().to_string()));
        if let Some(w) = wanted {
            return phones.into_iter().find(|d| d.serial == w).ok_or_else(|| {
                ProviderError::not_found(
                    "the phone named by --adb-serial or --adb-connect is not attached as a device (adb devices lists it as another state, or not at all)",
                )
            });
        }
        match phones.len() {
            0 => Err(ProviderError::not_found(format!(
                "no phone is attached to the adb server on port {}: plug one in (with USB debugging on), start an emulator, or give --adb-connect HOST:PORT",
                self.adb.port()
            ))),
            1 => Ok(phones.into_iter().next().unwrap_or_else(|| unreachable!())),
            n => Err(ProviderError::invalid(
                "adb.serial",
                format!(
                    "{n} phones are attached ({}); name one with --adb-serial",
                    phones
                        .iter()
                        .map(|d| d.serial.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }

    fn held_of(&self, id: &str) -> Result<Held> {
        self.holds().get(id).cloned().ok_or_else(|| {
            ProviderError::not_found(format!(
                "this server holds no phone {id} (holds end with the server or at release)"
            ))
        })
    }

    /// The attached phone a hold names, by its transport id now, among
    /// `phones`.
    fn device_of(&self, held: &Held, phones: &[DeviceInfo]) -> Result<computer_adb::Device> {
        let d = phones
            .iter()
            .find(|d| d.serial == held.serial)
            .and_then(|d| d.transport_id)
            .ok_or_else(|| {
                ProviderError::gone(format!(
                    "the phone of {} is no longer attached to the adb server",
                    held.computer.id
                ))
            })?;
        Ok(self.adb.device(d))
    }
}

impl AdbProvider {
    /// The spec checked, and its shares as the phone's files.
    fn checked(&self, spec: &ComputerSpec) -> Result<Vec<Folder>> {
        if spec.image.is_some() {
            return Err(ProviderError::invalid(
                "image",
                "a phone over adb is the phone attached; leave image out",
            ));
        }
        android::check_phone(
            spec,
            &self.capabilities(),
            "a phone over adb",
            self.state_dir.as_deref(),
        )
    }

    /// A client of the phone a hold names.
    async fn client_of(&self, id: &str, cancel: &CancellationToken) -> Result<PhoneClient> {
        let held = self.held_of(id)?;
        let device = self.device_of(&held, &self.phones().await?)?;
        client_over(device, &held.launched, id, cancel)
            .await
            .map(|c| c.with_folders(held.folders.clone()))
    }
}

/// A phone's network as this provider reads it: its own, open.
const NETWORK: &str = "the phone's own network (Wi-Fi or mobile data), not read back";
/// Why another network policy is refused.
const KEEPS: &str = "a phone over adb keeps its own network";

impl Configure for AdbProvider {
    type Settings = AdbSettings;

    fn configure(s: AdbSettings, host: &HostDefaults) -> Result<Self> {
        if let Some(c) = &s.connect {
            host_port(c.expose())?;
        }
        Ok(AdbProvider {
            adb: Adb::new(s.port.unwrap_or(DEFAULT_PORT)),
            program: s.program.unwrap_or_else(|| PathBuf::from("adb")),
            serial: s.serial,
            connect: s.connect,
            state_dir: host.state_dir.clone(),
            held: Mutex::new(BTreeMap::new()),
        })
    }
}

#[async_trait::async_trait]
impl Provider for AdbProvider {
    fn id(&self) -> &'static str {
        "adb"
    }

    fn capabilities(&self) -> Capabilities {
        android::capabilities(
            LifetimeMode::Janitor,
            MAX_LIFETIME_MS,
            "none: the phone is yours, as it is; a computer is a hold on it, and release terminates the apps its sessions launched",
        )
    }

    fn check(&self, spec: &ComputerSpec) -> Result<()> {
        self.checked(spec).map(|_| ())
    }

    async fn create(&self, spec: &ComputerSpec, cancel: &CancellationToken) -> Result<Created> {
        let folders = self.checked(spec)?;
        let phone = self.pick().await?;
        let id = id_of(&phone.serial);
        let created_at = now_rfc3339();
        let computer = ComputerRef {
            provider: "adb".into(),
            id: id.clone(),
            labels: spec.labels.clone(),
            deadline: plus_secs(&created_at, spec.lifetime_ms / 1000),
            created_at,
            running: true,
            paused: false,
            home: None,
            user: None,
            sizes: None,
            image: None,
            network: None,
        };
        {
            let mut holds = self.holds();
            if let Some(h) = holds.get(&id) {
                let by = h
                    .computer
                    .labels
                    .get(crate::types::label::NAME)
                    .or_else(|| h.computer.labels.get(crate::types::label::HANDLE))
                    .cloned()
                    .unwrap_or_else(|| h.computer.id.clone());
                return Err(ProviderError::new(
                    ErrorCode::Limit,
                    format!(
                        "the phone {} ({}) is held by the computer {by}; release it first, or attach another phone and name it with --adb-serial",
                        named(&phone),
                        h.computer.id
                    ),
                ));
            }
            holds.insert(
                id.clone(),
                Held {
                    serial: phone.serial.clone(),
                    deadline_ms: computerd::now_ms()
                        .saturating_add(i64::try_from(spec.lifetime_ms).unwrap_or(i64::MAX)),
                    computer: computer.clone(),
                    launched: Launched::default(),
                    folders: folders.clone(),
                },
            );
        }
        tracing::info!(computer = %id, "holding a phone over adb");
        // What the phone is, for computer_info: read now, so a phone that
        // does not answer is known before a tool needs it.
        let about = match self.client_of(&id, cancel).await {
            Ok(c) => {
                let a = c.about();
                format!(
                    "{}, Android {} (SDK {}), screen {}x{} at density {}",
                    named(&phone),
                    a.android,
                    a.sdk,
                    a.width,
                    a.height,
                    a.density
                )
            }
            Err(e) => {
                self.holds().remove(&id);
                return Err(e);
            }
        };
        let mut notes = vec![format!(
            "{about}, over adb: nothing is installed on it, and release terminates only the apps this computer launched"
        )];
        notes.extend(android::files_note(&folders));
        Ok(Created {
            computer,
            network: Some(android::open_network(NETWORK)),
            notes,
        })
    }

    async fn attach(&self, by: &AttachBy, _cancel: &CancellationToken) -> Result<ComputerRef> {
        match by {
            AttachBy::Id(id) => Ok(self.held_of(id)?.computer),
            AttachBy::Labels(labels) => android::only_one(
                self.list(labels, _cancel).await?,
                "no phone held here carries those labels",
            ),
        }
    }

    async fn list(&self, labels: &Labels, _cancel: &CancellationToken) -> Result<Vec<ComputerRef>> {
        Ok(self
            .holds()
            .values()
            .filter(|h| {
                labels
                    .iter()
                    .all(|(k, v)| h.computer.labels.get(k) == Some(v))
            })
            .map(|h| h.computer.clone())
            .collect())
    }

    async fn network(
        &self,
        computer: &ComputerRef,
        policy: Option<&NetworkPolicy>,
        _cancel: &CancellationToken,
    ) -> Result<NetworkReadBack> {
        android::network(computer, policy, KEEPS, NETWORK)
    }

    async fn connect(
        &self,
        computer: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<Connection> {
        Ok(android::connection(
            self.client_of(&computer.id, cancel).await?,
        ))
    }

    async fn release(
        &self,
        computer: &ComputerRef,
        how: Release,
        _cancel: &CancellationToken,
    ) -> Result<()> {
        android::delete_only(
            how,
            "a phone cannot be stopped and kept; release it with delete (the phone stays as it is)",
        )?;
        let Some(held) = self.holds().remove(&computer.id) else {
            return Ok(());
        };
        // The phone may have gone; the hold ends either way. Release asks
        // only a server that runs: where none does (ended, or never
        // started by this server), it starts none, and the phone's link
        // went with the server.
        let device = match self.attached().await {
            Ok(phones) => self.device_of(&held, &phones),
            Err(e) => Err(e),
        };
        if let Err(e) = &device {
            tracing::info!(computer = %computer.id, "the phone's apps were left as they are: {}", e.message);
        }
        if let Ok(device) = device {
            let ended = match AdbShell::new(device).await {
                Ok(shell) => end_launched(&shell, &held.launched).await,
                Err(e) => Err(e),
            };
            if let Err(e) = ended {
                tracing::warn!(computer = %computer.id, "the apps its sessions launched were not all terminated: {e}");
            }
        }
        tracing::info!(computer = %computer.id, "let the phone go");
        Ok(())
    }

    async fn sweep(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        let now = computerd::now_ms();
        let due: Vec<ComputerRef> = self
            .holds()
            .values()
            .filter(|h| h.deadline_ms <= now)
            .map(|h| h.computer.clone())
            .collect();
        let mut out = Vec::new();
        for c in due {
            self.release(&c, Release::Delete, cancel).await?;
            out.push(c.id);
        }
        Ok(out)
    }

    fn preflight(&self) -> Vec<Preflight> {
        vec![android::adb_preflight(
            &self.program,
            self.adb.port(),
            "--adb-program",
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_hide_the_serial_and_endpoints_read_as_host_and_port() {
        let id = id_of("10.0.0.7:5555");
        assert!(id.starts_with("adb-") && id.len() == 16, "{id}");
        assert!(!id.contains("10.0.0.7"));
        assert_eq!(id, id_of("10.0.0.7:5555"));
        assert_eq!(
            host_port("10.0.0.7:5555").unwrap(),
            ("10.0.0.7".into(), 5555)
        );
        assert_eq!(host_port("[::1]:5555").unwrap(), ("::1".into(), 5555));
        let e = host_port("nowhere").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("adb.connect"));
        assert!(!e.message.contains("nowhere"));
    }

    #[test]
    fn a_shared_folder_is_the_phones_files_and_other_host_parts_are_refused() {
        let p = AdbProvider::configure(AdbSettings::default(), &HostDefaults::default()).unwrap();
        assert!(
            p.capabilities()
                .groups
                .contains(&computerd::protocol::Group::AppsInstall)
        );
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let mut spec = ComputerSpec::sandbox(60_000);
        spec.kind = computerd::protocol::SettingKind::Phone;
        spec.network = NetworkPolicy::Open;
        spec.shares = vec![crate::share::ShareArg {
            source: real.clone(),
            read_only: false,
        }];
        p.check(&spec).unwrap();
        assert_eq!(
            p.checked(&spec).unwrap(),
            vec![Folder {
                inside: "/workspace".into(),
                host: real
            }]
        );
        spec.shares[0].source = dir.path().join("missing");
        assert_eq!(p.check(&spec).unwrap_err().field.as_deref(), Some("share"));
        spec.shares.clear();
        spec.user = Some("0:0".into());
        assert_eq!(p.check(&spec).unwrap_err().field.as_deref(), Some("user"));
    }
}
