//! Property-based fuzzing on stable Rust (proptest): the parsers that take
//! hostile bytes straight from programs and callers. Each property runs a
//! bounded number of cases in `cargo test` (proptest's 256 by default, in
//! seconds); a long run is `PROPTEST_CASES=100000 cargo test -p computerd
//! --lib fuzz_tests`. A failure proptest finds is shrunk to a minimal input
//! and kept in `proptest-regressions/` beside this file, so it is run again
//! on every later test run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::client::{LineRead, read_bounded_line};
use crate::protocol::{self, Envelope, decode_params};

/// One of `words`, each as likely as another, or now and then (as often
/// as one word) a string `pattern` matches.
fn word_or(words: &'static [&'static str], pattern: &'static str) -> impl Strategy<Value = String> {
    prop_oneof![
        words.len() as u32 => prop::sample::select(words).prop_map(String::from),
        1 => pattern,
    ]
}

/// A JSON value of bounded depth and size.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,12}".prop_map(Value::String),
        prop::sample::select(&[
            "move", "click", "type", "key", "drag", "scroll", "wait", "hold", "down", "up", "left",
            "ctrl+a", "point", "text", "keys", "count", "ms", "path"
        ])
        .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                word_or(
                    &[
                        "type", "point", "button", "count", "keys", "text", "ms", "path", "dx",
                        "dy", "repeat"
                    ],
                    "[a-z]{1,6}"
                ),
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An AsyncRead that hands out `data` in the given chunk sizes.
struct Chunked {
    data: Vec<u8>,
    at: usize,
    sizes: Vec<usize>,
    n: usize,
}

impl tokio::io::AsyncRead for Chunked {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let size = self
            .sizes
            .get(self.n % self.sizes.len().max(1))
            .copied()
            .unwrap_or(1)
            .max(1);
        self.n += 1;
        let end = (self.at + size)
            .min(self.data.len())
            .min(self.at + buf.remaining());
        let start = self.at;
        buf.put_slice(&self.data[start..end]);
        self.at = end;
        std::task::Poll::Ready(Ok(()))
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    /// The line reader gives exactly the lines a plain split gives, a line
    /// past the bound as TooLong (and the next one intact), whatever the
    /// chunking, and never holds more than the bound.
    #[test]
    fn the_line_reader_splits_like_a_plain_split_and_stays_bounded(
        data in prop::collection::vec(prop_oneof![Just(b'\n'), any::<u8>()], 0..600),
        sizes in prop::collection::vec(1usize..40, 1..8),
        max in 1usize..64,
    ) {
        let mut want: Vec<Option<Vec<u8>>> = Vec::new();
        let mut parts: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
        if data.last() == Some(&b'\n') || data.is_empty() {
            parts.pop();
        }
        for p in parts {
            want.push(if p.len() > max { None } else { Some(p.to_vec()) });
        }
        let got = rt().block_on(async {
            let mut r = tokio::io::BufReader::with_capacity(16, Chunked { data: data.clone(), at: 0, sizes, n: 0 });
            let mut out = Vec::new();
            loop {
                let mut line = Vec::new();
                match read_bounded_line(&mut r, &mut line, max).await.unwrap() {
                    LineRead::Eof => break,
                    LineRead::TooLong => { assert!(line.len() <= max); out.push(None) }
                    LineRead::Line => { assert!(line.len() <= max); out.push(Some(line)) }
                }
            }
            out
        });
        prop_assert_eq!(got, want);
    }

    /// Any bytes: an envelope or a parse error, never a panic; any params
    /// of every method: its params or an error naming the fault.
    #[test]
    fn any_line_decodes_or_is_refused_in_words(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = serde_json::from_slice::<Envelope>(&bytes);
    }

