//! screen.*: the display's pixels, as PNG.

use serde::{Deserialize, Serialize};

use super::envelope::{Bytes64, RpcError};

/// A rectangle of the screen, in its pixels, origin top left.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Region {
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
}

impl Region {
    /// The region, when it lies inside a `width` x `height` screen and is not
    /// empty; else invalid, naming `region` and the screen's size.
    pub fn check_inside(&self, width: u32, height: u32) -> Result<(), RpcError> {
        if self.width == 0 || self.height == 0 {
            return Err(RpcError::invalid_field(
                "region",
                format!(
                    "region is empty ({}x{}); give a width and a height of at least 1",
                    self.width, self.height
                ),
            ));
        }
        let right = u64::from(self.x) + u64::from(self.width);
        let bottom = u64::from(self.y) + u64::from(self.height);
        if right > u64::from(width) || bottom > u64::from(height) {
            return Err(RpcError::invalid_field(
                "region",
                format!(
                    "region {}x{} at ({}, {}) is outside the {width}x{height} screen",
                    self.width, self.height, self.x, self.y
                ),
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScreenShotParams {
    /// A part of the screen; the whole root window when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<Region>,
    /// The largest image the caller will show. A client that can scale
    /// before it encodes (computerd, a phone's: encoding is the shot's
    /// main cost) answers within it, its `scale` saying by how much; one
    /// that cannot answers at the screen's own size and the caller scales.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<Fit>,
}

/// A size budget for a picture: its long side within `long`, its short
/// within `short`, its pixels within `pixels`, and at most `maxWidth` wide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Fit {
    pub long: u32,
    pub short: u32,
    pub pixels: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_width: Option<u32>,
}

impl Fit {
    /// The size a `width` x `height` picture is shown at within the budget
    /// (its ratio kept, sides rounded down). Never larger than the picture
    /// unless `grow`, never smaller than 1x1.
    pub fn size(&self, width: u32, height: u32, grow: bool) -> (u32, u32) {
        let (w, h) = (f64::from(width.max(1)), f64::from(height.max(1)));
        let (bw, bh) = if width >= height {
            (self.long, self.short)
        } else {
            (self.short, self.long)
        };
        let mut s = (f64::from(bw) / w)
            .min(f64::from(bh) / h)
            .min((self.pixels as f64 / (w * h)).sqrt());
        if let Some(mw) = self.max_width {
            s = s.min(f64::from(mw.max(1)) / w);
        }
        if !grow {
            s = s.min(1.0);
        }
        let out = |side: f64| ((side * s).floor() as u32).max(1);
        (out(w), out(h))
    }
}

/// How a screen stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Orientation {
    Portrait,
    Landscape,
}

/// screen.orientation: how the screen is set to stand, and with `set`,
/// lock it that way first (answered by a phone's provider).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScreenOrientationParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<Orientation>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ScreenOrientationResult {
    /// The orientation the screen is set to (an app that fixes its own
    /// keeps it while in front).
    pub orientation: Orientation,
    /// The screen turns as the device is held (a set turns this off).
    pub auto_rotate: bool,
}

/// A shot: a PNG (8-bit RGB, non-interlaced).
/// `data` is its first bytes (at most 512 KiB); screen.read gives the rest
/// by `id` and offset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ScreenShotResult {
    /// The shot's id on this connection, for screen.read.
    pub id: String,
    pub format: ImageFormat,
    pub data: Bytes64,
    /// The PNG's whole size in bytes.
    pub size: u64,
    /// `data` is the whole PNG.
    pub eof: bool,
    /// The image's pixels (the region's, for a region shot).
    pub width: u32,
    pub height: u32,
    /// The screen's pixels: points are in this space, whatever the region.
    pub screen_width: u32,
    pub screen_height: u32,
    /// Image pixels per screen pixel (below 1 when scaled to the fit).
    pub scale: f64,
    /// The pointer, in screen pixels, when it is on the screen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<[i64; 2]>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ImageFormat {
    Png,
    Jpeg,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScreenReadParams {
    /// The shot's id (only the connection's latest shot is held).
    pub id: String,
    /// Bytes into the PNG.
    pub offset: u64,
    /// Default and most 512 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ScreenReadResult {
    pub data: Bytes64,
    /// The read reached the PNG's end (the shot is then let go).
    pub eof: bool,
}

/// screen.watch: the next frame of the live view, paced by the caller.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScreenWatchParams {
    /// The seq of the last frame the caller has whole (0: none yet). An
    /// older one gets the newest frame at once.
    #[serde(default)]
    pub after: u64,
    /// How long to wait for a change (default 2000, at most 10 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
    /// The frame's width at most (default 1280); the height keeps the ratio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_width: Option<u32>,
    /// JPEG quality, 1 to 100 (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<u8>,
    /// The caller draws changed regions: when it has frame `after` whole,
    /// the next frame may hold only the rectangle that changed since (its
    /// `region`), to be drawn over that one. Default false: whole frames.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub regions: bool,
}

/// A watch's asks, checked and with their defaults: what a client that
/// answers screen.watch itself (a phone's, a browser's cast) reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchAsk {
    pub wait_ms: u64,
    pub max_width: u32,
    pub quality: u8,
}

