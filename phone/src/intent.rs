//! What a phone does that is neither a touch nor an app of its own: open
//! a web address (`am start` of a VIEW intent) and read or set the
//! screen's orientation (the system settings `user_rotation` and
//! `accelerometer_rotation`, as Settings' own rotation lock writes them).

use computerd::protocol::{Orientation, RpcError};

use crate::input::quoted;

/// The longest URL sent (Android's intents carry more, but a model's URL
/// past this is a mistake, and it goes through a shell command line).
pub const MAX_URL_CHARS: usize = 4096;

/// `url` when a phone can open it safely: an absolute http or https URL
/// with a host, at most [`MAX_URL_CHARS`], with no whitespace or control
/// character; otherwise the refusal, naming the field.
pub fn check_url(url: &str) -> Result<url::Url, RpcError> {
    let bad = |why: String| RpcError::invalid_field("url", format!("url {why}; nothing was sent"));
    if url.chars().count() > MAX_URL_CHARS {
        return Err(bad(format!(
            "is {} characters long; at most {MAX_URL_CHARS}",
            url.chars().count()
        )));
    }
    if let Some(c) = url.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad(format!(
            "holds {c:?}; a URL has no spaces or control characters (write a space as %20)"
        )));
    }
    let parsed = url::Url::parse(url).map_err(|e| {
        bad(format!(
            "{url:?} is not a URL ({e}); give one such as https://example.com/page"
        ))
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad(format!(
            "{url:?} is a {}: URL; only http and https URLs are opened",
            parsed.scheme()
        )));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad(format!("{url:?} names no host")));
    }
    Ok(parsed)
}

/// The command that opens a checked URL in the app that takes it (its
/// errors go to stdout, where they are read).
pub fn open_url_command(url: &url::Url) -> String {
    format!(
        "am start -W -a android.intent.action.VIEW -d {} 2>&1",
        quoted(url.as_str())
    )
}

/// Whether `am start`'s output says the intent found no activity.
pub fn open_error(output: &str) -> Option<String> {
    output
        .lines()
        .find(|l| l.starts_with("Error"))
        .map(|l| l.trim_start_matches("Error: ").trim().to_string())
}

/// The command that reads whether the phone turns by its sensor (its
/// first line), then the display's rotation as it is (the touch screen's
/// orientation in `dumpsys input`, which follows the display whatever
/// turned it: the sensor, the user's lock or the app in front).
pub const READ_ROTATION: &str = "settings get system accelerometer_rotation; \
     dumpsys input | grep -E 'SurfaceOrientation|InputDeviceOrientation'";

/// The command that locks the screen in `o`: the sensor's turning off,
/// then the rotation (0 is the phone's natural portrait, 1 a quarter turn).
pub fn set_rotation_command(o: Orientation) -> String {
    let rotation = match o {
        Orientation::Portrait => 0,
        Orientation::Landscape => 1,
    };
    format!(
        "settings put system accelerometer_rotation 0 && settings put system user_rotation {rotation}"
    )
}

/// One `dumpsys input` orientation line's rotation in quarter turns, as
/// each Android prints it (AOSP frameworks/native, inputflinger's
/// `TouchInputMapper`): `SurfaceOrientation: 1` up to Android 12
/// (`dumpSurface`), `InputDeviceOrientation: 1` in 13 and 14
/// (`dumpDisplay`, a number), `InputDeviceOrientation: Rotation90` from 15
/// (`ftl::enum_string` of `ui::Rotation`).
fn quarter_turns(line: &str) -> Option<u8> {
    let (key, value) = line.trim().split_once(':')?;
    if !matches!(key, "SurfaceOrientation" | "InputDeviceOrientation") {
        return None;
    }
    match value.trim() {
        "0" | "Rotation0" => Some(0),
        "1" | "Rotation90" => Some(1),
        "2" | "Rotation180" => Some(2),
        "3" | "Rotation270" => Some(3),
        _ => None,
    }
}

