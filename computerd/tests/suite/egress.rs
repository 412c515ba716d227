//! `computerd egress` alone, as any program may talk to it: what past its
//! bounds or off its list is refused with its HTTP error and words, bytes
//! that are no request never end it, and it ends itself at its deadline.
//! (The whole path, through a computer to test hosts, is the local
//! provider's `tests/egress.rs`.)

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::support::{COMPUTERD, rfc3339_in};

struct Proxy {
    child: Child,
    _dir: tempfile::TempDir,
    socket: std::path::PathBuf,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn proxy(allow: &[&str], life: Duration) -> Proxy {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("egress.sock");
    let mut cmd = Command::new(COMPUTERD);
    cmd.arg("egress");
    for a in allow {
        cmd.arg(format!("--allow={a}"));
    }
    // A resolver that answers nothing: no test here may look anything up.
    cmd.args(["--deadline", &rfc3339_in(life), "--resolver", "127.0.0.1:9"])
        .arg("--socket")
        .arg(&socket)
        .env("COMPUTERD_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while !listening(&socket) {
        assert!(Instant::now() < until, "the proxy made no socket");
        std::thread::sleep(Duration::from_millis(10));
    }
    Proxy {
        child,
        _dir: dir,
        socket,
    }
}

/// Whether the unix socket at `path` listens. Its file is there from
/// bind(2), but a connect is refused until listen(2), a moment later.
fn listening(path: &std::path::Path) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/net/unix") else {
        return false;
    };
    let path = path.to_string_lossy();
    // Num RefCount Protocol Flags Type St Inode Path: Flags 00010000 is
    // a listening socket.
    table
        .lines()
        .any(|l| l.ends_with(&*path) && l.split_whitespace().nth(3) == Some("00010000"))
}

/// Send `bytes`, read to the end (the proxy closes after a refusal).
async fn exchange(p: &Proxy, bytes: &[u8]) -> String {
    String::from_utf8_lossy(&exchange_raw(p, bytes).await).into_owned()
}

async fn exchange_raw(p: &Proxy, bytes: &[u8]) -> Vec<u8> {
    let mut s = UnixStream::connect(&p.socket).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut out))
        .await
        .expect("the proxy ended the connection")
        .unwrap();
    out
}

fn body(reply: &str) -> &str {
    reply.split("\r\n\r\n").nth(1).unwrap_or("")
}

