//! A network allowlist on the Kubernetes provider, against the fake API
//! and the test hosts of `support/net.rs` (11.0.<n>.0/24 and the `eg.test`
//! DNS, routed from Docker's default bridge). The computer's pod reaches
//! only its proxy pod, which reaches the world (the fake's CNI puts it on
//! the default bridge, resolving with the test's DNS): a listed host is
//! reached, an unlisted one refused in the proxy's words, both policies
//! are exactly what a cluster enforces, and release and the sweep leave
//! nothing. Needs root (the veth pair), a Docker engine and the test
//! image, as `docker_egress.rs` does.

use computer_providers::kubernetes::egress;
use computer_providers::provider::Provider;
use computer_providers::types::{ComputerRef, ErrorCode, NetworkKind, NetworkPolicy, Release};
use computer_testkit::{need, on_path};
use tokio_util::sync::CancellationToken;

use super::kubernetes::{NS, rig};
use super::support::{EGRESS, net, run, text};

/// bash words that send a GET of `url` for `host` to the proxy init
/// relays (127.0.0.1:3128 in the pod) and print its answer.
fn get(url: &str, host: &str) -> String {
    format!(
        "exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'GET {url} HTTP/1.1\\r\\nHost: {host}\\r\\nConnection: close\\r\\n\\r\\n' >&3 && cat <&3; echo"
    )
}

/// What `script` (bash) prints in the computer `c`, \r taken out.
async fn said_in(p: &dyn Provider, c: &ComputerRef, script: &str) -> String {
    let conn = p.connect(c, &CancellationToken::new()).await.unwrap();
    let out = run(
        &conn.client,
        &format!("bash -c '{}'", script.replace('\'', "'\\''")),
    )
    .await;
    conn.client.close();
    text(&out).replace('\r', "")
}

/// A rig `name` whose pods resolve with the test hosts' DNS (subnet `n`
/// of `support/net.rs`), or None (a skip in words) without what they need.
async fn with_test_hosts(name: &str, n: u8) -> Option<(super::kubernetes::Rig, net::Net)> {
    if !can_run() {
        return None;
    }
    let r = rig(name).await?;
    let n = net::Net::up(n).await.unwrap();
    r.fake.knobs(|k| k.dns = vec![n.dns.ip().to_string()]);
    Some((r, n))
}

/// Through the proxy of `c`: every program is given it, the listed
/// good.eg.test answers, an unlisted name is refused in the proxy's words,
/// and no address is reached directly.
async fn reaches_only_its_name(p: &dyn Provider, c: &ComputerRef, n: &net::Net) {
    let script = format!(
        "echo \"$HTTP_PROXY\"; {}; {}; timeout 5 bash -c \"exec 3<>/dev/tcp/{}/80\" 2>/dev/null && echo direct || echo no-route",
        get("http://good.eg.test/", "good.eg.test"),
        get("http://unlisted.eg.test/", "unlisted.eg.test"),
        n.a
    );
    let said = said_in(p, c, &script).await;
    assert!(
        said.starts_with("http://127.0.0.1:3128\nHTTP/1.1 200"),
        "{said}"
    );
    assert!(
        said.contains(&format!("served-by={} host=good.eg.test path=/", n.a)),
        "{said}"
    );
    assert!(
        said.contains("HTTP/1.1 403")
            && said.contains("unlisted.eg.test is not on this box's network list"),
        "{said}"
    );
    assert!(said.trim_end().ends_with("no-route"), "{said}");
}

