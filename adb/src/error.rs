//! The one error of the crate. No variant carries a service string whole:
//! a request is named by what it is (`host:connect`, `shell`), because its
//! arguments may be a vendor's secret endpoint or an unlock code.

use std::time::Duration;

pub type Result<T, E = AdbError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum AdbError {
    /// Nothing accepts a connection on the server's port.
    #[error(
        "no adb server answers on 127.0.0.1:{port} ({reason}); start one with `adb -P {port} start-server`"
    )]
    Unreachable { port: u16, reason: String },

    /// The server answered FAIL, in its own words.
    #[error("the adb server refused {request}: {message}")]
    Refused {
        request: &'static str,
        message: String,
    },

    /// The device is not (or no longer) one of the server's transports, or
    /// its stream ended before the answer was whole.
    #[error("the device with transport id {transport_id} is gone: {message}")]
    DeviceGone { transport_id: u64, message: String },

    /// The bytes are not adb's protocol, or a length is past its bound.
    #[error("the answer to {request} is not adb's protocol: {detail}")]
    Protocol {
        request: &'static str,
        detail: String,
    },

    /// The request had no whole answer in time (its connection is closed).
    #[error("{request} had no answer within {} ms", after.as_millis())]
    Timeout {
        request: &'static str,
        after: Duration,
    },

    /// The connection to the server broke mid-request.
    #[error("the connection to the adb server broke during {request}: {source}")]
    Io {
        request: &'static str,
        #[source]
        source: std::io::Error,
    },

    /// host:connect did not connect. `cause` is the system's words (such
    /// as "Connection refused"), never the endpoint.
    #[error("adb could not connect to the phone's adb endpoint{}", cause.as_deref().map(|c| format!(": {c}")).unwrap_or_default())]
    ConnectFailed { cause: Option<String> },

    /// A request this client will not send: `field` and why.
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },

    /// An output past the caller's bound.
    #[error("{request} gave more than {limit} bytes; read less at a time")]
    TooLarge { request: &'static str, limit: u64 },

    /// The adb program could not start a server.
    #[error("could not start an adb server on port {port}: {reason}")]
    Start { port: u16, reason: String },
}
