//! The display: a desktop whose X server comes and goes, a hostile X
//! server refused before the daemon allocates for it, and where the cookie
//! comes from.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_display_is_linux_and_the_display_is_reached_when_it_comes_and_after_it_goes() {
    // No DISPLAY: kind linux, and the methods say why in words.
    let (init, c) = or_skip!(Init::with_client().await);
    let hello: HelloResult = c.call(&HelloParams::default()).await.unwrap();
    assert_eq!(hello.kind, MachineKind::Linux);
    assert_eq!(
        hello.groups,
        vec![Group::Exec, Group::Files, Group::Processes]
    );
    let e = shot_refused(&c).await;
    assert_eq!(e.kind(), Some(ErrorKind::Unsupported));
    assert!(e.message.contains("no display"), "{}", e.message);
    drop(init);

    // A DISPLAY naming another host is refused before anything is sent.
    let init = or_skip!(on_display("198.51.100.7:0"));
    let c = init.client().await;
    let t = Instant::now();
    let e = shot_refused(&c).await;
    assert!(e.message.contains("not this computer"), "{}", e.message);
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "no connection was tried"
    );
    let hello: HelloResult = c.call(&HelloParams::default()).await.unwrap();
    assert_eq!(hello.kind, MachineKind::Linux);
    drop(init);

    // A display that comes after init, goes, and comes back.
    let Some(x) = Xvfb::start() else { return };
    let n = x.display;
    drop(x);
    let init = or_skip!(on_display(format!(":{n}")));
    let c = init.client().await;
    let kind = |c: DaemonClient| async move {
        let h: HelloResult = c.call(&HelloParams::default()).await.unwrap();
        h.kind
    };
    assert_eq!(kind(c.clone()).await, MachineKind::Linux);
    let e = shot_refused(&c).await;
    assert!(e.message.contains("no display answers"), "{}", e.message);
    let x = Xvfb::on(n).expect("the display number is free again");
    assert_eq!(kind(c.clone()).await, MachineKind::Desktop);
    drop(x);
    assert_eq!(kind(c.clone()).await, MachineKind::Linux);
    let _x = Xvfb::on(n).expect("the display number is free again");
    assert_eq!(kind(c.clone()).await, MachineKind::Desktop);
    let (r, _) = shot(&c, None).await;
    assert_eq!(r.width, 1280);
}

/// A display number no Xvfb holds, reserved by its lock file while held.
struct Reserved {
    n: u32,
    lock: PathBuf,
}

impl Reserved {
    fn take() -> Reserved {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        loop {
            let n = 5000 + (std::process::id() % 300) * 10 + NEXT.fetch_add(1, Ordering::Relaxed);
            let lock = PathBuf::from(format!("/tmp/.X{n}-lock"));
            if std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&lock)
                .is_ok()
            {
                let _ = std::fs::remove_file(format!("/tmp/.X11-unix/X{n}"));
                return Reserved { n, lock };
            }
        }
    }
    fn socket(&self) -> PathBuf {
        PathBuf::from(format!("/tmp/.X11-unix/X{}", self.n))
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.socket());
        let _ = std::fs::remove_file(&self.lock);
    }
}

/// A setup a server could send, with its length filled in.
fn setup_bytes(edit: impl FnOnce(&mut x11rb::protocol::xproto::Setup)) -> Vec<u8> {
    use x11rb::protocol::xproto::*;
    use x11rb::x11_utils::Serialize;
    let mut s = Setup {
        status: 1,
        protocol_major_version: 11,
        protocol_minor_version: 0,
        length: 0,
        release_number: 1,
        resource_id_base: 0x0020_0000,
        resource_id_mask: 0x001f_ffff,
        motion_buffer_size: 0,
        maximum_request_length: 65535,
        image_byte_order: ImageOrder::LSB_FIRST,
        bitmap_format_bit_order: ImageOrder::LSB_FIRST,
        bitmap_format_scanline_unit: 32,
        bitmap_format_scanline_pad: 32,
        min_keycode: 8,
        max_keycode: 255,
        vendor: b"hostile".to_vec(),
        pixmap_formats: vec![Format {
            depth: 24,
            bits_per_pixel: 32,
            scanline_pad: 32,
        }],
        roots: vec![Screen {
            root: 0x100,
            default_colormap: 0x20,
            white_pixel: 0xffffff,
            black_pixel: 0,
            current_input_masks: EventMask::NO_EVENT,
            width_in_pixels: 1280,
            height_in_pixels: 800,
            width_in_millimeters: 300,
            height_in_millimeters: 200,
            min_installed_maps: 1,
            max_installed_maps: 1,
            root_visual: 0x21,
            backing_stores: BackingStore::NOT_USEFUL,
            save_unders: false,
            root_depth: 24,
            allowed_depths: vec![Depth {
                depth: 24,
                visuals: vec![Visualtype {
                    visual_id: 0x21,
                    class: VisualClass::TRUE_COLOR,
                    bits_per_rgb_value: 8,
                    colormap_entries: 256,
                    red_mask: 0xff0000,
                    green_mask: 0xff00,
                    blue_mask: 0xff,
                }],
            }],
        }],
    };
    edit(&mut s);
    let len = s.serialize().len();
    s.length = ((len - 8) / 4) as u16;
    s.serialize()
}