    #[test]
    fn any_params_decode_or_are_refused_in_words(params in any_json()) {
        let p = Some(params);
        let errs = [
            decode_params::<protocol::ExecParams>(p.clone()).err(),
            decode_params::<protocol::FilesReadParams>(p.clone()).err(),
            decode_params::<protocol::FilesWriteParams>(p.clone()).err(),
            decode_params::<protocol::ProcessStartParams>(p.clone()).err(),
            decode_params::<protocol::ProcessReadParams>(p.clone()).err(),
            decode_params::<protocol::TarPushWriteParams>(p.clone()).err(),
            decode_params::<protocol::InputActionsParams>(p.clone()).err(),
            decode_params::<protocol::ScreenShotParams>(p.clone()).err(),
        ];
        for e in errs.into_iter().flatten() {
            prop_assert!(!e.message.is_empty());
        }
    }

    /// Any batch: checked whole, accepted only within every bound, refused
    /// with the failing index and words otherwise; never a panic.
    #[test]
    fn any_action_batch_is_checked_within_its_bounds(actions in prop::collection::vec(any_json(), 0..8)) {
        use crate::protocol::{Group, CheckOptions, limits};
        let groups = [Group::Screen, Group::InputPointer, Group::InputKeys];
        match protocol::check_actions_json(&actions, &groups, CheckOptions::default()) {
            Ok(ok) => {
                prop_assert!(ok.len() as u64 <= limits::MAX_ACTIONS as u64);
                prop_assert_eq!(ok.len(), actions.len());
            }
            Err(f) => {
                prop_assert!(!f.message.is_empty());
                prop_assert!(f.index as usize <= actions.len());
            }
        }
    }
}

/// Entry names an archive may carry to get out of its root.
fn hostile_name() -> impl Strategy<Value = String> {
    word_or(
        &[
            "../escape",
            "/abs-escape",
            "a/../../escape",
            "link",
            "link/through",
            "./ok/file",
            "dir/",
        ],
        "[a-z]{1,4}(/[a-z]{1,4}){0,2}",
    )
}

#[derive(Clone, Debug)]
enum Entry {
    File(String, Vec<u8>),
    Dir(String),
    Symlink(String, String),
    Hardlink(String, String),
}

fn entry() -> impl Strategy<Value = Entry> {
    prop_oneof![
        (hostile_name(), prop::collection::vec(any::<u8>(), 0..64))
            .prop_map(|(n, d)| Entry::File(n, d)),
        hostile_name().prop_map(Entry::Dir),
        (
            hostile_name(),
            prop_oneof![
                Just("/".to_string()),
                Just("..".to_string()),
                Just("../..".to_string()),
                hostile_name()
            ]
        )
            .prop_map(|(n, t)| Entry::Symlink(n, t)),
        (
            hostile_name(),
            prop_oneof![
                Just("/etc/passwd".to_string()),
                Just("../outside".to_string()),
                hostile_name()
            ]
        )
            .prop_map(|(n, t)| Entry::Hardlink(n, t)),
    ]
}

/// A tar archive of `entries`, names written raw (the tar crate's own
/// checks would refuse the hostile ones).
fn archive(entries: &[Entry]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        let mut h = tar::Header::new_gnu();
        let (name, kind, data, link): (&str, tar::EntryType, &[u8], Option<&str>) = match e {
            Entry::File(n, d) => (n, tar::EntryType::Regular, d, None),
            Entry::Dir(n) => (n, tar::EntryType::Directory, &[], None),
            Entry::Symlink(n, t) => (n, tar::EntryType::Symlink, &[], Some(t)),
            Entry::Hardlink(n, t) => (n, tar::EntryType::Link, &[], Some(t)),
        };
        let raw = &mut h.as_old_mut().name;
        let bytes = name.as_bytes();
        let len = bytes.len().min(raw.len());
        raw[..len].copy_from_slice(&bytes[..len]);
        if let Some(t) = link {
            let l = &mut h.as_old_mut().linkname;
            let tb = t.as_bytes();
            let n = tb.len().min(l.len());
            l[..n].copy_from_slice(&tb[..n]);
        }
        h.set_entry_type(kind);
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        h.set_cksum();
        b.append(&h, data).unwrap();
    }
    b.into_inner().unwrap()
}

