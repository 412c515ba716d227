//! The slice of Modal's gRPC API this provider speaks, written by hand as
//! prost messages (no protoc on the build machines, and the whole of
//! Modal's protos generate some 1.4 MB of Rust for a dozen calls). Each
//! message keeps the field numbers and types of Modal's Apache-2.0
//! protos, modal-labs/modal-client@69519aef `modal_proto/api.proto`
//! (package `modal.client`, service `ModalClient` at line 4680) and
//! `modal_proto/task_command_router.proto` (package
//! `modal.task_command_router`); a field this provider never sets or
//! reads is left out, which proto3 allows on both sides (an unknown
//! field is skipped, a missing one reads as its default).

use std::collections::HashMap;

/// The control plane's service path.
pub const CLIENT: &str = "/modal.client.ModalClient/";
/// The task command router's service path.
pub const ROUTER: &str = "/modal.task_command_router.TaskCommandRouter/";

/// api.proto:258 `ObjectCreationType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ObjectCreationType {
    Unspecified = 0,
    CreateIfMissing = 1,
}

/// api.proto:2589 `GenericResult.GenericStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum GenericStatus {
    Unspecified = 0,
    Success = 1,
    Failure = 2,
    Terminated = 3,
    Timeout = 4,
    InitFailure = 5,
    InternalFailure = 6,
    IdleTimeout = 7,
    MemoryManagerEviction = 8,
}

