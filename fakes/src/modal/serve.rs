//! The fake Modal's gRPC plumbing: an axum route per method, each
//! answered through tonic's own server codec (so the framing, the
//! trailers and the statuses are tonic's, as a real gRPC server's), and
//! the metadata checks both services make.

use std::future::Future;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use futures::Stream;
use tonic::Status;

/// Answer `req` with one message from `f`.
pub async fn unary<Req, Res, F, Fut>(req: Request, f: F) -> Response
where
    Req: prost::Message + Default + Send + 'static,
    Res: prost::Message + Send + 'static,
    F: FnOnce(tonic::Request<Req>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<Res, Status>> + Send + 'static,
{
    let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::<Res, Req>::default());
    let svc = tower::service_fn(move |r: tonic::Request<Req>| {
        let f = f.clone();
        async move { f(r).await.map(tonic::Response::new) }
    });
    grpc.unary(svc, req).await.map(Body::new)
}

/// Answer `req` with the stream `f` gives.
pub async fn stream<Req, Res, S, F, Fut>(req: Request, f: F) -> Response
where
    Req: prost::Message + Default + Send + 'static,
    Res: prost::Message + Send + 'static,
    S: Stream<Item = Result<Res, Status>> + Send + 'static,
    F: FnOnce(tonic::Request<Req>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<S, Status>> + Send + 'static,
{
    let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::<Res, Req>::default());
    let svc = tower::service_fn(move |r: tonic::Request<Req>| {
        let f = f.clone();
        async move { f(r).await.map(|s| tonic::Response::new(Box::pin(s))) }
    });
    grpc.server_streaming(svc, req).await.map(Body::new)
}

/// A metadata value as text ("" when absent or not text).
pub fn meta<'a>(md: &'a tonic::metadata::MetadataMap, key: &str) -> &'a str {
    md.get(key).and_then(|v| v.to_str().ok()).unwrap_or("")
}
