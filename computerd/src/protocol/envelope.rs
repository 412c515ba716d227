//! The JSON-RPC envelope, the error object and base64 bytes.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// A request id: JSON-RPC allows a number or a string.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum Id {
    Num(i64),
    Str(String),
    /// `null`: the id of a reply to a line whose own id could not be read.
    Null,
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{s:?}"),
            Id::Null => f.write_str("null"),
        }
    }
}

/// Every message on the wire, in either direction: a request (`id` and
/// `method`), a notification (`method`, no `id`) or a reply (`id` with
/// `result` or `error`). One shape for all, so no second envelope exists.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
pub struct Envelope {
    pub jsonrpc: String,
    /// Absent on a notification; `null` (present) on a request or reply
    /// whose id is null, which is still a request or reply.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_id"
    )]
    pub id: Option<Id>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
    /// A bytes frame: this many raw bytes follow the line, right after its
    /// newline. They are the `data` of the request's params or of the
    /// reply's result, which the JSON then leaves out. At most
    /// [`MAX_FRAME_BYTES`](super::limits::MAX_FRAME_BYTES); sent to a
    /// daemon only once its hello said `bytesFrames`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// On a request: the caller takes the result's `data` as a bytes frame
    /// (files.read and tar.pull.read send one; every other reply is JSON as
    /// ever, and a daemon that knows no frames ignores this).
    #[serde(
        default,
        rename = "replyBytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub reply_bytes: Option<bool>,
}

pub const JSONRPC_VERSION: &str = "2.0";

/// A present id, `null` included (serde would read `null` as absent).
fn present_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Id>, D::Error> {
    Id::deserialize(d).map(Some)
}

impl Envelope {
    pub fn request(id: Id, method: &str, params: Value) -> Self {
        Self {
            jsonrpc: JSONRPC_VERSION.into(),
            id: Some(id),
            method: Some(method.into()),
            params: Some(params),
            ..Self::default()
        }
    }

    pub fn notification(method: &str, params: Value) -> Self {
        Self {
            jsonrpc: JSONRPC_VERSION.into(),
            method: Some(method.into()),
            params: Some(params),
            ..Self::default()
        }
    }

    /// A reply. The id is JSON-RPC's `null` when the request's could not be read.
    pub fn reply(id: Option<Id>, outcome: Result<Value, RpcError>) -> Self {
        let id = Some(id.unwrap_or(Id::Null));
        let (result, error) = match outcome {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(e)),
        };
        Self {
            jsonrpc: JSONRPC_VERSION.into(),
            id,
            result,
            error,
            ..Self::default()
        }
    }

    /// The reply as one wire line (without the newline).
    pub fn to_line(&self) -> String {
        // Serializing this type cannot fail: every field is a plain JSON value.
        serde_json::to_string(self).unwrap_or_else(|_| {
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"reply could not be encoded","data":{"kind":"invalid"}}}"#.into()
        })
    }
}

/// The kinds every error carries in `data.kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    NotFound,
    Invalid,
    Timeout,
    Aborted,
    Denied,
    Limit,
    Unsupported,
    Exists,
    NotDir,
    IsDir,
}

impl ErrorKind {
    /// The JSON-RPC code for this kind. Bad requests use the standard codes;
    /// the rest use one code each in the server range.
    pub fn code(self) -> i64 {
        match self {
            ErrorKind::Invalid => -32602,
            ErrorKind::NotFound => -32001,
            ErrorKind::Timeout => -32002,
            ErrorKind::Aborted => -32003,
            ErrorKind::Denied => -32004,
            ErrorKind::Limit => -32005,
            ErrorKind::Unsupported => -32006,
            ErrorKind::Exists => -32007,
            ErrorKind::NotDir => -32008,
            ErrorKind::IsDir => -32009,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::Invalid => "invalid",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Aborted => "aborted",
            ErrorKind::Denied => "denied",
            ErrorKind::Limit => "limit",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Exists => "exists",
            ErrorKind::NotDir => "not_dir",
            ErrorKind::IsDir => "is_dir",
        }
    }
}

