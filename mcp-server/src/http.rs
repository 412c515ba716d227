//! Streamable HTTP: loopback by default, a bearer token always (each token
//! its own caller), Host and Origin checked before any JSON-RPC (DNS
//! rebinding). Both revisions are served: 2025-11-25 and before with
//! sessions (`Mcp-Session-Id`), 2026-07-28 stateless.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::app::{App, Principal};
use crate::config::HttpConfig;
use crate::server::ComputerMcp;

#[derive(Clone)]
struct Auth {
    /// Each token with its principal (the token's hash).
    tokens: Arc<Vec<(String, Principal)>>,
}

/// 403 unless the request carries `Authorization: Bearer <token>` with one
/// of the tokens (each compared in constant time, every one of them tried);
/// the request then carries the token's [`Principal`].
///
/// Not 401: MCP clients take a 401 as the start of MCP's OAuth flow, which
/// this server does not offer. The Inspector 2.12 CLI, given a wrong token,
/// answers every 401 (with or without a `WWW-Authenticate` challenge) with
/// "Interactive OAuth requires a TTY" and nothing of ours; given a 403 it
/// prints these words, which say whether the token was missing or wrong
/// and where the right one comes from.
async fn require_bearer(State(auth): State<Auth>, mut req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    let mut found: Option<Principal> = None;
    for (token, principal) in auth.tokens.iter() {
        let ok: bool = given.as_bytes().ct_eq(token.as_bytes()).into();
        if ok {
            found = Some(principal.clone());
        }
    }
    let Some(principal) = found else {
        let words = if given.is_empty() {
            "no bearer token: send the header Authorization: Bearer <token>, with the token the server printed or was given (--token / COMPUTER_MCP_TOKEN); this server offers no OAuth\n"
        } else {
            "the bearer token is not one of this server's (--token / COMPUTER_MCP_TOKEN); this server offers no OAuth\n"
        };
        return (StatusCode::FORBIDDEN, words).into_response();
    };
    req.extensions_mut().insert(principal);
    next.run(req).await
}

/// The header that carries a session's id.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// What rmcp is shown in place of another caller's session id: no session
/// has it (rmcp's ids are UUIDs), so rmcp answers as for any unknown id.
const NO_SUCH_SESSION: &str = "no-such-session";

#[derive(Clone)]
struct Sessions {
    app: Arc<App>,
    manager: Arc<LocalSessionManager>,
}

/// A session belongs to the caller whose initialize opened it. A request
/// naming a session that is not its caller's (another token's, or one
/// never opened) reaches rmcp with an id no session has, so it is answered
/// exactly as an unknown session is (404) and changes nothing: no tool
/// call, no stream, no DELETE.
///
/// A client's DELETE of its own session ends our side first: its default
/// computer counts against no bound once the answer is out (it is released
/// in the background). Then 204, or 404 when no such session is open (rmcp
/// answers 202 to both, which SDK clients that expect 200 or 204, as the
/// Python SDK does, log as a failed termination). The id is never echoed:
/// it is the session's one credential besides the token.
async fn own_sessions(State(s): State<Sessions>, mut req: Request, next: Next) -> Response {
    let Some(principal) = req.extensions().get::<Principal>().cloned() else {
        return (StatusCode::FORBIDDEN, "no caller\n").into_response();
    };
    let Some(given) = req.headers().get(SESSION_HEADER) else {
        // An initialize (or a stateless request): a session it opens is
        // this caller's.
        let response = next.run(req).await;
        let opened = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok());
        if let Some(id) = opened
            && let Some(check) = s.app.own_http_session(id, &principal)
        {
            prune(&s, check).await;
        }
        return response;
    };
    let id = given.to_str().ok().map(str::to_string);
    let mine = id
        .as_deref()
        .filter(|id| s.app.http_session_is(id, &principal));
    let Some(id) = mine.map(str::to_string) else {
        if req.method() == Method::DELETE {
            return no_such_session();
        }
        req.headers_mut().insert(
            SESSION_HEADER,
            axum::http::HeaderValue::from_static(NO_SUCH_SESSION),
        );
        return next.run(req).await;
    };
    if req.method() != Method::DELETE {
        return next.run(req).await;
    }
    if !s
        .manager
        .has_session(&Arc::from(id.as_str()))
        .await
        .unwrap_or(false)
    {
        s.app.forget_http_sessions(std::slice::from_ref(&id));
        return no_such_session();
    }
    s.app.end_http_session(&id).await;
    let mut response = next.run(req).await;
    if response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}

