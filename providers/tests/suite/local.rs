//! The local provider against real computers (needs root here, and the
//! computerd binary the workspace build puts beside the test binaries).

use computer_providers::local::{LocalOptions, LocalProvider};
use computer_providers::{
    AttachBy, ComputerSpec, ErrorCode, Labels, NetworkKind, NetworkPolicy, NetworkRead, Provider,
    Release, label,
};
use computer_testkit::{computerd_bin as computerd, need, or_skip};
use computerd::client::ComputerExt;
use computerd::protocol::ExecParams;
use tokio_util::sync::CancellationToken;

use super::support::run;

fn provider(state: &std::path::Path) -> Option<Box<dyn Provider>> {
    if !need(
        "root",
        nix::unistd::geteuid().is_root(),
        "local computers need root here",
    ) {
        return None;
    }
    let bin = computerd();
    if !need(
        "root",
        bin.is_some(),
        "the computerd binary is not built (run cargo test --workspace)",
    ) {
        return None;
    }
    let opts = LocalOptions {
        max_lifetime_ms: 3_600_000,
        ..LocalOptions::new(state.to_path_buf(), bin.unwrap())
    };
    Some(Box::new(LocalProvider::new(opts).unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_computer_is_made_reached_found_and_released() {
    let state = tempfile::tempdir().unwrap();
    let p = or_skip!(provider(state.path()));
    let cancel = CancellationToken::new();
    let caps = p.capabilities();
    assert_eq!(caps.groups, vec!["exec", "files", "processes"]);
    assert!(caps.networks.contains(&NetworkKind::None));

    // Made for 10 min, by a server whose lifetime bound is 20 min.
    let mut spec = ComputerSpec::sandbox(600_000);
    spec.max_lifetime_ms = Some(1_200_000);
    spec.labels.insert(label::SESSION.into(), "s-test".into());
    let made = p.create(&spec, &cancel).await.unwrap();
    let c = made.computer.clone();
    assert!(c.running && c.id.starts_with("local-"), "{c:?}");
    let read_back = made.network.as_ref().unwrap();
    assert_eq!(read_back.kind, NetworkKind::None, "{read_back:?}");
    assert!(
        read_back
            .to_string()
            .starts_with("none (a network namespace of its own: interfaces "),
        "{read_back}"
    );

    let conn = p.connect(&c, &cancel).await.unwrap();
    let r = run(
        &conn.client,
        "id -u; echo $HOME; cat /proc/net/dev | tail -n +3 | cut -d: -f1",
    )
    .await;
    let out = String::from_utf8(r.stdout.0).unwrap();
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    // A uid of its own, which no host account has, and the ref says which.
    let user = c.user.clone().unwrap();
    assert_eq!(Some(lines[0]), user.split(':').next(), "{out}");
    assert!(lines[0].parse::<u32>().unwrap() >= 0x7000_0000, "{out}");
    assert_eq!(Some(lines[1]), c.home.as_deref(), "{out}");
    assert!(lines[2..].contains(&"lo"), "{out}");
    conn.client.close();

    let net = p.network(&c, None, &cancel).await.unwrap();
    assert_eq!(net.kind, NetworkKind::None);
    let e = p
        .network(&c, Some(&NetworkPolicy::Open), &cancel)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unsupported);

    let mut by = Labels::new();
    by.insert(label::SESSION.into(), "s-test".into());
    let listed = p.list(&by, &cancel).await.unwrap();
    assert_eq!(listed.len(), 1);
    // List reads the network back from the computer, as network does.
    match &listed[0].network {
        Some(NetworkRead::Policy(r)) => {
            assert_eq!(r.kind, NetworkKind::None, "{r:?}");
            assert_eq!(r.detail, read_back.detail, "{r:?}");
        }
        other => panic!("list read the network back as {other:?}"),
    }
    // The brief listing a count reads: the same computer, as running, with
    // the same labels and deadline (its state parsed once, kept until the
    // file changes).
    let brief = |b: &[computer_providers::ComputerRef]| {
        b.iter()
            .map(|r| {
                (
                    r.id.clone(),
                    r.labels.clone(),
                    r.running,
                    r.deadline.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        brief(&p.list_brief(&by, &cancel).await.unwrap()),
        brief(&listed)
    );
    assert_eq!(
        p.attach(&AttachBy::Labels(by.clone()), &cancel)
            .await
            .unwrap()
            .id,
        c.id
    );

    // An extend within the server's bound moves the deadline; init's
    // maximum is that bound (20 min from creation), not the provider's cap
    // (1 h here): neither the provider's extend nor a deadline.extend on
    // init's socket moves the deadline past it.
    let extended = p.extend(&c, 900_000, &cancel).await.unwrap();
    assert!(extended > c.deadline, "{extended} vs {}", c.deadline);
    let e = p.extend(&c, 1_500_000, &cancel).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Limit, "{e:?}");
    assert!(e.message.contains("20 min from its creation"), "{e:?}");
    let conn = p.connect(&c, &cancel).await.unwrap();
    let at = computerd::launch::Time::from_now(std::time::Duration::from_secs(1_500)).to_string();
    let e = conn
        .client
        .call_typed(&computerd::protocol::DeadlineExtendParams { at })
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Some(computerd::protocol::ErrorKind::Limit), "{e}");
    conn.client.close();
    let listed = p.list(&by, &cancel).await.unwrap();
    assert_eq!(listed[0].deadline, extended);
    // The brief listing read the state before the extend rewrote it.
    assert_eq!(
        brief(&p.list_brief(&by, &cancel).await.unwrap()),
        brief(&listed)
    );

    p.release(&c, Release::Delete, &cancel).await.unwrap();
    assert!(p.list(&by, &cancel).await.unwrap().is_empty());
    assert!(p.list_brief(&by, &cancel).await.unwrap().is_empty());
    assert!(!state.path().join("computers").join(&c.id).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_the_local_provider_cannot_honour_is_refused_in_words() {
    let state = tempfile::tempdir().unwrap();
    let p = or_skip!(provider(state.path()));
    let mut spec = ComputerSpec::sandbox(600_000);
    spec.image = Some("debian".into());
    assert_eq!(p.check(&spec).unwrap_err().field.as_deref(), Some("image"));
    let mut spec = ComputerSpec::sandbox(600_000);
    // An allowlist is offered now (suite/egress.rs); one over a private
    // range is refused on the network field.
    spec.network = NetworkPolicy::Allow(vec!["pypi.org".into(), "10.0.0.0/8".into()]);
    let e = p.check(&spec).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("network"));
    assert!(
        e.message
            .contains("\"10.0.0.0/8\": the range holds private addresses"),
        "{e:?}"
    );
    let mut spec = ComputerSpec::sandbox(600_000);
    spec.sizes.memory_mb = Some(10);
    let e = p.check(&spec).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("memoryMb"), "{e:?}");
    let mut spec = ComputerSpec::sandbox(600_000);
    spec.sizes.pids = Some(99_999);
    let e = p.check(&spec).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("pids"), "{e:?}");
    let spec = ComputerSpec::sandbox(7_200_000);
    assert_eq!(
        p.check(&spec).unwrap_err().field.as_deref(),
        Some("lifetime")
    );
    // Nothing was made by any of them.
    assert!(
        !state.path().join("computers").exists()
            || std::fs::read_dir(state.path().join("computers"))
                .unwrap()
                .next()
                .is_none()
    );
}

/// Issue 34: a provider that ends beside a running one (a `doctor`, a
/// one-shot `exec`) never takes the state directory's cgroup group from
/// under it, and a group removed anyway (by a server of an earlier version,
/// or by hand) is made again with the next computer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_ending_beside_others_leaves_them_able_to_make_computers() {
    use computer_providers::local::cgroup::{Cgroups, group_for};
    let state = tempfile::tempdir().unwrap();
    let server = or_skip!(provider(state.path()));
    let second = provider(state.path()).unwrap();
    let group = Cgroups::detect(&group_for(state.path()))
        .unwrap()
        .group_dirs();
    let exists = |dirs: &[std::path::PathBuf]| dirs.iter().filter(|d| d.is_dir()).count();
    assert_eq!(exists(&group), group.len(), "{group:?}");

    drop(provider(state.path()).unwrap());
    assert_eq!(
        exists(&group),
        group.len(),
        "a one-shot ending beside two servers removed their group {group:?}"
    );

    Cgroups::detect(&group_for(state.path()))
        .unwrap()
        .remove_group();
    assert_eq!(exists(&group), 0, "the group could not be removed by hand");
    let cancel = CancellationToken::new();
    let spec = ComputerSpec::sandbox(600_000);
    let mut made = Vec::new();
    for p in [&server, &second] {
        let c = p.create(&spec, &cancel).await.unwrap().computer;
        let r = p
            .connect(&c, &cancel)
            .await
            .unwrap()
            .client
            .call_typed(&ExecParams {
                argv: vec!["echo".into(), "made".into()],
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(String::from_utf8(r.stdout.0).unwrap(), "made\n");
        made.push(c);
    }
    assert_eq!(exists(&group), group.len(), "{group:?}");

    // Each made a spare ahead of its next computer, a cgroup with no
    // computer's state: a provider starting or sweeping beside them leaves
    // it alone (only one alone takes such a cgroup for a dead server's).
    let cgs = Cgroups::detect(&group_for(state.path())).unwrap();
    let spares = || -> Vec<String> {
        cgs.list_existing()
            .into_iter()
            .filter(|id| !state.path().join("computers").join(id).exists())
            .collect()
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while spares().is_empty() {
        assert!(std::time::Instant::now() < until, "no spare was made");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let before = spares();
    let third = provider(state.path()).unwrap();
    let swept = third.sweep(&cancel).await.unwrap();
    drop(third);
    let after = spares();
    assert!(
        before.iter().all(|s| after.contains(s)),
        "a provider starting, sweeping and ending beside them released a spare: {before:?}, then {after:?} (swept {swept:?})"
    );
    for (p, c) in [&server, &second].into_iter().zip(&made) {
        p.release(c, Release::Delete, &cancel).await.unwrap();
    }
    // The last provider to end still tidies the empty group away.
    drop(server);
    assert_eq!(exists(&group), group.len(), "{group:?}");
    drop(second);
    assert_eq!(
        exists(&group),
        0,
        "the last provider left its group {group:?}"
    );
}
