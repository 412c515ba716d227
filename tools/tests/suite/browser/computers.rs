//! The page tools on whole computers: a local browser computer that serves
//! and posts its own form (with an upload), and a vendor's browser through
//! its fake.

use super::*;

/// Two file inputs: one plain, one hidden behind a button that opens its
/// chooser; what each gets is read back in the page (the title counts it).
const UPLOAD: &str = r#"<!doctype html><html><head><title>Upload</title></head><body>
<label>One <input type="file" id="one"></label>
<input type="file" id="many" multiple style="display:none">
<button id="pick" onclick="document.getElementById('many').click()">Choose files</button>
<script>
window.read = [];
for (const id of ['one', 'many']) {
  document.getElementById(id).addEventListener('change', async e => {
    for (const f of e.target.files) window.read.push([id, f.name, await f.text()]);
    document.title = 'Read ' + window.read.length;
  });
}
</script></body></html>"#;

const INSIDE_SERVER: &str = r#"import http.server
FORM = open('/tmp/site/form.html', 'rb').read()
THANKS = b'<!doctype html><title>Thanks</title><p>Thanks.</p>'
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, page):
        self.send_response(200)
        self.send_header('Content-Type', 'text/html; charset=utf-8')
        self.send_header('Content-Length', str(len(page)))
        self.end_headers()
        self.wfile.write(page)
    def do_GET(self):
        if self.path == '/':
            self.reply(FORM)
        else:
            self.reply(open('/tmp/site/' + self.path.strip('/').replace('..', ''), 'rb').read())
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get('Content-Length', 0)))
        with open('/tmp/site/posted.txt', 'ab') as f:
            f.write(body + b'\n')
        self.reply(THANKS)
    def log_message(self, *a):
        pass
http.server.HTTPServer(('127.0.0.1', 8125), H).serve_forever()
"#;

/// The whole stack on a local computer of kind browser: Chromium inside it
/// on its pipe, a page the computer serves itself (network none), written
/// and started with the sandbox tools the family lists beside the page
/// tools, filled by refs and posted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_browser_computer_fills_and_posts_a_form_it_serves_itself() {
    use computer_providers::local::{LocalOptions, LocalProvider};
    use computer_providers::{ComputerSpec, Provider, Release};
    use computer_testkit::{computerd_bin, need, need_root};
    use computer_tools::Offer;

    if !need_root() || !need_chromium() {
        return;
    }
    let Some(bin) = computerd_bin() else {
        need("root", false, "the computerd binary is not built");
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let p = LocalProvider::new(LocalOptions {
        browser: true,
        max_lifetime_ms: 3_600_000,
        ..LocalOptions::new(state.path().to_path_buf(), bin)
    })
    .unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut spec = ComputerSpec::sandbox(600_000);
    spec.kind = SettingKind::Browser;
    let made = p.create(&spec, &cancel).await.unwrap();
    let conn = p.connect(&made.computer, &cancel).await.unwrap();
    let family = registry().family(SettingKind::Browser).unwrap();
    // cdp is the provider's to declare; the daemon's groups come in hello.
    let mut groups = p.capabilities().groups.clone();
    groups.extend(conn.hello.groups.iter().copied());
    let offer = Offer {
        groups: &groups,
        extend: false,
    };
    // Offered, listed by itself or inside `process` (process_start).
    for n in ["browser_snapshot", "write_file", "process_start", "exec"] {
        assert!(family.offers(n, &offer), "{n} is not offered");
    }
    assert!(family.names(&offer).contains(&"process"));
    let b = Browser {
        _chromium: None,
        ctx: ToolContext::new(conn.client.clone()),
        results: Mutex::new(Vec::new()),
    };
    b.write_file("/tmp/site/form.html", FORM).await;
    b.write_file("/tmp/site/server.py", INSIDE_SERVER).await;
    b.ok(
        "process_start",
        json!({"command": "exec python3 /tmp/site/server.py"}),
    )
    .await;
    b.ok(
        "exec",
        json!({"command": "for i in $(seq 100); do grep -q ':1FBD 00000000:0000 0A' /proc/net/tcp && exit 0; sleep 0.05; done; exit 1"}),
    )
    .await;

    b.go("http://127.0.0.1:8125/").await;
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    let [name, pw, colour, agree] = Browser::refs_of(
        &snap,
        [
            "textbox \"Name\"",
            "textbox \"Password\"",
            "combobox",
            "checkbox \"I agree\"",
        ],
    );
    b.ok("browser_type", json!({"ref": name, "text": "Grace"}))
        .await;
    b.ok("browser_type", json!({"ref": pw, "text": SECRET}))
        .await;
    b.ok("browser_select", json!({"ref": colour, "value": "Blue"}))
        .await;
    b.ok("browser_select", json!({"ref": agree, "value": true}))
        .await;
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    assert_has(&snap, "(password, not shown)");
    let send = Browser::ref_of(&snap, "button \"Send\"");
    b.ok("browser_click", json!({"ref": send})).await;
    b.wait_title("Thanks").await;
    let all = b.results.lock().unwrap().join("\n");
    assert!(!all.contains(SECRET), "the password showed in a result");

    // What the computer's server got (read past the page tools).
    let (posted, _) = b
        .ok("exec", json!({"command": "cat /tmp/site/posted.txt"}))
        .await;
    assert_has(&posted, &format!("name=Grace&pw={SECRET}&color=b&agree=on"));

    // Files of the computer chosen in file inputs: one directly, two
    // through the chooser a button opens; the page reads them back.
    assert!(family.offers("browser_upload", &offer));
    b.write_file("/tmp/site/upload.html", UPLOAD).await;
    b.write_file("/tmp/up/a.txt", "alpha").await;
    b.write_file("/tmp/up/b.txt", "bravo-bravo").await;
    b.go("http://127.0.0.1:8125/upload.html").await;
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    let [one, pick] = Browser::refs_of(&snap, ["\"One\"", "button \"Choose files\""]);
    for (paths, words) in [
        (
            json!(["/tmp/up/a.txt", "/tmp/up/b.txt"]),
            &["takes one file (it has no `multiple`)"][..],
        ),
        (
            json!(["/tmp/up/none.txt"]),
            &["paths[0] /tmp/up/none.txt", "write the file first"],
        ),
        (json!(["a.txt"]), &["paths[0] must be an absolute path"]),
        (json!(["/tmp/up"]), &["paths[0] /tmp/up is a directory"]),
    ] {
        let e = b
            .err("browser_upload", json!({"ref": one, "paths": paths}))
            .await;
        for w in words {
            assert_has(&e, w);
        }
    }
    let (t, _) = b
        .ok(
            "browser_upload",
            json!({"ref": one, "paths": ["/tmp/up/a.txt"]}),
        )
        .await;
    assert_ends(&t, "now holds a.txt (5 bytes)");
    let (t, _) = b
        .ok(
            "browser_upload",
            json!({"ref": pick, "paths": ["/tmp/up/a.txt", "/tmp/up/b.txt"]}),
        )
        .await;
    assert_has(&t, "clicked it and answered the file chooser");
    assert_has(&t, "now holds a.txt (5 bytes), b.txt (11 bytes)");
    b.wait_title("Read 3").await;
    let read = b.js("JSON.stringify(window.read)").await;
    assert_eq!(
        read,
        serde_json::to_string(
            r#"[["one","a.txt","alpha"],["many","a.txt","alpha"],["many","b.txt","bravo-bravo"]]"#
        )
        .unwrap()
    );
    drop(b);
    drop(conn);
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
}