/// The root, ip and openssl the test hosts need, or a skip in words.
fn can_run() -> bool {
    need(
        "docker",
        nix::unistd::geteuid().is_root() && ["ip", "openssl"].iter().all(|t| on_path(t).is_some()),
        "the Kubernetes egress test makes a network namespace and a veth pair (root, ip) and a TLS test host (openssl)",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowlisted_pod_reaches_its_names_through_its_proxy_pod_and_nothing_else() {
    let _one = EGRESS.write().await;
    let Some((r, n)) = with_test_hosts("k8s-egress", 57).await else {
        return;
    };
    let cancel = CancellationToken::new();
    let mut spec = super::support::labelled("egress");
    spec.network = NetworkPolicy::Allow(vec!["good.eg.test".into()]);
    let made = r.provider.create(&spec, &cancel).await.unwrap();
    let c = made.computer;
    let proxy = egress::name_of(&c.id);
    let rb = made.network.unwrap();
    assert_eq!(rb.kind, NetworkKind::Allow, "{rb}");
    assert_eq!(
        rb.detail,
        format!(
            "NetworkPolicy {0} lets the pod send only to its egress proxy pod {proxy} on port 3128, which reaches good.eg.test on ports 80 and 443; NetworkPolicy {proxy} lets the proxy reach the cluster's DNS and the world less the private, shared, loopback and link-local ranges",
            c.id
        )
    );
    let mut pods = r.fake.pods();
    pods.sort();
    assert_eq!(pods, [format!("{NS}/{}", c.id), format!("{NS}/{proxy}")]);
    // The two policies, exactly as a cluster enforces them.
    let np = |name: &str| {
        r.fake
            .policy(NS, name)
            .unwrap_or_else(|| panic!("no NetworkPolicy {name}"))["spec"]
            .clone()
    };
    assert_eq!(
        np(&c.id),
        serde_json::json!({
            "podSelector": {"matchLabels": {"computer-mcp.pod": c.id}},
            "policyTypes": ["Ingress", "Egress"],
            "egress": [{"to": [{"podSelector": {"matchLabels": {"computer-mcp.pod": proxy}}}], "ports": [{"protocol": "TCP", "port": 3128}]}],
        })
    );
    assert_eq!(
        np(&proxy),
        serde_json::json!({
            "podSelector": {"matchLabels": {"computer-mcp.pod": proxy}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"computer-mcp.pod": c.id}}}], "ports": [{"protocol": "TCP", "port": 3128}]}],
            "egress": [
                {
                    "to": [{
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                    }],
                    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                },
                {
                    "to": [
                        {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16"]}},
                        {"ipBlock": {"cidr": "::/0", "except": ["::1/128", "::ffff:0:0/96", "fc00::/7", "fe80::/10"]}},
                    ],
                    "ports": [{"protocol": "TCP", "port": 80}, {"protocol": "TCP", "port": 443}],
                },
            ],
        })
    );
    reaches_only_its_name(&r.provider, &c, &n).await;
    // The read-back holds; another list is not the computer's.
    assert_eq!(r.provider.network(&c, None, &cancel).await.unwrap(), rb);
    let other = NetworkPolicy::Allow(vec!["unlisted.eg.test".into()]);
    let e = r
        .provider
        .network(&c, Some(&other), &cancel)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unsupported, "{e:?}");
    // Every verb the allowlist called is the Role's.
    let called = r.fake.verbs();
    let role = super::kubernetes::role_verbs();
    assert!(called.is_subset(&role), "{:?}", called.difference(&role));

    // A proxy pod changed behind our back is read back as such.
    r.fake.edit_pod(NS, &proxy, |p| {
        p["spec"]["containers"][0]["command"] = serde_json::json!(["/bin/sh"]);
    });
    let e = r.provider.network(&c, None, &cancel).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Refused, "{e:?}");
    assert!(
        e.message.contains(&format!(
            "the egress proxy pod {proxy} is not as it was made"
        )),
        "{e:?}"
    );
    r.provider
        .release(&c, Release::Delete, &cancel)
        .await
        .unwrap();
    assert_eq!(r.fake.pods(), Vec::<String>::new());
    assert_eq!(r.fake.policies(), Vec::<String>::new());

    // A computer deleted behind our back leaves its proxy and policies to
    // the sweep, once the proxy is older than a create's start bound.
    let c = r.provider.create(&spec, &cancel).await.unwrap().computer;
    r.delete_behind_our_back(&c.id).await;
    let sweeper = r.with(|s| s.start_s = Some(1));
    sweeper.sweep(&cancel).await.unwrap();
    assert_eq!(
        r.fake.pods(),
        [format!(
            "{NS}/{proxy_of}",
            proxy_of = egress::name_of(&c.id)
        )]
    );
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    sweeper.sweep(&cancel).await.unwrap();
    for _ in 0..100 {
        if r.fake.pods().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    sweeper.sweep(&cancel).await.unwrap();
    assert_eq!(r.fake.pods(), Vec::<String>::new());
    assert_eq!(r.fake.policies(), Vec::<String>::new());
    r.close().await;
}

