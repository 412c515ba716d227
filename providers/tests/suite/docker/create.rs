//! How a Docker create goes and what it leaves when it does not: recipes
//! built once, a daemon refused or silent, a create dropped at any point,
//! root without capabilities.

use computer_testkit::or_skip;
use std::time::{Duration, Instant};

use bollard::query_parameters::ListContainersOptionsBuilder;
use computer_providers::docker::{DockerOptions, DockerProvider, ImageSource, cache};
use computer_providers::{
    AttachBy, ComputerSpec, ErrorCode, Labels, NetworkPolicy, Provider, Release, label,
};
use tokio_util::sync::CancellationToken;

use super::{Env, env, run, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recipe_is_built_once_by_one_flight_and_tagged_by_its_hash() {
    let e = or_skip!(env("recipe").await);
    let cancel = CancellationToken::new();
    // A recipe unique to this run, so the build really happens.
    let recipe = format!(
        "FROM {}\nRUN echo {} > /etc/recipe-run\n",
        e.image,
        std::process::id()
    );
    let tag = computer_providers::docker::image::recipe_tag(&recipe);
    let mut opts = DockerOptions::new(e.computerd.clone(), e.cache.path().join("cache"));
    opts.image = Some(ImageSource::Recipe(recipe.clone()));
    let p = DockerProvider::new(opts).unwrap();
    // Two concurrent creates share one build.
    let spec = e.spec(600_000);
    let (a, b) = tokio::join!(p.create(&spec, &cancel), p.create(&spec, &cancel));
    let (a, b) = (a.unwrap().computer, b.unwrap().computer);
    let img = e.docker.inspect_image(&tag).await.unwrap();
    let labels = img.config.unwrap().labels.unwrap();
    assert_eq!(
        labels[label::RECIPE],
        cache::sha256_bytes(recipe.as_bytes())
    );
    let conn = p.connect(&a, &cancel).await.unwrap();
    assert_eq!(
        text(&run(&conn.client, "cat /etc/recipe-run").await),
        format!("{}\n", std::process::id())
    );
    conn.client.close();
    for c in [&a, &b] {
        p.release(c, Release::Delete, &cancel).await.unwrap();
    }
    // A recipe that fails says which step, in its own words.
    let mut opts = DockerOptions::new(e.computerd.clone(), e.cache.path().join("cache"));
    opts.image = Some(ImageSource::Recipe(format!(
        "FROM {}\nRUN exit 3\n",
        e.image
    )));
    let p = DockerProvider::new(opts).unwrap();
    let err = p.create(&e.spec(600_000), &cancel).await.unwrap_err();
    assert_eq!(err.field.as_deref(), Some("recipe"));
    assert!(err.message.contains("exit 3"), "{}", err.message);
    // The failed step's container is not left behind.
    let all = e
        .docker
        .list_containers(Some(ListContainersOptionsBuilder::new().all(true).build()))
        .await
        .unwrap();
    assert!(
        !all.iter()
            .any(|c| c.command.as_deref().is_some_and(|c| c.contains("exit 3"))),
        "{all:?}"
    );
    let _ = e
        .docker
        .remove_image(
            &tag,
            None::<bollard::query_parameters::RemoveImageOptions>,
            None,
        )
        .await;
    e.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_of_another_version_is_refused() {
    let e = or_skip!(env("version").await);
    let cancel = CancellationToken::new();
    // A stand-in daemon: init sleeps, stdio answers hello as version 0.0.0.
    let fake = e.cache.path().join("fake-computerd");
    std::fs::write(
        &fake,
        "#!/bin/sh\ncase \"$1\" in\ninit) exec sleep 600;;\nstdio) read -r line; id=$(echo \"$line\" | sed 's/.*\"id\":\\([0-9]*\\).*/\\1/'); printf '{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"version\":\"0.0.0\",\"os\":\"linux\",\"kind\":\"linux\",\"arch\":\"amd64\",\"groups\":[\"exec\",\"files\",\"processes\"]}}\\n' \"$id\"; cat >/dev/null;;\nesac\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let name = "computer-00000000fe01";
    let mut plan = e.plan(name, 600_000, &Labels::new());
    plan.daemon = fake.clone();
    e.make(plan.body(), name, true).await;
    let c = computer_providers::ComputerRef::by_id("docker", name);
    let err = e.p.connect(&c, &cancel).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Refused, "{err:?}");
    assert!(
        err.message.contains(&format!(
            "the daemon is version 0.0.0, where this provider is {}",
            computerd::VERSION
        )),
        "{}",
        err.message
    );
    // attach names the daemon it binds, which is not the provider's copy.
    let err =
        e.p.attach(&AttachBy::Id(name.into()), &cancel)
            .await
            .unwrap_err();
    assert!(
        err.message.contains("it binds the daemon"),
        "{}",
        err.message
    );
    assert!(e.exists(name).await);
    e.clean().await;
}

/// A static x86-64 Linux program of `code` alone: the smallest ELF
/// executable (one loadable segment, no interpreter), so the provider's
/// static check takes it as a daemon.
#[cfg(target_arch = "x86_64")]
fn tiny_elf(code: &[u8]) -> Vec<u8> {
    const BASE: u64 = 0x40_0000;
    let size = (64 + 56 + code.len()) as u64;
    let mut f = Vec::new();
    f.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    f.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    f.extend_from_slice(&0x3eu16.to_le_bytes()); // x86-64
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&(BASE + 64 + 56).to_le_bytes()); // entry
    f.extend_from_slice(&64u64.to_le_bytes()); // program headers
    f.extend_from_slice(&0u64.to_le_bytes()); // no sections
    f.extend_from_slice(&0u32.to_le_bytes());
    for h in [64u16, 56, 1, 0, 0, 0] {
        f.extend_from_slice(&h.to_le_bytes());
    }
    f.extend_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    f.extend_from_slice(&5u32.to_le_bytes()); // read, execute
    for v in [0, BASE, BASE, size, size, 0x1000] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.extend_from_slice(code);
    f
}

/// A provider whose daemon is `program` (a stand-in made by the test).
#[cfg(target_arch = "x86_64")]
fn provider_with_daemon(e: &Env, name: &str, program: &[u8]) -> DockerProvider {
    let path = e.cache.path().join(name);
    std::fs::write(&path, program).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut opts = DockerOptions::new(path, e.cache.path().join(format!("cache-{name}")));
    opts.image = Some(ImageSource::Name(e.image.clone()));
    DockerProvider::new(opts).unwrap()
}

#[cfg(target_arch = "x86_64")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_daemon_never_answers_hello_deletes_its_container_and_names_the_step() {
    let e = or_skip!(env("no-hello").await);
    let cancel = CancellationToken::new();
    // A daemon that exits at once with code 3 (mov eax, 60; mov edi, 3;
    // syscall): the container stops before any hello.
    let exits = provider_with_daemon(
        &e,
        "exits-at-once",
        &tiny_elf(&[0xb8, 0x3c, 0, 0, 0, 0xbf, 3, 0, 0, 0, 0x0f, 0x05]),
    );
    let err = exits.create(&e.spec(600_000), &cancel).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Refused, "{err:?}");
    assert!(
        err.message.starts_with(
            "creating the Docker computer failed at waiting for its daemon's hello: the computer stopped as it started (exit code 3)"
        ),
        "{}",
        err.message
    );
    assert!(
        err.message.contains(" was deleted") && !err.message.contains("could not be deleted"),
        "{}",
        err.message
    );
    let left = e.ours().await;
    assert!(left.is_empty(), "left behind: {left:?}");

    // A daemon that runs and never answers (pause in a loop): its hello
    // times out, and the running container goes too.
    let hangs = provider_with_daemon(
        &e,
        "never-answers",
        &tiny_elf(&[0xb8, 0x22, 0, 0, 0, 0x0f, 0x05, 0xeb, 0xf7]),
    );
    let err = hangs.create(&e.spec(600_000), &cancel).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Timeout, "{err:?}");
    assert!(
        err.message.starts_with(
            "creating the Docker computer failed at waiting for its daemon's hello: the computer's daemon did not answer within 30 s: the computer's daemon did not answer hello within 10 s"
        ),
        "{}",
        err.message
    );
    let name = err
        .message
        .split("the container ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap()
        .to_string();
    assert!(name.starts_with("computer-"), "{}", err.message);
    assert!(!e.exists(&name).await, "{name} is still there");
    let left = e.ours().await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `create` driven until `made` holds of what this test has left (the
/// create still running), then dropped there; fails if create returns
/// first or nothing appears within 40 s.
async fn drop_when<F>(e: &Env, p: &DockerProvider, spec: &ComputerSpec, what: &str, made: F)
where
    F: Fn(&(Vec<String>, Vec<String>)) -> bool,
{
    let cancel = CancellationToken::new();
    let mut create = p.create(spec, &cancel);
    let watch = async {
        loop {
            if made(&e.left().await) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        r = &mut create => panic!("{what}: create returned before the drop: {:?}", r.map(|c| c.computer.id)),
        w = tokio::time::timeout(Duration::from_secs(40), watch) => {
            assert!(w.is_ok(), "{what}: never appeared within 40 s");
        }
    }
    drop(create);
}

fn allowlisted(mut s: ComputerSpec) -> ComputerSpec {
    s.network = NetworkPolicy::Allow(vec!["pypi.org".into()]);
    s
}

/// A create whose future is dropped once it has made its container (or an
/// allowlist's proxy and volume) removes them at once, not at the sweep:
/// a daemon that never answers holds create in its wait for hello (30 s),
/// and, as the proxy too, in its wait for the proxy's ready line (10 s),
/// so each drop lands there.
#[cfg(target_arch = "x86_64")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_dropped_while_it_waits_for_its_daemon_or_proxy_leaves_nothing_within_5_s() {
    let e = or_skip!(env("dropped-waiting").await);
    let hangs = provider_with_daemon(
        &e,
        "never-answers",
        &tiny_elf(&[0xb8, 0x22, 0, 0, 0, 0x0f, 0x05, 0xeb, 0xf7]),
    );
    let running = |n: &String| n.ends_with('*');
    drop_when(&e, &hangs, &e.spec(600_000), "the computer", |(c, _)| {
        c.iter().any(running)
    })
    .await;
    let took = e.gone_within(Duration::from_secs(5), "the computer").await;
    eprintln!("the computer was removed {took:?} after the drop");
    drop_when(
        &e,
        &hangs,
        &allowlisted(e.spec(600_000)),
        "the egress proxy",
        |(c, v)| c.iter().any(running) && !v.is_empty(),
    )
    .await;
    let took = e
        .gone_within(Duration::from_secs(5), "the egress proxy")
        .await;
    eprintln!("the egress proxy and volume were removed {took:?} after the drop");
    // Nothing comes back from an engine call the drop cut off.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(e.left().await, (vec![], vec![]));
}

/// A create dropped at any point (a timeout around it at fractions of
/// how long a whole create takes here, or the moment its container
/// appears) leaves no container, proxy or volume within 5 s; one that
/// returns keeps its computer (and an allowlist its proxy and volume).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_dropped_at_any_point_leaves_nothing_and_one_that_returns_keeps_its_computer() {
    let e = or_skip!(env("dropped").await);
    let cancel = CancellationToken::new();
    // A create that returns keeps what it made after the drop guard's
    // removal would have run; how long each took sets the drops' bounds.
    let t = Instant::now();
    let c = e.sandbox(&cancel).await;
    let took = t.elapsed();
    let t = Instant::now();
    let a =
        e.p.create(&allowlisted(e.spec(600_000)), &cancel)
            .await
            .unwrap()
            .computer;
    let took_allowlisted = t.elapsed();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let (containers, volumes) = e.left().await;
    assert_eq!(containers.len(), 3, "{containers:?}");
    assert_eq!(volumes.len(), 1, "{volumes:?}");
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    assert_eq!(text(&run(&conn.client, "echo up").await), "up\n");
    conn.client.close();
    for c in [c, a] {
        e.p.release(&c, Release::Delete, &cancel).await.unwrap();
    }
    assert_eq!(e.left().await, (vec![], vec![]));

    let (mut dropped, mut dropped_with_parts, mut finished) = (0, 0, 0);
    for (spec, whole) in [
        (e.spec(600_000), took),
        (allowlisted(e.spec(600_000)), took_allowlisted),
    ] {
        for part in [0.02, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.97] {
            let bound = whole.mul_f64(part);
            let what = format!("{:?} dropped after {bound:?}", spec.network.kind());
            match tokio::time::timeout(bound, e.p.create(&spec, &cancel)).await {
                Ok(made) => {
                    // Done within the bound: it is kept.
                    let c = made.unwrap().computer;
                    assert!(e.exists(&c.id).await, "{what}: {} is gone", c.id);
                    e.p.release(&c, Release::Delete, &cancel).await.unwrap();
                    finished += 1;
                }
                Err(_) => {
                    dropped += 1;
                    if e.left().await != (vec![], vec![]) {
                        dropped_with_parts += 1;
                    }
                }
            }
            e.gone_within(Duration::from_secs(5), &what).await;
        }
    }
    eprintln!(
        "a create took {took:?} ({took_allowlisted:?} allowlisted); {dropped} dropped ({dropped_with_parts} with something made), {finished} finished"
    );
    // Dropped the moment the container (or the proxy) appears: in the
    // engine's create or start, or the wait for hello.
    drop_when(&e, &e.p, &e.spec(600_000), "the computer", |(c, _)| {
        !c.is_empty()
    })
    .await;
    e.gone_within(
        Duration::from_secs(5),
        "the computer dropped at its appearance",
    )
    .await;
    drop_when(
        &e,
        &e.p,
        &allowlisted(e.spec(600_000)),
        "the egress proxy",
        |(c, _)| !c.is_empty(),
    )
    .await;
    e.gone_within(
        Duration::from_secs(5),
        "the proxy dropped at its appearance",
    )
    .await;
    // Nothing comes back from an engine call a drop cut off.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(e.left().await, (vec![], vec![]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_may_ask_for_root_which_holds_no_capability() {
    let e = or_skip!(env("root").await);
    let cancel = CancellationToken::new();
    let mut spec = e.spec(600_000);
    spec.user = Some("0".into());
    let c = e.p.create(&spec, &cancel).await.unwrap().computer;
    assert_eq!(c.user.as_deref(), Some("0:0"));
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    let out = text(
        &run(
            &conn.client,
            "id -u; grep -E '^Cap(Eff|Bnd)' /proc/self/status; touch /etc/x 2>&1 && echo wrote",
        )
        .await,
    );
    assert!(out.starts_with("0\n"), "{out}");
    assert!(
        out.ends_with("touch: cannot touch '/etc/x': Read-only file system\n"),
        "{out}"
    );
    assert!(
        out.contains("CapEff:\t0000000000000000") && out.contains("CapBnd:\t0000000000000000"),
        "{out}"
    );
    conn.client.close();
    e.p.release(&c, Release::Delete, &cancel).await.unwrap();
    e.clean().await;
}

/// The bridges (`computerd stdio` execs) the engine has started in `id`.
async fn bridges_started(e: &Env, id: &str) -> usize {
    let i = e
        .docker
        .inspect_container(
            id,
            None::<bollard::query_parameters::InspectContainerOptions>,
        )
        .await
        .unwrap();
    i.exec_ids.unwrap_or_default().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connect_after_create_takes_its_connection_and_the_next_opens_its_own() {
    let e = or_skip!(env("handover").await);
    let cancel = CancellationToken::new();
    let c = e.sandbox(&cancel).await;
    assert_eq!(bridges_started(&e, &c.id).await, 1);
    let first = e.p.connect(&c, &cancel).await.unwrap();
    assert_eq!(
        text(&run(&first.client, "echo one").await),
        "one\n",
        "the create's connection works for its caller"
    );
    assert_eq!(bridges_started(&e, &c.id).await, 1);
    let second = e.p.connect(&c, &cancel).await.unwrap();
    assert_eq!(text(&run(&second.client, "echo two").await), "two\n");
    assert_eq!(bridges_started(&e, &c.id).await, 2);
    first.client.close();
    second.client.close();
    // One nobody connects to is closed by the release, which leaves nothing.
    let unused = e.sandbox(&cancel).await;
    e.p.release(&unused, Release::Delete, &cancel)
        .await
        .unwrap();
    e.p.release(&c, Release::Delete, &cancel).await.unwrap();
    assert_eq!(e.left().await, (vec![], vec![]));
}
