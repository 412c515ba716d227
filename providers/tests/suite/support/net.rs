//! Test hosts on this machine only: a network namespace of the test's own
//! joined to this one by a veth pair, holding an HTTP server, a TLS server
//! (openssl s_server), a port-22 listener and a DNS server answering the
//! test-only domain `eg.test`. The addresses are 11.0.<n>.0/24, routed to
//! the veth alone: nothing the tests send goes to any other address.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the test hosts answer and count.
pub struct Net {
    pub ns: String,
    pub host_veth: String,
    /// This machine's end of the veth (one of its own addresses).
    pub host_ip: Ipv4Addr,
    /// The test hosts: `a` answers good.eg.test, `b` is where a rebinding
    /// name points after its first answer.
    pub a: Ipv4Addr,
    pub b: Ipv4Addr,
    pub dns: SocketAddr,
    /// A queries asked per name.
    pub asked: Arc<Mutex<BTreeMap<String, u64>>>,
    pub cert: String,
    pub dir: tempfile::TempDir,
    tls: Option<std::process::Child>,
    pub served: Arc<AtomicU64>,
    /// Every byte each plain-HTTP connection sent the test hosts, as text,
    /// once it ended: what a proxy carried, whether or not it was answered.
    pub heard: Arc<Mutex<Vec<String>>>,
}

fn run(cmd: &[&str]) -> Result<(), String> {
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Bind sockets inside the namespace `ns` (from a thread that enters it;
/// a socket stays in the namespace it was made in).
fn bind_in<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, String> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
        nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(|e| format!("setns {path}: {e}"))?;
        f().map_err(|e| format!("bind in {path}: {e}"))
    })
    .join()
    .map_err(|_| "the binding thread panicked".to_string())?
}

/// The wheel `egpkg 1.0`, made by Python's zipfile.
fn make_wheel(dir: &Path) -> Result<PathBuf, String> {
    let path = dir.join("egpkg-1.0-py3-none-any.whl");
    let script = format!(
        r#"import zipfile
z = zipfile.ZipFile({:?}, "w")
z.writestr("egpkg/__init__.py", "X = 1\n")
z.writestr("egpkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: egpkg\nVersion: 1.0\n")
z.writestr("egpkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
z.writestr("egpkg-1.0.dist-info/RECORD", "")
z.close()
"#,
        path.display().to_string()
    );
    run(&["python3", "-c", &script])?;
    Ok(path)
}

/// Remove the namespaces of host `n` that a killed test or bench left
/// (theirs is named after a process that is gone): one left holds the same
/// addresses as the new one's and muddles what is measured there.
fn sweep_dead(n: u8) {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    let suffix = format!("-{n}");
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("egtest")
            .and_then(|r| r.strip_suffix(&suffix))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = run(&["ip", "netns", "del", &name]);
        }
    }
}