/// [`READ_ROTATION`]'s output as (orientation, turns with the sensor): the
/// first touch screen's rotation (a quarter or three quarters of a turn is
/// landscape), and the sensor setting (never written reads `null`:
/// Android's default, turning).
pub fn rotation(output: &str) -> Result<(Orientation, bool), String> {
    let turns = output.lines().find_map(quarter_turns).ok_or_else(|| {
        format!(
            "dumpsys input names no touch screen orientation (no SurfaceOrientation or InputDeviceOrientation line in {:?})",
            output.chars().take(200).collect::<String>()
        )
    })?;
    let orientation = if turns % 2 == 1 {
        Orientation::Landscape
    } else {
        Orientation::Portrait
    };
    let auto = match output.lines().next().map(str::trim).unwrap_or_default() {
        "0" => false,
        "1" | "null" => true,
        other => {
            return Err(format!(
                "accelerometer_rotation reads {other:?}, not 0 or 1"
            ));
        }
    };
    Ok((orientation, auto))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_and_https_urls_with_a_host_pass() {
        assert!(check_url("https://example.com/a?b=1&c=2").is_ok());
        assert!(check_url("http://10.0.2.2:8080/").is_ok());
        for (bad, says) in [
            ("javascript:alert(1)", "javascript: URL"),
            ("file:///sdcard/x.html", "file: URL"),
            ("intent://scan/#Intent;end", "intent: URL"),
            ("example.com", "is not a URL"),
            ("https://exa mple.com", "no spaces"),
            ("https://example.com/\n", "control"),
        ] {
            let e = check_url(bad).unwrap_err();
            assert!(e.message.contains(says), "{bad}: {}", e.message);
            assert!(e.message.contains("nothing was sent"), "{}", e.message);
            assert_eq!(
                e.data.and_then(|d| d.field).as_deref(),
                Some("url"),
                "{bad}"
            );
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_CHARS));
        assert!(
            check_url(&long)
                .unwrap_err()
                .message
                .contains("at most 4096")
        );
    }

    #[test]
    fn a_url_reaches_am_as_one_quoted_word() {
        let u = check_url("https://example.com/it's?a=1&b=$(reboot);x=`id`").unwrap();
        let cmd = open_url_command(&u);
        let arg = cmd
            .strip_prefix("am start -W -a android.intent.action.VIEW -d '")
            .and_then(|r| r.strip_suffix("' 2>&1"))
            .unwrap_or_else(|| panic!("{cmd}"));
        // Inside the quotes a quote only comes as '\'' (close, an escaped
        // quote, open again): the shell reads the URL as it is.
        assert!(!arg.replace(r"'\''", "").contains('\''), "{cmd}");
        assert_eq!(arg.replace(r"'\''", "'"), u.as_str());
        assert!(u.as_str().contains("$(reboot)"), "{u}");
    }

    #[test]
    fn the_rotation_reads_as_each_android_prints_it() {
        let read = |lines: &str, sensor: &str| rotation(&format!("{sensor}\n{lines}"));
        // Android 12: `dumpSurface`; 13 and 14: `dumpDisplay`, a number;
        // 15: the rotation's name. The first touch screen counts.
        assert_eq!(
            read("      SurfaceOrientation: 0\n", "null"),
            Ok((Orientation::Portrait, true))
        );
        assert_eq!(
            read(
                "      InputDeviceOrientation: 1\n        SurfaceOrientation: 0\n",
                "0"
            ),
            Ok((Orientation::Landscape, false))
        );
        assert_eq!(
            read("      InputDeviceOrientation: Rotation270\n", "1"),
            Ok((Orientation::Landscape, true))
        );
        assert_eq!(
            read("      InputDeviceOrientation: Rotation180\n", "0"),
            Ok((Orientation::Portrait, false))
        );
        let none = read("", "0").unwrap_err();
        assert!(none.contains("no touch screen orientation"), "{none}");
        let odd = read("SurfaceOrientation: 7\n", "0").unwrap_err();
        assert!(odd.contains("no touch screen orientation"), "{odd}");
        let sensor = read("SurfaceOrientation: 1\n", "2").unwrap_err();
        assert!(sensor.contains("accelerometer_rotation"), "{sensor}");
        assert!(set_rotation_command(Orientation::Landscape).ends_with("user_rotation 1"));
    }

    #[test]
    fn am_start_errors_are_found() {
        let out = "Starting: Intent { act=android.intent.action.VIEW dat=https://example.com/... }\nError: Activity not started, unable to resolve Intent { act=android.intent.action.VIEW dat=https://example.com/... flg=0x10000000 }\n";
        assert!(open_error(out).unwrap().starts_with("Activity not started"));
        assert_eq!(open_error("Starting: Intent { }\nStatus: ok\n"), None);
    }

    /// A phone's shell as far as links and turning go: `settings` kept,
    /// `am start` of a VIEW answered, every command recorded.
    #[derive(Default)]
    struct Phone {
        sent: std::sync::Mutex<Vec<String>>,
        rotation: std::sync::Mutex<(String, String)>,
    }

    impl crate::client::Shell for Phone {
        fn run<'a>(
            &'a self,
            command: &'a str,
        ) -> futures::future::BoxFuture<'a, Result<crate::client::Ran, crate::client::ShellError>>
        {
            Box::pin(async move {
                self.sent.lock().unwrap().push(command.to_string());
                let mut rot = self.rotation.lock().unwrap();
                let stdout = match command {
                    "getprop" => String::new(),
                    "wm size" => "Physical size: 200x400\n".into(),
                    // The display turns to the user's rotation once the
                    // sensor is off (as a phone with no app fixing its own).
                    READ_ROTATION => {
                        let turns = if rot.1 == "0" { rot.0.as_str() } else { "0" };
                        format!("{}\n      SurfaceOrientation: {turns}\n", rot.1)
                    }
                    c if c.starts_with("settings put system accelerometer_rotation 0 && settings put system user_rotation ") => {
                        *rot = (c.rsplit(' ').next().unwrap().to_string(), "0".into());
                        String::new()
                    }
                    c if c.contains("nowhere") => "Error: Activity not started, unable to resolve Intent\n".into(),
                    c if c.starts_with("am start") => "Starting: Intent { act=android.intent.action.VIEW }\nStatus: ok\nComplete\n".into(),
                    _ => String::new(),
                };
                Ok(crate::client::Ran { stdout, exit: 0 })
            })
        }

        fn bytes<'a>(
            &'a self,
            _: &'a str,
        ) -> futures::future::BoxFuture<'a, Result<Vec<u8>, crate::client::ShellError>> {
            Box::pin(async { Ok(Vec::new()) })
        }
    }

    async fn client() -> (std::sync::Arc<Phone>, crate::client::PhoneClient) {
        let phone = std::sync::Arc::new(Phone::default());
        *phone.rotation.lock().unwrap() = ("null".into(), "null".into());
        let c = crate::client::PhoneClient::new(phone.clone(), Default::default())
            .await
            .unwrap();
        phone.sent.lock().unwrap().clear();
        (phone, c)
    }

    /// One call to the client: its answer, or its error in words.
    async fn call(
        c: &crate::client::PhoneClient,
        method: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        use computerd::client::ComputerClient;
        c.call_value(method, params)
            .await
            .map_err(|e| e.to_string())
    }

    #[tokio::test]
    async fn a_url_is_opened_by_one_view_intent_and_a_bad_one_sends_nothing() {
        use serde_json::json;
        let (phone, c) = client().await;
        for (bad, says) in [
            ("https://example.com/a b", "no spaces"),
            ("ftp://example.com/", "only http and https"),
        ] {
            let e = call(&c, "apps.open_url", json!({ "url": bad })).await;
            assert!(e.as_ref().is_err_and(|e| e.contains(says)), "{e:?}");
        }
        assert!(phone.sent.lock().unwrap().is_empty());
        let url = json!({"url": "https://example.com/?q=1&r=2"});
        call(&c, "apps.open_url", url).await.unwrap();
        assert_eq!(
            phone.sent.lock().unwrap().as_slice(),
            ["am start -W -a android.intent.action.VIEW -d 'https://example.com/?q=1&r=2' 2>&1"]
        );
        let url = json!({"url": "https://nowhere.example/"});
        let e = call(&c, "apps.open_url", url).await.unwrap_err();
        assert!(
            e.contains("did not open https://nowhere.example/: Activity not started"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn orientation_reads_android_defaults_and_a_set_locks_and_reads_back() {
        use serde_json::json;
        let (phone, c) = client().await;
        for (params, answer) in [
            (
                json!({}),
                json!({"orientation": "portrait", "autoRotate": true}),
            ),
            (
                json!({"set": "landscape"}),
                json!({"orientation": "landscape", "autoRotate": false}),
            ),
        ] {
            assert_eq!(call(&c, "screen.orientation", params).await, Ok(answer));
        }
        assert_eq!(
            phone.sent.lock().unwrap()[1],
            "settings put system accelerometer_rotation 0 && settings put system user_rotation 1"
        );
        let bad = call(&c, "screen.orientation", json!({"set": "upside_down"})).await;
        assert!(
            bad.as_ref().is_err_and(|e| e.contains("portrait")),
            "{bad:?}"
        );
    }
}
