//! The fake E2B's envd: its gate (sandbox, token, user), file uploads and
//! the Connect process calls (a server stream for Start, unary JSON for
//! SendInput and SendSignal). The rules it keeps are in the parent's docs.

use super::*;

/// Why envd refused a call.
type Refusal = (StatusCode, &'static str);

/// envd's gate: the sandbox by its header, its token, and the user.
fn envd_gate(
    s: &Shared,
    h: &HeaderMap,
) -> std::result::Result<(String, Arc<VendorBox>, String), Refusal> {
    let header = |k: &str| h.get(k).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let id = header("e2b-sandbox-id").to_string();
    expire(s);
    let all = lock(&s.sandboxes);
    let Some(b) = all.get(&id).filter(|b| b.killed.is_none()) else {
        return Err((StatusCode::NOT_FOUND, "sandbox not found"));
    };
    if b.paused {
        return Err((StatusCode::BAD_GATEWAY, "The sandbox was not found"));
    }
    if header("x-access-token") != b.token {
        return Err((StatusCode::UNAUTHORIZED, "invalid access token"));
    }
    let user = header("authorization")
        .strip_prefix("Basic ")
        .and_then(|b| B64.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|u| u.strip_suffix(':').map(str::to_string));
    match user.as_deref() {
        Some("root") => Ok((id, Arc::clone(&b.boxed), "0:0".into())),
        Some("user") => Ok((id, Arc::clone(&b.boxed), "1000:1000".into())),
        _ => Err((StatusCode::UNAUTHORIZED, "no such user")),
    }
}

pub(super) async fn files(
    State(s): State<Arc<Shared>>,
    h: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let (_, boxed, _) = match envd_gate(&s, &h) {
        Ok(g) => g,
        Err((c, m)) => return status(c, m),
    };
    let Some(path) = q.get("path") else {
        return status(StatusCode::BAD_REQUEST, "path is required");
    };
    match boxed.upload(path, &body).await {
        Ok(()) => axum::Json(json!([{"name": path, "type": "file", "path": path}])).into_response(),
        Err(e) => status(StatusCode::INTERNAL_SERVER_ERROR, &e.0),
    }
}

fn event(e: Value) -> Vec<u8> {
    envelope(0, json!({"event": e}).to_string().as_bytes())
}

/// The stream's bytes, cut into pieces of 1 to 7 bytes at the start of
/// each envelope and whole after, so a reader meets a cut anywhere.
fn pieces(bytes: Vec<u8>, seed: &mut u64) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let n = ((*seed >> 33) % 7 + 1) as usize;
        let end = if out.len() < 3 {
            (at + n).min(bytes.len())
        } else {
            bytes.len()
        };
        out.push(Bytes::copy_from_slice(&bytes[at..end]));
        at = end;
    }
    out
}

pub(super) async fn start(State(s): State<Arc<Shared>>, h: HeaderMap, body: Bytes) -> Response {
    let (id, boxed, user) = match envd_gate(&s, &h) {
        Ok(g) => g,
        Err((c, m)) => return status(c, m),
    };
    let mut envs = Envelopes::default();
    envs.push(&body);
    let Ok(Some(req)) = envs.take() else {
        return status(StatusCode::BAD_REQUEST, "the request is not one envelope");
    };
    let Ok(v) = serde_json::from_slice::<Value>(&req.message) else {
        return status(StatusCode::BAD_REQUEST, "the request is not JSON");
    };
    let p = &v["process"];
    let mut argv = vec![p["cmd"].as_str().unwrap_or_default().to_string()];
    argv.extend(
        p["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(str::to_string)),
    );
    let cmd = Cmd {
        argv,
        env: p["envs"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect(),
        cwd: p["cwd"].as_str().map(str::to_string),
        user: Some(user),
    };
    let stdin = v["stdin"].as_bool().unwrap_or(false);
    let mut attached = match boxed.attach(&cmd, stdin).await {
        Ok(a) => a,
        Err(e) => return status(StatusCode::INTERNAL_SERVER_ERROR, &e.0),
    };
    let pid = attached.pid;
    if let Some(input) = attached.input.take() {
        lock(&s.inputs).insert(
            (id.clone(), pid),
            Arc::new(tokio::sync::Mutex::new(Some(input))),
        );
    }
    let header = |k: &str| {
        h.get(k)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
    };
    let timeout = header("connect-timeout-ms");
    lock(&s.starts).push(timeout);
    if let Some(ms) = timeout {
        let b = Arc::clone(&boxed);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            let _ = b.signal(pid, "KILL").await;
        });
    }
    let keepalive = Duration::from_secs(header("keepalive-ping-interval").unwrap_or(90).max(1));
    let cut = lock(&s.knobs).cut_stream.take();
    let (tx, rx) = tokio::sync::mpsc::channel::<std::result::Result<Bytes, std::io::Error>>(64);
    let shared = Arc::clone(&s);
    tokio::spawn(async move {
        let mut seed = u64::from(pid);
        let mut sent = 0usize;
        // Sends one message's pieces; false once the client is gone (the
        // process keeps running, its output read and dropped) or cut.
        let mut send = |bytes: Vec<u8>, tx: &tokio::sync::mpsc::Sender<_>| {
            let mut out = Vec::new();
            for piece in pieces(bytes, &mut seed) {
                if let Some(c) = cut
                    && sent + piece.len() > c
                {
                    out.push(Ok(piece.slice(..c.saturating_sub(sent))));
                    out.push(Err(std::io::Error::other("cut")));
                    sent = usize::MAX / 2;
                    break;
                }
                sent += piece.len();
                out.push(Ok(piece));
            }
            let tx = tx.clone();
            async move {
                for p in out {
                    let end = p.is_err();
                    if tx.send(p).await.is_err() || end {
                        return false;
                    }
                }
                true
            }
        };
        let mut open = send(event(json!({"start": {"pid": pid}})), &tx).await;
        let mut tick = tokio::time::interval(keepalive);
        tick.tick().await;
        loop {
            tokio::select! {
                c = attached.output.next() => match c {
                    Some(Chunk::Stdout(b)) if open => {
                        open = send(event(json!({"data": {"stdout": B64.encode(&b)}})), &tx).await;
                    }
                    Some(Chunk::Stderr(b)) if open => {
                        open = send(event(json!({"data": {"stderr": B64.encode(&b)}})), &tx).await;
                    }
                    Some(_) => {}
                    None => break,
                },
                _ = tick.tick(), if open => {
                    open = send(event(json!({"keepalive": {}})), &tx).await;
                }
            }
        }
        lock(&shared.inputs).remove(&(id, pid));
        let code = boxed.exit_code(&attached.exec).await.unwrap_or(-1);
        if open {
            let end = json!({"end": {"exitCode": code, "exited": true, "status": format!("exit status {code}")}});
            if send(event(end), &tx).await {
                let _ = send(envelope(2, b"{}"), &tx).await;
            }
        }
    });
    let stream = tokio_stream_of(rx);
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/connect+json")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| status(StatusCode::INTERNAL_SERVER_ERROR, "response"))
}

