//! Daytona's client and bridge against the fake Daytona
//! (`computer_fakes::daytona`), with a scripted machine that runs no
//! program: its one long-lived command answers JSON-RPC lines the way
//! `computerd stdio` would, so the bridge is driven through log frames
//! cut inside markers, dropped log connections that replay from 0,
//! interleaved stderr, 429s and a canary key.

use std::io;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use computer_fakes::daytona::{Attached, FakeDaytona, Machine, Machines};
use computer_providers::daytona::api::CreateBody;
use computer_providers::daytona::bridge::{self, Command};
use computer_providers::daytona::{Daytona, Phase};
use computer_providers::vendor::Secret;
use computer_providers::{ErrorCode, Labels};
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

fn canary_key() -> String {
    format!(
        "dtn_CANARY_{}",
        computer_providers::random::random_hex(8).unwrap()
    )
}

/// A machine that runs nothing: `echo <w>` prints `<w>`, `rpc` answers
/// each JSON-RPC request line with its params (and says each on stderr),
/// files go into a map.
#[derive(Default)]
struct Scripted {
    files: Mutex<Vec<(String, Vec<u8>)>>,
}

#[async_trait::async_trait]
impl Machine for Scripted {
    async fn upload(&self, path: &str, bytes: Vec<u8>) -> io::Result<()> {
        self.files.lock().unwrap().push((path.to_string(), bytes));
        Ok(())
    }
    async fn run(&self, command: &str, _t: Duration) -> io::Result<Option<(i32, Vec<u8>)>> {
        Ok(Some(match command.strip_prefix("echo ") {
            Some(w) => (0, format!("{w}\n").into_bytes()),
            None => (127, b"sh: not found\n".to_vec()),
        }))
    }
    async fn start(&self, command: &str) -> io::Result<Attached> {
        if command != "rpc" {
            return Err(io::Error::other("not found"));
        }
        let (stdin, ours_in) = tokio::io::duplex(1 << 20);
        let (mut ours_out, stdout) = tokio::io::duplex(1 << 20);
        let (mut ours_err, stderr) = tokio::io::duplex(1 << 20);
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<i32>();
        let task = tokio::spawn(async move {
            let mut lines = BufReader::new(ours_in).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                let Ok(req) = serde_json::from_str::<Value>(&l) else {
                    continue;
                };
                if req["method"] == "exit" {
                    break;
                }
                let reply = json!({"jsonrpc": "2.0", "id": req["id"], "result": {"echo": req["params"], "bytesFrames": 1024}});
                let _ = ours_err.write_all(b"rpc: a request\n").await;
                let _ = ours_out.write_all(format!("{reply}\n").as_bytes()).await;
            }
            let _ = done_tx.send(3);
        });
        Ok(Attached {
            stdin: Box::pin(stdin),
            stdout: Box::pin(stdout),
            stderr: Box::pin(stderr),
            exit: async move { done_rx.await.unwrap_or(-1) }.boxed(),
            kill: Box::new(move || async move { task.abort() }.boxed()),
        })
    }
    async fn remove(&self) {}
}

struct ScriptedMachines;

impl Machines for ScriptedMachines {
    fn make(
        &self,
        _id: &str,
        _s: Option<&str>,
    ) -> BoxFuture<'static, io::Result<Arc<dyn Machine>>> {
        async { Ok(Arc::new(Scripted::default()) as Arc<dyn Machine>) }.boxed()
    }
}

fn body(name: &str) -> CreateBody {
    let mut labels = Labels::new();
    labels.insert("computer-mcp".into(), "1".into());
    CreateBody {
        name: name.into(),
        snapshot: None,
        labels,
        public: false,
        network_block_all: true,
        ttl_minutes: 10,
        auto_stop_interval: 0,
        auto_delete_interval: -1,
    }
}

