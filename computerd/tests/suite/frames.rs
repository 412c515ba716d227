//! Bytes frames on the wire: raw bytes after a line, negotiated in hello,
//! and what a hostile peer's bad frame gets.

use computerd::client::ComputerExt;
use computerd::protocol::*;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use super::support::*;

fn tar_of(name: &str, data: &[u8]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    b.append_data(&mut h, name, data).unwrap();
    b.into_inner().unwrap()
}

fn message(env: &Envelope) -> (String, Option<String>, String) {
    let e = env.error.as_ref().expect("an error reply");
    let d = e.data.as_ref().unwrap();
    (
        d.kind.as_str().to_string(),
        d.field.clone(),
        e.message.clone(),
    )
}

/// The words of an error reply, once its kind and field are as expected.
fn refusal(env: &Envelope, kind: &str, field: &str) -> String {
    let (k, f, msg) = message(env);
    assert_eq!((k.as_str(), f.as_deref()), (kind, Some(field)), "{msg}");
    msg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_offers_frames_and_a_push_and_a_pull_travel_in_them() {
    let init = or_skip!(Init::start());
    let mut raw = init.raw().await;
    raw.request(1, "hello", json!({})).await;
    let hello = raw.reply_to(1).await.result.unwrap();
    assert_eq!(hello["bytesFrames"], json!(limits::MAX_FRAME_BYTES));

    let dst = init.path("dst");
    raw.request(2, "tar.push.begin", json!({"path": dst})).await;
    let id = raw.reply_to(2).await.result.unwrap()["id"].clone();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    let ar = tar_of("f.bin", &data);
    let (a, b) = ar.split_at(100_000);
    // Two pipelined writes, the second first; newlines among the bytes are bytes.
    raw.send_frame(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tar.push.write",
               "params": {"id": id, "offset": a.len()}, "bytes": b.len()}),
        b,
    )
    .await;
    raw.send_frame(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tar.push.write",
               "params": {"id": id, "offset": 0}, "bytes": a.len()}),
        a,
    )
    .await;
    // Each is answered once its bytes are used, so the two replies may
    // come in either order.
    for reply in raw.replies_to(&[3, 4]).await {
        assert_eq!(reply.result, Some(json!({})), "{reply:?}");
    }
    raw.request(5, "tar.push.end", json!({"id": id})).await;
    assert_eq!(raw.reply_to(5).await.result, Some(json!({"entries": 1})));
    assert_eq!(std::fs::read(format!("{dst}/f.bin")).unwrap(), data);

    // files.read with replyBytes: the data comes after the line, not in it.
    raw.send(json!({"jsonrpc": "2.0", "id": 6, "method": "files.read",
                    "params": {"path": format!("{dst}/f.bin"), "length": 1000},
                    "replyBytes": true}))
        .await;
    let env = raw.reply_to(6).await;
    assert_eq!(env.bytes, Some(1000));
    assert_eq!(env.result, Some(json!({"eof": false, "size": 300_000})));
    assert_eq!(raw.recv_bytes(1000).await, data[..1000]);
    // Without it, the same read is base64 in the JSON, as ever.
    raw.request(
        7,
        "files.read",
        json!({"path": format!("{dst}/f.bin"), "length": 3}),
    )
    .await;
    let env = raw.reply_to(7).await;
    assert_eq!(env.bytes, None);
    assert_eq!(env.result.unwrap()["data"], json!("AAEC"));

    // The typed client negotiates by itself and gets the same tree back.
    let c = init.client().await;
    let pulled = c.pull_tar_bytes(&dst).await.unwrap();
    let back = init.path("back");
    let chunks: Vec<std::io::Result<Vec<u8>>> =
        pulled.chunks(200_000).map(|c| Ok(c.to_vec())).collect();
    assert_eq!(
        c.push_tar(&back, futures::stream::iter(chunks))
            .await
            .unwrap(),
        1
    );
    assert_eq!(std::fs::read(format!("{back}/f.bin")).unwrap(), data);
    let big: Vec<u8> = (0..1_500_000u32).map(|i| (i % 241) as u8).collect();
    let f = init.path("big.bin");
    c.write_file(&f, &big, Default::default()).await.unwrap();
    assert_eq!(c.read_file(&f).await.unwrap(), big);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misplaced_frame_is_refused_in_words_and_the_connection_goes_on() {
    let init = or_skip!(Init::start());
    let mut raw = init.raw().await;
    // Bytes that look like a request: they are read as bytes, never run.
    let sneaky = br#"
{"jsonrpc":"2.0","id":99,"method":"ping"}
"#;
    raw.send_frame(
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "bytes": sneaky.len()}),
        sneaky,
    )
    .await;
    let msg = refusal(&raw.recv().await, "invalid", "bytes");
    assert_eq!(
        msg,
        "ping takes no bytes frame (only files.write, tar.push.write and port.write do); its bytes were read and dropped"
    );

    // A push id that is not open on this connection.
    raw.send_frame(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tar.push.write",
               "params": {"id": "nope", "offset": 0}, "bytes": 5}),
        b"hello",
    )
    .await;
    refusal(&raw.reply_to(2).await, "not_found", "id");

    // data both in params and as the frame.
    let f = init.path("twice");
    raw.send_frame(
        json!({"jsonrpc": "2.0", "id": 3, "method": "files.write",
               "params": {"path": f, "data": "aGk="}, "bytes": 2}),
        b"hi",
    )
    .await;
    let msg = refusal(&raw.reply_to(3).await, "invalid", "data");
    assert!(msg.starts_with("data is given twice"), "{msg}");
    assert!(!exists(&f));

    // The stream is still in step: the next request is answered, and 99 never was.
    raw.request(4, "ping", json!({})).await;
    let env = raw.recv().await;
    assert_eq!(env.id, Some(Id::Num(4)));
    assert_eq!(env.result, Some(json!({})));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_over_the_limit_or_of_no_count_ends_the_connection_in_words() {
    let init = or_skip!(Init::start());
    let mut raw = init.raw().await;
    let over = limits::MAX_FRAME_BYTES + 1;
    raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tar.push.write",
                    "params": {"id": "x", "offset": 0}, "bytes": over}),
    )
    .await;
    let env = raw.recv().await;
    assert_eq!(env.id, Some(Id::Num(1)));
    let msg = refusal(&env, "limit", "bytes");
    assert!(
        msg.starts_with("bytes is 524289; the most is 524288"),
        "{msg}"
    );
    assert!(raw.ends().await, "the connection should end");

    for bad in [json!(-1), json!("ten"), json!(1.5)] {
        let mut raw = init.raw().await;
        raw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "ping", "bytes": bad}))
            .await;
        let env = raw.recv().await;
        let msg = refusal(&env, "invalid", "bytes");
        assert!(
            msg.starts_with(&format!(
                "bytes must be a count of the raw bytes after the line (0 to 524288), not {bad}"
            )),
            "{msg}"
        );
        assert!(raw.ends().await, "{bad}: the connection should end");
    }
    // The daemon itself goes on.
    let c = init.client().await;
    c.call(&PingParams {}).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_cut_short_is_refused_and_its_request_never_runs() {
    let init = or_skip!(Init::start());
    let mut raw = init.raw().await;
    let f = init.path("short");
    raw.send_frame(
        json!({"jsonrpc": "2.0", "id": 7, "method": "files.write",
               "params": {"path": f}, "bytes": 100}),
        &[b'x'; 10],
    )
    .await;
    raw.write.shutdown().await.unwrap();
    let env = raw.recv().await;
    assert_eq!(env.id, Some(Id::Num(7)));
    let msg = refusal(&env, "invalid", "bytes");
    assert_eq!(
        msg,
        "the bytes frame was cut short: 10 of its 100 bytes came before the end of input; the request was not run"
    );
    assert!(raw.ends().await);
    assert!(!exists(&f), "a cut-short write ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_reads_sent_ahead_with_offsets_come_back_in_place() {
    let init = or_skip!(Init::start());
    let src = init.path("one.bin");
    let data: Vec<u8> = (0..5000u32).map(|i| (i % 249) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    let mut raw = init.raw().await;
    raw.request(1, "tar.pull.begin", json!({"path": src})).await;
    let id = raw.reply_to(1).await.result.unwrap()["id"].clone();
    // Sent last-first: each waits for the reads before it.
    for k in (0..4u64).rev() {
        raw.send(
            json!({"jsonrpc": "2.0", "id": 10 + k, "method": "tar.pull.read",
                        "params": {"id": id, "maxBytes": 1024, "offset": k * 1024},
                        "replyBytes": true}),
        )
        .await;
    }
    let mut archive = vec![Vec::new(); 4];
    for _ in 0..4 {
        let env = raw.recv().await;
        let Some(Id::Num(n)) = env.id else {
            panic!("{env:?}")
        };
        assert_eq!(env.result, Some(json!({"eof": false})), "{n}");
        archive[(n - 10) as usize] = raw.recv_bytes(env.bytes.unwrap() as usize).await;
    }
    let archive = archive.concat();
    assert_eq!(&archive[..7], b"one.bin");
    assert_eq!(&archive[512..1024], &data[..512]);
    assert_eq!(&archive[1024..4096], &data[512..3584]);

    // A repeat, and a read too far ahead, are refused naming offset.
    raw.request(20, "tar.pull.read", json!({"id": id, "offset": 1024}))
        .await;
    let msg = refusal(&raw.reply_to(20).await, "invalid", "offset");
    assert_eq!(
        msg,
        "offset 1024: the pull has returned 4096 bytes already, so this read would repeat some"
    );
    let far = 4096 + limits::MAX_PULL_AHEAD_BYTES + 1;
    raw.request(21, "tar.pull.read", json!({"id": id, "offset": far}))
        .await;
    let (_, field, msg) = message(&raw.reply_to(21).await);
    assert_eq!(field.as_deref(), Some("offset"));
    assert!(
        msg.contains("over the 16777216 a read may wait ahead"),
        "{msg}"
    );

    // A read waiting ahead is cancelled by $/cancelRequest.
    raw.request(
        22,
        "tar.pull.read",
        json!({"id": id, "maxBytes": 16, "offset": 8192}),
    )
    .await;
    raw.send(json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 22}}))
        .await;
    let (kind, _, _) = message(&raw.reply_to(22).await);
    assert_eq!(kind, "aborted");

    // The rest, then a read past the end gets the end.
    raw.request(23, "tar.pull.read", json!({"id": id, "offset": 4096}))
        .await;
    let rest = raw.reply_to(23).await.result.unwrap();
    assert_eq!(rest["eof"], json!(true));
    raw.request(24, "tar.pull.read", json!({"id": id, "offset": 1 << 20}))
        .await;
    assert_eq!(
        raw.reply_to(24).await.result,
        Some(json!({"data": "", "eof": true}))
    );
    raw.request(25, "tar.pull.end", json!({"id": id})).await;
    assert_eq!(raw.reply_to(25).await.result, Some(json!({})));
}
