//! A scriptable fake provider, for tests: computers in this process that
//! answer from a script, and a record of every call it was asked. Never in
//! the registry.
//!
//! A test of a host (the server's sessions, the conformance suite) asserts
//! what the host asked and how it behaves when a provider misbehaves, with
//! no root, no namespaces and no Docker:
//!
//! - [`FakeProvider::on`] decides a provider call ([`Op`]) by a
//!   [`Script`]: a typed failure, a delay, a hang that ends only on the
//!   caller's cancel, or (for create) a computer made whose answer is lost.
//! - [`FakeProvider::program`] registers what `exec.run` answers for an
//!   argv that matches; no real program runs. Files live in memory.
//! - [`FakeProvider::kill`] makes a computer die: its connections close.
//! - Knobs break one promise each ([`Breaks`]): a network read back wrong,
//!   a label forgotten, a deadline not kept, another daemon version.
//! - [`FakeProvider::calls`] is every call in order.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use computer_providers::provider::{Connection, Provider};
use computer_providers::types::{
    AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, DaemonMode, ErrorCode, Labels,
    LifetimeMode, NetworkKind, NetworkPolicy, NetworkReadBack, ProviderError, Release, Result,
    check_labels, check_lifetime,
};
use computerd::client::{ClientError, ComputerClient};
use computerd::protocol::{
    self, Bytes64, ExecParams, ExecResult, FileStat, FileType, Group, HelloResult, MachineKind,
    RpcError,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A provider call a script can decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Create,
    Attach,
    List,
    Network,
    Connect,
    Release,
    Sweep,
    /// A protocol call on a connection (exec.run, ...).
    Exec,
}

/// What a scripted call does.
#[derive(Clone, Debug)]
pub enum Script {
    /// Answer this error.
    Fail(ProviderError),
    /// Wait this long, then go on as usual (a slow vendor that does not
    /// heed the cancel).
    Delay(Duration),
    /// Never answer: end (aborted) only when the caller's cancel fires.
    Hang,
    /// Create only: make the computer (it is listed), answer an error.
    Lost,
    /// List only: read the computers, then wait this long before
    /// answering (a listing already old when it arrives).
    Stale(Duration),
}

struct Rule {
    op: Op,
    script: Script,
    times: Option<usize>,
}

/// One call the fake was asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeCall {
    pub op: Op,
    /// The computer's id, where the call names one; the method for Exec.
    pub on: Option<String>,
}

/// Promises the fake can break, one each.
#[derive(Clone, Debug, Default)]
pub struct Breaks {
    /// network() reads this kind back whatever the computer has.
    pub network_reads: Option<NetworkKind>,
    /// This label is dropped from every ref create, list and attach give.
    pub forget_label: Option<String>,
    /// Computers run on past their deadline.
    pub ignore_deadline: bool,
    /// hello reports this version (a drifted daemon), and create and
    /// connect hand it out.
    pub version: Option<String>,
    /// An unknown method is answered (with an empty object).
    pub answer_unknown: bool,
    /// files.write keeps at most this many bytes of a file.
    pub keep_bytes: Option<usize>,
    /// Every ref reads this image back, whatever create asked for.
    pub image_reads: Option<String>,
}

type ProgramFn =
    Arc<dyn Fn(&ExecParams) -> std::result::Result<ExecResult, RpcError> + Send + Sync>;

type MatchFn = Box<dyn Fn(&[String]) -> bool + Send + Sync>;

struct Program {
    matches: MatchFn,
    run: ProgramFn,
}

struct FakeComputer {
    r: Mutex<ComputerRef>,
    network: NetworkKind,
    deadline_ms: i64,
    alive: AtomicBool,
    files: Mutex<BTreeMap<String, Vec<u8>>>,
}

struct Inner {
    caps: Capabilities,
    computers: Mutex<BTreeMap<String, Arc<FakeComputer>>>,
    calls: Mutex<Vec<FakeCall>>,
    rules: Mutex<Vec<Rule>>,
    programs: Mutex<Vec<Program>>,
    breaks: Mutex<Breaks>,
    next: AtomicU64,
}