/// A fake on scripted machines whose sandboxes start after `polls`
/// reads, its canary key, a client of it and a token.
async fn scripted(polls: u32) -> (FakeDaytona, String, Daytona, CancellationToken) {
    let key = canary_key();
    let fake = FakeDaytona::start(&key, Arc::new(ScriptedMachines))
        .await
        .unwrap();
    fake.start_polls(polls);
    let d = Daytona::new(Some(&fake.api_url()), Some(Secret::new(key.clone()))).unwrap();
    (fake, key, d, CancellationToken::new())
}

/// The provider on `url` with `key` and the daemon at `computerd`.
fn provider_at(
    url: &str,
    key: Option<&str>,
    computerd: &std::path::Path,
) -> computer_providers::daytona::DaytonaProvider {
    use computer_providers::Configure;
    let settings = computer_providers::daytona::DaytonaSettings {
        api_key: key.map(Secret::new),
        api_url: Some(url.to_string()),
        computerd: Some(computerd.to_path_buf()),
        ..Default::default()
    };
    computer_providers::daytona::DaytonaProvider::configure(
        settings,
        &computer_providers::HostDefaults::default(),
    )
    .unwrap()
}

/// No daemon is pushed where the provider is only asked, never made to
/// create.
const NO_DAEMON: &str = "/nonexistent/computerd";

