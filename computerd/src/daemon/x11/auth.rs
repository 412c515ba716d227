//! The Xauthority cookie: read only from a regular file of at most 64 KiB
//! (never through a link, a FIFO or a device), and only the cookie for this
//! display on this host.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::protocol::{RpcError, limits};

const FAMILY_INTERNET: u16 = 0;
const FAMILY_INTERNET6: u16 = 6;
const FAMILY_LOCAL: u16 = 256;
const FAMILY_WILD: u16 = 65535;
const COOKIE: &[u8] = b"MIT-MAGIC-COOKIE-1";

/// `(name, data)` for the connection setup: empty when there is no file.
pub type Cookie = (Vec<u8>, Vec<u8>);

/// The file: $XAUTHORITY, else $HOME/.Xauthority, else none.
pub fn file(xauthority: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
    match (xauthority, home) {
        (Some(x), _) if !x.is_empty() => Some(PathBuf::from(x)),
        (_, Some(h)) if !h.is_empty() => Some(Path::new(h).join(".Xauthority")),
        _ => None,
    }
}

/// The cookie for `display` from `path`. A file that is not there gives no
/// cookie; one that is not a regular file, or is over 64 KiB, is refused in
/// words without being read.
pub fn read(path: &Path, display: u16, tcp: bool) -> Result<Cookie, RpcError> {
    let shown = path.display();
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => {
            return Err(RpcError::denied(format!(
                "the Xauthority file {shown} could not be looked at: {e}"
            )));
        }
    };
    let t = meta.file_type();
    let what = if t.is_symlink() {
        Some("a symbolic link")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_block_device() || t.is_char_device() {
        Some("a device")
    } else if t.is_socket() {
        Some("a socket")
    } else if !t.is_file() {
        Some("not a regular file")
    } else {
        None
    };
    if let Some(what) = what {
        return Err(RpcError::denied(format!(
            "the Xauthority file {shown} is {what}; it is read only when it is a regular file"
        )));
    }
    let too_big = |n: u64| {
        RpcError::limit(format!(
            "the Xauthority file {shown} holds {n} bytes; it is read only when it is at most {} (64 KiB)",
            limits::MAX_XAUTHORITY_BYTES
        ))
    };
    if meta.len() > limits::MAX_XAUTHORITY_BYTES {
        return Err(too_big(meta.len()));
    }
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            RpcError::denied(format!(
                "the Xauthority file {shown} could not be opened: {e}"
            ))
        })?;
    let m2 = f
        .metadata()
        .map_err(|e| RpcError::denied(format!("the Xauthority file {shown}: {e}")))?;
    if !m2.file_type().is_file() {
        return Err(RpcError::denied(format!(
            "the Xauthority file {shown} changed into something that is not a regular file"
        )));
    }
    let mut buf = Vec::new();
    (&mut f)
        .take(limits::MAX_XAUTHORITY_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| {
            RpcError::denied(format!(
                "the Xauthority file {shown} could not be read: {e}"
            ))
        })?;
    if buf.len() as u64 > limits::MAX_XAUTHORITY_BYTES {
        return Err(too_big(buf.len() as u64));
    }
    Ok(pick(&buf, display, tcp, &hostname()).unwrap_or_default())
}

fn hostname() -> Vec<u8> {
    std::fs::read("/proc/sys/kernel/hostname")
        .map(|mut h| {
            while h.last() == Some(&b'\n') {
                h.pop();
            }
            h
        })
        .unwrap_or_default()
}

struct Entry<'a> {
    family: u16,
    address: &'a [u8],
    number: &'a [u8],
    name: &'a [u8],
    data: &'a [u8],
}

