//! read_file, write_file, edit_file and list_files end to end.

use base64::Engine as _;
use computerd::client::{ComputerExt, WriteFileOptions};
use rmcp::model::ContentBlock;
use serde_json::json;

use super::support::*;

/// A 1x1 RGBA PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0A, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
    0x42, 0x60, 0x82,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_edit_and_read_a_file_with_line_numbers() {
    let s = or_skip!(Sandbox::start().await);
    let path = format!("{}/notes/deep/a.txt", s.home());
    let (t, v) = s
        .ok(
            "write_file",
            json!({"path": path, "content": "one\ntwo\nthree\n"}),
        )
        .await;
    assert_eq!(t, format!("wrote 14 bytes to {path}"));
    assert_eq!(v, json!({"path": path, "bytes_written": 14}));

    let (t, v) = s
        .ok(
            "edit_file",
            json!({"path": path, "old_string": "two", "new_string": "TWO\n2b"}),
        )
        .await;
    assert_eq!(v["replacements"], 1);
    assert_eq!(v["first_line"], 2);
    assert_ends(&t, "     1\tone\n     2\tTWO\n     3\t2b\n     4\tthree\n");

    let (t, v) = s.ok("read_file", json!({"path": path})).await;
    assert_eq!(
        t,
        format!("{path}: lines 1-4 of 4\n     1\tone\n     2\tTWO\n     3\t2b\n     4\tthree\n")
    );
    assert_eq!(v["total_lines"], 4);
    assert!(v.get("next_offset").is_none());

    let (t, v) = s
        .ok("read_file", json!({"path": path, "offset": 2, "limit": 2}))
        .await;
    assert_has(&t, "     2\tTWO\n     3\t2b\n");
    assert!(!t.contains("one") && !t.contains("three"), "{t}");
    assert_eq!(v["next_offset"], 4);
    assert_has(&t, "read_file with offset 4 to continue");

    // Ambiguous, then all; missing; the same text; the file is unchanged by refusals.
    s.write_file(&path, "a-a-a\n").await;
    let t = s
        .err(
            "edit_file",
            json!({"path": path, "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert_starts(&t, "old_string occurs 3 times in");
    let t = s
        .err(
            "edit_file",
            json!({"path": path, "old_string": "zz", "new_string": "b"}),
        )
        .await;
    assert_starts(&t, "old_string was not found in");
    s.err_has(
        "edit_file",
        json!({"path": path, "old_string": "a", "new_string": "a"}),
        "the same",
    )
    .await;
    let (_, v) = s
        .ok(
            "edit_file",
            json!({"path": path, "old_string": "a", "new_string": "bb", "replace_all": true}),
        )
        .await;
    assert_eq!(v["replacements"], 3);
    let bytes = s.client.read_file(&path).await.unwrap();
    assert_eq!(bytes, b"bb-bb-bb\n");
    // A file that is not there: write_file makes it, edit_file refuses.
    s.err_has(
        "edit_file",
        json!({"path": format!("{}/none.txt", s.home()), "old_string": "a", "new_string": "b"}),
        "write_file",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_files_are_read_in_windows_that_fit_the_budget() {
    let s = or_skip!(Sandbox::start().await);
    let path = format!("{}/long.txt", s.home());
    let content: String = (1..=5000).map(|i| format!("line number {i}\n")).collect();
    s.client
        .write_file(&path, content.as_bytes(), WriteFileOptions::default())
        .await
        .unwrap();
    let (t, v) = s.ok("read_file", json!({"path": path})).await;
    // 2000 lines would be about 40 KiB: the budget stops the window first.
    assert!(t.len() <= 24 * 1024 + 300, "{}", t.len());
    let next = v["next_offset"].as_u64().unwrap();
    assert!(next > 1000 && next < 2000, "{next}");
    assert_has(&t, "output budget");
    let (t, v) = s
        .ok(
            "read_file",
            json!({"path": path, "offset": next, "limit": 3}),
        )
        .await;
    assert_has(&t, &format!("{next:>6}\tline number {next}\n"));
    assert_eq!(v["last_line"], next + 2);
    // The end of the file gives its line count.
    let (t, v) = s
        .ok("read_file", json!({"path": path, "offset": 4999}))
        .await;
    assert_eq!(v["total_lines"], 5000);
    assert_starts(&t, &format!("{path}: lines 4999-5000 of 5000"));
    let (t, _) = s
        .ok("read_file", json!({"path": path, "offset": 6000}))
        .await;
    assert!(
        t.contains("offset 6000 is past the end; the file has 5000 lines"),
        "{t}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_comes_back_as_image_content() {
    let s = or_skip!(Sandbox::start().await);
    let path = format!("{}/dot.png", s.home());
    s.client
        .write_file(&path, PNG, WriteFileOptions::default())
        .await
        .unwrap();
    let r = s.call("read_file", json!({"path": path})).await;
    assert_eq!(r.is_error, Some(false));
    assert_eq!(r.content.len(), 2);
    assert_eq!(
        text(&r),
        format!("{path}: image/png image, 1x1 pixels, {} bytes", PNG.len())
    );
    let ContentBlock::Image(img) = &r.content[1] else {
        panic!("the second block is not an image: {:?}", r.content[1]);
    };
    assert_eq!(img.mime_type, "image/png");
    let data = base64::engine::general_purpose::STANDARD
        .decode(&img.data)
        .unwrap();
    assert_eq!(data, PNG);
    let v = r.structured_content.unwrap();
    assert_eq!(
        v,
        json!({"path": path, "kind": "image", "size": PNG.len(), "mime_type": "image/png", "width": 1, "height": 1})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_files_and_directories_are_refused_with_a_hint() {
    let s = or_skip!(Sandbox::start().await);
    let path = format!("{}/blob.bin", s.home());
    let bytes: Vec<u8> = (0..1000u32).map(|i| (i % 256) as u8).collect();
    s.client
        .write_file(&path, &bytes, WriteFileOptions::default())
        .await
        .unwrap();
    let t = s.err("read_file", json!({"path": path})).await;
    assert_starts(
        &t,
        &format!("{path} is a binary file (1000 bytes): it holds NUL bytes"),
    );
    assert_has(&t, "xxd");
    let latin1 = format!("{}/latin1.txt", s.home());
    s.client
        .write_file(&latin1, b"caf\xe9 au lait\n", WriteFileOptions::default())
        .await
        .unwrap();
    s.err_has("read_file", json!({"path": latin1}), "it is not UTF-8 text")
        .await;

    s.err_has("read_file", json!({"path": s.home()}), "use list_files")
        .await;
    let t = s
        .err(
            "read_file",
            json!({"path": format!("{}/missing", s.home())}),
        )
        .await;
    assert_starts(&t, &format!("reading {}/missing: ", s.home()));
    s.err_has(
        "edit_file",
        json!({"path": path, "old_string": "a", "new_string": "b"}),
        "binary",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_files_goes_depth_levels_down() {
    let s = or_skip!(Sandbox::start().await);
    let home = s.home();
    for (p, c) in [
        ("a/b/c/deep.txt", "x"),
        ("a/top.txt", "hello"),
        ("z.txt", ""),
    ] {
        s.client
            .write_file(
                &format!("{home}/{p}"),
                c.as_bytes(),
                WriteFileOptions {
                    mode: None,
                    parents: true,
                },
            )
            .await
            .unwrap();
    }
    std::os::unix::fs::symlink("z.txt", format!("{home}/link")).unwrap();
    let paths = |v: &serde_json::Value| -> Vec<String> {
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap().to_string())
            .collect()
    };
    let (t, v) = s.ok("list_files", json!({"path": home, "depth": 1})).await;
    assert_eq!(paths(&v), ["a", "link", "z.txt"]);
    assert_eq!(
        t,
        format!(
            "{home} (depth 1): 3 entries\nd          -  a/\nl          5  link -> z.txt\nf          0  z.txt\n"
        )
    );
    let (_, v) = s.ok("list_files", json!({"path": home})).await;
    assert_eq!(v["depth"], 2);
    assert_eq!(paths(&v), ["a", "a/b", "a/top.txt", "link", "z.txt"]);
    let (_, v) = s
        .ok(
            "list_files",
            json!({"path": format!("{home}/"), "depth": 5}),
        )
        .await;
    assert_eq!(
        paths(&v),
        [
            "a",
            "a/b",
            "a/b/c",
            "a/b/c/deep.txt",
            "a/top.txt",
            "link",
            "z.txt"
        ]
    );
    assert_eq!(v["truncated"], false);
    s.err_has(
        "list_files",
        json!({"path": format!("{home}/z.txt")}),
        "read_file",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_listing_stops_at_the_budget_with_a_note() {
    let s = or_skip!(Sandbox::start().await);
    let dir = format!("{}/many", s.home());
    let script =
        format!("mkdir -p {dir} && cd {dir} && for i in $(seq 1 3000); do : > file-$i.txt; done");
    s.ok("exec", json!({"command": script})).await;
    let (t, v) = s.ok("list_files", json!({"path": dir})).await;
    assert_eq!(v["truncated"], true);
    assert!(t.len() <= 24 * 1024 + 400, "{}", t.len());
    assert_has(&t, "the listing stopped at the output budget");
    let n = v["entries"].as_array().unwrap().len();
    assert!(n > 500 && n < 3000, "{n}");
}