async fn started(
    d: &Daytona,
    id: &str,
    cancel: &CancellationToken,
) -> computer_providers::daytona::Sandbox {
    for _ in 0..50 {
        let s = d.get(id, cancel).await.unwrap().unwrap();
        if s.state.as_deref() == Some("started") {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the sandbox never started");
}

#[tokio::test]
async fn the_bridge_carries_json_rpc_through_cut_frames_and_replayed_logs() {
    let (fake, key, d, cancel) = scripted(2).await;
    // Frames of 1 to 2 bytes cut every marker; the first three log
    // connections drop after 300 bytes, so what follows comes from replays.
    fake.frame_max(2);
    fake.drop_logs_after(300, 3);
    let made = d
        .create(&body("computer-0123456789ab"), &cancel)
        .await
        .unwrap();
    assert_eq!(made.phase(), Phase::Running);
    let sb = started(&d, &made.id, &cancel).await;
    let tb = Arc::new(d.toolbox(&sb).unwrap());
    tb.upload("/tmp/x", bytes::Bytes::from_static(b"\x00\x01bin"), &cancel)
        .await
        .unwrap();
    let ran = tb
        .execute("echo hi", Duration::from_secs(5), &cancel)
        .await
        .unwrap();
    assert_eq!((ran.exit_code, ran.result.as_str()), (0, "hi\n"));
    tb.session("bridge-1", &cancel).await.unwrap();
    let cid = tb.start("bridge-1", "rpc", &cancel).await.unwrap();
    let cid_copy = cid.clone();
    let stop = CancellationToken::new();
    let client = bridge::client(
        Arc::clone(&tb),
        Command {
            session: "bridge-1".into(),
            command: cid.clone(),
        },
        stop.clone(),
    );
    for i in 0..20 {
        let got = client
            .call_value("ping", json!({"n": i, "pad": "x".repeat(i * 7)}))
            .await
            .unwrap();
        // bytesFrames is taken out of every reply: no raw frame may cross.
        assert_eq!(
            got,
            json!({"echo": {"n": i, "pad": "x".repeat(i * 7)}}),
            "call {i}"
        );
    }
    client.close();
    // Its close ends the session, and so the command.
    let mut ended = false;
    for _ in 0..100 {
        if tb.exit_code("bridge-1", &cid_copy, &cancel).await.is_err() {
            ended = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ended, "the bridge's session outlived its close");
    assert!(stop.is_cancelled());
    assert!(fake.calls().iter().all(|c| !c.contains(&key)));
}

#[tokio::test]
async fn input_after_the_command_ends_is_refused_and_the_stream_ends() {
    let (_fake, _key, d, cancel) = scripted(0).await;
    let made = d
        .create(&body("computer-aaaaaaaaaaaa"), &cancel)
        .await
        .unwrap();
    let sb = started(&d, &made.id, &cancel).await;
    let tb = Arc::new(d.toolbox(&sb).unwrap());
    tb.session("s", &cancel).await.unwrap();
    let cid = tb.start("s", "rpc", &cancel).await.unwrap();
    tb.input("s", &cid, r#"{"jsonrpc":"2.0","method":"exit"}"#, &cancel)
        .await
        .unwrap();
    let mut refused = None;
    for _ in 0..100 {
        match tb.input("s", &cid, "{}", &cancel).await {
            Ok(()) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let e = refused.expect("input after exit was taken");
    assert_eq!(e.code, ErrorCode::Refused, "{}", e.message);
    assert!(e.message.contains("HTTP 410"), "{}", e.message);
    let stop = CancellationToken::new();
    let client = bridge::client(
        Arc::clone(&tb),
        Command {
            session: "s".into(),
            command: cid,
        },
        stop.clone(),
    );
    // The log closes about 1 s after the exit: the client sees its end.
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        while !client.is_closed() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(closed.is_ok(), "the bridge outlived its command");
    assert!(stop.is_cancelled());
}

#[tokio::test]
async fn listing_pages_lag_deletes_take_polls_and_429s_are_waited_out() {
    let (fake, _key, d, cancel) = scripted(1).await;
    fake.delete_polls(3);
    for i in 0..105 {
        d.create(&body(&format!("computer-{i:012x}")), &cancel)
            .await
            .unwrap();
    }
    let mut ours = Labels::new();
    ours.insert("computer-mcp".into(), "1".into());
    let all = d.list(&ours, &cancel).await.unwrap();
    assert_eq!(all.len(), 105, "every page is read");
    assert_eq!(
        fake.calls().iter().filter(|c| *c == "GET /sandbox").count(),
        2
    );
    let mut other = Labels::new();
    other.insert("computer-mcp".into(), "2".into());
    assert!(d.list(&other, &cancel).await.unwrap().is_empty());

    fake.list_lag(2);
    let id = all[0].id.clone();
    d.delete(&id, &cancel).await.unwrap().unwrap();
    let mut reads = Vec::new();
    while let Some(s) = d.get(&id, &cancel).await.unwrap() {
        reads.push(s.state.unwrap_or_default());
    }
    assert_eq!(reads, ["destroying"; 3]);
    // The listing trails by two listing calls (one list of two pages).
    let shown = |l: Vec<computer_providers::daytona::Sandbox>| l.iter().any(|s| s.id == id);
    assert!(shown(d.list(&ours, &cancel).await.unwrap()));
    assert!(!shown(d.list(&ours, &cancel).await.unwrap()));

    fake.limit(2, 1);
    let t = std::time::Instant::now();
    assert!(d.get(&all[1].id, &cancel).await.unwrap().is_some());
    assert!(
        t.elapsed() >= Duration::from_secs(2),
        "each 429 waited its Retry-After"
    );
    assert_eq!(fake.early_retries(), 0);

    let wrong = Daytona::new(Some(&fake.api_url()), Some(Secret::new("dtn_wrong"))).unwrap();
    let e = wrong.get(&all[1].id, &cancel).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthorized);
    assert!(
        e.message.contains("COMPUTER_MCP_DAYTONA_API_KEY"),
        "{}",
        e.message
    );
    assert!(
        !e.message.contains("dtn_wrong") && !e.message.contains("vendor-words"),
        "{}",
        e.message
    );
}

// ---- the provider, its sandboxes' insides bounded vendor boxes ----

struct Rig {
    fake: FakeDaytona,
    key: String,
    owner: String,
    docker: bollard::Docker,
    provider: computer_providers::daytona::DaytonaProvider,
}

impl Rig {
    /// Create a computer carrying `pairs`.
    async fn create(
        &self,
        pairs: &[(&str, &str)],
    ) -> Result<computer_providers::Created, computer_providers::ProviderError> {
        use computer_providers::Provider;
        let cancel = CancellationToken::new();
        self.provider.create(&labelled(pairs), &cancel).await
    }

    /// Nothing of the rig's left: no sandbox, no box.
    async fn assert_nothing_left(&self) {
        assert_eq!(
            self.fake.names(),
            Vec::<String>::new(),
            "a sandbox was left"
        );
        let label = format!("{}={}", computer_fakes::vendor_box::LABEL, self.owner);
        // The fake removes a gone sandbox's box as it reads it gone.
        for _ in 0..50 {
            if computer_testkit::labelled_containers(&self.docker, &label)
                .await
                .is_empty()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("a vendor box was left");
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let (docker, label) = (
            self.docker.clone(),
            format!("{}={}", computer_fakes::vendor_box::LABEL, self.owner),
        );
        let _ = std::thread::spawn(move || {
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                rt.block_on(computer_testkit::remove_labelled(&docker, &label));
            }
        })
        .join();
    }
}

async fn rig(name: &str) -> Option<Rig> {
    let env = computer_testkit::docker_env().await?;
    let owner = computer_testkit::marker(name);
    let spec = computer_fakes::vendor_box::BoxSpec::new(&env.image, &owner);
    let machines = computer_fakes::daytona::BoxMachines::new(env.docker.clone(), spec);
    let key = canary_key();
    let fake = FakeDaytona::start(&key, Arc::new(machines)).await.unwrap();
    fake.start_polls(2);
    fake.delete_polls(2);
    fake.list_lag(1);
    let provider = provider_at(&fake.api_url(), Some(&key), &env.computerd);
    Some(Rig {
        fake,
        key,
        owner,
        docker: env.docker,
        provider,
    })
}

fn labelled(pairs: &[(&str, &str)]) -> computer_providers::ComputerSpec {
    let mut s = computer_providers::ComputerSpec::sandbox(600_000);
    s.labels = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_computer_is_made_reached_found_and_deleted_with_nothing_left() {
    use computer_providers::{AttachBy, Provider, Release};
    let (logs, _guard) = super::support::capture();
    let Some(r) = rig("daytona-life").await else {
        return;
    };
    let cancel = CancellationToken::new();
    let made = r.create(&[("computer-mcp.session", "s1")]).await.unwrap();
    let made_network = made.network.as_ref().unwrap().detail.clone();
    let c = made.computer;
    assert_eq!(
        made.network.as_ref().map(|n| n.kind),
        Some(computer_providers::NetworkKind::None)
    );
    assert_eq!(c.image.as_deref(), Some("default"));
    assert!(c.running);
    let names = r.fake.names();
    assert_eq!(names.len(), 1);
    let held = r.fake.labels_of(&names[0]).unwrap();
    assert_eq!(held.get("computer-mcp.computer"), Some(&json!("1")));
    assert_eq!(held.get("computer-mcp.image"), Some(&json!("default")));
    assert_eq!(held.get("computer-mcp.deadline"), Some(&json!(c.deadline)));

    let conn = r.provider.connect(&c, &cancel).await.unwrap();
    let ran = super::support::run(
        &conn.client,
        "id -u; id -g; cat /proc/self/status | grep -c '^CapEff:.0000000000000000'",
    )
    .await;
    assert_eq!(super::support::text(&ran), "2510\n2510\n1\n");
    conn.client.close();

    let by_name = r
        .provider
        .attach(&AttachBy::Id(names[0].clone()), &cancel)
        .await
        .unwrap();
    assert_eq!(by_name.id, c.id);
    let mut wanted = Labels::new();
    wanted.insert("computer-mcp.session".into(), "s1".into());
    let by_labels = r
        .provider
        .attach(&AttachBy::Labels(wanted.clone()), &cancel)
        .await
        .unwrap();
    assert_eq!(by_labels.id, c.id);
    // Network none was read from inside at create and at each attach.
    let inside = "read from inside: none of 5 answered, lo alone";
    assert!(
        made_network.ends_with(inside),
        "create's network: {made_network}"
    );
    for c in [&by_name, &by_labels] {
        let read = format!("{:?}", c.network);
        assert!(read.contains(inside), "attach's network: {read}");
    }
    assert!(!logs.text().contains(&r.key));
    assert_eq!(r.provider.list(&wanted, &cancel).await.unwrap().len(), 1);
    wanted.insert("computer-mcp.session".into(), "s2".into());
    assert!(r.provider.list(&wanted, &cancel).await.unwrap().is_empty());

    r.provider
        .release(&c, Release::Delete, &cancel)
        .await
        .unwrap();
    assert!(
        r.provider
            .list(&Labels::new(), &cancel)
            .await
            .unwrap()
            .is_empty()
    );
    // Released twice is released.
    r.provider
        .release(&c, Release::Delete, &cancel)
        .await
        .unwrap();
    assert_eq!(
        r.fake
            .calls()
            .iter()
            .filter(|c| *c == "POST /sandbox")
            .count(),
        1
    );
    r.assert_nothing_left().await;
    assert!(r.fake.calls().iter().all(|c| !c.contains(&r.key)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_create_answer_is_found_by_its_name_and_deleted_and_a_429_is_waited_out() {
    use computer_providers::Provider;
    let Some(r) = rig("daytona-lost").await else {
        return;
    };
    let cancel = CancellationToken::new();
    r.fake.lose_next_create();
    let e = r.create(&[]).await.unwrap_err();
    assert!(e.message.contains("was deleted"), "{}", e.message);
    assert!(
        !e.message.contains(&r.key) && !e.message.contains("vendor-words"),
        "{}",
        e.message
    );
    assert_eq!(
        r.fake
            .calls()
            .iter()
            .filter(|c| *c == "POST /sandbox")
            .count(),
        1,
        "a create is never sent again"
    );
    r.assert_nothing_left().await;

    r.fake.limit(1, 1);
    let made = r.provider.create(&labelled(&[]), &cancel).await.unwrap();
    assert_eq!(r.fake.early_retries(), 0);
    r.provider
        .release(&made.computer, computer_providers::Release::Delete, &cancel)
        .await
        .unwrap();
    r.assert_nothing_left().await;
}

#[tokio::test]
async fn bad_input_is_refused_in_words_before_any_request() {
    use computer_providers::{NetworkPolicy, Provider};
    let fake = FakeDaytona::start("k", Arc::new(ScriptedMachines))
        .await
        .unwrap();
    let make = |key: Option<&str>| provider_at(&fake.api_url(), key, NO_DAEMON.as_ref());
    let cancel = CancellationToken::new();
    let e = make(None)
        .create(&labelled(&[]), &cancel)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthorized);
    assert!(
        e.message.contains("COMPUTER_MCP_DAYTONA_API_KEY"),
        "{}",
        e.message
    );
    let p = make(Some("k"));
    let field = |spec: computer_providers::ComputerSpec| p.check(&spec).unwrap_err().field;
    let long = computer_providers::ComputerSpec::sandbox(31 * 24 * 3600 * 1000);
    assert_eq!(field(long), Some("lifetime".into()));
    let mut open = labelled(&[]);
    open.network = NetworkPolicy::Open;
    assert_eq!(field(open), Some("network".into()));
    let mut allow = labelled(&[]);
    allow.network = NetworkPolicy::Allow(vec!["example.com".into()]);
    assert_eq!(field(allow), Some("network".into()));
    let many: Vec<(String, String)> = (0..31).map(|i| (format!("l{i}"), "v".into())).collect();
    let mut too_many = labelled(&[]);
    too_many.labels = many.into_iter().collect();
    let e = p.check(&too_many).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("labels"), "{}", e.message);
    let mut sized = labelled(&[]);
    sized.sizes.cpus = Some(2.0);
    assert_eq!(field(sized), Some("sizes".into()));
    assert_eq!(
        field(labelled(&[("computer-mcp.image", "x")])),
        Some("labels".into())
    );
    let e = p
        .network(
            &serde_json::from_value(json!({"provider": "daytona", "id": "x", "labels": {},
                "createdAt": "", "deadline": "", "running": true}))
            .unwrap(),
            Some(&NetworkPolicy::Open),
            &cancel,
        )
        .await
        .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("network"));
    assert!(
        fake.calls().is_empty(),
        "a refusal sent a request: {:?}",
        fake.calls()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_computer_is_listed_stopped_once_daytona_reads_it_so() {
    use computer_providers::{Provider, Release};
    let Some(r) = rig("daytona-stop").await else {
        return;
    };
    let cancel = CancellationToken::new();
    let c = r.create(&[]).await.unwrap().computer;
    r.fake.delete_polls(3);
    r.provider
        .release(&c, Release::Stop, &cancel)
        .await
        .unwrap();
    let listed = r.provider.list(&Labels::new(), &cancel).await.unwrap();
    assert_eq!(
        listed.iter().map(|c| c.running).collect::<Vec<_>>(),
        [false]
    );
    let e = r.provider.connect(&c, &cancel).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Gone, "{}", e.message);
    // Stopped twice is stopped, and a stopped computer is deleted.
    r.provider
        .release(&c, Release::Stop, &cancel)
        .await
        .unwrap();
    r.provider
        .release(&c, Release::Delete, &cancel)
        .await
        .unwrap();
    r.assert_nothing_left().await;
}

#[tokio::test]
async fn test_connection_reads_once_and_names_the_key_setting_when_refused() {
    use computer_providers::Provider;
    let (fake, key, _d, cancel) = scripted(0).await;
    let with = |k: &str| provider_at(&fake.api_url(), Some(k), NO_DAEMON.as_ref());
    let ok = with(&key).test_connection(&cancel).await.unwrap();
    assert_eq!(ok.found, Ok("reached; 0 computers of this provider".into()));
    assert_eq!(fake.calls(), ["GET /sandbox"]);
    let bad = with("dtn_wrong").test_connection(&cancel).await.unwrap();
    let (what, next) = bad.found.unwrap_err();
    assert!(
        what.starts_with("unauthorized: ") && !what.contains("dtn_wrong"),
        "{what}"
    );
    assert_eq!(
        next,
        "give a valid key: --daytona-api-key (COMPUTER_MCP_DAYTONA_API_KEY)"
    );
}

#[tokio::test]
async fn a_computer_made_open_is_narrowed_to_none_and_read_back() {
    use computer_providers::{NetworkKind, NetworkPolicy, Provider};
    let (fake, key, d, cancel) = scripted(0).await;
    // A computer of ours made before the loopback block, with no block.
    let mut open = body("computer-0000000000aa");
    open.network_block_all = false;
    let deadline =
        computer_providers::vendor::plus_secs(&computer_providers::vendor::now_rfc3339(), 600);
    open.labels.insert("computer-mcp.deadline".into(), deadline);
    open.labels
        .insert("computer-mcp.computer".into(), "1".into());
    let made = d.create(&open, &cancel).await.unwrap();
    let p = provider_at(&fake.api_url(), Some(&key), NO_DAEMON.as_ref());
    let c = p
        .attach(&computer_providers::AttachBy::Id(made.id.clone()), &cancel)
        .await
        .unwrap();
    assert_eq!(
        p.network(&c, None, &cancel).await.unwrap().kind,
        NetworkKind::Open
    );
    let now = p
        .network(&c, Some(&NetworkPolicy::None), &cancel)
        .await
        .unwrap();
    assert_eq!(now.kind, NetworkKind::None, "{now}");
    assert_eq!(
        fake.calls()
            .iter()
            .filter(|c| *c == "POST /sandbox/{id}/network-settings")
            .count(),
        1
    );
    assert_eq!(
        p.network(&c, None, &cancel).await.unwrap().kind,
        NetworkKind::None
    );
    // One Daytona stops on its own after 15 idle minutes is not as this
    // provider makes them: refused, and left as it is.
    let mut idle = open.clone();
    idle.name = "computer-0000000000bb".into();
    idle.auto_stop_interval = 15;
    let other = d.create(&idle, &cancel).await.unwrap();
    let e = p
        .attach(&computer_providers::AttachBy::Id(other.id.clone()), &cancel)
        .await
        .unwrap_err();
    assert!(
        e.message.contains("autoStopInterval Some(15), not 0"),
        "{}",
        e.message
    );
    assert_eq!(fake.names().len(), 2);
}

#[tokio::test]
async fn the_sweep_deletes_computers_past_their_deadline_and_keeps_the_rest() {
    use computer_providers::Provider;
    let (fake, key, d, cancel) = scripted(0).await;
    fake.delete_polls(2);
    let ours = |name: &str, deadline: &str| {
        let mut b = body(name);
        b.labels.insert("computer-mcp.computer".into(), "1".into());
        b.labels
            .insert("computer-mcp.deadline".into(), deadline.into());
        b
    };
    let later =
        computer_providers::vendor::plus_secs(&computer_providers::vendor::now_rfc3339(), 600);
    let old = d
        .create(
            &ours("computer-00000000000a", "2020-01-01T00:00:00Z"),
            &cancel,
        )
        .await
        .unwrap();
    let live = d
        .create(&ours("computer-00000000000b", &later), &cancel)
        .await
        .unwrap();
    // Not ours (no computer label): never touched.
    d.create(&body("computer-00000000000c"), &cancel)
        .await
        .unwrap();
    let p = provider_at(&fake.api_url(), Some(&key), NO_DAEMON.as_ref());
    assert_eq!(p.sweep(&cancel).await.unwrap(), vec![old.id.clone()]);
    // The sweep's release waited the delete out.
    assert_eq!(
        fake.names(),
        ["computer-00000000000b", "computer-00000000000c"]
    );
    assert!(d.get(&old.id, &cancel).await.unwrap().is_none());
    assert!(d.get(&live.id, &cancel).await.unwrap().is_some());
    assert_eq!(p.sweep(&cancel).await.unwrap(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_listing_and_a_slow_delete_are_waited_out_through_the_provider() {
    use computer_providers::{Provider, Release};
    let Some(r) = rig("daytona-lag").await else {
        return;
    };
    let cancel = CancellationToken::new();
    r.fake.list_lag(3);
    r.fake.delete_polls(3);
    let c = r
        .create(&[("computer-mcp.name", "lag")])
        .await
        .unwrap()
        .computer;
    // Create returned once the listing showed it steadily.
    let listed = r.provider.list(&Labels::new(), &cancel).await.unwrap();
    assert_eq!(
        listed.iter().map(|l| l.id.as_str()).collect::<Vec<_>>(),
        [c.id.as_str()]
    );
    // exec.run with no cwd runs in the computer's home, /work.
    let conn = r.provider.connect(&c, &cancel).await.unwrap();
    let ran = super::support::run(&conn.client, "pwd; echo $HOME").await;
    assert_eq!(super::support::text(&ran), "/work\n/work\n");
    conn.client.close();
    r.provider
        .release(&c, Release::Delete, &cancel)
        .await
        .unwrap();
    // Release returned once Daytona read it gone, by GET and by listing.
    assert_eq!(
        r.fake.names(),
        Vec::<String>::new(),
        "release returned early"
    );
    assert!(
        r.provider
            .list(&Labels::new(), &cancel)
            .await
            .unwrap()
            .is_empty()
    );
    r.assert_nothing_left().await;
}
