//! The live viewer: a page a person opens from a `computer_view` link, at
//! `/view/<handle>` of the HTTP transport (or of `--viewer`'s loopback
//! port over stdio), that draws the computer's screen and, under a control
//! lease, sends the person's mouse and keys to it.
//!
//! - The page is one static file (`view/page.html`), the same for every
//!   computer: serving it reveals nothing and takes no secret.
//! - The link's token is in its fragment (`#t=...`), which a browser never
//!   sends in a request or a Referer; the page sends it as the first
//!   message of its WebSocket (`/view/<handle>/socket`), and the server
//!   checks it there ([`grants`]).
//! - Frames are pulled: the server asks computerd's `screen.watch` for the
//!   next frame only once the page acked the last one drawn, so a slow
//!   viewer is never sent more than it draws, and an unchanged screen sends
//!   nothing ([`socket`]).
//! - The page's events map to input actions ([`map`]); input is sent only
//!   by the viewer holding the computer's control lease, 8 in flight at most.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use computer_tools::fleet::{self, ViewLink};
use computerd::protocol::SettingKind;

use crate::app::{App, Entry};

pub mod app;
pub mod control;
pub mod grants;
pub mod map;
pub mod redact;
mod socket;
pub mod takeover;

/// Whether a view reads its computer on the model's own client rather
/// than on a connection of its own: a browser its computer's daemon runs
/// (local, Docker) lives as long as the connection that started it, so a
/// second connection would start a second browser and end the model's;
/// the model's client casts its front tab instead.
pub fn on_models_client(app: &App) -> bool {
    app.kind() == computerd::protocol::SettingKind::Browser
        && app.capabilities().daemon != computer_providers::DaemonMode::None
}

/// The page: no build step, no framework.
const PAGE: &str = include_str!("view/page.html");

/// The viewer's state on one server: links given, who holds each
/// computer's control, and where the viewer is served.
pub struct Views {
    pub grants: grants::Grants,
    /// Each computer's control lease, and the model's takeover requests.
    pub control: control::Control,
    next_view: AtomicU64,
    /// `http://127.0.0.1:PORT`, once the viewer listens.
    base: OnceLock<String>,
    /// How long a link works (`--viewer-link-ttl`).
    link_ttl: std::time::Duration,
}

impl Default for Views {
    fn default() -> Self {
        Views::with_link_ttl(grants::LINK_TTL)
    }
}

impl Views {
    /// The viewer's state, its links working `link_ttl` each.
    pub fn with_link_ttl(link_ttl: std::time::Duration) -> Views {
        Views {
            grants: Default::default(),
            control: Default::default(),
            next_view: Default::default(),
            base: Default::default(),
            link_ttl,
        }
    }

    /// Where links point from now on.
    pub fn serve_at(&self, addr: SocketAddr) {
        let host = if addr.ip().is_unspecified() {
            "127.0.0.1".to_string()
        } else {
            addr.ip().to_string()
        };
        let host = if addr.is_ipv6() && !addr.ip().is_unspecified() {
            format!("[{host}]")
        } else {
            host
        };
        let _ = self.base.set(format!("http://{host}:{}", addr.port()));
    }

    /// Whether a viewer is served (computer_view is then listed).
    pub fn served(&self) -> bool {
        self.base.get().is_some()
    }

