//! Streamable HTTP: loopback by default, a bearer token always, Host and
//! Origin checked before any JSON-RPC (DNS rebinding).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::config::HttpConfig;
use crate::server::ComputerMcp;
use crate::session::App;

#[derive(Clone)]
struct Auth {
    token: Arc<String>,
}

/// 401 unless the request carries `Authorization: Bearer <token>`,
/// compared in constant time.
async fn require_bearer(State(auth): State<Auth>, req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    let ok: bool = given.as_bytes().ct_eq(auth.token.as_bytes()).into();
    if !ok {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        return (
            StatusCode::UNAUTHORIZED,
            headers,
            "a bearer token is required (Authorization: Bearer <token>)\n",
        )
            .into_response();
    }
    next.run(req).await
}

/// Serve until `stop` fires; returns when every connection has closed.
pub async fn serve(
    app: Arc<App>,
    http: &HttpConfig,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(http.listen).await?;
    let addr = listener.local_addr()?;
    if http.token_given {
        eprintln!("computer-mcp: serving MCP at http://{addr}/mcp (bearer token as configured)");
    } else {
        eprintln!(
            "computer-mcp: serving MCP at http://{addr}/mcp with bearer token {}",
            http.token
        );
    }
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(http.options.session_idle);
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(http.options.allowed_hosts.clone())
        .with_allowed_origins(http.options.allowed_origins.clone())
        .with_cancellation_token(stop.child_token());
    let factory_app = Arc::clone(&app);
    let service = StreamableHttpService::new(
        move || {
            factory_app
                .new_session()
                .map(ComputerMcp::new)
                .map_err(std::io::Error::other)
        },
        Arc::new(sessions),
        config,
    );
    let auth = Auth {
        token: Arc::new(http.token.clone()),
    };
    let router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(auth, require_bearer));
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await?;
    Ok(())
}
