//! What a model and a client read besides tools: the skills as prompts and
//! resources (their examples run for real), a computer's info, and a cut
//! output read back in pages.

use rmcp::model::{GetPromptRequestParams, ResourceContents};
use serde_json::json;

use super::support::*;

fn contents_text(c: &ResourceContents) -> Vec<u8> {
    use base64::Engine as _;
    match c {
        ResourceContents::TextResourceContents { text, .. } => text.clone().into_bytes(),
        ResourceContents::BlobResourceContents { blob, .. } => {
            base64::engine::general_purpose::STANDARD
                .decode(blob)
                .unwrap()
        }
        other => panic!("unexpected contents {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_are_prompts_and_resources_and_their_examples_run() {
    let Some((server, client, _)) = Server::local_stdio(&[]).await else {
        return;
    };
    let info = client.peer_info().unwrap();
    let instructions = info.instructions.clone().unwrap_or_default();
    assert!(
        instructions.contains("skill://sandbox/SKILL.md"),
        "{instructions}"
    );

    let prompts = client.list_all_prompts().await.unwrap();
    assert!(prompts.iter().any(|p| p.name == "sandbox"), "{prompts:?}");
    let got = client
        .get_prompt(GetPromptRequestParams::new("sandbox"))
        .await
        .unwrap();
    let body = serde_json::to_string(&got.messages).unwrap();
    assert!(body.contains("Working in a sandbox"), "{body}");
    let e = client
        .get_prompt(GetPromptRequestParams::new("nope"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no prompt \\\"nope\\\"; the prompts are: sandbox")
            || e.contains("no prompt \"nope\"; the prompts are: sandbox"),
        "{e}"
    );

    let resources = resource_uris(&client).await;
    assert!(
        resources.iter().any(|u| u == "skill://sandbox/SKILL.md"),
        "{resources:?}"
    );
    let skill = read(&client, "skill://sandbox/SKILL.md").await;
    let md = String::from_utf8(contents_text(&skill.contents[0])).unwrap();
    assert!(md.starts_with("---\nname: sandbox\n"), "{md}");

    // Before the first call: no computer, said so, and none made.
    let info = read(&client, "computer://default/info").await;
    let t = String::from_utf8(contents_text(&info.contents[0])).unwrap();
    assert!(t.contains("no default computer yet"), "{t}");
    assert!(server.computers().is_empty());

    run_examples(&client, "sandbox").await;

    // After: the info is the computer's.
    let info = read(&client, "computer://default/info").await;
    let v: serde_json::Value = serde_json::from_slice(&contents_text(&info.contents[0])).unwrap();
    assert_eq!(v["provider"], "local", "{v}");
    assert!(v["handle"].as_str().unwrap().starts_with("c-"), "{v}");
    assert_eq!(v["name"], "default");
    let e = read_refused(&client, "computer://nobody/info").await;
    assert!(e.contains("no computer"), "{e}");
    client.cancel().await.unwrap();
}

/// The Skills extension (SEP-2640) as rmcp's client speaks it: declared,
/// `skills/list` gives the session's skills, each file's digest matches the
/// bytes `resources/read` gives, and `skills/get` answers one by URI and
/// refuses another as invalid params. No computer is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_are_listed_and_got_over_the_skills_extension_with_digests_that_match() {
    use rmcp::model::{GetSkillRequestParams, SkillResources};
    let Some((server, client, _)) = Server::local_stdio(&["--kind", "browser"]).await else {
        return;
    };
    let info = client.peer_info().unwrap();
    assert!(
        info.capabilities.supports_skills(),
        "{:?}",
        info.capabilities
    );
    let listed = client.list_skills(None).await.unwrap();
    let uris: Vec<&str> = listed.skills.iter().map(|s| s.uri.as_str()).collect();
    assert_eq!(
        uris,
        ["skill://browser/SKILL.md", "skill://sandbox/SKILL.md"]
    );
    for skill in &listed.skills {
        let SkillResources::Files(files) = &skill.resources else {
            panic!("{skill:?}")
        };
        for f in files {
            let read = read(&client, &f.uri).await;
            f.verify(&contents_text(&read.contents[0])).unwrap();
        }
        let got = client
            .get_skill(GetSkillRequestParams::new(skill.uri.clone()))
            .await
            .unwrap();
        assert_eq!(&got.skill, skill);
    }
    let e = client
        .get_skill(GetSkillRequestParams::new("skill://desktop/SKILL.md"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("is no skill of this server"), "{e}");
    assert!(server.computers().is_empty());
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_output_is_linked_and_reads_back_in_pages_byte_for_byte() {
    let Some((_server, client, _)) = Server::local_stdio(&[]).await else {
        return;
    };
    let r = call(&client, "exec", json!({"command": "seq 1 50000"})).await;
    assert!(structured(&r)["truncated"] == true, "{}", text(&r));
    let link = r
        .content
        .iter()
        .find_map(|c| match c {
            rmcp::model::ContentBlock::ResourceLink(l) => Some(l.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no resource_link in {:?}", r.content));
    assert!(link.uri.starts_with("computer://c-"), "{}", link.uri);
    assert!(link.uri.ends_with(".stdout"), "{}", link.uri);
    let want: String = (1..=50000).map(|i| format!("{i}\n")).collect();
    assert_eq!(link.size, Some(want.len() as u64));
    let mut got = Vec::new();
    let mut page = 1;
    loop {
        let uri = format!("{}?page={page}", link.uri);
        let r = read(&client, uri).await;
        got.extend(contents_text(&r.contents[0]));
        let meta = &r.meta.as_ref().unwrap().0["computer-mcp/page"];
        if meta["page"] == meta["pages"] {
            break;
        }
        page += 1;
    }
    assert_eq!(got.len(), want.len());
    assert!(got == want.as_bytes(), "the pages differ from the output");
    let past = format!("{}?page={}", link.uri, page + 1);
    let e = read_refused(&client, past).await;
    assert!(
        e.contains(&format!("pages 1 to {page} of 65536 bytes")),
        "{e}"
    );
    client.cancel().await.unwrap();
}

/// Making or releasing a computer changes the caller's resources (its
/// `computer://<handle>/info`): the server says so, and says it can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_and_released_computers_change_the_resource_list() {
    let Some((_server, client, recorder)) = Server::local_stdio(&[]).await else {
        return;
    };
    let caps = &client.peer_info().unwrap().capabilities;
    assert_eq!(
        caps.resources.as_ref().and_then(|r| r.list_changed),
        Some(true),
        "{caps:?}"
    );
    let infos = |uris: Vec<String>| -> Vec<String> {
        uris.into_iter()
            .filter(|u| u.starts_with("computer://"))
            .collect()
    };
    assert!(infos(resource_uris(&client).await).is_empty());

    // A call that reads no new computer says nothing.
    call_ok(&client, "computer_list", json!({})).await;
    // The first call makes the default computer: one change, its info listed.
    call_ok(&client, "exec", json!({"command": "true"})).await;
    let changes = |n: usize| {
        let recorder = recorder.clone();
        async move {
            for _ in 0..250 {
                if recorder.resource_changes() >= n {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            assert_eq!(recorder.resource_changes(), n);
        }
    };
    changes(1).await;
    let listed = infos(resource_uris(&client).await);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed[0].ends_with("/info"), "{listed:?}");
    // Another call on it changes nothing.
    call(&client, "exec", json!({"command": "true"})).await;
    // computer_new and computer_release each change the list.
    call_ok(&client, "computer_new", json!({"name": "build"})).await;
    changes(2).await;
    assert_eq!(infos(resource_uris(&client).await).len(), 2);
    call_ok(&client, "computer_release", json!({"computer": "build"})).await;
    changes(3).await;
    assert_eq!(infos(resource_uris(&client).await), listed);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(recorder.resource_changes(), 3);
    client.cancel().await.unwrap();
}

/// Every example of the skill `name` (`skills/<name>/SKILL.md`), in order,
/// on the session's default computer: each call succeeds and answers what
/// the skill shows, whole (`…` for what differs from run to run).
pub async fn run_examples(client: &Client, name: &str) {
    let skill_text = std::fs::read_to_string(format!(
        "{}/../skills/{name}/SKILL.md",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let examples = computer_tools::skills::examples(&skill_text);
    assert!(examples.len() >= 5, "{name}: {examples:?}");
    // A process's id is the computer's next (`p1` in the skill is the
    // first process_start's): the examples' ids map to the real ones.
    let mut ids: Vec<(String, String)> = Vec::new();
    let mut started = 0;
    for (tool, a, want) in examples {
        let mut a = a.clone();
        let mut want = want.clone();
        for (from, to) in &ids {
            a = a.replace(&format!("\"{from}\""), &format!("\"{to}\""));
            want = want.replace(&format!("{from} is "), &format!("{to} is "));
        }
        // process_start, or `process` with the act start (as a desktop or
        // a browser lists it).
        let starts =
            tool == "process_start" || (tool == "process" && a.contains("\"action\": \"start\""));
        if starts {
            started += 1;
            want = want.replace(&format!("\"p{started}\""), "\"…\"");
            want = want.replace(&format!("started p{started} "), "started … ");
        }
        let args: serde_json::Value = serde_json::from_str(&a).unwrap();
        let r = call(client, &tool, args).await;
        if starts {
            let id = structured(&r)["id"].as_str().unwrap().to_string();
            ids.push((format!("p{started}"), id));
        }
        assert!(!is_error(&r), "{name}: {tool} {a}: {}", text(&r));
        // The answer shown is the tool's own, whole; the computer's line
        // after it is left out of the skill.
        let own = r.content[0]
            .as_text()
            .map(|t| t.text.trim_end())
            .unwrap_or("");
        assert!(
            computer_tools::skills::answer_matches(&want, own),
            "{name}: {tool} {a}: the skill shows\n{want}\nbut the tool answered\n{own}"
        );
        if !tool.starts_with("computer_") {
            let last = r.content.last().and_then(|c| c.as_text());
            assert!(
                last.is_some_and(|l| l.text.starts_with("(on computer ")),
                "{last:?}"
            );
        }
    }
}