    fn new_view_id(&self) -> u64 {
        self.next_view.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// computer_view's answer for `entry`: a new link, or every link to it
    /// ended.
    pub fn link(&self, entry: &Entry, revoke: bool) -> Result<ViewLink, String> {
        let computer = entry.label();
        if revoke {
            let n = self.grants.revoke(&entry.handle);
            return Ok(ViewLink {
                computer,
                revoked: Some(n),
                ..Default::default()
            });
        }
        let Some(base) = self.base.get() else {
            return Err(format!(
                "{}: this server serves no viewer (start it with --http, or --viewer 127.0.0.1:0 over stdio)",
                fleet::VIEW_NAME
            ));
        };
        let m = self
            .grants
            .mint(&entry.handle, &entry.principal, self.link_ttl)?;
        Ok(ViewLink {
            computer,
            url: Some(format!("{base}/view/{}#t={}", entry.handle, m.token)),
            expires: Some(grants::rfc3339(m.expires)),
            ..Default::default()
        })
    }
}

/// Whether this server's computers can be watched in the viewer: those
/// with a screen, and every browser (one with no X display is cast over
/// CDP; see `computer_providers::cdp::casts`).
pub fn viewable(app: &App) -> bool {
    crate::resources::has_screen(app) || app.kind() == SettingKind::Browser
}

/// The viewer's routes, with no bearer token: the page is public, the
/// socket checks the link's token.
pub fn router(app: Arc<App>) -> axum::Router {
    axum::Router::new()
        .route("/view/{handle}", axum::routing::get(page))
        .route("/view/{handle}/socket", axum::routing::get(upgrade))
        .with_state(app)
}

/// A page in words: what every refusal over plain HTTP is.
fn words(status: StatusCode, text: &str) -> Response {
    let body = format!(
        "<!doctype html><meta charset=utf-8><meta name=referrer content=no-referrer><title>computer-mcp viewer</title><p>{}</p>\n",
        text.replace('&', "&amp;").replace('<', "&lt;")
    );
    let mut r = (status, body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    r
}

async fn page(Path(handle): Path<String>) -> Response {
    if !fleet::is_handle(&handle) {
        return words(
            StatusCode::NOT_FOUND,
            "No computer has this address: a viewer's link is /view/ and the computer's handle (c- and 32 hex digits), as computer_view gave it.",
        );
    }
    let mut r = PAGE.into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src blob:; connect-src 'self'; frame-ancestors 'none'",
        ),
    );
    r
}

/// Whether the viewer's socket takes a page of `origin`: its own page
/// (on `host`), a host's sandboxed frame (`null`), or one the operator
/// named with `--viewer-origin` (`extra`, exact).
fn origin_taken(origin: &str, host: &str, extra: &[String]) -> bool {
    origin == format!("http://{host}")
        || origin == "null"
        || extra.iter().any(|o| o.eq_ignore_ascii_case(origin))
}

/// The socket's upgrade (RFC 6455), done here on tokio-tungstenite's
/// stream, the one WebSocket crate of the workspace. A request from
/// another site's page (its Origin neither this host nor opaque) is
/// refused. An opaque Origin (`null`) is taken: it is what the viewer's
/// MCP App sends from a host's sandboxed frame, and no DNS rebinding
/// yields it (a rebound page has its own real origin); so is an origin
/// given with `--viewer-origin` (a host rendering apps on a domain of
/// its own). Either way the
/// socket does nothing until its first message carries the computer's
/// own token.
async fn upgrade(
    State(app): State<Arc<App>>,
    Path(handle): Path<String>,
    mut req: Request,
) -> Response {
    use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
    let hdr = |name: header::HeaderName| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let host = hdr(header::HOST).unwrap_or_default();
    if let Some(origin) = hdr(header::ORIGIN)
        && !origin_taken(&origin, &host, &app.config.fleet.view_origins)
    {
        return words(
            StatusCode::FORBIDDEN,
            "The viewer's socket is opened only by the viewer's own page.",
        );
    }
    let is_ws = hdr(header::UPGRADE).is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
    let (Some(key), true) = (hdr(header::SEC_WEBSOCKET_KEY), is_ws) else {
        return words(
            StatusCode::BAD_REQUEST,
            "This address is the viewer's WebSocket: open the viewer's page (/view/<handle>) instead.",
        );
    };
    if !fleet::is_handle(&handle) {
        return words(StatusCode::NOT_FOUND, "No computer has this address.");
    }
    let Some(on_upgrade) = req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>() else {
        return words(
            StatusCode::BAD_REQUEST,
            "This connection cannot become a WebSocket.",
        );
    };
    let id = app.views.new_view_id();
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let io = hyper_util::rt::TokioIo::new(upgraded);
                let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
                    io,
                    tokio_tungstenite::tungstenite::protocol::Role::Server,
                    Some(socket::ws_config()),
                )
                .await;
                socket::run(app, handle, id, ws).await;
            }
            Err(e) => tracing::debug!("a viewer's upgrade failed: {e}"),
        }
    });
    let mut r = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let h = r.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    if let Ok(v) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    r
}

/// `--viewer`: the viewer alone on `addr` (a stdio server's), until `stop`.
pub async fn serve_alone(
    app: Arc<App>,
    addr: SocketAddr,
    stop: tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("--viewer {addr}: {e}"))?;
    let at = listener.local_addr()?;
    app.views.serve_at(at);
    eprintln!(
        "computer-mcp: serving the viewer at http://{at}/view/ (links come from computer_view)"
    );
    let router = router(app);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await
        {
            tracing::warn!("the viewer stopped: {e}");
        }
    });
    Ok(())
}
