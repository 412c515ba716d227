//! Every bound of the client, by name.

use std::time::Duration;

/// A request's service string at most: what four hex digits can say.
pub const MAX_SERVICE_BYTES: usize = 0xffff;
/// A request's whole answer, by default, when the caller gives no time.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// What a shell's or an exec's output may hold by default (a raw
/// screencap of a 1440x3200 screen is 18 MB).
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 64 * 1024 * 1024;
/// One shell protocol packet's payload at most (adb's own packets are at
/// most its 1 MiB payload).
pub const MAX_SHELL_PACKET_BYTES: u32 = 1024 * 1024;
/// One sync DATA chunk: adb's SYNC_DATA_MAX.
pub const SYNC_DATA_MAX: usize = 64 * 1024;
/// A sync FAIL's message at most.
pub const MAX_SYNC_MESSAGE_BYTES: u32 = 64 * 1024;
/// A remote path of a sync request at most (adb's own bound).
pub const MAX_SYNC_PATH_BYTES: usize = 1024;
/// How long [`crate::ensure_server`] waits for `adb start-server` and then
/// for the server to answer.
pub const SERVER_START_WAIT: Duration = Duration::from_secs(20);
/// What is kept of `adb start-server`'s stderr for a failure's words.
pub const MAX_START_STDERR_BYTES: usize = 4096;
