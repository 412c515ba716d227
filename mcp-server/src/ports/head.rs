//! The first request on a preview connection: read, checked for the port's
//! token, and rewritten before it goes to the computer (the token out of
//! the target and the cookies, `Connection: close` unless it upgrades).

use subtle::ConstantTimeEq;

/// The query parameter a preview URL carries its token in.
pub const TOKEN_PARAM: &str = "preview_token";

/// The most bytes of a request head (its line and headers).
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// The cookie a browser keeps a port's token in: named by the listener's
/// own port, since a browser sends every 127.0.0.1 cookie to every port.
pub fn cookie_name(listen_port: u16) -> String {
    format!("{TOKEN_PARAM}_{listen_port}")
}

/// What the first request's head says about the caller.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The token is right: forward `head` (rewritten) and splice. With
    /// `set_cookie`, a browser's page load: answer with a redirect to
    /// `location` that sets the cookie instead of forwarding.
    Pass {
        head: Vec<u8>,
        redirect: Option<String>,
    },
    /// Refused: the HTTP status and the words of why.
    Refuse(u16, String),
}

/// The end of a head (`\r\n\r\n`) in `buf`: the index past it.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Check `head` (the bytes up to and with its blank line) for `token`.
pub fn check(head: &[u8], token: &str, listen_port: u16) -> Verdict {
    let Ok(text) = std::str::from_utf8(head) else {
        return Verdict::Refuse(400, "the request's head is not text".into());
    };
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Verdict::Refuse(
            400,
            "this address speaks HTTP: the first line was not a request line".into(),
        );
    };
    let headers: Vec<(&str, &str)> = lines
        .filter(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let value = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    };
    let cookie = cookie_name(listen_port);
    let (target, from_query) = strip_token(target);
    let from_cookie = headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("cookie"))
        .flat_map(|(_, v)| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == cookie)
        .map(|(_, v)| v.to_string());
    let given = from_query.clone().or(from_cookie);
    match given {
        None => {
            return Verdict::Refuse(
                403,
                format!(
                    "this preview address needs its token: open the whole URL port_open gave (with ?{TOKEN_PARAM}=…)"
                ),
            );
        }
        Some(t) if !bool::from(t.as_bytes().ct_eq(token.as_bytes())) => {
            return Verdict::Refuse(
                403,
                "wrong token for this preview port: open the whole URL port_open gave (port_list shows it)".into(),
            );
        }
        Some(_) => {}
    }
    let upgrade = has("upgrade");
    // A browser's page load with the token in its address: redirected to
    // the address without it, the token kept in a cookie, so the page's
    // own requests (which carry no token) pass too.
    let page_load = from_query.is_some()
        && method == "GET"
        && !upgrade
        && value("accept").is_some_and(|a| a.contains("text/html"));
    if page_load {
        return Verdict::Pass {
            head: Vec::new(),
            redirect: Some(target),
        };
    }
    let mut out = format!("{method} {target} {version}\r\n");
    for (k, v) in &headers {
        if k.eq_ignore_ascii_case("cookie") {
            // Every preview's cookie stays here: a computer never sees a
            // token (its own or another preview's the browser also holds).
            let kept: Vec<&str> = v
                .split(';')
                .map(str::trim)
                .filter(|c| !c.starts_with(&format!("{TOKEN_PARAM}_")))
                .collect();
            if !kept.is_empty() {
                out.push_str(&format!("Cookie: {}\r\n", kept.join("; ")));
            }
            continue;
        }
        // Unless it upgrades, the connection carries this one request, so
        // every request is checked for the token.
        let hop = ["connection", "keep-alive", "proxy-connection"];
        if !upgrade && hop.iter().any(|h| k.eq_ignore_ascii_case(h)) {
            continue;
        }
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    if !upgrade {
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
    Verdict::Pass {
        head: out.into_bytes(),
        redirect: None,
    }
}

/// The target without the token parameter, and the token if it had one.
fn strip_token(target: &str) -> (String, Option<String>) {
    let Some((path, query)) = target.split_once('?') else {
        return (target.to_string(), None);
    };
    let mut token = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.split_once('=') {
            Some((k, v)) if k == TOKEN_PARAM => {
                token = Some(v.to_string());
                false
            }
            _ => true,
        })
        .collect();
    if kept.is_empty() {
        (path.to_string(), token)
    } else {
        (format!("{path}?{}", kept.join("&")), token)
    }
}

/// An answer of the listener's own: `status`, and `body` as plain text.
pub fn answer(status: u16, body: &str, extra: &[String]) -> Vec<u8> {
    let reason = match status {
        303 => "See Other",
        400 => "Bad Request",
        403 => "Forbidden",
        502 => "Bad Gateway",
        _ => "Error",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len() + 1
    );
    for h in extra {
        out.push_str(h);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out.push_str(body);
    out.push('\n');
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "0123abcd";

    fn pass(head: &str) -> String {
        match check(head.as_bytes(), T, 4000) {
            Verdict::Pass {
                head,
                redirect: None,
            } => String::from_utf8(head).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_token_is_taken_out_of_the_target_and_the_connection_closes_after_one_request() {
        assert_eq!(
            pass(
                "GET /a?x=1&preview_token=0123abcd&y=2 HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n"
            ),
            "GET /a?x=1&y=2 HTTP/1.1\r\nHost: h\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn a_websocket_upgrade_keeps_its_connection_headers_and_loses_the_preview_cookies() {
        assert_eq!(
            pass(
                "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nCookie: a=1; preview_token_4000=0123abcd; preview_token_5000=zz\r\n\r\n"
            ),
            "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nCookie: a=1\r\n\r\n"
        );
    }

    #[test]
    fn a_page_load_with_the_token_is_redirected_to_keep_it_in_a_cookie() {
        let v = check(
            b"GET /app?preview_token=0123abcd HTTP/1.1\r\nAccept: text/html,*/*\r\n\r\n",
            T,
            4000,
        );
        assert_eq!(
            v,
            Verdict::Pass {
                head: Vec::new(),
                redirect: Some("/app".into())
            }
        );
    }

    #[test]
    fn a_wrong_or_missing_token_is_refused_in_words() {
        for (head, words) in [
            ("GET /?preview_token=nope HTTP/1.1\r\n\r\n", "wrong token"),
            (
                "GET / HTTP/1.1\r\nCookie: preview_token_4000=nope\r\n\r\n",
                "wrong token",
            ),
            // Another port's cookie is not this one's.
            (
                "GET / HTTP/1.1\r\nCookie: preview_token_5000=0123abcd\r\n\r\n",
                "needs its token",
            ),
            ("GET / HTTP/1.1\r\n\r\n", "needs its token"),
        ] {
            match check(head.as_bytes(), T, 4000) {
                Verdict::Refuse(403, why) => assert!(why.contains(words), "{head}: {why}"),
                other => panic!("{head}: {other:?}"),
            }
        }
        assert!(matches!(
            check(b"\x16\x03\x01 hello\r\n\r\n", T, 4000),
            Verdict::Refuse(400, _)
        ));
    }
}
