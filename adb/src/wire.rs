//! The smart socket's framing: a request is its length in four hex digits
//! and the service; an answer is `OKAY` or `FAIL`, a FAIL and most host
//! answers carrying a message the same way. Every read is bounded before
//! anything is allocated for it.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::{AdbError, Result};
use crate::limits;

/// A request's frame: four hex digits of length, then the service.
pub(crate) fn frame(service: &str) -> Result<Vec<u8>> {
    if service.is_empty() || service.len() > limits::MAX_SERVICE_BYTES {
        return Err(AdbError::Invalid {
            field: "service",
            message: format!(
                "a service string is 1 to {} bytes, and this one is {}",
                limits::MAX_SERVICE_BYTES,
                service.len()
            ),
        });
    }
    if service.contains('\0') {
        return Err(AdbError::Invalid {
            field: "service",
            message: "a service string holds no NUL byte".into(),
        });
    }
    let mut out = format!("{:04x}", service.len()).into_bytes();
    out.extend_from_slice(service.as_bytes());
    Ok(out)
}

/// Four hex digits as a length.
pub(crate) fn parse_hex4(request: &'static str, b: [u8; 4]) -> Result<usize> {
    std::str::from_utf8(&b)
        .ok()
        .and_then(|s| usize::from_str_radix(s, 16).ok())
        .ok_or_else(|| AdbError::Protocol {
            request,
            detail: format!(
                "{:?} is not a length in four hex digits",
                String::from_utf8_lossy(&b)
            ),
        })
}

/// What an io error during `request` means: the server closed the stream
/// (a protocol failure, the answer being cut) or the connection broke.
pub(crate) fn io(request: &'static str) -> impl FnOnce(std::io::Error) -> AdbError {
    move |source| {
        if source.kind() == std::io::ErrorKind::UnexpectedEof {
            AdbError::Protocol {
                request,
                detail: "the server closed the connection before its answer was whole".into(),
            }
        } else {
            AdbError::Io { request, source }
        }
    }
}

pub(crate) async fn send<W: AsyncWrite + Unpin>(
    w: &mut W,
    request: &'static str,
    service: &str,
) -> Result<()> {
    let f = frame(service)?;
    w.write_all(&f).await.map_err(io(request))
}

/// A length-prefixed message (four hex digits, then the bytes) as text.
pub(crate) async fn read_message<R: AsyncRead + Unpin>(
    r: &mut R,
    request: &'static str,
) -> Result<String> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).await.map_err(io(request))?;
    // Four hex digits bound the length at 65,535 bytes by themselves.
    let n = parse_hex4(request, len)?;
    let mut buf = vec![0u8; n];
    r.read_exact(&mut buf).await.map_err(io(request))?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The answer's status: Ok on OKAY, [`AdbError::Refused`] with the
/// server's words on FAIL.
pub(crate) async fn read_status<R: AsyncRead + Unpin>(
    r: &mut R,
    request: &'static str,
) -> Result<()> {
    let mut st = [0u8; 4];
    r.read_exact(&mut st).await.map_err(io(request))?;
    match &st {
        b"OKAY" => Ok(()),
        b"FAIL" => Err(AdbError::Refused {
            request,
            message: read_message(r, request).await?,
        }),
        other => Err(AdbError::Protocol {
            request,
            detail: format!(
                "the status is {:?}, not OKAY or FAIL",
                String::from_utf8_lossy(other)
            ),
        }),
    }
}

/// Read to the end, failing past `limit` bytes (never holding more than
/// `limit` and one read's buffer).
pub(crate) async fn read_to_end_bounded<R: AsyncRead + Unpin>(
    r: &mut R,
    request: &'static str,
    limit: u64,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut taken = r.take(limit.saturating_add(1));
    taken.read_to_end(&mut out).await.map_err(io(request))?;
    if out.len() as u64 > limit {
        return Err(AdbError::TooLarge { request, limit });
    }
    Ok(out)
}

/// `fut`, cut off after `after` as [`AdbError::Timeout`].
pub(crate) async fn bounded<T>(
    request: &'static str,
    after: Duration,
    fut: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match tokio::time::timeout(after, fut).await {
        Ok(r) => r,
        Err(_) => Err(AdbError::Timeout { request, after }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_its_hex_length_and_the_service() {
        assert_eq!(frame("host:version").unwrap(), b"000chost:version");
        assert!(matches!(
            frame(""),
            Err(AdbError::Invalid {
                field: "service",
                ..
            })
        ));
        let long = "x".repeat(limits::MAX_SERVICE_BYTES + 1);
        let e = frame(&long).unwrap_err();
        assert!(e.to_string().contains("1 to 65535 bytes"), "{e}");
        assert!(frame("shell:a\0b").is_err());
    }

    #[tokio::test]
    async fn statuses_and_messages_are_read_as_adb_writes_them() {
        let mut okay: &[u8] = b"OKAY";
        read_status(&mut okay, "host:version").await.unwrap();
        let mut fail: &[u8] = b"FAIL0014unknown host service";
        let e = read_status(&mut fail, "host:bogus").await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "the adb server refused host:bogus: unknown host service"
        );
        let mut junk: &[u8] = b"HTTP/1.1 200";
        assert!(matches!(
            read_status(&mut junk, "host:version").await,
            Err(AdbError::Protocol { .. })
        ));
        let mut bad_len: &[u8] = b"OKAYzz01";
        read_status(&mut bad_len, "host:devices-l").await.unwrap();
        let e = read_message(&mut bad_len, "host:devices-l")
            .await
            .unwrap_err();
        assert!(e.to_string().contains("\"zz01\" is not a length"), "{e}");
        let mut cut: &[u8] = b"0010short";
        let e = read_message(&mut cut, "host:devices-l").await.unwrap_err();
        assert!(e.to_string().contains("closed the connection"), "{e}");
    }

    #[tokio::test]
    async fn a_read_to_the_end_stops_past_its_limit() {
        let mut r: &[u8] = &[7u8; 100];
        assert_eq!(
            read_to_end_bounded(&mut r, "exec", 100)
                .await
                .unwrap()
                .len(),
            100
        );
        let mut r: &[u8] = &[7u8; 101];
        let e = read_to_end_bounded(&mut r, "exec", 100).await.unwrap_err();
        assert!(matches!(e, AdbError::TooLarge { limit: 100, .. }), "{e}");
    }
}
