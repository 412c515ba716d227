//! A read-write `--share` of a root server, of a folder its owner never
//! opened to anyone (mode 0755): the computer's user is given an ACL entry
//! for the computer's life, and at release the entry is gone and what the
//! model wrote belongs to the folder's owner.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use serde_json::json;

use super::support::{HttpServer, Server, TOKEN, jerror, or_skip};

/// The folder's owner: a uid no account or computer of this host has.
const OWNER: u32 = 3_456_789;

/// The size of `path`'s access ACL attribute, or None when it has none.
fn acl_size(path: &Path) -> Option<usize> {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    let name = CString::new("system.posix_acl_access").unwrap();
    // SAFETY: NUL-terminated strings; a null buffer of size 0 asks the size.
    let n = unsafe { libc::lgetxattr(c.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
    (n > 0).then_some(n as usize)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_servers_read_write_share_needs_no_chmod_and_gives_the_files_back() {
    let server = or_skip!(Server::local());
    let here = tempfile::tempdir().unwrap();
    // The test's own folder is root's 0700: the computer's user passes
    // through it as it would through a home directory.
    std::fs::set_permissions(here.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let share = here.path().join("repo");
    std::fs::create_dir(&share).unwrap();
    std::fs::write(share.join("README"), "the owner's\n").unwrap();
    std::os::unix::fs::chown(&share, Some(OWNER), Some(OWNER)).unwrap();
    std::os::unix::fs::chown(share.join("README"), Some(OWNER), Some(OWNER)).unwrap();
    std::fs::set_permissions(&share, std::fs::Permissions::from_mode(0o755)).unwrap();

    let arg = share.display().to_string();
    let s = HttpServer::start_on(server, &["--share", &arg], &[TOKEN]).await;
    let c = s.stateless(TOKEN);
    let r = c
        .call(
            "exec",
            json!({"command": "id -u; echo hi > /workspace/made.txt && mkdir /workspace/d && echo x > /workspace/d/y && echo more >> /workspace/README && cat /workspace/README"}),
        )
        .await;
    assert!(!jerror(&r), "{r}");
    assert_eq!(r["structuredContent"]["exit_code"], 0, "{r}");
    let out = r["structuredContent"]["stdout"].as_str().unwrap();
    let uid: u32 = out.lines().next().unwrap().parse().unwrap();
    assert_ne!(uid, OWNER);
    assert!(out.ends_with("the owner's\nmore\n"), "{out}");
    // While it lives: an ACL on the folder, and what it made is its own.
    assert!(acl_size(&share).is_some());
    assert_eq!(
        std::fs::metadata(share.join("made.txt")).unwrap().uid(),
        uid
    );

    let (server, _) = s.stop().await;
    assert!(server.computers().is_empty(), "{:?}", server.computers());
    // Released: no ACL left anywhere, the mode as it was, and every file
    // the model wrote belongs to the folder's owner.
    for p in ["", "README", "made.txt", "d", "d/y"] {
        let path = share.join(p);
        assert_eq!(acl_size(&path), None, "{}", path.display());
        let m = std::fs::metadata(&path).unwrap();
        assert_eq!((m.uid(), m.gid()), (OWNER, OWNER), "{}", path.display());
    }
    assert_eq!(std::fs::metadata(&share).unwrap().mode() & 0o7777, 0o755);
    assert_eq!(
        std::fs::read_to_string(share.join("made.txt")).unwrap(),
        "hi\n"
    );
}
