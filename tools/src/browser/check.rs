//! What the page tools check before anything is sent: the address a model
//! gives `browser_navigate`, the refs it gives the acting tools, and the
//! sizes of what it hands the page.

use crate::error::{Result, ToolError};

/// The longest address taken (Chromium's own cap is 2 MiB; a model's
/// address past this is a mistake, not a page).
pub const MAX_URL_BYTES: usize = 8 * 1024;

/// `browser_eval`'s expression at most.
pub const MAX_EXPRESSION_BYTES: usize = 64 * 1024;

/// `browser_type`'s text at most.
pub const MAX_TYPE_BYTES: usize = 64 * 1024;

/// The address as it will be opened: `http:`/`https:` (a bare host gets
/// `https://`, as Anthropic's browser tool reads one) or `about:blank`.
/// Every other scheme is refused naming the field, before anything is sent.
pub fn url(field: &str, raw: &str) -> Result<String> {
    if raw.is_empty() {
        return Err(ToolError::Invalid(format!(
            "{field} is empty; give an http:// or https:// address (or about:blank)"
        )));
    }
    if raw.len() > MAX_URL_BYTES {
        return Err(ToolError::Invalid(format!(
            "{field} is {} bytes; an address is at most {MAX_URL_BYTES} bytes; nothing was sent",
            raw.len()
        )));
    }
    // A browser drops these before it reads the scheme: " file:" would
    // otherwise pass as a bare host.
    if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ToolError::Invalid(format!(
            "{field} holds a space or a control character; give the address alone (spaces as %20); nothing was sent"
        )));
    }
    if raw.eq_ignore_ascii_case("about:blank") {
        return Ok("about:blank".into());
    }
    let scheme = scheme_of(raw);
    let full = match scheme {
        Some(s) if s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https") => {
            raw.to_string()
        }
        Some(s) if !looks_like_host_port(raw) => {
            return Err(ToolError::Invalid(format!(
                "{field} has the scheme {}:, which the page tools do not open; only http://, https:// and about:blank are opened (file:, chrome:, javascript:, data: and others are refused); nothing was sent",
                s.to_ascii_lowercase()
            )));
        }
        _ => format!("https://{raw}"),
    };
    let rest = full.split_once("://").map(|(_, r)| r).unwrap_or("");
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit_once('@').map(|(_, h)| h).unwrap_or(host);
    if host.is_empty() || host.contains('\\') {
        return Err(ToolError::Invalid(format!(
            "{field} {raw:?} names no host; give an address like https://example.com/page; nothing was sent"
        )));
    }
    Ok(full)
}

/// The scheme, when the address starts with one (`letters:`).
fn scheme_of(raw: &str) -> Option<&str> {
    let (s, _) = raw.split_once(':')?;
    let mut b = s.bytes();
    let first = b.next()?;
    (first.is_ascii_alphabetic() && b.all(|c| c.is_ascii_alphanumeric() || b"+-.".contains(&c)))
        .then_some(s)
}

/// `localhost:8080/x` is a host and a port, not the scheme `localhost:`.
fn looks_like_host_port(raw: &str) -> bool {
    let Some((_, after)) = raw.split_once(':') else {
        return false;
    };
    let port: String = after.chars().take_while(|c| c.is_ascii_digit()).collect();
    !port.is_empty()
        && port.len() <= 5
        && after[port.len()..]
            .chars()
            .next()
            .is_none_or(|c| matches!(c, '/' | '?' | '#'))
}

/// A ref's number from what a model sends: `e12`, `[ref=e12]`, `ref=e12`,
/// `@e12`.
pub fn ref_number(field: &str, raw: &str) -> Result<u64> {
    let t = raw.trim();
    let t = t.strip_prefix('[').unwrap_or(t);
    let t = t.strip_suffix(']').unwrap_or(t);
    let t = t.strip_prefix("ref=").unwrap_or(t);
    let t = t.strip_prefix('@').unwrap_or(t);
    let digits = t.strip_prefix('e').unwrap_or("");
    match digits.parse::<u64>() {
        Ok(n) if n > 0 && digits.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err(ToolError::Invalid(format!(
            "{field} {raw:?} is not a ref; a ref is e and a number, as browser_snapshot shows it ([ref=e12] is e12)"
        ))),
    }
}

