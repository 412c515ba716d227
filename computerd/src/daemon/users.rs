//! Users, read from /etc/passwd by hand.
//!
//! The daemon never asks libc's NSS (getpwnam and friends): a static glibc
//! would try to load the computer's own NSS modules into the daemon, and a
//! computer's files are the user's to change. Parsing the file is all a
//! computer's users need.

use crate::protocol::RpcError;

/// A user a program runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAs {
    pub uid: u32,
    pub gid: u32,
    /// USER and LOGNAME.
    pub name: String,
    pub home: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    name: String,
    uid: u32,
    gid: u32,
    home: String,
}

const PASSWD: &str = "/etc/passwd";

fn entries(text: &str) -> impl Iterator<Item = Entry> + '_ {
    text.lines().filter_map(|line| {
        if line.starts_with('#') {
            return None;
        }
        let f: Vec<&str> = line.split(':').collect();
        if f.len() < 7 || f[0].is_empty() {
            return None;
        }
        Some(Entry {
            name: f[0].to_string(),
            uid: f[2].parse().ok()?,
            gid: f[3].parse().ok()?,
            home: if f[5].is_empty() {
                "/".to_string()
            } else {
                f[5].to_string()
            },
        })
    })
}

fn read_passwd() -> String {
    std::fs::read_to_string(PASSWD).unwrap_or_default()
}

/// The passwd entry of a uid: (name, home), when there is one.
pub fn by_uid(uid: u32) -> Option<(String, String)> {
    entries(&read_passwd())
        .find(|e| e.uid == uid)
        .map(|e| (e.name, e.home))
}

/// Resolve a request's `user`: a name, `uid` or `uid:gid`.
pub fn resolve(spec: &str) -> Result<RunAs, RpcError> {
    resolve_in(spec, &read_passwd())
}

fn parse_id(field: &str, s: &str) -> Result<u32, RpcError> {
    s.parse::<u32>()
        .ok()
        .filter(|&n| n != u32::MAX)
        .ok_or_else(|| {
            RpcError::invalid_field(
                "user",
                format!("user: {field} {s:?} is not a number from 0 to 4294967294"),
            )
        })
}

fn resolve_in(spec: &str, passwd: &str) -> Result<RunAs, RpcError> {
    if spec.is_empty() || spec.contains('\0') || spec.len() > 256 {
        return Err(RpcError::invalid_field(
            "user",
            "user must be a name, uid or uid:gid of at most 256 bytes",
        ));
    }
    let numeric = spec.bytes().next().is_some_and(|b| b.is_ascii_digit());
    if numeric {
        let (u, g) = match spec.split_once(':') {
            Some((u, g)) => (u, Some(g)),
            None => (spec, None),
        };
        let uid = parse_id("uid", u)?;
        let entry = entries(passwd).find(|e| e.uid == uid);
        let gid = match g {
            Some(g) => parse_id("gid", g)?,
            None => entry.as_ref().map(|e| e.gid).unwrap_or(uid),
        };
        let (name, home) = match entry {
            Some(e) => (e.name, e.home),
            None => (uid.to_string(), "/".to_string()),
        };
        return Ok(RunAs {
            uid,
            gid,
            name,
            home,
        });
    }
    entries(passwd)
        .find(|e| e.name == spec)
        .map(|e| RunAs {
            uid: e.uid,
            gid: e.gid,
            name: e.name,
            home: e.home,
        })
        .ok_or_else(|| {
            RpcError::not_found(format!(
                "user: no user named {spec:?} in /etc/passwd; give a name it lists or uid[:gid]"
            ))
            .with_field("user")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorKind;

    const PW: &str = "root:x:0:0:root:/root:/bin/bash\n#c\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\nbad line\ndev:x:1000:1001::/home/dev:/bin/sh\n";

    #[test]
    fn names_and_ids_resolve() {
        let dev = RunAs {
            uid: 1000,
            gid: 1001,
            name: "dev".into(),
            home: "/home/dev".into(),
        };
        for by in ["dev", "1000"] {
            assert_eq!(resolve_in(by, PW).unwrap(), dev, "{by}");
        }
        assert_eq!(
            resolve_in("4242:7", PW).unwrap(),
            RunAs {
                uid: 4242,
                gid: 7,
                name: "4242".into(),
                home: "/".into()
            }
        );
    }

    #[test]
    fn unknown_and_malformed_users_are_refused_in_words() {
        let e = resolve_in("ghost", PW).unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::NotFound));
        assert!(
            e.message.contains("no user named \"ghost\""),
            "{}",
            e.message
        );
        let e = resolve_in("12:x", PW).unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::Invalid));
        assert!(e.message.contains("gid \"x\""), "{}", e.message);
        assert!(resolve_in("", PW).is_err());
    }
}