/// The scriptable fake provider (cheap to clone; clones share it).
#[derive(Clone)]
pub struct FakeProvider {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

use computerd::now_ms;

fn rfc3339(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// A `/proc/self/status` of an unprivileged process whose CapEff is
/// `caps_eff`.
pub fn proc_status(caps_eff: &str) -> String {
    format!(
        "Name:\tcat\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t{caps_eff}\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n"
    )
}

/// An exec result with this stdout and exit code 0.
pub fn ok_stdout(stdout: &str) -> ExecResult {
    ExecResult {
        exit_code: Some(0),
        stdout: Bytes64(stdout.as_bytes().to_vec()),
        ..Default::default()
    }
}

/// Whether `argv` is `sh -c <script>` with a script holding `needle`.
pub fn script_has(argv: &[String], needle: &str) -> bool {
    argv.len() == 3 && argv[0] == "sh" && argv[1] == "-c" && argv[2].contains(needle)
}

impl Default for FakeProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeProvider {
    /// A linux computer's provider: exec, files and processes, network
    /// none, release stop and delete, a week at most. Programs answer
    /// what a well-behaved computer would to the few scripts the
    /// conformance cases that a fake can run use (a clean
    /// `/proc/self/status`, no process left).
    pub fn new() -> Self {
        let p = FakeProvider {
            inner: Arc::new(Inner {
                caps: Capabilities {
                    kind: MachineKind::Linux,
                    os: "linux".into(),
                    daemon: DaemonMode::Pid1,
                    groups: vec![Group::Exec, Group::Files, Group::Processes],
                    lifetime: LifetimeMode::Enforced,
                    release: vec![Release::Stop, Release::Delete],
                    max_lifetime_ms: 7 * 24 * 3_600_000,
                    networks: vec![NetworkKind::None],
                    network_read_back: true,
                    isolation: "none: a fake in the test's own process".into(),
                    extend: false,
                    shares: computer_providers::ShareWay::Bind,
                },
                computers: Mutex::new(BTreeMap::new()),
                calls: Mutex::new(Vec::new()),
                rules: Mutex::new(Vec::new()),
                programs: Mutex::new(Vec::new()),
                breaks: Mutex::new(Breaks::default()),
                next: AtomicU64::new(1),
            }),
        };
        p.program(
            |a| script_has(a, "cat /proc/self/status"),
            |_| Ok(ok_stdout(&proc_status("0000000000000000"))),
        );
        p.program(
            |a| script_has(a, "for p in /proc/[0-9]*"),
            |_| Ok(ok_stdout("")),
        );
        p.program(|a| script_has(a, "setsid "), |_| Ok(ok_stdout("started\n")));
        p
    }

    /// Decide the next `times` calls of `op` (all of them with None) by
    /// `script`. The newest rule for an op decides first.
    pub fn on(&self, op: Op, script: Script, times: Option<usize>) -> &Self {
        lock(&self.inner.rules).insert(0, Rule { op, script, times });
        self
    }

    /// What exec.run answers for an argv `matches` takes (the newest
    /// program that matches decides).
    pub fn program(
        &self,
        matches: impl Fn(&[String]) -> bool + Send + Sync + 'static,
        run: impl Fn(&ExecParams) -> std::result::Result<ExecResult, RpcError> + Send + Sync + 'static,
    ) -> &Self {
        lock(&self.inner.programs).insert(
            0,
            Program {
                matches: Box::new(matches),
                run: Arc::new(run),
            },
        );
        self
    }

    /// Break promises (see [`Breaks`]).
    pub fn set_breaks(&self, breaks: Breaks) -> &Self {
        *lock(&self.inner.breaks) = breaks;
        self
    }

    /// A computer dies: its connections close and it lists not running.
    pub fn kill(&self, id: &str) {
        if let Some(c) = lock(&self.inner.computers).get(id) {
            c.alive.store(false, Ordering::SeqCst);
        }
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<FakeCall> {
        lock(&self.inner.calls).clone()
    }

    /// How many calls of `op` so far.
    pub fn count(&self, op: Op) -> usize {
        lock(&self.inner.calls)
            .iter()
            .filter(|c| c.op == op)
            .count()
    }

    /// The ids of the computers that exist now (running or stopped).
    pub fn computers(&self) -> Vec<String> {
        lock(&self.inner.computers).keys().cloned().collect()
    }

    fn record(&self, op: Op, on: Option<&str>) {
        lock(&self.inner.calls).push(FakeCall {
            op,
            on: on.map(String::from),
        });
    }

    fn rule(&self, op: Op) -> Option<Script> {
        let mut rules = lock(&self.inner.rules);
        let i = rules.iter().position(|r| r.op == op)?;
        let script = rules[i].script.clone();
        if let Some(n) = rules[i].times.as_mut() {
            *n = n.saturating_sub(1);
            if *n == 0 {
                rules.remove(i);
            }
        }
        Some(script)
    }

    /// Apply the script for `op`: Ok(true) when create's answer is lost.
    async fn scripted(&self, op: Op, cancel: &CancellationToken) -> Result<bool> {
        self.apply(self.rule(op), cancel).await
    }

    async fn apply(&self, rule: Option<Script>, cancel: &CancellationToken) -> Result<bool> {
        match rule {
            None => Ok(false),
            Some(Script::Fail(e)) => Err(e),
            Some(Script::Delay(d)) => {
                tokio::time::sleep(d).await;
                Ok(false)
            }
            Some(Script::Hang) => {
                cancel.cancelled().await;
                Err(ProviderError::new(
                    ErrorCode::Aborted,
                    "the call was cancelled (it hung)",
                ))
            }
            Some(Script::Lost) => Ok(true),
            Some(Script::Stale(_)) => Ok(false),
        }
    }

    fn running(&self, c: &FakeComputer) -> bool {
        let ignore = lock(&self.inner.breaks).ignore_deadline;
        c.alive.load(Ordering::SeqCst) && (ignore || now_ms() < c.deadline_ms)
    }

    fn shown(&self, c: &FakeComputer) -> ComputerRef {
        let mut r = lock(&c.r).clone();
        r.running = self.running(c);
        let breaks = lock(&self.inner.breaks);
        if let Some(k) = &breaks.forget_label {
            r.labels.remove(k);
        }
        if let Some(i) = &breaks.image_reads {
            r.image = Some(i.clone());
        }
        r
    }

    fn find(&self, id: &str) -> Result<Arc<FakeComputer>> {
        lock(&self.inner.computers)
            .get(id)
            .cloned()
            .ok_or_else(|| ProviderError::not_found(format!("no fake computer {id}")))
    }

    fn hello(&self) -> HelloResult {
        HelloResult {
            version: lock(&self.inner.breaks)
                .version
                .clone()
                .unwrap_or_else(|| computerd::VERSION.to_string()),
            os: "linux".into(),
            kind: MachineKind::Linux,
            arch: "amd64".into(),
            groups: self.inner.caps.groups.clone(),
            bytes_frames: None,
        }
    }
}

#[async_trait::async_trait]
impl Provider for FakeProvider {
    fn id(&self) -> &'static str {
        "fake"
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.caps.clone()
    }

    fn check(&self, spec: &ComputerSpec) -> Result<()> {
        check_lifetime(spec.lifetime_ms, &self.inner.caps)?;
        check_labels(&spec.labels)?;
        if !self.inner.caps.networks.contains(&spec.network.kind()) {
            return Err(ProviderError::unsupported(format!(
                "the fake offers network none only, not {}",
                spec.network.kind()
            ))
            .with_field("network"));
        }
        // An image is only a name it reads back (its computers run nothing).
        for (field, set) in [
            ("user", spec.user.is_some()),
            ("mount", spec.mount.is_some()),
            ("sizes", spec.sizes != Default::default()),
        ] {
            if set {
                return Err(ProviderError::unsupported(format!(
                    "the fake takes no {field}; leave it out"
                ))
                .with_field(field));
            }
        }
        Ok(())
    }

    async fn create(&self, spec: &ComputerSpec, cancel: &CancellationToken) -> Result<Created> {
        self.record(Op::Create, None);
        self.check(spec)?;
        let lost = self.scripted(Op::Create, cancel).await?;
        let n = self.inner.next.fetch_add(1, Ordering::SeqCst);
        let id = format!("fake-{n:04}");
        let now = now_ms();
        let deadline_ms = now + spec.lifetime_ms as i64;
        let c = Arc::new(FakeComputer {
            r: Mutex::new(ComputerRef {
                provider: "fake".into(),
                id: id.clone(),
                labels: spec.labels.clone(),
                created_at: rfc3339(now),
                deadline: rfc3339(deadline_ms),
                running: true,
                paused: false,
                home: Some("/home/fake".into()),
                user: Some("1000:1000".into()),
                // It bounds no size (its check refuses sizes).
                sizes: None,
                image: spec.image.clone(),
                network: None,
            }),
            network: spec.network.kind(),
            deadline_ms,
            alive: AtomicBool::new(true),
            files: Mutex::new(BTreeMap::new()),
        });
        lock(&self.inner.computers).insert(id.clone(), Arc::clone(&c));
        if lost {
            return Err(ProviderError::new(
                ErrorCode::Unreachable,
                "the fake lost create's answer (the computer exists)",
            ));
        }
        Ok(Created {
            computer: self.shown(&c),
            network: Some(NetworkReadBack {
                kind: c.network,
                detail: "the fake's word".into(),
            }),
            notes: vec![],
        })
    }

    async fn attach(&self, by: &AttachBy, cancel: &CancellationToken) -> Result<ComputerRef> {
        self.record(
            Op::Attach,
            match by {
                AttachBy::Id(id) => Some(id.as_str()),
                AttachBy::Labels(_) => None,
            },
        );
        self.scripted(Op::Attach, cancel).await?;
        match by {
            AttachBy::Id(id) => Ok(self.shown(&*self.find(id)?)),
            AttachBy::Labels(labels) => {
                let found = self.list(labels, cancel).await?;
                match found.as_slice() {
                    [one] => Ok(one.clone()),
                    [] => Err(ProviderError::not_found(
                        "no fake computer carries those labels",
                    )),
                    many => Err(ProviderError::invalid(
                        "labels",
                        format!("{} fake computers carry those labels", many.len()),
                    )),
                }
            }
        }
    }

    async fn list(&self, labels: &Labels, cancel: &CancellationToken) -> Result<Vec<ComputerRef>> {
        self.record(Op::List, None);
        let rule = self.rule(Op::List);
        let stale = match rule {
            Some(Script::Stale(d)) => Some(d),
            _ => None,
        };
        self.apply(rule, cancel).await?;
        let all: Vec<Arc<FakeComputer>> = lock(&self.inner.computers).values().cloned().collect();
        let found = all
            .iter()
            .map(|c| self.shown(c))
            .filter(|r| labels.iter().all(|(k, v)| r.labels.get(k) == Some(v)))
            .collect();
        if let Some(d) = stale {
            tokio::time::sleep(d).await;
        }
        Ok(found)
    }

    async fn network(
        &self,
        computer: &ComputerRef,
        policy: Option<&NetworkPolicy>,
        cancel: &CancellationToken,
    ) -> Result<NetworkReadBack> {
        self.record(Op::Network, Some(&computer.id));
        self.scripted(Op::Network, cancel).await?;
        let c = self.find(&computer.id)?;
        if let Some(p) = policy
            && p.kind() != c.network
        {
            return Err(
                ProviderError::unsupported("a fake computer's network cannot change")
                    .with_field("network"),
            );
        }
        let kind = lock(&self.inner.breaks).network_reads.unwrap_or(c.network);
        Ok(NetworkReadBack {
            kind,
            detail: "the fake's word".into(),
        })
    }

    async fn connect(
        &self,
        computer: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<Connection> {
        self.record(Op::Connect, Some(&computer.id));
        self.scripted(Op::Connect, cancel).await?;
        let c = self.find(&computer.id)?;
        if !self.running(&c) {
            return Err(ProviderError::gone(format!(
                "the fake computer {} has ended",
                computer.id
            )));
        }
        Ok(Connection {
            client: Arc::new(FakeClient {
                provider: self.clone(),
                computer: c,
                closed: AtomicBool::new(false),
            }),
            hello: self.hello(),
        })
    }

    async fn release(
        &self,
        computer: &ComputerRef,
        how: Release,
        cancel: &CancellationToken,
    ) -> Result<()> {
        self.record(Op::Release, Some(&computer.id));
        self.scripted(Op::Release, cancel).await?;
        let c = self.find(&computer.id)?;
        c.alive.store(false, Ordering::SeqCst);
        if how == Release::Delete {
            lock(&self.inner.computers).remove(&computer.id);
        }
        Ok(())
    }

    async fn sweep(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        self.record(Op::Sweep, None);
        self.scripted(Op::Sweep, cancel).await?;
        Ok(Vec::new())
    }
}

/// A connection to a fake computer.
struct FakeClient {
    provider: FakeProvider,
    computer: Arc<FakeComputer>,
    closed: AtomicBool,
}

fn decode<T: serde::de::DeserializeOwned>(params: Value) -> std::result::Result<T, RpcError> {
    serde_json::from_value(params).map_err(|e| RpcError::invalid(format!("bad params: {e}")))
}

fn encode<T: serde::Serialize>(v: &T) -> std::result::Result<Value, RpcError> {
    serde_json::to_value(v).map_err(|e| RpcError::invalid(format!("could not encode: {e}")))
}

impl FakeClient {
    fn answer(&self, method: &str, params: Value) -> std::result::Result<Value, RpcError> {
        let files = &self.computer.files;
        match method {
            "hello" => encode(&self.provider.hello()),
            "ping" => Ok(json!({})),
            "exec.run" => {
                let p: ExecParams = decode(params)?;
                let program = lock(&self.provider.inner.programs)
                    .iter()
                    .find(|pr| (pr.matches)(&p.argv))
                    .map(|pr| Arc::clone(&pr.run));
                match program {
                    Some(run) => encode(&run(&p)?),
                    None => encode(&ExecResult {
                        exit_code: Some(127),
                        stderr: Bytes64(
                            format!("fake: no program for {:?}\n", p.argv).into_bytes(),
                        ),
                        ..Default::default()
                    }),
                }
            }
            "files.write" => {
                let p: protocol::FilesWriteParams = decode(params)?;
                let mut f = lock(files);
                let data = f.entry(p.path.clone()).or_default();
                if p.append == Some(true) {
                    data.extend_from_slice(&p.data);
                } else {
                    let at = p.offset.unwrap_or(0) as usize;
                    if at == 0 {
                        data.clear();
                    }
                    data.truncate(at);
                    data.extend_from_slice(&p.data);
                }
                if let Some(n) = lock(&self.provider.inner.breaks).keep_bytes {
                    data.truncate(n);
                }
                encode(&protocol::FilesWriteResult {
                    size: data.len() as u64,
                })
            }
            "files.read" => {
                let p: protocol::FilesReadParams = decode(params)?;
                let f = lock(files);
                let data = f
                    .get(&p.path)
                    .ok_or_else(|| RpcError::not_found(format!("{}: no such file", p.path)))?;
                let at = (p.offset.unwrap_or(0) as usize).min(data.len());
                let end = (at
                    + p.length
                        .unwrap_or(u64::MAX)
                        .min(protocol::limits::MAX_CHUNK_BYTES) as usize)
                    .min(data.len());
                encode(&protocol::FilesReadResult {
                    data: Bytes64(data[at..end].to_vec()),
                    eof: end == data.len(),
                    size: data.len() as u64,
                })
            }
            "files.stat" => {
                let p: protocol::FilesStatParams = decode(params)?;
                let f = lock(files);
                let size = f
                    .get(&p.path)
                    .map(|d| d.len() as u64)
                    .ok_or_else(|| RpcError::not_found(format!("{}: no such file", p.path)))?;
                encode(&FileStat {
                    file_type: FileType::File,
                    size,
                    mode: 0o644,
                    mtime_ms: 0,
                    uid: 1000,
                    gid: 1000,
                    target: None,
                })
            }
            "files.mkdir" => Ok(json!({})),
            "process.start" => {
                let n = self.provider.inner.next.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"id": format!("p{n}"), "pid": n}))
            }
            "process.wait" => Ok(json!({"running": false, "exitCode": 0})),
            _ if lock(&self.provider.inner.breaks).answer_unknown
                && protocol::Method::from_name(method).is_none() =>
            {
                Ok(json!({}))
            }
            other => match protocol::Method::from_name(other) {
                Some(_) => Err(RpcError::unsupported(format!(
                    "the fake does not answer {other}"
                ))),
                None => Err(RpcError::not_found(format!("unknown method {other:?}"))
                    .with_code(protocol::METHOD_NOT_FOUND)),
            },
        }
    }
}

impl ComputerClient for FakeClient {
    fn call_value<'a>(
        &'a self,
        method: &'a str,
        params: Value,
    ) -> futures::future::BoxFuture<'a, computerd::client::Result<Value>> {
        Box::pin(async move {
            if self.is_closed() {
                return Err(ClientError::Closed("the fake computer is gone".into()));
            }
            lock(&self.provider.inner.calls).push(FakeCall {
                op: Op::Exec,
                on: Some(method.to_string()),
            });
            // A protocol call scripted to fail, wait or hang (a hang ends
            // when the caller drops the call).
            match self.provider.rule(Op::Exec) {
                Some(Script::Fail(e)) => {
                    return Err(ClientError::Rpc(RpcError::new(
                        protocol::ErrorKind::Unsupported,
                        e.message,
                    )));
                }
                Some(Script::Delay(d)) => tokio::time::sleep(d).await,
                Some(Script::Hang) => std::future::pending::<()>().await,
                Some(Script::Lost | Script::Stale(_)) | None => {}
            }
            if self.is_closed() {
                return Err(ClientError::Closed("the fake computer is gone".into()));
            }
            self.answer(method, params).map_err(ClientError::Rpc)
        })
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst) || !self.provider.running(&self.computer)
    }
}
