//! An async client of the adb server's socket protocol (the host side of
//! Android's adb, on a port the caller names), for driving phones without
//! a spawned `adb` per request and without an endpoint or a secret in any
//! program's argv.
//!
//! - [`Adb`]: the server; host services (`host:version`, `host:devices-l`,
//!   `host:connect`, `host:disconnect`, `host:kill`), one connection each.
//! - [`Device`]: one device by its transport id: `shell:`, `shell,v2,raw:`
//!   ([`ShellOutput`] with the exit status), `exec:`, `sync:` push and pull,
//!   its features, or any service's raw stream ([`Device::open`]).
//! - [`DeviceInfo`], [`DeviceState`]: host:devices-l, parsed.
//! - [`ensure_server`]: start a server when none answers, from an
//!   environment with every `ADB_*`, `ANDROID_ADB_*` and `ANDROID_SERIAL`
//!   dropped.
//! - [`AdbError`]: what failed, in words with no endpoint or secret.
//! - [`limits`]: every bound and default, by name.

mod device;
mod devices;
mod error;
mod host;
pub mod limits;
mod server;
mod shell_v2;
mod sync;
mod wire;

pub use device::Device;
pub use devices::{DeviceInfo, DeviceState, parse_devices};
pub use error::{AdbError, Result};
pub use host::{Adb, Connected};
pub use server::{Server, adb_env, ensure_server, keeps_var};
pub use shell_v2::ShellOutput;
