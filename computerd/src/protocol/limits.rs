//! Every limit of the protocol, by name. The daemon enforces these; clients
//! use them to size their calls.

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// The longest line (one JSON message) either side sends or accepts.
pub const MAX_LINE_BYTES: u64 = MIB;
/// What exec.run keeps of each of stdout and stderr (both in base64 fit one line).
pub const MAX_OUTPUT_BYTES: u64 = 360 * KIB;
/// The most bytes one read returns: files.read, process.read, tar.pull.read.
pub const MAX_CHUNK_BYTES: u64 = 512 * KIB;
/// The most raw bytes one files.write or tar.push.write carries (fits a line in base64).
pub const MAX_WRITE_BYTES: u64 = 512 * KIB;
/// The most raw bytes a bytes frame carries after its line (its `bytes`).
pub const MAX_FRAME_BYTES: u64 = 512 * KIB;
/// How far past the bytes a tar push has been handed a pipelined
/// tar.push.write may start (its `offset`): it waits there for the writes
/// before it.
pub const MAX_PUSH_AHEAD_BYTES: u64 = 16 * MIB;
/// How far past the bytes a tar pull has returned a pipelined
/// tar.pull.read may start (its `offset`): it waits there for the reads
/// before it.
pub const MAX_PULL_AHEAD_BYTES: u64 = 16 * MIB;
/// Each process stream keeps its last bytes in a ring of this size.
pub const RING_BYTES: u64 = 8 * MIB;
/// The rings of every process, running or ended, hold at most this much together.
pub const RING_BUDGET_BYTES: u64 = 256 * MIB;
/// Under budget pressure, a running process's ring never shrinks below this.
pub const RING_MIN_SHARE_BYTES: u64 = 64 * KIB;
/// The process table holds at most this many processes, running or ended.
pub const MAX_PROCESSES: usize = 256;
/// A process log file holds at most this much of the output.
pub const MAX_LOG_BYTES: u64 = 16 * MIB;
/// Tar pulls open at once on one connection.
pub const MAX_PULLS_PER_CONNECTION: usize = 8;
/// Tar pushes open at once on one connection.
pub const MAX_PUSHES_PER_CONNECTION: usize = 8;
/// Port connections (port.connect) open at once on one connection.
pub const MAX_PORT_STREAMS_PER_CONNECTION: usize = 256;
/// The most JSON bytes of a files.list or process.list reply.
pub const MAX_LIST_REPLY_BYTES: u64 = 768 * KIB;
/// The most entries of one files.list reply.
pub const MAX_LIST_ENTRIES: usize = 1000;
/// files.list depth: 1 (default) to this.
pub const MAX_LIST_DEPTH: u32 = 16;
/// process.list shows at most this much of each argv, in JSON.
pub const MAX_LISTED_ARGV_BYTES: usize = 64 * 1024;
/// process.read's waitMs at most.
pub const MAX_WAIT_MS: u64 = 30_000;
/// process.wait's timeoutMs at most (a day).
pub const MAX_PROCESS_WAIT_MS: u64 = 86_400_000;
/// exec.run's and process.start's queueMs at most (an hour): how long a
/// start may wait for room under the computer's pids bound.
pub const MAX_QUEUE_MS: u64 = 3_600_000;
/// exec.run's timeoutMs when none is given.
pub const DEFAULT_EXEC_TIMEOUT_MS: u64 = 60_000;
/// exec.run's timeoutMs at most (a day).
pub const MAX_EXEC_TIMEOUT_MS: u64 = 86_400_000;
/// A process.write waits at most this long, its turn included.
pub const WRITE_TIMEOUT_MS: u64 = 10_000;
/// After SIGTERM, a run's processes get SIGKILL this much later.
pub const KILL_GRACE_MS: u64 = 2_000;
/// At shutdown, starts already under way get this long to start their program.
pub const SHUTDOWN_START_WAIT_MS: u64 = 3_000;
/// At shutdown, whatever is still under init this long after SIGTERM is killed.
pub const SHUTDOWN_KILL_AFTER_MS: u64 = 5_000;
/// `computerd stdio` waits this long for the socket to answer.
pub const BRIDGE_CONNECT_WAIT_MS: u64 = 3_000;
/// A terminal's columns and rows: 1 to this.
pub const MAX_PTY_SIDE: u16 = 4096;
/// exec.run and process.start: the most argv entries.
pub const MAX_ARGV: usize = 65_536;

