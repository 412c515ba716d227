//! A phone as a computer. No daemon runs on a phone: this crate answers
//! the computer protocol's methods (screen, input.touch, input.keys, apps,
//! apps.ui_tree) in the server's own process, with the phone's own tools
//! reached over adb (`screencap`, `input`, `uiautomator`, `pm`, `am`,
//! `dumpsys`, `wm`).
//!
//! - [`adb`]: [`adb::AdbShell`], the [`client::Shell`] of a device over adb.
//! - [`client`]: [`client::PhoneClient`], the protocol over a [`client::Shell`].
//! - [`screen`]: `screencap`'s raw frame, bounded, cut and made a PNG.
//! - [`input`]: a checked batch of actions as `input` lines with markers,
//!   so a phone that goes away mid-batch still says what it did.
//! - [`facts`]: the phone's tools' outputs read (size, density, props,
//!   packages, the app in front, `am start`'s outcome).
//! - [`ui`]: `uiautomator dump` as the protocol's UI tree, within its bounds.
//! - [`install`]: apps.install, an APK from the shared folders pushed and
//!   installed, its package read from `pm list packages -f`.
//! - [`intent`]: a web address opened by a VIEW intent, and the screen's
//!   rotation settings read and locked.

pub mod adb;
pub mod client;
pub mod facts;
pub mod input;
pub mod install;
pub mod intent;
pub mod screen;
pub mod ui;
