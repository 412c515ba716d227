//! One connection to the display: reached, checked, and what it does
//! (screen.shot's pixels; the input primitives input.actions is made of).

use std::time::Duration;

use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::Event;
use x11rb::protocol::xproto::{self, ConnectionExt as _, ImageOrder, KeyButMask};
use x11rb::protocol::xtest::{self, ConnectionExt as _};
use x11rb::rust_connection::{DefaultStream, RustConnection};

use super::addr::{Target, Via};
use super::auth;
use super::keys::Keymap;
use super::shm::Shm;
use super::wire::{Allowance, Bounded};
use crate::protocol::{RpcError, limits};

pub type Conn = RustConnection<Bounded>;

pub struct Session {
    pub conn: Conn,
    pub root: xproto::Window,
    pub width: u16,
    pub height: u16,
    pub keymap: Keymap,
    allowance: Allowance,
    /// Memory shared with the server for the screen's pixels, where it
    /// could attach it ([`Shm`]); GetImage otherwise.
    shm: Option<Shm>,
    /// Where this connection is (for messages).
    pub name: String,
}

/// An X failure in words: the display is then dropped and reached again.
pub fn lost(name: &str, e: impl std::fmt::Display) -> RpcError {
    RpcError::unsupported(format!("the display {name} failed: {e}"))
}

impl Session {
    /// Reach the display and check what it says of itself.
    pub fn connect(
        name: &str,
        target: &Target,
        cookie_file: Option<&std::path::Path>,
    ) -> Result<Session, RpcError> {
        let tcp = matches!(target.how, Via::Tcp(_));
        let (auth_name, auth_data) = match cookie_file {
            Some(p) => auth::read(p, target.display, tcp)?,
            None => Default::default(),
        };
        let unreachable =
            |e: std::io::Error| RpcError::unsupported(format!("no display answers at {name}: {e}"));
        let stream = match &target.how {
            Via::Unix(path) => {
                let s = std::os::unix::net::UnixStream::connect(path).map_err(unreachable)?;
                DefaultStream::from_unix_stream(s).map_err(unreachable)?.0
            }
            Via::Tcp(addr) => {
                let s = std::net::TcpStream::connect_timeout(addr, Duration::from_secs(2))
                    .map_err(unreachable)?;
                let _ = s.set_nodelay(true);
                DefaultStream::from_tcp_stream(s).map_err(unreachable)?.0
            }
        };
        let allowance = Allowance::new();
        let conn = RustConnection::connect_to_stream_with_auth_info(
            Bounded::new(stream, allowance.clone()),
            target.screen,
            auth_name,
            auth_data,
        )
        .map_err(|e| {
            RpcError::unsupported(format!("the display {name} refused the connection: {e}"))
        })?;
        let setup = conn.setup();
        for f in &setup.pixmap_formats {
            if ![8, 16, 32].contains(&f.scanline_pad) {
                return Err(RpcError::unsupported(format!(
                    "the display {name} gave a scanline pad of {} (only 8, 16 or 32 are real); it is not driven",
                    f.scanline_pad
                )));
            }
        }
        if setup.min_keycode < 8 || setup.max_keycode < setup.min_keycode {
            return Err(RpcError::unsupported(format!(
                "the display {name} gave keycodes {} to {}, not a range from 8 up; it is not driven",
                setup.min_keycode, setup.max_keycode
            )));
        }
        let Some(screen) = setup.roots.get(target.screen) else {
            return Err(RpcError::unsupported(format!(
                "the display {name} has no screen {}",
                target.screen
            )));
        };
        let (root, width, height, depth) = (
            screen.root,
            screen.width_in_pixels,
            screen.height_in_pixels,
            screen.root_depth,
        );
        let side = u32::from(width.max(height));
        if width == 0
            || height == 0
            || side > limits::MAX_X11_SCREEN_SIDE
            || u64::from(width) * u64::from(height) > limits::MAX_X11_SCREEN_PIXELS
        {
            return Err(RpcError::unsupported(format!(
                "the display {name} is {width}x{height}; screens up to {} a side and {} pixels are driven",
                limits::MAX_X11_SCREEN_SIDE,
                limits::MAX_X11_SCREEN_PIXELS
            )));
        }
        let bpp = setup
            .pixmap_formats
            .iter()
            .find(|f| f.depth == depth)
            .map(|f| f.bits_per_pixel);
        if !(depth == 24 || depth == 32)
            || bpp != Some(32)
            || setup.image_byte_order != ImageOrder::LSB_FIRST
        {
            return Err(RpcError::unsupported(format!(
                "the display {name} has depth {depth} at {bpp:?} bits a pixel; computerd reads 24-bit colour in 32-bit pixels, least significant byte first"
            )));
        }
        let no_xtest = || {
            RpcError::unsupported(format!(
                "the display {name} has no XTEST extension, so input cannot be sent (start Xvfb without -disable-xtest)"
            ))
        };
        match conn.extension_information(xtest::X11_EXTENSION_NAME) {
            Ok(Some(_)) => {}
            Ok(None) => return Err(no_xtest()),
            Err(e) => return Err(lost(name, e)),
        }
        let (min, max) = (setup.min_keycode, setup.max_keycode);
        let map = conn
            .get_keyboard_mapping(min, max - min + 1)
            .map_err(|e| lost(name, e))?
            .reply()
            .map_err(|e| lost(name, e))?;
        let keymap = Keymap::new(min, map.keysyms_per_keycode, map.keysyms);
        let shm = match Shm::attach(&conn, usize::from(width) * usize::from(height) * 4) {
            Ok(s) => Some(s),
            Err(why) => {
                tracing::debug!(
                    display = name,
                    why,
                    "the screen is read by GetImage, not MIT-SHM"
                );
                None
            }
        };
        Ok(Session {
            conn,
            root,
            width,
            height,
            keymap,
            allowance,
            shm,
            name: name.to_string(),
        })
    }