fn no_such_session() -> Response {
    (
        StatusCode::NOT_FOUND,
        "no such session: it has ended, or never began\n",
    )
        .into_response()
}

/// Drop from the table the sessions rmcp has ended on its own (idle).
async fn prune(s: &Sessions, ids: Vec<String>) {
    let mut gone = Vec::new();
    for id in ids {
        if !s
            .manager
            .has_session(&Arc::from(id.as_str()))
            .await
            .unwrap_or(true)
        {
            gone.push(id);
        }
    }
    s.app.forget_http_sessions(&gone);
}

/// A POST whose body is not one JSON-RPC message (truncated JSON, a batch)
/// is a bad request, answered 400 in words. rmcp answers it 415
/// (Unsupported Media Type), which says the Content-Type was wrong; a
/// wrong Content-Type keeps its 415.
async fn bad_bodies_are_400(req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    if response.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let Some(why) = text.strip_prefix("fail to deserialize request body") else {
        return Response::from_parts(parts, axum::body::Body::from(text));
    };
    (
        StatusCode::BAD_REQUEST,
        format!(
            "the body is not one JSON-RPC message:{why}. Send one request, notification or response per POST, as JSON (batches, arrays, are not taken)\n"
        ),
    )
        .into_response()
}

/// Serve until `stop` fires; returns when every connection has closed.
pub async fn serve(
    app: Arc<App>,
    http: &HttpConfig,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(http.listen)
        .await
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AddrInUse {
                anyhow::anyhow!(
                    "--http {}: the address is in use (another server, or an earlier computer-mcp, listens there); pick another port",
                    http.listen
                )
            } else {
                anyhow::anyhow!("--http {}: {e}", http.listen)
            }
        })?;
    let addr = listener.local_addr()?;
    app.views.serve_at(addr);
    // Replies are small and often written in two parts (headers, then an
    // SSE event): without TCP_NODELAY, Nagle holds the second part for the
    // client's delayed ACK, 40 ms a call.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("could not set TCP_NODELAY: {e}");
        }
    });
    if http.token_given {
        eprintln!(
            "computer-mcp: serving MCP at http://{addr}/mcp ({} bearer token(s) as configured)",
            http.tokens.len()
        );
    } else {
        eprintln!(
            "computer-mcp: serving MCP at http://{addr}/mcp with bearer token {}",
            http.tokens[0]
        );
    }
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(http.options.session_idle);
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(http.options.allowed_hosts.clone())
        .with_allowed_origins(http.options.allowed_origins.clone())
        .with_cancellation_token(stop.child_token());
    // One handler per session (2025-11-25 and before) or per stateless
    // request (2026-07-28); it finds its caller in each request.
    let factory_app = Arc::clone(&app);
    let sessions = Arc::new(sessions);
    let service = StreamableHttpService::new(
        move || Ok(ComputerMcp::http(Arc::clone(&factory_app))),
        Arc::clone(&sessions),
        config,
    );
    let auth = Auth {
        tokens: Arc::new(
            http.tokens
                .iter()
                .map(|t| (t.clone(), Principal::of_token(t)))
                .collect(),
        ),
    };
    let sessions = Sessions {
        app: Arc::clone(&app),
        manager: sessions,
    };
    // The viewer is merged after the layers: its page takes no bearer
    // token (a person's browser has none), its socket takes a link's.
    let router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(bad_bodies_are_400))
        .layer(axum::middleware::from_fn_with_state(sessions, own_sessions))
        .layer(axum::middleware::from_fn_with_state(auth, require_bearer))
        .merge(crate::view::router(Arc::clone(&app)));
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await?;
    Ok(())
}
