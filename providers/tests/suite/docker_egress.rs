//! Network allowlists on the Docker provider, against test hosts of the
//! test's own (see `support/net.rs`: a network namespace joined to this
//! one by a veth pair, 11.0.<n>.0/24 routed to it alone, with its own DNS
//! server for `eg.test`). The proxy container is on Docker's default
//! bridge, which this machine routes (and masquerades) to the test's veth
//! like to any other interface; the computer is on network mode none. A
//! computer reaches its listed names through its proxy and nothing else;
//! the proxy's hardening is read back by inspect; nothing of it is left
//! after release; a proxy stopped or given another list reads back as
//! other and attach refuses the computer; parts left with no computer are
//! swept. Needs root (veth pairs), a Docker engine, the test image and the
//! static daemon (as the tests of `docker.rs`), and ip (iproute2) and
//! openssl. The tests run one at a time: a test host's address is this
//! machine's own, which every proxy must then refuse
//! (`support::EGRESS`).

use super::support::{EGRESS, SWEEPS, net, remove_by_force};

use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, InspectContainerOptions, StopContainerOptionsBuilder,
};
use computer_providers::docker::egress::{self, EgressPlan};
use computer_providers::docker::{DockerOptions, DockerProvider, ImageSource};
use computer_providers::{
    AttachBy, ComputerRef, ComputerSpec, ErrorCode, Labels, NetworkKind, NetworkPolicy, Provider,
    ProviderError, Release, label,
};
use computer_testkit::{
    DockerEnv, docker_env, labelled_containers, labelled_volumes, need, on_path, or_skip,
    remove_labelled,
};
use computerd::client::ComputerExt;
use computerd::protocol::ExecParams;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const TEST_LABEL: &str = "computer-mcp.test";

struct Env {
    p: DockerProvider,
    docker: Docker,
    net: net::Net,
    test: String,
    _cache: tempfile::TempDir,
}

/// The provider, the engine and the test hosts, or None (a skip, in
/// words) where these tests cannot run.
async fn env(test: &str, n: u8) -> Option<Env> {
    if !need(
        "docker",
        nix::unistd::geteuid().is_root() && ["ip", "openssl"].iter().all(|t| on_path(t).is_some()),
        "the Docker egress tests make a network namespace and a veth pair (root, ip) and a TLS test host (openssl)",
    ) {
        return None;
    }
    let DockerEnv {
        docker,
        image,
        computerd,
    } = docker_env().await?;
    let net = net::Net::up(n).await.unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut opts = DockerOptions::new(computerd, cache.path().join("cache"));
    opts.image = Some(ImageSource::Name(image));
    opts.egress_resolvers = vec![net.dns];
    opts.max_lifetime_ms = 3_600_000;
    let e = Env {
        p: DockerProvider::new(opts).unwrap(),
        docker,
        net,
        test: test.into(),
        _cache: cache,
    };
    e.clean().await;
    Some(e)
}

impl Env {
    /// What network and attach answer on a computer whose proxy is not as
    /// it was made: network refuses.
    async fn refusals(
        &self,
        c: &ComputerRef,
        cancel: &CancellationToken,
    ) -> (ProviderError, ProviderError) {
        let network = self.p.network(c, None, cancel).await.unwrap_err();
        assert_eq!(network.code, ErrorCode::Refused, "{network:?}");
        let attach = self
            .p
            .attach(&AttachBy::Id(c.id.clone()), cancel)
            .await
            .unwrap_err();
        (network, attach)
    }

    fn spec(&self, lifetime_ms: u64, allow: &[&str]) -> ComputerSpec {
        let mut s = ComputerSpec::sandbox(lifetime_ms);
        s.labels.insert(TEST_LABEL.into(), self.test.clone());
        s.network = NetworkPolicy::Allow(allow.iter().map(|a| a.to_string()).collect());
        s
    }

    fn label(&self) -> String {
        format!("{TEST_LABEL}={}", self.test)
    }

