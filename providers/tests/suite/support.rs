//! What the tests of this binary share: the test hosts of the egress tests
//! ([`net`]) and the turns tests take where one would disturb another.

pub mod net;

/// A sweep releases every expired computer of the engine, so the tests
/// that sweep take turns (one's expired computer is the other's to find).
pub static SWEEPS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The Docker egress tests run one at a time, and never beside a local
/// egress test: a test host's address is this machine's own, which every
/// proxy must then refuse. The local egress tests share it (read), the
/// Docker ones hold it alone (write).
pub static EGRESS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());