/// api.proto:2991 `NetworkAccess.NetworkAccessType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum NetworkAccessType {
    Unspecified = 0,
    Open = 1,
    Blocked = 2,
    Allowlist = 3,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AuthTokenGetRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AuthTokenGetResponse {
    #[prost(string, tag = "1")]
    pub token: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AppGetOrCreateRequest {
    #[prost(string, tag = "1")]
    pub app_name: String,
    #[prost(string, tag = "2")]
    pub environment_name: String,
    #[prost(enumeration = "ObjectCreationType", tag = "3")]
    pub object_creation_type: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AppGetOrCreateResponse {
    #[prost(string, tag = "1")]
    pub app_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GenericResult {
    #[prost(enumeration = "GenericStatus", tag = "1")]
    pub status: i32,
    #[prost(string, tag = "2")]
    pub exception: String,
    #[prost(int32, tag = "3")]
    pub exitcode: i32,
}

/// api.proto `Image`: a registry image is `FROM <tag>` as its one
/// Dockerfile command (js/src/image.ts:434-514).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Image {
    #[prost(string, repeated, tag = "6")]
    pub dockerfile_commands: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageGetOrCreateRequest {
    #[prost(message, optional, tag = "2")]
    pub image: Option<Image>,
    #[prost(string, tag = "4")]
    pub app_id: String,
    #[prost(string, tag = "9")]
    pub builder_version: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageGetOrCreateResponse {
    #[prost(string, tag = "1")]
    pub image_id: String,
    /// Set only once the build has ended.
    #[prost(message, optional, tag = "2")]
    pub result: Option<GenericResult>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageJoinStreamingRequest {
    #[prost(string, tag = "1")]
    pub image_id: String,
    #[prost(float, tag = "2")]
    pub timeout: f32,
    #[prost(string, tag = "3")]
    pub last_entry_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageJoinStreamingResponse {
    #[prost(message, optional, tag = "1")]
    pub result: Option<GenericResult>,
    #[prost(string, tag = "3")]
    pub entry_id: String,
    #[prost(bool, tag = "4")]
    pub eof: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Resources {
    #[prost(uint32, tag = "2")]
    pub memory_mb: u32,
    #[prost(uint32, tag = "3")]
    pub milli_cpu: u32,
    #[prost(uint32, tag = "5")]
    pub memory_mb_max: u32,
    #[prost(uint32, tag = "7")]
    pub milli_cpu_max: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NetworkAccess {
    #[prost(enumeration = "NetworkAccessType", tag = "1")]
    pub network_access_type: i32,
    #[prost(string, repeated, tag = "2")]
    pub allowed_cidrs: Vec<String>,
    #[prost(string, repeated, tag = "3")]
    pub allowed_domains: Vec<String>,
}

/// api.proto `Sandbox`, a sandbox's definition.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sandbox {
    #[prost(string, repeated, tag = "1")]
    pub entrypoint_args: Vec<String>,
    #[prost(string, tag = "3")]
    pub image_id: String,
    #[prost(message, optional, tag = "5")]
    pub resources: Option<Resources>,
    /// The sandbox's most life, in seconds.
    #[prost(uint32, tag = "7")]
    pub timeout_secs: u32,
    #[prost(string, optional, tag = "8")]
    pub workdir: Option<String>,
    /// Deprecated for `network_access`, still sent by the SDK.
    #[prost(bool, tag = "11")]
    pub block_network: bool,
    #[prost(message, optional, tag = "22")]
    pub network_access: Option<NetworkAccess>,
    #[prost(string, optional, tag = "28")]
    pub runtime: Option<String>,
}

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, prost::Message)]
pub struct SandboxTag {
    #[prost(string, tag = "1")]
    pub tag_name: String,
    #[prost(string, tag = "2")]
    pub tag_value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SandboxCreateRequest {
    #[prost(string, tag = "1")]
    pub app_id: String,
    #[prost(message, optional, tag = "2")]
    pub definition: Option<Sandbox>,
    #[prost(message, repeated, tag = "4")]
    pub tags: Vec<SandboxTag>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SandboxCreateResponse {
    #[prost(string, tag = "1")]
    pub sandbox_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SandboxListRequest {
    #[prost(string, tag = "1")]
    pub app_id: String,
    /// Paging: only sandboxes made before this (seconds since the epoch).
    #[prost(double, tag = "2")]
    pub before_timestamp: f64,
    #[prost(bool, tag = "4")]
    pub include_finished: bool,
    #[prost(message, repeated, tag = "5")]
    pub tags: Vec<SandboxTag>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SandboxInfo {
    #[prost(string, tag = "1")]
    pub id: String,
    /// Seconds since the epoch.
    #[prost(double, tag = "3")]
    pub created_at: f64,
    #[prost(string, tag = "5")]
    pub app_id: String,
    #[prost(message, repeated, tag = "6")]
    pub tags: Vec<SandboxTag>,
    #[prost(string, tag = "8")]
    pub image_id: String,
    #[prost(uint32, tag = "11")]
    pub timeout_secs: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SandboxListResponse {
    #[prost(message, repeated, tag = "1")]
    pub sandboxes: Vec<SandboxInfo>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SandboxWaitRequest {
    #[prost(string, tag = "1")]
    pub sandbox_id: String,
    #[prost(float, tag = "2")]
    pub timeout: f32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SandboxWaitResponse {
    /// None while the sandbox runs.
    #[prost(message, optional, tag = "1")]
    pub result: Option<GenericResult>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SandboxTerminateRequest {
    #[prost(string, tag = "1")]
    pub sandbox_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SandboxTerminateResponse {
    #[prost(message, optional, tag = "1")]
    pub existing_result: Option<GenericResult>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SandboxGetTaskIdRequest {
    #[prost(string, tag = "1")]
    pub sandbox_id: String,
    #[prost(float, optional, tag = "2")]
    pub timeout: Option<f32>,
    #[prost(bool, tag = "3")]
    pub wait_until_ready: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SandboxGetTaskIdResponse {
    #[prost(string, optional, tag = "1")]
    pub task_id: Option<String>,
    #[prost(message, optional, tag = "2")]
    pub task_result: Option<GenericResult>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TaskGetCommandRouterAccessRequest {
    #[prost(string, tag = "1")]
    pub task_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TaskGetCommandRouterAccessResponse {
    #[prost(string, tag = "1")]
    pub jwt: String,
    #[prost(string, tag = "2")]
    pub url: String,
}

// task_command_router.proto

/// `TaskExecStdoutConfig` / `TaskExecStderrConfig`: 1 is PIPE in both.
pub const PIPE: i32 = 1;
/// `TaskExecStdioFileDescriptor`.
pub const FD_STDOUT: i32 = 0;
pub const FD_STDERR: i32 = 1;

#[derive(Clone, PartialEq, prost::Message)]
pub struct TaskExecStartRequest {
    #[prost(string, tag = "1")]
    pub task_id: String,
    #[prost(string, tag = "2")]
    pub exec_id: String,
    #[prost(string, repeated, tag = "3")]
    pub command_args: Vec<String>,
    #[prost(int32, tag = "4")]
    pub stdout_config: i32,
    #[prost(int32, tag = "5")]
    pub stderr_config: i32,
    #[prost(uint32, optional, tag = "6")]
    pub timeout_secs: Option<u32>,
    #[prost(string, optional, tag = "7")]
    pub workdir: Option<String>,
    #[prost(map = "string, string", tag = "12")]
    pub env: HashMap<String, String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TaskExecStartResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TaskExecStdinWriteRequest {
    #[prost(string, tag = "1")]
    pub task_id: String,
    #[prost(string, tag = "2")]
    pub exec_id: String,
    /// The bytes sent before these: a write the router has already taken
    /// is taken once.
    #[prost(uint64, tag = "3")]
    pub offset: u64,
    #[prost(bytes = "vec", tag = "4")]
    pub data: Vec<u8>,
    #[prost(bool, tag = "5")]
    pub eof: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TaskExecStdinWriteResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TaskExecStdioReadRequest {
    #[prost(string, tag = "1")]
    pub task_id: String,
    #[prost(string, tag = "2")]
    pub exec_id: String,
    #[prost(uint64, tag = "3")]
    pub offset: u64,
    #[prost(int32, tag = "4")]
    pub file_descriptor: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TaskExecStdioReadResponse {
    #[prost(bytes = "vec", tag = "1")]
    pub data: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TaskExecWaitRequest {
    #[prost(string, tag = "1")]
    pub task_id: String,
    #[prost(string, tag = "2")]
    pub exec_id: String,
}

/// `TaskExecWaitResponse` and `TaskExecPollResponse` (same shape).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TaskExecWaitResponse {
    #[prost(oneof = "ExitStatus", tags = "1, 2")]
    pub exit_status: Option<ExitStatus>,
}

#[derive(Clone, Copy, PartialEq, Eq, prost::Oneof)]
pub enum ExitStatus {
    #[prost(int32, tag = "1")]
    Code(i32),
    #[prost(int32, tag = "2")]
    Signal(i32),
}

/// task_command_router.proto:338 `TaskSnapshotFilesystemRequest`: the
/// task's whole filesystem into a new image, `snapshot_id` (a client
/// UUID) making a repeated ask one snapshot, `ttl_seconds` the image's
/// hard end (-1 never; js/src/sandbox.ts `snapshotFilesystem`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TaskSnapshotFilesystemRequest {
    #[prost(string, tag = "1")]
    pub task_id: String,
    #[prost(string, tag = "2")]
    pub snapshot_id: String,
    #[prost(int64, optional, tag = "3")]
    pub ttl_seconds: Option<i64>,
}

/// task_command_router.proto:355.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TaskSnapshotFilesystemResponse {
    #[prost(string, tag = "1")]
    pub image_id: String,
}

/// api.proto:2684 `ImageDeleteRequest` (answered by
/// `google.protobuf.Empty`, [`Empty`]).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageDeleteRequest {
    #[prost(string, tag = "1")]
    pub image_id: String,
}

/// `google.protobuf.Empty`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Empty {}