fn tokio_stream_of(
    mut rx: tokio::sync::mpsc::Receiver<std::result::Result<Bytes, std::io::Error>>,
) -> impl futures::Stream<Item = std::result::Result<Bytes, std::io::Error>> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

async fn unary_gate(
    s: &Shared,
    h: &HeaderMap,
    body: &[u8],
) -> std::result::Result<(String, Arc<VendorBox>, u32, Value), Refusal> {
    let (id, boxed, _) = envd_gate(s, h)?;
    let v: Value = serde_json::from_slice(body)
        .map_err(|_| (StatusCode::BAD_REQUEST, "the request is not JSON"))?;
    let pid = v["process"]["pid"]
        .as_u64()
        .ok_or((StatusCode::BAD_REQUEST, "process.pid is required"))? as u32;
    Ok((id, boxed, pid, v))
}

pub(super) async fn send_input(
    State(s): State<Arc<Shared>>,
    h: HeaderMap,
    body: Bytes,
) -> Response {
    let (id, _, pid, v) = match unary_gate(&s, &h, &body).await {
        Ok(g) => g,
        Err((c, m)) => return status(c, m),
    };
    let Some(bytes) = v["input"]["stdin"]
        .as_str()
        .and_then(|b| B64.decode(b).ok())
    else {
        return status(StatusCode::BAD_REQUEST, "input.stdin is not base64");
    };
    let Some(input) = lock(&s.inputs).get(&(id, pid)).cloned() else {
        return status(StatusCode::NOT_FOUND, "no such process with stdin");
    };
    let mut held = input.lock().await;
    let Some(w) = held.as_mut() else {
        return status(StatusCode::NOT_FOUND, "stdin closed");
    };
    match async {
        w.write_all(&bytes).await?;
        w.flush().await
    }
    .await
    {
        Ok(()) => axum::Json(json!({})).into_response(),
        Err(_) => status(StatusCode::NOT_FOUND, "the process is gone"),
    }
}

pub(super) async fn send_signal(
    State(s): State<Arc<Shared>>,
    h: HeaderMap,
    body: Bytes,
) -> Response {
    let (_, boxed, pid, v) = match unary_gate(&s, &h, &body).await {
        Ok(g) => g,
        Err((c, m)) => return status(c, m),
    };
    let sig = match v["signal"].as_str() {
        Some("SIGNAL_SIGKILL") => "KILL",
        Some("SIGNAL_SIGTERM") => "TERM",
        _ => {
            return status(
                StatusCode::BAD_REQUEST,
                "signal is SIGNAL_SIGKILL or SIGNAL_SIGTERM",
            );
        }
    };
    match boxed.signal(pid, sig).await {
        Ok(()) => axum::Json(json!({})).into_response(),
        Err(_) => status(StatusCode::NOT_FOUND, "no such process"),
    }
}
