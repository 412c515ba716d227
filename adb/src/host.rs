//! The host services: a request answered by the adb server itself, on a
//! connection of its own.

use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::devices::{DeviceInfo, parse_devices};
use crate::error::{AdbError, Result};
use crate::limits;
use crate::wire;

/// The adb server on 127.0.0.1 at a port the caller names. Cheap to clone;
/// every request opens a connection of its own.
#[derive(Clone, Debug)]
pub struct Adb {
    port: u16,
    timeout: Duration,
}

/// What host:connect did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Connected {
    /// The server made a new transport to the endpoint.
    New,
    /// The server already had one.
    Already,
}

impl Adb {
    /// The server at 127.0.0.1:`port`, each request bounded by
    /// [`limits::DEFAULT_TIMEOUT`].
    pub fn new(port: u16) -> Adb {
        Adb {
            port,
            timeout: limits::DEFAULT_TIMEOUT,
        }
    }

    /// The same server, each request bounded by `timeout` (a request's
    /// connection is closed when it runs out).
    pub fn with_timeout(mut self, timeout: Duration) -> Adb {
        self.timeout = timeout;
        self
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// A connection to the server, or [`AdbError::Unreachable`].
    pub(crate) async fn dial(&self) -> Result<TcpStream> {
        let s = TcpStream::connect(("127.0.0.1", self.port))
            .await
            .map_err(|e| AdbError::Unreachable {
                port: self.port,
                reason: e.to_string(),
            })?;
        // Requests are small and answered at once: no batching delay.
        let _ = s.set_nodelay(true);
        Ok(s)
    }

    /// A host service whose OKAY carries a message: the message.
    async fn host_text(&self, request: &'static str, service: &str) -> Result<String> {
        wire::bounded(request, self.timeout, async {
            let mut s = self.dial().await?;
            wire::send(&mut s, request, service).await?;
            wire::read_status(&mut s, request).await?;
            wire::read_message(&mut s, request).await
        })
        .await
    }

    /// host:version: the server's protocol version (41 for adb 1.0.41).
    pub async fn version(&self) -> Result<u32> {
        let text = self.host_text("host:version", "host:version").await?;
        u32::from_str_radix(text.trim(), 16).map_err(|_| AdbError::Protocol {
            request: "host:version",
            detail: format!("{text:?} is not a version in hex"),
        })
    }

    /// host:devices-l: every device the server knows, in any state.
    pub async fn devices(&self) -> Result<Vec<DeviceInfo>> {
        let text = self.host_text("host:devices-l", "host:devices-l").await?;
        Ok(parse_devices(&text))
    }

    /// host:connect: have the server reach an adbd over TCP at
    /// `host`:`port`. The endpoint goes to the server over its socket,
    /// never in a program's argv, and never into an error.
    pub async fn connect(&self, host: &str, port: u16) -> Result<Connected> {
        let endpoint = endpoint(host, port)?;
        let text = self
            .host_text("host:connect", &format!("host:connect:{endpoint}"))
            .await
            .map_err(|e| hide(e, host, &endpoint))?;
        if text.starts_with("already connected to ") {
            Ok(Connected::Already)
        } else if text.starts_with("connected to ") {
            Ok(Connected::New)
        } else {
            Err(AdbError::ConnectFailed {
                cause: cause_of(&text, host, &endpoint),
            })
        }
    }

    /// host:disconnect: drop the server's transport to `host`:`port`.
    /// True when there was one; false when the server had none (the end
    /// wanted either way).
    pub async fn disconnect(&self, host: &str, port: u16) -> Result<bool> {
        let endpoint = endpoint(host, port)?;
        match self
            .host_text("host:disconnect", &format!("host:disconnect:{endpoint}"))
            .await
        {
            Ok(_) => Ok(true),
            Err(AdbError::Refused { message, .. }) if message.starts_with("no such device") => {
                Ok(false)
            }
            Err(e) => Err(hide(e, host, &endpoint)),
        }
    }

    /// host:kill: end the server. Its connection closes once it is gone.
    pub async fn kill_server(&self) -> Result<()> {
        let request = "host:kill";
        wire::bounded(request, self.timeout, async {
            let mut s = self.dial().await?;
            wire::send(&mut s, request, "host:kill").await?;
            wire::read_status(&mut s, request).await?;
            // Wait for the close, so the port is free when this returns.
            let _ = wire::read_to_end_bounded(&mut s, request, 4096).await;
            let _ = s.shutdown().await;
            // The server closes our connection before its listener: until
            // the port refuses (at most 2 s; another server may have taken
            // it by then), a connection there is one the dying server resets.
            for _ in 0..100 {
                if self.dial().await.is_err() {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Ok(())
        })
        .await
    }
}

/// `host:port`, an IPv6 host in brackets; a host that could not be one
/// (empty, spaces, control characters) is refused without its words.
fn endpoint(host: &str, port: u16) -> Result<String> {
    let ok = !host.is_empty()
        && host.len() <= 253
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']'));
    if !ok {
        return Err(AdbError::Invalid {
            field: "host",
            message: "the phone's adb endpoint is not a host name or address (1 to 253 letters, digits, '.', '-', '_', or an IP address)".into(),
        });
    }
    if host.contains(':') && !host.starts_with('[') {
        Ok(format!("[{host}]:{port}"))
    } else {
        Ok(format!("{host}:{port}"))
    }
}

/// An error of a request that named an endpoint, with the endpoint gone
/// from any words the server put in it.
fn hide(e: AdbError, host: &str, endpoint: &str) -> AdbError {
    match e {
        AdbError::Refused { request, message } => AdbError::Refused {
            request,
            message: message
                .replace(endpoint, "the phone's adb endpoint")
                .replace(host, "the phone's adb endpoint"),
        },
        other => other,
    }
}

/// The system's words at the end of a failed connect's answer ("failed to
/// connect to 'h:p': Connection refused"), when they name no part of the
/// endpoint; else none.
fn cause_of(text: &str, host: &str, endpoint: &str) -> Option<String> {
    let (_, tail) = text.rsplit_once(": ")?;
    let tail = tail.trim();
    let clean = !tail.is_empty()
        && !tail.contains(host)
        && !tail.contains(endpoint)
        && !tail.contains('\'')
        && tail.len() <= 200;
    clean.then(|| tail.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_host_and_port_and_never_shell_words() {
        assert_eq!(endpoint("10.0.0.5", 5555).unwrap(), "10.0.0.5:5555");
        assert_eq!(endpoint("::1", 5555).unwrap(), "[::1]:5555");
        assert_eq!(
            endpoint("phone-7.example.net", 1).unwrap(),
            "phone-7.example.net:1"
        );
        for bad in ["", "a b", "h;reboot", "x\n", "h/0"] {
            let e = endpoint(bad, 1).unwrap_err();
            assert!(
                matches!(e, AdbError::Invalid { field: "host", .. }),
                "{bad:?}"
            );
            if !bad.is_empty() {
                assert!(!e.to_string().contains(bad), "{e}");
            }
        }
    }

    #[test]
    fn a_failed_connect_keeps_the_systems_words_and_not_the_endpoint() {
        let host = "s3cr3t.phones.example";
        let ep = "s3cr3t.phones.example:40111";
        assert_eq!(
            cause_of(
                &format!("failed to connect to '{ep}': Connection refused"),
                host,
                ep
            ),
            Some("Connection refused".into())
        );
        assert_eq!(
            cause_of(&format!("failed to authenticate to {ep}"), host, ep),
            None
        );
        assert_eq!(
            cause_of(
                &format!("failed to resolve host: '{host}': Name or service not known"),
                host,
                ep
            ),
            Some("Name or service not known".into())
        );
        assert_eq!(cause_of(&format!("x: {host}"), host, ep), None);
        let e = AdbError::ConnectFailed {
            cause: Some("Connection refused".into()),
        };
        assert_eq!(
            e.to_string(),
            "adb could not connect to the phone's adb endpoint: Connection refused"
        );
        let e = hide(
            AdbError::Refused {
                request: "host:disconnect",
                message: format!("no such device '{ep}'"),
            },
            host,
            ep,
        );
        assert!(!e.to_string().contains("s3cr3t"), "{e}");
    }
}