/// The page tools on a vendor's browser: the Browserbase fake
/// (computer-fakes), whose sessions are a real headless Chromium behind a CDP URL
/// that is a secret. Only the page tools are listed (no sandbox), the form
/// is filled and posted, and the URL shows in no result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_tools_drive_a_vendors_browser_through_its_fake() {
    use computer_fakes::vendor::{FakeVendor, Kind};
    use computer_providers::{
        BrowserbaseProvider, BrowserbaseSettings, ComputerSpec, Configure, HostDefaults,
        NetworkPolicy, Provider, Release,
    };
    use computer_tools::Offer;

    if !need_chromium() {
        return;
    }
    let fake = FakeVendor::start(Kind::Browserbase).await.unwrap();
    let p = BrowserbaseProvider::configure(
        BrowserbaseSettings {
            api_key: Some(fake.key().into()),
            project_id: None,
            api_url: Some(fake.api_url().into()),
        },
        &HostDefaults::default(),
    )
    .unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut spec = ComputerSpec::sandbox(10 * 60_000);
    spec.kind = SettingKind::Browser;
    spec.network = NetworkPolicy::Open;
    let made = p.create(&spec, &cancel).await.unwrap();
    let conn = p.connect(&made.computer, &cancel).await.unwrap();
    let mut groups = p.capabilities().groups.clone();
    groups.extend(conn.hello.groups.iter().copied());
    let family = registry().family(SettingKind::Browser).unwrap();
    let offer = Offer {
        groups: &groups,
        extend: false,
    };
    // Every page tool but browser_upload (it needs the computer's files),
    // some listed inside `browser`; no sandbox tool.
    let names: Vec<&str> = family.offered(&offer).map(|t| t.name).collect();
    assert_eq!(names.len(), 18, "{names:?}");
    assert!(!names.contains(&"browser_upload"), "{names:?}");
    assert!(!names.contains(&"exec"), "{names:?}");
    assert!(!family.names(&offer).contains(&"process"));

    let b = Browser {
        _chromium: None,
        ctx: ToolContext::new(conn.client.clone()),
        results: Mutex::new(Vec::new()),
    };
    let (base, seen) = serve().await;
    b.go(&format!("{base}/")).await;
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    let [name, pw] = Browser::refs_of(&snap, ["textbox \"Name\"", "textbox \"Password\""]);
    b.ok("browser_type", json!({"ref": name, "text": "Lin"}))
        .await;
    b.ok(
        "browser_type",
        json!({"ref": pw, "text": SECRET, "submit": true}),
    )
    .await;
    b.wait_title("Thanks").await;
    let posted = seen.body_of("POST /submit").expect("the form was posted");
    assert_starts(&posted, &format!("name=Lin&pw={SECRET}&"));
    let (shot, _) = b.ok("browser_screenshot", json!({})).await;
    assert_starts(&shot, "frame b1: ");
    let all = b.results.lock().unwrap().join("\n");
    assert!(!all.contains(SECRET), "the password showed in a result");
    assert!(
        !all.contains(fake.canary()),
        "the CDP URL showed in a result"
    );
    drop(b);
    drop(conn);
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
}