    /// The containers and volumes of this test, by name.
    async fn left(&self) -> (Vec<String>, Vec<String>) {
        let mut c: Vec<String> = labelled_containers(&self.docker, &self.label())
            .await
            .into_iter()
            .flat_map(|c| c.names.unwrap_or_default())
            .map(|n| n.trim_start_matches('/').to_string())
            .collect();
        let v = labelled_volumes(&self.docker, &self.label()).await;
        c.sort();
        (c, v)
    }

    async fn clean(&self) {
        remove_labelled(&self.docker, &self.label()).await;
    }

    async fn inspect(&self, name: &str) -> Value {
        serde_json::to_value(
            self.docker
                .inspect_container(name, None::<InspectContainerOptions>)
                .await
                .unwrap(),
        )
        .unwrap()
    }

    /// A bash script in the computer (the test image has bash, not curl):
    /// its stdout with CRs dropped.
    async fn bash(&self, c: &ComputerRef, script: &str) -> String {
        let cancel = CancellationToken::new();
        let conn = self.p.connect(c, &cancel).await.unwrap();
        let r = conn
            .client
            .call_typed(&ExecParams {
                argv: vec!["bash".into(), "-c".into(), format!("{HELPERS}\n{script}")],
                timeout_ms: Some(60_000),
                ..Default::default()
            })
            .await
            .unwrap();
        conn.client.close();
        String::from_utf8_lossy(&r.stdout.0).replace('\r', "")
            + &String::from_utf8_lossy(&r.stderr.0)
    }
}

/// `get URL HOST`: a plain-HTTP request through the proxy (init's
/// 127.0.0.1:3128); `tunnel HOST:PORT`: a CONNECT, its status line, then
/// on port 80 a request through the tunnel.
const HELPERS: &str = r#"
get() {
  exec 3<>/dev/tcp/127.0.0.1/3128 || return
  printf 'GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$1" "$2" >&3
  cat <&3
  exec 3<&-
}
tunnel() {
  exec 3<>/dev/tcp/127.0.0.1/3128 || return
  printf 'CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n' "$1" "$1" >&3
  IFS= read -r status <&3
  echo "${status%$'\r'}"
  while IFS= read -r l <&3 && [ -n "${l%$'\r'}" ]; do :; done
  case "$1" in *:80)
    printf 'GET /tunnelled HTTP/1.1\r\nHost: good.eg.test\r\nConnection: close\r\n\r\n' >&3
    cat <&3 | tail -n 1 ;;
  esac
  exec 3<&-
}
"#;