/// A proxy pod reads Running before its program listens: the create
/// waits until the proxy answers from inside the computer, so the first
/// connection through it is served (the proxy's own refusal here, not
/// init's relay's 502); a proxy that never listens within
/// `--kubernetes-start-s` fails the create in words naming the bound,
/// and nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowlisted_computer_is_made_once_its_proxy_listens_and_refused_in_words_when_it_never_does()
 {
    let Some(r) = rig("k8s-egress-late").await else {
        return;
    };
    let late = std::time::Duration::from_secs(10);
    r.fake
        .knobs(|k| k.slow_start = Some(("-egress".into(), late)));
    let cancel = CancellationToken::new();
    let mut spec = super::support::labelled("egress-late");
    spec.network = NetworkPolicy::Allow(vec!["good.eg.test".into()]);
    let c = r.provider.create(&spec, &cancel).await.unwrap().computer;
    let said = said_in(
        &r.provider,
        &c,
        &get("http://unlisted.eg.test/", "unlisted.eg.test"),
    )
    .await;
    assert!(
        said.starts_with("HTTP/1.1 403")
            && said.contains("unlisted.eg.test is not on this box's network list"),
        "{said}"
    );
    r.provider
        .release(&c, Release::Delete, &cancel)
        .await
        .unwrap();

    // A proxy that never listens: the create's bound passes, it says so,
    // and the computer's pod, its proxy and both policies are deleted.
    r.fake
        .knobs(|k| k.slow_start = Some(("-egress".into(), std::time::Duration::from_secs(600))));
    let short = r.with(|s| s.start_s = Some(20));
    let e = short.create(&spec, &cancel).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Timeout, "{e:?}");
    assert!(
        e.message.contains("runs but did not answer on ")
            && e.message.contains(
                ":3128 within 20 s (--kubernetes-start-s), read from inside the computer "
            ),
        "{e:?}"
    );
    assert_eq!(r.fake.pods(), Vec::<String>::new());
    assert_eq!(r.fake.policies(), Vec::<String>::new());
    r.close().await;
}

/// `--kubernetes-api sandbox`: an allowlisted computer is a Sandbox of its
/// own (never a claim, even where a warm pool is ready), whose pod carries
/// the label both policies select; it reaches its listed name through its
/// proxy pod and nothing else, and release leaves no Sandbox, pod or
/// policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowlisted_sandbox_reaches_its_names_through_its_proxy_pod_and_is_never_claimed_warm()
{
    let _one = EGRESS.write().await;
    let Some((r, n)) = with_test_hosts("k8s-egress-sb", 58).await else {
        return;
    };
    let cancel = CancellationToken::new();
    let p = super::kubernetes_sandbox::sandbox_mode(&r);
    // A pool made ready by a first computer (network none) and an operator.
    super::kubernetes_sandbox::operator_keeps_one_warm(&r);
    let first = p
        .create(&super::support::labelled("first"), &cancel)
        .await
        .unwrap()
        .computer;
    let (_, warm) = super::kubernetes_sandbox::pool_ready(&r.fake).await;
    let mut spec = super::support::labelled("egress-sb");
    spec.network = NetworkPolicy::Allow(vec!["good.eg.test".into()]);
    let made = p.create(&spec, &cancel).await.unwrap();
    let c = made.computer;
    assert!(
        made.notes[0].starts_with(&format!("pod of the Sandbox {} ", c.id)),
        "{:?}",
        made.notes
    );
    assert_ne!(c.id, warm, "an allowlisted computer was claimed warm");
    assert!(
        r.fake
            .objects("sandboxes")
            .contains(&format!("{NS}/{}", c.id))
    );
    let rb = made.network.unwrap();
    assert_eq!(rb.kind, NetworkKind::Allow, "{rb}");
    assert!(
        rb.detail.starts_with(&format!(
            "NetworkPolicy {} lets the pod send only to its egress proxy pod {} on port 3128, which reaches good.eg.test on ports 80 and 443",
            c.id,
            egress::name_of(&c.id)
        )),
        "{rb}"
    );
    // The Sandbox's pod carries the label its policy selects.
    let pod = r.fake.pod(NS, &c.id).unwrap();
    assert_eq!(pod["metadata"]["labels"]["computer-mcp.pod"], c.id.as_str());
    reaches_only_its_name(&p, &c, &n).await;
    assert_eq!(p.network(&c, None, &cancel).await.unwrap(), rb);
    for c in [&c, &first] {
        p.release(c, Release::Delete, &cancel).await.unwrap();
    }
    r.fake.remove_pools().await;
    assert_eq!(r.fake.objects("sandboxes"), Vec::<String>::new());
    assert_eq!(r.fake.pods(), Vec::<String>::new());
    assert_eq!(r.fake.policies(), Vec::<String>::new());
    r.close().await;
}