crate::display_as_str!(ErrorKind);

/// `data` of an error object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ErrorData {
    pub kind: ErrorKind,
    /// The params field at fault, when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Bytes already written when a write stopped part way (process.write timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<u64>,
}

/// The error object: `{code, message, data: {kind}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[error("{message}")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<ErrorData>,
}

/// JSON-RPC's own codes for a line that is not a request at all.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;

impl RpcError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            code: kind.code(),
            message: message.into(),
            data: Some(ErrorData {
                kind,
                field: None,
                written: None,
            }),
        }
    }

    pub fn with_code(mut self, code: i64) -> Self {
        self.code = code;
        self
    }

    pub fn with_field(mut self, field: &str) -> Self {
        if let Some(d) = self.data.as_mut() {
            d.field = Some(field.to_string());
        }
        self
    }

    pub fn invalid_field(field: &str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, message).with_field(field)
    }

    pub fn kind(&self) -> Option<ErrorKind> {
        self.data.as_ref().map(|d| d.kind)
    }

    pub fn not_found(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, m)
    }
    pub fn invalid(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, m)
    }
    pub fn timeout(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Timeout, m)
    }
    pub fn aborted(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Aborted, m)
    }
    pub fn denied(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Denied, m)
    }
    pub fn limit(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Limit, m)
    }
    pub fn unsupported(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, m)
    }
    pub fn exists(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Exists, m)
    }
    pub fn not_dir(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotDir, m)
    }
    pub fn is_dir(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::IsDir, m)
    }

    /// An error for a number field above its limit.
    pub fn over_limit(field: &str, got: u64, most: u64) -> Self {
        Self::limit(format!("{field} is {got}; the most is {most}")).with_field(field)
    }
}

/// Bytes that travel as a base64 string (standard alphabet, padded).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Bytes64(pub Vec<u8>);

impl Bytes64 {
    pub fn into_inner(self) -> Vec<u8> {
        self.0
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Bytes64 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bytes64({} bytes)", self.0.len())
    }
}

impl From<Vec<u8>> for Bytes64 {
    fn from(v: Vec<u8>) -> Self {
        Self(v)
    }
}

impl From<&[u8]> for Bytes64 {
    fn from(v: &[u8]) -> Self {
        Self(v.to_vec())
    }
}

impl std::ops::Deref for Bytes64 {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl Serialize for Bytes64 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for Bytes64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        STANDARD
            .decode(s.as_bytes())
            .map(Bytes64)
            .map_err(|e| serde::de::Error::custom(format!("invalid base64 ({e})")))
    }
}

#[cfg(any(test, feature = "schemas"))]
impl schemars::JsonSchema for Bytes64 {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Bytes64".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "contentEncoding": "base64",
            "description": "Bytes as base64 (standard alphabet, padded)."
        })
    }
}

/// A params or result type with a `data` field of bytes, which may travel as
/// a bytes frame beside its JSON instead of inside it.
pub trait WithData {
    fn data_mut(&mut self) -> &mut Bytes64;
}

/// A params type and the method and result it belongs to.
pub trait Call: Serialize {
    const METHOD: super::Method;
    type Result: DeserializeOwned + Serialize;
}

/// Decode params, naming the field at fault in the error. Missing params
/// are read as `{}`, so a method whose params are all optional takes none.
///
/// Only the decoding itself is generic: the params' check and the error's
/// words are one function each, not a copy per params type (the static
/// daemon decodes some thirty types).
pub fn decode_params<T: DeserializeOwned>(params: Option<Value>) -> Result<T, RpcError> {
    let value = params_object(params)?;
    let mut track = serde_path_to_error::Track::new();
    T::deserialize(serde_path_to_error::Deserializer::new(value, &mut track))
        .map_err(|e| decode_error(track.path(), e))
}

