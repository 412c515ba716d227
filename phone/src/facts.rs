//! What a phone's own tools print, read: `wm size`, `wm density`,
//! `getprop`, `pm list packages`, `dumpsys activity activities`,
//! `cmd package resolve-activity --brief` and `am start -W`. Formats are
//! AOSP's (frameworks/base: WindowManagerShellCommand, PackageManagerShellCommand,
//! ActivityManagerShellCommand); each reader takes what every version since
//! Android 7 prints and says in words what it could not read.

/// A package name as Android takes it: dot-separated Java identifiers.
/// Checked before a name goes into any command line.
pub fn is_package(name: &str) -> bool {
    name.len() <= 255
        && name.contains('.')
        && name.split('.').all(|part| {
            let mut chars = part.chars();
            matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// `wm size`: "Physical size: 1080x2400", and "Override size: …" when one
/// is set, which is what the screen then shows.
pub fn screen_size(out: &str) -> Option<(u32, u32)> {
    let pick = |prefix: &str| {
        out.lines().find_map(|l| {
            let (w, h) = l.trim().strip_prefix(prefix)?.trim().split_once('x')?;
            Some((w.trim().parse().ok()?, h.trim().parse().ok()?))
        })
    };
    pick("Override size:").or_else(|| pick("Physical size:"))
}

/// `wm density`: "Physical density: 420", or its override.
pub fn density(out: &str) -> Option<u32> {
    let pick = |prefix: &str| {
        out.lines()
            .find_map(|l| l.trim().strip_prefix(prefix)?.trim().parse().ok())
    };
    pick("Override density:").or_else(|| pick("Physical density:"))
}

/// `getprop`'s listing: "[ro.product.model]: [Pixel 7]" lines.
pub fn props(out: &str) -> Vec<(String, String)> {
    out.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once("]: [")?;
            Some((
                k.strip_prefix('[')?.to_string(),
                v.strip_suffix(']')?.to_string(),
            ))
        })
        .collect()
}

/// An Android ABI (`ro.product.cpu.abi`) as hello names a CPU.
pub fn arch(abi: &str) -> String {
    match abi {
        "arm64-v8a" => "arm64",
        "armeabi-v7a" | "armeabi" => "arm",
        "x86_64" => "amd64",
        "x86" => "386",
        other => other,
    }
    .to_string()
}

/// `pm list packages`: "package:com.android.settings" lines, sorted.
pub fn packages(out: &str) -> Vec<String> {
    let mut v: Vec<String> = out
        .lines()
        .filter_map(|l| l.trim().strip_prefix("package:"))
        .filter(|p| is_package(p))
        .map(str::to_string)
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The package in front, from `dumpsys activity activities`: the resumed
/// activity's record (`mResumedActivity: ActivityRecord{… u0 pkg/.Act t12}`
/// before Android 10, `topResumedActivity=ActivityRecord{…}` after, and
/// `ResumedActivity:` in between).
pub fn foreground(out: &str) -> Option<String> {
    const KEYS: [&str; 3] = ["topResumedActivity", "mResumedActivity", "ResumedActivity"];
    KEYS.iter().find_map(|key| {
        out.lines().find_map(|l| {
            let rest = l.trim().strip_prefix(key)?;
            let record = rest.split_once("ActivityRecord{")?.1;
            let component = record.split_whitespace().find(|w| w.contains('/'))?;
            let pkg = component.split('/').next()?;
            is_package(pkg).then(|| pkg.to_string())
        })
    })
}

/// `cmd package resolve-activity --brief <pkg>`: its last line is the
/// launcher activity as "pkg/.Activity", or "No activity found".
pub fn launcher_activity(out: &str) -> Option<String> {
    let last = out.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    let (pkg, act) = last.split_once('/')?;
    (is_package(pkg) && !act.is_empty() && !act.contains(char::is_whitespace))
        .then(|| last.to_string())
}

/// What `am start -W` said went wrong, if anything: "Error: …" and
/// "Error type N" lines, or a status other than ok.
pub fn start_error(out: &str) -> Option<String> {
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    if let Some(e) = lines.iter().find(|l| l.starts_with("Error")) {
        return Some(e.to_string());
    }
    match lines.iter().find_map(|l| l.strip_prefix("Status:")) {
        Some(s) if s.trim() != "ok" => Some(format!("Status: {}", s.trim())),
        Some(_) => None,
        None => Some(format!(
            "am start answered {:?}",
            lines.join(" ").chars().take(200).collect::<String>()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names_are_checked_before_they_reach_a_command() {
        for ok in ["com.android.settings", "ai.agentrun.fixture", "a_b.c1"] {
            assert!(is_package(ok), "{ok}");
        }
        for bad in [
            "settings",
            "com.android.settings; rm -rf /",
            "1a.b",
            "a..b",
            "a.b/c",
            "",
        ] {
            assert!(!is_package(bad), "{bad}");
        }
    }

    #[test]
    fn screen_size_and_density_prefer_the_override() {
        assert_eq!(
            screen_size("Physical size: 1080x2400\n"),
            Some((1080, 2400))
        );
        assert_eq!(
            screen_size("Physical size: 1080x2400\nOverride size: 720x1600\n"),
            Some((720, 1600))
        );
        assert_eq!(density("Physical density: 420\r\n"), Some(420));
        assert_eq!(
            density("Physical density: 420\nOverride density: 320\n"),
            Some(320)
        );
        assert_eq!(screen_size("sh: wm: not found"), None);
    }

    #[test]
    fn getprop_lines_read_as_pairs() {
        let p = props("[ro.product.model]: [Pixel 7]\n[ro.build.version.release]: [14]\nnoise\n");
        assert_eq!(p[0], ("ro.product.model".into(), "Pixel 7".into()));
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn the_app_in_front_reads_from_each_versions_dumpsys() {
        let old =
            "  mResumedActivity: ActivityRecord{5e3c1a8 u0 com.android.settings/.Settings t12}\n";
        assert_eq!(foreground(old).as_deref(), Some("com.android.settings"));
        let new = "    topResumedActivity=ActivityRecord{9e1 u0 ai.agentrun.fixture/.MainActivity t31}\n  mResumedActivity: ActivityRecord{1 u0 com.other.app/.A t2}";
        assert_eq!(foreground(new).as_deref(), Some("ai.agentrun.fixture"));
        assert_eq!(foreground("nothing here"), None);
        assert_eq!(
            packages("package:b.c\npackage:a.b\npackage:a.b\njunk\n"),
            ["a.b", "b.c"]
        );
    }

    #[test]
    fn am_start_and_resolve_activity_read_their_outcome() {
        let ok = "Starting: Intent { cmp=com.android.settings/.Settings }\nStatus: ok\nLaunchState: COLD\nActivity: com.android.settings/.Settings\nTotalTime: 812\nWaitTime: 815\nComplete\n";
        assert_eq!(start_error(ok), None);
        let bad = "Starting: Intent { cmp=x.y/.Z }\nError type 3\nError: Activity class {x.y/x.y.Z} does not exist.\n";
        assert_eq!(start_error(bad).as_deref(), Some("Error type 3"));
        assert_eq!(
            launcher_activity("priority=0 preferredOrder=0\ncom.android.settings/.Settings\n")
                .as_deref(),
            Some("com.android.settings/.Settings")
        );
        assert_eq!(launcher_activity("No activity found\n"), None);
    }
}
