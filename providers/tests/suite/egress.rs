//! Network allowlists on the local provider, against test hosts of the
//! test's own (see `support/net.rs`): a computer reaches its listed names
//! over HTTP and TLS through its egress proxy, with curl, Python's urllib
//! and pip using only the proxy variables; everything else is refused in
//! its own words; a program that ignores the proxy reaches nothing; the
//! proxy ends with the computer and nothing of it is left after release.
//! Needs root (namespaces, veth pairs, cgroups), curl, openssl and
//! python3 with pip, as CI installs them.

use super::support::{EGRESS, eval, navigate_loaded, net, page};

use std::collections::BTreeMap;
use std::time::Duration;

use computer_providers::local::{LocalOptions, LocalProvider};
use computer_providers::{ComputerSpec, ErrorCode, NetworkKind, NetworkPolicy, Provider, Release};
use computer_testkit::{computerd_bin, need, on_path};
use computerd::client::ComputerExt;
use computerd::protocol::ExecParams;
use tokio_util::sync::CancellationToken;

/// What each test here runs against: the test hosts on subnet `n` and a
/// local provider whose egress proxies ask their DNS, its state in a
/// directory of its own, and the egress turn held (see `support::EGRESS`).
struct Rig {
    _turn: tokio::sync::RwLockReadGuard<'static, ()>,
    net: net::Net,
    state: tempfile::TempDir,
    p: LocalProvider,
    cancel: CancellationToken,
}

impl Rig {
    /// The rig, with a provider that makes browsers when `browser`; None
    /// (skipped in words) where these tests cannot run.
    async fn up(n: u8, browser: bool) -> Option<Rig> {
        let turn = EGRESS.read().await;
        if !can_run() || (browser && !computer_testkit::need_chromium()) {
            return None;
        }
        let net = net::Net::up(n).await.unwrap();
        let state = tempfile::tempdir().unwrap();
        let opts = LocalOptions {
            max_lifetime_ms: 3_600_000,
            egress_resolvers: vec![net.dns],
            browser,
            ..LocalOptions::new(state.path().to_path_buf(), computerd_bin()?)
        };
        Some(Rig {
            _turn: turn,
            net,
            state,
            p: LocalProvider::new(opts).unwrap(),
            cancel: CancellationToken::new(),
        })
    }
}

fn can_run() -> bool {
    need(
        "root",
        nix::unistd::geteuid().is_root(),
        "the egress tests make network namespaces and veth pairs, which needs root",
    ) && need(
        "root",
        computerd_bin().is_some(),
        "the computerd binary is not built (run cargo test --workspace)",
    ) && need(
        "root",
        ["curl", "openssl", "python3", "ip"]
            .iter()
            .all(|t| on_path(t).is_some()),
        "curl, openssl, python3 and ip (iproute2) must be installed",
    )
}

