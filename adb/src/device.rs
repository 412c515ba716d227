//! A device's services: a connection to the server is bound to the device
//! by its transport id (host:transport-id:<id>, never a serial, which may
//! be a vendor's secret endpoint), then asks for one service on it.

use std::time::Duration;

use tokio::net::TcpStream;

use crate::error::{AdbError, Result};
use crate::host::Adb;
use crate::limits;
use crate::wire;

/// One device of a server, named by its transport id. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Device {
    adb: Adb,
    transport_id: u64,
    max_output: u64,
}

impl Adb {
    /// The device the server knows by `transport_id` (host:devices-l's
    /// `transport_id`). Nothing is sent until a service is asked for.
    pub fn device(&self, transport_id: u64) -> Device {
        Device {
            adb: self.clone(),
            transport_id,
            max_output: limits::DEFAULT_MAX_OUTPUT_BYTES,
        }
    }
}

impl Device {
    pub fn transport_id(&self) -> u64 {
        self.transport_id
    }

    /// The same device, each request bounded by `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Device {
        self.adb = self.adb.with_timeout(timeout);
        self
    }

    /// The same device, an output (of a shell, an exec or a pull) bounded
    /// by `bytes` ([`limits::DEFAULT_MAX_OUTPUT_BYTES`] by default).
    pub fn with_max_output(mut self, bytes: u64) -> Device {
        self.max_output = bytes;
        self
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.adb.timeout()
    }

    pub(crate) fn max_output(&self) -> u64 {
        self.max_output
    }

    pub(crate) fn gone(&self, message: impl Into<String>) -> AdbError {
        AdbError::DeviceGone {
            transport_id: self.transport_id,
            message: message.into(),
        }
    }

    /// A connection bound to this device and to `service` (the server
    /// answered OKAY to both): the service's own stream from here on.
    /// `request` names it in errors (the service string may hold a
    /// secret). Not bounded in time: the caller bounds what it does.
    pub async fn open(&self, request: &'static str, service: &str) -> Result<TcpStream> {
        let mut s = self.adb.dial().await?;
        let transport = format!("host:transport-id:{}", self.transport_id);
        wire::send(&mut s, request, &transport).await?;
        match wire::read_status(&mut s, request).await {
            Ok(()) => {}
            Err(AdbError::Refused { message, .. }) => return Err(self.gone(message)),
            Err(e) => return Err(e),
        }
        wire::send(&mut s, request, service).await?;
        wire::read_status(&mut s, request).await?;
        Ok(s)
    }

    /// What the device's adbd supports (`shell_v2`, `cmd`, `stat_v2`...),
    /// from host-transport-id:<id>:features.
    pub async fn features(&self) -> Result<Vec<String>> {
        let request = "features";
        wire::bounded(request, self.timeout(), async {
            let mut s = self.adb.dial().await?;
            let service = format!("host-transport-id:{}:features", self.transport_id);
            wire::send(&mut s, request, &service).await?;
            match wire::read_status(&mut s, request).await {
                Ok(()) => {}
                Err(AdbError::Refused { message, .. }) => return Err(self.gone(message)),
                Err(e) => return Err(e),
            }
            let text = wire::read_message(&mut s, request).await?;
            Ok(text
                .split(',')
                .map(str::trim)
                .filter(|f| !f.is_empty())
                .map(String::from)
                .collect())
        })
        .await
    }

    /// `shell:<command>`: the command's output, stdout and stderr mixed as
    /// the device's shell writes them, to the end (no exit status: see
    /// [`Device::shell_v2`]).
    pub async fn shell(&self, command: &str) -> Result<Vec<u8>> {
        self.read_all("shell", &format!("shell:{command}")).await
    }

    /// `exec:<command>`: the command's stdout, byte for byte (no terminal,
    /// no line-ending rewrite): for binary output such as a screencap.
    pub async fn exec(&self, command: &str) -> Result<Vec<u8>> {
        self.read_all("exec", &format!("exec:{command}")).await
    }

    async fn read_all(&self, request: &'static str, service: &str) -> Result<Vec<u8>> {
        wire::bounded(request, self.timeout(), async {
            let mut s = self.open(request, service).await?;
            wire::read_to_end_bounded(&mut s, request, self.max_output).await
        })
        .await
    }
}