/// The body of an HTTP response (after the blank line).
fn body(resp: &str) -> &str {
    resp.split_once("\n\n").map(|(_, b)| b).unwrap_or(resp)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_allowlisted_computer_reaches_its_names_through_its_hardened_proxy_and_nothing_else()
 {
    let _one = EGRESS.write().await;
    let e = or_skip!(env("docker-egress-reach", 51).await);
    let cancel = CancellationToken::new();
    let (a, b, me) = (e.net.a, e.net.b, e.net.host_ip);
    let b_cidr = format!("{b}/32");
    let spec = e.spec(
        600_000,
        &[
            "good.eg.test",
            "*.wild.eg.test",
            "private.eg.test",
            "self.eg.test",
            &b_cidr,
        ],
    );
    let made = e.p.create(&spec, &cancel).await.unwrap();
    let c = made.computer.clone();
    let rb = made.network.clone().unwrap();
    assert_eq!(rb.kind, NetworkKind::Allow, "{rb}");
    let proxy = egress::name_of(&c.id);
    assert_eq!(
        rb.detail,
        format!(
            "allow good.eg.test, private.eg.test, self.eg.test, *.wild.eg.test, {b}/32: docker network mode none (only lo inside, no route out), whose one way out is its egress proxy {proxy} on Docker's default bridge, read back holding that list (ports 80 and 443; private, loopback, link-local, metadata and this Docker host's addresses always refused)"
        )
    );
    assert_eq!(e.p.network(&c, None, &cancel).await.unwrap(), rb);
    // The same list in another order is the computer's; another is not.
    let same = NetworkPolicy::Allow(vec![
        b_cidr.clone(),
        "self.eg.test".into(),
        "*.wild.eg.test".into(),
        "private.eg.test".into(),
        "good.eg.test".into(),
    ]);
    assert_eq!(e.p.network(&c, Some(&same), &cancel).await.unwrap(), rb);
    let err =
        e.p.network(
            &c,
            Some(&NetworkPolicy::Allow(vec!["good.eg.test".into()])),
            &cancel,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Unsupported, "{err:?}");
    let err =
        e.p.network(&c, Some(&NetworkPolicy::Open), &cancel)
            .await
            .unwrap_err();
    assert_eq!(err.code, ErrorCode::Unsupported, "{err:?}");

    // Every program gets the proxy variables.
    let o = e.bash(&c, "env | grep -i _proxy= | sort").await;
    assert_eq!(
        o,
        "ALL_PROXY=http://127.0.0.1:3128\nHTTPS_PROXY=http://127.0.0.1:3128\nHTTP_PROXY=http://127.0.0.1:3128\nNO_PROXY=localhost,127.0.0.1,::1\nall_proxy=http://127.0.0.1:3128\nhttp_proxy=http://127.0.0.1:3128\nhttps_proxy=http://127.0.0.1:3128\nno_proxy=localhost,127.0.0.1,::1\n"
    );

    // Allowed: a name, a wildcard, a listed CIDR, a CONNECT tunnel (on 80,
    // carrying a request; on 443, to the TLS host).
    let o = e
        .bash(
            &c,
            &format!(
                "get http://good.eg.test/x good.eg.test | tail -n 1; get http://files.wild.eg.test/ files.wild.eg.test | tail -n 1; get http://{b}/ {b} | tail -n 1; tunnel good.eg.test:80; tunnel good.eg.test:443 | cut -c1-12"
            ),
        )
        .await;
    assert_eq!(
        o,
        format!(
            "served-by={a} host=good.eg.test path=/x\nserved-by={a} host=files.wild.eg.test path=/\nserved-by={b} host={b} path=/\nHTTP/1.1 200 Connection established\nserved-by={a} host=good.eg.test path=/tunnelled\nHTTP/1.1 200\n"
        ),
    );

    // Refused, each in its own words: a name off the list (never looked
    // up), an address outside the CIDRs, port 22, a private answer, this
    // Docker host's own address (the test veth's end, which the proxy
    // knows only because the provider told it).
    let cases = [
        (
            "http://unlisted.eg.test/",
            "unlisted.eg.test",
            "403 unlisted.eg.test is not on this box's network list: ".to_string(),
        ),
        (
            &*format!("http://{a}/"),
            &*a.to_string(),
            format!("403 {a} is not on this box's network list"),
        ),
        (
            "http://good.eg.test:22/",
            "good.eg.test:22",
            "403 good.eg.test:22 is refused: a network list reaches ports 80 and 443 only".into(),
        ),
        (
            "http://private.eg.test/",
            "private.eg.test",
            "403 private.eg.test resolves to 10.1.2.3, a private address".into(),
        ),
        (
            "http://self.eg.test/",
            "self.eg.test",
            format!("403 self.eg.test resolves to {me}, a this-host address"),
        ),
    ];
    for (url, host, words) in &cases {
        let o = e.bash(&c, &format!("get '{url}' '{host}'")).await;
        assert!(o.starts_with("HTTP/1.1 403"), "{url}: {o}");
        assert!(body(&o).starts_with(words.as_str()), "{url}: {o}");
    }
    assert_eq!(e.net.asked("unlisted.eg.test"), 0);
    // A program that ignores the proxy reaches nothing: no route.
    let o = e
        .bash(
            &c,
            &format!(
                "(exec 3<>/dev/tcp/{a}/80) 2>&1 | sed 's/.*: //'; (exec 3<>/dev/tcp/{me}/80) 2>&1 | sed 's/.*: //'"
            ),
        )
        .await;
    // (bash says it twice for each: the connect, then the redirection.)
    assert_eq!(o, "Network is unreachable\n".repeat(4));

    // The proxy container as create makes it, read back by inspect.
    let v = e.inspect(&proxy).await;
    let hc = &v["HostConfig"];
    assert_eq!(hc["ReadonlyRootfs"], true);
    assert_eq!(hc["CapDrop"], serde_json::json!(["ALL"]));
    assert_eq!(hc["CapAdd"], Value::Null);
    assert_eq!(hc["Privileged"], false);
    assert_eq!(hc["SecurityOpt"], serde_json::json!(["no-new-privileges"]));
    assert_eq!(hc["NetworkMode"], "bridge");
    assert!(
        hc["PortBindings"].is_null() || hc["PortBindings"] == serde_json::json!({}),
        "{}",
        hc["PortBindings"]
    );
    assert_eq!(hc["PublishAllPorts"], false);
    assert_eq!(
        (
            &hc["CpuQuota"],
            &hc["CpuPeriod"],
            &hc["Memory"],
            &hc["MemorySwap"],
            &hc["PidsLimit"]
        ),
        (
            &50_000.into(),
            &100_000.into(),
            &268435456.into(),
            &268435456.into(),
            &64.into()
        )
    );
    assert_eq!(
        hc["Ulimits"],
        serde_json::json!([{"Name": "nofile", "Soft": 1024, "Hard": 1024}])
    );
    assert_eq!(
        hc["LogConfig"],
        serde_json::json!({"Type": "json-file", "Config": {"max-file": "2", "max-size": "1m"}})
    );
    assert_eq!(hc["IpcMode"], "private");
    assert_eq!(hc["CgroupnsMode"], "private");
    assert_eq!(
        v["Config"]["User"],
        format!(
            "{}:{}",
            egress::UID,
            c.user.as_deref().unwrap().split(':').nth(1).unwrap()
        )
    );
    assert_eq!(
        v["NetworkSettings"]["Networks"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["bridge"]
    );
    let labels = &v["Config"]["Labels"];
    assert_eq!(labels[egress::LABEL], c.id.as_str());
    assert_eq!(labels[label::DEADLINE], c.deadline.as_str());
    assert_eq!(labels[label::COMPUTER], Value::Null);
    let cmd: Vec<String> = serde_json::from_value(v["Config"]["Cmd"].clone()).unwrap();
    assert!(
        cmd.windows(2)
            .any(|w| w[0] == "--host-address" && w[1] == me.to_string()),
        "{cmd:?}"
    );
    // The computer: network mode none, the socket volume read-only, init
    // relaying to it.
    let cv = e.inspect(&c.id).await;
    assert_eq!(cv["HostConfig"]["NetworkMode"], "none");
    let cmd: Vec<String> = serde_json::from_value(cv["Config"]["Cmd"].clone()).unwrap();
    assert_eq!(cmd[cmd.len() - 2..], ["--egress", egress::SOCKET]);

    // Listed as one computer; its parts are no computers of their own.
    let labels = Labels::from([(TEST_LABEL.to_string(), e.test.clone())]);
    let listed = e.p.list(&labels, &cancel).await.unwrap();
    assert_eq!(
        listed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        [c.id.as_str()]
    );
    // Create, list and attach each show the list as read back from the
    // proxy, as network does.
    let read = Some(computer_providers::NetworkRead::Policy(rb.clone()));
    assert_eq!(c.network, read);
    assert_eq!(listed[0].network, read);
    assert_eq!(
        e.left().await,
        (vec![c.id.clone(), proxy.clone()], vec![proxy.clone()])
    );
    // Attach takes it as it is.
    let at =
        e.p.attach(&AttachBy::Id(c.id.clone()), &cancel)
            .await
            .unwrap();
    assert_eq!(at.id, c.id);
    assert_eq!(at.network, read);

    e.p.release(&c, Release::Delete, &cancel).await.unwrap();
    assert_eq!(e.left().await, (vec![], vec![]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_or_changed_proxy_reads_back_as_other_and_attach_refuses_it() {
    let _one = EGRESS.write().await;
    let e = or_skip!(env("docker-egress-drift", 52).await);
    let cancel = CancellationToken::new();
    let spec = e.spec(600_000, &["good.eg.test"]);
    let c = e.p.create(&spec, &cancel).await.unwrap().computer;
    let proxy = egress::name_of(&c.id);
    let reach = "get http://good.eg.test/ good.eg.test | tail -n 1";
    assert_eq!(
        e.bash(&c, reach).await,
        format!("served-by={} host=good.eg.test path=/\n", e.net.a)
    );

    // Stopped: the computer reaches nothing, reads back other, and attach
    // refuses it (and leaves it as it is).
    e.docker
        .stop_container(
            &proxy,
            Some(StopContainerOptionsBuilder::new().t(1).build()),
        )
        .await
        .unwrap();
    let (err, attach) = e.refusals(&c, &cancel).await;
    assert!(
        err.message.starts_with(&format!(
            "the Docker computer {} has network allow, but its egress proxy is not running (it is exited): the computer reaches nothing",
            c.id
        )),
        "{}",
        err.message
    );
    assert_eq!(attach.code, ErrorCode::Refused, "{attach:?}");
    assert!(
        attach.message.contains("was not attached") && attach.message.contains("is not running"),
        "{}",
        attach.message
    );
    // List shows it too: another network, in the read-back's words.
    let labels = Labels::from([(TEST_LABEL.to_string(), e.test.clone())]);
    let listed = e.p.list(&labels, &cancel).await.unwrap();
    assert_eq!(listed.len(), 1);
    match &listed[0].network {
        Some(computer_providers::NetworkRead::Other(words)) => assert!(
            words.starts_with(&format!(
                "the Docker computer {} has network allow, but its egress proxy is not running (it is exited)",
                c.id
            )),
            "{words}"
        ),
        other => panic!("listed as {other:?}"),
    }
    // Init's relay answers 502 in words, which can be lost to a reset
    // when it closes before reading the request; either way nothing is
    // reached.
    let o = e.bash(&c, "get http://good.eg.test/ good.eg.test").await;
    assert!(
        body(&o).starts_with("502 the computer's egress proxy does not answer")
            || !o.contains("HTTP/1.1"),
        "{o}"
    );
    assert!(!o.contains("served-by"), "{o}");

    // Another proxy, as create makes one but with another list.
    let v = e.inspect(&proxy).await;
    remove_by_force(&e.docker, &proxy).await;
    let cmd: Vec<String> = serde_json::from_value(v["Config"]["Cmd"].clone()).unwrap();
    let deadline: computerd::launch::Time = c.deadline.parse().unwrap();
    let daemon = v["HostConfig"]["Mounts"][0]["Source"].as_str().unwrap();
    let mut spec_labels = Labels::new();
    spec_labels.insert(TEST_LABEL.into(), e.test.clone());
    let other = EgressPlan {
        computer: c.id.clone(),
        image: v["Config"]["Image"].as_str().unwrap().into(),
        gid: c
            .user
            .as_deref()
            .unwrap()
            .split(':')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap(),
        allow: vec!["good.eg.test".into(), "unlisted.eg.test".into()],
        deadline,
        host_addresses: cmd
            .windows(2)
            .filter(|w| w[0] == "--host-address")
            .map(|w| w[1].parse().unwrap())
            .collect(),
        resolvers: vec![e.net.dns],
        daemon: daemon.into(),
        labels: EgressPlan::labels_for(&c.id, &deadline, &spec_labels),
    };
    e.docker
        .create_container(
            Some(CreateContainerOptionsBuilder::new().name(&proxy).build()),
            other.body(),
        )
        .await
        .unwrap();
    e.docker
        .start_container(
            &proxy,
            None::<bollard::query_parameters::StartContainerOptions>,
        )
        .await
        .unwrap();
    let (err, attach) = e.refusals(&c, &cancel).await;
    assert!(
        err.message.contains(
            "holds another list (good.eg.test, unlisted.eg.test) than the computer's (good.eg.test)"
        ),
        "{}",
        err.message
    );
    assert!(
        attach.message.contains("holds another list"),
        "{}",
        attach.message
    );

    // Release removes whatever carries the computer's label.
    e.p.release(&c, Release::Delete, &cancel).await.unwrap();
    assert_eq!(e.left().await, (vec![], vec![]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_ends_at_the_deadline_and_parts_left_with_no_computer_are_swept() {
    let _one = EGRESS.write().await;
    // It sweeps: see SWEEPS.
    let _turn = SWEEPS.lock().await;
    let e = or_skip!(env("docker-egress-sweep", 53).await);
    let cancel = CancellationToken::new();

    // A bad list is refused before anything is made, naming the entry.
    let bad = e.spec(60_000, &["good.eg.test", "10.0.0.0/8"]);
    let err = e.p.create(&bad, &cancel).await.unwrap_err();
    assert_eq!(err.field.as_deref(), Some("network"));
    assert!(
        err.message
            .contains("\"10.0.0.0/8\": the range holds private"),
        "{}",
        err.message
    );
    assert_eq!(e.left().await, (vec![], vec![]));
    // A lifetime that ends before the proxy is ready fails create as a
    // timeout, in words, with nothing left and no computer run.
    let err =
        e.p.create(&e.spec(1, &["good.eg.test"]), &cancel)
            .await
            .unwrap_err();
    assert_eq!(err.code, ErrorCode::Timeout, "{err:?}");
    assert!(
        err.message
            .starts_with("its lifetime of 1 ms ended before its egress proxy was ready"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("--deadline is in the past"),
        "{}",
        err.message
    );
    assert_eq!(e.left().await, (vec![], vec![]));

    // `public`: every public name, through the same proxy.
    let spec = e.spec(20_000, &["*"]);
    let made = e.p.create(&spec, &cancel).await.unwrap();
    let c = made.computer;
    assert!(
        made.network
            .unwrap()
            .detail
            .starts_with("allow * (every public host): docker network mode none"),
    );
    let proxy = egress::name_of(&c.id);
    assert_eq!(
        e.bash(&c, "get http://good.eg.test/ good.eg.test | tail -n 1; get http://private.eg.test/ private.eg.test | tail -n 1 | cut -c1-59").await,
        format!(
            "served-by={} host=good.eg.test path=/\n403 private.eg.test resolves to 10.1.2.3, a private address\n",
            e.net.a
        )
    );

    // The computer removed by hand: its parts stay until the sweep.
    remove_by_force(&e.docker, &c.id).await;
    assert_eq!(e.left().await, (vec![proxy.clone()], vec![proxy.clone()]));
    // Within its life, with its computer gone only just now, it is kept.
    // (The sweep is the engine's: it may delete others' expired computers.)
    let swept = e.p.sweep(&cancel).await.unwrap();
    assert!(
        !swept.contains(&proxy) && !swept.contains(&c.id),
        "{swept:?}"
    );
    assert_eq!(e.left().await, (vec![proxy.clone()], vec![proxy.clone()]));

    // At the deadline the proxy ends itself.
    let deadline: computerd::launch::Time = c.deadline.parse().unwrap();
    let until = deadline.get() + Duration::from_secs(15);
    loop {
        let v = e.inspect(&proxy).await;
        if v["State"]["Running"] == false {
            assert_eq!(v["State"]["ExitCode"], 0);
            break;
        }
        assert!(
            time::OffsetDateTime::now_utc() < until,
            "the proxy still runs 15 s past its deadline"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Past its deadline, the sweep removes it and its volume, and counts
    // no computer.
    let swept = e.p.sweep(&cancel).await.unwrap();
    assert!(!swept.contains(&proxy), "{swept:?}");
    assert_eq!(e.left().await, (vec![], vec![]));
}