    /// One round trip, then any X error the server sent for what came
    /// before it: the answer to "did that work".
    pub fn sync(&self) -> Result<(), RpcError> {
        self.conn
            .get_input_focus()
            .map_err(|e| lost(&self.name, e))?
            .reply()
            .map_err(|e| lost(&self.name, e))?;
        while let Some(ev) = self
            .conn
            .poll_for_event()
            .map_err(|e| lost(&self.name, e))?
        {
            if let Event::Error(e) = ev {
                return Err(RpcError::invalid(format!(
                    "the display {} refused a request: {:?} (major opcode {})",
                    self.name, e.error_kind, e.major_opcode
                )));
            }
        }
        Ok(())
    }

    /// The pointer, and whether Caps Lock is on.
    pub fn pointer(&self) -> Result<(i64, i64, bool, KeyButMask), RpcError> {
        let p = self
            .conn
            .query_pointer(self.root)
            .map_err(|e| lost(&self.name, e))?
            .reply()
            .map_err(|e| lost(&self.name, e))?;
        Ok((
            i64::from(p.root_x),
            i64::from(p.root_y),
            p.same_screen,
            p.mask,
        ))
    }

    /// The pixels of a rectangle inside the screen, as the server gives
    /// them: BGRX, four bytes a pixel.
    pub fn pixels(&mut self, x: u16, y: u16, w: u16, h: u16) -> Result<Vec<u8>, RpcError> {
        let want = u64::from(w) * u64::from(h) * 4;
        if let Some(shm) = &self.shm {
            match shm.pixels(
                &self.conn,
                &self.name,
                self.root,
                (x, y, w, h),
                want as usize,
            ) {
                Ok(px) => return Ok(px),
                Err(e) => {
                    // Let it go and read by GetImage from now on.
                    tracing::debug!(display = %self.name, error = %e.message, "MIT-SHM failed");
                    self.shm = None;
                    self.sync()?;
                }
            }
        }
        self.allowance.set(32 + want);
        let r = self
            .conn
            .get_image(
                xproto::ImageFormat::Z_PIXMAP,
                self.root,
                x as i16,
                y as i16,
                w,
                h,
                !0,
            )
            .map_err(|e| lost(&self.name, e))
            .and_then(|c| c.reply().map_err(|e| lost(&self.name, e)));
        self.allowance.reset();
        let data = r?.data;
        if data.len() as u64 != want {
            return Err(lost(
                &self.name,
                format!(
                    "GetImage gave {} bytes for {w}x{h} pixels (not {want})",
                    data.len()
                ),
            ));
        }
        Ok(data)
    }

    /// A fake event: a key or button press or release, or a motion.
    pub fn fake(&self, kind: u8, detail: u8, x: i16, y: i16) -> Result<(), RpcError> {
        self.conn
            .xtest_fake_input(kind, detail, x11rb::CURRENT_TIME, self.root, x, y, 0)
            .map_err(|e| lost(&self.name, e))?;
        Ok(())
    }

    pub fn flush(&self) -> Result<(), RpcError> {
        self.conn.flush().map_err(|e| lost(&self.name, e))
    }

    /// Bind `ks` to keycode `code` in every column, and wait for the server.
    pub fn remap(&mut self, code: u8, ks: u32) -> Result<(), RpcError> {
        let per = self.keymap.per;
        let row = vec![ks; usize::from(per)];
        self.conn
            .change_keyboard_mapping(1, code, per, &row)
            .map_err(|e| lost(&self.name, e))?;
        self.sync()?;
        self.keymap.bound(code, ks);
        Ok(())
    }
}
