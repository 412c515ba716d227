//! Bytes frames on a connection: the raw bytes after a line whose envelope
//! says `bytes`, read whole before the line is acted on.

use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::protocol::{RpcError, WithData, limits};

/// What came with a request besides its JSON.
pub(super) struct Frame {
    /// The request's `data`, sent as a frame after its line.
    pub bytes: Option<Vec<u8>>,
    /// The caller takes the result's `data` as a frame.
    pub reply_bytes: bool,
}

/// Read a frame of `n` bytes. Over [`limits::MAX_FRAME_BYTES`], or cut
/// short by the end of input, it is an error after which the stream cannot
/// be followed: the caller ends the connection.
pub(super) async fn read<R: AsyncRead + Unpin>(read: &mut R, n: u64) -> Result<Vec<u8>, RpcError> {
    if n > limits::MAX_FRAME_BYTES {
        return Err(RpcError::limit(format!(
            "bytes is {n}; the most is {} (a bytes frame carries at most 512 KiB); the connection ends, since the bytes after the line cannot be skipped safely",
            limits::MAX_FRAME_BYTES
        )));
    }
    let mut buf = Vec::with_capacity(n as usize);
    let got = read
        .take(n)
        .read_to_end(&mut buf)
        .await
        .map_err(|e| RpcError::invalid(format!("reading a bytes frame failed: {e}")))?;
    if (got as u64) < n {
        return Err(RpcError::invalid(format!(
            "the bytes frame was cut short: {got} of its {n} bytes came before the end of input; the request was not run"
        )));
    }
    Ok(buf)
}

/// Why a line that is not an envelope cannot be stepped over: it names a
/// `bytes` count that is not one, so what follows it cannot be measured.
pub(super) fn unreadable_count(line: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(line).ok()?;
    let count = v.get("bytes")?;
    Some(format!(
        "bytes must be a count of the raw bytes after the line (0 to {}), not {count}; the connection ends, since what follows cannot be measured",
        limits::MAX_FRAME_BYTES
    ))
}

/// A reply whose `data` goes as a frame when the caller asked for one.
pub(super) fn answer<R: Serialize + WithData>(
    r: Result<R, RpcError>,
    reply_bytes: bool,
) -> Result<(Value, Option<Vec<u8>>), RpcError> {
    let mut r = r?;
    let bytes = reply_bytes.then(|| std::mem::take(r.data_mut()).into_inner());
    let mut value = serde_json::to_value(r)
        .map_err(|e| RpcError::invalid(format!("the reply could not be encoded: {e}")))?;
    if bytes.is_some()
        && let Value::Object(map) = &mut value
    {
        map.remove("data");
    }
    Ok((value, bytes))
}
