//! The table of cases. Each case is one entry: its id, level, group, needs
//! and body; the bodies live in a module per group.

mod browser;
mod desktop;
mod exec;
mod files;
mod fleet;
mod health;
mod limits;
mod phone;
mod process;
mod provider;

use computer_providers::types::NetworkKind;
use computerd::protocol::Group;

use super::{Case, CaseGroup, Level, Need, UserNeed};

const EXEC: &[Need] = &[Need::Group(Group::Exec)];
const FILES: &[Need] = &[Need::Group(Group::Files)];
const PROCESSES: &[Need] = &[Need::Group(Group::Processes)];
const NONE: &[Need] = &[];
const CDP: &[Need] = &[Need::Group(Group::Cdp)];
/// screen.watch, and a pointer move to change what it shows.
const POINTER_WATCH: &[Need] = &[Need::Group(Group::Screen), Need::Group(Group::InputPointer)];
/// What the fixture cases need: it is written in, started, and its log read.
const SCREEN_FIXTURE: &[Need] = &[
    Need::Group(Group::Screen),
    Need::Group(Group::Files),
    Need::Group(Group::Processes),
];
const POINTER_FIXTURE: &[Need] = &[
    Need::Group(Group::InputPointer),
    Need::Group(Group::Screen),
    Need::Group(Group::Files),
    Need::Group(Group::Processes),
];
const KEYS_FIXTURE: &[Need] = &[
    Need::Group(Group::InputKeys),
    Need::Group(Group::Files),
    Need::Group(Group::Processes),
];
const EXEC_FILES: &[Need] = &[Need::Group(Group::Exec), Need::Group(Group::Files)];
const EXEC_PROCESSES: &[Need] = &[Need::Group(Group::Exec), Need::Group(Group::Processes)];

macro_rules! case {
    ($id:literal, $level:ident, $group:ident, $needs:expr, $f:path) => {
        Case {
            id: $id,
            level: Level::$level,
            group: CaseGroup::$group,
            needs: $needs,
            run: |t| Box::pin($f(t)),
        }
    };
}

/// Every case of the suite, in the order a run takes them.
pub fn cases() -> Vec<Case> {
    [
        daemon_cases(),
        provider_cases(),
        machine_cases(),
        phone_cases(),
    ]
    .concat()
}

/// The cases of the daemon's groups: health, exec, files, tar and
/// process.
fn daemon_cases() -> Vec<Case> {
    vec![
        case!("health.hello", Core, Health, NONE, health::hello),
        case!("health.ping", Core, Health, NONE, health::ping),
        case!(
            "health.unknown-method",
            Core,
            Health,
            NONE,
            health::unknown_method
        ),
        case!(
            "health.kind-consistent",
            Core,
            Health,
            NONE,
            health::kind_consistent
        ),
        case!("exec.argv", Core, Exec, EXEC, exec::argv),
        case!("exec.streams", Core, Exec, EXEC, exec::streams),
        case!("exec.exit-code", Core, Exec, EXEC, exec::exit_code),
        case!("exec.cwd", Core, Exec, EXEC, exec::cwd),
        case!("exec.env", Core, Exec, EXEC, exec::env),
        case!("exec.timeout", Core, Exec, EXEC, exec::timeout),
        case!("exec.abort", Core, Exec, EXEC, exec::abort),
        case!("exec.truncation", Core, Exec, EXEC, exec::truncation),
        case!(
            "exec.setsid-escapee",
            Core,
            Exec,
            EXEC,
            exec::setsid_escapee
        ),
        case!("exec.unprivileged", Core, Exec, EXEC, exec::unprivileged),
        case!(
            "exec.home-writable",
            Core,
            Exec,
            EXEC_FILES,
            exec::home_writable
        ),
        case!(
            "exec.user-uid",
            Full,
            Exec,
            &[Need::Group(Group::Exec), Need::User(UserNeed::Uid)],
            exec::user_uid
        ),
        case!(
            "exec.user-root",
            Full,
            Exec,
            &[Need::Group(Group::Exec), Need::User(UserNeed::Root)],
            exec::user_root
        ),
        case!("files.write-read", Core, Files, FILES, files::write_read),
        case!("files.stat-list", Core, Files, FILES, files::stat_list),
        case!(
            "files.mkdir-move-remove",
            Core,
            Files,
            FILES,
            files::mkdir_move_remove
        ),
        case!("files.error-kinds", Core, Files, FILES, files::error_kinds),
        case!("tar.round-trip", Core, Tar, FILES, files::tar_round_trip),
        case!("tar.missing", Core, Tar, FILES, files::tar_missing),
        case!(
            "process.output-exit",
            Core,
            Process,
            PROCESSES,
            process::output_exit
        ),
        case!("process.stdin", Core, Process, PROCESSES, process::stdin),
        case!("process.signal", Core, Process, PROCESSES, process::signal),
        case!("process.list", Core, Process, PROCESSES, process::list),
    ]
}

