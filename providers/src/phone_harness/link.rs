//! A ready phone's adb link made a device: the endpoint handed to the
//! local adb server over its socket (`host:connect`), the device found by
//! the server's transport id, and the unlock sent as the shell service's
//! own string (`shell:unlock <code>`) on that transport. Neither the
//! endpoint nor the code is ever in a program's argv, an error or a log.

use std::time::Duration;

use computer_adb::{Adb, Device, DeviceState};

use super::api::AdbLink;
use crate::android::adb_error;
use crate::types::{ErrorCode, ProviderError, Result};

/// How long a connected phone may take to be listed as a device.
pub const LISTED_WAIT: Duration = Duration::from_secs(20);

/// The serial the adb server gives a TCP device: `host:port`.
pub fn serial_of(link: &AdbLink) -> String {
    let host = link.host.expose();
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{}", link.port)
    } else {
        format!("{host}:{}", link.port)
    }
}

/// `e`'s words with `secret` taken out, whatever put it there.
fn scrubbed(mut e: ProviderError, secret: &str) -> ProviderError {
    if !secret.is_empty() {
        e.message = e.message.replace(secret, "<redacted>");
    }
    e
}

/// Whether an unlock code can go in a shell service's string as one word.
fn code_ok(code: &str) -> bool {
    !code.is_empty()
        && code.len() <= 128
        && code
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// Connect the phone `id`'s link to the adb server and unlock it: its
/// device, by transport id.
pub async fn open(adb: &Adb, id: &str, link: &AdbLink) -> Result<Device> {
    let host = link.host.expose();
    adb.connect(host, link.port)
        .await
        .map_err(|e| scrubbed(adb_error(e), host))?;
    let serial = serial_of(link);
    let until = tokio::time::Instant::now() + LISTED_WAIT;
    let transport = loop {
        let found = adb
            .devices()
            .await
            .map_err(|e| scrubbed(adb_error(e), host))?
            .into_iter()
            .find(|d| d.serial == serial && d.state == DeviceState::Device)
            .and_then(|d| d.transport_id);
        if let Some(t) = found {
            break t;
        }
        if tokio::time::Instant::now() >= until {
            return Err(ProviderError::new(
                ErrorCode::Unreachable,
                format!(
                    "the adb server connected to the phone harness phone {id} but did not list it as a device within {} s; release it and make a new one",
                    LISTED_WAIT.as_secs()
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let device = adb.device(transport);
    unlock(&device, id, link).await?;
    Ok(device)
}

/// `shell:unlock <code>`, once per connection: every shell answers
/// locked before it.
async fn unlock(device: &Device, id: &str, link: &AdbLink) -> Result<()> {
    let code = link.code.expose();
    if !code_ok(code) {
        return Err(ProviderError::failed(format!(
            "the phone harness gave the phone {id} an unlock code that is not one word of letters, digits, '-', '_' and '.'; release it and make a new one"
        )));
    }
    let out = device
        .shell(&format!("unlock {code}"))
        .await
        .map_err(|e| scrubbed(scrubbed(adb_error(e), code), link.host.expose()))?;
    let said = String::from_utf8_lossy(&out).to_lowercase();
    let refused = !said.contains("unlocked")
        && (said.contains("wrong") || said.contains("error") || said.contains("locked"));
    if refused {
        return Err(ProviderError::refused(format!(
            "the phone harness phone {id} refused its unlock code; release it and make a new one"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vendor::Secret;

    #[test]
    fn a_links_serial_is_the_servers_and_codes_are_one_word() {
        let link = |h: &str| AdbLink {
            host: Secret::new(h),
            port: 5555,
            code: Secret::new("1234"),
        };
        assert_eq!(serial_of(&link("10.0.0.1")), "10.0.0.1:5555");
        assert_eq!(serial_of(&link("::1")), "[::1]:5555");
        assert!(code_ok("a1-b_2.c"));
        for bad in ["", "1 2", "1;reboot", "x\n"] {
            assert!(!code_ok(bad), "{bad:?}");
        }
        let e = scrubbed(ProviderError::failed("no 10.0.0.1 here"), "10.0.0.1");
        assert_eq!(e.message, "no <redacted> here");
    }
}