struct Out {
    #[allow(dead_code)]
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn sh(
    p: &LocalProvider,
    c: &computer_providers::ComputerRef,
    script: &str,
    env: &[(&str, &str)],
) -> Out {
    let cancel = CancellationToken::new();
    let conn = p.connect(c, &cancel).await.unwrap();
    let env: BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let r = conn
        .client
        .call_typed(&ExecParams {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            env: Some(env),
            timeout_ms: Some(120_000),
            ..Default::default()
        })
        .await
        .unwrap();
    conn.client.close();
    Out {
        code: r.exit_code,
        stdout: String::from_utf8_lossy(&r.stdout.0).into_owned(),
        stderr: String::from_utf8_lossy(&r.stderr.0).into_owned(),
    }
}

const LIST: &[&str] = &[
    "good.eg.test",
    "*.wild.eg.test",
    "rebind.eg.test",
    "private.eg.test",
    "loop.eg.test",
    "meta.eg.test",
    "mapped.eg.test",
    "self.eg.test",
    "mixed.eg.test",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowlisted_computer_reaches_its_names_and_nothing_else() {
    let Some(rig) = Rig::up(41, false).await else {
        return;
    };
    let Rig { net, p, cancel, .. } = &rig;
    let pip = std::process::Command::new("python3")
        .args(["-m", "pip", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    need(
        "root",
        pip,
        "python3's pip is not installed (apt-get install python3-pip)",
    );
    let mut list: Vec<String> = LIST.iter().map(|s| s.to_string()).collect();
    list.push(format!("{}/32", net.b));
    let mut spec = ComputerSpec::sandbox(600_000);
    spec.network = NetworkPolicy::Allow(list.clone());
    let made = p.create(&spec, cancel).await.unwrap();
    let c = made.computer.clone();
    let rb = made.network.clone().unwrap();
    assert_eq!(rb.kind, NetworkKind::Allow, "{rb}");
    assert!(
        rb.detail.starts_with("allow good.eg.test, loop.eg.test, mapped.eg.test, meta.eg.test, mixed.eg.test, private.eg.test, rebind.eg.test, self.eg.test, *.wild.eg.test, 11.0.41.3/32: a network namespace of its own"),
        "{rb}"
    );
    assert_eq!(p.network(&c, None, cancel).await.unwrap(), rb);
    let e = p
        .network(
            &c,
            Some(&NetworkPolicy::Allow(vec!["good.eg.test".into()])),
            cancel,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unsupported, "{e:?}");

    let cert = net.cert.clone();
    let env = [("CERT", cert.as_str())];
    let (a, b, me) = (net.a, net.b, net.host_ip);

    // The proxy variables, as every program gets them.
    let o = sh(p, &c, "env | grep -i _proxy= | sort", &[]).await;
    assert_eq!(
        o.stdout,
        "ALL_PROXY=http://127.0.0.1:3128\nHTTPS_PROXY=http://127.0.0.1:3128\nHTTP_PROXY=http://127.0.0.1:3128\nNO_PROXY=localhost,127.0.0.1,::1\nall_proxy=http://127.0.0.1:3128\nhttp_proxy=http://127.0.0.1:3128\nhttps_proxy=http://127.0.0.1:3128\nno_proxy=localhost,127.0.0.1,::1\n"
    );

    // Allowed: plain HTTP, TLS through CONNECT, a wildcard, a listed CIDR,
    // SOCKS5 CONNECT.
    let o = sh(p, &c, "printf '%s' \"$CERT\" > /tmp/c.pem; curl -sS http://good.eg.test/; curl -sS --cacert /tmp/c.pem https://good.eg.test/ | grep -q s_server && echo tls-ok; curl -sS http://files.wild.eg.test/; curl -sS --cacert /tmp/c.pem https://files.wild.eg.test/ | grep -q s_server && echo tls-ok; curl -sS http://11.0.41.3/; curl -sS --socks5-hostname 127.0.0.1:3128 http://good.eg.test/", &env).await;
    assert_eq!(
        o.stdout,
        format!(
            "served-by={a} host=good.eg.test path=/\ntls-ok\nserved-by={a} host=files.wild.eg.test path=/\ntls-ok\nserved-by={b} host=11.0.41.3 path=/\nserved-by={a} host=good.eg.test path=/\n"
        ),
        "{}",
        o.stderr
    );

    // Python's urllib, over HTTP and TLS, with nothing but the variables.
    let py = "import ssl, urllib.request\nprint(urllib.request.urlopen('http://good.eg.test/py').read().decode(), end='')\nctx = ssl.create_default_context(cafile='/tmp/c.pem')\nprint(urllib.request.urlopen('https://good.eg.test/', context=ctx).status)\n";
    let o = sh(p, &c, "python3 -c \"$PY\"", &[("PY", py)]).await;
    assert_eq!(
        o.stdout,
        format!("served-by={a} host=good.eg.test path=/py\n200\n"),
        "{}",
        o.stderr
    );

    // pip, from a test index.
    if pip {
        let o = sh(p, &c, "python3 -m pip download --disable-pip-version-check --no-deps --index-url http://good.eg.test/simple/ --trusted-host good.eg.test -d /tmp/dl egpkg >/dev/null 2>/tmp/pip.err; echo $?; ls /tmp/dl; cat /tmp/pip.err | tail -3", &[]).await;
        assert_eq!(
            o.stdout.lines().take(2).collect::<Vec<_>>(),
            ["0", "egpkg-1.0-py3-none-any.whl"],
            "{}",
            o.stdout
        );
    }

    // Refused, each in its own words.
    let cases = [
        ("http://unlisted.eg.test/", "403 unlisted.eg.test is not on this box's network list: ".to_string()),
        (&*format!("http://{a}/"), format!("403 {a} is not on this box's network list (an address is reached only inside a listed CIDR of its family)")),
        ("http://good.eg.test:22/", "403 good.eg.test:22 is refused: a network list reaches ports 80 and 443 only".into()),
        ("http://private.eg.test/", "403 private.eg.test resolves to 10.1.2.3, a private address, which no network list can allow".into()),
        ("http://loop.eg.test/", "403 loop.eg.test resolves to 127.0.0.1, a loopback address".into()),
        ("http://meta.eg.test/", "403 meta.eg.test resolves to 169.254.169.254, a metadata address".into()),
        ("http://mapped.eg.test/", "403 mapped.eg.test resolves to ::ffff:127.0.0.1, a loopback address".into()),
        ("http://self.eg.test/", format!("403 self.eg.test resolves to {me}, a this-host address")),
        ("http://mixed.eg.test/", "403 mixed.eg.test resolves to 10.0.0.1, a private address".into()),
    ];
    for (url, words) in &cases {
        let o = sh(p, &c, &format!("curl -sS '{url}'"), &[]).await;
        assert!(
            o.stdout.starts_with(words.as_str()),
            "{url}: {:?} {}",
            o.stdout,
            o.stderr
        );
    }
    // No answer reached a server but the listed ones.
    let o = sh(
        p,
        &c,
        "curl -sS -H 'Host: unlisted.eg.test' http://good.eg.test/",
        &[],
    )
    .await;
    assert!(o.stdout.starts_with("403 the Host header names unlisted.eg.test, another host than the request line's good.eg.test"), "{}", o.stdout);
    // A redirect reaches the program as sent, never followed.
    let o = sh(
        p,
        &c,
        "curl -sS -i http://good.eg.test/redirect | head -2 | tr -d '\\r'",
        &[],
    )
    .await;
    assert_eq!(
        o.stdout,
        "HTTP/1.1 302 Found\nLocation: http://unlisted.eg.test/\n"
    );
    // A refused CONNECT: 403.
    let o = sh(
        p,
        &c,
        "curl -sS -o /dev/null -w '%{http_connect}' https://unlisted.eg.test/; echo",
        &[],
    )
    .await;
    assert_eq!(o.stdout.trim(), "403", "{}", o.stderr);

    // The checked address is the one dialled: rebind.eg.test answers the
    // test host once and loopback after; the first request reaches the
    // test host having asked once, the next is refused.
    let o = sh(p, &c, "curl -sS http://rebind.eg.test/", &[]).await;
    assert_eq!(
        o.stdout,
        format!("served-by={a} host=rebind.eg.test path=/\n")
    );
    assert_eq!(net.asked("rebind.eg.test"), 1);
    let o = sh(p, &c, "curl -sS http://rebind.eg.test/", &[]).await;
    assert!(
        o.stdout
            .starts_with("403 rebind.eg.test resolves to 127.0.0.1, a loopback address"),
        "{}",
        o.stdout
    );
    // A name off the list never reached the resolver.
    assert_eq!(net.asked("unlisted.eg.test"), 0);

    // SOCKS BIND and UDP ASSOCIATE, in their reply and words.
    let socks = "import socket\nfor cmd in (2, 3):\n    s = socket.create_connection(('127.0.0.1', 3128))\n    s.sendall(b'\\x05\\x01\\x00')\n    assert s.recv(2) == b'\\x05\\x00'\n    s.sendall(bytes([5, cmd, 0, 1, 11, 0, 41, 2, 0, 80]))\n    r = b''\n    while True:\n        d = s.recv(4096)\n        if not d: break\n        r += d\n    print(r[1], r[10:].decode().strip())\n";
    let o = sh(p, &c, "python3 -c \"$PY\"", &[("PY", socks)]).await;
    assert_eq!(
        o.stdout,
        "7 SOCKS BIND is refused: this proxy carries outgoing TCP connections (CONNECT) to listed hosts only\n7 SOCKS UDP ASSOCIATE is refused: this proxy carries outgoing TCP connections (CONNECT) to listed hosts only; UDP reaches nothing\n",
        "{}",
        o.stderr
    );

    // A refused SOCKS5 CONNECT gets its reply code (a SOCKS reply carries
    // no words): 2, not allowed by ruleset, for a name off the list, a
    // port and an address no list allows; 4, host unreachable, for a
    // listed name with no address. The proxy's log names the rule and
    // what to do.
    let o = sh(p, &c, "for u in http://unlisted.eg.test/ http://good.eg.test:22/ http://private.eg.test/ http://nx.wild.eg.test/; do curl -sS --socks5-hostname 127.0.0.1:3128 $u; echo $?; done", &[]).await;
    assert_eq!(o.stdout, "97\n97\n97\n97\n", "{}", o.stderr);
    assert_eq!(
        o.stderr,
        "curl: (97) Can't complete SOCKS5 connection to unlisted.eg.test. (2)\ncurl: (97) Can't complete SOCKS5 connection to good.eg.test. (2)\ncurl: (97) Can't complete SOCKS5 connection to private.eg.test. (2)\ncurl: (97) Can't complete SOCKS5 connection to nx.wild.eg.test. (4)\n"
    );
    let log = std::fs::read_to_string(
        rig.state
            .path()
            .join("computers")
            .join(&c.id)
            .join("egress.log"),
    )
    .unwrap();
    for line in [
        "egress refuse host=unlisted.eg.test port=80 address=- class=- rule=not-listed socks=2 fix=ask for a computer whose network allow list names it (network: {allow: [...]}; --network allow:NAME)",
        "egress refuse host=good.eg.test port=22 address=- class=- rule=port socks=2 fix=none: a network list reaches ports 80 and 443 only",
        "egress refuse host=private.eg.test port=80 address=10.1.2.3 class=private rule=address socks=2 fix=none: a listed name reaches public addresses only",
        "egress refuse host=nx.wild.eg.test port=80 address=- class=- rule=lookup socks=4 fix=check the name: its resolver gave no address",
    ] {
        assert!(log.contains(line), "{line}\nnot in the log:\n{log}");
    }

    // A program that ignores the proxy reaches nothing: no route.
    let direct = format!(
        "import socket\nfor t in (('{a}', 80), ('{a}', 53)):\n    try:\n        socket.create_connection(t, timeout=5)\n        print('reached', t)\n    except OSError as e:\n        print(e.errno)\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ntry:\n    s.sendto(b'x', ('{a}', 53))\n    print('sent')\nexcept OSError as e:\n    print(e.errno)\n"
    );
    let o = sh(p, &c, "python3 -c \"$PY\"; curl -sS --noproxy '*' --max-time 5 http://good.eg.test/; echo curl=$?", &[("PY", &direct)]).await;
    assert_eq!(o.stdout, "101\n101\n101\ncurl=6\n", "{}", o.stderr);

    p.release(&c, Release::Delete, cancel).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_ends_with_the_computer_and_nothing_is_left() {
    let Some(rig) = Rig::up(42, false).await else {
        return;
    };
    let Rig { net, p, cancel, .. } = &rig;

    // A bad list is refused before anything is made, naming the entry.
    let mut spec = ComputerSpec::sandbox(8_000);
    spec.network = NetworkPolicy::Allow(vec!["good.eg.test".into(), "10.0.0.0/8".into()]);
    let e = p.create(&spec, cancel).await.unwrap_err();
    assert_eq!(e.field.as_deref(), Some("network"));
    assert_eq!(
        e.message,
        "network allow entry \"10.0.0.0/8\": the range holds private addresses (10.0.0.0/8), which are always refused"
    );

    spec.network = NetworkPolicy::Allow(vec!["good.eg.test".into()]);
    let made = p.create(&spec, cancel).await.unwrap();
    let id = made.computer.id.clone();
    let dir = rig.state.path().join("computers").join(&id);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
    let pid = meta["egress"]["process"]["pid"].as_i64().unwrap() as i32;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    // Its own unprivileged user, not the computer's, no capability.
    let uid_line = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .unwrap()
        .to_string();
    let uid: u32 = uid_line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert_ne!(uid, 0);
    assert_ne!(
        Some(uid.to_string()),
        made.computer
            .user
            .clone()
            .and_then(|u| u.split(':').next().map(String::from))
    );
    assert!(status.contains("CapEff:\t0000000000000000"), "{status}");
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    assert!(cgroup.contains(&format!("{id}-egress")), "{cgroup}");
    let o = sh(p, &made.computer, "curl -sS http://good.eg.test/", &[]).await;
    assert_eq!(
        o.stdout,
        format!("served-by={} host=good.eg.test path=/\n", net.a)
    );

    // The computer ends at its deadline (8 s), and its proxy with it.
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z"))
    {
        assert!(
            std::time::Instant::now() < until,
            "the proxy outlived its computer"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    p.release(&made.computer, Release::Delete, cancel)
        .await
        .unwrap();
    assert!(!dir.exists(), "its state is gone");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "its proxy is reaped"
    );
    // No cgroup of it is left in any hierarchy.
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    for line in mounts.lines().filter(|l| l.contains(" - cgroup")) {
        let point = line.split_whitespace().nth(4).unwrap();
        let found = std::process::Command::new("find")
            .args([point, "-maxdepth", "3", "-name", &format!("{id}*")])
            .output()
            .unwrap();
        assert!(
            found.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&found.stdout)
        );
    }
}

/// Plain HTTP carries one request per connection: a second one pipelined
/// behind a listed name's (with a Host of its own), or smuggled in a body
/// that Content-Length and Transfer-Encoding disagree on, never reaches
/// the listed name's address; the message with both is refused in words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipelined_or_smuggled_request_never_reaches_an_unlisted_host() {
    let Some(rig) = Rig::up(46, false).await else {
        return;
    };
    let Rig { net, p, cancel, .. } = &rig;
    let mut spec = ComputerSpec::sandbox(600_000);
    spec.network = NetworkPolicy::Allow(vec!["good.eg.test".into()]);
    let c = p.create(&spec, cancel).await.unwrap().computer;
    // One connection to the proxy, the bytes sent at once, read to its end.
    let send = "import socket, sys\ns = socket.create_connection(('127.0.0.1', 3128))\ns.sendall(sys.argv[1].encode().decode('unicode_escape').encode('latin-1'))\nout = b''\nwhile True:\n    d = s.recv(65536)\n    if not d: break\n    out += d\nprint(out.decode('latin-1'), end='')\n";
    let run = |req: &'static str| {
        let (p, c) = (&p, &c);
        async move {
            sh(
                p,
                c,
                "python3 -c \"$PY\" \"$REQ\"",
                &[("PY", send), ("REQ", req)],
            )
            .await
            .stdout
        }
    };
    let pipelined = run("GET http://good.eg.test/one HTTP/1.1\\r\\nHost: good.eg.test\\r\\n\\r\\nGET http://unlisted.eg.test/two HTTP/1.1\\r\\nHost: unlisted.eg.test\\r\\n\\r\\n").await;
    assert!(
        pipelined.ends_with(&format!(
            "\r\n\r\nserved-by={} host=good.eg.test path=/one\n",
            net.a
        )),
        "{pipelined}"
    );
    // A body of its length, then a pipelined request: the body goes, the
    // request does not.
    let with_body = run("POST http://good.eg.test/three HTTP/1.1\\r\\nHost: good.eg.test\\r\\nContent-Length: 5\\r\\n\\r\\nhelloGET http://unlisted.eg.test/four HTTP/1.1\\r\\nHost: unlisted.eg.test\\r\\n\\r\\n").await;
    assert!(with_body.contains("path=/three"), "{with_body}");
    let chunked = run("POST http://good.eg.test/five HTTP/1.1\\r\\nHost: good.eg.test\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n5\\r\\nhello\\r\\n0\\r\\n\\r\\nGET http://unlisted.eg.test/six HTTP/1.1\\r\\nHost: unlisted.eg.test\\r\\n\\r\\n").await;
    assert!(chunked.contains("path=/five"), "{chunked}");
    // What the test host heard, each connection once it ended: the three
    // answered requests whole, and nothing else.
    let until = std::time::Instant::now() + Duration::from_secs(60);
    let heard = loop {
        let heard = net.heard.lock().unwrap().clone();
        if heard.len() >= 3 {
            break heard;
        }
        assert!(std::time::Instant::now() < until, "{heard:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut heard: Vec<String> = heard
        .iter()
        .map(|h| {
            h.lines()
                .filter(|l| {
                    !l.is_empty() && !l.starts_with("Host:") && !l.starts_with("Connection:")
                })
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    heard.sort();
    assert_eq!(
        heard,
        [
            "GET /one HTTP/1.1",
            "POST /five HTTP/1.1|Transfer-Encoding: chunked|5|hello|0",
            "POST /three HTTP/1.1|Content-Length: 5|hello",
        ]
    );
    let smuggled = run("POST http://good.eg.test/seven HTTP/1.1\\r\\nHost: good.eg.test\\r\\nContent-Length: 4\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\nGET http://unlisted.eg.test/eight HTTP/1.1\\r\\nHost: unlisted.eg.test\\r\\n\\r\\n").await;
    assert!(
        smuggled.starts_with("HTTP/1.1 400 Bad Request\r\n")
            && smuggled.ends_with("\r\n\r\n400 the request has both Content-Length and Transfer-Encoding, which RFC 9112 refuses (a body two ways long): send one of them\n"),
        "{smuggled}"
    );
    // Refused before any host was reached: the host heard nothing more.
    assert_eq!(net.heard.lock().unwrap().len(), 3);
    p.release(&c, Release::Delete, cancel).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_reaches_every_public_host_and_still_no_private_one() {
    let Some(rig) = Rig::up(44, false).await else {
        return;
    };
    let Rig { net, p, cancel, .. } = &rig;
    let mut spec = ComputerSpec::sandbox(600_000);
    // What `--network public` asks for.
    spec.network = NetworkPolicy::Allow(vec!["*".into()]);
    let made = p.create(&spec, cancel).await.unwrap();
    let rb = made.network.clone().unwrap();
    assert!(rb.detail.starts_with("allow *: "), "{rb}");
    let a = net.a;
    let o = sh(
        p,
        &made.computer,
        &format!("curl -sS http://unlisted.eg.test/; curl -sS http://{a}/; curl -sS http://private.eg.test/; curl -sS http://10.0.0.1/; curl -sS http://self.eg.test/; curl -sS http://good.eg.test:8080/"),
        &[],
    )
    .await;
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!("served-by={a} host=unlisted.eg.test path=/"),
        "{}",
        o.stdout
    );
    assert_eq!(lines[1], format!("served-by={a} host={a} path=/"));
    assert!(
        lines[2].starts_with("403 private.eg.test resolves to 10.1.2.3, a private address"),
        "{}",
        lines[2]
    );
    assert!(
        lines[3].starts_with("403 10.0.0.1 is a private address, which no network list can allow"),
        "{}",
        lines[3]
    );
    assert!(lines[4].contains("a this-host address"), "{}", lines[4]);
    assert!(
        lines[5].starts_with(
            "403 good.eg.test:8080 is refused: a network list reaches ports 80 and 443 only"
        ),
        "{}",
        lines[5]
    );
    p.release(&made.computer, Release::Delete, cancel)
        .await
        .unwrap();
}

/// A page's text, once it has loaded (a new page of `c`, navigated to `url`).
async fn browse(c: &std::sync::Arc<dyn computerd::client::ComputerClient>, url: &str) -> String {
    let session = page(c).await;
    navigate_loaded(c, &session, url).await;
    eval(c, &session, "document.body ? document.body.innerText : ''")
        .await
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowlisted_browser_reaches_its_names_through_the_proxy_and_nothing_else() {
    let Some(rig) = Rig::up(45, true).await else {
        return;
    };
    let Rig { net, p, cancel, .. } = &rig;
    let mut spec = ComputerSpec::sandbox(600_000);
    spec.kind = computerd::protocol::SettingKind::Browser;
    spec.network = NetworkPolicy::Allow(vec!["good.eg.test".into()]);
    let made = p.create(&spec, cancel).await.unwrap();
    let conn = p.connect(&made.computer, cancel).await.unwrap();
    let c = conn.client.clone();

    let listed = browse(&c, "http://good.eg.test/from-the-browser").await;
    assert_eq!(
        listed.trim(),
        format!(
            "served-by={} host=good.eg.test path=/from-the-browser",
            net.a
        ),
        "{listed}"
    );
    // A name off the list, and the test host by its address: refused by
    // the proxy, so the test host serves neither page. (The host's request
    // counter is no witness: the browser may still ask the listed name for
    // its favicon.)
    for url in ["http://unlisted.eg.test/", &format!("http://{}/", net.a)] {
        let text = browse(&c, url).await;
        assert!(!text.contains("served-by"), "{url}: {text}");
    }
    conn.client.close();
    p.release(&made.computer, Release::Delete, cancel)
        .await
        .unwrap();
}