impl Net {
    /// Make the namespace, the veth, the servers. `n` keeps two tests'
    /// hosts apart (1..=250).
    pub async fn up(n: u8) -> Result<Net, String> {
        let ns = format!("egtest{}-{n}", std::process::id());
        let host_veth = format!("egh{n}");
        let ns_veth = format!("egs{n}");
        let host_ip = Ipv4Addr::new(11, 0, n, 1);
        let a = Ipv4Addr::new(11, 0, n, 2);
        let b = Ipv4Addr::new(11, 0, n, 3);
        let _ = run(&["ip", "link", "del", &host_veth]);
        let _ = run(&["ip", "netns", "del", &ns]);
        sweep_dead(n);
        run(&["ip", "netns", "add", &ns])?;
        // One command a line: no word of them holds a space.
        let steps = [
            format!("ip link add {host_veth} type veth peer name {ns_veth}"),
            format!("ip link set {ns_veth} netns {ns}"),
            format!("ip addr add {host_ip}/24 dev {host_veth}"),
            format!("ip link set {host_veth} up"),
            format!("ip -n {ns} addr add {a}/24 dev {ns_veth}"),
            format!("ip -n {ns} addr add {b}/24 dev {ns_veth}"),
            format!("ip -n {ns} link set {ns_veth} up"),
            format!("ip -n {ns} link set lo up"),
        ];
        for s in &steps {
            let argv: Vec<&str> = s.split_whitespace().collect();
            if let Err(e) = run(&argv) {
                let _ = run(&["ip", "link", "del", &host_veth]);
                let _ = run(&["ip", "netns", "del", &ns]);
                return Err(e);
            }
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let key = dir.path().join("k.pem");
        let crt = dir.path().join("c.pem");
        run(&[
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=good.eg.test",
            "-addext",
            "subjectAltName=DNS:good.eg.test,DNS:files.wild.eg.test",
            "-keyout",
            key.to_str().unwrap_or(""),
            "-out",
            crt.to_str().unwrap_or(""),
        ])?;
        let cert = std::fs::read_to_string(&crt).map_err(|e| e.to_string())?;
        let wheel = std::fs::read(make_wheel(dir.path())?).map_err(|e| e.to_string())?;
        let (udp, http_a, http_b, ssh) = bind_in(&ns, move || {
            let udp = std::net::UdpSocket::bind((a, 53))?;
            let ha = std::net::TcpListener::bind((a, 80))?;
            let hb = std::net::TcpListener::bind((b, 80))?;
            let ssh = std::net::TcpListener::bind((a, 22))?;
            for l in [&ha, &hb, &ssh] {
                l.set_nonblocking(true)?;
            }
            udp.set_nonblocking(true)?;
            Ok((udp, ha, hb, ssh))
        })?;
        let tls = Command::new("ip")
            .args([
                "netns", "exec", &ns, "openssl", "s_server", "-quiet", "-www",
            ])
            .args(["-accept", &format!("{a}:443")])
            .arg("-cert")
            .arg(&crt)
            .arg("-key")
            .arg(&key)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("openssl s_server: {e}"))?;
        let asked = Arc::new(Mutex::new(BTreeMap::new()));
        let served = Arc::new(AtomicU64::new(0));
        let heard = Arc::new(Mutex::new(Vec::new()));
        let net = Net {
            ns,
            host_veth,
            host_ip,
            a,
            b,
            dns: SocketAddr::new(IpAddr::V4(a), 53),
            asked: Arc::clone(&asked),
            cert,
            dir,
            tls: Some(tls),
            served: Arc::clone(&served),
            heard: Arc::clone(&heard),
        };
        let udp = tokio::net::UdpSocket::from_std(udp).map_err(|e| e.to_string())?;
        tokio::spawn(dns_server(udp, net.answers(), asked));
        let wheel = Arc::new(wheel);
        for l in [http_a, http_b] {
            let l = tokio::net::TcpListener::from_std(l).map_err(|e| e.to_string())?;
            tokio::spawn(http_server(
                l,
                Arc::clone(&wheel),
                Arc::clone(&served),
                Arc::clone(&heard),
            ));
        }
        let ssh = tokio::net::TcpListener::from_std(ssh).map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            while let Ok((mut s, _)) = ssh.accept().await {
                let _ = s.write_all(b"SSH-2.0-test\r\n").await;
            }
        });
        // The TLS server is up once it accepts.
        for _ in 0..200 {
            if std::net::TcpStream::connect((a, 443)).is_ok() {
                return Ok(net);
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        Err("openssl s_server did not listen within 5 s".into())
    }

    /// The names of eg.test and what each answers (A, then AAAA).
    fn answers(&self) -> Answers {
        let v4 = |a: Ipv4Addr| IpAddr::V4(a);
        let p = |s: &str| {
            s.parse::<IpAddr>()
                .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
        };
        let mut m: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
        m.insert("good.eg.test".into(), vec![v4(self.a)]);
        m.insert("files.wild.eg.test".into(), vec![v4(self.a)]);
        m.insert("unlisted.eg.test".into(), vec![v4(self.a)]);
        m.insert("private.eg.test".into(), vec![p("10.1.2.3")]);
        m.insert("loop.eg.test".into(), vec![p("127.0.0.1")]);
        m.insert("meta.eg.test".into(), vec![p("169.254.169.254")]);
        m.insert("mapped.eg.test".into(), vec![p("::ffff:127.0.0.1")]);
        m.insert("self.eg.test".into(), vec![v4(self.host_ip)]);
        m.insert("mixed.eg.test".into(), vec![v4(self.a), p("10.0.0.1")]);
        Answers {
            fixed: m,
            rebind: ("rebind.eg.test".into(), v4(self.a), p("127.0.0.1")),
        }
    }

    pub fn asked(&self, name: &str) -> u64 {
        self.asked
            .lock()
            .map(|m| m.get(name).copied().unwrap_or(0))
            .unwrap_or(0)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        if let Some(mut t) = self.tls.take() {
            let _ = t.kill();
            let _ = t.wait();
        }
        let _ = run(&["ip", "link", "del", &self.host_veth]);
        let _ = run(&["ip", "netns", "del", &self.ns]);
    }
}

#[derive(Clone)]
struct Answers {
    fixed: BTreeMap<String, Vec<IpAddr>>,
    /// A name that answers one address the first time and another after.
    rebind: (String, IpAddr, IpAddr),
}