/// input.actions: the most actions in one batch.
pub const MAX_ACTIONS: usize = 100;
/// input.actions: waits and holds of one batch together, at most (300 s).
pub const MAX_BATCH_WAIT_MS: u64 = 300_000;
/// input.actions: a click counts 1 to this (single, double, triple).
pub const MAX_CLICK_COUNT: u64 = 3;
/// input.actions: a key action repeats at most this many times.
pub const MAX_KEY_REPEAT: u64 = 100;
/// input.actions: the most characters of one type.
pub const MAX_TYPE_CHARS: usize = 65_536;
/// input.actions: the most wheel clicks of one scroll.
pub const MAX_SCROLL_CLICKS: u64 = 10_000;
/// input.actions: the most points of one drag.
pub const MAX_DRAG_POINTS: usize = 1000;
/// input.actions: the most keys held at once (a combo, a hold, a click's keys).
pub const MAX_KEYS_AT_ONCE: usize = 16;
/// X11: a remapped character's keycode is reused only this long after its last key.
pub const X11_REMAP_SETTLE_MS: u64 = 250;
/// X11: the Xauthority file is read only when it is at most this big.
pub const MAX_XAUTHORITY_BYTES: u64 = 64 * KIB;
/// X11: the most bytes of the server's setup reply.
pub const MAX_X11_SETUP_BYTES: u64 = 256 * KIB;
/// X11: the most bytes of any reply but a GetImage (bounded by its rectangle).
pub const MAX_X11_REPLY_BYTES: u64 = 512 * KIB;
/// X11: the largest screen side driven (a GetImage of the root is bounded by it).
pub const MAX_X11_SCREEN_SIDE: u32 = 16_384;
/// X11: the screen's pixels at most (2^25, a 32 bpp root image of 128 MiB).
pub const MAX_X11_SCREEN_PIXELS: u64 = 1 << 25;
/// screen.watch: waitMs when none is given.
pub const DEFAULT_WATCH_WAIT_MS: u64 = 2_000;
/// screen.watch: waitMs at most.
pub const MAX_WATCH_WAIT_MS: u64 = 10_000;
/// screen.watch: maxWidth when none is given.
pub const DEFAULT_WATCH_MAX_WIDTH: u32 = 1280;
/// screen.watch: JPEG quality when none is given (1 to 100).
pub const DEFAULT_WATCH_QUALITY: u8 = 60;
/// screen.watch: how often the screen is looked at while waiting for a change.
pub const WATCH_POLL_MS: u64 = 50;
/// cdp.send: how long the browser gets to answer, by default and at most (60 s).
pub const CDP_SEND_MAX_MS: u64 = 60_000;
/// cdp.events: waitMs at most.
pub const CDP_EVENTS_WAIT_MAX_MS: u64 = 30_000;
/// cdp.events: the most events one read returns.
pub const CDP_EVENTS_MAX: u32 = 1000;
/// cdp: the events a browser's client keeps, at most (oldest dropped first).
pub const CDP_EVENTS_KEPT: usize = 4096;
/// cdp: the bytes of events a browser's client keeps, at most (16 MiB).
pub const CDP_EVENTS_KEPT_BYTES: usize = 16 * MIB as usize;
/// cdp: the largest message from or to a browser (64 MiB: a full-page screenshot).
pub const CDP_MESSAGE_MAX_BYTES: usize = 64 * MIB as usize;
/// input.actions: a swipe lasts 0 to this many ms (a longer press and
/// move is a drag, which a phone's one-finger input cannot hold).
pub const MAX_SWIPE_MS: u64 = 1_000;
/// input.actions: the most points of one swipe's path.
pub const MAX_SWIPE_POINTS: usize = 100;
/// input.actions: a long press is held 0 to this many ms.
pub const MAX_LONG_PRESS_MS: u64 = 10_000;
/// apps.ui_tree: the most nodes of one tree.
pub const MAX_UI_NODES: usize = 5_000;
/// apps.ui_tree: the deepest tree. Each level is two levels of JSON (a node
/// and its children), and serde_json refuses past 128, envelope included.
pub const MAX_UI_DEPTH: usize = 50;
/// apps.*: the longest app id (a package name or bundle id), in bytes.
pub const MAX_APP_ID_CHARS: usize = 255;