/// A field that also comes as `text` (the name Anthropic's browser tool
/// gives it): the one given, with the name it was given under. Both given
/// is refused, `nothing` saying what was not done; neither, with `missing`.
pub fn field_or_text(
    field: &'static str,
    value: Option<String>,
    text: Option<String>,
    nothing: &str,
    missing: &str,
) -> Result<(&'static str, String)> {
    match (value, text) {
        (Some(v), None) => Ok((field, v)),
        (None, Some(t)) => Ok(("text", t)),
        (Some(_), Some(_)) => Err(ToolError::Invalid(format!(
            "give {field} or text, not both; {nothing}"
        ))),
        (None, None) => Err(ToolError::Invalid(missing.to_string())),
    }
}

/// A text the model hands the page, held to its bound.
pub fn bounded(field: &str, text: &str, max: usize) -> Result<()> {
    if text.len() > max {
        return Err(ToolError::Invalid(format!(
            "{field} is {} bytes; at most {} KiB ({max} bytes) are taken; nothing was sent",
            text.len(),
            max / 1024
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_web_addresses_and_about_blank_are_opened() {
        for (given, opened) in [
            ("http://127.0.0.1:8/x", "http://127.0.0.1:8/x"),
            ("HTTPS://a.example", "HTTPS://a.example"),
            ("example.com/docs", "https://example.com/docs"),
            ("localhost:3000/a", "https://localhost:3000/a"),
            ("about:blank", "about:blank"),
        ] {
            assert_eq!(url("url", given).unwrap(), opened, "{given}");
        }
        for bad in [
            "file:///etc/passwd",
            "chrome://settings",
            "javascript:alert(1)",
            "data:text/html,hi",
            "view-source:http://x",
            "about:config",
        ] {
            let e = url("url", bad).unwrap_err().to_string();
            assert!(e.starts_with("url has the scheme "), "{bad}: {e}");
            assert!(e.ends_with("nothing was sent"), "{e}");
        }
        assert_eq!(
            url("url", "file:///etc/passwd").unwrap_err().to_string(),
            "url has the scheme file:, which the page tools do not open; only http://, https:// and about:blank are opened (file:, chrome:, javascript:, data: and others are refused); nothing was sent"
        );
        assert!(
            url("url", " file:///x")
                .unwrap_err()
                .to_string()
                .contains("space")
        );
        assert!(url("url", "").unwrap_err().to_string().contains("empty"));
        assert!(
            url("url", "http://")
                .unwrap_err()
                .to_string()
                .contains("no host")
        );
        let long = format!("http://a/{}", "x".repeat(MAX_URL_BYTES));
        assert!(
            url("url", &long)
                .unwrap_err()
                .to_string()
                .contains("8192 bytes")
        );
    }

    #[test]
    fn a_ref_is_read_as_the_snapshot_shows_it() {
        for s in ["e12", "[ref=e12]", "ref=e12", "@e12", " e12 "] {
            assert_eq!(ref_number("ref", s).unwrap(), 12, "{s}");
        }
        for s in ["12", "e", "e0", "e-1", "ref_7", "button", "e1x"] {
            let e = ref_number("ref", s).unwrap_err().to_string();
            assert!(e.starts_with(&format!("ref {s:?} is not a ref")), "{e}");
        }
    }

    #[test]
    fn a_text_past_its_bound_names_the_field_and_the_limit() {
        assert!(bounded("expression", "1+1", MAX_EXPRESSION_BYTES).is_ok());
        let big = "x".repeat(MAX_EXPRESSION_BYTES + 1);
        assert_eq!(
            bounded("expression", &big, MAX_EXPRESSION_BYTES)
                .unwrap_err()
                .to_string(),
            "expression is 65537 bytes; at most 64 KiB (65536 bytes) are taken; nothing was sent"
        );
    }
}