/// The cases of what the provider promises: create, release, attach
/// and list, isolation, lifetime, drift, mounts and limits.
fn provider_cases() -> Vec<Case> {
    vec![
        case!(
            "provider.check-refuses",
            Core,
            Provider,
            NONE,
            provider::check_refuses
        ),
        case!("provider.create", Core, Provider, NONE, provider::create),
        case!("provider.attach", Core, Provider, NONE, provider::attach),
        case!("provider.list", Core, Provider, NONE, provider::list),
        case!(
            "provider.network-read-back",
            Core,
            Provider,
            &[Need::Network(NetworkKind::None)],
            provider::network_read_back
        ),
        case!("provider.release", Core, Provider, NONE, provider::release),
        case!("provider.stop", Core, Provider, NONE, provider::stop),
        case!(
            "provider.network-change-refused",
            Core,
            Provider,
            &[Need::Network(NetworkKind::None)],
            provider::network_change_refused
        ),
        case!(
            "isolation.network-none",
            Core,
            Isolation,
            &[Need::Group(Group::Exec), Need::Network(NetworkKind::None)],
            provider::network_none
        ),
        case!(
            "lifetime.deadline",
            Core,
            Lifetime,
            EXEC_PROCESSES,
            provider::deadline
        ),
        case!(
            "drift.refused",
            Core,
            Drift,
            &[Need::Drifted],
            provider::drift
        ),
        case!(
            "provider.release-older",
            Full,
            Provider,
            NONE,
            fleet::release_older
        ),
        case!(
            "lifetime.janitor",
            Full,
            Lifetime,
            &[Need::Janitor],
            fleet::janitor
        ),
        case!(
            "mount.run-folder-bind",
            Full,
            Mount,
            &[Need::Group(Group::Files), Need::Mount("bind")],
            fleet::mount_bind
        ),
        case!(
            "mount.undeclared-kind",
            Full,
            Mount,
            NONE,
            fleet::mount_undeclared
        ),
        case!(
            "limits.read-back",
            Full,
            Limits,
            &[Need::Group(Group::Exec), Need::Sizes],
            limits::read_back
        ),
        case!(
            "limits.pids",
            Full,
            Limits,
            &[Need::Group(Group::Exec), Need::Sizes],
            limits::pids
        ),
        case!(
            "limits.memory",
            Full,
            Limits,
            &[Need::Group(Group::Exec), Need::Sizes],
            limits::memory
        ),
        case!(
            "limits.work-size",
            Full,
            Limits,
            &[Need::Group(Group::Exec), Need::Sizes],
            limits::work_size
        ),
    ]
}

/// The cases of desktops and browsers: screen, input and CDP.
fn machine_cases() -> Vec<Case> {
    vec![
        case!(
            "screen.screenshot-size",
            Core,
            Screen,
            SCREEN_FIXTURE,
            desktop::screenshot_size
        ),
        case!("screen.watch", Core, Screen, POINTER_WATCH, desktop::watch),
        case!(
            "input.click-lands",
            Core,
            Input,
            POINTER_FIXTURE,
            desktop::click_lands
        ),
        case!(
            "input.type-text",
            Core,
            Input,
            KEYS_FIXTURE,
            desktop::type_text
        ),
        case!(
            "input.key-table-refuses-unknown",
            Core,
            Input,
            KEYS_FIXTURE,
            desktop::key_table_refuses_unknown
        ),
        case!(
            "input.actions-stops-at-first-failure",
            Core,
            Input,
            POINTER_FIXTURE,
            desktop::actions_stop_at_first_failure
        ),
        case!("browser.version", Core, Browser, CDP, browser::version),
        case!("browser.evaluate", Core, Browser, CDP, browser::evaluate),
        case!("browser.events", Core, Browser, CDP, browser::events),
        case!(
            "browser.refuses-in-words",
            Core,
            Browser,
            CDP,
            browser::refuses_in_words
        ),
        case!(
            "browser.live-view",
            Core,
            Browser,
            &[Need::Group(Group::Cdp), Need::Group(Group::Stream)],
            browser::live_view
        ),
        case!(
            "browser.network-none",
            Core,
            Browser,
            &[Need::Group(Group::Cdp), Need::Network(NetworkKind::None)],
            browser::network_none
        ),
    ]
}

/// What a phone's cases need: the effect is read back through the tree.
const TOUCH_TREE: &[Need] = &[
    Need::Group(Group::InputTouch),
    Need::Group(Group::AppsUiTree),
];
const KEYS_TREE: &[Need] = &[
    Need::Group(Group::InputKeys),
    Need::Group(Group::AppsUiTree),
];

/// A phone's cases: touch, keys and apps, read back through apps.ui_tree.
fn phone_cases() -> Vec<Case> {
    vec![
        case!("touch.tap", Core, Touch, TOUCH_TREE, phone::tap),
        case!("touch.swipe", Core, Touch, TOUCH_TREE, phone::swipe),
        case!(
            "touch.pinch",
            Full,
            Touch,
            &[Need::Group(Group::InputTouch)],
            phone::pinch
        ),
        case!(
            "input.phone-type-text",
            Core,
            Input,
            KEYS_TREE,
            phone::type_text
        ),
        case!(
            "input.phone-key-table-refuses-unknown",
            Core,
            Input,
            KEYS_TREE,
            phone::key_table_refuses_unknown
        ),
        case!(
            "apps.launch-terminate",
            Core,
            Apps,
            &[Need::Group(Group::Apps)],
            phone::launch_terminate
        ),
        case!(
            "apps.ui-tree-shape",
            Core,
            Apps,
            &[Need::Group(Group::AppsUiTree), Need::Group(Group::Screen)],
            phone::ui_tree_shape
        ),
        case!(
            "apps.install-launch",
            Core,
            Apps,
            &[Need::Group(Group::AppsInstall), Need::Group(Group::Apps)],
            phone::install_launch
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_id_is_unique_and_named_by_its_group() {
        let all = cases();
        let mut ids: Vec<&str> = all.iter().map(|c| c.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), all.len());
        for c in &all {
            assert!(
                c.id.starts_with(&format!("{}.", c.group.as_str())),
                "{} is not in its group {}",
                c.id,
                c.group
            );
        }
    }
}