/// Every path under `dir`, relative.
fn tree(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any archive, hostile names and links included, then garbage: the
    /// push extracts inside its root or refuses in words, and nothing
    /// appears outside the root.
    #[test]
    fn a_pushed_archive_never_writes_outside_its_root(
        entries in prop::collection::vec(entry(), 0..8),
        garbage in prop::collection::vec(any::<u8>(), 0..700),
        cut in 0usize..4096,
    ) {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("root");
        let outside_before = tree(base.path());
        let mut bytes = archive(&entries);
        bytes.truncate(bytes.len().min(cut.max(512) * 4));
        bytes.extend_from_slice(&garbage);
        let r = rt().block_on(async {
            let mut push = crate::daemon::tar::push::Push::begin(root.to_str().unwrap())?;
            for chunk in bytes.chunks(997) {
                push.write(chunk.to_vec()).await?;
            }
            push.end().await
        });
        if let Err(e) = &r {
            prop_assert!(!e.message.is_empty());
        }
        let after: Vec<String> = tree(base.path())
            .into_iter()
            .filter(|p| p != "root" && !p.starts_with("root/"))
            .collect();
        let before: Vec<String> = outside_before.into_iter().filter(|p| p != "root").collect();
        prop_assert_eq!(after, before, "something was written outside the root");
        prop_assert!(!std::path::Path::new("/abs-escape").exists());
    }
}

proptest! {
    /// The egress proxy's parsers take whatever a program sends: never a
    /// panic, and a head that parses holds only what the bounds allow.
    #[test]
    fn egress_request_parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        use crate::daemon::egress::head;
        if let Some(end) = head::head_end(&bytes)
            && let Ok(h) = head::parse_head(&bytes[..end])
        {
            {
                prop_assert!(h.headers.len() <= head::MAX_HEADERS);
                let _ = head::parse_absolute(&h.target);
                let _ = head::parse_authority(&h.target, None);
            }
        }
        let _ = head::socks_request_len(&bytes);
        let _ = head::parse_socks_request(&bytes);
        let _ = crate::daemon::egress::dns::parse_answer(&bytes, 7);
    }

    /// Request-shaped input: a request line of fuzzed parts and headers.
    #[test]
    fn egress_heads_of_fuzzed_parts_never_panic(
        method in "[A-Z]{0,8}",
        target in "(http://|https://|)[a-zA-Z0-9.:\\[\\]@/%?#-]{0,40}",
        headers in proptest::collection::vec(("[A-Za-z-]{0,12}", "[ -~]{0,24}"), 0..8),
    ) {
        use crate::daemon::egress::head;
        let mut raw = format!("{method} {target} HTTP/1.1\r\n");
        for (n, v) in &headers {
            raw.push_str(&format!("{n}: {v}\r\n"));
        }
        raw.push_str("\r\n");
        if let Ok(h) = head::parse_head(raw.as_bytes())
            && let Ok((a, path)) = head::parse_absolute(&h.target)
        {
            {
                prop_assert!(path.starts_with('/'));
                prop_assert!(a.port != 0);
            }
        }
    }

    /// Any host text: parsed or refused, and an address always classed.
    #[test]
    fn hosts_and_list_entries_never_panic(s in "[ -~]{0,64}", n in any::<u128>()) {
        use crate::protocol::egress::{self, Allowlist};
        let _ = egress::parse_host(&s);
        let _ = Allowlist::parse(&[s.as_str()]);
        let ip = std::net::IpAddr::V6(std::net::Ipv6Addr::from(n));
        let _ = egress::classify(ip);
        let v4 = std::net::IpAddr::V4(std::net::Ipv4Addr::from(n as u32));
        // Every IPv4 address is the same class mapped into IPv6.
        let mapped = match v4 { std::net::IpAddr::V4(a) => std::net::IpAddr::V6(a.to_ipv6_mapped()), x => x };
        prop_assert_eq!(egress::classify(v4), egress::classify(mapped));
    }
}
