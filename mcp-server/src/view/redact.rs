//! What the viewer's page is told of a failed input or watch: the
//! daemon's or the provider's words with every URL, login, bearer,
//! secret-named parameter, key or token shape, host or IPv4 endpoint and
//! host path taken out (the seed's redactWords). The page is a person's
//! browser, maybe not the server's operator's: none of those is theirs to
//! read.

/// Parameter names whose values are secrets (matched lowercase, within).
const SECRET_NAMES: [&str; 9] = [
    "token",
    "key",
    "secret",
    "password",
    "passwd",
    "sig",
    "auth",
    "credential",
    "session",
];

/// A run of token characters at least this long is taken for a key.
const TOKEN_LEN: usize = 24;

/// `text` with its secrets, addresses and paths replaced by words in
/// angle brackets (`<url>`, `<secret>`, `<host>`, `<path>`).
pub fn words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut bearer = false;
    let mut rest = text;
    while !rest.is_empty() {
        let space = rest.len() - rest.trim_start().len();
        out.push_str(&rest[..space]);
        rest = &rest[space..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (lead, word, tail) = trimmed(&rest[..end]);
        rest = &rest[end..];
        out.push_str(lead);
        let replaced = if bearer && !word.is_empty() {
            Some("<secret>".to_string())
        } else {
            replace(word)
        };
        bearer = matches!(word.to_ascii_lowercase().as_str(), "bearer" | "basic");
        out.push_str(replaced.as_deref().unwrap_or(word));
        out.push_str(tail);
    }
    out
}

/// A word without the punctuation around it: (lead, word, tail).
fn trimmed(part: &str) -> (&str, &str, &str) {
    let lead_chars = ['(', '[', '{', '"', '\'', '<', '`'];
    let tail_chars = [
        ')', ']', '}', '"', '\'', '>', ',', ';', '.', ':', '!', '?', '`',
    ];
    let start = part.len() - part.trim_start_matches(lead_chars).len();
    let rest = &part[start..];
    let word = rest.trim_end_matches(tail_chars);
    (&part[..start], word, &rest[word.len()..])
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+' | '/' | '=' | '~')
}

/// A host (a name with a dot, or localhost) or an IPv4 address, with a
/// port or not.
fn is_endpoint(w: &str) -> bool {
    let (host, port) = match w.rsplit_once(':') {
        Some((h, p)) if !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) => (h, true),
        _ => (w, false),
    };
    let parts: Vec<&str> = host.split('.').collect();
    let ipv4 = parts.len() == 4
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.chars().all(|c| c.is_ascii_digit()));
    let named = port
        && (host == "localhost"
            || (parts.len() >= 2
                && parts.iter().all(|p| {
                    !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                })));
    ipv4 || named
}

/// What `w` becomes, if it is something to take out.
fn replace(w: &str) -> Option<String> {
    if w.is_empty() {
        return None;
    }
    if w.contains("://") {
        return Some("<url>".into());
    }
    if let Some((name, _)) = w.split_once('=') {
        let lower = name.to_ascii_lowercase();
        let last = lower.rsplit(['?', '&', ';']).next().unwrap_or(&lower);
        if SECRET_NAMES.iter().any(|s| last.contains(s)) {
            return Some(format!("{name}=<secret>"));
        }
    }
    if let Some((login, host)) = w.split_once('@')
        && (login.contains(':') || is_endpoint(host) || host.contains('.'))
    {
        return Some("<login>".into());
    }
    if is_endpoint(w) {
        return Some("<host>".into());
    }
    if (w.starts_with('/') || w.starts_with("~/")) && w[1..].contains('/') {
        return Some("<path>".into());
    }
    let token = w.chars().count() >= TOKEN_LEN
        && w.chars().all(is_token_char)
        && w.chars().any(|c| c.is_ascii_digit())
        && w.chars().any(|c| c.is_ascii_alphabetic());
    token.then(|| "<secret>".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_secrets_endpoints_and_paths_are_taken_out() {
        let cases = [
            (
                "dial wss://connect.example/?signingKey=abc failed",
                "dial <url> failed",
            ),
            (
                "the header Authorization: Bearer sk-live-123 was refused",
                "the header Authorization: Bearer <secret> was refused",
            ),
            ("retry with token=s3cr3t&x=1.", "retry with token=<secret>."),
            (
                "connect to 10.1.2.3:8080 refused (os error 111)",
                "connect to <host> refused (os error 111)",
            ),
            (
                "api.vendor.example:443 did not answer",
                "<host> did not answer",
            ),
            (
                "open /var/lib/computer-mcp/computers/c-1/meta.json: denied",
                "open <path>: denied",
            ),
            ("as admin:hunter2@db.internal", "as <login>"),
            (
                "key 0123456789abcdef0123456789abcdef0123 is wrong",
                "key <secret> is wrong",
            ),
            (
                "ctrl+alt+backspace is not sent: it would end the display",
                "ctrl+alt+backspace is not sent: it would end the display",
            ),
            (
                "the point (1300, 20) is off the 1280x800 screen",
                "the point (1300, 20) is off the 1280x800 screen",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(words(text), want, "{text}");
        }
    }
}