fn entries(mut b: &[u8]) -> Vec<Entry<'_>> {
    fn field<'a>(b: &mut &'a [u8]) -> Option<&'a [u8]> {
        let n = u16::from_be_bytes([*b.first()?, *b.get(1)?]) as usize;
        let out = b.get(2..2 + n)?;
        *b = &b[2 + n..];
        Some(out)
    }
    let mut out = Vec::new();
    while b.len() >= 2 {
        let family = u16::from_be_bytes([b[0], b[1]]);
        b = &b[2..];
        let (Some(address), Some(number), Some(name), Some(data)) =
            (field(&mut b), field(&mut b), field(&mut b), field(&mut b))
        else {
            break;
        };
        out.push(Entry {
            family,
            address,
            number,
            name,
            data,
        });
    }
    out
}

/// The first MIT cookie for this display whose host is this one: Local
/// with this hostname, Wild, or (over TCP) a loopback address.
fn pick(file: &[u8], display: u16, tcp: bool, host: &[u8]) -> Option<Cookie> {
    let number = display.to_string();
    entries(file)
        .into_iter()
        .find(|e| {
            let ours = match e.family {
                FAMILY_LOCAL => e.address == host,
                FAMILY_WILD => true,
                FAMILY_INTERNET => tcp && e.address.first() == Some(&127) && e.address.len() == 4,
                FAMILY_INTERNET6 => {
                    tcp && e.address.len() == 16
                        && e.address[..15].iter().all(|b| *b == 0)
                        && e.address[15] == 1
                }
                _ => false,
            };
            ours && e.name == COOKIE && (e.number.is_empty() || e.number == number.as_bytes())
        })
        .map(|e| (e.name.to_vec(), e.data.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(family: u16, address: &[u8], number: &str, data: &[u8]) -> Vec<u8> {
        let mut v = family.to_be_bytes().to_vec();
        for f in [address, number.as_bytes(), COOKIE, data] {
            v.extend_from_slice(&(f.len() as u16).to_be_bytes());
            v.extend_from_slice(f);
        }
        v
    }

    #[test]
    fn only_this_hosts_cookie_for_this_display_is_picked() {
        let mut f = entry(FAMILY_LOCAL, b"other", "5", b"theirs");
        f.extend(entry(FAMILY_LOCAL, b"me", "4", b"wrong-display"));
        f.extend(entry(FAMILY_LOCAL, b"me", "5", b"mine"));
        assert_eq!(pick(&f, 5, false, b"me").unwrap().1, b"mine");
        assert_eq!(pick(&f, 6, false, b"me"), None);
        let t = entry(FAMILY_INTERNET, &[10, 0, 0, 1], "5", b"remote");
        assert_eq!(pick(&t, 5, true, b"me"), None);
        let t = entry(FAMILY_INTERNET, &[127, 0, 0, 1], "5", b"loop");
        assert_eq!(pick(&t, 5, true, b"me").unwrap().1, b"loop");
        assert_eq!(pick(&t, 5, false, b"me"), None);
        // A truncated file gives what parsed before the cut.
        assert_eq!(pick(&f[..f.len() - 3], 5, false, b"me"), None);
    }

    #[test]
    fn links_fifos_and_big_files_are_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::write(&real, entry(FAMILY_WILD, b"", "1", b"c")).unwrap();
        assert_eq!(read(&real, 1, false).unwrap().1, b"c");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = read(&link, 1, false).unwrap_err();
        assert!(e.message.contains("symbolic link"), "{}", e.message);
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = read(&fifo, 1, false).unwrap_err();
        assert!(e.message.contains("FIFO"), "{}", e.message);
        let e = read(Path::new("/dev/zero"), 1, false).unwrap_err();
        assert!(e.message.contains("device"), "{}", e.message);
        let big = dir.path().join("big");
        std::fs::write(&big, vec![0u8; 64 * 1024 + 1]).unwrap();
        let e = read(&big, 1, false).unwrap_err();
        assert!(e.message.contains("64 KiB"), "{}", e.message);
        assert_eq!(
            read(&dir.path().join("none"), 1, false).unwrap(),
            Default::default()
        );
    }
}