impl ScreenWatchParams {
    /// The asks checked (each refusal names its field and limit), with
    /// the defaults where none is given.
    pub fn checked(&self) -> Result<WatchAsk, RpcError> {
        use super::limits::{
            DEFAULT_WATCH_MAX_WIDTH, DEFAULT_WATCH_QUALITY, DEFAULT_WATCH_WAIT_MS,
            MAX_WATCH_WAIT_MS,
        };
        let wait_ms = self.wait_ms.unwrap_or(DEFAULT_WATCH_WAIT_MS);
        if wait_ms > MAX_WATCH_WAIT_MS {
            return Err(RpcError::invalid_field(
                "waitMs",
                format!("waitMs is {wait_ms}; at most {MAX_WATCH_WAIT_MS}"),
            ));
        }
        let max_width = self.max_width.unwrap_or(DEFAULT_WATCH_MAX_WIDTH);
        if max_width == 0 {
            return Err(RpcError::invalid_field(
                "maxWidth",
                "maxWidth is 0; give 1 or more",
            ));
        }
        let quality = self.quality.unwrap_or(DEFAULT_WATCH_QUALITY);
        if !(1..=100).contains(&quality) {
            return Err(RpcError::invalid_field(
                "quality",
                format!("quality is {quality}; JPEG quality is 1 to 100"),
            ));
        }
        Ok(WatchAsk {
            wait_ms,
            max_width,
            quality,
        })
    }
}

/// A frame of the live view, or `changed: false` when nothing changed
/// within waitMs (then no frame comes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ScreenWatchResult {
    /// The newest frame's seq (1, 2, ...).
    pub seq: u64,
    /// A frame comes with this reply.
    pub changed: bool,
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<WatchFrame>,
}

/// A frame's image: its first bytes in `data`, the rest by screen.read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WatchFrame {
    pub id: String,
    pub format: ImageFormat,
    pub data: Bytes64,
    pub size: u64,
    pub eof: bool,
    /// The image's pixels (scaled to maxWidth).
    pub frame_width: u32,
    pub frame_height: u32,
    /// The screen's pixels: the input space.
    pub width: u32,
    pub height: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<[i64; 2]>,
    /// Only for a caller that asked `regions`: the image is this part of
    /// the frame, `[x, y, width, height]` in frame pixels, to be drawn over
    /// frame `seq - 1`; width 0 (and no image) when only the cursor moved.
    /// Absent: the image is the whole frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<[u32; 4]>,
}

/// The source pixels `[a, b)` each of `out` output pixels covers, of `src`,
/// when a picture is scaled by area averaging (every span holds at least
/// one pixel).
pub fn area_spans(src: u32, out: u32) -> Vec<(usize, usize)> {
    (0..u64::from(out))
        .map(|o| {
            let a = (o * u64::from(src) / u64::from(out)) as usize;
            let b = ((o + 1) * u64::from(src) / u64::from(out)) as usize;
            (a, b.max(a + 1).min(src as usize))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorKind;

    #[test]
    fn a_region_must_lie_inside_the_screen() {
        let r = |x, y, width, height| Region {
            x,
            y,
            width,
            height,
        };
        assert!(r(0, 0, 1280, 800).check_inside(1280, 800).is_ok());
        assert!(r(1279, 799, 1, 1).check_inside(1280, 800).is_ok());
        for bad in [
            r(1200, 0, 100, 10),
            r(0, 700, 10, 101),
            r(u32::MAX, 0, 2, 2),
            r(0, 0, 0, 5),
        ] {
            let e = bad.check_inside(1280, 800).unwrap_err();
            assert_eq!(e.kind(), Some(ErrorKind::Invalid));
            assert!(e.message.contains("region"), "{}", e.message);
        }
        let e = r(1200, 0, 100, 10).check_inside(1280, 800).unwrap_err();
        assert!(
            e.message.contains("outside the 1280x800 screen"),
            "{}",
            e.message
        );
    }

    #[test]
    fn shot_params_refuse_unknown_fields() {
        let e = crate::protocol::decode_params::<ScreenShotParams>(Some(
            serde_json::json!({"region": {"x": 0, "y": 0, "width": 1, "height": 1, "z": 1}}),
        ))
        .unwrap_err();
        assert!(e.message.contains('z'), "{}", e.message);
    }
}