#[tokio::test]
async fn past_its_bounds_or_off_its_list_a_request_gets_its_error_and_words() {
    let p = proxy(&["pypi.org", "93.184.215.0/24"], Duration::from_secs(120));
    let long_line = format!("GET http://pypi.org/{} HTTP/1.1\r\n\r\n", "a".repeat(9000));
    let r = exchange(&p, long_line.as_bytes()).await;
    assert!(r.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{r}");
    let big_head = format!(
        "GET http://pypi.org/ HTTP/1.1\r\n{}",
        "X-Pad: 0123456789012345678901234567890123456789\r\n".repeat(500)
    );
    let r = exchange(&p, big_head.as_bytes()).await;
    assert_eq!(body(&r), "431 the request head is over 16384 bytes\n");
    let cases: [(&[u8], &str); 7] = [
        (
            b"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
            "403 example.com is not on this box's network list: ask for a computer whose network allow list names it (network: {allow: [...]}; --network allow:NAME)\n",
        ),
        (
            b"CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n",
            "403 10.0.0.1 is not on this box's network list (an address is reached only inside a listed CIDR of its family): ask for a computer whose network allow list names it (network: {allow: [...]}; --network allow:NAME)\n",
        ),
        (
            b"CONNECT pypi.org:22 HTTP/1.1\r\n\r\n",
            "403 pypi.org:22 is refused: a network list reaches ports 80 and 443 only, and no list can allow port 22\n",
        ),
        (
            b"GET http://pypi.org/ HTTP/1.1\r\nHost: evil.com\r\n\r\n",
            "403 the Host header names evil.com, another host than the request line's pypi.org: a request reaches only the host its request line names, so send Host: pypi.org\n",
        ),
        (
            b"GET http://pypi.org/ HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
            "403 an HTTP upgrade is not carried over plain HTTP: reach the host over TLS (CONNECT, wss://, https://)\n",
        ),
        (
            b"GET https://pypi.org/ HTTP/1.1\r\n\r\n",
            "400 the scheme https is not taken: plain HTTP is http://host/path, and TLS goes through CONNECT\n",
        ),
        (
            b"GET /simple HTTP/1.1\r\n\r\n",
            "400 the target is not an absolute URI (http://host/path): this is a proxy; a TLS host is reached with CONNECT\n",
        ),
    ];
    for (req, want) in cases {
        let r = exchange(&p, req).await;
        assert_eq!(body(&r), want, "{}", String::from_utf8_lossy(req));
    }
    // A listed name whose lookup fails: refused, not crashed.
    let r = exchange(&p, b"CONNECT pypi.org:443 HTTP/1.1\r\n\r\n").await;
    assert!(
        body(&r).starts_with("502 pypi.org could not be looked up"),
        "{r}"
    );
    // SOCKS: no method it takes, then a BIND.
    assert_eq!(exchange_raw(&p, &[5, 1, 2]).await, [5, 0xff]);
    let mut s = UnixStream::connect(&p.socket).await.unwrap();
    s.write_all(&[5, 1, 0, 5, 2, 0, 1, 93, 184, 215, 14, 0, 80])
        .await
        .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    // The method chosen (no auth), then the reply: 7, command not supported.
    assert_eq!(&out[..12], [5, 0, 5, 7, 0, 1, 0, 0, 0, 0, 0, 0]);
    assert!(String::from_utf8_lossy(&out[12..]).starts_with("SOCKS BIND is refused"));
    // Bytes that are no request end that connection only.
    for junk in [
        &b"\x00\xff\xfe garbage\r\n\r\n"[..],
        b"\x05\x00",
        b"\x05\x01\x00\x05\x01\x00\x09\x00",
        b"\r\n\r\n",
    ] {
        let _ = exchange(&p, junk).await;
    }
    let r = exchange(&p, b"CONNECT pypi.org:22 HTTP/1.1\r\n\r\n").await;
    assert!(r.starts_with("HTTP/1.1 403 Forbidden"), "{r}");
}

#[test]
fn it_ends_itself_at_its_deadline_and_refuses_a_bad_list_in_words() {
    let mut p = proxy(&["pypi.org"], Duration::from_secs(3));
    let until = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = p.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < until, "the proxy ran past its deadline");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    assert!(!p.socket.exists(), "its socket is removed");
    let mut log = String::new();
    std::io::Read::read_to_string(p.child.stderr.as_mut().unwrap(), &mut log).unwrap();
    assert!(
        log.contains("egress: the deadline came; every connection ends"),
        "{log}"
    );

    let out = Command::new(COMPUTERD)
        .args([
            "egress",
            "--allow",
            "*.co.uk",
            "--deadline",
            &rfc3339_in(Duration::from_secs(60)),
            "--socket",
            "/nonexistent/s.sock",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "computerd egress: network allow entry \"*.co.uk\": a wildcard on the public suffix co.uk, under which anyone registers a name: list the names you need under it\n"
    );
}

#[tokio::test]
async fn past_64_connections_at_once_the_next_is_refused_in_words_in_its_own_protocol() {
    let mut p = proxy(&["pypi.org"], Duration::from_secs(120));
    // 64 connections that send nothing hold every place (each waits for
    // its head); the 65th is told why, in its own protocol, and closed.
    let mut held = Vec::new();
    for _ in 0..64 {
        let mut s = UnixStream::connect(&p.socket).await.unwrap();
        s.write_all(b"G").await.unwrap();
        held.push(s);
    }
    // Every one of them accepted before the next is tried.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let words =
        "64 connections are open through this proxy, the most at once: close one and try again\n";
    // An HTTP client: 503 and the words.
    let r = exchange(&p, b"CONNECT pypi.org:443 HTTP/1.1\r\n\r\n").await;
    assert!(r.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{r}");
    assert_eq!(body(&r), format!("503 {words}"));
    // A SOCKS5 client, step by step as RFC 1928 has it: the method chosen
    // (no authentication), then for its request reply 2, connection not
    // allowed by ruleset, and the words on a line after it.
    let mut s = UnixStream::connect(&p.socket).await.unwrap();
    s.write_all(&[5, 1, 0]).await.unwrap();
    let mut chosen = [0u8; 2];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut chosen))
        .await
        .expect("the method within 5 s")
        .unwrap();
    assert_eq!(chosen, [5, 0]);
    let mut req = vec![5, 1, 0, 3, 8];
    req.extend_from_slice(b"pypi.org");
    req.extend_from_slice(&443u16.to_be_bytes());
    s.write_all(&req).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out))
        .await
        .expect("the reply within 5 s")
        .unwrap();
    assert_eq!(&out[..10], [5, 2, 0, 1, 0, 0, 0, 0, 0, 0], "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out[10..]), words);
    // Sent at once (greeting and request in one write): the same.
    let out = exchange_raw(&p, &[&[5, 1, 0][..], &req].concat()).await;
    assert_eq!(&out[..12], [5, 0, 5, 2, 0, 1, 0, 0, 0, 0, 0, 0], "{out:?}");
    // A SOCKS5 client that takes no method of ours is told so.
    assert_eq!(exchange_raw(&p, &[5, 1, 2]).await, [5, 0xff]);
    // One that sends nothing is answered as HTTP, after the short wait.
    let t = Instant::now();
    let mut s = UnixStream::connect(&p.socket).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
        .await
        .expect("an answer within 10 s");
    assert_eq!(body(&String::from_utf8_lossy(&out)), format!("503 {words}"));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    drop(held);
    // Their places come back.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let mut s = UnixStream::connect(&p.socket).await.unwrap();
        let _ = s.write_all(b"CONNECT pypi.org:22 HTTP/1.1\r\n\r\n").await;
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        let r = String::from_utf8_lossy(&out).into_owned();
        if r.starts_with("HTTP/1.1 403") {
            break;
        }
        assert!(Instant::now() < until, "{r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Each refusal is logged as the others are: the host and port when
    // the request named them, else that the host is unknown and why.
    let _ = p.child.kill();
    let _ = p.child.wait();
    let mut log = String::new();
    std::io::Read::read_to_string(p.child.stderr.as_mut().unwrap(), &mut log).unwrap();
    let fix = "fix=close one of the 64 connections open through this proxy and try again";
    for line in [
        format!("egress refuse host=pypi.org port=443 address=- class=- rule=bound socks=2 {fix}"),
        format!(
            "egress refuse host=- port=- address=- class=- rule=bound socks=2 {fix} (the host is unknown: an HTTP request, refused before its head is read)"
        ),
        format!(
            "egress refuse host=- port=- address=- class=- rule=bound socks=2 {fix} (the host is unknown: it sent nothing within 2s, and was answered as HTTP)"
        ),
    ] {
        assert!(log.contains(&line), "no {line:?} in:\n{log}");
    }
    assert_eq!(
        log.matches("host=pypi.org port=443 address=- class=- rule=bound")
            .count(),
        2,
        "{log}"
    );
}
