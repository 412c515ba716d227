//! MIT-SHM: the screen read through memory shared with the X server, where
//! it offers the extension and can map our segment (the same machine, the
//! same IPC namespace, and a server allowed to read a 0600 segment of our
//! uid). The pixels then skip the socket: the server writes them straight
//! into the segment and the reply is 32 bytes. Anywhere else (a remote or
//! TCP-only server, a Docker desktop without shared IPC) nothing is kept
//! and GetImage carries the pixels as before.

use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::shm::{self, ConnectionExt as _};
use x11rb::protocol::xproto;

use super::session::{Conn, lost};
use crate::daemon::sys;
use crate::protocol::RpcError;

/// A segment of the screen's size, attached by the server.
pub struct Shm {
    seg: shm::Seg,
    addr: *mut u8,
    len: usize,
}

// SAFETY: the mapping belongs to this value alone (the server writes to it
// only while a ShmGetImage the owner awaits runs), so it may move threads.
unsafe impl Send for Shm {}

impl Shm {
    /// A segment of `len` bytes the server attached, or why there is none
    /// (the session then reads by GetImage).
    pub fn attach(conn: &Conn, len: usize) -> Result<Shm, String> {
        match conn.extension_information(shm::X11_EXTENSION_NAME) {
            Ok(Some(_)) => {}
            Ok(None) => return Err("the server has no MIT-SHM".into()),
            Err(e) => return Err(e.to_string()),
        }
        let id = sys::shm_create(len).map_err(|e| format!("shmget: {e}"))?;
        let addr = match sys::shm_map(id) {
            Ok(a) => a,
            Err(e) => {
                let _ = sys::shm_remove(id);
                return Err(format!("shmat: {e}"));
            }
        };
        let attached = (|| {
            let seg = conn.generate_id().map_err(|e| e.to_string())?;
            conn.shm_attach(seg, id as u32, false)
                .map_err(|e| e.to_string())?
                .check()
                .map_err(|e| format!("the server could not attach it: {e}"))?;
            Ok::<_, String>(seg)
        })();
        // Gone once both sides let go: nothing is left behind whatever
        // happens to either, and nobody maps it by its id from now on.
        let _ = sys::shm_remove(id);
        match attached {
            Ok(seg) => Ok(Shm { seg, addr, len }),
            Err(e) => {
                let _ = sys::shm_unmap(addr);
                Err(e)
            }
        }
    }

    /// The pixels of a rectangle inside the screen, BGRX, through the
    /// segment: `want` bytes (at most the segment's).
    pub fn pixels(
        &self,
        conn: &Conn,
        name: &str,
        root: xproto::Window,
        (x, y, w, h): (u16, u16, u16, u16),
        want: usize,
    ) -> Result<Vec<u8>, RpcError> {
        if want > self.len {
            return Err(lost(
                name,
                format!("{want} bytes do not fit the {}-byte segment", self.len),
            ));
        }
        let r = conn
            .shm_get_image(
                root,
                x as i16,
                y as i16,
                w,
                h,
                !0,
                xproto::ImageFormat::Z_PIXMAP.into(),
                self.seg,
                0,
            )
            .map_err(|e| lost(name, e))?
            .reply()
            .map_err(|e| lost(name, e))?;
        if r.size as usize != want {
            return Err(lost(
                name,
                format!(
                    "ShmGetImage gave {} bytes for {w}x{h} pixels (not {want})",
                    r.size
                ),
            ));
        }
        let mut out = vec![0u8; want];
        // SAFETY: the segment is `len` bytes mapped for this value's life,
        // want <= len, and the server wrote the image before it replied;
        // the bytes are copied out, so no reference to shared memory lives.
        unsafe { std::ptr::copy_nonoverlapping(self.addr, out.as_mut_ptr(), want) };
        Ok(out)
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // The server lets its side go when the connection closes.
        let _ = sys::shm_unmap(self.addr);
    }
}