async fn dns_server(
    sock: tokio::net::UdpSocket,
    answers: Answers,
    asked: Arc<Mutex<BTreeMap<String, u64>>>,
) {
    let mut buf = [0u8; 1500];
    while let Ok((n, from)) = sock.recv_from(&mut buf).await {
        let q = &buf[..n];
        if n < 17 {
            continue;
        }
        let mut at = 12;
        let mut labels = Vec::new();
        while at < n && q[at] != 0 {
            let l = q[at] as usize;
            labels.push(String::from_utf8_lossy(&q[at + 1..(at + 1 + l).min(n)]).to_lowercase());
            at += 1 + l;
        }
        let end = at + 5;
        if end > n {
            continue;
        }
        let name = labels.join(".");
        let qtype = u16::from_be_bytes([q[at + 1], q[at + 2]]);
        let count = {
            let mut m = asked.lock().unwrap_or_else(|p| p.into_inner());
            if qtype == 1 {
                *m.entry(name.clone()).or_insert(0) += 1;
            }
            m.get(&name).copied().unwrap_or(0)
        };
        let addrs: Vec<IpAddr> = if name == answers.rebind.0 {
            vec![if count <= 1 {
                answers.rebind.1
            } else {
                answers.rebind.2
            }]
        } else {
            answers.fixed.get(&name).cloned().unwrap_or_default()
        };
        let known = name == answers.rebind.0 || answers.fixed.contains_key(&name);
        let picked: Vec<IpAddr> = addrs
            .into_iter()
            .filter(|a| (qtype == 1 && a.is_ipv4()) || (qtype == 28 && a.is_ipv6()))
            .collect();
        let mut out = Vec::new();
        out.extend_from_slice(&q[..2]);
        out.extend_from_slice(&[0x81, if known { 0x80 } else { 0x83 }, 0, 1]);
        out.extend_from_slice(&(picked.len() as u16).to_be_bytes());
        out.extend_from_slice(&[0, 0, 0, 0]);
        out.extend_from_slice(&q[12..end]);
        for a in picked {
            out.extend_from_slice(&[0xc0, 12]);
            out.extend_from_slice(&qtype.to_be_bytes());
            out.extend_from_slice(&[0, 1, 0, 0, 0, 5]);
            match a {
                IpAddr::V4(v) => {
                    out.extend_from_slice(&[0, 4]);
                    out.extend_from_slice(&v.octets());
                }
                IpAddr::V6(v) => {
                    out.extend_from_slice(&[0, 16]);
                    out.extend_from_slice(&v.octets());
                }
            }
        }
        let _ = sock.send_to(&out, from).await;
    }
}

/// The size of /big, the bench's download.
pub const BIG: u64 = 100 * 1024 * 1024;

async fn http_server(
    l: tokio::net::TcpListener,
    wheel: Arc<Vec<u8>>,
    served: Arc<AtomicU64>,
    heard: Arc<Mutex<Vec<String>>>,
) {
    while let Ok((mut s, _)) = l.accept().await {
        let wheel = Arc::clone(&wheel);
        let served = Arc::clone(&served);
        let heard = Arc::clone(&heard);
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 65536 {
                match s.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            served.fetch_add(1, Ordering::Relaxed);
            answer(&mut s, &buf, &wheel).await;
            // The answer is whole (Connection: close); whatever else the
            // connection carries is heard to its end, never answered.
            let _ = s.shutdown().await;
            let rest = async {
                while buf.len() < 1 << 20 {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            };
            let _ = tokio::time::timeout(std::time::Duration::from_secs(30), rest).await;
            heard
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(&buf).into_owned());
        });
    }
}

/// The test host's answer to the request head in `buf`.
async fn answer(s: &mut tokio::net::TcpStream, buf: &[u8], wheel: &[u8]) {
    let me = s
        .local_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default();
    let text = String::from_utf8_lossy(buf).into_owned();
    let path = text.split(' ').nth(1).unwrap_or("/").to_string();
    let host = text
        .lines()
        .find_map(|l| l.strip_prefix("Host: ").or(l.strip_prefix("host: ")))
        .unwrap_or("-")
        .trim()
        .to_string();
    let (ctype, body): (&str, Vec<u8>) = match path.as_str() {
        "/simple/egpkg/" => (
            "text/html",
            b"<html><body><a href=\"/files/egpkg-1.0-py3-none-any.whl\">egpkg-1.0-py3-none-any.whl</a></body></html>".to_vec(),
        ),
        "/files/egpkg-1.0-py3-none-any.whl" => ("application/octet-stream", wheel.to_vec()),
        "/redirect" => {
            let r = "HTTP/1.1 302 Found\r\nLocation: http://unlisted.eg.test/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            let _ = s.write_all(r.as_bytes()).await;
            return;
        }
        "/big" => {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {BIG}\r\nConnection: close\r\n\r\n"
            );
            if s.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let block = vec![b'x'; 1 << 20];
            for _ in 0..(BIG >> 20) {
                if s.write_all(&block).await.is_err() {
                    return;
                }
            }
            return;
        }
        _ => (
            "text/plain",
            format!("served-by={me} host={host} path={path}\n").into_bytes(),
        ),
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes()).await;
    let _ = s.write_all(&body).await;
}