/// The params as a JSON object: absent or `null` is `{}`; anything else
/// but an object is refused.
#[inline(never)]
fn params_object(params: Option<Value>) -> Result<Value, RpcError> {
    let value = match params {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(v) => v,
    };
    if !value.is_object() {
        return Err(RpcError::invalid("params must be a JSON object"));
    }
    Ok(value)
}

/// A decoding error in words, led by the path of the field at fault.
#[inline(never)]
fn decode_error(path: serde_path_to_error::Path, e: serde_json::Error) -> RpcError {
    let path = path.to_string();
    if path == "." || path.is_empty() {
        RpcError::invalid(format!("params: {e}"))
    } else {
        RpcError::invalid(format!("{path}: {e}")).with_field(&path)
    }
}

/// Decode params whose `data` came as a bytes frame after the line: the
/// JSON must leave `data` out, and the frame's bytes become it. Without a
/// frame, the same as [`decode_params`].
pub fn decode_params_with_bytes<T: DeserializeOwned + WithData>(
    params: Option<Value>,
    bytes: Option<Vec<u8>>,
) -> Result<T, RpcError> {
    let Some(bytes) = bytes else {
        return decode_params(params);
    };
    let mut value = match params {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(v) => v,
    };
    let Value::Object(map) = &mut value else {
        return Err(RpcError::invalid("params must be a JSON object"));
    };
    if map.contains_key("data") {
        return Err(RpcError::invalid_field(
            "data",
            "data is given twice: in params and as the bytes frame after the line; send it once",
        ));
    }
    // A stand-in that decodes to no bytes, so the field's own rules hold.
    map.insert("data".into(), Value::String(String::new()));
    let mut p: T = decode_params(Some(value))?;
    *p.data_mut() = Bytes64(bytes);
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct P {
        #[allow(dead_code)]
        timeout_ms: Option<u64>,
        #[allow(dead_code)]
        data: Option<Bytes64>,
    }

    #[test]
    fn decode_errors_name_the_field() {
        let e = decode_params::<P>(Some(json!({"timeoutMs": -1}))).unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::Invalid));
        assert!(e.message.starts_with("timeoutMs: "), "{}", e.message);
        let e = decode_params::<P>(Some(json!({"data": "!!!"}))).unwrap_err();
        assert!(
            e.message.starts_with("data: invalid base64"),
            "{}",
            e.message
        );
        let e = decode_params::<P>(Some(json!({"extra": 1}))).unwrap_err();
        assert!(e.message.contains("unknown field `extra`"), "{}", e.message);
        let e = decode_params::<P>(Some(json!([1]))).unwrap_err();
        assert_eq!(e.message, "params must be a JSON object");
        assert!(decode_params::<P>(None).is_ok());
    }

    #[test]
    fn error_object_round_trips_with_kind() {
        let e = RpcError::not_found("no such file: /x");
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            json!({"code": -32001, "message": "no such file: /x", "data": {"kind": "not_found"}})
        );
        let back: RpcError = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn null_ids_are_present_and_absent_ids_are_notifications() {
        let env: Envelope =
            serde_json::from_str(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#).unwrap();
        assert_eq!(env.id, Some(Id::Null));
        let env: Envelope =
            serde_json::from_str(r#"{"jsonrpc":"2.0","method":"$/cancelRequest"}"#).unwrap();
        assert_eq!(env.id, None);
        let reply = Envelope::reply(None, Err(RpcError::invalid("bad line")));
        assert!(
            reply
                .to_line()
                .starts_with(r#"{"jsonrpc":"2.0","id":null,"error""#),
            "{}",
            reply.to_line()
        );
    }

    #[test]
    fn bytes64_is_standard_base64() {
        let b = Bytes64(b"hi\n".to_vec());
        assert_eq!(serde_json::to_string(&b).unwrap(), "\"aGkK\"");
        let back: Bytes64 = serde_json::from_str("\"aGkK\"").unwrap();
        assert_eq!(back, b);
    }
}
