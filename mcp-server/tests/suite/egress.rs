//! A server started with `--network allow:…`: its computers reach the
//! world only through their egress proxy, `computer_info` shows the list as
//! read back, and a request off the list is refused by the proxy in words
//! that reach the model through the tool's result (which rule refused it,
//! and how to allow it). Nothing here leaves this machine: the refused name
//! is never looked up, and a direct connect has no route.

use serde_json::json;

use super::support::*;

const ARGS: &[&str] = &["--network", "allow:good.eg.test,*.pkg.eg.test,1.2.3.0/24"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowlisted_computer_shows_its_list_and_the_refusals_reach_the_model() {
    if !need_root() {
        return;
    }
    run(Server::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowlisted_docker_computer_shows_its_list_and_the_refusals_reach_the_model() {
    if !need_root() {
        return;
    }
    let _shared = DOCKER_ENGINE.read().await;
    let server = or_skip!(Server::docker());
    run(server).await;
}

async fn run(server: Server) {
    let (client, _) = server.stdio(ARGS).await;

    // The list, read back from the computer's proxy.
    call_ok(&client, "computer_info", json!({})).await;
    call_ok(&client, "exec", json!({"command": "true"})).await;
    let info = call(&client, "computer_info", json!({})).await;
    let t = text(&info);
    for entry in ["good.eg.test", "*.pkg.eg.test", "1.2.3.0/24"] {
        assert!(
            t.contains(entry),
            "computer_info does not show {entry}: {t}"
        );
    }

    // The programs are told the proxy (the variables, in both cases).
    let r = call(
        &client,
        "exec",
        json!({"command": "echo \"$HTTP_PROXY|$https_proxy|$NO_PROXY\""}),
    )
    .await;
    assert!(
        text(&r).contains("http://127.0.0.1:3128|http://127.0.0.1:3128|localhost,127.0.0.1,::1"),
        "{}",
        text(&r)
    );

    // A name off the list: the proxy's 403 and its words, through the
    // program's own output, over plain HTTP and over CONNECT. bash's
    // /dev/tcp speaks to the relay, so no client program is needed.
    let ask = |line: &str| {
        format!(
            "exec 3<>/dev/tcp/127.0.0.1/3128 && printf '{line}\\r\\nHost: bad.eg.test\\r\\n\\r\\n' >&3 && timeout 10 cat <&3"
        )
    };
    for line in [
        "GET http://bad.eg.test/ HTTP/1.1",
        "CONNECT bad.eg.test:443 HTTP/1.1",
    ] {
        let r = call(
            &client,
            "exec",
            json!({"command": ask(line), "timeout_ms": 20000}),
        )
        .await;
        let t = text(&r);
        assert!(t.contains("403"), "{line}: {t}");
        assert!(
            t.contains("bad.eg.test is not on this box's network list")
                && t.contains("--network allow:NAME"),
            "{line}: the refusal does not say which rule or how to allow it: {t}"
        );
    }

    // Port 22 of a listed name: refused before any lookup.
    let r = call(
        &client,
        "exec",
        json!({"command": ask("CONNECT good.eg.test:22 HTTP/1.1"), "timeout_ms": 20000}),
    )
    .await;
    let t = text(&r);
    assert!(t.contains("403") && t.contains("22"), "{t}");

    // A program that ignores the proxy reaches nothing: there is no route.
    let r = call(
        &client,
        "exec",
        json!({"command": "exec 3<>/dev/tcp/10.99.0.1/80 && echo connected", "timeout_ms": 20000}),
    )
    .await;
    let t = text(&r);
    assert!(
        !t.contains("connected"),
        "a direct connect went through: {t}"
    );
    assert!(t.contains("unreachable"), "{t}");

    client.cancel().await.unwrap();
}