/// A fake X server on a reserved display: it reads the client's setup
/// request and sends `answer`, then for each request after it, `reply`
/// (when given). The bytes it sent are counted.
fn hostile(answer: Vec<u8>, reply: Option<Vec<u8>>) -> (Reserved, std::thread::JoinHandle<usize>) {
    use std::io::{Read, Write};
    let r = Reserved::take();
    std::fs::create_dir_all("/tmp/.X11-unix").unwrap();
    let l = std::os::unix::net::UnixListener::bind(r.socket()).unwrap();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut head = [0u8; 12];
        s.read_exact(&mut head).unwrap();
        let n = u16::from_le_bytes([head[6], head[7]]) as usize;
        let d = u16::from_le_bytes([head[8], head[9]]) as usize;
        let mut auth = vec![0u8; n.div_ceil(4) * 4 + d.div_ceil(4) * 4];
        s.read_exact(&mut auth).unwrap();
        let mut sent = 0;
        if s.write_all(&answer).is_err() {
            return sent;
        }
        sent += answer.len();
        if let Some(reply) = reply {
            let mut req = [0u8; 4];
            while s.read_exact(&mut req).is_ok() {
                let words = u16::from_le_bytes([req[2], req[3]]) as usize;
                let mut body = vec![0u8; words.saturating_sub(1) * 4];
                if s.read_exact(&mut body).is_err() || s.write_all(&reply).is_err() {
                    break;
                }
                sent += reply.len();
            }
        }
        sent
    });
    (r, h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_x_server_is_refused_in_words_before_the_daemon_allocates_for_it() {
    if !need_root() {
        return;
    }
    // A reply header claiming 4 GiB: the connection ends at the header.
    let mut huge = vec![0u8; 32];
    huge[0] = 1;
    huge[2] = 1; // sequence 1
    huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    type Case = (&'static str, Vec<u8>, Option<Vec<u8>>, &'static str);
    let cases: Vec<Case> = vec![
        (
            "scanline pad",
            setup_bytes(|s| s.pixmap_formats[0].scanline_pad = 7),
            None,
            "scanline pad of 7",
        ),
        (
            "keycodes",
            setup_bytes(|s| s.min_keycode = 3),
            None,
            "keycodes 3 to 255",
        ),
        (
            "a long setup",
            {
                let mut b = setup_bytes(|_| {});
                b[6..8].copy_from_slice(&u16::MAX.to_le_bytes());
                b
            },
            None,
            "setup of 262148 bytes",
        ),
        (
            "a huge reply",
            setup_bytes(|_| {}),
            Some(huge),
            "reply of 17179869212 bytes",
        ),
    ];
    for (what, answer, reply, words) in cases {
        let (r, server) = hostile(answer, reply);
        let init = or_skip!(on_display(format!(":{}", r.n)));
        let c = init.client().await;
        let t = Instant::now();
        let e = shot_refused(&c).await;
        assert_eq!(e.kind(), Some(ErrorKind::Unsupported), "{what}");
        assert!(e.message.contains(words), "{what}: {}", e.message);
        assert!(t.elapsed() < Duration::from_secs(4), "{what}");
        drop(init);
        server.join().unwrap();
    }
}

fn xauthority(path: &std::path::Path, display: u32, cookie: &[u8]) {
    let mut v = 0xffffu16.to_be_bytes().to_vec(); // FamilyWild
    let num = display.to_string();
    for f in [&b""[..], num.as_bytes(), b"MIT-MAGIC-COOKIE-1", cookie] {
        v.extend_from_slice(&(f.len() as u16).to_be_bytes());
        v.extend_from_slice(f);
    }
    std::fs::write(path, v).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cookie_comes_from_a_regular_xauthority_file_only() {
    let Some(x) = Xvfb::start() else { return };
    let n = x.display;
    drop(x);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("Xauthority");
    xauthority(&file, n, b"0123456789abcdef");
    let _x = Xvfb::on_with(n, &["-auth", file.to_str().unwrap()]).expect("display free");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let wrong = dir.path().join("wrong");
    xauthority(&wrong, n, b"fedcba9876543210");
    for (path, want) in [
        (&wrong, Some("refused the connection")),
        (&file, None),
        (&link, Some("symbolic link")),
    ] {
        let init = or_skip!(Init::start_with(InitOptions {
            env: vec![
                ("DISPLAY".into(), format!(":{n}")),
                ("XAUTHORITY".into(), path.to_str().unwrap().into()),
            ],
            ..Default::default()
        }));
        let c = init.client().await;
        let r = c.call(&ScreenShotParams::default()).await;
        let hello: HelloResult = c.call(&HelloParams::default()).await.unwrap();
        match want {
            None => {
                assert_eq!(r.unwrap().width, 1280);
                assert_eq!(hello.kind, MachineKind::Desktop);
            }
            Some(words) => {
                let e = rpc(r.unwrap_err());
                assert!(
                    e.message.contains(words),
                    "{}: {}",
                    path.display(),
                    e.message
                );
                assert_eq!(hello.kind, MachineKind::Linux);
            }
        }
    }
}
